//! Faults around feedbench's own processes, threads and disks: a synth stopped by a signal
//! leaves nothing; a second synth of one dataset is refused while the first runs, and what a
//! killed one left is cleared by the next; tasks asking for one cached dataset at once
//! generate it once; a LeRobot driver that hangs is stopped and one that dies is reported; a
//! loader thread that panics ends the stream with its message; a removed working directory is
//! said before libtorch's oneMKL aborts on it; a sweep whose set-up fails leaves no output
//! directory; a tune stopped by SIGTERM leaves no driver or worker behind. A disk that fills:
//! faults_disk.rs.

use crate::common;

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use feedbench::dataset::files::{LockHeld, WriterLock};
use feedbench::dataset::write::synth::Synthesis;
use feedbench::dataset::write::{
    cached_synth, write_tabular, Preset, PresetOverrides, TabularSpec,
};
use feedbench::dataset::{CodebaseVersion, Dataset, DatasetError, WindowSpec};
use feedbench::loader::config::LoaderConfig;
use feedbench::loader::pipeline::{Loader, LoaderError};
use feedbench::timing::{NoOne, Progress};

/// Starts `feedbench args`, its stderr piped.
pub(crate) fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The names in `dir`, sorted.
pub(crate) fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Waits (up to a minute) until `dir` holds a name starting with `prefix`.
fn wait_for_name(dir: &Path, prefix: &str, child: &mut Child) {
    let started = Instant::now();
    while !names(dir).iter().any(|n| n.starts_with(prefix)) {
        assert!(child.try_wait().unwrap().is_none(), "it ended before {prefix}* appeared");
        assert!(started.elapsed() < Duration::from_secs(60), "no {prefix}* in a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `synth` of a PushT-shaped dataset of `episodes` episodes at `out`, long enough to be
/// caught in the middle (40 take about 10 s on two idle cores).
fn long_synth(out: &Path, episodes: &str) -> Child {
    let out = out.to_str().unwrap();
    let pusht = ["synth", "--preset", "pusht", "--frames-per-episode", "200"];
    spawn(&[&pusht[..], &["--episodes", episodes, "--out", out]].concat())
}

/// Sends `signal` to `child`.
fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: kill signals the child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
}

#[test]
fn a_synth_stopped_by_sigint_removes_what_it_wrote_and_exits_130() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let mut child = long_synth(&out, "40");
    wait_for_name(dir.path(), ".ds.partial-", &mut child);
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, libc::SIGINT);
    let output = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "128 + SIGINT: {err}");
    assert!(err.contains("stopped before it was complete; nothing was written"), "{err}");
    assert_eq!(names(dir.path()), Vec::<String>::new(), "no dataset, partial copy or lock left");
}

#[test]
fn a_second_synth_of_one_dataset_is_refused_and_what_a_killed_one_left_is_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ds");
    let out_s = out.to_str().unwrap();
    // Far longer than the second needs to start, even on busy cores: it is killed.
    let mut first = long_synth(&out, "2000");
    wait_for_name(dir.path(), ".ds.partial-", &mut first);
    let short = ["synth", "--preset", "pusht", "--episodes", "1", "--frames-per-episode", "10"];
    let (ok, _, err) = common::feedbench(&[&short[..], &["--out", out_s]].concat());
    assert!(!ok, "a second writer of {out_s} is refused");
    let holder = format!("another feedbench (pid {}) is writing it", first.id());
    assert!(err.contains(&holder) && err.contains(out_s), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");

    // Killed, the first leaves its partial copy and its lock; the next synth clears them.
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(names(dir.path()).iter().any(|n| n.starts_with(".ds.partial-")));
    let (ok, _, err) = common::feedbench(&[&short[..], &["--out", out_s]].concat());
    assert!(ok, "{err}");
    assert_eq!(names(dir.path()), ["ds"], "the dataset alone");
    assert!(Dataset::open(&out).is_ok());
}

/// PushT, two episodes of 30 frames: a dataset generated in a moment.
fn two_short_episodes() -> Preset {
    Preset::load("pusht").unwrap().with(&PresetOverrides {
        episodes: Some(2),
        frames_per_episode: Some(30),
        ..Default::default()
    })
}

#[test]
fn tasks_asking_for_one_cached_dataset_at_once_generate_it_once() {
    let cache = tempfile::tempdir().unwrap();
    let preset = two_short_episodes();
    let said = Arc::new(Mutex::new(Vec::<String>::new()));
    let roots: Vec<PathBuf> = std::thread::scope(|scope| {
        let tasks: Vec<_> = (0..3)
            .map(|_| {
                let (preset, said, cache) = (&preset, said.clone(), cache.path());
                scope.spawn(move || {
                    let mut watch = Progress(|heard: Synthesis<'_>| {
                        if let Synthesis::Said(line) = heard {
                            said.lock().unwrap().push(line.to_string())
                        }
                    });
                    cached_synth(preset, CodebaseVersion::V30, cache, &mut watch).unwrap()
                })
            })
            .collect();
        tasks.into_iter().map(|t| t.join().unwrap()).collect()
    });
    assert!(roots.windows(2).all(|w| w[0] == w[1]), "one dataset: {roots:?}");
    let said = said.lock().unwrap();
    let generated = said.iter().filter(|l| l.starts_with("generating")).count();
    assert_eq!(generated, 1, "generated once, used by the others: {said:?}");
    assert!(Dataset::open(&roots[0]).is_ok());
    let name = roots[0].file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(names(cache.path()), [name], "no lock or partial copy left");
}

#[test]
fn a_cached_dataset_whose_watcher_breaks_is_not_generated_and_leaves_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let preset = two_short_episodes();
    // Stopped at its first line, before a frame is encoded.
    let mut heard = Vec::new();
    let mut stop = |synthesis: Synthesis<'_>| {
        heard.push(format!("{synthesis:?}"));
        ControlFlow::Break(())
    };
    let stopped = cached_synth(&preset, CodebaseVersion::V30, cache.path(), &mut stop);
    assert!(matches!(stopped, Err(DatasetError::Stopped { .. })), "{stopped:?}");
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(heard[0].contains("generating"), "{heard:?}");
    assert!(names(cache.path()).is_empty(), "nothing left: {:?}", names(cache.path()));
    // Stopped after some frames: what was written is removed too.
    let mut frames = 0;
    let mut stop = |synthesis: Synthesis<'_>| match synthesis {
        Synthesis::Encoded { done, total } => {
            assert!(done <= total && total == 60, "{done} of {total}");
            frames = done;
            if done >= 10 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
        Synthesis::Said(_) => ControlFlow::Continue(()),
    };
    let stopped = cached_synth(&preset, CodebaseVersion::V30, cache.path(), &mut stop);
    assert!(matches!(stopped, Err(DatasetError::Stopped { .. })), "{stopped:?}");
    assert_eq!(frames, 10);
    assert!(names(cache.path()).is_empty(), "nothing left: {:?}", names(cache.path()));
}

#[test]
fn a_writer_whose_watcher_will_not_wait_is_refused_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("ds");
    let _held = WriterLock::generating(&target, &mut NoOne).unwrap();
    // The lock is the process's own (flock is per open file): a second open of it is held.
    let mut heard = Vec::new();
    let refused = WriterLock::generating(&target, &mut |held: LockHeld| {
        heard.push(held);
        ControlFlow::Break(())
    });
    let error = refused.expect_err("held").to_string();
    assert!(error.contains("another feedbench") && error.contains("ds"), "{error}");
    assert_eq!(heard.len(), 1);
    let refused = WriterLock::beside(&target);
    assert!(refused.is_ok(), "another lock than the generating one");
}

/// A generated v3.0 dataset with a camera, for LeRobot's loader.
pub(crate) fn video_dataset(dir: &Path) -> PathBuf {
    let root = dir.join("pusht");
    common::synth_pusht(&root, 1, 10, &[]);
    root
}

/// `load --loader lerobot` on `root` with `python` as the driver's interpreter, its silence
/// bound `timeout_s`: (success, stderr, seconds taken).
fn load_with_driver(root: &Path, python: &Path, timeout_s: &str) -> (bool, String, f64) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(["load", root.to_str().unwrap(), "--loader", "lerobot", "--batches", "1"])
        .arg("--python")
        .arg(python)
        .env("FEEDBENCH_DRIVER_TIMEOUT_S", timeout_s)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.success(), err, started.elapsed().as_secs_f64())
}

/// An executable shell script `name` in `dir` with `body`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_lerobot_driver_that_hangs_is_stopped_and_one_that_dies_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let root = video_dataset(dir.path());
    // A Python that never answers: stopped after the bound, with a clear error.
    let silent = script(dir.path(), "silent-python", "exec sleep 600");
    let (ok, err, seconds) = load_with_driver(&root, &silent, "1");
    assert!(!ok && seconds < 30.0, "stopped in {seconds:.1} s: {err}");
    assert!(err.contains("said nothing for 1 s before it was ready, and was stopped"), "{err}");
    assert!(err.contains("FEEDBENCH_DRIVER_TIMEOUT_S"), "names the bound: {err}");
    // A driver killed once ready: reported as killed, by which signal, promptly.
    let dying = script(dir.path(), "dying-python", "echo '{\"event\": \"ready\"}'\nkill -9 $$");
    let (ok, err, seconds) = load_with_driver(&root, &dying, "600");
    assert!(!ok && seconds < 30.0, "reported in {seconds:.1} s: {err}");
    assert!(err.contains("was killed by signal 9 (SIGKILL) while it loaded"), "{err}");
    // A bound that is no number of seconds is refused naming the variable.
    let (ok, err, _) = load_with_driver(&root, &silent, "soon");
    assert!(!ok && err.contains("$FEEDBENCH_DRIVER_TIMEOUT_S is \"soon\""), "{err}");
}

#[test]
fn a_loader_thread_that_panics_ends_the_stream_with_its_message() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let spec = TabularSpec { episode_lengths: vec![40, 40], ..Default::default() };
    write_tabular(&root, &spec).unwrap();
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    for workers in [0, 1, 2] {
        let config = LoaderConfig { workers, batch_size: 4, ..Default::default() };
        let loader = Loader::new(dataset.clone(), window.clone(), config).unwrap();
        loader.panic_at(3);
        let batches: Vec<_> = loader.epoch(0).collect();
        assert_eq!(batches.len(), 4, "{workers} workers: three batches, then the error");
        assert!(batches[..3].iter().all(Result::is_ok), "{workers} workers");
        let Err(LoaderError::Panicked { thread, message }) = &batches[3] else {
            panic!("{workers} workers: {:?}", batches[3]);
        };
        assert_eq!(message, "a fault injected at batch 3", "{workers} workers");
        let expected = if workers == 0 { "" } else { "feedbench-worker-" };
        assert!(thread.contains(expected), "{workers} workers: {thread}");
    }
}

#[test]
fn a_removed_working_directory_is_said_before_libtorch_loads() {
    let dir = tempfile::tempdir().unwrap();
    let gone = dir.path().join("gone");
    let output = Command::new("sh")
        .arg("-c")
        .arg("mkdir \"$1\" && cd \"$1\" && rmdir \"$1\" && exec \"$0\" \"$2\" --preset small --steps 1")
        .arg(env!("CARGO_BIN_EXE_feedbench"))
        .arg(&gone)
        .arg("model")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{err}");
    assert!(err.contains("the working directory cannot be read"), "{err}");
    assert!(!err.contains("oneMKL"), "{err}");
}

#[test]
fn a_sweep_whose_first_cell_fails_leaves_no_output_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = video_dataset(dir.path());
    let base = format!(
        "[dataset]\npath = \"{}\"\n[model]\nmodel = [\"none\"]\n[run]\nloader_batches = 1\n\
         model_steps = 1\ntrain_steps = 1\nwarmup = 0\n[loader]\nworkers = [0]\nbatch = [2]\n",
        root.display()
    );
    // A Python without LeRobot: the libtorch venv's (torch, no lerobot), else the system's.
    let bare = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let bare = if bare.exists() { bare } else { PathBuf::from("python3") };
    let bare_python =
        format!("loader = [\"lerobot\"]\npython = {:?}\n", bare.display().to_string());
    let cases = [
        // The settings named as the config spells them, not as flags.
        (
            "a batch too large for memory",
            "resolution = [\"20000x20000\"]\n",
            "needs",
            "lower loader.batch, loader.resolution, loader.workers or loader.prefetch",
        ),
        (
            "no LeRobot interpreter",
            "loader = [\"lerobot\"]\npython = \"/no/python\"\n",
            "/no/python",
            "loader.python /no/python: cannot run it",
        ),
        // The driver's own refusal, worded here too (it said "point --python at").
        (
            "a Python without LeRobot",
            bare_python.as_str(),
            "lerobot is not installed in",
            "point loader.python at the environment you train with",
        ),
    ];
    for (case, loader, said, named) in cases {
        let config = dir.path().join("sweep.toml");
        std::fs::write(&config, format!("{base}{loader}")).unwrap();
        let out = dir.path().join("made/for/it");
        let (ok, _, err) = common::feedbench(&[
            "sweep",
            "--config",
            config.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(!ok && err.contains(said), "{case}: {err}");
        assert!(err.contains(named) && !err.contains("--"), "{case}: {err}");
        assert!(!dir.path().join("made").exists(), "{case}: the directories it made are removed");
    }
}

#[test]
fn a_tune_stopped_by_sigterm_leaves_no_driver_or_worker_behind() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pusht");
    common::synth_pusht(&data, 3, 30, &[]);
    let run = format!(
        "--dataset.repo_id=local/p --dataset.root={} --policy.type=diffusion --policy.device=cpu \
         --policy.push_to_hub=false --policy.pretrained_backbone_weights=null \
         --policy.down_dims=[32,64,128] --wandb.enable=false --batch_size=4 --num_workers=2",
        data.display()
    );
    let out = dir.path().join("tune");
    let mut tune = spawn(&[
        "tune",
        "--lerobot-train",
        &run,
        "--python",
        python.to_str().unwrap(),
        "--step-ms",
        "300",
        "--out",
        out.to_str().unwrap(),
    ]);
    // Its driver (in a process group of its own, with its DataLoader's workers) measuring.
    let started = Instant::now();
    let driver = loop {
        assert!(tune.try_wait().unwrap().is_none(), "tune ended before its driver measured");
        assert!(started.elapsed() < Duration::from_secs(120), "no driver in two minutes");
        let kept = common::children(tune.id());
        if let Some(&driver) = kept.first().filter(|&&d| !common::children(d).is_empty()) {
            break driver as libc::pid_t;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    signal(&tune, libc::SIGTERM);
    tune.wait().unwrap();
    // SAFETY: probes (signal 0) the process group the driver leads; nothing is sent.
    let alive = || unsafe { libc::kill(-driver, 0) } == 0;
    let stopped = Instant::now();
    while alive() && stopped.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!alive(), "the driver's group (pid {driver}) outlived feedbench by 10 s");
}
