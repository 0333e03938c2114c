//! The analysis holds events in a reorder window (250 ms of `t`): a full
//! capture's payload bytes must not ride along in it, or its memory grows
//! with the payload that window holds (a 710 MB full-capture trace took
//! 1.07 GB to analyse, a 2.7 GB one 1.87 GB). One test in this file: the
//! peak RSS read is that of this process's largest child.

mod support;

use base64::Engine as _;
use std::io::Write as _;

#[test]
fn analysing_a_full_capture_holds_no_payload_bytes() {
    const MB: u64 = 1 << 20;
    const FRAMES: u64 = 6_000;
    let dir = support::temp_dir("analyze-memory");
    let origin = 1_000_000_000u64;
    let payload = base64::engine::general_purpose::STANDARD.encode(vec![0x5a; 16_384]);
    let mut w = std::io::BufWriter::new(std::fs::File::create(dir.join("trace.jsonl")).unwrap());
    writeln!(w, "{}", support::trace_header(origin)).unwrap();
    // 94 MiB of payload within 6 ms of `t`: all of it inside one reorder window.
    for i in 0..FRAMES {
        writeln!(
            w,
            r#"{{"t":{},"ep":"server","conn":1,"stream":1,"type":"frame","dir":"in","offset":{},"frame":"DATA","flags":0,"len":16384,"payload":"{payload}"}}"#,
            origin + 1_000 + i * 1_000,
            24 + i * 16_393,
        )
        .unwrap();
    }
    writeln!(w, r#"{{"type":"footer","events":{FRAMES},"dropped":{{}}}}"#).unwrap();
    w.flush().unwrap();
    drop(w);
    // Exit 3: the checks fail (the frames outrun windows nobody opened);
    // the analysis itself went through.
    let summary = support::analyze_made_up(&dir);
    assert_eq!(
        summary.data_bytes_in,
        FRAMES * 16_384,
        "every frame analysed"
    );
    let peak = support::children_peak_rss();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        peak < 64 * MB,
        "analysing {FRAMES} frames with 16 KiB payloads peaked at {} MB",
        peak / MB
    );
}
