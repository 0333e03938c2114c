//! Servers that misbehave toward `h2probe client`: the client still ends on
//! its own, its run directory is complete, and it says what happened.
//!
//! The hostile server is a raw-frame peer built from `h2probe::wire::encode`
//! on loopback; every wait is bounded.

mod support;

use h2probe::wire::encode;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `h2probe client` against `addr` for 2 s (deadline 5 s, no pcap), writing
/// `dir`, with `extra` arguments: the command, to run or spawn.
fn client(addr: &str, dir: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_h2probe"));
    c.args(["client", "--connect", addr, "--duration", "2s"])
        .args(["--deadline", "5s", "--no-pcap"])
        .args(extra)
        .arg("--out")
        .arg(dir);
    c
}

/// A server on loopback for one connection, served by `serve` on a thread
/// of its own; its address.
fn one_connection(serve: impl FnOnce(std::net::TcpStream) + Send + 'static) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        if let Ok((sock, _)) = listener.accept() {
            serve(sock);
        }
    });
    addr
}

/// The events of the trace in `dir`, as JSON.
fn events(dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("trace.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Reads and discards until the client closes (or 30 s pass).
fn read_to_end(sock: &mut std::net::TcpStream) {
    let _ = sock.set_read_timeout(Some(Duration::from_secs(30)));
    let mut sink = [0u8; 4096];
    while let Ok(n) = sock.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
}

/// A server that grants all the credit there is, then reads one byte every
/// 100 ms and never answers: the client's socket fills, its stall watcher
/// ends the RPC, and the connection, whose last bytes the server never
/// takes, is closed after a grace period. The client waited on it for as
/// long as the server liked (a helper's hostile-server audit killed it after
/// 60 s; SIGTERM did nothing).
#[test]
fn a_server_that_stops_reading_cannot_hold_the_client() {
    let addr = one_connection(move |mut sock| {
        let mut hello = encode::settings(false, &[(4, 0x7fff_ffff)]);
        hello.extend(encode::window_update(0, 0x7fff_ffff - 65_535));
        let _ = sock.write_all(&hello);
        let mut byte = [0u8; 1];
        // Bounded: a minute of reading, then the socket is dropped.
        for _ in 0..600 {
            match sock.read(&mut byte) {
                Ok(1) => std::thread::sleep(Duration::from_millis(100)),
                _ => return,
            }
        }
    });
    let dir = support::temp_dir("slow-reader");
    let mut child = client(&addr, &dir, &["--stall-timeout", "2s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(45) {
            let _ = child.kill();
            panic!("the client was still waiting on the server after 45 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The stall is a failed check (exit 3); the RPC was cancelled by it.
    assert_eq!(status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("connection 1: the server did not take its last bytes within 5s; closed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stalled: the client could send nothing for 2s with messages pending;")
            && !stderr.contains("no credit from the server"),
        "the stall is not blamed on credit the server granted: {stderr}"
    );
    assert!(
        stdout.contains("CANCELLED client stopped: stalled"),
        "{stdout}"
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["status"], "complete");
    let s = support::read_summary(&dir);
    assert_eq!(s.trace_ending, "clean");
    // What held it: the socket, still blocked when the connection was closed.
    assert_eq!(s.blocked_open_by.get("socket").copied(), Some(1), "{s:?}");
}

/// A server whose SETTINGS give every stream a window of 0 and that never
/// sends a WINDOW_UPDATE: the client's wait is on the window (its stream
/// opened at 0), the stall is `no_credit`, and the lowest window is 0. The
/// analysis tracked a stream only once DATA or an update touched it, so it
/// called this an h2-buffer wait with a lowest window of 65,535.
#[test]
fn a_zero_initial_window_is_a_wait_on_the_window() {
    let addr = one_connection(move |mut sock| {
        let _ = sock.write_all(&encode::settings(false, &[(4, 0)]));
        read_to_end(&mut sock);
    });
    let dir = support::temp_dir("window-zero");
    let out = client(&addr, &dir, &["--stall-timeout", "1s"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let s = support::read_summary(&dir);
    assert!(s.client_window_blocked_s >= 0.9, "{stdout}");
    assert_eq!(s.client_h2_buffer_blocked_s, 0.0, "{stdout}");
    assert_eq!(s.stall_cause.as_deref(), Some("no_credit"), "{stdout}");
    assert_eq!(s.min_window, Some(0), "{stdout}");
    assert_eq!(
        s.blocked_open_by.get("window").copied(),
        Some(1),
        "{stdout}"
    );
    // The client's stall event: no streams of the server's, and no window
    // it cannot know (it wrote 0, a window no server advertises).
    let ev = events(&dir);
    let stall = ev.iter().find(|e| e["type"] == "stall").expect("a stall");
    assert_eq!(stall["ep"], "client", "{stall}");
    assert!(stall["conn_window"].is_null(), "{stall}");
    assert_eq!(stall["streams"], serde_json::json!([]), "{stall}");
}

/// A header block of `grpc-status: 0` (a literal without indexing).
fn grpc_status_ok() -> Vec<u8> {
    let mut ok = vec![0x00, 11];
    ok.extend(b"grpc-status");
    ok.extend([1, b'0']);
    ok
}

/// Stream 1's answer OK with one empty reply: `:status 200`, the reply,
/// the trailers.
fn ok_answer() -> Vec<u8> {
    [
        encode::headers(1, 0x4, None, None, &[0x88]),
        encode::data(1, 0, None, &[0; 5]),
        encode::headers(1, 0x5, None, None, &grpc_status_ok()),
    ]
    .concat()
}

/// A server that answers stream 1 with `answer` once the client's request
/// has arrived (its first bytes read), then reads to the end.
fn answering_server(answer: Vec<u8>) -> String {
    one_connection(move |mut sock| {
        let _ = sock.write_all(&encode::settings(false, &[]));
        let _ = sock.set_read_timeout(Some(Duration::from_secs(20)));
        // Preface, SETTINGS, HEADERS and some DATA: stream 1 is open.
        let mut got = vec![0u8; 300];
        if sock.read_exact(&mut got).is_err() {
            return;
        }
        let _ = sock.write_all(&answer);
        read_to_end(&mut sock);
    })
}

/// The client's status for a server's answer follows gRPC's HTTP/2 mapping
/// (PROTOCOL-HTTP2.md, http-grpc-status-mapping.md): RST_STREAM CANCEL is
/// CANCELLED, ENHANCE_YOUR_CALM RESOURCE_EXHAUSTED, REFUSED_STREAM
/// UNAVAILABLE, INADEQUATE_SECURITY PERMISSION_DENIED, PROTOCOL_ERROR
/// INTERNAL; HTTP 503 UNAVAILABLE; a grpc-status that is not a number
/// INTERNAL, saying what it was; a GOAWAY that leaves the stream out
/// UNAVAILABLE, said as a GOAWAY. Every reset read
/// UNAVAILABLE, a 503 UNKNOWN, and a malformed status "ended without
/// grpc-status".
#[test]
fn the_servers_answer_maps_to_grpcs_status() {
    // :status 503 (literal, name :status from the static table), then the
    // same with :status 200 and `grpc-status: OK`, both ending the stream
    // and followed by RST_STREAM NO_ERROR (an answer before the request
    // ended, RFC 9113 §8.1).
    let status_503 = [0x08, 0x03, b'5', b'0', b'3'];
    let mut bad_status = vec![0x88, 0x00, 11];
    bad_status.extend(b"grpc-status");
    bad_status.extend([2, b'O', b'K']);
    let cases: [(Vec<u8>, &str, &str); 8] = [
        (
            encode::rst_stream(1, 0x8),
            "CANCELLED",
            "stream no longer needed",
        ),
        (
            encode::rst_stream(1, 0xb),
            "RESOURCE_EXHAUSTED",
            "excessive load",
        ),
        (encode::rst_stream(1, 0x7), "UNAVAILABLE", "refused stream"),
        (
            encode::rst_stream(1, 0xc),
            "PERMISSION_DENIED",
            "security properties",
        ),
        (encode::rst_stream(1, 0x1), "INTERNAL", "protocol error"),
        // A GOAWAY below the open stream: h2 fails it with the GOAWAY's
        // code, in words of its own ("not a result of an error").
        (
            encode::goaway(0, 0, b""),
            "UNAVAILABLE",
            "no response: the server sent GOAWAY (NO_ERROR: it is closing the connection)",
        ),
        (
            [
                encode::headers(1, 0x5, None, None, &status_503),
                encode::rst_stream(1, 0),
            ]
            .concat(),
            "UNAVAILABLE",
            "HTTP status 503",
        ),
        (
            [
                encode::headers(1, 0x5, None, None, &bad_status),
                encode::rst_stream(1, 0),
            ]
            .concat(),
            "INTERNAL",
            "grpc-status \"OK\" is not a status code",
        ),
    ];
    for (i, (answer, status, message)) in cases.into_iter().enumerate() {
        let addr = answering_server(answer);
        let dir = support::temp_dir(&format!("answer-{i}"));
        let out = client(&addr, &dir, &[]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(4), "{status}: {stdout}");
        support::assert_fits_80(&stdout);
        let line = support::rpc_lines(&stdout)
            .into_iter()
            .find(|l| l.starts_with("rpc conn 1 stream 1: "))
            .unwrap_or_else(|| panic!("{stdout}"));
        assert!(
            line.starts_with(&format!("rpc conn 1 stream 1: {status} ")) && line.contains(message),
            "want {status} ({message}): {line}"
        );
        let s = support::read_summary(&dir);
        assert_eq!(s.rpc_status.get(status), Some(&1), "{:?}", s.rpc_status);
    }
}

/// A client-streaming call is answered with one message: an OK status with
/// a reply cut short, none, or two is a malformed answer, INTERNAL, saying
/// which (gRPC's own clients do the same). Each read OK, exit 0.
#[test]
fn an_ok_status_over_a_malformed_answer_is_internal() {
    let headers = encode::headers(1, 0x4, None, None, &[0x88]);
    let ok = grpc_status_ok();
    let trailers = encode::headers(1, 0x5, None, None, &ok);
    let trailers_only = encode::headers(1, 0x5, None, None, &[[0x88].as_slice(), &ok].concat());
    let rst = encode::rst_stream(1, 0);
    let cases: [(Vec<u8>, &str); 3] = [
        (
            // A prefix that promises 10 bytes, then 3.
            [
                headers.clone(),
                encode::data(1, 0, None, &[0, 0, 0, 0, 10, 1, 2, 3]),
                trailers.clone(),
                rst.clone(),
            ]
            .concat(),
            "status OK, but the reply body ended inside a message (8 bytes of it)",
        ),
        (
            [trailers_only, rst.clone()].concat(),
            "status OK, but 0 replies to a call that answers with one",
        ),
        (
            [headers, encode::data(1, 0, None, &[0; 10]), trailers, rst].concat(),
            "status OK, but 2 replies to a call that answers with one",
        ),
    ];
    for (i, (answer, message)) in cases.into_iter().enumerate() {
        let addr = answering_server(answer);
        let dir = support::temp_dir(&format!("malformed-{i}"));
        let out = client(&addr, &dir, &[]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(4), "{message}: {stdout}");
        support::assert_fits_80(&stdout);
        let want = format!("rpc conn 1 stream 1: INTERNAL {message}");
        assert!(
            support::rpc_lines(&stdout)
                .iter()
                .any(|l| l.contains(&want)),
            "want {message}: {stdout}"
        );
    }
}

/// A server that answers OK before the upload ended and resets the stream
/// with NO_ERROR (RFC 9113 §8.1): the RPC is OK (exit 0), and the client
/// does not report a frame nobody sent ("received frame when stream
/// half-closed", what h2's STREAM_CLOSED reads as, when the send side
/// found its stream closed; whether it does is a race).
#[test]
fn an_answer_before_the_upload_ended_is_ok_and_says_so_plainly() {
    let answer = [ok_answer(), encode::rst_stream(1, 0)].concat();
    let addr = answering_server(answer);
    let dir = support::temp_dir("early-ok");
    let out = client(&addr, &dir, &[]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("rpc conn 1 stream 1: OK"), "{stdout}");
    assert!(!stdout.contains("half-closed"), "{stdout}");
}

/// A server that resets the TCP connection mid-upload (SO_LINGER 0): the
/// client's `conn_close` says why, from the socket's error (it was empty).
#[test]
fn a_tcp_reset_is_the_connections_close_reason() {
    use std::os::fd::AsRawFd;
    let addr = one_connection(move |mut sock| {
        let _ = sock.write_all(&encode::settings(false, &[]));
        let mut got = vec![0u8; 300];
        let _ = sock.read_exact(&mut got);
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: a valid socket and a linger struct of the size given.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
        drop(sock);
    });
    let dir = support::temp_dir("tcp-reset");
    let out = client(&addr, &dir, &[]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    let close = events(&dir)
        .into_iter()
        .find(|e| e["type"] == "conn_close")
        .expect("a conn_close");
    let why = close["error"].as_str().unwrap();
    assert!(
        (why.starts_with("read error: ") || why.starts_with("write error: "))
            && why.contains("reset"),
        "{close}"
    );
}

/// A server that allows no concurrent stream (SETTINGS_MAX_CONCURRENT_STREAMS
/// 0) and grants all the credit there is. h2 writes the streams it opened
/// before reading those SETTINGS and holds the others pending open: their
/// waits are on the stream's opening, not on h2's buffer (as they were
/// called), and the stall they end in is `not_open`, naming the streams and
/// the server's limit. Which streams h2 holds depends on when it reads the
/// SETTINGS: the run is repeated until one is held (at most 10 times).
/// `h2probe client --streams 3 --stall-timeout 1s` against a server that
/// sends `hello` and then only reads: every stream is held before its
/// HEADERS, the stall is `not_open`, and the analysis names the streams
/// with `why`.
fn streams_held_by(hello: Vec<u8>, name: &str, why: &str) {
    let addr = one_connection(move |mut sock| {
        let _ = sock.write_all(&hello);
        read_to_end(&mut sock);
    });
    let dir = support::temp_dir(name);
    let out = client(&addr, &dir, &["--streams", "3", "--stall-timeout", "1s"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let s = support::read_summary(&dir);
    // The streams held: an RPC started, its HEADERS never written. The
    // client opens none before the server's SETTINGS (it raced them: h2
    // wrote all three before it read a limit of 0 in 1 to 9 runs of 10).
    let trace = events(&dir);
    let streams = |is: &dyn Fn(&serde_json::Value) -> bool| -> Vec<u64> {
        let of_client = trace.iter().filter(|v| v["ep"] == "client" && is(v));
        of_client.filter_map(|v| v["stream"].as_u64()).collect()
    };
    let mut started = streams(&|v| v["type"] == "rpc_start");
    started.sort_unstable();
    let opened = streams(&|v| v["type"] == "frame" && v["frame"] == "HEADERS" && v["dir"] == "out");
    assert_eq!(started, [1, 3, 5], "{stdout}");
    assert!(opened.is_empty(), "{opened:?}\n{stdout}");
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert_eq!(s.client_h2_buffer_blocked_s, 0.0, "{stdout}");
    assert!(s.client_not_open_blocked_s >= 0.9, "{stdout}");
    assert_eq!(
        s.blocked_open_by.get("not_open").copied(),
        Some(3),
        "{stdout}"
    );
    assert_eq!(s.stall_cause.as_deref(), Some("not_open"), "{stdout}");
    let named = format!("streams 1, 3, 5 not open ({why})");
    assert!(
        s.stall.as_deref().is_some_and(|t| t.contains(&named)),
        "{named} in {:?}",
        s.stall
    );
    assert!(stdout.contains("stream not open"), "{stdout}");
}

#[test]
fn a_stream_the_server_does_not_allow_waits_on_its_opening() {
    let mut hello = encode::settings(false, &[(3, 0), (4, 0x7fff_ffff)]);
    hello.extend(encode::window_update(0, 0x7fff_ffff - 65_535));
    streams_held_by(
        hello,
        "max-streams-0",
        "the server's SETTINGS_MAX_CONCURRENT_STREAMS is 0",
    );
}

#[test]
fn no_stream_opens_before_the_servers_settings() {
    streams_held_by(
        vec![],
        "no-settings",
        "the server sent no SETTINGS: no stream opens before them",
    );
}

/// An HTTP/1.1 server: the client's tap reads its answer as what it is,
/// not as an `UNKNOWN_0x50` frame of 4,740,180 bytes (and a second error
/// when the connection ended inside it): one `wire_error` naming a server
/// that is not HTTP/2 and its first bytes, said so in the headline.
#[test]
fn an_http1_server_is_named_as_not_http2() {
    let addr = one_connection(move |mut sock| {
        let mut preface = [0u8; 24];
        let _ = sock.read_exact(&mut preface);
        let _ = sock.write_all(
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        // Closing with the client's SETTINGS unread would reset the
        // connection, and the client might never read the answer.
        read_to_end(&mut sock);
    });
    let dir = support::temp_dir("http1-server");
    let out = client(&addr, &dir, &[]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    let trace = events(&dir);
    let errors: Vec<&serde_json::Value> =
        trace.iter().filter(|v| v["type"] == "wire_error").collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0]["error"],
        "byte 0: not an HTTP/2 server: its first frame is not SETTINGS (RFC 9113 §3.4); its first \
         bytes read \"HTTP/1.1 \" (an HTTP/1.x response: the server does not speak HTTP/2 in \
         cleartext)"
    );
    let s = support::read_summary(&dir);
    assert_eq!(
        s.protocol_errors
            .get("wire_error: not an HTTP/2 server")
            .copied(),
        Some(1),
        "{:?}",
        s.protocol_errors
    );
    assert!(stdout.contains("not an HTTP/2 server×1"), "{stdout}");
    // The RPC's own line says what h2's error does not, down to what the
    // server's bytes look like (said only in the trace before).
    let why = "the peer is not an HTTP/2 server: its first frame is not SETTINGS (an HTTP/1.x \
               response: the server does not speak HTTP/2 in cleartext)";
    support::assert_fits_80(&stdout);
    assert!(
        support::rpc_lines(&stdout)
            .iter()
            .any(|l| l.contains(&format!("(the connection: {why})"))),
        "{stdout}"
    );
    // And it is why the connection closed (the socket never failed).
    let close = trace
        .iter()
        .find(|v| v["type"] == "conn_close")
        .expect("a conn_close");
    assert_eq!(close["error"], why);
}

/// A server whose first frame is a WINDOW_UPDATE, then its SETTINGS: it
/// breaks the preface rule but speaks HTTP/2, and h2 reads on. The tap says
/// so once and parses on, so the update's credit counts: two streams sent
/// exactly the connection's 65,535 + 1,000 bytes, and no DATA is called
/// beyond credit (when the tap stopped at the first frame, three were, and
/// the lowest window read −1,000).
#[test]
fn a_server_whose_first_frame_is_not_settings_is_still_read() {
    let addr = one_connection(move |mut sock| {
        let mut hello = encode::window_update(0, 1_000);
        hello.extend(encode::settings(false, &[]));
        let _ = sock.write_all(&hello);
        read_to_end(&mut sock);
    });
    let dir = support::temp_dir("wu-first");
    let out = client(&addr, &dir, &["--streams", "2", "--stall-timeout", "1s"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    let s = support::read_summary(&dir);
    assert_eq!(s.data_bytes_out, 65_535 + 1_000, "{stdout}");
    assert_eq!(s.checks["no_data_beyond_credit"].ok, Some(true), "{stdout}");
    assert_eq!(s.min_window, Some(0), "{stdout}");
    assert_eq!(s.stall_cause.as_deref(), Some("no_credit"), "{stdout}");
    assert_eq!(
        s.protocol_errors
            .get("wire_error: the server's first frame is WINDOW_UPDATE, not SETTINGS")
            .copied(),
        Some(1),
        "{:?}",
        s.protocol_errors
    );
    assert_eq!(s.wire_errors, 1, "{stdout}");
}

/// A server that allows one stream, then two (800 ms later: a debug
/// build under load still sends its first HEADERS before): while the first unary call
/// is out, the second waits, and opens once the server's second SETTINGS
/// raises the limit, before the first call ends (the lanes re-read h2's
/// limit every 10 ms as they wait, since no call's end wakes them; without
/// the re-read the second call waited for the first's deadline).
#[test]
fn a_limit_the_server_raises_later_lets_calls_open() {
    let addr = one_connection(move |mut sock| {
        let mut hello = encode::settings(false, &[(3, 1), (4, 0x7fff_ffff)]);
        hello.extend(encode::window_update(0, 0x7fff_ffff - 65_535));
        let _ = sock.write_all(&hello);
        std::thread::sleep(Duration::from_millis(800));
        let _ = sock.write_all(&encode::settings(false, &[(3, 2)]));
        read_to_end(&mut sock);
    });
    let dir = support::temp_dir("limit-raised");
    // Calls of two seconds at most, never answered.
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args([
            "client",
            "--connect",
            &addr,
            "--rpc",
            "unary",
            "--streams",
            "3",
        ])
        .args([
            "--rate",
            "4",
            "--duration",
            "1s",
            "--deadline",
            "2s",
            "--no-pcap",
        ])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let trace = events(&dir);
    let client_frames = |frame: &str, dir: &str| -> Vec<(u64, u64)> {
        let of_client = trace.iter().filter(|v| {
            v["ep"] == "client" && v["type"] == "frame" && v["frame"] == frame && v["dir"] == dir
        });
        let at = |v: &serde_json::Value| (v["t"].as_u64().unwrap(), v["stream"].as_u64().unwrap());
        // Not a SETTINGS ACK.
        let not_ack = |v: &&serde_json::Value| frame != "SETTINGS" || v["flags"] == 0;
        of_client.filter(not_ack).map(at).collect()
    };
    let settings = client_frames("SETTINGS", "in");
    assert_eq!(settings.len(), 2, "{settings:?}\n{stdout}");
    let raised = settings[1].0;
    let opened = client_frames("HEADERS", "out");
    let first_end = trace
        .iter()
        .filter(|v| v["ep"] == "client" && v["type"] == "rpc_end" && v["stream"] != 0)
        .filter_map(|v| v["t"].as_u64())
        .min()
        .unwrap_or(u64::MAX);
    let before_an_end: Vec<u64> = opened
        .iter()
        .filter(|(t, _)| *t < first_end)
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(before_an_end, [1, 3], "{opened:?}\n{stdout}");
    assert_eq!(opened.len(), 4, "{opened:?}\n{stdout}");
    assert!(
        opened[0].0 < raised,
        "{opened:?}: stream 1 waited for the raise"
    );
    assert!(
        opened[1].0 > raised,
        "{opened:?}: stream 3 opened past the limit"
    );
    // Within half a second of the raise (10 ms polls; a debug build is slow).
    assert!(
        opened[1].0 - raised < 500_000_000,
        "{} ms after the raise",
        (opened[1].0 - raised) / 1_000_000
    );
}

/// A server that never answers: a unary call's deadline runs from its
/// message's scheduled time, as a gRPC call's from its creation, so a
/// message's wait in the backlog counts and the calls end within
/// --duration and one --deadline. Each call ended a whole --deadline after it opened,
/// and the backlog drained one deadline at a time: a 1 s offer took 20 s.
#[test]
fn a_unary_calls_deadline_runs_from_its_messages_schedule() {
    let addr = one_connection(move |mut sock| {
        let _ = sock.write_all(&encode::settings(false, &[]));
        read_to_end(&mut sock);
    });
    let dir = support::temp_dir("unary-deadline");
    let began = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["client", "--connect", &addr, "--rpc", "unary"])
        .args([
            "--rate",
            "20",
            "--duration",
            "1s",
            "--deadline",
            "1s",
            "--no-pcap",
        ])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let took = began.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    assert!(took < Duration::from_secs(8), "{took:?}\n{stdout}");
    let s = support::read_summary(&dir);
    assert_eq!(s.scheduled, 20, "{stdout}");
    assert_eq!(s.sent + s.never_sent, 20, "{stdout}");
    assert_eq!(s.checks["accounting"].ok, None, "{stdout}");
    // Every call ends by its message's scheduled time + 1 s (and a timer's
    // slack), and says so in its grpc-timeout: what was left of the second.
    let trace = events(&dir);
    let of = |ty: &'static str| {
        trace
            .iter()
            .filter(move |v| v["ep"] == "client" && v["type"] == ty)
    };

    // A message's scheduled time is its `schedule`'s `t` (on stream 0);
    // its call's stream names it by `seq` (`send`, or the `never_sent` of
    // a call the window held, which the server never opened).
    let due_of_seq: std::collections::HashMap<u64, u64> = of("schedule")
        .map(|v| {
            (
                v["seq"].as_u64().unwrap(),
                v["t"].as_u64().unwrap() + 1_000_000_000,
            )
        })
        .collect();
    let due: std::collections::HashMap<u64, u64> = trace
        .iter()
        .filter(|v| v["ep"] == "client" && v["stream"] != 0 && v["seq"].is_u64())
        .map(|v| {
            (
                v["stream"].as_u64().unwrap(),
                due_of_seq[&v["seq"].as_u64().unwrap()],
            )
        })
        .collect();
    let mut ended = 0;
    for e in of("rpc_end").filter(|v| v["stream"] != 0) {
        let stream = e["stream"].as_u64().unwrap();
        let due = due[&stream];
        let t = e["t"].as_u64().unwrap();
        assert!(
            t < due + 300_000_000,
            "stream {stream} ended {} ms past its deadline",
            (t - due) / 1_000_000
        );
        assert_eq!(e["status"], 4, "{e}");
        ended += 1;
    }
    assert_eq!(ended, due.len(), "{stdout}");
    for e in of("rpc_start") {
        let stream = e["stream"].as_u64().unwrap();
        let left = e["deadline_ns"].as_u64().unwrap();
        let due = due[&stream];
        // The time left when the request was made: the call's rpc_start
        // comes just after, so t + left is its due time, a little later
        // (the whole second it was, for a call that had waited).
        let t = e["t"].as_u64().unwrap();
        assert!(
            left <= 1_000_000_000 && t + left >= due - 5_000_000 && t + left <= due + 50_000_000,
            "{e}: {} ms past its due time",
            (t + left).saturating_sub(due) / 1_000_000
        );
    }
}

/// Reads the client preface, then frames until one with END_STREAM on
/// stream 1 (DATA or HEADERS): false if the peer went first.
fn request_ended(sock: &mut std::net::TcpStream) -> bool {
    use h2probe::wire::{Flags, FrameType, Head, HEADER_LEN, PREFACE};
    let mut preface = [0u8; PREFACE.len()];
    if sock.read_exact(&mut preface).is_err() {
        return false;
    }
    let mut head = [0u8; HEADER_LEN];
    while sock.read_exact(&mut head).is_ok() {
        let head = Head::parse(&head);
        let mut payload = vec![0u8; head.len() as usize];
        if sock.read_exact(&mut payload).is_err() {
            return false;
        }
        let request = matches!(head.ty(), FrameType::DATA | FrameType::HEADERS);
        if head.stream() == 1 && request && head.flags().contains(Flags::END_STREAM) {
            return true;
        }
    }
    false
}

/// A server that answers each connection's first unary call, then closes
/// the connection without a GOAWAY (a proxy's idle close, a restart): the
/// client replaces each connection, as a gRPC channel does, and the
/// schedule goes on: all 10 calls of 1 s answered OK over 10 connections,
/// one message after another. (The client stopped offering at the first
/// close: 1 call, exit 0.)
#[test]
fn a_unary_connection_closed_without_goaway_is_replaced() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let answer = ok_answer();
    std::thread::spawn(move || {
        for sock in listener.incoming().take(20) {
            let Ok(mut sock) = sock else { return };
            let _ = sock.write_all(&encode::settings(false, &[]));
            let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
            // The preface, then frames until call 1's request has ended
            // (answered before, a call's upload was cut short).
            if !request_ended(&mut sock) {
                continue;
            }
            // The answer, then a close (FIN, no GOAWAY), reading what else
            // the client sends until it closes too.
            let _ = sock.write_all(&answer);
            let _ = sock.shutdown(std::net::Shutdown::Write);
            let mut sink = [0u8; 4096];
            while matches!(sock.read(&mut sink), Ok(n) if n > 0) {}
        }
    });
    let dir = support::temp_dir("closed-no-goaway");
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["client", "--connect", &addr, "--rpc", "unary"])
        .args(["--rate", "10", "--duration", "1s", "--no-pcap", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("the schedule goes on over a new connection") && !stderr.contains("GOAWAY"),
        "{stderr}"
    );
    let s = support::read_summary(&dir);
    assert_eq!((s.scheduled, s.sent), (10, 10), "{stdout}");
    assert_eq!(s.rpc_status.get("OK"), Some(&10), "{stdout}");
    let ev = events(&dir);
    let opened = ev.iter().filter(|e| e["type"] == "conn_open").count();
    assert_eq!(opened, 10, "{stdout}");
    let seqs: Vec<u64> = ev
        .iter()
        .filter(|e| e["type"] == "send")
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (0..10).collect::<Vec<_>>());
}

/// A server that closes every connection right after its SETTINGS, before
/// answering anything: the unary client does not replace connections that
/// served nothing, so the run fails at once, saying so, after at most
/// three connections. Counting a call as served once h2 gave it a stream
/// (before the server had seen it) replaced one connection per message:
/// 101 of them in 2 s, exit 4.
#[test]
fn a_server_that_answers_no_call_gets_no_storm_of_connections() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for sock in listener.incoming().take(200) {
            let Ok(mut sock) = sock else { return };
            let _ = sock.write_all(&encode::settings(false, &[]));
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let dir = support::temp_dir("no-storm");
    let began = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["client", "--connect", &addr, "--rpc", "unary"])
        .args(["--rate", "50", "--duration", "10s", "--no-pcap", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(began.elapsed() < Duration::from_secs(5), "{stderr}");
    assert!(
        stderr.contains("before a call of it was answered")
            && stderr.contains("its schedule stopped before --duration"),
        "{stderr}"
    );
    let opened = events(&dir)
        .iter()
        .filter(|e| e["type"] == "conn_open")
        .count();
    // The slot's first, replaced before its first message was due; one
    // replaced on trust, a call of it in flight; the one that then finds
    // it answered nothing.
    assert!((1..=3).contains(&opened), "{opened} connections: {stderr}");
    let s = support::read_summary(&dir);
    assert_eq!(s.scheduled, s.sent + s.never_sent, "{stderr}");
}

/// Reads a client's preface and its frames up to the first HEADERS (a
/// call's, whatever its stream: a call reset before its END_STREAM left
/// a server waiting for that on stream 1 reading on for good).
fn first_headers(sock: &mut std::net::TcpStream) {
    use h2probe::wire::{FrameType, Head, HEADER_LEN, PREFACE};
    let mut preface = [0u8; PREFACE.len()];
    if sock.read_exact(&mut preface).is_err() {
        return;
    }
    let mut head = [0u8; HEADER_LEN];
    while sock.read_exact(&mut head).is_ok() {
        let head = Head::parse(&head);
        let mut payload = vec![0u8; head.len() as usize];
        if sock.read_exact(&mut payload).is_err() || head.ty() == FrameType::HEADERS {
            return;
        }
    }
}

/// A server that never answers and closes each connection soon after it
/// opened, while the client's calls reach a deadline shorter still: held
/// to their deadline, they are no sign of a server that serves unless it
/// has answered a call before, so the run fails at once, after at most
/// three connections. Counting every call that reached its deadline as
/// served, a server that sent no SETTINGS and closed each connection 3 ms
/// in cost 742 connections in 3 s (helper-97), one that closed 2 ms
/// after a call's HEADERS 332.
#[test]
fn a_server_that_holds_calls_past_their_deadline_gets_no_storm() {
    for settings in [false, true] {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            for sock in listener.incoming().take(200) {
                let Ok(mut sock) = sock else { return };
                std::thread::spawn(move || {
                    if settings {
                        let _ = sock.write_all(&encode::settings(false, &[]));
                        first_headers(&mut sock);
                        std::thread::sleep(Duration::from_millis(2));
                    } else {
                        std::thread::sleep(Duration::from_millis(3));
                    }
                });
            }
        });
        let dir = support::temp_dir("deadline-storm");
        let out = Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args(["client", "--connect", &addr, "--rpc", "unary"])
            .args(["--deadline", "1ms", "--rate", "300", "--duration", "3s"])
            .args(["--no-pcap", "--out"])
            .arg(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "SETTINGS {settings}: {stderr}");
        assert!(
            stderr.contains("its schedule stopped before --duration"),
            "{stderr}"
        );
        let opened = events(&dir)
            .iter()
            .filter(|e| e["type"] == "conn_open")
            .count();
        assert!(
            (1..=3).contains(&opened),
            "SETTINGS {settings}: {opened} connections: {stderr}"
        );
        let s = support::read_summary(&dir);
        assert_eq!(s.scheduled, s.sent + s.never_sent, "{stderr}");
    }
}
