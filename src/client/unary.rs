//! Unary calls: one message per RPC. A connection's schedule offers its
//! messages (--rate over all connections) into one backlog of
//! --max-pending beyond the calls idle to take one; --streams lanes take
//! turns to take the next one and call once with it, so at most --streams
//! calls, and never more than the server allows, are in flight on a
//! connection. No stream exists when a message is offered, so its
//! `schedule` (and a full backlog's `never_sent`) is the connection's, on
//! stream 0; its `send` is on its call's stream, with the same `seq`
//! (numbered per connection). A call's deadline runs from its message's
//! scheduled time, as a gRPC call's from its creation: a message whose
//! deadline passed in the backlog is `never_sent` (deadline) on stream 0,
//! and the calls end within --duration and one --deadline whatever the
//! server does (from its open, the backlog drained one deadline at a time
//! behind a server that never answered).
//!
//! A connection that ends before its schedule (the server's GOAWAY at a
//! maximum connection age, a drain, a reset) is replaced, as a gRPC
//! channel replaces one, once the server has answered a call of it (or
//! held one to its deadline, having answered one before: see
//! `Lanes::answered`; or with calls still in flight, on
//! trust; or, the slot's first, before anything was offered to it): its
//! schedule stops at once, and a new connection opens when its first
//! message is due (at once when messages wait for it) and goes on from
//! the next on the same times, while the calls in flight end on the old
//! one. The messages then waiting in the old backlog go with it, sent
//! first on the new one (see [`Carried`]): `never_sent` (`handed_over`)
//! on the old connection and `handed` on the new, so that each one's
//! accounting stays its own.
//! One that served no call (see `Turn::stop`), or a replacement that
//! cannot connect, fails the run: its schedule stopped before --duration.

use super::*;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Mutex;
use tokio::sync::{oneshot, watch};

/// Kinds of failure kept per connection (the first ones), each with how
/// many calls ended so.
pub const KEPT_FAILED: usize = 4;

/// Where a replaced connection's schedule stopped: the next connection
/// offers from message `next` on, on the same times, and opens when it is
/// `due` (as a gRPC channel left idle connects for its next call: one
/// opened at once sat idle, and a server closing idle connections closed
/// it before its first call).
#[derive(Clone, Debug)]
pub(super) struct Handover {
    /// The connection replaced.
    pub conn: u32,
    /// Why it ended, as h2 (and the tap) tell.
    pub why: String,
    pub next: u64,
    pub due: u64,
    /// Handed over with calls in flight and none answered: whether it
    /// served after all. A chain whose connection ended without answering
    /// stops (see `client::connection`).
    pub trust: Option<Trust>,
    /// Its messages offered and not sent, for the replacement to send.
    pub carried: Carried,
}

/// Messages a connection that ended before its schedule had offered and
/// not sent (its backlog, and one whose call h2 refused a stream: it never
/// left the client), handed to its replacement to send, as a gRPC
/// channel's calls waiting for a transport go to the next. Without it a
/// server closing connections at a maximum age cost the messages waiting
/// at each close (36 of 10,000 at 2,000 calls a second and a 100 ms age
/// against grpcio, one of them a call failed UNAVAILABLE). The replacement
/// takes them once it opens; left untaken (it never opened) they are
/// recorded unsent on the connection that scheduled them.
#[derive(Clone, Debug)]
pub(super) struct Carried(Arc<Mutex<Option<Vec<Pending>>>>);

impl Carried {
    fn new(msgs: Vec<Pending>) -> Carried {
        Carried(Arc::new(Mutex::new(Some(msgs))))
    }

    /// The messages, to the first taker only: `None` once taken (by the
    /// replacement, which took them when it opened).
    pub(super) fn take(&self) -> Option<Vec<Pending>> {
        self.0.lock().expect("not poisoned").take()
    }
}

impl Handover {
    /// What a run whose chain stops here did not do: its schedule stopped
    /// early, or, its schedule done, the messages it had offered and not
    /// sent were never sent.
    pub(super) fn cut_short(&self) -> &'static str {
        cut_short(self.next)
    }
}

/// [`Handover::cut_short`] for a schedule whose next message is `next`.
fn cut_short(next: u64) -> &'static str {
    if next == schedule::DONE {
        "the messages it had offered and not sent were never sent"
    } else {
        "its schedule stopped before --duration"
    }
}

/// A connection replaced on trust: its calls in flight and whether the
/// server has answered one.
#[derive(Clone, Debug)]
pub(super) struct Trust {
    answered: Arc<AtomicBool>,
    open: watch::Receiver<usize>,
}

impl Trust {
    /// Its calls have all ended, none answered: it served nothing. (Its
    /// task's end came up to the 5 s close grace later.)
    pub(super) fn broken(&self) -> bool {
        // `answered` is set before a call leaves `open`: read after it.
        *self.open.borrow() == 0 && !self.answered.load(SeqCst)
    }
}

/// Runs a connection's unary calls until its schedule ends (its backlog
/// empty), an interrupt or a call that could not open its stream (the
/// connection failed); messages left in the backlog are recorded as
/// `never_sent`. The schedule offers from message `first` on; `handover`
/// hears where it stopped if the connection ended before it, to be
/// replaced (see the module's doc; `replacement`: this connection replaces
/// one). Returns the outcomes worth printing (see [`Kept`]).
#[allow(clippy::too_many_arguments)]
pub(super) async fn calls(
    ctx: &Arc<ClientCtx>,
    sr: SendRequest<Bytes>,
    conn: u32,
    index: u32,
    start: u64,
    first: u64,
    replacement: bool,
    handover: Option<oneshot::Sender<Handover>>,
    carried: Option<(u32, Carried)>,
    answered_once: Arc<AtomicBool>,
    cause: &crate::tap::CloseReason,
) -> anyhow::Result<Vec<RpcOutcome>> {
    let opts = &ctx.opts;
    let streams = opts.streams as usize;
    let carried = carried.map(|(from, c)| (from, c.take().unwrap_or_default()));
    let lanes = Arc::new(Lanes {
        streams,
        open: watch::channel(0).0,
        limit: AtomicUsize::new(1),
        answered: Arc::new(AtomicBool::new(false)),
        answered_once,
    });
    // Room for the backlog and for a message on its way to each idle call
    // (the schedule refuses past the backlog beyond the idle calls).
    // The messages handed over wait there first (they count in it: the
    // schedule refuses past --max-pending with them), and may be one more
    // than it holds (a call's, refused a stream, with a full backlog).
    let handed = carried.as_ref().map_or(0, |(_, c)| c.len());
    let (tx, rx) = mpsc::channel::<Pending>((opts.max_pending as usize + streams).max(handed));
    if let Some((from, msgs)) = carried.filter(|(_, c)| !c.is_empty()) {
        record_handed(ctx, from, conn, &msgs);
        for p in msgs {
            tx.try_send(p).expect("room for every message handed over");
        }
    }
    let payload = payload_bytes(opts.payload.0 as usize);
    let next = Arc::new(AtomicU64::new(first));
    let times = schedule::Times::of(ctx, index, start, opts.rate_of(0));
    // The schedule finds the connection gone when its next message is due
    // (h2 gives no wake-up at a GOAWAY), and says so here.
    let gone_seen = Arc::new(tokio::sync::Notify::new());
    // None left to offer (the one replaced had offered its last).
    let scheduler = (first != schedule::DONE).then(|| {
        schedule::spawn(
            ctx,
            schedule::Slot {
                conn,
                stream: 0,
                k: index,
                start,
                // Each call has its own --deadline; the schedule runs to --duration.
                deadline: u64::MAX,
                rate: opts.rate_of(0),
                idle: Some({
                    let lanes = lanes.clone();
                    Arc::new(move || lanes.idle())
                }),
                first,
                next: Some(next.clone()),
                gone: Some({
                    let sr = Mutex::new(sr.clone());
                    let seen = gone_seen.clone();
                    Arc::new(move || {
                        let gone = refusal(&mut sr.lock().expect("not poisoned")).is_some();
                        if gone {
                            seen.notify_one();
                        }
                        gone
                    })
                }),
            },
            tx,
            &payload,
        )
    });
    let turn = Arc::new(tokio::sync::Mutex::new(Turn {
        sr,
        backlog: rx,
        failed: false,
        settings_seen: false,
        scheduler,
        next,
        times,
        held: None,
        first,
        replacement,
        gone: None,
        cause: cause.clone(),
        lanes: lanes.clone(),
        handover,
    }));
    let kept = Arc::new(Mutex::new(Kept::default()));
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..opts.streams {
        calls.spawn(lane(
            ctx.clone(),
            turn.clone(),
            lanes.clone(),
            conn,
            payload.clone(),
            cause.clone(),
            kept.clone(),
        ));
    }
    // While every lane is in a call, none takes the next message: the
    // connection's end the schedule found is acted on here, so that its
    // replacement opens when that message is due, not when a call ends (a
    // server answering a call only after its GOAWAY's grace held the whole
    // schedule). A lane holding the turn finds it on its own.
    loop {
        tokio::select! {
            r = calls.join_next() => match r {
                Some(r) => r.context("client call task")?,
                None => break,
            },
            _ = gone_seen.notified() => {
                let mut turn = turn.lock().await;
                if !turn.failed {
                    if let Some(e) = refusal(&mut turn.sr) {
                        turn.refused(&e);
                        turn.stop(ctx, conn).await;
                    }
                }
            }
        }
    }
    // A schedule still running has lost its connection.
    turn.lock().await.stop(ctx, conn).await;
    let kept = std::mem::take(&mut *kept.lock().expect("not poisoned"));
    Ok(kept.into_vec())
}

/// Records messages `from` handed over to `conn`, its replacement, which
/// takes them (`t` now): `from`'s books close with them `never_sent`
/// (`handed_over`), `conn`'s open with them `handed`, one event per
/// contiguous run on each. They are not never sent (their fate is `conn`'s):
/// the live count is not touched.
fn record_handed(ctx: &ClientCtx, from: u32, conn: u32, msgs: &[Pending]) {
    let t = now_ns();
    let seqs: Vec<u64> = msgs.iter().map(|p| p.seq).collect();
    for (seq, count) in runs(seqs) {
        ctx.rec
            .emit(Endpoint::Client, from, 0, t, KindId::NeverSent, || {
                Kind::NeverSent(NeverSentEv {
                    seq,
                    reason: NeverSentReason::HandedOver,
                    count,
                })
            });
        ctx.rec
            .emit(Endpoint::Client, conn, 0, t, KindId::Handed, || {
                Kind::Handed(crate::trace::schema::HandedEv { seq, count, from })
            });
    }
}

/// What a connection's lanes share: how many of their calls are open, and
/// the server's stream limit as last seen.
struct Lanes {
    streams: usize,
    open: watch::Sender<usize>,
    /// 1 until a lane has seen the server's SETTINGS: the first call alone
    /// goes before them (counted unlimited, 16 lanes took 17 messages
    /// that then waited for two streams, one of them 658 ms).
    limit: AtomicUsize,
    /// The server answered a call (response headers came), or, having
    /// answered one of the chain's connections before (`answered_once`),
    /// held one whose message was sent to its deadline: the connection
    /// served. Set before the call leaves `open`. (Without the second, a
    /// server slower than --deadline answered none on a replacement whose
    /// calls, a backlog handed over to it, all expired, and that failed
    /// the run as if it had been closed at once. Every call that reached
    /// its deadline counted, and a server that sent no SETTINGS, or closed
    /// each connection 2 ms after a call's HEADERS, cost 200 to 290
    /// connections a second.)
    answered: Arc<AtomicBool>,
    /// The server has answered a call of this connection or of one before
    /// it in its chain.
    answered_once: Arc<AtomicBool>,
}

impl Lanes {
    /// Calls that would take a message at once: lanes not in a call, within
    /// the server's limit. A message they take does not wait, so the
    /// backlog holds --max-pending beyond them (with one slot the schedule
    /// refused a message whenever two fell due before a lane woke).
    fn idle(&self) -> usize {
        let allowed = self.streams.min(self.limit.load(Relaxed));
        allowed.saturating_sub(*self.open.borrow())
    }
}

/// A connection's turn to open a call, which one lane holds at a time: it
/// waits for a stream the server allows, then takes the next message and
/// opens its call. Past the server's SETTINGS_MAX_CONCURRENT_STREAMS h2
/// holds a call pending open, with its stream id given and its DATA taken,
/// and writes its HEADERS even after an interrupt reset it: lanes that each
/// opened at once left all but the server's limit pending there, their wait
/// counted in the call's time. Now messages beyond the limit wait in the
/// backlog, where their wait is lateness.
struct Turn {
    sr: SendRequest<Bytes>,
    backlog: mpsc::Receiver<Pending>,
    /// The connection takes no more streams (the server's GOAWAY, its end,
    /// or a call that could not open its stream): no lane spends another
    /// message on it.
    failed: bool,
    /// h2 has applied the server's SETTINGS (its limit read above 0 once):
    /// a limit of 0 is the server's then, not h2's before them.
    settings_seen: bool,
    /// The schedule offering into `backlog`, until [`Turn::stop`].
    scheduler: Option<tokio::task::JoinHandle<()>>,
    /// The `seq` the schedule offers next ([`schedule::DONE`] at its end).
    next: Arc<AtomicU64>,
    times: schedule::Times,
    /// A message taken from the backlog just as the connection turned out
    /// to refuse streams: never sent, with those left in the backlog.
    held: Option<Pending>,
    /// The schedule's first message on this connection.
    first: u64,
    /// This connection replaces one.
    replacement: bool,
    /// Why the connection takes no more streams, as h2 says it.
    gone: Option<String>,
    /// Why it failed, as the tap saw it.
    cause: crate::tap::CloseReason,
    /// Its calls in flight, and whether the server answered one.
    lanes: Arc<Lanes>,
    handover: Option<oneshot::Sender<Handover>>,
}

/// Why the connection takes no more streams (a GOAWAY received, or it
/// failed); `None` while it does. h2 says so without waiting. `sr` is a
/// handle that sends nothing (its calls use clones), so it never has a
/// call pending open to wait for.
fn refusal(sr: &mut SendRequest<Bytes>) -> Option<h2::Error> {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match sr.poll_ready(&mut cx) {
        std::task::Poll::Ready(Err(e)) => Some(e),
        _ => None,
    }
}

/// How often a lane looks for the server's first SETTINGS while a call
/// waits for them (h2 assumes no stream allowed until then).
const SETTINGS_POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// How often a lane at the server's limit looks at it again between the
/// ends of calls: a server may raise it (or lower it) in a SETTINGS of its
/// own, and calls can take up to --deadline to end.
const LIMIT_POLL: std::time::Duration = std::time::Duration::from_millis(10);

impl Turn {
    /// The next message once a stream is free: fewer calls `open` than the
    /// server allows (seen when a call ends, or within [`LIMIT_POLL`] of a
    /// SETTINGS that changes it). The first call goes at once: h2 holds it
    /// until the server's SETTINGS. `None`: the backlog closed, or the
    /// connection takes no more streams (`failed`; its message, if one was
    /// taken, `held`).
    async fn next(&mut self, ctx: &ClientCtx) -> Option<Pending> {
        let lanes = self.lanes.clone();
        let mut calls = lanes.open.subscribe();
        loop {
            // `calls`, woken by the schedule's finding, waits for the turn
            // this lane holds: it looks here (a replacement waited for a
            // call to end behind a server allowing fewer streams than
            // --streams).
            if let Some(e) = refusal(&mut self.sr) {
                self.refused(&e);
                return None;
            }
            let limit = self.sr.current_max_send_streams();
            self.settings_seen |= limit > 0;
            if self.settings_seen {
                lanes.limit.store(limit, Relaxed);
            }
            if *calls.borrow_and_update() < limit.max(1) {
                break;
            }
            let poll = if self.settings_seen {
                LIMIT_POLL
            } else {
                SETTINGS_POLL
            };
            let _ = tokio::time::timeout(poll, calls.changed()).await;
        }
        let limit = self.sr.current_max_send_streams();
        let streams = lanes.streams;
        if limit > 0 && limit < streams && !ctx.stream_limit_said.swap(true, Relaxed) {
            crate::say!(
                "the server allows {limit} stream{s} at a time on a connection \
                 (SETTINGS_MAX_CONCURRENT_STREAMS) and --streams asks for {streams}: \
                 {limit} call{s} at a time, the others wait in the backlog (--max-pending)",
                s = if limit == 1 { "" } else { "s" }
            );
        }
        // The loop above looked last, with no wait since.
        let Some(p) = self.backlog.recv().await else {
            // The schedule ended, or stopped on finding the connection gone.
            if let Some(e) = refusal(&mut self.sr) {
                self.refused(&e);
            }
            return None;
        };
        // It may have gone while this waited.
        if let Some(e) = refusal(&mut self.sr) {
            self.refused(&e);
            self.held = Some(p);
            return None;
        }
        Some(p)
    }

    /// The connection takes no more streams (`e`): no lane takes another
    /// message for it.
    fn refused(&mut self, e: &h2::Error) {
        self.failed = true;
        self.gone.get_or_insert_with(|| h2_error_text(e));
    }

    /// Stops the schedule and closes the backlog. A connection that ended
    /// before its schedule hands where the schedule stopped, and the
    /// messages left in the backlog (and `held`), to its replacement (not
    /// after an interrupt), or, one not to be replaced, fails the run,
    /// which offered less than asked (it stopped offering silently, exit 0
    /// when no call failed); messages not handed over are `never_sent`.
    async fn stop(&mut self, ctx: &ClientCtx, conn: u32) {
        if let Some(scheduler) = self.scheduler.take() {
            // Awaited: a message it is offering lands in the backlog first.
            scheduler.abort();
            let _ = scheduler.await;
        }
        self.backlog.close();
        let mut unsent: Vec<Pending> = self.held.take().into_iter().collect();
        while let Ok(p) = self.backlog.try_recv() {
            unsent.push(p);
        }
        unsent.sort_unstable_by_key(|p| p.seq);
        let interrupted = *ctx.interrupt.borrow();
        let record = |unsent: Vec<Pending>| {
            if !unsent.is_empty() {
                let reason = if interrupted {
                    ctx.stopped_reason()
                } else {
                    NeverSentReason::StreamError
                };
                let seqs = unsent.iter().map(|p| p.seq).collect();
                record_unsent(ctx, conn, 0, now_ns(), reason, seqs);
            }
        };
        let next = self.next.load(Relaxed);
        let ended = next == schedule::DONE && unsent.is_empty();
        let Some(handover) = self.handover.take().filter(|_| !ended && !interrupted) else {
            record(unsent);
            return;
        };
        // Not stopped by an end h2 told of: said as such, never silent.
        let gone = self.gone.as_deref().unwrap_or("it stopped taking calls");
        let mut why = gone.to_string();
        if let Some(cause) = self.cause.peek().filter(|c| !gone.contains(c.as_str())) {
            why = format!("{why} (the connection: {cause})");
        }
        // A connection that answered a call served and is replaced; one
        // whose calls are still in flight, none answered, is replaced on
        // trust (a server draining them after its GOAWAY), which its
        // answers bear out or not (see [`Handover::answered`]); the slot's
        // first, before anything was offered to it, is replaced too (with
        // --connections the k-th slot's first message is k/--rate in, and
        // a server closing idle connections closed it before). Any other
        // served nothing: counting a call as served once h2 gave it a
        // stream, before the server had seen it, replaced connections a
        // server closed at once, one per message.
        let in_flight = *self.lanes.open.borrow() > 0;
        let served = self.lanes.answered.load(SeqCst);
        let unused = !self.replacement && next == self.first;
        if served || in_flight || unused {
            // The replacement opens when its first message is due: the
            // oldest carried (due already: at once), or the next.
            let due = unsent
                .first()
                .map(|p| p.scheduled)
                .into_iter()
                .chain((next != schedule::DONE).then(|| self.times.due(next)))
                .min()
                .expect("a message to hand over");
            let carried = Carried::new(unsent);
            let handed = Handover {
                conn,
                why,
                next,
                due,
                trust: (!served && !unused).then(|| Trust {
                    answered: self.lanes.answered.clone(),
                    open: self.lanes.open.subscribe(),
                }),
                carried: carried.clone(),
            };
            if handover.send(handed).is_err() {
                record(carried.take().unwrap_or_default());
            }
        } else {
            record(unsent);
            ctx.replaced.fail(format!(
                "connection {conn}: {why} before a call of it was answered, so {} (a \
                 connection is replaced once the server has answered a call of it, or, having \
                 answered one before, held one to its deadline)",
                cut_short(next)
            ));
        }
    }
}

/// Ends a call's count in `open` when the call ends, however it ends.
struct Counted(Arc<Lanes>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.open.send_modify(|n| *n -= 1);
    }
}

/// One call in flight at a time: in the connection's turn takes the next
/// message and opens its call, then makes the call, until the backlog
/// closes, an interrupt, or the connection takes no more streams (the
/// lane that finds it so stops the schedule: [`Turn::stop`]).
async fn lane(
    ctx: Arc<ClientCtx>,
    turn: Arc<tokio::sync::Mutex<Turn>>,
    lanes: Arc<Lanes>,
    conn: u32,
    payload: Bytes,
    cause: crate::tap::CloseReason,
    kept: Arc<Mutex<Kept>>,
) {
    let mut interrupt = ctx.interrupt.clone();
    let deadline_ns = ctx.opts.deadline().as_nanos() as u64;
    loop {
        // A message not taken when the run stops stays in the backlog,
        // never sent; one taken is in h2's hands at once.
        let (p, due, left, opened, counted) = {
            let mut turn = tokio::select! {
                biased;
                _ = crate::live::flag_set(&mut interrupt) => return,
                t = turn.lock() => t,
            };
            if turn.failed {
                return;
            }
            // The next message whose deadline has not passed in the backlog;
            // those whose deadline passed are `never_sent`, recorded
            // together once the lane stops taking them.
            let mut expired = vec![];
            let taken = loop {
                let next = tokio::select! {
                    biased;
                    _ = crate::live::flag_set(&mut interrupt) => None,
                    p = turn.next(&ctx) => p,
                };
                let Some(p) = next else { break None };
                let due = p.scheduled.saturating_add(deadline_ns);
                match due.checked_sub(now_ns()).filter(|&left| left > 0) {
                    Some(left) => break Some((p, due, left)),
                    None => expired.push(p.seq),
                }
            };
            if !expired.is_empty() {
                record_unsent(&ctx, conn, 0, now_ns(), NeverSentReason::Deadline, expired);
            }
            let Some((p, due, left)) = taken else {
                if turn.failed {
                    turn.stop(&ctx, conn).await;
                }
                return;
            };
            // A handle of its own: h2 refuses a second call on one handle
            // while its first is pending open. Its grpc-timeout is what is
            // left of its deadline.
            let request = grpc_request_to(
                &ctx.target,
                ctx.opts.call_path(),
                std::time::Duration::from_nanos(left),
                &ctx.call.metadata,
            );
            let opened = match turn.sr.clone().send_request(request, false) {
                Ok(opened) => opened,
                Err(e) => {
                    // The connection went (a GOAWAY since the look in
                    // `next`): the call never left the client, and its
                    // message goes with the backlog, to a replacement if
                    // there is one (as gRPC retries such a call at once).
                    turn.refused(&e);
                    turn.held = Some(p);
                    turn.stop(&ctx, conn).await;
                    return;
                }
            };
            lanes.open.send_modify(|n| *n += 1);
            (p, due, left, opened, Counted(lanes.clone()))
        };
        let outcome = rpc(
            ctx.clone(),
            Open::Opened(opened),
            conn,
            Messages::One {
                msg: p,
                payload: payload.clone(),
                due,
                left,
            },
            cause.clone(),
        )
        .await;
        if outcome.answered {
            lanes.answered_once.store(true, SeqCst);
        }
        if outcome.answered || (outcome.held_to_deadline && lanes.answered_once.load(SeqCst)) {
            lanes.answered.store(true, SeqCst);
        }
        drop(counted);
        let unopened = outcome.stream == 0;
        kept.lock().expect("not poisoned").add(outcome);
        if unopened {
            return;
        }
    }
}

/// What a connection's calls leave to print: the first call of each of
/// the first few kinds of failure (status and message) and the latest OK
/// call, each counting the calls that ended so, and the latest call. One
/// outcome per call would grow with the run; the trace has every call's
/// end, and the headline counts them.
#[derive(Default)]
struct Kept {
    failed: Vec<RpcOutcome>,
    /// The latest call that ended OK, counting all that did.
    ok: Option<RpcOutcome>,
    last: Option<RpcOutcome>,
}

/// Two calls that ended alike: the same status and message.
fn alike(a: &RpcOutcome, b: &RpcOutcome) -> bool {
    (a.status, &a.message) == (b.status, &b.message)
}

impl Kept {
    fn add(&mut self, o: RpcOutcome) {
        if o.status == status::OK {
            // The latest OK call, counting every one (whatever message a
            // server put beside its OK).
            let alike = self.ok.as_ref().map_or(1, |kept| kept.alike + 1);
            self.ok = Some(RpcOutcome { alike, ..o.clone() });
        } else {
            if let Some(kept) = self.failed.iter_mut().find(|k| alike(k, &o)) {
                kept.alike += 1;
            } else if self.failed.len() < KEPT_FAILED {
                self.failed.push(o.clone());
            } // else a kind past the first few: the rpcs line counts it
        }
        self.last = Some(o);
    }

    /// The kept calls; the last call too unless it is counted with its
    /// kind, with `alike` 0 then: the calls of its kind were not counted.
    fn into_vec(self) -> Vec<RpcOutcome> {
        let mut out = self.failed;
        out.extend(self.ok);
        if let Some(last) = self.last {
            if !out.iter().any(|k| alike(k, &last)) {
                out.push(RpcOutcome { alike: 0, ..last });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(stream: u32, status: u32, message: &str) -> RpcOutcome {
        RpcOutcome {
            stream,
            status,
            message: message.into(),
            ..RpcOutcome::unopened(1)
        }
    }

    /// A kind of failure is kept once with how many calls ended so (its
    /// "and N like it" counted only the calls kept: 11 for 24), the kinds
    /// past the first few are not kept, and the last call is listed once.
    #[test]
    fn a_kept_failure_counts_the_calls_that_ended_alike() {
        let mut kept = Kept::default();
        let mut stream = 1;
        let mut call = |kept: &mut Kept, status, message: &str| {
            kept.add(ended(stream, status, message));
            stream += 2;
        };
        for _ in 0..24 {
            call(&mut kept, status::DEADLINE_EXCEEDED, "deadline");
        }
        for kind in 0..6 {
            call(&mut kept, status::INTERNAL, &format!("kind {kind}"));
        }
        call(&mut kept, status::DEADLINE_EXCEEDED, "deadline");
        let out = kept.into_vec();
        let summary: Vec<(u32, &str, u64)> = out
            .iter()
            .map(|o| (o.status, o.message.as_str(), o.alike))
            .collect();
        assert_eq!(
            summary,
            [
                (status::DEADLINE_EXCEEDED, "deadline", 25),
                (status::INTERNAL, "kind 0", 1),
                (status::INTERNAL, "kind 1", 1),
                (status::INTERNAL, "kind 2", 1),
            ]
        );
        // The OK calls are counted too, listed as the latest of them
        // (their count read as the connections' number: 3 for 900 calls).
        let mut kept = Kept::default();
        kept.add(ended(1, status::OK, ""));
        kept.add(ended(3, status::INTERNAL, "kind 0"));
        // An OK with a message of the server's counts too.
        kept.add(ended(5, status::OK, "fine"));
        kept.add(ended(7, status::OK, ""));
        let out = kept.into_vec();
        let summary: Vec<(u32, u32, u64)> =
            out.iter().map(|o| (o.stream, o.status, o.alike)).collect();
        assert_eq!(summary, [(3, status::INTERNAL, 1), (7, status::OK, 3)]);
        // A last call of a kind past the first few is listed, not counted.
        let mut kept = Kept::default();
        for kind in 0..6 {
            kept.add(ended(
                1 + 2 * kind,
                status::INTERNAL,
                &format!("kind {kind}"),
            ));
        }
        let out = kept.into_vec();
        let last = out.last().unwrap();
        assert_eq!(
            (out.len(), last.message.as_str(), last.alike),
            (5, "kind 5", 0)
        );
    }
}
