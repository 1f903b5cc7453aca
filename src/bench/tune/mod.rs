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
mod request;
pub mod requests;
pub mod search;
pub mod stream_or_stage;
mod tuned;

use request::{rows_of, tune_step};
pub use request::{StageTo, TuneError, TuneRequest, TuneStep, TUNE_FILE};
pub use tuned::{tune_workload, Tuned};

use std::collections::HashMap;
use std::time::Instant;

use self::answer::{answer, Answer, AnswerKnobs};
use self::at_once::{verify, Tally, Verifying};
use self::enough::Enough;
use self::page::TuneOutputs;
use self::predict::{Demand, StepSpread};
use self::requests::{
    remote_workers_into, searched_requests, store_bound_into, AtTheAnswer, RequestsAnswer,
};
use self::search::{best_row, next_step, Next, SearchState};
use self::stream_or_stage::{measure_staged, FromTheTune, StreamOrStage};
use super::events::{Events, Measuring, TimeLeft};
use super::export::{self, Html, Json};
use super::report::{render, Row, MIN_STEPS_FOR_INTERVAL};
use super::sweep::cell::Cell;
use super::sweep::plan::plan;
use super::sweep::results::{read_results, CellResult, ResultsSink};
use super::sweep::{
    config_text, dataset_name, model_key, run_cell, CellPhases, PhaseEnds, SweepContext, SweepError,
};
use crate::dataset::files::is_url;
use crate::measure::phase::ModelPhase;
use crate::model::StepChoice;

/// The most configurations one tune measures (repeats counted): a search that has not
/// decided by then answers with what it has.
const MOST_MEASUREMENTS: usize = 24;

/// Runs a tune: measures what the search asks for until it decides, appending each cell to
/// `out/results.jsonl`, then writes `out/tune.json` and returns the answer.
pub fn run_tune(request: &TuneRequest<'_>, events: &mut dyn Events) -> Result<Tuned, TuneError> {
    let tuning = Tuning::open(request)?;
    let mut sink = ResultsSink::open(request.out, request.resume, &config_text(request.config))
        .map_err(SweepError::from)?;
    let mut models: HashMap<String, _> =
        sink.results().iter().map(|r| (model_key(&r.cell), r.model.clone())).collect();
    if let Some(path) = request.models_from {
        for result in read_results(path).map_err(SweepError::from)? {
            models.entry(model_key(&result.cell)).or_insert(result.model);
        }
    }
    let mut searched = search(&tuning, &mut sink, &mut models, events)?;
    let rows = rows_of(sink.results());
    let state = tuning.state_of(&rows).ok_or(TuneError::NoAnswer)?;
    let base = &tuning.base;
    let knobs = AnswerKnobs {
        loader: base.loader,
        config: base.loader_config(&request.config.loader.knobs.config()),
        lerobot_train: request.config.loader.declared.lerobot_train.clone(),
        processes: request.ranks.n,
        processes_from: request.ranks.from.clone(),
        launcher: request.launcher.clone(),
    };
    let mut answer = answer(&rows, &state, knobs).ok_or(TuneError::NoAnswer)?;
    // A run of several ranks: the answer measured with every rank at once, and moved where its
    // slowest rank still waits.
    let at_once = match request.ranks.n > 1 && base.loader.is_a_training_run() {
        true => {
            let (target_pct, cpus_per_rank) = (state.settings.target_pct, state.budgets.cpus);
            let context = &tuning.context;
            let at = Verifying { context, base, request, target_pct, cpus_per_rank };
            let (steps, tally) = (&mut searched.steps, &mut searched.tally);
            verify(&at, &mut answer, steps, tally, &mut models, events)?
        }
        false => None,
    };
    let (requests, stream_or_stage) = match is_url(request.root) {
        true => on_a_url_root(&tuning, &state, &sink, &mut answer, &mut models, events)?,
        false => (None, None),
    };
    let lerobot = !base.loader.is_native();
    let builds = request.bridge.builds();
    let tuned = Tuned {
        answer,
        steps: searched.steps,
        measuring_s: searched.tally.seconds,
        tune_wall_s: request.started.elapsed().as_secs_f64(),
        budget_s: request.budget.map(|b| b.as_secs_f64()),
        budget_ran_out: searched.budget_ran_out,
        runs_built: lerobot.then_some(builds.runs),
        run_build_s: lerobot.then_some(builds.seconds),
        at_once,
        full_length: request.full_length,
        requests,
        stream_or_stage,
        workload: tune_workload(sink.results()),
        host: sink.results().first().map(|r| r.system.clone()),
    };
    let report = render(sink.results());
    let outputs = TuneOutputs { tuned: &tuned, report: &report };
    export::write(request.out, &outputs, &[&Json, &Html])?;
    Ok(tuned)
}

/// What every measurement of a tune shares: its request, the dataset opened, the first cell
/// (one worker at the first depth: every later one is it with other workers and depth), its
/// step as chosen, and the bytes of a batch.
struct Tuning<'a, 'r> {
    request: &'a TuneRequest<'r>,
    context: SweepContext<'a>,
    base: Cell,
    step: StepChoice,
    batch_bytes: u64,
}

impl<'a, 'r> Tuning<'a, 'r> {
    /// Opens the request's dataset and plans its first cell; refuses a tune without a step, and
    /// one whose memory budget holds no batch.
    fn open(request: &'a TuneRequest<'r>) -> Result<Self, TuneError> {
        let (config, root, out) = (request.config, request.root, request.out);
        if config.model.model.iter().any(|model| model.is_none()) {
            return Err(TuneError::NoStep);
        }
        crate::dataset::files::output_apart_from(out, root).map_err(SweepError::from)?;
        let (context, device) =
            SweepContext::open(config, root, out, config.model.device(), request.bridge)?;
        let plan = plan(config, &dataset_name(root), device).map_err(SweepError::from)?;
        let base = plan.cells[0].clone();
        let batch_bytes = context.batch_bytes(&base)?;
        let in_flight = predict::MemoryModel::batches_in_flight(1, 1);
        if batch_bytes * in_flight > request.budgets.memory_bytes {
            return Err(TuneError::MemoryBelowOneBatch {
                budget_gb: request.budgets.memory_bytes as f64 / 1e9,
                batch_gb: batch_bytes as f64 / 1e9,
                in_flight,
            });
        }
        let step = context.step_of(&base).map_err(SweepError::from)?;
        Ok(Self { request, context, base, step, batch_bytes })
    }

    /// The step's demand, read from `first` (the first measurement: a run's hand-over is slower
    /// with a worker sharing the cores than with none). A replayed step's rate is its mean's:
    /// its median may be a fraction of it. lerobot-train's main process hands each batch over
    /// before a step it is fed (a time, not its own policy, whose step alone holds it): the step
    /// as the run takes it counts the hand-over.
    fn demand(&self, first: &Row) -> Demand {
        let base = &self.base;
        let fed_to_a_run = base.loader.is_a_training_run() && base.model.is_a_stand_in();
        let batch = base.knobs.batch_size;
        let demand = match self.step.replay() {
            Some(replay) => {
                let (median_ms, p95_ms) = replay.median_and_p95_ms();
                let mean_ms = replay.mean_ms();
                // A file of one time (however often) replays a steady step.
                let steady = p95_ms == median_ms && mean_ms == median_ms;
                let varies = (!steady).then_some(StepSpread { median_ms, p95_ms });
                Demand { varies, ..Demand::steady(mean_ms, batch) }
            }
            None if fed_to_a_run => Demand::steady(first.train_compute_ms, batch),
            None => Demand::steady(first.model_step_ms, batch),
        };
        match fed_to_a_run {
            true => demand.handed_over(first.train_h2d_ms),
            false => demand,
        }
    }

    /// Where the search stands after `rows`: the demand read from the first measurement (one
    /// worker at the first depth), the row every later one is judged beside; None before any.
    fn state_of(&self, rows: &[Row]) -> Option<SearchState> {
        let request = self.request;
        let first = SearchState::row(rows, 1, request.settings.prefetch).or(rows.first())?;
        Some(SearchState {
            demand: self.demand(first),
            budgets: request.budgets,
            settings: request.settings,
            batch_bytes: self.batch_bytes,
        })
    }

    /// The cell of `workers` × `prefetch`, and the train steps it measures: enough that the
    /// queue the warm-up filled is not what is measured (the loader's least measured batches,
    /// and at most twice as many, or --train-steps where more), and that least.
    fn cell_at(&self, workers: usize, prefetch: usize, repeat: usize) -> (Cell, usize, usize) {
        let mut cell = Cell { repeat, ..self.base.clone() };
        (cell.knobs.workers, cell.knobs.prefetch) = (workers, prefetch);
        let config = self.request.config;
        let least = cell
            .loader_config(&config.loader.knobs.config())
            .least_measured_batches()
            .max(MIN_STEPS_FOR_INTERVAL);
        let train_steps = config.run.train_steps.max(2 * least);
        (cell, train_steps, least)
    }

    /// The phases of a measurement of `train_steps` steps, ended early by `ends` where given;
    /// the loader phase where `loader_alone`. A step of fixed cost
    /// needs no warm-up of its own: one step takes the loader's start-up (its first batch) out
    /// of the window, which then runs twice the batches in flight at least.
    fn phases<'u>(
        &self,
        train_steps: usize,
        loader_alone: bool,
        ends: Option<&'u dyn PhaseEnds>,
    ) -> CellPhases<'u> {
        CellPhases {
            loader: loader_alone,
            ends,
            traced: false,
            train_steps: Some(train_steps),
            train_warmup: self.base.model.is_fixed_cost().then_some(1),
            ranks: 1,
        }
    }
}

/// What the search measured: each step, their time, and whether the budget ended it.
struct Searched {
    steps: Vec<TuneStep>,
    tally: Tally,
    budget_ran_out: bool,
}

/// The search: what an earlier, interrupted tune measured first, as it was measured; then what
/// the search asks for, until it decides, the most measurements are made, or the budget would
/// not hold the next.
fn search(
    tuning: &Tuning<'_, '_>,
    sink: &mut ResultsSink,
    models: &mut HashMap<String, ModelPhase>,
    events: &mut dyn Events,
) -> Result<Searched, TuneError> {
    let request = tuning.request;
    let mut searched =
        Searched { steps: Vec::new(), tally: Tally::default(), budget_ran_out: false };
    let found: Vec<Cell> = sink.results().iter().map(|r| r.cell.clone()).collect();
    for (n, cell) in found.iter().enumerate() {
        let rows = rows_of(&sink.results()[..=n]);
        let demand = tuning.state_of(&rows).expect("a row").demand;
        searched.steps.push(tune_step(&rows, cell, "measured before".into(), None));
        events.measured(&searched.steps.last().expect("pushed").event(demand));
    }
    for _ in 0..MOST_MEASUREMENTS {
        let rows = rows_of(sink.results());
        let next = match tuning.state_of(&rows) {
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
        let per_configuration_s = searched.tally.per_configuration_s();
        let budget_left_s = request.budget.map(|b| b.as_secs_f64() - elapsed_s);
        // The first configuration is measured whatever the budget: without it there is no
        // answer.
        let over = budget_left_s.is_some_and(|left| left < per_configuration_s.unwrap_or(0.0));
        if !rows.is_empty() && over {
            searched.budget_ran_out = true;
            events.budget_ran_out(elapsed_s);
            break;
        }
        let (cell, steps, least) = tuning.cell_at(workers, prefetch, repeat);
        let left = TimeLeft { elapsed_s, per_configuration_s, budget_left_s };
        events.measuring(Measuring { workers, prefetch, why: &why, steps, left });
        let start = Instant::now();
        // Each phase ends once it has answered what it is measured for, after `least` batches
        // or steps (a verifying measurement, not the first or a repeat, judged against the
        // best).
        let target_pct = request.settings.target_pct;
        let best = best_row(&rows, target_pct).filter(|_| repeat == 0);
        let enough = Enough { least, workers, best, first: rows.is_empty(), target_pct };
        let ends = (!request.full_length).then_some(&enough as &dyn PhaseEnds);
        let phases = tuning.phases(steps, loader_alone, ends);
        let result = run_cell(&tuning.context, &cell, phases, models, |_| {})?;
        sink.append(result).map_err(SweepError::from)?;
        let seconds = start.elapsed().as_secs_f64();
        searched.tally.add(seconds);
        let rows = rows_of(sink.results());
        searched.steps.push(tune_step(&rows, &cell, why, Some(seconds)));
        let demand = tuning.state_of(&rows).expect("a row was measured").demand;
        events.measured(&searched.steps.last().expect("pushed").event(demand));
    }
    Ok(searched)
}

/// On a URL root: more requests in flight where the stream waits on them (and the workers
/// and the store's bound said with them), and the answer measured again from a staged copy.
fn on_a_url_root(
    tuning: &Tuning<'_, '_>,
    state: &SearchState,
    sink: &ResultsSink,
    answer: &mut Answer,
    models: &mut HashMap<String, ModelPhase>,
    events: &mut dyn Events,
) -> Result<(Option<RequestsAnswer>, Option<StreamOrStage>), TuneError> {
    let at_the_answer = |r: &&CellResult| {
        (r.cell.knobs.workers, r.cell.knobs.prefetch) == (answer.workers, answer.prefetch)
    };
    let Some(measured) = sink.results().iter().rev().find(at_the_answer).cloned() else {
        return Ok((None, None));
    };
    let (mut cell, steps, _) = tuning.cell_at(answer.workers, answer.prefetch, 0);
    let phases = tuning.phases(steps, false, None);
    let target_pct = tuning.request.settings.target_pct;
    let context = &tuning.context;
    let at = AtTheAnswer {
        context,
        cell: cell.clone(),
        measured,
        phases,
        target_pct,
        budgets: state.budgets,
    };
    let (searched, streamed) = match tuning.base.loader.is_native() {
        true => searched_requests(at, models, events)?,
        false => (None, at.measured),
    };
    if let Some(searched) = &searched {
        (answer.knobs.config.requests_in_flight, cell.knobs.requests_in_flight) =
            (searched.chosen, searched.chosen);
        if searched.workers_chosen != answer.workers {
            remote_workers_into(answer, &streamed, target_pct);
            cell.knobs.workers = answer.workers;
        }
        store_bound_into(answer, &streamed, target_pct);
    }
    let epoch_samples = context.frames();
    let request = tuning.request;
    let from = FromTheTune { request, cell, streamed: &streamed, phases, epoch_samples };
    Ok((searched, Some(measure_staged(from, models, events)?)))
}
