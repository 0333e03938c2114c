//! The wire view: windows per tap, direction, connection and stream,
//! rebuilt from frames, plus cross-tap frame latency and the window log.

use super::Analyzer;
use crate::schema::{self, Dir, Endpoint, Event, FrameType};
use crate::windows::FlowWindows;
use std::collections::{BTreeMap, VecDeque};

/// Which way DATA travels.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Flow {
    C2s = 0,
    S2c = 1,
}

pub(super) fn flow_of(ep: Endpoint, dir: Dir) -> Flow {
    match (ep, dir) {
        (ep, Dir::Out) if ep.is_client_end() => Flow::C2s,
        (ep, Dir::In) if !ep.is_client_end() => Flow::C2s,
        _ => Flow::S2c,
    }
}

#[derive(Default)]
pub(super) struct Conn {
    pub(super) local: String,
    pub(super) peer: String,
    /// `CLIENT_PORT-SERVER_PORT`, the same in both taps (empty if unknown).
    pub(super) key: String,
    pub(super) flows: [FlowWindows; 2],
    /// DATA payload bytes (padding excluded) per stream, c2s.
    pub(super) data_c2s: BTreeMap<u32, u64>,
    /// Round trips this tap measured (its SETTINGS and PINGs to their
    /// ACKs): how long frames of a stream may still arrive after its end.
    pub(super) rtt: RoundTrips,
    /// When the tap recorded the connection's close: nothing more arrives
    /// on it.
    pub(super) closed: Option<u64>,
    /// Streams the analysis judged and forgot: a late frame of one is not
    /// a new stream.
    pub(super) retired: RetiredIds,
    /// Per stream not yet retired: when this tap saw its last two frames
    /// (a link still draining after the end shows here).
    pub(super) seen: std::collections::HashMap<u32, (u64, u64)>,
    /// Client tap: the server's SETTINGS_MAX_CONCURRENT_STREAMS, as last read.
    pub(super) peer_max_streams: Option<u32>,
    /// Client tap: the server's first SETTINGS arrived (the probe's client
    /// opens no stream before it).
    pub(super) peer_settings_seen: bool,
    /// Client tap: streams whose RPC started and whose HEADERS have not left
    /// (h2 holds a new stream, pending open, until the server allows one
    /// more).
    pub(super) not_open: std::collections::BTreeSet<u32>,
    /// Streams whose RPC began on this tap and that are not retired yet:
    /// the connection is kept while one is (its end may come after the
    /// close).
    pub(super) open_rpcs: std::collections::BTreeSet<u32>,
    /// This tap's message events on the connection: a client's (scheduled,
    /// sent, never sent), a server's (decoded, completed, discarded). A
    /// connection no other tap pairs with leaves them out of the accounting
    /// across sides (see `summary::Unpaired`).
    pub(super) messages: [u64; 3],
    /// Client tap: RPCs that ended other than OK on it.
    pub(super) not_ok: u64,
    /// The tap recorded the connection (its open or a frame of it): an
    /// entry made by application events alone has no window to tell.
    pub(super) tapped: bool,
    /// Client tap: streams whose credit got no plotted series (past
    /// `MAX_STREAM_SERIES`), so that each counts once however many of its
    /// frames come.
    pub(super) untracked_credit: RetiredIds,
    /// Client tap: streams not yet retired whose END_STREAM it wrote:
    /// every byte the client handed to h2 before it left first (the one-sided
    /// `bytes` check).
    pub(super) ended_c2s: std::collections::BTreeSet<u32>,
}

impl Conn {
    /// The round trip the tap knew at `now`, or at the close if earlier: a
    /// SETTINGS or PING left unacknowledged by the close never will be, so
    /// its age stops growing there.
    pub(super) fn round_trip(&self, now: u64) -> u64 {
        self.rtt.at_least(self.closed.map_or(now, |c| c.min(now)))
    }
}

/// Ids retired, as ranges of ids `STEP` apart, each residue (mod `STEP`)
/// apart: a connection's streams (`STEP` 2: a connection never reuses an
/// id, and its streams mostly end in order, so as many ranges as gaps,
/// i.e. about the streams still open; a peer's even ids do not break the
/// odd ones' ranges), a tap's connections (`STEP` 2: consecutive in
/// `serve` or `client` alone, one parity in `run`), a relay's pairs and
/// Part 3's ended originals (`STEP` 1).
#[derive(Default)]
pub(super) struct RetiredIds<const STEP: u64 = 2>(BTreeMap<(u64, u64), u64>);

impl<const STEP: u64> RetiredIds<STEP> {
    pub(super) fn contains(&self, id: impl Into<u64>) -> bool {
        let id = id.into();
        let r = id % STEP;
        self.0
            .range((r, 0)..=(r, id))
            .next_back()
            .is_some_and(|(_, &end)| id <= end)
    }

    /// Adds `id`; whether it was not there yet.
    pub(super) fn insert(&mut self, id: impl Into<u64>) -> bool {
        let id = id.into();
        if self.contains(id) {
            return false;
        }
        let r = id % STEP;
        let (mut start, mut end) = (id, id);
        if let Some((&(_, s), &e)) = self.0.range((r, 0)..(r, id)).next_back() {
            if e.checked_add(STEP) == Some(id) {
                start = s;
            }
        }
        if let Some(next) = id.checked_add(STEP) {
            if let Some(e) = self.0.remove(&(r, next)) {
                end = e;
            }
        }
        self.0.insert((r, start), end);
        true
    }

    #[cfg(test)]
    pub(super) fn ranges(&self) -> usize {
        self.0.len()
    }
}

/// The longest round trip a tap measured on a connection, from its own
/// SETTINGS and PING frames to the peer's ACKs (a relay's link delay shows
/// here even when only one end is traced).
#[derive(Default)]
pub(super) struct RoundTrips {
    settings: VecDeque<u64>,
    pings: VecDeque<(u64, u64)>,
    pub(super) max_ns: u64,
}

/// Unacknowledged SETTINGS or PINGs kept at most (a peer that never
/// acknowledges holds no more).
const OUTSTANDING: usize = 16;

impl RoundTrips {
    fn settings_sent(&mut self, t: u64) {
        if self.settings.len() == OUTSTANDING {
            self.settings.pop_front();
        }
        self.settings.push_back(t);
    }
    /// SETTINGS are acknowledged in the order they were sent (RFC 9113 §6.5.3).
    fn settings_acked(&mut self, t: u64) {
        if let Some(sent) = self.settings.pop_front() {
            self.max_ns = self.max_ns.max(t.saturating_sub(sent));
        }
    }
    fn ping_sent(&mut self, t: u64, opaque: u64) {
        if self.pings.len() == OUTSTANDING {
            self.pings.pop_front();
        }
        self.pings.push_back((opaque, t));
    }
    /// The round trip known at `now`: the longest measured, or longer, the
    /// age of the oldest SETTINGS or PING still unacknowledged.
    pub(super) fn at_least(&self, now: u64) -> u64 {
        let oldest = self
            .settings
            .front()
            .copied()
            .into_iter()
            .chain(self.pings.front().map(|p| p.1))
            .min();
        self.max_ns.max(oldest.map_or(0, |t| now.saturating_sub(t)))
    }
    fn ping_acked(&mut self, t: u64, opaque: u64) {
        if let Some(i) = self.pings.iter().position(|(o, _)| *o == opaque) {
            let (_, sent) = self.pings.remove(i).expect("found");
            self.max_ns = self.max_ns.max(t.saturating_sub(sent));
        }
    }
}

/// When a client send window (a stream's, or the connection's as stream 0)
/// was ≤ 0, from the client's tap: the evidence that a wait for capacity was
/// a wait for credit.
#[derive(Default)]
pub(super) struct Exhaustion {
    /// When the client's tap wrote the stream's HEADERS: before it, h2 had
    /// the stream pending open and gave it no capacity, whatever the window.
    pub(super) opened: Option<u64>,
    since: Option<u64>,
    /// The most recent closed intervals (bounded).
    recent: VecDeque<(u64, u64)>,
}

impl Exhaustion {
    fn update(&mut self, t: u64, window: i64) {
        if window <= 0 {
            self.since.get_or_insert(t);
        } else if let Some(s) = self.since.take() {
            self.recent.push_back((s, t));
            if self.recent.len() > 256 {
                self.recent.pop_front();
            }
        }
    }

    /// Whether the window was ≤ 0 at some moment of `[a, b]`.
    pub(super) fn during(&self, a: u64, b: u64) -> bool {
        self.since.is_some_and(|s| s <= b) || self.recent.iter().any(|&(s, e)| s <= b && e >= a)
    }
}

impl Analyzer {
    /// Also writes every reconstructed window change to `out` as CSV:
    /// `t_s,tap,conn,conn_key,flow,stream,window` (stream 0 = the connection
    /// window; docs/outputs.md).
    pub fn with_window_log(mut self, mut out: Box<dyn std::io::Write>) -> Analyzer {
        if let Err(e) = writeln!(out, "t_s,tap,conn,conn_key,flow,stream,window") {
            self.window_log_error = Some(e);
        }
        self.window_log = Some(out);
        self
    }

    pub(super) fn log_window(&mut self, t: u64, e: &Event, flow: usize, stream: u32, window: i64) {
        if self.window_log_error.is_some() {
            return;
        }
        let secs = self.secs(t);
        let key = match self.conns.get(&(e.ep, e.conn)) {
            Some(c) => c.key.as_str(),
            None => self
                .leg_keys
                .get(&(e.ep, e.conn))
                .map_or("", String::as_str),
        };
        if let Some(out) = self.window_log.as_mut() {
            let flow = if flow == Flow::C2s as usize {
                "c2s"
            } else {
                "s2c"
            };
            if let Err(err) = writeln!(
                out,
                "{secs:.9},{},{},{key},{flow},{stream},{window}",
                e.ep.as_str(),
                e.conn
            ) {
                self.window_log_error = Some(err);
            }
        }
    }

    /// Matches a client→server frame seen by both taps (by byte offset).
    /// Matches a client→server frame seen by both taps (by byte offset):
    /// whichever side comes first waits for the other, so no sample is
    /// dropped because of the order the two taps' events arrived in. The
    /// client stamps a write before handing the bytes to the kernel and the
    /// server stamps a read after it returns, so a latency cannot be
    /// negative; one that is would be counted, never hidden.
    fn match_in_flight(&mut self, e: &Event, f: &schema::FrameEv) {
        let Some(c) = self.conns.get(&(e.ep, e.conn)) else {
            return;
        };
        let (key, mine) = match (e.ep, f.dir) {
            (Endpoint::Client, Dir::Out) => ((c.local.clone(), c.peer.clone()), 0),
            (Endpoint::Server, Dir::In) => ((c.peer.clone(), c.local.clone()), 1),
            _ => return,
        };
        let sides = self.in_flight.entry(key).or_default();
        let other = &mut sides[1 - mine];
        // Frames of the other side before this offset will never match.
        while other.front().is_some_and(|(off, _)| *off < f.offset) {
            other.pop_front();
        }
        if let Some((off, t_other)) = other.front().copied() {
            if off == f.offset {
                other.pop_front();
                let (t_write, t_read) = if mine == 0 {
                    (e.t, t_other)
                } else {
                    (t_other, e.t)
                };
                if t_read < t_write {
                    self.s.c2s_frame_latency_negative += 1;
                }
                self.frame_latency.record(t_read.saturating_sub(t_write));
                return;
            }
        }
        let q = &mut sides[mine];
        q.push_back((f.offset, e.t));
        // Bounded: a one-sided trace never drains this.
        if q.len() > 100_000 {
            q.pop_front();
        }
    }

    /// A frame on a tap. One of a stream already judged and forgotten
    /// (`late`) moves the connection's window and the totals, not the
    /// stream's figures (they were folded in; new state would be a second
    /// stream), and a late DATA or WINDOW_UPDATE is counted as such.
    pub(super) fn frame(&mut self, e: &Event, f: &schema::FrameEv) {
        self.match_in_flight(e, f);
        let t = e.t;
        let travel = flow_of(e.ep, f.dir);
        let conn = self.conns.entry((e.ep, e.conn)).or_default();
        conn.tapped = true;
        let late = e.stream != 0 && conn.retired.contains(e.stream);
        if e.stream != 0 && !late {
            let seen = conn.seen.entry(e.stream).or_insert((t, t));
            *seen = (seen.1, t);
            if e.ep == Endpoint::Client
                && travel == Flow::C2s
                && f.has_flag(schema::flags::END_STREAM)
                && matches!(f.frame, FrameType::DATA | FrameType::HEADERS)
            {
                conn.ended_c2s.insert(e.stream);
            }
        }
        match f.frame {
            FrameType::DATA => {
                let w = &mut conn.flows[travel as usize];
                let before = w.violation_count();
                if late {
                    w.on_conn_data(t, e.stream, f.flow_len());
                } else {
                    w.on_data(t, e.stream, f.flow_len());
                }
                let (cw, sw) = (w.conn(), (!late).then(|| w.stream(e.stream)));
                if w.violation_count() > before && self.first_violation.is_none() {
                    self.first_violation = Some((t, self.line));
                }
                if e.ep == Endpoint::Client && travel == Flow::C2s {
                    self.exhausted.entry((e.conn, 0)).or_default().update(t, cw);
                    if let Some(sw) = sw {
                        self.exhausted
                            .entry((e.conn, e.stream))
                            .or_default()
                            .update(t, sw);
                    }
                }
                if late {
                    self.s.frames_after_retirement += 1;
                    self.s.data_bytes_after_retirement += f.data_len() as u64;
                } else if travel == Flow::C2s {
                    let total = conn.data_c2s.entry(e.stream).or_default();
                    *total += f.data_len() as u64;
                    let total = *total as f64;
                    let added = f.data_len() as f64;
                    self.tl
                        .push_stream_bytes(e.ep, e.conn, e.stream, t, total, added);
                    if self.after_first_stall(t) && e.ep == Endpoint::Server {
                        *self
                            .after_stall
                            .bytes
                            .entry((e.conn, e.stream))
                            .or_default() += f.data_len() as u64;
                    }
                }
                self.log_window(t, e, travel as usize, 0, cw);
                self.count_data(e, f);
                if let Some(sw) = sw {
                    self.log_window(t, e, travel as usize, e.stream, sw);
                    if travel == Flow::C2s {
                        self.plot_credit(e, cw, sw);
                    }
                }
            }
            FrameType::WINDOW_UPDATE => {
                let inc = f.increment.unwrap_or(0);
                let credited = 1 - travel as usize;
                if late {
                    // A peer's update for a stream it still knew.
                    self.s.frames_after_retirement += 1;
                } else {
                    let w = &mut conn.flows[credited];
                    let before = w.violation_count();
                    w.on_window_update(t, e.stream, inc);
                    let (cw, sw) = (w.conn(), w.stream(e.stream));
                    if w.violation_count() > before && self.first_violation.is_none() {
                        self.first_violation = Some((t, self.line));
                    }
                    let now = if e.stream == 0 { cw } else { sw };
                    if e.ep == Endpoint::Client && credited == Flow::C2s as usize {
                        self.exhausted
                            .entry((e.conn, e.stream))
                            .or_default()
                            .update(t, now);
                    }
                    self.log_window(t, e, credited, e.stream, now);
                    if credited == Flow::C2s as usize {
                        self.plot_credit(e, cw, sw);
                    }
                }
                if e.ep == Endpoint::Client && f.dir == Dir::In {
                    self.s.window_updates_in += 1;
                    if e.stream == 0 {
                        self.s.window_updates_in_conn += 1;
                    } else {
                        self.s.window_updates_in_stream += 1;
                        self.wu_in_increment.record(inc as u64);
                    }
                }
                if e.ep == Endpoint::Server && f.dir == Dir::Out {
                    self.s.window_updates_out += 1;
                    if e.stream != 0 {
                        self.tl.window_update_bytes.push(t, inc as f64);
                        self.tl.window_updates.push(t, 1.0);
                    }
                    if e.stream == 0 {
                        self.s.window_updates_out_conn += 1;
                        if let Some(p) = self.pending_conn.get_mut(&e.conn) {
                            p.consume(t, inc as u64, &mut self.rel_conn_lat);
                        }
                    } else {
                        self.s.window_updates_out_stream += 1;
                        self.wu_increment.record(inc as u64);
                        let key = (e.conn, e.stream);
                        if let Some(p) = self.pending_stream.get_mut(&key) {
                            p.consume(t, inc as u64, &mut self.rel_lat);
                            // A stream whose releases are all carried
                            // holds nothing: an absent FIFO is an empty
                            // one (memory per open stream, not per RPC).
                            if p.is_empty() {
                                self.pending_stream.remove(&key);
                            }
                        }
                    }
                }
            }
            // The data sender acknowledges the receiver's SETTINGS: on the
            // receiver's tap, that is the flow the ACK travels with.
            FrameType::SETTINGS if f.has_flag(schema::flags::ACK) && f.dir == Dir::In => {
                conn.flows[travel as usize].on_settings_acked();
                conn.rtt.settings_acked(t);
            }
            FrameType::SETTINGS if f.has_flag(schema::flags::ACK) => {}
            FrameType::SETTINGS => {
                if f.dir == Dir::Out {
                    conn.rtt.settings_sent(t);
                }
                let flow = 1 - travel as usize;
                if e.ep == Endpoint::Client && f.dir == Dir::In {
                    conn.peer_settings_seen = true;
                }
                let mut changed = vec![];
                for (id, v) in f.settings.iter().flatten() {
                    if *id == schema::settings::MAX_CONCURRENT_STREAMS
                        && e.ep == Endpoint::Client
                        && f.dir == Dir::In
                    {
                        conn.peer_max_streams = Some(*v);
                    }
                    if *id == schema::settings::INITIAL_WINDOW_SIZE {
                        if f.dir == Dir::Out {
                            conn.flows[flow].on_settings_sent(*v);
                        }
                        conn.flows[flow].on_initial_window(t, *v);
                        changed = conn.flows[flow].streams();
                    }
                }
                for (id, w) in changed {
                    if e.ep == Endpoint::Client && flow == Flow::C2s as usize {
                        self.exhausted.entry((e.conn, id)).or_default().update(t, w);
                    }
                    self.log_window(t, e, flow, id, w);
                }
            }
            FrameType::PING => match (f.dir, f.has_flag(schema::flags::ACK), f.opaque) {
                (Dir::Out, false, Some(o)) => conn.rtt.ping_sent(t, o),
                (Dir::In, true, Some(o)) => conn.rtt.ping_acked(t, o),
                _ => {}
            },
            FrameType::GOAWAY | FrameType::RST_STREAM => self.error_answer(e, f),
            FrameType::HEADERS if travel == Flow::C2s && e.stream != 0 && !late => {
                // A client stream opens at the initial window the SETTINGS so
                // far gave it: a sender held at 0 from the start
                // (INITIAL_WINDOW_SIZE 0) waits on the window, though no DATA
                // or update ever touches the stream.
                let w = &mut conn.flows[Flow::C2s as usize];
                let opened = w.tracked(e.stream).is_none().then(|| w.open(e.stream));
                if e.ep == Endpoint::Client {
                    conn.not_open.remove(&e.stream);
                    let x = self.exhausted.entry((e.conn, e.stream)).or_default();
                    x.opened.get_or_insert(t);
                    if let Some(sw) = opened {
                        x.update(t, sw);
                    }
                }
            }
            _ => {}
        }
    }

    /// DATA frames and bytes into the server's and out of the client's.
    fn count_data(&mut self, e: &Event, f: &schema::FrameEv) {
        if e.ep == Endpoint::Server && f.dir == Dir::In {
            self.s.data_frames_in += 1;
            self.s.data_bytes_in += f.data_len() as u64;
        }
        if e.ep == Endpoint::Client && f.dir == Dir::Out {
            self.s.data_frames_out += 1;
            self.s.data_bytes_out += f.data_len() as u64;
            if f.data_len() > 0 {
                self.progressed(1, e.t);
            }
        }
    }

    /// A GOAWAY or RST_STREAM with an error code, by who sent it, as each
    /// tap saw it: the server's (its tap out, the client's in) and the
    /// client's, CANCEL aside (its tap out, the server's in). NO_ERROR is
    /// not an error (see [`super::Summary::protocol_errors`]).
    fn error_answer(&mut self, e: &Event, f: &schema::FrameEv) {
        let key = |code| format!("{} {}", f.frame, schema::h2_error_name(code));
        match (e.ep, f.dir, f.error_code) {
            (_, _, None | Some(0)) => {}
            (Endpoint::Server, Dir::Out, Some(code)) => {
                super::summary::count_capped(&mut self.server_answers[0], key(code), 1);
            }
            (Endpoint::Client, Dir::In, Some(code)) => {
                super::summary::count_capped(&mut self.server_answers[1], key(code), 1);
            }
            // 0x8: CANCEL.
            (Endpoint::Client, Dir::Out, Some(code)) if code != 0x8 => {
                super::summary::count_capped(&mut self.client_answers[0], key(code), 1);
            }
            (Endpoint::Server, Dir::In, Some(code)) if code != 0x8 => {
                super::summary::count_capped(&mut self.client_answers[1], key(code), 1);
            }
            _ => {}
        }
    }

    fn plot_credit(&mut self, e: &Event, conn_w: i64, stream_w: i64) {
        match e.ep {
            Endpoint::Client => {
                self.tl.credit_conn_client.push(e.t, conn_w as f64);
                if e.stream != 0 {
                    let plotted =
                        self.tl
                            .push_stream_credit(e.conn, e.stream, e.t, stream_w as f64);
                    if !plotted
                        && self
                            .conns
                            .get_mut(&(e.ep, e.conn))
                            .is_some_and(|c| c.untracked_credit.insert(e.stream))
                    {
                        self.tl.streams_untracked += 1;
                    }
                    if *self.plotted_stream.get_or_insert((e.conn, e.stream)) == (e.conn, e.stream)
                    {
                        self.tl.credit_stream_client.push(e.t, stream_w as f64);
                    }
                }
            }
            Endpoint::Server => self.tl.credit_conn_server.push(e.t, conn_w as f64),
            Endpoint::ClientLeg | Endpoint::ServerLeg => {}
        }
    }
}

/// The rule (of RFC 9113, or 9218) a `wire_error` says a frame broke, as the tap's
/// parser words it (`byte 0: rule broken: DATA frame on stream 0 (RFC 9113
/// §6.1: …)` → `DATA frame on stream 0`); `None` for bytes it could not
/// frame.
pub(crate) fn rule_broken(msg: &str) -> Option<&str> {
    let (_, rest) = msg.strip_prefix("byte ")?.split_once(": ")?;
    let rule = rest.strip_prefix(crate::schema::RULE_BROKEN)?;
    Some(rule.split_once(" (RFC").map_or(rule, |(r, _)| r))
}

/// The `protocol_errors` key of a tap's parse error: `wire_error: ` and the
/// message's first words, without the `byte N: ` prefix, cut before the
/// first `:` or `(` (the specifics), numbers as `N`, so that errors of one
/// kind count together (`wire_error: DATA frame of N bytes exceeds the max
/// frame size N`, `wire_error: malformed WINDOW_UPDATE frame`).
pub(super) fn wire_error_key(msg: &str) -> String {
    if let Some(rule) = rule_broken(msg) {
        return format!("wire_error: rule broken: {rule}");
    }
    let rest = msg
        .strip_prefix("byte ")
        .and_then(|r| r.split_once(": "))
        .map_or(msg, |(_, r)| r);
    let head = rest.split([':', '(']).next().unwrap_or_default();
    let words: Vec<&str> = head
        .split_whitespace()
        .take(12)
        .map(|w| {
            if w.bytes().all(|b| b.is_ascii_digit()) {
                "N"
            } else {
                w
            }
        })
        .collect();
    if words.is_empty() {
        "wire_error".into()
    } else {
        format!("wire_error: {}", words.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round trip is the longest from a SETTINGS or PING to its ACK
    /// (SETTINGS acknowledged in order, PINGs by their opaque data), or
    /// the age of the oldest still unacknowledged; a peer that never
    /// acknowledges has only the latest 16 of each kept.
    #[test]
    fn round_trips_time_each_ack_to_what_it_acknowledges() {
        let mut r = RoundTrips::default();
        r.settings_sent(10);
        r.settings_sent(20);
        r.settings_acked(50);
        r.settings_acked(55);
        assert_eq!((r.max_ns, r.at_least(1_000)), (40, 40));
        r.ping_sent(60, 7);
        r.ping_sent(61, 8);
        r.ping_acked(90, 8);
        assert_eq!(r.max_ns, 40);
        // Stale data acknowledges nothing.
        r.ping_acked(95, 99);
        assert_eq!(r.at_least(160), 100, "ping 7 outstanding since 60");
        r.ping_acked(200, 7);
        assert_eq!((r.max_ns, r.at_least(1_000)), (140, 140));
        for t in 0..17 {
            r.settings_sent(1_000 + t);
        }
        assert_eq!(r.at_least(2_000), 999, "the oldest kept: 1,001");
        for t in 0..17 {
            r.ping_sent(3_000 + t, t);
        }
        r.ping_acked(4_000, 0);
        assert_eq!(r.max_ns, 140, "ping 0 was not kept");
    }

    /// A window's exhaustion covers `[a, b]` when it began by `b` and ended
    /// at `a` or later; the latest 256 closed spells are kept.
    #[test]
    fn exhaustion_spells_cover_the_moments_the_window_was_spent() {
        let mut x = Exhaustion::default();
        x.update(10, 0);
        x.update(15, -3);
        x.update(20, 5);
        assert!(x.during(20, 30) && x.during(0, 10) && x.during(12, 13));
        assert!(!x.during(21, 30) && !x.during(0, 9));
        x.update(40, -1);
        assert!(x.during(50, 60) && x.during(0, 40) && !x.during(25, 39));
        let mut x = Exhaustion::default();
        for i in 0..300 {
            x.update(10 * i, 0);
            x.update(10 * i + 1, 1);
        }
        // Spells 44 to 299 kept: 43 (430–431) not.
        assert!(x.during(440, 440) && !x.during(430, 431));
    }
}
