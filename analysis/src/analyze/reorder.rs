//! Time order by construction: events reach the trace file in the order
//! threads happened to hand them to the recorder, not in the order of their
//! `t` (a `release` can be written after the WINDOW_UPDATE it caused). The
//! analyzer sees them through this bounded reorder buffer, sorted by `t`.
//!
//! How late can an event be? Its `t` is read on the thread that records it,
//! a few instructions before the recorder accepts it; the lateness is the
//! time that thread spends between the two — in practice micro- to
//! milliseconds, more only when the thread is descheduled. [`WINDOW_NS`]
//! (250 ms) is two orders of magnitude above what was observed (the audit's
//! worst inversion was 0.5 ms); an event later than that is still analysed,
//! out of order, and counted in [`Reorder::late`] so that the summary says
//! so. Memory: at most [`MAX_HELD`] events are held; beyond it the earliest
//! is released early (counted too).
//!
//! Equal `t` are ordered by content, not by file position, so that any
//! reshuffle of a trace within the window gives the same analysis byte for
//! byte: endpoint, connection, frames before other events, direction, byte
//! offset (frames of one read share a `t` and keep their wire order) or
//! message sequence, stream, event type, and as a last resort the event's
//! JSON text.

use crate::schema::{Event, Kind};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// How far behind the newest `t` seen an event may arrive and still be
/// put in its place.
pub const WINDOW_NS: u64 = 250_000_000;
/// Events held at most (bounded memory whatever the event rate).
pub const MAX_HELD: usize = 1 << 19;

/// Where an event sorts: `t` first, then content (see the module doc).
type Key = (u64, u8, u32, u8, u8, u64, u32, usize);

/// The total order of events: `t` first, then content (see the module doc).
pub(super) fn key(e: &Event) -> Key {
    let (class, dir, sub) = match &e.kind {
        Kind::Frame(f) => (0, f.dir as u8, f.offset),
        Kind::Decode(m) | Kind::Schedule(m) => (1, 0, m.seq),
        Kind::Enqueue(q) => (1, 0, q.seq),
        Kind::Start(s) => (1, 0, s.seq),
        Kind::Complete(c) => (1, 0, c.seq),
        Kind::Discard(d) => (1, 0, d.seq),
        Kind::Send(s) => (1, 0, s.seq),
        Kind::NeverSent(n) => (1, 0, n.seq),
        Kind::WindowBlocked(w) => (1, 0, w.seq),
        Kind::WireError(w) => (1, w.dir as u8, w.offset),
        _ => (1, 0, 0),
    };
    (
        e.t,
        e.ep as u8,
        e.conn,
        class,
        dir,
        sub,
        e.stream,
        e.kind.index(),
    )
}

/// An event in the heap with its key (computed once, not at each of the
/// heap's comparisons) and its line in the file; smallest key on top. The
/// event is boxed: the heap moves its entries at every step of a push or a
/// pop, and moving 200-byte entries was 30 % of an analysis.
pub(super) struct Held(pub(super) Key, pub(super) Box<Event>, pub(super) u64);

impl Held {
    pub(super) fn new(e: Event, line: u64) -> Held {
        Held(key(&e), Box::new(e), line)
    }
}

impl Ord for Held {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.cmp(&self.0).then_with(|| {
            // Same key: compare the text (rare: equal time, place and type).
            let a = serde_json::to_string(&self.1).unwrap_or_default();
            let b = serde_json::to_string(&other.1).unwrap_or_default();
            b.cmp(&a)
        })
    }
}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Held {}

/// The bounded reorder buffer. Push events in file order; it hands them
/// back in time order once nothing earlier can still arrive.
#[derive(Default)]
pub struct Reorder {
    heap: BinaryHeap<Held>,
    newest: u64,
    /// The greatest key handed out: an event that sorts at or before it
    /// arrived too late to be put in its place, even one of equal `t` (a
    /// frame of the same read, whose order is its content's).
    released: Option<Key>,
    /// Events that arrived after a later event had already been handed out
    /// (later than the window, or pushed out by [`MAX_HELD`]).
    pub late: u64,
    /// The earliest `t` of those: the analysis before it saw every event
    /// in its place.
    pub first_late_t: Option<u64>,
    /// Events handed out early because the buffer was full.
    pub forced: u64,
}

impl Reorder {
    /// Adds `e`, read from line `line`; calls `out` with every event (and
    /// its line) that is now due, in order.
    pub fn push(&mut self, e: Event, line: u64, mut out: impl FnMut(Event, u64)) {
        if self.released.is_some_and(|r| key(&e) <= r) {
            self.late += 1;
            self.first_late_t = Some(self.first_late_t.map_or(e.t, |f| f.min(e.t)));
        }
        self.newest = self.newest.max(e.t);
        self.heap.push(Held::new(e, line));
        while let Some(top) = self.heap.peek() {
            // Held while within the window: an event exactly 250 ms behind
            // the newest still finds its place, as the docs say ("more
            // than 250 ms" is late).
            let due = top.1.t.saturating_add(WINDOW_NS) < self.newest;
            let full = self.heap.len() > MAX_HELD;
            if !due && !full {
                break;
            }
            if full && !due {
                self.forced += 1;
            }
            self.hand_out(&mut out);
        }
    }

    /// What to warn about once the trace is read, if anything. Events
    /// handed out early by a full buffer matter only if one then arrived
    /// after a later one: otherwise the order held (a flood of a million
    /// WINDOW_UPDATEs within 250 ms fills the buffer and loses nothing).
    pub fn warning(&self) -> Option<String> {
        if self.late == 0 {
            return None;
        }
        let full = if self.forced > 0 {
            format!(
                ", or after a full reorder buffer ({MAX_HELD} events) had handed later ones out"
            )
        } else {
            String::new()
        };
        let (n, they) = match self.late {
            1 => ("event", "it"),
            _ => ("events", "they"),
        };
        Some(format!(
            "{} {n} analysed out of time order: {they} arrived more than {} ms after later ones{full}",
            self.late,
            WINDOW_NS / 1_000_000,
        ))
    }

    /// Hands out everything still held, in order.
    pub fn finish(&mut self, mut out: impl FnMut(Event, u64)) {
        while !self.heap.is_empty() {
            self.hand_out(&mut out);
        }
    }

    fn hand_out(&mut self, out: &mut impl FnMut(Event, u64)) {
        if let Some(Held(k, e, line)) = self.heap.pop() {
            self.released = Some(self.released.map_or(k, |r| r.max(k)));
            out(*e, line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{ChunkEv, Dir, Endpoint, FrameEv, FrameType};

    fn ev(t: u64, stream: u32) -> Event {
        Event {
            t,
            ep: Endpoint::Server,
            conn: 1,
            stream,
            kind: Kind::Chunk(ChunkEv { len: 1 }),
        }
    }

    fn frame(t: u64, offset: u64) -> Event {
        Event {
            t,
            ep: Endpoint::Client,
            conn: 1,
            stream: 1,
            kind: Kind::Frame(FrameEv {
                dir: Dir::Out,
                offset,
                frame: FrameType::DATA,
                len: 10,
                ..FrameEv::default()
            }),
        }
    }

    fn run(events: Vec<Event>) -> (Vec<Event>, Reorder) {
        let mut r = Reorder::default();
        let mut out = vec![];
        for (i, e) in events.into_iter().enumerate() {
            r.push(e, i as u64 + 2, |e, _| out.push(e));
        }
        r.finish(|e, _| out.push(e));
        (out, r)
    }

    #[test]
    fn events_come_out_in_time_order_and_ties_in_content_order() {
        let (out, r) = run(vec![
            ev(30, 1),
            ev(10, 3),
            frame(20, 18),
            frame(20, 9),
            ev(10, 1),
        ]);
        let order: Vec<(u64, u32)> = out.iter().map(|e| (e.t, e.stream)).collect();
        assert_eq!(order, vec![(10, 1), (10, 3), (20, 1), (20, 1), (30, 1)]);
        match (&out[2].kind, &out[3].kind) {
            (Kind::Frame(a), Kind::Frame(b)) => assert_eq!((a.offset, b.offset), (9, 18)),
            other => panic!("{other:?}"),
        }
        assert_eq!((r.late, r.forced), (0, 0));
    }

    /// Ties of one kind sort by what orders them on the wire or in the
    /// application (a message's `seq`, an error's direction and offset),
    /// not by their text, where 10 sorts before 9.
    #[test]
    fn ties_of_each_kind_sort_by_sequence_not_by_text() {
        use crate::schema::*;
        let kinds: Vec<fn(u64) -> Kind> = vec![
            |seq| {
                Kind::Decode(MsgEv {
                    seq,
                    size: 1,
                    framed: 6,
                })
            },
            |seq| {
                Kind::Schedule(MsgEv {
                    seq,
                    size: 1,
                    framed: 6,
                })
            },
            |seq| {
                Kind::Enqueue(EnqueueEv {
                    seq,
                    depth: 1,
                    queued_bytes: 6,
                })
            },
            |seq| {
                Kind::Start(StartEv {
                    seq,
                    worker: 0,
                    wait_ns: 0,
                    depth: 0,
                })
            },
            |seq| {
                Kind::Complete(CompleteEv {
                    seq,
                    worker: 0,
                    service_ns: 1,
                })
            },
            |seq| {
                Kind::Discard(DiscardEv {
                    seq,
                    reason: DiscardReason::Cancelled,
                })
            },
            |seq| {
                Kind::Send(SendEv {
                    seq,
                    scheduled: 1,
                    begin: 1,
                    bytes: 6,
                })
            },
            |seq| {
                Kind::NeverSent(NeverSentEv {
                    seq,
                    reason: NeverSentReason::Backlog,
                    count: 1,
                })
            },
            |seq| {
                Kind::WindowBlocked(WindowBlockedEv {
                    seq,
                    start: 1,
                    open: false,
                })
            },
            |offset| {
                Kind::WireError(WireErrorEv {
                    dir: Dir::In,
                    offset,
                    error: "e".into(),
                })
            },
        ];
        for kind in kinds {
            let at = |seq| Event {
                t: 7,
                ep: Endpoint::Server,
                conn: 1,
                stream: 1,
                kind: kind(seq),
            };
            let (out, _) = run(vec![at(10), at(9)]);
            let text: Vec<String> = out
                .iter()
                .map(|e| serde_json::to_string(e).unwrap())
                .collect();
            assert_eq!(
                text,
                [at(9), at(10)].map(|e| serde_json::to_string(&e).unwrap()),
                "{text:?}"
            );
        }
        // A wire error's direction sorts before its offset.
        let error = |dir, offset| Event {
            t: 7,
            ep: Endpoint::Server,
            conn: 1,
            stream: 0,
            kind: Kind::WireError(WireErrorEv {
                dir,
                offset,
                error: "e".into(),
            }),
        };
        let (out, _) = run(vec![error(Dir::Out, 1), error(Dir::In, 2)]);
        let dirs: Vec<Dir> = out
            .iter()
            .map(|e| match &e.kind {
                Kind::WireError(w) => w.dir,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(dirs, [Dir::In, Dir::Out]);
    }

    #[test]
    fn an_event_later_than_the_window_is_kept_and_counted() {
        let (out, r) = run(vec![
            ev(5, 1),
            ev(5 + 2 * WINDOW_NS, 1),
            ev(5 + 4 * WINDOW_NS, 1),
            ev(6, 1),
        ]);
        assert_eq!(out.len(), 4);
        assert_eq!(r.late, 1, "t=6 came after t=5+2W was handed out");
        // Handed out in time, none by a full buffer: the warning says so.
        assert_eq!(r.forced, 0);
        assert_eq!(
            r.warning().as_deref(),
            Some(
                "1 event analysed out of time order: it arrived more than 250 ms after later ones"
            )
        );
        // Within the window, a late-written event still finds its place.
        let (out, r) = run(vec![ev(5, 1), ev(5 + WINDOW_NS / 2, 1), ev(6, 1)]);
        assert_eq!(
            out.iter().map(|e| e.t).collect::<Vec<_>>(),
            vec![5, 6, 5 + WINDOW_NS / 2]
        );
        assert_eq!(r.late, 0);
    }

    /// The window's edge: an event exactly 250 ms behind the newest still
    /// finds its place, and one of a `t` already handed out that sorts
    /// before it (a frame of the same read, written a window later) is
    /// counted late. Both went uncounted and changed figures (helper-56).
    #[test]
    fn the_windows_edge_and_ties_are_judged_on_the_whole_order() {
        let (out, r) = run(vec![frame(10, 18), ev(10 + WINDOW_NS, 1), frame(10, 9)]);
        let offsets: Vec<u64> = out
            .iter()
            .filter_map(|e| match &e.kind {
                Kind::Frame(f) => Some(f.offset),
                _ => None,
            })
            .collect();
        assert_eq!(offsets, vec![9, 18], "exactly 250 ms behind: in its place");
        assert_eq!(r.late, 0);
        let (out, r) = run(vec![frame(10, 18), ev(11 + WINDOW_NS, 1), frame(10, 9)]);
        assert_eq!(out.len(), 3);
        assert_eq!(r.late, 1, "its partner at t=10 was handed out before it");
        assert_eq!(r.first_late_t, Some(10));
    }

    /// A buffer filled by events in order hands them out early and loses
    /// no order: nothing to warn about (it warned "0 events arrived …").
    /// One that then gets an earlier event says so, and why.
    #[test]
    fn a_full_buffer_warns_only_when_order_was_lost() {
        let mut events: Vec<Event> = (0..MAX_HELD as u64 + 10).map(|t| ev(t, 1)).collect();
        let (out, r) = run(events.clone());
        assert_eq!(out.len(), events.len());
        assert_eq!((r.late, r.forced), (0, 10));
        assert_eq!(r.warning(), None);
        // Full just as its earliest events fell due: handed out in time,
        // none forced.
        let mut due: Vec<Event> = (0..MAX_HELD as u64).map(|t| ev(t, 1)).collect();
        due.push(ev(2 * WINDOW_NS, 1));
        let (_, r) = run(due);
        assert_eq!((r.late, r.forced), (0, 0));
        events.push(ev(3, 1));
        let (_, r) = run(events);
        assert_eq!(r.late, 1);
        assert_eq!(
            r.warning().as_deref(),
            Some(
                "1 event analysed out of time order: it arrived more than 250 ms after later \
                 ones, or after a full reorder buffer (524288 events) had handed later ones out"
            )
        );
    }
}
