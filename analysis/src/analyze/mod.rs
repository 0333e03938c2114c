//! One streaming pass over a trace: counts, rates, windows, blocking,
//! WINDOW_UPDATE behaviour, invariant checks and bounded time series.
//!
//! Memory depends on open streams, messages owned at once and the fixed
//! size of the series, never on the number of events. One file per idea:
//! [`summary`] (the result types), `messages` (the per-message state
//! machine), `wire_view` (windows from frames), `latency` (release →
//! WINDOW_UPDATE matching), `checks` (the invariants), and here the driver.

mod books;
mod checks;
mod conn_retire;
mod latency;
mod messages;
pub mod overload;
pub mod relay;
mod release_audit;
pub mod reorder;
mod retire;
pub mod slice;
mod spill;
pub mod streams;
pub mod summary;
#[cfg(test)]
mod trace_in_doubt;
mod wire_view;

/// One event, for the tests of the modules below.
#[cfg(test)]
pub(crate) fn test_event(t: u64, ep: Endpoint, conn: u32, stream: u32, kind: Kind) -> Event {
    Event {
        t,
        ep,
        conn,
        stream,
        kind,
    }
}

pub use crate::schema::status_name;
pub use summary::{Blocked, Check, RelayFlow, RelayStream, RelaySummary, Summary, Timeline};

use crate::reader::{Ending, TraceReader};
use crate::schema::{Dir, Endpoint, Event, Kind, NeverSentReason};
use crate::stats::{least_squares, Histo};
use checks::{invariant_checks, Evidence};
use latency::Pending;
use messages::Rpc;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use wire_view::{Conn, Exhaustion};

/// (byte offset, t) of frames waiting for their match in the other tap.
type Offsets = VecDeque<(u64, u64)>;

/// Blocked intervals kept for the interval plot; later ones only counted.
const MAX_INTERVALS: usize = 20_000;

/// The side of a probe endpoint (relay legs are analysed apart).
fn side_of(ep: Endpoint) -> retire::Side {
    if ep.is_client_end() {
        retire::Side::Client
    } else {
        retire::Side::Server
    }
}

/// A client stream's messages: scheduled, sent, never sent.
#[derive(Default, Clone, Copy)]
pub(super) struct ClientMessages {
    pub scheduled: u64,
    pub sent: u64,
    pub never_sent: u64,
    /// Framed bytes of the messages sent (wholly handed to h2).
    pub sent_bytes: u64,
    /// The largest message scheduled on the stream, framed bytes (0: none
    /// was, as a unary call's is its connection's).
    pub max_framed: u64,
    /// A message was given up for a reason that can stop one midway
    /// (deadline, stream error, interrupt, stall): part of it may have
    /// left with no `send`.
    pub stopped_midway: bool,
}

/// Bytes that moved after the first stall (see `Analyzer::after_stall`).
#[derive(Default)]
struct AfterStall {
    /// Server (conn, stream) → DATA payload bytes its tap read.
    bytes: HashMap<(u32, u32), u64>,
    /// Client (conn, stream) → framed bytes scheduled.
    offered: HashMap<(u32, u32), u64>,
}

/// A relay check of a trace cut short or with events dropped: a violation
/// settled stands (a frame that differs, or one passed by, more than the
/// reorder window before the end of a cut trace; a frame that differs
/// whatever was dropped); anything else cannot be judged, since what is
/// missing could be what holds it up or brings it down (a WINDOW_UPDATE
/// dropped reads as DATA beyond the window, and the credit violations
/// carry no time).
fn relay_on_incomplete(
    name: &str,
    c: &summary::Check,
    why: &str,
    dropped: bool,
    end_s: f64,
) -> summary::Check {
    let settled = c.ok == Some(false)
        && if dropped {
            // Events lost cannot make two frames at one offset differ
            // (`RelayView::finish` already leaves frames seen on one leg
            // unjudged), but can hide a WINDOW_UPDATE.
            name == "relay_forwarded_unchanged"
        } else {
            c.first_t_s
                .is_some_and(|t| t + reorder::WINDOW_NS as f64 / 1e9 < end_s)
        };
    if c.ok.is_none() || settled {
        return c.clone();
    }
    let verdict = if c.ok == Some(true) { "held" } else { "failed" };
    summary::Check::na(format!(
        "{why}, so this cannot be judged; over the events present it {verdict}: {}",
        c.detail
    ))
}

/// Feeds events one at a time; [`Analyzer::finish`] gives the results.
pub struct Analyzer {
    origin: u64,
    first_t: Option<u64>,
    /// First and last DATA frame of the upload (client to server).
    upload_t: Option<(u64, u64)>,
    /// The latest `t` read before the first corrupt line, or the `t` of the
    /// earliest event analysed out of time order, whichever is earlier: a
    /// violation settled before it (the reorder window earlier) is real
    /// whatever the damage held.
    pub(crate) damage_at: Option<u64>,
    /// `damage_at` is an event out of time order, not a corrupt line.
    damage_is_late: bool,
    last_t: u64,
    conns: HashMap<(Endpoint, u32), Conn>,
    /// A relay leg's connection key while it is open (windows.csv's
    /// `conn_key`; the legs are not endpoint connections).
    leg_keys: HashMap<(Endpoint, u32), String>,
    rpcs: HashMap<(u32, u32), Rpc>,
    /// Framed bytes the client scheduled per (client conn, stream): each
    /// stream's demand, for fairness (one entry per stream, like `rpcs`).
    offered: HashMap<(u32, u32), u64>,
    s: Summary,
    tl: Timeline,
    depth: i64,
    queued_bytes: i64,
    owned: i64,
    unreleased: i64,
    /// The client stream whose credit is plotted (first seen).
    plotted_stream: Option<(u32, u32)>,
    first_schedule: Option<u64>,
    last_schedule: u64,
    last_send: u64,
    first_decode: Option<u64>,
    last_decode: u64,
    first_start: Option<u64>,
    last_complete: u64,
    window_blocked: Histo,
    socket_blocked: Histo,
    server_socket_ns: u64,
    lateness: Histo,
    /// Client RPCs started and not ended: (conn, stream) → `rpc_start`'s t.
    call_start: HashMap<(u32, u32), u64>,
    /// Client RPCs' durations, `rpc_start` → `rpc_end`, of those ended
    /// OK (ns).
    call: Histo,
    /// Unary calls sent and not ended: (conn, stream) → their message's
    /// scheduled time.
    call_due: HashMap<(u32, u32), u64>,
    /// Unary calls ended OK: their message's scheduled time → `rpc_end` (ns).
    response: Histo,
    wu_increment: Histo,
    wu_in_increment: Histo,
    rel_lat: Histo,
    rel_conn_lat: Histo,
    pending_stream: HashMap<(u32, u32), Pending>,
    /// Streams whose RPCs ended, retired from the maps above (see
    /// `retire`), and what their checks and figures came to.
    retirement: retire::Retirement,
    due: Vec<retire::Due>,
    /// Connections closed, to retire (see `conn_retire`), and what the
    /// retired ones came to.
    closing: conn_retire::Closing,
    conn_tally: conn_retire::ConnTally,
    /// Connections with messages that nothing on the other tap paired
    /// with, retired or at the end (see `summary::Unpaired`).
    unpaired: summary::Unpaired,
    /// Client RPCs that ended other than OK on connections that sent
    /// messages and are in the accounting across sides (paired, or without
    /// addresses): only these may have lost messages in flight.
    excusing_not_ok: u64,
    /// Each client connection's message books (see `books`).
    books: books::Books,
    bytes_tally: retire::ByteTally,
    /// The one-sided `bytes` check's running counts over retired streams
    /// that paired with none: [server's, client's].
    own_bytes: [retire::ByteTally; 2],
    agree_tally: retire::AgreeTally,
    stream_tally: retire::StreamTally,
    pending_conn: HashMap<u32, Pending>,
    credit_violations: u64,
    credit_detail: String,
    has_client: bool,
    has_server: bool,
    /// gRPC status the server ended each (conn, stream) RPC with.
    server_status: HashMap<(u32, u32), u32>,
    /// Client connections with an RPC the client ended other than OK (a
    /// deadline, a reset): the server may have answered OK into a socket
    /// the client had closed, so the taps need not agree (`windows_agree`).
    client_not_ok: std::collections::HashSet<u32>,
    /// Client→server frames seen by one tap and not yet by the other, per
    /// (client address, server address): [client writes, server reads] as
    /// (offset, t).
    in_flight: HashMap<(String, String), [Offsets; 2]>,
    frame_latency: Histo,
    /// Line in the trace file of the event being fed (for check details).
    line: u64,
    /// Client send windows at or below zero, per (client conn, stream; 0 =
    /// the connection), and when each stream's HEADERS left: classifies
    /// waits for capacity.
    exhausted: HashMap<(u32, u32), Exhaustion>,
    h2_buffer_blocked: Histo,
    not_open_blocked: Histo,
    /// First DATA beyond credit or window overflow: (t, line).
    first_violation: Option<(u64, u64)>,
    /// First credit violation: (t, line).
    first_credit_violation: Option<(u64, u64)>,
    /// First stall: (t, line).
    first_stall: Option<(u64, u64)>,
    /// What moved after the first stall, per (conn, stream): DATA bytes
    /// the server's tap read and framed bytes the client scheduled. The run
    /// ends at a stall, and fairness is judged on the service before it
    /// (what crossed in the teardown raced the end: the stalled stream's
    /// release let the others' buffered bytes through).
    after_stall: AfterStall,
    /// Per client (conn, stream) not retired yet: its messages.
    client_messages: HashMap<(u32, u32), ClientMessages>,
    /// Progress as a stall watcher sees it: the last time bytes reached
    /// the server's application (`chunk`), and the client's last DATA out
    /// (what `client` alone watches); and the longest spell without it
    /// between two such events.
    last_progress: [Option<u64>; 2],
    longest_quiet: [u64; 2],
    /// Of the client's waits for capacity still open when its RPC ended
    /// (`open: true`): the latest start, and when it was given up.
    open_wait: Option<(u64, u64)>,
    blocked_conn_window_ns: u64,
    blocked_stream_window_ns: u64,
    /// GOAWAY / RST_STREAM codes the server sent, by key: [as the server's
    /// tap wrote them, as the client's tap read them].
    server_answers: [BTreeMap<String, u64>; 2],
    /// The same of the client's (CANCEL aside): [its tap, the server's].
    client_answers: [BTreeMap<String, u64>; 2],
    /// Where every window change is written as CSV, when asked.
    window_log: Option<Box<dyn std::io::Write>>,
    window_log_error: Option<std::io::Error>,
    /// The relay's legs, analysed apart.
    relay: relay::RelayView,
    /// Part 3 (Exchange) accounting.
    ov: overload::Tracker,
    /// The `release_point` check's state.
    release_audit: release_audit::ReleaseAudit,
    /// Rules broken, by `writer: rule`, as the sending taps wrote them:
    /// counted only when the trace has no receiver's tap (see
    /// `Summary::rules_broken`, which counts them as the receivers read).
    rules_written: BTreeMap<String, u64>,
}

impl Analyzer {
    pub fn new(origin: u64) -> Analyzer {
        Analyzer {
            origin,
            first_t: None,
            upload_t: None,
            damage_at: None,
            damage_is_late: false,
            last_t: 0,
            conns: HashMap::new(),
            leg_keys: HashMap::new(),
            rpcs: HashMap::new(),
            offered: HashMap::new(),
            s: Summary::default(),
            tl: Timeline::new(origin),
            depth: 0,
            queued_bytes: 0,
            owned: 0,
            unreleased: 0,
            plotted_stream: None,
            first_schedule: None,
            last_schedule: 0,
            last_send: 0,
            first_decode: None,
            last_decode: 0,
            first_start: None,
            last_complete: 0,
            window_blocked: Histo::new(1e-6),
            socket_blocked: Histo::new(1e-6),
            server_socket_ns: 0,
            lateness: Histo::new(1e-6),
            call_start: HashMap::new(),
            call: Histo::new(1e-6),
            call_due: HashMap::new(),
            response: Histo::new(1e-6),
            wu_increment: Histo::new(1.0),
            wu_in_increment: Histo::new(1.0),
            rel_lat: Histo::new(1e-6),
            rel_conn_lat: Histo::new(1e-6),
            pending_stream: HashMap::new(),
            retirement: Default::default(),
            due: vec![],
            closing: Default::default(),
            conn_tally: Default::default(),
            unpaired: Default::default(),
            excusing_not_ok: 0,
            books: books::Books::default(),
            bytes_tally: Default::default(),
            own_bytes: Default::default(),
            agree_tally: Default::default(),
            stream_tally: Default::default(),
            pending_conn: HashMap::new(),
            credit_violations: 0,
            credit_detail: String::new(),
            has_client: false,
            has_server: false,
            server_status: HashMap::new(),
            client_not_ok: Default::default(),
            in_flight: HashMap::new(),
            frame_latency: Histo::new(1e-6),
            line: 0,
            exhausted: HashMap::new(),
            h2_buffer_blocked: Histo::new(1e-6),
            not_open_blocked: Histo::new(1e-6),
            first_violation: None,
            first_credit_violation: None,
            first_stall: None,
            after_stall: AfterStall::default(),
            client_messages: HashMap::new(),
            last_progress: [None; 2],
            longest_quiet: [0; 2],
            open_wait: None,
            blocked_conn_window_ns: 0,
            blocked_stream_window_ns: 0,
            server_answers: Default::default(),
            client_answers: Default::default(),
            window_log: None,
            window_log_error: None,
            relay: relay::RelayView::new(origin),
            ov: overload::Tracker::default(),
            release_audit: Default::default(),
            rules_written: Default::default(),
        }
    }

    fn secs(&self, t: u64) -> f64 {
        t.saturating_sub(self.origin) as f64 / 1e9
    }

    pub fn feed(&mut self, e: &Event) {
        // An event left out (it names a connection or relay pair folded in)
        // stretches no span either.
        let left_out = match e.ep {
            Endpoint::ClientLeg | Endpoint::ServerLeg => self.relay.is_folded(e.conn),
            _ => {
                self.retire_due(e.t);
                self.retire_conns_due(e.t);
                self.after_conn_retirement(e)
            }
        };
        if !left_out {
            self.first_t.get_or_insert(e.t);
            self.last_t = self.last_t.max(e.t);
        }
        match e.ep {
            Endpoint::Client => self.has_client = true,
            Endpoint::Server => self.has_server = true,
            Endpoint::ClientLeg | Endpoint::ServerLeg => {
                // A relay's legs: their own analysis (`relay`), apart from
                // the probe endpoints' figures and checks, which only learn
                // which endpoints talk through it.
                if left_out {
                    self.relay.feed(e, self.line); // counted there
                    return;
                }
                if let Kind::ConnOpen(c) = &e.kind {
                    self.retirement.leg_open(
                        e.ep == Endpoint::ServerLeg,
                        e.conn,
                        &c.local,
                        &c.peer,
                    );
                    if let Some(key) = crate::schema::conn_key(e.ep, &c.local, &c.peer) {
                        self.leg_keys.insert((e.ep, e.conn), key);
                    }
                }
                let plotted = self.relay.series.plotted_stream.is_some();
                self.relay.feed(e, self.line);
                if let (false, Some((conn, _))) = (plotted, self.relay.series.plotted_stream) {
                    // timeline.csv's key for the relay's plotted stream (the
                    // only pair whose key is kept past its close).
                    if let Some(key) = self.leg_keys.get(&(Endpoint::ClientLeg, conn)) {
                        self.tl
                            .conn_keys
                            .insert((Endpoint::ClientLeg, conn), key.clone());
                    }
                }
                for (flow, stream, w) in std::mem::take(&mut self.relay.window_changes) {
                    self.log_window(e.t, e, flow, stream, w);
                }
                if let Kind::ConnClose(_) = &e.kind {
                    self.leg_keys.remove(&(e.ep, e.conn));
                    self.retirement.leg_closed(e.conn);
                }
                return;
            }
        }
        let t = e.t;
        if left_out {
            self.s.events_after_conn_retirement += 1;
            return;
        }
        self.ov.feed(e, self.line, &mut self.tl);
        self.release_audit.feed(e, self.line);
        match &e.kind {
            Kind::Frame(f) => {
                let upload = matches!(
                    (e.ep, f.dir),
                    (Endpoint::Client, Dir::Out) | (Endpoint::Server, Dir::In)
                );
                if upload && f.frame == crate::schema::FrameType::DATA {
                    let (first, last) = self.upload_t.unwrap_or((t, t));
                    self.upload_t = Some((first.min(t), last.max(t)));
                }
                if f.payload_dropped {
                    self.s.payload_dropped_frames += 1;
                    self.s.payload_dropped_bytes += u64::from(f.len);
                }
                self.frame(e, f)
            }
            Kind::WireError(w) => {
                self.s.wire_errors += 1;
                // Bytes a client end writes, or reads from the server end.
                let writer = if e.ep.is_client_end() == (w.dir == Dir::Out) {
                    "client"
                } else {
                    "server"
                };
                // As the receiver read it; as the sender wrote it aside, for
                // a trace with no receiver's tap.
                match wire_view::rule_broken(&w.error) {
                    Some(rule) => summary::count_capped(
                        if w.dir == Dir::In {
                            &mut self.s.rules_broken
                        } else {
                            &mut self.rules_written
                        },
                        format!("{writer}: {rule}"),
                        1,
                    ),
                    None => {
                        *self
                            .s
                            .wire_errors_by_writer
                            .entry(writer.into())
                            .or_default() += 1
                    }
                }
                summary::count_capped(
                    &mut self.s.protocol_errors,
                    wire_view::wire_error_key(&w.error),
                    1,
                );
            }
            Kind::SocketBlocked(b) => {
                let d = t.saturating_sub(b.start);
                let on = match e.ep {
                    Endpoint::Client => "socket",
                    _ => "server_socket",
                };
                self.count_open(b.open, on);
                if e.ep == Endpoint::Client {
                    self.socket_blocked.record(d);
                    self.tl.socket_blocked.push(b.start, d as f64 / 1e9);
                    self.interval(b.start, t, Blocked::Socket);
                } else {
                    self.server_socket_ns += d;
                }
            }
            Kind::ConnOpen(c) => {
                let conn = self.conns.entry((e.ep, e.conn)).or_default();
                conn.tapped = true;
                conn.local = c.local.clone();
                conn.peer = c.peer.clone();
                conn.key = crate::schema::conn_key(e.ep, &c.local, &c.peer).unwrap_or_default();
                self.retirement
                    .conn_open(side_of(e.ep), e.conn, &c.local, &c.peer);
            }
            Kind::RpcStart(r) => {
                if e.stream != 0 {
                    let conn = self.conns.entry((e.ep, e.conn)).or_default();
                    if !conn.retired.contains(e.stream) {
                        conn.open_rpcs.insert(e.stream);
                    }
                }
                if e.ep == Endpoint::Client && e.stream != 0 {
                    self.call_start.insert((e.conn, e.stream), t);
                    let opened = self
                        .exhausted
                        .get(&(e.conn, e.stream))
                        .is_some_and(|x| x.opened.is_some());
                    let conn = self.conns.entry((e.ep, e.conn)).or_default();
                    if !opened && !conn.retired.contains(e.stream) {
                        conn.not_open.insert(e.stream);
                    }
                }
                if e.ep == Endpoint::Server && r.release.is_some() {
                    self.rpcs.entry((e.conn, e.stream)).or_default().release = r.release;
                }
                // Raw framing, said by the server itself (a run can end
                // before any unit is decoded).
                if e.ep == Endpoint::Server
                    && r.framing.as_deref().is_some_and(|f| f.starts_with("raw:"))
                {
                    self.s.raw_units = true;
                }
            }
            Kind::ConnClose(_) => {
                if let Some(c) = self.conns.get_mut(&(e.ep, e.conn)) {
                    if c.closed.is_none() {
                        c.closed = Some(t);
                        self.closing.closed(t, e.ep, e.conn);
                        if e.ep == Endpoint::Server {
                            self.retirement.server_closed(e.conn);
                        }
                    }
                }
            }
            Kind::Unknown => {}
            // Part 3's own events: `overload` reads them.
            Kind::Admission(_)
            | Kind::ServiceChange(_)
            | Kind::Original(_)
            | Kind::Attempt(_)
            | Kind::AttemptEnd(_)
            | Kind::OriginalEnd(_) => {}
            Kind::AcceptError(_) => self.s.accept_errors += 1,
            Kind::ConnRefused(_) => self.s.conns_refused += 1,
            Kind::Stall(st) => {
                self.s.stalls += 1;
                self.first_stall.get_or_insert((t, self.line));
                if self.s.stall.is_none() {
                    let (cause, text) = if e.ep == Endpoint::Client {
                        self.describe_client_stall(t, st)
                    } else {
                        self.describe_stall(t, st)
                    };
                    self.s.stall_cause = Some(cause.as_str().to_string());
                    self.s.stall = Some(text);
                }
            }
            Kind::RpcEnd(r) => {
                if e.ep == Endpoint::Server {
                    self.server_status.insert((e.conn, e.stream), r.status);
                } else {
                    let start = self.call_start.remove(&(e.conn, e.stream));
                    let due = self.call_due.remove(&(e.conn, e.stream));
                    if r.status == 0 {
                        if let Some(start) = start {
                            self.call.record(t.saturating_sub(start));
                        }
                        if let Some(due) = due {
                            self.response.record(t.saturating_sub(due));
                        }
                    }
                    if r.status != 0 && e.ep == Endpoint::Client {
                        self.conns.entry((e.ep, e.conn)).or_default().not_ok += 1;
                    }
                    // A connection folded in was judged: an RPC that never
                    // had a stream on it, failing later, changes nothing
                    // of its windows.
                    if r.status != 0 && !self.closing.is_retired(e.ep, e.conn) {
                        self.client_not_ok.insert(e.conn);
                    }
                    if let Some(c) = self.conns.get_mut(&(e.ep, e.conn)) {
                        c.not_open.remove(&e.stream);
                    }
                }
                // Stream 0: an RPC the client's h2 never gave a stream (the
                // connection failed first); nothing of a stream to retire.
                if e.stream != 0 {
                    self.retirement.rpc_end(t, side_of(e.ep), e.conn, e.stream);
                }
                let name = status_name(r.status);
                let map = match e.ep {
                    Endpoint::Client => &mut self.s.rpc_status,
                    _ => &mut self.s.server_rpc_status,
                };
                summary::count_capped(map, name, 1);
            }
            Kind::Chunk(c) => {
                self.progressed(0, t);
                self.chunk(e, c)
            }
            Kind::Release(r) => self.release(e, r),
            Kind::Decode(m) => self.decode(e, m),
            Kind::Enqueue(q) => self.enqueue(e, q),
            Kind::Start(st) => self.start(e, st),
            Kind::Complete(c) => self.complete(e, c),
            Kind::Discard(d) => self.discard(e, d),
            Kind::BodyDrop(_) => {
                self.rpcs
                    .entry((e.conn, e.stream))
                    .or_default()
                    .body_dropped = true;
            }
            Kind::Sample(smp) => {
                self.s.peak_rss_bytes = self.s.peak_rss_bytes.max(smp.rss_bytes);
                self.tl.rss.push(t, smp.rss_bytes as f64);
            }
            Kind::Schedule(m) => {
                // On stream 0 a message is the connection's (a unary call's,
                // offered before its stream exists): no stream's demand.
                if e.stream != 0 {
                    *self.offered.entry((e.conn, e.stream)).or_default() += m.framed as u64;
                    if self.after_first_stall(t) {
                        *self
                            .after_stall
                            .offered
                            .entry((e.conn, e.stream))
                            .or_default() += m.framed as u64;
                    }
                    let stream = self.client_stream(e);
                    stream.scheduled += 1;
                    stream.max_framed = stream.max_framed.max(u64::from(m.framed));
                } else {
                    self.s.unary = true;
                }
                self.s.scheduled += 1;
                self.count_message(e, true, 0, 1);
                self.first_schedule.get_or_insert(t);
                self.last_schedule = self.last_schedule.max(t);
                self.tl.scheduled.push(t, self.s.scheduled as f64);
                self.tl.offer_end_s = Some(self.secs(self.last_schedule));
            }
            Kind::Send(sd) => {
                self.s.sent += 1;
                let stream = self.client_stream(e);
                stream.sent += 1;
                stream.sent_bytes = stream.sent_bytes.saturating_add(u64::from(sd.bytes));
                self.count_message(e, true, 1, 1);
                self.last_send = self.last_send.max(t);
                self.lateness.record(sd.begin.saturating_sub(sd.scheduled));
                if self.s.unary && e.stream != 0 {
                    self.call_due.insert((e.conn, e.stream), sd.scheduled);
                }
                self.tl.sent.push(t, self.s.sent as f64);
            }
            Kind::WindowBlocked(w) => self.client_wait(e, w, t),
            Kind::NeverSent(n) if n.reason == NeverSentReason::HandedOver => {
                // Sent, or not, on the replacement (its `handed`): this
                // connection's books close, the run's messages go on.
                self.s.handed_over = self.s.handed_over.saturating_add(n.count);
                self.count_message(e, true, 2, n.count);
                if e.ep == Endpoint::Client {
                    self.books.handed_over(e.conn, n.seq, n.count);
                }
            }
            Kind::Handed(h) => {
                self.s.handed_in = self.s.handed_in.saturating_add(h.count);
                self.count_message(e, true, 0, h.count);
                if e.ep == Endpoint::Client {
                    self.books.handed_in(h.from, h.seq, h.count);
                }
            }
            Kind::NeverSent(n) => {
                // Counts are the trace's: an absurd one saturates (two of
                // 2^63 wrapped to 0, and accounting held).
                self.s.never_sent = self.s.never_sent.saturating_add(n.count);
                if e.stream != 0 {
                    let stream = self.client_stream(e);
                    stream.never_sent = stream.never_sent.saturating_add(n.count);
                    // Backlog and behind: never handed to h2 at all.
                    stream.stopped_midway |=
                        !matches!(n.reason, NeverSentReason::Backlog | NeverSentReason::Behind);
                }
                self.count_message(e, true, 2, n.count);
                let by_reason = self
                    .s
                    .never_sent_by_reason
                    .entry(n.reason.as_str().into())
                    .or_default();
                *by_reason = by_reason.saturating_add(n.count);
            }
        }
    }

    /// A client's wait for capacity, by what it waited on. The part before
    /// its stream's HEADERS left the client is a wait for the stream to open
    /// (h2 gives a stream pending open no capacity: it waits for its turn to
    /// be written, or for the server to allow one more concurrent stream);
    /// the rest is on the window if the stream's or the connection's send
    /// window was ≤ 0 at some moment of it, on h2's buffer otherwise.
    fn client_wait(&mut self, e: &Event, w: &crate::schema::WindowBlockedEv, t: u64) {
        if w.open {
            let (start, end) = self.open_wait.unwrap_or((w.start, t));
            self.open_wait = Some((start.max(w.start), end.max(t)));
        }
        let opened = self
            .exhausted
            .get(&(e.conn, e.stream))
            .and_then(|x| x.opened);
        // Not open: its HEADERS left after the wait began, or its RPC
        // started and they have not left yet (a stream whose start the
        // trace lacks is judged by its windows alone).
        let started = self
            .conns
            .get(&(e.ep, e.conn))
            .is_some_and(|c| c.not_open.contains(&e.stream));
        let held_until = match opened {
            Some(h) if h > w.start => Some(h.min(t)),
            None if started => Some(t),
            _ => None,
        };
        let mut start = w.start;
        if let Some(end) = held_until {
            let d = end.saturating_sub(start);
            self.not_open_blocked.record(d);
            self.tl.not_open_blocked.push(start, d as f64 / 1e9);
            self.interval(start, end, Blocked::NotOpen);
            if end >= t {
                self.count_open(w.open, "not_open");
                return;
            }
            start = end;
        }
        let d = t.saturating_sub(start);
        let on = |k| {
            self.exhausted
                .get(&(e.conn, k))
                .is_some_and(|x| x.during(start, t))
        };
        if on(e.stream) || on(0) {
            if on(0) {
                self.blocked_conn_window_ns += d;
            } else {
                self.blocked_stream_window_ns += d;
            }
            self.window_blocked.record(d);
            self.tl.window_blocked.push(start, d as f64 / 1e9);
            self.interval(start, t, Blocked::Window);
            self.count_open(w.open, "window");
        } else {
            self.count_open(w.open, "h2_buffer");
            self.h2_buffer_blocked.record(d);
            self.tl.h2_buffer_blocked.push(start, d as f64 / 1e9);
            self.interval(start, t, Blocked::H2Buffer);
        }
    }

    /// Whether `t` is after the first stall's (an event at its very
    /// nanosecond, whichever way the sort put it, is not).
    pub(super) fn after_first_stall(&self, t: u64) -> bool {
        self.first_stall.is_some_and(|(stall, _)| t > stall)
    }

    /// One of `e`'s connection's message counts (see `Conn::messages`), of
    /// the side (client or server) whose events these are: the other
    /// side's (an edited trace) counts nowhere here.
    pub(super) fn count_message(&mut self, e: &Event, client: bool, which: usize, n: u64) {
        let side = if client {
            Endpoint::Client
        } else {
            Endpoint::Server
        };
        if e.ep != side {
            return;
        }
        let m = &mut self.conns.entry((e.ep, e.conn)).or_default().messages[which];
        *m = m.saturating_add(n);
    }

    /// The client's message counts of `e`'s stream.
    fn client_stream(&mut self, e: &Event) -> &mut ClientMessages {
        self.client_messages.entry((e.conn, e.stream)).or_default()
    }

    /// Progress at `t` as the stall watcher of `side` (0 the server's, 1
    /// the client's) counts it.
    pub(super) fn progressed(&mut self, side: usize, t: u64) {
        if let Some(last) = self.last_progress[side] {
            self.longest_quiet[side] = self.longest_quiet[side].max(t.saturating_sub(last));
        }
        self.last_progress[side] = Some(t);
    }

    /// An event that names a retired connection (closed on its tap, every
    /// stream of it judged: `conn_retire`) where no intact trace has one:
    /// what its tap records (a frame, an open or close, a wire error, a
    /// socket wait), an `rpc_start`, or anything of a stream (none can be
    /// new on a closed connection). It would bring back a second
    /// connection or stream; it is counted, warned about and left out of
    /// every figure (Part 3's and the span too). What a client records of
    /// an RPC that never had a stream (stream 0: an attempt on a
    /// connection that failed) can come later and is read as usual, as are
    /// Part 3's own events (`overload` reads them).
    fn after_conn_retirement(&self, e: &Event) -> bool {
        let part3 = matches!(
            e.kind,
            Kind::Admission(_)
                | Kind::ServiceChange(_)
                | Kind::Original(_)
                | Kind::Attempt(_)
                | Kind::AttemptEnd(_)
                | Kind::OriginalEnd(_)
        );
        let names_state = e.stream != 0
            || matches!(
                e.kind,
                Kind::Frame(_)
                    | Kind::ConnOpen(_)
                    | Kind::ConnClose(_)
                    | Kind::WireError(_)
                    | Kind::SocketBlocked(_)
                    | Kind::RpcStart(_)
            );
        !part3 && names_state && self.closing.is_retired(e.ep, e.conn)
    }

    /// Whether the run ended stuck (see [`checks::Stuck`]): its sends
    /// waited for capacity when it ended, and nothing had progressed for
    /// longer than any quiet spell the run had recovered from (a worker
    /// busy for 10 ms leaves the client waiting that long between releases,
    /// all run long). Progress after the wait began counts no differently:
    /// the bytes sent just before it still reach the server, and a stalled
    /// stream's last ones did (a second after its wait began, the run read
    /// as never stopped).
    fn stuck(&self) -> Option<checks::Stuck> {
        let (_, given_up) = self.open_wait?;
        let side = usize::from(!self.has_server);
        let progress = self.last_progress[side];
        progress
            .is_none_or(|p| given_up.saturating_sub(p) > self.longest_quiet[side])
            .then_some(checks::Stuck { progress, given_up })
    }

    /// A blocked interval still open when the recording ended, by what it
    /// waited on.
    fn count_open(&mut self, open: bool, on: &str) {
        if open {
            self.s.blocked_open += 1;
            *self.s.blocked_open_by.entry(on.into()).or_default() += 1;
        }
    }

    fn interval(&mut self, start: u64, end: u64, kind: Blocked) {
        if self.tl.intervals.len() < MAX_INTERVALS {
            let iv = (self.secs(start), self.secs(end), kind);
            self.tl.intervals.push(iv);
        } else {
            self.tl.intervals_dropped += 1;
        }
    }

    /// Closes the pass and flushes the window log; returns its error, if any.
    pub fn finish_with_log(
        mut self,
        dropped: u64,
        ending: &Ending,
    ) -> (Summary, Timeline, Option<std::io::Error>) {
        let mut err = self.window_log_error.take();
        if let Some(mut w) = self.window_log.take() {
            if let Err(e) = w.flush() {
                err.get_or_insert(e);
            }
        }
        let (s, t) = self.finish(dropped, ending);
        (s, t, err)
    }

    /// Closes the pass. `dropped` and `ending` come from the reader.
    pub fn finish(mut self, dropped: u64, ending: &Ending) -> (Summary, Timeline) {
        let both = self.has_client && self.has_server;
        let bytes_check = self.byte_check(self.has_client, self.has_server);
        for f in self.stream_figures() {
            self.stream_tally.add(f);
        }
        let st = std::mem::take(&mut self.stream_tally).finish();
        self.s.stream_fairness = st.fairness;
        self.s.starved_streams = st.starved;
        self.s.starved_streams_truncated = st.starved_truncated;
        self.s.stream_count = st.count;
        self.s.streams_without_data = st.empty;
        self.s.stream_fairness_basis = st.basis.map(str::to_string);
        self.s.streams = st.listed;
        self.s.client_blocked_conn_window_s = self.blocked_conn_window_ns as f64 / 1e9;
        self.s.client_blocked_stream_window_s = self.blocked_stream_window_ns as f64 / 1e9;
        let agree_check = self.agreement_check(both);
        self.tl.end_s = self.secs(self.last_t);
        // In connection order, not the map's: past its cap, which books
        // are kept (and named) depends on the order they close in.
        let mut open: Vec<_> = self.conns.iter().collect();
        open.sort_unstable_by_key(|(k, _)| **k);
        for ((ep, id), c) in open {
            let paired = match ep {
                Endpoint::Client => self.retirement.server_of(*id).is_some(),
                _ => self.retirement.client_of(*id).is_some(),
            };
            self.excusing_not_ok += conn_retire::count_unpaired(
                &mut self.unpaired,
                &mut self.books,
                *ep,
                *id,
                c,
                paired,
            );
            if !c.key.is_empty() {
                self.tl.conn_keys.insert((*ep, *id), c.key.clone());
            }
        }
        // The client tap's initial stream window: the server's
        // SETTINGS_INITIAL_WINDOW_SIZE, or 65,535 without one. Unless a
        // retired connection gave it, the lowest client connection's (not
        // the first in a hash map's order, which two analyses of one trace
        // need not share).
        if self.tl.advertised_stream_window.is_none() {
            self.tl.advertised_stream_window = self
                .conns
                .iter()
                .filter(|((ep, _), _)| *ep == Endpoint::Client)
                .min_by_key(|((_, id), _)| *id)
                .map(|(_, c)| c.flows[0].initial());
        }
        let stuck = self.stuck();
        let s = &mut self.s;
        s.span_s = self.first_t.map_or(0.0, |f| (self.last_t - f) as f64 / 1e9);
        s.first_event_s = self
            .first_t
            .map(|f| f.saturating_sub(self.origin) as f64 / 1e9);
        s.upload_data_s = self.upload_t.map(|(a, b)| {
            (
                a.saturating_sub(self.origin) as f64 / 1e9,
                b.saturating_sub(self.origin) as f64 / 1e9,
            )
        });
        let rate = |n: u64, a: Option<u64>, b: u64| match a {
            Some(a) if b > a && n > 1 => (n - 1) as f64 / ((b - a) as f64 / 1e9),
            _ => 0.0,
        };
        s.offered_rate = rate(s.scheduled, self.first_schedule, self.last_schedule);
        // Over the later of the last send and the last schedule: a client
        // whose sends stopped early is not credited with its few sends' pace.
        let send_end = self.last_send.max(self.last_schedule);
        // n sends as n − 1 intervals, as the offered rate counts its
        // schedules: with every message sent on time the two agree (n over
        // the span read 2.5 % above the offered rate for 41 messages).
        s.send_rate = match self.first_schedule {
            Some(a) if send_end > a && s.sent > 1 => {
                (s.sent - 1) as f64 / ((send_end - a) as f64 / 1e9)
            }
            _ => 0.0,
        };
        s.decode_rate = rate(s.decoded, self.first_decode, self.last_decode);
        s.completion_rate = rate(s.completed, self.first_start, self.last_complete);
        let unaccounted = if s.raw_units {
            0
        } else {
            // Messages handed from a connection to its replacement are in
            // both connections' books, as their own: per connection they
            // balance, and across the run they cancel.
            s.scheduled.saturating_add(s.handed_in) as i64
                - s.completed as i64
                - s.discarded as i64
                - s.never_sent.saturating_add(s.handed_over) as i64
        };
        s.window_blocked_ms = self.window_blocked.summary();
        s.h2_buffer_blocked_ms = self.h2_buffer_blocked.summary();
        s.socket_blocked_ms = self.socket_blocked.summary();
        s.client_window_blocked_s = s.window_blocked_ms.sum / 1e3;
        s.client_h2_buffer_blocked_s = s.h2_buffer_blocked_ms.sum / 1e3;
        s.not_open_blocked_ms = self.not_open_blocked.summary();
        s.client_not_open_blocked_s = s.not_open_blocked_ms.sum / 1e3;
        s.has_client = self.has_client;
        s.has_server = self.has_server;
        self.tl.has_client = self.has_client;
        self.tl.has_server = self.has_server;
        s.client_socket_blocked_s = s.socket_blocked_ms.sum / 1e3;
        s.server_socket_blocked_s = self.server_socket_ns as f64 / 1e9;
        s.lateness_ms = self.lateness.summary();
        s.call_ms = self.call.summary();
        s.response_ms = self.response.summary();
        s.window_update_increment = self.wu_increment.summary();
        s.window_update_in_increment = self.wu_in_increment.summary();
        s.release_to_update_ms = self.rel_lat.summary();
        s.release_to_conn_update_ms = self.rel_conn_lat.summary();
        s.c2s_frame_latency_ms = self.frame_latency.summary();
        s.coalescing_ratio = if s.window_updates_out_stream > 0 {
            s.releases as f64 / s.window_updates_out_stream as f64
        } else {
            0.0
        };

        // Queue growth over the steady part of the offered period.
        if let Some(first) = self.first_schedule {
            let a = first - self.origin.min(first);
            let b = self.last_schedule.saturating_sub(self.origin).max(a);
            // On whole buckets of the coarsest series read here, so every
            // figure of the window (the fits, the WINDOW_UPDATEs and credit
            // counted) covers exactly the window stated: a bucket cut by an
            // edge counted in or out whole (an update 0.06 ms after the
            // stated start went uncounted).
            let w = [
                &self.tl.queue_depth,
                &self.tl.sent,
                &self.tl.window_updates,
                &self.tl.window_update_bytes,
            ]
            .iter()
            .map(|x| x.width_ns())
            .max()
            .unwrap_or(1)
            .max(1);
            let lo_ns = (a + (b - a) / 10).div_ceil(w) * w;
            let hi_ns = (b / w + 1) * w;
            let (lo, b) = (lo_ns as f64 / 1e9, hi_ns as f64 / 1e9);
            // One point per bucket of that width across the whole window,
            // as timeline.csv writes them: a bucket where nothing happened
            // holds the level or count it was at. (Read only up to the
            // series' last value, the fit left out a tail where sends had
            // stopped, and a client stuck after 0.66 s of 3 was credited
            // with its first sends' pace.)
            let in_window = |series: &crate::series::Series| -> Vec<(f64, f64)> {
                series
                    .coarsened(w)
                    .grid((hi_ns - w) as f64 / 1e9)
                    .into_iter()
                    .filter_map(|(t, v)| v.map(|v| (t, v.value)))
                    .filter(|p| p.0 >= lo && p.0 < b)
                    .collect()
            };
            let pts = in_window(&self.tl.queue_depth);
            s.queue_growth_rate = least_squares(&pts).map_or(0.0, |(m, _)| m);
            let sent = in_window(&self.tl.sent);
            s.send_rate_steady = least_squares(&sent).map_or(0.0, |(m, _)| m);
            s.queue_growth_window_s = (lo, b);
            if let (Some(first), Some(last)) = (pts.first(), pts.last()) {
                s.queue_growth_in_window = last.1 - first.1;
            }
            let within = |p: &(f64, f64)| p.0 >= lo && p.0 < b;
            s.window_updates_in_growth_window = self
                .tl
                .window_updates
                .points()
                .iter()
                .filter(|p| within(p))
                .map(|p| p.1)
                .sum::<f64>() as u64;
            s.credit_returned_in_growth_window = self
                .tl
                .window_update_bytes
                .points()
                .iter()
                .filter(|p| within(p))
                .map(|p| p.1)
                .sum::<f64>() as u64;
        }

        // Windows: lowest value anywhere, violations, agreement of both taps.
        let done = &self.conn_tally;
        s.min_send_window = done.min_send_window;
        s.min_window = done.min_window;
        s.data_past_lowered_window += done.past_lowered;
        let mut violations = done.violations;
        let mut first: Option<&crate::windows::Violation> = done.first_violation.as_ref();
        for ((ep, _), c) in &self.conns {
            if *ep == Endpoint::Client {
                let w = &c.flows[wire_view::Flow::C2s as usize];
                let low = w.min_conn().min(w.min_stream());
                s.min_send_window = Some(s.min_send_window.map_or(low, |m| m.min(low)));
            }
            for w in &c.flows {
                let low = w.min_conn().min(w.min_stream());
                s.min_window = Some(s.min_window.map_or(low, |m| m.min(low)));
                violations += w.violation_count();
                s.data_past_lowered_window += w.past_lowered();
                if let Some(v) = w.violations().first() {
                    if first.is_none_or(|f| v.before(f)) {
                        first = Some(v);
                    }
                }
            }
        }
        let first_violation = first.map_or(String::new(), |v| {
            format!("{} on stream {} (window {})", v.what, v.stream, v.window)
        });
        s.protocol_violations = violations;
        // The server's answers from its own tap; from the client's when the
        // trace has no server side (a client against a foreign server).
        let side = usize::from(!self.has_server);
        for (k, n) in std::mem::take(&mut self.server_answers[side]) {
            summary::count_capped(&mut s.protocol_errors, k, n);
        }
        // The client's from its own tap; from the server's when the trace
        // has no client side (`serve` alone).
        s.client_answers = std::mem::take(&mut self.client_answers[usize::from(!self.has_client)]);
        s.dropped_events = dropped;
        s.trace_ending = match ending {
            Ending::Clean(_) => "clean".into(),
            Ending::NoFooter => "no_footer".into(),
            Ending::Truncated { line } => format!("truncated at line {line}"),
            Ending::Open => "open".into(),
        };
        let (dropped_known, cut): (Option<u64>, Option<String>) = match ending {
            Ending::Clean(_) => (Some(dropped), None),
            Ending::NoFooter => (
                None,
                Some("the trace has no footer (the writer did not finish)".to_string()),
            ),
            Ending::Truncated { line } => (
                None,
                Some(format!(
                    "the trace was cut at line {line} (the writer stopped mid-line: killed, or the disk filled)"
                )),
            ),
            Ending::Open => (Some(dropped), None),
        };

        let mut unaccounted = unaccounted;
        let mut lost_in_flight = if s.raw_units {
            0
        } else {
            s.sent as i64 - s.decoded as i64
        };
        // Across sides, only what pairs: a foreign client's messages were
        // never scheduled here, a client's to another server never decoded.
        let unpaired = std::mem::take(&mut self.unpaired);
        if both && !unpaired.is_empty() {
            if !s.raw_units {
                let u = &unpaired;
                let i = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
                lost_in_flight = lost_in_flight
                    .saturating_sub(i(u.sent))
                    .saturating_add(i(u.decoded));
                unaccounted = unaccounted
                    .saturating_sub(i(u.scheduled))
                    .saturating_add(i(u.completed))
                    .saturating_add(i(u.discarded))
                    .saturating_add(i(u.never_sent));
            }
            s.unpaired = Some(unpaired);
        }
        // One side's counts against nothing of the other's are no figure.
        (s.unaccounted, s.lost_in_flight) = if both {
            (Some(unaccounted), Some(lost_in_flight))
        } else {
            (None, None)
        };
        let cut_why = cut.clone();
        // A frame both its sender's and its receiver's taps saw is one
        // frame: counted as its receiver read it, or as its sender wrote it
        // when the trace has no tap of the receiving side (`(others)` last,
        // as it came last).
        let receiver_absent = |key: &str| {
            if key.starts_with("client: ") {
                !self.has_server
            } else {
                !self.has_client
            }
        };
        let (others, named): (Vec<_>, Vec<_>) = std::mem::take(&mut self.rules_written)
            .into_iter()
            .filter(|(k, _)| {
                if k == summary::OTHERS {
                    !self.has_server || !self.has_client
                } else {
                    receiver_absent(k)
                }
            })
            .partition(|(k, _)| k == summary::OTHERS);
        for (k, n) in named.into_iter().chain(others) {
            summary::count_capped(&mut s.rules_broken, k, n);
        }
        s.checks = invariant_checks(Evidence {
            s,
            has_client: self.has_client,
            has_server: self.has_server,
            dropped: dropped_known,
            cut: cut.clone(),
            end_t: self.last_t,
            origin: self.origin,
            credit: (
                self.credit_violations,
                &self.credit_detail,
                self.first_credit_violation,
            ),
            windows: (violations, first_violation, self.first_violation),
            stall: self.first_stall,
            release: {
                self.release_audit.settle();
                &self.release_audit
            },
            stuck,
            excusing_not_ok: self.excusing_not_ok,
            books: self.books.unsettled(),
            bytes: bytes_check,
            agree: agree_check,
        });
        let relay = std::mem::replace(&mut self.relay, relay::RelayView::new(self.origin));
        self.s.events_after_conn_retirement += relay.events_after_fold;
        if relay.seen() {
            let (series, finished) = relay.finish(
                self.last_t,
                cut_why.is_some(),
                dropped_known.is_some_and(|d| d > 0),
            );
            self.tl.relay = Some(series);
            if let Some((summary, check)) = finished {
                if !self.has_client && !self.has_server {
                    // A relay alone: the probe endpoints' invariants have
                    // nothing to judge; the relay's own checks stand.
                    self.s.checks.clear();
                    self.s.checks.insert(
                        "relay_no_data_beyond_credit".into(),
                        relay::credit_check(&summary),
                    );
                }
                self.s.relay = Some(summary);
                self.s
                    .checks
                    .insert("relay_forwarded_unchanged".into(), check);
                // (why, whether events were dropped)
                let incomplete = match (&cut_why, dropped_known) {
                    (Some(why), _) => Some((
                        format!("{why}: events in flight at the cut are missing"),
                        false,
                    )),
                    (None, Some(d)) if d > 0 => {
                        Some((format!("the recorder dropped {d} events"), true))
                    }
                    _ => None,
                };
                if let Some((why, dropped)) = incomplete {
                    let end_s = self.secs(self.last_t);
                    for name in ["relay_forwarded_unchanged", "relay_no_data_beyond_credit"] {
                        if let Some(c) = self.s.checks.get_mut(name) {
                            *c = relay_on_incomplete(name, c, &why, dropped, end_s);
                        }
                    }
                }
            }
        }
        if self.ov.seen {
            let incomplete = match (&cut_why, dropped_known) {
                (Some(why), _) => Some((why.clone(), true)),
                (None, Some(d)) if d > 0 => {
                    Some((format!("the recorder dropped {d} events"), false))
                }
                // (Drop counts are unknown only where the trace was cut.)
                _ => None,
            };
            let ov = std::mem::take(&mut self.ov);
            let (o, checks) = ov.finish(
                self.s.client_window_blocked_s,
                self.s.client_socket_blocked_s,
                incomplete,
                self.origin,
            );
            self.s.overload = Some(o);
            self.s.checks.extend(checks);
        }
        if let Some(why) = self.s.events_in_doubt() {
            // Lines lost or added after the run (the footer's count differs)
            // may be anywhere, and added ones made up: no check of the
            // events can be judged. A corrupt line is one event lost at a
            // known place: a failure settled before it (the reorder window
            // earlier, as for a cut) is real, and so is a stall the run
            // recorded; the rest cannot be judged. The footer's drop count
            // is the footer's own, and a check already `null` keeps its
            // reason.
            let altered = self.s.lines_altered().is_some()
                || self.s.read_error.is_some()
                || self.s.events_after_conn_retirement > 0;
            let settled_before_s = self.damage_at.map(|d| {
                d.saturating_sub(reorder::WINDOW_NS)
                    .saturating_sub(self.origin) as f64
                    / 1e9
            });
            let damage_s = self
                .damage_at
                .map(|d| d.saturating_sub(self.origin) as f64 / 1e9);
            let unreadable = self.s.read_error.is_some();
            let why_of_doubt = why.clone();
            let why = format!("{why}, so this cannot be judged");
            for (name, check) in self.s.checks.iter_mut() {
                // (A file that failed as read may have its footer wrong too.)
                if (name == "no_dropped_events" && !unreadable) || check.ok.is_none() {
                    continue;
                }
                let real_failure = !altered
                    && check.ok == Some(false)
                    && (name == "no_stall"
                        || check
                            .first_t_s
                            .zip(settled_before_s)
                            .is_some_and(|(t, before)| t < before));
                if !real_failure {
                    *check = Check::na(match (check.ok, check.first_t_s) {
                        // A violation set aside says so, and why this one.
                        (Some(false), Some(t)) => {
                            let line = check
                                .first_line
                                .map_or(String::new(), |l| format!(", line {l}"));
                            // Where it lies against the damage: after it,
                            // or close enough before it to be explained.
                            // (`at` is the latest event read before the
                            // corrupt line, or the `t` where the late event
                            // belongs: one at that `t` lies before it.)
                            let place = |at: f64| {
                                if t <= at {
                                    format!(
                                        "within the reorder window ({} ms) before",
                                        reorder::WINDOW_NS / 1_000_000
                                    )
                                } else {
                                    "after".into()
                                }
                            };
                            let because = match damage_s {
                                Some(at) if !altered && self.damage_is_late => format!(
                                    "it lies {} an event analysed out of time order (which belongs at \
                                     {at:.3} s), which may explain it",
                                    place(at)
                                ),
                                Some(at) if !altered => format!(
                                    "it lies {} the corrupt line (read after events up to {at:.3} s), \
                                     which may have held what explains it",
                                    place(at)
                                ),
                                _ if unreadable => "the file's bytes may be wrong anywhere before its read error, so it may be made up".into(),
                                _ => "lines lost or added may be anywhere, so it may be made up or explained by one".into(),
                            };
                            format!(
                                "{why_of_doubt}: a violation was seen (first at {t:.3} s{line}), but {because}; \
                                 this cannot be judged"
                            )
                        }
                        _ => why.clone(),
                    });
                }
            }
        }
        (self.s, self.tl)
    }
}

/// The result of analysing one trace file.
pub struct Analysis {
    /// Writing the window log failed (the analysis itself is complete).
    pub window_log_error: Option<std::io::Error>,
    pub summary: Summary,
    pub timeline: Timeline,
    /// Things the reader of the results must know (truncation, drops, corrupt lines).
    pub warnings: Vec<String>,
    pub events: u64,
    /// Where the report's ladder looks by default.
    pub slice: slice::SliceFinder,
}

/// What the run's meta.json says that the trace contradicts (it was
/// believed without a word): a clock anchor other than the sound header's
/// (the same recording's are equal, a merge's too), or a schema newer than
/// this reader's.
fn meta_disagrees(dir: &Path, header: &crate::schema::Header, damaged: bool) -> Option<String> {
    let m = crate::meta::Meta::read(dir).ok()?;
    let path = dir.join("meta.json");
    if m.schema > crate::meta::META_VERSION {
        return Some(format!(
            "{}: schema {} is newer than this reader's {}: its fields may be read wrong (upgrade h2probe)",
            path.display(),
            m.schema,
            crate::meta::META_VERSION
        ));
    }
    let c = m.clock.filter(|_| !damaged)?;
    (c.origin_mono_ns != header.origin_mono_ns || c.origin_unix_ns != header.origin_unix_ns).then(|| {
        format!(
            "{}: its clock anchor ({} ns monotonic, {} ns Unix) is not the trace header's ({}, {}): it is another run's, or damaged; the figures count from the header's",
            path.display(),
            c.origin_mono_ns,
            c.origin_unix_ns,
            header.origin_mono_ns,
            header.origin_unix_ns
        )
    })
}

/// Analyses a trace file in one streaming pass. A corrupt line in the middle
/// is skipped with a warning; a cut last line ends the pass with a warning.
pub fn analyze_trace(path: &Path) -> Result<Analysis, crate::reader::OpenError> {
    analyze_trace_with(path, None)
}

/// [`analyze_trace`], also writing every window change to `window_log`
/// (rewritten from its start if the trace has to be read again).
///
/// The events are read through the reorder window ([`reorder`]); a trace
/// with an event written later than the window allows is read a second
/// time and sorted whole on disk ([`spill`]), so that no figure depends on
/// the order its lines reached the file. Only if that sort fails (a full
/// `$TMPDIR`) are the events analysed as the window left them, and said so.
pub fn analyze_trace_with(
    path: &Path,
    window_log: Option<std::fs::File>,
) -> Result<Analysis, crate::reader::OpenError> {
    let mut a = analyze_in_time_order(path, window_log)?;
    if let Some(w) = span_disagrees(path, a.summary.span_s) {
        a.warn(w);
    }
    Ok(a)
}

/// A trace that spans longer than its run did by meta.json's wall clock
/// (start to finish, with 2 s and 1 % of slack): an event's `t` is
/// damaged, and every figure over time is stretched (one event moved 10^15
/// ns later made a 3 s run span 11 days, without a word).
fn span_disagrees(path: &Path, span_s: f64) -> Option<String> {
    let m = crate::meta::Meta::read(path.parent()?).ok()?;
    if m.finished_unix_ns <= m.started_unix_ns || m.started_unix_ns == 0 {
        return None;
    }
    let ran_s = (m.finished_unix_ns - m.started_unix_ns) as f64 / 1e9;
    (span_s > ran_s * 1.01 + 2.0).then(|| {
        format!(
            "{}: the events span {span_s:.1} s, but the run lasted {ran_s:.1} s by meta.json's start and finish: an event's time is damaged, and the figures over time are stretched by it",
            path.display()
        )
    })
}

/// [`analyze_trace_with`]'s passes: through the reorder window, and sorted
/// whole if an event came too late for it.
fn analyze_in_time_order(
    path: &Path,
    window_log: Option<std::fs::File>,
) -> Result<Analysis, crate::reader::OpenError> {
    let (first, _) = analysis_pass(path, window_log.as_ref(), TimeOrder::window())?;
    let late = first.summary.out_of_order_events;
    if late == 0 {
        return Ok(first);
    }
    let failed = match analysis_pass(path, window_log.as_ref(), TimeOrder::sorted())? {
        (mut a, None) => {
            a.summary.late_written_events = late;
            a.warn(format!(
                "{}: {late} event{} reached the file too late for the {} ms reorder window to put in place: the trace was sorted whole, so they were analysed in their place",
                path.display(),
                if late == 1 { "" } else { "s" },
                reorder::WINDOW_NS / 1_000_000,
            ));
            return Ok(a);
        }
        (_, Some(failed)) => failed,
    };
    // The sort failed: the window's analysis again (the log was rewritten).
    let (mut a, _) = analysis_pass(path, window_log.as_ref(), TimeOrder::window())?;
    a.warn(format!(
        "{}: sorting the trace to put those events in their place failed ({failed}; its runs are written to temporary files in {}, $TMPDIR); the figures are those of the reorder window's order",
        path.display(),
        std::env::temp_dir().display()
    ));
    Ok(a)
}

impl Analysis {
    /// A warning for the reader and in summary.json.
    fn warn(&mut self, note: String) {
        self.summary.warnings.push(note.clone());
        self.warnings.push(note);
    }
}

/// The analysis' time order for one pass.
pub(crate) enum TimeOrder {
    /// Through the bounded reorder window: one pass, in step with reading.
    Window(reorder::Reorder),
    /// All of them sorted on disk before the analysis sees the first.
    Sorted(spill::SpillSort),
}

impl TimeOrder {
    pub(crate) fn window() -> TimeOrder {
        TimeOrder::Window(reorder::Reorder::default())
    }

    pub(crate) fn sorted() -> TimeOrder {
        TimeOrder::Sorted(spill::SpillSort::default())
    }

    /// Adds `e`, read from line `line`; `out` gets every event now due.
    pub(crate) fn push(&mut self, e: Event, line: u64, out: impl FnMut(Event, u64)) {
        match self {
            TimeOrder::Window(w) => w.push(e, line, out),
            TimeOrder::Sorted(s) => s.push(e, line),
        }
    }

    /// Events handed out after a later one so far (always 0 for a sort).
    pub(crate) fn late(&self) -> u64 {
        match self {
            TimeOrder::Window(w) => w.late,
            TimeOrder::Sorted(_) => 0,
        }
    }

    /// Hands out the rest; the reorder window's account of what it could
    /// not put in its place (nothing, for a sort), or why the sort failed.
    pub(crate) fn finish(self, out: impl FnMut(Event, u64)) -> std::io::Result<reorder::Reorder> {
        match self {
            TimeOrder::Window(mut w) => {
                w.finish(out);
                Ok(w)
            }
            TimeOrder::Sorted(s) => s.finish(out).map(|()| reorder::Reorder::default()),
        }
    }
}

/// One pass over the trace in `order`, with the error that made a sorted
/// pass's sort fail (its analysis is then void). `window_log` is rewritten
/// from its start.
fn analysis_pass(
    path: &Path,
    window_log: Option<&std::fs::File>,
    mut order: TimeOrder,
) -> Result<(Analysis, Option<std::io::Error>), crate::reader::OpenError> {
    let mut r = TraceReader::open(path)?.without_payloads();
    let mut a = Analyzer::new(r.header().origin_mono_ns);
    if let Some(f) = window_log {
        let log = f.try_clone().and_then(|mut f| {
            use std::io::Seek as _;
            f.set_len(0)?;
            f.rewind()?;
            Ok(f)
        });
        match log {
            Ok(f) => a = a.with_window_log(Box::new(std::io::BufWriter::new(f))),
            Err(e) => a.window_log_error = Some(e),
        }
    }
    let mut warnings = vec![];
    let mut events = 0u64;
    let mut corrupt = 0u64;
    // Where the report's ladder looks, found on this pass (it need not
    // search the trace again).
    let mut slice = slice::SliceFinder::default();
    let mut last_read_t = 0u64;
    while let Some(ev) = r.next_event() {
        match ev {
            Ok(e) => {
                events += 1;
                last_read_t = last_read_t.max(e.t);
                let line = r.line();
                order.push(e, line, |e, line| {
                    a.line = line;
                    slice.feed(&e, true);
                    a.feed(&e)
                });
            }
            Err(e) if e.is_one_line() => {
                corrupt += 1;
                // Where the first was, on the trace's clock: the events
                // read before it were all there (see `Analyzer::finish`).
                a.damage_at.get_or_insert(last_read_t);
                a.s.first_corrupt_line.get_or_insert(r.line());
                if corrupt <= crate::reader::NAMED_SKIPS {
                    warnings.push(format!("{}: skipped {e}", path.display()));
                }
            }
            // The input's own error: reading ends here. The reader keeps
            // it as `read_error`, said below with what it means.
            Err(_) => {}
        }
    }
    let mut sort_failed = None;
    let feed = |e: Event, line| {
        a.line = line;
        slice.feed(&e, true);
        a.feed(&e)
    };
    let order = order.finish(feed).unwrap_or_else(|e| {
        sort_failed = Some(e);
        reorder::Reorder::default()
    });
    if corrupt > 0 {
        // What the lines above mean, said once (the lines, up to five).
        warnings.push(format!(
            "{}: {corrupt} corrupt line{} skipped in all, an event lost each: the figures are those of the lines present, and only failures settled before the first are judged",
            path.display(),
            if corrupt == 1 { "" } else { "s" }
        ));
    }
    if let Some(w) = order.warning() {
        warnings.push(format!("{}: {w}", path.display()));
    }
    a.s.out_of_order_events = order.late;
    if let Some(t) = order.first_late_t {
        if a.damage_at.is_none_or(|d| t < d) {
            a.damage_at = Some(t);
            a.damage_is_late = true;
        }
    }
    a.s.corrupt_lines = corrupt;
    a.s.damaged_payloads = r.bad_payloads;
    a.s.unknown_events = r.unknown;
    a.s.event_lines = events + corrupt + r.unknown;
    a.s.after_footer_line = r.after_footer;
    a.s.read_error = r.read_error.clone();
    if let Some(said) = &r.damaged_header {
        warnings.push(format!("{}: {said}", path.display()));
    }
    warnings.extend(
        path.parent()
            .and_then(|d| meta_disagrees(d, r.header(), r.damaged_header.is_some())),
    );
    // trace.jsonl is read before trace.jsonl.gz: the other one is said.
    let gz = path.with_file_name("trace.jsonl.gz");
    if path.file_name() == Some("trace.jsonl".as_ref()) && gz.is_file() {
        warnings.push(format!(
            "{}: {} is here too and was not read (two traces of one run? remove the one that is not)",
            path.display(),
            gz.display()
        ));
    }
    if let Some(e) = &r.read_error {
        warnings.push(format!(
            "{}: the file failed as it was read ({e}): a compressed trace's bytes may be wrong anywhere before that (its checksum is checked at its end), so the figures may be wrong and the checks cannot be judged",
            path.display()
        ));
    }
    if let Some(line) = r.after_footer {
        warnings.push(format!(
            "{}: the file goes on after its footer (line {line}): what follows was not read (two traces joined, or a damaged file); the figures are those before it, and the checks cannot be judged",
            path.display()
        ));
    }
    if let Ending::Clean(f) = r.ending() {
        a.s.footer_events = Some(f.events);
        if let Some(why) = a.s.lines_altered() {
            warnings.push(format!(
                "{}: {why}; the figures are those of the lines present, and the checks cannot be judged",
                path.display(),
            ));
        }
    }
    // A wait is written when it ends: those in progress at a cut are lost.
    const CUT_WAITS: &str = "blocked times count only the waits that ended before the cut (a wait is written when it ends)";
    let ending = r.ending().clone();
    let dropped = match &ending {
        Ending::Clean(f) => f.dropped_total(),
        Ending::Truncated { line } => {
            // A file that failed as read was not cut by its writer (said
            // above, with what it means).
            let why = match r.read_error {
                Some(_) => "the file could not be read past it",
                None => "the writer was interrupted",
            };
            warnings.push(format!(
                "{}: the trace is truncated at line {line} ({why}); analysed up to the last complete event; {CUT_WAITS}",
                path.display()
            ));
            0
        }
        Ending::NoFooter => {
            warnings.push(match r.damaged_footer {
                Some(line) => format!(
                    "{}: its footer (line {line}) is damaged, so the counts it held are lost; drop counts unknown; {CUT_WAITS}",
                    path.display()
                ),
                None => format!(
                    "{}: the trace has no footer (the writer did not finish); drop counts unknown; {CUT_WAITS}",
                    path.display()
                ),
            });
            0
        }
        Ending::Open => 0,
    };
    if dropped > 0 {
        warnings.push(format!(
            "{}: the recorder DROPPED {dropped} events (its buffer full, or recorded as the trace closed): counts and checks are incomplete; if meta.json's recorder.largest_sweep reached --trace-buffer, raise it",
            path.display()
        ));
    }
    if a.s.payload_dropped_frames > 0 {
        warnings.push(format!(
            "{}: {} frames ({} payload bytes) were recorded without their payload: --trace-payload-buffer was full (the writer behind) or smaller than the frame (raise it to keep them), or the trace had reached --trace-limit. Every frame, count and window is here; exports write zeros for those bytes",
            path.display(),
            a.s.payload_dropped_frames,
            a.s.payload_dropped_bytes
        ));
    }
    if let Some(w) = r.bad_payload_warning() {
        warnings.push(format!("{}: {w}", path.display()));
    }
    if let Some(first) = r.first_unknown_line {
        warnings.push(format!(
            "{}: {} events of unknown types skipped, the first at line {first} (written by a newer h2probe?)",
            path.display(),
            r.unknown
        ));
    }
    let (mut summary, timeline, window_log_error) = a.finish_with_log(dropped, &ending);
    if summary.frames_after_retirement > 0 {
        warnings.push(format!(
            "{}: {} ({} DATA bytes) arrived after the analysis had judged their stream and forgotten it, a slow or queued link (README, Memory, says how long a stream is waited for); they count in the connection's windows and totals, not in their stream's figures",
            path.display(),
            match summary.frames_after_retirement {
                1 => "1 frame".to_string(),
                n => format!("{n} frames"),
            },
            summary.data_bytes_after_retirement
        ));
    }
    if summary.events_after_conn_retirement > 0 {
        warnings.push(format!(
            "{}: {} named a connection (or a relay's pair) after its tap had recorded its close and the analysis had judged it (a damaged or edited trace); left out of every figure, and the checks cannot be judged",
            path.display(),
            crate::report::counted(summary.events_after_conn_retirement, "event"),
        ));
    }
    summary.warnings = warnings.clone();
    let analysis = Analysis {
        window_log_error,
        summary,
        timeline,
        warnings,
        events,
        slice,
    };
    Ok((analysis, sort_failed))
}
