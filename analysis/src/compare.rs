//! Comparison of runs: one row per configuration, median and min–max over
//! its repeats, rendered as Markdown and JSON.

use crate::analyze::Summary;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::PathBuf;

/// One analysed run and the configuration it belongs to.
#[derive(Debug, Clone)]
pub struct RunRef {
    pub config: String,
    pub dir: PathBuf,
    pub summary: Summary,
}

/// Median and range of one figure over repeats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    pub fn of(values: &[f64]) -> Stat {
        if values.is_empty() {
            return Stat::default();
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Stat {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }

    /// `median (min–max)`, or just the value when all repeats agree.
    pub fn show(&self, decimals: usize) -> String {
        // Values that round to zero print as 0, not -0.
        let half_ulp = 0.5 * 10f64.powi(-(decimals as i32));
        let v = |x: f64| if x.abs() < half_ulp { 0.0 } else { x };
        let (m, lo, hi) = (v(self.median), v(self.min), v(self.max));
        if lo == hi {
            format!("{m:.decimals$}")
        } else {
            format!("{m:.decimals$} ({lo:.decimals$}–{hi:.decimals$})")
        }
    }
}

/// One configuration's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub config: String,
    pub runs: usize,
    pub dirs: Vec<String>,
    /// The steady send rate (`send_rate_steady`): one-time allowances excluded.
    pub send_rate: Stat,
    pub completion_rate: Stat,
    pub queue_growth_rate: Stat,
    pub max_queue_depth: Stat,
    pub max_owned_mib: Stat,
    pub window_blocked_s: Stat,
    pub socket_blocked_s: Stat,
    pub window_updates: Stat,
    pub mean_increment: Stat,
    pub release_to_update_p50_ms: Stat,
    pub release_to_update_p90_ms: Stat,
    pub scheduled: Stat,
    pub completed: Stat,
    pub discarded: Stat,
    pub never_sent: Stat,
    /// gRPC statuses over all repeats.
    pub rpc_status: std::collections::BTreeMap<String, u64>,
    /// Repeats in which an invariant check failed.
    pub failed_checks: usize,
    /// Repeats that stalled, by the first stall's cause.
    pub stalls: std::collections::BTreeMap<String, u64>,
}

/// Groups runs by configuration, in order of first appearance.
pub fn rows(runs: &[RunRef]) -> Vec<Row> {
    let mut order: Vec<&str> = vec![];
    for r in runs {
        if !order.contains(&r.config.as_str()) {
            order.push(&r.config);
        }
    }
    order
        .into_iter()
        .map(|config| {
            let group: Vec<&RunRef> = runs.iter().filter(|r| r.config == config).collect();
            let stat = |f: &dyn Fn(&Summary) -> f64| {
                Stat::of(&group.iter().map(|r| f(&r.summary)).collect::<Vec<_>>())
            };
            let mut rpc_status = std::collections::BTreeMap::new();
            for r in &group {
                for (k, v) in &r.summary.rpc_status {
                    *rpc_status.entry(k.clone()).or_default() += v;
                }
            }
            let mut stalls = std::collections::BTreeMap::new();
            for r in &group {
                if let Some(cause) = &r.summary.stall_cause {
                    *stalls.entry(cause.clone()).or_default() += 1;
                }
            }
            Row {
                stalls,
                config: config.to_string(),
                runs: group.len(),
                dirs: group.iter().map(|r| r.dir.display().to_string()).collect(),
                send_rate: stat(&|s| s.send_rate_steady),
                completion_rate: stat(&|s| s.completion_rate),
                queue_growth_rate: stat(&|s| s.queue_growth_rate),
                max_queue_depth: stat(&|s| s.max_queue_depth as f64),
                max_owned_mib: stat(&|s| s.max_owned_bytes as f64 / 1048576.0),
                window_blocked_s: stat(&|s| s.client_window_blocked_s),
                socket_blocked_s: stat(&|s| s.client_socket_blocked_s),
                window_updates: stat(&|s| s.window_updates_out as f64),
                mean_increment: stat(&|s| s.window_update_increment.mean),
                release_to_update_p50_ms: stat(&|s| s.release_to_update_ms.p50),
                release_to_update_p90_ms: stat(&|s| s.release_to_update_ms.p90),
                scheduled: stat(&|s| s.scheduled as f64),
                completed: stat(&|s| s.completed as f64),
                discarded: stat(&|s| s.discarded as f64),
                never_sent: stat(&|s| s.never_sent as f64),
                rpc_status,
                failed_checks: group
                    .iter()
                    .filter(|r| r.summary.checks.values().any(|c| c.ok == Some(false)))
                    .count(),
            }
        })
        .collect()
}

/// The comparison as a Markdown document (tables a paper would print).
pub fn markdown(title: &str, rows: &[Row]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# {title}\n");
    let _ = writeln!(
        o,
        "Median over repeats, (min–max) where they differ. Rates in messages/s; \
         queue growth is the least-squares slope of queue depth over the steady part of the offered period.\n"
    );
    let _ = writeln!(o, "| {} |", HEADLINE.join(" | "));
    let _ = writeln!(o, "| --- |{}", " ---: |".repeat(HEADLINE.len() - 1));
    for r in rows {
        let _ = writeln!(o, "| {} |", headline_cells(r).join(" | "));
    }
    let _ = writeln!(o, "\n## WINDOW_UPDATEs and outcomes\n");
    let _ = writeln!(
        o,
        "| configuration | WINDOW_UPDATE out | mean stream increment B | release→update p50 ms | p90 ms | scheduled | completed | discarded | never sent | RPC status | failed checks |"
    );
    let _ = writeln!(
        o,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"
    );
    for r in rows {
        let mut cells = vec![r.config.clone()];
        cells.extend(outcome_cells(r));
        cells.push(r.failed_checks.to_string());
        let _ = writeln!(o, "| {} |", cells.join(" | "));
    }
    o
}

/// The WINDOW_UPDATE and outcome cells of a row, after its configuration:
/// updates, mean increment, release→update p50 and p90, scheduled,
/// completed, discarded, never sent, RPC status and stalls (Markdown and
/// HTML alike).
pub fn outcome_cells(r: &Row) -> [String; 9] {
    let status: Vec<String> = r
        .rpc_status
        .iter()
        .map(|(k, v)| format!("{k}×{v}"))
        .chain(r.stalls.iter().map(|(k, v)| format!("stalled ({k})×{v}")))
        .collect();
    [
        r.window_updates.show(0),
        r.mean_increment.show(0),
        r.release_to_update_p50_ms.show(2),
        r.release_to_update_p90_ms.show(2),
        r.scheduled.show(0),
        r.completed.show(0),
        r.discarded.show(0),
        r.never_sent.show(0),
        status.join(" "),
    ]
}

/// Column titles of the headline table (Markdown and terminal alike).
pub const HEADLINE: [&str; 9] = [
    "configuration",
    "runs",
    "sent/s (steady)",
    "completed/s",
    "queue growth/s",
    "peak queue",
    "peak owned MiB",
    "client window-blocked s",
    "client socket-blocked s",
];

/// One row of the headline table, in the order of [`HEADLINE`].
pub fn headline_cells(r: &Row) -> [String; 9] {
    [
        r.config.clone(),
        r.runs.to_string(),
        r.send_rate.show(1),
        r.completion_rate.show(1),
        r.queue_growth_rate.show(1),
        r.max_queue_depth.show(0),
        r.max_owned_mib.show(2),
        r.window_blocked_s.show(2),
        r.socket_blocked_s.show(3),
    ]
}

/// The headline table, fixed-width, for the terminal.
pub fn terminal_table(rows: &[Row]) -> String {
    let cells: Vec<[String; 9]> = rows.iter().map(headline_cells).collect();
    // Each column as wide as its widest cell.
    let widths: Vec<usize> = (0..HEADLINE.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .chain([HEADLINE[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cols: Vec<&str>| -> String {
        let mut l = String::new();
        for (i, c) in cols.iter().enumerate() {
            let pad = widths[i].saturating_sub(c.chars().count());
            if i == 0 {
                l.push_str(c);
                l.push_str(&" ".repeat(pad));
            } else {
                l.push_str("  ");
                l.push_str(&" ".repeat(pad));
                l.push_str(c);
            }
        }
        l.push('\n');
        l
    };
    let mut o = line(HEADLINE.to_vec());
    for c in &cells {
        o.push_str(&line(c.iter().map(String::as_str).collect()));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: &str, send: f64, depth: u64) -> RunRef {
        RunRef {
            config: config.into(),
            dir: PathBuf::from(format!("/runs/{config}-{send}")),
            summary: Summary {
                send_rate_steady: send,
                max_queue_depth: depth,
                ..Summary::default()
            },
        }
    }

    #[test]
    fn rows_group_by_config_with_median_and_range() {
        let runs = vec![
            run("a", 300.0, 10),
            run("b", 90.0, 32),
            run("a", 290.0, 30),
            run("a", 310.0, 20),
        ];
        let rows = rows(&runs);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].config, "a");
        assert_eq!(rows[0].runs, 3);
        assert_eq!(
            rows[0].send_rate,
            Stat {
                median: 300.0,
                min: 290.0,
                max: 310.0
            }
        );
        assert_eq!(rows[0].max_queue_depth.median, 20.0);
        assert_eq!(rows[1].send_rate.show(1), "90.0");
        assert_eq!(rows[0].send_rate.show(1), "300.0 (290.0–310.0)");
        let md = markdown("t", &rows);
        assert!(md.contains("| a | 3 | 300.0 (290.0–310.0) |"), "{md}");
        assert_eq!(Stat::of(&[1.0, 2.0, 3.0, 10.0]).median, 2.5);
        assert_eq!(Stat::of(&[-0.001, 0.002]).show(1), "0.0");
    }
}
