//! The command line as a user runs it: help text (snapshotted, so changes are
//! deliberate), `decode`, `analyze` on damaged traces, readable errors.

mod support;

use std::path::PathBuf;
use std::process::Command;

fn h2probe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_h2probe"))
}

/// Compares `actual` with `tests/snapshots/NAME`; `H2PROBE_BLESS=1` rewrites it.
fn snapshot(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("H2PROBE_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{name} changed; review the diff and rerun with H2PROBE_BLESS=1 to accept:\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

#[test]
fn help_texts_are_stable() {
    for cmd in [
        "run", "serve", "client", "relay", "analyze", "decode", "report",
    ] {
        let out = h2probe()
            .args([cmd, "--help"])
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert!(out.status.success());
        snapshot(
            &format!("help-{cmd}.txt"),
            &String::from_utf8(out.stdout).unwrap(),
        );
    }
}

/// `h2probe --help` is an overview: the commands, and where `run`'s flags
/// (which `h2probe` alone takes) are listed. It listed them all, 470 lines.
#[test]
fn the_top_level_help_is_an_overview() {
    for flag in ["-h", "--help"] {
        let out = h2probe().arg(flag).env("COLUMNS", "80").output().unwrap();
        assert!(out.status.success());
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(help.lines().count() < 60, "{flag}: {help}");
        for said in [
            "  run ",
            "  analyze ",
            "  decode ",
            "Every option of `h2probe run` (listed by `h2probe run --help`)",
            "-V, --version",
            "Exit codes",
        ] {
            assert!(help.contains(said), "{flag}: {said}: {help}");
        }
        assert!(!help.contains("--link-rate"), "{flag}: {help}");
    }
    let run = h2probe().args(["run", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&run.stdout).contains("--link-rate"));
}

/// Help piped to a pager or a file (no terminal, no COLUMNS) wraps at 80
/// columns; it wrapped at 100.
#[test]
fn help_without_a_terminal_fits_80_columns() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["serve", "--help"],
        &["client", "--help"],
        &["analyze", "--help"],
        &["compare", "--help"],
    ] {
        let out = h2probe().args(args).env_remove("COLUMNS").output().unwrap();
        assert!(out.status.success(), "{args:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(help.lines().count() > 5, "{args:?}: {help}");
        for l in help.lines() {
            assert!(
                l.chars().count() <= 80,
                "{args:?}: {} columns: {l}",
                l.chars().count()
            );
        }
    }
}

#[test]
fn bad_values_are_refused_with_a_clear_message() {
    let out = h2probe()
        .args(["run", "--queue", "bounded:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("K must be a whole number of at least 1"),
        "{err}"
    );
    let out = h2probe()
        .args(["run", "--payload", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a size"));
    let out = h2probe()
        .args(["run", "--duration", "25h"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--duration is limited to 24h"), "{err}");
    let out = h2probe()
        .args(["run", "--max-frame-size", "1000", "--out", "/nonexistent/x"])
        .output()
        .unwrap();
    // Refused before anything starts, as bad usage.
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("h2probe: --max-frame-size must be between 16384"),
        "{err}"
    );
}

/// Refusals name the flag at fault; faults hyper cannot inject are refused
/// with `--stack hyper`, and Exchange's flags without `--rpc exchange` (each
/// ran as a healthy run, exit 0).
#[test]
fn refusals_name_the_flag_and_the_stack_that_cannot_honour_it() {
    for (args, said) in [
        (
            &["--stream-window", "2GiB"][..],
            "--stream-window must be at most 2147483647 bytes",
        ),
        (
            &["--conn-window", "2GiB"],
            "--conn-window must be at most 2147483647 bytes",
        ),
        // h2 panicked on it (an assertion, exit 1 with a backtrace).
        (
            &["--client-stream-window", "2GiB"],
            "--client-stream-window must be at most 2147483647 bytes",
        ),
        (
            &["--stack", "hyper", "--stall-stream", "1"],
            "--stack hyper serves through hyper",
        ),
        (
            &["--stack", "hyper", "--drop-stream", "1"],
            "--stack hyper serves through hyper",
        ),
        // Exchange's knobs under the default Ingest did nothing, exit 0.
        (
            &["--admission", "1"],
            "--admission applies to --rpc exchange (Part 3) only",
        ),
        (
            &["--retry", "fixed:100", "--max-attempts", "5"],
            "--retry, --max-attempts apply to --rpc exchange (Part 3) only",
        ),
        // Given at its default value, it would do nothing all the same.
        (
            &["--admission", "32"],
            "--admission applies to --rpc exchange (Part 3) only",
        ),
        (
            &["--when-full", "wait", "--max-outstanding", "1"],
            "--when-full, --max-outstanding apply to --rpc exchange (Part 3) only",
        ),
    ] {
        refused(&[&["run"][..], args].concat(), said);
    }
    refused(
        &["client", "--max-attempts", "1"],
        "--max-attempts applies to --rpc exchange (Part 3) only",
    );
    // Under --preset part3 (Exchange), the same flags given are its own.
    let dir = support::temp_dir("preset-given");
    let out = h2probe()
        .args([
            "run",
            "--preset",
            "part3",
            "--admission",
            "32",
            "--duration",
            "300ms",
        ])
        .args([
            "--service-schedule",
            "10ms",
            "--quiet",
            "--no-pcap",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Flags that were accepted and did nothing (each ran, exit 0, or served
/// nothing) are refused, naming why.
#[test]
fn flags_that_would_do_nothing_are_refused() {
    for (args, said) in [
        (
            &["run", "--no-trace", "--capture-payload", "full"][..],
            "'--no-trace' cannot be used with '--capture-payload <MODE>'",
        ),
        (&["run", "--no-trace", "--pcap-gzip"], "'--no-trace' cannot be used with '--pcap-gzip'"),
        (&["serve", "--no-trace", "--trace-buffer", "10"], "'--no-trace' cannot be used with '--trace-buffer <EVENTS>'"),
        (&["run", "--queue", "direct", "--queue-limit", "5"], "--queue-limit caps the unbounded queue; --queue direct has no queue"),
        (&["run", "--queue", "bounded:4", "--queue-limit", "5"], "--queue bounded:4 has its own capacity"),
        (&["run", "--allow-deadlock"], "--allow-deadlock lets a late release point stall, but --release frame releases every stream opened on receipt"),
        // Late only on a stream the client never opens.
        (&["run", "--release", "frame,3=complete", "--allow-deadlock"], "releases every stream opened on receipt"),
        (&["run", "--stack", "hyper", "--allow-deadlock"], "(the only point --stack hyper has)"),
        (&["serve", "--exit-after", "0"], "must be at least 1"),
        (&["relay", "--upstream", "127.0.0.1:1", "--exit-after", "0"], "must be at least 1"),
        (&["serve", "--for", "0s"], "must be longer than 0"),
        (&["relay", "--upstream", "127.0.0.1:1", "--for", "0ms"], "must be longer than 0"),
        (&["relay", "--upstream", "127.0.0.1:1", "--link-side", "server"], "--link-side server chooses the leg --link-delay and --link-rate shape; give one of them"),
        (&["export", "--format", "csv", "--pcap-gzip", "."], "--pcap-gzip compresses the pcaps, but --format csv writes none"),
        (
            &["run", "--rpc", "exchange", "--method", "/h2probe.v1.Probe/Ingest"],
            "the Exchange client's attempts need the Exchange method",
        ),
    ] {
        refused(args, said);
    }
}

/// `h2probe ARGS` is refused as bad usage (exit 2), saying `said`.
fn refused(args: &[&str], said: &str) {
    let out = h2probe().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(said), "{args:?}: {err}");
}

/// Addresses and windows a user gets wrong are refused saying what to write
/// ("invalid socket address syntax", "invalid authority", and compare's
/// --window naming --conn-window, a flag compare does not have).
#[test]
fn refusals_say_what_to_write_instead() {
    for (args, said) in [
        (&["run", "--duration", "0.25"][..], "\"0.25\" needs a time unit, e.g. 0.25s"),
        (
            &["serve", "--listen", "localhost:50051"][..],
            "is not IP:PORT (e.g. 127.0.0.1:50051, or [::1]:50051 for IPv6) or unix:PATH; a host name is not accepted here",
        ),
        (
            &["relay", "--listen", "localhost:50052"],
            "a host name is not accepted here",
        ),
        (
            &["client", "--connect", "::1:50051"],
            "(an IPv6 address goes in brackets: [::1]:50051)",
        ),
        (
            &["client", "--connect", "fe80::1"],
            "(an IPv6 address goes in brackets, with a port: [fe80::1]:PORT)",
        ),
        (
            &["client", "--connect", "http://127.0.0.1:50051"],
            "(HOST:PORT, without a scheme)",
        ),
        (
            &["client", "--retry", "fixed:100"],
            "--retry applies to --rpc exchange (Part 3) only",
        ),
        (
            &["compare", "--window", "8KiB"],
            "--window 8192 sets both windows, and the connection window cannot go below 65535 \
             (h2 can only raise it); for a smaller stream window, give --sweep stream-window=8192",
        ),
    ] {
        refused(args, said);
    }
}

/// `serve` and `relay` on a port another process holds: a clear error that
/// says what to do, exit 1, and no run directory left behind.
#[test]
fn a_taken_port_is_refused_before_anything_is_written() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    for args in [
        vec!["serve", "--listen", &addr],
        vec!["relay", "--listen", &addr, "--upstream", "127.0.0.1:9"],
    ] {
        let dir = support::temp_dir("port-taken");
        let _ = std::fs::remove_dir_all(&dir);
        let out = h2probe()
            .args(&args)
            .arg("--out")
            .arg(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("h2probe: binding {addr}: ")),
            "{err}"
        );
        assert!(
            err.contains("another process listens there. No run directory was written: give --listen another port, or port 0 for a free one"),
            "{err}"
        );
        assert!(!dir.exists(), "{args:?} left {}", dir.display());
    }
}

/// `--quiet` silences progress, not warnings: a run shorter than its
/// service schedule is warned about either way, with an example that fits
/// the run.
#[test]
fn quiet_keeps_warnings() {
    let dir = support::temp_dir("quiet-warning");
    let out = h2probe()
        .args([
            "run",
            "--preset",
            "part3",
            "--duration",
            "1s",
            "--quiet",
            "--no-pcap",
        ])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: --duration 1s ends before the --service-schedule step at 12s")
            && err.contains("e.g. --service-schedule 10ms,333ms:40ms,667ms:10ms"),
        "{err}"
    );
}

/// `analyze` on a path that is not a run directory says what the path is:
/// missing, a file (with the directory to give), or a directory without a
/// trace. And a refusal's suggested flag is one the shell passes whole.
#[test]
fn wrong_paths_and_refusals_say_what_to_do() {
    let dir = support::temp_dir("wrong-path");
    let file = dir.join("trace.jsonl");
    std::fs::write(&file, "").unwrap();
    let missing = dir.join("nope");
    for (path, want) in [
        (
            missing.clone(),
            format!("{}: no such directory", missing.display()),
        ),
        (
            file.clone(),
            format!(
                "{} is a file: give the run directory that holds it ({})",
                file.display(),
                dir.display()
            ),
        ),
        (
            dir.join("sub"),
            format!(
                "{}: no trace.jsonl here; is this a run directory?",
                dir.join("sub").display()
            ),
        ),
    ] {
        if path.ends_with("sub") {
            std::fs::create_dir_all(&path).unwrap();
        }
        let out = h2probe().arg("analyze").arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end(), format!("h2probe: {want}"));
    }
    let out = h2probe()
        .args(["run", "--duration", "200s", "--out"])
        .arg(dir.join("long"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the default --deadline 120s") && err.contains("(e.g. --deadline 260s)"),
        "{err}"
    );
}

/// A client that cannot connect exits 1 with the reason and where its run
/// directory is, which records the failure instead of `complete`.
#[test]
fn a_client_that_cannot_connect_records_the_failure() {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let dir = support::temp_dir("refused");
    let out = h2probe()
        .args(["client", "--connect", &addr, "--duration", "1s", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("connecting to {addr}: Connection refused"))
            && err.contains(&format!(
                "the run directory {} records the failure (give --force to reuse it)",
                dir.display()
            )),
        "{err}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    let status = meta["status"].as_str().unwrap();
    assert!(
        status.starts_with(&format!("error: connecting to {addr}: Connection refused")),
        "{status}"
    );
}

/// A peer that is not HTTP/2 (here: a TLS alert, as a TLS server answers
/// a cleartext client): whether the client's RPC got a stream before the
/// connection failed or not (a race: here 1 to 7 runs in 20 lose it), the
/// trace records the RPC's failure and the client exits 4. It exited 0
/// with "rpcs -" when the RPC never got a stream; the analysis of such an
/// `rpc_end` is tested on its own in analysis/tests/analyzer.rs.
#[test]
fn an_rpc_that_never_got_a_stream_fails_the_client() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for sock in listener.incoming() {
            let Ok(mut sock) = sock else { continue };
            // Written at once: the client may not even have opened its stream.
            let _ = sock.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46]);
            let _ = sock.shutdown(std::net::Shutdown::Write);
            let _ = sock.read_to_end(&mut Vec::new());
        }
    });
    let mut unopened = 0;
    for i in 0..20 {
        let dir = support::temp_dir(&format!("not-h2-{i}"));
        let out = h2probe()
            .args(["client", "--connect", &addr, "--connections", "1"])
            .args(["--duration", "1s", "--no-pcap", "--out"])
            .arg(&dir)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(4), "{stdout}");
        assert!(stdout.contains("rpcs      UNAVAILABLE×1"), "{stdout}");
        let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
        let ends: Vec<serde_json::Value> = trace
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == "rpc_end")
            .collect();
        assert_eq!(ends.len(), 1, "{trace}");
        for end in &ends {
            assert_eq!(end["status"], 14, "{end}");
            if end["stream"] == 0 {
                unopened += 1;
                let message = end["message"].as_str().unwrap();
                assert!(message.starts_with("could not open the stream"), "{end}");
            }
        }
    }
    eprintln!("{unopened} of 20 RPCs never got a stream");
}

#[test]
fn decode_reads_corpus_bytes_and_reports_garbage_with_offsets() {
    let Some(corpus) = support::corpus_dir() else {
        return;
    };
    let decoded = corpus.join("nghttp-upload.c2s.bin");
    let out = support::h2probe_ok([std::ffi::OsStr::new("decode"), decoded.as_os_str()]);
    let text = String::from_utf8(out.stdout).unwrap();
    let reference = std::fs::read_to_string(corpus.join("nghttp-upload.frames.jsonl")).unwrap();
    let want = reference.lines().filter(|l| l.contains("\"c2s\"")).count();
    assert_eq!(text.lines().count(), want);
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "frame");
    assert_eq!(first["frame"], "SETTINGS");
    assert_eq!(first["offset"], 24);
    assert_eq!(
        first["ep"], "client",
        "a preface means the client wrote these bytes"
    );

    let dir = support::temp_dir("decode");
    let bad = dir.join("bad.bin");
    // A valid PING (no SETTINGS first: said), then a WINDOW_UPDATE of
    // length 5, then a cut frame.
    let mut bytes = h2probe::wire::encode::ping(false, [1; 8]);
    bytes.extend(h2probe::wire::encode::raw(8, 0, 1, &[0, 0, 0, 1, 0]));
    bytes.extend(&h2probe::wire::encode::data(1, 0, None, &[0; 100])[..50]);
    std::fs::write(&bad, &bytes).unwrap();
    let out = h2probe().arg("decode").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("byte 17: malformed WINDOW_UPDATE frame: length is not 4"),
        "{err}"
    );
    assert!(
        err.contains("byte 31: connection ended inside a frame (50 of 109 bytes)"),
        "{err}"
    );
    assert!(
        err.contains("byte 0: the server's first frame is PING, not SETTINGS"),
        "{err}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().count(),
        4,
        "one frame and three wire_error events: {text}"
    );

    // Frames that break a rule of RFC 9113 are decoded and the rule named:
    // a WINDOW_UPDATE of 0 and a PING on stream 3, after a sound SETTINGS.
    let broken = dir.join("broken.bin");
    let mut bytes = h2probe::wire::encode::settings(false, &[]);
    bytes.extend(h2probe::wire::encode::window_update(0, 0));
    bytes.extend(h2probe::wire::encode::raw(6, 0, 3, &[0; 8]));
    std::fs::write(&broken, &bytes).unwrap();
    let out = h2probe().arg("decode").arg(&broken).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    for said in [
        "byte 9: rule broken: WINDOW_UPDATE of 0 on the connection (RFC 9113 §6.9: a connection error of type PROTOCOL_ERROR)",
        "byte 22: rule broken: PING frame on a stream other than 0 (RFC 9113 §6.7: a connection error of type PROTOCOL_ERROR; stream 3)",
        "3 frames, 2 errors",
    ] {
        assert!(err.contains(said), "{said}: {err}");
    }
    let kinds: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{} {}",
                v["type"].as_str().unwrap(),
                v["frame"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "frame SETTINGS",
            "wire_error ",
            "frame WINDOW_UPDATE",
            "wire_error ",
            "frame PING"
        ]
    );

    // A client's bytes cut from a connection's middle (no preface): read
    // as the server's unless --from says; then its PUSH_PROMISE is one.
    let middle = dir.join("client-middle.bin");
    std::fs::write(
        &middle,
        h2probe::wire::encode::raw(5, 4, 1, &[0, 0, 0, 2, 0x82]),
    )
    .unwrap();
    let guessed = h2probe().arg("decode").arg(&middle).output().unwrap();
    let err = String::from_utf8_lossy(&guessed.stderr);
    assert!(
        err.contains("the server's first frame is PUSH_PROMISE") && !err.contains("rule broken"),
        "{err}"
    );
    let told = h2probe()
        .args(["decode", "--from", "client"])
        .arg(&middle)
        .output()
        .unwrap();
    assert_eq!(told.status.code(), Some(1));
    let err = String::from_utf8_lossy(&told.stderr);
    assert!(
        err.contains("byte 0: rule broken: PUSH_PROMISE frame from a client (RFC 9113 §8.4")
            && err.contains("1 frame, 1 error")
            && !err.contains("first frame"),
        "{err}"
    );
    let first: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&told.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(first["ep"], "client");
}

#[test]
fn decode_says_not_http2_at_byte_0_for_what_is_clearly_something_else() {
    let dir = support::temp_dir("not-h2");
    let tls_hello = [
        0x16, 0x03, 0x01, 0x00, 0xf8, 0x01, 0x00, 0x00, 0xf4, 0x03, 0x03,
    ];
    let mut pcapng = vec![
        0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a,
    ];
    pcapng.extend([1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    let cases: [(&str, Vec<u8>, &str); 9] = [
        (
            "get",
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
            "HTTP/1.x text",
        ),
        (
            "post",
            b"POST /x HTTP/1.0\r\n\r\n".to_vec(),
            "HTTP/1.x text",
        ),
        ("status", b"HTTP/1.1 200 OK\r\n".to_vec(), "HTTP/1.x text"),
        // pcap, microsecond and nanosecond timestamps, both byte orders.
        (
            "pcap-le",
            vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0],
            "a pcap capture file",
        ),
        (
            "pcap-be",
            vec![0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4],
            "a pcap capture file",
        ),
        (
            "pcap-ns",
            vec![0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0],
            "a pcap capture file",
        ),
        ("pcapng", pcapng, "a pcapng capture file"),
        ("tls", tls_hello.to_vec(), "TLS records"),
        (
            "elf",
            b"\x7fELF\x02\x01\x01\x00".to_vec(),
            "an ELF executable",
        ),
    ];
    for (name, bytes, what) in cases {
        let path = dir.join(format!("{name}.bin"));
        std::fs::write(&path, &bytes).unwrap();
        let out = h2probe().arg("decode").arg(&path).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{name}: no frame events before the error"
        );
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
        assert!(
            err.starts_with(&format!(
                "h2probe: {}: not HTTP/2 (byte 0): this looks like {what}",
                path.display()
            )),
            "{name}: {err}"
        );
    }
    // The same on standard input, arriving a few bytes at a time.
    let mut child = h2probe()
        .args(["decode", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for part in [&[0xa1u8, 0xb2][..], &[0xc3], &[0xd4, 0, 2, 0, 4]] {
            stdin.write_all(part).unwrap();
            stdin.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr)
        .starts_with("h2probe: -: not HTTP/2 (byte 0): this looks like a pcap capture file"));

    // HTTP/2 still decodes: the server's first SETTINGS, and a client preface.
    for (name, bytes) in [
        (
            "server",
            h2probe::wire::encode::settings(false, &[(4, 65_535)]),
        ),
        ("client", {
            let mut b = h2probe::wire::encode::preface();
            b.extend(h2probe::wire::encode::settings(false, &[]));
            b
        }),
    ] {
        let path = dir.join(format!("{name}.bin"));
        std::fs::write(&path, &bytes).unwrap();
        let out = support::h2probe_ok([std::ffi::OsStr::new("decode"), path.as_os_str()]);
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text.lines().count(), 1, "{name}: {text}");
        assert!(text.contains("\"frame\":\"SETTINGS\""), "{name}: {text}");
    }
}

/// A pipe whose reading end is already closed: the first write to the other
/// end fails with EPIPE (Rust ignores SIGPIPE), every time, without a race.
fn closed_pipe() -> std::process::Stdio {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors were just created and are owned here only.
    let (read, write) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    };
    drop(read);
    std::process::Stdio::from(write)
}

/// Exit 0 and no panic message: the documented end of a closed stdout.
fn assert_quiet_end(what: &str, out: std::process::Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(!err.contains("Broken pipe"), "{what}: {err}");
    assert_eq!(out.status.code(), Some(0), "{what}: {err}");
}

/// The committed reference run frame-direct split into its two sides, as
/// `client` and `serve` would have written them (traces and metas), in
/// fresh directories named after `name`: two runs that merge into it.
fn reference_copies(name: &str) -> Vec<PathBuf> {
    use h2probe_analysis::schema::{Endpoint, Event, Footer};
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/reference/frame-direct");
    let mut r = h2probe_analysis::reader::TraceReader::open(&src.join("trace.jsonl.gz")).unwrap();
    let header = r.header().clone();
    let events: Vec<Event> = r.by_ref().map(|e| e.unwrap()).collect();
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("meta.json")).unwrap()).unwrap();
    [("client", Endpoint::Client), ("serve", Endpoint::Server)]
        .into_iter()
        .enumerate()
        .map(|(i, (command, ep))| {
            let dir = support::temp_dir(&format!("{name}-{i}"));
            // Two processes never anchor their traces at one nanosecond.
            let mut h = header.clone();
            h.origin_mono_ns += i as u64;
            let mut text = h.to_line() + "\n";
            let mut n = 0;
            for e in events.iter().filter(|e| e.ep == ep) {
                text += &serde_json::to_string(e).unwrap();
                text.push('\n');
                n += 1;
            }
            text += &Footer {
                events: n,
                ..Footer::default()
            }
            .to_line();
            text.push('\n');
            std::fs::write(dir.join("trace.jsonl"), text).unwrap();
            let mut m = meta.clone();
            m["command"] = command.into();
            m["clock"]["origin_mono_ns"] = h.origin_mono_ns.into();
            std::fs::write(dir.join("meta.json"), m.to_string()).unwrap();
            dir
        })
        .collect()
}

/// `merge` and `compare` refuse a non-empty --out unless --force (they
/// wrote over what was there, a run included), and `merge` refuses to
/// write over one of its inputs even with --force.
#[test]
fn merge_and_compare_refuse_a_non_empty_out_without_force() {
    let runs = reference_copies("refuse-out-run");
    for what in ["merge", "compare"] {
        let out = support::temp_dir(&format!("refuse-out-{what}"));
        std::fs::write(out.join("notes.txt"), "mine").unwrap();
        let args = |force: bool| {
            let mut a: Vec<std::ffi::OsString> = vec![what.into()];
            a.extend(runs.iter().map(|r| r.clone().into_os_string()));
            a.push("--out".into());
            a.push(out.clone().into_os_string());
            if force {
                a.push("--force".into());
            }
            a
        };
        let refused = h2probe().args(args(false)).output().unwrap();
        let err = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{what}: {err}");
        assert!(
            err.contains("is not empty") && err.contains("--force"),
            "{what}: {err}"
        );
        if what == "merge" {
            assert!(err.contains("(1 entry, e.g. notes.txt)"), "{err}");
        }
        // A file where the directory should be: refused as such, even
        // with --force, and left alone.
        let file = out.join("notes.txt");
        for force in [false, true] {
            let mut a = args(force);
            let at = a.iter().position(|x| x == "--out").unwrap() + 1;
            a[at] = file.clone().into_os_string();
            let refused = h2probe().args(a).output().unwrap();
            let err = String::from_utf8_lossy(&refused.stderr);
            assert_eq!(refused.status.code(), Some(2), "{what}: {err}");
            assert!(err.contains("is a file, not a directory"), "{what}: {err}");
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
        let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
        assert_eq!(left.len(), 1, "{what} wrote into the refused --out");
        let forced = h2probe().args(args(true)).output().unwrap();
        let err = String::from_utf8_lossy(&forced.stderr);
        assert!(
            matches!(forced.status.code(), Some(0 | 3)),
            "{what} --force: {err}"
        );
        let product = if what == "merge" {
            "trace.jsonl"
        } else {
            "comparison.md"
        };
        assert!(
            out.join(product).exists(),
            "{what} --force wrote no {product}"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("notes.txt")).unwrap(),
            "mine",
            "{what} --force removed a file that is not its own"
        );
    }
    let onto_input = h2probe()
        .arg("merge")
        .args(&runs)
        .arg("--out")
        .arg(&runs[0])
        .arg("--force")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&onto_input.stderr);
    assert_eq!(onto_input.status.code(), Some(2), "{err}");
    assert!(err.contains("is one of the runs to merge"), "{err}");
    assert!(runs[0].join("trace.jsonl").exists() && runs[0].join("meta.json").exists());
}

/// `merge` refuses what cannot be one experiment, and says which client
/// connections have no server side: a run with a copy of itself (every
/// figure doubled), a `run` (both sides already), runs at different times;
/// a client merged with another run's server was analysed as if paired
/// (443 messages "lost in flight", checks holding, no warning); a merged
/// run with one of its inputs.
#[test]
fn merge_refuses_copies_runs_and_other_times_and_names_unpaired_clients() {
    let sides = reference_copies("merge-refusals");
    let merge = |inputs: &[&std::path::Path], name: &str| {
        let out = support::temp_dir(name).join("m");
        h2probe()
            .arg("merge")
            .args(inputs)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    let refused = |inputs: &[&std::path::Path], name: &str, says: &str| {
        let o = merge(inputs, name);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
    };
    // The same directory twice is a mistake of the command line: exit 2,
    // as for every bad usage (it was 1, as for inputs that cannot merge).
    let twice = merge(&[&sides[0], &sides[0]], "merge-twice-out");
    let err = String::from_utf8_lossy(&twice.stderr);
    assert_eq!(twice.status.code(), Some(2), "{err}");
    assert!(err.contains("is given twice"), "{err}");
    // A copy of the client side beside it.
    let copy = support::temp_dir("merge-copy");
    for f in ["trace.jsonl", "meta.json"] {
        std::fs::copy(sides[0].join(f), copy.join(f)).unwrap();
    }
    refused(
        &[&sides[0], &copy],
        "merge-copy-out",
        "hold the same recording",
    );
    // A `run`.
    let run = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/reference/frame-direct");
    refused(
        &[&sides[0], &run],
        "merge-run-out",
        "holds both endpoints already",
    );
    // The server side an hour later.
    let meta = |d: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("meta.json")).unwrap()).unwrap()
    };
    let later = support::temp_dir("merge-later");
    std::fs::copy(sides[1].join("trace.jsonl"), later.join("trace.jsonl")).unwrap();
    let mut m = meta(&sides[1]);
    for k in ["started_unix_ns", "finished_unix_ns"] {
        m[k] = (m[k].as_u64().unwrap() + 3_600_000_000_000).into();
    }
    std::fs::write(later.join("meta.json"), m.to_string()).unwrap();
    refused(
        &[&sides[0], &later],
        "merge-later-out",
        "ran at different times",
    );
    // The client of frame-direct with the server of another reference run
    // (its times made to overlap): merged, with the client named.
    let other = support::temp_dir("merge-other");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/reference/frame-unbounded");
    let mut r = h2probe_analysis::reader::TraceReader::open(&src.join("trace.jsonl.gz")).unwrap();
    let mut text = r.header().to_line() + "\n";
    let mut n = 0;
    for e in r.by_ref().map(|e| e.unwrap()) {
        if e.ep == h2probe_analysis::schema::Endpoint::Server {
            text += &serde_json::to_string(&e).unwrap();
            text.push('\n');
            n += 1;
        }
    }
    text += &h2probe_analysis::schema::Footer {
        events: n,
        ..Default::default()
    }
    .to_line();
    text.push('\n');
    std::fs::write(other.join("trace.jsonl"), text).unwrap();
    let mut m = meta(&sides[1]);
    m["command"] = "serve".into();
    std::fs::write(other.join("meta.json"), m.to_string()).unwrap();
    let o = merge(&[&sides[0], &other], "merge-other-out");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("shares no connection with the other runs")
            .count(),
        2,
        "{err}"
    );
    // The two sides of one run pair: no such warning.
    let pair = support::temp_dir("merge-pair-out").join("m");
    let o = h2probe()
        .arg("merge")
        .args([&sides[0], &sides[1]])
        .arg("--out")
        .arg(&pair)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("shares no connection"), "{err}");
    assert!(!err.contains("no readable meta.json"), "{err}");
    // A side without its meta.json: merged, and said that its host and
    // times could not be checked (it passed without a word).
    let bare = support::temp_dir("merge-no-meta");
    std::fs::copy(sides[1].join("trace.jsonl"), bare.join("trace.jsonl")).unwrap();
    let o = merge(&[&sides[0], &bare], "merge-no-meta-out");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.contains("no readable meta.json: whether it ran on this host and boot, and when, could not be checked"),
        "{err}"
    );
    // The merged run with one of its own inputs: every event of it twice.
    // Found mid-merge, after --out was made: nothing of it is left (an
    // empty directory was).
    let again_out = support::temp_dir("merge-again-out").join("m");
    let o = h2probe()
        .arg("merge")
        .args([&pair, &sides[1]])
        .arg("--out")
        .arg(&again_out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("one recording given twice"), "{err}");
    assert!(!again_out.exists(), "{} left behind", again_out.display());
}

#[test]
fn a_closed_stdout_ends_quietly_with_exit_0() {
    let runs = reference_copies("epipe");
    let compare_out = support::temp_dir("epipe-compare").join("c");
    let commands: [(&str, Vec<std::ffi::OsString>); 4] = [
        ("analyze", vec!["analyze".into(), runs[0].clone().into()]),
        (
            "analyze two runs",
            vec![
                "analyze".into(),
                runs[0].clone().into(),
                runs[1].clone().into(),
            ],
        ),
        (
            "export",
            vec![
                "export".into(),
                "--format".into(),
                "csv".into(),
                runs[1].clone().into(),
            ],
        ),
        (
            "compare",
            vec![
                "compare".into(),
                "--out".into(),
                compare_out.into(),
                runs[0].clone().into(),
                runs[1].clone().into(),
            ],
        ),
    ];
    for (what, args) in commands {
        let out = h2probe().args(args).stdout(closed_pipe()).output().unwrap();
        assert_quiet_end(what, out);
    }

    // decode, whose reader goes away before the first byte, and after one
    // line of many (`h2probe decode … | head -1`).
    let mut bytes = h2probe::wire::encode::preface();
    bytes.extend(h2probe::wire::encode::settings(false, &[]));
    for i in 0..20_000u64 {
        bytes.extend(h2probe::wire::encode::ping(false, i.to_be_bytes()));
    }
    let file = support::temp_dir("epipe-decode").join("pings.bin");
    std::fs::write(&file, &bytes).unwrap();
    let out = h2probe()
        .arg("decode")
        .arg(&file)
        .stdout(closed_pipe())
        .output()
        .unwrap();
    assert_quiet_end("decode", out);
    let mut child = h2probe()
        .arg("decode")
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains("\"frame\":\"SETTINGS\""), "{first}");
    assert_quiet_end("decode | head -1", child.wait_with_output().unwrap());
}

/// A corrupt line is one event lost at a known place: what failed well
/// before it stands, what comes after cannot be judged. (Lines lost or added
/// elsewhere make every check `null`: see
/// `analyze_warns_about_a_truncated_trace_and_still_reports`.)
#[test]
fn a_corrupt_line_leaves_only_failures_settled_before_it() {
    let (dir, mut lines) = clean_run_lines("corrupt-one", "1s");
    let trace = dir.join("trace.jsonl");
    // Early: a violation the footer's count does not notice.
    let (_, early_t) = oversize_first_client_data(&mut lines);
    // Late (0.5 s on): a server WINDOW_UPDATE line turned into garbage.
    let late = lines
        .iter()
        .position(|l| {
            l.contains("\"ep\":\"server\"")
                && l.contains("\"frame\":\"WINDOW_UPDATE\"")
                && t_of(l) > early_t + 500_000_000
        })
        .expect("a server WINDOW_UPDATE 0.5 s after the first DATA");
    lines[late] = "{\"t\":garbage".into();
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let headline = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "a failure stands: {err}");
    let s = support::read_summary(&dir);
    assert_eq!((s.corrupt_lines, s.footer_events), (1, Some(s.event_lines)));
    let words = headline.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(&format!(
            "trace damaged: 1 corrupt line skipped (line {})",
            late + 1
        )),
        "{headline}"
    );
    assert_eq!(s.first_corrupt_line, Some(late as u64 + 1));
    // The warnings say what the skipped line means, not only where it was.
    assert!(
        s.warnings.iter().any(|w| w.contains(
            "1 corrupt line skipped in all, an event lost each: the figures are those of the lines present"
        )),
        "{:?}",
        s.warnings
    );
    let beyond = &s.checks["no_data_beyond_credit"];
    assert_eq!(beyond.ok, Some(false), "{beyond:?}");
    let origin = serde_json::from_str::<serde_json::Value>(&lines[0]).unwrap()["origin_mono_ns"]
        .as_u64()
        .unwrap();
    let first_s = (early_t - origin) as f64 / 1e9;
    assert!(
        (beyond.first_t_s.unwrap() - first_s).abs() < 1e-6,
        "{beyond:?}"
    );
    // What held cannot be judged past the lost WINDOW_UPDATE.
    for name in ["credit", "accounting"] {
        let c = &s.checks[name];
        assert_eq!(c.ok, None, "{name}: {c:?}");
        assert!(
            c.detail.contains("1 corrupt line was skipped"),
            "{name}: {c:?}"
        );
    }
    assert_eq!(s.checks["no_dropped_events"].ok, Some(true));
}

/// A run whose checks all hold, and its trace's lines (to damage).
fn clean_run_lines(name: &str, duration: &str) -> (std::path::PathBuf, Vec<String>) {
    let dir = support::temp_dir(name);
    let r = support::run(support::short_run_opts(
        &dir,
        "frame",
        "unbounded",
        duration,
    ));
    support::assert_checks(&r);
    let text = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let lines = text.lines().map(str::to_string).collect();
    (dir, lines)
}

fn t_of(line: &str) -> u64 {
    serde_json::from_str::<serde_json::Value>(line).unwrap()["t"]
        .as_u64()
        .unwrap_or(0)
}

/// Makes the client's first DATA frame far larger than any window (a
/// violation of `no_data_beyond_credit`; no line added): its index and `t`.
fn oversize_first_client_data(lines: &mut [String]) -> (usize, u64) {
    let at = lines
        .iter()
        .position(|l| {
            l.contains("\"ep\":\"client\"")
                && l.contains("\"dir\":\"out\"")
                && l.contains("\"frame\":\"DATA\"")
        })
        .unwrap();
    let len = serde_json::from_str::<serde_json::Value>(&lines[at]).unwrap()["len"]
        .as_u64()
        .unwrap();
    lines[at] = lines[at].replacen(&format!("\"len\":{len}"), "\"len\":9999999", 1);
    (at, t_of(&lines[at]))
}

/// A violation within the reorder window before a corrupt line is set
/// aside (the lost event could explain it), and the check says so: what it
/// saw, where, and why that cannot stand, not only that the trace is damaged.
#[test]
fn a_violation_just_before_a_corrupt_line_is_set_aside_and_said() {
    let (dir, mut lines) = clean_run_lines("corrupt-near", "300ms");
    let trace = dir.join("trace.jsonl");
    let (early, early_t) = oversize_first_client_data(&mut lines);
    // The next line after it (within the reorder window) turned into garbage.
    let near = early + 1;
    assert!(t_of(&lines[near]) < early_t + 100_000_000);
    let restored = std::mem::replace(&mut lines[near], "{\"t\":garbage".into());
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "nothing stands: {err}");
    let s = support::read_summary(&dir);
    let c = &s.checks["no_data_beyond_credit"];
    assert_eq!(c.ok, None, "{c:?}");
    let origin = serde_json::from_str::<serde_json::Value>(&lines[0]).unwrap()["origin_mono_ns"]
        .as_u64()
        .unwrap();
    let seen = format!(
        "a violation was seen (first at {:.3} s, line {})",
        (early_t - origin) as f64 / 1e9,
        early + 1
    );
    // Where the corrupt line was, on the clock: after the latest event read
    // before it.
    let before = lines[1..near].iter().map(|l| t_of(l)).max().unwrap();
    let place = format!(
        "before the corrupt line (read after events up to {:.3} s)",
        (before - origin) as f64 / 1e9
    );
    for part in [
        "1 corrupt line was skipped",
        seen.as_str(),
        "within the reorder window (250 ms)",
        place.as_str(),
    ] {
        assert!(c.detail.contains(part), "{part:?} in {c:?}");
    }
    // A check that held says only why it cannot be judged.
    let credit = &s.checks["credit"];
    assert_eq!(credit.ok, None);
    assert!(!credit.detail.contains("violation was seen"), "{credit:?}");

    // The line before the violation damaged instead: the violation lies
    // after the corrupt line, and is said to (not "within the reorder
    // window before" it).
    let before_it = early - 1;
    assert!(lines[1..before_it].iter().all(|l| t_of(l) < early_t));
    lines[before_it] = "{\"t\":garbage".into();
    lines[near] = restored;
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let c = &support::read_summary(&dir).checks["no_data_beyond_credit"];
    assert_eq!(c.ok, None, "{c:?}");
    assert!(
        c.detail.contains("but it lies after the corrupt line")
            && !c.detail.contains("within the reorder window"),
        "{c:?}"
    );
}

/// An analysis that fails (a trace of a newer schema, here) changes no
/// product of the run: windows.csv was emptied before the trace was read,
/// beside an old summary.json and timeline.csv.
#[test]
fn a_failed_analysis_leaves_the_products_as_they_were() {
    let dir = support::temp_dir("failed-analysis");
    support::run(support::short_run_opts(&dir, "frame", "unbounded", "300ms"));
    let names = [
        "windows.csv",
        "summary.json",
        "timeline.csv",
        "report.html",
        "credit.svg",
    ];
    let before: Vec<Vec<u8>> = names
        .iter()
        .map(|n| std::fs::read(dir.join(n)).unwrap())
        .collect();
    assert!(before[0].len() > 100, "a windows.csv to lose");
    let trace = dir.join("trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap();
    let newer = text.replacen("\"schema\":1", "\"schema\":99", 1);
    assert_ne!(newer, text);
    std::fs::write(&trace, newer).unwrap();
    for command in ["analyze", "report"] {
        let out = h2probe().arg(command).arg(&dir).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command}: {err}");
        for (n, b) in names.iter().zip(&before) {
            assert!(
                std::fs::read(dir.join(n)).unwrap() == *b,
                "{command} changed {n}"
            );
        }
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".partial"))
            .collect();
        assert!(left.is_empty(), "{command} left {left:?}");
    }
}

/// Two traces joined into one file: the analysis reads the first up to its
/// footer and says the file goes on (the line), and the checks cannot be
/// judged. The second was ignored without a word, every invariant holding.
#[test]
fn a_trace_that_goes_on_after_its_footer_says_so() {
    let dir = support::temp_dir("joined");
    support::run(support::short_run_opts(&dir, "frame", "unbounded", "300ms"));
    let trace = dir.join("trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines = text.lines().count();
    std::fs::write(&trace, format!("{text}{text}")).unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let said = format!("the file goes on after its footer (line {})", lines + 1);
    assert!(err.contains(&said), "{err}");
    assert!(stdout.contains("goes on after its footer"), "{stdout}");
    let s = support::read_summary(&dir);
    assert_eq!(s.after_footer_line, Some(lines as u64 + 1));
    for (name, c) in &s.checks {
        if name != "no_dropped_events" {
            assert_eq!(c.ok, None, "{name}: {}", c.detail);
        }
    }
}

/// A meta.json that cannot be read is said (the run's status and
/// configuration come from it); `analyze` said nothing.
#[test]
fn analyze_says_when_meta_json_cannot_be_read() {
    let dir = support::temp_dir("bad-meta");
    support::run(support::short_run_opts(&dir, "frame", "unbounded", "300ms"));
    std::fs::write(dir.join("meta.json"), "{\"schema\": ").unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("meta.json: truncated"), "{err}");
    assert!(
        err.contains("the run's status and configuration are unknown"),
        "{err}"
    );
    // Missing (a trace copied alone): said too; it was not.
    std::fs::remove_file(dir.join("meta.json")).unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("no meta.json in ")
            && err.contains("the run's status and configuration are unknown"),
        "{err}"
    );
}

/// A trace whose lines are in reverse order (every event far later than
/// the reorder window) analyses to the run's own summary, products and
/// all, saying it sorted the trace; where the sort cannot write its runs
/// (`TMPDIR` missing) the figures are the window's, said, and the checks
/// cannot be judged rather than judged on events out of place.
#[test]
fn a_trace_written_out_of_order_is_sorted_whole_or_said_not_to_be() {
    let dir = support::temp_dir("reversed");
    let r = support::run(support::short_run_opts(&dir, "frame", "unbounded", "300ms"));
    let expected = std::fs::read_to_string(dir.join("summary.json")).unwrap();
    assert_eq!(r.summary.late_written_events, 0);
    let trace = dir.join("trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    lines[1..n - 1].reverse();
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("the trace was sorted whole"), "{err}");
    let mut s = support::read_summary(&dir);
    assert!(s.late_written_events > 100, "{}", s.late_written_events);
    assert_eq!(s.out_of_order_events, 0);
    s.late_written_events = 0;
    s.warnings.clear();
    let mut want: h2probe_analysis::analyze::Summary = serde_json::from_str(&expected).unwrap();
    want.warnings.clear();
    assert_eq!(
        serde_json::to_string_pretty(&s).unwrap(),
        serde_json::to_string_pretty(&want).unwrap()
    );

    std::fs::remove_dir_all(&dir).unwrap();

    // More events than the sort holds in memory (65,536), in reverse, with
    // nowhere to write its runs.
    let dir = support::temp_dir("reversed-no-tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let origin = 1_000_000_000u64;
    let mut text = support::trace_header(origin) + "\n";
    for k in (0..70_000u64).rev() {
        text += &format!(
            "{{\"t\":{},\"ep\":\"server\",\"conn\":1,\"stream\":1,\"type\":\"chunk\",\"len\":1}}\n",
            origin + k * 1_000_000
        );
    }
    std::fs::write(dir.join("trace.jsonl"), text).unwrap();
    let out = h2probe()
        .arg("analyze")
        .arg(&dir)
        .env("TMPDIR", dir.join("no-such-directory"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sorting the trace to put those events in their place failed"),
        "{err}"
    );
    let s = support::read_summary(&dir);
    assert_eq!(s.late_written_events, 0);
    assert!(s.out_of_order_events > 60_000, "{}", s.out_of_order_events);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A flipped byte in the header line: `analyze` and `export` read every
/// event all the same, the origin from meta.json's clock anchor, and say
/// so; the figures and verdicts are the intact trace's. The whole trace
/// was refused ("not an h2probe trace").
#[test]
fn a_damaged_header_line_loses_no_event() {
    let dir = support::temp_dir("bad-header");
    let r = support::run(support::short_run_opts(&dir, "frame", "unbounded", "300ms"));
    let intact = serde_json::to_value(&r.summary).unwrap();
    let trace = dir.join("trace.jsonl");
    let mut bytes = std::fs::read(&trace).unwrap();
    assert_eq!(&bytes[..9], b"{\"type\":\"");
    bytes[0] = b'[';
    std::fs::write(&trace, &bytes).unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("line 1: the header is damaged")
            && err.contains("its origin meta.json's clock anchor"),
        "{err}"
    );
    let damaged = serde_json::to_value(support::read_summary(&dir)).unwrap();
    for field in [
        "stream_count",
        "checks",
        "rpc_status",
        "event_lines",
        "span_s",
        "first_event_s",
        "min_window",
    ] {
        assert!(!intact[field].is_null(), "{field}");
        assert_eq!(damaged[field], intact[field], "{field}");
    }
    let out = h2probe()
        .args(["export", "--format", "csv"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("line 1: the header is damaged"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();

    // `merge` reads such an input whole and says so: the merged trace has
    // a header of its own, and the damage was healed without a word.
    let inputs = reference_copies("merge-bad-header");
    let trace = inputs[1].join("trace.jsonl");
    let mut bytes = std::fs::read(&trace).unwrap();
    bytes[0] = b'[';
    std::fs::write(&trace, &bytes).unwrap();
    let out_dir = support::temp_dir("merge-bad-header-out").join("merged");
    let out = h2probe()
        .arg("merge")
        .args(&inputs)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{}: line 1: the header is damaged",
            trace.display()
        )),
        "{err}"
    );
    let merged = support::read_summary(&out_dir);
    assert!(
        merged.stream_count > 0 && merged.checks["bytes"].ok == Some(true),
        "{err}"
    );
}

#[test]
fn analyze_warns_about_a_truncated_trace_and_still_reports() {
    let dir = support::temp_dir("trunc");
    let r = support::run(support::short_run_opts(&dir, "frame", "unbounded", "300ms"));
    let full = r.summary.clone();
    // Cut the trace in the middle of a line, as a crash would.
    let trace = dir.join("trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap();
    // Halfway through the line two thirds in: a cut at either end of a line
    // leaves whole lines, a clean (footerless) end rather than a truncation.
    let at = text.len() * 2 / 3;
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = at + text[at..].find('\n').unwrap();
    let cut = start + (end - start) / 2;
    assert!(cut > start && cut < end, "a line of {} bytes", end - start);
    std::fs::write(&trace, &text[..cut]).unwrap();
    let line = text[..cut].lines().count();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("truncated at line {line}")), "{err}");
    assert!(
        err.contains("only the waits that ended before the cut"),
        "{err}"
    );
    let s = support::read_summary(&dir);
    assert_eq!(s.trace_ending, format!("truncated at line {line}"));
    assert!(s.scheduled > 0 && s.scheduled <= full.scheduled);
    assert_eq!(s.footer_events, None, "a cut trace has no footer");
    assert_eq!((s.corrupt_lines, s.unknown_events), (0, 0));
    // No stall before the cut, but one after it would not be in the trace:
    // it cannot be judged (it said "the run never stopped progressing").
    assert_eq!(
        s.checks["no_stall"].ok, None,
        "{}",
        s.checks["no_stall"].detail
    );
    assert!(s.checks["no_stall"].detail.contains("after its last event"));
    // A damaged line in the middle is skipped, an event of a type this build
    // does not know (a newer one's) too; both are counted in summary.json.
    let mut lines: Vec<&str> = text.lines().collect();
    let mid = lines.len() / 2;
    let from_the_future = lines[mid].replacen("\"type\":\"", "\"type\":\"future_", 1);
    assert_ne!(from_the_future, lines[mid]);
    lines.insert(mid, &from_the_future);
    lines.insert(mid, "{\"t\":12,\"ep\":");
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains(&format!("skipped line {}", mid + 1)), "{err}");
    assert!(
        err.contains(&format!(
            "1 events of unknown types skipped, the first at line {}",
            mid + 2
        )),
        "{err}"
    );
    let s = support::read_summary(&dir);
    assert_eq!((s.corrupt_lines, s.unknown_events), (1, 1), "{err}");
    assert_eq!(s.damaged_payloads, 0);
    // Two lines added (the footer's count differs): the checks cannot judge,
    // and the headline says why (a corrupt line alone: the test above).
    let headline = String::from_utf8_lossy(&out.stdout);
    assert!(
        headline.contains("trace     altered: the footer counts"),
        "{headline}"
    );
    for (name, c) in s.checks.iter().filter(|(n, _)| *n != "no_dropped_events") {
        assert_eq!(c.ok, None, "{name}: {c:?}");
        assert!(
            c.detail.contains("1 corrupt line was skipped"),
            "{name}: {c:?}"
        );
    }
    // Two lines more than the footer counts: said, and in summary.json.
    let written = full.footer_events.expect("the whole trace has a footer");
    assert_eq!(full.event_lines, written);
    assert_eq!(
        (s.footer_events, s.event_lines),
        (Some(written), written + 2)
    );
    assert!(
        err.contains(&format!(
            "the footer counts {written} events written, the file holds {} lines of events",
            written + 2
        )),
        "{err}"
    );
    // One line fewer (a lost event) is said too. The line lost is a DATA
    // frame: the byte accounting no longer balances, but the file, not flow
    // control, is at fault, so no check judges it (they failed, exit 3).
    let mut lines: Vec<&str> = text.lines().collect();
    let data = mid
        + lines[mid..]
            .iter()
            .position(|l| l.contains("\"frame\":\"DATA\""))
            .expect("a DATA frame after the middle");
    lines.remove(data);
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let headline = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let s = support::read_summary(&dir);
    assert_eq!(
        (s.footer_events, s.event_lines),
        (Some(written), written - 1)
    );
    assert!(
        err.contains("lines were lost or added after the run"),
        "{err}"
    );
    assert_eq!(s.trace_ending, "clean");
    // (Words compared: the headline wraps at 80 columns.)
    let words = headline.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains(&format!(
            "trace altered: the footer counts {written} events written, the file holds {} lines",
            written - 1
        )),
        "{headline}"
    );
    assert!(s.checks.len() > 5, "{:?}", s.checks);
    // The page leads with it too, not with the one check that holds, and
    // shows the analysis' warnings (kept in summary.json).
    assert!(
        s.warnings
            .iter()
            .any(|w| w.contains("lines were lost or added after the run")),
        "{:?}",
        s.warnings
    );
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        page.contains(r#"<div class="warn"><b>The analysis warned</b><ul><li>"#)
            && page.contains("lines were lost or added after the run"),
        "no warnings on the page"
    );
    let card = format!(
        r#"<div class="card alert"><div class="k">invariant checks</div><div class="v">{} cannot be judged</div><div class="n">the footer counts {written} events written"#,
        s.checks.len() - 1
    );
    assert!(page.contains(&card), "{card}");
    for (name, c) in &s.checks {
        if name == "no_dropped_events" {
            assert_eq!(c.ok, Some(true), "{name}: the footer's own count");
        } else {
            assert_eq!(c.ok, None, "{name}: {c:?}");
            assert!(
                c.detail.contains("lines were lost or added after the run"),
                "{name}: {c:?}"
            );
        }
    }
    // And a file that is not a trace is refused by name.
    std::fs::write(&trace, "hello\n").unwrap();
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("trace.jsonl: line 1: not an h2probe trace"),
        "{err}"
    );
}

/// A long finish (analysis, report, pcaps) or `analyze` says how much of the
/// trace it has read, and when it is done. The display starts after a
/// second, which a test run does not last: the test knob starts it at once.
#[test]
fn finishing_and_analysing_show_how_much_of_the_trace_was_read() {
    let dir = support::temp_dir("reading").join("run");
    // h2probe with the display from the start.
    let shown_at_once = |args: &[&str], path: &std::path::Path| {
        let mut c = h2probe();
        c.env("H2PROBE_TEST_PROGRESS_AFTER_MS", "0")
            .args(args)
            .arg(path);
        c
    };
    let out = shown_at_once(&["run", "--duration", "300ms", "--out"], &dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let size = std::fs::metadata(dir.join("trace.jsonl")).unwrap().len();
    let shown = format!("the {} trace", indicatif::HumanBytes(size));
    let times_read = |what: &str, err: &str| -> f64 {
        let line = err
            .lines()
            .find(|l| l.starts_with("progress") && l.contains(&format!("{what}: done, read ")))
            .unwrap_or_else(|| panic!("no done line for {what}:\n{err}"));
        assert!(line.ends_with(&shown), "{line} (trace {size} B)");
        let x = line
            .split("read ")
            .nth(1)
            .unwrap()
            .split('×')
            .next()
            .unwrap();
        x.parse().unwrap()
    };
    // The analysis reads the trace once, the report's ladder up to once
    // more (and a slice), the pcaps once more.
    let finishing = times_read("finishing", &err);
    assert!((2.0..=4.0).contains(&finishing), "{finishing}\n{err}");
    let out = shown_at_once(&["analyze"], &dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let analysing = times_read(&format!("analysing {}", dir.display()), &err);
    assert!((1.0..=3.0).contains(&analysing), "{analysing}\n{err}");
    // Without the knob a short job stays silent.
    let out = h2probe().arg("analyze").arg(&dir).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("progress"), "{err}");
    // A finish that fails (the disk fills, injected) does not say done.
    let full = dir.with_file_name("full");
    let out = shown_at_once(&["run", "--duration", "2s", "--out"], &full)
        .env("H2PROBE_FAULT_TRACE_FULL_AFTER", "100000")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("finishing: stopped, read "), "{err}");
    assert!(!err.contains("finishing: done"), "{err}");
}

/// The trace is written around the page cache (`O_DIRECT`) where the file
/// system takes it, and meta.json says how it was written; the trace reads
/// back whole (every line an event, the footer's count).
#[test]
fn meta_says_how_the_trace_was_written_and_the_trace_reads_back_whole() {
    let dir = support::temp_dir("file-io").join("run");
    let out = dir.to_str().unwrap();
    support::h2probe_ok([
        "run",
        "--duration",
        "700ms",
        "--connections",
        "3",
        "--quiet",
        "--no-pcap",
        "--out",
        out,
    ]);
    let meta = h2probe_analysis::meta::Meta::read(&dir).unwrap();
    let io = meta.recorder.file_io.as_deref();
    // ext4, XFS and btrfs take O_DIRECT; a tmpfs only on newer kernels.
    const DIRECT_FS: [i64; 3] = [0xEF53, 0x5846_5342, 0x9123_683E];
    let fs = rustix::fs::statfs(&dir).unwrap().f_type as i64;
    if DIRECT_FS.contains(&fs) {
        assert_eq!(io, Some("direct"), "file system 0x{fs:x}");
    } else {
        assert!(matches!(io, Some("direct" | "page_cache")), "{io:?}");
    }
    let mut r = h2probe_analysis::reader::TraceReader::open(&dir.join("trace.jsonl")).unwrap();
    let mut n = 0u64;
    let mut opened = vec![];
    for e in r.by_ref() {
        let e = e.unwrap();
        if let h2probe_analysis::schema::Kind::ConnOpen(_) = e.kind {
            opened.push((e.ep, e.conn));
        }
        n += 1;
    }
    match r.ending() {
        h2probe_analysis::reader::Ending::Clean(f) => assert_eq!(f.events, n),
        other => panic!("{other:?}"),
    }
    assert!(n > 100, "{n} events");
    // The client's connections take the odd ids, the server's the even
    // ones: each tap's ids follow each other (the analysis keeps a tap's
    // retired ones as ranges).
    use h2probe_analysis::schema::Endpoint;
    opened.sort_unstable_by_key(|&(ep, id)| (ep as u8, id));
    assert_eq!(
        opened,
        [
            (Endpoint::Server, 2),
            (Endpoint::Server, 4),
            (Endpoint::Server, 6),
            (Endpoint::Client, 1),
            (Endpoint::Client, 3),
            (Endpoint::Client, 5),
        ]
    );
}

/// `--no-trace`: the endpoints without the recorder (the tool's own
/// overhead baseline); a run directory with meta.json and nothing else.
#[test]
fn no_trace_runs_the_endpoints_and_records_nothing() {
    let dir = support::temp_dir("no-trace").join("run");
    let out = h2probe()
        .args(["run", "--no-trace", "--duration", "500ms", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("none recorded (--no-trace)"), "{stdout}");
    assert!(!dir.join("trace.jsonl").exists());
    let meta = h2probe_analysis::meta::Meta::read(&dir).unwrap();
    assert_eq!(meta.status, "complete");
    assert!(meta.clock.is_none());
}

/// `h2probe` with run's flags is `h2probe run`; ambiguous sizes are refused
/// with both readings spelled out.
#[test]
fn the_bare_command_takes_runs_flags_and_sizes_are_unambiguous() {
    let dir = support::temp_dir("bare").join("run");
    let out = h2probe()
        .args(["--duration", "300ms", "--quiet", "--no-pcap", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.join("summary.json").is_file());
    let out = h2probe()
        .args(["run", "--stream-window", "64K"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("write 64KiB (65,536) or 64kB (64,000)"),
        "{err}"
    );
}

/// What a person reads at an 80-column terminal: every line of a run's
/// headline fits (a long one continues under its text), and so does the
/// side-by-side table of several runs.
#[test]
fn analyze_output_fits_80_columns() {
    let mut dirs = vec![];
    for (name, release, queue) in [
        ("w80a", "frame", "unbounded"),
        ("w80b", "complete", "bounded:32"),
    ] {
        let dir = support::temp_dir(name);
        let mut o = support::run_opts(&dir, release, queue);
        o.client.duration = support::dur("300ms");
        support::run(o);
        dirs.push(dir);
    }
    let out = h2probe().arg("analyze").args(&dirs).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("messages  scheduled"), "{stdout}");
    assert!(stdout.contains("sent/s (steady)"), "{stdout}");
    support::assert_fits_80(&stdout);
}

/// `analyze` of several directories: one it cannot read is said and the
/// others are still analysed, exit 1 (the first such stopped them all, its
/// runs unread); a comparison among them, which `captures/2*/` matches when
/// `compare` wrote one there, is skipped with a note.
#[test]
fn analyze_goes_past_a_directory_it_cannot_read() {
    let root = support::temp_dir("analyze-several");
    let run = root.join("run");
    std::fs::create_dir_all(&run).unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/reference/frame-direct");
    for f in ["trace.jsonl.gz", "meta.json"] {
        std::fs::copy(src.join(f), run.join(f)).unwrap();
    }
    let comparison = root.join("compare");
    std::fs::create_dir_all(&comparison).unwrap();
    std::fs::write(comparison.join("comparison.json"), "[]").unwrap();
    let empty = root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let analyze = |dirs: &[&PathBuf]| {
        let o = h2probe().arg("analyze").args(dirs).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (o.status.code(), text(&o.stdout), text(&o.stderr))
    };
    let (code, out, err) = analyze(&[&comparison, &run]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("== {}", run.display())), "{out}");
    assert!(
        err.contains("is a comparison (`compare` wrote it), not a run directory: skipped"),
        "{err}"
    );
    let (code, out, err) = analyze(&[&empty, &run]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains(&format!("== {}", run.display())), "{out}");
    assert!(err.contains("no trace.jsonl here"), "{err}");
    assert!(
        err.contains("1 of 2 run directories could not be analysed"),
        "{err}"
    );
    // The comparison skipped is not counted among the runs.
    let (code, _, err) = analyze(&[&comparison, &empty, &run]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("1 of 2 run directories could not be analysed"),
        "{err}"
    );
    let (code, _, err) = analyze(&[&comparison]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is a comparison"), "{err}");
}

/// A compressed trace with one bit flipped in its checksum: it read as a
/// clean trace, every check judged. Now the failure is said (warning,
/// headline, `read_error`) and no check is judged, the footer's drop count
/// included: the bytes may be wrong anywhere.
#[test]
fn a_compressed_trace_failing_its_checksum_is_not_judged() {
    let run = support::temp_dir("analyze-gz-crc");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/reference/frame-direct");
    std::fs::copy(src.join("meta.json"), run.join("meta.json")).unwrap();
    let mut gz = std::fs::read(src.join("trace.jsonl.gz")).unwrap();
    let crc = gz.len() - 8;
    gz[crc] ^= 0x10;
    std::fs::write(run.join("trace.jsonl.gz"), gz).unwrap();
    let o = h2probe().arg("analyze").arg(&run).output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    assert!(
        out.contains("trace     failed as read (past the footer"),
        "{out}"
    );
    assert!(err.contains("does not have a matching checksum"), "{err}");
    let s = support::read_summary(&run);
    assert!(s.read_error.is_some());
    assert!(!s.checks.is_empty());
    for (name, c) in &s.checks {
        assert_eq!(c.ok, None, "{name}: {}", c.detail);
        assert!(
            c.detail.contains("the file failed as it was read"),
            "{name}: {}",
            c.detail
        );
    }
}

/// `report --out` names an HTML file: a page written over the run's trace
/// or meta.json lost the run (exit 0); both stay as they were.
#[test]
fn report_refuses_to_write_its_page_over_anything_but_html() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/reference/frame-direct");
    let dir = support::temp_dir("report-out-over-trace");
    for f in ["trace.jsonl.gz", "meta.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    for f in ["trace.jsonl.gz", "meta.json"] {
        let before = std::fs::read(dir.join(f)).unwrap();
        let out = h2probe()
            .arg("report")
            .arg(&dir)
            .arg("--out")
            .arg(dir.join(f))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{f}: {err}");
        assert!(err.contains("give a file name ending in .html"), "{err}");
        assert_eq!(
            std::fs::read(dir.join(f)).unwrap(),
            before,
            "{f} was written over"
        );
    }
    // An .html name is written.
    let page = dir.join("Page.HTML");
    support::h2probe_ok([
        "report".as_ref(),
        dir.as_os_str(),
        "--out".as_ref(),
        page.as_os_str(),
    ]);
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .starts_with("<!DOCTYPE html>"));
    // Into a directory that does not exist yet: made, and said.
    let page = dir.join("new/deeper/page.html");
    let o = h2probe()
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(&page)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(page.is_file());
    assert!(
        err.contains(&format!(
            "created the directory {} for --out",
            dir.join("new/deeper").display()
        )),
        "{err}"
    );
    // Into a "directory" that is a file: refused, and the file kept.
    let o = h2probe()
        .arg("report")
        .arg(&dir)
        .arg("--out")
        .arg(dir.join("meta.json/page.html"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "--out's directory {} is a file, not a directory",
            dir.join("meta.json").display()
        )),
        "{err}"
    );
    assert!(dir.join("meta.json").is_file());
}

/// A meta.json whose clock anchor is not the trace header's, or whose
/// schema is newer, is said (both were believed without a word), and so is
/// a second trace file beside the one read; a sound run says nothing.
#[test]
fn a_meta_json_that_contradicts_its_trace_is_said() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("captures/reference/frame-direct");
    let dir = support::temp_dir("meta-contradicts");
    for f in ["trace.jsonl.gz", "meta.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let warned = |dir: &std::path::Path| {
        let out = support::analyze(dir);
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(!warned(&dir).contains("meta.json"), "{}", warned(&dir));
    let text = std::fs::read_to_string(dir.join("meta.json")).unwrap();
    let mut m: serde_json::Value = serde_json::from_str(&text).unwrap();
    m["clock"]["origin_mono_ns"] = 5.into();
    std::fs::write(dir.join("meta.json"), m.to_string()).unwrap();
    let err = warned(&dir);
    assert!(
        err.contains("meta.json: its clock anchor (5 ns monotonic"),
        "{err}"
    );
    assert!(err.contains("is not the trace header's"), "{err}");
    m["schema"] = 99.into();
    std::fs::write(dir.join("meta.json"), m.to_string()).unwrap();
    let err = warned(&dir);
    assert!(
        err.contains("meta.json: schema 99 is newer than this reader's 1"),
        "{err}"
    );
    // trace.jsonl beside trace.jsonl.gz: the one not read is said (a
    // gzip stream under the plain name reads the same).
    std::fs::copy(dir.join("trace.jsonl.gz"), dir.join("trace.jsonl")).unwrap();
    let err = warned(&dir);
    assert!(
        err.contains("trace.jsonl.gz is here too and was not read"),
        "{err}"
    );
}
