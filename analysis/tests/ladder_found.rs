//! The report's ladder, given what the analysis' pass found, draws the same
//! default slice as its own search would; when the analysis found no anchor
//! it reads only the slice's part of the trace instead of all of it once
//! more. (Alone in its binary: it counts the bytes this process reads.)

use h2probe_analysis::analyze::analyze_trace;
use h2probe_analysis::ladder::{build, LadderOpts};
use h2probe_analysis::reader::BYTES_READ;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

/// A reference run's trace, uncompressed (its bytes read then count lines,
/// not a compressed stream read ahead 64 KiB at a time).
fn reference(name: &str) -> PathBuf {
    let gz = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../captures/reference")
        .join(name)
        .join("trace.jsonl.gz");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("ladder-found-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.jsonl");
    let mut text = vec![];
    std::io::Read::read_to_end(
        &mut flate2::read::MultiGzDecoder::new(std::fs::File::open(gz).unwrap()),
        &mut text,
    )
    .unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// Bytes read by `f`.
fn reading<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = BYTES_READ.load(Ordering::Relaxed);
    let out = f();
    (out, BYTES_READ.load(Ordering::Relaxed) - before)
}

#[test]
fn the_ladder_reads_only_its_slice_when_the_analysis_found_where_it_is() {
    // frame-direct: the queue never holds two messages (no anchor: the
    // search reads the whole trace); the others have an anchor.
    for (run, anchored) in [
        ("frame-direct", false),
        ("frame-unbounded", true),
        ("frame-bounded32", true),
        ("complete-unbounded", true),
    ] {
        let trace = reference(run);
        let size = std::fs::metadata(&trace).unwrap().len();
        let a = analyze_trace(&trace).unwrap();
        assert_eq!(a.slice.anchor.is_some(), anchored, "{run}");
        let (searched, by_search) = reading(|| build(&trace, &LadderOpts::default()).unwrap());
        let found = LadderOpts {
            found: Some(a.slice),
            ..Default::default()
        };
        let (given, by_hint) = reading(|| build(&trace, &found).unwrap());
        assert_eq!(given, searched, "{run}: the same slice, drawn the same");
        assert!(!given.arrows.is_empty(), "{run}");
        if anchored {
            // With an anchor the ladder still searches (it stops once the
            // slice is past).
            assert_eq!(by_hint, by_search, "{run}");
        } else {
            assert!(
                by_search > size,
                "{run}: the search read {by_search} of {size}"
            );
            assert!(by_hint < size / 2, "{run}: read {by_hint} of {size}");
        }
    }
}
