//! `feedbench compare` end to end (issue #14): A and B interleaved, a verdict with its
//! interval, per-stage changes, and refusals that name the spec. (Which way a real
//! measurement goes is not asserted: the statistics are tested on constructed runs.)

use crate::common;

use common::feedbench;
use feedbench::dataset::write::{write_tabular, TabularSpec};

fn dataset(dir: &std::path::Path) -> String {
    let root = dir.join("ds");
    let spec = TabularSpec { image_size: Some((16, 16)), ..TabularSpec::default() };
    write_tabular(&root, &spec).unwrap();
    root.to_str().unwrap().to_string()
}

#[test]
fn runs_interleave_and_the_verdict_carries_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let a = format!("{root} --window none --workers 0 --batch 4");
    let b = format!("{root} --window none --workers 0 --batch 4 --resolution 32x32");
    let args = ["compare", "--a", &a, "--b", &b, "--repeats", "3", "--batches", "3"];
    let (ok, json, err) = feedbench(&[&args[..], &["--json"]].concat());
    assert!(ok, "{err}");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let sides: Vec<&str> =
        value["runs"].as_array().unwrap().iter().map(|r| r["side"].as_str().unwrap()).collect();
    assert_eq!(sides, ["a", "b", "b", "a", "a", "b"], "interleaved, each first in turn");
    let cpu = &value["cpu"];
    let (low, high) = (cpu["low"].as_f64().unwrap(), cpu["high"].as_f64().unwrap());
    assert!(low <= cpu["percent"].as_f64().unwrap() && low <= high, "{cpu}");
    let decisions = ["higher", "lower", "no_difference", "undecided"];
    assert!(decisions.contains(&value["cpu_decision"].as_str().unwrap()), "{value}");
    let stages: Vec<&str> =
        value["stages"].as_array().unwrap().iter().map(|s| s["stage"].as_str().unwrap()).collect();
    assert!(stages.contains(&"image") && stages.contains(&"parquet"), "{stages:?}");

    let (ok, text, err) = feedbench(&args);
    assert!(ok, "{err}");
    let verdict = text.lines().nth(4).unwrap();
    assert!(
        ["than A (95 % CI", "no difference beyond noise (95 % CI", "undecided"]
            .iter()
            .any(|v| verdict.contains(v)),
        "{text}"
    );
    assert!(text.contains("per sample: ") && text.contains("samples/s: A "), "{text}");
}

#[test]
fn bad_specs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let (ok, _, err) = feedbench(&["compare", "--a", &root, "--b", &format!("{root} --wokers 2")]);
    assert!(!ok && err.contains("--b") && err.contains("--wokers"), "{err}");
    let missing = dir.path().join("nowhere");
    let (ok, _, err) = feedbench(&["compare", "--a", missing.to_str().unwrap(), "--b", &root]);
    assert!(!ok && err.contains("nowhere"), "{err}");
    let (ok, _, err) = feedbench(&["compare", "--a", &root, "--b", &root, "--repeats", "1"]);
    assert!(!ok && err.contains("at least 2 repeats"), "{err}");
    // Readers on one order: two at least, the line the dataset and knobs alone, a known reader.
    let (ok, _, err) = feedbench(&["compare", "--readers", "feedbench", "--on", &root]);
    assert!(!ok && err.contains("at least two readers"), "{err}");
    let lerobot = format!("{root} --loader lerobot");
    let (ok, _, err) = feedbench(&["compare", "--readers", "feedbench,lerobot", "--on", &lerobot]);
    assert!(!ok && err.contains("--readers names the readers"), "{err}");
    let (ok, _, err) = feedbench(&["compare", "--readers", "feedbench,lance", "--on", &root]);
    assert!(!ok && err.contains("\"lance\": expected feedbench, lerobot"), "{err}");
    let (ok, _, err) = feedbench(&["compare", "--readers", "feedbench,feedbench"]);
    assert!(!ok && err.contains("--on"), "{err}");
}

/// A side whose LeRobot loader finds no LeRobot in its Python is named, with how to give that
/// side a Python (it said "point --python at …", a flag compare has not).
#[test]
fn a_side_without_lerobot_is_named_with_how_to_give_it_a_python() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    // A Python without LeRobot: the libtorch venv's (torch, no lerobot), else the system's.
    let bare = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let bare = if bare.exists() { bare.to_str().unwrap().to_string() } else { "python3".into() };
    let a = format!("{root} --window none --workers 0 --batch 4");
    let b = format!("{root} --window none --workers 0 --batch 4 --loader lerobot --python {bare}");
    let args = ["compare", "--a", &a, "--b", &b, "--repeats", "2", "--batches", "1"];
    let (ok, _, err) = feedbench(&args);
    common::clear_error(ok, &err);
    assert!(err.contains(&format!("--b {b:?}: lerobot is not installed in")), "{err}");
    assert!(err.contains("point --python (--b \"… --python PATH\") at the environment"), "{err}");
}
