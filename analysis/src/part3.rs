//! The Part 3 comparison: the four overload policies (or the eight-client
//! retry study) side by side with the article's published figures, from the
//! runs' `overload` summaries, plus its plots (outcome fractions per policy,
//! server-owned payload over time, the retry collision histogram).
//!
//! Runs are paired by repeat (the `-rN` suffix of their directory, which is
//! also their jitter seed), as the article paired its blocks.

use crate::analyze::overload::{Collision, Overload, COLLISION_BIN_NS};
use crate::compare::RunRef;
use crate::plots::{line_chart, Line, Panel, PlotError};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The article's primary single-client figures (five blocks, 2 s deadline):
/// on-time % of all scheduled originals per policy.
pub const ARTICLE_ON_TIME: [(&str, f64); 4] = [
    ("WAIT", 76.042),
    ("REJECT", 76.167),
    ("RETRY", 77.576),
    ("DROP", 76.014),
];

/// The configurations of `compare --scenario part3`, in table order.
pub const POLICIES: [&str; 5] = ["WAIT", "REJECT", "RETRY", "DROP", "RETRY-HOLD"];

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// `x` with `d` decimals, a negative one with a true minus sign (as the
/// article's figures beside ours), never "-0.000".
fn num(x: f64, d: usize) -> String {
    let x = crate::stats::rounded_zero(x, d);
    if x < 0.0 {
        format!("−{:.d$}", -x)
    } else {
        format!("{x:.d$}")
    }
}

/// The runs' `min–max` at `d` decimals, one value when both ends print
/// alike ("0.013–0.014" where a bound rounds up, never "0.013" for both),
/// and "to" between them when one is negative ("−18.704 to −12.236").
fn range(v: &[f64], d: usize) -> String {
    // A run that could not measure the figure (NaN) has no part in it.
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return "n/a".into();
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (a, b) = (num(lo, d), num(hi, d));
    if a == b {
        a
    } else if a.starts_with('−') {
        // Negative as printed ("−0.000" is never printed: `num`).
        format!("{a} to {b}")
    } else {
        format!("{a}–{b}")
    }
}

/// `mean (min–max)` of a figure over runs; the mean alone when every run
/// prints alike.
fn stat(v: &[f64], d: usize) -> String {
    stat_with(v, d, num)
}

/// [`stat`] of differences: a positive mean signed ("+5.0"), as the
/// article prints its differences beside ours.
fn diff_stat(v: &[f64], d: usize) -> String {
    stat_with(v, d, |x, d| match num(x, d) {
        n if x > 0.0 && n.chars().any(|c| ('1'..='9').contains(&c)) => format!("+{n}"),
        n => n,
    })
}

fn stat_with(v: &[f64], d: usize, show: impl Fn(f64, usize) -> String) -> String {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    match mean(&v) {
        None => "n/a".into(),
        Some(m) => {
            let r = range(&v, d);
            if r.contains(['–', ' ']) {
                format!("{} ({r})", show(m, d))
            } else {
                show(m, d)
            }
        }
    }
}

/// The repeat a run belongs to (its directory's `-rN` suffix).
pub fn repeat_of(run: &RunRef) -> Option<u32> {
    let name = run.dir.file_name()?.to_str()?;
    name.rsplit_once("-r")?.1.parse().ok()
}

/// Runs grouped by configuration, in first-seen order, with their overload figures.
fn groups(runs: &[RunRef]) -> Vec<(String, Vec<(&RunRef, &Overload)>)> {
    let mut out: Vec<(String, Vec<(&RunRef, &Overload)>)> = vec![];
    for r in runs {
        let Some(o) = &r.summary.overload else {
            continue;
        };
        match out.iter_mut().find(|(c, _)| *c == r.config) {
            Some((_, v)) => v.push((r, o)),
            None => out.push((r.config.clone(), vec![(r, o)])),
        }
    }
    // The article's order when the names are its policies.
    out.sort_by_key(|(c, _)| {
        POLICIES
            .iter()
            .position(|p| p == c)
            .unwrap_or(POLICIES.len())
    });
    out
}

/// A configuration's name in the tables, with how many of its runs did
/// not run to their end or whose trace is cut short (as Part 1's
/// comparison says it): `REJECT (incomplete: 1 of 3)`.
fn named(config: &str, v: &[(&RunRef, &Overload)]) -> String {
    let cut = v
        .iter()
        .filter(|(r, _)| crate::compare::incomplete(&r.summary))
        .count();
    if cut > 0 {
        format!("{config} (incomplete: {cut} of {})", v.len())
    } else {
        config.to_string()
    }
}

/// Seconds as the tables print them: "12", "2.5".
fn secs(x: f64) -> String {
    crate::stats::trimmed(x, 3)
}

/// The collision window in ns from the first original (summaries written
/// before it was recorded in ns: from its seconds).
fn window_ns(c: &Collision) -> (u64, u64) {
    if c.to_ns > 0 {
        (c.from_ns, c.to_ns)
    } else {
        (
            (c.from_s * 1e9).round() as u64,
            (c.to_s * 1e9).round() as u64,
        )
    }
}

/// A run's collision window: the slowdown on its schedule's clock ("the
/// slowdown, [12, 24) s of the schedule"), or the article's window.
pub fn window_of(c: &Collision) -> String {
    match (c.window.as_str(), c.schedule_from_s, c.schedule_to_s) {
        ("slowdown", Some(a), Some(b)) => {
            format!("the slowdown, [{}, {}) s of the schedule", secs(a), secs(b))
        }
        _ => format!("[{}, {}) s", secs(c.from_s), secs(c.to_s)),
    }
}

/// The retries counted and where: "M=153 in the slowdown, [2, 4) s of the
/// schedule", saying so when no slowdown was recorded.
pub fn collision_scope(c: &Collision) -> String {
    let mut scope = format!("M={} in {}", c.retries, window_of(c));
    if c.window == "default" {
        scope.push_str(", the article's window: no slowdown recorded");
        // A short run ends before the article's window does.
        if let Some(end) = c.trace_end_s.filter(|end| *end < c.to_s) {
            scope.push_str(&format!(", and the trace ends at {end:.1} s"));
        }
    }
    scope
}

/// The runs' collision window (see [`window_of`]), or that it differs
/// between them.
fn window_label<'a>(runs: impl IntoIterator<Item = &'a Overload>) -> String {
    let labels: Vec<String> = runs.into_iter().map(|o| window_of(&o.collision)).collect();
    if labels.is_empty() {
        return "the window".into();
    }
    one_label(labels.into_iter()).unwrap_or_else(|| "the window (it differs between runs)".into())
}

/// The label every run gives, if they all give the same one.
fn one_label(labels: impl Iterator<Item = String>) -> Option<String> {
    let mut labels: Vec<String> = labels.collect();
    labels.dedup();
    match labels.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

fn phase<'a>(o: &'a Overload, name: &str) -> Option<&'a crate::analyze::overload::PhaseLatency> {
    o.phases.iter().find(|p| p.phase == name)
}

/// The Markdown report of a Part 3 comparison. `article`: whether the runs
/// are the article's primary setting (2 s deadlines), so its figures belong
/// beside ours; otherwise those cells say `—`.
pub fn markdown(title: &str, runs: &[RunRef], article: bool) -> String {
    let g = groups(runs);
    let mut md = String::new();
    let _ = writeln!(md, "# {title}\n");
    if g.is_empty() {
        let _ = writeln!(md, "No run has Exchange events.");
        return md;
    }
    let n_runs: Vec<usize> = g.iter().map(|(_, v)| v.len()).collect();
    let window = window_label(g.iter().flat_map(|(_, v)| v.iter().map(|(_, o)| *o)));
    let _ = writeln!(
        md,
        "Means over runs, the runs' min–max in brackets (one value when every run gives the same); {} runs per configuration. \
         Percentages are of all N scheduled originals. The p95 cells give the runs' range, [the completed originals of that phase]. \
         The retry collision: of the M(M−1)/2 pairs among the M retries initiated in {window}, the fraction that share a {} ms bin; [M].\n",
        n_runs.iter().map(|n| n.to_string()).collect::<Vec<_>>().join("/"),
        COLLISION_BIN_NS / 1_000_000
    );
    let _ = writeln!(md, "## Where every original went\n");
    let _ = writeln!(
        md,
        "| config | N | on time % (U/N) | article on time % | late | rejected | dropped | expired | never sent | unanswered | checks |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|---|");
    for (config, v) in &g {
        let shown = named(config, v);
        let f = |get: &dyn Fn(&Overload) -> f64| -> Vec<f64> {
            v.iter().map(|(_, o)| get(o)).collect()
        };
        let article = ARTICLE_ON_TIME
            .iter()
            .find(|(p, _)| config == p && article)
            .map_or("—".to_string(), |(_, x)| format!("{x:.3}"));
        let checks_ok = v.iter().all(|(r, _)| {
            ["originals", "admission"]
                .iter()
                .all(|c| r.summary.checks.get(*c).is_some_and(|c| c.ok == Some(true)))
        });
        let _ = writeln!(
            md,
            "| {shown} | {} | {} | {article} | {} | {} | {} | {} | {} | {} | {} |",
            stat(&f(&|o| o.originals as f64), 0),
            stat(&f(&|o| 100.0 * o.useful_fraction), 3),
            stat(&f(&|o| o.late as f64), 1),
            stat(&f(&|o| o.rejected as f64), 1),
            stat(&f(&|o| o.dropped as f64), 1),
            stat(&f(&|o| o.expired as f64), 1),
            stat(&f(&|o| o.never_sent as f64), 1),
            stat(&f(&|o| o.unanswered as f64), 1),
            if checks_ok { "hold" } else { "SEE RUNS" },
        );
    }
    let _ = writeln!(md, "\n## Attempts and completed-cohort latency\n");
    let _ = writeln!(
        md,
        "| config | F | A | retries | S | R | p95 before (s) [cohort] | p95 during (s) [cohort] | p95 recovery (s) [cohort] |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|");
    for (config, v) in &g {
        let shown = named(config, v);
        let f = |get: &dyn Fn(&Overload) -> f64| -> Vec<f64> {
            v.iter().map(|(_, o)| get(o)).collect()
        };
        let ph = |name: &str| -> String {
            let p95: Vec<f64> = v
                .iter()
                .filter_map(|(_, o)| phase(o, name).and_then(|p| p.p95_s))
                .collect();
            let n: Vec<f64> = v
                .iter()
                .filter_map(|(_, o)| phase(o, name).map(|p| p.cohort as f64))
                .collect();
            format!("{} [{}]", range(&p95, 3), range(&n, 0))
        };
        let _ = writeln!(
            md,
            "| {shown} | {} | {} | {} | {} | {} | {} | {} | {} |",
            stat(&f(&|o| o.first_attempts as f64), 1),
            stat(&f(&|o| o.attempts as f64), 1),
            stat(&f(&|o| o.retries as f64), 1),
            stat(&f(&|o| o.sent as f64), 1),
            stat(&f(&|o| o.decoded as f64), 1),
            ph("before"),
            ph("during"),
            ph("after"),
        );
    }
    let _ = writeln!(
        md,
        "\n## Costs, and the frame view the article did not have\n"
    );
    let _ = writeln!(
        md,
        "| config | server-owned MiB·s | client pending peak | outstanding peak | WINDOW_UPDATE/s | window-blocked s | socket-blocked s | RST_STREAM | wire B per useful | retry collision [M] |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|---|---|");
    for (config, v) in &g {
        let shown = named(config, v);
        let f = |get: &dyn Fn(&Overload) -> f64| -> Vec<f64> {
            v.iter().map(|(_, o)| get(o)).collect()
        };
        let s =
            |get: &dyn Fn(&RunRef) -> f64| -> Vec<f64> { v.iter().map(|(r, _)| get(r)).collect() };
        let coll: Vec<f64> = v.iter().filter_map(|(_, o)| o.collision.fraction).collect();
        let m: Vec<f64> = v.iter().map(|(_, o)| o.collision.retries as f64).collect();
        let _ = writeln!(
            md,
            "| {shown} | {} | {} | {} | {} | {} | {} | {} | {} | {} [{}] |",
            stat(&f(&|o| o.owned_mib_s), 3),
            stat(&f(&|o| o.pending_peak as f64), 1),
            stat(&f(&|o| o.outstanding_peak as f64), 1),
            stat(&f(&|o| o.window_updates_per_s), 1),
            stat(&s(&|r| r.summary.client_window_blocked_s), 2),
            stat(&s(&|r| r.summary.client_socket_blocked_s), 3),
            stat(&f(&|o| o.rst_streams as f64), 1),
            stat(&f(&|o| o.wire_bytes_per_useful.unwrap_or(f64::NAN)), 0),
            if coll.is_empty() {
                "n/a".to_string()
            } else {
                stat(&coll, 5)
            },
            range(&m, 0),
        );
    }
    md.push_str(&paired(&g, article));
    if !article {
        let _ = writeln!(
            md,
            "\nThe article's figures are for its primary study (2 s deadlines, one client; eight clients for the collision study): not shown beside these runs."
        );
    }
    md
}

/// One figure over a configuration's runs, unrounded: over the `n` runs
/// that measured it (a run without the client's or the server's events, or
/// without a completed original in a phase, has no value).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(v: &[f64]) -> Option<Spread> {
        let mean = mean(v)?;
        Some(Spread {
            n: v.len(),
            mean,
            min: v.iter().copied().fold(f64::INFINITY, f64::min),
            max: v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// A configuration's row of `part3.json`: what the tables print, as data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Part3Row {
    pub config: String,
    pub runs: usize,
    pub dirs: Vec<String>,
    /// By `overload`'s field names (docs/summary-json.md), plus
    /// `useful_percent`, `collision_retries`, `collision_fraction` and
    /// `p95_s.<phase>` / `cohort.<phase>`.
    pub figures: BTreeMap<String, Spread>,
}

/// Part 3's comparison as data (`part3.json`), one row per configuration
/// in the tables' order; the paired differences are the tables' to give
/// (each row lists its runs, whose `summary.json` hold every figure).
pub fn rows(runs: &[RunRef]) -> Vec<Part3Row> {
    groups(runs)
        .into_iter()
        .map(|(config, v)| {
            let mut figures = BTreeMap::new();
            let mut put = |name: String, get: &dyn Fn(&Overload) -> Option<f64>| {
                let vals: Vec<f64> = v.iter().filter_map(|(_, o)| get(o)).collect();
                if let Some(s) = Spread::of(&vals) {
                    figures.insert(name, s);
                }
            };
            type Count = fn(&Overload) -> u64;
            let counts: [(&str, Count); 16] = [
                ("originals", |o| o.originals),
                ("on_time", |o| o.on_time),
                ("late", |o| o.late),
                ("rejected", |o| o.rejected),
                ("dropped", |o| o.dropped),
                ("expired", |o| o.expired),
                ("never_sent", |o| o.never_sent),
                ("unanswered", |o| o.unanswered),
                ("first_attempts", |o| o.first_attempts),
                ("attempts", |o| o.attempts),
                ("retries", |o| o.retries),
                ("sent", |o| o.sent),
                ("decoded", |o| o.decoded),
                ("pending_peak", |o| o.pending_peak),
                ("outstanding_peak", |o| o.outstanding_peak),
                ("rst_streams", |o| o.rst_streams),
            ];
            for (name, get) in counts {
                put(name.into(), &|o| Some(get(o) as f64));
            }
            put("useful_percent".into(), &|o| {
                (o.originals > 0).then_some(100.0 * o.useful_fraction)
            });
            put("owned_mib_s".into(), &|o| Some(o.owned_mib_s));
            put("window_updates_per_s".into(), &|o| {
                Some(o.window_updates_per_s)
            });
            put("wire_bytes_per_useful".into(), &|o| o.wire_bytes_per_useful);
            put("collision_retries".into(), &|o| {
                Some(o.collision.retries as f64)
            });
            put("collision_fraction".into(), &|o| o.collision.fraction);
            let phases: Vec<String> = v
                .iter()
                .flat_map(|(_, o)| o.phases.iter().map(|p| p.phase.clone()))
                .fold(vec![], |mut seen, p| {
                    if !seen.contains(&p) {
                        seen.push(p);
                    }
                    seen
                });
            for name in phases {
                put(format!("p95_s.{name}"), &|o| {
                    phase(o, &name).and_then(|p| p.p95_s)
                });
                put(format!("cohort.{name}"), &|o| {
                    phase(o, &name).map(|p| p.cohort as f64)
                });
            }
            Part3Row {
                runs: v.len(),
                dirs: v.iter().map(|(r, _)| r.dir.display().to_string()).collect(),
                config,
                figures,
            }
        })
        .collect()
}

/// A configuration's settings: the `key=value` words of its label, which
/// `compare` over run directories appends to the policy's name
/// ("WAIT original-deadline=500ms"); empty for a scenario's own labels.
fn settings_of(config: &str) -> String {
    config
        .split(' ')
        .filter(|w| w.contains('='))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs by repeat (the pairing key).
type ByRepeat<'a> = BTreeMap<u32, &'a Overload>;

/// The groups of policy `name` (the label's first word), by their
/// settings: runs of one policy under different settings are paired only
/// with the other policy's runs under the same settings.
fn policy_groups<'a>(
    g: &[(String, Vec<(&'a RunRef, &'a Overload)>)],
    name: &str,
) -> BTreeMap<String, ByRepeat<'a>> {
    g.iter()
        .filter(|(c, _)| c.split(' ').next() == Some(name))
        .map(|(c, v)| {
            let runs = v
                .iter()
                .filter_map(|(r, o)| Some((repeat_of(r)?, *o)))
                .collect();
            (settings_of(c), runs)
        })
        .collect()
}

/// `a` and `b` kept to the repeats both have: what a paired figure is
/// taken over, and every figure beside it.
fn both<'a>(a: &ByRepeat<'a>, b: &ByRepeat<'a>) -> (ByRepeat<'a>, ByRepeat<'a>) {
    let keep = |x: &ByRepeat<'a>, y: &ByRepeat<'a>| -> ByRepeat<'a> {
        x.iter()
            .filter(|(k, _)| y.contains_key(k))
            .map(|(k, o)| (*k, *o))
            .collect()
    };
    (keep(a, b), keep(b, a))
}

/// " (original-deadline=500ms)" after a section's name when its groups
/// have settings.
fn under(settings: &str) -> String {
    if settings.is_empty() {
        String::new()
    } else {
        format!(" ({settings})")
    }
}

/// Paired differences by repeat: RETRY − REJECT (the article's headline
/// trade-off), WAIT − REJECT owned payload, and fixed − jitter collisions;
/// each over the repeats both policies ran under the same settings, and
/// every figure of a section over those repeats only.
fn paired(g: &[(String, Vec<(&RunRef, &Overload)>)], article: bool) -> String {
    let art = |x: &'static str| if article { x } else { "—" };
    let mut md = String::new();
    let diffs = |a: &ByRepeat, b: &ByRepeat, f: &dyn Fn(&Overload) -> f64| -> Vec<f64> {
        a.iter()
            .filter_map(|(k, x)| b.get(k).map(|y| f(x) - f(y)))
            .collect()
    };
    let mean_of = |m: &ByRepeat, f: &dyn Fn(&Overload) -> f64| {
        mean(&m.values().map(|o| f(o)).collect::<Vec<_>>()).map_or("n/a".into(), |x| num(x, 1))
    };
    let (retries, rejects, waits) = (
        policy_groups(g, "RETRY"),
        policy_groups(g, "REJECT"),
        policy_groups(g, "WAIT"),
    );
    for (settings, retry) in &retries {
        let Some(reject) = rejects.get(settings) else {
            continue;
        };
        let (retry, reject) = both(retry, reject);
        if retry.is_empty() {
            continue;
        }
        let d_u = diffs(&retry, &reject, &|o| o.on_time as f64);
        let d_pp = diffs(&retry, &reject, &|o| 100.0 * o.useful_fraction);
        let d_a = diffs(&retry, &reject, &|o| o.attempts as f64);
        let _ = writeln!(
            md,
            "\n## RETRY − REJECT{}, paired by repeat ({})\n",
            under(settings),
            crate::report::counted(retry.len() as u64, "pair")
        );
        let _ = writeln!(md, "| figure | ours | article |\n|---|---|---|");
        for (figure, ours, theirs) in [
            ("on-time originals per run", diff_stat(&d_u, 1), "+40.6"),
            ("on-time percentage points", diff_stat(&d_pp, 3), "+1.410"),
            ("initiated attempts A per run", diff_stat(&d_a, 1), "+91.2"),
        ] {
            let _ = writeln!(md, "| {figure} | {ours} | {} |", art(theirs));
        }
        let _ = writeln!(
            md,
            "| F: REJECT → RETRY | {} → {} | {} |",
            mean_of(&reject, &|o| o.first_attempts as f64),
            mean_of(&retry, &|o| o.first_attempts as f64),
            art("2,529.8 → 2,496.2")
        );
        let _ = writeln!(
            md,
            "| A: REJECT → RETRY | {} → {} | {} |",
            mean_of(&reject, &|o| o.attempts as f64),
            mean_of(&retry, &|o| o.attempts as f64),
            art("2,529.8 → 2,621.0")
        );
        let _ = writeln!(
            md,
            "| RETRY retries per run | {} | {} |",
            mean_of(&retry, &|o| o.retries as f64),
            art("124.8")
        );
        let p95 = |m: &ByRepeat| -> String {
            let v: Vec<f64> = m
                .values()
                .filter_map(|o| phase(o, "after").and_then(|p| p.p95_s))
                .collect();
            let n: Vec<f64> = m
                .values()
                .filter_map(|o| phase(o, "after").map(|p| p.cohort as f64))
                .collect();
            format!("{} [{}]", range(&v, 3), range(&n, 0))
        };
        let _ = writeln!(
            md,
            "| recovery (after the slowdown) p95 RETRY (s) [cohort] | {} | {} |",
            p95(&retry),
            art("[24, 36): 1.054–1.100 [934–956]")
        );
        let _ = writeln!(
            md,
            "| recovery (after the slowdown) p95 REJECT (s) [cohort] | {} | {} |",
            p95(&reject),
            art("[24, 36): 0.573–0.733 [900–932]")
        );
    }
    for (settings, wait) in &waits {
        let Some(reject) = rejects.get(settings) else {
            continue;
        };
        let d_owned = diffs(wait, reject, &|o| o.owned_mib_s);
        if d_owned.is_empty() {
            continue;
        }
        let _ = writeln!(
            md,
            "\nWAIT − REJECT server-owned payload{}, paired by repeat ({}): {} MiB·s{}.",
            under(settings),
            crate::report::counted(d_owned.len() as u64, "pair"),
            diff_stat(&d_owned, 3),
            if article {
                " (article: REJECT retained 0.500 MiB·s less than WAIT)"
            } else {
                ""
            }
        );
    }
    let jitters = policy_groups(g, "jitter");
    for (settings, fixed) in &policy_groups(g, "fixed") {
        let Some(jitter) = jitters.get(settings) else {
            continue;
        };
        let (fixed, jitter) = both(fixed, jitter);
        if fixed.is_empty() {
            continue;
        }
        let rel: Vec<f64> = fixed
            .iter()
            .filter_map(|(k, f)| {
                let j = jitter.get(k)?;
                let (a, b) = (f.collision.fraction?, j.collision.fraction?);
                (b > 0.0).then(|| 100.0 * (a - b) / b)
            })
            .collect();
        let m = |x: &ByRepeat| {
            range(
                &x.values()
                    .map(|o| o.collision.retries as f64)
                    .collect::<Vec<_>>(),
                0,
            )
        };
        let _ = writeln!(
            md,
            "\n## Fixed vs jitter backoff{}, eight clients, paired by seed ({})\n",
            under(settings),
            crate::report::counted(fixed.len() as u64, "pair")
        );
        let _ = writeln!(md, "| figure | ours | article |\n|---|---|---|");
        let _ = writeln!(
            md,
            "| relative collision difference fixed vs jitter (%), over {} | {} | {} |",
            crate::report::counted(rel.len() as u64, "pair"),
            diff_stat(&rel, 3),
            art("−15.873 (−18.704 to −12.236)")
        );
        let window = window_label(fixed.values().chain(jitter.values()).copied());
        let _ = writeln!(
            md,
            "| retries M in {window}, fixed | {} | {} |",
            m(&fixed),
            art("[12, 24) s: 1,468–1,485")
        );
        let _ = writeln!(
            md,
            "| retries M in {window}, jitter | {} | {} |",
            m(&jitter),
            art("[12, 24) s: 1,476–1,515")
        );
    }
    md
}

/// Per-20 ms-bin retry counts in the collision window `[from, to)` (ns
/// from the first original) of one trace.
pub fn retry_bins(
    trace: &Path,
    (from, to): (u64, u64),
) -> Result<Vec<u64>, crate::reader::OpenError> {
    let mut r = crate::reader::TraceReader::open(trace)?.without_payloads();
    let (mut t0, mut retries): (Option<u64>, Vec<u64>) = (None, vec![]);
    while let Some(ev) = r.next_event() {
        let Ok(e) = ev else { continue };
        match &e.kind {
            crate::schema::Kind::Original(_) => t0 = Some(t0.map_or(e.t, |t| t.min(e.t))),
            crate::schema::Kind::Attempt(a) if a.attempt > 1 => retries.push(e.t),
            _ => {}
        }
    }
    let n = to.saturating_sub(from).div_ceil(COLLISION_BIN_NS) as usize;
    let mut bins = vec![0u64; n];
    if let Some(t0) = t0 {
        for t in retries {
            let (from, to) = (t0 + from, t0 + to);
            if t >= from && t < to {
                bins[((t - from) / COLLISION_BIN_NS) as usize] += 1;
            }
        }
    }
    Ok(bins)
}

type Points = Vec<(f64, f64)>;

/// At most `MAX_POINTS` points: consecutive points merged by their
/// maximum (peaks kept), so the SVGs stay small whatever the run length.
fn thin(p: Points) -> Points {
    const MAX_POINTS: usize = 400;
    let per = p.len().div_ceil(MAX_POINTS).max(1);
    p.chunks(per)
        .map(|c| (c[0].0, c.iter().map(|x| x.1).fold(f64::MIN, f64::max)))
        .collect()
}

/// A configuration's label and its owned-MiB, pending and outstanding series.
type Runs = (String, Points, Points, Points);

/// The comparison's plots, written into `dir`; returns the file names.
pub fn plots(dir: &Path, runs: &[RunRef]) -> Result<Vec<String>, PlotError> {
    let g = groups(runs);
    let mut files = vec![];
    if g.is_empty() {
        return Ok(files);
    }
    // Outcome fractions per configuration (means), as stacked bars.
    type Count = fn(&Overload) -> u64;
    let states: [(&str, Count); 7] = [
        ("on time", |o| o.on_time),
        ("late", |o| o.late),
        ("rejected", |o| o.rejected),
        ("dropped", |o| o.dropped),
        ("expired", |o| o.expired),
        ("never sent", |o| o.never_sent),
        ("unanswered", |o| o.unanswered),
    ];
    let bars: Vec<(String, Vec<f64>)> = g
        .iter()
        .map(|(c, v)| {
            let fr: Vec<f64> = states
                .iter()
                .map(|(_, get)| {
                    mean(
                        &v.iter()
                            .map(|(_, o)| get(o) as f64 / o.originals.max(1) as f64)
                            .collect::<Vec<_>>(),
                    )
                    .unwrap_or(0.0)
                })
                .collect();
            (c.clone(), fr)
        })
        .collect();
    let names: Vec<&str> = states.iter().map(|(n, _)| *n).collect();
    crate::plots::stacked_bars(
        &dir.join("part3-outcomes.svg"),
        "Where every scheduled original went (mean fraction of N)",
        &names,
        &bars,
    )?;
    files.push("part3-outcomes.svg".to_string());
    // Server-owned payload and the client's budgets over time, first run
    // of each configuration.
    let mut series: Vec<Runs> = vec![];
    for (c, v) in &g {
        let Some(trace) = crate::reader::trace_path(&v[0].0.dir) else {
            continue;
        };
        let Ok(a) = crate::analyze::analyze_trace(&trace) else {
            continue;
        };
        let tl = a.timeline;
        let mib: Vec<(f64, f64)> = thin(
            tl.admitted_bytes
                .filled_until(tl.end_s)
                .into_iter()
                .map(|(t, b)| (t, b / 1048576.0))
                .collect(),
        );
        let pending = thin(tl.client_pending.filled_until(tl.end_s));
        let outstanding = thin(tl.client_outstanding.filled_until(tl.end_s));
        series.push((c.clone(), mib, pending, outstanding));
    }
    let lines = |pick: &dyn Fn(&Runs) -> Points| -> Vec<Line<'_>> {
        series
            .iter()
            .map(|x| Line::new(x.0.as_str(), pick(x)))
            .collect()
    };
    let x = "time since trace start (s)";
    line_chart(
        &dir.join("part3-owned.svg"),
        x,
        &Panel {
            title: "Server-owned payload (admitted attempts, queued or in service; first run of each, highest per point)".into(),
            y_label: "MiB".into(),
            lines: lines(&|s| s.1.clone()),
            empty_reason: "no server events in these runs".into(),
            ..Panel::default()
        },
    )?;
    files.push("part3-owned.svg".to_string());
    crate::plots::stacked_chart(
        &dir.join("part3-client.svg"),
        x,
        &[
            Panel {
                title: "Client pending originals (all clients; first run of each, highest per point)".into(),
                y_label: "originals".into(),
                lines: lines(&|s| s.2.clone()),
                integer_y: true,
                empty_reason: "no client events in these runs".into(),
                ..Panel::default()
            },
            Panel {
                title: "Client outstanding attempts (all clients; first run of each, highest per point)".into(),
                y_label: "attempts".into(),
                lines: lines(&|s| s.3.clone()),
                integer_y: true,
                empty_reason: "no client events in these runs".into(),
                ..Panel::default()
            },
        ],
    )?;
    files.push("part3-client.svg".to_string());
    // Collision histogram: how many 20 ms bins of the window held k retries.
    // Every configuration has its line, none or not, so that each keeps
    // the colour it has on the other plots.
    let mut hist = vec![];
    let mut any_retries = false;
    for (c, v) in &g {
        let mut counts: BTreeMap<u64, f64> = BTreeMap::new();
        let mut any = false;
        for (r, o) in v {
            if let Some(trace) = crate::reader::trace_path(&r.dir) {
                if let Ok(bins) = retry_bins(&trace, window_ns(&o.collision)) {
                    any |= bins.iter().any(|b| *b > 0);
                    for b in bins {
                        *counts.entry(b).or_default() += 1.0 / v.len() as f64;
                    }
                }
            }
        }
        any_retries |= any;
        hist.push((
            c.clone(),
            match any {
                true => counts.into_iter().map(|(k, n)| (k as f64, n)).collect(),
                false => vec![],
            },
        ));
    }
    if any_retries {
        let lines: Vec<Line<'_>> = hist
            .iter()
            .map(|(c, p)| Line::new(c.as_str(), p.clone()))
            .collect();
        line_chart(
            &dir.join("part3-collisions.svg"),
            "retries initiated in the bin",
            &Panel {
                title: format!(
                    "Retries per 20 ms bin of {} (mean number of bins per run)",
                    window_label(g.iter().flat_map(|(_, v)| v.iter().map(|(_, o)| *o)))
                ),
                y_label: "bins".into(),
                lines,
                integer_x: true,
                absent: "no retry in the window".into(),
                ..Panel::default()
            },
        )?;
        files.push("part3-collisions.svg".to_string());
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: &str, dir: &str, o: Overload) -> RunRef {
        RunRef {
            config: config.into(),
            dir: dir.into(),
            summary: crate::analyze::Summary {
                overload: Some(o),
                ..Default::default()
            },
        }
    }

    /// A paired section takes every figure over the repeats both policies
    /// ran (A: REJECT → RETRY took all RETRY runs beside one REJECT run),
    /// says how many, and pairs runs only under the same settings (a WAIT
    /// at 2 s deadlines was paired with a REJECT at 500 ms).
    #[test]
    fn paired_figures_are_taken_over_the_pairs_under_one_setting() {
        let o = |attempts: u64, owned_mib_s: f64| Overload {
            originals: 480,
            first_attempts: 480,
            attempts,
            owned_mib_s,
            ..Overload::default()
        };
        let useful = |o: Overload, useful_fraction: f64| Overload {
            useful_fraction,
            ..o
        };
        let md = markdown(
            "t",
            &[
                run("RETRY", "c/retry-r1", o(600, 1.0)),
                run("RETRY", "c/retry-r2", useful(o(700, 1.0), 0.78)),
                run("REJECT", "c/reject-r2", useful(o(480, 1.0), 0.76)),
                run("WAIT", "c/wait-r2", o(480, 1.5)),
                run("WAIT deadline=500ms", "d/wait-r1", o(480, 3.0)),
                run("REJECT deadline=500ms", "d/reject-r1", o(480, 2.0)),
            ],
            false,
        );
        assert!(
            md.contains("## RETRY − REJECT, paired by repeat (1 pair)"),
            "{md}"
        );
        assert!(md.contains("| A: REJECT → RETRY | 480.0 → 700.0 |"), "{md}");
        assert!(
            md.contains("| initiated attempts A per run | +220.0 |"),
            "{md}"
        );
        assert!(
            md.contains("| on-time percentage points | +2.000 |"),
            "{md}"
        );
        assert!(
            md.contains(
                "WAIT − REJECT server-owned payload, paired by repeat (1 pair): +0.500 MiB·s."
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "WAIT − REJECT server-owned payload (deadline=500ms), paired by repeat (1 pair): +1.000 MiB·s."
            ),
            "{md}"
        );
        // RETRY-HOLD is not RETRY.
        assert!(!md.contains("RETRY-HOLD − "), "{md}");
    }

    /// Our figures as the article prints its own: a true minus sign, "to"
    /// between negative bounds, and a range only where the runs print
    /// apart.
    #[test]
    fn figures_print_as_the_articles_do() {
        assert_eq!(stat(&[-29.963, -21.478], 3), "−25.721 (−29.963 to −21.478)");
        assert_eq!(stat(&[16414.2, 16414.4], 0), "16414");
        assert_eq!(range(&[0.013, 0.01369], 3), "0.013–0.014");
        assert_eq!(stat(&[1.0, 2.0], 1), "1.5 (1.0–2.0)");
        // Differences are signed as the article's are; zero is not.
        assert_eq!(diff_stat(&[1.0, 2.0], 1), "+1.5 (1.0–2.0)");
        assert_eq!(diff_stat(&[-3.0], 1), "−3.0");
        assert_eq!(diff_stat(&[0.00001], 3), "0.000");
        // "to" whenever the low end prints negative, and only then.
        assert_eq!(range(&[-1.0, 2.0], 1), "−1.0 to 2.0");
        assert_eq!(range(&[0.0, 2.0], 1), "0.0–2.0");
        assert_eq!(range(&[-0.0001, 1.0], 3), "0.000–1.000");
        assert_eq!(num(-0.0001, 3), "0.000");
        // A run without the figure (wire bytes per useful with none
        // useful) has no part in it.
        assert_eq!(stat(&[f64::NAN, 4.0, 6.0], 0), "5 (4–6)");
        assert_eq!(stat(&[f64::NAN], 0), "n/a");
    }

    /// The tables, figure by figure: policies in the article's order
    /// whatever order the runs came in, a run cut short named, the
    /// article's figure only beside its own setting, the checks' verdict,
    /// phases' p95 and cohorts, and the collision window the runs share.
    #[test]
    fn the_tables_give_each_policys_figures_in_the_articles_order() {
        let phase = |name: &str, cohort: u64, p95: f64| crate::analyze::overload::PhaseLatency {
            phase: name.into(),
            cohort,
            p95_s: Some(p95),
            ..Default::default()
        };
        let o = |on_time: u64, useful: f64, p95: f64| Overload {
            originals: 100,
            on_time,
            useful_fraction: useful,
            phases: vec![phase("before", 30, p95), phase("during", 40, 2.0 * p95)],
            collision: Collision {
                from_s: 12.0,
                to_s: 24.0,
                window: "default".into(),
                ..Collision::default()
            },
            ..Overload::default()
        };
        let held = |mut r: RunRef, ok: bool| {
            for c in ["originals", "admission"] {
                r.summary.checks.insert(
                    c.into(),
                    crate::analyze::Check {
                        ok: Some(ok),
                        ..Default::default()
                    },
                );
            }
            r
        };
        let mut cut = held(run("DROP", "c/drop-r2", o(70, 0.70, 0.5)), true);
        cut.summary.run_status = "interrupted".into();
        let runs = [
            held(run("DROP", "c/drop-r1", o(80, 0.80, 0.5)), true),
            cut,
            held(run("WAIT", "c/wait-r1", o(76, 0.76, 0.25)), false),
        ];
        let md = markdown("t", &runs, true);
        let line =
            |start: &str| -> Vec<&str> { md.lines().filter(|l| l.starts_with(start)).collect() };
        assert_eq!(
            line("| WAIT |"),
            [
                "| WAIT | 100 | 76.000 | 76.042 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | SEE RUNS |",
                "| WAIT | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | 0.250 [30] | 0.500 [40] | n/a [n/a] |",
                "| WAIT | 0.000 | 0.0 | 0.0 | 0.0 | 0.00 | 0.000 | 0.0 | n/a | n/a [0] |",
            ],
            "{md}"
        );
        let drop = "| DROP (incomplete: 1 of 2) |";
        assert_eq!(
            line(drop)[0],
            format!("{drop} 100 | 75.000 (70.000–80.000) | 76.014 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 | hold |"),
            "{md}"
        );
        // WAIT before DROP, as the article lists them.
        assert!(
            md.find("| WAIT |").unwrap() < md.find(drop).unwrap(),
            "{md}"
        );
        assert!(md.contains("; 1/2 runs per configuration"), "{md}");
        assert!(md.contains("initiated in [12, 24) s, the fraction"), "{md}");
        assert!(!md.contains("not shown beside these runs"), "{md}");
        // Not the article's setting: no article figures, and said why.
        let ours = markdown("t", &runs, false);
        assert!(ours.contains("| WAIT | 100 | 76.000 | — |"), "{ours}");
        assert!(ours.contains("not shown beside these runs"), "{ours}");
    }

    /// The collision window the runs share, or that it differs, in the
    /// runs' order (a window given twice apart is still two windows).
    #[test]
    fn a_collision_window_is_named_once_when_every_run_shares_it() {
        let at = |from_s: f64, to_s: f64| Overload {
            collision: Collision {
                from_s,
                to_s,
                ..Collision::default()
            },
            ..Overload::default()
        };
        let (a, b) = (at(12.0, 24.0), at(2.0, 4.0));
        assert_eq!(window_label([&a, &a]), "[12, 24) s");
        assert_eq!(
            window_label([&a, &b, &a]),
            "the window (it differs between runs)"
        );
        assert_eq!(window_label([]), "the window");
        // In ns when recorded so, else from the seconds.
        assert_eq!(window_ns(&a.collision), (12_000_000_000, 24_000_000_000));
        let ns = Collision {
            from_ns: 7,
            to_ns: 9,
            ..a.collision.clone()
        };
        assert_eq!(window_ns(&ns), (7, 9));
        // A trace ending just as the article's window does covers it.
        let ends_at = |end: f64| Collision {
            window: "default".into(),
            trace_end_s: Some(end),
            ..a.collision.clone()
        };
        assert!(!collision_scope(&ends_at(24.0)).contains("trace ends"));
        assert!(collision_scope(&ends_at(23.9)).contains("trace ends at 23.9 s"));
    }

    /// part3.json's figures: over the runs that measured each, phases
    /// once each, and no on-time percentage for a run without originals.
    #[test]
    fn part3_json_gives_each_figure_over_the_runs_that_measured_it() {
        let o = |originals: u64, useful: f64, phases: &[&str]| Overload {
            originals,
            useful_fraction: useful,
            phases: phases
                .iter()
                .map(|p| crate::analyze::overload::PhaseLatency {
                    phase: p.to_string(),
                    cohort: 10,
                    p95_s: Some(1.5),
                    ..Default::default()
                })
                .collect(),
            ..Overload::default()
        };
        let rows = rows(&[
            run("REJECT", "c/reject-r1", o(100, 0.75, &["before", "during"])),
            run("REJECT", "c/reject-r2", o(0, 0.0, &["during"])),
        ]);
        assert_eq!(rows.len(), 1);
        let f = &rows[0].figures;
        assert_eq!(
            f["useful_percent"],
            Spread {
                n: 1,
                mean: 75.0,
                min: 75.0,
                max: 75.0
            }
        );
        assert_eq!((f["originals"].n, f["originals"].mean), (2, 50.0));
        assert_eq!(f["p95_s.before"].n, 1);
        assert_eq!(f["cohort.during"].n, 2);
        assert_eq!(
            f.keys().filter(|k| k.starts_with("p95_s.")).count(),
            2,
            "{f:?}"
        );
        assert_eq!(rows[0].dirs, ["c/reject-r1", "c/reject-r2"]);
    }

    #[test]
    fn a_repeat_is_the_directorys_r_suffix() {
        let of = |dir: &str| repeat_of(&run("X", dir, Overload::default()));
        assert_eq!(of("c/retry-r12"), Some(12));
        assert_eq!(of("c/retry-r0"), Some(0));
        assert_eq!(of("c/retry"), None);
        assert_eq!(of("c/retry-rx"), None);
    }

    /// The article's window is named as such, and a run that ends before
    /// it does says where (M=0 read as "no retries collided").
    #[test]
    fn a_window_past_the_trace_is_said() {
        let article = |end: f64| Collision {
            from_s: 12.0,
            to_s: 24.0,
            window: "default".into(),
            trace_end_s: Some(end),
            ..Collision::default()
        };
        assert_eq!(
            collision_scope(&article(5.04)),
            "M=0 in [12, 24) s, the article's window: no slowdown recorded, \
             and the trace ends at 5.0 s"
        );
        assert_eq!(
            collision_scope(&article(36.0)),
            "M=0 in [12, 24) s, the article's window: no slowdown recorded"
        );
        let slowdown = Collision {
            window: "slowdown".into(),
            schedule_from_s: Some(2.0),
            schedule_to_s: Some(4.0),
            retries: 7,
            ..article(3.0)
        };
        assert_eq!(
            collision_scope(&slowdown),
            "M=7 in the slowdown, [2, 4) s of the schedule"
        );
    }
}
