//! The trace file as a stream that does not pile up in the page cache.
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
//! are reused while warm (the same runs: 0 dropped, Dirty at most 4 MB).
//! Nor does a long trace evict the rest of the machine's cache. The cost:
//! the disk writes happen during the run rather than after it, and the
//! analysis after a run reads the file back from disk.

use std::fs::File;
use std::io::Write;
use std::num::NonZeroU64;

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
pub(super) struct DropBehind {
    file: File,
    /// Bytes written so far (the write position).
    written: u64,
    /// The write position at which advice is given next.
    next: u64,
}

impl DropBehind {
    pub(super) fn new(file: File) -> DropBehind {
        DropBehind {
            file,
            written: 0,
            next: STEP,
        }
    }

    fn advise(&self) {
        let start = self.written.saturating_sub(REACH);
        // Advice only: a file system or file kind that does not take it
        // (a pipe, some network file systems) is written all the same.
        let _ = rustix::fs::fadvise(
            &self.file,
            start,
            NonZeroU64::new(self.written - start),
            rustix::fs::Advice::DontNeed,
        );
    }
}

impl Write for DropBehind {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        if self.written >= self.next {
            self.advise();
            self.next = self.written + STEP;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::path::PathBuf;

    /// A fresh directory on the project's own file system (the system's
    /// temporary directory may be a tmpfs, whose pages advice cannot drop).
    fn scratch(name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join(format!("h2probe-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn what_is_written_reads_back_whole() {
        let dir = scratch("drop-behind");
        let path = dir.join("t");
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
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Bytes of `path` in the page cache, by util-linux's `fincore`; None
    /// (said loudly) when it is missing, a failure under CI=true.
    fn cached_bytes(path: &std::path::Path) -> Option<u64> {
        let out = match std::process::Command::new("fincore")
            .args(["--bytes", "--noheadings", "--output", "RES"])
            .arg(path)
            .output()
        {
            Ok(out) => out,
            Err(e) => {
                assert!(
                    std::env::var("CI").map_or(true, |v| v != "true"),
                    "CI=true but fincore (util-linux) is missing: {e}"
                );
                eprintln!("\n!!!!! SKIPPED: fincore (util-linux) is missing: {e} !!!!!\n");
                return None;
            }
        };
        assert!(out.status.success(), "fincore failed: {out:?}");
        Some(
            String::from_utf8(out.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap(),
        )
    }

    /// Written back, a plain file's pages stay cached; behind a DropBehind
    /// the next piece of advice drops them.
    #[test]
    fn pages_written_back_leave_the_page_cache() {
        const MB: u64 = 1 << 20;
        let dir = scratch("drop-behind-cache");
        let block = vec![7u8; 256 << 10];
        let fill = |w: &mut dyn Write, bytes: u64| {
            for _ in 0..bytes / block.len() as u64 {
                w.write_all(&block).unwrap();
            }
        };
        let plain_path = dir.join("plain");
        let mut plain = File::create(&plain_path).unwrap();
        fill(&mut plain, 64 * MB);
        plain.sync_data().unwrap();
        let Some(plain_cached) = cached_bytes(&plain_path) else {
            return;
        };
        let path = dir.join("dropped");
        let mut w = DropBehind::new(File::create(&path).unwrap());
        fill(&mut w, 64 * MB);
        // Everything clean now: the advice at the next step meets it all.
        w.file.sync_data().unwrap();
        fill(&mut w, STEP);
        let cached = cached_bytes(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            plain_cached >= 48 * MB,
            "a plain file written and synced keeps its pages cached (the control): {plain_cached} bytes"
        );
        assert!(
            cached <= 16 * MB,
            "68 MiB written behind DropBehind, {cached} bytes still cached"
        );
    }
}
