//! SVG plots of one run's timeline (plotters, SVG backend only).
//!
//! Every chart keeps its legend in a strip right of the data (never over
//! it), says when a series lies exactly under another, marks the advertised
//! window and the end of the offered period where they apply, draws a
//! min/max band where the buckets are denser than the pixels (a line there
//! is a solid smear), uses integer ticks for counts, and says what a
//! one-sided trace could not record instead of drawing empty axes.

use crate::analyze::{Blocked, Timeline};
use crate::schema::Endpoint;
use plotters::prelude::*;
use std::path::Path;

/// A plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct PlotError {
    pub path: String,
    pub message: String,
}

const W: u32 = 1100;
const H: u32 = 520;
/// Width of the legend strip right of the data.
const LEGEND_W: u32 = 270;
/// Roughly the data area's width in pixels: more buckets than this and a
/// line becomes a smear, so a band is drawn instead.
const DATA_PX: usize = 700;
/// Streams drawn one by one (the rest are summed as "other streams").
pub const TOP_STREAMS: usize = 8;
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
const MARK: RGBColor = RGBColor(90, 90, 90);

/// One line of a plot.
#[derive(Default)]
pub struct Line<'a> {
    pub label: &'a str,
    pub points: Vec<(f64, f64)>,
    /// (t, lowest, highest) per bucket: drawn as a band instead of the line
    /// when there are more buckets than pixels.
    pub band: Vec<(f64, f64, f64)>,
}

impl<'a> Line<'a> {
    pub fn new(label: &'a str, points: Vec<(f64, f64)>) -> Line<'a> {
        Line {
            label,
            points,
            band: vec![],
        }
    }
}

/// A reference line across the data, named in the legend.
#[derive(Clone, Debug)]
pub enum Mark {
    /// A level (y), e.g. the advertised window.
    H(f64, String),
    /// A moment (x, seconds), e.g. the end of the offered period.
    V(f64, String),
}

/// One chart: its lines and how to read them.
#[derive(Default)]
pub struct Panel<'a> {
    pub title: String,
    pub y_label: String,
    pub lines: Vec<Line<'a>>,
    pub marks: Vec<Mark>,
    /// Counts: integer ticks only.
    pub integer_y: bool,
    /// Said in the legend strip (what a one-sided trace lacks, ...).
    pub notes: Vec<String>,
    /// Drawn in the empty data area when no line has a point.
    pub empty_reason: String,
}

fn plot_err(path: &Path) -> impl Fn(String) -> PlotError + '_ {
    move |e| PlotError {
        path: path.display().to_string(),
        message: e,
    }
}

/// Draws one panel on one chart.
pub fn line_chart(path: &Path, x_label: &str, panel: &Panel<'_>) -> Result<(), PlotError> {
    let err = plot_err(path);
    let root = SVGBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let x_max = x_extent(&panel.lines);
    draw_panel(&root, x_label, panel, x_max).map_err(&err)?;
    root.present().map_err(|e| err(e.to_string()))
}

/// Several panels stacked vertically, sharing the time axis.
pub fn stacked_chart(path: &Path, x_label: &str, panels: &[Panel<'_>]) -> Result<(), PlotError> {
    let err = plot_err(path);
    let root = SVGBackend::new(path, (W, 340 * panels.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let x_max = panels
        .iter()
        .map(|p| x_extent(&p.lines))
        .fold(1.0, f64::max);
    let areas = root.split_evenly((panels.len(), 1));
    for (area, panel) in areas.iter().zip(panels) {
        draw_panel(area, x_label, panel, x_max).map_err(&err)?;
    }
    root.present().map_err(|e| err(e.to_string()))
}

fn x_extent(lines: &[Line<'_>]) -> f64 {
    let m = lines
        .iter()
        .flat_map(|l| {
            l.points
                .iter()
                .map(|p| p.0)
                .chain(l.band.iter().map(|b| b.0))
        })
        .fold(0.0, f64::max);
    if m > 0.0 {
        m
    } else {
        1.0
    }
}

/// The value of a step line at `t` (the last point at or before it).
fn step_at(points: &[(f64, f64)], t: f64) -> Option<f64> {
    let i = points.partition_point(|p| p.0 <= t);
    (i > 0).then(|| points[i - 1].1)
}

/// Whether two lines draw the same path: within two pixels (a line's
/// width) of each other on a plot ≈ 300 px tall spanning `range`, sampled
/// across the time axis (a line that close is hidden under the other).
fn coincide(a: &[(f64, f64)], b: &[(f64, f64)], x_max: f64, range: f64) -> bool {
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let tol = range / 150.0;
    // Where only one line has begun (its first bucket can start a sample
    // earlier) nothing is hidden or shown: compare where both are drawn.
    let mut both = 0;
    for i in 0..=400 {
        let t = x_max * i as f64 / 400.0;
        if let (Some(x), Some(y)) = (step_at(a, t), step_at(b, t)) {
            if (x - y).abs() > tol {
                return false;
            }
            both += 1;
        }
    }
    both > 200
}

/// Groups of consecutive buckets, at most [`DATA_PX`]: (t, min, max) each.
fn per_pixel(band: &[(f64, f64, f64)]) -> Vec<(f64, f64, f64)> {
    let g = band.len().div_ceil(DATA_PX).max(1);
    band.chunks(g)
        .map(|c| {
            let lo = c.iter().map(|b| b.1).fold(f64::INFINITY, f64::min);
            let hi = c.iter().map(|b| b.2).fold(f64::NEG_INFINITY, f64::max);
            (c[0].0, lo, hi)
        })
        .collect()
}

/// A tick label: integers without decimals, others with as few as needed.
fn tick(y: f64) -> String {
    if y == 0.0 {
        return "0".into();
    }
    if y.abs() >= 100.0 || (y - y.round()).abs() < 1e-9 {
        return format!("{y:.0}");
    }
    let s = format!("{y:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Draws `label` wrapped in the legend strip at `y`; returns the next y.
fn legend_text<DB: DrawingBackend>(
    legend: &DrawingArea<DB, plotters::coord::Shift>,
    label: &str,
    x: i32,
    y: i32,
    width: usize,
    font: &TextStyle<'_>,
) -> Result<i32, String> {
    let parts = wrap(label, width);
    for (k, part) in parts.iter().enumerate() {
        legend
            .draw(&Text::new(
                part.clone(),
                (x, y + k as i32 * 16),
                font.clone(),
            ))
            .map_err(|e| e.to_string())?;
    }
    Ok(y + 16 * parts.len().max(1) as i32)
}

/// Splits a label into lines of at most `n` characters, at spaces.
fn wrap(s: &str, n: usize) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    let mut cur = String::new();
    for word in s.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > n {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    x_label: &str,
    panel: &Panel<'_>,
    x_max: f64,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let (w, _) = area.dim_in_pixel();
    let (data, legend) = area.split_horizontally(w.saturating_sub(LEGEND_W));
    let (mut y_min, mut y_max) = (0.0f64, 0.0f64);
    for l in &panel.lines {
        for &(_, y) in &l.points {
            y_min = y_min.min(y);
            y_max = y_max.max(y);
        }
        for &(_, lo, hi) in &l.band {
            y_min = y_min.min(lo);
            y_max = y_max.max(hi);
        }
    }
    for m in &panel.marks {
        if let Mark::H(y, _) = m {
            y_max = y_max.max(*y);
        }
    }
    if y_max <= y_min {
        y_max = y_min + 1.0;
    }
    let pad = (y_max - y_min) * 0.06;
    let y_lo = y_min - if y_min < 0.0 { pad } else { 0.0 };
    let mut chart = ChartBuilder::on(&data)
        .caption(&panel.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max * 1.02, y_lo..y_max + pad)
        .map_err(e)?;
    let integer = panel.integer_y;
    let y_fmt = move |y: &f64| -> String {
        if integer {
            if (y - y.round()).abs() < 1e-6 {
                format!("{:.0}", y.round())
            } else {
                String::new()
            }
        } else {
            tick(*y)
        }
    };
    let y_ticks = if integer {
        ((y_max - y_lo).ceil() as usize + 1).clamp(2, 8)
    } else {
        8
    };
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(&panel.y_label)
        .x_labels(12)
        .y_labels(y_ticks)
        .x_label_formatter(&|x: &f64| tick(*x))
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;

    // Which lines lie under a later one (drawn on top of them).
    let range = y_max + pad - y_lo;
    let mut under: Vec<Option<usize>> = vec![None; panel.lines.len()];
    // Per banded line: its lower and upper edge, one point per pixel.
    type Edges = Option<(Vec<(f64, f64)>, Vec<(f64, f64)>)>;
    let edges: Vec<Edges> = panel
        .lines
        .iter()
        .map(|l| {
            (l.band.len() > DATA_PX).then(|| {
                let px = per_pixel(&l.band);
                (
                    px.iter().map(|b| (b.0, b.1)).collect(),
                    px.iter().map(|b| (b.0, b.2)).collect(),
                )
            })
        })
        .collect();
    for i in 0..panel.lines.len() {
        for j in (i + 1..panel.lines.len()).rev() {
            let same = match (&edges[i], &edges[j]) {
                (None, None) => {
                    coincide(&panel.lines[i].points, &panel.lines[j].points, x_max, range)
                }
                (Some((lo_i, hi_i)), Some((lo_j, hi_j))) => {
                    coincide(lo_i, lo_j, x_max, range) && coincide(hi_i, hi_j, x_max, range)
                }
                _ => false,
            };
            if same {
                under[i] = Some(j);
                break;
            }
        }
    }
    let mut banded = vec![false; panel.lines.len()];
    for (i, l) in panel.lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        if let Some((lo, hi)) = &edges[i] {
            banded[i] = true;
            // The band between the lowest and highest value per pixel, and
            // its two edges (so a flat stretch still shows as a line).
            let outline: Vec<(f64, f64)> =
                hi.iter().copied().chain(lo.iter().rev().copied()).collect();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    outline,
                    color.mix(0.3).filled(),
                )))
                .map_err(e)?;
            for edge in [lo, hi] {
                chart
                    .draw_series(LineSeries::new(edge.iter().copied(), color.stroke_width(1)))
                    .map_err(e)?;
            }
        } else if !l.points.is_empty() {
            chart
                .draw_series(LineSeries::new(
                    l.points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(e)?;
        }
    }
    let (x0, x1) = (0.0, x_max * 1.02);
    for m in &panel.marks {
        match m {
            Mark::H(y, _) => {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(x0, *y), (x1, *y)],
                        MARK.stroke_width(1),
                    )))
                    .map_err(e)?;
            }
            Mark::V(x, _) => {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(*x, y_lo), (*x, y_max + pad)],
                        MARK.stroke_width(1),
                    )))
                    .map_err(e)?;
            }
        }
    }
    if panel
        .lines
        .iter()
        .all(|l| l.points.is_empty() && l.band.is_empty())
    {
        let (pw, ph) = data.dim_in_pixel();
        data.draw(&Text::new(
            panel.empty_reason.clone(),
            (
                pw as i32 / 2 - 4 * panel.empty_reason.len() as i32,
                ph as i32 / 2,
            ),
            ("sans-serif", 16).into_font().color(&MARK),
        ))
        .map_err(e)?;
    }

    // The legend strip.
    let mut y = 40i32;
    let font: TextStyle = ("sans-serif", 13).into();
    let any = panel
        .lines
        .iter()
        .any(|l| !l.points.is_empty() || !l.band.is_empty());
    for (i, l) in panel.lines.iter().enumerate() {
        if l.points.is_empty() && l.band.is_empty() {
            if any {
                let gray: TextStyle = ("sans-serif", 13).into_font().color(&MARK);
                y = legend_text(
                    &legend,
                    &format!("{}: none in this trace", l.label),
                    32,
                    y,
                    32,
                    &gray,
                )? + 8;
            }
            continue;
        }
        let color = COLORS[i % COLORS.len()];
        let mut label = l.label.to_string();
        if banded[i] {
            label.push_str(" (band: min–max per pixel)");
        }
        if let Some(j) = under[i] {
            label.push_str(&format!(
                " — hidden under \"{}\" (within 2 px)",
                panel.lines[j].label
            ));
        }
        legend
            .draw(&PathElement::new(
                vec![(4, y + 7), (26, y + 7)],
                color.stroke_width(4),
            ))
            .map_err(e)?;
        y = legend_text(&legend, &label, 32, y, 32, &font)? + 8;
    }
    for m in &panel.marks {
        let label = match m {
            Mark::H(_, s) | Mark::V(_, s) => s,
        };
        legend
            .draw(&PathElement::new(
                vec![(4, y + 7), (26, y + 7)],
                MARK.stroke_width(1),
            ))
            .map_err(e)?;
        y = legend_text(&legend, label, 32, y, 32, &font)? + 8;
    }
    let note_font = ("sans-serif", 12).into_font().color(&MARK);
    for n in &panel.notes {
        y = legend_text(&legend, n, 4, y, 40, &note_font)? + 6;
    }
    Ok(())
}

/// Client blocked intervals as bars, one row per cause: window credit, h2's
/// send buffer, the socket.
pub fn intervals_chart(path: &Path, tl: &Timeline) -> Result<(), PlotError> {
    let err = plot_err(path);
    let x_max = tl
        .intervals
        .iter()
        .map(|i| i.1)
        .fold(1.0f64, f64::max)
        .max(tl.end_s);
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
    let mut title = if tl.has_client {
        format!(
            "Client blocked: window {ws:.2} s ({wn}), h2 buffer {hs:.2} s ({hn}), socket {ss:.3} s ({sn})"
        )
    } else {
        "Client blocked: no client tap in this trace, so no client waits were recorded".into()
    };
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
        .x_label_formatter(&|x: &f64| tick(*x))
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

/// The unit a byte axis reads best in for values up to `peak`: bytes below
/// 4 KiB, KiB below 4 MiB, MiB above; and its size.
fn byte_unit(peak: f64) -> (&'static str, f64) {
    if peak >= 4.0 * 1048576.0 {
        ("MiB", 1048576.0)
    } else if peak >= 4.0 * 1024.0 {
        ("KiB", 1024.0)
    } else {
        ("bytes", 1.0)
    }
}

/// The highest value a series took.
fn peak(s: &crate::series::Series, end_s: f64) -> f64 {
    s.envelope(end_s).iter().map(|b| b.2).fold(0.0, f64::max)
}

fn scaled(points: Vec<(f64, f64)>, k: f64) -> Vec<(f64, f64)> {
    points.into_iter().map(|(x, y)| (x, y / k)).collect()
}

fn scaled_band(band: Vec<(f64, f64, f64)>, k: f64) -> Vec<(f64, f64, f64)> {
    band.into_iter()
        .map(|(t, a, b)| (t, a / k, b / k))
        .collect()
}

/// The streams with the most client→server bytes (server tap when the trace
/// has it), as (client-tap connection, stream, bytes), most first. The
/// client tap's connection ids come through the shared `conn_key`.
pub fn top_streams(tl: &Timeline) -> Vec<(u32, u32, f64)> {
    let tap = if tl.stream_bytes.keys().any(|k| k.0 == Endpoint::Server) {
        Endpoint::Server
    } else {
        Endpoint::Client
    };
    let client_conn = |ep: Endpoint, conn: u32| -> Option<u32> {
        if ep == Endpoint::Client {
            return Some(conn);
        }
        let key = tl.conn_keys.get(&(ep, conn))?;
        tl.conn_keys
            .iter()
            .find(|(k, v)| k.0 == Endpoint::Client && *v == key)
            .map(|(k, _)| k.1)
    };
    let mut v: Vec<(u32, u32, f64)> = tl
        .stream_bytes
        .iter()
        .filter(|(k, _)| k.0 == tap)
        .map(|(k, s)| {
            let bytes = s.points().last().map_or(0.0, |p| p.1);
            (client_conn(k.0, k.1).unwrap_or(k.1), k.2, bytes)
        })
        .collect();
    v.sort_by(|a, b| b.2.total_cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
    v
}

/// The standard plots of one run, written into `dir`. Returns the file names.
pub fn run_plots(dir: &Path, tl: &Timeline) -> Result<Vec<String>, PlotError> {
    let x = "time since trace start (s)";
    let no_client = "no client tap in this trace: the client's credit was not recorded";
    let no_server = "no server tap in this trace: what the server held was not recorded";
    let offer_end = tl.offer_end_s.map(|t| {
        Mark::V(
            t,
            "end of the offered period (last scheduled message)".into(),
        )
    });

    // Top panel: credit per stream (top N by bytes), the connection's, and
    // what the server had not released.
    let streams = top_streams(tl);
    let many = tl.stream_credit.len() > 1;
    let mut labels: Vec<String> = vec![];
    let mut credit_series = vec![];
    if many {
        for (conn, stream, _) in streams.iter().take(TOP_STREAMS) {
            if let Some(s) = tl.stream_credit.get(&(*conn, *stream)) {
                let conns = tl
                    .stream_credit
                    .keys()
                    .map(|k| k.0)
                    .collect::<std::collections::BTreeSet<_>>();
                labels.push(if conns.len() > 1 {
                    format!("stream {stream} of conn {conn}: credit (client tap)")
                } else {
                    format!("stream {stream} credit (client tap)")
                });
                credit_series.push(s);
            }
        }
    } else if !tl.credit_stream_client.is_empty() {
        labels.push("stream credit (client tap)".into());
        credit_series.push(&tl.credit_stream_client);
    }
    let credit_peak = credit_series
        .iter()
        .copied()
        .chain([&tl.credit_conn_client, &tl.unreleased])
        .map(|s| peak(s, tl.end_s))
        .fold(tl.advertised_stream_window.unwrap_or(0) as f64, f64::max);
    let (credit_unit, k) = byte_unit(credit_peak);
    let mut top_lines: Vec<Line<'_>> = credit_series
        .iter()
        .zip(&labels)
        .map(|(s, l)| Line {
            label: l.as_str(),
            points: scaled(s.filled_until(tl.end_s), k),
            band: scaled_band(s.envelope(tl.end_s), k),
        })
        .collect();
    top_lines.push(Line {
        label: "connection credit (client tap)",
        points: scaled(tl.credit_conn_client.filled_until(tl.end_s), k),
        band: scaled_band(tl.credit_conn_client.envelope(tl.end_s), k),
    });
    top_lines.push(Line {
        label: "received, not yet released (server)",
        points: scaled(tl.unreleased.filled_until(tl.end_s), k),
        band: scaled_band(tl.unreleased.envelope(tl.end_s), k),
    });
    let mut top_notes = vec![];
    if many && tl.stream_credit.len() > TOP_STREAMS {
        top_notes.push(format!(
            "{} streams have credit series; the {TOP_STREAMS} with the most bytes are drawn",
            tl.stream_credit.len()
        ));
    }
    if tl.streams_untracked > 0 {
        top_notes.push(format!(
            "{} later streams were not tracked (first {} only)",
            tl.streams_untracked,
            crate::analyze::summary::MAX_STREAM_SERIES
        ));
    }
    if !tl.has_client {
        top_notes.push(no_client.into());
    }
    if !tl.has_server {
        top_notes.push(no_server.into());
    }
    let mut top_marks = vec![];
    if let Some(w) = tl.advertised_stream_window {
        top_marks.push(Mark::H(
            w as f64 / k,
            format!("advertised stream window ({w} B, SETTINGS)"),
        ));
    }
    top_marks.extend(offer_end.clone());
    let server_reason = |what: &str| format!("no server tap in this trace: {what} not recorded");
    let mut server_notes = vec![];
    if !tl.has_server {
        server_notes.push(no_server.to_string());
    }
    let (owned_unit, ko) = byte_unit(peak(&tl.owned_bytes, tl.end_s));
    let panels = [
        Panel {
            title: "Transport: credit the client saw, bytes the server had not released".into(),
            y_label: credit_unit.into(),
            lines: top_lines,
            marks: top_marks,
            notes: top_notes,
            empty_reason: "no tap recorded credit in this trace".into(),
            ..Panel::default()
        },
        Panel {
            title: "Application: bytes owned (decoded, not yet completed)".into(),
            y_label: owned_unit.into(),
            lines: vec![Line {
                label: "owned by the application",
                points: scaled(tl.owned_bytes.filled_until(tl.end_s), ko),
                band: scaled_band(tl.owned_bytes.envelope(tl.end_s), ko),
            }],
            marks: offer_end.clone().into_iter().collect(),
            notes: server_notes.clone(),
            empty_reason: server_reason("owned bytes"),
            ..Panel::default()
        },
        Panel {
            title: "Application queue depth".into(),
            y_label: "messages".into(),
            lines: vec![Line {
                label: "queue depth (all RPCs)",
                points: tl.queue_depth.filled_until(tl.end_s),
                band: tl.queue_depth.envelope(tl.end_s),
            }],
            marks: offer_end.clone().into_iter().collect(),
            integer_y: true,
            notes: server_notes.clone(),
            empty_reason: server_reason("the queue"),
        },
    ];
    stacked_chart(&dir.join("credit.svg"), x, &panels)?;
    line_chart(
        &dir.join("queue.svg"),
        x,
        &Panel {
            title: "Application queue depth".into(),
            y_label: "messages queued".into(),
            lines: vec![Line {
                label: "queue depth (all RPCs)",
                points: tl.queue_depth.filled_until(tl.end_s),
                band: tl.queue_depth.envelope(tl.end_s),
            }],
            marks: offer_end.clone().into_iter().collect(),
            integer_y: true,
            notes: server_notes.clone(),
            empty_reason: server_reason("the queue"),
        },
    )?;
    let mut cum_notes = vec![];
    if !tl.has_client {
        cum_notes.push("no client tap in this trace: scheduled and sent were not recorded".into());
    }
    if !tl.has_server {
        cum_notes
            .push("no server tap in this trace: completed and discarded were not recorded".into());
    }
    line_chart(
        &dir.join("cumulative.svg"),
        x,
        &Panel {
            title: "Messages over time: scheduled, sent, completed, discarded".into(),
            y_label: "messages (cumulative)".into(),
            lines: vec![
                Line::new("scheduled (client)", tl.scheduled.filled_until(tl.end_s)),
                Line::new(
                    "sent: handed to h2 (client)",
                    tl.sent.filled_until(tl.end_s),
                ),
                Line::new(
                    "completed (server worker)",
                    tl.completed.filled_until(tl.end_s),
                ),
                Line::new("discarded (server)", tl.discarded.filled_until(tl.end_s)),
            ],
            marks: offer_end.clone().into_iter().collect(),
            integer_y: true,
            notes: cum_notes,
            empty_reason: "no messages in this trace".into(),
        },
    )?;
    intervals_chart(&dir.join("blocked.svg"), tl)?;
    let mut files = vec![
        "credit.svg".to_string(),
        "queue.svg".into(),
        "cumulative.svg".into(),
        "blocked.svg".into(),
    ];
    if streams.len() > 1 {
        stream_bytes_chart(&dir.join("streams.svg"), tl, &streams)?;
        files.push("streams.svg".into());
    } else {
        let _ = std::fs::remove_file(dir.join("streams.svg"));
    }
    Ok(files)
}

/// streams.svg: a stacked area of client→server bytes per stream over time
/// (the top streams by bytes, the rest summed), from the server's tap when
/// the trace has it.
fn stream_bytes_chart(
    path: &Path,
    tl: &Timeline,
    streams: &[(u32, u32, f64)],
) -> Result<(), PlotError> {
    let err = plot_err(path);
    let tap = if tl.stream_bytes.keys().any(|k| k.0 == Endpoint::Server) {
        Endpoint::Server
    } else {
        Endpoint::Client
    };
    let series: Vec<(&(Endpoint, u32, u32), &crate::series::Series)> =
        tl.stream_bytes.iter().filter(|(k, _)| k.0 == tap).collect();
    let width = series.iter().map(|s| s.1.width_ns()).max().unwrap_or(1);
    // Layer order: most bytes first (bottom); the rest as one layer.
    let rank = |k: &(Endpoint, u32, u32)| -> usize {
        streams
            .iter()
            .position(|s| {
                s.1 == k.2 && (tap == Endpoint::Client && s.0 == k.1 || tap == Endpoint::Server)
            })
            .unwrap_or(usize::MAX)
    };
    let n_layers = streams.len().min(TOP_STREAMS) + usize::from(streams.len() > TOP_STREAMS);
    let grids: Vec<(usize, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(k, s)| {
            let g: Vec<(f64, f64)> = s
                .coarsened(width)
                .grid(tl.end_s)
                .into_iter()
                .map(|(t, b)| (t, b.map_or(0.0, |b| b.value)))
                .collect();
            (rank(k).min(TOP_STREAMS), g)
        })
        .collect();
    let len = grids.iter().map(|g| g.1.len()).max().unwrap_or(0);
    let mut layers = vec![vec![0.0f64; len]; n_layers];
    for (layer, g) in &grids {
        let layer = (*layer).min(n_layers - 1);
        for (i, (_, v)) in g.iter().enumerate() {
            layers[layer][i] += v;
        }
    }
    let ts: Vec<f64> = (0..len).map(|i| (i as u64 * width) as f64 / 1e9).collect();
    let mib = 1048576.0;
    // Running sums: the top edge of each layer.
    let mut tops = layers.clone();
    for l in 1..tops.len() {
        let (below, rest) = tops.split_at_mut(l);
        for (v, b) in rest[0].iter_mut().zip(&below[l - 1]) {
            *v += b;
        }
    }
    let y_max = tops
        .last()
        .map_or(1.0, |t| t.iter().copied().fold(0.0, f64::max))
        / mib;
    let x_max = ts.last().copied().unwrap_or(1.0).max(1e-3);
    let root = SVGBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (data, legend) = root.split_horizontally(W - LEGEND_W);
    let mut chart = ChartBuilder::on(&data)
        .caption(
            format!(
                "Bytes per stream, client→server, stacked ({} tap)",
                tap.as_str()
            ),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max * 1.02, 0.0..(y_max * 1.06).max(1e-6))
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("time since trace start (s)")
        .y_desc("MiB (cumulative)")
        .x_labels(12)
        .y_labels(8)
        .x_label_formatter(&|x: &f64| tick(*x))
        .y_label_formatter(&|y: &f64| tick(*y))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    // Top layer first, so each lower area paints over the one above it.
    for l in (0..tops.len()).rev() {
        let color = COLORS[l % COLORS.len()];
        chart
            .draw_series(AreaSeries::new(
                ts.iter().copied().zip(tops[l].iter().map(|v| v / mib)),
                0.0,
                color.mix(0.85).filled(),
            ))
            .map_err(|e| err(e.to_string()))?;
    }
    let font: TextStyle = ("sans-serif", 13).into();
    let mut y = 40;
    for l in (0..n_layers).rev() {
        let label = match streams.get(l) {
            Some((conn, stream, bytes)) if l < TOP_STREAMS => {
                format!("stream {stream} (conn {conn}): {:.2} MiB", bytes / mib)
            }
            _ => format!("{} other streams", streams.len() - TOP_STREAMS),
        };
        legend
            .draw(&Rectangle::new(
                [(4, y), (26, y + 12)],
                COLORS[l % COLORS.len()].mix(0.85).filled(),
            ))
            .map_err(|e| err(e.to_string()))?;
        legend
            .draw(&Text::new(label, (32, y), font.clone()))
            .map_err(|e| err(e.to_string()))?;
        y += 22;
    }
    root.present().map_err(|e| err(e.to_string()))
}

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
    line_chart(
        &dir.join("compare-credit.svg"),
        x,
        &panel(
            "Stream credit seen by the client (client tap, first stream)",
            "KiB",
            false,
            runs.iter()
                .map(|(label, tl)| Line {
                    label: label.as_str(),
                    points: scaled(tl.credit_stream_client.filled_until(tl.end_s), 1024.0),
                    band: scaled_band(tl.credit_stream_client.envelope(tl.end_s), 1024.0),
                })
                .collect(),
        ),
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

/// How a swept parameter's values become x positions.
#[derive(Clone, Debug)]
pub struct SweepAxis {
    pub label: String,
    kind: AxisKind,
    values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum AxisKind {
    /// Durations, in milliseconds.
    Millis,
    /// Sizes with a unit, in KiB.
    Kib,
    /// Plain numbers.
    Number,
    /// Anything else: one position per value, in order.
    Category,
}

/// A duration such as `25ms`, `1.5s`, `2m` in milliseconds.
fn millis(v: &str) -> Option<f64> {
    let v = v.trim();
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, unit) = v.split_at(split);
    let n: f64 = n.parse().ok()?;
    let k = match unit {
        "ns" => 1e-6,
        "us" | "µs" => 1e-3,
        "ms" => 1.0,
        "s" => 1e3,
        "m" | "min" => 60e3,
        _ => return None,
    };
    Some(n * k)
}

/// A size such as `64KiB`, `1MiB`, `16kB` in bytes (only with a unit).
fn bytes(v: &str) -> Option<f64> {
    let v = v.trim();
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (n, unit) = v.split_at(split);
    let n: f64 = n.parse().ok()?;
    let k = match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1048576.0,
        "GiB" => 1073741824.0,
        "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return None,
    };
    Some(n * k)
}

impl SweepAxis {
    /// The axis for `param` over `values`: milliseconds, KiB, numbers, or
    /// categories, whichever reads every value.
    pub fn of(param: &str, values: &[String]) -> SweepAxis {
        let all = |f: &dyn Fn(&str) -> Option<f64>| values.iter().all(|v| f(v).is_some());
        let (kind, unit) = if all(&millis) {
            (AxisKind::Millis, " (ms)")
        } else if all(&|v| bytes(v).or_else(|| v.parse::<f64>().ok()))
            && values.iter().any(|v| bytes(v).is_some())
        {
            (AxisKind::Kib, " (KiB)")
        } else if all(&|v| v.parse::<f64>().ok()) {
            (AxisKind::Number, "")
        } else {
            (AxisKind::Category, "")
        };
        SweepAxis {
            label: format!("--{param}{unit}"),
            kind,
            values: values.to_vec(),
        }
    }

    /// A value's x position.
    pub fn x(&self, v: &str) -> Option<f64> {
        match self.kind {
            AxisKind::Millis => millis(v),
            AxisKind::Kib => bytes(v)
                .or_else(|| v.parse::<f64>().ok())
                .map(|b| b / 1024.0),
            AxisKind::Number => v.parse().ok(),
            AxisKind::Category => self.values.iter().position(|x| x == v).map(|i| i as f64),
        }
    }
}

/// One line of a sweep plot: (x, the configuration's row) per value.
pub struct SweepLine {
    pub label: String,
    pub points: Vec<(f64, crate::compare::Row)>,
}

/// sweep.svg: the steady send rate (with the `bound` curves, W/RTT, when
/// given: (legend label, points) each), the
/// peak bytes the application owned and the client's window-blocked time
/// against the swept parameter; medians with min–max whiskers over repeats.
pub fn sweep_chart(
    path: &Path,
    param: &str,
    axis: &SweepAxis,
    lines: &[SweepLine],
    bound: &[(String, Vec<(f64, f64)>)],
) -> Result<(), PlotError> {
    let err = plot_err(path);
    type Pick = fn(&crate::compare::Row) -> crate::compare::Stat;
    let figures: [(&str, &str, Pick); 3] = [
        ("Steady send rate", "messages/s", |r| r.send_rate),
        ("Peak bytes owned by the application", "MiB", |r| {
            r.max_owned_mib
        }),
        ("Client blocked on window credit", "seconds", |r| {
            r.window_blocked_s
        }),
    ];
    let root = SVGBackend::new(path, (W, 340 * figures.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .collect();
    let x_lo = xs.iter().copied().fold(f64::INFINITY, f64::min).min(0.0);
    let x_hi = xs
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .max(x_lo + 1.0);
    let span = x_hi - x_lo;
    let areas = root.split_evenly((figures.len(), 1));
    for (fi, (area, (title, unit, pick))) in areas.iter().zip(figures).enumerate() {
        let e = |x: DrawingAreaErrorKind<std::io::Error>| err(x.to_string());
        let (data, legend) = area.split_horizontally(W - LEGEND_W);
        let mut y_max = lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| pick(&p.1).max))
            .fold(0.0, f64::max);
        let show_bound = fi == 0 && !bound.is_empty();
        if show_bound {
            // The bound is far above at small delays: cap the axis at 1.5×
            // the measured peak so the measurements stay readable.
            let peak = y_max.max(1e-9);
            y_max = bound
                .iter()
                .flat_map(|b| b.1.iter().map(|p| p.1))
                .fold(y_max, f64::max)
                .min(peak * 1.5);
        }
        let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
        let mut chart = ChartBuilder::on(&data)
            .caption(format!("{title} against --{param}"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d((x_lo - span * 0.05)..(x_hi + span * 0.05), 0.0..y_max)
            .map_err(e)?;
        let ax = axis.clone();
        let x_fmt = move |x: &f64| -> String {
            if ax.kind == AxisKind::Category {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    return ax.values.get(i as usize).cloned().unwrap_or_default();
                }
                return String::new();
            }
            tick(*x)
        };
        chart
            .configure_mesh()
            .x_desc(axis.label.as_str())
            .y_desc(unit)
            .x_labels(10)
            .y_labels(8)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&|y: &f64| tick(*y))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 16))
            .draw()
            .map_err(e)?;
        let mut entries: Vec<(String, RGBColor, bool)> = vec![];
        for (i, l) in lines.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let mut pts: Vec<(f64, crate::compare::Stat)> =
                l.points.iter().map(|(x, r)| (*x, pick(r))).collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|(x, s)| (*x, s.median)),
                    color.stroke_width(2),
                ))
                .map_err(e)?;
            chart
                .draw_series(
                    pts.iter()
                        .map(|(x, s)| Circle::new((*x, s.median), 4, color.filled())),
                )
                .map_err(e)?;
            chart
                .draw_series(pts.iter().map(|(x, s)| {
                    PathElement::new(vec![(*x, s.min), (*x, s.max)], color.stroke_width(1))
                }))
                .map_err(e)?;
            entries.push((format!("{} (median, min–max)", l.label), color, false));
        }
        if show_bound {
            for (label, curve) in bound {
                let top = y_max / 1.1 * 1.05;
                chart
                    .draw_series(LineSeries::new(
                        curve.iter().filter(|p| p.1 <= top).copied(),
                        MARK.stroke_width(1),
                    ))
                    .map_err(e)?;
                entries.push((label.clone(), MARK, true));
            }
        }
        let font: TextStyle = ("sans-serif", 13).into();
        let mut y = 40i32;
        for (label, color, thin) in entries {
            legend
                .draw(&PathElement::new(
                    vec![(4, y + 7), (26, y + 7)],
                    color.stroke_width(if thin { 1 } else { 4 }),
                ))
                .map_err(e)?;
            y = legend_text(&legend, &label, 32, y, 32, &font).map_err(&err)? + 8;
        }
    }
    root.present().map_err(|e| err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legend_of(panel: &Panel<'_>) -> String {
        let dir = std::env::temp_dir().join(format!("h2probe-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.svg", panel.title.replace(' ', "-")));
        line_chart(&path, "t (s)", panel).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        svg.split("<text ")
            .filter_map(|t| t.split_once('>')?.1.split("</text>").next())
            .map(|t| t.trim().replace("&quot;", "\""))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_line_under_another_is_named_and_a_different_one_is_not() {
        let ramp: Vec<(f64, f64)> = (0..100).map(|i| (i as f64 / 10.0, i as f64)).collect();
        let near: Vec<(f64, f64)> = ramp.iter().map(|&(t, v)| (t, v + 0.3)).collect();
        let apart: Vec<(f64, f64)> = ramp.iter().map(|&(t, v)| (t, v / 2.0)).collect();
        let l = legend_of(&Panel {
            title: "coincide".into(),
            lines: vec![
                Line::new("low", ramp),
                Line::new("high", near),
                Line::new("half", apart),
            ],
            ..Panel::default()
        });
        assert!(
            l.contains("low — hidden under \"high\" (within 2 px)"),
            "{l}"
        );
        assert!(!l.contains("half — hidden"), "{l}");
        assert!(!l.contains("high — hidden"), "{l}");
    }

    #[test]
    fn dense_oscillation_becomes_a_band_and_counts_get_integer_ticks() {
        // Per-frame credit: 2,000 buckets alternating 32 and 64 KiB.
        let band: Vec<(f64, f64, f64)> =
            (0..2000).map(|i| (i as f64 / 1000.0, 32.0, 64.0)).collect();
        let l = legend_of(&Panel {
            title: "band".into(),
            lines: vec![Line {
                label: "credit",
                points: vec![],
                band,
            }],
            ..Panel::default()
        });
        assert!(l.contains("credit (band: min–max per pixel)"), "{l}");
        let l = legend_of(&Panel {
            title: "ints".into(),
            lines: vec![Line::new("depth", vec![(0.0, 0.0), (1.0, 3.0)])],
            integer_y: true,
            ..Panel::default()
        });
        let ticks: Vec<&str> = l.split(' ').filter(|t| t.parse::<f64>().is_ok()).collect();
        // (x runs 0–1, so a y tick between 1 and 3 would show as 1.5, 2.5.)
        assert!(ticks.contains(&"3") && ticks.contains(&"2"), "{l}");
        assert!(!ticks.contains(&"1.5") && !ticks.contains(&"2.5"), "{l}");
    }

    #[test]
    fn byte_axes_take_the_unit_that_fits() {
        assert_eq!(byte_unit(900.0).0, "bytes");
        assert_eq!(byte_unit(65_535.0).0, "KiB");
        assert_eq!(byte_unit(16.0 * 1048576.0).0, "MiB");
    }

    #[test]
    fn a_swept_value_finds_its_axis() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let a = SweepAxis::of("link-delay", &v(&["0ms", "1.5s"]));
        assert_eq!((a.x("0ms"), a.x("1.5s")), (Some(0.0), Some(1500.0)));
        let a = SweepAxis::of("stream-window", &v(&["65535", "1MiB"]));
        assert_eq!(a.label, "--stream-window (KiB)");
        assert_eq!(a.x("1MiB"), Some(1024.0));
        let a = SweepAxis::of("streams", &v(&["1", "4"]));
        assert_eq!(a.x("4"), Some(4.0));
        let a = SweepAxis::of("release", &v(&["frame", "complete"]));
        assert_eq!(a.x("complete"), Some(1.0));
    }
}
