//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// `../shared/corpus` beside the project. Missing: a loud skip locally, a
/// failure under CI.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if dir.is_dir() {
        return Some(dir);
    }
    missing(&format!("the shared corpus at {}", dir.display()));
    None
}

/// Runs Chromium headless on `page` with `extra` arguments (a fresh profile
/// each time, no network); returns stdout and stderr. Fails after 120 s.
pub fn chromium(
    exe: &std::path::Path,
    profile: &std::path::Path,
    page: &std::path::Path,
    extra: &[String],
) -> (String, String) {
    let _ = std::fs::remove_dir_all(profile);
    std::fs::create_dir_all(profile).unwrap();
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let dir = profile.parent().unwrap();
    let (out, err) = (dir.join("chromium.out"), dir.join("chromium.err"));
    let mut child = std::process::Command::new(exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            // A container's small /dev/shm crashes Chromium now and then.
            "--disable-dev-shm-usage",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(&url)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 120 s on {url}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let (out, err) = (
        std::fs::read_to_string(out).unwrap(),
        std::fs::read_to_string(err).unwrap(),
    );
    assert!(
        status.success(),
        "chromium failed ({status}) on {url}:\n{err}"
    );
    (out, err)
}

/// Locates an external tool; `None` (after a loud message) when missing
/// locally, a panic when `CI=true`.
pub fn require_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        let p = dir.join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    missing(&format!("the tool `{name}`"));
    None
}

pub fn missing(what: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but {what} is missing: .ci/run must install it");
    }
    eprintln!("\n!!!!! SKIPPED: {what} is missing (this test would fail under CI=true) !!!!!\n");
}

/// A small deterministic PRNG (xorshift64*), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Splits `bytes` into random chunks of 1..=max bytes.
pub fn random_splits<'a>(bytes: &'a [u8], rng: &mut Rng, max: u64) -> Vec<&'a [u8]> {
    let mut out = vec![];
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = (1 + rng.below(max)) as usize;
        let n = n.min(rest.len());
        out.push(&rest[..n]);
        rest = &rest[n..];
    }
    out
}

/// A fresh, empty directory; unique per call, so tests running in parallel
/// in one process never share one.
///
/// Tests keep their directories (a failure's are there to read); the first
/// call in a test process removes those of test processes that have ended,
/// so a suite's leftovers last until the next run, not forever.
pub fn temp_dir(name: &str) -> PathBuf {
    static SWEEP: std::sync::Once = std::sync::Once::new();
    SWEEP.call_once(remove_ended_processes_dirs);
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("h2probe-test-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes `h2probe-test-NAME-PID-N` directories whose PID is not running.
fn remove_ended_processes_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("h2probe-test-")) else {
            continue;
        };
        // NAME may hold dashes; PID and N are the last two fields.
        let mut fields = rest.rsplit('-');
        let (Some(n), Some(pid)) = (fields.next(), fields.next()) else {
            continue;
        };
        if n.parse::<u32>().is_err() || pid.parse::<u32>().is_err() {
            continue;
        }
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A loopback port for a peer that takes its port on the command line
/// (nghttpd has no "any port" that it reports back).
///
/// Picked below the kernel's ephemeral range (32768 and up by default), which
/// every `bind(…:0)` and outgoing connection of the tests running beside this
/// one draws from: a port found free here cannot be taken by them between
/// this check and the peer's own bind. Spread by process and call, so two
/// calls do not try the same port.
pub fn peer_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let (first, span) = (10_000, low.saturating_sub(10_000).max(1));
    let seed = std::process::id().wrapping_mul(7919);
    for _ in 0..span {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = (first + seed.wrapping_add(n.wrapping_mul(104_729)) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port below {low}");
}

use h2probe::commands::run::{RunOpts, RunResult};

/// Run options for a short loopback experiment writing into `dir`.
pub fn run_opts(dir: &std::path::Path, release: &str, queue: &str) -> RunOpts {
    let mut o = RunOpts::default();
    o.output.out = Some(dir.to_path_buf());
    o.output.quiet = true;
    o.server.release = release.parse().unwrap();
    o.server.queue = queue.parse().unwrap();
    o
}

/// [`run_opts`] for a short run: `duration` of messages, 1 ms of service
/// each (the queue drains at once after).
pub fn short_run_opts(
    dir: &std::path::Path,
    release: &str,
    queue: &str,
    duration: &str,
) -> RunOpts {
    let mut o = run_opts(dir, release, queue);
    o.client.duration = dur(duration);
    o.server.service_time = dur("1ms");
    o
}

pub fn dur(s: &str) -> h2probe::config::Dur {
    s.parse().unwrap()
}

/// Runs an experiment on a fresh multi-threaded runtime.
pub fn run(opts: RunOpts) -> RunResult {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(h2probe::commands::run::run(opts))
        .unwrap()
}

/// Every invariant check that applies must hold.
pub fn assert_checks(r: &RunResult) {
    for (name, c) in &r.summary.checks {
        assert_ne!(
            c.ok,
            Some(false),
            "{}: check {name} failed: {}",
            r.dir.display(),
            c.detail
        );
    }
    for name in [
        "accounting",
        "bytes",
        "credit",
        "no_data_beyond_credit",
        "windows_agree",
        "no_dropped_events",
    ] {
        assert_eq!(
            r.summary.checks[name].ok,
            Some(true),
            "{}: check {name} did not apply: {}",
            r.dir.display(),
            r.summary.checks[name].detail
        );
    }
}

/// A probe server running in this process with its own trace, for tests
/// that drive it from external tools.
pub struct TestServer {
    pub addr: std::net::SocketAddr,
    pub dir: PathBuf,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
    writer: h2probe::trace::TraceWriter,
    rec: h2probe::trace::Recorder,
}

impl TestServer {
    pub async fn start(name: &str, opts: h2probe::server::ServerOpts) -> TestServer {
        use h2probe::config::CapturePayload;
        let dir = temp_dir(name);
        let cfg = opts.validate(CapturePayload::Headers, None, None).unwrap();
        let (writer, rec) =
            h2probe::trace::TraceWriter::create(&dir.join("trace.jsonl"), 1 << 16).unwrap();
        let (shutdown, rx) = tokio::sync::watch::channel(false);
        let ctx = std::sync::Arc::new(h2probe::server::ServerCtx::new(
            cfg,
            rec.clone(),
            Default::default(),
            Default::default(),
            rx,
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(h2probe::server::serve(listener, ctx));
        TestServer {
            addr,
            dir,
            shutdown,
            task,
            writer,
            rec,
        }
    }

    /// Stops the server, finishes the trace and analyses it.
    pub async fn stop(self) -> (h2probe_analysis::analyze::Summary, PathBuf) {
        let _ = self.shutdown.send(true);
        self.task.await.unwrap().unwrap();
        drop(self.rec);
        let writer = self.writer;
        tokio::task::spawn_blocking(move || writer.finish())
            .await
            .unwrap()
            .unwrap();
        let dir = self.dir.clone();
        let a = tokio::task::spawn_blocking(move || {
            h2probe_analysis::analyze::analyze_trace(&dir.join("trace.jsonl")).unwrap()
        })
        .await
        .unwrap();
        (a.summary, self.dir)
    }
}

/// Every frame event of one endpoint's tap, in trace order:
/// (dir, type name, flags, stream, len, increment).
pub fn tap_frames(
    dir: &std::path::Path,
    ep: h2probe::trace::schema::Endpoint,
) -> Vec<(
    h2probe::trace::schema::Dir,
    String,
    u8,
    u32,
    u32,
    Option<u32>,
)> {
    let mut out = vec![];
    let mut r = h2probe_analysis::reader::TraceReader::open(&dir.join("trace.jsonl")).unwrap();
    for e in r.by_ref() {
        let e = e.unwrap();
        if let h2probe::trace::schema::Kind::Frame(f) = &e.kind {
            if e.ep == ep {
                out.push((
                    f.dir,
                    f.frame.to_string(),
                    f.flags,
                    e.stream,
                    f.len,
                    f.increment,
                ));
            }
        }
    }
    out
}

/// A client context for driving `target` directly (no run directory).
pub fn client_ctx(
    opts: h2probe::client::ClientOpts,
    target: std::net::SocketAddr,
    rec: h2probe::trace::Recorder,
) -> std::sync::Arc<h2probe::client::ClientCtx> {
    std::sync::Arc::new(h2probe::client::ClientCtx {
        graceful: None,
        opts,
        target: h2probe::client::Target::plain(target),
        call: Default::default(),
        capture: h2probe::config::CapturePayload::Headers,
        rec,
        live: Default::default(),
        conn_ids: Default::default(),
        interrupt: tokio::sync::watch::channel(false).1,
        stopped_for: Default::default(),
        stream_limit_said: Default::default(),
        replaced: Default::default(),
    })
}

/// The `summary.json` of a run directory.
/// Runs `h2probe ARGS --out DIR`, interrupts it (SIGINT) once its trace
/// holds more than `after` events of `kind` (however slow the machine is),
/// and returns its output once it ended, which must be with exit 130.
pub fn run_interrupted(
    args: &[&str],
    dir: &std::path::Path,
    kind: &str,
    after: usize,
) -> std::process::Output {
    use std::process::Stdio;
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(args)
        .arg("--out")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let needle = format!("\"type\":\"{kind}\"");
    let flowing = std::time::Instant::now();
    while !std::fs::read_to_string(dir.join("trace.jsonl"))
        .is_ok_and(|t| t.matches(&needle).count() > after)
    {
        assert!(flowing.elapsed().as_secs() < 60, "the run never got going");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "interrupted: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

pub fn read_summary(dir: &std::path::Path) -> h2probe_analysis::analyze::Summary {
    let text = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A real peer against the probe's server: the server released where it
/// was told to, and the peer broke none of the rules the taps judge.
pub fn assert_released_as_told_by_a_sound_peer(s: &h2probe_analysis::analyze::Summary) {
    let c = &s.checks["release_point"];
    assert_eq!(c.ok, Some(true), "{c:?}");
    assert!(s.rules_broken.is_empty(), "{:?}", s.rules_broken);
}

/// Runs the h2probe binary with `args`, asserting it succeeded; returns its output.
pub fn h2probe_ok<I, S>(args: I) -> std::process::Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `h2probe analyze DIR`, whatever its exit status (3 when a check fails).
pub fn analyze(dir: &std::path::Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .arg("analyze")
        .arg(dir)
        .output()
        .unwrap()
}

/// The address a `serve` child prints on its first stdout line
/// (`h2probe: listening on ADDR`, the 4th word).
pub fn listening_addr(child: &mut std::process::Child) -> String {
    announced_addr(child, 3)
}

/// The `word`th word (from 0) of a child's first stdout line, where `serve`
/// (`h2probe: listening on ADDR`) and `relay` (`h2probe: relaying ADDR ->
/// UPSTREAM`) say where they listen.
pub fn announced_addr(child: &mut std::process::Child, word: usize) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().expect("stdout piped"))
        .read_line(&mut line)
        .unwrap();
    // The run directory has a line of its own: this one fits 80 columns.
    assert!(line.trim_end().chars().count() <= 80, "{line:?}");
    line.split_whitespace()
        .nth(word)
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string()
}

/// `h2probe analyze DIR` on a made-up trace: exit 0 or 3 (its checks may
/// fail; the analysis went through); its summary.
pub fn analyze_made_up(dir: &std::path::Path) -> h2probe_analysis::analyze::Summary {
    let out = analyze(dir);
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    read_summary(dir)
}

/// Peak RSS of the children this process has waited for, in bytes (a test
/// file that reads it holds one test: the peak is its largest child's).
pub fn children_peak_rss() -> u64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) },
        0
    );
    usage.ru_maxrss as u64 * 1024
}

/// A trace file's header line for a made-up trace whose clock starts at
/// `origin` (ns).
pub fn trace_header(origin: u64) -> String {
    h2probe_analysis::schema::Header {
        schema: h2probe_analysis::schema::SCHEMA_VERSION,
        tool: "h2probe test".into(),
        clock: "CLOCK_MONOTONIC".into(),
        origin_mono_ns: origin,
        origin_unix_ns: 1_700_000_000_000_000_000,
    }
    .to_line()
}

/// `text` with each line folded at 80 columns (continued on lines
/// indented at least 4) joined back into one, a space between the parts.
pub fn unfolded(text: &str) -> String {
    let mut out = String::new();
    for l in text.lines() {
        if l.starts_with("    ") && !out.is_empty() {
            out.pop();
            out.push(' ');
            out.push_str(l.trim_start());
        } else {
            out.push_str(l);
        }
        out.push('\n');
    }
    out
}

/// The `rpc conn …` lines of a client's stdout, each whole: its
/// continuation lines (indented 4, within 80 columns) joined back.
pub fn rpc_lines(stdout: &str) -> Vec<String> {
    let mut lines: Vec<String> = vec![];
    let mut within = false;
    for l in stdout.lines() {
        if l.starts_with("rpc conn ") {
            lines.push(l.to_string());
            within = true;
        } else if within && l.starts_with("    ") {
            let last = lines.last_mut().expect("an rpc line");
            last.push(' ');
            last.push_str(l.trim_start());
        } else {
            within = false;
        }
    }
    lines
}

/// Asserts that what a command printed fits an 80-column terminal (in
/// terminal columns: a CJK character takes two): every
/// line of it, apart from run-directory names (`== DIR`) and the closing
/// "comparison written to DIR/" line, whose length is the user's path (the
/// products' names are on the line under it, which must fit: they made it
/// 102 columns in a default directory).
pub fn assert_fits_80(stdout: &str) {
    for l in stdout
        .lines()
        .filter(|l| !l.starts_with("comparison written to") && !l.starts_with("== "))
    {
        let columns = h2probe_analysis::compare::columns(l);
        assert!(columns <= 80, "{columns} columns: {l}\n{stdout}");
    }
}

/// A literal header field without indexing, new name, no Huffman coding
/// (RFC 7541 §6.2.2): 0x00, name length, name, value length, value.
pub fn hpack_literal(name: &str, value: &str) -> Vec<u8> {
    assert!(
        name.len() < 127 && value.len() < 127,
        "one-byte lengths only"
    );
    let mut b = vec![0x00, name.len() as u8];
    b.extend(name.as_bytes());
    b.push(value.len() as u8);
    b.extend(value.as_bytes());
    b
}

/// The HPACK block of a valid Ingest request, built by hand.
pub fn ingest_request_block() -> Vec<u8> {
    [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", h2probe::grpc::INGEST_PATH),
        (":authority", "x"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]
    .iter()
    .flat_map(|(n, v)| hpack_literal(n, v))
    .collect()
}

/// A child process killed when the test ends before it does (a failed
/// assertion would leave a `serve` running).
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        &self.0
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        &mut self.0
    }
}

/// Every `<text>` of an SVG as (x, text).
pub fn svg_texts(svg: &str) -> Vec<(f64, String)> {
    svg.split("<text ")
        .skip(1)
        .filter_map(|t| {
            let x = t.split("x=\"").nth(1)?.split('"').next()?.parse().ok()?;
            let body = t.split_once('>')?.1.split("</text>").next()?.trim();
            Some((x, body.replace("&quot;", "\"")))
        })
        .collect()
}
