//! Where the report's ladder looks by default (see [`crate::ladder::build`]):
//! found by one pass over the trace in time order. The analysis makes that
//! pass anyway and hands its finding to the ladder: when there is no anchor,
//! the ladder then reads only its slice instead of the whole trace once more
//! to find none.

use crate::schema::{Dir, Endpoint, Event, FrameType, Kind};

/// The default slice's anchor: the first `enqueue` at depth ≥ 2 (server)
/// after the server's first WINDOW_UPDATE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Anchor {
    pub t: u64,
    pub conn: u32,
    /// The first DATA frame before it, if any (the slice starts no earlier
    /// than a twentieth of its span before that).
    pub data_before: Option<u64>,
}

/// What a pass in time order has seen so far (relay legs left out: the
/// ladder draws a probe client and a probe server).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SliceFinder {
    pub first_wu: Option<u64>,
    pub first_data: Option<u64>,
    pub first_event: Option<u64>,
    pub anchor: Option<Anchor>,
    /// The server's tap or application is in the trace, and its queue
    /// recorded an `enqueue`: without them no anchor can be looked for.
    pub server_seen: bool,
    pub queue_seen: bool,
}

impl SliceFinder {
    /// Feeds the next event in time order; with `anchors`, returns the
    /// anchor when `e` is it (the first one only).
    pub fn feed(&mut self, e: &Event, anchors: bool) -> Option<Anchor> {
        if e.ep.is_relay_leg() {
            return None;
        }
        self.first_event.get_or_insert(e.t);
        if e.ep == Endpoint::Server {
            self.server_seen = true;
            self.queue_seen |= matches!(e.kind, Kind::Enqueue(_));
        }
        match &e.kind {
            Kind::Frame(f) => {
                if f.frame == FrameType::DATA {
                    self.first_data.get_or_insert(e.t);
                }
                if e.ep == Endpoint::Server
                    && f.dir == Dir::Out
                    && f.frame == FrameType::WINDOW_UPDATE
                {
                    self.first_wu.get_or_insert(e.t);
                }
            }
            Kind::Enqueue(q)
                if anchors
                    && self.anchor.is_none()
                    && e.ep == Endpoint::Server
                    && q.depth >= 2
                    && self.first_wu.is_some_and(|w| e.t > w) =>
            {
                self.anchor = Some(Anchor {
                    t: e.t,
                    conn: e.conn,
                    data_before: self.first_data,
                });
                return self.anchor;
            }
            _ => {}
        }
        None
    }
}

impl Anchor {
    /// The slice of `span` ns around it: a quarter of the span before it,
    /// but not long before the first DATA frame (nothing happens there).
    pub fn window(&self, span: u64) -> (u64, u64) {
        let first_data = self.data_before.unwrap_or(self.t);
        let start = self
            .t
            .saturating_sub(span / 4)
            .max(first_data.saturating_sub(span / 20));
        (start, start.saturating_add(span))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::test_event as ev;
    use crate::schema::{EnqueueEv, FrameEv};

    fn frame(dir: Dir, frame: FrameType) -> Kind {
        Kind::Frame(FrameEv {
            dir,
            frame,
            len: 4,
            ..FrameEv::default()
        })
    }

    fn enqueue(depth: u32) -> Kind {
        Kind::Enqueue(EnqueueEv {
            seq: 0,
            depth,
            queued_bytes: 10,
        })
    }

    /// The first WINDOW_UPDATE is the server's own (not one it received,
    /// not the client's), the first DATA either tap's, and a relay's legs
    /// count for nothing.
    #[test]
    fn the_firsts_are_the_probes_own() {
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let mut f = SliceFinder::default();
        let events = [
            ev(
                1,
                Endpoint::ClientLeg,
                1,
                1,
                frame(Dir::Out, FrameType::DATA),
            ),
            ev(2, s, 1, 0, frame(Dir::In, FrameType::WINDOW_UPDATE)),
            ev(3, c, 1, 0, frame(Dir::Out, FrameType::WINDOW_UPDATE)),
            ev(4, s, 1, 1, frame(Dir::Out, FrameType::DATA)),
            ev(5, s, 1, 0, frame(Dir::Out, FrameType::WINDOW_UPDATE)),
            ev(6, s, 1, 1, frame(Dir::In, FrameType::DATA)),
        ];
        for e in &events {
            assert_eq!(f.feed(e, true), None);
        }
        assert_eq!(
            (f.first_event, f.first_data, f.first_wu),
            (Some(2), Some(4), Some(5))
        );
        assert!(f.server_seen && !f.queue_seen);
        // The client's events alone: no server, no queue.
        let mut f = SliceFinder::default();
        f.feed(&ev(1, c, 1, 1, enqueue(3)), true);
        f.feed(&ev(2, Endpoint::ServerLeg, 1, 1, enqueue(3)), true);
        assert!(!f.server_seen && !f.queue_seen);
        f.feed(&ev(3, s, 1, 1, frame(Dir::In, FrameType::DATA)), true);
        assert!(f.server_seen && !f.queue_seen);
        f.feed(&ev(4, s, 1, 1, enqueue(1)), true);
        assert!(f.queue_seen);
    }

    /// The anchor: the server's first `enqueue` at depth 2 or more strictly
    /// after its first WINDOW_UPDATE, once, and only when asked for.
    #[test]
    fn the_anchor_is_the_first_queue_of_two_after_the_first_update() {
        let s = Endpoint::Server;
        let run = |events: &[Event], anchors: bool| {
            let mut f = SliceFinder::default();
            let found: Vec<Anchor> = events.iter().filter_map(|e| f.feed(e, anchors)).collect();
            (found, f.anchor)
        };
        let events = [
            ev(10, s, 1, 1, frame(Dir::In, FrameType::DATA)),
            ev(20, s, 1, 1, enqueue(5)),
            ev(30, s, 1, 0, frame(Dir::Out, FrameType::WINDOW_UPDATE)),
            ev(30, s, 2, 1, enqueue(5)),
            ev(40, Endpoint::Client, 3, 1, enqueue(5)),
            ev(50, s, 4, 1, enqueue(1)),
            ev(60, s, 5, 1, enqueue(2)),
            ev(70, s, 6, 1, enqueue(9)),
        ];
        let anchor = Anchor {
            t: 60,
            conn: 5,
            data_before: Some(10),
        };
        assert_eq!(run(&events, true), (vec![anchor], Some(anchor)));
        assert_eq!(run(&events, false), (vec![], None));
    }

    /// The slice: a quarter of its span before the anchor, but no more
    /// than a twentieth before the first DATA frame.
    #[test]
    fn the_slice_starts_a_quarter_before_its_anchor_or_near_the_first_data() {
        let at = |data_before| Anchor {
            t: 10_000,
            conn: 1,
            data_before,
        };
        // Without a DATA frame before it, the anchor stands for one.
        assert_eq!(at(None).window(4_000), (9_800, 13_800));
        assert_eq!(at(Some(1_000)).window(4_000), (9_000, 13_000));
        assert_eq!(at(Some(9_800)).window(4_000), (9_600, 13_600));
        assert_eq!(at(Some(9_800)).window(100_000), (4_800, 104_800));
        assert_eq!(at(Some(5)).window(u64::MAX), (0, u64::MAX));
    }
}
