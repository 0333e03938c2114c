//! The probe client: open-loop paced gRPC client-streaming on `h2`, recording
//! when and why each send waits (window credit here, the socket in the tap).

use crate::config::CapturePayload;
use crate::config::{Dur, Size};
use crate::grpc::{self, status};
use crate::live::Live;
use crate::tap::{Tap, TapConfig};
use crate::trace::clock::{now_ns, to_instant};
use crate::trace::schema::{
    Endpoint, Kind, KindId, NeverSentEv, NeverSentReason, RpcEndEv, RpcStartEv, SendEv,
    WindowBlockedEv,
};
use crate::trace::Recorder;
use anyhow::Context as _;
use bytes::Bytes;
use h2::client::SendRequest;
use h2::SendStream;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_util::task::AbortOnDropHandle;

mod answer;
mod exchange;
pub mod message;
pub mod reflect;
mod schedule;
mod send;
pub mod target;
mod unary;

use answer::read_answer;
pub use message::{Codec, MessageOpts, Streaming};
use send::{payload_bytes, send_all};
pub use target::{Target, TargetOpts};
pub use unary::KEPT_FAILED as UNARY_KEPT_FAILED;

/// Client knobs (shared by `client` and `run`).
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct ClientOpts {
    /// HTTP/2 connections to open (with --rpc exchange: clients, each with
    /// its own budgets and jitter seed; their schedules interleave, so their
    /// starts are staggered by 1/--rate).
    #[arg(long, visible_alias = "clients", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub connections: u32,

    /// Concurrent client-streaming RPCs per connection (with --rpc unary:
    /// calls in flight at once per connection, at most what the server's
    /// SETTINGS_MAX_CONCURRENT_STREAMS allows).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub streams: u32,

    /// Messages offered per second, in total over all streams (open loop:
    /// the schedule does not wait for the server).
    #[arg(long, default_value_t = 300.0)]
    pub rate: f64,

    /// Messages per second for each stream of a connection, in stream order
    /// (`100,100,400`: streams 1 and 3 at 100/s, stream 5 at 400/s), one
    /// value per --streams; replaces --rate (each connection offers the sum).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "RATE,…",
        conflicts_with = "rate"
    )]
    pub stream_rates: Option<Vec<f64>>,

    /// Payload bytes per message (deterministic content); the framed size on
    /// the wire is this plus the protobuf fields and the 5-byte prefix.
    #[arg(long, default_value = "16KiB", value_name = "SIZE")]
    pub payload: Size,

    /// How long messages are offered; then each stream half-closes.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub duration: Dur,

    /// Deadline of each whole RPC (with --rpc unary: of each call, from its
    /// message's scheduled time, the wait in the backlog included, as a
    /// gRPC call's runs from its creation), sent as grpc-timeout (what is
    /// left of it); at expiry the client resets the stream and records
    /// unsent messages as never_sent.
    /// [default: 120s; a --duration longer than that needs --deadline, but
    /// with --rpc unary]
    #[arg(long, value_name = "DURATION")]
    #[serde(serialize_with = "effective_deadline")]
    pub deadline: Option<Dur>,

    /// Messages that may wait to be sent per stream (with --rpc unary: per
    /// connection, beyond the calls free to take one at once); a message
    /// scheduled while the backlog is full is recorded as never_sent
    /// (reason backlog).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pending: u32,

    /// The client's own receive windows (responses are tiny; rarely matters).
    #[arg(long, default_value = "65535", value_name = "SIZE")]
    pub client_stream_window: Size,

    /// One-way delay added to each direction of every connection, on the
    /// client's side (user space: tc netem does not exist here); the round
    /// trip grows by twice this. The taps stay on the endpoints: the client's
    /// sees frames before the delay, the server's after it.
    #[arg(long, default_value = "0s", value_name = "DURATION")]
    pub link_delay: Dur,

    /// Bandwidth of that link in bytes per second, each way (e.g. 1MiB);
    /// the line then holds at most one bandwidth-delay product (≥ 64 KiB),
    /// so a sender that outruns it is blocked on the socket, as on a real link.
    /// Unlimited when not given.
    #[arg(long, value_name = "SIZE")]
    pub link_rate: Option<Size>,

    /// If no byte reaches the server application on any stream, and none
    /// is released, for this
    /// long while the client still has messages to send (`run`; with
    /// `client` alone: the client could send no byte within its credit;
    /// with --rpc unary, while a call still had bytes of its message to
    /// send: calls waiting for their answers wait on the handler, not on
    /// credit), the
    /// run is stuck (a stalled stream starving the shared connection window,
    /// or a deadlock): it is recorded as a `stall` event and ended, and the
    /// `no_stall` check fails. `run` refuses one not above --service-time;
    /// with `client` alone keep it above the server's longest pause in
    /// granting credit (a worker's service time, under late release), which
    /// the client cannot know and would call a stall. --link-delay adds
    /// three of its delays (no stream opens before the server's
    /// SETTINGS have crossed the link, which a server may send only once
    /// the client's preface has; then the first bytes cross it), and
    /// --link-rate one largest frame's time at that rate (16 KiB with
    /// `client` alone, --max-frame-size in `run`).
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub stall_timeout: Dur,

    /// The gRPC method to call, /package.Service/Method (any path: a
    /// different one tests a server's UNIMPLEMENTED answer). Its messages
    /// are h2probe.v1.Item unless `client --proto` or `--reflect` describes
    /// them. With
    /// --rpc exchange the default is /h2probe.v1.Probe/Exchange
    ///
    /// [default: /h2probe.v1.Probe/Ingest]
    #[arg(long = "method", visible_alias = "path", value_name = "PATH")]
    pub path: Option<String>,

    /// Which method to call: ingest (client-streaming, one answer per RPC),
    /// exchange (Part 3: originals with deadlines, one outcome per attempt)
    /// or unary (one message per call, up to --streams calls at once).
    #[arg(long, value_enum, default_value_t = crate::overload::RpcKind::Ingest)]
    pub rpc: crate::overload::RpcKind,

    /// Exchange: each original's deadline, from its scheduled time; every
    /// attempt carries the same absolute deadline (a retry never resets it).
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub original_deadline: Dur,

    /// Exchange: attempts a client may have outstanding (initiated and
    /// unanswered; a rejected original waiting for its retry gives its
    /// credit back, unless --retry-holds-credit); originals wait in the
    /// --max-pending backlog for a credit.
    #[arg(long, default_value_t = 33, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_outstanding: u32,

    /// Exchange: what a client does when an attempt is rejected: none,
    /// fixed:MS[,MS…] (the n-th retry waits the n-th delay, the last repeats)
    /// or jitter:MAX_MS (uniform in [0, MAX], seeded by --seed). A retry
    /// keeps the original's id and deadline and is not made when it could
    /// not start before the deadline.
    #[arg(long, default_value = "none", value_name = "POLICY")]
    pub retry: crate::overload::RetryPolicy,

    /// Exchange: a rejected original keeps its outstanding credit while it
    /// waits for its retry (fresh originals wait behind it), instead of
    /// waiting in the --max-pending backlog and taking the next free credit.
    #[arg(long)]
    pub retry_holds_credit: bool,

    /// Exchange: attempts per original at most (the first included).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_attempts: u32,

    /// Exchange: the run's seed for retry jitter (each client derives its
    /// own stream from it and its index; recorded in meta.json).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

impl Default for ClientOpts {
    fn default() -> Self {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct W {
            #[command(flatten)]
            o: ClientOpts,
        }
        W::parse_from(["x"]).o
    }
}

/// meta.json records the deadline in force, given or not.
fn effective_deadline<S: serde::Serializer>(d: &Option<Dur>, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&Dur(d.map_or(DEFAULT_DEADLINE, |d| d.0)), s)
}

/// The RPC deadline when `--deadline` is not given.
pub const DEFAULT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// The most messages per second the schedule honours, over all streams:
/// each message is a timer wake-up and a few events; beyond this the
/// schedule falls behind real time and the trace grows without bound.
pub const MAX_RATE: f64 = 100_000.0;

impl ClientOpts {
    /// The deadline in force.
    pub fn deadline(&self) -> std::time::Duration {
        self.deadline.map_or(DEFAULT_DEADLINE, |d| d.0)
    }

    /// Refuses, before anything starts, what cannot run (exit 2).
    pub fn validate(&self) -> anyhow::Result<()> {
        use crate::config::MAX_DURATION;
        crate::refuse_unless!(
            self.rate.is_finite() && self.rate >= 0.001,
            "--rate must be at least 0.001 messages per second, got {}",
            self.rate
        );
        if let Some(rates) = &self.stream_rates {
            crate::refuse_unless!(
                rates.len() == self.streams as usize,
                "--stream-rates gives {} rates for --streams {}: give one per stream",
                rates.len(),
                self.streams
            );
            crate::refuse_unless!(
                rates.iter().all(|r| r.is_finite() && *r >= 0.001),
                "--stream-rates: every rate must be at least 0.001 messages per second"
            );
            crate::refuse_unless!(
                self.total_rate() <= MAX_RATE,
                "--stream-rates add up to {} messages/s over all connections, above what the schedule can honour ({MAX_RATE}); lower them",
                self.total_rate()
            );
        }
        crate::refuse_unless!(
            self.rate <= MAX_RATE,
            "--rate {} is above what the schedule can honour ({MAX_RATE} messages/s over all streams); lower it",
            self.rate
        );
        crate::refuse_unless!(self.payload.0 <= 64 << 20, "--payload is limited to 64 MiB");
        crate::refuse_unless!(!self.duration.0.is_zero(), "--duration must be positive");
        crate::refuse_unless!(
            self.duration.0 <= MAX_DURATION,
            "--duration is limited to {}",
            crate::config::MAX_DURATION_SAID
        );
        if let Some(d) = self.deadline {
            crate::refuse_unless!(!d.0.is_zero(), "--deadline must be positive");
            crate::refuse_unless!(
                d.0 <= MAX_DURATION,
                "--deadline is limited to {}",
                crate::config::MAX_DURATION_SAID
            );
        } else if self.rpc != crate::overload::RpcKind::Unary {
            // (A unary call's deadline is its own, not the run's.)
            crate::refuse_unless!(
                self.duration.0 <= DEFAULT_DEADLINE,
                "--duration {} is longer than the default --deadline {}: the RPC would be cut by DEADLINE_EXCEEDED; \
                 give --deadline explicitly (e.g. --deadline {})",
                self.duration,
                // Seconds, as --help gives the default, and one word that
                // the shell passes whole.
                format!("{}s", DEFAULT_DEADLINE.as_secs()),
                format!("{}s", self.duration.0.as_secs() + 60)
            );
        }
        let path = self.call_path();
        crate::refuse_unless!(
            path.starts_with('/') && path.parse::<http::uri::PathAndQuery>().is_ok(),
            "--method {path:?} is not a valid request path (it must start with / and be valid in a URI)"
        );
        crate::refuse_unless!(
            !(self.rpc == crate::overload::RpcKind::Exchange && path == grpc::INGEST_PATH),
            "--method {path} with --rpc exchange: the Exchange client's attempts need the Exchange method; \
             leave --method out (it calls {}) or use --rpc ingest",
            grpc::EXCHANGE_PATH
        );
        let w = self
            .client_stream_window
            .to_u32("--client-stream-window")
            .map_err(|e| anyhow::Error::new(crate::config::UsageError(e)))?;
        crate::refuse_unless!(
            w > 0,
            "--client-stream-window must be positive (0 would never let the answer in)"
        );
        // h2 asserts on a larger one (a panic, not an error).
        crate::refuse_unless!(
            w < (1 << 31),
            "--client-stream-window must be at most 2147483647 bytes (RFC 9113 §6.9.1), got {w}"
        );
        crate::refuse_unless!(
            self.link_delay.0 <= std::time::Duration::from_secs(60),
            "--link-delay is limited to 60s"
        );
        crate::refuse_unless!(
            !self.original_deadline.0.is_zero() && self.original_deadline.0 <= MAX_DURATION,
            "--original-deadline must be positive and at most {}",
            crate::config::MAX_DURATION_SAID
        );
        if self.rpc == crate::overload::RpcKind::Ingest {
            // Stream k's first message is due k/total-rate after the start:
            // a stream due at or past --duration would offer nothing.
            let streams = self.total_streams();
            let last_start = f64::from(streams - 1) / self.total_rate();
            crate::refuse_unless!(
                last_start < self.duration.0.as_secs_f64(),
                "{streams} streams (--connections {} × --streams {}) start one message apart at {}/s in all, \
                 so the last would start at {:.3}s, past --duration {}, and offer nothing; \
                 raise --rate or --duration, or open fewer streams",
                self.connections,
                self.streams,
                self.total_rate(),
                last_start,
                self.duration
            );
        }
        if self.rpc == crate::overload::RpcKind::Unary {
            crate::refuse_unless!(
                self.stream_rates.is_none(),
                "--stream-rates applies to --rpc ingest; unary calls take their connection's messages \
                 in turn, offered at --rate over all connections"
            );
            // Connection k's schedule starts k/--rate after the first.
            let last_start = f64::from(self.connections - 1) / self.total_rate();
            crate::refuse_unless!(
                last_start < self.duration.0.as_secs_f64(),
                "{} connections start one message apart at {}/s, so the last would start at {:.3}s, \
                 past --duration {}, and offer nothing; raise --rate or --duration, or open fewer connections",
                self.connections,
                self.total_rate(),
                last_start,
                self.duration
            );
        }
        if self.rpc == crate::overload::RpcKind::Exchange {
            crate::refuse_unless!(
                self.stream_rates.is_none(),
                "--stream-rates applies to --rpc ingest; Exchange offers originals at --rate per client"
            );
            crate::refuse_unless!(
                self.deadline() >= self.duration.0 + self.original_deadline.0,
                "--deadline {} must cover --duration {} plus --original-deadline {}: the Exchange RPC carries every original to its end",
                Dur(self.deadline()),
                self.duration,
                self.original_deadline
            );
        }
        if let Some(r) = self.link_rate {
            crate::refuse_unless!(
                r.0 >= 1024,
                "--link-rate must be at least 1KiB (bytes per second)"
            );
        }
        Ok(())
    }

    /// The method the client calls: --method, or with --rpc exchange and
    /// the default method, Exchange (meta.json records this one; it said
    /// Ingest for an Exchange run).
    pub fn call_path(&self) -> &str {
        self.path.as_deref().unwrap_or(match self.rpc {
            crate::overload::RpcKind::Exchange => grpc::EXCHANGE_PATH,
            crate::overload::RpcKind::Ingest | crate::overload::RpcKind::Unary => grpc::INGEST_PATH,
        })
    }

    /// Exchange's own flags given (not at their defaults) while the RPC is
    /// Ingest, where they do nothing; `--seed` is not among them (compare
    /// pairs every repeat by it).
    pub fn exchange_flags_given(&self, on_command_line: &[String]) -> Vec<String> {
        if self.rpc == crate::overload::RpcKind::Exchange {
            return vec![];
        }
        crate::config::flags_given(
            self.config_part(),
            ClientOpts::default().config_part(),
            &[
                "original_deadline",
                "max_outstanding",
                "retry",
                "retry_holds_credit",
                "max_attempts",
            ],
            on_command_line,
        )
    }

    /// meta.json's record of these options: the method as called.
    pub fn config_part(&self) -> Option<serde_json::Map<String, serde_json::Value>> {
        let serde_json::Value::Object(mut part) = serde_json::to_value(self).ok()? else {
            return None;
        };
        part.insert("path".into(), self.call_path().into());
        Some(part)
    }

    /// An upper bound of one framed message on the wire.
    pub fn framed_upper_bound(&self) -> u64 {
        self.payload.0 + grpc::PREFIX_LEN as u64 + 32
    }

    /// What the link adds to `stall` before a stall can be told from the
    /// link's own delay: three one-way delays (the preface out, for a
    /// server that waits for it, the server's SETTINGS back, before which
    /// no stream opens, and the first bytes out; h2's server writes its
    /// SETTINGS at once, so two there, and a credit round trip needs two).
    /// With --link-delay 1.5s a healthy run read as stalled at 2 s.
    ///
    /// With --link-rate, bytes arrive one frame at a time at that rate: a
    /// gap of one largest frame's time between arrivals (0.8 s for 16 KiB
    /// at 20 KB/s) is the link's pace, not a stall (it read as one).
    /// `max_frame`: the largest DATA frame the server allows (16,384
    /// unless it says otherwise).
    pub fn with_link_allowance(
        &self,
        stall: std::time::Duration,
        max_frame: u64,
    ) -> std::time::Duration {
        let frame_time = self.link_rate.map_or(std::time::Duration::ZERO, |r| {
            std::time::Duration::from_secs_f64((max_frame + 9) as f64 / r.0.max(1) as f64)
        });
        stall + 3 * self.link_delay.0 + frame_time
    }

    pub fn total_streams(&self) -> u32 {
        self.connections * self.streams
    }

    /// Messages per second offered over all streams and connections.
    pub fn total_rate(&self) -> f64 {
        match &self.stream_rates {
            Some(r) => r.iter().sum::<f64>() * self.connections as f64,
            None => self.rate,
        }
    }

    /// Messages per second one schedule offers: HTTP/2 stream `stream`'s
    /// of a connection (ids 1, 3, 5, … in the order h2 opened them), or
    /// with --rpc unary a whole connection's (its calls take them in turn).
    pub fn rate_of(&self, stream: u32) -> f64 {
        if self.rpc == crate::overload::RpcKind::Unary {
            return self.total_rate() / f64::from(self.connections);
        }
        match &self.stream_rates {
            Some(r) => r[((stream.saturating_sub(1) / 2) as usize).min(r.len() - 1)],
            None => self.rate / self.total_streams() as f64,
        }
    }
}

/// How each RPC's request is built: its messages, what the method
/// streams back, and the metadata sent with it.
#[derive(Clone, Debug, Default)]
pub struct Call {
    pub codec: Codec,
    pub streaming: Streaming,
    pub metadata: http::HeaderMap,
}

pub struct ClientCtx {
    pub opts: ClientOpts,
    pub target: Target,
    pub call: Call,
    pub capture: CapturePayload,
    pub rec: Recorder,
    pub live: Arc<Live>,
    /// Connection ids (in `run`, apart from its server's).
    pub conn_ids: crate::tap::ConnIds,
    /// Flips to true on Ctrl-C: streams reset, unsent messages are recorded.
    pub interrupt: watch::Receiver<bool>,
    /// `Some(abandon)` (`run --shutdown-drain`): at Ctrl-C a stream is
    /// half-closed instead of reset and its answer awaited while the server
    /// drains, until `abandon` flips (a second Ctrl-C). A stall still
    /// cancels.
    pub graceful: Option<watch::Receiver<bool>>,
    /// Set before `interrupt` flips when the run stops for a failure
    /// (`--trace-limit`, a full disk): its few words, which the RPCs it
    /// stops give as their `rpc_end` message instead of "interrupted".
    pub stopped_for: Arc<std::sync::OnceLock<&'static str>>,
    /// A unary client has said that the server allows fewer concurrent
    /// streams than --streams (said once a run, not once a connection).
    pub stream_limit_said: std::sync::atomic::AtomicBool,
    /// Unary connections that ended early, replaced (the `unary` module).
    pub replaced: Replaced,
}

/// What the replacing of unary connections has to tell.
#[derive(Default)]
pub struct Replaced {
    /// The first replacement has been said (once a run).
    said: std::sync::atomic::AtomicBool,
    /// Connections replaced, said at the end of the run.
    count: std::sync::atomic::AtomicU64,
    /// A connection whose schedule stopped before its end, not replaced
    /// (or whose replacement could not connect): the first one's words.
    /// The run fails with them once every connection has ended.
    failed: std::sync::OnceLock<String>,
}

impl Replaced {
    fn fail(&self, why: String) {
        let _ = self.failed.set(why);
    }
}

impl ClientCtx {
    /// Why `interrupt` flipped, as an RPC's `rpc_end` says it.
    fn interrupted_why(&self) -> &'static str {
        self.stopped_for.get().copied().unwrap_or("interrupted")
    }

    /// Why messages a stop left unsent were never sent: the stall watcher
    /// ended the run, or an interrupt (Ctrl-C, a stop for a failure).
    fn stopped_reason(&self) -> NeverSentReason {
        if self.live.stalled.load(Relaxed) {
            NeverSentReason::Stalled
        } else {
            NeverSentReason::Interrupted
        }
    }
}

/// A message of h2's about a failed connection (`no response: …`,
/// `sending: …`, `reading …: …`, `could not open the stream: …`), with what
/// the tap knows of why it failed, when it knows. Not a message the server
/// sent (`peer_said`: its `grpc-message` may read like one of those).
pub(crate) fn with_connection_cause(
    outcome: &mut RpcOutcome,
    cause: &crate::tap::CloseReason,
    peer_said: bool,
) {
    let from_h2 = [
        "no response: ",
        "sending: ",
        "reading the reply: ",
        "reading outcomes: ",
        "reading trailers: ",
        "could not open the stream: ",
    ]
    .iter()
    .any(|p| outcome.message.starts_with(p));
    if let Some(why) = cause
        .peek()
        .filter(|_| from_h2 && !peer_said && outcome.status != status::OK)
    {
        // h2 passed the socket's error on as its own: said once.
        let socket_said = why
            .split_once(" error: ")
            .is_some_and(|(_, e)| outcome.message.ends_with(e));
        if !socket_said {
            outcome.message = format!("{} (the connection: {why})", outcome.message);
        }
        // The tap reads TLS records only where the client spoke cleartext.
        if why.contains(crate::wire::TLS_RECORD) {
            outcome.message.push_str(
                "; add --tls (with --ca FILE, or --insecure, for a certificate no public CA signed)",
            );
        }
    }
}

/// Records messages never handed to h2 (`never_sent`, for `reason`) on
/// `stream` at `t`, one event per run of consecutive sequence numbers, and
/// counts them.
fn record_unsent(
    ctx: &ClientCtx,
    conn: u32,
    stream: u32,
    t: u64,
    reason: NeverSentReason,
    unsent: Vec<u64>,
) {
    let n = unsent.len() as u64;
    for (seq, count) in runs(unsent) {
        ctx.rec
            .emit(Endpoint::Client, conn, stream, t, KindId::NeverSent, || {
                Kind::NeverSent(NeverSentEv { seq, reason, count })
            });
    }
    Live::add(&ctx.live.never_sent, n);
}

/// `seqs` as contiguous runs, `(first, count)`, in order.
fn runs(mut seqs: Vec<u64>) -> Vec<(u64, u64)> {
    seqs.sort_unstable();
    let mut out: Vec<(u64, u64)> = vec![];
    for seq in seqs {
        match out.last_mut() {
            Some((first, count)) if *first + *count == seq => *count += 1,
            _ => out.push((seq, 1)),
        }
    }
    out
}

/// The client's `rpc_end` of `outcome` on `stream`. An RPC h2 never gave a
/// stream (the connection failed first) ends on the connection's stream 0,
/// with no `rpc_start` (no request was sent), so the trace, and the exit
/// code read from it, say that an RPC failed.
pub(crate) fn record_rpc_end(ctx: &ClientCtx, stream: u32, outcome: &RpcOutcome) {
    ctx.rec.emit(
        Endpoint::Client,
        outcome.conn,
        stream,
        now_ns(),
        KindId::RpcEnd,
        || {
            Kind::RpcEnd(RpcEndEv {
                status: outcome.status,
                message: outcome.message.clone(),
            })
        },
    );
}

/// The request headers of one gRPC call to `path` on the target: ours
/// first, then `-H` metadata (a user-agent given with -H replaces ours).
pub(crate) fn grpc_request(ctx: &ClientCtx, path: &str) -> http::Request<()> {
    grpc_request_to(&ctx.target, path, ctx.opts.deadline(), &ctx.call.metadata)
}

/// [`grpc_request`] to `target` with `deadline` and `metadata` (the
/// reflection request, before the run, carries them too: a server may
/// put reflection behind the same credentials).
pub(crate) fn grpc_request_to(
    target: &Target,
    path: &str,
    deadline: std::time::Duration,
    metadata: &http::HeaderMap,
) -> http::Request<()> {
    let mut req = http::Request::post(format!(
        "{}://{}{}",
        target.scheme(),
        target.authority,
        path
    ))
    .header(http::header::CONTENT_TYPE, "application/grpc")
    .header("te", "trailers")
    .header("grpc-timeout", grpc::format_timeout(deadline))
    .header(
        http::header::USER_AGENT,
        concat!("h2probe/", env!("CARGO_PKG_VERSION")),
    )
    .body(())
    .expect("static request");
    let mut last = None;
    for (name, value) in metadata {
        if last.as_ref() != Some(name) {
            req.headers_mut().remove(name);
            last = Some(name.clone());
        }
        req.headers_mut().append(name, value.clone());
    }
    req
}

/// What one RPC ended with.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RpcOutcome {
    pub conn: u32,
    pub stream: u32,
    pub status: u32,
    pub message: String,
    pub reply: Option<Reply>,
    /// The last reply of a method described by `--proto`, as protobuf JSON.
    pub reply_json: Option<String>,
    /// The calls that ended alike (same status and message) this outcome
    /// stands for, itself included: 1 but for a unary connection's kept
    /// calls ([`unary`]'s `Kept`), where 0 is a call whose kind was not
    /// counted.
    pub alike: u64,
    /// The server answered it (response headers came): a connection that
    /// answered a call served, and is replaced when it ends early.
    #[serde(skip)]
    pub answered: bool,
    /// Its message wholly sent, its deadline passed while it waited for
    /// the answer: the server held it (a unary connection's served, see
    /// `unary::Lanes::answered`, once its server has answered a call).
    #[serde(skip)]
    pub held_to_deadline: bool,
}

impl RpcOutcome {
    /// An RPC that has no stream yet: UNAVAILABLE until it opens one and the
    /// server says otherwise.
    fn unopened(conn: u32) -> Self {
        RpcOutcome {
            conn,
            stream: 0,
            status: status::UNAVAILABLE,
            message: String::new(),
            reply: None,
            reply_json: None,
            alike: 1,
            answered: false,
            held_to_deadline: false,
        }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Reply {
    pub received: u64,
    pub completed: u64,
    pub discarded: u64,
}

/// Runs every connection and stream to the end; returns one outcome per RPC.
pub async fn run(ctx: Arc<ClientCtx>) -> anyhow::Result<Vec<RpcOutcome>> {
    ctx.opts.validate()?;
    let start = now_ns() + 20_000_000; // a common start for every stream's schedule
    let mut conns = tokio::task::JoinSet::new();
    for c in 0..ctx.opts.connections {
        let ctx = ctx.clone();
        conns.spawn(async move { connection(ctx, c, start).await });
    }
    let mut out = vec![];
    while let Some(r) = conns.join_next().await {
        out.extend(r.context("client connection task")??);
    }
    let replaced = ctx.replaced.count.load(Relaxed);
    if replaced > 0 {
        crate::say!(
            "{replaced} connection{s} ended before {their} schedule and {were} replaced",
            s = if replaced == 1 { "" } else { "s" },
            their = if replaced == 1 { "its" } else { "their" },
            were = if replaced == 1 { "was" } else { "were" },
        );
    }
    if let Some(e) = ctx.replaced.failed.get() {
        anyhow::bail!("{e}");
    }
    out.sort_by_key(|o| (o.conn, o.stream));
    Ok(out)
}

/// The `index`-th connection, and with `--rpc unary` those that replace it
/// when it ends before its schedule (see [`unary`]), each going on with the
/// schedule where the one before stopped while the one before ends its
/// calls in flight.
async fn connection(
    ctx: Arc<ClientCtx>,
    index: u32,
    start: u64,
) -> anyhow::Result<Vec<RpcOutcome>> {
    let unary = ctx.opts.rpc == crate::overload::RpcKind::Unary;
    // Aborted when dropped: the tasks of a run that stopped on an error end
    // with it (plain handles left them sending and recording while the
    // trace was finished).
    let mut ending: Vec<AbortOnDropHandle<_>> = vec![];
    // Connections handed over with calls in flight and none answered.
    let mut on_trust: Vec<(u32, unary::Trust)> = vec![];
    let mut first = 0;
    let mut replacing: Option<unary::Handover> = None;
    // The server has answered a call of one of the chain's connections.
    let answered_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let last = loop {
        let (tx, handed) = tokio::sync::oneshot::channel();
        let slot = Schedule {
            index,
            start,
            first,
            handover: unary.then_some(tx),
            replacement: replacing.is_some(),
            carried: replacing.as_ref().map(|h| (h.conn, h.carried.clone())),
            answered_once: answered_once.clone(),
        };
        let ctx2 = ctx.clone();
        let due = replacing.as_ref().map(|h| h.due);
        let task = AbortOnDropHandle::new(tokio::spawn(async move {
            if let Some(due) = due {
                // A replacement opens when its first message is due; an
                // interrupt stops its wait.
                let mut interrupt = ctx2.interrupt.clone();
                tokio::select! {
                    biased;
                    _ = crate::live::flag_set(&mut interrupt) => return Ok(vec![]),
                    _ = tokio::time::sleep_until(to_instant(due)) => {}
                }
            }
            open_connection(ctx2, slot).await
        }));
        match handed.await {
            // After an interrupt nothing is replaced (the handover may have
            // crossed it).
            Ok(h) if *ctx.interrupt.borrow() => {
                unsent_carried(&ctx, &h, None);
                break task;
            }
            Ok(h) => {
                // One replaced on trust whose calls have all ended since,
                // none answered, served nothing: the chain stops there (a
                // server closing each connection at once, stream ids h2
                // gave before it had seen them, replaced one per message).
                if let Some((conn, _)) = on_trust.iter().find(|(_, trust)| trust.broken()) {
                    ctx.replaced.fail(format!(
                        "connection {conn} ended without an answer to any call of it, so \
                         connection {}, which replaced it and ended in its turn ({}), was not \
                         replaced: {}",
                        h.conn,
                        h.why,
                        h.cut_short()
                    ));
                    unsent_carried(&ctx, &h, None);
                    break task;
                }
                if let Some(trust) = &h.trust {
                    on_trust.push((h.conn, trust.clone()));
                }
                ctx.replaced.count.fetch_add(1, Relaxed);
                if !ctx.replaced.said.swap(true, Relaxed) {
                    let goes_on = if h.next == schedule::DONE {
                        "the messages it had offered and not sent go over a new connection"
                    } else {
                        "the schedule goes on over a new connection from its next message \
                         (those waiting first)"
                    };
                    crate::say!(
                        "connection {}: {}; {goes_on}, as a gRPC channel's calls do (said once \
                         a run, counted at its end; each connection is a conn_open in the \
                         trace, its end's reason in its conn_close)",
                        h.conn,
                        h.why
                    );
                }
                ending.push(task);
                first = h.next;
                replacing = Some(h);
            }
            Err(_) => break task,
        };
    };
    let mut out = vec![];
    let last = last.await.context("client connection task")?;
    // A replacement that never opened (an interrupt while it waited or
    // connected, a failure to connect) took nothing, and the messages due
    // meanwhile were offered to no connection.
    if let Some(h) = &replacing {
        unsent_carried(&ctx, h, Some((index, start)));
    }
    for task in ending {
        out.extend(task.await.context("client connection task")??);
    }
    match (last, replacing) {
        (Ok(o), _) => out.extend(o),
        (Err(e), None) => return Err(e),
        // The calls so far are accounted: the run fails once every
        // connection has ended.
        (Err(e), Some(h)) => {
            ctx.replaced.fail(format!(
                "connection {}: {}, and no new connection could take its place ({e:#}), \
                 so {}",
                h.conn,
                h.why,
                h.cut_short()
            ));
        }
    }
    Ok(out)
}

/// The messages handed over with `h` if no replacement took them (it
/// never opened): the unsent messages of the connection that scheduled
/// them. With the schedule's place (`slot`: its index and start), a
/// replacement that was due to open also leaves the messages that fell
/// due while it waited to connect (from `h.next` until now, within
/// --duration): offered to no connection, they are the replaced one's,
/// each `schedule` at its time and then `never_sent`. (They were left
/// unrecorded: an interrupt mid-connect lost them from `scheduled`.)
fn unsent_carried(ctx: &Arc<ClientCtx>, h: &unary::Handover, slot: Option<(u32, u64)>) {
    let Some(left) = h.carried.take() else {
        return;
    };
    let reason = if *ctx.interrupt.borrow() {
        ctx.stopped_reason()
    } else {
        NeverSentReason::StreamError
    };
    if !left.is_empty() {
        let seqs = left.iter().map(|p| p.seq).collect();
        record_unsent(ctx, h.conn, 0, now_ns(), reason, seqs);
    }
    if let Some(slot) = slot.filter(|_| h.next != schedule::DONE) {
        schedule::fell_due(ctx, h.conn, slot, h.next, reason);
    }
}

/// Opens a connection and runs its RPCs (a unary connection's schedule
/// from message `first` on, see [`unary::calls`]).
async fn open_connection(ctx: Arc<ClientCtx>, slot: Schedule) -> anyhow::Result<Vec<RpcOutcome>> {
    let connected = if slot.replacement {
        // An interrupt stops a replacement still connecting.
        let mut interrupt = ctx.interrupt.clone();
        tokio::select! {
            biased;
            _ = crate::live::flag_set(&mut interrupt) => return Ok(vec![]),
            c = ctx.target.connect() => c?,
        }
    } else {
        ctx.target.connect().await?
    };
    let conn_id = ctx.conn_ids.next_id();
    let cfg = TapConfig {
        endpoint: Endpoint::Client,
        conn: conn_id,
        capture: ctx.capture,
    };
    let shape = crate::link::Shape {
        delay: ctx.opts.link_delay.0,
        rate: ctx.opts.link_rate.map(|r| r.0),
    };
    use target::Transport;
    let addrs = (connected.local, connected.peer);
    match (connected.io, shape.is_transparent()) {
        (Transport::Tcp(s), true) => secured(ctx, s, addrs, cfg, slot).await,
        (Transport::Tcp(s), false) => {
            let line = crate::link::shaped(s, shape);
            secured(ctx, line, addrs, cfg, slot).await
        }
        (Transport::Unix(s), true) => secured(ctx, s, addrs, cfg, slot).await,
        (Transport::Unix(s), false) => {
            let line = crate::link::shaped_unix(s, shape);
            secured(ctx, line, addrs, cfg, slot).await
        }
    }
}

/// Where a connection's RPCs sit in the run's schedule: the connection's
/// `index` among --connections, the common `start`, and for unary calls
/// the first message, where to hand the rest if the connection ends before
/// its schedule, and whether it replaces one.
struct Schedule {
    index: u32,
    start: u64,
    first: u64,
    handover: Option<tokio::sync::oneshot::Sender<unary::Handover>>,
    replacement: bool,
    /// The messages the connection it replaces handed over, and that one.
    carried: Option<(u32, unary::Carried)>,
    /// The server has answered a call of this connection or of one before
    /// it in its chain (see `unary::Lanes::answered`).
    answered_once: Arc<std::sync::atomic::AtomicBool>,
}

/// Puts TLS (if asked for) between the transport and the tap: the tap then
/// records plaintext frames, and a [`SocketWatch`](crate::tap::SocketWatch)
/// on the transport records `socket_blocked`.
async fn secured<T>(
    ctx: Arc<ClientCtx>,
    io: T,
    (local, peer): (String, String),
    cfg: TapConfig,
    slot: Schedule,
) -> anyhow::Result<Vec<RpcOutcome>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn_id = cfg.conn;
    let Some(tls) = ctx.target.tls.clone() else {
        let tap = Tap::with_addrs(io, local, peer, cfg, ctx.rec.clone());
        return drive(ctx, tap, conn_id, slot).await;
    };
    let watched = crate::tap::SocketWatch::new(io, cfg, ctx.rec.clone());
    let stream = ctx.target.handshake(&tls, watched, &peer).await?;
    let tap = Tap::with_addrs(stream, local, peer, cfg, ctx.rec.clone()).above_tls();
    drive(ctx, tap, conn_id, slot).await
}

/// Runs the HTTP/2 connection and its streams over a tapped transport.
async fn drive<T>(
    ctx: Arc<ClientCtx>,
    tap: Tap<T>,
    conn_id: u32,
    slot: Schedule,
) -> anyhow::Result<Vec<RpcOutcome>>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let w = ctx.opts.client_stream_window.0 as u32;
    // Why the connection failed, as the tap saw it (a server that is not
    // HTTP/2, a reset): h2's error names neither.
    let cause = crate::tap::CloseReason::default();
    let tap = tap.with_close_reason(cause.clone());
    // No stream opens before the server's first SETTINGS (as grpc-go waits
    // for it): h2 otherwise assumes no concurrency limit until then, and a
    // server advertising SETTINGS_MAX_CONCURRENT_STREAMS below --streams
    // refuses the streams that raced ahead of its SETTINGS (REFUSED_STREAM)
    // where they should have waited. A server that sends no limit leaves
    // none (h2 applies "unlimited" on the first SETTINGS without one).
    let (send_req, conn) = h2::client::Builder::new()
        .initial_max_send_streams(0)
        .initial_window_size(w)
        .initial_connection_window_size(w.max(65_535))
        .handshake::<_, Bytes>(tap)
        .await
        .context("HTTP/2 handshake")?;
    let driver = tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("client connection {conn_id}: {e}");
        }
    });
    let mut out = vec![];
    if ctx.opts.rpc == crate::overload::RpcKind::Unary {
        out = unary::calls(
            &ctx,
            send_req,
            conn_id,
            slot.index,
            slot.start,
            slot.first,
            slot.replacement,
            slot.handover,
            slot.carried,
            slot.answered_once,
            &cause,
        )
        .await?;
    } else {
        let Schedule { index, start, .. } = slot;
        let mut streams = tokio::task::JoinSet::new();
        for s in 0..ctx.opts.streams {
            let ctx = ctx.clone();
            let sr = send_req.clone();
            let k = index * ctx.opts.streams + s;
            let cause = cause.clone();
            if ctx.opts.rpc == crate::overload::RpcKind::Exchange {
                streams.spawn(async move {
                    Some(exchange::rpc(ctx, sr, conn_id, k, start, cause).await)
                });
            } else {
                let messages = Messages::Scheduled { k, start };
                streams.spawn(async move {
                    Some(rpc(ctx, Open::With(sr), conn_id, messages, cause).await)
                });
            }
        }
        drop(send_req);
        while let Some(r) = streams.join_next().await {
            out.extend(r.context("client stream task")?);
        }
    }
    // Every RPC has ended: the connection closes (its last frames, GOAWAY,
    // then EOF) within CLOSE_GRACE or is dropped, so a server that stopped
    // reading cannot hold the client (it did, for as long as it liked).
    let mut driver = driver;
    if tokio::time::timeout(CLOSE_GRACE, &mut driver)
        .await
        .is_err()
    {
        driver.abort();
        let _ = driver.await;
        crate::say!(
            "connection {conn_id}: the server did not take its last bytes within {}; closed",
            crate::config::Dur(CLOSE_GRACE)
        );
    }
    Ok(out)
}

/// How long a connection may take to close once its RPCs have ended (the
/// server's --drain-timeout default).
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// One queued message, waiting to be sent.
#[derive(Debug)]
struct Pending {
    seq: u64,
    scheduled: u64,
}

/// What an RPC sends.
enum Messages {
    /// Its own open-loop schedule (Ingest): the `k`-th of all streams,
    /// from the common `start`.
    Scheduled { k: u32, start: u64 },
    /// One message its connection's schedule offered (a unary call), the
    /// payload the connection made once for all its calls, and the call's
    /// deadline: `due` (`t`, ns: its message's scheduled time +
    /// --deadline) and the time `left` to it when its request was made
    /// (its grpc-timeout), ns.
    One {
        msg: Pending,
        payload: Bytes,
        due: u64,
        left: u64,
    },
}

/// What h2 says when a stream cannot open or gets no response: a GOAWAY
/// without an error (the server shutting down) read "connection error
/// received: not a result of an error" (for a call opened after the
/// server's GOAWAY left, before it arrived, too).
pub(crate) fn h2_error_text(e: &h2::Error) -> String {
    match e.reason() {
        Some(h2::Reason::NO_ERROR) if e.is_go_away() => {
            "the server sent GOAWAY (NO_ERROR: it is closing the connection)".into()
        }
        // h2 says "connection error received: detected excessive load
        // generating behavior", naming neither GOAWAY nor its code.
        Some(r) if e.is_go_away() && e.is_remote() => {
            format!("the server sent GOAWAY ({r:?}: {r})")
        }
        _ => e.to_string(),
    }
}

/// How an RPC gets its stream.
enum Open {
    /// Opens it with its own handle (an Ingest RPC: one per --streams, all
    /// opened at once).
    With(SendRequest<Bytes>),
    /// Opened already, in its lane's turn (a unary call; see
    /// [`unary`]'s `Turn`: one whose stream h2 refused never gets here).
    Opened((h2::client::ResponseFuture, SendStream<Bytes>)),
}

/// One RPC: open its stream, schedule (or take its one message), send,
/// half-close, read the answer.
async fn rpc(
    ctx: Arc<ClientCtx>,
    open: Open,
    conn: u32,
    messages: Messages,
    cause: crate::tap::CloseReason,
) -> RpcOutcome {
    let opts = &ctx.opts;
    let mut outcome = RpcOutcome::unopened(conn);
    // An event of this RPC, built only once the recorder has a slot for it.
    macro_rules! emit {
        ($stream:expr, $t:expr, $variant:ident($ev:expr) $(,)?) => {
            ctx.rec.emit(
                Endpoint::Client,
                conn,
                $stream,
                $t,
                KindId::$variant,
                || Kind::$variant($ev),
            )
        };
    }
    let deadline = match &messages {
        Messages::One { due, .. } => *due,
        Messages::Scheduled { .. } => now_ns() + opts.deadline().as_nanos() as u64,
    };
    let opened = match open {
        Open::With(sr) => {
            async {
                let mut sr = sr.ready().await?;
                sr.send_request(grpc_request(&ctx, opts.call_path()), false)
            }
            .await
        }
        Open::Opened(r) => Ok(r),
    };
    let (resp, mut send) = match opened {
        Ok(x) => x,
        Err(e) => {
            outcome.message = format!("could not open the stream: {}", h2_error_text(&e));
            with_connection_cause(&mut outcome, &cause, false);
            record_rpc_end(&ctx, 0, &outcome);
            return outcome;
        }
    };
    let stream = send.stream_id().as_u32();
    outcome.stream = stream;
    // A bidirectional method's replies are read while sending: a server that
    // answers each message must never wait for the client's receive window.
    let codec = ctx.call.codec.clone();
    let (mut resp, mut answering) = if ctx.call.streaming.replies {
        (
            None,
            Some(tokio::spawn(read_answer(resp, codec.clone(), false))),
        )
    } else {
        (Some(resp), None)
    };
    emit!(
        stream,
        now_ns(),
        RpcStart(RpcStartEv {
            path: opts.call_path().to_string(),
            deadline_ns: Some(match &messages {
                Messages::One { left, .. } => *left,
                Messages::Scheduled { .. } => opts.deadline().as_nanos() as u64,
            }),
            framing: None,
            release: None,
            withhold_after: None,
        }),
    );

    // The open-loop schedule runs in its own task and never waits for the sender.
    let (one, backlog, payload) = match &messages {
        Messages::One { payload, .. } => (true, 1, payload.clone()),
        Messages::Scheduled { .. } => (
            false,
            opts.max_pending as usize,
            payload_bytes(opts.payload.0 as usize),
        ),
    };
    let (tx, mut rx) = mpsc::channel::<Pending>(backlog);
    let scheduler = match messages {
        Messages::Scheduled { k, start } => Some(schedule::spawn(
            &ctx,
            schedule::Slot {
                conn,
                stream,
                k,
                start,
                deadline,
                rate: opts.rate_of(stream),
                idle: None,
                first: 0,
                next: None,
                gone: None,
            },
            tx,
            &payload,
        )),
        Messages::One { msg: p, .. } => {
            // The channel has room for it; closed behind it, so the send
            // half-closes after it.
            let _ = tx.try_send(p);
            drop(tx);
            None
        }
    };

    let in_progress = AtomicI64::new(-1);
    let mut interrupt = ctx.interrupt.clone();
    let sending = send_all(
        &ctx,
        conn,
        stream,
        &mut rx,
        &mut send,
        &in_progress,
        &payload,
        one,
    );
    let until_deadline = tokio::time::sleep_until(to_instant(deadline));
    tokio::pin!(until_deadline);
    let stopped: Option<NeverSentReason> = tokio::select! {
        // The interrupt first: the schedule stops at it and closes the
        // channel, which ends `sending` as if every message had been
        // offered; taken that way (at random: 3 runs in 13 with
        // --trace-limit), the stream half-closed and its end lost the
        // "client stopped: " a stop while sending has.
        biased;
        _ = crate::live::flag_set(&mut interrupt) => Some(ctx.stopped_reason()),
        r = sending => match r {
            Ok(()) => None,
            Err(e) => {
                outcome.message = send::send_error_text(&e);
                Some(NeverSentReason::StreamError)
            }
        },
        _ = &mut until_deadline => Some(NeverSentReason::Deadline),
    };
    if let Some(scheduler) = scheduler {
        scheduler.abort();
        let _ = scheduler.await;
    }
    if let Some(reason) = stopped {
        // Everything not fully handed to h2 is recorded, never skipped.
        let t = now_ns();
        let cur = in_progress.load(Relaxed);
        let mut unsent: Vec<u64> = if cur >= 0 { vec![cur as u64] } else { vec![] };
        rx.close();
        while let Ok(p) = rx.try_recv() {
            unsent.push(p.seq);
        }
        record_unsent(&ctx, conn, stream, t, reason, unsent);
        let drains = ctx
            .graceful
            .as_ref()
            .is_some_and(|abandon| !*abandon.borrow());
        if reason == NeverSentReason::Interrupted && drains {
            // The server drains what it holds and answers: half-close and
            // wait for it below (unless abandoned already: a stop for a
            // failure, which drains nothing).
            let _ = send.send_data(Bytes::new(), true);
        } else if reason != NeverSentReason::StreamError {
            send.send_reset(h2::Reason::CANCEL);
            if let Some(task) = &answering {
                task.abort();
            }
            outcome.status = if reason == NeverSentReason::Deadline {
                status::DEADLINE_EXCEEDED
            } else {
                status::CANCELLED
            };
            outcome.message = format!(
                "client stopped: {}",
                match reason {
                    NeverSentReason::Interrupted => ctx.interrupted_why(),
                    other => other.as_str(),
                }
            );
            emit!(
                stream,
                t,
                RpcEnd(RpcEndEv {
                    status: outcome.status,
                    message: outcome.message.clone(),
                }),
            );
            return outcome;
        }
    }

    // Wait for the answer, still within the deadline.
    let reading = async {
        match (resp.take(), answering.as_mut()) {
            (Some(resp), _) => read_answer(resp, codec, true).await,
            (None, Some(task)) => task
                .await
                .unwrap_or_else(|e| Err((status::INTERNAL, format!("reading the replies: {e}")))),
            (None, None) => unreachable!("the response is read one way or the other"),
        }
    };
    // Ctrl-C ends the wait, or with `graceful` the second one does.
    let mut abandon = ctx.graceful.clone();
    let stop = async {
        crate::live::flag_set(&mut interrupt).await;
        if ctx.live.stalled.load(Relaxed) {
            return "ended by the stall watcher".to_string();
        }
        if let Some(abandon) = abandon.as_mut() {
            crate::live::flag_set(abandon).await;
            // A stop for a failure abandons too, without a second interrupt.
            return match ctx.stopped_for.get() {
                Some(cause) => cause.to_string(),
                None => "abandoned at a second interrupt while the server drained".to_string(),
            };
        }
        ctx.interrupted_why().to_string()
    };
    let answer = tokio::select! {
        r = reading => r,
        _ = &mut until_deadline => {
            outcome.held_to_deadline = true;
            Err((status::DEADLINE_EXCEEDED, "deadline exceeded waiting for the response".to_string()))
        }
        why = stop => Err((status::CANCELLED, why)),
    };
    let peer_said = matches!(&answer, Ok(a) if !a.message.is_empty());
    match answer {
        Ok(answer::Answered {
            code,
            message,
            reply,
            reply_json,
        }) => {
            outcome.status = code;
            outcome.answered = true;
            if !message.is_empty() || outcome.message.is_empty() {
                outcome.message = message;
            }
            outcome.reply = reply;
            outcome.reply_json = reply_json;
        }
        Err((code, msg)) => {
            send.send_reset(h2::Reason::CANCEL);
            outcome.status = code;
            outcome.message = msg;
        }
    }
    with_connection_cause(&mut outcome, &cause, peer_said);
    emit!(
        stream,
        now_ns(),
        RpcEnd(RpcEndEv {
            status: outcome.status,
            message: outcome.message.clone(),
        }),
    );
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    /// h2's messages about a failed stream or connection carry the tap's
    /// reason, those of reading the reply too (they did not); a message
    /// the server sent never does, even one that reads like h2's.
    #[test]
    fn only_h2s_messages_carry_the_connections_cause() {
        let cause = crate::tap::CloseReason::default();
        cause.set("read error: Connection reset by peer".into());
        let ended = |message: &str| RpcOutcome {
            conn: 1,
            stream: 1,
            status: status::UNAVAILABLE,
            message: message.into(),
            reply: None,
            reply_json: None,
            alike: 1,
            answered: false,
            held_to_deadline: false,
        };
        for (message, peer_said, carries) in [
            ("no response: connection closed", false, true),
            ("reading the reply: stream error", false, true),
            ("reading outcomes: stream error", false, true),
            ("reading trailers: stream error", false, true),
            ("client stopped: deadline", false, false),
            ("sending: out of capacity", true, false),
        ] {
            let mut o = ended(message);
            with_connection_cause(&mut o, &cause, peer_said);
            let carried = o
                .message
                .ends_with("(the connection: read error: Connection reset by peer)");
            assert_eq!(carried, carries, "{message}: {}", o.message);
        }
        // h2 passing the socket's own error on: said once, not twice.
        let mut o = ended("no response: Connection reset by peer");
        with_connection_cause(&mut o, &cause, false);
        assert_eq!(o.message, "no response: Connection reset by peer");
    }
}
