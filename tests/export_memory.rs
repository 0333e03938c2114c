//! The exports write an event as they read it: a frame's fields are not
//! first built into a `serde_json::Value` tree, which cost ≈ 90 bytes of
//! memory a byte of a SETTINGS list in the qlog export (4.9 GB for one 35 MB
//! line) and ≈ 11 in the CSV export. One test in this file: the peak RSS
//! read is that of this process's largest child.

mod support;

use std::io::Write as _;

#[test]
fn exporting_a_huge_settings_frame_holds_a_few_copies_of_its_line() {
    const MB: u64 = 1 << 20;
    const PAIRS: usize = 1_000_000;
    let dir = support::temp_dir("export-memory");
    let origin = 1_000_000_000u64;
    let mut list = String::with_capacity(PAIRS * 10);
    for i in 0..PAIRS {
        if i > 0 {
            list.push(',');
        }
        list.push_str(if i % 2 == 0 { "[4,65535]" } else { "[3,100]" });
    }
    let line = format!(
        r#"{{"t":{},"ep":"client","conn":1,"stream":0,"type":"frame","dir":"in","offset":0,"frame":"SETTINGS","flags":0,"len":{},"settings":[{list}]}}"#,
        origin + 1_000,
        PAIRS * 6,
    );
    let line_mb = line.len() as u64 / MB;
    let mut w = std::io::BufWriter::new(std::fs::File::create(dir.join("trace.jsonl")).unwrap());
    writeln!(w, "{}", support::trace_header(origin)).unwrap();
    writeln!(w, "{line}").unwrap();
    writeln!(w, r#"{{"type":"footer","events":1,"dropped":{{}}}}"#).unwrap();
    w.flush().unwrap();
    drop((w, line, list));

    support::h2probe_ok([
        std::ffi::OsStr::new("export"),
        "--format".as_ref(),
        "qlog,csv".as_ref(),
        dir.as_os_str(),
    ]);
    let peak = support::children_peak_rss();

    // Every pair is in both exports.
    let qlog = std::fs::read(dir.join("client.sqlog")).unwrap();
    let records: Vec<serde_json::Value> = qlog
        .split(|b| *b == 0x1e)
        .filter(|r| !r.is_empty())
        .map(|r| serde_json::from_slice(r).unwrap())
        .collect();
    assert_eq!(records.len(), 2, "the qlog header and one frame");
    let settings = records[1]["data"]["frame"]["settings"].as_array().unwrap();
    assert_eq!(settings.len(), PAIRS);
    assert_eq!(
        settings[1],
        serde_json::json!({"identifier": 3, "value": 100})
    );
    drop(records);
    let csv = std::fs::read_to_string(dir.join("csv/frame.csv")).unwrap();
    let row = csv.lines().nth(1).expect("one frame row");
    let quoted = row.split('"').nth(1).expect("the list quoted");
    let pairs: Vec<(u16, u32)> = serde_json::from_str(quoted).unwrap();
    assert_eq!(pairs.len(), PAIRS);
    let _ = std::fs::remove_dir_all(&dir);

    // The reader's line and the parsed list (8 bytes a pair) are there
    // whatever the export does, and the process's own few tens of MB; a
    // tree of values is not (this 8 MB line: 51 MB, 1.4 GB with one).
    assert!(
        peak < 16 * line_mb * MB,
        "exporting one {line_mb} MB SETTINGS line peaked at {} MB",
        peak / MB
    );
}
