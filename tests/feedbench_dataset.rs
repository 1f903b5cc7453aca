//! `feedbench.lerobot.FeedbenchDataset` (the native reader through PyO3, `feedbench._native`)
//! against LeRobot's `LeRobotDataset` in the LeRobot venv (tests/feedbench_dataset/check.py):
//! items key for key and bit for bit, seeded lerobot-train DataLoader batches under spawn and
//! fork, and its refusals. The module is the one `cargo build -p feedbench-python` makes
//! (`make test` builds it first). Skipped, with a note, where no LeRobot venv is found.

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
        "{} is missing: build the Python module first (cargo build -p feedbench-python; make \
         test does)",
        native.display()
    );
    let package = dir.join("python/feedbench");
    std::fs::create_dir_all(&package).unwrap();
    for entry in std::fs::read_dir(manifest.join("python/feedbench")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "py") {
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
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/feedbench_dataset/check.py");
    let output = Command::new(python)
        .arg(script)
        .args(args)
        .env("PYTHONPATH", package)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.success(), text(output.stdout), text(output.stderr))
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
    let written = dir.path().join("lerobot-written");
    assert_checks(&python, &package, &["write-lerobot", written.to_str().unwrap()], 1);
    assert_checks(&python, &package, &["items", written.to_str().unwrap(), "300"], 3);
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
}

#[test]
fn seeded_lerobot_train_batches_equal_lerobots_under_spawn_fork_and_no_workers() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let generated = crate::lerobot::dataset(dir.path(), "two-cameras", &[]);
    assert_checks(&python, &package, &["batches", generated.to_str().unwrap()], 3);
}

#[test]
fn what_it_cannot_read_is_refused_by_name() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = python_package(dir.path());
    let generated = crate::lerobot::dataset(dir.path(), "two-cameras", &[]);
    assert_checks(&python, &package, &["refusals", generated.to_str().unwrap()], 4);
}
