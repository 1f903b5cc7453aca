//! Tune's search, as pure functions of what was measured: the next configuration to measure or
//! the end of the search ([`next_step`]), from the models of [`super::predict`], and when a
//! verifying measurement has decided ([`decided`]). The knee is the sweep's (`report::knee`), with the
//! user's target as its tolerance, so that `report` re-renders a tune's cells to its answer.

use serde::{Deserialize, Serialize};

use super::neighbour::slowed_more_than_fed;
use super::predict::{Demand, MemoryModel, RateModel};
use crate::bench::report::{knee, train_change, Row, MIN_STEPS_FOR_INTERVAL};
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
    let measure_with =
        |workers: usize, prefetch: usize, why: &str, loader_alone: bool| Next::Measure {
            workers,
            prefetch,
            repeat: SearchState::row(rows, workers, prefetch).map_or(0, |r| r.repeats),
            why: why.to_string(),
            loader_alone,
        };
    let measure =
        |workers: usize, prefetch: usize, why: &str| measure_with(workers, prefetch, why, false);
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
    // More workers and a deeper prefetch shorten the wait for a batch, never its copy to the
    // device: the rules below judge the wait alone.
    // …unless the last worker added slowed the step (sharing its cores) more than it
    // shortened the wait: one more would do the same.
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
    let measurements: usize = rows.iter().map(|r| r.repeats).sum();
    let repeats_left = measurements < s.repeats_until;
    for &(i, change) in k.judged.iter().filter(|_| repeats_left) {
        let row = &rows[i];
        let at_knee = row.knobs.knobs.workers == k.workers && best.knobs.knobs.workers != k.workers;
        let undecided = change.is_some_and(|c| c.decision(s.target_pct) == Decision::Undecided);
        if at_knee && undecided {
            let (a, b) = (row, best);
            let fewer = if a.repeats <= b.repeats { a } else { b };
            if fewer.repeats < s.max_repeats {
                return measure(
                    fewer.knobs.knobs.workers,
                    fewer.knobs.knobs.prefetch,
                    "too close to call",
                );
            }
        }
    }
    // Prefetch only where batches arrive late now and then although the loader keeps up (the
    // median wait within the target), and the late ones cost more than the target (the mean
    // wait beyond it: hiding every wait could change the answer): a tail of waits (the slow
    // steps wait TAIL_RATIO times the typical one), which batches queued ahead hide, not a
    // wait every batch pays (its hand-over), which they do not.
    if k.workers >= 1 {
        let at_knee = SearchState::row(rows, k.workers, p).unwrap_or(best);
        let (wait, wait_p95) = at_knee.wait_pct;
        let late = at_knee.wait_mean_pct > s.target_pct
            && wait <= s.target_pct
            && wait_p95 >= TAIL_RATIO * wait
            && at_knee.train_iteration_ms.len() >= MIN_STEPS_FOR_INTERVAL;
        let deeper = p * 2;
        if late && missing(k.workers, deeper) && state.fits(rows, k.workers, deeper) {
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
mod tests {
    use super::*;
    use crate::bench::report::render;
    use crate::testdata::FakeCell;

    const GB: u64 = 1_000_000_000;

    fn demand(step_ms: f64) -> Demand {
        Demand::steady(step_ms, 16)
    }

    fn state(step_ms: f64, cpus: usize) -> SearchState {
        SearchState {
            demand: demand(step_ms),
            budgets: Budgets { cpus, memory_bytes: 64 * GB },
            settings: SearchSettings::new(5.0, 36),
            batch_bytes: 100_000_000,
        }
    }

    /// A loader whose workers give `per_worker` samples/s each (up to `cores`), feeding a step
    /// of `step_ms` over batches of 16, as a measured cell with 20 steps.
    fn measured(workers: usize, per_worker: f64, cores: usize, step_ms: f64) -> FakeCell {
        let mut c = FakeCell::new(workers, 2, 16);
        let loader = per_worker * workers.clamp(1, cores) as f64;
        let need = 16e3 / step_ms;
        let train = if workers == 0 { 1.0 / (1.0 / need + 1.0 / loader) } else { loader.min(need) };
        c.loader_samples_per_s = loader;
        c.train_samples_per_s = train;
        c.input_bound_pct = 100.0 * (1.0 - train / need);
        let iteration = 16e3 / train;
        c.train_iteration_ms =
            (0..20).map(|i| iteration * (1.0 + 0.002 * (i % 3) as f64)).collect();
        c
    }

    /// Runs the search against a simulated loader until it is done: the configurations it
    /// measured, in order.
    fn simulate(per_worker: f64, cores: usize, step_ms: f64, state: &SearchState) -> Vec<usize> {
        let mut cells: Vec<FakeCell> = Vec::new();
        let mut order = Vec::new();
        for _ in 0..20 {
            let results: Vec<_> = cells.iter().map(FakeCell::result).collect();
            let rows = if results.is_empty() { Vec::new() } else { render(&results).rows };
            match next_step(&rows, state) {
                Next::Done => return order,
                Next::Measure { workers, repeat, loader_alone, .. } => {
                    assert_eq!(repeat, 0, "clear-cut rates need no repeat");
                    order.push(workers);
                    let mut cell = measured(workers, per_worker, cores, step_ms);
                    cell.loader_alone = loader_alone;
                    cells.push(cell);
                }
            }
        }
        panic!("the search did not end: {order:?}");
    }

    #[test]
    fn a_long_step_is_fed_by_fewer_workers_than_a_short_one() {
        // 100 samples/s per worker on 8 cores. 200 ms steps need 80/s: one worker (none loses
        // 44 %). 40 ms steps need 400/s: four (three give 300).
        let long = simulate(100.0, 8, 200.0, &state(200.0, 8));
        assert_eq!(long, [1, 0], "one worker, verified against none");
        let short = simulate(100.0, 8, 40.0, &state(40.0, 8));
        assert_eq!(short, [1, 2, 4, 3], "one, the second's scaling, the prediction and one fewer");
    }

    #[test]
    fn a_verifying_measurement_ends_once_its_interval_decides() {
        // The best: 20 steps of 100 ms (±0.2 %). Steps of 120 ms are 17 % slower: decided
        // after the least steps, not before. Steps of 104 ms spread ±30 % straddle 5 %.
        let mut best = measured(1, 100.0, 8, 100.0);
        best.train_iteration_ms = (0..20).map(|i| 100.0 * (1.0 + 0.002 * (i % 3) as f64)).collect();
        let rows = render(&[best.result()]).rows;
        let best = best_row(&rows, 5.0).expect("one row");
        let slower = [120.0; 20];
        assert!(!decided(best, &slower[..9], 10, 5.0), "fewer than the least steps");
        assert!(decided(best, &slower[..10], 10, 5.0));
        assert!(decided(best, &[100.5; 10], 10, 5.0), "within the target: decided too");
        let spread: Vec<f64> =
            (0..20).map(|i| 104.0 * (1.0 + 0.3 * [-1.0, 1.0, 0.0, 0.5, -0.5][i % 5])).collect();
        assert!(!decided(best, &spread, 10, 5.0), "too close to call: every step is measured");
    }

    #[test]
    fn the_loader_alone_is_measured_only_where_the_rate_model_reads_it() {
        // 40 ms steps on 8 cores: one worker and the second (the rate model), then the
        // prediction (4) and one fewer, verified by training alone.
        let s = state(40.0, 8);
        let mut cells: Vec<FakeCell> = Vec::new();
        let mut alone = Vec::new();
        let rows = |cells: &[FakeCell]| match cells.is_empty() {
            true => Vec::new(),
            false => render(&cells.iter().map(FakeCell::result).collect::<Vec<_>>()).rows,
        };
        while let Next::Measure { workers, loader_alone, .. } = next_step(&rows(&cells), &s) {
            alone.push((workers, loader_alone));
            let mut cell = measured(workers, 100.0, 8, 40.0);
            cell.loader_alone = loader_alone;
            cells.push(cell);
            assert!(alone.len() < 10, "{alone:?}");
        }
        assert_eq!(alone, [(1, true), (2, true), (4, false), (3, false)]);
    }

    #[test]
    fn a_copy_to_the_device_is_not_a_reason_for_more_workers_or_depth() {
        // One worker feeds a 200 ms step with 1 % of each step waiting, but the copy takes
        // 6 % (input-bound 7 %, p95 higher): neither one more worker nor a deeper prefetch.
        let s = state(200.0, 4);
        let mut one = measured(1, 100.0, 4, 200.0);
        (one.input_bound_pct, one.copy_pct) = (7.0, 6.0);
        let cells = [one, measured(0, 100.0, 4, 200.0)];
        let rows = render(&cells.iter().map(FakeCell::result).collect::<Vec<_>>()).rows;
        assert_eq!(next_step(&rows, &s), Next::Done);
        // Where the wait itself is 7 %, one more worker is measured.
        let mut waiting = measured(1, 100.0, 4, 200.0);
        waiting.input_bound_pct = 7.0;
        let cells = [waiting, measured(0, 100.0, 4, 200.0)];
        let rows = render(&cells.iter().map(FakeCell::result).collect::<Vec<_>>()).rows;
        assert!(matches!(next_step(&rows, &s), Next::Measure { workers: 2, .. }));
    }

    #[test]
    fn one_worker_that_keeps_the_step_fed_needs_no_second() {
        // The step alone takes 40 ms (400 samples/s, four workers' worth), but as the run
        // takes it (its hand-over in the main process) one worker's batches wait 1 % of each
        // step: no second worker is measured, only none against it.
        let s = state(40.0, 8);
        let mut one = measured(1, 100.0, 8, 160.0);
        (one.input_bound_pct, one.copy_pct) = (60.0, 59.0);
        let rows = render(&[one.result()]).rows;
        assert!(rows[0].wait_mean_pct <= 5.0, "{}", rows[0].wait_mean_pct);
        let next = next_step(&rows, &s);
        assert!(matches!(next, Next::Measure { workers: 0, loader_alone: false, .. }), "{next:?}");
        // Where its batches wait 10 % of each step, the second's share is measured.
        let mut waiting = measured(1, 100.0, 8, 160.0);
        (waiting.input_bound_pct, waiting.copy_pct) = (60.0, 50.0);
        let rows = render(&[waiting.result()]).rows;
        let next = next_step(&rows, &s);
        assert!(matches!(next, Next::Measure { workers: 2, loader_alone: true, .. }), "{next:?}");
    }

    #[test]
    fn the_cpu_budget_bounds_the_search() {
        // 40 ms steps need 400/s but only two cores may be used: two workers and one fewer.
        let order = simulate(100.0, 8, 40.0, &state(40.0, 2));
        assert_eq!(order, [1, 2]);
        let order = simulate(100.0, 8, 40.0, &state(40.0, 1));
        assert_eq!(order, [1, 0]);
    }

    #[test]
    fn a_wrong_prediction_is_corrected_by_measuring() {
        // The loader phase says 100/s per worker, but each worker only gives 60/s while the
        // step runs: the search climbs past the prediction until the best is fed.
        let state = state(40.0, 8);
        let mut cells: Vec<FakeCell> = Vec::new();
        let mut order = Vec::new();
        loop {
            let results: Vec<_> = cells.iter().map(FakeCell::result).collect();
            let rows = if results.is_empty() { Vec::new() } else { render(&results).rows };
            match next_step(&rows, &state) {
                Next::Done => break,
                Next::Measure { workers, .. } => {
                    order.push(workers);
                    let mut c = measured(workers, 60.0, 8, 40.0);
                    c.loader_samples_per_s = 100.0 * workers.max(1) as f64;
                    cells.push(c);
                }
            }
            assert!(order.len() < 12, "{order:?}");
        }
        assert_eq!(order, [1, 2, 4, 3, 5, 6, 7], "up to 7 × 60 = 420 ≥ 400");
    }

    #[test]
    fn the_memory_budget_removes_configurations() {
        // Batches of 100 MB; 1 GB allows (w × 2 + 1) × 0.1 GB ≤ 1 GB: four workers, before
        // anything is measured. One worker's peak then shows a base of 0.3 GB beside its three
        // batches: three workers at most, and the search stops there.
        let mut s = state(40.0, 8);
        s.budgets.memory_bytes = GB;
        assert_eq!(s.most_workers(&[], 2), 4);
        let order = simulate(100.0, 8, 40.0, &s);
        assert_eq!(order, [1, 2, 3]);
        s.budgets.memory_bytes = 450_000_000;
        assert_eq!(s.most_workers(&[], 2), 1);
        assert_eq!(simulate(100.0, 8, 40.0, &s), [1, 0]);
    }

    #[test]
    fn an_undecided_interval_is_measured_again() {
        let s = state(100.0, 2);
        let spread = |workers: usize, ms: f64| {
            let mut c = FakeCell::new(workers, 2, 16);
            c.train_samples_per_s = 16e3 / ms;
            c.loader_samples_per_s = 200.0;
            c.train_iteration_ms =
                (0..10).map(|i| ms * (1.0 + 0.3 * [-1.0, 1.0, 0.0, 0.5, -0.5][i % 5])).collect();
            c
        };
        let cells = [spread(0, 200.0), spread(1, 106.0), spread(2, 100.0)];
        let rows = render(&cells.iter().map(FakeCell::result).collect::<Vec<_>>()).rows;
        match next_step(&rows, &s) {
            Next::Measure { workers, repeat, why, .. } => {
                assert_eq!((workers, repeat), (1, 1), "{why}");
                assert!(why.contains("too close"), "{why}");
            }
            Next::Done => panic!("a 6 % change spread ±30 % cannot decide"),
        }
        // Not once the measurements reach a quarter of the sweep's (3 workers × 3 depths).
        let small = SearchState { settings: SearchSettings::new(5.0, 9), ..s };
        assert_eq!(small.settings.repeats_until, 2);
        assert_eq!(next_step(&rows, &small), Next::Done, "3 measured: no repeat");
        // A prefetch depth at the best's workers too close to call does not move the knee:
        // nothing to measure again.
        let mut deeper = spread(2, 104.0);
        deeper.cell.knobs.prefetch = 4;
        let cells = [spread(0, 200.0), spread(1, 130.0), spread(2, 100.0), deeper];
        let rows = render(&cells.iter().map(FakeCell::result).collect::<Vec<_>>()).rows;
        assert_eq!(next_step(&rows, &s), Next::Done);
    }

    #[test]
    fn prefetch_is_searched_only_where_batches_are_late() {
        let s = state(200.0, 8);
        // One worker's steps wait `median` % of the step, the slow ones `late` times that.
        let fed = |median: f64, late: f64| {
            let mut c = measured(1, 100.0, 8, 200.0);
            (c.input_bound_pct, c.late_factor) = (median, late);
            c
        };
        let next = |one: FakeCell| {
            let cells = [one, measured(0, 100.0, 8, 200.0)];
            next_step(&render(&cells.iter().map(FakeCell::result).collect::<Vec<_>>()).rows, &s)
        };
        assert_eq!(next(fed(1.0, 3.0)), Next::Done, "a p95 of 3 % is within the target");
        // Every tenth step waits 7 %: a tail, but hiding it all would gain 2.5 % on average.
        assert_eq!(next(fed(2.0, 3.5)), Next::Done, "the late batches cost under the target");
        // Every tenth step waits 40 %: 5.8 % on average.
        match next(fed(2.0, 20.0)) {
            Next::Measure { workers, prefetch, .. } => assert_eq!((workers, prefetch), (1, 4)),
            Next::Done => panic!("late batches at the knee cost 5.8 %: try a deeper prefetch"),
        }
        // A wait every batch pays (4 %, its hand-over) with a p95 of 6 %: no tail to hide.
        assert_eq!(next(fed(4.0, 1.5)), Next::Done);
    }
}
