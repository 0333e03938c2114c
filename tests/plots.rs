//! The plots of a run as a person sees them: legends beside the data (not
//! over it), lines hidden under others named, the advertised window and the
//! end of the offered period marked, one credit line per stream, bytes per
//! stream stacked, counts with integer ticks, one-sided traces saying what
//! they lack; and a screenshot (headless Chromium) kept as an artefact.

mod support;

use std::path::{Path, PathBuf};

/// Width of the data area: everything right of it is the legend strip.
const DATA_RIGHT: f64 = 1100.0 - 270.0;

use support::svg_texts as texts;

/// The x coordinates of every polyline drawn in a series colour (not the
/// grey axes, grid and marks, nor the legend's 4-px swatches).
fn series_xs(svg: &str) -> Vec<f64> {
    svg.split("<polyline ")
        .skip(1)
        .filter(|p| {
            let stroke = p
                .split("stroke=\"")
                .nth(1)
                .and_then(|s| s.split('"').next());
            !matches!(stroke, Some("#000000") | Some("#5A5A5A") | None)
                && !p.contains("stroke-width=\"4\"")
                && !p.contains("opacity=\"0.1\"")
                && !p.contains("opacity=\"0.2\"")
        })
        .flat_map(|p| {
            let pts = p
                .split("points=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap();
            pts.split_whitespace()
                .filter_map(|xy| xy.split(',').next()?.parse().ok())
                .collect::<Vec<f64>>()
        })
        .collect()
}

fn legend(svg: &str) -> String {
    texts(svg)
        .into_iter()
        .filter(|(x, _)| *x >= DATA_RIGHT)
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `frame`/`unbounded` run of `streams` streams for `duration` at
/// `service` per message, without pcaps, set further by `more`.
fn streams_run(
    name: &str,
    streams: u32,
    duration: &str,
    service: &str,
    more: impl FnOnce(&mut h2probe::commands::run::RunOpts),
) -> PathBuf {
    let dir = support::temp_dir(name);
    let mut o = support::run_opts(&dir, "frame", "unbounded");
    o.client.duration = support::dur(duration);
    o.client.streams = streams;
    o.server.service_time = support::dur(service);
    o.output.no_pcap = true;
    more(&mut o);
    support::run(o);
    dir
}

fn two_stream_run() -> PathBuf {
    streams_run("plots", 2, "800ms", "2ms", |_| {})
}

#[test]
fn a_runs_plots_keep_legends_beside_the_data_and_say_what_they_show() {
    let dir = two_stream_run();
    let credit = std::fs::read_to_string(dir.join("credit.svg")).unwrap();
    let l = legend(&credit);
    // One credit line per stream, the connection's, the marks.
    for want in [
        "stream 1 credit (client tap)",
        "stream 3 credit (client tap)",
        "connection credit (client tap)",
        "advertised stream window (65535 B,",
        "end of the offered period",
    ] {
        assert!(l.contains(want), "legend lacks {want:?}: {l}");
    }
    // Legends sit right of the data; no series is drawn there.
    let xs = series_xs(&credit);
    assert!(!xs.is_empty());
    assert!(
        xs.iter().all(|x| *x < DATA_RIGHT - 10.0),
        "a series is drawn in the legend strip"
    );
    let swatches = credit.matches("stroke-width=\"4\"").count();
    assert!(swatches >= 4, "legend swatches: {swatches}");

    // (Whether scheduled is hidden under sent depends on how far the client
    // lagged; the note itself is tested on fixed lines in plots.rs.)
    let cum = std::fs::read_to_string(dir.join("cumulative.svg")).unwrap();
    let l = legend(&cum);
    assert!(l.contains("discarded (server): none in this trace"), "{l}");
    // Counts: integer ticks only.
    let ticks: Vec<String> = texts(&cum)
        .into_iter()
        .filter(|(x, t)| *x < 90.0 && t.parse::<f64>().is_ok())
        .map(|(_, t)| t)
        .collect();
    assert!(ticks.len() >= 3, "{ticks:?}");
    assert!(ticks.iter().all(|t| !t.contains('.')), "{ticks:?}");

    // Bytes per stream, stacked, each stream named with its share.
    let streams = std::fs::read_to_string(dir.join("streams.svg")).unwrap();
    let l = legend(&streams);
    // The server's connection id: client and server of one `run` number
    // their connections from one counter, whichever side gets there first.
    assert!(
        (1..=2).any(|c| l.contains(&format!("stream 1 (conn {c})"))
            && l.contains(&format!("stream 3 (conn {c})"))),
        "{l}"
    );
    screenshot(&dir.join("credit.svg"), "credit-two-streams.png");
}

/// Many streams (300 unary calls): the stacked bytes reach every stream's
/// bytes, the streams past the tracked ones in the "other" layer, counted
/// there (the plot stopped at the 64 streams with series of their own:
/// "56 other streams" and 1 MiB of 4.7).
#[test]
fn the_streams_plot_stacks_every_streams_bytes() {
    let dir = support::temp_dir("plots-many");
    let out = dir.join("run");
    support::h2probe_ok([
        "run",
        "--rpc",
        "unary",
        "--streams",
        "8",
        "--duration",
        "1s",
        "--no-pcap",
        "--out",
        out.to_str().unwrap(),
    ]);
    let s = support::read_summary(&out);
    assert!(s.sent > 200, "{}", s.sent);
    let svg = std::fs::read_to_string(out.join("streams.svg")).unwrap();
    let l = legend(&svg);
    assert!(l.contains(&format!("{} other streams", s.sent - 8)), "{l}");
    // The y axis (MiB) reaches the messages' bytes (300: ≈ 4.7 MiB).
    let top = texts(&svg)
        .into_iter()
        .filter(|(x, _)| *x < 90.0)
        .filter_map(|(_, t)| t.parse::<f64>().ok())
        .fold(0.0, f64::max);
    let mib = s.sent as f64 * 16384.0 / 1048576.0;
    assert!(top >= 0.8 * mib && top <= 1.1 * mib, "top tick {top} MiB");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every `<text>` of the legend strip as (y, text).
fn legend_ys(svg: &str) -> Vec<(f64, String)> {
    svg.split("<text ")
        .skip(1)
        .filter_map(|t| {
            let x: f64 = t.split("x=\"").nth(1)?.split('"').next()?.parse().ok()?;
            let y: f64 = t.split("y=\"").nth(1)?.split('"').next()?.parse().ok()?;
            let body = t.split_once('>')?.1.split("</text>").next()?.trim();
            (x >= DATA_RIGHT).then(|| (y, body.to_string()))
        })
        .collect()
}

/// Eight streams and a 1 MiB connection window: twelve legend entries in
/// the credit panel. They are drawn apart, each within its panel (the last
/// four were drawn on top of one another, unreadable), and the connection
/// credit is among those named.
#[test]
fn a_legend_with_many_entries_stays_readable() {
    let dir = streams_run("plots-many", 8, "600ms", "1ms", |o| {
        o.server.conn_window = "1MiB".parse().unwrap();
    });
    let credit = std::fs::read_to_string(dir.join("credit.svg")).unwrap();
    let mut ys = legend_ys(&credit);
    assert!(ys.len() >= 10, "{ys:?}");
    ys.sort_by(|a, b| a.0.total_cmp(&b.0));
    for w in ys.windows(2) {
        assert!(
            w[1].0 - w[0].0 >= 11.0,
            "legend lines drawn over each other: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
    let l = legend(&credit);
    assert!(l.contains("connection credit (client tap)"), "{l}");
    assert!(l.contains("stream 15 credit (client tap)"), "{l}");
    screenshot(&dir.join("credit.svg"), "credit-eight-streams.png");
}

/// Eighty streams: more legend entries than the strip holds. What is left
/// out is some of the eight drawn streams' names, counted in one line; the
/// totals and both notes (streams not drawn, streams not tracked) stay
/// (the notes and the connection credit's name were the ones cut).
#[test]
fn an_overfull_legend_leaves_out_streams_before_totals_and_notes() {
    let dir = streams_run("plots-eighty", 80, "400ms", "1ms", |_| {});
    let credit = std::fs::read_to_string(dir.join("credit.svg")).unwrap();
    let l = legend(&credit);
    for kept in [
        "connection credit (client tap)",
        "received, not yet released (server)",
        "64 streams have credit series; the 8 with the most bytes are drawn (ties: lowest id first)",
        "16 later streams were not tracked (first 64 only)",
    ] {
        assert!(l.contains(kept), "{kept:?} missing from {l}");
    }
    let named = legend_ys(&credit)
        .iter()
        .filter(|(_, t)| t.starts_with("stream ") && t.contains(" credit"))
        .count();
    assert!((1..8).contains(&named), "{named} streams named: {l}");
    let cut = format!("… {} more entries not shown", 8 - named);
    assert!(l.contains(&cut), "{cut:?} missing from {l}");
    screenshot(&dir.join("credit.svg"), "credit-eighty-streams.png");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trace with one tap's events only (as `serve` or `client` alone
/// record), analysed by the binary.
fn one_sided(from: &Path, keep: &str) -> PathBuf {
    let dir = support::temp_dir(&format!("plots-{keep}-only"));
    std::fs::copy(from.join("meta.json"), dir.join("meta.json")).unwrap();
    let trace: String = std::fs::read_to_string(from.join("trace.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["ep"].is_null() || v["ep"] == keep
        })
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(dir.join("trace.jsonl"), trace).unwrap();
    let out = support::analyze(&dir);
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn one_sided_traces_draw_what_they_have_and_say_what_is_missing() {
    let run = two_stream_run();
    let server = one_sided(&run, "server");
    let credit = std::fs::read_to_string(server.join("credit.svg")).unwrap();
    let all: String = texts(&credit).into_iter().map(|t| t.1 + " ").collect();
    assert!(all.contains("no client tap in this trace"), "{all}");
    assert!(all.contains("received, not yet released (server)"), "{all}");
    assert!(
        !series_xs(&credit).is_empty(),
        "the server's lines are drawn"
    );

    let client = one_sided(&run, "client");
    let credit = std::fs::read_to_string(client.join("credit.svg")).unwrap();
    let all: String = texts(&credit).into_iter().map(|t| t.1 + " ").collect();
    assert!(
        all.contains("no server tap in this trace: owned bytes not recorded"),
        "{all}"
    );
    assert!(all.contains("stream 1 credit (client tap)"), "{all}");
    let blocked = std::fs::read_to_string(server.join("blocked.svg")).unwrap();
    assert!(blocked.contains("no client tap in this trace"));
    screenshot(&client.join("credit.svg"), "credit-client-only.png");
}

/// `compare`'s credit plot draws a panel per configuration on one scale,
/// each in its configuration's colour (its legend swatch in the other
/// plots): drawn over each other, their min–max bands hid each other (a
/// 32–64 KiB band covered the lines under it, one configuration unseen).
#[test]
fn compares_credit_plot_gives_each_configuration_a_panel_on_one_scale() {
    let out = support::temp_dir("plots-compare").join("c");
    let mut args = vec!["compare".to_string()];
    let runs = [
        "complete-unbounded",
        "frame-bounded32",
        "frame-direct",
        "frame-unbounded",
    ];
    for r in runs {
        args.push(format!(
            "{}/captures/reference/{r}",
            env!("CARGO_MANIFEST_DIR")
        ));
    }
    args.extend(["--quiet".into(), "--out".into(), out.display().to_string()]);
    support::h2probe_ok(&args);
    let svg = std::fs::read_to_string(out.join("compare-credit.svg")).unwrap();
    assert!(
        svg.starts_with(r#"<svg width="1100" height="1360""#),
        "4 panels of 340 px"
    );
    let titles: Vec<String> = texts(&svg)
        .into_iter()
        .map(|(_, t)| t)
        .filter(|t| t.ends_with(": stream credit seen by the client (first stream)"))
        .collect();
    let labels = [
        "release=complete queue=unbounded",
        "release=frame queue=bounded:32",
        "release=frame queue=direct",
        "release=frame queue=unbounded",
    ];
    assert_eq!(titles.len(), 4, "{titles:?}");
    for (title, label) in titles.iter().zip(labels) {
        assert!(title.starts_with(&format!("{label}:")), "{title}");
    }
    // Swatches in the palette's order, as in compare-queue.svg's legend.
    let swatches = |svg: &str| -> Vec<String> {
        svg.split("<polyline ")
            .filter(|p| p.contains(r#"stroke-width="4""#))
            .filter_map(|p| Some(p.split("stroke=\"").nth(1)?.split('"').next()?.to_string()))
            .collect()
    };
    let queue = std::fs::read_to_string(out.join("compare-queue.svg")).unwrap();
    assert_eq!(swatches(&svg), ["#1F77B4", "#D62728", "#2CA02C", "#FF7F0E"]);
    assert_eq!(swatches(&svg), swatches(&queue));
    // One scale: every panel's y ticks are the same (the first panel's
    // credit peaks near 48 KiB, the second's at 64).
    let ticks: Vec<String> = texts(&svg)
        .into_iter()
        .filter(|(x, t)| *x < 90.0 && t.parse::<f64>().is_ok())
        .map(|(_, t)| t)
        .collect();
    let per_panel: Vec<&[String]> = ticks.chunks(ticks.len() / 4).collect();
    assert_eq!(ticks.len() % 4, 0, "{ticks:?}");
    assert!(per_panel.iter().all(|p| *p == per_panel[0]), "{ticks:?}");
    assert!(per_panel[0].contains(&"60".to_string()), "{ticks:?}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("<b>compare-credit.svg</b> — one panel per configuration (its first repeat), on one scale"),
        "the page's caption"
    );
    screenshot(&out.join("compare-credit.svg"), "compare-credit.png");
}

/// Renders `svg` in headless Chromium and keeps the PNG under the test
/// target's tmp dir (a loud skip without Chromium, a failure under CI).
fn screenshot(svg: &Path, name: &str) {
    let Some(exe) = support::require_tool("chromium") else {
        return;
    };
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plots");
    std::fs::create_dir_all(&out).unwrap();
    let png = out.join(name);
    let _ = std::fs::remove_file(&png);
    let profile = support::temp_dir("plots-chromium").join("profile");
    support::chromium(
        &exe,
        &profile,
        svg,
        &[
            "--hide-scrollbars".into(),
            "--window-size=1100,1020".into(),
            format!("--screenshot={}", png.display()),
        ],
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000);
    eprintln!("plot screenshot: {}", png.display());
}
