//! What a tune is asked ([`TuneRequest`], where it stages a URL root's copy: [`StageTo`]),
//! each measurement that leads to its answer ([`TuneStep`]), why it cannot answer
//! ([`TuneError`]), and its cells' rows as the search reads them. What it answers is
//! [`super::tuned`]'s.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::launch::Ranks;
use super::predict::Demand;
use super::search::{Budgets, SearchSettings};
use crate::bench::events::Measured;
use crate::bench::export::ExportError;
use crate::bench::report::{render, Row};
use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::config::SweepConfig;
use crate::bench::sweep::results::{CellResult, Resume};
use crate::bench::sweep::SweepError;
use crate::loader::lerobot::LerobotBridge;

/// Where a tune of a URL root stages its copy, if anywhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageTo {
    /// A directory of its own under the scratch directory (`/dev/shm/feedbench`), removed once
    /// measured.
    Scratch,
    /// This directory, kept for the run to train from.
    Into(PathBuf),
    /// Nowhere: the answer streams (`--no-stage`).
    Not,
}

/// The file of a tune's output directory holding its search and its answer.
pub const TUNE_FILE: &str = "tune.json";

/// Why a tune could not answer.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Measuring failed.
    #[error("{0}")]
    Sweep(#[from] SweepError),
    /// The memory budget does not hold one worker's batches.
    #[error(
        "the memory budget ({budget_gb:.2} GB) is below one worker's batches in flight: a batch \
         takes {batch_gb:.2} GB and one worker holds {in_flight} at once; allow more memory, or \
         make batches smaller (batch size, resolution, uint8 frames)"
    )]
    MemoryBelowOneBatch {
        /// The budget, GB.
        budget_gb: f64,
        /// One batch, GB.
        batch_gb: f64,
        /// Batches one worker holds with prefetch 1 (and the consumer's).
        in_flight: u64,
    },
    /// The step costs nothing to feed.
    #[error("the step `none` asks for no batches: tune needs a step (a model, or a step time)")]
    NoStep,
    /// No measured configuration trained at all.
    #[error("no configuration trained: nothing to answer from")]
    NoAnswer,
    /// tune.json or its page could not be written.
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// What a tune measures and how it decides: the sweep config of its one group of knobs (its
/// `workers` and `prefetch` axes are the configurations it may choose from), the budgets and
/// the search's settings.
#[derive(Debug, Clone)]
pub struct TuneRequest<'a> {
    /// The knobs, as a sweep config.
    pub config: &'a SweepConfig,
    /// The dataset root.
    pub root: &'a Path,
    /// The output directory.
    pub out: &'a Path,
    /// The budgets.
    pub budgets: Budgets,
    /// How to decide.
    pub settings: SearchSettings,
    /// Whether to go on with the results already in `out`.
    pub resume: Resume,
    /// Ranks training at once on the box, each with its loader: the budgets are one rank's
    /// share, and the answer's command launches them.
    pub ranks: Ranks,
    /// The user's launch line up to the run's arguments, where `--lerobot-train` gave one:
    /// the answer's command is it with the flags set.
    pub launcher: Option<String>,
    /// The wall time the whole tune may take: once the next configuration would not fit in
    /// what is left, the best answer measured so far is given, and said to be so.
    pub budget: Option<Duration>,
    /// When the tune began (its set-up included: the budget and `tune_wall_s` count from it).
    pub started: Instant,
    /// The bridge LeRobot's loaders go through: the lerobot-train runs it built, and the time
    /// building them took, are the tune's (those built to read the run's arguments before the
    /// tune began included).
    pub bridge: &'a LerobotBridge,
    /// The results of another tune of the same step (`--both-readers`: the first reader's),
    /// whose `model` phases this one takes instead of measuring the same step again.
    pub models_from: Option<&'a Path>,
    /// Whether every measurement runs all its batches and steps, none ending once it has
    /// answered its question (`bench/tune/enough.rs`): slower, to check that ending early
    /// answers the same.
    pub full_length: bool,
    /// Where a tune of a URL root stages a copy to measure the answer from, if anywhere.
    pub stage: StageTo,
    /// Nodes of the run (each with `ranks`): a URL root's bytes read per node an epoch.
    pub nodes: usize,
}

/// One step of the search: what was measured, why, and what it gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneStep {
    /// Loader workers.
    pub workers: usize,
    /// Batches in flight per worker.
    pub prefetch: usize,
    /// Which measurement of the configuration, from 0.
    pub repeat: usize,
    /// Why it was measured.
    pub why: String,
    /// The loader alone, samples/s; None where the search did not need it measured.
    pub loader_samples_per_s: Option<f64>,
    /// The loader feeding the step, samples/s (over its repeats so far).
    pub train_samples_per_s: f64,
    /// Input-bound share of the step, median, percent.
    pub input_bound_pct: f64,
    /// Wall seconds it took; None for a configuration found measured (resumed).
    pub seconds: Option<f64>,
}

impl TuneStep {
    /// The step as the tune's watcher hears it, beside what the step asks for.
    pub(super) fn event(&self, demand: Demand) -> Measured {
        Measured {
            workers: self.workers,
            prefetch: self.prefetch,
            loader_samples_per_s: self.loader_samples_per_s,
            train_samples_per_s: self.train_samples_per_s,
            input_bound_pct: self.input_bound_pct,
            seconds: self.seconds,
            step_ms: demand.step_ms,
            asked_samples_per_s: demand.samples_per_s(),
        }
    }
}

/// The step that measured `cell`, with its row's figures so far (its repeats aggregated).
pub(super) fn tune_step(rows: &[Row], cell: &Cell, why: String, seconds: Option<f64>) -> TuneStep {
    let row = rows
        .iter()
        .find(|r| {
            r.knobs.knobs.workers == cell.knobs.workers
                && r.knobs.knobs.prefetch == cell.knobs.prefetch
        })
        .expect("the configuration is measured");
    TuneStep {
        workers: cell.knobs.workers,
        prefetch: cell.knobs.prefetch,
        repeat: cell.repeat,
        why,
        loader_samples_per_s: row.loader_samples_per_s,
        train_samples_per_s: row.train_samples_per_s,
        input_bound_pct: row.input_bound_pct,
        seconds,
    }
}

/// The rows of a tune's results (one group: the knobs but workers and prefetch are fixed).
pub(super) fn rows_of(results: &[CellResult]) -> Vec<Row> {
    if results.is_empty() {
        Vec::new()
    } else {
        render(results).rows
    }
}
