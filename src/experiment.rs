//! Orchestration: run directories, meta.json, and the `run` / `serve` /
//! `client` commands that tie endpoints, recorder and analysis together.

use crate::client::{self, ClientCtx, ClientOpts, RpcOutcome};
use crate::config::Dur;
use crate::live::Live;
use crate::server::{self, ServerCtx, ServerOpts};
use crate::trace::{clock, RecorderStats, TraceWriter};
use crate::config::CapturePayload;
use anyhow::Context as _;
use h2probe_analysis::analyze::{analyze_trace, Summary};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::Arc;
use tokio::sync::watch;

/// Where and how a run is written.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct OutputOpts {
    /// Run directory to write (default: captures/<utc-time>-<label>/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Label for the default run directory name (default: derived from the config).
    #[arg(long)]
    pub label: Option<String>,

    /// Payload bytes kept in frame events: none, headers (all but DATA) or full.
    /// pcap files stay decodable in every mode (missing bytes become zeros).
    #[arg(long, value_enum, default_value = "headers", value_name = "MODE")]
    pub capture_payload: CapturePayload,

    /// Recorder buffer, in events. When full, events are dropped and counted
    /// (never blocking the transport); analyze warns about any drop.
    #[arg(long, default_value_t = crate::trace::DEFAULT_CAPACITY, value_name = "EVENTS")]
    pub trace_buffer: usize,

    /// Do not write server.pcap and client.pcap (`h2probe export` can
    /// write them later from the trace).
    #[arg(long)]
    pub no_pcap: bool,

    /// Do not print progress lines.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `h2probe run`: both endpoints in one process on loopback.
#[derive(clap::Args, Clone, Debug)]
pub struct RunOpts {
    #[command(flatten, next_help_heading = "Server")]
    pub server: ServerOpts,
    #[command(flatten, next_help_heading = "Client")]
    pub client: ClientOpts,
    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputOpts,
}

impl Default for RunOpts {
    fn default() -> Self {
        RunOpts {
            server: ServerOpts::default(),
            client: ClientOpts::default(),
            output: OutputOpts {
                out: None,
                label: None,
                capture_payload: CapturePayload::Headers,
                trace_buffer: crate::trace::DEFAULT_CAPACITY,
                no_pcap: false,
                quiet: true,
            },
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
}

/// A `captures/<utc-time>-<label>` path.
pub fn default_run_dir(label: &str) -> PathBuf {
    let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let stamp: String = now
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '.')
        .collect();
    PathBuf::from("captures").join(format!("{}-{label}", stamp.replace('.', "")))
}

fn create_dir(out: &Option<PathBuf>, label: &str) -> anyhow::Result<PathBuf> {
    let dir = out.clone().unwrap_or_else(|| default_run_dir(label));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating run directory {}", dir.display()))?;
    Ok(dir)
}

/// Resolves when Ctrl-C arrives (never, if the handler cannot be installed).
/// Ctrl-C presses, listened for from the start of a command: the handler is
/// registered at once, so an early Ctrl-C is handled, never fatal.
struct Interrupts(watch::Receiver<u64>);

impl Interrupts {
    fn listen() -> Interrupts {
        let (tx, rx) = watch::channel(0u64);
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()) {
            Ok(mut sig) => {
                tokio::spawn(async move {
                    while sig.recv().await.is_some() {
                        tx.send_modify(|n| *n += 1);
                    }
                });
            }
            Err(e) => tracing::warn!("cannot listen for Ctrl-C: {e}"),
        }
        Interrupts(rx)
    }

    /// Resolves at the next Ctrl-C.
    async fn next(&mut self) {
        if self.0.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A progress line that lives while a command runs.
struct Progress {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    /// Stops the updates and clears the bar, so results print on a clean line.
    async fn finish(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// Shows progress: a bar updated every second on a terminal, a plain line
/// every 5 s otherwise, nothing with `--quiet`.
fn spawn_progress(live: Arc<Live>, planned: u64, quiet: bool) -> Progress {
    use std::io::IsTerminal;
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        if quiet {
            return;
        }
        let tty = std::io::stderr().is_terminal();
        let bar = tty.then(|| {
            let b = indicatif::ProgressBar::new(planned.max(1));
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len} scheduled  {msg}",
                )
                .expect("static template")
                .progress_chars("=> "),
            );
            b
        });
        let period = std::time::Duration::from_secs(if tty { 1 } else { 5 });
        let started = std::time::Instant::now();
        let mut tick = tokio::time::interval(period);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = &mut stopped => break,
            }
            let g = Live::get;
            let msg = format!(
                "sent {}  decoded {}  completed {}  queued {}  discarded {}  never-sent {}",
                g(&live.sent),
                g(&live.decoded),
                g(&live.completed),
                live.depth.load(std::sync::atomic::Ordering::Relaxed),
                g(&live.discarded),
                g(&live.never_sent)
            );
            match &bar {
                Some(b) => {
                    b.set_position(g(&live.scheduled));
                    b.set_message(msg);
                }
                None => eprintln!("h2probe: {:>5.0}s  {msg}", started.elapsed().as_secs_f64()),
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
    });
    Progress {
        stop: Some(stop),
        task,
    }
}

#[derive(serde::Serialize)]
struct Meta<'a> {
    schema: u32,
    tool: String,
    command: &'a str,
    argv: Vec<String>,
    config: serde_json::Value,
    versions: serde_json::Value,
    clock: serde_json::Value,
    host: serde_json::Value,
    started_unix_ns: u64,
    finished_unix_ns: u64,
    /// complete | interrupted | error: ...
    status: String,
    recorder: &'a RecorderStats,
    dropped_events: u64,
    listen: Option<String>,
}

fn host_info() -> serde_json::Value {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    serde_json::json!({
        "hostname": hostname,
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "kernel": kernel,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
    })
}

fn versions() -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("h2probe".into(), env!("CARGO_PKG_VERSION").into());
    for kv in env!("H2PROBE_DEP_VERSIONS").split(',') {
        if let Some((k, v)) = kv.split_once('=') {
            m.insert(k.into(), v.into());
        }
    }
    serde_json::Value::Object(m)
}

/// What the shared tail of every command needs to close a run.
struct Finish {
    dir: PathBuf,
    writer: TraceWriter,
    command: &'static str,
    config: serde_json::Value,
    started_unix: u64,
    status: String,
    listen: Option<String>,
    pcap: bool,
}

/// [`finalize`] off the async runtime (it blocks on the writer and on files).
async fn finish(f: Finish) -> anyhow::Result<(Summary, Vec<String>)> {
    tokio::task::spawn_blocking(move || finalize(f)).await?
}

/// Shared tail of every command: finish the trace, write meta.json, analyse,
/// write summary.json and the analysis products (and the pcaps).
fn finalize(f: Finish) -> anyhow::Result<(Summary, Vec<String>)> {
    let Finish {
        dir,
        writer,
        command,
        config,
        started_unix,
        status,
        listen,
        pcap,
    } = f;
    let dir = dir.as_path();
    let origin = writer_origin(dir);
    let finished = writer.finish();
    let (stats, status) = match finished {
        Ok(s) => (s, status),
        Err(e) => (RecorderStats::default(), format!("error: {e}")),
    };
    let meta = Meta {
        schema: crate::trace::schema::SCHEMA_VERSION,
        tool: format!("h2probe {}", env!("CARGO_PKG_VERSION")),
        command,
        argv: std::env::args().collect(),
        config,
        versions: versions(),
        clock: origin,
        host: host_info(),
        started_unix_ns: started_unix,
        finished_unix_ns: clock::wall_ns(),
        status: status.clone(),
        dropped_events: stats.dropped_total(),
        recorder: &stats,
        listen,
    };
    write_json(&dir.join("meta.json"), &meta)?;
    if let Some(err) = status.strip_prefix("error: ") {
        anyhow::bail!("the trace could not be written completely: {err}");
    }
    let products = crate::report::write_products(dir)?;
    if pcap {
        crate::export::pcap::export_pcaps(dir)?;
    }
    Ok(products)
}

/// The clock anchor from the trace header, for meta.json.
fn writer_origin(dir: &Path) -> serde_json::Value {
    let first = std::fs::read_to_string(dir.join("trace.jsonl"))
        .ok()
        .and_then(|s| s.lines().next().map(str::to_string))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(&l).ok());
    match first {
        Some(h) => serde_json::json!({
            "clock": h["clock"],
            "origin_mono_ns": h["origin_mono_ns"],
            "origin_unix_ns": h["origin_unix_ns"],
        }),
        None => serde_json::Value::Null,
    }
}

pub fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> anyhow::Result<()> {
    let mut s = serde_json::to_string_pretty(v)?;
    s.push('\n');
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

fn label_of(server: &ServerOpts) -> String {
    format!(
        "{}-{}",
        server.queue.to_string().replace(':', ""),
        server.release.as_str()
    )
}

/// `h2probe run`.
pub async fn run(opts: RunOpts) -> anyhow::Result<RunResult> {
    let mut interrupts = Interrupts::listen();
    opts.client.validate()?;
    let cfg = opts.server.validate(
        opts.output.capture_payload,
        Some(opts.client.framed_upper_bound()),
        Some(opts.client.streams),
    )?;
    let label = opts
        .output
        .label
        .clone()
        .unwrap_or_else(|| label_of(&opts.server));
    let dir = create_dir(&opts.output.out, &label)?;
    let started_unix = clock::wall_ns();
    let (writer, rec) = TraceWriter::create(&dir.join("trace.jsonl"), opts.output.trace_buffer)?;
    let live = Arc::new(Live::default());
    let conn_ids = Arc::new(AtomicU32::new(0));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (interrupt_tx, interrupt_rx) = watch::channel(false);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding 127.0.0.1")?;
    let addr = listener.local_addr()?;
    let sctx = Arc::new(ServerCtx {
        cfg,
        rec: rec.clone(),
        live: live.clone(),
        conn_ids: conn_ids.clone(),
        shutdown: shutdown_rx,
    });
    let server_task = tokio::spawn(server::serve(listener, sctx));
    let cctx = Arc::new(ClientCtx {
        opts: opts.client.clone(),
        target: addr,
        capture: opts.output.capture_payload,
        rec: rec.clone(),
        live: live.clone(),
        conn_ids,
        interrupt: interrupt_rx,
    });
    let planned = (opts.client.rate * opts.client.duration.0.as_secs_f64()) as u64;
    let progress = spawn_progress(live.clone(), planned, opts.output.quiet);

    let client_run = client::run(cctx);
    tokio::pin!(client_run);
    let mut interrupted = false;
    let outcomes = tokio::select! {
        r = &mut client_run => r,
        _ = interrupts.next() => {
            interrupted = true;
            eprintln!("h2probe: interrupted; stopping the client and the server, then finishing the trace");
            let _ = interrupt_tx.send(true);
            let _ = shutdown_tx.send(true);
            client_run.await
        }
    };
    // Let the server end its RPCs on its own (drain, deadline, client reset)
    // before shutting it down, so their ending is recorded for what it was.
    if !interrupted {
        let rpcs = (opts.client.connections * opts.client.streams) as u64;
        let grace = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while Live::get(&live.rpcs_done) < rpcs && tokio::time::Instant::now() < grace {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
    let _ = shutdown_tx.send(true);
    let server_result = server_task.await.context("server task")?;
    progress.finish().await;
    drop(rec);
    let outcomes = outcomes?;
    server_result?;

    let config = serde_json::json!({
        "server": opts.server,
        "client": opts.client,
        "output": opts.output,
    });
    let status = if interrupted {
        "interrupted"
    } else {
        "complete"
    }
    .to_string();
    let (summary, warnings) = finish(Finish {
        dir: dir.clone(),
        writer,
        command: "run",
        config,
        started_unix,
        status,
        listen: Some(addr.to_string()),
        pcap: !opts.output.no_pcap,
    })
    .await?;
    Ok(RunResult {
        dir,
        summary,
        warnings,
        outcomes,
        interrupted,
    })
}

/// `h2probe serve`.
#[derive(clap::Args, Clone, Debug)]
pub struct ServeOpts {
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,

    /// Stop (as on Ctrl-C) after this many RPCs have ended.
    #[arg(long, value_name = "N")]
    pub exit_after: Option<u64>,

    /// Stop (as on Ctrl-C) after this long.
    #[arg(long = "for", value_name = "DURATION")]
    pub run_for: Option<Dur>,

    #[command(flatten, next_help_heading = "Server")]
    pub server: ServerOpts,
    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputOpts,
}

pub async fn serve(opts: ServeOpts) -> anyhow::Result<(PathBuf, Summary, Vec<String>)> {
    let mut interrupts = Interrupts::listen();
    let cfg = opts
        .server
        .validate(opts.output.capture_payload, None, None)?;
    let label = opts
        .output
        .label
        .clone()
        .unwrap_or_else(|| format!("serve-{}", label_of(&opts.server)));
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .with_context(|| format!("binding {}", opts.listen))?;
    let addr = listener.local_addr()?;
    let dir = create_dir(&opts.output.out, &label)?;
    let started_unix = clock::wall_ns();
    let (writer, rec) = TraceWriter::create(&dir.join("trace.jsonl"), opts.output.trace_buffer)?;
    let live = Arc::new(Live::default());
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let sctx = Arc::new(ServerCtx {
        cfg,
        rec: rec.clone(),
        live: live.clone(),
        conn_ids: Arc::new(AtomicU32::new(0)),
        shutdown: shutdown_rx,
    });
    // The address line is machine-readable: scripts wait for it.
    println!(
        "h2probe: listening on {addr} (run directory {})",
        dir.display()
    );
    let server_task = tokio::spawn(server::serve(listener, sctx));
    let progress = spawn_progress(live.clone(), 0, opts.output.quiet);
    let stop_after = async {
        match opts.exit_after {
            Some(n) => loop {
                if Live::get(&live.rpcs_done) >= n {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            },
            None => std::future::pending().await,
        }
    };
    let timer = async {
        match opts.run_for {
            Some(d) => tokio::time::sleep(d.0).await,
            None => std::future::pending().await,
        }
    };
    let status = tokio::select! {
        _ = interrupts.next() => "interrupted",
        _ = stop_after => "complete",
        _ = timer => "complete",
    };
    if status == "interrupted" {
        eprintln!(
            "h2probe: interrupted; finishing RPCs (--shutdown-drain={}) and the trace",
            opts.server.shutdown_drain
        );
    }
    let _ = shutdown_tx.send(true);
    let served = tokio::select! {
        r = server_task => r.context("server task")?,
        _ = interrupts.next() => { eprintln!("h2probe: second interrupt; abandoning open RPCs"); Ok(()) }
    };
    progress.finish().await;
    drop(rec);
    served?;
    let config = serde_json::json!({ "server": opts.server, "output": opts.output, "listen": addr.to_string() });
    let (summary, warnings) = finish(Finish {
        dir: dir.clone(),
        writer,
        command: "serve",
        config,
        started_unix,
        status: status.to_string(),
        listen: Some(addr.to_string()),
        pcap: !opts.output.no_pcap,
    })
    .await?;
    Ok((dir, summary, warnings))
}

/// `h2probe client`.
#[derive(clap::Args, Clone, Debug)]
pub struct ClientCmdOpts {
    /// Server to connect to (h2c, prior knowledge).
    #[arg(long, default_value = "127.0.0.1:50051", value_name = "ADDR")]
    pub connect: std::net::SocketAddr,
    #[command(flatten, next_help_heading = "Client")]
    pub client: ClientOpts,
    #[command(flatten, next_help_heading = "Output")]
    pub output: OutputOpts,
}

pub async fn client_cmd(
    opts: ClientCmdOpts,
) -> anyhow::Result<(PathBuf, Summary, Vec<String>, Vec<RpcOutcome>)> {
    let mut interrupts = Interrupts::listen();
    opts.client.validate()?;
    let label = opts.output.label.clone().unwrap_or_else(|| "client".into());
    let dir = create_dir(&opts.output.out, &label)?;
    let started_unix = clock::wall_ns();
    let (writer, rec) = TraceWriter::create(&dir.join("trace.jsonl"), opts.output.trace_buffer)?;
    let live = Arc::new(Live::default());
    let (interrupt_tx, interrupt_rx) = watch::channel(false);
    let cctx = Arc::new(ClientCtx {
        opts: opts.client.clone(),
        target: opts.connect,
        capture: opts.output.capture_payload,
        rec: rec.clone(),
        live: live.clone(),
        conn_ids: Arc::new(AtomicU32::new(0)),
        interrupt: interrupt_rx,
    });
    let planned = (opts.client.rate * opts.client.duration.0.as_secs_f64()) as u64;
    let progress = spawn_progress(live, planned, opts.output.quiet);
    let run = client::run(cctx);
    tokio::pin!(run);
    let mut status = "complete";
    let outcomes = tokio::select! {
        r = &mut run => r,
        _ = interrupts.next() => {
            status = "interrupted";
            let _ = interrupt_tx.send(true);
            run.await
        }
    };
    progress.finish().await;
    drop(rec);
    let config = serde_json::json!({ "client": opts.client, "output": opts.output, "connect": opts.connect.to_string() });
    let finalized = finish(Finish {
        dir: dir.clone(),
        writer,
        command: "client",
        config,
        started_unix,
        status: status.to_string(),
        listen: None,
        pcap: !opts.output.no_pcap,
    })
    .await;
    let outcomes = outcomes?;
    let (summary, warnings) = finalized?;
    Ok((dir, summary, warnings, outcomes))
}

/// Reads a run's analysis results (used by `analyze` and `compare`).
pub fn analyze_dir(dir: &Path) -> anyhow::Result<(Summary, Vec<String>)> {
    let trace = h2probe_analysis::reader::trace_path(dir).ok_or_else(|| {
        h2probe_analysis::reader::OpenError::NotARun {
            dir: dir.display().to_string(),
        }
    })?;
    let a = analyze_trace(&trace)?;
    Ok((a.summary, a.warnings))
}
