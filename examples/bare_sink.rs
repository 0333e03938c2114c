//! The bare h2 sink the benchmark measures h2probe against: the same h2
//! server, no tap, no recorder, no queue. It releases capacity as each chunk
//! arrives and answers 200 with the JSON counts h2probe answers a plain POST with (the
//! same frames, so the client does the same work against both).
//!
//! `cargo run --release --example bare_sink -- [WINDOW]` prints
//! `listening on ADDR` (an ephemeral port on 127.0.0.1) and serves until
//! killed. WINDOW (bytes, default 65535) is the stream and connection window.

use bytes::Bytes;

/// The allocator h2probe's binary uses, so the comparison measures the
/// probe's work, not the allocator.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let window: u32 = std::env::args()
        .nth(1)
        .and_then(|w| w.parse().ok())
        .unwrap_or(65_535);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("listening on {}", listener.local_addr()?);
    loop {
        let (sock, _) = listener.accept().await?;
        let _ = sock.set_nodelay(true);
        tokio::spawn(async move {
            let Ok(mut conn) = h2::server::Builder::new()
                .initial_window_size(window)
                .initial_connection_window_size(window)
                .handshake::<_, Bytes>(sock)
                .await
            else {
                return;
            };
            while let Some(Ok((req, mut respond))) = conn.accept().await {
                tokio::spawn(async move {
                    let mut body = req.into_body();
                    let (mut chunks, mut bytes) = (0u64, 0u64);
                    while let Some(Ok(chunk)) = body.data().await {
                        chunks += 1;
                        bytes += chunk.len() as u64;
                        let _ = body.flow_control().release_capacity(chunk.len());
                    }
                    // The reply h2probe gives a plain (non-gRPC) POST, so both
                    // servers write the same frames and the client reads the same.
                    let resp = http::Response::builder()
                        .status(200)
                        .header("content-type", "application/json")
                        .body(())
                        .unwrap();
                    let reply = format!(
                        "{{\"received\":{chunks},\"completed\":{chunks},\"discarded\":0,\"received_bytes\":{bytes}}}\n"
                    );
                    if let Ok(mut s) = respond.send_response(resp, false) {
                        let _ = s.send_data(Bytes::from(reply), true);
                    }
                });
            }
        });
    }
}
