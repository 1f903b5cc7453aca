//! `feedbench guard --config FILE (--baseline FILE | --save-baseline FILE) [--history FILE]`:
//! loader throughput held to a baseline, and read in its history, in CI. Exit 0 within the
//! tolerance and without a shift, 1 on a regression (by the baseline or by the history), 2 on
//! an error.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use feedbench::bench::compare::guard::config::{GuardConfig, Tolerance};
use feedbench::bench::compare::guard::fits::{check_baseline, check_software, Now};
use feedbench::bench::compare::guard::history::text::text as history_text;
use feedbench::bench::compare::guard::history::verdict::{judge_history, HistoryVerdict};
use feedbench::bench::compare::guard::history::{History, HistoryRun};
use feedbench::bench::compare::guard::judge::{judge, Outcome};
use feedbench::bench::compare::guard::page::GuardPage;
use feedbench::bench::compare::guard::record::{CellRuns, DatasetFingerprint, GuardRecord};
use feedbench::bench::compare::guard::reference::ReferenceClip;
use feedbench::bench::compare::guard::render::{self, ActionBenchmark, UpdateCommand};
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
pub struct GuardArgs {
    /// The guard config: the dataset, the cells, repeats and tolerance (configs/guard.toml).
    #[arg(long)]
    config: PathBuf,
    /// Judge this run against the baseline in FILE.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Measure and save the result as the baseline FILE (replacing it whole); with
    /// --baseline, this run is judged against the old one and then saved as the next (a
    /// baseline that follows each commit, as a CI's main branch keeps it).
    #[arg(long, value_name = "FILE")]
    save_baseline: Option<PathBuf>,
    /// Changes within this much either way pass, e.g. 10% [default: the config's].
    #[arg(long)]
    tolerance: Option<Tolerance>,
    /// Every warning is an error (exit 2): other software than the baseline's, or another
    /// host where --allow-other-host allows it.
    #[arg(long)]
    strict: bool,
    /// Judge against a baseline measured on another host (other CPU, cores, memory, GPU or
    /// driver, kernel), which is refused otherwise; the verdict names the differences.
    #[arg(long)]
    allow_other_host: bool,
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
    /// Append this run to the history in FILE (JSON lines, one run a line; created where
    /// missing) and judge it by its history: a shift of the same workload on the same host,
    /// found by E-divisive change points, that is clear and beyond --min-change is a
    /// regression (exit 1).
    #[arg(long, value_name = "FILE")]
    history: Option<PathBuf>,
    /// The commit this run measures, kept in the history [default: git's HEAD here].
    #[arg(long, requires = "history")]
    commit: Option<String>,
    /// The least shift of the history that is a regression, e.g. 3%.
    #[arg(long, requires = "history", default_value = "3%")]
    min_change: Tolerance,
    /// This run starts a new level (a change that was meant): the history before it is not
    /// read for shifts.
    #[arg(long, requires = "history")]
    accept: bool,
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
    if args.baseline.is_none() && args.save_baseline.is_none() && args.history.is_none() {
        anyhow::bail!("give --baseline FILE, --save-baseline FILE or --history FILE");
    }
    let baseline = args.baseline.as_deref().map(GuardRecord::read).transpose()?;
    let history = args.history.as_deref().map(History::check).transpose()?;
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
    let workloads = (config.cells.iter())
        .map(|cell| CellRuns::workload_of(cell, &config.run, &dataset))
        .collect::<Result<Vec<_>, _>>()?;
    let now = Now {
        config: &config,
        machine: &machine,
        dataset: &dataset,
        workloads: &workloads,
        allow_other_host: args.allow_other_host,
        strict: args.strict,
    };
    let baseline_path = args.baseline.as_deref().unwrap_or(Path::new("")).display().to_string();
    let mut warnings = match &baseline {
        Some(baseline) => check_baseline(baseline, &now).context(baseline_path.clone())?,
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
    let setup = GuardSetup { root, reference, machine, dataset, workloads, count_instructions };
    let record = measure(&config, setup, &mut printer)?;
    printer.finish();
    if let Some(baseline) = &baseline {
        let software = check_software(&baseline.machine, &record.machine, args.strict);
        warnings.extend(software.context(baseline_path.clone())?);
    }
    let history = match &history {
        Some(history) => {
            let commit = args.commit.clone().or_else(git_head);
            let runs = history.append(&HistoryRun::of(&record, commit, args.accept))?;
            judge_history(&runs, args.min_change.0)
        }
        None => None,
    };
    let config_path = args.config.display().to_string();
    let history_path = args.history.as_deref().map(|p| p.display().to_string());
    let update = UpdateCommand {
        config: &config_path,
        baseline: &baseline_path,
        history: history_path.as_deref(),
    };
    if let Some(path) = args.save_baseline.as_deref() {
        record.save(path)?;
    }
    if let Some(dir) = &args.action_benchmark {
        write_action_benchmark(dir, &record, history.as_ref())?;
    }
    let Some(baseline) = baseline else {
        match (args.json.on, &history, args.save_baseline.as_deref()) {
            (true, Some(history), None) => outln!("{}", serde_json::to_string_pretty(history)?)?,
            (true, _, _) => outln!("{}", serde_json::to_string_pretty(&record)?)?,
            (false, history, path) => {
                if let Some(path) = path {
                    outln!(
                        "saved the baseline {}: {} cells × {} runs",
                        path.display(),
                        record.cells.len(),
                        config.run.repeats
                    )?;
                }
                if let Some(history) = history {
                    out!("{}", history_text(history, &update.accept()))?;
                }
            }
        }
        if let Some(history) = &history {
            step_summary(&render::history_markdown(history, &update))?;
        }
        let regressed = history.as_ref().is_some_and(|h| h.regression);
        return Ok(if regressed { ExitCode::from(1) } else { ExitCode::SUCCESS });
    };
    let mut verdict = judge(&baseline, &record, config.run.tolerance, warnings);
    if let Some(history) = history {
        if history.regression {
            verdict.outcome = Outcome::Regression;
        }
        verdict.history = Some(history);
    }
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
        if let Some(path) = &args.save_baseline {
            outln!("saved this run as the next baseline {}", path.display())?;
        }
    }
    step_summary(&render::markdown(&verdict, &update))?;
    Ok(if verdict.outcome == Outcome::Regression { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// Appends `markdown` to `$GITHUB_STEP_SUMMARY`, where a GitHub Actions step sets it.
fn step_summary(markdown: &str) -> Result<()> {
    match std::env::var_os("GITHUB_STEP_SUMMARY").filter(|s| !s.is_empty()) {
        Some(summary) => append(Path::new(&summary), markdown).context("$GITHUB_STEP_SUMMARY"),
        None => Ok(()),
    }
}

/// The commit checked out here, as git names it (short), where this is a git work tree.
fn git_head() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let head = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !head.is_empty()).then_some(head)
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
fn write_action_benchmark(
    dir: &Path,
    record: &GuardRecord,
    history: Option<&HistoryVerdict>,
) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--action-benchmark {}", dir.display()))?;
    export::write(dir, &ActionBenchmark { record, history }, &[&Json])?;
    Ok(())
}
