//! The open-loop schedule: one task per RPC that offers messages at their
//! scheduled times and never waits for the sender (a full backlog makes a
//! message `never_sent`).

use super::{ClientCtx, Pending};
use crate::grpc;
use crate::live::Live;
use crate::trace::clock::{now_ns, to_instant};
use crate::trace::schema::{Endpoint, Kind, KindId, MsgEv, NeverSentEv, NeverSentReason};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Where one schedule sits: its connection and stream (0: the connection's,
/// for unary calls), its index `k` among all schedules (offsets interleave
/// them), its start and deadline (ns), and its messages per second.
pub(super) struct Slot {
    pub conn: u32,
    pub stream: u32,
    pub k: u32,
    pub start: u64,
    pub deadline: u64,
    pub rate: f64,
    /// Takers of a message at once (a unary connection's idle calls): the
    /// backlog is full at --max-pending beyond them, its channel holding
    /// room for both. `None`: the channel's capacity is the backlog.
    pub idle: Option<Arc<dyn Fn() -> usize + Send + Sync>>,
    /// The first message's `seq`: 0, or where the schedule of a unary
    /// connection the server closed stopped (its replacement goes on from
    /// there, on the same times).
    pub first: u64,
    /// Where the schedule is: the `seq` it offers next, [`DONE`] once it
    /// has offered its last. Read when it is stopped, to go on elsewhere.
    pub next: Option<Arc<AtomicU64>>,
    /// The connection takes no more streams (a unary connection the server
    /// closed): the schedule stops before offering its next message, which
    /// a replacement then offers (offered here, it would be lost with the
    /// connection).
    pub gone: Option<Arc<dyn Fn() -> bool + Send + Sync>>,
}

/// [`Slot::next`] of a schedule that has offered all its messages.
pub(super) const DONE: u64 = u64::MAX;

/// Spawns the schedule task of one RPC (or of a connection's unary calls);
/// it ends at `--duration`, the deadline or an interrupt.
pub(super) fn spawn(
    ctx: &Arc<ClientCtx>,
    slot: Slot,
    tx: mpsc::Sender<Pending>,
    payload: &Bytes,
) -> tokio::task::JoinHandle<()> {
    let Slot {
        conn,
        stream,
        k,
        start,
        deadline,
        rate,
        idle,
        first,
        next,
        gone,
    } = slot;
    let ctx = ctx.clone();
    // Streams interleave: the k-th starts k/total-rate after the first,
    // and every stream's offering ends at --duration from the common start.
    // With equal rates the n streams' messages are then exactly one
    // schedule at the total rate dealt round-robin (message j at j/rate),
    // rate × --duration in all within --duration. (Each stream offered for
    // --duration from its own start: 1,000 streams at 300/s for 1 s
    // offered 1,000 messages over 3.3 s.)
    let times = Times::of(&ctx, k, start, rate);
    let end = start + ctx.opts.duration.0.as_nanos() as u64;
    let payload = payload.clone();
    tokio::spawn(async move {
        let mut interrupt = ctx.interrupt.clone();
        // Consecutive messages the backlog refused: one event per run
        // (recorded even if this task is aborted: the guard flushes on drop).
        let mut refused = Refused {
            ctx: ctx.clone(),
            conn,
            stream,
            run: None,
        };
        let due = |seq: u64| times.due(seq);
        let at_seq = |seq: u64| {
            if let Some(next) = &next {
                next.store(seq, Relaxed);
            }
        };
        for seq in first.. {
            at_seq(seq);
            let at = due(seq);
            if at >= end {
                at_seq(DONE);
                break;
            }
            if *interrupt.borrow() {
                break;
            }
            // The schedule ends at --duration on the clock too: if it ever
            // falls far behind (the client held up past the end), it stops
            // there rather than running on, and the messages still due
            // before --duration are offered and never sent, said so. A
            // wake-up a few ms late near the end still schedules its last
            // messages.
            if now_ns() >= end + LATE_END_NS {
                refused.flush();
                let (past, reason) = (end.min(deadline), NeverSentReason::Behind);
                offered_unsent(&ctx, (conn, stream), &times, seq, past, reason, &payload);
                at_seq(DONE);
                break;
            }
            if at >= deadline {
                // The deadline, not --duration, ends this offering: the
                // stream stays open until the RPC's deadline ends it
                // (DEADLINE_EXCEEDED, reset), as gRPC's does. Closing the
                // schedule here ended the stream cleanly: a deadline shorter
                // than the first message's time read as an empty RPC the
                // server answered OK.
                crate::live::flag_set(&mut interrupt).await;
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(to_instant(at)) => {}
                _ = crate::live::flag_set(&mut interrupt) => break,
            }
            if gone.as_ref().is_some_and(|gone| gone()) {
                break;
            }
            schedule(&ctx, conn, stream, seq, at, &payload);
            let full = idle.as_ref().is_some_and(|idle| {
                let waiting = tx.max_capacity() - tx.capacity();
                waiting >= ctx.opts.max_pending as usize + idle()
            });
            if full || tx.try_send(Pending { seq, scheduled: at }).is_err() {
                refused.add(seq, now_ns());
                Live::add(&ctx.live.never_sent, 1);
            } else {
                refused.flush();
            }
        }
    })
}

/// When a schedule's messages are due.
#[derive(Clone, Copy)]
pub(super) struct Times {
    start: u64,
    offset: f64,
    period: f64,
}

impl Times {
    /// The times of the `k`-th schedule, at `rate` messages a second from
    /// the common `start`.
    pub(super) fn of(ctx: &ClientCtx, k: u32, start: u64, rate: f64) -> Times {
        let period = 1e9 / rate;
        // Within the stream's own period, so that each stream offers its
        // rate × --duration whatever place it draws (h2 numbers the streams
        // in a race): with --stream-rates 50,50,200 the 200/s stream drawing
        // the third place started 6.7 ms in and offered 399 messages in 2 s,
        // not 400. With equal rates the offset is always within the period.
        Times {
            start,
            offset: offset_ns(k, ctx.opts.total_rate(), period),
            period,
        }
    }

    /// When message `seq` is due (ns, on the trace's clock).
    pub(super) fn due(&self, seq: u64) -> u64 {
        self.start + (self.offset + self.period * seq as f64) as u64
    }
}

/// Records the messages of the `k`-th schedule (unary: a connection's,
/// on stream 0) from `seq` on that fell due before now and --duration
/// with no connection to offer them to (a replacement that never
/// connected) as offered and never sent for `reason`.
pub(super) fn fell_due(
    ctx: &ClientCtx,
    conn: u32,
    (k, start): (u32, u64),
    seq: u64,
    reason: NeverSentReason,
) {
    let times = Times::of(ctx, k, start, ctx.opts.rate_of(0));
    let end = start + ctx.opts.duration.0.as_nanos() as u64;
    let payload = super::payload_bytes(ctx.opts.payload.0 as usize);
    offered_unsent(
        ctx,
        (conn, 0),
        &times,
        seq,
        now_ns().min(end),
        reason,
        &payload,
    );
}

/// Records messages `seq`, `seq + 1`, … due before `past` as offered,
/// each `schedule` at its due time, and never sent for `reason` (one
/// `never_sent` run, `t` now): a schedule held up past --duration, or
/// one whose connection never opened.
fn offered_unsent(
    ctx: &ClientCtx,
    (conn, stream): (u32, u32),
    times: &Times,
    seq: u64,
    past: u64,
    reason: NeverSentReason,
    payload: &Bytes,
) {
    let count = (seq..)
        .map(|s| (s, times.due(s)))
        .take_while(|&(_, at)| at < past)
        .map(|(s, at)| schedule(ctx, conn, stream, s, at, payload))
        .count() as u64;
    if count > 0 {
        ctx.rec.emit(
            Endpoint::Client,
            conn,
            stream,
            now_ns(),
            KindId::NeverSent,
            || Kind::NeverSent(NeverSentEv { seq, reason, count }),
        );
        Live::add(&ctx.live.never_sent, count);
    }
}

/// Records message `seq` as offered at `at` (its `schedule` event, whose
/// `t` is when it was due) and counts it.
fn schedule(ctx: &ClientCtx, conn: u32, stream: u32, seq: u64, at: u64, payload: &Bytes) {
    // The exact size the message will have (varints depend on seq and time).
    let size = ctx.call.codec.message_len(seq, at, payload) as u32;
    ctx.rec
        .emit(Endpoint::Client, conn, stream, at, KindId::Schedule, || {
            Kind::Schedule(MsgEv {
                seq,
                size,
                framed: size + grpc::PREFIX_LEN as u32,
            })
        });
    Live::add(&ctx.live.scheduled, 1);
    Live::add(&ctx.live.offered, 1);
}

/// A run of consecutive messages refused by a full backlog, not yet
/// recorded. A run is recorded when it ends, when it is 100 ms old (so the
/// event is never much later than its `t`, which is the run's first
/// refusal), and when the schedule ends or is aborted (on drop).
struct Refused {
    ctx: Arc<ClientCtx>,
    conn: u32,
    stream: u32,
    /// (first seq, when it was refused, how many).
    run: Option<(u64, u64, u64)>,
}

/// Where the `k`-th stream's schedule starts, ns after the common start:
/// `k` places of the total rate, within the stream's own `period`.
fn offset_ns(k: u32, total_rate: f64, period: f64) -> f64 {
    (1e9 * k as f64 / total_rate) % period
}

/// How far past --duration a schedule that fell behind still catches up.
const LATE_END_NS: u64 = 100_000_000;

/// The oldest a run of refusals gets before it is recorded.
const RUN_AGE_NS: u64 = 100_000_000;

impl Refused {
    fn add(&mut self, seq: u64, t: u64) {
        if let Some((first, t0, n)) = &mut self.run {
            if *first + *n == seq && t.saturating_sub(*t0) < RUN_AGE_NS {
                *n += 1;
                return;
            }
        }
        self.flush();
        self.run = Some((seq, t, 1));
    }

    /// Records the run as one `never_sent` event.
    fn flush(&mut self) {
        if let Some((seq, t, count)) = self.run.take() {
            self.ctx.rec.emit(
                Endpoint::Client,
                self.conn,
                self.stream,
                t,
                KindId::NeverSent,
                || {
                    Kind::NeverSent(NeverSentEv {
                        seq,
                        reason: NeverSentReason::Backlog,
                        count,
                    })
                },
            );
        }
    }
}

impl Drop for Refused {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    /// Each stream offers its rate × --duration whatever place it draws:
    /// rates 50, 50 and 200 per second for 2 s are 100, 100 and 400
    /// messages in every order (the 200/s stream in third place offered 399).
    #[test]
    fn every_stream_offers_its_rate_times_the_duration_in_any_place() {
        let (rates, duration) = ([50.0, 50.0, 200.0], 2e9);
        let total: f64 = rates.iter().sum();
        for order in [
            [0, 1, 2],
            [0, 2, 1],
            [1, 0, 2],
            [1, 2, 0],
            [2, 0, 1],
            [2, 1, 0],
        ] {
            for (k, &i) in order.iter().enumerate() {
                let period = 1e9 / rates[i];
                let offset = super::offset_ns(k as u32, total, period);
                let offered = (0u64..)
                    .take_while(|&seq| offset + period * (seq as f64) < duration)
                    .count();
                assert_eq!(
                    offered as f64,
                    rates[i] * 2.0,
                    "rate {} in place {k}",
                    rates[i]
                );
            }
        }
        // Equal rates: the places interleave, one message of the total rate apart.
        assert_eq!(super::offset_ns(2, 300.0, 1e9 / 100.0), 1e9 * 2.0 / 300.0);
    }
}
