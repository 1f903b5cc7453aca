//! `feedbench tune`: the loader's flags and the step's, turned into the sweep config of one
//! group of knobs, the budgets, a progress line per measurement, and the answer printed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;

use feedbench::bench::sweep::config::RunSection;
use feedbench::bench::sweep::results::Resume;
use feedbench::bench::tune::budget::{default_cpus, default_memory, Source};
use feedbench::bench::tune::launch::{LaunchLine, Ranks};
use feedbench::bench::tune::plan::{BoxBudgets, TunePlan};
use feedbench::bench::tune::{run_tune, StageTo, TuneRequest, Tuned};
use feedbench::dataset::bytes::Bytes;
use feedbench::dataset::size::ByteSize;
use feedbench::loader::lerobot::run_args::TrainArgs;
use feedbench::loader::lerobot::{LerobotBridge, Reader};
use feedbench::loader::spec::LoaderSpec;
use feedbench::measure::phase::{LoaderChoice, LoaderDeclaration};

use super::loader_flags::LoaderFlags;
use super::printer::Printer;
use super::shared_flags::{JsonFlag, ProcessesFlag};
use super::step_flags::StepFlags;

/// Arguments of `feedbench tune`.
#[derive(Args)]
pub struct TuneArgs {
    #[command(flatten)]
    loader: LoaderFlags,
    #[command(flatten)]
    step: StepFlags,
    /// Cores the loader may use [default: $SLURM_CPUS_PER_TASK, else this process's CPUs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    cpus: Option<u16>,
    /// Memory the loader's batches and workers may hold, e.g. 8GiB [default: half of the
    /// memory available].
    #[arg(long, value_name = "SIZE")]
    memory: Option<ByteSize>,
    /// The share of the step's throughput the answer may lose to input, e.g. 5% (the sweep's
    /// knee).
    #[arg(long, value_name = "PCT", default_value = "5%", value_parser = percent)]
    target: f64,
    /// Output directory: every measured configuration as a sweep cell (results.jsonl, so
    /// `feedbench report DIR` re-renders it) and tune.json [default: results/tune-<dataset>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Go on with the tune whose results are in the output directory (a killed tune measures
    /// nothing twice).
    #[arg(long)]
    resume: bool,
    /// With --lerobot-train: tune the run twice, with LeRobot's reader and with feedbench's (as
    /// feedbench-lerobot-train runs it), each into its own folder of the output directory, and
    /// answer for both.
    #[arg(long)]
    both_readers: bool,
    /// Batches of each configuration's `loader` phase.
    #[arg(long, default_value_t = 20, value_parser = super::batches)]
    loader_batches: usize,
    /// Steps of each configuration's `train` phase.
    #[arg(long, default_value_t = 20, value_parser = super::steps)]
    train_steps: usize,
    /// Unmeasured batches or steps before each phase.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Measure every configuration for all its --loader-batches and --train-steps, none
    /// ending once it has answered what it is measured for: slower, to check that ending early
    /// gives the same answer (scripts/tune-full-length.sh compares both).
    #[arg(long)]
    full_length: bool,
    /// The most wall time the whole tune may take, e.g. 90s or 5m: once the next
    /// configuration would not fit in what is left, the best answer measured so far is given,
    /// and said to be so.
    #[arg(long, value_name = "TIME", value_parser = duration)]
    budget: Option<Duration>,
    #[command(flatten)]
    processes: ProcessesFlag,
    /// On a URL root: stage the copy the answer is measured from into DIR and keep it there to
    /// train from [default: a directory of the tune's own under /dev/shm/feedbench, removed
    /// once measured].
    #[arg(long, value_name = "DIR", conflicts_with = "no_stage")]
    stage_to: Option<PathBuf>,
    /// On a URL root: answer for streaming alone, staging no copy to measure.
    #[arg(long)]
    no_stage: bool,
    /// Nodes of the run, each with its ranks: on a URL root, the answer gives the bytes each
    /// node reads an epoch streaming, against the copy every node makes to stage [default:
    /// $SLURM_NNODES, else 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    nodes: Option<u16>,
    #[command(flatten)]
    json: JsonFlag,
}

/// `90s`, `5m`, `1h` or plain seconds: a wall time above 0.
fn duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => t.split_at(at),
        None => (t, "s"),
    };
    let seconds = match unit.trim() {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => f64::NAN,
    };
    match number.trim().parse::<f64>().map(|n| n * seconds) {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!("{text:?}: expected a wall time above 0, e.g. 90s, 5m or 1h")),
    }
}

/// `5%` or `5`: a percentage from 0 to 50.
fn percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(p) if (0.0..=50.0).contains(&p) => Ok(p),
        _ => Err(format!("{text:?}: expected a percentage from 0 to 50, e.g. 5%")),
    }
}

/// The run as its user launches it: `--lerobot-train`'s launch line, where it gives one, and
/// the loader flags with the run's arguments alone; the ranks sharing the box.
struct Launched {
    /// The loader flags (with a launch line, `--lerobot-train` its run's arguments alone).
    loader: LoaderFlags,
    /// The launch line.
    line: Option<LaunchLine>,
    /// The ranks.
    ranks: Ranks,
}

/// `--lerobot-train`'s launch line read, where it gives one (a line that runs
/// feedbench-lerobot-train measures feedbench's reader), and the ranks: the line's, checked
/// against `--processes`.
fn launched(args: &TuneArgs) -> Result<Launched> {
    let line = match args.loader.lerobot_train() {
        Some(text) => {
            LaunchLine::parse(text).map_err(|e| anyhow::anyhow!("--lerobot-train: {e}"))?
        }
        None => None,
    };
    let env = |name: &str| std::env::var(name).ok();
    let flag = args.processes.n.map(usize::from);
    let ranks = Ranks::of(line.as_ref(), flag, &env).map_err(anyhow::Error::msg)?;
    let loader = match &line {
        Some(line) => args.loader.launched(line.args(), line.feedbench_reader())?,
        None => args.loader.clone(),
    };
    Ok(Launched { loader, line, ranks })
}

/// When a tune began, and the bridge its LeRobot loaders go through: what the bridge built
/// is the tune's.
struct Begun {
    at: Instant,
    bridge: LerobotBridge,
}

impl Begun {
    /// A tune beginning now, with a bridge of its own.
    fn now() -> Self {
        Self { at: Instant::now(), bridge: LerobotBridge::new() }
    }
}

/// Runs `feedbench tune`.
pub fn run(args: &TuneArgs) -> Result<()> {
    let started = Begun::now();
    let launched = launched(args)?;
    let (spec, choice) = launched.loader.tuned(&started.bridge)?;
    if !args.both_readers {
        let (tuned, out) = tune(args, &launched, &spec, &choice, args.out.clone(), started, None)?;
        return print(args, &tuned, &out);
    }
    let LoaderChoice::LerobotTrain(run) = &choice else {
        anyhow::bail!("--both-readers tunes a lerobot-train run: add --lerobot-train \"ARGS\"");
    };
    let out = args.out.clone().unwrap_or_else(|| default_out(&spec.dataset));
    let mut answers = Vec::new();
    // The run's policy steps alike with either reader: the second takes the first's model phase.
    let mut first_results: Option<PathBuf> = None;
    // The first tune's bridge is the one that read the run's arguments.
    let mut started = Some(started);
    for reader in [Reader::Lerobot, Reader::Feedbench] {
        let choice = LoaderChoice::LerobotTrain(TrainArgs { reader, ..run.clone() });
        let name = choice.backend().name();
        let started = started.take().unwrap_or_else(Begun::now);
        let models_from = first_results.as_deref();
        let into = Some(out.join(name));
        let (tuned, out) = tune(args, &launched, &spec, &choice, into, started, models_from)?;
        first_results.get_or_insert_with(|| out.join("results.jsonl"));
        if !args.json.on {
            outln!("{name}:")?;
            print(args, &tuned, &out)?;
            outln!("")?;
        }
        let whose = match reader {
            Reader::Feedbench => "feedbench's reader in lerobot-train",
            Reader::Lerobot => "LeRobot's loader",
        };
        answers.push((name, whose, tuned));
    }
    if args.json.on {
        let both: serde_json::Map<String, serde_json::Value> = answers
            .iter()
            .map(|(name, _, tuned)| Ok((name.to_string(), serde_json::to_value(tuned)?)))
            .collect::<Result<_>>()?;
        return outln!("{}", serde_json::to_string_pretty(&both)?);
    }
    let said: Vec<String> = answers
        .iter()
        .map(|(_, whose, tuned)| {
            let w = tuned.answer.workers;
            format!("{whose}: {w} worker{}", if w == 1 { "" } else { "s" })
        })
        .collect();
    outln!("For this run: {}.", said.join("; "))
}

/// Where a tune of the dataset at `root` writes by default: results/tune-<its name>.
fn default_out(root: &std::path::Path) -> PathBuf {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let name = root.file_name().unwrap_or_default().to_string_lossy().into_owned();
    PathBuf::from("results").join(format!("tune-{name}"))
}

/// One tune of `choice` over `spec` into `out` (default: [`default_out`]), as `launched`, begun
/// at `started`, taking the model phases of `models_from` (another tune's results) where given:
/// what it found, and where it wrote.
fn tune(
    args: &TuneArgs,
    launched: &Launched,
    spec: &LoaderSpec,
    choice: &LoaderChoice,
    out: Option<PathBuf>,
    started: Begun,
    models_from: Option<&std::path::Path>,
) -> Result<(Tuned, PathBuf)> {
    // The loader kept whole: the sweep's `[loader]` declares the same one.
    let declared = match choice {
        LoaderChoice::LerobotTrain(_) => LoaderDeclaration {
            lerobot_train: launched.loader.lerobot_train().map(str::to_string),
            ..choice.declaration()
        },
        _ => choice.declaration(),
    };
    let declared = (choice.backend(), declared);
    let budgets = box_budgets(args)?;
    let (step, run) = (args.step.choice()?, run_lengths(args));
    let plan = TunePlan::new(spec, declared, &step, &budgets, &launched.ranks, args.target, run)?;
    let out = out.unwrap_or_else(|| default_out(&plan.root));
    // The line's script is the run measured: feedbench-lerobot-train for feedbench's reader.
    let feedbench_reader =
        matches!(choice, LoaderChoice::LerobotTrain(run) if run.reader == Reader::Feedbench);
    let request = TuneRequest {
        config: &plan.config,
        root: &plan.root,
        out: &out,
        budgets: plan.budgets,
        settings: plan.settings,
        resume: if args.resume { Resume::Yes } else { Resume::No },
        ranks: launched.ranks.clone(),
        launcher: launched.line.as_ref().map(|line| line.launcher(feedbench_reader)),
        budget: args.budget,
        started: started.at,
        bridge: &started.bridge,
        models_from,
        full_length: args.full_length,
        stage: match (&args.stage_to, args.no_stage) {
            (Some(dir), _) => StageTo::Into(dir.clone()),
            (None, true) => StageTo::Not,
            (None, false) => StageTo::Scratch,
        },
        nodes: nodes(args)?,
    };
    say_budgets(&plan, &budgets.cpus_from, launched.ranks.n, &out);
    let tuned = run_tune(&request, &mut Printer::lines())?;
    Ok((tuned, out))
}

/// The run's nodes: `--nodes`, else Slurm's `SLURM_NNODES`, else 1.
fn nodes(args: &TuneArgs) -> Result<usize> {
    if let Some(n) = args.nodes {
        return Ok(usize::from(n));
    }
    match std::env::var("SLURM_NNODES") {
        Ok(text) => match text.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => anyhow::bail!("SLURM_NNODES={text:?}: expected a count of nodes, 1 or more"),
        },
        Err(_) => Ok(1),
    }
}

/// The box's cores and memory: the flags', else what the machine suggests.
fn box_budgets(args: &TuneArgs) -> Result<BoxBudgets> {
    let (cpus, cpus_from) = match args.cpus {
        Some(n) => (n as usize, Source::Flag),
        None => default_cpus(|name| std::env::var(name).ok()).map_err(anyhow::Error::msg)?,
    };
    let memory_bytes = match args.memory {
        Some(size) => size.0,
        None => default_memory().context("the memory available is unknown here: give --memory")?,
    };
    Ok(BoxBudgets { cpus, cpus_from, memory_bytes })
}

/// How long each phase runs, as the flags say.
fn run_lengths(args: &TuneArgs) -> RunSection {
    RunSection {
        loader_batches: args.loader_batches,
        model_steps: 5,
        train_steps: args.train_steps,
        warmup: args.warmup,
        repeats: 1,
        trace_cell: None,
    }
}

/// The line a tune begins with: each rank's cores and memory, where they came from, and where
/// the results go.
fn say_budgets(plan: &TunePlan, cpus_from: &Source, processes: usize, out: &std::path::Path) {
    let from = match cpus_from {
        Source::Flag => "--cpus".to_string(),
        Source::Variable(name) => format!("${name}"),
        Source::Machine => "this process's CPUs".to_string(),
    };
    let per_rank = if processes > 1 {
        format!(
            " per rank, {processes} ranks sharing the box (predicted from one rank measured \
             alone, then measured with the ranks at once where the run is lerobot-train's)"
        )
    } else {
        String::new()
    };
    let cpus = plan.budgets.cpus;
    eprintln!(
        "tune: up to {cpus} core{} ({from}), {:.2} for batches{per_rank}; results in {}",
        if cpus == 1 { "" } else { "s" },
        Bytes::of(plan.budgets.memory_bytes).gb(),
        out.display()
    );
}

/// The answer of one tune, as text or JSON.
fn print(args: &TuneArgs, tuned: &Tuned, out: &std::path::Path) -> Result<()> {
    if args.json.on {
        outln!("{}", serde_json::to_string_pretty(tuned)?)?;
    } else {
        out!("{}", tuned.answer)?;
        if let Some(at_once) = &tuned.at_once {
            outln!("\n{}", at_once.summary())?;
        }
        if let Some(requests) = &tuned.requests {
            outln!("\n{}", requests.sentence())?;
        }
        if let Some(answer) = &tuned.stream_or_stage {
            outln!("\n{}", answer.paragraph())?;
        }
        if tuned.budget_ran_out {
            let budget = tuned.budget_s.unwrap_or_default();
            outln!(
                "\nThe {budget:.0} s budget ran out before the search decided: this is the best \
                 answer measured within it; a longer --budget verifies it."
            )?;
        }
        let building = tuned
            .run_build_s
            .map_or(String::new(), |s| format!(", {s:.0} s of it building the run"));
        outln!(
            "\nMeasured {} configuration{} in {:.0} s ({:.0} s in all{building}); `feedbench \
             report {}` shows them.",
            tuned.steps.len(),
            if tuned.steps.len() == 1 { "" } else { "s" },
            tuned.measuring_s,
            tuned.tune_wall_s,
            out.display()
        )?;
    }
    Ok(())
}
