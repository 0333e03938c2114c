//! Periodic `sample` events: queue, owned bytes, h2's view of capacity, RSS.

use super::*;

pub(super) async fn sample_loop(rpc: Arc<Rpc>, flow: FlowControl) {
    // The first sample one period in: an RPC shorter than that (a short
    // request under load) costs no timer wake-up and no /proc read.
    let period = rpc.ctx.cfg.sample_interval;
    let mut tick = tokio::time::interval_at(Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tick.tick().await;
        let l = rpc.queue.snapshot();
        let ev = SampleEv {
            depth: l.depth,
            queued_bytes: l.queued_bytes,
            owned_bytes: l.owned_bytes,
            unreleased: rpc.unreleased.load(Relaxed),
            used_capacity: flow.used_capacity() as u64,
            available_capacity: flow.available_capacity() as i64,
            rss_bytes: rss_bytes(),
        };
        rpc.emit(now_ns(), KindId::Sample, || Kind::Sample(ev));
    }
}

/// Resident set size, read from /proc at most once per millisecond for the
/// whole process (every open RPC samples it), 0 where unavailable.
pub fn rss_bytes() -> u64 {
    use std::sync::atomic::AtomicU64;
    static LAST: AtomicU64 = AtomicU64::new(0);
    static AT: AtomicU64 = AtomicU64::new(0);
    let now = now_ns();
    if now.saturating_sub(AT.load(Relaxed)) < 1_000_000 {
        return LAST.load(Relaxed);
    }
    let rss = read_rss();
    LAST.store(rss, Relaxed);
    AT.store(now, Relaxed);
    rss
}

/// Resident set size from /proc/self/statm (0 where unavailable).
fn read_rss() -> u64 {
    let page = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * page)
}
