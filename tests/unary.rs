//! `--rpc unary`: one call per message against the probe's own server
//! (Ingest takes a one-message stream), in `run`, interrupted, and as
//! `serve` and `client` merged.

mod support;

use std::process::{Command, Stdio};

/// One call at a time to a 10 ms worker cannot carry 300 calls a second:
/// the connection's backlog fills and refuses the rest (`never_sent`
/// backlog, on stream 0), and the accounting holds across both sides, each
/// message a call of its own (one `rpc_start` per message sent, each
/// stream's DATA one message ending the stream).
#[test]
fn one_call_at_a_time_fills_the_backlog_and_every_message_is_accounted() {
    let dir = support::temp_dir("unary-run");
    let out = dir.join("run");
    let o = support::h2probe_ok([
        "run",
        "--rpc",
        "unary",
        "--duration",
        "1500ms",
        "--max-pending",
        "20",
        "--no-pcap",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    support::assert_fits_80(&stdout);
    let s = support::read_summary(&out);
    assert!(s.unary, "{stdout}");
    for (name, c) in &s.checks {
        assert_ne!(c.ok, Some(false), "{name}: {}", c.detail);
    }
    assert_eq!(s.checks["accounting"].ok, Some(true), "{stdout}");
    assert_eq!(s.checks["bytes"].ok, Some(true), "{stdout}");
    // At most ≈ 90 calls a second (10 ms each and a round trip), 300 offered.
    assert!(s.sent < s.scheduled / 2, "{stdout}");
    assert_eq!(s.never_sent_by_reason.get("backlog"), Some(&s.never_sent));
    assert_eq!(s.rpc_status.get("OK"), Some(&s.sent), "{stdout}");
    assert_eq!(s.server_rpc_status.get("OK"), Some(&s.sent), "{stdout}");
    assert!(s.max_queue_depth <= 1, "{stdout}");
    // The backlog's wait is lateness; a call's own time is `calls`.
    assert!(s.lateness_ms.p50 > 100.0, "{stdout}");
    assert_eq!(s.call_ms.count, s.sent);
    assert!(s.call_ms.p50 >= 10.0 && s.call_ms.p50 < 100.0, "{stdout}");
    assert!(stdout.contains("  calls p50 "), "{stdout}");
    assert!(
        stdout.contains("starvation not judged: unary calls"),
        "{stdout}"
    );

    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .filter(|l| l.starts_with("{\"t\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let client = |ty: &'static str| {
        events
            .iter()
            .filter(move |e| e["ep"] == "client" && e["type"] == ty)
    };
    // Offered on the connection, sent on a call's stream, same seq.
    assert!(client("schedule").all(|e| e["stream"] == 0));
    assert!(client("never_sent").all(|e| e["stream"] == 0));
    let mut sent: Vec<(u64, u64)> = client("send")
        .map(|e| (e["stream"].as_u64().unwrap(), e["seq"].as_u64().unwrap()))
        .collect();
    assert_eq!(client("rpc_start").count() as u64, s.sent);
    sent.sort_unstable();
    sent.dedup_by_key(|(stream, _)| *stream);
    assert_eq!(sent.len() as u64, s.sent, "one message per stream");
    let mut seqs: Vec<u64> = sent.iter().map(|&(_, seq)| seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len() as u64, s.sent, "each message sent once");
    let ends = client("frame")
        .filter(|e| e["dir"] == "out" && e["frame"] == "DATA")
        .filter(|e| e["flags"].as_u64().unwrap() & 1 == 1 && e["len"].as_u64().unwrap() > 0)
        .count();
    assert_eq!(
        ends as u64, s.sent,
        "END_STREAM on each message's last frame"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An interrupt: the calls in flight end CANCELLED, the backlog's messages
/// are `never_sent` interrupted on the connection's stream 0, and the
/// accounting still holds (exit 130).
#[test]
fn an_interrupt_cancels_the_calls_in_flight_and_the_backlog() {
    let dir = support::temp_dir("unary-interrupt");
    let out = dir.join("run");
    support::run_interrupted(
        &[
            "run",
            "--rpc",
            "unary",
            "--streams",
            "2",
            "--service-time",
            "50ms",
            "--duration",
            "30s",
            "--no-pcap",
        ],
        &out,
        "rpc_end",
        20,
    );
    let s = support::read_summary(&out);
    assert_eq!(s.checks["accounting"].ok, Some(true), "{s:?}");
    let interrupted = s.never_sent_by_reason.get("interrupted").copied();
    assert!(interrupted.unwrap_or(0) > 0, "{s:?}");
    let cancelled = s.rpc_status.get("CANCELLED").copied().unwrap_or(0);
    assert!((1..=2).contains(&cancelled), "{:?}", s.rpc_status);
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let backlog = trace.lines().find(|l| {
        l.contains("\"ep\":\"client\"")
            && l.contains("\"type\":\"never_sent\"")
            && l.contains("\"reason\":\"interrupted\"")
            && l.contains("\"stream\":0,")
    });
    assert!(
        backlog.is_some(),
        "no never_sent of the backlog on stream 0"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `serve` and `client --rpc unary` as two processes, merged: every call
/// pairs across the taps and every check holds.
#[test]
fn serve_and_a_unary_client_merge_with_every_check_holding() {
    let root = support::temp_dir("unary-merge");
    let bin = env!("CARGO_BIN_EXE_h2probe");
    let mut serve = Command::new(bin)
        // Until after the client's last call (--exit-after counts RPCs:
        // each call is one).
        .args(["serve", "--listen", "127.0.0.1:0", "--for", "4s"])
        .args(["--service-time", "1ms", "--quiet", "--no-pcap", "--out"])
        .arg(root.join("server"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut serve);
    let client = support::h2probe_ok([
        "client",
        "--connect",
        &addr,
        "--rpc",
        "unary",
        "--streams",
        "3",
        "--rate",
        "200",
        "--payload",
        "40KiB",
        "--duration",
        "1s",
        "--quiet",
        "--no-pcap",
        "--out",
        root.join("client").to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&client.stdout);
    assert!(
        stdout.contains("(unary: each connection's first 4 failed calls and its last"),
        "{stdout}"
    );
    // One line for the last call, not one per call.
    assert_eq!(
        stdout
            .lines()
            .filter(|l| l.starts_with("rpc conn "))
            .count(),
        1,
        "{stdout}"
    );
    assert!(serve.wait().unwrap().success());
    let merged = support::h2probe_ok([
        "merge",
        root.join("server").to_str().unwrap(),
        root.join("client").to_str().unwrap(),
        "--out",
        root.join("merged").to_str().unwrap(),
    ]);
    let out = String::from_utf8_lossy(&merged.stdout);
    assert!(out.contains("all invariants hold"), "{out}");
    let s = support::read_summary(&root.join("merged"));
    assert!(s.unpaired.is_none(), "{:?}", s.unpaired);
    for check in ["accounting", "bytes", "windows_agree", "credit"] {
        assert_eq!(s.checks[check].ok, Some(true), "{check}: {out}");
    }
    assert!(s.sent >= 190 && s.sent == s.decoded, "{out}");
    assert_eq!(s.stream_count, s.sent, "one stream per call: {out}");
    std::fs::remove_dir_all(&root).unwrap();
}
