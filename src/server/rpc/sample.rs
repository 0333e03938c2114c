//! Periodic `sample` events: queue, owned bytes, h2's view of capacity, RSS.

use super::*;
use crate::trace::clock::now_ns;

/// The server's one sampler: every --sample-interval, a `sample` event for
/// each open RPC that has been open for a whole period (one task for the
/// process instead of one per RPC: a short request costs nothing here; an
/// RPC is listed the first time it waits, so one that never waits, and
/// cannot last a period, is not even listed).
pub(in crate::server) async fn sample_open_rpcs(ctx: Arc<ServerCtx>) {
    let period = ctx.cfg.sample_interval;
    let mut tick = tokio::time::interval_at(Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The list's entries due a sample, copied under its lock and read after
    // (each read takes h2's lock and the RPC's queue's): an RPC starting or
    // ending waits for the copy, never for the pass. Kept between passes;
    // as long as the open-RPC list at most.
    let mut due: Vec<((u32, u32), Arc<crate::live::OpenRpc>)> = Vec::new();
    loop {
        tick.tick().await;
        let t = now_ns();
        let rss = rss_bytes();
        due.extend(
            ctx.live
                .open_rpcs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|(_, r)| {
                    r.levels.is_some() && t.saturating_sub(r.opened_ns) >= period.as_nanos() as u64
                })
                .map(|(&key, r)| (key, r.clone())),
        );
        for ((conn, stream), r) in due.drain(..) {
            let Some(levels) = &r.levels else { continue };
            let Some((depth, queued_bytes, owned_bytes)) = levels() else {
                continue;
            };
            let ev = SampleEv {
                depth,
                queued_bytes,
                owned_bytes,
                unreleased: r.unreleased.load(Relaxed),
                used_capacity: r.flow.used_capacity() as u64,
                available_capacity: r.flow.available_capacity() as i64,
                rss_bytes: rss,
            };
            ctx.rec
                .emit(Endpoint::Server, conn, stream, t, KindId::Sample, || {
                    Kind::Sample(ev)
                });
        }
    }
}

/// Resident set size, read from /proc at most once per millisecond for the
/// whole process, 0 where unavailable.
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
