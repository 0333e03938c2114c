//! With a round trip, the window becomes a throughput limit (window / RTT):
//! the bandwidth-delay product the instrument lets you see frame by frame.

mod support;

use support::{dur, run, run_opts, temp_dir};

/// A 1.5 s run over a shaped link with a fast worker (only the transport
/// can be the bottleneck) and the server's windows set to `window`.
fn over_link(
    name: &str,
    window: &str,
    shape: impl FnOnce(&mut h2probe::client::ClientOpts),
) -> h2probe::commands::run::RunResult {
    let dir = temp_dir(name);
    let mut o = run_opts(&dir, "frame", "unbounded");
    o.client.duration = dur("1500ms");
    o.client.max_pending = 20;
    shape(&mut o.client);
    o.server.service_time = dur("1ms");
    o.server.stream_window = window.parse().unwrap();
    o.server.conn_window = window.parse().unwrap();
    o.output.no_pcap = true;
    run(o)
}

fn delayed(name: &str, window: &str) -> h2probe::commands::run::RunResult {
    over_link(name, window, |c| c.link_delay = dur("25ms"))
}

fn slow_link(name: &str, window: &str) -> h2probe::commands::run::RunResult {
    over_link(name, window, |c| {
        c.link_rate = Some("512KiB".parse().unwrap())
    })
}

#[test]
fn a_64k_window_over_a_50ms_round_trip_caps_throughput_near_window_over_rtt() {
    let r = delayed("delay-64k", "65535");
    let s = &r.summary;
    support::assert_checks(&r);
    // 65,535 B per 50 ms round trip ≈ 1.3 MB/s ≈ 80 framed 16 KiB messages/s.
    assert!(
        s.send_rate > 40.0 && s.send_rate < 110.0,
        "send rate {}",
        s.send_rate
    );
    assert!(
        s.client_window_blocked_s > 0.7,
        "window-blocked {}",
        s.client_window_blocked_s
    );
    // The delay is visible frame by frame: client tap write → server tap read.
    assert!(
        s.c2s_frame_latency_ms.p50 >= 25.0,
        "{:?}",
        s.c2s_frame_latency_ms
    );
    assert!(
        s.c2s_frame_latency_ms.p50 < 40.0,
        "{:?}",
        s.c2s_frame_latency_ms
    );
}

#[test]
fn a_window_above_the_bandwidth_delay_product_lets_the_offered_rate_through() {
    let r = delayed("delay-1m", "1MiB");
    let s = &r.summary;
    support::assert_checks(&r);
    assert!(s.send_rate > 250.0, "send rate {}", s.send_rate);
    assert!(
        s.client_window_blocked_s < 0.3,
        "window-blocked {}",
        s.client_window_blocked_s
    );
}

#[test]
fn a_slow_link_blocks_the_sender_on_the_socket_when_the_window_is_large() {
    // 512 KiB/s ≈ 32 messages of 16 KiB per second.
    let big = slow_link("slow-1m", "1MiB");
    support::assert_checks(&big);
    let s = &big.summary;
    assert!(
        s.send_rate > 15.0 && s.send_rate < 70.0,
        "send rate {}",
        s.send_rate
    );
    assert!(
        s.client_socket_blocked_s > 0.5,
        "socket-blocked {}",
        s.client_socket_blocked_s
    );
    // With the default 64 KiB window, the window binds before the socket does.
    let small = slow_link("slow-64k", "65535");
    let s = &small.summary;
    assert!(
        s.client_window_blocked_s > 1.0,
        "window-blocked {}",
        s.client_window_blocked_s
    );
    assert!(
        s.client_socket_blocked_s < 0.1,
        "socket-blocked {}",
        s.client_socket_blocked_s
    );
}
