//! Small statistics: distributions (via hdrhistogram) and a least-squares slope.

use hdrhistogram::Histogram;

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
}

/// A histogram of values with 3 significant digits (named apart from the
/// probe's event recorder); `scale` converts the recorded
/// integer unit to the reported one (e.g. 1e-6 for ns → ms).
pub struct Histo {
    h: Histogram<u64>,
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
            sum: 0.0,
            scale,
            min: u64::MAX,
            max: 0,
        }
    }

    pub fn record(&mut self, v: u64) {
        self.h.saturating_record(v);
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
        Distribution {
            count: self.h.len(),
            sum: self.sum * s,
            min: self.min as f64 * s,
            p50: self.h.value_at_quantile(0.5) as f64 * s,
            p90: self.h.value_at_quantile(0.9) as f64 * s,
            p99: self.h.value_at_quantile(0.99) as f64 * s,
            max: self.max as f64 * s,
            mean: self.sum * s / self.h.len() as f64,
        }
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
        assert!((d.p50 - 500.0).abs() <= 1.0);
        assert!((d.p99 - 990.0).abs() <= 1.0);
        assert_eq!(d.max, 1000.0);
        assert_eq!(d.mean, 500.5);
    }
}
