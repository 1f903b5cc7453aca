//! Where a history of runs shifted to another level: E-divisive means (Matteson and James,
//! 2014), the method Apache Otava (formerly Hunter) and MongoDB run over their performance
//! histories, which adapts to the level of noise instead of taking a tolerance. Each split of
//! a segment is scored by the energy distance between the runs before and after it; the best
//! split is kept where a permutation test (the runs of each segment shuffled) says so clearly,
//! and the segments are split again until no split is clear. Written here, not taken from a
//! crate: the one port of E-divisive (`edivisive`, one release in 2021) is unmaintained, and
//! `changepoint`'s online Bayesian detectors need a hazard and priors a guard cannot choose.

use crate::loader::sampler::SplitMix64;

/// How change points are looked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The fewest runs of a level: a shift needs this many runs on each side.
    pub min_size: usize,
    /// A split is kept where its permutation p-value is below this.
    pub significance: f64,
    /// Permutations of each test.
    pub permutations: usize,
    /// Seed of the permutations (fixed: one history gives one answer).
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self { min_size: 3, significance: 0.05, permutations: 499, seed: 0x5eed }
    }
}

/// A run at which the history moved to another level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangePoint {
    /// The first run of the new level (its index in the history).
    pub index: usize,
    /// The permutation test's p-value.
    pub p_value: f64,
}

/// The change points of `values`, in run order.
pub fn change_points(values: &[f64], settings: &Settings) -> Vec<ChangePoint> {
    let mut bounds = vec![0, values.len()];
    let mut found = Vec::new();
    let mut random = SplitMix64::new(settings.seed);
    while let Some((at, q)) = best_split(values, &bounds, settings.min_size) {
        // How often the best split of the runs shuffled within their segments scores as high.
        let mut shuffled = values.to_vec();
        let mut as_high = 0;
        for _ in 0..settings.permutations {
            for segment in bounds.windows(2) {
                shuffle(&mut shuffled[segment[0]..segment[1]], &mut random);
            }
            if best_split(&shuffled, &bounds, settings.min_size).is_some_and(|(_, p)| p >= q) {
                as_high += 1;
            }
        }
        let p_value = (as_high + 1) as f64 / (settings.permutations + 1) as f64;
        if p_value >= settings.significance {
            break;
        }
        found.push(ChangePoint { index: at, p_value });
        bounds.push(at);
        bounds.sort_unstable();
    }
    found.sort_by_key(|c| c.index);
    found
}

/// The best split of any segment between `bounds` (sorted, the history's ends included): its
/// index and score; None where no segment holds two levels of `min_size` runs.
fn best_split(values: &[f64], bounds: &[usize], min_size: usize) -> Option<(usize, f64)> {
    bounds
        .windows(2)
        .filter_map(|w| best_in(&values[w[0]..w[1]], min_size).map(|(at, q)| (w[0] + at, q)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The best split of `x`, each side at least `min_size` runs: where it is and its score, the
/// energy distance between the sides scaled by `m·k/(m+k)`. The sums of distances within each
/// side and between them are kept as the split moves, one run at a time: O(n²) in all.
fn best_in(x: &[f64], min_size: usize) -> Option<(usize, f64)> {
    let n = x.len();
    let min_size = min_size.max(2);
    if n < 2 * min_size {
        return None;
    }
    let d = |i: usize, j: usize| (x[i] - x[j]).abs();
    let pairs = |range: std::ops::Range<usize>| {
        let r: Vec<usize> = range.collect();
        let mut sum = 0.0;
        for (a, &i) in r.iter().enumerate() {
            for &j in &r[a + 1..] {
                sum += d(i, j);
            }
        }
        sum
    };
    let tau = min_size;
    let (mut within_left, mut within_right) = (pairs(0..tau), pairs(tau..n));
    let mut between: f64 =
        (0..tau).flat_map(|i| (tau..n).map(move |j| (i, j))).map(|(i, j)| d(i, j)).sum();
    let mut best: Option<(usize, f64)> = None;
    for tau in min_size..=n - min_size {
        if tau > min_size {
            // Run tau − 1 moves from the right side to the left.
            let moved = tau - 1;
            let to_left: f64 = (0..moved).map(|i| d(i, moved)).sum();
            let to_right: f64 = (tau..n).map(|j| d(moved, j)).sum();
            within_left += to_left;
            within_right -= to_right;
            between += to_right - to_left;
        }
        let (m, k) = (tau as f64, (n - tau) as f64);
        let energy = 2.0 * between / (m * k)
            - within_left / (m * (m - 1.0) / 2.0)
            - within_right / (k * (k - 1.0) / 2.0);
        let q = m * k / (m + k) * energy;
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((tau, q));
        }
    }
    best
}

/// Shuffles `values` in place (Fisher–Yates).
fn shuffle(values: &mut [f64], random: &mut SplitMix64) {
    for i in (1..values.len()).rev() {
        values.swap(i, random.below(i + 1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` runs around `level` with ±`noise_pct` % of seeded noise.
    fn noisy(n: usize, level: f64, noise_pct: f64, seed: u64) -> Vec<f64> {
        let mut random = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let unit = random.below(1 << 20) as f64 / (1 << 20) as f64;
                level * (1.0 + noise_pct / 100.0 * (2.0 * unit - 1.0))
            })
            .collect()
    }

    #[test]
    fn no_shift_has_no_change_point_and_a_step_has_one_where_it_is() {
        let settings = Settings::default();
        for seed in 0..5 {
            assert_eq!(change_points(&noisy(40, 100.0, 4.0, seed), &settings), [], "seed {seed}");
        }
        let mut history = noisy(25, 100.0, 3.0, 7);
        history.extend(noisy(8, 90.0, 3.0, 8));
        let found = change_points(&history, &settings);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].index, 25);
        assert!(found[0].p_value < 0.05);
        // Down, then back up: two.
        history.extend(noisy(8, 100.0, 3.0, 9));
        let found: Vec<usize> =
            change_points(&history, &settings).iter().map(|c| c.index).collect();
        assert_eq!(found, [25, 33]);
    }

    #[test]
    fn too_short_a_history_or_level_has_none() {
        let settings = Settings::default();
        assert_eq!(change_points(&[], &settings), []);
        assert_eq!(change_points(&[1.0, 2.0, 3.0, 4.0, 5.0], &settings), []);
        // One slow run is no new level.
        let mut history = noisy(20, 100.0, 2.0, 3);
        history.push(80.0);
        assert_eq!(change_points(&history, &settings), []);
    }
}
