//! The `release_point` check: the server released each stream's bytes at
//! the point its `rpc_start` names (`--release`), and never before what
//! triggers that point. The knob the whole study turns, judged from the
//! trace alone.
//!
//! On `t`, not on line order: a release and its trigger stamped in the same
//! nanosecond agree whichever of them the file holds first, so a release
//! that finds no trigger yet waits for the end of its instant.

use crate::schema::{Endpoint, Event, Kind, ReleasePoint};
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
    released_seqs: super::wire_view::RetiredIds<1>,
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
    /// Streams whose RPC ended in this instant: forgotten once it settles.
    ended: Vec<(u32, u32)>,
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
                if let Some(point) = r.release {
                    self.streams.insert(
                        key,
                        Stream {
                            point,
                            chunks: 0,
                            released: 0,
                            reached: HashSet::new(),
                            released_seqs: Default::default(),
                        },
                    );
                }
            }
            Kind::RpcEnd(_) => self.ended.push(key),
            Kind::Chunk(c) => {
                if let Some(s) = self.streams.get_mut(&key) {
                    s.chunks += u64::from(c.len);
                }
            }
            Kind::Decode(m) => self.reached(key, ReleasePoint::Decode, m.seq),
            Kind::Start(st) => self.reached(key, ReleasePoint::Start, st.seq),
            Kind::Complete(c) => self.reached(key, ReleasePoint::Complete, c.seq),
            // A message that will never reach the point gives its bytes
            // back there (a queue full, an attempt refused).
            Kind::Discard(d) => {
                if let Some(p) = self.streams.get(&key).map(|s| s.point) {
                    self.reached(key, p, d.seq)
                }
            }
            Kind::Release(r) if r.at != ReleasePoint::End => {
                let Some(s) = self.streams.get_mut(&key) else {
                    // No rpc_start names this stream's point: said beside
                    // the verdict, never judged.
                    self.unjudged += 1;
                    return;
                };
                self.judged += 1;
                if r.at != s.point {
                    let point = s.point;
                    self.add(e.t, line, || {
                        format!(
                            "stream {}/{} released {} bytes at {}, but its rpc_start says {}",
                            e.conn,
                            e.stream,
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
                    (_, None) => self.add(e.t, line, || {
                        format!(
                            "stream {}/{} released {} bytes at {} naming no message",
                            e.conn,
                            e.stream,
                            r.bytes,
                            r.at.as_str()
                        )
                    }),
                    (_, Some(seq)) => {
                        if s.released_seqs.contains(seq) {
                            let point = s.point;
                            self.add(e.t, line, || {
                                format!(
                                    "stream {}/{} released message {seq} at {} a second time",
                                    e.conn,
                                    e.stream,
                                    point.as_str()
                                )
                            });
                            return;
                        }
                        s.released_seqs.insert(seq);
                        if !s.reached.remove(&seq) {
                            self.waiting.insert((key, seq), line);
                        }
                    }
                }
            }
            _ => {}
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
        for key in std::mem::take(&mut self.ended) {
            self.streams.remove(&key);
        }
    }
}
