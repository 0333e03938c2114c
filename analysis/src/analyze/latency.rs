//! Release → WINDOW_UPDATE matching: each `release` waits in a FIFO until
//! the increments of later updates have carried all of its bytes.

use crate::stats::Histo;
use std::collections::VecDeque;

/// Releases waiting for the WINDOW_UPDATE that carries them.
#[derive(Default)]
pub(super) struct Pending {
    /// (release time, bytes not yet carried, whether its latency counts).
    fifo: VecDeque<(u64, u64, bool)>,
}

impl Pending {
    /// A release of `bytes` at `t`. An untimed one (the end-of-RPC bulk
    /// release) still takes its place in the FIFO, so later updates match
    /// the right releases, but its latency is not recorded.
    pub(super) fn push(&mut self, t: u64, bytes: u64, timed: bool) {
        self.fifo.push_back((t, bytes, timed));
    }
    pub(super) fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// Consumes `inc` bytes; returns latencies of releases fully carried and
    /// bytes of the increment that matched no release.
    pub(super) fn consume(&mut self, t: u64, mut inc: u64, lat: &mut Histo) -> u64 {
        while inc > 0 {
            let Some(front) = self.fifo.front_mut() else {
                break;
            };
            if front.1 <= inc {
                inc -= front.1;
                if front.2 {
                    lat.record(t.saturating_sub(front.0));
                }
                self.fifo.pop_front();
            } else {
                front.1 -= inc;
                inc = 0;
            }
        }
        inc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An increment carries releases in order, a release split across two
    /// updates counts its latency at the second; an untimed release takes
    /// its bytes and records nothing; what no release waits for is
    /// returned.
    #[test]
    fn updates_carry_releases_in_order_and_return_the_rest() {
        let mut p = Pending::default();
        let mut lat = Histo::new(1.0);
        assert!(p.is_empty());
        p.push(10, 100, true);
        p.push(20, 50, false);
        p.push(30, 70, true);
        assert!(!p.is_empty());
        // The first whole, 20 of the second.
        assert_eq!(p.consume(40, 120, &mut lat), 0);
        assert_eq!((lat.len(), lat.summary().max), (1, 30.0));
        // The second's last 30, the third, and 100 unmatched.
        assert_eq!(p.consume(50, 200, &mut lat), 100);
        let d = lat.summary();
        assert_eq!((d.count, d.min, d.max), (2, 20.0, 30.0));
        assert!(p.is_empty());
        assert_eq!(p.consume(60, 5, &mut lat), 5);
        // A release carried exactly, then one carried in two parts.
        p.push(70, 8, true);
        p.push(71, 8, true);
        assert_eq!(p.consume(80, 8, &mut lat), 0);
        assert_eq!(p.consume(90, 3, &mut lat), 0);
        assert_eq!(lat.len(), 3);
        assert_eq!(p.consume(95, 5, &mut lat), 0);
        assert_eq!((lat.len(), lat.summary().max), (4, 30.0));
        assert!(p.is_empty());
    }
}
