//! The dataset commands: `info`, `sample`, `stage` and `synth`.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{Context, Result};
use clap::Args;

use feedbench::dataset::bytes::Bytes;
use feedbench::dataset::files::output_apart_from;
use feedbench::dataset::stage;
use feedbench::dataset::summary::Summary;
use feedbench::dataset::video::{DecodeOptions, VideoCodec, VideoDecoder};
use feedbench::dataset::write::synth::{synth_watched, SynthStorage, Synthesis};
use feedbench::dataset::write::{EncodeSetting, PixFmt, Preset, PresetOverrides, SynthOptions};
use feedbench::dataset::{
    export, CodebaseVersion, Dataset, DatasetError, DatasetOptions, EpisodeList,
};
use feedbench::dataset::{Contract, Resolution, WindowChoice, WindowSpec, DEFAULT_TOLERANCE_S};

use super::shared_flags::JsonFlag;
use super::{print_json_or_text, progress_bar};

/// Arguments of `feedbench info`.
#[derive(Args)]
pub struct InfoArgs {
    /// The dataset root (the directory holding meta/info.json).
    dataset: PathBuf,
    #[command(flatten)]
    json: JsonFlag,
}

/// Runs `feedbench info`.
pub fn info(args: &InfoArgs) -> Result<()> {
    print_json_or_text(&Summary::collect(&args.dataset)?, args.json.on)
}

/// Arguments of `feedbench sample`.
#[derive(Args)]
pub struct SampleArgs {
    /// The dataset root.
    dataset: PathBuf,
    /// The global `index` of the frame to sample.
    #[arg(long)]
    index: usize,
    /// Only these episodes, e.g. `1,2,4` or `0-9`.
    #[arg(long)]
    episodes: Option<EpisodeList>,
    /// A preset window: `none` (every key is the row's own value) or `diffusion`
    /// (observations at offsets [-1, 0], action at [-1 … 14]).
    #[arg(long, default_value = "none", conflicts_with = "delta")]
    window: WindowChoice,
    /// Free deltas in seconds, `KEY=S,S,…` (repeatable), like LeRobot's delta_timestamps.
    #[arg(long)]
    delta: Vec<String>,
    /// Images as uint8 instead of float32 in [0, 1].
    #[arg(long)]
    uint8: bool,
    /// Resize camera frames to HxW (bilinear), e.g. 96x96; native size by default.
    #[arg(long, default_value = "native")]
    resolution: Resolution,
    /// Tolerance between a query time and a video frame, seconds.
    #[arg(long, default_value_t = DEFAULT_TOLERANCE_S, allow_negative_numbers = true)]
    tolerance_s: f64,
    /// The LeRobot whose reading to follow where its versions differ: `released` (0.4.4 to
    /// 0.6.1: a frame strictly within the tolerance) or `main` (LeRobot's main, 0.6.2: within
    /// it, one exactly at it included). sample.json says which was followed.
    #[arg(long, value_name = "CONTRACT", default_value = "released")]
    lerobot_contract: Contract,
    /// Output directory (created; existing files are never overwritten).
    #[arg(long)]
    out: PathBuf,
}

/// Runs `feedbench sample`.
pub fn sample(args: &SampleArgs) -> Result<()> {
    output_apart_from(&args.out, &args.dataset).context("--out")?;
    let episodes = args.episodes.as_ref().map(|e| e.indices().to_vec());
    let contract = args.lerobot_contract;
    let options = DatasetOptions { episodes, tolerance_s: args.tolerance_s, contract };
    let dataset = Dataset::open_with(&args.dataset, &options)?;
    super::warn_of_rates(&dataset)?;
    let spec = if args.delta.is_empty() {
        args.window.spec()
    } else {
        WindowSpec::parse_deltas(&args.delta).map_err(|e| anyhow::anyhow!("--{e}"))?
    };
    let window = dataset.window(&spec)?;
    let mut sample = dataset.sample(args.index, &window)?;
    let mut decoder = VideoDecoder::new(DecodeOptions {
        tolerance_s: args.tolerance_s,
        contract,
        resolution: args.resolution.size(),
        ..DecodeOptions::default()
    });
    sample.decode_pixels(&mut decoder, args.uint8)?;
    let written = export::write_sample(&sample, contract, &args.out)
        .with_context(|| format!("writing sample {}", args.index))?;
    outln!("index {} (episode {}, task {:?})", sample.index, sample.episode, sample.task)?;
    for (key, array) in &sample.arrays {
        outln!("  {key:32} {:8} {:?}", array.values.type_name(), array.shape)?;
    }
    for (key, reason) in &written.skipped {
        outln!("  {key:32} skipped: {reason}")?;
    }
    outln!("wrote {} files to {}", written.files.len(), args.out.display())?;
    Ok(())
}

/// Arguments of `feedbench stage`.
#[derive(Args)]
pub struct StageArgs {
    /// The dataset root: a directory, or a URL (s3://, gs://, http(s)://, hf://datasets/…).
    dataset: PathBuf,
    /// Where to copy it (a new directory; a stage stopped before it was complete goes on from
    /// what it copied when run again); default /dev/shm/feedbench/<dataset name> (the
    /// temporary directory where there is no /dev/shm).
    #[arg(long)]
    to: Option<PathBuf>,
    /// Only these episodes' files (all of meta/ is always copied), e.g. `1,2,4`.
    #[arg(long)]
    episodes: Option<EpisodeList>,
}

/// Runs `feedbench stage`.
pub fn stage(args: &StageArgs) -> Result<()> {
    let episodes = args.episodes.as_ref().map(EpisodeList::indices);
    let to = match &args.to {
        Some(to) => to.clone(),
        None => stage::default_destination(&args.dataset)?,
    };
    let plan = stage::plan_stage(&args.dataset, episodes)?;
    stage::check_destination(&to, &plan)?;
    eprintln!("copying {} files, {} to {}", plan.files.len(), Bytes::of(plan.bytes), to.display());
    let staged = stage::stage(&args.dataset, &to, &plan)?;
    if staged.kept > 0 {
        eprintln!("went on from a stopped stage: {} files were already copied whole", staged.kept);
    }
    if let Some(episodes) = &args.episodes {
        eprintln!("only episodes {episodes} were copied: pass --episodes {episodes} to the other commands");
    }
    outln!("{}", staged.to.display())?;
    Ok(())
}

/// Arguments of `feedbench synth`.
#[derive(Args)]
pub struct SynthArgs {
    /// A built-in preset (pusht, so101, aloha, g1) or a path to a preset TOML file.
    #[arg(long)]
    preset: String,
    /// The dataset directory to create (an existing non-empty one only with --force).
    #[arg(long)]
    out: PathBuf,
    /// Layout version: `v3.0` (many episodes per file, lerobot ≥ 0.4) or `v2.1` (a file per
    /// episode, lerobot ≤ 0.3).
    #[arg(long, default_value = "v3.0")]
    format: CodebaseVersion,
    /// Video codec: `av1` (libsvtav1, LeRobot's default), `h264` (libx264) or `hevc` (libx265)
    /// [default: the preset's, av1].
    #[arg(long)]
    codec: Option<VideoCodec>,
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
    #[arg(long, value_parser = super::episodes)]
    episodes_per_file: Option<usize>,
    /// How camera frames are stored: `video` (mp4, the preset's codec), `png` (images in the
    /// parquet files) or `raw` (feedbench's uncompressed frame files)
    #[arg(long, default_value = "video")]
    storage: SynthStorage,
    /// Pixel format: `yuv420p` (LeRobot's) or `yuv444p` (x264, x265) [default: the preset's]
    #[arg(long)]
    pix_fmt: Option<PixFmt>,
    /// Tune the encoder for cheaper decoding (SVT-AV1 fast-decode, x264/x265
    /// tune=fastdecode).
    #[arg(long)]
    fast_decode: bool,
    /// With --format v3.0: encode each file's episodes as one stream, so that an episode starts
    /// wherever the GOP falls, not on a keyframe of its own (as a recorder that never restarts
    /// its encoder writes; a stream copy cannot cut such episodes).
    #[arg(long)]
    episodes_across_gops: bool,
    /// B-frames at most between reference frames (h264, hevc; 0: frames stored in the order
    /// they are shown); the encoder's default when left out.
    #[arg(long, value_name = "N")]
    bframes: Option<u32>,
    /// Write each MP4's index before its frames (movflags=+faststart), where a reader over a
    /// link finds it in the first bytes.
    #[arg(long)]
    faststart: bool,
    /// Replace an existing dataset at --out.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    json: JsonFlag,
}

/// A library error worded for `synth`'s user: an encoder setting named by its flag.
fn with_synth_flags(error: DatasetError) -> anyhow::Error {
    match error {
        DatasetError::Encode { path, problem } => {
            let flag = match problem.setting {
                EncodeSetting::PixFmt => "--pix-fmt",
                EncodeSetting::Gop => "--gop",
                EncodeSetting::Crf => "--crf",
                EncodeSetting::Speed => "--encoder-preset",
                EncodeSetting::Bframes => "--bframes",
            };
            anyhow::anyhow!("{}: {}", path.display(), problem.from_source(flag))
        }
        other => other.into(),
    }
}

/// The signal (SIGINT or SIGTERM) that asked `synth` to stop, or 0.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// From now on SIGINT and SIGTERM ask `synth` to stop at the next frame: it removes what it
/// wrote and exits with 128 + the signal. A second signal ends the process at once. The
/// signals are blocked in every thread and taken by one of their own (`sigwait`): a handler
/// would interrupt the encoders' threads in `sem_wait`, which SVT-AV1 does not retry, and its
/// flush then waits forever. Called before any other thread starts, so all inherit the mask.
fn stop_on_signal() {
    // SAFETY: a signal set built by sigemptyset/sigaddset; pthread_sigmask and sigwait take it.
    unsafe {
        let mut signals: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut signals);
        libc::sigaddset(&mut signals, libc::SIGINT);
        libc::sigaddset(&mut signals, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut());
        std::thread::spawn(move || loop {
            let mut signal = 0;
            if libc::sigwait(&signals, &mut signal) != 0 {
                return;
            }
            if STOP_SIGNAL.swap(signal, Ordering::Relaxed) != 0 {
                libc::_exit(128 + signal);
            }
        });
    }
}

/// Runs `feedbench synth`: exit status 128 + the signal when SIGINT or SIGTERM stopped it.
pub fn synth(args: &SynthArgs) -> Result<ExitCode> {
    stop_on_signal();
    let preset = Preset::load(&args.preset)?.with(&PresetOverrides {
        codec: args.codec,
        gop: args.gop,
        crf: args.crf,
        encoder_preset: args.encoder_preset.clone(),
        episodes: args.episodes,
        frames_per_episode: args.frames_per_episode,
        pix_fmt: args.pix_fmt,
        fast_decode: args.fast_decode.then_some(true),
        episode_keyframes: args.episodes_across_gops.then_some(false),
        bframes: args.bframes,
        faststart: args.faststart.then_some(true),
    });
    let options = SynthOptions {
        version: args.format,
        seed: args.seed,
        force: args.force,
        episodes_per_file: args.episodes_per_file,
        storage: args.storage,
    };
    let progress = progress_bar(0, args.json.on, "encoding");
    let written = synth_watched(&args.out, &preset, &options, &mut |heard: Synthesis<'_>| {
        if let Synthesis::Encoded { done, total } = heard {
            progress.set_length(total);
            progress.set_position(done);
        }
        match STOP_SIGNAL.load(Ordering::Relaxed) {
            0 => ControlFlow::Continue(()),
            _ => ControlFlow::Break(()),
        }
    });
    let report = match written {
        Err(stopped @ DatasetError::Stopped { .. }) => {
            progress.finish_and_clear();
            eprintln!("feedbench: {stopped}");
            return Ok(ExitCode::from(128 + STOP_SIGNAL.load(Ordering::Relaxed) as u8));
        }
        written => written.map_err(with_synth_flags)?,
    };
    progress.finish_and_clear();
    if args.json.on {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!(
            "wrote {} ({} {}, {}): {} episodes, {} frames, {} video file{} ({}) in {:.1} s",
            report.root.display(),
            preset.name,
            options.version,
            match options.storage {
                SynthStorage::Video => preset.encode_settings().codec.to_string(),
                storage => storage.to_string(),
            },
            report.episodes,
            report.frames,
            report.video_files,
            if report.video_files == 1 { "" } else { "s" },
            Bytes::of(report.video_bytes),
            report.seconds
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
