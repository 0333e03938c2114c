//! SVG plots of one run's timeline (plotters, SVG backend only).

use crate::analyze::{Blocked, Timeline};
use plotters::prelude::*;
use std::path::Path;

/// A plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct PlotError {
    pub path: String,
    pub message: String,
}

const W: u32 = 1000;
const H: u32 = 520;
/// The tab10 palette: ten colours that stay distinct side by side.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// One line of a plot.
pub struct Line<'a> {
    pub label: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// Draws `lines` on one chart with titled axes and a legend.
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line<'_>],
) -> Result<(), PlotError> {
    let err = |e: String| PlotError {
        path: path.display().to_string(),
        message: e,
    };
    let root = SVGBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let x_max = x_extent(lines);
    draw_lines(&root, title, x_label, y_label, lines, x_max).map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))
}

/// Several charts stacked vertically, sharing the time axis.
pub fn stacked_chart(
    path: &Path,
    x_label: &str,
    panels: &[(&str, &str, Vec<Line<'_>>)],
) -> Result<(), PlotError> {
    let err = |e: String| PlotError {
        path: path.display().to_string(),
        message: e,
    };
    let root = SVGBackend::new(path, (W, 330 * panels.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let x_max = panels.iter().map(|p| x_extent(&p.2)).fold(1.0, f64::max);
    let areas = root.split_evenly((panels.len(), 1));
    for (area, (title, y_label, lines)) in areas.iter().zip(panels) {
        draw_lines(area, title, x_label, y_label, lines, x_max).map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))
}

fn x_extent(lines: &[Line<'_>]) -> f64 {
    let m = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .fold(0.0, f64::max);
    if m > 0.0 {
        m
    } else {
        1.0
    }
}

fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line<'_>],
    x_max: f64,
) -> Result<(), String> {
    let (mut y_min, mut y_max) = (0.0f64, 0.0f64);
    for l in lines {
        for &(_, y) in &l.points {
            y_min = y_min.min(y);
            y_max = y_max.max(y);
        }
    }
    if y_max <= y_min {
        y_max = y_min + 1.0;
    }
    let pad = (y_max - y_min) * 0.05;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(
            0.0..x_max * 1.02,
            (y_min - if y_min < 0.0 { pad } else { 0.0 })..y_max + pad,
        )
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(12)
        .y_labels(8)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, l) in lines.iter().enumerate() {
        if l.points.is_empty() {
            continue;
        }
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                l.points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?
            .label(l.label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Client blocked intervals as bars, one row per cause: window credit, h2's
/// send buffer, the socket.
pub fn intervals_chart(path: &Path, tl: &Timeline) -> Result<(), PlotError> {
    let err = |e: String| PlotError {
        path: path.display().to_string(),
        message: e,
    };
    let x_max = tl
        .intervals
        .iter()
        .map(|i| i.1)
        .fold(1.0f64, f64::max)
        .max(tl.sent.points().last().map_or(1.0, |p| p.0));
    let root = SVGBackend::new(path, (W, 320)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let total = |w: Blocked| -> (f64, usize) {
        let v: Vec<f64> = tl
            .intervals
            .iter()
            .filter(|i| i.2 == w)
            .map(|i| i.1 - i.0)
            .collect();
        (v.iter().fold(0.0, |a, b| a + b), v.len())
    };
    let ((ws, wn), (hs, hn), (ss, sn)) = (
        total(Blocked::Window),
        total(Blocked::H2Buffer),
        total(Blocked::Socket),
    );
    let mut title = format!(
        "Client blocked: window {ws:.2} s ({wn}), h2 buffer {hs:.2} s ({hn}), socket {ss:.3} s ({sn})"
    );
    if tl.intervals_dropped > 0 {
        title.push_str(&format!(" (first {} intervals drawn)", tl.intervals.len()));
    }
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(190)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..3.0)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("time since trace start (s)")
        .x_labels(12)
        .y_labels(7)
        .y_label_formatter(&|y: &f64| {
            if (*y - 0.5).abs() < 0.01 {
                "socket (poll_write Pending)".into()
            } else if (*y - 1.5).abs() < 0.01 {
                "h2 send buffer full".into()
            } else if (*y - 2.5).abs() < 0.01 {
                "window credit".into()
            } else {
                String::new()
            }
        })
        .disable_y_mesh()
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (row, kind, color) in [
        (2.0, Blocked::Window, COLORS[1]),
        (1.0, Blocked::H2Buffer, COLORS[2]),
        (0.0, Blocked::Socket, COLORS[0]),
    ] {
        chart
            .draw_series(
                tl.intervals
                    .iter()
                    .filter(|i| i.2 == kind)
                    .map(|&(a, b, _)| {
                        // Zero-length intervals still get a visible sliver.
                        let b = if b - a < x_max / 2000.0 {
                            a + x_max / 2000.0
                        } else {
                            b
                        };
                        Rectangle::new([(a, row + 0.15), (b, row + 0.85)], color.filled())
                    }),
            )
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

fn kib(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    points.into_iter().map(|(x, y)| (x, y / 1024.0)).collect()
}

/// The standard plots of one run, written into `dir`. Returns the file names.
pub fn run_plots(dir: &Path, tl: &Timeline) -> Result<Vec<String>, PlotError> {
    let x = "time since trace start (s)";
    let mib = |p: Vec<(f64, f64)>| p.into_iter().map(|(x, y)| (x, y / 1048576.0)).collect();
    stacked_chart(
        &dir.join("credit.svg"),
        x,
        &[
            (
                "Transport: credit the client saw, bytes the server had not released",
                "KiB",
                vec![
                    Line {
                        label: "client stream credit (client tap)",
                        points: kib(tl.credit_stream_client.filled_until(tl.end_s)),
                    },
                    Line {
                        label: "client connection credit (client tap)",
                        points: kib(tl.credit_conn_client.filled_until(tl.end_s)),
                    },
                    Line {
                        label: "received, not yet released (server)",
                        points: kib(tl.unreleased.filled_until(tl.end_s)),
                    },
                ],
            ),
            (
                "Application: bytes owned (decoded, not yet completed)",
                "MiB",
                vec![Line {
                    label: "owned by the application",
                    points: mib(tl.owned_bytes.filled_until(tl.end_s)),
                }],
            ),
            (
                "Application queue depth",
                "messages",
                vec![Line {
                    label: "queue depth (all RPCs)",
                    points: tl.queue_depth.filled_until(tl.end_s),
                }],
            ),
        ],
    )?;
    line_chart(
        &dir.join("queue.svg"),
        "Application queue depth",
        x,
        "messages queued",
        &[Line {
            label: "queue depth (all RPCs)",
            points: tl.queue_depth.filled_until(tl.end_s),
        }],
    )?;
    line_chart(
        &dir.join("cumulative.svg"),
        "Messages over time: scheduled, sent, completed, discarded",
        x,
        "messages (cumulative)",
        &[
            Line {
                label: "scheduled (client)",
                points: tl.scheduled.filled_until(tl.end_s),
            },
            Line {
                label: "sent: handed to h2 (client)",
                points: tl.sent.filled_until(tl.end_s),
            },
            Line {
                label: "completed (server worker)",
                points: tl.completed.filled_until(tl.end_s),
            },
            Line {
                label: "discarded (server)",
                points: tl.discarded.filled_until(tl.end_s),
            },
        ],
    )?;
    intervals_chart(&dir.join("blocked.svg"), tl)?;
    Ok(vec![
        "credit.svg".into(),
        "queue.svg".into(),
        "cumulative.svg".into(),
        "blocked.svg".into(),
    ])
}

/// Side-by-side plots of several configurations (one line each), written
/// into `dir`. Returns the file names.
pub fn compare_plots(dir: &Path, runs: &[(String, &Timeline)]) -> Result<Vec<String>, PlotError> {
    let x = "time since trace start (s)";
    let lines = |f: &dyn Fn(&Timeline) -> Vec<(f64, f64)>| -> Vec<Line<'_>> {
        runs.iter()
            .map(|(label, tl)| Line {
                label: label.as_str(),
                points: f(tl),
            })
            .collect()
    };
    line_chart(
        &dir.join("compare-queue.svg"),
        "Application queue depth by configuration",
        x,
        "messages queued",
        &lines(&|tl| tl.queue_depth.filled_until(tl.end_s)),
    )?;
    line_chart(
        &dir.join("compare-owned.svg"),
        "Bytes owned by the application (decoded, not completed)",
        x,
        "MiB",
        &lines(&|tl| {
            tl.owned_bytes
                .filled_until(tl.end_s)
                .into_iter()
                .map(|(a, b)| (a, b / 1048576.0))
                .collect()
        }),
    )?;
    line_chart(
        &dir.join("compare-sent.svg"),
        "Messages handed to h2 by the client (cumulative)",
        x,
        "messages",
        &lines(&|tl| tl.sent.filled_until(tl.end_s)),
    )?;
    line_chart(
        &dir.join("compare-completed.svg"),
        "Messages completed by the worker (cumulative)",
        x,
        "messages",
        &lines(&|tl| tl.completed.filled_until(tl.end_s)),
    )?;
    line_chart(
        &dir.join("compare-credit.svg"),
        "Stream credit seen by the client (client tap)",
        x,
        "KiB",
        &lines(&|tl| kib(tl.credit_stream_client.filled_until(tl.end_s))),
    )?;
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

/// One bar per configuration, split into stacked parts (fractions that sum
/// to at most 1), with a legend naming the parts.
pub fn stacked_bars(
    path: &Path,
    title: &str,
    parts: &[&str],
    bars: &[(String, Vec<f64>)],
) -> Result<(), PlotError> {
    let err = |e: String| PlotError {
        path: path.display().to_string(),
        message: e,
    };
    let root = SVGBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let n = bars.len().max(1);
    let draw = || -> Result<(), String> {
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(0.4..(n as f64) + 1.9, 0.0..1.0f64)
            .map_err(|e| e.to_string())?;
        let labels: Vec<String> = bars.iter().map(|(l, _)| l.clone()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(n + 2)
            .x_label_formatter(&|x| {
                let i = x.round() as usize;
                if (x - i as f64).abs() < 0.01 && i >= 1 && i <= labels.len() {
                    labels[i - 1].clone()
                } else {
                    String::new()
                }
            })
            .y_desc("fraction of scheduled originals")
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .draw()
            .map_err(|e| e.to_string())?;
        for (p, name) in parts.iter().enumerate() {
            let color = COLORS[p % COLORS.len()];
            let rects: Vec<Rectangle<(f64, f64)>> = bars
                .iter()
                .enumerate()
                .map(|(i, (_, v))| {
                    let base: f64 = v[..p].iter().sum();
                    let x = i as f64 + 1.0;
                    Rectangle::new([(x - 0.3, base), (x + 0.3, base + v[p])], color.filled())
                })
                .collect();
            chart
                .draw_series(rects)
                .map_err(|e| e.to_string())?
                .label(*name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| e.to_string())?;
        Ok(())
    };
    draw().map_err(err)?;
    root.present().map_err(|e| err(e.to_string()))
}
