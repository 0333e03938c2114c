//! Tests of what the analysis judges when events of the run may be
//! missing or out of place ([`Analyzer::finish`], and which damage
//! [`analysis_pass`] names): a failure settled before the damage stands, a
//! recorded stall stands, the rest cannot be judged and says where it lies
//! against the damage.

use super::*;
use crate::schema::{FrameEv, FrameType, StallEv};
use std::collections::BTreeMap;

const S: u64 = 1_000_000_000;

/// A client trace with a window violation at 1 s, line 7 (DATA beyond
/// the connection window) and a stall at 1.5 s; `damage` sets what the reader
/// would have found.
fn judge(damage: impl FnOnce(&mut Analyzer)) -> BTreeMap<String, Check> {
    let c = Endpoint::Client;
    let mut a = Analyzer::new(0);
    let data = Kind::Frame(FrameEv {
        dir: Dir::Out,
        frame: FrameType::DATA,
        len: 70_000,
        ..FrameEv::default()
    });
    a.line = 7;
    a.feed(&test_event(S, c, 1, 1, data));
    let stall = Kind::Stall(StallEv {
        timeout_ns: S / 2,
        pending: 1,
        conn_window: None,
        streams: vec![],
    });
    a.feed(&test_event(S + S / 2, c, 1, 0, stall));
    damage(&mut a);
    a.finish(0, &Ending::Clean(Default::default())).0.checks
}

fn corrupt_at(t: u64) -> impl FnOnce(&mut Analyzer) {
    move |a| {
        a.s.corrupt_lines = 1;
        a.damage_at = Some(t);
    }
}

#[test]
fn a_whole_trace_fails_both() {
    let c = judge(|_| {});
    assert_eq!(c["no_data_beyond_credit"].ok, Some(false));
    assert_eq!(c["no_data_beyond_credit"].first_t_s, Some(1.0));
    assert_eq!(c["no_stall"].ok, Some(false));
    assert_eq!(c["no_dropped_events"].ok, Some(true));
}

/// A corrupt line more than the reorder window after the violation:
/// nothing it lost could have explained it.
#[test]
fn a_failure_settled_before_a_corrupt_line_stands() {
    let c = judge(corrupt_at(S + S / 4 + 1));
    assert_eq!(c["no_data_beyond_credit"].ok, Some(false));
    assert_eq!(c["no_stall"].ok, Some(false));
    // The footer's own count of drops is not in doubt.
    assert_eq!(c["no_dropped_events"].ok, Some(true));
}

/// Within the reorder window before the corrupt line, or after it, the
/// violation cannot be judged, and says where it lies; the stall the run
/// recorded stands.
#[test]
fn a_failure_near_or_after_a_corrupt_line_cannot_be_judged() {
    let near = judge(corrupt_at(S + S / 4));
    let credit = &near["no_data_beyond_credit"];
    assert_eq!(credit.ok, None);
    assert_eq!(
        credit.detail,
        "1 corrupt line was skipped (an event each, lost): a violation was seen (first at 1.000 s, \
         line 7), \
         but it lies within the reorder window (250 ms) before the corrupt line (read after events \
         up to 1.250 s), which may have held what explains it; this cannot be judged"
    );
    assert_eq!(near["no_stall"].ok, Some(false));
    let after = judge(corrupt_at(S / 2));
    let credit = &after["no_data_beyond_credit"];
    assert_eq!(credit.ok, None);
    assert!(
        credit.detail.contains(
            "but it lies after the corrupt line (read after events up to 0.500 s), which may"
        ),
        "{}",
        credit.detail
    );
}

/// An event analysed out of time order is named as the damage, at the
/// time it belongs.
#[test]
fn a_failure_after_a_late_event_says_so() {
    let c = judge(|a| {
        a.s.out_of_order_events = 1;
        a.damage_at = Some(S / 2);
        a.damage_is_late = true;
    });
    let credit = &c["no_data_beyond_credit"];
    assert_eq!(credit.ok, None);
    assert!(
        credit.detail.contains(
            "but it lies after an event analysed out of time order (which belongs at 0.500 s)"
        ),
        "{}",
        credit.detail
    );
}

/// Lines added or moved (an event naming a retired connection), or a file
/// that failed as it was read: a failure anywhere may be made up, the
/// stall too; a read error puts the footer's drop count in doubt.
#[test]
fn an_altered_or_unreadable_trace_judges_no_failure() {
    let moved = judge(|a| a.s.events_after_conn_retirement = 1);
    let credit = &moved["no_data_beyond_credit"];
    assert_eq!(credit.ok, None);
    assert!(
        credit
            .detail
            .contains("lines lost or added may be anywhere, so it may be made up"),
        "{}",
        credit.detail
    );
    assert_eq!(moved["no_stall"].ok, None);
    assert_eq!(moved["no_dropped_events"].ok, Some(true));
    let unreadable = judge(|a| {
        a.s.read_error = Some("unexpected end of file".into());
        a.damage_at = Some(2 * S);
    });
    let credit = &unreadable["no_data_beyond_credit"];
    assert_eq!(credit.ok, None);
    assert!(
        credit
            .detail
            .contains("the file's bytes may be wrong anywhere before its read error"),
        "{}",
        credit.detail
    );
    assert_eq!(unreadable["no_stall"].ok, None);
    assert_eq!(unreadable["no_dropped_events"].ok, None);
}

/// Where the sort could not put a late event in its place (the pass
/// through the reorder window alone), the earlier damage is the one
/// named: the late event's time (0.5 s), before the corrupt line's (2 s).
/// The violation at 1 s lies after it and cannot be judged; against the
/// corrupt line alone it would have been settled.
#[test]
fn the_earliest_damage_is_named_whether_late_event_or_corrupt_line() {
    let reference = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../captures/reference/frame-direct/trace.jsonl.gz");
    let r = TraceReader::open(&reference).unwrap();
    let (header, o) = (r.header().to_line(), r.header().origin_mono_ns);
    let c = Endpoint::Client;
    let data = Kind::Frame(FrameEv {
        dir: Dir::Out,
        frame: FrameType::DATA,
        len: 70_000,
        ..FrameEv::default()
    });
    let msg = |seq| {
        Kind::Schedule(crate::schema::MsgEv {
            seq,
            size: 10,
            framed: 15,
        })
    };
    let line = |e: Event| serde_json::to_string(&e).unwrap();
    let lines = [
        header,
        line(test_event(o + S, c, 1, 1, data)),
        line(test_event(o + 2 * S, c, 1, 1, msg(0))),
        "{\"t\":".to_string(),
        line(test_event(o + 3 * S, c, 1, 1, msg(1))),
        line(test_event(o + S / 2, c, 1, 1, msg(2))),
    ];
    let dir = std::env::temp_dir().join(format!("h2probe-late-and-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (a, _) = analysis_pass(&path, None, TimeOrder::window()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(a.summary.out_of_order_events, 1);
    assert_eq!(a.summary.corrupt_lines, 1);
    let credit = &a.summary.checks["no_data_beyond_credit"];
    assert_eq!(credit.ok, None, "{}", credit.detail);
    assert!(
        credit.detail.contains(
            "but it lies after an event analysed out of time order (which belongs at 0.500 s)"
        ),
        "{}",
        credit.detail
    );
}
