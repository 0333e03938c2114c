//! Flow-control windows reconstructed from the wire (RFC 9113 §6.9).
//!
//! One [`FlowWindows`] follows the credit of one data direction of one
//! connection, as one tap saw it: DATA frames in that direction spend
//! credit, WINDOW_UPDATE and SETTINGS_INITIAL_WINDOW_SIZE in the opposite
//! direction grant it. From the sender's tap this is the credit the sender
//! believed it had; from the receiver's tap, the credit it had advertised.

use std::collections::HashMap;

/// The protocol's initial window for streams and connections.
pub const DEFAULT_WINDOW: i64 = 65_535;

/// A DATA frame that went beyond the credit, or a window pushed past 2^31-1.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Violation {
    pub t: u64,
    /// The frame's stream (0: a connection WINDOW_UPDATE); `what` says
    /// which window it passed.
    pub stream: u32,
    /// That window after the frame.
    pub window: i64,
    pub what: &'static str,
}

impl Violation {
    /// Whether this one comes before `other`: by time, then stream, then
    /// what it says, so that the first of several in one nanosecond is the
    /// same in every analysis (connections are looked at in a hash map's
    /// order).
    pub fn before(&self, other: &Violation) -> bool {
        (self.t, self.stream, self.window, self.what)
            < (other.t, other.stream, other.window, other.what)
    }
}

/// Windows of one data direction of one connection.
#[derive(Debug, Clone)]
pub struct FlowWindows {
    initial: i64,
    conn: i64,
    streams: HashMap<u32, i64>,
    min_conn: i64,
    min_stream: i64,
    violations: Vec<Violation>,
    /// Violations beyond the first 100 are only counted.
    violation_count: u64,
    /// SETTINGS frames the receiver sent that lowered the initial window and
    /// that the sender has not acknowledged yet: until then, DATA past the
    /// lowered window may have been sent before the sender knew (§6.9.2).
    lowered_unacked: u32,
    /// DATA frames that went past a window lowered by an unacknowledged
    /// SETTINGS: legal, counted as an observation.
    past_lowered: u64,
    /// The largest initial window a SETTINGS lowered (0: none did).
    lowered_from: i64,
}

impl Default for FlowWindows {
    fn default() -> Self {
        FlowWindows {
            initial: DEFAULT_WINDOW,
            conn: DEFAULT_WINDOW,
            streams: HashMap::new(),
            min_conn: DEFAULT_WINDOW,
            min_stream: DEFAULT_WINDOW,
            violations: vec![],
            violation_count: 0,
            lowered_unacked: 0,
            past_lowered: 0,
            lowered_from: 0,
        }
    }
}

const MAX_WINDOW: i64 = (1 << 31) - 1;

impl FlowWindows {
    fn violate(&mut self, t: u64, stream: u32, window: i64, what: &'static str) {
        self.violation_count += 1;
        if self.violations.len() < 100 {
            self.violations.push(Violation {
                t,
                stream,
                window,
                what,
            });
        }
    }

    fn stream_mut(&mut self, id: u32) -> &mut i64 {
        let init = self.initial;
        self.streams.entry(id).or_insert(init)
    }

    /// A stream opens (its first HEADERS): tracked from now, at the initial
    /// window the SETTINGS so far gave it; its window.
    pub fn open(&mut self, id: u32) -> i64 {
        let w = *self.stream_mut(id);
        self.min_stream = self.min_stream.min(w);
        w
    }

    /// A DATA frame of `len` payload bytes (padding included) on `stream`.
    pub fn on_data(&mut self, t: u64, stream: u32, len: u32) {
        self.on_conn_data(t, stream, len);
        let s = {
            let w = self.stream_mut(stream);
            *w -= len as i64;
            *w
        };
        self.min_stream = self.min_stream.min(s);
        if s < 0 {
            if self.lowered_unacked > 0 {
                self.past_lowered += 1;
            } else {
                self.violate(t, stream, s, "DATA beyond the stream window");
            }
        }
    }

    /// DATA of a stream no longer tracked (the analysis retired it): the
    /// connection's window only.
    pub fn on_conn_data(&mut self, t: u64, stream: u32, len: u32) {
        self.conn -= len as i64;
        self.min_conn = self.min_conn.min(self.conn);
        if self.conn < 0 {
            self.violate(t, stream, self.conn, "DATA beyond the connection window");
        }
    }

    /// A WINDOW_UPDATE for `stream` (0: the connection).
    pub fn on_window_update(&mut self, t: u64, stream: u32, increment: u32) {
        let w = if stream == 0 {
            self.conn += increment as i64;
            self.conn
        } else {
            let w = self.stream_mut(stream);
            *w += increment as i64;
            *w
        };
        if w > MAX_WINDOW {
            self.violate(t, stream, w, "window above 2^31-1 (FLOW_CONTROL_ERROR)");
        }
    }

    /// SETTINGS_INITIAL_WINDOW_SIZE: shifts every open stream by the change.
    pub fn on_initial_window(&mut self, t: u64, value: u32) {
        let delta = value as i64 - self.initial;
        self.initial = value as i64;
        let mut over = vec![];
        for (id, w) in self.streams.iter_mut() {
            *w += delta;
            if *w > MAX_WINDOW {
                over.push((*id, *w));
            }
            self.min_stream = self.min_stream.min(*w);
        }
        // In stream order, not the map's: the first is the one named.
        over.sort_unstable();
        for (id, w) in over {
            self.violate(t, id, w, "window above 2^31-1 after SETTINGS");
        }
    }

    /// The receiver's tap saw its own SETTINGS go out: if it lowers the
    /// initial window, DATA already on its way may pass the new window.
    pub fn on_settings_sent(&mut self, value: u32) {
        if (value as i64) < self.initial {
            self.lowered_unacked += 1;
            self.lowered_from = self.lowered_from.max(self.initial);
        }
    }

    /// The receiver's tap saw the sender's SETTINGS ACK: from now on the
    /// sender knows the lowered window.
    pub fn on_settings_acked(&mut self) {
        self.lowered_unacked = self.lowered_unacked.saturating_sub(1);
    }

    /// DATA frames that passed a lowered, not yet acknowledged window.
    pub fn past_lowered(&self) -> u64 {
        self.past_lowered
    }

    pub fn conn(&self) -> i64 {
        self.conn
    }
    pub fn stream(&self, id: u32) -> i64 {
        self.streams.get(&id).copied().unwrap_or(self.initial)
    }
    pub fn initial(&self) -> i64 {
        self.initial
    }
    /// The most a stream can legally have received and not yet had
    /// credited back: the initial window, or, once DATA passed a window
    /// lowered by a SETTINGS the sender had not yet acknowledged (legal,
    /// RFC 9113 §6.9.2), the window it was lowered from.
    pub fn credit_bound(&self) -> i64 {
        if self.past_lowered > 0 {
            self.initial.max(self.lowered_from)
        } else {
            self.initial
        }
    }
    pub fn min_conn(&self) -> i64 {
        self.min_conn
    }
    pub fn min_stream(&self) -> i64 {
        self.min_stream
    }
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }
    pub fn violation_count(&self) -> u64 {
        self.violation_count
    }
    /// The stream's window, if it is tracked (it carried a frame).
    pub fn tracked(&self, id: u32) -> Option<i64> {
        self.streams.get(&id).copied()
    }

    /// Stops tracking a finished stream (the analysis retires it).
    pub fn forget(&mut self, id: u32) {
        self.streams.remove(&id);
    }

    /// Final windows of every stream still tracked, by stream id (what is
    /// written from them, windows.csv's rows at a SETTINGS change and the
    /// checks' details, reads the same on every analysis of one trace).
    pub fn streams(&self) -> Vec<(u32, i64)> {
        let mut v: Vec<(u32, i64)> = self.streams.iter().map(|(k, v)| (*k, *v)).collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_and_updates_move_both_windows() {
        let mut w = FlowWindows::default();
        w.on_data(1, 1, 16_384);
        w.on_data(2, 1, 16_384);
        assert_eq!(w.conn(), 65_535 - 32_768);
        assert_eq!(w.stream(1), 65_535 - 32_768);
        w.on_window_update(3, 0, 32_768);
        w.on_window_update(3, 1, 10_000);
        assert_eq!(w.conn(), 65_535);
        assert_eq!(w.stream(1), 65_535 - 22_768);
        assert_eq!(
            w.stream(3),
            65_535,
            "an untouched stream has the initial window"
        );
        assert!(w.violations().is_empty());
    }

    #[test]
    fn a_stream_opened_after_a_zero_initial_window_starts_exhausted() {
        let mut w = FlowWindows::default();
        w.on_initial_window(1, 0);
        assert_eq!(w.tracked(1), None);
        assert_eq!(w.open(1), 0);
        assert_eq!(w.tracked(1), Some(0));
        assert_eq!(w.min_stream(), 0, "the lowest window saw it");
        // A retired stream is forgotten (its window read as the initial).
        w.on_data(2, 1, 0);
        w.forget(1);
        assert_eq!(w.tracked(1), None);
    }

    #[test]
    fn settings_change_mid_stream_shifts_open_streams_only_by_the_delta() {
        let mut w = FlowWindows::default();
        w.on_data(1, 1, 60_000); // stream 1 at 5,535
        w.on_initial_window(2, 1 << 20); // +983,041
        assert_eq!(w.stream(1), 5_535 + (1 << 20) - 65_535);
        assert_eq!(w.stream(3), 1 << 20, "new streams start at the new initial");
        assert_eq!(w.conn(), 5_535, "the connection window is not affected");
        // Shrinking can make an open stream's window negative: legal (§6.9.2).
        w.on_initial_window(3, 1_000);
        assert_eq!(w.stream(1), 5_535 + 1_000 - 65_535);
        assert!(w.violations().is_empty());
    }

    #[test]
    fn data_past_a_lowered_window_is_legal_until_the_settings_are_acked() {
        // The receiver's view: it lowers the window to 1,000 while 16 KiB
        // are already on their way.
        let mut w = FlowWindows::default();
        w.on_settings_sent(1_000);
        w.on_initial_window(1, 1_000);
        w.on_data(2, 1, 16_384);
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        assert_eq!(w.past_lowered(), 1);
        // Once the sender has acknowledged, the same frame is an overrun.
        w.on_settings_acked();
        w.on_data(3, 1, 16_384);
        assert_eq!(w.violation_count(), 1);
    }

    /// 2^31−1 is the largest legal window (RFC 9113 §6.9.1), by a
    /// WINDOW_UPDATE or by SETTINGS; one more is a violation.
    #[test]
    fn a_window_may_reach_2_pow_31_minus_1_and_not_pass_it() {
        let mut w = FlowWindows::default();
        let to_max = (MAX_WINDOW - DEFAULT_WINDOW) as u32;
        w.on_window_update(1, 0, to_max);
        w.on_window_update(1, 1, to_max);
        assert_eq!((w.conn(), w.stream(1)), (2_147_483_647, 2_147_483_647));
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        w.on_window_update(2, 0, 1);
        assert_eq!(w.violations().len(), 1);
        // SETTINGS: stream 3 open at the default, raised to exactly the
        // largest, then one past it.
        let mut w = FlowWindows::default();
        w.open(3);
        w.on_initial_window(1, 2_147_483_647);
        assert!(w.violations().is_empty(), "{:?}", w.violations());
        assert_eq!(w.initial(), 2_147_483_647);
        w.on_data(2, 3, 1);
        w.on_initial_window(3, 2_147_483_647);
        assert!(w.violations().is_empty());
        w.on_window_update(4, 3, 2);
        assert_eq!(w.violation_count(), 1);
    }

    /// A SETTINGS that does not lower the initial window excuses nothing;
    /// the credit bound is the initial window until DATA passed a lowered
    /// one, then the window it was lowered from. The first 100 violations
    /// are kept, all counted.
    #[test]
    fn only_a_lowering_settings_excuses_data_past_the_window() {
        let mut w = FlowWindows::default();
        w.on_settings_sent(65_535);
        w.on_data(1, 1, 70_000);
        assert_eq!((w.past_lowered(), w.violation_count()), (0, 2));
        assert_eq!(w.credit_bound(), 65_535);

        let mut w = FlowWindows::default();
        w.on_settings_sent(1_000);
        w.on_initial_window(1, 1_000);
        assert_eq!(w.credit_bound(), 1_000, "nothing passed it yet");
        w.on_data(2, 1, 16_384);
        assert_eq!(w.credit_bound(), 65_535);

        let mut w = FlowWindows::default();
        for k in 0..150 {
            w.on_data(k, 1, 65_535);
        }
        assert_eq!(w.violations().len(), 100);
        // The first frame spends both windows exactly; each later one
        // passes both.
        assert_eq!(w.violation_count(), 2 * 149);
    }

    #[test]
    fn padding_counts_and_overruns_are_flagged() {
        let mut w = FlowWindows::default();
        // A padded DATA frame: header length 1 + 100 + 155 padding = 256.
        w.on_data(1, 1, 256);
        assert_eq!(w.stream(1), 65_535 - 256);
        w.on_data(2, 1, 65_535);
        assert_eq!(w.stream(1), -256);
        assert_eq!(w.min_stream(), -256);
        let v = w.violations();
        // One frame past both windows: one violation each, both naming the
        // frame's stream (the audit read "on stream 0" for a frame on 1).
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(
            (v[0].stream, v[0].what),
            (1, "DATA beyond the connection window")
        );
        assert_eq!(
            (v[1].stream, v[1].what),
            (1, "DATA beyond the stream window")
        );
    }
}
