//! `synth` round trips: generated v2.1 and v3.0 datasets in AV1, H.264 and HEVC read back with
//! the reader: info fields, every frame's parquet values exactly as generated, every frame's
//! timestamp resolving to the right video frame (pixels equal to the `ffmpeg` CLI's decode of
//! the same file position, and close to the rendered frame), v3.0 files holding several
//! episodes, statistics, and the command's refusals.

use crate::common;

use common::{feedbench, ffmpeg_rgb24_frames, have_ffmpeg};

use std::path::{Path, PathBuf};

use feedbench::dataset::video::{probe, DecodeOptions, VideoCodec, VideoDecoder, VideoFile};
use feedbench::dataset::write::preset::CameraPreset;
use feedbench::dataset::write::scene::{Camera, Motion};
use feedbench::dataset::write::synth::{synth, SynthOptions, SynthStorage};
use feedbench::dataset::write::{EncodeSetting, PixFmt, Preset};
use feedbench::dataset::{CodebaseVersion, Dataset, DatasetError, FeatureKind, Values, WindowSpec};
use serde_json::Value as Json;

pub(crate) const SEED: u64 = 11;

/// PushT's shape, scaled down: 3 episodes of 6 to 10 frames, the given cameras.
pub(crate) fn tiny(codec: VideoCodec, cameras: &[(&str, u32, u32)]) -> Preset {
    let mut preset = Preset::load("pusht").unwrap();
    preset.episodes = 3;
    preset.frames_per_episode = 8;
    preset.frames_jitter = 2;
    preset.codec = codec;
    preset.cameras = cameras
        .iter()
        .map(|&(key, height, width)| CameraPreset { key: key.into(), height, width })
        .collect();
    preset
}

/// Packed RGB → CHW.
fn chw(rgb: &[u8]) -> Vec<u8> {
    (0..3).flat_map(|c| rgb.iter().skip(c).step_by(3).copied()).collect()
}

fn mean_abs_diff(a: &[u8], b: &[u8]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(x.abs_diff(*y))).sum::<f64>() / a.len() as f64
}

/// Reads back a generated dataset and checks every frame against what was generated.
fn check_round_trip(root: &Path, preset: &Preset, options: &SynthOptions) {
    let dataset = Dataset::open(root).unwrap();
    let info = dataset.info();
    let lengths = preset.episode_lengths(options.seed);
    assert_eq!(info.codebase_version, options.version);
    assert_eq!(info.fps, f64::from(preset.fps));
    assert_eq!(info.total_episodes, preset.episodes);
    assert_eq!(info.total_frames, lengths.iter().sum::<usize>());
    assert_eq!(info.robot_type.as_deref(), Some(preset.robot_type.as_str()));
    assert_eq!(dataset.num_frames(), info.total_frames);
    let fps = f64::from(preset.fps);
    let dims = preset.state_dim.max(preset.action_dim);
    let ffmpeg = have_ffmpeg();
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    let window = dataset.window(&WindowSpec::Single).unwrap();
    let mut forward: std::collections::HashMap<(String, usize), Vec<u8>> = Default::default();

    for (c, camera) in preset.cameras.iter().enumerate() {
        let feature = info.feature(&camera.key).unwrap();
        let video = feature.video.as_ref().unwrap();
        assert_eq!(video.codec.as_deref(), Some(preset.codec.name()));
        assert_eq!((video.height, video.width), (Some(camera.height), Some(camera.width)));
        assert_eq!(video.pix_fmt.as_deref(), Some(preset.pix_fmt.name()));
        assert_eq!(
            video.other.get("video.fast_decode"),
            preset.fast_decode.then_some(&Json::Bool(true))
        );
        assert_eq!(video.other["video.g"], Json::from(preset.gop));
        let view_of = Camera::new(options.seed, c, camera.height, camera.width);
        // Frames each file holds before an episode: from_timestamp must say the same.
        let mut frames_in_file: std::collections::BTreeMap<PathBuf, usize> = Default::default();
        let mut file_frames: std::collections::BTreeMap<PathBuf, Vec<Vec<u8>>> = Default::default();
        for (e, episode) in dataset.episodes().enumerate() {
            assert_eq!(episode.length, lengths[e]);
            let clip = &episode.videos[&camera.key];
            let path = root.join(&clip.path);
            let before = frames_in_file.entry(path.clone()).or_insert(0);
            assert_eq!(
                clip.from_timestamp,
                *before as f64 / fps,
                "episode {e} starts after the file's earlier episodes"
            );
            assert_eq!(clip.to_timestamp, (*before + lengths[e]) as f64 / fps);
            let start = *before;
            *before += lengths[e];
            // Each episode starts on a keyframe, and one comes every `gop` frames.
            let table = VideoFile::shared(&path).unwrap();
            for frame in (0..lengths[e]).step_by(preset.gop as usize) {
                let rank = table.rank_of_frame(start + frame);
                let sample = table.samples().iter().find(|s| s.rank == rank).unwrap();
                assert!(sample.keyframe, "episode {e} frame {frame} of {}", path.display());
            }
            let stream = probe(&path).unwrap();
            assert_eq!(stream.codec, preset.codec.name());
            assert_eq!(stream.pix_fmt, preset.pix_fmt.name(), "as FFmpeg reads the file");
            assert_eq!((stream.height, stream.width), (camera.height, camera.width));
            if ffmpeg && !file_frames.contains_key(&path) {
                file_frames.insert(
                    path.clone(),
                    ffmpeg_rgb24_frames(&path, 3 * (camera.height * camera.width) as usize),
                );
            }
            let motion = Motion::new(options.seed, e, dims);
            let view = view_of.view(&motion, e);
            let other = Motion::new(options.seed, e + 1, dims);
            let other_view = view_of.view(&other, e + 1);
            let mut rendered = vec![0u8; 3 * (camera.height * camera.width) as usize];
            for frame in 0..episode.length {
                let index = episode.from + frame;
                let mut sample = dataset.sample(index, &window).unwrap();
                sample.decode_pixels(&mut decoder, true).unwrap();
                let Values::U8(pixels) = &sample.arrays[&camera.key].values else { panic!() };
                if let Some(all) = file_frames.get(&path) {
                    assert_eq!(
                        pixels,
                        &chw(&all[start + frame]),
                        "{}: index {index} is frame {} of {}",
                        camera.key,
                        start + frame,
                        path.display()
                    );
                }
                let t = frame as f64 / fps;
                view.render(t, frame, &mut rendered);
                let own = mean_abs_diff(pixels, &chw(&rendered));
                other_view.render(t, frame, &mut rendered);
                let foreign = mean_abs_diff(pixels, &chw(&rendered));
                assert!(own < 12.0 && own < foreign, "index {index}: {own} vs {foreign}");
                forward.insert((camera.key.clone(), index), pixels.clone());
            }
        }
    }
    // Backwards, every request restarts at its keyframe: the same pixels as in time order.
    let mut backwards = VideoDecoder::new(DecodeOptions::default());
    for index in (0..dataset.num_frames()).rev() {
        let mut sample = dataset.sample(index, &window).unwrap();
        sample.decode_pixels(&mut backwards, true).unwrap();
        for camera in &preset.cameras {
            let Values::U8(pixels) = &sample.arrays[&camera.key].values else { panic!() };
            assert!(
                pixels == &forward[&(camera.key.clone(), index)],
                "{} index {index} backwards",
                camera.key
            );
        }
    }

    let (mut state, mut ahead) = (vec![0f32; dims], vec![0f32; dims]);
    for (e, episode) in dataset.episodes().enumerate() {
        let motion = Motion::new(options.seed, e, dims);
        for frame in 0..episode.length {
            let index = episode.from + frame;
            let sample = dataset.sample(index, &window).unwrap();
            motion.state(frame as f64 / fps, &mut state);
            motion.state((frame + 1) as f64 / fps, &mut ahead);
            let values = |key: &str| sample.arrays[key].values.clone();
            assert_eq!(
                values("observation.state"),
                Values::F32(state[..preset.state_dim].to_vec())
            );
            assert_eq!(values("action"), Values::F32(ahead[..preset.action_dim].to_vec()));
            assert_eq!(values("timestamp"), Values::F32(vec![frame as f32 / preset.fps as f32]));
            assert_eq!(values("frame_index"), Values::I64(vec![frame as i64]));
            assert_eq!(values("episode_index"), Values::I64(vec![e as i64]));
            assert_eq!(values("index"), Values::I64(vec![index as i64]));
            assert_eq!(sample.task, preset.tasks[e % preset.tasks.len()]);
        }
    }
}

pub(crate) fn generate(preset: &Preset, options: &SynthOptions) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let report = synth(&root, preset, options).unwrap();
    assert_eq!(report.episodes, preset.episodes);
    (dir, root)
}

fn round_trip(version: CodebaseVersion, codec: VideoCodec) {
    let preset = tiny(codec, &[("observation.image", 64, 80)]);
    // v3.0: two episodes per file, so that one file holds several episodes and a second
    // file starts at from_timestamp 0 again.
    let options = SynthOptions {
        version,
        seed: SEED,
        episodes_per_file: (version == CodebaseVersion::V30).then_some(2),
        ..Default::default()
    };
    let (_dir, root) = generate(&preset, &options);
    check_round_trip(&root, &preset, &options);
}

#[test]
fn round_trip_h264_yuv444p_gop3_fast_decode() {
    // Chroma at full resolution, keyframes every 3 frames, x264's tune=fastdecode: the file
    // says so as FFmpeg reads it, and every frame decodes as the ffmpeg CLI decodes it.
    let mut preset = tiny(VideoCodec::H264, &[("observation.image", 64, 80)]);
    (preset.pix_fmt, preset.gop, preset.fast_decode) = (PixFmt::Yuv444p, 3, true);
    let options = SynthOptions { seed: SEED, ..Default::default() };
    let (_dir, root) = generate(&preset, &options);
    check_round_trip(&root, &preset, &options);
}

#[test]
fn svt_av1_fast_decode_reaches_the_encoder_and_yuv444p_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let video_bytes = |name: &str, fast: bool| {
        let mut preset = tiny(VideoCodec::Av1, &[("observation.image", 64, 64)]);
        (preset.encoder_preset, preset.fast_decode) = (Some("8".into()), fast);
        let root = dir.path().join(name);
        synth(&root, &preset, &SynthOptions::default()).unwrap();
        walk(&root.join("videos")).iter().map(|p| std::fs::read(p).unwrap()).collect::<Vec<_>>()
    };
    // At LeRobot's preset 12 this SVT-AV1 (Debian 12's 1.4) writes the same bytes with or
    // without fast-decode; at preset 8 the option shows.
    assert_ne!(video_bytes("plain", false), video_bytes("fast", true));
    let mut preset = tiny(VideoCodec::Av1, &[("observation.image", 64, 64)]);
    preset.pix_fmt = PixFmt::Yuv444p;
    let error = synth(&dir.path().join("444"), &preset, &SynthOptions::default()).unwrap_err();
    // The library names the setting, not a flag: `synth` says --pix-fmt, a config its key.
    let DatasetError::Encode { problem, .. } = &error else { panic!("{error}") };
    assert_eq!(problem.setting, EncodeSetting::PixFmt);
    let text = error.to_string();
    assert!(text.contains("pix_fmt yuv444p: libsvtav1 encodes yuv420p only"), "{error}");
    assert!(!text.contains("--"), "{error}");
}

#[test]
fn round_trip_v21_av1() {
    round_trip(CodebaseVersion::V21, VideoCodec::Av1);
}

#[test]
fn round_trip_v21_h264() {
    round_trip(CodebaseVersion::V21, VideoCodec::H264);
}

#[test]
fn round_trip_v21_hevc() {
    round_trip(CodebaseVersion::V21, VideoCodec::Hevc);
}

#[test]
fn round_trip_v30_av1() {
    round_trip(CodebaseVersion::V30, VideoCodec::Av1);
}

#[test]
fn round_trip_v30_h264() {
    round_trip(CodebaseVersion::V30, VideoCodec::H264);
}

#[test]
fn round_trip_v30_hevc() {
    round_trip(CodebaseVersion::V30, VideoCodec::Hevc);
}

#[test]
fn v30_layout_of_files_and_two_cameras() {
    let mut preset = tiny(
        VideoCodec::Av1,
        &[("observation.images.top", 64, 96), ("observation.images.wrist", 64, 64)],
    );
    preset.episodes = 5;
    preset.state_dim = 4;
    preset.state_names.clear();
    preset.action_dim = 3;
    preset.tasks = vec!["push".into(), "pull".into()];
    let options = SynthOptions { seed: SEED, episodes_per_file: Some(2), ..Default::default() };
    let (_dir, root) = generate(&preset, &options);
    let mut files: Vec<String> =
        walk(&root).iter().map(|p| p.strip_prefix(&root).unwrap().display().to_string()).collect();
    files.sort();
    assert_eq!(
        files,
        [
            "data/chunk-000/file-000.parquet",
            "data/chunk-000/file-001.parquet",
            "data/chunk-000/file-002.parquet",
            "meta/episodes/chunk-000/file-000.parquet",
            "meta/info.json",
            "meta/stats.json",
            "meta/tasks.parquet",
            "videos/observation.images.top/chunk-000/file-000.mp4",
            "videos/observation.images.top/chunk-000/file-001.mp4",
            "videos/observation.images.top/chunk-000/file-002.mp4",
            "videos/observation.images.wrist/chunk-000/file-000.mp4",
            "videos/observation.images.wrist/chunk-000/file-001.mp4",
            "videos/observation.images.wrist/chunk-000/file-002.mp4",
        ]
    );
    let dataset = Dataset::open(&root).unwrap();
    let third = dataset.episodes().nth(2).unwrap();
    assert_eq!(
        third.videos["observation.images.wrist"].from_timestamp, 0.0,
        "a new file starts at 0"
    );
    assert_eq!(third.tasks, ["push"]);
    assert_eq!(dataset.episodes().nth(1).unwrap().tasks, ["pull"]);
    check_round_trip(&root, &preset, &options);
    // pandas reads the task strings back as the index of the task table, as LeRobot expects.
    let file = std::fs::File::open(root.join("meta/tasks.parquet")).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    let metadata = reader.metadata().file_metadata().key_value_metadata().cloned().unwrap();
    let pandas = metadata.iter().find(|kv| kv.key == "pandas").unwrap();
    let pandas: Json = serde_json::from_str(pandas.value.as_deref().unwrap()).unwrap();
    assert_eq!(pandas["index_columns"], serde_json::json!(["__index_level_0__"]));

    // Without a limit, every episode goes into one file per camera.
    let options = SynthOptions { seed: SEED, ..Default::default() };
    let (_dir, root) = generate(&preset, &options);
    assert_eq!(walk(&root.join("videos")).len(), 2);
    assert_eq!(walk(&root.join("data")).len(), 1);
}

#[test]
fn frames_too_small_for_svt_av1_are_refused_by_name() {
    let preset = tiny(VideoCodec::Av1, &[("observation.image", 48, 64)]);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let err = synth(&root, &preset, &SynthOptions::default()).unwrap_err().to_string();
    assert!(err.contains("64×48") && err.contains("at least 64×64"), "{err}");
    assert!(!root.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the partial dataset is removed");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

pub(crate) fn read_json(path: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn command_synth_info_sample() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pusht");
    let out_s = out.to_str().unwrap();
    let synth_args =
        ["synth", "--preset", "pusht", "--episodes", "2", "--frames-per-episode", "10"];
    let flags = ["--format", "v2.1", "--codec", "h264", "--out", out_s];
    let (ok, text, err) = feedbench(&[&synth_args[..], &flags].concat());
    assert!(ok, "{err}");
    assert!(text.contains("2 episodes, 20 frames"), "{text}");
    let (ok, text, err) = feedbench(&["info", out_s]);
    assert!(ok, "{err}");
    assert!(text.contains("LeRobot v2.1") && text.contains("h264 96×96 yuv420p"), "{text}");
    let sample_dir = dir.path().join("sample");
    let (ok, text, err) = feedbench(&[
        "sample",
        out_s,
        "--index",
        "13",
        "--window",
        "diffusion",
        "--out",
        sample_dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(text.contains("episode 1"), "{text}");
    assert!(sample_dir.join("observation.image.npy").is_file());

    // A non-empty directory is refused without --force and left as it was.
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "keep me").unwrap();
    let mine_s = mine.to_str().unwrap();
    let (ok, _, err) =
        feedbench(&["synth", "--preset", "pusht", "--episodes", "1", "--out", mine_s]);
    assert!(!ok && err.contains("not empty") && err.contains("--force"), "{err}");
    // … and even with --force, since it holds no dataset.
    let (ok, _, err) =
        feedbench(&["synth", "--preset", "pusht", "--episodes", "1", "--out", mine_s, "--force"]);
    assert!(!ok && err.contains("no LeRobot dataset"), "{err}");
    assert_eq!(std::fs::read_to_string(mine.join("notes.txt")).unwrap(), "keep me");
    assert_eq!(std::fs::read_dir(&mine).unwrap().count(), 1);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        3,
        "no partial directory left behind"
    );

    // An existing dataset: refused, then replaced with --force.
    let (ok, _, err) = feedbench(&[&synth_args[..], &["--out", out_s]].concat());
    assert!(!ok && err.contains("--force"), "{err}");
    let replace =
        ["synth", "--preset", "pusht", "--episodes", "3", "--out", out_s, "--force", "--json"];
    let (ok, text, err) = feedbench(&replace);
    assert!(ok, "{err}");
    let report: Json = serde_json::from_str(&text).unwrap();
    assert_eq!(report["episodes"], 3);
    let info = read_json(&out.join("meta/info.json"));
    assert_eq!(
        (info["codebase_version"].as_str(), info["total_episodes"].as_u64()),
        (Some("v3.0"), Some(3))
    );
    assert!(!out.join("meta/episodes.jsonl").exists(), "the v2.1 dataset was replaced entirely");

    // A bad preset name lists the available ones.
    let (ok, _, err) =
        feedbench(&["synth", "--preset", "pushy", "--out", dir.path().join("x").to_str().unwrap()]);
    assert!(!ok && err.contains("pushy") && err.contains("pusht, so101, aloha, g1"), "{err}");
}

#[test]
fn png_and_raw_storage_hold_the_rendered_frames_exactly() {
    let preset = tiny(VideoCodec::Av1, &[("observation.images.top", 40, 48)]);
    let dims = preset.state_dim.max(preset.action_dim);
    for storage in [SynthStorage::Png, SynthStorage::Raw] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        let options = SynthOptions { seed: SEED, storage, ..Default::default() };
        let report = synth(&root, &preset, &options).unwrap();
        assert!(report.video_bytes > 0);
        let dataset = Dataset::open(&root).unwrap();
        let feature = dataset.info().feature("observation.images.top").unwrap();
        let expected_kind =
            if storage == SynthStorage::Png { FeatureKind::Image } else { FeatureKind::Video };
        assert_eq!(feature.kind, expected_kind, "{storage}");
        let window = dataset.window(&WindowSpec::Single).unwrap();
        let mut decoder = VideoDecoder::new(DecodeOptions::default());
        let camera = Camera::new(SEED, 0, 40, 48);
        for (e, episode) in dataset.episodes().enumerate() {
            let motion = Motion::new(SEED, e, dims);
            let view = camera.view(&motion, e);
            let mut rendered = vec![0u8; 3 * 40 * 48];
            for frame in 0..episode.length {
                view.render(frame as f64 / f64::from(preset.fps), frame, &mut rendered);
                let mut sample = dataset.sample(episode.from + frame, &window).unwrap();
                sample.decode_pixels(&mut decoder, true).unwrap();
                let Values::U8(pixels) = &sample.arrays["observation.images.top"].values else {
                    panic!()
                };
                assert!(pixels == &chw(&rendered), "{storage}: episode {e} frame {frame}");
            }
        }
    }
}
