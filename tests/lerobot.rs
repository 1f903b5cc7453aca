//! The native loader against LeRobot itself (`LeRobotDataset` + PyTorch's `DataLoader`, run by
//! `--loader lerobot`'s driver in the LeRobot venv that `make test` creates): the same indices
//! give the same batches (parquet values bit-exact, masks equal, frames equal as uint8) on
//! generated v3.0 datasets with two AV1 or H.264 cameras or images in parquet; the
//! episode-aware sampler visits the same frames, and drops what LeRobot's drops (the backend's
//! figures and errors: lerobot_backend.rs). Skipped, with a note, where no LeRobot venv is found.

use crate::common;

use common::lerobot_python;

use std::path::{Path, PathBuf};

use serde_json::Value;

use feedbench::dataset::{EpisodeList, WindowChoice};
use feedbench::loader::batch::{Batch, BatchData, ImageFormat};
use feedbench::loader::config::LoaderConfig;
use feedbench::loader::lerobot::{LerobotBridge, LerobotLoader, LerobotOptions};
use feedbench::loader::sampler::SamplerKind;
use feedbench::loader::spec::LoaderSpec;
use ndarray::{ArrayD, IxDyn};
use ndarray_npy::{read_npy, ReadableElement};

/// Whether the LeRobot of `python` returns uint8 frames (`return_uint8`, from 0.6 on).
pub(crate) fn has_uint8_frames(python: &Path) -> bool {
    let output = std::process::Command::new(python)
        .args(["-c", "import importlib.metadata as m; print(m.version('lerobot'))"])
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let minor: u32 = version.split('.').nth(1).and_then(|m| m.parse().ok()).unwrap_or(0);
    if minor < 6 {
        eprintln!("note: LeRobot {version} returns float32 frames only: compared as float32");
    }
    minor >= 6
}

/// A generated two-camera dataset (`tests/fixtures/lerobot/two-cameras.toml`) under `dir`.
pub(crate) fn dataset(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let preset =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lerobot/two-cameras.toml");
    let root = dir.join(name);
    let mut args =
        vec!["synth", "--preset", preset.to_str().unwrap(), "--out", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (ok, _, err) = common::feedbench(&args);
    assert!(ok, "synth {name}: {err}");
    root
}

pub(crate) fn spec(
    root: &Path,
    sampler: SamplerKind,
    images: ImageFormat,
    episodes: Option<&str>,
) -> LoaderSpec {
    LoaderSpec {
        dataset: root.to_path_buf(),
        episodes: episodes.map(|e| e.parse::<EpisodeList>().unwrap()),
        window: WindowChoice::Diffusion,
        frames: Default::default(),
        config: LoaderConfig {
            workers: 0,
            batch_size: 8,
            sampler,
            seed: 3,
            images,
            ..LoaderConfig::default()
        },
        replay: None,
    }
}

/// The first `count` batches of the native loader of `spec`, with their indices.
fn native_batches(spec: &LoaderSpec, count: usize) -> (Vec<Vec<usize>>, Vec<Batch>) {
    let loader = spec.build().unwrap();
    let indices: Vec<Vec<usize>> = loader.plan(0).into_iter().take(count).collect();
    let batches = loader.epoch(0).take(count).map(|b| b.unwrap().into_batch()).collect();
    (indices, batches)
}

/// The native loader's batches and LeRobot's for the same index lists, compared key by key:
/// four shuffled batches (frames near episode ends: padded actions) and the first batch in
/// order (the first frames: padded observations).
fn assert_same_batches(python: &Path, root: &Path, images: ImageFormat, out: &Path) {
    let (mut index_batches, mut batches) =
        native_batches(&spec(root, SamplerKind::Shuffled, images, None), 4);
    let (first, first_batch) =
        native_batches(&spec(root, SamplerKind::Sequential, images, None), 1);
    index_batches.extend(first);
    batches.extend(first_batch);
    let lerobot_spec = spec(root, SamplerKind::Sequential, images, None);
    let lerobot = LerobotLoader::new(
        &lerobot_spec,
        LerobotOptions::new(Some(python), None),
        &LerobotBridge::new(),
    )
    .unwrap();
    lerobot.save_batches(&index_batches, out).unwrap();
    assert!(index_batches.iter().flatten().any(|&i| i == 0));
    for (number, batch) in batches.iter().enumerate() {
        let dir = out.join(format!("batch-{number}"));
        let indices: Vec<i64> = index_batches[number].iter().map(|&i| i as i64).collect();
        let stored: ArrayD<i64> = read_npy(dir.join("index.npy")).unwrap();
        assert_eq!(
            stored.iter().copied().collect::<Vec<_>>(),
            indices,
            "LeRobot loaded other indices"
        );
        for (key, tensor) in &batch.tensors {
            let path = dir.join(format!("{key}.npy"));
            assert!(path.is_file(), "LeRobot's batch has no {key}");
            let what = format!("{} batch {number} {key}", root.display());
            match &tensor.data {
                BatchData::F32(values) => compare(&what, &tensor.shape, values, &path),
                BatchData::U8(values) => compare(&what, &tensor.shape, values, &path),
                BatchData::F64(values) => compare(&what, &tensor.shape, values, &path),
                BatchData::I64(values) => compare(&what, &tensor.shape, values, &path),
                BatchData::I32(values) => compare(&what, &tensor.shape, values, &path),
                BatchData::Bool(values) => compare(&what, &tensor.shape, values, &path),
            }
        }
    }
}

/// The native values of one key against LeRobot's `.npy` at `path`, read as the same type.
fn compare<T: ReadableElement + PartialEq + std::fmt::Debug + Copy>(
    what: &str,
    shape: &[usize],
    native: &[T],
    path: &Path,
) {
    let lerobot: ArrayD<T> =
        read_npy(path).unwrap_or_else(|e| panic!("{what}: LeRobot's .npy: {e}"));
    assert_eq!(lerobot.shape(), shape, "{what}: shape");
    let flat: Vec<T> =
        lerobot.into_shape_with_order(IxDyn(&[native.len()])).unwrap().iter().copied().collect();
    let differing = native.iter().zip(&flat).filter(|(a, b)| a != b).count();
    assert!(
        differing == 0,
        "{what}: {differing} of {} values differ (first: {:?} vs {:?})",
        native.len(),
        native.iter().zip(&flat).find(|(a, b)| a != b).map(|(a, _)| *a),
        native.iter().zip(&flat).find(|(a, b)| a != b).map(|(_, b)| *b)
    );
}

#[test]
fn the_native_batches_equal_lerobots_for_av1_h264_and_images_in_parquet() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let av1 = dataset(dir.path(), "av1", &[]);
    let h264 = dataset(dir.path(), "h264", &["--codec", "h264"]);
    let png = dataset(dir.path(), "png", &["--storage", "png"]);
    // Video frames as uint8 (LeRobot's return_uint8) and as float32 in [0, 1]; images in
    // parquet as float32 (LeRobot returns them so whatever return_uint8 says).
    let uint8 = has_uint8_frames(&python);
    for (root, images) in [
        (&av1, ImageFormat::U8),
        (&h264, ImageFormat::U8),
        (&av1, ImageFormat::F32),
        (&png, ImageFormat::F32),
    ] {
        let images = if uint8 { images } else { ImageFormat::F32 };
        let name = root.file_name().unwrap().to_string_lossy();
        let out = dir.path().join(format!("{name}-{images}"));
        assert_same_batches(&python, root, images, &out);
    }
}

#[test]
fn lerobots_episode_aware_sampler_visits_the_native_candidates() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path(), "h264", &["--codec", "h264"]);
    // All episodes, and a subset (LeRobot maps their absolute indices to its rows).
    for episodes in [None, Some("1,3")] {
        let spec = spec(&root, SamplerKind::EpisodeAware, ImageFormat::F32, episodes);
        let mut native: Vec<usize> = spec.build().unwrap().plan(0).concat();
        native.sort_unstable();
        let lerobot = LerobotLoader::new(
            &spec,
            LerobotOptions::new(Some(&python), None),
            &LerobotBridge::new(),
        )
        .unwrap();
        let lerobot = lerobot.episode_aware_indices(false).unwrap();
        assert_eq!(native, lerobot, "episodes {episodes:?}");
        // The diffusion window drops the last 7 frames of each episode.
        assert!(native.len() < 160 && !native.is_empty());
    }
}

/// `drop_n_last_frames` (the knob, and the window's own where it is not set) against LeRobot's
/// `EpisodeAwareSampler` given the same value: unshuffled, the same indices in the same order;
/// shuffled, the same indices; and per episode, its first `len − n` frames (none where the
/// episode is not longer than `n`).
#[test]
fn drop_n_last_frames_drops_what_lerobots_sampler_drops() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path(), "h264", &["--codec", "h264"]);
    for drop in [None, Some(0), Some(3), Some(40)] {
        for episodes in [None, Some("1,3")] {
            let mut spec = spec(&root, SamplerKind::EpisodeAware, ImageFormat::F32, episodes);
            spec.config.drop_n_last_frames = drop;
            let (dataset, window) = spec.open().unwrap();
            let n = spec.config.drop_n_last_frames(&window);
            assert_eq!(n, drop.unwrap_or(7), "the diffusion window's own is 7");
            let candidates = dataset.sample_indices(n);
            let mut expected = Vec::new();
            for e in dataset.episodes() {
                expected.extend(e.from..e.from + (e.to - e.from).saturating_sub(n));
            }
            assert_eq!(candidates, expected, "drop {drop:?}, episodes {episodes:?}");
            let options = LerobotOptions::new(Some(&python), None);
            let lerobot = LerobotLoader::new(&spec, options, &LerobotBridge::new()).unwrap();
            let what = format!("drop {drop:?}, episodes {episodes:?}");
            if candidates.is_empty() {
                // Every selected episode dropped whole: both refuse rather than yield nothing.
                let error = lerobot.episode_aware_indices(false).unwrap_err().to_string();
                assert!(error.contains("No valid frames remain"), "{what}: {error}");
                assert!(spec.build().unwrap().plan(0).is_empty(), "{what}");
                continue;
            }
            assert_eq!(lerobot.episode_aware_indices(false).unwrap(), candidates, "{what}");
            let mut shuffled = lerobot.episode_aware_indices(true).unwrap();
            let mut native = spec.build().unwrap().plan(0).concat();
            if candidates.len() > 1 {
                assert_ne!(shuffled, candidates, "LeRobot shuffled, {what}");
                assert_ne!(native, candidates, "the native loader shuffled, {what}");
            }
            shuffled.sort_unstable();
            native.sort_unstable();
            assert_eq!(shuffled, candidates, "{what}");
            assert_eq!(native, candidates, "{what}");
        }
    }
}

/// The `order` a loader phase reports: each measured batch's distinct episodes and whether
/// the batches came as the sampler yielded them, by `load --json` (LeRobot's loader with
/// `python`).
fn order(root: &Path, sampler: &str, python: Option<&Path>) -> serde_json::Value {
    let root = root.to_str().unwrap();
    let mut args = vec!["load", root, "--batch", "16", "--batches", "6", "--warmup", "2"];
    args.extend(["--sampler", sampler]);
    let python = python.map(|p| p.to_str().unwrap().to_string());
    if let Some(python) = &python {
        args.extend(["--loader", "lerobot", "--python", python]);
    }
    let (code, phase, err) = json_of(&args, &[]);
    assert_eq!(code, 0, "{args:?}: {err}");
    phase["order"].clone()
}

#[test]
fn both_loaders_say_the_episodes_per_batch_and_keep_their_samplers_order() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    common::synth_pusht(&root, 8, 60, &[]);
    // In order, a batch of 16 spans one episode of 60 frames, or two where it crosses into the
    // next: 1–2 episodes; shuffled over 8 episodes, most batches mix many.
    let sequential = order(&root, "sequential", None);
    assert_eq!(sequential["episodes_per_batch_min"], 1, "{sequential}");
    assert_eq!(sequential["episodes_per_batch_max"], 2, "{sequential}");
    let shuffled = order(&root, "episode-aware", None);
    assert!(shuffled["episodes_per_batch_mean"].as_f64().unwrap() > 4.0, "{shuffled}");
    for figures in [&sequential, &shuffled] {
        let kept = &figures["sampler_order"];
        assert_eq!(
            (kept["batches_checked"].as_u64(), &kept["first_out_of_order"]),
            (Some(8), &Value::Null)
        );
    }
    let Some(python) = lerobot_python() else { return };
    // The same sampler (PyTorch's SequentialSampler in both): the same batches, the same
    // figures; LeRobot's DataLoader, measured, keeps its sampler's order too.
    assert_eq!(order(&root, "sequential", Some(&python)), sequential);
    let theirs = order(&root, "episode-aware", Some(&python));
    assert!(theirs["episodes_per_batch_mean"].as_f64().unwrap() > 4.0, "{theirs}");
    assert_eq!(theirs["sampler_order"], shuffled["sampler_order"], "{theirs}");
}

/// `load --loader lerobot --json` with two workers started by `method`, `env` set: the phase's
/// `startup`.
fn startup(root: &Path, python: &Path, method: &str, env: &[(&str, &str)]) -> Value {
    let (root, python) = (root.to_str().unwrap(), python.to_str().unwrap());
    let args = ["load", root, "--loader", "lerobot", "--python", python, "--workers", "2"];
    let more = ["--batch", "8", "--batches", "4", "--start-method", method];
    let (code, phase, err) = json_of(&[&args[..], &more].concat(), env);
    assert_eq!(code, 0, "{method}: {err}");
    phase["startup"].clone()
}

/// `feedbench ARGS --json` with `env` set: exit code, its JSON (null where none), stderr.
fn json_of(args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(args).arg("--json").envs(env.iter().copied());
    let output = command.output().unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), json, String::from_utf8_lossy(&output.stderr).into())
}

#[test]
fn lerobots_start_is_taken_apart_and_a_large_dataset_object_is_named_with_its_cost() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    common::synth_pusht(&root, 3, 40, &[]);
    // Forked workers are sent nothing; spawned and forkserver ones the pickled dataset, alike.
    let forked = startup(&root, &python, "fork", &[]);
    assert_eq!((&forked["start_method"], &forked["pickled_bytes"]), (&"fork".into(), &Value::Null));
    let spawned = startup(&root, &python, "spawn", &[]);
    let served = startup(&root, &python, "forkserver", &[]);
    assert_eq!(spawned["pickled_bytes"], served["pickled_bytes"], "{spawned} {served}");
    for figures in [&forked, &spawned, &served] {
        let workers = figures["workers"].as_array().unwrap();
        assert_eq!(workers.len(), 2, "{figures}");
        for worker in workers {
            let (started, first) = (worker["started_s"].as_f64(), worker["first_batch_s"].as_f64());
            assert!(
                matches!((started, first), (Some(s), Some(f)) if 0.0 < s && s < f),
                "{figures}"
            );
        }
    }
    // A dataset that keeps 256 MB of its own: each spawned worker is sent it, named, and starts
    // later for it (the bytes pickled, piped and unpickled twice over).
    let site = crate::ranks::site(
        dir.path(),
        "import os\n\
         if os.environ.get('FEEDBENCH_TEST_BALLAST'):\n\
         \x20   from lerobot.datasets.lerobot_dataset import LeRobotDataset\n\
         \x20   original = LeRobotDataset.__init__\n\
         \x20   def heavy(self, *args, **kwargs):\n\
         \x20       original(self, *args, **kwargs)\n\
         \x20       self.ballast = bytes(256 << 20)\n\
         \x20   LeRobotDataset.__init__ = heavy\n",
    );
    let env = [("PYTHONPATH", site.to_str().unwrap()), ("FEEDBENCH_TEST_BALLAST", "1")];
    let heavy = startup(&root, &python, "spawn", &env);
    assert_eq!(heavy["largest_part"]["name"], "ballast", "{heavy}");
    assert!(heavy["pickled_bytes"].as_u64().unwrap() > 256 << 20, "{heavy}");
    let latest = |figures: &Value| {
        let workers = figures["workers"].as_array().unwrap().iter();
        workers.filter_map(|w| w["started_s"].as_f64()).fold(0.0, f64::max)
    };
    assert!(latest(&heavy) > latest(&spawned), "{heavy} against {spawned}");
}

/// `compare --readers feedbench,lerobot --on "ROOT …" --json` with `env` set: exit code, the
/// comparison (or the error).
fn readers(root: &Path, python: &Path, env: &[(&str, &str)]) -> (i32, Value, String) {
    readers_with(root, python, env, &[], &[])
}

/// [`readers`] with `knobs` added to the `--on` line and `flags` to the command.
fn readers_with(
    root: &Path,
    python: &Path,
    env: &[(&str, &str)],
    knobs: &[&str],
    flags: &[&str],
) -> (i32, Value, String) {
    let on = format!(
        "{} --batch 8 --workers 1 --python {} {}",
        root.display(),
        python.display(),
        knobs.join(" ")
    );
    let args = ["compare", "--readers", "feedbench,lerobot", "--on", &on];
    // The counts, each where `flags` do not give it.
    let counts = [["--repeats", "2"], ["--batches", "4"], ["--warmup", "1"]];
    let counts: Vec<&str> =
        counts.iter().filter(|[flag, _]| !flags.contains(flag)).flatten().copied().collect();
    json_of(&[&args[..], &counts, flags].concat(), env)
}

#[test]
fn a_kept_order_is_read_again_and_refused_for_another_seed_dataset_or_length() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    common::synth_pusht(&root, 3, 40, &[]);
    let file = dir.path().join("order.json");
    let order = ["--order", file.to_str().unwrap()];
    let (code, first, err) = readers_with(&root, &python, &[], &[], &order);
    assert_eq!(code, 0, "{err}");
    let kept = std::fs::read(&file).unwrap();
    let written: Value = serde_json::from_slice(&kept).unwrap();
    assert_eq!(written["order"], first["order"], "the order compared is the order kept");
    assert_eq!(written["workload"]["parameters"]["seed"], "0", "{written}");
    // Read again: the same batches, recorded by the same sampler.
    let (code, again, err) = readers_with(&root, &python, &[], &[], &order);
    assert_eq!(code, 0, "{err}");
    assert_eq!(again["order"], first["order"]);
    // Another seed, more batches than kept, another dataset, a file that is no order: each
    // refused by name, the file left as it was.
    let (code, _, err) = readers_with(&root, &python, &[], &["--seed", "1"], &order);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("recorded for other work (seed 0 then → 1 now)"), "{err}");
    let more = [&order[..], &["--batches", "9"]].concat();
    let (_, _, err) = readers_with(&root, &python, &[], &[], &more);
    assert!(err.contains("holds 5 batches; the runs need 10"), "{err}");
    let other = dir.path().join("other");
    common::synth_pusht(&other, 4, 40, &[]);
    let (_, _, err) = readers_with(&other, &python, &[], &[], &order);
    assert!(err.contains("recorded for other work (dataset.bytes"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), kept, "refusals leave the kept order");
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{}").unwrap();
    let (_, _, err) = readers_with(&root, &python, &[], &[], &["--order", junk.to_str().unwrap()]);
    assert!(err.contains("junk.json: not an order `compare --readers` wrote"), "{err}");
}

#[test]
fn both_readers_read_one_recorded_order_and_a_reader_whose_items_differ_is_named() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    common::synth_pusht(&root, 3, 40, &[]);
    let (code, comparison, err) = readers(&root, &python, &[]);
    assert_eq!(code, 0, "{err}");
    // Recorded once by LeRobot's own sampler, warm-up and measured batches: 5 of 8.
    let order = &comparison["order"];
    assert!(order["recorded_by"].as_str().unwrap().contains("EpisodeAwareSampler"), "{order}");
    let batches = order["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 5);
    assert!(batches.iter().all(|b| b.as_array().unwrap().len() == 8), "{order}");
    assert_eq!(comparison["first_difference"], Value::Null, "every item equal: {comparison}");
    assert_eq!(comparison["batches_checked"], 5);
    let figures = comparison["readers"].as_array().unwrap();
    let names: Vec<&str> = figures.iter().map(|r| r["reader"].as_str().unwrap()).collect();
    assert_eq!(names, ["feedbench", "lerobot"]);
    for reader in figures {
        assert_eq!(reader["samples_per_s"].as_array().unwrap().len(), 2, "{reader}");
        let median = &reader["samples_per_s_median"];
        let (low, high) = (median["low"].as_f64().unwrap(), median["high"].as_f64().unwrap());
        assert!(low > 0.0 && low <= high, "{reader}");
    }
    assert!(figures[1]["samples_per_s_change"]["percent"].is_f64(), "against the first");
    // The same batches: the same episodes per batch in both, each in the order it was given.
    let (ours, theirs) = (&figures[0]["order"], &figures[1]["order"]);
    assert_eq!(ours, theirs, "{comparison}");
    assert_eq!(ours["sampler_order"]["first_out_of_order"], Value::Null, "{ours}");
    // LeRobot's item of a frame of the third batch made other (its action moved): named,
    // exit 1.
    let other = batches[2][3].as_u64().unwrap().to_string();
    let site = crate::ranks::site(
        dir.path(),
        "import os\n\
         if os.environ.get('FEEDBENCH_TEST_OTHER_ITEM'):\n\
         \x20   from lerobot.datasets.lerobot_dataset import LeRobotDataset\n\
         \x20   original = LeRobotDataset.__getitem__\n\
         \x20   def other(self, index):\n\
         \x20       item = original(self, index)\n\
         \x20       if int(item['index']) == int(os.environ['FEEDBENCH_TEST_OTHER_ITEM']):\n\
         \x20           item['action'] = item['action'] + 1\n\
         \x20       return item\n\
         \x20   LeRobotDataset.__getitem__ = other\n",
    );
    let env = [("PYTHONPATH", site.to_str().unwrap()), ("FEEDBENCH_TEST_OTHER_ITEM", &other)];
    let (code, comparison, err) = readers(&root, &python, &env);
    assert_eq!(code, 1, "{err}");
    let difference = &comparison["first_difference"];
    assert_eq!(difference["reader"], "lerobot", "{comparison}");
    assert_eq!((difference["index"].to_string(), &difference["batch"]), (other, &2.into()));
}
