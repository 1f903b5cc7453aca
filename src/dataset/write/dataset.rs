//! The one writer of a dataset's parquet frames and metadata, for v2.1 and v3.0 layouts: from
//! frame values held in memory and camera files already encoded, it writes the data files,
//! `meta/info.json` (through [`Info::to_json`]), episodes, tasks and statistics. Every path
//! comes from the `data_path` / `video_path` templates of the [`Info`] it is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, FixedSizeListArray, Float32Array, Int64Array, LargeListArray, ListArray,
    RecordBatch, StringArray, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field};

use super::ListLayout;
use crate::dataset::files::{write_json, write_parquet};
use crate::dataset::layout::write_tables;
use crate::dataset::layout::{file_facts, file_path, file_per_episode, file_position};
use crate::dataset::layout::{EpisodeTables, CHUNKS_SIZE};
use crate::dataset::meta::{
    CodebaseVersion, Feature, FeatureKind, ImageShape, Info, ScalarType, VideoInfo,
};
use crate::dataset::stats::FeatureStats;

use crate::dataset::error::{DatasetError, Result};
pub use crate::dataset::layout::CameraClip;

/// The shape of a dataset to write: version, rate, episodes, tasks and data file layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// v2.1 (a file per episode) or v3.0 (many episodes per file).
    pub version: CodebaseVersion,
    /// Frames per second.
    pub fps: u32,
    /// `robot_type` in info.json.
    pub robot_type: String,
    /// Task strings.
    pub tasks: Vec<String>,
    /// The task (a position in `tasks`) of each episode, episode 0 first.
    pub episode_tasks: Vec<usize>,
    /// Frames of each episode, episode 0 first.
    pub episode_lengths: Vec<usize>,
    /// v3.0: the episodes of each data file, consecutive, in order.
    pub data_files: Vec<Vec<usize>>,
    /// Rows per parquet row group (need not align with episodes).
    pub row_group_rows: usize,
    /// Storage of the vector columns.
    pub list_layout: ListLayout,
}

impl Layout {
    /// Checks the version and that there are tasks and episodes; `out` names the dataset.
    pub fn check(&self, out: &Path) -> Result<()> {
        if !matches!(self.version, CodebaseVersion::V21 | CodebaseVersion::V30) {
            return Err(DatasetError::invalid(
                out,
                format!("cannot write {} datasets (v2.1 or v3.0)", self.version),
            ));
        }
        if self.tasks.is_empty() || self.episode_lengths.is_empty() {
            return Err(DatasetError::invalid(out, "expected at least one task and one episode"));
        }
        if self.episode_tasks.len() != self.episode_lengths.len()
            || self.episode_tasks.iter().any(|&t| t >= self.tasks.len())
        {
            return Err(DatasetError::invalid(
                out,
                format!(
                    "expected a task of the {} tasks for each of the {} episodes",
                    self.tasks.len(),
                    self.episode_lengths.len()
                ),
            ));
        }
        if self.episode_lengths.contains(&0) {
            return Err(DatasetError::invalid(out, "every episode needs at least one frame"));
        }
        let in_files: Vec<usize> = self.data_files.iter().flatten().copied().collect();
        if !file_per_episode(self.version)
            && in_files != (0..self.episode_lengths.len()).collect::<Vec<_>>()
        {
            return Err(DatasetError::invalid(
                out,
                "v3.0 data files must hold every episode once, in order",
            ));
        }
        Ok(())
    }

    /// The global index range of each episode: `[from, to)`.
    pub fn ranges(&self) -> Vec<(usize, usize)> {
        let mut from = 0;
        self.episode_lengths
            .iter()
            .map(|&length| {
                from += length;
                (from - length, from)
            })
            .collect()
    }

    /// Frames in the dataset.
    pub fn total_frames(&self) -> usize {
        self.episode_lengths.iter().sum()
    }

    /// The task index of episode `episode`.
    pub fn task_of(&self, episode: usize) -> usize {
        self.episode_tasks[episode]
    }
}

/// Episode `e` of `episodes` does task `e % tasks`: the generated datasets' tasks.
pub fn round_robin_tasks(episodes: usize, tasks: usize) -> Vec<usize> {
    (0..episodes).map(|e| e % tasks.max(1)).collect()
}

/// Consecutive groups of at most `per_file` of `episodes` episodes.
pub fn groups_of(episodes: usize, per_file: usize) -> Vec<Vec<usize>> {
    let all: Vec<usize> = (0..episodes).collect();
    all.chunks(per_file.max(1)).map(<[usize]>::to_vec).collect()
}

/// LeRobot's size of a data file, bytes.
const DATA_FILE_BYTES: usize = 100 * 1024 * 1024;

/// v3.0 data files: `episodes_per_file` episodes each, or else as many as fit in LeRobot's
/// 100 MB at `row_bytes` per frame.
pub fn data_file_groups(
    lengths: &[usize],
    episodes_per_file: Option<usize>,
    row_bytes: usize,
) -> Vec<Vec<usize>> {
    if let Some(n) = episodes_per_file {
        return groups_of(lengths.len(), n);
    }
    let limit = DATA_FILE_BYTES / row_bytes.max(1);
    let mut groups: Vec<Vec<usize>> = vec![vec![]];
    let mut rows = 0;
    for (e, &length) in lengths.iter().enumerate() {
        if rows + length > limit && !groups.last().expect("one group").is_empty() {
            groups.push(vec![]);
            rows = 0;
        }
        groups.last_mut().expect("one group").push(e);
        rows += length;
    }
    groups
}

/// A numeric vector feature to write: its description and every frame's values.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorFeature {
    /// The key (`observation.state`, `action`).
    pub key: String,
    /// Component names.
    pub names: Vec<String>,
    /// `names.len()` float32 values per frame, every frame in global index order.
    pub values: Vec<f32>,
}

/// An image feature stored in parquet (PNG files), with its per-episode statistics.
pub struct ImageFeature<'a> {
    /// The key.
    pub key: String,
    /// Frame size.
    pub height: u32,
    /// Frame size.
    pub width: u32,
    /// The PNG file of global index `i` (encoded when the data file holding it is written).
    pub png: &'a dyn Fn(usize) -> Result<Vec<u8>>,
    /// Statistics of each episode's images.
    pub stats: Vec<FeatureStats>,
}

/// A camera whose mp4 files have been written.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraFeature {
    /// The key (`observation.images.top`).
    pub key: String,
    /// Frame size.
    pub height: u32,
    /// Frame size.
    pub width: u32,
    /// The feature's `info` block.
    pub info: VideoInfo,
    /// Per episode, where its frames are.
    pub clips: Vec<CameraClip>,
    /// Per episode, statistics of its frames.
    pub stats: Vec<FeatureStats>,
}

/// Everything a dataset holds besides its layout.
pub struct Contents<'a> {
    /// `observation.state`, `action`…
    pub vectors: Vec<VectorFeature>,
    /// Image features in parquet.
    pub images: Vec<ImageFeature<'a>>,
    /// Cameras (video features).
    pub cameras: Vec<CameraFeature>,
    /// Every frame's `timestamp`, in global index order; None: `frame_index / fps`.
    pub timestamps: Option<Vec<f32>>,
}

fn scalar(name: &str, dtype: ScalarType) -> Feature {
    Feature {
        name: name.into(),
        kind: FeatureKind::Value(dtype),
        shape: vec![1],
        names: None,
        image: None,
        video: None,
    }
}

fn picture(
    name: &str,
    kind: FeatureKind,
    height: u32,
    width: u32,
    video: Option<VideoInfo>,
) -> Feature {
    Feature {
        name: name.into(),
        kind,
        shape: vec![height as usize, width as usize, 3],
        names: Some(vec!["height".into(), "width".into(), "channel".into()]),
        image: Some(ImageShape { height, width, channels: 3 }),
        video,
    }
}

/// The info.json of a dataset: its features (vectors, image, cameras, then the bookkeeping
/// columns, as LeRobot orders them) and LeRobot's default path templates for the version.
/// `images` are `(key, height, width)`, `cameras` `(key, height, width, info block)`.
pub fn dataset_info(
    layout: &Layout,
    vectors: &[(String, Vec<String>)],
    images: &[(String, u32, u32)],
    cameras: &[(String, u32, u32, VideoInfo)],
) -> Info {
    let mut features: Vec<Feature> = vectors
        .iter()
        .map(|(key, names)| Feature {
            name: key.clone(),
            kind: FeatureKind::Value(ScalarType::Float32),
            shape: vec![names.len()],
            names: Some(names.clone()),
            image: None,
            video: None,
        })
        .collect();
    for (key, height, width) in images {
        features.push(picture(key, FeatureKind::Image, *height, *width, None));
    }
    for (key, height, width, info) in cameras {
        features.push(picture(key, FeatureKind::Video, *height, *width, Some(info.clone())));
    }
    features.push(scalar("timestamp", ScalarType::Float32));
    for name in ["frame_index", "episode_index", "index", "task_index"] {
        features.push(scalar(name, ScalarType::Int64));
    }
    let episodes = layout.episode_lengths.len();
    let files = file_facts(layout.version, episodes, cameras.len());
    Info {
        codebase_version: layout.version,
        robot_type: Some(layout.robot_type.clone()),
        fps: f64::from(layout.fps),
        total_episodes: episodes,
        total_frames: layout.total_frames(),
        total_tasks: layout.tasks.len(),
        total_videos: files.total_videos,
        total_chunks: files.total_chunks,
        chunks_size: CHUNKS_SIZE,
        data_files_size_in_mb: files.data_files_size_in_mb,
        video_files_size_in_mb: files.video_files_size_in_mb,
        splits: BTreeMap::from([("train".to_string(), format!("0:{episodes}"))]),
        data_path: files.data_path.into(),
        video_path: (!cameras.is_empty()).then(|| files.video_path.into()),
        features,
    }
}

/// The data file of episode `episode` (v2.1) or of file `file` of chunk `chunk` (v3.0),
/// relative to the root, from info.json's `data_path`.
pub fn data_file(info: &Info, chunk: usize, file_or_episode: usize) -> Result<PathBuf> {
    file_path(info, &info.data_path, chunk, file_or_episode, "")
}

/// The mp4 file of camera `key` for episode `episode` (v2.1) or of file `file` of chunk
/// `chunk` (v3.0), relative to the root, from info.json's `video_path`.
pub fn video_file(info: &Info, key: &str, chunk: usize, file_or_episode: usize) -> Result<PathBuf> {
    let template = info
        .video_path
        .as_deref()
        .ok_or_else(|| DatasetError::invalid("meta/info.json", "no `video_path` template"))?;
    file_path(info, template, chunk, file_or_episode, key)
}

/// Writes the data files and the metadata of a dataset at `root` (whose camera files, if any,
/// are written already).
pub fn write_dataset(
    root: &Path,
    info: &Info,
    layout: &Layout,
    contents: &Contents<'_>,
) -> Result<()> {
    layout.check(root)?;
    let ranges = layout.ranges();
    let groups: Vec<Vec<usize>> = if file_per_episode(layout.version) {
        (0..ranges.len()).map(|e| vec![e]).collect()
    } else {
        layout.data_files.clone()
    };
    let mut data_file_of = vec![(0, 0); ranges.len()];
    for (n, episodes) in groups.iter().enumerate() {
        let (chunk, file) = file_position(layout.version, n, episodes[0]);
        episodes.iter().for_each(|&e| data_file_of[e] = (chunk, file));
        let path = root.join(data_file(info, chunk, file)?);
        let batch = frames_batch(info, layout, contents, &ranges, episodes)?;
        write_parquet(&path, &batch, layout.row_group_rows)?;
    }
    let stats: Vec<Vec<(String, FeatureStats)>> =
        (0..ranges.len()).map(|e| episode_stats(info, layout, contents, &ranges, e)).collect();
    write_json(&root.join("meta/info.json"), &info.to_json())?;
    let tables = EpisodeTables {
        ranges: &ranges,
        episode_tasks: (0..ranges.len())
            .map(|e| layout.tasks[layout.task_of(e)].as_str())
            .collect(),
        tasks: &layout.tasks,
        data_files: &data_file_of,
        cameras: contents.cameras.iter().map(|c| (c.key.as_str(), c.clips.as_slice())).collect(),
        stats: &stats,
    };
    write_tables(root, layout.version, &tables)
}

/// A float32 vector column of `width` values per row, stored as `layout` says.
pub fn vector_column(values: Vec<f32>, width: usize, layout: ListLayout) -> ArrayRef {
    let rows = values.len() / width.max(1);
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

/// The value of a bookkeeping column at global index `i` of episode `e` starting at `from`.
fn bookkeeping(
    name: &str,
    layout: &Layout,
    contents: &Contents<'_>,
    e: usize,
    from: usize,
    i: usize,
) -> f64 {
    match name {
        "timestamp" => f64::from(match &contents.timestamps {
            Some(timestamps) => timestamps[i],
            None => (i - from) as f32 / layout.fps as f32,
        }),
        "frame_index" => (i - from) as f64,
        "episode_index" => e as f64,
        "index" => i as f64,
        _ => layout.task_of(e) as f64,
    }
}

/// The rows of `episodes` as one record batch, columns in info.json's feature order.
fn frames_batch(
    info: &Info,
    layout: &Layout,
    contents: &Contents<'_>,
    ranges: &[(usize, usize)],
    episodes: &[usize],
) -> Result<RecordBatch> {
    let rows = || episodes.iter().flat_map(|&e| (ranges[e].0..ranges[e].1).map(move |i| (e, i)));
    let mut columns: Vec<(&str, ArrayRef)> = Vec::new();
    for feature in &info.features {
        let name = feature.name.as_str();
        let column: ArrayRef = match feature.kind {
            FeatureKind::Video => continue,
            FeatureKind::Image => {
                let image = contents.images.iter().find(|i| i.key == name).ok_or_else(|| {
                    DatasetError::invalid(Path::new(name), "an image feature without images")
                })?;
                image_column(rows().map(|(_, i)| (image.png)(i)).collect::<Result<_>>()?)
            }
            _ if feature.is_bookkeeping() => {
                let values =
                    rows().map(|(e, i)| bookkeeping(name, layout, contents, e, ranges[e].0, i));
                if name == "timestamp" {
                    Arc::new(Float32Array::from_iter_values(values.map(|v| v as f32)))
                } else {
                    Arc::new(Int64Array::from_iter_values(values.map(|v| v as i64)))
                }
            }
            _ => {
                let vector = contents.vectors.iter().find(|v| v.key == name).ok_or_else(|| {
                    DatasetError::invalid(Path::new(name), "a feature without values to write")
                })?;
                let width = vector.names.len();
                let values = rows()
                    .flat_map(|(_, i)| vector.values[i * width..(i + 1) * width].iter().copied());
                vector_column(values.collect(), width, layout.list_layout)
            }
        };
        columns.push((name, column));
    }
    Ok(RecordBatch::try_from_iter(columns).expect("columns of equal length"))
}

/// Statistics of every feature of episode `e`, in info.json's feature order.
fn episode_stats(
    info: &Info,
    layout: &Layout,
    contents: &Contents<'_>,
    ranges: &[(usize, usize)],
    e: usize,
) -> Vec<(String, FeatureStats)> {
    let (from, to) = ranges[e];
    info.features
        .iter()
        .filter_map(|feature| {
            let name = feature.name.as_str();
            let stats = match feature.kind {
                FeatureKind::Video => {
                    contents.cameras.iter().find(|c| c.key == name)?.stats[e].clone()
                }
                FeatureKind::Image => {
                    contents.images.iter().find(|i| i.key == name)?.stats[e].clone()
                }
                _ if feature.is_bookkeeping() => {
                    let rows: Vec<[f64; 1]> = (from..to)
                        .map(|i| [bookkeeping(name, layout, contents, e, from, i)])
                        .collect();
                    FeatureStats::of_rows(rows.iter().map(|r| &r[..]), 1)
                }
                _ => {
                    let vector = contents.vectors.iter().find(|v| v.key == name)?;
                    let width = vector.names.len();
                    FeatureStats::of_values(&vector.values[from * width..to * width], width)
                }
            };
            Some((name.to_string(), stats))
        })
        .collect()
}
