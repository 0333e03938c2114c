//! Survive what the probe is pointed at: a full disk, a reused --out, idle
//! and never-reading peers, descriptor exhaustion, memory from any peer.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::temp_dir;

#[test]
fn a_full_disk_stops_the_run_promptly_and_still_prints_what_the_trace_holds() {
    let dir = temp_dir("disk-full");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["run", "--duration", "30s", "--quiet", "--no-pcap", "--out"])
        .arg(&dir)
        // The trace file fills up after 300 kB (fault injection).
        .env("H2PROBE_FAULT_TRACE_FULL_AFTER", "300000")
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        took < Duration::from_secs(20),
        "the 30 s run stopped when the disk filled, not at its end ({took:?})"
    );
    assert!(stderr.contains("trace.jsonl"), "names the file: {stderr}");
    assert!(
        stderr.contains("events"),
        "says how much is intact: {stderr}"
    );
    assert!(
        stdout.contains("messages  scheduled"),
        "the headline: {stdout}"
    );
    let meta = h2probe_analysis::meta::Meta::read(&dir).unwrap();
    assert!(meta.status.starts_with("error: "), "{}", meta.status);
}

#[test]
fn out_refuses_a_run_directory_unless_forced_and_force_leaves_nothing_stale() {
    let dir = temp_dir("force");
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args([
                "run",
                "--duration",
                "300ms",
                "--quiet",
                "--no-pcap",
                "--out",
            ])
            .arg(&dir)
            .args(extra)
            .output()
            .unwrap()
    };
    assert!(run(&[]).status.success());
    std::fs::create_dir_all(dir.join("csv")).unwrap();
    std::fs::write(dir.join("csv/stale.csv"), "old").unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    let again = run(&[]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    assert!(run(&["--force"]).status.success());
    assert!(!dir.join("csv").exists(), "the old CSV export is gone");
    assert!(
        dir.join("notes.txt").exists(),
        "files that are not run products stay"
    );
    assert!(dir.join("summary.json").exists());
}
