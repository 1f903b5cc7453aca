//! The `feedbench` command line: parses arguments and calls into the library.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use std::sync::Arc;

use feedbench::bench::phase::{run_loader_phase, run_train_phase};
use feedbench::bench::report;
use feedbench::bench::trace::Trace;
use feedbench::config::SweepConfig;
use feedbench::dataset::stage;
use feedbench::dataset::summary::{human_bytes, parse_episode_list, Summary};
use feedbench::dataset::video::{DecodeOptions, VideoCodec, VideoDecoder};
use feedbench::dataset::write::synth::synth_with_progress;
use feedbench::dataset::write::{Preset, PresetOverrides, SynthOptions};
use feedbench::dataset::{
    export, CodebaseVersion, Dataset, DatasetOptions, WindowSpec, DEFAULT_TOLERANCE_S,
};
use feedbench::loader::pipeline::{Loader, LoaderConfig};
use feedbench::loader::sampler::{SamplerKind, Shard};
use feedbench::model::{make_step, DeviceChoice, DiffusionConfig, PolicyShapes, Precision};

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
    /// Feed a training step from the loader (the `train` phase): wait, h2d and compute per
    /// step, the input-bound share and the verdict.
    Train(TrainArgs),
    /// Sweep the loader's knobs feeding a training step: every cell in the loader, model and
    /// train phases, appended to DIR/results.jsonl; then the report.
    Sweep(SweepArgs),
    /// Copy a dataset (or some episodes) to RAM-backed storage and print the path to use.
    Stage(StageArgs),
    /// The `model` phase: a training step alone on one resident synthetic batch.
    Model(feedbench::model::cli::ModelArgs),
    /// Generate a LeRobot dataset from a preset: parquet frames, encoded cameras, metadata.
    Synth(SynthArgs),
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

/// The loader's knobs, shared by `load` and `train`.
#[derive(Args)]
struct LoaderFlags {
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
}

impl LoaderFlags {
    /// Opens the dataset and makes the loader the flags describe.
    fn loader(&self) -> Result<Loader> {
        let episodes = self
            .episodes
            .as_deref()
            .map(parse_episode_list)
            .transpose()
            .map_err(anyhow::Error::msg)?;
        let dataset =
            Dataset::open_with(&self.dataset, &DatasetOptions { episodes, ..Default::default() })?;
        let window = dataset.window(&match self.window {
            WindowName::None => WindowSpec::Single,
            WindowName::Diffusion => WindowSpec::diffusion(),
        })?;
        let shard = match (self.rank, self.world_size) {
            (Some(rank), Some(world)) => Shard::new(rank, world),
            _ => Shard::from_env(),
        }
        .map_err(anyhow::Error::msg)?;
        let config = LoaderConfig {
            workers: self.workers,
            prefetch: self.prefetch,
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            sampler: match self.sampler {
                SamplerName::Sequential => SamplerKind::Sequential,
                SamplerName::Shuffled => SamplerKind::Shuffled,
                SamplerName::EpisodeAware => SamplerKind::EpisodeAware,
            },
            seed: self.seed,
            shard,
            ordered: !self.unordered,
            resolution: self.resolution,
            uint8: self.uint8,
        };
        Ok(Loader::new(Arc::new(dataset), window, config)?)
    }
}

#[derive(Args)]
struct LoadArgs {
    #[command(flatten)]
    loader: LoaderFlags,
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
    /// Write the workers' timeline (batch stages as spans, one track per worker) to this new
    /// file, in Chrome's trace format (chrome://tracing, ui.perfetto.dev).
    #[arg(long)]
    trace: Option<PathBuf>,
}

fn progress_bar(len: usize, hidden: bool, message: &'static str) -> indicatif::ProgressBar {
    if hidden {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(len as u64).with_message(message)
    }
}

fn load(args: &LoadArgs) -> Result<()> {
    let mut loader = args.loader.loader()?;
    let trace = start_trace(args.trace.as_deref(), &mut loader)?;
    let progress = progress_bar(args.batches, args.json, "loading");
    let warmup = args.warmup.unwrap_or(loader.config().batches_in_flight() + 1);
    let phase =
        run_loader_phase(&loader, args.batches, warmup, |n| progress.set_position(n as u64))?;
    progress.finish_and_clear();
    finish_trace(args.trace.as_deref(), trace)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&phase)?);
    } else {
        print!("{phase}");
    }
    Ok(())
}

#[derive(Args)]
struct TrainArgs {
    #[command(flatten)]
    loader: LoaderFlags,
    /// The step: `diffusion`, `synthetic:MS` (e.g. `synthetic:40ms`) or `none`.
    #[arg(long, default_value = "diffusion")]
    model: String,
    /// Diffusion preset: `pusht`, `small`, or `auto` (`small` on CPU, `pusht` on CUDA).
    #[arg(long, default_value = "auto")]
    preset: String,
    /// `auto` (CUDA when libtorch sees one), `cpu` or `cuda`.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Arithmetic: `f32` or `bf16` (autocast).
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// libtorch intra-op threads (default: libtorch's choice, one per core).
    #[arg(long)]
    threads: Option<i32>,
    /// Steps to measure.
    #[arg(long, default_value_t = 20)]
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
}

fn train(args: &TrainArgs) -> Result<()> {
    let mut loader = args.loader.loader()?;
    let trace = start_trace(args.trace.as_deref(), &mut loader)?;
    if let Some(threads) = args.threads {
        tch::set_num_threads(threads);
    }
    let device = DeviceChoice::parse(&args.device)?.resolve()?;
    let preset = DiffusionConfig::resolve_preset(&args.preset, device);
    let shapes = PolicyShapes::from_info(loader.dataset().info(), args.loader.resolution)
        .map_err(|e| format!("{}: {e}", args.loader.dataset.display()));
    let precision = Precision::parse(&args.dtype)?;
    let cfg = DiffusionConfig::preset(preset)?;
    let mut step =
        make_step(&args.model, &cfg, shapes.as_ref().map_err(String::as_str), device, precision)?;
    let progress = progress_bar(args.steps, args.json, "training");
    let phase =
        run_train_phase(&loader, step.as_mut(), args.steps, args.warmup, trace.as_ref(), |n| {
            progress.set_position(n as u64)
        })?;
    progress.finish_and_clear();
    finish_trace(args.trace.as_deref(), trace)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&phase)?);
    } else {
        println!("{} on {device:?}, {}", step.name(), precision.name());
        print!("{phase}");
    }
    Ok(())
}

/// With `path`, a trace for the loader's workers; refuses a path that exists (before any work).
fn start_trace(path: Option<&Path>, loader: &mut Loader) -> Result<Option<Arc<Trace>>> {
    let Some(path) = path else { return Ok(None) };
    if path.exists() {
        anyhow::bail!("{}: exists; the trace goes to a new file", path.display());
    }
    let trace = Trace::new();
    loader.set_trace(Some(trace.clone()));
    Ok(Some(trace))
}

/// Writes the trace to `path`, and says where it went. Called once the phase has returned: its
/// batch stream, dropped there, has joined the workers, so every span is recorded.
fn finish_trace(path: Option<&Path>, trace: Option<Arc<Trace>>) -> Result<()> {
    if let (Some(path), Some(trace)) = (path, trace) {
        trace
            .write_chrome(path)
            .with_context(|| format!("writing the trace {}", path.display()))?;
        eprintln!("wrote the trace to {}", path.display());
    }
    Ok(())
}

#[derive(Args)]
struct SweepArgs {
    /// The sweep config (TOML; see configs/example.toml).
    #[arg(long)]
    config: PathBuf,
    /// Output directory [default: results/<config name>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the sweep whose results.jsonl is in the output directory, skipping its
    /// finished cells.
    #[arg(long)]
    resume: bool,
}

fn sweep(args: &SweepArgs) -> Result<()> {
    use feedbench::bench::sweep::{prepare_dataset, run_sweep, SweepProgress};
    let config = SweepConfig::load(&args.config)?;
    let out = args.out.clone().unwrap_or_else(|| {
        let name = args.config.file_stem().unwrap_or_default();
        PathBuf::from("results").join(name)
    });
    let root = prepare_dataset(&config, |message| eprintln!("{message}"))?;
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} cells  {elapsed_precise} (about {eta} left)  {msg}",
        )
        .expect("a valid template"),
    );
    let results = run_sweep(&config, &root, &out, args.resume, |progress| match progress {
        SweepProgress::Phase { cell, phase, .. } => bar.set_message(format!(
            "{phase}: {} workers, prefetch {}, batch {}, {} {}, {} on {} {}",
            cell.workers,
            cell.prefetch,
            cell.batch_size,
            cell.resolution,
            cell.images,
            cell.model,
            cell.device,
            cell.dtype
        )),
        SweepProgress::CellDone { done, total } => {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    })?;
    bar.finish_and_clear();
    let written = report::write_report(&out, &results)?;
    print!("{}", written.terminal);
    let files: Vec<String> = written.files.iter().map(|f| f.display().to_string()).collect();
    eprintln!("wrote {} and {}", out.join("results.jsonl").display(), files.join(", "));
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

#[derive(Clone, Copy, ValueEnum)]
enum FormatName {
    /// Many episodes per file (lerobot ≥ 0.4).
    #[value(name = "v3.0")]
    V30,
    /// A file per episode (lerobot ≤ 0.3).
    #[value(name = "v2.1")]
    V21,
}

#[derive(Clone, Copy, ValueEnum)]
enum CodecName {
    /// AV1 with libsvtav1 (LeRobot's default).
    Av1,
    /// H.264 with libx264.
    H264,
    /// HEVC with libx265.
    Hevc,
}

#[derive(Args)]
struct SynthArgs {
    /// A built-in preset (pusht, so101, aloha, g1) or a path to a preset TOML file.
    #[arg(long)]
    preset: String,
    /// The dataset directory to create (an existing non-empty one only with --force).
    #[arg(long)]
    out: PathBuf,
    /// Layout version.
    #[arg(long, value_enum, default_value = "v3.0")]
    format: FormatName,
    /// Video codec (default: the preset's, av1).
    #[arg(long, value_enum)]
    codec: Option<CodecName>,
    /// Keyframe interval (default: the preset's, 2).
    #[arg(long)]
    gop: Option<u32>,
    /// Constant rate factor (default: the preset's, 30).
    #[arg(long)]
    crf: Option<u32>,
    /// The encoder's speed preset (default: 12 for libsvtav1, veryfast for x264/x265).
    #[arg(long)]
    encoder_preset: Option<String>,
    /// Number of episodes (default: the preset's).
    #[arg(long)]
    episodes: Option<usize>,
    /// Frames of every episode (default: the preset's mean, varied per episode).
    #[arg(long)]
    frames_per_episode: Option<usize>,
    /// Seed of everything generated.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// v3.0: at most this many episodes per data and video file (default: LeRobot's sizes).
    #[arg(long)]
    episodes_per_file: Option<usize>,
    /// Replace an existing dataset at --out.
    #[arg(long)]
    force: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn synth(args: &SynthArgs) -> Result<()> {
    let preset = Preset::load(&args.preset)?.with(&PresetOverrides {
        codec: args.codec.map(|codec| match codec {
            CodecName::Av1 => VideoCodec::Av1,
            CodecName::H264 => VideoCodec::H264,
            CodecName::Hevc => VideoCodec::Hevc,
        }),
        gop: args.gop,
        crf: args.crf,
        encoder_preset: args.encoder_preset.clone(),
        episodes: args.episodes,
        frames_per_episode: args.frames_per_episode,
    });
    let options = SynthOptions {
        version: match args.format {
            FormatName::V30 => CodebaseVersion::V30,
            FormatName::V21 => CodebaseVersion::V21,
        },
        seed: args.seed,
        force: args.force,
        episodes_per_file: args.episodes_per_file,
    };
    let progress = if args.json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(0).with_message("encoding")
    };
    let report = synth_with_progress(&args.out, &preset, &options, &mut |done, total| {
        progress.set_length(total);
        progress.set_position(done);
    })?;
    progress.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "wrote {} ({} {}, {}): {} episodes, {} frames, {} video file{} ({}) in {:.1} s",
            report.root.display(),
            preset.name,
            options.version,
            preset.encode_settings().codec,
            report.episodes,
            report.frames,
            report.video_files,
            if report.video_files == 1 { "" } else { "s" },
            human_bytes(report.video_bytes),
            report.seconds
        );
    }
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
    // SVT-AV1 prints a banner for every encoder it opens unless its log level says errors
    // only. Set before any thread starts (nothing else reads the environment concurrently).
    if std::env::var_os("SVT_LOG").is_none() {
        std::env::set_var("SVT_LOG", "1");
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Info(args) => info(&args),
        Command::Sample(args) => sample(&args),
        Command::Load(args) => load(&args),
        Command::Train(args) => train(&args),
        Command::Sweep(args) => sweep(&args),
        Command::Stage(args) => stage(&args),
        Command::Model(args) => feedbench::model::cli::run(&args),
        Command::Synth(args) => synth(&args),
        Command::Report(args) => report(&args),
    }
}
