//! Stacked bars: one bar per configuration, split into parts (Part 3's
//! outcome fractions).

use super::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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
            // The bars are named; the legend's room needs no tick.
            .set_tick_mark_size(plotters::chart::LabelAreaPosition::Bottom, 0)
            .x_labels(n + 2)
            // Each bar is named under it below (a tick per label put one
            // under the legend's room too).
            .x_label_formatter(&|_| String::new())
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
        for (i, label) in labels.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(i as f64 + 1.0, 0.0));
            let style = ("sans-serif", 14)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(label.clone(), (x, y + 8), style))
                .map_err(|e| e.to_string())?;
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
