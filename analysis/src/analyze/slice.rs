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
