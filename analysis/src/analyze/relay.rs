//! The relay view: what `h2probe relay` saw on its two legs (`client_leg`,
//! `server_leg`) of every relayed connection pair.
//!
//! The relay forwards bytes unchanged, so a frame at byte offset X of one
//! direction on one leg is the frame at offset X of the same direction on
//! the other leg. That pairs every frame across the legs without looking at
//! its content (and then checks the content agrees), and gives the relay's
//! own latency per frame: the read that completed it on the leg it came in
//! on, to the write that completed it on the other.
//!
//! Everything about a data flow is read at the tap nearest the party it
//! concerns: the sender's windows and its waits at the sender's leg, the
//! receiver's withheld credit and its WINDOW_UPDATE cadence at the
//! receiver's leg.
//!
//! What the wire cannot say: whether a sender with an open stream and no
//! credit *had data ready*. An exhausted window is a fact; a wait is an
//! inference, made only when the sender sent more DATA on the connection
//! after the credit came (it had more to send). Whether that data was ready
//! during the whole interval, or arrived from its application later, is not
//! on the wire: `resume_after_credit_ms` shows how promptly it resumed.

use super::summary::{Check, RelayCut, RelayFlow, RelayStream, RelaySummary};
use crate::schema::{flags, settings, Dir, Endpoint, Event, FrameEv, FrameType, Kind};
use crate::series::{Merge, Series};
use crate::stats::Histo;
use crate::windows::FlowWindows;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// Frames waiting for their twin on the other leg, per pair and direction
/// (bounded: a leg cut short never drains its queue).
const MAX_PENDING: usize = 100_000;
/// Streams listed in `relay.streams`; later ones are only counted.
const MAX_STREAMS: usize = 64;
/// Buckets of the withheld-credit plot series.
const SERIES_CAP: usize = 2048;

/// (t, pair, flow, queue) of an unforwarded frame: the earliest is named,
/// ties going to the lowest pair, then flow, then frames read before
/// frames written.
type UnforwardedKey = (u64, u32, u8, u8);

/// Which way bytes (and DATA) travel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flow {
    C2s = 0,
    S2c = 1,
}

impl Flow {
    fn of(ep: Endpoint, dir: Dir) -> Flow {
        if ep.is_client_end() == (dir == Dir::Out) {
            Flow::C2s
        } else {
            Flow::S2c
        }
    }
    fn other(self) -> Flow {
        match self {
            Flow::C2s => Flow::S2c,
            Flow::S2c => Flow::C2s,
        }
    }
    /// The leg nearest the party that sends DATA in this flow.
    fn sender_leg(self) -> Endpoint {
        match self {
            Flow::C2s => Endpoint::ClientLeg,
            Flow::S2c => Endpoint::ServerLeg,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Flow::C2s => "c2s",
            Flow::S2c => "s2c",
        }
    }
}

/// What identifies a frame on either leg.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Twin {
    offset: u64,
    t: u64,
    frame: FrameType,
    flags: u8,
    stream: u32,
    len: u32,
    line: u64,
}

/// The sender's side of one data flow, from the sender's leg.
#[derive(Default)]
struct SenderView {
    /// Streams the sender opened (HEADERS) and has not ended (END_STREAM,
    /// RST_STREAM either way).
    open: HashSet<u32>,
    /// An open stream, or the connection, has no credit since this time.
    exhausted_since: Option<u64>,
    /// The last exhaustion ended by credit at this time: the sender's next
    /// DATA makes it an inferred wait.
    credit_at: Option<(u64, u64)>,
}

/// One stream of one flow at the receiver's leg.
#[derive(Default, Clone)]
struct StreamCredit {
    data: u64,
    returned: u64,
    updates: u64,
    max_withheld: i64,
}

impl FlowState {
    /// Moves the connection's withheld credit by `delta`; returns the change
    /// of what it holds above its lowest point (see `max_withheld_conn_bytes`).
    fn move_conn(&mut self, delta: i64) -> i64 {
        let before = self.conn_withheld - self.conn_low;
        self.conn_withheld += delta;
        self.conn_low = self.conn_low.min(self.conn_withheld);
        self.conn_withheld - self.conn_low - before
    }
    fn conn_held(&self) -> i64 {
        self.conn_withheld - self.conn_low
    }
}

impl StreamCredit {
    fn withheld(&self) -> i64 {
        self.data as i64 - self.returned as i64
    }
}

#[derive(Default)]
struct FlowState {
    /// Windows of this flow as each leg saw it: [client_leg, server_leg].
    windows: [FlowWindows; 2],
    sender: SenderView,
    /// Receiver's leg: DATA written minus connection credit returned.
    conn_withheld: i64,
    /// Its lowest value so far: below 0 when the receiver granted credit
    /// ahead of data (an up-front WINDOW_UPDATE enlarging its window).
    conn_low: i64,
    streams: HashMap<u32, StreamCredit>,
    last_stream_update: HashMap<u32, u64>,
    last_conn_update: Option<u64>,
}

#[derive(Default)]
struct Pair {
    flows: [FlowState; 2],
    /// Per byte direction: frames read on the incoming leg not yet seen
    /// written on the other, and frames written not yet seen read (the two
    /// legs' events may reach the trace in either order).
    read: [VecDeque<Twin>; 2],
    written: [VecDeque<Twin>; 2],
    /// Per byte direction: frames one leg saw that the other passed by (a
    /// later frame of the other leg matched while they waited: the relay
    /// forwards bytes in order, so they never will), counted and the
    /// earliest (its queue: 0 read, 1 written); and per queue the highest
    /// offset the queue's bound let go unmatched (a frame whose twin may
    /// have been that one is not counted).
    skipped: [(u64, Option<(Twin, u8)>); 2],
    overflowed: [[Option<u64>; 2]; 2],
    /// Either leg closed with a reason (a broken or hostile peer, an
    /// upstream that refused): unforwarded frames are expected.
    closed_with_reason: bool,
    /// Streams the client opened that have not ended both ways (END_STREAM
    /// each way, or a RST_STREAM): bit 1 the client's side ended, bit 2 the
    /// server's. Those left when the pair closes were cut by the close.
    unended: HashMap<u32, u8>,
    /// Legs that recorded their close (bit 0 the client leg's, bit 1 the
    /// server leg's): once every leg that opened closed (both, when the
    /// client leg's open is not in the trace), nothing more comes and the pair is folded in
    /// ([`RelayView::fold_pair`]). The server leg opens, if at all, before
    /// the client leg closes (the relay connects upstream while it holds
    /// the client's connection); a pair whose upstream connect failed has
    /// the client leg only.
    closed_legs: u8,
    /// Legs that recorded their open, bits as in `closed_legs`.
    opened_legs: u8,
}

/// A leg's bit in [`Pair::closed_legs`] and [`Pair::opened_legs`].
fn leg_bit(ep: Endpoint) -> u8 {
    1 << u8::from(ep == Endpoint::ServerLeg)
}

#[derive(Default)]
struct FlowFigures {
    frames: u64,
    data_frames: u64,
    data_bytes: u64,
    max_data_frame: u32,
    latency: Option<Histo>,
    stream_updates: u64,
    conn_updates: u64,
    stream_increment: Option<Histo>,
    conn_increment: Option<Histo>,
    stream_gap: Option<Histo>,
    conn_gap: Option<Histo>,
    withheld_after_update: Option<Histo>,
    max_withheld_stream: i64,
    max_withheld_conn: i64,
    exhausted_ns: u64,
    exhausted: u64,
    exhausted_open: u64,
    blocked_ns: u64,
    blocked: u64,
    resume: Option<Histo>,
    violations: u64,
    min_stream_window: Option<i64>,
    min_conn_window: Option<i64>,
}

fn histo(h: &mut Option<Histo>, scale: f64) -> &mut Histo {
    h.get_or_insert_with(|| Histo::new(scale))
}

/// Bounded time series of withheld credit (c2s: what the server holds).
pub struct RelaySeries {
    /// Connection-level withheld credit, c2s, summed over pairs.
    pub conn_withheld_c2s: Series,
    /// The first c2s stream with DATA: its withheld credit, the highest
    /// and the lowest value in each bucket (the low one is what the
    /// receiver held right after returning credit).
    pub stream_withheld_c2s: Series,
    pub stream_withheld_min_c2s: Series,
    /// Connection-level withheld credit, s2c (what the client holds).
    pub conn_withheld_s2c: Series,
    pub plotted_stream: Option<(u32, u32)>,
}

impl RelaySeries {
    fn new(origin: u64) -> RelaySeries {
        let series = |m| Series::new(origin, 1_000_000, SERIES_CAP, m);
        RelaySeries {
            conn_withheld_c2s: series(Merge::Max),
            stream_withheld_c2s: series(Merge::Max),
            stream_withheld_min_c2s: series(Merge::Min),
            conn_withheld_s2c: series(Merge::Max),
            plotted_stream: None,
        }
    }
}

/// Feeds relay-leg events; [`RelayView::finish`] gives `summary.relay`.
pub struct RelayView {
    origin: u64,
    seen: bool,
    pairs: HashMap<u32, Pair>,
    figures: [FlowFigures; 2],
    connections: u64,
    refused: u64,
    close_reasons: BTreeMap<String, u64>,
    wire_errors: u64,
    rules_broken: BTreeMap<String, u64>,
    answers: BTreeMap<String, u64>,
    matched: u64,
    differing: u64,
    first_difference: Option<(u64, u64, String)>,
    /// The streams listed: the first [`MAX_STREAMS`] by (pair, flow,
    /// stream), whenever their pair was folded in.
    streams: BTreeMap<(u32, u8, u32), RelayStream>,
    streams_omitted: u64,
    /// Frames one leg saw and the other never did, in pairs folded in
    /// (closed without a reason), and the earliest: ((t, pair, flow,
    /// queue), line, what); ties go to the lowest pair, whenever folded.
    unforwarded: u64,
    first_unforwarded: Option<(UnforwardedKey, u64, String)>,
    /// Pairs folded in; an event that names one later (a leg records
    /// nothing after its close: a damaged trace) is counted here and left
    /// out.
    folded: super::wire_view::RetiredIds<1>,
    pub(super) events_after_fold: u64,
    /// Streams open (not ended both ways) when their pair closed, and the
    /// first of them: (t, conn, stream).
    streams_cut: u64,
    first_cut: Option<(u64, u32, u32)>,
    total_withheld: [i64; 2],
    pub series: RelaySeries,
    /// Window changes of the event just fed, (flow, stream, window),
    /// stream 0 the connection: the driver writes them to windows.csv.
    pub(super) window_changes: Vec<(usize, u32, i64)>,
}

impl RelayView {
    pub fn new(origin: u64) -> RelayView {
        RelayView {
            origin,
            seen: false,
            pairs: HashMap::new(),
            figures: Default::default(),
            connections: 0,
            refused: 0,
            close_reasons: BTreeMap::new(),
            wire_errors: 0,
            rules_broken: BTreeMap::new(),
            answers: BTreeMap::new(),
            matched: 0,
            differing: 0,
            first_difference: None,
            streams: BTreeMap::new(),
            streams_omitted: 0,
            unforwarded: 0,
            first_unforwarded: None,
            folded: Default::default(),
            events_after_fold: 0,
            streams_cut: 0,
            first_cut: None,
            total_withheld: [0; 2],
            series: RelaySeries::new(origin),
            window_changes: vec![],
        }
    }

    /// Whether relay pair `conn` was folded in: an event of it is counted
    /// and left out.
    pub fn is_folded(&self, conn: u32) -> bool {
        self.folded.contains(conn)
    }

    pub fn feed(&mut self, e: &Event, line: u64) {
        self.seen = true;
        if self.folded.contains(e.conn) {
            self.events_after_fold += 1;
            return;
        }
        match &e.kind {
            Kind::ConnOpen(_) => {
                if e.ep == Endpoint::ClientLeg {
                    self.connections += 1;
                }
                self.pairs.entry(e.conn).or_default().opened_legs |= leg_bit(e.ep);
            }
            Kind::ConnRefused(_) => self.refused += 1,
            // A frame that broke a rule is forwarded: its pair stays open.
            // Counted once, as the leg that read it saw it.
            Kind::WireError(w) => match super::wire_view::rule_broken(&w.error) {
                None => self.wire_errors += 1,
                Some(rule) if w.dir == crate::schema::Dir::In => {
                    let writer = if e.ep == Endpoint::ClientLeg {
                        "client"
                    } else {
                        "server"
                    };
                    super::summary::count_capped(
                        &mut self.rules_broken,
                        format!("{writer}: {rule}"),
                        1,
                    );
                }
                Some(_) => {}
            },
            Kind::ConnClose(c) => {
                if !c.error.is_empty() {
                    // The reason's first words, and the leg it names when
                    // it names one ("read error: server leg: …" closes both
                    // legs: on the client leg it is still the server's).
                    let mut parts = c.error.split(':').map(str::trim);
                    let head = parts.next().unwrap_or_default();
                    let key = match parts.next() {
                        Some(leg @ ("client leg" | "server leg")) => format!("{head}: {leg}"),
                        _ => head.to_string(),
                    };
                    super::summary::count_capped(
                        &mut self.close_reasons,
                        format!("{}: {key}", e.ep.as_str()),
                        1,
                    );
                    self.pairs.entry(e.conn).or_default().closed_with_reason = true;
                }
                // Both legs gone: the pair's streams are final.
                if e.ep == Endpoint::ClientLeg || e.ep == Endpoint::ServerLeg {
                    self.close_leg(e);
                }
                // The client's connection is gone: a stream not ended both
                // ways was cut by the close (a peer that died mid-stream).
                if e.ep == Endpoint::ClientLeg {
                    if let Some(pair) = self.pairs.get_mut(&e.conn) {
                        self.streams_cut += pair.unended.len() as u64;
                        if let Some(&first) = pair.unended.keys().min() {
                            self.first_cut.get_or_insert((e.t, e.conn, first));
                        }
                        pair.unended.clear();
                    }
                }
                let done = self.pairs.get_mut(&e.conn).is_some_and(|pair| {
                    pair.closed_legs |= leg_bit(e.ep);
                    // Both when the client leg's open is not in the trace.
                    let need = match pair.opened_legs & 1 {
                        1 => pair.opened_legs,
                        _ => 3,
                    };
                    pair.closed_legs & need == need
                });
                if done {
                    let pair = self.pairs.remove(&e.conn).expect("closed");
                    self.fold_pair(e.conn, pair, e.t, false);
                    self.folded.insert(e.conn);
                }
            }
            Kind::Frame(f) => self.frame(e, f, line),
            _ => {}
        }
    }

    /// A leg closed: exhaustion still open on its sender side ends here.
    fn close_leg(&mut self, e: &Event) {
        let Some(pair) = self.pairs.get_mut(&e.conn) else {
            return;
        };
        for flow in [Flow::C2s, Flow::S2c] {
            if flow.sender_leg() != e.ep {
                continue;
            }
            let st = &mut pair.flows[flow as usize];
            if let Some(s) = st.sender.exhausted_since.take() {
                let fig = &mut self.figures[flow as usize];
                fig.exhausted += 1;
                fig.exhausted_open += 1;
                fig.exhausted_ns += e.t.saturating_sub(s);
            }
            st.sender.credit_at = None;
        }
    }

    fn frame(&mut self, e: &Event, f: &FrameEv, line: u64) {
        // A GOAWAY or RST_STREAM with an error code, as the leg that read
        // it saw it (once per frame): what each side answered. NO_ERROR is
        // none; a client's CANCEL is how clients end calls, left out as in
        // the top level's `client_answers`.
        if let (Dir::In, Some(code)) = (f.dir, f.error_code) {
            let client = e.ep == Endpoint::ClientLeg;
            if code != 0 && !(client && code == 0x8) {
                super::summary::count_capped(
                    &mut self.answers,
                    format!(
                        "{}: {} {}",
                        if client { "client" } else { "server" },
                        f.frame,
                        crate::schema::h2_error_name(code)
                    ),
                    1,
                );
            }
        }
        let travel = Flow::of(e.ep, f.dir);
        let twin = Twin {
            offset: f.offset,
            t: e.t,
            frame: f.frame,
            flags: f.flags,
            stream: e.stream,
            len: f.len,
            line,
        };
        self.pair_frame(e.conn, travel, f.dir, twin);
        let Some(pair) = self.pairs.get_mut(&e.conn) else {
            return;
        };
        // Stream ends, read once: on the leg the frame came in from.
        if e.ep == travel.sender_leg() && e.stream != 0 {
            let side = 1u8 << (travel as u8);
            match f.frame {
                FrameType::HEADERS | FrameType::DATA => {
                    if f.frame == FrameType::HEADERS
                        && travel == Flow::C2s
                        && pair.unended.len() < 100_000
                    {
                        pair.unended.entry(e.stream).or_insert(0);
                    }
                    if f.has_flag(flags::END_STREAM) {
                        if let Some(ended) = pair.unended.get_mut(&e.stream) {
                            *ended |= side;
                            if *ended == 3 {
                                pair.unended.remove(&e.stream);
                            }
                        }
                    }
                }
                FrameType::RST_STREAM => {
                    pair.unended.remove(&e.stream);
                }
                _ => {}
            }
        }
        let leg = usize::from(e.ep == Endpoint::ServerLeg);
        let t = e.t;
        match f.frame {
            FrameType::DATA => {
                let st = &mut pair.flows[travel as usize];
                let w = &mut st.windows[leg];
                let before = w.violation_count();
                w.on_data(t, e.stream, f.flow_len());
                self.window_changes.extend([
                    (travel as usize, 0, w.conn()),
                    (travel as usize, e.stream, w.stream(e.stream)),
                ]);
                let fig = &mut self.figures[travel as usize];
                fig.violations += w.violation_count() - before;
                if e.ep == travel.sender_leg() {
                    fig.data_frames += 1;
                    fig.data_bytes += f.data_len() as u64;
                    fig.max_data_frame = fig.max_data_frame.max(f.len);
                    let (cw, sw) = (w.conn(), w.stream(e.stream));
                    fig.min_conn_window = Some(fig.min_conn_window.map_or(cw, |m| m.min(cw)));
                    fig.min_stream_window = Some(fig.min_stream_window.map_or(sw, |m| m.min(sw)));
                    if f.len > 0 {
                        if let Some((start, end)) = st.sender.credit_at.take() {
                            fig.blocked += 1;
                            fig.blocked_ns += end - start;
                            histo(&mut fig.resume, 1e-6).record(t.saturating_sub(end));
                        }
                    }
                    if f.has_flag(flags::END_STREAM) {
                        st.sender.open.remove(&e.stream);
                    }
                    Self::exhaustion(st, leg, fig, t, false);
                } else {
                    // The receiver's leg: bytes handed to the receiver.
                    let len = f.flow_len() as i64;
                    let moved = st.move_conn(len);
                    fig.max_withheld_conn = fig.max_withheld_conn.max(st.conn_held());
                    let sc = st.streams.entry(e.stream).or_default();
                    sc.data += f.flow_len() as u64;
                    sc.max_withheld = sc.max_withheld.max(sc.withheld());
                    fig.max_withheld_stream = fig.max_withheld_stream.max(sc.withheld());
                    self.total_withheld[travel as usize] += moved;
                    let stream_w = sc.withheld();
                    self.plot(travel, t, e.conn, e.stream, stream_w);
                }
            }
            FrameType::WINDOW_UPDATE => {
                let credited = travel.other();
                let inc = f.increment.unwrap_or(0);
                let st = &mut pair.flows[credited as usize];
                let w = &mut st.windows[leg];
                let before = w.violation_count();
                w.on_window_update(t, e.stream, inc);
                let now = if e.stream == 0 {
                    w.conn()
                } else {
                    w.stream(e.stream)
                };
                self.window_changes.push((credited as usize, e.stream, now));
                let fig = &mut self.figures[credited as usize];
                fig.violations += w.violation_count() - before;
                if e.ep == credited.sender_leg() {
                    Self::exhaustion(st, leg, fig, t, true);
                } else if e.stream == 0 {
                    fig.conn_updates += 1;
                    histo(&mut fig.conn_increment, 1.0).record(inc as u64);
                    if let Some(prev) = st.last_conn_update.replace(t) {
                        histo(&mut fig.conn_gap, 1e-6).record(t.saturating_sub(prev));
                    }
                    let moved = st.move_conn(-(inc as i64));
                    self.total_withheld[credited as usize] += moved;
                    let w = st.conn_held();
                    self.plot(credited, t, e.conn, 0, w);
                } else {
                    fig.stream_updates += 1;
                    histo(&mut fig.stream_increment, 1.0).record(inc as u64);
                    if let Some(prev) = st.last_stream_update.insert(e.stream, t) {
                        histo(&mut fig.stream_gap, 1e-6).record(t.saturating_sub(prev));
                    }
                    let sc = st.streams.entry(e.stream).or_default();
                    sc.returned += inc as u64;
                    sc.updates += 1;
                    let after = sc.withheld();
                    histo(&mut fig.withheld_after_update, 1.0).record(after.max(0) as u64);
                    self.plot(credited, t, e.conn, e.stream, after);
                }
            }
            FrameType::SETTINGS if !f.has_flag(flags::ACK) => {
                // The sender of these SETTINGS receives the other flow.
                let flow = travel.other();
                let st = &mut pair.flows[flow as usize];
                for (id, v) in f.settings.iter().flatten() {
                    if *id == settings::INITIAL_WINDOW_SIZE {
                        // Either direction: each leg carries the SETTINGS,
                        // and the DATA sent before the sender knew of it,
                        // on its way (on the server leg the relay reads it).
                        st.windows[leg].on_settings_sent(*v);
                        st.windows[leg].on_initial_window(t, *v);
                        self.window_changes.extend(
                            st.windows[leg]
                                .streams()
                                .into_iter()
                                .map(|(id, w)| (flow as usize, id, w)),
                        );
                    }
                }
                if e.ep == flow.sender_leg() {
                    Self::exhaustion(st, leg, &mut self.figures[flow as usize], t, true);
                }
            }
            FrameType::SETTINGS => {
                // The ACK travels the flow whose receiver sent the SETTINGS.
                pair.flows[travel as usize].windows[leg].on_settings_acked();
            }
            FrameType::HEADERS if e.ep == travel.sender_leg() => {
                let st = &mut pair.flows[travel as usize];
                if f.has_flag(flags::END_STREAM) {
                    st.sender.open.remove(&e.stream);
                } else if st.sender.open.len() < 100_000 {
                    st.sender.open.insert(e.stream);
                }
                Self::exhaustion(st, leg, &mut self.figures[travel as usize], t, false);
            }
            FrameType::RST_STREAM => {
                for flow in [Flow::C2s, Flow::S2c] {
                    if e.ep == flow.sender_leg() {
                        let st = &mut pair.flows[flow as usize];
                        st.sender.open.remove(&e.stream);
                        Self::exhaustion(st, leg, &mut self.figures[flow as usize], t, false);
                    }
                }
            }
            _ => {}
        }
    }

    /// Withheld credit for the plots: the total over pairs at connection
    /// level, and one stream (the first c2s stream that carried DATA).
    fn plot(&mut self, flow: Flow, t: u64, conn: u32, stream: u32, withheld: i64) {
        let total = self.total_withheld[flow as usize] as f64;
        match flow {
            Flow::C2s => {
                self.series.conn_withheld_c2s.push(t, total);
                if stream != 0
                    && *self.series.plotted_stream.get_or_insert((conn, stream)) == (conn, stream)
                {
                    self.series.stream_withheld_c2s.push(t, withheld as f64);
                    self.series.stream_withheld_min_c2s.push(t, withheld as f64);
                }
            }
            Flow::S2c => self.series.conn_withheld_s2c.push(t, total),
        }
    }

    /// Re-evaluates, at the sender's leg (`leg`), whether the connection or
    /// an open stream of this flow's sender has no credit; `credit`: the
    /// event granted credit (what ends a wait).
    fn exhaustion(st: &mut FlowState, leg: usize, fig: &mut FlowFigures, t: u64, credit: bool) {
        let w = &st.windows[leg];
        let dry = !st.sender.open.is_empty()
            && (w.conn() <= 0 || st.sender.open.iter().any(|s| w.stream(*s) <= 0));
        match (st.sender.exhausted_since, dry) {
            (None, true) => {
                st.sender.exhausted_since = Some(t);
                st.sender.credit_at = None;
            }
            (Some(since), false) => {
                st.sender.exhausted_since = None;
                fig.exhausted += 1;
                fig.exhausted_ns += t.saturating_sub(since);
                if credit {
                    st.sender.credit_at = Some((since, t));
                }
            }
            _ => {}
        }
    }

    /// Pairs a frame with its twin on the other leg (same direction, same
    /// offset) and checks they are the same frame.
    fn pair_frame(&mut self, conn: u32, travel: Flow, dir: Dir, me: Twin) {
        let pair = self.pairs.entry(conn).or_default();
        let d = travel as usize;
        // Read on the incoming leg (dir In), written on the outgoing (Out).
        let (mine, other) = match dir {
            Dir::In => (&mut pair.read[d], &mut pair.written[d]),
            Dir::Out => (&mut pair.written[d], &mut pair.read[d]),
        };
        let (mine_q, other_q) = if dir == Dir::In { (0, 1) } else { (1, 0) };
        let horizon = pair.overflowed[d][mine_q];
        while let Some(o) = other.front().filter(|o| o.offset < me.offset).copied() {
            other.pop_front();
            if horizon.is_none_or(|h| o.offset > h) {
                let (n, first) = &mut pair.skipped[d];
                *n += 1;
                if first.as_ref().is_none_or(|(f, _)| o.t < f.t) {
                    *first = Some((o, other_q));
                }
            }
        }
        if let Some(o) = other.front().copied() {
            if o.offset == me.offset {
                other.pop_front();
                let (read, written) = if dir == Dir::In { (me, o) } else { (o, me) };
                let fig = &mut self.figures[d];
                fig.frames += 1;
                histo(&mut fig.latency, 1e-6).record(written.t.saturating_sub(read.t));
                let same = (read.frame, read.flags, read.stream, read.len)
                    == (written.frame, written.flags, written.stream, written.len);
                if same {
                    self.matched += 1;
                } else {
                    self.differing += 1;
                    if self.first_difference.is_none() {
                        self.first_difference = Some((
                            written.t.max(read.t),
                            written.line.max(read.line),
                            format!(
                                "conn {conn} {}: offset {} read as {} flags {:#x} stream {} len {}, written as {} flags {:#x} stream {} len {}",
                                travel.name(),
                                me.offset,
                                read.frame,
                                read.flags,
                                read.stream,
                                read.len,
                                written.frame,
                                written.flags,
                                written.stream,
                                written.len
                            ),
                        ));
                    }
                }
                return;
            }
        }
        mine.push_back(me);
        if mine.len() > MAX_PENDING {
            if let Some(gone) = mine.pop_front() {
                pair.overflowed[d][mine_q] = Some(gone.offset);
            }
        }
    }
}

impl RelayView {
    /// Whether the trace had any relay-leg event.
    pub fn seen(&self) -> bool {
        self.seen
    }

    /// `summary.relay` and the `relay_forwarded_unchanged` check; `None`
    /// when the trace has no relay legs.
    /// Folds a pair into the figures and forgets it: when both its legs
    /// closed (nothing more comes on either), or at the end (`end_t`, for
    /// a wait still open). Its memory leaves with it: a relay's trace of
    /// many connections is analysed in memory that follows the pairs open
    /// at once.
    /// `at_cut`: the trace was cut with the pair open, so frames still
    /// waiting for their twin were in flight, not unforwarded.
    fn fold_pair(&mut self, id: u32, mut pair: Pair, end_t: u64, at_cut: bool) {
        for flow in [Flow::C2s, Flow::S2c] {
            let fig = &mut self.figures[flow as usize];
            let st = &mut pair.flows[flow as usize];
            // A wait still open at the end: counted, not inferred.
            if let Some(s) = st.sender.exhausted_since.take() {
                fig.exhausted += 1;
                fig.exhausted_open += 1;
                fig.exhausted_ns += end_t.saturating_sub(s);
            }
            for (sid, c) in st.streams.iter().filter(|(_, c)| c.data > 0) {
                self.streams.insert(
                    (id, flow as u8, *sid),
                    RelayStream {
                        conn: id,
                        stream: *sid,
                        flow: flow.name().into(),
                        data_bytes: c.data,
                        returned_bytes: c.returned,
                        window_updates: c.updates,
                        max_withheld_bytes: c.max_withheld,
                        withheld_end_bytes: c.withheld(),
                    },
                );
                if self.streams.len() > MAX_STREAMS {
                    self.streams.pop_last();
                    self.streams_omitted += 1;
                }
            }
            // Frames one leg saw and the other never did: passed by, or
            // still waiting at the close.
            if !pair.closed_with_reason {
                let (skipped, first) = pair.skipped[flow as usize];
                let empty = VecDeque::new();
                let queues = if at_cut {
                    [&empty, &empty]
                } else {
                    [&pair.read[flow as usize], &pair.written[flow as usize]]
                };
                self.unforwarded += skipped + queues.iter().map(|q| q.len() as u64).sum::<u64>();
                let fronts = (0u8..)
                    .zip(queues)
                    .filter_map(|(k, q)| q.front().map(|f| (*f, k)));
                for (f, k) in fronts.chain(first) {
                    let key = (f.t, id, flow as u8, k);
                    if self.first_unforwarded.as_ref().is_none_or(|x| key < x.0) {
                        self.first_unforwarded = Some((
                            key,
                            f.line,
                            format!(
                                "conn {id} {}: {} at offset {} seen on one leg only",
                                flow.name(),
                                f.frame,
                                f.offset
                            ),
                        ));
                    }
                }
            }
        }
    }

    /// `cut`: the trace ends without its footer (pairs open at the end had
    /// frames in flight); `dropped`: the recorder dropped events (a frame
    /// one leg's tap lost reads as one the relay did not forward).
    pub fn finish(
        mut self,
        end_t: u64,
        cut: bool,
        dropped: bool,
    ) -> (RelaySeries, Option<(RelaySummary, Check)>) {
        let series = std::mem::replace(&mut self.series, RelaySeries::new(self.origin));
        if !self.seen {
            return (series, None);
        }
        let mut ids: Vec<u32> = self.pairs.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let pair = self.pairs.remove(&id).expect("listed");
            self.fold_pair(id, pair, end_t, cut);
        }
        let (unforwarded, first_unforwarded) = (self.unforwarded, self.first_unforwarded.take());
        let secs = |t: u64| t.saturating_sub(self.origin) as f64 / 1e9;
        let check = if let Some((t, line, what)) = &self.first_difference {
            Check::failed_at(
                format!(
                    "{} between the legs, first: {what}",
                    if self.differing == 1 {
                        "1 frame differs".to_string()
                    } else {
                        format!("{} frames differ", self.differing)
                    }
                ),
                secs(*t),
                *line,
            )
        } else if let (Some((_, _, what)), true) = (&first_unforwarded, dropped) {
            Check::na(format!(
                "{unforwarded} frames seen on one leg only (first: {what}), but the recorder dropped events, \
                 and a frame one tap lost reads so: this cannot be judged"
            ))
        } else if let Some(((t, ..), line, what)) = &first_unforwarded {
            Check::failed_at(
                format!(
                    "{unforwarded} frame{} seen on one leg and not the other (pairs closed with a reason are exempt), first: {what}",
                    if unforwarded == 1 { "" } else { "s" }
                ),
                secs(*t),
                *line,
            )
        } else if self.matched == 0 {
            Check::na("no frame crossed the relay")
        } else {
            Check::new(
                true,
                format!(
                    "{} frames read on one leg were written on the other at the same offset, unchanged (type, flags, stream, length)",
                    self.matched
                ),
            )
        };
        let flows = std::mem::take(&mut self.figures).map(flow_summary);
        let [c2s, s2c] = flows;
        let summary = Some((
            RelaySummary {
                connections: self.connections,
                refused: self.refused,
                close_reasons: self.close_reasons,
                wire_errors: self.wire_errors,
                rules_broken: self.rules_broken,
                answers: self.answers,
                frames_forwarded: self.matched,
                frames_differing: self.differing,
                frames_unforwarded: unforwarded,
                c2s,
                s2c,
                streams: self.streams.into_values().collect(),
                streams_omitted: self.streams_omitted,
                streams_cut: self.streams_cut,
                first_cut: self.first_cut.map(|(t, conn, stream)| RelayCut {
                    t_s: (t.saturating_sub(self.origin)) as f64 / 1e9,
                    conn,
                    stream,
                }),
            },
            check,
        ));
        (series, summary)
    }
}

fn dist(h: Option<Histo>) -> crate::stats::Distribution {
    h.map(|h| h.summary()).unwrap_or_default()
}

fn flow_summary(f: FlowFigures) -> RelayFlow {
    let withheld_after_update = dist(f.withheld_after_update);
    let credit_release = if withheld_after_update.count < 2 || f.max_data_frame == 0 {
        "unknown"
    } else if withheld_after_update.p50 < f.max_data_frame as f64 / 2.0 {
        "on_receipt"
    } else {
        "after_receipt"
    };
    let mib = f.data_bytes as f64 / (1 << 20) as f64;
    RelayFlow {
        frames: f.frames,
        data_frames: f.data_frames,
        data_bytes: f.data_bytes,
        max_data_frame: f.max_data_frame,
        relay_latency_ms: dist(f.latency),
        window_updates_stream: f.stream_updates,
        window_updates_conn: f.conn_updates,
        updates_per_mib: if mib > 0.0 {
            f.stream_updates as f64 / mib
        } else {
            0.0
        },
        update_increment_stream: dist(f.stream_increment),
        update_increment_conn: dist(f.conn_increment),
        update_gap_stream_ms: dist(f.stream_gap),
        update_gap_conn_ms: dist(f.conn_gap),
        withheld_after_update,
        max_withheld_stream_bytes: f.max_withheld_stream,
        max_withheld_conn_bytes: f.max_withheld_conn,
        credit_release: credit_release.into(),
        min_stream_window: f.min_stream_window,
        min_conn_window: f.min_conn_window,
        exhausted_s: f.exhausted_ns as f64 / 1e9,
        exhausted_intervals: f.exhausted,
        exhausted_open: f.exhausted_open,
        inferred_blocked_s: f.blocked_ns as f64 / 1e9,
        inferred_blocked_intervals: f.blocked,
        resume_after_credit_ms: dist(f.resume),
        window_violations: f.violations,
    }
}

/// DATA beyond the credit its receiver granted, or a window pushed past
/// 2^31-1, on either leg (windows rebuilt from the frames of each leg).
pub fn credit_check(r: &RelaySummary) -> Check {
    let v = r.c2s.window_violations + r.s2c.window_violations;
    if r.c2s.data_frames + r.s2c.data_frames == 0 {
        Check::na("no DATA crossed the relay")
    } else if v > 0 {
        Check::new(
            false,
            format!(
                "{v} flow-control violations on the legs (c2s {}, s2c {}): DATA beyond the receiver's window or a window above 2^31-1",
                r.c2s.window_violations, r.s2c.window_violations
            ),
        )
    } else {
        Check::new(
            true,
            "no DATA beyond the receiver's window on either leg, both flows".to_string(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ConnCloseEv;

    fn close(ep: Endpoint, error: &str) -> Event {
        Event {
            t: 1,
            ep,
            conn: 1,
            stream: 0,
            kind: Kind::ConnClose(ConnCloseEv {
                error: error.into(),
                bytes_in: 0,
                bytes_out: 0,
            }),
        }
    }

    /// A socket error on one leg closes both, with one text: each leg's key
    /// keeps the leg the error was on (it read `client_leg: read error` for
    /// the upstream's reset).
    #[test]
    fn close_reasons_keep_the_leg_the_error_was_on() {
        let mut v = RelayView::new(0);
        let why = "read error: server leg: Connection reset by peer (os error 104)";
        v.feed(&close(Endpoint::ClientLeg, why), 1);
        v.feed(&close(Endpoint::ServerLeg, why), 2);
        let mut idle = close(Endpoint::ClientLeg, "idle: no byte either way for 5s");
        idle.conn = 2;
        v.feed(&idle, 3);
        let keys: Vec<(&str, u64)> = v
            .close_reasons
            .iter()
            .map(|(k, n)| (k.as_str(), *n))
            .collect();
        assert_eq!(
            keys,
            [
                ("client_leg: idle", 1),
                ("client_leg: read error: server leg", 1),
                ("server_leg: read error: server leg", 1)
            ]
        );
    }

    use crate::analyze::test_event as ev;

    /// A 10-byte DATA frame at `offset`, read (`In`) or written (`Out`).
    fn data(dir: Dir, offset: u64) -> Kind {
        Kind::Frame(crate::schema::FrameEv {
            dir,
            offset,
            frame: FrameType::DATA,
            len: 10,
            ..Default::default()
        })
    }

    /// A frame one leg read and the other passed by (it wrote the next one)
    /// is unforwarded at once, not only one still waiting at the close; a
    /// frame whose twin the queue's bound let go is not.
    #[test]
    fn a_frame_the_other_leg_passed_by_is_unforwarded() {
        let (cl, sl) = (Endpoint::ClientLeg, Endpoint::ServerLeg);
        // Offsets 100, 110, 120 read on the client leg, 100 and 120
        // written on the server leg, and `waiting`: 130 read, not written
        // yet.
        let relay = |waiting: bool| {
            let mut v = RelayView::new(0);
            for (t, offset) in [(1, 100), (2, 110), (3, 120)] {
                v.feed(&ev(t, cl, 1, 1, data(Dir::In, offset)), t);
            }
            for (t, offset) in [(4, 100), (5, 120)] {
                v.feed(&ev(t, sl, 1, 1, data(Dir::Out, offset)), t);
            }
            if waiting {
                v.feed(&ev(6, cl, 1, 1, data(Dir::In, 130)), 6);
            }
            v
        };
        // Cut with the pair open: the frame waiting was in flight, the one
        // passed by is unforwarded all the same.
        for (waiting, cut) in [(true, true), (false, false)] {
            let (_, Some((sum, _))) = relay(waiting).finish(10, cut, false) else {
                panic!("the relay was seen");
            };
            assert_eq!(sum.frames_unforwarded, 1);
        }
        let (_, Some((sum, _))) = relay(true).finish(10, false, false) else {
            panic!("the relay was seen");
        };
        assert_eq!(sum.frames_unforwarded, 2);
        // With events dropped, a frame one tap lost reads so: not judged.
        let (_, Some((_, check))) = relay(false).finish(10, false, true) else {
            panic!("the relay was seen");
        };
        assert_eq!(check.ok, None, "{}", check.detail);
        assert!(
            check.detail.ends_with("this cannot be judged"),
            "{}",
            check.detail
        );
        let (_, Some((sum, check))) = relay(false).finish(10, false, false) else {
            panic!("the relay was seen");
        };
        assert_eq!((sum.frames_forwarded, sum.frames_unforwarded), (2, 1));
        assert_eq!(check.ok, Some(false), "{}", check.detail);
        assert!(
            check
                .detail
                .contains("conn 1 c2s: DATA at offset 110 seen on one leg only"),
            "{}",
            check.detail
        );
        assert_eq!(check.first_line, Some(2));
        // Two passed by: both counted, the earlier named.
        let mut v = RelayView::new(0);
        for (t, offset) in [(1, 100), (2, 110), (3, 120), (4, 130)] {
            v.feed(&ev(t, cl, 1, 1, data(Dir::In, offset)), t);
        }
        for (t, offset) in [(5, 100), (6, 130)] {
            v.feed(&ev(t, sl, 1, 1, data(Dir::Out, offset)), t);
        }
        let (_, Some((sum, check))) = v.finish(10, false, false) else {
            panic!("the relay was seen");
        };
        assert_eq!(sum.frames_unforwarded, 2);
        assert!(
            check.detail.starts_with(
                "2 frames seen on one leg and not the other (pairs closed with a reason are exempt), \
                 first: conn 1 c2s: DATA at offset 110"
            ),
            "{}",
            check.detail
        );
        // The client leg's queue overflowed: its first frame's twin, written
        // late, finds nothing to match and is let go when the next matches.
        let mut v = RelayView::new(0);
        let n = MAX_PENDING as u64 + 1;
        for i in 0..n {
            v.feed(&ev(1 + i, cl, 1, 1, data(Dir::In, 100 + 10 * i)), 1 + i);
        }
        v.feed(&ev(n + 1, sl, 1, 1, data(Dir::Out, 100)), n + 1);
        v.feed(&ev(n + 2, cl, 1, 1, data(Dir::In, 100 + 10 * n)), n + 2);
        v.pairs.get_mut(&1).expect("held").read[0].clear();
        let (_, Some((sum, _))) = v.finish(n + 3, false, false) else {
            panic!("the relay was seen");
        };
        assert_eq!(sum.frames_unforwarded, 0);
    }

    /// 200 pairs each relaying one DATA frame (offset `100 + id` on stream
    /// 1), closing in the reverse of their order: each pair is folded in
    /// when its second leg closes (nothing is held after), the streams
    /// listed are still the 64 of the lowest pair ids, in order, and a
    /// frame the server leg never wrote (pair 150) is unforwarded.
    #[test]
    fn pairs_are_folded_in_when_both_legs_close() {
        use crate::schema::ConnOpenEv;
        let mut v = RelayView::new(0);
        let (cl, sl) = (Endpoint::ClientLeg, Endpoint::ServerLeg);
        let open = || {
            Kind::ConnOpen(ConnOpenEv {
                local: "a:1".into(),
                peer: "b:2".into(),
            })
        };
        let n = 200u32;
        for id in 0..n {
            let t = u64::from(id) * 1_000;
            v.feed(&ev(t, cl, id, 0, open()), 1);
            v.feed(&ev(t + 1, sl, id, 0, open()), 2);
            v.feed(&ev(t + 2, cl, id, 1, data(Dir::In, 100 + u64::from(id))), 3);
            if id != 150 {
                v.feed(
                    &ev(t + 3, sl, id, 1, data(Dir::Out, 100 + u64::from(id))),
                    4,
                );
            }
        }
        for (k, id) in (0..n).rev().enumerate() {
            let t = 1_000_000 + k as u64;
            v.feed(&close(cl, "").tap(|e| (e.t, e.conn) = (t, id)), 5);
            v.feed(&close(sl, "").tap(|e| (e.t, e.conn) = (t, id)), 6);
            assert!(!v.pairs.contains_key(&id), "pair {id} still held");
        }
        assert!(v.pairs.is_empty());
        let (_, Some((sum, check))) = v.finish(2_000_000, false, false) else {
            panic!("the relay was seen");
        };
        let listed: Vec<u32> = sum.streams.iter().map(|s| s.conn).collect();
        assert_eq!(listed, (0..64).collect::<Vec<u32>>());
        // Pair 150's receiver never got its frame: no stream data there.
        assert_eq!(sum.streams_omitted, u64::from(n) - 1 - 64);
        assert_eq!((sum.connections, sum.frames_forwarded), (200, 199));
        assert_eq!(sum.frames_unforwarded, 1);
        assert_eq!(check.ok, Some(false));
        assert!(
            check.detail.contains("conn 150 c2s: DATA at offset 250"),
            "{}",
            check.detail
        );
    }

    /// Pairs whose upstream connect failed (the client leg opens and
    /// closes with the reason, no server leg ever opens) are folded in at
    /// that close; a pair whose server leg opened waits for its close.
    /// Before, only a pair with both legs closed was, and those were held
    /// to the end.
    #[test]
    fn a_pair_without_a_server_leg_is_folded_in_when_its_client_leg_closes() {
        use crate::schema::ConnOpenEv;
        let mut v = RelayView::new(0);
        let (cl, sl) = (Endpoint::ClientLeg, Endpoint::ServerLeg);
        let open = || {
            Kind::ConnOpen(ConnOpenEv {
                local: "a:1".into(),
                peer: "b:2".into(),
            })
        };
        let why = "upstream connect failed: 127.0.0.1:9 (Connection refused (os error 111))";
        for id in 0..100u32 {
            let t = u64::from(id) * 1_000;
            v.feed(&ev(t, cl, id, 0, open()), 1);
            v.feed(&close(cl, why).tap(|e| (e.t, e.conn) = (t + 1, id)), 2);
        }
        assert!(v.pairs.is_empty(), "{} pairs held", v.pairs.len());
        v.feed(&ev(200_000, cl, 100, 0, open()), 3);
        v.feed(&ev(200_001, sl, 100, 0, open()), 4);
        v.feed(&close(cl, "").tap(|e| (e.t, e.conn) = (200_002, 100)), 5);
        assert!(v.pairs.contains_key(&100), "its server leg is open");
        v.feed(&close(sl, "").tap(|e| (e.t, e.conn) = (200_003, 100)), 6);
        assert!(v.pairs.is_empty());
        assert_eq!(v.events_after_fold, 0);
        let (_, Some((sum, _))) = v.finish(300_000, false, false) else {
            panic!("the relay was seen");
        };
        assert_eq!(sum.connections, 101);
    }

    /// Of a relay's pairs, only the plotted stream's keeps its key (for
    /// timeline.csv) past its close: the key of every pair was kept to the
    /// end, ≈ 0.4 KB a pair over a trace of many.
    #[test]
    fn only_the_plotted_pairs_key_outlives_it() {
        use crate::schema::{ConnOpenEv, FrameEv};
        let mut a = crate::analyze::Analyzer::new(0);
        let (cl, sl) = (Endpoint::ClientLeg, Endpoint::ServerLeg);
        let data = |dir: Dir| {
            Kind::Frame(FrameEv {
                dir,
                frame: FrameType::DATA,
                len: 10,
                ..FrameEv::default()
            })
        };
        let open = |local: String, peer: &str| {
            Kind::ConnOpen(ConnOpenEv {
                local,
                peer: peer.into(),
            })
        };
        for id in 1..=500u32 {
            let t = u64::from(id) * 1_000_000;
            let client = format!("127.0.0.1:{}", 10_000 + id);
            let up = format!("127.0.0.1:{}", 20_000 + id);
            a.feed(&ev(t, cl, id, 0, open("127.0.0.1:8080".into(), &client)));
            a.feed(&ev(t + 1, sl, id, 0, open(up, "127.0.0.1:80")));
            a.feed(&ev(t + 2, cl, id, 1, data(Dir::In)));
            a.feed(&ev(t + 3, sl, id, 1, data(Dir::Out)));
            a.feed(&close(cl, "").tap(|e| (e.t, e.conn) = (t + 4, id)));
            a.feed(&close(sl, "").tap(|e| (e.t, e.conn) = (t + 5, id)));
        }
        let keys: Vec<_> = a.tl.conn_keys.iter().collect();
        assert_eq!(keys, [(&(cl, 1), &"10001-8080".to_string())]);
        assert_eq!(a.relay.series.plotted_stream, Some((1, 1)));
    }

    /// An event naming a relay pair already folded in is counted and left
    /// out: it does not stretch the run's span (it read as its last moment).
    #[test]
    fn an_event_after_its_pair_was_folded_in_stretches_no_span() {
        use crate::schema::{ConnOpenEv, FrameEv};
        let mut a = crate::analyze::Analyzer::new(0);
        let cl = Endpoint::ClientLeg;
        let open = Kind::ConnOpen(ConnOpenEv {
            local: "127.0.0.1:8080".into(),
            peer: "127.0.0.1:10001".into(),
        });
        a.feed(&ev(1, cl, 1, 0, open));
        let why = "upstream connect failed: 127.0.0.1:9 (Connection refused (os error 111))";
        a.feed(&close(cl, why).tap(|e| e.t = 2));
        let late = Kind::Frame(FrameEv {
            dir: Dir::In,
            frame: FrameType::DATA,
            len: 10,
            ..FrameEv::default()
        });
        a.feed(&ev(1_000, cl, 1, 1, late));
        let (sum, _) = a.finish(0, &crate::reader::Ending::Clean(Default::default()));
        assert_eq!(sum.events_after_conn_retirement, 1);
        assert_eq!(sum.span_s, 1e-9);
    }

    /// A frame one leg read and the other never wrote fails
    /// `relay_forwarded_unchanged`, unless the recorder dropped events (a
    /// frame one tap lost reads so): then it cannot be judged. With a
    /// probe endpoint's tap in the trace its checks stand beside the
    /// relay's; a relay alone has only its own two.
    #[test]
    fn a_frame_on_one_leg_is_judged_only_when_nothing_was_dropped() {
        use crate::schema::{FrameEv, MsgEv};
        let judge = |dropped: u64, with_client: bool| {
            let mut a = crate::analyze::Analyzer::new(0);
            let data = Kind::Frame(FrameEv {
                dir: Dir::In,
                frame: FrameType::DATA,
                len: 10,
                ..FrameEv::default()
            });
            if with_client {
                let msg = MsgEv {
                    seq: 0,
                    size: 5,
                    framed: 10,
                };
                a.feed(&ev(1, Endpoint::Client, 1, 1, Kind::Schedule(msg)));
            }
            a.feed(&ev(2, Endpoint::ClientLeg, 1, 1, data));
            let ending = crate::reader::Ending::Clean(Default::default());
            a.finish(dropped, &ending).0.checks
        };
        let whole = judge(0, false);
        let keys: Vec<&str> = whole.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["relay_forwarded_unchanged", "relay_no_data_beyond_credit"]
        );
        let c = &whole["relay_forwarded_unchanged"];
        assert_eq!(c.ok, Some(false), "{}", c.detail);
        let lossy = &judge(3, false)["relay_forwarded_unchanged"];
        assert_eq!(lossy.ok, None, "{}", lossy.detail);
        assert!(
            lossy.detail.contains("but the recorder dropped events"),
            "{}",
            lossy.detail
        );
        let beside = judge(0, true);
        assert!(beside.contains_key("accounting"), "{beside:?}");
        assert!(beside.contains_key("relay_forwarded_unchanged"));
        assert!(!beside.contains_key("relay_no_data_beyond_credit"));
    }

    /// `tap`, for building events in place.
    trait Tap: Sized {
        fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
            f(&mut self);
            self
        }
    }
    impl Tap for Event {}
}
