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
//! On `t`, not on line order: the server's events of one nanosecond are
//! held until the next `t` and then read in one order of their own (per
//! stream: its `rpc_start`, what arrived and what the application did,
//! the releases, its `rpc_end`), so whichever order the file gives them,
//! a release finds every trigger of its instant before it, and the
//! verdict and the first violation named are the same.

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
    /// gives their bytes back at it) and whose release has not come.
    reached: HashSet<u64>,
    /// Messages released at their point: one release each (as ranges:
    /// seqs run in order, so a long stream keeps a few).
    released_seqs: RetiredIds<1>,
    /// Decoded messages whose release has not come (a point other than
    /// `frame`): seq → framed bytes. As many as the server holds unreleased.
    unreleased_msgs: BTreeMap<u64, u32>,
    /// `--stall-stream`: from this many body bytes on, the server withholds
    /// the stream's releases (its `rpc_start`'s `withhold_after`).
    withhold_after: Option<u64>,
    /// Its body was dropped (`body_drop`): h2 returns what it held.
    dropped: bool,
}

impl Stream {
    /// What it received need not all be released: the server withheld
    /// releases (the stream got past `withhold_after`) or dropped its body.
    fn exempt(&self) -> bool {
        self.dropped
            || self
                .withhold_after
                .is_some_and(|after| self.chunks >= after)
    }
}

/// The server's event kinds the check reads, in the order one instant's
/// are read in.
fn rank(k: &Kind) -> Option<u8> {
    Some(match k {
        Kind::RpcStart(_) => 0,
        Kind::Chunk(_) => 1,
        Kind::BodyDrop(_) => 2,
        Kind::Decode(_) => 3,
        Kind::Start(_) => 4,
        Kind::Complete(_) => 5,
        Kind::Discard(_) => 6,
        Kind::Release(r) if r.at != ReleasePoint::End => 7,
        Kind::RpcEnd(_) => 8,
        _ => return None,
    })
}

/// The fields that order two releases of one stream in one instant (their
/// content, so that which one a violation names does not come from the
/// file). The other kinds of one rank need none: what they do to the
/// stream (sum chunks, mark a message reached, end the RPC) comes out the
/// same in either order.
fn content(k: &Kind) -> (u64, u64, u64) {
    match k {
        Kind::Release(r) => (r.seq.map_or(0, |s| s + 1), u64::from(r.bytes), r.at as u64),
        _ => (0, 0, 0),
    }
}

#[derive(Default)]
pub(super) struct ReleaseAudit {
    instant: u64,
    /// This instant's events the check reads, with their lines, until the
    /// next `t` comes.
    held: Vec<(Event, u64)>,
    streams: HashMap<(u32, u32), Stream>,
    /// Some `rpc_start` named no point: a trace from before they did, whose
    /// releases are counted, not judged.
    unnamed: bool,
    /// Streams of an RPC that ended OK, judged whole at the end of their
    /// instant: with their `rpc_end`'s line.
    ended_ok: Vec<((u32, u32), u64)>,
    /// Timed releases judged, and those on streams with no known point.
    pub(super) judged: u64,
    pub(super) unjudged: u64,
    /// RPCs that ended OK and were asked to have released what they
    /// received, and those exempt from it.
    pub(super) owed: u64,
    pub(super) exempt: u64,
    pub(super) violations: u64,
    pub(super) first: String,
    pub(super) first_at: Option<(u64, u64)>,
}

impl ReleaseAudit {
    pub(super) fn feed(&mut self, e: &Event, line: u64) {
        if e.ep != Endpoint::Server || rank(&e.kind).is_none() {
            return;
        }
        if e.t != self.instant {
            self.settle();
            self.instant = e.t;
        }
        self.held.push((e.clone(), line));
    }

    /// Reads the instant's events, in the check's own order, and judges
    /// what ended in it.
    pub(super) fn settle(&mut self) {
        let mut held = std::mem::take(&mut self.held);
        held.sort_by_key(|(e, line)| (e.conn, e.stream, rank(&e.kind), content(&e.kind), *line));
        for (e, line) in held {
            self.read(&e, line);
        }
        for (key, line) in std::mem::take(&mut self.ended_ok) {
            self.owed(key, line);
        }
    }

    fn read(&mut self, e: &Event, line: u64) {
        let key = (e.conn, e.stream);
        match &e.kind {
            Kind::RpcStart(r) => match r.release {
                None => self.unnamed = true,
                Some(point) => {
                    self.streams.insert(
                        key,
                        Stream {
                            point,
                            chunks: 0,
                            released: 0,
                            reached: HashSet::new(),
                            released_seqs: RetiredIds::default(),
                            unreleased_msgs: BTreeMap::new(),
                            withhold_after: r.withhold_after,
                            dropped: false,
                        },
                    );
                }
            },
            Kind::Chunk(c) => {
                if let Some(s) = self.streams.get_mut(&key) {
                    s.chunks += u64::from(c.len);
                }
            }
            Kind::BodyDrop(_) => {
                if let Some(s) = self.streams.get_mut(&key) {
                    s.dropped = true;
                }
            }
            Kind::Decode(m) => {
                if let Some(s) = self.streams.get_mut(&key) {
                    // At frame, releases name no message.
                    if s.point != ReleasePoint::Frame && !s.released_seqs.contains(m.seq) {
                        s.unreleased_msgs.insert(m.seq, m.framed);
                    }
                }
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
            Kind::Release(r) => self.release(key, r, e.t, line),
            Kind::RpcEnd(end) => {
                if end.status == 0 {
                    self.ended_ok.push((key, line));
                } else {
                    // A reset or cut RPC may have found its stream gone
                    // (h2 then returns the connection's share itself).
                    self.streams.remove(&key);
                }
            }
            _ => {}
        }
    }

    /// A release timed at a release point (`at` other than `end`).
    fn release(&mut self, key: (u32, u32), r: &ReleaseEv, t: u64, line: u64) {
        let Some(s) = self.streams.get_mut(&key) else {
            if self.unnamed {
                // Said beside the verdict, never judged.
                self.unjudged += 1;
                return;
            }
            self.judged += 1;
            return self.add(t, line, || {
                format!(
                    "stream {}/{} released {} bytes at {} outside its RPC (no rpc_start of it under way)",
                    key.0,
                    key.1,
                    r.bytes,
                    r.at.as_str()
                )
            });
        };
        self.judged += 1;
        if r.at != s.point {
            // Its bytes came back, if at the wrong point: not owed again.
            if let Some(seq) = r.seq {
                s.unreleased_msgs.remove(&seq);
            }
            let point = s.point;
            return self.add(t, line, || {
                format!(
                    "stream {}/{} released {} bytes at {}, but its rpc_start says {}",
                    key.0,
                    key.1,
                    r.bytes,
                    r.at.as_str(),
                    point.as_str()
                )
            });
        }
        if r.at == ReleasePoint::Frame {
            // Bytes as they arrive, whatever message they belong to.
            s.released += u64::from(r.bytes);
            if s.released > s.chunks {
                let (released, chunks) = (s.released, s.chunks);
                self.add(t, line, || {
                    format!(
                        "stream {}/{} had released {released} bytes at frame, more than the {chunks} it had received",
                        key.0, key.1
                    )
                });
            }
            return;
        }
        let Some(seq) = r.seq else {
            return self.add(t, line, || {
                format!(
                    "stream {}/{} released {} bytes at {} naming no message",
                    key.0,
                    key.1,
                    r.bytes,
                    r.at.as_str()
                )
            });
        };
        if !s.released_seqs.insert(seq) {
            let point = s.point;
            return self.add(t, line, || {
                format!(
                    "stream {}/{} released message {seq} at {} a second time",
                    key.0,
                    key.1,
                    point.as_str()
                )
            });
        }
        let framed = s.unreleased_msgs.remove(&seq);
        let reached = s.reached.remove(&seq);
        let point = s.point;
        if !reached {
            self.add(t, line, || {
                format!(
                    "stream {}/{} released message {seq} at {point} with no {point} (or discard) of it at or before that t",
                    key.0, key.1, point = point.as_str()
                )
            });
        }
        // A message never decoded (a trace that lost the line): its size
        // cannot be judged.
        if let Some(framed) = framed.filter(|f| *f != r.bytes) {
            self.add(t, line, || {
                format!(
                    "stream {}/{} released {} bytes for message {seq}, whose decode framed {framed}",
                    key.0, key.1, r.bytes
                )
            });
        }
    }

    /// Message `seq` of stream `key` reached `point`: its release may come.
    fn reached(&mut self, key: (u32, u32), point: ReleasePoint, seq: u64) {
        let Some(s) = self.streams.get_mut(&key) else {
            return;
        };
        // At frame, releases name no message; one released already (a
        // discard after its decode-point release) owes none.
        if s.point == point && point != ReleasePoint::Frame && !s.released_seqs.contains(seq) {
            s.reached.insert(seq);
        }
    }

    /// An RPC that ended OK: it released what it received, unless exempt.
    fn owed(&mut self, key: (u32, u32), line: u64) {
        let t = self.instant;
        let Some(s) = self.streams.remove(&key) else {
            return;
        };
        if s.exempt() {
            self.exempt += 1;
            return;
        }
        self.owed += 1;
        if s.point == ReleasePoint::Frame && s.released < s.chunks {
            let (released, chunks) = (s.released, s.chunks);
            self.add(t, line, || {
                format!(
                    "stream {}/{} ended OK having released {released} of the {chunks} bytes it received at frame",
                    key.0, key.1
                )
            });
        } else if let Some((&seq, _)) = s.unreleased_msgs.first_key_value() {
            let (n, point) = (s.unreleased_msgs.len(), s.point.as_str());
            self.add(t, line, || {
                format!(
                    "stream {}/{} ended OK with {n} decoded message(s) never released at {point} (message {seq} first)",
                    key.0, key.1
                )
            });
        }
    }

    fn add(&mut self, t: u64, line: u64, detail: impl FnOnce() -> String) {
        self.violations += 1;
        if self.first_at.is_none() {
            self.first_at = Some((t, line));
            self.first = detail();
        }
    }
}
