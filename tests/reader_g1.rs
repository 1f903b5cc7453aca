//! The reader on a real LeRobot v2.1 dataset (Unitree G1, partial download: videos of
//! episodes 1, 2, 4, 29 and 30 only).

use crate::common;

use std::path::Path;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{Float32Type, Int64Type};
use feedbench::dataset::summary::Summary;
use feedbench::dataset::{Dataset, DatasetError, DatasetOptions, Values, WindowSpec};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// Rows of one episode file read independently of the reader: (state, action, timestamp, index).
struct EpisodeRows {
    state: Vec<Vec<f32>>,
    action: Vec<Vec<f32>>,
    timestamp: Vec<f32>,
    index: Vec<i64>,
}

fn read_episode_file(path: &Path) -> EpisodeRows {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().build().unwrap();
    let mut rows = EpisodeRows { state: vec![], action: vec![], timestamp: vec![], index: vec![] };
    for batch in reader {
        let batch = batch.unwrap();
        let lists = |name: &str| -> Vec<Vec<f32>> {
            let column = batch.column_by_name(name).unwrap();
            let to_vec =
                |a: std::sync::Arc<dyn Array>| a.as_primitive::<Float32Type>().values().to_vec();
            match column.data_type() {
                arrow::datatypes::DataType::FixedSizeList(..) => {
                    column.as_fixed_size_list().iter().map(|r| to_vec(r.unwrap())).collect()
                }
                _ => column.as_list::<i32>().iter().map(|r| to_vec(r.unwrap())).collect(),
            }
        };
        rows.state.extend(lists("observation.state"));
        rows.action.extend(lists("action"));
        rows.timestamp.extend(
            batch
                .column_by_name("timestamp")
                .unwrap()
                .as_primitive::<Float32Type>()
                .values()
                .iter(),
        );
        rows.index.extend(
            batch.column_by_name("index").unwrap().as_primitive::<Int64Type>().values().iter(),
        );
    }
    rows
}

#[test]
fn info_reports_listed_and_present_episodes_and_the_real_camera() {
    let Some(root) = common::g1_partial() else { return };
    let summary = Summary::collect(&root).unwrap();
    assert_eq!(summary.episodes_listed, 100);
    assert_eq!(summary.episodes_present, [1, 2, 4, 29, 30]);
    assert_eq!(summary.fps, 30.0);
    assert_eq!(summary.frames, 35965);
    let shape =
        |name: &str| summary.features.iter().find(|f| f.name == name).unwrap().shape.clone();
    assert_eq!(shape("observation.state"), [26]);
    assert_eq!(shape("action"), [26]);
    assert_eq!(summary.cameras.len(), 1);
    let stream = summary.cameras[0].stream.as_ref().unwrap();
    assert_eq!((stream.codec.as_str(), stream.width, stream.height), ("av1", 640, 480));
    assert_eq!(stream.pix_fmt, "yuv420p");
    assert!(summary.video_bytes > 0 && summary.data_bytes > 0);
    let text = summary.to_string();
    assert!(text.contains("100 listed, 5 present on disk: 1, 2, 4, 29, 30"), "{text}");
}

#[test]
fn diffusion_windows_of_episode_4_match_the_file() {
    let Some(root) = common::g1_partial() else { return };
    let dataset = Dataset::open(&root).unwrap();
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    let episode = dataset.all_episodes().iter().find(|e| e.index.0 == 4).unwrap().clone();
    let rows = read_episode_file(&root.join(&episode.data_path));
    assert_eq!(rows.index.len(), episode.length);
    assert_eq!(rows.index[0] as usize, episode.from, "global index of the episode's first frame");

    let last = episode.length - 1;
    for frame in [0, 1, episode.length / 2, last - 1, last] {
        let index = episode.from + frame;
        let sample = dataset.sample(index, &window).unwrap();
        assert_eq!(sample.task, "Pick up the yellow bottle on the table.");
        let clamp = |offset: i64| (frame as i64 + offset).clamp(0, last as i64) as usize;
        let padded = |offset: i64| frame as i64 + offset < 0 || frame as i64 + offset > last as i64;

        let state = &sample.arrays["observation.state"];
        assert_eq!(state.shape, [2, 26]);
        let expected: Vec<f32> =
            [-1, 0].iter().flat_map(|&o| rows.state[clamp(o)].clone()).collect();
        assert_eq!(state.values, Values::F32(expected), "state window at frame {frame}");
        let pads: Vec<bool> = [-1, 0].iter().map(|&o| padded(o)).collect();
        assert_eq!(sample.pad_masks["observation.state"], pads);

        let action = &sample.arrays["action"];
        assert_eq!(action.shape, [16, 26]);
        let expected: Vec<f32> = (-1..15).flat_map(|o| rows.action[clamp(o)].clone()).collect();
        assert_eq!(action.values, Values::F32(expected), "action window at frame {frame}");
        let pads: Vec<bool> = (-1..15).map(padded).collect();
        assert_eq!(sample.pad_masks["action"], pads);

        // Keys without deltas: the row's own value, no time dimension.
        assert_eq!(sample.arrays["index"].shape, Vec::<usize>::new());
        assert_eq!(sample.arrays["index"].values, Values::I64(vec![index as i64]));
        assert_eq!(sample.arrays["frame_index"].values, Values::I64(vec![frame as i64]));
        assert_eq!(sample.arrays["timestamp"].values, Values::F32(vec![rows.timestamp[frame]]));

        let video = &sample.videos["observation.images.cam_high"];
        assert!(video
            .path
            .ends_with("videos/chunk-000/observation.images.cam_high/episode_000004.mp4"));
        let times: Vec<f64> =
            [-1, 0].iter().map(|&o| f64::from(rows.timestamp[clamp(o)])).collect();
        assert_eq!(video.timestamps, times);
        assert_eq!(sample.pad_masks["observation.images.cam_high"], [frame == 0, false]);
    }
    // Padding at the edges really happened.
    let first = dataset.sample(episode.from, &window).unwrap();
    assert_eq!(first.pad_masks["action"].iter().filter(|p| **p).count(), 1);
    let end = dataset.sample(episode.from + last, &window).unwrap();
    assert_eq!(end.pad_masks["action"].iter().filter(|p| **p).count(), 14);
}

#[test]
fn selecting_an_episode_without_its_video_names_the_mp4() {
    let Some(root) = common::g1_partial() else { return };
    let options = DatasetOptions { episodes: Some(vec![0]), ..Default::default() };
    let err = Dataset::open_with(&root, &options).err().expect("episode 0 has no video on disk");
    assert!(matches!(err, DatasetError::MissingFile { episode: 0, .. }), "{err:?}");
    assert!(err.to_string().contains("observation.images.cam_high/episode_000000.mp4"), "{err}");
    // Unselected, it still fails when one of its frames is sampled.
    let dataset = Dataset::open(&root).unwrap();
    let err = dataset.sample(10, &dataset.window(&WindowSpec::Single).unwrap()).unwrap_err();
    assert!(err.to_string().contains("episode_000000.mp4"), "{err}");
}

#[test]
fn present_episodes_give_the_episode_aware_index_space() {
    let Some(root) = common::g1_partial() else { return };
    let options = DatasetOptions { episodes: Some(vec![1, 2, 4, 29, 30]), ..Default::default() };
    let dataset = Dataset::open_with(&root, &options).unwrap();
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    assert_eq!(window.drop_n_last_frames, 7);
    let indices = dataset.sample_indices(window.drop_n_last_frames);
    let lengths: Vec<usize> = dataset.episodes().map(|e| e.length).collect();
    assert_eq!(indices.len(), lengths.iter().map(|l| l - 7).sum::<usize>());
    for episode in dataset.episodes() {
        assert!(indices.contains(&episode.from));
        assert!(indices.contains(&(episode.to - 8)));
        assert!(!indices.contains(&(episode.to - 7)), "the last 7 frames are dropped");
    }
    let outside = dataset.all_episodes()[3].from;
    let err = dataset.sample(outside, &window).unwrap_err().to_string();
    assert!(err.contains("not in the selected episodes"), "{err}");
}
