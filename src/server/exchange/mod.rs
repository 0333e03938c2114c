//! `Exchange` (Part 3): a bidirectional stream of attempts, each answered
//! with one terminal outcome (completed, rejected, dropped, expired) as soon
//! as it is decided. The admission boundary (`--admission K`) is shared by
//! every RPC of the server; `--when-full` says what happens beyond it.
//!
//! Every decoded attempt ends exactly once in the trace: `complete`, or
//! `discard` with reason rejected / dropped / expired / cancelled /
//! shutdown. The release point (`--release`) applies as for `Ingest`; an
//! attempt that is never started is released when it is decided.

mod admission;

pub use admission::Admission;

use super::rpc::respond::{grpc_headers, status_trailers};
use super::ServerCtx;
use crate::config::ReleasePoint;
use crate::grpc::{self, pb, status, Deframer};
use crate::live::Live;
use crate::overload::WhenFull;
use crate::trace::clock::{now_ns, to_instant};
use crate::trace::schema::{
    AdmissionEv, ChunkEv, CompleteEv, Decision, DiscardEv, DiscardReason, Endpoint, EnqueueEv,
    Kind, KindId, MsgEv, ReleaseEv, StartEv,
};
use admission::Job;
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{FlowControl, RecvStream, SendStream};
use http::Request;
use std::sync::atomic::{
    AtomicU64,
    Ordering::{AcqRel, Acquire, Relaxed},
};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// One Exchange RPC, shared by its handler and the workers serving its jobs.
pub(super) struct ExRpc {
    ctx: Arc<ServerCtx>,
    conn: u32,
    stream: u32,
    flow: Mutex<FlowControl>,
    send: Mutex<SendStream<Bytes>>,
    unreleased: Arc<AtomicU64>,
    /// When this stream's credit is released (`--release`, per stream).
    release_at: ReleasePoint,
    /// Attempts admitted whose terminal event is not recorded yet (queued,
    /// in a worker's hands, or in service). The handler waits for none
    /// before the RPC's end.
    open: AtomicU64,
    idle: Notify,
    /// Whether the RPC has ended before its jobs, and which are in service.
    jobs: Mutex<JobsState>,
    /// Attempts discarded without an outcome because the RPC ended first.
    unanswered: AtomicU64,
    /// Outcomes answered since h2 last had room to send them (see
    /// [`ExRpc::answer`]): what h2 holds beyond the client's window.
    unsent_outcomes: AtomicU64,
}

/// An RPC's jobs as its handler and the workers both see them. One lock:
/// a worker's start of an attempt and the handler's cut (see [`ExRpc::cut`])
/// each happen whole, one before the other.
#[derive(Default)]
struct JobsState {
    /// Set when the RPC ends before its jobs: how they are discarded.
    ended: Option<DiscardReason>,
    /// The seqs of this RPC's attempts a worker is serving: each entry is
    /// its attempt's ownership token (whoever removes it ends the attempt).
    in_service: Vec<u64>,
}

/// Send room kept requested beyond the outcomes h2 holds, so that
/// `capacity() == 0` means the client's window, not the request, is full.
const OUTCOME_SLACK: usize = 16 * 1024;
/// Outcomes held beyond the client's window before its attempts are read
/// no further (until it reads): h2 buffers every reply it is given, and a
/// client that sends attempts and never reads their outcomes grew a server
/// to 5.4 GB. Counted in outcomes, not their bytes: each held costs ≈ 1 KB
/// of h2's frame and buffer, not its ≈ 18 (a bound of 256 KiB of them held
/// ≈ 17 MB a stream, 400 MB for a connection of 40).
const MAX_UNSENT_OUTCOMES: u64 = 256;

impl ExRpc {
    fn emit(&self, t: u64, id: KindId, build: impl FnOnce() -> Kind) {
        self.ctx
            .rec
            .emit(Endpoint::Server, self.conn, self.stream, t, id, build);
    }

    fn ended_reason(&self) -> Option<DiscardReason> {
        self.jobs().ended
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, JobsState> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A worker takes `job` into service and records its start (and its
    /// release at start), unless the RPC has ended: then the reason its
    /// jobs are discarded with.
    fn begin_service(
        &self,
        job: &Job,
        worker: u32,
        depth: u32,
        started: u64,
    ) -> Result<(), DiscardReason> {
        let mut jobs = self.jobs();
        if let Some(reason) = jobs.ended {
            return Err(reason);
        }
        let seq = job.seq;
        jobs.in_service.push(seq);
        self.emit(started, KindId::Start, || {
            Kind::Start(StartEv {
                seq,
                worker,
                wait_ns: started.saturating_sub(job.decoded_at),
                depth,
            })
        });
        if self.release_at == ReleasePoint::Start {
            self.release(job.framed, ReleasePoint::Start, Some(seq));
        }
        Ok(())
    }

    /// Ends service of `seq`. False when the handler discarded it meanwhile
    /// (its drain was cut short): the worker must then not complete it, so
    /// every attempt ends exactly once.
    fn end_service(&self, seq: u64) -> bool {
        let mut jobs = self.jobs();
        let Some(i) = jobs.in_service.iter().position(|s| *s == seq) else {
            return false;
        };
        jobs.in_service.swap_remove(i);
        true
    }

    /// Ends the RPC before its jobs: workers discard what they take from
    /// now on with `reason` (what is in service is still served).
    fn end_jobs(&self, reason: DiscardReason) {
        self.jobs().ended = Some(reason);
    }

    /// Cuts the RPC's jobs short: as [`ExRpc::end_jobs`], and the attempts
    /// in service are discarded now, their ownership taken (their workers
    /// find [`ExRpc::end_service`] refused and only return the slot).
    fn cut(&self, reason: DiscardReason) {
        let mut jobs = self.jobs();
        jobs.ended = Some(reason);
        let t = now_ns();
        let cut = std::mem::take(&mut jobs.in_service);
        for &seq in &cut {
            self.discard(seq, reason, t);
        }
        drop(jobs);
        let n = cut.len() as u64;
        self.unanswered.fetch_add(n, Relaxed);
        self.open.fetch_sub(n, AcqRel);
        self.idle.notify_waiters();
    }

    fn release(&self, bytes: u32, at: ReleasePoint, seq: Option<u64>) {
        if bytes == 0 {
            return;
        }
        let t = now_ns();
        let r = self
            .flow
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .release_capacity(bytes as usize);
        match r {
            Ok(()) => {
                self.unreleased.fetch_sub(bytes as u64, Relaxed);
                Live::add(&self.ctx.live.released, bytes as u64);
                self.emit(t, KindId::Release, || {
                    Kind::Release(ReleaseEv { bytes, at, seq })
                });
            }
            Err(e) => tracing::debug!("release_capacity({bytes}) on stream {}: {e}", self.stream),
        }
    }

    /// An attempt that will never be started gives its credit back now
    /// when the release point is one it will never reach.
    fn release_unstarted(&self, framed: u32, seq: u64) {
        let at = self.release_at;
        if matches!(at, ReleasePoint::Start | ReleasePoint::Complete) {
            self.release(framed, at, Some(seq));
        }
    }

    /// Writes one outcome on the response stream. h2 buffers what the
    /// client's window cannot take yet; the outcomes answered while h2 has
    /// no room are counted, and [`receive`] reads no further attempt while they
    /// pass [`MAX_UNSENT_OUTCOMES`] (every outcome answers an attempt read).
    fn answer(&self, id: u64, attempt: u32, result: pb::outcome::Result, at: u64) {
        let msg = pb::Outcome {
            id,
            attempt,
            result: result as i32,
            at_ns: at,
        };
        let bytes = grpc::encode(&msg);
        let mut send = self.send.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = send.send_data(bytes, false) {
            tracing::debug!("outcome for {id}/{attempt}: {e}");
            return;
        }
        if self.outcomes_stuck(&mut send) {
            self.unsent_outcomes.fetch_add(1, Relaxed);
        }
    }

    /// Whether h2 holds outcomes it has no room to send (the client's
    /// window is full); clears the count when it has room again.
    fn outcomes_stuck(&self, send: &mut SendStream<Bytes>) -> bool {
        // requested = held + slack: capacity is then 0 only when the
        // window, not the request, stops h2 from taking more.
        send.reserve_capacity(OUTCOME_SLACK);
        let stuck = send.capacity() == 0;
        if !stuck {
            self.unsent_outcomes.store(0, Relaxed);
        }
        stuck
    }

    /// Waits while more than [`MAX_UNSENT_OUTCOMES`] wait for the client's
    /// window (it reads none of its outcomes), checking every 10 ms; `Err`
    /// (why) when the client resets the stream or the connection is gone
    /// meanwhile (their window never opens: the RPC waited until shutdown,
    /// holding every outcome, and was recorded as the server ending it).
    async fn wait_for_outcomes_read(&self) -> Result<(), String> {
        while self.unsent_outcomes.load(Relaxed) > MAX_UNSENT_OUTCOMES {
            let reset = std::future::poll_fn(|cx| {
                self.send
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .poll_reset(cx)
            });
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
                r = reset => return Err(match r {
                    Ok(reason) => format!("client reset the stream ({reason:?})"),
                    Err(e) => e.to_string(),
                }),
            }
            let mut send = self.send.lock().unwrap_or_else(|p| p.into_inner());
            self.outcomes_stuck(&mut send);
        }
        Ok(())
    }

    fn discard(&self, seq: u64, reason: DiscardReason, t: u64) {
        self.emit(t, KindId::Discard, || {
            Kind::Discard(DiscardEv { seq, reason })
        });
        Live::add(&self.ctx.live.discarded, 1);
    }

    /// A job's end: its slot is returned after its terminal event.
    fn job_done(&self, job: Job) {
        drop(job.permit);
        self.open.fetch_sub(1, AcqRel);
        self.idle.notify_waiters();
    }

    /// Discards this RPC's jobs still in the admission queue.
    fn discard_queued(self: &Arc<Self>, reason: DiscardReason) {
        for job in self.ctx.admission.take_rpc(self) {
            self.ctx.live.depth.fetch_sub(1, Relaxed);
            self.discard_job(job, reason);
        }
    }

    /// An attempt its RPC's end leaves unanswered.
    fn discard_job(&self, job: Job, reason: DiscardReason) {
        self.discard(job.seq, reason, now_ns());
        self.unanswered.fetch_add(1, Relaxed);
        self.release_unstarted(job.framed, job.seq);
        self.job_done(job);
    }

    fn expire(&self, job: Job, now: u64) {
        self.discard(job.seq, DiscardReason::Expired, now);
        self.answer(job.id, job.attempt, pb::outcome::Result::Expired, now);
        self.release_unstarted(job.framed, job.seq);
        self.job_done(job);
    }

    async fn serve(&self, job: Job, worker: u32, depth: u32, started: u64) {
        let seq = job.seq;
        if let Err(reason) = self.begin_service(&job, worker, depth, started) {
            self.discard_job(job, reason);
            return;
        }
        let service = self
            .ctx
            .admission
            .service_time(&self.ctx.cfg.service_schedule, started);
        if service.is_zero() {
            // Yields only when the task's cooperative budget runs out.
            tokio::task::consume_budget().await;
        } else {
            tokio::time::sleep(service).await;
        }
        if !self.end_service(seq) {
            // Discarded by the cut, which counted it out of `open`: only
            // its slot is returned, after that terminal event.
            drop(job.permit);
            return;
        }
        let t = now_ns();
        self.emit(t, KindId::Complete, || {
            Kind::Complete(CompleteEv {
                seq,
                worker,
                service_ns: t.saturating_sub(started),
            })
        });
        Live::add(&self.ctx.live.completed, 1);
        self.answer(job.id, job.attempt, pb::outcome::Result::Completed, t);
        if self.release_at == ReleasePoint::Complete {
            self.release(job.framed, ReleasePoint::Complete, Some(seq));
        }
        self.job_done(job);
    }
}

/// How reading the attempts ended.
enum Ended {
    HalfClosed,
    Cancelled(String),
    Shutdown,
    Status(u32, String),
}

/// Serves one Exchange RPC to its end. `end` records the RPC's status.
pub(super) async fn handle(
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    conn: u32,
    ctx: Arc<ServerCtx>,
    end: impl Fn(u32, String),
) {
    let stream = respond.stream_id().as_u32();
    let send = match respond.send_response(grpc_headers(), false) {
        Ok(s) => s,
        Err(e) => {
            end(status::CANCELLED, format!("could not answer: {e}"));
            return;
        }
    };
    let mut body = req.into_body();
    let flow = body.flow_control().clone();
    ctx.admission.ensure_workers(&ctx);
    let rpc = Arc::new(ExRpc {
        ctx: ctx.clone(),
        conn,
        stream,
        flow: Mutex::new(flow.clone()),
        send: Mutex::new(send),
        unreleased: Arc::new(AtomicU64::new(0)),
        release_at: ctx.cfg.release.for_stream(stream),
        open: AtomicU64::new(0),
        unanswered: AtomicU64::new(0),
        idle: Notify::new(),
        jobs: Mutex::new(JobsState::default()),
        unsent_outcomes: AtomicU64::new(0),
    });
    let listed = ctx.list_open_rpc((conn, stream), || crate::live::OpenRpc {
        unreleased: rpc.unreleased.clone(),
        flow,
        opened_ns: crate::trace::clock::now_ns(),
        // Exchange RPCs write no `sample` events (the admission
        // boundary, not a queue per RPC, holds their work).
        levels: None,
    });

    let ended = receive(&rpc, &mut body).await;
    let (reason, outcome) = match ended {
        Ended::HalfClosed => (None, Ok(())),
        Ended::Cancelled(why) => (
            Some(DiscardReason::Cancelled),
            Err((status::CANCELLED, why)),
        ),
        Ended::Shutdown => (
            Some(DiscardReason::Shutdown),
            Err((status::UNAVAILABLE, "server shutting down".to_string())),
        ),
        Ended::Status(code, msg) => (Some(DiscardReason::RpcError), Err((code, msg))),
    };
    if let Some(reason) = reason {
        rpc.end_jobs(reason);
        rpc.discard_queued(reason);
    }
    // Wait for the admitted attempts still queued or in service (a
    // half-closed client still reads their outcomes), until the server's
    // shutdown cuts the drain (--drain-timeout, or an abandon).
    let mut abandon = ctx.abandon.clone();
    let mut drain_over = ctx.drain_over.subscribe();
    let cut_signal = async {
        tokio::select! {
            _ = crate::live::flag_set(&mut abandon) => {}
            _ = crate::live::flag_set(&mut drain_over) => {}
        }
    };
    tokio::pin!(cut_signal);
    let _draining = ctx.drain_guard();
    let mut cut = false;
    loop {
        let idle = rpc.idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        if rpc.open.load(Acquire) == 0 {
            break;
        }
        tokio::select! {
            _ = idle => {}
            _ = &mut cut_signal, if !cut => {
                // What is queued or in service ends here, discarded and
                // unanswered. What is left is in a worker's hands between
                // the queue and service, or between its completion and its
                // end: steps with no wait in them, which end before the
                // RPC does (and before its `end` release, which a
                // worker's own release would otherwise race).
                cut = true;
                rpc.cut(DiscardReason::Shutdown);
                rpc.discard_queued(DiscardReason::Shutdown);
            }
        }
    }
    let left = rpc.unanswered.load(Relaxed);
    let outcome = match outcome {
        Ok(()) if cut && left > 0 => Err((
            status::UNAVAILABLE,
            format!(
                "server shutting down: {left} {} unanswered when {}",
                if left == 1 { "attempt" } else { "attempts" },
                ctx.drain_cut_why()
            ),
        )),
        other => other,
    };
    let rest = rpc.unreleased.load(Relaxed) as u32;
    rpc.release(rest, ReleasePoint::End, None);
    {
        let mut send = rpc.send.lock().unwrap_or_else(|p| p.into_inner());
        match &outcome {
            Ok(()) => {
                let _ = send.send_trailers(status_trailers(status::OK, ""));
            }
            Err((code, msg)) if *code != status::CANCELLED => {
                let _ = send.send_trailers(status_trailers(*code, msg));
            }
            Err(_) => {}
        }
    }
    match outcome {
        Ok(()) => end(status::OK, String::new()),
        Err((code, msg)) => end(code, msg),
    }
    drop(body);
    drop(listed);
}

/// Reads attempts and decides each at the admission boundary.
async fn receive(rpc: &Arc<ExRpc>, body: &mut RecvStream) -> Ended {
    let ctx = &rpc.ctx;
    let cfg = &ctx.cfg;
    let mut deframer = Deframer::new(cfg.max_message_size);
    let mut partial = super::queue::PartialHold::new(ctx.live.clone(), cfg.max_owned_bytes);
    let mut shutdown = ctx.shutdown.clone();
    // One wait for the whole RPC, not one per chunk (each joins and leaves
    // the watch's waiter list, a lock every RPC shares).
    let mut watch = ctx.shutdown.clone();
    let shutdown_flagged = crate::live::flag_set(&mut watch);
    tokio::pin!(shutdown_flagged);
    let mut seq = 0u64;
    loop {
        let msg = loop {
            match deframer.next_message() {
                Ok(Some(m)) => break Some(m),
                Ok(None) => {}
                Err(e) => return Ended::Status(e.status(), e.to_string()),
            }
            // Shutdown first: a body that is always ready must not hide it
            // (an attempt admitted after the workers left is never served).
            // A client that reads none of its outcomes gets no further: its
            // attempts wait in its own window. What waits for the rest of an
            // attempt counts against --max-owned-bytes.
            if let Err(why) = partial.set(deframer.pending()) {
                return Ended::Status(status::RESOURCE_EXHAUSTED, why);
            }
            let next = tokio::select! {
                biased;
                _ = &mut shutdown_flagged => return Ended::Shutdown,
                d = async {
                    rpc.wait_for_outcomes_read().await?;
                    Ok(body.data().await)
                } => match d {
                    Ok(d) => d,
                    Err(why) => return Ended::Cancelled(why),
                },
            };
            match next {
                Some(Ok(chunk)) => {
                    let len = chunk.len() as u32;
                    rpc.emit(now_ns(), KindId::Chunk, || Kind::Chunk(ChunkEv { len }));
                    rpc.unreleased.fetch_add(len as u64, Relaxed);
                    Live::add(&ctx.live.app_bytes, len as u64);
                    if rpc.release_at == ReleasePoint::Frame {
                        rpc.release(len, ReleasePoint::Frame, None);
                    }
                    deframer.push(&chunk);
                    if rpc.release_at != ReleasePoint::Frame {
                        if let Some(need) = deframer.next_framed_len() {
                            if need > cfg.stream_window as u64 && !cfg.allow_deadlock {
                                return Ended::Status(
                                    status::RESOURCE_EXHAUSTED,
                                    format!("a {need}-byte framed message cannot arrive within the {}-byte stream window when credit is released at {}; raise --stream-window or use --release frame", cfg.stream_window, rpc.release_at.as_str()),
                                );
                            }
                        }
                    }
                }
                Some(Err(e)) => return Ended::Cancelled(e.to_string()),
                None if deframer.pending() > 0 => {
                    return Ended::Status(
                        status::INTERNAL,
                        format!(
                            "body ended inside a message ({} bytes pending)",
                            deframer.pending()
                        ),
                    )
                }
                None => break None,
            }
        };
        let Some(msg) = msg else {
            return Ended::HalfClosed;
        };
        if msg.compressed {
            return Ended::Status(
                status::UNIMPLEMENTED,
                "compressed message without a negotiated grpc-encoding".into(),
            );
        }
        let framed = msg.framed_len();
        let a = match <pb::Attempt as prost::Message>::decode(msg.data()) {
            Ok(a) => a,
            Err(e) => {
                return Ended::Status(
                    status::INVALID_ARGUMENT,
                    format!("message {seq} is not a valid h2probe.v1.Attempt: {e}"),
                )
            }
        };
        let decoded_at = now_ns();
        let size = msg.len() as u32;
        rpc.emit(decoded_at, KindId::Decode, || {
            Kind::Decode(MsgEv { seq, size, framed })
        });
        Live::add(&ctx.live.decoded, 1);
        if rpc.release_at == ReleasePoint::Decode {
            rpc.release(framed, ReleasePoint::Decode, Some(seq));
        }
        // Whole, it is still held until it is decided: under WAIT, for as
        // long as it waits for a slot (one a stream: the stream is read no
        // further meanwhile). It counts against --max-owned-bytes with what
        // waits to be whole, as it did while it was not (the next message's
        // own set, or the wait for more body, brings it back down).
        if let Err(why) = partial.set(deframer.pending() + u64::from(framed)) {
            return Ended::Status(status::RESOURCE_EXHAUSTED, why);
        }
        if let Err(e) = decide(rpc, seq, a, framed, decoded_at, msg.data(), &mut shutdown).await {
            return e;
        }
        seq += 1;
    }
}

/// The admission decision for one decoded attempt.
async fn decide(
    rpc: &Arc<ExRpc>,
    seq: u64,
    a: pb::Attempt,
    framed: u32,
    decoded_at: u64,
    body: Bytes,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> Result<(), Ended> {
    let ctx = &rpc.ctx;
    let k = ctx.cfg.admission;
    let slots = ctx.admission.slots(k);
    let (id, attempt, deadline) = (a.id, a.attempt, a.deadline_ns);
    let record = |decision: Decision, t: u64, wait_ns: u64| {
        let in_use = ctx.admission.in_use(k);
        rpc.emit(t, KindId::Admission, || {
            Kind::Admission(AdmissionEv {
                seq,
                id,
                attempt,
                deadline,
                decision,
                in_use,
                slots: k,
                wait_ns,
                framed,
            })
        });
    };
    // Refused without a slot: recorded, answered, its credit returned.
    let refuse = |decision: Decision, t: u64, wait_ns: u64| {
        let (reason, result) = match decision {
            Decision::Rejected => (DiscardReason::Rejected, pb::outcome::Result::Rejected),
            Decision::Dropped => (DiscardReason::Dropped, pb::outcome::Result::Dropped),
            _ => (DiscardReason::Expired, pb::outcome::Result::Expired),
        };
        record(decision, t, wait_ns);
        rpc.discard(seq, reason, t);
        rpc.answer(id, attempt, result, t);
        rpc.release_unstarted(framed, seq);
    };
    let now = now_ns();
    if deadline != 0 && now >= deadline {
        refuse(Decision::Expired, now, 0);
        return Ok(());
    }
    let mut waited = false;
    let permit = match slots.clone().try_acquire_owned() {
        Ok(p) => p,
        Err(_) => match ctx.cfg.when_full {
            WhenFull::Reject => {
                refuse(Decision::Rejected, now, 0);
                return Ok(());
            }
            WhenFull::Drop => {
                refuse(Decision::Dropped, now, 0);
                return Ok(());
            }
            WhenFull::Wait => {
                // Held for a slot, at most until its deadline; the stream
                // is not read meanwhile. Cancelled by a reset or shutdown.
                let until = async {
                    match deadline {
                        0 => std::future::pending().await,
                        d => tokio::time::sleep_until(to_instant(d)).await,
                    }
                };
                let reset = std::future::poll_fn(|cx| {
                    rpc.send
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .poll_reset(cx)
                });
                waited = true;
                tokio::select! {
                    p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                    _ = until => {
                        let t = now_ns();
                        refuse(Decision::Expired, t, t - now);
                        return Ok(());
                    }
                    r = reset => {
                        rpc.discard(seq, DiscardReason::Cancelled, now_ns());
                        return Err(Ended::Cancelled(match r {
                            Ok(reason) => format!("client reset the stream ({reason:?})"),
                            Err(e) => e.to_string(),
                        }));
                    }
                    _ = crate::live::flag_set(shutdown) => {
                        rpc.discard(seq, DiscardReason::Shutdown, now_ns());
                        return Err(Ended::Shutdown);
                    }
                }
            }
        },
    };
    let t = now_ns();
    let wait_ns = if waited { t - now } else { 0 };
    // A slot freed just as the deadline passed: still expired, never queued.
    if deadline != 0 && t >= deadline {
        drop(permit);
        refuse(Decision::Expired, t, wait_ns);
        return Ok(());
    }
    rpc.open.fetch_add(1, Relaxed);
    record(Decision::Admitted, t, wait_ns);
    ctx.live.depth.fetch_add(1, Relaxed);
    let t_enqueue = now_ns();
    let (depth, queued_bytes) = ctx.admission.push(Job {
        rpc: rpc.clone(),
        seq,
        id,
        attempt,
        deadline,
        framed,
        decoded_at,
        body,
        permit,
    });
    rpc.emit(t_enqueue, KindId::Enqueue, || {
        Kind::Enqueue(EnqueueEv {
            seq,
            depth,
            queued_bytes,
        })
    });
    Ok(())
}
