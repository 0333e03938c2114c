//! CSV and qlog exports carry every event of the trace, in formats other
//! tools load.

mod support;

use std::collections::HashMap;

#[test]
fn csv_and_qlog_exports_carry_every_event() {
    let dir = support::temp_dir("exports");
    let mut o = support::short_run_opts(&dir, "decode", "bounded:4", "400ms");
    o.output.no_pcap = true;
    support::run(o);
    support::h2probe_ok([
        std::ffi::OsStr::new("export"),
        "--format".as_ref(),
        "csv,qlog".as_ref(),
        dir.as_os_str(),
    ]);

    // Events per type in the trace.
    let mut by_type: HashMap<String, usize> = HashMap::new();
    let mut by_ep_frames: HashMap<String, usize> = HashMap::new();
    let mut by_ep_events: HashMap<String, usize> = HashMap::new();
    for line in std::fs::read_to_string(dir.join("trace.jsonl"))
        .unwrap()
        .lines()
    {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let ty = v["type"].as_str().unwrap().to_string();
        if ty == "header" || ty == "footer" {
            continue;
        }
        let ep = v["ep"].as_str().unwrap().to_string();
        *by_ep_events.entry(ep.clone()).or_default() += 1;
        if ty == "frame" {
            *by_ep_frames.entry(ep).or_default() += 1;
        }
        *by_type.entry(ty).or_default() += 1;
    }
    assert!(by_type.len() >= 12, "{by_type:?}");
    // Every event type has its file, with its header, whether or not the
    // run had such events (a notebook loads the same files from every run).
    let mut keys: HashMap<String, std::collections::BTreeSet<String>> = HashMap::new();
    for ty in h2probe::trace::schema::Kind::NAMES {
        let n = by_type.get(*ty).copied().unwrap_or(0);
        let text = std::fs::read_to_string(dir.join("csv").join(format!("{ty}.csv"))).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(
            &header[..6],
            &["t_ns", "t_s", "ep", "conn", "conn_key", "stream"],
            "{ty}"
        );
        let rows: Vec<&str> = lines.collect();
        assert_eq!(rows.len(), n, "{ty}.csv rows");
        // Every row has as many fields as the header (quoted commas respected).
        for r in &rows {
            let mut fields = vec![String::new()];
            let mut quoted = false;
            for c in r.chars() {
                match c {
                    '"' => quoted = !quoted,
                    ',' if !quoted => fields.push(String::new()),
                    c => fields.last_mut().unwrap().push(c),
                }
            }
            assert_eq!(fields.len(), header.len(), "{ty}.csv: {r}");
            if *ty == "frame" {
                keys.entry(fields[2].clone())
                    .or_default()
                    .insert(fields[4].clone());
            }
        }
    }
    // One connection, one key, the same in both taps' rows (the taps number
    // it differently).
    assert_eq!(keys["client"].len(), 1, "{keys:?}");
    assert_eq!(keys["client"], keys["server"], "{keys:?}");
    assert!(!keys["client"].iter().next().unwrap().is_empty());
    let dtypes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("csv/dtypes.json")).unwrap()).unwrap();
    assert_eq!(
        dtypes.as_object().unwrap().len(),
        h2probe::trace::schema::Kind::NAMES.len()
    );

    for ep in ["server", "client"] {
        let bytes = std::fs::read(dir.join(format!("{ep}.sqlog"))).unwrap();
        let records: Vec<serde_json::Value> = bytes
            .split(|b| *b == 0x1e)
            .filter(|r| !r.is_empty())
            .map(|r| serde_json::from_slice(r).unwrap())
            .collect();
        assert_eq!(records[0]["qlog_format"], "JSON-SEQ");
        assert_eq!(records[0]["trace"]["vantage_point"]["type"], ep);
        let events = &records[1..];
        assert_eq!(
            events.len(),
            by_ep_events[ep],
            "{ep}: one qlog event per trace event"
        );
        let frames = events
            .iter()
            .filter(|e| e["name"].as_str().unwrap().starts_with("http2:frame_"))
            .count();
        assert_eq!(frames, by_ep_frames[ep]);
        for e in events {
            assert!(e["time"].as_f64().unwrap() >= 0.0);
            assert!(e["data"].is_object());
        }
        let wu = events
            .iter()
            .find(|e| e["data"]["frame"]["frame_type"] == "window_update")
            .expect("a WINDOW_UPDATE");
        assert!(
            wu["data"]["frame"]["window_size_increment"]
                .as_u64()
                .unwrap()
                > 0
        );
    }
}

/// The default capture keeps every byte but the upload's DATA, so tshark
/// dissects every frame of a default run's pcap — gRPC replies and trailers
/// included — without a warning or an error in its expert info.
#[test]
fn tshark_finds_nothing_wrong_in_a_default_runs_pcap() {
    let Some(tshark) = support::require_tool("tshark") else {
        return;
    };
    let dir = support::temp_dir("pcap-expert");
    let mut o = support::run_opts(&dir, "frame", "unbounded");
    o.client.duration = support::dur("500ms");
    let r = support::run(o);
    let meta = h2probe_analysis::meta::Meta::read(&r.dir).unwrap();
    let port = meta.listen.unwrap().rsplit(':').next().unwrap().to_string();
    for pcap in ["server.pcap", "client.pcap"] {
        let out = std::process::Command::new(&tshark)
            .arg("-r")
            .arg(dir.join(pcap))
            .args([
                "-d",
                &format!("tcp.port=={port},http2"),
                "-q",
                "-z",
                "expert",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}");
        for bad in ["Errors (", "Warnings ("] {
            assert!(!text.contains(bad), "{pcap}: tshark's expert info:\n{text}");
        }
    }
}

/// A short run without pcaps (for a test to alter its trace): its
/// directory, its trace's path and the trace's text.
fn short_trace(name: &str) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let dir = support::temp_dir(name);
    let mut o = support::short_run_opts(&dir, "frame", "unbounded", "300ms");
    o.output.no_pcap = true;
    support::run(o);
    let trace = dir.join("trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap();
    (dir, trace, text)
}

/// A frame whose connection's `conn_open` comes later in the file (a trace
/// out of order beyond the reader's window, or edited) cannot become a
/// packet: the pcap export says how many it left out, per pcap. It wrote
/// the rest and said nothing (766 packets of 1,065, exit 0).
#[test]
fn a_pcap_export_says_which_frames_it_could_not_write() {
    let (dir, trace, text) = short_trace("pcap-late-open");
    let mut lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("\"ep\":\"client\"") && l.contains("\"type\":\"conn_open\""))
        .unwrap();
    let open = lines.remove(at);
    // Moved past the client's first 10 frames.
    let client_frame =
        |l: &&str| l.contains("\"ep\":\"client\"") && l.contains("\"type\":\"frame\"");
    let tenth = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| client_frame(l))
        .nth(9)
        .unwrap()
        .0;
    lines.insert(tenth + 1, open);
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["export", "--format", "pcap"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "client.pcap: 10 frames not written: their connection's conn_open is not before them"
        ),
        "{err}"
    );
    assert!(!err.contains("server.pcap:"), "{err}");
}

/// An export of a trace cut short says so (it wrote what there was
/// without a word).
#[test]
fn an_export_of_a_cut_trace_says_where_it_ends() {
    let (dir, trace, text) = short_trace("export-cut");
    // Mid-line, halfway through the file.
    let half = text.len() / 2;
    let cut = half + text[half..].find('\n').unwrap() - 5;
    std::fs::write(&trace, &text[..cut]).unwrap();
    let line = text[..cut].lines().count();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["export", "--format", "pcap,csv,qlog"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Once, though every format reads the trace (it was said five times).
    assert_eq!(
        err.matches(&format!("the trace ends truncated at line {line}"))
            .count(),
        1,
        "{err}"
    );
}
