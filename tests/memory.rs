//! The memory a configuration holds: the PSS of its whole process tree (the loader's process
//! and its DataLoader workers) read over the measured steps, what a worker adds, and a slope
//! that tells a leak from noise.

use std::path::Path;
use std::process::Command;

use serde_json::Value as Json;

use crate::common;

/// `feedbench ARGS --json` with `env`: the phase it prints.
fn phase(args: &[&str], env: &[(&str, &str)]) -> Json {
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(args).arg("--json").envs(env.iter().copied());
    let (ok, stdout, stderr) = common::outcome(&mut command);
    assert!(ok, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

/// A small diffusion run on a generated dataset under `dir`.
fn run_text(dir: &Path) -> String {
    crate::lerobot_train::diffusion_run(dir).join(" ")
}

#[test]
fn a_runs_memory_grows_with_its_workers_each_a_process() {
    let Some(python) = common::lerobot_python() else { return };
    let _alone = common::timing_alone();
    let dir = tempfile::tempdir().unwrap();
    let text = run_text(dir.path());
    let python = python.to_str().unwrap();
    let pss = |workers: &str| {
        let args = [
            "load",
            "--lerobot-train",
            &text,
            "--python",
            python,
            "--workers",
            workers,
            "--batches",
            "12",
        ];
        let memory = phase(&args, &[])["memory"].clone();
        assert!(memory["reads"].as_u64().unwrap() >= 2, "{memory}");
        assert_eq!(memory["growing"], false, "{workers} workers: {memory}");
        memory
    };
    let (none, one, two) = (pss("0"), pss("1"), pss("2"));
    let mb = |m: &Json| m["pss_mb"].as_f64().unwrap();
    assert!(mb(&one) > mb(&none) + 50.0 && mb(&two) > mb(&one) + 50.0, "{none} {one} {two}");
    assert!(none["per_worker_pss_mb"].is_null(), "no worker: {none}");
    let worker = two["per_worker_pss_mb"].as_f64().unwrap();
    // The second worker added a worker process's PSS, and the main process the batches it
    // has in flight (measured: 588 MB against 389 MB a worker).
    let added = mb(&two) - mb(&one);
    assert!(added > 0.5 * worker && added < 2.5 * worker, "{added} MB added, {worker} a worker");
}

#[test]
fn a_loader_that_leaks_per_batch_is_flagged_by_its_slope_and_a_normal_one_is_not() {
    let Some(python) = common::lerobot_python() else { return };
    let _alone = common::timing_alone();
    let dir = tempfile::tempdir().unwrap();
    let text = run_text(dir.path());
    let python = python.to_str().unwrap();
    // Each item keeps 3 MB alive, as a dataset caching what it read without bound would.
    let site = crate::ranks::site(
        dir.path(),
        "import os\n\
         if os.environ.get('FEEDBENCH_TEST_LEAK'):\n\
         \x20   from lerobot.datasets.lerobot_dataset import LeRobotDataset\n\
         \x20   original, kept = LeRobotDataset.__getitem__, []\n\
         \x20   def leaking(self, index):\n\
         \x20       kept.append(bytearray(os.urandom(3 << 20)))\n\
         \x20       return original(self, index)\n\
         \x20   LeRobotDataset.__getitem__ = leaking\n",
    );
    let args = [
        "train",
        "--lerobot-train",
        &text,
        "--python",
        python,
        "--workers",
        "0",
        "--model",
        "synthetic:20ms",
        "--steps",
        "24",
    ];
    let pythonpath = ("PYTHONPATH", site.to_str().unwrap());
    let normal = phase(&args, &[pythonpath])["memory"].clone();
    assert_eq!(normal["growing"], false, "{normal}");
    let leaking = phase(&args, &[pythonpath, ("FEEDBENCH_TEST_LEAK", "1")])["memory"].clone();
    assert_eq!(leaking["growing"], true, "{leaking}");
    // 60 batches of 4 items, 3 MB each: about 720 MB over the steps.
    assert!(leaking["pss_slope_mb_per_min"].as_f64().unwrap() > 0.0, "{leaking}");
}

#[test]
fn the_native_loaders_phases_say_the_memory_they_hold() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("p");
    common::synth_pusht(&data, 2, 30, &[]);
    let root = data.to_str().unwrap();
    let train = phase(&["train", root, "--model", "synthetic:5ms", "--steps", "12"], &[]);
    let memory = &train["memory"];
    assert!(memory["pss_mb"].as_f64().unwrap() > 10.0, "{memory}");
    assert!(memory["per_worker_pss_mb"].is_null(), "workers are threads: {memory}");
    assert!(train["first_batch_s"].as_f64().unwrap() >= 0.0, "{train}");
    // MLPerf Storage's accelerator utilisation beside the input-bound share.
    let au = train["au_pct"].as_f64().unwrap();
    assert!(au > 0.0 && au <= 100.0, "{train}");
    let load = phase(&["load", root, "--batches", "10"], &[]);
    assert!(load["memory"]["reads"].as_u64().unwrap() >= 2, "first and last: {load}");
}
