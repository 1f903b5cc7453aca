//! The `feedbench` command line: parses arguments and calls into the library.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use feedbench::dataset::summary::{parse_episode_list, Summary};
use feedbench::dataset::{export, Dataset, DatasetOptions, WindowSpec, DEFAULT_TOLERANCE_S};

/// Does my data loader keep my GPU fed? A native LeRobot dataset reader and loader benchmark.
#[derive(Parser)]
#[command(name = "feedbench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Describe a dataset: version, episodes on disk, features, cameras as the files hold them.
    Info(InfoArgs),
    /// Write one sample as NumPy files, shaped as LeRobot's `dataset[index]` returns it.
    Sample(SampleArgs),
}

#[derive(Args)]
struct InfoArgs {
    /// The dataset root (the directory holding meta/info.json).
    dataset: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum WindowName {
    /// Every key is the row's own value.
    None,
    /// Diffusion policy: observations at offsets [-1, 0], action at [-1 … 14].
    Diffusion,
}

#[derive(Args)]
struct SampleArgs {
    /// The dataset root.
    dataset: PathBuf,
    /// The global `index` of the frame to sample.
    #[arg(long)]
    index: usize,
    /// Only these episodes, e.g. `1,2,4` or `0-9`.
    #[arg(long)]
    episodes: Option<String>,
    /// A preset window.
    #[arg(long, value_enum, default_value = "none", conflicts_with = "delta")]
    window: WindowName,
    /// Free deltas in seconds, `KEY=S,S,…` (repeatable), like LeRobot's delta_timestamps.
    #[arg(long)]
    delta: Vec<String>,
    /// Images as uint8 instead of float32 in [0, 1].
    #[arg(long)]
    uint8: bool,
    /// Tolerance between a query time and a video frame, seconds.
    #[arg(long, default_value_t = DEFAULT_TOLERANCE_S)]
    tolerance_s: f64,
    /// Output directory (created; existing files are never overwritten).
    #[arg(long)]
    out: PathBuf,
}

fn info(args: &InfoArgs) -> Result<()> {
    let summary = Summary::collect(&args.dataset)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{summary}");
    }
    Ok(())
}

fn sample(args: &SampleArgs) -> Result<()> {
    let episodes =
        args.episodes.as_deref().map(parse_episode_list).transpose().map_err(anyhow::Error::msg)?;
    let options = DatasetOptions { episodes, tolerance_s: args.tolerance_s };
    let dataset = Dataset::open_with(&args.dataset, &options)?;
    let spec = if !args.delta.is_empty() {
        WindowSpec::parse_deltas(&args.delta).map_err(anyhow::Error::msg)?
    } else {
        match args.window {
            WindowName::None => WindowSpec::Single,
            WindowName::Diffusion => WindowSpec::diffusion(),
        }
    };
    let window = dataset.window(&spec)?;
    let sample = dataset.sample(args.index, &window)?;
    let written = export::write_sample(&sample, &args.out)
        .with_context(|| format!("writing sample {} to {}", args.index, args.out.display()))?;
    println!("index {} (episode {}, task {:?})", sample.index, sample.episode, sample.task);
    for (key, array) in &sample.arrays {
        println!("  {key:32} {:8} {:?}", array.values.type_name(), array.shape);
    }
    for (key, reason) in &written.skipped {
        println!("  {key:32} skipped: {reason}");
    }
    if args.uint8 && !sample.videos.is_empty() {
        println!("note: --uint8 applies to decoded frames, which this build does not decode yet");
    }
    println!("wrote {} files to {}", written.files.len(), args.out.display());
    Ok(())
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Info(args) => info(&args),
        Command::Sample(args) => sample(&args),
    }
}
