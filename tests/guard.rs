//! `feedbench guard` end to end (issue #14): the exit codes (0 pass, 1 regression, 2 error),
//! baselines saved and read back, refusals of a missing, corrupt, foreign or mismatched
//! baseline, the machine and dataset checks, the Markdown, JSON and github-action-benchmark
//! outputs, and lerobot-train runs (either reader) as cells. Real measurements are noisy, so
//! the verdicts are forced by baselines shifted tenfold; the statistics themselves are tested on
//! constructed runs (`bench::compare::guard::judge`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use feedbench::dataset::write::{write_tabular, TabularSpec};
use serde_json::Value;

/// Runs `feedbench` with `env` set: exit code, stdout, stderr.
fn guard(args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.arg("guard").args(args).env_remove("GITHUB_STEP_SUMMARY");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

/// A small dataset (16×16 images in parquet) and a guard config over it with two short cells.
fn setup(dir: &Path) -> (PathBuf, PathBuf) {
    let root = dir.join("ds");
    write_tabular(&root, &TabularSpec { image_size: Some((16, 16)), ..TabularSpec::default() })
        .unwrap();
    let config = dir.join("guard.toml");
    std::fs::write(
        &config,
        "[dataset]\npath = \"ds\"\n[run]\nrepeats = 3\nbatches = 3\ntolerance = \"10%\"\n\
         [[cell]]\nname = \"inline\"\nwindow = \"none\"\nworkers = 0\nbatch = 4\n\
         [[cell]]\nname = \"one-worker\"\nwindow = \"none\"\nworkers = 1\nbatch = 4\n",
    )
    .unwrap();
    (root, config)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Multiplies every run's CPU ms per sample in the baseline by `cpu` and its samples/s by
/// `throughput`, writing the result to `out`.
fn shifted(baseline: &Path, out: &Path, cpu: f64, throughput: f64) {
    let mut value = read_json(baseline);
    for cell in value["cells"].as_array_mut().unwrap() {
        for run in cell["runs"].as_array_mut().unwrap() {
            let scale = |v: &Value, by: f64| Value::from(v.as_f64().unwrap() * by);
            run["cpu_ms_per_sample"] = scale(&run["cpu_ms_per_sample"], cpu);
            run["samples_per_s"] = scale(&run["samples_per_s"], throughput);
        }
    }
    std::fs::write(out, serde_json::to_string(&value).unwrap()).unwrap();
}

#[test]
fn exit_codes_say_pass_regression_and_improvement() {
    let dir = tempfile::tempdir().unwrap();
    let (_, config) = setup(dir.path());
    let config = config.to_str().unwrap();
    let saved = dir.path().join("ci/baseline.json");
    let (code, out, err) =
        guard(&["--config", config, "--save-baseline", saved.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("saved the baseline") && out.contains("2 cells × 3 runs"), "{out}");
    let record = read_json(&saved);
    assert_eq!(record["feedbench_guard_baseline"], 1);
    let runs = |cell: usize| record["cells"][cell]["runs"].as_array().unwrap().len();
    assert_eq!((runs(0), runs(1)), (3, 3), "raw samples kept, every run");

    // A baseline a hundred times cheaper and faster: now is a regression, exit 1. (A hundred,
    // not ten: a run of a few milliseconds on a busy machine can be slowed tenfold at a moment,
    // and its wall figure then straddles the tolerance, undecided, #79.)
    let fast = dir.path().join("fast.json");
    shifted(&saved, &fast, 0.01, 100.0);
    let summary = dir.path().join("summary.md");
    let (code, out, err) = guard(
        &["--config", config, "--baseline", fast.to_str().unwrap()],
        &[("GITHUB_STEP_SUMMARY", &summary)],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("REGRESSION in inline, one-worker"), "{out}");
    let markdown = std::fs::read_to_string(&summary).unwrap();
    assert!(markdown.starts_with("### feedbench guard: ❌ regression"), "{markdown}");
    assert!(markdown.contains("| inline | CPU ms/sample |") && markdown.contains("| worse |"));

    // A hundred times costlier and slower: an improvement, exit 0, with how to update the
    // baseline.
    let slow = dir.path().join("slow.json");
    shifted(&saved, &slow, 100.0, 0.01);
    let bench = dir.path().join("bench");
    let args = ["--config", config, "--baseline", slow.to_str().unwrap(), "--json"];
    let (code, out, err) =
        guard(&[&args[..], &["--action-benchmark", bench.to_str().unwrap()]].concat(), &[]);
    assert_eq!(code, 0, "{err}");
    let verdict: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(verdict["outcome"], "improvement", "{verdict}");
    // A guard run carries its workload (per cell) and its host.
    assert_eq!(verdict["cells"][0]["workload"]["hash"].as_str().map(str::len), Some(16));
    assert!(verdict["host"]["cpu"].is_string(), "{verdict}");
    let cpu = &verdict["cells"][0]["cpu_ms_per_sample"];
    // Expected −99 %; the interval's upper end, under a shared machine's noise, well below −50 %.
    assert!(cpu["change"]["high"].as_f64().unwrap() < -50.0 && cpu["decision"] == "lower", "{cpu}");
    let (code, text, _) = guard(&args[..4], &[]);
    assert_eq!(code, 0);
    assert!(text.contains(&format!("--save-baseline {}", slow.display())), "{text}");
    let smaller = read_json(&bench.join("smaller-is-better.json"));
    let bigger = read_json(&bench.join("bigger-is-better.json"));
    assert_eq!(smaller[0]["name"], "inline CPU per sample");
    assert_eq!(
        (smaller[0]["unit"].as_str(), bigger[1]["unit"].as_str()),
        (Some("ms"), Some("samples/s"))
    );
    assert!(
        bigger[1]["value"].as_f64().unwrap() > 0.0
            && bigger[1]["range"].as_str().unwrap().starts_with("± ")
    );
}

/// Saves a baseline for `config` into `dir/base.json`.
fn save(dir: &Path, config: &Path) -> PathBuf {
    let saved = dir.join("base.json");
    let (code, _, err) = guard(
        &["--config", config.to_str().unwrap(), "--save-baseline", saved.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    saved
}

#[test]
fn unusable_baselines_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, config) = setup(dir.path());
    let config = config.to_str().unwrap();
    let check = |baseline: &Path, expected: &str| {
        let (code, out, err) =
            guard(&["--config", config, "--baseline", baseline.to_str().unwrap()], &[]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.starts_with("error: ") && err.contains(baseline.to_str().unwrap()), "{err}");
        assert!(err.contains(expected), "expected {expected:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    };
    check(&dir.path().join("none.json"), "no baseline here; save one first with --save-baseline");
    let saved = save(dir.path(), Path::new(config));
    let text = std::fs::read_to_string(&saved).unwrap();
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    check(&cut, "not a baseline: invalid JSON");
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, "{\"workers\": 2}").unwrap();
    check(&foreign, "not a feedbench guard baseline");
    let future = dir.path().join("future.json");
    std::fs::write(
        &future,
        text.replace("\"feedbench_guard_baseline\": 1", "\"feedbench_guard_baseline\": 7"),
    )
    .unwrap();
    check(&future, "baseline format 7, this feedbench reads format 1");
    let corrupt = dir.path().join("corrupt.json");
    std::fs::write(
        &corrupt,
        text.replacen("\"cpu_ms_per_sample\": ", "\"cpu_ms_per_sample\": \"fast\", \"x\": ", 1),
    )
    .unwrap();
    check(&corrupt, "corrupt baseline at cells[0].runs[0].cpu_ms_per_sample");
    let mut record: Value = serde_json::from_str(&text).unwrap();
    record["cells"][1]["reference_ms"].as_array_mut().unwrap().pop();
    let short = dir.path().join("short.json");
    std::fs::write(&short, record.to_string()).unwrap();
    check(&short, "cell \"one-worker\" has 3 runs and 2 reference measurements");
    let renamed = dir.path().join("renamed.json");
    std::fs::write(&renamed, text.replace("\"one-worker\"", "\"two-workers\"")).unwrap();
    check(&renamed, "the baseline has no cell \"one-worker\" (it has inline, two-workers)");
    let knobs = dir.path().join("knobs.json");
    std::fs::write(&knobs, text.replacen("\"batch\": 4", "\"batch\": 8", 1)).unwrap();
    check(&knobs, "cell \"inline\" has other knobs than in the baseline");
}

#[test]
fn another_host_is_refused_unless_allowed_and_another_dataset_is_another_workload() {
    let dir = tempfile::tempdir().unwrap();
    let (root, config) = setup(dir.path());
    let saved = save(dir.path(), &config);
    let mut record = read_json(&saved);
    let workload = record["cells"][0]["workload"].clone();
    assert_eq!(workload["hash"].as_str().unwrap().len(), 16, "{workload}");
    assert_eq!(workload["parameters"]["batch"], "4", "{workload}");
    record["machine"]["cpu"] = "Some Other CPU".into();
    let other = dir.path().join("other.json");
    std::fs::write(&other, record.to_string()).unwrap();
    let args = |baseline: &Path| {
        vec![
            "--config".to_string(),
            config.display().to_string(),
            "--baseline".into(),
            baseline.display().to_string(),
            "--tolerance".into(),
            "99%".into(),
        ]
    };
    let run = |args: Vec<String>| guard(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let (code, _, err) = run(args(&other));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("another host (CPU \"Some Other CPU\" then"), "{err}");
    assert!(err.contains("--allow-other-host"), "{err}");
    let (code, out, err) = run([args(&other), vec!["--allow-other-host".into()]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("warning: judged against another host (--allow-other-host): CPU"),
        "{out}"
    );
    let allowed = [args(&other), vec!["--allow-other-host".into(), "--strict".into()]].concat();
    let (code, _, err) = run(allowed);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--strict: judged against another host"), "{err}");

    // The same dataset written again is the same dataset; a changed file is another workload.
    let (code, out, _) = run(args(&saved));
    assert_eq!(code, 0);
    assert!(!out.contains("warning"), "{out}");
    let data =
        std::fs::read_dir(root.join("data/chunk-000")).unwrap().next().unwrap().unwrap().path();
    let bytes = std::fs::read(&data).unwrap();
    std::fs::write(&data, &bytes).unwrap();
    let (code, _, err) = run(args(&saved));
    assert_eq!(code, 0, "a new mtime is no change: {err}");
    let info = root.join("meta/info.json");
    let mut meta = std::fs::read(&info).unwrap();
    meta.push(b' ');
    std::fs::write(&info, &meta).unwrap();
    let (code, _, err) = run(args(&saved));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("measures another workload") && err.contains("dataset.bytes"), "{err}");
    assert!(err.contains("dataset.sha256"), "{err}");
}

#[test]
fn one_workload_hashes_alike_in_two_directories() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let workloads: Vec<Value> = [a.path(), b.path()]
        .iter()
        .map(|dir| {
            let (_, config) = setup(dir);
            read_json(&save(dir, &config))["cells"]
                .as_array()
                .unwrap()
                .iter()
                .map(|cell| cell["workload"]["hash"].clone())
                .collect()
        })
        .collect();
    assert_eq!(workloads[0], workloads[1]);
    let hashes = workloads[0].as_array().unwrap();
    assert!(hashes.windows(2).all(|w| w[0] != w[1]), "each cell its own work: {hashes:?}");
}

#[test]
fn bad_flags_and_configs_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (_, config) = setup(dir.path());
    let config = config.to_str().unwrap();
    let (code, _, err) = guard(&["--config", config], &[]);
    assert_eq!(code, 2, "neither --baseline nor --save-baseline: {err}");
    let (code, _, err) =
        guard(&["--config", config, "--baseline", "b.json", "--tolerance", "ten"], &[]);
    assert!(code == 2 && err.contains("tolerance \"ten\""), "{err}");
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[dataset]\npath = \"ds\"\n[[cell]]\nname = \"a\"\nworkers = 0\nbatch = 0\n",
    )
    .unwrap();
    let (code, _, err) =
        guard(&["--config", bad.to_str().unwrap(), "--save-baseline", "b.json"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.toml") && err.contains("cell.batch 0: expected at least 1"), "{err}");
    assert!(!dir.path().join("b.json").exists() && !Path::new("b.json").exists());
    // Where a baseline cannot be saved is said up front (checked before measuring).
    for (target, expected) in [
        (dir.path().to_path_buf(), "is a directory: --save-baseline takes a file"),
        (dir.path().join("guard.toml/b.json"), "guard.toml is not a directory"),
    ] {
        let (code, out, err) =
            guard(&["--config", config, "--save-baseline", target.to_str().unwrap()], &[]);
        assert_eq!(code, 2, "{out}{err}");
        assert!(err.contains(expected) && err.starts_with("error: "), "{err}");
    }
    // So is an --action-benchmark that is a file, and nothing is measured or saved.
    let saved = dir.path().join("never.json");
    let args =
        ["--config", config, "--save-baseline", saved.to_str().unwrap(), "--action-benchmark"];
    let (code, _, err) = guard(&[&args[..], &[config]].concat(), &[]);
    assert!(code == 2 && err.contains("exists and is not a directory"), "{err}");
    assert!(!saved.exists(), "refused before measuring, so nothing saved: {err}");
}

#[test]
fn a_dataset_generated_again_has_the_same_fingerprint() {
    use feedbench::bench::compare::guard::record::DatasetFingerprint;
    let dir = tempfile::tempdir().unwrap();
    let fingerprint = |name: &str| {
        let out = dir.path().join(name);
        common::synth_pusht(&out, 2, 12, &[]);
        DatasetFingerprint::of(&out).unwrap()
    };
    let (first, again) = (fingerprint("a"), fingerprint("b"));
    assert_eq!(first, again, "CI regenerates its dataset: the same bytes, the same fingerprint");
    assert!(first.files >= 5 && first.bytes > 1000, "{first:?}");
}

#[test]
fn the_ci_workflow_calls_the_guard_with_flags_it_has() {
    let workflow = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/ci/loader-guard.yml");
    let workflow = std::fs::read_to_string(workflow).unwrap();
    let (ok, help, _) = common::feedbench(&["guard", "--help"]);
    assert!(ok);
    // Each invocation may continue on the next line (a trailing backslash).
    let calls: Vec<String> = workflow
        .split("./target/release/feedbench guard")
        .skip(1)
        .map(|rest| rest.split("\n").take(3).collect::<Vec<_>>().join(" ").replace('\\', " "))
        .collect();
    assert_eq!(calls.len(), 2, "a guard against the baseline and a save: {workflow}");
    for call in &calls {
        for flag in call.split_whitespace().filter(|w| w.starts_with("--")) {
            assert!(help.contains(&format!("{flag} ")), "{flag} is not a guard flag: {call}");
        }
        assert!(call.contains("--config configs/guard.toml"), "{call}");
        assert!(call.contains("--history") && call.contains("--commit"), "{call}");
    }
    assert!(Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/guard.toml").is_file());
}

#[test]
fn lerobot_train_runs_are_guarded_with_either_reader_on_the_configs_dataset() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = crate::feedbench_dataset::python_package(dir.path());
    // The run's own arguments less its dataset: the guard's [dataset] is added to them.
    let run: Vec<String> = crate::lerobot_train::diffusion_run(dir.path())
        .into_iter()
        .filter(|arg| !arg.starts_with("--dataset."))
        .collect();
    let cells = |run: &str| {
        ["lerobot-train", "feedbench-lerobot-train"]
            .map(|loader| {
                format!(
                    "[[cell]]\nname = \"{loader}\"\nloader = \"{loader}\"\npython = {:?}\n\
                     lerobot_train = {run:?}\nworkers = 0\nbatch = 4\n",
                    python.display()
                )
            })
            .concat()
    };
    let config = dir.path().join("guard.toml");
    let head = "[dataset]\npath = \"pusht\"\n[run]\nrepeats = 3\nbatches = 2\nwarmup = 1\n";
    std::fs::write(&config, format!("{head}{}", cells(&run.join(" ")))).unwrap();
    let saved = dir.path().join("base.json");
    let env = [("PYTHONPATH", package.as_path())];
    let args = ["--config", config.to_str().unwrap()];
    let (code, out, err) =
        guard(&[&args[..], &["--save-baseline", saved.to_str().unwrap()]].concat(), &env);
    assert_eq!(code, 0, "{out}{err}");
    let record = read_json(&saved);
    // The host names the LeRobot that read, as its driver said.
    let lerobot = record["machine"]["lerobot"].as_str().unwrap_or_default();
    assert!(lerobot.starts_with("0.") && lerobot.contains(" (torch "), "{}", record["machine"]);
    for (i, loader) in ["lerobot-train", "feedbench-lerobot-train"].into_iter().enumerate() {
        let cell = &record["cells"][i];
        assert_eq!(cell["cell"]["loader"], loader, "{cell}");
        for run in cell["runs"].as_array().unwrap() {
            assert!(run["samples_per_s"].as_f64().unwrap() > 0.0, "{run}");
            assert!(run["instructions_per_sample"].is_null(), "LeRobot's start-up counted: {run}");
        }
    }

    // A run that names another dataset than the config's is refused before measuring.
    let elsewhere = dir.path().join("other");
    common::synth_pusht(&elsewhere, 3, 30, &[]);
    let other = format!(
        "{} --dataset.repo_id=local/other --dataset.root={}",
        run.join(" "),
        elsewhere.display()
    );
    std::fs::write(&config, format!("{head}{}", cells(&other))).unwrap();
    let (code, _, err) =
        guard(&[&args[..], &["--save-baseline", saved.to_str().unwrap()]].concat(), &env);
    assert!(
        code == 2
            && err.contains(&format!("the run reads {} but [dataset] is", elsewhere.display())),
        "{err}"
    );
}

#[test]
fn a_cell_whose_loader_starves_its_step_fails_its_min_au_and_a_fed_one_passes() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    // Half-millisecond steps replayed from a file, fed by the main thread itself (no worker):
    // every step waits for its batch to be made. A 40 ms step fed by a worker never does.
    std::fs::write(dir.path().join("steps.txt"), "0.5\n0.4\n0.6\n").unwrap();
    let config = dir.path().join("au.toml");
    std::fs::write(
        &config,
        "[dataset]\npath = \"ds\"\n[run]\nrepeats = 3\nbatches = 4\n\
         [[cell]]\nname = \"fed\"\nwindow = \"none\"\nworkers = 1\nbatch = 4\n\
         step = \"synthetic:40ms\"\nmin_au = 80\n\
         [[cell]]\nname = \"starved\"\nwindow = \"none\"\nworkers = 0\nbatch = 4\n\
         step_from = \"steps.txt\"\nmin_au = 99\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let baseline = dir.path().join("b.json");
    let baseline = baseline.to_str().unwrap();
    let (code, _, err) = guard(&["--config", config, "--save-baseline", baseline], &[]);
    assert_eq!(code, 0, "{err}");
    // A tolerance no speed change reaches: only the AU decides.
    let judged = ["--config", config, "--baseline", baseline, "--tolerance", "95%"];
    let (code, out, err) = guard(&judged, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAIL in starved: the step's accelerator utilisation below"), "{out}");
    let line =
        out.lines().find(|l| l.starts_with("starved: AU ")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("95 % CI") && line.ends_with("below its min_au 99 %"), "{line}");
    assert!(out.lines().any(|l| l.starts_with("fed: AU ") && l.contains("at least its")), "{out}");
    let (_, json, _) = guard(&[&judged[..], &["--json"]].concat(), &[]);
    let verdict: Value = serde_json::from_str(&json).unwrap();
    let au = |cell: usize| verdict["cells"][cell]["au"].clone();
    assert_eq!(
        (au(0)["outcome"].as_str(), au(1)["outcome"].as_str()),
        (Some("pass"), Some("regression"))
    );
    assert!(au(1)["median_pct"].as_f64().unwrap() < 99.0, "{}", au(1));
    assert!(au(0)["median_pct"].as_f64().unwrap() >= 80.0, "{}", au(0));
    // --step-from gives every cell that step: another workload than the baseline's, refused
    // naming the step; against a baseline of that step, the starved cell still fails its line.
    let steps = dir.path().join("steps.txt");
    let step_from = ["--step-from", steps.to_str().unwrap()];
    let (code, _, err) = guard(&[&judged[..], &step_from].concat(), &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cell \"fed\" measures another workload"), "{err}");
    assert!(err.contains("step synthetic:40ms then → absent now"), "{err}");
    let replayed = dir.path().join("replayed.json");
    let replayed = replayed.to_str().unwrap();
    let save = ["--config", config, "--save-baseline", replayed];
    let (code, _, err) = guard(&[&save[..], &step_from].concat(), &[]);
    assert_eq!(code, 0, "{err}");
    let judged = ["--config", config, "--baseline", replayed, "--tolerance", "95%"];
    let (code, out, err) = guard(&[&judged[..], &step_from].concat(), &[]);
    assert_eq!(code, 1, "{out}{err}");
    let failed = out.lines().find(|l| l.starts_with("FAIL in ")).unwrap_or_default();
    assert!(failed.contains("starved"), "{out}");
    // A least AU needs a step, within 0 to 100; a step is a stand-in of fixed length.
    let bad = dir.path().join("bad.toml");
    for (cell, expected) in [
        ("min_au = 90\n", "min_au needs a step to feed"),
        ("step = \"synthetic:5ms\"\nmin_au = 120\n", "min_au = 120: expected a percentage"),
        ("step = \"none\"\n", "step = \"none\": expected a stand-in of fixed length"),
        ("step_from = \"nowhere.log\"\n", "step_from"),
        ("step = \"synthetic:5ms\"\nstep_from = \"steps.txt\"\n", "give one"),
    ] {
        std::fs::write(
            &bad,
            format!(
                "[dataset]\npath = \"ds\"\n[[cell]]\nname = \"a\"\nworkers = 0\nbatch = 4\n{cell}"
            ),
        )
        .unwrap();
        let (code, _, err) =
            guard(&["--config", bad.to_str().unwrap(), "--save-baseline", baseline], &[]);
        assert!(code == 2 && err.contains("bad.toml") && err.contains(expected), "{cell}: {err}");
    }
}

/// A history file this user cannot write is refused before anything runs, naming it, and
/// left as it was. As root (CI), the guard runs as `nobody` (setpriv), for whom a file of
/// root's with mode 0444 is read-only; as another user, the mode alone makes it so.
#[test]
fn a_history_that_cannot_be_written_is_refused_and_left_as_it_was() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let (_, config) = setup(dir.path());
    let history = dir.path().join("history.jsonl");
    std::fs::write(&history, "").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&history, std::fs::Permissions::from_mode(0o444)).unwrap();
    let feedbench = env!("CARGO_BIN_EXE_feedbench");
    // SAFETY: geteuid has no preconditions and cannot fail.
    let mut command = match unsafe { libc::geteuid() } {
        0 => {
            let mut command = Command::new("setpriv");
            command.args(["--reuid=65534", "--regid=65534", "--clear-groups", feedbench]);
            command
        }
        _ => Command::new(feedbench),
    };
    let output = command
        .args(["guard", "--config", config.to_str().unwrap()])
        .args(["--history", history.to_str().unwrap()])
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("history.jsonl: cannot be written"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_to_string(&history).unwrap(), "", "left as it was");
}

#[test]
fn a_history_names_a_shift_its_baseline_would_pass_and_an_accepted_level_starts_anew() {
    let dir = tempfile::tempdir().unwrap();
    let (_, config) = setup(dir.path());
    let config = config.to_str().unwrap();
    let history = dir.path().join("history.jsonl");
    let history = history.to_str().unwrap();
    let with = |extra: &[&str]| -> Vec<String> {
        let head = ["--config", config, "--history", history];
        head.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |args: &[String]| guard(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let first_baseline = dir.path().join("b0.json");
    let first_baseline = first_baseline.to_str().unwrap();
    let (code, out, err) = run(&with(&["--commit", "first", "--save-baseline", first_baseline]));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("history of inline: not enough history yet: 1 run of this workload"),
        "{out}"
    );
    // Ten earlier runs a hundred times as fast as this machine's first, then two at its level:
    // this run is the third of a level far lower, whatever the noise of a debug build beside
    // the other tests (a first run three times slower than the next was seen).
    let line: Value =
        serde_json::from_str(std::fs::read_to_string(history).unwrap().trim()).unwrap();
    let mut lines = String::new();
    for n in 0..12 {
        let mut run = line.clone();
        run["commit"] = format!("c{n}").into();
        run["date"] = (1_700_000_000 + n * 86_400).into();
        for cell in run["cells"].as_array_mut().unwrap() {
            let scale = if n < 10 { 100.0 + (n % 3) as f64 } else { 1.0 };
            cell["value"] = (cell["value"].as_f64().unwrap() * scale).into();
        }
        lines.push_str(&format!("{run}\n"));
    }
    std::fs::write(history, &lines).unwrap();
    let page = dir.path().join("guard.html");
    let page = page.to_str().unwrap();
    let judged =
        ["--commit", "now", "--baseline", first_baseline, "--tolerance", "99%", "--html", page];
    let (code, out, err) = run(&with(&judged));
    let html = std::fs::read_to_string(page).unwrap();
    assert!(html.contains("The history: each run of this workload"), "the page plots it");
    assert!(html.contains("c10") && html.contains("shift begins"), "commits on hover, marked");
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("within the 99% tolerance of the baseline, but the history regressed"),
        "{out}"
    );
    let said = "REGRESSION in inline by its history: samples/s (at the machine's speed) -";
    assert!(out.contains(said), "{out}");
    assert!(out.contains("since c10 (2023-11-"), "the shift's first run: {out}");
    assert!(out.contains("3 runs ago") && out.contains("--accept"), "{out}");
    let kept = std::fs::read_to_string(history).unwrap();
    assert!(kept.starts_with(&lines) && kept.lines().count() == 13, "appended, nothing lost");
    let cells = out.lines().filter(|l| l.contains("by its history") || l.starts_with("history of"));
    assert_eq!(cells.count(), 2, "a line for every cell: {out}");
    // The JSON says as much, and a GitHub step's summary.
    let summary = dir.path().join("summary.md");
    let args = with(&["--json"]);
    let (code, json, _) = guard(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &[("GITHUB_STEP_SUMMARY", &summary)],
    );
    assert_eq!(code, 1);
    let said = std::fs::read_to_string(&summary).unwrap();
    assert!(said.starts_with("### feedbench guard: ❌ regression by its history"), "{said}");
    assert!(said.contains("REGRESSION in inline by its history") && said.contains("since c10"));
    assert!(
        said.contains(&format!("`feedbench guard --config {config} --history {history} --accept`")),
        "{said}"
    );
    let verdict: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(verdict["regression"], true, "{verdict}");
    assert_eq!(verdict["cells"][0]["shift"]["commit"], "c10", "{verdict}");
    // Accepted: a new level, nothing to read since.
    let (code, out, err) = run(&with(&["--accept"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("not enough history yet: 1 run"), "{out}");
    // A history that is none is refused before anything runs, and left as it was.
    let foreign = dir.path().join("foreign.jsonl");
    std::fs::write(&foreign, "{\"workers\": 2}\n").unwrap();
    let (code, _, err) = guard(&["--config", config, "--history", foreign.to_str().unwrap()], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("foreign.jsonl: line 1: not a feedbench guard run"), "{err}");
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "{\"workers\": 2}\n");
    let (code, _, err) = guard(&["--config", config, "--accept"], &[]);
    assert_eq!(code, 2, "--accept needs --history: {err}");
    // A baseline that follows each run: judged against the last, then saved as the next.
    let (first, next) = (dir.path().join("b1.json"), dir.path().join("b2.json"));
    let (first, next) = (first.to_str().unwrap(), next.to_str().unwrap());
    assert_eq!(guard(&["--config", config, "--save-baseline", first], &[]).0, 0);
    let rolling = ["--config", config, "--baseline", first, "--save-baseline", next];
    let (code, out, err) = guard(&[&rolling[..], &["--tolerance", "99%"]].concat(), &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("saved this run as the next baseline {next}")), "{out}");
    assert_ne!(read_json(Path::new(first)), read_json(Path::new(next)), "a new run saved");
}
