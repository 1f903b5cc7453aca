//! Bad input (issue #18): each case gets one clear error naming the file or flag, in bounded
//! time, and the process never dies by panic or signal. Datasets are generated and damaged in
//! the test.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{clear_error, feedbench, feedbench_within, png_dataset, sample_into, walk};
use feedbench::dataset::write::{write_tabular, TabularSpec};
use feedbench::dataset::CodebaseVersion;

/// A v2.1 dataset of one 8-frame episode with PushT's 96×96 AV1 camera, at `dir/ds`.
fn video_dataset(dir: &Path) -> PathBuf {
    let root = dir.join("ds");
    common::synth_pusht(&root, 1, 8, &["--format", "v2.1"]);
    root
}

/// The error of `sample` of `index` from the dataset at `root` once its file `path` is
/// replaced by a directory.
fn sample_with_a_directory_at(path: &Path, root: &Path, index: &str) -> String {
    std::fs::remove_file(path).unwrap();
    std::fs::create_dir(path).unwrap();
    let (ok, _, err) = sample_into(root, index, &root.with_file_name("s"));
    clear_error(ok, &err);
    err
}

#[test]
fn a_resolution_too_large_for_memory_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let root = root.to_str().unwrap();
    let huge = ["--resolution", "100000x100000"];
    let load = ["load", root, "--window", "none", "--workers", "0", "--batch", "2"];
    let load = [&load[..], &["--batches", "1"], &huge];
    let (ok, _, err) = feedbench(&load.concat());
    clear_error(ok, &err);
    assert!(err.contains("memory is available") && err.contains("--resolution"), "{err}");

    let out = dir.path().join("sample");
    let sample = [&["sample", root, "--index", "2", "--out", out.to_str().unwrap()][..], &huge];
    let (ok, _, err) = feedbench(&sample.concat());
    clear_error(ok, &err);
    assert!(err.contains("observation.image at 100000×100000 needs"), "{err}");
    assert!(!out.exists() || out.read_dir().unwrap().next().is_none(), "nothing written");
}

#[test]
fn an_epoch_without_a_batch_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let root = root.to_str().unwrap();
    // Episodes of 5 to 7 frames, and the diffusion window drops the last 7 of each.
    let (ok, _, err) = feedbench(&["load", root, "--workers", "0", "--batch", "2"]);
    clear_error(ok, &err);
    assert!(err.contains("drops the last 7 frames of each episode"), "{err}");
    assert!(
        err.contains("select longer episodes, lower --drop-n-last-frames, or --sampler shuffled"),
        "{err}"
    );
    // With fewer frames dropped than the window's 7, the episodes give samples.
    let fewer = ["load", root, "--workers", "0", "--batch", "2", "--drop-n-last-frames", "4"];
    let (ok, out, err) = feedbench(&[&fewer[..], &["--batches", "2", "--json"]].concat());
    assert!(ok, "{err}");
    let phase: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(phase["batches"], 2, "{out}");
    let short = ["load", root, "--window", "none", "--workers", "0", "--batch", "100"];
    let (ok, _, err) = feedbench(&[&short[..], &["--drop-last"]].concat());
    clear_error(ok, &err);
    assert!(err.contains("--drop-last with 18 samples, fewer than a batch of 100"), "{err}");
}

#[test]
fn zero_threads_and_zero_steps_are_refused_by_name() {
    let (ok, _, err) = feedbench(&["model", "--model", "none", "--threads", "0"]);
    clear_error(ok, &err);
    assert!(err.contains("--threads"), "{err}");
    let (ok, _, err) = feedbench(&["model", "--model", "none", "--steps", "0"]);
    clear_error(ok, &err);
    assert!(err.contains("at least one step"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let root = root.to_str().unwrap();
    for args in [
        &["load", root, "--batches", "0"][..],
        &["train", root, "--model", "none", "--steps", "0"],
        &["compare", "--a", root, "--b", root, "--batches", "0"],
    ] {
        let (ok, _, err) = feedbench(args);
        clear_error(ok, &err);
        let flag = args[args.len() - 2];
        assert!(err.contains(flag) && err.contains("expected at least one"), "{args:?}: {err}");
    }
}

#[test]
fn metadata_that_is_not_a_regular_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    for file in ["meta/info.json", "meta/episodes.jsonl"] {
        let path = root.join(file);
        let saved = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0, "mkfifo {file}");
        let (done, ok, err) =
            feedbench_within(&["info", root.to_str().unwrap()], Duration::from_secs(60));
        assert!(done, "`info` blocked on a FIFO at {file}");
        clear_error(ok, &err);
        assert!(err.contains(file) && err.contains("is a FIFO"), "{file}: {err}");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, saved).unwrap();
    }
    // A directory where a data file should be is said to be one, not a missing download.
    let data = root.join("data/chunk-000/episode_000001.parquet");
    let err = sample_with_a_directory_at(&data, &root, "8");
    assert!(err.contains("is a directory, expected a regular file"), "{err}");
    let out = dir.path().join("s");
    let args = ["sample", root.to_str().unwrap(), "--index", "8", "--out", out.to_str().unwrap()];
    // A symlink loop there is said to be one.
    std::fs::remove_dir(&data).unwrap();
    let twin = data.with_extension("loop");
    std::os::unix::fs::symlink(&twin, &data).unwrap();
    std::os::unix::fs::symlink(&data, &twin).unwrap();
    let (ok, _, err) = feedbench(&args);
    clear_error(ok, &err);
    assert!(err.contains("episode_000001.parquet") && err.contains("symbolic links"), "{err}");
}

#[test]
fn nonsense_numbers_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let out = dir.path().join("s");
    for tolerance in ["-1", "NaN"] {
        let args = [
            "sample",
            root.to_str().unwrap(),
            "--index",
            "0",
            "--tolerance-s",
            tolerance,
            "--out",
            out.to_str().unwrap(),
        ];
        let (ok, _, err) = feedbench(&args);
        clear_error(ok, &err);
        assert!(err.contains("expected a number of seconds ≥ 0"), "{tolerance}: {err}");
    }

    let info = root.join("meta/info.json");
    let text = std::fs::read_to_string(&info).unwrap();
    std::fs::write(&info, text.replace("\"fps\": 10", "\"fps\": \"ten\"")).unwrap();
    let (ok, _, err) = feedbench(&["info", root.to_str().unwrap()]);
    clear_error(ok, &err);
    assert!(err.contains("info.json") && err.contains("`fps`: invalid type"), "{err}");
    std::fs::write(&info, text.replace("\"chunks_size\": 1000", "\"chunks_size\": 0")).unwrap();
    let (ok, _, err) = feedbench(&["info", root.to_str().unwrap()]);
    clear_error(ok, &err);
    assert!(err.contains("info.json") && err.contains("chunks_size ≥ 1"), "{err}");

    let synth_out = dir.path().join("synth");
    let synth = ["synth", "--preset", "pusht", "--episodes", "2", "--frames-per-episode", "8"];
    let args = [&synth[..], &["--episodes-per-file", "0", "--out", synth_out.to_str().unwrap()]];
    let (ok, _, err) = feedbench(&args.concat());
    clear_error(ok, &err);
    assert!(err.contains("--episodes-per-file") && err.contains("≥ 1"), "{err}");
    assert!(!synth_out.exists(), "nothing written");
    for (flag, value, expected) in [
        ("--crf", "999", "crf 999 (--crf): libsvtav1 takes 0 to 63"),
        ("--encoder-preset", "warpspeed", "encoder preset \"warpspeed\" (--encoder-preset)"),
        ("--pix-fmt", "yuv444p", "pix_fmt yuv444p (--pix-fmt): libsvtav1 encodes yuv420p only"),
    ] {
        let (ok, _, err) =
            feedbench(&[&synth[..], &[flag, value, "--out", synth_out.to_str().unwrap()]].concat());
        clear_error(ok, &err);
        assert!(err.contains(expected) && !err.contains(".partial"), "{err}");
        assert!(!synth_out.exists(), "nothing written");
    }
}

#[test]
fn an_error_is_one_message_whatever_rust_backtrace_says() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let output = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(["info", missing.to_str().unwrap()])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1));
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("error: ") && lines[0].contains("nowhere"), "{err}");
    assert_eq!(lines[0].matches("no such dataset directory").count(), 1, "said once: {err}");

    // A damaged mp4: the error names it, and FFmpeg's own log lines do not come before it.
    let root = dir.path().join("video");
    common::synth_pusht(&root, 1, 8, &["--codec", "h264"]);
    let mp4 = std::fs::read_dir(root.join("videos"))
        .unwrap()
        .flat_map(|camera| walk(&camera.unwrap().path()))
        .find(|p| p.extension().is_some_and(|e| e == "mp4"))
        .unwrap();
    let bytes = std::fs::read(&mp4).unwrap();
    std::fs::write(&mp4, &bytes[..bytes.len() / 3]).unwrap();
    let out = dir.path().join("s");
    let args = ["sample", root.to_str().unwrap(), "--index", "4", "--out", out.to_str().unwrap()];
    let (ok, _, err) = feedbench(&args);
    clear_error(ok, &err);
    assert!(!err.contains(" @ 0x"), "FFmpeg's log lines: {err}");
    assert!(err.starts_with("error: ") && err.contains(".mp4"), "{err}");
}

#[test]
fn an_mp4_that_shrinks_under_a_reader_is_an_error_not_a_signal() {
    use feedbench::dataset::video::{DecodeOptions, FrameBuffer, FrameDecoder};
    use feedbench::dataset::video::{VideoDecoder, VideoFile};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("video");
    common::synth_pusht(&root, 1, 40, &["--codec", "h264", "--gop", "4"]);
    let mp4 =
        walk(&root.join("videos")).into_iter().find(|p| p.extension().is_some_and(|e| e == "mp4"));
    let mp4 = mp4.unwrap();
    let video = VideoFile::shared(&mp4).unwrap();
    let (width, height) = video.dimensions();
    let times = video.frame_times().to_vec();
    let mut out = vec![0u8; 3 * width as usize * height as usize];
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    decoder.decode_into(&mp4, &times[..1], FrameBuffer::U8(&mut out)).unwrap();
    // Another program truncates the file while it is open and being read.
    let file = std::fs::OpenOptions::new().write(true).open(&mp4).unwrap();
    file.set_len(std::fs::metadata(&mp4).unwrap().len() / 3).unwrap();
    let last = &times[times.len() - 1..];
    let error = decoder.decode_into(&mp4, last, FrameBuffer::U8(&mut out)).unwrap_err();
    let error = error.to_string();
    assert!(error.contains(mp4.to_str().unwrap()), "{error}");
    assert!(error.contains("shorter than its header says"), "{error}");
}

#[test]
fn an_mp4_whose_frames_differ_from_info_json_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("video");
    common::synth_pusht(&root, 2, 24, &[]);
    // info.json now claims 64×64 frames; the files hold 96×96.
    let info = root.join("meta/info.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&info).unwrap()).unwrap();
    let camera = &mut json["features"]["observation.image"]["shape"];
    assert_eq!(*camera, serde_json::json!([96, 96, 3]), "pusht's camera");
    *camera = serde_json::json!([64, 64, 3]);
    std::fs::write(&info, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    let args = ["load", root.to_str().unwrap(), "--window", "none", "--workers", "0"];
    let (ok, _, err) = feedbench(&[&args[..], &["--batch", "2", "--batches", "1"]].concat());
    clear_error(ok, &err);
    assert!(err.contains(".mp4") && err.contains("holds 96×96 frames"), "{err}");
    assert!(err.contains("`observation.image` feature says 64×64"), "{err}");
}

#[test]
fn a_dataset_path_that_is_not_utf8_is_refused_before_any_output() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(std::ffi::OsStr::from_bytes(b"ds-\xff"));
    write_tabular(&root, &TabularSpec::default()).unwrap();
    let out = dir.path().join("s");
    let run = |args: &[&std::ffi::OsStr]| {
        let output = Command::new(env!("CARGO_BIN_EXE_feedbench")).args(args).output().unwrap();
        (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
    };
    let (ok, err) = run(&["info".as_ref(), root.as_os_str()]);
    clear_error(ok, &err);
    assert!(err.contains("not valid UTF-8"), "info: {err}");
    let sample = ["sample".as_ref(), root.as_os_str(), "--index".as_ref(), "0".as_ref()];
    let (ok, err) = run(&[&sample[..], &["--out".as_ref(), out.as_os_str()]].concat());
    clear_error(ok, &err);
    assert!(err.contains("not valid UTF-8"), "sample: {err}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn more_workers_than_cores_run_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let cores = std::thread::available_parallelism().unwrap().get();
    let workers = (cores + 1).to_string();
    let args = ["load", root.to_str().unwrap(), "--window", "none", "--batch", "2"];
    let (ok, out, err) =
        feedbench(&[&args[..], &["--batches", "2", "--workers", &workers]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("samples/s"), "{out}");
    assert!(err.contains(&format!("warning: {workers} workers on {cores} cores")), "{err}");
}

#[test]
fn a_parquet_file_that_shrinks_under_a_reader_is_an_error_not_a_signal() {
    use feedbench::dataset::{Dataset, WindowSpec};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    // Files of several pages: a map read past a shrunk end would fault on the later pages.
    let spec = TabularSpec {
        version: CodebaseVersion::V21,
        episode_lengths: vec![40, 200],
        image_size: Some((16, 16)),
        row_group_rows: 16,
        ..TabularSpec::default()
    };
    write_tabular(&root, &spec).unwrap();
    let dataset = Dataset::open(&root).unwrap();
    let window = dataset.window(&WindowSpec::Single).unwrap();
    // Another program truncates episode 1's file after the dataset was opened.
    let data = root.join("data/chunk-000/episode_000001.parquet");
    assert!(std::fs::metadata(&data).unwrap().len() > 4 * 4096, "a file of several pages");
    let file = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
    file.set_len(4).unwrap();
    let error = dataset.sample(40 + 190, &window).unwrap_err().to_string();
    assert!(error.contains("episode_000001.parquet"), "{error}");
    assert!(error.contains("shorter than its footer says"), "{error}");
}

#[test]
fn a_camera_too_large_for_memory_is_refused_before_allocating() {
    let dir = tempfile::tempdir().unwrap();
    let pusht =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/datasets/pusht.toml"))
            .unwrap();
    let huge = pusht.replace("height = 96\nwidth = 96", "height = 100000\nwidth = 100000");
    assert_ne!(huge, pusht, "the preset's camera");
    let preset = dir.path().join("huge.toml");
    std::fs::write(&preset, huge).unwrap();
    let out = dir.path().join("out");
    let args = ["synth", "--preset", preset.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let (in_time, ok, err) = feedbench_within(&args, Duration::from_secs(60));
    assert!(in_time, "{err}");
    clear_error(ok, &err);
    assert!(err.contains("huge.toml") && err.contains("100000×100000 needs about"), "{err}");
    let left: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left, ["huge.toml"], "nothing written");
}

#[test]
fn an_empty_episode_list_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    std::fs::write(root.join("meta/episodes.jsonl"), "").unwrap();
    for command in ["info", "load"] {
        let (ok, _, err) = feedbench(&[command, root.to_str().unwrap()]);
        clear_error(ok, &err);
        assert!(err.contains("meta/episodes.jsonl: lists no episode"), "{command}: {err}");
    }
}

/// Rewrites column `name` of the parquet file `data` as `change` makes it (an Arrow array in,
/// one of the same length out), keeping the other columns.
pub(crate) fn rewrite_column(
    data: &Path,
    name: &str,
    change: impl FnOnce(&arrow::array::ArrayRef) -> arrow::array::ArrayRef,
) {
    use arrow::array::RecordBatch;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;

    let file = std::fs::File::open(data).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    let column = batch.schema().index_of(name).unwrap();
    let mut columns = batch.columns().to_vec();
    columns[column] = change(&columns[column]);
    let batch = RecordBatch::try_new(batch.schema(), columns).unwrap();
    let mut writer =
        ArrowWriter::try_new(std::fs::File::create(data).unwrap(), batch.schema(), None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[test]
fn a_timestamp_that_is_no_time_is_named_by_its_parquet_row() {
    use std::sync::Arc;

    use arrow::array::{Array, ArrayRef, Float32Array, Float64Array};

    let dir = tempfile::tempdir().unwrap();
    let root = video_dataset(dir.path());
    let data = root.join("data/chunk-000/episode_000000.parquet");
    for bad in [f64::NAN, -1.0] {
        rewrite_column(&data, "timestamp", |old| {
            let mut times: Vec<f64> = match old.as_any().downcast_ref::<Float32Array>() {
                Some(f) => f.values().iter().map(|&t| f64::from(t)).collect(),
                None => old.as_any().downcast_ref::<Float64Array>().unwrap().values().to_vec(),
            };
            times[3] = bad;
            match old.data_type() {
                arrow::datatypes::DataType::Float32 => Arc::new(Float32Array::from(
                    times.iter().map(|&t| t as f32).collect::<Vec<_>>(),
                )) as ArrayRef,
                _ => Arc::new(Float64Array::from(times)),
            }
        });
        let out = dir.path().join(format!("sample-{bad}"));
        let (ok, _, err) = sample_into(&root, "3", &out);
        clear_error(ok, &err);
        assert!(
            err.contains("episode_000000.parquet: row 3: column `timestamp`")
                && err.contains("is not a time ≥ 0"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn a_row_whose_index_is_not_the_metadatas_is_named_inside_a_window_too() {
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array};

    let dir = tempfile::tempdir().unwrap();
    let root = video_dataset(dir.path());
    let data = root.join("data/chunk-000/episode_000000.parquet");
    rewrite_column(&data, "index", |old| {
        let mut indices = old.as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec();
        indices[6] = 999;
        Arc::new(Int64Array::from(indices))
    });
    // Row 6 is read as its own row, and inside the diffusion window of index 3 (its action's
    // rows 2–9 of the 10, then padded), where it follows row 5.
    for (index, window) in [("6", "none"), ("3", "diffusion")] {
        let out = dir.path().join(format!("sample-{index}"));
        let root = root.to_str().unwrap();
        let out = out.to_str().unwrap();
        let args = ["sample", root, "--index", index, "--window", window, "--out", out];
        let (ok, _, err) = feedbench(&args);
        clear_error(ok, &err);
        assert!(
            err.contains("episode_000000.parquet: expected index 6 at row 6 (from the episode metadata), found 999"),
            "{index} {window}: {err}"
        );
    }
}

#[test]
fn what_stands_where_a_video_or_the_dataset_should_be_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let root = video_dataset(dir.path());
    let video = root.join("videos/chunk-000/observation.image/episode_000000.mp4");
    let err = sample_with_a_directory_at(&video, &root, "3");
    assert!(err.contains("episode_000000.mp4: is a directory, expected a regular file"), "{err}");
    assert!(!err.contains("partial download"), "{err}");
    // A dataset path that is a symlink loop, or a file, is said to be one.
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    let (ok, _, err) = feedbench(&["info", a.to_str().unwrap()]);
    clear_error(ok, &err);
    assert!(err.contains("symbolic links") && !err.contains("no such dataset"), "{err}");
    let file = root.join("meta/info.json");
    let (ok, _, err) = feedbench(&["info", file.to_str().unwrap()]);
    clear_error(ok, &err);
    assert!(err.contains("is not a directory: expected a dataset"), "{err}");
}

#[test]
fn a_shard_from_the_environment_is_named_by_its_variables() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let output = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(["load", root.to_str().unwrap(), "--window", "none", "--workers", "0"])
        .args(["--batches", "1"])
        .env("RANK", "0")
        .env("WORLD_SIZE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    clear_error(output.status.success(), &err);
    assert!(err.contains("$RANK=0 and $WORLD_SIZE=0: expected 0 ≤ RANK < WORLD_SIZE"), "{err}");
}
