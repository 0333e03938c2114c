//! Bounded time series for plots and CSV: memory stays fixed however long
//! the trace, by halving the resolution whenever the buffer fills.

/// How values that fall in one bucket combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merge {
    /// Keep the largest (peaks stay visible: queue depth, owned bytes).
    Max,
    /// Keep the smallest (troughs stay visible: credit).
    Min,
    /// Keep the last (cumulative counters).
    Last,
    /// Add up (time spent blocked per bucket).
    Sum,
}

/// A series of (time, value) points in buckets of `width` ns from `origin`.
#[derive(Clone, Debug)]
pub struct Series {
    origin: u64,
    width: u64,
    cap: usize,
    merge: Merge,
    /// Bucket index → value; buckets are contiguous from 0.
    values: Vec<Option<f64>>,
    /// The last value pushed (what a step quantity is at the end).
    last: Option<f64>,
}

impl Series {
    /// `cap` buckets at most; starts at `width` ns each.
    pub fn new(origin: u64, width: u64, cap: usize, merge: Merge) -> Series {
        Series {
            origin,
            width: width.max(1),
            cap: cap.max(2),
            merge,
            values: Vec::new(),
            last: None,
        }
    }

    fn combine(&self, a: Option<f64>, b: f64) -> f64 {
        match (a, self.merge) {
            (None, _) => b,
            (Some(a), Merge::Max) => a.max(b),
            (Some(a), Merge::Min) => a.min(b),
            (Some(_), Merge::Last) => b,
            (Some(a), Merge::Sum) => a + b,
        }
    }

    pub fn push(&mut self, t: u64, v: f64) {
        self.last = Some(v);
        let t = t.saturating_sub(self.origin);
        let mut i = (t / self.width) as usize;
        while i >= self.cap {
            self.halve();
            i = (t / self.width) as usize;
        }
        if self.values.len() <= i {
            self.values.resize(i + 1, None);
        }
        self.values[i] = Some(self.combine(self.values[i], v));
    }

    fn halve(&mut self) {
        let old = std::mem::take(&mut self.values);
        self.width *= 2;
        for (j, pair) in old.chunks(2).enumerate() {
            let mut acc = None;
            for v in pair.iter().flatten() {
                acc = Some(self.combine(acc, *v));
            }
            if self.values.len() <= j {
                self.values.resize(j + 1, None);
            }
            self.values[j] = acc;
        }
    }

    pub fn width_ns(&self) -> u64 {
        self.width
    }

    /// Points as (seconds since origin at the bucket start, value); empty
    /// buckets are skipped.
    pub fn points(&self) -> Vec<(f64, f64)> {
        self.values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| ((i as u64 * self.width) as f64 / 1e9, v)))
            .collect()
    }

    /// Like [`Series::points`] but carries the last value through empty
    /// buckets (for step-like quantities).
    pub fn filled(&self) -> Vec<(f64, f64)> {
        let mut last = None;
        let mut out = Vec::with_capacity(self.values.len());
        for (i, v) in self.values.iter().enumerate() {
            if v.is_some() {
                last = *v;
            }
            if let Some(l) = last {
                out.push(((i as u64 * self.width) as f64 / 1e9, l));
            }
        }
        out
    }

    /// [`Series::filled`], carried on to `end_s` (the end of the trace), so a
    /// quantity that stopped changing is drawn until the end.
    pub fn filled_until(&self, end_s: f64) -> Vec<(f64, f64)> {
        let mut p = self.filled();
        if let (Some(&(t, _)), Some(last)) = (p.last(), self.last) {
            if end_s > t && self.merge != Merge::Sum {
                let bucket_end = t + self.width as f64 / 1e9;
                p.push((bucket_end.min(end_s), last));
                p.push((end_s, last));
            }
        }
        p
    }

    pub fn is_empty(&self) -> bool {
        self.values.iter().all(|v| v.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_bounded_and_keeps_the_peak() {
        let mut s = Series::new(0, 1_000, 64, Merge::Max);
        for i in 0..100_000u64 {
            s.push(i * 1_000, if i == 77_777 { 1e9 } else { (i % 10) as f64 });
        }
        assert!(s.points().len() <= 64);
        assert_eq!(s.points().iter().map(|p| p.1).fold(0.0, f64::max), 1e9);
    }

    #[test]
    fn sum_merge_conserves_the_total() {
        let mut s = Series::new(0, 10, 8, Merge::Sum);
        for i in 0..1000u64 {
            s.push(i * 7, 1.0);
        }
        let total: f64 = s.points().iter().map(|p| p.1).sum();
        assert_eq!(total, 1000.0);
    }
}
