//! Streaming trace reader: one line at a time, never the whole file.

use crate::schema::{Event, Footer, Header, Line};
use std::io::{BufRead, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of trace files this process has read through [`TraceReader::open`]
/// (compressed bytes for a `.gz`): what a progress display samples while a
/// long trace is analysed or exported. Only ever grows.
pub static BYTES_READ: AtomicU64 = AtomicU64::new(0);

/// A file that adds what it reads to [`BYTES_READ`] (one atomic add per
/// 64 KiB read, not per line).
struct Counted<R>(R);

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        BYTES_READ.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A trace line that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("line {line}: {}", within_line(cause))]
    Corrupt { line: u64, cause: serde_json::Error },
    /// A line that parses but cannot describe a real event (a frame longer
    /// than HTTP/2 allows): skipped like a corrupt one.
    #[error("line {line}: {what}")]
    Impossible { line: u64, what: String },
    /// A line that is not UTF-8: skipped like a corrupt one.
    #[error("line {line}: not UTF-8 text")]
    NotText { line: u64 },
    /// A line longer than any the writer produces: read to its end without
    /// being held (a tail of zeros a crash left read as one line of
    /// gigabytes, and the analysis ran out of memory), skipped like a
    /// corrupt one.
    #[error("line {line}: {bytes} bytes (its line end included), longer than any trace line ({} MiB at most)", MAX_LINE >> 20)]
    TooLong { line: u64, bytes: u64 },
    /// The input's own error (a damaged compressed stream): the reading
    /// ends there.
    #[error("line {line}: {cause}")]
    Io { line: u64, cause: std::io::Error },
    #[error("line 1: not an h2probe trace (first line is not a header)")]
    NoHeader,
    /// Nothing at all: a recording that never wrote its header.
    #[error("an empty file, not an h2probe trace (no header line)")]
    Empty,
    #[error("trace schema {found} is newer than this reader's {supported}; upgrade h2probe")]
    Schema { found: u32, supported: u32 },
}

impl ReadError {
    /// One line lost (not an event, or not UTF-8), the reading going on;
    /// not an error of the input itself, which ends the reading there (a
    /// cut, said by [`Ending::Truncated`]).
    pub fn is_one_line(&self) -> bool {
        matches!(
            self,
            ReadError::Corrupt { .. }
                | ReadError::NotText { .. }
                | ReadError::Impossible { .. }
                | ReadError::TooLong { .. }
        )
    }
}

/// Corrupt lines a command's warnings name one by one (`analyze`, `export`,
/// `merge`); past them, a count.
pub const NAMED_SKIPS: u64 = 5;

/// The longest line the reader holds: longer than any the writer produces
/// (a 16 MiB DATA frame's payload is 22.4 MB of base64; a SETTINGS frame of
/// 16 MiB lists 2.8 M settings in ≈ 45 MB).
pub const MAX_LINE: usize = 64 << 20;

/// The longest header line the reader looks at (the writer's is ≈ 150 B).
const MAX_HEADER: usize = 64 << 10;

/// Lines after a damaged header searched for the first event, whose `t`
/// stands in for the origin.
const HEADER_SEARCH: u64 = 16;

/// `read_until(b'\n')` holding at most `cap` bytes in `out`: a longer line
/// is read to its end, or with `stop_at_cap` only to the cap, and its bytes
/// dropped. Returns the bytes read and whether `out` holds the whole line.
fn read_line_capped<R: BufRead>(
    input: &mut R,
    out: &mut Vec<u8>,
    cap: usize,
    stop_at_cap: bool,
) -> std::io::Result<(u64, bool)> {
    let (mut n, mut whole) = (0u64, true);
    loop {
        let (done, used) = {
            let buf = match input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let (done, used) = match memchr::memchr(b'\n', buf) {
                Some(i) => (true, i + 1),
                None => (buf.is_empty(), buf.len()),
            };
            if whole && out.len() + used <= cap {
                out.extend_from_slice(&buf[..used]);
            } else if whole {
                whole = false;
                *out = Vec::new();
            }
            (done, used)
        };
        input.consume(used);
        n += used as u64;
        if done || (!whole && stop_at_cap) {
            return Ok((n, whole));
        }
    }
}

/// The JSON parser's error with its place in the line as a column: it
/// counts lines within the one line it was given ("at line 1 column 2"),
/// which beside the trace's own line number reads as a second, wrong one.
fn within_line(cause: &serde_json::Error) -> String {
    let text = cause.to_string();
    match text.rfind(" at line ") {
        Some(i) if cause.column() > 0 => format!("{} (column {})", &text[..i], cause.column()),
        _ => text,
    }
}

/// A header line that is not JSON, with an event after it: the trace is
/// read as the current schema, its origin meta.json's clock anchor
/// ([`TraceReader::open`]) or else the first event's `t`. Displayed as the
/// warning that says so.
#[derive(Debug, Clone, PartialEq)]
pub struct DamagedHeader {
    /// The JSON parser's complaint about line 1.
    pub why: String,
    pub origin_from_meta: bool,
    /// The origin a header that parses gave (mono, unix ns), when it is
    /// judged damaged for coming after the first event: meta.json agreeing
    /// with it vouches for the header, and the first event is the damage.
    pub stated_origin: Option<(u64, u64)>,
}

impl std::fmt::Display for DamagedHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let origin = if self.origin_from_meta {
            "meta.json's clock anchor"
        } else {
            "the first event's time"
        };
        write!(
            f,
            "line 1: the header is damaged ({}); the trace is read as schema {}, its origin {origin}",
            self.why,
            crate::schema::SCHEMA_VERSION
        )
    }
}

/// The line after the header, read ahead (see [`TraceReader::new`]).
#[derive(Debug)]
enum Pending {
    Line(String),
    TooLong(u64),
    NotText,
}

/// How the trace ended, known once the reader is exhausted.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Ending {
    /// Not yet at the end.
    #[default]
    Open,
    /// A footer line closed the trace.
    Clean(Footer),
    /// No footer: the writer stopped without finishing (crash, kill, disk full).
    NoFooter,
    /// The last line was cut short mid-write; `line` is its number. Everything
    /// before it was read.
    Truncated { line: u64 },
}

/// Iterates the events of a trace, streaming. The header is read on open.
pub struct TraceReader<R> {
    input: R,
    buf: String,
    line: u64,
    header: Header,
    ending: Ending,
    /// Lines with an unknown `type` that were skipped.
    pub unknown: u64,
    pub first_unknown_line: Option<u64>,
    /// Frames whose `payload` was not valid base64 or not `len` bytes: kept
    /// without it (an export writes zeros there), the first one's line.
    pub bad_payloads: u64,
    pub first_bad_payload_line: Option<u64>,
    /// Frames come without their `payload` (still checked against `len`):
    /// see [`TraceReader::without_payloads`].
    drop_payloads: bool,
    /// A line without its payload ([`TraceReader::without_payloads`]).
    scratch: String,
    /// The first line with content after the footer, if any: the footer
    /// ends the reading, and what follows (a second trace joined on, a
    /// damaged file) is not read.
    pub after_footer: Option<u64>,
    /// The last damaged line that reads as a footer (`"type":"footer"`):
    /// without a sound one after it, the trace has a footer whose counts
    /// are lost, not a writer that did not finish.
    pub damaged_footer: Option<u64>,
    /// The input's own read error (not a cut), if reading met one, even
    /// past the footer: a compressed trace whose checksum, checked at its
    /// end, fails, or whose stream breaks in the middle. Its bytes may be
    /// wrong anywhere before the error (deflate cannot tell), so nothing
    /// read can be trusted as the writer wrote it.
    pub read_error: Option<String>,
    /// The header line was damaged, or its origin comes after the first
    /// event, and line 2 is an event: the trace is read all the same (see
    /// [`DamagedHeader`]).
    pub damaged_header: Option<DamagedHeader>,
    /// Line 2, read on open to tell a damaged header from a file that is
    /// not a trace and to judge the header's origin: handed out first.
    pending: std::collections::VecDeque<Pending>,
}

/// Why an event that parses cannot be real, if so: a frame longer than
/// the 24-bit length field (RFC 9113 §4.1) holds (an edited `len` of
/// 99,999,999 failed the checks and made the pcap 105 MB of zeros), or a
/// `t` before the trace's origin.
fn impossible(e: &Event, origin: u64) -> Option<String> {
    const MAX_FRAME: u32 = (1 << 24) - 1;
    if e.t < origin {
        // The writer anchors the clock before anything is stamped (a
        // merge's origin is its earliest input's): such a `t` (0, say) is
        // damage, and read as a time it stretched the run to hours.
        return Some(format!(
            "t {} is before the trace's origin ({}): not a time of this recording",
            e.t, origin
        ));
    }
    use crate::schema::Kind;
    // A time inside an event is of the same recording, and no later than
    // the event (an interval's start; a send's begin): `start: 0` made one
    // interval of 46,165 s in a 3 s run, every check holding.
    let within = |what: &str, at: u64| {
        (at < origin || at > e.t).then(|| {
            format!(
                "{} {what} {at} is outside [the trace's origin {origin}, its t {}]: not a time of this recording",
                e.kind.name(),
                e.t
            )
        })
    };
    match &e.kind {
        Kind::Frame(f) if f.len > MAX_FRAME => Some(format!(
            "a {} frame of {} bytes: an HTTP/2 frame holds at most {MAX_FRAME} (RFC 9113 §4.1)",
            f.frame, f.len
        )),
        // The window figures count the typed increment: one its own frame
        // bytes contradict is damage (an edited 0 failed a check 23 lines
        // later, on a DATA frame that was sound).
        Kind::Frame(f) if f.frame == crate::schema::FrameType::WINDOW_UPDATE => {
            let bytes = f
                .payload
                .as_ref()
                .and_then(|p| <[u8; 4]>::try_from(&p.0[..]).ok());
            match (f.increment, bytes) {
                (Some(i), Some(b)) if u32::from_be_bytes(b) & 0x7fff_ffff != i => Some(format!(
                    "a WINDOW_UPDATE whose increment {i} is not its own bytes' {}",
                    u32::from_be_bytes(b) & 0x7fff_ffff
                )),
                _ => None,
            }
        }
        Kind::SocketBlocked(i) => within("start", i.start),
        Kind::WindowBlocked(w) => within("start", w.start),
        Kind::Send(s) => within("begin", s.begin).or_else(|| within("scheduled", s.scheduled)),
        _ => None,
    }
}

/// The trace file of a run directory: `trace.jsonl`, or `trace.jsonl.gz`.
pub fn trace_path(dir: &Path) -> Option<std::path::PathBuf> {
    ["trace.jsonl", "trace.jsonl.gz"]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

/// Opens the trace of a run directory; returns its path with the reader.
pub fn open_run(
    dir: &Path,
) -> Result<(std::path::PathBuf, TraceReader<Box<dyn BufRead + Send>>), OpenError> {
    let path = trace_path(dir).ok_or_else(|| OpenError::no_trace_in(dir))?;
    let r = TraceReader::open(&path)?;
    Ok((path, r))
}

impl TraceReader<Box<dyn BufRead + Send>> {
    /// Opens a trace file, gzip-compressed or not (detected by its magic bytes).
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        let io = |e| OpenError::Io {
            path: path.display().to_string(),
            cause: e,
        };
        let mut f = std::io::BufReader::with_capacity(
            1 << 16,
            Counted(std::fs::File::open(path).map_err(io)?),
        );
        let gz = f.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        let input: Box<dyn BufRead + Send> = if gz {
            Box::new(std::io::BufReader::with_capacity(
                1 << 16,
                flate2::bufread::MultiGzDecoder::new(f),
            ))
        } else {
            Box::new(f)
        };
        let mut r = TraceReader::new(input).map_err(|e| OpenError::Read {
            path: path.display().to_string(),
            cause: e,
        })?;
        // A damaged header: the run's own origin, as its meta.json has it.
        let clock = path
            .parent()
            .filter(|_| r.damaged_header.is_some())
            .and_then(|dir| crate::meta::Meta::read(dir).ok())
            .and_then(|m| m.clock);
        // A header that parses, judged damaged only for an origin after the
        // first event, with meta.json's anchor the same: the header stands,
        // and that first event is the damage (a corrupt line; one edited
        // line 2 made a 3 s run span 48,825 s).
        let stated = r.damaged_header.as_ref().and_then(|d| d.stated_origin);
        if let (Some(c), Some((mono, unix))) = (&clock, stated) {
            if (c.origin_mono_ns, c.origin_unix_ns) == (mono, unix) {
                r.header.origin_mono_ns = mono;
                r.header.origin_unix_ns = unix;
                r.damaged_header = None;
                return Ok(r);
            }
        }
        let anchor = clock.filter(|c| c.origin_mono_ns <= r.header.origin_mono_ns);
        if let (Some(c), Some(damaged)) = (anchor, r.damaged_header.as_mut()) {
            r.header.origin_mono_ns = c.origin_mono_ns;
            r.header.origin_unix_ns = c.origin_unix_ns;
            damaged.origin_from_meta = true;
        }
        Ok(r)
    }
}

impl OpenError {
    /// `dir` holds no trace: said as what it is (missing, a file, or a
    /// directory without one).
    pub fn no_trace_in(dir: &Path) -> OpenError {
        let d = dir.display().to_string();
        if dir.is_file() {
            let parent = dir.parent().filter(|p| !p.as_os_str().is_empty());
            OpenError::AFile {
                parent: parent.unwrap_or(Path::new(".")).display().to_string(),
                dir: d,
            }
        } else if !dir.exists() {
            OpenError::Missing { dir: d }
        } else if dir.join("comparison.json").is_file() {
            OpenError::Comparison { dir: d }
        } else if let Some(odd) = ["trace.jsonl", "trace.jsonl.gz"]
            .iter()
            .find_map(|n| not_a_file(&dir.join(n)))
        {
            // There, but not a file one can read (it was "no trace.jsonl
            // here" for a directory, a FIFO or a broken link).
            odd
        } else if made_without_a_trace(dir) {
            OpenError::NoTraceRun { dir: d }
        } else {
            OpenError::NotARun { dir: d }
        }
    }
}

/// `dir`'s meta.json says its run recorded no trace (`--no-trace`).
fn made_without_a_trace(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("meta.json")) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(&text)
        .is_ok_and(|m| m["config"]["output"]["no_trace"] == true)
}

/// What stands at `path` when it is there but not a regular file (a
/// directory, a FIFO, a dangling or looping symbolic link).
fn not_a_file(path: &Path) -> Option<OpenError> {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).ok()?;
    let what = match std::fs::metadata(path) {
        Err(e) => format!("a symbolic link that leads nowhere readable ({e})"),
        Ok(m) if m.is_dir() => "a directory".to_string(),
        Ok(m) if m.file_type().is_fifo() => "a FIFO".to_string(),
        Ok(m) if !m.is_file() => "not a regular file".to_string(),
        Ok(_) => return None,
    };
    Some(OpenError::NotAFile {
        path: path.display().to_string(),
        what,
    })
}

/// Opening a trace file failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{dir}: no trace.jsonl here; is this a run directory?")]
    NotARun { dir: String },
    /// A run made with `--no-trace` (its meta.json says so).
    #[error("{dir}: a --no-trace run; it recorded no trace, so there is nothing to analyse (meta.json holds its configuration)")]
    NoTraceRun { dir: String },
    #[error("{dir}: no such directory")]
    Missing { dir: String },
    #[error("{path} is {what}, not a trace file")]
    NotAFile { path: String, what: String },
    /// What `compare` writes (beside the runs, under `captures/`).
    #[error("{dir} is a comparison (`compare` wrote it), not a run directory")]
    Comparison { dir: String },
    #[error("{dir} is a file: give the run directory that holds it ({parent})")]
    AFile { dir: String, parent: String },
    #[error("{path}: {cause}")]
    Io { path: String, cause: std::io::Error },
    #[error("{path}: {cause}")]
    Read { path: String, cause: ReadError },
}

impl<R: BufRead> TraceReader<R> {
    pub fn new(mut input: R) -> Result<Self, ReadError> {
        let mut raw = Vec::new();
        let (n, whole) = read_line_capped(&mut input, &mut raw, MAX_HEADER, true)
            .map_err(|cause| ReadError::Io { line: 1, cause })?;
        if n == 0 {
            return Err(ReadError::Empty);
        }
        if !whole {
            return Err(ReadError::NoHeader);
        }
        let buf = String::from_utf8_lossy(&raw).into_owned();
        // The line after the header, read ahead: the first event's `t`
        // judges the header's origin (and stands in for it when the header
        // is damaged). Given back to `next_event` as it was read.
        let peek = |input: &mut R, line: u64| -> Result<(Pending, Option<Event>), ReadError> {
            let mut raw = Vec::new();
            let (n, whole) = read_line_capped(input, &mut raw, MAX_LINE + 1, false)
                .map_err(|cause| ReadError::Io { line, cause })?;
            if !whole {
                return Ok((Pending::TooLong(n), None));
            }
            let Ok(second) = String::from_utf8(raw) else {
                return Ok((Pending::NotText, None));
            };
            let first = match Line::parse(second.trim_end()) {
                Ok(Line::Event(e)) => Some(e),
                _ => None,
            };
            Ok((Pending::Line(second), first))
        };
        let (header, damaged_header, pending) = match Line::parse(buf.trim_end()) {
            Ok(Line::Header(mut h)) => {
                let (p2, first) = peek(&mut input, 2)?;
                let mut pending = std::collections::VecDeque::from([p2]);
                // An origin after the first event is damage in the header
                // (every event read as before the origin, the header
                // believed): read as a damaged header's, unless the next
                // event is within it (then the first is the damaged line:
                // one edited line 2 made a 3 s run span 48,825 s).
                let suspect = first.filter(|f| f.t < h.origin_mono_ns);
                let second_within = match suspect {
                    Some(_) => {
                        let (p3, second) = peek(&mut input, 3)?;
                        pending.push_back(p3);
                        second.is_some_and(|s| s.t >= h.origin_mono_ns)
                    }
                    None => false,
                };
                let damaged = match suspect {
                    Some(first) if !second_within => {
                        let why = format!(
                            "its origin_mono_ns {} comes after the first event's t {}",
                            h.origin_mono_ns, first.t
                        );
                        let stated = (h.origin_mono_ns, h.origin_unix_ns);
                        h.origin_mono_ns = first.t;
                        h.origin_unix_ns = 0;
                        Some(DamagedHeader {
                            why,
                            origin_from_meta: false,
                            stated_origin: Some(stated),
                        })
                    }
                    _ => None,
                };
                (h, damaged, pending)
            }
            Ok(_) => return Err(ReadError::NoHeader),
            Err(e) => {
                // A damaged header line with events after it loses no event:
                // only the origin the figures count from (a single flipped
                // byte made the whole trace unreadable).
                let why = within_line(&e);
                // The first event within a few lines stands in for the
                // origin (a blank or damaged line 2 refused the whole
                // trace); the lines before it are read as usual.
                let mut pending = std::collections::VecDeque::new();
                let mut first = None;
                for line in 2..2 + HEADER_SEARCH {
                    let (p, e) = peek(&mut input, line)?;
                    let end = matches!(&p, Pending::Line(l) if l.is_empty());
                    pending.push_back(p);
                    if e.is_some() || end {
                        first = e;
                        break;
                    }
                }
                let Some(first) = first else {
                    return Err(ReadError::NoHeader);
                };
                let header = Header {
                    schema: crate::schema::SCHEMA_VERSION,
                    tool: String::new(),
                    clock: "CLOCK_MONOTONIC".into(),
                    origin_mono_ns: first.t,
                    origin_unix_ns: 0,
                };
                let damaged = DamagedHeader {
                    why,
                    origin_from_meta: false,
                    stated_origin: None,
                };
                (header, Some(damaged), pending)
            }
        };
        if header.schema > crate::schema::SCHEMA_VERSION {
            return Err(ReadError::Schema {
                found: header.schema,
                supported: crate::schema::SCHEMA_VERSION,
            });
        }
        Ok(TraceReader {
            input,
            buf,
            line: 1,
            header,
            ending: Ending::Open,
            unknown: 0,
            first_unknown_line: None,
            bad_payloads: 0,
            first_bad_payload_line: None,
            drop_payloads: false,
            scratch: String::new(),
            after_footer: None,
            damaged_footer: None,
            read_error: None,
            damaged_header,
            pending,
        })
    }

    /// Hands frames over without their payload bytes (each still checked
    /// and counted in [`TraceReader::bad_payloads`]). For the analysis, which
    /// never reads them and holds events in a reorder window: with them, a
    /// full capture's 250 ms of events held hundreds of megabytes.
    pub fn without_payloads(mut self) -> Self {
        self.drop_payloads = true;
        self
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// How the trace ended; meaningful once iteration returned `None`.
    pub fn ending(&self) -> &Ending {
        &self.ending
    }

    /// Line number of the last line read.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The next event, `None` at the end. A corrupt line in the middle is an
    /// error; a cut last line is not (see [`Ending::Truncated`]).
    pub fn next_event(&mut self) -> Option<Result<Event, ReadError>> {
        loop {
            if !matches!(self.ending, Ending::Open) {
                return None;
            }
            self.line += 1;
            // Bytes first, then text: a line that is not UTF-8 is skipped
            // like any corrupt line, while an error of the input itself (a
            // damaged compressed stream) ends the reading: it would come
            // back at every call, and no later line can be reached.
            let mut raw = std::mem::take(&mut self.buf).into_bytes();
            raw.clear();
            let read = match self.pending.pop_front() {
                Some(Pending::Line(line)) => {
                    raw.extend_from_slice(line.as_bytes());
                    Ok((line.len() as u64, true))
                }
                Some(Pending::TooLong(n)) => Ok((n, false)),
                Some(Pending::NotText) => return Some(Err(ReadError::NotText { line: self.line })),
                // The line end is not the line's.
                None => read_line_capped(&mut self.input, &mut raw, MAX_LINE + 1, false),
            };
            let n = match read {
                Ok((n, true)) => n,
                Ok((bytes, false)) => {
                    return Some(Err(ReadError::TooLong {
                        line: self.line,
                        bytes,
                    }))
                }
                // A compressed trace cut short: the same as a cut last line.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    self.ending = Ending::Truncated { line: self.line };
                    return None;
                }
                Err(cause) => {
                    self.ending = Ending::Truncated { line: self.line };
                    self.read_error = Some(format!("line {}: {cause}", self.line));
                    return Some(Err(ReadError::Io {
                        line: self.line,
                        cause,
                    }));
                }
            };
            if n == 0 {
                self.ending = Ending::NoFooter;
                return None;
            }
            self.buf = match String::from_utf8(raw) {
                Ok(text) => text,
                Err(e) => {
                    // Its room kept for the next line (empty: valid UTF-8).
                    let mut room = e.into_bytes();
                    room.clear();
                    self.buf = String::from_utf8(room).unwrap_or_default();
                    return Some(Err(ReadError::NotText { line: self.line }));
                }
            };
            let complete = self.buf.ends_with('\n');
            let text = self.buf.trim_end();
            if text.is_empty() {
                continue;
            }
            // Without payloads, a frame's base64 (the bulk of a full capture's
            // line) is checked where it lies instead of being scanned twice by
            // the JSON parser and decoded.
            if self.drop_payloads {
                if let Some((e, sound)) = frame_without_payload(text, &mut self.scratch) {
                    if let Some(what) = impossible(&e, self.header.origin_mono_ns) {
                        return Some(Err(ReadError::Impossible {
                            line: self.line,
                            what,
                        }));
                    }
                    if !sound {
                        self.bad_payload();
                    }
                    return Some(Ok(e));
                }
            }
            let parsed = match Line::parse(text) {
                // The payload is bulk the analysis never needs: a damaged one
                // costs the frame its bytes, not its place in the trace.
                Err(_) if complete && text.contains("\"payload\"") => {
                    match Line::parse_without_payload(text) {
                        Ok(l) => {
                            self.bad_payload();
                            Ok(l)
                        }
                        Err(e) => Err(e),
                    }
                }
                other => other,
            };
            match parsed {
                Ok(Line::Event(mut e)) => {
                    if let Some(what) = impossible(&e, self.header.origin_mono_ns) {
                        return Some(Err(ReadError::Impossible {
                            line: self.line,
                            what,
                        }));
                    }
                    if matches!(e.kind, crate::schema::Kind::Unknown) {
                        self.unknown += 1;
                        self.first_unknown_line.get_or_insert(self.line);
                        continue;
                    }
                    if let crate::schema::Kind::Frame(f) = &mut e.kind {
                        if f.payload
                            .as_ref()
                            .is_some_and(|p| p.0.len() != f.len as usize)
                        {
                            f.payload = None;
                            self.bad_payload();
                        }
                        if self.drop_payloads {
                            f.payload = None;
                        }
                    }
                    return Some(Ok(e));
                }
                Ok(Line::Footer(f)) => {
                    self.ending = Ending::Clean(f);
                    self.after_footer = self.next_content_line();
                    return None;
                }
                // A header past line 1 (two traces joined, an edit): not
                // an event, counted as a damaged line (it was skipped
                // without a word).
                Ok(Line::Header(_)) => {
                    return Some(Err(ReadError::Impossible {
                        line: self.line,
                        what: "a second header line: not an event of this trace".into(),
                    }))
                }
                Err(cause) => {
                    if !complete {
                        self.ending = Ending::Truncated { line: self.line };
                        return None;
                    }
                    if self.buf.contains("\"type\":\"footer\"") {
                        self.damaged_footer = Some(self.line);
                    }
                    return Some(Err(ReadError::Corrupt {
                        line: self.line,
                        cause,
                    }));
                }
            }
        }
    }
}

impl<R: BufRead> TraceReader<R> {
    /// After the footer: the number of the next line with content, if any
    /// (read line by line, so a second trace's bulk is not held).
    fn next_content_line(&mut self) -> Option<u64> {
        // Byte by byte, nothing held: a tail of gigabytes without a line
        // end (zeros a crash left) is one line with content at its first.
        let mut line = self.line + 1;
        loop {
            let buf = match self.input.fill_buf() {
                Ok([]) => return None,
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // A gzip member's checksum is read at its end, past the
                // footer: a flipped bit anywhere shows only here.
                Err(e) if e.kind() != std::io::ErrorKind::UnexpectedEof => {
                    self.read_error = Some(format!("past the footer at line {}: {e}", line - 1));
                    return None;
                }
                Err(_) => return None,
            };
            for &b in buf {
                if b == b'\n' {
                    line += 1;
                } else if !b.is_ascii_whitespace() {
                    return Some(line);
                }
            }
            let used = buf.len();
            self.input.consume(used);
        }
    }
}

impl<R> TraceReader<R> {
    fn bad_payload(&mut self) {
        self.bad_payloads += 1;
        self.first_bad_payload_line.get_or_insert(self.line);
    }

    /// The warning for frames read without their damaged payload, if any.
    pub fn bad_payload_warning(&self) -> Option<String> {
        let first = self.first_bad_payload_line?;
        let n = self.bad_payloads;
        let (these, are) = if n == 1 {
            ("frame payload", "is")
        } else {
            ("frame payloads", "are")
        };
        Some(format!(
            "{n} {these} {are} not valid base64 or not the frame's length (first at line {first}): read without their bytes"
        ))
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Event, ReadError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_event()
    }
}

/// A frame line as h2probe writes it (`,"payload":"…"}` last) with valid
/// base64, parsed without its payload, which is checked but not decoded
/// (`sound`: it holds `len` bytes). `None`: not such a line, for the full
/// parse.
fn frame_without_payload(text: &str, scratch: &mut String) -> Option<(Event, bool)> {
    const KEY: &str = ",\"payload\":\"";
    let body = text.strip_suffix("\"}")?;
    // Found from the front, past the short fields (not through 20 KiB of
    // base64 from the back); a quote inside a JSON string is escaped, so
    // this is the key itself.
    let at = body.find(KEY)?;
    // Valid base64 holds no quote or backslash: the field is whole and
    // last. Anything else (damaged, or a line laid out otherwise) is the
    // full parse's to judge.
    let b64 = &body.as_bytes()[at + KEY.len()..];
    base64_simd::STANDARD.check(b64).ok()?;
    scratch.clear();
    scratch.push_str(&body[..at]);
    scratch.push('}');
    let Ok(Line::Event(e)) = Line::parse(scratch) else {
        return None;
    };
    // Not a frame, or one that still has a payload (the key twice, however
    // spelled: the full parse refuses that): the full parse's to judge.
    let crate::schema::Kind::Frame(f) = &e.kind else {
        return None;
    };
    // A WINDOW_UPDATE's 4 bytes are checked against its increment (see
    // `impossible`): the full parse's, whose payload it keeps that long.
    if f.payload.is_some() || f.frame == crate::schema::FrameType::WINDOW_UPDATE {
        return None;
    }
    let sound = base64_simd::STANDARD.decoded_length(b64).ok() == Some(f.len as usize);
    Some((e, sound))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path for dropped payloads takes h2probe's own frame lines:
    /// the event without its bytes, and whether the base64 holds `len`
    /// bytes; anything else is left to the full parse.
    #[test]
    fn a_frame_line_is_read_past_its_payload() {
        let mut scratch = String::new();
        let line = |len: u32, b64: &str| {
            format!(
                r#"{{"t":5,"ep":"server","conn":1,"stream":1,"type":"frame","dir":"in","offset":9,"frame":"DATA","flags":0,"len":{len},"payload":"{b64}"}}"#
            )
        };
        let (e, sound) = frame_without_payload(&line(3, "AQID"), &mut scratch).unwrap();
        assert!(sound);
        assert_eq!(e.t, 5);
        let crate::schema::Kind::Frame(f) = &e.kind else {
            panic!("not a frame: {e:?}");
        };
        assert_eq!((f.len, f.offset, f.payload.as_ref()), (3, 9, None));
        let (_, sound) = frame_without_payload(&line(4, "AQID"), &mut scratch).unwrap();
        assert!(!sound, "3 bytes of base64 for a 4-byte frame");
        // Not base64, a WINDOW_UPDATE, a line not ending in its payload.
        assert!(frame_without_payload(&line(3, "AQ\\D"), &mut scratch).is_none());
        let wu = r#"{"t":6,"ep":"server","conn":1,"stream":0,"type":"frame","dir":"out","offset":9,"frame":"WINDOW_UPDATE","flags":0,"len":4,"increment":1,"payload":"AAAAAQ=="}"#;
        assert!(frame_without_payload(wu, &mut scratch).is_none());
        let last = r#"{"t":5,"ep":"server","conn":1,"stream":1,"type":"frame","dir":"in","offset":9,"frame":"DATA","flags":0,"payload":"AQID","len":3}"#;
        assert!(frame_without_payload(last, &mut scratch).is_none());
    }

    /// What stands at a trace's path and is no file is named: a FIFO, a
    /// device; a regular file is read.
    #[test]
    fn what_is_not_a_file_is_named() {
        let what = |p: &Path| match not_a_file(p) {
            Some(OpenError::NotAFile { what, .. }) => Some(what),
            other => other.map(|e| e.to_string()),
        };
        assert_eq!(
            what(Path::new("/dev/null")).as_deref(),
            Some("not a regular file")
        );
        let dir = std::env::temp_dir().join(format!("h2probe-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("trace.jsonl");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(what(&fifo).as_deref(), Some("a FIFO"));
        let file = dir.join("plain");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(what(&file), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The edges of what an event can be: a frame of 2^24−1 bytes can, one
    /// more cannot; a `t` at the origin can, one before it cannot; a time
    /// inside an event at the origin or at its own `t` can, outside cannot.
    #[test]
    fn impossible_events_are_told_at_their_edges() {
        use crate::schema::{Dir, Endpoint, FrameEv, FrameType, IntervalEv, Kind};
        let ev = |t, kind| Event {
            t,
            ep: Endpoint::Server,
            conn: 1,
            stream: 1,
            kind,
        };
        let frame = |len| {
            Kind::Frame(FrameEv {
                len,
                frame: FrameType::DATA,
                dir: Dir::In,
                ..FrameEv::default()
            })
        };
        assert_eq!(impossible(&ev(10, frame((1 << 24) - 1)), 5), None);
        assert!(impossible(&ev(10, frame(1 << 24)), 5).is_some());
        assert_eq!(impossible(&ev(5, frame(1)), 5), None);
        assert!(impossible(&ev(4, frame(1)), 5).is_some());
        let blocked = |start| {
            Kind::SocketBlocked(IntervalEv {
                dir: Dir::Out,
                start,
                open: false,
            })
        };
        for (start, possible) in [(4, false), (5, true), (10, true), (11, false)] {
            let why = impossible(&ev(10, blocked(start)), 5);
            assert_eq!(why.is_none(), possible, "start {start}: {why:?}");
        }
    }

    /// A `BufRead` whose every fill is first interrupted once (EINTR).
    struct Interrupting<'a> {
        inner: &'a [u8],
        interrupted: bool,
    }

    impl std::io::Read for Interrupting<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.inner.read(buf)
        }
    }

    impl BufRead for Interrupting<'_> {
        fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
            if !self.interrupted {
                self.interrupted = true;
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            self.inner.fill_buf()
        }
        fn consume(&mut self, n: usize) {
            self.interrupted = false;
            self.inner.consume(n);
        }
    }

    /// A line is read whole through interrupted reads; another error ends
    /// it; a line past the cap is read to its end, or with `stop_at_cap`
    /// only as far as the fill that passed the cap, its bytes dropped.
    #[test]
    fn lines_are_read_capped_through_interruptions() {
        let mut out = vec![];
        let mut r = Interrupting {
            inner: b"abc\ndef",
            interrupted: false,
        };
        assert_eq!(
            read_line_capped(&mut r, &mut out, 100, false).unwrap(),
            (4, true)
        );
        assert_eq!(out, b"abc\n");
        struct Failing;
        impl std::io::Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::Other.into())
            }
        }
        let mut failing = std::io::BufReader::new(Failing);
        assert!(read_line_capped(&mut failing, &mut vec![], 100, false).is_err());
        let text = b"abcdefghij\nxyz";
        for (stop, read) in [(true, 6), (false, 11)] {
            let mut r = std::io::BufReader::with_capacity(3, &text[..]);
            let mut out = vec![];
            assert_eq!(
                read_line_capped(&mut r, &mut out, 4, stop).unwrap(),
                (read, false)
            );
            assert!(out.is_empty());
        }
        let mut r = std::io::BufReader::with_capacity(3, &text[..]);
        let _ = read_line_capped(&mut r, &mut vec![], 4, false);
        let mut out = vec![];
        assert_eq!(
            read_line_capped(&mut r, &mut out, 4, false).unwrap(),
            (3, true)
        );
        assert_eq!(out, b"xyz");
    }

    /// The JSON parser's place in the line is said as a column, and not
    /// at all where it has none.
    #[test]
    fn a_parse_error_names_its_column_only_when_it_has_one() {
        let err = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap_err();
        assert_eq!(within_line(&err("{x")), "key must be a string (column 2)");
        assert_eq!(
            within_line(&err("")),
            "EOF while parsing a value at line 1 column 0"
        );
    }

    const HEADER: &str = r#"{"type":"header","schema":1,"tool":"h2probe test","clock":"CLOCK_MONOTONIC","origin_mono_ns":1,"origin_unix_ns":2}"#;
    const EV: &str = r#"{"t":5,"ep":"server","conn":1,"stream":1,"type":"chunk","len":10}"#;

    fn read_all(text: &str) -> (Vec<Result<Event, ReadError>>, Ending) {
        let mut r = TraceReader::new(text.as_bytes()).unwrap();
        let evs: Vec<_> = r.by_ref().collect();
        (evs, r.ending().clone())
    }

    /// An event without `t`, or with one before the header's origin, is a
    /// line lost, named, and the reading goes on (both were read as time 0:
    /// a 2 s run spanned 12,023 s, every check holding).
    #[test]
    fn an_event_without_a_time_of_this_trace_is_a_line_lost() {
        let no_t = r#"{"ep":"server","conn":1,"stream":1,"type":"chunk","len":10}"#;
        let early = r#"{"t":0,"ep":"server","conn":1,"stream":1,"type":"chunk","len":10}"#;
        let (evs, _) = read_all(&format!("{HEADER}\n{EV}\n{no_t}\n{early}\n{EV}\n"));
        assert_eq!(evs.len(), 4);
        assert!(evs[0].is_ok() && evs[3].is_ok());
        let said = |e: &Result<Event, ReadError>| match e {
            Err(e) if e.is_one_line() => e.to_string(),
            other => panic!("{other:?}"),
        };
        assert!(said(&evs[1]).contains("line 3") && said(&evs[1]).contains("missing field `t`"));
        assert_eq!(
            said(&evs[2]),
            "line 4: t 0 is before the trace's origin (1): not a time of this recording"
        );
    }

    /// A WINDOW_UPDATE whose increment its own bytes contradict is a
    /// damaged line, with and without payloads (an edited increment 0
    /// failed a check on a sound DATA frame 23 lines later).
    #[test]
    fn a_window_update_whose_increment_its_bytes_contradict_is_damaged() {
        // AABAEQ== is 0x00004011: 16401.
        let wu = |inc: u32| {
            format!(
                r#"{{"t":6,"ep":"server","conn":1,"stream":0,"type":"frame","dir":"out","offset":9,"frame":"WINDOW_UPDATE","flags":0,"len":4,"increment":{inc},"payload":"AABAEQ=="}}"#
            )
        };
        let text = format!("{HEADER}\n{}\n{}\n", wu(16401), wu(0));
        for drop_payloads in [false, true] {
            let mut r = TraceReader::new(text.as_bytes()).unwrap();
            if drop_payloads {
                r = r.without_payloads();
            }
            let got: Vec<_> = r.by_ref().collect();
            let sound = got[0].as_ref().unwrap();
            let crate::schema::Kind::Frame(f) = &sound.kind else {
                panic!()
            };
            assert_eq!(f.payload.is_none(), drop_payloads);
            assert_eq!(
                got[1].as_ref().unwrap_err().to_string(),
                "line 3: a WINDOW_UPDATE whose increment 0 is not its own bytes' 16401"
            );
        }
    }

    /// A time inside an event (an interval's `start`, a send's `begin` and
    /// `scheduled`) outside [origin, t] is a line lost, like such a `t`
    /// (`start: 0` made a blocked interval of 46,165 s in a 3 s run).
    #[test]
    fn a_time_inside_an_event_outside_the_recording_is_a_line_lost() {
        let blocked = |start: u64| {
            format!(
                r#"{{"t":9,"ep":"client","conn":1,"stream":0,"type":"socket_blocked","dir":"out","start":{start}}}"#
            )
        };
        let waited = r#"{"t":9,"ep":"client","conn":1,"stream":1,"type":"window_blocked","seq":0,"start":10}"#;
        let send = r#"{"t":9,"ep":"client","conn":1,"stream":1,"type":"send","seq":0,"scheduled":2,"begin":12,"bytes":5}"#;
        let text = format!(
            "{HEADER}\n{}\n{}\n{waited}\n{send}\n{}\n",
            blocked(0),
            blocked(3),
            blocked(9)
        );
        let (evs, _) = read_all(&text);
        let said: Vec<String> = evs
            .iter()
            .map(|e| match e {
                Ok(_) => "ok".into(),
                Err(e) if e.is_one_line() => e.to_string(),
                Err(e) => panic!("{e}"),
            })
            .collect();
        assert_eq!(
            said,
            [
                "line 2: socket_blocked start 0 is outside [the trace's origin 1, its t 9]: not a time of this recording",
                "ok",
                "line 4: window_blocked start 10 is outside [the trace's origin 1, its t 9]: not a time of this recording",
                "line 5: send begin 12 is outside [the trace's origin 1, its t 9]: not a time of this recording",
                "ok",
            ]
        );
    }

    /// A footer that does not parse is named as a damaged footer, not as
    /// none (it read "the writer did not finish").
    #[test]
    fn a_damaged_footer_is_named() {
        let text =
            format!("{HEADER}\n{EV}\n{{\"type\":\"footer\",\"events\":-5,\"dropped\":{{}}}}\n");
        let mut r = TraceReader::new(text.as_bytes()).unwrap();
        assert_eq!(r.by_ref().filter(|e| e.is_err()).count(), 1);
        assert_eq!(r.ending(), &Ending::NoFooter);
        assert_eq!(r.damaged_footer, Some(3));
    }

    /// A header past line 1 is a damaged line, said (it was skipped
    /// without a word).
    #[test]
    fn a_second_header_is_a_damaged_line() {
        let (evs, end) = read_all(&format!("{HEADER}\n{EV}\n{HEADER}\n{EV}\n"));
        assert_eq!(evs.len(), 3);
        let e = evs[1].as_ref().unwrap_err();
        assert!(e.is_one_line());
        assert_eq!(
            e.to_string(),
            "line 3: a second header line: not an event of this trace"
        );
        assert_eq!(end, Ending::NoFooter);
    }

    /// A trace.jsonl that is there but no file is named for what it is (it
    /// was "no trace.jsonl here; is this a run directory?").
    #[test]
    fn a_trace_that_is_not_a_file_is_named_for_what_it_is() {
        let dir = std::env::temp_dir().join(format!("h2probe-notafile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("trace.jsonl")).unwrap();
        let said = |d: &Path| open_run(d).err().unwrap().to_string();
        let t = dir.join("trace.jsonl").display().to_string();
        assert_eq!(said(&dir), format!("{t} is a directory, not a trace file"));
        std::fs::remove_dir(dir.join("trace.jsonl")).unwrap();
        std::os::unix::fs::symlink(dir.join("gone"), dir.join("trace.jsonl")).unwrap();
        assert!(
            said(&dir).starts_with(&format!(
                "{t} is a symbolic link that leads nowhere readable ("
            )),
            "{}",
            said(&dir)
        );
        std::fs::remove_file(dir.join("trace.jsonl")).unwrap();
        assert!(said(&dir).ends_with("no trace.jsonl here; is this a run directory?"));
        // A --no-trace run's directory is said to be one.
        let meta = |no_trace: &str| {
            let m = format!(r#"{{"config":{{"output":{{"no_trace":{no_trace}}}}}}}"#);
            std::fs::write(dir.join("meta.json"), m).unwrap();
        };
        meta("true");
        assert!(said(&dir).ends_with("a --no-trace run; it recorded no trace, so there is nothing to analyse (meta.json holds its configuration)"), "{}", said(&dir));
        meta("false");
        assert!(said(&dir).ends_with("is this a run directory?"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The footer ends the reading; content after it (a second trace
    /// joined on) is said by its line, blank lines are not content.
    #[test]
    fn content_after_the_footer_is_found_by_its_line() {
        let footer = r#"{"type":"footer","events":1,"dropped":{}}"#;
        let one = format!("{HEADER}\n{EV}\n{footer}\n\n");
        let mut r = TraceReader::new(one.as_bytes()).unwrap();
        assert_eq!(r.by_ref().count(), 1);
        assert_eq!(r.after_footer, None);
        let joined = format!("{HEADER}\n{EV}\n{footer}\n\n{HEADER}\n{EV}\n{footer}\n");
        let mut r = TraceReader::new(joined.as_bytes()).unwrap();
        assert_eq!(r.by_ref().count(), 1);
        assert!(matches!(r.ending(), Ending::Clean(_)));
        assert_eq!(r.after_footer, Some(5));
    }

    /// A line longer than any the writer produces is skipped without being
    /// held, the reading going on after it; a header or a tail after the
    /// footer of gigabytes without a line end is judged on its first bytes
    /// (a 3 MB gzip of zeros ran `analyze` out of memory).
    #[test]
    fn lines_longer_than_any_trace_line_are_never_held() {
        use std::io::Read;
        let long = MAX_LINE + (16 << 20);
        let text = std::io::Cursor::new(format!("{HEADER}\n{EV}\n"))
            .chain(std::io::repeat(b'x').take(long as u64))
            .chain(std::io::Cursor::new(format!(
                "\n{EV}\n{{\"type\":\"footer\",\"events\":3,\"dropped\":{{}}}}\n"
            )));
        let mut r = TraceReader::new(std::io::BufReader::new(text)).unwrap();
        let got: Vec<_> = r.by_ref().collect();
        assert_eq!(got.len(), 3);
        assert!(got[0].is_ok() && got[2].is_ok());
        let e = got[1].as_ref().unwrap_err();
        assert!(e.is_one_line());
        assert_eq!(
            e.to_string(),
            format!(
                "line 3: {} bytes (its line end included), longer than any trace line (64 MiB at most)",
                long + 1
            )
        );
        assert!(matches!(r.ending(), Ending::Clean(_)));
        // 64 MiB is held (and judged as JSON); a byte more is not.
        for (len, too_long) in [(MAX_LINE, false), (MAX_LINE + 1, true)] {
            let text = std::io::Cursor::new(format!("{HEADER}\n{EV}\n"))
                .chain(std::io::repeat(b'x').take(len as u64))
                .chain(std::io::Cursor::new("\n"));
            let mut r = TraceReader::new(std::io::BufReader::new(text)).unwrap();
            let got: Vec<_> = r.by_ref().collect();
            let e = got[1].as_ref().unwrap_err();
            assert_eq!(
                matches!(e, ReadError::TooLong { .. }),
                too_long,
                "{len}: {e}"
            );
        }
        // A header of zeros: not a trace, from its first 64 KiB (the rest,
        // a terabyte here, is never read).
        let zeros = std::io::BufReader::new(std::io::repeat(0).take(1 << 40));
        assert!(matches!(TraceReader::new(zeros), Err(ReadError::NoHeader)));
        // Zeros after the footer: content on the line after it, found at
        // its first byte.
        let tail = std::io::Cursor::new(format!(
            "{HEADER}\n{EV}\n{{\"type\":\"footer\",\"events\":1,\"dropped\":{{}}}}\n"
        ))
        .chain(std::io::repeat(0).take(1 << 40));
        let mut r = TraceReader::new(std::io::BufReader::new(tail)).unwrap();
        assert_eq!(r.by_ref().count(), 1);
        assert_eq!(r.after_footer, Some(4));
    }

    /// A frame longer than HTTP/2's 24-bit length is a damaged line: skipped
    /// and counted, with and without payloads, the reading going on.
    #[test]
    fn a_frame_longer_than_http2_allows_is_a_damaged_line() {
        let huge = r#"{"t":6,"ep":"server","conn":1,"stream":1,"type":"frame","dir":"in","offset":9,"frame":"DATA","flags":0,"len":99999999}"#;
        let text = format!("{HEADER}\n{EV}\n{huge}\n{EV}\n");
        for drop_payloads in [false, true] {
            let mut r = TraceReader::new(text.as_bytes()).unwrap();
            if drop_payloads {
                r = r.without_payloads();
            }
            let got: Vec<_> = r.by_ref().collect();
            assert_eq!(got.len(), 3);
            let e = got[1].as_ref().unwrap_err();
            assert!(e.is_one_line(), "{e}");
            assert!(
                e.to_string()
                    .starts_with("line 3: a DATA frame of 99999999 bytes"),
                "{e}"
            );
            assert!(got[2].is_ok());
        }
    }

    #[test]
    fn clean_trace_reads_to_its_footer() {
        let text = format!(
            "{HEADER}\n{EV}\n{EV}\n{{\"type\":\"footer\",\"events\":2,\"dropped\":{{}}}}\n"
        );
        let (evs, end) = read_all(&text);
        assert_eq!(evs.len(), 2);
        assert!(evs.iter().all(|e| e.is_ok()));
        assert!(matches!(end, Ending::Clean(f) if f.events == 2));
    }

    #[test]
    fn a_damaged_payload_costs_its_frame_the_bytes_not_its_place() {
        let frame = |payload: &str| {
            format!(
                r#"{{"t":5,"ep":"server","conn":1,"stream":1,"type":"frame","dir":"in","offset":9,"frame":"DATA","flags":0,"len":3,"payload":{payload}}}"#
            )
        };
        // Line 2 is whole; 3 is not base64, 4 is base64 of 2 bytes for a
        // 3-byte frame, 5 is not even a string.
        let text = format!(
            "{HEADER}\n{}\n{}\n{}\n{}\n{{\"type\":\"footer\",\"events\":4,\"dropped\":{{}}}}\n",
            frame("\"AQID\""),
            frame("\"A*ID\""),
            frame("\"AQI=\""),
            frame("12345")
        );
        let mut r = TraceReader::new(text.as_bytes()).unwrap();
        let evs: Vec<_> = r.by_ref().map(|e| e.unwrap()).collect();
        let payloads: Vec<_> = evs
            .iter()
            .map(|e| match &e.kind {
                crate::schema::Kind::Frame(f) => (f.len, f.payload.clone().map(|p| p.0)),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            payloads,
            vec![(3, Some(vec![1, 2, 3])), (3, None), (3, None), (3, None)]
        );
        assert_eq!((r.bad_payloads, r.first_bad_payload_line), (3, Some(3)));
        let w = r.bad_payload_warning().unwrap();
        assert!(
            w.starts_with("3 frame payloads") && w.contains("line 3"),
            "{w}"
        );
        assert!(matches!(r.ending(), Ending::Clean(_)));

        // Read without payloads (the base64 checked where it lies, not
        // decoded): the same events, the same three damaged, plus lines the
        // quick path leaves to the full parse (a payload that is not last, a
        // payload key twice, a non-frame line) or takes (padding, a 0-byte
        // payload).
        let more = [
            r#"{"t":6,"ep":"server","conn":1,"stream":1,"type":"frame","dir":"in","offset":21,"frame":"DATA","flags":8,"len":3,"pad":1,"payload":"AgAA"}"#,
            r#"{"t":7,"ep":"client","conn":1,"stream":0,"type":"frame","dir":"out","offset":0,"frame":"PING","flags":0,"payload":"AAAAAAAAAAE=","len":8,"opaque":1}"#,
            r#"{"t":8,"ep":"client","conn":1,"stream":1,"type":"frame","dir":"out","offset":17,"frame":"DATA","flags":1,"len":0,"payload":""}"#,
            r#"{"payload":"AAAA","t":9,"ep":"server","conn":1,"stream":1,"type":"frame","dir":"in","offset":30,"frame":"DATA","flags":0,"len":3,"payload":"AQID"}"#,
            r#"{"t":10,"ep":"server","conn":1,"stream":1,"type":"frame","dir":"in","offset":42,"frame":"DATA","flags":0,"len":3,"pay\u006coad":"AAAA","payload":"AQID"}"#,
            EV,
        ];
        let text = format!(
            "{HEADER}\n{}\n{}\n{}\n{}\n{}\n{{\"type\":\"footer\",\"events\":10,\"dropped\":{{}}}}\n",
            frame("\"AQID\""),
            frame("\"A*ID\""),
            frame("\"AQI=\""),
            frame("12345"),
            more.join("\n")
        );
        let mut full = TraceReader::new(text.as_bytes()).unwrap();
        let mut expected: Vec<Event> = full.by_ref().map(|e| e.unwrap()).collect();
        for e in &mut expected {
            if let crate::schema::Kind::Frame(f) = &mut e.kind {
                f.payload = None;
            }
        }
        let mut quick = TraceReader::new(text.as_bytes())
            .unwrap()
            .without_payloads();
        let got: Vec<Event> = quick.by_ref().map(|e| e.unwrap()).collect();
        assert_eq!(got, expected);
        assert_eq!(
            (quick.bad_payloads, quick.first_bad_payload_line),
            (full.bad_payloads, full.first_bad_payload_line)
        );
        // The three damaged, and the two lines with their payload twice.
        assert_eq!(quick.bad_payloads, 5);
    }

    #[test]
    fn a_cut_last_line_is_a_truncation_not_an_error() {
        let text = format!("{HEADER}\n{EV}\n{}", &EV[..20]);
        let (evs, end) = read_all(&text);
        assert_eq!(evs.len(), 1);
        assert!(evs[0].is_ok());
        assert_eq!(end, Ending::Truncated { line: 3 });
    }

    #[test]
    fn a_corrupt_middle_line_names_its_line_number() {
        let text = format!("{HEADER}\n{EV}\n{{garbage\n{EV}\n");
        let (evs, end) = read_all(&text);
        let err = evs[1].as_ref().unwrap_err().to_string();
        // One line number, the trace's: the parser's own place in the
        // line is a column.
        assert_eq!(err, "line 3: key must be a string (column 2)");
        assert!(evs[2].is_ok(), "reading continues after a corrupt line");
        assert_eq!(end, Ending::NoFooter);
    }

    #[test]
    fn gzip_traces_read_the_same_and_a_cut_one_is_truncated() {
        use std::io::Write;
        let text = format!(
            "{HEADER}\n{EV}\n{EV}\n{{\"type\":\"footer\",\"events\":2,\"dropped\":{{}}}}\n"
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        let bytes = gz.finish().unwrap();
        let dir = std::env::temp_dir().join(format!("h2probe-gz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.jsonl.gz");
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(trace_path(&dir), Some(path.clone()));
        let mut r = TraceReader::open(&path).unwrap();
        assert_eq!(r.by_ref().filter(|e| e.is_ok()).count(), 2);
        assert!(matches!(r.ending(), Ending::Clean(_)));
        // Cut inside the compressed data: the end of the stream comes too
        // soon, read as a cut last line, not as a failing read.
        std::fs::write(&path, &bytes[..bytes.len() - 12]).unwrap();
        let mut r = TraceReader::open(&path).unwrap();
        assert!(r.by_ref().all(|e| e.is_ok()));
        assert!(
            matches!(r.ending(), Ending::Truncated { .. }),
            "{:?}",
            r.ending()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A gzip trace whose checksum (its last 8 bytes, read past the footer)
    /// does not match: the footer is read, and the failure is kept as the
    /// file's read error (a bit flipped anywhere read as a clean trace).
    #[test]
    fn a_gzip_checksum_that_fails_past_the_footer_is_kept() {
        use std::io::Write;
        let footer = r#"{"type":"footer","events":1,"dropped":{}}"#;
        let text = format!("{HEADER}\n{EV}\n{footer}\n");
        let gzip = |bytes: &[u8]| {
            let input = std::io::BufReader::new(flate2::bufread::MultiGzDecoder::new(bytes));
            let mut r = TraceReader::new(input).unwrap();
            assert_eq!(r.by_ref().filter(Result::is_ok).count(), 1);
            assert!(matches!(r.ending(), Ending::Clean(_)), "{:?}", r.ending());
            r.read_error
        };
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        let mut bytes = gz.finish().unwrap();
        assert_eq!(gzip(&bytes), None);
        let crc = bytes.len() - 8;
        bytes[crc] ^= 1;
        let said = gzip(&bytes).expect("the checksum's failure");
        assert!(said.starts_with("past the footer at line 3: "), "{said}");
        // Cut inside the checksum: the end comes too soon, past a whole
        // footer, and costs nothing.
        let whole = gz_bytes(&text);
        assert_eq!(gzip(&whole[..whole.len() - 4]), None);
    }

    fn gz_bytes(text: &str) -> Vec<u8> {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        gz.finish().unwrap()
    }

    /// Reads interrupted (EINTR) before every fill, past the footer too,
    /// lose nothing and are no read error.
    #[test]
    fn interrupted_reads_are_retried_to_the_end() {
        let footer = r#"{"type":"footer","events":1,"dropped":{}}"#;
        let text = format!("{HEADER}\n{EV}\n{footer}\n\n  \n");
        let input = Interrupting {
            inner: text.as_bytes(),
            interrupted: false,
        };
        let mut r = TraceReader::new(input).unwrap();
        assert_eq!(r.by_ref().filter(Result::is_ok).count(), 1);
        assert!(matches!(r.ending(), Ending::Clean(_)), "{:?}", r.ending());
        assert_eq!(r.read_error, None);
    }

    /// `no_trace_in` a file names the directory it stands in.
    #[test]
    fn a_file_given_for_a_run_directory_names_its_parent() {
        let dir = std::env::temp_dir().join(format!("h2probe-afile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("trace.jsonl");
        std::fs::write(&file, "").unwrap();
        match OpenError::no_trace_in(&file) {
            OpenError::AFile { parent, .. } => assert_eq!(parent, dir.display().to_string()),
            other => panic!("{other}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A damaged compressed stream ends the reading with one error (it came
    /// back at every call: `analyze` spun forever); a line that is not UTF-8
    /// in a plain trace is one corrupt line, and reading goes on.
    #[test]
    fn a_damaged_stream_ends_the_reading_and_a_bad_line_does_not() {
        use std::io::Write;
        let mut text = format!("{HEADER}\n");
        for i in 0..5_000 {
            text.push_str(&format!(
                "{{\"t\":{},\"ep\":\"server\",\"conn\":1,\"stream\":{},\"type\":\"chunk\",\"len\":{}}}\n",
                i * 7_919,
                i % 13,
                i * 31 % 997
            ));
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        let mut bytes = gz.finish().unwrap();
        let mid = bytes.len() / 2;
        for b in &mut bytes[mid..mid + 20] {
            *b ^= 0x5a;
        }
        let input = std::io::BufReader::new(flate2::bufread::MultiGzDecoder::new(&bytes[..]));
        let mut r = TraceReader::new(input).unwrap();
        let read: Vec<_> = r.by_ref().take(100_000).collect();
        // Garbage lines from the damaged blocks, then the stream's own error.
        let io: Vec<_> = read
            .iter()
            .filter_map(|e| match e {
                Err(ReadError::Io { cause, .. }) => Some(cause.to_string()),
                _ => None,
            })
            .collect();
        assert!(
            read.len() < 100_000,
            "still reading after {} items",
            read.len()
        );
        assert_eq!(io.len(), 1, "{io:?}");
        // The stream's error is a cut, not a line lost (the analysis counts
        // only those as corrupt lines).
        let stream_error = read
            .iter()
            .find_map(|e| {
                e.as_ref()
                    .err()
                    .filter(|e| matches!(e, ReadError::Io { .. }))
            })
            .unwrap();
        assert!(!stream_error.is_one_line(), "{stream_error}");
        assert!(
            matches!(r.ending(), Ending::Truncated { .. }),
            "{:?}",
            r.ending()
        );
        assert!(r.read_error.is_some(), "the stream's error is kept");

        let mut plain = format!("{HEADER}\n{EV}\n").into_bytes();
        plain.extend_from_slice(b"\xff\xfe not text\n");
        plain.extend_from_slice(format!("{EV}\n").as_bytes());
        let mut r = TraceReader::new(&plain[..]).unwrap();
        let read: Vec<_> = r.by_ref().collect();
        assert_eq!(read.len(), 3);
        assert!(read[0].is_ok() && read[2].is_ok());
        let err = read[1].as_ref().unwrap_err().to_string();
        assert!(err.starts_with("line 3:") && err.contains("UTF-8"), "{err}");
        assert!(read[1].as_ref().unwrap_err().is_one_line());
        assert_eq!(r.ending(), &Ending::NoFooter);
    }

    /// A damaged header with an event after it: every event is read, the
    /// origin the first event's time, and it is said. Damage followed by
    /// something else is still not a trace.
    #[test]
    fn a_damaged_header_loses_no_event() {
        let damaged = &HEADER[..40];
        let text = format!("{damaged}\n{EV}\n{EV}\n");
        let mut r = TraceReader::new(text.as_bytes()).unwrap();
        assert_eq!(r.header().origin_mono_ns, 5);
        let said = r.damaged_header.clone().unwrap().to_string();
        assert!(said.starts_with("line 1: the header is damaged"), "{said}");
        assert!(
            said.ends_with("its origin the first event's time"),
            "{said}"
        );
        let events: Vec<u64> = r.by_ref().map(|e| e.unwrap().t).collect();
        assert_eq!(events, [5, 5]);
        assert_eq!(r.line(), 4);
        // A blank and a damaged line before the first event: it still
        // stands in for the origin, and those lines are read as usual.
        let mut text = format!("{damaged}\n\n").into_bytes();
        text.extend_from_slice(b"\xff\xfe\n");
        text.extend_from_slice(format!("{EV}\n").as_bytes());
        let mut r = TraceReader::new(&text[..]).unwrap();
        assert_eq!(r.header().origin_mono_ns, 5);
        let got: Vec<_> = r.by_ref().collect();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0].as_ref().unwrap_err().to_string(),
            "line 3: not UTF-8 text"
        );
        assert_eq!(got[1].as_ref().unwrap().t, 5);
        for text in [format!("{damaged}\nhello\n"), format!("{damaged}\n")] {
            assert!(matches!(
                TraceReader::new(text.as_bytes()),
                Err(ReadError::NoHeader)
            ));
        }
    }

    /// A header that parses but whose origin comes after the first event
    /// is damaged too: read from the first event's time (every event was
    /// "before the trace's origin", the header believed, exit 0).
    #[test]
    fn a_header_whose_origin_follows_the_first_event_is_damaged() {
        let late = HEADER.replace(
            "\"origin_mono_ns\":1",
            "\"origin_mono_ns\":18446744073709551615",
        );
        let text = format!("{late}\n{EV}\n{EV}\n");
        let mut r = TraceReader::new(text.as_bytes()).unwrap();
        assert_eq!(r.header().origin_mono_ns, 5);
        let said = r.damaged_header.clone().unwrap().to_string();
        assert!(
            said.starts_with("line 1: the header is damaged (its origin_mono_ns 18446744073709551615 comes after the first event's t 5)"),
            "{said}"
        );
        let events: Vec<u64> = r.by_ref().map(|e| e.unwrap().t).collect();
        assert_eq!(events, [5, 5]);
        assert_eq!(r.line(), 4);
        // One event before the origin, the next within it: the header
        // stands and that event is the damage (one edited line 2 made a 3 s
        // run span 48,825 s); both before it, with meta.json's anchor the
        // header's own, likewise; with another anchor, the header is damaged.
        let dir = std::env::temp_dir().join(format!("h2probe-vouched-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = |t: u64| {
            format!(r#"{{"t":{t},"ep":"server","conn":1,"stream":1,"type":"chunk","len":10}}"#)
        };
        let late_origin = HEADER.replace("\"origin_mono_ns\":1", "\"origin_mono_ns\":4");
        let meta = |mono: u64| {
            format!(
                r#"{{"schema":1,"tool":"t","command":"run","clock":{{"clock":"CLOCK_MONOTONIC","origin_mono_ns":{mono},"origin_unix_ns":2}}}}"#
            )
        };
        let trace = |ts: [u64; 3]| {
            let lines: Vec<String> = ts.iter().map(|t| at(*t)).collect();
            std::fs::write(
                dir.join("trace.jsonl"),
                format!("{late_origin}\n{}\n", lines.join("\n")),
            )
            .unwrap();
        };
        let stands = |dir: &Path| {
            let (_, mut r) = open_run(dir).unwrap();
            assert!(r.damaged_header.is_none());
            assert_eq!(r.header().origin_mono_ns, 4);
            let got: Vec<_> = r.by_ref().collect();
            assert!(got[0]
                .as_ref()
                .unwrap_err()
                .to_string()
                .starts_with("line 2: t 3 is before the trace's origin (4)"));
            got.len()
        };
        trace([3, 5, 6]);
        assert_eq!(stands(&dir), 3);
        trace([3, 3, 6]);
        let (_, r) = open_run(&dir).unwrap();
        assert!(!r.damaged_header.as_ref().unwrap().origin_from_meta);
        assert_eq!(r.header().origin_mono_ns, 3);
        std::fs::write(dir.join("meta.json"), meta(4)).unwrap();
        assert_eq!(stands(&dir), 3);
        std::fs::write(dir.join("meta.json"), meta(1)).unwrap();
        let (_, r) = open_run(&dir).unwrap();
        assert!(r.damaged_header.as_ref().unwrap().origin_from_meta);
        assert_eq!(r.header().origin_mono_ns, 1);
        std::fs::remove_dir_all(&dir).unwrap();
        // A sound header is left alone, and line 2 read as usual.
        let sound = format!("{HEADER}\n{EV}\n");
        let mut r = TraceReader::new(sound.as_bytes()).unwrap();
        assert!(r.damaged_header.is_none());
        assert_eq!(r.by_ref().count(), 1);
    }

    #[test]
    fn a_file_without_header_is_refused() {
        assert!(matches!(
            TraceReader::new(EV.as_bytes()),
            Err(ReadError::NoHeader)
        ));
        // An empty file says so (it read "first line is not a header").
        let empty = TraceReader::new(&b""[..]).err().unwrap();
        assert!(matches!(empty, ReadError::Empty));
        assert!(empty.to_string().starts_with("an empty file"), "{empty}");
    }
}
