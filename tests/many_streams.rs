//! Many streams, one connection window: a stream whose bytes are never
//! released starves the others (64 KiB connection window: everything stops
//! and the stall is detected) or only itself (1 MiB: it is named as starved).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::temp_dir;

fn run(dir: &std::path::Path, extra: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["run", "--streams", "4", "--stall-stream", "3"])
        .args(["--quiet", "--no-pcap", "--out"])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[test]
fn a_stalled_stream_drains_a_shared_64k_window_and_the_stall_is_detected() {
    let dir = temp_dir("stall-64k");
    let (out, took) = run(&dir, &["--duration", "6s", "--stall-timeout", "1s"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "a failed check: {stdout}");
    assert!(
        took < Duration::from_secs(5),
        "ended by the stall, not by --duration 6s ({took:?})"
    );
    let s = support::read_summary(&dir);
    assert_eq!(s.stalls, 1, "{s:#?}");
    let stall = s.stall.as_deref().unwrap();
    assert!(
        stall.contains("65535 of 65535 B held unreleased"),
        "{stall}"
    );
    assert!(
        stall.contains("/3: 65535 B unreleased, 0 B credit"),
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
    assert!(
        stall.contains("/3: 65535 B unreleased, 0 B credit"),
        "{stall}"
    );
    assert!(!stall.contains("/1:") && !stall.contains("/5:"), "{stall}");
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
    assert!(
        table.contains("stall-stream=3 conn-window=65535"),
        "{table}"
    );
    assert!(
        table.contains("stall-stream=3 conn-window=1048576"),
        "{table}"
    );
    assert!(dir.join("comparison.md").is_file());
}
