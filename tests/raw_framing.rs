//! `--framing raw:SIZE`: any POST/PUT body as SIZE-byte work units, with
//! every release point and queue policy applying unchanged (no external
//! tools needed; h2load, nghttp and curl drive it in interop_tools.rs).

mod support;

use bytes::Bytes;
use h2probe::config::{ReleasePoint, ReleaseSpec};
use h2probe::server::ServerOpts;

/// POSTs `body` in one go and returns (HTTP status, response body).
async fn post(addr: std::net::SocketAddr, body: Vec<u8>) -> (u16, String) {
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::handshake(sock).await.unwrap();
    tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    let req = http::Request::put(format!("http://{addr}/units"))
        .body(())
        .unwrap();
    let (resp, mut send) = client.send_request(req, false).unwrap();
    let mut left = Bytes::from(body);
    while !left.is_empty() {
        send.reserve_capacity(left.len());
        let cap = std::future::poll_fn(|cx| send.poll_capacity(cx))
            .await
            .unwrap()
            .unwrap();
        send.send_data(left.split_to(cap.min(left.len())), false)
            .unwrap();
    }
    send.send_data(Bytes::new(), true).unwrap();
    let resp = resp.await.unwrap();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut text = Vec::new();
    while let Some(Ok(c)) = body.data().await {
        let _ = body.flow_control().release_capacity(c.len());
        text.extend_from_slice(&c);
    }
    (status, String::from_utf8(text).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_release_point_and_queue_policy_works_with_raw_units() {
    for release in [
        ReleasePoint::Frame,
        ReleasePoint::Decode,
        ReleasePoint::Start,
        ReleasePoint::Complete,
    ] {
        for queue in ["direct", "unbounded", "bounded:2"] {
            let opts = ServerOpts {
                framing: "raw:10000".parse().unwrap(),
                release: ReleaseSpec::uniform(release),
                queue: queue.parse().unwrap(),
                service_time: "1ms".parse().unwrap(),
                ..Default::default()
            };
            let server = support::TestServer::start("raw", opts).await;
            // 205,000 bytes: 20 whole units and a 5,000-byte tail.
            let (status, text) = post(server.addr, vec![9u8; 205_000]).await;
            let (s, _) = server.stop().await;
            let label = format!("{release:?}/{queue}");
            assert_eq!(status, 200, "{label}: {text}");
            let reply: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(reply["completed"], 21, "{label}: {text}");
            assert_eq!(reply["received_bytes"], 205_000, "{label}");
            assert_eq!((s.decoded, s.completed), (21, 21), "{label}");
            assert_eq!(s.released_bytes, 205_000, "{label}: every byte released");
            assert_eq!(
                s.checks["credit"].ok,
                Some(true),
                "{label}: {}",
                s.checks["credit"].detail
            );
            if release == ReleasePoint::Complete {
                // Owned bytes never exceed the window (6 units of 10,000 fit in 65,535).
                assert!(
                    s.max_owned_bytes <= 65_535,
                    "{label}: {}",
                    s.max_owned_bytes
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_unit_larger_than_the_window_is_refused_for_late_release() {
    let opts = ServerOpts {
        framing: "raw:100000".parse().unwrap(),
        release: ReleaseSpec::uniform(ReleasePoint::Complete),
        ..Default::default()
    };
    let err = opts
        .validate(h2probe::config::CapturePayload::None, None, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("units larger than --stream-window"), "{err}");
}

/// A unit within the stream window but past the connection window (the
/// default 65,535) can never complete either: `serve` alone, not knowing
/// the client's messages, refused it no more and hung until its idle
/// timeout. A raw unit is known without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raw_unit_larger_than_the_connection_window_is_refused_for_late_release() {
    let opts = |allow_deadlock| ServerOpts {
        framing: "raw:64KiB".parse().unwrap(),
        release: ReleaseSpec::uniform(ReleasePoint::Complete),
        stream_window: "128KiB".parse().unwrap(),
        allow_deadlock,
        ..Default::default()
    };
    let err = opts(false)
        .validate(h2probe::config::CapturePayload::None, None, None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "a stream can hold 65535 unreleasable bytes of a partial message, which exhausts \
             --conn-window 65535; raise it to at least 65536"
        ),
        "{err}"
    );
    assert!(opts(true)
        .validate(h2probe::config::CapturePayload::None, None, None)
        .is_ok());
    let fits = ServerOpts {
        framing: "raw:65535".parse().unwrap(),
        ..opts(false)
    };
    assert!(fits
        .validate(h2probe::config::CapturePayload::None, None, None)
        .is_ok());
}
