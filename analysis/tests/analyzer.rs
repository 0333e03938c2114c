//! The analyzer on hand-built event sequences with known answers.

use h2probe_analysis::analyze::Analyzer;
use h2probe_analysis::reader::Ending;
use h2probe_analysis::schema::*;

fn ev(t: u64, ep: Endpoint, stream: u32, kind: Kind) -> Event {
    Event {
        t,
        ep,
        conn: 1,
        stream,
        kind,
    }
}

fn frame(dir: Dir, ty: FrameType, len: u32) -> FrameEv {
    FrameEv {
        dir,
        frame: ty,
        len,
        ..FrameEv::default()
    }
}

fn wu(dir: Dir, inc: u32) -> Kind {
    Kind::Frame(FrameEv {
        increment: Some(inc),
        ..frame(dir, FrameType::WINDOW_UPDATE, 4)
    })
}

fn release(bytes: u32) -> Kind {
    Kind::Release(ReleaseEv {
        bytes,
        at: ReleasePoint::Decode,
        seq: None,
    })
}

#[test]
fn release_to_update_latency_matches_coalesced_releases() {
    let s = Endpoint::Server;
    let mut a = Analyzer::new(0);
    // Four releases of 10,000 bytes at t = 1, 2, 3, 4 ms; h2 coalesces them
    // into one stream update of 20,000 at 2.5 ms and one of 20,000 at 10 ms.
    let ms = 1_000_000;
    for (t, k) in [
        (ms, release(10_000)),
        (2 * ms, release(10_000)),
        (5 * ms / 2, wu(Dir::Out, 20_000)),
        (3 * ms, release(10_000)),
        (4 * ms, release(10_000)),
        (10 * ms, wu(Dir::Out, 20_000)),
    ] {
        a.feed(&ev(t, s, 1, k));
    }
    // And a connection update carrying all 40,000 at 12 ms.
    a.feed(&ev(12 * ms, s, 0, wu(Dir::Out, 40_000)));
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(sum.releases, 4);
    assert_eq!(sum.window_updates_out_stream, 2);
    assert_eq!(sum.window_updates_out_conn, 1);
    assert_eq!(sum.coalescing_ratio, 2.0);
    // Latencies: 1.5, 0.5 (first update), 7, 6 (second): mean 3.75 ms.
    let l = &sum.release_to_update_ms;
    assert_eq!(l.count, 4);
    assert!((l.mean - 3.75).abs() < 0.01, "{l:?}");
    assert!(
        (l.min - 0.5).abs() < 0.01 && (l.max - 7.0).abs() < 0.01,
        "{l:?}"
    );
    // Connection level: 11, 10, 9, 8 ms.
    let c = &sum.release_to_conn_update_ms;
    assert_eq!(c.count, 4);
    assert!((c.mean - 9.5).abs() < 0.01, "{c:?}");
    assert_eq!(sum.window_update_increment.mean, 20_000.0);
}

#[test]
fn windows_follow_settings_changes_and_padding_and_flag_overruns() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    let data = |len, pad| {
        Kind::Frame(FrameEv {
            flags: if pad > 0 { 0x8 } else { 0 },
            pad,
            ..frame(Dir::Out, FrameType::DATA, len)
        })
    };
    // Client tap: a padded DATA frame (header length counts the padding).
    a.feed(&ev(1, c, 1, data(1_000, 99)));
    // The server raises the initial window mid-stream: stream 1 shifts by the delta.
    let settings = Kind::Frame(FrameEv {
        settings: Some(vec![(settings::INITIAL_WINDOW_SIZE, 100_000)]),
        ..frame(Dir::In, FrameType::SETTINGS, 6)
    });
    a.feed(&ev(2, c, 0, settings));
    a.feed(&ev(3, c, 1, data(16_384, 0)));
    // Connection window: 65,535 - 1,000 - 16,384 = 48,151; stream: 100,000 - 17,384 = 82,616.
    // Then more than the connection window: a violation is flagged.
    a.feed(&ev(4, c, 1, data(16_384, 0)));
    a.feed(&ev(5, c, 1, data(16_384, 0)));
    a.feed(&ev(6, c, 1, data(16_384, 0)));
    let (sum, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(sum.min_window, 48_151 - 3 * 16_384);
    assert_eq!(
        sum.protocol_violations, 1,
        "{:?}",
        sum.checks["no_data_beyond_credit"]
    );
    assert_eq!(sum.checks["no_data_beyond_credit"].ok, Some(false));
    assert!(sum.checks["no_data_beyond_credit"]
        .detail
        .contains("DATA beyond the connection window"));
    assert_eq!(
        sum.checks["no_data_beyond_credit"].first_t_s,
        Some(6e-9),
        "the first offending event's time"
    );
    // The stream credit series saw the SETTINGS shift (stream 1 stays positive).
    let min_stream = tl
        .credit_stream_client
        .points()
        .iter()
        .map(|p| p.1)
        .fold(f64::MAX, f64::min);
    assert_eq!(min_stream, (100_000 - 1_000 - 4 * 16_384) as f64);
}

#[test]
fn a_client_only_trace_leaves_two_sided_checks_not_applicable() {
    let mut a = Analyzer::new(0);
    a.feed(&ev(
        1,
        Endpoint::Client,
        1,
        Kind::Schedule(MsgEv {
            seq: 0,
            size: 10,
            framed: 15,
        }),
    ));
    let (sum, _) = a.finish(0, &Ending::NoFooter);
    assert_eq!(sum.checks["accounting"].ok, None);
    assert_eq!(sum.checks["bytes"].ok, None);
    assert_eq!(sum.trace_ending, "no_footer");
}
