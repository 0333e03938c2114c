//! Many streams, one connection window: a stream whose bytes are never
//! released starves the others (64 KiB connection window: everything stops
//! and the stall is detected) or only itself (1 MiB: it is named as starved).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::temp_dir;

fn run(dir: &std::path::Path, extra: &[&str]) -> (std::process::Output, Duration) {
    let mut args = vec!["--streams", "4", "--stall-stream", "3"];
    args.extend_from_slice(extra);
    run_with(dir, &args)
}

/// `h2probe run --quiet --no-pcap --out DIR ARGS…`, timed.
fn run_with(dir: &std::path::Path, args: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .arg("run")
        .args(["--quiet", "--no-pcap", "--out"])
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    (out, started.elapsed())
}

/// The events of a run's trace (header and footer skipped).
fn events(dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v.get("t").is_some())
        .collect()
}

/// The connection credit the client had on the wire when the server's stall
/// event was recorded, recounted from the server tap's frames: 65,535 (the
/// connection's initial window) + the connection WINDOW_UPDATEs it wrote −
/// the DATA frame lengths (padding counts) it read, up to the stall's `t`.
/// One connection (these runs have one).
fn conn_credit_at_stall(dir: &std::path::Path) -> i64 {
    let ev = events(dir);
    let stall = ev
        .iter()
        .find(|e| e["type"] == "stall" && e["ep"] == "server")
        .expect("a server stall event");
    let at = stall["t"].as_u64().unwrap();
    let mut credit = 65_535i64;
    for e in ev
        .iter()
        .filter(|e| e["type"] == "frame" && e["ep"] == "server" && e["t"].as_u64().unwrap() <= at)
    {
        let len = e["len"].as_i64().unwrap();
        match (e["frame"].as_str().unwrap(), e["dir"].as_str().unwrap()) {
            ("WINDOW_UPDATE", "out") if e["stream"] == 0 => {
                credit += e["increment"].as_i64().unwrap()
            }
            ("DATA", "in") => credit -= len,
            _ => {}
        }
    }
    credit
}

/// A stall's cause is judged on the trace, not on h2's `available_capacity`
/// (which leaves out what h2 buffered and counts credit it has not
/// announced): a body the application dropped is its bug whatever the
/// window (a 16 KiB stream window, filled before the drop, read
/// "deadlock"), and a stream that stops releasing under `--release frame`
/// starves its sender even while h2 has released-but-unannounced bytes
/// (`available_capacity` 17 B read "other").
#[test]
fn a_stalls_cause_is_judged_on_the_trace_not_on_h2s_capacity() {
    let (dir, cause, stall) = stalled(
        "drop-small-window",
        &["--drop-stream", "1", "--stream-window", "16KiB"],
    );
    assert_eq!(cause, "other", "{stall}");
    assert!(stall.contains("body dropped by the application"), "{stall}");
    let ev = events(&dir);
    let drops: Vec<_> = ev.iter().filter(|e| e["type"] == "body_drop").collect();
    assert_eq!(drops.len(), 1, "one body_drop event");
    assert_eq!(
        (drops[0]["ep"].as_str(), drops[0]["stream"].as_u64()),
        (Some("server"), Some(1))
    );
    let starts: Vec<_> = ev
        .iter()
        .filter(|e| e["type"] == "rpc_start" && e["ep"] == "server")
        .map(|e| e["release"].as_str())
        .collect();
    assert_eq!(
        starts,
        [Some("frame")],
        "the server's rpc_start names its release point"
    );

    let (_, cause, stall) = stalled(
        "stall-unannounced",
        &[
            "--stream-window",
            "8KiB",
            "--payload",
            "16KiB",
            "--stall-stream",
            "1:17000",
        ],
    );
    assert_eq!(cause, "starvation", "{stall}");
    assert!(
        stall.contains("0 B of stream credit on the wire, release at frame"),
        "{stall}"
    );

    // The dropped stream keeps the server's only stream slot: stream 3
    // never opens, but what waits is the dropped body, not a stream limit
    // (read "not_open", which needs nothing held on the server's side).
    let (_, cause, stall) = stalled(
        "drop-holds-the-slot",
        &[
            "--drop-stream",
            "1",
            "--streams",
            "2",
            "--max-concurrent-streams",
            "1",
            "--stream-window",
            "16KiB",
        ],
    );
    assert_eq!(cause, "other", "{stall}");
    assert!(
        stall.contains("body dropped by the application") && stall.contains("not open"),
        "{stall}"
    );
}

/// A 3 s run with `args` that must stall within a 500 ms --stall-timeout
/// (exit 3): its directory, the stall's cause and its description.
fn stalled(name: &str, args: &[&str]) -> (std::path::PathBuf, String, String) {
    let dir = temp_dir(name);
    let mut all = args.to_vec();
    all.extend(["--duration", "3s", "--stall-timeout", "500ms"]);
    let (out, _) = run_with(&dir, &all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{name}: {stdout}");
    let s = support::read_summary(&dir);
    (
        dir,
        s.stall_cause.unwrap_or_default(),
        s.stall.unwrap_or_default(),
    )
}

/// 4 streams, 32 KiB units spanning two 16 KiB messages, released on decode,
/// one 65,535-byte connection window: every stream ends up holding part of
/// a unit (4 × 16 KiB ≥ 65,535), nobody can decode, nobody gets credit.
const DEADLOCK: &[&str] = &[
    "--streams",
    "4",
    "--framing",
    "raw:32KiB",
    "--release",
    "decode",
    "--duration",
    "6s",
    "--stall-timeout",
    "1s",
];

#[test]
fn a_certain_deadlock_is_refused_up_front_naming_the_window_it_needs() {
    let dir = temp_dir("deadlock-refused");
    let (out, _) = run_with(&dir, DEADLOCK);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("4 of 4 streams") && stderr.contains("at least 131069"),
        "{stderr}"
    );
    assert!(stderr.contains("--allow-deadlock"), "{stderr}");
}

/// One stream, a message larger than its stream window, released only at
/// completion: refused up front, and with --allow-deadlock the stall the
/// refusal promises, named a deadlock (the stream waits on itself). The
/// server answered RESOURCE_EXHAUSTED at once instead (exit 4, no stall),
/// and the analysis, had it stalled, said "other: neither starvation nor
/// deadlock".
#[test]
fn a_message_larger_than_its_stream_window_deadlocks_when_allowed() {
    let args = [
        "--release",
        "complete",
        "--stream-window",
        "8KiB",
        "--duration",
        "3s",
        "--stall-timeout",
        "500ms",
    ];
    let dir = temp_dir("self-deadlock-refused");
    let (out, _) = run_with(&dir, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("or --allow-deadlock to watch it stall"),
        "{stderr}"
    );
    // Its only stream releasing on receipt, nothing can deadlock (this was
    // refused as the default point's deadlock).
    let dir = temp_dir("self-deadlock-frame");
    let (out, _) = run_with(
        &dir,
        &[
            "--release",
            "complete,1=frame",
            "--stream-window",
            "8KiB",
            "--duration",
            "300ms",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = temp_dir("self-deadlock");
    let mut args = args.to_vec();
    args.push("--allow-deadlock");
    let (out, _) = run_with(&dir, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let s = support::read_summary(&dir);
    assert_eq!(s.stall_cause.as_deref(), Some("deadlock"), "{:?}", s.stall);
    assert!(
        s.stall.as_deref().unwrap_or_default().contains(
            "8192 B unreleased (8192 B of an undecoded message), 0 B of stream credit on the wire, release at complete"
        ),
        "{:?}",
        s.stall
    );
    assert_eq!(s.rpc_status.get("RESOURCE_EXHAUSTED"), None, "{stdout}");
}

#[test]
fn an_allowed_deadlock_ends_within_the_stall_timeout_and_is_named() {
    let dir = temp_dir("deadlock");
    let mut args = DEADLOCK.to_vec();
    args.push("--allow-deadlock");
    let (out, took) = run_with(&dir, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "a failed check: {stdout}");
    let s = support::read_summary(&dir);
    // On the trace's clock (the wall clock also counts starting a debug
    // binary and the finish, long on a loaded machine).
    assert!(
        s.span_s < 5.0,
        "ended by the stall, not by --duration 6s ({} s of events; {took:?} in all)",
        s.span_s
    );
    assert_eq!(s.stall_cause.as_deref(), Some("deadlock"), "{:?}", s.stall);
    assert!(stdout.contains("first cause: deadlock"), "{stdout}");
    // On the trace's own clock: the stall is recorded within the timeout
    // (plus the watcher's 50 ms tick) of the last byte that reached the
    // application, and the run ends within a second of it.
    let ev = events(&dir);
    let t_of = |ty: &str| {
        ev.iter()
            .filter(|e| e["type"] == ty)
            .map(|e| e["t"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    let stall = t_of("stall");
    assert_eq!(stall.len(), 1);
    // (A chunk h2 still delivers as the run ends may come after it.)
    let last_chunk = *t_of("chunk")
        .iter()
        .filter(|&&t| t < stall[0])
        .max()
        .unwrap();
    let waited = (stall[0] - last_chunk) as f64 / 1e9;
    assert!(
        (1.0..1.5).contains(&waited),
        "stall after {waited} s without progress"
    );
    let last = ev.iter().map(|e| e["t"].as_u64().unwrap()).max().unwrap();
    assert!(
        (last - stall[0]) as f64 / 1e9 < 1.0,
        "the run ended within 1 s of the stall"
    );
    // Nothing was decoded; every stream held part of a unit and no credit
    // came back before the end of the RPCs.
    assert_eq!(s.decoded, 0);
    assert!(
        t_of("release").is_empty()
            || ev
                .iter()
                .filter(|e| e["type"] == "release")
                .all(|e| e["at"] == "end")
    );
    assert_eq!(s.checks["accounting"].ok, Some(true), "{:?}", s.checks);
}

#[test]
fn release_points_can_differ_per_stream() {
    let dir = temp_dir("release-mix");
    let (out, _) = run_with(
        &dir,
        &[
            "--streams",
            "2",
            "--release",
            "complete,1=frame",
            "--duration",
            "1s",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut points: std::collections::BTreeMap<u64, std::collections::BTreeSet<String>> =
        Default::default();
    for e in events(&dir)
        .iter()
        .filter(|e| e["type"] == "release" && e["at"] != "end")
    {
        points
            .entry(e["stream"].as_u64().unwrap())
            .or_default()
            .insert(e["at"].as_str().unwrap().to_string());
    }
    assert_eq!(
        points[&1].iter().collect::<Vec<_>>(),
        ["frame"],
        "{points:?}"
    );
    assert_eq!(
        points[&3].iter().collect::<Vec<_>>(),
        ["complete"],
        "{points:?}"
    );
    assert_eq!(
        support::read_summary(&dir).release_point.as_deref(),
        Some("mixed")
    );
}

#[test]
fn stream_rates_offer_each_stream_its_own_rate() {
    let dir = temp_dir("stream-rates");
    let (out, _) = run_with(
        &dir,
        &[
            "--streams",
            "3",
            "--stream-rates",
            "50,50,200",
            "--duration",
            "2s",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = support::read_summary(&dir);
    let per: Vec<(u32, u64)> = s.streams.iter().map(|f| (f.stream, f.messages)).collect();
    assert_eq!(per, [(1, 100), (3, 100), (5, 400)], "{per:?}");
    // Each stream's messages, from both sides, add up to the run's.
    let per: Vec<_> = s
        .streams
        .iter()
        .map(|f| (f.scheduled, f.sent, f.never_sent, f.completed, f.discarded))
        .collect();
    assert_eq!(
        per,
        [
            (Some(100), Some(100), Some(0), 100, 0),
            (Some(100), Some(100), Some(0), 100, 0),
            (Some(400), Some(400), Some(0), 400, 0)
        ],
        "{per:?}"
    );
    // Wrong counts are refused before anything starts.
    let (out, _) = run_with(
        &dir,
        &["--streams", "2", "--stream-rates", "1,2,3", "--force"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("one per stream"));
}

#[test]
fn the_client_alone_detects_a_server_that_withholds_credit() {
    let sdir = temp_dir("withhold-serve");
    let cdir = temp_dir("withhold-client");
    let mut server = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--stall-stream",
            "1",
            "--quiet",
            "--no-pcap",
            "--out",
        ])
        .arg(&sdir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut server);
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args([
            "client",
            "--connect",
            &addr,
            "--duration",
            "10s",
            "--stall-timeout",
            "1s",
        ])
        .args(["--quiet", "--no-pcap", "--out"])
        .arg(&cdir)
        .output()
        .unwrap();
    let took = started.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let s = support::read_summary(&cdir);
    assert!(
        s.span_s < 8.0,
        "ended by the stall, not by --duration 10s ({} s of events; {took:?} in all)",
        s.span_s
    );
    assert_eq!(s.stall_cause.as_deref(), Some("no_credit"), "{:?}", s.stall);
    assert!(
        s.stall.as_deref().unwrap().contains("stream 1 window 0 B"),
        "{:?}",
        s.stall
    );
}

#[test]
fn a_stalled_stream_drains_a_shared_64k_window_and_the_stall_is_detected() {
    let dir = temp_dir("stall-64k");
    let (out, took) = run(&dir, &["--duration", "6s", "--stall-timeout", "1s"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "a failed check: {stdout}");
    let s = support::read_summary(&dir);
    assert!(
        s.span_s < 5.0,
        "ended by the stall, not by --duration 6s ({} s of events; {took:?} in all)",
        s.span_s
    );
    assert_eq!(s.stalls, 1, "{s:#?}");
    let stall = s.stall.as_deref().unwrap();
    assert!(
        stall.contains("65535 of 65535 B held unreleased"),
        "{stall}"
    );
    assert!(stall.contains("/3: 65535 B unreleased ("), "{stall}");
    assert!(
        stall.contains("/3: 65535 B unreleased") && stall.contains("available_capacity 0 B"),
        "{stall}"
    );
    assert_eq!(s.stall_cause.as_deref(), Some("starvation"), "{stall}");
    assert!(
        stall.contains("draining the shared connection window"),
        "{stall}"
    );
    // The connection credit the stall names is the trace's own, recounted.
    assert_eq!(conn_credit_at_stall(&dir), 0);
    assert!(
        stall.contains("held unreleased, 0 B of connection credit on the wire"),
        "{stall}"
    );
    assert_eq!(s.checks["no_stall"].ok, Some(false));
    // Every message still ends exactly once.
    assert_eq!(s.checks["accounting"].ok, Some(true), "{:?}", s.checks);
    // The other streams waited on the connection window, not their own.
    assert!(s.client_blocked_conn_window_s > s.client_blocked_stream_window_s);
}

#[test]
fn with_a_large_connection_window_only_the_stalled_stream_starves_and_is_named() {
    let dir = temp_dir("stall-1m");
    let (out, _) = run(
        &dir,
        &[
            "--conn-window",
            "1MiB",
            "--duration",
            "3s",
            "--stall-timeout",
            "1s",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let s = support::read_summary(&dir);
    assert!(stdout.contains("STARVED"), "{stdout}");
    assert_eq!(s.starved_streams.len(), 1, "{s:#?}");
    assert!(
        s.starved_streams[0].ends_with("/3"),
        "{:?}",
        s.starved_streams
    );
    let fairness = s.stream_fairness.unwrap();
    assert!(
        (0.70..0.80).contains(&fairness),
        "three streams share, one gets ~nothing: {fairness}"
    );
    // Once the other three have finished, the stalled stream alone still
    // has messages to send and nothing moves: that is a stall too, and it
    // names the one stream left holding its window.
    assert_eq!(s.stalls, 1, "{s:#?}");
    let stall = s.stall.as_deref().unwrap();
    assert!(stall.contains("/3: 65535 B unreleased ("), "{stall}");
    assert_eq!(s.stall_cause.as_deref(), Some("starvation"), "{stall}");
    assert!(!stall.contains("/1:") && !stall.contains("/5:"), "{stall}");
    // Its own stream window is what it spent; the 1 MiB connection window
    // was not drained (the 64 KiB case says it was).
    assert!(stall.contains("its own stream window is spent"), "{stall}");
    let credit = conn_credit_at_stall(&dir);
    assert!(credit > 0, "{credit}");
    assert!(
        stall.contains(&format!(
            "held unreleased, {credit} B of connection credit on the wire"
        )),
        "{credit}: {stall}"
    );
    assert!(
        !stall.contains("draining the shared connection window"),
        "{stall}"
    );
}

#[test]
fn the_shared_window_scenario_compares_both_windows_side_by_side() {
    let dir = temp_dir("scenario-shared");
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["compare", "--scenario", "shared-window", "--repeats", "1"])
        .args(["--duration", "2s", "--quiet", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    // The 64 KiB run stalls (a failed check), so compare exits 3.
    assert_eq!(out.status.code(), Some(3), "{table}");
    // The terminal table: one column per window, within 80 columns.
    let head = table.lines().find(|l| l.contains("conn-window=65535"));
    assert!(
        head.is_some_and(|l| l.contains("conn-window=1048576")),
        "{table}"
    );
    support::assert_fits_80(&table);
    let md = std::fs::read_to_string(dir.join("comparison.md")).unwrap();
    assert!(md.contains("stall-stream=3 conn-window=65535"), "{md}");
    assert!(md.contains("stall-stream=3 conn-window=1048576"), "{md}");
}

/// More streams than the server's SETTINGS_MAX_CONCURRENT_STREAMS wait for
/// a free one ("stream not open") instead of racing ahead of the server's
/// SETTINGS and being refused: the client held no stream before it, and
/// h2 assumed no limit until then (REFUSED_STREAM, UNAVAILABLE, 8 runs in 11).
#[test]
fn streams_beyond_the_servers_limit_wait_instead_of_being_refused() {
    for round in 0..3 {
        let dir = temp_dir(&format!("mcs-wait-{round}"));
        let (out, _) = run_with(
            &dir,
            &[
                "--streams",
                "6",
                "--max-concurrent-streams",
                "2",
                "--duration",
                "500ms",
                "--service-time",
                "0",
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "round {round}: {stdout}");
        let ev = events(&dir);
        let refused: Vec<_> = ev
            .iter()
            .filter(|e| e["type"] == "frame" && e["frame"] == "RST_STREAM")
            .collect();
        assert!(refused.is_empty(), "round {round}: {refused:?}");
        let ok = ev
            .iter()
            .filter(|e| e["type"] == "rpc_end" && e["ep"] == "client" && e["status"] == 0)
            .count();
        assert_eq!(ok, 6, "round {round}: {stdout}");
        // The held streams waited, and the analysis says on what.
        assert!(stdout.contains("stream not open"), "{stdout}");
    }
}

/// Every stream's offering ends at --duration from the common start: 8
/// streams at 300/s for 1 s schedule 300 messages within 1 s (each stream
/// offered for --duration from its own staggered start: 304 over 1.02 s,
/// and 1,000 streams offered 1,000 messages over 3.3 s).
#[test]
fn many_streams_offer_rate_times_duration_within_duration() {
    let dir = temp_dir("schedule-within-duration");
    let (out, _) = run_with(
        &dir,
        &["--streams", "8", "--duration", "1s", "--service-time", "0"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let ev = events(&dir);
    let t: Vec<u64> = ev
        .iter()
        .filter(|e| e["type"] == "schedule")
        .map(|e| e["t"].as_u64().unwrap())
        .collect();
    assert_eq!(t.len(), 300);
    let (first, last) = (t.iter().min().unwrap(), t.iter().max().unwrap());
    assert!(last - first < 1_000_000_000, "{first} .. {last}");
    // Dealt round-robin: every stream 37 or 38 messages.
    let mut per = std::collections::BTreeMap::<u64, u32>::new();
    for e in ev.iter().filter(|e| e["type"] == "schedule") {
        *per.entry(e["stream"].as_u64().unwrap()).or_default() += 1;
    }
    assert!(per.values().all(|&n| n == 37 || n == 38), "{per:?}");
}

/// A stream that would start past --duration (streams start one message
/// apart) is refused up front: it would offer nothing.
#[test]
fn more_streams_than_messages_is_refused() {
    let dir = temp_dir("more-streams-than-messages");
    let (out, _) = run_with(
        &dir,
        &["--streams", "10", "--rate", "5", "--duration", "1s"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the last would start at 1.800s, past --duration 1s"),
        "{stderr}"
    );
    assert!(!dir.join("trace.jsonl").exists());
}

/// In a run, streams the server's limit holds while the open ones idle
/// are what the stall waits on: `not_open`, naming them and the limit
/// (it read "other: no stream holds the connection's credit").
///
/// Each stream has two messages (1/s over 4 streams for 8 s), so stream 1
/// stays open after its first: which stream h2 numbers 1 is a race among
/// the four, and with one message each, a stream 1 that drew the first
/// message ended at once, let stream 3 in, and the stall named "5, 7"
/// (CI, once).
#[test]
fn a_run_stalled_on_the_servers_stream_limit_names_the_held_streams() {
    let dir = temp_dir("stall-not-open-run");
    let (out, _) = run_with(
        &dir,
        &[
            "--streams",
            "4",
            "--max-concurrent-streams",
            "1",
            "--rate",
            "1",
            "--duration",
            "8s",
            "--stall-timeout",
            "1s",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let s = support::read_summary(&dir);
    assert_eq!(s.stall_cause.as_deref(), Some("not_open"), "{stdout}");
    let stall = s.stall.unwrap_or_default();
    assert!(
        stall.contains(
            "streams 3, 5, 7 not open (the server's SETTINGS_MAX_CONCURRENT_STREAMS is 1)"
        ),
        "{stall}"
    );
}

/// A stream held back by the server's stream limit offered bytes and
/// carried none: it is in the fairness, starved (it was left out: "2
/// carried DATA; fairness 1.00", no stream named).
#[test]
fn a_stream_that_never_carried_a_byte_is_in_the_fairness() {
    let dir = temp_dir("never-carried");
    let (out, _) = run_with(
        &dir,
        &[
            "--streams",
            "3",
            "--max-concurrent-streams",
            "2",
            "--stall-stream",
            "1",
            "--duration",
            "2s",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let s = support::read_summary(&dir);
    assert_eq!((s.stream_count, s.streams_without_data), (3, 1), "{stdout}");
    let empty = s.streams.iter().find(|f| f.bytes == 0).unwrap();
    assert!(empty.offered_bytes.unwrap() > 0, "{stdout}");
    assert_eq!(
        s.starved_streams,
        vec![format!("{}/{}", empty.conn, empty.stream)],
        "{stdout}"
    );
    assert!(s.stream_fairness.unwrap() < 0.9, "{stdout}");
    assert!(
        stdout.contains("streams   3 offered DATA, 1 of them carried none"),
        "{stdout}"
    );
}

/// The server's peaks are its RPCs' sum at one instant, and say so; the
/// `credit` check quotes the one stream's peak it compared with the stream
/// window (it quoted 131,070 "within the advertised window" 65,535).
#[test]
fn peaks_over_several_rpcs_are_labelled_as_their_sum() {
    let dir = temp_dir("peaks-summed");
    let (out, _) = run_with(
        &dir,
        &[
            "--connections",
            "2",
            "--release",
            "complete",
            "--duration",
            "1s",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let s = support::read_summary(&dir);
    assert!(
        s.max_stream_unreleased_bytes <= 65_535,
        "{}",
        s.max_stream_unreleased_bytes
    );
    assert!(
        s.max_unreleased_bytes > 65_535,
        "{}",
        s.max_unreleased_bytes
    );
    let detail = &s.checks["credit"].detail;
    assert!(
        detail.contains(&format!(
            "a stream's unreleased bytes peaked at {}, within the advertised window ({} over all streams at once)",
            s.max_stream_unreleased_bytes, s.max_unreleased_bytes
        )),
        "{detail}"
    );
    assert!(stdout.contains("(open RPCs summed)"), "{stdout}");
}

/// The growth window's WINDOW_UPDATEs and credit are those whose `t` falls
/// in the window summary.json states, [start, end), recounted from the
/// trace (an update 0.06–1.5 ms after the start went uncounted: the count
/// was of timeline buckets, one of them cut by the edge).
#[test]
fn growth_window_counts_are_exactly_the_stated_windows() {
    let dir = temp_dir("growth-window-exact");
    let (out, _) = run_with(
        &dir,
        &[
            "--streams",
            "3",
            "--stream-rates",
            "100,100,400",
            "--duration",
            "2s",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let s = support::read_summary(&dir);
    let text = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let origin = header["origin_mono_ns"].as_u64().unwrap();
    let (a, b) = s.queue_growth_window_s;
    let (lo, hi) = (
        origin + (a * 1e9).round() as u64,
        origin + (b * 1e9).round() as u64,
    );
    let updates: Vec<u64> = events(&dir)
        .iter()
        .filter(|e| {
            e["ep"] == "server"
                && e["type"] == "frame"
                && e["frame"] == "WINDOW_UPDATE"
                && e["dir"] == "out"
                && e["stream"] != 0
                && (lo..hi).contains(&e["t"].as_u64().unwrap())
        })
        .map(|e| e["increment"].as_u64().unwrap())
        .collect();
    assert!(updates.len() > 10, "{}", updates.len());
    assert_eq!(s.window_updates_in_growth_window, updates.len() as u64);
    assert_eq!(
        s.credit_returned_in_growth_window,
        updates.iter().sum::<u64>()
    );
}

/// Interrupted while stuck (every stream waiting on a connection window the
/// stalled stream holds), before the stall timeout: whether it was a stall
/// cannot be judged (`no_stall` said "the run never stopped progressing"),
/// and so when one stream is held from the start. Interrupted while the client waited on a busy worker, as it does all run
/// long with a direct queue: it held.
#[test]
fn a_run_interrupted_while_stuck_cannot_say_it_never_stalled() {
    let judge = |name: &str, args: &[&str]| {
        let dir = temp_dir(name);
        let mut all = vec!["run", "--duration", "20s", "--stall-timeout", "30s"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--quiet", "--no-pcap"]);
        support::run_interrupted(&all, &dir, "schedule", 300);
        support::read_summary(&dir)
    };
    // The premise: all four streams were waiting when the interrupt came (a
    // client held up at the start offers its backlog at once, and the
    // interrupt can then come before the window fills).
    let stuck = (0..3)
        .map(|k| {
            judge(
                &format!("stuck{k}"),
                &["--streams", "4", "--stall-stream", "3"],
            )
        })
        .find(|s| s.blocked_open_by.get("window") == Some(&4))
        .expect("never interrupted while all four streams waited");
    let ended_stuck = |s: &h2probe_analysis::analyze::Summary| {
        let no_stall = &s.checks["no_stall"];
        assert_eq!(no_stall.ok, None, "{}", no_stall.detail);
        assert!(
            no_stall.detail.contains("the run ended stuck"),
            "{}",
            no_stall.detail
        );
    };
    ended_stuck(&stuck);
    // One stream held from the start: its last bytes reached the server
    // after its wait began, and nothing moved for a second after that (it
    // read "the run never stopped progressing").
    // The premise, as for the four streams: the interrupt came well after
    // the last upload bytes (on a loaded machine the client can be held up
    // until just before it).
    let one = (0..3)
        .map(|k| judge(&format!("stuck-one{k}"), &["--stall-stream", "1:200000"]))
        .find(|s| {
            let end = s.first_event_s.unwrap_or(0.0) + s.span_s;
            s.upload_data_s.is_some_and(|(_, last)| end - last >= 0.5)
        })
        .expect("never interrupted a second after the upload stopped");
    assert_eq!(one.blocked_open_by.get("window"), Some(&1), "{one:?}");
    ended_stuck(&one);
    let paced = judge("paced", &["--queue", "direct"]);
    assert_eq!(
        paced.checks["no_stall"].ok,
        Some(true),
        "{}",
        paced.checks["no_stall"].detail
    );
}

/// A queue that takes longer than --stall-timeout to drain is progress, not
/// a stall: with one stream allowed at a time, stream 3 waits for stream
/// 1's two queued messages (450 ms each) while no byte arrives. The watcher
/// counted only bytes and ended the run as stalled (exit 3).
#[test]
fn a_queue_draining_longer_than_the_stall_timeout_is_not_a_stall() {
    let dir = temp_dir("queue-drains");
    let (out, _) = run_with(
        &dir,
        &[
            "--release",
            "complete",
            "--streams",
            "2",
            "--max-concurrent-streams",
            "1",
            "--service-time",
            "450ms",
            "--max-pending",
            "5",
            "--duration",
            "3s",
            "--stall-timeout",
            "500ms",
        ],
    );
    let s = support::read_summary(&dir);
    assert_eq!(s.stalls, 0, "{:?}", s.stall);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Both streams ran: stream 3 opened once stream 1 was done.
    assert_eq!(s.rpc_status.get("OK"), Some(&2), "{:?}", s.rpc_status);
}

/// Under release on receipt, a backlog of queued messages draining while a
/// stalled stream holds the connection window lets no byte in: the stall
/// is recorded one timeout after the last byte, completions or not (a
/// watcher that counted completions as progress waited for the backlog,
/// and with a large window the RPC deadlines came first: no stall at all).
#[test]
fn completions_that_release_nothing_do_not_hide_a_stall() {
    let dir = temp_dir("backlog-no-release");
    let (out, _) = run_with(
        &dir,
        &[
            "--streams",
            "4",
            "--stall-stream",
            "3",
            "--service-time",
            "400ms",
            "--stall-timeout",
            "1s",
            "--duration",
            "8s",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let ev = events(&dir);
    let stall = ev
        .iter()
        .find(|e| e["type"] == "stall")
        .expect("a stall event");
    let (at, timeout) = (
        stall["t"].as_u64().unwrap(),
        stall["timeout_ns"].as_u64().unwrap(),
    );
    let within = |ty: &str| {
        ev.iter()
            .filter(|e| e["type"] == ty && e["ep"] == "server")
            .filter(|e| (at - timeout..at).contains(&e["t"].as_u64().unwrap()))
            .count()
    };
    assert!(
        within("complete") > 0,
        "the backlog was still draining when the stall was recorded"
    );
    assert_eq!((within("chunk"), within("release")), (0, 0));
}
