//! `feedbench load` and `feedbench train`: the loader's flags, the `loader` and `train` phases,
//! and `--trace`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;

use feedbench::bench::cluster::ranks::{self, RankPhase, RankResult};
use feedbench::dataset::files::{output_apart_from, write_whole};
use feedbench::dataset::{EpisodeList, WindowChoice};
use feedbench::loader::config::LoaderConfig;
use feedbench::loader::knobs::{LoaderKnob, TuneRole};
use feedbench::loader::lerobot::train_run::{self, TrainArgs as TrainRunArgs};
use feedbench::loader::lerobot::{FedStep, LerobotOptions, LoaderBackend, VideoBackend};
use feedbench::loader::pipeline::LoaderError;
use feedbench::loader::sampler::Shard;
use feedbench::loader::spec::LoaderSpec;
use feedbench::measure::phase::{
    run_model_phase, ChosenLoader, Feed, LoaderChoice, MeasuredLoader,
};
use feedbench::measure::system::{system_info, Placement};
use feedbench::model::{DeviceChoice, DiffusionPreset, ModelSpec, PolicyShapes, Precision};
use feedbench::model::{NoneStep, StepSpec, TrainStep};
use feedbench::timing::Trace;

use super::knob_flags::KnobFlags;
use super::{print_json_or_text, progress_bar};

/// The loader's knobs, shared by `load`, `train` and `compare`'s specs.
#[derive(Args)]
pub struct LoaderFlags {
    /// The dataset root.
    #[arg(required_unless_present = "lerobot_train")]
    dataset: Option<PathBuf>,
    /// Your lerobot-train run's arguments, quoted as one: e.g. "--dataset.repo_id=me/pick
    /// --dataset.root=/data/pick --policy.type=diffusion", or
    /// "--config_path=outputs/train/pick/checkpoints/last/pretrained_model/train_config.json".
    /// The loader is then the DataLoader lerobot-train builds from them, by LeRobot's own code
    /// in --python's environment (uint8 frames, the policy's window and drop_n_last_frames,
    /// its seed, spawned persistent workers, prefetch 4); --workers, --batch and --prefetch
    /// change its num_workers, batch_size and prefetch_factor. Nothing is downloaded.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true,
          conflicts_with_all = ["dataset", "episodes", "window", "video_backend"])]
    lerobot_train: Option<String>,
    /// Only these episodes, e.g. `1,2,4` or `0-9`.
    #[arg(long)]
    episodes: Option<EpisodeList>,
    /// The sample window: `diffusion` (observations at offsets [-1, 0], action at [-1 … 14])
    /// or `none` (every key is the row's own value).
    #[arg(long, default_value = "diffusion")]
    window: WindowChoice,
    /// The loader's knobs, from its one table.
    #[command(flatten)]
    knobs: KnobFlags,
    /// This process's rank (default: $RANK or $SLURM_PROCID, else 0).
    #[arg(long, requires = "world_size")]
    rank: Option<usize>,
    /// Number of processes (default: $WORLD_SIZE or $SLURM_NTASKS, else 1).
    #[arg(long, requires = "rank")]
    world_size: Option<usize>,
    /// Which loader: feedbench's `native` one, or `lerobot` (LeRobotDataset + PyTorch's
    /// DataLoader, in a Python process with the same knobs: the plain pair, not lerobot-train's
    /// run, which loads uint8 in spawned workers with prefetch 4 and the policy's window, then
    /// converts and preprocesses in the main process: --lerobot-train measures that run). With
    /// --lerobot-train, `feedbench-lerobot-train` measures that run with feedbench's reader as
    /// its dataset, as the wheel's feedbench-lerobot-train runs it (the wheel installed in
    /// --python's environment).
    #[arg(long, default_value = "native")]
    loader: LoaderBackend,
    /// With --loader lerobot: the Python of the environment with LeRobot (default:
    /// $FEEDBENCH_PYTHON, else the source tree's .venv-lerobot, else python3).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// With --loader lerobot: LeRobot's video backend, `torchcodec` or `pyav` (default:
    /// LeRobot's choice).
    #[arg(long)]
    video_backend: Option<VideoBackend>,
}

impl LoaderFlags {
    /// Which loader the flags choose, and how LeRobot's runs. The LeRobot-only flags
    /// without `--loader lerobot` are refused.
    pub fn choice(&self) -> Result<LoaderChoice> {
        if self.loader.is_a_training_run() && self.lerobot_train.is_none() {
            anyhow::bail!(
                "--loader {} measures a lerobot-train run: add --lerobot-train \"ARGS\" (the \
                 run's arguments)",
                self.loader
            );
        }
        if self.loader == LoaderBackend::Native && self.lerobot_train.is_none() {
            let knobs = self.knobs.applied_to(LoaderConfig::default());
            let lacking = LoaderKnob::lacking(&knobs, LoaderBackend::Native).map(|(k, _)| k.flag);
            let lerobots = [
                self.python.is_some().then_some("python"),
                self.video_backend.is_some().then_some("video-backend"),
            ];
            if let Some(flag) = lerobots.into_iter().flatten().chain(lacking).next() {
                anyhow::bail!("--{flag} is a knob of LeRobot's loader: add --loader lerobot");
            }
            return Ok(LoaderChoice::Native);
        }
        let mut options = LerobotOptions::new(self.python.as_deref(), None);
        options.video_backend = self.video_backend;
        Ok(LoaderChoice::Lerobot(options))
    }

    /// `--lerobot-train`'s arguments, where given.
    pub fn lerobot_train(&self) -> Option<&str> {
        self.lerobot_train.as_deref()
    }

    /// The dataset root (given unless the loader is lerobot-train's, which names its own).
    fn dataset(&self) -> &Path {
        self.dataset.as_deref().expect("clap requires the dataset without --lerobot-train")
    }

    /// Refuses a `--trace` or `--out` inside the dataset (or holding it).
    fn outputs_apart(&self, outputs: [&Option<PathBuf>; 2]) -> Result<()> {
        for (flag, path) in ["--trace", "--out"].into_iter().zip(outputs) {
            if let Some(path) = path {
                output_apart_from(path, self.dataset()).with_context(|| flag.to_string())?;
            }
        }
        Ok(())
    }

    /// The loader the flags choose, with what it reads and how (a lerobot-train run's: the
    /// dataset and knobs its arguments give, the flags' workers, batch and prefetch over them).
    pub fn chosen(&self) -> Result<ChosenLoader> {
        if let Some(chosen) = self.training_run()? {
            return Ok(chosen);
        }
        Ok(ChosenLoader { choice: self.choice()?, spec: self.spec()? })
    }

    /// The lerobot-train run `--lerobot-train` gives, described by LeRobot in --python's
    /// environment: its dataset and knobs, the flags given over them (its workers, batch and
    /// prefetch; any other knob its arguments set is refused).
    fn training_run(&self) -> Result<Option<ChosenLoader>> {
        let Some(text) = &self.lerobot_train else { return Ok(None) };
        let python = LerobotOptions::new(self.python.as_deref(), None).python;
        let mut run = TrainRunArgs::parse(&python, text)
            .map_err(|what| anyhow::anyhow!("--lerobot-train: {what}"))?;
        run.feedbench_reader = self.loader == LoaderBackend::FeedbenchLerobotTrain;
        let (_, built) = train_run::describe(&run)?;
        let config = self.knobs.applied_to(built.config());
        built.refuse_changes(&config)?;
        eprintln!("lerobot-train's run: {}", built.summary());
        let spec = LoaderSpec {
            dataset: built.root(),
            episodes: None,
            window: WindowChoice::None,
            config,
        };
        Ok(Some(ChosenLoader { choice: LoaderChoice::LerobotTrain(run), spec }))
    }

    /// The loader the flags describe; more workers than cores are allowed, with a warning where
    /// `--workers` asked for them (the default is LeRobot's 4, whatever the cores).
    pub fn spec(&self) -> Result<LoaderSpec> {
        let config = self.knobs.applied_to(LoaderConfig::default());
        let (workers, cores) = (config.workers, available_cores());
        let asked = self.knobs.knobs().any(|knob| knob.key == "workers");
        if asked && workers > cores {
            eprintln!(
                "warning: {workers} workers on {cores} cores: they take turns on the cores, each \
                 with its batches in flight and its decoders; more than the cores rarely helps"
            );
        }
        self.spec_with(config)
    }

    /// The knobs `tune` keeps fixed while it searches the workers and the prefetch: the knobs
    /// it searches, and those of one training process it has no use for, are refused.
    pub fn fixed_knobs(&self, command: &str) -> Result<LoaderSpec> {
        let not_fixed = self.knobs.knobs().find(|k| k.tune != TuneRole::Fixed).map(|k| k.flag);
        if let Some(flag) = not_fixed.or(self.rank.is_some().then_some("rank")) {
            anyhow::bail!(
                "--{flag} is not a flag of {command}: it searches the workers and prefetch \
                 itself, for one training process"
            );
        }
        self.spec_with(self.knobs.applied_to(LoaderConfig::default()))
    }

    /// What `tune` measures: the flags' loader with the knobs it keeps fixed, or a lerobot-train
    /// run's own DataLoader with the run's knobs (its batch changed by --batch; the workers and
    /// prefetch are searched, the rest the run's arguments set).
    pub fn tuned(&self) -> Result<(LoaderSpec, LoaderChoice)> {
        if self.lerobot_train.is_none() {
            return Ok((self.fixed_knobs("tune")?, self.choice()?));
        }
        if let Some(knob) = self.knobs.knobs().find(|k| **k != LoaderKnob::BATCH) {
            anyhow::bail!(
                "--{} with --lerobot-train: tune searches the workers and prefetch, and the \
                 run's own arguments set the rest (--batch changes its batch_size)",
                knob.flag
            );
        }
        let chosen = self.training_run()?.ok_or_else(|| anyhow::anyhow!("no --lerobot-train"))?;
        Ok((chosen.spec, chosen.choice))
    }

    /// The loader the flags describe, with the knobs of `config` and this process's shard.
    fn spec_with(&self, mut config: LoaderConfig) -> Result<LoaderSpec> {
        config.shard = match (self.rank, self.world_size) {
            (Some(rank), Some(world)) => Shard::new(rank, world),
            _ => Shard::from_env(),
        }?;
        Ok(LoaderSpec {
            dataset: self.dataset().to_path_buf(),
            episodes: self.episodes.clone(),
            window: self.window,
            config,
        })
    }
}

/// The cores this process may use.
fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Arguments of `feedbench load`.
#[derive(Args)]
pub struct LoadArgs {
    #[command(flatten)]
    loader: LoaderFlags,
    /// Batches to measure.
    #[arg(long, default_value_t = 50, value_parser = super::batches)]
    batches: usize,
    /// Batches to run first without measuring [default: the batches in flight plus one, so
    /// that every measured batch reuses pooled buffers].
    #[arg(long)]
    warmup: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Write the workers' timeline (batch stages as spans, one track per worker) to this new
    /// file, in Chrome's trace format (chrome://tracing, ui.perfetto.dev).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write this rank's figures, its shard of the first epoch and where it ran to
    /// DIR/rank-<r>.json (r: --rank, $RANK or $SLURM_PROCID); `feedbench merge DIR` then
    /// reports every rank and the slowest.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs `feedbench load`.
pub fn load(args: &LoadArgs) -> Result<()> {
    let (_, loader, trace) = start_loader(&args.loader, &args.trace, &args.out)?;
    let progress = progress_bar(args.batches, args.json, "loading");
    let warmup = args.warmup.unwrap_or(loader.config().batches_in_flight() + 1);
    let phase =
        loader.loader_phase(args.batches, warmup, &mut |n| progress.set_position(n as u64))?;
    progress.finish_and_clear();
    print_json_or_text(&phase, args.json)?;
    write_rank(
        args.out.as_deref(),
        loader.as_ref(),
        RankPhase::Load(Box::new(phase)),
        tch::Device::Cpu,
    )?;
    finish_trace(args.trace.as_deref(), trace)
}

/// The training step's flags, shared by `train` and `tune`.
#[derive(Args)]
pub struct StepFlags {
    /// The step: `diffusion`, `synthetic:MS` (e.g. `synthetic:40ms`), `none`, or `policy`: a
    /// lerobot-train run's own (with --lerobot-train, where anything but `synthetic:MS` is it).
    #[arg(long, default_value = "diffusion")]
    pub model: ModelSpec,
    /// Diffusion preset: `pusht`, `small`, or `auto` (`small` on CPU, `pusht` on CUDA).
    #[arg(long, default_value = "auto")]
    pub preset: DiffusionPreset,
    /// `auto` (CUDA when libtorch sees one), `cpu` or `cuda`.
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// Arithmetic: `f32` or `bf16` (autocast).
    #[arg(long, default_value = "f32")]
    pub dtype: Precision,
    /// libtorch intra-op threads, at least 1 (default: libtorch's choice, one per core).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    pub threads: Option<i32>,
}

/// Arguments of `feedbench train`.
#[derive(Args)]
pub struct TrainArgs {
    #[command(flatten)]
    loader: LoaderFlags,
    #[command(flatten)]
    step: StepFlags,
    /// Steps to measure.
    #[arg(long, default_value_t = 20, value_parser = super::steps)]
    steps: usize,
    /// Steps to run first without measuring.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Write the timeline (the workers' batch stages and the trainer's wait and step phases,
    /// one track per thread) to this new file, in Chrome's trace format.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Write this rank's figures, its shard of the first epoch and where it ran to
    /// DIR/rank-<r>.json (r: --rank, $RANK or $SLURM_PROCID); `feedbench merge DIR` then
    /// reports every rank and the slowest.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs `feedbench train`.
pub fn train(args: &TrainArgs) -> Result<()> {
    if args.loader.lerobot_train.is_some() && args.step.model == ModelSpec::None {
        anyhow::bail!(
            "--model none: a lerobot-train run steps its own policy (the default), or a step of \
             fixed length in its place (--model synthetic:MS, e.g. your log's updt_s)"
        );
    }
    let (spec, loader, trace) = start_loader(&args.loader, &args.trace, &args.out)?;
    if let Some(threads) = args.step.threads {
        tch::set_num_threads(threads);
    }
    // A loader in this process (the native one) runs the step on each batch; one in another
    // process (LeRobot's) feeds the step's compute.
    let (mut step, compute) = match loader.native() {
        Some(native) => {
            let info = native.dataset().info();
            let shapes = PolicyShapes::from_info(&spec.dataset, info, spec.config.resolution);
            (step_spec(args).build(shapes.as_ref())?, None)
        }
        // A lerobot-train run steps its policy unless given a step of fixed length.
        None if args.loader.lerobot_train.is_some()
            && args.step.model.of_a_run() == ModelSpec::Policy =>
        {
            (Box::new(NoneStep) as Box<dyn TrainStep>, None)
        }
        None => (Box::new(NoneStep) as Box<dyn TrainStep>, fed_compute(args, &spec)?),
    };
    let progress = progress_bar(args.steps, args.json, "training");
    let feed = Feed { step: step.as_mut(), compute, trace: trace.as_ref(), until: None };
    let phase = loader
        .train_phase(feed, args.steps, args.warmup, &mut |n| progress.set_position(n as u64))?;
    progress.finish_and_clear();
    if !args.json {
        match compute {
            Some(fed) => outln!(
                "LeRobot's loader feeding a {:.1} ms step on {:?} (each batch copied there, \
                 then the main process blocks for the compute)",
                fed.compute_ms,
                fed.device
            )?,
            None if args.loader.lerobot_train.is_some() => outln!(
                "lerobot-train's loop: each batch handed over (uint8 to float32, the \
                 pre-processor) and the policy's own update_policy"
            )?,
            None if loader.feeds_from_afar() => {}
            None => outln!("{} on {:?}, {}", step.name(), step.device(), args.step.dtype)?,
        }
    }
    print_json_or_text(&phase, args.json)?;
    write_rank(
        args.out.as_deref(),
        loader.as_ref(),
        RankPhase::Train(Box::new(phase)),
        step.device(),
    )?;
    finish_trace(args.trace.as_deref(), trace)
}

/// The step `train`'s flags describe.
fn step_spec(args: &TrainArgs) -> StepSpec {
    let step = &args.step;
    StepSpec {
        model: step.model.clone(),
        preset: step.preset,
        config_file: None,
        device: step.device,
        dtype: step.dtype,
        host_seed: None,
    }
}

/// The step's compute as a loader in another process feeds it (`train --loader lerobot`):
/// each batch copied to the step's device as LeRobot's training loop copies it, then the main
/// process blocking for the compute as it blocks on a GPU step. It is `synthetic:MS`'s, or, for
/// the diffusion policy, the median compute of its `model` phase on the target device,
/// measured first on a batch of the same dataset; None for `none`.
fn fed_compute(args: &TrainArgs, spec: &LoaderSpec) -> Result<Option<FedStep>> {
    let step_spec = step_spec(args);
    let device = step_spec.device()?;
    Ok(match &args.step.model {
        ModelSpec::Synthetic { cost, .. } => {
            Some(FedStep { compute_ms: cost.as_secs_f64() * 1e3, device })
        }
        ModelSpec::None => None,
        ModelSpec::Policy => return Err(ModelSpec::policy_is_the_runs().into()),
        ModelSpec::Diffusion(_) => {
            let native = spec.build()?;
            let batch = match native.epoch(0).next() {
                Some(batch) => batch?.into_batch(),
                None => return Err(LoaderError::NoBatch(native.why_no_batch()).into()),
            };
            let info = native.dataset().info();
            let shapes = PolicyShapes::from_info(&spec.dataset, info, spec.config.resolution);
            let mut step = step_spec.build(shapes.as_ref())?;
            let model = run_model_phase(step.as_mut(), &batch, args.step.dtype, 5, 2)?;
            let fed = model.fed_step(device);
            eprintln!(
                "{} on {:?}, {}: {:.1} ms of compute a step (median of 5, the model phase); \
                 LeRobot's loader now feeds a step that long",
                step.name(),
                step.device(),
                args.step.dtype,
                fed.compute_ms
            );
            Some(fed)
        }
    })
}

/// A loader as `load` and `train` start it: its spec, the loader, its trace.
type StartedLoader = (LoaderSpec, Box<dyn MeasuredLoader>, Option<Arc<Trace>>);

/// What `load` and `train` do first: the loader the flags choose, built (its outputs checked
/// apart from the dataset, the dataset's rates warned of, its rank file claimed, its trace
/// started), with its spec and its trace.
fn start_loader(
    flags: &LoaderFlags,
    trace: &Option<PathBuf>,
    out: &Option<PathBuf>,
) -> Result<StartedLoader> {
    let choice = flags.choice()?;
    refuse_native_only_outputs(&choice, trace.as_deref(), out.as_deref())?;
    if let Some(run) = flags.training_run()? {
        let loader = run.build()?;
        return Ok((run.spec, loader, None));
    }
    flags.outputs_apart([trace, out])?;
    let spec = flags.spec()?;
    super::warn_of_rates(&spec.open()?.0)?;
    let mut loader = choice.build(&spec)?;
    claim_rank_file(out.as_deref(), loader.as_ref())?;
    let trace = start_trace(trace.as_deref(), loader.as_mut())?;
    Ok((spec, loader, trace))
}

/// `--trace` and `--out`, which record the native loader's workers and shard, refused with
/// `--loader lerobot` before anything is built.
fn refuse_native_only_outputs(
    choice: &LoaderChoice,
    trace: Option<&Path>,
    out: Option<&Path>,
) -> Result<()> {
    if !choice.backend().is_native() && (trace.is_some() || out.is_some()) {
        anyhow::bail!("--trace and --out are the native loader's (not with --loader lerobot)");
    }
    Ok(())
}

/// With `--out DIR`, refuses before any work a rank file that is there already.
fn claim_rank_file(out: Option<&Path>, loader: &dyn MeasuredLoader) -> Result<()> {
    if let Some(dir) = out {
        ranks::claim_rank_file(dir, loader.config().shard.rank)?;
    }
    Ok(())
}

/// With `--out DIR`, writes this rank's `phase`, its shard of the first epoch and where it
/// ran (the step on `device`) to `DIR/rank-<r>.json`.
fn write_rank(
    out: Option<&Path>,
    loader: &dyn MeasuredLoader,
    phase: RankPhase,
    device: tch::Device,
) -> Result<()> {
    let (Some(dir), Some(loader)) = (out, loader.native()) else { return Ok(()) };
    let shard = loader.config().shard;
    let result = RankResult {
        rank: shard.rank,
        world_size: shard.world,
        phase,
        epoch_indices: loader.plan(0).concat(),
        system: system_info(device),
        placement: Placement::here(),
    };
    let path = ranks::write_rank(dir, &result)?;
    eprintln!("wrote rank {} of {} to {}", shard.rank, shard.world, path.display());
    Ok(())
}

/// With `path`, a trace for the loader's workers. A path that exists or cannot be created is
/// refused before any work (`--trace`): the file is created and removed again, and written
/// whole at the end, so that a run that fails or is killed leaves no file behind.
fn start_trace(path: Option<&Path>, loader: &mut dyn MeasuredLoader) -> Result<Option<Arc<Trace>>> {
    let Some(path) = path else { return Ok(None) };
    if path.exists() {
        anyhow::bail!("--trace {}: exists; the trace goes to a new file", path.display());
    }
    std::fs::File::create_new(path)
        .and_then(|_| std::fs::remove_file(path))
        .with_context(|| format!("--trace {}: cannot create the file", path.display()))?;
    let trace = Trace::new();
    loader.set_trace(Some(trace.clone()))?;
    Ok(Some(trace))
}

/// Writes the trace to `path`, whole, and says where it went. Called once the phase has
/// returned (its batch stream, dropped there, has joined the workers, so every span is
/// recorded) and its figures are printed, so that they are never lost to a failing side file.
fn finish_trace(path: Option<&Path>, trace: Option<Arc<Trace>>) -> Result<()> {
    if let (Some(path), Some(trace)) = (path, trace) {
        if path.exists() {
            anyhow::bail!(
                "--trace {}: appeared while measuring; the trace is not written over it",
                path.display()
            );
        }
        write_whole(path, &trace.chrome_json())
            .with_context(|| format!("writing the trace {}", path.display()))?;
        eprintln!("wrote the trace to {}", path.display());
    }
    Ok(())
}
