//! Exact time order for a trace the reorder window cannot sort: an event
//! written more than [`super::reorder::WINDOW_NS`] after later ones (a
//! thread descheduled between its clock read and the recorder, a client
//! schedule that woke up late and records what was due) would otherwise be
//! analysed out of place, and every figure after it would depend on the
//! order lines reached the file. This sorts the whole trace instead, in
//! bounded memory: runs of [`RUN_EVENTS`] events are sorted in memory and
//! written to anonymous temporary files (`$TMPDIR`), then merged. The order
//! is the reorder buffer's own (`t`, then content), so a trace both can sort
//! gives the same analysis byte for byte.

use super::reorder::Held;
use crate::schema::{Event, Line};
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Seek, Write};

/// Events sorted in memory before they are written out as one run (about
/// 16 MB of boxed events without payloads; a few in tests, to reach the
/// merges).
const RUN_EVENTS: usize = if cfg!(test) { 64 } else { 1 << 16 };
/// Runs on disk merged into one before another is written: the files
/// open at once stay bounded however long the trace.
const MAX_RUNS: usize = if cfg!(test) { 4 } else { 128 };

/// Sorts every event pushed; hands them out in time order at [`finish`].
///
/// [`finish`]: SpillSort::finish
#[derive(Default)]
pub struct SpillSort {
    held: Vec<Held>,
    runs: Vec<File>,
    /// The first I/O error (a full disk): the sort is void, [`finish`]
    /// returns it.
    ///
    /// [`finish`]: SpillSort::finish
    error: Option<io::Error>,
}

impl SpillSort {
    /// Adds `e`, read from line `line`.
    pub fn push(&mut self, e: Event, line: u64) {
        if self.error.is_some() {
            return;
        }
        self.held.push(Held::new(e, line));
        if self.held.len() >= RUN_EVENTS {
            if let Err(e) = self.spill() {
                self.error = Some(e);
                self.held = Vec::new();
                self.runs.clear();
            }
        }
    }

    /// Hands out every event pushed, in time order, with its line.
    pub fn finish(mut self, mut out: impl FnMut(Event, u64)) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let held = sorted(std::mem::take(&mut self.held));
        merge(self.runs, held, |h| {
            out(*h.1, h.2);
            Ok(())
        })
    }

    /// Writes the events held as one sorted run; merges the runs into one
    /// when there are [`MAX_RUNS`].
    fn spill(&mut self) -> io::Result<()> {
        let held = sorted(std::mem::take(&mut self.held));
        let run = write_run(|w| held.into_iter().try_for_each(|h| write_held(w, &h)))?;
        self.runs.push(run);
        if self.runs.len() >= MAX_RUNS {
            let runs = std::mem::take(&mut self.runs);
            let merged = write_run(|w| merge(runs, Vec::new(), |h| write_held(w, &h)))?;
            self.runs.push(merged);
        }
        Ok(())
    }
}

/// `held` in time order (earliest first). [`Held`]'s order is reversed for
/// the reorder buffer's max-heap, hence `b.cmp(a)`.
fn sorted(mut held: Vec<Held>) -> Vec<Held> {
    held.sort_unstable_by(|a, b| b.cmp(a));
    held
}

/// A new temporary file filled by `fill`, rewound for reading.
fn write_run(fill: impl FnOnce(&mut BufWriter<&mut File>) -> io::Result<()>) -> io::Result<File> {
    let mut file = tempfile::tempfile()?;
    let mut w = BufWriter::with_capacity(1 << 16, &mut file);
    fill(&mut w)?;
    w.flush()?;
    drop(w);
    file.rewind()?;
    Ok(file)
}

/// One line of a run: the event's line in the trace, a tab, the event as
/// the trace writes it.
fn write_held(w: &mut impl Write, h: &Held) -> io::Result<()> {
    let mut text = Vec::with_capacity(160);
    text.extend_from_slice(itoa::Buffer::new().format(h.2).as_bytes());
    text.push(b'\t');
    crate::jsonl::write_event(&mut text, &h.1);
    w.write_all(&text)
}

/// Reads one run back, line by line.
struct RunReader {
    input: BufReader<File>,
    buf: String,
}

impl RunReader {
    fn next(&mut self) -> io::Result<Option<Held>> {
        self.buf.clear();
        if self.input.read_line(&mut self.buf)? == 0 {
            return Ok(None);
        }
        let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
        let (line, text) = self
            .buf
            .trim_end()
            .split_once('\t')
            .ok_or_else(|| bad("a sort run's line has no tab".into()))?;
        let line = line
            .parse()
            .map_err(|e| bad(format!("a sort run's line number: {e}")))?;
        match Line::parse(text) {
            Ok(Line::Event(e)) => Ok(Some(Held::new(e, line))),
            Ok(_) => Err(bad("a sort run holds a header or footer".into())),
            Err(e) => Err(bad(format!("a sort run's event: {e}"))),
        }
    }
}

/// The head of one source in the merge, with the source's index.
struct Head(Held, usize);

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

/// Merges the sorted `runs` and the sorted `mem` into `out`, earliest
/// first.
fn merge(
    runs: Vec<File>,
    mem: Vec<Held>,
    mut out: impl FnMut(Held) -> io::Result<()>,
) -> io::Result<()> {
    let mut readers: Vec<RunReader> = runs
        .into_iter()
        .map(|f| RunReader {
            input: BufReader::with_capacity(1 << 16, f),
            buf: String::new(),
        })
        .collect();
    let mut mem = mem.into_iter();
    let in_memory = readers.len();
    let mut heap = BinaryHeap::with_capacity(readers.len() + 1);
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some(h) = r.next()? {
            heap.push(Head(h, i));
        }
    }
    if let Some(h) = mem.next() {
        heap.push(Head(h, in_memory));
    }
    while let Some(Head(h, i)) = heap.pop() {
        let next = if i == in_memory {
            mem.next()
        } else {
            readers[i].next()?
        };
        if let Some(n) = next {
            heap.push(Head(n, i));
        }
        out(h)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::reorder::Reorder;
    use crate::schema::{ChunkEv, Dir, Endpoint, FrameEv, FrameType, Kind};

    fn ev(t: u64, i: u64) -> Event {
        if i % 3 == 0 {
            Event {
                t,
                ep: Endpoint::Client,
                conn: 1,
                stream: 1,
                kind: Kind::Frame(FrameEv {
                    dir: Dir::Out,
                    offset: i,
                    frame: FrameType::DATA,
                    len: 10,
                    ..FrameEv::default()
                }),
            }
        } else {
            Event {
                t,
                ep: Endpoint::Server,
                conn: 1,
                stream: (i % 7) as u32,
                kind: Kind::Chunk(ChunkEv { len: i as u32 }),
            }
        }
    }

    /// Five runs' worth of events and some, shuffled far beyond any window
    /// (ties included): the sort hands out what the reorder buffer hands
    /// out for the same events in order, every event once.
    #[test]
    fn a_shuffled_trace_comes_out_as_the_window_sorts_it_in_order() {
        let n = 5 * RUN_EVENTS as u64 + 37;
        let events: Vec<(Event, u64)> = (0..n).map(|i| (ev(i / 2 * 1_000, i), i + 2)).collect();
        let mut want = vec![];
        let mut r = Reorder::default();
        for (e, line) in events.clone() {
            r.push(e, line, |e, line| want.push((e, line)));
        }
        r.finish(|e, line| want.push((e, line)));
        assert_eq!(r.late, 0);
        // A fixed permutation that moves events across the whole trace.
        let mut shuffled = events;
        let len = shuffled.len();
        for i in 0..len {
            let j = (i * 7_919 + 13) % len;
            shuffled.swap(i, j);
        }
        let mut s = SpillSort::default();
        for (e, line) in shuffled {
            s.push(e, line);
        }
        // Four runs merged into one at the fourth, one more since; the
        // rest in memory.
        assert_eq!(s.runs.len(), 2);
        assert_eq!(s.held.len(), 37);
        let mut got = vec![];
        s.finish(|e, line| got.push((e, line))).unwrap();
        assert_eq!(got.len(), want.len());
        // Equal events (same key and text) may swap lines; the events agree.
        let strip = |v: &[(Event, u64)]| v.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>();
        assert_eq!(strip(&got), strip(&want));
    }
}
