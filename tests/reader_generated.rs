//! The reader on generated v2.1 and v3.0 datasets: several episodes per file, row groups that
//! do not align with episodes, every list layout, and every kind of bad input.

use std::path::Path;

use feedbench::dataset::sample::BatchSamples;
use feedbench::dataset::write::{
    synthetic_png, synthetic_state, write_tabular, ListLayout, TabularSpec, IMAGE_KEY,
};
use feedbench::dataset::{
    CodebaseVersion, Dataset, DatasetError, DatasetOptions, Values, WindowSpec,
};

const LENGTHS: [usize; 5] = [5, 7, 3, 9, 4];

fn spec(version: CodebaseVersion, list_layout: ListLayout) -> TabularSpec {
    TabularSpec {
        version,
        list_layout,
        tasks: vec!["push".into(), "pull".into()],
        ..Default::default()
    }
}

fn generated(
    version: CodebaseVersion,
    layout: ListLayout,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    write_tabular(&root, &spec(version, layout)).unwrap();
    (dir, root)
}

fn expected_state(indices: &[usize], dim: usize) -> Values {
    Values::F32(
        indices.iter().flat_map(|&i| (0..dim).map(move |d| synthetic_state(i, d))).collect(),
    )
}

fn check_every_frame(root: &Path) {
    let dataset = Dataset::open(root).unwrap();
    assert_eq!(dataset.num_frames(), LENGTHS.iter().sum::<usize>());
    let window = dataset
        .window(
            &WindowSpec::parse_deltas(&["observation.state=-0.1,0", "action=-0.1,0,0.1,0.2"])
                .unwrap(),
        )
        .unwrap();
    for episode in dataset.episodes() {
        assert_eq!(episode.length, LENGTHS[episode.index.0]);
        for index in episode.from..episode.to {
            let sample = dataset.sample(index, &window).unwrap();
            let clamp = |o: i64| {
                (index as i64 + o).clamp(episode.from as i64, episode.to as i64 - 1) as usize
            };
            let rows: Vec<usize> = [-1, 0].map(clamp).to_vec();
            assert_eq!(
                sample.arrays["observation.state"].values,
                expected_state(&rows, 3),
                "index {index}"
            );
            assert_eq!(sample.arrays["observation.state"].shape, [2, 3]);
            let rows: Vec<usize> = [-1, 0, 1, 2].map(clamp).to_vec();
            let Values::F32(action) = &sample.arrays["action"].values else { panic!() };
            let Values::F32(state) = expected_state(&rows, 2) else { panic!() };
            assert_eq!(action, &state.iter().map(|v| -v).collect::<Vec<_>>());
            let pads: Vec<bool> = [-1i64, 0, 1, 2]
                .iter()
                .map(|&o| {
                    index as i64 + o < episode.from as i64 || index as i64 + o >= episode.to as i64
                })
                .collect();
            assert_eq!(sample.pad_masks["action"], pads);
            assert_eq!(
                sample.arrays["episode_index"].values,
                Values::I64(vec![episode.index.0 as i64])
            );
            let frame = index - episode.from;
            assert_eq!(sample.arrays["timestamp"].values, Values::F32(vec![frame as f32 / 10.0]));
            assert_eq!(sample.task, ["push", "pull"][episode.index.0 % 2]);
        }
    }
}

#[test]
fn v3_files_with_several_episodes_and_unaligned_row_groups() {
    for layout in [ListLayout::FixedSize, ListLayout::List, ListLayout::LargeList] {
        let (_dir, root) = generated(CodebaseVersion::V30, layout);
        assert!(root.join("data/chunk-000/file-002.parquet").is_file(), "5 episodes, 2 per file");
        check_every_frame(&root);
    }
}

#[test]
fn windows_with_gaps_read_each_row_of_its_own_row_group() {
    // Offsets 0 and 5 over row groups of 4 rows: a window's rows at positions 1 and 2 of two
    // row groups (index 5's and 10's), the second not the row after the first.
    let (_dir, root) = generated(CodebaseVersion::V30, ListLayout::FixedSize);
    let dataset = Dataset::open(&root).unwrap();
    let deltas = ["action=0,0.5"];
    let window = dataset.window(&WindowSpec::parse_deltas(&deltas).unwrap()).unwrap();
    for episode in dataset.episodes() {
        for index in episode.from..episode.to {
            let rows = [0i64, 5].map(|o| {
                (index as i64 + o).clamp(episode.from as i64, episode.to as i64 - 1) as usize
            });
            let Values::F32(action) =
                &dataset.sample(index, &window).unwrap().arrays["action"].values
            else {
                panic!("action is float32")
            };
            let Values::F32(state) = expected_state(&rows, 2) else { panic!() };
            assert_eq!(action, &state.iter().map(|v| -v).collect::<Vec<_>>(), "index {index}");
        }
    }
}

#[test]
fn v2_files_one_per_episode() {
    let (_dir, root) = generated(CodebaseVersion::V21, ListLayout::List);
    assert!(root.join("data/chunk-000/episode_000004.parquet").is_file());
    check_every_frame(&root);
}

#[test]
fn v3_episode_ranges_and_episode_filter() {
    let (_dir, root) = generated(CodebaseVersion::V30, ListLayout::FixedSize);
    let options = DatasetOptions { episodes: Some(vec![3, 1]), ..Default::default() };
    let dataset = Dataset::open_with(&root, &options).unwrap();
    let ranges: Vec<(usize, usize, usize)> =
        dataset.episodes().map(|e| (e.index.0, e.from, e.to)).collect();
    // Global ranges: 0:[0,5) 1:[5,12) 2:[12,15) 3:[15,24) 4:[24,28); episode 3 shares a file with 2.
    assert_eq!(ranges, [(1, 5, 12), (3, 15, 24)]);
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    let indices = dataset.sample_indices(window.drop_n_last_frames);
    assert_eq!(indices, (5..5).chain(15..17).collect::<Vec<_>>(), "7 frames dropped per episode");
    let sample = dataset.sample(15, &window).unwrap();
    assert_eq!(sample.arrays["observation.state"].values, expected_state(&[15, 15], 3));
    let err = dataset.sample(12, &window).unwrap_err().to_string();
    assert!(err.contains("index 12 is not in the selected episodes"), "{err}");
    let err = Dataset::open_with(
        &root,
        &DatasetOptions { episodes: Some(vec![9]), ..Default::default() },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("episode 9 is not in the dataset"), "{err}");
}

#[test]
fn deltas_off_the_frame_grid_are_refused() {
    let (_dir, root) = generated(CodebaseVersion::V30, ListLayout::List);
    let dataset = Dataset::open(&root).unwrap();
    let err = dataset
        .window(&WindowSpec::parse_deltas(&["action=0.05"]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a multiple of 1/fps"), "{err}");
    let err =
        dataset.window(&WindowSpec::parse_deltas(&["nope=0"]).unwrap()).unwrap_err().to_string();
    assert!(err.contains("`nope`: no such feature"), "{err}");
    // Within tolerance (1e-4 s) is accepted, as LeRobot does.
    assert!(dataset.window(&WindowSpec::parse_deltas(&["action=0.10005"]).unwrap()).is_ok());
    // A half frame, where the tolerance lets it through, goes to the even frame, as Python's
    // round in LeRobot's get_delta_indices takes it (0.5 → 0, 1.5 → 2, 2.5 → 2).
    let options = DatasetOptions { tolerance_s: 0.06, ..DatasetOptions::default() };
    let wide = Dataset::open_with(&root, &options).unwrap();
    let halves = WindowSpec::parse_deltas(&["action=0.05,0.15,0.25"]).unwrap();
    assert_eq!(wide.window(&halves).unwrap().offsets("action"), Some(&[0, 2, 2][..]));
}

fn edit_info(root: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = root.join("meta/info.json");
    let mut info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut info);
    std::fs::write(&path, serde_json::to_string(&info).unwrap()).unwrap();
}

#[test]
fn missing_and_corrupt_info_json() {
    let (_dir, root) = generated(CodebaseVersion::V30, ListLayout::List);
    let info = root.join("meta/info.json");
    let text = std::fs::read_to_string(&info).unwrap();
    std::fs::write(&info, &text[..text.len() / 2]).unwrap();
    let err = Dataset::open(&root).err().unwrap();
    assert!(matches!(err, DatasetError::Json { .. }), "{err:?}");
    assert!(err.to_string().contains("meta/info.json"), "{err}");
    std::fs::remove_file(&info).unwrap();
    let err = Dataset::open(&root).err().unwrap().to_string();
    assert!(err.contains("meta/info.json") && err.contains("missing"), "{err}");
    let err = Dataset::open(root.join("nowhere")).err().unwrap().to_string();
    assert!(err.contains("nowhere") && err.contains("no such dataset directory"), "{err}");
}

#[test]
fn unknown_version_is_refused_by_name() {
    let (_dir, root) = generated(CodebaseVersion::V21, ListLayout::List);
    edit_info(&root, |info| info["codebase_version"] = "v1.6".into());
    let err = Dataset::open(&root).err().unwrap();
    assert!(
        matches!(err, DatasetError::UnsupportedVersion { ref found, .. } if found == "v1.6"),
        "{err:?}"
    );
    assert!(err.to_string().contains("v2.0, v2.1 and v3.0"), "{err}");
}

#[test]
fn frames_stored_as_anything_but_parquet_are_refused_by_name_before_any_read() {
    let (_dir, root) = generated(CodebaseVersion::V30, ListLayout::List);
    edit_info(&root, |info| info["storage_format"] = "parquet".into());
    assert!(Dataset::open(&root).is_ok(), "LeRobot main's parquet reads as before");
    // Lance: refused with what to do, even where the rest of info.json would not parse.
    edit_info(&root, |info| {
        info["storage_format"] = "lance".into();
        info["fps"] = "fast".into();
    });
    let err = Dataset::open(&root).err().unwrap().to_string();
    assert!(err.contains("info.json") && err.contains("storage_format \"lance\""), "{err}");
    assert!(err.contains("read it with LeRobot, or convert it back to Parquet"), "{err}");
    edit_info(&root, |info| info["storage_format"] = "zarr".into());
    let err = Dataset::open(&root).err().unwrap().to_string();
    assert!(err.contains("storage_format \"zarr\": expected \"parquet\""), "{err}");
}

#[test]
fn a_feature_without_its_column_names_file_and_column() {
    let (_dir, root) = generated(CodebaseVersion::V30, ListLayout::List);
    edit_info(&root, |info| {
        info["features"]["observation.velocity"] =
            serde_json::json!({"dtype": "float32", "shape": [3], "names": null});
    });
    let err = Dataset::open(&root).err().unwrap().to_string();
    assert!(
        err.contains("file-000.parquet") && err.contains("missing column `observation.velocity`"),
        "{err}"
    );
}

#[test]
fn a_column_of_the_wrong_length_names_file_column_and_both_lengths() {
    // Fixed-size lists are checked when the file is opened…
    let (_dir, root) = generated(CodebaseVersion::V30, ListLayout::FixedSize);
    edit_info(&root, |info| {
        info["features"]["observation.state"]["shape"] = serde_json::json!([4])
    });
    let err = Dataset::open(&root).err().unwrap().to_string();
    assert!(err.contains("file-000.parquet") && err.contains("`observation.state`"), "{err}");
    assert!(err.contains("expected 4 values") && err.contains("found 3"), "{err}");
    // …variable-size lists when their rows are first read.
    let (_dir, root) = generated(CodebaseVersion::V21, ListLayout::LargeList);
    edit_info(&root, |info| info["features"]["action"]["shape"] = serde_json::json!([5]));
    let dataset = Dataset::open(&root).unwrap();
    let err =
        dataset.sample(0, &dataset.window(&WindowSpec::Single).unwrap()).unwrap_err().to_string();
    assert!(err.contains("episode_000000.parquet") && err.contains("`action`"), "{err}");
    assert!(err.contains("expected 5 values") && err.contains("found 2"), "{err}");
}

#[test]
fn a_missing_data_file_names_it() {
    let (_dir, root) = generated(CodebaseVersion::V21, ListLayout::List);
    std::fs::remove_file(root.join("data/chunk-000/episode_000002.parquet")).unwrap();
    let err = Dataset::open(&root).err().unwrap();
    assert!(matches!(err, DatasetError::MissingFile { episode: 2, .. }), "{err:?}");
    let only = DatasetOptions { episodes: Some(vec![0, 1]), ..Default::default() };
    assert!(Dataset::open_with(&root, &only).is_ok(), "other episodes still open");
}

#[test]
fn writing_never_touches_an_existing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("mine.txt"), "keep").unwrap();
    let err = write_tabular(&root, &spec(CodebaseVersion::V30, ListLayout::List))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not empty"), "{err}");
    assert_eq!(std::fs::read_to_string(root.join("mine.txt")).unwrap(), "keep");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no partial sibling left behind");
}

#[test]
fn image_features_come_back_as_the_encoded_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let spec =
        TabularSpec { image_size: Some((6, 8)), ..spec(CodebaseVersion::V30, ListLayout::List) };
    write_tabular(&root, &spec).unwrap();
    let dataset = Dataset::open(&root).unwrap();
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    let sample = dataset.sample(13, &window).unwrap();
    let images = &sample.images[IMAGE_KEY];
    assert!(images.windowed);
    assert_eq!(images.images, [synthetic_png(12, 6, 8), synthetic_png(13, 6, 8)]);
    assert_eq!(sample.pad_masks[IMAGE_KEY], [false, false]);
    // Episode 2 covers [12, 15): at its first frame the previous step pads with the same image.
    let sample = dataset.sample(12, &window).unwrap();
    assert_eq!(sample.images[IMAGE_KEY].images, [synthetic_png(12, 6, 8), synthetic_png(12, 6, 8)]);
    assert_eq!(sample.pad_masks[IMAGE_KEY], [true, false]);
    let single = dataset.sample(3, &dataset.window(&WindowSpec::Single).unwrap()).unwrap();
    assert_eq!(single.images[IMAGE_KEY].images, [synthetic_png(3, 6, 8)]);
    assert!(!single.images[IMAGE_KEY].windowed);
}

/// A v3.0 dataset with an image feature (row groups of 4 rows, across episodes) and a v2.1 one
/// without, in one directory.
fn two_kinds() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let with_images = dir.path().join("images");
    let images =
        TabularSpec { image_size: Some((6, 8)), ..spec(CodebaseVersion::V30, ListLayout::List) };
    write_tabular(&with_images, &images).unwrap();
    let plain = dir.path().join("plain");
    write_tabular(&plain, &spec(CodebaseVersion::V21, ListLayout::FixedSize)).unwrap();
    (dir, with_images, plain)
}

#[test]
fn a_reused_sample_equals_a_fresh_one_across_windows_and_datasets() {
    let (_dir, with_images, plain) = two_kinds();
    let mut reused = feedbench::dataset::Sample::default();
    // Windows and datasets alternate so that each call finds the last one's keys and shapes.
    for (root, window, index) in [
        (&with_images, WindowSpec::diffusion(), 13),
        (&with_images, WindowSpec::Single, 12),
        (&plain, WindowSpec::diffusion(), 20),
        (&with_images, WindowSpec::diffusion(), 0),
        (&plain, WindowSpec::Single, 27),
    ] {
        let dataset = Dataset::open(root).unwrap();
        let window = dataset.window(&window).unwrap();
        dataset.sample_into(index, &window, &mut reused).unwrap();
        assert_eq!(reused, dataset.sample(index, &window).unwrap(), "{root:?} index {index}");
    }
}

#[test]
fn a_batch_stacks_what_its_samples_hold_item_after_item() {
    let (_dir, with_images, plain) = two_kinds();
    let mut batch = BatchSamples::default();
    // An item built alone before: its own values go.
    let first = Dataset::open(&with_images).unwrap();
    batch.items.push(first.sample(3, &first.window(&WindowSpec::diffusion()).unwrap()).unwrap());
    // Windows, datasets and batch sizes alternate, each batch built in the last one's buffers;
    // episodes start at 0, 5, 12, 15 and 24: windows pad at either end.
    for (root, window, indices) in [
        (&with_images, WindowSpec::diffusion(), vec![13, 0, 4, 12, 27]),
        (&with_images, WindowSpec::Single, vec![12, 3]),
        (&plain, WindowSpec::diffusion(), vec![20, 5, 11, 23, 24, 6, 14]),
        (&with_images, WindowSpec::diffusion(), vec![0]),
        (&plain, WindowSpec::Single, vec![27, 0, 1]),
    ] {
        let dataset = Dataset::open(root).unwrap();
        let window = dataset.window(&window).unwrap();
        dataset.batch_into(indices.iter().copied(), &window, &mut batch).unwrap();
        let samples: Vec<_> =
            indices.iter().map(|&i| dataset.sample(i, &window).unwrap()).collect();
        let at = format!("{root:?} {indices:?}");
        let first = &samples[0];
        assert_eq!(
            batch.stacked.arrays.keys().collect::<Vec<_>>(),
            first.arrays.keys().collect::<Vec<_>>(),
            "{at}"
        );
        for (key, stacked) in &batch.stacked.arrays {
            let mut shape = vec![indices.len()];
            shape.extend(&first.arrays[key].shape);
            assert_eq!(stacked.shape, shape, "{at} {key}");
            let mut values = first.arrays[key].values.empty_like(0);
            for sample in &samples {
                let own = &sample.arrays[key].values;
                values.extend_from(own, 0..own.len());
            }
            assert_eq!(stacked.values, values, "{at} {key}");
        }
        assert_eq!(
            batch.stacked.pad_masks.keys().collect::<Vec<_>>(),
            first.pad_masks.keys().collect::<Vec<_>>(),
            "{at}"
        );
        for (key, stacked) in &batch.stacked.pad_masks {
            let masks: Vec<bool> = samples.iter().flat_map(|s| s.pad_masks[key].clone()).collect();
            assert_eq!(*stacked, masks, "{at} {key}");
        }
        assert_eq!(batch.items.len(), indices.len(), "{at}");
        for (item, sample) in batch.items.iter().zip(&samples) {
            assert!(
                item.arrays.is_empty() && item.pad_masks.is_empty(),
                "{at}: values stacked only"
            );
            assert_eq!((item.index, &item.task), (sample.index, &sample.task), "{at}");
            assert_eq!((&item.images, &item.videos), (&sample.images, &sample.videos), "{at}");
        }
    }
}
