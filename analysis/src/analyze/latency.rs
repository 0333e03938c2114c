//! Release → WINDOW_UPDATE matching: each `release` waits in a FIFO until
//! the increments of later updates have carried all of its bytes.

use crate::stats::Histo;
use std::collections::VecDeque;

/// Releases waiting for the WINDOW_UPDATE that carries them.
#[derive(Default)]
pub(super) struct Pending {
    /// (release time, bytes not yet carried, whether its latency counts).
    fifo: VecDeque<(u64, u64, bool)>,
}

impl Pending {
    /// A release of `bytes` at `t`. An untimed one (the end-of-RPC bulk
    /// release) still takes its place in the FIFO, so later updates match
    /// the right releases, but its latency is not recorded.
    pub(super) fn push(&mut self, t: u64, bytes: u64, timed: bool) {
        self.fifo.push_back((t, bytes, timed));
    }
    pub(super) fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// Consumes `inc` bytes; returns latencies of releases fully carried and
    /// bytes of the increment that matched no release.
    pub(super) fn consume(&mut self, t: u64, mut inc: u64, lat: &mut Histo) -> u64 {
        while inc > 0 {
            let Some(front) = self.fifo.front_mut() else {
                break;
            };
            if front.1 <= inc {
                inc -= front.1;
                if front.2 {
                    lat.record(t.saturating_sub(front.0));
                }
                self.fifo.pop_front();
            } else {
                front.1 -= inc;
                inc = 0;
            }
        }
        inc
    }
}
