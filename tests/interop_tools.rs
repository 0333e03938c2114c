//! Tools nobody here wrote, as real peers and as independent readers of our
//! output: tshark, nghttp, h2load, curl, nghttpd. Each test skips loudly
//! when its tool is missing locally and fails under CI=true.

mod support;

use h2probe::server::ServerOpts;
use h2probe::trace::schema::{Dir, Endpoint};
use support::{require_tool, TestServer};
use tokio::process::Command;

fn raw_server(unit: &str) -> ServerOpts {
    ServerOpts {
        framing: format!("raw:{unit}").parse().unwrap(),
        service_time: "1ms".parse().unwrap(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tshark_dissects_every_frame_of_our_pcaps() {
    let Some(tshark) = require_tool("tshark") else {
        return;
    };
    let dir = support::temp_dir("tshark");
    let mut o = support::short_run_opts(&dir, "complete", "bounded:4", "500ms");
    o.client.streams = 2;
    let r = tokio::task::spawn_blocking(move || support::run(o))
        .await
        .unwrap();
    let port = r.outcomes.first().map(|_| ()).and_then(|_| {
        let meta: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
        meta["listen"]
            .as_str()
            .and_then(|l| l.rsplit(':').next())
            .map(str::to_string)
    });
    let port = port.expect("listen address in meta.json");
    // The same pcaps gzip-compressed, as `export --pcap-gzip` writes them:
    // tshark must read them as they are and see the same frames.
    let exported = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["export", "--format", "pcap", "--pcap-gzip"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        exported.status.success(),
        "{}",
        String::from_utf8_lossy(&exported.stderr)
    );
    for tap in ["server", "client"] {
        let plain = std::fs::metadata(dir.join(format!("{tap}.pcap")))
            .unwrap()
            .len();
        let gz = std::fs::metadata(dir.join(format!("{tap}.pcap.gz")))
            .unwrap()
            .len();
        // The upload's payload is not in the trace: zeros, which compress away.
        assert!(gz * 10 < plain, "{tap}: {gz} B gzip'd vs {plain} B plain");
    }
    for (file, ep) in [
        ("server.pcap", Endpoint::Server),
        ("client.pcap", Endpoint::Client),
        ("server.pcap.gz", Endpoint::Server),
        ("client.pcap.gz", Endpoint::Client),
    ] {
        let out = Command::new(&tshark)
            .arg("-r")
            .arg(dir.join(file))
            .args(["-d", &format!("tcp.port=={port},http2")])
            .args([
                "-Y",
                "http2",
                "-T",
                "fields",
                "-E",
                "occurrence=a",
                "-E",
                "aggregator=;",
            ])
            .args([
                "-e",
                "http2.type",
                "-e",
                "http2.streamid",
                "-e",
                "http2.length",
            ])
            .args(["-e", "http2.window_update.window_size_increment"])
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "tshark: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut theirs = vec![];
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let cols: Vec<Vec<&str>> = line
                .split('\t')
                .map(|c| c.split(';').filter(|s| !s.is_empty()).collect())
                .collect();
            let mut incs = cols.get(3).cloned().unwrap_or_default().into_iter();
            let (types, streams, lens) = (&cols[0], &cols[1], &cols[2]);
            for ((ty, stream), len) in types.iter().zip(streams).zip(lens) {
                let ty: u8 = ty.parse().unwrap();
                let inc = if ty == 8 {
                    incs.next().map(|v| v.parse::<u32>().unwrap())
                } else {
                    None
                };
                theirs.push((
                    ty,
                    stream.parse::<u32>().unwrap(),
                    len.parse::<u32>().unwrap(),
                    inc,
                ));
            }
        }
        let ours: Vec<(u8, u32, u32, Option<u32>)> = support::tap_frames(&dir, ep)
            .into_iter()
            .map(|(_, name, _, stream, len, inc)| {
                let ty = h2probe::trace::schema::FrameType::from_name(&name)
                    .unwrap()
                    .0;
                (ty, stream, len, inc)
            })
            .collect();
        assert!(ours.len() > 100, "{file}: only {} frames", ours.len());
        assert_eq!(theirs.len(), ours.len(), "{file}: frame counts differ");
        for (i, (a, b)) in theirs.iter().zip(&ours).enumerate() {
            assert_eq!(a, b, "{file}: frame {i} (type, stream, length, increment)");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2load_posts_bodies_of_several_sizes_to_the_raw_server() {
    let Some(h2load) = require_tool("h2load") else {
        return;
    };
    let mut total_bytes = 0u64;
    let mut total_reqs = 0u64;
    let server = TestServer::start("h2load", raw_server("16KiB")).await;
    for (size, streams) in [(1_000usize, 1), (100_000, 4), (300_000, 2)] {
        let body = server.dir.join(format!("body-{size}"));
        std::fs::write(&body, vec![b'x'; size]).unwrap();
        let out = Command::new(&h2load)
            .args(["-n", "6", "-c", "1", "-m", &streams.to_string(), "-d"])
            .arg(&body)
            .arg(format!("http://{}/upload", server.addr))
            .output()
            .await
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("6 succeeded, 0 failed"),
            "h2load {size}x{streams}:\n{text}"
        );
        total_bytes += 6 * size as u64;
        total_reqs += 6;
    }
    let (s, _) = server.stop().await;
    // The same requests against the default gRPC framing: a clear 415 each.
    let grpc = TestServer::start("h2load-grpc", ServerOpts::default()).await;
    let body = grpc.dir.join("body");
    std::fs::write(&body, vec![b'x'; 50_000]).unwrap();
    let out = Command::new(&h2load)
        .args(["-n", "4", "-c", "1", "-m", "2", "-d"])
        .arg(&body)
        .arg(format!("http://{}/upload", grpc.addr))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0 2xx, 0 3xx, 4 4xx"),
        "h2load against gRPC framing:\n{text}"
    );
    grpc.stop().await;
    assert_eq!(s.data_bytes_in, total_bytes);
    assert_eq!(s.server_rpc_status.get("OK"), Some(&total_reqs));
    // Units of 16 KiB plus one short tail unit per body.
    let units: u64 = [1_000u64, 100_000, 300_000]
        .iter()
        .map(|b| 6 * b.div_ceil(16_384))
        .sum();
    assert_eq!(s.decoded, units);
    assert_eq!(s.completed, units);
    assert_eq!(s.checks["credit"].ok, Some(true));
    assert_eq!(s.checks["no_data_beyond_credit"].ok, Some(true));
    support::assert_released_as_told_by_a_sound_peer(&s);
}

/// Frames from `nghttp -v` output: (send?, type, length, flags, stream).
fn nghttp_frames(log: &str) -> Vec<(bool, String, u32, u8, u32)> {
    let mut out = vec![];
    for line in log.lines() {
        let Some(rest) = line.split_once("] ").map(|x| x.1) else {
            continue;
        };
        let (send, rest) = match rest.split_once(' ') {
            Some(("send", r)) => (true, r),
            Some(("recv", r)) => (false, r),
            _ => continue,
        };
        let Some((ty, rest)) = rest.split_once(" frame <length=") else {
            continue;
        };
        let (len, rest) = rest.split_once(", flags=0x").unwrap();
        let (flags, rest) = rest.split_once(", stream_id=").unwrap();
        let stream = rest.trim_end_matches('>');
        out.push((
            send,
            ty.to_string(),
            len.parse().unwrap(),
            u8::from_str_radix(flags, 16).unwrap(),
            stream.parse().unwrap(),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nghttp_frame_log_agrees_with_our_trace() {
    let Some(nghttp) = require_tool("nghttp") else {
        return;
    };
    let server = TestServer::start("nghttp", raw_server("4KiB")).await;
    let body = server.dir.join("body");
    std::fs::write(&body, vec![7u8; 200_000]).unwrap();
    let out = Command::new(&nghttp)
        .arg("-v")
        .arg("-d")
        .arg(&body)
        .arg(format!("http://{}/upload", server.addr))
        .output()
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "nghttp failed:\n{log}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        log.contains("\"completed\":49"),
        "the raw server answers with its counts:\n{log}"
    );
    let (s, dir) = server.stop().await;
    assert_eq!(s.data_bytes_in, 200_000);
    // The same upload against gRPC framing gets a clear 415 with a reason.
    let grpc = TestServer::start("nghttp-grpc", ServerOpts::default()).await;
    let out = Command::new(&nghttp)
        .arg("-d")
        .arg(&body)
        .arg("-v")
        .arg(format!("http://{}/upload", grpc.addr))
        .output()
        .await
        .unwrap();
    let refused = String::from_utf8_lossy(&out.stdout);
    assert!(refused.contains(":status: 415"), "{refused}");
    assert!(refused.contains("this server speaks gRPC"), "{refused}");
    grpc.stop().await;
    let theirs = nghttp_frames(&log);
    let ours = support::tap_frames(&dir, Endpoint::Server);
    for (their_dir, our_dir) in [(true, Dir::In), (false, Dir::Out)] {
        let a: Vec<(String, u32, u8, u32)> = theirs
            .iter()
            .filter(|f| f.0 == their_dir)
            .map(|f| (f.1.clone(), f.2, f.3, f.4))
            .collect();
        let b: Vec<(String, u32, u8, u32)> = ours
            .iter()
            .filter(|f| f.0 == our_dir)
            .map(|f| (f.1.clone(), f.4, f.2, f.3))
            .collect();
        assert!(a.len() > 5, "{a:?}");
        // nghttp logs what it saw before it exited; our tap may see a later GOAWAY.
        assert!(
            b.len() >= a.len(),
            "{our_dir:?}: ours {} < nghttp {}",
            b.len(),
            a.len()
        );
        assert_eq!(
            &b[..a.len()],
            &a[..],
            "{our_dir:?}: nghttp and the tap disagree"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_uploads_to_raw_and_gets_a_clear_error_from_grpc_framing() {
    let Some(curl) = require_tool("curl") else {
        return;
    };
    let raw = TestServer::start("curl-raw", raw_server("1000")).await;
    let body = raw.dir.join("body");
    std::fs::write(&body, vec![1u8; 10_500]).unwrap();
    let out = Command::new(&curl)
        .args(["-sS", "--http2-prior-knowledge", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(format!("http://{}/upload", raw.addr))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("\"completed\":11"),
        "10 units of 1000 bytes and a 500-byte tail: {text}"
    );
    let (s, _) = raw.stop().await;
    assert_eq!(s.data_bytes_in, 10_500);

    let grpc = TestServer::start("curl-grpc", ServerOpts::default()).await;
    let out = Command::new(&curl)
        .args([
            "-sS",
            "--http2-prior-knowledge",
            "-w",
            "%{http_code}",
            "--data-binary",
        ])
        .arg(format!("@{}", body.display()))
        .arg(format!("http://{}/upload", grpc.addr))
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.ends_with("415"), "{text}");
    assert!(
        text.contains("--framing raw:SIZE"),
        "the error says what to do: {text}"
    );
    grpc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_nghttpd() {
    let Some(nghttpd) = require_tool("nghttpd") else {
        return;
    };
    let port = support::peer_port();
    let docroot = support::temp_dir("nghttpd-root");
    let mut child = Command::new(&nghttpd)
        .args(["--no-tls", "--echo-upload", "-a", "127.0.0.1", "-d"])
        .arg(&docroot)
        .arg(port.to_string())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Wait until it listens.
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(up, "nghttpd did not start");
    let dir = support::temp_dir("nghttpd-client");
    let (writer, rec) =
        h2probe::trace::TraceWriter::create(&dir.join("trace.jsonl"), 1 << 16).unwrap();
    let opts = h2probe::client::ClientOpts {
        rate: 200.0,
        duration: "500ms".parse().unwrap(),
        payload: "4KiB".parse().unwrap(),
        ..Default::default()
    };
    let ctx = support::client_ctx(opts, addr, rec.clone());
    let outcomes = h2probe::client::run(ctx).await.unwrap();
    child.kill().await.unwrap();
    drop(rec);
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    // nghttpd is no gRPC server: it echoes the body with no grpc-status, and
    // the client says so instead of pretending success.
    assert_eq!(outcomes.len(), 1);
    assert_eq!(
        outcomes[0].status,
        h2probe::grpc::status::INTERNAL,
        "{:?}",
        outcomes[0]
    );
    assert!(
        outcomes[0].message.contains("without grpc-status"),
        "{:?}",
        outcomes[0]
    );
    let a = h2probe_analysis::analyze::analyze_trace(&dir.join("trace.jsonl")).unwrap();
    let s = &a.summary;
    assert!(s.sent >= 90, "{}", s.sent);
    assert_eq!(s.scheduled, s.sent + s.never_sent);
    assert_eq!(s.checks["no_data_beyond_credit"].ok, Some(true));
    // nghttpd breaks none of the rules the client's tap judges.
    assert!(s.rules_broken.is_empty(), "{:?}", s.rules_broken);
    // The echo came back whole: DATA in at the client = DATA out.
    let frames = support::tap_frames(&dir, Endpoint::Client);
    let sum = |d: Dir| -> u64 {
        frames
            .iter()
            .filter(|f| f.0 == d && f.1 == "DATA" && f.3 == 1)
            .map(|f| f.4 as u64)
            .sum()
    };
    assert_eq!(sum(Dir::In), sum(Dir::Out));
}
