//! Sweeps on a generated parquet-only dataset with synthetic steps: the verdict follows the
//! numbers, results are appended per cell, `--resume` skips finished cells, a trace is written.

use std::path::{Path, PathBuf};

use feedbench::bench::events::{CellPhase, Events, Unwatched};
use feedbench::bench::sweep::config::{ConfigFile, SweepConfig};
use feedbench::bench::sweep::results::{read_results, CellResult, ResultsError, Resume};
use feedbench::bench::sweep::{results_path, run_sweep, SweepError};
use feedbench::dataset::write::{write_tabular, TabularSpec};
use feedbench::measure::verdict::Verdict;

fn dataset(dir: &Path) -> PathBuf {
    let root = dir.join("tabular");
    let spec = TabularSpec { episode_lengths: vec![120; 4], state_dim: 8, ..Default::default() };
    write_tabular(&root, &spec).unwrap();
    root
}

fn config(root: &Path, model: &str, workers: &[usize]) -> SweepConfig {
    let text = format!(
        r#"
        [dataset]
        path = "{}"
        [loader]
        workers = {workers:?}
        batch = [32]
        [model]
        model = ["{model}"]
        device = "cpu"
        [run]
        loader_batches = 4
        model_steps = 3
        train_steps = 4
        warmup = 1
        "#,
        root.display()
    );
    let config: SweepConfig = toml::from_str(&text).unwrap();
    config.check(&root.join("sweep.toml")).unwrap();
    config
}

#[test]
fn the_verdict_follows_the_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    // A step far slower than the loader: the model dominates.
    let out = dir.path().join("slow-model");
    let results =
        run_sweep(&config(&root, "synthetic:150ms", &[2]), &root, &out, Resume::No, &mut Unwatched)
            .unwrap();
    let train = &results[0].train;
    assert_eq!(train.input_bound.verdict, Verdict::NotInputBound, "{train:?}");
    assert!(train.step.median_ms >= 150.0);
    // A step that costs nothing, loading in the training thread: the loader dominates.
    let out = dir.path().join("free-model");
    let results =
        run_sweep(&config(&root, "synthetic:0ms", &[0]), &root, &out, Resume::No, &mut Unwatched)
            .unwrap();
    let train = &results[0].train;
    assert_eq!(train.input_bound.verdict, Verdict::HighlyInputBound, "{train:?}");
    assert!(train.input_bound.median_pct >= 20.0);
    assert!(results[0].model.samples_per_s > results[0].train.samples_per_s);
}

#[test]
fn results_are_appended_per_cell_and_resume_skips_finished_cells() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let out = dir.path().join("sweep");
    let first = run_sweep(&config(&root, "none", &[0, 1]), &root, &out, Resume::No, &mut Unwatched)
        .unwrap();
    assert_eq!(first.len(), 2);
    let stored = read_results(&results_path(&out)).unwrap();
    assert_eq!(stored.iter().map(|r| r.cell.knobs.workers).collect::<Vec<_>>(), [0, 1]);
    assert!(out.join("trace.json").is_file(), "the last cell is traced");

    // Without --resume the results are never overwritten.
    let again = run_sweep(&config(&root, "none", &[0, 1]), &root, &out, Resume::No, &mut Unwatched);
    assert!(matches!(again, Err(SweepError::Results(ResultsError::Exists { .. }))), "{again:?}");
    assert!(again.unwrap_err().to_string().contains("pass --resume to continue it"));

    // A sweep killed while writing leaves a line cut short: resume drops it, measures only
    // the missing cell, and keeps the finished ones as they were.
    let text = std::fs::read_to_string(results_path(&out)).unwrap();
    std::fs::write(results_path(&out), format!("{text}{{\"cell\": {{\"data")).unwrap();
    // A resume with another config (a third worker count) is refused unless asked for; the
    // refusal touches nothing.
    let changed =
        run_sweep(&config(&root, "none", &[0, 1, 2]), &root, &out, Resume::Yes, &mut Unwatched);
    assert!(matches!(changed, Err(SweepError::Results(ResultsError::ConfigChanged { .. }))));
    assert!(changed.unwrap_err().to_string().contains("--allow-changed-config"));
    /// The cells whose loader phase starts, by label.
    struct Started(Vec<String>);
    impl Events for Started {
        fn cell_phase(&mut self, phase: CellPhase<'_>) {
            if phase.phase == "loader" {
                self.0.push(phase.cell.to_string());
            }
        }
    }
    let mut started = Started(Vec::new());
    let extended = Resume::EvenIfConfigChanged;
    let grown = config(&root, "none", &[0, 1, 2]);
    let resumed = run_sweep(&grown, &root, &out, extended, &mut started).unwrap();
    let new_cell = resumed.iter().find(|r| r.cell.knobs.workers == 2).unwrap().cell.label();
    assert_eq!(started.0, [new_cell], "only the new cell is measured");
    assert_eq!(resumed.len(), 3);
    let stored = read_results(&results_path(&out)).unwrap();
    assert_eq!(stored.len(), 3);
    assert_eq!(stored[0].finished_unix_s, first[0].finished_unix_s);
    let alone = |r: &CellResult| r.loader.as_ref().map(|l| l.samples_per_s);
    assert_eq!(alone(&stored[1]), alone(&first[1]));
    assert!(alone(&stored[1]).is_some(), "a sweep measures every cell's loader alone");
}

#[test]
fn the_traced_cell_has_a_track_per_worker_and_the_trainer() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let out = dir.path().join("sweep");
    let mut config = config(&root, "synthetic:5ms", &[2, 0]);
    config.run.trace_cell = Some("2,32".parse().unwrap());
    run_sweep(&config, &root, &out, Resume::No, &mut Unwatched).unwrap();
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("trace.json")).unwrap()).unwrap();
    let mut tracks: Vec<String> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "M")
        .map(|e| e["args"]["name"].as_str().unwrap().to_string())
        .collect();
    tracks.sort();
    assert_eq!(tracks, ["feedbench-worker-0", "feedbench-worker-1", "trainer"]);
}

#[test]
fn a_loader_phase_measures_more_than_the_batches_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    // 2 workers × prefetch 2 hold 5 batches in flight; the config asks for 4 measured ones,
    // which measured the batches the warm-up left ready (at 14 workers: 290 070 samples/s).
    let config = config(&root, "synthetic:0ms", &[2]);
    let results =
        run_sweep(&config, &root, &dir.path().join("out"), Resume::No, &mut Unwatched).unwrap();
    let loader = results[0].loader.as_ref().expect("a loader phase");
    assert_eq!(loader.config.batches_in_flight(), 5);
    assert_eq!(loader.batches, 10, "twice the batches in flight, not the config's 4");
}

#[test]
fn each_result_carries_its_workload_alike_in_two_directories_and_unlike_for_other_knobs() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let workloads = |dir: &Path, workers: &[usize]| -> Vec<_> {
        let root = dataset(dir);
        let out = dir.join(format!("sweep-{workers:?}"));
        run_sweep(&config(&root, "none", workers), &root, &out, Resume::No, &mut Unwatched)
            .unwrap()
            .into_iter()
            .map(|r| r.workload.expect("every result carries its workload"))
            .collect()
    };
    let here = workloads(a.path(), &[0, 1]);
    let there = workloads(b.path(), &[0, 1]);
    assert_eq!(here, there, "one workload, wherever its dataset and results lie");
    assert_ne!(here[0].hash, here[1].hash);
    assert_eq!(here[0].differences(&here[1]), ["workers 0 then → 1 now"]);
    let params = &here[0].parameters;
    assert_eq!(params["train.steps"], "4", "{params:?}");
    assert!(params.contains_key("prefetch") && params["sampler"] == "episode-aware", "{params:?}");
    assert!(params.contains_key("dataset.sha256") && !params.contains_key("repeat"), "{params:?}");
    assert!(params.values().all(|v| !v.contains(&a.path().display().to_string())), "{params:?}");
}
