//! Tests that measure how the processes of one run slow each other (a training step and the
//! loader's workers on the same cores), which another test's processes running beside them
//! would drown: `make test` runs this module after every other test, one test at a time
//! (`cargo test --test tests quiet:: -- --test-threads=1`), and skips it in the first run.

use crate::common;

#[test]
fn a_step_that_computes_slows_beside_the_workers_and_the_answer_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // G1-shaped 640×480 AV1 frames, each decoded and resized to 96×96 for the diffusion step:
    // a worker busy with them shares the two cores with the step's libtorch threads.
    let root = dir.path().join("g1");
    let g1 = ["synth", "--preset", "g1", "--episodes", "2", "--frames-per-episode", "60"];
    let (ok, _, err) = common::feedbench(&[&g1[..], &["--out", root.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let out = dir.path().join("out");
    let (ok, stdout, err) = common::feedbench(&[
        "tune",
        root.to_str().unwrap(),
        "--model",
        "diffusion",
        "--resolution",
        "96x96",
        "--batch",
        "16",
        "--cpus",
        "2",
        "--memory",
        "4GB",
        "--loader-batches",
        "6",
        "--train-steps",
        "16",
        "--warmup",
        "2",
        // The step's median beside the workers over all its steps: the slowdown is the
        // figure here, not how soon the search could decide.
        "--full-length",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    let beside = &tuned["answer"]["step_beside"];
    let alone = beside["alone_ms"].as_f64().unwrap();
    let with = beside["with_workers"].as_array().unwrap();
    let one = with.iter().find(|s| s["workers"] == 1).unwrap_or_else(|| panic!("{beside}"));
    // Measured here (debug build, 2026-12-02): 793 ms alone (the step without workers in
    // training, shorter than the model phase's few steps), 960 ms beside one worker (+21 %).
    assert!(one["slowdown_pct"].as_f64().unwrap() > 5.0, "{beside}");
    assert!(one["step_ms"].as_f64().unwrap() > alone, "{beside}");
    assert!(stdout.contains("the workers take cores from the step"), "{stdout}");
    assert!(stdout.contains("Headspace: a loader that never made the step wait"), "{stdout}");
    assert!(beside["headspace_pct"].as_f64().unwrap() >= 0.0, "{beside}");
}
