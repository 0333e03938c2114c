//! The server pipeline of each message, as a state machine: chunk →
//! decode → enqueue → start → complete | discard, with the running totals
//! (unreleased, owned and queued bytes, queue depth) it implies.

use super::wire_view::Flow;
use super::Analyzer;
use crate::schema::{self, Endpoint, Event, ReleasePoint};
use std::collections::HashMap;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum MsgState {
    Owned,
    Queued,
    InService,
}

/// Server-side state of one RPC.
#[derive(Default)]
pub(super) struct Rpc {
    pub(super) unreleased: i64,
    pub(super) chunks: u64,
    /// Messages decoded on this stream.
    pub(super) decoded: u64,
    /// Framed bytes of those messages: `chunks - decoded_bytes` is the
    /// partial message the stream holds.
    pub(super) decoded_bytes: u64,
    /// Messages completed and discarded on this stream.
    pub(super) completed: u64,
    pub(super) discarded: u64,
    pub(super) msgs: HashMap<u64, (u32, MsgState)>,
    /// The stream's release point, as the server's `rpc_start` says (None
    /// in older traces).
    pub(super) release: Option<ReleasePoint>,
    /// The application dropped the body (`body_drop`).
    pub(super) body_dropped: bool,
}

impl Analyzer {
    pub(super) fn chunk(&mut self, e: &Event, c: &schema::ChunkEv) {
        let t = e.t;
        let rpc = self.rpcs.entry((e.conn, e.stream)).or_default();
        rpc.unreleased += c.len as i64;
        rpc.chunks += c.len as u64;
        let u = rpc.unreleased;
        self.s.max_stream_unreleased_bytes =
            self.s.max_stream_unreleased_bytes.max(u.max(0) as u64);
        self.unreleased += c.len as i64;
        self.s.max_unreleased_bytes = self
            .s
            .max_unreleased_bytes
            .max(self.unreleased.max(0) as u64);
        self.tl.unreleased.push(t, self.unreleased as f64);
        // Credit conservation: never more unreleased than the window
        // advertised (or the one a SETTINGS lowered, while DATA sent before
        // the client knew of it is still held).
        let advertised = self
            .conns
            .get(&(Endpoint::Server, e.conn))
            .map_or(crate::windows::DEFAULT_WINDOW, |c| {
                c.flows[Flow::C2s as usize].credit_bound()
            });
        if u > advertised {
            self.credit_violations += 1;
            self.first_credit_violation.get_or_insert((t, self.line));
            if self.credit_detail.is_empty() {
                self.credit_detail = format!(
                    "stream {} held {u} unreleased bytes at {:.3}s, above the advertised window {advertised}",
                    e.stream,
                    self.secs(t)
                );
            }
        }
    }

    pub(super) fn release(&mut self, e: &Event, r: &schema::ReleaseEv) {
        let t = e.t;
        if let Some(rpc) = self.rpcs.get_mut(&(e.conn, e.stream)) {
            rpc.unreleased -= r.bytes as i64;
        }
        self.unreleased -= r.bytes as i64;
        self.tl.unreleased.push(t, self.unreleased as f64);
        let timed = r.at != ReleasePoint::End;
        if timed {
            self.s.releases += 1;
            self.s.released_bytes += r.bytes as u64;
            // One point when every timed release shows it; `mixed` when
            // streams release at different points (`--release complete,1=frame`).
            let point = r.at.as_str();
            match self.s.release_point.as_deref() {
                None => self.s.release_point = Some(point.to_string()),
                Some(p) if p == point || p == "mixed" => {}
                Some(_) => self.s.release_point = Some("mixed".to_string()),
            }
        } else {
            self.s.end_releases += 1;
            self.s.end_released_bytes += r.bytes as u64;
        }
        self.pending_stream
            .entry((e.conn, e.stream))
            .or_default()
            .push(t, r.bytes as u64, timed);
        self.pending_conn
            .entry(e.conn)
            .or_default()
            .push(t, r.bytes as u64, timed);
    }

    pub(super) fn decode(&mut self, e: &Event, m: &schema::MsgEv) {
        let t = e.t;
        self.s.decoded += 1;
        self.count_message(e, false, 0, 1);
        self.first_decode.get_or_insert(t);
        self.last_decode = t;
        let rpc = self.rpcs.entry((e.conn, e.stream)).or_default();
        rpc.decoded += 1;
        rpc.decoded_bytes += m.framed as u64;
        if m.framed == m.size {
            self.s.raw_units = true;
        }
        rpc.msgs.insert(m.seq, (m.framed, MsgState::Owned));
        self.owned += m.framed as i64;
        self.s.max_owned_bytes = self.s.max_owned_bytes.max(self.owned as u64);
        self.tl.owned_bytes.push(t, self.owned as f64);
    }

    pub(super) fn enqueue(&mut self, e: &Event, q: &schema::EnqueueEv) {
        let t = e.t;
        if let Some((framed, _)) = self.set_state(e, q.seq, MsgState::Queued) {
            self.queued_bytes += framed as i64;
        }
        self.depth += 1;
        self.s.max_queue_depth = self.s.max_queue_depth.max(self.depth as u64);
        self.s.max_queued_bytes = self.s.max_queued_bytes.max(self.queued_bytes as u64);
        self.tl.queue_depth.push(t, self.depth as f64);
    }

    pub(super) fn start(&mut self, e: &Event, st: &schema::StartEv) {
        let t = e.t;
        self.first_start.get_or_insert(t);
        if let Some((framed, MsgState::Queued)) = self.set_state(e, st.seq, MsgState::InService) {
            self.queued_bytes -= framed as i64;
            self.depth -= 1;
        }
        self.tl.queue_depth.push(t, self.depth as f64);
    }

    pub(super) fn complete(&mut self, e: &Event, c: &schema::CompleteEv) {
        let t = e.t;
        self.s.completed += 1;
        self.count_message(e, false, 1, 1);
        if let Some(rpc) = self.rpcs.get_mut(&(e.conn, e.stream)) {
            rpc.completed += 1;
        }
        self.last_complete = t;
        self.forget(e, c.seq, t);
        self.tl.completed.push(t, self.s.completed as f64);
    }

    pub(super) fn discard(&mut self, e: &Event, d: &schema::DiscardEv) {
        let t = e.t;
        self.s.discarded += 1;
        self.count_message(e, false, 2, 1);
        if let Some(rpc) = self.rpcs.get_mut(&(e.conn, e.stream)) {
            rpc.discarded += 1;
        }
        *self
            .s
            .discarded_by_reason
            .entry(d.reason.as_str().into())
            .or_default() += 1;
        self.forget(e, d.seq, t);
        self.tl.discarded.push(t, self.s.discarded as f64);
    }

    /// Moves a message to `to`; returns its framed size and previous state.
    fn set_state(&mut self, e: &Event, seq: u64, to: MsgState) -> Option<(u32, MsgState)> {
        let m = self.rpcs.get_mut(&(e.conn, e.stream))?.msgs.get_mut(&seq)?;
        let before = m.1;
        m.1 = to;
        Some((m.0, before))
    }

    /// A message left the application (completed or discarded).
    fn forget(&mut self, e: &Event, seq: u64, t: u64) {
        let Some(rpc) = self.rpcs.get_mut(&(e.conn, e.stream)) else {
            return;
        };
        let Some((framed, st)) = rpc.msgs.remove(&seq) else {
            return;
        };
        if rpc.msgs.is_empty() {
            // Its table's room goes with its last message: what an RPC
            // keeps once done is its counters.
            rpc.msgs = HashMap::new();
        }
        self.owned -= framed as i64;
        if st == MsgState::Queued {
            self.queued_bytes -= framed as i64;
            self.depth -= 1;
            self.tl.queue_depth.push(t, self.depth as f64);
        }
        self.tl.owned_bytes.push(t, self.owned as f64);
    }
}
