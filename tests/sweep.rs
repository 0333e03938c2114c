//! `compare --sweep PARAM=V1,V2,…`: any run flag, run's names and syntax,
//! a grid when repeated, refused with run directories, plotted against the
//! swept parameter.

mod support;

use std::process::Command;

fn h2probe() -> Command {
    Command::new(env!("CARGO_BIN_EXE_h2probe"))
}

/// Refused before any run starts, as bad usage (exit 2), with the reason.
fn refused(args: &[&str], says: &str) {
    let out = h2probe().arg("compare").args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(says), "{args:?}: {err}");
}

#[test]
fn bad_sweeps_are_refused_before_anything_runs() {
    let dir = support::temp_dir("sweep-refused");
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    // A value run's parser refuses, through run's own message.
    refused(
        &["--out", out, "--sweep", "stream-window=64K,1MiB"],
        "write 64KiB (65,536) or 64kB (64,000)",
    );
    // A flag run does not have.
    refused(
        &["--out", out, "--sweep", "no-such-flag=1,2"],
        "`no-such-flag` is not a flag of `h2probe run`",
    );
    // Where-to-write flags are not experiments.
    refused(
        &["--out", out, "--sweep", "out=a,b"],
        "says where and how to write",
    );
    refused(&["--out", out, "--sweep", "link-delay"], "PARAM=V1,V2");
    refused(
        &[
            "--out",
            out,
            "--sweep",
            "streams=1,2",
            "--sweep",
            "streams=4",
        ],
        "given twice",
    );
    refused(
        &["--out", out, "--scenario", "bdp", "--sweep", "streams=1,2"],
        "does not combine with --scenario",
    );
    // A swept release or queue beside the flag itself: the flag won, and
    // the table labelled configurations that never ran.
    refused(
        &[
            "--out",
            out,
            "--sweep",
            "release=frame,complete",
            "--release",
            "decode",
        ],
        "--sweep release=… and --release both choose the release",
    );
    refused(
        &[
            "--out",
            out,
            "--sweep",
            "queue=direct,unbounded",
            "--queue",
            "bounded:4",
        ],
        "--sweep queue=… and --queue both choose the queue",
    );
    refused(
        &["--out", out, "--sweep", "rate=50,100", "--rate", "20"],
        "--sweep rate=… and --rate both choose the rate",
    );
    // A value twice ran once, then stopped at its directory (exit 2).
    refused(
        &["--out", out, "--sweep", "rate=1,1"],
        "1 is listed twice; each value is one configuration",
    );
    // The same for a release point or a queue policy.
    refused(
        &[
            "--out",
            out,
            "--release",
            "frame,frame",
            "--queue",
            "direct",
        ],
        "--release: frame is listed twice",
    );
    refused(
        &["--out", out, "--queue", "direct,bounded:32,bounded:32"],
        "--queue: bounded:32 is listed twice",
    );
    // Matrix flags with saved run directories.
    refused(
        &[dir.to_str().unwrap(), "--sweep", "link-delay=0ms,10ms"],
        "do not apply to existing run directories",
    );
    // How to run a matrix, with saved run directories: ignored, exit 0.
    refused(
        &[dir.to_str().unwrap(), "--duration", "2s", "--repeats", "5"],
        "--repeats, --duration say how to run a matrix",
    );
    refused(
        &[dir.to_str().unwrap(), "--pcap"],
        "--pcap says how to run a matrix",
    );
    assert!(
        !std::path::Path::new(out).join("comparison.md").exists(),
        "nothing ran"
    );
}

#[test]
fn a_link_delay_sweep_follows_the_window_over_the_round_trip() {
    let out = support::temp_dir("sweep-delay");
    let run = h2probe()
        .args([
            "compare",
            "--quiet",
            "--repeats",
            "1",
            "--duration",
            "1s",
            "--service-time",
            "1ms",
            "--sweep",
            "link-delay=0ms,40ms",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("comparison.json")).unwrap()).unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["config"].as_str().unwrap()).collect();
    assert_eq!(labels, ["link-delay=0ms", "link-delay=40ms"]);
    // The runs really had the delay: meta.json records run's option.
    let meta: serde_json::Value = serde_json::from_slice(
        &std::fs::read(out.join("link-delay40ms-r1").join("meta.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["config"]["client"]["link_delay"], "40ms", "{meta}");
    // W / RTT at 40 ms: 65,535 B ÷ 80 ms ÷ ≈16.4 kB ≈ 50 msg/s, far below
    // the 300/s offered (which the undelayed run sends).
    let rate = |i: usize| rows[i]["send_rate"]["median"].as_f64().unwrap();
    assert!(rate(0) > 250.0, "{}", rate(0));
    let bound = 65_535.0 / 0.080 / 16_400.0;
    assert!(
        rate(1) < bound * 1.05 && rate(1) > bound * 0.6,
        "{} vs W/RTT {bound}",
        rate(1)
    );
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    assert!(svg.contains("Steady send rate against --link-delay"));
    assert!(svg.contains("W / RTT = 65535 B window"));
    // The comparison's page: the sweep plot as an image of its file, a
    // link to each run's page.
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let image = format!(
        r#"<img class="plot" alt="sweep.svg" src="data:image/svg+xml;base64,{}">"#,
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &svg)
    );
    assert!(
        page.contains(&image),
        "the sweep plot as an image of its file"
    );
    assert!(
        page.contains(r#"href="link-delay40ms-r1/report.html""#),
        "a link to the run's page"
    );
}

#[test]
fn sweeps_make_a_grid_labelled_by_what_changes() {
    let out = support::temp_dir("sweep-grid");
    let run = h2probe()
        .args([
            "compare",
            "--quiet",
            "--repeats",
            "1",
            "--duration",
            "300ms",
            "--service-time",
            "1ms",
            "--sweep",
            "streams=1,2",
            "--sweep",
            "conn-window=65535,1MiB",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("comparison.json")).unwrap()).unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["config"].as_str().unwrap()).collect();
    assert_eq!(
        labels,
        [
            "streams=1 conn-window=65535",
            "streams=1 conn-window=1MiB",
            "streams=2 conn-window=65535",
            "streams=2 conn-window=1MiB",
        ]
    );
    let s = support::read_summary(&out.join("streams2-conn-window1MiB-r1"));
    assert_eq!(s.streams.len(), 2, "the run had two streams");
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    assert!(
        svg.contains("conn-window=1MiB (median"),
        "one line per other value"
    );

    // The same runs compared as saved directories: four groups (never
    // pooled), labelled by what differs, what they share said once.
    let again = support::temp_dir("sweep-grid-again");
    let dirs: Vec<std::path::PathBuf> = [
        "streams1-conn-window65535-r1",
        "streams1-conn-window1MiB-r1",
        "streams2-conn-window65535-r1",
        "streams2-conn-window1MiB-r1",
    ]
    .iter()
    .map(|d| out.join(d))
    .collect();
    let cmp = h2probe()
        .arg("compare")
        .args(&dirs)
        .arg("--out")
        .arg(&again)
        .output()
        .unwrap();
    assert!(
        cmp.status.success(),
        "{}",
        String::from_utf8_lossy(&cmp.stderr)
    );
    let table = String::from_utf8_lossy(&cmp.stdout);
    // The settings every run shares come first, wrapped to 80 columns.
    let first = table.split("\n\n").next().unwrap();
    assert!(
        first.starts_with("every run: release=frame queue=unbounded")
            && first.contains("duration=300ms")
            && first.lines().all(|l| l.chars().count() <= 80),
        "{table}"
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(again.join("comparison.json")).unwrap()).unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["config"].as_str().unwrap()).collect();
    assert_eq!(labels.len(), 4, "{labels:?}");
    assert!(labels.iter().all(|l| !l.contains("release=")), "{labels:?}");
    assert!(
        labels.contains(&"conn-window=1048576 streams=2"),
        "{labels:?}"
    );
}

/// An incomplete run (interrupted here) is in the figures and said beside
/// its configuration's name, and `compare` exits as the README's table says
/// (the worst of its runs': here 4, the interrupted RPC's CANCELLED). It
/// exited 0 and the table read like a full run's.
#[test]
fn compare_marks_an_incomplete_run_and_exits_by_its_runs() {
    let dir = support::temp_dir("compare-incomplete");
    let whole = dir.join("whole");
    support::h2probe_ok([
        "run",
        "--duration",
        "300ms",
        "--quiet",
        "--no-pcap",
        "--out",
        whole.to_str().unwrap(),
    ]);
    let cut = dir.join("cut");
    support::run_interrupted(
        &[
            "run",
            "--duration",
            "20s",
            "--quiet",
            "--no-pcap",
            "--rate",
            "200",
        ],
        &cut,
        "decode",
        30,
    );
    let out = h2probe()
        .arg("compare")
        .arg(&whole)
        .arg(&cut)
        .args(["--quiet", "--out"])
        .arg(dir.join("cmp"))
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{table}");
    let unfolded = table.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(unfolded.contains("(incomplete: 1 of 1)"), "{table}");
    assert_eq!(unfolded.matches("incomplete:").count(), 1, "{table}");
    let md = std::fs::read_to_string(dir.join("cmp/comparison.md")).unwrap();
    assert!(md.contains("(incomplete: 1 of 1) |"), "{md}");
    // One run given twice, or with a copy, is not two repeats (it showed
    // "runs 3" for one run given three times).
    let copy = dir.join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    for f in ["trace.jsonl", "meta.json"] {
        std::fs::copy(whole.join(f), copy.join(f)).unwrap();
    }
    for again in [whole.join("."), copy] {
        let out = h2probe()
            .arg("compare")
            .arg(&whole)
            .arg(&again)
            .args(["--quiet", "--out"])
            .arg(dir.join("cmp-twice"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("are one run"), "{err}");
    }
}

/// A matrix's repeats, compared again from their directories, are one
/// configuration: repeat N runs with seed N (which pairs Part 3's
/// repeats), and the seed put each repeat in a group of its own.
#[test]
fn a_matrixs_repeats_compared_from_their_directories_are_one_group() {
    let dir = support::temp_dir("compare-repeats");
    let matrix = dir.join("m");
    support::h2probe_ok([
        "compare",
        "--release",
        "frame",
        "--queue",
        "direct",
        "--repeats",
        "2",
        "--duration",
        "300ms",
        "--quiet",
        "--out",
        matrix.to_str().unwrap(),
    ]);
    let again = dir.join("again");
    support::h2probe_ok([
        "compare",
        matrix.join("frame-direct-r1").to_str().unwrap(),
        matrix.join("frame-direct-r2").to_str().unwrap(),
        "--quiet",
        "--out",
        again.to_str().unwrap(),
    ]);
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(again.join("comparison.json")).unwrap())
            .unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["runs"], 2);
    assert!(!rows[0]["config"].as_str().unwrap().contains("seed"));
}

/// A swept --queue-limit crossed with --queue caps the unbounded queue and
/// leaves the direct one alone; a single run with both is refused (the
/// limit would do nothing), and that refusal refused the whole matrix.
#[test]
fn a_swept_queue_limit_beside_a_direct_queue_runs() {
    let out = support::temp_dir("sweep-queue-limit");
    let run = h2probe()
        .args([
            "compare",
            "--quiet",
            "--repeats",
            "1",
            "--duration",
            "300ms",
            "--release",
            "frame",
            "--queue",
            "direct,unbounded",
            "--sweep",
            "queue-limit=100",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(out.join("comparison.json")).unwrap()).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
}
