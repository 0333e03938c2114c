//! A tonic server for `tests/proto/sensors.proto` (`sensors.v3.Telemetry`),
//! to point `h2probe client --proto` at: the Part 1 shape (65,535-byte
//! windows, tonic releasing credit per frame, an unbounded queue in front of
//! one worker). The same service `tests/any_method.rs` drives. It also
//! serves gRPC's reflection service (v1 and v1alpha), so `h2probe client
//! --reflect` can call it without the .proto.
//!
//! `cargo run --example telemetry_server -- [PORT] [SERVICE_MS] [nodelay]`
//! (defaults 50061 and 10) prints `listening on ADDR` and serves until
//! killed. Its sockets keep Nagle's algorithm on (as tonic leaves a
//! listener it is handed) unless `nodelay` is given: a unary call's answer
//! then waits for the client's delayed ACK of the server's last WINDOW_UPDATE.

#[path = "../tests/support/telemetry.rs"]
mod telemetry;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let port = args.next().and_then(|p| p.parse().ok()).unwrap_or(50061);
    let ms = args.next().and_then(|m| m.parse().ok()).unwrap_or(10);
    let nodelay = args.next().is_some_and(|a| a == "nodelay");
    let proto = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/proto/sensors.proto");
    let mut compiler = protox::Compiler::new([std::path::Path::new(proto).parent().unwrap()])
        .expect("the proto directory");
    compiler.include_imports(true);
    compiler
        .open_file("sensors.proto")
        .expect("tests/proto/sensors.proto");
    let descriptors = prost::Message::encode_to_vec(&compiler.file_descriptor_set());
    let server = telemetry::TonicServer::start_with(
        ("127.0.0.1", port),
        std::time::Duration::from_millis(ms),
        Some(&descriptors),
        nodelay,
    )
    .await;
    println!("listening on 127.0.0.1:{}", server.port);
    let _ = tokio::signal::ctrl_c().await;
}
