//! One clock for every event: CLOCK_MONOTONIC in nanoseconds.
//!
//! `std::time::Instant` hides its epoch; reading CLOCK_MONOTONIC directly
//! lets traces written by separate processes on one host share an axis.

fn read(clock: rustix::time::ClockId) -> u64 {
    let ts = rustix::time::clock_gettime(clock);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC now, ns.
pub fn now_ns() -> u64 {
    read(rustix::time::ClockId::Monotonic)
}

/// CLOCK_MONOTONIC_COARSE now, ns: the same clock at the kernel tick's
/// resolution (a few ms, never ahead of [`now_ns`]), without reading the
/// hardware counter; for stamps that only time idleness.
pub fn coarse_now_ns() -> u64 {
    read(rustix::time::ClockId::MonotonicCoarse)
}

/// Wall-clock time now, ns since the Unix epoch.
pub fn wall_ns() -> u64 {
    read(rustix::time::ClockId::Realtime)
}

/// Monotonic and wall time read back to back, to anchor a trace.
pub fn anchor() -> (u64, u64) {
    (now_ns(), wall_ns())
}

/// The monotonic instant `ns` as a tokio `Instant` (for sleeping until a
/// scheduled time expressed on the trace clock).
pub fn to_instant(ns: u64) -> tokio::time::Instant {
    let now_mono = now_ns();
    let now = tokio::time::Instant::now();
    if ns >= now_mono {
        now + std::time::Duration::from_nanos(ns - now_mono)
    } else {
        now.checked_sub(std::time::Duration::from_nanos(now_mono - ns))
            .unwrap_or(now)
    }
}
