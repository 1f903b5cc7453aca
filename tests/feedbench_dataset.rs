//! `feedbench.lerobot.FeedbenchDataset` (the native reader through PyO3, `feedbench._native`)
//! against LeRobot's `LeRobotDataset` in the LeRobot venv (tests/feedbench_dataset/check.py):
//! items key for key and bit for bit, seeded lerobot-train DataLoader batches under spawn and
//! fork, and its refusals; feedbench-lerobot-train against lerobot-train, and its epoch chain
//! against LeRobot's sampler (epochs.py); language columns against LeRobot main's (language.py).
//! The module is the one
//! `cargo build --workspace` makes (`make test` builds it first). Skipped, with a note, where no LeRobot venv is found.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::lerobot_python;
use feedbench::dataset::video::VideoCodec;
use feedbench::dataset::write::transcode::{transcode, FrameStorage, TranscodeOptions};
use feedbench::dataset::write::EncodeSettings;
use feedbench::dataset::{CodebaseVersion, Dataset, DatasetOptions};

/// The `feedbench` package as the wheel lays it out (python/feedbench/ and the native module
/// `_native.abi3.so`), under `dir`; returns the directory to put on PYTHONPATH.
pub(crate) fn python_package(dir: &Path) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("target"));
    let native = target.join("debug/lib_native.so");
    assert!(
        native.is_file(),
        "{} is missing: build the Python module first (cargo build --workspace; make test \
         does)",
        native.display()
    );
    let package = dir.join("python/feedbench");
    std::fs::create_dir_all(&package).unwrap();
    for entry in std::fs::read_dir(manifest.join("python/feedbench")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "py" || e == "pyi") {
            std::fs::copy(&path, package.join(path.file_name().unwrap())).unwrap();
        }
    }
    std::fs::write(
        package.join("_release.py"),
        "__version__ = \"0.1.0\"\nTORCH_SERIES = \"2.11\"\n",
    )
    .unwrap();
    std::fs::copy(native, package.join("_native.abi3.so")).unwrap();
    dir.join("python")
}

/// `check.py ARGS` in the LeRobot venv with the package of `python_package` importable:
/// (success, stdout, stderr).
fn check(python: &Path, package: &Path, args: &[&str]) -> (bool, String, String) {
    run_script("check.py", python, package, args)
}

/// tests/feedbench_dataset/`script` `args`, as [`check`] runs check.py.
fn run_script(
    script: &str,
    python: &Path,
    package: &Path,
    args: &[&str],
) -> (bool, String, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/feedbench_dataset").join(script);
    common::outcome(
        Command::new(python)
            .arg(script)
            .args(args)
            .env("PYTHONPATH", package)
            .env("HF_HUB_OFFLINE", "1"),
    )
}

fn assert_checks(python: &Path, package: &Path, args: &[&str], expected_lines: usize) {
    let (ok, out, err) = check(python, package, args);
    assert!(ok, "check.py {args:?}:\n{out}\n{err}");
    print!("{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("check: ")).count(), expected_lines, "{out}");
}

#[test]
fn its_items_equal_lerobots_on_generated_and_lerobot_written_datasets() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let generated = crate::lerobot::dataset(dir.path(), "two-cameras", &[]);
    assert_checks(&python, &package, &["items", generated.to_str().unwrap(), "300"], 3);
    assert_checks(&python, &package, &["stub"], 1);
    assert_checks(&python, &package, &["self-check", generated.to_str().unwrap()], 2);
    let written = dir.path().join("lerobot-written");
    assert_checks(&python, &package, &["write-lerobot", written.to_str().unwrap()], 1);
    assert_checks(&python, &package, &["items", written.to_str().unwrap(), "300"], 3);
}

#[test]
fn language_columns_are_lerobot_mains_and_its_runs_collate_them_as_items() {
    let Some(python) = common::lerobot_main_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let mut args = crate::lerobot_train::diffusion_run(dir.path());
    // The run's dataset, annotated as LeRobot's annotation pipeline writes it.
    let data = dir.path().join("pusht");
    let (ok, out, err) =
        run_script("language.py", &python, &package, &["annotate", data.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) =
        run_script("language.py", &python, &package, &["items", data.to_str().unwrap()]);
    assert!(ok, "language.py items:\n{out}\n{err}");
    assert_eq!(out.lines().filter(|l| l.starts_with("check: ")).count(), 2, "{out}");
    // lerobot-train of LeRobot's main over it with feedbench's reader: its lerobot_collate_fn
    // gets items (not a batch the reader collated), 2 steps.
    args.push("--steps=2".into());
    let text: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, err) = feedbench_lerobot_train(&python, package.to_str().unwrap(), &text);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("step:2 "), "{err}");
}

#[test]
fn its_items_and_runs_equal_lerobot_mains_excluded_episodes_and_all() {
    let Some(python) = common::lerobot_main_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let version = Command::new(&python)
        .args(["-c", "import importlib.metadata as m\nfrom feedbench.lerobot import lerobot_contract\nprint(m.version('lerobot'), lerobot_contract())"])
        .env("PYTHONPATH", &package)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&version.stdout);
    assert_eq!(said.trim(), "0.6.2 main", "{}", String::from_utf8_lossy(&version.stderr));
    let generated = crate::lerobot::dataset(dir.path(), "two-cameras", &[]);
    assert_checks(&python, &package, &["items", generated.to_str().unwrap(), "300"], 3);
    assert_checks(&python, &package, &["self-check", generated.to_str().unwrap()], 2);
    let h264 = crate::lerobot::dataset(dir.path(), "two-cameras-h264", &["--codec", "h264"]);
    assert_checks(&python, &package, &["items", h264.to_str().unwrap(), "100"], 3);
    let written = dir.path().join("lerobot-written");
    assert_checks(&python, &package, &["write-lerobot", written.to_str().unwrap()], 1);
    assert_checks(&python, &package, &["items", written.to_str().unwrap(), "300"], 3);
    // lerobot-train of LeRobot's main, its dataset read by feedbench's reader: 2 steps.
    let mut args = crate::lerobot_train::diffusion_run(dir.path());
    args.push("--steps=2".into());
    let text: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, err) = feedbench_lerobot_train(&python, package.to_str().unwrap(), &text);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("step:2 "), "{err}");
    // main's --dataset.exclude_episodes: the run's first batches with feedbench's reader equal
    // those of main's own, over the episodes left.
    args.push("--dataset.exclude_episodes=[1]".into());
    let (theirs, ours) = (dir.path().join("theirs"), dir.path().join("ours"));
    for out in [&theirs, &ours] {
        std::fs::create_dir_all(out).unwrap();
    }
    let record = |args: &[String], out: &Path| {
        std::fs::remove_dir_all(dir.path().join("run")).ok();
        crate::lerobot_train::recorded_run(&python, args, 4, out, Some(&package)).0
    };
    let built = record(&args, &theirs);
    let with_reader = [&["--feedbench-reader".to_string()][..], &args].concat();
    let ours_built = record(&with_reader, &ours);
    let episodes = |built: &serde_json::Value| built["sampler"]["episode_indices_to_use"].clone();
    assert_eq!(episodes(&built), serde_json::json!([0, 2]), "{built}");
    assert_eq!(episodes(&ours_built), episodes(&built));
    let batches = |dir: &Path| {
        let files = crate::lerobot_train::files(dir);
        files.into_iter().filter(|(p, _)| p != Path::new("built.json")).collect::<Vec<_>>()
    };
    let (ours, theirs) = (batches(&ours), batches(&theirs));
    assert_eq!(ours.len(), theirs.len());
    assert!(!ours.is_empty() && ours == theirs, "main's batches differ with feedbench's reader");
}

#[test]
fn its_items_equal_lerobots_on_g1_partial_written_as_v30() {
    let Some(python) = lerobot_python() else { return };
    let Some(g1) = common::g1_partial() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    // LeRobot 0.6 reads v3.0 only: the episodes with videos, written again by feedbench's
    // writer (the parquet values as they are, the camera re-encoded as LeRobot encodes).
    let source = Dataset::open_with(
        &g1,
        &DatasetOptions { episodes: Some(vec![2, 4]), ..DatasetOptions::default() },
    )
    .unwrap();
    let root = dir.path().join("g1-v30");
    let mut settings = EncodeSettings::lerobot(VideoCodec::Av1);
    settings.gop = 2;
    let options = TranscodeOptions {
        version: CodebaseVersion::V30,
        storage: FrameStorage::Video(settings),
        resolution: None,
        episodes_per_file: None,
    };
    transcode(&source, &root, &options).unwrap();
    assert_checks(&python, &package, &["items", root.to_str().unwrap(), "300"], 3);
    // The self-check's cost on 640×480 AV1 is said (docs/feedbench-dataset.md holds it).
    assert_checks(&python, &package, &["self-check", root.to_str().unwrap()], 2);
}

#[test]
fn seeded_lerobot_train_batches_equal_lerobots_under_spawn_fork_no_workers_and_accelerates_shards()
{
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let generated = crate::lerobot::dataset(dir.path(), "two-cameras", &[]);
    assert_checks(&python, &package, &["batches", generated.to_str().unwrap()], 6);
    // accelerate's sharding across ranks, as lerobot-train's `accelerator.prepare` does it.
    assert_checks(&python, &package, &["shards", generated.to_str().unwrap()], 1);
}

#[test]
fn what_it_cannot_read_is_refused_by_name() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let generated = crate::lerobot::dataset(dir.path(), "two-cameras", &[]);
    assert_checks(&python, &package, &["refusals", generated.to_str().unwrap()], 16);
}

#[test]
fn its_frame_cache_is_shared_by_the_workers_and_leaves_the_batches_lerobots() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let generated = crate::lerobot::dataset(dir.path(), "two-cameras", &[]);
    let (ok, out, err) = run_script("cache.py", &python, &package, &[generated.to_str().unwrap()]);
    assert!(ok, "cache.py:\n{out}\n{err}");
    print!("{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("check: ")).count(), 5, "{out}");
}

#[test]
fn the_epoch_chain_draws_each_epoch_at_once_with_lerobot_trains_batches() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let (ok, out, err) = run_script("epochs.py", &python, &package, &[]);
    assert!(ok, "epochs.py:\n{out}\n{err}");
    print!("{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("check: ")).count(), 5, "{out}");
}

#[test]
fn feedbench_lerobot_train_runs_lerobot_train_on_batches_equal_to_lerobots_loader_cached_or_not() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let mut args = crate::lerobot_train::diffusion_run(dir.path());
    // A held-out split, evaluated after step 2: the evaluation subset is picked from
    // hf_dataset, and the train split is an episode subset (absolute_to_relative_idx).
    for arg in ["--dataset.eval_split=0.34", "--max_eval_samples=8", "--eval_steps=2"] {
        args.push(arg.into());
    }
    // Over three epochs and into a fourth: feedbench's reader takes them back to back (its
    // DataLoader never drains), with the batches lerobot-train takes epoch by epoch; the
    // epochs after the first copy their frames from the frame cache.
    const STEPS: usize = 40;
    let (theirs, ours) = (dir.path().join("theirs"), dir.path().join("ours"));
    for out in [&theirs, &ours] {
        std::fs::create_dir_all(out).unwrap();
    }
    let (lerobot_built, lerobot_log) =
        crate::lerobot_train::recorded_run(&python, &args, STEPS, &theirs, Some(&package));
    std::fs::remove_dir_all(dir.path().join("run")).ok();
    let with_reader =
        [&["--feedbench-reader".to_string(), "--feedbench.cache=64MB".into()][..], &args].concat();
    let (built, log) =
        crate::lerobot_train::recorded_run(&python, &with_reader, STEPS, &ours, Some(&package));

    assert_eq!(
        built["feedbench_datasets"], 3,
        "the run's datasets (all, train, eval) are feedbench's"
    );
    assert_eq!(built["sampler"], lerobot_built["sampler"], "LeRobot's sampler, as it builds it");
    let mut dataloader = lerobot_built["dataloader"].clone();
    dataloader["dataset"] = "FeedbenchDataset".into();
    assert_eq!(built["dataloader"], dataloader, "LeRobot's DataLoader, as it builds it");
    let cache = log
        .lines()
        .find_map(|l| l.strip_prefix("feedbench-lerobot-train: frame cache: "))
        .unwrap_or_else(|| panic!("no line on the frame cache:\n{log}"));
    let copied =
        cache.split(", ").nth(1).and_then(|c| c.strip_suffix(" copied instead of decoded"));
    assert!(copied.and_then(|c| c.parse::<u64>().ok()).is_some_and(|c| c > 0), "{cache}");
    let steps = log.lines().filter(|l| l.contains("step:") && l.contains("loss:")).count();
    assert_eq!(steps, STEPS, "lerobot-train logs each of its steps:\n{log}");
    // The sampler's samples of an epoch: the train split's episodes less the frames dropped.
    let sampler = &built["sampler"];
    let index = |key: &str| -> Vec<i64> {
        sampler[key].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect()
    };
    let (from, to) = (index("dataset_from_indices"), index("dataset_to_indices"));
    let used: Vec<usize> = sampler["episode_indices_to_use"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap() as usize)
        .collect();
    let drop = sampler["drop_n_last_frames"].as_i64().unwrap();
    let samples: i64 = used.iter().map(|&e| to[e] - from[e] - drop).sum();
    let per_epoch = (samples as usize).div_ceil(4);
    assert!(STEPS > 3 * per_epoch, "{STEPS} steps span three epochs of {per_epoch} batches");
    let eval_loss = |log: &str| {
        log.lines()
            .find_map(|l| l.split_once("eval_loss=").map(|(_, v)| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no eval_loss logged:\n{log}"))
    };
    assert_eq!(eval_loss(&log), eval_loss(&lerobot_log), "the same held-out evaluation");
    let batches = crate::lerobot_train::recorded_batches;
    let (ours, theirs) = (batches(&ours), batches(&theirs));
    assert_eq!(ours.len(), STEPS * 12, "the batches, each 11 tensors and the strings");
    assert_eq!(
        ours.iter().map(|f| &f.0).collect::<Vec<_>>(),
        theirs.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for ((path, ours), (_, theirs)) in ours.iter().zip(&theirs) {
        assert!(ours == theirs, "{} differs from LeRobot's loader's", path.display());
    }
}

/// `python -m feedbench.lerobot_train ARGS` with `pythonpath`: (exit code, stderr).
fn feedbench_lerobot_train(python: &Path, pythonpath: &str, args: &[&str]) -> (i32, String) {
    let output = Command::new(python)
        .args(["-m", "feedbench.lerobot_train"])
        .args(args)
        .env("PYTHONPATH", pythonpath)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn feedbench_lerobot_train_refuses_what_it_would_not_run_as_lerobot_train_does() {
    let Some(lerobot) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let torch_only = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let path = package.to_str().unwrap();

    // A --dataset.root with no dataset: one line naming it, not LeRobot's offline traceback.
    let (code, err) = feedbench_lerobot_train(
        &lerobot,
        path,
        &["--dataset.repo_id=a/b", "--dataset.root=/nowhere/at/all", "--policy.type=act"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--dataset.root=/nowhere/at/all holds no meta/info.json"), "{err}");
    assert!(err.lines().count() <= 3 && !err.contains("Traceback"), "{err}");
    let (code, err) = feedbench_lerobot_train(&torch_only, path, &["--help"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("LeRobot is not installed") && err.contains("0.4.4 or later"), "{err}");

    // A LeRobot older than any it was checked against, and one newer (their metadata alone):
    // the newer runs where its self-check passes, which may not be turned off for it; and
    // LeRobot's metadata without its modules is one line too.
    let fake = |version: &str| {
        let site = dir.path().join(version);
        let info = site.join(format!("lerobot-{version}.dist-info"));
        std::fs::create_dir_all(&info).unwrap();
        std::fs::write(
            info.join("METADATA"),
            format!("Metadata-Version: 2.1\nName: lerobot\nVersion: {version}\n"),
        )
        .unwrap();
        format!("{path}:{}", site.display())
    };
    let (code, err) = feedbench_lerobot_train(&torch_only, &fake("0.3.3"), &["--help"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("LeRobot 0.3.3 is installed") && err.contains("0.4.4 and later"), "{err}");
    let newer = fake("0.7.0");
    let off = ["--feedbench.self_check=false", "--help"];
    let (code, err) = feedbench_lerobot_train(&torch_only, &newer, &off);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("newer than any feedbench was checked against (0.6.2)"), "{err}");
    let (code, err) = feedbench_lerobot_train(&torch_only, &newer, &["--help"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("LeRobot 0.7.0 is installed") && err.contains("does not import"), "{err}");
    assert!(!err.contains("Traceback"), "{err}");
    let (code, err) =
        feedbench_lerobot_train(&lerobot, path, &["--feedbench.self_check=maybe", "--help"]);
    assert!(code == 2 && err.contains("expected --feedbench.self_check=false or =true"), "{err}");

    let mut args = crate::lerobot_train::diffusion_run(dir.path());
    args.push("--dataset.streaming=true".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, err) = feedbench_lerobot_train(&lerobot, path, &args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--dataset.streaming=true: a streaming dataset"), "{err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("feedbench-lerobot-train: ")).count(), 1);
}

#[test]
fn feedbench_lerobot_train_says_a_workers_error_in_one_line_at_any_worker_count() {
    let Some(lerobot) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let mut args = crate::lerobot_train::diffusion_run(dir.path());
    args.push("--steps=3".into());
    // A truncated video: the reader's error, in a worker or in the main process.
    let videos = dir.path().join("pusht/videos");
    let video = common::file_tree(&videos).into_keys().next().map(|v| videos.join(v)).unwrap();
    let bytes = std::fs::read(&video).unwrap();
    std::fs::write(&video, &bytes[..bytes.len() / 2]).unwrap();
    let path = package.to_str().unwrap();
    let run = |workers: &str, traceback: bool| {
        let mut args = args.clone();
        // The self-check would meet the fault first, in the main process: off, so that the
        // workers do.
        args.push("--feedbench.self_check=false".into());
        args.retain(|a| !a.starts_with("--num_workers="));
        args.push(format!("--num_workers={workers}"));
        let output = Command::new(&lerobot)
            .args(["-m", "feedbench.lerobot_train"])
            .args(&args)
            .env("PYTHONPATH", path)
            .env("HF_HUB_OFFLINE", "1")
            .env("FEEDBENCH_TRACEBACK", if traceback { "1" } else { "0" })
            .output()
            .unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let said = |err: &str| -> Vec<String> {
        let ours = err.lines().filter(|l| l.starts_with("feedbench-lerobot-train: "));
        ours.map(str::to_string).collect()
    };
    // The one line from the video's path on: the fault (which sample met it first may differ
    // with the workers' timing).
    let fault = |err: &str| -> Vec<String> {
        let name = video.display().to_string();
        let ours = said(err);
        ours.iter().map(|l| l.find(&name).map_or(l.clone(), |at| l[at..].to_string())).collect()
    };
    let (code, alone) = run("0", false);
    assert_eq!(code, Some(2), "{alone}");
    let one = fault(&alone);
    assert_eq!(one.len(), 1, "{alone}");
    assert!(one[0].starts_with(&video.display().to_string()), "{alone}");
    for workers in ["1", "2"] {
        let (code, err) = run(workers, false);
        assert_eq!(code, Some(2), "{err}");
        let tail: Vec<&str> = err.lines().rev().take(30).collect();
        assert_eq!(fault(&err), one, "{workers} workers: {tail:#?}");
        assert!(!err.contains("Traceback") && !err.contains("Caught "), "{err}");
    }
    // Asked for, PyTorch's text whole.
    let (code, err) = run("2", true);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("Caught ReaderError in DataLoader worker process"), "{err}");
}

#[test]
fn feedbench_lerobot_trains_line_starts_a_line_of_its_own_under_the_progress_bar() {
    let Some(lerobot) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    // lerobot-train's bar as its monitor thread redraws it while spawned workers start: a
    // carriage return and the bar, no newline.
    let output = Command::new(&lerobot)
        .args([
            "-c",
            "from tqdm import tqdm\n\
                      bar = tqdm(total=3, desc='Training')\n\
                      bar.refresh()\n\
                      from feedbench.lerobot_train import say\n\
                      say('video.mp4: not a complete mp4 file')\n",
        ])
        .env("PYTHONPATH", &package)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{err}");
    let line = "feedbench-lerobot-train: video.mp4: not a complete mp4 file";
    assert!(err.lines().any(|l| l == line), "{err:?}");
}

#[test]
fn feedbench_lerobot_train_says_a_killed_worker_in_one_line() {
    let Some(lerobot) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let mut args = crate::lerobot_train::diffusion_run(dir.path());
    args.push("--steps=100000".into());
    let child = Command::new(&lerobot)
        .args(["-m", "feedbench.lerobot_train"])
        .args(&args)
        .env("PYTHONPATH", &package)
        .env("HF_HUB_OFFLINE", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its DataLoader's spawned workers, once up; one of them SIGKILLed, as the OOM killer would.
    let started = std::time::Instant::now();
    let worker = loop {
        let workers: Vec<u32> = common::children(child.id())
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|line| String::from_utf8_lossy(&line).contains("spawn_main"))
            })
            .collect();
        if let Some(&worker) = workers.first() {
            break worker;
        }
        assert!(started.elapsed().as_secs() < 300, "no worker started");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    std::thread::sleep(std::time::Duration::from_secs(2));
    unsafe { libc::kill(worker as i32, libc::SIGKILL) };
    let output = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{err}");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("feedbench-lerobot-train: DataLoader worker"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(said[0].contains(&worker.to_string()) && !err.contains("Traceback"), "{err}");
}

/// `feedbench ARGS` with `pythonpath` on PYTHONPATH (the driver's Python imports feedbench's
/// package from there): (success, stdout, stderr).
fn feedbench_with(pythonpath: Option<&Path>, args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(args);
    if let Some(path) = pythonpath {
        command.env("PYTHONPATH", path);
    }
    common::outcome(&mut command)
}

#[test]
fn tune_answers_for_a_lerobot_train_run_with_either_reader() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let text = crate::lerobot_train::diffusion_run(dir.path()).join(" ");
    let out = dir.path().join("tune");
    let run = ["--lerobot-train", &text, "--python", python.to_str().unwrap()];
    let reader = ["--loader", "feedbench-lerobot-train"];
    let lengths = ["--loader-batches", "4", "--train-steps", "6", "--warmup", "1"];
    let tune = [
        &["tune"][..],
        &run,
        &["--both-readers", "--step-ms", "100", "--cpus", "1"],
        &lengths,
        &["--out", out.to_str().unwrap()],
    ]
    .concat();
    let (ok, stdout, stderr) = feedbench_with(Some(&package), &tune);
    assert!(ok, "{stderr}");
    let flags = stdout.lines().find(|l| l.starts_with("Flags (feedbench-lerobot-train): "));
    let command = flags.expect(&stdout).trim_start_matches("Flags (feedbench-lerobot-train): ");
    assert!(command.starts_with("feedbench-lerobot-train --dataset.repo_id=local/pusht "));
    assert_eq!(command.matches("--num_workers=").count(), 1, "{command}");
    assert!(stdout.contains("Flags (lerobot-train): lerobot-train --dataset.repo_id"), "{stdout}");
    let both = stdout.lines().last().unwrap_or_default();
    assert!(
        both.starts_with("For this run: LeRobot's loader: ")
            && both.contains("; feedbench's reader in lerobot-train: "),
        "{stdout}"
    );
    for loader in ["lerobot-train", "feedbench-lerobot-train"] {
        let results = std::fs::read_to_string(out.join(loader).join("results.jsonl")).unwrap();
        for line in results.lines() {
            let cell = &serde_json::from_str::<serde_json::Value>(line).unwrap()["cell"];
            assert_eq!(cell["loader"], loader, "{line}");
        }
    }

    // The run's own policy step (no --step-ms): measured once, its model phase taken by the
    // second reader's tune (it was measured twice); --budget ends each after one configuration.
    let own = dir.path().join("own-step");
    let tune = [
        &["tune"][..],
        &run,
        &["--both-readers", "--cpus", "1", "--budget", "1s"],
        &lengths,
        &["--out", own.to_str().unwrap()],
    ]
    .concat();
    let (ok, _, stderr) = feedbench_with(Some(&package), &tune);
    assert!(ok, "{stderr}");
    let model_phase = |loader: &str| {
        let results = std::fs::read_to_string(own.join(loader).join("results.jsonl")).unwrap();
        let first = results.lines().next().expect("a measured configuration").to_string();
        serde_json::from_str::<serde_json::Value>(&first).unwrap()["model"].clone()
    };
    let (lerobots, feedbenchs) =
        (model_phase("lerobot-train"), model_phase("feedbench-lerobot-train"));
    assert!(lerobots["parameters"].as_u64().is_some_and(|n| n > 0), "{lerobots}");
    assert_eq!(lerobots, feedbenchs, "the second reader measured the same step again");

    // What the run built: feedbench's reader, with the arguments LeRobot's factory gives it.
    let load = [&["load"][..], &run, &reader, &["--batches", "2", "--json"]].concat();
    let (ok, stdout, stderr) = feedbench_with(Some(&package), &load);
    assert!(ok, "{stderr}");
    let phase: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let dataset = &phase["lerobot"]["lerobot_train"]["dataset"];
    assert_eq!(dataset["collated_batches"], true, "{dataset}");
    assert_eq!(dataset["return_uint8"], true, "{dataset}");

    // Without feedbench's package in that Python, or without the run, refused by name.
    let (ok, _, stderr) = feedbench_with(None, &load);
    assert!(!ok && stderr.contains("feedbench's reader is not installed for"), "{stderr}");
    let (ok, _, stderr) = feedbench_with(None, &["load", "/nowhere", "--loader", reader[1]]);
    assert!(!ok && stderr.contains("add --lerobot-train"), "{stderr}");
}

#[test]
fn feedbench_reader_takes_epochs_back_to_back_where_lerobots_stalls_at_each_start() {
    let Some(python) = lerobot_python() else { return };
    let _alone = common::timing_alone();
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    // 3 episodes of 24 frames, less 7 dropped from each: 51 samples, 7 batches of 8 an epoch;
    // 30 steps span 4 epochs. A step of 300 ms that two workers keep fed, with room for a
    // machine that runs other tests beside this one.
    let data = dir.path().join("pusht");
    common::synth_pusht(&data, 3, 24, &[]);
    let text = format!(
        "--dataset.repo_id=local/pusht --dataset.root={} --policy.type=diffusion \
         --policy.device=cpu --policy.push_to_hub=false \
         --policy.pretrained_backbone_weights=null --policy.down_dims=[32,64,128] \
         --wandb.enable=false --batch_size=8 --num_workers=2",
        data.display()
    );
    let waits = |loader: &str| {
        let args = [
            "train",
            "--lerobot-train",
            &text,
            "--python",
            python.to_str().unwrap(),
            "--loader",
            loader,
            "--model",
            "synthetic:300ms",
            "--steps",
            "30",
            "--warmup",
            "2",
            "--json",
        ];
        let (ok, stdout, stderr) = feedbench_with(Some(&package), &args);
        assert!(ok, "{stderr}");
        let phase: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let positions: Vec<u64> = phase["per_step"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["epoch_position"].as_u64().unwrap())
            .collect();
        assert_eq!(
            positions.iter().filter(|&&p| p == 0).count(),
            4,
            "4 epoch starts: {positions:?}"
        );
        let ms = |key: &str| phase[key].as_f64().unwrap_or_else(|| panic!("{key}: {phase}"));
        (ms("epoch_start_wait_ms"), ms("steady_wait_ms"))
    };
    let (start, steady) = waits("lerobot-train");
    assert!(start > 3.0 * steady.max(1.0), "LeRobot's reader stalls: {start} ms against {steady}");
    let (start, steady) = waits("feedbench-lerobot-train");
    assert!(
        start <= (1.5 * steady).max(steady + 3.0),
        "feedbench's reader does not: {start} ms against {steady}"
    );
}
