//! Many streams, one connection window: bytes and messages per stream, how
//! fairly the streams shared the transport (Jain's index), which stream was
//! starved, and any stall the run recorded.

use super::summary::StreamFigures;
use super::Analyzer;
use crate::schema::Endpoint;

/// Jain's fairness index of `x`: (Σx)² / (n·Σx²), 1 when all are equal,
/// 1/n when one stream got everything; `None` for fewer than two values or
/// all zero.
pub fn jain(x: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

/// A stream that got less than this share of its fair share (total ÷
/// streams) while the others progressed is named as starved.
pub const STARVED_BELOW: f64 = 0.10;

impl Analyzer {
    /// Per-stream figures from the server's tap (client→server DATA) and
    /// the server's decode events, sorted by (connection, stream).
    pub(super) fn stream_figures(&self) -> Vec<StreamFigures> {
        let mut out: Vec<StreamFigures> = self
            .conns
            .iter()
            .filter(|((ep, _), _)| *ep == Endpoint::Server)
            .flat_map(|((_, conn), c)| {
                c.data_c2s
                    .iter()
                    .map(move |(&stream, &bytes)| StreamFigures {
                        conn: *conn,
                        stream,
                        bytes,
                        messages: 0,
                        fair_share: 0.0,
                    })
            })
            .collect();
        for f in &mut out {
            f.messages = self.rpcs.get(&(f.conn, f.stream)).map_or(0, |r| r.decoded);
        }
        out.sort_by_key(|f| (f.conn, f.stream));
        let total: u64 = out.iter().map(|f| f.bytes).sum();
        let n = out.len() as f64;
        for f in &mut out {
            f.fair_share = if total > 0 {
                f.bytes as f64 * n / total as f64
            } else {
                0.0
            };
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::jain;

    #[test]
    fn jain_index_against_hand_computed_values() {
        assert_eq!(jain(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        // One of four streams got everything: 1/4.
        assert_eq!(jain(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        // (1+2+3)² / (3 · (1+4+9)) = 36 / 42.
        assert!((jain(&[1.0, 2.0, 3.0]).unwrap() - 36.0 / 42.0).abs() < 1e-12);
        // Three equal, one starved: 9² / (4 · 27) = 0.75.
        assert_eq!(jain(&[3.0, 3.0, 3.0, 0.0]), Some(0.75));
        assert_eq!(jain(&[7.0]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
    }
}
