//! The relay analysis on hand-built two-leg event sequences with known
//! answers: frames paired across legs by offset, relay latency, withheld
//! credit, inferred waits, and the checks that must be able to fail.

use h2probe_analysis::analyze::Analyzer;
use h2probe_analysis::reader::Ending;
use h2probe_analysis::schema::*;

const MS: u64 = 1_000_000;

/// Builds one relayed pair's events: every frame is read on the incoming
/// leg at `t` and written on the outgoing leg at `t + lat`.
struct Pair {
    events: Vec<Event>,
    /// Next byte offset per direction (c2s, s2c); the client preface counts.
    off: [u64; 2],
}

impl Pair {
    fn new() -> Pair {
        Pair {
            events: vec![],
            off: [24, 0],
        }
    }

    fn push(&mut self, t: u64, ep: Endpoint, stream: u32, f: FrameEv) {
        self.events.push(Event {
            t,
            ep,
            conn: 1,
            stream,
            kind: Kind::Frame(f),
        });
    }

    /// A frame travelling c2s (`up`) or s2c, read at `t`, written `lat` later.
    fn frame(&mut self, t: u64, lat: u64, up: bool, stream: u32, f: FrameEv) {
        let d = usize::from(!up);
        let f = FrameEv {
            offset: self.off[d],
            ..f
        };
        self.off[d] += 9 + u64::from(f.len);
        let (from, to) = if up {
            (Endpoint::ClientLeg, Endpoint::ServerLeg)
        } else {
            (Endpoint::ServerLeg, Endpoint::ClientLeg)
        };
        self.push(
            t,
            from,
            stream,
            FrameEv {
                dir: Dir::In,
                ..f.clone()
            },
        );
        self.push(t + lat, to, stream, FrameEv { dir: Dir::Out, ..f });
    }

    fn analyze(self) -> Summary {
        self.analyze_as(0, &Ending::Clean(Footer::default()))
    }

    /// As the reader would end it: `dropped` events, and how the file ended.
    fn analyze_as(mut self, dropped: u64, ending: &Ending) -> Summary {
        self.events.sort_by_key(|e| e.t);
        let mut a = Analyzer::new(0);
        for e in &self.events {
            a.feed(e);
        }
        a.finish(dropped, ending).0
    }
}

use h2probe_analysis::analyze::Summary;

fn data(len: u32, end: bool) -> FrameEv {
    FrameEv {
        frame: FrameType::DATA,
        len,
        flags: if end { flags::END_STREAM } else { 0 },
        ..FrameEv::default()
    }
}

fn headers() -> FrameEv {
    FrameEv {
        frame: FrameType::HEADERS,
        len: 10,
        flags: flags::END_HEADERS,
        ..FrameEv::default()
    }
}

fn wu(inc: u32) -> FrameEv {
    FrameEv {
        frame: FrameType::WINDOW_UPDATE,
        len: 4,
        increment: Some(inc),
        ..FrameEv::default()
    }
}

/// A client that fills the 65,535-byte window with four frames, waits for
/// the server's credit, and sends on at once: a server that returns credit
/// only for the first 32 KiB (holding the rest) and one that returns it
/// all. The figures are known by construction.
fn upload(returned_per_update: u32) -> Summary {
    let mut p = Pair::new();
    let lat = 20_000; // 20 µs through the relay
    p.frame(0, lat, true, 1, headers());
    let mut t = MS;
    for _ in 0..3 {
        p.frame(t, lat, true, 1, data(16_384, false));
        t += MS;
    }
    p.frame(t, lat, true, 1, data(16_383, false)); // window now 0 at t = 4 ms
                                                   // The server's credit at 10 ms (stream and connection), then the client
                                                   // resumes 0.5 ms later.
    p.frame(10 * MS, lat, false, 1, wu(returned_per_update));
    p.frame(10 * MS + 1_000, lat, false, 0, wu(returned_per_update));
    p.frame(10 * MS + 500_000, lat, true, 1, data(1_000, true));
    p.analyze()
}

#[test]
fn a_receiver_that_returns_everything_releases_on_receipt_and_one_that_holds_does_not() {
    let s = upload(65_535);
    let r = s.relay.as_ref().expect("relay legs seen");
    let c = &r.c2s;
    assert_eq!(r.frames_forwarded, 8, "every frame paired");
    assert_eq!(r.frames_differing + r.frames_unforwarded, 0);
    assert_eq!(c.data_frames, 5);
    assert_eq!(c.data_bytes, 3 * 16_384 + 16_383 + 1_000);
    assert_eq!(c.max_data_frame, 16_384);
    // Relay latency: every c2s frame took exactly 20 µs.
    assert_eq!(c.relay_latency_ms.count, 6);
    assert!((c.relay_latency_ms.p50 - 0.020).abs() < 1e-4);
    // Withheld: all 65,535 B before the update, 0 after it.
    assert_eq!(c.max_withheld_stream_bytes, 65_535);
    assert_eq!(c.withheld_after_update.count, 1);
    assert_eq!(c.withheld_after_update.max, 0.0);
    // One update is too few to call it.
    assert_eq!(c.credit_release, "unknown");
    // The client had no credit from its last full frame (read at 4 ms) to
    // the connection update written to it at 10 ms + 1 µs + 20 µs; it then
    // sent more: an inferred wait, resumed 479 µs after the credit.
    assert_eq!(c.min_stream_window, Some(0));
    assert_eq!(c.exhausted_intervals, 1);
    assert_eq!(c.inferred_blocked_intervals, 1);
    let waited = (10 * MS + 1_000 + 20_000 - 4 * MS) as f64 / 1e9;
    assert!((c.inferred_blocked_s - waited).abs() < 1e-9, "{c:?}");
    assert!((c.resume_after_credit_ms.p50 - 0.479).abs() < 0.001);
    assert_eq!(s.checks["relay_forwarded_unchanged"].ok, Some(true));
    assert_eq!(s.checks["relay_no_data_beyond_credit"].ok, Some(true));
    assert_eq!(s.checks.len(), 2, "only the relay's checks: {:?}", s.checks);

    let held = upload(32_768);
    let c = &held.relay.as_ref().unwrap().c2s;
    assert_eq!(c.withheld_after_update.max, 65_535.0 - 32_768.0);
    // With the half window still closed... the stream window is 32,768 > 0.
    assert_eq!(c.inferred_blocked_intervals, 1);
}

#[test]
fn the_verdict_follows_what_the_receiver_holds_after_each_update() {
    // Ten rounds of 16 KiB each way; the receiver returns credit for a
    // frame as it reads it (holding 0) or for the frame before (holding one).
    for (lag, verdict) in [(0u32, "on_receipt"), (1, "after_receipt")] {
        let mut p = Pair::new();
        p.frame(0, 10_000, true, 1, headers());
        let mut owed = std::collections::VecDeque::new();
        for i in 0..10u64 {
            let t = (i + 1) * MS;
            p.frame(t, 10_000, true, 1, data(16_384, false));
            owed.push_back(16_384u32);
            if owed.len() > lag as usize {
                let inc = owed.pop_front().unwrap();
                p.frame(t + MS / 2, 10_000, false, 1, wu(inc));
            }
        }
        let s = p.analyze();
        let c = &s.relay.unwrap().c2s;
        assert_eq!(c.credit_release, verdict, "lag {lag}: {c:?}");
        assert_eq!(c.window_updates_stream, 10 - u64::from(lag));
        // Distributions keep 3 significant digits.
        assert!((c.update_increment_stream.p50 / 16_384.0 - 1.0).abs() < 1e-3);
        assert!((c.update_gap_stream_ms.p50 - 1.0).abs() < 0.01);
        assert!(
            (c.updates_per_mib - (10 - lag) as f64 / (10.0 * 16_384.0 / 1048576.0)).abs() < 1e-6
        );
    }
}

#[test]
fn a_frame_changed_or_lost_between_the_legs_fails_the_check() {
    // Changed: the write on the server leg has another length.
    let mut p = Pair::new();
    p.frame(0, 1_000, true, 1, headers());
    p.push(
        MS,
        Endpoint::ClientLeg,
        1,
        FrameEv {
            dir: Dir::In,
            offset: p.off[0],
            ..data(100, false)
        },
    );
    p.push(
        MS + 1,
        Endpoint::ServerLeg,
        1,
        FrameEv {
            dir: Dir::Out,
            offset: p.off[0],
            ..data(99, false)
        },
    );
    let s = p.analyze();
    let c = &s.checks["relay_forwarded_unchanged"];
    assert_eq!(c.ok, Some(false), "{c:?}");
    assert!(
        c.detail.contains("len 100") && c.detail.contains("len 99"),
        "{}",
        c.detail
    );
    assert_eq!(s.relay.unwrap().frames_differing, 1);

    // Lost: read on the client leg, never written, the pair closed cleanly.
    let mut p = Pair::new();
    p.frame(0, 1_000, true, 1, headers());
    p.push(
        MS,
        Endpoint::ClientLeg,
        1,
        FrameEv {
            dir: Dir::In,
            offset: p.off[0],
            ..data(100, false)
        },
    );
    let s = p.analyze();
    assert_eq!(s.checks["relay_forwarded_unchanged"].ok, Some(false));
    assert_eq!(s.relay.unwrap().frames_unforwarded, 1);
}

/// A trace cut short, or with events dropped: a frame that differs well
/// before the cut still fails; anything else cannot be judged, and says
/// what the events present showed.
#[test]
fn an_incomplete_relay_trace_judges_only_what_is_settled() {
    // `later`: the trace goes on to 1 s; else it ends at the change.
    let changed_until = |later: bool, end: u64| {
        let mut p = Pair::new();
        p.frame(0, 1_000, true, 1, headers());
        let at = p.off[0];
        for (ep, dir, len) in [
            (Endpoint::ClientLeg, Dir::In, 100),
            (Endpoint::ServerLeg, Dir::Out, 99),
        ] {
            let f = FrameEv {
                dir,
                offset: at,
                ..data(len, false)
            };
            p.push(MS, ep, 1, f);
        }
        p.off[0] += 9 + 100;
        if later {
            p.frame(end - 1_000, 1_000, true, 1, data(10, false));
        }
        p
    };
    let changed = |later: bool| changed_until(later, 1_000 * MS + 1_000);
    let check = |s: Summary, name: &str| s.checks[name].clone();
    let c = check(
        changed(true).analyze_as(0, &Ending::NoFooter),
        "relay_forwarded_unchanged",
    );
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    let c = check(
        changed(false).analyze_as(0, &Ending::NoFooter),
        "relay_forwarded_unchanged",
    );
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail
            .contains("cannot be judged; over the events present it failed: 1 frame differs"),
        "{}",
        c.detail
    );
    // Settled only more than the reorder window (250 ms) before the cut:
    // a trace that ends exactly 250 ms after the change does not settle it.
    let c = check(
        changed_until(true, 251 * MS).analyze_as(0, &Ending::NoFooter),
        "relay_forwarded_unchanged",
    );
    assert_eq!(c.ok, None, "{}", c.detail);
    let c = check(
        changed_until(true, 251 * MS + 1).analyze_as(0, &Ending::NoFooter),
        "relay_forwarded_unchanged",
    );
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    let dropped = Ending::Clean(Footer {
        dropped: [("frame".to_string(), 1)].into(),
        ..Footer::default()
    });
    // Events lost cannot make two frames at one offset differ.
    let c = check(
        changed(true).analyze_as(1, &dropped),
        "relay_forwarded_unchanged",
    );
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    // Nothing wrong in what is there: not judged either.
    let mut p = Pair::new();
    p.frame(0, 1_000, true, 1, headers());
    p.frame(MS, 1_000, true, 1, data(100, false));
    let s = p.analyze_as(0, &Ending::NoFooter);
    let c = &s.checks["relay_forwarded_unchanged"];
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail
            .contains("; over the events present it held: 2 frames read"),
        "{}",
        c.detail
    );
    // DATA beyond a window a dropped WINDOW_UPDATE may have opened.
    let mut p = Pair::new();
    p.frame(0, 1_000, true, 1, headers());
    for i in 0..5 {
        p.frame((i + 1) * MS, 1_000, true, 1, data(16_384, false));
    }
    let s = p.analyze_as(1, &dropped);
    let c = &s.checks["relay_no_data_beyond_credit"];
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail.starts_with("the recorder dropped 1 events"),
        "{}",
        c.detail
    );
}

#[test]
fn data_beyond_the_window_on_a_leg_fails_the_credit_check() {
    let mut p = Pair::new();
    p.frame(0, 1_000, true, 1, headers());
    for i in 0..5 {
        p.frame((i + 1) * MS, 1_000, true, 1, data(16_384, false));
    }
    let s = p.analyze();
    let r = s.relay.as_ref().unwrap();
    assert!(r.c2s.window_violations > 0);
    assert_eq!(s.checks["relay_no_data_beyond_credit"].ok, Some(false));
}

/// Every relay field is documented in docs/summary-json.md.
#[test]
fn every_relay_field_is_documented() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/summary-json.md"),
    )
    .unwrap();
    let section = doc.split("## `relay`").nth(1).expect("a relay section");
    for v in [
        serde_json::to_value(h2probe_analysis::analyze::RelaySummary::default()).unwrap(),
        serde_json::to_value(h2probe_analysis::analyze::RelayFlow::default()).unwrap(),
    ] {
        for field in v.as_object().unwrap().keys() {
            assert!(
                section.contains(&format!("`{field}`")),
                "docs/summary-json.md's relay section does not document `{field}`"
            );
        }
    }
}

/// A receiver that enlarges its connection window before any DATA (hyper,
/// grpcio, h2load do): that credit granted ahead is set aside, and the
/// connection's withheld credit is what it holds of the DATA since.
#[test]
fn credit_granted_ahead_of_data_is_set_aside_at_connection_level() {
    let mut p = Pair::new();
    p.frame(0, 1_000, true, 1, headers());
    p.frame(MS, 1_000, false, 0, wu(1_000_000));
    for i in 0..3 {
        p.frame((i + 2) * MS, 1_000, true, 1, data(16_384, false));
    }
    p.frame(6 * MS, 1_000, false, 0, wu(16_384));
    let s = p.analyze();
    let c = &s.relay.unwrap().c2s;
    assert_eq!(c.max_withheld_conn_bytes, 3 * 16_384);
    assert_eq!(c.max_withheld_stream_bytes, 3 * 16_384);
    assert_eq!(c.window_updates_conn, 2);
}
