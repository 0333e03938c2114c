//! `serve` and `client` as separate processes on one host: each writes its
//! own run directory, and `merge` joins them on the shared clock so the
//! two-sided checks apply.

mod support;

use std::process::{Command, Stdio};

/// `h2probe client` against `addr` for 1 s at 200 messages/s, into `out`;
/// asserts it succeeded.
fn client_for_1s(addr: &str, out: &std::path::Path) -> std::process::Output {
    client_at(addr, "200", out)
}

/// `h2probe client` against `addr` for 1 s at `rate` messages/s, into `out`;
/// asserts it succeeded.
fn client_at(addr: &str, rate: &str, out: &std::path::Path) -> std::process::Output {
    let client = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args([
            "client",
            "--connect",
            addr,
            "--duration",
            "1s",
            "--rate",
            rate,
        ])
        .args(["--quiet", "--no-pcap", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(
        client.status.success(),
        "{}",
        String::from_utf8_lossy(&client.stderr)
    );
    client
}

/// `h2probe merge` of the run directories `dirs` under `root` into
/// `root/out`.
fn merge(root: &std::path::Path, dirs: &[&str], out: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .arg("merge")
        .args(dirs.iter().map(|d| root.join(d)))
        .arg("--out")
        .arg(root.join(out))
        .output()
        .unwrap()
}

/// The stdout of a command that must have succeeded (else its outputs).
fn succeeded(o: &std::process::Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

#[test]
fn serve_and_client_traces_merge_on_the_shared_clock() {
    let root = support::temp_dir("separate");
    let bin = env!("CARGO_BIN_EXE_h2probe");
    let mut serve = Command::new(bin)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--exit-after",
            "1",
            "--quiet",
            "--no-pcap",
        ])
        .args([
            "--release",
            "complete",
            "--queue",
            "bounded:4",
            "--service-time",
            "2ms",
            "--out",
        ])
        .arg(root.join("server"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut serve);
    let client = client_for_1s(&addr, &root.join("client"));
    // What a person reads: the RPC's line says OK and nothing after it (it
    // once ended in a stray space), and no line ends in blanks.
    let stdout = String::from_utf8_lossy(&client.stdout);
    assert!(
        stdout.lines().any(|l| l == "rpc conn 1 stream 1: OK"),
        "{stdout}"
    );
    assert!(
        stdout.lines().all(|l| l.trim_end() == l),
        "a line ends in blanks:\n{stdout:?}"
    );
    assert!(serve.wait().unwrap().success());
    // Each run alone judges its own side's bytes, its tap against its
    // application, and leaves the check to the merge: the wire needs both.
    for (side, holds) in [
        (
            "server",
            "(server only: on 1 stream, DATA into its tap = bytes handed to the application)",
        ),
        (
            "client",
            "(client only: on 1 stream, DATA out of its tap = framed bytes of the messages sent)",
        ),
    ] {
        let c = &support::read_summary(&root.join(side)).checks["bytes"];
        assert!(c.ok.is_none() && c.detail.contains(holds), "{side}: {c:?}");
    }

    let merge = |out: &str| merge(&root, &["server", "client"], out);
    let out = succeeded(&merge("merged"));
    assert!(out.contains("all invariants hold"), "{out}");
    let s = support::read_summary(&root.join("merged"));
    for check in [
        "accounting",
        "bytes",
        "credit",
        "windows_agree",
        "no_data_beyond_credit",
    ] {
        assert_eq!(
            s.checks[check].ok,
            Some(true),
            "{check}: {}",
            s.checks[check].detail
        );
    }
    assert!(s.completed >= 190, "{}", s.completed);
    assert!(s.max_owned_bytes <= 65_535);

    // One input damaged (a client DATA line unreadable): the merged trace
    // says events are missing, so its checks cannot be judged, instead of
    // failing bytes on the gap (its footer counted only the lines merged).
    let trace = root.join("client").join("trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let data = lines
        .iter()
        .position(|l| l.contains("\"dir\":\"out\"") && l.contains("\"frame\":\"DATA\""))
        .unwrap();
    lines[data] = "{\"t\":garbage";
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let merged = merge("merged-damaged");
    let err = String::from_utf8_lossy(&merged.stderr);
    assert_eq!(merged.status.code(), Some(0), "{err}");
    assert!(err.contains("the merged trace is missing events"), "{err}");
    let s = support::read_summary(&root.join("merged-damaged"));
    assert_eq!(s.footer_events, Some(s.event_lines + 1), "{err}");
    for (name, c) in &s.checks {
        if name != "no_dropped_events" {
            assert_eq!(c.ok, None, "{name}: {}", c.detail);
        }
    }
}

/// Context switches of `pid`'s thread named `name` (voluntary and not).
fn thread_switches(pid: u32, name: &str) -> u64 {
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let status = std::fs::read_to_string(dir.join("status")).unwrap();
            return status
                .lines()
                .filter(|l| l.contains("ctxt_switches"))
                .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
                .sum();
        }
    }
    panic!("no thread {name} in process {pid}");
}

/// A server left idle keeps its trace writer mostly asleep (it woke every
/// 2 ms, 500 times a second), yet still wakes to flush and notice a full
/// disk.
#[test]
fn an_idle_servers_trace_writer_sleeps() {
    let dir = support::temp_dir("idle-writer");
    let mut server = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["serve", "--listen", "127.0.0.1:0", "--quiet", "--no-pcap"])
        .arg("--out")
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::listening_addr(&mut server);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let before = thread_switches(server.id(), "h2probe-trace");
    std::thread::sleep(std::time::Duration::from_secs(2));
    let woke = thread_switches(server.id(), "h2probe-trace") - before;
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        (5..100).contains(&woke),
        "the idle writer switched {woke} times in 2 s (64 ms naps: about 31)"
    );
}

/// Server, relay and client as three processes, merged on one clock: the
/// client's and the server's taps sit on two different sockets, paired
/// through the relay's connection pair (it forwards every byte, stream ids
/// and all), so the checks that compare the two ends are judged end to end.
#[test]
fn a_three_way_merge_judges_both_ends_through_the_relay() {
    let root = support::temp_dir("three-way");
    let bin = env!("CARGO_BIN_EXE_h2probe");
    let spawn = |args: &[&str], out: &str| {
        Command::new(bin)
            .args(args)
            .args(["--exit-after", "1", "--quiet", "--no-pcap", "--out"])
            .arg(root.join(out))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Released on completion: the client waits for credit, which both its
    // own trace and the relay's inference record.
    let mut serve = spawn(
        &["serve", "--listen", "127.0.0.1:0", "--release", "complete"],
        "server",
    );
    let upstream = support::listening_addr(&mut serve);
    let mut relay = spawn(
        &["relay", "--listen", "127.0.0.1:0", "--upstream", &upstream],
        "relay",
    );
    let via = support::announced_addr(&mut relay, 2);
    client_for_1s(&via, &root.join("client"));
    assert!(relay.wait().unwrap().success());
    assert!(serve.wait().unwrap().success());
    let out = succeeded(&merge(&root, &["server", "relay", "client"], "merged"));
    let s = support::read_summary(&root.join("merged"));
    assert!(s.relay.is_some(), "the relay's own analysis stays");
    // The client's own record of its waits, under the relay's inference.
    let waits = out
        .split("\nwaits     ")
        .nth(1)
        .unwrap_or_else(|| panic!("no waits line:\n{out}"));
    assert!(
        waits.contains("the client's own record (its trace): window-blocked"),
        "{out}"
    );
    assert!(
        s.window_blocked_ms.count > 0,
        "the client waited for credit"
    );
    // No frame crosses from one tap to the other: the headline says why
    // (folded at 80 columns, so read without the line breaks).
    let unfolded = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        unfolded.contains("frame c2s latency p50 n/a (the taps are on two sockets, the relay's)"),
        "{out}"
    );
    for (check, says) in [
        ("bytes", "1 stream: client tap out = server tap in"),
        ("windows_agree", "1 connection: final windows equal"),
    ] {
        let c = &s.checks[check];
        assert_eq!(c.ok, Some(true), "{check}: {}", c.detail);
        assert!(c.detail.starts_with(says), "{check}: {}", c.detail);
    }
}

/// A serve killed before its trace's footer, merged with its client: the
/// merged trace has no footer either, so its analysis says what the serve's
/// own says (events may be missing; the checks cannot judge), and meta.json
/// says why, and whose drop counts are unknown. (It got a footer: `complete`, 0 dropped, and `accounting`
/// failed on the messages the killed server never recorded.)
#[test]
fn a_cut_input_leaves_the_merged_run_cut() {
    let root = support::temp_dir("separate-cut");
    let bin = env!("CARGO_BIN_EXE_h2probe");
    let mut serve = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--quiet", "--no-pcap"])
        .arg("--out")
        .arg(root.join("server"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut serve);
    client_for_1s(&addr, &root.join("client"));
    serve.kill().unwrap(); // SIGKILL: no footer, no meta.json
    serve.wait().unwrap();
    let merged = merge(&root, &["server", "client"], "merged");
    let err = String::from_utf8_lossy(&merged.stderr);
    let out = root.join("merged");
    assert!(err.contains("ended without its footer"), "{err}");
    // Said in words, not as the reader's type ("(NoFooter)").
    assert!(
        err.contains("(after a whole line)") || err.contains("cut short)"),
        "{err}"
    );
    let trace = std::fs::read_to_string(out.join("trace.jsonl")).unwrap();
    let last = trace.lines().last().unwrap();
    assert!(last.starts_with("{\"t\":"), "no footer: {last}");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("meta.json")).unwrap()).unwrap();
    assert!(
        meta["status"].as_str().unwrap().starts_with("error: "),
        "{}",
        meta["status"]
    );
    // Its drop count is a lower bound, and meta.json says whose is missing.
    let unknown: Vec<&str> = meta["drops_unknown_in"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(unknown.len(), 1, "{meta}");
    assert!(unknown[0].ends_with("server/trace.jsonl"), "{unknown:?}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["trace_ending"], "no_footer");
    for check in ["accounting", "bytes", "no_dropped_events"] {
        assert!(
            summary["checks"][check]["ok"].is_null(),
            "{check}: {summary}"
        );
    }
}

/// One serve and two clients at different rates, merged: meta.json keeps
/// both clients' configurations and `compare` names the merge by them. (It
/// kept the first client's only: the merge read as a run of one client at
/// its rate, and compare pooled it with such runs.)
#[test]
fn a_merge_of_two_clients_keeps_both_configurations() {
    let root = support::temp_dir("separate-two");
    let bin = env!("CARGO_BIN_EXE_h2probe");
    let mut serve = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--exit-after", "2"])
        .args(["--quiet", "--no-pcap", "--out"])
        .arg(root.join("server"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut serve);
    client_at(&addr, "200", &root.join("fast"));
    client_at(&addr, "100", &root.join("slow"));
    assert!(serve.wait().unwrap().success());
    let out = succeeded(&merge(&root, &["server", "fast", "slow"], "merged"));
    assert!(out.contains("all invariants hold"), "{out}");
    assert!(support::read_summary(&root.join("merged"))
        .unpaired
        .is_none());

    // A client left out of the merge, as a foreign client's run would be:
    // its server connection pairs with none, and its messages stay out of
    // the accounting across sides, judged on the other client's. (It
    // failed: "more messages decoded than sent", exit 3.)
    let out = succeeded(&merge(&root, &["server", "fast"], "without-slow"));
    assert!(out.contains("all invariants hold"), "{out}");
    assert!(
        out.contains("unpaired  1 server connection no client connection pairs with"),
        "{out}"
    );
    let s = support::read_summary(&root.join("without-slow"));
    let slow = support::read_summary(&root.join("slow"));
    let u = s.unpaired.as_ref().expect("the slow client's connection");
    assert_eq!((u.server_connections, u.decoded), (1, slow.sent), "{u:?}");
    assert_eq!(s.decoded, s.sent + slow.sent, "{s:?}");
    assert_eq!(s.lost_in_flight, Some(0));
    let c = &s.checks["accounting"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
    assert!(c.detail.contains("left out across sides"), "{}", c.detail);
    // That merge merged in turn with the client it left out: each run's
    // connections keep ids of their own. (The client took those of the
    // merge's own client, and four checks failed.)
    let out = succeeded(&merge(&root, &["without-slow", "slow"], "nested"));
    assert!(out.contains("all invariants hold"), "{out}");
    let nested = support::read_summary(&root.join("nested"));
    assert!(nested.unpaired.is_none(), "{out}");
    assert_eq!(nested.sent, s.sent + slow.sent, "{out}");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("merged/meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["config"]["client"]["rate"], 200.0, "{meta}");
    assert_eq!(meta["config"]["more_clients"][0]["rate"], 100.0, "{meta}");
    let compared = root.join("compared");
    let mut args = vec![std::ffi::OsString::from("compare")];
    args.extend(["merged", "fast"].map(|d| root.join(d).into_os_string()));
    args.extend(["--quiet".into(), "--out".into(), compared.clone().into()]);
    support::h2probe_ok(args);
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(compared.join("comparison.json")).unwrap())
            .unwrap();
    let configs: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["config"].as_str().unwrap())
        .collect();
    assert_eq!(configs.len(), 2, "{configs:?}");
    assert_eq!(
        configs
            .iter()
            .filter(|c| c.contains("clients=2") && c.contains("client2.rate=100"))
            .count(),
        1,
        "{configs:?}"
    );
}

/// Two `Exchange` clients as separate processes each number their
/// originals from 0: merged with their server, the originals are told
/// apart by process and every check holds (`originals` failed: "original
/// 0 was scheduled twice", exit 3). Each run alone gives the other side's
/// Part 3 figures as n/a, not zeros.
#[test]
fn two_exchange_clients_merge_with_their_originals_told_apart() {
    let root = support::temp_dir("separate-exchange");
    let bin = env!("CARGO_BIN_EXE_h2probe");
    let mut serve = Command::new(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--exit-after", "2"])
        .args(["--admission", "4", "--when-full", "reject"])
        .args(["--service-time", "10ms", "--no-pcap", "--out"])
        .arg(root.join("server"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut serve);
    let mut clients = vec![];
    for name in ["one", "two"] {
        let out = Command::new(bin)
            .args(["client", "--connect", &addr, "--rpc", "exchange"])
            .args(["--rate", "100", "--duration", "1s", "--no-pcap", "--out"])
            .arg(root.join(name))
            .output()
            .unwrap();
        clients.push(succeeded(&out));
    }
    let served = serve.wait_with_output().unwrap();
    assert!(served.status.success());
    let served = String::from_utf8_lossy(&served.stdout).into_owned();
    assert!(
        served.contains(
            "useful    n/a: the originals and their ends are the client's, and the trace has"
        ) && served.contains("attempts  N n/a  F n/a  A n/a  S n/a  R 200  slots ≤ ")
            && served.contains("retry collision n/a (retries are the client's)"),
        "{served}"
    );
    assert!(
        clients[0].contains("admitted payload n/a"),
        "{}",
        clients[0]
    );
    let page = std::fs::read_to_string(root.join("server/report.html")).unwrap();
    assert!(
        page.contains(r#"<div class="k">useful (on time)</div><div class="v">n/a</div>"#),
        "the report's useful card of a server-only trace"
    );
    let server = support::read_summary(&root.join("server"));
    let c = server.overload.as_ref().unwrap().collision.clone();
    assert!(c.from_s < 60.0, "offsets from the clock's zero: {c:?}");

    let out = succeeded(&merge(&root, &["server", "one", "two"], "merged"));
    assert!(out.contains("all invariants hold"), "{out}");
    let s = support::read_summary(&root.join("merged"));
    let o = s.overload.as_ref().unwrap();
    let each: Vec<u64> = ["one", "two"]
        .map(|d| {
            support::read_summary(&root.join(d))
                .overload
                .unwrap()
                .originals
        })
        .to_vec();
    assert_eq!(o.originals, each[0] + each[1], "{o:?}");
    assert_eq!(o.decoded, 200, "{o:?}");
    let c = &s.checks["originals"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
}
