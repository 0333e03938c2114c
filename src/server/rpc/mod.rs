//! One RPC: read the body, cut messages, hand them to the queue policy, call
//! `release_capacity` at the configured point, answer with gRPC status.

use super::queue::{AppQueue, Job, PartialHold};
use super::ServerCtx;
use crate::config::{Framing, QueuePolicy, ReleasePoint};
use crate::grpc::{self, pb, status, Deframer, Framed};
use crate::live::Live;
use crate::trace::schema::{
    BodyDropEv, ChunkEv, CompleteEv, DiscardEv, DiscardReason, Endpoint, EnqueueEv, Kind, KindId,
    MsgEv, ReleaseEv, RpcEndEv, RpcStartEv, SampleEv, StartEv,
};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{FlowControl, RecvStream};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use tokio::time::Instant;

mod release;
pub(super) mod respond;
pub(super) mod sample;

use respond::{check_request, drain_body, send_http_error, send_reply, send_status};

/// Per-RPC context shared by the handler, workers and sampler.
struct Rpc {
    ctx: Arc<ServerCtx>,
    conn: u32,
    stream: u32,
    /// Shared (weakly) with the sampler, which reads its levels.
    queue: Arc<AppQueue>,
    /// When this stream's credit is released (`--release`, per stream).
    release_at: ReleasePoint,
    /// Bytes received from h2 and not yet released.
    unreleased: Arc<AtomicU64>,
    received: AtomicU64,
    received_bytes: AtomicU64,
    discarded: AtomicU64,
    /// When the RPC began (its `rpc_start`), for the sampler.
    opened_ns: u64,
    /// Its place among the open RPCs (`sample` events, a stall's stream
    /// list), taken the first time it waits and left when it ends: a short
    /// request that never waits is never sampled (it cannot be open for a
    /// whole sample period) and skips the list's global lock, its hash map
    /// and two round trips through h2's lock for a FlowControl handle
    /// (2.8 % + 1.9 % of a loaded default server's samples, 16 KiB requests).
    /// (Dropped with the `Rpc`, which only the RPC task and its workers
    /// hold: never while the sampler holds the list's lock, which
    /// `OpenRpcListing`'s drop takes.)
    listing: OnceLock<Option<crate::server::OpenRpcListing>>,
}

impl Rpc {
    /// Lists the RPC among the open ones, once (`flow`: any handle on its
    /// stream). Called where the RPC is about to wait, or waits.
    fn list_on_wait(&self, flow: &FlowControl) {
        self.listing.get_or_init(|| {
            self.ctx
                .list_open_rpc((self.conn, self.stream), || crate::live::OpenRpc {
                    unreleased: self.unreleased.clone(),
                    flow: flow.clone(),
                    opened_ns: self.opened_ns,
                    levels: Some({
                        // Weak, and to the queue alone: the registry must
                        // not keep the RPC alive, nor the sampler drop it.
                        let weak = Arc::downgrade(&self.queue);
                        Arc::new(move || {
                            weak.upgrade().map(|q| {
                                let l = q.snapshot();
                                (l.depth, l.queued_bytes, l.owned_bytes)
                            })
                        })
                    }),
                })
        });
    }

    fn emit(&self, t: u64, id: KindId, build: impl FnOnce() -> Kind) {
        self.ctx
            .rec
            .emit(Endpoint::Server, self.conn, self.stream, t, id, build);
    }

    /// Marks the start of service; releases if the policy says so. Returns
    /// the `start` event's stamp, from which `complete` counts the service
    /// time (so `service_ns` is exactly the two events' distance).
    fn start(
        &self,
        flow: &mut FlowControl,
        seq: u64,
        framed: u32,
        decoded_at: u64,
        worker: u32,
        depth: u32,
    ) -> u64 {
        let t = self.ctx.rec.now();
        self.emit(t, KindId::Start, || {
            Kind::Start(StartEv {
                seq,
                worker,
                wait_ns: t.saturating_sub(decoded_at),
                depth,
            })
        });
        if self.release_point() == ReleasePoint::Start {
            self.release(flow, framed, ReleasePoint::Start, Some(seq));
        }
        t
    }

    fn complete(&self, flow: &mut FlowControl, seq: u64, framed: u32, started: u64, worker: u32) {
        let t = self.ctx.rec.now();
        if !self.queue.end_service(seq, framed) {
            // Discarded while in service (deadline, reset, shutdown): that
            // was its one ending; its bytes go back in the end-of-RPC release.
            return;
        }
        self.emit(t, KindId::Complete, || {
            Kind::Complete(CompleteEv {
                seq,
                worker,
                service_ns: t.saturating_sub(started),
            })
        });
        Live::add(&self.ctx.live.completed, 1);
        if self.release_point() == ReleasePoint::Complete {
            self.release(flow, framed, ReleasePoint::Complete, Some(seq));
        }
    }

    /// Serves one message whose `start` was stamped `started`.
    async fn serve_one(
        &self,
        flow: &mut FlowControl,
        seq: u64,
        framed: u32,
        worker: u32,
        started: u64,
    ) {
        let service = self.ctx.service_time();
        // Zero service: no timer (a zero-length one still waits for the next
        // 1 ms tick) and no yield per message (a trip through the scheduler);
        // the task yields only when its cooperative budget runs out, so a
        // long burst of buffered messages cannot hold a worker thread.
        if service.is_zero() {
            tokio::task::consume_budget().await;
        } else {
            self.list_on_wait(flow);
            tokio::time::sleep(service).await;
        }
        self.complete(flow, seq, framed, started, worker);
    }
}

/// How the receive phase ended.
enum Ended {
    /// `--drop-stream`: the application dropped the body mid-message.
    Dropped,
    /// Owning the next message would pass --max-owned-bytes: the RPC ends
    /// RESOURCE_EXHAUSTED and its messages are discarded with reason `limit`.
    Limit(String),
    /// The client half-closed; everything received was decoded.
    HalfClosed,
    /// The client reset the stream or the connection failed.
    Cancelled(String),
    /// The request is refused with this gRPC status.
    Status(u32, String),
}

/// A cancelled RPC's message with why its connection closed, when that is
/// known: h2 fails the streams of a connection it drops with a text of its
/// own ("stream closed because of a broken pipe") that does not say the
/// server closed it (at `--idle-timeout`, say).
pub(super) fn with_close_reason(
    code: u32,
    message: String,
    closed: &crate::tap::CloseReason,
) -> String {
    match closed.peek() {
        Some(why) if code == status::CANCELLED => format!("{message} (the connection: {why})"),
        _ => message,
    }
}

/// The RPC's final disposition.
enum Outcome {
    Ok,
    Status(u32, String),
    /// Nothing can be sent (the stream is gone).
    Gone(String),
}

pub(super) async fn handle(
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    conn: u32,
    ctx: Arc<ServerCtx>,
    closed: crate::tap::CloseReason,
) {
    let stream = respond.stream_id().as_u32();
    let t0 = ctx.rec.now();
    let path = req.uri().path();
    let deadline = req
        .headers()
        .get(&grpc::TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(grpc::parse_timeout);
    let is_exchange = ctx.cfg.framing == Framing::Grpc && path == grpc::EXCHANGE_PATH;
    ctx.rec
        .emit(Endpoint::Server, conn, stream, t0, KindId::RpcStart, || {
            Kind::RpcStart(RpcStartEv {
                path: path.to_string(),
                deadline_ns: deadline.map(|d| d.as_nanos() as u64),
                framing: ctx.framing_label.clone(),
                release: Some(ctx.cfg.release.for_stream(stream)),
                // Exchange's releases do not withhold (`run` refuses the
                // pair; `serve` takes both).
                withhold_after: ctx
                    .cfg
                    .stall_stream
                    .filter(|s| s.stream == stream && !is_exchange)
                    .map(|s| s.after),
            })
        });
    let end = |code: u32, message: String| {
        let message = with_close_reason(code, message, &closed);
        ctx.rec.emit(
            Endpoint::Server,
            conn,
            stream,
            ctx.rec.now(),
            KindId::RpcEnd,
            || {
                Kind::RpcEnd(RpcEndEv {
                    status: code,
                    message,
                })
            },
        );
        Live::add(&ctx.live.rpcs_done, 1);
    };

    ctx.admission.anchor(&ctx);
    // Requests the probe does not serve get a clear answer, never a hang.
    let grpc_reply = ctx.cfg.framing == Framing::Grpc || respond::is_grpc(&req);
    let paths: &[&str] = &[grpc::INGEST_PATH, grpc::EXCHANGE_PATH];
    if let Err((http_status, grpc_status, msg)) = check_request(&req, ctx.cfg.framing, paths) {
        match grpc_status {
            Some(code) => send_status(&mut respond, code, &msg),
            None => {
                // A plain HTTP client (curl) may still be uploading: read a
                // small body to its end first, so the stream closes cleanly
                // instead of with a reset the client reports as an error.
                Box::pin(drain_body(
                    req.into_body(),
                    1 << 20,
                    std::time::Duration::from_secs(2),
                ))
                .await;
                send_http_error(&mut respond, http_status, &msg)
            }
        }
        end(grpc_status.unwrap_or(status::UNIMPLEMENTED), msg);
        return;
    }

    if is_exchange {
        // Boxed: its state would otherwise swell every Ingest RPC's task.
        Box::pin(super::exchange::handle(
            req,
            respond,
            conn,
            ctx.clone(),
            end,
        ))
        .await;
        return;
    }

    let bounded = match ctx.cfg.queue {
        QueuePolicy::Bounded(k) => Some(k),
        _ => None,
    };
    let rpc = Arc::new(Rpc {
        ctx: ctx.clone(),
        conn,
        stream,
        queue: Arc::new(AppQueue::new(
            bounded,
            ctx.live.clone(),
            ctx.cfg.max_owned_bytes,
        )),
        release_at: ctx.cfg.release.for_stream(stream),
        unreleased: Arc::new(AtomicU64::new(0)),
        received: AtomicU64::new(0),
        received_bytes: AtomicU64::new(0),
        discarded: AtomicU64::new(0),
        opened_ns: t0,
        listing: OnceLock::new(),
    });
    // The RPC task releases through its body's own handle; only a task or
    // the open-RPC list (`Rpc::list_on_wait`) gets a clone (each clone, and
    // its drop, takes h2's connection-wide lock).
    let mut body = Some(req.into_body());
    let deadline_at = deadline.map(|d| Instant::now() + d);
    let sleep_deadline = async {
        match deadline_at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep_deadline);
    let mut shutdown = ctx.shutdown.clone();
    let mut abandon = ctx.abandon.clone();

    // Direct service has no workers (and no set to allocate per RPC).
    let mut workers = (ctx.cfg.queue != QueuePolicy::Direct).then(|| {
        let mut set = tokio::task::JoinSet::new();
        for w in 0..ctx.cfg.workers {
            let flow = body.as_mut().expect("just set").flow_control().clone();
            set.spawn(worker_loop(rpc.clone(), flow, w));
        }
        set
    });

    // Phase 1: receive until half-close, failure, deadline or shutdown.
    // The deadline and shutdown are looked at first on every poll: a body
    // that never makes the task wait (a fast stream of small messages only
    // yields when its cooperative budget is spent, and then a future that
    // spends the same budget cannot see its event) must not hold them back.
    // Shutdown is a flag to read once the task is on the watch's waiter
    // list (`live::poll_stop`), and it joins the list only when it is about
    // to wait.
    let received = {
        let receiving = receive(&rpc, body.as_mut().expect("held until the end"));
        tokio::pin!(receiving);
        let shutdown_wait = tokio::task::unconstrained(crate::live::flag_set(&mut shutdown));
        tokio::pin!(shutdown_wait);
        let mut registered = false;
        let stopping = || {
            Some(Ended::Status(
                status::UNAVAILABLE,
                "server shutting down".into(),
            ))
        };
        std::future::poll_fn(|cx| {
            if sleep_deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            if crate::live::stop_flag(&ctx.shutdown) {
                return Poll::Ready(stopping());
            }
            if let Poll::Ready(e) = receiving.as_mut().poll(cx) {
                return Poll::Ready(Some(e));
            }
            crate::live::poll_stop(&ctx.shutdown, shutdown_wait.as_mut(), &mut registered, cx)
                .map(|()| stopping())
        })
        .await
    };
    let shutting_down = *ctx.shutdown.borrow();
    // The dropped body's flow handle (--drop-stream), for the final release.
    let mut kept_flow: Option<FlowControl> = None;

    let outcome = match received {
        Some(Ended::Dropped) => {
            // --drop-stream: the application bug. The body goes without a
            // release; the RPC hangs until its deadline or shutdown.
            kept_flow = body.as_mut().map(|b| b.flow_control().clone());
            body = None;
            rpc.ctx.rec.emit(
                Endpoint::Server,
                rpc.conn,
                rpc.stream,
                rpc.ctx.rec.now(),
                KindId::BodyDrop,
                || Kind::BodyDrop(BodyDropEv {}),
            );
            if let Some(flow) = &kept_flow {
                rpc.list_on_wait(flow);
            }
            tokio::select! {
                _ = &mut sleep_deadline => {}
                _ = crate::live::flag_set(&mut shutdown) => {}
            }
            rpc.discard(&rpc.queue.take_all(), DiscardReason::RpcError);
            Outcome::Status(
                status::INTERNAL,
                "the application dropped the request body (--drop-stream)".into(),
            )
        }
        None => {
            rpc.discard(&rpc.queue.take_all(), DiscardReason::Deadline);
            Outcome::Status(
                status::DEADLINE_EXCEEDED,
                "deadline exceeded with work still queued".into(),
            )
        }
        Some(Ended::Cancelled(why)) => {
            rpc.discard(&rpc.queue.take_all(), ctx.gone().0);
            Outcome::Gone(why)
        }
        Some(Ended::Limit(msg)) => {
            rpc.discard(&rpc.queue.take_all(), DiscardReason::Limit);
            Outcome::Status(status::RESOURCE_EXHAUSTED, msg)
        }
        Some(Ended::Status(code, msg))
            if !(shutting_down && ctx.cfg.shutdown_drain && code == status::UNAVAILABLE) =>
        {
            let reason = if shutting_down {
                DiscardReason::Shutdown
            } else {
                DiscardReason::RpcError
            };
            rpc.discard(&rpc.queue.take_all(), reason);
            Outcome::Status(code, msg)
        }
        Some(ended) => {
            // Phase 2: drain the queue (half-close, or shutdown with --shutdown-drain).
            rpc.queue.close();
            let mut drain_over = ctx.drain_over.subscribe();
            let _draining = ctx.drain_guard();
            // The client may give up while we drain: watch for its RST_STREAM.
            let mut reset: Option<String> = None;
            // Waiting for workers lists the RPC, as other waits do.
            let join = join_all(workers.as_mut());
            tokio::pin!(join);
            let joined = std::future::poll_fn(|cx| {
                let r = join.as_mut().poll(cx);
                if let (Poll::Pending, Some(b)) = (&r, body.as_mut()) {
                    rpc.list_on_wait(b.flow_control());
                }
                r
            });
            // Biased, the workers first: direct service (no workers) is
            // drained already, and then nothing else is polled (the reset
            // check takes h2's connection-wide lock, the shutdown branch
            // the watch's).
            let drained = tokio::select! {
                biased;
                _ = joined => true,
                _ = &mut sleep_deadline => false,
                _ = crate::live::flag_set(&mut shutdown), if !shutting_down && !ctx.cfg.shutdown_drain => false,
                _ = crate::live::flag_set(&mut abandon) => false,
                _ = crate::live::flag_set(&mut drain_over) => false,
                r = std::future::poll_fn(|cx| respond.poll_reset(cx)) => {
                    reset = Some(match r {
                        Ok(reason) => format!("client reset the stream ({reason:?}) while the server drained"),
                        Err(e) => format!("stream failed while the server drained: {e}"),
                    });
                    false
                }
            };
            if !drained && (*ctx.abandon.borrow() || *ctx.drain_over.borrow()) {
                // First: a reset seen after the drain was cut short is the
                // server's own closing of the connection, not the client's.
                rpc.discard(&rpc.queue.take_all(), DiscardReason::Shutdown);
                Outcome::Status(
                    status::UNAVAILABLE,
                    format!("server shutting down: {}", ctx.drain_cut_why()),
                )
            } else if let Some(why) = reset {
                rpc.discard(&rpc.queue.take_all(), ctx.gone().0);
                Outcome::Gone(why)
            } else if drained {
                match ended {
                    Ended::Status(code, msg) => Outcome::Status(code, msg),
                    _ => Outcome::Ok,
                }
            } else if *ctx.shutdown.borrow() && !ctx.cfg.shutdown_drain {
                rpc.discard(&rpc.queue.take_all(), DiscardReason::Shutdown);
                Outcome::Status(status::UNAVAILABLE, "server shutting down".into())
            } else {
                rpc.discard(&rpc.queue.take_all(), DiscardReason::Deadline);
                Outcome::Status(
                    status::DEADLINE_EXCEEDED,
                    "deadline exceeded while draining".into(),
                )
            }
        }
    };
    if let Some(w) = workers.as_mut() {
        w.abort_all();
    }
    join_all(workers.as_mut()).await;
    // Release what is still unreleased so the connection window is whole
    // again (recorded as `at: end`, apart from the policy's own releases).
    let rest = rpc.unreleased.load(Relaxed) as u32;
    if let Some(flow) = body
        .as_mut()
        .map(|b| b.flow_control())
        .or(kept_flow.as_mut())
    {
        rpc.release(flow, rest, ReleasePoint::End, None);
    }

    match outcome {
        Outcome::Ok => {
            let reply = pb::IngestReply {
                received: rpc.received.load(Relaxed),
                completed: rpc.queue.completed(),
                discarded: rpc.discarded.load(Relaxed),
                received_bytes: rpc.received_bytes.load(Relaxed),
            };
            // The drain phase does not watch for a reset when there was
            // nothing to drain: a reply h2 refuses is how a late one shows.
            match send_reply(&mut respond, &reply, grpc_reply) {
                Ok(()) => end(status::OK, String::new()),
                Err(e) => end(
                    status::CANCELLED,
                    format!(
                        "the reply could not be sent (the client reset the stream or left): {e}"
                    ),
                ),
            }
        }
        Outcome::Status(code, msg) => {
            send_status(&mut respond, code, &msg);
            end(code, msg);
        }
        Outcome::Gone(why) => end(ctx.gone().1, why),
    }
    drop(body);
    // (The RPC leaves the open-RPC list as `rpc` drops: its workers, the
    // only other owners, are gone.)
}

/// Reads the body: chunk → (release on frame) → decode → queue policy.
/// Waits for every worker of the set (none without one).
async fn join_all(workers: Option<&mut tokio::task::JoinSet<()>>) {
    if let Some(w) = workers {
        while w.join_next().await.is_some() {}
    }
}

async fn receive(rpc: &Rpc, body: &mut RecvStream) -> Ended {
    // Waits list the RPC among the open ones (`Rpc::list_on_wait`).
    let cfg = &rpc.ctx.cfg;
    let mut deframer = match cfg.framing {
        Framing::Grpc => Deframer::new(cfg.max_message_size),
        Framing::Raw(n) => Deframer::raw(n),
    };
    let mut partial = PartialHold::new(rpc.ctx.live.clone(), cfg.max_owned_bytes);
    let mut seq = 0u64;
    loop {
        // Bounded: reserve a slot *before* pulling the next message.
        let slot = match &rpc.queue.slots {
            Some(s) => {
                let acquire = s.clone().acquire_owned();
                tokio::pin!(acquire);
                let permit = std::future::poll_fn(|cx| {
                    let r = acquire.as_mut().poll(cx);
                    if r.is_pending() {
                        rpc.list_on_wait(body.flow_control());
                    }
                    r
                })
                .await;
                Some(permit.expect("semaphore never closed"))
            }
            None => None,
        };
        let msg = loop {
            match deframer.next_message() {
                Ok(Some(m)) => break Some(m),
                Ok(None) => {}
                Err(e) => return Ended::Status(e.status(), e.to_string()),
            }
            // What waits for the rest of a message counts against
            // --max-owned-bytes too.
            if let Err(why) = partial.set(deframer.pending()) {
                return Ended::Limit(why);
            }
            let data = std::future::poll_fn(|cx| match body.poll_data(cx) {
                Poll::Pending => {
                    rpc.list_on_wait(body.flow_control());
                    Poll::Pending
                }
                ready => ready,
            });
            match data.await {
                Some(Ok(chunk)) => {
                    let t = rpc.ctx.rec.now();
                    let len = chunk.len() as u32;
                    rpc.emit(t, KindId::Chunk, || Kind::Chunk(ChunkEv { len }));
                    rpc.unreleased.fetch_add(len as u64, Relaxed);
                    rpc.received_bytes.fetch_add(len as u64, Relaxed);
                    Live::add(&rpc.ctx.live.app_bytes, len as u64);
                    if cfg.drop_stream == Some(rpc.stream) {
                        return Ended::Dropped;
                    }
                    if rpc.release_point() == ReleasePoint::Frame {
                        rpc.release(body.flow_control(), len, ReleasePoint::Frame, None);
                    }
                    deframer.push_bytes(chunk);
                    // With a late release point, a message larger than the
                    // stream window can never arrive whole: say so now
                    // rather than stall the RPC until its deadline
                    // (unless --allow-deadlock asked to watch that stall).
                    if rpc.release_point() != ReleasePoint::Frame {
                        if let Some(need) = deframer.next_framed_len() {
                            if need > cfg.stream_window as u64 && !cfg.allow_deadlock {
                                return Ended::Status(
                                    status::RESOURCE_EXHAUSTED,
                                    format!(
                                        "a {need}-byte framed message cannot arrive within the {}-byte stream window \
                                         when credit is released at {}; raise --stream-window or use --release frame",
                                        cfg.stream_window,
                                        rpc.release_point().as_str()
                                    ),
                                );
                            }
                        }
                    }
                }
                Some(Err(e)) => return Ended::Cancelled(e.to_string()),
                None => match deframer.finish() {
                    Some(m) => break Some(m),
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
                },
            }
        };
        let Some(msg) = msg else {
            return Ended::HalfClosed;
        };
        if let Err(e) = accept_message(rpc, body.flow_control(), seq, msg, slot).await {
            return e;
        }
        seq += 1;
    }
}

/// The application takes ownership of a decoded message; past
/// --max-owned-bytes it is discarded (reason `limit`) and the RPC ends.
fn own(rpc: &Rpc, seq: u64, framed: u32) -> Result<(), Ended> {
    rpc.queue.own(seq, framed).map_err(|why| {
        rpc.discard(&[seq], DiscardReason::Limit);
        Ended::Limit(why)
    })
}

/// Decodes one message and hands it to the queue policy.
async fn accept_message(
    rpc: &Rpc,
    flow: &mut FlowControl,
    seq: u64,
    msg: Framed,
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Result<(), Ended> {
    let cfg = &rpc.ctx.cfg;
    let framed = msg.framed_len();
    if msg.compressed {
        return Err(Ended::Status(
            status::UNIMPLEMENTED,
            "compressed message without a negotiated grpc-encoding".into(),
        ));
    }
    if cfg.framing == Framing::Grpc {
        if let Err(e) = <pb::Item as prost::Message>::decode(msg.data()) {
            return Err(Ended::Status(
                status::INVALID_ARGUMENT,
                format!("message {seq} is not a valid h2probe.v1.Item: {e}"),
            ));
        }
    }
    let t = rpc.ctx.rec.now();
    let size = msg.len() as u32;
    rpc.emit(t, KindId::Decode, || {
        Kind::Decode(MsgEv { seq, size, framed })
    });
    rpc.received.fetch_add(1, Relaxed);
    Live::add(&rpc.ctx.live.decoded, 1);
    if rpc.release_point() == ReleasePoint::Decode {
        rpc.release(flow, framed, ReleasePoint::Decode, Some(seq));
    }
    match cfg.queue {
        QueuePolicy::Direct => {
            own(rpc, seq, framed)?;
            rpc.queue.begin_service(seq, framed);
            let started = rpc.start(flow, seq, framed, t, 0, 0);
            rpc.serve_one(flow, seq, framed, 0, started).await;
        }
        QueuePolicy::Unbounded | QueuePolicy::Bounded(_) => {
            if slot.is_none() && rpc.queue.depth() >= cfg.queue_limit as usize {
                rpc.discard(&[seq], DiscardReason::QueueLimit);
                // Its bytes are not owned by anyone: give the credit back.
                if matches!(
                    rpc.release_point(),
                    ReleasePoint::Start | ReleasePoint::Complete
                ) {
                    rpc.release(flow, framed, rpc.release_point(), Some(seq));
                }
                return Ok(());
            }
            own(rpc, seq, framed)?;
            // Stamped before the push: a worker may pop it at once, and its
            // `start` must not precede this `enqueue` on the clock.
            let t_enqueue = rpc.ctx.rec.now();
            let levels = rpc.queue.push(Job {
                seq,
                framed,
                decoded_at: t,
                body: msg.into_parts(),
                slot,
            });
            rpc.ctx.live.depth.fetch_add(1, Relaxed);
            rpc.emit(t_enqueue, KindId::Enqueue, || {
                Kind::Enqueue(EnqueueEv {
                    seq,
                    depth: levels.depth,
                    queued_bytes: levels.queued_bytes,
                })
            });
        }
    }
    Ok(())
}

async fn worker_loop(rpc: Arc<Rpc>, mut flow: FlowControl, worker: u32) {
    while let Some((job, levels)) = rpc.queue.pop().await {
        rpc.ctx.live.depth.fetch_sub(1, Relaxed);
        drop(job.slot); // the bounded queue's slot is free once a worker holds the job
        let started = rpc.start(
            &mut flow,
            job.seq,
            job.framed,
            job.decoded_at,
            worker,
            levels.depth,
        );
        rpc.serve_one(&mut flow, job.seq, job.framed, worker, started)
            .await;
    }
}
