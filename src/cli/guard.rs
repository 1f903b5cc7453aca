//! `feedbench guard --config FILE (--baseline FILE | --save-baseline FILE)`: loader throughput
//! held to a baseline in CI. Exit 0 within the tolerance, 1 on a regression, 2 on an error.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use feedbench::bench::compare::guard::config::{GuardConfig, Tolerance};
use feedbench::bench::compare::guard::judge::{check_baseline, judge, Outcome};
use feedbench::bench::compare::guard::page::GuardPage;
use feedbench::bench::compare::guard::record::{DatasetFingerprint, GuardRecord};
use feedbench::bench::compare::guard::reference::ReferenceClip;
use feedbench::bench::compare::guard::render::{self, UpdateCommand};
use feedbench::bench::compare::guard::{measure, GuardSetup};
use feedbench::bench::export::{self, Html, Json};
use feedbench::bench::sweep::config::ConfigFile;
use feedbench::bench::sweep::prepare_dataset;
use feedbench::measure::system::system_info;
use feedbench::model::StepFrom;
use feedbench::timing::InstructionCounter;

use super::printer::Printer;
use super::shared_flags::JsonFlag;
use super::step_flags::step_from;

/// Arguments of `feedbench guard`.
#[derive(Args)]
#[command(group = clap::ArgGroup::new("against").required(true).args(["baseline", "save_baseline"]))]
pub struct GuardArgs {
    /// The guard config: the dataset, the cells, repeats and tolerance (configs/guard.toml).
    #[arg(long)]
    config: PathBuf,
    /// Judge this run against the baseline in FILE.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Measure and save the result as the baseline FILE (replacing it whole).
    #[arg(long, value_name = "FILE")]
    save_baseline: Option<PathBuf>,
    /// Changes within this much either way pass, e.g. 10% [default: the config's].
    #[arg(long)]
    tolerance: Option<Tolerance>,
    /// A baseline from another machine or dataset is an error (exit 2), not a warning.
    #[arg(long)]
    strict: bool,
    /// Every cell's runs then feed the step replayed, for their accelerator utilisation;
    /// replaces the cells' own step.
    #[command(flatten)]
    step: StepFrom,
    #[command(flatten)]
    json: JsonFlag,
    /// Also write github-action-benchmark's JSON into DIR: smaller-is-better.json
    /// (customSmallerIsBetter) and bigger-is-better.json (customBiggerIsBetter).
    #[arg(long, value_name = "DIR")]
    action_benchmark: Option<PathBuf>,
    /// Also write the verdict as one self-contained page into FILE: each cell's runs against
    /// the baseline's band, interactive (with --baseline).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// Runs `feedbench guard`: the exit code on a verdict; an error (exit 2) otherwise.
pub fn run(args: &GuardArgs) -> Result<ExitCode> {
    let mut config = GuardConfig::load(&args.config)?;
    config.dataset.check_present(&args.config)?;
    if let Some(tolerance) = args.tolerance {
        config.run.tolerance = tolerance;
    }
    if step_from(&args.step)? {
        for cell in &mut config.cells {
            cell.step = None;
            cell.declared_step.step_ms = None;
            cell.declared_step.from = args.step.clone();
        }
        config.check(&args.config).map_err(|e| anyhow::anyhow!("--step-from: {}", e.what))?;
    }
    let baseline = args.baseline.as_deref().map(GuardRecord::read).transpose()?;
    if let Some(path) = &args.save_baseline {
        GuardRecord::check_save_path(path)?;
    }
    // Checked before measuring, as the baseline's path is.
    if let Some(dir) = args.action_benchmark.as_deref().filter(|dir| dir.exists() && !dir.is_dir())
    {
        anyhow::bail!("--action-benchmark {}: exists and is not a directory", dir.display());
    }
    if let Some(page) = &args.html {
        if args.baseline.is_none() {
            anyhow::bail!("--html needs --baseline: the page shows this run against its baseline");
        }
        super::check_page_path(page)?;
    }
    let root = prepare_dataset(&config.dataset, &mut Printer::lines())?;
    let machine = system_info(tch::Device::Cpu);
    let dataset = DatasetFingerprint::of(&root)?;
    let warnings = match &baseline {
        Some(baseline) => check_baseline(baseline, &config, &machine, &dataset, args.strict)
            .with_context(|| {
                format!("{}", args.baseline.as_deref().unwrap_or(Path::new("")).display())
            })?,
        None => Vec::new(),
    };
    let count_instructions = match InstructionCounter::start() {
        Ok(_) => true,
        Err(why) => {
            eprintln!("note: {why}; judging by CPU time and samples/s");
            false
        }
    };
    let reference = ReferenceClip::prepare(&mut Printer::lines())?;
    let runs = config.cells.len() * config.run.repeats;
    let mut printer = Printer::runs(runs, args.json.on, "guarding");
    let setup = GuardSetup { root, reference, machine, dataset, count_instructions };
    let record = measure(&config, setup, &mut printer)?;
    printer.finish();
    let Some(baseline) = baseline else {
        let path = args.save_baseline.as_deref().expect("clap: one of the two");
        record.save(path)?;
        if let Some(dir) = &args.action_benchmark {
            write_action_benchmark(dir, &record)?;
        }
        if args.json.on {
            outln!("{}", serde_json::to_string_pretty(&record)?)?;
        } else {
            outln!(
                "saved the baseline {}: {} cells × {} runs",
                path.display(),
                record.cells.len(),
                config.run.repeats
            )?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    if let Some(dir) = &args.action_benchmark {
        write_action_benchmark(dir, &record)?;
    }
    let verdict = judge(&baseline, &record, config.run.tolerance, warnings);
    let (config_path, baseline_path) = (
        args.config.display().to_string(),
        args.baseline.as_deref().unwrap_or(Path::new("")).display().to_string(),
    );
    let update = UpdateCommand { config: &config_path, baseline: &baseline_path };
    if let Some(path) = &args.html {
        let page =
            GuardPage { verdict: &verdict, baseline: &baseline, now: &record, update: &update };
        export::write_to(path, &page, &Html)
            .with_context(|| format!("--html {}", path.display()))?;
    }
    if args.json.on {
        outln!("{}", serde_json::to_string_pretty(&verdict)?)?;
    } else {
        out!("{}", render::text(&verdict, &update))?;
    }
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|s| !s.is_empty()) {
        append(Path::new(&summary), &render::markdown(&verdict, &update))
            .context("$GITHUB_STEP_SUMMARY")?;
    }
    Ok(if verdict.outcome == Outcome::Regression { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Appends `text` to the file at `path`, creating it.
fn append(path: &Path, text: &str) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("{}", path.display()))?;
    file.write_all(text.as_bytes()).with_context(|| format!("{}", path.display()))
}

/// Writes the record's github-action-benchmark files into `dir`.
fn write_action_benchmark(dir: &Path, record: &GuardRecord) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--action-benchmark {}", dir.display()))?;
    export::write(dir, record, &[&Json])?;
    Ok(())
}
