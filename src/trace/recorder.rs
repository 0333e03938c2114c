//! The bounded recorder: the transport and the application hand it events
//! without ever waiting; a named thread writes them as JSON Lines.
//!
//! A slot is reserved *before* the event is built; if the buffer is full the
//! event is counted as dropped (per kind) and the caller moves on. Drops are
//! data: they go into the trace footer and the run's meta, and `analyze`
//! warns about them.

use super::schema::{Endpoint, Event, Footer, Header, Kind, KindId, SCHEMA_VERSION};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Default buffer: events in flight between producers and the writer.
pub const DEFAULT_CAPACITY: usize = 1 << 16;

/// Payload bytes (`--capture-payload`, base64) the events in flight may hold
/// together: with full payloads 65,536 events could otherwise hold ≈ 1.4 GB.
/// The recorder's memory is bounded by `capacity × size_of::<Msg>()` (at
/// most 192 B: 12 MiB at the default capacity) plus this, and the writer's
/// 256 KiB buffer. An event past it is dropped and counted like any other.
pub const PAYLOAD_BUDGET: u64 = 64 << 20;

/// Heap bytes an event holds beyond its fixed size that can be large.
fn payload_bytes(kind: &Kind) -> u64 {
    match kind {
        Kind::Frame(f) => f.payload.as_ref().map_or(0, |p| p.len() as u64),
        _ => 0,
    }
}

const KINDS: usize = Kind::NAMES.len() + 1;

enum Msg {
    Event(Event),
    Close,
}

struct Shared {
    dropped: [AtomicU64; KINDS],
    accepted: AtomicU64,
    /// The writer thread, woken by producers only when the buffer is half
    /// full (it otherwise wakes on its own every few milliseconds): a
    /// wake-up per event cost ≈ 50 context switches per request.
    writer: std::sync::OnceLock<std::thread::Thread>,
    /// Free slots below which a producer wakes the writer.
    wake_below: usize,
    /// Payload bytes held by events in flight, and their bound.
    payload_in_flight: AtomicU64,
    payload_budget: u64,
}

/// A cheap, cloneable handle for recording events. Never blocks.
#[derive(Clone)]
pub struct Recorder {
    tx: Option<mpsc::Sender<Msg>>,
    shared: Arc<Shared>,
}

pub use h2probe_analysis::meta::RecorderStats;

impl Recorder {
    /// A recorder that records nothing (and counts nothing): for code paths
    /// used without a trace.
    pub fn disabled() -> Recorder {
        Recorder {
            tx: None,
            shared: Arc::new(Shared::new()),
        }
    }

    /// Whether events are recorded at all (`--no-trace` runs without).
    pub fn is_enabled(&self) -> bool {
        self.tx.is_some()
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
        let Some(tx) = &self.tx else { return };
        match tx.try_reserve() {
            Ok(permit) => {
                let kind = build();
                debug_assert_eq!(kind.id(), id, "emit's id names the kind it builds");
                let bytes = payload_bytes(&kind);
                let mut wake = false;
                if bytes > 0 {
                    let held = self
                        .shared
                        .payload_in_flight
                        .fetch_add(bytes, Ordering::Relaxed);
                    if held + bytes > self.shared.payload_budget {
                        self.shared
                            .payload_in_flight
                            .fetch_sub(bytes, Ordering::Relaxed);
                        self.shared.dropped[id.index()].fetch_add(1, Ordering::Relaxed);
                        if let Some(w) = self.shared.writer.get() {
                            w.unpark();
                        }
                        return;
                    }
                    // Half the payload budget held: as for slots, wake the writer.
                    wake = held + bytes > self.shared.payload_budget / 2;
                }
                permit.send(Msg::Event(Event {
                    t,
                    ep,
                    conn,
                    stream,
                    kind,
                }));
                self.shared.accepted.fetch_add(1, Ordering::Relaxed);
                if wake || tx.capacity() < self.shared.wake_below {
                    if let Some(w) = self.shared.writer.get() {
                        w.unpark();
                    }
                }
            }
            Err(_) => {
                self.shared.dropped[id.index()].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Snapshot of the counters (written count known only to the writer).
    pub fn stats(&self) -> RecorderStats {
        self.shared.stats(0)
    }
}

impl Shared {
    fn new() -> Shared {
        Shared::with_capacity(0)
    }

    fn with_capacity(capacity: usize) -> Shared {
        Shared {
            dropped: std::array::from_fn(|_| AtomicU64::new(0)),
            accepted: AtomicU64::new(0),
            writer: std::sync::OnceLock::new(),
            wake_below: capacity / 2,
            payload_in_flight: AtomicU64::new(0),
            payload_budget: PAYLOAD_BUDGET,
        }
    }

    fn stats(&self, written: u64) -> RecorderStats {
        let mut dropped = std::collections::BTreeMap::new();
        for (i, c) in self.dropped.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            if n > 0 {
                let name = Kind::NAMES.get(i).copied().unwrap_or("unknown");
                dropped.insert(name.to_string(), n);
            }
        }
        RecorderStats {
            accepted: self.accepted.load(Ordering::Relaxed),
            written,
            dropped,
        }
    }
}

/// Owns the writer thread. Call [`TraceWriter::finish`] to flush, write the
/// footer and get the final counts.
pub struct TraceWriter {
    tx: mpsc::Sender<Msg>,
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<Result<u64, WriteError>>>,
    path: PathBuf,
    anchor: h2probe_analysis::meta::ClockAnchor,
    failed: tokio::sync::watch::Receiver<Option<String>>,
}

/// The trace file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {cause}")]
pub struct WriteError {
    pub path: String,
    pub cause: std::io::Error,
}

impl TraceWriter {
    /// Creates `path`, writes the header line and starts the writer thread.
    pub fn create(path: &Path, capacity: usize) -> Result<(TraceWriter, Recorder), WriteError> {
        let err = |cause| WriteError {
            path: path.display().to_string(),
            cause,
        };
        let file = std::fs::File::create(path).map_err(err)?;
        // Fault injection for the tests of a failing disk (documented in
        // the README's test section, not a user knob): the file fails with
        // ENOSPC after this many bytes.
        if let Some(n) = std::env::var("H2PROBE_FAULT_TRACE_FULL_AFTER")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            let full = FullAfter {
                inner: file,
                left: n,
            };
            return TraceWriter::start(Box::new(full), path, capacity).map_err(err);
        }
        TraceWriter::start(Box::new(file), path, capacity).map_err(err)
    }

    /// Like [`TraceWriter::create`] but onto any writer (`path` names it in errors).
    pub fn start(
        out: Box<dyn Write + Send>,
        path: &Path,
        capacity: usize,
    ) -> std::io::Result<(TraceWriter, Recorder)> {
        TraceWriter::start_bounded(out, path, capacity, PAYLOAD_BUDGET)
    }

    /// [`TraceWriter::start`] with its own payload budget (bytes).
    fn start_bounded(
        out: Box<dyn Write + Send>,
        path: &Path,
        capacity: usize,
        payload_budget: u64,
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
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let shared = Arc::new(Shared {
            payload_budget,
            ..Shared::with_capacity(capacity.max(1))
        });
        let path_s = path.display().to_string();
        let thread_shared = shared.clone();
        let (fail_tx, failed) = tokio::sync::watch::channel(None);
        let thread = std::thread::Builder::new()
            .name("h2probe-trace".into())
            .spawn(move || {
                write_loop(out, header, rx, thread_shared, capacity).map_err(|(cause, written)| {
                    let _ = fail_tx.send(Some(format!(
                        "writing {path_s}: {cause} after {written} events (the file holds them up to its last complete line)"
                    )));
                    WriteError {
                        path: path_s,
                        cause,
                    }
                })
            })?;
        let _ = shared.writer.set(thread.thread().clone());
        let rec = Recorder {
            tx: Some(tx.clone()),
            shared: shared.clone(),
        };
        Ok((
            TraceWriter {
                tx,
                shared,
                thread: Some(thread),
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

    /// Becomes `Some(message)` when writing the trace fails (disk full, I/O
    /// error): the commands stop the run within a moment instead of
    /// recording into the void.
    pub fn failures(&self) -> tokio::sync::watch::Receiver<Option<String>> {
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
        // Blocking send: shutdown may wait for buffer space, producers never
        // do. From a plain thread, so that `finish` is safe to call even on a
        // runtime thread (tokio forbids blocking sends there).
        let tx = &self.tx;
        std::thread::scope(|s| {
            let _ = s.spawn(|| tx.blocking_send(Msg::Close).is_ok()).join();
        });
        if let Some(w) = self.shared.writer.get() {
            w.unpark();
        }
        let written = match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r?,
            Some(Err(_)) => {
                return Err(WriteError {
                    path: self.path.display().to_string(),
                    cause: std::io::Error::other("trace writer thread panicked"),
                })
            }
            None => 0,
        };
        Ok(self.shared.stats(written))
    }
}

fn write_loop(
    out: Box<dyn Write + Send>,
    header: Header,
    mut rx: mpsc::Receiver<Msg>,
    shared: Arc<Shared>,
    capacity: usize,
) -> Result<u64, (std::io::Error, u64)> {
    let mut w = out;
    // Lines are built here and handed to the file 256 KiB at a time.
    const BATCH: usize = 1 << 18;
    let mut batch: Vec<u8> = Vec::with_capacity(BATCH + (BATCH >> 2));
    let mut written = 0u64;
    // Flushed at least this often while events arrive, so a full disk is
    // noticed (and a killed run loses little) even at low event rates.
    let flush_every = std::time::Duration::from_millis(200);
    let mut flushed = std::time::Instant::now();
    let result = (|| {
        batch.extend_from_slice(header.to_line().as_bytes());
        batch.push(b'\n');
        w.write_all(&batch)?;
        batch.clear();
        let _ = capacity;
        // Drain what is there, write it, then sleep until woken (half-full
        // buffer, or close) or for a few milliseconds.
        let nap = std::time::Duration::from_millis(2);
        loop {
            let mut closing = false;
            let mut gone = false;
            loop {
                match rx.try_recv() {
                    Ok(Msg::Event(e)) => {
                        h2probe_analysis::jsonl::write_event(&mut batch, &e);
                        if batch.len() >= BATCH {
                            w.write_all(&batch)?;
                            batch.clear();
                        }
                        written += 1;
                        let bytes = payload_bytes(&e.kind);
                        if bytes > 0 {
                            shared.payload_in_flight.fetch_sub(bytes, Ordering::Relaxed);
                        }
                    }
                    Ok(Msg::Close) => {
                        closing = true;
                        rx.close();
                    }
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        gone = true; // every sender gone, everything drained
                        break;
                    }
                }
            }
            if closing || gone {
                break;
            }
            if flushed.elapsed() >= flush_every {
                w.write_all(&batch)?;
                batch.clear();
                w.flush()?;
                flushed = std::time::Instant::now();
            }
            std::thread::park_timeout(nap);
        }
        let stats = shared.stats(written);
        let footer = Footer {
            events: written,
            dropped: stats.dropped,
        };
        batch.extend_from_slice(footer.to_line().as_bytes());
        batch.push(b'\n');
        w.write_all(&batch)?;
        w.flush()?;
        Ok::<_, std::io::Error>(())
    })();
    // On a write error, stop accepting: later events count as dropped.
    rx.close();
    result.map(|()| written).map_err(|e| (e, written))
}

/// A file that fills up after `left` bytes (fault injection).
struct FullAfter {
    inner: std::fs::File,
    left: u64,
}

impl Write for FullAfter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
        }
        let n = (buf.len() as u64).min(self.left) as usize;
        let n = self.inner.write(&buf[..n])?;
        self.left -= n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::schema::ChunkEv;
    use h2probe_analysis::reader::{Ending, TraceReader};

    #[test]
    fn flood_beyond_capacity_never_blocks_and_counts_every_drop() {
        let dir = std::env::temp_dir().join(format!("h2probe-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.jsonl");
        let (writer, rec) = TraceWriter::create(&path, 64).unwrap();
        let n = 200_000u64;
        for i in 0..n {
            rec.emit(Endpoint::Server, 1, 1, i, KindId::Chunk, || {
                Kind::Chunk(ChunkEv { len: i as u32 })
            });
        }
        let stats = writer.finish().unwrap();
        assert_eq!(stats.accepted + stats.dropped_total(), n, "{stats:?}");
        assert_eq!(stats.written, stats.accepted);
        // With 64 slots and a tight loop, the writer cannot keep up.
        assert!(stats.dropped_total() > 0, "{stats:?}");
        assert_eq!(stats.dropped.keys().collect::<Vec<_>>(), vec!["chunk"]);

        let mut r = TraceReader::open(&path).unwrap();
        let mut count = 0;
        let mut last_t = None;
        for e in r.by_ref() {
            let e = e.unwrap();
            assert!(last_t.is_none_or(|t| e.t > t), "order kept");
            last_t = Some(e.t);
            count += 1;
        }
        assert_eq!(count, stats.written);
        match r.ending() {
            Ending::Clean(f) => {
                assert_eq!(f.events, stats.written);
                assert_eq!(f.dropped, stats.dropped);
            }
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
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
            pad: 0,
            increment: None,
            settings: None,
            error_code: None,
            last_stream: None,
            promised: None,
            priority: None,
            opaque: None,
            payload: Some("x".repeat(payload)),
        })
    }

    #[test]
    fn payload_bytes_in_flight_are_bounded_and_drops_counted() {
        // Nobody drains this channel: everything accepted stays in flight.
        let (tx, _rx) = mpsc::channel(1024);
        let rec = Recorder {
            tx: Some(tx),
            shared: Arc::new(Shared {
                payload_budget: 10_000,
                ..Shared::with_capacity(1024)
            }),
        };
        for i in 0..10 {
            rec.emit(Endpoint::Client, 1, 1, i, KindId::Frame, || {
                data_frame(4000)
            });
        }
        // 4,000 B each against 10,000 B: two fit, though 1,024 slots are free.
        let st = rec.stats();
        assert_eq!(st.accepted, 2, "{st:?}");
        assert_eq!(st.dropped["frame"], 8, "{st:?}");
        // Events without payload are not held back by the budget.
        rec.emit(Endpoint::Client, 1, 1, 11, KindId::Chunk, || {
            Kind::Chunk(ChunkEv { len: 1 })
        });
        assert_eq!(rec.stats().accepted, 3);
    }

    /// The bound the README states: 65,536 slots × at most 192 B (12 MiB)
    /// plus the payload budget (64 MiB).
    #[test]
    fn an_event_in_flight_is_at_most_192_bytes_besides_its_payload() {
        assert!(
            std::mem::size_of::<Msg>() <= 192,
            "{}",
            std::mem::size_of::<Msg>()
        );
        assert_eq!(DEFAULT_CAPACITY, 65_536);
        assert_eq!(PAYLOAD_BUDGET, 64 << 20);
    }

    #[test]
    fn the_writer_gives_back_the_payload_budget_it_writes() {
        let path = std::env::temp_dir().join(format!("h2probe-pay-{}.jsonl", std::process::id()));
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
        let path = std::env::temp_dir().join(format!("h2probe-late-{}.jsonl", std::process::id()));
        let (writer, rec) = TraceWriter::create(&path, 1024).unwrap();
        rec.emit(Endpoint::Client, 1, 0, 1, KindId::Chunk, || {
            Kind::Chunk(ChunkEv { len: 1 })
        });
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
            rec.emit(Endpoint::Client, 1, 0, i, KindId::Chunk, || {
                Kind::Chunk(ChunkEv { len: 1 })
            });
        }
        let err = writer.finish().unwrap_err().to_string();
        assert!(err.starts_with("/full/trace.jsonl: "), "{err}");
    }
}
