//! `feedbench model`: the `model` phase on one resident synthetic batch — parameters, step
//! time statistics, samples/s, the component breakdown and peak memory, one row per
//! (batch size, dtype) combination.

use std::ops::ControlFlow;
use std::path::PathBuf;

use feedbench::bench::report::phase_text;
use feedbench::dataset::{Info, Resolution};
use feedbench::loader::batch::ImageFormat;
use feedbench::loader::lerobot::LerobotOptions;
use feedbench::measure::model_table::ModelTable;
use feedbench::measure::phase::ModelPhase;
use feedbench::model::lerobot::StepImpl;
use feedbench::model::StepChoice;
use feedbench::model::{DeviceChoice, DiffusionPreset, ModelSpec, PolicyShapes, Precision};

use super::shared_flags::JsonFlag;

/// Arguments of `feedbench model`.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// The step: `diffusion`, `synthetic:MS` (e.g. `synthetic:40ms`) or `none`.
    #[arg(long, default_value = "diffusion")]
    pub model: ModelSpec,
    /// Diffusion preset: `pusht` (LeRobot's recipe) or `small` (down_dims 64/128/256).
    #[arg(long, default_value = "pusht")]
    pub preset: DiffusionPreset,
    /// Take cameras, image sizes and state/action widths from this dataset's features
    /// (default: PushT's, one 96×96 camera and dimension 2).
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Images resized to HxW, as the loader's resolution knob does (with --dataset).
    #[arg(long, requires = "dataset")]
    pub resolution: Option<Resolution>,
    /// TOML file whose keys override fields of the preset (e.g. `down_dims = [256, 512]`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8")]
    pub batch: Vec<usize>,
    /// `auto` (CUDA when libtorch sees one), `cpu` or `cuda`.
    #[arg(long, default_value = "auto")]
    pub device: DeviceChoice,
    /// Arithmetic: `f32` and/or `bf16` (autocast), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "f32")]
    pub dtype: Vec<Precision>,
    /// How images are handed over: `u8` (normalised on the device) or `f32`.
    #[arg(long, default_value = "u8")]
    pub images: ImageFormat,
    /// Measured steps per row.
    #[arg(long, default_value_t = 20, value_parser = super::steps)]
    pub steps: usize,
    /// Steps run before measuring.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// libtorch intra-op threads, at least 1 (default: libtorch's choice, one per core).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    pub threads: Option<i32>,
    /// Seed of the model init, the batch and the noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Draw every random number (initial parameters, noise, timesteps, crops) from the CPU
    /// generator, re-seeded with --seed before each step, and copy it to the device: CPU and
    /// CUDA runs compute the same steps, and the loss falls as the policy learns the fixed
    /// batch. For checks, not timings (the copies wait on the host).
    #[arg(long)]
    pub random_on_host: bool,
    /// Which step runs: `tch` (feedbench's, on libtorch) and/or `lerobot` (LeRobot's own
    /// DiffusionPolicy in PyTorch, in the Python of --python), comma-separated; with both,
    /// each row is measured by both and a table sets them side by side.
    #[arg(long = "impl", value_delimiter = ',', default_value = "tch")]
    pub implementation: Vec<StepImpl>,
    /// The Python of the environment with LeRobot, for `--impl lerobot` (default:
    /// $FEEDBENCH_PYTHON, else the source tree's .venv-lerobot, else python3).
    #[arg(long)]
    pub python: Option<PathBuf>,
    #[command(flatten)]
    pub json: JsonFlag,
}

/// Runs `feedbench model`.
pub fn run(args: &ModelArgs) -> anyhow::Result<()> {
    let shapes = match &args.dataset {
        Some(root) => {
            let info = Info::load(root)?;
            let resolution = args.resolution.unwrap_or_default();
            PolicyShapes::from_info(root, &info, resolution)?
        }
        None => PolicyShapes::pusht(),
    };
    let table = ModelTable {
        step: StepChoice {
            preset: args.preset,
            config_file: args.config.clone(),
            device: args.device,
            threads: args.threads,
            host_seed: args.random_on_host.then_some(args.seed),
            ..StepChoice::of(args.model.clone())?
        },
        shapes,
        batch_sizes: args.batch.clone(),
        dtypes: args.dtype.clone(),
        images: args.images,
        steps: args.steps,
        warmup: args.warmup,
        seed: args.seed,
    };
    // Rows print as they are measured; a failed print ends the table it is in, and the command.
    let mut printed = Ok(());
    let mut print_row = |row: &ModelPhase| {
        if !args.json.on {
            printed = out!("{}", phase_text::model_row(row));
        }
        match printed {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        }
    };
    let tch_rows = match args.implementation.contains(&StepImpl::Tch) {
        true => table.run(&mut print_row)?,
        false => vec![],
    };
    let mut lerobot_rows = Vec::new();
    if args.implementation.contains(&StepImpl::Lerobot) {
        let python = LerobotOptions::new(args.python.as_deref(), None).python;
        lerobot_rows = table.run_lerobot(&python, args.threads)?;
        let _ = lerobot_rows.iter().try_for_each(&mut print_row);
    }
    printed?;
    let rows: Vec<&ModelPhase> = tch_rows.iter().chain(&lerobot_rows).collect();
    if args.json.on {
        outln!("{}", serde_json::to_string_pretty(&rows)?)?;
    } else if !tch_rows.is_empty() && !lerobot_rows.is_empty() {
        out!("{}", phase_text::model_parity(&tch_rows, &lerobot_rows))?;
    } else if rows.len() > 1 {
        // One implementation ran: its rows in one table.
        let rows = if tch_rows.is_empty() { &lerobot_rows } else { &tch_rows };
        out!("{}", phase_text::model_summary(rows))?;
    }
    Ok(())
}
