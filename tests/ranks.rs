//! A lerobot-train run measured as N ranks at once (`--processes N`): a driver per rank with
//! the environment a launcher gives it, one real gloo process group, the run's DataLoader
//! sharded by lerobot-train's own Accelerator, every step waiting for the slowest rank; a rank
//! that dies ends the others. And the native loader's ranks at once (`train DATASET
//! --processes N`): a process per rank on its shard, stepping together at a barrier.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::common;
use feedbench::loader::lerobot::run_args::TrainArgs;
use feedbench::loader::lerobot::{LerobotBridge, Reader};

/// A small diffusion run on a generated dataset under `dir`, its DataLoader without workers
/// (each rank loads in its own process, so a rank's loading is its step's wait).
fn run_args(dir: &Path) -> Vec<String> {
    let mut args = crate::lerobot_train::diffusion_run(dir);
    args.retain(|a| !a.starts_with("--num_workers="));
    args.push("--num_workers=0".into());
    args
}

/// A directory holding a `sitecustomize.py` of `text`, which every Python started with it on
/// PYTHONPATH runs first: the drivers and their workers.
pub(crate) fn site(dir: &Path, text: &str) -> PathBuf {
    let site = dir.join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("sitecustomize.py"), text).unwrap();
    site
}

/// Rank 1's items made `sleep_s` slower (its dataset's `__getitem__`), or rank 1's driver
/// SIGKILLed at its item `die_at`.
fn rank_one(sleep_s: f64, die_at: Option<usize>) -> String {
    let die = die_at.map_or("None".into(), |n| n.to_string());
    format!(
        "import os\n\
         if os.environ.get('RANK') == '1':\n\
         \x20   import signal, time\n\
         \x20   from lerobot.datasets.lerobot_dataset import LeRobotDataset\n\
         \x20   original, calls, die_at = LeRobotDataset.__getitem__, [0], {die}\n\
         \x20   def slower(self, index):\n\
         \x20       calls[0] += 1\n\
         \x20       if die_at is not None and calls[0] >= die_at:\n\
         \x20           os.kill(os.getpid(), signal.SIGKILL)\n\
         \x20       time.sleep({sleep_s})\n\
         \x20       return original(self, index)\n\
         \x20   LeRobotDataset.__getitem__ = slower\n"
    )
}

/// `train` of the run `text` as 2 ranks at once in `python`, a 20 ms step, `steps` steps.
fn two_ranks(text: &str, python: &Path, steps: usize) -> Vec<String> {
    let python = python.to_str().unwrap();
    let words = ["train", "--lerobot-train", text, "--python", python, "--processes", "2"];
    let step = ["--model", "synthetic:20ms", "--warmup", "1", "--steps", &steps.to_string()];
    words.iter().chain(&step).map(|w| w.to_string()).collect()
}

/// `feedbench ARGS` with `env`: success, stdout, stderr.
fn feedbench_with(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(args).envs(env.iter().copied());
    common::outcome(&mut command)
}

#[test]
fn two_ranks_take_disjoint_shards_as_accelerate_deals_them() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let args = run_args(dir.path());
    let bridge = LerobotBridge::new();
    let run = |ranks| TrainArgs {
        python: python.clone(),
        args: args.clone(),
        reader: Reader::Lerobot,
        ranks,
    };
    let (_, built) = bridge.describe(&run(1)).unwrap();
    let config = built.config();
    let (alone, ranked) = (dir.path().join("alone"), dir.path().join("ranked"));
    bridge.save_first_batches(&run(1), &config, 4, &alone).unwrap();
    bridge.save_first_batches(&run(2), &config, 2, &ranked).unwrap();
    let indices = |batch: &Path| std::fs::read(batch.join("index.npy")).unwrap();
    // accelerate's BatchSamplerShard: rank r takes batches r, r + 2, … of the run's order.
    for (rank, batch, of_the_run) in [(0, 0, 0), (1, 0, 1), (0, 1, 2), (1, 1, 3)] {
        let shard = ranked.join(format!("rank-{rank}/batch-{batch}"));
        let whole = alone.join(format!("batch-{of_the_run}"));
        assert_eq!(indices(&shard), indices(&whole), "rank {rank}'s batch {batch}");
    }
    assert_ne!(indices(&ranked.join("rank-0/batch-0")), indices(&ranked.join("rank-1/batch-0")));
}

#[test]
fn two_ranks_step_together_and_the_slowest_paces_and_is_named() {
    let Some(python) = common::lerobot_python() else { return };
    let _alone = common::timing_alone();
    let dir = tempfile::tempdir().unwrap();
    let text = run_args(dir.path()).join(" ");
    let site = site(dir.path(), &rank_one(0.04, None));
    let mut args = two_ranks(&text, &python, 6);
    args.push("--json".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, stdout, stderr) = feedbench_with(&args, &[("PYTHONPATH", site.to_str().unwrap())]);
    assert!(ok, "{stderr}");
    let phase: Json = serde_json::from_str(&stdout).unwrap();
    let ranks = phase["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2, "{phase}");
    assert_eq!(phase["slowest_rank"], 1, "rank 1 loads 0.16 s more a step: {phase}");
    let (pid0, pid1) = (ranks[0]["pid"].as_u64().unwrap(), ranks[1]["pid"].as_u64().unwrap());
    assert!(pid0 != pid1 && pid0 > 0 && pid1 > 0, "two processes: {phase}");
    let figure = |rank: usize, key: &str| ranks[rank][key].as_f64().unwrap();
    // Rank 0 is fed, rank 1 waits; both step at rank 1's pace (each step ends in a barrier).
    assert!(figure(1, "input_bound_pct") > figure(0, "input_bound_pct") + 20.0, "{phase}");
    let (fast, slow) = (figure(0, "samples_per_s"), figure(1, "samples_per_s"));
    assert!((fast / slow - 1.0).abs() < 0.15, "paced together: {fast} and {slow} samples/s");
    assert!(phase["rank_spread_pct"].as_f64().unwrap() > 20.0, "{phase}");
    assert!(figure(0, "first_batch_s") > 0.0 && phase["first_batch_s"].as_f64().unwrap() > 0.0);
    // The phase is the slowest rank's.
    assert_eq!(phase["samples_per_s"].as_f64().unwrap(), slow);
}

#[test]
fn a_rank_that_dies_mid_step_ends_the_others_and_is_named() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let text = run_args(dir.path()).join(" ");
    let site = site(dir.path(), &rank_one(0.0, Some(20)));
    let marker = format!("FEEDBENCH_RANKS_TEST={}", dir.path().display());
    let args = two_ranks(&text, &python, 30);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (name, value) = marker.split_once('=').unwrap();
    let started = Instant::now();
    let env = [("PYTHONPATH", site.to_str().unwrap()), (name, value)];
    let (ok, _, stderr) = feedbench_with(&args, &env);
    assert!(!ok);
    assert!(started.elapsed() < Duration::from_secs(240), "ended in {:?}", started.elapsed());
    assert!(stderr.contains("rank 1 of 2 failed, and the other ranks were ended"), "{stderr}");
    assert!(stderr.contains("killed by signal 9"), "{stderr}");
    // No driver or worker of either rank is left.
    std::thread::sleep(Duration::from_millis(500));
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let pid = entry.ok()?.file_name().into_string().ok()?;
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            environ.split(|&b| b == 0).any(|var| var == marker.as_bytes()).then_some(pid)
        })
        .collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn ranks_beyond_the_cores_or_without_a_run_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("p");
    common::synth_pusht(&data, 1, 10, &[]);
    let many = ["load", data.to_str().unwrap(), "--processes", "4096"];
    let (ok, _, stderr) = common::feedbench(&many);
    assert!(!ok && stderr.contains("--processes 4096: more ranks than this machine's"), "{stderr}");
    let native = ["load", data.to_str().unwrap(), "--processes", "1"];
    assert!(common::feedbench(&native).0, "one rank is the loader alone");
    let two = ["load", data.to_str().unwrap(), "--processes", "2"];
    let (ok, _, stderr) = common::feedbench(&two);
    assert!(!ok && stderr.contains("--rank/--world-size"), "{stderr}");
}

/// `tune` of lerobot-train run `args` launched as accelerate launches 2 ranks on the CPU, in
/// `python`'s environment, a 60 ms step, into `out`.
fn tune_of_two_ranks(python: &Path, args: &[String], out: &Path) -> Vec<String> {
    let script = python.with_file_name("lerobot-train");
    let line = format!(
        "accelerate launch --cpu --num_processes 2 {} {}",
        script.display(),
        shlex::try_join(args.iter().map(String::as_str)).unwrap()
    );
    let (python, out) = (python.to_str().unwrap(), out.to_str().unwrap());
    let flags = ["tune", "--lerobot-train", &line, "--python", python, "--step-ms", "60"];
    flags.iter().chain(&["--out", out]).map(|f| f.to_string()).collect()
}

#[test]
fn tune_of_a_launch_line_of_two_ranks_measures_them_at_once() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut args = run_args(dir.path());
    args.retain(|a| !a.starts_with("--num_workers="));
    args.push("--num_workers=1".into());
    let out = dir.path().join("tune");
    let flags = tune_of_two_ranks(&python, &args, &out);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (ok, stdout, stderr) = common::feedbench(&flags);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("measured with the 2 ranks at once"), "{stdout}");
    assert!(stdout.contains("Measured with the 2 ranks at once at "), "{stdout}");
    let tuned: Json =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    let at_once = &tuned["at_once"];
    assert_eq!(at_once["processes"], 2, "{tuned}");
    let ranks = at_once["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2, "{at_once}");
    assert_ne!(ranks[0]["pid"], ranks[1]["pid"], "two rank processes: {at_once}");
    assert_eq!(tuned["answer"]["workers"], at_once["workers"], "the answer is what was measured");
    assert_eq!(tuned["answer"]["measured_at_once"], true);
    let why = tuned["steps"].as_array().unwrap().iter().map(|s| s["why"].as_str().unwrap());
    assert!(why.clone().any(|w| w == "the answer with the 2 ranks at once"), "{tuned}");
}

#[test]
fn a_tune_whose_rank_dies_resumes_from_the_configurations_measured_before() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let args = run_args(dir.path());
    let out = dir.path().join("tune");
    let flags = tune_of_two_ranks(&python, &args, &out);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    // Rank 1 exists only where the ranks are measured at once, after the rank alone was: it is
    // SIGKILLed there.
    let site = site(dir.path(), &rank_one(0.0, Some(5)));
    let (ok, _, stderr) = feedbench_with(&flags, &[("PYTHONPATH", site.to_str().unwrap())]);
    assert!(!ok && stderr.contains("rank 1 of 2 failed"), "{stderr}");
    let results = out.join("results.jsonl");
    let before = std::fs::read_to_string(&results).unwrap_or_default();
    assert!(!before.is_empty(), "the configurations measured alone are kept: {stderr}");
    // Resumed without the fault: what was measured comes first, as it was, and nothing is
    // measured twice; the ranks are measured at once.
    let resumed = [&flags[..], &["--resume"]].concat();
    let (ok, stdout, stderr) = feedbench_with(&resumed, &[]);
    assert!(ok, "{stderr}");
    let after = std::fs::read_to_string(&results).unwrap();
    assert!(after.starts_with(&before), "the earlier results kept whole");
    let cells: Vec<Json> = after.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // A cell is its knobs and its repeat: the same one twice is a measurement made again.
    let knobs: Vec<String> = cells.iter().map(|c| c["cell"].to_string()).collect();
    let unique: std::collections::HashSet<&String> = knobs.iter().collect();
    assert_eq!(unique.len(), knobs.len(), "a configuration measured twice: {knobs:?}");
    assert!(stderr.contains("measured before"), "{stderr}");
    assert!(stdout.contains("measured with the 2 ranks at once"), "{stdout}");
    // Resumed again: the ranks' measurements at once were kept too, and nothing is measured.
    let at_once = out.join("at-once.jsonl");
    let kept = std::fs::read_to_string(&at_once).unwrap();
    assert!(!kept.is_empty(), "the measurements at once are kept");
    let (ok, again, stderr) = feedbench_with(&resumed, &[]);
    assert!(ok, "{stderr}");
    assert_eq!(std::fs::read_to_string(&at_once).unwrap(), kept, "none measured again");
    assert_eq!(std::fs::read_to_string(&results).unwrap(), after, "none measured again");
    assert!(again.contains("measured with the 2 ranks at once"), "{again}");
    assert!(!stderr.contains("tune: measuring"), "nothing measured: {stderr}");
}

/// `train DATASET --processes 2` with the native loader on a small generated dataset under
/// `dir`, a 20 ms step, `steps` measured steps, and `extra` flags.
fn native_two_ranks(dir: &Path, steps: usize, extra: &[&str]) -> Vec<String> {
    let data = dir.join("p");
    if !data.exists() {
        common::synth_pusht(&data, 2, 40, &[]);
    }
    let steps = steps.to_string();
    let args = [
        "train",
        data.to_str().unwrap(),
        "--processes",
        "2",
        "--workers",
        "1",
        "--batch",
        "8",
        "--model",
        "synthetic:20ms",
        "--warmup",
        "2",
        "--steps",
        &steps,
    ];
    args.iter().chain(extra).map(|a| a.to_string()).collect()
}

#[test]
fn native_ranks_at_once_step_together_each_on_its_shard() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ranks");
    let args = native_two_ranks(dir.path(), 12, &["--json", "--out", out.to_str().unwrap()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, stdout, stderr) = common::feedbench(&args);
    assert!(ok, "{stderr}");
    let phase: Json = serde_json::from_str(&stdout).unwrap();
    let ranks = phase["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2, "{phase}");
    let (pid0, pid1) = (ranks[0]["pid"].as_u64().unwrap(), ranks[1]["pid"].as_u64().unwrap());
    assert!(pid0 != pid1 && pid0 != u64::from(std::process::id()), "a process each: {phase}");
    assert_eq!(phase["steps"], 12, "{phase}");
    // Every step ends at the barrier: the ranks' walls, and so their rates, are one.
    let rate = |r: usize| ranks[r]["samples_per_s"].as_f64().unwrap();
    assert!((rate(0) / rate(1) - 1.0).abs() < 0.1, "paced together: {phase}");
    assert!(phase["slowest_rank"].as_u64().unwrap() < 2, "{phase}");
    // Scaled against one rank alone, measured first with the same flags.
    let alone = phase["one_rank_alone_samples_per_s"].as_f64().unwrap();
    let efficiency = phase["scaling_efficiency"].as_f64().unwrap();
    assert!((efficiency - (rate(0) + rate(1)) / (2.0 * alone)).abs() < 1e-9, "{phase}");
    assert!(efficiency > 0.0 && phase["wait_ms_per_step"].as_f64().unwrap() >= 0.0, "{phase}");
    // Each rank read its own shard (`merge` reports the rank files they wrote).
    let (ok, merged, stderr) = common::feedbench(&["merge", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(merged.contains("train with 2 ranks (2 found)"), "{merged}");
    assert!(merged.contains("shards of the first epoch"), "{merged}");
    // Not with --rank, nor --trace; and `load` names where the native ranks at once are.
    let with_rank = native_two_ranks(dir.path(), 2, &["--rank", "0", "--world-size", "2"]);
    let with_rank: Vec<&str> = with_rank.iter().map(String::as_str).collect();
    let (ok, _, stderr) = common::feedbench(&with_rank);
    assert!(!ok && stderr.contains("not with --rank"), "{stderr}");
    let trace = dir.path().join("t.json");
    let traced = native_two_ranks(dir.path(), 2, &["--trace", trace.to_str().unwrap()]);
    let traced: Vec<&str> = traced.iter().map(String::as_str).collect();
    let (ok, _, stderr) = common::feedbench(&traced);
    assert!(!ok && stderr.contains("--trace") && !trace.exists(), "{stderr}");
}

#[test]
fn a_native_rank_killed_mid_run_ends_the_others_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // 2000 steps of 20 ms: 40 s unless ended.
    let args = native_two_ranks(dir.path(), 2000, &[]);
    let child = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let parent = child.id();
    // Both ranks started and stepping.
    let started = Instant::now();
    let ranks = loop {
        let ranks = common::children(parent);
        if ranks.len() == 2 || started.elapsed() > Duration::from_secs(60) {
            break ranks;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ranks.len(), 2, "two ranks");
    std::thread::sleep(Duration::from_secs(2));
    let killed = Instant::now();
    unsafe { libc::kill(ranks[1] as i32, libc::SIGKILL) };
    let output = child.wait_with_output().unwrap();
    assert!(killed.elapsed() < Duration::from_secs(20), "ended in {:?}", killed.elapsed());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("rank 1 of 2 was killed by signal 9")
            && stderr.contains("the other ranks were ended"),
        "{stderr}"
    );
    assert!(!std::path::Path::new(&format!("/proc/{}", ranks[0])).exists(), "rank 0 ended too");
}
