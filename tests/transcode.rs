//! Candidates of the layout study (`dataset::write::transcode`): a dataset's selected episodes
//! written again with other frame storage, size or file layout hold the same values, tasks and
//! (for lossless storage) the same frames as the source decodes to, v2.1 and v3.0 files of one
//! encoding decode alike, and the source is left byte for byte as it was.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::file_tree;

use feedbench::dataset::video::{DecodeOptions, VideoCodec, VideoDecoder};
use feedbench::dataset::write::preset::CameraPreset;
use feedbench::dataset::write::synth::{synth, SynthOptions};
use feedbench::dataset::write::transcode::{transcode, FrameStorage, TranscodeOptions};
use feedbench::dataset::write::{EncodeSettings, Preset};
use feedbench::dataset::{CodebaseVersion, Dataset, DatasetOptions, Values, WindowSpec};

const CAMERA: &str = "observation.image";

/// A PushT-shaped source: 4 episodes of 7 to 11 frames, 2 tasks, one 64×80 AV1 camera, v3.0.
fn source(dir: &Path) -> PathBuf {
    let mut preset = Preset::load("pusht").unwrap();
    preset.episodes = 4;
    preset.frames_per_episode = 9;
    preset.frames_jitter = 2;
    preset.tasks = vec!["push the T".into(), "push it back".into()];
    preset.codec = VideoCodec::Av1;
    preset.cameras = vec![CameraPreset { key: CAMERA.into(), height: 64, width: 80 }];
    let root = dir.join("source");
    let options = SynthOptions { seed: 5, episodes_per_file: Some(3), ..SynthOptions::default() };
    synth(&root, &preset, &options).unwrap();
    root
}

fn open(root: &Path, episodes: Option<Vec<usize>>) -> Dataset {
    Dataset::open_with(root, &DatasetOptions { episodes, ..DatasetOptions::default() }).unwrap()
}

/// Per selected frame, in order: the numeric values, task and the decoded camera frame
/// (uint8 CHW) at `resolution`.
struct Frames {
    values: Vec<BTreeMap<String, Values>>,
    tasks: Vec<String>,
    pixels: Vec<Vec<u8>>,
}

fn frames(dataset: &Dataset, resolution: Option<(u32, u32)>) -> Frames {
    let window = dataset.window(&WindowSpec::Single).unwrap();
    let options = DecodeOptions { resolution, ..DecodeOptions::default() };
    let mut decoder = VideoDecoder::new(options);
    let mut all = Frames { values: vec![], tasks: vec![], pixels: vec![] };
    for episode in dataset.episodes() {
        for index in episode.from..episode.to {
            let mut sample = dataset.sample(index, &window).unwrap();
            sample.decode_pixels(&mut decoder, true).unwrap();
            let Values::U8(pixels) = sample.arrays.remove(CAMERA).unwrap().values else {
                panic!("uint8 pixels")
            };
            all.pixels.push(pixels);
            all.tasks.push(sample.task.clone());
            all.values.push(
                ["observation.state", "action", "timestamp", "frame_index"]
                    .iter()
                    .map(|k| (k.to_string(), sample.arrays[*k].values.clone()))
                    .collect(),
            );
        }
    }
    all
}

fn av1(gop: u32) -> FrameStorage {
    let mut settings = EncodeSettings::lerobot(VideoCodec::Av1);
    settings.gop = gop;
    FrameStorage::Video(settings)
}

fn options(version: CodebaseVersion, storage: FrameStorage) -> TranscodeOptions {
    TranscodeOptions { version, storage, resolution: None, episodes_per_file: None }
}

#[test]
fn a_png_candidate_holds_the_selected_episodes_values_tasks_and_exact_frames() {
    let dir = tempfile::tempdir().unwrap();
    let root = source(dir.path());
    let before = file_tree(&root);
    let source = open(&root, Some(vec![1, 3]));
    let out = dir.path().join("png");
    let report =
        transcode(&source, &out, &options(CodebaseVersion::V21, FrameStorage::Png)).unwrap();
    assert_eq!(file_tree(&root), before, "the source was written");

    let candidate = open(&out, None);
    let lengths: Vec<usize> = source.episodes().map(|e| e.length).collect();
    let candidate_lengths: Vec<usize> = candidate.episodes().map(|e| e.length).collect();
    assert_eq!(candidate_lengths, lengths, "the selected episodes, renumbered in order");
    assert_eq!(report.episodes, 2);
    assert_eq!(report.frames, lengths.iter().sum::<usize>());
    assert!(report.frame_bytes > 0);
    let feature = candidate.info().features.iter().find(|f| f.name == CAMERA).unwrap();
    assert_eq!(feature.kind, feedbench::dataset::FeatureKind::Image);
    assert_eq!(candidate.info().codebase_version, CodebaseVersion::V21);

    let (want, got) = (frames(&source, None), frames(&candidate, None));
    assert_eq!(got.values, want.values, "state, action, timestamps, frame indices");
    assert_eq!(got.tasks, want.tasks);
    assert!(want.tasks.contains(&"push it back".to_string()), "{:?}", want.tasks);
    assert!(got.pixels == want.pixels, "PNG holds the reference frames exactly");
}

#[test]
fn a_resized_candidate_holds_the_reference_scaled_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let root = source(dir.path());
    let source = open(&root, Some(vec![0]));
    let out = dir.path().join("small");
    let mut options = options(CodebaseVersion::V30, FrameStorage::Png);
    options.resolution = Some((32, 40));
    transcode(&source, &out, &options).unwrap();
    let candidate = open(&out, None);
    let feature = candidate.info().features.iter().find(|f| f.name == CAMERA).unwrap();
    assert_eq!(feature.shape, vec![32, 40, 3]);
    let (want, got) = (frames(&source, Some((32, 40))), frames(&candidate, None));
    assert_eq!(got.pixels[0].len(), 3 * 32 * 40);
    assert!(got.pixels == want.pixels);
}

#[test]
fn v21_and_v30_candidates_of_one_encoding_decode_to_the_same_frames() {
    let dir = tempfile::tempdir().unwrap();
    let root = source(dir.path());
    let source = open(&root, None);
    let (v21, v30) = (dir.path().join("v21"), dir.path().join("v30"));
    let a = transcode(&source, &v21, &options(CodebaseVersion::V21, av1(4))).unwrap();
    let mut b_options = options(CodebaseVersion::V30, av1(4));
    b_options.episodes_per_file = Some(3);
    let b = transcode(&source, &v30, &b_options).unwrap();
    assert_eq!(a.frame_bytes, b.frame_bytes, "the same coded frames");
    let files = |root: &Path| {
        file_tree(root).keys().filter(|p| p.extension().is_some_and(|e| e == "mp4")).count()
    };
    assert_eq!((files(&v21), files(&v30)), (4, 2));
    let (a, b) = (open(&v21, None), open(&v30, None));
    let (a, b) = (frames(&a, None), frames(&b, None));
    assert_eq!(a.values, b.values);
    assert!(a.pixels == b.pixels, "v2.1 and v3.0 decode to different frames");
    let reference = frames(&source, None);
    assert_eq!(a.values, reference.values);
    assert!(a.pixels != reference.pixels, "AV1 at CRF 30 is lossy");
}

#[test]
fn bad_options_are_refused_naming_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let root = source(dir.path());
    let source = open(&root, Some(vec![0]));
    let out = dir.path().join("bad");
    let mut zero = options(CodebaseVersion::V30, av1(2));
    zero.episodes_per_file = Some(0);
    let error = transcode(&source, &out, &zero).unwrap_err().to_string();
    assert!(error.contains("episodes per file") && error.contains("bad"), "{error}");
    let error = transcode(&source, &out, &options(CodebaseVersion::V30, av1(0))).unwrap_err();
    assert!(error.to_string().contains("gop"), "{error}");
    assert!(!out.exists());
}

#[test]
fn a_raw_candidate_reads_back_the_reference_frames_without_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let root = source(dir.path());
    let source = open(&root, None);
    let out = dir.path().join("raw");
    let mut options = options(CodebaseVersion::V30, FrameStorage::Raw);
    options.episodes_per_file = Some(3);
    let report = transcode(&source, &out, &options).unwrap();
    assert_eq!(report.frame_bytes, (report.camera_frames * 3 * 64 * 80) as u64);
    let extensions: Vec<String> = file_tree(&out)
        .keys()
        .filter(|p| p.starts_with("videos"))
        .map(|p| p.extension().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(extensions, ["rgb", "rgb"], "4 episodes, 3 per file");
    let candidate = open(&out, None);
    let feature = candidate.info().features.iter().find(|f| f.name == CAMERA).unwrap();
    assert_eq!(feature.video.as_ref().unwrap().codec.as_deref(), Some("raw"));
    let (want, got) = (frames(&source, None), frames(&candidate, None));
    assert_eq!(got.values, want.values);
    assert!(got.pixels == want.pixels, "raw frames are the reference exactly");
    // Raw frames are read at the size they were stored at.
    let window = candidate.window(&WindowSpec::Single).unwrap();
    let mut decoder =
        VideoDecoder::new(DecodeOptions { resolution: Some((32, 40)), ..DecodeOptions::default() });
    let mut sample = candidate.sample(0, &window).unwrap();
    let error = sample.decode_pixels(&mut decoder, true).unwrap_err().to_string();
    assert!(error.contains("stored at 64x80") && error.contains(".rgb"), "{error}");
}
