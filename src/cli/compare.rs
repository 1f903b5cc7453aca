//! `feedbench compare --a SPEC --b SPEC`: is B slower than A, and by how much? And
//! `feedbench compare --readers feedbench,lerobot --on SPEC`: every reader on one batch order.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser};

use feedbench::bench::compare::readers::{compare_readers, Reader, ReadersError, ReadersSpec};
use feedbench::bench::compare::{compare, text, CompareError, CompareSpec, Side};
use feedbench::dataset::setting::Setting;
use feedbench::loader::lerobot::LerobotBridge;
use feedbench::loader::lerobot::LerobotOptions;
use feedbench::measure::phase::{ChosenLoader, LoaderChoice};

use super::loader_flags::LoaderFlags;
use super::printer::Printer;
use super::shared_flags::JsonFlag;

/// Arguments of `feedbench compare`.
#[derive(Args)]
pub struct CompareArgs {
    /// The reference: a dataset and the flags `load` takes, as one argument, e.g.
    /// "data/g1 --workers 2 --batch 64", or a lerobot-train run's, e.g. "--lerobot-train
    /// '--config_path=…/train_config.json' --workers 2" (split as a shell splits it).
    #[arg(long, allow_hyphen_values = true, required_unless_present = "readers")]
    a: Option<String>,
    /// The candidate, as --a.
    #[arg(long, allow_hyphen_values = true, required_unless_present = "readers")]
    b: Option<String>,
    /// Readers to compare on one batch order, the first the reference: `feedbench`,
    /// `lerobot` (LeRobotDataset + DataLoader), comma-separated. The order is recorded once
    /// (LeRobot's EpisodeAwareSampler with the seed where LeRobot reads and the sampler is
    /// episode-aware, else feedbench's) and every reader reads exactly those batches: each
    /// item digested and held equal (exit 1 where a reader's differ, naming the first frame),
    /// then each reader measured in interleaved repeats.
    #[arg(long, value_delimiter = ',', requires = "on", conflicts_with_all = ["a", "b"])]
    readers: Vec<Reader>,
    /// With --readers: the dataset and the flags `load` takes, as one argument, e.g.
    /// "data/g1 --workers 2 --batch 64 --python .venv-lerobot/bin/python".
    #[arg(long, allow_hyphen_values = true)]
    on: Option<String>,
    /// With --readers: a file of the batch order. Where it exists, its order is read (refused,
    /// naming what differs, where it was recorded for another dataset, episodes, window,
    /// sampler, seed, batch or shard); else the order is recorded and written there, so that a
    /// later comparison reads the same batches.
    #[arg(long, value_name = "FILE", requires = "readers")]
    order: Option<PathBuf>,
    /// Runs of each (at least 2), interleaved A B B A A B ….
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Batches measured per run.
    #[arg(long, default_value_t = 20, value_parser = super::batches)]
    batches: usize,
    /// Batches per run before measuring [default: the batches in flight plus one].
    #[arg(long)]
    warmup: Option<usize>,
    #[command(flatten)]
    json: JsonFlag,
}

/// A loader spec written as one argument.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct SpecLine {
    #[command(flatten)]
    loader: LoaderFlags,
}

/// The loader `text` describes (the native one, LeRobot's with `--loader lerobot`, or a
/// lerobot-train run's with `--lerobot-train`, described through `bridge`); `flag` names it in
/// errors.
fn parse_spec(flag: &str, text: &str, bridge: &LerobotBridge) -> Result<ChosenLoader> {
    let words =
        shlex::split(text).ok_or_else(|| anyhow::anyhow!("{flag} {text:?}: unbalanced quotes"))?;
    let line = SpecLine::try_parse_from(words)
        .map_err(|e| anyhow::anyhow!("{flag} {text:?}: {}", e.render().to_string().trim()))?;
    line.loader.chosen(bridge).with_context(|| format!("{flag} {text:?}"))
}

/// A setting of the loader spec given as `flag` (`--b`), named with where it goes: a Python
/// as `--python (--b "… --python PATH")`, a knob as `--workers (in --b)`.
fn in_spec(flag: &str, setting: Setting) -> String {
    let inner = super::setting_name(None, setting);
    match setting {
        Setting::Python => format!("{inner} ({flag} \"… {inner} PATH\")"),
        _ => format!("{inner} (in {flag})"),
    }
}

/// Runs `feedbench compare`: exit 1 where readers compared on one order gave other items.
pub fn run(args: &CompareArgs) -> Result<ExitCode> {
    // One bridge for the comparison: a lerobot-train run is built once for all its runs.
    let bridge = LerobotBridge::new();
    if !args.readers.is_empty() {
        return run_readers(args, &bridge);
    }
    let (a, b) = (args.a.clone().unwrap_or_default(), args.b.clone().unwrap_or_default());
    let spec = CompareSpec {
        a: parse_spec("--a", &a, &bridge)?,
        b: parse_spec("--b", &b, &bridge)?,
        repeats: args.repeats,
        batches: args.batches,
        warmup: args.warmup,
    };
    let mut printer = Printer::runs(2 * args.repeats, args.json.on, "comparing");
    let comparison = compare(&spec, &bridge, &mut printer).map_err(|e| match e {
        CompareError::Side { side, error } => {
            let (flag, text) = match side {
                Side::A => ("--a", &a),
                Side::B => ("--b", &b),
            };
            let name = |setting| in_spec(flag, setting);
            anyhow::anyhow!("{flag} {text:?}: {}", super::one_message(&error.into(), &name))
        }
        CompareError::Request(error) => error.into(),
    })?;
    printer.finish();
    if args.json.on {
        outln!("{}", serde_json::to_string_pretty(&comparison)?)?;
    } else {
        out!("{}", text::render(&comparison, &a, &b))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `compare --readers`: the readers on one recorded order.
fn run_readers(args: &CompareArgs, bridge: &LerobotBridge) -> Result<ExitCode> {
    let on = args.on.as_deref().unwrap_or_default();
    if shlex::split(on)
        .unwrap_or_default()
        .iter()
        .any(|w| w == "--loader" || w.starts_with("--loader="))
    {
        anyhow::bail!("--on {on:?}: give the dataset and knobs alone; --readers names the readers");
    }
    // With LeRobot among the readers, the line is read as LeRobot's loader's (its --python,
    // --video-backend; a knob it lacks refused), whose spec every reader then reads.
    let lerobot = args.readers.contains(&Reader::Lerobot);
    let line = if lerobot { format!("{on} --loader lerobot") } else { on.to_string() };
    let chosen = parse_spec("--on", &line, bridge)?;
    let options = match &chosen.choice {
        LoaderChoice::Lerobot(options) => options.clone(),
        _ => LerobotOptions::new(None, None),
    };
    let spec = ReadersSpec {
        readers: args.readers.clone(),
        lerobot: options,
        repeats: args.repeats,
        batches: args.batches,
        warmup: args.warmup.unwrap_or(chosen.spec.config.batches_in_flight() + 1),
        spec: chosen.spec,
        order_file: args.order.clone(),
    };
    let runs = args.readers.len() * args.repeats;
    let mut printer = Printer::runs(runs, args.json.on, "comparing");
    let comparison = compare_readers(&spec, bridge, &mut printer).map_err(|e| match e {
        ReadersError::Reader { reader, error } => {
            let name = |setting| in_spec("--on", setting);
            anyhow::anyhow!("{reader} on {on:?}: {}", super::one_message(&error.into(), &name))
        }
        ReadersError::Request(what) => anyhow::anyhow!("--readers: {what}"),
    })?;
    printer.finish();
    if args.json.on {
        outln!("{}", serde_json::to_string_pretty(&comparison)?)?;
    } else {
        out!("{}", text::readers(&comparison, on))?;
    }
    let differ = comparison.first_difference.is_some();
    Ok(if differ { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
