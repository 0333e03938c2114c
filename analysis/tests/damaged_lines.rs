//! A trace file with damage the writer did not cause, analysed whole:
//! corrupt lines are counted and the first few named, the footer's counts
//! are compared with the lines present, and what the recorder gave up
//! (events dropped, payloads shed) is said.

use h2probe_analysis::analyze::{analyze_trace, Analysis};
use h2probe_analysis::reader::TraceReader;
use h2probe_analysis::schema::{
    ConnCloseEv, ConnOpenEv, Dir, Endpoint, Event, Footer, FrameEv, FrameType, Kind, MsgEv,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A header line (the reference run's) and its clock origin.
fn header() -> (String, u64) {
    let reference = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../captures/reference/frame-direct/trace.jsonl.gz");
    let r = TraceReader::open(&reference).unwrap();
    (r.header().to_line(), r.header().origin_mono_ns)
}

/// Whether a warning says `what`.
fn warned(a: &Analysis, what: &str) -> bool {
    a.warnings.iter().any(|w| w.contains(what))
}

/// The client's event on connection `conn`, as a trace line.
fn line(t: u64, conn: u32, kind: Kind) -> String {
    let e = Event {
        t,
        ep: Endpoint::Client,
        conn,
        stream: 1,
        kind,
    };
    serde_json::to_string(&e).unwrap()
}

fn schedule(t: u64, seq: u64) -> String {
    let msg = MsgEv {
        seq,
        size: 10,
        framed: 15,
    };
    line(t, 1, Kind::Schedule(msg))
}

/// Writes `lines` between the header and a footer counting `events` and
/// `dropped`, in a directory of its own.
fn trace(name: &str, lines: &[String], events: u64, dropped: u64) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("h2probe-damaged-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.jsonl");
    let footer = Footer {
        events,
        dropped: if dropped > 0 {
            BTreeMap::from([("schedule".to_string(), dropped)])
        } else {
            BTreeMap::new()
        },
    };
    let mut text = header().0 + "\n";
    for l in lines {
        text += l;
        text += "\n";
    }
    text += &footer.to_line();
    text += "\n";
    std::fs::write(&path, text).unwrap();
    path
}

/// Seven corrupt lines among five events: the events are all read, the
/// seven counted (five named, then the total), and the footer's count of
/// twelve lines is the file's, so no line reads as lost or added.
#[test]
fn corrupt_lines_are_counted_and_the_first_five_named() {
    let origin = header().1;
    let mut lines: Vec<String> = (0..3).map(|k| schedule(origin + k, k)).collect();
    lines.extend((0..7).map(|k| format!("{{\"t\":{k},\"ep\":\"cli")));
    lines.extend((3..5).map(|k| schedule(origin + k, k)));
    let path = trace("corrupt", &lines, 12, 0);
    let a = analyze_trace(&path).unwrap();
    assert_eq!(a.events, 5);
    assert_eq!(a.summary.scheduled, 5);
    assert_eq!(a.summary.corrupt_lines, 7);
    assert_eq!(a.summary.event_lines, 12);
    assert_eq!(a.summary.first_corrupt_line, Some(5));
    assert_eq!(a.summary.lines_altered(), None);
    let named = a
        .warnings
        .iter()
        .filter(|w| w.contains(": skipped"))
        .count();
    assert_eq!(named, 5, "{:#?}", a.warnings);
    assert!(
        warned(&a, "7 corrupt lines skipped in all"),
        "{:#?}",
        a.warnings
    );
    // An intact trace says nothing of corrupt lines.
    let whole: Vec<String> = (0..5).map(|k| schedule(origin + k, k)).collect();
    let a = analyze_trace(&trace("whole", &whole, 5, 0)).unwrap();
    assert_eq!(a.summary.corrupt_lines, 0);
    assert!(a.warnings.is_empty(), "{:#?}", a.warnings);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// A footer that counts other than the lines present: lines were lost or
/// added after the run, said once with both counts.
#[test]
fn a_footer_counting_other_lines_says_lines_were_lost_or_added() {
    let origin = header().1;
    let whole: Vec<String> = (0..5).map(|k| schedule(origin + k, k)).collect();
    let path = trace("lost", &whole, 6, 0);
    let a = analyze_trace(&path).unwrap();
    let why = a.summary.lines_altered().expect("the counts differ");
    assert!(
        why.starts_with("the footer counts 6 events written, the file holds 5 lines of events"),
        "{why}"
    );
    assert!(warned(&a, &why), "{:#?}", a.warnings);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// An event of a type this reader does not know is a line of the file,
/// counted apart and said with where the first was.
#[test]
fn events_of_unknown_types_count_as_lines() {
    let origin = header().1;
    let mut lines: Vec<String> = (0..2).map(|k| schedule(origin + k, k)).collect();
    lines.push(format!(
        "{{\"t\":{},\"ep\":\"client\",\"conn\":1,\"stream\":1,\"type\":\"from_the_future\"}}",
        origin + 2
    ));
    let path = trace("unknown", &lines, 3, 0);
    let a = analyze_trace(&path).unwrap();
    assert_eq!(a.summary.unknown_events, 1);
    assert_eq!(a.summary.event_lines, 3);
    assert_eq!(a.summary.lines_altered(), None);
    assert!(
        warned(&a, "1 events of unknown types skipped, the first at line 4"),
        "{:#?}",
        a.warnings
    );
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// A compressed trace whose second part is not gzip failed as read there:
/// that is no corrupt line (a line's JSON), and reading ends there.
#[test]
fn a_damaged_compressed_trace_is_a_read_error_not_a_corrupt_line() {
    use std::io::Write as _;
    let origin = header().1;
    let lines: Vec<String> = (0..2_000).map(|k| schedule(origin + k, k)).collect();
    let plain = trace("gz", &lines, 2_000, 0);
    let text = std::fs::read_to_string(&plain).unwrap();
    // The header and the first 1,000 events, whole lines.
    let cut = text.match_indices('\n').nth(1_000).unwrap().0 + 1;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&text.as_bytes()[..cut]).unwrap();
    let mut bytes = gz.finish().unwrap();
    bytes.extend_from_slice(b"these bytes are no gzip member at all");
    std::fs::remove_file(&plain).unwrap();
    let path = plain.with_file_name("trace.jsonl.gz");
    std::fs::write(&path, &bytes).unwrap();
    let a = analyze_trace(&path).unwrap();
    assert!(a.summary.read_error.is_some(), "{:#?}", a.warnings);
    assert_eq!(a.summary.corrupt_lines, 0);
    assert_eq!(a.events, 1_000);
    assert!(
        !a.warnings.iter().any(|w| w.contains(": skipped")),
        "{:#?}",
        a.warnings
    );
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// Events the recorder dropped (the footer's count) are said, loudly.
#[test]
fn events_the_recorder_dropped_are_said() {
    let origin = header().1;
    let lines: Vec<String> = (0..2).map(|k| schedule(origin + k, k)).collect();
    let path = trace("dropped", &lines, 2, 3);
    let a = analyze_trace(&path).unwrap();
    assert_eq!(a.summary.dropped_events, 3);
    assert!(
        warned(&a, "the recorder DROPPED 3 events"),
        "{:#?}",
        a.warnings
    );
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// A frame recorded without its payload, and an event naming a connection
/// the analysis had closed and judged seconds before: both are said.
#[test]
fn payloads_shed_and_events_after_a_close_are_said() {
    let origin = header().1;
    let s = 1_000_000_000;
    let data = Kind::Frame(FrameEv {
        dir: Dir::Out,
        frame: FrameType::DATA,
        len: 100,
        payload_dropped: true,
        ..FrameEv::default()
    });
    let open = Kind::ConnOpen(ConnOpenEv {
        local: "127.0.0.1:5000".into(),
        peer: "127.0.0.1:80".into(),
    });
    let close = Kind::ConnClose(ConnCloseEv {
        error: String::new(),
        bytes_in: 0,
        bytes_out: 0,
    });
    let late = Kind::Frame(FrameEv {
        dir: Dir::In,
        frame: FrameType::PING,
        len: 8,
        ..FrameEv::default()
    });
    let lines = [
        line(origin + 1, 1, data),
        line(origin + 2, 2, open),
        line(origin + 3, 2, close),
        line(origin + 5 * s, 2, late),
    ];
    let path = trace("shed", &lines, 4, 0);
    let a = analyze_trace(&path).unwrap();
    assert!(
        warned(
            &a,
            "1 frames (100 payload bytes) were recorded without their payload"
        ),
        "{:#?}",
        a.warnings
    );
    assert!(
        warned(
            &a,
            "1 event named a connection (or a relay's pair) after its tap had recorded its close"
        ),
        "{:#?}",
        a.warnings
    );
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}
