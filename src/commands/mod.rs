//! The commands that write run directories (`run`, `serve`, `client`,
//! `compare`'s matrix, `merge`) and the one skeleton they share:
//! directory → trace writer → progress → interrupts → finish (trace footer,
//! meta.json, analysis products, pcaps). Signal and shutdown behaviour
//! lives here, once.

/// What tables printed on the terminal fit (wider terminals are welcome to
/// the Markdown and HTML the commands also write).
pub const TERMINAL_WIDTH: usize = 80;

pub mod client;
pub mod matrix;
pub mod merge;
mod progress;
pub mod relay;

pub(crate) use progress::analyse_showing_progress;
pub mod report;
pub mod run;
pub mod serve;
pub mod sweep;

use crate::config::CapturePayload;
use crate::live::Live;
use crate::server::listen::{ListenAddr, Listener};
use crate::trace::{clock, Recorder, RecorderStats, TraceWriter};
use anyhow::Context as _;
use h2probe_analysis::analyze::{analyze_trace, Summary};
use h2probe_analysis::meta::{Host, Meta, RunConfig, META_VERSION};
use progress::Progress;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::watch;

/// Binds `serve`'s or `relay`'s listening socket (a TCP address or a Unix
/// domain socket) before anything is written; a port in use says what to
/// do about it.
pub(crate) async fn bind_server(addr: &ListenAddr) -> anyhow::Result<Listener> {
    Listener::bind(addr).await.map_err(|e| bind_error(addr, e))
}

fn bind_error(addr: &ListenAddr, e: std::io::Error) -> anyhow::Error {
    let other = match addr {
        ListenAddr::Tcp(_) => "another port, or port 0 for a free one",
        ListenAddr::Unix(_) => "another path",
    };
    match e.kind() {
        std::io::ErrorKind::AddrInUse => anyhow::anyhow!(
            "binding {addr}: {e}; another process listens there. No run directory was written: give --listen {other}"
        ),
        std::io::ErrorKind::AlreadyExists => anyhow::anyhow!(
            "binding {addr}: {e} (h2probe replaces only a stale socket). No run directory was written: give --listen {other}"
        ),
        _ => anyhow::Error::new(e).context(format!("binding {addr} (no run directory was written)")),
    }
}

/// Where and how a run is written.
#[derive(clap::Args, Clone, Debug, serde::Serialize)]
pub struct OutputOpts {
    /// Run directory to write (default: captures/<utc-time>-<label>/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Label for the default run directory name (default: derived from the config).
    #[arg(long)]
    pub label: Option<String>,

    /// Payload bytes kept in frame events: none, headers (all but the upload's DATA) or full.
    /// pcap files stay decodable in every mode (missing bytes become zeros).
    #[arg(
        long,
        value_enum,
        default_value = "headers",
        value_name = "MODE",
        conflicts_with = "no_trace"
    )]
    pub capture_payload: CapturePayload,

    /// Recorder buffer, in events. When full, events are dropped and counted
    /// (never blocking the transport); analyze warns about any drop.
    #[arg(long, default_value_t = crate::trace::DEFAULT_CAPACITY, value_name = "EVENTS", conflicts_with = "no_trace")]
    pub trace_buffer: usize,

    /// Captured payload the recorder may hold for the writer
    /// (`--capture-payload`), with what else a peer sizes (SETTINGS lists,
    /// request paths). A frame past it, or larger than it, is recorded
    /// without its bytes (`payload_dropped` in the trace, counted in meta.json
    /// and summary.json); analyze warns. Below the largest frame (16KiB by
    /// default) every frame that large loses its bytes.
    #[arg(
        long,
        default_value = "64MiB",
        value_name = "SIZE",
        conflicts_with = "no_trace"
    )]
    pub trace_payload_buffer: crate::config::Size,

    /// Stop the run once trace.jsonl holds SIZE (e.g. 2GiB), as dumpcap's
    /// autostop does: a server traced for hours, or a peer that floods,
    /// cannot fill the disk. Open RPCs end at once (no drain); past SIZE
    /// frames are written without captured payload (counted), so the trace
    /// ends a little beyond it, whole: the events of the stop, its footer,
    /// nothing dropped. The run's status says the limit stopped it (exit
    /// 1). Default: no limit.
    #[arg(long, value_name = "SIZE", conflicts_with = "no_trace")]
    pub trace_limit: Option<crate::config::Size>,

    /// Do not write the pcaps: server.pcap and client.pcap (a relay's
    /// server_leg.pcap and client_leg.pcap); `h2probe export` can write
    /// them later from the trace.
    #[arg(long)]
    pub no_pcap: bool,

    /// Write the pcaps gzip-compressed (server.pcap.gz, client.pcap.gz, or
    /// a relay's *_leg.pcap.gz; Wireshark and tshark read them as they
    /// are). DATA payload the trace did not keep is zeros in a pcap, so a
    /// plain one is as large as the upload; compressed, it is about the
    /// size of the frame headers.
    #[arg(long, conflicts_with_all = ["no_pcap", "no_trace"])]
    pub pcap_gzip: bool,

    /// Do not print progress lines (warnings and errors are still printed).
    #[arg(long, short)]
    pub quiet: bool,

    /// Record nothing: the endpoints run without the recorder, the tap
    /// without a trace (meta.json only). The tool's own overhead baseline;
    /// there is nothing to analyse.
    #[arg(long)]
    pub no_trace: bool,

    /// Replace the run directory given with --out if it is not empty (its
    /// trace, meta, summary, CSV, plots and pcaps are removed first, so no
    /// stale file contradicts the new trace).
    #[arg(long)]
    pub force: bool,
}

/// Which pcaps a run writes when it ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pcaps {
    None,
    Plain,
    Gzip,
}

impl OutputOpts {
    /// The pcaps `--no-pcap` / `--pcap-gzip` ask for.
    pub fn pcaps(&self) -> Pcaps {
        match (self.no_pcap, self.pcap_gzip) {
            (true, _) => Pcaps::None,
            (false, true) => Pcaps::Gzip,
            (false, false) => Pcaps::Plain,
        }
    }

    /// Refuses what cannot run (exit 2).
    pub fn validate(&self) -> anyhow::Result<()> {
        crate::refuse_unless!(
            (1..=1 << 24).contains(&self.trace_buffer),
            "--trace-buffer must be between 1 and 16777216 events, got {}",
            self.trace_buffer
        );
        if let Some(limit) = self.trace_limit {
            crate::refuse_unless!(
                limit.0 >= 1 << 20,
                "--trace-limit must be at least 1MiB, got {limit}: a trace that small holds little more than a connection's opening"
            );
        }
        Ok(())
    }
}

impl Default for OutputOpts {
    fn default() -> Self {
        OutputOpts {
            out: None,
            label: None,
            capture_payload: CapturePayload::Headers,
            trace_buffer: crate::trace::DEFAULT_CAPACITY,
            trace_payload_buffer: crate::config::Size(crate::trace::PAYLOAD_BUDGET),
            trace_limit: None,
            no_pcap: false,
            pcap_gzip: false,
            quiet: true,
            no_trace: false,
            force: false,
        }
    }
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

/// Interruptions — Ctrl-C (SIGINT), SIGTERM and SIGHUP alike — listened
/// for from the start of a command: the handlers are registered at once, so
/// an early signal is handled, never fatal. The first one stops intake and
/// finishes the run directory; a second one abandons what is still open.
pub(crate) struct Interrupts {
    signals: watch::Receiver<u64>,
    /// The trace writer's failure, once the session has a writer: a full
    /// disk stops the run like a signal does.
    failure: Option<watch::Receiver<Option<crate::trace::WriterFailure>>>,
}

impl Interrupts {
    pub(crate) fn listen() -> Interrupts {
        use tokio::signal::unix::{signal, SignalKind};
        let (tx, rx) = watch::channel(0u64);
        for (kind, name) in [
            (SignalKind::interrupt(), "SIGINT"),
            (SignalKind::terminate(), "SIGTERM"),
            (SignalKind::hangup(), "SIGHUP"),
        ] {
            match signal(kind) {
                Ok(mut sig) => {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        while sig.recv().await.is_some() {
                            tx.send_modify(|n| *n += 1);
                        }
                    });
                }
                Err(e) => tracing::warn!("cannot listen for {name}: {e}"),
            }
        }
        Interrupts {
            signals: rx,
            failure: None,
        }
    }

    /// Resolves at the next signal, or when the trace can no longer be
    /// written (never, if neither can happen any more).
    pub(crate) async fn next(&mut self) {
        let signal = async {
            if self.signals.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let failure = async {
            match &mut self.failure {
                Some(f) if f.borrow().is_none() => {
                    if f.wait_for(Option::is_some).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                // Already failed (reported once) or no writer yet.
                _ => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = signal => {}
            _ = failure => {}
        }
    }

    /// Why the run is stopping: the write failure, if that is what it was.
    pub(crate) fn failure(&self) -> Option<String> {
        self.writer_failure().map(|f| f.message)
    }

    /// The same, with its few words for the client's `rpc_end`.
    pub(crate) fn writer_failure(&self) -> Option<crate::trace::WriterFailure> {
        self.failure.as_ref().and_then(|f| f.borrow().clone())
    }

    /// Says on stderr why the run stops (`what` is what happens next).
    pub(crate) fn announce(&self, what: &str) {
        match self.failure() {
            Some(err) => {
                crate::say!("{err}; stopping the run, then finishing what can be written")
            }
            None => crate::say!("interrupted; {what}"),
        }
    }
}

/// Waits for what ends a listening session (`serve`, `relay`): an
/// interrupt, `--exit-after` units done as `done` counts them, or `--for`'s
/// time.
pub(crate) async fn wait_for_stop(
    interrupts: &mut Interrupts,
    exit_after: Option<u64>,
    done: impl Fn() -> u64,
    run_for: Option<std::time::Duration>,
) -> Status {
    let stop_after = async {
        match exit_after {
            Some(n) => {
                while done() < n {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
            None => std::future::pending().await,
        }
    };
    let timer = async {
        match run_for {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = interrupts.next() => Status::Interrupted,
        _ = stop_after => Status::Complete,
        _ = timer => Status::Complete,
    }
}

/// Waits for the server to finish its shutdown; a second interrupt cuts it
/// short (`abandon`): RPCs still draining discard their queues and end,
/// connections close at once, and their ends are in the trace. Waits for
/// that a few seconds at most (a third interrupt: not at all).
pub(crate) async fn finish_or_abandon(
    mut server: tokio::task::JoinHandle<anyhow::Result<()>>,
    interrupts: &mut Interrupts,
    abandon: &watch::Sender<bool>,
) -> anyhow::Result<()> {
    tokio::select! {
        r = &mut server => return r.context("server task")?,
        _ = interrupts.next() => {}
    }
    crate::say!(
        "second interrupt; abandoning open RPCs (their ends are recorded; again to stop waiting)"
    );
    let _ = abandon.send(true);
    tokio::select! {
        r = tokio::time::timeout(std::time::Duration::from_secs(3), &mut server) => match r {
            Ok(r) => r.context("server task")?,
            Err(_) => Ok(()),
        },
        _ = interrupts.next() => Ok(()),
    }
}

/// Refuses Exchange's flags given to an Ingest run (they would do nothing).
pub(crate) fn refuse_exchange_only(flags: &[String]) -> anyhow::Result<()> {
    crate::refuse_unless!(
        flags.is_empty(),
        "{} appl{} to --rpc exchange (Part 3) only; add --rpc exchange, or leave {} out",
        flags.join(", "),
        if flags.len() == 1 { "ies" } else { "y" },
        if flags.len() == 1 { "it" } else { "them" }
    );
    Ok(())
}

/// `--for`'s parser: a duration longer than 0 (0 would stop before
/// anything was served, as `--exit-after 0` would).
pub(crate) fn parse_for(s: &str) -> Result<crate::config::Dur, String> {
    let d: crate::config::Dur = s.parse()?;
    if d.0.is_zero() {
        return Err("must be longer than 0 (0 would stop before anything ran)".into());
    }
    Ok(d)
}

/// `--exit-after`'s parser: a count of at least 1 (0 would stop before
/// anything was served).
pub(crate) fn parse_count(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1 (0 would stop before anything ran)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{s:?} is not a count: {e}")),
    }
}

/// `--out` names a directory to create or write into: a file of that name
/// is refused as a usage error (exit 2), not met later as "File exists".
pub(crate) fn refuse_a_file_as_out(dir: &Path) -> anyhow::Result<()> {
    crate::refuse_unless!(
        !dir.exists() || dir.is_dir(),
        "--out {} is a file, not a directory; give a directory (created if missing), or another --out",
        dir.display()
    );
    Ok(())
}

/// Creates the run directory; refuses a non-empty one unless `force`, and
/// then clears the previous run's products out of it.
fn prepare_dir(dir: &Path, force: bool) -> anyhow::Result<()> {
    refuse_a_file_as_out(dir)?;
    let entries: Vec<_> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(Result::ok).collect(),
        Err(_) => vec![],
    };
    if !entries.is_empty() {
        crate::refuse_unless!(
            force,
            "--out {} is not empty ({}, e.g. {}); use --force to replace the run in it, or another --out",
            dir.display(),
            if entries.len() == 1 { "1 entry".to_string() } else { format!("{} entries", entries.len()) },
            entries[0].file_name().to_string_lossy()
        );
        for e in &entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            // A run's files, with meta.json's room beside them.
            let product = h2probe_analysis::RUN_FILES.contains(&name.as_str())
                || name == MetaRoom::NAME
                || name.ends_with(".svg")
                || name == "csv"
                || (name.starts_with('.') && name.ends_with(".partial"));
            if !product {
                continue;
            }
            let r = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            r.with_context(|| format!("removing {} (--force)", path.display()))?;
        }
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("creating run directory {}", dir.display()))
}

/// How a command's run ended, as meta.json records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Complete,
    Interrupted,
    /// The run stopped on an error (a client that could not connect):
    /// `error: …` in meta.json, as after a write error.
    Failed(String),
}

impl Status {
    pub fn label(&self) -> String {
        match self {
            Status::Complete => "complete".into(),
            Status::Interrupted => "interrupted".into(),
            Status::Failed(e) => format!("error: {e}"),
        }
    }
}

/// One command's run directory from creation to the finished products:
/// the skeleton `run`, `serve` and `client` share.
pub(crate) struct Session {
    pub(crate) dir: PathBuf,
    pub(crate) rec: Recorder,
    pub(crate) live: Arc<Live>,
    pub(crate) interrupts: Interrupts,
    command: &'static str,
    /// `None` with `--no-trace`.
    writer: Option<TraceWriter>,
    progress: Progress,
    started_unix: u64,
    quiet: bool,
    meta_room: MetaRoom,
}

/// Room kept on the run directory's disk for meta.json: a file of
/// [`MetaRoom::BYTES`] written when the run starts and removed (dropped)
/// just before meta.json is written. A trace that fills the disk then leaves meta.json
/// room for its `error: …` status (it was written empty, the status lost).
struct MetaRoom {
    path: PathBuf,
}

impl MetaRoom {
    const NAME: &'static str = ".meta.json.room";
    /// meta.json is about 2 KB; a merge of many clients, or long argv, more.
    const BYTES: usize = 64 * 1024;

    fn keep(dir: &Path) -> anyhow::Result<MetaRoom> {
        let path = dir.join(Self::NAME);
        if let Err(e) = std::fs::write(&path, [0u8; Self::BYTES]) {
            // Not left behind: the next run to this --out is refused for it.
            let _ = std::fs::remove_file(&path);
            return Err(e)
                .with_context(|| format!("keeping room for meta.json in {}", dir.display()));
        }
        Ok(MetaRoom { path })
    }
}

impl Drop for MetaRoom {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What a finished session produced.
pub struct Finished {
    pub dir: PathBuf,
    pub summary: Summary,
    pub warnings: Vec<String>,
    /// The run could not be recorded completely (the trace or a product
    /// could not be written): the summary covers what the trace holds.
    pub error: Option<String>,
}

impl Session {
    /// Creates the run directory (`--out` or a default one named after
    /// `label`), starts the trace writer and the progress line (`planned`
    /// messages; 0 when unknown).
    pub(crate) fn open(
        command: &'static str,
        interrupts: Interrupts,
        output: &OutputOpts,
        label: &str,
        plan: progress::Plan,
    ) -> anyhow::Result<Session> {
        let dir = output.out.clone().unwrap_or_else(|| default_run_dir(label));
        prepare_dir(&dir, output.force)?;
        let meta_room = MetaRoom::keep(&dir)?;
        let started_unix = clock::wall_ns();
        let mut interrupts = interrupts;
        let (writer, rec) = if output.no_trace {
            (None, Recorder::disabled())
        } else {
            let (writer, rec) = TraceWriter::create_bounded(
                &dir.join("trace.jsonl"),
                output.trace_buffer,
                output.trace_payload_buffer.0,
                output.trace_limit.map(|l| l.0),
            )?;
            interrupts.failure = Some(writer.failures());
            (Some(writer), rec)
        };
        let live = Arc::new(Live::default());
        let progress = progress::spawn_progress(live.clone(), plan, command, output.quiet);
        Ok(Session {
            dir,
            rec,
            live,
            interrupts,
            command,
            writer,
            progress,
            started_unix,
            quiet: output.quiet,
            meta_room,
        })
    }

    /// Stops the progress line, closes the trace and writes meta.json, the
    /// analysis products and (with `pcap`) the pcaps. Every recorder clone
    /// the endpoints held must be gone: later events count as dropped.
    pub(crate) async fn finish(
        self,
        config: RunConfig,
        status: Status,
        listen: Option<String>,
        pcap: Pcaps,
    ) -> anyhow::Result<Finished> {
        let Session {
            dir,
            rec,
            command,
            writer,
            progress,
            started_unix,
            quiet,
            mut interrupts,
            meta_room,
            ..
        } = self;
        // A run the writer stopped (`--trace-limit`, a full disk) ends in
        // its error, not as if someone had pressed Ctrl-C.
        let stopped_by = interrupts.failure();
        let status = match (status, &stopped_by) {
            (Status::Interrupted, Some(why)) => Status::Failed(why.clone()),
            (status, _) => status,
        };
        progress.finish().await;
        drop(rec);
        // A long trace takes a while to analyse (and export): show how much
        // of it has been read (short runs finish before the display starts).
        // The analysis reads it once, the report's ladder up to once more,
        // the pcaps once more.
        let passes = if pcap == Pcaps::None { 2 } else { 3 };
        let reading = progress::reading_progress(
            "finishing".to_string(),
            dir.join("trace.jsonl"),
            passes,
            quiet || writer.is_none(),
        );
        let d = dir.clone();
        let meta_written = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let written = meta_written.clone();
        let mut job = tokio::task::spawn_blocking(move || {
            finalize(
                &d,
                writer,
                meta_room,
                command,
                config,
                started_unix,
                status,
                listen,
                pcap,
                &written,
            )
        });
        // Ctrl-C while the run directory is finished (a long trace takes a
        // while to analyse): said what it does at once; a second one, once
        // the trace and meta.json are whole, leaves the rest to `analyze`.
        // A second Ctrl-C before the trace is whole is kept until it is.
        let mut presses = 0;
        let mut wait = tokio::time::interval(std::time::Duration::from_millis(20));
        let (summary, warnings, error) = loop {
            let whole = meta_written.load(std::sync::atomic::Ordering::Acquire);
            if presses >= 2 && whole {
                drop(reading);
                skip_products(&dir);
            }
            tokio::select! {
                r = &mut job => break r??,
                _ = interrupts.next() => {
                    presses += 1;
                    if presses == 1 {
                        // Read again: the trace may have become whole
                        // while this waited.
                        let whole = meta_written.load(std::sync::atomic::Ordering::Acquire);
                        crate::say!(
                            "finishing: {}; again to skip the analysis, plots, report and pcaps \
                             (`h2probe analyze {}` writes them later, `h2probe export --format pcap` the pcaps)",
                            if whole {
                                "the trace and meta.json are whole"
                            } else {
                                "the trace is being closed (it must be whole)"
                            },
                            dir.display()
                        );
                    }
                }
                _ = wait.tick(), if presses >= 2 => {}
            }
        };
        if error.is_none() {
            reading.done();
        }
        let error = error.or(stopped_by);
        Ok(Finished {
            dir,
            summary,
            warnings,
            error,
        })
    }
}

/// The offline commands (analyze, report, merge, export) have no run to
/// finish: at a signal (SIGINT, SIGTERM, SIGHUP) they remove the products
/// being written aside (h2probe_analysis::aside: each product stays whole,
/// the previous one or the new one) and leave with an interrupt's code. The
/// handlers are registered before this returns; a thread of their own
/// waits, so the commands' blocking work needs no runtime.
pub(crate) fn leave_whole_on_interrupt() {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::warn!("cannot listen for signals: {e}");
            return;
        }
    };
    let signals: Vec<_> = {
        let _in = rt.enter();
        [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
        ]
        .into_iter()
        .filter_map(|kind| signal(kind).ok())
        .collect()
    };
    let waiting = std::thread::Builder::new()
        .name("h2probe-signals".into())
        .spawn(move || {
            rt.block_on(async move {
                let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
                for mut sig in signals {
                    let tx = tx.clone();
                    tokio::spawn(async move {
                        if sig.recv().await.is_some() {
                            let _ = tx.try_send(());
                        }
                    });
                }
                drop(tx);
                if rx.recv().await.is_none() {
                    std::future::pending::<()>().await;
                }
            });
            let removed = h2probe_analysis::aside::abandon();
            crate::say!("{}", interrupted_offline(removed));
            std::process::exit(130)
        });
    if let Err(e) = waiting {
        tracing::warn!("cannot listen for signals: {e}");
    }
}

/// Leaves at a second Ctrl-C while the products are written (see
/// [`Session::finish`]): the trace and meta.json are whole; a product
/// being written is left out (its `.partial` file removed), and the exit
/// code is an interrupt's.
fn skip_products(dir: &Path) -> ! {
    // What the finishing thread writes is refused from now on: removing
    // the partial files alone raced it (it created the next one after).
    h2probe_analysis::aside::abandon();
    remove_partials(dir);
    crate::say!(
        "finishing skipped: {} holds the trace and meta.json; `h2probe analyze {}` writes the analysis, plots and report, \
         `h2probe export --format pcap {}` the pcaps",
        dir.display(),
        dir.display(),
        dir.display()
    );
    std::process::exit(130)
}

/// What an offline command says as a signal stops it, `removed` products
/// having been abandoned half-written.
fn interrupted_offline(removed: usize) -> String {
    match removed {
        0 => "interrupted; nothing was being written".into(),
        n => format!(
            "interrupted; {n} product{} being written removed (what was already written is whole)",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// Removes the products being written aside in `dir` (`.NAME.partial`
/// files, and the plots' directory `.plots.partial`).
fn remove_partials(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && name.ends_with(".partial") {
                // The plots are written into a directory aside
                // (`.plots.partial`), which remove_file left behind.
                let _ = match e.file_type() {
                    Ok(t) if t.is_dir() => std::fs::remove_dir_all(e.path()),
                    _ => std::fs::remove_file(e.path()),
                };
            }
        }
    }
}

/// Finishes the trace, writes meta.json, analyses, writes summary.json and
/// the analysis products (and the pcaps). Blocking: run it off the runtime.
///
/// When the trace could not be written completely (disk full), the trace
/// file is still analysed up to its last complete line and that summary is
/// returned with the error, whatever else can no longer be written.
#[allow(clippy::too_many_arguments)]
fn finalize(
    dir: &Path,
    writer: Option<TraceWriter>,
    meta_room: MetaRoom,
    command: &'static str,
    config: RunConfig,
    started_unix: u64,
    status: Status,
    listen: Option<String>,
    pcap: Pcaps,
    meta_written: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(Summary, Vec<String>, Option<String>)> {
    let clock = writer.as_ref().map(TraceWriter::anchor);
    let (stats, status, error) = match writer.map(TraceWriter::finish) {
        None => (RecorderStats::default(), status.label(), None),
        Some(Ok(s)) => (s, status.label(), None),
        Some(Err(e)) => (
            e.stats.clone(),
            Status::Failed(e.to_string()).label(),
            Some(format!("the trace could not be written completely: {e}")),
        ),
    };
    let traced = clock.is_some();
    let meta = Meta {
        schema: META_VERSION,
        tool: format!("h2probe {}", env!("CARGO_PKG_VERSION")),
        command: command.to_string(),
        argv: redacted_argv(std::env::args()),
        config,
        versions: versions(),
        clock,
        host: host_info(),
        started_unix_ns: started_unix,
        finished_unix_ns: clock::wall_ns(),
        status,
        dropped_events: stats.dropped_total(),
        recorder: stats,
        listen,
        ..Meta::default()
    };
    let mut warnings = vec![];
    drop(meta_room); // its room, for meta.json
    match write_json(&dir.join("meta.json"), &meta) {
        Ok(()) => meta_written.store(true, std::sync::atomic::Ordering::Release),
        Err(e) => match &error {
            Some(_) => warnings.push(format!("{e:#}")),
            None => return Err(e),
        },
    }
    if !traced {
        let summary = Summary {
            run_status: meta.status.clone(),
            trace_ending: "none".into(),
            ..Summary::default()
        };
        return Ok((summary, warnings, None));
    }
    if let Some(err) = error {
        // Analyse what the file holds, in memory; products only if they fit.
        let (mut summary, mut w) = analyze_dir(dir)?;
        summary.run_status = meta.status.clone();
        warnings.append(&mut w);
        if let Err(e) = h2probe_analysis::report::write_products(dir) {
            warnings.push(format!("analysis products not written: {e}"));
        }
        return Ok((summary, warnings, Some(err)));
    }
    // The trace is whole; a product that cannot be written (a disk that
    // filled after it) is the command's error, said beside the headline of
    // what the trace holds.
    let products = h2probe_analysis::report::write_products(dir)
        .map_err(anyhow::Error::from)
        .and_then(|(summary, mut w)| {
            warnings.append(&mut w);
            if pcap != Pcaps::None {
                let counts = crate::export::pcap::export_pcaps(dir, pcap == Pcaps::Gzip)?;
                if counts.packets() == 0 {
                    warnings.push(crate::export::pcap::NO_CONNECTION.into());
                }
            }
            Ok(summary)
        });
    match products {
        Ok(summary) => Ok((summary, warnings, None)),
        Err(e) => {
            // The run itself is as meta.json says (its status is not this
            // error: `analyze` writes the products later, and the run is
            // then as whole as any); the headline printed now says it.
            let err = format!("the run's products could not be written: {e:#}");
            let (mut summary, mut w) = analyze_dir(dir)?;
            warnings.append(&mut w);
            summary.run_status = Status::Failed(err.clone()).label();
            Ok((summary, warnings, Some(err)))
        }
    }
}

/// The command line for meta.json, credentials in `-H` values redacted
/// (`-H 'authorization: …'` keeps the name and the value's length).
pub(crate) fn redacted_argv(args: impl Iterator<Item = String>) -> Vec<String> {
    use crate::client::target::redact_header;
    let mut out: Vec<String> = vec![];
    let mut header_next = false;
    for a in args {
        let r = if header_next {
            redact_header(&a)
        } else if let Some(v) = a.strip_prefix("--header=") {
            format!("--header={}", redact_header(v))
        } else if let Some(v) = a.strip_prefix("-H").filter(|v| !v.is_empty()) {
            format!("-H{}", redact_header(v))
        } else {
            a.clone()
        };
        header_next = a == "-H" || a == "--header";
        out.push(r);
    }
    out
}

/// This host, for meta.json (a merge refuses traces of different hosts or boots).
pub(crate) fn host_info() -> Host {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    Host {
        hostname: read("/proc/sys/kernel/hostname"),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
    }
}

fn versions() -> std::collections::BTreeMap<String, String> {
    let mut m = std::collections::BTreeMap::new();
    m.insert("h2probe".into(), env!("CARGO_PKG_VERSION").into());
    for kv in env!("H2PROBE_DEP_VERSIONS").split(',') {
        if let Some((k, v)) = kv.split_once('=') {
            m.insert(k.into(), v.into());
        }
    }
    m
}

/// A configuration part as meta.json keeps it.
pub(crate) fn config_part<T: serde::Serialize>(
    v: &T,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// Writes `v` as pretty JSON with a final newline.
pub fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> anyhow::Result<()> {
    std::fs::write(path, json_text(v)?).with_context(|| format!("writing {}", path.display()))
}

/// `v` as the run directory's JSON files hold it: pretty, one final newline.
pub fn json_text<T: serde::Serialize>(v: &T) -> anyhow::Result<String> {
    let mut s = serde_json::to_string_pretty(v)?;
    s.push('\n');
    Ok(s)
}

/// Reads a run's analysis results (used by `analyze` and `compare`).
pub fn analyze_dir(dir: &Path) -> anyhow::Result<(Summary, Vec<String>)> {
    let trace = h2probe_analysis::reader::trace_path(dir)
        .ok_or_else(|| h2probe_analysis::reader::OpenError::no_trace_in(dir))?;
    let a = analyze_trace(&trace)?;
    let (mut summary, mut warnings) = (a.summary, a.warnings);
    // How the run ended (compare marks the runs that did not end
    // complete), as in the products `analyze` writes.
    summary.run_status = h2probe_analysis::report::run_status_of(dir, &mut warnings);
    Ok((summary, warnings))
}

/// The label of a run directory, from meta.json: its release point and
/// queue, then every server and client setting that differs from the
/// default (so runs that differ in any parameter are never pooled); its
/// directory name when it has no configuration.
pub(crate) fn config_of(dir: &Path) -> String {
    let Ok(meta) = Meta::read(dir) else {
        return dir_name(dir);
    };
    let Some(mut label) = meta.config_label() else {
        return dir_name(dir);
    };
    let defaults = [
        (
            meta.config.server.as_ref(),
            config_part(&crate::server::ServerOpts::default()),
        ),
        (
            meta.config.client.as_ref(),
            Some(client::default_client_config()),
        ),
    ];
    let mut differing = std::collections::BTreeMap::new();
    for (part, default) in defaults {
        let (Some(part), Some(default)) = (part, default) else {
            continue;
        };
        settings_differing("", part, &default, &mut differing);
    }
    // With the server in the run, its settings say which server it was; the
    // client's address of it is only the port a fresh `serve` was given, and
    // would keep repeats apart.
    if meta.config.server.is_some() {
        differing.remove("target.connect");
    }
    // A repeat's seed is its place among the repeats (compare's matrix gives
    // repeat N seed N, which pairs Part 3's repeats), never a configuration:
    // kept, it put each repeat of a matrix in a group of its own.
    differing.remove("seed");
    // Already in the label (config_label: release, queue or a Part 3 run's
    // policy, and a stack other than h2's), which named a hyper run's stack
    // twice.
    for said in ["release", "queue", "stack"] {
        differing.remove(said);
    }
    if label.contains(" when-full=") {
        differing.remove("when-full");
        differing.remove("retry");
    }
    // A merge of several clients: how many, and where each after the first
    // differs from it.
    let more = &meta.config.more_clients;
    if let (false, Some(first)) = (more.is_empty(), meta.config.client.as_ref()) {
        differing.insert("clients".into(), (more.len() + 1).to_string());
        for (k, other) in more.iter().enumerate() {
            settings_differing(&format!("client{}.", k + 2), other, first, &mut differing);
        }
    }
    for (k, v) in differing {
        label.push_str(&format!(" {k}={v}"));
    }
    label
}

/// The settings of `part` that differ from `default`, by dotted name (a
/// nested group's leaves, not the group as JSON).
fn settings_differing(
    prefix: &str,
    part: &serde_json::Map<String, serde_json::Value>,
    default: &serde_json::Map<String, serde_json::Value>,
    out: &mut std::collections::BTreeMap<String, String>,
) {
    for (k, v) in part {
        let name = format!("{prefix}{}", k.replace('_', "-"));
        match (v, default.get(k)) {
            (_, Some(d)) if d == v => {}
            (serde_json::Value::Object(inner), Some(serde_json::Value::Object(d))) => {
                settings_differing(&format!("{name}."), inner, d, out)
            }
            (serde_json::Value::String(s), _) => {
                out.insert(name, s.clone());
            }
            (other, _) => {
                out.insert(name, other.to_string());
            }
        }
    }
}

fn dir_name(dir: &Path) -> String {
    dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_interrupted_offline_command_counts_what_it_removed() {
        assert_eq!(
            super::interrupted_offline(0),
            "interrupted; nothing was being written"
        );
        assert!(super::interrupted_offline(1)
            .starts_with("interrupted; 1 product being written removed ("));
        assert!(super::interrupted_offline(3)
            .starts_with("interrupted; 3 products being written removed ("));
    }

    /// A second Ctrl-C while finishing leaves no product half-written: the
    /// plots' directory aside was left behind (remove_file cannot remove
    /// it), and the trace and meta.json stay.
    #[test]
    fn skipping_the_products_removes_the_plots_directory_aside() {
        let dir = std::env::temp_dir().join(format!("h2probe-partials-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(".plots.partial")).unwrap();
        std::fs::write(dir.join(".plots.partial").join("queue.svg"), "<svg/>").unwrap();
        for f in [".summary.json.partial", "trace.jsonl", "meta.json"] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        super::remove_partials(&dir);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["meta.json", "trace.jsonl"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Repeats against fresh servers (each given a port by the system) are
    /// one configuration, and a nested setting shows as its leaves. The
    /// audit saw two such repeats in two rows, labelled with raw JSON.
    #[test]
    fn repeats_on_fresh_ports_share_a_configuration() {
        let server = super::config_part(&crate::server::ServerOpts::default()).unwrap();
        let client = super::client::default_client_config();
        assert!(client["target"].is_object(), "{client:?}");
        let root = std::env::temp_dir().join(format!("h2probe-config-of-{}", std::process::id()));
        // The label `compare` gives a run directory whose meta.json holds
        // `config`, written by `command`.
        let config_of = |name: &str, command: &str, config| {
            let meta = h2probe_analysis::meta::Meta {
                command: command.into(),
                config,
                ..Default::default()
            };
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            super::write_json(&dir.join("meta.json"), &meta).unwrap();
            super::config_of(&dir)
        };
        let label = |name: &str, port: u16, authority: Option<&str>| {
            let mut c = client.clone();
            c["target"]["connect"] = format!("127.0.0.1:{port}").into();
            if let Some(a) = authority {
                c["target"]["authority"] = a.into();
            }
            config_of(
                name,
                "merge",
                h2probe_analysis::meta::RunConfig {
                    server: Some(server.clone()),
                    client: Some(c),
                    ..Default::default()
                },
            )
        };
        let a = label("a", 38415, None);
        let b = label("b", 39745, None);
        assert_eq!(a, b);
        assert!(!a.contains('{') && !a.contains("connect"), "{a}");
        let other = label("c", 38415, Some("example.test"));
        assert_eq!(other, format!("{a} target.authority=example.test"));
        // The hyper stack is named once (the label names it; the settings
        // that differ from the defaults named it again).
        let mut hyper = server.clone();
        hyper["stack"] = "hyper".into();
        let h = config_of(
            "hyper",
            "run",
            h2probe_analysis::meta::RunConfig {
                server: Some(hyper),
                client: Some(client.clone()),
                ..Default::default()
            },
        );
        assert_eq!(h.matches("stack=hyper").count(), 1, "{h}");
        // A Part 3 run: named by its policy, each setting once.
        let mut server3 = server.clone();
        server3["when_full"] = "reject".into();
        let mut client3 = client.clone();
        client3["rpc"] = "exchange".into();
        client3["retry"] = "fixed:100,200".into();
        let p3 = config_of(
            "part3",
            "run",
            h2probe_analysis::meta::RunConfig {
                server: Some(server3),
                client: Some(client3),
                ..Default::default()
            },
        );
        assert!(
            p3.starts_with("release=frame when-full=reject retry=fixed:100,200"),
            "{p3}"
        );
        assert_eq!(p3.matches("when-full=").count(), 1, "{p3}");
        assert_eq!(p3.matches("retry=").count(), 1, "{p3}");
        assert!(p3.contains(" rpc=exchange"), "{p3}");
        // A merge of two clients is not a run of one (it kept the first
        // client's configuration only, and compare pooled it with one), nor
        // two merges of clients that differ one.
        let merged = |name: &str, rate: f64| {
            let mut second = client.clone();
            second["rate"] = rate.into();
            config_of(
                name,
                "merge",
                h2probe_analysis::meta::RunConfig {
                    server: Some(server.clone()),
                    client: Some(client.clone()),
                    more_clients: vec![second],
                    ..Default::default()
                },
            )
        };
        let two = merged("two", 100.0);
        assert!(
            two.contains(" clients=2") && two.contains(" client2.rate=100"),
            "{two}"
        );
        assert_ne!(two, a);
        assert_ne!(merged("three", 50.0), two);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn argv_keeps_no_credential() {
        let argv = [
            "h2probe",
            "client",
            "-H",
            "authorization: Bearer s3cret",
            "-Hcookie: a=b",
            "--header=x-tenant: blue",
            "-H",
            "x: y",
        ];
        let got = super::redacted_argv(argv.iter().map(|s| s.to_string()));
        assert_eq!(
            got,
            [
                "h2probe",
                "client",
                "-H",
                "authorization: <redacted, 13 bytes>",
                "-Hcookie: <redacted, 3 bytes>",
                "--header=x-tenant: blue",
                "-H",
                "x: y"
            ]
        );
    }
}
