//! `--stack hyper`: a reference "stock stack" server on hyper 1.x, to prove
//! that the probe's own `--release frame --queue unbounded` reproduces what
//! a default tonic service does (Part 1 of the article).
//!
//! It is written the way tonic drives hyper: the handler polls the request
//! body frame by frame (`Body::poll_frame`, as tonic's `Streaming` does),
//! cuts gRPC messages with the probe's [`Deframer`], pushes each decoded
//! message into an unbounded queue served by `--workers` workers that take
//! `--service-time` each (a tokio timer, like the h2 server's workers), and
//! answers with the same `IngestReply` and `grpc-status` trailers once the
//! queue has drained. The connection goes through the same socket tap as the
//! h2 server, so the trace has every frame; hyper gets the validated windows
//! and max frame size, with its adaptive window (BDP probing) off.
//!
//! We never call `release_capacity`: hyper does, inside `poll_frame`, for
//! each DATA frame it hands to the application. That is why this stack
//! accepts only `--release frame` and `--queue unbounded` ([`check`]).
//!
//! Limits, compared with the h2 server: gRPC framing only; no `sample`
//! events (hyper hides h2's `FlowControl`, whose capacities they report;
//! queue levels are in `enqueue` and `start`); and the stream id is inferred,
//! see [`StreamIds`].

use super::queue::{AppQueue, Job};
use super::rpc::respond::{check_request, grpc_headers, status_trailers};
use super::ServerCtx;
use crate::config::{Framing, QueuePolicy, ReleasePoint, ReleaseSpec};
use crate::grpc::{self, pb, status, Deframer, Framed};
use crate::live::Live;
use crate::tap::Tap;
use crate::trace::clock::now_ns;
use crate::trace::schema::{
    ChunkEv, CompleteEv, DiscardEv, DiscardReason, Endpoint, EnqueueEv, Kind, KindId, MsgEv,
    ReleaseEv, RpcEndEv, RpcStartEv, StartEv,
};
use anyhow::Context as _;
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use hyper::body::{Body, Frame, Incoming};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Refuses what hyper does not let us choose, before anything starts.
pub(super) fn check(
    release: &ReleaseSpec,
    queue: QueuePolicy,
    framing: Framing,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        release.is_uniform(ReleasePoint::Frame),
        "--stack hyper works only with --release frame: hyper decides when credit is released \
         (as each body frame is polled), got --release {release}"
    );
    anyhow::ensure!(
        queue == QueuePolicy::Unbounded,
        "--stack hyper works only with --queue unbounded: it is the stock stack of Part 1, where hyper \
         decides when credit is released and the handler enqueues every message, got --queue {queue}"
    );
    anyhow::ensure!(
        framing == Framing::Grpc,
        "--stack hyper serves gRPC only (it stands for a tonic service), got --framing {framing}"
    );
    Ok(())
}

/// Serves one tapped connection with hyper until it ends, then waits for its
/// RPC tasks (as the h2 server does).
///
/// `--idle-timeout` applies as on the h2 server: a connection through which
/// no byte went either way for that long gets hyper's GOAWAY and a second
/// to go, then is closed. (`--handshake-timeout` does not: hyper's
/// handshake is its own, and it writes its SETTINGS at once, so a silent
/// peer is an idle one.)
pub(super) async fn connection<T>(
    tap: Tap<T>,
    conn: u32,
    ctx: Arc<ServerCtx>,
    close_reason: crate::tap::CloseReason,
) -> anyhow::Result<()>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let cfg = &ctx.cfg;
    let activity = tap.activity();
    let tasks = Tasks::default();
    let mut builder = hyper::server::conn::http2::Builder::new(tasks.clone());
    // adaptive_window(false) first: the window setters also turn it off, and
    // turning it on would reset the windows to 65,535.
    builder
        .adaptive_window(false)
        .initial_stream_window_size(cfg.stream_window)
        .initial_connection_window_size(cfg.conn_window)
        .max_frame_size(cfg.max_frame_size)
        .max_concurrent_streams(cfg.max_concurrent_streams);
    let ids = StreamIds::default();
    let service = {
        let ctx = ctx.clone();
        let closed = close_reason.clone();
        hyper::service::service_fn(move |req: Request<Incoming>| {
            handle(req, conn, ids.next(), ctx.clone(), closed.clone())
        })
    };
    // Boxed, so that it can be dropped before the RPC tasks are waited for.
    let mut served = Box::pin(builder.serve_connection(hyper_util::rt::TokioIo::new(tap), service));
    let mut shutdown = ctx.shutdown.clone();
    let mut shutting_down = false;
    let mut idle = super::IdleWatch::new(activity, cfg.idle_timeout);
    let mut aged = super::Aging::new(cfg.max_connection_age);
    let result = loop {
        tokio::select! {
            r = served.as_mut() => break r,
            _ = crate::live::flag_set(&mut shutdown), if !shutting_down => {
                shutting_down = true;
                served.as_mut().graceful_shutdown();
            }
            step = idle.next() => match step {
                super::IdleStep::GoAway(why) => {
                    close_reason.set(why);
                    served.as_mut().graceful_shutdown();
                }
                // The peer did not go: close (the RPCs' streams fail).
                super::IdleStep::Close => break Ok(()),
            },
            // Not during a shutdown's drain: its GOAWAY is the shutdown's.
            why = aged.due(), if !shutting_down => {
                close_reason.set(why);
                served.as_mut().graceful_shutdown();
            }
        }
    };
    // Dropped before its RPC tasks are waited for (they may wait for a
    // body that will not come).
    drop(served);
    tasks.join_all().await;
    result.with_context(|| format!("HTTP/2 connection {conn} (hyper)"))
}

/// hyper hides the HTTP/2 stream id, and the trace needs it to tie
/// application events to the frames of their stream. hyper calls the service
/// once per accepted stream, in the order h2 accepts them, which is the order
/// of their ids; so the n-th request on a connection (from 0) is given stream
/// `2n + 1`.
///
/// That holds when the client numbers its streams 1, 3, 5, … without gaps
/// (h2, tonic, grpc-go, grpcio and this probe's client do; RFC 9113 §5.1.1
/// only requires increasing ids) and when no stream is refused before it
/// reaches the service (a stream beyond SETTINGS_MAX_CONCURRENT_STREAMS gets
/// RST_STREAM REFUSED_STREAM from h2 and never reaches hyper). After a gap
/// the ids are wrong: the analysis' per-stream `bytes` check (client tap =
/// server tap = application, per stream) then fails, so a wrong guess does
/// not go unnoticed.
#[derive(Default)]
struct StreamIds(AtomicU32);

impl StreamIds {
    fn next(&self) -> u32 {
        2 * self.0.fetch_add(1, Relaxed) + 1
    }
}

/// The executor hyper spawns each stream's task on: tokio, with the tasks
/// kept per connection so that the connection can wait for them.
#[derive(Clone, Default)]
struct Tasks(Arc<Mutex<JoinSet<()>>>);

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, JoinSet<()>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn join_all(&self) {
        let mut set = std::mem::take(&mut *self.lock());
        while set.join_next().await.is_some() {}
    }
}

impl<F> hyper::rt::Executor<F> for Tasks
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        let mut set = self.lock();
        // Reap finished tasks, so a long connection does not accumulate them.
        while set.try_join_next().is_some() {}
        set.spawn(fut);
    }
}

/// A response body: at most one DATA frame, then trailers (gRPC), or
/// nothing at all (a trailers-only response: HEADERS with END_STREAM).
pub(super) struct Reply {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Body for Reply {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let frame = match self.data.take() {
            Some(d) => Some(Frame::data(d)),
            None => self.trailers.take().map(Frame::trailers),
        };
        Poll::Ready(frame.map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }
}

/// A trailers-only gRPC response carrying `code`.
fn status_response(code: u32, msg: &str) -> Response<Reply> {
    let mut resp = grpc_headers().map(|()| Reply {
        data: None,
        trailers: None,
    });
    resp.headers_mut().extend(status_trailers(code, msg));
    resp
}

fn http_error(code: StatusCode, msg: &str) -> Response<Reply> {
    Response::builder()
        .status(code)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Reply {
            data: Some(Bytes::from(format!("{msg}\n"))),
            trailers: None,
        })
        .expect("static response")
}

/// Per-RPC state shared by the handler and its workers.
struct Rpc {
    ctx: Arc<ServerCtx>,
    conn: u32,
    stream: u32,
    queue: AppQueue,
    received: AtomicU64,
    received_bytes: AtomicU64,
    discarded: AtomicU64,
    /// `rpc_end` was recorded.
    ended: AtomicBool,
    /// Why the connection closed, once known: a cancelled RPC says it.
    closed: crate::tap::CloseReason,
}

impl Rpc {
    fn emit(&self, t: u64, id: KindId, build: impl FnOnce() -> Kind) {
        self.ctx
            .rec
            .emit(Endpoint::Server, self.conn, self.stream, t, id, build);
    }

    fn discard(&self, seqs: &[u64], reason: DiscardReason) {
        let t = now_ns();
        for &seq in seqs {
            self.emit(t, KindId::Discard, || {
                Kind::Discard(DiscardEv { seq, reason })
            });
        }
        self.discarded.fetch_add(seqs.len() as u64, Relaxed);
        Live::add(&self.ctx.live.discarded, seqs.len() as u64);
    }

    /// Records `rpc_end` once.
    fn end(&self, status: u32, message: String) {
        if self.ended.swap(true, Relaxed) {
            return;
        }
        let message = super::rpc::with_close_reason(status, message, &self.closed);
        self.emit(now_ns(), KindId::RpcEnd, || {
            Kind::RpcEnd(RpcEndEv { status, message })
        });
        Live::add(&self.ctx.live.rpcs_done, 1);
    }
}

/// Ends the RPC as cancelled if hyper drops the handler's future: it does so
/// when the client resets the stream before the response is ready.
struct EndOnDrop(Arc<Rpc>);

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if !self.0.ended.load(Relaxed) {
            // The client's reset, or the server's own closing of the
            // connection at the end of shutdown (then UNAVAILABLE, what
            // its client reads).
            let (reason, code) = self.0.ctx.gone();
            self.0.discard(&self.0.queue.take_all(), reason);
            // Hyper drops it for a client's reset and for a connection
            // that closed (the server's --idle-timeout, say): `end` adds
            // the connection's reason when there is one.
            let why = match self.0.closed.peek() {
                Some(_) => "hyper dropped the handler",
                None => "client reset the stream before the response (hyper dropped the handler)",
            };
            self.0.end(code, why.into());
        }
    }
}

/// How the receive phase ended.
enum Ended {
    /// --max-owned-bytes: the RPC ends RESOURCE_EXHAUSTED, its messages
    /// discarded with reason `limit`.
    Limit(String),
    HalfClosed,
    Cancelled(String),
    Status(u32, String),
}

async fn handle(
    req: Request<Incoming>,
    conn: u32,
    stream: u32,
    ctx: Arc<ServerCtx>,
    closed: crate::tap::CloseReason,
) -> Result<Response<Reply>, Infallible> {
    let deadline = req
        .headers()
        .get(&grpc::TIMEOUT_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(grpc::parse_timeout);
    let rpc = Arc::new(Rpc {
        ctx: ctx.clone(),
        conn,
        stream,
        queue: AppQueue::new(None, ctx.live.clone(), ctx.cfg.max_owned_bytes),
        received: AtomicU64::new(0),
        received_bytes: AtomicU64::new(0),
        discarded: AtomicU64::new(0),
        ended: AtomicBool::new(false),
        closed,
    });
    let path = req.uri().path().to_string();
    rpc.emit(now_ns(), KindId::RpcStart, || {
        Kind::RpcStart(RpcStartEv {
            path,
            deadline_ns: deadline.map(|d| d.as_nanos() as u64),
            framing: None,
            // hyper releases each body frame as it is polled.
            release: Some(ReleasePoint::Frame),
            withhold_after: None,
        })
    });
    let _end_on_drop = EndOnDrop(rpc.clone());

    if let Err((http_status, grpc_status, msg)) =
        check_request(&req, Framing::Grpc, &[crate::grpc::INGEST_PATH])
    {
        let resp = match grpc_status {
            Some(code) => status_response(code, &msg),
            None => http_error(http_status, &msg),
        };
        rpc.end(grpc_status.unwrap_or(status::UNIMPLEMENTED), msg);
        return Ok(resp);
    }

    let mut body = req.into_body();
    let deadline_at = deadline.map(|d| Instant::now() + d);
    let sleep_deadline = async {
        match deadline_at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(sleep_deadline);
    let mut shutdown = ctx.shutdown.clone();
    let mut workers = JoinSet::new();
    for w in 0..ctx.cfg.workers {
        workers.spawn(worker_loop(rpc.clone(), w));
    }

    // Phase 1: receive until half-close, failure, deadline or shutdown.
    let received = tokio::select! {
        e = receive(&rpc, &mut body) => Some(e),
        _ = &mut sleep_deadline => None,
        _ = crate::live::flag_set(&mut shutdown) => Some(Ended::Status(status::UNAVAILABLE, "server shutting down".into())),
    };
    let shutting_down = *ctx.shutdown.borrow();
    let (code, msg) = match received {
        None => {
            rpc.discard(&rpc.queue.take_all(), DiscardReason::Deadline);
            (
                status::DEADLINE_EXCEEDED,
                "deadline exceeded with work still queued".into(),
            )
        }
        Some(Ended::Cancelled(why)) => {
            // The stream is gone: the answer below reaches no one.
            rpc.discard(&rpc.queue.take_all(), DiscardReason::Cancelled);
            (status::CANCELLED, why)
        }
        Some(Ended::Limit(msg)) => {
            rpc.discard(&rpc.queue.take_all(), DiscardReason::Limit);
            (status::RESOURCE_EXHAUSTED, msg)
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
            (code, msg)
        }
        Some(ended) => {
            // Phase 2: drain the queue, as a tonic handler that awaits its
            // workers before answering. A client reset meanwhile makes hyper
            // drop this future: `EndOnDrop` records it.
            rpc.queue.close();
            let mut abandon = ctx.abandon.clone();
            let mut drain_over = ctx.drain_over.subscribe();
            let _draining = ctx.drain_guard();
            let drained = tokio::select! {
                _ = async { while workers.join_next().await.is_some() {} } => true,
                _ = &mut sleep_deadline => false,
                _ = crate::live::flag_set(&mut shutdown), if !shutting_down && !ctx.cfg.shutdown_drain => false,
                _ = crate::live::flag_set(&mut abandon) => false,
                _ = crate::live::flag_set(&mut drain_over) => false,
            };
            if !drained && (*ctx.abandon.borrow() || *ctx.drain_over.borrow()) {
                // Cut short (a second interrupt, a stop for a failure, or
                // --drain-timeout): answered now, while the connection can
                // still carry it.
                rpc.discard(&rpc.queue.take_all(), DiscardReason::Shutdown);
                (
                    status::UNAVAILABLE,
                    format!("server shutting down: {}", ctx.drain_cut_why()),
                )
            } else if drained {
                match ended {
                    Ended::Status(code, msg) => (code, msg),
                    _ => (status::OK, String::new()),
                }
            } else if *ctx.shutdown.borrow() && !ctx.cfg.shutdown_drain {
                rpc.discard(&rpc.queue.take_all(), DiscardReason::Shutdown);
                (status::UNAVAILABLE, "server shutting down".into())
            } else {
                rpc.discard(&rpc.queue.take_all(), DiscardReason::Deadline);
                (
                    status::DEADLINE_EXCEEDED,
                    "deadline exceeded while draining".into(),
                )
            }
        }
    };
    workers.abort_all();
    while workers.join_next().await.is_some() {}

    let resp = if code == status::OK {
        let reply = pb::IngestReply {
            received: rpc.received.load(Relaxed),
            completed: rpc.queue.completed(),
            discarded: rpc.discarded.load(Relaxed),
            received_bytes: rpc.received_bytes.load(Relaxed),
        };
        grpc_headers().map(|()| Reply {
            data: Some(grpc::encode(&reply)),
            trailers: Some(status_trailers(status::OK, "")),
        })
    } else {
        status_response(code, &msg)
    };
    rpc.end(code, msg);
    drop(body);
    Ok(resp)
}

/// Reads the body frame by frame: chunk (hyper released it) → decode → queue.
async fn receive(rpc: &Rpc, body: &mut Incoming) -> Ended {
    let mut deframer = Deframer::new(rpc.ctx.cfg.max_message_size);
    let mut seq = 0u64;
    loop {
        loop {
            match deframer.next_message() {
                Ok(Some(msg)) => {
                    if let Err(e) = accept_message(rpc, seq, msg) {
                        return e;
                    }
                    seq += 1;
                }
                Ok(None) => break,
                Err(e) => return Ended::Status(e.status(), e.to_string()),
            }
        }
        match std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await {
            Some(Ok(frame)) => {
                // Request trailers carry nothing for this method.
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let t = now_ns();
                let len = data.len() as u32;
                rpc.emit(t, KindId::Chunk, || Kind::Chunk(ChunkEv { len }));
                hyper_released(rpc, t, len);
                rpc.received_bytes.fetch_add(len as u64, Relaxed);
                deframer.push_bytes(data);
            }
            Some(Err(e)) => return Ended::Cancelled(format!("{e:#}")),
            None if deframer.pending() > 0 => {
                return Ended::Status(
                    status::INTERNAL,
                    format!(
                        "body ended inside a message ({} bytes pending)",
                        deframer.pending()
                    ),
                )
            }
            None => return Ended::HalfClosed,
        }
    }
}

/// Records hyper's implicit release of a DATA frame's bytes.
///
/// This is not a call we make: hyper's `Incoming::poll_frame` calls
/// `release_capacity(len)` on the stream before it hands the frame to the
/// application, so the `release` event (`at: frame`) is emitted right after
/// the poll returned, with the chunk's time. hyper releases nothing for an
/// empty frame, and neither does the h2 server, so no event then.
fn hyper_released(rpc: &Rpc, t: u64, bytes: u32) {
    if bytes > 0 {
        rpc.emit(t, KindId::Release, || {
            Kind::Release(ReleaseEv {
                bytes,
                at: ReleasePoint::Frame,
                seq: None,
            })
        });
    }
}

/// Decodes one message and pushes it into the unbounded queue.
fn accept_message(rpc: &Rpc, seq: u64, msg: Framed) -> Result<(), Ended> {
    let framed = msg.framed_len();
    if msg.compressed {
        return Err(Ended::Status(
            status::UNIMPLEMENTED,
            "compressed message without a negotiated grpc-encoding".into(),
        ));
    }
    if let Err(e) = <pb::Item as prost::Message>::decode(msg.data()) {
        return Err(Ended::Status(
            status::INVALID_ARGUMENT,
            format!("message {seq} is not a valid h2probe.v1.Item: {e}"),
        ));
    }
    let t = now_ns();
    let size = msg.len() as u32;
    rpc.emit(t, KindId::Decode, || {
        Kind::Decode(MsgEv { seq, size, framed })
    });
    rpc.received.fetch_add(1, Relaxed);
    Live::add(&rpc.ctx.live.decoded, 1);
    if rpc.queue.depth() >= rpc.ctx.cfg.queue_limit as usize {
        rpc.discard(&[seq], DiscardReason::QueueLimit);
        return Ok(());
    }
    if let Err(why) = rpc.queue.own(seq, framed) {
        rpc.discard(&[seq], DiscardReason::Limit);
        return Err(Ended::Limit(why));
    }
    // Stamped before the push, so a worker's `start` cannot precede it.
    let t_enqueue = now_ns();
    let levels = rpc.queue.push(Job {
        seq,
        framed,
        decoded_at: t,
        body: msg.into_parts(),
        slot: None,
    });
    rpc.ctx.live.depth.fetch_add(1, Relaxed);
    rpc.emit(t_enqueue, KindId::Enqueue, || {
        Kind::Enqueue(EnqueueEv {
            seq,
            depth: levels.depth,
            queued_bytes: levels.queued_bytes,
        })
    });
    Ok(())
}

async fn worker_loop(rpc: Arc<Rpc>, worker: u32) {
    while let Some((job, levels)) = rpc.queue.pop().await {
        rpc.ctx.live.depth.fetch_sub(1, Relaxed);
        let started = now_ns();
        rpc.emit(started, KindId::Start, || {
            Kind::Start(StartEv {
                seq: job.seq,
                worker,
                wait_ns: started.saturating_sub(job.decoded_at),
                depth: levels.depth,
            })
        });
        let service = rpc.ctx.service_time();
        if service.is_zero() {
            // Yields only when the task's cooperative budget runs out.
            tokio::task::consume_budget().await;
        } else {
            tokio::time::sleep(service).await;
        }
        let t = now_ns();
        if !rpc.queue.end_service(job.seq, job.framed) {
            // Discarded while in service: that was its one ending.
            continue;
        }
        rpc.emit(t, KindId::Complete, || {
            Kind::Complete(CompleteEv {
                seq: job.seq,
                worker,
                service_ns: t.saturating_sub(started),
            })
        });
        Live::add(&rpc.ctx.live.completed, 1);
    }
}
