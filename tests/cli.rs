//! The `feedbench` binary end to end: `info` and `sample`.

use crate::common;

use common::feedbench;
use std::path::Path;

use ndarray::ArrayD;
use ndarray_npy::read_npy;

#[test]
fn info_prints_text_and_json() {
    let Some(root) = common::g1_partial() else { return };
    let root = root.to_str().unwrap();
    let (ok, text, err) = feedbench(&["info", root]);
    assert!(ok, "{err}");
    assert!(text.contains("LeRobot v2.1") && text.contains("30 fps"), "{text}");
    assert!(text.contains("av1 640×480 yuv420p"), "{text}");
    let (ok, json, err) = feedbench(&["info", root, "--json"]);
    assert!(ok, "{err}");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["episodes_present"], serde_json::json!([1, 2, 4, 29, 30]));
    assert_eq!(value["cameras"][0]["stream"]["codec"], "av1");
    // The real files: GOP 2, no B-frames, the index at the end, 2.5 frames a diffusion sample.
    let layout = &value["cameras"][0]["layout"][0];
    assert_eq!((layout["gop_max"].as_u64(), layout["reordered"].as_bool()), (Some(2), Some(false)));
    assert_eq!(layout["index_at_front"], false, "{layout}");
    let per_sample = layout["frames_decoded_per_sample"].as_f64().unwrap();
    assert!((2.45..=2.5).contains(&per_sample), "{layout}");
}

#[test]
fn sample_writes_npy_files_shaped_like_lerobot() {
    let Some(root) = common::g1_partial() else { return };
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("s");
    // Episode 1 starts at global index 479 (episode 0 has 479 frames); its first frame pads.
    let args = [
        "sample",
        root.to_str().unwrap(),
        "--index",
        "479",
        "--episodes",
        "1,2",
        "--window",
        "diffusion",
    ];
    let (ok, text, err) = feedbench(&[&args[..], &["--out", dir.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    assert!(text.contains("episode 1"), "{text}");
    let state: ArrayD<f32> = read_npy(dir.join("observation.state.npy")).unwrap();
    assert_eq!(state.shape(), [2, 26]);
    assert_eq!(
        state.index_axis(ndarray::Axis(0), 0),
        state.index_axis(ndarray::Axis(0), 1),
        "padded step repeats"
    );
    let action: ArrayD<f32> = read_npy(dir.join("action.npy")).unwrap();
    assert_eq!(action.shape(), [16, 26]);
    let frames: ArrayD<f32> = read_npy(dir.join("observation.images.cam_high.npy")).unwrap();
    assert_eq!(frames.shape(), [2, 3, 480, 640]);
    assert!(frames.iter().all(|v| (0.0..=1.0).contains(v)));
    assert_eq!(
        frames.index_axis(ndarray::Axis(0), 0),
        frames.index_axis(ndarray::Axis(0), 1),
        "padded frame repeats"
    );
    let pad: ArrayD<bool> = read_npy(dir.join("observation.images.cam_high_is_pad.npy")).unwrap();
    assert_eq!(pad.as_slice().unwrap(), [true, false]);
    let pad: ArrayD<bool> = read_npy(dir.join("action_is_pad.npy")).unwrap();
    assert_eq!(pad.iter().filter(|p| **p).count(), 1);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sample.json")).unwrap()).unwrap();
    assert_eq!(summary["scalars"]["index"], 479);
    assert_eq!(summary["scalars"]["frame_index"], 0);
    assert_eq!(summary["task"], "Pick up the yellow bottle on the table.");
    // A second run into the same directory refuses to overwrite.
    let (ok, _, err) = feedbench(&[&args[..], &["--out", dir.to_str().unwrap()]].concat());
    assert!(!ok && err.contains("already exists"), "{err}");
}

#[test]
fn bad_arguments_are_explained() {
    let Some(root) = common::g1_partial() else { return };
    let out = tempfile::tempdir().unwrap();
    let root = root.to_str().unwrap();
    let out = out.path().to_str().unwrap();
    let (ok, _, err) =
        feedbench(&["sample", root, "--index", "0", "--episodes", "0", "--out", out]);
    assert!(!ok && err.contains("episode_000000.mp4"), "{err}");
    let (ok, _, err) =
        feedbench(&["sample", root, "--index", "479", "--delta", "action=0.01", "--out", out]);
    assert!(!ok && err.contains("not a multiple of 1/fps"), "{err}");
    for threads in ["0", "17", "two"] {
        let (ok, _, err) = feedbench(&["load", root, "--decoder-threads", threads]);
        assert!(!ok && err.contains("--decoder-threads"), "{threads}: {err}");
    }
    let (ok, _, err) = feedbench(&[
        "load",
        root,
        "--episodes",
        "1",
        "--loader",
        "lerobot",
        "--decoder-threads",
        "2",
        "--python",
        "/nonexistent/python",
    ]);
    // Named by its flag, as every knob LeRobot's loader lacks (the table's reach).
    assert!(!ok && err.contains("--decoder-threads is the native loader's"), "{err}");
    // A knob of LeRobot's loader alone, named by its flag, for the native one.
    let (ok, _, err) = feedbench(&["load", root, "--pin-memory"]);
    assert!(!ok && err.contains("--pin-memory is a knob of LeRobot's loader"), "{err}");
    let (ok, _, err) = feedbench(&["load", root, "--no-persistent-workers"]);
    assert!(!ok && err.contains("--no-persistent-workers is a knob of LeRobot's"), "{err}");
    // Every count out of range names its flag.
    for (flag, value) in [("--batch", "0"), ("--prefetch", "0"), ("--workers", "-1")] {
        let (ok, _, err) = feedbench(&["load", root, flag, value]);
        assert!(!ok && err.contains(&format!("'{flag} <N>'")), "{flag} {value}: {err}");
    }
}

#[test]
fn load_reports_throughput_and_the_timing_tree_as_json() {
    let Some(root) = common::g1_partial() else { return };
    let args =
        ["load", root.to_str().unwrap(), "--episodes", "1,2", "--workers", "2", "--batch", "4"];
    let (ok, json, err) =
        feedbench(&[&args[..], &["--batches", "6", "--warmup", "2", "--json"]].concat());
    assert!(ok, "{err}");
    let phase: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(phase["batches"], 6);
    assert_eq!(phase["samples"], 24);
    assert_eq!(phase["config"]["workers"], 2);
    assert!(phase["samples_per_s"].as_f64().unwrap() > 0.0);
    assert!(phase["cpu_ms_per_sample"].as_f64().unwrap() > 0.0);
    let stages = &phase["timing"]["stages"];
    assert_eq!(stages["batch/parquet"]["calls"], 24);
    let converted = stages["batch/video/convert"]["calls"].as_u64().unwrap();
    assert!(converted >= 24, "a frame of each sample at least: {converted}");
    assert_eq!(stages["batch/video/convert/split"]["calls"], converted, "each split timed");
    let limit = &phase["decode_limit"];
    assert_eq!(limit["threads"], 2.min(std::thread::available_parallelism().unwrap().get()));
    let frames = limit["frames_per_sample"].as_f64().unwrap();
    assert!((2.0..=4.0).contains(&frames), "two frames per sample, and their keyframes: {frames}");
    assert!(limit["fraction"].as_f64().unwrap() > 0.0);
    // A cache of every frame: episodes 1 and 2 (393 and 343 frames) of one 640×480 camera, as
    // float32 RGB.
    assert_eq!(phase["frames"]["bytes"], (393 + 343) * 3 * 480 * 640 * 4_u64);
    let (ok, _, err) = feedbench(&[&args[..], &["--batches", "0"]].concat());
    assert!(!ok && err.contains("at least one batch"), "{err}");
}

#[test]
fn load_prints_the_frames_and_each_steps_cpu_per_sample() {
    let Some(root) = common::g1_partial() else { return };
    let args = ["load", root.to_str().unwrap(), "--episodes", "1", "--batch", "4"];
    let (ok, text, err) = feedbench(&[&args[..], &["--batches", "3", "--warmup", "0"]].concat());
    assert!(ok, "{err}");
    let line = text.lines().find(|l| l.starts_with("per sample: ")).expect(&text);
    let number = |after: &str| -> f64 {
        let rest =
            &line[line.find(after).unwrap_or_else(|| panic!("{after}: {line}")) + after.len()..];
        rest.split([' ', ',', ';']).next().unwrap().parse().unwrap()
    };
    // Diffusion pairs: two frames written per sample (one where a pair repeats a frame at an
    // episode's start), their keyframes decoded too.
    let (decoded, converted) = (number("per sample: "), number("decoded, "));
    assert!((1.0..=2.0).contains(&converted) && decoded >= converted, "{line}");
    for step in ["demux ", "decode ", "to RGB ", "split/scale ", "parquet ", "collate "] {
        assert!(number(step) >= 0.0, "{line}");
    }
    assert!(text.contains("      split "), "the split inside convert in the tree: {text}");
}

#[test]
fn load_writes_the_workers_timeline_to_a_new_file() {
    let Some(root) = common::g1_partial() else { return };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    let args = [
        "load",
        root.to_str().unwrap(),
        "--episodes",
        "1",
        "--workers",
        "2",
        "--batch",
        "2",
        "--resolution",
        "48x64",
        "--batches",
        "4",
        "--trace",
        path.to_str().unwrap(),
    ];
    let (ok, _, err) = feedbench(&args);
    assert!(ok, "{err}");
    let written = std::fs::read_to_string(&path).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&written).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let named = |name: &str| events.iter().filter(|e| e["name"] == name).collect::<Vec<_>>();
    let mut tracks: Vec<&str> =
        named("thread_name").iter().map(|e| e["args"]["name"].as_str().unwrap()).collect();
    tracks.sort_unstable();
    assert_eq!(tracks, ["feedbench-worker-0", "feedbench-worker-1"]);
    // The warm-up's batches and the measured ones at least, each with its samples' stages.
    assert!(named("batch").len() >= 4 + 5, "{} batches", named("batch").len());
    assert_eq!(named("parquet").len(), 2 * named("batch").len());
    // An existing file is kept as it is.
    let (ok, _, err) = feedbench(&args);
    assert!(!ok && err.contains("exists"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), written);
}

#[test]
fn sample_writes_uint8_frames_at_a_requested_resolution() {
    let Some(root) = common::g1_partial() else { return };
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("s");
    let args =
        ["sample", root.to_str().unwrap(), "--index", "500", "--uint8", "--resolution", "96x128"];
    let (ok, _, err) = feedbench(&[&args[..], &["--out", dir.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let frame: ArrayD<u8> = read_npy(dir.join("observation.images.cam_high.npy")).unwrap();
    assert_eq!(frame.shape(), [3, 96, 128], "no window: the row's own frame, no time dimension");
    let (ok, _, err) = feedbench(&[
        "sample",
        root.to_str().unwrap(),
        "--index",
        "500",
        "--resolution",
        "96",
        "--out",
        "x",
    ]);
    assert!(!ok && err.contains("expected HxW"), "{err}");
}

#[test]
fn stage_copies_and_prints_the_path() {
    let Some(root) = common::g1_partial() else { return };
    let out = tempfile::tempdir().unwrap();
    let to = out.path().join("g1");
    let args = ["stage", root.to_str().unwrap(), "--episodes", "1", "--to", to.to_str().unwrap()];
    let (ok, text, err) = feedbench(&args);
    assert!(ok, "{err}");
    assert_eq!(text.trim(), to.to_str().unwrap());
    assert!(err.contains("pass --episodes 1"), "{err}");
    assert!(to.join("videos/chunk-000/observation.images.cam_high/episode_000001.mp4").is_file());
    let (ok, _, err) = feedbench(&args);
    assert!(!ok && err.contains("already exists"), "{err}");
}

#[test]
fn a_closed_stdout_ends_the_process_quietly_not_with_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let Some(root) = common::g1_partial() else { return };
    let mut child = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .arg("info")
        .arg(&root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before feedbench prints (`feedbench info … | head -c 0`).
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "{:?}: {stderr}", output.status);
}

#[test]
fn a_full_stdout_is_one_error_line_not_a_panic() {
    use std::process::{Command, Stdio};
    let Some(root) = common::g1_partial() else { return };
    if !Path::new("/dev/full").exists() {
        eprintln!("note: no /dev/full here; the full-stdout test is skipped");
        return;
    }
    let root = root.to_str().unwrap();
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report-v1/results.jsonl");
    let reports = tempfile::tempdir().unwrap();
    std::fs::copy(fixture, reports.path().join("results.jsonl")).unwrap();
    let report = reports.path().to_str().unwrap();
    let load =
        ["load", root, "--episodes", "1", "--workers", "0", "--batch", "2", "--batches", "2"];
    let runs: [&[&str]; 5] = [
        &["info", root],
        &["info", root, "--json"],
        &load,
        &[&load[..], &["--json"]].concat(),
        &["report", report],
    ];
    for args in runs {
        let output = Command::new(env!("CARGO_BIN_EXE_feedbench"))
            .args(args)
            .stdout(Stdio::from(std::fs::File::create("/dev/full").unwrap()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            "error: cannot write to standard output: No space left on device (os error 28)",
            "{args:?}"
        );
    }
}

#[test]
fn model_rows_of_one_implementation_end_in_one_summary_table() {
    let (ok, out, err) = common::feedbench(&[
        "model",
        "--model",
        "synthetic:1ms",
        "--batch",
        "1,2",
        "--steps",
        "2",
        "--warmup",
        "0",
    ]);
    assert!(ok, "{err}");
    let header = "batch dtype  median ms";
    assert_eq!(out.matches(header).count(), 1, "{out}");
    let summary = out.split(header).nth(1).unwrap();
    // The rest of the header line, then one line per row.
    assert_eq!(summary.lines().skip(1).filter(|l| !l.trim().is_empty()).count(), 2, "{out}");
    assert!(!out.contains("tch step beside LeRobot's"), "{out}");
}

#[test]
fn more_workers_than_cores_warn_only_where_workers_asks_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pusht");
    common::synth_pusht(&data, 2, 20, &[]);
    let data = data.to_str().unwrap();
    let warning = "take turns on the cores";
    // The default is LeRobot's 4 workers, whatever the machine: no warning for a choice the user
    // did not make (on a 2-core machine every plain `load` warned).
    let (ok, _, stderr) = common::feedbench(&["load", data, "--batches", "2", "--batch", "2"]);
    assert!(ok && !stderr.contains(warning), "{stderr}");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let more = (cores + 1).to_string();
    let (ok, _, stderr) =
        common::feedbench(&["load", data, "--batches", "2", "--batch", "2", "--workers", &more]);
    assert!(ok && stderr.contains(&format!("{more} workers on {cores} cores")), "{stderr}");
}

#[test]
fn a_source_build_finds_the_lerobot_venv_that_make_test_made() {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-lerobot/bin/python");
    if !venv.is_file() {
        eprintln!("SKIPPED: no LeRobot venv at {}", venv.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pusht");
    common::synth_pusht(&data, 2, 20, &[]);
    let args = [
        "load",
        data.to_str().unwrap(),
        "--loader",
        "lerobot",
        "--window",
        "none",
        "--workers",
        "0",
        "--batch",
        "2",
        "--batches",
        "1",
        "--json",
    ];
    // Neither --python nor $FEEDBENCH_PYTHON: the system's python3 (no LeRobot) was taken.
    let (ok, out, err) = common::outcome(
        std::process::Command::new(env!("CARGO_BIN_EXE_feedbench"))
            .args(args)
            .env_remove("FEEDBENCH_PYTHON"),
    );
    assert!(ok, "{err}");
    assert!(out.contains(".venv-lerobot/bin/python"), "{out}");
}

/// `info --json`'s layout of the one video file of a generated pusht of 3 episodes of
/// `frames` frames, written with `flags`.
fn layout(dir: &Path, name: &str, frames: usize, flags: &[&str]) -> serde_json::Value {
    let root = dir.join(name);
    common::synth_pusht(&root, 3, frames, flags);
    let (ok, json, err) = feedbench(&["info", root.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let files = value["cameras"][0]["layout"].as_array().unwrap().clone();
    assert_eq!(files.len(), 1, "{value}");
    files[0].clone()
}

#[test]
fn info_says_where_episodes_start_and_what_a_sample_costs_to_decode() {
    let dir = tempfile::tempdir().unwrap();
    // GOP 10: each episode encoded on its own starts on a keyframe; the file's episodes as one
    // stream leave episode 1 (frame 45) inside a GOP, episode 2 (frame 90) on one.
    let own = layout(dir.path(), "own", 45, &["--gop", "10"]);
    assert_eq!(
        (own["episodes"].as_u64(), own["episodes_on_keyframe"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(own["first_misaligned"], serde_json::Value::Null, "{own}");
    let across = layout(dir.path(), "across", 45, &["--gop", "10", "--episodes-across-gops"]);
    assert_eq!(across["episodes_on_keyframe"], 2, "{across}");
    assert_eq!(across["first_misaligned"], 1, "{across}");
    assert_eq!((across["gop_max"].as_u64(), &across["codec"]), (Some(10), &"av1".into()));
    let (ok, text, _) = feedbench(&["info", dir.path().join("across").to_str().unwrap()]);
    assert!(
        ok && text.contains("2 of 3 episodes start on a keyframe (episode 1 does not)"),
        "{text}"
    );
    // A diffusion window (the frame and the one before) decoded from the keyframe before it:
    // 2 or 3 frames at GOP 2 (2.5 on average, less at each episode's first frame); from 2 to 11
    // at GOP 10.
    let gop2 = layout(dir.path(), "gop2", 40, &["--gop", "2"]);
    let per_sample = |l: &serde_json::Value| l["frames_decoded_per_sample"].as_f64().unwrap();
    assert!((2.3..=2.5).contains(&per_sample(&gop2)), "{gop2}");
    let gop10 = layout(dir.path(), "gop10", 40, &["--gop", "10"]);
    assert!((5.8..=6.5).contains(&per_sample(&gop10)), "{gop10}");
    assert_eq!(
        (gop2["reordered"].as_bool(), gop2["index_at_front"].as_bool()),
        (Some(false), Some(false))
    );
    // Written with its index at the front (movflags=+faststart); H.264 with its B-frames
    // (x264's default) stores frames out of the order shown, and without them in it.
    let faststart = layout(dir.path(), "faststart", 40, &["--gop", "2", "--faststart"]);
    assert_eq!(faststart["index_at_front"], true, "{faststart}");
    let h264 = |name: &str, more: &[&str]| {
        layout(dir.path(), name, 40, &[&["--codec", "h264", "--gop", "10"], more].concat())
    };
    let (bframes, none) = (h264("bframes", &[]), h264("no-bframes", &["--bframes", "0"]));
    assert_eq!(
        (bframes["reordered"].as_bool(), none["reordered"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(none["gop_max"], 10, "{none}");
    // AV1 in MP4 has no B-frames to turn off: refused naming the flag.
    let root = dir.path().join("av1-bframes");
    let args = ["synth", "--preset", "pusht", "--out", root.to_str().unwrap(), "--bframes", "0"];
    let (ok, _, err) = feedbench(&args);
    assert!(!ok && err.contains("bframes 0 (--bframes)") && err.contains("h264 and hevc"), "{err}");
}
