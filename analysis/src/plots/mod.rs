//! SVG plots of one run's timeline (plotters, SVG backend only).
//!
//! Every chart keeps its legend in a strip right of the data (never over
//! it), says when a series lies exactly under another, marks the advertised
//! window and the end of the offered period where they apply, draws a
//! min/max band where the buckets are denser than the pixels (a line there
//! is a solid smear), uses integer ticks for counts, and says what a
//! one-sided trace could not record instead of drawing empty axes.

mod bars;
mod chart;
mod compare;
mod run;
mod sweep;

pub use bars::stacked_bars;
pub use chart::{line_chart, stacked_chart};
pub use compare::compare_plots;
pub use run::{intervals_chart, run_plots, top_streams};
pub use sweep::{sweep_chart, SweepAxis, SweepLine};

use plotters::prelude::*;
use std::path::Path;

/// A plot could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct PlotError {
    pub path: String,
    pub message: String,
}

pub(crate) const W: u32 = 1100;
pub(crate) const H: u32 = 520;
/// Width of the legend strip right of the data.
pub(crate) const LEGEND_W: u32 = 270;
/// Roughly the data area's width in pixels: more buckets than this and a
/// line becomes a smear, so a band is drawn instead.
pub(crate) const DATA_PX: usize = 700;
/// Streams drawn one by one (the rest are summed as "other streams").
pub const TOP_STREAMS: usize = 8;
/// The tab10 palette: ten colours that stay distinct side by side.
pub(crate) const COLORS: [RGBColor; 10] = [
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
pub(crate) const MARK: RGBColor = RGBColor(90, 90, 90);

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
    /// The x axis counts too (a histogram's): integer ticks only.
    pub integer_x: bool,
    /// Said in the legend strip (what a one-sided trace lacks, ...).
    pub notes: Vec<String>,
    /// Drawn in the empty data area when no line has a point.
    pub empty_reason: String,
    /// Said in the legend of a line without a point, when others have
    /// some ("none in this trace" when empty).
    pub absent: String,
    /// The palette index of the first line's colour: a panel of one
    /// configuration among several keeps that configuration's colour.
    pub first_color: usize,
    /// The y axis reaches at least this high: panels meant to be read
    /// against each other share a scale.
    pub y_at_least: f64,
    /// The first this many lines are the first whose legend entries are
    /// left out when the strip overflows (one of many streams says less
    /// than the totals drawn after them).
    pub shed_first: usize,
}

pub(crate) fn plot_err(path: &Path) -> impl Fn(String) -> PlotError + '_ {
    move |e| PlotError {
        path: path.display().to_string(),
        message: e,
    }
}

/// A tick label: integers without decimals, others with as few as needed.
pub(crate) fn tick(y: f64) -> String {
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
pub(crate) fn legend_text<DB: DrawingBackend>(
    legend: &DrawingArea<DB, plotters::coord::Shift>,
    label: &str,
    x: i32,
    y: i32,
    width: usize,
    font: &TextStyle<'_>,
) -> Result<i32, String> {
    legend_text_sized(legend, label, x, y, width, 16, font)
}

/// [`legend_text`] with lines `line` pixels apart.
pub(crate) fn legend_text_sized<DB: DrawingBackend>(
    legend: &DrawingArea<DB, plotters::coord::Shift>,
    label: &str,
    x: i32,
    y: i32,
    width: usize,
    line: i32,
    font: &TextStyle<'_>,
) -> Result<i32, String> {
    let parts = wrap(label, width);
    for (k, part) in parts.iter().enumerate() {
        legend
            .draw(&Text::new(
                part.clone(),
                (x, y + k as i32 * line),
                font.clone(),
            ))
            .map_err(|e| e.to_string())?;
    }
    Ok(y + line * parts.len().max(1) as i32)
}

/// Splits a label into lines of at most `n` characters, at spaces.
pub(crate) fn wrap(s: &str, n: usize) -> Vec<String> {
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

/// The unit a byte axis reads best in for values up to `peak`: bytes below
/// 4 KiB, KiB below 4 MiB, MiB above; and its size.
pub(crate) fn byte_unit(peak: f64) -> (&'static str, f64) {
    if peak >= 4.0 * 1048576.0 {
        ("MiB", 1048576.0)
    } else if peak >= 4.0 * 1024.0 {
        ("KiB", 1024.0)
    } else {
        ("bytes", 1.0)
    }
}

/// The highest value a series took.
pub(crate) fn peak(s: &crate::series::Series, end_s: f64) -> f64 {
    s.envelope(end_s).iter().map(|b| b.2).fold(0.0, f64::max)
}

pub(crate) fn scaled(points: Vec<(f64, f64)>, k: f64) -> Vec<(f64, f64)> {
    points.into_iter().map(|(x, y)| (x, y / k)).collect()
}

pub(crate) fn scaled_band(band: Vec<(f64, f64, f64)>, k: f64) -> Vec<(f64, f64, f64)> {
    band.into_iter()
        .map(|(t, a, b)| (t, a / k, b / k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legend_of(panel: &Panel<'_>) -> String {
        let title = panel.title.replace(' ', "-");
        let dir =
            std::env::temp_dir().join(format!("h2probe-plots-{}-{title}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{title}.svg"));
        line_chart(&path, "t (s)", panel).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        svg.split("<text ")
            .filter_map(|t| t.split_once('>')?.1.split("</text>").next())
            .map(|t| t.trim().replace("&quot;", "\""))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A comparison without a run's trace still writes its plots, each
    /// saying it has nothing (the credit plot too, with no panel to stack).
    #[test]
    fn a_comparison_without_traces_writes_plots_that_say_so() {
        let dir = std::env::temp_dir().join(format!("h2probe-compare-none-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let names = compare_plots(&dir, &[]).unwrap();
        for name in &names {
            let svg = std::fs::read_to_string(dir.join(name)).unwrap();
            assert!(svg.contains("no run recorded this"), "{name}");
        }
        assert!(names.contains(&"compare-credit.svg".to_string()));
        std::fs::remove_dir_all(&dir).unwrap();
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

    /// A level and a time are told apart in the legend: the level's swatch
    /// lies flat, the time's stands up (both were one grey dash).
    #[test]
    fn a_time_mark_and_a_level_mark_have_swatches_of_their_own() {
        let path = std::env::temp_dir().join(format!("h2probe-marks-{}.svg", std::process::id()));
        let ramp: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, i as f64)).collect();
        line_chart(
            &path,
            "t (s)",
            &Panel {
                title: "marks".into(),
                lines: vec![Line::new("ramp", ramp)],
                marks: vec![
                    Mark::H(5.0, "advertised window".into()),
                    Mark::V(4.0, "end of the offered period".into()),
                ],
                ..Panel::default()
            },
        )
        .unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        // The legend's grey swatches: 22 units flat, or 14 upright.
        let grey: Vec<((i32, i32), (i32, i32))> = svg
            .split("<polyline ")
            .skip(1)
            .filter(|p| p.contains("stroke=\"#5A5A5A\""))
            .filter_map(|p| {
                let pts = p.split("points=\"").nth(1)?.split('"').next()?;
                let xy: Vec<(i32, i32)> = pts
                    .split_whitespace()
                    .filter_map(|q| {
                        let (x, y) = q.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect();
                (xy.len() == 2).then(|| (xy[0], xy[1]))
            })
            .collect();
        let flat = grey.iter().filter(|(a, b)| a.1 == b.1 && b.0 - a.0 == 22);
        let upright = grey.iter().filter(|(a, b)| a.0 == b.0 && b.1 - a.1 == 14);
        assert_eq!((flat.count(), upright.count()), (1, 1), "{grey:?}");
    }

    /// A line that parts from the one over it only at the end (a stream's
    /// window as its stream closes, beside the connection's) is named as
    /// under it for the share of the axis it is; one that parts for a
    /// tenth of it or more is not.
    #[test]
    fn a_line_under_another_for_most_of_the_axis_says_how_much() {
        let conn: Vec<(f64, f64)> = (0..100).map(|i| (i as f64 / 10.0, 64.0)).collect();
        let parts_at = |k: usize| -> Vec<(f64, f64)> {
            conn.iter()
                .enumerate()
                .map(|(i, &(t, v))| (t, if i < k { v } else { 16.0 }))
                .collect()
        };
        let l = legend_of(&Panel {
            title: "share".into(),
            lines: vec![
                Line::new("stream", parts_at(98)),
                Line::new("most", parts_at(92)),
                Line::new("early", parts_at(66)),
                Line::new("connection", conn.clone()),
            ],
            ..Panel::default()
        });
        assert!(
            l.contains("stream — under \"connection\" (within 2 px) for 98 % of the time axis"),
            "{l}"
        );
        assert!(!l.contains("early — "), "{l}");
        assert!(!l.contains("most — "), "{l}");
        assert!(!l.contains("connection — "), "{l}");
    }

    #[test]
    fn a_line_the_x_axis_hides_is_named_and_one_off_it_is_not() {
        // A relay's client leg: a 5-byte reply in KiB, beside 32 KiB.
        let high: Vec<(f64, f64)> = (0..100).map(|i| (i as f64 / 10.0, 32.0)).collect();
        let l = legend_of(&Panel {
            title: "axis".into(),
            lines: vec![
                Line::new("high", high),
                Line::new("tiny", vec![(3.0, 0.0), (3.4, 5.0 / 1024.0), (3.5, 0.0)]),
                Line::new("zero", vec![(10.0, 0.0)]),
                Line::new("rises", vec![(1.0, 0.0), (2.0, 1.0)]),
            ],
            ..Panel::default()
        });
        assert!(
            l.contains("tiny — along the x axis (never above 0.005)"),
            "{l}"
        );
        assert!(l.contains("zero — along the x axis (0 throughout)"), "{l}");
        assert!(!l.contains("rises — along"), "{l}");
        assert!(!l.contains("high — along"), "{l}");
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
