//! The `feedbench` command line: parses arguments and calls into the library.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use std::sync::Arc;

use feedbench::bench::phase::run_loader_phase;
use feedbench::bench::report;
use feedbench::dataset::stage;
use feedbench::dataset::summary::{human_bytes, parse_episode_list, Summary};
use feedbench::dataset::video::{DecodeOptions, VideoDecoder};
use feedbench::dataset::{export, Dataset, DatasetOptions, WindowSpec, DEFAULT_TOLERANCE_S};
use feedbench::loader::pipeline::{Loader, LoaderConfig};
use feedbench::loader::sampler::{SamplerKind, Shard};

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
    /// Run the loader alone (the `loader` phase) and print its throughput and timing tree.
    Load(LoadArgs),
    /// Copy a dataset (or some episodes) to RAM-backed storage and print the path to use.
    Stage(StageArgs),
    /// The `model` phase: a training step alone on one resident synthetic batch.
    Model(feedbench::model::cli::ModelArgs),
    /// Re-render a sweep's report from DIR/results.jsonl alone (never measures): prints it and
    /// writes report.md, results.csv and the SVG plots into DIR.
    Report(ReportArgs),
}

#[derive(Args)]
struct ReportArgs {
    /// The sweep's output directory (holding results.jsonl).
    dir: PathBuf,
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
    /// Resize camera frames to HxW (bilinear), e.g. 96x96; native size by default.
    #[arg(long, value_parser = feedbench::loader::parse_resolution)]
    resolution: Option<(u32, u32)>,
    /// Tolerance between a query time and a video frame, seconds.
    #[arg(long, default_value_t = DEFAULT_TOLERANCE_S)]
    tolerance_s: f64,
    /// Output directory (created; existing files are never overwritten).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Clone, Copy, ValueEnum)]
enum SamplerName {
    /// Index order.
    Sequential,
    /// Seeded shuffle, anew each epoch.
    Shuffled,
    /// LeRobot's episode-aware sampler (drops the window's last frames of each episode).
    EpisodeAware,
}

#[derive(Args)]
struct LoadArgs {
    /// The dataset root.
    dataset: PathBuf,
    /// Only these episodes, e.g. `1,2,4` or `0-9`.
    #[arg(long)]
    episodes: Option<String>,
    /// The sample window.
    #[arg(long, value_enum, default_value = "diffusion")]
    window: WindowName,
    /// Worker threads (0: load in the consuming thread).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Batches in flight per worker.
    #[arg(long, default_value_t = 2)]
    prefetch: usize,
    /// Samples per batch.
    #[arg(long = "batch", default_value_t = 8)]
    batch_size: usize,
    /// Resize camera frames to HxW (bilinear), e.g. 96x96; native size by default.
    #[arg(long, value_parser = feedbench::loader::parse_resolution)]
    resolution: Option<(u32, u32)>,
    /// Camera frames as uint8 instead of float32 in [0, 1].
    #[arg(long)]
    uint8: bool,
    /// Drop the last incomplete batch of an epoch.
    #[arg(long)]
    drop_last: bool,
    /// Index order.
    #[arg(long, value_enum, default_value = "episode-aware")]
    sampler: SamplerName,
    /// Seed of the shuffled orders.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Deliver batches as soon as ready instead of in sampler order.
    #[arg(long)]
    unordered: bool,
    /// This process's rank (default: $RANK or $SLURM_PROCID, else 0).
    #[arg(long, requires = "world_size")]
    rank: Option<usize>,
    /// Number of processes (default: $WORLD_SIZE or $SLURM_NTASKS, else 1).
    #[arg(long, requires = "rank")]
    world_size: Option<usize>,
    /// Batches to measure.
    #[arg(long, default_value_t = 50)]
    batches: usize,
    /// Batches to run first without measuring [default: the batches in flight plus one, so
    /// that every measured batch reuses pooled buffers].
    #[arg(long)]
    warmup: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn load(args: &LoadArgs) -> Result<()> {
    let episodes =
        args.episodes.as_deref().map(parse_episode_list).transpose().map_err(anyhow::Error::msg)?;
    let dataset =
        Dataset::open_with(&args.dataset, &DatasetOptions { episodes, ..Default::default() })?;
    let window = dataset.window(&match args.window {
        WindowName::None => WindowSpec::Single,
        WindowName::Diffusion => WindowSpec::diffusion(),
    })?;
    let shard = match (args.rank, args.world_size) {
        (Some(rank), Some(world)) => Shard::new(rank, world),
        _ => Shard::from_env(),
    }
    .map_err(anyhow::Error::msg)?;
    let config = LoaderConfig {
        workers: args.workers,
        prefetch: args.prefetch,
        batch_size: args.batch_size,
        drop_last: args.drop_last,
        sampler: match args.sampler {
            SamplerName::Sequential => SamplerKind::Sequential,
            SamplerName::Shuffled => SamplerKind::Shuffled,
            SamplerName::EpisodeAware => SamplerKind::EpisodeAware,
        },
        seed: args.seed,
        shard,
        ordered: !args.unordered,
        resolution: args.resolution,
        uint8: args.uint8,
    };
    let loader = Loader::new(Arc::new(dataset), window, config)?;
    let progress = if args.json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(args.batches as u64).with_message("loading")
    };
    let warmup = args.warmup.unwrap_or(loader.config().batches_in_flight() + 1);
    let phase =
        run_loader_phase(&loader, args.batches, warmup, |n| progress.set_position(n as u64))?;
    progress.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&phase)?);
    } else {
        print!("{phase}");
    }
    Ok(())
}

#[derive(Args)]
struct StageArgs {
    /// The dataset root.
    dataset: PathBuf,
    /// Where to copy it (a new directory); default /dev/shm/feedbench/<dataset name>.
    #[arg(long)]
    to: Option<PathBuf>,
    /// Only these episodes' files (all of meta/ is always copied), e.g. `1,2,4`.
    #[arg(long)]
    episodes: Option<String>,
}

fn stage(args: &StageArgs) -> Result<()> {
    let episodes =
        args.episodes.as_deref().map(parse_episode_list).transpose().map_err(anyhow::Error::msg)?;
    let name = args
        .dataset
        .canonicalize()?
        .file_name()
        .map(|n| n.to_owned())
        .unwrap_or_else(|| "dataset".into());
    let to = args.to.clone().unwrap_or_else(|| PathBuf::from("/dev/shm/feedbench").join(name));
    let plan = stage::plan_stage(&args.dataset, episodes.as_deref())?;
    eprintln!(
        "copying {} files, {} to {}",
        plan.files.len(),
        human_bytes(plan.bytes),
        to.display()
    );
    let staged = stage::stage(&args.dataset, &to, &plan)?;
    if let Some(episodes) = &args.episodes {
        eprintln!("only episodes {episodes} were copied: pass --episodes {episodes} to the other commands");
    }
    println!("{}", staged.display());
    Ok(())
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
    let mut sample = dataset.sample(args.index, &window)?;
    let mut decoder = VideoDecoder::new(DecodeOptions {
        tolerance_s: args.tolerance_s,
        resolution: args.resolution,
        ..DecodeOptions::default()
    });
    sample.decode_pixels(&mut decoder, args.uint8)?;
    let written = export::write_sample(&sample, &args.out)
        .with_context(|| format!("writing sample {} to {}", args.index, args.out.display()))?;
    println!("index {} (episode {}, task {:?})", sample.index, sample.episode, sample.task);
    for (key, array) in &sample.arrays {
        println!("  {key:32} {:8} {:?}", array.values.type_name(), array.shape);
    }
    for (key, reason) in &written.skipped {
        println!("  {key:32} skipped: {reason}");
    }
    println!("wrote {} files to {}", written.files.len(), args.out.display());
    Ok(())
}

fn report(args: &ReportArgs) -> Result<()> {
    let written = report::report_dir(&args.dir)?;
    print!("{}", written.terminal);
    eprintln!(
        "wrote {}",
        written.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
    );
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
        Command::Load(args) => load(&args),
        Command::Stage(args) => stage(&args),
        Command::Model(args) => feedbench::model::cli::run(&args),
        Command::Report(args) => report(&args),
    }
}
