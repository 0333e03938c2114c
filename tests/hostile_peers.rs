//! Peers that do not speak HTTP/2 properly: the server survives, h2 closes
//! the connection, and the tap records what was wrong, with byte offsets.

mod support;

use h2probe::server::ServerOpts;
use h2probe::trace::schema::{Endpoint, Kind};
use h2probe::wire::encode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn send_raw(addr: std::net::SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut back = vec![];
    // h2 answers (SETTINGS, GOAWAY) and closes; bounded by a timeout.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut back)).await;
    back
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_oversize_frames_are_recorded_and_the_server_keeps_serving() {
    let opts = ServerOpts {
        service_time: "1ms".parse().unwrap(),
        ..Default::default()
    };
    let server = support::TestServer::start("hostile", opts).await;
    // An HTTP/1.1 request where the preface should be.
    send_raw(server.addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    // A valid preface, then a DATA frame far above SETTINGS_MAX_FRAME_SIZE.
    let mut big = encode::preface();
    big.extend(encode::settings(false, &[]));
    big.extend(&encode::data(1, 0, None, &vec![0; 70_000]));
    let back = send_raw(server.addr, &big).await;
    // h2 ends that connection with GOAWAY FRAME_SIZE_ERROR (0x6).
    let mut p = h2probe::wire::Parser::server_to_client();
    let mut goaway = None;
    p.feed(&back, |r| {
        if let Ok(h2probe::wire::Parsed::Frame(f)) = r {
            if let h2probe::wire::Body::GoAway { error_code, .. } = f.body {
                goaway = Some(error_code);
            }
        }
    });
    assert_eq!(goaway, Some(0x6), "GOAWAY FRAME_SIZE_ERROR expected");

    // The server still serves a well-behaved client.
    let client = h2probe::client::ClientOpts {
        duration: "300ms".parse().unwrap(),
        ..Default::default()
    };
    let ctx = support::client_ctx(client, server.addr, h2probe::trace::Recorder::disabled());
    let outcomes = h2probe::client::run(ctx).await.unwrap();
    assert_eq!(outcomes[0].status, 0, "{:?}", outcomes[0]);
    let (s, dir) = server.stop().await;
    assert!(s.completed >= 80, "{}", s.completed);

    let mut errors = vec![];
    for e in h2probe_analysis::reader::TraceReader::open(&dir.join("trace.jsonl")).unwrap() {
        let e = e.unwrap();
        if let (Endpoint::Server, Kind::WireError(w)) = (e.ep, &e.kind) {
            errors.push((e.conn, w.offset, w.error.clone()));
        }
    }
    assert!(
        errors.iter().any(|(c, off, msg)| *c == 1
            && *off == 0
            && msg.contains("bad client connection preface")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|(c, off, msg)| *c == 2
            && *off == 33
            && msg.contains("DATA frame of 70000 bytes exceeds the max frame size 16384")),
        "{errors:?}"
    );
}
