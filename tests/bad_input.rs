//! Hostile or wrong requests get the right answer, and the server keeps
//! serving the next RPC.

mod support;

use bytes::Bytes;
use h2probe::server::ServerOpts;
use std::net::SocketAddr;

struct Answer {
    http: u16,
    grpc_status: Option<u32>,
    message: String,
}

/// One request over a fresh h2 connection; body sent whole, then half-close.
async fn raw_rpc(addr: SocketAddr, path: &str, content_type: &str, body: &[u8]) -> Answer {
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::handshake(sock).await.unwrap();
    tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    let req = http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", content_type)
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (resp, mut send) = client.send_request(req, false).unwrap();
    send.reserve_capacity(body.len());
    let _ = send.send_data(Bytes::copy_from_slice(body), true);
    let resp = resp.await.unwrap();
    let http = resp.status().as_u16();
    let header_status = resp
        .headers()
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    let header_msg = resp
        .headers()
        .get("grpc-message")
        .map(|v| v.to_str().unwrap().to_string());
    let mut body = resp.into_body();
    let mut text = Vec::new();
    while let Some(Ok(c)) = body.data().await {
        let _ = body.flow_control().release_capacity(c.len());
        text.extend_from_slice(&c);
    }
    let trailers = body.trailers().await.ok().flatten();
    let trailer_status = trailers
        .as_ref()
        .and_then(|t| t.get("grpc-status"))
        .map(|v| v.to_str().unwrap().parse().unwrap());
    Answer {
        http,
        grpc_status: header_status.or(trailer_status),
        message: header_msg.unwrap_or_else(|| String::from_utf8_lossy(&text).into_owned()),
    }
}

fn item(seq: u64, payload: usize) -> Vec<u8> {
    h2probe::grpc::encode(&h2probe::grpc::pb::Item {
        seq,
        scheduled_ns: 0,
        payload: vec![1; payload].into(),
    })
    .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_larger_than_the_window_is_refused_under_late_release_not_stalled() {
    let opts = ServerOpts {
        release: h2probe::config::ReleaseSpec::uniform(h2probe::config::ReleasePoint::Complete),
        stream_window: "8KiB".parse().unwrap(),
        ..Default::default()
    };
    let server = support::TestServer::start("bad-input-window", opts).await;
    let addr = server.addr;
    let big = item(0, 16 * 1024);
    let a = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        raw_rpc(addr, h2probe::grpc::INGEST_PATH, "application/grpc", &big),
    )
    .await
    .expect("answered, not stalled");
    assert_eq!(a.grpc_status, Some(8), "{}", a.message);
    assert!(a.message.contains("stream window"), "{}", a.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_the_right_status_and_the_server_keeps_serving() {
    let opts = ServerOpts {
        service_time: "1ms".parse().unwrap(),
        max_message_size: "64KiB".parse().unwrap(),
        ..Default::default()
    };
    let server = support::TestServer::start("bad-input-statuses", opts).await;
    let addr = server.addr;
    let good = |n: usize| {
        (0..n as u64)
            .flat_map(|i| item(i, 100))
            .collect::<Vec<u8>>()
    };
    const PATH: &str = h2probe::grpc::INGEST_PATH;
    const GRPC: &str = "application/grpc";

    let ok = raw_rpc(addr, PATH, GRPC, &good(3)).await;
    assert_eq!((ok.http, ok.grpc_status), (200, Some(0)), "{}", ok.message);

    // (name, path, content-type, body, expected HTTP status, expected gRPC status)
    type Case<'a> = (&'a str, &'a str, &'a str, Vec<u8>, u16, Option<u32>);
    let cases: Vec<Case> = vec![
        (
            "wrong path",
            "/h2probe.v1.Probe/Nope",
            GRPC,
            good(1),
            200,
            Some(12),
        ),
        (
            "oversize message",
            PATH,
            GRPC,
            [&[0u8, 0x05, 0xf5, 0xe1, 0x00][..], &[0; 100]].concat(),
            200,
            Some(8),
        ),
        (
            "garbage protobuf",
            PATH,
            GRPC,
            [&[0u8, 0, 0, 0, 6][..], &[0xff; 6]].concat(),
            200,
            Some(3),
        ),
        (
            "compressed without encoding",
            PATH,
            GRPC,
            vec![1, 0, 0, 0, 2, 8, 1],
            200,
            Some(12),
        ),
        (
            "body cut inside a message",
            PATH,
            GRPC,
            vec![0, 0, 0, 0, 9, 8],
            200,
            Some(13),
        ),
        (
            "not gRPC at all",
            PATH,
            "text/plain",
            b"hello".to_vec(),
            415,
            None,
        ),
    ];
    for (name, path, ct, body, http, grpc) in cases {
        let a = raw_rpc(addr, path, ct, &body).await;
        assert_eq!(
            (a.http, a.grpc_status),
            (http, grpc),
            "{name}: {}",
            a.message
        );
        assert!(!a.message.is_empty(), "{name}: the answer must say why");
        // The server still serves the next RPC normally.
        let again = raw_rpc(addr, PATH, GRPC, &good(2)).await;
        assert_eq!(
            again.grpc_status,
            Some(0),
            "after {name}: {}",
            again.message
        );
    }
    server.stop().await;
}

/// Configurations that cannot run are refused before anything starts: exit
/// 2, one line naming the flag, no run directory.
#[test]
fn impossible_configurations_are_refused_with_exit_2_before_anything_starts() {
    let cases: &[(&[&str], &str)] = &[
        (&["--sample-interval", "0s"], "--sample-interval"),
        (&["--sample-interval", "500us"], "--sample-interval"),
        (&["--stream-window", "0"], "--stream-window"),
        (&["--trace-buffer", "0"], "--trace-buffer"),
        (&["--deadline", "0s"], "--deadline"),
        (&["--deadline", "100000h"], "--deadline"),
        (&["--duration", "100000h", "--deadline", "1s"], "--duration"),
        (&["--payload", "5MiB"], "--max-message-size"),
        (&["--rate", "1e9"], "--rate"),
        (&["--rate", "0.00001"], "--rate"),
        (&["--rate", "NaN"], "--rate"),
        (&["--path", "/a b"], "--method"), // --path is an alias of --method
        (&["--method", "nope"], "--method"),
        (&["--duration", "200s"], "--deadline"),
        (&["--client-stream-window", "0"], "--client-stream-window"),
        // Streams the client never opens (they were accepted, and did nothing).
        (&["--drop-stream", "0"], "odd (client-initiated) stream id"),
        (
            &["--stall-stream", "99"],
            "--stall-stream 99: the client opens streams 1 to 1",
        ),
        (
            &["--streams", "4", "--drop-stream", "9"],
            "--drop-stream 9: the client opens streams 1 to 7",
        ),
        (
            &["--trace-limit", "64KiB"],
            "--trace-limit must be at least 1MiB",
        ),
    ];
    for (args, names) in cases {
        let dir = support::temp_dir("refused").join("run");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .arg("run")
            .args(*args)
            .arg("--out")
            .arg(&dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(names), "{args:?} names {names}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(!dir.exists(), "{args:?}: nothing started");
    }
}
