//! A stock Python grpcio client (gRPC C-core: its own flow control, with BDP
//! probing) drives our server. Skips loudly without python3 + grpcio +
//! grpcio-tools locally; fails under CI=true.

mod support;

use h2probe::server::ServerOpts;
use h2probe::trace::schema::{Dir, Endpoint};
use support::{require_tool, TestServer};
use tokio::process::Command;

/// python3 with grpcio and stubs generated from proto/ (None: skipped loudly).
async fn python_with_stubs() -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let python = require_tool("python3")?;
    let has_grpc = Command::new(&python)
        .args(["-c", "import grpc, grpc_tools"])
        .status()
        .await
        .is_ok_and(|s| s.success());
    if !has_grpc {
        support::missing("the Python packages grpcio and grpcio-tools");
        return None;
    }
    let stubs = support::temp_dir("grpcio-stubs");
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let gen = Command::new(&python)
        .args(["-m", "grpc_tools.protoc", "-I"])
        .arg(root.join("proto"))
        .arg(format!("--python_out={}", stubs.display()))
        .arg(format!("--grpc_python_out={}", stubs.display()))
        .arg(root.join("proto/h2probe.proto"))
        .output()
        .await
        .unwrap();
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    Some((python, stubs))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_client_streams_to_our_server() {
    let Some((python, stubs)) = python_with_stubs().await else {
        return;
    };
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));

    let opts = ServerOpts {
        release: h2probe::config::ReleaseSpec::uniform(h2probe::config::ReleasePoint::Complete),
        queue: "bounded:8".parse().unwrap(),
        service_time: "1ms".parse().unwrap(),
        ..Default::default()
    };
    let server = TestServer::start("grpcio", opts).await;
    let (count, size) = (300, 16 * 1024);
    let out = Command::new(&python)
        .arg(root.join("tests/python/ingest_client.py"))
        .arg(&stubs)
        .arg(server.addr.to_string())
        .arg(count.to_string())
        .arg(size.to_string())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["received"], count);
    assert_eq!(lines[0]["completed"], count);
    assert_eq!(lines[0]["discarded"], 0);
    assert_eq!(lines[1]["unknown_method"], "UNIMPLEMENTED");
    let (s, dir) = server.stop().await;
    assert_eq!(s.decoded, count);
    assert_eq!(s.checks["credit"].ok, Some(true));
    assert_eq!(s.checks["no_data_beyond_credit"].ok, Some(true));
    support::assert_released_as_told_by_a_sound_peer(&s);
    // With release on complete, the app never owned more than the window.
    assert!(s.max_owned_bytes <= 65_535, "{}", s.max_owned_bytes);
    // C-core's own flow control shows on the wire: it pings (BDP probes) and
    // sends WINDOW_UPDATEs of its own, seen arriving at our server.
    let frames = support::tap_frames(&dir, Endpoint::Server);
    let pings_in = frames
        .iter()
        .filter(|f| f.0 == Dir::In && f.1 == "PING")
        .count();
    let wu_in = frames
        .iter()
        .filter(|f| f.0 == Dir::In && f.1 == "WINDOW_UPDATE")
        .count();
    eprintln!("grpcio: {pings_in} PINGs and {wu_in} WINDOW_UPDATEs sent to our server");
    assert!(
        pings_in + wu_in > 0,
        "C-core's flow-control traffic should be visible"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_client_calls_exchange() {
    let Some((python, stubs)) = python_with_stubs().await else {
        return;
    };
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let opts = ServerOpts {
        service_time: "5ms".parse().unwrap(),
        admission: 4,
        when_full: h2probe::overload::WhenFull::Drop,
        ..Default::default()
    };
    let server = TestServer::start("grpcio-exchange", opts).await;
    let count = 80;
    let out = Command::new(&python)
        .arg(root.join("tests/python/exchange_client.py"))
        .arg(&stubs)
        .arg(server.addr.to_string())
        .arg(count.to_string())
        .arg("4096")
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["outcomes"], count, "{v}");
    assert_eq!(v["distinct"], count, "{v}");
    assert_eq!(v["twice"], 0, "{v}");
    let done = v["results"]["COMPLETED"].as_u64().unwrap_or(0);
    let dropped = v["results"]["DROPPED"].as_u64().unwrap_or(0);
    assert_eq!(done + dropped, count, "{v}");
    assert!(done >= 4, "{v}");
    let (s, _) = server.stop().await;
    assert_eq!(s.completed, done);
    assert_eq!(
        s.discarded_by_reason.get("dropped").copied().unwrap_or(0),
        dropped
    );
    assert_eq!(
        s.checks["admission"].ok,
        Some(true),
        "{}",
        s.checks["admission"].detail
    );
}

/// A stock grpcio server with a maximum connection age (700 ms, gRPC's
/// MAX_CONNECTION_AGE, as services set grpc-go's MaxConnectionAge to spread
/// load) sends each connection GOAWAY (NO_ERROR) while a unary run goes
/// on: the client replaces each, the schedule goes on, and every call of
/// the 3 s run is offered, sent, answered OK and counted by the server's
/// own handler. (The client stopped offering at the first GOAWAY, a
/// quarter of the run.)
#[test]
fn a_grpcio_server_with_a_maximum_connection_age_serves_the_whole_unary_run() {
    let Some(python) = require_tool("python3") else {
        return;
    };
    let has_grpc = std::process::Command::new(&python)
        .args(["-c", "import grpc"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_grpc {
        support::missing("the Python package grpcio");
        return;
    }
    use std::io::BufRead;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut server = std::process::Command::new(&python)
        .arg(root.join("tests/python/aging_server.py"))
        .args(["700", "6"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let port = first.strip_prefix("listening ").expect(&first).to_string();
    let dir = support::temp_dir("grpcio-aging");
    let client = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["client", "--connect", &format!("127.0.0.1:{port}")])
        .args(["--rpc", "unary", "--method", "/probe.Aging/Call"])
        .args(["--streams", "2", "--rate", "100", "--duration", "3s"])
        .args(["--no-pcap", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&client.stdout);
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert_eq!(client.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("the schedule goes on over a new connection"),
        "{stderr}"
    );
    let s = support::read_summary(&dir);
    assert_eq!(
        (s.scheduled, s.sent, s.never_sent),
        (300, 300, 0),
        "{stdout}"
    );
    assert_eq!(s.rpc_status.get("OK"), Some(&300), "{stdout}");
    let trace = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let opened = trace
        .lines()
        .filter(|l| l.contains(r#""ep":"client""#) && l.contains(r#""type":"conn_open""#))
        .count();
    // 3 s of connections that live 700 ms (± grpcio's 10 % jitter).
    assert!((4..=6).contains(&opened), "{opened} connections");
    let last = lines.next().unwrap().unwrap();
    assert_eq!(
        last, "calls 300",
        "the server's handler answered every call"
    );
    assert!(server.wait().unwrap().success());
    std::fs::remove_dir_all(&dir).unwrap();
}
