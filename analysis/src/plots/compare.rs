//! Plots across the configurations of a comparison: one line each, or,
//! for the credit, one panel each on a shared scale.

use super::*;
use crate::analyze::Timeline;

/// Side-by-side plots of several configurations (one line each), written
/// into `dir`. Returns the file names.
pub fn compare_plots(dir: &Path, runs: &[(String, &Timeline)]) -> Result<Vec<String>, PlotError> {
    let x = "time since trace start (s)";
    let lines = |f: &dyn Fn(&Timeline) -> Vec<(f64, f64)>| -> Vec<Line<'_>> {
        runs.iter()
            .map(|(label, tl)| Line::new(label.as_str(), f(tl)))
            .collect()
    };
    fn panel<'a>(title: &str, y: &str, integer_y: bool, lines: Vec<Line<'a>>) -> Panel<'a> {
        Panel {
            title: title.into(),
            y_label: y.into(),
            lines,
            integer_y,
            notes: vec!["one run per configuration: its first repeat".to_string()],
            empty_reason: "no run recorded this".into(),
            ..Panel::default()
        }
    }
    line_chart(
        &dir.join("compare-queue.svg"),
        x,
        &panel(
            "Application queue depth by configuration",
            "messages queued",
            true,
            lines(&|tl| tl.queue_depth.filled_until(tl.end_s)),
        ),
    )?;
    line_chart(
        &dir.join("compare-owned.svg"),
        x,
        &panel(
            "Bytes owned by the application (decoded, not completed)",
            "MiB",
            false,
            lines(&|tl| scaled(tl.owned_bytes.filled_until(tl.end_s), 1048576.0)),
        ),
    )?;
    line_chart(
        &dir.join("compare-sent.svg"),
        x,
        &panel(
            "Messages handed to h2 by the client (cumulative)",
            "messages",
            true,
            lines(&|tl| tl.sent.filled_until(tl.end_s)),
        ),
    )?;
    line_chart(
        &dir.join("compare-completed.svg"),
        x,
        &panel(
            "Messages completed by the worker (cumulative)",
            "messages",
            true,
            lines(&|tl| tl.completed.filled_until(tl.end_s)),
        ),
    )?;
    // One panel per configuration on one scale: drawn over each other,
    // their min–max bands hid each other (a 32–64 KiB band covered the
    // lines below it).
    let credit: Vec<Line<'_>> = runs
        .iter()
        .map(|(label, tl)| Line {
            label: label.as_str(),
            points: scaled(tl.credit_stream_client.filled_until(tl.end_s), 1024.0),
            band: scaled_band(tl.credit_stream_client.envelope(tl.end_s), 1024.0),
        })
        .collect();
    let top = super::chart::y_extent(&credit).1;
    let panels: Vec<Panel<'_>> = credit
        .into_iter()
        .enumerate()
        .map(|(i, line)| Panel {
            first_color: i,
            y_at_least: top,
            ..panel(
                &format!(
                    "{}: stream credit seen by the client (first stream)",
                    line.label
                ),
                "KiB",
                false,
                vec![line],
            )
        })
        .collect();
    let path = dir.join("compare-credit.svg");
    if panels.is_empty() {
        // No run's trace: the one empty panel says so.
        let title = "Stream credit seen by the client (first stream)";
        line_chart(&path, x, &panel(title, "KiB", false, vec![]))?;
    } else {
        stacked_chart(&path, x, &panels)?;
    }
    Ok([
        "compare-queue.svg",
        "compare-owned.svg",
        "compare-sent.svg",
        "compare-completed.svg",
        "compare-credit.svg",
    ]
    .map(String::from)
    .to_vec())
}
