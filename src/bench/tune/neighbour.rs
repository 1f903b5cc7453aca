//! The step beside the loader, as SPDL asks of it: how much a faster loader could buy at all
//! (the headspace: the step fed from a batch already in memory against the train rate
//! measured), and how much the loader's processes slow a step that computes on the same cores
//! (the noisy neighbour: its time with each measured count of workers running against alone);
//! and the search's rule that adds no more workers once the step slowed more than the wait
//! shrank ([`slowed_more_than_fed`]).

use serde::{Deserialize, Serialize};

use super::predict::Demand;
use crate::bench::format::{millis, plural, rate};
use crate::bench::report::Row;

/// A step counts as slowed by the workers beyond this share of its time alone, percent: below
/// it, the difference is the step's own noise.
pub const SLOWED_PCT: f64 = 5.0;

/// The step beside the answer's loader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepBeside {
    /// The step alone: on a batch in memory (the model phase's median), or, for a step that
    /// computes, without workers in a train phase where that was shorter (its steps measured
    /// later and over more of them: the model phase's few come first, on a cold allocator), ms.
    pub alone_ms: f64,
    /// The most a loader that never made the step wait could add to the answer's train
    /// samples/s: the step's own rate over the answer's, less one, percent (0 where the answer
    /// is as fast).
    pub headspace_pct: f64,
    /// For a step that computes on the loader's cores (a model, a run's policy; not a stand-in
    /// that sleeps): its time with each count of workers measured at the answer's prefetch
    /// running beside it, fewest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with_workers: Vec<StepWithWorkers>,
    /// Where the search added no more workers because the last one slowed the step more than
    /// it shortened the wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<SlowedMoreThanFed>,
}

/// The step with a count of workers running beside it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepWithWorkers {
    /// Loader workers.
    pub workers: usize,
    /// The step (its copy and compute, the wait left out), median, ms.
    pub step_ms: f64,
    /// How much longer than alone, percent.
    pub slowdown_pct: f64,
}

/// A worker that cost the step more than it saved it waiting.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlowedMoreThanFed {
    /// The workers with the one too many.
    pub workers: usize,
    /// How much longer each step took than with one fewer, ms.
    pub slowed_ms: f64,
    /// How much shorter the wait for each batch was than with one fewer, ms.
    pub wait_shrank_ms: f64,
}

/// Whether `row`'s step computes on the cores its loader's workers share (a model, or a
/// lerobot-train run's policy), rather than standing in for one (a fixed or replayed time,
/// which workers cannot slow).
fn computes(row: &Row) -> bool {
    row.knobs.model.computes()
}

/// Whether the step of `workers` × `prefetch` slowed, against one fewer worker, by more than
/// its wait shrank, and beyond its noise ([`SLOWED_PCT`] of its time alone): the count that
/// more workers would not help, as both were measured; None where either is unmeasured or
/// the step does not compute.
pub fn slowed_more_than_fed(
    rows: &[Row],
    workers: usize,
    prefetch: usize,
) -> Option<SlowedMoreThanFed> {
    let with = Row::find(rows, workers, prefetch).filter(|r| computes(r))?;
    let fewer = Row::find(rows, workers.checked_sub(1)?, prefetch)?;
    let slowed_ms = with.train_step_ms - fewer.train_step_ms;
    let wait_shrank_ms = fewer.train_wait_ms - with.train_wait_ms;
    let beyond_noise = slowed_ms > with.model_step_ms * SLOWED_PCT / 100.0;
    (beyond_noise && slowed_ms > wait_shrank_ms).then_some(SlowedMoreThanFed {
        workers,
        slowed_ms,
        wait_shrank_ms,
    })
}

impl StepBeside {
    /// The step beside `answer`'s loader, of the measured `rows`, for a step of `demand`
    /// (whose rate is the step's own); `stopped` where the search stopped for it.
    pub fn of(
        rows: &[Row],
        demand: &Demand,
        answer: &Row,
        stopped: Option<SlowedMoreThanFed>,
    ) -> Self {
        let prefetch = answer.knobs.knobs.prefetch;
        let without_workers = rows
            .iter()
            .filter(|r| r.knobs.knobs.workers == 0 && computes(r))
            .map(|r| r.train_step_ms)
            .fold(f64::INFINITY, f64::min);
        let alone_ms = answer.model_step_ms.min(without_workers);
        let mut with_workers: Vec<StepWithWorkers> = rows
            .iter()
            .filter(|r| r.knobs.knobs.prefetch == prefetch && computes(r))
            .map(|r| StepWithWorkers {
                workers: r.knobs.knobs.workers,
                step_ms: r.train_step_ms,
                slowdown_pct: 100.0 * (r.train_step_ms / alone_ms - 1.0),
            })
            .collect();
        with_workers.sort_by_key(|s| s.workers);
        let headspace = 100.0 * (demand.samples_per_s() / answer.train_samples_per_s - 1.0);
        Self {
            alone_ms,
            headspace_pct: if headspace.is_finite() { headspace.max(0.0) } else { 0.0 },
            with_workers,
            stopped,
        }
    }

    /// What it says, as sentences with a leading space.
    pub fn sentences(&self, train_samples_per_s: f64) -> String {
        let mut text = String::new();
        if !self.with_workers.is_empty() {
            let each: Vec<String> = self
                .with_workers
                .iter()
                .map(|s| {
                    format!(
                        "{} ms with {} worker{} ({:+.0} %)",
                        millis(s.step_ms),
                        s.workers,
                        plural(s.workers),
                        s.slowdown_pct
                    )
                })
                .collect();
            let slowed =
                self.with_workers.iter().any(|s| s.workers > 0 && s.slowdown_pct > SLOWED_PCT);
            let so = match slowed {
                true => "the workers take cores from the step",
                false => "the workers did not slow it beyond its noise",
            };
            text.push_str(&format!(
                " The step alone (its batch in memory) takes {} ms; beside the loader {}: {so}.",
                millis(self.alone_ms),
                each.join(", ")
            ));
        }
        if let Some(s) = &self.stopped {
            text.push_str(&format!(
                " No more workers than {}: the last one slowed each step by {} ms and shortened \
                 its wait by {} ms.",
                s.workers - 1,
                millis(s.slowed_ms),
                millis(s.wait_shrank_ms.max(0.0))
            ));
        }
        let at_most = train_samples_per_s * (1.0 + self.headspace_pct / 100.0);
        text.push_str(&format!(
            " Headspace: a loader that never made the step wait would train at most {:.0} % \
             faster ({} samples/s).",
            self.headspace_pct,
            rate(at_most)
        ));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::render;
    use crate::bench::tune::answer::tests::state;
    use crate::bench::tune::search::{next_step, Next};
    use crate::testdata::FakeCell;

    /// `workers` feeding a step of 100 ms alone that took `step_ms` beside them and waited
    /// `wait_ms` for each batch of 16, as a cell with 20 steps.
    fn cell(workers: usize, step_ms: f64, wait_ms: f64) -> FakeCell {
        let mut c = FakeCell::new(workers, 2, 16);
        let iteration = step_ms + wait_ms;
        c.model_samples_per_s = 16e3 / 100.0;
        c.train_samples_per_s = 16e3 / iteration;
        c.input_bound_pct = 100.0 * wait_ms / iteration;
        c.late_factor = 1.0;
        c.train_iteration_ms = vec![iteration; 20];
        c
    }

    fn rows(cells: &[FakeCell]) -> Vec<Row> {
        render(&cells.iter().map(FakeCell::result).collect::<Vec<_>>()).rows
    }

    #[test]
    fn a_worker_that_slows_the_step_more_than_it_shortens_the_wait_is_one_too_many() {
        // The second worker: the step 40 ms slower, the wait 10 ms shorter.
        let slowed = rows(&[cell(1, 110.0, 60.0), cell(2, 150.0, 50.0)]);
        let s = slowed_more_than_fed(&slowed, 2, 2).expect("slowed more than fed");
        assert!(
            (s.slowed_ms - 40.0).abs() < 1e-6 && (s.wait_shrank_ms - 10.0).abs() < 1e-6,
            "{s:?}"
        );
        // The same slowdown with the wait 50 ms shorter: worth it.
        let fed = rows(&[cell(1, 110.0, 60.0), cell(2, 150.0, 10.0)]);
        assert_eq!(slowed_more_than_fed(&fed, 2, 2), None);
        // A slowdown within the step's noise (3 ms of 100) is not judged.
        let noise = rows(&[cell(1, 110.0, 60.0), cell(2, 113.0, 60.0)]);
        assert_eq!(slowed_more_than_fed(&noise, 2, 2), None);
        // Unmeasured neighbours, and a step that sleeps (workers cannot slow it): nothing.
        assert_eq!(slowed_more_than_fed(&slowed, 3, 2), None);
        assert_eq!(slowed_more_than_fed(&slowed, 1, 2), None);
        let mut sleeps = [cell(1, 110.0, 60.0), cell(2, 150.0, 50.0)];
        for c in &mut sleeps {
            c.cell.model = "synthetic:100ms".parse().unwrap();
        }
        assert_eq!(slowed_more_than_fed(&rows(&sleeps), 2, 2), None);
    }

    #[test]
    fn the_step_alone_is_the_shorter_of_the_model_phase_and_the_train_phase_without_workers() {
        // The model phase's 100 ms came out high against 80 ms without workers in training:
        // one worker's 96 ms is 20 % slower than that, not 4 % faster than the model phase.
        let row = rows(&[cell(0, 80.0, 40.0), cell(1, 96.0, 1.0)]);
        let state = state(100.0, 8);
        let beside = StepBeside::of(&row, &state.demand, &row[1], None);
        assert!((beside.alone_ms - 80.0).abs() < 1e-6, "{beside:?}");
        assert!((beside.with_workers[1].slowdown_pct - 20.0).abs() < 1e-6, "{beside:?}");
        // Where training without workers was slower, the model phase's stands.
        let row = rows(&[cell(0, 120.0, 40.0), cell(1, 110.0, 1.0)]);
        let beside = StepBeside::of(&row, &state.demand, &row[1], None);
        assert!((beside.alone_ms - 100.0).abs() < 1e-6, "{beside:?}");
    }

    #[test]
    fn the_search_adds_no_worker_after_one_that_slowed_the_step_more_than_it_fed_it() {
        // A step of 100 ms alone on 8 cores; the rate model's cells (one and two workers, each
        // measured alone too) predict two workers. Two are still starved.
        let state = state(100.0, 8);
        let mut one = cell(1, 110.0, 60.0);
        let mut two = cell(2, 125.0, 40.0);
        (one.loader_samples_per_s, two.loader_samples_per_s) = (100.0, 200.0);
        let next = |cells: &[FakeCell]| next_step(&rows(cells), &state);
        let Next::Measure { workers: 3, .. } = next(&[one.clone(), two.clone()]) else {
            panic!("still starved, the step 15 ms slower and the wait 20 ms shorter: one more")
        };
        two = cell(2, 150.0, 50.0);
        two.loader_samples_per_s = 200.0;
        let after = next(&[one.clone(), two.clone()]);
        assert!(
            !matches!(after, Next::Measure { workers: 3, .. }),
            "the step 40 ms slower, the wait 10 ms shorter: no third ({after:?})"
        );
        let row = rows(&[one, two]);
        let beside = StepBeside::of(&row, &state.demand, &row[1], slowed_more_than_fed(&row, 2, 2));
        assert_eq!(beside.with_workers.iter().map(|s| s.workers).collect::<Vec<_>>(), [1, 2]);
        assert!((beside.with_workers[1].slowdown_pct - 50.0).abs() < 1e-6, "{beside:?}");
        // Fed without a wait at 100 ms alone: 160 samples/s, against 16e3 / 200 = 80 measured.
        assert!((beside.headspace_pct - 100.0).abs() < 1e-6, "{beside:?}");
        let text = beside.sentences(80.0);
        assert!(text.contains("150.0 ms with 2 workers (+50 %): the workers take cores"), "{text}");
        assert!(text.contains("No more workers than 1: the last one slowed each step by 40.0 ms"));
        assert!(text.contains("at most 100 % faster (160 samples/s)"), "{text}");
    }
}
