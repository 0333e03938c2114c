//! Verdicts at the edges: a killed writer, interrupted and deadline-cut
//! runs, a non-OK RPC. Each check says true, false or "cannot judge", and
//! the exit code says which (0 / 3 / 4 / 130).

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{dur, read_summary, run, run_opts, temp_dir};

/// Starts `h2probe run` for long and waits until messages complete.
fn start_long_run(dir: &std::path::Path, extra: &[&str]) -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["run", "--duration", "30s", "--quiet", "--no-pcap", "--out"])
        .arg(dir)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let since = Instant::now();
    while !std::fs::read_to_string(dir.join("trace.jsonl"))
        .is_ok_and(|t| t.matches("\"type\":\"complete\"").count() > 20)
    {
        assert!(since.elapsed().as_secs() < 60, "the run never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn a_killed_run_analyses_with_exit_0_and_checks_that_cannot_be_judged() {
    let dir = temp_dir("kill9");
    let mut child = start_long_run(&dir, &[]);
    child.kill().unwrap(); // SIGKILL: no footer, maybe a line cut in half
    child.wait().unwrap();
    assert!(!dir.join("summary.json").exists());
    let out = support::analyze(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("trace     cut short"), "{stdout}");
    assert!(stdout.contains("cannot be judged"), "{stdout}");
    assert!(!stdout.contains("CHECK FAILED"), "{stdout}");
    let s = read_summary(&dir);
    for name in ["accounting", "bytes", "windows_agree", "no_dropped_events"] {
        let c = &s.checks[name];
        assert_eq!(c.ok, None, "{name}: {}", c.detail);
        assert!(
            c.detail.contains("footer") || c.detail.contains("cut"),
            "{name} says why: {}",
            c.detail
        );
    }
}

#[test]
fn interrupted_runs_end_every_message_exactly_once_and_exit_130() {
    // Interrupts land at different moments of the pipeline: early, with
    // the queue filling, with workers mid-message.
    // Ctrl-C, SIGTERM (what a service manager or `timeout` sends) and
    // SIGHUP (a closed terminal) all finish the run directory.
    for (i, (wait_ms, signal)) in [
        (0u64, libc::SIGINT),
        (150, libc::SIGTERM),
        (400, libc::SIGHUP),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = temp_dir(&format!("sigint-{i}"));
        let child = start_long_run(&dir, &["--workers", "4", "--service-time", "7ms"]);
        std::thread::sleep(Duration::from_millis(wait_ms));
        // SAFETY: a signal to our own child process.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(130),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = read_summary(&dir);
        assert_eq!(
            s.decoded,
            s.completed + s.discarded,
            "run {i}: decoded = completed + discarded exactly"
        );
        assert_eq!(s.checks["accounting"].ok, Some(true), "{:?}", s.checks);
        assert_eq!(s.run_status, "interrupted");
        assert!(dir.join("credit.svg").is_file(), "plots written");
    }
}

#[test]
fn sigterm_finishes_a_serve_run_directory() {
    use std::io::BufRead;
    let dir = temp_dir("serve-sigterm");
    let mut child = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--quiet",
            "--no-pcap",
            "--out",
        ])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("listening on"), "{line}");
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta = h2probe_analysis::meta::Meta::read(&dir).unwrap();
    assert_eq!(meta.status, "interrupted");
    assert!(dir.join("summary.json").is_file());
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    assert!(trace.trim_end().ends_with('}') && trace.contains("\"type\":\"footer\""));
}

#[test]
fn deadline_cut_runs_end_every_message_exactly_once_and_exit_4() {
    for (i, deadline) in ["300ms", "450ms", "700ms"].into_iter().enumerate() {
        let dir = temp_dir(&format!("deadline-{i}"));
        let mut o = run_opts(&dir, "frame", "unbounded");
        o.client.duration = dur("1s");
        o.client.deadline = Some(dur(deadline));
        o.server.workers = 3;
        o.server.service_time = dur("9ms");
        let r = run(o);
        let s = &r.summary;
        assert!(s.discarded > 0, "the deadline cut work short: {s:#?}");
        assert_eq!(s.decoded, s.completed + s.discarded, "run {i}");
        assert_eq!(s.checks["accounting"].ok, Some(true), "{:?}", s.checks);
        assert_eq!(
            h2probe_analysis::report::exit_code(s, true),
            4,
            "DEADLINE_EXCEEDED is not OK: {:?}",
            s.rpc_status
        );
        // The bytes still unreleased at the cut went back as one `end`
        // release, apart from the policy's own.
        assert!(s.checks["credit"].ok == Some(true));
    }
}

#[test]
fn a_deadline_mid_wait_leaves_open_intervals_and_an_end_release() {
    // Release on complete behind a 60 ms round trip: at the deadline the
    // client is waiting for credit and the server holds unreleased bytes.
    let dir = temp_dir("deadline-open");
    let mut o = run_opts(&dir, "complete", "unbounded");
    o.client.duration = dur("2s");
    o.client.deadline = Some(dur("700ms"));
    o.client.link_delay = dur("30ms");
    o.output.no_pcap = true;
    let r = run(o);
    let s = &r.summary;
    assert!(s.blocked_open > 0, "a wait was cut by the deadline: {s:#?}");
    assert!(s.client_window_blocked_s > 0.1, "{s:#?}");
    assert!(
        s.end_releases > 0 && s.end_released_bytes > 0,
        "the unreleased bytes went back as at=end: {s:#?}"
    );
    assert_eq!(s.release_point.as_deref(), Some("complete"));
    assert_eq!(s.decoded, s.completed + s.discarded);
    assert_eq!(s.checks["accounting"].ok, Some(true), "{:?}", s.checks);
}
