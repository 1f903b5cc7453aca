//! Every front end reads the loader's knobs from the one table: each knob it takes is read by
//! its key (or flag), checked by the table, and refused with its own name, with nothing listed
//! again per front end. A knob added to the table is covered here without a line more.

use std::path::Path;

use feedbench::bench::compare::guard::config::GuardConfig;
use feedbench::bench::layout_study::config::LayoutConfig;
use feedbench::bench::sweep::config::{ConfigFile, SweepConfig};
use feedbench::loader::knobs::{FlagForm, LoaderKnob};

use crate::common;

/// A value no knob takes: each knob's own check must refuse it.
const BAD: &str = "\"x\"";

/// The error of reading `text` as a config with `load`.
fn refusal<T, E: ToString>(dir: &Path, text: &str, load: impl Fn(&Path) -> Result<T, E>) -> String {
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    match load(&path) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn every_config_front_end_refuses_a_bad_value_of_each_knob_by_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = "[dataset]\nsynth = \"pusht\"\nepisodes = 2\n";
    for knob in LoaderKnob::ALL {
        let key = knob.key;
        let sweep = format!("{dataset}[loader]\n{key} = {BAD}\n");
        let sweep = refusal(dir.path(), &sweep, SweepConfig::load);
        assert!(sweep.contains(&format!("loader.{key} {BAD}")), "sweep, {key}: {sweep}");
        let required = ["workers", "batch"].iter().filter(|k| **k != key);
        let given: String = required.map(|k| format!("{k} = 1\n")).collect();
        let guard = format!("{dataset}[[cell]]\nname = \"a\"\n{given}{key} = {BAD}\n");
        let guard = refusal(dir.path(), &guard, GuardConfig::load);
        assert!(guard.contains(&format!("cell.{key} {BAD}")), "guard, {key}: {guard}");
        // The layout study varies the resolution itself; every other knob is a measure's.
        let layout = format!("[measure]\n{key} = {BAD}\n");
        let layout = refusal(dir.path(), &layout, LayoutConfig::load);
        let expected = match key {
            "resolution" => "unknown field `resolution`".to_string(),
            _ => format!("measure.{key} {BAD}"),
        };
        assert!(layout.contains(&expected), "layout, {key}: {layout}");
    }
}

#[test]
fn every_value_flag_refuses_a_bad_value_by_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pusht");
    common::synth_pusht(&data, 2, 20, &[]);
    let data = data.to_str().unwrap();
    for knob in LoaderKnob::ALL.iter().filter(|k| matches!(k.form, FlagForm::Value(_))) {
        let flag = format!("--{}", knob.flag);
        let (ok, _, stderr) = common::feedbench(&["load", data, &flag, "x", "--batches", "1"]);
        assert!(!ok, "{flag} x was taken");
        assert!(stderr.contains(&format!("'{flag} ")) || stderr.contains(&format!("{flag} x")));
        assert_eq!(stderr.trim().lines().filter(|l| l.starts_with("error")).count(), 1, "{stderr}");
    }
}
