//! A sweep as the tasks of a job array, through the binary as a scheduler runs it: shares that
//! together measure the plan, a task stopped by SIGTERM keeps its finished cells and a rerun
//! repeats none, worker counts above the task's CPUs are refused before measuring, merge lists
//! missing cells, and the ranks of a multi-process load are merged with the slowest named.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use feedbench::bench::cluster::cells::{finished_cells, CELLS_DIR};
use feedbench::bench::cluster::plan_file::Plan;
use feedbench::dataset::write::{write_tabular, TabularSpec};

/// The scheduler's variables a task reads, removed so that the test's own environment (a CI
/// job inside Slurm) cannot choose the share or the CPUs.
const SCHEDULER: [&str; 6] = [
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_CPUS_PER_TASK",
    "JOB_COMPLETION_INDEX",
    "SLURM_PROCID",
];

fn feedbench(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(args);
    for name in SCHEDULER {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    feedbench(args, env).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A parquet-only dataset and a planned sweep over it in `dir/sweep`: 4 cells in 2 groups
/// (batch 16 and 32), two `workers` counts, with a step of `step_ms`.
fn planned_sweep(dir: &Path, step_ms: u32, workers: &str) -> PathBuf {
    let root = dir.join("tabular");
    let spec = TabularSpec { episode_lengths: vec![80; 3], state_dim: 6, ..Default::default() };
    write_tabular(&root, &spec).unwrap();
    let config = dir.join("sweep.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\npath = \"{}\"\n[loader]\nworkers = {workers}\nbatch = [16, 32]\n\
             [model]\nmodel = [\"synthetic:{step_ms}ms\"]\ndevice = \"cpu\"\n\
             [run]\nloader_batches = 3\nmodel_steps = 2\ntrain_steps = 3\nwarmup = 1\n",
            root.display()
        ),
    )
    .unwrap();
    let out = dir.join("sweep");
    let planned = run(
        &["sweep", "plan", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[],
    );
    assert!(planned.status.success(), "{}", text(&planned.stderr));
    let printed = text(&planned.stdout);
    assert!(printed.contains("planned 4 cells in 2 groups"), "{printed}");
    assert!(
        printed.contains(&format!("--array=0-1%2 configs/slurm/sweep.sbatch {}", out.display())),
        "{printed}"
    );
    out
}

#[test]
fn the_tasks_shares_together_measure_the_plan_and_merge_into_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = planned_sweep(dir.path(), 1, "[0, 1]");
    let out_arg = out.to_str().unwrap();
    // Task 1 of 2 from Slurm's variables (an array 3-4: ids less the minimum).
    let slurm = [
        ("SLURM_ARRAY_TASK_ID", "4"),
        ("SLURM_ARRAY_TASK_COUNT", "2"),
        ("SLURM_ARRAY_TASK_MIN", "3"),
        ("SLURM_ARRAY_JOB_ID", "77"),
    ];
    let task = run(&["sweep", "run", "--out", out_arg], &slurm);
    assert!(task.status.success(), "{}", text(&task.stderr));
    assert!(text(&task.stdout).contains("task 1 of 2: 2 cells, 0 finished before, 2 measured now"));
    // Merging now: the other task's cells are missing, listed, exit 1; the report is written.
    let merged = run(&["merge", out_arg], &[]);
    assert_eq!(merged.status.code(), Some(1));
    let said = text(&merged.stderr);
    assert!(
        said.contains("merged 2 of the plan's 4 cells") && said.contains("missing (2;"),
        "{said}"
    );
    let (_, plan) = Plan::read(&out).unwrap();
    for missing in plan.cells.iter().filter(|c| c.group == 0) {
        assert!(said.contains(&missing.id), "{said}");
    }
    assert!(out.join("report.md").is_file());
    // Task 0 from the flags, then the merge is complete, in plan order.
    let task = run(&["sweep", "run", "--out", out_arg, "--task", "0", "--tasks", "2"], &[]);
    assert!(task.status.success(), "{}", text(&task.stderr));
    // While a task still writes there (its shared lock), the merge is refused (it merged a
    // results file under the task's feet).
    let writing = feedbench::bench::store::lock::OutputLock::shared(&out).unwrap();
    let merged = run(&["merge", out_arg], &[]);
    let said = text(&merged.stderr);
    assert!(!merged.status.success() && said.contains("another feedbench"), "{said}");
    drop(writing);
    let merged = run(&["merge", out_arg], &[]);
    assert!(merged.status.success(), "{}", text(&merged.stderr));
    let results =
        feedbench::bench::sweep::results::read_results(&out.join("results.jsonl")).unwrap();
    let ids: Vec<String> = results.iter().map(|r| r.cell.id()).collect();
    let planned: Vec<String> = plan.cells.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids, planned);
    let placement = results[2].placement.as_ref().expect("a task records where it ran");
    assert_eq!(placement.scheduler.get("SLURM_ARRAY_JOB_ID").map(String::as_str), Some("77"));
    assert!(!placement.cpus.is_empty());
    assert!(
        results[0].placement.as_ref().unwrap().scheduler.is_empty(),
        "task 0 ran outside Slurm"
    );
    // Cells that share a model measurement share its figures (one task measured it once).
    assert_eq!(results[0].model.step.median_ms, results[1].model.step.median_ms);
}

#[test]
fn a_task_stopped_by_sigterm_keeps_its_finished_cells_and_a_rerun_repeats_none() {
    let dir = tempfile::tempdir().unwrap();
    // Slow steps: each cell takes over a second, so the signal lands inside a cell.
    let out = planned_sweep(dir.path(), 250, "[0, 1]");
    let out_arg = out.to_str().unwrap();
    let mut child = feedbench(&["sweep", "run", "--out", out_arg], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while finished_cells(&out).unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no cell finished in 120 s");
        assert!(child.try_wait().unwrap().is_none(), "the task ended before any cell finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let stopped = child.wait_with_output().unwrap();
    assert_eq!(stopped.status.code(), Some(128 + libc::SIGTERM), "{}", text(&stopped.stderr));
    let said = text(&stopped.stderr);
    assert!(said.contains("SIGTERM received: stopping; the finished cells are in"), "{said}");
    // Every cell file there is whole (finished_cells parses each), and fewer than the plan.
    let kept = finished_cells(&out).unwrap();
    assert!(!kept.is_empty() && kept.len() < 4, "{} cells", kept.len());
    let before: Vec<(PathBuf, std::time::SystemTime)> = std::fs::read_dir(out.join(CELLS_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| (p.clone(), std::fs::metadata(&p).unwrap().modified().unwrap()))
        .collect();
    let rerun = run(&["sweep", "run", "--out", out_arg], &[]);
    assert!(rerun.status.success(), "{}", text(&rerun.stderr));
    let said = text(&rerun.stdout);
    assert!(
        said.contains(&format!(
            "4 cells, {} finished before, {} measured now",
            kept.len(),
            4 - kept.len()
        )),
        "{said}"
    );
    for (path, modified) in before {
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            modified,
            "{} rewritten",
            path.display()
        );
    }
    assert_eq!(finished_cells(&out).unwrap().len(), 4);
}

#[test]
fn worker_counts_above_the_tasks_cpus_are_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let out = planned_sweep(dir.path(), 1, "[0, 3]");
    let out_arg = out.to_str().unwrap();
    let refused = run(&["sweep", "run", "--out", out_arg], &[("SLURM_CPUS_PER_TASK", "1")]);
    assert_eq!(refused.status.code(), Some(1));
    let said = text(&refused.stderr);
    assert!(
        said.contains("2 of this task's cells ask for up to 3 loader workers, but the task may use 1 CPU ($SLURM_CPUS_PER_TASK)"),
        "{said}"
    );
    assert!(!out.join(CELLS_DIR).exists(), "refused before measuring anything");
    let bad = run(&["sweep", "run", "--out", out_arg], &[("SLURM_CPUS_PER_TASK", "many")]);
    assert!(text(&bad.stderr).contains("$SLURM_CPUS_PER_TASK=\"many\": expected a number of CPUs"));
}

#[test]
fn the_ranks_of_a_load_merge_with_the_slowest_named_and_disjoint_shards() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tabular");
    let spec = TabularSpec { episode_lengths: vec![50; 3], state_dim: 4, ..Default::default() };
    write_tabular(&root, &spec).unwrap();
    let ranks = dir.path().join("ranks");
    let load = |rank: &str, world: &str| {
        run(
            &[
                "load",
                root.to_str().unwrap(),
                "--workers",
                "1",
                "--batch",
                "8",
                "--batches",
                "2",
                "--sampler",
                "sequential",
                "--out",
                ranks.to_str().unwrap(),
            ],
            &[("RANK", rank), ("WORLD_SIZE", world)],
        )
    };
    assert!(load("0", "3").status.success());
    assert!(load("2", "3").status.success());
    let again = load("2", "3");
    assert!(text(&again.stderr).contains("rank-2.json: exists"), "{}", text(&again.stderr));
    let merged = run(&["merge", ranks.to_str().unwrap()], &[]);
    assert_eq!(merged.status.code(), Some(1), "rank 1 is missing");
    let said = text(&merged.stdout);
    assert!(
        said.contains("load with 3 ranks (2 found)") && said.contains("missing ranks: 1"),
        "{said}"
    );
    assert!(said.contains("slowest: rank "), "{said}");
    assert!(said.contains("disjoint"), "{said}");
    assert!(load("1", "3").status.success());
    let merged = run(&["merge", ranks.to_str().unwrap()], &[]);
    assert!(merged.status.success());
    // 3 episodes of 50 frames, every frame a sample of the sequential sampler: 150, 50 each.
    assert!(
        text(&merged.stdout).contains("150 distinct samples, disjoint"),
        "{}",
        text(&merged.stdout)
    );
    // A rank of another run in the same directory is refused, naming it.
    assert!(load("3", "4").status.success());
    let mixed = run(&["merge", ranks.to_str().unwrap()], &[]);
    assert!(text(&mixed.stderr).contains("one run per directory"), "{}", text(&mixed.stderr));
}

#[test]
fn merge_of_a_directory_with_neither_a_plan_nor_ranks_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = common::feedbench(&["merge", dir.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("neither a planned sweep (plan.jsonl) nor the ranks"), "{err}");
}
