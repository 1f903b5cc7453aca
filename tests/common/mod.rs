//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod browser;
pub mod servers;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use feedbench::dataset::write::{write_tabular, TabularSpec};
use feedbench::dataset::CodebaseVersion;

/// The real, partially downloaded g1 dataset, or None (with a visible note) where it is absent.
pub fn g1_partial() -> Option<PathBuf> {
    let path = feedbench::testdata::g1_partial_root();
    if path.join("meta/info.json").is_file() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: g1-partial dataset not found at {} (set FEEDBENCH_G1_PARTIAL)",
            path.display()
        );
        None
    }
}

/// Runs the `feedbench` binary: success, stdout, stderr.
pub fn feedbench(args: &[&str]) -> (bool, String, String) {
    outcome(Command::new(env!("CARGO_BIN_EXE_feedbench")).args(args))
}

/// Runs `command` to its end: success, stdout, stderr.
pub fn outcome(command: &mut Command) -> (bool, String, String) {
    let output = command.output().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Generates a PushT-shaped dataset (one 96×96 AV1 camera, v3.0 unless `flags` say otherwise)
/// of `episodes` episodes of `frames` frames at `out` with `feedbench synth`, given `flags`
/// too; a synth that fails fails the test with its error.
pub fn synth_pusht(out: &Path, episodes: usize, frames: usize, flags: &[&str]) {
    let (episodes, frames) = (episodes.to_string(), frames.to_string());
    let pusht = ["synth", "--preset", "pusht", "--episodes", &episodes];
    let size = ["--frames-per-episode", &frames, "--out", out.to_str().unwrap()];
    let (ok, _, err) = feedbench(&[&pusht[..], &size, flags].concat());
    assert!(ok, "synth of {}: {err}", out.display());
}

/// Runs `feedbench args`, killing it (SIGKILL) after `limit` unless it ended before:
/// (ended in time, success, stderr).
pub fn feedbench_within(args: &[&str], limit: Duration) -> (bool, bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            return (true, status.success(), stderr);
        }
        if start.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            return (false, false, String::new());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether the `ffmpeg` CLI runs; where it does not, says that comparisons with it are skipped.
pub fn have_ffmpeg() -> bool {
    let ok = Command::new("ffmpeg").arg("-version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("note: no ffmpeg CLI on PATH, comparisons with its frames skipped");
    }
    ok
}

/// Every frame of `path` decoded by the `ffmpeg` CLI, packed RGB24, `frame_bytes` each.
pub fn ffmpeg_rgb24_frames(path: &Path, frame_bytes: usize) -> Vec<Vec<u8>> {
    let output = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-vsync", "0", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg runs");
    assert!(output.status.success(), "ffmpeg: {}", String::from_utf8_lossy(&output.stderr));
    output.stdout.chunks(frame_bytes).map(<[u8]>::to_vec).collect()
}

/// Every file under `root` with its bytes, by path relative to `root`.
pub fn file_tree(root: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut files = std::collections::BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.insert(path.strip_prefix(root).unwrap().to_path_buf(), bytes);
            }
        }
    }
    files
}

/// The Python of the LeRobot venv: `$FEEDBENCH_LEROBOT_PYTHON`, else `.venv-lerobot` here.
pub fn lerobot_python() -> Option<PathBuf> {
    let path = std::env::var_os("FEEDBENCH_LEROBOT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-lerobot/bin/python"));
    if path.exists() {
        Some(path)
    } else {
        eprintln!("SKIPPED: no LeRobot venv at {} (make test creates it)", path.display());
        None
    }
}

/// The Python of the venv with LeRobot's main (the next version, from ../shared/lerobot/):
/// `$FEEDBENCH_LEROBOT_MAIN_PYTHON`, else `.venv-lerobot-main` here.
pub fn lerobot_main_python() -> Option<PathBuf> {
    let path =
        std::env::var_os("FEEDBENCH_LEROBOT_MAIN_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-lerobot-main/bin/python")
        });
    if path.exists() {
        Some(path)
    } else {
        eprintln!("SKIPPED: no LeRobot main venv at {} (make test creates it)", path.display());
        None
    }
}

/// A v2.1 dataset of 3 short episodes with an 8×8 PNG image feature, at `dir/ds`.
pub fn png_dataset(dir: &Path) -> PathBuf {
    let root = dir.join("ds");
    let spec = TabularSpec {
        version: CodebaseVersion::V21,
        episode_lengths: vec![6, 7, 5],
        image_size: Some((8, 8)),
        ..TabularSpec::default()
    };
    write_tabular(&root, &spec).unwrap();
    root
}

/// `feedbench sample` of `index` from `root` into `out`: (success, stdout, stderr).
pub fn sample_into(root: &Path, index: &str, out: &Path) -> (bool, String, String) {
    feedbench(&["sample", root.to_str().unwrap(), "--index", index, "--out", out.to_str().unwrap()])
}

/// An error message, not a crash: no panic, no abort.
pub fn clear_error(ok: bool, stderr: &str) {
    assert!(!ok, "expected a refusal");
    assert!(!stderr.contains("panicked") && !stderr.contains("memory allocation"), "{stderr}");
}

/// Every file under `dir`, recursively.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    std::fs::read_dir(dir).unwrap().flat_map(|e| walk(&e.unwrap().path())).collect()
}

/// The child processes of process `pid` (every thread's), from /proc; none once it is gone.
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| text.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<_>>())
        .collect()
}

/// Held by the tests whose assertions are timings (a wait against another, a step's p95): they
/// run one at a time, so that two of them (each with LeRobot drivers and DataLoader workers on
/// a 2-core machine) do not measure each other. Other tests still run beside them.
pub fn timing_alone() -> std::sync::MutexGuard<'static, ()> {
    static TIMING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TIMING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
