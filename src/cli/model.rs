//! `feedbench model`: the `model` phase on one resident synthetic batch — parameters, step
//! time statistics, samples/s, the component breakdown and peak memory, one row per
//! (batch size, dtype) combination.

use std::path::PathBuf;

use anyhow::{bail, Context};

use super::shapes::{synthetic_batch, ImageFormat, PolicyShapes};
use super::{make_step, DeviceChoice, DiffusionConfig, Precision};
use crate::bench::phase::{run_model_phase, ModelPhase};

/// Arguments of `feedbench model`.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// The step: `diffusion`, `synthetic:MS` (e.g. `synthetic:40ms`) or `none`.
    #[arg(long, default_value = "diffusion")]
    pub model: String,
    /// Diffusion preset: `pusht` (LeRobot's recipe) or `small` (down_dims 64/128/256).
    #[arg(long, default_value = "pusht")]
    pub preset: String,
    /// Take cameras, image sizes and state/action widths from this dataset's features
    /// (default: PushT's, one 96×96 camera and dimension 2).
    #[arg(long)]
    pub dataset: Option<std::path::PathBuf>,
    /// Images resized to HxW, as the loader's resolution knob does (with --dataset).
    #[arg(long, value_parser = crate::loader::parse_resolution, requires = "dataset")]
    pub resolution: Option<(u32, u32)>,
    /// TOML file whose keys override fields of the preset (e.g. `down_dims = [256, 512]`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Batch sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "8")]
    pub batch: Vec<usize>,
    /// `auto` (CUDA when libtorch sees one), `cpu` or `cuda`.
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Arithmetic: `f32` and/or `bf16` (autocast), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "f32")]
    pub dtype: Vec<String>,
    /// How images are handed over: `u8` (normalised on the device) or `f32`.
    #[arg(long, default_value = "u8")]
    pub images: String,
    /// Measured steps per row.
    #[arg(long, default_value_t = 20)]
    pub steps: usize,
    /// Steps run before measuring.
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// libtorch intra-op threads (default: libtorch's choice, one per core).
    #[arg(long)]
    pub threads: Option<i32>,
    /// Seed of the model init, the batch and the noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Runs `feedbench model`.
pub fn run(args: &ModelArgs) -> anyhow::Result<()> {
    if let Some(n) = args.threads {
        tch::set_num_threads(n);
    }
    let device = DeviceChoice::parse(&args.device)?.resolve()?;
    let cfg = load_config(&args.preset, args.config.as_ref())?;
    let format = match args.images.as_str() {
        "u8" => ImageFormat::U8,
        "f32" => ImageFormat::F32,
        other => bail!("unknown image format `{other}` (u8, f32)"),
    };
    let dtypes = args.dtype.iter().map(|d| Precision::parse(d)).collect::<Result<Vec<_>, _>>()?;
    if args.batch.is_empty() || args.batch.contains(&0) {
        bail!("--batch needs sizes ≥ 1");
    }
    let shapes = match &args.dataset {
        Some(root) => {
            let info = crate::dataset::Info::load(root)?;
            PolicyShapes::from_info(&info, args.resolution).map_err(anyhow::Error::msg)?
        }
        None => PolicyShapes::pusht(),
    };
    let mut rows: Vec<ModelPhase> = Vec::new();
    for &b in &args.batch {
        for &dtype in &dtypes {
            tch::manual_seed(args.seed as i64);
            let mut step = make_step(&args.model, &cfg, Ok(&shapes), device, dtype)?;
            let batch =
                synthetic_batch(&shapes, cfg.n_obs_steps, cfg.horizon, b, format, args.seed);
            let mut row = run_model_phase(step.as_mut(), &batch, dtype, args.steps, args.warmup)
                .with_context(|| format!("batch {b}"))?;
            if dtype == Precision::Bf16 {
                row.speedup_over_f32 = rows
                    .iter()
                    .find(|r| r.batch == b && r.dtype == "f32")
                    .map(|r| r.step.median_ms / row.step.median_ms);
            }
            if !args.json {
                print_row(&row);
            }
            rows.push(row);
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.len() > 1 {
        print_summary(&rows);
    }
    Ok(())
}

/// The preset, with the keys of an optional TOML file laid over it.
fn load_config(preset: &str, file: Option<&PathBuf>) -> anyhow::Result<DiffusionConfig> {
    let cfg = DiffusionConfig::preset(preset)?;
    let Some(path) = file else { return Ok(cfg) };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let overrides: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut merged = toml::Table::try_from(&cfg)?;
    merged.extend(overrides);
    let cfg: DiffusionConfig =
        merged.try_into().with_context(|| format!("{}: not a diffusion config", path.display()))?;
    cfg.validate()?;
    Ok(cfg)
}

fn print_row(r: &ModelPhase) {
    println!(
        "{} on {} ({}, {} threads), batch {}: {} trainable parameters",
        r.model,
        r.device,
        r.dtype,
        r.threads,
        r.batch,
        group_thousands(r.parameters)
    );
    println!(
        "  step ms: median {:.1}  p95 {:.1}  min {:.1}  max {:.1}   {:.1} samples/s",
        r.step.median_ms, r.step.p95_ms, r.step.min_ms, r.step.max_ms, r.samples_per_s
    );
    println!(
        "  phases (median ms): h2d {:.2}  forward {:.1}  backward {:.1}  optimizer {:.1}",
        r.h2d.median_ms, r.forward.median_ms, r.backward.median_ms, r.optimizer.median_ms
    );
    if !r.parts.is_empty() {
        println!("  {:<10} {:>9} {:>7}", "component", "mean ms", "share");
        for p in &r.parts {
            println!("  {:<10} {:>9.2} {:>6.1}%", p.name, p.ms, p.percent);
        }
    }
    match r.peak_memory_bytes {
        Some(b) => println!("  peak memory (process RSS): {:.0} MiB", b as f64 / 1048576.0),
        None => println!("  peak device memory: not measured (not exposed through tch)"),
    }
    if let Some(loss) = r.last_loss {
        println!("  last loss: {loss:.4}");
    }
    if let Some(s) = r.speedup_over_f32 {
        println!("  bf16 speed-up over f32: {s:.2}×");
    }
    println!();
}

fn print_summary(rows: &[ModelPhase]) {
    println!(
        "{:>6} {:>5} {:>10} {:>9} {:>10} {:>9} {:>8}",
        "batch", "dtype", "median ms", "p95 ms", "samples/s", "backbone", "speed-up"
    );
    for r in rows {
        let backbone = r.parts.iter().find(|p| p.name == "backbone").map(|p| p.percent);
        println!(
            "{:>6} {:>5} {:>10.1} {:>9.1} {:>10.1} {:>9} {:>8}",
            r.batch,
            r.dtype,
            r.step.median_ms,
            r.step.p95_ms,
            r.samples_per_s,
            backbone.map_or("-".into(), |p| format!("{p:.1}%")),
            r.speedup_over_f32.map_or("-".into(), |s| format!("{s:.2}×"))
        );
    }
}

fn group_thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}
