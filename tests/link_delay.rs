//! With a round trip, the window becomes a throughput limit (window / RTT):
//! the bandwidth-delay product the instrument lets you see frame by frame.

mod support;

use support::{dur, run, run_opts, temp_dir};

/// The tests of this file run one at a time: they measure rates against
/// the clock, and two of them sharing the 2 cores would measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A 1.5 s run over a shaped link with a fast worker (only the transport
/// can be the bottleneck) and the server's windows set to `window`.
fn over_link(
    name: &str,
    window: &str,
    shape: impl FnOnce(&mut h2probe::client::ClientOpts),
) -> h2probe::commands::run::RunResult {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
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

/// Every figure the slow-link verdicts rest on, for a failure's message
/// (a CI failure must say what happened without the run directory).
fn blocked_account(r: &h2probe::commands::run::RunResult) -> String {
    let s = &r.summary;
    format!(
        "{}: {} sent over {:.3} s ({:.1}/s; never sent {:?}; RPCs {:?}); blocked on the \
         socket {:.3} s ({} intervals, longest {:.1} ms), on h2's buffer {:.3} s, on the \
         window {:.3} s",
        r.dir.display(),
        s.sent,
        s.span_s,
        s.send_rate,
        s.never_sent_by_reason,
        s.rpc_status,
        s.client_socket_blocked_s,
        s.socket_blocked_ms.count,
        s.socket_blocked_ms.max,
        s.client_h2_buffer_blocked_s,
        s.client_window_blocked_s,
    )
}

#[test]
fn a_slow_link_blocks_the_sender_on_the_socket_when_the_window_is_large() {
    // 512 KiB/s ≈ 32 messages of 16 KiB per second.
    let big = slow_link("slow-1m", "1MiB");
    support::assert_checks(&big);
    let s = &big.summary;
    let account = blocked_account(&big);
    assert!(s.send_rate > 15.0 && s.send_rate < 70.0, "{account}");
    assert!(s.client_socket_blocked_s > 0.5, "{account}");
    // h2 withholds capacity while its send buffer is full: the window was
    // open all along, so none of that wait is window-blocked.
    assert!(s.client_h2_buffer_blocked_s > 0.5, "{account}");
    assert!(
        s.client_window_blocked_s < 0.1 * s.client_h2_buffer_blocked_s,
        "{account}"
    );
    // With the default 64 KiB window, the window binds before the socket does.
    let small = slow_link("slow-64k", "65535");
    let s = &small.summary;
    let account = blocked_account(&small);
    assert!(s.client_window_blocked_s > 1.0, "{account}");
    // A tenth of the window's wait (quiet runs reached 0.065 s against an
    // absolute 0.1 s).
    assert!(
        s.client_socket_blocked_s < 0.1 * s.client_window_blocked_s,
        "{account}"
    );
    assert!(
        s.client_h2_buffer_blocked_s < 0.1 * s.client_window_blocked_s,
        "{account}"
    );
}

/// The law: with release on receipt, a stream can move one window per
/// round trip, W / RTT. The user-space link delivers its nominal delay (no
/// 1 ms timer rounding): in a release build the steady rate is 99 % of the
/// nominal W / (2 × delay) at 25 and 50 ms (README). This test runs the
/// debug build, whose own processing adds to each round trip: 97–99 % here,
/// one run at a time, 89 % once on a loaded CI machine (≈ 12 ms more per
/// 100 ms round trip) and 92 % beside three busy loops (at most 18 ms). So
/// it judges the time a round trip takes beyond the nominal, which a
/// machine's load adds whatever the delay, and allows 28 ms of it: the
/// law, not the machine, is what it checks (a server that tied credit to
/// a 10 ms worker would add 40 ms: four messages a window, each 10 ms;
/// a bound on the ratio that let CI's 89 % pass at 50 ms would let that
/// server's 83 % pass at 100 ms);
/// the link's accuracy
/// itself is checked frame by frame below (the debug build's pump adds
/// ≈ 0.4 ms; the release build's stays within 0.2 ms).
#[test]
fn throughput_is_window_over_the_nominal_round_trip() {
    for delay_ms in [50u64, 100] {
        let r = over_link(&format!("wrtt-{delay_ms}"), "65535", |c| {
            c.link_delay = dur(&format!("{delay_ms}ms"));
            // At least 30 round trips: the per-round-trip staircase of
            // sends (4 messages a window) must not bias the slope.
            c.duration = dur(&format!("{}ms", 60 * delay_ms));
        });
        let s = &r.summary;
        support::assert_checks(&r);
        let framed = s.data_bytes_in as f64 / s.decoded as f64;
        let law = 65_535.0 / (2.0 * delay_ms as f64 / 1e3);
        let measured = s.send_rate_steady * framed;
        let ratio = measured / law;
        // The round trip the rate implies, beyond the nominal one.
        let extra_ms = (65_535.0 / measured - 2.0 * delay_ms as f64 / 1e3) * 1e3;
        eprintln!(
            "delay {delay_ms} ms: {measured:.0} B/s = {ratio:.3} × W/RTT, {extra_ms:.1} ms a round trip over"
        );
        assert!(
            ratio <= 1.03 && extra_ms < 28.0,
            "delay {delay_ms} ms: steady {measured:.0} B/s vs W/RTT {law:.0} B/s (ratio {ratio:.3}, \
             {extra_ms:.1} ms a round trip over the nominal)"
        );
        // The link's own accuracy, frame by frame. Not early (by more than
        // the tap's stamp trailing the link's entry, ≈ 0.1 ms); the fastest
        // frame within 1 ms of the delay (tokio's 1 ms timer tick, which the
        // link's precise last stretch replaced, made every frame 1.1–1.4 ms
        // late, the fastest too); the median within 3 ms (a loaded machine
        // delays the pump thread: CI's debug build read 102.02 ms at 100 ms;
        // the README gives the measured medians).
        let lat = &s.c2s_frame_latency_ms;
        let d = delay_ms as f64;
        eprintln!(
            "delay {delay_ms} ms: c2s min {:.3} p50 {:.3} ms",
            lat.min, lat.p50
        );
        assert!(
            lat.min >= d - 0.5 && lat.min < d + 1.0 && lat.p50 < d + 3.0,
            "delay {delay_ms} ms delivered in {:.3} ms at the fastest, {:.3} ms median",
            lat.min,
            lat.p50
        );
        assert_eq!(s.c2s_frame_latency_negative, 0);
    }
}

/// A link slower than a second, and Ctrl-C: both sides end every RPC at
/// once while the client's DATA is still on the link, so frames of each
/// stream reach the server's tap 1.5 s after both ends. Each stream is
/// still one stream, with every byte the server's tap saw (recounted here
/// from the trace), and no stream is called starved: the analysis waits
/// for the taps to agree before it judges and forgets a stream.
#[test]
fn frames_landing_over_a_second_after_the_end_stay_in_their_stream() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = temp_dir("late-frames");
    let args = [
        "run",
        "--streams",
        "4",
        "--duration",
        "30s",
        "--link-delay",
        "1500ms",
        "--stream-window",
        "16MiB",
        "--conn-window",
        "64MiB",
        "--service-time",
        "1ms",
        "--quiet",
        "--no-pcap",
    ];
    support::run_interrupted(&args, &dir, "complete", 40);
    let s = support::read_summary(&dir);

    // From the trace: the server tap's DATA bytes per stream, and how late
    // the last of them came after the later of the stream's two ends.
    let mut bytes: std::collections::BTreeMap<(u64, u64), u64> = Default::default();
    let mut last: std::collections::BTreeMap<(u64, u64), u64> = Default::default();
    let mut ends: std::collections::BTreeMap<u64, u64> = Default::default();
    for line in std::fs::read_to_string(dir.join("trace.jsonl"))
        .unwrap()
        .lines()
    {
        let e: serde_json::Value = serde_json::from_str(line).unwrap();
        let (Some(t), Some(stream)) = (e["t"].as_u64(), e["stream"].as_u64()) else {
            continue;
        };
        let key = (e["conn"].as_u64().unwrap(), stream);
        match (e["type"].as_str(), e["ep"].as_str()) {
            (Some("frame"), Some("server")) if e["frame"] == "DATA" && e["dir"] == "in" => {
                *bytes.entry(key).or_default() += e["len"].as_u64().unwrap();
                last.insert(key, t);
            }
            (Some("rpc_end"), _) => {
                let end = ends.entry(stream).or_default();
                *end = (*end).max(t);
            }
            _ => {}
        }
    }
    let late = last
        .iter()
        .map(|((_, id), t)| t.saturating_sub(ends[id]))
        .min()
        .unwrap();
    assert!(
        late > 1_000_000_000,
        "the scenario needs every stream's last DATA over a second after its ends; one came {late} ns after"
    );
    assert_eq!(s.stream_count, 4, "{:#?}", s.streams);
    let listed: std::collections::BTreeMap<(u64, u64), u64> = s
        .streams
        .iter()
        .map(|f| ((u64::from(f.conn), u64::from(f.stream)), f.bytes))
        .collect();
    assert_eq!(listed, bytes);
    assert!(s.starved_streams.is_empty(), "{:?}", s.starved_streams);
    assert_eq!(
        s.checks["bytes"].ok,
        Some(true),
        "{}",
        s.checks["bytes"].detail
    );
}

/// On a link slower than one frame per --stall-timeout, bytes arrive one
/// frame at a time (16 KiB at 20 KB/s: 0.8 s apart): that is the link's
/// pace, not a stall. The watcher allowed only the link's delays and ended
/// such a run as stalled.
#[test]
fn a_link_slower_than_a_frame_per_stall_timeout_is_not_a_stall() {
    let r = over_link("slow-frames", "65535", |c| {
        c.link_rate = Some("20000".parse().unwrap());
        c.link_delay = dur("10ms");
        c.stall_timeout = dur("500ms");
        c.max_pending = 3;
    });
    assert_eq!(r.summary.stalls, 0, "{:?}", r.summary.stall);
    assert!(r.summary.decoded > 0, "{}", blocked_account(&r));
}
