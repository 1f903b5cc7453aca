//! Tune's answer as plain data ([`Answer`], made from the measured rows by [`answer`]): the
//! workers and prefetch, what bounds the run when nothing within the budgets keeps the step fed,
//! and what a faster step would need. Its text is `answer_text`'s, its flags `flags`'.

use serde::{Deserialize, Serialize};

use super::neighbour::{slowed_more_than_fed, StepBeside};
use super::predict::{Demand, RateModel};
use super::search::{Budgets, SearchState};
use crate::bench::report::cache_fit::CacheFit;
use crate::bench::report::{knee, shallowest_prefetch, Knee, Row, PREFETCH_TOLERANCE_PCT};
use crate::loader::config::LoaderConfig;
use crate::loader::lerobot::LoaderBackend;
use crate::loader::lerobot::Startup;
use crate::measure::change::{Change, Decision};
use crate::measure::phase::{RemoteBound, TrainPhase};
use crate::measure::stats::median;

/// lerobot-train's `prefetch_factor` (0.6's `TrainPipelineConfig`): its flags set
/// `--prefetch_factor` only where a measured depth beat it.
pub const LEROBOT_PREFETCH_FACTOR: usize = 4;

/// The step speed-ups the answer predicts workers for.
const SPEEDUPS: [f64; 4] = [1.0, 2.0, 4.0, 8.0];

/// What keeps the answer from feeding the step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "bound")]
pub enum Bound {
    /// Nothing: the step is fed, it dominates.
    Step,
    /// The cores: the step needs more workers than `--cpus` allows.
    Cpus {
        /// Workers predicted to feed the step (None: no count does).
        workers_needed: Option<usize>,
    },
    /// The memory budget: more workers' batches would not fit.
    Memory {
        /// The most workers within it.
        most_workers: usize,
    },
    /// More workers were measured and did not help (they share the cores with the step).
    Loader,
    /// The store a URL root is read from: the stream waits on its first bytes or its link
    /// whatever the workers (tune measured more where they could help).
    Store {
        /// Latency or link.
        remote: RemoteBound,
        /// The change that helps, in words.
        advice: String,
    },
}

/// What a step `speedup` times faster would need.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Beyond {
    /// How much faster than the measured step.
    pub speedup: f64,
    /// Its step, ms.
    pub step_ms: f64,
    /// Samples/s it consumes.
    pub demand_samples_per_s: f64,
    /// Workers predicted to feed it (None: no count does).
    pub workers: Option<usize>,
}

/// The knobs the answer's flags carry besides workers and prefetch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerKnobs {
    /// Which loader the flags are for.
    pub loader: LoaderBackend,
    /// The loader's knobs tune kept fixed (its workers and prefetch are the answer's).
    pub config: LoaderConfig,
    /// The lerobot-train run's own arguments, where the loader is its (`--lerobot-train`):
    /// the answer is that command with its workers set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot_train: Option<String>,
    /// Ranks training at once on the box (`accelerate launch --num_processes`): the answer is
    /// per rank, within each rank's share of the budgets.
    #[serde(default = "one_process")]
    pub processes: usize,
    /// Where the count of ranks was read (or why it was assumed), where `--lerobot-train`
    /// gave a launch line: said beside the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes_from: Option<String>,
    /// The user's launch line up to the run's arguments, as written (`accelerate launch
    /// --config_file c.yaml $(which lerobot-train)`), where `--lerobot-train` gave one: the
    /// answer is that line with its workers set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<String>,
}

/// One training process, as tune assumes unless told otherwise.
fn one_process() -> usize {
    1
}

/// The other side of a comparison its interval could not decide: the best measured, where the
/// answer is fewer workers whose point estimate lies within the target (perhaps as good), or
/// the fewer workers, where the answer is the best (their point estimate lies beyond it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TooClose {
    /// Its workers.
    pub workers: usize,
    /// Its prefetch depth.
    pub prefetch: usize,
    /// Its train samples/s.
    pub train_samples_per_s: f64,
    /// The fewer workers' change against the best.
    pub change: Change,
}

/// Tune's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Loader workers.
    pub workers: usize,
    /// Batches in flight per worker.
    pub prefetch: usize,
    /// The knobs of the flags.
    pub knobs: AnswerKnobs,
    /// Whether lerobot-train's default prefetch was measured at these workers and lost to
    /// the answer's by more than the prefetch tolerance: only then do its flags lower it.
    #[serde(default)]
    pub default_prefetch_lost: bool,
    /// Its train samples/s.
    pub train_samples_per_s: f64,
    /// The 95 % interval of it, where enough steps were kept.
    pub train_interval: Option<(f64, f64)>,
    /// Its input-bound share (median, p95), percent: waiting for batches and copying them.
    pub input_bound_pct: (f64, f64),
    /// The wait for batches alone (median, p95), percent: what more workers could shorten.
    #[serde(default)]
    pub wait_pct: (f64, f64),
    /// Its accelerator utilisation (MLPerf Storage's), percent, where its train phase said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub au_pct: Option<f64>,
    /// Beside the AU, the mean ms a step the accelerator did not compute (wait and copy):
    /// what a long step's high AU hides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms_per_step: Option<f64>,
    /// One fewer worker's change against the best, percent, where measured.
    pub one_fewer_pct: Option<f64>,
    /// The other configuration, where an interval could not decide between the two.
    pub too_close: Option<TooClose>,
    /// The step's demand.
    pub demand: Demand,
    /// The loader's rates as measured.
    pub rates: RateModel,
    /// The loader's CPU per sample, ms.
    pub cpu_ms_per_sample: f64,
    /// The stage taking most of it and its share, percent (the native loader's).
    pub dominant_stage: Option<(String, f64)>,
    /// What bounds it.
    pub bound: Bound,
    /// The budgets it respected.
    pub budgets: Budgets,
    /// The search's tolerance, percent.
    pub target_pct: f64,
    /// What faster steps would need.
    pub beyond: Vec<Beyond>,
    /// Where the answer stays input-bound: a decoded-frame cache that would hold every frame
    /// within the memory budget, and the rate it predicts for the later epochs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheFit>,
    /// Whether its figures were measured with every rank at once (a run of several ranks),
    /// rather than predicted from one rank measured alone.
    #[serde(default)]
    pub measured_at_once: bool,
    /// The memory its configuration held, measured: the PSS of the training process and its
    /// workers (of one rank), bytes; None where the results did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// Seconds its DataLoader took to its first batch (its workers' start-up), measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_batch_s: Option<f64>,
    /// LeRobot's plain loader: its start taken apart (what each worker was sent, when each
    /// started), as the verifying measurement says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<Startup>,
    /// The memory every rank's processes held together, measured with the ranks at once, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_at_ranks_bytes: Option<u64>,
    /// For a step that varies: the prefetch depths measured at the answer's workers, and what
    /// a deeper one would hold; None for a steady step or one depth measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch_depths: Option<PrefetchDepths>,
    /// The step beside the loader: the headspace, and the step's time with the workers running
    /// against alone; None in answers written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_beside: Option<StepBeside>,
}

/// The prefetch depths measured at the answer's workers for a step that varies: which one
/// rides out its spread, and the memory the next would add.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefetchDepths {
    /// Each depth measured, shallowest first, with its train samples/s.
    pub measured: Vec<(usize, f64)>,
    /// What the next deeper depth (twice the answer's) would hold beyond the answer's: a
    /// batch more per worker for each added depth, bytes.
    pub deeper_adds_bytes: u64,
}

impl PrefetchDepths {
    /// The depths measured at the workers of `answer` where `state`'s step varies.
    fn of(rows: &[Row], state: &SearchState, answer: &Row) -> Option<Self> {
        state.demand.varies?;
        let workers = answer.knobs.knobs.workers;
        let mut measured: Vec<(usize, f64)> = rows
            .iter()
            .filter(|r| r.knobs.knobs.workers == workers)
            .map(|r| (r.knobs.knobs.prefetch, r.train_samples_per_s))
            .collect();
        measured.sort_by_key(|&(depth, _)| depth);
        let added = (workers.max(1) * answer.knobs.knobs.prefetch) as u64;
        (measured.len() > 1)
            .then_some(Self { measured, deeper_adds_bytes: state.batch_bytes * added })
    }
}

impl Answer {
    /// The answer made what `workers` measured again gave, `phase` (a measurement of its own:
    /// no interval; its memory, the process tree's): its workers, rate, shares, memory and first
    /// batch. The wait's median share, percent, is returned.
    pub(super) fn take_measured(&mut self, workers: usize, phase: &TrainPhase) -> f64 {
        let shares = (phase.input_bound.median_pct, phase.input_bound.p95_pct);
        let waits = phase.per_step.iter().map(|s| {
            let whole = s.wait_ms + s.step_ms;
            if whole > 0.0 {
                100.0 * s.wait_ms / whole
            } else {
                0.0
            }
        });
        self.workers = workers;
        self.train_samples_per_s = phase.samples_per_s;
        (self.input_bound_pct, self.wait_pct) = (shares, (median(waits), shares.1));
        self.memory_bytes = phase.memory.as_ref().map(|m| (m.pss_mb * 1e6) as u64);
        self.first_batch_s = phase.first_batch_s.or(self.first_batch_s);
        self.startup = phase.startup.clone().or(self.startup.take());
        self.train_interval = None;
        self.wait_pct.0
    }
}

/// The answer the measured `rows` give, or None where no row has a finite throughput.
pub fn answer(rows: &[Row], state: &SearchState, knobs: AnswerKnobs) -> Option<Answer> {
    let target = state.settings.target_pct;
    let k = knee(rows, &(0..rows.len()).collect::<Vec<_>>(), target)?;
    let (index, too_close) = chosen(rows, &k, target)?;
    let row = &rows[index];
    let loader = state.loader_row(rows, row);
    let rates =
        state.rates(rows).or(loader.loader_samples_per_s.map(|r| RateModel::of(r, None)))?;
    let needed = rates.workers_needed(&state.demand, target);
    let most = state.most_workers(rows, row.knobs.knobs.prefetch);
    let fed = row.fed_within(target);
    let bound = if fed {
        Bound::Step
    } else if needed.is_none_or(|n| n > state.budgets.cpus) {
        Bound::Cpus { workers_needed: needed }
    } else if needed.is_some_and(|n| n > most) {
        Bound::Memory { most_workers: most }
    } else {
        Bound::Loader
    };
    let one_fewer_pct = k
        .judged
        .iter()
        .find(|(i, _)| rows[*i].knobs.knobs.workers + 1 == row.knobs.knobs.workers)
        .map(|&(i, change)| {
            change.map_or_else(
                || 100.0 * (rows[i].train_samples_per_s / rows[k.best].train_samples_per_s - 1.0),
                |c| c.percent,
            )
        });
    let dominant_stage = (knobs.loader.is_native())
        .then(|| loader.dominant_stage())
        .flatten()
        .map(|s| (s.stage.name().to_string(), s.percent));
    let beyond = beyond(&rates, state, target);
    let cache = (bound != Bound::Step)
        .then(|| CacheFit::of(row, loader))
        .flatten()
        .filter(|fit| fit.frames_bytes <= state.budgets.memory_bytes);
    let default_prefetch_lost = default_prefetch_lost(rows, row);
    // Where the answer is still starved at the most workers measured, whether the last of them
    // slowed the step more than it fed it (the search then measured no more).
    let most_measured = rows.iter().map(|r| r.knobs.knobs.workers).max().unwrap_or(0);
    let stopped = (!fed)
        .then(|| slowed_more_than_fed(rows, most_measured, row.knobs.knobs.prefetch))
        .flatten();
    Some(Answer {
        workers: row.knobs.knobs.workers,
        prefetch: row.knobs.knobs.prefetch,
        knobs,
        default_prefetch_lost,
        train_samples_per_s: row.train_samples_per_s,
        train_interval: row.train_interval,
        input_bound_pct: (row.input_bound_pct, row.input_bound_p95_pct),
        wait_pct: row.wait_pct,
        au_pct: row.au_pct,
        wait_ms_per_step: row.wait_ms_per_step,
        one_fewer_pct,
        too_close,
        demand: state.demand,
        rates,
        cpu_ms_per_sample: loader.loader_cpu_ms_per_sample.unwrap_or(0.0),
        dominant_stage,
        bound,
        budgets: state.budgets,
        target_pct: target,
        beyond,
        cache,
        measured_at_once: false,
        memory_bytes: row.train_pss_bytes,
        first_batch_s: row.train_first_batch_s,
        startup: row.train_startup.clone(),
        memory_at_ranks_bytes: None,
        prefetch_depths: PrefetchDepths::of(rows, state, row),
        step_beside: Some(StepBeside::of(rows, &state.demand, row, stopped)),
    })
}

/// The row the answer is (an index into `rows`): the knee `k`'s, at its shallowest prefetch;
/// where the knee and the best are too close to call, the fewer workers where their point
/// estimate lies within `target`, else the best, the other named.
fn chosen(rows: &[Row], k: &Knee, target: f64) -> Option<(usize, Option<TooClose>)> {
    let members: Vec<usize> = (0..rows.len()).collect();
    let at = |workers: usize| -> Option<usize> {
        let with: Vec<usize> =
            members.iter().copied().filter(|&i| rows[i].knobs.knobs.workers == workers).collect();
        shallowest_prefetch(rows, &with)
    };
    let (knee_index, best_index) = (at(k.workers)?, at(rows[k.best].knobs.knobs.workers)?);
    let undecided = k
        .judged
        .iter()
        .find(|&&(i, _)| i == knee_index)
        .and_then(|&(_, change)| change)
        .filter(|c| c.decision(target) == Decision::Undecided && knee_index != best_index);
    Some(match undecided {
        None => (knee_index, None),
        Some(change) => {
            let (index, other) = if change.percent >= -target {
                (knee_index, best_index)
            } else {
                (best_index, knee_index)
            };
            let other = &rows[other];
            let close = TooClose {
                workers: other.knobs.knobs.workers,
                prefetch: other.knobs.knobs.prefetch,
                train_samples_per_s: other.train_samples_per_s,
                change,
            };
            (index, Some(close))
        }
    })
}

/// What a faster step would need, at each of [`SPEEDUPS`].
fn beyond(rates: &RateModel, state: &SearchState, target: f64) -> Vec<Beyond> {
    SPEEDUPS
        .iter()
        .map(|&speedup| {
            let demand = state.demand.faster(speedup);
            Beyond {
                speedup,
                step_ms: demand.step_ms,
                demand_samples_per_s: demand.samples_per_s(),
                workers: rates.workers_needed(&demand, target),
            }
        })
        .collect()
}

/// Whether, at the workers of `answer`, lerobot-train's default depth was measured and gave
/// more than [`PREFETCH_TOLERANCE_PCT`] less than the best depth there.
fn default_prefetch_lost(rows: &[Row], answer: &Row) -> bool {
    let at_workers = || rows.iter().filter(|r| r.knobs.knobs.workers == answer.knobs.knobs.workers);
    let best = at_workers().map(|r| r.train_samples_per_s).fold(f64::NEG_INFINITY, f64::max);
    let lost =
        |default: &Row| default.train_samples_per_s < best * (1.0 - PREFETCH_TOLERANCE_PCT / 100.0);
    at_workers().filter(|r| r.knobs.knobs.prefetch == LEROBOT_PREFETCH_FACTOR).any(lost)
}

#[cfg(test)]
pub(crate) mod tests;
