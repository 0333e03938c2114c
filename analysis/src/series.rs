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

/// What one bucket holds: the merged value, and the extremes and the last
/// value pushed into it (an envelope where points are denser than pixels,
/// and the exact level carried through the empty buckets after it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
    pub last: f64,
}

/// A series of (time, value) points in buckets of `width` ns from `origin`.
#[derive(Clone, Debug)]
pub struct Series {
    origin: u64,
    width: u64,
    cap: usize,
    merge: Merge,
    /// Bucket index → value; buckets are contiguous from 0.
    values: Vec<Option<Bucket>>,
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

    /// `b` (later) merged into `a` (earlier).
    fn combine(&self, a: Option<Bucket>, b: Bucket) -> Bucket {
        let Some(a) = a else { return b };
        let value = match self.merge {
            Merge::Max => a.value.max(b.value),
            Merge::Min => a.value.min(b.value),
            Merge::Last => b.value,
            Merge::Sum => a.value + b.value,
        };
        Bucket {
            value,
            lo: a.lo.min(b.lo),
            hi: a.hi.max(b.hi),
            last: b.last,
        }
    }

    pub fn push(&mut self, t: u64, v: f64) {
        let before = self.last.replace(v);
        let t = t.saturating_sub(self.origin);
        let mut i = (t / self.width) as usize;
        while i >= self.cap {
            self.halve();
            i = (t / self.width) as usize;
        }
        let level = |v: f64| Bucket {
            value: v,
            lo: v,
            hi: v,
            last: v,
        };
        if self.values.len() <= i {
            // A level's new bucket starts at the level the last value left
            // (until this one, unless it came at the bucket's very start):
            // a trough or peak carried into a bucket is the bucket's too
            // (credit at 0 from the bucket before until an update 2 ms in
            // read as the update's 16,403).
            let carried = before
                .filter(|_| matches!(self.merge, Merge::Min | Merge::Max) && t % self.width != 0);
            self.values.resize(i + 1, None);
            self.values[i] = carried.map(level);
        }
        self.values[i] = Some(self.combine(self.values[i], level(v)));
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

    pub fn merge(&self) -> Merge {
        self.merge
    }

    /// This series with buckets at least `width` ns wide (halved until they
    /// are): series that started at the same width share one grid after
    /// this, whatever their own length made of them.
    pub fn coarsened(&self, width: u64) -> Series {
        let mut s = self.clone();
        while s.width < width {
            s.halve();
        }
        s
    }

    /// The bucket width [`Series::grid`] uses up to `end_s`: this series'
    /// own, doubled until `end_s` fits in twice its cap of buckets (one
    /// that ran to `end_s` always fits its own). A series that
    /// stopped early at a fine width (a short stream in a long trace) is
    /// drawn to the end as coarsely as one that ran all along: without it
    /// a grid grew with the trace's length (64 stream series of 1 ms
    /// buckets over a 40 s trace took 129 MB).
    pub fn grid_width(&self, end_s: f64) -> u64 {
        let end = (end_s.max(0.0) * 1e9) as u64;
        let mut w = self.width;
        while end / w + 1 > 2 * self.cap as u64 {
            w *= 2;
        }
        w
    }

    /// Every bucket from 0 to `end_s` (inclusive) as (start s, bucket), at
    /// most twice the series' cap of them (see [`Series::grid_width`]).
    /// Empty buckets hold what the quantity was during them: 0 for a
    /// per-bucket sum, and for a running count ([`Merge::Last`]) before its
    /// first event; the previous bucket's last value for a level or a count
    /// after it; `None` for a level before its first value (unknown).
    pub fn grid(&self, end_s: f64) -> Vec<(f64, Option<Bucket>)> {
        let width = self.grid_width(end_s);
        if width > self.width {
            return self.coarsened(width).grid(end_s);
        }
        let n = ((end_s * 1e9) as u64 / self.width + 1).max(self.values.len() as u64);
        let mut prev: Option<f64> = None;
        (0..n as usize)
            .map(|i| {
                let t = (i as u64 * self.width) as f64 / 1e9;
                let level = |v: f64| Bucket {
                    value: v,
                    lo: v,
                    hi: v,
                    last: v,
                };
                let b = match (self.values.get(i).copied().flatten(), prev) {
                    (Some(b), _) => Some(b),
                    // Nothing happened in this bucket; a count is 0 before
                    // its first event.
                    (None, _) if self.merge == Merge::Sum => Some(level(0.0)),
                    (None, None) if self.merge == Merge::Last => Some(level(0.0)),
                    (None, Some(p)) => Some(level(p)),
                    (None, None) => None,
                };
                if let Some(b) = b {
                    prev = Some(b.last);
                }
                (t, b)
            })
            .collect()
    }

    /// Points as (seconds since origin at the bucket start, value); empty
    /// buckets are skipped.
    pub fn points(&self) -> Vec<(f64, f64)> {
        self.values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| ((i as u64 * self.width) as f64 / 1e9, v.value)))
            .collect()
    }

    /// Like [`Series::points`] but carries the last value through empty
    /// buckets (for step-like quantities).
    pub fn filled(&self) -> Vec<(f64, f64)> {
        let mut last = None;
        let mut out = Vec::with_capacity(self.values.len());
        for (i, v) in self.values.iter().enumerate() {
            if let Some(v) = v {
                last = Some(v.value);
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

    /// (bucket start s, lowest, highest) of every bucket from the first
    /// value to `end_s`, empty buckets at the level they were at: the band a
    /// plot draws when its buckets are narrower than a pixel.
    pub fn envelope(&self, end_s: f64) -> Vec<(f64, f64, f64)> {
        self.grid(end_s)
            .into_iter()
            .filter_map(|(t, b)| b.map(|b| (t, b.lo, b.hi)))
            .collect()
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

    /// A series that stopped early, drawn to a late end, keeps within its
    /// cap of buckets and its level.
    #[test]
    fn a_grid_to_a_late_end_stays_within_the_cap() {
        let mut s = Series::new(0, 1_000_000, 64, Merge::Last);
        s.push(500_000, 5.0);
        s.push(1_500_000, 9.0);
        for end_s in [0.01, 10.0, 3_600.0] {
            let g = s.grid(end_s);
            assert!(g.len() <= 128, "{end_s} s: {} buckets", g.len());
            assert_eq!(g.last().unwrap().1.unwrap().value, 9.0);
            let w = s.grid_width(end_s);
            assert!((g.len() as u64 - 1) * w <= (end_s * 1e9) as u64);
        }
        // Short enough: the series' own buckets.
        assert_eq!(s.grid(0.01).len(), 11);
        // Exactly twice the cap of buckets still fits at the own width.
        let s = Series::new(0, 1_000, 4, Merge::Last);
        assert_eq!(s.grid_width(7.5e-6), 1_000);
        assert_eq!(s.grid_width(8.5e-6), 2_000);
    }

    #[test]
    fn coarsened_series_share_one_grid_and_keep_levels_exact() {
        // A level set to 5 at 0.5 ms and to 7 at 3.5 ms, nothing between.
        let mut a = Series::new(0, 1_000_000, 64, Merge::Max);
        a.push(500_000, 5.0);
        a.push(3_500_000, 7.0);
        let c = a.coarsened(2_000_000);
        assert_eq!(c.width_ns(), 2_000_000);
        let g = c.grid(0.0055);
        let vals: Vec<Option<f64>> = g.iter().map(|(_, b)| b.map(|b| b.value)).collect();
        assert_eq!(vals, vec![Some(5.0), Some(7.0), Some(7.0)]);
        // Before its first value a level is unknown; a sum is 0.
        let mut late = Series::new(0, 1_000_000, 64, Merge::Min);
        late.push(2_200_000, 3.0);
        let g = late.grid(0.003);
        assert_eq!(g[0].1, None);
        assert_eq!(g[2].1.map(|b| b.value), Some(3.0));
        let mut sum = Series::new(0, 1_000_000, 64, Merge::Sum);
        sum.push(2_200_000, 3.0);
        assert_eq!(sum.grid(0.003)[0].1.map(|b| b.value), Some(0.0));
    }

    /// A level's bucket covers what the level was from its start: the value
    /// carried in until its first change, as well as the changes in it.
    #[test]
    fn a_level_carried_into_a_bucket_counts_in_its_extremes() {
        let mut s = Series::new(0, 1_000, 64, Merge::Min);
        // Credit 0 from 500 ns, back to 16,403 at 2,990 ns (bucket 2).
        s.push(100, 16_403.0);
        s.push(500, 0.0);
        s.push(2_990, 16_403.0);
        // At a bucket's very start, nothing is carried in.
        s.push(4_000, 20_000.0);
        let g = s.grid(0.000_004);
        let b = |i: usize| g[i].1.unwrap();
        assert_eq!((b(0).value, b(0).lo, b(0).hi), (0.0, 0.0, 16_403.0));
        assert_eq!(b(1).value, 0.0, "empty: the level carried through");
        assert_eq!(
            (b(2).value, b(2).lo, b(2).hi, b(2).last),
            (0.0, 0.0, 16_403.0, 16_403.0)
        );
        assert_eq!((b(4).value, b(4).lo), (20_000.0, 20_000.0));
        // The same for a peak; counts and sums are not levels.
        let mut q = Series::new(0, 1_000, 64, Merge::Max);
        q.push(100, 9.0);
        q.push(1_500, 2.0);
        assert_eq!(q.grid(0.000_001)[1].1.unwrap().value, 9.0);
        let mut c = Series::new(0, 1_000, 64, Merge::Last);
        c.push(100, 9.0);
        c.push(1_500, 10.0);
        assert_eq!(c.grid(0.000_001)[1].1.unwrap().lo, 10.0);
    }

    /// A step drawn from its buckets: the value carried through empty
    /// ones, and on to the trace's end from the last bucket's end (a sum
    /// is not carried: nothing happened after it).
    #[test]
    fn a_filled_series_carries_its_level_through_gaps_and_to_the_end() {
        let mut s = Series::new(0, 1_000, 64, Merge::Last);
        s.push(500, 5.0);
        s.push(3_200, 7.0);
        let filled = vec![(0.0, 5.0), (1e-6, 5.0), (2e-6, 5.0), (3e-6, 7.0)];
        assert_eq!(s.filled(), filled);
        let mut until = filled.clone();
        until.extend([(3e-6 + 1e-6, 7.0), (10e-6, 7.0)]);
        assert_eq!(s.filled_until(10e-6), until);
        // An end inside the last bucket, or before it: no step past it.
        let mut until = filled.clone();
        until.extend([(3.5e-6, 7.0), (3.5e-6, 7.0)]);
        assert_eq!(s.filled_until(3.5e-6), until);
        assert_eq!(s.filled_until(2e-6), filled);
        assert_eq!(s.filled_until(3e-6), filled);
        assert!(!s.is_empty());
        assert!(Series::new(0, 1_000, 64, Merge::Last).is_empty());
        let mut sum = Series::new(0, 1_000, 64, Merge::Sum);
        sum.push(500, 5.0);
        assert_eq!(sum.filled_until(10e-6), [(0.0, 5.0)]);
        // A count is 0 before its first event.
        let mut count = Series::new(0, 1_000_000, 64, Merge::Last);
        count.push(2_200_000, 3.0);
        assert_eq!(count.grid(0.003)[0].1.map(|b| b.value), Some(0.0));
    }

    #[test]
    fn a_bucket_keeps_its_extremes_and_its_last_value() {
        let mut s = Series::new(0, 1_000, 4, Merge::Min);
        for (t, v) in [(0, 10.0), (100, 2.0), (200, 30.0), (300, 12.0)] {
            s.push(t, v);
        }
        // Forces two halvings: the extremes survive the merges.
        s.push(15_000, 1.0);
        let first = s.grid(0.0).first().unwrap().1.unwrap();
        assert_eq!(
            (first.value, first.lo, first.hi, first.last),
            (2.0, 2.0, 30.0, 12.0)
        );
        let env = s.envelope(16e-6);
        assert_eq!(
            env[1],
            (4e-6, 12.0, 12.0),
            "an empty bucket sits at the last level"
        );
    }
}
