//! Part 3 accounting from `Exchange` events: what happened to every
//! scheduled original (N, F, A, S, R, U and each terminal state), latency of
//! the completed cohorts per phase of the service schedule, retry
//! collisions, server-owned payload over time, the client's budgets, the
//! frame view per run, and two checks (every original ends once and the
//! counts add up; the admission boundary held).
//!
//! Everything is defined on event `t`. Memory: one entry per original not
//! yet ended and per admitted attempt not yet ended, plus the ids of ended
//! originals (as ranges, to catch a second ending), the completed
//! originals' latencies and every retry's time (the collision window is
//! known only once the schedule has been read).

use super::summary::{Check, Timeline};
use crate::schema::{
    AdmissionEv, AttemptEndEv, AttemptEv, Decision, Endpoint, Event, FrameType, Kind,
    OriginalEndEv, OriginalEv, OriginalState,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// The collision window when the trace records no slowdown, from the first
/// original's scheduled time (the article's: [12, 24) s), and the bin width.
/// With a slowdown in the recorded service schedule, the window is its span
/// (see [`collision_window`]).
pub const COLLISION_FROM_NS: u64 = 12_000_000_000;
pub const COLLISION_TO_NS: u64 = 24_000_000_000;
pub const COLLISION_BIN_NS: u64 = 20_000_000;

/// The recorded slowdown, in `t`: the first step of the service schedule
/// (`service_change` events, `(t, step, service ns)`) with the schedule's
/// longest service time, if that is longer than the first step's, until the
/// next step, or `end` (the trace's last `t`) when it is the last. It is the
/// span of the phase the headline calls "during" (the preset's [12, 24) s of
/// its schedule). `None` without a slowdown.
impl Overload {
    /// Where the originals that were not on time went, in the headline's
    /// order: (name, count).
    pub fn other_ends(&self) -> Vec<(&'static str, u64)> {
        let mut ends = vec![
            ("late", self.late),
            ("rejected", self.rejected),
            ("dropped", self.dropped),
            ("expired", self.expired),
            ("never-sent", self.never_sent),
            ("unanswered", self.unanswered),
        ];
        // A trace cut short leaves originals without an end: said, so that
        // the headline's ends add up to N.
        if self.open > 0 {
            ends.push(("still open", self.open));
        }
        ends
    }
}

/// The service schedule's slowdown, in `t`: from the first step that
/// slowed the worker to the schedule's longest service time, through the
/// steps after it that keep that time, to the next step (or `end`). `None`
/// when no step slowed it to that time (a flat schedule; one slowest from
/// its start). `steps`: (t, step, service ns).
pub fn collision_window(steps: &[(u64, u32, u64)], end: u64) -> Option<(u64, u64)> {
    let mut steps = steps.to_vec();
    steps.sort_unstable_by_key(|s| (s.1, s.0));
    let max = steps.iter().map(|s| s.2).max()?;
    let i = (1..steps.len()).find(|&i| steps[i].2 == max && steps[i - 1].2 < max)?;
    let from = steps[i].0;
    let to = steps[i..]
        .iter()
        .find(|s| s.2 != max)
        .map_or(end, |s| s.0)
        .max(from);
    Some((from, to))
}

/// The process (a `merge` input) whose client numbered the originals of
/// connection `conn`: 0 outside a merged trace.
fn origin_of(conn: u32) -> u32 {
    conn / crate::schema::CONN_OFFSET
}

/// An original as a detail names it: its id, and in a merged trace whose
/// client it is (by a connection of that process).
fn original_name(conn: u32, id: u64) -> String {
    match origin_of(conn) {
        0 => id.to_string(),
        _ => format!("{id} (of the client on connection {conn})"),
    }
}

/// Timer slack allowed when a wait ends at a deadline: a WAIT whose
/// `expired` decision is recorded later than deadline + this is a violation.
pub const DEADLINE_SLACK_NS: u64 = 50_000_000;

/// Part 3 figures of one run (`summary.json` → `overload`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Overload {
    /// N: originals scheduled (`original` events).
    pub originals: u64,
    /// F: originals with at least a first attempt.
    pub first_attempts: u64,
    /// A: attempts initiated (first attempts and retries).
    pub attempts: u64,
    /// Retries initiated (A − F).
    pub retries: u64,
    /// S: attempts wholly handed to h2 (client `send` events).
    pub sent: u64,
    /// R: attempts decoded by the server (`admission` events).
    pub decoded: u64,
    /// U: originals completed by their deadline.
    pub on_time: u64,
    pub late: u64,
    pub rejected: u64,
    pub dropped: u64,
    pub expired: u64,
    pub never_sent: u64,
    /// Originals with an attempt in flight when the RPC ended (no outcome).
    pub unanswered: u64,
    /// Originals still without a terminal state at the end of the trace.
    pub open: u64,
    /// U / N (0 when N = 0).
    pub useful_fraction: f64,
    /// Originals offered per second: (N − 1) over the span from the first
    /// original's `t` to the last's (0 with fewer than two). The summary's
    /// `offered_rate` counts attempts, retries included.
    #[serde(default)]
    pub offered_rate: f64,
    /// Terminal states by `reason` (`rejected/no_retry`, `never_sent/backlog`, …).
    pub end_reasons: BTreeMap<String, u64>,
    /// Server decisions at the admission boundary, by decision.
    pub decisions: BTreeMap<String, u64>,
    /// Admissions that had to wait for a slot, and the longest wait (ms).
    pub admission_waits: u64,
    pub max_admission_wait_ms: f64,
    /// Most slots taken at once, counted from the trace, and the bound K.
    pub max_in_use: u32,
    pub slots: u32,
    /// Completed-cohort latency (scheduled → completion) per phase of the
    /// service schedule, with the cohort size.
    pub phases: Vec<PhaseLatency>,
    /// Retry collisions: pairs of retries initiated in the same bin of the
    /// window over all M(M−1)/2 pairs (null when M < 2).
    pub collision: Collision,
    /// ∫ server-owned payload dt over the run (admitted attempts' framed
    /// bytes, queued or in service), MiB·s, and its peak in bytes.
    pub owned_mib_s: f64,
    pub owned_peak_bytes: u64,
    /// Client budgets: peaks of pending originals and outstanding attempts
    /// (summed over clients) and their values at the last event.
    pub pending_peak: u64,
    pub outstanding_peak: u64,
    pub pending_end: u64,
    pub outstanding_end: u64,
    /// Frame view: WINDOW_UPDATE frames the server wrote per second of the
    /// span, their mean spacing (ms), RST_STREAM frames (either direction,
    /// as one tap saw them), DATA payload bytes client → server, and those
    /// bytes per useful completion (null when U = 0).
    pub window_updates_per_s: f64,
    pub window_update_spacing_ms: f64,
    pub rst_streams: u64,
    pub c2s_data_bytes: u64,
    pub wire_bytes_per_useful: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseLatency {
    /// `before`, `during`, `after` for a three-step schedule, else `step N`.
    pub phase: String,
    /// Originals scheduled in [from_s, to_s) from the first original (to_s null: to the end).
    pub from_s: f64,
    pub to_s: Option<f64>,
    /// Completed originals (on time or late) of this phase: the cohort.
    pub cohort: u64,
    pub p50_s: Option<f64>,
    pub p95_s: Option<f64>,
    pub p99_s: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Collision {
    /// The window, in seconds from the first original (see
    /// [`collision_window`]).
    pub from_s: f64,
    pub to_s: f64,
    /// The same in ns, for tools that bin the retries again.
    #[serde(default)]
    pub from_ns: u64,
    #[serde(default)]
    pub to_ns: u64,
    /// `slowdown`: the span of the recorded service schedule's slowdown
    /// (the "during" phase); `default`: no slowdown recorded, the article's
    /// [12, 24) s from the first original.
    #[serde(default)]
    pub window: String,
    /// With `slowdown`: the window in seconds of the service schedule
    /// (from its step 0, the server's first RPC): the schedule's own
    /// figures, the same in every run of one configuration.
    #[serde(default)]
    pub schedule_from_s: Option<f64>,
    #[serde(default)]
    pub schedule_to_s: Option<f64>,
    /// The trace's last event, as an offset like `from_s`: a window that
    /// reaches past it (the article's, in a short run) counted retries
    /// over less than its span.
    #[serde(default)]
    pub trace_end_s: Option<f64>,
    pub bin_ms: f64,
    /// M: retries initiated in the window.
    pub retries: u64,
    pub colliding_pairs: u64,
    pub fraction: Option<f64>,
}

/// Pairs of timestamps sharing a bin of `[from, to)` cut in `bin`-wide bins,
/// over all M(M−1)/2 pairs of the M timestamps inside the window.
pub fn collision_fraction(times: &[u64], from: u64, to: u64, bin: u64) -> (u64, u64, Option<f64>) {
    let mut bins: HashMap<u64, u64> = HashMap::new();
    let mut m = 0u64;
    for &t in times {
        if t >= from && t < to {
            *bins.entry((t - from) / bin).or_default() += 1;
            m += 1;
        }
    }
    let pairs: u64 = bins.values().map(|c| c * c.saturating_sub(1) / 2).sum();
    let all = m * m.saturating_sub(1) / 2;
    (m, pairs, (all > 0).then(|| pairs as f64 / all as f64))
}

/// The `q` quantile (nearest rank) of sorted values.
fn quantile(sorted: &[u64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1] as f64 / 1e9)
}

/// Violations found while feeding: count, first detail, first (t, line).
#[derive(Default)]
struct Violations {
    n: u64,
    detail: String,
    at: Option<(u64, u64)>,
}

impl Violations {
    fn add(&mut self, t: u64, line: u64, detail: impl FnOnce() -> String) {
        self.n += 1;
        if self.at.is_none() {
            self.at = Some((t, line));
            self.detail = detail();
        }
    }
}

/// The running state of the pass.
#[derive(Default)]
pub(super) struct Tracker {
    pub(super) seen: bool,
    has_client: bool,
    has_server: bool,
    o: Overload,
    t0: Option<u64>,
    /// The last original's `t`.
    last_original: u64,
    /// Open originals: (process, id) → (scheduled t, deadline). A client
    /// process numbers its originals on its own, so in a merged trace two
    /// clients' ids meet: the process is its connections' `merge` input
    /// ([`origin_of`]).
    open: HashMap<(u32, u64), (u64, u64)>,
    /// Ended originals' ids per process, as ranges (ids are `client +
    /// clients × n`: consecutive over a run, so as many ranges as gaps).
    ended: HashMap<u32, super::wire_view::RetiredIds<1>>,
    /// The attempt of each open original awaiting its answer: (process,
    /// id) → attempt (the client answers each once, before the original
    /// ends; a retry is initiated only after the answer to the one before).
    awaiting: HashMap<(u32, u64), u32>,
    /// Those whose original ended at this instant: an answer recorded at
    /// the same nanosecond may sort after the end.
    ended_now: Vec<((u32, u64), u32)>,
    /// (scheduled t, latency ns) of completed originals.
    latencies: Vec<(u64, u64)>,
    retry_times: Vec<u64>,
    /// Service schedule steps: (t, step, service ns).
    steps: Vec<(u64, u32, u64)>,
    /// Admitted attempts not yet ended: (conn, stream, seq) → (framed, deadline).
    admitted: HashMap<(u32, u32, u64), (u32, u64)>,
    /// Attempts refused at the boundary (must never start).
    refused: HashSet<(u32, u32, u64)>,
    in_use: u32,
    /// The instant (`t`) being read: slots in use and bytes owned peak
    /// over instants, once every event of one is counted, so that a slot
    /// returned and taken at one nanosecond is not two at once (whichever
    /// way the tie sorts).
    instant: u64,
    /// This instant's first admission past its `slots`: (line, slots).
    instant_over: Option<(u64, u32)>,
    owned: u64,
    owned_since: u64,
    owned_ns_bytes: f64,
    /// Client budget levels per connection (one client per connection).
    levels: HashMap<u32, (u32, u32)>,
    wu_out: u64,
    first_t: Option<u64>,
    last_t: u64,
    accounting: Violations,
    boundary: Violations,
}

impl Tracker {
    pub(super) fn feed(&mut self, e: &Event, line: u64, tl: &mut Timeline) {
        let t = e.t;
        self.first_t.get_or_insert(t);
        self.last_t = self.last_t.max(t);
        if t != self.instant {
            self.settle_instant();
            self.instant = t;
        }
        match &e.kind {
            Kind::Original(o) => self.original(e, o, line),
            Kind::Attempt(a) => self.attempt(e, a, line),
            Kind::AttemptEnd(x) => self.attempt_end(e, x, line),
            Kind::OriginalEnd(x) => self.original_end(e, x, line),
            Kind::Admission(a) => self.admission(e, a, line),
            Kind::ServiceChange(c) => self.steps.push((t, c.step, c.service_ns)),
            Kind::Send(_) if self.seen => self.o.sent += 1,
            Kind::Start(st) => {
                let key = (e.conn, e.stream, st.seq);
                if self.refused.contains(&key) {
                    self.boundary.add(t, line, || {
                        format!(
                            "the attempt of seq {2} on connection {0} stream {1} was refused at the boundary but started",
                            e.conn, e.stream, st.seq
                        )
                    });
                }
                if let Some(&(_, deadline)) = self.admitted.get(&key) {
                    if deadline != 0 && t >= deadline {
                        self.boundary.add(t, line, || {
                            format!(
                                "the attempt of seq {2} on connection {0} stream {1} started {3:.1} ms after its deadline",
                                e.conn,
                                e.stream,
                                st.seq,
                                (t - deadline) as f64 / 1e6
                            )
                        });
                    }
                }
            }
            Kind::Complete(c) => self.admitted_end(t, (e.conn, e.stream, c.seq)),
            Kind::Discard(d) => self.admitted_end(t, (e.conn, e.stream, d.seq)),
            Kind::Frame(f) => {
                if f.frame == FrameType::WINDOW_UPDATE
                    && e.ep == Endpoint::Server
                    && f.dir == crate::schema::Dir::Out
                {
                    self.wu_out += 1;
                }
                if e.ep == Endpoint::Client {
                    self.has_client = true;
                    if f.frame == FrameType::RST_STREAM {
                        self.o.rst_streams += 1;
                    }
                    if f.frame == FrameType::DATA && f.dir == crate::schema::Dir::Out {
                        self.o.c2s_data_bytes += f.len as u64;
                    }
                }
            }
            _ => {}
        }
        match e.ep {
            Endpoint::Client => self.has_client = true,
            Endpoint::Server => self.has_server = true,
            // A relay's legs carry no Exchange accounting of their own.
            Endpoint::ClientLeg | Endpoint::ServerLeg => {}
        }
        if self.seen {
            tl.admitted_bytes.push(t, self.owned as f64);
            tl.client_pending.push(t, self.o.pending_end as f64);
            tl.client_outstanding.push(t, self.o.outstanding_end as f64);
        }
    }

    fn levels(&mut self, conn: u32, pending: u32, outstanding: u32) {
        self.levels.insert(conn, (pending, outstanding));
        let (p, o) = self.levels.values().fold((0u64, 0u64), |(p, o), (a, b)| {
            (p + *a as u64, o + *b as u64)
        });
        self.o.pending_peak = self.o.pending_peak.max(p);
        self.o.outstanding_peak = self.o.outstanding_peak.max(o);
        self.o.pending_end = p;
        self.o.outstanding_end = o;
    }

    fn original(&mut self, e: &Event, o: &OriginalEv, line: u64) {
        self.seen = true;
        self.o.originals += 1;
        self.t0 = Some(self.t0.map_or(e.t, |t0| t0.min(e.t)));
        self.last_original = self.last_original.max(e.t);
        let key = (origin_of(e.conn), o.id);
        if self.open.insert(key, (e.t, o.deadline)).is_some()
            || self.ended.get(&key.0).is_some_and(|r| r.contains(o.id))
        {
            self.accounting.add(e.t, line, || {
                format!(
                    "original {} was scheduled twice",
                    original_name(e.conn, o.id)
                )
            });
        }
        self.levels(e.conn, o.pending, o.outstanding);
    }

    fn attempt(&mut self, e: &Event, a: &AttemptEv, line: u64) {
        self.seen = true;
        self.o.attempts += 1;
        if a.attempt <= 1 {
            self.o.first_attempts += 1;
        } else {
            self.o.retries += 1;
            self.retry_times.push(e.t);
        }
        let name = || original_name(e.conn, a.id);
        let key = (origin_of(e.conn), a.id);
        self.awaiting.insert(key, a.attempt);
        match self.open.get(&key) {
            Some(&(scheduled, deadline)) => {
                if a.deadline != deadline || a.scheduled != scheduled {
                    self.boundary.add(e.t, line, || {
                        format!(
                            "attempt {} of original {} carries deadline {} / scheduled {}, not the original's {deadline} / {scheduled}",
                            a.attempt, name(), a.deadline, a.scheduled
                        )
                    });
                }
                if deadline != 0 && e.t >= deadline {
                    self.boundary.add(e.t, line, || {
                        format!(
                            "attempt {} of original {} was initiated after its deadline",
                            a.attempt,
                            name()
                        )
                    });
                }
            }
            None => {
                self.accounting.add(e.t, line, || {
                    format!(
                        "attempt {} of original {} without an open original",
                        a.attempt,
                        name()
                    )
                });
                // It carries its deadline: the boundary judges it still.
                if a.deadline != 0 && e.t >= a.deadline {
                    self.boundary.add(e.t, line, || {
                        format!(
                            "attempt {} of original {} was initiated after its deadline",
                            a.attempt,
                            name()
                        )
                    });
                }
            }
        }
        self.levels(e.conn, a.pending, a.outstanding);
    }

    /// An answer the client read: to the attempt of its original that
    /// awaits one (none: answered twice, or never initiated).
    fn attempt_end(&mut self, e: &Event, x: &AttemptEndEv, line: u64) {
        self.seen = true;
        let key = (origin_of(e.conn), x.id);
        if self.awaiting.get(&key) == Some(&x.attempt) {
            self.awaiting.remove(&key);
        } else if let Some(i) = self.ended_now.iter().position(|k| *k == (key, x.attempt)) {
            self.ended_now.swap_remove(i);
        } else {
            self.accounting.add(e.t, line, || {
                format!(
                    "an answer ({}) to attempt {} of original {}, which awaited none (answered twice, or never initiated)",
                    x.result.as_str(),
                    x.attempt,
                    original_name(e.conn, x.id)
                )
            });
        }
    }

    fn original_end(&mut self, e: &Event, x: &OriginalEndEv, line: u64) {
        self.seen = true;
        let key = (origin_of(e.conn), x.id);
        if let Some(attempt) = self.awaiting.remove(&key) {
            self.ended_now.push((key, attempt));
        }
        let opened = self.open.remove(&key);
        if opened.is_none() || !self.ended.entry(key.0).or_default().insert(x.id) {
            self.accounting.add(e.t, line, || {
                format!(
                    "original {} ended ({}) without being open",
                    original_name(e.conn, x.id),
                    x.state.as_str()
                )
            });
        }
        let o = &mut self.o;
        match x.state {
            OriginalState::OnTime => o.on_time += 1,
            OriginalState::Late => o.late += 1,
            OriginalState::Rejected => o.rejected += 1,
            OriginalState::Dropped => o.dropped += 1,
            OriginalState::Expired => o.expired += 1,
            OriginalState::NeverSent => o.never_sent += 1,
            OriginalState::Unanswered => o.unanswered += 1,
        }
        let key = if x.reason.is_empty() {
            x.state.as_str().to_string()
        } else {
            format!("{}/{}", x.state.as_str(), x.reason)
        };
        *o.end_reasons.entry(key).or_default() += 1;
        if let (Some(lat), OriginalState::OnTime | OriginalState::Late) = (x.latency_ns, x.state) {
            // Its phase is its `original`'s `t`, the scheduled time: this
            // event comes a little after the completion `latency_ns` ends
            // at (more so over --link-delay), and t − latency put an
            // original scheduled just before a step after it.
            let scheduled = opened.map_or(e.t.saturating_sub(lat), |(scheduled, _)| scheduled);
            self.latencies.push((scheduled, lat));
        }
        self.levels(e.conn, x.pending, x.outstanding);
    }

    fn owned_step(&mut self, t: u64) {
        if self.owned_since > 0 {
            self.owned_ns_bytes += self.owned as f64 * t.saturating_sub(self.owned_since) as f64;
        }
        self.owned_since = t;
    }

    fn admission(&mut self, e: &Event, a: &AdmissionEv, line: u64) {
        self.seen = true;
        let t = e.t;
        self.o.decoded += 1;
        self.o.slots = self.o.slots.max(a.slots);
        *self
            .o
            .decisions
            .entry(a.decision.as_str().to_string())
            .or_default() += 1;
        if a.wait_ns > 0 {
            self.o.admission_waits += 1;
            self.o.max_admission_wait_ms = self.o.max_admission_wait_ms.max(a.wait_ns as f64 / 1e6);
        }
        let key = (e.conn, e.stream, a.seq);
        match a.decision {
            Decision::Admitted => {
                if a.deadline != 0 && t >= a.deadline {
                    self.boundary.add(t, line, || {
                        format!(
                            "original {} attempt {} was admitted after its deadline",
                            a.id, a.attempt
                        )
                    });
                }
                self.owned_step(t);
                self.owned += a.framed as u64;
                self.admitted.insert(key, (a.framed, a.deadline));
                self.in_use += 1;
                if self.in_use > a.slots && self.instant_over.is_none() {
                    self.instant_over = Some((line, a.slots));
                }
            }
            Decision::Expired => {
                // Held from its arrival (the decision less its wait): one
                // that arrived past its deadline (a slow link) was held for
                // none of it, and is expired at once.
                let held_from = t.saturating_sub(a.wait_ns).max(a.deadline);
                if a.deadline != 0 && t > held_from.saturating_add(DEADLINE_SLACK_NS) {
                    self.boundary.add(t, line, || {
                        format!(
                            "original {} attempt {} was held {:.1} ms past its deadline",
                            a.id,
                            a.attempt,
                            (t - held_from) as f64 / 1e6
                        )
                    });
                }
                self.refused.insert(key);
            }
            Decision::Rejected | Decision::Dropped => {
                self.refused.insert(key);
            }
        }
    }

    /// The peaks of the instant just read, and its verdict on the slots.
    fn settle_instant(&mut self) {
        self.ended_now.clear();
        self.o.max_in_use = self.o.max_in_use.max(self.in_use);
        self.o.owned_peak_bytes = self.o.owned_peak_bytes.max(self.owned);
        if let Some((line, slots)) = self.instant_over.take() {
            let n = self.in_use;
            if n > slots {
                self.boundary.add(self.instant, line, || {
                    format!("{n} attempts admitted at once, above --admission {slots}")
                });
            }
        }
    }

    fn admitted_end(&mut self, t: u64, key: (u32, u32, u64)) {
        if let Some((framed, _)) = self.admitted.remove(&key) {
            self.owned_step(t);
            self.owned -= framed as u64;
            self.in_use -= 1;
        }
    }

    /// The figures and the two checks. `both`: client and server events;
    /// `incomplete`: why the trace cannot be judged, if it cannot, and
    /// whether it was cut (then a violation more than the reorder window
    /// before its end is settled whatever the cut lost, as for the other
    /// checks; dropped events may be anywhere, so with them none is).
    pub(super) fn finish(
        mut self,
        window_blocked_s: f64,
        socket_blocked_s: f64,
        incomplete: Option<(String, bool)>,
        origin: u64,
    ) -> (Overload, BTreeMap<String, Check>) {
        let end = self.last_t;
        self.settle_instant();
        self.owned_step(end);
        let mut o = std::mem::take(&mut self.o);
        o.open = self.open.len() as u64;
        o.owned_mib_s = self.owned_ns_bytes / 1e9 / (1 << 20) as f64;
        o.useful_fraction = if o.originals > 0 {
            o.on_time as f64 / o.originals as f64
        } else {
            0.0
        };
        if let Some(t0) = self
            .t0
            .filter(|t0| self.last_original > *t0 && o.originals > 1)
        {
            o.offered_rate = (o.originals - 1) as f64 / ((self.last_original - t0) as f64 / 1e9);
        }
        let span = self.first_t.map_or(0, |f| end.saturating_sub(f));
        if span > 0 {
            o.window_updates_per_s = self.wu_out as f64 / (span as f64 / 1e9);
        }
        if self.wu_out > 1 {
            o.window_update_spacing_ms = span as f64 / 1e6 / self.wu_out as f64;
        }
        o.wire_bytes_per_useful =
            (o.on_time > 0).then(|| o.c2s_data_bytes as f64 / o.on_time as f64);
        let _ = (window_blocked_s, socket_blocked_s);
        // Offsets run from the first original; a trace without one (the
        // server's alone) from the schedule's step 0 (its first RPC), else
        // its first event: never from the clock's own zero.
        let t0 = self
            .t0
            .or_else(|| self.steps.iter().map(|s| s.0).min())
            .or(self.first_t)
            .unwrap_or(0);

        // Phases: the service schedule's steps (from the server), as offsets
        // from the first original.
        self.steps.sort_unstable();
        let mut bounds: Vec<u64> = self.steps.iter().skip(1).map(|s| s.0).collect();
        bounds.dedup();
        let names: Vec<String> = match bounds.len() {
            2 => vec!["before".into(), "during".into(), "after".into()],
            n => (0..=n).map(|i| format!("step {i}")).collect(),
        };
        let mut cohorts: Vec<Vec<u64>> = vec![vec![]; bounds.len() + 1];
        for &(scheduled, lat) in &self.latencies {
            let i = bounds.iter().filter(|b| scheduled >= **b).count();
            cohorts[i].push(lat);
        }
        let rel = |t: u64| t.saturating_sub(t0) as f64 / 1e9;
        o.phases = cohorts
            .iter_mut()
            .enumerate()
            .map(|(i, c)| {
                c.sort_unstable();
                PhaseLatency {
                    phase: names[i].clone(),
                    from_s: if i == 0 { 0.0 } else { rel(bounds[i - 1]) },
                    to_s: bounds.get(i).map(|b| rel(*b)),
                    cohort: c.len() as u64,
                    p50_s: quantile(c, 0.5),
                    p95_s: quantile(c, 0.95),
                    p99_s: quantile(c, 0.99),
                }
            })
            .collect();
        // Offsets from the first original, as the phases'.
        let slowdown = collision_window(&self.steps, end);
        let (from, to, window) = match slowdown {
            Some((a, b)) => (a.saturating_sub(t0), b.saturating_sub(t0), "slowdown"),
            None => (COLLISION_FROM_NS, COLLISION_TO_NS, "default"),
        };
        // The same window on the schedule's own clock (from its step 0).
        let step0 = self.steps.iter().map(|s| s.0).min().unwrap_or(0);
        let of_schedule = slowdown.map(|(a, b)| {
            (
                a.saturating_sub(step0) as f64 / 1e9,
                b.saturating_sub(step0) as f64 / 1e9,
            )
        });
        let (m, pairs, fraction) =
            collision_fraction(&self.retry_times, t0 + from, t0 + to, COLLISION_BIN_NS);
        o.collision = Collision {
            from_s: from as f64 / 1e9,
            to_s: to as f64 / 1e9,
            from_ns: from,
            to_ns: to,
            window: window.to_string(),
            schedule_from_s: of_schedule.map(|w| w.0),
            schedule_to_s: of_schedule.map(|w| w.1),
            trace_end_s: self.first_t.map(|_| end.saturating_sub(t0) as f64 / 1e9),
            bin_ms: COLLISION_BIN_NS as f64 / 1e6,
            retries: m,
            colliding_pairs: pairs,
            fraction,
        };

        let mut checks = BTreeMap::new();
        let secs = |t: u64| t.saturating_sub(origin) as f64 / 1e9;
        let ends =
            o.on_time + o.late + o.rejected + o.dropped + o.expired + o.never_sent + o.unanswered;
        let detail = format!(
            "N {} = on time {} + late {} + rejected {} + dropped {} + expired {} + never sent {} + unanswered {} ({}); \
             F {} ≤ N, A {} = F + retries {}, S {} ≤ A, R {} ≤ S",
            o.originals, o.on_time, o.late, o.rejected, o.dropped, o.expired, o.never_sent, o.unanswered,
            if o.open > 0 {
                format!("{} still open", o.open)
            } else if self.accounting.at.is_some() {
                "the ends as recorded".into()
            } else {
                "every original ended once".into()
            },
            o.first_attempts, o.attempts, o.retries, o.sent, o.decoded
        );
        // What an incomplete trace leaves unjudged: all but a violation
        // settled before a cut.
        let unjudged = |at: Option<(u64, u64)>| match &incomplete {
            Some((why, cut)) => {
                let settled = at.is_some_and(|(t, _)| {
                    *cut && t.saturating_add(super::reorder::WINDOW_NS) < end
                });
                (!settled).then(|| why.clone())
            }
            None => None,
        };
        let originals = if !self.has_client {
            Check::na("no client events: the originals are the client's")
        } else if let Some(why) = unjudged(self.accounting.at) {
            Check::na(why)
        } else if let Some((t, line)) = self.accounting.at {
            Check::failed_at(
                format!(
                    "{} ({} violations): {}",
                    self.accounting.detail, self.accounting.n, detail
                ),
                secs(t),
                line,
            )
        } else {
            let adds_up = ends == o.originals
                && o.open == 0
                && o.first_attempts <= o.originals
                && o.attempts == o.first_attempts + o.retries
                && o.sent <= o.attempts
                && (!self.has_server || o.decoded <= o.sent);
            Check::new(adds_up, detail)
        };
        checks.insert("originals".to_string(), originals);
        let boundary = if !self.has_server {
            Check::na("no server events: the admission boundary is the server's")
        } else if let Some(why) = unjudged(self.boundary.at) {
            Check::na(why)
        } else if let Some((t, line)) = self.boundary.at {
            Check::failed_at(
                format!("{} ({} violations)", self.boundary.detail, self.boundary.n),
                secs(t),
                line,
            )
        } else {
            Check::new(
                true,
                format!(
                    "at most {} of {} slots taken; no attempt started after its deadline or after a refusal; \
                     no wait past a deadline (+{} ms slack){}",
                    o.max_in_use,
                    o.slots,
                    DEADLINE_SLACK_NS / 1_000_000,
                    if self.has_client {
                        "; every retry kept its original's deadline"
                    } else {
                        " (retries unseen: no client events)"
                    }
                ),
            )
        };
        checks.insert("admission".to_string(), boundary);
        (o, checks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collision_fraction_counts_pairs_in_shared_bins() {
        let ms = 1_000_000u64;
        // Window [1000, 1100) ms, 20 ms bins. Inside: 1000, 1005, 1019 share
        // bin 0 (3 pairs); 1020, 1039 share bin 1 (1 pair); 1099 is alone
        // in bin 4. Outside: 999 and 1100 do not count.
        let t: Vec<u64> = [999, 1000, 1005, 1019, 1020, 1039, 1099, 1100]
            .iter()
            .map(|v| v * ms)
            .collect();
        let (m, pairs, f) = collision_fraction(&t, 1000 * ms, 1100 * ms, 20 * ms);
        assert_eq!(m, 6);
        assert_eq!(pairs, 4);
        assert_eq!(f, Some(4.0 / 15.0));
        assert_eq!(
            collision_fraction(&[5], 0, 10, 1).2,
            None,
            "one retry: no pair"
        );
        assert_eq!(collision_fraction(&[1, 3], 0, 10, 1).2, Some(0.0));
        // Bins are cut from the window's start, not from the clock's zero:
        // 1,005 and 1,024 ms share the first 20 ms bin of [1005, 1100).
        let two = [1_005 * ms, 1_024 * ms];
        assert_eq!(
            collision_fraction(&two, 1_005 * ms, 1_100 * ms, 20 * ms),
            (2, 1, Some(1.0))
        );
    }

    #[test]
    fn the_collision_window_is_the_recorded_slowdown() {
        let s = 1_000_000_000u64;
        let ms = 1_000_000u64;
        // The preset, its schedule starting at 5 s: [17, 29) s of `t`.
        let preset = [
            (5 * s, 0, 10 * ms),
            (17 * s, 1, 40 * ms),
            (29 * s, 2, 10 * ms),
        ];
        assert_eq!(collision_window(&preset, 40 * s), Some((17 * s, 29 * s)));
        // A shortened schedule, recorded out of order.
        let short = [
            (9 * s, 2, 10 * ms),
            (5 * s, 0, 10 * ms),
            (7 * s, 1, 40 * ms),
        ];
        assert_eq!(collision_window(&short, 10 * s), Some((7 * s, 9 * s)));
        // The slowest step is the last: the window runs to the trace's end.
        let last = [(0, 0, 10 * ms), (3 * s, 1, 20 * ms), (5 * s, 2, 40 * ms)];
        assert_eq!(collision_window(&last, 8 * s), Some((5 * s, 8 * s)));
        // Steps that keep the slowest time are one slowdown.
        let held = [
            (0, 0, 10 * ms),
            (s, 1, 40 * ms),
            (2 * s, 2, 40 * ms),
            (3 * s, 3, 10 * ms),
        ];
        assert_eq!(collision_window(&held, 8 * s), Some((s, 3 * s)));
        // Slowest from the start, then faster, then slowed again: the
        // slowdown is the step that slowed it.
        let again = [(0, 0, 40 * ms), (s, 1, 10 * ms), (3 * s, 2, 40 * ms)];
        assert_eq!(collision_window(&again, 5 * s), Some((3 * s, 5 * s)));
        // No slowdown (a faster step, a flat one, none).
        assert_eq!(
            collision_window(&[(0, 0, 40 * ms), (s, 1, 10 * ms)], 8 * s),
            None
        );
        assert_eq!(
            collision_window(&[(0, 0, 20 * ms), (s, 1, 20 * ms)], 8 * s),
            None
        );
        assert_eq!(collision_window(&[(0, 0, 10 * ms)], 8 * s), None);
        assert_eq!(collision_window(&[], 8 * s), None);
    }

    fn ev(t: u64, ep: Endpoint, kind: Kind) -> Event {
        Event {
            t,
            ep,
            conn: 1,
            stream: 1,
            kind,
        }
    }

    fn judge(events: &[Event]) -> (Overload, BTreeMap<String, Check>) {
        judge_incomplete(events, None)
    }

    fn judge_incomplete(
        events: &[Event],
        incomplete: Option<(String, bool)>,
    ) -> (Overload, BTreeMap<String, Check>) {
        let mut tr = Tracker::default();
        let mut tl = Timeline::new(0);
        for (i, e) in events.iter().enumerate() {
            tr.feed(e, i as u64 + 2, &mut tl);
        }
        tr.finish(0.0, 0.0, incomplete, 0)
    }

    fn original(t: u64, id: u64, deadline: u64) -> Event {
        ev(
            t,
            Endpoint::Client,
            Kind::Original(OriginalEv {
                id,
                deadline,
                pending: 1,
                outstanding: 0,
            }),
        )
    }

    fn attempt(t: u64, id: u64, attempt: u32, scheduled: u64, deadline: u64) -> Event {
        ev(
            t,
            Endpoint::Client,
            Kind::Attempt(AttemptEv {
                id,
                attempt,
                seq: id,
                scheduled,
                deadline,
                pending: 0,
                outstanding: 1,
            }),
        )
    }

    fn end(t: u64, id: u64, state: OriginalState) -> Event {
        ev(
            t,
            Endpoint::Client,
            Kind::OriginalEnd(OriginalEndEv {
                id,
                state,
                attempts: 1,
                reason: String::new(),
                latency_ns: None,
                pending: 0,
                outstanding: 0,
            }),
        )
    }

    fn complete(t: u64, seq: u64) -> Event {
        ev(
            t,
            Endpoint::Server,
            Kind::Complete(crate::schema::CompleteEv {
                seq,
                worker: 0,
                service_ns: 1,
            }),
        )
    }

    fn service_change(t: u64, step: u32, service_ns: u64) -> Event {
        ev(
            t,
            Endpoint::Server,
            Kind::ServiceChange(crate::schema::ServiceChangeEv { service_ns, step }),
        )
    }

    fn admit(t: u64, seq: u64, slots: u32, deadline: u64) -> Event {
        ev(
            t,
            Endpoint::Server,
            Kind::Admission(AdmissionEv {
                seq,
                id: seq,
                attempt: 1,
                deadline,
                decision: Decision::Admitted,
                in_use: 1,
                slots,
                wait_ns: 0,
                framed: 100,
            }),
        )
    }

    /// The run's rates and integrals, each from the events' times: three
    /// originals over 1.25 s (1.6 a second offered after the first), two
    /// of them on time; 100 framed bytes owned from each admission to its
    /// completion (0.2 + 0.55 + 0.1 s: 85 B·s); three server
    /// WINDOW_UPDATEs over the 1.5 s from the first event to the last; 900
    /// bytes of client DATA for two useful answers.
    #[test]
    fn the_runs_figures_are_its_events_over_time() {
        let ms = 1_000_000u64;
        let frame = |t: u64, ep: Endpoint, frame: FrameType, len: u32| {
            ev(
                t,
                ep,
                Kind::Frame(crate::schema::FrameEv {
                    dir: crate::schema::Dir::Out,
                    frame,
                    len,
                    ..Default::default()
                }),
            )
        };
        let data = |t: u64| frame(t, Endpoint::Client, FrameType::DATA, 300);
        let update = |t: u64| frame(t, Endpoint::Server, FrameType::WINDOW_UPDATE, 4);
        let events = [
            original(1_000 * ms, 0, 3_000 * ms),
            attempt(1_000 * ms, 0, 1, 1_000 * ms, 3_000 * ms),
            data(1_010 * ms),
            admit(1_100 * ms, 0, 2, 3_000 * ms),
            update(1_200 * ms),
            complete(1_300 * ms, 0),
            end(1_350 * ms, 0, OriginalState::OnTime),
            original(1_500 * ms, 1, 3_500 * ms),
            attempt(1_500 * ms, 1, 1, 1_500 * ms, 3_500 * ms),
            data(1_510 * ms),
            admit(1_600 * ms, 1, 2, 3_500 * ms),
            update(1_700 * ms),
            complete(2_150 * ms, 1),
            end(2_200 * ms, 1, OriginalState::OnTime),
            original(2_250 * ms, 2, 4_000 * ms),
            attempt(2_250 * ms, 2, 1, 2_250 * ms, 4_000 * ms),
            data(2_260 * ms),
            admit(2_300 * ms, 2, 2, 4_000 * ms),
            update(2_350 * ms),
            complete(2_400 * ms, 2),
            end(2_500 * ms, 2, OriginalState::Late),
        ];
        let (o, _) = judge(&events);
        assert_eq!(o.useful_fraction, 2.0 / 3.0, "{o:?}");
        assert_eq!(o.offered_rate, 1.6, "{o:?}");
        assert_eq!(o.owned_mib_s, 85.0 / (1u64 << 20) as f64, "{o:?}");
        assert_eq!(o.window_updates_per_s, 2.0, "{o:?}");
        assert_eq!(o.window_update_spacing_ms, 500.0, "{o:?}");
        assert_eq!(o.wire_bytes_per_useful, Some(450.0), "{o:?}");
        // Nothing to divide by: no figure rather than NaN or infinity.
        let (o, _) = judge(&[]);
        assert_eq!(
            (o.useful_fraction, o.offered_rate, o.window_updates_per_s),
            (0.0, 0.0, 0.0),
            "{o:?}"
        );
        assert_eq!(o.wire_bytes_per_useful, None, "{o:?}");
        // Two originals at one instant offer no rate; one update has no
        // spacing.
        let (o, _) = judge(&[
            original(ms, 0, 2_000 * ms),
            original(ms, 1, 2_000 * ms),
            update(5 * ms),
        ]);
        assert_eq!(o.offered_rate, 0.0, "{o:?}");
        assert_eq!(o.window_update_spacing_ms, 0.0, "{o:?}");
        assert_eq!(o.window_updates_per_s, 1.0 / 0.004, "{o:?}");
    }

    /// Phases and the collision window in seconds from the first original
    /// (1.2 s into the schedule, whose step 0 is at 1 s): the slowdown
    /// [2, 3) s of `t` is [0.8, 1.8) s, [1, 2) s of the schedule. Three of
    /// the five retries fall in it, two of them 10 ms apart in one 20 ms
    /// bin: one pair of three.
    #[test]
    fn phases_and_the_collision_window_run_from_the_first_original() {
        let ms = 1_000_000u64;
        let step = |t: u64, step: u32, service_ms: u64| service_change(t, step, service_ms * ms);
        let events = [
            step(1_000 * ms, 0, 10),
            original(1_200 * ms, 0, 9_000 * ms),
            attempt(1_200 * ms, 0, 1, 1_200 * ms, 9_000 * ms),
            // Before the window and after it: retries, not the window's.
            attempt(1_900 * ms, 0, 2, 1_900 * ms, 9_000 * ms),
            step(2_000 * ms, 1, 40),
            attempt(2_100 * ms, 0, 3, 2_100 * ms, 9_000 * ms),
            attempt(2_110 * ms, 0, 4, 2_110 * ms, 9_000 * ms),
            attempt(2_990 * ms, 0, 5, 2_990 * ms, 9_000 * ms),
            step(3_000 * ms, 2, 10),
            attempt(3_100 * ms, 0, 6, 3_100 * ms, 9_000 * ms),
            end(3_500 * ms, 0, OriginalState::OnTime),
        ];
        let (o, _) = judge(&events);
        let spans: Vec<(&str, f64, Option<f64>)> = o
            .phases
            .iter()
            .map(|p| (p.phase.as_str(), p.from_s, p.to_s))
            .collect();
        assert_eq!(
            spans,
            [
                ("before", 0.0, Some(0.8)),
                ("during", 0.8, Some(1.8)),
                ("after", 1.8, None)
            ]
        );
        let c = &o.collision;
        assert_eq!(c.window, "slowdown");
        assert_eq!((c.from_ns, c.to_ns), (800 * ms, 1_800 * ms));
        assert_eq!((c.from_s, c.to_s), (0.8, 1.8));
        assert_eq!((c.schedule_from_s, c.schedule_to_s), (Some(1.0), Some(2.0)));
        assert_eq!(c.trace_end_s, Some(2.3));
        assert_eq!(c.bin_ms, 20.0);
        assert_eq!(o.retries, 5);
        assert_eq!((c.retries, c.colliding_pairs), (3, 1));
        assert_eq!(c.fraction, Some(1.0 / 3.0));
    }

    /// An original belongs to the phase of its `original`'s `t` (its
    /// scheduled time), not of its end less its latency: the end comes a
    /// little after the completion the latency runs to (helper-62's run
    /// over --link-delay 5ms counted one scheduled 4.2 ms before the step
    /// in `during`).
    #[test]
    fn an_original_is_in_the_phase_it_was_scheduled_in() {
        let ms = 1_000_000u64;
        let step = |t: u64, step: u32| service_change(t, step, 10 * ms);
        let completed = |t: u64, id: u64, latency_ns: u64| {
            let mut e = end(t, id, OriginalState::OnTime);
            if let Kind::OriginalEnd(x) = &mut e.kind {
                x.latency_ns = Some(latency_ns);
            }
            e
        };
        let events = [
            step(0, 0),
            original(ms, 0, 2_000 * ms),
            attempt(ms, 0, 1, ms, 2_000 * ms),
            completed(20 * ms, 0, 18 * ms),
            step(100 * ms, 1),
            // Scheduled 4 ms before the step, completed 1 ms after it, its
            // end recorded 5 ms later: end − latency is past the step.
            original(96 * ms, 1, 2_096 * ms),
            attempt(96 * ms, 1, 1, 96 * ms, 2_096 * ms),
            completed(106 * ms, 1, 5 * ms),
            original(150 * ms, 2, 2_150 * ms),
            attempt(150 * ms, 2, 1, 150 * ms, 2_150 * ms),
            completed(170 * ms, 2, 20 * ms),
        ];
        let (o, _) = judge(&events);
        let cohorts: Vec<u64> = o.phases.iter().map(|p| p.cohort).collect();
        assert_eq!(cohorts, [2, 1], "{:?}", o.phases);
        assert_eq!(o.phases[0].p99_s, Some(0.018), "{:?}", o.phases);
        assert_eq!(o.phases[1].p50_s, Some(0.020), "{:?}", o.phases);
    }

    /// A slot returned and taken at one nanosecond is one slot, whichever
    /// way the tie sorts (helper-62: the admission sorted first read 33 of
    /// 32 and failed the check, by connection id); two admitted at once
    /// past the slots still fail.
    #[test]
    fn a_slot_returned_and_taken_in_one_instant_is_not_two() {
        let s = 1_000_000_000;
        let story = |tie: [Event; 2]| {
            let [a, b] = tie;
            [
                original(0, 0, 2 * s),
                original(0, 1, 2 * s),
                attempt(1, 0, 1, 0, 2 * s),
                attempt(1, 1, 1, 0, 2 * s),
                admit(2, 0, 1, 2 * s),
                a,
                b,
                complete(9, 1),
            ]
        };
        for tie in [
            [admit(5, 1, 1, 2 * s), complete(5, 0)],
            [complete(5, 0), admit(5, 1, 1, 2 * s)],
        ] {
            let (o, c) = judge(&story(tie));
            assert_eq!(o.max_in_use, 1, "{o:?}");
            assert_eq!(o.owned_peak_bytes, 100, "{o:?}");
            assert_eq!(c["admission"].ok, Some(true), "{:?}", c["admission"]);
        }
        // Taken before it was returned: two at once.
        let (o, c) = judge(&story([admit(5, 1, 1, 2 * s), complete(6, 0)]));
        assert_eq!(o.max_in_use, 2);
        assert_eq!(c["admission"].ok, Some(false), "{:?}", c["admission"]);
        // At the second admission's `t` (5 ns), its line in the trace (7).
        assert_eq!(c["admission"].first_t_s, Some(5e-9));
        assert_eq!(c["admission"].first_line, Some(7));
    }

    /// A complete trace's books must close though no event broke a rule:
    /// an original still open at the end fails `originals`, and so does a
    /// server that decoded an attempt the client never sent; sent, the
    /// same story holds.
    #[test]
    fn books_that_do_not_close_fail_the_originals_check() {
        let s = 1_000_000_000;
        let (o, c) = judge(&[original(0, 0, s), attempt(1, 0, 1, 0, s)]);
        assert_eq!(o.open, 1, "{o:?}");
        assert_eq!(c["originals"].ok, Some(false), "{:?}", c["originals"]);
        let send = ev(
            2,
            Endpoint::Client,
            Kind::Send(crate::schema::SendEv {
                seq: 0,
                scheduled: 0,
                begin: 2,
                bytes: 100,
            }),
        );
        let story = |sent: bool| {
            let mut events = vec![original(0, 0, s), attempt(1, 0, 1, 0, s)];
            events.extend(sent.then(|| send.clone()));
            events.extend([admit(3, 0, 1, s), end(4, 0, OriginalState::OnTime)]);
            judge(&events)
        };
        let (o, c) = story(false);
        assert_eq!((o.sent, o.decoded), (0, 1), "{o:?}");
        assert_eq!(c["originals"].ok, Some(false), "{:?}", c["originals"]);
        let (o, c) = story(true);
        assert_eq!((o.sent, o.decoded), (1, 1), "{o:?}");
        assert_eq!(c["originals"].ok, Some(true), "{:?}", c["originals"]);
    }

    /// Every terminal state is counted as itself, and N is their sum.
    #[test]
    fn each_end_counts_in_its_own_state() {
        use OriginalState::*;
        let states = [
            OnTime, Late, Rejected, Dropped, Expired, NeverSent, Unanswered,
        ];
        let mut events = vec![];
        for (id, state) in states.iter().enumerate() {
            events.push(original(id as u64, id as u64, 1_000));
            events.push(end(100 + id as u64, id as u64, *state));
        }
        let (o, c) = judge(&events);
        let counts = [
            o.on_time,
            o.late,
            o.rejected,
            o.dropped,
            o.expired,
            o.never_sent,
            o.unanswered,
        ];
        assert_eq!((o.originals, counts), (7, [1; 7]));
        assert_eq!(o.end_reasons.len(), 7);
        assert!(
            o.end_reasons.values().all(|n| *n == 1),
            "{:?}",
            o.end_reasons
        );
        assert_eq!(c["originals"].ok, Some(true), "{}", c["originals"].detail);
    }

    /// An attempt expired at `t` after waiting `wait_ns` for a slot.
    fn expire(t: u64, seq: u64, deadline: u64, wait_ns: u64) -> Event {
        let mut e = admit(t, seq, 1, deadline);
        if let Kind::Admission(a) = &mut e.kind {
            a.decision = Decision::Expired;
            a.wait_ns = wait_ns;
        }
        e
    }

    /// WAIT holds an attempt at most until its deadline (and the timer's
    /// slack); one that arrived past its deadline (over a slow link) is
    /// expired at once, held for none of it (it failed "held 382.7 ms past
    /// its deadline" for a stock client over --link-delay 300ms).
    #[test]
    fn an_attempt_is_held_past_its_deadline_only_if_it_waited_past_it() {
        let ms = 1_000_000;
        let held = |t: u64, wait_ns: u64| {
            let (_, c) = judge(&[expire(t, 0, 1_000 * ms, wait_ns)]);
            let c = &c["admission"];
            (c.ok, c.detail.clone())
        };
        // Arrived 382 ms late, expired at once.
        assert_eq!(held(1_382 * ms, 0).0, Some(true));
        // Decisions and waits are counted (two, one of which waited 0.5 s).
        let (o, _) = judge(&[
            expire(1_382 * ms, 0, 1_000 * ms, 0),
            expire(1_030 * ms, 1, 1_000 * ms, 500 * ms),
        ]);
        assert_eq!((o.decoded, o.decisions["expired"]), (2, 2));
        assert_eq!((o.admission_waits, o.max_admission_wait_ms), (1, 500.0));
        // Waited 500 ms, expired 30 ms past the deadline: the slack.
        assert_eq!(held(1_030 * ms, 500 * ms).0, Some(true));
        // Waited from 900 ms to 1,100 ms: held 100 ms past.
        let (ok, detail) = held(1_100 * ms, 200 * ms);
        assert_eq!(ok, Some(false), "{detail}");
        assert!(
            detail.starts_with("original 0 attempt 1 was held 100.0 ms past its deadline"),
            "{detail}"
        );
        // Arrived late and then waited: held from its arrival.
        let (ok, detail) = held(1_500 * ms, 100 * ms);
        assert_eq!(ok, Some(false), "{detail}");
        assert!(detail.contains("held 100.0 ms past"), "{detail}");
    }

    fn answer(t: u64, id: u64, attempt: u32, result: crate::schema::AttemptResult) -> Event {
        ev(
            t,
            Endpoint::Client,
            Kind::AttemptEnd(AttemptEndEv {
                id,
                attempt,
                seq: id,
                result,
                at: t,
            }),
        )
    }

    /// The client reads one answer per attempt, before its original ends:
    /// a second answer, or one to an attempt never initiated, fails
    /// `originals` (a duplicated `attempt_end` passed); an answer recorded
    /// at the nanosecond of its original's end holds whichever sorts
    /// first. A retry initiated past its deadline fails `admission` even
    /// after its original ended (it carries the deadline).
    #[test]
    fn every_answer_is_to_an_attempt_awaiting_one() {
        use crate::schema::AttemptResult::{Completed, Rejected};
        let s = 1_000_000_000;
        let story = vec![
            original(0, 0, 2 * s),
            attempt(1, 0, 1, 0, 2 * s),
            answer(5, 0, 1, Rejected),
            attempt(10, 0, 2, 0, 2 * s),
            answer(20, 0, 2, Completed),
            end(20, 0, OriginalState::OnTime),
        ];
        let verdict = |events: &[Event]| {
            let (_, c) = judge(events);
            let c = &c["originals"];
            (c.ok, c.detail.clone())
        };
        assert_eq!(verdict(&story).0, Some(true), "{}", verdict(&story).1);
        let mut tie = story.clone();
        tie.swap(4, 5);
        assert_eq!(verdict(&tie).0, Some(true), "{}", verdict(&tie).1);
        for (i, again) in [
            (5, answer(20, 0, 2, Completed)),
            (3, answer(6, 0, 1, Rejected)),
        ] {
            let mut twice = story.clone();
            twice.insert(i, again);
            let (ok, detail) = verdict(&twice);
            assert_eq!(ok, Some(false), "{detail}");
            assert!(
                detail.contains("which awaited none (answered twice"),
                "{detail}"
            );
        }
        let mut unasked = story.clone();
        unasked.insert(2, answer(3, 0, 2, Rejected));
        assert_eq!(verdict(&unasked).0, Some(false));

        let mut late_retry = story.clone();
        late_retry.insert(2, admit(2, 0, 1, 2 * s));
        let (_, c) = judge(&late_retry);
        assert_eq!(c["admission"].ok, Some(true), "{}", c["admission"].detail);
        late_retry.push(attempt(3 * s, 0, 3, 0, 2 * s));
        let (_, c) = judge(&late_retry);
        assert_eq!(c["originals"].ok, Some(false), "{}", c["originals"].detail);
        let a = &c["admission"];
        assert_eq!(a.ok, Some(false), "{}", a.detail);
        assert!(
            a.detail
                .starts_with("attempt 3 of original 0 was initiated after its deadline"),
            "{}",
            a.detail
        );
    }

    #[test]
    fn the_checks_hold_for_a_clean_story_and_fail_where_it_breaks() {
        let s = 1_000_000_000;
        let send = ev(
            1,
            Endpoint::Client,
            Kind::Send(crate::schema::SendEv {
                seq: 0,
                scheduled: 1,
                begin: 1,
                bytes: 100,
            }),
        );
        let clean = [
            original(0, 0, 2 * s),
            attempt(1, 0, 1, 0, 2 * s),
            send,
            admit(2, 0, 1, 2 * s),
            end(3, 0, OriginalState::Rejected),
        ];
        let (o, c) = judge(&clean);
        assert_eq!((o.originals, o.rejected, o.max_in_use), (1, 1, 1));
        assert_eq!(c["originals"].ok, Some(true), "{}", c["originals"].detail);
        assert_eq!(c["admission"].ok, Some(true), "{}", c["admission"].detail);

        // A retry that moved the deadline, and two admissions into one slot.
        let broken = [
            original(0, 0, 2 * s),
            attempt(1, 0, 1, 0, 2 * s),
            attempt(2, 0, 2, 0, 3 * s),
            admit(3, 0, 1, 2 * s),
            admit(4, 1, 1, 2 * s),
            end(5, 0, OriginalState::Rejected),
        ];
        let (_, c) = judge(&broken);
        assert_eq!(c["admission"].ok, Some(false));
        assert!(
            c["admission"].detail.contains("not the original's"),
            "{}",
            c["admission"].detail
        );
        assert!(
            c["admission"].detail.contains("2 violations"),
            "{}",
            c["admission"].detail
        );

        // Cut short: a violation settled well before the cut stands (it was
        // set aside, and the run exited 0); one within the reorder window
        // of the cut, or with events dropped anywhere, cannot be judged.
        let cut = |settled_at: u64| {
            let mut events = broken.to_vec();
            events.push(admit(settled_at, 2, 2, 2 * s));
            let why = |cut: bool| Some(("the trace was cut".to_string(), cut));
            let (_, c) = judge_incomplete(&events, why(true));
            let (_, dropped) = judge_incomplete(&events, why(false));
            assert_eq!(dropped["admission"].ok, None);
            c["admission"].ok
        };
        assert_eq!(cut(s), Some(false));
        assert_eq!(cut(6), None);

        // Through the analyzer: a violation in the reorder window before
        // a cut, or in a trace with events dropped, cannot be judged, and
        // says why; in a whole trace it fails.
        let analysed = |dropped: u64, ending: crate::reader::Ending| {
            let mut a = crate::analyze::Analyzer::new(0);
            for e in &broken {
                a.feed(e);
            }
            a.finish(dropped, &ending).0.checks["admission"].clone()
        };
        let clean = || crate::reader::Ending::Clean(Default::default());
        assert_eq!(analysed(0, clean()).ok, Some(false));
        let dropped = analysed(2, clean());
        assert_eq!(dropped.ok, None, "{}", dropped.detail);
        assert_eq!(dropped.detail, "the recorder dropped 2 events");
        let cut = analysed(0, crate::reader::Ending::Truncated { line: 9 });
        assert_eq!(cut.ok, None, "{}", cut.detail);
        assert!(cut.detail.starts_with("the trace was cut at line 9"));

        // An original that never ends, and one that ends twice.
        let unfinished = [
            original(0, 0, s),
            original(1, 1, s),
            end(2, 1, OriginalState::OnTime),
            end(3, 1, OriginalState::Late),
        ];
        let (o, c) = judge(&unfinished);
        assert_eq!(o.open, 1);
        // The headline's ends add up to N: the open one is said.
        assert_eq!(o.other_ends().last(), Some(&("still open", 1)));
        assert_eq!(c["originals"].ok, Some(false), "{}", c["originals"].detail);
    }

    #[test]
    fn quantiles_use_nearest_rank() {
        let v: Vec<u64> = (1..=20).map(|s| s * 1_000_000_000).collect();
        assert_eq!(quantile(&v, 0.95), Some(19.0));
        assert_eq!(quantile(&v, 0.5), Some(10.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    /// Two client processes merged into one trace each number their
    /// originals from 0: told apart by their connections' merge input, and
    /// a failure names whose original it was.
    #[test]
    fn merged_clients_number_their_originals_each_on_their_own() {
        let second = |mut e: Event| {
            e.conn += crate::schema::CONN_OFFSET;
            e
        };
        let mut events = vec![];
        for id in 0..3 {
            events.push(original(id * 10, id, 1_000_000));
            events.push(second(original(id * 10 + 1, id, 1_000_000)));
        }
        for id in 0..3 {
            events.push(end(500 + id, id, OriginalState::Dropped));
            events.push(second(end(600 + id, id, OriginalState::Dropped)));
        }
        let (o, checks) = judge(&events);
        let c = &checks["originals"];
        assert_eq!(
            (c.ok, o.originals, o.dropped),
            (Some(true), 6, 6),
            "{}",
            c.detail
        );
        // The second client's original 1 ends twice.
        events.push(second(end(700, 1, OriginalState::Dropped)));
        let (_, checks) = judge(&events);
        let c = &checks["originals"];
        assert_eq!(c.ok, Some(false), "{}", c.detail);
        assert!(
            c.detail.starts_with(&format!(
                "original 1 (of the client on connection {}) ended (dropped) without being open",
                crate::schema::CONN_OFFSET + 1
            )),
            "{}",
            c.detail
        );
    }

    /// 10,000 originals ending out of order within a few: their ids are
    /// kept as a few ranges (they were 8 bytes each), and an original that
    /// ends twice, or is scheduled again after its end, is still caught.
    #[test]
    fn ended_originals_are_ranges_and_a_second_end_is_caught() {
        let n = 10_000u64;
        let mut events = vec![];
        for id in 0..n {
            events.push(original(id * 10, id, id * 10 + 1_000_000));
        }
        // Ends in pairs swapped: 1, 0, 3, 2, …
        for id in 0..n {
            events.push(end(200_000 + id, id ^ 1, OriginalState::Dropped));
        }
        let mut tr = Tracker::default();
        let mut tl = Timeline::new(0);
        for (i, e) in events.iter().enumerate() {
            tr.feed(e, i as u64 + 2, &mut tl);
        }
        assert_eq!(tr.ended[&0].ranges(), 1);
        let (_, checks) = tr.finish(0.0, 0.0, None, 0);
        assert_eq!(
            checks["originals"].ok,
            Some(true),
            "{}",
            checks["originals"].detail
        );
        events.push(end(300_000, 77, OriginalState::Dropped));
        let (_, checks) = judge(&events);
        assert!(
            checks["originals"].detail.contains("original 77 ended"),
            "{}",
            checks["originals"].detail
        );
        events.pop();
        events.push(original(300_000, 78, 400_000));
        let (_, checks) = judge(&events);
        assert!(
            checks["originals"]
                .detail
                .contains("original 78 was scheduled twice"),
            "{}",
            checks["originals"].detail
        );
    }
}
