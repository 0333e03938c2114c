//! The `release_point` check: the server released each stream's bytes at
//! the point its `rpc_start` names (`--release`), within its RPC (from its
//! `rpc_start` to its `rpc_end`), and never before what triggers that
//! point. The knob the whole study turns, judged from the trace alone.
//!
//! Beside that, a release names its message's whole size (the `framed`
//! bytes its `decode` gave), and an RPC that ended OK had released what it
//! received: at `frame` every byte its `chunk`s handed over, elsewhere every
//! message it decoded. A credit leak (bytes the handler forgot, returned
//! only by the `end` release or never) would hold the stream's window
//! shut while every release looked punctual.
//!
//! On `t`, not on line order: a release and its trigger stamped in the same
//! nanosecond agree whichever of them the file holds first, so a release
//! that finds no trigger yet waits for the end of its instant.

use super::wire_view::RetiredIds;
use crate::schema::{Endpoint, Event, Kind, ReleaseEv, ReleasePoint};
use std::collections::{BTreeMap, HashMap, HashSet};

/// One server stream whose release point is known.
struct Stream {
    point: ReleasePoint,
    /// Body bytes handed to the application (`chunk`), and those released
    /// at `frame`.
    chunks: u64,
    released: u64,
    /// Messages that reached the stream's point (or were discarded, which
    /// gives their bytes back at it) and whose release has not come: seq.
    reached: HashSet<u64>,
    /// Messages released at their point: one release each (as ranges:
    /// seqs run in order, so a long stream keeps a few).
    released_seqs: RetiredIds<1>,
    /// Decoded messages whose release has not come (a point other than
    /// `frame`): seq → framed bytes. As many as the server holds unreleased.
    unreleased: BTreeMap<u64, u32>,
    /// `--stall-stream` withholds this stream's releases (its `rpc_start`'s
    /// `withhold_after`), or its body was dropped (`body_drop`): what it
    /// received is not all released, by design.
    withheld: bool,
}

#[derive(Default)]
pub(super) struct ReleaseAudit {
    instant: u64,
    streams: HashMap<(u32, u32), Stream>,
    /// Releases waiting in their instant for their trigger (which may come
    /// later in the same `t`): (stream, seq) → line. Ordered: the first
    /// violation named does not depend on a hash's order.
    waiting: BTreeMap<((u32, u32), u64), u64>,
    /// Streams whose `frame` releases passed their chunks in this instant,
    /// with the line where they first did.
    over: BTreeMap<(u32, u32), u64>,
    /// Releases in this instant whose message has no `decode` yet (it may
    /// come later in the same `t`): (stream, seq) → (bytes, line).
    size_unknown: BTreeMap<((u32, u32), u64), (u32, u64)>,
    /// Streams whose `rpc_start` named no point (a trace from before it
    /// did): their releases are counted, not judged.
    unnamed: HashSet<(u32, u32)>,
    /// Each open connection's streams whose RPC ended (a release on one is
    /// after its end), until the connection closes.
    ended_streams: HashMap<u32, RetiredIds>,
    /// Connections that closed in this instant: forgotten once it settles.
    closed: Vec<u32>,
    /// Releases in this instant on a stream with no RPC under way (its
    /// `rpc_start` may come later in the same `t`): judged once it settles.
    outside: Vec<((u32, u32), ReleaseEv, u64)>,
    /// Streams whose RPC ended in this instant, with its status and line:
    /// judged whole, then forgotten, once it settles.
    ended: Vec<((u32, u32), u32, u64)>,
    /// Timed releases judged, and those on streams with no known point.
    pub(super) judged: u64,
    pub(super) unjudged: u64,
    pub(super) violations: u64,
    pub(super) first: String,
    pub(super) first_at: Option<(u64, u64)>,
}

impl ReleaseAudit {
    pub(super) fn feed(&mut self, e: &Event, line: u64) {
        if e.ep != Endpoint::Server {
            return;
        }
        if e.t != self.instant {
            self.settle();
            self.instant = e.t;
        }
        let key = (e.conn, e.stream);
        match &e.kind {
            Kind::RpcStart(r) => {
                if r.release.is_none() {
                    self.unnamed.insert(key);
                }
                if let Some(point) = r.release {
                    self.streams.insert(
                        key,
                        Stream {
                            point,
                            chunks: 0,
                            released: 0,
                            reached: HashSet::new(),
                            released_seqs: Default::default(),
                            unreleased: BTreeMap::new(),
                            withheld: r.withhold_after.is_some(),
                        },
                    );
                }
                // Releases of this instant that came before it in the file.
                let (early, rest) = std::mem::take(&mut self.outside)
                    .into_iter()
                    .partition(|(k, ..)| *k == key);
                self.outside = rest;
                for (k, r, line) in early {
                    self.release(k, &r, e.t, line);
                }
            }
            Kind::RpcEnd(end) => self.ended.push((key, end.status, line)),
            Kind::ConnClose(_) => self.closed.push(e.conn),
            Kind::BodyDrop(_) => {
                if let Some(s) = self.streams.get_mut(&key) {
                    s.withheld = true;
                }
            }
            Kind::Chunk(c) => {
                if let Some(s) = self.streams.get_mut(&key) {
                    s.chunks += u64::from(c.len);
                }
            }
            Kind::Decode(m) => {
                self.decoded(key, m.seq, m.framed, e.t);
                self.reached(key, ReleasePoint::Decode, m.seq)
            }
            Kind::Start(st) => self.reached(key, ReleasePoint::Start, st.seq),
            Kind::Complete(c) => self.reached(key, ReleasePoint::Complete, c.seq),
            // A message that will never reach the point gives its bytes
            // back there (a queue full, an attempt refused).
            Kind::Discard(d) => {
                if let Some(p) = self.streams.get(&key).map(|s| s.point) {
                    self.reached(key, p, d.seq)
                }
            }
            Kind::Release(r) if r.at != ReleasePoint::End => self.release(key, r, e.t, line),
            _ => {}
        }
    }

    /// A release timed at a release point (`at` other than `end`).
    fn release(&mut self, key: (u32, u32), r: &ReleaseEv, t: u64, line: u64) {
        if self.unnamed.contains(&key) {
            // Said beside the verdict, never judged.
            self.unjudged += 1;
            return;
        }
        let Some(s) = self.streams.get_mut(&key) else {
            // Its rpc_start may come later in this instant.
            self.outside.push((key, r.clone(), line));
            return;
        };
        self.judged += 1;
        if r.at != s.point {
            let point = s.point;
            self.add(t, line, || {
                format!(
                    "stream {}/{} released {} bytes at {}, but its rpc_start says {}",
                    key.0,
                    key.1,
                    r.bytes,
                    r.at.as_str(),
                    point.as_str()
                )
            });
            return;
        }
        match (r.at, r.seq) {
            (ReleasePoint::Frame, _) => {
                s.released += u64::from(r.bytes);
                if s.released > s.chunks {
                    self.over.entry(key).or_insert(line);
                }
            }
            (_, None) => self.add(t, line, || {
                format!(
                    "stream {}/{} released {} bytes at {} naming no message",
                    key.0,
                    key.1,
                    r.bytes,
                    r.at.as_str()
                )
            }),
            (_, Some(seq)) => {
                if s.released_seqs.contains(seq) {
                    let point = s.point;
                    self.add(t, line, || {
                        format!(
                            "stream {}/{} released message {seq} at {} a second time",
                            key.0,
                            key.1,
                            point.as_str()
                        )
                    });
                    return;
                }
                s.released_seqs.insert(seq);
                match s.unreleased.remove(&seq) {
                    Some(framed) => self.sized(key, seq, r.bytes, framed, t, line),
                    None => {
                        self.size_unknown.insert((key, seq), (r.bytes, line));
                    }
                }
                let s = self.streams.get_mut(&key).expect("looked up above");
                if !s.reached.remove(&seq) {
                    self.waiting.insert((key, seq), line);
                }
            }
        }
    }

    /// Message `seq` of stream `key` was decoded, `framed` bytes: its
    /// release will name as many (or one in this instant did).
    fn decoded(&mut self, key: (u32, u32), seq: u64, framed: u32, t: u64) {
        if let Some((bytes, rline)) = self.size_unknown.remove(&(key, seq)) {
            return self.sized(key, seq, bytes, framed, t, rline);
        }
        let Some(s) = self.streams.get_mut(&key) else {
            return;
        };
        // At frame, releases name no message; a message released before
        // its decode (an earlier t) was said then.
        if s.point != ReleasePoint::Frame && !s.released_seqs.contains(seq) {
            s.unreleased.insert(seq, framed);
        }
    }

    /// A release of message `seq`, `bytes`, against its `framed` size.
    fn sized(&mut self, key: (u32, u32), seq: u64, bytes: u32, framed: u32, t: u64, line: u64) {
        if bytes != framed {
            self.add(t, line, || {
                format!(
                    "stream {}/{} released {bytes} bytes for message {seq}, whose decode framed {framed}",
                    key.0, key.1
                )
            });
        }
    }

    /// Message `seq` of stream `key` reached `point`: a release of it
    /// waiting in this instant is answered, or the next one will be.
    fn reached(&mut self, key: (u32, u32), point: ReleasePoint, seq: u64) {
        let Some(s) = self.streams.get_mut(&key) else {
            return;
        };
        if s.point != point {
            return;
        }
        if self.waiting.remove(&(key, seq)).is_none() {
            s.reached.insert(seq);
        }
    }

    fn add(&mut self, t: u64, line: u64, detail: impl FnOnce() -> String) {
        self.violations += 1;
        if self.first_at.is_none() {
            self.first_at = Some((t, line));
            self.first = detail();
        }
    }

    /// The end of an instant: a release still waiting came before its
    /// trigger; a stream still over its chunks released bytes it had not
    /// received.
    pub(super) fn settle(&mut self) {
        let t = self.instant;
        // Releases with no RPC under way in their instant: before any
        // rpc_start of their stream, or after its rpc_end. In stream order,
        // not line order.
        let mut outside = std::mem::take(&mut self.outside);
        outside.sort_by_key(|(key, r, _)| (*key, r.seq, r.bytes));
        for (key, r, line) in outside {
            self.judged += 1;
            let ended = self
                .ended_streams
                .get(&key.0)
                .is_some_and(|ids| ids.contains(key.1));
            self.add(t, line, || {
                format!(
                    "stream {}/{} released {} bytes at {} {}",
                    key.0,
                    key.1,
                    r.bytes,
                    r.at.as_str(),
                    if ended {
                        "after its rpc_end"
                    } else {
                        "with no rpc_start of it before"
                    }
                )
            });
        }
        for ((key, seq), line) in std::mem::take(&mut self.waiting) {
            let point = self.streams.get(&key).map_or("?", |s| s.point.as_str());
            self.add(t, line, || {
                format!(
                    "stream {}/{} released message {seq} at {point} with no {point} (or discard) of it at or before that t",
                    key.0, key.1
                )
            });
        }
        for (key, line) in std::mem::take(&mut self.over) {
            if let Some(s) = self.streams.get(&key) {
                if s.released > s.chunks {
                    let (released, chunks) = (s.released, s.chunks);
                    self.add(t, line, || {
                        format!(
                            "stream {}/{} had released {released} bytes at frame, more than the {chunks} it had received",
                            key.0, key.1
                        )
                    });
                }
            }
        }
        // Releases whose message was never decoded (a trace that lost the
        // line): their size cannot be judged.
        self.size_unknown.clear();
        // By stream, not by line: the first named does not depend on which
        // of two RPCs ending in one nanosecond the file holds first.
        let mut ended = std::mem::take(&mut self.ended);
        ended.sort_unstable();
        for (key, status, line) in ended {
            self.unnamed.remove(&key);
            self.ended_streams.entry(key.0).or_default().insert(key.1);
            let Some(s) = self.streams.remove(&key) else {
                continue;
            };
            // Only an RPC that ended OK owes all it received: a reset or
            // cut one may have found its stream gone (h2 then returns the
            // connection's share itself).
            if status != 0 || s.withheld {
                continue;
            }
            if s.point == ReleasePoint::Frame && s.released < s.chunks {
                let (released, chunks) = (s.released, s.chunks);
                self.add(t, line, || {
                    format!(
                        "stream {}/{} ended OK having released {released} of the {chunks} bytes it received at frame",
                        key.0, key.1
                    )
                });
            } else if let Some((&seq, _)) = s.unreleased.first_key_value() {
                let (n, point) = (s.unreleased.len(), s.point.as_str());
                self.add(t, line, || {
                    format!(
                        "stream {}/{} ended OK with {n} decoded message(s) never released at {point} (message {seq} first)",
                        key.0, key.1
                    )
                });
            }
        }
        for conn in std::mem::take(&mut self.closed) {
            self.ended_streams.remove(&conn);
        }
    }
}
