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
