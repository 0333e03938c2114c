//! Periodic `sample` events: queue, owned bytes, h2's view of capacity, RSS.

use super::*;

pub(super) async fn sample_loop(rpc: Arc<Rpc>, flow: FlowControl) {
    let mut tick = tokio::time::interval(rpc.ctx.cfg.sample_interval);
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

/// Resident set size from /proc/self/statm (0 where unavailable).
pub fn rss_bytes() -> u64 {
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
