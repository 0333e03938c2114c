//! The analysis of a long trace holds what its open streams need, not what
//! the trace held: 100,000 one-message RPCs over 1,000 s of `t` are analysed
//! in under 64 MB (the build before took 6.4 GB). Before streams were retired, each
//! RPC kept ≈ 600 bytes of per-stream state to the end, and the stream plot
//! drew 64 early streams' 1 ms buckets to the trace's end (129 MB for 40 s).
//! One test in this file: the peak RSS read is that of this process's
//! largest child.

mod support;

use std::io::Write as _;

#[test]
fn a_long_trace_is_analysed_in_memory_that_follows_the_open_streams() {
    const MB: u64 = 1 << 20;
    const RPCS: u64 = 100_000;
    let dir = support::temp_dir("analyze-long");
    let origin = 1_000_000_000u64;
    let mut w = std::io::BufWriter::new(std::fs::File::create(dir.join("trace.jsonl")).unwrap());
    writeln!(w, "{}", support::trace_header(origin)).unwrap();
    // The server's side of one RPC every 10 ms, each on a stream of its
    // own: its DATA, the connection credit returned, the bytes handed to
    // the application, its end.
    for i in 0..RPCS {
        let (t, stream, offset) = (origin + 1_000 + i * 10_000_000, 2 * i + 1, 24 + i * 109);
        writeln!(
            w,
            r#"{{"t":{t},"ep":"server","conn":1,"stream":{stream},"type":"frame","dir":"in","offset":{offset},"frame":"DATA","flags":1,"len":100}}
{{"t":{},"ep":"server","conn":1,"stream":0,"type":"frame","dir":"out","offset":{},"frame":"WINDOW_UPDATE","flags":0,"len":4,"increment":100}}
{{"t":{},"ep":"server","conn":1,"stream":{stream},"type":"chunk","len":100}}
{{"t":{},"ep":"server","conn":1,"stream":{stream},"type":"rpc_end","status":0,"message":""}}"#,
            t + 1_000,
            i * 13,
            t + 2_000,
            t + 3_000,
        )
        .unwrap();
    }
    writeln!(
        w,
        r#"{{"type":"footer","events":{},"dropped":{{}}}}"#,
        4 * RPCS
    )
    .unwrap();
    w.flush().unwrap();
    drop(w);
    let summary = support::analyze_made_up(&dir);
    assert_eq!(summary.stream_count, RPCS, "every stream counted");
    assert_eq!(summary.streams.len(), 1_000, "the first 1,000 listed");
    assert_eq!(summary.data_bytes_in, RPCS * 100);
    assert_eq!(summary.stream_fairness, Some(1.0));
    let peak = support::children_peak_rss();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        peak < 64 * MB,
        "analysing {RPCS} RPCs over 1,000 s peaked at {} MB",
        peak / MB
    );
}
