//! The trace file's output: the writer encodes lines straight into
//! block-aligned buffers, and a thread of its own writes them to the file
//! with `O_DIRECT`, around the page cache.
//!
//! Why: through the page cache every byte is copied into the cache and
//! written back by the kernel on the same two cores; here that cost
//! 0.76 s of system time a GB (`dd`), against 0.14 with `O_DIRECT`
//! (bench/2026-11-30-pagecache.txt), and full capture writes 1.33 bytes of
//! base64 a byte uploaded. A synchronous `O_DIRECT` write on the writer
//! thread waited on the disk and fell behind (session 22), so the writes go
//! to an I/O thread, a few buffers in flight; the writer only waits when
//! all of them are (the disk is behind), as it waited in `write` before.
//!
//! `O_DIRECT` takes memory addresses, file offsets and lengths in whole
//! blocks. A buffer is written up to its last whole block; the bytes after
//! it (less than a block) are carried to the start of the next buffer and
//! written again with it, at the same offset. A flush (every 200 ms while
//! events come, and at the end) writes that last block padded with zeros,
//! then cuts the file back to its true length: in between, the file may
//! end in up to 4,095 zero bytes after its last line, which a reader takes
//! for a cut last line (as after a kill). A file system that refuses
//! `O_DIRECT` is written through the page cache, the pages behind the
//! write position advised away as [`super::DropBehind`] does.
//!
//! An event counts as written once the write holding the end of its line
//! has reached the file: its count travels with the buffer to the I/O
//! thread and comes back with the result. After a failed write nothing
//! more is written, and what was not written is counted as such: every
//! event of the failed write too, though a short write (a full disk) may
//! have left some of its lines in the file, whole (so the file holds at
//! least the lines counted written; the footer-less trace says it was cut,
//! and a failed padded flush may leave zeros after its last line).

use super::drop_behind::advise_behind;
use h2probe_analysis::schema::Kind;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

/// Per-kind event counts (the recorder's kinds, plus one for unknown).
pub(crate) const KINDS: usize = Kind::NAMES.len() + 1;
pub(crate) type Counts = [u64; KINDS];

/// The unit of `O_DIRECT` alignment used (every device here has 512- or
/// 4096-byte logical blocks).
pub(crate) const BLOCK: usize = 4096;
/// A buffer is handed to the I/O thread once it holds this much.
pub(crate) const BUFFER: usize = 1 << 20;
/// A stream's buffer, written by the writer thread itself.
const STREAM_BUFFER: usize = 1 << 18;
/// Buffers at most: the one being filled and those in flight.
const BUFFERS: usize = 5;

/// A buffer whose data starts at a block boundary in memory (`O_DIRECT`
/// reads straight from it); lines are appended to `vec`, after `lead`
/// unused bytes that align the start.
pub(crate) struct Batch {
    vec: Vec<u8>,
    lead: usize,
}

impl Batch {
    fn new(size: usize) -> Batch {
        let mut vec: Vec<u8> = Vec::with_capacity(size + size / 4 + BLOCK);
        let lead = vec.as_ptr().align_offset(BLOCK);
        vec.resize(lead, 0);
        Batch { vec, lead }
    }

    fn len(&self) -> usize {
        self.vec.len() - self.lead
    }

    fn data(&self) -> &[u8] {
        &self.vec[self.lead..]
    }

    fn clear(&mut self) {
        self.vec.truncate(self.lead);
    }

    /// A line larger than the room left moved the vector: its data start
    /// is moved back onto a block boundary (a copy; rare, a frame's payload
    /// beyond a buffer's size).
    fn realign(&mut self) {
        if self
            .vec
            .as_ptr()
            .wrapping_add(self.lead)
            .align_offset(BLOCK)
            == 0
        {
            return;
        }
        // Room first, so that the shift below moves nothing in memory.
        self.vec.reserve(BLOCK);
        let lead = self.vec.as_ptr().align_offset(BLOCK);
        if lead > self.lead {
            let n = lead - self.lead;
            self.vec.splice(0..0, std::iter::repeat_n(0, n));
        } else {
            self.vec.drain(0..self.lead - lead);
        }
        self.lead = lead;
        debug_assert_eq!(
            self.vec
                .as_ptr()
                .wrapping_add(self.lead)
                .align_offset(BLOCK),
            0
        );
    }

    /// Zeros up to `len` data bytes (a flush's padding).
    fn pad_to(&mut self, len: usize) {
        self.vec.resize(self.lead + len, 0);
    }

    /// Whether this buffer grew past twice a normal one's `size` (a huge
    /// line): such a buffer is not kept once written.
    fn oversized(&self, size: usize) -> bool {
        self.vec.capacity() > 2 * size + BLOCK
    }
}

/// Where the bytes go.
enum Backend {
    /// A file written at offsets (`O_DIRECT` while `direct`, which the
    /// writer reads too).
    File {
        file: File,
        direct: Arc<AtomicBool>,
        /// Through the page cache: the write position last advised away.
        advised: u64,
    },
    /// Any writer, written in order by the writer thread itself (tests: a
    /// writer that blocks or panics does so on the writer thread).
    Stream(Box<dyn Write + Send>),
}

/// One write for the I/O thread.
struct Job {
    batch: Batch,
    /// File offset of the batch's first data byte.
    off: u64,
    /// Bytes to write from the batch's data (padding included).
    len: usize,
    /// Cut the file to this length after the write (a padded flush).
    truncate: Option<u64>,
    /// Flush a stream backend after the write.
    flush: bool,
    /// Events whose lines end in this write.
    counts: Counts,
}

/// A job's buffer back from the I/O thread, with what became of it.
struct Done {
    batch: Batch,
    counts: Counts,
    result: io::Result<()>,
}

/// The writer's side: the buffer being filled, the buffers in flight.
pub(crate) struct Output {
    /// Alignment of the offsets and lengths written: [`BLOCK`] for a file,
    /// 1 for a stream.
    block: usize,
    /// A buffer is handed over once it holds this much.
    buffer: usize,
    /// A stream, written here rather than by the I/O thread.
    inline: Option<(Backend, Option<u64>)>,
    /// The file is written with `O_DIRECT` (it may fall back to the page
    /// cache on its first write).
    direct: Arc<AtomicBool>,
    cur: Batch,
    /// File offset of `cur`'s first data byte.
    off: u64,
    /// `cur` holds bytes the writes handed over so far do not cover (an
    /// idle recorder's flushes write nothing).
    appended: bool,
    /// The lines in `cur` not yet counted in a write: (end of the line in
    /// `cur`'s data, kind index). A line of the header or footer has none.
    ends: VecDeque<(usize, u8)>,
    spare: Vec<Batch>,
    /// Buffers that exist (`cur`, spares, in flight).
    made: usize,
    in_flight: usize,
    /// Events in the writes in flight.
    flying: Counts,
    /// Events whose writes reached the file since the last [`Output::take_written`].
    written: Counts,
    /// Events whose writes failed or were never made.
    lost: Counts,
    /// The first write error, given back by every later call.
    failed: Option<(io::ErrorKind, String)>,
    jobs: Option<SyncSender<Job>>,
    results: Receiver<Done>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Output {
    /// Creates (truncates) `path`, with `O_DIRECT` when its file system
    /// takes it. `limit`: fault injection, the file fills up after that
    /// many bytes (a failing disk, for the tests).
    pub(crate) fn create(path: &Path, limit: Option<u64>) -> io::Result<Output> {
        use std::os::unix::fs::OpenOptionsExt;
        let open = |flags: i32| {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(flags)
                .open(path)
        };
        let direct_flag = rustix::fs::OFlags::DIRECT.bits() as i32;
        let (file, direct) = match open(direct_flag) {
            Ok(f) => (f, true),
            // EINVAL: this file system takes no O_DIRECT.
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
                (open(0)?, false)
            }
            Err(e) => return Err(e),
        };
        let block = if direct { BLOCK } else { 1 };
        let direct = Arc::new(AtomicBool::new(direct));
        let backend = Backend::File {
            file,
            direct: direct.clone(),
            advised: 0,
        };
        Output::start(backend, block, limit, direct)
    }

    /// Onto any writer, in order, written by the calling thread (tests).
    pub(crate) fn stream(w: Box<dyn Write + Send>) -> io::Result<Output> {
        Output::start(Backend::Stream(w), 1, None, Arc::default())
    }

    fn start(
        backend: Backend,
        block: usize,
        limit: Option<u64>,
        direct: Arc<AtomicBool>,
    ) -> io::Result<Output> {
        let (jobs, inbox) = sync_channel::<Job>(BUFFERS);
        let (outbox, results) = sync_channel::<Done>(BUFFERS);
        let (inline, thread, buffer) = match backend {
            Backend::Stream(_) => (Some((backend, limit)), None, STREAM_BUFFER),
            Backend::File { .. } => {
                let thread = std::thread::Builder::new()
                    .name("h2probe-io".into())
                    .spawn(move || io_loop(backend, limit, inbox, outbox))?;
                (None, Some(thread), BUFFER)
            }
        };
        Ok(Output {
            block,
            buffer,
            inline,
            direct,
            cur: Batch::new(buffer),
            off: 0,
            appended: false,
            ends: VecDeque::new(),
            spare: Vec::new(),
            made: 1,
            in_flight: 0,
            flying: [0; KINDS],
            written: [0; KINDS],
            lost: [0; KINDS],
            failed: None,
            jobs: Some(jobs),
            results,
            thread,
        })
    }

    /// Whether the file is written around the page cache (so far).
    pub(crate) fn is_direct(&self) -> bool {
        self.direct.load(Ordering::Relaxed)
    }

    /// How the file is written, as meta.json's `recorder.file_io` says
    /// (none for a stream).
    pub(crate) fn file_io(&self) -> Option<String> {
        let name = match (&self.inline, self.is_direct()) {
            (Some(_), _) => return None,
            (None, true) => "direct",
            (None, false) => "page_cache",
        };
        Some(name.to_string())
    }

    /// Bytes of lines so far: the file's length once they are written.
    pub(crate) fn encoded(&self) -> u64 {
        self.off + self.cur.len() as u64
    }

    /// The buffer to append one line to; then [`Output::line`].
    pub(crate) fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.cur.vec
    }

    /// A line of kind `kind` (None: header or footer) was appended; hands
    /// the buffer over once it is full (then true: a stream's write is
    /// done, its events are ready for [`Output::take_written`]).
    pub(crate) fn line(&mut self, kind: Option<usize>) -> io::Result<bool> {
        if let Some(k) = kind {
            self.ends.push_back((self.cur.len(), k as u8));
        }
        self.appended = true;
        if self.cur.len() >= self.buffer {
            self.submit(false)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Writes what the buffer holds (and makes a stream flush): a killed
    /// run then loses only what came after.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.submit(true)
    }

    /// Hands `cur` to the I/O thread: up to its last whole block, or, with
    /// `pad`, all of it (the last block padded, the file cut back after).
    fn submit(&mut self, pad: bool) -> io::Result<()> {
        self.check()?;
        let len = self.cur.len();
        if !self.appended {
            // Nothing new: what the buffer holds is in the file already
            // (a part block a flush wrote).
            return Ok(());
        }
        let whole = len / self.block * self.block;
        let (write, truncate, keep_from) = if pad && whole < len {
            (whole + self.block, Some(self.off + len as u64), whole)
        } else if pad {
            (len, None, len)
        } else {
            (whole, None, whole)
        };
        // Counted in this write: every line that ends within what it
        // leaves on the file (padding excluded).
        let counted_to = if pad { len } else { whole };
        let mut counts = [0; KINDS];
        while let Some(&(end, k)) = self.ends.front() {
            if end > counted_to {
                break;
            }
            counts[k as usize] += 1;
            self.ends.pop_front();
        }
        let mut next = self.next_batch()?;
        // The part block goes first into the next buffer, to be written
        // again, whole, at the same offset.
        next.vec.extend_from_slice(&self.cur.data()[keep_from..len]);
        for (end, _) in self.ends.iter_mut() {
            *end -= keep_from;
        }
        // Padded first: padding that moved the vector is realigned too.
        self.cur.pad_to(write);
        if self.block > 1 {
            self.cur.realign();
        }
        let batch = std::mem::replace(&mut self.cur, next);
        let job = Job {
            batch,
            off: self.off,
            len: write,
            truncate,
            flush: pad,
            counts,
        };
        self.off += keep_from as u64;
        // A part block carried unwritten (not after a flush's padded
        // write); a stream's next flush must still flush it.
        self.appended = !pad && (keep_from < len || self.block == 1);
        for (f, c) in self.flying.iter_mut().zip(&counts) {
            *f += c;
        }
        self.in_flight += 1;
        if let Some((backend, limit)) = &mut self.inline {
            let result = write_job(backend, *limit, &job);
            self.settle_done(Done {
                batch: job.batch,
                counts: job.counts,
                result,
            });
        } else if let Some(jobs) = &self.jobs {
            if jobs.send(job).is_err() {
                self.failed = Some((io::ErrorKind::Other, "the I/O thread ended".into()));
            }
        }
        self.check()
    }

    /// A buffer to fill next: a spare, a new one while fewer than
    /// [`BUFFERS`] exist, else the next one the I/O thread gives back.
    fn next_batch(&mut self) -> io::Result<Batch> {
        self.reap(false);
        if let Some(b) = self.spare.pop() {
            return Ok(b);
        }
        if self.made < BUFFERS {
            self.made += 1;
            return Ok(Batch::new(self.buffer));
        }
        self.reap_one(true);
        match self.spare.pop() {
            Some(b) => Ok(b),
            None => {
                // The I/O thread is gone (it panicked): a buffer of our own,
                // and the failure is reported by the caller's check.
                self.made += 1;
                Ok(Batch::new(self.buffer))
            }
        }
    }

    /// Takes the results the I/O thread has given back (all of them,
    /// waiting, with `wait`).
    pub(crate) fn reap(&mut self, wait: bool) {
        while self.in_flight > 0 && self.reap_one(wait) {}
    }

    /// One result; false when none is ready (or, waiting, none will come).
    fn reap_one(&mut self, wait: bool) -> bool {
        let done = if wait {
            self.results.recv().ok()
        } else {
            self.results.try_recv().ok()
        };
        let Some(done) = done else {
            if wait && self.in_flight > 0 {
                // The I/O thread died with writes in flight.
                self.failed
                    .get_or_insert((io::ErrorKind::Other, "the I/O thread ended".into()));
                for (l, f) in self.lost.iter_mut().zip(&mut self.flying) {
                    *l += std::mem::take(f);
                }
                self.in_flight = 0;
            }
            return false;
        };
        self.settle_done(done);
        true
    }

    /// Counts a write's events as written or lost, and keeps its buffer.
    fn settle_done(&mut self, mut done: Done) {
        self.in_flight -= 1;
        for (f, c) in self.flying.iter_mut().zip(&done.counts) {
            *f -= c;
        }
        match done.result {
            Ok(()) => {
                for (w, c) in self.written.iter_mut().zip(&done.counts) {
                    *w += c;
                }
            }
            Err(e) => {
                self.failed.get_or_insert((e.kind(), e.to_string()));
                for (l, c) in self.lost.iter_mut().zip(&done.counts) {
                    *l += c;
                }
            }
        }
        if done.batch.oversized(self.buffer) {
            self.made -= 1;
        } else {
            done.batch.clear();
            self.spare.push(done.batch);
        }
    }

    /// The first write error, if any.
    pub(crate) fn check(&self) -> io::Result<()> {
        match &self.failed {
            None => Ok(()),
            Some((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
        }
    }

    /// Events written since the last call, by kind.
    pub(crate) fn take_written(&mut self) -> Counts {
        std::mem::replace(&mut self.written, [0; KINDS])
    }

    /// Waits for every write in flight; then the events that will never
    /// be written: those of failed writes and those still in the buffer.
    pub(crate) fn settle(&mut self) -> Counts {
        self.reap(true);
        let mut unwritten = self.lost;
        for &(_, k) in &self.ends {
            unwritten[k as usize] += 1;
        }
        unwritten
    }
}

impl Drop for Output {
    /// Waits for the writes in flight (the process may exit right after).
    fn drop(&mut self) {
        self.jobs = None;
        // Its results, until it ends (it could wait to give one back).
        for _ in self.results.iter() {}
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The I/O thread: writes each job in order; after a failure, writes
/// nothing more and gives every later job back failed.
fn io_loop(
    mut backend: Backend,
    limit: Option<u64>,
    inbox: Receiver<Job>,
    outbox: SyncSender<Done>,
) {
    let mut failed = false;
    for job in inbox {
        let result = if failed {
            Err(io::Error::other("not written: an earlier write failed"))
        } else {
            // A panic here (a bug) is a failed write, said as such.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                write_job(&mut backend, limit, &job)
            }))
            .unwrap_or_else(|_| Err(io::Error::other("the trace I/O thread panicked (a bug)")))
        };
        failed |= result.is_err();
        let done = Done {
            batch: job.batch,
            counts: job.counts,
            result,
        };
        if outbox.send(done).is_err() {
            return;
        }
    }
}

fn write_job(backend: &mut Backend, limit: Option<u64>, job: &Job) -> io::Result<()> {
    let mut data = &job.batch.data()[..job.len];
    // Fault injection: the file holds at most `limit` bytes.
    let full = limit.filter(|&l| job.off + data.len() as u64 > l);
    if let Some(l) = full {
        let mut room = l.saturating_sub(job.off) as usize;
        if let Backend::File { direct, .. } = backend {
            if direct.load(Ordering::Relaxed) {
                room = room / BLOCK * BLOCK;
            }
        }
        data = &data[..room];
    }
    match backend {
        Backend::File {
            file,
            direct,
            advised,
        } => {
            if let Err(e) = file.write_all_at(data, job.off) {
                let refused = e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error());
                if !(refused && direct.load(Ordering::Relaxed)) {
                    return Err(e);
                }
                // The file system opened it with O_DIRECT but refuses the
                // write (its alignment is not ours): through the page
                // cache from here on.
                let flags = rustix::fs::fcntl_getfl(&*file)?;
                rustix::fs::fcntl_setfl(&*file, flags - rustix::fs::OFlags::DIRECT)?;
                direct.store(false, Ordering::Relaxed);
                file.write_all_at(data, job.off)?;
            }
            if let Some(len) = job.truncate.filter(|_| full.is_none()) {
                file.set_len(len)?;
            }
            let end = job.off + data.len() as u64;
            if !direct.load(Ordering::Relaxed) && end >= *advised + (4 << 20) {
                advise_behind(file, end);
                *advised = end;
            }
        }
        Backend::Stream(w) => {
            w.write_all(data)?;
            if job.flush && full.is_none() {
                w.flush()?;
            }
        }
    }
    match full {
        Some(_) => Err(io::Error::from(io::ErrorKind::StorageFull)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::page_cache_probe::{cached_bytes, fincore_or_skip, scratch_dir, skip};
    use std::io::Read;
    use std::path::PathBuf;

    /// A scratch trace file on the build's file system.
    fn scratch(name: &str) -> PathBuf {
        scratch_dir(&format!("output-{name}")).join("trace.jsonl")
    }

    fn read(path: &Path) -> Vec<u8> {
        let mut v = Vec::new();
        File::open(path).unwrap().read_to_end(&mut v).unwrap();
        v
    }

    /// Lines of uneven sizes (a few larger than a buffer), counted by kind.
    fn lines() -> Vec<(Vec<u8>, usize)> {
        let mut x = 7u64;
        (0..6_000u32)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = match i {
                    1000 => BUFFER + 12_345,
                    // Past a buffer's room: the vector moves, and its data
                    // start is realigned.
                    4321 => 3 * BUFFER + 777,
                    _ => 20 + (x >> 33) as usize % 3_000,
                };
                let mut l: Vec<u8> = (0..n)
                    .map(|j| b'a' + ((i as usize + j) % 26) as u8)
                    .collect();
                l.push(b'\n');
                (l, (x >> 20) as usize % KINDS)
            })
            .collect()
    }

    /// Whatever the flush points, the file is the lines in order, byte for
    /// byte, and after every flush it is exactly what was written so far
    /// (no padding left behind); every line is counted once, by kind.
    #[test]
    fn the_file_is_every_line_in_order_and_whole_after_each_flush() {
        let path = scratch("order");
        let mut out = Output::create(&path, None).unwrap();
        let direct = out.is_direct();
        let mut expect = Vec::new();
        let mut counts = [0u64; KINDS];
        let mut written = [0u64; KINDS];
        for (i, (line, kind)) in lines().into_iter().enumerate() {
            out.buf().extend_from_slice(&line);
            out.line(Some(kind)).unwrap();
            expect.extend_from_slice(&line);
            // What --trace-limit compares: every byte of every line so far.
            assert_eq!(out.encoded(), expect.len() as u64);
            counts[kind] += 1;
            if i % 997 == 0 || i % 1013 == 0 {
                out.flush().unwrap();
                out.reap(true);
                out.check().unwrap();
                assert!(read(&path) == expect, "after the flush at line {i}");
            }
            for (w, c) in written.iter_mut().zip(out.take_written()) {
                *w += c;
            }
        }
        out.flush().unwrap();
        let unwritten = out.settle();
        for (w, c) in written.iter_mut().zip(out.take_written()) {
            *w += c;
        }
        assert_eq!(unwritten, [0; KINDS]);
        assert_eq!(written, counts);
        // Every write was aligned: none fell back to the page cache.
        assert_eq!(out.is_direct(), direct, "O_DIRECT given up mid-file");
        drop(out);
        assert!(read(&path) == expect, "the file differs from the lines");
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// A full buffer is written up to its last whole block; the part block
    /// after it reaches the file at the next flush even when no line comes
    /// after the one that filled the buffer.
    /// A buffer is dropped once written only when a huge line grew it past
    /// twice a normal one's size; a normal one is kept for the next fill.
    #[test]
    fn only_a_buffer_grown_past_twice_its_size_is_oversized() {
        let mut b = Batch::new(BLOCK);
        b.vec.extend(std::iter::repeat_n(b'x', BLOCK));
        assert!(!b.oversized(BLOCK));
        b.vec.extend(std::iter::repeat_n(b'x', 3 * BLOCK));
        assert!(b.oversized(BLOCK));
    }

    /// A batch whose data start is off a block boundary (its vector moved)
    /// is shifted back onto one with its data intact, whichever way the
    /// shift goes.
    #[test]
    fn a_realigned_batch_keeps_its_data() {
        for capacity in (64..8 * BLOCK).step_by(700) {
            // One byte past the aligned start, or one before the next (a
            // vector too small for its lead moves as it grows: then its
            // data start is wherever the new one puts it).
            for extra in [1, BLOCK - 1] {
                let mut vec: Vec<u8> = Vec::with_capacity(capacity);
                let lead = vec.as_ptr().align_offset(BLOCK) + extra;
                vec.resize(lead, 0);
                vec.extend_from_slice(b"one line\n");
                let mut b = Batch { vec, lead };
                b.realign();
                assert_eq!(b.data(), b"one line\n", "capacity {capacity}, {extra}");
                assert_eq!(b.data().as_ptr().align_offset(BLOCK), 0);
            }
        }
    }

    #[test]
    fn the_part_block_after_a_full_buffer_reaches_the_file() {
        let path = scratch("tail");
        let mut out = Output::create(&path, None).unwrap();
        let mut line = vec![b'y'; BUFFER + 100];
        line.push(b'\n');
        out.buf().extend_from_slice(&line);
        assert!(out.line(Some(2)).unwrap(), "a full buffer is handed over");
        out.flush().unwrap();
        assert_eq!(out.settle(), [0; KINDS]);
        assert_eq!(out.take_written()[2], 1);
        drop(out);
        assert!(
            read(&path) == line,
            "{} bytes of {}",
            read(&path).len(),
            line.len()
        );
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// The trace goes around the page cache: after 48 MiB of lines (and
    /// flushes between them) almost none of the file is cached, where a
    /// file written through the cache keeps it all (the control).
    #[test]
    fn the_trace_is_written_around_the_page_cache() {
        const MB: usize = 1 << 20;
        if !fincore_or_skip() {
            return;
        }
        let path = scratch("direct");
        let dir = path.parent().unwrap().to_path_buf();
        let mut out = Output::create(&path, None).unwrap();
        if !out.is_direct() {
            // ext4, XFS and btrfs take O_DIRECT: refused there, it is a bug.
            const DIRECT_FS: [i64; 3] = [0xEF53, 0x5846_5342, 0x9123_683E];
            let fs = rustix::fs::statfs(&dir).map_or(0, |f| f.f_type);
            assert!(
                !DIRECT_FS.contains(&fs),
                "O_DIRECT refused on file system 0x{fs:x}"
            );
            std::fs::remove_dir_all(&dir).unwrap();
            return skip(&format!("file system 0x{fs:x} refused O_DIRECT"));
        }
        let line = [b"x".repeat(999), b"\n".to_vec()].concat();
        let mut plain = std::fs::File::create(dir.join("plain")).unwrap();
        for i in 0..48 * MB / line.len() {
            out.buf().extend_from_slice(&line);
            out.line(Some(0)).unwrap();
            plain.write_all(&line).unwrap();
            if i % 10_000 == 0 {
                out.flush().unwrap();
            }
        }
        out.flush().unwrap();
        assert_eq!(out.settle(), [0; KINDS]);
        drop(out);
        plain.sync_data().unwrap();
        let control = cached_bytes(&dir.join("plain"));
        if control < 40 * MB as u64 {
            std::fs::remove_dir_all(&dir).unwrap();
            return skip(&format!(
                "this file system keeps no written file cached ({control} of 48 MiB)"
            ));
        }
        let cached = cached_bytes(&path);
        assert!(
            cached <= 2 * MB as u64,
            "48 MiB written with O_DIRECT, {cached} bytes cached"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A flush with nothing new writes nothing (an idle recorder flushes
    /// every 200 ms).
    #[test]
    fn a_flush_with_nothing_new_writes_nothing() {
        #[derive(Clone, Default)]
        struct Calls(std::sync::Arc<std::sync::atomic::AtomicUsize>);
        impl Write for Calls {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
        }
        // Writes and flushes of the writer, both.
        let calls = Calls::default();
        let mut out = Output::stream(Box::new(calls.clone())).unwrap();
        out.buf().extend_from_slice(b"one\n");
        out.line(Some(1)).unwrap();
        out.flush().unwrap();
        let after_one = calls.0.load(std::sync::atomic::Ordering::Relaxed);
        assert!(after_one > 0);
        out.flush().unwrap();
        out.flush().unwrap();
        assert_eq!(
            calls.0.load(std::sync::atomic::Ordering::Relaxed),
            after_one
        );
        assert_eq!(out.take_written()[1], 1);
    }

    /// A disk that fills: what reached the file is counted written, the
    /// rest lost, and nothing is written after the failure.
    #[test]
    fn a_full_file_counts_what_it_holds_and_loses_the_rest() {
        let path = scratch("full");
        let limit = 3 * BUFFER as u64 + 777;
        let mut out = Output::create(&path, Some(limit)).unwrap();
        let mut total = 0u64;
        let mut err = None;
        for (line, kind) in lines().into_iter().take(3_000) {
            out.buf().extend_from_slice(&line);
            total += 1;
            if let Err(e) = out.line(Some(kind)) {
                err = Some(e);
                break;
            }
        }
        if err.is_none() {
            err = out.flush().err();
        }
        let unwritten = out.settle();
        let err = err.or_else(|| out.check().err()).expect("the write fails");
        assert_eq!(err.kind(), io::ErrorKind::StorageFull, "{err}");
        // Filled to the limit: in whole blocks when written around the page
        // cache (an unaligned last write would give O_DIRECT up).
        let direct = out.is_direct();
        let filled = if direct {
            limit / BLOCK as u64 * BLOCK as u64
        } else {
            limit
        };
        let written: u64 = out.take_written().iter().sum();
        let lost: u64 = unwritten.iter().sum();
        assert_eq!(written + lost, total);
        assert!(written > 0 && lost > 0, "{written} {lost}");
        drop(out);
        let bytes = read(&path);
        assert_eq!(bytes.len() as u64, filled, "limit {limit}, direct {direct}");
        let whole_lines = bytes.iter().filter(|&&b| b == b'\n').count() as u64;
        assert!(
            whole_lines >= written,
            "{whole_lines} lines, {written} counted"
        );
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// A stream's writer is flushed by the next flush even when a full
    /// buffer handed every byte over already (a pipe or a buffered writer
    /// holds them until then: a live reader would wait for them).
    #[test]
    fn a_streams_flush_after_a_full_buffer_flushes_the_writer() {
        #[derive(Clone, Default)]
        struct Held(std::sync::Arc<std::sync::Mutex<(Vec<u8>, Vec<u8>)>>);
        impl Write for Held {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().0.extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                let mut g = self.0.lock().unwrap();
                let held = std::mem::take(&mut g.0);
                g.1.extend_from_slice(&held);
                Ok(())
            }
        }
        let sink = Held::default();
        let mut out = Output::stream(Box::new(sink.clone())).unwrap();
        let mut line = vec![b'z'; STREAM_BUFFER + 10];
        line.push(b'\n');
        out.buf().extend_from_slice(&line);
        assert!(out.line(Some(3)).unwrap(), "a full buffer is handed over");
        out.flush().unwrap();
        assert!(
            sink.0.lock().unwrap().1 == line,
            "the writer was not flushed"
        );
        assert_eq!(out.take_written()[3], 1);
    }

    /// Lines that fill the file exactly to its limit are all written: the
    /// disk is full only past it.
    #[test]
    fn lines_reaching_the_limit_exactly_are_written() {
        let path = scratch("exact");
        let limit = 2 * BLOCK as u64;
        let mut out = Output::create(&path, Some(limit)).unwrap();
        let line = [vec![b'e'; BLOCK - 1], b"\n".to_vec()].concat();
        for _ in 0..2 {
            out.buf().extend_from_slice(&line);
            out.line(Some(1)).unwrap();
        }
        out.flush().unwrap();
        assert_eq!(out.settle(), [0; KINDS]);
        out.check().unwrap();
        assert_eq!(out.take_written()[1], 2);
        drop(out);
        assert_eq!(read(&path).len() as u64, limit);
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// Dropping the output waits for the writes in flight: the process may
    /// exit right after, and the file must then hold every line flushed.
    #[test]
    fn a_dropped_output_has_written_what_was_flushed() {
        let path = scratch("drop");
        let mut out = Output::create(&path, None).unwrap();
        let mut expect = Vec::new();
        for (line, kind) in lines() {
            out.buf().extend_from_slice(&line);
            out.line(Some(kind)).unwrap();
            expect.extend_from_slice(&line);
        }
        out.flush().unwrap();
        drop(out);
        assert!(
            read(&path) == expect,
            "{} of {} bytes",
            read(&path).len(),
            expect.len()
        );
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    /// A stream (any writer) gets the bytes in order, unpadded.
    #[test]
    fn a_stream_gets_the_lines_unpadded() {
        #[derive(Clone, Default)]
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = Shared::default();
        let mut out = Output::stream(Box::new(sink.clone())).unwrap();
        let mut expect = Vec::new();
        for (i, (line, kind)) in lines().into_iter().take(2_000).enumerate() {
            out.buf().extend_from_slice(&line);
            out.line(Some(kind)).unwrap();
            expect.extend_from_slice(&line);
            if i % 301 == 0 {
                out.flush().unwrap();
            }
        }
        out.flush().unwrap();
        assert_eq!(out.settle(), [0; KINDS]);
        drop(out);
        assert!(*sink.0.lock().unwrap() == expect);
    }
}
