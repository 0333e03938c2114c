//! Drawing one chart: the data area, the legend strip right of it, marks,
//! bands and the note for a line hidden under another or along the x axis.

use super::*;
use plotters::prelude::*;

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

/// The lowest and highest value the lines reach, points and bands, with 0
/// always inside.
pub(crate) fn y_extent(lines: &[Line<'_>]) -> (f64, f64) {
    let values = lines.iter().flat_map(|l| {
        l.points
            .iter()
            .map(|p| (p.1, p.1))
            .chain(l.band.iter().map(|b| (b.1, b.2)))
    });
    values.fold((0.0f64, 0.0f64), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)))
}

/// The value of a step line at `t` (the last point at or before it).
fn step_at(points: &[(f64, f64)], t: f64) -> Option<f64> {
    let i = points.partition_point(|p| p.0 <= t);
    (i > 0).then(|| points[i - 1].1)
}

/// How much of the time axis two lines draw as one path: the share of
/// samples across it where both are drawn and lie within two pixels (a
/// line's width) of each other on a plot ≈ 300 px tall spanning `range`.
/// `None` when they are drawn together over less than half the axis.
fn coincide(a: &[(f64, f64)], b: &[(f64, f64)], x_max: f64, range: f64) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let tol = range / 150.0;
    // Where only one line has begun (its first bucket can start a sample
    // earlier) nothing is hidden or shown: compare where both are drawn.
    let (mut both, mut close) = (0u32, 0u32);
    for i in 0..=400 {
        let t = x_max * i as f64 / 400.0;
        if let (Some(x), Some(y)) = (step_at(a, t), step_at(b, t)) {
            both += 1;
            close += u32::from((x - y).abs() <= tol);
        }
    }
    (both > 200).then(|| f64::from(close) / f64::from(both))
}

/// A line drawn under another for at least this share of the time axis is
/// named as under it (with the share when it is not all of it): a line
/// that shows over no more than 3 % of the axis (30 pixels of 1,000) is as
/// good as hidden; one that shows over more is seen.
const UNDER_SHARE: f64 = 0.97;

/// The highest value of a line that never rises more than two pixels off
/// the x axis at `y_lo` (the axis hides it), as [`coincide`] judges a line
/// hidden under another.
fn along_axis(l: &Line<'_>, y_lo: f64, range: f64) -> Option<f64> {
    let values = l
        .points
        .iter()
        .map(|p| p.1)
        .chain(l.band.iter().flat_map(|b| [b.1, b.2]));
    let high = values.fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))?;
    (high - y_lo <= range / 150.0).then_some(high)
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

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    x_label: &str,
    panel: &Panel<'_>,
    x_max: f64,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let (w, _) = area.dim_in_pixel();
    let (data, legend) = area.split_horizontally(w.saturating_sub(LEGEND_W));
    let (y_min, mut y_max) = y_extent(&panel.lines);
    for m in &panel.marks {
        if let Mark::H(y, _) = m {
            y_max = y_max.max(*y);
        }
    }
    y_max = y_max.max(panel.y_at_least);
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
        .x_label_formatter(&|x: &f64| {
            if !panel.integer_x {
                tick(*x)
            } else if (x - x.round()).abs() < 1e-6 {
                format!("{:.0}", x.round())
            } else {
                String::new()
            }
        })
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(e)?;

    // Which lines lie under a later one (drawn on top of them).
    let range = y_max + pad - y_lo;
    let mut under: Vec<Option<(usize, f64)>> = vec![None; panel.lines.len()];
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
            let share = match (&edges[i], &edges[j]) {
                (None, None) => {
                    coincide(&panel.lines[i].points, &panel.lines[j].points, x_max, range)
                }
                (Some((lo_i, hi_i)), Some((lo_j, hi_j))) => {
                    match (
                        coincide(lo_i, lo_j, x_max, range),
                        coincide(hi_i, hi_j, x_max, range),
                    ) {
                        (Some(lo), Some(hi)) => Some(lo.min(hi)),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(share) = share.filter(|&s| s >= UNDER_SHARE) {
                under[i] = Some((j, share));
                break;
            }
        }
    }
    let mut banded = vec![false; panel.lines.len()];
    for (i, l) in panel.lines.iter().enumerate() {
        let color = COLORS[(panel.first_color + i) % COLORS.len()];
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

    // The legend strip: every entry when they fit its height; else in a
    // smaller type, and past what still fits a note of how many are left
    // out (12 entries of 8 streams were drawn over one another).
    let any = panel
        .lines
        .iter()
        .any(|l| !l.points.is_empty() || !l.band.is_empty());
    const BAND: &str = " (band: min–max per pixel)";
    let mut entries: Vec<LegendEntry> = vec![];
    // Whether an entry is among the first to leave out (parallel to `entries`).
    let mut shed: Vec<bool> = vec![];
    for (i, l) in panel.lines.iter().enumerate() {
        if l.points.is_empty() && l.band.is_empty() {
            if any {
                entries.push(LegendEntry::Gray(format!(
                    "{}: {}",
                    l.label,
                    if panel.absent.is_empty() {
                        "none in this trace"
                    } else {
                        &panel.absent
                    }
                )));
                shed.push(i < panel.shed_first);
            }
            continue;
        }
        shed.push(i < panel.shed_first);
        let mut label = l.label.to_string();
        if banded[i] {
            label.push_str(BAND);
        }
        if let Some((j, share)) = under[i] {
            label.push_str(&if share == 1.0 {
                format!(" — hidden under \"{}\" (within 2 px)", panel.lines[j].label)
            } else {
                // Rounded down: never "100 %" for a line that shows.
                format!(
                    " — under \"{}\" (within 2 px) for {} % of the time axis",
                    panel.lines[j].label,
                    (share * 100.0).floor()
                )
            });
        } else if let Some(high) = along_axis(l, y_lo, range) {
            label.push_str(&if high == y_lo {
                format!(" — along the x axis ({} throughout)", tick(high))
            } else {
                format!(" — along the x axis (never above {})", tick(high))
            });
        }
        entries.push(LegendEntry::Line(
            COLORS[(panel.first_color + i) % COLORS.len()],
            label,
        ));
    }
    for m in &panel.marks {
        entries.push(match m {
            Mark::H(_, s) => LegendEntry::Mark(s.to_string(), false),
            Mark::V(_, s) => LegendEntry::Mark(s.to_string(), true),
        });
    }
    for n in &panel.notes {
        entries.push(LegendEntry::Note(n.to_string()));
    }
    shed.resize(entries.len(), false);
    let (_, h) = legend.dim_in_pixel();
    let room = h as i32 - 40 - 4;
    let fits = |entries: &[LegendEntry], size: &LegendSize| {
        entries.iter().map(|x| x.height(size)).sum::<i32>() <= room
    };
    let size = [LegendSize::NORMAL, LegendSize::COMPACT]
        .into_iter()
        .find(|size| fits(&entries, size))
        .unwrap_or(LegendSize::COMPACT);
    // Still too tall: the band remark once, not on every series.
    if !fits(&entries, &size) && entries.iter().any(|x| x.text().contains(BAND)) {
        for x in entries.iter_mut() {
            if let LegendEntry::Line(_, t) = x {
                *t = t.replace(BAND, "");
            }
        }
        entries.insert(0, LegendEntry::Note("bands: min–max per pixel".to_string()));
        shed.insert(0, false);
    }
    // Past the room, entries are left out and counted in one line drawn
    // where the first of them stood: first the lines the panel marks as
    // shed first (one of many streams tells less than the totals), from
    // the last back; then series and marks from the end; notes last, as
    // they say what the panel leaves out or lacks (an 80-stream run lost
    // both of its notes, and its connection credit's name, this way).
    let left_out = |n: usize| {
        LegendEntry::Note(format!(
            "… {n} more {} not shown (too many for this panel)",
            if n == 1 { "entry" } else { "entries" }
        ))
    };
    let heights: Vec<i32> = entries.iter().map(|x| x.height(&size)).collect();
    let mut omit = vec![false; entries.len()];
    let mut need = heights.iter().sum::<i32>() - room;
    if need > 0 {
        need += left_out(entries.len()).height(&size);
        let passes: [&dyn Fn(usize) -> bool; 3] = [
            &|i| shed[i],
            &|i| !matches!(entries[i], LegendEntry::Note(_)),
            &|_| true,
        ];
        for pass in passes {
            for i in (0..entries.len()).rev() {
                if need > 0 && !omit[i] && pass(i) {
                    omit[i] = true;
                    need -= heights[i];
                }
            }
        }
    }
    let omitted = omit.iter().filter(|&&o| o).count();
    let mut marked = false;
    let mut y = 40i32;
    for (entry, omit) in entries.iter().zip(&omit) {
        if !omit {
            y = entry.draw(&legend, y, &size)?;
        } else if !marked {
            y = left_out(omitted).draw(&legend, y, &size)?;
            marked = true;
        }
    }
    Ok(())
}

/// Type size and wrapping of a legend strip.
struct LegendSize {
    font: u32,
    line: i32,
    wrap: usize,
}

impl LegendSize {
    const NORMAL: LegendSize = LegendSize {
        font: 13,
        line: 16,
        wrap: 32,
    };
    const COMPACT: LegendSize = LegendSize {
        font: 11,
        line: 13,
        wrap: 38,
    };
}

/// One entry of a legend strip.
enum LegendEntry {
    /// A series: its colour and label.
    Line(RGBColor, String),
    /// A series with no data in this trace.
    Gray(String),
    /// A reference line; `true`: at a time (drawn upright), else a level
    /// (the two drew one grey swatch).
    Mark(String, bool),
    /// A note under the entries.
    Note(String),
}

impl LegendEntry {
    fn text(&self) -> &str {
        match self {
            LegendEntry::Line(_, t)
            | LegendEntry::Gray(t)
            | LegendEntry::Mark(t, _)
            | LegendEntry::Note(t) => t,
        }
    }

    fn wrap(&self, size: &LegendSize) -> usize {
        match self {
            LegendEntry::Note(_) => size.wrap + 8,
            _ => size.wrap,
        }
    }

    /// Pixels it takes, its gap below included.
    fn height(&self, size: &LegendSize) -> i32 {
        let lines = wrap(self.text(), self.wrap(size)).len().max(1) as i32;
        let gap = if matches!(self, LegendEntry::Note(_)) {
            6
        } else {
            8
        };
        lines * size.line + gap
    }

    /// Draws it at `y`; the next entry's y.
    fn draw<DB: DrawingBackend>(
        &self,
        legend: &DrawingArea<DB, plotters::coord::Shift>,
        y: i32,
        size: &LegendSize,
    ) -> Result<i32, String> {
        let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
        let font: TextStyle = ("sans-serif", size.font).into();
        let gray: TextStyle = ("sans-serif", size.font).into_font().color(&MARK);
        let swatch = |style: ShapeStyle| {
            legend
                .draw(&PathElement::new(
                    vec![(4, y + size.line / 2 - 1), (26, y + size.line / 2 - 1)],
                    style,
                ))
                .map_err(e)
        };
        let (x, style) = match self {
            LegendEntry::Line(color, _) => {
                swatch(color.stroke_width(4))?;
                (32, &font)
            }
            LegendEntry::Mark(_, false) => {
                swatch(MARK.stroke_width(1))?;
                (32, &font)
            }
            LegendEntry::Mark(_, true) => {
                let mid = y + size.line / 2 - 1;
                legend
                    .draw(&PathElement::new(
                        vec![(15, mid - 7), (15, mid + 7)],
                        MARK.stroke_width(1),
                    ))
                    .map_err(e)?;
                (32, &font)
            }
            LegendEntry::Gray(_) => (32, &gray),
            LegendEntry::Note(_) => (4, &gray),
        };
        legend_text_sized(legend, self.text(), x, y, self.wrap(size), size.line, style)?;
        Ok(y + self.height(size))
    }
}
