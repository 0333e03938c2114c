//! The analyzer on hand-built event sequences with known answers.

use h2probe_analysis::analyze::{Analyzer, Check};
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

/// An event of connection `conn` (`ev` is connection 1's).
fn on(t: u64, ep: Endpoint, conn: u32, stream: u32, kind: Kind) -> Event {
    Event {
        t,
        ep,
        conn,
        stream,
        kind,
    }
}

fn open(local: &str, peer: &str) -> Kind {
    Kind::ConnOpen(ConnOpenEv {
        local: local.into(),
        peer: peer.into(),
    })
}

/// A server's `rpc_start` of path /p, naming nothing else.
fn rpc_start() -> Kind {
    Kind::RpcStart(RpcStartEv {
        path: "/p".into(),
        deadline_ns: None,
        framing: None,
        release: None,
        withhold_after: None,
    })
}

/// [`rpc_start`] naming its release point.
fn rpc_start_at(release: ReleasePoint) -> Kind {
    Kind::RpcStart(RpcStartEv {
        path: "/p".into(),
        deadline_ns: None,
        framing: None,
        release: Some(release),
        withhold_after: None,
    })
}

fn rpc_end(status: u32) -> Kind {
    Kind::RpcEnd(RpcEndEv {
        status,
        message: String::new(),
    })
}

fn chunk(len: u32) -> Kind {
    Kind::Chunk(ChunkEv { len })
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

/// The client's wait for capacity that began at `start` (`open`: cut by
/// the recording's end).
fn blocked(seq: u64, start: u64, open: bool) -> Kind {
    Kind::WindowBlocked(WindowBlockedEv { seq, start, open })
}

/// A release at decode naming no message.
fn release(bytes: u32) -> Kind {
    release_at(bytes, ReleasePoint::Decode)
}

fn release_at(bytes: u32, at: ReleasePoint) -> Kind {
    Kind::Release(ReleaseEv {
        bytes,
        at,
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
    assert_eq!(sum.min_window, Some(48_151 - 3 * 16_384));
    assert_eq!(
        sum.protocol_violations, 1,
        "{:?}",
        sum.checks["no_data_beyond_credit"]
    );
    assert_eq!(sum.checks["no_data_beyond_credit"].ok, Some(false));
    assert!(sum.checks["no_data_beyond_credit"]
        .detail
        .contains("DATA beyond the connection window on stream 1"));
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

/// The credit plots follow WINDOW_UPDATEs as well as DATA: the client's
/// connection and stream windows as its tap received each update, the
/// server's connection window as it sent one.
#[test]
fn the_credit_plots_rise_with_each_window_update() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let mut a = Analyzer::new(0);
    let data = |dir| Kind::Frame(frame(dir, FrameType::DATA, 16_384));
    a.feed(&ev(1_000, c, 1, data(Dir::Out)));
    a.feed(&ev(2_000, s, 1, data(Dir::In)));
    a.feed(&ev(4_000_000, s, 0, wu(Dir::Out, 10_000)));
    a.feed(&ev(5_000_000, c, 0, wu(Dir::In, 10_000)));
    a.feed(&ev(6_000_000, c, 1, wu(Dir::In, 16_384)));
    let (_, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    let values = |series: &h2probe_analysis::series::Series| -> Vec<f64> {
        series.points().iter().map(|p| p.1).collect()
    };
    assert_eq!(
        values(&tl.credit_conn_client),
        [49_151.0, 59_151.0, 59_151.0]
    );
    assert_eq!(values(&tl.credit_stream_client), [49_151.0, 65_535.0]);
    assert_eq!(values(&tl.credit_conn_server), [49_151.0, 59_151.0]);
}

/// Streams past the plotted ones are counted once each, however many of
/// their frames move their credit (the count was of frames: a note of "12
/// later streams" for 6).
#[test]
fn streams_past_the_plotted_credit_series_are_counted_once_each() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    let max = h2probe_analysis::analyze::summary::MAX_STREAM_SERIES as u32;
    let mut t = 1;
    for round in 0..2 {
        for k in 0..max + 6 {
            a.feed(&ev(
                t,
                c,
                1 + 2 * k,
                Kind::Frame(frame(Dir::Out, FrameType::DATA, 10 + round)),
            ));
            t += 1;
        }
    }
    let (_, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(tl.stream_credit.len(), max as usize);
    assert_eq!(tl.streams_untracked, 6);
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

/// A whole trace with one side's events judges that side's own books: a
/// message scheduled and neither sent nor recorded unsent fails it (no
/// server event could mend it), a message decoded and never completed or
/// discarded too; books that balance leave the check unjudged, saying so.
#[test]
fn a_one_sided_trace_fails_accounting_when_its_own_books_do_not_balance() {
    let msg = |seq| MsgEv {
        seq,
        size: 10,
        framed: 15,
    };
    let client = |sent: bool| {
        let mut a = Analyzer::new(0);
        let c = Endpoint::Client;
        a.feed(&ev(1, c, 0, Kind::Schedule(msg(0))));
        a.feed(&ev(2, c, 0, Kind::Schedule(msg(1))));
        a.feed(&ev(
            3,
            c,
            1,
            Kind::Send(SendEv {
                seq: 0,
                scheduled: 1,
                begin: 3,
                bytes: 15,
            }),
        ));
        if sent {
            let unsent = NeverSentEv {
                seq: 1,
                reason: NeverSentReason::Interrupted,
                count: 1,
            };
            a.feed(&ev(4, c, 0, Kind::NeverSent(unsent)));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    let whole = client(true);
    let c = &whole.checks["no_stall"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
    assert!(c.detail.ends_with("(its side only)"), "{}", c.detail);
    let c = &whole.checks["accounting"];
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail
            .contains("(client only: its own books balance, scheduled 2 = sent 1 + never_sent 1)"),
        "{}",
        c.detail
    );
    let c = &client(false).checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(
        c.detail.starts_with(
            "client only, whose own books do not balance: scheduled 2 ≠ sent 1 + never_sent 0; \
             nor each connection's books: 1 client connection"
        ) && c.detail.ends_with("connection 1, off by +1"),
        "{}",
        c.detail
    );

    let server = |ended: bool| {
        let mut a = Analyzer::new(0);
        let s = Endpoint::Server;
        a.feed(&ev(1, s, 1, Kind::Decode(msg(0))));
        if ended {
            let done = CompleteEv {
                seq: 0,
                worker: 0,
                service_ns: 1,
            };
            a.feed(&ev(2, s, 1, Kind::Complete(done)));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    let whole = server(true);
    let c = &whole.checks["no_stall"];
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail.ends_with("this trace has the server only"),
        "{}",
        c.detail
    );
    let c = &whole.checks["accounting"];
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail.contains(
            "(server only: its own books balance, decoded 1 = completed 1 + discarded 0)"
        ),
        "{}",
        c.detail
    );
    let c = &server(false).checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(c.detail.contains("decoded 1 ≠ completed 0"), "{}", c.detail);
    // Under raw framing the server's are work units, and it says so.
    let mut a = Analyzer::new(0);
    let unit = MsgEv {
        seq: 0,
        size: 10,
        framed: 10,
    };
    a.feed(&ev(1, Endpoint::Server, 1, Kind::Decode(unit)));
    let c = &a.finish(0, &Ending::Clean(Footer::default())).0.checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(
        c.detail
            .ends_with("decoded units 1 ≠ completed 0 + discarded 0"),
        "{}",
        c.detail
    );
    // A trace cut short judges neither.
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, Endpoint::Client, 0, Kind::Schedule(msg(0))));
    let cut = a.finish(0, &Ending::NoFooter).0;
    assert_eq!(cut.checks["accounting"].ok, None);
    // Nor whether the client stalled after its last event.
    assert_eq!(cut.checks["no_stall"].ok, None);
}

/// A whole trace with one side's events judges that side's `bytes`: its
/// tap against its own application. A disagreement fails; agreement
/// leaves the check unjudged (what crossed the wire needs both taps).
#[test]
fn a_one_sided_trace_fails_bytes_when_its_tap_and_application_disagree() {
    let sec = 1_000_000_000;
    let end = |status| {
        Kind::RpcEnd(RpcEndEv {
            status,
            message: String::new(),
        })
    };
    // Server: DATA in 100 on stream 1, `chunks` handed to the application,
    // the RPC ended with `status`; `later`: an event 10 s on, by when the
    // stream was judged and forgotten during the pass.
    let server = |chunks: &[u32], status: u32, later: bool| {
        let s = Endpoint::Server;
        let mut a = Analyzer::new(0);
        a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        a.feed(&ev(
            2,
            s,
            1,
            Kind::Frame(frame(Dir::In, FrameType::DATA, 100)),
        ));
        for (i, len) in chunks.iter().enumerate() {
            a.feed(&ev(3 + i as u64, s, 1, Kind::Chunk(ChunkEv { len: *len })));
        }
        a.feed(&ev(10, s, 1, end(status)));
        if later {
            a.feed(&ev(10 * sec, s, 0, wu(Dir::Out, 1)));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0.checks["bytes"].clone()
    };
    for later in [false, true] {
        let c = server(&[60, 40], 0, later);
        assert_eq!(c.ok, None, "{}", c.detail);
        assert!(
            c.detail.contains(
                "(server only: on 1 stream, DATA into its tap = bytes handed to the application)"
            ),
            "{}",
            c.detail
        );
        let c = server(&[60, 30], 0, later);
        assert_eq!(c.ok, Some(false), "{}", c.detail);
        assert_eq!(
            c.detail,
            "server only, whose tap and application disagree: connection 1 stream 1: server tap in 100, app 90"
        );
        // Cut short: bytes may stay in h2's buffers, never be created.
        let c = server(&[60, 30], 1, later);
        assert_eq!(c.ok, None, "{}", c.detail);
        assert!(
            c.detail.contains("(1 ended other than OK: in ≥ app there)"),
            "{}",
            c.detail
        );
        let c = server(&[60, 50], 1, later);
        assert_eq!(c.ok, Some(false), "{}", c.detail);
        assert!(
            c.detail.ends_with("server tap in 100, app 110"),
            "{}",
            c.detail
        );
    }

    // Bytes at the application with none on the tap: the worst
    // disagreement, not a stream to leave out.
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
    a.feed(&ev(2, s, 1, Kind::Chunk(ChunkEv { len: 60 })));
    a.feed(&ev(3, s, 1, end(0)));
    let b = &a.finish(0, &Ending::Clean(Footer::default())).0.checks["bytes"];
    assert_eq!(b.ok, Some(false), "{}", b.detail);
    assert!(
        b.detail.ends_with("server tap in 0, app 60"),
        "{}",
        b.detail
    );
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, c, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
    let send = SendEv {
        seq: 0,
        scheduled: 1,
        begin: 2,
        bytes: 15,
    };
    a.feed(&ev(2, c, 1, Kind::Send(send)));
    let headers = FrameEv {
        flags: 0x5,
        ..frame(Dir::Out, FrameType::HEADERS, 30)
    };
    a.feed(&ev(3, c, 1, Kind::Frame(headers)));
    let b = &a.finish(0, &Ending::Clean(Footer::default())).0.checks["bytes"];
    assert_eq!(b.ok, Some(false), "{}", b.detail);
    assert!(
        b.detail.ends_with("client tap out 0, framed bytes sent 15"),
        "{}",
        b.detail
    );
    // Both sides: a paired stream the client's tap saw no DATA of, and a
    // foreign client's connection (no client tap pairs with it) judged on
    // the server's side alone.
    let two_sided = |client_out: bool, foreign_app: u32| {
        let mut a = Analyzer::new(0);
        a.feed(&on(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        if client_out {
            let data = Kind::Frame(frame(Dir::Out, FrameType::DATA, 100));
            a.feed(&on(2, c, 1, 1, data));
        }
        a.feed(&on(2, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        a.feed(&on(3, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:6000")));
        for conn in [1, 2] {
            let data = Kind::Frame(frame(Dir::In, FrameType::DATA, 100));
            a.feed(&on(4, s, conn, 1, data));
            let len = if conn == 1 { 100 } else { foreign_app };
            a.feed(&on(5, s, conn, 1, Kind::Chunk(ChunkEv { len })));
            a.feed(&on(6, s, conn, 1, end(0)));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0.checks["bytes"].clone()
    };
    let b = two_sided(true, 100);
    assert_eq!(b.ok, Some(true), "{}", b.detail);
    assert_eq!(
        b.detail,
        "1 stream: client tap out = server tap in = bytes handed to the app; \
         on connections without the other endpoint's tap (a foreign peer's), each side's tap against its application: \
         server: on 1 stream, DATA into its tap = bytes handed to the application"
    );
    let b = two_sided(false, 100);
    assert_eq!(b.ok, Some(false), "{}", b.detail);
    assert_eq!(b.detail, "client connection 1, server connection 1, stream 1: client tap out 0, server tap in 100, app 100");
    let b = two_sided(false, 90);
    assert_eq!(
        b.detail,
        "client connection 1, server connection 1, stream 1: client tap out 0, server tap in 100, app 100; \
         unpaired connection 2 stream 1: server tap in 100, app 90"
    );
    // Twenty more disagreements on the foreign connection: the detail
    // names twenty in all, the paired one first, and counts the rest.
    let mut a = Analyzer::new(0);
    a.feed(&on(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
    a.feed(&on(2, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
    a.feed(&on(3, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:6000")));
    for (conn, streams) in [(1, 1), (2, 20)] {
        for k in 0..streams {
            let id = 1 + 2 * k;
            let data = Kind::Frame(frame(Dir::In, FrameType::DATA, 100));
            a.feed(&on(4, s, conn, id, data));
            a.feed(&on(5, s, conn, id, Kind::Chunk(ChunkEv { len: 90 + conn })));
            a.feed(&on(6, s, conn, id, end(0)));
        }
    }
    let b = &a.finish(0, &Ending::Clean(Footer::default())).0.checks["bytes"];
    assert_eq!(b.ok, Some(false), "{}", b.detail);
    assert!(b
        .detail
        .starts_with("client connection 1, server connection 1, stream 1"));
    assert_eq!(b.detail.matches("; ").count(), 20, "{}", b.detail);
    assert!(b.detail.ends_with("; … and 1 more"), "{}", b.detail);

    // Client: `sent` framed bytes in `send` events, DATA out 15 + 10 on
    // stream 1, the last frame with END_STREAM or not, a message of the
    // stream given up or not (why, and the framed size of a message
    // scheduled on the stream, 0 for none).
    let client_at = |sent: &[u32],
                     end_stream: bool,
                     gave_up: Option<(NeverSentReason, u32)>,
                     later: bool,
                     (dropped, ending): (u64, Ending)| {
        let c = Endpoint::Client;
        let mut a = Analyzer::new(0);
        a.feed(&ev(1, c, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        for (i, bytes) in sent.iter().enumerate() {
            let send = SendEv {
                seq: i as u64,
                scheduled: 1,
                begin: 2,
                bytes: *bytes,
            };
            a.feed(&ev(2 + i as u64, c, 1, Kind::Send(send)));
        }
        a.feed(&ev(
            5,
            c,
            1,
            Kind::Frame(frame(Dir::Out, FrameType::DATA, 15)),
        ));
        if let Some((reason, framed)) = gave_up {
            if framed > 0 {
                let msg = MsgEv {
                    seq: 9,
                    size: framed - 5,
                    framed,
                };
                a.feed(&ev(1, c, 1, Kind::Schedule(msg)));
            }
            let unsent = NeverSentEv {
                seq: 9,
                reason,
                count: 1,
            };
            a.feed(&ev(6, c, 1, Kind::NeverSent(unsent)));
        }
        let last = FrameEv {
            flags: if end_stream { 0x1 } else { 0 },
            ..frame(Dir::Out, FrameType::DATA, 10)
        };
        a.feed(&ev(7, c, 1, Kind::Frame(last)));
        a.feed(&ev(8, c, 1, end(0)));
        if later {
            a.feed(&ev(10 * sec, c, 0, wu(Dir::In, 1)));
        }
        a.finish(dropped, &ending).0.checks["bytes"].clone()
    };
    let client = |sent: &[u32], end_stream, gave_up, ending| {
        client_at(sent, end_stream, gave_up, false, ending)
    };
    let whole = || (0, Ending::Clean(Footer::default()));
    for later in [false, true] {
        let c = client_at(&[15, 10], true, None, later, whole());
        assert_eq!(c.ok, None, "{}", c.detail);
        assert!(
            c.detail.contains(
                "(client only: on 1 stream, DATA out of its tap = framed bytes of the messages sent)"
            ),
            "{}",
            c.detail
        );
        let c = client_at(&[15, 9], true, None, later, whole());
        assert_eq!(c.ok, Some(false), "{}", c.detail);
        assert_eq!(
            c.detail,
            "client only, whose tap and application disagree: connection 1 stream 1: client tap out 25, framed bytes sent 24"
        );
        // DATA on the tap and no message sent: the stream is the tap's.
        let c = client_at(&[], true, None, later, whole());
        assert_eq!(c.ok, Some(false), "{}", c.detail);
        assert!(
            c.detail
                .ends_with("connection 1 stream 1: client tap out 25, framed bytes sent 0"),
            "{}",
            c.detail
        );
    }
    // A message given up midway may have left part of itself: sent ≤ out
    // ≤ sent + the stream's largest message.
    let deadline = NeverSentReason::Deadline;
    for framed in [0, 10, 11] {
        let c = client(&[15], true, Some((deadline, framed)), whole());
        assert_eq!(c.ok, None, "{framed}: {}", c.detail);
        assert!(
            c.detail.contains(
                "(1 that gave up a message midway, part of which may have left: sent ≤ out ≤ sent + one message there)"
            ),
            "{}",
            c.detail
        );
    }
    let c = client(&[15], true, Some((deadline, 9)), whole());
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    let c = client(&[15, 11], true, Some((deadline, 0)), whole());
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    // A message the backlog turned away never reached h2: out = sent still.
    let c = client(&[15], true, Some((NeverSentReason::Backlog, 10)), whole());
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    let c = client(
        &[15, 10],
        true,
        Some((NeverSentReason::Backlog, 10)),
        whole(),
    );
    assert_eq!(c.ok, None, "{}", c.detail);
    // Not ended by the client: h2 may have dropped sent bytes it held.
    let c = client(&[15, 11], false, None, whole());
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail
            .contains("client only: 1 stream carried DATA, none ended by the client's END_STREAM"),
        "{}",
        c.detail
    );
    // One stream ended and one not: the first judged, the second named.
    let mut a = Analyzer::new(0);
    let c = Endpoint::Client;
    for (stream, end_stream) in [(1, true), (3, false)] {
        let send = SendEv {
            seq: 0,
            scheduled: 1,
            begin: 2,
            bytes: 15,
        };
        a.feed(&ev(2, c, stream, Kind::Send(send)));
        let data = FrameEv {
            flags: u8::from(end_stream),
            ..frame(Dir::Out, FrameType::DATA, 15)
        };
        a.feed(&ev(3, c, stream, Kind::Frame(data)));
    }
    let c = &a.finish(0, &Ending::Clean(Footer::default())).0.checks["bytes"];
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail.contains(
            "(client only: on 1 stream, DATA out of its tap = framed bytes of the messages sent; \
             1 stream without the client's END_STREAM (a reset came first, from either side) not judged"
        ),
        "{}",
        c.detail
    );
    // A trace cut short, or with events dropped, judges nothing.
    for ending in [
        (0, Ending::NoFooter),
        (
            1,
            Ending::Clean(Footer {
                dropped: [("chunk".to_string(), 1)].into(),
                ..Footer::default()
            }),
        ),
    ] {
        let c = client(&[15, 9], true, None, ending);
        assert_eq!(c.ok, None, "{}", c.detail);
        assert!(
            c.detail
                .ends_with("this cannot be judged (and the trace has the client's events only)"),
            "{}",
            c.detail
        );
    }
}

/// Which streams have a share in `bytes`, judged during the pass (an
/// event long after their end) or at its end alike: one with bytes at its
/// application and none on its tap fails, one with no bytes anywhere is
/// not counted.
#[test]
fn a_stream_without_bytes_has_no_share_in_bytes_wherever_it_is_judged() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let sec = 1_000_000_000;
    let end = || {
        Kind::RpcEnd(RpcEndEv {
            status: 0,
            message: String::new(),
        })
    };
    let start = rpc_start;
    let ended = || {
        Kind::Frame(FrameEv {
            flags: 0x5,
            ..frame(Dir::Out, FrameType::HEADERS, 30)
        })
    };
    let send = || {
        Kind::Send(SendEv {
            seq: 0,
            scheduled: 1,
            begin: 2,
            bytes: 15,
        })
    };
    let schedule = || {
        Kind::Schedule(MsgEv {
            seq: 0,
            size: 10,
            framed: 15,
        })
    };
    // Failed, ending in `failure`, or not judged, saying `none` (no stream
    // of it carried DATA).
    let judged = |b: &Check, fails: bool, failure: &str, none: &str| {
        if fails {
            assert_eq!(b.ok, Some(false), "{}", b.detail);
            assert!(b.detail.ends_with(failure), "{}", b.detail);
        } else {
            assert_eq!(b.ok, None, "{}", b.detail);
            let none = format!("{none} of it carried DATA)");
            assert!(b.detail.contains(&none), "{}", b.detail);
        }
    };
    // `later`: events 100 s and 200 s on, by when every stream was judged
    // and forgotten (a pair whose taps disagree waits a minute).
    let finish = |mut a: Analyzer, ep: Endpoint, later: bool| {
        if later {
            a.feed(&on(100 * sec, ep, 1, 0, wu(Dir::In, 1)));
            a.feed(&on(200 * sec, ep, 1, 0, wu(Dir::In, 1)));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0.checks["bytes"].clone()
    };
    for later in [false, true] {
        // The server: an RPC without a body, and one whose application got
        // 60 bytes its tap never saw.
        for chunk in [false, true] {
            let mut a = Analyzer::new(0);
            a.feed(&on(1, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
            a.feed(&on(2, s, 1, 1, start()));
            if chunk {
                a.feed(&on(3, s, 1, 1, Kind::Chunk(ChunkEv { len: 60 })));
            }
            a.feed(&on(4, s, 1, 1, end()));
            let b = finish(a, s, later);
            judged(
                &b,
                chunk,
                "server tap in 0, app 60",
                "(server only: no stream",
            );
        }
        // The client: a message scheduled and not sent, and one sent whose
        // bytes its tap never saw leave before END_STREAM.
        for sent in [false, true] {
            let mut a = Analyzer::new(0);
            a.feed(&on(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
            a.feed(&on(2, c, 1, 1, schedule()));
            if sent {
                a.feed(&on(3, c, 1, 1, send()));
            }
            a.feed(&on(4, c, 1, 1, ended()));
            a.feed(&on(5, c, 1, 1, end()));
            let b = finish(a, c, later);
            judged(
                &b,
                sent,
                "client tap out 0, framed bytes sent 15",
                "(client only: no stream",
            );
        }
        // A pair: the server's tap and application got 100 bytes the
        // client's tap never wrote, or neither side had any.
        for data in [false, true] {
            let mut a = Analyzer::new(0);
            a.feed(&on(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
            a.feed(&on(2, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
            a.feed(&on(3, c, 1, 1, start()));
            a.feed(&on(4, s, 1, 1, start()));
            if data {
                let frame = Kind::Frame(frame(Dir::In, FrameType::DATA, 100));
                a.feed(&on(5, s, 1, 1, frame));
                a.feed(&on(6, s, 1, 1, Kind::Chunk(ChunkEv { len: 100 })));
            }
            a.feed(&on(7, s, 1, 1, end()));
            a.feed(&on(8, c, 1, 1, end()));
            let b = finish(a, s, later);
            if data {
                assert_eq!(b.ok, Some(false), "{later}: {}", b.detail);
                assert_eq!(b.detail, "client connection 1, server connection 1, stream 1: client tap out 0, server tap in 100, app 100");
            } else {
                assert_eq!(b.ok, None, "{later}: {}", b.detail);
                assert_eq!(b.detail, "no paired streams carried DATA");
            }
        }
    }
}

#[test]
fn protocol_errors_count_what_the_server_answered_and_what_the_tap_could_not_parse() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let code = |dir, ty, code| {
        Kind::Frame(FrameEv {
            error_code: Some(code),
            ..frame(dir, ty, if ty == FrameType::GOAWAY { 8 } else { 4 })
        })
    };
    let wire_error = |error: &str| {
        Kind::WireError(WireErrorEv {
            dir: Dir::In,
            offset: 33,
            error: error.into(),
        })
    };
    let mut a = Analyzer::new(0);
    for (t, ep, stream, k) in [
        // Server tap, written: counted by frame and code name.
        (1, s, 0, code(Dir::Out, FrameType::GOAWAY, 0x1)),
        (2, s, 1, code(Dir::Out, FrameType::RST_STREAM, 0x3)),
        (3, s, 3, code(Dir::Out, FrameType::RST_STREAM, 0x3)),
        (4, s, 5, code(Dir::Out, FrameType::RST_STREAM, 0x8)),
        (5, s, 0, code(Dir::Out, FrameType::GOAWAY, 0xb)),
        (6, s, 0, code(Dir::Out, FrameType::GOAWAY, 0x42)),
        // NO_ERROR is not an error (graceful shutdown, early response).
        (7, s, 0, code(Dir::Out, FrameType::GOAWAY, 0x0)),
        (8, s, 7, code(Dir::Out, FrameType::RST_STREAM, 0x0)),
        // What the client sent is not the server's answer ...
        (9, s, 0, code(Dir::In, FrameType::GOAWAY, 0x2)),
        (10, c, 9, code(Dir::Out, FrameType::RST_STREAM, 0x8)),
        // (The client's own answers are its own count; its CANCELs are not.)
        (10, c, 11, code(Dir::Out, FrameType::RST_STREAM, 0x1)),
        // ... and the client's copy of the server's answer is not counted twice.
        (11, c, 0, code(Dir::In, FrameType::GOAWAY, 0x1)),
        // Bytes the tap could not frame: one key per kind, numbers dropped.
        (
            12,
            s,
            0,
            wire_error("byte 33: DATA frame of 70000 bytes exceeds the max frame size 16384"),
        ),
        (
            13,
            s,
            0,
            wire_error("byte 9: DATA frame of 20000 bytes exceeds the max frame size 16384"),
        ),
        (
            14,
            s,
            0,
            wire_error("byte 17: malformed WINDOW_UPDATE frame: length is not 4"),
        ),
        (
            15,
            s,
            0,
            wire_error("byte 0: bad client connection preface"),
        ),
        // Frames that broke a rule: framed, so not bytes nobody could
        // frame; keyed by who sent them and the rule.
        (
            16,
            s,
            0,
            wire_error(
                "byte 24: rule broken: DATA frame on stream 0 \
                 (RFC 9113 §6.1: a connection error of type PROTOCOL_ERROR)",
            ),
        ),
        (
            17,
            c,
            0,
            wire_error(
                "byte 9: rule broken: WINDOW_UPDATE of 0 on a stream \
                 (RFC 9113 §6.9: a stream error of type PROTOCOL_ERROR)",
            ),
        ),
        // The client's tap wrote the DATA on stream 0 its server read: one
        // frame, counted once among the rules broken.
        (
            18,
            c,
            0,
            Kind::WireError(WireErrorEv {
                dir: Dir::Out,
                offset: 24,
                error: "byte 24: rule broken: DATA frame on stream 0 \
                        (RFC 9113 §6.1: a connection error of type PROTOCOL_ERROR)"
                    .into(),
            }),
        ),
    ] {
        a.feed(&ev(t, ep, stream, k));
    }
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    let want: std::collections::BTreeMap<String, u64> = [
        ("GOAWAY PROTOCOL_ERROR", 1),
        ("GOAWAY ENHANCE_YOUR_CALM", 1),
        ("GOAWAY 0x42", 1),
        ("RST_STREAM FLOW_CONTROL_ERROR", 2),
        ("RST_STREAM CANCEL", 1),
        (
            "wire_error: DATA frame of N bytes exceeds the max frame size N",
            2,
        ),
        ("wire_error: malformed WINDOW_UPDATE frame", 1),
        ("wire_error: bad client connection preface", 1),
        ("wire_error: rule broken: DATA frame on stream 0", 2),
        ("wire_error: rule broken: WINDOW_UPDATE of 0 on a stream", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(sum.protocol_errors, want);
    assert_eq!(sum.wire_errors, 7);
    let pairs = |m: &std::collections::BTreeMap<String, u64>| -> Vec<(String, u64)> {
        m.iter().map(|(k, v)| (k.clone(), *v)).collect()
    };
    assert_eq!(
        pairs(&sum.client_answers),
        [("RST_STREAM PROTOCOL_ERROR".to_string(), 1)]
    );
    // The server's tap read them: bytes the client wrote.
    assert_eq!(
        pairs(&sum.wire_errors_by_writer),
        [("client".to_string(), 4)]
    );
    assert_eq!(
        pairs(&sum.rules_broken),
        [
            ("client: DATA frame on stream 0".to_string(), 1),
            ("server: WINDOW_UPDATE of 0 on a stream".to_string(), 1)
        ]
    );
    // The flow-control count is unchanged by any of it.
    assert_eq!(sum.protocol_violations, 0);
    let head = h2probe_analysis::report::headline(&sum);
    // Wrapped to 80 columns between errors, never inside one; each side's
    // named, and the bytes nobody could frame by who wrote them.
    assert!(
        head.contains(
            "errors    server sent GOAWAY 0x42×1  GOAWAY ENHANCE_YOUR_CALM×1\n          \
             GOAWAY PROTOCOL_ERROR×1  RST_STREAM CANCEL×1\n          \
             RST_STREAM FLOW_CONTROL_ERROR×2\n          \
             client sent RST_STREAM PROTOCOL_ERROR×1\n          \
             wire_error×4 in the client's bytes\n          \
             client broke: DATA frame on stream 0×1\n          \
             server broke: WINDOW_UPDATE of 0 on a stream×1\n"
        ),
        "{head}"
    );

    // A client-only trace (a client against a foreign server): the server's
    // answers as the client's tap read them.
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, c, 1, code(Dir::In, FrameType::RST_STREAM, 0x7)));
    a.feed(&ev(2, c, 3, code(Dir::Out, FrameType::RST_STREAM, 0x8)));
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(
        sum.protocol_errors.into_iter().collect::<Vec<_>>(),
        [("RST_STREAM REFUSED_STREAM".to_string(), 1)]
    );

    // A server-only trace: the client's answers as the server's tap read them.
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, s, 0, code(Dir::In, FrameType::GOAWAY, 0x1)));
    a.feed(&ev(2, s, 3, code(Dir::In, FrameType::RST_STREAM, 0x8)));
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(
        pairs(&sum.client_answers),
        [("GOAWAY PROTOCOL_ERROR".to_string(), 1)]
    );
    assert!(
        h2probe_analysis::report::headline(&sum).contains("client sent GOAWAY PROTOCOL_ERROR×1")
    );

    // Nothing to report: no headline line.
    let (sum, _) = Analyzer::new(0).finish(0, &Ending::Clean(Footer::default()));
    assert!(sum.protocol_errors.is_empty());
    assert!(!h2probe_analysis::report::headline(&sum).contains("errors "));
}

#[test]
fn window_blocked_waits_split_into_connection_and_own_stream_windows() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    let data = |len| Kind::Frame(frame(Dir::Out, FrameType::DATA, len));
    let blocked = |seq, start| blocked(seq, start, false);
    // Stream 1 takes the whole 65,535-byte connection window...
    a.feed(&ev(1, c, 1, data(65_535)));
    // ...so stream 3, its own window untouched, waits on the connection's.
    a.feed(&ev(20, c, 3, blocked(0, 10)));
    // The connection window is raised far; stream 3 then spends its own.
    a.feed(&ev(25, c, 0, wu(Dir::In, 1_000_000)));
    a.feed(&ev(30, c, 3, data(65_535)));
    a.feed(&ev(41, c, 3, blocked(1, 31)));
    // The server's update reopens it: a wait after is h2's, not the window's.
    a.feed(&ev(50, c, 3, wu(Dir::In, 100_000)));
    a.feed(&ev(70, c, 3, blocked(2, 60)));
    let (s, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(s.client_blocked_conn_window_s, 10e-9);
    assert_eq!(s.client_blocked_stream_window_s, 10e-9);
    assert!((s.client_window_blocked_s - 20e-9).abs() < 1e-15, "{s:?}");
    assert!(
        (s.client_h2_buffer_blocked_s - 10e-9).abs() < 1e-15,
        "{s:?}"
    );
    // The timeline's series holds both waits, in seconds.
    let total: f64 = tl.window_blocked.points().iter().map(|p| p.1).sum();
    assert!((total - 20e-9).abs() < 1e-15, "{total}");
}

/// A client alone whose sends wait at the end ended stuck only if it had
/// been quiet for longer than any quiet spell it recovered from (10 ns
/// between its DATA frames here): 10 ns more holds `no_stall`, 11 ns
/// cannot be judged (no stall recorded, but it might have become one).
#[test]
fn a_run_ended_stuck_only_past_its_longest_quiet_spell() {
    let c = Endpoint::Client;
    // `empty`: an empty DATA frame (END_STREAM) at 35, which moves nothing.
    let stall_with = |given_up: u64, empty: bool| {
        let mut a = Analyzer::new(0);
        let data = |len| Kind::Frame(frame(Dir::Out, FrameType::DATA, len));
        for t in [10, 20, 30] {
            a.feed(&ev(t, c, 1, data(100)));
        }
        if empty {
            a.feed(&ev(35, c, 1, data(0)));
        }
        a.feed(&ev(given_up, c, 1, blocked(0, 31, true)));
        let (s, _) = a.finish(0, &Ending::Clean(Footer::default()));
        s.checks["no_stall"].clone()
    };
    let stall = |given_up| stall_with(given_up, false);
    let quiet = stall(40);
    assert_eq!(quiet.ok, Some(true), "{}", quiet.detail);
    let stuck = stall(41);
    assert_eq!(stuck.ok, None, "{}", stuck.detail);
    assert!(
        stuck.detail.contains("the run ended stuck"),
        "{}",
        stuck.detail
    );
    let stuck = stall_with(41, true);
    assert_eq!(stuck.ok, None, "{}", stuck.detail);
}

/// DATA counted where it crossed: into the server's tap and out of the
/// client's (the other directions carry responses).
#[test]
fn data_is_counted_into_the_server_and_out_of_the_client() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let mut a = Analyzer::new(0);
    let data = |dir, len| Kind::Frame(frame(dir, FrameType::DATA, len));
    a.feed(&ev(1, c, 1, data(Dir::Out, 100)));
    a.feed(&ev(2, c, 1, data(Dir::Out, 0)));
    a.feed(&ev(3, s, 1, data(Dir::In, 100)));
    a.feed(&ev(4, s, 1, data(Dir::In, 50)));
    a.feed(&ev(5, s, 1, data(Dir::Out, 7)));
    a.feed(&ev(6, c, 1, data(Dir::In, 7)));
    let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
    assert_eq!((sum.data_frames_out, sum.data_bytes_out), (2, 100));
    assert_eq!((sum.data_frames_in, sum.data_bytes_in), (2, 150));
}

/// A wait that never resumed is said beside the time it waited on,
/// not beside another (the headline once put a window wait under socket).
#[test]
fn waits_open_at_the_end_are_counted_by_what_they_waited_on() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    let data = |len| Kind::Frame(frame(Dir::Out, FrameType::DATA, len));
    let blocked = |seq, start| blocked(seq, start, true);
    a.feed(&ev(1, c, 1, data(65_535)));
    // Two waits on the spent connection window, never resumed.
    a.feed(&ev(20, c, 3, blocked(0, 10)));
    a.feed(&ev(20, c, 5, blocked(0, 12)));
    // And one of the server's writes, never resumed either.
    let socket = Kind::SocketBlocked(IntervalEv {
        dir: Dir::Out,
        start: 15,
        open: true,
    });
    a.feed(&ev(20, Endpoint::Server, 0, socket));
    let (s, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(s.blocked_open, 3);
    let by: Vec<(&str, u64)> = s
        .blocked_open_by
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(by, [("server_socket", 1), ("window", 2)]);
    let head = h2probe_analysis::report::headline(&s);
    let client: String = head
        .lines()
        .skip_while(|l| !l.starts_with("client"))
        .take_while(|l| l.starts_with("client") || l.starts_with(' '))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(client.contains("window 0.00s (2 never resumed)"), "{head}");
    assert_eq!(client.matches("never resumed").count(), 1, "{head}");
}

/// docs/summary-json.md lists every field summary.json has.
#[test]
fn every_summary_field_is_documented() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/summary-json.md"),
    )
    .unwrap();
    let summary = serde_json::to_value(h2probe_analysis::analyze::Summary::default()).unwrap();
    for field in summary.as_object().unwrap().keys() {
        assert!(
            doc.contains(&format!("| `{field}` |")),
            "docs/summary-json.md does not document `{field}`"
        );
    }
}

/// docs/trace-format.md has a table row for every event type the probe writes.
#[test]
fn every_event_type_is_documented() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/trace-format.md"),
    )
    .unwrap();
    for name in h2probe_analysis::schema::Kind::NAMES {
        assert!(
            doc.contains(&format!("| `{name}` |")),
            "docs/trace-format.md does not document the `{name}` event"
        );
        // And its row names every field the type writes.
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap();
        for field in h2probe_analysis::schema::Kind::columns(name) {
            assert!(
                row.contains(&format!("`{field}`")),
                "docs/trace-format.md's `{name}` row does not name its field `{field}`"
            );
        }
    }
}

/// docs/summary-json.md lists every field of the `overload` object too.
#[test]
fn every_overload_field_is_documented() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/summary-json.md"),
    )
    .unwrap();
    let o = serde_json::to_value(h2probe_analysis::analyze::overload::Overload::default()).unwrap();
    for field in o.as_object().unwrap().keys() {
        assert!(
            doc.contains(&format!("| `overload.{field}` |")),
            "docs/summary-json.md does not document `overload.{field}`"
        );
    }
}

/// docs/summary-json.md documents every field of comparison.json too.
#[test]
fn every_comparison_field_is_documented() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/summary-json.md"),
    )
    .unwrap();
    let section = &doc[doc
        .find("## comparison.json")
        .expect("a comparison.json section")..];
    let row = serde_json::to_value(h2probe_analysis::compare::Row::default()).unwrap();
    for field in row.as_object().unwrap().keys() {
        assert!(
            section.contains(&format!("| `{field}` |")),
            "docs/summary-json.md does not document comparison.json's `{field}`"
        );
    }
}

/// A trace with no event (a server nobody connected to) does not say it
/// holds the server's side.
#[test]
fn an_empty_trace_claims_neither_side() {
    let (sum, _) = Analyzer::new(0).finish(0, &Ending::Clean(Footer::default()));
    let detail = |k: &str| sum.checks[k].detail.clone();
    assert_eq!(sum.checks["accounting"].ok, None);
    assert!(
        detail("accounting").contains("this one has neither"),
        "{}",
        detail("accounting")
    );
    assert!(
        detail("no_stall").ends_with("this trace has no client events"),
        "{}",
        detail("no_stall")
    );
    assert!(!detail("no_stall").contains("server only"));
    // No connection, no window: neither lowest window is made up.
    assert_eq!(sum.min_window, None);
    assert_eq!(sum.min_send_window, None);
}

/// `count` messages scheduled every `period` ns from 0 on stream 1 of the
/// client; `send(seq)` gives when each sent one's send began and was
/// recorded, after its schedule, or `None` for a message never sent.
fn schedule_and_send(
    a: &mut Analyzer,
    count: u64,
    period: u64,
    send: impl Fn(u64) -> Option<(u64, u64)>,
) {
    let c = Endpoint::Client;
    for seq in 0..count {
        let t = seq * period;
        let msg = MsgEv {
            seq,
            size: 10,
            framed: 15,
        };
        a.feed(&ev(t, c, 1, Kind::Schedule(msg)));
        if let Some((begin, recorded)) = send(seq) {
            let send = SendEv {
                seq,
                scheduled: t,
                begin: t + begin,
                bytes: 15,
            };
            a.feed(&ev(t + recorded, c, 1, Kind::Send(send)));
        }
    }
}

#[test]
fn a_client_whose_sends_stop_early_is_not_credited_with_their_pace() {
    let ms = 1_000_000;
    let mut a = Analyzer::new(0);
    // 101 messages scheduled every 10 ms over 1 s; only the first three
    // are sent, within 2 ms of their schedule, and then nothing moves.
    schedule_and_send(&mut a, 101, 10 * ms, |seq| {
        (seq < 3).then_some((ms, 2 * ms))
    });
    let (sum, _) = a.finish(0, &Ending::NoFooter);
    assert_eq!(sum.sent, 3);
    // Three sends (two intervals) over the offered second, not over their
    // 22 ms.
    assert!((sum.send_rate - 2.0).abs() < 1e-9, "{}", sum.send_rate);
    assert!(
        (sum.offered_rate - 100.0).abs() < 1e-9,
        "{}",
        sum.offered_rate
    );
    // The steady slope over the last 90 % of the offered period: nothing.
    assert_eq!(sum.send_rate_steady, 0.0);
}

/// Every message sent at its schedule: the send rate is the offered rate
/// (n sends over the span read 20.5/s against an offered 20.0/s).
#[test]
fn a_client_that_sends_everything_on_time_sends_at_the_offered_rate() {
    let mut a = Analyzer::new(0);
    schedule_and_send(&mut a, 41, 50_000_000, |_| Some((0, 0)));
    let (sum, _) = a.finish(0, &Ending::NoFooter);
    assert_eq!(sum.offered_rate, 20.0);
    assert_eq!(sum.send_rate, 20.0);
}

/// Sends that stop in the middle of the steady window: the fit runs over
/// the whole window, the count held where nothing was sent (it stopped at
/// the last send, and read the offered 100/s for a client that sent
/// nothing in the window's last half).
#[test]
fn the_steady_send_rate_holds_the_count_through_a_window_where_sends_stopped() {
    let mut a = Analyzer::new(0);
    // 101 messages scheduled every 10 ms over 1 s; the first 50 sent at
    // their schedule (0 to 490 ms), then nothing.
    schedule_and_send(&mut a, 101, 10_000_000, |seq| (seq < 50).then_some((0, 0)));
    let (sum, _) = a.finish(0, &Ending::NoFooter);
    // The window: the offered second less its first 10 %, in 1 ms buckets
    // [100 ms, 1,001 ms).
    assert_eq!(sum.queue_growth_window_s, (0.1, 1.001));
    // The recount: the sent count at each bucket of the window, by hand.
    let pts: Vec<(f64, f64)> = (100..1001u64)
        .map(|b| (b as f64 / 1e3, (b / 10 + 1).min(50) as f64))
        .collect();
    let n = pts.len() as f64;
    let (mx, my) = (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
        / pts.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
    assert!(slope > 40.0 && slope < 60.0, "{slope}");
    assert!(
        (sum.send_rate_steady - slope).abs() < 1e-6,
        "{} against {slope}",
        sum.send_rate_steady
    );
}

/// A DATA frame of a stream the analysis already judged (a one-tap trace,
/// the frame 3 s after the end on a fast link) is counted and warned
/// about, in the totals, and never a second stream.
#[test]
fn a_frame_after_its_stream_was_judged_is_counted_and_warned_about() {
    use h2probe_analysis::analyze::analyze_trace;
    let s = Endpoint::Server;
    let sec = 1_000_000_000;
    let open = Kind::ConnOpen(ConnOpenEv {
        local: "127.0.0.1:80".into(),
        peer: "127.0.0.1:5000".into(),
    });
    let end = Kind::RpcEnd(RpcEndEv {
        status: 0,
        message: String::new(),
    });
    let data = |len| Kind::Frame(frame(Dir::In, FrameType::DATA, len));
    let events = [
        ev(1, s, 0, open),
        ev(sec, s, 1, data(100)),
        ev(sec + 1, s, 1, end),
        ev(4 * sec, s, 1, data(77)),
        ev(6 * sec, s, 3, data(1)),
    ];
    let header = Header {
        schema: SCHEMA_VERSION,
        tool: "h2probe test".into(),
        clock: "CLOCK_MONOTONIC".into(),
        origin_mono_ns: 0,
        origin_unix_ns: 1_700_000_000_000_000_000,
    };
    let mut text = header.to_line();
    text.push('\n');
    let mut body = vec![];
    for e in &events {
        h2probe_analysis::jsonl::write_event(&mut body, e);
    }
    text.push_str(std::str::from_utf8(&body).unwrap());
    let dir = std::env::temp_dir().join(format!("h2probe-late-frame-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.jsonl");
    std::fs::write(&path, text).unwrap();
    let a = analyze_trace(&path).unwrap();
    let sum = &a.summary;
    assert_eq!(sum.stream_count, 2, "{:?}", sum.streams);
    assert_eq!(sum.streams[0].bytes, 100);
    assert_eq!(sum.data_bytes_in, 178, "the totals take it");
    assert_eq!(
        (sum.frames_after_retirement, sum.data_bytes_after_retirement),
        (1, 77)
    );
    let said: Vec<&String> = a
        .warnings
        .iter()
        .filter(|w| {
            w.contains("1 frame (77 DATA bytes) arrived after the analysis had judged their stream")
        })
        .collect();
    assert_eq!(said.len(), 1, "{:?}", a.warnings);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An RPC the client's h2 never gave a stream (the connection failed
/// first) ends on stream 0 with no `rpc_start`: it counts as a failed RPC
/// (exit 4), and the connection's own frames after it are not taken for a
/// judged stream's.
#[test]
fn an_rpc_that_never_got_a_stream_counts_as_failed() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    a.feed(&ev(
        1,
        c,
        0,
        Kind::RpcEnd(RpcEndEv {
            status: 14,
            message: "could not open the stream: connection error".into(),
        }),
    ));
    // Five seconds on, past any retirement delay: the connection's window.
    a.feed(&ev(5_000_000_001, c, 0, wu(Dir::In, 1000)));
    let (sum, _) = a.finish(0, &Ending::NoFooter);
    assert_eq!(
        sum.rpc_status.iter().collect::<Vec<_>>(),
        [(&"UNAVAILABLE".to_string(), &1)],
        "{:?}",
        sum.rpc_status
    );
    assert_eq!(h2probe_analysis::report::exit_code(&sum, false), 4);
    assert_eq!(sum.frames_after_retirement, 0);
}

/// DATA past the window the trace shows is not judged a violation when the
/// recorder dropped events: the dropped ones may be the WINDOW_UPDATEs that
/// granted it (a server flooding 1-byte updates made the client's trace
/// drop half of them, and the check failed). Dropped events have no time,
/// so even a violation long before the end cannot be judged.
#[test]
fn a_window_violation_in_a_trace_with_dropped_events_cannot_be_judged() {
    let c = Endpoint::Client;
    let run = |dropped: u64| {
        let mut a = Analyzer::new(0);
        let data = || Kind::Frame(frame(Dir::Out, FrameType::DATA, 16_384));
        for k in 0..5 {
            a.feed(&ev(1 + k, c, 1, data()));
        }
        // Ten seconds on: far past the reorder window.
        a.feed(&ev(10_000_000_000, c, 0, wu(Dir::In, 1)));
        let mut footer = Footer::default();
        if dropped > 0 {
            footer.dropped.insert("frame".into(), dropped);
        }
        a.finish(dropped, &Ending::Clean(footer)).0
    };
    let clean = run(0);
    assert_eq!(clean.checks["no_data_beyond_credit"].ok, Some(false));
    let lossy = run(1000);
    let check = &lossy.checks["no_data_beyond_credit"];
    assert_eq!(check.ok, None, "{check:?}");
    assert!(
        check.detail.contains("the recorder dropped 1000 events"),
        "{check:?}"
    );
    assert_eq!(lossy.protocol_violations, clean.protocol_violations);
    // A trace cut short (no footer) still fails a violation settled more
    // than the reorder window before its end, and cannot judge one within
    // it (events in flight at the cut are missing).
    let cut = |violation_at: u64| {
        let mut a = Analyzer::new(0);
        for k in 0..5 {
            let data = Kind::Frame(frame(Dir::Out, FrameType::DATA, 16_384));
            a.feed(&ev(violation_at + k, c, 1, data));
        }
        a.feed(&ev(10_000_000_000, c, 0, wu(Dir::In, 1)));
        a.finish(0, &Ending::NoFooter).0
    };
    let settled = &cut(1).checks["no_data_beyond_credit"];
    assert_eq!(settled.ok, Some(false), "{settled:?}");
    let late = &cut(9_900_000_000).checks["no_data_beyond_credit"];
    assert_eq!(late.ok, None, "{late:?}");
    // The edge: the violation (the 4th frame, at `violation_at + 3`)
    // exactly the window before the end is not settled; a nanosecond
    // earlier it is.
    let edge = 10_000_000_000 - h2probe_analysis::analyze::reorder::WINDOW_NS - 3;
    let at_edge = &cut(edge).checks["no_data_beyond_credit"];
    assert_eq!(at_edge.ok, None, "{at_edge:?}");
    let before = &cut(edge - 1).checks["no_data_beyond_credit"];
    assert_eq!(before.ok, Some(false), "{before:?}");
}

/// A client wait that began before its stream's HEADERS left the client's
/// tap is a wait for the stream to open (h2 gives a stream pending open no
/// capacity) up to the HEADERS; the rest is judged by the windows. A
/// stream whose RPC started and whose HEADERS never left waited on its
/// opening throughout, and a stall then is `not_open`, naming the stream
/// and the server's limit.
#[test]
fn a_wait_before_the_streams_headers_is_a_wait_for_it_to_open() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    let start = rpc_start;
    let headers = || Kind::Frame(frame(Dir::Out, FrameType::HEADERS, 10));
    let limit = Kind::Frame(FrameEv {
        settings: Some(vec![(settings::MAX_CONCURRENT_STREAMS, 1)]),
        ..frame(Dir::In, FrameType::SETTINGS, 6)
    });
    a.feed(&ev(1, c, 0, limit));
    a.feed(&ev(2, c, 1, start()));
    a.feed(&ev(3, c, 1, headers()));
    a.feed(&ev(4, c, 3, start()));
    a.feed(&ev(5, c, 5, start()));
    // Stream 1's wait begins as its HEADERS leave (at 3): all of its 5 ns
    // are on h2's buffer, none waiting to open.
    a.feed(&ev(8, c, 1, blocked(0, 3, false)));
    // Stream 3 waits from 10; its HEADERS leave at 40; it gets capacity at
    // 45 with its windows open: 30 ns not open, 5 ns on h2's buffer.
    a.feed(&ev(40, c, 3, headers()));
    a.feed(&ev(45, c, 3, blocked(0, 10, false)));
    // Stream 5 is never opened: the stall names it.
    let stall = Kind::Stall(StallEv {
        timeout_ns: 1_000,
        pending: 7,
        conn_window: None,
        streams: vec![],
    });
    a.feed(&ev(1_050, c, 0, stall));
    a.feed(&ev(1_100, c, 5, blocked(0, 50, true)));
    let (s, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(s.not_open_blocked_ms.count, 2);
    assert!(
        (s.client_not_open_blocked_s - 1_080e-9).abs() < 1e-12,
        "{s:?}"
    );
    assert!(
        (s.client_h2_buffer_blocked_s - 10e-9).abs() < 1e-15,
        "{s:?}"
    );
    // The timeline's series: the waits in seconds, summed in its bins.
    let total = |series: &h2probe_analysis::series::Series| -> f64 {
        series.points().iter().map(|p| p.1).sum()
    };
    assert!((total(&tl.not_open_blocked) - 1_080e-9).abs() < 1e-15);
    assert!((total(&tl.h2_buffer_blocked) - 10e-9).abs() < 1e-15);
    assert_eq!(s.client_window_blocked_s, 0.0);
    assert_eq!(s.blocked_open_by.get("not_open").copied(), Some(1));
    assert_eq!(s.stall_cause.as_deref(), Some("not_open"));
    let stall = s.stall.as_deref().unwrap();
    assert!(
        stall.contains("stream 5 not open (the server's SETTINGS_MAX_CONCURRENT_STREAMS is 1)"),
        "{stall}"
    );
    assert!(!stall.contains("stream 3 not open"), "{stall}");
    let kinds: Vec<_> = tl.intervals.iter().map(|i| i.2).collect();
    use h2probe_analysis::analyze::Blocked;
    assert_eq!(
        kinds,
        [
            Blocked::H2Buffer,
            Blocked::NotOpen,
            Blocked::H2Buffer,
            Blocked::NotOpen
        ]
    );
    let head = h2probe_analysis::report::headline(&s);
    assert!(
        head.contains("stream not open 0.00s (1 never resumed)"),
        "{head}"
    );
}

/// The timeline keeps the first 20,000 blocked intervals and counts the
/// rest, so a run of millions of short waits plots in bounded memory.
#[test]
fn blocked_intervals_past_the_cap_are_counted_not_kept() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, c, 1, rpc_start()));
    a.feed(&ev(
        2,
        c,
        1,
        Kind::Frame(frame(Dir::Out, FrameType::HEADERS, 10)),
    ));
    for i in 0..20_003u64 {
        let t = 10 + 10 * i;
        a.feed(&ev(t + 5, c, 1, blocked(i, t, false)));
    }
    let (s, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(s.h2_buffer_blocked_ms.count, 20_003);
    assert_eq!(tl.intervals.len(), 20_000);
    assert_eq!(tl.intervals_dropped, 3);
}

/// A server connection no client connection of the trace pairs with (a
/// foreign client of `serve`, or a client whose run was not merged) is left
/// out of the accounting across sides, and the paired ones are judged (the
/// check failed: "more messages decoded than sent"). A mismatch among the
/// paired ones still fails; with nothing paired the check cannot judge.
#[test]
fn unpaired_connections_are_left_out_of_the_accounting_across_sides() {
    // `failed`: an RPC that ended UNAVAILABLE, on the paired client
    // connection (1) or on a client connection to a server the trace
    // lacks (3, which sent one message).
    let judge_with = |paired_decoded: u64, pairs: bool, failed: Option<u32>| {
        let mut a = Analyzer::new(0);
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        a.feed(&on(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        let peer = if pairs {
            "127.0.0.1:5000"
        } else {
            "127.0.0.1:5001"
        };
        a.feed(&on(2, s, 1, 0, open("127.0.0.1:80", peer)));
        a.feed(&on(3, s, 2, 0, open("127.0.0.1:80", "127.0.0.1:6000")));
        schedule_and_send(&mut a, 3, 1_000_000, |_| Some((0, 0)));
        // A client connection to another server: one message sent, and a
        // connection refused here (nothing sent: not listed as unpaired).
        a.feed(&on(4, c, 3, 0, open("127.0.0.1:7000", "127.0.0.1:443")));
        a.feed(&on(4, c, 4, 0, open("127.0.0.1:7001", "127.0.0.1:443")));
        let one = MsgEv {
            seq: 0,
            size: 10,
            framed: 15,
        };
        let sent = SendEv {
            seq: 0,
            scheduled: 5,
            begin: 5,
            bytes: 15,
        };
        a.feed(&on(5, c, 3, 1, Kind::Schedule(one.clone())));
        a.feed(&on(6, c, 3, 1, Kind::Send(sent)));
        a.feed(&on(5, c, 4, 1, Kind::Schedule(one)));
        let never = NeverSentEv {
            seq: 0,
            reason: NeverSentReason::StreamError,
            count: 1,
        };
        a.feed(&on(6, c, 4, 1, Kind::NeverSent(never)));
        if let Some(conn) = failed {
            let end = Kind::RpcEnd(RpcEndEv {
                status: 14,
                message: "gone".into(),
            });
            a.feed(&on(7, c, conn, 1, end));
        }
        let msg = |seq| MsgEv {
            seq,
            size: 10,
            framed: 15,
        };
        let done = |seq| CompleteEv {
            seq,
            worker: 0,
            service_ns: 1,
        };
        let mut t = 10_000_000;
        for (conn, n) in [(1, paired_decoded), (2, 2)] {
            for seq in 0..n {
                t += 1;
                a.feed(&on(t, s, conn, 1, Kind::Decode(msg(seq))));
                a.feed(&on(t, s, conn, 1, Kind::Complete(done(seq))));
            }
        }
        // The foreign connection closes and is folded in long before the
        // end (counted once, there); the others are still open at the end.
        let close = Kind::ConnClose(ConnCloseEv {
            error: String::new(),
            bytes_in: 0,
            bytes_out: 0,
        });
        a.feed(&on(t + 1, s, 2, 0, close));
        let ping = Kind::Frame(frame(Dir::In, FrameType::PING, 8));
        a.feed(&on(10_000_000_000, s, 1, 0, ping));
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    let judge = |paired_decoded, pairs| judge_with(paired_decoded, pairs, None);

    let s = judge(3, true);
    let c = &s.checks["accounting"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
    assert!(
        c.detail.starts_with(
            "scheduled 4 = completed 3 + discarded 0 + never_sent 1 + lost in flight 0 over the connections paired"
        ) && c.detail.contains("server: decoded 5 = completed 5 + discarded 0")
            && c.detail.contains("left out across sides: 1 server connection no client connection of this trace pairs with")
            && c.detail.contains("the first: server conn 2 (peer 127.0.0.1:6000)"),
        "{}",
        c.detail
    );
    let u = s.unpaired.as_ref().unwrap();
    assert_eq!((u.server_connections, u.decoded, u.completed), (1, 2, 2));
    // The connection to another server is listed; the refused one, which
    // sent nothing, is not (its never-sent message weighs on both sides).
    assert_eq!((u.client_connections, u.scheduled, u.sent), (1, 1, 1));
    assert_eq!((s.lost_in_flight, s.unaccounted), (Some(0), Some(0)));
    let head = h2probe_analysis::report::headline(&s);
    assert!(
        head.contains("unpaired  1 server connection no client connection pairs with (decoded 2)"),
        "{head}"
    );

    // One message of the paired connection never decoded, every RPC OK.
    let c = &judge(2, true).checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(c.detail.contains("lost in flight 1 over"), "{}", c.detail);
    // A failed RPC excuses the loss only on a connection in the equation
    // (a foreign connection's failure excused it).
    let c = &judge_with(2, true, Some(3)).checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    // Nor does a failure on the refused connection, which sent nothing.
    let c = &judge_with(2, true, Some(4)).checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    let c = &judge_with(2, true, Some(1)).checks["accounting"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
    assert!(c.detail.contains("(lost at a reset"), "{}", c.detail);

    // The paired connection's messages all lost in flight (none decoded
    // there): messages crossed it, so it is judged, and fails.
    let c = &judge(0, true).checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(c.detail.contains("lost in flight 3 over"), "{}", c.detail);

    // Nothing pairs: every message is some other side's.
    let s = judge(3, false);
    let c = &s.checks["accounting"];
    assert_eq!(c.ok, None, "{}", c.detail);
    assert!(
        c.detail
            .starts_with("no connection a message crossed pairs")
            && c.detail
                .contains("2 server connections no client connection of this trace pairs with")
            && c.detail
                .contains("2 client connections no server connection of this trace pairs with"),
        "{}",
        c.detail
    );
}

/// `n` messages scheduled, sent and decoded, the first of them completed.
fn all_decoded_one_completed(n: u64) -> Analyzer {
    let mut a = Analyzer::new(0);
    schedule_and_send(&mut a, n, 1_000_000, |_| Some((0, 0)));
    let s = Endpoint::Server;
    for seq in 0..n {
        let msg = MsgEv {
            seq,
            size: 10,
            framed: 15,
        };
        a.feed(&ev(10_000_000 + seq, s, 1, Kind::Decode(msg)));
    }
    let done = CompleteEv {
        seq: 0,
        worker: 0,
        service_ns: 1,
    };
    a.feed(&ev(20_000_000, s, 1, Kind::Complete(done)));
    a
}

/// A failed `accounting` says which equation failed (its detail printed
/// "scheduled 3 = completed 2 + …" whatever the numbers).
#[test]
fn a_failed_accounting_says_which_equation_does_not_hold() {
    let a = all_decoded_one_completed(3);
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    let c = &sum.checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(
        c.detail
            .starts_with("scheduled 3 ≠ completed 1 + discarded 0 + never_sent 0")
            && c.detail
                .contains("client: scheduled 3 = sent 3 + never_sent 0")
            && c.detail
                .contains("server: decoded 3 ≠ completed 1 + discarded 0"),
        "{}",
        c.detail
    );
}

/// A message discarded closes its books as one completed does: nothing
/// is unaccounted.
#[test]
fn a_discarded_message_is_accounted_for() {
    let mut a = all_decoded_one_completed(2);
    let s = Endpoint::Server;
    let dropped = DiscardEv {
        seq: 1,
        reason: DiscardReason::QueueLimit,
    };
    a.feed(&ev(20_000_001, s, 1, Kind::Discard(dropped)));
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!((sum.unaccounted, sum.lost_in_flight), (Some(0), Some(0)));
    let c = &sum.checks["accounting"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
}

/// Unary messages a replaced connection handed to its replacement are in
/// both connections' books (`never_sent` `handed_over` where scheduled,
/// `handed` where sent) and counted once in the run's: scheduled 3, sent 3,
/// never sent 0, and the accounting holds, saying the handed terms. A
/// `handed` without its `handed_over` (or the reverse) breaks the
/// client's equation; one naming another connection as `from` (a merge
/// that did not renumber it) leaves the sums whole and breaks each
/// connection's books, and so does a message sent on a connection that
/// neither scheduled it nor took it over.
#[test]
fn messages_handed_to_a_replacement_are_counted_once() {
    let run_from = |handed_in: bool, handed_over: bool, from: u32| {
        let mut a = Analyzer::new(0);
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let on = |conn: u32, e: Event| Event { conn, ..e };
        let msg = |seq| MsgEv {
            seq,
            size: 10,
            framed: 15,
        };
        for seq in 0..3u64 {
            a.feed(&on(1, ev(seq * 1_000, c, 0, Kind::Schedule(msg(seq)))));
        }
        let send = |seq: u64| {
            Kind::Send(SendEv {
                seq,
                scheduled: seq * 1_000,
                begin: seq * 1_000 + 10,
                bytes: 15,
            })
        };
        a.feed(&on(1, ev(10, c, 1, send(0))));
        if handed_over {
            let over = NeverSentEv {
                seq: 1,
                reason: NeverSentReason::HandedOver,
                count: 2,
            };
            a.feed(&on(1, ev(5_000, c, 0, Kind::NeverSent(over))));
        }
        if handed_in {
            let took = HandedEv {
                seq: 1,
                count: 2,
                from,
            };
            a.feed(&on(2, ev(5_000, c, 0, Kind::Handed(took))));
        }
        for (seq, conn, stream) in [(1, 2, 1), (2, 2, 3)] {
            a.feed(&on(conn, ev(6_000 + seq, c, stream, send(seq))));
        }
        // Each call is a one-message RPC to the server.
        for (conn, stream) in [(1, 1), (2, 1), (2, 3)] {
            let done = CompleteEv {
                seq: 0,
                worker: 0,
                service_ns: 1,
            };
            a.feed(&on(conn, ev(9_000, s, stream, Kind::Decode(msg(0)))));
            a.feed(&on(conn, ev(9_500, s, stream, Kind::Complete(done))));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    let run = |handed_in, handed_over| run_from(handed_in, handed_over, 1);
    let sum = run(true, true);
    assert_eq!(
        (sum.scheduled, sum.sent, sum.never_sent, sum.completed),
        (3, 3, 0, 3)
    );
    assert_eq!((sum.handed_over, sum.handed_in), (2, 2));
    assert!(sum.never_sent_by_reason.is_empty());
    assert_eq!((sum.unaccounted, sum.lost_in_flight), (Some(0), Some(0)));
    let c = &sum.checks["accounting"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
    assert!(
        c.detail
            .contains("client: scheduled 3 + handed in 2 = sent 3 + never_sent 0 + handed over 2"),
        "{}",
        c.detail
    );
    for (handed_in, handed_over) in [(true, false), (false, true)] {
        let sum = run(handed_in, handed_over);
        let c = &sum.checks["accounting"];
        assert_eq!(c.ok, Some(false), "{}", c.detail);
        assert!(
            c.detail.contains("client: scheduled 3 + handed in"),
            "{}",
            c.detail
        );
    }
    // The sums hold; the books of connections 1, 2 and 7 do not.
    for (sum, why) in [
        (
            run_from(true, true, 7),
            "runs of handed messages not matched: the first, connection 1's from seq 1, handed over and not taken in",
        ),
        (
            run_from(false, false, 1),
            "2 client connections whose scheduled and handed in ≠ sent and never sent (handed over included): the first, connection 1, off by +2",
        ),
    ] {
        let c = &sum.checks["accounting"];
        assert_eq!(c.ok, Some(false), "{}", c.detail);
        assert!(
            c.detail.contains(", but not each connection's books: ") && c.detail.contains(why),
            "{}",
            c.detail
        );
    }
}

/// Each stream's c2s bytes get a cumulative series, per tap, up to twice
/// `MAX_STREAM_SERIES` in all; the later ones are summed together per tap
/// (streams, bytes and their series), so that the plot's top is every
/// stream's bytes.
#[test]
fn streams_past_the_plotted_bytes_series_are_summed_per_tap() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    let max = 2 * h2probe_analysis::analyze::summary::MAX_STREAM_SERIES as u32;
    let data = |len| Kind::Frame(frame(Dir::Out, FrameType::DATA, len));
    for k in 0..max + 2 {
        let t = 10 * u64::from(k) + 1;
        a.feed(&ev(t, c, 1 + 2 * k, data(10)));
        // An empty DATA frame (END_STREAM alone) carries no bytes.
        a.feed(&ev(t + 1, c, 1 + 2 * k, data(0)));
        a.feed(&ev(t + 2, c, 1 + 2 * k, data(20)));
        a.feed(&ev(t + 3, c, 1 + 2 * k, data(5)));
    }
    // A stream that never carried a byte is not one of them.
    a.feed(&ev(1_000_000, c, 1 + 2 * (max + 2), data(0)));
    let (_, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(tl.stream_bytes.len(), max as usize);
    let values: Vec<f64> = tl.stream_bytes[&(c, 1, 1)]
        .points()
        .iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(values, [35.0]);
    let rest = &tl.stream_bytes_untracked[&c];
    assert_eq!((rest.streams, rest.bytes), (2, 70.0));
    assert_eq!(rest.series.points().last().map(|p| p.1), Some(70.0));
    assert!(!tl.stream_bytes_untracked.contains_key(&Endpoint::Server));
}

/// A connection retired mid-pass whose stream is plotted keeps its key
/// for timeline.csv's rows (both taps' ids); one plotting nothing does not.
#[test]
fn a_retired_connection_with_a_plotted_stream_keeps_its_key() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let close = || {
        Kind::ConnClose(ConnCloseEv {
            error: String::new(),
            bytes_in: 0,
            bytes_out: 0,
        })
    };
    let data = |dir| Kind::Frame(frame(dir, FrameType::DATA, 10));
    let mut a = Analyzer::new(0);
    for (conn, port) in [(1, 5000), (3, 5001)] {
        let client = format!("127.0.0.1:{port}");
        a.feed(&on(1, c, conn, 0, open(&client, "127.0.0.1:80")));
        a.feed(&on(1, s, conn, 0, open("127.0.0.1:80", &client)));
    }
    // Connection 1 carries DATA on stream 1 and closes at once; connection
    // 3 only opens and closes. Connection 5 goes on for 10 s, long past
    // their retirement.
    a.feed(&on(5, s, 1, 1, rpc_start()));
    a.feed(&on(10, c, 1, 1, data(Dir::Out)));
    a.feed(&on(11, s, 1, 1, data(Dir::In)));
    a.feed(&on(12, s, 1, 1, chunk(10)));
    a.feed(&on(20, s, 1, 1, rpc_end(0)));
    a.feed(&on(21, c, 1, 1, rpc_end(0)));
    for conn in [1, 3] {
        a.feed(&on(1_000, c, conn, 0, close()));
        a.feed(&on(1_000, s, conn, 0, close()));
    }
    // Connection 7 only the server's tap saw (a foreign client's): its
    // bytes plot is what keeps its key.
    a.feed(&on(1, s, 7, 0, open("127.0.0.1:80", "127.0.0.1:6000")));
    a.feed(&on(5, s, 7, 1, rpc_start()));
    a.feed(&on(11, s, 7, 1, data(Dir::In)));
    a.feed(&on(12, s, 7, 1, chunk(10)));
    a.feed(&on(20, s, 7, 1, rpc_end(0)));
    a.feed(&on(1_000, s, 7, 0, close()));
    a.feed(&on(2_000, c, 5, 0, open("127.0.0.1:5002", "127.0.0.1:80")));
    for k in 1..=10u64 {
        a.feed(&on(k * 1_000_000_000, c, 5, 1, data(Dir::Out)));
    }
    let (_, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    let key = |ep, conn| tl.conn_keys.get(&(ep, conn)).cloned();
    assert_eq!(key(c, 1).as_deref(), Some("5000-80"));
    assert_eq!(key(s, 1).as_deref(), Some("5000-80"));
    assert_eq!(key(c, 3), None);
    assert_eq!(key(s, 7).as_deref(), Some("6000-80"));
}

/// A client connection to a server the trace lacks hands its backlog over
/// seconds after it closed (its replacement's connect took that long) to
/// a replacement that reaches the traced server. The late `handed_over`
/// reopens the unpaired connection's books, and counts where it did:
/// unpaired, out of the accounting across sides, which holds. (It was
/// charged to the paired side, and the check failed: helper-97.)
#[test]
fn a_late_hand_over_counts_where_its_connection_did() {
    let mut a = Analyzer::new(0);
    let close = || {
        Kind::ConnClose(ConnCloseEv {
            error: String::new(),
            bytes_in: 0,
            bytes_out: 0,
        })
    };
    let msg = |seq| MsgEv {
        seq,
        size: 10,
        framed: 15,
    };
    let send = |seq: u64, t: u64| {
        Kind::Send(SendEv {
            seq,
            scheduled: seq,
            begin: t,
            bytes: 15,
        })
    };
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    // Connection 1, to another server: 3 offered, 1 sent, then closed.
    a.feed(&on(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:81")));
    for seq in 0..3 {
        a.feed(&on(seq, c, 1, 0, Kind::Schedule(msg(seq))));
    }
    a.feed(&on(10, c, 1, 1, send(0, 10)));
    a.feed(&on(1_000_000, c, 1, 0, close()));
    // 3 s later its replacement, to the traced server, takes the other 2.
    let later = 3_000_000_000;
    a.feed(&on(later, c, 2, 0, open("127.0.0.1:5001", "127.0.0.1:80")));
    a.feed(&on(later, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5001")));
    let over = NeverSentEv {
        seq: 1,
        reason: NeverSentReason::HandedOver,
        count: 2,
    };
    a.feed(&on(later + 1, c, 1, 0, Kind::NeverSent(over)));
    let took = HandedEv {
        seq: 1,
        count: 2,
        from: 1,
    };
    a.feed(&on(later + 1, c, 2, 0, Kind::Handed(took)));
    for (seq, stream) in [(1, 1), (2, 3)] {
        let t = later + 10 + seq;
        a.feed(&on(t, c, 2, stream, send(seq, t)));
        a.feed(&on(t + 5, s, 1, stream, Kind::Decode(msg(0))));
        let done = CompleteEv {
            seq: 0,
            worker: 0,
            service_ns: 1,
        };
        a.feed(&on(t + 6, s, 1, stream, Kind::Complete(done)));
    }
    let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
    let u = sum
        .unpaired
        .clone()
        .expect("connection 1 pairs with nothing");
    assert_eq!(
        (u.client_connections, u.scheduled, u.sent, u.never_sent),
        (1, 3, 1, 2)
    );
    let c = &sum.checks["accounting"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
    assert!(
        c.detail.starts_with(
            "scheduled and handed in 2 = completed 2 + discarded 0 + never_sent and handed over 0 + lost in flight 0"
        ),
        "{}",
        c.detail
    );
}

/// Counts the trace gives are summed saturating: a footer's 2^64 − 1 and 1
/// dropped summed to 0 (the check held, exit 0), two `never_sent` of 2^63
/// to 0 (accounting held). Now they stay at the most a u64 holds, and the
/// checks they feed fail.
#[test]
fn the_traces_counts_saturate_instead_of_wrapping() {
    let dir = std::env::temp_dir().join(format!("h2probe-wrap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.jsonl");
    let header = r#"{"type":"header","schema":1,"tool":"h2probe test","clock":"CLOCK_MONOTONIC","origin_mono_ns":1,"origin_unix_ns":2}"#;
    let never = |t: u64| {
        format!(
            r#"{{"t":{t},"ep":"client","conn":1,"stream":1,"type":"never_sent","seq":0,"reason":"backlog","count":{}}}"#,
            1u64 << 63
        )
    };
    let footer = format!(
        r#"{{"type":"footer","events":2,"dropped":{{"frame":{},"release":1}}}}"#,
        u64::MAX
    );
    std::fs::write(
        &path,
        format!("{header}\n{}\n{}\n{footer}\n", never(5), never(6)),
    )
    .unwrap();
    let a = h2probe_analysis::analyze::analyze_trace(&path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let s = a.summary;
    assert_eq!(s.dropped_events, u64::MAX);
    assert_eq!(s.checks["no_dropped_events"].ok, Some(false));
    assert_eq!(s.never_sent, u64::MAX);
    assert_eq!(s.never_sent_by_reason["backlog"], u64::MAX);
}

/// Count maps keyed by what the trace says hold at most 64 keys, the rest
/// under "(others)" (200,000 distinct status codes made a 4 MB summary
/// and a headline of 40,000 lines).
#[test]
fn maps_keyed_by_the_traces_values_are_capped() {
    let mut a = Analyzer::new(0);
    for i in 0..100u32 {
        let end = Kind::RpcEnd(RpcEndEv {
            status: 1000 + i,
            message: String::new(),
        });
        a.feed(&ev(10 + i as u64, Endpoint::Client, 1 + 2 * i, end));
    }
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(sum.rpc_status.len(), 64);
    assert_eq!(sum.rpc_status["(others)"], 37);
    assert_eq!(sum.rpc_status["CODE_1000"], 1);
    assert_eq!(sum.rpc_status.values().sum::<u64>(), 100);
}

/// `release_point`: each timed release at its stream's point (its
/// `rpc_start`'s `release`) and never before its trigger, judged on `t`.
#[test]
fn the_release_point_check_judges_each_release_against_its_streams_point() {
    let s = Endpoint::Server;
    let start_with = |release, withhold_after| {
        Kind::RpcStart(RpcStartEv {
            path: "/p".into(),
            deadline_ns: None,
            framing: None,
            release,
            withhold_after,
        })
    };
    let start = |point| start_with(Some(point), None);
    let rel = |bytes, at, seq| Kind::Release(ReleaseEv { bytes, at, seq });
    let decode = |seq| {
        Kind::Decode(MsgEv {
            seq,
            size: 95,
            framed: 100,
        })
    };
    let complete = |seq| {
        Kind::Complete(CompleteEv {
            seq,
            worker: 0,
            service_ns: 1,
        })
    };
    let judge = |events: Vec<(u64, u32, Kind)>| {
        let mut a = Analyzer::new(0);
        for (t, stream, k) in events {
            a.feed(&ev(t, s, stream, k));
        }
        let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
        sum.checks["release_point"].clone()
    };
    // The check fails, saying `what`.
    let fails = |events: Vec<(u64, u32, Kind)>, what: &str| {
        let c = judge(events);
        assert_eq!(c.ok, Some(false), "{what}: {c:?}");
        assert!(c.detail.contains(what), "{what}: {c:?}");
    };
    use ReleasePoint::{Complete, Decode, End, Frame};
    // Holds: stream 1 at complete (a release stamped in its complete's
    // nanosecond but written first, and one for a message discarded);
    // stream 3 at frame, released as received; stream 5 at decode.
    let sound = vec![
        (1, 1, start(Complete)),
        (1, 3, start(Frame)),
        (1, 5, start(Decode)),
        (2, 1, chunk(200)),
        (2, 1, decode(0)),
        (2, 1, decode(1)),
        (3, 1, rel(100, Complete, Some(0))),
        (3, 1, complete(0)),
        (
            4,
            1,
            Kind::Discard(DiscardEv {
                seq: 1,
                reason: DiscardReason::QueueLimit,
            }),
        ),
        (4, 1, rel(100, Complete, Some(1))),
        (5, 3, rel(60, Frame, None)),
        (5, 3, chunk(60)),
        (6, 5, chunk(100)),
        (6, 5, decode(0)),
        (6, 5, rel(100, Decode, Some(0))),
        (7, 1, rel(3, End, None)),
    ];
    let c = judge(sound.clone());
    assert_eq!(c.ok, Some(true), "{c:?}");
    assert!(c.detail.starts_with("4 releases"), "{c:?}");
    let ok_end = || {
        Kind::RpcEnd(RpcEndEv {
            status: 0,
            message: String::new(),
        })
    };
    // Each RPC ends OK, having released what it received.
    let mut ended = sound.clone();
    ended.extend([(8, 1, ok_end()), (8, 3, ok_end()), (8, 5, ok_end())]);
    let c = judge(ended.clone());
    assert_eq!(c.ok, Some(true), "{c:?}");
    // A message whose release never came: left to the end release.
    let mut forgot = ended.clone();
    forgot.remove(9);
    fails(
        forgot.clone(),
        "1 violation; first: stream 1/1 ended OK with 1 decoded message(s) never released \
         at complete (message 1 first)",
    );
    // ... which an RPC that did not end OK may have (its stream gone), and
    // so may one whose rpc_start says --stall-stream withholds it.
    let mut cancelled = forgot.clone();
    let end_of_1 = cancelled.len() - 3;
    cancelled[end_of_1] = (
        8,
        1,
        Kind::RpcEnd(RpcEndEv {
            status: 1,
            message: "cancelled".into(),
        }),
    );
    assert_eq!(judge(cancelled).ok, Some(true));
    let mut withheld = forgot.clone();
    withheld[0] = (1, 1, start_with(Some(Complete), Some(100)));
    let c = judge(withheld.clone());
    assert_eq!(c.ok, Some(true), "{c:?}");
    assert!(
        c.detail.ends_with(
            "; 2 RPCs that ended OK released all they received; 1 that ended OK not asked to \
             (releases withheld by --stall-stream, or a body dropped)"
        ),
        "{c:?}"
    );
    // ... but only once its body got that far: 200 bytes of a stream the
    // server would withhold from 1,000 on were all owed.
    withheld[0] = (1, 1, start_with(Some(Complete), Some(1_000)));
    fails(
        withheld,
        "stream 1/1 ended OK with 1 decoded message(s) never released",
    );
    // At frame: bytes received and never released.
    let mut short = ended.clone();
    short[10].2 = rel(50, Frame, None);
    fails(
        short,
        "stream 1/3 ended OK having released 50 of the 60 bytes it received at frame",
    );
    // A release after its RPC ended, or before it began (a nanosecond
    // before its rpc_start), is judged, and wrong; one in its rpc_start's
    // nanosecond, written before it, is sound.
    let mut after = ended.clone();
    after.push((9, 3, rel(10, Frame, None)));
    fails(
        after,
        "first: stream 1/3 released 10 bytes at frame outside its RPC (no rpc_start of it under way)",
    );
    let mut before = ended.clone();
    before.insert(0, (0, 3, rel(10, Frame, None)));
    fails(
        before,
        "first: stream 1/3 released 10 bytes at frame outside its RPC (no rpc_start of it under way)",
    );
    // Everything of one nanosecond, written in any order, is read in one:
    // a stream's rpc_start, its chunk, its release; a message's decode and
    // its release.
    let instant = [
        (1, 3, start(Frame)),
        (1, 3, chunk(60)),
        (1, 3, rel(60, Frame, None)),
        (1, 5, start(Decode)),
        (1, 5, chunk(100)),
        (1, 5, decode(0)),
        (1, 5, rel(100, Decode, Some(0))),
    ];
    for order in [
        [0, 1, 2, 3, 4, 5, 6],
        [2, 1, 0, 6, 5, 4, 3],
        [1, 2, 0, 4, 6, 3, 5],
    ] {
        let events = order.iter().map(|&i| instant[i].clone()).collect();
        let c = judge(events);
        assert_eq!(c.ok, Some(true), "{order:?}: {c:?}");
        assert!(c.detail.starts_with("2 releases"), "{order:?}: {c:?}");
    }
    // Two faults of one nanosecond: the first named does not follow the
    // file.
    let two = vec![
        (1, 1, start(Complete)),
        (1, 3, start(Complete)),
        (2, 3, rel(10, Frame, None)),
        (2, 1, rel(10, Frame, None)),
    ];
    for events in [
        two.clone(),
        [&two[..2], &[two[3].clone(), two[2].clone()]].concat(),
    ] {
        fails(
            events,
            "2 violations; first: stream 1/1 released 10 bytes at frame, but its rpc_start says complete",
        );
    }
    // ... nor does it for two of one stream: the smaller release first.
    let one_stream = vec![
        (1, 1, start(Complete)),
        (2, 1, rel(20, Frame, None)),
        (2, 1, rel(10, Frame, None)),
    ];
    for events in [
        one_stream.clone(),
        vec![
            one_stream[0].clone(),
            one_stream[2].clone(),
            one_stream[1].clone(),
        ],
    ] {
        fails(
            events,
            "2 violations; first: stream 1/1 released 10 bytes at frame, but its rpc_start says complete",
        );
    }
    // At start: a message's release once its worker took it (in the
    // start's nanosecond, written first, too), not before.
    let started = |seq| {
        Kind::Start(StartEv {
            seq,
            worker: 0,
            wait_ns: 1,
            depth: 0,
        })
    };
    let at_start = vec![
        (1, 9, start(ReleasePoint::Start)),
        (2, 9, chunk(100)),
        (2, 9, decode(0)),
        (3, 9, rel(100, ReleasePoint::Start, Some(0))),
        (3, 9, started(0)),
        (4, 9, complete(0)),
        (5, 9, ok_end()),
    ];
    let c = judge(at_start.clone());
    assert_eq!(c.ok, Some(true), "{c:?}");
    assert!(c.detail.starts_with("1 release at"), "{c:?}");
    let mut too_soon = at_start.clone();
    too_soon[3].0 = 2;
    fails(
        too_soon,
        "stream 1/9 released message 0 at start with no start (or discard) of it at or before that t",
    );
    // A body dropped mid-message (`--drop-stream`): h2 returns what the
    // stream held, so an RPC that ended OK owed none of it.
    let dropped = vec![
        (1, 3, start(Frame)),
        (2, 3, chunk(60)),
        (2, 3, rel(20, Frame, None)),
        (3, 3, Kind::BodyDrop(BodyDropEv {})),
        (4, 3, ok_end()),
    ];
    let c = judge(dropped.clone());
    assert_eq!(c.ok, Some(true), "{c:?}");
    assert!(c.detail.contains("1 that ended OK not asked to"), "{c:?}");
    fails(
        dropped
            .into_iter()
            .filter(|e| !matches!(e.2, Kind::BodyDrop(_)))
            .collect(),
        "stream 1/3 ended OK having released 20 of the 60 bytes it received at frame",
    );
    // A handler that forgot every release of an RPC that ended OK: no
    // release to judge, and yet a fault.
    let forgot_all: Vec<_> = ended
        .iter()
        .filter(|(_, stream, k)| *stream == 5 || !matches!(k, Kind::Release(_)))
        .cloned()
        .collect();
    fails(
        forgot_all,
        "2 violations; first: stream 1/1 ended OK with 2 decoded message(s) never released \
         at complete (message 0 first)",
    );
    // A release smaller than its message, whichever of the release and
    // the decode of one nanosecond the file holds first.
    for release_first in [false, true] {
        let mut part = ended.clone();
        part[14] = (6, 5, rel(95, Decode, Some(0)));
        if release_first {
            part.swap(13, 14);
        }
        fails(
            part,
            "1 violation; first: stream 1/5 released 95 bytes for message 0, \
             whose decode framed 100",
        );
    }

    // A release at complete a nanosecond before its complete.
    let mut early = sound.clone();
    early[7].0 = 2;
    fails(
        early,
        "1 violation; first: stream 1/1 released message 0 at complete with no complete \
         (or discard) of it at or before that t",
    );
    // A message released twice, both after its decode.
    let mut twice = sound.clone();
    twice.push((8, 5, rel(100, Decode, Some(0))));
    fails(
        twice,
        "stream 1/5 released message 0 at decode a second time",
    );
    // A release on a stream whose rpc_start names no point is not judged,
    // and said.
    let mut unnamed_one = sound.clone();
    unnamed_one.push((8, 7, start_with(None, None)));
    unnamed_one.push((8, 7, rel(50, Frame, None)));
    let c = judge(unnamed_one);
    assert_eq!(c.ok, Some(true), "{c:?}");
    assert!(
        c.detail.starts_with("4 releases")
            && c.detail
                .ends_with("; 1 not judged (their stream's rpc_start names no release point)"),
        "{c:?}"
    );
    // Bytes released at frame before they were received.
    let mut ahead = sound.clone();
    ahead[10].0 = 4;
    fails(ahead, "released 60 bytes at frame, more than the 0");
    // A release at another point than the stream's.
    let mut other = sound.clone();
    other[14] = (6, 5, rel(100, Frame, None));
    fails(
        other,
        "stream 1/5 released 100 bytes at frame, but its rpc_start says decode",
    );
    // No rpc_start naming a point: nothing to judge against.
    let unnamed: Vec<_> = sound
        .into_iter()
        .map(|(t, stream, k)| match k {
            Kind::RpcStart(_) => (t, stream, start_with(None, None)),
            k => (t, stream, k),
        })
        .collect();
    let c = judge(unnamed);
    assert_eq!(c.ok, None, "{c:?}");
    assert!(c.detail.contains("no rpc_start names"), "{c:?}");
}

/// `rules_broken` counts a frame once: as its receiver's tap read it, or
/// as its sender's wrote it when the trace has no receiver's tap; and a
/// frame both taps saw adds no phantom `wire_error` to the headline.
#[test]
fn a_rule_broken_counts_once_per_frame_by_who_could_see_it() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let broke = |dir, rule: &str| {
        Kind::WireError(WireErrorEv {
            dir,
            offset: 24,
            error: format!(
                "byte 24: rule broken: {rule} (RFC 9113 §6.7: a connection error of type PROTOCOL_ERROR; stream 3)"
            ),
        })
    };
    let judge = |events: Vec<(Endpoint, Kind)>| {
        let mut a = Analyzer::new(0);
        for (t, (ep, k)) in events.into_iter().enumerate() {
            a.feed(&ev(t as u64 + 1, ep, 0, k));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    let ping = "PING frame on a stream other than 0";
    // Both taps saw the client's frame (a `run`): once, and the headline
    // names the rule and nothing else.
    let both = judge(vec![(c, broke(Dir::Out, ping)), (s, broke(Dir::In, ping))]);
    assert_eq!(both.rules_broken[&format!("client: {ping}")], 1);
    assert_eq!(both.wire_errors, 2);
    let head = h2probe_analysis::report::headline(&both);
    assert!(head.contains(&format!("client broke: {ping}×1")), "{head}");
    assert!(!head.contains("wire_error×"), "{head}");
    // Two frames of one client in a trace with a server: the server's tap
    // read one; the other its tap never saw (another connection's server,
    // not in the trace) is not counted: the receiver's count stands.
    let merged = judge(vec![
        (c, broke(Dir::Out, ping)),
        (s, broke(Dir::In, ping)),
        (c, broke(Dir::Out, ping)),
    ]);
    assert_eq!(merged.rules_broken[&format!("client: {ping}")], 1);
    // A client alone against a foreign server: as its own tap wrote them,
    // and the server's as its tap read them.
    let alone = judge(vec![
        (c, broke(Dir::Out, ping)),
        (c, broke(Dir::Out, ping)),
        (c, broke(Dir::In, ping)),
    ]);
    assert_eq!(alone.rules_broken[&format!("client: {ping}")], 2);
    assert_eq!(alone.rules_broken[&format!("server: {ping}")], 1);
    // Keys come from the trace's text: an edited one names a hundred rules,
    // of which 63 are kept and the rest counted under `(others)`.
    let many = judge(
        (0..100)
            .map(|i| (s, broke(Dir::In, &format!("made-up rule {i}"))))
            .collect(),
    );
    assert_eq!(many.rules_broken.len(), 64);
    assert_eq!(many.rules_broken["(others)"], 37);
    // The server's frame that the client's tap read: once, as read.
    let served = judge(vec![(s, broke(Dir::Out, ping)), (c, broke(Dir::In, ping))]);
    assert_eq!(served.rules_broken[&format!("server: {ping}")], 1);
    // A client alone writing a hundred: as written, the names kept and
    // the rest under `(others)`, named first.
    let written = judge(
        (0..100)
            .map(|i| (c, broke(Dir::Out, &format!("made-up rule {i:03}"))))
            .collect(),
    );
    let kept: Vec<_> = written.rules_broken.iter().collect();
    assert_eq!(kept.len(), 64);
    assert_eq!(kept[0], (&"(others)".to_string(), &37));
    assert_eq!(kept[1], (&"client: made-up rule 000".to_string(), &1));
    assert_eq!(kept[63], (&"client: made-up rule 062".to_string(), &1));
    // A server alone, the same.
    let written = judge(
        (0..100)
            .map(|i| (s, broke(Dir::Out, &format!("made-up rule {i:03}"))))
            .collect(),
    );
    assert_eq!(written.rules_broken.len(), 64);
    assert_eq!(written.rules_broken["(others)"], 37);
}

/// `bytes` and `windows_agree` on paired connections built by hand, the
/// streams still open at the end: a stream that ended OK must agree
/// exactly, one cut short only as out ≥ in ≥ app; a connection cut short is
/// not compared; past 20 failures the rest are counted.
#[test]
fn bytes_and_windows_judge_each_stream_of_the_paired_connections() {
    // (connection, stream, client out, server in, app, server status)
    // `gap`: ns from one stream's start to the next's.
    let judge_spaced =
        |streams: &[(u32, u32, u32, u32, u32, u32)], pairs: bool, ending: Ending, gap: u64| {
            let mut a = Analyzer::new(0);
            let (c, s) = (Endpoint::Client, Endpoint::Server);
            let mut conns: Vec<u32> = streams.iter().map(|s| s.0).collect();
            conns.dedup();
            for &conn in &conns {
                let client = format!("127.0.0.1:{}", 5000 + conn);
                let seen_from = if pairs {
                    client.clone()
                } else {
                    format!("127.0.0.1:{}", 6000 + conn)
                };
                a.feed(&on(1, c, conn, 0, open(&client, "127.0.0.1:80")));
                a.feed(&on(2, s, conn, 0, open("127.0.0.1:80", &seen_from)));
            }
            let mut t = 10;
            for &(conn, id, out, inn, app, status) in streams {
                t += gap;
                a.feed(&on(t, s, conn, id, rpc_start()));
                let data = |dir, len| Kind::Frame(frame(dir, FrameType::DATA, len));
                a.feed(&on(t + 1, c, conn, id, data(Dir::Out, out)));
                a.feed(&on(t + 2, s, conn, id, data(Dir::In, inn)));
                a.feed(&on(t + 3, s, conn, id, Kind::Chunk(ChunkEv { len: app })));
                let end = Kind::RpcEnd(RpcEndEv {
                    status,
                    message: String::new(),
                });
                a.feed(&on(t + 4, s, conn, id, end.clone()));
                a.feed(&on(t + 5, c, conn, id, end));
            }
            a.finish(0, &ending).0
        };
    let judge_ending = |streams: &[(u32, u32, u32, u32, u32, u32)], pairs: bool, ending: Ending| {
        judge_spaced(streams, pairs, ending, 10)
    };
    let judge = |streams: &[(u32, u32, u32, u32, u32, u32)], pairs: bool| {
        judge_ending(streams, pairs, Ending::Clean(Footer::default()))
    };
    let checks = |streams: &[(u32, u32, u32, u32, u32, u32)]| {
        let s = judge(streams, true);
        let (b, w) = (&s.checks["bytes"], &s.checks["windows_agree"]);
        ((b.ok, b.detail.clone()), (w.ok, w.detail.clone()))
    };

    // Connection 1 ended OK; connection 2's stream was cut short (CANCELLED)
    // and lost bytes on the way: out ≥ in ≥ app holds there.
    let ((ok, bytes), (agree, windows)) =
        checks(&[(1, 1, 100, 100, 100, 0), (2, 1, 100, 60, 40, 1)]);
    assert_eq!(ok, Some(true), "{bytes}");
    assert_eq!(
        bytes,
        "2 streams: client tap out = server tap in = bytes handed to the app \
         (1 cut short by a reset, deadline or shutdown: out ≥ in ≥ app there)"
    );
    assert_eq!(agree, Some(true), "{windows}");
    assert_eq!(
        windows,
        "1 connection: final windows equal from both taps (1 cut short, not compared)"
    );
    // A stream cut short whose server read more than the client sent, or
    // handed the app more than it read; one that ended OK and lost bytes.
    for (stream, said) in [
        (
            (2, 1, 100, 120, 40, 1),
            "client connection 2, server connection 2, stream 1: client tap out 100, server tap in 120, app 40",
        ),
        (
            (2, 1, 100, 60, 80, 1),
            "client connection 2, server connection 2, stream 1: client tap out 100, server tap in 60, app 80",
        ),
        (
            (2, 1, 100, 100, 90, 0),
            "client connection 2, server connection 2, stream 1: client tap out 100, server tap in 100, app 90",
        ),
    ] {
        let ((ok, bytes), _) = checks(&[(1, 1, 100, 100, 100, 0), stream]);
        assert_eq!((ok, bytes.as_str()), (Some(false), said));
    }
    // Only the cut connection: nothing compared; no pair at all: said so.
    let (_, (agree, windows)) = checks(&[(2, 1, 100, 60, 40, 1)]);
    assert_eq!(agree, None);
    assert_eq!(
        windows,
        "1 connection cut short (reset, deadline or shutdown): frames in flight seen by one tap only"
    );
    let s = judge(&[(1, 1, 100, 100, 100, 0)], false);
    let w = &s.checks["windows_agree"];
    assert_eq!(
        (w.ok, w.detail.as_str()),
        (None, "no connection seen by both taps")
    );

    // 22 streams that ended OK with the server's tap reading 10 bytes
    // fewer than the client's wrote (and the app all of them): 20 named,
    // the rest counted, in both checks (windows: 22 streams and the
    // connection's window).
    let many: Vec<_> = (0..22).map(|i| (1, 1 + 2 * i, 100, 90, 90, 0)).collect();
    let ((ok, bytes), (agree, windows)) = checks(&many);
    assert_eq!(ok, Some(false));
    assert!(bytes.ends_with("; … and 2 more"), "{bytes}");
    assert_eq!(bytes.matches("stream ").count(), 20, "{bytes}");
    assert_eq!(agree, Some(false));
    assert!(windows.ends_with("; … and 3 more"), "{windows}");
    // The same judged as the streams retire, each long before the next
    // (all but the last; a mismatch retires once its bytes stood still for
    // a minute): the same verdicts and counts.
    let s = judge_spaced(
        &many,
        true,
        Ending::Clean(Footer::default()),
        70_000_000_000,
    );
    let (b, w) = (&s.checks["bytes"], &s.checks["windows_agree"]);
    assert_eq!((b.ok, w.ok), (Some(false), Some(false)));
    assert!(b.detail.ends_with("; … and 2 more"), "{}", b.detail);
    assert_eq!(b.detail.matches("stream ").count(), 20, "{}", b.detail);
    assert!(w.detail.ends_with("; … and 3 more"), "{}", w.detail);
    assert!(
        w.detail
            .contains("C2s stream 1: client 65435 vs server 65445"),
        "{}",
        w.detail
    );
    // A two-sided trace cut short judges no stream's bytes or windows, nor
    // whether it stalled; whole, it never stopped progressing.
    let s = judge_ending(&[(1, 1, 100, 90, 90, 0)], true, Ending::NoFooter);
    for check in ["bytes", "windows_agree", "no_stall"] {
        let c = &s.checks[check];
        assert_eq!(c.ok, None, "{check}: {}", c.detail);
    }
    let s = judge(&[(1, 1, 100, 100, 100, 0)], true);
    assert_eq!(
        s.checks["bytes"].detail,
        "1 stream: client tap out = server tap in = bytes handed to the app"
    );
    let c = &s.checks["no_stall"];
    assert_eq!(
        (c.ok, c.detail.as_str()),
        (Some(true), "the run never stopped progressing")
    );
}

/// Raw framing: the server's work units are not the client's messages, so
/// each side's own equation is judged, and either failing fails the check.
#[test]
fn raw_units_judge_each_side_on_its_own() {
    let run = |scheduled: u64, units: u64, completed: u64| {
        let mut a = Analyzer::new(0);
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        let msg = |seq| MsgEv {
            seq,
            size: 10,
            framed: 15,
        };
        for seq in 0..scheduled {
            a.feed(&ev(1 + seq, c, 0, Kind::Schedule(msg(seq))));
        }
        for seq in 0..2 {
            let send = SendEv {
                seq,
                scheduled: 1 + seq,
                begin: 5,
                bytes: 15,
            };
            a.feed(&ev(10 + seq, c, 1, Kind::Send(send)));
        }
        let start = Kind::RpcStart(RpcStartEv {
            path: "/p".into(),
            deadline_ns: None,
            framing: Some("raw:10".into()),
            release: None,
            withhold_after: None,
        });
        a.feed(&ev(20, s, 1, start));
        for seq in 0..units {
            let unit = MsgEv {
                seq,
                size: 10,
                framed: 10,
            };
            a.feed(&ev(30 + seq, s, 1, Kind::Decode(unit)));
        }
        for seq in 0..completed {
            let done = CompleteEv {
                seq,
                worker: 0,
                service_ns: 1,
            };
            a.feed(&ev(40 + seq, s, 1, Kind::Complete(done)));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    let whole = run(2, 3, 3);
    assert!(whole.raw_units);
    let c = &whole.checks["accounting"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
    assert!(
        c.detail.ends_with(
            "client: scheduled 2 = sent 2 + never_sent 0; server: decoded units 3 = completed 3 + discarded 0"
        ),
        "{}",
        c.detail
    );
    let c = &run(2, 3, 2).checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(
        c.detail.contains("decoded units 3 ≠ completed 2"),
        "{}",
        c.detail
    );
    let c = &run(3, 3, 3).checks["accounting"];
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(c.detail.contains("scheduled 3 ≠ sent 2"), "{}", c.detail);
}

/// A stream its client offered bytes on that carried none counts among
/// the streams (it is the victim of the unfairness the index measures),
/// judged as its stream retires mid-pass or at the end.
#[test]
fn a_stream_offered_bytes_that_carried_none_is_counted() {
    let judge = |gap: u64| {
        let mut a = Analyzer::new(0);
        let (c, s) = (Endpoint::Client, Endpoint::Server);
        a.feed(&on(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        a.feed(&on(2, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        let mut t = 10;
        for (id, sent) in [(1, true), (3, false)] {
            t += gap;
            let msg = MsgEv {
                seq: 0,
                size: 95,
                framed: 100,
            };
            a.feed(&on(t, c, 1, id, Kind::Schedule(msg)));
            a.feed(&on(t + 1, s, 1, id, rpc_start()));
            if sent {
                let data = |dir| Kind::Frame(frame(dir, FrameType::DATA, 100));
                a.feed(&on(t + 2, c, 1, id, data(Dir::Out)));
                a.feed(&on(t + 3, s, 1, id, data(Dir::In)));
                a.feed(&on(t + 4, s, 1, id, Kind::Chunk(ChunkEv { len: 100 })));
            }
            let end = Kind::RpcEnd(RpcEndEv {
                status: 0,
                message: String::new(),
            });
            a.feed(&on(t + 5, s, 1, id, end.clone()));
            a.feed(&on(t + 6, c, 1, id, end));
        }
        // Long after: every stream is due.
        let ping = |ep| {
            on(
                t + gap,
                ep,
                1,
                0,
                Kind::Frame(frame(Dir::In, FrameType::PING, 8)),
            )
        };
        a.feed(&ping(c));
        a.feed(&ping(s));
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    for gap in [10, 70_000_000_000] {
        let s = judge(gap);
        assert_eq!(
            (s.stream_count, s.streams_without_data),
            (2, 1),
            "gap {gap}: {:?}",
            s.streams
        );
    }
}

/// A client→server frame's latency is the server tap's read less the
/// client tap's write of the same byte offset, whichever tap's event comes
/// first; a frame one tap lacks is passed over, and a read stamped before
/// its write is counted as such (its latency taken as 0), never hidden.
#[test]
fn frame_latency_matches_each_frame_by_its_offset_on_both_taps() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let mut a = Analyzer::new(0);
    a.feed(&on(1, c, 1, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
    a.feed(&on(1, s, 7, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
    let at = |dir, offset| {
        Kind::Frame(FrameEv {
            offset,
            ..frame(dir, FrameType::PING, 8)
        })
    };
    // (tap, t, offset): the server's read of 0 reaches the analysis first;
    // the server never read 30; it stamped its read of 9 before the
    // client's write.
    for (ep, t, offset) in [
        (s, 1_500, 0),
        (c, 1_000, 0),
        (c, 2_000, 9),
        (s, 1_900, 9),
        (c, 3_000, 30),
        (c, 4_000, 60),
        (s, 4_700, 60),
    ] {
        let (conn, dir) = if ep == c { (1, Dir::Out) } else { (7, Dir::In) };
        a.feed(&on(t, ep, conn, 0, at(dir, offset)));
    }
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    let l = &sum.c2s_frame_latency_ms;
    assert_eq!(l.count, 3, "{l:?}");
    assert_eq!(sum.c2s_frame_latency_negative, 1);
    assert!((l.max - 0.0007).abs() < 1e-9 && l.min == 0.0, "{l:?}");
    assert!((l.sum - 0.0012).abs() < 1e-9, "{l:?}");
}

/// A wait is a wait for credit only while the window it needs is spent:
/// once WINDOW_UPDATEs reopen both, a later wait is h2's send buffer's.
#[test]
fn credit_returned_by_window_updates_ends_a_wait_for_the_window() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    let data = |len| Kind::Frame(frame(Dir::Out, FrameType::DATA, len));
    // Stream 1 spends its own window and the connection's.
    a.feed(&ev(1, c, 1, data(65_535)));
    a.feed(&ev(20, c, 1, blocked(0, 10, false)));
    // Both windows reopen; the stream then waits again, with credit.
    a.feed(&ev(25, c, 0, wu(Dir::In, 1_000_000)));
    a.feed(&ev(26, c, 1, wu(Dir::In, 1_000_000)));
    a.feed(&ev(41, c, 1, blocked(1, 31, false)));
    let (s, _) = a.finish(0, &Ending::Clean(Footer::default()));
    let window = s.client_blocked_conn_window_s + s.client_blocked_stream_window_s;
    assert!((window - 10e-9).abs() < 1e-15, "{window}");
    let buffer = s.client_h2_buffer_blocked_s;
    assert!((buffer - 10e-9).abs() < 1e-15, "{buffer}");
}

/// WINDOW_UPDATEs are counted where each tap saw them: into the client
/// (connection and stream apart, the stream increments' distribution) and
/// out of the server; one for a stream already judged counts as a frame
/// after its retirement, not as the stream's.
#[test]
fn window_updates_are_counted_per_tap_and_level() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let sec = 1_000_000_000;
    let mut a = Analyzer::new(0);
    for (t, ep, stream, dir, inc) in [
        (1, c, 1, Dir::In, 100),
        (2, c, 0, Dir::In, 200),
        (3, c, 3, Dir::In, 300),
        (1, s, 1, Dir::Out, 100),
        (2, s, 0, Dir::Out, 200),
        // The server's own view of what it received is not an update in.
        (3, s, 0, Dir::In, 50),
    ] {
        a.feed(&ev(t, ep, stream, wu(dir, inc)));
    }
    // Stream 5 ends; an update for it seconds later.
    let end = Kind::RpcEnd(RpcEndEv {
        status: 0,
        message: String::new(),
    });
    a.feed(&ev(4, s, 5, end));
    a.feed(&ev(5 * sec, s, 5, wu(Dir::Out, 7)));
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(
        (
            sum.window_updates_in,
            sum.window_updates_in_conn,
            sum.window_updates_in_stream
        ),
        (3, 1, 2)
    );
    assert_eq!(sum.window_update_in_increment.count, 2);
    assert_eq!(sum.window_update_in_increment.mean, 200.0);
    assert_eq!(
        (
            sum.window_updates_out,
            sum.window_updates_out_conn,
            sum.window_updates_out_stream
        ),
        (3, 1, 2)
    );
    assert_eq!(sum.frames_after_retirement, 1);
}

/// Each of these events counts in the figure named for it, and in no other:
/// DATA whose payload the recorder shed, the upload's first and last DATA,
/// socket waits on each side (in seconds, and by side when the recording
/// cut them), accept errors, refused connections and stalls.
#[test]
fn each_event_counts_in_the_figure_named_for_it() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let mut a = Analyzer::new(0);
    let data = |dir, len, payload_dropped| {
        Kind::Frame(FrameEv {
            payload_dropped,
            ..frame(dir, FrameType::DATA, len)
        })
    };
    // The upload is the client's DATA out, 5 to 9 ns: neither the HEADERS
    // before it nor the server's DATA after it stretch it.
    a.feed(&ev(
        3,
        c,
        1,
        Kind::Frame(frame(Dir::Out, FrameType::HEADERS, 10)),
    ));
    a.feed(&ev(5, c, 1, data(Dir::Out, 100, true)));
    a.feed(&ev(9, c, 1, data(Dir::Out, 50, false)));
    a.feed(&ev(12, s, 1, data(Dir::Out, 70, false)));
    let socket = |start, open| {
        Kind::SocketBlocked(IntervalEv {
            dir: Dir::Out,
            start,
            open,
        })
    };
    a.feed(&ev(28, s, 0, socket(21, false)));
    a.feed(&ev(30, c, 0, socket(20, false)));
    a.feed(&ev(
        33,
        s,
        0,
        Kind::AcceptError(AcceptErrorEv { error: "x".into() }),
    ));
    let refused = ConnRefusedEv {
        peer: "127.0.0.1:9".into(),
        reason: "tls".into(),
    };
    a.feed(&ev(34, s, 0, Kind::ConnRefused(refused)));
    let stall = StallEv {
        timeout_ns: 10,
        pending: 1,
        conn_window: None,
        streams: vec![],
    };
    a.feed(&ev(36, s, 0, Kind::Stall(stall)));
    // Cut by the recording's end: 5 ns on the client, 3 on the server.
    a.feed(&ev(40, c, 0, socket(35, true)));
    a.feed(&ev(41, s, 0, socket(38, true)));
    let (sum, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(
        (sum.payload_dropped_frames, sum.payload_dropped_bytes),
        (1, 100)
    );
    assert_eq!(sum.upload_data_s, Some((5e-9, 9e-9)));
    assert_eq!(sum.first_event_s, Some(3e-9));
    assert!(
        (sum.client_socket_blocked_s - 15e-9).abs() < 1e-15,
        "{sum:?}"
    );
    assert!(
        (sum.server_socket_blocked_s - 10e-9).abs() < 1e-15,
        "{sum:?}"
    );
    let plotted: f64 = tl.socket_blocked.points().iter().map(|p| p.1).sum();
    assert!((plotted - 15e-9).abs() < 1e-15, "{plotted}");
    assert_eq!(sum.blocked_open, 2);
    assert_eq!(sum.blocked_open_by.get("socket"), Some(&1));
    assert_eq!(sum.blocked_open_by.get("server_socket"), Some(&1));
    assert_eq!(
        (sum.accept_errors, sum.conns_refused, sum.stalls),
        (1, 1, 1)
    );
}

/// What an `rpc_start` says is the server's own: its release point (named
/// in a stall) and its raw framing count; the client's `rpc_start` of the
/// same ids, naming neither, changes neither. A stream whose HEADERS left
/// before its RPC's start is open: a stall does not name it as waiting to.
#[test]
fn an_rpc_start_says_what_its_own_side_does() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let start = |release, framing: Option<&str>| {
        Kind::RpcStart(RpcStartEv {
            path: "/p".into(),
            deadline_ns: None,
            framing: framing.map(String::from),
            release,
            withhold_after: None,
        })
    };
    let stall = |streams| {
        Kind::Stall(StallEv {
            timeout_ns: 10,
            pending: 1,
            conn_window: None,
            streams,
        })
    };
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, s, 1, start(Some(ReleasePoint::Decode), None)));
    a.feed(&ev(
        2,
        c,
        1,
        Kind::Frame(frame(Dir::Out, FrameType::HEADERS, 10)),
    ));
    a.feed(&ev(2, c, 1, start(None, Some("raw:1KiB"))));
    a.feed(&ev(3, s, 1, Kind::Chunk(ChunkEv { len: 100 })));
    let held = StallStream {
        conn: 1,
        stream: 1,
        unreleased: 100,
        available: 0,
    };
    a.feed(&ev(50, s, 0, stall(vec![held])));
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    let text = sum.stall.unwrap();
    assert!(text.contains("1/1: 100 B unreleased"), "{text}");
    assert!(text.contains("release at decode"), "{text}");
    assert!(!sum.raw_units, "the client's framing counted");
    // The client's stall: its stream 1 is open, nothing waits to open.
    let mut a = Analyzer::new(0);
    a.feed(&ev(
        2,
        c,
        1,
        Kind::Frame(frame(Dir::Out, FrameType::HEADERS, 10)),
    ));
    a.feed(&ev(2, c, 1, start(None, None)));
    a.feed(&ev(50, c, 0, stall(vec![])));
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    let text = sum.stall.unwrap();
    assert!(!text.contains("not open"), "{text}");
    // The server's raw framing is counted.
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, s, 1, start(None, Some("raw:1KiB"))));
    assert!(a.finish(0, &Ending::Clean(Footer::default())).0.raw_units);
}

/// A call's time counts only for calls that ended OK; a unary call's
/// response time counts from its message's schedule, and a streaming call
/// has none (its first message's schedule is not its response's).
#[test]
fn call_and_response_times_count_calls_that_ended_ok() {
    let c = Endpoint::Client;
    let calls = |unary: bool| {
        let mut a = Analyzer::new(0);
        for (stream, t, status) in [(1, 10, 0), (3, 100, 14)] {
            let msg = MsgEv {
                seq: u64::from(stream),
                size: 95,
                framed: 100,
            };
            // A unary call's message is scheduled before its stream exists.
            let scheduled_on = if unary { 0 } else { stream };
            a.feed(&ev(t, c, scheduled_on, Kind::Schedule(msg)));
            a.feed(&ev(t + 1, c, stream, rpc_start()));
            let send = SendEv {
                seq: u64::from(stream),
                scheduled: t,
                begin: t + 2,
                bytes: 100,
            };
            a.feed(&ev(t + 2, c, stream, Kind::Send(send)));
            let end = RpcEndEv {
                status,
                message: String::new(),
            };
            // The failed call takes longer: it is not the one counted.
            let took = if status == 0 { 31 } else { 51 };
            a.feed(&ev(t + took, c, stream, Kind::RpcEnd(end)));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    let unary = calls(true);
    assert!(unary.unary);
    // From rpc_start (11) to rpc_end (41), and from the schedule (10).
    assert_eq!(unary.call_ms.count, 1);
    assert!(
        (unary.call_ms.max - 30e-6).abs() < 1e-9,
        "{:?}",
        unary.call_ms
    );
    assert_eq!(unary.response_ms.count, 1);
    assert!(
        (unary.response_ms.max - 31e-6).abs() < 1e-9,
        "{:?}",
        unary.response_ms
    );
    let streaming = calls(false);
    assert!(!streaming.unary);
    assert_eq!(streaming.call_ms.count, 1);
    assert!((streaming.call_ms.max - 30e-6).abs() < 1e-9);
    assert_eq!(streaming.response_ms.count, 0);
}

/// Only a one-sided trace's figures across sides are none; the timeline
/// keys each connection its tap named, and marks the stream window the
/// server advertised to the client's first connection (a client tap's
/// SETTINGS, not the server's), the same in every analysis.
#[test]
fn the_timeline_names_connections_and_the_window_advertised_to_the_client() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let window = |w| {
        Kind::Frame(FrameEv {
            settings: Some(vec![(settings::INITIAL_WINDOW_SIZE, w)]),
            ..frame(Dir::In, FrameType::SETTINGS, 6)
        })
    };
    for _ in 0..8 {
        let mut a = Analyzer::new(0);
        a.feed(&on(1, c, 1, 0, open("127.0.0.1:5001", "127.0.0.1:80")));
        a.feed(&on(2, s, 1, 0, open("127.0.0.1:80", "127.0.0.1:5001")));
        // Connection 2's tap never said its addresses.
        for conn in [1, 2, 3] {
            a.feed(&on(3, c, conn, 0, window(1_000 * conn)));
        }
        a.feed(&on(4, s, 1, 0, window(9_999)));
        let (sum, tl) = a.finish(0, &Ending::Clean(Footer::default()));
        assert!(sum.unaccounted.is_some() && sum.lost_in_flight.is_some());
        assert_eq!(tl.advertised_stream_window, Some(1_000));
        let keys: Vec<_> = tl.conn_keys.keys().copied().collect();
        assert_eq!(keys, [(s, 1), (c, 1)]);
    }
    let mut a = Analyzer::new(0);
    a.feed(&on(1, c, 1, 0, window(1_000)));
    let (sum, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!((sum.unaccounted, sum.lost_in_flight), (None, None));
    assert_eq!(tl.advertised_stream_window, Some(1_000));
    let mut a = Analyzer::new(0);
    a.feed(&on(1, s, 1, 0, window(1_000)));
    let (sum, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!((sum.unaccounted, sum.lost_in_flight), (None, None));
    assert_eq!(tl.advertised_stream_window, None);
}

/// The queue's growth is fitted over the steady part of the offer: from a
/// tenth of the offered period in to its end, on whole buckets of the
/// series, stated in seconds from the trace origin. What the summary counts
/// in that window (stream WINDOW_UPDATEs and their credit) is what an
/// auditor counts from the events whose `t` lies in it.
#[test]
fn the_growth_window_is_the_steady_offer_and_counts_what_lies_in_it() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let ms = 1_000_000u64;
    // The trace's clock starts 5 s before its origin's zero; the offer
    // starts 1 s after that zero and lasts 2 s, a message every 10 ms.
    let origin = 5_000 * ms;
    let mut a = Analyzer::new(origin);
    let mut updates = vec![];
    for k in 0..=200u64 {
        let t = origin + 1_000 * ms + k * 10 * ms;
        let msg = MsgEv {
            seq: k,
            size: 95,
            framed: 100,
        };
        a.feed(&ev(t, c, 1, Kind::Schedule(msg)));
        let queued = EnqueueEv {
            seq: k,
            depth: k as u32 + 1,
            queued_bytes: 0,
        };
        a.feed(&ev(t + 1, s, 1, Kind::Enqueue(queued)));
        let send = SendEv {
            seq: k,
            scheduled: t,
            begin: t,
            bytes: 100,
        };
        a.feed(&ev(t, c, 1, Kind::Send(send)));
    }
    // Credit returned every 20 ms, on past the offer's end (one of them
    // in the bucket where the window ends).
    for k in 0..150u64 {
        let t = origin + 1_002 * ms + k * 20 * ms;
        let inc = 100 + k as u32;
        a.feed(&ev(t, s, 1, wu(Dir::Out, inc)));
        updates.push(((t - origin) as f64 / 1e9, u64::from(inc)));
    }
    let (sum, tl) = a.finish(0, &Ending::Clean(Footer::default()));
    let w = [
        &tl.queue_depth,
        &tl.sent,
        &tl.window_updates,
        &tl.window_update_bytes,
    ]
    .iter()
    .map(|x| x.width_ns())
    .max()
    .unwrap() as f64
        / 1e9;
    let (lo, hi) = sum.queue_growth_window_s;
    assert!((1.2..1.2 + w).contains(&lo), "{lo} (bucket {w} s)");
    assert!(hi > 3.0 && hi <= 3.0 + w, "{hi} (bucket {w} s)");
    assert!(
        (sum.queue_growth_rate - 100.0).abs() < 1.0,
        "{}",
        sum.queue_growth_rate
    );
    // From the first whole bucket's level to the last's.
    let grown = 100.0 * (hi - lo - w);
    assert!(
        (sum.queue_growth_in_window - grown).abs() <= 2.0,
        "{} against {grown}",
        sum.queue_growth_in_window
    );
    let inside: Vec<_> = updates
        .iter()
        .filter(|(t, _)| (lo..hi).contains(t))
        .collect();
    assert!(inside.len() > 50 && inside.len() < updates.len());
    assert_eq!(sum.window_updates_in_growth_window, inside.len() as u64);
    assert_eq!(
        sum.credit_returned_in_growth_window,
        inside.iter().map(|u| u.1).sum::<u64>()
    );
    // Rates over the offer: 200 intervals of 10 ms.
    assert!(
        (sum.offered_rate - 100.0).abs() < 1e-9,
        "{}",
        sum.offered_rate
    );
    assert!((sum.send_rate - 100.0).abs() < 1e-9, "{}", sum.send_rate);
    assert!(
        (sum.send_rate_steady - 100.0).abs() < 1.0,
        "{}",
        sum.send_rate_steady
    );
}

/// A rate over no time is none: messages all offered and sent in one
/// nanosecond give 0, not infinity.
#[test]
fn a_rate_over_no_time_is_zero() {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    for seq in 0..3 {
        let msg = MsgEv {
            seq,
            size: 95,
            framed: 100,
        };
        a.feed(&ev(7, c, 1, Kind::Schedule(msg)));
        let send = SendEv {
            seq,
            scheduled: 7,
            begin: 7,
            bytes: 100,
        };
        a.feed(&ev(7, c, 1, Kind::Send(send)));
    }
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!((sum.offered_rate, sum.send_rate), (0.0, 0.0));
    // No stream WINDOW_UPDATE sent: no releases per update either.
    assert_eq!(sum.coalescing_ratio, 0.0);
}

/// The window figures of connections still open at the end: the lowest
/// send window read on the client's tap (not the server's), the earliest
/// violation by time whichever connection holds it (of two in one
/// nanosecond, the lower window: connections are looked at in a hash
/// map's order), and DATA past a window lowered by a SETTINGS not yet
/// acknowledged.
#[test]
fn open_connections_give_their_window_figures() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let mut a = Analyzer::new(0);
    // (connection, t, bytes in one DATA frame): connections 2 and 4 pass
    // their windows first, in the same nanosecond.
    for (conn, t, len) in [
        (2, 5, 80_000),
        (4, 5, 90_000),
        (1, 10, 75_000),
        (3, 20, 70_000),
    ] {
        let data = Kind::Frame(frame(Dir::Out, FrameType::DATA, len));
        a.feed(&on(t, c, conn, 1, data));
    }
    // The server lowers its initial stream window to 1,000 bytes; a
    // 2,000-byte DATA frame arrives before the client's ACK.
    let lower = Kind::Frame(FrameEv {
        settings: Some(vec![(settings::INITIAL_WINDOW_SIZE, 1_000)]),
        ..frame(Dir::Out, FrameType::SETTINGS, 6)
    });
    a.feed(&on(30, s, 7, 0, lower));
    let data = Kind::Frame(frame(Dir::In, FrameType::DATA, 2_000));
    a.feed(&on(31, s, 7, 1, data));
    let (sum, _) = a.finish(0, &Ending::Clean(Footer::default()));
    assert_eq!(sum.min_send_window, Some(65_535 - 90_000));
    assert_eq!(sum.min_window, Some(65_535 - 90_000));
    assert_eq!(sum.data_past_lowered_window, 1);
    let credit = &sum.checks["no_data_beyond_credit"];
    assert_eq!(credit.ok, Some(false), "{}", credit.detail);
    assert!(
        credit
            .detail
            .ends_with("first: DATA beyond the connection window on stream 1 (window -24465)"),
        "{}",
        credit.detail
    );
}

/// A SETTINGS that pushes several streams' windows past 2^31-1 at once
/// names the lowest stream first, in every analysis (the streams were
/// walked in a hash map's order: 3 of 8 analyses named stream 3).
#[test]
fn a_settings_that_overflows_several_streams_names_the_lowest_first() {
    let c = Endpoint::Client;
    let to_max = ((1u64 << 31) - 1 - 65_535) as u32;
    for _ in 0..16 {
        let mut a = Analyzer::new(0);
        // Streams 1, 3 and 5 granted up to exactly 2^31-1 (legal)...
        for stream in [5, 1, 3] {
            a.feed(&ev(u64::from(stream), c, stream, wu(Dir::In, to_max)));
        }
        // ...then the initial window raised by one: all three pass it.
        let settings = Kind::Frame(FrameEv {
            settings: Some(vec![(settings::INITIAL_WINDOW_SIZE, 65_536)]),
            ..frame(Dir::In, FrameType::SETTINGS, 6)
        });
        a.feed(&ev(9, c, 0, settings));
        let (s, _) = a.finish(0, &Ending::Clean(Footer::default()));
        let credit = &s.checks["no_data_beyond_credit"];
        assert_eq!(credit.ok, Some(false));
        assert_eq!(
            credit.detail,
            "3 violations (one per window passed); first: window above 2^31-1 after SETTINGS on stream 1 (window 2147483648)"
        );
    }
}

/// More unbalanced client books at the end than the analysis keeps
/// (4,096): those kept, and the one named, are the lowest connections',
/// in every analysis (they closed in a hash map's order: four analyses of
/// ten named four different connections).
#[test]
fn books_past_the_cap_keep_the_lowest_connections() {
    let c = Endpoint::Client;
    for _ in 0..4 {
        let mut a = Analyzer::new(0);
        for id in 1..=8_192u32 {
            let msg = MsgEv {
                seq: 0,
                size: 10,
                framed: 15,
            };
            a.feed(&on(u64::from(id), c, id, 0, Kind::Schedule(msg)));
        }
        let (s, _) = a.finish(0, &Ending::Clean(Footer::default()));
        let detail = &s.checks["accounting"].detail;
        assert!(
            detail.contains(
                "the first, connection 1, off by +1; 4096 books more unsettled than the analysis keeps"
            ),
            "{detail}"
        );
    }
}

/// The server's releases on hand-built chunks: counted and summed, the
/// release point one name while every timed release shows it and `mixed`
/// once two differ, the unreleased peaks those of the bytes held, and
/// credit judged against the advertised window (65,535 held is within it,
/// one more byte is not, and what a release returned is held no more).
#[test]
fn releases_are_summed_and_credit_is_judged_at_the_advertised_window() {
    let s = Endpoint::Server;
    let run = |kinds: Vec<Kind>| {
        let mut a = Analyzer::new(0);
        a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        a.feed(&ev(2, s, 1, rpc_start()));
        for (i, k) in kinds.into_iter().enumerate() {
            a.feed(&ev(3 + i as u64, s, 1, k));
        }
        a.finish(0, &Ending::Clean(Footer::default())).0
    };
    let decode = ReleasePoint::Decode;
    let sum = run(vec![
        chunk(40_000),
        chunk(25_535),
        release_at(65_535, decode),
        chunk(65_535),
        release_at(60_000, decode),
        release_at(5_535, decode),
        chunk(7),
        release_at(7, ReleasePoint::End),
    ]);
    let credit = &sum.checks["credit"];
    assert_eq!(credit.ok, Some(true), "{}", credit.detail);
    // The end's release is no release point, and counted apart.
    assert_eq!(sum.release_point.as_deref(), Some("decode"));
    assert_eq!((sum.releases, sum.released_bytes), (3, 131_070));
    assert_eq!((sum.end_releases, sum.end_released_bytes), (1, 7));
    assert_eq!(sum.max_unreleased_bytes, 65_535);
    assert_eq!(sum.max_stream_unreleased_bytes, 65_535);

    let sum = run(vec![
        chunk(10),
        release_at(10, decode),
        chunk(10),
        release_at(10, ReleasePoint::Complete),
        chunk(10),
        release_at(10, decode),
    ]);
    assert_eq!(sum.release_point.as_deref(), Some("mixed"));
    assert_eq!(sum.max_unreleased_bytes, 10);

    let sum = run(vec![chunk(65_535), chunk(1)]);
    let credit = &sum.checks["credit"];
    assert_eq!(credit.ok, Some(false), "{}", credit.detail);
    assert!(
        credit.detail.contains(
            "stream 1 held 65536 unreleased bytes at 0.000s, above the advertised window 65535"
        ),
        "{}",
        credit.detail
    );
    assert_eq!(sum.max_unreleased_bytes, 65_536);
}

/// A server's messages through their life on hand-built events: decoded,
/// queued, started, completed, one discarded while queued. The peaks of
/// what the application owned and queued, the queue's depth, and each
/// count (the run's, the stream's, the discard's reason) are the ones the
/// events add up to; a discard takes a queued message out of the queue.
#[test]
fn a_messages_life_adds_up_to_the_peaks_and_counts() {
    let s = Endpoint::Server;
    let framed = [105, 205, 55, 1005, 105];
    let decode = |seq: u64| {
        let framed = framed[seq as usize];
        Kind::Decode(MsgEv {
            seq,
            size: framed - 5,
            framed,
        })
    };
    // The `depth` and `queued_bytes` fields are the server's word; the
    // analysis counts its own.
    let enqueue = |seq| {
        Kind::Enqueue(EnqueueEv {
            seq,
            depth: 0,
            queued_bytes: 0,
        })
    };
    let start = |seq| {
        Kind::Start(StartEv {
            seq,
            worker: 0,
            wait_ns: 0,
            depth: 0,
        })
    };
    let complete = |seq| {
        Kind::Complete(CompleteEv {
            seq,
            worker: 0,
            service_ns: 0,
        })
    };
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
    a.feed(&ev(2, s, 1, rpc_start()));
    let data = Kind::Frame(frame(Dir::In, FrameType::DATA, 1475));
    let discard = Kind::Discard(DiscardEv {
        seq: 1,
        reason: DiscardReason::Deadline,
    });
    let life = [
        data,
        decode(0),
        enqueue(0),
        decode(1),
        enqueue(1),
        start(0),
        decode(2),
        enqueue(2),
        complete(0),
        discard,
        decode(3),
        enqueue(3),
        decode(4),
        enqueue(4),
        start(2),
        complete(2),
        start(3),
        complete(3),
        start(4),
        complete(4),
    ];
    for (i, k) in life.into_iter().enumerate() {
        a.feed(&ev(3 + i as u64, s, 1, k));
    }
    a.feed(&ev(30, s, 1, rpc_end(0)));
    let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
    assert_eq!(
        (sum.decoded, sum.completed, sum.discarded),
        (5, 4, 1),
        "{sum:?}"
    );
    // 55 queued after the discard, then 1005 and 105: 3 deep.
    assert_eq!(sum.max_queued_bytes, 1165);
    assert_eq!(sum.max_owned_bytes, 1165);
    assert_eq!(sum.max_queue_depth, 3);
    assert_eq!(sum.discarded_by_reason.get("deadline"), Some(&1));
    // Completions over the first start (t = 8) to the last (t = 22).
    assert_eq!(sum.completion_rate, 3.0 / (14.0 / 1e9));
    let st = &sum.streams[..];
    assert_eq!(st.len(), 1, "{st:?}");
    assert_eq!(
        (st[0].messages, st[0].completed, st[0].discarded),
        (5, 4, 1)
    );
}

/// A server's stall described from each stream's state in the trace: the
/// bytes held per connection, each stream's undecoded part, credit on the
/// wire, release point, decoded bytes awaiting it and bytes never read
/// (each named only when there are some), and the cause with its reading.
#[test]
fn a_server_stall_names_what_each_stream_holds_and_why_it_stalled() {
    let s = Endpoint::Server;
    let data = |len| Kind::Frame(frame(Dir::In, FrameType::DATA, len));
    let decode = |framed| {
        Kind::Decode(MsgEv {
            seq: 0,
            size: framed - 5,
            framed,
        })
    };
    let stalled = |conn, stream, unreleased| StallStream {
        conn,
        stream,
        unreleased,
        available: 0,
    };
    // The server's events on connection 1 (opened at t = 1) as
    // (stream, kind), then a stall of `streams`: its cause and text.
    let stall = |events: Vec<(u32, Kind)>, streams: Vec<StallStream>, window| {
        let mut a = Analyzer::new(0);
        a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        let mut t = 2;
        for (stream, k) in events {
            a.feed(&ev(t, s, stream, k));
            t += 1;
        }
        let st = Kind::Stall(StallEv {
            timeout_ns: 1_000_000_000,
            pending: 3,
            conn_window: window,
            streams,
        });
        a.feed(&ev(t, s, 0, st));
        let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
        (sum.stall_cause.unwrap(), sum.stall.unwrap())
    };

    // Stream 1 holds 20,000 B it read: 8,000 of a message not decoded,
    // 12,000 of one awaiting `complete`, and 10,000 B it never read.
    // Stream 3 released all it read at decode. Nothing withholds.
    let (cause, text) = stall(
        vec![
            (1, rpc_start_at(ReleasePoint::Complete)),
            (1, data(15_000)),
            (1, data(15_000)),
            (1, chunk(20_000)),
            (1, decode(12_000)),
            (3, rpc_start_at(ReleasePoint::Decode)),
            (3, data(5_000)),
            (3, chunk(5_000)),
            (3, decode(5_000)),
            (3, release(5_000)),
        ],
        vec![stalled(1, 1, 20_000), stalled(1, 3, 0)],
        Some(65_535),
    );
    assert_eq!(cause, "other");
    assert!(
        text.ends_with(
            "with 3 messages pending; \
             connection 1: 20000 of 65535 B held unreleased, 30535 B of connection credit on the wire; \
             1/1: 20000 B unreleased (8000 B of an undecoded message), 35535 B of stream credit on the wire, \
             release at complete, 12000 B of decoded messages awaiting their release point, \
             10000 B received the application never read \
             (the server's own count: 20000 B unreleased; h2's available_capacity 0 B); \
             1/3: 0 B unreleased (0 B of an undecoded message), 60535 B of stream credit on the wire, \
             release at decode (the server's own count: 0 B unreleased; h2's available_capacity 0 B)"
        ),
        "{text}"
    );

    // A stream holding a decoded message released at decode: starvation,
    // read by where the credit went.
    let starving = |read: u32, conn_update: u32| {
        let mut events = vec![(1, rpc_start_at(ReleasePoint::Decode))];
        if conn_update > 0 {
            events.push((0, wu(Dir::Out, conn_update)));
        }
        let mut left = read;
        while left > 0 {
            let n = left.min(16_384);
            events.push((1, data(n)));
            left -= n;
        }
        events.extend([(1, chunk(read)), (1, decode(read))]);
        stall(events, vec![stalled(1, 1, read.into())], Some(65_535))
    };
    // Both windows spent on the wire: the connection's drained.
    let (cause, text) = starving(65_535, 0);
    assert_eq!(cause, "starvation");
    assert!(
        text.starts_with("starvation (a stream holds bytes its release point should have released, draining the shared connection window)"),
        "{text}"
    );
    // The stream's own window spent, the connection's not.
    let (cause, text) = starving(65_535, 1_000_000);
    assert_eq!(cause, "starvation");
    assert!(
        text.starts_with("starvation (a stream holds bytes its release point should have released: its own stream window is spent, while the connection window still has credit)"),
        "{text}"
    );
    // Credit left on both.
    let (_, text) = starving(30_000, 1_000_000);
    assert!(
        text.starts_with("starvation (a stream holds bytes its release point should have released; its stream and the connection still had credit on the wire)"),
        "{text}"
    );

    // The client's tap shows a stream h2 never opened while the server
    // holds nothing: the stall is that stream's. With bytes held on the
    // server's side, it is theirs.
    let not_open = |held: u32| {
        let c = Endpoint::Client;
        let mut a = Analyzer::new(0);
        a.feed(&ev(1, c, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        a.feed(&ev(2, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        a.feed(&ev(3, c, 1, rpc_start()));
        a.feed(&ev(
            4,
            c,
            1,
            Kind::Frame(frame(Dir::Out, FrameType::HEADERS, 10)),
        ));
        a.feed(&ev(5, c, 3, rpc_start()));
        a.feed(&ev(6, s, 1, rpc_start_at(ReleasePoint::Complete)));
        a.feed(&ev(7, s, 1, data(10_000)));
        a.feed(&ev(8, s, 1, chunk(10_000)));
        if held == 0 {
            a.feed(&ev(9, s, 1, release_at(10_000, ReleasePoint::End)));
        }
        let st = Kind::Stall(StallEv {
            timeout_ns: 1_000_000_000,
            pending: 3,
            conn_window: Some(65_535),
            streams: vec![stalled(1, 1, held.into())],
        });
        a.feed(&ev(10, s, 0, st));
        let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
        (sum.stall_cause.unwrap(), sum.stall.unwrap())
    };
    let (cause, text) = not_open(0);
    assert_eq!(cause, "not_open", "{text}");
    assert!(
        text.ends_with("; client connection 1: stream 3 not open (the server sent no SETTINGS: no stream opens before them)"),
        "{text}"
    );
    let (cause, text) = not_open(10_000);
    assert_eq!(cause, "other", "{text}");
    assert!(text.contains("stream 3 not open"), "{text}");
}

/// A server connection its tap recorded nothing of (no open, no frame: its
/// events lost, or a trace edited) has no window to tell: the stall says
/// so instead of the default 65,535 B of credit.
#[test]
fn a_stall_on_a_connection_the_tap_never_saw_has_no_credit_to_tell() {
    let s = Endpoint::Server;
    let stall = |tapped: bool| {
        let mut a = Analyzer::new(0);
        if tapped {
            a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        }
        a.feed(&ev(2, s, 1, rpc_start_at(ReleasePoint::Complete)));
        a.feed(&ev(3, s, 1, chunk(20_000)));
        let st = Kind::Stall(StallEv {
            timeout_ns: 1_000_000_000,
            pending: 1,
            conn_window: Some(65_535),
            streams: vec![StallStream {
                conn: 1,
                stream: 1,
                unreleased: 20_000,
                available: 0,
            }],
        });
        a.feed(&ev(4, s, 0, st));
        a.finish(0, &Ending::Clean(Footer::default()))
            .0
            .stall
            .unwrap()
    };
    let text = stall(false);
    assert!(
        text.contains("connection 1: 20000 of 65535 B held unreleased, no record of connection credit on the wire;"),
        "{text}"
    );
    let text = stall(true);
    assert!(
        text.contains("connection 1: 20000 of 65535 B held unreleased, 65535 B of connection credit on the wire;"),
        "{text}"
    );
}

/// The stream list of a trace with both sides: a unary call's stream has
/// no schedule of its own (its connection scheduled its message), a
/// stream offered bytes that carried none is listed with 0 bytes, and one
/// offered nothing is not listed.
#[test]
fn the_stream_list_names_a_unary_calls_stream_and_streams_offered_bytes() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let schedule = |framed: u32| {
        Kind::Schedule(MsgEv {
            seq: 0,
            size: framed.saturating_sub(5),
            framed,
        })
    };
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, c, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
    a.feed(&ev(2, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
    // A unary call: its message scheduled on stream 0, sent on stream 1.
    a.feed(&ev(3, c, 0, schedule(15)));
    a.feed(&ev(4, c, 1, rpc_start()));
    let send = SendEv {
        seq: 0,
        scheduled: 3,
        begin: 4,
        bytes: 15,
    };
    a.feed(&ev(5, c, 1, Kind::Send(send)));
    a.feed(&ev(
        6,
        c,
        1,
        Kind::Frame(frame(Dir::Out, FrameType::DATA, 15)),
    ));
    a.feed(&ev(
        7,
        s,
        1,
        Kind::Frame(frame(Dir::In, FrameType::DATA, 15)),
    ));
    // Stream 3 offered 10 bytes, stream 5 nothing; neither carried any.
    a.feed(&ev(8, c, 3, schedule(10)));
    a.feed(&ev(9, c, 5, schedule(0)));
    let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
    let ids: Vec<u32> = sum.streams.iter().map(|f| f.stream).collect();
    assert_eq!(ids, [1, 3], "{:?}", sum.streams);
    assert_eq!((sum.stream_count, sum.streams_without_data), (2, 1));
    let (unary, offered) = (&sum.streams[0], &sum.streams[1]);
    assert_eq!(
        (unary.bytes, unary.scheduled, unary.sent, unary.never_sent),
        (15, None, Some(1), Some(0))
    );
    assert_eq!(
        (
            offered.bytes,
            offered.offered_bytes,
            offered.scheduled,
            offered.sent
        ),
        (0, Some(10), Some(1), Some(0))
    );
}

/// At `frame` a stream releases what arrived: an RPC that ended OK having
/// released every byte holds the check, one that released less, or more
/// than it received, fails it, naming the stream and the bytes.
#[test]
fn at_frame_an_rpc_releases_exactly_the_bytes_it_received() {
    let s = Endpoint::Server;
    let check = |releases: &[u32]| {
        let mut a = Analyzer::new(0);
        a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        a.feed(&ev(2, s, 1, rpc_start_at(ReleasePoint::Frame)));
        a.feed(&ev(
            3,
            s,
            1,
            Kind::Frame(frame(Dir::In, FrameType::DATA, 100)),
        ));
        a.feed(&ev(4, s, 1, chunk(100)));
        for (i, bytes) in releases.iter().enumerate() {
            let r = release_at(*bytes, ReleasePoint::Frame);
            a.feed(&ev(5 + i as u64, s, 1, r));
        }
        a.feed(&ev(20, s, 1, rpc_end(0)));
        a.finish(0, &Ending::Clean(Footer::default())).0.checks["release_point"].clone()
    };
    let c = check(&[60, 40]);
    assert_eq!(c.ok, Some(true), "{}", c.detail);
    let c = check(&[60]);
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(
        c.detail.contains(
            "stream 1/1 ended OK having released 60 of the 100 bytes it received at frame"
        ),
        "{}",
        c.detail
    );
    let c = check(&[60, 60]);
    assert_eq!(c.ok, Some(false), "{}", c.detail);
    assert!(
        c.detail.contains(
            "stream 1/1 had released 120 bytes at frame, more than the 100 it had received"
        ),
        "{}",
        c.detail
    );
}

/// `windows.csv`: every reconstructed window change, with the tap that
/// saw it and the direction of the data it limits.
#[test]
fn the_window_log_has_every_window_change_by_tap_and_direction() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let path = std::env::temp_dir().join(format!("h2probe-window-log-{}.csv", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    let mut a = Analyzer::new(0).with_window_log(Box::new(file));
    a.feed(&ev(1, c, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
    a.feed(&ev(2, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
    a.feed(&ev(
        3,
        c,
        1,
        Kind::Frame(frame(Dir::Out, FrameType::DATA, 100)),
    ));
    a.feed(&ev(
        4,
        s,
        1,
        Kind::Frame(frame(Dir::Out, FrameType::DATA, 30)),
    ));
    // Updates for the client's data as its tap received them: the
    // connection's row, then the stream's, each with its own window.
    a.feed(&ev(5, c, 0, wu(Dir::In, 50)));
    a.feed(&ev(6, c, 1, wu(Dir::In, 70)));
    let _ = a.finish(0, &Ending::Clean(Footer::default()));
    let csv = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0],
        ["t_s", "tap", "conn", "conn_key", "flow", "stream", "window"]
    );
    // The connection's window first, then the stream's; both taps name
    // the connection by its client's and server's ports.
    assert_eq!(
        rows[1..].iter().map(|r| r.join(",")).collect::<Vec<_>>(),
        [
            "0.000000003,client,1,5000-80,c2s,0,65435",
            "0.000000003,client,1,5000-80,c2s,1,65435",
            "0.000000004,server,1,5000-80,s2c,0,65505",
            "0.000000004,server,1,5000-80,s2c,1,65505",
            "0.000000005,client,1,5000-80,c2s,0,65485",
            "0.000000006,client,1,5000-80,c2s,1,65505",
        ],
        "{csv}"
    );
}

/// A frame's c2s latency pairs the client tap's write with the server
/// tap's read of the same offset: a read in the write's nanosecond is no
/// negative latency, one before it is; one side's frames wait for the
/// other's up to the latest 100,000.
#[test]
fn frame_latency_pairs_writes_and_reads_by_offset() {
    let (c, s) = (Endpoint::Client, Endpoint::Server);
    let at = |offset| FrameEv {
        offset,
        ..frame(Dir::Out, FrameType::DATA, 1)
    };
    let latency = |writes: u64, read_offset: u64, write_t: u64, read_t: u64| {
        let mut a = Analyzer::new(0);
        a.feed(&ev(1, c, 0, open("127.0.0.1:5000", "127.0.0.1:80")));
        a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
        for k in 0..writes {
            a.feed(&ev(write_t, c, 1, Kind::Frame(at(10 * k))));
        }
        let read = FrameEv {
            dir: Dir::In,
            ..at(read_offset)
        };
        a.feed(&ev(read_t, s, 1, Kind::Frame(read)));
        let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
        (
            sum.c2s_frame_latency_ms.count,
            sum.c2s_frame_latency_negative,
        )
    };
    assert_eq!(latency(1, 0, 5, 7), (1, 0));
    assert_eq!(latency(1, 0, 5, 5), (1, 0));
    assert_eq!(latency(1, 0, 5, 4), (1, 1));
    // 100,001 writes: the first is dropped, the second still waits.
    assert_eq!(latency(100_001, 10, 5, 7), (1, 0));
    assert_eq!(latency(100_001, 0, 5, 7), (0, 0));
}

/// A WINDOW_UPDATE that pushes a window past 2^31-1 is a violation,
/// placed at its own time.
#[test]
fn a_window_pushed_past_its_limit_is_a_violation_at_its_update() {
    let s = Endpoint::Server;
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
    a.feed(&ev(5, s, 0, wu(Dir::Out, 2_147_483_647)));
    a.feed(&ev(9, s, 0, wu(Dir::Out, 1)));
    let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
    let c = &sum.checks["no_data_beyond_credit"];
    assert_eq!(
        (c.ok, c.first_t_s),
        (Some(false), Some(5e-9)),
        "{}",
        c.detail
    );
    assert!(
        c.detail.ends_with(
            "first: window above 2^31-1 (FLOW_CONTROL_ERROR) on stream 0 (window 2147549182)"
        ),
        "{}",
        c.detail
    );
}

/// A SETTINGS that lowers the initial window excuses DATA past it only
/// until the peer acknowledges it (RFC 9113 §6.9.2): the same DATA after
/// the ACK is a violation.
#[test]
fn a_lowered_window_excuses_data_past_it_only_until_its_ack() {
    let s = Endpoint::Server;
    let mut a = Analyzer::new(0);
    a.feed(&ev(1, s, 0, open("127.0.0.1:80", "127.0.0.1:5000")));
    let lower = Kind::Frame(FrameEv {
        settings: Some(vec![(settings::INITIAL_WINDOW_SIZE, 100)]),
        ..frame(Dir::Out, FrameType::SETTINGS, 6)
    });
    a.feed(&ev(2, s, 0, lower));
    let data = || Kind::Frame(frame(Dir::In, FrameType::DATA, 150));
    a.feed(&ev(3, s, 1, data()));
    let ack = Kind::Frame(FrameEv {
        flags: 0x1,
        ..frame(Dir::In, FrameType::SETTINGS, 0)
    });
    a.feed(&ev(4, s, 0, ack));
    a.feed(&ev(5, s, 3, data()));
    let sum = a.finish(0, &Ending::Clean(Footer::default())).0;
    let c = &sum.checks["no_data_beyond_credit"];
    assert_eq!(
        (c.ok, c.first_t_s),
        (Some(false), Some(5e-9)),
        "{}",
        c.detail
    );
    assert!(c.detail.starts_with("1 violation"), "{}", c.detail);
}

/// What held a stream pending open is read from the server's SETTINGS as
/// the client's tap received them: its SETTINGS_MAX_CONCURRENT_STREAMS
/// (whatever else the frame carries), none given, or no SETTINGS at all
/// (the client's own do not count).
#[test]
fn a_stream_not_open_is_explained_by_the_servers_settings() {
    let c = Endpoint::Client;
    let text = |dir: Dir, settings: Vec<(u16, u32)>| {
        let mut a = Analyzer::new(0);
        let f = Kind::Frame(FrameEv {
            settings: Some(settings),
            ..frame(dir, FrameType::SETTINGS, 12)
        });
        a.feed(&ev(1, c, 0, f));
        a.feed(&ev(2, c, 1, rpc_start()));
        let stall = Kind::Stall(StallEv {
            timeout_ns: 1_000,
            pending: 1,
            conn_window: None,
            streams: vec![],
        });
        a.feed(&ev(1_050, c, 0, stall));
        let s = a.finish(0, &Ending::Clean(Footer::default())).0;
        s.stall.unwrap()
    };
    use settings::{INITIAL_WINDOW_SIZE, MAX_CONCURRENT_STREAMS};
    let t = text(
        Dir::In,
        vec![(MAX_CONCURRENT_STREAMS, 1), (INITIAL_WINDOW_SIZE, 70_000)],
    );
    assert!(
        t.contains("stream 1 not open (the server's SETTINGS_MAX_CONCURRENT_STREAMS is 1)"),
        "{t}"
    );
    let t = text(Dir::In, vec![(INITIAL_WINDOW_SIZE, 70_000)]);
    assert!(
        t.contains("stream 1 not open (the server sent no SETTINGS_MAX_CONCURRENT_STREAMS)"),
        "{t}"
    );
    let t = text(Dir::Out, vec![(MAX_CONCURRENT_STREAMS, 5)]);
    assert!(
        t.contains("stream 1 not open (the server sent no SETTINGS: no stream opens before them)"),
        "{t}"
    );
}

/// A client wait with its own windows open is h2's, not the window's:
/// after the server's SETTINGS raised the initial window past a stream
/// the client had spent, and while responses spend the windows the
/// server sends on (no evidence about the client's).
#[test]
fn a_client_wait_with_its_windows_open_is_h2s() {
    let c = Endpoint::Client;
    let data = |dir, len| Kind::Frame(frame(dir, FrameType::DATA, len));
    let raise = Kind::Frame(FrameEv {
        settings: Some(vec![(settings::INITIAL_WINDOW_SIZE, 100_000)]),
        ..frame(Dir::In, FrameType::SETTINGS, 6)
    });
    let cases = [
        vec![
            (1, 1, data(Dir::Out, 65_535)),
            (5, 0, wu(Dir::In, 1_000_000)),
            (10, 0, raise),
        ],
        vec![(1, 1, data(Dir::Out, 10)), (2, 1, data(Dir::In, 65_535))],
    ];
    for (i, events) in cases.into_iter().enumerate() {
        let mut a = Analyzer::new(0);
        for (t, stream, k) in events {
            a.feed(&ev(t, c, stream, k));
        }
        a.feed(&ev(30, c, 1, blocked(0, 20, false)));
        let s = a.finish(0, &Ending::Clean(Footer::default())).0;
        assert_eq!(s.client_window_blocked_s, 0.0, "case {i}: {s:?}");
        assert!(
            (s.client_h2_buffer_blocked_s - 10e-9).abs() < 1e-15,
            "case {i}: {s:?}"
        );
    }
}
