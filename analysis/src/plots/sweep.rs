//! sweep.svg: headline figures against a swept parameter.

use super::*;

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
