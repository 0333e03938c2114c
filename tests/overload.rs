//! Part 3: overload policies at the admission boundary, over loopback.
//!
//! Each policy runs a few seconds of the Part 3 shape (80/s, 16 KiB, a
//! worker slowed from 10 to 40 ms and back), and the trace itself is read
//! here, independently of the analysis, to prove: every original ends in
//! exactly one terminal state; the admission bound is never exceeded; no
//! attempt starts after its deadline or after a refusal; WAIT never holds an
//! attempt past its deadline; REJECT never waits; DROP never runs the
//! worker; a retry keeps its original's id and deadline.

mod support;

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use support::{dur, run, temp_dir};

/// How late past its deadline an expiry may be stamped: the wait's timer
/// firing late on a loaded machine, not the design (which wakes at the
/// deadline itself).
const SLACK_NS: u64 = 150_000_000;

fn part3_opts(
    dir: &std::path::Path,
    when_full: &str,
    retry: &str,
) -> h2probe::commands::run::RunOpts {
    let mut o = support::run_opts(dir, "frame", "unbounded");
    o.preset = Some(h2probe::commands::run::Preset::Part3);
    o.apply_preset(|_| false);
    o.client.duration = dur("3s");
    o.client.original_deadline = dur("1s");
    o.server.service_schedule = Some("10ms,800ms:40ms,1800ms:10ms".parse().unwrap());
    o.server.when_full = clap::ValueEnum::from_str(when_full, false).unwrap();
    o.client.retry = retry.parse().unwrap();
    o.output.no_pcap = true;
    o
}

fn events(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["t"].is_u64())
        .collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// What the trace says, recomputed here.
#[derive(Debug, Default)]
struct Seen {
    originals: u64,
    ends: HashMap<String, u64>,
    decisions: HashMap<String, u64>,
    starts_of_refused: u64,
    starts_after_deadline: u64,
    max_in_use: u64,
    slots: u64,
    waited: u64,
    late_expiry: u64,
    retries: u64,
    retry_deadline_changed: u64,
    retry_after_deadline: u64,
}

fn replay(dir: &std::path::Path) -> Seen {
    let mut ev = events(dir);
    ev.sort_by_key(|e| u(e, "t"));
    let mut s = Seen::default();
    let mut deadline_of: HashMap<u64, u64> = HashMap::new();
    let mut ended: HashSet<u64> = HashSet::new();
    let mut admitted: HashMap<(u64, u64, u64), u64> = HashMap::new();
    let mut refused: HashSet<(u64, u64, u64)> = HashSet::new();
    let mut in_use = 0u64;
    for e in &ev {
        let t = u(e, "t");
        let key = |e: &Value| (u(e, "conn"), u(e, "stream"), u(e, "seq"));
        match e["type"].as_str().unwrap() {
            "original" => {
                s.originals += 1;
                assert!(deadline_of.insert(u(e, "id"), u(e, "deadline")).is_none());
            }
            "original_end" => {
                assert!(ended.insert(u(e, "id")), "original {} ended twice", e["id"]);
                *s.ends
                    .entry(e["state"].as_str().unwrap().into())
                    .or_default() += 1;
            }
            "attempt" if u(e, "attempt") > 1 => {
                s.retries += 1;
                let d = deadline_of[&u(e, "id")];
                s.retry_deadline_changed += u64::from(u(e, "deadline") != d);
                s.retry_after_deadline += u64::from(t >= d);
            }
            "admission" => {
                let d = e["decision"].as_str().unwrap().to_string();
                s.slots = u(e, "slots");
                s.waited += u64::from(u(e, "wait_ns") > 0);
                let deadline = u(e, "deadline");
                match d.as_str() {
                    "admitted" => {
                        admitted.insert(key(e), deadline);
                        in_use += 1;
                        s.max_in_use = s.max_in_use.max(in_use);
                    }
                    "expired" => {
                        s.late_expiry += u64::from(t > deadline + SLACK_NS);
                        refused.insert(key(e));
                    }
                    _ => {
                        refused.insert(key(e));
                    }
                }
                *s.decisions.entry(d).or_default() += 1;
            }
            "start" if e["ep"] == "server" => {
                s.starts_of_refused += u64::from(refused.contains(&key(e)));
                if let Some(d) = admitted.get(&key(e)) {
                    s.starts_after_deadline += u64::from(t >= *d);
                }
            }
            "complete" | "discard" if e["ep"] == "server" && admitted.remove(&key(e)).is_some() => {
                in_use -= 1;
            }
            _ => {}
        }
    }
    assert_eq!(
        ended.len() as u64,
        s.originals,
        "every original ends exactly once: {s:?}"
    );
    s
}

/// What holds under every policy.
fn common(r: &h2probe::commands::run::RunResult, s: &Seen) {
    support::assert_checks(r);
    let ov = r
        .summary
        .overload
        .as_ref()
        .expect("an Exchange run has overload figures");
    assert_eq!(s.originals, 240, "80/s for 3 s");
    assert_eq!(ov.originals, s.originals);
    assert_eq!(ov.on_time, s.ends.get("on_time").copied().unwrap_or(0));
    assert_eq!(
        r.summary.checks["originals"].ok,
        Some(true),
        "{}",
        r.summary.checks["originals"].detail
    );
    assert_eq!(
        r.summary.checks["admission"].ok,
        Some(true),
        "{}",
        r.summary.checks["admission"].detail
    );
    assert!(s.max_in_use <= s.slots && s.slots == 32, "{s:?}");
    assert_eq!(s.max_in_use, 32, "the slowdown fills the boundary: {s:?}");
    assert_eq!(s.starts_of_refused, 0, "{s:?}");
    assert_eq!(
        s.starts_after_deadline, 0,
        "expired work is never started: {s:?}"
    );
    assert_eq!(s.retry_deadline_changed, 0, "{s:?}");
    assert_eq!(s.retry_after_deadline, 0, "{s:?}");
    // meta.json records the method called (it said Ingest).
    let meta = h2probe_analysis::meta::Meta::read(&r.dir).unwrap();
    assert_eq!(
        meta.config.client.unwrap()["path"],
        "/h2probe.v1.Probe/Exchange"
    );
}

#[test]
fn wait_holds_attempts_for_a_slot_but_never_past_their_deadline() {
    let dir = temp_dir("p3-wait");
    let r = run(part3_opts(&dir, "wait", "none"));
    let s = replay(&dir);
    common(&r, &s);
    assert!(s.waited > 0, "some attempts waited for a slot: {s:?}");
    assert_eq!(s.late_expiry, 0, "{s:?}");
    assert!(!s.decisions.contains_key("rejected") && !s.decisions.contains_key("dropped"));
    a_late_event_moves_no_part3_figure(&dir, &r.summary);
}

/// A `send` and a DATA frame naming a client connection 200 s after its
/// close (an edited trace) are counted in `events_after_conn_retirement`
/// and move no figure: Part 3's counted them (`overload.sent` one more than
/// was sent, failing `originals`), and the span ran to them. The checks
/// cannot be judged.
fn a_late_event_moves_no_part3_figure(
    dir: &std::path::Path,
    before: &h2probe_analysis::analyze::Summary,
) {
    let text = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let close = lines
        .iter()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "conn_close" && v["ep"] == "client")
        .expect("a client connection closed");
    let (t, conn) = (u(&close, "t") + 200_000_000_000, u(&close, "conn"));
    let send = format!(
        r#"{{"t":{t},"ep":"client","conn":{conn},"stream":1,"type":"send","seq":99999,"scheduled":{t},"begin":{t},"bytes":1000}}"#
    );
    let data = format!(
        r#"{{"t":{},"ep":"client","conn":{conn},"stream":1,"type":"frame","dir":"out","offset":999999,"frame":"DATA","flags":0,"len":1000}}"#,
        t + 1
    );
    let footer = lines.pop().unwrap();
    let mut footer: Value = serde_json::from_str(&footer).unwrap();
    footer["events"] = (u(&footer, "events") + 2).into();
    lines.extend([send, data, footer.to_string()]);
    let edited = temp_dir("p3-late");
    std::fs::write(edited.join("trace.jsonl"), lines.join("\n") + "\n").unwrap();
    std::fs::copy(dir.join("meta.json"), edited.join("meta.json")).unwrap();
    let (after, _) = h2probe_analysis::report::write_products(&edited).unwrap();
    assert_eq!(after.events_after_conn_retirement, 2);
    let (a, b) = (
        after.overload.as_ref().unwrap(),
        before.overload.as_ref().unwrap(),
    );
    assert_eq!((a.sent, a.c2s_data_bytes), (b.sent, b.c2s_data_bytes));
    assert_eq!(after.span_s, before.span_s);
    // Added or moved (an edited `t`), the trace cannot tell: no check of
    // its events can be judged (a moved event is missing where it was).
    for (name, c) in &after.checks {
        if name != "no_dropped_events" {
            assert_eq!(c.ok, None, "{name}: {}", c.detail);
        }
    }
    assert!(
        after.checks["accounting"]
            .detail
            .contains("2 events named a connection after its retirement"),
        "{}",
        after.checks["accounting"].detail
    );
    std::fs::remove_dir_all(&edited).unwrap();
}

#[test]
fn reject_answers_at_once_and_never_queues_beyond_the_boundary() {
    let dir = temp_dir("p3-reject");
    let r = run(part3_opts(&dir, "reject", "none"));
    let s = replay(&dir);
    common(&r, &s);
    assert_eq!(s.waited, 0, "REJECT never waits: {s:?}");
    assert!(
        s.decisions.get("rejected").copied().unwrap_or(0) > 0,
        "{s:?}"
    );
    assert_eq!(s.retries, 0);
    assert_eq!(
        s.ends.get("rejected").copied(),
        s.decisions.get("rejected").copied(),
        "without retry, each rejection ends its original: {s:?}"
    );
}

#[test]
fn reject_with_retry_keeps_ids_and_deadlines() {
    let dir = temp_dir("p3-retry");
    let r = run(part3_opts(&dir, "reject", "fixed:100,200"));
    let s = replay(&dir);
    common(&r, &s);
    assert!(s.retries > 0, "{s:?}");
    let ov = r.summary.overload.as_ref().unwrap();
    assert_eq!(ov.retries, s.retries);
    assert_eq!(ov.attempts, ov.first_attempts + ov.retries);
    recount_collisions_lateness_and_rate(&dir, &r.summary);
    headline_and_page_show_part3(&dir, &r.summary);
}

/// What a person reads of a Part 3 run, in the terminal and in a browser:
/// Part 3's figures, and not Part 1's queue growth, which an admission
/// bound makes meaningless (the queue cannot outgrow its slots).
fn headline_and_page_show_part3(
    dir: &std::path::Path,
    summary: &h2probe_analysis::analyze::Summary,
) {
    let ov = summary.overload.as_ref().unwrap();
    let useful = format!("useful    U/N {}/{} = ", ov.on_time, ov.originals);
    let head = h2probe_analysis::report::headline(summary);
    assert!(head.contains(&useful), "{head}");
    assert!(!head.contains("queue growth"), "{head}");
    assert!(!head.lines().any(|l| l.starts_with("growth")), "{head}");
    assert!(head.lines().all(|l| l.chars().count() <= 80), "{head}");

    support::h2probe_ok([std::ffi::OsStr::new("report"), dir.as_os_str()]);
    let page = dir.join("report.html");
    let Some(exe) = support::require_tool("chromium") else {
        return;
    };
    let (dom, _) = support::chromium(
        &exe,
        &dir.join("chromium-profile"),
        &page,
        &["--dump-dom".into()],
    );
    let scope = format!(
        "M={} in the slowdown, [0.8, 1.8) s of the schedule",
        ov.collision.retries
    );
    for seen in [
        "useful (on time)".to_string(),
        format!("{:.1} %", 100.0 * ov.useful_fraction),
        format!("{} of {} originals", ov.on_time, ov.originals),
        format!(
            "{} originals at {:.1}/s · {} retries",
            ov.originals, ov.offered_rate, ov.retries
        ),
        "before / during / after (completed originals)".into(),
        scope,
        "attempts initiated".into(),
    ] {
        assert!(dom.contains(&seen), "{seen:?} not on the page");
    }
    assert!(
        !dom.contains("queue growth"),
        "Part 1's growth card on a Part 3 page"
    );
    assert!(
        !dom.contains("the queue grew by"),
        "Part 1's finding on a Part 3 page"
    );
    assert!(
        !dom.contains("the queue grows while credit flows"),
        "Part 1's words for the ladder's slice on a Part 3 page"
    );
}

/// The retry collision figure, recomputed from the trace: its window is the
/// recorded slowdown (`10ms,800ms:40ms,1800ms:10ms`: the `service_change`
/// events of steps 1 and 2), cut in 20 ms bins from its start. Each attempt's `send` is scheduled
/// when the attempt was initiated (its lateness is its wait for the
/// sender), and the originals' rate is (N − 1) over their span.
fn recount_collisions_lateness_and_rate(
    dir: &std::path::Path,
    summary: &h2probe_analysis::analyze::Summary,
) {
    let ev = events(dir);
    let of_type = |ty: &'static str| ev.iter().filter(move |e| e["type"] == ty);
    let originals: Vec<u64> = of_type("original").map(|e| u(e, "t")).collect();
    let t0 = *originals.iter().min().unwrap();
    let last = *originals.iter().max().unwrap();
    let step = |n: u64| {
        of_type("service_change")
            .find(|e| u(e, "step") == n)
            .map(|e| u(e, "t"))
            .unwrap()
    };
    let (from, to) = (step(1), step(2));
    assert_eq!((from - step(0), to - step(0)), (800_000_000, 1_800_000_000));
    let mut bins: HashMap<u64, u64> = HashMap::new();
    for e in of_type("attempt").filter(|e| u(e, "attempt") > 1) {
        let t = u(e, "t");
        if t >= from && t < to {
            *bins.entry((t - from) / 20_000_000).or_default() += 1;
        }
    }
    let m: u64 = bins.values().sum();
    let pairs: u64 = bins.values().map(|c| c * c.saturating_sub(1) / 2).sum();
    let c = &summary.overload.as_ref().unwrap().collision;
    assert_eq!(c.window, "slowdown", "{c:?}");
    assert_eq!((c.from_ns, c.to_ns), (from - t0, to - t0), "{c:?}");
    assert_eq!((c.schedule_from_s, c.schedule_to_s), (Some(0.8), Some(1.8)));
    assert!(m >= 2, "retries in the slowdown: {m}");
    assert_eq!((c.retries, c.colliding_pairs), (m, pairs), "{c:?}");
    assert_eq!(c.fraction, Some(pairs as f64 / (m * (m - 1) / 2) as f64));
    let rate = (originals.len() - 1) as f64 / ((last - t0) as f64 / 1e9);
    let ov = summary.overload.as_ref().unwrap();
    assert!(
        (ov.offered_rate - rate).abs() < 1e-9,
        "{} vs {rate}",
        ov.offered_rate
    );
    // Every send's scheduled time is its attempt's initiation.
    let initiated: HashMap<(u64, u64, u64), u64> = of_type("attempt")
        .map(|e| ((u(e, "conn"), u(e, "stream"), u(e, "seq")), u(e, "t")))
        .collect();
    let sends: Vec<&Value> = of_type("send").collect();
    assert_eq!(sends.len(), initiated.len());
    for e in sends {
        let key = (u(e, "conn"), u(e, "stream"), u(e, "seq"));
        assert_eq!(u(e, "scheduled"), initiated[&key], "{e}");
        assert!(u(e, "begin") >= u(e, "scheduled"), "{e}");
    }
}

#[test]
fn drop_discards_and_answers_and_never_runs_the_worker() {
    let dir = temp_dir("p3-drop");
    let r = run(part3_opts(&dir, "drop", "none"));
    let s = replay(&dir);
    common(&r, &s);
    assert!(
        s.decisions.get("dropped").copied().unwrap_or(0) > 0,
        "{s:?}"
    );
    assert_eq!(s.waited, 0, "{s:?}");
    assert_eq!(s.ends.get("dropped"), s.decisions.get("dropped"), "{s:?}");
}

#[test]
fn an_interrupted_exchange_run_still_ends_every_original_once() {
    let dir = temp_dir("p3-sigint");
    let args = [
        "run",
        "--preset",
        "part3",
        "--when-full",
        "wait",
        "--quiet",
        "--no-pcap",
    ];
    support::run_interrupted(&args, &dir, "original_end", 50);
    let s = replay(&dir);
    assert!(s.originals > 50 && s.originals < 2880, "{s:?}");
    let summary = support::read_summary(&dir);
    assert_eq!(
        summary.checks["originals"].ok,
        Some(true),
        "{}",
        summary.checks["originals"].detail
    );
    assert_eq!(
        summary.checks["admission"].ok,
        Some(true),
        "{}",
        summary.checks["admission"].detail
    );
}

/// `compare --scenario part3`, shortened to 3 s runs with their own
/// slowdown (2 s deadlines, the article's): all four policies run, the
/// table carries the article's figures beside ours, and the plots are
/// written.
#[test]
fn a_short_part3_comparison_runs_all_four_policies() {
    let dir = temp_dir("p3-compare");
    let out = support::h2probe_ok([
        "compare",
        "--scenario",
        "part3",
        "--duration",
        "3s",
        "--service-schedule",
        "10ms,1s:40ms,2s:10ms",
        "--repeats",
        "1",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let table = String::from_utf8_lossy(&out.stdout);
    let md = std::fs::read_to_string(dir.join("comparison.md")).unwrap();
    for policy in ["WAIT", "REJECT", "RETRY", "DROP"] {
        let row = md
            .lines()
            .find(|l| l.starts_with(&format!("| {policy} | 240 |")))
            .unwrap_or_else(|| panic!("no {policy} row with N = 240:\n{md}"));
        assert!(row.ends_with("| hold |"), "{row}");
    }
    // The terminal shows the same tables turned to fit 80 columns: a
    // column per policy, the checks holding for all four.
    support::assert_fits_80(&table);
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line:\n{table}"))
    };
    assert!(
        ["WAIT", "REJECT", "RETRY", "DROP"]
            .iter()
            .all(|p| line("config").contains(p)),
        "{table}"
    );
    // Four policies and RETRY-HOLD: N = 240 and the checks hold for each.
    assert_eq!(line("N ").matches("240").count(), 5, "{table}");
    assert_eq!(line("checks").matches("hold").count(), 5, "{table}");
    for article in ["76.042", "76.167", "77.576", "76.014", "+40.6", "+91.2"] {
        assert!(
            table.contains(article),
            "article figure {article} missing:\n{table}"
        );
    }
    // Each plot titled, its axes named, a line per configuration named
    // in its legend.
    let texts = |svg: &str| -> Vec<String> {
        let svg = std::fs::read_to_string(dir.join(svg)).unwrap();
        support::svg_texts(&svg)
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    };
    let policies = ["WAIT", "REJECT", "RETRY", "DROP", "RETRY-HOLD"];
    for (svg, titles, y_labels, named) in [
        (
            "part3-owned.svg",
            &["Server-owned payload (admitted attempts, queued or in service; first run of each, highest per point)"][..],
            &["MiB"][..],
            &policies[..],
        ),
        (
            "part3-client.svg",
            &[
                "Client pending originals (all clients; first run of each, highest per point)",
                "Client outstanding attempts (all clients; first run of each, highest per point)",
            ],
            &["originals", "attempts"],
            &policies,
        ),
        (
            "part3-collisions.svg",
            &["Retries per 20 ms bin of the slowdown, [1, 2) s of the schedule (mean number of bins per run)"],
            &["bins", "retries initiated in the bin"],
            &["RETRY", "RETRY-HOLD"],
        ),
    ] {
        let t = texts(svg);
        for want in titles.iter().chain(y_labels).chain(named) {
            // A line named with a note after it ("REJECT — under …").
            assert!(
                t.iter()
                    .any(|x| x == want || x.starts_with(&format!("{want} — "))),
                "{svg}: no {want:?} in {t:?}"
            );
        }
    }
    // Every configuration in the collisions' legend, in the order (and so
    // the colours) of the other plots: those without retries say so.
    let legend: Vec<String> = texts("part3-collisions.svg")
        .into_iter()
        .filter(|t| policies.iter().any(|p| t.starts_with(p)))
        .collect();
    assert_eq!(
        legend,
        [
            "WAIT: no retry in the window",
            "REJECT: no retry in the window",
            "RETRY",
            "DROP: no retry in the window",
            "RETRY-HOLD"
        ],
        "{legend:?}"
    );
    // Retries come whole: no "0.5" on the collisions' axes.
    let ticks: Vec<f64> = texts("part3-collisions.svg")
        .iter()
        .filter_map(|t| t.parse().ok())
        .collect();
    assert!(ticks.iter().all(|v| v.fract() == 0.0), "{ticks:?}");
    assert!(dir.join("comparison.md").exists());
    // The same figures as data: one row per configuration, N = 240.
    let rows: Vec<h2probe_analysis::part3::Part3Row> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("part3.json")).unwrap()).unwrap();
    let configs: Vec<&str> = rows.iter().map(|r| r.config.as_str()).collect();
    assert_eq!(configs, ["WAIT", "REJECT", "RETRY", "DROP", "RETRY-HOLD"]);
    for r in &rows {
        let n = &r.figures["originals"];
        assert_eq!(
            (r.runs, n.n, n.mean, n.min, n.max),
            (1, 1, 240.0, 240.0, 240.0)
        );
    }
    // Each bar named under it.
    let bars = std::fs::read_to_string(dir.join("part3-outcomes.svg")).unwrap();
    for policy in ["WAIT", "REJECT", "RETRY", "DROP", "RETRY-HOLD"] {
        assert!(
            bars.contains(&format!("\n{policy}\n</text>")),
            "{policy} unnamed"
        );
    }
    // The page shows the same tables and plots, above Part 1's (it had
    // Part 1's table alone, whose counts are attempts).
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for seen in [
        "<h2>Overload policies (Part 3)</h2>",
        "<h3>RETRY − REJECT, paired by repeat (1 pair)</h3>",
        "<th class=\"num\">on time % (U/N)</th>",
        "<b>part3-outcomes.svg</b>",
        "<h2>Part 1's figures (median over repeats; every attempt a message)</h2>",
    ] {
        assert!(page.contains(seen), "{seen:?} not in report.html");
    }
    assert!(
        page.find("<h2>Overload policies") < page.find("<h2>Part 1's figures"),
        "Part 3 first"
    );
    // Its plots with its tables, above Part 1's table (they came after
    // every compare-*.svg, far below it), and once.
    for plot in [
        "part3-outcomes.svg",
        "part3-owned.svg",
        "part3-collisions.svg",
    ] {
        let at = format!("<b>{plot}</b>");
        assert_eq!(page.matches(&at).count(), 1, "{plot}");
        assert!(
            page.find(&at) < page.find("<h2>Part 1's figures"),
            "{plot} below Part 1's table"
        );
    }
}

/// compare's --rate and --payload apply to the Part 3 scenarios (the
/// preset replaced them: 80/s and 16 KiB whatever was asked), and its
/// --service-time, which the schedule replaces, is refused.
#[test]
fn a_part3_comparison_keeps_the_rate_and_payload_given() {
    let dir = temp_dir("p3-rate");
    support::h2probe_ok([
        "compare",
        "--scenario",
        "part3-clients",
        "--rate",
        "40",
        "--payload",
        "1KiB",
        "--duration",
        "1s",
        "--repeats",
        "1",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let mut runs = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let Ok(meta) = h2probe_analysis::meta::Meta::read(&e.path()) else {
            continue;
        };
        let client = meta.config.client.unwrap();
        assert_eq!(
            (client["rate"].as_f64(), client["payload"].as_u64()),
            (Some(40.0), Some(1024))
        );
        runs += 1;
    }
    assert_eq!(runs, 2, "fixed and jitter");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["compare", "--scenario", "part3", "--service-time", "1ms"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--service-time does not apply"));
}

/// `compare DIR…` of Part 3 runs: runs a policy name would pool are told
/// apart by what differs (two RETRY runs with other backoffs went into one
/// column, averaged), and a run that did not end complete is said beside
/// its name, as Part 1's comparison says it (it was not).
#[test]
fn comparing_part3_runs_keeps_different_configurations_apart() {
    let base = temp_dir("p3-compare-dirs");
    let run = |name: &str, retry: &str| {
        let dir = base.join(name);
        support::h2probe_ok([
            "run",
            "--preset",
            "part3",
            "--duration",
            "1s",
            "--service-schedule",
            "10ms",
            "--when-full",
            "reject",
            "--retry",
            retry,
            "--no-pcap",
            "--quiet",
            "--out",
            dir.to_str().unwrap(),
        ]);
        dir
    };
    let (fixed, jitter) = (run("fixed", "fixed:100"), run("jitter", "jitter:100"));
    let cmp = base.join("cmp");
    let out = support::h2probe_ok([
        "compare",
        fixed.to_str().unwrap(),
        jitter.to_str().unwrap(),
        "--quiet",
        "--out",
        cmp.to_str().unwrap(),
    ]);
    let md = std::fs::read_to_string(cmp.join("comparison.md")).unwrap();
    for retry in ["retry=fixed:100", "retry=jitter:100"] {
        assert!(
            md.lines()
                .any(|l| l.starts_with(&format!("| RETRY {retry} | 80 |"))),
            "no row of its own for {retry}:\n{md}"
        );
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains("retry=jitter:100"));
    // A run stopped before its end (as Ctrl-C leaves it in meta.json).
    let meta = fixed.join("meta.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    assert_eq!(m["status"], "complete");
    m["status"] = "interrupted".into();
    std::fs::write(&meta, serde_json::to_string_pretty(&m).unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
        .args(["compare", "--quiet", "--force", "--out"])
        .arg(&cmp)
        .args([&fixed, &jitter])
        .output()
        .unwrap();
    let md = std::fs::read_to_string(cmp.join("comparison.md")).unwrap();
    assert!(
        md.contains("| RETRY retry=fixed:100 (incomplete: 1 of 1) | 80 |"),
        "{md}"
    );
    assert!(!md.contains("retry=jitter:100 (incomplete"), "{md}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(incomplete:"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `compare --scenario part3-clients`, shortened: eight clients with their
/// own budgets share one server.
#[test]
fn a_short_eight_client_comparison_runs_fixed_and_jitter() {
    let dir = temp_dir("p3-clients");
    support::h2probe_ok([
        "compare",
        "--scenario",
        "part3-clients",
        "--duration",
        "2s",
        "--service-schedule",
        "10ms,500ms:40ms,1500ms:10ms",
        "--repeats",
        "1",
        "--quiet",
        "--out",
        dir.to_str().unwrap(),
    ]);
    // The collision figures are taken over the shortened slowdown, and
    // the tables say which window that was.
    let md = std::fs::read_to_string(dir.join("comparison.md")).unwrap();
    assert!(
        md.contains("| retries M in the slowdown, [0.5, 1.5) s of the schedule, fixed |"),
        "{md}"
    );
    for run in ["fixed-r1", "jitter-r1"] {
        let s = support::read_summary(&dir.join(run));
        let ov = s.overload.as_ref().unwrap();
        let c = &ov.collision;
        // The "during" phase, on the first original's clock as the phases.
        let during = ov.phases.iter().find(|p| p.phase == "during").unwrap();
        assert_eq!(c.window, "slowdown");
        assert_eq!((c.from_s, Some(c.to_s)), (during.from_s, during.to_s));
        assert_eq!((c.schedule_from_s, c.schedule_to_s), (Some(0.5), Some(1.5)));
        assert_eq!(ov.originals, 160, "80/s over 8 clients for 2 s");
        assert_eq!(s.rpc_status.get("OK"), Some(&8), "{:?}", s.rpc_status);
        assert!(ov.retries > 0, "{ov:?}");
        assert_eq!(
            s.checks["originals"].ok,
            Some(true),
            "{}",
            s.checks["originals"].detail
        );
        assert_eq!(
            s.checks["admission"].ok,
            Some(true),
            "{}",
            s.checks["admission"].detail
        );
    }
}

/// Part 3's knobs refuse what cannot run, before anything starts (exit 2).
#[test]
fn part3_values_that_cannot_work_are_refused() {
    // Run where the default run directory (captures/…) would land: a
    // refusal leaves nothing behind.
    let cwd = temp_dir("refused");
    let refused = |args: &[&str], says: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_h2probe"))
            .args(args)
            .current_dir(&cwd)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !cwd.join("captures").exists(),
            "{args:?} left a run directory: {:?}",
            std::fs::read_dir(cwd.join("captures"))
                .map(|d| d.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
        );
    };
    refused(&["run", "--retry", "sometimes"], "expected none, fixed:MS");
    refused(&["run", "--retry", "jitter:0"], "must be positive");
    refused(&["run", "--service-schedule", "10ms,5ms"], "FROM:DURATION");
    refused(
        &["run", "--service-schedule", "10ms,2s:40ms,1s:10ms"],
        "must increase",
    );
    refused(
        &["run", "--rpc", "exchange", "--stack", "hyper"],
        "--stack h2",
    );
    refused(
        &["run", "--rpc", "exchange", "--framing", "raw:1024"],
        "--framing grpc",
    );
    refused(
        &[
            "run",
            "--rpc",
            "exchange",
            "--duration",
            "100s",
            "--original-deadline",
            "30s",
        ],
        "must cover --duration",
    );
    // Ingest's knobs would be accepted and do nothing.
    for (flag, value) in [
        ("--queue", "bounded:4"),
        ("--queue-limit", "10"),
        ("--stall-stream", "1"),
        ("--drop-stream", "1"),
    ] {
        refused(
            &["run", "--rpc", "exchange", flag, value],
            &format!("{flag} applies to --rpc ingest"),
        );
    }
    refused(&["compare", "--deadline-ms", "500"], "part3");
    refused(
        &["run", "--stall-timeout", "1s", "--service-time", "2s"],
        "must exceed --service-time",
    );
    refused(
        &[
            "compare",
            "--sweep",
            "trace-buffer=0",
            "--duration",
            "200ms",
        ],
        "--trace-buffer must be between 1",
    );
    std::fs::remove_dir_all(&cwd).unwrap();
}

/// The release point applies to Exchange as to Ingest: with `--release
/// complete` an attempt's credit comes back when the worker finishes it (or
/// at once when it is refused), so the 65,535-byte window, not the 32
/// admission slots, bounds what the server owns: at most 3 whole 16 KiB
/// attempts, and the wait moves into the client's window-blocked time.
#[test]
fn exchange_honours_the_release_point() {
    let dir = temp_dir("p3-release");
    let mut o = part3_opts(&dir, "reject", "none");
    o.server.release = "complete".parse().unwrap();
    let r = run(o);
    let s = replay(&dir);
    support::assert_checks(&r);
    assert_eq!(s.originals, 240);
    assert!(s.max_in_use <= 3, "{s:?}");
    assert_eq!(s.starts_of_refused + s.starts_after_deadline, 0, "{s:?}");
    assert_eq!(r.summary.release_point.as_deref(), Some("complete"));
    assert!(r.summary.max_unreleased_bytes <= 65_535);
    assert!(
        r.summary.client_window_blocked_s > 0.5,
        "{}",
        r.summary.client_window_blocked_s
    );
    for c in ["originals", "admission", "credit", "bytes"] {
        assert_eq!(
            r.summary.checks[c].ok,
            Some(true),
            "{c}: {}",
            r.summary.checks[c].detail
        );
    }
}

/// WAIT is cancellable: a client that resets its stream while an attempt
/// waits for a slot ends that wait at once; every attempt the server decoded
/// still ends exactly once, and the server goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_cancels_a_wait_for_a_slot() {
    use h2probe::grpc::pb::Attempt;
    let opts = h2probe::server::ServerOpts {
        service_time: "400ms".parse().unwrap(),
        admission: 1,
        when_full: h2probe::overload::WhenFull::Wait,
        ..Default::default()
    };
    let server = support::TestServer::start("p3-wait-reset", opts).await;
    let attempt = |id| {
        h2probe::grpc::encode(&Attempt {
            id,
            attempt: 1,
            scheduled_ns: 0,
            deadline_ns: 0,
            payload: vec![1u8; 1000].into(),
        })
    };
    let open = || async {
        let sock = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        let (send_req, conn) = h2::client::handshake(sock).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = http::Request::post(format!(
            "http://{}{}",
            server.addr,
            h2probe::grpc::EXCHANGE_PATH
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
        let mut send_req = send_req.ready().await.unwrap();
        send_req.send_request(req, false).unwrap()
    };
    // One attempt takes the only slot for 400 ms; the second waits (no
    // deadline); then the client gives up.
    let (_resp, mut send) = open().await;
    send.send_data(attempt(0), false).unwrap();
    send.send_data(attempt(1), false).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    send.send_reset(h2::Reason::CANCEL);
    // The server still serves: a new RPC's attempt completes.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (resp, mut send) = open().await;
    send.send_data(attempt(7), true).unwrap();
    let mut body = resp.await.unwrap().into_body();
    let mut got = vec![];
    while let Some(chunk) = body.data().await {
        got.extend_from_slice(&chunk.unwrap());
    }
    let out: h2probe::grpc::pb::Outcome = prost::Message::decode(&got[5..]).unwrap();
    assert_eq!(
        (out.id, out.result),
        (7, h2probe::grpc::pb::outcome::Result::Completed as i32)
    );
    let (s, _) = server.stop().await;
    assert_eq!(s.decoded, 3, "{s:#?}");
    assert_eq!(
        s.completed, 2,
        "the admitted one still finished, and the new one"
    );
    assert_eq!(
        s.discarded_by_reason.get("cancelled"),
        Some(&1),
        "{:?}",
        s.discarded_by_reason
    );
    assert_eq!(
        s.checks["admission"].ok,
        Some(true),
        "{}",
        s.checks["admission"].detail
    );
}

/// An Exchange whose client half-closed with attempts still queued and in
/// service, cut short by shutdown's --drain-timeout: the attempts left end
/// as `shutdown` discards before the RPC's end, and the RPC answers
/// UNAVAILABLE, which its client reads before the connection closes. It
/// answered OK with attempts unanswered and still owned, so
/// `release_point` called their credit forgotten (helper-75). (The races
/// of a worker's steps between the queue and service with the cut are not
/// provoked here: helper-78 showed them with delays injected into a build.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exchange_drain_cut_short_discards_its_attempts_and_is_not_ok() {
    use h2probe::grpc::{self, pb};
    use std::time::Duration;
    let opts = h2probe::server::ServerOpts {
        service_time: "800ms".parse().unwrap(),
        workers: 1,
        drain_timeout: dur("300ms"),
        release: h2probe::config::ReleaseSpec::uniform(h2probe::config::ReleasePoint::Complete),
        ..Default::default()
    };
    let server = support::TestServer::start("exchange-drain-cut", opts).await;
    // A peer that never reads holds the server through its second of
    // grace after the cut (≈ 600 ms to 1.6 s), so the trace is still open
    // when the worker wakes (800 ms) and finds its attempt taken: were it
    // to complete it too, the trace would show it.
    let mut silent = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(
        &mut silent,
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    )
    .await
    .unwrap();
    let sock = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (client, conn) = h2::client::handshake(sock).await.unwrap();
    let conn = tokio::spawn(conn);
    let mut client = client.ready().await.unwrap();
    let req = http::Request::post(format!("http://{}{}", server.addr, grpc::EXCHANGE_PATH))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(req, false).unwrap();
    // Three attempts and the half-close: one goes into service (800 ms),
    // two wait in the queue.
    let mut body = Vec::new();
    for id in 1..=3u64 {
        let a = pb::Attempt {
            id,
            attempt: 1,
            ..Default::default()
        };
        body.extend_from_slice(&grpc::encode(&a));
    }
    send.send_data(bytes::Bytes::from(body), true).unwrap();
    let response = response.await.unwrap();
    let mut outcomes = response.into_body();
    // Let the server decode all three before it is told to stop.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stopping = tokio::spawn(server.stop());
    // The drain is cut before the connection is closed: the client reads
    // the RPC's status, not a broken stream.
    let mut answered = 0;
    while let Some(d) = outcomes.data().await {
        answered += d.expect("the stream ends with trailers").len();
    }
    let trailers = outcomes.trailers().await.unwrap().expect("trailers");
    let (s, dir) = stopping.await.unwrap();
    conn.abort();
    assert_eq!(answered, 0, "no attempt was finished");
    assert_eq!(trailers["grpc-status"], "14", "{trailers:?}");
    let said = "3 attempts unanswered when --drain-timeout 300ms passed";
    let message = trailers["grpc-message"].to_str().unwrap();
    assert!(message.contains(said), "{message}");
    let evs = events(&dir);
    let end = evs
        .iter()
        .position(|e| e["type"] == "rpc_end" && e["ep"] == "server")
        .expect("rpc_end");
    assert_eq!(evs[end]["message"].as_str().unwrap(), message);
    assert_eq!(s.server_rpc_status.get("UNAVAILABLE"), Some(&1), "{s:#?}");
    assert_eq!(s.discarded_by_reason.get("shutdown"), Some(&3), "{s:#?}");
    assert_eq!(s.completed, 0, "{s:#?}");
    let release = &s.checks["release_point"];
    assert_ne!(release.ok, Some(false), "{release:?}");
    // Every event of the RPC lies before its end, none after.
    assert!(
        evs[end + 1..]
            .iter()
            .all(|e| e["ep"] != "server" || e["stream"] != 1 || e["type"] == "frame"),
        "{:?}",
        &evs[end + 1..]
    );
    // And the trace was still open when the worker woke.
    let t = |e: &Value| e["t"].as_u64().unwrap();
    let started = evs.iter().find(|e| e["type"] == "start").map(t).unwrap();
    let last = evs.iter().map(t).max().unwrap();
    assert!(last > started + 800_000_000, "{}", last - started);
}

/// Over a link slower than the deadline, every attempt arrives already
/// expired: the server answers EXPIRED at once, having held none of them,
/// and `admission` holds (it failed "held 382.7 ms past its deadline").
#[test]
fn attempts_arriving_past_their_deadline_were_held_for_none_of_it() {
    let dir = temp_dir("p3-late-arrival");
    support::h2probe_ok([
        "run",
        "--rpc",
        "exchange",
        "--original-deadline",
        "200ms",
        "--link-delay",
        "300ms",
        "--duration",
        "1s",
        "--rate",
        "20",
        "--quiet",
        "--no-pcap",
        "--out",
        dir.to_str().unwrap(),
    ]);
    let s = support::read_summary(&dir);
    let o = s.overload.as_ref().unwrap();
    assert!(o.expired > 0 && o.expired == o.decoded, "{o:?}");
    let c = &s.checks["admission"];
    assert_eq!(c.ok, Some(true), "{}", c.detail);
}
