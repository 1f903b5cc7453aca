//! Tune's search, as pure functions of what was measured: the next configuration to measure or
//! the end of the search ([`next_step`]), from the models of [`super::predict`], and when a
//! verifying measurement has decided ([`decided`]). The knee is the sweep's (`report::knee`), with the
//! user's target as its tolerance, so that `report` re-renders a tune's cells to its answer.

use serde::{Deserialize, Serialize};

use super::neighbour::slowed_more_than_fed;
use super::predict::{Demand, MemoryModel, RateModel};
use crate::bench::report::{knee, train_change, Knee, Row, MIN_STEPS_FOR_INTERVAL};
use crate::measure::change::Decision;

/// Late batches make a tail: the p95 wait at least this many times the median wait.
const TAIL_RATIO: f64 = 2.0;

/// The budgets a tune respects: the cores its workers may use and the memory their batches may
/// hold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// CPU cores: at most this many workers.
    pub cpus: usize,
    /// Bytes the loader may hold.
    pub memory_bytes: u64,
}

/// How the search decides.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchSettings {
    /// The share of the step's throughput the answer may lose to input, percent: the knee's
    /// tolerance (the sweep's is 5 %).
    pub target_pct: f64,
    /// The prefetch depth searched first (DataLoader's default, 2).
    pub prefetch: usize,
    /// The most times one configuration is measured while an interval cannot decide.
    pub max_repeats: usize,
    /// Measurements (repeats counted) after which nothing is measured again: a quarter of the
    /// exhaustive sweep's configurations, so that an interval that cannot decide never costs
    /// more than the sweep would. The answer then says the comparison is too close to call.
    pub repeats_until: usize,
}

impl SearchSettings {
    /// The settings for a tune choosing among `configurations` (the exhaustive sweep's).
    pub fn new(target_pct: f64, configurations: usize) -> Self {
        Self { target_pct, prefetch: 2, max_repeats: 3, repeats_until: configurations / 4 }
    }
}

/// The row a verifying measurement is judged against: the best measured (the knee's).
pub fn best_row(rows: &[Row], target_pct: f64) -> Option<&Row> {
    let members: Vec<usize> = (0..rows.len()).collect();
    knee(rows, &members, target_pct).map(|k| &rows[k.best])
}

/// Whether a verifying measurement whose steps so far took `iterations` ms (wait and step) has
/// decided against `best`: it kept `least` steps or more, and its change of train samples/s
/// against the best, with its interval, lies wholly beyond `target_pct` or wholly within it
/// (the knee's rule), so that more steps would not change the search's next step.
pub fn decided(best: &Row, iterations: &[f64], least: usize, target_pct: f64) -> bool {
    iterations.len() >= least
        && train_change(&best.train_iteration_ms, iterations, best.knobs.knobs.batch_size)
            .is_some_and(|c| c.decision(target_pct) != Decision::Undecided)
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Next {
    /// Measure `workers` × `prefetch` (its `repeat`-th time, from 0), for the reason given.
    Measure {
        /// Loader workers.
        workers: usize,
        /// Batches in flight per worker.
        prefetch: usize,
        /// Which measurement of this configuration, from 0.
        repeat: usize,
        /// Why, in a few words.
        why: String,
        /// Whether the loader alone is measured too: where the rate model reads it (one
        /// worker's rate, the second's share); elsewhere the train phase verifies.
        loader_alone: bool,
    },
    /// The measurements decide.
    Done,
}

/// Everything the next step depends on besides the measured rows.
#[derive(Debug, Clone, Copy)]
pub struct SearchState {
    /// The step's demand.
    pub demand: Demand,
    /// The budgets.
    pub budgets: Budgets,
    /// How to decide.
    pub settings: SearchSettings,
    /// One batch's bytes (before any peak is measured).
    pub batch_bytes: u64,
}

impl SearchState {
    /// The row of `workers` × `prefetch`, if measured.
    pub(super) fn row(rows: &[Row], workers: usize, prefetch: usize) -> Option<&Row> {
        Row::find(rows, workers, prefetch)
    }

    /// The memory model from what was measured at the first prefetch depth.
    pub fn memory(&self, rows: &[Row]) -> MemoryModel {
        let p = self.settings.prefetch;
        let peak = |w| Self::row(rows, w, p).and_then(|r| r.loader_peak_rss_bytes);
        MemoryModel::of(self.batch_bytes, p, peak(1), peak(2))
    }

    /// The rate model from the loader phases of one and two workers at the first depth.
    pub fn rates(&self, rows: &[Row]) -> Option<RateModel> {
        let p = self.settings.prefetch;
        let one = Self::row(rows, 1, p)?.loader_samples_per_s?;
        let two = Self::row(rows, 2, p).and_then(|r| r.loader_samples_per_s);
        Some(RateModel::of(one, two))
    }

    /// The row whose loader phase gives `row`'s cost per sample: its own where the loader
    /// alone was measured there, else one worker's at the first depth (the search measures
    /// the loader alone only where its models read it).
    pub fn loader_row<'a>(&self, rows: &'a [Row], row: &'a Row) -> &'a Row {
        match row.loader_cpu_ms_per_sample {
            Some(_) => row,
            None => Self::row(rows, 1, self.settings.prefetch).unwrap_or(row),
        }
    }

    /// Whether `workers` × `prefetch` fits the memory budget: the PSS its train phase held,
    /// where it was measured; else as far as the memory model of the measured rows tells.
    pub fn fits(&self, rows: &[Row], workers: usize, prefetch: usize) -> bool {
        let held = Self::row(rows, workers, prefetch).and_then(|r| r.train_pss_bytes);
        held.unwrap_or_else(|| self.memory(rows).bytes(workers, prefetch))
            <= self.budgets.memory_bytes
    }

    /// The most workers within both budgets at `prefetch`.
    pub fn most_workers(&self, rows: &[Row], prefetch: usize) -> usize {
        (1..=self.budgets.cpus).take_while(|&w| self.fits(rows, w, prefetch)).last().unwrap_or(0)
    }
}

/// The deepest prefetch a varying step's search goes to.
const MOST_PREFETCH: usize = 16;

/// The next configuration to measure, or [`Next::Done`]: one worker first (the loader's cost per
/// sample; the step's cost comes with it), a second where the prediction needs more (its
/// scaling), then the predicted count and one fewer; then up while the best is still starved,
/// the budgets allow and the last worker did not slow the step more than it fed it, down while one fewer is not worse, a repeat where an interval cannot
/// decide, and a deeper prefetch only where the step's spread makes batches late.
pub fn next_step(rows: &[Row], state: &SearchState) -> Next {
    let s = &state.settings;
    let p = s.prefetch;
    // The rate model's measurements (one worker, the second's share) need the loader alone;
    // the others verify with the step.
    let measure_with = |w: usize, prefetch: usize, why: &str, alone: bool| {
        measurement(rows, (w, prefetch), why, alone)
    };
    let measure = |w: usize, prefetch: usize, why: &str| measure_with(w, prefetch, why, false);
    let missing = |w: usize, prefetch: usize| SearchState::row(rows, w, prefetch).is_none();
    if missing(1, p) {
        return measure_with(1, p, "one worker's cost per sample", true);
    }
    let cap = state.most_workers(rows, p);
    let rates = state.rates(rows).expect("one worker is measured");
    let needed = match fed_by_one(rows, s) {
        // More workers shorten the wait alone: where one keeps the step fed, none needs more.
        true => Some(rates.workers_needed(&state.demand, s.target_pct).map_or(1, |n| n.min(1))),
        false => rates.workers_needed(&state.demand, s.target_pct),
    };
    if needed.is_none_or(|n| n >= 2) && cap >= 2 && missing(2, p) {
        return measure_with(2, p, "what a second worker adds", true);
    }
    let predicted = needed.unwrap_or(usize::MAX).min(cap);
    for w in [predicted, predicted.saturating_sub(1)] {
        if missing(w, p) {
            let why = if w == predicted { "the prediction" } else { "one fewer than predicted" };
            return measure(w, p, why);
        }
    }

    let members: Vec<usize> = (0..rows.len()).collect();
    let Some(k) = knee(rows, &members, s.target_pct) else {
        return Next::Done;
    };
    let best = &rows[k.best];
    let most_measured = rows.iter().map(|r| r.knobs.knobs.workers).max().unwrap_or(0);
    // More workers and a deeper prefetch shorten the wait for a batch, never its copy: the
    // rules judge the wait alone; and one more is not tried where the last slowed the step
    // (sharing its cores) more than it shortened the wait.
    if best.knobs.knobs.workers == most_measured
        && best.wait_pct.0 > s.target_pct
        && most_measured < cap
        && missing(most_measured + 1, p)
        && slowed_more_than_fed(rows, most_measured, p).is_none()
    {
        return measure(most_measured + 1, p, "the best is still input-bound: one more");
    }
    if k.workers >= 1 && missing(k.workers - 1, p) {
        return measure(k.workers - 1, p, "one fewer than the knee");
    }
    // The knee taken below the best's workers only because the interval cannot decide:
    // measure both sides again, while the budget for repeats lasts. (One fewer than the knee
    // was judged worse, and rows with the best's workers do not move the knee.)
    if let Some(again) = too_close_to_call(rows, &k, best, s) {
        return measure(again.knobs.knobs.workers, again.knobs.knobs.prefetch, "too close to call");
    }
    // Prefetch only where batches arrive late now and then although the loader keeps up (the
    // median wait within the target), and the late ones cost more than the target (the mean
    // wait beyond it: hiding every wait could change the answer): a tail of waits (the slow
    // steps wait TAIL_RATIO times the typical one), which batches queued ahead hide, not a
    // wait every batch pays (its hand-over), which they do not.
    if k.workers >= 1 && late_batches(SearchState::row(rows, k.workers, p).unwrap_or(best), s) {
        let deeper = p * 2;
        if missing(k.workers, deeper) && state.fits(rows, k.workers, deeper) {
            return measure(k.workers, deeper, "late batches: a deeper prefetch");
        }
    }
    // A varying step's runs of short steps: at the best's workers, as a knee below it (no
    // workers, where an interval cannot decide) has no queue to deepen.
    let workers = best.knobs.knobs.workers.max(k.workers);
    if let Some(deeper) = bursts_deeper(rows, state, workers).filter(|_| workers >= 1) {
        return measure(workers, deeper, "the step's short runs drain the queue: deeper");
    }
    Next::Done
}

/// The measurement of `workers` × `prefetch` (the next repeat where it was measured), for
/// `why`; the loader alone too where `loader_alone`.
fn measurement(
    rows: &[Row],
    (workers, prefetch): (usize, usize),
    why: &str,
    loader_alone: bool,
) -> Next {
    Next::Measure {
        workers,
        prefetch,
        repeat: SearchState::row(rows, workers, prefetch).map_or(0, |r| r.repeats),
        why: why.to_string(),
        loader_alone,
    }
}

/// The row to measure again where the knee was taken below the best's workers only because
/// the interval cannot decide (the one of the two measured fewer times), while the budget for
/// repeats lasts. (One fewer than the knee was judged worse, and rows with the best's workers do
/// not move the knee.)
fn too_close_to_call<'a>(
    rows: &'a [Row],
    k: &Knee,
    best: &'a Row,
    s: &SearchSettings,
) -> Option<&'a Row> {
    let measurements: usize = rows.iter().map(|r| r.repeats).sum();
    if measurements >= s.repeats_until {
        return None;
    }
    k.judged.iter().find_map(|&(i, change)| {
        let row = &rows[i];
        let at_knee = row.knobs.knobs.workers == k.workers && best.knobs.knobs.workers != k.workers;
        let undecided = change.is_some_and(|c| c.decision(s.target_pct) == Decision::Undecided);
        let fewer = if row.repeats <= best.repeats { row } else { best };
        (at_knee && undecided && fewer.repeats < s.max_repeats).then_some(fewer)
    })
}

/// Whether batches arrive late now and then at `row` although the loader keeps up (the median
/// wait within the target), and the late ones cost more than the target (the mean wait beyond
/// it: hiding every wait could change the answer): a tail of waits (the slow steps wait
/// TAIL_RATIO times the typical one), which batches queued ahead hide, not a wait every batch
/// pays (its hand-over), which they do not.
fn late_batches(row: &Row, s: &SearchSettings) -> bool {
    let (wait, wait_p95) = row.wait_pct;
    row.wait_mean_pct > s.target_pct
        && wait <= s.target_pct
        && wait_p95 >= TAIL_RATIO * wait
        && row.train_iteration_ms.len() >= MIN_STEPS_FOR_INTERVAL
}

/// Whether one worker at the first depth kept the step fed as measured: hiding every wait of
/// its train phase (the mean share of the step waiting for batches) would gain the target at
/// most. The step's copy and hand-over are no worker's to shorten.
fn fed_by_one(rows: &[Row], settings: &SearchSettings) -> bool {
    SearchState::row(rows, 1, settings.prefetch)
        .is_some_and(|one| one.fed_within(settings.target_pct))
}

/// For a step that varies (replayed): the next prefetch depth to measure at `workers` where the
/// loader keeps up with the step's mean rate yet the deepest depth measured still falls short
/// of it by more than the target — runs of short steps empty the queue, which a deeper one
/// rides out; None where that depth is fed, or the next would not fit.
fn bursts_deeper(rows: &[Row], state: &SearchState, workers: usize) -> Option<usize> {
    let demand = &state.demand;
    demand.varies?;
    let rates = state.rates(rows)?;
    let keeps_up = rates.loader_rate(workers) >= demand.samples_per_s();
    let deepest = rows
        .iter()
        .filter(|r| r.knobs.knobs.workers == workers)
        .max_by_key(|r| r.knobs.knobs.prefetch)?;
    let short = deepest.train_samples_per_s
        < demand.samples_per_s() * (1.0 - state.settings.target_pct / 100.0);
    let deeper = deepest.knobs.knobs.prefetch * 2;
    let next = keeps_up && short && deeper <= MOST_PREFETCH && state.fits(rows, workers, deeper);
    next.then_some(deeper)
}

#[cfg(test)]
mod tests;
