//! `feedbench sweep plan`, `feedbench sweep run` and `feedbench merge`: a sweep as the tasks of
//! a Slurm job array (or a Kubernetes indexed job) and their results merged; and the stop at a
//! scheduler's SIGTERM or SIGUSR1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use anyhow::{Context, Result};
use clap::Args;

use feedbench::bench::cluster::cells::CELLS_DIR;
use feedbench::bench::cluster::merge::merge_sweep;
use feedbench::bench::cluster::plan_file::{Plan, TaskShare, PLAN_FILE};
use feedbench::bench::cluster::ranks::{has_ranks, read_ranks};
use feedbench::bench::cluster::task::run_task;
use feedbench::bench::cluster::CpuBudget;
use feedbench::bench::sweep::config::{ConfigFile, SweepConfig};
use feedbench::bench::sweep::{dataset_name, prepare_dataset};
use feedbench::dataset::files::output_apart_from;
use feedbench::model::DeviceChoice;

use super::default_out;
use super::printer::Printer;

/// Arguments of `feedbench sweep plan`.
#[derive(Args)]
pub struct PlanArgs {
    /// The sweep config (TOML; see configs/example.toml).
    #[arg(long)]
    config: PathBuf,
    /// Output directory for the plan, the cells' results and the merged report
    /// [default: results/<config name>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// At most this many array tasks at once (sbatch's `%K` throttle) [default: 4, or fewer
    /// when the plan has fewer groups].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_running: Option<u32>,
}

/// Runs `feedbench sweep plan`: writes the plan and prints how to submit it.
pub fn plan(args: &PlanArgs) -> Result<()> {
    let mut config = SweepConfig::load(&args.config)?;
    config.dataset.check_present(&args.config)?;
    if !config.dataset.also.is_empty() {
        anyhow::bail!(
            "{}: [dataset] also (several roots side by side) is measured by `feedbench sweep` on \
             one machine; a cluster plan reads one root",
            args.config.display()
        );
    }
    let out = args.out.clone().unwrap_or_else(|| default_out(&args.config));
    // Paths that every task reads from wherever it starts.
    for path in [&mut config.dataset.path, &mut config.dataset.cache].into_iter().flatten() {
        *path = std::path::absolute(&*path)?;
    }
    let root = prepare_dataset(&config.dataset, &mut Printer::lines())?;
    // The cells' device as the config names it; the task checks that its node has it.
    let device = config.model.device().intended();
    if config.model.device() == DeviceChoice::Auto && !device.is_cuda() {
        eprintln!(
            "note: device = \"auto\" is the CPU here; the plan's cells run on the CPU wherever \
             they run (set device = \"cuda\" in the config for GPU nodes)"
        );
    }
    output_apart_from(&out, &root).context("--out")?;
    let plan = Plan::new(&config, &dataset_name(&root), device)?;
    plan.write(&out, &config)?;
    let groups = plan.groups();
    let running = args.max_running.map_or(groups.min(4), |k| (k as usize).min(groups));
    let dir = out.display();
    outln!(
        "planned {} cells in {groups} groups (cells sharing a model measurement run in one \
         task) into {dir}/{PLAN_FILE}",
        plan.cells.len()
    )?;
    outln!("on Slurm, one task per group, {running} at once, then the merge:")?;
    outln!(
        "  jid=$(sbatch --parsable --array=0-{}%{running} configs/slurm/sweep.sbatch {dir})",
        groups - 1
    )?;
    outln!("  sbatch --dependency=afterany:${{jid%%;*}} configs/slurm/sweep.sbatch --merge {dir}")?;
    outln!("here: feedbench sweep run --out {dir} && feedbench merge {dir}")?;
    Ok(())
}

/// Arguments of `feedbench sweep run`.
#[derive(Args)]
pub struct RunArgs {
    /// The directory `sweep plan` wrote.
    #[arg(long)]
    out: PathBuf,
    /// This task's number, from 0 [default: $SLURM_ARRAY_TASK_ID less $SLURM_ARRAY_TASK_MIN,
    /// or $JOB_COMPLETION_INDEX; neither: run the whole plan].
    #[arg(long)]
    task: Option<usize>,
    /// How many tasks share the plan [default: $SLURM_ARRAY_TASK_COUNT].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    tasks: Option<u64>,
}

/// Runs `feedbench sweep run`: this task's share of the plan, each cell to its own file.
pub fn run(args: &RunArgs) -> Result<()> {
    let share = TaskShare::from_vars(args.task, args.tasks.map(|n| n as usize), |name| {
        std::env::var(name).ok()
    })?;
    let budget = CpuBudget::here()?;
    exit_on_scheduler_signal(&args.out);
    let mut printer = Printer::cells();
    let outcome = run_task(&args.out, share, &budget, &mut printer)?;
    printer.finish();
    outln!(
        "task {} of {}: {} cells, {} finished before, {} measured now, in {}",
        share.task,
        share.tasks,
        outcome.cells,
        outcome.skipped,
        outcome.ran,
        args.out.join(CELLS_DIR).display()
    )?;
    Ok(())
}

/// Arguments of `feedbench merge`.
#[derive(Args)]
pub struct MergeArgs {
    /// A planned sweep's directory (plan.jsonl and cells/), or the `--out` of a multi-rank
    /// `load` or `train` (rank-<r>.json).
    dir: PathBuf,
}

/// Runs `feedbench merge`: exit status 1 when cells or ranks are missing (what is there is
/// still merged and reported).
pub fn merge(args: &MergeArgs) -> Result<ExitCode> {
    let dir = &args.dir;
    if dir.join(PLAN_FILE).is_file() {
        let outcome = merge_sweep(dir)?;
        out!("{}", outcome.report.terminal)?;
        eprint!("{outcome}");
        let files: Vec<String> =
            outcome.report.files.iter().map(|f| f.display().to_string()).collect();
        eprintln!("wrote {}/results.jsonl, {}", dir.display(), files.join(", "));
        return Ok(exit_unless(outcome.missing.is_empty()));
    }
    if has_ranks(dir) {
        let run = read_ranks(dir)?;
        out!("{run}")?;
        return Ok(exit_unless(run.missing.is_empty()));
    }
    anyhow::bail!(
        "{}: neither a planned sweep ({PLAN_FILE}) nor the ranks of a load or train run \
         (rank-<r>.json)",
        dir.display()
    )
}

fn exit_unless(complete: bool) -> ExitCode {
    if complete {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What the process says when a scheduler's signal stops it.
static STOP_MESSAGE: OnceLock<String> = OnceLock::new();

/// On SIGTERM (Slurm's cancel, preemption, the time limit) or SIGUSR1 (`--signal=B:USR1@120`,
/// forwarded by the batch script), the task says so and exits at once with 128 + the signal:
/// every finished cell is in its file already (written whole), the unfinished one runs again
/// when the task is run again.
fn exit_on_scheduler_signal(out: &Path) {
    let _ = STOP_MESSAGE.set(format!(
        " received: stopping; the finished cells are in {}, run the task again to measure the \
         rest (finished cells are skipped)\n",
        out.join(CELLS_DIR).display()
    ));
    extern "C" fn stop(signal: libc::c_int) {
        let name: &[u8] =
            if signal == libc::SIGTERM { b"feedbench: SIGTERM" } else { b"feedbench: SIGUSR1" };
        let rest = STOP_MESSAGE.get().map_or(&b"\n"[..], |m| m.as_bytes());
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffers outlive the calls.
        unsafe {
            libc::write(2, name.as_ptr().cast(), name.len());
            libc::write(2, rest.as_ptr().cast(), rest.len());
            libc::_exit(128 + signal);
        }
    }
    for signal in [libc::SIGTERM, libc::SIGUSR1] {
        // SAFETY: installs a handler that only calls async-signal-safe functions.
        unsafe {
            libc::signal(signal, stop as extern "C" fn(libc::c_int) as libc::sighandler_t);
        }
    }
}
