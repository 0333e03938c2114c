//! Unary calls: one message per RPC. A connection's schedule offers its
//! messages (--rate over all connections) into one backlog of
//! --max-pending; --streams lanes each take the next one and call once with
//! it, so at most --streams calls are in flight on a connection. No stream
//! exists when a message is offered, so its `schedule` (and a full
//! backlog's `never_sent`) is the connection's, on stream 0; its `send` is
//! on its call's stream, with the same `seq` (numbered per connection).

use super::*;
use std::sync::Mutex;

/// Outcomes of failed calls kept per connection (the first ones).
pub const KEPT_FAILED: usize = 4;

/// Runs a connection's unary calls until its schedule ends (its backlog
/// empty), an interrupt or a call that could not open its stream (the
/// connection failed); messages left in the backlog are recorded as
/// `never_sent`. Returns the outcomes worth printing (see [`Kept`]).
pub(super) async fn calls(
    ctx: &Arc<ClientCtx>,
    sr: SendRequest<Bytes>,
    conn: u32,
    index: u32,
    start: u64,
    cause: &crate::tap::CloseReason,
) -> anyhow::Result<Vec<RpcOutcome>> {
    let opts = &ctx.opts;
    let (tx, rx) = mpsc::channel::<Pending>(opts.max_pending as usize);
    let payload = payload_bytes(opts.payload.0 as usize);
    let scheduler = schedule::spawn(
        ctx,
        schedule::Slot {
            conn,
            stream: 0,
            k: index,
            start,
            // Each call has its own --deadline; the schedule runs to --duration.
            deadline: u64::MAX,
            rate: opts.rate_of(0),
        },
        tx,
        &payload,
    );
    let backlog = Arc::new(tokio::sync::Mutex::new(rx));
    let kept = Arc::new(Mutex::new(Kept::default()));
    let mut lanes = tokio::task::JoinSet::new();
    for _ in 0..opts.streams {
        lanes.spawn(lane(
            ctx.clone(),
            sr.clone(),
            conn,
            backlog.clone(),
            payload.clone(),
            cause.clone(),
            kept.clone(),
        ));
    }
    drop(sr);
    while let Some(r) = lanes.join_next().await {
        r.context("client call task")?;
    }
    // A schedule still running has lost its connection.
    scheduler.abort();
    let _ = scheduler.await;
    let mut rx = backlog.lock().await;
    rx.close();
    let mut unsent = vec![];
    while let Ok(p) = rx.try_recv() {
        unsent.push(p.seq);
    }
    if !unsent.is_empty() {
        let reason = if !*ctx.interrupt.borrow() {
            NeverSentReason::StreamError
        } else if ctx.live.stalled.load(Relaxed) {
            NeverSentReason::Stalled
        } else {
            NeverSentReason::Interrupted
        };
        record_unsent(ctx, conn, 0, now_ns(), reason, unsent);
    }
    let kept = std::mem::take(&mut *kept.lock().expect("not poisoned"));
    Ok(kept.into_vec())
}

/// One call in flight at a time: takes the next message from the backlog
/// and calls with it, until the backlog closes, an interrupt, or a call
/// that could not open its stream.
async fn lane(
    ctx: Arc<ClientCtx>,
    sr: SendRequest<Bytes>,
    conn: u32,
    backlog: Arc<tokio::sync::Mutex<mpsc::Receiver<Pending>>>,
    payload: Bytes,
    cause: crate::tap::CloseReason,
    kept: Arc<Mutex<Kept>>,
) {
    let mut interrupt = ctx.interrupt.clone();
    loop {
        let next = {
            let mut rx = backlog.lock().await;
            tokio::select! {
                biased;
                _ = crate::live::flag_set(&mut interrupt) => None,
                p = rx.recv() => p,
            }
        };
        let Some(p) = next else { return };
        let Some(outcome) = rpc(
            ctx.clone(),
            sr.clone(),
            conn,
            Messages::One(p, payload.clone()),
            cause.clone(),
        )
        .await
        else {
            return; // stopped before its stream opened
        };
        let unopened = outcome.stream == 0;
        kept.lock().expect("not poisoned").add(outcome);
        if unopened {
            return;
        }
    }
}

/// What a connection's calls leave to print: the first few that did not
/// end OK and the latest. One outcome per call would grow with the run;
/// the trace has every call's end, and the headline counts them.
#[derive(Default)]
struct Kept {
    failed: Vec<RpcOutcome>,
    last: Option<RpcOutcome>,
}

impl Kept {
    fn add(&mut self, o: RpcOutcome) {
        if o.status != status::OK && self.failed.len() < KEPT_FAILED {
            self.failed.push(o.clone());
        }
        self.last = Some(o);
    }

    fn into_vec(self) -> Vec<RpcOutcome> {
        let mut out = self.failed;
        if let Some(last) = self.last {
            let listed = out.last().is_some_and(|o| {
                (o.stream, o.status, &o.message) == (last.stream, last.status, &last.message)
            });
            if !listed {
                out.push(last);
            }
        }
        out
    }
}
