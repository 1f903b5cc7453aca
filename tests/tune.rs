//! `feedbench tune` end to end on a generated video dataset with synthetic steps of very
//! different lengths: a long step is fed by fewer workers than a short one (which the cores
//! bound), budgets and flags it cannot take are refused before measuring, a killed tune resumes
//! without measuring anything twice and `report` re-renders it, with `--loader lerobot` it
//! prints LeRobot's training flags, and given a run's accelerate launch line it reads the ranks
//! from it and prints the line back with its workers set.

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use feedbench::bench::sweep::results::read_results;

/// A small PushT-shaped dataset (AV1, 96×96) under `dir`.
fn dataset(dir: &Path) -> PathBuf {
    let root = dir.join("pusht");
    common::synth_pusht(&root, 3, 80, &[]);
    root
}

/// `tune` on `root` with a step of `step_ms`, short phases, two cores, into `out`.
fn tune_args<'a>(root: &'a Path, out: &'a Path, step_ms: &'a str) -> Vec<&'a str> {
    vec![
        "tune",
        root.to_str().unwrap(),
        "--batch",
        "16",
        "--step-ms",
        step_ms,
        "--cpus",
        "2",
        "--memory",
        "4GB",
        "--loader-batches",
        "8",
        "--train-steps",
        "10",
        "--warmup",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]
}

fn answer(stdout: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(stdout).expect("tune --json prints JSON")["answer"]
        .clone()
}

/// Tune with a `step_ms` step into `out`, `--json` and `extra` flags: the answer and stderr
/// (the progress lines).
fn tune_json(
    root: &Path,
    out: &Path,
    step_ms: &str,
    extra: &[&str],
) -> (serde_json::Value, String) {
    let mut args = tune_args(root, out, step_ms);
    args.push("--json");
    args.extend_from_slice(extra);
    let (ok, stdout, err) = common::feedbench(&args);
    assert!(ok, "{err}");
    (answer(&stdout), err)
}

#[test]
fn a_long_step_is_fed_by_fewer_workers_than_a_short_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let (long_out, short_out) = (dir.path().join("long"), dir.path().join("short"));
    // A knob tune keeps fixed reaches every configuration it measures.
    let (long, err) = tune_json(&root, &long_out, "1000", &["--drop-n-last-frames", "3"]);
    assert_eq!(
        long["bound"]["bound"], "step",
        "a 1000 ms step (inline loading ≈ 2 % of it) is fed: {long}"
    );
    assert!(err.contains("tune: measuring 1 × prefetch 2"), "a line per measurement: {err}");

    // A step that sleeps: the headspace, and no slowdown beside the workers to judge.
    assert!(long["step_beside"]["headspace_pct"].as_f64().is_some(), "{long}");
    assert!(long["step_beside"]["with_workers"].is_null(), "{long}");
    let kept = std::fs::read_to_string(long_out.join("sweep.toml")).unwrap();
    assert!(kept.contains("drop_n_last_frames = 3"), "{kept}");
    assert_eq!(long["knobs"]["config"]["drop_n_last_frames"], 3, "and the answer's flags: {long}");
    let (short, _) = tune_json(&root, &short_out, "1", &[]);
    assert_eq!(short["bound"]["bound"], "cpus", "a 1 ms step outruns two cores: {short}");
    // tune.json says what work was tuned: the knobs kept, not the ones searched; another
    // step is another workload.
    let tuned = |out: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap()
    };
    let (long_work, short_work) =
        (tuned(&long_out)["workload"].clone(), tuned(&short_out)["workload"].clone());
    let parameters = &short_work["parameters"];
    assert!(parameters["workers"].is_null() && parameters["prefetch"].is_null(), "{short_work}");
    assert_eq!(parameters["batch_size"], "16", "{short_work}");
    assert_ne!(long_work["hash"], short_work["hash"], "another step: {long_work} {short_work}");
    let host = tuned(&short_out)["host"].clone();
    assert!(host["cpu"].is_string() && host["cores"].as_u64() > Some(0), "{host}");
    assert!(short["wait_ms_per_step"].as_f64().is_some_and(|ms| ms >= 0.0), "{short}");
    // The prediction from the two rates: the short step needs more workers than the long.
    // The measured answer may tie (on two cores, loading inline can be as fast as two
    // workers), so it is held only to "no more workers for the longer step".
    // null: no count of workers feeds it.
    let predicted = |a: &serde_json::Value| a["beyond"][0]["workers"].as_u64().unwrap_or(u64::MAX);
    assert!(predicted(&long) < predicted(&short), "long {long}\nshort {short}");
    let workers = |a: &serde_json::Value| a["workers"].as_u64().unwrap();
    assert!(workers(&long) <= workers(&short), "long {long}\nshort {short}");
    assert!(workers(&short) <= 2, "within --cpus 2: {short}");
    // Every measurement is a cell of the sweep's schema, each once.
    let results = read_results(&short_out.join("results.jsonl")).unwrap();
    let ids: HashSet<String> = results.iter().map(|r| r.cell.id()).collect();
    assert_eq!(ids.len(), results.len(), "no configuration measured twice");
    assert!(results.iter().all(|r| r.cell.knobs.workers <= 2 && r.cell.knobs.batch_size == 16));
    // The loader alone is measured where the rate model reads it (one worker, the second's
    // share), and nowhere else: the other configurations are verified by training, and may
    // end once their interval decides, after half their steps.
    for out in [&short_out, &long_out] {
        let results = read_results(&out.join("results.jsonl")).unwrap();
        let tuned: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
        let steps = tuned["steps"].as_array().unwrap();
        assert_eq!(steps.len(), results.len());
        for (r, step) in results.iter().zip(steps) {
            let why = step["why"].as_str().unwrap();
            let rate_model = why.contains("cost per sample") || why.contains("second worker");
            assert_eq!(r.loader.is_some(), rate_model, "{}: {why}", r.cell.id());
            // At least twice the batches in flight (the queue the warm-up filled is not what
            // is measured), at most twice that or --train-steps.
            let in_flight = r.cell.knobs.workers.max(1) * r.cell.knobs.prefetch + 1;
            let least = (2 * in_flight).max(3);
            let most = (2 * least).max(10);
            let steps = r.train.steps;
            assert!((least.min(5)..=most).contains(&steps), "{}: {steps} steps", r.cell.id());
        }
    }
}

/// Each measurement ends once it has answered what it is measured for, and the answer is the
/// one a tune that measures every configuration for all its batches and steps gives; that one
/// runs every phase to its length and says so.
#[test]
fn ending_measurements_early_answers_as_measuring_them_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let (early_out, full_out) = (dir.path().join("early"), dir.path().join("full"));
    // A 100 ms step: one worker feeds it, loading inline (≈ 20 ms a batch) does not.
    let (early, _) = tune_json(&root, &early_out, "100", &[]);
    let (full, _) = tune_json(&root, &full_out, "100", &["--full-length"]);
    let knobs = |a: &serde_json::Value| (a["workers"].as_u64(), a["prefetch"].as_u64());
    assert_eq!(knobs(&early), knobs(&full), "early {early}\nfull {full}");
    let tuned = |out: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap()
    };
    assert_eq!(tuned(&full_out)["full_length"], true);
    assert!(tuned(&early_out).get("full_length").is_none(), "said only where it is so");
    let steps = |out: &Path| -> Vec<usize> {
        read_results(&out.join("results.jsonl")).unwrap().iter().map(|r| r.train.steps).collect()
    };
    let (early_steps, full_steps) = (steps(&early_out), steps(&full_out));
    // --train-steps 10, raised to twice the least (twice the batches in flight): 12 at one
    // worker × prefetch 2.
    for (r, &n) in read_results(&full_out.join("results.jsonl")).unwrap().iter().zip(&full_steps) {
        let in_flight = r.cell.knobs.workers.max(1) * r.cell.knobs.prefetch + 1;
        assert_eq!(n, 10.max(4 * in_flight), "{}: every step", r.cell.id());
        if let Some(loader) = &r.loader {
            assert_eq!(loader.batches, 8.max(2 * in_flight), "{}: every batch", r.cell.id());
        }
    }
    let sum = |v: &[usize]| v.iter().sum::<usize>();
    assert!(sum(&early_steps) < sum(&full_steps), "early {early_steps:?}, full {full_steps:?}");
}

#[test]
fn what_tune_cannot_do_is_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let out = dir.path().join("out");
    let mut args = tune_args(&root, &out, "100");
    args[9] = "1KB";
    let (ok, _, err) = common::feedbench(&args);
    assert!(!ok);
    assert!(err.contains("memory budget (0.00 GB) is below one worker's batches"), "{err}");
    assert!(!out.exists(), "nothing written: {err}");

    let mut args = tune_args(&root, &out, "100");
    args.extend(["--workers", "2"]);
    let (ok, _, err) = common::feedbench(&args);
    assert!(!ok && err.contains("--workers is not a flag of tune"), "{err}");
    let (ok, _, err) = common::feedbench(&[
        "tune",
        root.to_str().unwrap(),
        "--step-ms",
        "10",
        "--model",
        "diffusion",
    ]);
    assert!(!ok && err.contains("--step-ms") && err.contains("--model"), "{err}");
    let mut args = tune_args(&root, &out, "-3");
    args[4] = "--step-ms=-3";
    args.remove(5);
    let (ok, _, err) = common::feedbench(&args);
    assert!(!ok && err.contains("expected a step time in ms above 0"), "{err}");
    let mut args = tune_args(&root, &out, "10");
    args.extend(["--target", "80%"]);
    let (ok, _, err) = common::feedbench(&args);
    assert!(!ok && err.contains("percentage from 0 to 50"), "{err}");
    assert!(!out.exists());
}

#[test]
fn a_killed_tune_resumes_without_measuring_twice() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let out = dir.path().join("tune");
    let results = out.join("results.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(tune_args(&root, &out, "300"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let first_cell = || std::fs::read_to_string(&results).is_ok_and(|t| t.lines().count() >= 1);
    while !first_cell() {
        assert!(start.elapsed() < Duration::from_secs(300), "no cell within 5 minutes");
        assert!(child.try_wait().unwrap().is_none(), "tune ended before its first cell");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    let before = read_results(&results).unwrap();
    assert!(!before.is_empty());

    let (ok, _, err) = common::feedbench(&tune_args(&root, &out, "300"));
    assert!(!ok && err.contains("--resume"), "results there are not measured over: {err}");
    let mut resume = tune_args(&root, &out, "300");
    resume.push("--resume");
    let (ok, stdout, err) = common::feedbench(&resume);
    assert!(ok, "{err}");
    assert!(err.contains("(measured before)"), "the first cell is read back: {err}");
    assert!(stdout.contains("Flags (feedbench): --workers"), "{stdout}");
    let after = read_results(&results).unwrap();
    let ids: HashSet<String> = after.iter().map(|r| r.cell.id()).collect();
    assert_eq!(ids.len(), after.len(), "nothing measured twice");
    assert_eq!(after[..before.len()].len(), before.len());
    for (a, b) in before.iter().zip(&after) {
        assert_eq!(a.cell, b.cell, "finished cells kept as they were");
    }
    assert!(out.join("tune.json").is_file());

    // `report` re-renders the tune from its cells.
    let (ok, report, err) = common::feedbench(&["report", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(report.contains("workers"), "{report}");
}

#[test]
fn with_lerobots_loader_the_answer_is_lerobots_training_flags() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let out = dir.path().join("tune");
    let mut args = tune_args(&root, &out, "200");
    args.extend(["--loader", "lerobot", "--python", python.to_str().unwrap()]);
    let (ok, stdout, err) = common::feedbench(&args);
    assert!(ok, "{err}");
    assert!(stdout.contains("Flags (lerobot-train): --num_workers="), "{stdout}");
    assert!(stdout.contains("--batch_size=16"), "{stdout}");
    // lerobot-train's prefetch of 4 is lowered only where it was measured and lost.
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    let lost = tuned["answer"]["default_prefetch_lost"].as_bool().unwrap();
    assert_eq!(stdout.contains("--prefetch_factor="), lost, "{stdout}");
    assert!(!stdout.contains("--workers "), "no feedbench flag: {stdout}");
}

#[test]
fn n_ranks_share_the_cores_and_each_gets_its_part() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    // A 1 ms step outruns two cores: one process takes both, two ranks one each.
    let (one, _) = tune_json(&root, &dir.path().join("one"), "1", &[]);
    let (two, err) = tune_json(&root, &dir.path().join("two"), "1", &["--processes", "2"]);
    let split =
        |a: &serde_json::Value| (a["knobs"]["processes"].as_u64(), a["budgets"]["cpus"].as_u64());
    assert_eq!((split(&one), split(&two)), ((Some(1), Some(2)), (Some(2), Some(1))));
    // Each answer stays within its rank's part of the cores. The two answers are not compared
    // with each other: each is measured, and on two loaded cores the single process may find
    // one worker no surer a gain than loading inline (CI saw 0 for one rank, 1 for two).
    let workers = |a: &serde_json::Value| a["workers"].as_u64().unwrap();
    assert!(2 * workers(&two) <= 2, "two ranks' workers fit the two cores: {two}");
    assert!(workers(&one) <= 2, "one process's workers fit the two cores: {one}");
    assert!(err.contains("per rank, 2 ranks sharing the box (predicted"), "{err}");
    let (ok, stdout, _) = common::feedbench(
        &[&tune_args(&root, &dir.path().join("text"), "1")[..], &["--processes", "2"]].concat(),
    );
    assert!(ok && stdout.contains("Per rank, for 2 ranks sharing this box (1 core"), "{stdout}");
    // More ranks than cores leave a rank nothing.
    let three = dir.path().join("three");
    let mut args = tune_args(&root, &three, "1");
    args.extend(["--processes", "3"]);
    let (ok, _, err) = common::feedbench(&args);
    assert!(!ok && err.contains("--processes 3: 3 ranks on 2 cores"), "{err}");
}

#[test]
fn a_budget_that_runs_out_gives_the_best_answer_so_far_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    // The first configuration is measured whatever the budget; nothing after it fits in 1 s.
    let out = dir.path().join("out");
    let (ok, stdout, err) =
        common::feedbench(&[&tune_args(&root, &out, "100")[..], &["--budget", "1s"]].concat());
    assert!(ok, "{err}");
    assert!(err.contains("tune: the budget ran out after"), "{err}");
    assert!(stdout.contains("The 1 s budget ran out before the search decided"), "{stdout}");
    assert!(
        stdout.contains("Flags (feedbench): --workers 1"),
        "one worker, the one measured: {stdout}"
    );
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    assert_eq!(
        (tuned["budget_ran_out"].as_bool(), tuned["budget_s"].as_f64()),
        (Some(true), Some(1.0))
    );
    assert_eq!(tuned["steps"].as_array().unwrap().len(), 1);
    assert!(tuned["tune_wall_s"].as_f64().unwrap() >= tuned["measuring_s"].as_f64().unwrap());
    // A budget it never reaches changes nothing: the search decides.
    let (ok, stdout, err) = common::feedbench(
        &[&tune_args(&root, &dir.path().join("long"), "100")[..], &["--budget", "1h"]].concat(),
    );
    assert!(ok && !stdout.contains("budget ran out"), "{stdout}{err}");
    for bad in ["--budget=0s", "--budget=soon", "--budget=-5m"] {
        let (ok, _, err) = common::feedbench(
            &[&tune_args(&root, &dir.path().join("bad"), "100")[..], &[bad]].concat(),
        );
        assert!(!ok && err.contains("expected a wall time above 0"), "{bad}: {err}");
    }
}

#[test]
fn a_launch_line_gives_the_ranks_and_is_printed_back_with_its_workers_set() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("accelerate.yaml");
    let settings = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n\
                    num_machines: 1\nnum_processes: 2\ngpu_ids: all\n";
    std::fs::write(&config, settings).unwrap();
    let launcher =
        format!("accelerate launch --config_file {} $(which lerobot-train)", config.display());
    // A count that contradicts the line's is refused before anything is built.
    let line = format!("{launcher} --policy.type=act");
    let (ok, _, err) = common::feedbench(&["tune", "--lerobot-train", &line, "--processes", "3"]);
    let said = format!(
        "--processes 3, but the launch line starts 2 ranks (num_processes: 2 in {}",
        config.display()
    );
    assert!(!ok && err.contains(&said), "{err}");

    let Some(python) = common::lerobot_python() else { return };
    let line = format!("{launcher} {}", crate::lerobot_train::diffusion_run(dir.path()).join(" "));
    let out = dir.path().join("tune");
    let (ok, stdout, err) = common::feedbench(&[
        "tune",
        "--lerobot-train",
        &line,
        "--python",
        python.to_str().unwrap(),
        "--step-ms",
        "100",
        "--cpus",
        "2",
        "--loader-batches",
        "4",
        "--train-steps",
        "6",
        "--warmup",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    // Each of the 2 ranks the config launches has 1 of the 2 cores.
    assert!(err.contains("up to 1 core") && err.contains("2 ranks sharing the box"), "{err}");
    let flags = stdout.lines().find(|l| l.starts_with("Flags (lerobot-train): ")).expect(&stdout);
    let command = flags.trim_start_matches("Flags (lerobot-train): ");
    let own = format!("{launcher} --dataset.repo_id=local/pusht ");
    assert!(command.starts_with(&own), "the user's line as written: {command}");
    assert_eq!(command.matches("--num_workers=").count(), 1, "{command}");
    assert!(!command.contains("--num_workers=2"), "the run's own 2 replaced: {command}");
    assert!(stdout.contains("Ranks: 2 (num_processes: 2 in "), "{stdout}");
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    let knobs = &tuned["answer"]["knobs"];
    assert_eq!(
        (knobs["processes"].as_u64(), knobs["launcher"].as_str()),
        (Some(2), Some(&launcher[..]))
    );
    // Measured as one rank from the run's arguments alone.
    assert!(!knobs["lerobot_train"].as_str().unwrap().contains("accelerate"), "{knobs}");
}

/// Tune with the step replayed from a file of `times` (ms, drawn from them), one core, 60
/// steps a configuration: the answer.
fn tune_replayed(dir: &Path, root: &Path, name: &str, times: &str) -> serde_json::Value {
    let file = dir.join(format!("{name}.txt"));
    std::fs::write(&file, times).unwrap();
    let out = dir.join(name);
    let args = [
        "tune",
        root.to_str().unwrap(),
        "--batch",
        "16",
        "--step-from",
        file.to_str().unwrap(),
        "--cpus",
        "1",
        "--memory",
        "4GB",
        "--loader-batches",
        "8",
        "--train-steps",
        "60",
        "--warmup",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    let (ok, stdout, err) = common::feedbench(&args);
    assert!(ok, "{err}");
    answer(&stdout)
}

#[test]
fn a_bimodal_step_is_fed_by_a_deeper_prefetch_and_a_constant_one_is_not() {
    let _alone = common::timing_alone();
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    // A 300 ms step, then six of 1 ms, drawn: 43.7 ms on average, which one worker outruns
    // several times over, but a run of short steps takes more batches than prefetch 2 holds.
    let bimodal = tune_replayed(dir.path(), &root, "bimodal", "300\n1\n1\n1\n1\n1\n1\n");
    let demand = &bimodal["demand"];
    assert!((demand["step_ms"].as_f64().unwrap() - 306.0 / 7.0).abs() < 1e-9, "{demand}");
    assert_eq!(demand["varies"]["p95_ms"], 300.0, "{demand}");
    assert!(bimodal["prefetch"].as_u64().unwrap() >= 4, "{bimodal}");
    let depths = bimodal["prefetch_depths"]["measured"].as_array().unwrap();
    let at = |depth: u64| {
        let found = depths.iter().find(|d| d[0].as_u64() == Some(depth));
        found.and_then(|d| d[1].as_f64()).unwrap_or_else(|| panic!("{depth}: {bimodal}"))
    };
    assert!(at(4) > 1.05 * at(2), "prefetch 4 measurably beats 2: {depths:?}");
    assert!(bimodal["prefetch_depths"]["deeper_adds_bytes"].as_u64().unwrap() > 0);
    // The same mean every step: prefetch 2 keeps it fed, and no deeper one is looked for.
    let constant = tune_replayed(dir.path(), &root, "constant", "43.7\n");
    assert_eq!(constant["prefetch"], 2, "{constant}");
    assert!(constant["demand"]["varies"].is_null(), "{constant}");
    assert!(constant["prefetch_depths"].is_null(), "{constant}");
}
