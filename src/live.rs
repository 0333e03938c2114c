//! Live counters for progress lines (not the record: the trace is).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

#[derive(Default, Debug)]
pub struct Live {
    pub scheduled: AtomicU64,
    pub sent: AtomicU64,
    pub never_sent: AtomicU64,
    pub decoded: AtomicU64,
    pub completed: AtomicU64,
    pub discarded: AtomicU64,
    /// Messages queued right now, over all RPCs.
    pub depth: AtomicI64,
    pub rpcs_done: AtomicU64,
    /// Framed bytes decoded and not yet completed or discarded, all RPCs
    /// (what --max-owned-bytes bounds).
    pub owned_bytes: AtomicU64,
    /// Body bytes h2 handed to the server application, all RPCs: progress,
    /// for stall detection.
    pub app_bytes: AtomicU64,
    /// Body bytes the client handed to h2 within its send credit, all RPCs:
    /// the client's progress, for stall detection in `h2probe client`.
    pub client_bytes: AtomicU64,
    /// The stall watcher ended the run (so an interrupt is not a Ctrl-C).
    pub stalled: std::sync::atomic::AtomicBool,
    /// The server's open RPCs: their windows, for a `stall` event, and what
    /// the server's one sampler reads every --sample-interval.
    pub open_rpcs: std::sync::Mutex<std::collections::HashMap<(u32, u32), OpenRpc>>,
}

/// What a stall event and a `sample` report of one open RPC.
#[derive(Clone)]
pub struct OpenRpc {
    pub unreleased: std::sync::Arc<AtomicU64>,
    pub flow: h2::FlowControl,
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
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Relaxed)
    }
}

/// Resolves once the flag turns true; never, if its sender is gone first
/// (a dropped sender means "no one will ever ask to stop").
pub async fn flag_set(rx: &mut tokio::sync::watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}
