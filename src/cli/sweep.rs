//! `feedbench sweep` and `feedbench report`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use feedbench::bench::export::{self, Html};
use feedbench::bench::report::{self, ReportFiles};
use feedbench::bench::sweep::config::{ConfigFile, SweepConfig};
use feedbench::bench::sweep::results::Resume;
use feedbench::bench::sweep::{prepare_dataset, results_path, run_sweep};
use feedbench::bench::{layout_study, tune};
use feedbench::model::StepFrom;

use super::printer::Printer;
use super::step_flags::{flagged, step_from};
use super::{cluster, default_out};

/// Arguments of `feedbench sweep`: the whole sweep here, or, with `plan` and `run`, as the
/// tasks of a job array.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    action: Option<SweepAction>,
    /// The sweep config (TOML; see configs/example.toml).
    #[arg(long, required = true)]
    config: Option<PathBuf>,
    /// Output directory [default: results/<config name>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the sweep whose results.jsonl is in the output directory, skipping its
    /// finished cells.
    #[arg(long)]
    resume: bool,
    /// With --resume: add to results measured with another config (its cells stay apart by
    /// their knobs in the report).
    #[arg(long, requires = "resume")]
    allow_changed_config: bool,
    /// The step replayed in every cell instead of the config's `model`.
    #[command(flatten)]
    step: StepFrom,
}

/// A sweep as the tasks of a Slurm job array or a Kubernetes indexed job.
#[derive(Subcommand)]
enum SweepAction {
    /// Write the plan (DIR/plan.jsonl: every cell with its stable id and group) and print the
    /// sbatch lines that run it as a job array.
    Plan(cluster::PlanArgs),
    /// Run this task's share of the plan in DIR, each cell's result to DIR/cells/<id>.json;
    /// finished cells are skipped. `feedbench merge DIR` then reports.
    Run(cluster::RunArgs),
}

/// Runs `feedbench sweep`.
pub fn sweep(args: &SweepArgs) -> Result<()> {
    match &args.action {
        Some(SweepAction::Plan(plan)) => return cluster::plan(plan),
        Some(SweepAction::Run(run)) => return cluster::run(run),
        None => {}
    }
    let config_path = args.config.as_deref().expect("clap requires --config without an action");
    let mut config = SweepConfig::load(config_path)?;
    if step_from(&args.step)? {
        config.model.declared.step_ms = None;
        config.model.declared.from = args.step.clone();
        config.model.resolve_step().map_err(flagged)?;
    }
    config.dataset.check_present(config_path)?;
    let out = args.out.clone().unwrap_or_else(|| default_out(config_path));
    let root = prepare_dataset(&config.dataset, &mut Printer::lines())?;
    let mut printer = Printer::cells();
    let resume = match (args.resume, args.allow_changed_config) {
        (false, _) => Resume::No,
        (true, false) => Resume::Yes,
        (true, true) => Resume::EvenIfConfigChanged,
    };
    let results = run_sweep(&config, &root, &out, resume, &mut printer)?;
    printer.finish();
    let written = report::write_report(&out, &results)?;
    out!("{}", written.terminal)?;
    eprintln!("wrote {} and {}", results_path(&out).display(), file_list(&written));
    Ok(())
}

/// Arguments of `feedbench report`.
#[derive(Args)]
pub struct ReportArgs {
    /// The sweep's output directory (holding results.jsonl) or a layout study's (holding
    /// layout.jsonl).
    dir: PathBuf,
    /// Print the path of the page (DIR/report.html: the plots interactive, self-contained,
    /// opens offline) instead of the report's text, e.g. `xdg-open $(feedbench report DIR
    /// --html)`.
    #[arg(long)]
    html: bool,
}

/// Runs `feedbench report`.
pub fn report(args: &ReportArgs) -> Result<()> {
    if args.dir.join(layout_study::RESULTS_FILE).is_file() {
        let written = layout_study::report::report_layout_dir(&args.dir)?;
        out!("{}", written.terminal)?;
        let files: Vec<String> = written.files.iter().map(|f| f.display().to_string()).collect();
        eprintln!("wrote {}", files.join(", "));
        return Ok(());
    }
    // A tune's directory: its page says its answer (tune.json read before anything is written).
    let tune_file = args.dir.join(tune::TUNE_FILE);
    let tuned: Option<tune::Tuned> = match tune_file.is_file() {
        true => Some(
            std::fs::read(&tune_file)
                .map_err(anyhow::Error::from)
                .and_then(|bytes| Ok(serde_json::from_slice(&bytes)?))
                .with_context(|| {
                    format!(
                        "{}: not a tune's answer this feedbench reads (written by another \
                         version? `feedbench tune --resume` answers again from the results)",
                        tune_file.display()
                    )
                })?,
        ),
        false => None,
    };
    let mut written = report::report_dir(&args.dir)?;
    if let Some(tuned) = &tuned {
        let outputs = tune::page::TuneOutputs { tuned, report: &written.report };
        let page = export::write(&args.dir, &outputs, &[&Html])?;
        written.files.retain(|f| !f.ends_with(report::page::PAGE_FILE));
        written.files.extend(page);
    }
    match args.html {
        true => out!("{}", args.dir.join(report::page::PAGE_FILE).display())?,
        false => out!("{}", written.terminal)?,
    }
    eprintln!("wrote {}", file_list(&written));
    Ok(())
}

/// The files a report wrote, comma-separated.
fn file_list(written: &ReportFiles) -> String {
    written.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
}
