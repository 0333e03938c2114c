//! Memory that follows the open streams, not the trace: once a stream's RPC
//! has ended on every side the trace holds (and [`RETIRE_AFTER_NS`] has
//! passed, for frames h2 flushes after the handler recorded the end), its
//! per-stream checks are judged and its figures folded into running tallies
//! here, and its state leaves every per-stream map.
//!
//! What is judged at retirement is what `finish` would judge: no frame of a
//! stream moves its byte counts or windows once it is retired. So a stream
//! both taps see waits until they agree on its bytes and windows (frames
//! still in flight on a slow link land first), until its connection closed
//! on both, or [`MAX_SETTLE_NS`]; a stream one tap sees waits twice the
//! longest round trip that tap measured on its connection, if longer than
//! [`RETIRE_AFTER_NS`]. Events come in `t` order (the reorder window), so
//! "passed" is on `t`.

use super::summary::StreamFigures;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

/// How long after a side ended an RPC its stream may still see frames (a
/// WINDOW_UPDATE h2 flushes after the handler recorded the end, the last
/// frames on the other tap's side of the socket), at least.
pub(super) const RETIRE_AFTER_NS: u64 = 1_000_000_000;

/// How long a stream both taps see may wait for them to agree before it is
/// judged as it stands (a real mismatch, or frames one tap never saw on a
/// connection still open).
pub(super) const MAX_SETTLE_NS: u64 = 60_000_000_000;

/// The wait after a side's end, given the longest round trip its tap
/// measured on the connection: frames the peer sent before it learned of
/// the end arrive within one.
pub(super) fn grace(rtt_ns: u64) -> u64 {
    RETIRE_AFTER_NS.max(rtt_ns.saturating_mul(2))
}

/// Streams listed in `summary.json`'s `streams`: the first to end; every
/// stream counts in `stream_count`, the fairness index and starvation.
pub const MAX_LISTED_STREAMS: usize = 1_000;

/// Starved streams named at most (the least served are kept).
pub const MAX_STARVED_NAMED: usize = 1_024;

/// Failures a check's detail names; the rest are counted.
pub(super) const MAX_DETAILS: usize = 20;

/// Which side of a connection an end was recorded on.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Side {
    Client,
    Server,
}

/// Streams waiting to be retired, and the connections paired across taps.
#[derive(Default)]
pub(super) struct Retirement {
    /// (due, side, conn, stream), soonest first.
    queue: BinaryHeap<Reverse<(u64, Side, u32, u32)>>,
    /// Per server (conn, stream): when each side's end is due (the end
    /// and its grace).
    ends: HashMap<(u32, u32), [Option<u64>; 2]>,
    /// Per server (conn, stream) waiting for its taps to agree: when it
    /// first became due.
    deferred: HashMap<(u32, u32), u64>,
    /// Server conn → client conn on the same socket, and back.
    client_of: HashMap<u32, u32>,
    server_of: HashMap<u32, u32>,
    /// (is client, local, peer) of every connection seen, to pair the next.
    addrs: HashMap<(bool, String, String), u32>,
    /// A relay's connection pairs not yet matched with both endpoints:
    /// (local, peer) of its client leg and of its server leg, by pair id.
    legs: HashMap<u32, [Option<(String, String)>; 2]>,
}

/// A stream to retire now: its server (conn) and client (conn) sides, as
/// far as the trace has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Due {
    pub server: Option<u32>,
    pub client: Option<u32>,
    pub stream: u32,
    /// When it first became due.
    pub since: u64,
}

impl Retirement {
    /// A connection's addresses (`conn_open`): pairs it with the other
    /// tap's connection on the same socket, or through a relay's pair.
    pub(super) fn conn_open(&mut self, side: Side, conn: u32, local: &str, peer: &str) {
        if local.is_empty() {
            return;
        }
        let client = side == Side::Client;
        let other = (!client, peer.to_string(), local.to_string());
        if let Some(&o) = self.addrs.get(&other) {
            let (c, s) = if client { (conn, o) } else { (o, conn) };
            self.pair(c, s);
        }
        self.addrs
            .insert((client, local.to_string(), peer.to_string()), conn);
        self.match_legs();
    }

    /// A relay leg's addresses: the relay forwards every byte unchanged,
    /// so the client connected to its client leg and the server behind its
    /// server leg (same pair id) see one conversation, stream ids and all.
    pub(super) fn leg_open(&mut self, server_leg: bool, pair: u32, local: &str, peer: &str) {
        if local.is_empty() {
            return;
        }
        self.legs.entry(pair).or_default()[usize::from(server_leg)] =
            Some((local.to_string(), peer.to_string()));
        self.match_legs();
    }

    /// Pairs the endpoints of every relay pair whose two legs and two
    /// endpoints have all been seen.
    fn match_legs(&mut self) {
        let mut done = vec![];
        for (id, legs) in &self.legs {
            let [Some((cl_local, cl_peer)), Some((sl_local, sl_peer))] = legs else {
                continue;
            };
            // The client's socket is the client leg's, seen from its end;
            // the server's is the server leg's.
            let c = self.addrs.get(&(true, cl_peer.clone(), cl_local.clone()));
            let s = self.addrs.get(&(false, sl_peer.clone(), sl_local.clone()));
            if let (Some(&c), Some(&s)) = (c, s) {
                done.push((*id, c, s));
            }
        }
        for (id, c, s) in done {
            self.legs.remove(&id);
            self.pair(c, s);
        }
    }

    fn pair(&mut self, client: u32, server: u32) {
        self.client_of.insert(server, client);
        self.server_of.insert(client, server);
    }

    /// (client conn, server conn) of every connection seen by both ends'
    /// taps, directly or through a relay, sorted.
    pub(super) fn pairs(&self) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = self.server_of.iter().map(|(c, s)| (*c, *s)).collect();
        out.sort_unstable();
        out
    }

    /// An RPC ended on `side` at `t`; its stream may see frames for
    /// `grace` more (see [`grace`]).
    pub(super) fn rpc_end(&mut self, t: u64, grace: u64, side: Side, conn: u32, stream: u32) {
        let due = t.saturating_add(grace);
        let key = match side {
            Side::Server => Some((conn, stream)),
            Side::Client => self.server_of.get(&conn).map(|s| (*s, stream)),
        };
        if let Some(key) = key {
            let at = &mut self.ends.entry(key).or_default()[side as usize];
            *at = Some(at.map_or(due, |d| d.max(due)));
        }
        self.queue.push(Reverse((due, side, conn, stream)));
    }

    /// A due stream whose taps do not agree yet: due again at `until`.
    pub(super) fn defer(&mut self, d: Due, until: u64) {
        let Some(server) = d.server else { return };
        let key = (server, d.stream);
        self.deferred.insert(key, d.since);
        self.ends.insert(key, [Some(until); 2]);
        self.queue
            .push(Reverse((until, Side::Server, server, d.stream)));
    }

    /// The streams whose every side's end is due by `now`, soonest first.
    pub(super) fn due(&mut self, now: u64, out: &mut Vec<Due>) {
        while let Some(&Reverse((due, side, conn, stream))) = self.queue.peek() {
            if due > now {
                break;
            }
            self.queue.pop();
            let (server, client) = match side {
                Side::Server => (Some(conn), self.client_of.get(&conn).copied()),
                Side::Client => (self.server_of.get(&conn).copied(), Some(conn)),
            };
            let Some(s) = server else {
                // The client's side alone (no server tap on this socket).
                out.push(Due {
                    server: None,
                    client,
                    stream,
                    since: due,
                });
                continue;
            };
            let key = (s, stream);
            let Some(ends) = self.ends.get(&key) else {
                continue; // retired already
            };
            // Every side the trace pairs must have ended; the later end's
            // own entry retires it once its grace passed.
            let last = match (ends[Side::Server as usize], ends[Side::Client as usize]) {
                (Some(s), Some(c)) => s.max(c),
                (Some(s), None) if client.is_none() => s,
                _ => continue,
            };
            if last <= now {
                self.ends.remove(&key);
                out.push(Due {
                    server,
                    client,
                    stream,
                    since: self.deferred.remove(&key).unwrap_or(last),
                });
            }
        }
    }
}

/// The `bytes` check's running count over retired streams.
#[derive(Default)]
pub(super) struct ByteTally {
    pub streams: u64,
    pub cut: u64,
    pub bad: Vec<String>,
    pub bad_count: u64,
}

impl ByteTally {
    pub(super) fn add(&mut self, cut: bool, bad: Option<String>) {
        self.streams += 1;
        self.cut += u64::from(cut);
        if let Some(b) = bad {
            self.bad_count += 1;
            if self.bad.len() < MAX_DETAILS {
                self.bad.push(b);
            }
        }
    }
}

/// The `windows_agree` check's findings on retired streams, per server
/// connection: whether one of its RPCs ended other than OK (the connection
/// is then not compared), and the streams whose final windows differed.
#[derive(Default)]
pub(super) struct AgreeTally {
    pub not_ok: HashSet<u32>,
    pub bad: BTreeMap<u32, (Vec<String>, u64)>,
}

impl AgreeTally {
    pub(super) fn mismatch(&mut self, server_conn: u32, what: String) {
        let (list, n) = self.bad.entry(server_conn).or_default();
        *n += 1;
        if list.len() < MAX_DETAILS {
            list.push(what);
        }
    }
}

/// f64 ordered totally, for the heaps.
#[derive(Clone, Copy, PartialEq, Debug)]
struct Key(f64);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// The least-served streams by one measure: at most
/// [`MAX_STARVED_NAMED`], the largest of them on top.
#[derive(Default)]
struct Least(BinaryHeap<(Key, u32, u32)>);

impl Least {
    fn push(&mut self, x: f64, conn: u32, stream: u32) {
        self.0.push((Key(x), conn, stream));
        if self.0.len() > MAX_STARVED_NAMED {
            self.0.pop();
        }
    }
}

/// Fairness over every stream that carried DATA, by both measures (bytes
/// ÷ offered, used when every stream's demand is known; bytes otherwise).
#[derive(Default)]
pub(super) struct StreamTally {
    n: u64,
    demand_known: bool,
    sum: [f64; 2],
    squares: [f64; 2],
    max: [f64; 2],
    least: [Least; 2],
    listed: Vec<StreamFigures>,
}

/// What the tally gives `summary.json`.
pub(super) struct StreamOutcome {
    pub listed: Vec<StreamFigures>,
    pub count: u64,
    pub fairness: Option<f64>,
    pub basis: Option<&'static str>,
    pub starved: Vec<String>,
    pub starved_truncated: bool,
}

/// The share of its demand a stream got (bytes ÷ offered bytes), when its
/// demand is known. What fairness is judged on when every stream's is;
/// bytes otherwise (different offered rates are not unfairness).
fn share_of_demand(f: &StreamFigures) -> Option<f64> {
    f.offered_bytes
        .filter(|o| *o > 0)
        .map(|o| f.bytes as f64 / o as f64)
}

impl StreamTally {
    pub(super) fn add(&mut self, f: StreamFigures) {
        if self.n == 0 {
            self.demand_known = true;
        }
        self.n += 1;
        let ratio = share_of_demand(&f);
        self.demand_known &= ratio.is_some();
        let mut add = |i: usize, x: f64| {
            self.sum[i] += x;
            self.squares[i] += x * x;
            self.max[i] = self.max[i].max(x);
            self.least[i].push(x, f.conn, f.stream);
        };
        add(0, f.bytes as f64);
        if let Some(r) = ratio {
            add(1, r);
        }
        if self.listed.len() < MAX_LISTED_STREAMS {
            self.listed.push(f);
        }
    }

    /// Jain's index of delivery, (Σx)² / (n·Σx²) (1 when all are equal, 1/n
    /// when one stream got everything; null below two streams or all zero),
    /// the listed streams' fair shares (x ÷ mean x) and the starved ones.
    pub(super) fn finish(self) -> StreamOutcome {
        let i = usize::from(self.demand_known);
        let n = self.n as f64;
        let mean = if self.n > 0 { self.sum[i] / n } else { 0.0 };
        let fairness = (self.n >= 2 && self.squares[i] > 0.0)
            .then(|| self.sum[i] * self.sum[i] / (n * self.squares[i]));
        let share = |x: f64| if mean > 0.0 { x / mean } else { 0.0 };
        let mut listed = self.listed;
        for f in &mut listed {
            let x = match share_of_demand(f) {
                Some(r) if self.demand_known => r,
                _ => f.bytes as f64,
            };
            f.fair_share = share(x);
        }
        listed.sort_by_key(|f| (f.conn, f.stream));
        let (mut starved, mut truncated) = (vec![], false);
        if self.n >= 2 && share(self.max[i]) >= 0.5 {
            let least = &self.least[i].0;
            let mut named: Vec<(u32, u32)> = least
                .iter()
                .filter(|(x, _, _)| share(x.0) < super::streams::STARVED_BELOW)
                .map(|(_, c, s)| (*c, *s))
                .collect();
            // Every stream kept is starved and some were not kept: more may be.
            truncated = least.len() == MAX_STARVED_NAMED
                && named.len() == least.len()
                && (self.n as usize) > least.len();
            named.sort_unstable();
            starved = named.iter().map(|(c, s)| format!("{c}/{s}")).collect();
        }
        StreamOutcome {
            listed,
            count: self.n,
            fairness,
            basis: (self.n > 0).then_some(if self.demand_known {
                "bytes_per_offered"
            } else {
                "bytes"
            }),
            starved,
            starved_truncated: truncated,
        }
    }
}

impl super::Analyzer {
    /// Retires the streams whose every side ended [`RETIRE_AFTER_NS`]
    /// before `t`.
    pub(super) fn retire_due(&mut self, t: u64) {
        let mut due = std::mem::take(&mut self.due);
        self.retirement.due(t, &mut due);
        for d in due.drain(..) {
            if self.settled(&d, t) {
                self.retire(d);
            } else {
                self.retirement.defer(d, t.saturating_add(RETIRE_AFTER_NS));
            }
        }
        self.due = due;
    }

    /// Whether a due stream can be judged now: its taps agree on its c2s
    /// bytes and on its windows both ways (nothing of it is in flight), or
    /// its connection closed on both, or it waited [`MAX_SETTLE_NS`]. A
    /// stream one tap sees waited its grace already.
    fn settled(&self, d: &Due, now: u64) -> bool {
        use super::wire_view::Flow;
        use crate::schema::Endpoint;
        let (Some(cid), Some(sid)) = (d.client, d.server) else {
            return true;
        };
        let (Some(c), Some(s)) = (
            self.conns.get(&(Endpoint::Client, cid)),
            self.conns.get(&(Endpoint::Server, sid)),
        ) else {
            return true;
        };
        if (c.closed && s.closed) || now.saturating_sub(d.since) >= MAX_SETTLE_NS {
            return true;
        }
        let id = d.stream;
        c.data_c2s.get(&id) == s.data_c2s.get(&id)
            && [Flow::C2s, Flow::S2c].into_iter().all(|f| {
                c.flows[f as usize]
                    .tracked(id)
                    .is_none_or(|w| s.flows[f as usize].stream(id) == w)
            })
    }

    /// Judges a finished stream's share of the `bytes` and `windows_agree`
    /// checks, folds its figures into the fairness tally and forgets it.
    fn retire(&mut self, d: Due) {
        use super::wire_view::Flow;
        use crate::schema::Endpoint;
        let id = d.stream;
        if let (Some(cid), Some(sid)) = (d.client, d.server) {
            let out = self
                .conns
                .get(&(Endpoint::Client, cid))
                .and_then(|c| c.data_c2s.get(&id).copied());
            if let Some(out) = out {
                let (cut, bad) = self.byte_verdict(sid, id, out);
                self.bytes_tally.add(cut, bad);
            }
            if let (Some(c), Some(s)) = (
                self.conns.get(&(Endpoint::Client, cid)),
                self.conns.get(&(Endpoint::Server, sid)),
            ) {
                for f in [Flow::C2s, Flow::S2c] {
                    let (a, b) = (&c.flows[f as usize], &s.flows[f as usize]);
                    if let Some(w) = a.tracked(id) {
                        if b.stream(id) != w {
                            let what =
                                format!("{f:?} stream {id}: client {w} vs server {}", b.stream(id));
                            self.agree_tally.mismatch(sid, what);
                        }
                    }
                }
            }
        }
        if let Some(sid) = d.server {
            if self
                .server_status
                .remove(&(sid, id))
                .is_some_and(|st| st != 0)
            {
                self.agree_tally.not_ok.insert(sid);
            }
            let offered = d.client.and_then(|c| self.offered.get(&(c, id)).copied());
            let messages = self.rpcs.remove(&(sid, id)).map_or(0, |r| r.decoded);
            self.pending_stream.remove(&(sid, id));
            if let Some(c) = self.conns.get_mut(&(Endpoint::Server, sid)) {
                if let Some(bytes) = c.data_c2s.remove(&id) {
                    self.stream_tally.add(StreamFigures {
                        conn: sid,
                        stream: id,
                        bytes,
                        messages,
                        offered_bytes: offered,
                        fair_share: 0.0,
                    });
                }
                c.flows.iter_mut().for_each(|w| w.forget(id));
            }
        }
        if let Some(cid) = d.client {
            self.offered.remove(&(cid, id));
            self.exhausted.remove(&(cid, id));
            if let Some(c) = self.conns.get_mut(&(Endpoint::Client, cid)) {
                c.data_c2s.remove(&id);
                c.flows.iter_mut().for_each(|w| w.forget(id));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(conn: u32, stream: u32, bytes: u64, offered: Option<u64>) -> StreamFigures {
        StreamFigures {
            conn,
            stream,
            bytes,
            messages: 0,
            offered_bytes: offered,
            fair_share: 0.0,
        }
    }

    /// The tally gives what `streams::jain` and `delivery` give over the
    /// whole list, listing only the first streams.
    #[test]
    fn the_tally_agrees_with_the_whole_list() {
        let all: Vec<StreamFigures> = (0..3_000u32)
            .map(|i| fig(1, 2 * i + 1, 1_000 + u64::from(i % 7) * 10, Some(2_000)))
            .collect();
        let mut t = StreamTally::default();
        for f in all.iter().rev() {
            t.add(f.clone());
        }
        let out = t.finish();
        // Every demand known: Jain's index of bytes ÷ offered over all.
        let x: Vec<f64> = all.iter().map(|f| f.bytes as f64 / 2_000.0).collect();
        let (sum, squares) = (x.iter().sum::<f64>(), x.iter().map(|v| v * v).sum::<f64>());
        let jain = sum * sum / (x.len() as f64 * squares);
        assert!(
            (out.fairness.unwrap() - jain).abs() < 1e-12,
            "{:?} vs {jain}",
            out.fairness
        );
        assert_eq!(out.count, 3_000);
        assert_eq!(out.listed.len(), MAX_LISTED_STREAMS);
        assert_eq!(out.basis, Some("bytes_per_offered"));
        assert!(out.starved.is_empty() && !out.starved_truncated);
    }

    /// Jain's index against hand-computed values (bytes alone: no demand).
    #[test]
    fn jain_index_against_hand_computed_values() {
        let jain = |bytes: &[u64]| {
            let mut t = StreamTally::default();
            for (i, b) in bytes.iter().enumerate() {
                t.add(fig(1, 2 * i as u32 + 1, *b, None));
            }
            t.finish().fairness
        };
        assert_eq!(jain(&[5, 5, 5, 5]), Some(1.0));
        // One of four streams got everything: 1/4.
        assert_eq!(jain(&[8, 0, 0, 0]), Some(0.25));
        // (1+2+3)² / (3 · (1+4+9)) = 36 / 42.
        assert!((jain(&[1, 2, 3]).unwrap() - 36.0 / 42.0).abs() < 1e-12);
        // Three equal, one starved: 9² / (4 · 27) = 0.75.
        assert_eq!(jain(&[3, 3, 3, 0]), Some(0.75));
        assert_eq!(jain(&[7]), None);
        assert_eq!(jain(&[0, 0]), None);
    }

    /// Starved streams are named whenever they are retired; past the cap,
    /// the outcome says more may be starved.
    #[test]
    fn starved_streams_are_named_and_a_cap_is_said() {
        let mut t = StreamTally::default();
        for i in 0..100u32 {
            t.add(fig(1, 2 * i + 1, if i == 40 { 5 } else { 1_000 }, None));
        }
        let out = t.finish();
        assert_eq!(out.starved, vec!["1/81".to_string()]);
        assert_eq!(out.basis, Some("bytes"));
        let mut t = StreamTally::default();
        for i in 0..(MAX_STARVED_NAMED as u32 + 10) {
            t.add(fig(1, 2 * i + 1, 1, None));
        }
        for i in 0..20_000u32 {
            t.add(fig(2, 2 * i + 1, 100_000, None));
        }
        let out = t.finish();
        assert_eq!(out.starved.len(), MAX_STARVED_NAMED);
        assert!(out.starved_truncated);
    }

    /// A long paired trace: 3,000 RPCs 10 ms apart, each on its own
    /// stream of one connection seen by both taps. The per-stream maps hold
    /// the RPCs of about the last second, not all of them, and a byte
    /// mismatch on a stream retired long before the end still fails both
    /// checks it touches.
    #[test]
    fn retired_streams_are_judged_and_forgotten() {
        use crate::schema::*;
        let ev = |t: u64, ep: Endpoint, conn: u32, stream: u32, kind: Kind| Event {
            t,
            ep,
            conn,
            stream,
            kind,
        };
        let data = |dir: Dir, len: u32| {
            Kind::Frame(FrameEv {
                dir,
                frame: FrameType::DATA,
                len,
                ..FrameEv::default()
            })
        };
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut a = super::super::Analyzer::new(0);
        let open = |local: &str, peer: &str| {
            Kind::ConnOpen(ConnOpenEv {
                local: local.into(),
                peer: peer.into(),
            })
        };
        a.feed(&ev(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        a.feed(&ev(2, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        let end = |status| {
            Kind::RpcEnd(RpcEndEv {
                status,
                message: String::new(),
            })
        };
        let mut most = 0;
        let n = 3_000u32;
        for i in 0..n {
            let (t, id) = (1_000 + u64::from(i) * 10_000_000, 2 * i + 1);
            let got = if id == 11 { 90 } else { 100 };
            a.feed(&ev(t, c, 1, id, data(Dir::Out, 100)));
            a.feed(&ev(t + 1_000, s, 2, id, data(Dir::In, got)));
            a.feed(&ev(t + 2_000, s, 2, id, Kind::Chunk(ChunkEv { len: got })));
            a.feed(&ev(t + 3_000, s, 2, id, end(0)));
            a.feed(&ev(t + 4_000, c, 1, id, end(0)));
            let held = a.rpcs.len()
                + a.server_status.len()
                + a.conns.values().map(|x| x.data_c2s.len()).sum::<usize>();
            most = most.max(held);
        }
        // About 100 RPCs end per second on each of four maps.
        assert!(most < 4 * 110, "{most} per-stream entries held at once");
        let (sum, _) = a.finish(0, &crate::reader::Ending::Clean(Footer::default()));
        assert_eq!(sum.stream_count, u64::from(n));
        assert_eq!(sum.streams.len(), MAX_LISTED_STREAMS);
        let bytes = &sum.checks["bytes"];
        assert_eq!(bytes.ok, Some(false), "{}", bytes.detail);
        assert_eq!(
            bytes.detail,
            "stream 11: client out 100, server in 90, app 90"
        );
        let agree = &sum.checks["windows_agree"];
        assert_eq!(agree.ok, Some(false), "{}", agree.detail);
        assert!(
            agree
                .detail
                .contains("C2s stream 11: client 65435 vs server 65445"),
            "{}",
            agree.detail
        );
    }

    /// A stream is due once every side the trace pairs ended it and the
    /// grace passed after the later end; the client's side alone retires
    /// when no server tap shares its socket.
    #[test]
    fn a_stream_is_due_after_both_ends_and_the_grace() {
        let g = RETIRE_AFTER_NS;
        let mut r = Retirement::default();
        r.conn_open(Side::Client, 1, "127.0.0.1:5000", "127.0.0.1:80");
        r.conn_open(Side::Server, 2, "127.0.0.1:80", "127.0.0.1:5000");
        r.conn_open(Side::Client, 3, "127.0.0.1:5001", "127.0.0.1:81");
        r.rpc_end(10, g, Side::Server, 2, 1);
        r.rpc_end(20, g, Side::Client, 1, 1);
        r.rpc_end(30, g, Side::Client, 3, 1);
        let mut out = vec![];
        r.due(10 + g, &mut out);
        assert!(out.is_empty(), "the client's end is 10 ns later: {out:?}");
        r.due(20 + g, &mut out);
        let both = Due {
            server: Some(2),
            client: Some(1),
            stream: 1,
            since: 20 + g,
        };
        assert_eq!(out, vec![both]);
        out.clear();
        r.due(30 + g, &mut out);
        assert_eq!(
            out,
            vec![Due {
                server: None,
                client: Some(3),
                stream: 1,
                since: 30 + g,
            }]
        );
        // Deferred (its taps disagreed): due again later, since unchanged.
        out.clear();
        r.defer(both, 40 + 2 * g);
        r.due(40 + g, &mut out);
        assert!(out.is_empty(), "{out:?}");
        r.due(40 + 2 * g, &mut out);
        assert_eq!(out, vec![both]);
        // A longer grace (a slow link's round trip) holds a stream longer,
        // however the ends arrive.
        out.clear();
        r.rpc_end(50, 5 * g, Side::Server, 2, 5);
        r.rpc_end(60, g, Side::Client, 1, 5);
        r.due(60 + g, &mut out);
        assert!(out.is_empty(), "{out:?}");
        r.due(50 + 5 * g, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        // A server stream whose client never ended stays.
        r.rpc_end(40, g, Side::Server, 2, 3);
        out.clear();
        r.due(40 + 10 * g, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    /// Builds traces for the tests below.
    mod trace {
        pub use crate::schema::*;
        pub fn ev(t: u64, ep: Endpoint, conn: u32, stream: u32, kind: Kind) -> Event {
            Event {
                t,
                ep,
                conn,
                stream,
                kind,
            }
        }
        pub fn frame(dir: Dir, ty: FrameType, len: u32) -> Kind {
            Kind::Frame(FrameEv {
                dir,
                frame: ty,
                len,
                ..FrameEv::default()
            })
        }
        pub fn open(local: &str, peer: &str) -> Kind {
            Kind::ConnOpen(ConnOpenEv {
                local: local.into(),
                peer: peer.into(),
            })
        }
        pub fn end() -> Kind {
            Kind::RpcEnd(RpcEndEv {
                status: 0,
                message: String::new(),
            })
        }
    }

    /// A paired stream's last DATA still on a slow link when both sides
    /// ended (the server cut the RPC, the client's frames in flight): the
    /// stream waits for its taps to agree, then counts once, whole.
    #[test]
    fn frames_in_flight_after_both_ends_land_before_the_stream_is_judged() {
        use trace::*;
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut a = super::super::Analyzer::new(0);
        a.feed(&ev(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        a.feed(&ev(2, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        let sec = 1_000_000_000;
        a.feed(&ev(10, c, 1, 1, frame(Dir::Out, FrameType::DATA, 100)));
        a.feed(&ev(20, c, 1, 1, frame(Dir::Out, FrameType::DATA, 100)));
        let chunk = || Kind::Chunk(ChunkEv { len: 100 });
        a.feed(&ev(
            1_500_000,
            s,
            2,
            1,
            frame(Dir::In, FrameType::DATA, 100),
        ));
        a.feed(&ev(1_500_001, s, 2, 1, chunk()));
        a.feed(&ev(1_600_000, s, 2, 1, end()));
        a.feed(&ev(1_700_000, c, 1, 1, end()));
        // The second DATA crosses a 1.5 s link: it lands 1.5 s after the ends.
        a.feed(&ev(
            sec + 1_500_000_020,
            s,
            2,
            1,
            frame(Dir::In, FrameType::DATA, 100),
        ));
        a.feed(&ev(sec + 1_500_000_021, s, 2, 1, chunk()));
        a.feed(&ev(3 * sec, c, 1, 3, frame(Dir::Out, FrameType::DATA, 1)));
        a.feed(&ev(
            3 * sec + 1,
            s,
            2,
            3,
            frame(Dir::In, FrameType::DATA, 1),
        ));
        let (sum, _) = a.finish(0, &crate::reader::Ending::Clean(Footer::default()));
        assert_eq!(sum.stream_count, 2, "{:?}", sum.streams);
        assert_eq!(sum.streams[0].bytes, 200);
        let bytes = &sum.checks["bytes"];
        assert_eq!(bytes.ok, Some(true), "{}", bytes.detail);
        let agree = &sum.checks["windows_agree"];
        assert_eq!(agree.ok, Some(true), "{}", agree.detail);
    }

    /// One tap alone: the stream waits twice the round trip the tap
    /// measured (its SETTINGS to the ACK), here 1.2 s, so DATA the peer
    /// sent before it learned of the end still counts in its stream.
    #[test]
    fn one_tap_waits_twice_its_measured_round_trip() {
        use trace::*;
        let s = Endpoint::Server;
        let sec = 1_000_000_000u64;
        let run = |rtt: u64| {
            let mut a = super::super::Analyzer::new(0);
            a.feed(&ev(1, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
            a.feed(&ev(2, s, 2, 0, frame(Dir::Out, FrameType::SETTINGS, 0)));
            let ack = Kind::Frame(FrameEv {
                dir: Dir::In,
                frame: FrameType::SETTINGS,
                flags: flags::ACK,
                ..FrameEv::default()
            });
            a.feed(&ev(2 + rtt, s, 2, 0, ack));
            let t0 = 2 * sec;
            a.feed(&ev(t0, s, 2, 1, frame(Dir::In, FrameType::DATA, 100)));
            a.feed(&ev(t0 + 10, s, 2, 1, end()));
            a.feed(&ev(
                t0 + 1_100_000_000,
                s,
                2,
                1,
                frame(Dir::In, FrameType::DATA, 100),
            ));
            a.feed(&ev(
                t0 + 4 * sec,
                s,
                2,
                3,
                frame(Dir::In, FrameType::DATA, 1),
            ));
            a.finish(0, &crate::reader::Ending::Clean(Footer::default()))
                .0
        };
        let slow = run(1_200_000_000);
        assert_eq!(slow.stream_count, 2, "{:?}", slow.streams);
        assert_eq!(slow.streams[0].bytes, 200);
        // On a fast link the grace is the floor, 1 s: the late frame comes
        // after it and is a stream of its own (what the floor is for).
        let fast = run(100_000);
        assert_eq!(fast.stream_count, 3, "{:?}", fast.streams);
    }

    /// Taps that never agree (a real mismatch, the connection still open)
    /// hold their stream [`MAX_SETTLE_NS`] at most: then it is judged, and
    /// fails.
    #[test]
    fn a_mismatch_on_an_open_connection_is_judged_after_the_settle_limit() {
        use trace::*;
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut a = super::super::Analyzer::new(0);
        a.feed(&ev(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        a.feed(&ev(2, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        a.feed(&ev(10, c, 1, 1, frame(Dir::Out, FrameType::DATA, 100)));
        a.feed(&ev(11, s, 2, 1, frame(Dir::In, FrameType::DATA, 90)));
        a.feed(&ev(20, s, 2, 1, end()));
        a.feed(&ev(30, c, 1, 1, end()));
        let held = |a: &super::super::Analyzer| {
            a.conns
                .values()
                .filter(|x| x.data_c2s.contains_key(&1))
                .count()
        };
        let ping = |t| ev(t, s, 2, 0, frame(Dir::In, FrameType::PING, 8));
        a.feed(&ping(30 + MAX_SETTLE_NS / 2));
        assert_eq!(held(&a), 2, "still waiting for the taps to agree");
        a.feed(&ping(
            30 + RETIRE_AFTER_NS + MAX_SETTLE_NS + RETIRE_AFTER_NS,
        ));
        assert_eq!(held(&a), 0, "judged and forgotten");
        let (sum, _) = a.finish(0, &crate::reader::Ending::Clean(Footer::default()));
        let bytes = &sum.checks["bytes"];
        assert_eq!(bytes.ok, Some(false), "{}", bytes.detail);
    }
}
