//! How RPCs end: deadlines, cancellation, Ctrl-C. Nothing may be lost
//! silently: every scheduled message ends completed, discarded (with a
//! reason) or never sent, and the trace is finished even when interrupted.

mod support;

use support::{dur, run, run_opts, temp_dir};

#[test]
fn a_deadline_shorter_than_the_drain_discards_with_reason_deadline() {
    let dir = temp_dir("deadline");
    let mut o = run_opts(&dir, "frame", "unbounded");
    o.client.duration = dur("1s");
    o.client.deadline = Some(dur("1500ms"));
    let r = run(o);
    let s = &r.summary;
    // 300 offered, ~135 served by the deadline: the rest is discarded, by the
    // server's own deadline or by the client's reset at its deadline,
    // whichever the server saw first.
    let reasons = s.discarded_by_reason.get("deadline").copied().unwrap_or(0)
        + s.discarded_by_reason.get("cancelled").copied().unwrap_or(0);
    assert!(reasons > 50 && reasons == s.discarded, "{s:#?}");
    assert_eq!(
        s.rpc_status.get("DEADLINE_EXCEEDED"),
        Some(&1),
        "{:?}",
        s.rpc_status
    );
    assert_eq!(
        s.scheduled,
        s.completed + s.discarded + s.never_sent,
        "{s:#?}"
    );
    assert_eq!(s.checks["accounting"].ok, Some(true));
    assert_eq!(s.checks["credit"].ok, Some(true));
}

/// A deadline before the first message is due: the RPC ends at the deadline,
/// DEADLINE_EXCEEDED, its stream reset, on both sides not OK. The schedule
/// used to end at the deadline and close the stream cleanly, so the server
/// answered the empty RPC OK and the run read "OK×1, all invariants hold".
#[test]
fn a_deadline_before_the_first_message_is_exceeded_not_an_empty_ok_rpc() {
    for deadline in ["1ms", "5ms"] {
        let dir = temp_dir(&format!("deadline-{deadline}"));
        let mut o = run_opts(&dir, "frame", "unbounded");
        o.client.duration = dur("1s");
        o.client.deadline = Some(dur(deadline));
        let r = run(o);
        let s = &r.summary;
        assert_eq!(
            s.rpc_status.get("DEADLINE_EXCEEDED"),
            Some(&1),
            "{deadline}: {:?}",
            s.rpc_status
        );
        assert!(
            !s.server_rpc_status.contains_key("OK"),
            "{deadline}: the server answered OK: {:?}",
            s.server_rpc_status
        );
        assert_eq!(
            s.scheduled,
            s.completed + s.discarded + s.never_sent,
            "{s:#?}"
        );
    }
}

#[test]
fn a_client_deadline_during_sending_records_never_sent_and_the_server_discards_cancelled() {
    let dir = temp_dir("cancel");
    // Release on complete with a slow worker: the client is window-blocked,
    // so at its deadline it still holds unsent messages.
    let mut o = run_opts(&dir, "complete", "direct");
    o.client.duration = dur("2s");
    o.client.deadline = Some(dur("1s"));
    o.server.service_time = dur("20ms");
    let r = run(o);
    let s = &r.summary;
    // Both sides reach the deadline at about the same time. The client's
    // unsent messages are never_sent at its deadline, or, when the server's
    // own deadline reset the stream first (it happened under CI load), at
    // that reset (`stream_error`), and then the server said deadline.
    let reason = |r: &str| s.never_sent_by_reason.get(r).copied().unwrap_or(0);
    assert!(reason("deadline") + reason("stream_error") > 0, "{s:#?}");
    if reason("deadline") == 0 {
        assert!(
            s.discarded_by_reason.get("deadline").copied().unwrap_or(0) > 0,
            "{s:#?}"
        );
    }
    // The server either saw the client's RST (cancelled) or its own
    // deadline first.
    let server_side = s.discarded_by_reason.get("cancelled").copied().unwrap_or(0)
        + s.discarded_by_reason.get("deadline").copied().unwrap_or(0);
    assert_eq!(server_side, s.discarded, "{s:#?}");
    assert_eq!(s.unaccounted, s.lost_in_flight, "{s:#?}");
    assert!(
        s.lost_in_flight.is_some_and(|n| (0..=4).contains(&n)),
        "at most the messages in flight at the reset: {s:#?}"
    );
    assert_eq!(
        s.checks["accounting"].ok,
        Some(true),
        "{}",
        s.checks["accounting"].detail
    );
    assert_eq!(s.checks["no_data_beyond_credit"].ok, Some(true));
}

#[test]
fn ctrl_c_mid_run_finishes_the_trace_and_the_summary() {
    let dir = temp_dir("sigint");
    let args = ["run", "--duration", "30s", "--quiet", "--no-pcap"];
    let out = support::run_interrupted(&args, &dir, "complete", 20);
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        stdout.contains("status    interrupted"),
        "the headline says so: {stdout}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["status"], "interrupted");
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    assert!(
        trace
            .lines()
            .last()
            .unwrap()
            .contains("\"type\":\"footer\""),
        "the trace has its footer"
    );
    let s = support::read_summary(&dir);
    assert!(s.completed > 20 && s.scheduled < 9000, "{s:#?}");
    // Work cut short is recorded with its reason: unsent messages as
    // `interrupted`; queued ones as `shutdown`, or `cancelled` when the
    // client's reset reached the server before the shutdown signal did.
    let cut = s
        .never_sent_by_reason
        .get("interrupted")
        .copied()
        .unwrap_or(0)
        + ["shutdown", "cancelled"]
            .iter()
            .map(|r| s.discarded_by_reason.get(*r).copied().unwrap_or(0))
            .sum::<u64>();
    assert!(cut > 0, "{s:#?}");
    assert_eq!(s.discarded, s.discarded_by_reason.values().sum::<u64>());
    assert_eq!(
        s.checks["accounting"].ok,
        Some(true),
        "{}",
        s.checks["accounting"].detail
    );
    assert_eq!(s.trace_ending, "clean");
    // Stopped while progressing: no stall, judged.
    assert_eq!(
        s.checks["no_stall"].ok,
        Some(true),
        "{}",
        s.checks["no_stall"].detail
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_drain_completes_queued_work_before_answering() {
    let opts = h2probe::server::ServerOpts {
        shutdown_drain: true,
        queue: "unbounded".parse().unwrap(),
        ..Default::default()
    };
    let server = support::TestServer::start("drain", opts).await;
    let copts = h2probe::client::ClientOpts {
        duration: "5s".parse().unwrap(),
        ..Default::default()
    };
    let ctx = support::client_ctx(copts, server.addr, h2probe::trace::Recorder::disabled());
    let client = tokio::spawn(h2probe::client::run(ctx));
    // ≈ 100 msg/s of queue growth: well past 50 by then, even on a loaded
    // machine that starts the client late.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    // Server shutdown (what Ctrl-C does to `serve`), mid-stream, with a queue.
    let (s, _) = server.stop().await;
    let outcomes = client.await.unwrap().unwrap();
    assert!(s.max_queue_depth > 50, "{}", s.max_queue_depth);
    assert_eq!(s.discarded, 0, "{s:#?}");
    assert_eq!(s.completed, s.decoded, "every queued message was completed");
    assert_eq!(
        s.server_rpc_status.get("UNAVAILABLE"),
        Some(&1),
        "{:?}",
        s.server_rpc_status
    );
    assert_eq!(
        outcomes[0].status,
        h2probe::grpc::status::UNAVAILABLE,
        "{:?}",
        outcomes[0]
    );
}

/// `run --shutdown-drain`: at Ctrl-C the client half-closes instead of
/// cancelling, so the server finishes its queue and answers (nothing
/// discarded); the client cancelled, and the server threw the queue away
/// (`cancelled`), the flag doing nothing in `run`.
#[test]
fn run_with_shutdown_drain_drains_at_ctrl_c() {
    let dir = temp_dir("run-drain");
    support::run_interrupted(
        &[
            "run",
            "--duration",
            "20s",
            "--shutdown-drain",
            "--quiet",
            "--no-pcap",
        ],
        &dir,
        "decode",
        100,
    );
    let s = support::read_summary(&dir);
    assert!(s.max_queue_depth > 20, "a queue to drain: {s:#?}");
    assert_eq!(s.discarded, 0, "{s:#?}");
    assert_eq!(s.completed, s.decoded, "{s:#?}");
    assert_eq!(s.checks["accounting"].ok, Some(true), "{s:#?}");
    assert!(!s.server_rpc_status.contains_key("CANCELLED"), "{s:#?}");
}

/// `run --shutdown-drain` whose drain outlasts `--drain-timeout`: the
/// server closes the connection, and the queue it throws away is discarded
/// as `shutdown`, the server's doing. It read `cancelled`, which the docs
/// keep for a client's reset (helper-57).
#[test]
fn a_drain_cut_by_the_drain_timeout_discards_as_shutdown() {
    // Both stacks: hyper's dropped handler read as a client's reset too
    // (helper-58).
    for stack in ["h2", "hyper"] {
        let dir = temp_dir(&format!("run-drain-timeout-{stack}"));
        support::run_interrupted(
            &[
                "run",
                "--duration",
                "20s",
                "--stack",
                stack,
                "--shutdown-drain",
                "--drain-timeout",
                "1s",
                "--quiet",
                "--no-pcap",
            ],
            &dir,
            "decode",
            300,
        );
        let s = support::read_summary(&dir);
        // ≈ 200 messages queued by then, 100 drained in the second.
        let by_reason = &s.discarded_by_reason;
        assert!(
            by_reason.get("shutdown").copied().unwrap_or(0) > 0,
            "{stack}: {by_reason:?}"
        );
        assert_eq!(by_reason.get("cancelled"), None, "{stack}: {by_reason:?}");
        // Its RPC ended by the server's cut: UNAVAILABLE on both sides,
        // and the client read the server's own words (the connection is
        // closed only after they had time to cross it; closed at once, the
        // client read a broken stream).
        assert_eq!(
            s.server_rpc_status.get("UNAVAILABLE"),
            Some(&1),
            "{stack}: {:?}",
            s.server_rpc_status
        );
        let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
        let ends: Vec<&str> = trace
            .lines()
            .filter(|l| l.contains("\"type\":\"rpc_end\""))
            .collect();
        assert_eq!(ends.len(), 2, "{stack}: {ends:?}");
        for end in ends {
            assert!(
                end.contains("\"status\":14")
                    && end.contains("server shutting down: --drain-timeout 1s passed"),
                "{stack}: {end}"
            );
        }
    }
}
