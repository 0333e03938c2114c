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

/// Median and range of one figure over repeats. NaN (`null` in
/// comparison.json, `n/a` in the tables) when no repeat measured it (the
/// server's figures of client-only runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    #[serde(deserialize_with = "nan_if_null")]
    pub median: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub min: f64,
    #[serde(deserialize_with = "nan_if_null")]
    pub max: f64,
}

/// comparison.json's `null` (serde_json writes NaN so) read back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Stat {
    /// Over the repeats that measured the figure (`None`: the trace lacks
    /// the side that measures it); NaN when none did.
    pub fn of_measured(values: &[Option<f64>]) -> Stat {
        let present: Vec<f64> = values.iter().flatten().copied().collect();
        if present.is_empty() {
            return Stat {
                median: f64::NAN,
                min: f64::NAN,
                max: f64::NAN,
            };
        }
        Stat::of(&present)
    }

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

    /// `median (min–max)`, or just the value when all repeats agree; `n/a`
    /// when none measured it.
    pub fn show(&self, decimals: usize) -> String {
        if self.median.is_nan() {
            return "n/a".into();
        }
        let v = |x: f64| crate::stats::rounded_zero(x, decimals);
        let (m, lo, hi) = (v(self.median), v(self.min), v(self.max));
        let (lo, hi) = (format!("{lo:.decimals$}"), format!("{hi:.decimals$}"));
        // The median of an even number of counts can fall halfway: said as
        // it is ("81.5"), not rounded to even ("82", beside 26.5 as "26").
        let m = if decimals == 0 && self.median.fract().abs() == 0.5 {
            format!("{:.1}", self.median)
        } else {
            format!("{m:.decimals$}")
        };
        // A range whose ends print alike says nothing: "0.06", not
        // "0.06 (0.06–0.06)".
        if lo == hi {
            m
        } else {
            format!("{m} ({lo}–{hi})")
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
    /// Repeats whose checks cannot be judged (see [`unjudged`]).
    pub unjudged: usize,
    /// Repeats that did not run to their end or whose trace is cut short
    /// (see [`incomplete`]): in the figures, and said beside the name.
    #[serde(default)]
    pub incomplete: usize,
    /// Repeats that stalled, by the first stall's cause.
    pub stalls: std::collections::BTreeMap<String, u64>,
    /// Repeats with a client whose `no_stall` check could not judge (ended
    /// stuck, or cut short): they may have stalled. Their other checks can
    /// all hold, so `failed_checks` and `unjudged` do not show them.
    #[serde(default)]
    pub stall_unknown: usize,
}

/// A run none of whose checks failed that still cannot be called sound:
/// its trace lost or gained events, or no check could judge anything.
pub fn unjudged(s: &Summary) -> bool {
    !s.checks.values().any(|c| c.ok == Some(false))
        && (s.events_in_doubt().is_some() || !s.checks.values().any(|c| c.ok == Some(true)))
}

/// A run stopped before its end (interrupted, an error) or whose trace is
/// cut short: its figures cover only part of what was asked.
pub fn incomplete(s: &Summary) -> bool {
    let status = !matches!(s.run_status.as_str(), "" | "complete");
    let trace = !matches!(s.trace_ending.as_str(), "" | "clean" | "none");
    status || trace
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
            // A figure of the side a trace has (as the headline's n/a).
            let (client, server, both) = (
                |s: &Summary| s.has_client,
                |s: &Summary| s.has_server,
                |s: &Summary| s.has_client && s.has_server,
            );
            // Under Part 3's admission bound the queue cannot outgrow its
            // slots: no growth figure (as its headline leaves it out).
            let growing = |s: &Summary| both(s) && s.overload.is_none();
            let measured = |side: &dyn Fn(&Summary) -> bool, f: &dyn Fn(&Summary) -> f64| {
                Stat::of_measured(
                    &group
                        .iter()
                        .map(|r| side(&r.summary).then(|| f(&r.summary)))
                        .collect::<Vec<_>>(),
                )
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
            let stall_unknown = group
                .iter()
                .filter(|r| {
                    r.summary.has_client
                        && r.summary
                            .checks
                            .get("no_stall")
                            .is_some_and(|c| c.ok.is_none())
                })
                .count();
            Row {
                stalls,
                stall_unknown,
                config: config.to_string(),
                runs: group.len(),
                dirs: group.iter().map(|r| r.dir.display().to_string()).collect(),
                send_rate: measured(&client, &|s| s.send_rate_steady),
                completion_rate: measured(&server, &|s| s.completion_rate),
                queue_growth_rate: measured(&growing, &|s| s.queue_growth_rate),
                max_queue_depth: measured(&server, &|s| s.max_queue_depth as f64),
                max_owned_mib: measured(&server, &|s| s.max_owned_bytes as f64 / 1048576.0),
                window_blocked_s: measured(&client, &|s| s.client_window_blocked_s),
                socket_blocked_s: measured(&client, &|s| s.client_socket_blocked_s),
                window_updates: measured(&server, &|s| s.window_updates_out as f64),
                mean_increment: measured(&server, &|s| s.window_update_increment.mean),
                release_to_update_p50_ms: measured(&server, &|s| s.release_to_update_ms.p50),
                release_to_update_p90_ms: measured(&server, &|s| s.release_to_update_ms.p90),
                scheduled: measured(&client, &|s| s.scheduled as f64),
                completed: measured(&server, &|s| s.completed as f64),
                discarded: measured(&server, &|s| s.discarded as f64),
                never_sent: measured(&client, &|s| s.never_sent as f64),
                rpc_status,
                failed_checks: group
                    .iter()
                    .filter(|r| r.summary.checks.values().any(|c| c.ok == Some(false)))
                    .count(),
                unjudged: group.iter().filter(|r| unjudged(&r.summary)).count(),
                incomplete: group.iter().filter(|r| incomplete(&r.summary)).count(),
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
        "| configuration | WINDOW_UPDATE out | mean stream increment B | release→update p50 ms | p90 ms | scheduled | completed | discarded | never sent | RPC status | runs failing a check |"
    );
    let _ = writeln!(
        o,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"
    );
    for r in rows {
        let mut cells = vec![r.config.clone()];
        cells.extend(outcome_cells(r));
        cells.push(match r.unjudged {
            0 => r.failed_checks.to_string(),
            n => format!("{} ({n} not judged)", r.failed_checks),
        });
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
        .chain((r.stall_unknown > 0).then(|| format!("stall not judged×{}", r.stall_unknown)))
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
        if r.incomplete > 0 {
            format!("{} (incomplete: {} of {})", r.config, r.incomplete, r.runs)
        } else {
            r.config.clone()
        },
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

/// The headline table for the terminal, fitted to `width` columns (see
/// [`transposed`]), with how many runs of each configuration failed a
/// check: what `compare`'s exit code 3 says, shown where it is read.
pub fn terminal_table(rows: &[Row], width: usize) -> String {
    let mut headers = HEADLINE.to_vec();
    headers.push(FAILED_ROW);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut c = headline_cells(r).to_vec();
            c.push(failed_cell(r));
            c
        })
        .collect();
    transposed(&headers, &cells, width)
}

/// The runs of a row that failed a check, and those whose checks could
/// not judge (a damaged trace read "0 of 1", as if it held).
pub fn failed_cell(r: &Row) -> String {
    match r.unjudged {
        0 => format!("{} of {}", r.failed_checks, r.runs),
        n => format!("{} of {} ({n} not judged)", r.failed_checks, r.runs),
    }
}

/// The terminal table's last row: runs with a failed invariant check.
pub const FAILED_ROW: &str = "runs failing a check";

/// A table for the terminal, transposed (a column per line, a row per
/// column) so that it fits `width` however many columns the table has:
/// rows go side by side while they fit, then on in another block; a row's
/// first cell (its name) wraps at spaces.
pub fn transposed<H: AsRef<str>>(headers: &[H], rows: &[Vec<String>], width: usize) -> String {
    let label_w = headers
        .iter()
        .map(|h| columns(h.as_ref()))
        .max()
        .unwrap_or(0);
    let cell = |r: &Vec<String>, i: usize| r.get(i).map_or("", String::as_str).to_string();
    // A column is as wide as its widest cell or the longest word of its
    // name, and never wider than what is left beside the names.
    let room = width.saturating_sub(label_w + 2).max(8);
    let col_w: Vec<usize> = rows
        .iter()
        .map(|r| {
            let values = (1..headers.len()).map(|i| columns(&cell(r, i)));
            // A long word (a path) is broken rather than widen its column.
            let words = cell(r, 0)
                .split(' ')
                .map(|w| columns(w).min(LONG_WORD))
                .collect::<Vec<_>>();
            values.chain(words).max().unwrap_or(0).clamp(4, room)
        })
        .collect();
    let mut o = String::new();
    let mut first = 0;
    while first < rows.len() {
        // As many columns as fit beside the names (at least one).
        let mut end = first + 1;
        let mut used = label_w + 2 + col_w[first];
        while end < rows.len() && used + 2 + col_w[end] <= width {
            used += 2 + col_w[end];
            end += 1;
        }
        if first > 0 {
            o.push('\n');
        }
        let names: Vec<Vec<String>> = (first..end)
            .map(|i| wrap_words(&cell(&rows[i], 0), col_w[i]))
            .collect();
        let name_lines = names.iter().map(Vec::len).max().unwrap_or(1);
        let head = headers.first().map_or("", |h| h.as_ref());
        for line in 0..name_lines {
            let mut l = padded(if line == 0 { head } else { "" }, label_w, false);
            for (k, i) in (first..end).enumerate() {
                let part = names[k].get(line).map_or("", String::as_str);
                l.push_str("  ");
                l.push_str(&padded(part, col_w[i], false));
            }
            o.push_str(l.trim_end());
            o.push('\n');
        }
        for (f, name) in headers.iter().enumerate().skip(1) {
            let mut l = padded(name.as_ref(), label_w, false);
            for i in first..end {
                l.push_str("  ");
                l.push_str(&padded(&cell(&rows[i], f), col_w[i], true));
            }
            o.push_str(&l);
            o.push('\n');
        }
        first = end;
    }
    o
}

/// `s` padded with spaces to `w` terminal columns, on the left when
/// `right` (aligned right), else on the right.
fn padded(s: &str, w: usize, right: bool) -> String {
    let pad = " ".repeat(w.saturating_sub(columns(s)));
    if right {
        format!("{pad}{s}")
    } else {
        format!("{s}{pad}")
    }
}

/// A Markdown report for the terminal: every table [`transposed`] to fit
/// `width`, headings and paragraphs wrapped at spaces.
pub fn markdown_for_terminal(md: &str, width: usize) -> String {
    let split = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let is_rule = |l: &str| {
        l.trim().trim_matches('|').split('|').all(|c| {
            let c = c.trim();
            !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':'))
        })
    };
    let mut o = String::new();
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if l.trim_start().starts_with('|') {
            let headers = split(l);
            let mut rows = vec![];
            i += 1;
            while i < lines.len() && lines[i].trim_start().starts_with('|') {
                if !is_rule(lines[i]) {
                    rows.push(split(lines[i]));
                }
                i += 1;
            }
            o.push_str(&transposed(&headers, &rows, width));
            continue;
        }
        let text = l.trim_start_matches('#').trim();
        for w in wrap_words(text, width) {
            o.push_str(&w);
            o.push('\n');
        }
        i += 1;
    }
    o
}

/// Names' words longer than this are broken (after a `/` or `-` where one is near).
const LONG_WORD: usize = 20;

/// The columns `s` takes at a terminal: a CJK character two, a combining
/// mark none, an emoji sequence as one glyph (unicode-width's measure of
/// the whole string, which split and joined pieces both use).
pub fn columns(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// `text` in lines of at most `width` terminal columns ([`columns`]), broken
/// at spaces; a word wider than `width` is broken too, after a `/` or a `-`
/// where it can be (`complete-` / `unbounded`, not `complete-unbound` /
/// `ed`), and never inside a character (one wider than `width` stands
/// alone on its line).
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut pieces: Vec<String> = vec![];
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let mut rest: Vec<char> = word.chars().collect();
        while columns(&rest.iter().collect::<String>()) > width {
            // The most characters that fit in `width` columns (at least one).
            let mut prefix = String::new();
            let mut fit = 0;
            for &c in &rest {
                prefix.push(c);
                if columns(&prefix) > width {
                    break;
                }
                fit += 1;
            }
            let fit = fit.max(1);
            let cut = rest[..fit]
                .iter()
                .rposition(|&c| matches!(c, '/' | '-' | '='))
                .filter(|&i| i + 1 >= fit / 2)
                .map_or(fit, |i| i + 1);
            pieces.push(rest.drain(..cut).collect());
        }
        if !rest.is_empty() {
            pieces.push(rest.into_iter().collect());
        }
    }
    let mut lines: Vec<String> = vec![];
    for word in &pieces {
        match lines.last_mut() {
            Some(l) if columns(l) + 1 + columns(word) <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A count's median halfway between two repeats is said as it is;
    /// whole medians and other precisions round as before.
    #[test]
    fn a_median_halfway_between_counts_is_not_rounded_to_even() {
        assert_eq!(Stat::of(&[81.0, 82.0]).show(0), "81.5 (81–82)");
        assert_eq!(Stat::of(&[26.0, 27.0]).show(0), "26.5 (26–27)");
        assert_eq!(Stat::of(&[26.0, 27.0, 30.0]).show(0), "27 (26–30)");
        assert_eq!(Stat::of(&[5.0, 5.0]).show(0), "5");
        assert_eq!(Stat::of(&[0.1, 0.2]).show(2), "0.15 (0.10–0.20)");
        assert_eq!(Stat::of(&[-3.0, -2.0]).show(0), "-2.5 (-3–-2)");
    }

    #[test]
    fn a_long_word_breaks_after_a_slash_or_a_hyphen_in_its_second_half() {
        assert_eq!(
            wrap_words("ref/complete-unbounded", 20),
            ["ref/complete-", "unbounded"]
        );
        // A setting breaks after its name ("original-deadline=500m|s").
        assert_eq!(
            wrap_words("WAIT original-deadline=500ms", 22),
            ["WAIT", "original-deadline=", "500ms"]
        );
        assert_eq!(wrap_words("runs/a-b/frame", 10), ["runs/a-b/", "frame"]);
        // None in the second half: cut at the width.
        assert_eq!(wrap_words("abcdefghijkl", 5), ["abcde", "fghij", "kl"]);
    }

    /// Columns line up by terminal columns: a CJK run name's characters
    /// take two, so its column padded by characters came out wider than
    /// the others and shifted what followed.
    #[test]
    fn a_table_with_a_wide_run_name_lines_up_in_columns() {
        let headers = ["run", "sent", "completed"];
        let rows = vec![
            vec!["运行".to_string(), "3000".to_string(), "2999".to_string()],
            vec!["ascii".to_string(), "12".to_string(), "7".to_string()],
        ];
        let table = transposed(&headers, &rows, 80);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        // Every line ends its second column at the same terminal column.
        let ends: Vec<usize> = lines.iter().map(|l| columns(l)).collect();
        assert!(ends.iter().all(|&e| e == ends[1]), "{ends:?}\n{table}");
        assert!(lines[1].ends_with("3000     12"), "{table}");
    }

    #[test]
    fn a_wide_character_takes_two_columns_of_a_line() {
        // Six CJK characters are 12 columns: 5 columns hold two of them.
        let lines = wrap_words("服务器过载了 ok", 5);
        assert_eq!(lines, ["服务", "器过", "载了", "ok"]);
        for l in &lines {
            assert!(columns(l) <= 5, "{l:?}");
        }
        // Words of wide characters share a line as far as their columns go.
        assert_eq!(wrap_words("过载 了 ab", 7), ["过载 了", "ab"]);
        // A combining accent takes no column of its own.
        assert_eq!(wrap_words("cafe\u{301} ok", 7), ["cafe\u{301} ok"]);
        // Split and joined alike: ten emoji with their presentation
        // selector are 20 columns, broken as such.
        let hearts = "\u{2764}\u{FE0F}".repeat(10);
        for l in wrap_words(&hearts, 10) {
            assert!(columns(&l) <= 10, "{l:?}");
        }
        // A character wider than the line stands alone, with no empty line.
        assert_eq!(wrap_words("服务器", 1), ["服", "务", "器"]);
    }

    fn run(config: &str, send: f64, depth: u64) -> RunRef {
        RunRef {
            config: config.into(),
            dir: PathBuf::from(format!("/runs/{config}-{send}")),
            summary: Summary {
                send_rate_steady: send,
                max_queue_depth: depth,
                has_client: true,
                has_server: true,
                ..Summary::default()
            },
        }
    }

    /// A figure of a side a run's trace lacks is n/a, as in its headline,
    /// not 0 (client-only runs showed "peak queue 0"); over repeats, the
    /// runs that measured it count.
    #[test]
    fn a_figure_no_repeat_measured_is_n_a() {
        let client_only = |send: f64| RunRef {
            summary: Summary {
                has_server: false,
                ..run("c", send, 0).summary
            },
            ..run("c", send, 0)
        };
        let rows = rows(&[client_only(300.0), client_only(310.0)]);
        assert_eq!(rows[0].max_queue_depth.show(0), "n/a");
        assert_eq!(rows[0].completion_rate.show(1), "n/a");
        assert_eq!(rows[0].send_rate.show(1), "305.0 (300.0–310.0)");
        let json = serde_json::to_value(&rows[0]).unwrap();
        assert!(json["max_queue_depth"]["median"].is_null(), "{json}");
        let back: Row = serde_json::from_value(json).unwrap();
        assert!(back.max_queue_depth.median.is_nan());
        let mixed = rows_of(&[run("m", 300.0, 12), client_only(290.0)]);
        assert_eq!(mixed[0].max_queue_depth.show(0), "12");
        // A Part 3 run's queue cannot outgrow its slots: no growth figure
        // (it showed one, which its own headline leaves out).
        let part3 = RunRef {
            summary: Summary {
                queue_growth_rate: 0.8,
                overload: Some(Default::default()),
                ..run("p", 80.0, 31).summary
            },
            ..run("p", 80.0, 31)
        };
        assert_eq!(rows_of(&[part3])[0].queue_growth_rate.show(1), "n/a");
    }

    fn rows_of(runs: &[RunRef]) -> Vec<Row> {
        let runs: Vec<RunRef> = runs
            .iter()
            .map(|r| RunRef {
                config: "m".into(),
                ..r.clone()
            })
            .collect();
        rows(&runs)
    }

    /// A run is "cannot be judged" when its trace is in doubt or nothing
    /// held, never when a check failed; the comparison page showed such a
    /// run as "hold".
    #[test]
    fn a_run_whose_checks_cannot_judge_is_not_called_sound() {
        let check = |ok: Option<bool>| crate::analyze::Check {
            ok,
            ..Default::default()
        };
        let with = |checks: &[(&str, Option<bool>)], corrupt: u64| Summary {
            checks: checks
                .iter()
                .map(|(n, ok)| (n.to_string(), check(*ok)))
                .collect(),
            corrupt_lines: corrupt,
            ..Summary::default()
        };
        let sound = with(&[("credit", Some(true)), ("bytes", None)], 0);
        assert!(!unjudged(&sound));
        let damaged = with(&[("credit", None), ("no_dropped_events", Some(true))], 1);
        assert!(unjudged(&damaged));
        let nothing_held = with(&[("credit", None), ("bytes", None)], 0);
        assert!(unjudged(&nothing_held));
        let failed = with(&[("credit", Some(false)), ("bytes", None)], 1);
        assert!(!unjudged(&failed));
        // A run whose only check that cannot judge is `no_stall` (it ended
        // stuck) is judged, and its row says the stall is unknown.
        let stuck = Summary {
            has_client: true,
            ..with(&[("credit", Some(true)), ("no_stall", None)], 0)
        };
        assert!(!unjudged(&stuck));
        let row = &rows(&[RunRef {
            summary: stuck,
            ..run("s", 1.0, 1)
        }])[0];
        assert_eq!(row.stall_unknown, 1);
        assert!(
            outcome_cells(row)[8].contains("stall not judged×1"),
            "{:?}",
            outcome_cells(row)
        );
        let grouped = rows(&[RunRef {
            summary: damaged,
            ..run("a", 1.0, 1)
        }]);
        assert_eq!((grouped[0].failed_checks, grouped[0].unjudged), (0, 1));
        // Said where the failures are counted, in the terminal and in
        // comparison.md (it read "0 of 1", as if the run held).
        assert_eq!(failed_cell(&grouped[0]), "0 of 1 (1 not judged)");
        assert!(terminal_table(&grouped, 80).contains("0 of 1 (1 not judged)"));
        assert!(markdown("t", &grouped).contains("| 0 (1 not judged) |"));
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
        // Ends that print alike give no range.
        assert_eq!(Stat::of(&[0.061, 0.0604]).show(2), "0.06");
        assert_eq!(Stat::of(&[0.061, 0.0604]).show(4), "0.0607 (0.0604–0.0610)");
    }

    #[test]
    fn the_terminal_table_fits_80_columns_and_keeps_every_figure() {
        let configs = [
            "release=frame queue=unbounded link-delay=25ms",
            "release=complete queue=bounded:32 link-delay=25ms",
            "release=decode queue=unbounded",
            "release=start queue=direct streams=4",
            "release=complete queue=unbounded workers=8 stream-window=1MiB",
        ];
        let mut runs = vec![];
        for (i, c) in configs.iter().enumerate() {
            runs.push(run(c, 1234.5 + i as f64, 100_000));
            runs.push(run(c, 1299.9 + i as f64, 99_999));
        }
        let rows = rows(&runs);
        let t = terminal_table(&rows, 80);
        for l in t.lines() {
            assert!(
                l.chars().count() <= 80,
                "{} columns: {l}\n{t}",
                l.chars().count()
            );
        }
        // Every figure of every row is there, and every word of its name.
        for r in &rows {
            for (i, cell) in headline_cells(r).iter().enumerate().skip(1) {
                assert!(t.contains(cell.as_str()), "{} {cell}\n{t}", HEADLINE[i]);
            }
            for w in r.config.split(' ') {
                assert!(t.contains(w), "{w}\n{t}");
            }
        }
        // Figures are named once per block; five wide columns need blocks.
        let blocks = t.split("\n\n").count();
        assert!(blocks >= 2, "{t}");
        assert_eq!(t.matches("sent/s (steady)").count(), blocks, "{t}");
        // Every block says how many runs failed a check (none here).
        assert_eq!(t.matches("runs failing a check").count(), blocks, "{t}");
        assert!(t.contains("0 of 2"), "{t}");
        let failing = rows
            .iter()
            .map(|r| Row {
                failed_checks: 1,
                ..r.clone()
            })
            .collect::<Vec<_>>();
        assert!(terminal_table(&failing, 80).contains("1 of 2"));
        // A narrow table stays one block.
        let one = terminal_table(&rows[..1], 80);
        assert_eq!(one.split("\n\n").count(), 1, "{one}");
        assert!(
            one.lines()
                .any(|l| l.starts_with("runs") && l.trim_end().ends_with('2')),
            "{one}"
        );
    }

    /// A row's outcomes add up over its runs, and each figure counts only
    /// the runs whose trace has the side that measures it.
    #[test]
    fn a_rows_outcomes_add_up_over_the_runs_that_measured_them() {
        let check = |ok: Option<bool>| crate::analyze::Check {
            ok,
            ..Default::default()
        };
        let with = |r: RunRef, f: &dyn Fn(&mut Summary)| {
            let mut r = r;
            f(&mut r.summary);
            r
        };
        let runs = [
            with(run("a", 10.0, 1), &|s| {
                s.rpc_status = [("OK".into(), 3), ("CANCELLED".into(), 1)].into();
                s.stall_cause = Some("window".into());
                s.max_owned_bytes = 3 << 20;
                s.queue_growth_rate = 5.0;
            }),
            with(run("a", 20.0, 2), &|s| {
                s.rpc_status = [("OK".into(), 2)].into();
                s.stall_cause = Some("window".into());
                s.max_owned_bytes = 1 << 20;
                s.queue_growth_rate = 7.0;
                s.run_status = "interrupted".into();
            }),
            // A server-only trace: no growth figure (it needs both
            // sides), and a stall it cannot judge is not the client's.
            with(run("a", 30.0, 3), &|s| {
                s.has_client = false;
                s.max_owned_bytes = 2 << 20;
                s.queue_growth_rate = 1000.0;
                s.checks = [("no_stall".to_string(), check(None))].into();
            }),
        ];
        let row = &rows(&runs)[0];
        assert_eq!(row.max_owned_mib.show(2), "2.00 (1.00–3.00)");
        assert_eq!(row.queue_growth_rate.show(1), "6.0 (5.0–7.0)");
        assert_eq!(row.stall_unknown, 0);
        assert_eq!(row.incomplete, 1);
        // No "stall not judged×0" when every stall was judged.
        assert_eq!(outcome_cells(row)[8], "CANCELLED×1 OK×5 stalled (window)×2");
        assert_eq!(headline_cells(row)[0], "a (incomplete: 1 of 3)");
        assert_eq!(headline_cells(&rows(&runs[..1])[0])[0], "a");
    }

    /// A run is incomplete when it stopped early or its trace is cut
    /// short, either alone.
    #[test]
    fn a_run_stopped_early_or_cut_short_is_incomplete() {
        let of = |status: &str, ending: &str| Summary {
            run_status: status.into(),
            trace_ending: ending.into(),
            ..Summary::default()
        };
        for (status, ending, expected) in [
            ("", "", false),
            ("complete", "clean", false),
            ("complete", "none", false),
            ("interrupted", "clean", true),
            ("complete", "truncated", true),
            ("error", "truncated", true),
        ] {
            assert_eq!(
                incomplete(&of(status, ending)),
                expected,
                "{status} {ending}"
            );
        }
    }

    /// Columns go side by side exactly while they fit; a name wraps to
    /// the room beside the figures' names, its first line beside the
    /// first header.
    #[test]
    fn a_transposed_table_fills_its_width_exactly() {
        let rows: Vec<Vec<String>> = ["aaaa", "bbbb", "cccc"]
            .iter()
            .map(|n| vec![n.to_string(), "1234".to_string()])
            .collect();
        // Names 4 columns, three columns of 4 and two spaces each: 22.
        assert_eq!(
            transposed(&["name", "v"], &rows, 22),
            "name  aaaa  bbbb  cccc\nv     1234  1234  1234\n"
        );
        assert_eq!(
            transposed(&["name", "v"], &rows, 21),
            "name  aaaa  bbbb\nv     1234  1234\n\nname  cccc\nv     1234\n"
        );
        // 30 columns leave 15 beside a 13-column name for a name's words.
        let long = vec![vec![
            "abcdefghijklmnopqrst uvw".to_string(),
            "1".to_string(),
        ]];
        let t = transposed(&["configuration", "x"], &long, 30);
        assert_eq!(
            t,
            "configuration  abcdefghijklmno\n               pqrst uvw\nx                            1\n"
        );
    }

    /// A Markdown table is read from its first line, its rule left out.
    #[test]
    fn a_markdown_table_on_the_first_line_is_read_once_without_its_rule() {
        let t = markdown_for_terminal("| k | n |\n|---|--:|\n| a | 1 |\n", 80);
        assert_eq!(t, "k  a\nn     1\n");
    }

    #[test]
    fn markdown_tables_are_fitted_for_the_terminal() {
        let md = "# A title\n\nSome words.\n\n| config | N | on time % (U/N) | article on time % | late | rejected | dropped | expired | never sent | unanswered | checks |\n|---|---|---|---|---|---|---|---|---|---|---|\n| wait | 2880 | 76.944 (76.8–77.1) | 77.0 | 1.5 | 0 | 0 | 663.0 | 0 | 0 | hold |\n| reject | 2880 | 76.111 | 76.1 | 0 | 688.0 | 0 | 0 | 0 | 0 | hold |\n";
        let t = markdown_for_terminal(md, 80);
        assert!(t.starts_with("A title\n\nSome words.\n"), "{t}");
        for l in t.lines() {
            assert!(l.chars().count() <= 80, "{l}\n{t}");
        }
        assert!(
            t.lines().any(|l| l.starts_with("on time % (U/N)")
                && l.contains("76.944 (76.8–77.1)")
                && l.contains("76.111")),
            "{t}"
        );
        assert!(
            t.lines()
                .any(|l| l.starts_with("rejected") && l.contains("688.0")),
            "{t}"
        );
        assert!(!t.contains("|---"), "{t}");
    }
}
