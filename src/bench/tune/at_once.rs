//! The answer verified with every rank at once. The search measures one rank alone within its
//! share of the cores and predicts the per-rank answer; on the box, N ranks share the cores,
//! the page cache and the memory, and every step waits for the slowest. Where a lerobot-train
//! run has several ranks, the answer's configuration is measured with all of them at once (a
//! driver per rank, one process group): where its slowest rank is still input-bound beyond the
//! target, one more worker per rank is measured, while the rank's cores allow. Each such
//! measurement is kept in `DIR/at-once.jsonl` as it ends, so that `tune --resume` measures none
//! of them again.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::answer::{Answer, Bound};
use super::request::{TuneError, TuneRequest, TuneStep};
use crate::bench::events::{Events, Measuring, TimeLeft};
use crate::bench::report::MIN_STEPS_FOR_INTERVAL;
use crate::bench::store::jsonl::{JsonlError, JsonlStore};
use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::results::ResultsError;
use crate::bench::sweep::{run_cell, CellPhases, SweepContext, SweepError};
use crate::measure::phase::{ModelPhase, RankSpread, TrainPhase};

/// The most configurations measured with every rank at once.
pub const MOST_AT_ONCE: usize = 3;

/// The file of a tune's output directory keeping its measurements with every rank at once.
pub const AT_ONCE_FILE: &str = "at-once.jsonl";

/// One configuration measured with every rank at once, as kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeasuredAtOnce {
    /// Ranks measured at once.
    pub ranks: usize,
    /// Workers per rank.
    pub workers: usize,
    /// Prefetch depth.
    pub prefetch: usize,
    /// Wall seconds the measurement took.
    pub seconds: f64,
    /// Its train phase: the slowest rank's, with every rank beside it.
    pub train: TrainPhase,
}

/// A tune's measurements with every rank at once: those kept in its directory, and each new one
/// appended as it ends.
pub struct AtOnceStore {
    store: JsonlStore,
    kept: Vec<MeasuredAtOnce>,
}

impl AtOnceStore {
    /// The store of `out` (its measurements kept before, where it resumes; a torn last line cut).
    pub fn open(out: &Path) -> Result<Self, JsonlError> {
        let (store, kept) = JsonlStore::open(&out.join(AT_ONCE_FILE))?;
        Ok(Self { store, kept })
    }

    /// The measurement of `workers` × `prefetch` with `ranks` at once kept before, if any.
    pub fn kept(&self, ranks: usize, workers: usize, prefetch: usize) -> Option<&MeasuredAtOnce> {
        self.kept.iter().find(|m| (m.ranks, m.workers, m.prefetch) == (ranks, workers, prefetch))
    }

    /// Keeps `measured`, synced before it returns.
    pub fn keep(&mut self, measured: MeasuredAtOnce) -> Result<(), JsonlError> {
        self.store.append(&measured)?;
        self.kept.push(measured);
        Ok(())
    }
}

/// What measuring with every rank at once found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AtOnce {
    /// Ranks measured at once.
    pub processes: usize,
    /// Workers per rank of the last configuration measured (the answer's).
    pub workers: usize,
    /// Its prefetch depth.
    pub prefetch: usize,
    /// Its slowest rank's median input-bound share, percent.
    pub input_bound_pct: f64,
    /// Its slowest rank's train samples/s (each rank's own shard).
    pub train_samples_per_s: f64,
    /// The workers the search predicted from one rank alone, where the measurement at once
    /// disagreed and the answer moved from them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_workers: Option<usize>,
    /// Every rank of the last configuration measured.
    #[serde(flatten)]
    pub spread: RankSpread,
}

/// What a tune has measured so far: how many configurations, and the wall seconds they took.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tally {
    /// Configurations measured by this run.
    pub count: usize,
    /// Wall seconds they took.
    pub seconds: f64,
}

impl Tally {
    /// Counts one more measurement, of `seconds`.
    pub fn add(&mut self, seconds: f64) {
        (self.count, self.seconds) = (self.count + 1, self.seconds + seconds);
    }

    /// Mean wall seconds of a configuration measured so far (None before the first).
    pub fn per_configuration_s(&self) -> Option<f64> {
        (self.count > 0).then(|| self.seconds / self.count as f64)
    }
}

/// What verifying a tune's answer with every rank at once measures with: the tune's sweep
/// context, the cell its configurations vary, the tune's request (its ranks, output directory
/// and start), its target and each rank's cores.
pub(crate) struct Verifying<'a, 'c> {
    /// Measures a cell.
    pub context: &'a SweepContext<'c>,
    /// The cell whose workers and prefetch are set.
    pub base: &'a Cell,
    /// The tune.
    pub request: &'a TuneRequest<'a>,
    /// The input-bound share the answer must be within, percent.
    pub target_pct: f64,
    /// Cores each rank may use.
    pub cpus_per_rank: usize,
}

/// Measures `answer`'s configuration with every rank at once (those kept in the tune's
/// directory taken as measured), then one more worker per rank while the slowest rank is still
/// input-bound beyond the target and a rank's cores allow, at most [`MOST_AT_ONCE`]; each
/// measurement is a step of `steps` and heard by `events`. The answer becomes the best
/// measured; what was found is returned.
pub(crate) fn verify(
    at: &Verifying<'_, '_>,
    answer: &mut Answer,
    steps: &mut Vec<TuneStep>,
    tally: &mut Tally,
    models: &mut HashMap<String, ModelPhase>,
    events: &mut dyn Events,
) -> Result<Option<AtOnce>, TuneError> {
    let (request, ranks, prefetch) = (at.request, at.request.ranks.n, answer.prefetch);
    let kept_error = |e: JsonlError| TuneError::from(SweepError::from(ResultsError::from(e)));
    let (mut workers, predicted) = (answer.workers, answer.workers);
    let mut why = format!("the answer with the {ranks} ranks at once");
    let mut best: Option<(TuneStep, TrainPhase)> = None;
    let mut kept = AtOnceStore::open(request.out).map_err(kept_error)?;
    let train_steps = request.config.run.train_steps.max(2 * MIN_STEPS_FOR_INTERVAL);
    for _ in 0..MOST_AT_ONCE {
        let (phase, seconds) = match kept.kept(ranks, workers, prefetch) {
            // Measured by an earlier, interrupted tune: as it was measured.
            Some(before) => (before.train.clone(), None),
            None => {
                let left = TimeLeft {
                    elapsed_s: request.started.elapsed().as_secs_f64(),
                    per_configuration_s: tally.per_configuration_s(),
                    budget_left_s: None,
                };
                events.measuring(Measuring {
                    workers,
                    prefetch,
                    why: &why,
                    steps: train_steps,
                    left,
                });
                let mut cell = at.base.clone();
                (cell.knobs.workers, cell.knobs.prefetch) = (workers, prefetch);
                let phases = CellPhases {
                    loader: false,
                    ends: None,
                    traced: false,
                    train_steps: Some(train_steps),
                    train_warmup: at.base.model.is_fixed_cost().then_some(1),
                    ranks,
                };
                let start = Instant::now();
                let train = run_cell(at.context, &cell, phases, models, |_| {})?.train;
                let seconds = start.elapsed().as_secs_f64();
                tally.add(seconds);
                let keep = MeasuredAtOnce { ranks, workers, prefetch, seconds, train };
                kept.keep(keep.clone()).map_err(kept_error)?;
                (keep.train, Some(seconds))
            }
        };
        steps.push(TuneStep {
            workers,
            prefetch,
            repeat: 0,
            why: why.clone(),
            loader_samples_per_s: None,
            train_samples_per_s: phase.samples_per_s,
            input_bound_pct: phase.input_bound.median_pct,
            seconds,
        });
        let step = steps.last().expect("pushed");
        events.measured(&step.event(answer.demand));
        // More workers that did not help with every rank at once leave the fewer.
        let ib = |phase: &TrainPhase| phase.input_bound.median_pct;
        if best.as_ref().is_some_and(|(_, kept)| ib(&phase) >= ib(kept)) {
            break;
        }
        let next = next_workers(workers, &phase, at.target_pct, at.cpus_per_rank);
        best = Some((step.clone(), phase));
        let Some((more, because)) = next else { break };
        (workers, why) = (more, because);
    }
    let Some((step, phase)) = best else { return Ok(None) };
    measured_into(answer, step.workers, &phase, ranks, (predicted, at.target_pct));
    Ok(AtOnce::of(ranks, &step, phase, predicted))
}

/// What to do after measuring `workers` per rank at once gave `phase`: measure one more worker
/// per rank (and why), or keep the answer.
fn next_workers(
    workers: usize,
    phase: &TrainPhase,
    target_pct: f64,
    cpus_per_rank: usize,
) -> Option<(usize, String)> {
    let spread = phase.ranks.as_ref()?;
    let waited = phase.input_bound.median_pct;
    // No more workers per rank than the rank's share of the cores, as the search allows.
    if waited <= target_pct || workers + 1 > cpus_per_rank.max(1) {
        return None;
    }
    Some((
        workers + 1,
        format!(
            "with every rank at once, rank {} waited {waited:.1} % of its steps at {workers} \
             worker{}",
            spread.slowest_rank,
            if workers == 1 { "" } else { "s" }
        ),
    ))
}

/// `answer` made what `workers` per rank measured with the ranks at once gave, `phase` (the
/// slowest rank's, with every rank's memory): its workers, figures and memory; where it moved
/// from the `predicted` workers, what bounds it too.
fn measured_into(
    answer: &mut Answer,
    workers: usize,
    phase: &TrainPhase,
    ranks: usize,
    (predicted, target_pct): (usize, f64),
) {
    let wait_pct = answer.take_measured(workers, phase);
    answer.measured_at_once = true;
    let held = phase.memory.as_ref().map(|m| (m.pss_mb * 1e6) as u64);
    answer.memory_at_ranks_bytes = held;
    answer.memory_bytes = held.map(|all| all / ranks.max(1) as u64);
    if workers != predicted {
        (answer.one_fewer_pct, answer.too_close) = (None, None);
        if wait_pct <= target_pct {
            answer.bound = Bound::Step;
        }
    }
}

impl AtOnce {
    /// The last configuration measured at once, `phase` (which has its ranks), where `predicted`
    /// workers were the search's answer.
    pub fn of(
        processes: usize,
        step: &TuneStep,
        phase: TrainPhase,
        predicted: usize,
    ) -> Option<Self> {
        Some(Self {
            processes,
            workers: step.workers,
            prefetch: step.prefetch,
            input_bound_pct: phase.input_bound.median_pct,
            train_samples_per_s: phase.samples_per_s,
            predicted_workers: (predicted != step.workers).then_some(predicted),
            spread: phase.ranks?,
        })
    }

    /// One line for people: the ranks measured at once, the slowest, and where the answer moved.
    pub fn summary(&self) -> String {
        let moved = self.predicted_workers.map_or(String::new(), |p| {
            format!(
                "; the prediction from one rank alone was {p} worker{}, which left it input-bound",
                if p == 1 { "" } else { "s" }
            )
        });
        let first = self.spread.ranks.iter().filter_map(|r| r.first_batch_s).fold(0.0, f64::max);
        format!(
            "Measured with the {} ranks at once at {} worker{} each: rank {} is the slowest, \
             {:.1} % input-bound ({:.1} samples/s a rank; the ranks' waits spread over {:.1} % \
             of a step; first batch after {first:.1} s){moved}.",
            self.processes,
            self.workers,
            if self.workers == 1 { "" } else { "s" },
            self.spread.slowest_rank,
            self.input_bound_pct,
            self.train_samples_per_s,
            self.spread.rank_spread_pct,
        )
    }
}
