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
    // The SETTINGS lists frames carry, in file order; frames padded, by
    // tap; the header's wall clock.
    let mut settings_lists: Vec<serde_json::Value> = vec![];
    let mut padded: HashMap<String, usize> = HashMap::new();
    let mut origin_unix_ns = None;
    for line in std::fs::read_to_string(dir.join("trace.jsonl"))
        .unwrap()
        .lines()
    {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let ty = v["type"].as_str().unwrap().to_string();
        if ty == "header" {
            origin_unix_ns = v["origin_unix_ns"].as_u64();
        }
        if ty == "header" || ty == "footer" {
            continue;
        }
        let ep = v["ep"].as_str().unwrap().to_string();
        if v["settings"].is_array() {
            settings_lists.push(v["settings"].clone());
        }
        if v["pad"].as_u64().is_some_and(|p| p > 0) {
            *padded.entry(ep.clone()).or_default() += 1;
        }
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
    let mut settings_rows: Vec<serde_json::Value> = vec![];
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
                let at = header.iter().position(|c| *c == "settings").unwrap();
                if !fields[at].is_empty() {
                    settings_rows.push(serde_json::from_str(&fields[at]).unwrap());
                }
            }
        }
    }
    // One connection, one key, the same in both taps' rows (the taps number
    // it differently).
    assert_eq!(keys["client"].len(), 1, "{keys:?}");
    assert_eq!(keys["client"], keys["server"], "{keys:?}");
    assert!(!keys["client"].iter().next().unwrap().is_empty());
    // A SETTINGS list is in its row, as the pairs of the trace (an ACK's
    // empty one too).
    assert!(settings_lists.len() >= 4, "{settings_lists:?}");
    assert_eq!(settings_rows, settings_lists);
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
        // Times are relative to the trace's origin, given in Unix ms.
        let reference = records[0]["trace"]["common_fields"]["reference_time"]
            .as_f64()
            .unwrap();
        let origin_ms = origin_unix_ns.unwrap() as f64 / 1e6;
        assert!(
            (reference - origin_ms).abs() < 1e-3,
            "{reference} {origin_ms}"
        );
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
        // A pad length only where the trace has padding.
        let with_pad = events
            .iter()
            .filter(|e| e["data"]["frame"].get("pad_length").is_some())
            .count();
        assert_eq!(with_pad, padded.get(ep).copied().unwrap_or(0), "{ep}");
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

/// Packets in a pcap, and the distinct addresses they carry.
fn pcap_packets(path: &std::path::Path) -> (usize, std::collections::BTreeSet<String>) {
    let data = std::fs::read(path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(&data[..]).unwrap();
    let (mut n, mut addrs) = (0, std::collections::BTreeSet::new());
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        n += 1;
        if p.data[0] >> 4 == 4 {
            addrs.insert(format!("{:?}", &p.data[12..16]));
        }
    }
    (n, addrs)
}

/// `h2probe export --format FORMATS DIR`, which must succeed; its stderr.
fn export_ok(dir: &std::path::Path, formats: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["export", "--format", formats])
        .arg(dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    err
}

/// A frame whose connection's `conn_open` comes later in the file (a trace
/// out of order, or edited) waits for it: the pcap is the original's,
/// packet for packet (766 packets of 1,065 were written before, the rest
/// left out). A `conn_open` line that is damaged costs the connection its
/// addresses, said, not its frames (one bad line cost a tap's whole pcap).
#[test]
fn a_pcap_export_keeps_frames_whose_conn_open_is_late_or_damaged() {
    let (dir, trace, text) = short_trace("pcap-late-open");
    let export = || export_ok(&dir, "pcap");
    assert_eq!(export(), "");
    let (want, addrs) = pcap_packets(&dir.join("client.pcap"));
    assert_eq!(addrs.len(), 1, "loopback only: {addrs:?}");
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
    let err = export();
    assert!(!err.contains("client.pcap"), "{err}");
    assert_eq!(pcap_packets(&dir.join("client.pcap")), (want, addrs));

    // Damaged: every frame written, on the documentation range's addresses.
    lines[tenth + 1] = "{\"t\":1,\"ep\":";
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let err = export();
    assert!(
        err.contains("client.pcap: 1 connection without a readable conn_open before its frames")
            && err.contains("192.0.2.1"),
        "{err}"
    );
    assert!(!err.contains("server.pcap:"), "{err}");
    let (n, addrs) = pcap_packets(&dir.join("client.pcap"));
    assert_eq!(n, want);
    assert_eq!(
        addrs.into_iter().collect::<Vec<_>>(),
        ["[192, 0, 2, 1]", "[192, 0, 2, 2]"]
    );
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

/// An export of a trace with a line added after the run (one duplicated)
/// says its footer disagrees, once: the duplicate went into every export
/// without a word. A whole trace says nothing.
#[test]
fn an_export_of_an_altered_trace_says_so() {
    let (dir, trace, text) = short_trace("export-altered");
    let export = || export_ok(&dir, "pcap,csv,qlog");
    let whole = export();
    assert!(!whole.contains("footer counts"), "{whole}");
    let mut lines: Vec<&str> = text.lines().collect();
    let events = lines.len() - 2;
    lines.insert(3, lines[3]);
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let err = export();
    let said = format!(
        "its footer counts {events} events written, the file holds {} lines of events",
        events + 1
    );
    assert_eq!(err.matches(&said).count(), 1, "{err}");
}

/// Bytes a tap read and could not frame (a DATA frame over the frame size:
/// the tap stops parsing there) are not in the pcap, and the pcap says
/// where they were: the FIN comes after them, a gap tshark calls "previous
/// segment not captured", and stderr says how many. They vanished: 33 of
/// 1,042 bytes in the pcap, its FIN right after them, nothing said.
#[test]
fn bytes_the_tap_could_not_frame_leave_a_gap_in_the_pcap() {
    use std::io::{Read, Write};
    let dir = support::temp_dir("unframed");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--for",
            "2s",
            "--quiet",
            "--out",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let addr = support::listening_addr(&mut child);
    let mut peer = std::net::TcpStream::connect(&addr).unwrap();
    let mut bytes = h2probe::wire::encode::preface();
    bytes.extend(h2probe::wire::encode::settings(false, &[]));
    let mut big = h2probe::wire::encode::data(1, 0, None, &vec![0; 70_000]);
    big.truncate(9 + 1_000);
    bytes.extend(big);
    peer.write_all(&bytes).unwrap();
    let _ = peer.set_read_timeout(Some(std::time::Duration::from_secs(3)));
    let _ = peer.read_to_end(&mut Vec::new());
    drop(peer);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("server.pcap: 1009 bytes the tap read or wrote and could not frame"),
        "{err}"
    );
    let Some(tshark) = support::require_tool("tshark") else {
        return;
    };
    let port = addr.rsplit_once(':').unwrap().1;
    let shown = std::process::Command::new(tshark)
        .args(["-r"])
        .arg(dir.join("server.pcap"))
        .args(["-d", &format!("tcp.port=={port},http2")])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("Previous segment not captured"), "{text}");
}

/// A run with no connection has nothing to put in a pcap or a qlog: the
/// run and the export say so (they printed nothing, wrote nothing, exit 0),
/// and an export of several directories goes on past one it cannot read,
/// then fails naming how many.
#[test]
fn an_export_says_what_it_did_not_write() {
    let dir = support::temp_dir("export-empty");
    let served = support::h2probe_ok([
        "serve".as_ref(),
        "--listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--for".as_ref(),
        "200ms".as_ref(),
        "--quiet".as_ref(),
        "--out".as_ref(),
        dir.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&served.stderr);
    assert!(
        err.contains("warning: no pcap written: the trace holds no connection"),
        "{err}"
    );
    assert!(!dir.join("server.pcap").exists());
    let missing = dir.join("no-such-run");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["export", "--format", "pcap,qlog"])
        .arg(&missing)
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for said in [
        "no pcap written: the trace holds no connection",
        "no qlog written: the trace holds no connection",
        "no-such-run: no such directory",
        "1 of 2 run directories not exported",
    ] {
        assert!(err.contains(said), "{said}: {err}");
    }
}

/// A damaged trace exports what it can: a frame whose `t` is past what a
/// pcap holds (2^63 ns: the year 2262) is left out and said (it failed the
/// whole export, naming no file), and corrupt lines are named five at a
/// time, then counted (every one was said, once per format).
#[test]
fn an_export_of_a_damaged_trace_leaves_out_what_it_cannot_write_and_counts_it() {
    let (dir, trace, text) = short_trace("export-damaged");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let frame = lines
        .iter()
        .position(|l| l.contains("\"ep\":\"client\"") && l.contains("\"frame\":\"DATA\""))
        .unwrap();
    let t_end = lines[frame].find(",\"ep\"").unwrap();
    lines[frame] = format!("{{\"t\":{}{}", 1u64 << 63, &lines[frame][t_end..]);
    for l in lines
        .iter_mut()
        .skip(frame + 1)
        .filter(|l| l.contains("\"type\":\"release\""))
        .take(12)
    {
        *l = "{\"t\":".to_string();
    }
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let err = export_ok(&dir, "pcap,csv,qlog");
    assert!(
        err.contains("client.pcap: 1 packet left out: its time is past what a pcap holds"),
        "{err}"
    );
    assert_eq!(err.matches("skipped line").count(), 5, "{err}");
    assert_eq!(
        err.matches("12 corrupt lines skipped in all (the first 5 named above)")
            .count(),
        1,
        "{err}"
    );
    for f in [
        "client.pcap",
        "server.pcap",
        "client.sqlog",
        "csv/frame.csv",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
}

/// An event moved far past the run's end stretches the span, and the
/// analysis says so from meta.json's start and finish (a 300 ms run spanned
/// 11 days without a word); the run itself says nothing.
#[test]
fn analyze_says_when_the_events_span_longer_than_the_run_lasted() {
    let (dir, trace, text) = short_trace("span-longer-than-run");
    let said = |dir: &std::path::Path| {
        let out = support::analyze(dir);
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(!said(&dir).contains("the events span"), "{}", said(&dir));
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let last = lines.len() - 2;
    let t: u64 = lines[last][5..lines[last].find(',').unwrap()]
        .parse()
        .unwrap();
    lines[last] = lines[last].replacen(&t.to_string(), &(t + 1_000_000_000_000_000).to_string(), 1);
    std::fs::write(&trace, lines.join("\n") + "\n").unwrap();
    let err = said(&dir);
    assert!(
        err.contains("the events span 1000000.") && err.contains("an event's time is damaged"),
        "{err}"
    );
}
