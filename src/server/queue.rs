//! The application queue between the handler and the workers, with the
//! bookkeeping the trace needs (depth, queued and owned bytes, in service).

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// One decoded message owned by the application.
pub struct Job {
    pub seq: u64,
    /// Bytes it occupied on the wire (prefix included).
    pub framed: u32,
    pub decoded_at: u64,
    /// The decoded message itself: the memory the queue really holds.
    /// Held, never read: the worker's timer stands in for the work.
    #[allow(dead_code, reason = "held for the memory it occupies")]
    pub body: Vec<bytes::Bytes>,
    /// The bounded queue's slot, given back when a worker takes the job.
    pub slot: Option<OwnedSemaphorePermit>,
}

/// The bytes of a message not yet whole that one RPC's deframer holds,
/// counted over all RPCs (`Live::partial_bytes`) and bounded together with
/// the owned bytes by --max-owned-bytes: with credit released per frame a
/// client can park up to --max-message-size on every stream it opens (300
/// streams parked 1.2 GB past an 8 MiB limit). Given back when dropped.
pub struct PartialHold {
    live: Arc<crate::live::Live>,
    max: u64,
    held: u64,
}

impl PartialHold {
    pub fn new(live: Arc<crate::live::Live>, max: u64) -> PartialHold {
        PartialHold { live, max, held: 0 }
    }

    /// The RPC now holds `now` bytes of an unfinished message; refused, with
    /// the reason, when they grew past --max-owned-bytes with what every RPC
    /// holds and owns.
    pub fn set(&mut self, now: u64) -> Result<(), String> {
        if now == self.held {
            return Ok(());
        }
        if now < self.held {
            self.live.partial_bytes.fetch_sub(self.held - now, Relaxed);
            self.held = now;
            return Ok(());
        }
        let add = now - self.held;
        let partial = self.live.partial_bytes.fetch_add(add, Relaxed) + add;
        self.held = now;
        let owned = self.live.owned_bytes.load(Relaxed);
        if partial + owned > self.max {
            return Err(format!(
                "the server holds {partial} bytes of messages not yet whole (or, of Exchange, whole and not yet admitted) and owns {owned} bytes of decoded ones; this RPC's message ({now} bytes so far) passes --max-owned-bytes {}",
                self.max
            ));
        }
        Ok(())
    }
}

impl Drop for PartialHold {
    fn drop(&mut self) {
        self.live.partial_bytes.fetch_sub(self.held, Relaxed);
    }
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    queued_bytes: u64,
    /// Framed bytes decoded and not yet completed or discarded.
    owned_bytes: u64,
    /// (seq, framed) of messages a worker holds.
    in_service: Vec<(u64, u32)>,
    closed: bool,
    completed: u64,
}

/// A snapshot for samples and events.
#[derive(Clone, Copy, Debug, Default)]
pub struct Levels {
    pub depth: u32,
    pub queued_bytes: u64,
    pub owned_bytes: u64,
}

pub struct AppQueue {
    st: Mutex<State>,
    /// The server-wide count of owned bytes (all RPCs), for --max-owned-bytes.
    live: Arc<crate::live::Live>,
    /// --max-owned-bytes: what all RPCs together may own.
    max_owned: u64,
    notify: Notify,
    /// Present for `bounded:K`: K slots, reserved before reading a message.
    pub slots: Option<Arc<Semaphore>>,
}

impl AppQueue {
    pub fn new(bounded: Option<u32>, live: Arc<crate::live::Live>, max_owned: u64) -> AppQueue {
        AppQueue {
            st: Mutex::new(State::default()),
            live,
            max_owned,
            notify: Notify::new(),
            slots: bounded.map(|k| Arc::new(Semaphore::new(k as usize))),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn levels(st: &State) -> Levels {
        Levels {
            depth: st.jobs.len() as u32,
            queued_bytes: st.queued_bytes,
            owned_bytes: st.owned_bytes,
        }
    }

    pub fn snapshot(&self) -> Levels {
        Self::levels(&self.lock())
    }

    /// A message was decoded: the application owns its bytes from now on.
    ///
    /// Refused, with the reason, when message `seq` would pass
    /// --max-owned-bytes over all RPCs (checked and counted in one atomic
    /// step, so two RPCs cannot both slip under the limit).
    pub fn own(&self, seq: u64, framed: u32) -> Result<(), String> {
        let max = self.max_owned;
        self.live
            .owned_bytes
            .fetch_update(Relaxed, Relaxed, |owned| {
                (owned + framed as u64 <= max).then_some(owned + framed as u64)
            })
            .map_err(|owned| {
                format!(
                    "the server owns {owned} bytes of unfinished messages; message {seq} ({framed} bytes) would pass --max-owned-bytes {max}"
                )
            })?;
        self.lock().owned_bytes += framed as u64;
        Ok(())
    }

    /// Adds a job; returns the levels after it.
    pub fn push(&self, job: Job) -> Levels {
        let mut st = self.lock();
        st.queued_bytes += job.framed as u64;
        st.jobs.push_back(job);
        let l = Self::levels(&st);
        drop(st);
        self.notify.notify_one();
        l
    }

    pub fn depth(&self) -> usize {
        self.lock().jobs.len()
    }

    /// Marks `(seq, framed)` as in service (direct mode, or a worker's pop).
    pub fn begin_service(&self, seq: u64, framed: u32) {
        self.lock().in_service.push((seq, framed));
    }

    /// Ends service of `seq`: the application no longer owns its bytes.
    ///
    /// The in-service entry is the message's ownership token: whoever takes
    /// it ends the message. Returns false when [`AppQueue::take_all`] took it
    /// first (the message was discarded while the worker ran): the worker
    /// must then not complete it, so every message ends exactly once.
    #[must_use]
    pub fn end_service(&self, seq: u64, framed: u32) -> bool {
        let mut st = self.lock();
        let Some(i) = st.in_service.iter().position(|(s, _)| *s == seq) else {
            return false;
        };
        st.in_service.swap_remove(i);
        st.owned_bytes -= framed as u64;
        st.completed += 1;
        self.live.owned_bytes.fetch_sub(framed as u64, Relaxed);
        true
    }

    /// Waits for the next job; `None` once closed and empty. The job is
    /// marked in service atomically with its removal from the queue.
    pub async fn pop(&self) -> Option<(Job, Levels)> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.lock();
                if let Some(job) = st.jobs.pop_front() {
                    st.queued_bytes -= job.framed as u64;
                    st.in_service.push((job.seq, job.framed));
                    let l = Self::levels(&st);
                    if !st.jobs.is_empty() {
                        self.notify.notify_one();
                    }
                    return Some((job, l));
                }
                if st.closed {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// No more jobs will be pushed; workers finish what is queued.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// Takes every queued and in-service message for discarding, closing the
    /// queue, and with them their ownership tokens (a worker still running
    /// one of them will find [`AppQueue::end_service`] refused). Returns
    /// their sequence numbers.
    pub fn take_all(&self) -> Vec<u64> {
        let mut st = self.lock();
        st.closed = true;
        let mut seqs: Vec<u64> = st.in_service.drain(..).map(|(s, _)| s).collect();
        seqs.extend(st.jobs.drain(..).map(|j| j.seq));
        st.queued_bytes = 0;
        self.live.owned_bytes.fetch_sub(st.owned_bytes, Relaxed);
        st.owned_bytes = 0;
        drop(st);
        self.notify.notify_waiters();
        seqs.sort_unstable();
        seqs
    }

    pub fn completed(&self) -> u64 {
        self.lock().completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(seq: u64) -> Job {
        Job {
            seq,
            framed: 100,
            decoded_at: 0,
            body: Vec::new(),
            slot: None,
        }
    }

    #[tokio::test]
    async fn a_message_taken_for_discard_cannot_also_complete() {
        let q = AppQueue::new(None, Default::default(), u64::MAX);
        for seq in 0..3 {
            q.own(seq, 100).unwrap();
            q.push(job(seq));
        }
        let (first, _) = q.pop().await.unwrap();
        // The worker holds message 0 when the RPC is cut short...
        let discarded = q.take_all();
        assert_eq!(discarded, vec![0, 1, 2]);
        // ...and its timer fires afterwards: the token is gone.
        assert!(!q.end_service(first.seq, first.framed));
        assert_eq!(q.completed(), 0);
        assert_eq!(q.snapshot().owned_bytes, 0, "no double subtraction");
    }

    #[tokio::test]
    async fn a_completed_message_is_not_discarded_afterwards() {
        let q = AppQueue::new(None, Default::default(), u64::MAX);
        q.own(7, 100).unwrap();
        q.push(job(7));
        let (j, _) = q.pop().await.unwrap();
        assert!(q.end_service(j.seq, j.framed));
        assert!(q.take_all().is_empty());
        assert!(!q.end_service(j.seq, j.framed), "a token is redeemed once");
        assert_eq!(q.completed(), 1);
    }

    #[tokio::test]
    async fn owning_past_the_server_wide_limit_is_refused_and_not_counted() {
        let live: Arc<crate::live::Live> = Default::default();
        let (a, b) = (
            AppQueue::new(None, live.clone(), 250),
            AppQueue::new(None, live.clone(), 250),
        );
        a.own(0, 100).unwrap();
        b.own(0, 100).unwrap();
        let why = a.own(1, 100).unwrap_err();
        assert!(why.contains("owns 200 bytes"), "{why}");
        assert_eq!(
            live.owned_bytes.load(Relaxed),
            200,
            "the refused one is not counted"
        );
        assert_eq!(a.snapshot().owned_bytes, 100);
    }

    /// The queue's levels as messages are owned, pushed, taken, served
    /// directly and completed: depth, queued bytes and owned bytes each
    /// follow their own message.
    #[tokio::test]
    async fn levels_follow_each_message_through_the_queue() {
        let q = AppQueue::new(None, Default::default(), u64::MAX);
        q.own(0, 100).unwrap();
        let mut second = job(1);
        second.framed = 30;
        q.own(1, 30).unwrap();
        let l = q.push(job(0));
        assert_eq!((l.depth, l.queued_bytes, l.owned_bytes), (1, 100, 130));
        let l = q.push(second);
        assert_eq!((l.depth, l.queued_bytes, l.owned_bytes), (2, 130, 130));
        assert_eq!(q.depth(), 2);
        let (first, l) = q.pop().await.unwrap();
        assert_eq!((l.depth, l.queued_bytes, l.owned_bytes), (1, 30, 130));
        assert_eq!(q.depth(), 1);
        assert!(q.end_service(first.seq, first.framed));
        assert_eq!(q.snapshot().owned_bytes, 30);
        // Direct mode: the handler serves message 2 itself, never queued.
        q.own(2, 5).unwrap();
        assert!(!q.end_service(2, 5), "not in service: no token to redeem");
        q.begin_service(2, 5);
        assert!(q.end_service(2, 5));
        let l = q.snapshot();
        assert_eq!((l.depth, l.queued_bytes, l.owned_bytes), (1, 30, 30));
        assert_eq!(q.completed(), 2);
    }

    /// What an unfinished message holds is counted server-wide as it grows
    /// and shrinks, refused once it and the owned bytes together pass the
    /// limit (reaching it exactly is allowed), and given back when dropped.
    #[test]
    fn a_partial_message_is_counted_bounded_and_given_back() {
        let live: Arc<crate::live::Live> = Default::default();
        let partial = || live.partial_bytes.load(Relaxed);
        live.owned_bytes.store(40, Relaxed);
        let mut a = PartialHold::new(live.clone(), 100);
        let mut b = PartialHold::new(live.clone(), 100);
        a.set(10).unwrap();
        a.set(10).unwrap();
        assert_eq!(partial(), 10);
        b.set(25).unwrap();
        a.set(35).unwrap();
        assert_eq!(partial(), 60, "40 owned + 60 partial = the limit, allowed");
        let why = a.set(36).unwrap_err();
        assert!(why.contains("holds 61 bytes"), "{why}");
        assert!(why.contains("owns 40 bytes"), "{why}");
        assert!(why.contains("(36 bytes so far)"), "{why}");
        a.set(4).unwrap();
        assert_eq!(partial(), 29);
        drop(a);
        assert_eq!(partial(), 25);
        b.set(0).unwrap();
        assert_eq!(partial(), 0);
        drop(b);
        assert_eq!(partial(), 0);
    }
}
