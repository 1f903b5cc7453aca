//! Is B different from A, and by how much? The relative change of B's median over A's (the
//! median: a shared machine's spikes move a mean), with a 95 % percentile-bootstrap interval
//! over the repeats, and a decision only where the whole interval says so (criterion's rule of
//! significance and noise threshold together): beyond the noise band on one side, or within
//! it; an interval that straddles its edge cannot decide. `compare` uses it on CPU ms per sample
//! and samples/s.

use serde::{Deserialize, Serialize};

use super::stats::median_of;
use crate::loader::sampler::SplitMix64;

/// Resamplings of each side for an interval.
pub const RESAMPLES: usize = 10_000;
/// Changes within this many percent either way are noise.
pub const NOISE_PCT: f64 = 2.0;

/// B's median relative to A's, percent, with its 95 % bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// `100 × (median(b) / median(a) − 1)`.
    pub percent: f64,
    /// Lower end of the 95 % interval, percent.
    pub low: f64,
    /// Upper end of the 95 % interval, percent.
    pub high: f64,
}

/// What a [`Change`] says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The whole interval lies above the noise band.
    Higher,
    /// The whole interval lies below the noise band.
    Lower,
    /// The whole interval lies within the noise band: no difference beyond noise.
    NoDifference,
    /// The interval straddles an edge of the noise band: measure longer.
    Undecided,
}

impl Change {
    /// No change, with no spread: what two empty sides compare as.
    pub const NONE: Self = Self { percent: 0.0, low: 0.0, high: 0.0 };

    /// The change of the median of `b` over the median of `a`, with a 95 % percentile
    /// bootstrap interval: each side resampled with replacement [`RESAMPLES`] times, fixed by
    /// `seed`. None when a side is empty or A's median is not positive.
    pub fn of(a: &[f64], b: &[f64], seed: u64) -> Option<Self> {
        Self::of_by(a, b, seed, median_of)
    }

    /// [`Change::of`] with another `statistic` of each side than its median (a rate, a mean).
    pub fn of_by(
        a: &[f64],
        b: &[f64],
        seed: u64,
        statistic: impl Fn(&[f64]) -> f64,
    ) -> Option<Self> {
        if a.is_empty() || b.is_empty() {
            return None;
        }
        let (stat_a, stat_b) = (statistic(a), statistic(b));
        if stat_a <= 0.0 || !stat_a.is_finite() {
            return None;
        }
        let percent = |a: f64, b: f64| 100.0 * (b / a - 1.0);
        let mut rng = SplitMix64::new(seed);
        let mut drawn = Vec::with_capacity(a.len().max(b.len()));
        let mut resample = |v: &[f64]| {
            drawn.clear();
            drawn.extend((0..v.len()).map(|_| v[rng.below(v.len())]));
            statistic(&drawn)
        };
        let mut changes: Vec<f64> = (0..RESAMPLES)
            .filter_map(|_| {
                let (ra, rb) = (resample(a), resample(b));
                (ra > 0.0).then(|| percent(ra, rb))
            })
            .collect();
        let (low, high) = percentile_interval(&mut changes)?;
        Some(Self { percent: percent(stat_a, stat_b), low, high })
    }

    /// The decision, with changes within `noise_pct` either way counted as noise.
    pub fn decision(&self, noise_pct: f64) -> Decision {
        if self.low > noise_pct {
            Decision::Higher
        } else if self.high < -noise_pct {
            Decision::Lower
        } else if self.low >= -noise_pct && self.high <= noise_pct {
            Decision::NoDifference
        } else {
            Decision::Undecided
        }
    }

    /// `(95 % CI low to high %)`.
    pub fn interval(&self) -> String {
        format!("95 % CI {:+.1} to {:+.1} %", self.low, self.high)
    }
}

/// The 95 % percentile bootstrap interval of `statistic` over `values` (resampled with
/// replacement [`RESAMPLES`] times, fixed by `seed`); None when `values` is empty.
pub fn interval(
    values: &[f64],
    seed: u64,
    statistic: impl Fn(&[f64]) -> f64,
) -> Option<(f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut drawn = Vec::with_capacity(values.len());
    let mut estimates: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            drawn.clear();
            drawn.extend((0..values.len()).map(|_| values[rng.below(values.len())]));
            statistic(&drawn)
        })
        .collect();
    percentile_interval(&mut estimates)
}

/// The 2.5th and 97.5th percentiles of `estimates` (sorted here); None when empty.
fn percentile_interval(estimates: &mut [f64]) -> Option<(f64, f64)> {
    if estimates.is_empty() {
        return None;
    }
    estimates.sort_by(f64::total_cmp);
    let at = |q: f64| estimates[((q * estimates.len() as f64) as usize).min(estimates.len() - 1)];
    Some((at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [f64; 6] = [10.0, 10.2, 9.9, 10.1, 9.8, 10.05];

    #[test]
    fn a_known_shift_is_found_with_its_size() {
        let b: Vec<f64> = A.iter().map(|x| x * 1.10).collect();
        let change = Change::of(&A, &b, 1).unwrap();
        assert!((change.percent - 10.0).abs() < 1e-9, "{change:?}");
        assert!(change.low > 5.0 && change.high < 15.0, "{change:?}");
        assert_eq!(change.decision(NOISE_PCT), Decision::Higher);
        let faster: Vec<f64> = A.iter().map(|x| x * 0.85).collect();
        assert_eq!(Change::of(&A, &faster, 1).unwrap().decision(NOISE_PCT), Decision::Lower);
    }

    #[test]
    fn the_same_measurements_make_no_difference() {
        let a = [10.0, 10.02, 9.98, 10.01, 9.99, 10.03, 9.97, 10.0];
        let b = [10.01, 9.99, 10.0, 10.02, 9.98, 10.0, 10.03, 9.97];
        let change = Change::of(&a, &b, 2).unwrap();
        assert!(change.low < 0.0 && change.high > 0.0, "{change:?}");
        assert_eq!(change.decision(NOISE_PCT), Decision::NoDifference);
        // A significant change within the noise band is no difference either.
        let tiny: Vec<f64> = a.iter().map(|x| x * 1.01).collect();
        let tiny = Change::of(&a, &tiny, 3).unwrap();
        assert!(tiny.low > 0.0, "significant: {tiny:?}");
        assert_eq!(tiny.decision(NOISE_PCT), Decision::NoDifference);
    }

    #[test]
    fn a_wide_spread_is_undecided() {
        let a = [5.0, 15.0, 10.0, 20.0, 2.0];
        let b = [6.0, 14.0, 25.0, 3.0, 12.0];
        let change = Change::of(&a, &b, 4).unwrap();
        assert_eq!(change.decision(NOISE_PCT), Decision::Undecided, "{change:?}");
        assert!(Change::of(&[], &b, 4).is_none());
    }

    #[test]
    fn a_rate_changes_as_its_mean_time_does() {
        // Steps of 10 ms against steps of 12.5 ms: 20 % fewer steps per second.
        let a = [10.0, 10.1, 9.9, 10.0, 10.05, 9.95];
        let b: Vec<f64> = a.iter().map(|x| x * 1.25).collect();
        let rate = |v: &[f64]| 1000.0 * v.len() as f64 / v.iter().sum::<f64>();
        let change = Change::of_by(&a, &b, 5, rate).unwrap();
        assert!((change.percent + 20.0).abs() < 1e-9, "{change:?}");
        assert_eq!(change.decision(NOISE_PCT), Decision::Lower);
        let (low, high) = interval(&a, 5, rate).unwrap();
        assert!(low < 100.0 && 100.0 < high && high - low < 2.0, "{low} {high}");
        assert!(interval(&[], 5, rate).is_none());
    }

    #[test]
    fn intervals_are_fixed_by_the_seed() {
        let b = [11.0, 10.5, 10.9];
        assert_eq!(Change::of(&A, &b, 9), Change::of(&A, &b, 9));
    }
}
