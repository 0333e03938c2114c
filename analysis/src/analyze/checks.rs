//! The invariant checks: each says true, false (a violation, with the first
//! offender) or null (the trace cannot tell, and why).

use super::summary::{Check, Summary};
use super::wire_view::Flow;
use super::Analyzer;
use crate::schema::Endpoint;
use std::collections::BTreeMap;

impl Analyzer {
    /// Pairs each client connection with the server connection on the same
    /// socket (addresses swapped): (client conn id, server conn id).
    fn pairs(&self) -> Vec<(u32, u32)> {
        let mut out = vec![];
        for ((ep, cid), c) in &self.conns {
            if *ep != Endpoint::Client || c.local.is_empty() {
                continue;
            }
            for ((ep2, sid), s) in &self.conns {
                if *ep2 == Endpoint::Server && s.local == c.peer && s.peer == c.local {
                    out.push((*cid, *sid));
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// Whether the server ended this RPC with OK. A stream cut short (reset,
    /// deadline, shutdown) may legitimately lose the bytes in flight.
    fn ended_ok(&self, server_conn: u32, stream: u32) -> bool {
        self.server_status.get(&(server_conn, stream)) == Some(&0)
    }

    pub(super) fn byte_check(&self, both: bool) -> Check {
        if !both {
            return Check::na("needs client and server events in one trace");
        }
        let (mut streams, mut cut) = (0, 0);
        let mut bad = vec![];
        for (cid, sid) in self.pairs() {
            let (c, s) = (
                &self.conns[&(Endpoint::Client, cid)],
                &self.conns[&(Endpoint::Server, sid)],
            );
            for (id, out) in &c.data_c2s {
                streams += 1;
                let inn = s.data_c2s.get(id).copied().unwrap_or(0);
                let app = self.rpcs.get(&(sid, *id)).map_or(0, |r| r.chunks);
                let holds = if self.ended_ok(sid, *id) {
                    *out == inn && inn == app
                } else {
                    // Cut short: bytes may be lost in flight or in h2's
                    // buffers, never created.
                    cut += 1;
                    *out >= inn && inn >= app
                };
                if !holds {
                    bad.push(format!(
                        "stream {id}: client out {out}, server in {inn}, app {app}"
                    ));
                }
            }
        }
        if streams == 0 {
            return Check::na("no paired streams carried DATA");
        }
        Check::new(
            bad.is_empty(),
            if bad.is_empty() {
                let mut d = format!(
                    "{streams} streams: client tap out = server tap in = bytes handed to the app"
                );
                if cut > 0 {
                    d.push_str(&format!(
                        " ({cut} cut short by a reset, deadline or shutdown: out ≥ in ≥ app there)"
                    ));
                }
                d
            } else {
                bad.join("; ")
            },
        )
    }

    pub(super) fn agreement_check(&self, both: bool) -> Check {
        if !both {
            return Check::na("needs both taps in one trace");
        }
        let mut bad = vec![];
        let (mut compared, mut cut) = (0, 0);
        for (cid, sid) in self.pairs() {
            // Frames in flight when a connection is cut are seen by one tap
            // only: compare connections whose RPCs all ended OK.
            let all_ok = self
                .server_status
                .iter()
                .filter(|((c, _), _)| *c == sid)
                .all(|(_, st)| *st == 0);
            if !all_ok {
                cut += 1;
                continue;
            }
            compared += 1;
            let (c, s) = (
                &self.conns[&(Endpoint::Client, cid)],
                &self.conns[&(Endpoint::Server, sid)],
            );
            for f in [Flow::C2s, Flow::S2c] {
                let (a, b) = (&c.flows[f as usize], &s.flows[f as usize]);
                if a.conn() != b.conn() {
                    bad.push(format!(
                        "{f:?} connection window: client {} vs server {}",
                        a.conn(),
                        b.conn()
                    ));
                }
                for (id, w) in a.streams() {
                    if b.stream(id) != w {
                        bad.push(format!(
                            "{f:?} stream {id}: client {w} vs server {}",
                            b.stream(id)
                        ));
                    }
                }
            }
        }
        if compared == 0 {
            return Check::na(if cut > 0 {
                format!("{cut} connections cut short (reset, deadline or shutdown): frames in flight seen by one tap only")
            } else {
                "no connection seen by both taps".to_string()
            });
        }
        Check::new(
            bad.is_empty(),
            if bad.is_empty() {
                let mut d = format!("{compared} connections: final windows equal from both taps");
                if cut > 0 {
                    d.push_str(&format!(" ({cut} cut short, not compared)"));
                }
                d
            } else {
                bad.join("; ")
            },
        )
    }
}

/// Every check of a finished pass, by name. `credit` and `windows` are the
/// violation counts with the first offender's description.
pub(super) fn invariant_checks(
    s: &Summary,
    (has_client, has_server): (bool, bool),
    dropped: u64,
    credit: (u64, &str),
    windows: (u64, &str),
    bytes_check: Check,
    agree_check: Check,
) -> BTreeMap<String, Check> {
    let both = has_client && has_server;
    let (credit_violations, credit_detail) = credit;
    let (violations, first_violation) = windows;
    let mut checks = BTreeMap::new();
    checks.insert(
        "accounting".into(),
        if both {
            let all_ok = s.rpc_status.keys().all(|k| k == "OK");
            let client = s.scheduled == s.sent + s.never_sent;
            let server = s.decoded == s.completed + s.discarded;
            let lost_explained = s.lost_in_flight >= 0 && (s.lost_in_flight == 0 || !all_ok);
            Check::new(
                client && server && lost_explained && s.unaccounted == s.lost_in_flight,
                format!(
                    "scheduled {} = completed {} + discarded {} + never_sent {} + lost in flight at a reset {}; \
                     client: scheduled = sent {} + never_sent; server: decoded {} = completed + discarded",
                    s.scheduled, s.completed, s.discarded, s.never_sent, s.lost_in_flight, s.sent, s.decoded
                ),
            )
        } else {
            Check::na("needs client and server events in one trace")
        },
    );
    checks.insert("bytes".into(), bytes_check);
    checks.insert(
        "credit".into(),
        if has_server {
            Check::new(
                credit_violations == 0,
                if credit_violations == 0 {
                    format!(
                        "unreleased bytes peaked at {}, within the advertised window",
                        s.max_unreleased_bytes
                    )
                } else {
                    format!("{} violations; first: {}", credit_violations, credit_detail)
                },
            )
        } else {
            Check::na("no server events")
        },
    );
    checks.insert(
        "windows_non_negative".into(),
        Check::new(
            violations == 0 && s.min_window >= 0,
            if violations == 0 {
                format!("lowest reconstructed window {}", s.min_window)
            } else {
                format!("{violations} violations; first: {first_violation}")
            },
        ),
    );
    checks.insert("windows_agree".into(), agree_check);
    checks.insert(
        "no_dropped_events".into(),
        Check::new(
            dropped == 0,
            format!("{dropped} events dropped by the recorder"),
        ),
    );
    checks
}
