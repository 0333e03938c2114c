//! The probe server: gRPC client-streaming on `h2` directly, with the
//! `release_capacity` point and the application queue as knobs.

pub mod exchange;
mod hyper_stack;
pub mod listen;
mod queue;
mod rpc;

use crate::config::CapturePayload;
use crate::config::{Dur, Framing, QueuePolicy, ReleasePoint, ReleaseSpec, Size, Stack};
use crate::grpc;
use crate::live::Live;
use crate::tap::{CloseReason, Tap, TapConfig};
use crate::trace::schema::{AcceptErrorEv, ConnRefusedEv, Endpoint, Kind, KindId};
use crate::trace::Recorder;
use anyhow::Context as _;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::task::TaskTracker;

/// `--queue-limit`'s default, in messages.
pub const DEFAULT_QUEUE_LIMIT: u32 = 1_000_000;

/// Server knobs (shared by `serve` and `run`).
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct ServerOpts {
    /// When release_capacity is called for a message's bytes.
    ///
    /// frame: as each chunk arrives (what hyper/tonic do); decode: once the
    /// whole message is decoded; start: when a worker takes it; complete: when
    /// the worker finishes (credit then equals application capacity).
    /// Per stream: `complete,1=frame` releases stream 1 on frame receipt and
    /// every other stream on completion (stream ids are odd: 1, 3, 5, …).
    #[arg(long, default_value = "frame", value_name = "POINT[,ID=POINT…]")]
    pub release: ReleaseSpec,

    /// How decoded messages reach the workers: direct, unbounded or bounded:K.
    ///
    /// direct: the handler processes each message before reading the next;
    /// unbounded: enqueue everything at once (see --queue-limit);
    /// bounded:K: reserve one of K slots before reading the next message.
    #[arg(long, default_value = "unbounded", value_name = "POLICY")]
    pub queue: QueuePolicy,

    /// Simulated work per message (a timer, like the article's worker; 0 = none).
    #[arg(long, default_value = "10ms", value_name = "DURATION")]
    pub service_time: Dur,

    /// Workers per RPC (ignored by --queue direct, which works inline).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub workers: u32,

    /// SETTINGS_INITIAL_WINDOW_SIZE the server advertises (per-stream receive window).
    #[arg(long, default_value = "65535", value_name = "SIZE")]
    pub stream_window: Size,

    /// Connection-level receive window (65,535 is the protocol default).
    #[arg(long, default_value = "65535", value_name = "SIZE")]
    pub conn_window: Size,

    /// SETTINGS_MAX_FRAME_SIZE the server advertises (16384 to 16777215).
    #[arg(long, default_value = "16384", value_name = "SIZE")]
    pub max_frame_size: Size,

    /// SETTINGS_MAX_CONCURRENT_STREAMS the server advertises.
    #[arg(long, default_value_t = 100)]
    pub max_concurrent_streams: u32,

    /// Largest message accepted; larger ones fail with RESOURCE_EXHAUSTED
    /// before any of it is buffered.
    #[arg(long, default_value = "4MiB", value_name = "SIZE")]
    pub max_message_size: Size,

    /// Safety limit of the unbounded queue, in messages; beyond it messages
    /// are discarded with reason queue_limit (never silently).
    #[arg(long, default_value_t = DEFAULT_QUEUE_LIMIT)]
    pub queue_limit: u32,

    /// On shutdown (Ctrl-C), finish queued work before answering instead of
    /// discarding it (reason shutdown). In `run` the client then half-closes
    /// its streams instead of cancelling them and waits for the answers; a
    /// second Ctrl-C cuts the drain short.
    #[arg(long)]
    pub shutdown_drain: bool,

    /// Period of the per-RPC `sample` events (queue, owned bytes, h2 capacity, RSS).
    #[arg(long, default_value = "50ms", value_name = "DURATION")]
    pub sample_interval: Dur,

    /// Body framing: grpc (length-prefixed protobuf) or raw:SIZE (any POST/PUT
    /// body as SIZE-byte work units, for h2load, curl, nghttp).
    #[arg(long, default_value = "grpc", value_name = "FRAMING")]
    pub framing: Framing,

    /// HTTP/2 server stack that serves the RPCs.
    #[arg(long, value_enum, default_value_t = Stack::H2)]
    pub stack: Stack,

    /// A connection that has not completed the HTTP/2 handshake (client
    /// preface and SETTINGS) by then is closed and recorded (not with
    /// `--stack hyper`, whose handshake is its own: there a silent peer is
    /// an idle one).
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub handshake_timeout: Dur,

    /// A connection with no frame in either direction for this long is sent
    /// GOAWAY and closed (recorded). Generous by default: an experiment with
    /// messages minutes apart needs it raised.
    #[arg(long, default_value = "5m", value_name = "DURATION")]
    pub idle_timeout: Dur,

    /// Send each connection GOAWAY (NO_ERROR) this long after it opened, as
    /// grpc-go's MaxConnectionAge does to spread a service's load: its RPCs
    /// in flight finish, new ones go to a new connection (recorded in its
    /// `conn_close`). A lab knob for how clients replace a connection.
    /// [default: none]
    #[arg(long, value_name = "DURATION")]
    pub max_connection_age: Option<Dur>,

    /// On shutdown (Ctrl-C; with `serve`, --for and --exit-after too), how long connections may
    /// take to finish; then the RPCs still draining end UNAVAILABLE, their
    /// connections get a second more to carry that, and the rest are closed
    /// and recorded as such, so the server always ends whatever its peers do.
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub drain_timeout: Dur,

    /// Open connections at most; beyond it a new connection is closed at
    /// once and recorded (`conn_refused`).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// SETTINGS_MAX_HEADER_LIST_SIZE: the largest header block a peer may
    /// send (h2's own default is 16 MiB, which lets a peer park megabytes per
    /// connection in unfinished header blocks; hyper uses 16 KiB).
    #[arg(long, default_value = "16KiB", value_name = "SIZE")]
    pub max_header_list_size: Size,

    /// Framed bytes the application may own at once (decoded, not yet
    /// completed), with the bytes of messages not yet whole, over all RPCs:
    /// past it, the RPC that would exceed it ends with RESOURCE_EXHAUSTED
    /// and its messages are discarded with reason `limit` (the article's
    /// server had such a guard, at 256 MiB).
    #[arg(long, default_value = "256MiB", value_name = "SIZE")]
    pub max_owned_bytes: Size,

    /// Never release stream ID's bytes (an application that stops taking
    /// data): its unreleased bytes drain the connection window shared with
    /// the other streams. `ID:AFTER` starts after AFTER bytes of it arrived.
    /// ID is the HTTP/2 stream id (1, 3, 5, … in a connection).
    #[arg(long, value_name = "ID[:AFTER]")]
    pub stall_stream: Option<StallSpec>,

    /// Drop stream ID's body mid-message without releasing it, as an
    /// application bug would (the RPC then hangs until its deadline or
    /// shutdown). Shows whether h2 returns the dropped stream's credit to the
    /// connection.
    #[arg(long, value_name = "ID")]
    pub drop_stream: Option<u32>,

    /// Run a configuration that can deadlock (late release points with a
    /// message larger than the stream window, or partial messages that
    /// together exhaust the connection window), to study it: instead of
    /// refusing it up front, or answering such a message RESOURCE_EXHAUSTED,
    /// let the stall watcher (`run`'s --stall-timeout) detect it, record it
    /// and end the run.
    #[arg(long)]
    pub allow_deadlock: bool,

    /// Serve TLS (ALPN h2) with this PEM certificate chain (and --tls-key).
    /// The tap still records every frame (it sits above TLS);
    /// SSLKEYLOGFILE=FILE writes the session keys for Wireshark.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,

    /// `serve --client-ca` (mutual TLS): `run`'s own client shows no
    /// certificate, so the flag is serve's, handed over here.
    #[arg(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<std::path::PathBuf>,
    /// Exchange (Part 3): admission slots over all RPCs of the server; an
    /// admitted attempt holds one while queued or in service.
    #[arg(long, default_value_t = 32, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub admission: u32,

    /// Exchange (Part 3): what happens to an attempt that arrives when all
    /// --admission slots are taken.
    ///
    /// wait: hold it for a slot until its deadline (then `expired`), not
    /// reading the stream meanwhile; reject: answer `rejected` at once;
    /// drop: discard it on purpose and answer `dropped` at once.
    #[arg(long, value_enum, default_value_t = crate::overload::WhenFull::Wait, value_name = "POLICY")]
    pub when_full: crate::overload::WhenFull,

    /// The worker's service time over the run, replacing --service-time:
    /// `10ms,12s:40ms,24s:10ms` = 10 ms, then 40 ms from 12 s, 10 ms again
    /// from 24 s after the server's first RPC (steps recorded as
    /// `service_change` events).
    #[arg(long, value_name = "SCHEDULE")]
    pub service_schedule: Option<crate::overload::ServiceSchedule>,
}

/// `--stall-stream ID[:AFTER]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct StallSpec {
    pub stream: u32,
    pub after: u64,
}

impl std::str::FromStr for StallSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<StallSpec, String> {
        let (id, after) = match s.split_once(':') {
            Some((id, after)) => (id, after.parse::<Size>()?.0),
            None => (s, 0),
        };
        let stream = id
            .parse::<u32>()
            .ok()
            .filter(|id| id % 2 == 1)
            .ok_or_else(|| {
                format!("{s:?}: ID must be an odd (client-initiated) stream id, e.g. 3 or 3:64KiB")
            })?;
        Ok(StallSpec { stream, after })
    }
}

impl Default for ServerOpts {
    fn default() -> Self {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct W {
            #[command(flatten)]
            o: ServerOpts,
        }
        W::parse_from(["x"]).o
    }
}

/// Validated server settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub release: ReleaseSpec,
    pub queue: QueuePolicy,
    pub service_time: std::time::Duration,
    pub workers: u32,
    pub stream_window: u32,
    pub conn_window: u32,
    pub max_frame_size: u32,
    pub max_concurrent_streams: u32,
    pub max_message_size: u32,
    pub queue_limit: u32,
    pub shutdown_drain: bool,
    pub sample_interval: std::time::Duration,
    pub framing: Framing,
    pub capture: CapturePayload,
    pub stack: Stack,
    pub handshake_timeout: std::time::Duration,
    pub idle_timeout: std::time::Duration,
    pub max_connection_age: Option<std::time::Duration>,
    pub drain_timeout: std::time::Duration,
    pub max_connections: u32,
    pub max_header_list_size: u32,
    pub max_owned_bytes: u64,
    pub stall_stream: Option<StallSpec>,
    pub drop_stream: Option<u32>,
    /// `--allow-deadlock`: a message that can never arrive within the
    /// stream window is left to stall (the stall watcher records it)
    /// instead of being answered RESOURCE_EXHAUSTED as soon as its length
    /// is known.
    pub allow_deadlock: bool,
    /// `--tls-cert`/`--tls-key`: connections speak TLS.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub admission: u32,
    pub when_full: crate::overload::WhenFull,
    /// --service-schedule, or --service-time as a one-step schedule.
    pub service_schedule: crate::overload::ServiceSchedule,
}

impl ServerOpts {
    /// Checks the options and refuses configurations that cannot work.
    /// `framed_message` is the framed size of the messages to expect, when
    /// known (in `run`), to refuse a window that could never be released.
    pub fn validate(
        &self,
        capture: CapturePayload,
        framed_message: Option<u64>,
        streams_per_conn: Option<u32>,
    ) -> anyhow::Result<ServerConfig> {
        if let Some(id) = self.drop_stream {
            crate::refuse_unless!(
                id % 2 == 1,
                "--drop-stream {id}: ID must be an odd (client-initiated) stream id, e.g. 3"
            );
        }
        let stream_window = self
            .stream_window
            .to_u32("--stream-window")
            .map_err(|e| anyhow::Error::new(crate::config::UsageError(e)))?;
        let conn_window = self
            .conn_window
            .to_u32("--conn-window")
            .map_err(|e| anyhow::Error::new(crate::config::UsageError(e)))?;
        for (flag, window) in [
            ("--stream-window", stream_window),
            ("--conn-window", conn_window),
        ] {
            crate::refuse_unless!(
                window < (1 << 31),
                "{flag} must be at most 2147483647 bytes (RFC 9113 §6.9.1), got {window}"
            );
        }
        crate::refuse_unless!(
            stream_window > 0,
            "--stream-window must be positive: with 0 the client could never send a byte"
        );
        crate::refuse_unless!(conn_window >= 65_535, "--conn-window must be at least 65535: h2 can only raise the connection window above the protocol default");
        let max_frame_size = self
            .max_frame_size
            .to_u32("--max-frame-size")
            .map_err(|e| anyhow::Error::new(crate::config::UsageError(e)))?;
        crate::refuse_unless!(
            (16_384..=16_777_215).contains(&max_frame_size),
            "--max-frame-size must be between 16384 and 16777215 (RFC 9113 §6.5.2), got {max_frame_size}"
        );
        let max_message_size = self
            .max_message_size
            .to_u32("--max-message-size")
            .map_err(|e| anyhow::Error::new(crate::config::UsageError(e)))?;
        let release = self.release.clone();
        let any_late = ReleaseSpec::is_late(release.default)
            || release
                .streams
                .iter()
                .any(|(_, p)| ReleaseSpec::is_late(*p));
        // Of the streams the client opens, when known (a per-stream late
        // point on a stream never opened allows nothing either).
        let opened_late = match streams_per_conn {
            Some(n) => (0..n).any(|i| ReleaseSpec::is_late(release.for_stream(2 * i + 1))),
            None => any_late,
        };
        crate::refuse_unless!(
            opened_late || !self.allow_deadlock,
            "--allow-deadlock lets a late release point stall, but --release {release} releases every stream opened on receipt{}: there is nothing to allow",
            if self.stack == Stack::Hyper { " (the only point --stack hyper has)" } else { "" }
        );
        crate::refuse_unless!(
            self.queue_limit == DEFAULT_QUEUE_LIMIT || self.queue == QueuePolicy::Unbounded,
            "--queue-limit caps the unbounded queue; --queue {} {}",
            self.queue,
            match self.queue {
                QueuePolicy::Bounded(_) => "has its own capacity (bounded:K)",
                _ => "has no queue",
            }
        );
        if let Framing::Raw(unit) = self.framing {
            if any_late {
                crate::refuse_unless!(
                    unit <= stream_window,
                    "--framing raw:{unit} with --release {release} cannot work: units larger than --stream-window {stream_window} are never complete"
                );
            }
        }
        // What a stream must take in whole before a late point releases any
        // of it: a framed message (known when the client's is), or a raw
        // work unit, which spans the client's messages and is known alone.
        let unit = match self.framing {
            Framing::Raw(unit) => Some(unit as u64),
            Framing::Grpc => framed_message,
        };
        if let (Some(unit), true) = (unit, any_late && !self.allow_deadlock) {
            // Streams are numbered 1, 3, 5, … per connection: only those the
            // client opens count (`--release complete,1=frame` with one
            // stream releases on receipt).
            let streams = streams_per_conn.unwrap_or(1);
            let late_points: Vec<ReleasePoint> = (0..streams)
                .map(|i| release.for_stream(2 * i + 1))
                .filter(|p| ReleaseSpec::is_late(*p))
                .collect();
            let point = late_points.first().copied().unwrap_or(release.default);
            if let (Some(framed), Framing::Grpc) = (framed_message, self.framing) {
                crate::refuse_unless!(
                    late_points.is_empty() || framed <= stream_window as u64,
                    "--release {} cannot work: a framed message is up to {framed} bytes but --stream-window is {stream_window}; \
                     the sender would stall before the message could be decoded, and its bytes are only released after that. \
                     Raise --stream-window to at least {framed}, use --release frame, or --allow-deadlock to watch it stall",
                    point.as_str()
                );
            }
            // Each late-releasing stream may hold one partial unit that
            // cannot be released yet; without the client's count (`serve`
            // alone), one stream at least.
            let (late_streams, holders) = match streams_per_conn {
                Some(_) => {
                    let n = late_points.len() as u64;
                    (
                        n,
                        format!("{n} of {streams} streams on a connection can each hold"),
                    )
                }
                None => (1, "a stream can hold".to_string()),
            };
            let need = late_streams * (unit - 1) + 1;
            crate::refuse_unless!(
                late_streams == 0 || conn_window as u64 >= need,
                "--release {release} cannot work: {holders} {} unreleasable bytes of a partial message, which exhausts \
                 --conn-window {conn_window}; raise it to at least {need}, or add --allow-deadlock to watch it stall",
                unit - 1
            );
        }
        crate::refuse_unless!(max_message_size > 0, "--max-message-size must be positive");
        crate::refuse_unless!(
            self.sample_interval.0 >= std::time::Duration::from_millis(1),
            "--sample-interval must be at least 1ms (the timer's resolution), got {}",
            self.sample_interval
        );
        crate::refuse_unless!(
            self.service_time.0 <= crate::config::MAX_DURATION,
            "--service-time is limited to {}",
            crate::config::MAX_DURATION_SAID
        );
        if let Some(framed) = framed_message {
            let message = framed.saturating_sub(grpc::PREFIX_LEN as u64);
            crate::refuse_unless!(
                message <= max_message_size as u64,
                "--payload makes messages of up to {message} bytes, above the server's --max-message-size {max_message_size}: \
                 every message would be refused with RESOURCE_EXHAUSTED; raise --max-message-size or lower --payload"
            );
        }
        let age = self.max_connection_age.map(|d| ("--max-connection-age", d));
        for (flag, d) in [
            ("--handshake-timeout", self.handshake_timeout),
            ("--idle-timeout", self.idle_timeout),
            ("--drain-timeout", self.drain_timeout),
        ]
        .into_iter()
        .chain(age)
        {
            crate::refuse_unless!(
                !d.0.is_zero() && d.0 <= crate::config::MAX_DURATION,
                "{flag} must be positive and at most {}",
                crate::config::MAX_DURATION_SAID
            );
        }
        let max_header_list_size = self
            .max_header_list_size
            .to_u32("--max-header-list-size")
            .map_err(|e| anyhow::Error::new(crate::config::UsageError(e)))?;
        crate::refuse_unless!(
            max_header_list_size >= 1024,
            "--max-header-list-size must be at least 1KiB (a gRPC request's headers take a few hundred bytes)"
        );
        crate::refuse_unless!(
            self.max_owned_bytes.0 >= max_message_size as u64,
            "--max-owned-bytes {} is below --max-message-size {max_message_size}: not one message could be owned",
            self.max_owned_bytes.0
        );
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(Arc::new(crate::tls::server_config(
                cert,
                key,
                self.client_ca.as_deref(),
            )?)),
            _ => None,
        };
        if self.stack == Stack::Hyper {
            // Both act inside h2probe's own server loop, which hyper replaces.
            crate::refuse_unless!(
                self.stall_stream.is_none() && self.drop_stream.is_none(),
                "--stall-stream and --drop-stream act in h2probe's own h2 server; --stack hyper serves through hyper, \
                 which has no such fault to inject (use the default --stack h2)"
            );
            hyper_stack::check(&release, self.queue, self.framing)
                .map_err(|e| anyhow::Error::new(crate::config::UsageError(format!("{e:#}"))))?;
        }
        Ok(ServerConfig {
            release,
            queue: self.queue,
            service_time: self.service_time.0,
            workers: self.workers,
            stream_window,
            conn_window,
            max_frame_size,
            max_concurrent_streams: self.max_concurrent_streams,
            max_message_size,
            queue_limit: self.queue_limit,
            shutdown_drain: self.shutdown_drain,
            sample_interval: self.sample_interval.0,
            framing: self.framing,
            capture,
            stack: self.stack,
            handshake_timeout: self.handshake_timeout.0,
            idle_timeout: self.idle_timeout.0,
            max_connection_age: self.max_connection_age.map(|d| d.0),
            drain_timeout: self.drain_timeout.0,
            max_connections: self.max_connections,
            max_header_list_size,
            max_owned_bytes: self.max_owned_bytes.0,
            stall_stream: self.stall_stream,
            drop_stream: self.drop_stream,
            allow_deadlock: self.allow_deadlock,
            tls,
            admission: self.admission,
            when_full: self.when_full,
            service_schedule: self
                .service_schedule
                .clone()
                .unwrap_or_else(|| crate::overload::ServiceSchedule::constant(self.service_time.0)),
        })
    }
}

/// Everything a server task needs, shared.
pub struct ServerCtx {
    pub cfg: ServerConfig,
    pub rec: Recorder,
    pub live: Arc<Live>,
    /// Connection ids (in `run`, apart from its client's).
    pub conn_ids: crate::tap::ConnIds,
    /// Flips to true on shutdown.
    pub shutdown: watch::Receiver<bool>,
    /// Flips to true when shutdown is cut short (a second Ctrl-C): an RPC
    /// still draining discards its queue (reason `shutdown`) and ends at
    /// once, connections are closed without waiting for --drain-timeout.
    pub abandon: watch::Receiver<bool>,
    /// Set before `abandon` when the stop is for a failure (the trace's
    /// limit, a full disk), not a second interrupt: what the RPCs and the
    /// connections' closes then say, and connections get a moment to carry
    /// the RPCs' answers before they are closed.
    pub failure: Arc<std::sync::OnceLock<String>>,
    /// Set when the server closes the connections still open at the end of
    /// shutdown (--drain-timeout, an abandon): a stream failing after it
    /// is the server's doing, not a client's reset.
    pub conns_closed: std::sync::atomic::AtomicBool,
    /// Flips to true when shutdown's --drain-timeout passes with connections
    /// still open: an RPC still draining discards what it holds (reason
    /// `shutdown`) and answers UNAVAILABLE now, and the connections get a
    /// moment to carry that before they are closed (closed at once, its
    /// client read a broken stream instead).
    pub drain_over: watch::Sender<bool>,
    /// RPCs waiting for their queued work (a drain): when --drain-timeout
    /// passes with none, there is no answer to wait for.
    pub draining: std::sync::atomic::AtomicU64,
    /// Exchange's server-wide admission boundary and the service schedule's origin.
    pub admission: exchange::Admission,
    /// `rpc_start`'s `framing` field, formatted once (it was formatted for
    /// every RPC).
    pub framing_label: Option<String>,
}

impl ServerCtx {
    pub fn new(
        cfg: ServerConfig,
        rec: Recorder,
        live: Arc<Live>,
        conn_ids: crate::tap::ConnIds,
        shutdown: watch::Receiver<bool>,
    ) -> ServerCtx {
        let framing_label = match cfg.framing {
            Framing::Raw(_) => Some(cfg.framing.to_string()),
            Framing::Grpc => None,
        };
        ServerCtx {
            cfg,
            rec,
            live,
            conn_ids,
            shutdown,
            // Never set unless `with_abandon` gives a sender's receiver.
            abandon: watch::channel(false).1,
            failure: Default::default(),
            conns_closed: Default::default(),
            drain_over: watch::channel(false).0,
            draining: Default::default(),
            admission: Default::default(),
            framing_label,
        }
    }

    /// The switch that cuts shutdown short (see [`ServerCtx::abandon`]).
    pub fn with_abandon(mut self, abandon: watch::Receiver<bool>) -> ServerCtx {
        self.abandon = abandon;
        self
    }

    /// Why shutdown was cut short: a failure (see [`ServerCtx::failure`])
    /// or a second interrupt.
    pub fn abandoned_why(&self) -> String {
        match self.failure.get() {
            Some(f) => format!("it stopped for a failure ({f})"),
            None => "its shutdown was cut short (a second interrupt)".into(),
        }
    }

    /// Counts the caller as draining (see [`ServerCtx::draining`]) until
    /// the guard drops.
    pub(crate) fn drain_guard(&self) -> DrainGuard<'_> {
        self.draining
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        DrainGuard(&self.draining)
    }

    /// Why an RPC's drain was cut short: an abandon (see
    /// [`ServerCtx::abandoned_why`]) or --drain-timeout.
    pub fn drain_cut_why(&self) -> String {
        if *self.abandon.borrow() {
            self.abandoned_why()
        } else {
            format!("--drain-timeout {} passed", Dur(self.cfg.drain_timeout))
        }
    }

    /// How an RPC whose stream failed ends, discard reason and status:
    /// the client's reset (`cancelled`, CANCELLED), or the server's own
    /// closing of the connection at the end of shutdown (`shutdown`,
    /// UNAVAILABLE: what its client reads).
    pub fn gone(&self) -> (crate::trace::schema::DiscardReason, u32) {
        use crate::trace::schema::DiscardReason;
        if self.conns_closed.load(std::sync::atomic::Ordering::Relaxed) {
            (DiscardReason::Shutdown, crate::grpc::status::UNAVAILABLE)
        } else {
            (DiscardReason::Cancelled, crate::grpc::status::CANCELLED)
        }
    }

    /// Lists an RPC among the open ones (what `sample` events and a stall's
    /// stream list read) until the returned guard drops. Without a recorder
    /// nobody reads the list, and listing costs a global lock and h2 stream
    /// lock round trips per RPC: nothing is listed then.
    pub fn list_open_rpc(
        &self,
        key: (u32, u32),
        open: impl FnOnce() -> crate::live::OpenRpc,
    ) -> Option<OpenRpcListing> {
        if !self.rec.is_enabled() {
            return None;
        }
        // Built before the list is locked (cloning h2's FlowControl takes
        // h2's connection lock).
        let open = Arc::new(open());
        self.live
            .open_rpcs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, open);
        Some(OpenRpcListing {
            live: self.live.clone(),
            key,
        })
    }

    /// The worker's service time now (`--service-schedule` or `--service-time`).
    pub fn service_time(&self) -> std::time::Duration {
        self.admission
            .service_time(&self.cfg.service_schedule, crate::trace::clock::now_ns())
    }
}

/// An RPC's place in the open-RPC list, removed on drop.
pub struct OpenRpcListing {
    live: Arc<Live>,
    key: (u32, u32),
}

impl Drop for OpenRpcListing {
    fn drop(&mut self) {
        let gone = self
            .live
            .open_rpcs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.key);
        // Dropped after the list's lock (dropping h2's FlowControl takes
        // h2's connection lock).
        drop(gone);
    }
}

/// Accepts connections until shutdown, then waits for every connection to
/// finish (each RPC drains or discards per `--shutdown-drain`), at most
/// `--drain-timeout`: the rest are then closed, so `serve` always ends.
///
/// The listener never dies: an accept error (descriptors exhausted, a
/// connection aborted before it was accepted) is recorded and retried after
/// a growing pause (5 ms to 1 s); past `--max-connections` a connection is
/// closed at once and recorded.
pub async fn serve(
    listener: impl Into<listen::Listener>,
    ctx: Arc<ServerCtx>,
) -> anyhow::Result<()> {
    let listener = listener.into();
    let mut shutdown = ctx.shutdown.clone();
    // Aborted when this function returns (the guard drops).
    // Samples are events: without a recorder there is nothing to sample.
    let _sampler = ctx
        .rec
        .is_enabled()
        .then(|| AbortOnDrop(tokio::spawn(rpc::sample::sample_open_rpcs(ctx.clone()))));
    let mut conns = tokio::task::JoinSet::new();
    // Per open connection: why it closed, and its RPCs' tasks.
    let mut reasons: HashMap<tokio::task::Id, (CloseReason, TaskTracker)> = HashMap::new();
    // After an accept error, accepting pauses until `resume`; each error in
    // a row doubles the pause.
    let mut pause = std::time::Duration::ZERO;
    let mut resume: Option<tokio::time::Instant> = None;
    let server_event = |kind: KindId, build: Box<dyn FnOnce() -> Kind>| {
        ctx.rec.emit(
            Endpoint::Server,
            0,
            0,
            crate::trace::clock::now_ns(),
            kind,
            build,
        )
    };
    loop {
        tokio::select! {
            r = listener.accept(), if resume.is_none() => match r {
                Ok(sock) => {
                    pause = std::time::Duration::ZERO;
                    let peer = sock.peer.clone();
                    if conns.len() >= ctx.cfg.max_connections as usize {
                        let max = ctx.cfg.max_connections;
                        refused(&ctx, &peer, format!("--max-connections {max} reached"));
                        drop(sock);
                        continue;
                    }
                    let ctx = ctx.clone();
                    let reason = CloseReason::default();
                    let rpcs = TaskTracker::new();
                    let (handle, tracked) = (reason.clone(), rpcs.clone());
                    let task = conns.spawn(async move {
                        if let Err(e) = connection(sock, ctx, handle, tracked).await {
                            tracing::debug!("connection from {peer}: {e:#}");
                        }
                    });
                    reasons.insert(task.id(), (reason, rpcs));
                }
                Err(e) => {
                    let error = e.to_string();
                    server_event(KindId::AcceptError, Box::new(move || Kind::AcceptError(AcceptErrorEv { error })));
                    pause = (pause * 2).clamp(
                        std::time::Duration::from_millis(5),
                        std::time::Duration::from_secs(1),
                    );
                    resume = Some(tokio::time::Instant::now() + pause);
                    tracing::warn!("accept failed ({e}); retrying in {pause:?}");
                }
            },
            _ = async { tokio::time::sleep_until(resume.expect("guarded")).await }, if resume.is_some() => {
                resume = None;
            }
            _ = crate::live::flag_set(&mut shutdown) => break,
            Some(r) = conns.join_next_with_id(), if !conns.is_empty() => {
                let id = match r {
                    Ok((id, ())) => id,
                    Err(e) => e.id(),
                };
                reasons.remove(&id);
            }
        }
    }
    drop(listener);
    let mut abandon = ctx.abandon.clone();
    let drained = tokio::select! {
        r = tokio::time::timeout(ctx.cfg.drain_timeout, async {
            while conns.join_next().await.is_some() {}
        }) => r.is_ok(),
        _ = crate::live::flag_set(&mut abandon) => conns.is_empty(),
    };
    // A stop for a failure abandons at once (no drain), and a drain that
    // outlasts --drain-timeout is cut: the RPCs still draining end and
    // answer UNAVAILABLE, and their connections get a second to carry that
    // and close on their own (only when an RPC was draining: a silent peer
    // alone is closed at once). Closed at once, a client read a broken
    // pipe instead of its RPC's status. A second interrupt closes them at
    // once, during that second too.
    let failure = ctx.failure.get().is_some();
    let mut graced = false;
    let drained = drained || {
        if !*ctx.abandon.borrow() {
            ctx.drain_over.send_replace(true);
            graced = ctx.draining.load(std::sync::atomic::Ordering::Acquire) > 0;
        }
        (failure || graced)
            && tokio::select! {
                r = tokio::time::timeout(std::time::Duration::from_secs(1), async {
                    while conns.join_next().await.is_some() {}
                }) => r.is_ok(),
                _ = crate::live::flag_set(&mut abandon), if !failure => false,
            }
    };
    if !drained {
        let left = conns.len();
        let why = if *ctx.abandon.borrow() {
            format!("closed by the server when {}", ctx.abandoned_why())
        } else {
            format!(
                "closed by the server {:?} after shutdown began (--drain-timeout{})",
                ctx.cfg.drain_timeout,
                if graced {
                    ", and a second for its RPCs to answer"
                } else {
                    ""
                }
            )
        };
        for (reason, _) in reasons.values() {
            reason.set(why.clone());
        }
        ctx.conns_closed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        conns.abort_all();
        while conns.join_next().await.is_some() {}
        // Their h2 connections are gone, so each RPC still running fails its
        // next read or send and ends (recording rpc_end): wait for that, so
        // the trace holds it, but not for an RPC stuck in its own service.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), async {
            for (_, rpcs) in reasons.values() {
                rpcs.close();
                rpcs.wait().await;
            }
        })
        .await;
        tracing::warn!("{left} connections {why}");
    }
    Ok(())
}

async fn connection(
    sock: listen::Accepted,
    ctx: Arc<ServerCtx>,
    close_reason: CloseReason,
    rpcs: TaskTracker,
) -> anyhow::Result<()> {
    let listen::Accepted { io, local, peer } = sock;
    match io {
        listen::Socket::Tcp(s) => connection_over(s, local, peer, ctx, close_reason, rpcs).await,
        listen::Socket::Unix(s) => connection_over(s, local, peer, ctx, close_reason, rpcs).await,
    }
}

/// Serves one accepted connection: TLS first if configured, then HTTP/2
/// through the tap.
async fn connection_over<T>(
    sock: T,
    local: String,
    peer: String,
    ctx: Arc<ServerCtx>,
    close_reason: CloseReason,
    rpcs: TaskTracker,
) -> anyhow::Result<()>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let conn_id = ctx.conn_ids.next_id();
    let tap_cfg = TapConfig {
        endpoint: Endpoint::Server,
        conn: conn_id,
        capture: ctx.cfg.capture,
    };
    let Some(tls) = ctx.cfg.tls.clone() else {
        let tap = Tap::with_addrs(sock, local, peer, tap_cfg, ctx.rec.clone());
        return tapped(
            tap.with_close_reason(close_reason.clone()),
            conn_id,
            ctx,
            close_reason,
            rpcs,
        )
        .await;
    };
    // TLS: the tap above it (plaintext frames), a watch on the socket below
    // it (socket_blocked). A failed handshake is a refused connection.
    let watched = crate::tap::SocketWatch::new(sock, tap_cfg, ctx.rec.clone());
    let mut underway = HandshakeUnderway {
        ctx: &ctx,
        peer: &peer,
        close_reason: &close_reason,
        done: false,
    };
    let accepted = tokio::time::timeout(
        ctx.cfg.handshake_timeout,
        tokio_rustls::TlsAcceptor::from(tls)
            .accept(watched)
            .into_fallible(),
    )
    .await;
    underway.done = true;
    drop(underway);
    let stream = match accepted {
        Ok(Ok(s)) if s.get_ref().1.alpn_protocol() == Some(crate::tls::ALPN_H2) => s,
        outcome => {
            let reason = match &outcome {
                Ok(Ok(_)) => "TLS: the client did not offer HTTP/2 (ALPN h2)".to_string(),
                Ok(Err((e, _))) => format!("TLS handshake failed: {e}"),
                Err(_) => format!(
                    "no TLS handshake within --handshake-timeout {}",
                    Dur(ctx.cfg.handshake_timeout)
                ),
            };
            refused(&ctx, &peer, reason.clone());
            if let Ok(Err((_, io))) = outcome {
                crate::tls::linger(io).await;
            }
            anyhow::bail!("{reason}");
        }
    };
    let tap = Tap::with_addrs(stream, local, peer, tap_cfg, ctx.rec.clone()).above_tls();
    tapped(
        tap.with_close_reason(close_reason.clone()),
        conn_id,
        ctx,
        close_reason,
        rpcs,
    )
    .await
}

/// Serves one connection through its tap (over TCP, or over TLS).
async fn tapped<T>(
    tap: Tap<T>,
    conn_id: u32,
    ctx: Arc<ServerCtx>,
    close_reason: CloseReason,
    rpcs: TaskTracker,
) -> anyhow::Result<()>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let activity = tap.activity();
    if ctx.cfg.stack == Stack::Hyper {
        return hyper_stack::connection(tap, conn_id, ctx, close_reason).await;
    }
    let cfg = &ctx.cfg;
    let handshake = h2::server::Builder::new()
        .initial_window_size(cfg.stream_window)
        .initial_connection_window_size(cfg.conn_window)
        .max_frame_size(cfg.max_frame_size)
        .max_concurrent_streams(cfg.max_concurrent_streams)
        .max_header_list_size(cfg.max_header_list_size)
        .handshake::<_, bytes::Bytes>(tap);
    tokio::pin!(handshake);
    let mut conn = tokio::select! {
        r = &mut handshake => r.context("HTTP/2 handshake")?,
        _ = tokio::time::sleep(cfg.handshake_timeout) => {
            // Said before the handshake (and the tap in it) is dropped.
            close_reason.set(format!(
                "no HTTP/2 handshake within --handshake-timeout {}",
                Dur(cfg.handshake_timeout)
            ));
            anyhow::bail!("handshake timeout");
        }
    };
    let mut shutdown = ctx.shutdown.clone();
    // One wait for the whole connection: a new one per accepted stream
    // would join and leave the watch's waiter list (a lock every
    // connection and RPC shares) once per request; once on the list, the
    // connection reads a flag (`live::poll_stop`).
    let shutdown_wait = tokio::task::unconstrained(crate::live::flag_set(&mut shutdown));
    tokio::pin!(shutdown_wait);
    let mut registered = false;
    let mut shutting_down = false;
    let mut idle = IdleWatch::new(activity, cfg.idle_timeout);
    let mut aged = Aging::new(cfg.max_connection_age);
    loop {
        tokio::select! {
            // Biased, shutdown first: accepting spends the task's
            // cooperative budget on the socket, and a branch polled after
            // that could not see shutdown under a steady load.
            biased;
            _ = std::future::poll_fn(|cx| crate::live::poll_stop(&ctx.shutdown, shutdown_wait.as_mut(), &mut registered, cx)), if !shutting_down => {
                shutting_down = true;
                conn.graceful_shutdown();
            }
            r = conn.accept() => match r {
                Some(Ok((req, respond))) => {
                    // Each RPC is its own task; `rpcs` counts them (a
                    // JoinSet would take its mutex for every finished RPC
                    // and hold a list to reap) so the end can wait for them.
                    // Boxed: the RPC's state is ≈ 1.8 KB, which spawning
                    // moved twice and the task's completion once more
                    // (≈ 1,900 of the 7,100 instructions a 16 KiB request
                    // cost over the bare sink under callgrind,
                    // bench/2026-12-02-instructions.txt); boxed, it is
                    // written once and the task holds a pointer.
                    let ctx = ctx.clone();
                    rpcs.spawn(Box::pin(rpc::handle(
                        req,
                        respond,
                        conn_id,
                        ctx,
                        close_reason.clone(),
                    )));
                }
                Some(Err(e)) => {
                    if e.is_io() || e.is_go_away() || e.is_remote() {
                        tracing::debug!("connection {conn_id}: {e}");
                        break;
                    }
                    return Err(e).context("HTTP/2 connection");
                }
                None => break,
            },
            step = idle.next() => match step {
                IdleStep::GoAway(why) => {
                    close_reason.set(why);
                    conn.graceful_shutdown();
                }
                // The peer did not go (it may not even read): close.
                IdleStep::Close => break,
            },
            // Not during a shutdown's drain: its GOAWAY is the shutdown's.
            why = aged.due(), if !shutting_down => {
                close_reason.set(why);
                conn.graceful_shutdown();
            }
        }
    }
    // The connection goes before its RPCs are waited for: h2 fails the
    // streams of a dropped connection, which wakes an RPC waiting for a body
    // that will not come. Kept while they were waited for, an idle-timed-out
    // connection with an RPC open was never polled nor closed (its socket in
    // CLOSE-WAIT until shutdown, one --max-connections place each).
    drop(conn);
    rpcs.close();
    rpcs.wait().await;
    Ok(())
}

/// `--max-connection-age` for one connection: its GOAWAY, once.
pub(super) struct Aging {
    at: Option<(tokio::time::Instant, std::time::Duration)>,
}

impl Aging {
    pub(super) fn new(age: Option<std::time::Duration>) -> Aging {
        Aging {
            at: age.map(|a| (tokio::time::Instant::now() + a, a)),
        }
    }

    /// When the connection has reached its age, the close reason (once;
    /// never without an age). Cancel-safe: for `select!`.
    pub(super) async fn due(&mut self) -> String {
        let Some((at, age)) = self.at else {
            return std::future::pending().await;
        };
        tokio::time::sleep_until(at).await;
        self.at = None;
        format!("reached --max-connection-age {}: GOAWAY sent", Dur(age))
    }
}

/// `--idle-timeout` for one connection, from when bytes last crossed its
/// tap (either way), checked a few times per timeout: first the GOAWAY,
/// then, if the peer has not gone a second later, the close.
pub(super) struct IdleWatch {
    activity: Arc<std::sync::atomic::AtomicU64>,
    timeout: std::time::Duration,
    check: tokio::time::Interval,
    /// Set at the GOAWAY: when the connection is closed.
    close_at: Option<tokio::time::Instant>,
}

/// What [`IdleWatch::next`] says to do.
pub(super) enum IdleStep {
    /// Send GOAWAY; the text is the connection's close reason.
    GoAway(String),
    /// Close the connection now.
    Close,
}

impl IdleWatch {
    pub(super) fn new(
        activity: Arc<std::sync::atomic::AtomicU64>,
        timeout: std::time::Duration,
    ) -> IdleWatch {
        let mut check =
            tokio::time::interval((timeout / 4).max(std::time::Duration::from_millis(10)));
        check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        IdleWatch {
            activity,
            timeout,
            check,
            close_at: None,
        }
    }

    /// The next step, when it is due (cancel-safe: for `select!`).
    pub(super) async fn next(&mut self) -> IdleStep {
        if let Some(at) = self.close_at {
            tokio::time::sleep_until(at).await;
            return IdleStep::Close;
        }
        loop {
            self.check.tick().await;
            // The coarse clock: never ahead of a stamp the tap took from
            // either clock, so a busy connection is never judged idle.
            let quiet = crate::trace::clock::coarse_now_ns()
                .saturating_sub(self.activity.load(Ordering::Relaxed));
            if quiet >= self.timeout.as_nanos() as u64 {
                self.close_at =
                    Some(tokio::time::Instant::now() + std::time::Duration::from_secs(1));
                return IdleStep::GoAway(format!(
                    "idle for {} (--idle-timeout): GOAWAY sent",
                    Dur(std::time::Duration::from_nanos(quiet))
                ));
            }
        }
    }
}

/// Records a connection the server closed unserved.
fn refused(ctx: &ServerCtx, peer: &str, reason: String) {
    ctx.rec.emit(
        Endpoint::Server,
        0,
        0,
        crate::trace::clock::now_ns(),
        KindId::ConnRefused,
        || {
            Kind::ConnRefused(ConnRefusedEv {
                peer: peer.to_string(),
                reason,
            })
        },
    );
}

/// A TLS handshake still under way when its task is dropped (the server's
/// shutdown closed it after --drain-timeout) is a refused connection, like
/// a failed one: without this it left no event at all.
struct HandshakeUnderway<'a> {
    ctx: &'a ServerCtx,
    peer: &'a str,
    close_reason: &'a CloseReason,
    done: bool,
}

impl Drop for HandshakeUnderway<'_> {
    fn drop(&mut self) {
        if !self.done {
            let why = self
                .close_reason
                .peek()
                .unwrap_or_else(|| "its task ended".to_string());
            refused(
                self.ctx,
                self.peer,
                format!("TLS handshake not finished: {why}"),
            );
        }
    }
}

/// An RPC counted in [`ServerCtx::draining`].
pub(crate) struct DrainGuard<'a>(&'a std::sync::atomic::AtomicU64);

impl Drop for DrainGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
