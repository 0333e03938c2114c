//! The committed reference runs under captures/reference/: `analyze`
//! reproduces their recorded summaries exactly, and their headline figures
//! are the physics of each policy. (After a deliberate analysis change,
//! rerun `h2probe analyze captures/reference/*` and commit the summaries.)

mod support;

use h2probe_analysis::analyze::Summary;
use std::path::PathBuf;

fn analyze_copy(name: &str) -> (Summary, Summary) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("captures/reference")
        .join(name);
    let committed: Summary = support::read_summary(&src);
    let dir = support::temp_dir(&format!("ref-{name}"));
    for f in ["trace.jsonl.gz", "meta.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    support::h2probe_ok([std::ffi::OsStr::new("analyze"), dir.as_os_str()]);
    let fresh: Summary = support::read_summary(&dir);
    // Byte for byte as JSON too: a field added to the summary since the
    // reference was committed (which the struct comparison would default)
    // means the reference needs regenerating.
    let json = |d: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap()
    };
    assert_eq!(
        json(&dir),
        json(&src),
        "{name}: rerun `h2probe analyze captures/reference/*` and commit the summaries"
    );
    for svg in ["credit.svg", "queue.svg", "cumulative.svg", "blocked.svg"] {
        assert!(dir.join(svg).is_file(), "{name}: {svg}");
    }
    (committed, fresh)
}

#[test]
fn unbounded_release_on_frame() {
    let (committed, s) = analyze_copy("frame-unbounded");
    assert_eq!(s, committed, "analyze must reproduce the committed summary");
    assert!(
        (190.0..230.0).contains(&s.queue_growth_rate),
        "{}",
        s.queue_growth_rate
    );
    assert!(s.send_rate > 290.0);
    assert!(s.max_queue_depth > 700);
    assert!(s.max_unreleased_bytes <= 65_535);
    assert!(s.window_updates_in_growth_window > 100);
    assert!(s.checks.values().all(|c| c.ok != Some(false)));
}

#[test]
fn bounded_release_on_frame() {
    let (committed, s) = analyze_copy("frame-bounded32");
    assert_eq!(s, committed);
    assert_eq!(s.max_queue_depth, 32);
    assert!((80.0..110.0).contains(&s.send_rate), "{}", s.send_rate);
    assert!(s.client_window_blocked_s > 2.0);
}

#[test]
fn direct_release_on_frame() {
    let (committed, s) = analyze_copy("frame-direct");
    assert_eq!(s, committed);
    assert_eq!(s.max_queue_depth, 0);
    assert!((80.0..100.0).contains(&s.send_rate), "{}", s.send_rate);
}

#[test]
fn unbounded_release_on_complete() {
    let (committed, s) = analyze_copy("complete-unbounded");
    assert_eq!(s, committed);
    assert!(s.max_owned_bytes <= 65_535, "{}", s.max_owned_bytes);
    assert!(s.max_queue_depth <= 4);
    assert!((80.0..100.0).contains(&s.send_rate), "{}", s.send_rate);
}
