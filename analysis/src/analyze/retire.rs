//! Memory that follows the open streams, not the trace: once a stream's RPC
//! has ended on every side the trace holds (and [`RETIRE_AFTER_NS`] has
//! passed, for frames h2 flushes after the handler recorded the end), its
//! per-stream checks are judged and its figures folded into running tallies
//! here, and its state leaves every per-stream map.
//!
//! What is judged at retirement is what `finish` would judge as long as no
//! frame of the stream arrives later. So a stream both taps see waits until
//! they agree on its bytes and windows (frames still in flight on a slow
//! link land first), until its connection closed on both, or until its
//! bytes stopped moving for [`MAX_SETTLE_NS`]; a stream one tap sees waits
//! twice the round trip that tap knows on its connection (see [`grace`]).
//! A frame that still comes later is counted as late, in the connection's
//! windows and totals but not as a second stream (`wire_view::RetiredIds`).
//! Events come in `t` order (the reorder window), so "passed" is on `t`.

use super::summary::StreamFigures;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};

/// How long after a side ended an RPC its stream may still see frames (a
/// WINDOW_UPDATE h2 flushes after the handler recorded the end, the last
/// frames on the other tap's side of the socket), at least.
pub(super) const RETIRE_AFTER_NS: u64 = 1_000_000_000;

/// How long a stream both taps see may wait, its bytes not moving, for the
/// taps to agree before it is judged as it stands (a real mismatch, or
/// frames one tap never saw on a connection still open).
pub(super) const MAX_SETTLE_NS: u64 = 60_000_000_000;

/// The wait after the later end, given the round trip the tap knows on the
/// connection (the longest it measured, or the age of a SETTINGS or PING
/// still unacknowledged): frames the peer sent before it learned of the
/// end arrive within one. At most [`MAX_SETTLE_NS`]: a peer that never
/// acknowledges (a hostile one, or not HTTP/2 at all) holds nothing longer.
pub(super) fn grace(rtt_ns: u64) -> u64 {
    RETIRE_AFTER_NS
        .max(rtt_ns.saturating_mul(2))
        .min(MAX_SETTLE_NS)
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
    /// Ends to look at, soonest first.
    queue: BinaryHeap<Reverse<Pending>>,
    /// Per server (conn, stream): when each side ended it.
    ends: HashMap<(u32, u32), [Option<u64>; 2]>,
    /// Per server (conn, stream) due but not yet settled: since when, and
    /// what it had moved then (see [`Due`]).
    deferred: HashMap<(u32, u32), (u64, u64)>,
    /// Server conn → client conn on the same socket, and back.
    client_of: HashMap<u32, u32>,
    server_of: HashMap<u32, u32>,
    /// (is client, local, peer) of every connection seen, to pair the next.
    addrs: HashMap<(bool, String, String), u32>,
    /// A relay's connection pairs not yet matched with both endpoints:
    /// (local, peer) of its client leg and of its server leg, by pair id.
    legs: HashMap<u32, [Option<(String, String)>; 2]>,
    /// The endpoint socket each unmatched leg carries, keyed as `addrs`
    /// is: (is client, the endpoint's local, its peer) → pair id.
    leg_of: HashMap<(bool, String, String), u32>,
    /// Pairs among `legs` whose legs closed, their client in the trace:
    /// pair id → that client's connection, waiting for a server that
    /// accepts late; and the other way round. The pair is that connection's
    /// even if a later one on the same ports (a port reused within the
    /// grace) took its address, and is forgotten when it retires.
    waiting: HashMap<u32, u32>,
    waiting_pair: HashMap<u32, u32>,
    /// Server connections whose close the trace holds, until they retire:
    /// a client opening later on their ports is another connection's (a
    /// port reused within the grace, its server's conn_open still to come).
    closed_servers: HashSet<u32>,
}

/// (due, side, conn, stream, end): a side's end of a stream, to look at
/// when due.
type Pending = (u64, Side, u32, u32, u64);

/// A stream to retire now: its server (conn) and client (conn) sides, as
/// far as the trace has them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Due {
    pub server: Option<u32>,
    pub client: Option<u32>,
    pub stream: u32,
    /// The later of its ends.
    pub end: u64,
    /// Since when it is due with its bytes not moving.
    pub since: u64,
    /// Its DATA bytes on both taps when last looked at (`u64::MAX`: not
    /// yet).
    pub moved: u64,
}

impl Retirement {
    /// A connection's addresses (`conn_open`): pairs it with the other
    /// tap's connection on the same socket, or through a relay's pair.
    pub(super) fn conn_open(&mut self, side: Side, conn: u32, local: &str, peer: &str) {
        // An unnamed Unix end names no connection: every one looks alike.
        let unnamed = crate::schema::UNIX_UNNAMED;
        if local.is_empty() || local == unnamed || peer == unnamed {
            return;
        }
        let client = side == Side::Client;
        let other = (!client, peer.to_string(), local.to_string());
        if let Some(&o) = self.addrs.get(&other) {
            // One already paired is an earlier connection on the same ports
            // (a port reused while it is still held): this one's partner
            // opens next.
            let taken = if client {
                self.client_of.contains_key(&o) || self.closed_servers.contains(&o)
            } else {
                self.server_of.contains_key(&o)
            };
            if !taken {
                let (c, s) = if client { (conn, o) } else { (o, conn) };
                self.pair(c, s);
            }
        }
        let key = (client, local.to_string(), peer.to_string());
        let leg_pair = self.leg_of.get(&key).copied();
        self.addrs.insert(key, conn);
        if let Some(id) = leg_pair {
            self.match_legs(id);
        }
    }

    /// A server connection's close is in the trace (see `closed_servers`).
    pub(super) fn server_closed(&mut self, conn: u32) {
        self.closed_servers.insert(conn);
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
        // The endpoint on this leg's socket, seen from its end.
        let endpoint = (!server_leg, peer.to_string(), local.to_string());
        self.leg_of.insert(endpoint, pair);
        self.match_legs(pair);
    }

    /// A relay leg closed. A pair whose client the trace does not hold
    /// (it opened before the relay accepted it) is never matched, and is
    /// forgotten: a relay's own trace keeps no pair. One whose client it
    /// holds waits for its server, which may accept the relay's
    /// connection after the legs closed (its backlog): until the client's
    /// connection is retired (see [`Self::awaits_relay_server`]).
    pub(super) fn leg_closed(&mut self, pair: u32) {
        if self.waiting.contains_key(&pair) {
            // Its other leg: the client is the one its first close found
            // (a later one may have taken the ports between the two).
            return;
        }
        // Without a server leg (the upstream connect failed) nothing will
        // accept it: forgotten, its client kept no longer than any other.
        let client = match self.legs.get(&pair) {
            Some([Some((local, peer)), Some(_)]) => self
                .addrs
                .get(&(true, peer.clone(), local.clone()))
                .copied(),
            Some(_) => None,
            None => return,
        };
        match client {
            Some(conn) => {
                if let Some(&other) = self.waiting_pair.get(&conn) {
                    // One client waits for one pair (an edited trace).
                    self.forget_pair(other);
                }
                self.waiting.insert(pair, conn);
                self.waiting_pair.insert(conn, pair);
            }
            None => self.forget_pair(pair),
        }
    }

    /// Whether client connection (`local`, `peer`) reaches a relay whose
    /// pair is not matched with a server yet: it is kept (for at most
    /// [`MAX_SETTLE_NS`] after its close) so that a server accepting late
    /// is still paired with it.
    pub(super) fn awaits_relay_server(&self, conn: u32, local: &str, peer: &str) -> bool {
        self.waiting_pair.contains_key(&conn)
            || self
                .leg_of
                .contains_key(&(true, local.to_string(), peer.to_string()))
    }

    /// Forgets relay pair `id`'s legs, and the endpoint sockets they name
    /// unless a later pair on the same ports took them.
    fn forget_pair(&mut self, id: u32) {
        if let Some(conn) = self.waiting.remove(&id) {
            self.waiting_pair.remove(&conn);
        }
        let Some(legs) = self.legs.remove(&id) else {
            return;
        };
        for (server_leg, leg) in [(false, legs[0].as_ref()), (true, legs[1].as_ref())] {
            if let Some((local, peer)) = leg {
                let key = (!server_leg, peer.clone(), local.clone());
                if self.leg_of.get(&key) == Some(&id) {
                    self.leg_of.remove(&key);
                }
            }
        }
    }

    /// Pairs the endpoints of relay pair `id` once its two legs and two
    /// endpoints have all been seen (looked up by address: a relay-only
    /// trace of 20,000 pairs looked at every unmatched pair at each
    /// open, 25 s for what takes 0.3 s).
    fn match_legs(&mut self, id: u32) {
        let Some([Some((cl_local, cl_peer)), Some((sl_local, sl_peer))]) = self.legs.get(&id)
        else {
            return;
        };
        // The client's socket is the client leg's, seen from its end (or
        // the client it had when its legs closed: a later one may have
        // taken the ports since); the server's is the server leg's. One
        // already paired is an earlier connection on the same ports: this
        // pair's opens next.
        let c = self
            .waiting
            .get(&id)
            .or_else(|| self.addrs.get(&(true, cl_peer.clone(), cl_local.clone())))
            .filter(|c| !self.server_of.contains_key(c));
        let s = self
            .addrs
            .get(&(false, sl_peer.clone(), sl_local.clone()))
            .filter(|s| !self.client_of.contains_key(s));
        if let (Some(&c), Some(&s)) = (c, s) {
            self.forget_pair(id);
            self.pair(c, s);
        }
    }

    fn pair(&mut self, client: u32, server: u32) {
        self.client_of.insert(server, client);
        self.server_of.insert(client, server);
    }

    /// The server tap's connection on the socket of client connection `c`.
    pub(super) fn server_of(&self, c: u32) -> Option<u32> {
        self.server_of.get(&c).copied()
    }

    /// The client tap's connection on the socket of server connection `s`.
    pub(super) fn client_of(&self, s: u32) -> Option<u32> {
        self.client_of.get(&s).copied()
    }

    /// A retired pair leaves the pairing (`pairs` lists open ones).
    pub(super) fn unpair(&mut self, client: u32, server: u32) {
        self.server_of.remove(&client);
        self.client_of.remove(&server);
    }

    /// A retired connection's addresses: a later connection on the same
    /// ports is a new one. Whether one such is open already (it shares the
    /// socket's state, frames in flight).
    pub(super) fn forget_addrs(
        &mut self,
        client: bool,
        conn: u32,
        local: &str,
        peer: &str,
    ) -> bool {
        if !client {
            self.closed_servers.remove(&conn);
        }
        let key = (client, local.to_string(), peer.to_string());
        let newer = match self.addrs.get(&key) {
            Some(&c) if c == conn => {
                self.addrs.remove(&key);
                false
            }
            other => other.is_some(),
        };
        // A relay pair that waited for its server with this client.
        if let Some(&pair) = self.waiting_pair.get(&conn).filter(|_| client) {
            self.forget_pair(pair);
        }
        newer
    }

    /// (client conn, server conn) of every connection seen by both ends'
    /// taps, directly or through a relay, sorted.
    pub(super) fn pairs(&self) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = self.server_of.iter().map(|(c, s)| (*c, *s)).collect();
        out.sort_unstable();
        out
    }

    /// An RPC ended on `side` at `t`: its stream is due [`RETIRE_AFTER_NS`]
    /// after its later end, and then checked ([`super::Analyzer::settled`]).
    pub(super) fn rpc_end(&mut self, t: u64, side: Side, conn: u32, stream: u32) {
        let key = match side {
            Side::Server => Some((conn, stream)),
            Side::Client => self.server_of.get(&conn).map(|s| (*s, stream)),
        };
        if let Some(key) = key {
            let at = &mut self.ends.entry(key).or_default()[side as usize];
            *at = Some(at.map_or(t, |e| e.max(t)));
        }
        let due = t.saturating_add(RETIRE_AFTER_NS);
        self.queue.push(Reverse((due, side, conn, stream, t)));
    }

    /// A due stream not settled yet: due again at `until`.
    pub(super) fn defer(&mut self, d: Due, until: u64) {
        let (side, conn) = match (d.server, d.client) {
            (Some(s), _) => {
                let key = (s, d.stream);
                self.deferred.insert(key, (d.since, d.moved));
                let ends = self.ends.entry(key).or_default();
                ends[Side::Server as usize] = Some(d.end);
                if d.client.is_some() {
                    ends[Side::Client as usize] = Some(d.end);
                }
                (Side::Server, s)
            }
            (None, Some(c)) => (Side::Client, c),
            (None, None) => return,
        };
        self.queue
            .push(Reverse((until.max(d.end), side, conn, d.stream, d.end)));
    }

    /// The streams whose every side ended [`RETIRE_AFTER_NS`] before `now`
    /// (or that were deferred to `now`), soonest first.
    pub(super) fn due(&mut self, now: u64, out: &mut Vec<Due>) {
        while let Some(&Reverse((due, side, conn, stream, end))) = self.queue.peek() {
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
                    end,
                    since: due,
                    moved: u64::MAX,
                });
                continue;
            };
            let key = (s, stream);
            let Some(ends) = self.ends.get(&key) else {
                continue; // retired already
            };
            // Every side the trace pairs must have ended; the later end's
            // own entry makes it due.
            let last = match (ends[Side::Server as usize], ends[Side::Client as usize]) {
                (Some(s), Some(c)) => s.max(c),
                (Some(s), None) if client.is_none() => s,
                _ => continue,
            };
            if last <= end {
                self.ends.remove(&key);
                // Due since its entry's time; its bytes not yet measured.
                let (since, moved) = self.deferred.remove(&key).unwrap_or((due, u64::MAX));
                out.push(Due {
                    server,
                    client,
                    stream,
                    end: last,
                    since,
                    moved,
                });
            }
        }
    }
}

/// The `bytes` check's running count over retired streams.
#[derive(Default, Clone)]
pub(super) struct ByteTally {
    pub streams: u64,
    pub cut: u64,
    /// Streams not judged (one-sided, client: not ended by the client).
    pub unjudged: u64,
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

    /// A one-sided verdict: `None` is a stream not judged.
    pub(super) fn add_own(&mut self, verdict: Option<(bool, Option<String>)>) {
        match verdict {
            Some((cut, bad)) => self.add(cut, bad),
            None => self.unjudged += 1,
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

/// Fairness over every stream that carried DATA or was offered bytes, by
/// both measures (bytes ÷ offered, used when every stream's demand is
/// known; bytes otherwise), up to the first stall when there was one.
#[derive(Default)]
pub(super) struct StreamTally {
    n: u64,
    /// Streams offered bytes that carried none.
    empty: u64,
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
    pub empty: u64,
    pub fairness: Option<f64>,
    pub basis: Option<&'static str>,
    pub starved: Vec<String>,
    pub starved_truncated: bool,
}

/// The share of its demand a stream got (bytes ÷ offered bytes), when its
/// demand is known. What fairness is judged on when every stream's is;
/// bytes otherwise (different offered rates are not unfairness).
fn share_of_demand(f: &StreamFigures) -> Option<f64> {
    f.demand()
        .filter(|o| *o > 0)
        .map(|o| f.served_bytes() as f64 / o as f64)
}

impl StreamTally {
    pub(super) fn add(&mut self, f: StreamFigures) {
        if f.served_bytes() == 0 && f.demand() == Some(0) {
            // Opened after the first stall: no part of the service judged.
            return;
        }
        if self.n == 0 {
            self.demand_known = true;
        }
        self.n += 1;
        self.empty += u64::from(f.bytes == 0 && f.offered_bytes.is_some_and(|o| o > 0));
        let ratio = share_of_demand(&f);
        self.demand_known &= ratio.is_some();
        let mut add = |i: usize, x: f64| {
            self.sum[i] += x;
            self.squares[i] += x * x;
            self.max[i] = self.max[i].max(x);
            self.least[i].push(x, f.conn, f.stream);
        };
        add(0, f.served_bytes() as f64);
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
                _ => f.served_bytes() as f64,
            };
            f.fair_share = share(x);
        }
        listed.sort_by_key(|f| (f.conn, f.stream));
        let (mut starved, mut truncated) = (vec![], false);
        // Starvation is judged against demand: without the client's side a
        // stream offered 5/s beside others at 100/s would read as starved.
        if self.n >= 2 && self.demand_known && share(self.max[i]) >= 0.5 {
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
            empty: self.empty,
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
    /// Retires the streams due by `t` that are settled (see
    /// [`Self::settled`]); the others are looked at again later.
    pub(super) fn retire_due(&mut self, t: u64) {
        let mut due = std::mem::take(&mut self.due);
        self.retirement.due(t, &mut due);
        for mut d in due.drain(..) {
            match self.settled(&mut d, t) {
                None => self.retire(d),
                Some(until) => self.retirement.defer(d, until),
            }
        }
        self.due = due;
    }

    /// Whether a due stream can be judged now (`None`), or when to look
    /// again. Both taps: once they agree on its c2s bytes and on its
    /// windows both ways (nothing of it in flight), its connection closed
    /// on both, or its bytes stood still for [`MAX_SETTLE_NS`]; else in a
    /// second. One tap: once [`grace`] passed after its end, with the round
    /// trip that tap knows now.
    fn settled(&self, d: &mut Due, now: u64) -> Option<u64> {
        use super::wire_view::Flow;
        use crate::schema::Endpoint;
        let again = now.saturating_add(RETIRE_AFTER_NS);
        let id = d.stream;
        let (c, s) = (
            d.client
                .and_then(|c| self.conns.get(&(Endpoint::Client, c))),
            d.server
                .and_then(|s| self.conns.get(&(Endpoint::Server, s))),
        );
        let (c, s) = match (c, s) {
            (Some(c), Some(s)) => (c, s),
            (Some(one), None) | (None, Some(one)) => {
                // After the end, and after its frames stopped coming (a
                // queued link drains at its own pace: four of its last gaps).
                let g = grace(one.round_trip(now));
                let (prev, last) = one.seen.get(&id).copied().unwrap_or_default();
                let quiet = g
                    .max(last.saturating_sub(prev).saturating_mul(4))
                    .min(MAX_SETTLE_NS);
                let wait = d.end.saturating_add(g).max(last.saturating_add(quiet));
                return (wait > now).then_some(wait);
            }
            (None, None) => return None,
        };
        if c.closed.is_some() && s.closed.is_some() {
            return None;
        }
        let (out, got) = (c.data_c2s.get(&id), s.data_c2s.get(&id));
        let agree = out == got
            && [Flow::C2s, Flow::S2c].into_iter().all(|f| {
                c.flows[f as usize]
                    .tracked(id)
                    .is_none_or(|w| s.flows[f as usize].stream(id) == w)
            });
        if agree {
            return None;
        }
        let moved = out.copied().unwrap_or(0) + got.copied().unwrap_or(0);
        if d.moved != u64::MAX && moved != d.moved {
            d.since = now;
        }
        d.moved = moved;
        (now.saturating_sub(d.since) < MAX_SETTLE_NS).then_some(again)
    }

    /// Judges a finished stream's share of the `bytes` and `windows_agree`
    /// checks, folds its figures into the fairness tally and forgets it.
    fn retire(&mut self, d: Due) {
        use super::wire_view::Flow;
        use crate::schema::Endpoint;
        let id = d.stream;
        // Its share of `bytes`: across the taps when paired, else its
        // side's own (see `checks`).
        match (d.client, d.server) {
            (Some(cid), None) if self.carried(Endpoint::Client, cid, id) => {
                self.own_bytes[1].add_own(self.own_client_bytes(cid, id));
            }
            (None, Some(sid)) if self.carried(Endpoint::Server, sid, id) => {
                self.own_bytes[0].add_own(Some(self.own_server_bytes(sid, id)));
            }
            (Some(cid), Some(sid)) if self.pair_carried(cid, sid, id) => {
                let (cut, bad) = self.byte_verdict(cid, sid, id);
                self.bytes_tally.add(cut, bad);
            }
            _ => {}
        }
        if let (Some(cid), Some(sid)) = (d.client, d.server) {
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
            // Its figures, and a stream its client offered bytes on that
            // carried none is one too (it was left out of the fairness it
            // was the victim of).
            let carried = self
                .conns
                .get(&(Endpoint::Server, sid))
                .and_then(|c| c.data_c2s.get(&id).copied());
            let offered = d.client.and_then(|c| self.offered.get(&(c, id)).copied());
            if carried.is_some() || offered.is_some_and(|o| o > 0) {
                let f = self.stream_figure(sid, d.client, id, carried.unwrap_or(0));
                self.stream_tally.add(f);
            }
            self.rpcs.remove(&(sid, id));
            self.after_stall.bytes.remove(&(sid, id));
            self.pending_stream.remove(&(sid, id));
            if let Some(c) = self.conns.get_mut(&(Endpoint::Server, sid)) {
                c.open_rpcs.remove(&id);
                c.data_c2s.remove(&id);
                c.flows.iter_mut().for_each(|w| w.forget(id));
                c.retired.insert(id);
                c.seen.remove(&id);
            }
        }
        if let Some(cid) = d.client {
            self.offered.remove(&(cid, id));
            self.after_stall.offered.remove(&(cid, id));
            self.client_messages.remove(&(cid, id));
            self.exhausted.remove(&(cid, id));
            if let Some(c) = self.conns.get_mut(&(Endpoint::Client, cid)) {
                c.open_rpcs.remove(&id);
                c.data_c2s.remove(&id);
                c.ended_c2s.remove(&id);
                c.not_open.remove(&id);
                c.flows.iter_mut().for_each(|w| w.forget(id));
                c.retired.insert(id);
                c.seen.remove(&id);
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
            bytes_before_stall: None,
            offered_before_stall: None,
            scheduled: None,
            sent: None,
            never_sent: None,
            completed: 0,
            discarded: 0,
            fair_share: 0.0,
        }
    }

    /// A connection's window mismatches are all counted and the first
    /// `MAX_DETAILS` of them named.
    #[test]
    fn window_mismatches_name_the_first_twenty_and_count_all() {
        let mut t = AgreeTally::default();
        for i in 0..=MAX_DETAILS {
            t.mismatch(3, format!("stream {i}"));
        }
        t.mismatch(5, "stream 1".to_string());
        let (list, n) = &t.bad[&3];
        assert_eq!((list.len(), *n), (MAX_DETAILS, MAX_DETAILS as u64 + 1));
        assert_eq!(list.last().map(String::as_str), Some("stream 19"));
        assert_eq!(t.bad[&5], (vec!["stream 1".to_string()], 1));
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

    /// Fairness is judged on bytes ÷ demand only when every stream's
    /// demand is known, the first's included; a stream that carried
    /// nothing and was offered nothing (opened after the first stall) has
    /// no part in it.
    #[test]
    fn demand_is_the_basis_only_when_every_stream_has_one() {
        let basis = |figs: &[(u64, Option<u64>)]| {
            let mut t = StreamTally::default();
            for (i, (bytes, offered)) in figs.iter().enumerate() {
                t.add(fig(1, 2 * i as u32 + 1, *bytes, *offered));
            }
            let out = t.finish();
            (out.basis, out.count)
        };
        assert_eq!(basis(&[(5, Some(10))]), (Some("bytes_per_offered"), 1));
        assert_eq!(basis(&[(5, None), (5, Some(10))]), (Some("bytes"), 2));
        assert_eq!(basis(&[(5, Some(10)), (5, None)]), (Some("bytes"), 2));
        assert_eq!(
            basis(&[(0, Some(0)), (5, Some(10))]),
            (Some("bytes_per_offered"), 1)
        );
        assert_eq!(basis(&[(5, Some(0)), (5, Some(10))]), (Some("bytes"), 2));
        assert_eq!(basis(&[(0, Some(0))]), (None, 0));
    }

    /// A listed stream's fair share is its measure over the mean of all:
    /// bytes ÷ offered when every demand is known, bytes otherwise; 0,
    /// not NaN, when nothing was carried.
    #[test]
    fn a_fair_share_is_a_streams_part_of_the_mean() {
        let shares = |figs: &[(u64, Option<u64>)]| -> Vec<f64> {
            let mut t = StreamTally::default();
            for (i, (bytes, offered)) in figs.iter().enumerate() {
                t.add(fig(1, 2 * i as u32 + 1, *bytes, *offered));
            }
            t.finish().listed.iter().map(|f| f.fair_share).collect()
        };
        assert_eq!(shares(&[(1, None), (3, None)]), [0.5, 1.5]);
        // 0.5 and 1 of their demand: a mean of 0.75.
        assert_eq!(
            shares(&[(5, Some(10)), (20, Some(20))]),
            [0.5 / 0.75, 1.0 / 0.75]
        );
        // One demand unknown: bytes for all (mean 12.5).
        assert_eq!(shares(&[(5, Some(10)), (20, None)]), [0.4, 1.6]);
        assert_eq!(shares(&[(0, Some(10)), (0, Some(10))]), [0.0, 0.0]);
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
    /// the outcome says more may be starved. Without every stream's demand
    /// none is named: a stream offered little reads as starved by bytes.
    #[test]
    fn starved_streams_are_named_and_a_cap_is_said() {
        let starved = |demand: Option<u64>| {
            let mut t = StreamTally::default();
            for i in 0..100u32 {
                t.add(fig(1, 2 * i + 1, if i == 40 { 5 } else { 1_000 }, demand));
            }
            t.finish()
        };
        let out = starved(Some(1_000));
        assert_eq!(out.starved, vec!["1/81".to_string()]);
        assert_eq!(out.basis, Some("bytes_per_offered"));
        let out = starved(None);
        assert_eq!(out.basis, Some("bytes"));
        assert!(out.starved.is_empty() && out.fairness.unwrap() < 1.0);
        // Starved is below a tenth of the mean: 5 % of its demand beside
        // 95 % is exactly a tenth (0.05 ÷ 0.5), and not starved.
        let mut t = StreamTally::default();
        t.add(fig(1, 1, 50, Some(1_000)));
        t.add(fig(1, 3, 950, Some(1_000)));
        let out = t.finish();
        assert_eq!(
            out.listed[0].fair_share,
            super::super::streams::STARVED_BELOW
        );
        assert!(out.starved.is_empty(), "{:?}", out.starved);
        let mut t = StreamTally::default();
        for i in 0..(MAX_STARVED_NAMED as u32 + 10) {
            t.add(fig(1, 2 * i + 1, 1, Some(100_000)));
        }
        for i in 0..20_000u32 {
            t.add(fig(2, 2 * i + 1, 100_000, Some(100_000)));
        }
        let out = t.finish();
        assert_eq!(out.starved.len(), MAX_STARVED_NAMED);
        assert!(out.starved_truncated);
    }

    use crate::schema::{Endpoint, Kind};

    use crate::analyze::test_event as ev;

    fn end(status: u32) -> Kind {
        Kind::RpcEnd(crate::schema::RpcEndEv {
            status,
            message: String::new(),
        })
    }

    /// An analyzer that has seen client connection 1 and server connection
    /// 2 open on one socket (the taps pair them).
    fn paired() -> super::super::Analyzer {
        let open = |local: &str, peer: &str| {
            Kind::ConnOpen(crate::schema::ConnOpenEv {
                local: local.into(),
                peer: peer.into(),
            })
        };
        let mut a = super::super::Analyzer::new(0);
        a.feed(&ev(
            1,
            Endpoint::Client,
            1,
            0,
            open("127.0.0.1:5000", "127.0.0.1:80"),
        ));
        a.feed(&ev(
            2,
            Endpoint::Server,
            2,
            0,
            open("127.0.0.1:80", "127.0.0.1:5000"),
        ));
        a
    }

    /// A long paired trace: 3,000 RPCs 10 ms apart, each on its own
    /// stream of one connection seen by both taps. The per-stream maps hold
    /// the RPCs of about the last second, not all of them, and a byte
    /// mismatch on a stream retired long before the end still fails both
    /// checks it touches.
    #[test]
    fn retired_streams_are_judged_and_forgotten() {
        use crate::schema::*;
        let data = |dir: Dir, len: u32| {
            Kind::Frame(FrameEv {
                dir,
                frame: FrameType::DATA,
                len,
                ..FrameEv::default()
            })
        };
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut a = paired();
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
            "client connection 1, server connection 2, stream 11: client tap out 100, server tap in 90, app 90"
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

    /// Fairness is judged up to the first stall (bytes that crossed in
    /// the teardown after it raced the end and moved the index from 0.98
    /// to 0.59 between runs), and a stream offered bytes that carried none
    /// is in it, starved (it was left out of the fairness it was the victim
    /// of).
    #[test]
    fn fairness_is_judged_up_to_the_stall_and_counts_a_stream_that_carried_nothing() {
        use crate::schema::*;
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut a = paired();
        let schedule = |seq| {
            Kind::Schedule(MsgEv {
                seq,
                size: 95,
                framed: 100,
            })
        };
        let data = |len: u32| {
            Kind::Frame(FrameEv {
                dir: Dir::In,
                frame: FrameType::DATA,
                len,
                ..FrameEv::default()
            })
        };
        // Streams 1 and 3 offered and carried 100 bytes each; stream 5
        // offered 100 and never carried a byte.
        for (i, id) in [1u32, 3, 5].into_iter().enumerate() {
            a.feed(&ev(10 + i as u64, c, 1, id, schedule(0)));
        }
        a.feed(&ev(20, s, 2, 1, data(100)));
        a.feed(&ev(21, s, 2, 3, data(100)));
        let stall = Kind::Stall(StallEv {
            timeout_ns: 2_000_000_000,
            pending: 1,
            conn_window: Some(65_535),
            streams: vec![],
        });
        a.feed(&ev(30, s, 0, 0, stall));
        // At the stall's very nanosecond, sorted after it: before it all
        // the same.
        a.feed(&ev(30, s, 2, 3, data(100)));
        a.feed(&ev(30, c, 1, 1, schedule(1)));
        // The teardown: stream 1's buffered bytes rush in, and more is
        // offered that the stall stopped.
        a.feed(&ev(40, s, 2, 1, data(5_000)));
        a.feed(&ev(41, c, 1, 3, schedule(1)));
        let (sum, _) = a.finish(0, &crate::reader::Ending::Clean(Footer::default()));
        assert_eq!((sum.stream_count, sum.streams_without_data), (3, 1));
        assert_eq!(
            sum.stream_fairness_basis.as_deref(),
            Some("bytes_per_offered")
        );
        // Delivery before the stall 100/200, 200/100 and 0/100:
        // 2.5² / (3 · (0.25 + 4)) = 6.25 / 12.75.
        let jain = sum.stream_fairness.unwrap();
        assert!((jain - 6.25 / 12.75).abs() < 1e-12, "{jain}");
        assert_eq!(sum.starved_streams, vec!["2/5".to_string()]);
        let one = sum.streams.iter().find(|f| f.stream == 1).unwrap();
        assert_eq!((one.bytes, one.bytes_before_stall), (5_100, Some(100)));
        assert_eq!(
            (one.offered_bytes, one.offered_before_stall),
            (Some(200), Some(200))
        );
        assert_eq!(
            (one.scheduled, one.sent, one.never_sent),
            (Some(2), Some(0), Some(0))
        );
        let three = sum.streams.iter().find(|f| f.stream == 3).unwrap();
        assert_eq!((three.bytes, three.bytes_before_stall), (200, Some(200)));
        assert_eq!(three.scheduled, Some(2));
        assert_eq!(
            (three.offered_bytes, three.offered_before_stall),
            (Some(200), Some(100))
        );
    }

    /// A server that answers OK into a socket the client closed at its
    /// deadline: the answer's DATA is seen by the server's tap only. The
    /// connection is cut short (not compared) because the client's RPC
    /// ended other than OK; with the client's RPC OK, the same frames fail
    /// the check.
    #[test]
    fn windows_agree_leaves_out_a_connection_whose_client_rpc_failed() {
        use crate::schema::*;
        let judge = |client_status: u32| {
            let (c, s) = (Endpoint::Client, Endpoint::Server);
            let mut a = paired();
            let answer = Kind::Frame(FrameEv {
                dir: Dir::Out,
                frame: FrameType::DATA,
                len: 5,
                ..FrameEv::default()
            });
            a.feed(&ev(10, s, 2, 1, answer));
            a.feed(&ev(11, s, 2, 1, end(0)));
            a.feed(&ev(12, c, 1, 1, end(client_status)));
            let (sum, _) = a.finish(0, &crate::reader::Ending::Clean(Footer::default()));
            sum.checks["windows_agree"].clone()
        };
        let cut = judge(4);
        assert_eq!(cut.ok, None, "{}", cut.detail);
        assert!(
            cut.detail.contains("1 connection cut short"),
            "{}",
            cut.detail
        );
        let both_ok = judge(0);
        assert_eq!(both_ok.ok, Some(false), "{}", both_ok.detail);
    }

    /// A stream is due once every side the trace pairs ended it and a
    /// second passed after the later end; the client's side alone retires
    /// when no server tap shares its socket.
    #[test]
    fn a_stream_is_due_after_both_ends_and_the_grace() {
        let g = RETIRE_AFTER_NS;
        let mut r = Retirement::default();
        r.conn_open(Side::Client, 1, "127.0.0.1:5000", "127.0.0.1:80");
        r.conn_open(Side::Server, 2, "127.0.0.1:80", "127.0.0.1:5000");
        r.conn_open(Side::Client, 3, "127.0.0.1:5001", "127.0.0.1:81");
        r.rpc_end(10, Side::Server, 2, 1);
        r.rpc_end(20, Side::Client, 1, 1);
        r.rpc_end(30, Side::Client, 3, 1);
        let mut out = vec![];
        r.due(10 + g, &mut out);
        assert!(out.is_empty(), "the client's end is 10 ns later: {out:?}");
        r.due(20 + g, &mut out);
        let both = Due {
            server: Some(2),
            client: Some(1),
            stream: 1,
            end: 20,
            since: 20 + g,
            moved: u64::MAX,
        };
        assert_eq!(out, vec![both]);
        out.clear();
        r.due(30 + g, &mut out);
        let alone = Due {
            server: None,
            client: Some(3),
            stream: 1,
            end: 30,
            since: 30 + g,
            moved: u64::MAX,
        };
        assert_eq!(out, vec![alone]);
        // Deferred (not settled): due again when asked, `since` kept.
        out.clear();
        r.defer(both, 40 + 2 * g);
        r.defer(alone, 40 + 3 * g);
        r.due(40 + g, &mut out);
        assert!(out.is_empty(), "{out:?}");
        r.due(40 + 2 * g, &mut out);
        assert_eq!(out, vec![both]);
        out.clear();
        r.due(40 + 3 * g, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].client, out[0].end), (Some(3), 30));
        // The later end decides, whichever side it is on.
        out.clear();
        r.rpc_end(60, Side::Client, 1, 5);
        r.rpc_end(50, Side::Server, 2, 5);
        r.due(50 + g, &mut out);
        assert!(out.is_empty(), "{out:?}");
        r.due(60 + g, &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        // A server stream whose client never ended stays.
        r.rpc_end(40, Side::Server, 2, 3);
        out.clear();
        r.due(40 + 10 * g, &mut out);
        assert!(out.is_empty(), "{out:?}");
    }

    /// A port reused within the grace in a merge that lacks the first
    /// client: the second client, opening before its server connection
    /// does, is not paired with the first server connection, whose close is
    /// in (it was: its messages read as the wrong server's, "more decoded
    /// than sent"), but with the server connection that opens next.
    #[test]
    fn a_client_never_pairs_with_a_server_connection_already_closed() {
        let mut r = Retirement::default();
        r.conn_open(Side::Server, 1, "127.0.0.1:80", "127.0.0.1:5000");
        r.server_closed(1);
        r.conn_open(Side::Client, 2, "127.0.0.1:5000", "127.0.0.1:80");
        assert_eq!(r.server_of(2), None);
        r.conn_open(Side::Server, 3, "127.0.0.1:80", "127.0.0.1:5000");
        assert_eq!(r.pairs(), vec![(2, 3)]);
        // A server accepting a client that closed already (its backlog)
        // still pairs: only a closed server connection is passed over.
        let mut r = Retirement::default();
        r.conn_open(Side::Client, 1, "127.0.0.1:5000", "127.0.0.1:80");
        r.conn_open(Side::Server, 2, "127.0.0.1:80", "127.0.0.1:5000");
        assert_eq!(r.pairs(), vec![(1, 2)]);
    }

    /// A port reused while the earlier connection is still held (not yet
    /// retired): the new server connection, opening first, is not paired
    /// with the earlier client connection (already paired) but with the
    /// new one. It was, and the earlier pair's mismatch went unjudged.
    #[test]
    fn a_reused_port_pairs_the_new_connections() {
        let mut r = Retirement::default();
        r.conn_open(Side::Client, 1, "127.0.0.1:5000", "127.0.0.1:80");
        r.conn_open(Side::Server, 2, "127.0.0.1:80", "127.0.0.1:5000");
        r.conn_open(Side::Server, 4, "127.0.0.1:80", "127.0.0.1:5000");
        r.conn_open(Side::Client, 3, "127.0.0.1:5000", "127.0.0.1:80");
        assert_eq!(r.pairs(), vec![(1, 2), (3, 4)]);
        // Client first the second time: the same.
        let mut r = Retirement::default();
        r.conn_open(Side::Server, 2, "127.0.0.1:80", "127.0.0.1:5000");
        r.conn_open(Side::Client, 1, "127.0.0.1:5000", "127.0.0.1:80");
        r.conn_open(Side::Client, 3, "127.0.0.1:5000", "127.0.0.1:80");
        r.conn_open(Side::Server, 4, "127.0.0.1:80", "127.0.0.1:5000");
        assert_eq!(r.pairs(), vec![(1, 2), (3, 4)]);
    }

    /// Client 1 through relay pair 7, whose legs closed before its server
    /// accepted (`c:1` → relay `r:2`, relay `r:3` → server `s:4`).
    fn waiting_for_its_server() -> Retirement {
        let mut r = Retirement::default();
        r.conn_open(Side::Client, 1, "c:1", "r:2");
        r.leg_open(false, 7, "r:2", "c:1");
        r.leg_open(true, 7, "r:3", "s:4");
        r.leg_closed(7);
        r
    }

    /// A Unix socket end without a name (a foreign client's) names no
    /// connection: every such connection to one path looks alike, so none
    /// is paired, either end unnamed.
    #[test]
    fn an_unnamed_unix_end_pairs_with_nothing() {
        let unnamed = crate::schema::UNIX_UNNAMED;
        let mut r = Retirement::default();
        for conn in 1..=2 {
            r.conn_open(Side::Client, conn, unnamed, "unix:/p");
            r.conn_open(Side::Server, conn, "unix:/p", unnamed);
        }
        assert_eq!(r.pairs(), vec![]);
        assert!(r.addrs.is_empty());
        // Named ends on the same path pair.
        r.conn_open(Side::Client, 3, "unix:@c", "unix:/p");
        r.conn_open(Side::Server, 3, "unix:/p", "unix:@c");
        assert_eq!(r.pairs(), vec![(3, 3)]);
    }

    /// A client whose connection closed while its relay's legs are still
    /// open is kept for the server the relay has yet to reach, as it is
    /// once the legs closed.
    #[test]
    fn a_client_is_kept_while_its_relay_pair_is_unmatched() {
        let mut r = Retirement::default();
        r.conn_open(Side::Client, 1, "c:1", "r:2");
        r.leg_open(false, 7, "r:2", "c:1");
        assert!(r.awaits_relay_server(1, "c:1", "r:2"));
        assert!(!r.awaits_relay_server(1, "c:9", "r:2"));
        r.leg_open(true, 7, "r:3", "s:4");
        assert!(r.awaits_relay_server(1, "c:1", "r:2"));
        r.conn_open(Side::Server, 2, "s:4", "r:3");
        assert!(!r.awaits_relay_server(1, "c:1", "r:2"));
    }

    /// A server connection closed and not yet retired holds its ports: a
    /// client opening on them later is a port reused, paired with the
    /// server that opens next; a client connection retiring in between
    /// (the same number on the other tap) changes nothing.
    #[test]
    fn a_closed_server_keeps_its_ports_until_it_retires() {
        let mut r = Retirement::default();
        r.conn_open(Side::Server, 5, "s:1", "c:1");
        r.server_closed(5);
        r.conn_open(Side::Client, 5, "c:2", "s:9");
        assert!(!r.forget_addrs(true, 5, "c:2", "s:9"));
        r.conn_open(Side::Client, 9, "c:1", "s:1");
        assert_eq!(r.pairs(), vec![]);
        r.conn_open(Side::Server, 6, "s:1", "c:1");
        assert_eq!(r.pairs(), vec![(9, 6)]);
        // Its retirement lets it go.
        assert!(r.forget_addrs(false, 5, "s:1", "c:1"));
        assert!(r.closed_servers.is_empty());
    }

    /// A relay pair's endpoints are paired whichever of the four opens
    /// comes last; a pair whose endpoints the trace lacks (a relay's own
    /// trace) is forgotten when a leg closes, so 10,000 of them leave
    /// nothing behind (each open looked at all of them: quadratic).
    #[test]
    fn relay_legs_pair_their_endpoints_and_unmatched_ones_are_forgotten() {
        let (relay_in, server) = ("r:2", "s:4");
        for order in 0..4 {
            let mut r = Retirement::default();
            let mut steps: [fn(&mut Retirement); 4] = [
                |r| r.conn_open(Side::Client, 1, "c:1", "r:2"),
                |r| r.leg_open(false, 7, "r:2", "c:1"),
                |r| r.leg_open(true, 7, "r:3", "s:4"),
                |r| r.conn_open(Side::Server, 2, "s:4", "r:3"),
            ];
            steps.rotate_left(order);
            for step in &steps {
                step(&mut r);
            }
            assert_eq!(r.pairs(), vec![(1, 2)], "order {order}");
            assert!(r.legs.is_empty() && r.leg_of.is_empty());
        }
        let mut r = Retirement::default();
        for pair in 0..10_000u32 {
            let from = format!("c:{pair}");
            r.leg_open(false, pair, relay_in, &from);
            r.leg_open(true, pair, &format!("r:{pair}"), server);
            r.leg_closed(pair);
        }
        assert!(r.legs.is_empty() && r.leg_of.is_empty() && r.pairs().is_empty());
        // With its client in the trace, a pair waits for a server that
        // accepts after the legs closed (its accept backlog).
        let mut r = waiting_for_its_server();
        assert!(r.awaits_relay_server(1, "c:1", "r:2"));
        r.conn_open(Side::Server, 2, "s:4", "r:3");
        assert_eq!(r.pairs(), vec![(1, 2)]);
        assert!(!r.awaits_relay_server(1, "c:1", "r:2"));
        // Or until the client's connection is retired.
        let mut r = waiting_for_its_server();
        r.forget_addrs(true, 1, "c:1", "r:2");
        assert!(r.legs.is_empty() && r.leg_of.is_empty());
    }

    /// A client's port reused through a relay while the earlier pair waits
    /// for its server (legs closed, the server accepting late): the late
    /// server pairs with the earlier client, the later pair's legs keep
    /// their sockets and pair with the later client, and the earlier
    /// client's retirement forgets its own pair only. Forgetting the
    /// earlier pair took the later pair's sockets with it, and the later
    /// server was paired with the earlier client.
    #[test]
    fn a_port_reused_through_a_relay_pairs_each_client_with_its_server() {
        let mut r = waiting_for_its_server();
        r.leg_open(false, 8, "r:2", "c:1");
        r.leg_open(true, 8, "r:5", "s:4");
        r.conn_open(Side::Server, 2, "s:4", "r:3");
        r.conn_open(Side::Server, 4, "s:4", "r:5");
        r.conn_open(Side::Client, 3, "c:1", "r:2");
        assert_eq!(r.pairs(), vec![(1, 2), (3, 4)]);
        assert!(r.legs.is_empty() && r.leg_of.is_empty());

        // The earlier pair never gets its server: the earlier client's
        // retirement forgets it, not the later pair, whose legs are open.
        let mut r = waiting_for_its_server();
        r.leg_open(false, 8, "r:2", "c:1");
        r.leg_open(true, 8, "r:5", "s:4");
        assert!(r.awaits_relay_server(1, "c:1", "r:2"));
        assert!(!r.forget_addrs(true, 1, "c:1", "r:2"));
        assert!(!r.legs.contains_key(&7) && r.legs.contains_key(&8));
        r.conn_open(Side::Client, 3, "c:1", "r:2");
        r.conn_open(Side::Server, 4, "s:4", "r:5");
        assert_eq!(r.pairs(), vec![(3, 4)]);
        assert!(r.legs.is_empty() && r.leg_of.is_empty() && r.waiting.is_empty());

        // The later client opens before the earlier pair's late server: that
        // server still pairs with the client its pair had, and a close of
        // the pair's second leg after the later client's open changes it
        // not.
        let mut r = waiting_for_its_server();
        r.conn_open(Side::Client, 3, "c:1", "r:2");
        r.leg_closed(7);
        r.leg_open(false, 8, "r:2", "c:1");
        r.leg_open(true, 8, "r:5", "s:4");
        r.conn_open(Side::Server, 2, "s:4", "r:3");
        r.conn_open(Side::Server, 4, "s:4", "r:5");
        assert_eq!(r.pairs(), vec![(1, 2), (3, 4)]);
        assert!(r.waiting.is_empty() && r.waiting_pair.is_empty());

        // A pair whose upstream connect failed (no server leg) does not
        // hold its client for a late server.
        let mut r = Retirement::default();
        r.conn_open(Side::Client, 1, "c:1", "r:2");
        r.leg_open(false, 7, "r:2", "c:1");
        r.leg_closed(7);
        assert!(!r.awaits_relay_server(1, "c:1", "r:2"));
        assert!(r.legs.is_empty() && r.leg_of.is_empty() && r.waiting.is_empty());
    }

    /// Retired ids are kept as ranges of one parity: as many as gaps.
    #[test]
    fn retired_ids_are_a_few_ranges() {
        use super::super::wire_view::RetiredIds;
        let mut r = RetiredIds::<2>::default();
        for id in [1u32, 3, 5, 9] {
            r.insert(id);
        }
        assert_eq!(r.ranges(), 2);
        assert!(r.contains(3u32) && r.contains(9u32) && !r.contains(7u32));
        assert!(!r.contains(2u32) && !r.contains(4u32), "the other parity");
        // One of the other parity (a peer's even stream id) has a range of
        // its own: 5 read as not retired past it (a range starting at 4).
        r.insert(4u32);
        assert!(r.contains(5u32) && r.contains(4u32) && !r.contains(6u32));
        assert!(r.insert(7u32) && !r.insert(7u32), "new once");
        assert_eq!(r.ranges(), 2, "1..=9 odd, 4");
        assert!(r.contains(7u32) && !r.contains(11u32) && !r.contains(0u32));
        r.insert(u32::MAX);
        assert!(r.contains(u32::MAX));
        for id in (13u32..20_001).step_by(2) {
            r.insert(id);
        }
        assert_eq!(r.ranges(), 4, "1..=9, 13..=19999, u32::MAX; 4");
    }

    /// Builds traces for the tests below.
    mod trace {
        pub(crate) use crate::analyze::test_event as ev;
        pub use crate::schema::*;
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
        let run = |rtt: Option<u64>| {
            let mut a = super::super::Analyzer::new(0);
            a.feed(&ev(1, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
            a.feed(&ev(2, s, 2, 0, frame(Dir::Out, FrameType::SETTINGS, 0)));
            let ack = Kind::Frame(FrameEv {
                dir: Dir::In,
                frame: FrameType::SETTINGS,
                flags: flags::ACK,
                ..FrameEv::default()
            });
            if let Some(rtt) = rtt {
                a.feed(&ev(2 + rtt, s, 2, 0, ack));
            }
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
        let slow = run(Some(1_200_000_000));
        assert_eq!(slow.stream_count, 2, "{:?}", slow.streams);
        assert_eq!(slow.streams[0].bytes, 200);
        assert_eq!(slow.frames_after_retirement, 0);
        // A SETTINGS never acknowledged: its age is a round trip at least
        // (here 2 s at the end, 3 s a second later).
        let unacked = run(None);
        assert_eq!(unacked.stream_count, 2, "{:?}", unacked.streams);
        assert_eq!(unacked.streams[0].bytes, 200);
        // On a fast link the wait is the floor, 1 s: the late frame comes
        // after it and is counted as late, neither in its stream's figures
        // nor as a stream of its own.
        let fast = run(Some(100_000));
        assert_eq!(fast.stream_count, 2, "{:?}", fast.streams);
        assert_eq!(fast.streams[0].bytes, 100);
        assert_eq!(
            (
                fast.frames_after_retirement,
                fast.data_bytes_after_retirement
            ),
            (1, 100)
        );
        assert_eq!(fast.data_bytes_in, 201, "the totals take it");
    }

    /// A queued link drains for longer than the limit: the stream waits as
    /// long as its bytes keep landing, and counts them all.
    #[test]
    fn a_stream_whose_bytes_keep_landing_waits_past_the_limit() {
        use trace::*;
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let sec = 1_000_000_000;
        let mut a = super::super::Analyzer::new(0);
        a.feed(&ev(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        a.feed(&ev(2, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        for i in 0..12 {
            a.feed(&ev(10 + i, c, 1, 1, frame(Dir::Out, FrameType::DATA, 100)));
        }
        a.feed(&ev(20, s, 2, 1, end()));
        a.feed(&ev(30, c, 1, 1, end()));
        // One frame lands every 10 s, for 120 s.
        for i in 1..=12 {
            a.feed(&ev(
                i * 10 * sec,
                s,
                2,
                1,
                frame(Dir::In, FrameType::DATA, 100),
            ));
        }
        a.feed(&ev(200 * sec, s, 2, 3, frame(Dir::In, FrameType::DATA, 1)));
        let (sum, _) = a.finish(0, &crate::reader::Ending::Clean(Footer::default()));
        assert_eq!(sum.frames_after_retirement, 0);
        assert_eq!(sum.streams[0].bytes, 1200, "{:?}", sum.streams);
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
