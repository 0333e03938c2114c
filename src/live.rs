//! Live counters for progress lines (not the record: the trace is).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

#[derive(Default, Debug)]
pub struct Live {
    /// The schedule's progress against what a run plans: messages
    /// scheduled, or with `--rpc exchange` originals (whose attempts,
    /// retries included, are `scheduled`).
    pub offered: Counter,
    pub scheduled: Counter,
    pub sent: Counter,
    pub never_sent: Counter,
    pub decoded: Counter,
    pub completed: Counter,
    pub discarded: Counter,
    /// Messages queued right now, over all RPCs.
    pub depth: AtomicI64,
    pub rpcs_done: Counter,
    /// Framed bytes decoded and not yet completed or discarded, all RPCs
    /// (what --max-owned-bytes bounds).
    pub owned_bytes: AtomicU64,
    /// Bytes of messages not yet whole that the RPCs' deframers hold, all
    /// RPCs: bounded with `owned_bytes` by --max-owned-bytes
    /// ([`crate::server::queue::PartialHold`]).
    pub partial_bytes: AtomicU64,
    /// Body bytes h2 handed to the server application, all RPCs: progress,
    /// for stall detection.
    pub app_bytes: Counter,
    /// Bytes the server application released (`release_capacity`), all
    /// RPCs: credit given back is progress too, for stall detection (a
    /// queue that drains under a late release point lets bytes in again).
    pub released: Counter,
    /// Body bytes the client handed to h2 within its send credit, all RPCs:
    /// the client's progress, for stall detection in `h2probe client`.
    pub client_bytes: Counter,
    /// Messages a call is handing to h2 right now (bytes left to send,
    /// capacity or not): what a unary client's stall watcher waits on.
    pub in_send: AtomicU64,
    /// The stall watcher ended the run (so an interrupt is not a Ctrl-C).
    pub stalled: std::sync::atomic::AtomicBool,
    /// The server's open RPCs: their windows, for a `stall` event, and what
    /// the server's one sampler reads every --sample-interval. Shared
    /// entries: the sampler copies the list and reads each RPC (h2's lock,
    /// the queue's) after letting go of it, so an RPC that starts or ends
    /// never waits for a pass over thousands of others.
    pub open_rpcs: std::sync::Mutex<
        std::collections::HashMap<(u32, u32), std::sync::Arc<OpenRpc>, foldhash::fast::RandomState>,
    >,
}

/// What a stall event and a `sample` report of one open RPC.
pub struct OpenRpc {
    pub unreleased: std::sync::Arc<AtomicU64>,
    pub flow: h2::FlowControl,
    /// When the RPC began (CLOCK_MONOTONIC ns): sampled once open for a
    /// whole sample period.
    pub opened_ns: u64,
    /// The RPC's queue levels (depth, queued bytes, owned bytes), for
    /// `sample` events; `None`: the RPC is not sampled.
    pub levels: Option<QueueLevels>,
}

/// Reads an RPC's queue levels: (depth, queued bytes, owned bytes), or
/// `None` once the RPC is gone.
pub type QueueLevels = std::sync::Arc<dyn Fn() -> Option<(u32, u64, u64)> + Send + Sync>;

impl std::fmt::Debug for OpenRpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenRpc")
            .field("unreleased", &self.unreleased)
            .field("sampled", &self.levels.is_some())
            .finish()
    }
}

impl Live {
    /// Messages the client scheduled and has not yet sent or given up.
    pub fn pending(&self) -> u64 {
        Live::get(&self.scheduled)
            .saturating_sub(Live::get(&self.sent))
            .saturating_sub(Live::get(&self.never_sent))
    }

    /// The server's view of every open stream, sorted.
    pub fn open_streams(&self) -> Vec<h2probe_analysis::schema::StallStream> {
        let rpcs = self.open_rpcs.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = rpcs
            .iter()
            .map(
                |(&(conn, stream), r)| h2probe_analysis::schema::StallStream {
                    conn,
                    stream,
                    unreleased: r.unreleased.load(Relaxed),
                    available: r.flow.available_capacity() as i64,
                },
            )
            .collect();
        v.sort_by_key(|s| (s.conn, s.stream));
        v
    }
}

impl Live {
    pub fn add(c: &Counter, n: u64) {
        c.add(n);
    }
    pub fn get(c: &Counter) -> u64 {
        c.get()
    }
}

/// A count many threads add to and a progress line reads now and then: a
/// cache line per shard, each thread adding to its own. (One atomic that the
/// two runtime workers both bumped a few times a request travelled between
/// their caches every time.)
#[derive(Default)]
pub struct Counter([Shard; SHARDS]);

/// One per runtime worker up to 16 cores (threads are dealt shards
/// round-robin as they first add; past 16 they share). 9 counters × 16 ×
/// 128 B: 18 KiB.
const SHARDS: usize = 16;

#[derive(Default)]
#[repr(align(128))]
struct Shard(AtomicU64);

impl Counter {
    pub fn add(&self, n: u64) {
        thread_local! {
            /// This thread's shard, dealt round-robin as threads first add.
            static SHARD: usize = {
                static NEXT: AtomicU64 = AtomicU64::new(0);
                NEXT.fetch_add(1, Relaxed) as usize % SHARDS
            };
        }
        let i = SHARD.try_with(|s| *s).unwrap_or(0);
        self.0[i].0.fetch_add(n, Relaxed);
    }

    /// The sum over the shards (each read on its own: a count that moves
    /// meanwhile is read as it was at some moment of the read, per shard).
    pub fn get(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Relaxed)).sum()
    }
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// Shutdown as seen by a task that polls for it on every wake (a connection
/// loop, an RPC): true once the flag is set. `wait` (the task's
/// `tokio::task::unconstrained(flag_set(..))`, pinned) is polled only until
/// it has put the task on the watch's waiter list; later polls read the
/// flag with a plain load. Each poll of a registered waiter takes a lock
/// the waiters share (tokio spreads a watch's waiters over eight; ≈ 1.4 %
/// of a loaded server's samples when every wake polled it). Unconstrained,
/// so a spent cooperative budget cannot make it return Pending without
/// registering. The waker stored then must stay this task's: poll it only
/// from the task itself (not under a combinator that substitutes wakers).
/// Once the sender is gone without a shutdown, each poll reads the value
/// under the watch's read lock (an early-exit path).
pub fn poll_stop<F: std::future::Future<Output = ()>>(
    peek: &tokio::sync::watch::Receiver<bool>,
    wait: std::pin::Pin<&mut F>,
    registered: &mut bool,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<()> {
    use std::task::Poll;
    if stop_flag(peek) {
        return Poll::Ready(());
    }
    if *registered {
        return Poll::Pending;
    }
    match wait.poll(cx) {
        Poll::Ready(()) => Poll::Ready(()),
        Poll::Pending => {
            *registered = true;
            Poll::Pending
        }
    }
}

/// The shutdown flag, read without a lock until it has changed (or its
/// sender is gone).
pub fn stop_flag(peek: &tokio::sync::watch::Receiver<bool>) -> bool {
    !matches!(peek.has_changed(), Ok(false)) && *peek.borrow()
}

/// Resolves once the flag turns true; never, if its sender is gone first
/// (a dropped sender means "no one will ever ask to stop").
pub async fn flag_set(rx: &mut tokio::sync::watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task waiting in `poll_stop` (registered on its first poll, a flag
    /// after that) is woken by the shutdown and sees it; one whose sender
    /// goes without a shutdown is woken and never stops.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn poll_stop_wakes_a_waiting_task_once_the_flag_is_set() {
        /// Spawns a task waiting in `poll_stop`; returns it once registered.
        async fn waiter(
            rx: tokio::sync::watch::Receiver<bool>,
        ) -> tokio::task::JoinHandle<(bool, u32)> {
            let (on_list, listed) = tokio::sync::oneshot::channel();
            let task = tokio::spawn(async move {
                let mut mine = rx.clone();
                let wait = tokio::task::unconstrained(flag_set(&mut mine));
                tokio::pin!(wait);
                let (mut registered, mut polls) = (false, 0u32);
                let mut on_list = Some(on_list);
                std::future::poll_fn(|cx| {
                    polls += 1;
                    let r = poll_stop(&rx, wait.as_mut(), &mut registered, cx);
                    if registered {
                        if let Some(tx) = on_list.take() {
                            let _ = tx.send(());
                        }
                    }
                    r
                })
                .await;
                (registered, polls)
            });
            listed.await.expect("the waiter registered");
            task
        }
        let (tx, rx) = tokio::sync::watch::channel(false);
        let task = waiter(rx).await;
        tx.send(true).unwrap();
        let (registered, polls) = tokio::time::timeout(std::time::Duration::from_secs(5), task)
            .await
            .expect("woken by the shutdown")
            .unwrap();
        assert!(registered);
        assert_eq!(
            polls, 2,
            "registered on the first poll, stopped on the wake"
        );

        // The sender goes without a shutdown (after the waiter registered):
        // woken, it reads no shutdown and waits on.
        let (tx, rx) = tokio::sync::watch::channel(false);
        let task = waiter(rx).await;
        drop(tx);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!task.is_finished(), "a dropped sender is no shutdown");
        task.abort();
    }

    /// Threads adding to their own shards: nothing lost in the sum.
    #[test]
    fn a_sharded_counter_sums_every_threads_adds() {
        let c = std::sync::Arc::new(Counter::default());
        let threads: Vec<_> = (0..9u64)
            .map(|i| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        c.add(i + 1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.get(), 10_000 * (1..=9).sum::<u64>());
        assert_eq!(format!("{c:?}"), c.get().to_string());
    }
}
