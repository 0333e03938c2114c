//! The Part 3 client: one `Exchange` RPC per client, an open-loop schedule
//! of originals, bounded pending and outstanding budgets, and retries that
//! keep the original's id and immutable deadline.
//!
//! Budgets: an original waits in *pending* (at most `--max-pending`) until
//! an *outstanding* credit is free (at most `--max-outstanding`); an attempt
//! holds its credit from initiation until its outcome arrives. A rejected
//! original waiting for its retry is pending again (it counts against
//! `--max-pending`, not the outstanding credits); once its backoff is over
//! it takes the next free credit before any fresh original, so retries
//! compete with fresh originals for the client's capacity. An original
//! that finds pending full is `never_sent` (backlog); one whose deadline
//! passes while pending is `never_sent` (deadline); a retry that finds
//! pending full, or whose deadline passes before its backoff ends or before
//! a credit frees, ends `rejected` (`backlog`, `deadline`). With
//! `--retry-holds-credit` a rejected original keeps its outstanding credit
//! through its backoff instead (fresh originals then wait behind it).
//!
//! Accounting: every original gets exactly one `original_end`. Attempts also
//! appear as the tool's ordinary per-message events (`schedule` when
//! initiated, `send`, `never_sent` when cut mid-send) numbered by their
//! place on the stream, so the server's `decode` seq matches them.

use super::send::payload_bytes;
use super::*;
use crate::grpc::pb;
use crate::overload::SplitMix;
use crate::trace::schema::{
    AttemptEndEv, AttemptEv, AttemptResult, MsgEv, OriginalEndEv, OriginalEv, OriginalState,
};
use std::collections::{HashMap, VecDeque};

/// One original.
#[derive(Clone, Copy, Debug)]
struct Orig {
    id: u64,
    scheduled: u64,
    deadline: u64,
    attempts: u32,
}

/// An attempt handed to the sender.
struct ToSend {
    orig: Orig,
    seq: u64,
    /// When it was initiated (its `attempt` and `schedule` events' `t`):
    /// its `send` event's `scheduled`, so lateness is the wait for the
    /// sender (the wait for a credit before it is Part 3's pending).
    initiated: u64,
}

/// What the response reader passes on.
enum FromServer {
    Outcome(pb::Outcome),
    /// Status, message, and whether the server said it (its
    /// `grpc-status`) rather than h2 (a stream or connection that failed).
    End(u32, String, bool),
}

/// The client's state between events.
struct State<'a> {
    ctx: &'a ClientCtx,
    conn: u32,
    stream: u32,
    pending: VecDeque<Orig>,
    /// Attempts initiated and unanswered, by (id, attempt) → (original, seq).
    in_flight: HashMap<(u64, u32), (Orig, u64)>,
    /// Rejected originals waiting for their retry: (due, original). They
    /// count as pending.
    retry_wait: Vec<(u64, Orig)>,
    next_seq: u64,
    rng: SplitMix,
    framed: u32,
}

impl State<'_> {
    /// Attempts holding a credit (with --retry-holds-credit, also the
    /// rejected originals waiting for their retry).
    fn outstanding(&self) -> u32 {
        let waiting = if self.ctx.opts.retry_holds_credit {
            self.retry_wait.len()
        } else {
            0
        };
        (self.in_flight.len() + waiting) as u32
    }

    /// Pending originals: fresh ones, and rejected ones waiting to retry
    /// (unless they hold their credit).
    fn pending(&self) -> u32 {
        let waiting = if self.ctx.opts.retry_holds_credit {
            0
        } else {
            self.retry_wait.len()
        };
        (self.pending.len() + waiting) as u32
    }

    fn emit(&self, t: u64, id: KindId, build: impl FnOnce() -> Kind) {
        self.ctx
            .rec
            .emit(Endpoint::Client, self.conn, self.stream, t, id, build);
    }

    fn end(&self, o: Orig, state: OriginalState, reason: &str, latency_ns: Option<u64>) {
        let (pending, outstanding) = (self.pending(), self.outstanding());
        let reason = reason.to_string();
        self.emit(now_ns(), KindId::OriginalEnd, || {
            Kind::OriginalEnd(OriginalEndEv {
                id: o.id,
                state,
                attempts: o.attempts,
                reason,
                latency_ns,
                pending,
                outstanding,
            })
        });
    }

    /// Initiates the next attempt at `o` (its credit is already counted).
    fn initiate(&mut self, mut o: Orig, tx: &mpsc::Sender<ToSend>) {
        o.attempts += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight.insert((o.id, o.attempts), (o, seq));
        let t = now_ns();
        let (pending, outstanding) = (self.pending(), self.outstanding());
        self.emit(t, KindId::Attempt, || {
            Kind::Attempt(AttemptEv {
                id: o.id,
                attempt: o.attempts,
                seq,
                scheduled: o.scheduled,
                deadline: o.deadline,
                pending,
                outstanding,
            })
        });
        let framed = self.framed;
        self.emit(t, KindId::Schedule, || {
            Kind::Schedule(MsgEv {
                seq,
                size: framed - grpc::PREFIX_LEN as u32,
                framed,
            })
        });
        Live::add(&self.ctx.live.scheduled, 1);
        // Never full: it holds at most --max-outstanding attempts, and each
        // one in it holds an outstanding credit.
        if tx
            .try_send(ToSend {
                orig: o,
                seq,
                initiated: t,
            })
            .is_err()
        {
            tracing::warn!("sender queue full or closed; attempt {seq} stays unanswered");
        }
    }

    /// Moves retries whose backoff is over, then pending originals, into
    /// attempts while credits allow.
    fn pump(&mut self, tx: &mpsc::Sender<ToSend>) {
        let now = now_ns();
        // Retries first, earliest due first; one whose deadline passed ends.
        self.retry_wait
            .sort_unstable_by_key(|(due, o)| (*due, o.id));
        while let Some(&(due, o)) = self.retry_wait.first() {
            if due > now {
                break;
            }
            if now >= o.deadline {
                self.retry_wait.remove(0);
                self.end(o, OriginalState::Rejected, "deadline", None);
                continue;
            }
            // A retry that holds its credit is counted already.
            if !self.ctx.opts.retry_holds_credit
                && self.outstanding() >= self.ctx.opts.max_outstanding
            {
                break;
            }
            self.retry_wait.remove(0);
            self.initiate(o, tx);
        }
        while self.outstanding() < self.ctx.opts.max_outstanding {
            let Some(o) = self.pending.pop_front() else {
                break;
            };
            if now >= o.deadline {
                self.end(o, OriginalState::NeverSent, "deadline", None);
                continue;
            }
            self.initiate(o, tx);
        }
    }

    fn outcome(&mut self, out: pb::Outcome) {
        let Some((o, seq)) = self.in_flight.remove(&(out.id, out.attempt)) else {
            tracing::debug!("outcome for unknown attempt {}/{}", out.id, out.attempt);
            return;
        };
        use pb::outcome::Result as R;
        let result = match R::try_from(out.result) {
            Ok(R::Completed) => AttemptResult::Completed,
            Ok(R::Rejected) => AttemptResult::Rejected,
            Ok(R::Dropped) => AttemptResult::Dropped,
            Ok(R::Expired) => AttemptResult::Expired,
            _ => {
                // Not a terminal answer this client knows: the original
                // stays unanswered (recorded at the end).
                self.in_flight.insert((out.id, out.attempt), (o, seq));
                return;
            }
        };
        let at = out.at_ns;
        self.emit(now_ns(), KindId::AttemptEnd, || {
            Kind::AttemptEnd(AttemptEndEv {
                id: o.id,
                attempt: o.attempts,
                seq,
                result,
                at,
            })
        });
        match result {
            AttemptResult::Completed => {
                let state = if at <= o.deadline {
                    OriginalState::OnTime
                } else {
                    OriginalState::Late
                };
                self.end(o, state, "", Some(at.saturating_sub(o.scheduled)));
            }
            AttemptResult::Dropped => self.end(o, OriginalState::Dropped, "", None),
            AttemptResult::Expired => self.end(o, OriginalState::Expired, "", None),
            AttemptResult::Rejected => {
                let opts = &self.ctx.opts;
                if o.attempts >= opts.max_attempts {
                    let why = if opts.retry == crate::overload::RetryPolicy::None {
                        "no_retry"
                    } else {
                        "attempts"
                    };
                    self.end(o, OriginalState::Rejected, why, None);
                    return;
                }
                match opts.retry.delay(o.attempts, &mut self.rng) {
                    None => self.end(o, OriginalState::Rejected, "no_retry", None),
                    Some(d) => {
                        let due = now_ns() + d.as_nanos() as u64;
                        if due >= o.deadline {
                            // The retry could not start before the deadline.
                            self.end(o, OriginalState::Rejected, "deadline", None);
                        } else if !opts.retry_holds_credit && self.pending() >= opts.max_pending {
                            self.end(o, OriginalState::Rejected, "backlog", None);
                        } else {
                            self.retry_wait.push((due, o));
                        }
                    }
                }
            }
        }
    }

    /// Ends every original still open when the RPC stops early.
    fn stop_all(&mut self, why: &str) {
        while let Some(o) = self.pending.pop_front() {
            self.end(o, OriginalState::NeverSent, why, None);
        }
        for (_, o) in std::mem::take(&mut self.retry_wait) {
            self.end(o, OriginalState::Rejected, why, None);
        }
        let mut open: Vec<(Orig, u64)> = self.in_flight.drain().map(|(_, v)| v).collect();
        open.sort_by_key(|(_, seq)| *seq);
        for (o, _) in open {
            self.end(o, OriginalState::Unanswered, why, None);
        }
    }
}

/// Sends attempts in order; records `send` (S) for each wholly handed to h2.
async fn sender(
    ctx: &ClientCtx,
    conn: u32,
    stream: u32,
    rx: &mut mpsc::Receiver<ToSend>,
    send: &mut SendStream<Bytes>,
    in_progress: &AtomicI64,
    payload: &Bytes,
) -> Result<(), h2::Error> {
    while let Some(a) = rx.recv().await {
        in_progress.store(a.seq as i64, Relaxed);
        let begin = now_ns();
        let data = grpc::encode(&pb::Attempt {
            id: a.orig.id,
            attempt: a.orig.attempts,
            scheduled_ns: a.orig.scheduled,
            deadline_ns: a.orig.deadline,
            payload: payload.clone(),
        });
        let bytes = data.len() as u32;
        super::send::send_message(ctx, conn, stream, send, a.seq, data, false).await?;
        in_progress.store(-1, Relaxed);
        super::send::record_sent(
            ctx,
            conn,
            stream,
            SendEv {
                seq: a.seq,
                scheduled: a.initiated,
                begin,
                bytes,
            },
        );
    }
    send.send_data(Bytes::new(), true)
}

/// Reads outcomes and the final status, passing them on.
async fn reader(resp: h2::client::ResponseFuture, tx: mpsc::Sender<FromServer>) {
    let end = |code, msg: String| FromServer::End(code, msg, false);
    let resp = match resp.await {
        Ok(r) => r,
        Err(e) => {
            let _ = tx
                .send(end(
                    status::of_h2_error(&e),
                    format!("no response: {}", super::h2_error_text(&e)),
                ))
                .await;
            return;
        }
    };
    if resp.status() != http::StatusCode::OK {
        let _ = tx
            .send(end(
                status::of_http(resp.status()),
                format!("HTTP status {}", resp.status()),
            ))
            .await;
        return;
    }
    if let Some((code, msg)) = super::answer::grpc_status(resp.headers()) {
        let _ = tx.send(FromServer::End(code, msg, true)).await;
        return;
    }
    let mut body = resp.into_body();
    let mut deframer = grpc::Deframer::new(1 << 20);
    while let Some(chunk) = body.data().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                let _ = tx
                    .send(end(
                        status::of_h2_error(&e),
                        format!("reading outcomes: {e}"),
                    ))
                    .await;
                return;
            }
        };
        let _ = body.flow_control().release_capacity(chunk.len());
        deframer.push(&chunk);
        while let Ok(Some(m)) = deframer.next_message() {
            if let Ok(o) = <pb::Outcome as prost::Message>::decode(m.data()) {
                if tx.send(FromServer::Outcome(o)).await.is_err() {
                    return;
                }
            }
        }
    }
    let last = match body.trailers().await {
        Ok(Some(h)) => match super::answer::grpc_status(&h) {
            Some((code, msg)) => FromServer::End(code, msg, true),
            None => end(
                status::INTERNAL,
                "response ended without grpc-status".into(),
            ),
        },
        Ok(None) => end(status::INTERNAL, "response ended without trailers".into()),
        Err(e) => end(status::of_h2_error(&e), format!("reading trailers: {e}")),
    };
    let _ = tx.send(last).await;
}

/// One client: its Exchange RPC from the first original to the last outcome.
pub(super) async fn rpc(
    ctx: Arc<ClientCtx>,
    sr: SendRequest<Bytes>,
    conn: u32,
    k: u32,
    start: u64,
    cause: crate::tap::CloseReason,
) -> RpcOutcome {
    let opts = &ctx.opts;
    let mut outcome = RpcOutcome::unopened(conn);
    let req = super::grpc_request(&ctx, opts.call_path());
    let rpc_deadline = now_ns() + opts.deadline().as_nanos() as u64;
    let opened = async {
        let mut sr = sr.ready().await?;
        sr.send_request(req, false)
    };
    let (resp, mut send) = match opened.await {
        Ok(x) => x,
        Err(e) => {
            outcome.message = format!("could not open the stream: {e}");
            super::with_connection_cause(&mut outcome, &cause, false);
            super::record_rpc_end(&ctx, 0, &outcome);
            return outcome;
        }
    };
    let stream = send.stream_id().as_u32();
    outcome.stream = stream;
    ctx.rec.emit(
        Endpoint::Client,
        conn,
        stream,
        now_ns(),
        KindId::RpcStart,
        || {
            Kind::RpcStart(RpcStartEv {
                path: opts.call_path().to_string(),
                deadline_ns: Some(opts.deadline().as_nanos() as u64),
                framing: None,
                release: None,
                withhold_after: None,
            })
        },
    );

    let payload = payload_bytes(opts.payload.0 as usize);
    let framed = (grpc::PREFIX_LEN
        + prost::Message::encoded_len(&pb::Attempt {
            id: u64::MAX,
            attempt: 1,
            scheduled_ns: u64::MAX,
            deadline_ns: u64::MAX,
            payload: payload.clone(),
        })) as u32;
    let mut st = State {
        ctx: &ctx,
        conn,
        stream,
        pending: VecDeque::new(),
        in_flight: HashMap::new(),
        retry_wait: vec![],
        next_seq: 0,
        rng: SplitMix::for_client(opts.seed, k),
        framed,
    };
    let (tx, mut send_rx) = mpsc::channel::<ToSend>(opts.max_outstanding as usize);
    // Dropped to half-close: the sender then ends the stream.
    let mut to_send = Some(tx);
    let (from_tx, mut from_server) = mpsc::channel::<FromServer>(opts.max_outstanding as usize + 1);
    let reading = tokio::spawn(reader(resp, from_tx));
    let in_progress = AtomicI64::new(-1);
    let mut sending = Box::pin(sender(
        &ctx,
        conn,
        stream,
        &mut send_rx,
        &mut send,
        &in_progress,
        &payload,
    ));
    let mut sending_done = false;

    // The open-loop schedule of this client's originals.
    let total = opts.total_streams() as u64;
    let period = 1e9 * total as f64 / opts.rate;
    let offset = 1e9 * k as f64 / opts.rate;
    let schedule_end = start + opts.duration.0.as_nanos() as u64;
    let original_deadline = opts.original_deadline.0.as_nanos() as u64;
    let mut i = 0u64;
    let at = |i: u64| start + (offset + period * i as f64) as u64;
    let mut schedule_open = at(0) < schedule_end;
    let mut interrupt = ctx.interrupt.clone();
    let mut half_closed = false;
    let mut stop: Option<(&'static str, u32, String)> = None;
    let mut server_end: Option<(u32, String, bool)> = None;

    loop {
        if !schedule_open && st.pending() == 0 && st.outstanding() == 0 && !half_closed {
            // Every original has ended: half-close.
            half_closed = true;
            to_send = None;
        }
        // Wake for the next backoff to end (retries already due wait for a
        // credit, which an outcome frees).
        let now = now_ns();
        let next_retry = st
            .retry_wait
            .iter()
            .map(|(d, _)| *d)
            .filter(|d| *d > now)
            .min();
        tokio::select! {
            _ = tokio::time::sleep_until(to_instant(at(i))), if schedule_open => {
                let t = at(i);
                let id = k as u64 + total * i;
                i += 1;
                schedule_open = at(i) < schedule_end && now_ns() < schedule_end;
                let o = Orig { id, scheduled: t, deadline: t + original_deadline, attempts: 0 };
                Live::add(&st.ctx.live.offered, 1);
                let full = st.pending() >= opts.max_pending;
                let (pending, outstanding) = (st.pending() + u32::from(!full), st.outstanding());
                st.emit(t, KindId::Original, || Kind::Original(OriginalEv { id, deadline: o.deadline, pending, outstanding }));
                if full {
                    st.end(o, OriginalState::NeverSent, "backlog", None);
                } else {
                    st.pending.push_back(o);
                }
            }
            _ = async { tokio::time::sleep_until(to_instant(next_retry.expect("guarded"))).await }, if next_retry.is_some() => {}
            m = from_server.recv() => match m {
                Some(FromServer::Outcome(o)) => st.outcome(o),
                Some(FromServer::End(code, msg, said)) => {
                    server_end = Some((code, msg, said));
                    if !(half_closed && st.outstanding() == 0) {
                        stop = Some(("stream_error", status::UNAVAILABLE, "the server ended the RPC early".into()));
                    }
                    break;
                }
                None => {
                    stop = Some(("stream_error", status::UNAVAILABLE, "the response ended".into()));
                    break;
                }
            },
            r = sending.as_mut(), if !sending_done => {
                sending_done = true;
                if let Err(e) = r {
                    stop = Some(("stream_error", status::UNAVAILABLE, super::send::send_error_text(&e)));
                    break;
                }
            }
            _ = tokio::time::sleep_until(to_instant(rpc_deadline)) => {
                stop = Some(("deadline", status::DEADLINE_EXCEEDED, "client stopped: deadline".into()));
                break;
            }
            _ = crate::live::flag_set(&mut interrupt) => {
                stop = Some(("interrupted", status::CANCELLED, format!("client stopped: {}", ctx.interrupted_why())));
                break;
            }
        }
        if let Some(tx) = &to_send {
            st.pump(tx);
        }
    }
    // Attempts handed to the sender but not wholly sent.
    drop(sending);
    let t = now_ns();
    let mut unsent: Vec<u64> = match in_progress.load(Relaxed) {
        s if s >= 0 && stop.is_some() => vec![s as u64],
        _ => vec![],
    };
    send_rx.close();
    while let Ok(a) = send_rx.try_recv() {
        unsent.push(a.seq);
    }
    let mut peer_said = false;
    if let Some((why, code, msg)) = stop {
        let reason = match why {
            "deadline" => NeverSentReason::Deadline,
            "interrupted" => NeverSentReason::Interrupted,
            _ => NeverSentReason::StreamError,
        };
        for seq in &unsent {
            let seq = *seq;
            st.emit(t, KindId::NeverSent, || {
                Kind::NeverSent(NeverSentEv {
                    seq,
                    reason,
                    count: 1,
                })
            });
        }
        Live::add(&ctx.live.never_sent, unsent.len() as u64);
        st.stop_all(why);
        send.send_reset(h2::Reason::CANCEL);
        outcome.status = server_end.as_ref().map_or(code, |(c, _, _)| *c);
        peer_said = server_end.as_ref().is_some_and(|(_, _, said)| *said);
        outcome.message = server_end.map_or(msg, |(_, m, _)| m);
    } else if let Some((code, msg, said)) = server_end {
        outcome.status = code;
        outcome.message = msg;
        peer_said = said;
    }
    reading.abort();
    super::with_connection_cause(&mut outcome, &cause, peer_said);
    super::record_rpc_end(&ctx, stream, &outcome);
    outcome
}
