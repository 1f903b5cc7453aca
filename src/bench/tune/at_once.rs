//! The answer verified with every rank at once. The search measures one rank alone within its
//! share of the cores and predicts the per-rank answer; on the box, N ranks share the cores,
//! the page cache and the memory, and every step waits for the slowest. Where a lerobot-train
//! run has several ranks, the answer's configuration is measured with all of them at once (a
//! driver per rank, one process group): where its slowest rank is still input-bound beyond the
//! target, one more worker per rank is measured, while the rank's cores allow. Each such
//! measurement is kept in `DIR/at-once.jsonl` as it ends, so that `tune --resume` measures none
//! of them again.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::answer::{Answer, Bound};
use super::TuneStep;
use crate::bench::store::jsonl::{JsonlError, JsonlStore};
use crate::measure::phase::{RankSpread, TrainPhase};
use crate::measure::stats::median;

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

/// What to do after measuring `workers` per rank at once gave `phase`: measure one more worker
/// per rank (and why), or keep the answer.
pub fn next_workers(
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
pub fn measured_into(
    answer: &mut Answer,
    workers: usize,
    phase: &TrainPhase,
    ranks: usize,
    (predicted, target_pct): (usize, f64),
) {
    answer.workers = workers;
    let shares = (phase.input_bound.median_pct, phase.input_bound.p95_pct);
    let waits = phase.per_step.iter().map(|s| {
        let whole = s.wait_ms + s.step_ms;
        if whole > 0.0 {
            100.0 * s.wait_ms / whole
        } else {
            0.0
        }
    });
    let wait_pct = (median(waits), shares.1);
    answer.measured_at_once = true;
    answer.train_samples_per_s = phase.samples_per_s;
    let held = phase.memory.as_ref().map(|m| (m.pss_mb * 1e6) as u64);
    answer.memory_at_ranks_bytes = held;
    answer.memory_bytes = held.map(|all| all / ranks.max(1) as u64);
    answer.first_batch_s = phase.first_batch_s.or(answer.first_batch_s);
    (answer.input_bound_pct, answer.wait_pct) = (shares, wait_pct);
    // The interval was of one rank alone; the ranks at once are one measurement.
    answer.train_interval = None;
    if workers != predicted {
        (answer.one_fewer_pct, answer.too_close) = (None, None);
        if wait_pct.0 <= target_pct {
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
