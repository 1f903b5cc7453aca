//! Writing LeRobot datasets: the parquet frames and the metadata of v2.1 and v3.0 layouts.
//!
//! A dataset is written into a temporary sibling directory and renamed into place at the end,
//! so a half-written dataset never looks like a dataset; an existing non-empty directory is
//! never written into.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, FixedSizeListArray, Float32Array, Int64Array, LargeListArray, ListArray,
    RecordBatch, StringArray, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Value as Json};

use super::meta::CodebaseVersion;
use super::{DatasetError, Result};

/// How vector columns are stored in parquet (datasets in the wild use all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListLayout {
    /// `FixedSizeList<float32, N>` (what LeRobot writes).
    FixedSize,
    /// `List<float32>`.
    List,
    /// `LargeList<float32>`.
    LargeList,
}

/// The frames of a dataset to write: shapes, episodes and file layout.
#[derive(Debug, Clone, PartialEq)]
pub struct TabularSpec {
    /// v2.1 (a file per episode) or v3.0 (many episodes per file).
    pub version: CodebaseVersion,
    /// Frames per second.
    pub fps: u32,
    /// `robot_type` in info.json.
    pub robot_type: String,
    /// Frames of each episode, episode 0 first.
    pub episode_lengths: Vec<usize>,
    /// Dimension of `observation.state`.
    pub state_dim: usize,
    /// Dimension of `action`.
    pub action_dim: usize,
    /// Task strings; episode `e` does task `e % tasks.len()`.
    pub tasks: Vec<String>,
    /// v3.0: episodes per data file.
    pub episodes_per_file: usize,
    /// Rows per parquet row group (need not align with episodes).
    pub row_group_rows: usize,
    /// Storage of the vector columns.
    pub list_layout: ListLayout,
    /// An `observation.image` feature of this (height, width), PNG files in parquet.
    pub image_size: Option<(u32, u32)>,
}

impl Default for TabularSpec {
    /// A small v3.0 dataset: 5 episodes of 3 to 9 frames at 10 fps, state 3, action 2, two
    /// episodes per file, row groups of 4 rows (so they straddle episodes), fixed-size lists.
    fn default() -> Self {
        Self {
            version: CodebaseVersion::V30,
            fps: 10,
            robot_type: "generated".into(),
            episode_lengths: vec![5, 7, 3, 9, 4],
            state_dim: 3,
            action_dim: 2,
            tasks: vec!["push".into()],
            episodes_per_file: 2,
            row_group_rows: 4,
            list_layout: ListLayout::FixedSize,
            image_size: None,
        }
    }
}

/// The key of the image feature that [`TabularSpec::image_size`] adds.
pub const IMAGE_KEY: &str = "observation.image";

/// The value written for `observation.state[dim]` at global `index` (`action` is its negation):
/// distinct per frame and dimension, so a test can tell any two apart.
pub fn synthetic_state(index: usize, dim: usize) -> f32 {
    index as f32 * 0.25 + dim as f32 * 1000.0
}

/// The PNG file written as the image of global `index`: a gradient that moves with the index.
pub fn synthetic_png(index: usize, height: u32, width: u32) -> Vec<u8> {
    use image::ImageEncoder;
    let pixels: Vec<u8> = (0..height)
        .flat_map(|y| {
            (0..width).flat_map(move |x| [(x as usize + index) as u8, y as u8, (index * 7) as u8])
        })
        .collect();
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(&pixels, width, height, image::ExtendedColorType::Rgb8)
        .expect("encoding to memory");
    png
}

/// The global index range of each episode: `[from, to)`.
fn episode_ranges(lengths: &[usize]) -> Vec<(usize, usize)> {
    let mut from = 0;
    lengths
        .iter()
        .map(|&length| {
            from += length;
            (from - length, from)
        })
        .collect()
}

/// Creates `out` through a temporary sibling renamed into place once `fill` succeeded.
/// Refuses an existing non-empty `out` unless `force`, and then replaces it only at the end.
pub fn write_atomically(
    out: &Path,
    force: bool,
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let occupied =
        out.exists() && std::fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(true);
    if occupied && !force {
        return Err(DatasetError::invalid(
            out,
            "exists and is not empty (pass --force to replace it)",
        ));
    }
    let name =
        out.file_name().ok_or_else(|| DatasetError::invalid(out, "expected a directory name"))?;
    let staging =
        out.with_file_name(format!(".{}.partial-{}", name.to_string_lossy(), std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    }
    std::fs::create_dir_all(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    if let Err(e) = fill(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    if out.exists() {
        std::fs::remove_dir_all(out).map_err(|e| DatasetError::io(out, e))?;
    }
    std::fs::rename(&staging, out).map_err(|e| DatasetError::io(out, e))
}

/// Writes a dataset of state/action frames (no cameras) at `out`.
pub fn write_tabular(out: &Path, spec: &TabularSpec) -> Result<()> {
    if !matches!(spec.version, CodebaseVersion::V21 | CodebaseVersion::V30) {
        return Err(DatasetError::invalid(
            out,
            format!("cannot write {} datasets (v2.1 or v3.0)", spec.version),
        ));
    }
    if spec.tasks.is_empty() || spec.episode_lengths.is_empty() {
        return Err(DatasetError::invalid(out, "expected at least one task and one episode"));
    }
    write_atomically(out, false, |root| {
        let ranges = episode_ranges(&spec.episode_lengths);
        let groups: Vec<Vec<usize>> = if spec.version == CodebaseVersion::V30 {
            let per_file = spec.episodes_per_file.max(1);
            (0..ranges.len()).collect::<Vec<_>>().chunks(per_file).map(<[usize]>::to_vec).collect()
        } else {
            (0..ranges.len()).map(|e| vec![e]).collect()
        };
        for (file, episodes) in groups.iter().enumerate() {
            let path = root.join(data_file(spec.version, file, episodes[0]));
            write_parquet(&path, &frames_batch(spec, &ranges, episodes), spec.row_group_rows)?;
        }
        write_metadata(root, spec, &ranges, &groups)
    })
}

fn data_file(version: CodebaseVersion, file: usize, first_episode: usize) -> PathBuf {
    match version {
        CodebaseVersion::V30 => PathBuf::from(format!("data/chunk-000/file-{file:03}.parquet")),
        _ => PathBuf::from(format!("data/chunk-000/episode_{first_episode:06}.parquet")),
    }
}

fn vector_column(values: Vec<f32>, width: usize, layout: ListLayout) -> ArrayRef {
    let rows = values.len() / width;
    let item = Arc::new(Field::new_list_field(DataType::Float32, true));
    let values = Arc::new(Float32Array::from(values));
    match layout {
        ListLayout::FixedSize => {
            Arc::new(FixedSizeListArray::new(item, width as i32, values, None))
        }
        ListLayout::List => Arc::new(ListArray::new(
            item,
            OffsetBuffer::from_lengths(std::iter::repeat_n(width, rows)),
            values,
            None,
        )),
        ListLayout::LargeList => Arc::new(LargeListArray::new(
            item,
            OffsetBuffer::from_lengths(std::iter::repeat_n(width, rows)),
            values,
            None,
        )),
    }
}

fn frames_batch(spec: &TabularSpec, ranges: &[(usize, usize)], episodes: &[usize]) -> RecordBatch {
    let (mut state, mut action, mut timestamp) = (Vec::new(), Vec::new(), Vec::new());
    let (mut frame_index, mut episode_index, mut index, mut task_index) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &episode in episodes {
        let (from, to) = ranges[episode];
        for i in from..to {
            state.extend((0..spec.state_dim).map(|d| synthetic_state(i, d)));
            action.extend((0..spec.action_dim).map(|d| -synthetic_state(i, d)));
            timestamp.push((i - from) as f32 / spec.fps as f32);
            frame_index.push((i - from) as i64);
            episode_index.push(episode as i64);
            index.push(i as i64);
            task_index.push((episode % spec.tasks.len()) as i64);
        }
    }
    let mut columns: Vec<(&str, ArrayRef)> = vec![
        ("observation.state", vector_column(state, spec.state_dim, spec.list_layout)),
        ("action", vector_column(action, spec.action_dim, spec.list_layout)),
        ("timestamp", Arc::new(Float32Array::from(timestamp))),
        ("frame_index", Arc::new(Int64Array::from(frame_index))),
        ("episode_index", Arc::new(Int64Array::from(episode_index))),
        ("index", Arc::new(Int64Array::from(index))),
        ("task_index", Arc::new(Int64Array::from(task_index))),
    ];
    if let Some((height, width)) = spec.image_size {
        let indices = episodes.iter().flat_map(|&e| ranges[e].0..ranges[e].1);
        let pngs: Vec<Vec<u8>> = indices.map(|i| synthetic_png(i, height, width)).collect();
        columns.insert(0, (IMAGE_KEY, image_column(pngs)));
    }
    RecordBatch::try_from_iter(columns).expect("columns of equal length")
}

/// A Hugging Face image column: `struct<bytes: binary, path: string>` with the bytes set.
fn image_column(files: Vec<Vec<u8>>) -> ArrayRef {
    let paths = StringArray::from(vec![None::<&str>; files.len()]);
    Arc::new(StructArray::from(vec![
        (
            Arc::new(Field::new("bytes", DataType::Binary, true)),
            Arc::new(BinaryArray::from_iter_values(files)) as ArrayRef,
        ),
        (Arc::new(Field::new("path", DataType::Utf8, true)), Arc::new(paths) as ArrayRef),
    ]))
}

/// Writes `batch` as a parquet file with row groups of at most `row_group_rows` rows.
pub fn write_parquet(path: &Path, batch: &RecordBatch, row_group_rows: usize) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
    }
    let file = std::fs::File::create(path).map_err(|e| DatasetError::io(path, e))?;
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .build();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties))
        .map_err(|e| DatasetError::parquet(path, e))?;
    writer.write(batch).map_err(|e| DatasetError::parquet(path, e))?;
    writer.close().map_err(|e| DatasetError::parquet(path, e))?;
    Ok(())
}

fn write_json(path: &Path, value: &Json) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
    }
    let text = serde_json::to_string_pretty(value).expect("JSON values serialise");
    std::fs::write(path, text + "\n").map_err(|e| DatasetError::io(path, e))
}

fn write_lines(path: &Path, lines: impl Iterator<Item = Json>) -> Result<()> {
    let text: String = lines.map(|l| l.to_string() + "\n").collect();
    std::fs::write(path, text).map_err(|e| DatasetError::io(path, e))
}

/// min, max, mean, std and count of each dimension of a vector feature, LeRobot's stats form.
fn vector_stats(ranges: &[(usize, usize)], episodes: &[usize], dim: usize, sign: f32) -> Json {
    let values: Vec<Vec<f64>> = (0..dim)
        .map(|d| {
            episodes
                .iter()
                .flat_map(|&e| ranges[e].0..ranges[e].1)
                .map(|i| f64::from(sign * synthetic_state(i, d)))
                .collect()
        })
        .collect();
    let count = values.first().map_or(0, Vec::len);
    let per_dim = |f: &dyn Fn(&[f64]) -> f64| values.iter().map(|v| f(v)).collect::<Vec<_>>();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    json!({
        "min": per_dim(&|v| v.iter().copied().fold(f64::INFINITY, f64::min)),
        "max": per_dim(&|v| v.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        "mean": per_dim(&mean),
        "std": per_dim(&|v| { let m = mean(v); (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt() }),
        "count": [count],
    })
}

fn write_metadata(
    root: &Path,
    spec: &TabularSpec,
    ranges: &[(usize, usize)],
    groups: &[Vec<usize>],
) -> Result<()> {
    let scalar = |dtype: &str| json!({"dtype": dtype, "shape": [1], "names": null});
    let motors = |n: usize| (0..n).map(|d| format!("motor_{d}")).collect::<Vec<_>>();
    let mut features = json!({
        "observation.state": {"dtype": "float32", "shape": [spec.state_dim], "names": motors(spec.state_dim)},
        "action": {"dtype": "float32", "shape": [spec.action_dim], "names": motors(spec.action_dim)},
        "timestamp": scalar("float32"),
        "frame_index": scalar("int64"),
        "episode_index": scalar("int64"),
        "index": scalar("int64"),
        "task_index": scalar("int64"),
    });
    if let Some((height, width)) = spec.image_size {
        features[IMAGE_KEY] = json!({"dtype": "image", "shape": [height, width, 3], "names": ["height", "width", "channel"]});
    }
    let episodes = ranges.len();
    let total_frames = ranges.last().map_or(0, |r| r.1);
    let all: Vec<usize> = (0..episodes).collect();
    let mut info = json!({
        "codebase_version": spec.version.to_string(),
        "robot_type": spec.robot_type,
        "total_episodes": episodes,
        "total_frames": total_frames,
        "total_tasks": spec.tasks.len(),
        "chunks_size": 1000,
        "fps": spec.fps,
        "splits": {"train": format!("0:{episodes}")},
        "video_path": null,
        "features": features,
    });
    let info_map = info.as_object_mut().expect("object");
    let stats = |episodes: &[usize]| {
        json!({
            "observation.state": vector_stats(ranges, episodes, spec.state_dim, 1.0),
            "action": vector_stats(ranges, episodes, spec.action_dim, -1.0),
        })
    };
    if spec.version == CodebaseVersion::V21 {
        info_map.insert("total_videos".into(), json!(0));
        info_map.insert("total_chunks".into(), json!(1));
        info_map.insert(
            "data_path".into(),
            json!("data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"),
        );
        write_json(&root.join("meta/info.json"), &info)?;
        let meta = root.join("meta");
        write_lines(
            &meta.join("episodes.jsonl"),
            ranges.iter().enumerate().map(|(e, (from, to))| {
                json!({"episode_index": e, "tasks": [spec.tasks[e % spec.tasks.len()]], "length": to - from})
            }),
        )?;
        write_lines(
            &meta.join("tasks.jsonl"),
            spec.tasks.iter().enumerate().map(|(i, task)| json!({"task_index": i, "task": task})),
        )?;
        return write_lines(
            &meta.join("episodes_stats.jsonl"),
            (0..episodes)
                .map(|e| json!({"episode_index": e, "stats": stats(std::slice::from_ref(&e))})),
        );
    }
    info_map.insert("data_files_size_in_mb".into(), json!(100));
    info_map.insert("video_files_size_in_mb".into(), json!(200));
    info_map.insert(
        "data_path".into(),
        json!("data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"),
    );
    write_json(&root.join("meta/info.json"), &info)?;
    write_json(&root.join("meta/stats.json"), &stats(&all[..]))?;
    write_v3_episodes(root, spec, ranges, groups)?;
    let tasks = RecordBatch::try_from_iter([
        (
            "task_index",
            Arc::new(Int64Array::from_iter_values(0..spec.tasks.len() as i64)) as ArrayRef,
        ),
        ("__index_level_0__", Arc::new(StringArray::from(spec.tasks.clone())) as ArrayRef),
    ])
    .expect("columns of equal length");
    write_parquet(&root.join("meta/tasks.parquet"), &tasks, usize::MAX)
}

/// `meta/episodes/chunk-000/file-000.parquet`, its columns in LeRobot's order (stats last).
fn write_v3_episodes(
    root: &Path,
    spec: &TabularSpec,
    ranges: &[(usize, usize)],
    groups: &[Vec<usize>],
) -> Result<()> {
    let mut file_of = vec![0i64; ranges.len()];
    for (file, episodes) in groups.iter().enumerate() {
        episodes.iter().for_each(|&e| file_of[e] = file as i64);
    }
    let n = ranges.len() as i64;
    let ints = |values: Vec<i64>| Arc::new(Int64Array::from(values)) as ArrayRef;
    let task_lists = {
        let strings: Vec<&str> =
            (0..ranges.len()).map(|e| spec.tasks[e % spec.tasks.len()].as_str()).collect();
        let item = Arc::new(Field::new_list_field(DataType::Utf8, true));
        Arc::new(ListArray::new(
            item,
            OffsetBuffer::from_lengths(std::iter::repeat_n(1, ranges.len())),
            Arc::new(StringArray::from(strings)),
            None,
        )) as ArrayRef
    };
    let means: Vec<f32> =
        ranges.iter().flat_map(|_| std::iter::repeat_n(0.0, spec.action_dim)).collect();
    let batch = RecordBatch::try_from_iter([
        ("episode_index", ints((0..n).collect())),
        ("data/chunk_index", ints(vec![0; ranges.len()])),
        ("data/file_index", ints(file_of)),
        ("dataset_from_index", ints(ranges.iter().map(|r| r.0 as i64).collect())),
        ("dataset_to_index", ints(ranges.iter().map(|r| r.1 as i64).collect())),
        ("tasks", task_lists),
        ("length", ints(ranges.iter().map(|r| (r.1 - r.0) as i64).collect())),
        ("meta/episodes/chunk_index", ints(vec![0; ranges.len()])),
        ("meta/episodes/file_index", ints(vec![0; ranges.len()])),
        ("stats/action/mean", vector_column(means, spec.action_dim, ListLayout::List)),
    ])
    .expect("columns of equal length");
    write_parquet(&root.join("meta/episodes/chunk-000/file-000.parquet"), &batch, usize::MAX)
}
