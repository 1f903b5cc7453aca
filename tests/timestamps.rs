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
