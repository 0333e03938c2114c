//! The tap on a real h2 conversation: what both taps saw agrees with itself,
//! with the bytes on the wire, and with what the application sent.

mod support;

use bytes::Bytes;
use h2probe::config::CapturePayload;
use h2probe::tap::{Tap, TapConfig};
use h2probe::trace::schema::{Dir, Endpoint, FrameType, Kind};
use h2probe::trace::TraceWriter;
use h2probe::wire::{Parsed, Parser};
use h2probe_analysis::reader::{Ending, TraceReader};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Copies every byte written through it (a wire recorder for tests).
struct Record<S> {
    inner: S,
    out: Arc<Mutex<Vec<u8>>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Record<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Record<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            self.out.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Serves one connection: reads every request body, releasing on receipt,
/// answers 200 with the byte count.
async fn serve<T: AsyncRead + AsyncWrite + Unpin>(io: T) {
    let mut conn = h2::server::handshake(io).await.unwrap();
    while let Some(req) = conn.accept().await {
        let (req, mut respond) = req.unwrap();
        tokio::spawn(async move {
            let mut body = req.into_body();
            let mut n = 0usize;
            while let Some(chunk) = body.data().await {
                let chunk = chunk.unwrap();
                n += chunk.len();
                body.flow_control().release_capacity(chunk.len()).unwrap();
            }
            let resp = http::Response::builder().status(200).body(()).unwrap();
            let mut send = respond.send_response(resp, false).unwrap();
            send.send_data(Bytes::from(n.to_string()), true).unwrap();
        });
    }
}

/// Posts `total` bytes in `chunk`-sized pieces, honouring send capacity.
async fn post<T: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    io: T,
    total: usize,
    chunk: usize,
) -> usize {
    let (client, conn) = h2::client::handshake(io).await.unwrap();
    let conn_task = tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    let req = http::Request::post("http://localhost/sink")
        .body(())
        .unwrap();
    let (resp, mut send) = client.send_request(req, false).unwrap();
    let mut left = total;
    while left > 0 {
        send.reserve_capacity(chunk.min(left));
        let cap = std::future::poll_fn(|cx| send.poll_capacity(cx))
            .await
            .unwrap()
            .unwrap();
        let n = cap.min(left);
        send.send_data(Bytes::from(vec![0xab; n]), false).unwrap();
        left -= n;
    }
    send.send_data(Bytes::new(), true).unwrap();
    let resp = resp.await.unwrap();
    let mut body = resp.into_body();
    let mut text = Vec::new();
    while let Some(c) = body.data().await {
        let c = c.unwrap();
        body.flow_control().release_capacity(c.len()).unwrap();
        text.extend_from_slice(&c);
    }
    drop((client, send, body));
    let _ = conn_task.await;
    String::from_utf8(text).unwrap().parse().unwrap()
}

fn frames_of(bytes: &[u8], parser: fn() -> Parser, split: Option<usize>) -> Vec<String> {
    let mut p = parser();
    let mut out = vec![];
    let parts: Vec<&[u8]> = match split {
        Some(k) => vec![&bytes[..k], &bytes[k..]],
        None => vec![bytes],
    };
    for part in parts {
        p.feed(part, |r| match r.unwrap() {
            Parsed::Frame(f) => out.push(format!("{f:?}")),
            Parsed::Preface { offset } => out.push(format!("preface@{offset}")),
        });
    }
    p.finish().unwrap();
    out
}

#[tokio::test]
async fn a_real_h2_conversation_parses_identically_at_every_split() {
    let (a, b) = tokio::io::duplex(1 << 16);
    let c2s = Arc::new(Mutex::new(Vec::new()));
    let s2c = Arc::new(Mutex::new(Vec::new()));
    let server = tokio::spawn(serve(Record {
        inner: b,
        out: s2c.clone(),
    }));
    let got = post(
        Record {
            inner: a,
            out: c2s.clone(),
        },
        5000,
        1000,
    )
    .await;
    assert_eq!(got, 5000);
    server.abort();
    let _ = server.await;
    for (bytes, parser) in [
        (
            c2s.lock().unwrap().clone(),
            Parser::client_to_server as fn() -> Parser,
        ),
        (
            s2c.lock().unwrap().clone(),
            Parser::server_to_client as fn() -> Parser,
        ),
    ] {
        let whole = frames_of(&bytes, parser, None);
        assert!(whole.len() >= 4, "{whole:?}");
        for k in 0..=bytes.len() {
            assert_eq!(
                frames_of(&bytes, parser, Some(k)),
                whole,
                "split at byte {k}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_taps_agree_on_data_bytes_and_window_updates() {
    let dir = support::temp_dir("tap");
    let path = dir.join("trace.jsonl");
    let (writer, rec) = TraceWriter::create(&path, 1 << 16).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let srec = rec.clone();
    let server = tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        let cfg = TapConfig {
            endpoint: Endpoint::Server,
            conn: 1,
            capture: CapturePayload::Headers,
        };
        serve(Tap::new(sock, cfg, srec)).await;
    });
    let sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    let cfg = TapConfig {
        endpoint: Endpoint::Client,
        conn: 1,
        capture: CapturePayload::Headers,
    };
    let total = 1_000_000;
    assert_eq!(
        post(Tap::new(sock, cfg, rec.clone()), total, 16_384).await,
        total
    );
    let _ = server.await;
    drop(rec);
    let stats = tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stats.dropped_total(), 0);

    let mut data = [[0u64; 2]; 2]; // [endpoint][dir]
    let mut wu_server_out = vec![];
    let mut wu_client_in = vec![];
    let mut r = TraceReader::open(&path).unwrap();
    for e in r.by_ref() {
        let e = e.unwrap();
        if let Kind::Frame(f) = &e.kind {
            let (ei, di) = (e.ep as usize, f.dir as usize);
            if f.frame == FrameType::DATA && e.stream == 1 {
                data[ei][di] += f.data_len() as u64;
            }
            if f.frame == FrameType::WINDOW_UPDATE {
                let key = (e.stream, f.increment.unwrap());
                match (e.ep, f.dir) {
                    (Endpoint::Server, Dir::Out) => wu_server_out.push(key),
                    (Endpoint::Client, Dir::In) => wu_client_in.push(key),
                    _ => {}
                }
            }
        }
    }
    assert!(matches!(r.ending(), Ending::Clean(_)));
    let (server, client) = (Endpoint::Server as usize, Endpoint::Client as usize);
    let (dir_in, dir_out) = (Dir::In as usize, Dir::Out as usize);
    assert_eq!(data[client][dir_out], total as u64, "client tap, out");
    assert_eq!(data[server][dir_in], total as u64, "server tap, in");
    // 1 MB through 64 KiB windows needs many updates, and both taps saw the same ones.
    assert!(wu_server_out.len() > 10, "{wu_server_out:?}");
    assert_eq!(wu_server_out, wu_client_in);
    std::fs::remove_dir_all(&dir).unwrap();
}
