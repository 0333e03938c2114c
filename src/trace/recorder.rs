//! The bounded recorder: the transport and the application hand it events
//! without ever waiting; a named thread writes them as JSON Lines.
//!
//! A slot is reserved *before* the event is built; if the buffer is full the
//! event is counted as dropped (per kind) and the caller moves on. Drops are
//! data: they go into the trace footer and the run's meta, and `analyze`
//! warns about them.
//!
//! Each thread that records keeps its events in its own buffer, which the
//! writer sweeps every few milliseconds (sooner when the buffers fill): a
//! shared channel cost every event a handful of atomic operations on cache
//! lines the two runtime workers and the writer passed back and forth. The
//! writer sorts what one sweep collected by `t`, so the file stays in time
//! order but for events recorded after a sweep with an earlier `t` (as
//! before, the analyzer's reorder window puts them in place).

use super::schema::{Endpoint, Event, Footer, Header, Kind, KindId, SCHEMA_VERSION};
use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Default buffer: events in flight between producers and the writer.
pub const DEFAULT_CAPACITY: usize = 1 << 16;

/// Payload bytes (`--capture-payload`) the events in flight may hold
/// together: with full payloads 65,536 events could otherwise hold ≈ 1 GB.
/// The recorder's memory is bounded by twice `capacity × size_of::<Event>()`
/// (at most 152 B: 19 MiB at the default capacity; the events a sweep took
/// stop counting against the capacity before they are written), the
/// writer's 16-byte sort key of each event it sorts (and the sort's scratch
/// space for as many keys, taken and freed each sweep), plus this (a frame's
/// payload counts until the writer has encoded its line),
/// plus, per recording thread, the spare room of its buffer and one spare
/// buffer the writer keeps for it (at most [`SPARE_EVENTS`] events each),
/// and the file's buffers (five of 1 MiB, each with room for a line of a
/// quarter more; one holding a longer line is freed once written; see
/// `output.rs`). A frame past this payload bound is
/// still recorded, without its payload (`payload_dropped` in the
/// trace, counted in the stats): the frame is what the analysis needs, the
/// bytes are what the writer can shed.
pub const PAYLOAD_BUDGET: u64 = 64 << 20;

/// Room a thread's emptied buffer keeps for its next events; the writer
/// shrinks a larger one (a burst) back to this.
pub const SPARE_EVENTS: usize = 4096;

/// Heap bytes an event holds beyond its fixed size that a peer can make
/// large: a frame's captured payload and its SETTINGS list (a 16 KiB
/// SETTINGS frame is 2,730 entries), a request's path and an RPC's end
/// message (up to the header list size). Counted against the payload
/// budget, so that the recorder's memory is bounded in bytes: uncounted,
/// a flood of large SETTINGS frames held 1.7 GB in events in flight.
fn payload_bytes(kind: &Kind) -> u64 {
    match kind {
        Kind::Frame(f) => {
            f.payload.as_ref().map_or(0, |p| p.0.len() as u64)
                + f.settings
                    .as_ref()
                    .map_or(0, |s| (s.len() * std::mem::size_of::<(u16, u32)>()) as u64)
        }
        Kind::RpcStart(r) => long_text(&r.path),
        Kind::RpcEnd(r) => long_text(&r.message),
        _ => 0,
    }
}

/// A text's bytes when it is longer than [`KEPT_TEXT`]: shorter ones are
/// bounded with the event count (16 MiB over 65,536 events) and cost the
/// transport no shared counter.
fn long_text(text: &str) -> u64 {
    if text.len() > KEPT_TEXT {
        text.len() as u64
    } else {
        0
    }
}

/// Past the payload budget, what an event keeps of its heap: a frame
/// loses its payload and keeps of its SETTINGS only the last value of each
/// setting RFC 9113 defines (what the windows need), marked
/// `payload_dropped`; a path or message keeps its first [`KEPT_TEXT`]
/// bytes and says how many it lost.
fn shed_heap(kind: &mut Kind) {
    match kind {
        Kind::Frame(f) => {
            f.payload = None;
            f.payload_dropped = true;
            if let Some(list) = &mut f.settings {
                let mut last: Vec<(u16, u32)> = Vec::new();
                for &(id, value) in list.iter().filter(|(id, _)| (1..=9).contains(id)) {
                    match last.iter_mut().find(|(i, _)| *i == id) {
                        Some(entry) => entry.1 = value,
                        None => last.push((id, value)),
                    }
                }
                *list = last;
            }
        }
        Kind::RpcStart(r) => shorten(&mut r.path),
        Kind::RpcEnd(r) => shorten(&mut r.message),
        _ => {}
    }
}

/// Of a path or an end message past the payload budget, the bytes kept.
const KEPT_TEXT: usize = 256;

fn shorten(text: &mut String) {
    if text.len() <= KEPT_TEXT {
        return;
    }
    let mut cut = KEPT_TEXT;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let lost = text.len() - cut;
    text.truncate(cut);
    text.push_str(&format!(
        "… ({lost} bytes not kept: the recorder's payload bound was full)"
    ));
}

/// Drops what [`payload_bytes`] counts, once the event is encoded; the
/// bytes given back.
fn free_heap(kind: &mut Kind) -> u64 {
    let bytes = payload_bytes(kind);
    if bytes > 0 {
        match kind {
            Kind::Frame(f) => {
                f.payload = None;
                f.settings = None;
            }
            Kind::RpcStart(r) => r.path = String::new(),
            Kind::RpcEnd(r) => r.message = String::new(),
            _ => {}
        }
    }
    bytes
}

use super::output::{Output, KINDS};

/// One recording thread's events, waiting for the writer.
#[derive(Default)]
struct Slot {
    events: Mutex<SlotEvents>,
    /// Room the thread has reserved in the buffer and not yet used (see
    /// [`Shared::take_credit`]). Only the thread changes it, so plain
    /// loads and stores do; the writer takes it back once the thread is
    /// gone.
    credit: AtomicUsize,
}

#[derive(Default)]
struct SlotEvents {
    events: Vec<Event>,
    /// Set by the writer's last sweep (or a write error): events recorded
    /// after it are counted as dropped, never left behind unseen.
    retired: bool,
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, SlotEvents> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Shared {
    /// Tells this recorder's slots apart in a thread's slot cache.
    id: u64,
    dropped: [AtomicU64; KINDS],
    /// Events the writer's sweeps have taken: with those in flight, every
    /// event accepted (no count of its own on the recording path).
    swept: AtomicU64,
    /// Of those, by kind: taken, and whose lines reached the file. What a
    /// writer that dies of a panic took and never wrote is counted as
    /// dropped from these (its own counts unwind with it).
    taken: [AtomicU64; KINDS],
    written: [AtomicU64; KINDS],
    /// Room reserved in the buffer: events accepted and not yet taken by
    /// the writer, plus what the threads reserved and have not used yet;
    /// and its bound.
    in_flight: AtomicUsize,
    capacity: usize,
    /// Room a thread reserves at once (see [`Shared::take_credit`]).
    credit_block: usize,
    /// The writer thread, woken by producers only when half the capacity
    /// (or half the payload budget) is held: it otherwise wakes on its own
    /// every 2 ms while events come, up to every 64 ms while none do. A
    /// wake-up per event cost ≈ 50 context switches per request.
    writer: std::sync::OnceLock<std::thread::Thread>,
    /// Payload bytes held by events in flight, and their bound.
    payload_in_flight: AtomicU64,
    payload_budget: u64,
    /// Frames recorded without their payload (the budget was full), and
    /// the payload bytes shed.
    payload_dropped_frames: AtomicU64,
    payload_dropped_bytes: AtomicU64,
    /// The most events one sweep took: how far the writer fell behind
    /// (a slow disk, a starved thread), and with it the memory the events
    /// waiting for it held. Only the writer stores it.
    largest_sweep: AtomicUsize,
    /// Every thread's slot; `closed` once the writer's last sweep began.
    slots: Mutex<Registry>,
    /// `finish` asked the writer to stop.
    closing: AtomicBool,
    /// The writer's last sweep began: nothing more is accepted.
    closed: AtomicBool,
}

#[derive(Default)]
struct Registry {
    slots: Vec<Arc<Slot>>,
    closed: bool,
}

thread_local! {
    /// This thread's slot in each recorder it has recorded into.
    static SLOTS: RefCell<Vec<(u64, Arc<Slot>)>> = const { RefCell::new(Vec::new()) };
}

/// A cheap, cloneable handle for recording events. Never blocks.
#[derive(Clone)]
pub struct Recorder {
    enabled: bool,
    shared: Arc<Shared>,
}

pub use h2probe_analysis::meta::RecorderStats;

impl Recorder {
    /// A recorder that records nothing (and counts nothing): for code paths
    /// used without a trace.
    pub fn disabled() -> Recorder {
        Recorder {
            enabled: false,
            shared: Arc::new(Shared::with_capacity(0)),
        }
    }

    /// Whether events are recorded at all (`--no-trace` runs without).
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// The clock, for a stamp that only an event carries: 0 without a
    /// recorder (`--no-trace` reads the clock only where it decides
    /// something; a read is ≈ 60 ns here, ten of them a short request).
    pub fn now(&self) -> u64 {
        if self.enabled {
            super::clock::now_ns()
        } else {
            0
        }
    }

    /// Records an event of kind `id` built by `build`, which is only called
    /// once a slot is reserved: a dropped event is counted under `id` and
    /// never built.
    #[inline]
    pub fn emit(
        &self,
        ep: Endpoint,
        conn: u32,
        stream: u32,
        t: u64,
        id: KindId,
        build: impl FnOnce() -> Kind,
    ) {
        if !self.enabled {
            return;
        }
        let sh = &*self.shared;
        if sh.closed.load(Ordering::Relaxed) {
            sh.drop_one(id);
            return;
        }
        let wake = self.with_slot(|slot, one_off| {
            // Room first (a dropped event is never built), from this
            // thread's reserve.
            let mut wake = false;
            let credit = match slot.credit.load(Ordering::Relaxed) {
                0 => match sh.take_credit(if one_off { 1 } else { sh.credit_block }) {
                    Some((n, half)) => {
                        wake = half;
                        n
                    }
                    None => {
                        sh.drop_one(id);
                        return false;
                    }
                },
                n => n,
            };
            slot.credit.store(credit - 1, Ordering::Relaxed);
            // Built outside the slot's lock: the writer's sweep never waits
            // on a builder, and a builder may record too.
            let (event, payload, shed) = sh.build(ep, conn, stream, t, id, build);
            let mut g = slot.lock();
            if g.retired {
                // The writer's last sweep came meanwhile: nothing more is
                // written (the room it held no longer matters), and a frame
                // not recorded is not one recorded without its payload.
                drop(g);
                sh.payload_in_flight
                    .fetch_sub(payload_bytes(&event.kind), Ordering::Relaxed);
                sh.drop_one(id);
                return false;
            }
            // Counted under the slot's lock: the writer's last sweep (and
            // the counts it then reports) sees the frame and its count both,
            // or neither.
            if shed > 0 {
                sh.payload_dropped_frames.fetch_add(1, Ordering::Relaxed);
                sh.payload_dropped_bytes.fetch_add(shed, Ordering::Relaxed);
            }
            g.events.push(event);
            wake || payload
        });
        if wake {
            sh.wake_writer();
        }
    }

    /// Runs `f` on this thread's slot in this recorder (registered on the
    /// thread's first event; `f`'s second argument: a slot for this one
    /// event). `f` runs inside a shared borrow of the thread-local cache
    /// (a clone of the slot's `Arc` per event was two atomic operations
    /// more): an event builder may record too, into this recorder (a
    /// shared borrow again) or, rarely, into one new to this thread, which
    /// then cannot register and records through a one-event slot.
    fn with_slot<R>(&self, f: impl FnOnce(&Slot, bool) -> R) -> R {
        let sh = &self.shared;
        let mut f = Some(f);
        let done = SLOTS.try_with(|cache| {
            if let Ok(cache) = cache.try_borrow() {
                if let Some((_, slot)) = cache.iter().find(|(id, _)| *id == sh.id) {
                    return Some((f.take().expect("called once"))(slot, false));
                }
            }
            let mut cache = cache.try_borrow_mut().ok()?;
            // Slots of finished recorders (this thread outlived them) go.
            cache.retain(|(_, slot)| Arc::strong_count(slot) > 1);
            let slot = sh.register();
            cache.push((sh.id, slot.clone()));
            drop(cache);
            Some((f.take().expect("called once"))(&slot, false))
        });
        match (done, f) {
            (Ok(Some(r)), _) => r,
            // A thread being torn down (its thread-locals gone), or a
            // builder's event into a recorder new to this thread: a slot of
            // its own for this one event, which takes room for just that
            // one (the writer forgets the slot once swept).
            (_, Some(f)) => f(&sh.register(), true),
            (_, None) => unreachable!("f ran but gave no result"),
        }
    }

    /// Snapshot of the counters (written count known only to the writer).
    pub fn stats(&self) -> RecorderStats {
        // Once closed, the room the threads still hold is no event.
        let closed = self.shared.closed.load(Ordering::Relaxed);
        self.shared.stats(0, closed)
    }
}

impl Shared {
    /// The event, its payload counted against the budget (or shed, past
    /// it); true when the payload held passed half the budget (or was
    /// shed); the payload bytes shed.
    fn build(
        &self,
        ep: Endpoint,
        conn: u32,
        stream: u32,
        t: u64,
        id: KindId,
        build: impl FnOnce() -> Kind,
    ) -> (Event, bool, u64) {
        let mut kind = build();
        debug_assert_eq!(kind.id(), id, "emit's id names the kind it builds");
        let bytes = payload_bytes(&kind);
        let (mut wake, mut shed) = (false, 0);
        if bytes > 0 {
            let before = self.payload_in_flight.fetch_add(bytes, Ordering::Relaxed);
            if before + bytes > self.payload_budget {
                // The writer is behind on payload: keep the event, shed
                // its bytes, and say so in the event and the counts. What
                // it keeps (at most nine settings, or 256 bytes of text)
                // is counted past the budget.
                shed_heap(&mut kind);
                let kept = payload_bytes(&kind);
                self.payload_in_flight
                    .fetch_sub(bytes - kept, Ordering::Relaxed);
                // Counted as the analysis counts it: the frame's bytes.
                if let Kind::Frame(f) = &kind {
                    shed = u64::from(f.len).max(1);
                }
                wake = true;
            } else {
                // Half the payload budget held: as for slots, wake the writer.
                wake = before + bytes > self.payload_budget / 2;
            }
        }
        let event = Event {
            t,
            ep,
            conn,
            stream,
            kind,
        };
        (event, wake, shed)
    }

    /// Reserves buffer room for a thread's next `block` events, or as
    /// many as are left; `None` when the buffer is full. The second value:
    /// the room held just passed half the capacity (wake the writer). One
    /// shared atomic operation per block instead of per event: the
    /// counter's cache line travelled between the two runtime workers on
    /// every event.
    fn take_credit(&self, block: usize) -> Option<(usize, bool)> {
        let half = self.capacity / 2;
        let mut got = 0;
        let held = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                got = block.min(self.capacity.saturating_sub(held));
                (got > 0).then_some(held + got)
            })
            .ok()?;
        Some((got, held < half && held + got >= half))
    }
}

impl Shared {
    fn with_capacity(capacity: usize) -> Shared {
        static IDS: AtomicU64 = AtomicU64::new(0);
        Shared {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            dropped: std::array::from_fn(|_| AtomicU64::new(0)),
            swept: AtomicU64::new(0),
            taken: std::array::from_fn(|_| AtomicU64::new(0)),
            written: std::array::from_fn(|_| AtomicU64::new(0)),
            in_flight: AtomicUsize::new(0),
            capacity,
            // A few threads' unused blocks hold a small part of the buffer.
            credit_block: (capacity / 64).clamp(1, 64),
            writer: std::sync::OnceLock::new(),
            payload_in_flight: AtomicU64::new(0),
            payload_budget: PAYLOAD_BUDGET,
            payload_dropped_frames: AtomicU64::new(0),
            payload_dropped_bytes: AtomicU64::new(0),
            largest_sweep: AtomicUsize::new(0),
            slots: Mutex::new(Registry::default()),
            closing: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    fn drop_one(&self, id: KindId) {
        self.dropped[id.index()].fetch_add(1, Ordering::Relaxed);
    }

    fn wake_writer(&self) {
        if let Some(w) = self.writer.get() {
            w.unpark();
        }
    }

    /// A new slot, retired at once if the writer's last sweep has begun.
    fn register(&self) -> Arc<Slot> {
        let slot = Arc::new(Slot::default());
        let mut reg = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if reg.closed {
            slot.lock().retired = true;
        } else {
            reg.slots.push(slot.clone());
        }
        slot
    }

    /// Takes every slot's events into `into` (the writer's sweep); with
    /// `last`, retires every slot so that nothing can be added behind it.
    /// Slots whose thread has ended are forgotten once emptied.
    fn sweep(&self, into: &mut Swept, spare: &mut Vec<Vec<Event>>, last: bool) {
        let before = into.len();
        let mut reg = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        reg.closed |= last;
        if last {
            self.closed.store(true, Ordering::Relaxed);
        }
        reg.slots.retain(|slot| {
            let mut g = slot.lock();
            // Only the registry holds it: its thread is gone, and no event
            // can follow those taken now. Read under the slot's lock, before
            // taking: read after, it could miss an event the thread pushed
            // in between and then dropped its handle (it happened: one
            // accepted event never written).
            let gone = Arc::strong_count(slot) == 1;
            g.retired |= last;
            if gone {
                // Room reserved and never used goes back (its thread, the
                // only one that changes it, is gone). After the last sweep
                // the room held no longer matters.
                let unused = slot.credit.swap(0, Ordering::Relaxed);
                self.in_flight.fetch_sub(unused, Ordering::Relaxed);
            }
            if last {
                // A retired slot keeps no memory for events: its thread may
                // hold it until it records into another recorder.
                into.take(std::mem::take(&mut g.events));
            } else if !g.events.is_empty() {
                // Room up front: a slot that grows from empty reallocates
                // (and, for a large block, faults fresh pages in) as it fills.
                let fresh = if gone {
                    Vec::new()
                } else {
                    spare
                        .pop()
                        .unwrap_or_else(|| Vec::with_capacity(SPARE_EVENTS / 4))
                };
                into.take(std::mem::replace(&mut g.events, fresh));
            }
            !gone && !last
        });
        into.slots = reg.slots.len();
        let taken = into.len() - before;
        self.swept.fetch_add(taken as u64, Ordering::Relaxed);
        self.in_flight.fetch_sub(taken, Ordering::Relaxed);
    }

    /// The writer died (a panic): nothing more is accepted, and every event
    /// it took or would have taken and did not write is dropped, by kind
    /// (accepted = written, as after a write error).
    fn account_for_a_dead_writer(&self) {
        let mut rest = Swept::default();
        self.sweep(&mut rest, &mut Vec::new(), true);
        for e in rest.iter() {
            self.taken[e.kind.index()].fetch_add(1, Ordering::Relaxed);
        }
        drop(rest);
        let mut lost_total = self.swept.load(Ordering::Relaxed);
        let mut known = 0;
        for i in 0..KINDS {
            let written = self.written[i].load(Ordering::Relaxed);
            // (Saturating: this runs while the thread unwinds, where a
            // second panic would abort the process.)
            lost_total = lost_total.saturating_sub(written);
            let lost = self.taken[i]
                .load(Ordering::Relaxed)
                .saturating_sub(written);
            self.dropped[i].fetch_add(lost, Ordering::Relaxed);
            known += lost;
        }
        // Taken in the moment before the panic, kind not yet counted.
        self.dropped[KINDS - 1].fetch_add(lost_total.saturating_sub(known), Ordering::Relaxed);
        self.swept.fetch_sub(lost_total, Ordering::Relaxed);
        // No event holds a payload any more.
        self.payload_in_flight.store(0, Ordering::Relaxed);
    }

    /// Lines that reached the file, all kinds.
    fn written_total(&self) -> u64 {
        self.written.iter().map(|w| w.load(Ordering::Relaxed)).sum()
    }

    /// The counts; `after_last_sweep`: events still in flight were recorded
    /// after the last sweep and are being counted as dropped, so accepted is
    /// what the sweeps took.
    fn stats(&self, written: u64, after_last_sweep: bool) -> RecorderStats {
        // In flight: reserved room less what the threads have not used.
        let in_flight = if after_last_sweep {
            0
        } else {
            let reg = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let unused: usize = reg
                .slots
                .iter()
                .map(|s| s.credit.load(Ordering::Relaxed))
                .sum();
            self.in_flight
                .load(Ordering::Relaxed)
                .saturating_sub(unused) as u64
        };
        let mut dropped = std::collections::BTreeMap::new();
        for (i, c) in self.dropped.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            if n > 0 {
                let name = Kind::NAMES.get(i).copied().unwrap_or("unknown");
                dropped.insert(name.to_string(), n);
            }
        }
        RecorderStats {
            // Taken by the writer, plus (while it runs) those in flight.
            accepted: self.swept.load(Ordering::Relaxed) + in_flight,
            written,
            dropped,
            payload_dropped_frames: self.payload_dropped_frames.load(Ordering::Relaxed),
            payload_dropped_bytes: self.payload_dropped_bytes.load(Ordering::Relaxed),
            largest_sweep: self.largest_sweep.load(Ordering::Relaxed) as u64,
            file_io: None,
        }
    }
}

/// Owns the writer thread. Call [`TraceWriter::finish`] to flush, write the
/// footer and get the final counts.
pub struct TraceWriter {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<Result<RecorderStats, WriteError>>>,
    /// Disconnects when the writer thread ends.
    done: std::sync::mpsc::Receiver<()>,
    path: PathBuf,
    anchor: h2probe_analysis::meta::ClockAnchor,
    failed: tokio::sync::watch::Receiver<Option<WriterFailure>>,
}

/// The trace file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {cause}")]
pub struct WriteError {
    pub path: String,
    pub cause: std::io::Error,
    /// The recorder's counts once the writer stopped: `written` is what
    /// reached the file, every other event offered is counted as dropped.
    pub stats: RecorderStats,
}

impl TraceWriter {
    /// Creates `path`, writes the header line and starts the writer thread.
    pub fn create(path: &Path, capacity: usize) -> Result<(TraceWriter, Recorder), WriteError> {
        TraceWriter::create_bounded(path, capacity, PAYLOAD_BUDGET, None)
    }

    /// [`TraceWriter::create`] with its own payload budget (bytes in
    /// flight; `--trace-payload-buffer`) and, with `stop_at`, a size at
    /// which [`TraceWriter::failures`] asks the commands to stop the run
    /// (`--trace-limit`; the writer goes on writing what the stop records).
    pub fn create_bounded(
        path: &Path,
        capacity: usize,
        payload_budget: u64,
        stop_at: Option<u64>,
    ) -> Result<(TraceWriter, Recorder), WriteError> {
        let err = |cause| WriteError {
            path: path.display().to_string(),
            cause,
            stats: RecorderStats::default(),
        };
        // Fault injection for the tests of a failing disk (documented in
        // the README's test section, not a user knob): the file fails with
        // ENOSPC after this many bytes.
        let limit = std::env::var("H2PROBE_FAULT_TRACE_FULL_AFTER")
            .ok()
            .and_then(|v| v.parse::<u64>().ok());
        TraceWriter::create_limited(path, capacity, payload_budget, limit, stop_at).map_err(err)
    }

    /// [`TraceWriter::create_bounded`] onto a file that fills up after
    /// `limit` bytes (fault injection).
    fn create_limited(
        path: &Path,
        capacity: usize,
        payload_budget: u64,
        limit: Option<u64>,
        stop_at: Option<u64>,
    ) -> std::io::Result<(TraceWriter, Recorder)> {
        let out = Output::create(path, limit)?;
        TraceWriter::start_bounded(out, path, capacity, payload_budget, stop_at)
    }

    /// Like [`TraceWriter::create`] but onto any writer (`path` names it in errors).
    pub fn start(
        out: Box<dyn Write + Send>,
        path: &Path,
        capacity: usize,
    ) -> std::io::Result<(TraceWriter, Recorder)> {
        TraceWriter::start_bounded(Output::stream(out)?, path, capacity, PAYLOAD_BUDGET, None)
    }

    /// Starts the writer thread onto `out` with its own payload budget
    /// (bytes) and the size at which it asks for the run to stop.
    fn start_bounded(
        out: Output,
        path: &Path,
        capacity: usize,
        payload_budget: u64,
        stop_at: Option<u64>,
    ) -> std::io::Result<(TraceWriter, Recorder)> {
        let (mono, wall) = super::clock::anchor();
        let header = Header {
            schema: SCHEMA_VERSION,
            tool: format!("h2probe {}", env!("CARGO_PKG_VERSION")),
            clock: "CLOCK_MONOTONIC".into(),
            origin_mono_ns: mono,
            origin_unix_ns: wall,
        };
        let anchor = h2probe_analysis::meta::ClockAnchor {
            clock: header.clock.clone(),
            origin_mono_ns: header.origin_mono_ns,
            origin_unix_ns: header.origin_unix_ns,
        };
        let shared = Arc::new(Shared {
            payload_budget,
            ..Shared::with_capacity(capacity.max(1))
        });
        let path_s = path.display().to_string();
        let thread_shared = shared.clone();
        let (fail_tx, failed) = tokio::sync::watch::channel(None);
        // Dropped when the thread ends: what `Drop for TraceWriter` waits on.
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("h2probe-trace".into())
            .spawn(move || {
                let _done = done_tx;
                let alarm_path = path_s.clone();
                let _alarm = PanicAlarm {
                    fail_tx: &fail_tx,
                    shared: &thread_shared,
                    path: &alarm_path,
                };
                // Said once, as a write error is; the writer goes on.
                let limit_reached = |size: u64| {
                    let _ = fail_tx.send(Some(WriterFailure {
                        cause: "--trace-limit reached",
                        message: format!(
                            "the trace reached --trace-limit {} ({size} bytes written), so the run was stopped; \
                             {path_s} holds every event up to the stop, and its footer",
                            indicatif::HumanBytes(stop_at.unwrap_or(size))
                        ),
                    }));
                };
                let stop_at = stop_at.map(|at| (at, &limit_reached as &dyn Fn(u64)));
                write_loop(out, header, &thread_shared, stop_at).map_err(|(cause, stats)| {
                    let _ = fail_tx.send(Some(WriterFailure {
                        cause: "the trace could not be written",
                        message: format!(
                            "writing {path_s}: {cause} after {} events were written whole (the file holds them, then part of the block being written when it failed, up to its last complete line: `analyze` counts them)",
                            stats.written
                        ),
                    }));
                    WriteError {
                        path: path_s,
                        cause,
                        stats,
                    }
                })
            })?;
        let _ = shared.writer.set(thread.thread().clone());
        let rec = Recorder {
            enabled: true,
            shared: shared.clone(),
        };
        Ok((
            TraceWriter {
                shared,
                thread: Some(thread),
                done,
                path: path.to_path_buf(),
                anchor,
                failed,
            },
            rec,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Becomes `Some` when writing the trace fails (disk full, I/O error)
    /// or reaches `--trace-limit`: the commands stop the run within a
    /// moment instead of recording into the void.
    pub fn failures(&self) -> tokio::sync::watch::Receiver<Option<WriterFailure>> {
        self.failed.clone()
    }

    /// The clock anchor written in the trace header (for meta.json: kept
    /// here so nobody re-reads the trace to learn it).
    pub fn anchor(&self) -> h2probe_analysis::meta::ClockAnchor {
        self.anchor.clone()
    }

    /// Drains every accepted event, writes the footer, flushes and joins the
    /// thread. Events recorded after this are counted as dropped. It blocks
    /// until the file is written; in async code prefer `spawn_blocking`.
    pub fn finish(mut self) -> Result<RecorderStats, WriteError> {
        self.shared.closing.store(true, Ordering::Release);
        self.shared.wake_writer();
        match self.thread.take().map(|t| t.join()) {
            // The counts the footer holds: one snapshot for both.
            Some(Ok(Ok(stats))) => Ok(stats),
            // No footer: the counts as of now, events dropped since the
            // writer stopped included.
            Some(Ok(Err(mut e))) => {
                e.stats = self.shared.stats(e.stats.written, true);
                Err(e)
            }
            Some(Err(_)) => Err(WriteError {
                path: self.path.display().to_string(),
                cause: std::io::Error::other("trace writer thread panicked"),
                stats: self.shared.stats(self.shared.written_total(), true),
            }),
            None => Ok(self.shared.stats(0, false)),
        }
    }
}

impl Drop for TraceWriter {
    /// Dropped without [`TraceWriter::finish`] (an error path): the writer
    /// still drains what was accepted and ends the file with its footer.
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.shared.closing.store(true, Ordering::Release);
            self.shared.wake_writer();
            // Wait for it (the process may exit right after this), but not
            // forever: a disk that hangs must not hang the error path.
            let _ = self.done.recv_timeout(std::time::Duration::from_secs(5));
        }
    }
}

/// The trace file and the lines on their way to it.
struct Sink<'a> {
    shared: &'a Shared,
    /// Lines are encoded straight into its buffers, which an I/O thread
    /// writes; an event counts as written once its line reached the file.
    out: Output,
}

impl Sink<'_> {
    fn push(&mut self, e: &Event) -> std::io::Result<()> {
        h2probe_analysis::jsonl::write_event(self.out.buf(), e);
        if self.out.line(Some(e.kind.index()))? {
            // Counted at once: a writer that dies next must not take
            // lines in the file for lost ones.
            self.credit();
        }
        Ok(())
    }

    /// The header or the footer (not an event).
    fn text_line(&mut self, line: &str) -> std::io::Result<()> {
        let buf = self.out.buf();
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        self.out.line(None).map(drop)
    }

    /// Counts what reached the file so far (with `wait`, once every write
    /// in flight is done); the first write error.
    fn reap(&mut self, wait: bool) -> std::io::Result<()> {
        self.out.reap(wait);
        self.credit();
        self.out.check()
    }

    /// Writes what the buffer holds (a killed run loses only what came
    /// after); with `wait`, until it is in the file.
    fn flush(&mut self, wait: bool) -> std::io::Result<()> {
        self.out.flush()?;
        self.reap(wait)
    }

    fn credit(&mut self) {
        for (n, w) in self.out.take_written().iter().zip(&self.shared.written) {
            if *n > 0 {
                w.fetch_add(*n, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for Sink<'_> {
    /// A writer that dies of a panic (a bug) leaves writes in flight that
    /// the I/O thread still completes: their lines are in the file, so they
    /// count as written before the dead writer's accounting (which drops
    /// what was taken and not written) runs.
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.out.reap(true);
            self.credit();
        }
    }
}

/// One sweep's events: each slot's buffer as it was taken (appending them
/// into one vector copied every event once more).
#[derive(Default)]
struct Swept {
    blocks: Vec<Vec<Event>>,
    /// Slots left after the sweep: spares beyond one each (threads that
    /// came and went) are freed.
    slots: usize,
}

impl Swept {
    fn take(&mut self, block: Vec<Event>) {
        if !block.is_empty() {
            self.blocks.push(block);
        }
    }

    fn len(&self) -> usize {
        self.blocks.iter().map(Vec::len).sum()
    }

    fn iter(&self) -> impl Iterator<Item = &Event> {
        self.blocks.iter().flatten()
    }

    /// Drops the events and keeps the emptied buffers as spares for the
    /// slots, at most one a slot (a burst's large one shrunk back to
    /// [`SPARE_EVENTS`]).
    fn recycle(&mut self, spare: &mut Vec<Vec<Event>>) {
        // Threads that ended leave spares behind: beyond one a slot they go.
        spare.truncate(self.slots);
        for mut block in self.blocks.drain(..) {
            if spare.len() >= self.slots {
                continue;
            }
            block.clear();
            if block.capacity() > SPARE_EVENTS {
                block = Vec::with_capacity(SPARE_EVENTS / 4);
            }
            spare.push(block);
        }
    }
}

/// The writer thread's loop; `stop_at`: the trace size at which to call
/// its function (once) to have the run stopped.
fn write_loop(
    out: Output,
    header: Header,
    shared: &Shared,
    mut stop_at: Option<(u64, &dyn Fn(u64))>,
) -> Result<RecorderStats, (std::io::Error, RecorderStats)> {
    let mut sink = Sink { shared, out };
    // Past `stop_at`, frames are written without their payload (counted as
    // shed, as when the payload budget is full): the events of the stop and
    // those the recorder still holds stay whole and cost little more.
    let mut past_limit = false;
    // Flushed at least this often while events arrive, so a full disk is
    // noticed (and a killed run loses little) even at low event rates.
    let flush_every = std::time::Duration::from_millis(200);
    let mut flushed = std::time::Instant::now();
    let mut swept = Swept::default();
    let mut spare: Vec<Vec<Event>> = Vec::new();
    // A sweep's events in `t` order, as (t, block, index) into `swept`:
    // sorting the events themselves moved every one (152 bytes each), and
    // the sort's scratch space held copies of them.
    let mut order: Vec<(u64, u32, u32)> = Vec::new();
    // Of `order`, how many are in the batch or the file.
    let mut encoded = 0;
    let result = (|| {
        sink.text_line(&header.to_line())?;
        // Sweep the threads' slots, write what they held, then sleep until
        // woken (half-full, or finish) or for a few milliseconds; longer,
        // up to 64 ms, while sweeps find nothing (an idle server woke its
        // writer 500 times a second).
        const NAP: std::time::Duration = std::time::Duration::from_millis(2);
        const IDLE_NAP: std::time::Duration = std::time::Duration::from_millis(64);
        let mut nap = NAP;
        loop {
            let last = shared.closing.load(Ordering::Acquire);
            shared.sweep(&mut swept, &mut spare, last);
            // Each slot is in its thread's order; one sweep's events in `t`
            // order (equal stamps keep their thread's order: block and index
            // are the next keys).
            // (Pairs, not indices looked up in each comparison: a lookup is
            // a cache miss apart.)
            // The same pass counts what was taken, by kind (for a writer
            // that dies: see `account_for_a_dead_writer`).
            let mut taken = [0u64; KINDS];
            order.clear();
            for (b, block) in (0u32..).zip(&swept.blocks) {
                order.extend(block.iter().zip(0u32..).map(|(e, i)| {
                    taken[e.kind.index()] += 1;
                    (e.t, b, i)
                }));
            }
            for (n, t) in taken.iter().zip(&shared.taken) {
                if *n > 0 {
                    t.fetch_add(*n, Ordering::Relaxed);
                }
            }
            if order.len() > shared.largest_sweep.load(Ordering::Relaxed) {
                shared.largest_sweep.store(order.len(), Ordering::Relaxed);
            }
            // The stable sort: it finds the runs each thread's block
            // already is (a key is unique, so stability changes nothing) and
            // merges them; the unstable one partitions as if they were not
            // there. 1.6–2.5× faster on a sweep of 2–3 such blocks
            // (bench/2026-12-01-sweep-sort.txt).
            order.sort();
            for (n, &(_, b, i)) in order.iter().enumerate() {
                encoded = n + 1;
                let e = &mut swept.blocks[b as usize][i as usize];
                if past_limit {
                    shed_payload(e, shared);
                }
                sink.push(e)?;
                if let Some((at, limit_reached)) = stop_at {
                    let size = sink.out.encoded();
                    if size >= at {
                        limit_reached(size);
                        stop_at = None;
                        past_limit = true;
                    }
                }
                // Its payload is in the batch now (as base64): the bytes go
                // at once, and their room in the budget with them. (Given
                // back for the whole sweep before it was written, the
                // transport could fill the budget again meanwhile: twice
                // the bound held, a full-capture run peaked at 200 MB.)
                let freed = free_heap(&mut e.kind);
                if freed > 0 {
                    shared.payload_in_flight.fetch_sub(freed, Ordering::Relaxed);
                }
            }
            swept.recycle(&mut spare);
            // What reached the file counts as written; a failed write
            // stops the run now, not at the next flush.
            sink.reap(false)?;
            nap = if order.is_empty() {
                (nap * 2).min(IDLE_NAP)
            } else {
                NAP
            };
            order.clear();
            encoded = 0;
            if last {
                break;
            }
            if flushed.elapsed() >= flush_every {
                sink.flush(false)?;
                flushed = std::time::Instant::now();
            }
            std::thread::park_timeout(nap);
        }
        // The footer counts the lines in the file: all of them first.
        sink.flush(true)?;
        let written = shared.written_total();
        let mut stats = shared.stats(written, true);
        stats.file_io = sink.out.file_io();
        let footer = Footer {
            events: written,
            dropped: stats.dropped.clone(),
        };
        sink.text_line(&footer.to_line())?;
        sink.flush(true)?;
        Ok::<_, std::io::Error>(stats)
    })();
    result.map_err(|e| {
        // Stop accepting (later events count as dropped). What was taken
        // and never reached the file is dropped too, not accepted.
        // Encoded lines whose writes failed or were never made (waiting
        // for those in flight: some may yet reach the file).
        let mut unwritten = sink.out.settle();
        sink.credit();
        for &(_, b, i) in order.iter().skip(encoded) {
            unwritten[swept.blocks[b as usize][i as usize].kind.index()] += 1;
        }
        // Payload not yet written (the failed event's included) is gone too.
        let left: u64 = swept.iter().map(|e| payload_bytes(&e.kind)).sum();
        shared.payload_in_flight.fetch_sub(left, Ordering::Relaxed);
        swept.blocks.clear();
        shared.sweep(&mut swept, &mut spare, true);
        let freed: u64 = swept.iter().map(|e| payload_bytes(&e.kind)).sum();
        shared.payload_in_flight.fetch_sub(freed, Ordering::Relaxed);
        for ev in swept.iter() {
            unwritten[ev.kind.index()] += 1;
        }
        swept.blocks.clear();
        for (i, n) in unwritten.iter().enumerate() {
            shared.dropped[i].fetch_add(*n, Ordering::Relaxed);
        }
        shared
            .swept
            .fetch_sub(unwritten.iter().sum(), Ordering::Relaxed);
        let mut stats = shared.stats(shared.written_total(), true);
        stats.file_io = sink.out.file_io();
        (e, stats)
    })
}

/// Writes a frame without its captured payload, counted as shed (the
/// trace says `payload_dropped`, meta.json and the analysis count it).
fn shed_payload(e: &mut Event, shared: &Shared) {
    if let Kind::Frame(f) = &mut e.kind {
        if let Some(p) = f.payload.take() {
            let len = p.0.len() as u64;
            shared.payload_in_flight.fetch_sub(len, Ordering::Relaxed);
            shared
                .payload_dropped_frames
                .fetch_add(1, Ordering::Relaxed);
            shared
                .payload_dropped_bytes
                .fetch_add(len, Ordering::Relaxed);
            f.payload_dropped = true;
        }
    }
}

/// Why the writer asked for the run to stop.
#[derive(Clone, Debug)]
pub struct WriterFailure {
    /// A few words, for where the stop is recorded per RPC (the client's
    /// `rpc_end`): `--trace-limit reached`, `the trace could not be
    /// written`, `the trace writer failed`.
    pub cause: &'static str,
    /// The whole story, for stderr and meta.json.
    pub message: String,
}

/// Says so when the writer thread dies of a panic (a bug), as a write
/// error does: the commands stop the run instead of recording into slots
/// nobody sweeps, and later events count as dropped.
struct PanicAlarm<'a> {
    fail_tx: &'a tokio::sync::watch::Sender<Option<WriterFailure>>,
    shared: &'a Shared,
    path: &'a str,
}

impl Drop for PanicAlarm<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.shared.account_for_a_dead_writer();
            let _ = self.fail_tx.send(Some(WriterFailure {
                cause: "the trace writer failed",
                message: format!(
                    "writing {}: the trace writer thread panicked (a bug); the file holds the events up to its last complete line",
                    self.path
                ),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::schema::{ChunkEv, Dir, FrameEv, FrameType, RpcEndEv, RpcStartEv};
    use h2probe_analysis::reader::{Ending, TraceReader};

    /// Records a `chunk` event of `len` bytes on connection 1.
    fn chunk(rec: &Recorder, ep: Endpoint, stream: u32, t: u64, len: u32) {
        rec.emit(ep, 1, stream, t, KindId::Chunk, || {
            Kind::Chunk(ChunkEv { len })
        });
    }

    /// The events and the footer of a trace a test here wrote, parsed line
    /// by line without the reader's judgement: these tests stamp small
    /// `t`s of their own, before the writer's clock origin, which a reader
    /// takes for damage.
    fn written(path: &Path) -> (Vec<Event>, Option<Footer>) {
        use h2probe_analysis::schema::Line;
        let text = std::fs::read_to_string(path).unwrap();
        let (mut events, mut footer) = (vec![], None);
        for line in text.lines() {
            match Line::parse(line).unwrap() {
                Line::Event(e) => events.push(e),
                Line::Footer(f) => footer = Some(f),
                Line::Header(_) => {}
            }
        }
        (events, footer)
    }

    /// A trace file of the test's own: the tests of this module run in
    /// parallel in one process (two once shared a name).
    fn temp_trace(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("h2probe-{name}-{}.jsonl", std::process::id()))
    }

    #[test]
    fn flood_beyond_capacity_never_blocks_and_counts_every_drop() {
        let dir = std::env::temp_dir().join(format!("h2probe-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.jsonl");
        let (writer, rec) = TraceWriter::create(&path, 64).unwrap();
        let n = 200_000u64;
        for i in 0..n {
            chunk(&rec, Endpoint::Server, 1, i, i as u32);
        }
        let stats = writer.finish().unwrap();
        assert_eq!(stats.accepted + stats.dropped_total(), n, "{stats:?}");
        assert_eq!(stats.written, stats.accepted);
        // With 64 slots and a tight loop, the writer cannot keep up.
        assert!(stats.dropped_total() > 0, "{stats:?}");
        assert_eq!(stats.dropped.keys().collect::<Vec<_>>(), vec!["chunk"]);

        let (events, footer) = written(&path);
        let mut count = 0;
        let mut last_t = None;
        for e in events {
            assert!(last_t.is_none_or(|t| e.t > t), "order kept");
            last_t = Some(e.t);
            count += 1;
        }
        assert_eq!(count, stats.written);
        let f = footer.expect("a footer");
        assert_eq!(f.events, stats.written);
        assert_eq!(f.dropped, stats.dropped);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Many short-lived threads, each recording a few events and ending
    /// while the writer sweeps: none of their events may be left in a slot
    /// the writer forgets (accepted = written, nothing dropped).
    #[test]
    fn events_of_threads_that_end_during_a_sweep_are_all_written() {
        let path = temp_trace("ending");
        let (writer, rec) = TraceWriter::create(&path, 1 << 16).unwrap();
        // A sweep copies what it took before it looks at the slot again: a
        // burst makes that copy long, and a thread ending inside it is the
        // case that once lost an event.
        let spawners: Vec<_> = (0..4u32)
            .map(|s| {
                let rec = rec.clone();
                std::thread::spawn(move || {
                    for i in 0..60u32 {
                        let rec = rec.clone();
                        std::thread::spawn(move || {
                            for k in 0..2_000 {
                                rec.emit(
                                    Endpoint::Server,
                                    s,
                                    i,
                                    u64::from(k),
                                    KindId::Chunk,
                                    || Kind::Chunk(ChunkEv { len: k }),
                                );
                            }
                        })
                        .join()
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in spawners {
            t.join().unwrap();
        }
        // Bursts may outrun the writer (drops are counted); what is
        // accepted must be written.
        let stats = writer.finish().unwrap();
        assert_eq!(stats.accepted + stats.dropped_total(), 480_000, "{stats:?}");
        assert_eq!(stats.written, stats.accepted, "{stats:?}");
        std::fs::remove_file(&path).unwrap();
    }

    /// Threads that record and end, on a shared clock: every accepted event
    /// is written once (a finished thread's slot too), each thread's events
    /// in its own order, and each sweep's events in `t` order.
    #[test]
    fn events_of_many_threads_are_all_written_in_each_threads_order() {
        let path = temp_trace("threads");
        let (writer, rec) = TraceWriter::create(&path, 1 << 16).unwrap();
        let clock = Arc::new(AtomicU64::new(1));
        let threads: Vec<_> = (0..4u32)
            .map(|th| {
                let (rec, clock) = (rec.clone(), clock.clone());
                std::thread::spawn(move || {
                    for i in 0..5_000u32 {
                        let t = clock.fetch_add(1, Ordering::Relaxed);
                        rec.emit(Endpoint::Server, th, 1, t, KindId::Chunk, || {
                            Kind::Chunk(ChunkEv { len: i })
                        });
                        if i % 1000 == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(3));
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // The threads are gone; what they left in their slots is written.
        let stats = writer.finish().unwrap();
        assert_eq!(stats.dropped_total(), 0, "{stats:?}");
        assert_eq!(stats.accepted, 20_000);
        assert_eq!(stats.written, 20_000);
        let mut next = [0u32; 4];
        let mut inversions = 0;
        let mut last_t = 0;
        for e in written(&path).0 {
            let Kind::Chunk(c) = e.kind else {
                panic!("{e:?}")
            };
            assert_eq!(c.len, next[e.conn as usize], "thread {}'s order", e.conn);
            next[e.conn as usize] += 1;
            inversions += usize::from(e.t < last_t);
            last_t = e.t;
        }
        assert_eq!(next, [5_000; 4]);
        // Only an event stamped before a sweep and recorded after it can
        // come later in the file than a later stamp.
        assert!(inversions < 100, "{inversions} inversions");
        std::fs::remove_file(&path).unwrap();
    }

    /// A writer whose output blocks its first write of at least `min_len`
    /// bytes until told: `blocked` says it is stuck there, a send on `go`
    /// lets it on.
    struct Gated {
        writer: TraceWriter,
        rec: Recorder,
        blocked: std::sync::mpsc::Receiver<()>,
        go: std::sync::mpsc::Sender<()>,
    }

    fn gated_writer(min_len: usize, capacity: usize, payload_budget: u64) -> Gated {
        gated(min_len, capacity, payload_budget, false)
    }

    /// [`gated_writer`], whose stuck write fails when let on (`fail`): the
    /// disk filled while the writer was mid-sweep.
    fn gated(min_len: usize, capacity: usize, payload_budget: u64, fail: bool) -> Gated {
        use std::sync::mpsc;
        struct Gate {
            min_len: usize,
            blocked: mpsc::Sender<()>,
            go: mpsc::Receiver<()>,
            once: bool,
            fail: bool,
        }
        impl Write for Gate {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.once && self.fail {
                    return Err(std::io::Error::from_raw_os_error(28));
                }
                if buf.len() >= self.min_len && !self.once {
                    self.once = true;
                    let _ = self.blocked.send(());
                    let _ = self.go.recv();
                    if self.fail {
                        return Err(std::io::Error::from_raw_os_error(28));
                    }
                }
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (blocked_tx, blocked) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let gate = Gate {
            min_len,
            blocked: blocked_tx,
            go: go_rx,
            once: false,
            fail,
        };
        let (writer, rec) = TraceWriter::start_bounded(
            Output::stream(Box::new(gate)).unwrap(),
            Path::new("gate"),
            capacity,
            payload_budget,
            None,
        )
        .unwrap();
        Gated {
            writer,
            rec,
            blocked,
            go,
        }
    }

    /// `largest_sweep` says how far the writer fell behind: the events that
    /// came while its write was stuck are all taken by the next sweep.
    #[test]
    fn the_largest_sweep_counts_what_waited_for_a_stuck_writer() {
        // Stuck in its first write (the first flush).
        let Gated {
            writer,
            rec,
            blocked,
            go,
        } = gated_writer(0, 1 << 12, 1 << 20);
        chunk(&rec, Endpoint::Client, 1, 0, 1);
        blocked
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the writer flushed its first event");
        for i in 1..=1000 {
            chunk(&rec, Endpoint::Client, 1, i, 1);
        }
        go.send(()).unwrap();
        let stats = writer.finish().unwrap();
        assert_eq!(
            (stats.written, stats.dropped_total()),
            (1001, 0),
            "{stats:?}"
        );
        // (1001 if the first flush came before the first event was swept:
        // a test thread stalled for 200 ms.)
        assert!((1000..=1001).contains(&stats.largest_sweep), "{stats:?}");
    }

    #[test]
    fn payload_the_writer_has_taken_but_not_encoded_still_counts_against_the_budget() {
        // Stuck in the first large write (a full batch, mid-sweep).
        let Gated {
            writer,
            rec,
            blocked,
            go,
        } = gated_writer(100_001, 1 << 12, 1 << 20);
        let frames = |from: u64| {
            for i in 0..40 {
                rec.emit(Endpoint::Client, 1, 1, from + i, KindId::Frame, || {
                    data_frame(16 << 10)
                });
            }
        };
        // 640 KiB: the writer takes them in one sweep and stops at its
        // first full batch (≈ 12 lines), holding the rest unencoded.
        frames(0);
        blocked
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the writer reached its first full batch");
        // 640 KiB more: with the ≈ 450 KiB the writer still holds, past the
        // 1 MiB budget, so some must be shed.
        frames(100);
        let shed = rec.stats().payload_dropped_frames;
        go.send(()).unwrap();
        let stats = writer.finish().unwrap();
        assert!(
            shed > 0,
            "nothing shed while the writer held payload: {stats:?}"
        );
        assert_eq!(stats.written, 80, "{stats:?}");
        assert_eq!(stats.payload_dropped_frames, shed);
    }

    /// A write that fails while the writer is mid-sweep: the payload of
    /// the events it had encoded went with them (their room given back
    /// once), and that of the rest is given back as they are dropped, so
    /// the budget is whole again.
    #[test]
    fn a_write_failing_mid_sweep_gives_back_each_events_payload_once() {
        let Gated {
            writer,
            rec,
            blocked,
            go,
        } = gated(100_001, 1 << 12, 1 << 20, true);
        let shared = writer.shared.clone();
        // A long path and end message first (their text counts too), then
        // frames enough for several batches.
        rec.emit(Endpoint::Client, 1, 1, 0, KindId::RpcStart, || {
            start_with_path(1_000)
        });
        rec.emit(Endpoint::Client, 1, 1, 1, KindId::RpcEnd, || {
            end_with_message(1_000)
        });
        for i in 2..42 {
            rec.emit(Endpoint::Client, 1, 1, i, KindId::Frame, || {
                data_frame(16 << 10)
            });
        }
        blocked
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the writer reached its first full batch");
        go.send(()).unwrap();
        let st = writer.finish().unwrap_err().stats;
        assert_eq!(st.accepted + st.dropped_total(), 42, "{st:?}");
        assert!(st.dropped["frame"] > 0, "{st:?}");
        assert_eq!(shared.payload_in_flight.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_writer_that_panics_says_so_and_later_events_count_as_dropped() {
        struct Bomb;
        impl Write for Bomb {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                panic!("the writer's bug");
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (writer, rec) = TraceWriter::start(Box::new(Bomb), Path::new("bomb"), 1024).unwrap();
        let mut failures = writer.failures();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while failures.borrow_and_update().is_none() {
            assert!(std::time::Instant::now() < deadline, "no failure reported");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let failure = failures.borrow().clone().unwrap();
        let msg = failure.message;
        assert!(msg.contains("bomb") && msg.contains("panicked"), "{msg}");
        assert_eq!(failure.cause, "the trace writer failed");
        chunk(&rec, Endpoint::Server, 1, 1, 1);
        let err = writer.finish().unwrap_err();
        assert!(err.to_string().contains("panicked"), "{err}");
        assert_eq!(err.stats.dropped.get("chunk"), Some(&1), "{:?}", err.stats);
    }

    /// A writer that dies mid-run: what reached the file is `written`, and
    /// everything else offered is dropped by kind: none counted accepted
    /// and lost, none left holding the payload budget.
    #[test]
    fn a_writer_that_panics_mid_run_accounts_for_every_event() {
        /// Writes `left` bytes to memory, then panics.
        struct Fuse {
            kept: Arc<Mutex<Vec<u8>>>,
            left: usize,
        }
        impl Write for Fuse {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if buf.len() > self.left {
                    panic!("the writer's bug");
                }
                self.left -= buf.len();
                self.kept.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let kept = Arc::new(Mutex::new(Vec::new()));
        let fuse = Fuse {
            kept: kept.clone(),
            left: 600 << 10,
        };
        let (writer, rec) = TraceWriter::start(Box::new(fuse), Path::new("fuse"), 1 << 14).unwrap();
        let mut failures = writer.failures();
        let n = 40_000u64;
        for i in 0..n {
            chunk(&rec, Endpoint::Server, 1, i, i as u32);
            rec.emit(Endpoint::Server, 1, 1, i, KindId::Frame, || data_frame(100));
            if i % 1000 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while failures.borrow_and_update().is_none() {
            assert!(std::time::Instant::now() < deadline, "no failure reported");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let st = writer.finish().unwrap_err().stats;
        let lines = kept.lock().unwrap().iter().filter(|&&b| b == b'\n').count() as u64 - 1;
        assert!(
            st.written > 0 && st.written == lines,
            "{lines} lines, {st:?}"
        );
        assert_eq!(st.accepted, st.written, "{st:?}");
        assert_eq!(st.accepted + st.dropped_total(), 2 * n, "{st:?}");
        assert!(st.dropped["chunk"] > 0 && st.dropped["frame"] > 0, "{st:?}");
        // Every event the dead writer had taken is dropped by its kind.
        assert!(!st.dropped.contains_key("unknown"), "{st:?}");
        assert_eq!(rec.shared.payload_in_flight.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn events_with_equal_stamps_keep_their_threads_order() {
        // Stamped in descending runs of equal `t`: the sweep's sort must
        // move every run, and keep each run in the order it was recorded.
        let path = temp_trace("ties");
        let (writer, rec) = TraceWriter::create(&path, 1 << 16).unwrap();
        let n = 20_000u32;
        for i in 0..n {
            let t = u64::from((n - 1 - i) / 16);
            chunk(&rec, Endpoint::Server, 1, t, i);
        }
        let stats = writer.finish().unwrap();
        assert_eq!(stats.written, u64::from(n), "{stats:?}");
        let mut last: Option<(u64, u32)> = None;
        let mut seen = 0;
        for e in written(&path).0 {
            let Kind::Chunk(c) = e.kind else {
                panic!("{e:?}")
            };
            if let Some((t, len)) = last {
                if t == e.t {
                    assert!(c.len > len, "t {t}: {} after {len}", c.len);
                }
            }
            last = Some((e.t, c.len));
            seen += 1;
        }
        assert_eq!(seen, n);
        std::fs::remove_file(&path).unwrap();
    }

    fn data_frame(payload: usize) -> Kind {
        use crate::trace::schema::{Dir, FrameEv, FrameType};
        Kind::Frame(FrameEv {
            dir: Dir::In,
            offset: 0,
            frame: FrameType::DATA,
            flags: 0,
            len: payload as u32,
            reserved: false,
            field_reserved: false,
            pad: 0,
            increment: None,
            settings: None,
            error_code: None,
            last_stream: None,
            promised: None,
            priority: None,
            opaque: None,
            payload: Some(crate::trace::schema::Payload(vec![b'x'; payload])),
            payload_dropped: false,
        })
    }

    /// An RPC's start whose path is `len` bytes long.
    fn start_with_path(len: usize) -> Kind {
        Kind::RpcStart(RpcStartEv {
            path: "/".to_string() + &"p".repeat(len - 1),
            deadline_ns: None,
            framing: None,
            release: None,
            withhold_after: None,
        })
    }

    /// An RPC's end whose message is `len` bytes long.
    fn end_with_message(len: usize) -> Kind {
        Kind::RpcEnd(RpcEndEv {
            status: 2,
            message: "m".repeat(len),
        })
    }

    #[test]
    fn payload_bytes_in_flight_are_bounded_and_frames_past_it_lose_only_their_payload() {
        // No writer: everything accepted stays in flight.
        let rec = unwritten_with_budget(10_000);
        for i in 0..10 {
            rec.emit(Endpoint::Client, 1, 1, i, KindId::Frame, || {
                data_frame(5000)
            });
        }
        // 5,000 B each against 10,000 B: two fill the budget exactly and
        // keep their payload; the other eight are recorded without it, and
        // say so.
        let st = rec.stats();
        assert_eq!(st.accepted, 10, "{st:?}");
        assert_eq!(st.dropped_total(), 0, "{st:?}");
        assert_eq!(st.payload_dropped_frames, 8, "{st:?}");
        assert_eq!(st.payload_dropped_bytes, 40_000, "{st:?}");
        assert_eq!(rec.shared.payload_in_flight.load(Ordering::Relaxed), 10_000);
        let kept: Vec<(bool, bool)> = rec
            .shared
            .slots
            .lock()
            .unwrap()
            .slots
            .iter()
            .flat_map(|slot| {
                slot.lock()
                    .events
                    .iter()
                    .map(|e| match &e.kind {
                        Kind::Frame(f) => (f.payload.is_some(), f.payload_dropped),
                        other => panic!("{other:?}"),
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut expected = vec![(true, false); 2];
        expected.extend([(false, true); 8]);
        assert_eq!(kept, expected);
        // Events without payload are not held back by the budget.
        chunk(&rec, Endpoint::Client, 1, 11, 1);
        assert_eq!(rec.stats().accepted, 11);
    }

    /// A recorder without a writer (what it accepts stays in flight) and
    /// with a payload budget of `budget` bytes.
    fn unwritten_with_budget(budget: u64) -> Recorder {
        Recorder {
            enabled: true,
            shared: Arc::new(Shared {
                payload_budget: budget,
                ..Shared::with_capacity(1024)
            }),
        }
    }

    /// A SETTINGS list, a request's path and an RPC's end message are heap
    /// the peer sizes: they count against the payload budget like payload
    /// (a flood of 16 KiB SETTINGS frames, 2,730 entries each, held 1.7 GB
    /// uncounted). Past it a frame keeps the last value of each defined
    /// setting, a path or a message its first 256 bytes.
    #[test]
    fn settings_lists_and_paths_count_against_the_payload_budget() {
        let rec = unwritten_with_budget(30_000);
        let mut list: Vec<(u16, u32)> = (0..2_730u32).map(|i| (0xF0, i)).collect();
        list.extend([(4, 1_000), (1, 4096), (4, 2_000)]);
        let settings = || {
            Kind::Frame(FrameEv {
                dir: Dir::In,
                frame: FrameType::SETTINGS,
                len: 2_733 * 6,
                settings: Some(list.clone()),
                ..FrameEv::default()
            })
        };
        for i in 0..2 {
            rec.emit(Endpoint::Server, 1, 0, i, KindId::Frame, settings);
        }
        rec.emit(Endpoint::Server, 1, 1, 3, KindId::RpcStart, || {
            start_with_path(10_000)
        });
        rec.emit(Endpoint::Server, 1, 1, 4, KindId::RpcEnd, || {
            end_with_message(9_000)
        });
        let st = rec.stats();
        assert_eq!((st.accepted, st.dropped_total()), (4, 0), "{st:?}");
        assert_eq!(st.payload_dropped_frames, 1, "{st:?}");
        assert_eq!(st.payload_dropped_bytes, 2_733 * 6, "{st:?}");
        let events: Vec<Event> = rec
            .shared
            .slots
            .lock()
            .unwrap()
            .slots
            .iter()
            .flat_map(|slot| slot.lock().events.clone())
            .collect();
        match (
            &events[0].kind,
            &events[1].kind,
            &events[2].kind,
            &events[3].kind,
        ) {
            (Kind::Frame(a), Kind::Frame(b), Kind::RpcStart(r), Kind::RpcEnd(end)) => {
                assert_eq!(a.settings.as_ref().map(Vec::len), Some(2_733));
                assert!(!a.payload_dropped);
                assert_eq!(b.settings.as_deref(), Some(&[(4, 2_000), (1, 4096)][..]));
                assert!(b.payload_dropped);
                assert!(r.path.starts_with("/ppp"), "{}", r.path);
                assert!(
                    r.path
                        .ends_with("(9744 bytes not kept: the recorder's payload bound was full)"),
                    "{}",
                    r.path
                );
                assert!(
                    end.message
                        .ends_with("(8744 bytes not kept: the recorder's payload bound was full)"),
                    "{}",
                    end.message
                );
            }
            other => panic!("{other:?}"),
        }
        // Held: the first list, the second's two entries, the path's and
        // the message's rest.
        assert_eq!(
            rec.shared.payload_in_flight.load(Ordering::Relaxed),
            events.iter().map(|e| payload_bytes(&e.kind)).sum::<u64>()
        );
    }

    /// A thread keeps one slot per recorder it records into while that
    /// recorder lives (recording into another does not cost it a second
    /// one), and forgets the slots of finished recorders.
    #[test]
    fn a_threads_slots_follow_the_recorders_it_records_into() {
        std::thread::spawn(|| {
            let cached = || SLOTS.with(|c| c.borrow().len());
            let registered = |r: &Recorder| r.shared.slots.lock().unwrap().slots.len();
            let a = unwritten_with_budget(0);
            chunk(&a, Endpoint::Server, 1, 1, 1);
            let b = unwritten_with_budget(0);
            chunk(&b, Endpoint::Server, 1, 2, 1);
            chunk(&a, Endpoint::Server, 1, 3, 1);
            assert_eq!((registered(&a), registered(&b), cached()), (1, 1, 2));
            drop(a);
            let c = unwritten_with_budget(0);
            chunk(&c, Endpoint::Server, 1, 4, 1);
            assert_eq!(cached(), 2, "a's slot is forgotten once a is gone");
            assert_eq!(c.stats().accepted, 1);
        })
        .join()
        .unwrap();
    }

    /// What a shed text keeps is counted past the budget; an event with
    /// nothing to shed that comes then (a frame without captured bytes) is
    /// recorded as it is, not as one that lost its payload.
    #[test]
    fn past_the_budget_an_event_without_payload_loses_nothing() {
        let rec = unwritten_with_budget(100);
        rec.emit(Endpoint::Server, 1, 1, 1, KindId::RpcStart, || {
            start_with_path(1_000)
        });
        assert!(rec.shared.payload_in_flight.load(Ordering::Relaxed) > 100);
        rec.emit(Endpoint::Server, 1, 1, 2, KindId::Frame, || {
            Kind::Frame(FrameEv {
                dir: Dir::In,
                frame: FrameType::DATA,
                len: 16_384,
                ..FrameEv::default()
            })
        });
        let st = rec.stats();
        assert_eq!(
            (st.payload_dropped_frames, st.payload_dropped_bytes),
            (0, 0),
            "{st:?}"
        );
        let events: Vec<Event> = rec.shared.slots.lock().unwrap().slots[0]
            .lock()
            .events
            .clone();
        let Kind::Frame(f) = &events[1].kind else {
            panic!("{events:?}");
        };
        assert!(!f.payload_dropped);
    }

    /// After the last sweep a thread new to the recorder gets a retired
    /// slot outside the registry: an event it was already recording is
    /// dropped and counted, never accepted into a slot no sweep reads.
    #[test]
    fn a_slot_registered_after_the_last_sweep_is_retired() {
        let rec = unwritten_with_budget(0);
        rec.shared
            .sweep(&mut Swept::default(), &mut Vec::new(), true);
        let slot = rec.shared.register();
        assert!(slot.lock().retired);
        assert!(rec.shared.slots.lock().unwrap().slots.is_empty());
    }

    /// A sweep forgets the slot of a thread that has ended once it has
    /// taken its events, and keeps the slots of threads still recording.
    #[test]
    fn a_sweep_forgets_the_slots_of_threads_that_ended() {
        let rec = unwritten_with_budget(0);
        let other = rec.clone();
        std::thread::spawn(move || chunk(&other, Endpoint::Server, 1, 1, 1))
            .join()
            .unwrap();
        chunk(&rec, Endpoint::Server, 1, 2, 1);
        assert_eq!(rec.shared.slots.lock().unwrap().slots.len(), 2);
        let mut swept = Swept::default();
        rec.shared.sweep(&mut swept, &mut Vec::new(), false);
        assert_eq!(swept.len(), 2);
        assert_eq!(rec.shared.slots.lock().unwrap().slots.len(), 1);
    }

    /// The anchor meta.json gets is the one the trace's header holds.
    #[test]
    fn the_writers_anchor_is_the_headers() {
        let path = temp_trace("anchor");
        let (writer, _rec) = TraceWriter::create(&path, 16).unwrap();
        let anchor = writer.anchor();
        writer.finish().unwrap();
        let reader = TraceReader::open(&path).unwrap();
        let h = reader.header();
        assert_eq!(
            (
                anchor.clock.as_str(),
                anchor.origin_mono_ns,
                anchor.origin_unix_ns
            ),
            (h.clock.as_str(), h.origin_mono_ns, h.origin_unix_ns)
        );
        assert!(anchor.origin_mono_ns > 0 && anchor.origin_unix_ns > 0);
        std::fs::remove_file(&path).unwrap();
    }

    /// A recorder reads the clock events are stamped with; one switched
    /// off (`--no-trace`) reads none and says 0.
    #[test]
    fn a_recorder_reads_the_clock_only_when_it_records() {
        let rec = unwritten_with_budget(0);
        let before = crate::trace::clock::now_ns();
        let now = rec.now();
        assert!(
            (before..=crate::trace::clock::now_ns()).contains(&now),
            "{before} {now}"
        );
        assert_eq!(Recorder::disabled().now(), 0);
    }

    /// A path or message of up to 256 bytes is bounded with the event
    /// count and costs no budget; a longer one counts whole, and is cut on
    /// a character's boundary once past the budget.
    #[test]
    fn only_texts_longer_than_what_is_kept_count_against_the_budget_and_are_cut_whole() {
        assert_eq!(payload_bytes(&end_with_message(KEPT_TEXT)), 0);
        assert_eq!(payload_bytes(&end_with_message(KEPT_TEXT + 1)), 257);
        // Shortened on a character's boundary: a 2-byte character across
        // the 256th byte is lost whole.
        let mut text = "m".repeat(KEPT_TEXT - 1) + "é" + &"x".repeat(100);
        shorten(&mut text);
        assert_eq!(
            text,
            "m".repeat(KEPT_TEXT - 1)
                + "… (102 bytes not kept: the recorder's payload bound was full)"
        );
    }

    /// The bound the README states: twice 65,536 slots × at most 152 B (19 MiB)
    /// plus the payload budget (64 MiB).
    #[test]
    fn an_event_in_flight_is_at_most_152_bytes_besides_its_payload() {
        assert!(
            std::mem::size_of::<Event>() <= 152,
            "{}",
            std::mem::size_of::<Event>()
        );
        assert_eq!(DEFAULT_CAPACITY, 65_536);
        assert_eq!(PAYLOAD_BUDGET, 64 << 20);
    }

    #[test]
    fn the_writer_gives_back_the_payload_budget_it_writes() {
        let path = temp_trace("pay");
        let (writer, rec) = TraceWriter::create(&path, 64).unwrap();
        for i in 0..200 {
            rec.emit(Endpoint::Client, 1, 1, i, KindId::Frame, || {
                data_frame(100_000)
            });
            if i % 10 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        let shared = writer.shared.clone();
        let stats = writer.finish().unwrap();
        assert_eq!(stats.accepted + stats.dropped_total(), 200);
        assert_eq!(shared.payload_in_flight.load(Ordering::Relaxed), 0);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn events_after_finish_are_counted_as_dropped() {
        let path = temp_trace("late");
        let (writer, rec) = TraceWriter::create(&path, 1024).unwrap();
        chunk(&rec, Endpoint::Client, 0, 1, 1);
        let stats = writer.finish().unwrap();
        assert_eq!(stats.written, 1);
        // A dropped event is counted under its id and never built.
        rec.emit(Endpoint::Client, 1, 0, 2, KindId::Chunk, || {
            unreachable!("a dropped event must not be built")
        });
        assert_eq!(rec.stats().dropped_total(), 1);
        assert_eq!(rec.stats().dropped["chunk"], 1);
        std::fs::remove_file(&path).unwrap();
    }

    /// An error path that drops the writer without `finish` still gets a
    /// complete file: every accepted event, then the footer.
    #[test]
    fn a_writer_dropped_without_finish_still_ends_the_file() {
        let path = temp_trace("drop");
        let (writer, rec) = TraceWriter::create(&path, 1024).unwrap();
        for i in 0..10 {
            chunk(&rec, Endpoint::Client, 1, i, 1);
        }
        // The drop waits for the writer: the process may exit right after.
        drop(writer);
        let mut r = TraceReader::open(&path).unwrap();
        let n = r.by_ref().count();
        match r.ending() {
            Ending::Clean(f) => assert_eq!((n, f.events), (10, 10)),
            other => panic!("{other:?}"),
        }
        // The recorder outlives the writer: what it records now is dropped.
        chunk(&rec, Endpoint::Client, 1, 11, 1);
        assert_eq!(rec.stats().dropped["chunk"], 1);
        std::fs::remove_file(&path).unwrap();
    }

    /// A disk that fills up: what reached the file is `written`, everything
    /// else offered is dropped (none left "accepted" but unwritten), and
    /// the payload budget is whole again.
    #[test]
    fn a_full_disk_counts_every_event_written_or_dropped() {
        let path = temp_trace("full");
        let (writer, rec) =
            TraceWriter::create_limited(&path, 1 << 16, PAYLOAD_BUDGET, Some(1_500_000), None)
                .unwrap();
        let shared = writer.shared.clone();
        for i in 0..20_000 {
            rec.emit(Endpoint::Client, 1, 1, i, KindId::Frame, || data_frame(100));
            if i % 2_000 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        let e = writer.finish().unwrap_err();
        let st = &e.stats;
        assert_eq!(st.accepted, st.written, "{st:?}");
        assert_eq!(st.accepted + st.dropped_total(), 20_000, "{st:?}");
        assert!(st.written > 0 && st.dropped_total() > 0, "{st:?}");
        // `written` counts whole batches that reached the file; the failed
        // batch may have left some complete lines behind it.
        let text = std::fs::read_to_string(&path).unwrap();
        let lines = text.matches('\n').count() as u64 - 1; // the header
        assert!(lines >= st.written, "{lines} lines, {st:?}");
        assert_eq!(shared.payload_in_flight.load(Ordering::Relaxed), 0);
        std::fs::remove_file(&path).unwrap();
    }

    /// `--trace-limit`: past the size, the writer asks (once) for the run to
    /// stop and goes on writing, so the events of the stop and the footer
    /// are in the file and nothing is dropped; below it, it never asks.
    #[test]
    fn a_trace_limit_asks_for_a_stop_and_loses_nothing() {
        let path = temp_trace("limit");
        let (writer, rec) =
            TraceWriter::create_limited(&path, 1 << 16, PAYLOAD_BUDGET, None, Some(100_000))
                .unwrap();
        let mut failures = writer.failures();
        // ≈ 100 bytes a line: 500 lines stay below the limit.
        for i in 0..500 {
            chunk(&rec, Endpoint::Server, 1, i, 16_384);
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(
            failures.borrow_and_update().is_none(),
            "asked below the limit"
        );
        let mut sent = 500;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while failures.borrow_and_update().is_none() {
            assert!(std::time::Instant::now() < deadline, "never asked to stop");
            for _ in 0..100 {
                chunk(&rec, Endpoint::Server, 1, sent, 16_384);
                sent += 1;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let failure = failures.borrow().clone().unwrap();
        let said = failure.message;
        assert!(
            said.starts_with("the trace reached --trace-limit "),
            "{said}"
        );
        assert_eq!(failure.cause, "--trace-limit reached");
        // The stop's own events are still written; past the limit a frame
        // is written without its payload, and counted so.
        for _ in 0..1_000 {
            chunk(&rec, Endpoint::Server, 1, sent, 16_384);
            sent += 1;
        }
        for _ in 0..10 {
            rec.emit(Endpoint::Server, 1, 1, sent, KindId::Frame, || {
                data_frame(1_000)
            });
            sent += 1;
        }
        let stats = writer.finish().unwrap();
        assert_eq!(stats.dropped_total(), 0, "{stats:?}");
        assert_eq!(stats.written, sent, "{stats:?}");
        assert_eq!(
            (stats.payload_dropped_frames, stats.payload_dropped_bytes),
            (10, 10_000),
            "{stats:?}"
        );
        let (events, _) = written(&path);
        let shed = events
            .iter()
            .filter(
                |e| matches!(&e.kind, Kind::Frame(f) if f.payload_dropped && f.payload.is_none()),
            )
            .count();
        assert_eq!(shed, 10);
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size > 100_000, "{size}");
        let mut r = TraceReader::open(&path).unwrap();
        assert_eq!(r.by_ref().count() as u64, sent);
        assert!(matches!(r.ending(), Ending::Clean(_)), "{:?}", r.ending());
        std::fs::remove_file(&path).unwrap();
    }

    /// An event still being built while `finish` runs (the writer never
    /// waits on a builder) is dropped, not counted as accepted, as is one
    /// recorded later; `finish` returns what the footer says.
    #[test]
    fn finish_and_the_footer_agree_while_a_thread_is_still_recording() {
        let path = temp_trace("late-build");
        let (writer, rec) = TraceWriter::create(&path, 1024).unwrap();
        chunk(&rec, Endpoint::Client, 1, 1, 1);
        // The builder is inside its build while `finish` runs, and returns
        // only after it (channels, not sleeps: a loaded machine stretches
        // any sleep).
        let (building, in_build) = std::sync::mpsc::channel();
        let (finished, after_finish) = std::sync::mpsc::channel::<()>();
        let late = {
            let rec = rec.clone();
            std::thread::spawn(move || {
                rec.emit(Endpoint::Client, 1, 1, 2, KindId::Chunk, || {
                    building.send(()).unwrap();
                    after_finish.recv().unwrap();
                    Kind::Chunk(ChunkEv { len: 2 })
                });
                // After the last sweep.
                chunk(&rec, Endpoint::Client, 1, 3, 3);
            })
        };
        in_build.recv().unwrap();
        let stats = writer.finish().unwrap();
        finished.send(()).unwrap();
        assert_eq!((stats.accepted, stats.written), (1, 1), "{stats:?}");
        let mut r = TraceReader::open(&path).unwrap();
        assert_eq!(r.by_ref().count(), 1);
        match r.ending() {
            Ending::Clean(f) => assert_eq!((f.events, &f.dropped), (1, &stats.dropped)),
            other => panic!("{other:?}"),
        }
        late.join().unwrap();
        assert_eq!(rec.stats().dropped["chunk"], 2);
        std::fs::remove_file(&path).unwrap();
    }

    /// A thread reserves room in blocks; what it never used comes back when
    /// it ends (else short-lived threads would fill the buffer with room
    /// nobody uses, and every later event would be dropped).
    #[test]
    fn room_a_thread_reserved_and_never_used_comes_back_when_it_ends() {
        let path = temp_trace("credit");
        let (writer, rec) = TraceWriter::create(&path, 256).unwrap();
        assert_eq!(rec.shared.credit_block, 4);
        let room_back = |below: usize, what: &str| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while rec.shared.in_flight.load(Ordering::Relaxed) >= below {
                assert!(std::time::Instant::now() < deadline, "{what}");
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        for i in 0..500u64 {
            // Paced by the writer's sweeps (it is woken at half the
            // capacity): threads that come faster than a sweep (a loaded
            // machine, an idle writer's long nap) would fill the buffer
            // with room that comes back only at the next one, and the test
            // failed 2 runs in 27. Without the give-back this waits in vain.
            room_back(128, "room never came back");
            let rec = rec.clone();
            std::thread::spawn(move || {
                chunk(&rec, Endpoint::Client, 1, i, 1);
            })
            .join()
            .unwrap();
        }
        // 500 threads × 4 reserved is far past 256: without the give-back
        // the room would have run out after about 43 of them.
        room_back(1, "room never came back at the end");
        let stats = writer.finish().unwrap();
        assert_eq!((stats.accepted, stats.written), (500, 500), "{stats:?}");
        assert!(stats.dropped.is_empty(), "{stats:?}");
        std::fs::remove_file(&path).unwrap();
    }

    /// The writer thread dies with file writes in flight: those lines reach
    /// the file and are counted written, not dropped (before, the I/O
    /// thread completed them after the writer's accounting had run).
    #[test]
    fn a_writer_that_panics_with_writes_in_flight_counts_their_lines_written() {
        let path = temp_trace("panic-in-flight");
        let shared = Arc::new(Shared::with_capacity(1 << 16));
        let (sh, p) = (shared.clone(), path.clone());
        let died = std::thread::spawn(move || {
            let mut sink = Sink {
                shared: &sh,
                out: Output::create(&p, None).unwrap(),
            };
            let ev = Event {
                t: 1,
                ep: Endpoint::Server,
                conn: 1,
                stream: 1,
                kind: Kind::Chunk(ChunkEv { len: 1 }),
            };
            for _ in 0..100_000 {
                sink.push(&ev).unwrap();
            }
            panic!("the writer's bug");
        })
        .join();
        assert!(died.is_err());
        let lines = std::fs::read(&path)
            .unwrap()
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        assert!(lines > 0);
        assert_eq!(shared.written_total(), lines);
        std::fs::remove_file(&path).unwrap();
    }

    /// A builder that records an event of its own (none does today) must not
    /// deadlock on its thread's slot; both are written.
    #[test]
    fn an_event_builder_may_record_too() {
        let path = temp_trace("nested");
        let (writer, rec) = TraceWriter::create(&path, 1024).unwrap();
        let inner = rec.clone();
        rec.emit(Endpoint::Server, 1, 1, 2, KindId::Chunk, || {
            chunk(&inner, Endpoint::Server, 1, 1, 1);
            Kind::Chunk(ChunkEv { len: 2 })
        });
        let stats = writer.finish().unwrap();
        assert_eq!((stats.accepted, stats.written), (2, 2), "{stats:?}");
        std::fs::remove_file(&path).unwrap();
    }

    /// A builder's event into a recorder this thread has not recorded into
    /// yet, while the thread's slot cache is borrowed by the outer event:
    /// it goes through a one-event slot, and every event is written.
    #[test]
    fn an_event_builder_may_record_into_a_recorder_new_to_its_thread() {
        let (outer_path, inner_path) = (temp_trace("outer"), temp_trace("inner"));
        let (outer_writer, outer) = TraceWriter::create(&outer_path, 1024).unwrap();
        let (inner_writer, inner) = TraceWriter::create(&inner_path, 1024).unwrap();
        std::thread::spawn(move || {
            // Registered first: the next event runs inside the cache's borrow.
            chunk(&outer, Endpoint::Server, 1, 1, 1);
            outer.emit(Endpoint::Server, 1, 1, 3, KindId::Chunk, || {
                for i in 0..3 {
                    chunk(&inner, Endpoint::Server, 1, 2 + i, 1);
                }
                Kind::Chunk(ChunkEv { len: 2 })
            });
            // Outside a builder, the new recorder registers as usual.
            chunk(&inner, Endpoint::Server, 1, 10, 1);
        })
        .join()
        .unwrap();
        let stats = outer_writer.finish().unwrap();
        assert_eq!((stats.accepted, stats.written), (2, 2), "{stats:?}");
        let stats = inner_writer.finish().unwrap();
        assert_eq!((stats.accepted, stats.written), (4, 4), "{stats:?}");
        assert!(stats.dropped.is_empty(), "{stats:?}");
        let ts: Vec<u64> = written(&inner_path).0.iter().map(|e| e.t).collect();
        assert_eq!(ts, [2, 3, 4, 10]);
        std::fs::remove_file(&outer_path).unwrap();
        std::fs::remove_file(&inner_path).unwrap();
    }

    #[test]
    fn write_errors_name_the_file() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let (writer, rec) =
            TraceWriter::start(Box::new(Full), Path::new("/full/trace.jsonl"), 8).unwrap();
        for i in 0..100 {
            chunk(&rec, Endpoint::Client, 0, i, 1);
        }
        let err = writer.finish().unwrap_err().to_string();
        assert!(err.starts_with("/full/trace.jsonl: "), "{err}");
    }
}
