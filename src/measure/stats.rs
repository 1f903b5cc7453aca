//! Statistics of repeated measurements, in one place.

use serde::{Deserialize, Serialize};

/// Median, p95, min, max and mean of a sample of durations, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Median.
    pub median_ms: f64,
    /// 95th percentile (nearest rank).
    pub p95_ms: f64,
    /// Minimum.
    pub min_ms: f64,
    /// Maximum.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

impl Stats {
    /// Statistics of `xs`, milliseconds (empty gives zeros).
    pub fn of_ms(xs: impl IntoIterator<Item = f64>) -> Stats {
        let mut v: Vec<f64> = xs.into_iter().collect();
        if v.is_empty() {
            return Stats::default();
        }
        v.sort_by(f64::total_cmp);
        let (median, p95) = median_and_p95_sorted(&v);
        Stats {
            median_ms: median,
            p95_ms: p95,
            min_ms: v[0],
            max_ms: v[v.len() - 1],
            mean_ms: v.iter().sum::<f64>() / v.len() as f64,
        }
    }
}

/// The median and the 95th percentile (nearest rank) of `values`; zeros when empty.
pub fn median_and_p95(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let mut v: Vec<f64> = values.into_iter().collect();
    if v.is_empty() {
        return (0.0, 0.0);
    }
    v.sort_by(f64::total_cmp);
    median_and_p95_sorted(&v)
}

/// The median of `values`; zero when empty (the figure a report gives for repeated runs).
pub fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    median_and_p95(values).0
}

/// The median of a slice: the statistic a bootstrap interval of repeated runs resamples.
pub fn median_of(values: &[f64]) -> f64 {
    median(values.iter().copied())
}

/// The mean of `values` and their sample standard deviation (over n − 1; 0 for one value);
/// None when empty.
pub fn mean_and_sd(values: &[f64]) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    Some((mean, variance.sqrt()))
}

fn median_and_p95_sorted(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (median, v[((0.95 * n as f64).ceil() as usize).clamp(1, n) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_p95_min_max_mean() {
        let s = Stats::of_ms((1..=20).map(f64::from));
        assert_eq!((s.median_ms, s.p95_ms, s.min_ms, s.max_ms), (10.5, 19.0, 1.0, 20.0));
        assert_eq!(s.mean_ms, 10.5);
        assert_eq!(Stats::of_ms([3.0, 1.0, 2.0]).median_ms, 2.0);
        assert_eq!(Stats::of_ms([]), Stats::default());
    }

    #[test]
    fn median_and_p95_of_plain_values() {
        assert_eq!(median_and_p95([5.0, 1.0, 30.0, 2.0]), (3.5, 30.0));
        assert_eq!(median_and_p95([]), (0.0, 0.0));
        assert_eq!(median([20.0, 10.0, 40.0]), 20.0);
    }

    #[test]
    fn mean_and_sample_standard_deviation() {
        assert_eq!(mean_and_sd(&[2.0, 4.0, 6.0]), Some((4.0, 2.0)));
        assert_eq!(mean_and_sd(&[5.0]), Some((5.0, 0.0)), "one value: no spread");
        assert_eq!(mean_and_sd(&[]), None);
    }
}
