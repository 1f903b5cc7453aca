//! Timestamps that advance at another rate than info.json's `fps` (data recorded at 10 Hz
//! declared at 20): windows are then read at the wrong rows, as LeRobot reads
//! them, and feedbench says so: a line per episode in `info` (and its JSON), a warning where
//! `sample` and `load` open the dataset. A dataset whose rates agree gets no word; an fps that
//! is no rate (0, negative, or so large that every non-zero delta leaves every episode) is
//! refused naming info.json.

use crate::common;

use std::path::Path;

use feedbench::dataset::write::{write_tabular, TabularSpec};

/// Sets info.json's `fps` of `root` to `fps`.
fn declare_fps(root: &Path, fps: &str) {
    let path = root.join("meta/info.json");
    let mut info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    info["fps"] = serde_json::from_str(fps).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&info).unwrap()).unwrap();
}

#[test]
fn timestamps_at_another_rate_than_fps_are_said_per_episode() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let spec = TabularSpec { episode_lengths: vec![30, 40], ..TabularSpec::default() };
    write_tabular(&root, &spec).unwrap();
    let ds = root.to_str().unwrap();
    let recorded = f64::from(spec.fps);

    let (ok, text, err) = common::feedbench(&["info", ds]);
    assert!(ok && !text.contains("warning") && !err.contains("warning"), "{text}{err}");

    declare_fps(&root, &format!("{}", recorded * 2.0));
    let (ok, text, _) = common::feedbench(&["info", ds]);
    assert!(ok, "a warning, not an error");
    for episode in [0, 1] {
        let line = format!(
            "episode {episode}: its timestamps advance at {recorded:.4} frames/s, but \
             meta/info.json says fps {}",
            recorded * 2.0
        );
        assert!(text.contains(&line), "{text}");
    }
    let (ok, json, _) = common::feedbench(&["info", ds, "--json"]);
    assert!(ok);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["rate_mismatches"].as_array().unwrap().len(), 2, "{json}");
    assert_eq!(json["rate_mismatches"][1]["episode"], 1);

    // An fps at which a delta of one recorded frame leaves every episode is no rate: refused.
    declare_fps(&root, "1e308");
    let sample = dir.path().join("s");
    let delta = ["--delta", "action=-0.1,0,0.1"];
    for args in [
        [&["sample", ds, "--index", "5", "--out", sample.to_str().unwrap()][..], &delta].concat(),
        vec!["load", ds, "--window", "none", "--batches", "1", "--workers", "0"],
        vec!["info", ds],
    ] {
        let (ok, _, err) = common::feedbench(&args);
        common::clear_error(ok, &err);
        let said = format!(
            "meta/info.json: fps 1e308 is no rate of this dataset: its timestamps advance at \
             {recorded:.4} frames/s (episode 1)"
        );
        assert!(err.contains(&said), "{args:?}: {err}");
        assert!(!err.contains("warning"), "one error, no warning per episode: {err}");
    }
    assert!(!sample.exists(), "nothing sampled");
}

/// The boundary: an fps at which a delta of one recorded frame stays inside the longest
/// episode is a warning (LeRobot reads it), one frame's more is refused.
#[test]
fn an_fps_is_refused_where_one_recorded_frame_leaves_the_longest_episode() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let spec = TabularSpec { episode_lengths: vec![3, 5], ..TabularSpec::default() };
    write_tabular(&root, &spec).unwrap();
    let ds = root.to_str().unwrap();
    let recorded = f64::from(spec.fps);
    // 4 rows a recorded frame: the longest episode's last frame, from its first.
    declare_fps(&root, &format!("{}", recorded * 4.0));
    let (ok, text, err) = common::feedbench(&["info", ds]);
    assert!(ok && text.contains("warning"), "{text}{err}");
    declare_fps(&root, &format!("{}", recorded * 5.0));
    let (ok, _, err) = common::feedbench(&["info", ds]);
    common::clear_error(ok, &err);
    assert!(
        err.contains("would move 5 rows, more than its longest episode has (5 frames)"),
        "{err}"
    );
}

#[test]
fn an_fps_that_is_no_rate_is_refused_naming_info_json() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    write_tabular(&root, &TabularSpec::default()).unwrap();
    let ds = root.to_str().unwrap();
    for fps in ["0", "-10", "0.0"] {
        declare_fps(&root, fps);
        for args in [vec!["info", ds], vec!["load", ds, "--window", "none"]] {
            let (ok, _, err) = common::feedbench(&args);
            assert!(!ok, "{args:?} with fps {fps}: {err}");
            assert!(
                err.contains("meta/info.json") && err.contains("expected fps > 0, found"),
                "{args:?} with fps {fps}: {err}"
            );
        }
    }
}

/// A generated 16 fps dataset under `dir` whose row 5's timestamp lies half a frame past its
/// frame: exactly 1/32 s from frames 5 and 6 (every frame time a binary fraction), the
/// tolerance the tests give.
fn a_timestamp_at_the_tolerance(dir: &Path) -> std::path::PathBuf {
    use std::sync::Arc;

    use arrow::array::{Array, ArrayRef, Float32Array};

    let preset = dir.join("pusht16.toml");
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets/pusht.toml"))
            .unwrap();
    std::fs::write(&preset, text.replace("fps = 10", "fps = 16")).unwrap();
    let root = dir.join("d");
    let synth = [
        "synth",
        "--preset",
        preset.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--episodes",
        "1",
        "--frames-per-episode",
        "20",
    ];
    let (ok, _, err) = common::feedbench(&synth);
    assert!(ok, "{err}");
    let data = root.join("data/chunk-000/file-000.parquet");
    crate::bad_input::rewrite_column(&data, "timestamp", |old| {
        let mut times = old.as_any().downcast_ref::<Float32Array>().unwrap().values().to_vec();
        times[5] = 5.0 / 16.0 + 1.0 / 32.0;
        Arc::new(Float32Array::from(times)) as ArrayRef
    });
    root
}

#[test]
fn a_frame_exactly_at_the_tolerance_serves_under_mains_contract_and_not_the_released_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = a_timestamp_at_the_tolerance(dir.path());
    let sample = |contract: Option<&str>, out: &str| {
        let out = dir.path().join(out);
        let mut args = vec![
            "sample",
            root.to_str().unwrap(),
            "--index",
            "5",
            "--tolerance-s",
            "0.03125",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(contract.map(|c| ["--lerobot-contract", c]).into_iter().flatten());
        (common::feedbench(&args), out)
    };
    // LeRobot 0.6.1 (and before) take a frame strictly within the tolerance: none here.
    let ((ok, _, err), out) = sample(None, "released");
    assert!(!ok && err.contains("no frame strictly within 0.03125 s"), "{err}");
    assert!(!out.exists(), "nothing written");
    // LeRobot's main takes it inclusively: the even one of the two frames equally near, as its
    // decoder asks for frame round(5.5) = 6 (Python's round).
    let ((ok, _, err), out) = sample(Some("main"), "main");
    assert!(ok, "{err}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sample.json")).unwrap()).unwrap();
    assert_eq!(json["lerobot_contract"], "main", "{json}");
    assert_eq!(json["videos"]["observation.image"]["timestamps"][0], 5.0 / 16.0 + 1.0 / 32.0);
    let ((ok, _, err), _) = sample(Some("0.6.2"), "bad");
    assert!(!ok && err.contains("expected \"released\""), "{err}");
    // Beside LeRobot 0.6.1, LeRobotDataset refuses the item and FeedbenchDataset, following
    // the LeRobot installed, does too; beside LeRobot's main both read it, the same.
    let package = crate::feedbench_dataset::python_package(dir.path());
    let script = format!(
        "import torch\n\
         from lerobot.datasets.lerobot_dataset import LeRobotDataset\n\
         from feedbench.lerobot import FeedbenchDataset, ReaderError, lerobot_contract\n\
         print('contract', lerobot_contract())\n\
         items = []\n\
         for make in (LeRobotDataset, FeedbenchDataset):\n\
         \x20   try:\n\
         \x20       items.append(make('local/d', root='{}', tolerance_s=1 / 32)[5])\n\
         \x20       print(make.__name__, 'read')\n\
         \x20   except Exception as e:\n\
         \x20       print(make.__name__, 'refused', type(e).__name__)\n\
         if len(items) == 2:\n\
         \x20   same = torch.equal(items[0]['observation.image'], items[1]['observation.image'])\n\
         \x20   print('frames equal' if same else 'frames differ')\n",
        root.display()
    );
    let run = |python: &Path| {
        let output = std::process::Command::new(python)
            .args(["-c", &script])
            .env("PYTHONPATH", &package)
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        said + &String::from_utf8_lossy(&output.stderr)
    };
    if let Some(python) = common::lerobot_python() {
        let said = run(&python);
        assert!(said.contains("contract released"), "{said}");
        assert!(said.contains("LeRobotDataset refused FrameTimestampError"), "{said}");
        assert!(said.contains("FeedbenchDataset refused ReaderError"), "{said}");
    }
    if let Some(python) = common::lerobot_main_python() {
        let said = run(&python);
        assert!(said.contains("contract main"), "{said}");
        assert!(said.contains("LeRobotDataset read\nFeedbenchDataset read\n"), "{said}");
        assert!(said.contains("frames equal"), "{said}");
    }
}

#[test]
fn load_and_train_follow_the_contract_asked_for_and_say_which() {
    let dir = tempfile::tempdir().unwrap();
    let root = a_timestamp_at_the_tolerance(dir.path());
    let ds = root.to_str().unwrap();
    // Row 5 in the first batches, whichever count as warm-up.
    let common_flags =
        ["--window", "none", "--sampler", "sequential", "--batch", "4", "--tolerance-s", "0.03125"];
    let run = |command: &[&str], contract: Option<&str>| {
        let mut args = command.to_vec();
        args.extend(common_flags);
        args.push("--json");
        args.extend(contract.map(|c| ["--lerobot-contract", c]).into_iter().flatten());
        common::feedbench(&args)
    };
    let load = ["load", ds, "--batches", "4", "--workers", "0"];
    let train = ["train", ds, "--model", "synthetic:1ms", "--steps", "4", "--workers", "0"];
    for command in [&load[..], &train[..]] {
        // The released contract (the default, and named) refuses row 5, as LeRobot 0.6.1 does.
        for contract in [None, Some("released")] {
            let (ok, _, err) = run(command, contract);
            assert!(
                !ok && err.contains("no frame strictly within 0.03125 s"),
                "{command:?}: {err}"
            );
        }
        // Main's serves it, and the JSON says which was followed.
        let (ok, out, err) = run(command, Some("main"));
        assert!(ok, "{command:?}: {err}");
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(json["lerobot_contract"], "main", "{command:?}: {json}");
    }
    // Refused where it has no meaning: LeRobot's loader reads as the installed LeRobot does.
    let (ok, _, err) = run(&["load", ds, "--loader", "lerobot"], Some("main"));
    assert!(!ok && err.contains("--lerobot-contract is the native reader's"), "{err}");
    let (ok, _, err) = run(&load, Some("0.6.2"));
    assert!(!ok && err.contains("expected \"released\""), "{err}");
}
