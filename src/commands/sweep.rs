//! `compare --sweep PARAM=V1,V2,…`: a grid over any `run` flag, parsed by
//! run's own parsers, and sweep.svg, the headline figures against the
//! swept parameter.

use super::matrix::{CompareOpts, Config};
use super::run::RunOpts;
use crate::config::{QueuePolicy, ReleasePoint};
use h2probe_analysis::compare;
use std::path::Path;

/// `--sweep PARAM=V1,V2,…`: one `run` flag and the values it takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    pub param: String,
    pub values: Vec<String>,
}

impl std::str::FromStr for Sweep {
    type Err = String;
    fn from_str(s: &str) -> Result<Sweep, String> {
        let (param, values) = s
            .split_once('=')
            .ok_or_else(|| format!("{s:?}: write PARAM=V1,V2,… (e.g. link-delay=0ms,25ms)"))?;
        let param = param.trim().trim_start_matches("--").to_string();
        let values: Vec<String> = values
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if param.is_empty() || values.is_empty() {
            return Err(format!(
                "{s:?}: write PARAM=V1,V2,… (e.g. link-delay=0ms,25ms)"
            ));
        }
        if let Some(v) = values
            .iter()
            .enumerate()
            .find_map(|(i, v)| values[..i].contains(v).then_some(v))
        {
            return Err(format!(
                "{s:?}: {v} is listed twice; each value is one configuration (use --repeats to run one again)"
            ));
        }
        Ok(Sweep { param, values })
    }
}

/// `run`'s flags, parsed on their own: a sweep's values go through the same
/// parsers (and refusals) as `h2probe run`'s.
#[derive(clap::Parser)]
#[command(no_binary_name = true, args_override_self = true)]
pub(super) struct RunFlags {
    #[command(flatten)]
    pub(super) run: RunOpts,
}

/// Flags a sweep may not vary: they say where and how to write, not what
/// to measure (compare sets them for every run).
pub(super) const NOT_SWEPT: [&str; 5] = ["out", "force", "quiet", "no-pcap", "no-trace"];

/// The sweep grid, crossed with --release × --queue when those are given.
pub(super) fn sweep_matrix(opts: &CompareOpts) -> Vec<Config> {
    let mut grid: Vec<Vec<(String, String)>> = vec![vec![]];
    for sw in &opts.sweep {
        grid = grid
            .into_iter()
            .flat_map(|p| {
                sw.values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.push((sw.param.clone(), v.clone()));
                    p
                })
            })
            .collect();
    }
    let rq: Vec<(Option<ReleasePoint>, Option<QueuePolicy>)> = {
        let rs: Vec<Option<ReleasePoint>> = opts
            .release
            .as_ref()
            .map_or(vec![None], |v| v.iter().copied().map(Some).collect());
        let qs: Vec<Option<QueuePolicy>> = opts
            .queue
            .as_ref()
            .map_or(vec![None], |v| v.iter().copied().map(Some).collect());
        rs.iter()
            .flat_map(|r| qs.iter().map(move |q| (*r, *q)))
            .collect()
    };
    let mut out = vec![];
    for (r, q) in rq {
        for p in &grid {
            let mut point = p.clone();
            if let Some(r) = r {
                point.push(("release".into(), r.as_str().into()));
            }
            if let Some(q) = q {
                point.push(("queue".into(), q.to_string()));
            }
            let label = point
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ");
            let slug: String = point
                .iter()
                .map(|(k, v)| format!("{k}{v}"))
                .collect::<Vec<_>>()
                .join("-")
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let mut c = Config::new(label, slug, |_| {});
            c.args = point.iter().map(|(k, v)| format!("--{k}={v}")).collect();
            c.point = point;
            out.push(c);
        }
    }
    out
}

/// What the sweep plot needs of one configuration.
pub(super) struct SweepPoint {
    pub(super) label: String,
    pub(super) point: Vec<(String, String)>,
    /// The smaller of the stream and connection windows (bytes).
    pub(super) window: u64,
    /// Framed message size, upper bound (bytes).
    pub(super) framed: u64,
}

/// sweep.svg: the headline figures against the first swept parameter, one
/// line per combination of the others.
pub(super) fn sweep_plot(
    out: &Path,
    sweeps: &[Sweep],
    points: &[SweepPoint],
    rows: &[compare::Row],
) -> anyhow::Result<()> {
    use h2probe_analysis::plots::{SweepAxis, SweepLine};
    let param = &sweeps[0].param;
    let axis = SweepAxis::of(param, &sweeps[0].values);
    let mut lines: Vec<SweepLine> = vec![];
    for p in points {
        let Some(row) = rows.iter().find(|r| r.config == p.label) else {
            continue;
        };
        let x_value = &p.point[0].1;
        let Some(x) = axis.x(x_value) else { continue };
        let rest: Vec<String> = p.point[1..]
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let name = if rest.is_empty() {
            "measured".to_string()
        } else {
            rest.join(" ")
        };
        let line = match lines.iter_mut().position(|l| l.label == name) {
            Some(i) => &mut lines[i],
            None => {
                lines.push(SweepLine {
                    label: name,
                    points: vec![],
                });
                lines.last_mut().expect("pushed")
            }
        };
        line.points.push((x, row.clone()));
    }
    // W / RTT, the most a window W lets through a round trip of 2 × delay:
    // one curve per distinct (window, message size), across the axis.
    let mut bound: Vec<(String, Vec<(f64, f64)>)> = vec![];
    if param == "link-delay" {
        let (lo, hi) = points
            .iter()
            .filter_map(|p| axis.x(&p.point[0].1))
            .fold((f64::INFINITY, 0.0f64), |(a, b), x| (a.min(x), b.max(x)));
        let lo = if lo > 0.0 { lo } else { hi / 20.0 };
        let mut seen = std::collections::BTreeSet::new();
        for p in points {
            if hi <= 0.0 || !seen.insert((p.window, p.framed)) {
                continue;
            }
            // The axis is in milliseconds.
            let curve = (0..=100)
                .map(|i| lo + (hi - lo) * i as f64 / 100.0)
                .map(|ms| (ms, p.window as f64 / (2.0 * ms / 1e3) / p.framed as f64))
                .collect();
            bound.push((
                format!(
                    "W / RTT = {} B window ÷ (2 × delay) ÷ {} B per message (at most; the most this window lets through)",
                    p.window, p.framed
                ),
                curve,
            ));
        }
    }
    let path = out.join("sweep.svg");
    h2probe_analysis::plots::sweep_chart(&path, param, &axis, &lines, &bound)?;
    Ok(())
}
