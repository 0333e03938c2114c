//! `--rpc unary`: one call per message against the probe's own server
//! (Ingest takes a one-message stream), in `run`, interrupted, and as
//! `serve` and `client` merged.

mod support;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// A `serve` child on an ephemeral port with `args` (and --quiet
/// --no-pcap), writing into `dir`: the child and its address.
fn serve(args: &[&str], dir: &std::path::Path) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .args(["--quiet", "--no-pcap", "--out"])
        .arg(dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut child);
    (child, addr)
}

/// `client --rpc unary` against `addr` with `args` (split at spaces; and
/// --no-pcap), writing `out`: the command, to run or spawn.
fn unary_client(addr: &str, args: &str, out: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_h2probe"));
    c.args(["client", "--connect", addr, "--rpc", "unary"])
        .args(args.split_whitespace())
        .args(["--no-pcap", "--out"])
        .arg(out);
    c
}

/// `merge` of `root`'s `server` and `client` runs into `root/merged`, which
/// must hold every check: what it printed, and its summary.
fn merged_holding(root: &std::path::Path) -> (String, h2probe_analysis::analyze::Summary) {
    merged_holding_refused(root, 0)
}

/// [`merged_holding`] of a run with `refused` calls refused past a GOAWAY
/// (see [`unprocessed_past_goaway`]): any makes the merge exit 4.
fn merged_holding_refused(
    root: &std::path::Path,
    refused: u64,
) -> (String, h2probe_analysis::analyze::Summary) {
    let merged = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .arg("merge")
        .args([root.join("server"), root.join("client")])
        .arg("--out")
        .arg(root.join("merged"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&merged.stdout).into_owned();
    assert_eq!(
        merged.status.code(),
        exit_for(refused),
        "{out}{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    assert!(out.contains("all invariants hold"), "{out}");
    (out, support::read_summary(&root.join("merged")))
}

/// The calls of a client trace that ended UNAVAILABLE because the server
/// never processed them: each one's stream above the last stream of a
/// GOAWAY its connection received (h2's server sends GOAWAY at 2^31-1 and
/// a PING, then, on the PING's ACK, the last stream it took; a call whose
/// HEADERS h2 wrote after that ACK is refused so). The probe does not
/// retry such a call as gRPC's transparent retry would (see the README's
/// "Unary calls"): a test of a maximum age allows these, and only these
/// (any other call that did not end OK fails it), at most one per lane
/// (`streams`) at each such GOAWAY.
fn unprocessed_past_goaway(client_trace: &std::path::Path, streams: u64) -> u64 {
    let trace = std::fs::read_to_string(client_trace).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last_stream = |conn: &serde_json::Value| {
        events
            .iter()
            .filter(|e| &e["conn"] == conn && e["frame"] == "GOAWAY" && e["dir"] == "in")
            .filter_map(|e| e["last_stream"].as_u64())
            .min()
    };
    let mut refused = 0;
    for end in events.iter().filter(|e| e["type"] == "rpc_end") {
        if end["status"] == 0 {
            continue;
        }
        let stream = end["stream"].as_u64().unwrap();
        let last = last_stream(&end["conn"]);
        assert!(
            end["status"] == 14
                && end["message"].as_str().unwrap().contains("GOAWAY")
                && last.is_some_and(|last| stream > last),
            "a call that did not end OK, and not past a GOAWAY's last stream \
             ({last:?}): {end}"
        );
        refused += 1;
    }
    let closes = events
        .iter()
        .filter(|e| e["frame"] == "GOAWAY" && e["dir"] == "in")
        .filter(|e| e["last_stream"].as_u64() < Some(i32::MAX as u64))
        .count() as u64;
    assert!(
        refused <= streams * closes,
        "{refused} refused at {closes} GOAWAYs"
    );
    refused
}

/// The exit code of a client or merge whose run had `refused` calls
/// refused past a GOAWAY: 4 (an RPC ended non-OK) for any.
fn exit_for(refused: u64) -> Option<i32> {
    Some(if refused == 0 { 0 } else { 4 })
}

/// The client run into `root/client` exited 0, or 4 for calls refused
/// past a GOAWAY (see [`unprocessed_past_goaway`], `streams` its lanes):
/// how many were.
fn exit_allowing_refused(
    client: &std::process::Output,
    root: &std::path::Path,
    streams: u64,
) -> u64 {
    let refused = unprocessed_past_goaway(&root.join("client/trace.jsonl"), streams);
    assert_eq!(
        client.status.code(),
        exit_for(refused),
        "{refused} refused: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    refused
}

/// `run --rpc unary` with `args` (split at spaces; and --no-pcap) into
/// `out`, which must succeed: what it printed.
fn run_unary(out: &std::path::Path, args: &str) -> std::process::Output {
    let mut all = vec!["run", "--rpc", "unary"];
    all.extend(args.split_whitespace());
    all.extend(["--no-pcap", "--out", out.to_str().unwrap()]);
    support::h2probe_ok(all)
}

/// One call at a time to a 10 ms worker cannot carry 300 calls a second:
/// the connection's backlog fills and refuses the rest (`never_sent`
/// backlog, on stream 0), and the accounting holds across both sides, each
/// message a call of its own (one `rpc_start` per message sent, each
/// stream's DATA one message ending the stream).
#[test]
fn one_call_at_a_time_fills_the_backlog_and_every_message_is_accounted() {
    let dir = support::temp_dir("unary-run");
    let out = dir.join("run");
    let o = run_unary(&out, "--duration 1500ms --max-pending 20");
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
    // The schedule's view: the backlog's wait, then the call.
    assert_eq!(s.response_ms.count, s.sent);
    assert!(s.response_ms.p50 > s.call_ms.p50, "{stdout}");
    assert!(
        stdout.contains("carried DATA: unary calls, one message each (fairness and"),
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
    // Until after the client's last call (--exit-after counts RPCs: each
    // call is one).
    let (mut serve, addr) = serve(
        &["--for", "4s", "--service-time", "1ms"],
        &root.join("server"),
    );
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
        stdout
            .contains("(unary: the latest OK call and each connection's first 4 kinds of failure,"),
        "{stdout}"
    );
    // One line for the last call, not one per call, counting every call
    // that ended OK (it counted the connections).
    let lines = support::rpc_lines(&stdout);
    assert_eq!(lines.len(), 1, "{stdout}");
    let ok = support::read_summary(&root.join("client")).rpc_status["OK"];
    assert!(ok > 100, "{stdout}");
    assert!(
        lines[0].ends_with(&format!(": OK (and {} like it)", ok - 1)),
        "{stdout}"
    );
    assert!(serve.wait().unwrap().success());
    let (out, s) = merged_holding(&root);
    assert!(s.unpaired.is_none(), "{:?}", s.unpaired);
    for check in ["accounting", "bytes", "windows_agree", "credit"] {
        assert_eq!(s.checks[check].ok, Some(true), "{check}: {out}");
    }
    assert!(s.sent >= 190 && s.sent == s.decoded, "{out}");
    assert_eq!(s.stream_count, s.sent, "one stream per call: {out}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// The server goes away mid-run for good (`serve --exit-after 3`: a GOAWAY
/// after its third call, then it exits): the client tries a connection in
/// its place, which is refused, and fails at once (it does not run out its
/// --duration), exit 1, saying so; every message offered ends once and
/// meta.json records the failure. (It stopped its schedule silently, exit
/// 4 only for the one call that spent its message on the gone
/// connection.)
#[test]
fn a_server_that_goes_away_leaves_every_message_accounted() {
    let root = support::temp_dir("unary-goaway");
    let (mut serve, addr) = serve(
        &["--exit-after", "3", "--service-time", "1ms"],
        &root.join("server"),
    );
    let began = std::time::Instant::now();
    let client = unary_client(
        &addr,
        "--streams 3 --rate 200 --duration 20s",
        &root.join("client"),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&client.stderr);
    // 1 whatever the calls ended with (a failed run outranks them): the
    // schedule stopped before --duration (exit 4 was the silent stop).
    assert_eq!(client.status.code(), Some(1), "{stderr}");
    assert!(began.elapsed().as_secs() < 15, "{stderr}");
    let code = serve.wait().unwrap().code();
    assert!(matches!(code, Some(0 | 4)), "serve exited {code:?}");
    let s = support::read_summary(&root.join("client"));
    assert_eq!(s.scheduled, s.sent + s.never_sent, "{stderr}");
    assert!(s.sent >= 3, "{stderr}");
    assert!(
        stderr.contains("its schedule stopped before --duration"),
        "{stderr}"
    );
    let meta = std::fs::read_to_string(root.join("client/meta.json")).unwrap();
    assert!(meta.contains(r#""status": "error: "#), "{meta}");
    // h2's words for a GOAWAY without an error are not repeated.
    assert!(!stderr.contains("not a result of an error"), "{stderr}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A server that closes its connections on purpose while it goes on
/// serving (GOAWAY, NO_ERROR: here `--idle-timeout` shorter than the gap
/// between calls, as a maximum connection age or a drain would) has each
/// replaced, as a gRPC channel replaces one: the schedule goes on over the
/// new connection from the next message on the same times, every message
/// is offered once and sent, and the merged run's checks hold. (The
/// client stopped offering at the first GOAWAY: 1 call of 12, exit 4.)
#[test]
fn a_connection_the_server_closes_is_replaced_and_the_schedule_goes_on() {
    let root = support::temp_dir("unary-replaced");
    let (mut serve, addr) = serve(
        &["--idle-timeout", "150ms", "--for", "8s"],
        &root.join("server"),
    );
    let client = unary_client(&addr, "--rate 4 --duration 3s", &root.join("client"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&client.stdout);
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert_eq!(client.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stderr
            .matches("the schedule goes on over a new connection")
            .count(),
        1,
        "said once: {stderr}"
    );
    let trace = std::fs::read_to_string(root.join("client/trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["ep"] == "client")
        .collect();
    let of = |kind: &'static str| events.iter().filter(move |e| e["type"] == kind);
    // Every call 250 ms after the one before, the server idles 150 ms:
    // most calls find their connection closed.
    let opened = of("conn_open").count();
    assert!(opened >= 6, "{opened} connections: {stderr}");
    assert!(
        stderr.contains(&format!(
            "{} connections ended before their schedule and were replaced",
            opened - 1
        )),
        "{stderr}"
    );
    // One schedule across the connections: seq 0..12, each once, on the
    // times of one connection's schedule (250 ms apart), each connection
    // offering a run of them.
    let scheduled: Vec<(u64, u64, u64)> = of("schedule")
        .map(|e| {
            let n = |k: &str| e[k].as_u64().unwrap();
            (n("seq"), n("t"), n("conn"))
        })
        .collect();
    let seqs: Vec<u64> = scheduled.iter().map(|s| s.0).collect();
    assert_eq!(seqs, (0..12).collect::<Vec<_>>(), "{stderr}");
    for w in scheduled.windows(2) {
        let gap = w[1].1 - w[0].1;
        assert!(gap.abs_diff(250_000_000) < 1_000, "{w:?}");
        assert!(w[1].2 >= w[0].2, "a connection's run: {w:?}");
    }
    assert!(of("never_sent").next().is_none(), "{trace}");
    assert_eq!(of("send").count(), 12);
    let _ = serve.wait();
    let (out, s) = merged_holding(&root);
    assert_eq!(s.checks["accounting"].ok, Some(true), "{out}");
    assert_eq!((s.scheduled, s.sent, s.completed), (12, 12, 12), "{out}");
    assert_eq!(s.rpc_status.get("OK"), Some(&12), "{out}");
    assert_eq!((s.lost_in_flight, s.unaccounted), (Some(0), Some(0)));
    // The client's trace alone has no server's counts to set against its
    // own: no figure across sides (it read 12 lost in flight, 12
    // unaccounted).
    let c = support::read_summary(&root.join("client"));
    assert_eq!((c.lost_in_flight, c.unaccounted), (None, None));
    std::fs::remove_dir_all(&root).unwrap();
}

/// Calls the server answers after 1 s while it closes a connection idle
/// for 150 ms (no frame either way: mid-call): each connection ends with
/// its call in flight. Its replacement opens when the next message is due,
/// not when that call ends (it waited for it, the schedule's messages then
/// sent late in a burst), and an interrupt after replacements ends every
/// call and message of every connection (it dropped the replacement's
/// calls: `rpc_start`s without an `rpc_end`, events dropped, exit 3). So
/// too with a second lane waiting at a server's limit of one stream (the
/// replacement waited for the call to end: that lane held the connection's
/// turn, and did not look).
#[test]
fn replacements_open_on_time_and_an_interrupt_ends_all_their_calls() {
    replacements_on_time(&[], &["--streams", "1"]);
    replacements_on_time(&["--max-concurrent-streams", "1"], &["--streams", "2"]);
}

fn replacements_on_time(server: &[&str], client: &[&str]) {
    let root = support::temp_dir("unary-replaced-busy");
    let mut args = vec!["--idle-timeout", "150ms", "--service-time", "1s"];
    args.extend(["--for", "30s"]);
    args.extend(server);
    let (mut serve, addr) = serve(&args, &root.join("server"));
    let dir = root.join("client");
    let mut args = vec!["client", "--connect", &addr, "--rpc", "unary"];
    args.extend(["--rate", "10", "--duration", "20s", "--no-pcap"]);
    args.extend(client);
    let out = support::run_interrupted(&args, &dir, "conn_open", 3);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the schedule goes on over a new connection"),
        "{stderr}"
    );
    let s = support::read_summary(&dir);
    assert_ne!(s.checks["no_dropped_events"].ok, Some(false), "{stderr}");
    assert_eq!(s.scheduled, s.sent + s.never_sent, "{stderr}");
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["ep"] == "client")
        .collect();
    let key = |e: &serde_json::Value| (e["conn"].as_u64().unwrap(), e["stream"].as_u64().unwrap());
    let of = |kind: &'static str| events.iter().filter(move |e| e["type"] == kind);
    let started: std::collections::BTreeSet<_> = of("rpc_start").map(key).collect();
    let ended: std::collections::BTreeSet<_> = of("rpc_end").map(key).collect();
    assert!(started.is_subset(&ended), "calls without an end: {trace}");
    let opens: Vec<(u64, u64)> = of("conn_open")
        .map(|e| (e["conn"].as_u64().unwrap(), e["t"].as_u64().unwrap()))
        .collect();
    assert!(opens.len() >= 4, "{stderr}");
    for &(conn, open) in &opens[1..] {
        let Some(first) = of("schedule").find(|e| e["conn"] == conn) else {
            continue; // interrupted before its first message
        };
        let due = first["t"].as_u64().unwrap();
        assert!(
            open < due + 250_000_000,
            "connection {conn} opened {} ms after its first message was due",
            (open - due) / 1_000_000
        );
    }
    let _ = serve.kill();
    let _ = serve.wait();
    std::fs::remove_dir_all(&root).unwrap();
}

/// `run` with two connections at 5 calls a second, its server closing
/// connections idle for 150 ms: the second connection's first message is
/// due 200 ms in, after its server closed it, and that connection is
/// replaced before anything was offered to it. Every call is made and
/// every check holds (the run failed: "GOAWAY before any call of it
/// opened").
#[test]
fn a_connection_closed_before_its_first_message_is_replaced() {
    let dir = support::temp_dir("unary-first-closed");
    let out = dir.join("run");
    let o = run_unary(
        &out,
        "--idle-timeout 150ms --rate 5 --connections 2 --duration 2s",
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("all invariants hold"), "{stdout}");
    let s = support::read_summary(&out);
    assert_eq!((s.scheduled, s.sent, s.completed), (10, 10, 10), "{stdout}");
    assert_eq!(s.checks["accounting"].ok, Some(true), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `serve --max-connection-age 500ms` (grpc-go's MaxConnectionAge) sends
/// each connection GOAWAY half a second after it opened, its conn_close
/// saying so: the unary client replaces each, and the merged run of 100
/// calls holds every check, every call answered by the server.
#[test]
fn a_servers_maximum_connection_age_replaces_connections() {
    let root = support::temp_dir("unary-age");
    let (mut serve, addr) = serve(
        &["--max-connection-age", "500ms", "--for", "6s"],
        &root.join("server"),
    );
    let client = unary_client(
        &addr,
        "--streams 2 --rate 50 --duration 2s",
        &root.join("client"),
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&client.stderr);
    // A call h2 opened as the GOAWAY came can be refused (1 run in about
    // 40 under load): UNAVAILABLE, exit 4.
    let refused = exit_allowing_refused(&client, &root, 2);
    assert!(stderr.contains("were replaced"), "{stderr}");
    let _ = serve.wait();
    let trace = std::fs::read_to_string(root.join("server/trace.jsonl")).unwrap();
    let aged = trace
        .lines()
        .filter(|l| l.contains(r#""type":"conn_close""#))
        .filter(|l| l.contains("reached --max-connection-age 500ms: GOAWAY sent"))
        .count();
    // 2 s of connections that live 0.5 s.
    assert!((2..=4).contains(&aged), "{aged} aged connections");
    let (out, s) = merged_holding_refused(&root, refused);
    assert_eq!(
        (s.scheduled, s.sent, s.completed),
        (100, 100, 100 - refused),
        "{out}"
    );
    assert_eq!(
        s.server_rpc_status.get("OK"),
        Some(&(100 - refused)),
        "{out}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// Messages waiting in a connection's backlog when the server's maximum
/// age closes it are handed to its replacement and sent there, as a gRPC
/// channel's waiting calls go to its next transport: none is lost, none
/// sent twice, and each connection's books balance with the handed ones
/// on both sides (`never_sent` `handed_over` where they were scheduled,
/// `handed` where they were sent). They were `never_sent` `stream_error`
/// on the old connection, a few at every close.
#[test]
fn a_backlog_at_a_maximum_age_is_sent_over_the_replacement() {
    let root = support::temp_dir("unary-handed");
    // One call at a time to a 30 ms worker, one message due every 20 ms:
    // a backlog grows, and every close finds messages waiting.
    let (mut serve, addr) = serve(
        &[
            "--max-connection-age",
            "300ms",
            "--service-time",
            "30ms",
            "--for",
            "8s",
        ],
        &root.join("server"),
    );
    let client = unary_client(
        &addr,
        "--streams 1 --rate 50 --duration 2s --max-pending 1000 --deadline 30s",
        &root.join("client"),
    )
    .output()
    .unwrap();
    let refused = exit_allowing_refused(&client, &root, 1);
    let _ = serve.wait();
    let (out, s) = merged_holding_refused(&root, refused);
    assert_eq!(
        (s.scheduled, s.sent, s.completed),
        (100, 100, 100 - refused),
        "{out}"
    );
    assert_eq!(s.never_sent, 0, "{out}");
    assert!(s.handed_over > 0 && s.handed_over == s.handed_in, "{out}");
    assert!(
        out.contains(&format!("handed-over {}", s.handed_over)),
        "{out}"
    );
    // From the trace: each message sent once, and each run handed over
    // by the connection closed just before the one that took it.
    let trace = std::fs::read_to_string(root.join("client/trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |ty: &str| -> Vec<&serde_json::Value> {
        events.iter().filter(|e| e["type"] == ty).collect()
    };
    let mut sent: Vec<u64> = of("send")
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    sent.sort_unstable();
    assert_eq!(sent, (0..100).collect::<Vec<u64>>());
    let handed = of("handed");
    assert!(!handed.is_empty());
    for h in &handed {
        let (conn, from) = (h["conn"].as_u64().unwrap(), h["from"].as_u64().unwrap());
        assert_eq!(from + 1, conn, "{h}");
        let (seq, count) = (h["seq"].as_u64().unwrap(), h["count"].as_u64().unwrap_or(1));
        let over = of("never_sent").into_iter().find(|n| {
            n["conn"].as_u64() == Some(from) && n["reason"] == "handed_over" && n["seq"] == seq
        });
        assert_eq!(
            over.map(|n| n["count"].as_u64().unwrap_or(1)),
            Some(count),
            "{h}"
        );
        // Sent on the connection that took them or, handed on in turn, a
        // later one, with the time they were first due.
        for q in seq..seq + count {
            let send = of("send").into_iter().find(|e| e["seq"] == q).unwrap();
            assert!(send["conn"].as_u64().unwrap() >= conn, "{send}");
            let due = of("schedule").into_iter().find(|e| e["seq"] == q).unwrap();
            assert_eq!(send["scheduled"], due["t"], "{send}");
        }
    }
    // Each connection's books balance on their own: scheduled + handed in
    // = sent + never sent (handed over included).
    let mut books: std::collections::BTreeMap<u64, i64> = Default::default();
    for e in &events {
        let n = e["count"].as_i64().unwrap_or(1);
        let sign = match e["type"].as_str() {
            Some("schedule") => 1,
            Some("handed") => n,
            Some("send") => -1,
            Some("never_sent") => -n,
            _ => 0,
        };
        if let Some(conn) = e["conn"].as_u64().filter(|_| sign != 0) {
            *books.entry(conn).or_default() += sign;
        }
    }
    assert!(books.values().all(|&b| b == 0), "{books:?}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A server slower than the offer: the backlog handed from connection to
/// connection grows until a replacement's calls all reach their deadline.
/// Such a connection served (the server held its calls to the deadline),
/// so the schedule goes on and ends at --duration, the expired calls
/// DEADLINE_EXCEEDED (exit 4). It failed the run (exit 1, "its schedule
/// stopped before --duration") as if the server had closed it at once.
#[test]
fn a_replacement_whose_calls_all_reach_their_deadline_goes_on() {
    let out = support::temp_dir("unary-expired");
    let run = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["run", "--rpc", "unary", "--streams", "2", "--rate", "100"])
        .args(["--service-time", "30ms", "--max-connection-age", "300ms"])
        .args([
            "--duration",
            "3s",
            "--max-pending",
            "1000",
            "--deadline",
            "400ms",
        ])
        .args(["--no-pcap", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert_eq!(run.status.code(), Some(4), "{stdout}{stderr}");
    assert!(!stderr.contains("stopped before --duration"), "{stderr}");
    let s = support::read_summary(&out);
    assert_eq!(
        (s.scheduled, s.sent, s.never_sent),
        (300, 300, 0),
        "{stdout}"
    );
    assert!(s.handed_over > 0, "{stdout}");
    assert!(
        s.rpc_status
            .get("DEADLINE_EXCEEDED")
            .is_some_and(|&n| n > 0),
        "{stdout}"
    );
    assert!(stdout.contains("all invariants hold"), "{stdout}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// A server killed mid-run: its connection's replacement is refused, and
/// the run says that the schedule stopped early and fails (exit 1) at
/// once; it stopped offering silently and exited 0 when no call was in
/// flight at the loss.
#[test]
fn a_server_killed_mid_run_fails_the_run_saying_so() {
    let root = support::temp_dir("unary-lost");
    let (mut serve, addr) = serve(&["--for", "20s"], &root.join("server"));
    let client = unary_client(&addr, "--rate 20 --duration 10s", &root.join("client"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    serve.kill().unwrap();
    let _ = serve.wait();
    let began = std::time::Instant::now();
    let client = client.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert_eq!(client.status.code(), Some(1), "{stderr}");
    assert!(began.elapsed().as_secs() < 5, "{stderr}");
    assert!(
        stderr.contains("connection 1: ")
            && stderr.contains("its schedule stopped before --duration"),
        "{stderr}"
    );
    let s = support::read_summary(&root.join("client"));
    assert_eq!(s.scheduled, s.sent + s.never_sent, "{stderr}");
    assert!(s.sent >= 10 && s.scheduled < 100, "{stderr}");
    // The message due when the replacement tried to connect was offered to
    // no connection: it is the lost one's, scheduled after its close and
    // never sent (it was left unrecorded, missing from `scheduled`).
    let trace = std::fs::read_to_string(root.join("client/trace.jsonl")).unwrap();
    let events: Vec<serde_json::Value> = trace
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let closed = events
        .iter()
        .find(|e| e["type"] == "conn_close")
        .and_then(|e| e["t"].as_u64())
        .unwrap();
    let last = events.iter().rfind(|e| e["type"] == "schedule").unwrap();
    assert!(last["t"].as_u64().unwrap() > closed, "{last}");
    let ended = events.iter().any(|e| {
        e["type"] == "never_sent"
            && e["reason"] == "stream_error"
            && e["seq"].as_u64() <= last["seq"].as_u64()
            && e["seq"].as_u64().unwrap() + e["count"].as_u64().unwrap_or(1)
                > last["seq"].as_u64().unwrap()
    });
    assert!(ended, "{last}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// A unary client alone whose calls all wait on a slow handler (2.5 s,
/// above the 2 s --stall-timeout) is not stalled: its calls have nothing
/// left to send, they wait on the server, not on credit. (The client's
/// stall watcher ended such a run, `no_stall` failed, exit 3.)
#[test]
fn calls_waiting_on_a_slow_handler_are_not_a_stall() {
    let root = support::temp_dir("unary-slow");
    let (mut serve, addr) = serve(
        &["--for", "6s", "--service-time", "2500ms"],
        &root.join("server"),
    );
    let client = unary_client(
        &addr,
        "--streams 2 --rate 2 --duration 2s",
        &root.join("client"),
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&client.stdout);
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert_eq!(client.status.code(), Some(0), "{stdout}{stderr}");
    assert!(!stderr.contains("stalled"), "{stderr}");
    let s = support::read_summary(&root.join("client"));
    assert_ne!(s.checks["no_stall"].ok, Some(false), "{stdout}");
    assert_eq!(s.rpc_status.get("OK"), Some(&s.sent), "{stdout}");
    assert!(s.call_ms.p50 >= 2500.0, "{stdout}");
    let _ = serve.wait();
    std::fs::remove_dir_all(&root).unwrap();
}

/// `run --rpc unary` refuses the flags that name a stream (each stream is
/// one call of one message), exit 2 before anything is written. (They ran,
/// touching one call of the run.)
#[test]
fn flags_that_name_a_stream_are_refused() {
    let dir = support::temp_dir("unary-refused");
    for flag in [
        &["--stall-stream", "1"][..],
        &["--drop-stream", "3"],
        &["--release", "complete,1=frame"],
        &["--stream-rates", "10"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args(["run", "--rpc", "unary"])
            .args(flag)
            .arg("--out")
            .arg(dir.join("run"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag:?}: {stderr}");
        assert!(stderr.contains("--rpc ingest"), "{flag:?}: {stderr}");
        assert!(!dir.join("run").exists(), "{flag:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// More lanes than the server's SETTINGS_MAX_CONCURRENT_STREAMS: the calls
/// past its limit wait in the backlog, not opened in h2 (which held them
/// pending open, their wait counted in the call's time: four lanes on a
/// server allowing one stream made a 30 ms handler's calls take ≈ 120 ms),
/// and the client says so once.
#[test]
fn calls_past_the_servers_stream_limit_wait_in_the_backlog() {
    let dir = support::temp_dir("unary-limit");
    let out = dir.join("run");
    let o = run_unary(
        &out,
        "--streams 4 --max-concurrent-streams 1 --service-time 30ms --duration 1500ms",
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let said = "the server allows 1 stream at a time on a connection";
    assert_eq!(stderr.matches(said).count(), 1, "{stderr}");
    assert!(
        stderr.contains("--streams asks for 4: 1 call at a time"),
        "{stderr}"
    );
    let s = support::read_summary(&out);
    for (name, c) in &s.checks {
        assert_ne!(c.ok, Some(false), "{name}: {}", c.detail);
    }
    assert_eq!(s.rpc_status.get("OK"), Some(&s.sent), "{stdout}");
    assert!(s.sent > 10, "{stdout}");
    // A call's time is its handler's and a round trip, not its turn's:
    // the bug made every call ≈ 120 ms, so the median tells it, where the
    // 99th percentile of a loaded machine reached 77 ms (quiet: 36 ms).
    assert!(s.call_ms.p50 < 60.0, "{stdout}");
    // Only the first call waits in h2, for the server's SETTINGS (three
    // lanes waiting there made seconds of it).
    assert!(s.client_not_open_blocked_s < 0.1, "{stdout}");
    // Never two calls at once: each starts after the one before ended.
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let mut calls: Vec<(u64, i32)> = trace
        .lines()
        .filter(|l| l.starts_with("{\"t\""))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["ep"] == "client" && e["stream"] != 0)
        .filter_map(|e| {
            let t = e["t"].as_u64().unwrap();
            match e["type"].as_str() {
                Some("rpc_start") => Some((t, 1)),
                Some("rpc_end") => Some((t, -1)),
                _ => None,
            }
        })
        .collect();
    calls.sort_unstable();
    let most = calls
        .iter()
        .scan(0, |open, &(_, d)| {
            *open += d;
            Some(*open)
        })
        .max();
    assert_eq!(most, Some(1), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A backlog of one message beside idle calls: a message an idle call
/// takes at once never waits, so it does not fill the backlog. (The
/// schedule counted it there: with two messages due before a call woke, it
/// refused ≈ 10 % of 1,000 calls a second with 16 calls open to take them.)
///
/// Judged on each refusal from the trace, not on how many there were: a
/// loaded machine refuses hundreds legitimately (16 debug-build calls in
/// turn do not keep up with 1,000 a second beside other jobs: CI refused
/// 139 with 16 KiB messages, a loaded run here 116 with 1 KiB ones), while
/// the bug refused with calls idle.
#[test]
fn idle_calls_are_room_beyond_the_backlog() {
    let dir = support::temp_dir("unary-idle");
    let out = dir.join("run");
    let o = run_unary(
        &out,
        "--streams 16 --max-pending 1 --rate 1000 --service-time 0 --duration 2s \
         --payload 1KiB",
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let s = support::read_summary(&out);
    assert_eq!(s.scheduled, 2000, "{stdout}");
    assert_eq!(s.checks["accounting"].ok, Some(true), "{stdout}");
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let judged = in_hand_at_refusals(&trace);
    let backlog = s.never_sent_by_reason.get("backlog").copied();
    assert_eq!(
        Some(judged.len() as u64).filter(|n| *n > 0),
        backlog,
        "{stdout}"
    );
    // A refusal needs the backlog's one message waiting beside all 16
    // calls in flight, and the refused one: 18 in hand. A run's first
    // refusal is stamped just after it was decided, so a preemption there
    // can count a call or two ended after it: 16 allows for that. The bug
    // refused with as few as 2 (2 to 7 seen).
    //
    // Left unjudged only those of the first call's round trip, not a
    // run's worth (as if two calls were never open at once).
    let unjudged = judged.iter().filter(|j| j.is_none()).count();
    assert!(unjudged <= 20, "{unjudged} refusals unjudged\n{stdout}");
    for (seq, in_hand) in judged.into_iter().flatten() {
        assert!(
            in_hand >= 16,
            "seq {seq} refused with {in_hand} in hand\n{stdout}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// For each backlog refusal of a one-connection unary run, the messages
/// in the client's hands when it was decided: scheduled up to and
/// including it, less those refused before it and the calls ended by then.
/// A refusal is decided at its run's `t` or at its own due time (its
/// `schedule` event's `t`), whichever is later. `None` for one decided
/// before two calls were first open at once: until a lane has seen the
/// server's SETTINGS the lanes allow one call, and two open prove one had.
fn in_hand_at_refusals(trace: &str) -> Vec<Option<(u64, u64)>> {
    let (mut due, mut refused) = (BTreeMap::new(), BTreeMap::new());
    let (mut ends, mut calls) = (vec![], vec![]);
    for line in trace.lines().filter(|l| l.starts_with("{\"t\"")) {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        if e["ep"] != "client" {
            continue;
        }
        let t = e["t"].as_u64().unwrap();
        match e["type"].as_str() {
            Some("schedule") => {
                due.insert(e["seq"].as_u64().unwrap(), t);
            }
            Some("never_sent") if e["reason"] == "backlog" => {
                let first = e["seq"].as_u64().unwrap();
                let n = e["count"].as_u64().unwrap_or(1);
                refused.extend((first..first + n).map(|seq| (seq, t)));
            }
            Some("rpc_start") if e["stream"] != 0 => calls.push((t, 1)),
            Some("rpc_end") if e["stream"] != 0 => {
                ends.push(t);
                calls.push((t, -1));
            }
            _ => {}
        }
    }
    ends.sort_unstable();
    // Ends first at a tie: a call that ended as another began is not two.
    calls.sort_unstable();
    let mut open = 0;
    let two_open = calls.iter().find_map(|&(t, d)| {
        open += d;
        (open >= 2).then_some(t)
    });
    refused
        .iter()
        .enumerate()
        .map(|(before, (&seq, &run_t))| {
            let decided = due[&seq].max(run_t);
            let ended = ends.partition_point(|&t| t <= decided) as u64;
            two_open
                .is_some_and(|t| t <= decided)
                .then(|| (seq, (seq + 1).saturating_sub(before as u64 + ended)))
        })
        .collect()
}

/// A server that allows no stream at all: the first call waits in h2 for
/// a stream that never comes, a stall named `not_open`, exit 3, its text
/// without an empty part (it read "messages pending; ; no open stream").
#[test]
fn a_server_allowing_no_stream_is_a_stall_said_plainly() {
    let dir = support::temp_dir("unary-no-stream");
    let out = dir.join("run");
    let o = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["run", "--rpc", "unary", "--max-concurrent-streams", "0"])
        .args([
            "--duration",
            "1s",
            "--stall-timeout",
            "1s",
            "--no-pcap",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{stdout}");
    let s = support::read_summary(&out);
    assert_eq!(s.stall_cause.as_deref(), Some("not_open"), "{stdout}");
    let stall = s.stall.unwrap_or_default();
    assert!(stall.contains("no open stream"), "{stall}");
    assert!(!stall.contains("; ;"), "{stall}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Before the server's SETTINGS come (30 ms away) one call may go, so
/// the backlog holds --max-pending beyond that one only: 16 lanes counted
/// idle took 17 messages that then waited for the server's two streams,
/// one of them 658 ms (response p99 740 ms against calls p99 92 ms).
#[test]
fn before_the_servers_settings_one_call_is_room_beyond_the_backlog() {
    let dir = support::temp_dir("unary-settings");
    let out = dir.join("run");
    let o = run_unary(
        &out,
        "--link-delay 30ms --streams 16 --max-concurrent-streams 2 --max-pending 1 \
         --rate 2000 --service-time 20ms --payload 100 --duration 1s",
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let s = support::read_summary(&out);
    assert_eq!(s.checks["accounting"].ok, Some(true), "{stdout}");
    assert!(s.call_ms.count > 10, "{stdout}");
    // A message waits for one call at most (the backlog's one slot, both
    // streams busy), then its own.
    assert!(s.response_ms.p99 < 3.0 * s.call_ms.p99, "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}
