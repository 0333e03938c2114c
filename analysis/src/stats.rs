//! Small statistics: distributions (exact, or via hdrhistogram past a bound)
//! and a least-squares slope.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// A distribution summary of non-negative values (recorded in integer units).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Distribution {
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
    /// The percentiles are the samples' own nearest-rank values (false: the
    /// distribution had more than [`EXACT_DISTINCT`] distinct values, and
    /// each is the upper end of its HDR bucket, capped at `max`).
    #[serde(default)]
    pub exact: bool,
}

/// Distinct values a distribution counts exactly: its percentiles are then
/// the samples' own (WINDOW_UPDATE increments, sizes and the latencies of a
/// short run stay within it). Past it the counts go (≈ 48 bytes a value
/// held) and the histogram answers, within 0.1 %.
pub const EXACT_DISTINCT: usize = 16_384;

/// A distribution of integer values: exact counts per value while there
/// are at most [`EXACT_DISTINCT`] of them, and always a histogram with 3
/// significant digits (named apart from the probe's event recorder);
/// `scale` converts the recorded integer unit to the reported one (e.g.
/// 1e-6 for ns → ms).
pub struct Histo {
    h: Histogram<u64>,
    /// How many times each value was recorded; `None` once too many
    /// distinct values came.
    exact: Option<BTreeMap<u64, u64>>,
    sum: f64,
    scale: f64,
    /// Exact extremes (the histogram's are bucket bounds).
    min: u64,
    max: u64,
}

impl Histo {
    pub fn new(scale: f64) -> Histo {
        Histo {
            // Up to 2^42 units (73 minutes in ns, 4 TiB in bytes); larger
            // values saturate. (`Histogram::new` would saturate at 2.)
            h: Histogram::new_with_bounds(1, 1 << 42, 3).expect("valid bounds"),
            exact: Some(BTreeMap::new()),
            sum: 0.0,
            scale,
            min: u64::MAX,
            max: 0,
        }
    }

    pub fn record(&mut self, v: u64) {
        self.h.saturating_record(v);
        if let Some(counts) = &mut self.exact {
            *counts.entry(v).or_insert(0) += 1;
            if counts.len() > EXACT_DISTINCT {
                self.exact = None;
            }
        }
        self.sum += v as f64;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    pub fn len(&self) -> u64 {
        self.h.len()
    }

    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    pub fn summary(&self) -> Distribution {
        if self.h.is_empty() {
            return Distribution::default();
        }
        let s = self.scale;
        let at = |per_mille: u64| self.quantile(per_mille) as f64 * s;
        Distribution {
            count: self.h.len(),
            sum: self.sum * s,
            min: self.min as f64 * s,
            p50: at(500),
            p90: at(900),
            p99: at(990),
            max: self.max as f64 * s,
            mean: self.sum * s / self.h.len() as f64,
            exact: self.exact.is_some(),
        }
    }

    /// The nearest-rank quantile of `per_mille`/1000: the smallest sample
    /// with at least ⌈q·n⌉ samples at or below it, in integers (from the
    /// histogram once the counts are gone: its bucket's upper end, never
    /// above the largest sample).
    fn quantile(&self, per_mille: u64) -> u64 {
        let n = self.h.len();
        let Some(counts) = &self.exact else {
            return self
                .h
                .value_at_quantile(per_mille as f64 / 1000.0)
                .min(self.max);
        };
        let rank = ((n as u128 * per_mille as u128).div_ceil(1000) as u64).clamp(1, n);
        let mut seen = 0;
        for (&v, &c) in counts {
            seen += c;
            if seen >= rank {
                return v;
            }
        }
        self.max
    }
}

/// `x` as it should print with `decimals` decimals: 0 when it rounds to
/// zero, so a value a hair below zero prints as 0, not -0.
pub fn rounded_zero(x: f64, decimals: usize) -> f64 {
    if x.abs() < 0.5 * 10f64.powi(-(decimals as i32)) {
        0.0
    } else {
        x
    }
}

/// `x` with at most `decimals` decimals and no trailing zeros: "12", "2.5".
pub fn trimmed(x: f64, decimals: usize) -> String {
    let s = format!("{:.*}", decimals, rounded_zero(x, decimals));
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Ordinary least-squares slope and intercept of y over x; `None` with
/// fewer than two distinct x.
pub fn least_squares(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    Some((slope, my - slope * mx))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimmed_drops_trailing_zeros_only() {
        assert_eq!(trimmed(12.0, 3), "12");
        assert_eq!(trimmed(2.5, 3), "2.5");
        assert_eq!(trimmed(0.1234, 3), "0.123");
        assert_eq!(trimmed(100.0, 0), "100");
        assert_eq!(trimmed(-0.0001, 3), "0");
        // Half the last decimal rounds away from zero: it is not zero.
        assert_eq!(rounded_zero(0.005, 2), 0.005);
        assert_eq!(rounded_zero(-0.0049, 2), 0.0);
    }

    #[test]
    fn slope_of_noisy_line_is_recovered() {
        // y = 209 x + 12 with deterministic noise of ±40.
        let mut seed = 12345u64;
        let pts: Vec<(f64, f64)> = (0..2000)
            .map(|i| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let noise = ((seed >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 80.0;
                let x = i as f64 * 0.01;
                (x, 209.0 * x + 12.0 + noise)
            })
            .collect();
        let (slope, icept) = least_squares(&pts).unwrap();
        assert!((slope - 209.0).abs() < 1.0, "{slope}");
        assert!((icept - 12.0).abs() < 5.0, "{icept}");
        assert_eq!(least_squares(&[(1.0, 1.0), (1.0, 2.0)]), None);
        // Two distinct x make a line; one point does not.
        assert_eq!(least_squares(&[(0.0, 1.0), (1.0, 3.0)]), Some((2.0, 1.0)));
        assert_eq!(least_squares(&[(0.0, 1.0)]), None);
    }

    #[test]
    fn large_values_are_not_saturated() {
        let mut r = Histo::new(1e-6);
        r.record(1_500_000);
        r.record(7_000_000_000);
        let d = r.summary();
        assert!((d.min - 1.5).abs() < 0.01, "{d:?}");
        assert!((d.max - 7000.0).abs() < 5.0, "{d:?}");
    }

    #[test]
    fn distribution_percentiles() {
        let mut r = Histo::new(1.0);
        for v in 1..=1000 {
            r.record(v);
        }
        let d = r.summary();
        assert_eq!(d.count, 1000);
        assert!(d.exact);
        // Nearest rank: the 500th, 900th and 990th smallest samples.
        assert_eq!((d.p50, d.p90, d.p99), (500.0, 900.0, 990.0));
        assert_eq!(d.max, 1000.0);
        assert_eq!(d.mean, 500.5);
    }

    /// The figures an auditor recomputes from the samples: WINDOW_UPDATE
    /// increments like these once gave a p99 of 32,831 above a max of
    /// 32,828 (the HDR bucket's upper end).
    #[test]
    fn percentiles_are_the_samples_own_values() {
        let mut r = Histo::new(1.0);
        for _ in 0..98 {
            r.record(32_768);
        }
        r.record(32_827);
        r.record(32_828);
        let d = r.summary();
        assert!(d.exact);
        assert_eq!(
            (d.p50, d.p90, d.p99, d.max),
            (32_768.0, 32_768.0, 32_827.0, 32_828.0)
        );
        let mut one = Histo::new(1.0);
        one.record(7);
        let d = one.summary();
        assert_eq!((d.p50, d.p99, d.min, d.max), (7.0, 7.0, 7.0, 7.0));
    }

    /// Past the bound the histogram answers: within 0.1 %, never above the
    /// largest sample, and the summary says the figures are not exact.
    #[test]
    fn many_distinct_values_fall_back_to_the_histogram_capped_at_max() {
        let mut r = Histo::new(1.0);
        let n = EXACT_DISTINCT as u64 * 4;
        for v in 0..n {
            r.record(1_000_000 + v);
        }
        let d = r.summary();
        assert!(!d.exact);
        let want = 1_000_000.0 + (0.99 * n as f64).ceil() - 1.0;
        assert!((d.p99 - want).abs() / want <= 1e-3, "{} vs {want}", d.p99);
        let median = 1_000_000.0 + (0.5 * n as f64).ceil() - 1.0;
        assert!(
            (d.p50 - median).abs() / median <= 1e-3,
            "{} vs {median}",
            d.p50
        );
        assert_eq!((r.len(), r.is_empty()), (n, false));
        assert!(Histo::new(1.0).is_empty());
        assert!(d.p99 <= d.max);
        let mut top = Histo::new(1.0);
        for _ in 0..2 * EXACT_DISTINCT {
            top.record(32_828);
        }
        for v in 0..=EXACT_DISTINCT as u64 {
            top.record(v);
        }
        let d = top.summary();
        assert!(!d.exact);
        assert_eq!(d.p99, 32_828.0, "capped at the largest sample");
        // Exactly the limit of distinct values stays exact; one more does not.
        let mut edge = Histo::new(1.0);
        for v in 0..EXACT_DISTINCT as u64 {
            edge.record(v);
        }
        assert!(edge.summary().exact);
        edge.record(EXACT_DISTINCT as u64);
        assert!(!edge.summary().exact);
    }
}
