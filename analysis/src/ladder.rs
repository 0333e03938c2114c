//! The frame ladder: a sequence diagram of one time slice of a run. A client
//! column and a server column; every frame of one connection that crossed
//! the wire in the slice is an arrow that leaves the sender's column at the
//! sender tap's `t` and reaches the receiver's column at the receiver tap's
//! `t` of the same frame (matched by byte offset within its direction, as
//! the analyzer matches in-flight frames), drawn to scale in time; the
//! server's application events (chunk, release, decode, enqueue, start,
//! complete, discard) are ticks beside the server column, the client's sends
//! and blocked intervals beside the client column, and the application queue
//! depth is a strip on the right.
//!
//! The trace is read streaming through the analyzer's reorder buffer (events
//! reach the file out of time order); only the slice, plus frames up to
//! [`MARGIN_NS`] around it (the far end of an arrow that crosses the slice's
//! edge), is kept, and reading stops once the slice is past. Memory is
//! bounded by [`MAX_KEPT`] events, the drawing by [`MAX_DRAWN`] arrows and
//! ticks (the page says so when either cap cut something).

use crate::analyze::slice::SliceFinder;
use crate::analyze::TimeOrder;
use crate::page::esc;
use crate::reader::{OpenError, TraceReader};
use crate::schema::{flags, Dir, Endpoint, Event, FrameType, Kind};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::Path;

/// Default length of the slice: 50 ms (15 messages at the default 300/s).
pub const DEFAULT_SPAN_NS: u64 = 50_000_000;
/// Arrows and ticks drawn at most; past it the slice is cut short (and the
/// page says where).
pub const MAX_DRAWN: usize = 300;
/// Frames this far outside the slice are kept to find the other end of an
/// arrow that crosses the slice's edge (a slow or delayed link).
pub const MARGIN_NS: u64 = 1_000_000_000;
/// Events held at most while reading (the slice and its margins).
pub const MAX_KEPT: usize = 100_000;
/// Connections remembered at most (for pairing the two taps' views).
const MAX_CONNS: usize = 65_536;

/// Which slice to draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LadderOpts {
    /// Start of the slice, ns since the trace origin (`origin_mono_ns` of
    /// the header: the time axis of the plots). `None`: the default slice
    /// (see [`build`]).
    pub at_ns: Option<u64>,
    /// Length of the slice, ns.
    pub span_ns: u64,
    /// What a pass over the whole trace in time order found (the
    /// analysis'): when it found no anchor, the default slice is read
    /// without a search pass of its own (which would read the whole trace
    /// again to find none).
    pub found: Option<SliceFinder>,
    /// The analysis found the queue growing while credit flowed (the
    /// headline's `growth` line, [`crate::analyze::Summary::queue_grows_on_credit`]):
    /// only then does the default slice's caption say it shows that. A
    /// queue that reached depth 2 and drained (`--release complete`), or
    /// one capped by Part 3's admission bound, does not grow.
    pub queue_grows: bool,
    /// The analysis found events written later than its reorder window
    /// allows and sorted the trace whole ([`crate::analyze::Summary::late_written_events`]):
    /// the ladder sorts it whole too, rather than find out after its slice.
    pub sort_whole: bool,
}

impl Default for LadderOpts {
    fn default() -> Self {
        LadderOpts {
            at_ns: None,
            span_ns: DEFAULT_SPAN_NS,
            found: None,
            queue_grows: false,
            sort_whole: false,
        }
    }
}

/// Which way a frame travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Client to server (DATA of the upload).
    C2s,
    /// Server to client (WINDOW_UPDATEs).
    S2c,
}

impl Flow {
    fn of(ep: Endpoint, dir: Dir) -> Flow {
        match (ep, dir) {
            (Endpoint::Client, Dir::Out) | (Endpoint::Server, Dir::In) => Flow::C2s,
            _ => Flow::S2c,
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            Flow::C2s => "c2s",
            Flow::S2c => "s2c",
        }
    }
}

/// One endpoint's view of the drawn connection.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    pub conn: u32,
    pub local: String,
    pub peer: String,
}

/// One frame on the wire; either end may be missing (one-sided trace, or
/// beyond the margin).
#[derive(Clone, Debug, PartialEq)]
pub struct Arrow {
    pub flow: Flow,
    pub frame: FrameType,
    pub stream: u32,
    pub offset: u64,
    pub len: u32,
    pub flags: u8,
    pub increment: Option<u32>,
    /// The sender tap's `t`.
    pub send: Option<u64>,
    /// The receiver tap's `t`.
    pub recv: Option<u64>,
}

impl Arrow {
    /// The time the arrow is sorted and capped by: its first end.
    fn t(&self) -> u64 {
        match (self.send, self.recv) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => 0,
        }
    }

    /// `DATA 16384`, `DATA 16 END_STREAM`, `WINDOW_UPDATE +16400 (stream 1)`.
    pub fn label(&self) -> String {
        match self.frame {
            FrameType::DATA => {
                let mut s = format!("DATA {}", self.len);
                if self.flags & flags::END_STREAM != 0 {
                    s.push_str(" END_STREAM");
                }
                s
            }
            FrameType::WINDOW_UPDATE => {
                let inc = self.increment.unwrap_or(0);
                if self.stream == 0 {
                    format!("WINDOW_UPDATE +{inc} (connection)")
                } else {
                    format!("WINDOW_UPDATE +{inc} (stream {})", self.stream)
                }
            }
            FrameType::SETTINGS if self.flags & flags::ACK != 0 => "SETTINGS ACK".into(),
            FrameType::PING if self.flags & flags::ACK != 0 => "PING ACK".into(),
            other => other.to_string(),
        }
    }
}

/// An application event drawn as a tick beside its endpoint's column.
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub ep: Endpoint,
    pub t: u64,
    /// The event type (`chunk`, `release`, … `send`).
    pub kind: &'static str,
    pub text: String,
}

/// A client wait drawn as a band beside the client column.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    /// `window_blocked` or `socket_blocked`.
    pub kind: &'static str,
    pub start: u64,
    pub end: u64,
}

/// The ladder of one slice, ready to draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ladder {
    /// The trace's origin (ns, CLOCK_MONOTONIC): times below are absolute.
    pub origin: u64,
    pub start: u64,
    /// End of what is drawn (the slice's end, or earlier when capped).
    pub end: u64,
    /// End of the slice asked for.
    pub slice_end: u64,
    /// How the slice was chosen, as a sentence.
    pub how: String,
    /// The default slice's anchor (see [`build`]), when it was found.
    pub anchor: Option<u64>,
    pub client: Option<Side>,
    pub server: Option<Side>,
    /// Other connections with frames in the slice (not drawn).
    pub other_conns: usize,
    pub arrows: Vec<Arrow>,
    pub ticks: Vec<Tick>,
    pub bands: Vec<Band>,
    /// Queue depth (messages, all streams of the drawn server connection)
    /// after each enqueue/start in the slice, with the depth before the
    /// first one.
    pub queue: Vec<(u64, u32)>,
    pub queue_before: Option<u32>,
    /// Arrows and ticks in the slice (before the [`MAX_DRAWN`] cap).
    pub items_in_slice: usize,
    /// Events not kept because [`MAX_KEPT`] was reached.
    pub not_kept: u64,
}

impl Ladder {
    /// Seconds since the trace origin.
    pub fn secs(&self, t: u64) -> f64 {
        t.saturating_sub(self.origin) as f64 / 1e9
    }

    /// Whether the [`MAX_DRAWN`] cap cut the slice short.
    pub fn capped(&self) -> bool {
        self.items_in_slice > self.arrows.len() + self.ticks.len()
    }

    /// Arrows drawn, by frame type name.
    pub fn arrow_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for a in &self.arrows {
            *m.entry(a.frame.to_string()).or_default() += 1;
        }
        m
    }
}

/// Reads events in time order and keeps the slice.
struct Collector {
    span: u64,
    /// `[start, end]`, ns (absolute), once known.
    window: Option<(u64, u64)>,
    find_anchor: bool,
    find: SliceFinder,
    conns: HashMap<(Endpoint, u32), (String, String)>,
    /// Recent events while the window is not known yet (the lead before
    /// the anchor and the margin before that).
    recent: VecDeque<Event>,
    kept: Vec<Event>,
    not_kept: u64,
    done: bool,
}

impl Collector {
    fn new(span: u64, window: Option<(u64, u64)>) -> Collector {
        Collector {
            span,
            window,
            find_anchor: window.is_none(),
            find: SliceFinder::default(),
            conns: HashMap::new(),
            recent: VecDeque::new(),
            kept: vec![],
            not_kept: 0,
            done: false,
        }
    }

    fn lead(&self) -> u64 {
        self.span / 4
    }

    fn feed(&mut self, e: Event) {
        // The ladder draws a probe client and a probe server; a relay's
        // legs are summarised by the relay analysis instead.
        if e.ep.is_relay_leg() {
            return;
        }
        if let Kind::ConnOpen(c) = &e.kind {
            if self.conns.len() < MAX_CONNS {
                self.conns
                    .insert((e.ep, e.conn), (c.local.clone(), c.peer.clone()));
            }
        }
        let searching = self.find_anchor && self.window.is_none();
        if let Some(a) = self.find.feed(&e, searching) {
            self.window = Some(a.window(self.span));
            for ev in std::mem::take(&mut self.recent) {
                self.keep(ev);
            }
        }
        match self.window {
            None => {
                let horizon = e.t.saturating_sub(self.lead() + MARGIN_NS);
                self.recent.push_back(e);
                while self
                    .recent
                    .front()
                    .is_some_and(|f| f.t < horizon || self.recent.len() > MAX_KEPT)
                {
                    self.recent.pop_front();
                }
            }
            Some((_, end)) => {
                if e.t > end.saturating_add(MARGIN_NS) {
                    self.done = true;
                } else {
                    self.keep(e);
                }
            }
        }
    }

    fn keep(&mut self, e: Event) {
        let Some((start, end)) = self.window else {
            return;
        };
        let wanted = match &e.kind {
            Kind::Frame(_) => {
                e.t.saturating_add(MARGIN_NS) >= start && e.t <= end.saturating_add(MARGIN_NS)
            }
            // Intervals are written when they end: keep those that overlap.
            Kind::WindowBlocked(w) => w.start <= end && e.t >= start,
            Kind::SocketBlocked(w) => w.start <= end && e.t >= start,
            _ => e.t >= start && e.t <= end,
        };
        if !wanted {
            return;
        }
        if self.kept.len() < MAX_KEPT {
            self.kept.push(e);
        } else {
            self.not_kept += 1;
        }
    }
}

/// Which slice one pass keeps.
enum Pass {
    /// Search for the anchor, keeping recent events until it is found.
    Search,
    /// `[start, end]`, ns since the trace origin.
    At(u64, u64),
    /// The span from this `t` (absolute; not before the origin).
    From(u64),
}

/// One streaming pass; stops once the slice is past. Through the reorder
/// window unless `sort_whole`; a window pass that meets an event later than
/// the window can place is done again over the trace sorted whole.
fn collect(
    path: &Path,
    span: u64,
    pass: Pass,
    sort_whole: bool,
) -> Result<(Collector, u64), OpenError> {
    let mut r = TraceReader::open(path)?.without_payloads();
    let origin = r.header().origin_mono_ns;
    let mut c = match pass {
        Pass::Search => Collector::new(span, None),
        Pass::At(a, b) => Collector::new(span, Some((origin + a, origin + b))),
        Pass::From(t) => {
            let start = t.max(origin);
            Collector::new(span, Some((start, start + span)))
        }
    };
    let mut order = if sort_whole {
        TimeOrder::sorted()
    } else {
        TimeOrder::window()
    };
    while let Some(ev) = r.next_event() {
        // A corrupt line is the analyzer's to report; the ladder skips it.
        let Ok(e) = ev else { continue };
        let line = r.line();
        order.push(e, line, |e, _| {
            if !c.done {
                c.feed(e)
            }
        });
        if order.late() > 0 {
            return collect(path, span, pass, true);
        }
        if c.done {
            break;
        }
    }
    // (Only a push finds an event late: the loop has seen them all.)
    if !c.done {
        order
            .finish(|e, _| {
                if !c.done {
                    c.feed(e)
                }
            })
            .map_err(|cause| OpenError::Io {
                path: format!("sorting {}", path.display()),
                cause,
            })?;
    }
    Ok((c, origin))
}

/// Reads the slice of `trace` that `opts` names and lays out its ladder.
///
/// **The default slice** (no `at_ns`) is where the queue grows while credit
/// flows, when it does. Its *anchor* is the first `enqueue` event, in time order, with
/// `depth ≥ 2` and a `t` later than the first WINDOW_UPDATE frame written by
/// a server tap (stream or connection level): the first moment a message
/// waits behind another in the application queue although the server has
/// already handed credit back. The slice starts a quarter of its span
/// before the anchor, but no earlier than a twentieth of its span before
/// the first DATA frame (either tap; before it nothing flows), and shows
/// the anchor's connection. Without such an enqueue (a direct queue, a
/// queue that never held two messages, a trace without the server's side
/// or without WINDOW_UPDATEs), the slice starts a twentieth of its span
/// before the first DATA frame, or at the first event.
///
/// **With `at_ns`**, the slice is `[at, at + span]` and shows the
/// connection with the most frames in it (client and server views paired
/// by their `conn_open` addresses).
pub fn build(trace: &Path, opts: &LadderOpts) -> Result<Ladder, OpenError> {
    let span = opts.span_ns.max(1);
    let (c, origin, how) = match opts.at_ns {
        Some(at) => {
            let (c, origin) = collect(
                trace,
                span,
                Pass::At(at, at.saturating_add(span)),
                opts.sort_whole,
            )?;
            let how = format!(
                "the slice asked for, {} from {:.4} s",
                show_span(span),
                at as f64 / 1e9
            );
            (c, origin, how)
        }
        None => {
            // The search pass reads the whole trace when there is no anchor:
            // skipped when the analysis' own pass found there is none. (With
            // an anchor it stops once the slice is past, and it keeps the
            // events nearest the anchor when more than MAX_KEPT precede it,
            // which a pass that knew the window from the start would not.)
            let found = match opts.found {
                Some(found) if found.anchor.is_none() => found,
                _ => {
                    let (c, origin) = collect(trace, span, Pass::Search, opts.sort_whole)?;
                    if let Some(a) = c.find.anchor {
                        let how = format!(
                            "the default slice, {} around the first enqueue at queue depth ≥ 2 after the \
                             server's first WINDOW_UPDATE (at {:.4} s, ▶ on the queue strip){}",
                            show_span(span),
                            a.t.saturating_sub(origin) as f64 / 1e9,
                            if opts.queue_grows {
                                ": the queue grows while credit flows"
                            } else {
                                ""
                            }
                        );
                        return Ok(layout(c, origin, how));
                    }
                    c.find
                }
            };
            let (first, what) = match (found.first_data, found.first_event) {
                (Some(d), _) => (
                    d.saturating_sub(span / 20),
                    "from just before the first DATA frame",
                ),
                (None, Some(f)) => (f, "from the first event"),
                // 0: the origin.
                (None, None) => (0, "from the origin (the trace has no events)"),
            };
            let (c, origin) = collect(trace, span, Pass::From(first), opts.sort_whole)?;
            // Say only what the trace shows: without the server's side, or
            // with a queue that recorded nothing, the queue was not seen.
            let why = if !found.server_seen {
                "the trace has no server events, so the queue is not in it"
            } else if !found.queue_seen {
                "the server's queue recorded no enqueue (a direct queue works inline)"
            } else {
                "the queue never held two messages after a WINDOW_UPDATE, so there is no \
                 moment where it grows while credit flows"
            };
            let how = format!("the default slice, {} {what}: {why}", show_span(span));
            (c, origin, how)
        }
    };
    Ok(layout(c, origin, how))
}

/// `50 ms`, `1.5 s`, `200 µs`.
pub fn show_span(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{} s", trim(ns as f64 / 1e9))
    } else if ns >= 1_000_000 {
        format!("{} ms", trim(ns as f64 / 1e6))
    } else if ns >= 1_000 {
        format!("{} µs", trim(ns as f64 / 1e3))
    } else {
        format!("{ns} ns")
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The two views of one connection: `(client conn, server conn)`.
type Pair = (Option<u32>, Option<u32>);

fn pair_of(conns: &HashMap<(Endpoint, u32), (String, String)>, ep: Endpoint, conn: u32) -> Pair {
    let other = conns.get(&(ep, conn)).and_then(|(local, peer)| {
        let want = match ep {
            Endpoint::Client => Endpoint::Server,
            Endpoint::Server => Endpoint::Client,
            leg => leg,
        };
        conns
            .iter()
            .filter(|((e, _), (l, p))| *e == want && l == peer && p == local)
            .map(|((_, id), _)| *id)
            .min()
    });
    match ep {
        Endpoint::Client => (Some(conn), other),
        Endpoint::Server => (other, Some(conn)),
        _ => (None, None),
    }
}

/// An application step the ladder draws as a tick (or a band): what a
/// slice without frames may still show of a connection.
fn is_step(k: &Kind) -> bool {
    matches!(
        k,
        Kind::Chunk(_)
            | Kind::Release(_)
            | Kind::Decode(_)
            | Kind::Enqueue(_)
            | Kind::Start(_)
            | Kind::Complete(_)
            | Kind::Discard(_)
            | Kind::RpcStart(_)
            | Kind::RpcEnd(_)
            | Kind::Send(_)
            | Kind::WindowBlocked(_)
            | Kind::SocketBlocked(_)
    )
}

fn layout(c: Collector, origin: u64, how: String) -> Ladder {
    let (start, slice_end) = c.window.unwrap_or((origin, origin + c.span));
    let mut events = c.kept;
    events.sort_by_key(|e| e.t);
    let in_slice = |t: u64| t >= start && t <= slice_end;

    // The connection to draw: the one with the most frames in the slice;
    // without frames, the one with the most application steps (a server
    // working through its queue after the upload has nothing on the wire).
    let busiest = |frames: bool| {
        let mut count: HashMap<Pair, usize> = HashMap::new();
        for e in &events {
            let counted = if frames {
                matches!(e.kind, Kind::Frame(_))
            } else {
                is_step(&e.kind)
            };
            if counted && in_slice(e.t) && matches!(e.ep, Endpoint::Client | Endpoint::Server) {
                *count.entry(pair_of(&c.conns, e.ep, e.conn)).or_default() += 1;
            }
        }
        count
            .into_iter()
            .max_by_key(|(p, n)| (*n, std::cmp::Reverse(*p)))
            .map(|(p, _)| p)
    };
    let pair: Option<Pair> = match c.find.anchor {
        Some(a) => Some(pair_of(&c.conns, Endpoint::Server, a.conn)),
        None => busiest(true).or_else(|| busiest(false)),
    };
    let mut pairs_with_frames: Vec<Pair> = vec![];
    for e in &events {
        if matches!(e.kind, Kind::Frame(_)) && in_slice(e.t) {
            let p = pair_of(&c.conns, e.ep, e.conn);
            if Some(p) != pair && !pairs_with_frames.contains(&p) {
                pairs_with_frames.push(p);
            }
        }
    }
    let (pc, ps) = pair.unwrap_or((None, None));
    let mine = |e: &Event| match e.ep {
        Endpoint::Client => pc == Some(e.conn),
        Endpoint::Server => ps == Some(e.conn),
        _ => false,
    };
    let side = |ep: Endpoint, id: Option<u32>| {
        id.map(|conn| {
            let (local, peer) = c.conns.get(&(ep, conn)).cloned().unwrap_or_default();
            Side { conn, local, peer }
        })
    };

    // Frames: both taps' views of one frame, matched by direction and offset.
    let mut arrows: Vec<Arrow> = vec![];
    let mut index: HashMap<(Flow, u64), usize> = HashMap::new();
    for e in events.iter().filter(|e| mine(e)) {
        let Kind::Frame(f) = &e.kind else { continue };
        let flow = Flow::of(e.ep, f.dir);
        let sending = matches!(
            (e.ep, f.dir),
            (Endpoint::Client, Dir::Out) | (Endpoint::Server, Dir::Out)
        );
        let i = *index.entry((flow, f.offset)).or_insert_with(|| {
            arrows.push(Arrow {
                flow,
                frame: f.frame,
                stream: e.stream,
                offset: f.offset,
                len: f.len,
                flags: f.flags,
                increment: f.increment,
                send: None,
                recv: None,
            });
            arrows.len() - 1
        });
        let a = &mut arrows[i];
        if sending {
            a.send.get_or_insert(e.t);
        } else {
            a.recv.get_or_insert(e.t);
        }
    }
    arrows.retain(|a| a.send.is_some_and(in_slice) || a.recv.is_some_and(in_slice));

    // Application events.
    let mut ticks = vec![];
    let mut bands = vec![];
    let mut queue = vec![];
    let mut queue_by_stream: BTreeMap<u32, u32> = BTreeMap::new();
    let mut queue_before = None;
    for e in events.iter().filter(|e| mine(e)) {
        let server = e.ep == Endpoint::Server;
        let (kind, text): (&'static str, String) = match &e.kind {
            Kind::WindowBlocked(w) => {
                bands.push(Band {
                    kind: "window_blocked",
                    start: w.start.max(start),
                    end: e.t.min(slice_end),
                });
                continue;
            }
            Kind::SocketBlocked(w) if e.ep == Endpoint::Client => {
                bands.push(Band {
                    kind: "socket_blocked",
                    start: w.start.max(start),
                    end: e.t.min(slice_end),
                });
                continue;
            }
            _ if !in_slice(e.t) => continue,
            Kind::Chunk(k) if server => ("chunk", format!("chunk {}", k.len)),
            Kind::Release(r) if server => (
                "release",
                match r.seq {
                    Some(s) => format!("release {} (#{s})", r.bytes),
                    None => format!("release {}", r.bytes),
                },
            ),
            Kind::Decode(m) if server => ("decode", format!("decode #{}", m.seq)),
            Kind::Enqueue(q) if server => {
                if queue.is_empty() {
                    queue_before = Some(q.depth.saturating_sub(1));
                }
                queue_by_stream.insert(e.stream, q.depth);
                queue.push((e.t, queue_by_stream.values().sum()));
                ("enqueue", format!("enqueue #{} → depth {}", q.seq, q.depth))
            }
            Kind::Start(s) if server => {
                if queue.is_empty() {
                    queue_before = Some(s.depth + 1);
                }
                queue_by_stream.insert(e.stream, s.depth);
                queue.push((e.t, queue_by_stream.values().sum()));
                ("start", format!("start #{} (depth {})", s.seq, s.depth))
            }
            Kind::Complete(m) if server => ("complete", format!("complete #{}", m.seq)),
            Kind::Discard(d) if server => (
                "discard",
                format!("discard #{} ({})", d.seq, d.reason.as_str()),
            ),
            Kind::RpcStart(_) => ("rpc_start", "RPC start".into()),
            Kind::RpcEnd(r) => (
                "rpc_end",
                format!("RPC end {}", crate::schema::status_name(r.status)),
            ),
            Kind::Send(s) if !server => ("send", format!("send #{} ({} B)", s.seq, s.bytes)),
            _ => continue,
        };
        ticks.push(Tick {
            ep: e.ep,
            t: e.t,
            kind,
            text,
        });
    }

    // No enqueue and every `start` at depth 0: no queue (a direct handoff).
    // A queue draining after the upload has starts at depth > 0 and no
    // enqueue, and its strip is drawn.
    if !ticks.iter().any(|t| t.kind == "enqueue") && queue.iter().all(|q| q.1 == 0) {
        queue.clear();
        queue_before = None;
    }

    // The cap: the first MAX_DRAWN arrows and ticks by time.
    let items_in_slice = arrows.len() + ticks.len();
    let mut end = slice_end;
    if items_in_slice > MAX_DRAWN {
        let mut times: Vec<u64> = arrows
            .iter()
            .map(|a| a.t().max(start))
            .chain(ticks.iter().map(|t| t.t))
            .collect();
        times.sort_unstable();
        end = times[MAX_DRAWN - 1];
        arrows.retain(|a| a.t().max(start) <= end);
        ticks.retain(|t| t.t <= end);
        // Equal times at the cut may leave a few more than the cap.
        queue.retain(|(t, _)| *t <= end);
        for b in &mut bands {
            b.end = b.end.min(end);
        }
        bands.retain(|b| b.start <= end);
    }
    arrows.sort_by_key(|a| (a.t(), a.offset));

    Ladder {
        origin,
        start,
        end,
        slice_end,
        how,
        anchor: c.find.anchor.map(|a| a.t),
        client: side(Endpoint::Client, pc),
        server: side(Endpoint::Server, ps),
        other_conns: pairs_with_frames.len(),
        arrows,
        ticks,
        bands,
        queue,
        queue_before,
        items_in_slice,
        not_kept: c.not_kept,
    }
}

// ---------------------------------------------------------------- drawing

/// Geometry of the drawing (SVG user units).
const WIDTH: f64 = 1280.0;
const TOP: f64 = 74.0;
const AXIS_X: f64 = 78.0;
const CLIENT_X: f64 = 300.0;
const SERVER_X: f64 = 700.0;
const LABEL_X: f64 = SERVER_X + 14.0;
const QUEUE_X: f64 = 1120.0;
const QUEUE_W: f64 = 140.0;
const LINE_H: f64 = 14.0;
/// Characters per line of server labels before a cluster wraps.
const LINE_CHARS: usize = 54;

/// The colour of a frame type or an application event.
pub fn color(kind: &str) -> &'static str {
    match kind {
        "DATA" => "#1f77b4",
        "WINDOW_UPDATE" => "#2ca02c",
        "chunk" => "#7f7f7f",
        "release" => "#2ca02c",
        "decode" => "#9467bd",
        "enqueue" => "#d62728",
        "start" => "#ff7f0e",
        "complete" => "#8c564b",
        "discard" => "#000000",
        "send" => "#1f77b4",
        "window_blocked" => "#ff7f0e",
        "socket_blocked" => "#7f7f7f",
        _ => "#9a9a9a",
    }
}

/// Places labels (desired y ascending) at or below their y, `gap` apart.
fn place(desired: &[f64], gap: f64) -> Vec<f64> {
    let mut last = f64::NEG_INFINITY;
    desired
        .iter()
        .map(|&d| {
            let y = d.max(last + gap);
            last = y;
            y
        })
        .collect()
}

/// A line of server (or client) labels: ticks close in time, side by side.
struct LabelLine {
    t: u64,
    items: Vec<usize>,
}

/// Groups ticks of one endpoint (sorted by time) into label lines: ticks
/// less than `cluster` ns apart share a line while it has room.
fn label_lines(ticks: &[Tick], ep: Endpoint, cluster: u64, chars: usize) -> Vec<LabelLine> {
    let mut lines: Vec<LabelLine> = vec![];
    let mut len = 0;
    let mut last_t = 0;
    for (i, k) in ticks.iter().enumerate().filter(|(_, k)| k.ep == ep) {
        let w = k.text.chars().count() + 3;
        match lines.last_mut() {
            Some(l)
                if k.t.saturating_sub(last_t) <= cluster
                    && len + w <= chars
                    && !breaks(&l.items, k, ticks) =>
            {
                l.items.push(i);
                len += w;
            }
            _ => {
                lines.push(LabelLine {
                    t: k.t,
                    items: vec![i],
                });
                len = w;
            }
        }
        last_t = k.t;
    }
    lines
}

/// Whether `k` starts a new label line after the ticks `line`: the worker's
/// steps (start, complete, discard) and a message's arrival (chunk …
/// enqueue) are told apart, and a chunk after a decoded message begins the
/// next one.
fn breaks(line: &[usize], k: &Tick, ticks: &[Tick]) -> bool {
    let worker = |kind: &str| matches!(kind, "start" | "complete" | "discard");
    let Some(&last) = line.last() else {
        return false;
    };
    let prev = ticks[last].kind;
    worker(prev) != worker(k.kind)
        || (k.kind == "chunk" && line.iter().any(|&i| ticks[i].kind == "decode"))
        || (k.kind == "chunk" && matches!(prev, "enqueue" | "decode"))
}

/// A time step that gives about ten gridlines over `span` ns.
fn grid_step(span: u64) -> u64 {
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            if step * m * 12 >= span {
                return step * m;
            }
        }
        step *= 10;
    }
}

/// A line of arrow labels: arrows of one direction and frame type close in
/// time, labelled together (`DATA 16384 · DATA 16`).
struct ArrowLine {
    flow: Flow,
    items: Vec<usize>,
}

/// Groups arrows (sorted by time) into label lines: arrows of one
/// direction and frame type less than `cluster` ns after the previous one
/// of their kind share a line (other arrows may come between).
fn arrow_lines(arrows: &[Arrow], cluster: u64) -> Vec<ArrowLine> {
    let mut lines: Vec<ArrowLine> = vec![];
    // Per (flow, frame): the open line and its length in characters.
    let mut open: HashMap<(Flow, FrameType), (usize, usize)> = HashMap::new();
    for (i, a) in arrows.iter().enumerate() {
        let key = (a.flow, a.frame);
        let full = a.label().chars().count() + 3;
        if let Some((li, len)) = open.get_mut(&key) {
            let l = &mut lines[*li];
            let prev = &arrows[*l.items.last().expect("a line has an item")];
            // `WINDOW_UPDATE` is written once per line.
            let w = if a.frame == FrameType::WINDOW_UPDATE {
                full - "WINDOW_UPDATE ".len()
            } else {
                full
            };
            if a.t().saturating_sub(prev.t()) <= cluster && *len + w <= 62 {
                l.items.push(i);
                *len += w;
                continue;
            }
        }
        lines.push(ArrowLine {
            flow: a.flow,
            items: vec![i],
        });
        open.insert(key, (lines.len() - 1, full));
    }
    lines
}

/// An entry of the middle column: an arrow line's label, or an arrow.
struct Mid {
    /// Where it belongs (a label's baseline), y.
    d: f64,
    /// The arrow line it labels; `None` for an arrow (an obstacle).
    line: Option<usize>,
    t: u64,
    /// Where the label is centred, x.
    x: f64,
}

/// How far labels end up below where they belong, beyond the stacking of
/// lines of one cluster (`desired` ascending; `same` when a line belongs
/// to the previous one's cluster).
fn drift(desired: &[(f64, bool)]) -> f64 {
    let mut worst: f64 = 0.0;
    let mut placed = f64::NEG_INFINITY;
    let mut stacked = f64::NEG_INFINITY;
    for &(d, same) in desired {
        stacked = if same { d.max(stacked + LINE_H) } else { d };
        placed = d.max(placed + LINE_H);
        worst = worst.max(placed - stacked);
    }
    worst
}

impl Ladder {
    /// The ladder as an inline SVG element (scales to its container's
    /// width). Arrows are `<g class="arrow" data-frame=… data-flow=…>`.
    pub fn svg(&self) -> String {
        let span = self.end.saturating_sub(self.start).max(1);
        let cluster = (span / 400).max(1);
        let server_lines = label_lines(&self.ticks, Endpoint::Server, cluster, LINE_CHARS);
        let client_lines = label_lines(&self.ticks, Endpoint::Client, cluster, 26);
        let alines = arrow_lines(&self.arrows, cluster);
        // The middle column: each arrow line's label (above DATA going
        // right, below WINDOW_UPDATEs coming back) and the arrows themselves,
        // as obstacles the labels keep clear of. `None` is an arrow.
        // The visible middle of an arrow (x, y): the middle of the part of
        // it inside the body, where its label goes.
        let visible_mid = |a: &Arrow, y: &dyn Fn(u64) -> f64, h: f64| -> (f64, f64) {
            let (s, r) = self.ends(a);
            let (y0, y1) = (y(s), y(r));
            let (x0, x1) = match a.flow {
                Flow::C2s => (CLIENT_X, SERVER_X),
                Flow::S2c => (SERVER_X, CLIENT_X),
            };
            let m = if (y1 - y0).abs() < 1e-9 {
                0.5
            } else {
                let (ta, tb) = ((TOP - y0) / (y1 - y0), (TOP + h - y0) / (y1 - y0));
                let lo = ta.min(tb).max(0.0);
                let hi = ta.max(tb).min(1.0);
                if lo <= hi {
                    (lo + hi) / 2.0
                } else {
                    0.5
                }
            };
            (x0 + m * (x1 - x0), y0 + m * (y1 - y0))
        };
        // The middle column: each arrow line's label (above DATA going
        // right, below WINDOW_UPDATEs coming back, at the visible middle of
        // its first arrow) and the arrows themselves, as obstacles the
        // labels keep clear of (`line: None`).
        let middle = |y: &dyn Fn(u64) -> f64, h: f64| -> Vec<Mid> {
            let mut m: Vec<Mid> = vec![];
            for (i, l) in alines.iter().enumerate() {
                let mids: Vec<(f64, f64)> = l
                    .items
                    .iter()
                    .map(|&k| visible_mid(&self.arrows[k], y, h))
                    .collect();
                let top = mids.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
                let low = mids.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
                let t = self.arrows[l.items[0]].t();
                let x = mids[0].0;
                let d = match l.flow {
                    Flow::C2s => top - 6.0,
                    Flow::S2c => low + 18.0,
                };
                m.push(Mid {
                    d,
                    line: Some(i),
                    t,
                    x,
                });
                m.push(Mid {
                    d: (top + low) / 2.0 + 6.0,
                    line: None,
                    t,
                    x,
                });
            }
            m.sort_by(|a, b| a.d.total_cmp(&b.d));
            // Arrows at one height are one obstacle.
            let mut last_arrow = f64::NEG_INFINITY;
            m.retain(|e| {
                if e.line.is_some() {
                    return true;
                }
                let keep = e.d - last_arrow > 3.0;
                last_arrow = e.d;
                keep
            });
            m
        };
        let tick_desired = |lines: &[LabelLine], y: &dyn Fn(u64) -> f64| -> Vec<(f64, bool)> {
            let mut prev: Option<u64> = None;
            lines
                .iter()
                .map(|l| {
                    let same = prev.is_some_and(|p| l.t.saturating_sub(p) <= cluster);
                    prev = Some(l.t);
                    (y(l.t) + 4.0, same)
                })
                .collect()
        };

        // The smallest height at which labels stay close to their events.
        let mut body = 0.0;
        for h in [
            480.0, 640.0, 800.0, 1000.0, 1250.0, 1550.0, 1900.0, 2300.0, 2800.0, 3400.0,
        ] {
            body = h;
            let y = |t: u64| TOP + t.saturating_sub(self.start) as f64 / span as f64 * h;
            let mut prev: Option<u64> = None;
            let mid: Vec<(f64, bool)> = middle(&y, h)
                .iter()
                .map(|m| {
                    let same = prev.is_some_and(|p| m.t.abs_diff(p) <= cluster);
                    prev = Some(m.t);
                    (m.d, same)
                })
                .collect();
            let labels = drift(&tick_desired(&server_lines, &y))
                .max(drift(&tick_desired(&client_lines, &y)));
            if drift(&mid) <= 4.0 && labels <= 2.0 * LINE_H {
                break;
            }
        }
        let y =
            |t: u64| TOP + (t.clamp(self.start, self.end) - self.start) as f64 / span as f64 * body;
        let y_free = |t: u64| TOP + (t as f64 - self.start as f64) / span as f64 * body;

        let mut defs = String::new();
        for (id, c) in [
            ("data", color("DATA")),
            ("wu", color("WINDOW_UPDATE")),
            ("other", color("")),
        ] {
            let _ = write!(
                defs,
                r#"<marker id="lad-head-{id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{c}"/></marker>"#
            );
        }
        let _ = write!(
            defs,
            r#"<clipPath id="lad-clip"><rect x="0" y="{}" width="{WIDTH}" height="{}"/></clipPath>"#,
            TOP - 1.0,
            body + 2.0
        );
        defs.push_str(r##"<pattern id="lad-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fff1e0"/><line x1="0" y1="0" x2="0" y2="6" stroke="#ff7f0e" stroke-width="2"/></pattern>"##);

        let mut b = String::new();
        let bottom = TOP + body;
        // Time grid.
        let step = grid_step(span);
        let mut decimals = 0usize;
        let mut unit = step as f64 / 1e9;
        while unit < 0.999_999 && decimals < 9 {
            unit *= 10.0;
            decimals += 1;
        }
        let mut g = self.start.saturating_sub(self.origin).div_ceil(step) * step + self.origin;
        while g <= self.end {
            let gy = y(g);
            let _ = write!(
                b,
                r##"<line x1="{AXIS_X}" y1="{gy:.1}" x2="{}" y2="{gy:.1}" stroke="#e6e6e6"/><text x="{}" y="{:.1}" class="tl">{:.decimals$} s</text>"##,
                QUEUE_X - 8.0,
                AXIS_X - 4.0,
                gy + 4.0,
                self.secs(g)
            );
            g += step;
        }
        // Columns.
        for (x, name, side) in [
            (CLIENT_X, "client", &self.client),
            (SERVER_X, "server", &self.server),
        ] {
            let sub = match side {
                // A Unix domain socket's client end: the socket's path
                // (the end itself has no name, or one made up to pair it).
                Some(s)
                    if s.local == crate::schema::UNIX_UNNAMED
                        || s.local.starts_with(crate::schema::UNIX_ABSTRACT) =>
                {
                    format!("conn {} · {}", s.conn, s.peer)
                }
                Some(s) => format!("conn {} · {}", s.conn, s.local),
                None => "not in this trace".into(),
            };
            let _ = write!(
                b,
                r##"<rect x="{:.1}" y="8" width="230" height="44" rx="6" fill="#f3f5f8" stroke="#9aa5b1"/><text x="{x}" y="27" class="col">{name}</text><text x="{x}" y="44" class="colsub">{}</text><line x1="{x}" y1="52" x2="{x}" y2="{:.1}" stroke="#4a5568" stroke-width="2.5"{}/>"##,
                x - 115.0,
                esc(&sub),
                bottom + 6.0,
                if side.is_none() {
                    r#" stroke-dasharray="6 5""#
                } else {
                    ""
                }
            );
        }
        // Client wait bands.
        for band in &self.bands {
            let (y0, y1) = (y(band.start), y(band.end));
            let (fill, what) = if band.kind == "window_blocked" {
                ("url(#lad-hatch)", "blocked on window credit")
            } else {
                ("#e2e2e2", "socket blocked")
            };
            let _ = write!(
                b,
                r#"<rect class="band" x="{:.1}" y="{y0:.1}" width="12" height="{:.1}" fill="{fill}"><title>client {what}: {:.6} s → {:.6} s ({})</title></rect>"#,
                CLIENT_X - 18.0,
                (y1 - y0).max(1.0),
                self.secs(band.start),
                self.secs(band.end),
                show_span(band.end.saturating_sub(band.start))
            );
        }
        // Queue strip.
        if !self.queue.is_empty() {
            let max = self
                .queue
                .iter()
                .map(|q| q.1)
                .chain(self.queue_before)
                .max()
                .unwrap_or(1)
                .max(1);
            let px = (QUEUE_W / max as f64).min(14.0);
            let before = self.queue_before.unwrap_or(0);
            let mut d = format!(
                "M{QUEUE_X},{:.1} H{:.1}",
                y(self.start),
                QUEUE_X + before as f64 * px
            );
            for (t, q) in &self.queue {
                let _ = write!(d, " V{:.1} H{:.1}", y(*t), QUEUE_X + *q as f64 * px);
            }
            let _ = write!(d, " V{:.1} H{QUEUE_X} Z", y(self.end));
            let cx = QUEUE_X + QUEUE_W / 2.0;
            let _ = write!(
                b,
                r##"<rect x="{QUEUE_X}" y="{TOP}" width="{QUEUE_W}" height="{body:.1}" fill="#fafafa" stroke="#e4e4e4"/><path class="queue" d="{d}" fill="#d62728" fill-opacity="0.22" stroke="#d62728" stroke-width="1.2"><title>application queue depth: {before} → {} messages</title></path><text x="{cx}" y="27" class="col">queue depth</text><text x="{cx}" y="44" class="colsub">messages waiting (0 – {max})</text>"##,
                self.queue.last().map_or(0, |q| q.1),
            );
            // Depth labels where it changes, sparsely.
            let mut last_y = f64::NEG_INFINITY;
            for (t, q) in &self.queue {
                let qy = y(*t);
                if qy - last_y >= 18.0 {
                    let _ = write!(
                        b,
                        r#"<text x="{:.1}" y="{:.1}" class="qd">{q}</text>"#,
                        QUEUE_X + *q as f64 * px + 4.0,
                        qy + 12.0
                    );
                    last_y = qy;
                }
            }
        }
        // The default slice's anchor: a marker on the queue strip.
        if let Some(a) = self.anchor.filter(|a| (self.start..=self.end).contains(a)) {
            let ay = y(a);
            let _ = write!(
                b,
                r##"<path class="anchor" d="M{:.1},{:.1} l-9,-6 v12 z" fill="#d62728"><title>anchor of the default slice: the first enqueue at depth ≥ 2 after the server's first WINDOW_UPDATE ({:.6} s)</title></path>"##,
                QUEUE_X - 1.0,
                ay,
                self.secs(a)
            );
        }

        // Arrows.
        for a in &self.arrows {
            let (s, r) = self.ends(a);
            let (x0, x1) = match a.flow {
                Flow::C2s => (CLIENT_X, SERVER_X),
                Flow::S2c => (SERVER_X, CLIENT_X),
            };
            let (head, stroke) = match a.frame {
                FrameType::DATA => ("data", color("DATA")),
                FrameType::WINDOW_UPDATE => ("wu", color("WINDOW_UPDATE")),
                _ => ("other", color("")),
            };
            let matched = a.send.is_some() && a.recv.is_some();
            let _ = write!(
                b,
                r#"<g class="arrow" data-frame="{}" data-flow="{}" data-matched="{}" clip-path="url(#lad-clip)"><title>{}</title><line x1="{x0}" y1="{:.2}" x2="{}" y2="{:.2}" stroke="{stroke}" stroke-width="{}"{} marker-end="url(#lad-head-{head})"/></g>"#,
                esc(&a.frame.to_string()),
                a.flow.as_str(),
                matched as u8,
                esc(&self.arrow_title(a)),
                y_free(s),
                // Stop short of the column so the head touches it.
                x1 - (x1 - x0).signum() * 2.0,
                y_free(r),
                if head == "other" { "1.2" } else { "1.8" },
                if matched {
                    ""
                } else {
                    r#" stroke-dasharray="5 4""#
                },
            );
        }
        // Arrow labels.
        let mut lowest = bottom;
        let entries: Vec<Mid> = middle(&y_free, body)
            .into_iter()
            .map(|m| Mid {
                d: m.d.clamp(TOP + 10.0, bottom + 24.0),
                ..m
            })
            .collect();
        let placed = place(&entries.iter().map(|e| e.d).collect::<Vec<_>>(), LINE_H);
        let mx = (CLIENT_X + SERVER_X) / 2.0;
        for (e, p) in entries.iter().zip(&placed) {
            let Some(i) = e.line else { continue };
            let x = e.x;
            let l = &alines[i];
            let _ = write!(b, r#"<text x="{x:.1}" y="{p:.1}" class="alabel">"#);
            for (n, &k) in l.items.iter().enumerate() {
                let a = &self.arrows[k];
                let c = match a.frame {
                    FrameType::DATA => color("DATA"),
                    FrameType::WINDOW_UPDATE => color("WINDOW_UPDATE"),
                    _ => "#6b6b6b",
                };
                let mut text = a.label();
                if n > 0 && a.frame == FrameType::WINDOW_UPDATE {
                    // `WINDOW_UPDATE` once per line.
                    text = text.trim_start_matches("WINDOW_UPDATE ").to_string();
                }
                let sep = if n > 0 { " · " } else { "" };
                let _ = write!(b, r#"<tspan fill="{c}">{sep}{}</tspan>"#, esc(&text));
            }
            b.push_str("</text>");
            lowest = lowest.max(*p + 6.0);
        }

        // Application ticks and their labels.
        for (lines, col, side) in [
            (&server_lines, SERVER_X, 1.0),
            (&client_lines, CLIENT_X - 24.0, -1.0),
        ] {
            let desired: Vec<f64> = lines.iter().map(|l| y(l.t) + 4.0).collect();
            let placed = place(&desired, LINE_H);
            for (l, (d, p)) in lines.iter().zip(desired.iter().zip(&placed)) {
                for &i in &l.items {
                    let k = &self.ticks[i];
                    let ty = y(k.t);
                    let _ = write!(
                        b,
                        r#"<line class="tick" data-kind="{}" x1="{col}" y1="{ty:.2}" x2="{:.1}" y2="{ty:.2}" stroke="{}" stroke-width="2.5"><title>{} {} at {:.6} s</title></line>"#,
                        k.kind,
                        col + side * 9.0,
                        color(k.kind),
                        k.ep.as_str(),
                        esc(&k.text),
                        self.secs(k.t)
                    );
                }
                let lx = if side > 0.0 { LABEL_X } else { col - 14.0 };
                if p - d > 6.0 {
                    let _ = write!(
                        b,
                        r##"<line x1="{:.1}" y1="{:.1}" x2="{lx:.1}" y2="{:.1}" stroke="#c4c4c4" stroke-width="0.8"/>"##,
                        col + side * 10.0,
                        d - 4.0,
                        p - 4.0
                    );
                }
                let anchor = if side > 0.0 { "start" } else { "end" };
                let _ = write!(
                    b,
                    r#"<text x="{:.1}" y="{p:.1}" class="tlabel" text-anchor="{anchor}">"#,
                    lx + side * 4.0
                );
                for (n, &i) in l.items.iter().enumerate() {
                    let k = &self.ticks[i];
                    let sep = if n > 0 { " · " } else { "" };
                    let _ = write!(
                        b,
                        r#"<tspan fill="{}">{sep}{}</tspan>"#,
                        color(k.kind),
                        esc(&k.text)
                    );
                }
                b.push_str("</text>");
                lowest = lowest.max(*p + 6.0);
            }
        }
        if self.capped() {
            let _ = write!(
                b,
                r#"<text x="{mx}" y="{:.1}" class="cap">… capped at {MAX_DRAWN} arrows and ticks: the slice asked for continues to {:.4} s</text>"#,
                bottom + 24.0,
                self.secs(self.slice_end)
            );
            lowest = lowest.max(bottom + 32.0);
        }
        let height = lowest + 16.0;
        format!(
            r#"<svg class="ladder" viewBox="0 0 {WIDTH} {height:.0}" width="{WIDTH}" height="{height:.0}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="frame ladder"><defs>{defs}</defs><style>.tl{{font:11px sans-serif;fill:#777;text-anchor:end}}.col{{font:bold 14px sans-serif;text-anchor:middle;fill:#1a202c}}.colsub{{font:11px sans-serif;text-anchor:middle;fill:#555}}.alabel{{font:12px sans-serif;text-anchor:middle;paint-order:stroke;stroke:#fff;stroke-width:4px;stroke-linejoin:round}}.tlabel{{font:12px sans-serif;paint-order:stroke;stroke:#fff;stroke-width:3px;stroke-linejoin:round}}.qd{{font:11px sans-serif;fill:#a02020}}.cap{{font:italic 12px sans-serif;text-anchor:middle;fill:#a33}}</style>{b}</svg>"#
        )
    }

    /// The two ends of an arrow; a missing end is drawn at the known one's
    /// time (a horizontal, dashed arrow).
    fn ends(&self, a: &Arrow) -> (u64, u64) {
        match (a.send, a.recv) {
            (Some(s), Some(r)) => (s, r),
            (Some(s), None) => (s, s),
            (None, Some(r)) => (r, r),
            (None, None) => (self.start, self.start),
        }
    }

    fn arrow_title(&self, a: &Arrow) -> String {
        let (from, to) = match a.flow {
            Flow::C2s => ("client", "server"),
            Flow::S2c => ("server", "client"),
        };
        let mut s = format!(
            "{} · stream {} · byte offset {}",
            a.label(),
            a.stream,
            a.offset
        );
        match a.send {
            Some(t) => {
                let _ = write!(s, "\nwritten by the {from} at {:.6} s", self.secs(t));
            }
            None => {
                let _ = write!(s, "\nnot seen by the {from}'s tap (one-sided trace, or beyond the slice's margin)");
            }
        }
        match a.recv {
            Some(t) => {
                let _ = write!(s, "\nread by the {to} at {:.6} s", self.secs(t));
            }
            None => {
                let _ = write!(
                    s,
                    "\nnot seen by the {to}'s tap (one-sided trace, or beyond the slice's margin)"
                );
            }
        }
        if let (Some(w), Some(r)) = (a.send, a.recv) {
            let _ = write!(s, "\nin flight {}", show_span(r.saturating_sub(w)));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: u64 = 1_000_000_000;

    /// A trace file of `events` (JSON objects without `type` header/footer).
    fn trace(name: &str, events: &[serde_json::Value]) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("h2probe-ladder-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut text = format!(
            "{{\"type\":\"header\",\"schema\":1,\"tool\":\"t\",\"clock\":\"CLOCK_MONOTONIC\",\"origin_mono_ns\":{ORIGIN},\"origin_unix_ns\":0}}\n"
        );
        for e in events {
            text.push_str(&e.to_string());
            text.push('\n');
        }
        let path = dir.join("trace.jsonl");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn data(t: u64, ep: &str, dir: &str, offset: u64) -> serde_json::Value {
        serde_json::json!({"t": t, "ep": ep, "conn": 1, "stream": 1, "type": "frame",
            "dir": dir, "offset": offset, "frame": "DATA", "flags": 0, "len": 100})
    }

    #[test]
    fn a_one_sided_trace_draws_unmatched_arrows() {
        let evs: Vec<_> = (0..3)
            .map(|k| {
                data(
                    ORIGIN + 1_000_000 + k * 1_000,
                    "client",
                    "out",
                    100 + k * 109,
                )
            })
            .collect();
        let path = trace("one-sided", &evs);
        let l = build(&path, &LadderOpts::default()).unwrap();
        assert_eq!(l.arrows.len(), 3);
        assert!(l
            .arrows
            .iter()
            .all(|a| a.send.is_some() && a.recv.is_none()));
        assert!(l.server.is_none() && l.client.is_some());
        assert!(l.how.contains("first DATA"), "{}", l.how);
        let svg = l.svg();
        assert_eq!(svg.matches(r#"data-matched="0""#).count(), 3);
        assert!(svg.contains("not in this trace"));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// A server still working through its queue after the upload: no
    /// frames in the slice, but its application steps are drawn on its
    /// connection (before, nothing was: no connection had frames).
    #[test]
    fn a_slice_without_frames_draws_the_application_steps() {
        let mut evs = vec![
            serde_json::json!({"t": ORIGIN, "ep": "client", "conn": 1, "stream": 0, "type": "conn_open", "local": "a:1", "peer": "b:2"}),
            serde_json::json!({"t": ORIGIN, "ep": "server", "conn": 5, "stream": 0, "type": "conn_open", "local": "b:2", "peer": "a:1"}),
            data(ORIGIN + 1_000_000, "client", "out", 100),
        ];
        for k in 0..4u64 {
            let t = ORIGIN + 50_000_000 + k * 3_000_000;
            evs.push(serde_json::json!({"t": t, "ep": "server", "conn": 5, "stream": 1, "type": "start", "seq": k, "worker": 0, "wait_ns": 1, "depth": 10 - k}));
            evs.push(serde_json::json!({"t": t + 2_000_000, "ep": "server", "conn": 5, "stream": 1, "type": "complete", "seq": k, "worker": 0, "service_ns": 2_000_000}));
        }
        let path = trace("no-frames", &evs);
        let l = build(
            &path,
            &LadderOpts {
                at_ns: Some(50_000_000),
                span_ns: 20_000_000,
                queue_grows: true,
                ..LadderOpts::default()
            },
        )
        .unwrap();
        assert!(l.arrows.is_empty());
        assert_eq!(l.server.as_ref().map(|s| s.conn), Some(5));
        assert_eq!(l.client.as_ref().map(|s| s.conn), Some(1));
        assert_eq!(l.ticks.len(), 8, "{:?}", l.ticks);
        // The queue drains on its strip: 11 before the first start, then
        // 10, 9, 8, 7 left after each.
        assert_eq!(l.queue_before, Some(11));
        assert_eq!(
            l.queue.iter().map(|q| q.1).collect::<Vec<_>>(),
            [10, 9, 8, 7]
        );
        assert_eq!(l.other_conns, 0);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// A `start` in the slice written a second after later events (a
    /// thread held up) is in the ladder when the analysis sorted the trace
    /// whole (`sort_whole`, set from its `late_written_events`): the
    /// window's pass had drawn the slice and stopped before it came.
    #[test]
    fn an_event_written_late_is_drawn_in_its_place_when_the_trace_is_sorted_whole() {
        let mut evs = vec![
            serde_json::json!({"t": ORIGIN, "ep": "client", "conn": 1, "stream": 0, "type": "conn_open", "local": "a:1", "peer": "b:2"}),
            serde_json::json!({"t": ORIGIN, "ep": "server", "conn": 5, "stream": 0, "type": "conn_open", "local": "b:2", "peer": "a:1"}),
            serde_json::json!({"t": ORIGIN + 40_000_000, "ep": "server", "conn": 5, "stream": 1, "type": "enqueue", "seq": 0, "depth": 1}),
        ];
        for k in 0..40u64 {
            let t = ORIGIN + 100_000_000 + k * 50_000_000;
            evs.push(serde_json::json!({"t": t, "ep": "server", "conn": 5, "stream": 3, "type": "chunk", "len": 1}));
        }
        let late = serde_json::json!({"t": ORIGIN + 55_000_000, "ep": "server", "conn": 5, "stream": 1, "type": "start", "seq": 0, "worker": 0, "wait_ns": 15_000_000, "depth": 0});
        evs.push(late);
        let path = trace("late", &evs);
        let opts = LadderOpts {
            at_ns: Some(50_000_000),
            span_ns: 20_000_000,
            sort_whole: true,
            ..LadderOpts::default()
        };
        let l = build(&path, &opts).unwrap();
        let starts: Vec<u64> = l
            .ticks
            .iter()
            .filter(|t| t.kind == "start")
            .map(|t| t.t - ORIGIN)
            .collect();
        assert_eq!(starts, [55_000_000]);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn a_crowded_slice_is_capped_and_says_so() {
        // 2 × 400 frames of one connection within 4 ms, both taps.
        let mut evs = vec![
            serde_json::json!({"t": ORIGIN, "ep": "client", "conn": 1, "stream": 0, "type": "conn_open", "local": "a:1", "peer": "b:2"}),
            serde_json::json!({"t": ORIGIN, "ep": "server", "conn": 5, "stream": 0, "type": "conn_open", "local": "b:2", "peer": "a:1"}),
        ];
        for k in 0..400u64 {
            let t = ORIGIN + 1_000_000 + k * 10_000;
            evs.push(data(t, "client", "out", 100 + k * 109));
            let mut s = data(t + 5_000, "server", "in", 100 + k * 109);
            s["conn"] = 5.into();
            evs.push(s);
        }
        // Out of file order: the server's view first.
        evs.sort_by_key(|e| e["ep"].as_str().unwrap() == "client");
        let path = trace("capped", &evs);
        let l = build(
            &path,
            &LadderOpts {
                at_ns: Some(1_000_000),
                span_ns: 10_000_000,
                queue_grows: true,
                ..LadderOpts::default()
            },
        )
        .unwrap();
        assert_eq!(l.items_in_slice, 400);
        assert!(l.capped());
        assert_eq!(l.arrows.len(), MAX_DRAWN);
        assert!(l
            .arrows
            .iter()
            .all(|a| a.send.is_some() && a.recv.is_some()));
        assert!(l.end < l.slice_end);
        assert!(l.svg().contains("capped at 300"));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
