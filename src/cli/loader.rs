//! `feedbench load` and `feedbench train`: the `loader` and `train` phases, rank files and
//! `--trace` (the loader's flags: [`super::loader_flags`]).

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;

use feedbench::bench::cluster::ranks::{self, RankPhase, RankResult};
use feedbench::bench::format::rate;
use feedbench::dataset::files::write_whole;
use feedbench::loader::lerobot::{FedStep, LerobotBridge};
use feedbench::loader::pipeline::LoaderError;
use feedbench::loader::spec::LoaderSpec;
use feedbench::measure::phase::lockstep::{run_lockstep, train_phase_of, Lockstep, StepBarrier};
use feedbench::measure::phase::{
    run_model_phase, BatchMeasured, LoaderChoice, MeasuredLoader, PlacedStep, StepPlace, StepSample,
};
use feedbench::measure::system::{system_info, Placement};
use feedbench::model::{MissingInput, PolicyShapes, ShapesError, StepChoice};
use feedbench::timing::{Progress, Trace};

use super::loader_flags::{available_cores, LoaderFlags};
use super::shared_flags::{JsonFlag, RunFlags};
use super::step_flags::StepFlags;
use super::{print_json_or_text, progress_bar};

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
    #[command(flatten)]
    json: JsonFlag,
    /// Also print a digest (SHA-256) of each measured batch, in the order delivered
    /// (`batch_digests` in the JSON): two roots of one dataset (a directory, its copy in a
    /// bucket) or two builds deliver the same batches where the digests are equal. Native
    /// loader only.
    #[arg(long, conflicts_with = "processes")]
    digests: bool,
    #[command(flatten)]
    run: RunFlags,
}

/// Runs `feedbench load`.
pub fn load(args: &LoadArgs) -> Result<()> {
    let (_, loader, trace) = start_loader(&args.loader, &args.run)?;
    let progress = progress_bar(args.batches, args.json.on, "loading");
    if args.digests && loader.native().is_none() {
        anyhow::bail!("--digests: the batches of LeRobot's loader stay in its process");
    }
    let warmup = args.warmup.unwrap_or(loader.config().batches_in_flight() + 1);
    let mut digests = Vec::new();
    let mut watch = Progress(|measured: BatchMeasured<'_>| {
        progress.set_position(measured.batch_ms.len() as u64);
        if let (true, Some(batch)) = (args.digests, measured.batch) {
            digests.push(batch.digest());
        }
    });
    let phase = loader.loader_phase(args.batches, warmup, &mut watch)?;
    progress.finish_and_clear();
    match (args.digests, args.json.on) {
        (false, _) => print_json_or_text(&phase, args.json.on)?,
        (true, true) => {
            let mut json = serde_json::to_value(&phase)?;
            json["batch_digests"] = digests.into();
            print_json_or_text(&json, true)?;
        }
        (true, false) => {
            print_json_or_text(&phase, false)?;
            let lines: String = digests.iter().map(|d| format!("batch digest {d}\n")).collect();
            super::write_stdout(&lines)?;
        }
    }
    write_rank(
        args.run.out.as_deref(),
        loader.as_ref(),
        RankPhase::Load(Box::new(phase)),
        tch::Device::Cpu,
    )?;
    finish_trace(args.run.trace.as_deref(), trace)
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
    #[command(flatten)]
    json: JsonFlag,
    #[command(flatten)]
    run: RunFlags,
}

/// Runs `feedbench train`.
pub fn train(args: &TrainArgs) -> Result<()> {
    let choice = args.step.choice()?;
    if args.loader.lerobot_train().is_some() && choice.spec().is_none() {
        anyhow::bail!(
            "--model none: a lerobot-train run steps its own policy (the default), or a step of \
             fixed length in its place (--model synthetic:MS, e.g. your log's updt_s)"
        );
    }
    let ranks = usize::from(args.run.processes.n.unwrap_or(1));
    if ranks > 1 && args.loader.lerobot_train().is_none() {
        return train_at_once(args, ranks);
    }
    let (spec, loader, trace) = start_loader(&args.loader, &args.run)?;
    let shapes = match loader.native() {
        Some(native) => {
            let info = native.dataset().info();
            PolicyShapes::from_info(&spec.dataset, info, spec.config.resolution)
        }
        None => Err(ShapesError { dataset: spec.dataset.clone(), problem: MissingInput::Unread }),
    };
    let place = StepPlace::of(choice.spec(), loader.as_ref());
    let steps = args.warmup + args.steps;
    let mut placed = PlacedStep::new(place, &choice, shapes.as_ref(), steps, || {
        measured_compute(&choice, &spec)
    })?;
    // A rank of `--processes N` steps with the others (train_at_once started it).
    if let Some(barrier) = StepBarrier::from_env() {
        placed = PlacedStep { step: Box::new(Lockstep::new(placed.step, barrier)), ..placed };
    }
    let progress = progress_bar(args.steps, args.json.on, "training");
    let mut watch = Progress(|steps: &[StepSample]| progress.set_position(steps.len() as u64));
    let feed = placed.feed(trace.as_ref());
    let phase = loader.train_phase(feed, args.steps, args.warmup, &mut watch)?;
    progress.finish_and_clear();
    if !args.json.on {
        match (&placed.compute, place) {
            (Some(fed), _) => outln!(
                "LeRobot's loader feeding a {:.1} ms step on {:?} (each batch copied there, \
                 then the main process blocks for the compute)",
                fed.compute_ms,
                fed.device
            )?,
            (None, StepPlace::RunsOwn) => outln!(
                "lerobot-train's loop: each batch handed over (uint8 to float32, the \
                 pre-processor) and the policy's own update_policy"
            )?,
            (None, StepPlace::Fed) => {}
            (None, StepPlace::Here) => {
                outln!("{} on {:?}, {}", placed.step.name(), placed.step.device(), choice.dtype)?
            }
        }
    }
    print_json_or_text(&phase, args.json.on)?;
    write_rank(
        args.run.out.as_deref(),
        loader.as_ref(),
        RankPhase::Train(Box::new(phase)),
        placed.step.device(),
    )?;
    finish_trace(args.run.trace.as_deref(), trace)
}

/// `--processes ranks` refused where the ranks outnumber this machine's cores.
fn ranks_fit(ranks: usize) -> Result<()> {
    let cores = available_cores();
    if ranks > cores {
        anyhow::bail!(
            "--processes {ranks}: more ranks than this machine's {cores} cores; each rank is a \
             process with its DataLoader, and a rank without a core of its own paces them all"
        );
    }
    Ok(())
}

/// `train DATASET --processes N` with the native loader: N ranks at once, each this command as
/// `--rank r --world-size N` in a process of its own (its shard, its workers), every step
/// waiting for the slowest at a barrier as DDP's all-reduce waits; the phase is the slowest
/// rank's with every rank beside it. A rank that dies ends the others and is named.
fn train_at_once(args: &TrainArgs, ranks: usize) -> Result<()> {
    if args.loader.names_a_rank() {
        anyhow::bail!(
            "--processes {ranks} starts ranks 0 to {} itself: not with --rank",
            ranks - 1
        );
    }
    if args.run.trace.is_some() {
        anyhow::bail!(
            "--trace records one process's threads: not with --processes (each rank is a process)"
        );
    }
    ranks_fit(ranks)?;
    // This very command, as each rank: without --processes, printing its phase as JSON.
    let argv = without_flags(std::env::args_os().skip(1), "--processes", Some("--json"));
    let exe = std::env::current_exe().context("the feedbench binary, to start the ranks")?;
    let commands = (0..ranks)
        .map(|rank| {
            let mut command = std::process::Command::new(&exe);
            let (rank, world) = (rank.to_string(), ranks.to_string());
            command.args(&argv).args(["--json", "--rank", &rank, "--world-size", &world]);
            command
        })
        .collect();
    if !args.json.on {
        eprintln!(
            "training {ranks} ranks at once ({} warm-up and {} measured steps each) …",
            args.warmup, args.steps
        );
    }
    // One rank alone first, with the same flags but --out (its rank file is no rank's of
    // these): what the ranks at once are scaled against.
    let mut alone = std::process::Command::new(&exe);
    alone.args(without_flags(argv.iter().cloned(), "--out", None));
    alone.args(["--json", "--rank", "0", "--world-size", "1"]);
    let alone = train_phase_of(&run_lockstep(vec![alone])?)?;
    let mut phase = train_phase_of(&run_lockstep(commands)?)?;
    if let Some(spread) = phase.ranks.as_mut() {
        spread.scaled_against(alone.samples_per_s);
    }
    if !args.json.on {
        outln!(
            "{ranks} ranks at once, each step waiting for the slowest (as DDP's all-reduce): the \
             figures are the slowest rank's"
        )?;
        if let Some(spread) = &phase.ranks {
            let per_rank: Vec<String> = spread
                .ranks
                .iter()
                .map(|r| format!("rank {} {}", r.rank, rate(r.samples_per_s)))
                .collect();
            outln!(
                "samples/s per rank: {}; one rank alone {}: scaling efficiency {:.0} %",
                per_rank.join(", "),
                rate(alone.samples_per_s),
                100.0 * spread.scaling_efficiency.unwrap_or(0.0)
            )?;
        }
    }
    print_json_or_text(&phase, args.json.on)
}

/// The command line `args` without the flag `valued` and its value (`--flag VALUE` or
/// `--flag=VALUE`), and without the flag `bare` where given.
fn without_flags(
    args: impl IntoIterator<Item = std::ffi::OsString>,
    valued: &str,
    bare: Option<&str>,
) -> Vec<std::ffi::OsString> {
    let mut kept = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some(a) if a == valued => {
                args.next();
            }
            Some(a) if a.strip_prefix(valued).is_some_and(|rest| rest.starts_with('=')) => {}
            Some(a) if Some(a) == bare => {}
            _ => kept.push(arg),
        }
    }
    kept
}

/// The diffusion policy's compute as a loader in another process is fed it (`train --loader
/// lerobot`): the median compute of its `model` phase on the target device, measured first on
/// a batch of the same dataset.
fn measured_compute(choice: &StepChoice, spec: &LoaderSpec) -> Result<FedStep> {
    let native = spec.build()?;
    let batch = match native.epoch(0).next() {
        Some(batch) => batch?.into_batch(),
        None => return Err(LoaderError::NoBatch(native.why_no_batch()).into()),
    };
    let info = native.dataset().info();
    let shapes = PolicyShapes::from_info(&spec.dataset, info, spec.config.resolution);
    let mut step = choice.build(shapes.as_ref())?;
    let model = run_model_phase(step.as_mut(), &batch, choice.dtype, 5, 2)?;
    let fed = model.fed_step(choice.device()?);
    eprintln!(
        "{} on {:?}, {}: {:.1} ms of compute a step (median of 5, the model phase); LeRobot's \
         loader now feeds a step that long",
        step.name(),
        step.device(),
        choice.dtype,
        fed.compute_ms
    );
    Ok(fed)
}

/// A loader as `load` and `train` start it: its spec, the loader, its trace.
type StartedLoader = (LoaderSpec, Box<dyn MeasuredLoader>, Option<Arc<Trace>>);

/// What `load` and `train` do first: the loader the flags choose, built (its outputs checked
/// apart from the dataset, the dataset's rates warned of, its rank file claimed, its trace
/// started), with its spec and its trace; a lerobot-train run's as `processes` ranks at once.
fn start_loader(flags: &LoaderFlags, run: &RunFlags) -> Result<StartedLoader> {
    let (trace, out, processes) = (&run.trace, &run.out, run.processes.n);
    let choice = flags.choice()?;
    refuse_native_only_outputs(&choice, trace.as_deref(), out.as_deref())?;
    let ranks = usize::from(processes.unwrap_or(1));
    ranks_fit(ranks)?;
    // The command's bridge to LeRobot: the loader keeps it (and its driver) while it lives.
    let bridge = LerobotBridge::new();
    if let Some(mut run) = flags.training_run(&bridge)? {
        if let LoaderChoice::LerobotTrain(train) = &mut run.choice {
            train.ranks = ranks;
        }
        let loader = run.build(&bridge)?;
        return Ok((run.spec, loader, None));
    }
    if ranks > 1 {
        anyhow::bail!(
            "`load --processes` measures a lerobot-train run's ranks at once (--lerobot-train \
             \"ARGS\"); the native loader's ranks at once are `train --processes N`, or \
             --rank/--world-size, a process each, reported together by `feedbench merge`"
        );
    }
    flags.outputs_apart([trace, out])?;
    let spec = flags.spec()?;
    super::warn_of_rates(&spec.open()?.0)?;
    let mut loader = choice.build(&spec, &bridge)?;
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
