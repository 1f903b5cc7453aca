//! When one of a tune's measurements has measured enough: the question it serves is answered
//! and more batches or steps would not change the search's next step. A loader phase ends once
//! its rate is known within [`LOADER_TIGHT_PCT`]; a train phase once its interval against the
//! best decides (a verifying measurement), once its rate is known within [`TIGHT_PCT`], or —
//! the first measurement, which has nothing to be judged against — once its wait is clearly
//! within the target or clearly beyond it and its rate is known within [`SETTLED_PCT`]. The
//! looser shares are this VM's own spread from run to run (±10 %): finer, and the next run
//! would not agree with it anyway.
//! `tune --full-length` takes none of these ends, to check that they give the same answer.

use super::search::decided;
use crate::bench::report::Row;
use crate::bench::sweep::PhaseEnds;
use crate::measure::phase::StepSample;
use crate::measure::stats::mean_and_sd;

/// A train phase ends once the 95 % interval of its mean iteration is within this share of the
/// mean, percent: more steps would not move the figure the search reads.
const TIGHT_PCT: f64 = 2.0;

/// The first train phase ends once its wait is clearly on one side of the target and the 95 %
/// interval of its mean iteration is within this share of the mean, percent: the search's next
/// step (a second worker, or one fewer) no longer depends on it, and a measurement judged
/// against it later counts this interval in its own.
const SETTLED_PCT: f64 = 10.0;

/// A loader phase ends once the 95 % interval of its mean batch time (over runs of one batch
/// from each worker, which arrive together) is within this share of the mean, percent: the
/// rate model reads one worker's rate and a second's share to predict the workers that the
/// train phases then verify.
const LOADER_TIGHT_PCT: f64 = 10.0;

/// What a tune's measurement is for, and so when it has measured enough.
#[derive(Debug, Clone, Copy)]
pub struct Enough<'a> {
    /// The fewest batches or steps measured (the queue the warm-up filled not measured alone).
    pub least: usize,
    /// The loader's workers: their batches arrive together, judged as one run.
    pub workers: usize,
    /// The row the measurement is judged against (a verifying one's), where there is one.
    pub best: Option<&'a Row>,
    /// Whether it is the tune's first measurement, with nothing to be judged against.
    pub first: bool,
    /// The share of the step's throughput the answer may lose to input, percent.
    pub target_pct: f64,
}

impl PhaseEnds for Enough<'_> {
    fn loader(&self, batch_ms: &[f64]) -> bool {
        let runs: Vec<f64> =
            batch_ms.chunks_exact(self.workers.max(1)).map(|c| c.iter().sum()).collect();
        batch_ms.len() >= self.least && tight(&runs, 2, LOADER_TIGHT_PCT)
    }

    fn train(&self, steps: &[StepSample]) -> bool {
        let iterations: Vec<f64> = steps.iter().map(|s| s.wait_ms + s.step_ms).collect();
        let (least, target) = (self.least, self.target_pct);
        self.best.is_some_and(|best| decided(best, &iterations, least, target))
            || tight(&iterations, least, TIGHT_PCT)
            || (self.first && clear_of(steps, target) && tight(&iterations, least, SETTLED_PCT))
    }
}

/// Whether the mean share of the step the `steps` waited for their batches lies, with its 95 %
/// interval, wholly within `target_pct` or wholly beyond it.
fn clear_of(steps: &[StepSample], target_pct: f64) -> bool {
    let shares: Vec<f64> = steps
        .iter()
        .map(|s| {
            let whole = s.wait_ms + s.step_ms;
            if whole > 0.0 {
                100.0 * s.wait_ms / whole
            } else {
                0.0
            }
        })
        .collect();
    let Some((mean, half_width)) = mean_and_half_width(&shares) else { return false };
    mean + half_width < target_pct || mean - half_width > target_pct
}

/// Whether `values`, `least` of them at least, give a mean whose 95 % interval lies within
/// `pct` of it.
fn tight(values: &[f64], least: usize, pct: f64) -> bool {
    match mean_and_half_width(values) {
        Some((mean, half_width)) => {
            values.len() >= least && mean > 0.0 && 100.0 * half_width / mean <= pct
        }
        None => false,
    }
}

/// The mean of `values` and the half width of its 95 % interval (normal); None for fewer than
/// two.
fn mean_and_half_width(values: &[f64]) -> Option<(f64, f64)> {
    let (mean, sd) = mean_and_sd(values).filter(|_| values.len() >= 2)?;
    Some((mean, 1.96 * sd / (values.len() as f64).sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(wait_ms: f64, step_ms: f64) -> StepSample {
        StepSample { wait_ms, ..StepSample::alone([0.0, step_ms, 0.0, 0.0], step_ms) }
    }

    fn enough(first: bool) -> Enough<'static> {
        Enough { least: 6, workers: 1, best: None, first, target_pct: 5.0 }
    }

    #[test]
    fn a_measurement_is_tight_once_its_interval_is_within_its_share_of_its_mean() {
        let steady: Vec<f64> = (0..12).map(|i| 100.0 + (i % 3) as f64).collect();
        assert!(tight(&steady, 10, TIGHT_PCT));
        assert!(!tight(&steady, 13, TIGHT_PCT), "fewer steps than the least");
        let spread: Vec<f64> = (0..12).map(|i| if i % 2 == 0 { 60.0 } else { 140.0 }).collect();
        assert!(!tight(&spread, 10, TIGHT_PCT));
        assert!(!tight(&[0.0; 12], 10, TIGHT_PCT), "no time, no rate");
    }

    /// The first measurement ends once its wait is clearly fed or clearly starved and its rate
    /// is known within 10 %, not 2 %; a later one without a best to be judged against does not.
    #[test]
    fn the_first_train_phase_ends_once_its_wait_is_clearly_on_one_side_of_the_target() {
        // Iterations of 1 s ± 4 %: within 10 % after 6 steps, within 2 % only after about 15.
        let jitter = |i: usize| [-40.0, 40.0, -20.0, 20.0, 0.0, -40.0, 40.0][i % 7];
        let fed: Vec<StepSample> = (0..6).map(|i| step(8.0, 992.0 + jitter(i))).collect();
        assert!(enough(true).train(&fed));
        assert!(!enough(false).train(&fed), "only the first settles at 5 %");
        assert!(!enough(true).train(&fed[..5]), "fewer steps than the least");
        let starved: Vec<StepSample> = (0..6).map(|i| step(700.0, 300.0 + jitter(i))).collect();
        assert!(enough(true).train(&starved));
        // A wait about the target (4 % or 6 % of the step in turn) is not clear either way.
        let about: Vec<StepSample> =
            (0..6).map(|i| step(if i % 2 == 0 { 40.0 } else { 60.0 }, 950.0 + jitter(i))).collect();
        assert!(!enough(true).train(&about));
    }

    /// Two workers hand over their batches in pairs (one at once, one after a whole batch's
    /// time): the loader's rate is judged over the pairs, which are steady.
    #[test]
    fn a_loader_phase_is_judged_over_one_batch_from_each_worker() {
        let pairs: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 40.0 } else { 1400.0 + 10.0 * (i % 3) as f64 })
            .collect();
        let two = Enough { workers: 2, least: 10, ..enough(true) };
        assert!(two.loader(&pairs));
        assert!(!enough(true).loader(&pairs), "one batch at a time, the pairs spread widely");
        assert!(!Enough { least: 12, ..two }.loader(&pairs), "fewer batches than the least");
    }
}
