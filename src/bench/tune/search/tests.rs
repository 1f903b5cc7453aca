//! The search's unit tests: its steps simulated against a rate model, within the budgets.

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
    c.train_iteration_ms = (0..20).map(|i| iteration * (1.0 + 0.002 * (i % 3) as f64)).collect();
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
