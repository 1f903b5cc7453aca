//! `feedbench tune`: the workers (and prefetch) a training step needs, measured and predicted
//! rather than swept. It measures the step and one worker's cost per sample, predicts the
//! workers that feed the step within the budgets ([`search`]), and verifies the prediction with
//! train-phase cells around it until the bootstrap interval decides. Every measurement is a
//! sweep cell in `DIR/results.jsonl` (so `feedbench report DIR` re-renders a tune, and a killed
//! tune resumes without measuring anything twice); the search's steps and the answer go to
//! `DIR/tune.json`.

mod accelerate;
pub mod answer;
mod answer_text;
pub mod at_once;
pub mod budget;
mod enough;
pub mod flags;
pub mod launch;
pub mod neighbour;
pub mod page;
pub mod plan;
pub mod predict;
pub mod requests;
pub mod search;
pub mod stream_or_stage;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use self::answer::{answer, Answer, AnswerKnobs};
use self::at_once::{verify, AtOnce, Tally, Verifying};
use self::enough::Enough;
use self::launch::Ranks;
use self::page::TuneOutputs;
use self::predict::{Demand, StepSpread};
use self::requests::{
    remote_workers_into, searched_requests, store_bound_into, AtTheAnswer, RequestsAnswer,
};
use self::search::{best_row, next_step, Budgets, Next, SearchSettings, SearchState};
use self::stream_or_stage::{measure_staged, FromTheTune, StageTo, StreamOrStage};
use super::events::{Events, Measured, Measuring, TimeLeft};
use super::export::{self, ExportError, Html, Json};
use super::report::{render, Row, MIN_STEPS_FOR_INTERVAL};
use super::sweep::cell::Cell;
use super::sweep::config::SweepConfig;
use super::sweep::plan::plan;
use super::sweep::results::{read_results, CellResult, ResultsSink, Resume};
use super::sweep::{
    config_text, dataset_name, model_key, run_cell, CellPhases, SweepContext, SweepError,
};
use crate::dataset::files::is_url;
use crate::loader::lerobot::LerobotBridge;
use crate::measure::phase::{BatchesUntil, StepSample, Until};
use crate::model::ModelSpec;

/// The file of a tune's output directory holding its search and its answer.
pub const TUNE_FILE: &str = "tune.json";

/// The most configurations one tune measures (repeats counted): a search that has not
/// decided by then answers with what it has.
const MOST_MEASUREMENTS: usize = 24;

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
    fn event(&self, demand: Demand) -> Measured {
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

/// What a tune did and found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tuned {
    /// The answer.
    pub answer: Answer,
    /// The search's steps, in order.
    pub steps: Vec<TuneStep>,
    /// Wall seconds of the measurements made by this run.
    pub measuring_s: f64,
    /// Wall seconds of the whole tune, from its start to its answer.
    pub tune_wall_s: f64,
    /// The budget of wall time it was given, seconds, where it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
    /// Whether the budget ran out before the search decided: the answer is the best measured
    /// so far.
    #[serde(default)]
    pub budget_ran_out: bool,
    /// lerobot-train runs (LeRobot's parser, dataset, policy) built for the tune, where it
    /// tuned one: once for the whole tune, whatever it measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_built: Option<usize>,
    /// Wall seconds of `tune_wall_s` spent building them (CUDA's start and the policy on the
    /// device included), where it tuned a run: the rest is the search from the run's first
    /// measured step on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_build_s: Option<f64>,
    /// The answer measured with every rank at once, where the run has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_once: Option<AtOnce>,
    /// Whether every measurement ran all its batches and steps (`--full-length`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub full_length: bool,
    /// On a URL root: the requests in flight searched where the stream waited on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestsAnswer>,
    /// On a URL root: streaming against staging a copy first, measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_or_stage: Option<StreamOrStage>,
}

/// Runs a tune: measures what the search asks for until it decides, appending each cell to
/// `out/results.jsonl`, then writes `out/tune.json` and returns the answer.
pub fn run_tune(request: &TuneRequest<'_>, events: &mut dyn Events) -> Result<Tuned, TuneError> {
    let (config, root, out) = (request.config, request.root, request.out);
    if config.model.model.iter().any(ModelSpec::is_none) {
        return Err(TuneError::NoStep);
    }
    crate::dataset::files::output_apart_from(out, root).map_err(SweepError::from)?;
    let (context, device) =
        SweepContext::open(config, root, out, config.model.device(), request.bridge)?;
    let base =
        plan(config, &dataset_name(root), device).map_err(SweepError::from)?.cells[0].clone();
    let batch_bytes = context.batch_bytes(&base)?;
    let in_flight = predict::MemoryModel::batches_in_flight(1, 1);
    if batch_bytes * in_flight > request.budgets.memory_bytes {
        return Err(TuneError::MemoryBelowOneBatch {
            budget_gb: request.budgets.memory_bytes as f64 / 1e9,
            batch_gb: batch_bytes as f64 / 1e9,
            in_flight,
        });
    }
    let mut sink =
        ResultsSink::open(out, request.resume, &config_text(config)).map_err(SweepError::from)?;
    let mut models: HashMap<String, _> =
        sink.results().iter().map(|r| (model_key(&r.cell), r.model.clone())).collect();
    if let Some(path) = request.models_from {
        for result in read_results(path).map_err(SweepError::from)? {
            models.entry(model_key(&result.cell)).or_insert(result.model);
        }
    }

    let mut steps: Vec<TuneStep> = Vec::new();
    let (mut tally, mut budget_ran_out) = (Tally::default(), false);
    // lerobot-train's main process hands each batch over before a step it is fed (a time, not
    // its own policy, whose step alone holds it): the step as the run takes it counts the
    // hand-over the first measurement's train phase measured.
    let fed_to_a_run = base.loader.is_a_training_run() && !base.model.is_a_runs_own();
    let batch = base.knobs.batch_size;
    let step = context.step_of(&base).map_err(SweepError::from)?;
    // A replayed step's rate is its mean's: its median may be a fraction of it.
    let demand_of = |first: &Row| match step.replay() {
        Some(replay) => {
            let (median_ms, p95_ms) = replay.median_and_p95_ms();
            let mean_ms = replay.mean_ms();
            // A file of one time (however often) replays a steady step.
            let steady = p95_ms == median_ms && mean_ms == median_ms;
            let varies = (!steady).then_some(StepSpread { median_ms, p95_ms });
            let demand = Demand { varies, ..Demand::steady(mean_ms, batch) };
            if fed_to_a_run {
                demand.handed_over(first.train_h2d_ms)
            } else {
                demand
            }
        }
        None if fed_to_a_run => {
            Demand::steady(first.train_compute_ms, batch).handed_over(first.train_h2d_ms)
        }
        None => Demand::steady(first.model_step_ms, batch),
    };
    // The step's demand is read from the first measurement (one worker at the first depth),
    // the row every later one is judged beside: a run's hand-over is slower with a worker
    // sharing the cores than with none.
    let state_of = |rows: &[Row]| -> Option<SearchState> {
        let first = SearchState::row(rows, 1, request.settings.prefetch).or(rows.first())?;
        Some(SearchState {
            demand: demand_of(first),
            budgets: request.budgets,
            settings: request.settings,
            batch_bytes,
        })
    };
    // What an earlier, interrupted tune measured comes first, as it was measured.
    let found: Vec<Cell> = sink.results().iter().map(|r| r.cell.clone()).collect();
    for (n, cell) in found.iter().enumerate() {
        let rows = rows_of(&sink.results()[..=n]);
        let step = tune_step(&rows, cell, "measured before".into(), None);
        let demand = state_of(&rows).expect("a row").demand;
        steps.push(step);
        events.measured(&steps.last().expect("pushed").event(demand));
    }
    for _ in 0..MOST_MEASUREMENTS {
        let rows = rows_of(sink.results());
        let next = match state_of(&rows) {
            Some(state) => next_step(&rows, &state),
            None => Next::Measure {
                workers: 1,
                prefetch: request.settings.prefetch,
                repeat: 0,
                why: "the step and one worker's cost per sample".into(),
                loader_alone: true,
            },
        };
        let Next::Measure { workers, prefetch, repeat, why, loader_alone } = next else { break };
        let elapsed_s = request.started.elapsed().as_secs_f64();
        let per_configuration_s = tally.per_configuration_s();
        let budget_left_s = request.budget.map(|b| b.as_secs_f64() - elapsed_s);
        // The first configuration is measured whatever the budget: without it there is no
        // answer.
        let over = budget_left_s.is_some_and(|left| left < per_configuration_s.unwrap_or(0.0));
        if !rows.is_empty() && over {
            budget_ran_out = true;
            events.budget_ran_out(elapsed_s);
            break;
        }
        let mut cell = Cell { repeat, ..base.clone() };
        (cell.knobs.workers, cell.knobs.prefetch) = (workers, prefetch);
        // Enough steps that the queue the warm-up filled is not what is measured: the loader's
        // least measured batches (and at most twice as many, or --train-steps where more).
        let config_of_cell = cell.loader_config(&config.loader.knobs.config());
        let least = config_of_cell.least_measured_batches().max(MIN_STEPS_FOR_INTERVAL);
        let train_steps = config.run.train_steps.max(2 * least);
        let left = TimeLeft { elapsed_s, per_configuration_s, budget_left_s };
        events.measuring(Measuring { workers, prefetch, why: &why, steps: train_steps, left });
        let start = Instant::now();
        // Each phase ends once it has answered what it is measured for, after `least` batches
        // or steps (a verifying measurement, not the first or a repeat, judged against the
        // best).
        let target_pct = request.settings.target_pct;
        let best = best_row(&rows, target_pct).filter(|_| repeat == 0);
        let first = rows.is_empty();
        let enough = Enough { least, workers, best, first, target_pct };
        let until = |steps: &[StepSample]| enough.train(steps);
        let loader_until = |batch_ms: &[f64]| enough.loader(batch_ms);
        let early = !request.full_length;
        let phases = CellPhases {
            loader: loader_alone,
            loader_until: early.then_some(&loader_until as BatchesUntil<'_>),
            traced: false,
            until: early.then_some(&until as Until<'_>),
            train_steps: Some(train_steps),
            // A step of fixed cost needs no warm-up of its own: one step takes the loader's
            // start-up (its first batch) out of the window, which then runs twice the batches
            // in flight at least.
            train_warmup: base.model.is_fixed_cost().then_some(1),
            ranks: 1,
        };
        let result = run_cell(&context, &cell, phases, &mut models, |_| {})?;
        sink.append(result).map_err(SweepError::from)?;
        let seconds = start.elapsed().as_secs_f64();
        tally.add(seconds);
        let rows = rows_of(sink.results());
        steps.push(tune_step(&rows, &cell, why, Some(seconds)));
        let demand = state_of(&rows).expect("a row was measured").demand;
        events.measured(&steps.last().expect("pushed").event(demand));
    }

    let rows = rows_of(sink.results());
    let state = state_of(&rows).ok_or(TuneError::NoAnswer)?;
    let knobs = AnswerKnobs {
        loader: base.loader,
        config: base.loader_config(&request.config.loader.knobs.config()),
        lerobot_train: request.config.loader.declared.lerobot_train.clone(),
        processes: request.ranks.n,
        processes_from: request.ranks.from.clone(),
        launcher: request.launcher.clone(),
    };
    let mut answer = answer(&rows, &state, knobs).ok_or(TuneError::NoAnswer)?;
    let lerobot = !base.loader.is_native();
    // A run of several ranks: the answer measured with every rank at once, and moved where its
    // slowest rank still waits.
    let at_once = match request.ranks.n > 1 && base.loader.is_a_training_run() {
        true => {
            let (target_pct, cpus_per_rank) = (state.settings.target_pct, state.budgets.cpus);
            let at =
                Verifying { context: &context, base: &base, request, target_pct, cpus_per_rank };
            verify(&at, &mut answer, &mut steps, &mut tally, &mut models, events)?
        }
        false => None,
    };
    // A URL root: more requests in flight where the stream waits on them, and the answer
    // measured again from a staged copy.
    let streamed = sink.results().iter().rev().find(|r| {
        (r.cell.knobs.workers, r.cell.knobs.prefetch) == (answer.workers, answer.prefetch)
    });
    let (mut requests, mut stream_or_stage) = (None, None);
    if let Some(measured) = streamed.cloned().filter(|_| is_url(root)) {
        let mut cell = base.clone();
        (cell.knobs.workers, cell.knobs.prefetch) = (answer.workers, answer.prefetch);
        let least = cell
            .loader_config(&config.loader.knobs.config())
            .least_measured_batches()
            .max(MIN_STEPS_FOR_INTERVAL);
        let phases = CellPhases {
            loader: false,
            loader_until: None,
            traced: false,
            until: None,
            train_steps: Some(config.run.train_steps.max(2 * least)),
            train_warmup: base.model.is_fixed_cost().then_some(1),
            ranks: 1,
        };
        let target_pct = request.settings.target_pct;
        let budgets = state.budgets;
        let at = AtTheAnswer {
            context: &context,
            cell: cell.clone(),
            measured,
            phases,
            target_pct,
            budgets,
        };
        let (searched, streamed) = match base.loader.is_native() {
            true => searched_requests(at, &mut models, events)?,
            false => (None, at.measured),
        };
        if let Some(searched) = &searched {
            (answer.knobs.config.requests_in_flight, cell.knobs.requests_in_flight) =
                (searched.chosen, searched.chosen);
            if searched.workers_chosen != answer.workers {
                remote_workers_into(&mut answer, &streamed, target_pct);
                cell.knobs.workers = answer.workers;
            }
            store_bound_into(&mut answer, &streamed, target_pct);
        }
        requests = searched;
        let epoch_samples = context.frames();
        let from = FromTheTune { request, cell, streamed: &streamed, phases, epoch_samples };
        stream_or_stage = Some(measure_staged(from, &mut models, events)?);
    }
    let builds = request.bridge.builds();
    let tuned = Tuned {
        answer,
        steps,
        measuring_s: tally.seconds,
        tune_wall_s: request.started.elapsed().as_secs_f64(),
        budget_s: request.budget.map(|b| b.as_secs_f64()),
        budget_ran_out,
        runs_built: lerobot.then_some(builds.runs),
        run_build_s: lerobot.then_some(builds.seconds),
        at_once,
        full_length: request.full_length,
        requests,
        stream_or_stage,
    };
    let report = render(sink.results());
    export::write(out, &TuneOutputs { tuned: &tuned, report: &report }, &[&Json, &Html])?;
    Ok(tuned)
}

/// The step that measured `cell`, with its row's figures so far (its repeats aggregated).
fn tune_step(rows: &[Row], cell: &Cell, why: String, seconds: Option<f64>) -> TuneStep {
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
fn rows_of(results: &[CellResult]) -> Vec<Row> {
    if results.is_empty() {
        Vec::new()
    } else {
        render(results).rows
    }
}
