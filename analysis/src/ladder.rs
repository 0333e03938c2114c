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
                    // Right of the step, or left of it where the number
                    // would pass the drawing's edge (7 units a digit).
                    let step = QUEUE_X + *q as f64 * px;
                    let (x, anchor) = if step + 4.0 + 7.0 * q.to_string().len() as f64 > WIDTH {
                        (step - 4.0, r#" text-anchor="end""#)
                    } else {
                        (step + 4.0, "")
                    };
                    let _ = write!(
                        b,
                        r#"<text x="{x:.1}" y="{:.1}"{anchor} class="qd">{q}</text>"#,
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

    fn tick(ep: Endpoint, t: u64, kind: &'static str, text: &str) -> Tick {
        Tick {
            ep,
            t,
            kind,
            text: text.into(),
        }
    }

    fn arrow(flow: Flow, frame: FrameType, send: Option<u64>, recv: Option<u64>) -> Arrow {
        Arrow {
            flow,
            frame,
            stream: 1,
            offset: 0,
            len: 16_384,
            flags: 0,
            increment: Some(16_400),
            send,
            recv,
        }
    }

    #[test]
    fn a_frame_flows_from_its_sender_to_its_receiver() {
        assert_eq!(Flow::of(Endpoint::Client, Dir::Out), Flow::C2s);
        assert_eq!(Flow::of(Endpoint::Server, Dir::In), Flow::C2s);
        assert_eq!(Flow::of(Endpoint::Server, Dir::Out), Flow::S2c);
        assert_eq!(Flow::of(Endpoint::Client, Dir::In), Flow::S2c);
        assert_eq!((Flow::C2s.as_str(), Flow::S2c.as_str()), ("c2s", "s2c"));
    }

    #[test]
    fn an_arrow_is_sorted_by_its_first_end_and_labelled_by_its_frame() {
        let c2s = |s, r| arrow(Flow::C2s, FrameType::DATA, s, r);
        assert_eq!(c2s(Some(7), Some(5)).t(), 5);
        assert_eq!(c2s(Some(5), Some(7)).t(), 5);
        assert_eq!(c2s(Some(7), None).t(), 7);
        assert_eq!(c2s(None, Some(9)).t(), 9);
        assert_eq!(c2s(None, None).t(), 0);

        let mut a = c2s(Some(1), None);
        assert_eq!(a.label(), "DATA 16384");
        a.flags = flags::END_STREAM | flags::PADDED;
        assert_eq!(a.label(), "DATA 16384 END_STREAM");
        a.flags = flags::PADDED;
        assert_eq!(a.label(), "DATA 16384");
        let mut w = arrow(Flow::S2c, FrameType::WINDOW_UPDATE, None, None);
        assert_eq!(w.label(), "WINDOW_UPDATE +16400 (stream 1)");
        w.stream = 0;
        assert_eq!(w.label(), "WINDOW_UPDATE +16400 (connection)");
        w.increment = None;
        assert_eq!(w.label(), "WINDOW_UPDATE +0 (connection)");
        let mut o = arrow(Flow::S2c, FrameType::SETTINGS, None, None);
        assert_eq!(o.label(), "SETTINGS");
        o.flags = flags::ACK;
        assert_eq!(o.label(), "SETTINGS ACK");
        o.frame = FrameType::PING;
        assert_eq!(o.label(), "PING ACK");
        o.flags = 0;
        assert_eq!(o.label(), "PING");
        o.frame = FrameType::HEADERS;
        o.flags = flags::END_STREAM;
        assert_eq!(o.label(), "HEADERS");
    }

    #[test]
    fn spans_are_shown_in_their_largest_whole_unit() {
        for (ns, shown) in [
            (0, "0 ns"),
            (999, "999 ns"),
            (1_000, "1 µs"),
            (200_000, "200 µs"),
            (999_999, "999.999 µs"),
            (1_000_000, "1 ms"),
            (50_000_000, "50 ms"),
            (12_345_678, "12.346 ms"),
            (1_000_000_000, "1 s"),
            (1_500_000_000, "1.5 s"),
            (100_000_000_000, "100 s"),
        ] {
            assert_eq!(show_span(ns), shown, "{ns} ns");
        }
        assert_eq!(trim(10.0), "10");
        assert_eq!(trim(0.25), "0.25");
    }

    #[test]
    fn the_two_taps_views_of_a_connection_pair_by_their_addresses() {
        let mut conns = HashMap::new();
        conns.insert((Endpoint::Client, 1), ("a:1".into(), "b:2".into()));
        conns.insert((Endpoint::Server, 5), ("b:2".into(), "a:1".into()));
        conns.insert((Endpoint::Server, 3), ("b:2".into(), "a:1".into()));
        conns.insert((Endpoint::Server, 9), ("b:2".into(), "c:3".into()));
        conns.insert((Endpoint::Client, 2), ("c:3".into(), "b:2".into()));
        // Two server views of one address pair (a reused port): the first.
        assert_eq!(pair_of(&conns, Endpoint::Client, 1), (Some(1), Some(3)));
        assert_eq!(pair_of(&conns, Endpoint::Server, 5), (Some(1), Some(5)));
        assert_eq!(pair_of(&conns, Endpoint::Server, 9), (Some(2), Some(9)));
        // A connection without a conn_open, or without a partner.
        assert_eq!(pair_of(&conns, Endpoint::Client, 7), (Some(7), None));
        conns.insert((Endpoint::Client, 4), ("d:4".into(), "b:2".into()));
        assert_eq!(pair_of(&conns, Endpoint::Client, 4), (Some(4), None));
    }

    #[test]
    fn the_grid_step_gives_at_most_twelve_lines_of_1_2_or_5() {
        for (span, step) in [
            (1, 1),
            (12, 1),
            (13, 2),
            (24, 2),
            (25, 5),
            (60, 5),
            (61, 10),
            (50_000_000, 5_000_000),
            (120_000_000, 10_000_000),
            (120_000_001, 20_000_000),
        ] {
            assert_eq!(grid_step(span), step, "span {span}");
        }
    }

    #[test]
    fn labels_are_placed_at_or_below_their_place_a_gap_apart() {
        assert_eq!(place(&[0.0, 5.0, 30.0], 14.0), [0.0, 14.0, 30.0]);
        assert_eq!(place(&[0.0, 5.0, 20.0], 14.0), [0.0, 14.0, 28.0]);
        assert_eq!(place(&[-50.0], 14.0), [-50.0]);
        assert!(place(&[], 14.0).is_empty());
        // Drift is what stacking moves a label beyond its own cluster's lines.
        assert_eq!(drift(&[]), 0.0);
        assert_eq!(drift(&[(0.0, false), (20.0, false)]), 0.0);
        assert_eq!(drift(&[(0.0, false), (5.0, false)]), 9.0);
        assert_eq!(drift(&[(0.0, false), (5.0, true)]), 0.0);
        assert_eq!(drift(&[(0.0, false), (5.0, true), (6.0, false)]), 22.0);
    }

    #[test]
    fn ticks_close_in_time_share_a_label_line_while_it_has_room() {
        let s = Endpoint::Server;
        let ticks = vec![
            tick(s, 100, "chunk", "chunk 5"), // 10 chars
            tick(Endpoint::Client, 105, "send", "send #0 (5 B)"),
            tick(s, 110, "release", "release 5"),        // 12
            tick(s, 120, "decode", "decode #0"),         // 12
            tick(s, 125, "enqueue", "enq → 1"),          // 10
            tick(s, 126, "chunk", "chunk 5"),            // after an enqueue
            tick(s, 200, "release", "release 5"),        // too late
            tick(s, 205, "start", "start #0 (depth 0)"), // a worker step
            tick(s, 210, "complete", "complete #0"),
        ];
        let lines = label_lines(&ticks, s, 10, LINE_CHARS);
        let items: Vec<_> = lines.iter().map(|l| l.items.clone()).collect();
        assert_eq!(items, [vec![0, 2, 3, 4], vec![5], vec![6], vec![7, 8]]);
        assert_eq!(
            lines.iter().map(|l| l.t).collect::<Vec<_>>(),
            [100, 126, 200, 205]
        );
        // The gap is measured from the previous tick, not the line's first.
        let lines = label_lines(&ticks[..4], s, 10, LINE_CHARS);
        assert_eq!(lines.len(), 1);
        let lines = label_lines(&ticks[..4], s, 9, LINE_CHARS);
        assert_eq!(lines.len(), 3);
        // Room: 10 + 12 = 22 characters fit in 22, not 21.
        assert_eq!(label_lines(&ticks[..3], s, 10, 22).len(), 1);
        assert_eq!(label_lines(&ticks[..3], s, 10, 21).len(), 2);
        // The client's ticks are its own lines.
        let client = label_lines(&ticks, Endpoint::Client, 10, 26);
        assert_eq!(client.len(), 1);
        assert_eq!(client[0].items, [1]);
    }

    #[test]
    fn a_worker_step_or_the_next_message_starts_a_new_label_line() {
        let s = Endpoint::Server;
        let k = |kind| tick(s, 0, kind, "x");
        let ticks = vec![
            k("chunk"),
            k("decode"),
            k("start"),
            k("release"),
            k("chunk"),
        ];
        assert!(!breaks(&[], &ticks[0], &ticks));
        assert!(!breaks(&[0], &ticks[1], &ticks), "decode after chunk");
        assert!(breaks(&[0, 1], &ticks[2], &ticks), "start after decode");
        assert!(breaks(&[2], &ticks[3], &ticks), "release after start");
        assert!(
            !breaks(&[2], &k("complete"), &ticks),
            "complete after start"
        );
        assert!(!breaks(&[3], &ticks[4], &ticks), "chunk after release");
        assert!(
            breaks(&[1, 3], &ticks[4], &ticks),
            "chunk in a line with a decode"
        );
        assert!(breaks(&[1], &k("chunk"), &ticks), "chunk after decode");
        let enq = vec![k("enqueue")];
        assert!(breaks(&[0], &k("chunk"), &enq), "chunk after enqueue");
        assert!(!breaks(&[0], &k("release"), &enq), "release after enqueue");
    }

    #[test]
    fn arrows_of_one_kind_close_in_time_share_a_label_line() {
        let at = |flow, frame, t: u64| arrow(flow, frame, Some(t), None);
        let arrows = vec![
            at(Flow::C2s, FrameType::DATA, 100),          // DATA 16384: 13
            at(Flow::S2c, FrameType::WINDOW_UPDATE, 102), // 35 (the line's first)
            at(Flow::C2s, FrameType::DATA, 105),
            at(Flow::S2c, FrameType::WINDOW_UPDATE, 106), // 35 - 14 = 21
            at(Flow::C2s, FrameType::DATA, 116),          // 11 after the last DATA
            at(Flow::C2s, FrameType::HEADERS, 117),
        ];
        let lines = arrow_lines(&arrows, 10);
        let items: Vec<_> = lines.iter().map(|l| l.items.clone()).collect();
        assert_eq!(items, [vec![0, 2], vec![1, 3], vec![4], vec![5]]);
        assert_eq!(lines[1].flow, Flow::S2c);
        assert_eq!(lines[0].flow, Flow::C2s);
        // Room for 62 characters: 35 + 21 + 21 = 77 does not fit, 35 + 21 = 56 does.
        let wus: Vec<_> = (0..3)
            .map(|k| at(Flow::S2c, FrameType::WINDOW_UPDATE, 100 + k))
            .collect();
        assert_eq!(arrow_lines(&wus, 10).len(), 2);
        // DATA 16384 (13) × 4 = 52 fits; × 5 = 65 does not.
        let data: Vec<_> = (0..5)
            .map(|k| at(Flow::C2s, FrameType::DATA, 100 + k))
            .collect();
        let lines = arrow_lines(&data, 10);
        assert_eq!(
            lines.iter().map(|l| l.items.len()).collect::<Vec<_>>(),
            [4, 1]
        );
    }

    #[test]
    fn a_ladder_counts_its_arrows_and_knows_when_it_was_capped() {
        let mut l = Ladder {
            origin: 1_000,
            arrows: vec![
                arrow(Flow::C2s, FrameType::DATA, Some(1), None),
                arrow(Flow::C2s, FrameType::DATA, Some(2), None),
                arrow(Flow::S2c, FrameType::WINDOW_UPDATE, Some(3), None),
            ],
            ticks: vec![tick(Endpoint::Server, 4, "chunk", "chunk 1")],
            items_in_slice: 4,
            ..Ladder::default()
        };
        assert!(!l.capped());
        l.items_in_slice = 5;
        assert!(l.capped());
        let counts = l.arrow_counts();
        assert_eq!(counts.get("DATA"), Some(&2));
        assert_eq!(counts.get("WINDOW_UPDATE"), Some(&1));
        assert_eq!(counts.len(), 2);
        assert_eq!(l.secs(1_500_001_000), 1.5);
        assert_eq!(l.secs(10), 0.0);
    }

    #[test]
    fn an_arrow_title_says_who_wrote_and_read_it_and_how_long_it_flew() {
        let l = Ladder {
            origin: ORIGIN,
            start: ORIGIN + 7,
            ..Ladder::default()
        };
        let mut a = arrow(
            Flow::C2s,
            FrameType::DATA,
            Some(ORIGIN + 1_000_000),
            Some(ORIGIN + 1_250_000),
        );
        a.offset = 109;
        assert_eq!(l.ends(&a), (ORIGIN + 1_000_000, ORIGIN + 1_250_000));
        assert_eq!(
            l.arrow_title(&a),
            "DATA 16384 · stream 1 · byte offset 109\nwritten by the client at 0.001000 s\n\
             read by the server at 0.001250 s\nin flight 250 µs"
        );
        let mut w = arrow(
            Flow::S2c,
            FrameType::WINDOW_UPDATE,
            None,
            Some(ORIGIN + 2_000_000),
        );
        assert_eq!(l.ends(&w), (ORIGIN + 2_000_000, ORIGIN + 2_000_000));
        assert_eq!(
            l.arrow_title(&w),
            "WINDOW_UPDATE +16400 (stream 1) · stream 1 · byte offset 0\nnot seen by the server's \
             tap (one-sided trace, or beyond the slice's margin)\nread by the client at 0.002000 s"
        );
        w.send = Some(ORIGIN + 3_000_000);
        w.recv = None;
        assert_eq!(l.ends(&w), (ORIGIN + 3_000_000, ORIGIN + 3_000_000));
        assert!(l.arrow_title(&w).ends_with(
            "written by the server at 0.003000 s\nnot seen by the client's tap (one-sided \
             trace, or beyond the slice's margin)"
        ));
        w.send = None;
        assert_eq!(l.ends(&w), (ORIGIN + 7, ORIGIN + 7));
    }

    /// An event `us` µs after the origin with `fields` merged in.
    fn at(
        us: u64,
        ep: &str,
        conn: u32,
        stream: u32,
        kind: &str,
        fields: serde_json::Value,
    ) -> serde_json::Value {
        let mut e = serde_json::json!({"t": ORIGIN + us * 1_000, "ep": ep, "conn": conn, "stream": stream, "type": kind});
        for (k, v) in fields.as_object().unwrap() {
            e[k] = v.clone();
        }
        e
    }

    fn frame_at(
        us: u64,
        ep: &str,
        conn: u32,
        dir: &str,
        frame: &str,
        offset: u64,
    ) -> serde_json::Value {
        let stream = if frame == "WINDOW_UPDATE" { 0 } else { 1 };
        at(
            us,
            ep,
            conn,
            stream,
            "frame",
            serde_json::json!({"dir": dir, "offset": offset, "frame": frame,
            "flags": 0, "len": if frame == "DATA" { 100 } else { 4 }, "increment": 300}),
        )
    }

    fn opens() -> Vec<serde_json::Value> {
        let open = |ep, conn, local: &str, peer: &str| {
            at(
                0,
                ep,
                conn,
                0,
                "conn_open",
                serde_json::json!({"local": local, "peer": peer}),
            )
        };
        vec![
            open("client", 1, "a:1", "b:2"),
            open("server", 5, "b:2", "a:1"),
            open("client", 2, "c:3", "b:2"),
            open("server", 6, "b:2", "c:3"),
        ]
    }

    /// The slice [10 ms, 20 ms] of a trace with two connections: the busier
    /// one is drawn, its frames matched across the taps, its steps as ticks
    /// and its waits as bands clipped to the slice.
    #[test]
    fn a_slice_draws_its_busiest_connection_frame_by_frame_and_step_by_step() {
        let mut evs = opens();
        evs.extend([
            // Connection 1/5: three DATA frames with an end in the slice,
            // one before it, and a WINDOW_UPDATE back.
            frame_at(11_000, "client", 1, "out", "DATA", 100),
            frame_at(11_100, "server", 5, "in", "DATA", 100),
            frame_at(12_000, "client", 1, "out", "DATA", 209),
            frame_at(12_100, "server", 5, "in", "DATA", 209),
            frame_at(9_900, "client", 1, "out", "DATA", 318),
            frame_at(10_050, "server", 5, "in", "DATA", 318),
            frame_at(8_000, "client", 1, "out", "DATA", 427),
            frame_at(9_000, "server", 5, "in", "DATA", 427),
            frame_at(13_000, "server", 5, "out", "WINDOW_UPDATE", 50),
            frame_at(13_200, "client", 1, "in", "WINDOW_UPDATE", 50),
            // Connection 2/6: one frame, both views.
            frame_at(14_000, "client", 2, "out", "DATA", 100),
            frame_at(14_100, "server", 6, "in", "DATA", 100),
            // The server's steps.
            at(
                11_200,
                "server",
                5,
                1,
                "chunk",
                serde_json::json!({"len": 100}),
            ),
            at(
                11_300,
                "server",
                5,
                1,
                "release",
                serde_json::json!({"bytes": 100, "at": "decode", "seq": 0}),
            ),
            at(
                11_400,
                "server",
                5,
                1,
                "release",
                serde_json::json!({"bytes": 9, "at": "frame"}),
            ),
            at(
                11_500,
                "server",
                5,
                1,
                "decode",
                serde_json::json!({"seq": 0, "size": 95, "framed": 100}),
            ),
            at(
                11_600,
                "server",
                5,
                1,
                "enqueue",
                serde_json::json!({"seq": 0, "depth": 1, "queued_bytes": 95}),
            ),
            at(
                11_700,
                "server",
                5,
                3,
                "enqueue",
                serde_json::json!({"seq": 0, "depth": 2, "queued_bytes": 95}),
            ),
            at(
                12_500,
                "server",
                5,
                1,
                "start",
                serde_json::json!({"seq": 0, "worker": 0, "wait_ns": 9, "depth": 0}),
            ),
            at(
                15_000,
                "server",
                5,
                1,
                "complete",
                serde_json::json!({"seq": 0, "worker": 0, "service_ns": 9}),
            ),
            at(
                16_000,
                "server",
                5,
                3,
                "discard",
                serde_json::json!({"seq": 1, "reason": "deadline"}),
            ),
            at(
                17_000,
                "server",
                5,
                3,
                "rpc_end",
                serde_json::json!({"status": 4}),
            ),
            at(
                10_100,
                "server",
                5,
                1,
                "rpc_start",
                serde_json::json!({"path": "/x"}),
            ),
            // Server steps on a client, a client step on the server: not drawn.
            at(16_500, "client", 1, 1, "chunk", serde_json::json!({"len": 1})),
            at(16_510, "client", 1, 1, "release", serde_json::json!({"bytes": 1, "at": "frame"})),
            at(16_520, "client", 1, 1, "decode", serde_json::json!({"seq": 7, "size": 1, "framed": 6})),
            at(16_530, "client", 1, 1, "enqueue", serde_json::json!({"seq": 7, "depth": 5, "queued_bytes": 1})),
            at(16_540, "client", 1, 1, "start", serde_json::json!({"seq": 7, "worker": 0, "wait_ns": 0, "depth": 4})),
            at(16_550, "client", 1, 1, "complete", serde_json::json!({"seq": 7, "worker": 0, "service_ns": 1})),
            at(16_560, "client", 1, 1, "discard", serde_json::json!({"seq": 7, "reason": "deadline"})),
            at(
                16_600,
                "server",
                5,
                1,
                "send",
                serde_json::json!({"seq": 9, "scheduled": ORIGIN, "begin": ORIGIN, "bytes": 1}),
            ),
            at(
                16_700,
                "server",
                5,
                1,
                "socket_blocked",
                serde_json::json!({"dir": "out", "start": ORIGIN + 16_000_000}),
            ),
            // Outside the slice, or on the other connection: not drawn.
            at(
                25_000,
                "server",
                5,
                1,
                "chunk",
                serde_json::json!({"len": 100}),
            ),
            at(
                9_000,
                "server",
                5,
                1,
                "complete",
                serde_json::json!({"seq": 9, "worker": 0, "service_ns": 9}),
            ),
            at(
                14_200,
                "server",
                6,
                1,
                "chunk",
                serde_json::json!({"len": 100}),
            ),
            // The client.
            at(
                10_500,
                "client",
                1,
                1,
                "send",
                serde_json::json!({"seq": 0, "scheduled": ORIGIN + 10_400_000, "begin": ORIGIN + 10_450_000, "bytes": 105}),
            ),
            at(
                10_800,
                "client",
                1,
                1,
                "window_blocked",
                serde_json::json!({"seq": 1, "start": ORIGIN + 5_000_000}),
            ),
            at(
                25_000,
                "client",
                1,
                1,
                "socket_blocked",
                serde_json::json!({"dir": "out", "start": ORIGIN + 19_000_000}),
            ),
            at(
                9_500,
                "client",
                1,
                1,
                "socket_blocked",
                serde_json::json!({"dir": "out", "start": ORIGIN + 9_000_000}),
            ),
            at(
                30_000,
                "client",
                1,
                1,
                "window_blocked",
                serde_json::json!({"seq": 2, "start": ORIGIN + 21_000_000}),
            ),
        ]);
        // Connection 3/7: one frame in the slice (another connection, not
        // drawn); 4/8: more frames than 1/5, all in the margin before the
        // slice (not in it: neither drawn nor counted); 9/10: a step only.
        let open = |ep, conn, local: &str, peer: &str| {
            at(
                0,
                ep,
                conn,
                0,
                "conn_open",
                serde_json::json!({"local": local, "peer": peer}),
            )
        };
        evs.extend([
            open("client", 3, "e:5", "b:2"),
            open("server", 7, "b:2", "e:5"),
            open("client", 4, "f:6", "b:2"),
            open("server", 8, "b:2", "f:6"),
            open("server", 10, "b:2", "g:7"),
            frame_at(15_000, "client", 3, "out", "DATA", 100),
            at(
                15_100,
                "server",
                10,
                1,
                "chunk",
                serde_json::json!({"len": 1}),
            ),
        ]);
        for k in 0..60 {
            evs.push(frame_at(
                5_000 + k,
                "client",
                4,
                "out",
                "DATA",
                100 + k * 109,
            ));
        }
        evs.sort_by_key(|e| e["t"].as_u64());
        let path = trace("busiest", &evs);
        let l = build(
            &path,
            &LadderOpts {
                at_ns: Some(10_000_000),
                span_ns: 10_000_000,
                ..LadderOpts::default()
            },
        )
        .unwrap();
        assert_eq!(
            (l.start, l.end, l.slice_end),
            (
                ORIGIN + 10_000_000,
                ORIGIN + 20_000_000,
                ORIGIN + 20_000_000
            )
        );
        assert_eq!(l.how, "the slice asked for, 10 ms from 0.0100 s");
        assert_eq!(l.anchor, None);
        assert_eq!(
            l.client,
            Some(Side {
                conn: 1,
                local: "a:1".into(),
                peer: "b:2".into()
            })
        );
        assert_eq!(
            l.server,
            Some(Side {
                conn: 5,
                local: "b:2".into(),
                peer: "a:1".into()
            })
        );
        assert_eq!(l.other_conns, 2);
        let us = |t: Option<u64>| t.map(|t| (t - ORIGIN) / 1_000);
        let arrows: Vec<_> = l
            .arrows
            .iter()
            .map(|a| (a.flow, a.offset, us(a.send), us(a.recv)))
            .collect();
        assert_eq!(
            arrows,
            [
                (Flow::C2s, 318, Some(9_900), Some(10_050)),
                (Flow::C2s, 100, Some(11_000), Some(11_100)),
                (Flow::C2s, 209, Some(12_000), Some(12_100)),
                (Flow::S2c, 50, Some(13_000), Some(13_200)),
            ]
        );
        assert_eq!(l.arrows[3].frame, FrameType::WINDOW_UPDATE);
        assert_eq!(l.arrows[3].increment, Some(300));
        let ticks: Vec<_> = l
            .ticks
            .iter()
            .map(|k| (k.ep, (k.t - ORIGIN) / 1_000, k.kind, k.text.as_str()))
            .collect();
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        assert_eq!(
            ticks,
            [
                (s, 10_100, "rpc_start", "RPC start"),
                (c, 10_500, "send", "send #0 (105 B)"),
                (s, 11_200, "chunk", "chunk 100"),
                (s, 11_300, "release", "release 100 (#0)"),
                (s, 11_400, "release", "release 9"),
                (s, 11_500, "decode", "decode #0"),
                (s, 11_600, "enqueue", "enqueue #0 → depth 1"),
                (s, 11_700, "enqueue", "enqueue #0 → depth 2"),
                (s, 12_500, "start", "start #0 (depth 0)"),
                (s, 15_000, "complete", "complete #0"),
                (s, 16_000, "discard", "discard #1 (deadline)"),
                (s, 17_000, "rpc_end", "RPC end DEADLINE_EXCEEDED"),
            ]
        );
        let bands: Vec<_> = l
            .bands
            .iter()
            .map(|b| (b.kind, (b.start - ORIGIN) / 1_000, (b.end - ORIGIN) / 1_000))
            .collect();
        assert_eq!(
            bands,
            [
                ("window_blocked", 10_000, 10_800),
                ("socket_blocked", 19_000, 20_000)
            ]
        );
        // Two streams' queues add up: 1, then 1 + 2, then 0 + 2.
        assert_eq!(l.queue_before, Some(0));
        let queue: Vec<_> = l
            .queue
            .iter()
            .map(|q| ((q.0 - ORIGIN) / 1_000, q.1))
            .collect();
        assert_eq!(queue, [(11_600, 1), (11_700, 3), (12_500, 2)]);
        assert_eq!(l.items_in_slice, 16);
        assert!(!l.capped());
        assert_eq!(l.not_kept, 0);

        let svg = l.svg();
        assert_eq!(svg.matches(r#"<g class="arrow""#).count(), 4);
        assert_eq!(svg.matches(r#"data-matched="1""#).count(), 4);
        assert_eq!(
            svg.matches(r#"data-frame="DATA" data-flow="c2s""#).count(),
            3
        );
        assert_eq!(
            svg.matches(r#"data-frame="WINDOW_UPDATE" data-flow="s2c""#)
                .count(),
            1
        );
        assert_eq!(svg.matches(r#"<line class="tick""#).count(), 12);
        assert_eq!(svg.matches(r#"<rect class="band""#).count(), 2);
        assert!(
            svg.contains("client blocked on window credit: 0.010000 s → 0.010800 s (800 µs)"),
            "{svg}"
        );
        assert!(svg.contains("client socket blocked: 0.019000 s → 0.020000 s (1 ms)"));
        assert!(svg.contains("application queue depth: 0 → 2 messages"));
        assert!(svg.contains("messages waiting (0 – 3)"));
        assert!(svg.contains("conn 1 · a:1") && svg.contains("conn 5 · b:2"));
        assert!(!svg.contains("not in this trace") && !svg.contains("stroke-dasharray=\"5 4\""));
        assert!(!svg.contains("capped at") && !svg.contains(r#"class="anchor""#));
        // Gridlines every 1 ms from 0.010 s to 0.020 s, labelled in ms steps.
        assert_eq!(svg.matches(r#"class="tl">"#).count(), 11);
        assert!(svg.contains(r#"class="tl">0.010 s<"#) && svg.contains(r#"class="tl">0.020 s<"#));
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// The ladder of `evs` (sorted by `t` into a trace file) with `opts`.
    fn ladder_of(name: &str, mut evs: Vec<serde_json::Value>, opts: LadderOpts) -> Ladder {
        evs.sort_by_key(|e| e["t"].as_u64());
        let path = trace(name, &evs);
        let l = build(&path, &opts).unwrap();
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        l
    }

    fn enqueue_at(us: u64, depth: u32) -> serde_json::Value {
        at(
            us,
            "server",
            5,
            1,
            "enqueue",
            serde_json::json!({"seq": depth, "depth": depth, "queued_bytes": 1}),
        )
    }

    /// The default slice is a quarter span before the first enqueue at
    /// depth ≥ 2 after the server's first WINDOW_UPDATE, but no more than a
    /// twentieth before the first DATA frame.
    #[test]
    fn the_default_slice_is_around_the_first_growth_after_credit_came_back() {
        let span = 40_000_000;
        let opts = LadderOpts {
            span_ns: span,
            ..LadderOpts::default()
        };
        let mut evs = opens();
        evs.extend([
            frame_at(4_000, "client", 1, "out", "DATA", 100),
            frame_at(4_100, "server", 5, "in", "DATA", 100),
            // Depth 2 before any WINDOW_UPDATE: not the anchor.
            enqueue_at(4_500, 2),
            frame_at(5_000, "server", 5, "out", "WINDOW_UPDATE", 50),
            enqueue_at(5_000, 2),
            enqueue_at(19_000, 1),
            enqueue_at(20_000, 2),
            enqueue_at(21_000, 3),
        ]);
        let l = ladder_of("anchor", evs.clone(), opts);
        assert_eq!(l.anchor, Some(ORIGIN + 20_000_000));
        assert_eq!(
            (l.start - ORIGIN, l.slice_end - ORIGIN),
            (10_000_000, 50_000_000)
        );
        assert_eq!(
            l.how,
            "the default slice, 40 ms around the first enqueue at queue depth ≥ 2 after the \
             server's first WINDOW_UPDATE (at 0.0200 s, ▶ on the queue strip)"
        );
        assert_eq!(l.server.as_ref().map(|s| s.conn), Some(5));
        assert_eq!(l.client.as_ref().map(|s| s.conn), Some(1));
        assert_eq!(
            l.queue,
            [
                (ORIGIN + 19_000_000, 1),
                (ORIGIN + 20_000_000, 2),
                (ORIGIN + 21_000_000, 3)
            ]
        );
        assert_eq!(l.queue_before, Some(0));
        let svg = l.svg();
        assert_eq!(svg.matches(r#"class="anchor""#).count(), 1);
        assert!(svg.contains("(0.020000 s)</title>"));
        // Told that the queue grows while credit flows, the caption says so.
        let grows = LadderOpts {
            queue_grows: true,
            ..opts
        };
        assert!(ladder_of("anchor-grows", evs.clone(), grows)
            .how
            .ends_with("▶ on the queue strip): the queue grows while credit flows"));
        // What the analysis found is searched again when it has an anchor.
        let found = SliceFinder {
            anchor: Some(crate::analyze::slice::Anchor {
                t: 1,
                conn: 9,
                data_before: None,
            }),
            ..SliceFinder::default()
        };
        let l2 = ladder_of(
            "anchor-found",
            evs.clone(),
            LadderOpts {
                found: Some(found),
                ..opts
            },
        );
        assert_eq!(l2, l);

        // The first DATA just before the anchor: the slice starts a
        // twentieth of the span before it.
        let mut late = evs.clone();
        late.retain(|e| e["type"] != "frame" || e["frame"] != "DATA");
        late.push(frame_at(18_000, "client", 1, "out", "DATA", 100));
        let l = ladder_of("anchor-late-data", late, opts);
        assert_eq!(l.start - ORIGIN, 16_000_000);
    }

    /// Without an anchor the default slice starts just before the first
    /// DATA frame (or at the first event) and says why there is none.
    #[test]
    fn without_growth_the_default_slice_starts_at_the_first_data_and_says_why() {
        let span = 40_000_000;
        let opts = LadderOpts {
            span_ns: span,
            ..LadderOpts::default()
        };
        let from_data = "the default slice, 40 ms from just before the first DATA frame: ";
        let client = vec![
            frame_at(3_000, "client", 1, "in", "SETTINGS", 0),
            frame_at(4_000, "client", 1, "out", "DATA", 100),
        ];
        let l = ladder_of("no-server", client.clone(), opts);
        assert_eq!(l.start - ORIGIN, 2_000_000);
        assert_eq!(l.slice_end - l.start, span);
        assert_eq!(l.anchor, None);
        assert_eq!(
            l.how,
            format!("{from_data}the trace has no server events, so the queue is not in it")
        );
        assert!(!l.svg().contains(r#"class="anchor""#));

        let mut direct = client.clone();
        direct.push(frame_at(4_100, "server", 5, "in", "DATA", 100));
        let l = ladder_of("direct", direct.clone(), opts);
        assert_eq!(
            l.how,
            format!(
                "{from_data}the server's queue recorded no enqueue (a direct queue works inline)"
            )
        );

        let mut shallow = direct.clone();
        shallow.push(frame_at(5_000, "server", 5, "out", "WINDOW_UPDATE", 50));
        shallow.push(enqueue_at(6_000, 1));
        shallow.push(enqueue_at(4_500, 2));
        let l = ladder_of("shallow", shallow.clone(), opts);
        assert_eq!(
            l.how,
            format!(
                "{from_data}the queue never held two messages after a WINDOW_UPDATE, so there is \
                 no moment where it grows while credit flows"
            )
        );
        // Given the analysis' finding (here one that differs from the
        // trace, to tell), the ladder trusts it instead of searching.
        let found = SliceFinder {
            first_data: Some(ORIGIN + 8_000_000),
            server_seen: true,
            ..SliceFinder::default()
        };
        let given = ladder_of(
            "shallow-found",
            shallow.clone(),
            LadderOpts {
                found: Some(found),
                ..opts
            },
        );
        assert_eq!(given.start - ORIGIN, 6_000_000);
        assert!(given.how.ends_with("(a direct queue works inline)"));

        // No DATA: from the first event; no events: from the origin.
        let l = ladder_of(
            "no-data",
            vec![enqueue_at(7_000, 1), enqueue_at(9_000, 1)],
            opts,
        );
        assert_eq!(l.start - ORIGIN, 7_000_000);
        assert!(
            l.how
                .starts_with("the default slice, 40 ms from the first event: "),
            "{}",
            l.how
        );
        let l = ladder_of("empty", vec![], opts);
        assert_eq!((l.start, l.slice_end), (ORIGIN, ORIGIN + span));
        assert_eq!(
            l.how,
            "the default slice, 40 ms from the origin (the trace has no events): the trace has no \
             server events, so the queue is not in it"
        );
        assert!(l.arrows.is_empty() && l.ticks.is_empty() && l.client.is_none());
        let svg = l.svg();
        assert_eq!(svg.matches("not in this trace").count(), 2);
    }

    /// Frames up to MARGIN_NS outside the slice are the far ends of its
    /// arrows; other events count from the slice's first to its last ns,
    /// and a wait that overlaps the slice is drawn.
    #[test]
    fn the_slice_keeps_its_edges_and_the_margin_around_them() {
        let s = 2_000_000; // µs: the slice [2 s, 2.01 s]
        let e = s + 10_000;
        let m = MARGIN_NS / 1_000;
        let mut evs = opens();
        evs.extend([
            frame_at(s - m, "client", 1, "out", "DATA", 100),
            frame_at(s, "server", 5, "in", "DATA", 100),
            frame_at(s - m - 1, "client", 1, "out", "DATA", 209),
            frame_at(s + 1, "server", 5, "in", "DATA", 209),
            frame_at(e, "server", 5, "out", "WINDOW_UPDATE", 7),
            frame_at(e + m, "client", 1, "in", "WINDOW_UPDATE", 7),
            frame_at(e - 1, "server", 5, "out", "WINDOW_UPDATE", 20),
            frame_at(e + m + 1, "client", 1, "in", "WINDOW_UPDATE", 20),
            at(
                s - 1,
                "server",
                5,
                1,
                "chunk",
                serde_json::json!({"len": 1}),
            ),
            at(s, "server", 5, 1, "chunk", serde_json::json!({"len": 2})),
            at(e, "server", 5, 1, "chunk", serde_json::json!({"len": 3})),
            at(
                e + 1,
                "server",
                5,
                1,
                "chunk",
                serde_json::json!({"len": 4}),
            ),
            at(
                s,
                "client",
                1,
                1,
                "window_blocked",
                serde_json::json!({"seq": 0, "start": ORIGIN + (s - 50) * 1_000}),
            ),
            at(
                s - 1,
                "client",
                1,
                1,
                "window_blocked",
                serde_json::json!({"seq": 1, "start": ORIGIN + (s - 60) * 1_000}),
            ),
            at(
                e + 90,
                "client",
                1,
                1,
                "window_blocked",
                serde_json::json!({"seq": 2, "start": ORIGIN + e * 1_000}),
            ),
            at(
                e + 95,
                "client",
                1,
                1,
                "socket_blocked",
                serde_json::json!({"dir": "out", "start": ORIGIN + (e + 1) * 1_000}),
            ),
        ]);
        let l = ladder_of(
            "edges",
            evs,
            LadderOpts {
                at_ns: Some(s * 1_000),
                span_ns: 10_000_000,
                ..LadderOpts::default()
            },
        );
        let us = |t: Option<u64>| t.map(|t| (t - ORIGIN) / 1_000);
        let arrows: Vec<_> = l
            .arrows
            .iter()
            .map(|a| (a.offset, us(a.send), us(a.recv)))
            .collect();
        assert_eq!(
            arrows,
            [
                (100, Some(s - m), Some(s)),
                (209, None, Some(s + 1)),
                (20, Some(e - 1), None),
                (7, Some(e), Some(e + m)),
            ]
        );
        let chunks: Vec<_> = l.ticks.iter().map(|k| k.text.as_str()).collect();
        assert_eq!(chunks, ["chunk 2", "chunk 3"]);
        let bands: Vec<_> = l
            .bands
            .iter()
            .map(|b| ((b.start - ORIGIN) / 1_000, (b.end - ORIGIN) / 1_000))
            .collect();
        assert_eq!(bands, [(s, s), (e, e)]);
        let svg = l.svg();
        assert_eq!(svg.matches(r#"data-matched="0""#).count(), 2);
        assert_eq!(svg.matches(r#"stroke-dasharray="5 4""#).count(), 2);
    }

    /// Past MAX_DRAWN arrows and ticks the drawing ends at the last one
    /// drawn: ticks, queue steps and waits after it are cut too.
    #[test]
    fn the_cap_cuts_ticks_queue_and_waits_at_the_last_item_drawn() {
        let ladder = |n: u64| {
            let mut evs = opens();
            for k in 0..n {
                let us = 1_000 + k * 10;
                evs.push(if k % 2 == 0 {
                    at(us, "server", 5, 1, "chunk", serde_json::json!({"len": 1}))
                } else {
                    enqueue_at(us, k as u32)
                });
            }
            let wait = |end, seq, start| {
                at(
                    end,
                    "client",
                    1,
                    1,
                    "window_blocked",
                    serde_json::json!({"seq": seq, "start": ORIGIN + start}),
                )
            };
            evs.extend([wait(9_000, 0, 500_000), wait(9_500, 1, 8_000_000)]);
            ladder_of(
                "cap-ticks",
                evs,
                LadderOpts {
                    at_ns: Some(0),
                    span_ns: 10_000_000,
                    ..LadderOpts::default()
                },
            )
        };
        let l = ladder(400);
        assert_eq!(l.items_in_slice, 400);
        assert_eq!(l.ticks.len(), MAX_DRAWN);
        assert_eq!(l.end, ORIGIN + (1_000 + 299 * 10) * 1_000);
        assert_eq!(l.ticks.last().unwrap().t, l.end);
        assert_eq!(l.queue.len(), 150);
        assert!(l.queue.iter().all(|q| q.0 <= l.end));
        // The wait that began after the cut is gone; the other ends there.
        assert_eq!(l.bands.len(), 1);
        assert_eq!(
            (l.bands[0].start, l.bands[0].end),
            (ORIGIN + 500_000, l.end)
        );
        assert!(l.capped());
        // Centred between the columns, below the body.
        let svg = l.svg();
        assert!(svg.contains(&format!(
            r#"<text x="500" y="{:.1}" class="cap">… capped at 300 arrows and ticks: the slice asked for continues to 0.0100 s"#,
            TOP + body_of(&svg) + 24.0
        )));
        // Exactly MAX_DRAWN: all of it, to the slice's end.
        let l = ladder(MAX_DRAWN as u64);
        assert_eq!((l.items_in_slice, l.ticks.len()), (MAX_DRAWN, MAX_DRAWN));
        assert_eq!(l.end, l.slice_end);
        assert_eq!(l.bands.len(), 2);
        assert!(!l.capped() && !l.svg().contains("capped at"));
        // The cap's note is below the body, inside the drawing.
        let capped = Ladder {
            origin: ORIGIN,
            start: ORIGIN,
            end: ORIGIN + 10_000_000,
            slice_end: ORIGIN + 20_000_000,
            items_in_slice: 5,
            ..Ladder::default()
        };
        let svg = capped.svg();
        assert!(svg.contains(&format!(
            r#"viewBox="0 0 1280 {:.0}""#,
            TOP + body_of(&svg) + 32.0 + 16.0
        )));
    }

    /// Past MAX_KEPT events of the slice the rest are counted, not held.
    #[test]
    fn a_slice_holds_at_most_max_kept_events_and_counts_the_rest() {
        // 50 events before the slice and 50 after it (inside the frames'
        // margin) are not held: only the slice's count.
        let evs: Vec<_> = (0..MAX_KEPT as u64 + 110)
            .map(|k| {
                at(
                    match k {
                        0..50 => 500,
                        50..100 => 12_000,
                        k => 1_000 + k / 100,
                    },
                    "server",
                    5,
                    1,
                    "chunk",
                    serde_json::json!({"len": 1}),
                )
            })
            .collect();
        let l = ladder_of(
            "kept",
            evs,
            LadderOpts {
                at_ns: Some(1_000_000),
                span_ns: 10_000_000,
                ..LadderOpts::default()
            },
        );
        assert_eq!(l.not_kept, 10);
        assert_eq!(l.items_in_slice, MAX_KEPT);
        assert_eq!(l.ticks.len(), MAX_DRAWN);
    }

    /// A worker that only ever starts at depth 0 had nothing waiting (a
    /// direct handoff): no queue strip. The connection drawn without
    /// frames is the one with the most steps, the lower one on a tie.
    #[test]
    fn starts_at_depth_zero_draw_no_queue_and_the_busiest_steps_choose_the_connection() {
        let start = |us, conn, depth| {
            at(
                us,
                "server",
                conn,
                1,
                "start",
                serde_json::json!({"seq": 0, "worker": 0, "wait_ns": 0, "depth": depth}),
            )
        };
        let opts = LadderOpts {
            at_ns: Some(0),
            span_ns: 10_000_000,
            ..LadderOpts::default()
        };
        let mut evs = opens();
        evs.extend([start(1_000, 6, 0), start(2_000, 6, 0), start(1_500, 5, 0)]);
        // Samples are not steps: they do not make 5 the busier.
        for k in 0..3 {
            evs.push(at(
                1_600 + k,
                "server",
                5,
                0,
                "sample",
                serde_json::json!({"depth": 0, "queued_bytes": 0, "owned_bytes": 0, "unreleased": 0,
                    "used_capacity": 0, "available_capacity": 0, "rss_bytes": 0}),
            ));
        }
        let l = ladder_of("depth0", evs.clone(), opts);
        assert_eq!(l.server.as_ref().map(|s| s.conn), Some(6));
        assert_eq!(l.client.as_ref().map(|s| s.conn), Some(2));
        assert_eq!(l.ticks.len(), 2);
        assert!(l.queue.is_empty() && l.queue_before.is_none());
        assert!(!l.svg().contains("queue depth"));
        // A tie: connection 5 (paired with the client's 1) before 6 (2).
        evs.push(start(2_500, 5, 1));
        let l = ladder_of("depth1", evs, opts);
        assert_eq!(l.server.as_ref().map(|s| s.conn), Some(5));
        assert_eq!(l.queue_before, Some(1));
        assert_eq!(l.queue, [(ORIGIN + 1_500_000, 0), (ORIGIN + 2_500_000, 1)]);
        assert!(l.svg().contains("queue depth"));
    }

    /// A Unix domain socket's client end has no name of its own: the
    /// column names the socket's path.
    #[test]
    fn a_unix_socket_client_column_names_the_socket() {
        let side = |local: &str| Side {
            conn: 3,
            local: local.into(),
            peer: "unix:/run/x.sock".into(),
        };
        for (local, shown) in [
            (crate::schema::UNIX_UNNAMED, "conn 3 · unix:/run/x.sock"),
            ("unix:@h2probe-7", "conn 3 · unix:/run/x.sock"),
            ("127.0.0.1:5000", "conn 3 · 127.0.0.1:5000"),
        ] {
            let l = Ladder {
                client: Some(side(local)),
                ..Ladder::default()
            };
            let svg = l.svg();
            assert!(
                svg.contains(&format!(r#"class="colsub">{shown}<"#)),
                "{local}: {svg}"
            );
            assert_eq!(svg.matches("not in this trace").count(), 1);
        }
    }

    /// While searching, events are held back to the slice's lead (a
    /// quarter span) plus the margin before the newest: the far end of an
    /// arrow that enters the default slice is still there when the anchor
    /// comes, to the ns.
    #[test]
    fn the_search_holds_back_the_lead_and_the_margin_before_the_anchor() {
        let a = 2_000_000; // µs: the anchor
        let lead = 10_000; // a quarter of 40 ms
        let m = MARGIN_NS / 1_000;
        let mut evs = opens();
        evs.extend([
            frame_at(a - lead - m, "client", 1, "out", "DATA", 100),
            frame_at(a - lead + 1, "server", 5, "in", "DATA", 100),
            frame_at(a - lead - m - 1, "client", 1, "out", "DATA", 0),
            frame_at(a - lead, "server", 5, "in", "DATA", 0),
            frame_at(a - 30_000, "server", 5, "out", "WINDOW_UPDATE", 50),
        ]);
        evs.sort_by_key(|e| e["t"].as_u64());
        // Last before the anchor in the file, at its very t.
        evs.push(at(
            a,
            "server",
            5,
            1,
            "chunk",
            serde_json::json!({"len": 1}),
        ));
        evs.push(enqueue_at(a, 2));
        let path = trace("lead", &evs);
        let l = build(
            &path,
            &LadderOpts {
                span_ns: 40_000_000,
                ..LadderOpts::default()
            },
        )
        .unwrap();
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        assert_eq!(l.anchor, Some(ORIGIN + a * 1_000));
        assert_eq!(l.start, ORIGIN + (a - lead) * 1_000);
        let us = |t: Option<u64>| t.map(|t| (t - ORIGIN) / 1_000);
        let ends: Vec<_> = l
            .arrows
            .iter()
            .map(|x| (x.offset, us(x.send), us(x.recv)))
            .collect();
        assert_eq!(
            ends,
            [
                (100, Some(a - lead - m), Some(a - lead + 1)),
                (0, None, Some(a - lead)),
            ],
        );
    }

    /// An event the reorder window meets too late to put in its place
    /// makes the ladder read the trace again, sorted whole: here the
    /// server's first WINDOW_UPDATE, written after events 300 ms later,
    /// moves the anchor from 400 ms back to 20 ms.
    #[test]
    fn an_event_met_too_late_makes_the_ladder_sort_the_trace_whole() {
        let mut evs = opens();
        evs.extend([
            frame_at(4_000, "client", 1, "out", "DATA", 100),
            enqueue_at(20_000, 2),
            enqueue_at(300_000, 1),
            enqueue_at(400_000, 2),
        ]);
        evs.sort_by_key(|e| e["t"].as_u64());
        let wu = frame_at(5_000, "server", 5, "out", "WINDOW_UPDATE", 50);
        evs.insert(evs.len() - 1, wu);
        let path = trace("late-wu", &evs);
        let l = build(&path, &LadderOpts::default()).unwrap();
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
        assert_eq!(l.anchor, Some(ORIGIN + 20_000_000));
    }

    /// The server's steps are told apart by colour, frames and the
    /// client's waits too; what has no colour of its own shares a neutral
    /// one. Credit handed back is the release's colour, a send DATA's.
    #[test]
    fn each_step_and_frame_has_a_colour_of_its_own() {
        let neutral = color("");
        let hex = |c: &str| {
            c.len() == 7 && c.starts_with('#') && c[1..].chars().all(|x| x.is_ascii_hexdigit())
        };
        assert!(hex(neutral));
        assert_eq!(color("PING"), neutral);
        let steps = [
            "chunk", "release", "decode", "enqueue", "start", "complete", "discard",
        ];
        for (i, a) in steps.iter().enumerate() {
            for b in &steps[i + 1..] {
                assert_ne!(color(a), color(b), "{a} and {b}");
            }
        }
        for k in steps.iter().chain(&[
            "DATA",
            "WINDOW_UPDATE",
            "send",
            "window_blocked",
            "socket_blocked",
        ]) {
            assert!(hex(color(k)) && color(k) != neutral, "{k}: {}", color(k));
        }
        assert_ne!(color("DATA"), color("WINDOW_UPDATE"));
        assert_ne!(color("window_blocked"), color("socket_blocked"));
        assert_eq!(color("release"), color("WINDOW_UPDATE"));
        assert_eq!(color("send"), color("DATA"));
    }

    /// Tick labels start clear of the server's ticks and end clear of the
    /// client's, each tick drawn in its kind's colour.
    #[test]
    fn tick_labels_stand_clear_of_the_columns() {
        let mut ticks = vec![];
        for (k, kind) in ["chunk", "release", "decode", "enqueue", "start", "complete"]
            .iter()
            .enumerate()
        {
            ticks.push(tick(
                Endpoint::Server,
                ORIGIN + k as u64 * 1_000_000,
                kind,
                kind,
            ));
        }
        ticks.push(tick(
            Endpoint::Client,
            ORIGIN + 500_000,
            "send",
            "send #0 (5 B)",
        ));
        let l = Ladder {
            items_in_slice: ticks.len(),
            ticks,
            ..ten_ms()
        };
        let svg = l.svg();
        let mut labels = 0;
        for piece in svg.split("<text x=\"").skip(1) {
            let x: f64 = piece.split('"').next().unwrap().parse().unwrap();
            let tag = piece.split('>').next().unwrap();
            if tag.contains(r#"class="tlabel" text-anchor="start""#) {
                assert!(
                    x > SERVER_X + 10.0 && x < SERVER_X + 30.0,
                    "server label at {x}"
                );
                labels += 1;
            } else if tag.contains(r#"class="tlabel" text-anchor="end""#) {
                assert!(
                    x < CLIENT_X - 34.0 && x > CLIENT_X - 60.0,
                    "client label at {x}"
                );
                labels += 1;
            }
        }
        assert_eq!(labels, 7, "{svg}");
        for k in &l.ticks {
            assert!(
                svg.contains(&format!(r#"data-kind="{}""#, k.kind))
                    && svg.contains(&format!(
                        r#"stroke="{}" stroke-width="2.5"><title>{} {}"#,
                        color(k.kind),
                        k.ep.as_str(),
                        k.text
                    )),
                "{}: {svg}",
                k.kind
            );
        }
    }

    /// An arrow's label sits at the middle of the part of it that is
    /// drawn: just above a DATA arrow, below a WINDOW_UPDATE, and for an
    /// arrow that leaves the drawing, at the middle of what is left inside.
    #[test]
    fn an_arrow_label_sits_at_the_middle_of_what_is_drawn_of_it() {
        let ms = |v: f64| (ORIGIN as f64 + v * 1e6) as u64;
        let l = Ladder {
            origin: ORIGIN - 5_000_000,
            start: ORIGIN,
            end: ORIGIN + 10_000_000,
            slice_end: ORIGIN + 10_000_000,
            arrows: vec![
                arrow(Flow::C2s, FrameType::DATA, Some(ms(-2.0)), Some(ms(1.0))),
                arrow(Flow::C2s, FrameType::DATA, Some(ms(2.0)), Some(ms(3.0))),
                arrow(
                    Flow::S2c,
                    FrameType::WINDOW_UPDATE,
                    Some(ms(6.0)),
                    Some(ms(14.0)),
                ),
                // Horizontal (one end seen): its middle.
                arrow(Flow::C2s, FrameType::SETTINGS, None, Some(ms(8.5))),
            ],
            items_in_slice: 4,
            ..Ladder::default()
        };
        let svg = l.svg();
        let num = number_after;
        let body = body_of(&svg);
        let y = |t: u64| TOP + (t as f64 - ORIGIN as f64) / 10e6 * body;
        // The part inside [TOP, TOP + body] of the line from (x0, y0) to (x1, y1).
        let mid = |(x0, y0): (f64, f64), (x1, y1): (f64, f64)| {
            let (ta, tb) = ((TOP - y0) / (y1 - y0), (TOP + body - y0) / (y1 - y0));
            let (lo, hi) = (ta.min(tb).max(0.0), ta.max(tb).min(1.0));
            let m = (lo + hi) / 2.0;
            (x0 + m * (x1 - x0), y0 + m * (y1 - y0))
        };
        let (cx, sx) = (CLIENT_X, SERVER_X);
        let a = mid((cx, y(ms(-2.0))), (sx, y(ms(1.0))));
        let b = mid((cx, y(ms(2.0))), (sx, y(ms(3.0))));
        let c = mid((sx, y(ms(6.0))), (cx, y(ms(14.0))));
        let want = [
            (a.0, a.1 - 6.0),
            (b.0, b.1 - 6.0),
            // 18 below; its own arrow, an obstacle at the middle + 6, keeps
            // it a line (14) below that: 2 more.
            (c.0, c.1 + 20.0),
            ((cx + sx) / 2.0, y(ms(8.5)) - 6.0),
        ];
        let got: Vec<(f64, f64)> = svg
            .split("<text x=\"")
            .skip(1)
            .filter(|p| p.split('>').next().unwrap().contains(r#"class="alabel""#))
            .map(|p| (num("", p), num(r#"y=""#, p)))
            .collect();
        assert_eq!(got.len(), 4, "{svg}");
        for ((gx, gy), (wx, wy)) in got.iter().zip(want) {
            assert!(
                (gx - wx).abs() < 0.06 && (gy - wy).abs() < 0.06,
                "label at ({gx}, {gy}), want ({wx:.2}, {wy:.2}): {svg}"
            );
        }
        // The first arrow is cut by the top: its label is below the middle
        // of its whole line, the third's above the middle of its.
        assert!(a.1 > (y(ms(-2.0)) + y(ms(1.0))) / 2.0 + 1.0);
        assert!(c.1 < (y(ms(6.0)) + y(ms(14.0))) / 2.0 - 1.0);
    }

    /// Ticks less than a 400th of the drawn span apart share a label line.
    #[test]
    fn ticks_within_a_400th_of_the_span_share_a_label() {
        let labels = |gap: u64| {
            let l = Ladder {
                ticks: vec![
                    tick(Endpoint::Server, ORIGIN + 1_000_000, "chunk", "chunk 1"),
                    tick(
                        Endpoint::Server,
                        ORIGIN + 1_000_000 + gap,
                        "release",
                        "release 1",
                    ),
                    tick(Endpoint::Server, ORIGIN + 9_000_000, "chunk", "chunk 2"),
                ],
                items_in_slice: 3,
                ..ten_ms()
            };
            let svg = l.svg();
            (svg.matches(r#"class="tlabel""#).count(), svg)
        };
        let (n, svg) = labels(25_000);
        assert_eq!(n, 2);
        // One line, its items apart by a middle dot, each in its colour.
        assert!(svg.contains(&format!(
            r#"<tspan fill="{}">chunk 1</tspan><tspan fill="{}"> · release 1</tspan></text>"#,
            color("chunk"),
            color("release")
        )));
        assert_eq!(labels(25_001).0, 3);
    }

    /// The drawing is the smallest of its heights at which every label
    /// stays within two lines of its tick, and each tick is at its time.
    #[test]
    fn the_drawing_is_as_tall_as_its_labels_need() {
        let drawn_from = |first: u64, n: u64, gap: u64| {
            // A worker's step and a message's arrival never share a line.
            let ticks: Vec<Tick> = (0..n)
                .map(|k| {
                    let kind = if k % 2 == 0 { "chunk" } else { "start" };
                    tick(Endpoint::Server, ORIGIN + first + k * gap, kind, "x")
                })
                .collect();
            let l = Ladder {
                items_in_slice: ticks.len(),
                ticks,
                ..ten_ms()
            };
            let svg = l.svg();
            let num = number_after;
            let body = body_of(&svg);
            let height = num(
                r#"viewBox="0 0 1280 "#,
                &svg.replace("\" width=\"1280", "\""),
            );
            let ticks: Vec<f64> = svg
                .split(r#"<line class="tick" "#)
                .skip(1)
                .map(|p| num(r#"y1=""#, p))
                .collect();
            let labels: Vec<f64> = svg
                .split("<text x=\"")
                .skip(1)
                .filter(|p| p.split('>').next().unwrap().contains(r#"class="tlabel""#))
                .map(|p| num(r#"y=""#, p))
                .collect();
            for (k, ty) in ticks.iter().enumerate() {
                let t = (first + k as u64 * gap) as f64;
                assert!(
                    (ty - (TOP + t / 10e6 * body)).abs() < 0.006,
                    "tick {k} at {ty}"
                );
            }
            let worst = labels
                .iter()
                .zip(&ticks)
                .map(|(p, ty)| p - (ty + 4.0))
                .fold(0.0, f64::max);
            let leaders = svg.matches(r##"stroke="#c4c4c4""##).count();
            (body, height, worst, labels.len(), leaders)
        };
        let drawn = |n, gap| {
            let (body, height, worst, labels, _) = drawn_from(1_000_000, n, gap);
            (body, height, worst, labels)
        };
        // Three labels far apart: the smallest drawing, as tall as its body.
        let (body, height, worst, n) = drawn(3, 3_000_000);
        assert_eq!(
            (body, height, worst, n),
            (480.0, TOP + 480.0 + 16.0, 0.0, 3)
        );
        // Forty lines 50 µs apart need 13.3 px each to stay within two
        // lines of their ticks (39 × (14 − δ) ≤ 28): 2656 px of body, so
        // 2800; at 2300 the last would be 97.5 px below its tick.
        let (body, height, worst, n) = drawn(40, 50_000);
        assert_eq!(n, 40);
        assert_eq!(body, 2800.0);
        assert_eq!(height, TOP + 2800.0 + 16.0);
        // (At 2800 px they are 14 px apart: each label at its tick.)
        assert_eq!(worst, 0.0);
        // Ten lines at one time stack below it as one cluster: no taller.
        let (body, _, worst, n) = drawn(10, 0);
        assert_eq!((body, n), (480.0, 10));
        assert_eq!(worst, 9.0 * LINE_H);
        // Each label pushed more than 6 px below its tick is led back to
        // it by a line; at the slice's end they make the drawing taller
        // (the last label at 549.2 + 4 + 9 × 14, 6 below it, 16 margin).
        let (_, _, _, _, leaders) = drawn_from(1_000_000, 10, 0);
        assert_eq!(leaders, 9);
        let (body, height, _, _, _) = drawn_from(9_900_000, 10, 0);
        assert_eq!(body, 480.0);
        assert_eq!(
            height,
            (TOP + 0.99 * 480.0 + 4.0 + 9.0 * LINE_H + 6.0 + 16.0).round()
        );
        // Five: 4 × (14 − δ) ≤ 28 needs δ ≥ 7 px, 1400 px of body: 1550
        // (at 1250 the last would be 31 px below its tick).
        let (body, _, worst, _) = drawn(5, 50_000);
        assert_eq!(body, 1550.0);
        assert_eq!(worst, 4.0 * (14.0 - 7.75));
    }

    /// The number in `from` right after `after`, up to the next quote.
    fn number_after(after: &str, from: &str) -> f64 {
        let rest = &from[from.find(after).unwrap() + after.len()..];
        rest[..rest.find('"').unwrap()].parse().unwrap()
    }

    /// The body's height in a drawing (its clip rectangle's, less 2).
    fn body_of(svg: &str) -> f64 {
        number_after(
            r#"<clipPath id="lad-clip"><rect x="0" y="73" width="1280" height=""#,
            svg,
        ) - 2.0
    }

    /// An empty ladder of the first 10 ms after the origin.
    fn ten_ms() -> Ladder {
        Ladder {
            origin: ORIGIN,
            start: ORIGIN,
            end: ORIGIN + 10_000_000,
            slice_end: ORIGIN + 10_000_000,
            ..Ladder::default()
        }
    }

    /// Each arrow and its label in its frame's colour; WINDOW_UPDATE is
    /// written once on a line of them.
    #[test]
    fn arrows_and_labels_are_drawn_in_their_frames_colours() {
        let mut wu_conn = arrow(
            Flow::S2c,
            FrameType::WINDOW_UPDATE,
            Some(ORIGIN + 3_000_010),
            None,
        );
        wu_conn.stream = 0;
        wu_conn.increment = Some(500);
        let l = Ladder {
            arrows: vec![
                arrow(Flow::C2s, FrameType::DATA, Some(ORIGIN + 1_000_000), None),
                arrow(
                    Flow::S2c,
                    FrameType::WINDOW_UPDATE,
                    Some(ORIGIN + 3_000_000),
                    None,
                ),
                wu_conn,
                arrow(
                    Flow::S2c,
                    FrameType::SETTINGS,
                    Some(ORIGIN + 7_000_000),
                    None,
                ),
            ],
            items_in_slice: 4,
            ..ten_ms()
        };
        let svg = l.svg();
        for (frame, c, head, width) in [
            ("DATA", color("DATA"), "data", "1.8"),
            ("WINDOW_UPDATE", color("WINDOW_UPDATE"), "wu", "1.8"),
            ("SETTINGS", color(""), "other", "1.2"),
        ] {
            let g = &svg[svg.find(&format!(r#"data-frame="{frame}""#)).unwrap()..];
            let g = &g[..g.find("</g>").unwrap()];
            assert!(
                g.contains(&format!(r#"stroke="{c}" stroke-width="{width}" stroke-dasharray="5 4" marker-end="url(#lad-head-{head})""#)),
                "{frame}: {g}"
            );
        }
        for (id, c) in [
            ("data", color("DATA")),
            ("wu", color("WINDOW_UPDATE")),
            ("other", color("")),
        ] {
            assert!(
                svg.contains(&format!(r#"<marker id="lad-head-{id}" "#))
                    && svg.contains(&format!(r#"fill="{c}"/></marker>"#)),
                "{id}"
            );
        }
        let labels: Vec<&str> = svg
            .split(r#"class="alabel">"#)
            .skip(1)
            .map(|p| &p[..p.find("</text>").unwrap()])
            .collect();
        assert_eq!(
            labels,
            [
                format!(r#"<tspan fill="{}">DATA 16384</tspan>"#, color("DATA")),
                format!(
                    r#"<tspan fill="{c}">WINDOW_UPDATE +16400 (stream 1)</tspan><tspan fill="{c}"> · +500 (connection)</tspan>"#,
                    c = color("WINDOW_UPDATE")
                ),
                r##"<tspan fill="#6b6b6b">SETTINGS</tspan>"##.to_string(),
            ]
        );
        // A label below the body makes the drawing taller: a WINDOW_UPDATE
        // at the slice's end, labelled 18 below it and kept a line (14)
        // below its arrow's obstacle (6 below): 20, then 6, then 16.
        let end = Ladder {
            arrows: vec![arrow(
                Flow::S2c,
                FrameType::WINDOW_UPDATE,
                Some(ORIGIN + 10_000_000),
                None,
            )],
            items_in_slice: 1,
            ..ten_ms()
        };
        let svg = end.svg();
        let bottom = TOP + body_of(&svg);
        assert!(
            svg.contains(&format!(r#"y="{:.1}" class="alabel""#, bottom + 20.0)),
            "{svg}"
        );
        assert!(svg.contains(&format!(
            r#"viewBox="0 0 1280 {:.0}""#,
            bottom + 20.0 + 6.0 + 16.0
        )));
        // A label that would stand above the body stays 10 px inside it.
        let first = Ladder {
            arrows: vec![arrow(Flow::C2s, FrameType::DATA, Some(ORIGIN), None)],
            ..end
        };
        assert!(first
            .svg()
            .contains(&format!(r#"y="{:.1}" class="alabel""#, TOP + 10.0)));
    }

    /// The queue strip steps through each depth, scaled to its deepest
    /// (at most 14 px a message), and labels depths at least 18 px apart.
    #[test]
    fn the_queue_strip_steps_through_its_depths() {
        let strip = |queue_before: Option<u32>, queue: Vec<(u64, u32)>| {
            let l = Ladder {
                queue_before,
                queue,
                ..ten_ms()
            };
            let svg = l.svg();
            let body = body_of(&svg);
            let path = svg.split(r#"<path class="queue" d=""#).nth(1).unwrap();
            let path = path[..path.find('"').unwrap()].to_string();
            let depths: Vec<String> = svg
                .split(r#"class="qd">"#)
                .skip(1)
                .map(|p| p[..p.find('<').unwrap()].to_string())
                .collect();
            (body, path, depths, svg)
        };
        let y = |body: f64, ms: f64| TOP + ms / 10.0 * body;
        let (body, path, depths, svg) = strip(
            Some(2),
            vec![
                (ORIGIN + 2_000_000, 5),
                (ORIGIN + 2_010_000, 20),
                (ORIGIN + 6_000_000, 4),
            ],
        );
        // 20 deep: 140 / 20 = 7 px a message.
        assert_eq!(
            path,
            format!(
                "M1120,{:.1} H1134.0 V{:.1} H1155.0 V{:.1} H1260.0 V{:.1} H1148.0 V{:.1} H1120 Z",
                y(body, 0.0),
                y(body, 2.0),
                y(body, 2.01),
                y(body, 6.0),
                y(body, 10.0)
            )
        );
        // The step to 20 is 0.5 px below the one to 5: not labelled.
        assert_eq!(depths, ["5", "4"]);
        assert!(
            svg.contains("application queue depth: 2 → 4 messages"),
            "{svg}"
        );
        assert!(svg.contains(r#"<text x="1190" y="44" class="colsub">messages waiting (0 – 20)"#));
        // At the strip's right edge a depth is labelled left of its step,
        // inside the drawing: "209" at 1264 would run past 1280.
        let (_, _, depths, svg) = strip(
            None,
            vec![(ORIGIN + 2_000_000, 205), (ORIGIN + 6_000_000, 209)],
        );
        assert_eq!(depths, ["205", "209"]);
        let x209 = 1120.0 + 140.0 - 4.0;
        assert!(
            svg.contains(&format!(
                r#"<text x="{x209:.1}" y="{:.1}" text-anchor="end" class="qd">209</text>"#,
                y(body_of(&svg), 6.0) + 12.0
            )),
            "{svg}"
        );
        let (_, _, _, svg) = strip(None, vec![(ORIGIN + 2_000_000, 4), (ORIGIN + 6_000_000, 9)]);
        assert!(!svg.contains("text-anchor=\"end\" class=\"qd\""), "{svg}");
        // 3 deep: 14 px a message, not 140 / 3; nothing before: from 0.
        let (body, path, _, _) = strip(None, vec![(ORIGIN + 5_000_000, 3)]);
        assert_eq!(
            path,
            format!(
                "M1120,{:.1} H1120.0 V{:.1} H1162.0 V{:.1} H1120 Z",
                y(body, 0.0),
                y(body, 5.0),
                y(body, 10.0)
            )
        );
    }
}
