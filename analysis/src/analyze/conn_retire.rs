//! Memory that follows the open connections, not the trace: once a
//! connection closed on every tap the trace pairs it with, nothing of its
//! streams is left to judge (every stream retired, see `retire`) and
//! [`super::retire::grace`] has passed, its figures are folded into
//! [`ConnTally`] and its state leaves every per-connection map. A trace of
//! many short connections (h2load's, a service's churn) is then analysed
//! in memory that follows the connections open at once.
//!
//! Nothing arrives on a connection after its tap recorded the close, so
//! what is folded is what `finish` would have read. An event that still
//! names one (a damaged or edited trace) is counted and warned about
//! (`events_after_conn_retirement`); a frame of it is left out of every
//! window.

use super::books::Books;
use super::summary::Unpaired;
use super::wire_view::{Conn, Flow, RetiredIds};
use super::Analyzer;
use crate::schema::Endpoint;
use crate::windows::Violation;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A connection not done when due (its last stream retires later: an RPC
/// the server ended after the close) is looked at again every
/// [`super::retire::RETIRE_AFTER_NS`] for this many looks, so it is
/// folded in within a second of its last stream (doubling the wait held
/// h2load's connections up to 7 s past their close); then the wait
/// doubles up to [`MAX_RECHECK_NS`], so a connection waiting on a stream
/// that never retires (an RPC without its end, a stream refused before
/// its RPC began) costs little until the end, where `finish` judges it as
/// before.
const STEADY_LOOKS: u32 = 16;

/// The longest wait between two looks.
const MAX_RECHECK_NS: u64 = 64_000_000_000;

/// Doublings of the wait at most (2^6 s = [`MAX_RECHECK_NS`]): a wider
/// shift would overflow the wait to 0.
const MAX_DOUBLINGS: u32 = 6;

/// What retired connections came to, for `finish`.
#[derive(Default)]
pub(super) struct ConnTally {
    /// The lowest client send window (connection or stream, c2s).
    pub min_send_window: Option<i64>,
    /// The lowest window either way on any tap.
    pub min_window: Option<i64>,
    pub violations: u64,
    pub past_lowered: u64,
    /// The earliest violation ([`Violation::before`]).
    pub first_violation: Option<Violation>,
    pub agree: AgreeDone,
}

/// `windows_agree` over retired connection pairs.
#[derive(Default)]
pub(super) struct AgreeDone {
    pub compared: u64,
    pub cut: u64,
    /// The first mismatches by (client connection, place in its pair's
    /// list), at most [`super::retire::MAX_DETAILS`]: the detail names the
    /// same ones, in the same order, as if every pair were kept to the end.
    pub bad: BadList,
    pub bad_count: u64,
}

/// Mismatches keyed by (client connection, place in its pair's list),
/// keeping the first [`super::retire::MAX_DETAILS`].
#[derive(Default, Clone)]
pub(super) struct BadList(std::collections::BTreeMap<(u32, u32), String>);

impl BadList {
    pub(super) fn add(&mut self, cid: u32, list: Vec<String>) {
        for (k, text) in (0u32..).zip(list) {
            self.0.insert((cid, k), text);
            if self.0.len() > super::retire::MAX_DETAILS {
                self.0.pop_last();
            }
        }
    }
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub(super) fn into_vec(self) -> Vec<String> {
        self.0.into_values().collect()
    }
}

impl ConnTally {
    fn add_windows(&mut self, ep: Endpoint, c: &Conn) {
        if ep == Endpoint::Client {
            let w = &c.flows[Flow::C2s as usize];
            let low = w.min_conn().min(w.min_stream());
            self.min_send_window = Some(self.min_send_window.map_or(low, |m| m.min(low)));
        }
        for w in &c.flows {
            let low = w.min_conn().min(w.min_stream());
            self.min_window = Some(self.min_window.map_or(low, |m| m.min(low)));
            self.violations += w.violation_count();
            self.past_lowered += w.past_lowered();
            if let Some(v) = w.violations().first() {
                let earlier = self.first_violation.as_ref().is_none_or(|f| v.before(f));
                if earlier {
                    self.first_violation = Some(v.clone());
                }
            }
        }
    }
}

/// Connections whose tap recorded their close, to look at when due.
#[derive(Default)]
pub(super) struct Closing {
    /// (due, endpoint is the server's, conn, looks so far), soonest first.
    queue: BinaryHeap<Reverse<(u64, bool, u32, u32)>>,
    /// Connection ids retired, per tap (client, server).
    pub retired: [RetiredIds<2>; 2],
}

fn tap(ep: Endpoint) -> usize {
    usize::from(ep == Endpoint::Server)
}

fn ep_of(server: bool) -> Endpoint {
    if server {
        Endpoint::Server
    } else {
        Endpoint::Client
    }
}

/// A connection leaving the analysis (retired, or open at the end): counts
/// it in `u` if no tap pairs with it, its tap named its addresses (without
/// them nothing pairs: a trace from before they were recorded) and a
/// message crossed it (sent by a client, decoded by a server: a refused
/// connection's never-sent messages weigh the same on both sides of the
/// equation). Returns the client RPCs on it that may excuse messages lost
/// in flight: its not-OK ones, if it is in the equation and sent any.
///
/// A client connection's books close here too (see `books`): a connection
/// its stream 0's late events opened again (no addresses: its tap had
/// closed it) counts where the connection did when it left, in `u` if
/// it was unpaired (it was counted as paired, and the messages it handed
/// over late weighed on the paired side).
pub(super) fn count_unpaired(
    u: &mut Unpaired,
    books: &mut Books,
    ep: Endpoint,
    id: u32,
    c: &Conn,
    paired: bool,
) -> u64 {
    let client = ep == Endpoint::Client;
    let crossed = if client { c.messages[1] } else { c.messages[0] };
    let reopened = client && c.local.is_empty() && books.left_unpaired(id);
    let unpaired = reopened || (!paired && !c.local.is_empty() && crossed > 0);
    if client {
        books.close(id, c.messages, unpaired);
    }
    if reopened {
        u.add_messages(client, c.messages);
        return 0;
    }
    if unpaired {
        u.add(client, id, &c.peer, c.messages);
        return 0;
    }
    if client && crossed > 0 {
        c.not_ok
    } else {
        0
    }
}

impl Closing {
    /// A tap recorded the close of `conn` at `t`.
    pub(super) fn closed(&mut self, t: u64, ep: Endpoint, conn: u32) {
        let due = t.saturating_add(super::retire::RETIRE_AFTER_NS);
        self.queue
            .push(Reverse((due, ep == Endpoint::Server, conn, 0)));
    }

    /// Whether `conn` on `ep`'s tap was retired.
    pub(super) fn is_retired(&self, ep: Endpoint, conn: u32) -> bool {
        matches!(ep, Endpoint::Client | Endpoint::Server) && self.retired[tap(ep)].contains(conn)
    }
}

impl Analyzer {
    /// Retires the connections due by `now` that are done (see
    /// [`Self::conn_ready`]); the others are looked at again later.
    pub(super) fn retire_conns_due(&mut self, now: u64) {
        while let Some(&Reverse((due, server, conn, looks))) = self.closing.queue.peek() {
            if due > now {
                break;
            }
            self.closing.queue.pop();
            let ep = ep_of(server);
            if self.closing.is_retired(ep, conn) {
                continue; // with its partner
            }
            let (cid, sid) = match ep {
                Endpoint::Client => (Some(conn), self.retirement.server_of(conn)),
                _ => (self.retirement.client_of(conn), Some(conn)),
            };
            let ids = [(Endpoint::Client, cid), (Endpoint::Server, sid)];
            let mut ready = Some(0);
            for (ep, id) in ids.iter().filter_map(|(ep, id)| id.map(|id| (*ep, id))) {
                ready = ready.zip(self.conn_ready(ep, id)).map(|(a, b)| a.max(b));
            }
            match ready {
                Some(at) if at <= now => self.retire_conn(cid, sid),
                // Only a grace left: looked at again when it has passed (a
                // minute's wait read ≈ 79 s on the looks' schedule).
                Some(at) => self.closing.queue.push(Reverse((at, server, conn, looks))),
                None => {
                    let looks = looks + 1;
                    let shift = looks.saturating_sub(STEADY_LOOKS).min(MAX_DOUBLINGS);
                    let wait = (super::retire::RETIRE_AFTER_NS << shift).min(MAX_RECHECK_NS);
                    self.closing.queue.push(Reverse((
                        now.saturating_add(wait),
                        server,
                        conn,
                        looks,
                    )));
                }
            }
        }
    }

    /// When a connection can be folded in (`None`: not known yet, a
    /// stream of it is not retired or its close is not in): a grace after
    /// its tap recorded the close (twice the round trip it knew at the
    /// close, a second at least and a minute at most; a minute for a
    /// client through a relay whose server has not accepted yet), once
    /// nothing of a stream is left: every stream that carried a frame or
    /// began an RPC on it was retired.
    fn conn_ready(&self, ep: Endpoint, id: u32) -> Option<u64> {
        let c = self.conns.get(&(ep, id))?;
        let closed = c.closed?;
        let mut grace = super::retire::grace(c.round_trip(closed));
        if ep == Endpoint::Client && self.retirement.awaits_relay_server(id, &c.local, &c.peer) {
            // Through a relay whose server has not accepted yet.
            grace = grace.max(super::retire::MAX_SETTLE_NS);
        }
        let idle = c.seen.is_empty()
            && c.data_c2s.is_empty()
            && c.not_open.is_empty()
            && c.open_rpcs.is_empty();
        idle.then(|| closed.saturating_add(grace))
    }

    /// Folds a closed connection (and the other tap's side of it) into the
    /// tallies and forgets it.
    fn retire_conn(&mut self, cid: Option<u32>, sid: Option<u32>) {
        if let (Some(c), Some(s)) = (cid, sid) {
            let verdict = self.pair_agreement(c, s);
            let a = &mut self.conn_tally.agree;
            match verdict {
                None => a.cut += 1,
                Some((list, n)) => {
                    a.compared += 1;
                    a.bad_count += n;
                    a.bad.add(c, list);
                }
            }
            self.retirement.unpair(c, s);
        }
        // timeline.csv and the streams plot name a plotted stream's
        // connection by its key (both taps' ids, to match them).
        let plotted = [(Endpoint::Client, cid), (Endpoint::Server, sid)]
            .iter()
            .any(|&(ep, id)| id.is_some_and(|id| self.tl.plots_conn(ep, id)));
        // The socket's frames in flight, unless a later connection on the
        // same ports (a port reused within the grace) holds it now.
        let mut sockets = vec![];
        let mut reused = false;
        for (ep, id) in [(Endpoint::Client, cid), (Endpoint::Server, sid)] {
            let Some(id) = id else { continue };
            let Some(c) = self.conns.remove(&(ep, id)) else {
                continue;
            };
            self.conn_tally.add_windows(ep, &c);
            let paired = cid.is_some() && sid.is_some();
            self.excusing_not_ok +=
                count_unpaired(&mut self.unpaired, &mut self.books, ep, id, &c, paired);
            if plotted && !c.key.is_empty() {
                self.tl.conn_keys.insert((ep, id), c.key.clone());
            }
            if ep == Endpoint::Client && self.tl.advertised_stream_window.is_none() {
                self.tl.advertised_stream_window = Some(c.flows[0].initial());
            }
            let sock = match ep {
                Endpoint::Client => (c.local.clone(), c.peer.clone()),
                _ => (c.peer.clone(), c.local.clone()),
            };
            sockets.push(sock);
            reused |= self
                .retirement
                .forget_addrs(ep == Endpoint::Client, id, &c.local, &c.peer);
            match ep {
                Endpoint::Client => {
                    self.exhausted.remove(&(id, 0));
                    self.client_not_ok.remove(&id);
                }
                _ => {
                    self.pending_conn.remove(&id);
                    self.agree_tally.not_ok.remove(&id);
                    self.agree_tally.bad.remove(&id);
                }
            }
            self.closing.retired[tap(ep)].insert(id);
        }
        if !reused {
            for sock in sockets {
                self.in_flight.remove(&sock);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::reader::Ending;
    use crate::schema::*;

    use crate::analyze::test_event as ev;
    fn frame(dir: Dir, frame: FrameType, len: u32, increment: Option<u32>) -> Kind {
        Kind::Frame(FrameEv {
            dir,
            frame,
            len,
            increment,
            ..FrameEv::default()
        })
    }
    fn open(local: &str, peer: &str) -> Kind {
        Kind::ConnOpen(ConnOpenEv {
            local: local.into(),
            peer: peer.into(),
        })
    }
    fn close() -> Kind {
        Kind::ConnClose(ConnCloseEv {
            error: String::new(),
            bytes_in: 0,
            bytes_out: 0,
        })
    }
    fn start() -> Kind {
        Kind::RpcStart(RpcStartEv {
            path: "/p".into(),
            deadline_ns: None,
            framing: None,
            release: None,
            withhold_after: None,
        })
    }
    fn end() -> Kind {
        Kind::RpcEnd(RpcEndEv {
            status: 0,
            message: String::new(),
        })
    }

    /// One RPC on its own connection, seen by both taps: client conn `i`,
    /// server conn `i + 100_000`, opened at `t`, closed 3 ms later. On
    /// connection `odd` the server's tap sees a connection WINDOW_UPDATE
    /// the client's never does; on `low` the client sends 70,000 bytes
    /// against the 65,535 window (a violation both taps see).
    fn connection(a: &mut super::Analyzer, t: u64, i: u32, odd: u32, low: u32) {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let sid = i + 100_000;
        let (client, server) = (format!("127.0.0.1:{}", 1_000 + i), "127.0.0.1:80");
        a.feed(&ev(t, c, i, 0, open(&client, server)));
        a.feed(&ev(t + 1, s, sid, 0, open(server, &client)));
        a.feed(&ev(t + 2, c, i, 1, start()));
        a.feed(&ev(t + 3, s, sid, 1, start()));
        // Connection `low + 8` too, later: the first violation named is
        // the earlier one's, and both are counted.
        let len = if i == low || i == low + 8 {
            70_000
        } else {
            100
        };
        a.feed(&ev(
            t + 10,
            c,
            i,
            1,
            frame(Dir::Out, FrameType::DATA, len, None),
        ));
        a.feed(&ev(
            t + 20,
            s,
            sid,
            1,
            frame(Dir::In, FrameType::DATA, len, None),
        ));
        a.feed(&ev(t + 30, s, sid, 1, Kind::Chunk(ChunkEv { len })));
        let update = frame(Dir::Out, FrameType::WINDOW_UPDATE, 4, Some(len));
        a.feed(&ev(t + 40, s, sid, 0, update.clone()));
        if i != odd {
            let seen = frame(Dir::In, FrameType::WINDOW_UPDATE, 4, Some(len));
            a.feed(&ev(t + 50, c, i, 0, seen));
        }
        a.feed(&ev(t + 60, s, sid, 1, end()));
        a.feed(&ev(t + 70, c, i, 1, end()));
        a.feed(&ev(t + 3_000_000, c, i, 0, close()));
        a.feed(&ev(t + 3_000_001, s, sid, 0, close()));
    }

    /// 3,000 short connections 10 ms apart: the analysis holds those of
    /// about the last seconds, not all, and what it folded in keeps every
    /// verdict and figure: the connection-window mismatch on one retired
    /// long before the end fails `windows_agree`, the window violation on
    /// another is counted with its lowest window, and every connection is
    /// compared.
    #[test]
    fn closed_connections_are_judged_and_forgotten() {
        let mut a = super::Analyzer::new(0);
        let (n, odd, low) = (3_000u32, 7, 12);
        let mut most = 0;
        for i in 1..=n {
            connection(&mut a, u64::from(i) * 10_000_000, i, odd, low);
            most = most.max(a.conns.len());
        }
        // A connection is retired a grace (1 s) after its close, once its
        // stream is (1 s after its RPC's end): ~2 s of 100 a second, both
        // taps, and the re-check that finds them done.
        assert!(most <= 2 * 100, "{most} connections held at once");
        assert!(a.closing.is_retired(Endpoint::Client, 1));
        assert!(a.closing.is_retired(Endpoint::Server, 100_007));
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        let agree = &sum.checks["windows_agree"];
        assert_eq!(agree.ok, Some(false), "{}", agree.detail);
        assert_eq!(
            agree.detail,
            "C2s connection window: client 65435 vs server 65535"
        );
        // Each of the two frames passes its stream's window and the
        // connection's, on each tap.
        assert_eq!(sum.protocol_violations, 8);
        let credit = &sum.checks["no_data_beyond_credit"];
        assert_eq!(credit.ok, Some(false), "{}", credit.detail);
        assert!(
            credit.detail.starts_with("8 violations"),
            "{}",
            credit.detail
        );
        assert_eq!(credit.first_t_s, Some(0.120_000_01), "{}", credit.detail);
        // Without the odd one, every pair retired on the way is compared.
        let mut a = super::Analyzer::new(0);
        for i in 1..=300 {
            connection(&mut a, u64::from(i) * 10_000_000, i, 0, low);
        }
        assert!(a.closing.is_retired(Endpoint::Client, 1));
        let (even, _) = a.finish(0, &Ending::Clean(Footer::default()));
        let agree = &even.checks["windows_agree"];
        assert_eq!(
            (agree.ok, agree.detail.as_str()),
            (
                Some(true),
                "300 connections: final windows equal from both taps"
            )
        );
        assert_eq!(sum.min_window, Some(65_535 - 70_000));
        assert_eq!(sum.min_send_window, Some(65_535 - 70_000));
        assert_eq!(sum.stream_count, u64::from(n));
        assert_eq!(sum.events_after_conn_retirement, 0);
        assert_eq!(sum.checks["bytes"].ok, Some(true));
    }

    /// Paired connections of one message each, retired long before the
    /// end: one whose RPC failed (UNAVAILABLE on the client, cancelled on
    /// the server) lost its message in flight, which that failure
    /// excuses, carried from its retirement to the verdict. Without the
    /// failure, the same loss fails the check.
    #[test]
    fn a_loss_excused_on_a_retired_connection_stays_excused() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let judge = |failed: bool| {
            let mut a = super::Analyzer::new(0);
            for i in 1..=3u32 {
                let t = u64::from(i) * 10_000_000;
                let sid = i + 100;
                let (client, server) = (format!("127.0.0.1:{}", 1_000 + i), "127.0.0.1:80");
                let msg = MsgEv {
                    seq: u64::from(i),
                    size: 10,
                    framed: 15,
                };
                a.feed(&ev(t, c, i, 0, open(&client, server)));
                a.feed(&ev(t + 1, s, sid, 0, open(server, &client)));
                a.feed(&ev(t + 2, c, i, 1, Kind::Schedule(msg.clone())));
                a.feed(&ev(t + 3, c, i, 1, start()));
                a.feed(&ev(t + 4, s, sid, 1, start()));
                let send = SendEv {
                    seq: msg.seq,
                    scheduled: t + 2,
                    begin: t + 5,
                    bytes: 15,
                };
                a.feed(&ev(t + 5, c, i, 1, Kind::Send(send)));
                let lost = i == 2;
                if !lost {
                    a.feed(&ev(t + 6, s, sid, 1, Kind::Decode(msg.clone())));
                    let done = CompleteEv {
                        seq: msg.seq,
                        worker: 0,
                        service_ns: 1,
                    };
                    a.feed(&ev(t + 7, s, sid, 1, Kind::Complete(done)));
                }
                let status = |ok_or: u32| {
                    Kind::RpcEnd(RpcEndEv {
                        status: if lost && failed { ok_or } else { 0 },
                        message: String::new(),
                    })
                };
                a.feed(&ev(t + 8, s, sid, 1, status(1)));
                a.feed(&ev(t + 9, c, i, 1, status(14)));
                a.feed(&ev(t + 3_000_000, c, i, 0, close()));
                a.feed(&ev(t + 3_000_001, s, sid, 0, close()));
            }
            // Ten seconds on, all three are long retired.
            a.feed(&ev(
                10_000_000_000,
                c,
                9,
                0,
                open("127.0.0.1:2000", "127.0.0.1:80"),
            ));
            assert!(a.closing.is_retired(Endpoint::Client, 2));
            a.finish(0, &Ending::Clean(Footer::default())).0
        };
        let sum = judge(true);
        let c = &sum.checks["accounting"];
        assert_eq!(c.ok, Some(true), "{}", c.detail);
        assert!(
            c.detail.contains("lost in flight 1;")
                && c.detail
                    .ends_with("(lost at a reset: an RPC ended other than OK)"),
            "{}",
            c.detail
        );
        let c = &judge(false).checks["accounting"];
        assert_eq!(c.ok, Some(false), "{}", c.detail);
    }

    /// Server connections (one tap) whose RPC the server ends 2.5 s after
    /// the close: each is folded in within a second of its stream (3.5 s
    /// after the close), not on a wait that doubles (7 s).
    #[test]
    fn a_connection_is_folded_in_soon_after_its_last_stream() {
        let s = Endpoint::Server;
        let mut a = super::Analyzer::new(0);
        let mut most = 0;
        for i in 1..=2_000u32 {
            let t = u64::from(i) * 10_000_000;
            a.feed(&ev(
                t,
                s,
                i,
                0,
                open("127.0.0.1:80", &format!("127.0.0.1:{i}")),
            ));
            a.feed(&ev(t + 1, s, i, 1, start()));
            a.feed(&ev(
                t + 2,
                s,
                i,
                1,
                frame(Dir::In, FrameType::DATA, 10, None),
            ));
            a.feed(&ev(t + 3, s, i, 0, close()));
            // Ends come in `t` order: the one 2.5 s after this close.
            if i > 250 {
                a.feed(&ev(t + 4, s, i - 250, 1, end()));
            }
            most = most.max(a.conns.len());
        }
        // 100 a second for 3.5 s and at most one more second.
        assert!(most <= 460, "{most} connections held at once");
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        assert_eq!(sum.stream_count, 2_000);
    }

    /// A port reused within the grace, the server's open first: the
    /// earlier pair keeps its mismatch (the client's tap lacks a
    /// connection WINDOW_UPDATE) and fails `windows_agree`; the later
    /// pair agrees. The server's new connection was paired with the
    /// earlier client one, which was then never folded in and read as
    /// agreeing.
    #[test]
    fn a_port_reused_within_the_grace_keeps_each_pairs_verdict() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let (cli, srv) = ("127.0.0.1:5000", "127.0.0.1:80");
        let mut a = super::Analyzer::new(0);
        let conn = |a: &mut super::Analyzer, t: u64, cid: u32, sid: u32, lost: bool| {
            a.feed(&ev(t, s, sid, 0, open(srv, cli)));
            a.feed(&ev(t + 1, c, cid, 0, open(cli, srv)));
            a.feed(&ev(t + 2, c, cid, 1, start()));
            a.feed(&ev(t + 3, s, sid, 1, start()));
            a.feed(&ev(
                t + 4,
                c,
                cid,
                1,
                frame(Dir::Out, FrameType::DATA, 100, None),
            ));
            a.feed(&ev(
                t + 5,
                s,
                sid,
                1,
                frame(Dir::In, FrameType::DATA, 100, None),
            ));
            a.feed(&ev(t + 6, s, sid, 1, Kind::Chunk(ChunkEv { len: 100 })));
            let update = frame(Dir::Out, FrameType::WINDOW_UPDATE, 4, Some(100));
            a.feed(&ev(t + 7, s, sid, 0, update));
            if !lost {
                let seen = frame(Dir::In, FrameType::WINDOW_UPDATE, 4, Some(100));
                a.feed(&ev(t + 8, c, cid, 0, seen));
            }
            a.feed(&ev(t + 9, s, sid, 1, end()));
            a.feed(&ev(t + 10, c, cid, 1, end()));
            a.feed(&ev(t + 10_000_000, c, cid, 0, close()));
            a.feed(&ev(t + 10_000_001, s, sid, 0, close()));
        };
        conn(&mut a, 0, 1, 2, true);
        conn(&mut a, 300_000_000, 3, 4, false);
        a.feed(&ev(10_000_000_000, s, 9, 0, open("x:1", "y:2")));
        assert!(a.conns.len() == 1, "both pairs folded in");
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        let agree = &sum.checks["windows_agree"];
        assert_eq!(agree.ok, Some(false), "{}", agree.detail);
        assert_eq!(
            agree.detail,
            "C2s connection window: client 65435 vs server 65535"
        );
        assert_eq!(sum.checks["bytes"].ok, Some(true));
    }

    /// A server connection closed before a client opened on its ports
    /// is an earlier connection's: the client pairs with the server
    /// connection that opens after it, and the pair's bytes and windows
    /// agree; its stream counts the message its client sent. Paired with
    /// the closed one, the stream read as cut short and the windows as
    /// differing.
    #[test]
    fn a_client_does_not_pair_with_a_server_connection_already_closed() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let (cli, srv) = ("127.0.0.1:5000", "127.0.0.1:80");
        let mut a = super::Analyzer::new(0);
        a.feed(&ev(1, s, 2, 0, open(srv, cli)));
        a.feed(&ev(2, s, 2, 0, close()));
        a.feed(&ev(10, c, 3, 0, open(cli, srv)));
        a.feed(&ev(11, s, 4, 0, open(srv, cli)));
        a.feed(&ev(12, c, 3, 1, start()));
        let msg = MsgEv {
            seq: 0,
            size: 95,
            framed: 100,
        };
        a.feed(&ev(12, c, 3, 1, Kind::Schedule(msg)));
        let send = SendEv {
            seq: 0,
            scheduled: 12,
            begin: 13,
            bytes: 100,
        };
        a.feed(&ev(13, c, 3, 1, Kind::Send(send)));
        a.feed(&ev(13, s, 4, 1, start()));
        a.feed(&ev(
            14,
            c,
            3,
            1,
            frame(Dir::Out, FrameType::DATA, 100, None),
        ));
        a.feed(&ev(15, s, 4, 1, frame(Dir::In, FrameType::DATA, 100, None)));
        a.feed(&ev(16, s, 4, 1, Kind::Chunk(ChunkEv { len: 100 })));
        a.feed(&ev(17, s, 4, 1, end()));
        a.feed(&ev(18, c, 3, 1, end()));
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        let (bytes, agree) = (&sum.checks["bytes"], &sum.checks["windows_agree"]);
        assert_eq!(bytes.ok, Some(true), "{}", bytes.detail);
        assert_eq!(
            bytes.detail,
            "1 stream: client tap out = server tap in = bytes handed to the app"
        );
        assert_eq!(agree.ok, Some(true), "{}", agree.detail);
        assert_eq!(
            agree.detail,
            "1 connection: final windows equal from both taps"
        );
        let stream = &sum.streams[0];
        assert_eq!((stream.scheduled, stream.sent), (Some(1), Some(1)));
    }

    /// Unix domain socket connections pair by the client end's own name
    /// (`unix:@…`, which h2probe's client binds), whatever order the server
    /// accepted them in; unnamed ends (most clients') look alike and pair
    /// with none, so the two-sided checks cannot be judged. They paired in
    /// the order they opened, and judged one client against another's
    /// server connection.
    #[test]
    fn unix_socket_connections_pair_by_the_clients_name_or_not_at_all() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let path = "unix:/run/app.sock";
        for named in [true, false] {
            let mut a = super::Analyzer::new(0);
            let name = |i: u32| {
                if named {
                    format!("unix:@h2probe-7-{i}")
                } else {
                    crate::schema::UNIX_UNNAMED.to_string()
                }
            };
            // Client connections 1 and 2; the server accepts 2 first. Only
            // connection 2 gets its window back (the server's WINDOW_UPDATE
            // reaches it): paired crosswise, both would disagree.
            for cid in [1u32, 2] {
                a.feed(&ev(cid as u64, c, cid, 0, open(&name(cid), path)));
            }
            for (t, sid, cid) in [(10u64, 1u32, 2u32), (11, 2, 1)] {
                a.feed(&ev(t, s, sid, 0, open(path, &name(cid))));
            }
            let update = |dir| frame(dir, FrameType::WINDOW_UPDATE, 4, Some(100));
            a.feed(&ev(
                20,
                c,
                2,
                0,
                frame(Dir::Out, FrameType::DATA, 100, None),
            ));
            a.feed(&ev(21, s, 1, 0, frame(Dir::In, FrameType::DATA, 100, None)));
            a.feed(&ev(22, s, 1, 0, update(Dir::Out)));
            a.feed(&ev(23, c, 2, 0, update(Dir::In)));
            let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
            let agree = &sum.checks["windows_agree"];
            if named {
                assert_eq!(agree.ok, Some(true), "{}", agree.detail);
                assert!(
                    agree.detail.starts_with("2 connections"),
                    "{}",
                    agree.detail
                );
            } else {
                assert_eq!(agree.ok, None, "{}", agree.detail);
            }
        }
    }

    /// `windows_agree` names the first mismatches by client connection,
    /// retired or not: here those of connections 1–20, where 1–10 stay open
    /// to the end and 11–40 were folded in long before. It named the
    /// retired ones first, in the order they retired.
    #[test]
    fn mismatches_are_named_by_connection_retired_or_not() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut a = super::Analyzer::new(0);
        // Each pair's client tap misses the connection WINDOW_UPDATE of
        // 1,000 + i bytes.
        let pair = |a: &mut super::Analyzer, t: u64, i: u32, closes: bool| {
            let sid = i + 100;
            let client = format!("127.0.0.1:{}", 1_000 + i);
            a.feed(&ev(t, c, i, 0, open(&client, "127.0.0.1:80")));
            a.feed(&ev(t + 1, s, sid, 0, open("127.0.0.1:80", &client)));
            let update = frame(Dir::Out, FrameType::WINDOW_UPDATE, 4, Some(1_000 + i));
            a.feed(&ev(t + 2, s, sid, 0, update));
            if closes {
                a.feed(&ev(t + 3, c, i, 0, close()));
                a.feed(&ev(t + 4, s, sid, 0, close()));
            }
        };
        for i in 1..=10u32 {
            pair(&mut a, u64::from(i), i, false);
        }
        for i in (11..=40u32).rev() {
            pair(&mut a, u64::from(50 - i) * 10_000_000, i, true);
        }
        let ping = frame(Dir::In, FrameType::PING, 8, None);
        a.feed(&ev(10_000_000_000, c, 1, 0, ping));
        assert!(a.closing.is_retired(c, 11) && a.closing.is_retired(c, 40));
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        let want: Vec<String> = (1..=20u32)
            .map(|i| {
                format!(
                    "C2s connection window: client 65535 vs server {}",
                    65_535 + 1_000 + i
                )
            })
            .collect();
        assert_eq!(
            sum.checks["windows_agree"].detail,
            format!("{}; … and 20 more", want.join("; "))
        );
    }

    /// A port reused within the grace: the later connection's frame, written
    /// before the earlier pair is folded in and read after, still gives its
    /// latency sample (the fold took the socket's frames in flight, which
    /// both connections share).
    #[test]
    fn a_port_reused_within_the_grace_keeps_the_later_frames_in_flight() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let (cli, srv) = ("127.0.0.1:5000", "127.0.0.1:80");
        let sec = 1_000_000_000u64;
        let data = |dir: Dir| {
            Kind::Frame(FrameEv {
                dir,
                frame: FrameType::DATA,
                len: 10,
                offset: 9,
                ..FrameEv::default()
            })
        };
        let mut a = super::Analyzer::new(0);
        a.feed(&ev(1, c, 1, 0, open(cli, srv)));
        a.feed(&ev(2, s, 2, 0, open(srv, cli)));
        a.feed(&ev(3, c, 1, 0, close()));
        a.feed(&ev(4, s, 2, 0, close()));
        a.feed(&ev(sec / 2, c, 3, 0, open(cli, srv)));
        a.feed(&ev(sec / 2 + 1, c, 3, 1, data(Dir::Out)));
        // The first pair is folded in a second after its close ...
        a.feed(&ev(sec + 10, s, 4, 0, open(srv, cli)));
        assert!(a.closing.is_retired(c, 1), "folded in");
        // ... and the frame the later client wrote is read after.
        a.feed(&ev(sec + 11, s, 4, 1, data(Dir::In)));
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        assert_eq!(sum.c2s_frame_latency_ms.count, 1);
    }

    /// With no mismatch, the detail counts every connection, retired or
    /// not, as compared, and one cut short (its RPC failed on the
    /// client: frames may have been in flight) as not compared.
    #[test]
    fn retired_connections_count_as_compared() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut a = super::Analyzer::new(0);
        let (client, server) = ("127.0.0.4:7000", "127.0.0.1:80");
        a.feed(&ev(1_000_000, c, 700_001, 0, open(client, server)));
        a.feed(&ev(1_000_001, s, 700_101, 0, open(server, client)));
        a.feed(&ev(1_000_002, c, 700_001, 1, start()));
        a.feed(&ev(1_000_003, s, 700_101, 1, start()));
        a.feed(&ev(1_000_004, s, 700_101, 1, end()));
        let failed = Kind::RpcEnd(RpcEndEv {
            status: 1,
            message: "cancelled".into(),
        });
        a.feed(&ev(1_000_005, c, 700_001, 1, failed));
        a.feed(&ev(2_000_000, c, 700_001, 0, close()));
        a.feed(&ev(2_000_001, s, 700_101, 0, close()));
        for i in 1..=500u32 {
            connection(&mut a, u64::from(i) * 10_000_000, i, 0, 0);
        }
        assert!(a.conns.len() < 500);
        assert!(a.closing.is_retired(c, 700_001));
        // An RPC that never had a stream on connection 1 fails later (an
        // attempt on a connection that had failed): read as usual.
        let failed = Kind::RpcEnd(RpcEndEv {
            status: 14,
            message: "connection closed".into(),
        });
        a.feed(&ev(6_000_000_000, Endpoint::Client, 1, 0, failed));
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        assert_eq!(sum.events_after_conn_retirement, 0);
        assert_eq!(sum.rpc_status.get("UNAVAILABLE"), Some(&1));
        let agree = &sum.checks["windows_agree"];
        assert_eq!(agree.ok, Some(true), "{}", agree.detail);
        assert_eq!(
            agree.detail,
            "500 connections: final windows equal from both taps (1 cut short, not compared)"
        );
    }

    /// What retired connections leave behind keeps every window figure:
    /// the lowest send window, read on the client's tap (two connections
    /// the server's tap never saw); the earliest violation by time, though
    /// the later one retired first; DATA past a window lowered by a
    /// SETTINGS not yet acknowledged (a connection only the server's tap
    /// saw); and how many windows disagreed beyond the ones named.
    #[test]
    fn retired_connections_keep_their_window_figures() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut extra = vec![];
        // (conn, opened, bytes in one DATA frame, closed): the first
        // violates first and closes last, and connection 8's (70,000
        // bytes, both taps) comes between.
        for (i, at, len, closed) in [
            (900_001, 5_000_000, 75_000, 2_505_000_000),
            (900_002, 8_000_000, 80_000, 9_000_000),
        ] {
            let local = format!("127.0.0.2:{}", i - 899_000);
            extra.push(ev(at, c, i, 0, open(&local, "127.0.0.1:80")));
            extra.push(ev(at + 1, c, i, 1, start()));
            let data = frame(Dir::Out, FrameType::DATA, len, None);
            extra.push(ev(at + 10, c, i, 1, data));
            extra.push(ev(at + 20, c, i, 1, end()));
            extra.push(ev(closed, c, i, 0, close()));
        }
        // The server lowers the initial stream window to 1,000 bytes; a
        // 2,000-byte DATA frame arrives before the client's ACK.
        let (sid, at) = (800_001, 15_000_000);
        extra.push(ev(at, s, sid, 0, open("127.0.0.1:80", "127.0.0.3:5000")));
        let lower = Kind::Frame(FrameEv {
            dir: Dir::Out,
            frame: FrameType::SETTINGS,
            len: 6,
            settings: Some(vec![(settings::INITIAL_WINDOW_SIZE, 1_000)]),
            ..FrameEv::default()
        });
        extra.push(ev(at + 1, s, sid, 0, lower));
        extra.push(ev(at + 2, s, sid, 1, start()));
        let data = frame(Dir::In, FrameType::DATA, 2_000, None);
        extra.push(ev(at + 10, s, sid, 1, data));
        extra.push(ev(at + 20, s, sid, 1, end()));
        extra.push(ev(at + 1_000_000, s, sid, 0, close()));
        extra.sort_by_key(|e| std::cmp::Reverse(e.t));
        // 500 connections 10 ms apart (each busy 3 ms), the first 25 of
        // them with a connection window the taps disagree on.
        let mut a = super::Analyzer::new(0);
        for i in 1..=500 {
            let t = u64::from(i) * 10_000_000;
            while extra.last().is_some_and(|e| e.t < t) {
                a.feed(&extra.pop().unwrap());
            }
            connection(&mut a, t, i, if i <= 25 { i } else { 0 }, 0);
        }
        for e in extra.into_iter().rev() {
            a.feed(&e);
        }
        for (ep, id) in [(c, 900_001), (c, 900_002), (s, sid), (c, 25)] {
            assert!(a.closing.is_retired(ep, id), "{ep:?} {id} still held");
        }
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        assert_eq!(sum.min_send_window, Some(65_535 - 80_000));
        assert_eq!(sum.min_window, Some(65_535 - 80_000));
        assert_eq!(sum.data_past_lowered_window, 1);
        let credit = &sum.checks["no_data_beyond_credit"];
        assert_eq!(credit.ok, Some(false), "{}", credit.detail);
        assert_eq!(
            credit.detail,
            "8 violations (one per window passed); first: DATA beyond the connection window on stream 1 (window -9465)"
        );
        let agree = &sum.checks["windows_agree"];
        assert_eq!(agree.ok, Some(false), "{}", agree.detail);
        assert!(agree.detail.ends_with("; … and 5 more"), "{}", agree.detail);
    }

    /// A server's RPC that ends after its connection closed (its worker
    /// still draining) keeps the connection until its stream is judged:
    /// its bytes count in its figures. A frame that names a retired
    /// connection later (an edited trace) is counted and left out.
    #[test]
    fn a_connection_stays_while_an_rpc_on_it_is_open() {
        let s = Endpoint::Server;
        let mut a = super::Analyzer::new(0);
        a.feed(&ev(1, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        a.feed(&ev(2, s, 1, 1, start()));
        a.feed(&ev(3, s, 1, 1, frame(Dir::In, FrameType::DATA, 100, None)));
        a.feed(&ev(4, s, 1, 1, Kind::Chunk(ChunkEv { len: 100 })));
        a.feed(&ev(5, s, 1, 0, close()));
        // 10 s of another connection's events, no end on stream 1.
        a.feed(&ev(6, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:5001")));
        for k in 1..=100u64 {
            let ping = frame(Dir::In, FrameType::PING, 8, None);
            a.feed(&ev(k * 100_000_000, s, 2, 0, ping));
        }
        assert!(a.conns.contains_key(&(s, 1)), "its RPC is open");
        a.feed(&ev(10_100_000_000, s, 1, 1, end()));
        a.feed(&ev(90_000_000_000, s, 2, 0, close()));
        a.feed(&ev(200_000_000_000, s, 3, 0, open("a:1", "b:2")));
        assert!(!a.conns.contains_key(&(s, 1)) && !a.conns.contains_key(&(s, 2)));
        a.feed(&ev(
            200_000_000_001,
            s,
            1,
            1,
            frame(Dir::In, FrameType::DATA, 7, None),
        ));
        assert!(!a.conns.contains_key(&(s, 1)), "not brought back");
        // Anything of a stream is new on a closed connection: left out.
        a.feed(&ev(
            200_000_000_002,
            s,
            1,
            3,
            Kind::Chunk(ChunkEv { len: 7 }),
        ));
        a.feed(&ev(200_000_000_003, s, 1, 3, end()));
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        assert_eq!(sum.stream_count, 1);
        assert_eq!(sum.streams[0].bytes, 100);
        assert_eq!(sum.events_after_conn_retirement, 3);
        assert_eq!(sum.server_rpc_status.values().sum::<u64>(), 1);
    }

    /// A connection that closed with its SETTINGS unacknowledged (a peer
    /// that is not HTTP/2, a client that connects and leaves) is folded in
    /// a grace after its close: the age of that SETTINGS stops at the
    /// close. It was kept to the end, its age growing with every look.
    #[test]
    fn a_connection_closed_with_its_settings_unacknowledged_is_folded_in() {
        let s = Endpoint::Server;
        let mut a = super::Analyzer::new(0);
        for i in 1..=100u32 {
            let t = u64::from(i) * 1_000_000_000;
            a.feed(&ev(
                t,
                s,
                i,
                0,
                open("127.0.0.1:80", &format!("127.0.0.1:{i}")),
            ));
            a.feed(&ev(
                t + 1,
                s,
                i,
                0,
                frame(Dir::Out, FrameType::SETTINGS, 6, None),
            ));
            a.feed(&ev(t + 2, s, i, 0, close()));
        }
        assert!(a.conns.len() <= 3, "{} connections held", a.conns.len());
        assert!(a.closing.is_retired(s, 1) && a.closing.is_retired(s, 90));
        // A stream one tap sees on a connection still open, whose peer never
        // acknowledges: judged within a minute of its end, not never.
        a.feed(&ev(
            200_000_000_000,
            s,
            200,
            0,
            open("127.0.0.1:80", "127.0.0.1:9"),
        ));
        let settings = frame(Dir::Out, FrameType::SETTINGS, 6, None);
        a.feed(&ev(200_000_000_001, s, 200, 0, settings));
        a.feed(&ev(200_000_000_002, s, 200, 1, start()));
        a.feed(&ev(
            200_000_000_003,
            s,
            200,
            1,
            frame(Dir::In, FrameType::DATA, 10, None),
        ));
        a.feed(&ev(200_000_000_004, s, 200, 1, end()));
        for k in 1..=70u64 {
            let ping = frame(Dir::In, FrameType::PING, 8, None);
            a.feed(&ev(200_000_000_004 + k * 1_000_000_000, s, 200, 0, ping));
        }
        assert!(
            !a.conns[&(s, 200)].open_rpcs.contains(&1),
            "its stream is judged"
        );
    }

    /// A client connection through a relay whose server never accepted is
    /// folded in a minute after its close, not at the next look after it
    /// (≈ 79 s: looks a second apart, then doubling).
    #[test]
    fn a_client_through_a_relay_waits_a_minute_for_its_server() {
        let (c, cl, sl) = (Endpoint::Client, Endpoint::ClientLeg, Endpoint::ServerLeg);
        let sec = 1_000_000_000u64;
        let mut a = super::Analyzer::new(0);
        a.feed(&ev(1, c, 1, 0, open("c:1", "r:2")));
        a.feed(&ev(2, cl, 7, 0, open("r:2", "c:1")));
        a.feed(&ev(3, sl, 7, 0, open("r:3", "s:4")));
        a.feed(&ev(4, cl, 7, 0, close()));
        a.feed(&ev(5, sl, 7, 0, close()));
        a.feed(&ev(sec, c, 1, 0, close()));
        a.feed(&ev(sec + 1, c, 2, 0, open("c:5", "s:6")));
        let mut gone = None;
        for k in 1..=200u64 {
            let ping = frame(Dir::In, FrameType::PING, 8, None);
            a.feed(&ev(sec + k * sec / 2, c, 2, 0, ping));
            if gone.is_none() && !a.conns.contains_key(&(c, 1)) {
                gone = Some(k * sec / 2);
            }
        }
        // The first event at or after the minute retires it.
        assert_eq!(gone, Some(60 * sec));
    }

    /// What a tap records names a retired connection only in an edited
    /// trace: a wire error, a socket wait, a second close, an `rpc_start` on
    /// stream 0 are counted and left out of every figure, the span too (a
    /// socket wait 200 s late added its 50 s to the blocked time; the span
    /// ran to it).
    #[test]
    fn a_retired_connections_late_tap_events_move_no_figure() {
        let c = Endpoint::Client;
        let sec = 1_000_000_000u64;
        let mut a = super::Analyzer::new(0);
        a.feed(&ev(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        a.feed(&ev(
            2,
            c,
            1,
            0,
            frame(Dir::Out, FrameType::SETTINGS, 0, None),
        ));
        a.feed(&ev(sec, c, 1, 0, close()));
        let late = 200 * sec;
        let blocked = Kind::SocketBlocked(IntervalEv {
            dir: Dir::Out,
            start: late - 50 * sec,
            open: false,
        });
        let wire = Kind::WireError(WireErrorEv {
            dir: Dir::In,
            offset: 9,
            error: "edited".into(),
        });
        a.feed(&ev(late, c, 1, 0, blocked));
        a.feed(&ev(late + 1, c, 1, 0, wire));
        a.feed(&ev(late + 2, c, 1, 0, close()));
        a.feed(&ev(late + 3, c, 1, 0, start()));
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        assert_eq!(sum.events_after_conn_retirement, 4);
        // Added, or moved from their place: the checks cannot be judged.
        let judged: Vec<&String> = (sum.checks.iter())
            .filter(|(name, c)| c.ok.is_some() && *name != "no_dropped_events")
            .map(|(name, _)| name)
            .collect();
        assert!(judged.is_empty(), "{judged:?}");
        let said = "4 events named a connection after its retirement";
        assert!(
            sum.checks.values().any(|c| c.detail.contains(said)),
            "{:?}",
            sum.checks
        );
        assert_eq!(sum.client_socket_blocked_s, 0.0);
        assert_eq!(sum.wire_errors, 0);
        assert_eq!(sum.span_s, (sec - 1) as f64 / 1e9);
    }

    /// A connection kept for a stream that never retires is looked at no
    /// more than once a second, then once every 64 s, for as long as the
    /// trace goes: a wait doubled past 2^54 s wrapped to 0, and it was
    /// looked at again and again within one event.
    #[test]
    fn a_connection_kept_to_the_end_is_looked_at_ever_more_rarely() {
        let s = Endpoint::Server;
        let sec = 1_000_000_000u64;
        let mut a = super::Analyzer::new(0);
        a.feed(&ev(1, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        a.feed(&ev(2, s, 1, 1, start()));
        a.feed(&ev(3, s, 1, 0, close()));
        a.feed(&ev(4, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:5001")));
        let looks = |a: &super::Analyzer| a.closing.queue.iter().map(|r| r.0 .3).max().unwrap_or(0);
        let mut last = 0;
        for k in 1..=12_000u64 {
            let ping = frame(Dir::In, FrameType::PING, 8, None);
            a.feed(&ev(k * sec / 2, s, 2, 0, ping));
            let now = looks(&a);
            assert!(now <= last + 1, "{now} looks after {last}, at {} s", k / 2);
            last = now;
        }
        // 16 looks a second apart, six doublings, then one every 64 s.
        assert!((100..=120).contains(&last), "{last} looks in 6,000 s");
        assert!(a.conns.contains_key(&(s, 1)), "its RPC never ended");
    }

    /// A tap's retired connections are a few ranges of ids, whether its
    /// ids are consecutive (`serve` or `client` alone: two ranges, odd and
    /// even) or of one parity (`run`: one). From `run`'s one shared counter
    /// a tap's ids alternated with the other's: one range per connection.
    #[test]
    fn retired_connection_ids_are_ranges() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        for (step, ranges) in [(1u32, 2), (2, 1)] {
            let mut a = super::Analyzer::new(0);
            for k in 0..1_000u32 {
                let t = u64::from(k) * 10_000_000;
                let id = 1 + k * step;
                a.feed(&ev(
                    t,
                    s,
                    id,
                    0,
                    open("127.0.0.1:80", &format!("127.0.0.1:{k}")),
                ));
                a.feed(&ev(t + 1, s, id, 0, close()));
            }
            a.feed(&ev(20_000_000_000, c, 1, 0, open("x:1", "y:2")));
            assert_eq!(a.closing.retired[1].ranges(), ranges, "ids {step} apart");
            assert!(a.closing.is_retired(s, 1 + 999 * step));
        }
    }
}

/// What lists connections or streams reads the same on every analysis of
/// one trace: each analysis's maps have their own order.
#[cfg(test)]
mod order {
    use crate::reader::Ending;
    use crate::schema::*;

    use crate::analyze::test_event as ev;
    fn data(dir: Dir, len: u32) -> Kind {
        Kind::Frame(FrameEv {
            dir,
            frame: FrameType::DATA,
            len,
            ..FrameEv::default()
        })
    }
    fn open(local: &str, peer: &str) -> Kind {
        Kind::ConnOpen(ConnOpenEv {
            local: local.into(),
            peer: peer.into(),
        })
    }

    /// Eight streams whose windows the taps disagree on, and a client
    /// stall over six connections: listed by id, on every analysis.
    #[test]
    fn details_list_streams_and_connections_by_id() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        for _ in 0..4 {
            let mut a = super::Analyzer::new(0);
            a.feed(&ev(1, c, 1, 0, open("c:1", "s:2")));
            a.feed(&ev(2, s, 2, 0, open("s:2", "c:1")));
            for k in 0..8u32 {
                let id = 2 * k + 1;
                a.feed(&ev(10 + u64::from(k), c, 1, id, data(Dir::Out, 100)));
                a.feed(&ev(20 + u64::from(k), s, 2, id, data(Dir::In, 90)));
            }
            let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
            let want: Vec<String> = (0..8u32)
                .map(|k| format!("C2s stream {}: client 65435 vs server 65445", 2 * k + 1))
                .collect();
            let detail = &sum.checks["windows_agree"].detail;
            let conn = "C2s connection window: client 64735 vs server 64815";
            assert_eq!(*detail, format!("{conn}; {}", want.join("; ")));

            let mut a = super::Analyzer::new(0);
            for conn in 1..=6u32 {
                a.feed(&ev(
                    u64::from(conn),
                    c,
                    conn,
                    0,
                    open(&format!("c:{conn}"), "s:9"),
                ));
            }
            let stall = Kind::Stall(StallEv {
                timeout_ns: 2_000_000_000,
                pending: 3,
                conn_window: None,
                streams: vec![],
            });
            a.feed(&ev(100, c, 0, 0, stall));
            let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
            let text = sum.stall.unwrap();
            let at: Vec<usize> = (1..=6)
                .map(|conn| {
                    text.find(&format!("connection {conn}: send window"))
                        .unwrap()
                })
                .collect();
            assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
        }
    }
}
