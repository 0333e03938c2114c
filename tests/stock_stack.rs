//! The stock stack: `--release frame` reproduces what hyper (what tonic runs
//! on) does, shown by running the same h2probe client against the probe's h2
//! server and against the reference server on hyper 1.x (`--stack hyper`).

mod support;

use h2probe::commands::run::RunResult;
use h2probe::config::Stack;
use h2probe_analysis::analyze::Summary;
use h2probe_analysis::meta::Meta;
use support::{assert_checks, dur, run, run_opts, temp_dir};

/// Part 1's setup (16 KiB messages offered at 300/s, a 10 ms worker,
/// 65,535-byte windows, unbounded queue, release on frame), 3 s of offered
/// load, on the given `--stack`.
fn part1(root: &std::path::Path, stack: &str) -> RunResult {
    let mut o = run_opts(&root.join(stack), "frame", "unbounded");
    o.server.stack = match stack {
        "h2" => Stack::H2,
        _ => Stack::Hyper,
    };
    o.client.duration = dur("3s");
    let r = run(o);
    assert_checks(&r);
    let s = &r.summary;
    assert_eq!(
        s.rpc_status.get("OK"),
        Some(&1),
        "{stack}: {:?}",
        s.rpc_status
    );
    assert_eq!(s.completed, s.scheduled, "{stack}: {s:#?}");
    assert_eq!(
        Meta::read(&r.dir).unwrap().config.stack(),
        stack,
        "the run was served by the {stack} stack"
    );
    r
}

/// Stream WINDOW_UPDATEs the server sent per MiB of DATA it received.
fn updates_per_mib(s: &Summary) -> f64 {
    s.window_updates_out_stream as f64 / (s.data_bytes_in as f64 / (1 << 20) as f64)
}

fn within(what: &str, h2: f64, hyper: f64, tolerance: f64) {
    let rel = (hyper - h2).abs() / h2;
    assert!(
        rel <= tolerance,
        "{what}: h2 {h2:.2}, hyper {hyper:.2}: {:.2} % apart, more than {:.0} %",
        rel * 100.0,
        tolerance * 100.0
    );
}

/// The client's view of the two stacks matches: send rate within 2 %,
/// stream WINDOW_UPDATEs per MiB received within 10 %, the median
/// WINDOW_UPDATE increment within 5 % and the p90 on two or three
/// messages' release on both, no window-blocked time on either
/// (under 0.05 s of the 3 s: a server stall of one window, 4 messages or
/// ≈ 13 ms, would already show).
///
/// Measured by this test (debug build, this project's 2-core machine, 3 s
/// each): h2 300.2 msg/s sent, 449 stream updates for 14,762,570 B (31.9 per
/// MiB), increment p50 = p90 = 32,831 B (the histogram bucket of 32,804),
/// 0.0000 s window-blocked; hyper 300.2 msg/s, 444 (31.5 per MiB, 1.1 %
/// fewer), 32,831 / 32,831 B, 0.0068 s. The tolerances hold with room because
/// both stacks run the same h2 0.4 receive side: hyper's
/// `Incoming::poll_frame` calls `release_capacity(len)` for each DATA frame
/// as the application polls it, which is what `--release frame` does after
/// `RecvStream::data()`, and h2's `flow_control.rs` coalesces the releases
/// the same way in both (a stream WINDOW_UPDATE once unclaimed credit
/// reaches half the window: two framed messages of ≈ 16,400 B).
///
/// The small difference in update counts comes from scheduling, not from a
/// different policy: when the client falls a few ms behind its schedule (the
/// client, the server and the trace writer share 2 cores), it sends two
/// messages back to back, the handler polls all four frames before the
/// connection task writes, and one update carries three messages (≈ 49,200 B
/// instead of ≈ 32,800). Every such triple update we looked at (6, in two
/// hyper runs) followed such a burst. Bursts were more frequent in the hyper
/// runs (9 vs 1 and 9 vs 2 in two pairs of runs; 3 triple updates per hyper
/// run, none with h2), so the hyper server seems to cost the shared cores a
/// little more, but the effect is ≈ 1 % of the updates, well inside 5 %.
///
/// Not compared: release → WINDOW_UPDATE latency. Its distribution is
/// bimodal (the first message of a pair waits ≈ 3.3 ms for the second, the
/// second ≈ 0), so its median lands on either mode from run to run on
/// either stack (measured p50 2.19 ms for h2 and 0.69 ms for hyper in one
/// pair of runs, p90 4.0 ms on both).
///
/// On a busy machine the bursts can take one pair past 5 % (CI: 449 h2
/// updates against 426 for hyper, 5.1 %; loaded debug runs up to 7.9 %,
/// and the p90 increment on the three-message bucket for one stack, the
/// two-message one for the other, 33 % apart): hence 10 % on the count
/// and a band, not a pairing, on the p90; and a pair past 10 % is
/// measured again, once, and judged on the second. A real difference of
/// policy fails both: a WINDOW_UPDATE per message would be twice as many,
/// each of one message, and one per frame about four times as many.
#[test]
fn release_frame_reproduces_hyper_as_the_client_sees_it() {
    let pair = |k: u32| {
        let root = temp_dir(&format!("stock-stack-{k}"));
        (part1(&root, "h2"), part1(&root, "hyper"))
    };
    // The burst-sensitive figure: updates per MiB.
    let close = |h2: &RunResult, hyper: &RunResult| {
        let (a, b) = (
            updates_per_mib(&h2.summary),
            updates_per_mib(&hyper.summary),
        );
        (b - a).abs() / a <= 0.10
    };
    let (mut h2, mut hyper) = pair(0);
    if !close(&h2, &hyper) {
        eprintln!(
            "stream WINDOW_UPDATEs per MiB {:.2} (h2) and {:.2} (hyper): more than 10 % apart, \
             measuring the pair again",
            updates_per_mib(&h2.summary),
            updates_per_mib(&hyper.summary),
        );
        (h2, hyper) = pair(1);
    }
    let (a, b) = (&h2.summary, &hyper.summary);
    for (name, s) in [("h2", a), ("hyper", b)] {
        eprintln!(
            "{name:5}  sent {:.1}/s  stream WINDOW_UPDATEs {} for {} B ({:.1} per MiB)  increment p50 {} p90 {}  \
             window-blocked {:.4} s  queue growth {:.1} msg/s",
            s.send_rate,
            s.window_updates_out_stream,
            s.data_bytes_in,
            updates_per_mib(s),
            s.window_update_increment.p50,
            s.window_update_increment.p90,
            s.client_window_blocked_s,
            s.queue_growth_rate,
        );
    }
    within("send rate", a.send_rate, b.send_rate, 0.02);
    within(
        "stream WINDOW_UPDATEs per MiB",
        updates_per_mib(a),
        updates_per_mib(b),
        0.10,
    );
    within(
        "increment p50",
        a.window_update_increment.p50,
        b.window_update_increment.p50,
        0.05,
    );
    for (name, s) in [("h2", a), ("hyper", b)] {
        // Half the 65,535-byte window's worth of framed 16 KiB messages
        // (two, 32,806 B) or, after a burst, three (49,209 B); the
        // histogram's buckets are within 0.2 %.
        let p90 = s.window_update_increment.p90;
        assert!(
            (32_700.0..=49_400.0).contains(&p90),
            "{name}: increment p90 {p90}"
        );
        assert!(
            // Measured 0.0000 and 0.0068 s on a quiet machine; the room is
            // for a loaded one's late updates. A server that tied credit to
            // its 10 ms worker would wait on the window for seconds.
            s.client_window_blocked_s < 0.25,
            "{name}: window-blocked {} s",
            s.client_window_blocked_s
        );
        // And the stock stack shows Part 1's failure: the queue absorbs
        // offered − served (300 − 90 msg/s) while credit keeps flowing.
        assert!(
            s.queue_growth_rate > 150.0 && s.queue_growth_rate < 260.0,
            "{name}: queue growth {}",
            s.queue_growth_rate
        );
    }
    std::fs::remove_dir_all(h2.dir.parent().unwrap()).unwrap();
}

/// hyper decides when credit is released: any other release point or queue
/// policy is refused before anything starts, saying why.
#[test]
fn the_hyper_stack_refuses_what_hyper_decides() {
    use h2probe::config::CapturePayload;
    use h2probe::server::ServerOpts;
    for (release, queue, needle) in [
        ("complete", "unbounded", "--release frame"),
        ("decode", "unbounded", "--release frame"),
        ("frame", "bounded:8", "--queue unbounded"),
        ("frame", "direct", "--queue unbounded"),
    ] {
        let opts = ServerOpts {
            stack: Stack::Hyper,
            release: release.parse().unwrap(),
            queue: queue.parse().unwrap(),
            ..Default::default()
        };
        let err = opts
            .validate(CapturePayload::None, None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{release}/{queue}: {err}");
        assert!(
            err.contains("hyper decides when credit is released"),
            "{err}"
        );
        assert!(!err.contains('\n'), "one line: {err}");
    }
}
