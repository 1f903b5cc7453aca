//! `feedbench sweep`: the cells of a [`SweepConfig`]'s plan, each measured in the three phases
//! (`loader`, `model`, `train`) by [`run_cell`] and appended to `DIR/results.jsonl` as it
//! finishes.
//!
//! The `model` phase does not depend on the loader's workers and prefetch: it runs once per
//! [`KnobSet::ModelPhase`] values and repeat, and its figures are copied into every cell that
//! shares them (also across `--resume`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::cell::{Cell, Knob, KnobSet};
use super::config::{DatasetSource, EpisodeChoice, ModelSection, RunSection, SweepConfig};
use super::plan::{plan, TraceCellNotInGrid};
use super::results::{CellResult, ResultsError, ResultsSink, Resume, TRACE_FILE};
use super::workload::cell_workload;
use crate::bench::events::{synthesis_said, CellPhase, Events};
use crate::dataset::stage::scratch_dir;
use crate::dataset::write::{cached_synth, Preset, PresetOverrides};
use crate::dataset::{CodebaseVersion, Dataset, DatasetError, FrameMatch, Window};
use crate::loader::config::LoaderConfig;
use crate::loader::knobs::LoaderKnob;
use crate::loader::lerobot::{LerobotBridge, LoaderBackend};
use crate::loader::pipeline::{Loader, LoaderError};
use crate::loader::spec::LoaderSpec;
use crate::measure::fingerprint::DatasetFingerprint;
use crate::measure::phase::{
    run_model_phase, BatchMeasured, LoaderChoice, MeasuredLoader, ModelPhase, PlacedStep,
    StepPlace, StepSample, TrainError,
};
use crate::measure::system::{system_info, SystemInfo};
use crate::model::{ChosenModel, DeviceChoice, ModelError, ModelSpec, PolicyShapes};
use crate::model::{ShapesError, StepChoice};
use crate::timing::{EndsWhen, Trace};

/// Why a sweep stopped.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The dataset could not be opened or generated.
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    /// A loader failed.
    #[error("{0}")]
    Loader(#[from] LoaderError),
    /// The model could not be built or failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The config's trace cell is not in its grid.
    #[error(transparent)]
    Plan(#[from] TraceCellNotInGrid),
    /// results.jsonl could not be read or written.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The output directory cannot be used as asked.
    #[error("{path}: {what}")]
    Output {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

impl From<TrainError> for SweepError {
    fn from(e: TrainError) -> Self {
        match e {
            TrainError::Loader(e) => e.into(),
            TrainError::Model(e) => e.into(),
        }
    }
}

/// The dataset a sweep reads: its `path`, or its `synth` preset generated into the cache
/// directory (`/dev/shm/feedbench` by default) and reused when an earlier sweep generated the
/// same thing. `events` hear what is being generated.
pub fn prepare_dataset(d: &DatasetSource, events: &mut dyn Events) -> Result<PathBuf, SweepError> {
    if let Some(path) = &d.path {
        return Ok(path.clone());
    }
    let name = d.synth.as_deref().expect("checked: path or synth");
    let episodes = match d.episodes {
        Some(EpisodeChoice::Count(n)) => Some(n),
        _ => None,
    };
    let overrides = PresetOverrides {
        codec: d.codec,
        gop: d.gop,
        crf: d.crf,
        encoder_preset: None,
        episodes,
        frames_per_episode: d.frames_per_episode,
        ..PresetOverrides::default()
    };
    let preset = Preset::load(name)?.with(&overrides);
    let version = d.format.unwrap_or(CodebaseVersion::V30);
    let cache = d.cache.clone().unwrap_or_else(scratch_dir);
    Ok(cached_synth(&preset, version, &cache, &mut synthesis_said(events))?)
}

/// The results file of a sweep's output directory.
pub fn results_path(out: &Path) -> PathBuf {
    out.join(super::results::RESULTS_FILE)
}

/// What every cell of a sweep shares: the config, the open dataset and its window, where
/// results go and the machine.
pub(crate) struct SweepContext<'a> {
    config: &'a SweepConfig,
    root: &'a Path,
    /// What every cell reads, with the default knobs ([`SweepContext::spec_of`] sets a
    /// cell's).
    spec: LoaderSpec,
    out: &'a Path,
    dataset: Arc<Dataset>,
    window: Window,
    system: SystemInfo,
    /// The dataset's fingerprint, for each cell's workload.
    fingerprint: DatasetFingerprint,
    /// LeRobot's loaders' requests go through it.
    bridge: LerobotBridge,
    /// The steps of the config's model axis, resolved once (a replayed step's file read).
    models: HashMap<ModelSpec, ChosenModel>,
}

impl<'a> SweepContext<'a> {
    /// Opens the dataset at `root` as `config` reads it, for cells with the step on `device`
    /// (which must be there), writing into `out`, LeRobot's loaders through `bridge`. Returns
    /// the concrete device too.
    pub(crate) fn open(
        config: &'a SweepConfig,
        root: &'a Path,
        out: &'a Path,
        device: DeviceChoice,
        bridge: &LerobotBridge,
    ) -> Result<(Self, tch::Device), SweepError> {
        let device = device.resolve()?;
        let models = resolve_models(&config.model, device)?;
        let spec = LoaderSpec {
            dataset: root.to_path_buf(),
            episodes: match &config.dataset.episodes {
                Some(EpisodeChoice::List(list)) => Some(list.clone()),
                _ => None,
            },
            window: config.loader.window,
            frames: FrameMatch::default(),
            config: LoaderConfig::default(),
            replay: None,
        };
        let (dataset, window) = spec.open()?;
        let system = system_info(device);
        let fingerprint = DatasetFingerprint::of(root)
            .map_err(|e| DatasetError::invalid(&e.path, format!("fingerprinting: {}", e.what)))?;
        let bridge = bridge.clone();
        let context =
            Self { config, root, spec, out, dataset, window, system, fingerprint, bridge, models };
        Ok((context, device))
    }
}

/// The steps of a sweep's `[model]` axis, each resolved once, by the spec its cells give on
/// `device` (the `auto` preset made concrete, as the plan makes it); a file that gives no step
/// times is an error naming the key that gave it.
fn resolve_models(
    section: &ModelSection,
    device: tch::Device,
) -> Result<HashMap<ModelSpec, ChosenModel>, ModelError> {
    let bad = |what: String| ModelError::Config(what);
    let read =
        |model: &ModelSpec| match ChosenModel::read(model.on(section.declared.preset, device)) {
            Ok(chosen) => Ok((chosen.spec().clone(), chosen)),
            Err(e) if section.declared.names_a_step() => Err(bad(ModelSection::worded(&e.into()))),
            Err(e) => Err(bad(format!("model.model \"{model}\": {e}"))),
        };
    section.model.iter().map(read).collect()
}

impl SweepContext<'_> {
    /// The step of `cell`: its model as the sweep resolved it, on its device, in its dtype,
    /// with the config's preset and threads.
    pub(crate) fn step_of(&self, cell: &Cell) -> Result<StepChoice, ModelError> {
        let model = match self.models.get(&cell.model) {
            Some(chosen) => chosen.clone(),
            // A cell of a plan whose config no longer holds its model (`sweep run`).
            None => ChosenModel::read(cell.model.clone())
                .map_err(|e| ModelError::Config(format!("cell {}: {e}", cell.label())))?,
        };
        let declared = &self.config.model.declared;
        Ok(StepChoice {
            model,
            preset: declared.preset,
            config_file: None,
            device: cell.device,
            dtype: cell.dtype,
            threads: declared.threads,
            host_seed: None,
        })
    }

    /// LeRobot's loader of `cell` over `spec` (None for a native cell): the same knobs, run by
    /// its driver, as `ranks` ranks at once where it is a lerobot-train run's.
    fn lerobot_loader(
        &self,
        cell: &Cell,
        spec: &LoaderSpec,
        ranks: usize,
    ) -> Result<Option<Box<dyn MeasuredLoader>>, SweepError> {
        match self.config.loader.declared.choice(cell.loader) {
            Ok(LoaderChoice::Native) => Ok(None),
            Ok(choice) => {
                let bridge = &self.bridge;
                let choice = choice.on_dataset(self.root, bridge)?.with_ranks(ranks);
                Ok(Some(choice.build(spec, bridge)?))
            }
            Err(what) => Err(LoaderError::Config(format!("loader.lerobot_train: {what}")).into()),
        }
    }

    /// The loader spec of `cell`: the sweep's dataset, episodes and window with its knobs.
    fn spec_of(&self, cell: &Cell) -> LoaderSpec {
        let config = cell.loader_config(&self.config.loader.knobs.config());
        LoaderSpec { config, ..self.spec.clone() }
    }

    /// `cell`'s spec for the native pipeline, which every cell builds (a LeRobot cell for its
    /// batch's size and its model phase's batch): the knobs only LeRobot's loader has (a
    /// lerobot-train run's own, e.g. LeRobot 0.4's workers that do not persist) at the
    /// defaults.
    fn native_spec_of(&self, cell: &Cell) -> LoaderSpec {
        let mut spec = self.spec_of(cell);
        LoaderKnob::reset_lacking(&mut spec.config, LoaderBackend::Native);
        spec
    }

    /// Frames of the episodes the cells read: the samples of an epoch.
    pub(crate) fn frames(&self) -> usize {
        self.dataset.num_frames()
    }

    /// The bytes of one batch of `cell`'s knobs, loaded in this thread (nothing is measured).
    pub(crate) fn batch_bytes(&self, cell: &Cell) -> Result<u64, SweepError> {
        let mut spec = self.native_spec_of(cell);
        spec.config.workers = 0;
        let loader = spec.build_on(&self.dataset, &self.window)?;
        let batch =
            loader.epoch(0).next().ok_or_else(|| LoaderError::NoBatch(loader.why_no_batch()))??;
        Ok(batch.into_batch().bytes() as u64)
    }
}

/// The config as feedbench keeps it beside results (`sweep.toml`) and a plan hashes it: TOML,
/// as feedbench writes it.
pub fn config_text(config: &SweepConfig) -> String {
    toml::to_string(config).expect("a sweep config serialises")
}

/// The name cells give the dataset at `root`: its directory's name.
pub fn dataset_name(root: &Path) -> String {
    root.file_name().map_or_else(|| root.display().to_string(), |n| n.to_string_lossy().into())
}

/// The names cells give the roots of one dataset: each root's directory name, or, where two
/// share it (`/dev/shm/g1` beside `s3://bucket/g1`), each root as written.
pub fn root_names(roots: &[PathBuf]) -> Vec<String> {
    let names: Vec<String> = roots.iter().map(|r| dataset_name(r)).collect();
    let distinct: HashSet<&String> = names.iter().collect();
    if distinct.len() == names.len() {
        return names;
    }
    roots.iter().map(|r| r.display().to_string()).collect()
}

/// Runs the sweep `config` describes on the dataset at `root` (and at its other roots,
/// `[dataset] also`, each with the same cells), writing into `out`. With
/// `resume`, the cells already in `out/results.jsonl` are skipped (when measured with the same
/// config, unless told otherwise); without, an existing results file is refused (never
/// overwritten). The `train` phase of the plan's traced cell is
/// traced into `out/trace.json`. Returns every result, old and new.
pub fn run_sweep(
    config: &SweepConfig,
    root: &Path,
    out: &Path,
    resume: Resume,
    events: &mut dyn Events,
) -> Result<Vec<CellResult>, SweepError> {
    let roots: Vec<PathBuf> =
        std::iter::once(root.to_path_buf()).chain(config.dataset.also.iter().cloned()).collect();
    for root in &roots {
        crate::dataset::files::output_apart_from(out, root)?;
    }
    let bridge = LerobotBridge::new();
    let names = root_names(&roots);
    // Every root opened and planned before anything is measured or written.
    let mut measured = Vec::with_capacity(roots.len());
    for (n, (root, name)) in roots.iter().zip(&names).enumerate() {
        let (context, device) =
            SweepContext::open(config, root, out, config.model.device(), &bridge)?;
        let mut plan = plan(config, name, device)?;
        // One trace, of the first root's cell.
        if n > 0 {
            plan.traced = usize::MAX;
        }
        measured.push((context, plan));
    }
    let mut sink = ResultsSink::open(out, resume, &config_text(config))?;

    let done: HashSet<Cell> = sink.results().iter().map(|r| r.cell.clone()).collect();
    let mut models: HashMap<String, ModelPhase> =
        sink.results().iter().map(|r| (model_key(&r.cell), r.model.clone())).collect();
    let cells = measured.iter().flat_map(|(context, plan)| {
        plan.cells.iter().enumerate().map(move |(i, cell)| (context, cell, i == plan.traced))
    });
    let cells: Vec<_> = cells.collect();
    let total = cells.len();
    let mut finished = cells.iter().filter(|(_, c, _)| done.contains(c)).count();
    events.cells_done(finished, total);
    for (index, (context, cell, traced)) in cells.into_iter().enumerate() {
        if done.contains(cell) {
            continue;
        }
        let phases = CellPhases::all(traced);
        let label = cell.label();
        let result = run_cell(context, cell, phases, &mut models, |phase| {
            events.cell_phase(CellPhase { cell: &label, index, total, phase })
        })?;
        sink.append(result)?;
        finished += 1;
        events.cells_done(finished, total);
    }
    Ok(sink.into_results())
}

/// The key of the `model` phase a cell shares with others.
pub(crate) fn model_key(cell: &Cell) -> String {
    format!("{},r{}", cell.key(&Knob::set(KnobSet::ModelPhase)), cell.repeat)
}

/// When a cell's phases have measured enough, asked of what each measured so far (a tune's
/// measurement, once it answers what it is measured for): the phase then ends early.
pub(crate) trait PhaseEnds {
    /// Whether a `loader` phase whose measured batches took `batch_ms` has measured enough.
    fn loader(&self, batch_ms: &[f64]) -> bool;

    /// Whether a `train` phase whose measured steps are `steps` has measured enough.
    fn train(&self, steps: &[StepSample]) -> bool;
}

/// Which of a cell's phases to run beside the `train` phase (and the `model` phase it needs),
/// and how its phases end.
#[derive(Clone, Copy)]
pub(crate) struct CellPhases<'a> {
    /// The `loader` phase (a sweep measures it in every cell; a tune where its models read it).
    pub loader: bool,
    /// Ends the `loader` and `train` phases before their batches and steps once they have
    /// measured enough; None: every batch and step.
    pub ends: Option<&'a dyn PhaseEnds>,
    /// Whether the `train` phase is traced into `trace.json`.
    pub traced: bool,
    /// Steps of the `train` phase; None: the config's `train_steps`.
    pub train_steps: Option<usize>,
    /// Unmeasured steps before the `train` phase; None: the config's `warmup`.
    pub train_warmup: Option<usize>,
    /// Ranks measured at once, where the cell's loader is a lerobot-train run's (1: the run
    /// alone).
    pub ranks: usize,
}

impl CellPhases<'_> {
    /// A sweep's cell: every phase and step, traced where `traced`.
    pub(crate) fn all(traced: bool) -> Self {
        Self { loader: true, ends: None, traced, train_steps: None, train_warmup: None, ranks: 1 }
    }
}

/// The `model` phase of `cell`'s `step` (shaped by `shapes`) on the first batch of `native`: a
/// step of fixed cost is what it says, one step shows it, without a warm-up.
fn model_phase(
    native: &Loader,
    cell: &Cell,
    step: &StepChoice,
    shapes: Result<&PolicyShapes, &ShapesError>,
    run: &RunSection,
) -> Result<ModelPhase, SweepError> {
    let batch = native
        .epoch(0)
        .next()
        .ok_or_else(|| LoaderError::NoBatch(native.why_no_batch()))??
        .into_batch();
    tch::manual_seed(cell.repeat as i64);
    let mut model_step = step.build(shapes)?;
    let (steps, warmup) =
        if cell.model.is_fixed_cost() { (1, 0) } else { (run.model_steps, run.warmup) };
    Ok(run_model_phase(model_step.as_mut(), &batch, cell.dtype, steps, warmup)?)
}

/// Measures one cell: the `loader` phase where `phases` asks for it, the `model` phase unless
/// `models` holds it already (it is added there), and the `train` phase, traced into
/// `trace.json` where asked. `phase` hears each phase as it starts.
pub(crate) fn run_cell(
    context: &SweepContext<'_>,
    cell: &Cell,
    phases: CellPhases<'_>,
    models: &mut HashMap<String, ModelPhase>,
    mut phase: impl FnMut(&'static str),
) -> Result<CellResult, SweepError> {
    let run = &context.config.run;
    let spec = context.spec_of(cell);
    // The native pipeline, over the dataset the sweep opened once: it measures native cells,
    // and gives every cell the batch of its model phase.
    let mut native = context.native_spec_of(cell).build_on(&context.dataset, &context.window)?;
    let step = context.step_of(cell)?;
    let shapes =
        PolicyShapes::from_info(context.root, context.dataset.info(), cell.knobs.resolution);
    let shapes = shapes.as_ref();

    let lerobot = context.lerobot_loader(cell, &spec, phases.ranks)?;
    let loader: &dyn MeasuredLoader = lerobot.as_deref().unwrap_or(&native);
    // A lerobot-train run steps its own policy unless the sweep's step is a stand-in.
    let place = StepPlace::of(&cell.model, loader);
    let own_step = place == StepPlace::RunsOwn;

    // At 14 workers × prefetch 2, 20 batches were one burst of ready batches: 290 070
    // samples/s. Fewer than the least are raised to it (the results say how many).
    let loader_batches = run.loader_batches.max(loader.config().least_measured_batches());
    let loader_phase = if phases.loader {
        phase("loader");
        let warmup = run.warmup.max(loader.config().batches_in_flight() + 1);
        let mut ends = EndsWhen(|measured: BatchMeasured<'_>| {
            phases.ends.is_some_and(|ends| ends.loader(measured.batch_ms))
        });
        Some(loader.loader_phase(loader_batches, warmup, &mut ends)?)
    } else {
        None
    };

    let key = model_key(cell);
    if own_step && !models.contains_key(&key) {
        phase("model");
        models.insert(key.clone(), loader.own_step_phase(run.model_steps, run.warmup)?);
    }
    if !models.contains_key(&key) {
        phase("model");
        models.insert(key.clone(), model_phase(&native, cell, &step, shapes, run)?);
    }

    phase("train");
    // The traced cell's train phase, where the native loader runs it: its workers and the
    // trainer, each on a track.
    let trace = (phases.traced && lerobot.is_none()).then(Trace::new);
    native.set_trace(trace.clone());
    let loader: &dyn MeasuredLoader = lerobot.as_deref().unwrap_or(&native);
    tch::manual_seed(cell.repeat as i64);
    // A loader in this process runs the step itself; one in another process (LeRobot's) copies
    // each batch to the device and is fed the model phase's median compute, or a replayed
    // step's times in turn.
    let device = step.device()?;
    let steps = phases.train_steps.unwrap_or(run.train_steps);
    let warmup = phases.train_warmup.unwrap_or(run.warmup);
    let measured = || Ok::<_, SweepError>(models[&key].fed_step(device));
    let mut placed = PlacedStep::new(place, &step, shapes, warmup + steps, measured)?;
    let mut ends =
        EndsWhen(|steps: &[StepSample]| phases.ends.is_some_and(|ends| ends.train(steps)));
    let train = loader.train_phase(placed.feed(trace.as_ref()), steps, warmup, &mut ends)?;
    if let Some(trace) = trace {
        let path = context.out.join(TRACE_FILE);
        trace.write_chrome(&path).map_err(|e| SweepError::Output { path, what: e.to_string() })?;
    }
    let loader_counted = phases.loader.then(|| loader_batches.to_string());
    let counts = [
        ("loader.batches", loader_counted.unwrap_or_else(|| "none".into())),
        ("model.steps", run.model_steps.to_string()),
        ("train.steps", steps.to_string()),
        ("train.warmup", warmup.to_string()),
        ("ranks", phases.ranks.to_string()),
    ];
    Ok(CellResult {
        workload: Some(cell_workload((cell, &spec), &step, &context.fingerprint, &counts)),
        cell: cell.clone(),
        loader: loader_phase,
        model: models[&key].clone(),
        train,
        replayed_mean_ms: step.replay().map(|replay| replay.mean_ms()),
        system: context.system.clone().read_by(loader.lerobot()),
        placement: None,
        finished_unix_s: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    })
}
