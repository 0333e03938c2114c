//! A file written from its start that does not pile up in the page cache:
//! the pcaps written after a run (the trace itself goes around the cache
//! with `O_DIRECT`, see `output.rs`, and is advised away the same way on
//! a file system that refuses it).
//!
//! Full capture writes more than a gigabyte a second. Left to the kernel,
//! every byte stays cached and dirty until writeback catches up: past the
//! kernel's dirty thresholds (10-20 % of memory) the writing thread is
//! throttled, the recorder's writer falls behind and events are dropped
//! (three sustained 6 GB runs: 0-70,760 events dropped, 1-2 GB of payload
//! shed; bench/2026-11-30-drop-behind.txt). Behind the write position the
//! file's pages are advised away as the write goes: `POSIX_FADV_DONTNEED`
//! starts writeback of dirty pages without waiting and drops those already
//! written, so the trace's share of the cache stays a few megabytes that
//! are reused while warm (the same runs: 0 events dropped, Dirty at most
//! 4 MB; with the advice on its own thread, at most 161 MB in two runs).
//! Nor does a long trace evict the rest of the machine's cache. The cost:
//! the disk writes happen during the run rather than after it, and the
//! analysis after a run reads the file back from disk. The pcaps written
//! after a run go the same way (a 3.2 GB pcap left 2.3 GB dirty).

use std::fs::File;
use std::io::Write;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes written between two pieces of advice.
const STEP: u64 = 4 << 20;
/// How far behind the write position each piece of advice reaches: pages
/// still dirty or under writeback when it is given are met again by the
/// next ones (32 times), so a disk slower than the writer still gets its
/// pages dropped once written. Advice over a range already dropped costs
/// little (the kernel walks only the pages present).
const REACH: u64 = 128 << 20;

/// A file written sequentially from its start whose pages are dropped from
/// the page cache once written back (see the module's doc).
///
/// The advice is given on a thread of its own: starting writeback can wait
/// in the block layer or on the file system's journal, and the writer
/// thread is the one whose waits drop events. The advisor always advises
/// up to the latest position it was given (none is queued: one piece of
/// advice covers what a skipped one would have).
pub(crate) struct DropBehind {
    file: File,
    /// Bytes written so far (the write position).
    written: u64,
    /// The write position at which advice is given next.
    next: u64,
    /// None when the advisor thread could not be started: then the advice
    /// is given in line.
    advisor: Option<(Arc<Advisor>, std::thread::JoinHandle<()>)>,
}

/// What the writer tells the advisor thread.
struct Advisor {
    /// The write position to advise up to.
    latest: AtomicU64,
    /// The file is finished: advise up to `latest` and end.
    done: AtomicBool,
}

impl DropBehind {
    pub(crate) fn new(file: File) -> DropBehind {
        let advisor = file.try_clone().and_then(|f| {
            let shared = Arc::new(Advisor {
                latest: AtomicU64::new(0),
                done: AtomicBool::new(false),
            });
            let theirs = shared.clone();
            std::thread::Builder::new()
                .name("h2probe-advice".into())
                .spawn(move || {
                    let mut advised = 0;
                    loop {
                        // `done` first: read after it, `latest` is the
                        // final position once `done` is set (read before,
                        // a position stored just before the end was lost).
                        let done = theirs.done.load(Ordering::Acquire);
                        let latest = theirs.latest.load(Ordering::Acquire);
                        if latest > advised {
                            advise_behind(&f, latest);
                            advised = latest;
                        } else if done {
                            break;
                        } else {
                            std::thread::park();
                        }
                    }
                })
                .map(|thread| (shared, thread))
        });
        DropBehind {
            file,
            written: 0,
            next: STEP,
            advisor: advisor.ok(),
        }
    }
}

/// Drops the pages of `file` up to `written` that are written back and
/// starts writeback of the dirty ones, over the last [`REACH`] bytes.
pub(crate) fn advise_behind(file: &File, written: u64) {
    // Not the page being filled: advice would start its writeback and the
    // next write would dirty it again (and, on storage that keeps pages
    // stable under writeback, wait for it). 64 KiB covers every page size.
    let written = written & !0xffff;
    if written == 0 {
        // (A length of 0 would mean "to the end of the file".)
        return;
    }
    let start = written.saturating_sub(REACH);
    // Advice only: a file system or file kind that does not take it
    // (a pipe, some network file systems) is written all the same.
    let _ = rustix::fs::fadvise(
        file,
        start,
        NonZeroU64::new(written - start),
        rustix::fs::Advice::DontNeed,
    );
}

impl Write for DropBehind {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written >= self.next {
            match &self.advisor {
                Some((advisor, thread)) => {
                    advisor.latest.store(self.written, Ordering::Release);
                    thread.thread().unpark();
                }
                None => advise_behind(&self.file, self.written),
            }
            self.next = self.written + STEP;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for DropBehind {
    fn drop(&mut self) {
        if let Some((advisor, thread)) = self.advisor.take() {
            advisor.done.store(true, Ordering::Release);
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::page_cache_probe::{cached_bytes, fincore_or_skip, scratch_dir, skip};
    use std::io::Read;
    use std::path::PathBuf;

    #[test]
    fn what_is_written_reads_back_whole() {
        let dir = Scratch(scratch_dir("drop-behind"));
        let path = dir.0.join("t");
        let mut w = DropBehind::new(File::create(&path).unwrap());
        // Past several pieces of advice, in uneven writes.
        let mut expect = Vec::new();
        let mut i = 0u32;
        while expect.len() < (3 * STEP + STEP / 2) as usize {
            let piece: Vec<u8> = (0..(1000 + i % 70_000)).map(|j| (i ^ j) as u8).collect();
            w.write_all(&piece).unwrap();
            expect.extend_from_slice(&piece);
            i += 1;
        }
        w.flush().unwrap();
        assert_eq!(w.written, expect.len() as u64);
        assert!(w.next > w.written && w.next <= w.written + STEP);
        drop(w);
        let mut back = Vec::new();
        File::open(&path).unwrap().read_to_end(&mut back).unwrap();
        assert!(back == expect, "the file differs from what was written");
    }

    /// Removes a scratch directory however the test ends.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Written back, a plain file's pages stay cached; behind a DropBehind
    /// the next piece of advice drops them.
    #[test]
    fn pages_written_back_leave_the_page_cache() {
        const MB: u64 = 1 << 20;
        if !fincore_or_skip() {
            return;
        }
        let dir = Scratch(scratch_dir("drop-behind-cache"));
        const TMPFS_MAGIC: u64 = 0x0102_1994;
        if rustix::fs::statfs(&dir.0).is_ok_and(|f| f.f_type as u64 == TMPFS_MAGIC) {
            return skip("the build directory is on a tmpfs, whose pages advice cannot drop");
        }
        let block = vec![7u8; 256 << 10];
        let fill = |w: &mut dyn Write, bytes: u64| {
            for _ in 0..bytes / block.len() as u64 {
                w.write_all(&block).unwrap();
            }
        };
        let plain_path = dir.0.join("plain");
        let mut plain = File::create(&plain_path).unwrap();
        fill(&mut plain, 64 * MB);
        plain.sync_data().unwrap();
        let plain_cached = cached_bytes(&plain_path);
        if plain_cached < 48 * MB {
            return skip(&format!(
                "this file system does not keep a written file's pages cached \
                 ({plain_cached} of 64 MiB): nothing for advice to drop"
            ));
        }
        let path = dir.0.join("dropped");
        let mut w = DropBehind::new(File::create(&path).unwrap());
        fill(&mut w, 64 * MB);
        // Everything clean now: the advice at the next step meets it all
        // (given by the time the advisor thread is joined, on drop).
        w.file.sync_data().unwrap();
        fill(&mut w, STEP);
        drop(w);
        let cached = cached_bytes(&path);
        assert!(
            cached <= 16 * MB,
            "68 MiB written behind DropBehind, {cached} bytes still cached"
        );
    }
}
