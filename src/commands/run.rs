//! `h2probe run`: both endpoints in one process on loopback.

use super::{config_part, Interrupts, OutputOpts, Session, Status};
use crate::client::{self, ClientCtx, ClientOpts, RpcOutcome};
use crate::live::Live;
use crate::server::{self, ServerCtx, ServerOpts};
use anyhow::Context as _;
use h2probe_analysis::analyze::Summary;
use h2probe_analysis::meta::RunConfig;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;

/// `h2probe run`: both endpoints in one process on loopback.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct RunOpts {
    #[command(flatten, next_help_heading = "Server")]
    pub server: ServerOpts,
    #[command(flatten, next_help_heading = "Client")]
    pub client: ClientOpts,
    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputOpts,
    /// A named experiment's settings, under the flags given explicitly.
    ///
    /// part3: the overload-policy study of the background article's Part 3
    /// — --rpc exchange, originals at 80/s for 36 s (2,880), 16 KiB, a 2 s
    /// --original-deadline, --max-pending 32 --max-outstanding 33,
    /// --admission 32, --service-schedule 10ms,12s:40ms,24s:10ms (a
    /// reconstruction: the article does not give its worker timing),
    /// --stall-timeout 10s. Choose the policy with --when-full and --retry.
    #[arg(long, value_enum, help_heading = "Experiment")]
    pub preset: Option<Preset>,
    /// The argument ids the command line gave (clap's value source, filled
    /// by `cli::main`): a flag that would do nothing is refused even when
    /// its value is the default.
    #[arg(skip)]
    pub given: Vec<String>,
}

/// `--preset`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// Part 3's single-client overload-policy study.
    Part3,
}

impl Preset {
    /// (argument id, value) pairs, applied where the command line is silent.
    pub fn settings(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Preset::Part3 => &[
                ("rpc", "exchange"),
                ("rate", "80"),
                ("duration", "36s"),
                ("payload", "16KiB"),
                ("original_deadline", "2s"),
                ("max_pending", "32"),
                ("max_outstanding", "33"),
                ("admission", "32"),
                ("service_schedule", "10ms,12s:40ms,24s:10ms"),
                ("stall_timeout", "10s"),
            ],
        }
    }
}

impl RunOpts {
    /// Applies `--preset` to every setting the command line did not give
    /// (`given(id)`: whether argument `id` came from the command line).
    pub fn apply_preset(&mut self, given: impl Fn(&str) -> bool) {
        let Some(p) = self.preset else { return };
        for (id, v) in p.settings() {
            if given(id) {
                continue;
            }
            let ok = |r: Result<(), String>| r.expect("a preset value parses");
            match *id {
                "rpc" => self.client.rpc = crate::overload::RpcKind::Exchange,
                "rate" => self.client.rate = v.parse().expect("static"),
                "duration" => ok(v.parse().map(|d| self.client.duration = d)),
                "payload" => ok(v.parse().map(|d| self.client.payload = d)),
                "original_deadline" => ok(v.parse().map(|d| self.client.original_deadline = d)),
                "max_pending" => self.client.max_pending = v.parse().expect("static"),
                "max_outstanding" => self.client.max_outstanding = v.parse().expect("static"),
                "admission" => self.server.admission = v.parse().expect("static"),
                "service_schedule" => ok(v.parse().map(|d| self.server.service_schedule = Some(d))),
                "stall_timeout" => ok(v.parse().map(|d| self.client.stall_timeout = d)),
                other => unreachable!("preset setting {other} has no field"),
            }
        }
    }
}

/// What a finished run produced.
pub struct RunResult {
    pub dir: PathBuf,
    pub summary: Summary,
    pub warnings: Vec<String>,
    pub outcomes: Vec<RpcOutcome>,
    pub interrupted: bool,
    /// The run could not be recorded completely (see [`super::Finished`]).
    pub error: Option<String>,
}

/// `queue-release` (`-hyper` for `--stack hyper`), the default label of a run directory.
pub(crate) fn label_of(server: &ServerOpts) -> String {
    let stack = match server.stack {
        crate::config::Stack::H2 => "",
        crate::config::Stack::Hyper => "-hyper",
    };
    format!(
        "{}-{}{stack}",
        server.queue.to_string().replace(':', ""),
        server.release.slug()
    )
}

/// Whose progress the stall watcher follows.
#[derive(Clone, Copy)]
pub(crate) enum Progress {
    /// Bytes reaching the server application, or released by it (`run`:
    /// both endpoints here).
    Server,
    /// Bytes the client could send within its credit (`client` against
    /// any server: the server's side is not visible).
    Client,
    /// As `Client`, while a call is handing its message to h2: a unary
    /// client whose calls all wait for their answers (and whose backlog
    /// waits for them) waits on the server's handler, not on flow control.
    Calls,
}

/// Resolves when the run stops progressing: no byte made progress (see
/// [`Progress`]) for `timeout` while the client had messages to send.
/// Records the `stall` event first (with every open stream's window state
/// when the server is ours; the client's view is in its frames).
pub(crate) async fn watch_for_stall(
    live: Arc<Live>,
    rec: crate::trace::Recorder,
    timeout: std::time::Duration,
    conn_window: Option<u64>,
    whose: Progress,
) {
    use crate::trace::schema::{Endpoint, Kind, KindId, StallEv};
    let progress = || match whose {
        // Credit given back is progress too: under a late release point a
        // queue longer than the timeout drains without a byte arriving (a
        // stream limit holding the next stream until this one's queue is
        // done), each completion releasing. Completions alone are not: under
        // release on receipt a backlog drains while a stalled stream holds
        // the window, and nothing will let a byte in.
        Progress::Server => Live::get(&live.app_bytes) + Live::get(&live.released),
        Progress::Client | Progress::Calls => Live::get(&live.client_bytes),
    };
    let mut last = (progress(), tokio::time::Instant::now());
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(50).min(timeout / 4));
    loop {
        tick.tick().await;
        let now = tokio::time::Instant::now();
        let bytes = progress();
        let pending = live.pending();
        let waiting = match whose {
            Progress::Calls => live.in_send.load(std::sync::atomic::Ordering::Relaxed) > 0,
            _ => pending > 0,
        };
        if bytes != last.0 || !waiting {
            last = (bytes, now);
            continue;
        }
        if now - last.1 >= timeout {
            live.stalled
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let (ep, streams) = match whose {
                Progress::Server => (Endpoint::Server, live.open_streams()),
                Progress::Client | Progress::Calls => (Endpoint::Client, Vec::new()),
            };
            rec.emit(
                ep,
                0,
                0,
                crate::trace::clock::now_ns(),
                KindId::Stall,
                || {
                    Kind::Stall(StallEv {
                        timeout_ns: timeout.as_nanos() as u64,
                        pending,
                        conn_window,
                        streams,
                    })
                },
            );
            return;
        }
    }
}

/// A warning when the offered period ends before a step of
/// --service-schedule (it runs from the server's first RPC): that part of
/// the schedule, e.g. Part 3's slowdown from 12 s, never happens.
pub(crate) fn schedule_warning(opts: &RunOpts) -> Option<String> {
    let s = opts.server.service_schedule.as_ref()?;
    let duration = opts.client.duration.0;
    let (at, _) =
        s.0.iter()
            .find(|(at, _)| !at.is_zero() && *at >= duration)?;
    Some(format!(
        "--duration {} ends before the --service-schedule step at {}: that part of the schedule never happens \
         (the run sees no slowdown); shorten the schedule with the run, e.g. --service-schedule {}",
        opts.client.duration,
        crate::config::Dur(*at),
        fitted(s, duration)
    ))
}

/// `s` with its offsets scaled into a run of `duration`, its service times
/// kept: the last of n later steps lands n/(n+1) of the way in, the others
/// in their proportions to it (`10ms,12s:40ms,24s:10ms` in 6 s is
/// `10ms,2s:40ms,4s:10ms`), to whole milliseconds and at least 1 ms apart.
fn fitted(s: &crate::overload::ServiceSchedule, duration: std::time::Duration) -> String {
    let steps = &s.0;
    let later = steps.len().saturating_sub(1) as f64;
    let last = steps.last().map_or(0.0, |(from, _)| from.as_secs_f64());
    // (One step alone has no offset to scale: `scale` is then unused.)
    let scale = duration.as_secs_f64() * later / ((later + 1.0) * last);
    let mut prev_ms = 0u64;
    let fitted = steps
        .iter()
        .enumerate()
        .map(|(i, &(from, d))| {
            let ms = if i == 0 {
                0
            } else {
                ((from.as_secs_f64() * scale * 1e3).round() as u64).max(prev_ms + 1)
            };
            prev_ms = ms;
            (std::time::Duration::from_millis(ms), d)
        })
        .collect();
    crate::overload::ServiceSchedule(fitted).to_string()
}

/// The longest service time the worker will take.
fn slowest_service(opts: &RunOpts) -> std::time::Duration {
    opts.server
        .service_schedule
        .as_ref()
        .map_or(opts.server.service_time.0, |s| {
            s.0.iter().map(|(_, d)| *d).max().unwrap_or_default()
        })
}

/// Refusals that need both sides' options (each side's own are its
/// `validate`), before anything is written: a refused run leaves no
/// directory behind.
pub(crate) fn check_together(opts: &RunOpts) -> anyhow::Result<()> {
    if opts.client.rpc == crate::overload::RpcKind::Exchange {
        crate::refuse_unless!(
            opts.server.stack == crate::config::Stack::H2,
            "--rpc exchange needs the probe's own server (--stack h2): the reference hyper server serves Ingest only"
        );
        crate::refuse_unless!(
            opts.server.framing == crate::config::Framing::Grpc,
            "--rpc exchange needs --framing grpc: outcomes are gRPC messages"
        );
        // Ingest's knobs: Exchange admits attempts through --admission and
        // --when-full, so these would be accepted and do nothing.
        let ingest_only = [
            (
                "--queue",
                opts.server.queue != crate::config::QueuePolicy::Unbounded,
            ),
            (
                "--queue-limit",
                opts.server.queue_limit != server::DEFAULT_QUEUE_LIMIT,
            ),
            ("--stall-stream", opts.server.stall_stream.is_some()),
            ("--drop-stream", opts.server.drop_stream.is_some()),
        ];
        for (flag, given) in ingest_only {
            crate::refuse_unless!(
                !given,
                "{flag} applies to --rpc ingest; Exchange admits attempts with --admission and --when-full"
            );
        }
    }
    if opts.client.rpc == crate::overload::RpcKind::Unary {
        // Each stream is one call of one message: a stream id names one
        // call among thousands, not a stream of the run.
        let per_stream = [
            ("--stall-stream", opts.server.stall_stream.is_some()),
            ("--drop-stream", opts.server.drop_stream.is_some()),
            (
                "--release with per-stream points",
                !opts.server.release.streams.is_empty(),
            ),
        ];
        for (flag, given) in per_stream {
            crate::refuse_unless!(
                !given,
                "{flag} names HTTP/2 streams; with --rpc unary each stream is one call of one message, \
                 so it would touch one call of the run: use --rpc ingest"
            );
        }
    }
    if opts.client.rpc != crate::overload::RpcKind::Exchange {
        // Exchange's knobs: under Ingest they were accepted and did nothing.
        // (--seed is not among them: compare pairs every repeat by it.)
        let mut exchange_only = crate::config::flags_given(
            config_part(&opts.server),
            config_part(&server::ServerOpts::default()),
            &["admission", "when_full"],
            &opts.given,
        );
        exchange_only.extend(opts.client.exchange_flags_given(&opts.given));
        super::refuse_exchange_only(&exchange_only)?;
    }
    // The client opens streams 1, 3, …, 2 × --streams − 1 on each connection.
    let last = 2 * opts.client.streams - 1;
    for (flag, id) in [
        ("--stall-stream", opts.server.stall_stream.map(|s| s.stream)),
        ("--drop-stream", opts.server.drop_stream),
    ] {
        if let Some(id) = id {
            crate::refuse_unless!(
                id <= last,
                "{flag} {id}: the client opens streams 1 to {last} (--streams {}); it would never apply",
                opts.client.streams
            );
        }
    }
    crate::refuse_unless!(
        opts.client.stall_timeout.0 > slowest_service(opts),
        "--stall-timeout {} must exceed --service-time {}: a worker that slow is not a stall",
        opts.client.stall_timeout,
        opts.server.service_time
    );
    Ok(())
}

/// Waits until the server has ended every RPC the client opens
/// (connections × streams), or `until`.
async fn server_rpcs_ended(live: &Live, opts: &RunOpts, until: tokio::time::Instant) {
    let rpcs = (opts.client.connections * opts.client.streams) as u64;
    while Live::get(&live.rpcs_done) < rpcs && tokio::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// `h2probe run`.
pub async fn run(opts: RunOpts) -> anyhow::Result<RunResult> {
    let interrupts = Interrupts::listen();
    opts.client.validate()?;
    opts.output.validate()?;
    let cfg = opts.server.validate(
        opts.output.capture_payload,
        Some(opts.client.framed_upper_bound()),
        Some(opts.client.streams),
    )?;
    check_together(&opts)?;
    let label = opts.output.label.clone().unwrap_or_else(|| {
        if opts.client.rpc == crate::overload::RpcKind::Exchange {
            format!(
                "exchange-{}{}",
                opts.server.when_full.as_str(),
                match &opts.client.retry {
                    crate::overload::RetryPolicy::None => String::new(),
                    r => format!("-retry-{}", r.to_string().replace([':', ','], "-")),
                }
            )
        } else {
            label_of(&opts.server)
        }
    });
    let plan = super::progress::Plan {
        messages: (opts.client.total_rate() * opts.client.duration.0.as_secs_f64()) as u64,
        offer_for: opts.client.duration.0,
    };
    let mut session = Session::open("run", interrupts, &opts.output, &label, plan)?;
    let live = session.live.clone();
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (interrupt_tx, interrupt_rx) = watch::channel(false);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding 127.0.0.1")?;
    let addr = listener.local_addr()?;
    let (abandon_tx, abandon_rx) = watch::channel(false);
    // The client's own: at a stop for a failure it abandons (resets) before
    // the server does, where an interrupt lets it half-close and wait.
    let (client_abandon_tx, client_abandon_rx) = watch::channel(false);
    let sctx = Arc::new(
        ServerCtx::new(
            cfg,
            session.rec.clone(),
            live.clone(),
            // Even ids for the server's connections, odd for the client's.
            crate::tap::ConnIds::new(2, 2),
            shutdown_rx,
        )
        .with_abandon(abandon_rx),
    );
    let server_task = tokio::spawn(server::serve(listener, sctx.clone()));
    let cctx = Arc::new(ClientCtx {
        // --shutdown-drain: Ctrl-C lets the server finish what it holds and
        // answer, a second one abandons that.
        graceful: opts.server.shutdown_drain.then_some(client_abandon_rx),
        opts: opts.client.clone(),
        // With --tls-cert the client speaks TLS to its own server in this
        // process: nothing to verify (meta.json says so).
        target: match opts.server.tls_cert {
            Some(_) => client::Target::tls(addr, "localhost", None)?,
            None => client::Target::plain(addr),
        },
        call: client::Call::default(),
        capture: opts.output.capture_payload,
        rec: session.rec.clone(),
        live: live.clone(),
        conn_ids: crate::tap::ConnIds::new(1, 2),
        interrupt: interrupt_rx,
        stopped_for: Default::default(),
        stream_limit_said: Default::default(),
        replaced: Default::default(),
    });

    let slowest = slowest_service(&opts);
    // Exchange with --when-full wait stops reading a stream for as long as
    // an attempt may wait (its deadline): that is the policy, not a stall.
    let stall_timeout = crate::config::Dur(opts.client.with_link_allowance(
        if opts.client.rpc == crate::overload::RpcKind::Exchange
            && opts.server.when_full == crate::overload::WhenFull::Wait
        {
            let wait =
                opts.client.original_deadline.0 + slowest + std::time::Duration::from_secs(1);
            opts.client.stall_timeout.0.max(wait)
        } else {
            opts.client.stall_timeout.0
        },
        opts.server.max_frame_size.0,
    ));
    let client_run = client::run(cctx.clone());
    tokio::pin!(client_run);
    let mut stall = Box::pin(watch_for_stall(
        live.clone(),
        session.rec.clone(),
        stall_timeout.0,
        Some(opts.server.conn_window.0),
        Progress::Server,
    ));
    let mut interrupted = false;
    let outcomes = tokio::select! {
        r = &mut client_run => r,
        _ = stall.as_mut() => {
            crate::say!("stalled: nothing reached the application for {} with messages pending; ending the run (see the stall event)",
                stall_timeout
            );
            let _ = interrupt_tx.send(true);
            let _ = shutdown_tx.send(true);
            client_run.await
        }
        _ = session.interrupts.next() => {
            interrupted = true;
            session.interrupts.announce("stopping the client and the server, then finishing the trace (again to abandon open RPCs)");
            // The trace's limit or a full disk: no drain, not even with
            // --shutdown-drain. The client resets its streams first (a
            // second at most), so that they end CANCELLED, as the stop is:
            // abandoned at the same moment, the server could close a
            // connection before the client's reset (its RPC then read
            // UNAVAILABLE: seen once, on a loaded machine).
            let failure = session.interrupts.writer_failure();
            let failed = failure.is_some();
            if let Some(f) = failure {
                let _ = sctx.failure.set(f.message);
                let _ = cctx.stopped_for.set(f.cause);
                let _ = client_abandon_tx.send(true);
            }
            let _ = interrupt_tx.send(true);
            let stopped_first = if failed {
                // Then the server sees the resets (its RPCs end
                // CANCELLED, not cut short by the abandon): a second
                // for both at most.
                let until = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
                let r = tokio::time::timeout_at(until, &mut client_run).await.ok();
                server_rpcs_ended(&live, &opts, until).await;
                let _ = abandon_tx.send(true);
                r
            } else {
                None
            };
            let _ = shutdown_tx.send(true);
            match stopped_first {
                Some(r) => r,
                None => tokio::select! {
                    r = &mut client_run => r,
                    _ = session.interrupts.next() => {
                        crate::say!("second interrupt; abandoning open RPCs (their ends are recorded; again to stop waiting)");
                        let _ = abandon_tx.send(true);
                        let _ = client_abandon_tx.send(true);
                        tokio::select! {
                            r = tokio::time::timeout(std::time::Duration::from_secs(3), &mut client_run) => {
                                r.unwrap_or_else(|_| Ok(vec![]))
                            }
                            _ = session.interrupts.next() => Ok(vec![]),
                        }
                    }
                },
            }
        }
    };
    drop(stall);
    // Let the server end its RPCs on its own (drain, deadline, client reset)
    // before shutting it down, so their ending is recorded for what it was.
    if !interrupted {
        let grace = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        server_rpcs_ended(&live, &opts, grace).await;
    }
    let _ = shutdown_tx.send(true);
    let server_result = if *abandon_tx.borrow() {
        // Abandoned already: its ends, a few seconds at most.
        tokio::time::timeout(std::time::Duration::from_secs(3), server_task)
            .await
            .map_or(Ok(()), |r| r.context("server task").and_then(|r| r))
    } else {
        let r = super::finish_or_abandon(server_task, &mut session.interrupts, &abandon_tx).await;
        interrupted |= *abandon_tx.borrow();
        r
    };
    // An interrupt in the first milliseconds stops the server before the
    // client has connected: the client's error is the interrupt's doing,
    // and the run ends as interrupted (it ended on the error, exit 1, with
    // no meta.json).
    let outcomes = match outcomes {
        Err(e) if interrupted => {
            crate::say!("note: the client had not finished starting at the interrupt: {e:#}");
            Ok(vec![])
        }
        other => other,
    };
    // Any other error is the run's: meta.json records it before it is said.
    let failed = match (&outcomes, &server_result) {
        (Err(e), _) | (_, Err(e)) => Some(format!("{e:#}")),
        _ => None,
    };

    let mut client = opts.client.config_part();
    if let (Some(c), Some(_)) = (client.as_mut(), &opts.server.tls_cert) {
        c.insert(
            "tls_verification".into(),
            "none: the client speaks TLS to run's own server in this process".into(),
        );
    }
    let config = RunConfig {
        server: config_part(&opts.server),
        client,
        output: config_part(&opts.output),
        ..RunConfig::default()
    };
    let status = match (failed, interrupted) {
        (Some(e), _) => Status::Failed(e),
        (None, true) => Status::Interrupted,
        (None, false) => Status::Complete,
    };
    let dir = session.dir.clone();
    let f = session
        .finish(config, status, Some(addr.to_string()), opts.output.pcaps())
        .await;
    let recorded = |e: anyhow::Error| {
        anyhow::anyhow!(
            "{e:#}; the run directory {} records the failure (give --force to reuse it)",
            dir.display()
        )
    };
    let outcomes = outcomes.map_err(recorded)?;
    server_result.map_err(recorded)?;
    let f = f?;
    Ok(RunResult {
        dir: f.dir,
        summary: f.summary,
        warnings: f.warnings,
        outcomes,
        interrupted,
        error: f.error,
    })
}

#[cfg(test)]
mod schedule_tests {
    use super::*;

    #[test]
    fn a_run_shorter_than_the_schedule_is_warned_about() {
        let mut o = RunOpts::default();
        assert_eq!(schedule_warning(&o), None, "no schedule, no warning");
        o.server.service_schedule = Some("10ms,12s:40ms,24s:10ms".parse().unwrap());
        o.client.duration = "6s".parse().unwrap();
        let w = schedule_warning(&o).unwrap();
        assert!(w.contains("step at 12s"), "{w}");
        assert!(
            w.ends_with("e.g. --service-schedule 10ms,2s:40ms,4s:10ms"),
            "{w}"
        );
        o.client.duration = "36s".parse().unwrap();
        assert_eq!(schedule_warning(&o), None);
        // The hint is the schedule given, fitted: its own steps and times.
        o.server.service_schedule = Some("10ms,3s:40ms,4s:20ms,6s:5ms".parse().unwrap());
        o.client.duration = "1s".parse().unwrap();
        let w = schedule_warning(&o).unwrap();
        assert!(w.contains("step at 3s"), "{w}");
        assert!(
            w.ends_with("e.g. --service-schedule 10ms,375ms:40ms,500ms:20ms,750ms:5ms"),
            "{w}"
        );
        // Part 3's shape in 2 s: one token a step ("1s 333ms" split the
        // value in two on a command line).
        o.server.service_schedule = Some("10ms,12s:40ms,24s:10ms".parse().unwrap());
        o.client.duration = "2s".parse().unwrap();
        let w = schedule_warning(&o).unwrap();
        assert!(
            w.ends_with("e.g. --service-schedule 10ms,667ms:40ms,1333ms:10ms"),
            "{w}"
        );
        // Offsets too close for whole milliseconds stay 1 ms apart, and
        // what the hint says parses.
        o.server.service_schedule = Some("1ms,1h:2ms,3601s:3ms".parse().unwrap());
        o.client.duration = "100ms".parse().unwrap();
        let w = schedule_warning(&o).unwrap();
        let hint = w.rsplit(' ').next().unwrap();
        assert_eq!(hint, "1ms,67ms:2ms,68ms:3ms", "{w}");
        assert!(hint.parse::<crate::overload::ServiceSchedule>().is_ok());
    }
}
