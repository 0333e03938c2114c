//! `h2probe report`: the page of a hand-built run, rendered by a real
//! browser (headless Chromium): it loads without console errors, its frame
//! ladder has one arrow per frame of the slice (matched across the two taps
//! by offset, the connections paired by address), and a screenshot is kept
//! as a test artefact.

mod support;

use serde_json::json;
use std::path::{Path, PathBuf};

const ORIGIN: u64 = 5_000_000_000;
/// 1 s after the trace origin.
const T0: u64 = ORIGIN + 1_000_000_000;
/// Messages arrive every 3.3 ms.
const GAP: u64 = 3_300_000;
const CLIENT: (&str, &str) = ("127.0.0.1:5000", "127.0.0.1:6000");
const DECOY: &str = "127.0.0.1:5001";

fn ev(
    t: u64,
    ep: &str,
    conn: u32,
    stream: u32,
    kind: &str,
    mut f: serde_json::Value,
) -> (u64, String) {
    let m = f.as_object_mut().unwrap();
    m.insert("t".into(), t.into());
    m.insert("ep".into(), ep.into());
    m.insert("conn".into(), conn.into());
    m.insert("stream".into(), stream.into());
    m.insert("type".into(), kind.into());
    (t, f.to_string())
}

/// A DATA frame of stream 1 seen by one tap.
fn data(t: u64, ep: &str, conn: u32, dir: &str, offset: u64, len: u32) -> (u64, String) {
    ev(
        t,
        ep,
        conn,
        1,
        "frame",
        json!({"dir": dir, "offset": offset, "frame": "DATA", "flags": 0, "len": len}),
    )
}

fn window_update(
    t: u64,
    ep: &str,
    conn: u32,
    stream: u32,
    dir: &str,
    offset: u64,
    inc: u32,
) -> (u64, String) {
    ev(
        t,
        ep,
        conn,
        stream,
        "frame",
        json!({"dir": dir, "offset": offset, "frame": "WINDOW_UPDATE", "flags": 0, "len": 4, "increment": inc}),
    )
}

/// A run directory with a hand-built trace: four 16,400-byte messages from
/// client conn 1 to server conn 7 (the same connection, seen by each tap),
/// each as DATA 16384 + DATA 16 on both taps; three WINDOW_UPDATEs back;
/// the server's chunk/release/decode/enqueue/start/complete; a second
/// connection (client conn 2 ↔ server conn 9) with one HEADERS frame. The
/// lines are written out of time order, as a real recorder writes them.
///
/// Frames of the default slice: 8 DATA + 3 WINDOW_UPDATE.
fn hand_built_run(dir: &Path) {
    let mut e: Vec<(u64, String)> = vec![
        ev(
            ORIGIN + 1_000,
            "client",
            1,
            0,
            "conn_open",
            json!({"local": CLIENT.0, "peer": CLIENT.1}),
        ),
        ev(
            ORIGIN + 2_000,
            "server",
            7,
            0,
            "conn_open",
            json!({"local": CLIENT.1, "peer": CLIENT.0}),
        ),
        ev(
            ORIGIN + 3_000,
            "client",
            2,
            0,
            "conn_open",
            json!({"local": DECOY, "peer": CLIENT.1}),
        ),
        ev(
            ORIGIN + 4_000,
            "server",
            9,
            0,
            "conn_open",
            json!({"local": CLIENT.1, "peer": DECOY}),
        ),
        ev(
            T0 + 1_000_000,
            "client",
            2,
            1,
            "frame",
            json!({"dir": "out", "offset": 24, "frame": "HEADERS", "flags": 4, "len": 40}),
        ),
        ev(
            T0 + 1_000_050,
            "server",
            9,
            1,
            "frame",
            json!({"dir": "in", "offset": 24, "frame": "HEADERS", "flags": 4, "len": 40}),
        ),
    ];
    for k in 0..4u64 {
        let t = T0 + k * GAP;
        let off = 100 + k * 16_418;
        e.push(ev(
            t - 5_000,
            "client",
            1,
            1,
            "send",
            json!({"seq": k, "scheduled": t - 9_000, "begin": t - 8_000, "bytes": 16_400}),
        ));
        e.push(data(t, "client", 1, "out", off, 16_384));
        e.push(data(t + 10_000, "client", 1, "out", off + 16_393, 16));
        e.push(data(t + 40_000, "server", 7, "in", off, 16_384));
        e.push(data(t + 45_000, "server", 7, "in", off + 16_393, 16));
        e.push(ev(
            t + 60_000,
            "server",
            7,
            1,
            "chunk",
            json!({"len": 16_384}),
        ));
        e.push(ev(
            t + 62_000,
            "server",
            7,
            1,
            "release",
            json!({"bytes": 16_384, "at": "frame"}),
        ));
        e.push(ev(t + 64_000, "server", 7, 1, "chunk", json!({"len": 16})));
        e.push(ev(
            t + 66_000,
            "server",
            7,
            1,
            "release",
            json!({"bytes": 16, "at": "frame"}),
        ));
        e.push(ev(
            t + 70_000,
            "server",
            7,
            1,
            "decode",
            json!({"seq": k, "size": 16_395, "framed": 16_400}),
        ));
        let depth = k.max(1);
        e.push(ev(
            t + 72_000,
            "server",
            7,
            1,
            "enqueue",
            json!({"seq": k, "depth": depth, "queued_bytes": depth * 16_400}),
        ));
    }
    e.push(ev(
        T0 + 75_000,
        "server",
        7,
        1,
        "start",
        json!({"seq": 0, "worker": 0, "wait_ns": 3_000, "depth": 0}),
    ));
    // Credit back after messages 1 and 3: connection and stream, then connection.
    let t1 = T0 + GAP;
    e.push(window_update(
        t1 + 100_000,
        "server",
        7,
        0,
        "out",
        50,
        16_400,
    ));
    e.push(window_update(
        t1 + 105_000,
        "server",
        7,
        1,
        "out",
        63,
        32_800,
    ));
    e.push(window_update(
        t1 + 130_000,
        "client",
        1,
        0,
        "in",
        50,
        16_400,
    ));
    e.push(window_update(
        t1 + 135_000,
        "client",
        1,
        1,
        "in",
        63,
        32_800,
    ));
    let t3 = T0 + 3 * GAP;
    e.push(window_update(
        t3 + 100_000,
        "server",
        7,
        0,
        "out",
        76,
        32_800,
    ));
    e.push(window_update(
        t3 + 130_000,
        "client",
        1,
        0,
        "in",
        76,
        32_800,
    ));
    e.push(ev(
        T0 + 10_075_000,
        "server",
        7,
        1,
        "complete",
        json!({"seq": 0, "worker": 0, "service_ns": 10_000_000}),
    ));
    e.push(ev(
        T0 + 10_080_000,
        "server",
        7,
        1,
        "start",
        json!({"seq": 1, "worker": 0, "wait_ns": 6_000_000, "depth": 2}),
    ));
    e.sort_by_key(|(t, _)| *t);
    // Out of time order, as threads hand events to the recorder: after the
    // four conn_open lines, each run of five lines reversed (a few ms late
    // at most, well within the reorder window).
    let mut lines: Vec<String> = e[..4].iter().map(|(_, l)| l.clone()).collect();
    for chunk in e[4..].chunks(5) {
        lines.extend(chunk.iter().rev().map(|(_, l)| l.clone()));
    }
    let header = json!({"type": "header", "schema": 1, "tool": "h2probe test", "clock": "CLOCK_MONOTONIC", "origin_mono_ns": ORIGIN, "origin_unix_ns": 1_700_000_000_000_000_000u64});
    let footer = json!({"type": "footer", "events": lines.len(), "dropped": {}});
    let mut text = format!("{header}\n");
    for l in &lines {
        text.push_str(l);
        text.push('\n');
    }
    text.push_str(&format!("{footer}\n"));
    std::fs::write(dir.join("trace.jsonl"), text).unwrap();
    let meta = json!({
        "schema": 1,
        "tool": "h2probe test",
        "command": "run",
        "argv": ["h2probe", "run", "--hand-built"],
        "config": {
            "server": {"release": "frame", "queue": "unbounded", "stream_window": 65535, "service_time": "10ms"},
            "client": {"rate": 300.0, "payload": 16384, "duration": "13.2ms"}
        },
        "status": "complete",
        "started_unix_ns": 1_700_000_000_000_000_000u64,
        "finished_unix_ns": 1_700_000_001_000_000_000u64
    });
    std::fs::write(
        dir.join("meta.json"),
        serde_json::to_string_pretty(&meta).unwrap(),
    )
    .unwrap();
}

/// `class="arrow"` elements (and those of one frame type) in a page.
fn arrows(html: &str, frame: Option<&str>) -> usize {
    html.split("<g class=\"arrow\"")
        .skip(1)
        .filter(|g| frame.is_none_or(|f| g.starts_with(&format!(" data-frame=\"{f}\""))))
        .count()
}

/// Lines of Chromium's log that report a console message or an uncaught
/// error (a page without script should have none).
fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

/// Where test artefacts (screenshots) are kept.
fn artefacts() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_page_of_a_hand_built_run_renders_in_a_browser_with_its_ladder() {
    let dir = support::temp_dir("report");
    hand_built_run(&dir);
    // `analyze` (as run, serve, client and merge) writes the page with the
    // default slice. (The accounting check fails, exit 3: the trace has no
    // `schedule` events and one completion. The page shows it.)
    let analyze = support::analyze(&dir);
    let stderr = String::from_utf8_lossy(&analyze.stderr);
    assert_eq!(analyze.status.code(), Some(3), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    let analyzed = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_eq!(arrows(&analyzed, None), 11, "arrows in analyze's page");
    // No warning, none shown (the block is for a trace the analysis doubts).
    assert!(!analyzed.contains("The analysis warned"));
    let out = support::h2probe_ok([std::ffi::OsStr::new("report"), dir.as_os_str()]);
    let page = dir.join("report.html");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        page.display().to_string()
    );
    let html = std::fs::read_to_string(&page).unwrap();

    // Self-contained: nothing is fetched; each plot is an image of its
    // own file's bytes (a data: URL), never its markup inline.
    for needle in ["<link", "@import", "url(http", "href=\"http"] {
        assert!(!html.contains(needle), "the page refers to {needle}…");
    }
    let plots = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("svg".as_ref()))
        .count();
    assert!(plots >= 3, "{plots} plots");
    assert_eq!(html.matches("src=").count(), plots);
    assert_eq!(
        html.matches(r#"<img class="plot" alt="#).count(),
        plots,
        "one image per plot"
    );
    assert_eq!(
        html.matches(r#"src="data:image/svg+xml;base64,"#).count(),
        plots
    );
    // The headline, the checks, the configuration and the plots are there.
    assert!(html.contains("messages  scheduled"), "no headline");
    assert!(html.contains("✗ FAILED"), "the failed accounting check");
    for check in ["accounting", "bytes", "credit", "windows_agree"] {
        assert!(
            html.contains(&format!("<code>{check}</code>")),
            "check {check} missing"
        );
    }
    assert!(
        html.contains("service_time") && html.contains("10ms"),
        "no configuration"
    );
    for plot in ["credit.svg", "queue.svg", "cumulative.svg", "blocked.svg"] {
        assert!(
            html.contains(&format!("<b>{plot}</b>")),
            "plot {plot} not inlined"
        );
    }
    // The default slice: anchored on enqueue #2 (depth 2, after the first
    // WINDOW_UPDATE), showing conn 1 ↔ conn 7, every frame of it matched.
    assert!(html.contains("the default slice"), "slice not explained");
    // Four messages, the queue back to empty: it never grew over the
    // run, so the caption does not say the slice shows it growing.
    let summary = support::read_summary(&dir);
    assert!(summary.queue_growth_in_window < 1.0, "{summary:?}");
    assert!(
        !html.contains("the queue grows while credit flows"),
        "a queue that never grew"
    );
    assert!(
        html.contains("client conn 1 (127.0.0.1:5000) ↔ server conn 7"),
        "connections not paired by address"
    );
    assert!(
        html.contains("1 other connection(s) had frames"),
        "the decoy connection is not mentioned"
    );
    assert_eq!(arrows(&html, None), 11, "arrows in the ladder");
    assert_eq!(arrows(&html, Some("DATA")), 8);
    assert_eq!(arrows(&html, Some("WINDOW_UPDATE")), 3);
    assert_eq!(
        html.matches("data-matched=\"1\"").count(),
        11,
        "every frame seen by both taps"
    );
    assert!(
        html.contains("WINDOW_UPDATE +16400 (connection)"),
        "arrow label"
    );
    assert!(html.contains("enqueue #3 → depth 3"), "server tick label");
    // Empty before message 0; 2 left after the worker took message 1.
    assert!(
        html.contains("queue depth 0 → 2"),
        "queue depth over the slice"
    );

    // A chosen slice: only message 1 and the credit it brought back.
    let slice = dir.join("slice.html");
    support::h2probe_ok([
        std::ffi::OsStr::new("report"),
        dir.as_os_str(),
        "--at".as_ref(),
        "1.0033s".as_ref(),
        "--span".as_ref(),
        "2ms".as_ref(),
        "--out".as_ref(),
        slice.as_os_str(),
    ]);
    let sliced = std::fs::read_to_string(&slice).unwrap();
    assert_eq!(arrows(&sliced, Some("DATA")), 2, "DATA of message 1");
    assert_eq!(
        arrows(&sliced, Some("WINDOW_UPDATE")),
        2,
        "the two updates after it"
    );
    assert!(sliced.contains("the slice asked for, 2 ms from 1.0033 s"));

    // In a real browser.
    let Some(exe) = support::require_tool("chromium") else {
        return;
    };
    let profile = dir.join("chromium-profile");
    let (dom, log) = support::chromium(&exe, &profile, &page, &["--dump-dom".into()]);
    let errors = console_errors(&log);
    assert!(errors.is_empty(), "console errors:\n{}", errors.join("\n"));
    assert_eq!(arrows(&dom, None), 11, "arrows in the rendered DOM");
    assert_eq!(arrows(&dom, Some("DATA")), 8);
    assert_eq!(arrows(&dom, Some("WINDOW_UPDATE")), 3);
    assert!(
        dom.contains("class=\"ladder\""),
        "the ladder SVG is in the DOM"
    );
    let shot = artefacts().join("hand-built-report.png");
    let _ = std::fs::remove_file(&shot);
    let (_, log) = support::chromium(
        &exe,
        &profile,
        &page,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,1800".into(),
        ],
    );
    let errors = console_errors(&log);
    assert!(errors.is_empty(), "console errors:\n{}", errors.join("\n"));
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "screenshot {}",
        shot.display()
    );
    eprintln!("screenshot of the report: {}", shot.display());
}

#[test]
fn several_runs_give_a_comparison_page_linking_each_run() {
    let root = support::temp_dir("report-cmp");
    let (a, b) = (root.join("a"), root.join("b"));
    for d in [&a, &b] {
        std::fs::create_dir_all(d).unwrap();
        hand_built_run(d);
    }
    // Into a directory that does not exist yet: created first (it failed
    // after every run's page had been rewritten).
    let cmp = root.join("out").join("cmp.html");
    support::h2probe_ok([
        std::ffi::OsStr::new("report"),
        a.as_os_str(),
        b.as_os_str(),
        "--out".as_ref(),
        cmp.as_os_str(),
    ]);
    let html = std::fs::read_to_string(&cmp).unwrap();
    assert!(a.join("report.html").is_file() && b.join("report.html").is_file());
    // Every table scrolls inside its own box: at 1280 px the outcomes
    // table (1,412 px) widened the whole page past the window.
    for page in [
        html.clone(),
        std::fs::read_to_string(a.join("report.html")).unwrap(),
    ] {
        assert_eq!(
            page.matches("<table").count(),
            page.matches(r#"<div class="tw"><table"#).count(),
            "a table outside a scrolling box"
        );
        assert!(page.contains(".tw{overflow-x:auto"));
        // A configuration's label wraps (unwrapped, one cut the outcomes
        // table at 1280 px) and stays in view as its table scrolls.
        let label_rules: Vec<&str> = page
            .split('}')
            .filter(|r| r.contains("table.cmpt td:first-child"))
            .collect();
        assert!(!label_rules.is_empty());
        assert!(
            label_rules.iter().all(|r| !r.contains("nowrap")),
            "{label_rules:?}"
        );
        assert!(
            label_rules.iter().any(|r| r.contains("position:sticky")),
            "{label_rules:?}"
        );
    }
    assert!(html.contains(r#"href="../a/report.html""#), "link to run a");
    // Each thumbnail links to its plot at full size, beside the run's page.
    for run in ["a", "b"] {
        assert!(
            html.contains(&format!(r#"<a href="../{run}/credit.svg">full size</a>"#)),
            "full-size link of {run}"
        );
    }
    assert!(html.contains(r#"href="../b/report.html""#), "link to run b");
    assert!(
        html.contains("release=frame queue=unbounded"),
        "comparison table"
    );
    // Each plot once per run, side by side (the label also names the
    // settings that differ from the defaults, here the hand-built duration).
    assert_eq!(
        html.matches("<b>release=frame queue=unbounded duration=")
            .count(),
        8
    );

    let Some(exe) = support::require_tool("chromium") else {
        return;
    };
    let (dom, log) = support::chromium(
        &exe,
        &root.join("chromium-profile"),
        &cmp,
        &["--dump-dom".into()],
    );
    let errors = console_errors(&log);
    assert!(errors.is_empty(), "console errors:\n{}", errors.join("\n"));
    assert!(dom.contains("Plots side by side"));
}

/// The client's side alone (`h2probe client`): the default slice says the
/// queue is not in the trace, and the releases are n/a (it said the queue
/// "never held two messages" and "0 B released").
#[test]
fn a_client_only_ladder_claims_nothing_about_the_server() {
    let dir = support::temp_dir("report-client-only");
    hand_built_run(&dir);
    let trace = dir.join("trace.jsonl");
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains(r#""ep":"server""#))
        .collect();
    assert!(lines.len() < text.lines().count(), "server lines dropped");
    let footer = format!(
        r#"{{"type":"footer","events":{},"dropped":{{}}}}"#,
        lines.len() - 2
    );
    lines.pop();
    let mut kept = lines.join("\n");
    kept.push_str(&format!("\n{footer}\n"));
    std::fs::write(&trace, kept).unwrap();
    support::h2probe_ok([std::ffi::OsStr::new("report"), dir.as_os_str()]);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("the trace has no server events, so the queue is not in it"),
        "{html}"
    );
    assert!(html.contains("released n/a (no server view)"));
    assert!(!html.contains("never held two messages"));
}

/// A plot deleted from a run directory is drawn again by `report`, with a
/// warning (the page left it out without a word while it claims every plot).
#[test]
fn a_missing_plot_is_drawn_again() {
    let dir = support::temp_dir("report-missing-plot");
    hand_built_run(&dir);
    // (Its exit code is the hand-built RPCs', not this test's concern.)
    std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .arg("analyze")
        .arg(&dir)
        .output()
        .unwrap();
    let s = support::read_summary(&dir);
    assert!(s.plots.contains(&"queue.svg".to_string()), "{:?}", s.plots);
    std::fs::remove_file(dir.join("queue.svg")).unwrap();
    let out = support::h2probe_ok([std::ffi::OsStr::new("report"), dir.as_os_str()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("queue.svg missing from"), "{stderr}");
    assert!(dir.join("queue.svg").is_file());
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<b>queue.svg</b>"), "the page shows it again");
}

/// A slice asked for past the trace's end is refused (exit 2) before any
/// page is written: it only warned, and replaced the run's report.html
/// with an empty ladder.
#[test]
fn a_slice_past_the_end_of_the_trace_is_refused() {
    let dir = support::temp_dir("report-past-end");
    hand_built_run(&dir);
    let report = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .arg("report")
            .arg(&dir)
            .args(["--at", "99s"])
            .args(extra)
            .output()
            .unwrap()
    };
    let late = dir.join("late.html");
    // The run's own page, as `report` writes it without --at.
    support::h2probe_ok([std::ffi::OsStr::new("report"), dir.as_os_str()]);
    let page = || std::fs::read(dir.join("report.html")).unwrap();
    let before = page();
    for extra in [&["--out", late.to_str().unwrap()][..], &[]] {
        let out = report(extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("is past the end of"), "{stderr}");
        assert!(stderr.contains("the slice would be empty"), "{stderr}");
    }
    assert!(!late.exists());
    assert!(page() == before, "the run's report.html left as it was");
}

/// The default slice's caption says the queue grows while credit flows
/// only where the analysis found it growing: the reference run with an
/// unbounded queue and release on receipt, not the one whose release waits
/// for completion (its queue reached depth 2, then drained: its page said
/// so until an audit noticed).
#[test]
fn the_default_slice_claims_growth_only_where_the_queue_grew() {
    let reference = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("captures/reference");
    for (run, grows) in [("frame-unbounded", true), ("complete-unbounded", false)] {
        let dir = support::temp_dir(run);
        for f in std::fs::read_dir(reference.join(run)).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), dir.join(f.file_name())).unwrap();
        }
        support::h2probe_ok([std::ffi::OsStr::new("report"), dir.as_os_str()]);
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(
            html.contains("the default slice"),
            "{run}: no default slice"
        );
        assert_eq!(
            html.contains("the queue grows while credit flows"),
            grows,
            "{run}"
        );
        assert_eq!(
            html.contains("growth    from"),
            grows,
            "{run}: the headline's growth line"
        );
    }
}
