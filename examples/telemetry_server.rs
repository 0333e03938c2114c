//! A tonic server for `tests/proto/sensors.proto` (`sensors.v3.Telemetry`),
//! to point `h2probe client --proto` at: the Part 1 shape (65,535-byte
//! windows, tonic releasing credit per frame, an unbounded queue in front of
//! one worker). The same service `tests/any_method.rs` drives.
//!
//! `cargo run --example telemetry_server -- [PORT] [SERVICE_MS]` (defaults
//! 50061 and 10) prints `listening on ADDR` and serves until killed.

#[path = "../tests/support/telemetry.rs"]
mod telemetry;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let port = args.next().and_then(|p| p.parse().ok()).unwrap_or(50061);
    let ms = args.next().and_then(|m| m.parse().ok()).unwrap_or(10);
    let server = telemetry::TonicServer::start(port, std::time::Duration::from_millis(ms)).await;
    println!("listening on 127.0.0.1:{}", server.port);
    let _ = tokio::signal::ctrl_c().await;
}
