//! The bare h2 sink the benchmark measures h2probe against: the same h2
//! server, no tap, no recorder, no queue. It releases capacity as each chunk
//! arrives and answers 200 with an empty body when the request ends.
//!
//! `cargo run --release --example bare_sink -- [WINDOW]` prints
//! `listening on ADDR` (an ephemeral port on 127.0.0.1) and serves until
//! killed. WINDOW (bytes, default 65535) is the stream and connection window.

use bytes::Bytes;

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
                    while let Some(Ok(chunk)) = body.data().await {
                        let _ = body.flow_control().release_capacity(chunk.len());
                    }
                    let resp = http::Response::builder().status(200).body(()).unwrap();
                    let _ = respond.send_response(resp, true);
                });
            }
        });
    }
}
