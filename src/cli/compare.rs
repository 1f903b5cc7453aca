//! `feedbench compare --a SPEC --b SPEC`: is B slower than A, and by how much?

use anyhow::{Context, Result};
use clap::{Args, Parser};

use feedbench::bench::compare::{compare, text, CompareError, CompareSpec, Side};
use feedbench::dataset::setting::Setting;
use feedbench::loader::lerobot::LerobotBridge;
use feedbench::measure::phase::ChosenLoader;

use super::loader_flags::LoaderFlags;
use super::printer::Printer;
use super::shared_flags::JsonFlag;

/// Arguments of `feedbench compare`.
#[derive(Args)]
pub struct CompareArgs {
    /// The reference: a dataset and the flags `load` takes, as one argument, e.g.
    /// "data/g1 --workers 2 --batch 64", or a lerobot-train run's, e.g. "--lerobot-train
    /// '--config_path=…/train_config.json' --workers 2" (split as a shell splits it).
    #[arg(long, allow_hyphen_values = true)]
    a: String,
    /// The candidate, as --a.
    #[arg(long, allow_hyphen_values = true)]
    b: String,
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

/// Runs `feedbench compare`.
pub fn run(args: &CompareArgs) -> Result<()> {
    // One bridge for the comparison: a lerobot-train run is built once for all its runs.
    let bridge = LerobotBridge::new();
    let spec = CompareSpec {
        a: parse_spec("--a", &args.a, &bridge)?,
        b: parse_spec("--b", &args.b, &bridge)?,
        repeats: args.repeats,
        batches: args.batches,
        warmup: args.warmup,
    };
    let mut printer = Printer::runs(2 * args.repeats, args.json.on, "comparing");
    let comparison = compare(&spec, &bridge, &mut printer).map_err(|e| match e {
        CompareError::Side { side, error } => {
            let (flag, text) = match side {
                Side::A => ("--a", &args.a),
                Side::B => ("--b", &args.b),
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
        out!("{}", text::render(&comparison, &args.a, &args.b))?;
    }
    Ok(())
}
