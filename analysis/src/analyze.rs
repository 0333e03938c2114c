//! One streaming pass over a trace: counts, rates, windows, blocking,
//! WINDOW_UPDATE behaviour, invariant checks and bounded time series.
//!
//! Memory depends on open streams, messages owned at once and the fixed
//! size of the series, never on the number of events.

use crate::reader::{Ending, TraceReader};
use crate::schema::{self, Dir, Endpoint, Event, FrameType, Kind, ReleasePoint};
use crate::series::{Merge, Series};
use crate::stats::{least_squares, Distribution, Recorder};
use crate::windows::FlowWindows;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

/// Buckets per series (bounded memory, enough for a readable plot).
const SERIES_CAP: usize = 2048;
/// Blocked intervals kept for the interval plot; later ones only counted.
const MAX_INTERVALS: usize = 20_000;

/// Which way DATA travels.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flow {
    C2s = 0,
    S2c = 1,
}

fn flow_of(ep: Endpoint, dir: Dir) -> Flow {
    match (ep, dir) {
        (Endpoint::Client, Dir::Out) | (Endpoint::Server, Dir::In) => Flow::C2s,
        _ => Flow::S2c,
    }
}

#[derive(Default)]
struct Conn {
    local: String,
    peer: String,
    flows: [FlowWindows; 2],
    /// DATA payload bytes (padding excluded) per stream, c2s.
    data_c2s: BTreeMap<u32, u64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum MsgState {
    Owned,
    Queued,
    InService,
}

/// Server-side state of one RPC.
#[derive(Default)]
struct Rpc {
    unreleased: i64,
    chunks: u64,
    msgs: HashMap<u64, (u32, MsgState)>,
}

/// Releases waiting for the WINDOW_UPDATE that carries them.
#[derive(Default)]
struct Pending {
    fifo: VecDeque<(u64, u64)>,
}

impl Pending {
    fn push(&mut self, t: u64, bytes: u64) {
        self.fifo.push_back((t, bytes));
    }
    /// Consumes `inc` bytes; returns latencies of releases fully carried and
    /// bytes of the increment that matched no release.
    fn consume(&mut self, t: u64, mut inc: u64, lat: &mut Recorder) -> u64 {
        while inc > 0 {
            let Some(front) = self.fifo.front_mut() else {
                break;
            };
            if front.1 <= inc {
                inc -= front.1;
                lat.record(t.saturating_sub(front.0));
                self.fifo.pop_front();
            } else {
                front.1 -= inc;
                inc = 0;
            }
        }
        inc
    }
}

/// An invariant and whether the trace honours it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `None` when the trace lacks what the check needs (e.g. no server events).
    pub ok: Option<bool>,
    pub detail: String,
}

impl Check {
    fn new(ok: bool, detail: impl Into<String>) -> Check {
        Check {
            ok: Some(ok),
            detail: detail.into(),
        }
    }
    fn na(detail: impl Into<String>) -> Check {
        Check {
            ok: None,
            detail: detail.into(),
        }
    }
}

/// The headline figures of one run (`summary.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Seconds from the first to the last event.
    pub span_s: f64,
    pub scheduled: u64,
    pub sent: u64,
    pub never_sent: u64,
    pub never_sent_by_reason: BTreeMap<String, u64>,
    pub decoded: u64,
    pub completed: u64,
    pub discarded: u64,
    pub discarded_by_reason: BTreeMap<String, u64>,
    /// scheduled − completed − discarded − never_sent. Non-zero only when
    /// messages were lost in flight (see `lost_in_flight`) or events are missing.
    pub unaccounted: i64,
    /// Messages handed to h2 that the server never decoded: sent − decoded.
    /// They were in h2's buffers or on the wire when a stream was reset, so
    /// only RPCs that did not end OK can have them.
    pub lost_in_flight: i64,
    /// Messages per second over the offered period (first to last `schedule`).
    pub offered_rate: f64,
    /// `send` events per second, first schedule → last send.
    pub send_rate: f64,
    pub decode_rate: f64,
    /// `complete` events per second, first start → last complete.
    pub completion_rate: f64,
    /// Least-squares slope of queue depth (msg/s) over `queue_growth_window_s`.
    pub queue_growth_rate: f64,
    /// The steady window of the fit, seconds since the trace origin:
    /// warm-up (first 10% of the offered period) and drain excluded.
    pub queue_growth_window_s: (f64, f64),
    /// Stream-level WINDOW_UPDATEs the server sent within the growth window,
    /// and the stream credit (bytes) they returned: what the transport kept
    /// granting while the queue grew. (Connection-level updates come on top.)
    pub window_updates_in_growth_window: u64,
    pub credit_returned_in_growth_window: u64,
    /// Queue depth change over the growth window, messages.
    pub queue_growth_in_window: f64,
    pub max_queue_depth: u64,
    pub max_queued_bytes: u64,
    /// Peak framed bytes decoded and not yet completed or discarded.
    pub max_owned_bytes: u64,
    /// Peak bytes received by the server application and not yet released.
    pub max_unreleased_bytes: u64,
    pub client_window_blocked_s: f64,
    pub client_socket_blocked_s: f64,
    pub server_socket_blocked_s: f64,
    pub window_blocked_ms: Distribution,
    pub socket_blocked_ms: Distribution,
    /// Scheduled → handed to h2 (start of `send_data`), ms.
    pub lateness_ms: Distribution,
    /// DATA frames / payload bytes read by the server's tap.
    pub data_frames_in: u64,
    pub data_bytes_in: u64,
    /// WINDOW_UPDATE frames written by the server's tap (stream + connection).
    pub window_updates_out: u64,
    pub window_updates_out_stream: u64,
    pub window_updates_out_conn: u64,
    /// Stream-level WINDOW_UPDATE increments, bytes.
    pub window_update_increment: Distribution,
    pub releases: u64,
    pub released_bytes: u64,
    /// Releases per stream-level WINDOW_UPDATE.
    pub coalescing_ratio: f64,
    /// `release` call → the stream WINDOW_UPDATE that carried its last byte, ms.
    pub release_to_update_ms: Distribution,
    /// Same, for the connection-level WINDOW_UPDATE.
    pub release_to_conn_update_ms: Distribution,
    pub release_point: Option<String>,
    /// Client tap write → server tap read of the same client→server frame
    /// (matched by byte offset), ms: the one-way time through the socket,
    /// plus any `--link-delay`.
    pub c2s_frame_latency_ms: Distribution,
    /// Client RPC outcomes by gRPC status name.
    pub rpc_status: BTreeMap<String, u64>,
    pub server_rpc_status: BTreeMap<String, u64>,
    /// Lowest windows reconstructed anywhere (should never be negative).
    pub min_window: i64,
    pub protocol_violations: u64,
    pub wire_errors: u64,
    pub peak_rss_bytes: u64,
    pub dropped_events: u64,
    /// clean | no_footer | truncated at line N
    pub trace_ending: String,
    pub checks: BTreeMap<String, Check>,
}

/// Time series for plots and CSV (bounded, see [`Series`]).
pub struct Timeline {
    pub credit_conn_client: Series,
    pub credit_stream_client: Series,
    pub credit_conn_server: Series,
    pub unreleased: Series,
    pub owned_bytes: Series,
    pub queue_depth: Series,
    pub scheduled: Series,
    pub sent: Series,
    pub completed: Series,
    pub discarded: Series,
    pub window_blocked: Series,
    pub socket_blocked: Series,
    pub window_update_bytes: Series,
    pub window_updates: Series,
    pub rss: Series,
    /// (start s, end s, window=true / socket=false) client blocked intervals.
    pub intervals: Vec<(f64, f64, bool)>,
    pub intervals_dropped: u64,
    /// Seconds from the trace origin to the last event.
    pub end_s: f64,
}

impl Timeline {
    fn new(origin: u64) -> Timeline {
        let s = |m| Series::new(origin, 1_000_000, SERIES_CAP, m);
        Timeline {
            credit_conn_client: s(Merge::Min),
            credit_stream_client: s(Merge::Min),
            credit_conn_server: s(Merge::Min),
            unreleased: s(Merge::Max),
            owned_bytes: s(Merge::Max),
            queue_depth: s(Merge::Max),
            scheduled: s(Merge::Last),
            sent: s(Merge::Last),
            completed: s(Merge::Last),
            discarded: s(Merge::Last),
            window_blocked: s(Merge::Sum),
            socket_blocked: s(Merge::Sum),
            window_update_bytes: s(Merge::Sum),
            window_updates: s(Merge::Sum),
            rss: s(Merge::Max),
            intervals: vec![],
            intervals_dropped: 0,
            end_s: 0.0,
        }
    }
}

/// Feeds events one at a time; [`Analyzer::finish`] gives the results.
pub struct Analyzer {
    origin: u64,
    first_t: Option<u64>,
    last_t: u64,
    conns: HashMap<(Endpoint, u32), Conn>,
    rpcs: HashMap<(u32, u32), Rpc>,
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
    window_blocked: Recorder,
    socket_blocked: Recorder,
    server_socket_ns: u64,
    lateness: Recorder,
    wu_increment: Recorder,
    rel_lat: Recorder,
    rel_conn_lat: Recorder,
    pending_stream: HashMap<(u32, u32), Pending>,
    pending_conn: HashMap<u32, Pending>,
    credit_violations: u64,
    credit_detail: String,
    has_client: bool,
    has_server: bool,
    /// gRPC status the server ended each (conn, stream) RPC with.
    server_status: HashMap<(u32, u32), u32>,
    /// Client→server frames written by the client's tap and not yet read by
    /// the server's, per (client address, server address): (offset, t).
    in_flight: HashMap<(String, String), VecDeque<(u64, u64)>>,
    frame_latency: Recorder,
    /// Where every window change is written as CSV, when asked.
    window_log: Option<Box<dyn std::io::Write>>,
    window_log_error: Option<std::io::Error>,
}

impl Analyzer {
    /// Also writes every reconstructed window change to `out` as CSV:
    /// `t_s,tap,conn,flow,stream,window` (stream 0 = the connection window).
    pub fn with_window_log(mut self, mut out: Box<dyn std::io::Write>) -> Analyzer {
        if let Err(e) = writeln!(out, "t_s,tap,conn,flow,stream,window") {
            self.window_log_error = Some(e);
        }
        self.window_log = Some(out);
        self
    }

    fn log_window(&mut self, t: u64, e: &Event, flow: usize, stream: u32, window: i64) {
        if self.window_log_error.is_some() {
            return;
        }
        let secs = self.secs(t);
        if let Some(out) = self.window_log.as_mut() {
            let flow = if flow == Flow::C2s as usize {
                "c2s"
            } else {
                "s2c"
            };
            if let Err(err) = writeln!(
                out,
                "{secs:.9},{},{},{flow},{stream},{window}",
                e.ep.as_str(),
                e.conn
            ) {
                self.window_log_error = Some(err);
            }
        }
    }
    pub fn new(origin: u64) -> Analyzer {
        Analyzer {
            origin,
            first_t: None,
            last_t: 0,
            conns: HashMap::new(),
            rpcs: HashMap::new(),
            s: Summary {
                min_window: i64::MAX,
                ..Summary::default()
            },
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
            window_blocked: Recorder::new(1e-6),
            socket_blocked: Recorder::new(1e-6),
            server_socket_ns: 0,
            lateness: Recorder::new(1e-6),
            wu_increment: Recorder::new(1.0),
            rel_lat: Recorder::new(1e-6),
            rel_conn_lat: Recorder::new(1e-6),
            pending_stream: HashMap::new(),
            pending_conn: HashMap::new(),
            credit_violations: 0,
            credit_detail: String::new(),
            has_client: false,
            has_server: false,
            server_status: HashMap::new(),
            in_flight: HashMap::new(),
            frame_latency: Recorder::new(1e-6),
            window_log: None,
            window_log_error: None,
        }
    }

    fn secs(&self, t: u64) -> f64 {
        t.saturating_sub(self.origin) as f64 / 1e9
    }

    pub fn feed(&mut self, e: &Event) {
        self.first_t.get_or_insert(e.t);
        self.last_t = self.last_t.max(e.t);
        match e.ep {
            Endpoint::Client => self.has_client = true,
            Endpoint::Server => self.has_server = true,
        }
        let t = e.t;
        match &e.kind {
            Kind::Frame(f) => self.frame(e, f),
            Kind::WireError(_) => self.s.wire_errors += 1,
            Kind::SocketBlocked(b) => {
                let d = t.saturating_sub(b.start);
                if e.ep == Endpoint::Client {
                    self.socket_blocked.record(d);
                    self.tl.socket_blocked.push(b.start, d as f64 / 1e9);
                    self.interval(b.start, t, false);
                } else {
                    self.server_socket_ns += d;
                }
            }
            Kind::ConnOpen(c) => {
                let conn = self.conns.entry((e.ep, e.conn)).or_default();
                conn.local = c.local.clone();
                conn.peer = c.peer.clone();
            }
            Kind::ConnClose(_) | Kind::RpcStart(_) | Kind::Unknown => {}
            Kind::RpcEnd(r) => {
                if e.ep == Endpoint::Server {
                    self.server_status.insert((e.conn, e.stream), r.status);
                }
                let name = status_name(r.status);
                let map = match e.ep {
                    Endpoint::Client => &mut self.s.rpc_status,
                    Endpoint::Server => &mut self.s.server_rpc_status,
                };
                *map.entry(name).or_default() += 1;
            }
            Kind::Chunk(c) => {
                let rpc = self.rpcs.entry((e.conn, e.stream)).or_default();
                rpc.unreleased += c.len as i64;
                rpc.chunks += c.len as u64;
                let u = rpc.unreleased;
                self.unreleased += c.len as i64;
                self.s.max_unreleased_bytes = self
                    .s
                    .max_unreleased_bytes
                    .max(self.unreleased.max(0) as u64);
                self.tl.unreleased.push(t, self.unreleased as f64);
                // Credit conservation: never more unreleased than the window advertised.
                let advertised = self
                    .conns
                    .get(&(Endpoint::Server, e.conn))
                    .map_or(crate::windows::DEFAULT_WINDOW, |c| {
                        c.flows[Flow::C2s as usize].initial()
                    });
                if u > advertised {
                    self.credit_violations += 1;
                    if self.credit_detail.is_empty() {
                        self.credit_detail = format!(
                            "stream {} held {u} unreleased bytes at {:.3}s, above the advertised window {advertised}",
                            e.stream,
                            self.secs(t)
                        );
                    }
                }
            }
            Kind::Release(r) => {
                if let Some(rpc) = self.rpcs.get_mut(&(e.conn, e.stream)) {
                    rpc.unreleased -= r.bytes as i64;
                }
                self.unreleased -= r.bytes as i64;
                self.tl.unreleased.push(t, self.unreleased as f64);
                self.s.releases += 1;
                self.s.released_bytes += r.bytes as u64;
                if self.s.release_point.is_none() || r.seq.is_some() || r.at == ReleasePoint::Frame
                {
                    self.s.release_point = Some(r.at.as_str().to_string());
                }
                self.pending_stream
                    .entry((e.conn, e.stream))
                    .or_default()
                    .push(t, r.bytes as u64);
                self.pending_conn
                    .entry(e.conn)
                    .or_default()
                    .push(t, r.bytes as u64);
            }
            Kind::Decode(m) => {
                self.s.decoded += 1;
                self.first_decode.get_or_insert(t);
                self.last_decode = t;
                let rpc = self.rpcs.entry((e.conn, e.stream)).or_default();
                rpc.msgs.insert(m.seq, (m.framed, MsgState::Owned));
                self.owned += m.framed as i64;
                self.s.max_owned_bytes = self.s.max_owned_bytes.max(self.owned as u64);
                self.tl.owned_bytes.push(t, self.owned as f64);
            }
            Kind::Enqueue(q) => {
                if let Some((framed, _)) = self.set_state(e, q.seq, MsgState::Queued) {
                    self.queued_bytes += framed as i64;
                }
                self.depth += 1;
                self.s.max_queue_depth = self.s.max_queue_depth.max(self.depth as u64);
                self.s.max_queued_bytes = self.s.max_queued_bytes.max(self.queued_bytes as u64);
                self.tl.queue_depth.push(t, self.depth as f64);
            }
            Kind::Start(st) => {
                self.first_start.get_or_insert(t);
                if let Some((framed, MsgState::Queued)) =
                    self.set_state(e, st.seq, MsgState::InService)
                {
                    self.queued_bytes -= framed as i64;
                    self.depth -= 1;
                }
                self.tl.queue_depth.push(t, self.depth as f64);
            }
            Kind::Complete(c) => {
                self.s.completed += 1;
                self.last_complete = t;
                self.forget(e, c.seq, t);
                self.tl.completed.push(t, self.s.completed as f64);
            }
            Kind::Discard(d) => {
                self.s.discarded += 1;
                *self
                    .s
                    .discarded_by_reason
                    .entry(d.reason.as_str().into())
                    .or_default() += 1;
                self.forget(e, d.seq, t);
                self.tl.discarded.push(t, self.s.discarded as f64);
            }
            Kind::Sample(smp) => {
                self.s.peak_rss_bytes = self.s.peak_rss_bytes.max(smp.rss_bytes);
                self.tl.rss.push(t, smp.rss_bytes as f64);
            }
            Kind::Schedule(_) => {
                self.s.scheduled += 1;
                self.first_schedule.get_or_insert(t);
                self.last_schedule = self.last_schedule.max(t);
                self.tl.scheduled.push(t, self.s.scheduled as f64);
            }
            Kind::Send(sd) => {
                self.s.sent += 1;
                self.last_send = self.last_send.max(t);
                self.lateness.record(sd.begin.saturating_sub(sd.scheduled));
                self.tl.sent.push(t, self.s.sent as f64);
            }
            Kind::WindowBlocked(w) => {
                let d = t.saturating_sub(w.start);
                self.window_blocked.record(d);
                self.tl.window_blocked.push(w.start, d as f64 / 1e9);
                self.interval(w.start, t, true);
            }
            Kind::NeverSent(n) => {
                self.s.never_sent += 1;
                *self
                    .s
                    .never_sent_by_reason
                    .entry(n.reason.as_str().into())
                    .or_default() += 1;
            }
        }
    }

    fn interval(&mut self, start: u64, end: u64, window: bool) {
        if self.tl.intervals.len() < MAX_INTERVALS {
            let iv = (self.secs(start), self.secs(end), window);
            self.tl.intervals.push(iv);
        } else {
            self.tl.intervals_dropped += 1;
        }
    }

    /// Moves a message to `to`; returns its framed size and previous state.
    fn set_state(&mut self, e: &Event, seq: u64, to: MsgState) -> Option<(u32, MsgState)> {
        let m = self.rpcs.get_mut(&(e.conn, e.stream))?.msgs.get_mut(&seq)?;
        let before = m.1;
        m.1 = to;
        Some((m.0, before))
    }

    /// A message left the application (completed or discarded).
    fn forget(&mut self, e: &Event, seq: u64, t: u64) {
        let Some((framed, st)) = self
            .rpcs
            .get_mut(&(e.conn, e.stream))
            .and_then(|r| r.msgs.remove(&seq))
        else {
            return;
        };
        self.owned -= framed as i64;
        if st == MsgState::Queued {
            self.queued_bytes -= framed as i64;
            self.depth -= 1;
            self.tl.queue_depth.push(t, self.depth as f64);
        }
        self.tl.owned_bytes.push(t, self.owned as f64);
    }

    /// Matches a client→server frame seen by both taps (by byte offset).
    fn match_in_flight(&mut self, e: &Event, f: &schema::FrameEv) {
        let Some(c) = self.conns.get(&(e.ep, e.conn)) else {
            return;
        };
        match (e.ep, f.dir) {
            (Endpoint::Client, Dir::Out) => {
                let q = self
                    .in_flight
                    .entry((c.local.clone(), c.peer.clone()))
                    .or_default();
                q.push_back((f.offset, e.t));
                // Bounded: a client-only trace never drains this.
                if q.len() > 100_000 {
                    q.pop_front();
                }
            }
            (Endpoint::Server, Dir::In) => {
                if let Some(q) = self.in_flight.get_mut(&(c.peer.clone(), c.local.clone())) {
                    while q.front().is_some_and(|(off, _)| *off < f.offset) {
                        q.pop_front();
                    }
                    if let Some((off, t0)) = q.front().copied() {
                        if off == f.offset {
                            self.frame_latency.record(e.t.saturating_sub(t0));
                            q.pop_front();
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn frame(&mut self, e: &Event, f: &schema::FrameEv) {
        self.match_in_flight(e, f);
        let t = e.t;
        let travel = flow_of(e.ep, f.dir);
        let conn = self.conns.entry((e.ep, e.conn)).or_default();
        match f.frame {
            FrameType::DATA => {
                let w = &mut conn.flows[travel as usize];
                w.on_data(t, e.stream, f.flow_len());
                let (cw, sw) = (w.conn(), w.stream(e.stream));
                if travel == Flow::C2s {
                    *conn.data_c2s.entry(e.stream).or_default() += f.data_len() as u64;
                }
                self.log_window(t, e, travel as usize, 0, cw);
                self.log_window(t, e, travel as usize, e.stream, sw);
                if e.ep == Endpoint::Server && f.dir == Dir::In {
                    self.s.data_frames_in += 1;
                    self.s.data_bytes_in += f.data_len() as u64;
                }
                if travel == Flow::C2s {
                    self.plot_credit(e, cw, sw);
                }
            }
            FrameType::WINDOW_UPDATE => {
                let inc = f.increment.unwrap_or(0);
                let credited = 1 - travel as usize;
                let w = &mut conn.flows[credited];
                w.on_window_update(t, e.stream, inc);
                let (cw, sw) = (w.conn(), w.stream(e.stream));
                self.log_window(
                    t,
                    e,
                    credited,
                    e.stream,
                    if e.stream == 0 { cw } else { sw },
                );
                if credited == Flow::C2s as usize {
                    self.plot_credit(e, cw, sw);
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
                        if let Some(p) = self.pending_stream.get_mut(&(e.conn, e.stream)) {
                            p.consume(t, inc as u64, &mut self.rel_lat);
                        }
                    }
                }
            }
            FrameType::SETTINGS if !f.has_flag(schema::flags::ACK) => {
                let flow = 1 - travel as usize;
                let mut changed = vec![];
                for (id, v) in f.settings.iter().flatten() {
                    if *id == schema::settings::INITIAL_WINDOW_SIZE {
                        conn.flows[flow].on_initial_window(t, *v);
                        changed = conn.flows[flow].streams().collect();
                    }
                }
                for (id, w) in changed {
                    self.log_window(t, e, flow, id, w);
                }
            }
            _ => {}
        }
    }

    fn plot_credit(&mut self, e: &Event, conn_w: i64, stream_w: i64) {
        match e.ep {
            Endpoint::Client => {
                self.tl.credit_conn_client.push(e.t, conn_w as f64);
                if e.stream != 0
                    && *self.plotted_stream.get_or_insert((e.conn, e.stream)) == (e.conn, e.stream)
                {
                    self.tl.credit_stream_client.push(e.t, stream_w as f64);
                }
            }
            Endpoint::Server => self.tl.credit_conn_server.push(e.t, conn_w as f64),
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
        let bytes_check = self.byte_check(both);
        let agree_check = self.agreement_check(both);
        self.tl.end_s = self.secs(self.last_t);
        let s = &mut self.s;
        s.span_s = self.first_t.map_or(0.0, |f| (self.last_t - f) as f64 / 1e9);
        let rate = |n: u64, a: Option<u64>, b: u64| match a {
            Some(a) if b > a && n > 1 => (n - 1) as f64 / ((b - a) as f64 / 1e9),
            _ => 0.0,
        };
        s.offered_rate = rate(s.scheduled, self.first_schedule, self.last_schedule);
        s.send_rate = match self.first_schedule {
            Some(a) if self.last_send > a && s.sent > 0 => {
                s.sent as f64 / ((self.last_send - a) as f64 / 1e9)
            }
            _ => 0.0,
        };
        s.decode_rate = rate(s.decoded, self.first_decode, self.last_decode);
        s.completion_rate = rate(s.completed, self.first_start, self.last_complete);
        s.unaccounted =
            s.scheduled as i64 - s.completed as i64 - s.discarded as i64 - s.never_sent as i64;
        s.window_blocked_ms = self.window_blocked.summary();
        s.socket_blocked_ms = self.socket_blocked.summary();
        s.client_window_blocked_s = s.window_blocked_ms.sum / 1e3;
        s.client_socket_blocked_s = s.socket_blocked_ms.sum / 1e3;
        s.server_socket_blocked_s = self.server_socket_ns as f64 / 1e9;
        s.lateness_ms = self.lateness.summary();
        s.window_update_increment = self.wu_increment.summary();
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
            let a = (first - self.origin.min(first)) as f64 / 1e9;
            let b = (self.last_schedule.saturating_sub(self.origin)) as f64 / 1e9;
            let lo = a + (b - a) * 0.1;
            let pts: Vec<(f64, f64)> = self
                .tl
                .queue_depth
                .filled()
                .into_iter()
                .filter(|p| p.0 >= lo && p.0 <= b)
                .collect();
            s.queue_growth_rate = least_squares(&pts).map_or(0.0, |(m, _)| m);
            s.queue_growth_window_s = (lo, b);
            if let (Some(first), Some(last)) = (pts.first(), pts.last()) {
                s.queue_growth_in_window = last.1 - first.1;
            }
            let within = |p: &(f64, f64)| p.0 >= lo && p.0 <= b;
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
        let mut violations = 0;
        let mut first_violation = String::new();
        for c in self.conns.values() {
            for w in &c.flows {
                s.min_window = s.min_window.min(w.min_conn()).min(w.min_stream());
                violations += w.violation_count();
                if first_violation.is_empty() {
                    if let Some(v) = w.violations().first() {
                        first_violation =
                            format!("{} on stream {} (window {})", v.what, v.stream, v.window);
                    }
                }
            }
        }
        if s.min_window == i64::MAX {
            s.min_window = 0;
        }
        s.protocol_violations = violations;
        s.dropped_events = dropped;
        s.trace_ending = match ending {
            Ending::Clean(_) => "clean".into(),
            Ending::NoFooter => "no_footer".into(),
            Ending::Truncated { line } => format!("truncated at line {line}"),
            Ending::Open => "open".into(),
        };

        s.lost_in_flight = s.sent as i64 - s.decoded as i64;
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
            if self.has_server {
                Check::new(
                    self.credit_violations == 0,
                    if self.credit_violations == 0 {
                        format!(
                            "unreleased bytes peaked at {}, within the advertised window",
                            s.max_unreleased_bytes
                        )
                    } else {
                        format!(
                            "{} violations; first: {}",
                            self.credit_violations, self.credit_detail
                        )
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
        s.checks = checks;
        (self.s, self.tl)
    }

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

    fn byte_check(&self, both: bool) -> Check {
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

    fn agreement_check(&self, both: bool) -> Check {
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

pub fn status_name(code: u32) -> String {
    let n = match code {
        0 => "OK",
        1 => "CANCELLED",
        2 => "UNKNOWN",
        3 => "INVALID_ARGUMENT",
        4 => "DEADLINE_EXCEEDED",
        5 => "NOT_FOUND",
        8 => "RESOURCE_EXHAUSTED",
        12 => "UNIMPLEMENTED",
        13 => "INTERNAL",
        14 => "UNAVAILABLE",
        _ => return format!("CODE_{code}"),
    };
    n.to_string()
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
}

/// Analyses a trace file in one streaming pass. A corrupt line in the middle
/// is skipped with a warning; a cut last line ends the pass with a warning.
pub fn analyze_trace(path: &Path) -> Result<Analysis, crate::reader::OpenError> {
    analyze_trace_with(path, None)
}

/// [`analyze_trace`], also writing every window change to `window_log`.
pub fn analyze_trace_with(
    path: &Path,
    window_log: Option<Box<dyn std::io::Write>>,
) -> Result<Analysis, crate::reader::OpenError> {
    let mut r = TraceReader::open(path)?;
    let mut a = Analyzer::new(r.header().origin_mono_ns);
    if let Some(w) = window_log {
        a = a.with_window_log(w);
    }
    let mut warnings = vec![];
    let mut events = 0u64;
    let mut corrupt = 0u64;
    while let Some(ev) = r.next_event() {
        match ev {
            Ok(e) => {
                events += 1;
                a.feed(&e);
            }
            Err(e) => {
                corrupt += 1;
                if corrupt <= 5 {
                    warnings.push(format!("{}: skipped {e}", path.display()));
                }
            }
        }
    }
    if corrupt > 5 {
        warnings.push(format!(
            "{}: {corrupt} corrupt lines skipped in all",
            path.display()
        ));
    }
    let ending = r.ending().clone();
    let dropped = match &ending {
        Ending::Clean(f) => f.dropped.values().sum(),
        Ending::Truncated { line } => {
            warnings.push(format!(
                "{}: the trace is truncated at line {line} (the writer was interrupted); analysed up to the last complete event",
                path.display()
            ));
            0
        }
        Ending::NoFooter => {
            warnings.push(format!(
                "{}: the trace has no footer (the writer did not finish); drop counts unknown",
                path.display()
            ));
            0
        }
        Ending::Open => 0,
    };
    if dropped > 0 {
        warnings.push(format!(
            "{}: the recorder DROPPED {dropped} events (buffer full): counts and checks are incomplete; raise --trace-buffer",
            path.display()
        ));
    }
    if r.unknown > 0 {
        warnings.push(format!(
            "{}: {} events of unknown types skipped (newer h2probe?)",
            path.display(),
            r.unknown
        ));
    }
    let (summary, timeline, window_log_error) = a.finish_with_log(dropped, &ending);
    Ok(Analysis {
        window_log_error,
        summary,
        timeline,
        warnings,
        events,
    })
}
