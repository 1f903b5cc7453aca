//! LeRobot's loader as a backend (`--loader lerobot`), measured: its figures in the native
//! schema with every process counted, what measuring costs it, a measurement ended when told,
//! its own errors and a wrong interpreter named, feeding a step, a sweep of both loaders, and
//! LeRobot's diffusion step beside feedbench's. Skipped, with a note, where no LeRobot venv is
//! found.

use crate::common;
use crate::lerobot::{dataset, has_uint8_frames, spec};

use common::lerobot_python;

use std::path::{Path, PathBuf};

use feedbench::bench::events::Unwatched;
use feedbench::bench::sweep::results::CellResult;
use feedbench::loader::batch::ImageFormat;
use feedbench::loader::lerobot::{
    DriverStep, Feeding, LerobotBridge, LerobotLoader, LerobotOptions,
};
use feedbench::loader::sampler::SamplerKind;
use feedbench::timing::{EndsWhen, NoOne};

#[test]
fn load_with_lerobot_reports_the_native_schema_with_every_process_counted() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path(), "av1", &[]);
    let (ok, out, err) = common::feedbench(&[
        "load",
        root.to_str().unwrap(),
        "--loader",
        "lerobot",
        "--python",
        python.to_str().unwrap(),
        "--workers",
        "2",
        "--batch",
        "4",
        "--batches",
        "6",
        "--json",
    ]);
    assert!(ok, "{err}");
    let phase: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(phase["samples"], 24);
    assert_eq!(phase["batch_ms"].as_array().unwrap().len(), 6);
    assert!(phase["samples_per_s"].as_f64().unwrap() > 0.0);
    assert!(phase["first_batch_s"].as_f64().unwrap() > 0.0);
    assert!(
        phase["peak_rss_bytes"].as_u64().unwrap() > 50_000_000,
        "two worker processes and the main one"
    );
    // CPU: the main process waits, the two worker processes decode.
    assert!(
        phase["timing"]["stages"]["batch"]["cpu_s"].as_f64().unwrap() > 0.0,
        "{}",
        phase["timing"]
    );
    let cpu = phase["cpu_ms_per_sample"].as_f64().unwrap();
    assert!(cpu > 0.0 && (cpu - phase["process_cpu_ms_per_sample"].as_f64().unwrap()).abs() < 1e-9);
    assert!(
        phase["lerobot"]["lerobot"].as_str().unwrap().starts_with("0."),
        "{}",
        phase["lerobot"]
    );
    assert_eq!(phase["lerobot"]["video_backend"], "torchcodec");
    assert_eq!(phase["config"]["workers"], 2);
}

#[test]
fn measuring_lerobots_loader_costs_it_next_to_nothing() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path(), "av1", &[]);
    let mut spec = spec(&root, SamplerKind::Shuffled, ImageFormat::F32, None);
    spec.config.workers = 2;
    let loader =
        LerobotLoader::new(&spec, LerobotOptions::new(Some(&python), None), &LerobotBridge::new())
            .unwrap();
    // Enough batches that the fixed cost of measuring is weighed against a real run (20 took
    // 0.6 s of loading CPU on a quiet machine, where 38 ms was 6 %).
    let (_, mut runs) = loader.load(80, 2, Feeding::Nothing, &mut NoOne).unwrap();
    let run = runs.remove(0);
    let loader_cpu_s = run.main_cpu_s + run.workers_cpu_s;
    // The memory figure comes from the kernel's high-water marks and one PSS read at the end,
    // a fixed cost of some 20 ms, not from sampling PSS every 100 ms while the loader runs
    // (3.6 ms of CPU a read of a 0.76 GB LeRobot process here, 22 ms of a 1.5 GB one: for
    // three processes, a tenth of a core or more, taken from the loader it measures).
    assert!(run.observer_cpu_s > 0.0, "measured: {run:?}");
    assert!(
        run.observer_cpu_s < 0.05 * loader_cpu_s,
        "the observer took {:.3} s of {:.3} s",
        run.observer_cpu_s,
        loader_cpu_s
    );
    assert!(run.peak_memory_bytes > 50_000_000 && run.memory == "pss", "{run:?}");
}

#[test]
fn a_measurement_of_lerobots_loader_ends_when_told() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path(), "av1", &[]);
    let spec = spec(&root, SamplerKind::Shuffled, ImageFormat::F32, None);
    let loader =
        LerobotLoader::new(&spec, LerobotOptions::new(Some(&python), None), &LerobotBridge::new())
            .unwrap();
    // Told to stop once 5 batches were heard, of 60 asked for: it ends a batch or two later.
    let mut heard = 0;
    let mut stop = EndsWhen(|steps: &[DriverStep]| {
        assert!(steps.iter().all(|s| s.whole_ms >= s.wait_ms && s.wait_ms >= 0.0), "{steps:?}");
        heard = steps.len();
        steps.len() >= 5
    });
    let (_, mut runs) = loader.load(60, 1, Feeding::Nothing, &mut stop).unwrap();
    let run = runs.remove(0);
    assert!((5..=8).contains(&run.batches), "{} batches measured", run.batches);
    assert_eq!((run.batch_ms.len(), run.wait_ms.len()), (run.batches, run.batches));
    assert_eq!(heard, 5, "batches are heard as they end, until the stop");
}

#[test]
fn lerobots_own_errors_reach_the_user_with_its_message() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let python = python.to_str().unwrap();
    // A v2.1 dataset: LeRobot ≥ 0.4 reads v3.0 only, and says so.
    let old = dataset(dir.path(), "v21", &["--format", "v2.1", "--codec", "h264"]);
    let (ok, _, err) = common::feedbench(&[
        "load",
        old.to_str().unwrap(),
        "--loader",
        "lerobot",
        "--python",
        python,
        "--workers",
        "0",
        "--batches",
        "1",
    ]);
    assert!(!ok);
    let expected = "error: LeRobot's loader failed: BackwardCompatibilityError: The dataset you \
                    requested (local/v21) is in 2.1 format";
    assert!(err.starts_with(expected), "{err}");
    // A failure inside a worker process: a camera's video replaced by bytes no decoder reads.
    let root = dataset(dir.path(), "h264", &["--codec", "h264"]);
    let video = root.join("videos/observation.images.up/chunk-000/file-000.mp4");
    let size = std::fs::metadata(&video).unwrap().len() as usize;
    std::fs::write(&video, vec![7u8; size]).unwrap();
    let (ok, _, err) = common::feedbench(&[
        "load",
        root.to_str().unwrap(),
        "--loader",
        "lerobot",
        "--python",
        python,
        "--workers",
        "1",
        "--batches",
        "1",
    ]);
    assert!(!ok);
    assert!(err.starts_with("error: LeRobot's loader failed:"), "{err}");
    assert!(err.contains("DataLoader worker process 0"), "the worker's failure, named: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
}

#[test]
fn a_missing_or_wrong_interpreter_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tabular");
    let spec = feedbench::dataset::write::TabularSpec {
        episode_lengths: vec![30; 2],
        ..Default::default()
    };
    feedbench::dataset::write::write_tabular(&root, &spec).unwrap();
    let root = root.to_str().unwrap();
    let load = |python: &str| {
        common::feedbench(&[
            "load",
            root,
            "--loader",
            "lerobot",
            "--python",
            python,
            "--batches",
            "1",
        ])
    };
    let (ok, _, err) = load("/nonexistent/python3");
    assert!(!ok);
    assert!(err.contains("--python /nonexistent/python3: cannot run it"), "{err}");
    // A program that is no Python.
    let (ok, _, err) = load("/bin/true");
    assert!(!ok);
    assert!(
        err.contains("--python /bin/true: did not answer as feedbench's LeRobot driver"),
        "{err}"
    );
    // A Python without LeRobot (the system's, or the libtorch venv's: torch but no lerobot).
    let bare = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let bare = if bare.exists() { bare } else { PathBuf::from("python3") };
    let (ok, _, err) = load(bare.to_str().unwrap());
    assert!(!ok);
    assert!(
        err.contains("lerobot is not installed in") && err.contains("point --python at"),
        "{err}"
    );
    // LeRobot-only flags without --loader lerobot.
    let (ok, _, err) = common::feedbench(&["load", root, "--python", "python3"]);
    assert!(
        !ok && err.contains("--python is a knob of LeRobot's loader: add --loader lerobot"),
        "{err}"
    );
}

#[test]
fn lerobots_loader_feeding_a_step_gets_the_verdict_of_its_own_numbers() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path(), "av1", &[]);
    let train = |model: &str, workers: &str, extra: &[&str]| {
        let mut args = vec![
            "train",
            root.to_str().unwrap(),
            "--loader",
            "lerobot",
            "--python",
            python.to_str().unwrap(),
            "--model",
            model,
            "--workers",
            workers,
            "--batch",
            "4",
            "--steps",
            "4",
            "--warmup",
            "2",
            "--json",
        ];
        args.extend_from_slice(extra);
        let (ok, out, err) = common::feedbench(&args);
        assert!(ok, "{err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let median = |phase: &serde_json::Value, part: &str| phase[part]["median_ms"].as_f64().unwrap();
    // A step far longer than a batch takes: two worker processes keep it fed.
    let fed = train("synthetic:1000ms", "2", &[]);
    assert_eq!(fed["steps"], 4);
    assert!(median(&fed, "step") >= 1000.0, "{}", fed["step"]);
    assert!((1000.0..1100.0).contains(&median(&fed, "compute")), "{}", fed["compute"]);
    assert!(fed["input_bound"]["median_pct"].as_f64().unwrap() < 20.0, "{}", fed["input_bound"]);
    // uint8 frames are made float32 on the host before the step, as LeRobot's training loop
    // does: the copy to the device is the step's, counted as input-bound.
    if has_uint8_frames(&python) {
        let copied = train("synthetic:100ms", "1", &["--uint8"]);
        let h2d = median(&copied, "h2d");
        assert!(h2d > 0.0 && h2d < median(&copied, "step") - 100.0, "{}", copied["h2d"]);
        assert!(copied["per_step"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["h2d_ms"].as_f64() > Some(0.0)));
    }
    // No step, loading in the main process: waiting for the loader is the whole step.
    let starved = train("synthetic:0ms", "0", &[]);
    assert_eq!(
        starved["input_bound"]["verdict"], "highly_input_bound",
        "{}",
        starved["input_bound"]
    );
    assert!(starved["input_bound"]["median_pct"].as_f64().unwrap() > 90.0);
    assert!(starved["timing"]["stages"]["wait"]["cpu_s"].as_f64().unwrap() > 0.0);
}

/// A short sweep (a 20 ms step, a few batches and steps) over a generated H.264 dataset in
/// `dir`, its `[loader]` section `loader` with LeRobot's `python`: its results and directory.
fn short_sweep(dir: &Path, python: &Path, loader: &str) -> (Vec<CellResult>, PathBuf) {
    use feedbench::bench::sweep::config::{ConfigFile, SweepConfig};
    use feedbench::bench::sweep::results::Resume;
    use feedbench::bench::sweep::run_sweep;

    let root = dataset(dir, "h264", &["--codec", "h264"]);
    let text = format!(
        "[dataset]\npath = \"{}\"\n[loader]\n{loader}python = \"{}\"\n\
         [model]\nmodel = [\"synthetic:20ms\"]\ndevice = \"cpu\"\n\
         [run]\nloader_batches = 3\nmodel_steps = 2\ntrain_steps = 3\nwarmup = 1\n",
        root.display(),
        python.display()
    );
    let config: SweepConfig = toml::from_str(&text).unwrap();
    config.check(&dir.join("sweep.toml")).unwrap();
    let out = dir.join("sweep");
    (run_sweep(&config, &root, &out, Resume::No, &mut Unwatched).unwrap(), out)
}

#[test]
fn a_sweep_of_both_loaders_reports_each_with_its_own_recommendation() {
    use feedbench::loader::lerobot::LoaderBackend;

    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let loader = "workers = [0, 1]\nbatch = [4]\nloader = [\"native\", \"lerobot\"]\n";
    let (results, out) = short_sweep(dir.path(), &python, loader);
    assert_eq!(results.len(), 4);
    for result in &results {
        let lerobot = result.cell.loader == LoaderBackend::Lerobot;
        let alone = result.loader.as_ref().expect("a sweep measures every cell's loader alone");
        assert_eq!(alone.lerobot.is_some(), lerobot, "{}", result.cell.id());
        assert_eq!(result.cell.id().ends_with("-lerobot-r0"), lerobot);
        assert!(result.train.samples_per_s > 0.0);
    }
    // One model measurement per model key: both loaders' train phases feed the same step,
    // LeRobot's its compute (the 20 ms), paying its own copy to the device.
    assert_eq!(results[0].model.step.median_ms, results[3].model.step.median_ms);
    for result in results.iter().filter(|r| r.cell.loader == LoaderBackend::Lerobot) {
        let compute = result.train.compute.median_ms;
        // At least the 20 ms it sleeps; the bound above only tells it from none or a second
        // step, with room for a loaded 2-core machine (35 ms was exceeded once under load).
        assert!((20.0..60.0).contains(&compute), "{}: compute {compute} ms", result.cell.id());
    }
    let written = feedbench::bench::report::write_report(&out, &results).unwrap();
    assert!(
        written.terminal.contains("loader native") && written.terminal.contains("loader lerobot"),
        "{}",
        written.terminal
    );
    assert!(
        written.terminal.contains("(LeRobot's, by process): worker processes"),
        "{}",
        written.terminal
    );
    let pairs = written.report.loaders.as_ref().map(|c| c.pairs.len());
    assert_eq!(pairs, Some(2), "both loaders side by side at 0 and 1 workers");
    assert!(written.terminal.contains("Both loaders, cell by cell:"), "{}", written.terminal);
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains(",dtype,loader,repeats,"), "{csv}");
    assert_eq!(csv.lines().filter(|l| l.contains("lerobot")).count(), 2, "{csv}");
}

#[test]
fn lerobots_diffusion_step_has_the_tch_steps_parameters_and_is_measured_beside_it() {
    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path(), "av1", &[]);
    let model = |extra: &[&str]| {
        let mut args = vec![
            "model",
            "--impl",
            "tch,lerobot",
            "--python",
            python.to_str().unwrap(),
            "--preset",
            "small",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--threads",
            "2",
        ];
        args.extend_from_slice(extra);
        let (ok, out, err) = common::feedbench(&args);
        assert!(ok, "{err}");
        out
    };
    // Two cameras resized to 64×64 with an encoder each and a 56×56 crop: another graph than
    // PushT's, built alike by both.
    let overrides = dir.path().join("two-encoders.toml");
    std::fs::write(
        &overrides,
        "use_separate_rgb_encoder_per_camera = true\ncrop_shape = [56, 56]\n",
    )
    .unwrap();
    let out = model(&[
        "--dataset",
        root.to_str().unwrap(),
        "--resolution",
        "64x64",
        "--config",
        overrides.to_str().unwrap(),
        "--batch",
        "2",
        "--dtype",
        "f32,bf16",
        "--json",
    ]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 4, "{out}");
    let (tch, lerobot) = rows.split_at(2);
    for (t, l) in tch.iter().zip(lerobot) {
        assert!(l["model"].as_str().unwrap().starts_with("LeRobot's DiffusionPolicy"), "{l}");
        assert_eq!((&t["batch"], &t["dtype"]), (&l["batch"], &l["dtype"]));
        assert_eq!(t["parameters"], l["parameters"], "the same graph, parameter for parameter");
        assert!(l["parameters"].as_u64().unwrap() > 1_000_000);
        assert_eq!(l["per_step"].as_array().unwrap().len(), 2);
        let part = |name: &str| l[name]["median_ms"].as_f64().unwrap();
        assert!(part("forward") > 0.0 && part("backward") > 0.0 && part("optimizer") > 0.0);
        assert!(part("step") >= part("forward") + part("backward"), "{l}");
        assert!(l["last_loss"].as_f64().unwrap().is_finite());
    }
    assert!(lerobot[1]["speedup_over_f32"].as_f64().unwrap() > 0.0, "bf16 beside f32");
    // PushT's shapes, as text: the two steps side by side.
    let text = model(&["--batch", "2"]);
    let parity = text.split("tch step beside LeRobot's").nth(1).expect(&text);
    let row: Vec<&str> = parity.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!((row[0], row[1]), ("2", "f32"), "{parity}");
    assert_eq!(row[5], row[6], "parameters: {parity}");
}

#[test]
fn lerobots_step_is_the_diffusion_policys_only_and_needs_its_python() {
    let (ok, _, err) =
        common::feedbench(&["model", "--impl", "lerobot", "--model", "synthetic:5ms"]);
    assert!(!ok && err.contains("--impl lerobot runs LeRobot's DiffusionPolicy"), "{err}");
    let (ok, _, err) =
        common::feedbench(&["model", "--impl", "lerobot", "--python", "/nonexistent/python"]);
    assert!(!ok && err.contains("/nonexistent/python"), "{err}");
    let (ok, _, err) = common::feedbench(&["model", "--impl", "pytorch"]);
    assert!(!ok && err.contains("tch") && err.contains("lerobot"), "{err}");
}

#[test]
fn the_start_method_is_an_axis_of_lerobots_loader_and_each_cell_says_its_start() {
    use feedbench::loader::config::StartMethod;

    let Some(python) = lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let loader = "workers = [1]\nbatch = [4]\nstart_method = [\"fork\", \"spawn\"]\n\
                  loader = [\"lerobot\"]\n";
    let (results, out) = short_sweep(dir.path(), &python, loader);
    let methods: Vec<StartMethod> = results.iter().map(|r| r.cell.knobs.start_method).collect();
    assert_eq!(methods, [StartMethod::Fork, StartMethod::Spawn]);
    for result in &results {
        let startup = result.loader.as_ref().and_then(|l| l.startup.clone()).expect("its start");
        assert_eq!(startup.start_method, result.cell.knobs.start_method.to_string());
        // Forked workers are sent nothing; spawned ones the pickled dataset.
        let spawned = result.cell.knobs.start_method == StartMethod::Spawn;
        assert_eq!(startup.pickled_bytes.is_some(), spawned, "{startup:?}");
        assert_eq!(startup.workers.len(), 1, "{startup:?}");
    }
    let written = feedbench::bench::report::write_report(&out, &results).unwrap();
    assert!(written.terminal.contains("start_method spawn"), "{}", written.terminal);
}
