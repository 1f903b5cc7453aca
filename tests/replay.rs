//! The user's step replayed (`train --step-from FILE`): a real lerobot-train log's `updt_s`
//! (tests/fixtures/lerobot-train/diffusion-log-freq-1.log: lerobot-train 0.6.1, diffusion on the
//! CPU, `--log_freq=1 --steps=40`), step after step, instead of one constant.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::common;

/// The fixture log.
fn log() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/lerobot-train/diffusion-log-freq-1.log")
}

/// The median and 95th percentile (nearest rank) of `values`.
fn median_and_p95(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
    (at(0.5), at(0.95))
}

/// The log's `updt_s`, ms.
fn logged_ms() -> Vec<f64> {
    let text = std::fs::read_to_string(log()).unwrap();
    text.split_whitespace()
        .filter_map(|t| t.strip_prefix("updt_s:"))
        .map(|v| v.parse::<f64>().unwrap() * 1e3)
        .collect()
}

/// `train DATA --step-from LOG ARGS --json`: each measured step's compute, ms, and the phase.
fn replayed(data: &Path, args: &[&str]) -> (Vec<f64>, Json) {
    let log = log();
    let base = ["train", data.to_str().unwrap(), "--step-from", log.to_str().unwrap(), "--json"];
    let (ok, stdout, stderr) = common::feedbench(&[&base[..], args].concat());
    assert!(ok, "{stderr}");
    let phase: Json = serde_json::from_str(&stdout).unwrap();
    let compute = phase["per_step"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step_ms"].as_f64().unwrap() - s["h2d_ms"].as_f64().unwrap())
        .collect();
    (compute, phase)
}

#[test]
fn a_replayed_log_gives_its_median_and_p95_step() {
    let _alone = common::timing_alone();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("p");
    common::synth_pusht(&data, 2, 40, &[]);
    let logged = logged_ms();
    assert_eq!(logged.len(), 40, "the fixture logs every step");
    let within = |a: f64, b: f64| (a / b - 1.0).abs() < 0.10;
    // In the log's order, 100 measured steps after 3: the log's steps from its fourth on, two
    // and a half times over (a few steps a loaded machine wakes late do not move the p95).
    let args = ["--step-order", "logged", "--steps", "100", "--warmup", "3", "--workers", "1"];
    let (steps, phase) = replayed(&data, &args);
    let cycled: Vec<f64> = logged.iter().cycle().skip(3).take(100).copied().collect();
    let (median, p95) = median_and_p95(cycled.clone());
    let (m, p) = median_and_p95(steps.clone());
    assert!(within(m, median) && within(p, p95), "replayed {m}/{p} ms, logged {median}/{p95}");
    let (log_median, log_p95) = median_and_p95(logged.clone());
    assert!(within(m, log_median) && within(p, log_p95), "the log's: {log_median}/{log_p95}");
    assert!(phase["au_pct"].as_f64().unwrap() > 0.0, "{phase}");
    // In order: the log's own sequence, shifted by the warm-up (a sleep ends late, never
    // early).
    assert!(steps.iter().zip(&cycled).all(|(replayed, logged)| replayed >= logged));
    let on_time = steps.iter().zip(&cycled).filter(|(r, l)| **r < **l + 15.0).count();
    assert!(on_time >= 90, "{on_time} of 100 steps within 15 ms of the log's");
    // Drawn (seeded, as the unit tests hold it): the log's distribution.
    let (drawn, _) = replayed(&data, &["--steps", "40", "--workers", "1"]);
    let (m, _) = median_and_p95(drawn);
    assert!(within(m, median), "drawn median {m} ms, logged {median}");
}

#[test]
fn bad_step_files_are_one_line_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("p");
    common::synth_pusht(&data, 1, 10, &[]);
    let root = data.to_str().unwrap();
    for (text, said) in [
        ("", ": no step time"),
        ("fast\n", ":1: `fast` is no step time"),
        ("40\n-3\n", ":2: `-3`: expected a step time above 0"),
        ("0\n", ":1: `0`: expected"),
        ("NaN\n", ":1: `NaN`: expected"),
        ("1e308\n", ":1: `1e308`: expected"),
        ("INFO start\nINFO 'num_workers': 2\n", ":1: `INFO start` is no step time"),
    ] {
        let file = dir.path().join("steps.txt");
        std::fs::write(&file, text).unwrap();
        let args = ["train", root, "--step-from", file.to_str().unwrap(), "--steps", "2"];
        let (ok, _, stderr) = common::feedbench(&args);
        assert!(!ok, "{text:?} taken");
        let expected = format!("--step-from {}{said}", file.display());
        assert!(stderr.contains(&expected), "{text:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    let missing = ["train", root, "--step-from", "/no/such/log", "--steps", "2"];
    let (ok, _, stderr) = common::feedbench(&missing);
    assert!(!ok && stderr.contains("--step-from /no/such/log: "), "{stderr}");
    let both = ["train", root, "--step-from", "/x", "--model", "synthetic:5ms"];
    let (ok, _, stderr) = common::feedbench(&both);
    assert!(!ok && stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn sweep_and_tune_replay_the_step_from_a_file_and_keep_it_in_their_cells() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("p");
    common::synth_pusht(&data, 1, 30, &[]);
    std::fs::write(dir.path().join("steps.txt"), "4\n6\n30\n").unwrap();
    let steps = dir.path().join("steps.txt").display().to_string();
    // In a sweep config, relative to the config's directory; the step it gives replaces model.
    let config = dir.path().join("sweep.toml");
    std::fs::write(
        &config,
        "[dataset]\npath = \"p\"\n[loader]\nworkers = [1]\nbatch = [4]\n\
         [model]\nstep_from = \"steps.txt\"\ndevice = \"cpu\"\n\
         [run]\nloader_batches = 4\nmodel_steps = 3\ntrain_steps = 6\nwarmup = 1\n",
    )
    .unwrap();
    let models = |out: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
        text.lines()
            .map(|l| serde_json::from_str::<Json>(l).unwrap()["cell"]["model"].clone())
            .map(|m| m.as_str().unwrap().to_string())
            .collect()
    };
    let out = dir.path().join("sweep");
    let sweep = ["sweep", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let (ok, _, stderr) = common::feedbench(&sweep);
    assert!(ok, "{stderr}");
    assert_eq!(models(&out), [format!("replay:{steps}")]);
    // Its report shows each cell's AU and the memory its train phase held.
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| AU % | PSS MB |") && md.contains("*PSS*: the memory"), "{md}");
    // Reading the results opens no step file: without it, the report re-renders the same.
    std::fs::rename(dir.path().join("steps.txt"), dir.path().join("kept.txt")).unwrap();
    let (ok, _, stderr) = common::feedbench(&["report", out.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert_eq!(std::fs::read_to_string(out.join("report.md")).unwrap(), md);
    std::fs::rename(dir.path().join("kept.txt"), dir.path().join("steps.txt")).unwrap();
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",au_pct,train_pss_bytes,"), "{csv}");
    // --step-from gives every cell the file's step, whatever the config's model.
    std::fs::write(dir.path().join("other.txt"), "5\n").unwrap();
    let other = dir.path().join("other.txt");
    let out = dir.path().join("flag");
    let flagged = [&sweep[..3], &["--out", out.to_str().unwrap()]].concat();
    let (ok, _, stderr) =
        common::feedbench(&[&flagged[..], &["--step-from", other.to_str().unwrap()]].concat());
    assert!(ok, "{stderr}");
    assert_eq!(models(&out), [format!("replay:{}", other.display())]);
    // A config's step file that is none is the config's error, naming the key.
    std::fs::write(dir.path().join("steps.txt"), "fast\n").unwrap();
    let (ok, _, stderr) = common::feedbench(&sweep);
    assert!(!ok && stderr.contains("sweep.toml") && stderr.contains("model.step_from"), "{stderr}");
    std::fs::write(dir.path().join("steps.txt"), "4\n6\n30\n").unwrap();

    // A tune replays it by feedbench's own loader and keeps it in its cells.
    let out = dir.path().join("tune");
    let root = data.to_str().unwrap();
    let tune = [
        "tune",
        root,
        "--batch",
        "4",
        "--step-from",
        &steps,
        "--cpus",
        "1",
        "--memory",
        "4GB",
        "--loader-batches",
        "4",
        "--train-steps",
        "6",
        "--warmup",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    let (ok, _, stderr) = common::feedbench(&tune);
    assert!(ok, "{stderr}");
    assert!(models(&out).iter().all(|m| *m == format!("replay:{steps}")), "{:?}", models(&out));
    let both = [&tune[..], &["--step-ms", "40"]].concat();
    let (ok, _, stderr) = common::feedbench(&both);
    assert!(!ok && stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn lerobots_loader_feeds_the_replayed_steps_in_the_native_loaders_order() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pusht");
    common::synth_pusht(&root, 2, 40, &[]);
    // A bimodal step, drawn: where the 300 ms steps fall is the seeded draw's.
    let file = dir.path().join("steps.txt");
    std::fs::write(&file, "300\n1\n1\n1\n1\n1\n1\n").unwrap();
    let steps_of = |loader: &str| -> Vec<f64> {
        let (r, f, p) = (root.to_str().unwrap(), file.to_str().unwrap(), python.to_str().unwrap());
        let mut args = vec!["train", r, "--loader", loader, "--workers", "1", "--batch", "8"];
        args.extend(["--step-from", f, "--steps", "14", "--warmup", "2", "--json"]);
        if loader == "lerobot" {
            args.extend(["--python", p]);
        }
        let (ok, stdout, stderr) = common::feedbench(&args);
        assert!(ok, "{loader}: {stderr}");
        let phase: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        phase["per_step"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["step_ms"].as_f64().unwrap())
            .collect()
    };
    let long = |steps: &[f64]| -> Vec<bool> { steps.iter().map(|&ms| ms > 150.0).collect() };
    let (native, lerobots) = (steps_of("native"), steps_of("lerobot"));
    assert_eq!(lerobots.len(), 14);
    assert!(long(&lerobots).iter().any(|&l| l), "the long steps are replayed: {lerobots:?}");
    assert_eq!(
        long(&native),
        long(&lerobots),
        "the same draws, step for step:\n{native:?}\n{lerobots:?}"
    );
}
