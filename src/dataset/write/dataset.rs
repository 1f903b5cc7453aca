//! The one writer of a dataset's parquet frames and metadata, for v2.1 and v3.0 layouts: from
//! frame values held in memory and camera files already encoded, it writes the data files,
//! `meta/info.json` (through [`Info::to_json`]), episodes, tasks and statistics. Every path
//! comes from the `data_path` / `video_path` templates of the [`Info`] it is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, FixedSizeListArray, Float32Array, Float64Array, Int64Array,
    LargeListArray, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::{json, Value as Json};

use super::stats::FeatureStats;
use super::{write_parquet, ListLayout};
use crate::dataset::meta::{
    render_template, CodebaseVersion, Feature, FeatureKind, ImageShape, Info, ScalarType,
    TemplateValue, VideoInfo,
};
use crate::dataset::{DatasetError, Result};

/// Files per chunk directory (LeRobot's `chunks_size`).
pub const CHUNKS_SIZE: usize = 1000;

/// The shape of a dataset to write: version, rate, episodes, tasks and data file layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// v2.1 (a file per episode) or v3.0 (many episodes per file).
    pub version: CodebaseVersion,
    /// Frames per second.
    pub fps: u32,
    /// `robot_type` in info.json.
    pub robot_type: String,
    /// Task strings; episode `e` does task `e % tasks.len()`.
    pub tasks: Vec<String>,
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
        if self.episode_lengths.contains(&0) {
            return Err(DatasetError::invalid(out, "every episode needs at least one frame"));
        }
        let in_files: Vec<usize> = self.data_files.iter().flatten().copied().collect();
        if !self.version.is_v2() && in_files != (0..self.episode_lengths.len()).collect::<Vec<_>>()
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
        episode % self.tasks.len()
    }
}

/// Consecutive groups of at most `per_file` of `episodes` episodes.
pub fn groups_of(episodes: usize, per_file: usize) -> Vec<Vec<usize>> {
    let all: Vec<usize> = (0..episodes).collect();
    all.chunks(per_file.max(1)).map(<[usize]>::to_vec).collect()
}

/// `(chunk_index, file_index)` of the `n`-th file of a v3.0 kind of file (LeRobot moves to the
/// next chunk directory after `chunks_size` files).
pub fn chunk_and_file(n: usize) -> (usize, usize) {
    (n / CHUNKS_SIZE, n % CHUNKS_SIZE)
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
    /// The PNG file of global index `i`.
    pub png: &'a dyn Fn(usize) -> Vec<u8>,
    /// Statistics of each episode's images.
    pub stats: Vec<FeatureStats>,
}

/// Where an episode's frames of one camera lie: a file and a time span in it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CameraClip {
    /// v3.0 `videos/<key>/chunk_index` (v2.1: the episode's chunk).
    pub chunk: usize,
    /// v3.0 `videos/<key>/file_index` (v2.1: the episode).
    pub file: usize,
    /// Where the episode starts in the file, seconds.
    pub from_timestamp: f64,
    /// Where it ends, seconds.
    pub to_timestamp: f64,
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
    /// An image feature in parquet.
    pub image: Option<ImageFeature<'a>>,
    /// Cameras (video features).
    pub cameras: Vec<CameraFeature>,
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
/// `cameras` are `(key, height, width, info block)`.
pub fn dataset_info(
    layout: &Layout,
    vectors: &[(String, Vec<String>)],
    image: Option<(&str, u32, u32)>,
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
    if let Some((key, height, width)) = image {
        features.push(picture(key, FeatureKind::Image, height, width, None));
    }
    for (key, height, width, info) in cameras {
        features.push(picture(key, FeatureKind::Video, *height, *width, Some(info.clone())));
    }
    features.push(scalar("timestamp", ScalarType::Float32));
    for name in ["frame_index", "episode_index", "index", "task_index"] {
        features.push(scalar(name, ScalarType::Int64));
    }
    let episodes = layout.episode_lengths.len();
    let v2 = layout.version.is_v2();
    let (data_path, video_path) = if v2 {
        (
            "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
            "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
        )
    } else {
        (
            "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        )
    };
    Info {
        codebase_version: layout.version,
        robot_type: Some(layout.robot_type.clone()),
        fps: f64::from(layout.fps),
        total_episodes: episodes,
        total_frames: layout.total_frames(),
        total_tasks: layout.tasks.len(),
        total_videos: v2.then_some(episodes * cameras.len()),
        total_chunks: v2.then_some(episodes.div_ceil(CHUNKS_SIZE)),
        chunks_size: CHUNKS_SIZE,
        data_files_size_in_mb: (!v2).then_some(100.0),
        video_files_size_in_mb: (!v2).then_some(200.0),
        splits: BTreeMap::from([("train".to_string(), format!("0:{episodes}"))]),
        data_path: data_path.into(),
        video_path: (!cameras.is_empty()).then(|| video_path.into()),
        features,
    }
}

/// The fields of info.json's path templates for a file: v2.1 names an episode (`n`) of chunk
/// `chunk`, v3.0 file `n` of chunk `chunk`.
fn fields(
    version: CodebaseVersion,
    chunk: usize,
    n: usize,
    key: &str,
) -> [(&'static str, TemplateValue<'_>); 5] {
    let (chunk_index, file_index, episode_index) =
        if version.is_v2() { (0, 0, n) } else { (chunk, n, 0) };
    [
        ("episode_chunk", TemplateValue::Int(chunk)),
        ("episode_index", TemplateValue::Int(episode_index)),
        ("chunk_index", TemplateValue::Int(chunk_index)),
        ("file_index", TemplateValue::Int(file_index)),
        ("video_key", TemplateValue::Str(key)),
    ]
}

/// The data file of episode `episode` (v2.1) or of file `file` of chunk `chunk` (v3.0),
/// relative to the root, from info.json's `data_path`.
pub fn data_file(info: &Info, chunk: usize, file_or_episode: usize) -> Result<PathBuf> {
    let info_path = Path::new("meta/info.json");
    render_template(
        &info.data_path,
        &fields(info.codebase_version, chunk, file_or_episode, ""),
        info_path,
    )
}

/// The mp4 file of camera `key` for episode `episode` (v2.1) or of file `file` of chunk
/// `chunk` (v3.0), relative to the root, from info.json's `video_path`.
pub fn video_file(info: &Info, key: &str, chunk: usize, file_or_episode: usize) -> Result<PathBuf> {
    let info_path = Path::new("meta/info.json");
    let template = info
        .video_path
        .as_deref()
        .ok_or_else(|| DatasetError::invalid(info_path, "no `video_path` template"))?;
    render_template(
        template,
        &fields(info.codebase_version, chunk, file_or_episode, key),
        info_path,
    )
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
    let groups: Vec<Vec<usize>> = if layout.version.is_v2() {
        (0..ranges.len()).map(|e| vec![e]).collect()
    } else {
        layout.data_files.clone()
    };
    let mut data_file_of = vec![(0, 0); ranges.len()];
    for (n, episodes) in groups.iter().enumerate() {
        let (chunk, file) = if layout.version.is_v2() {
            (episodes[0] / CHUNKS_SIZE, episodes[0])
        } else {
            chunk_and_file(n)
        };
        episodes.iter().for_each(|&e| data_file_of[e] = (chunk, file));
        let path = root.join(data_file(info, chunk, file)?);
        let batch = frames_batch(info, layout, contents, &ranges, episodes)?;
        write_parquet(&path, &batch, layout.row_group_rows)?;
    }
    let stats: Vec<Vec<(String, FeatureStats)>> =
        (0..ranges.len()).map(|e| episode_stats(info, layout, contents, &ranges, e)).collect();
    let meta = root.join("meta");
    write_json(&meta.join("info.json"), &info.to_json())?;
    let stats_json = |stats: &[(String, FeatureStats)]| -> Json {
        Json::Object(stats.iter().map(|(key, s)| (key.clone(), s.to_json())).collect())
    };
    if layout.version.is_v2() {
        write_lines(
            &meta.join("episodes.jsonl"),
            ranges.iter().enumerate().map(|(e, (from, to))| {
                json!({"episode_index": e, "tasks": [layout.tasks[layout.task_of(e)]], "length": to - from})
            }),
        )?;
        write_lines(
            &meta.join("tasks.jsonl"),
            layout.tasks.iter().enumerate().map(|(i, task)| json!({"task_index": i, "task": task})),
        )?;
        return write_lines(
            &meta.join("episodes_stats.jsonl"),
            stats
                .iter()
                .enumerate()
                .map(|(e, s)| json!({"episode_index": e, "stats": stats_json(s)})),
        );
    }
    let keys: Vec<String> =
        stats.first().map(|s| s.iter().map(|(k, _)| k.clone()).collect()).unwrap_or_default();
    let aggregated: Vec<(String, FeatureStats)> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let parts: Vec<FeatureStats> = stats.iter().map(|s| s[i].1.clone()).collect();
            (key.clone(), FeatureStats::aggregate(&parts))
        })
        .collect();
    write_json(&meta.join("stats.json"), &stats_json(&aggregated))?;
    write_v3_episodes(root, layout, contents, &ranges, &data_file_of, &stats)?;
    write_parquet(&meta.join("tasks.parquet"), &tasks_batch(&layout.tasks), usize::MAX)
}

/// `meta/tasks.parquet` as pandas writes LeRobot's task table: a `task_index` column and the
/// task strings as the frame's (unnamed) index, `__index_level_0__`, marked as the index in
/// the `pandas` metadata so that `pd.read_parquet` gives the tasks as the index again.
fn tasks_batch(tasks: &[String]) -> RecordBatch {
    let pandas = json!({
        "index_columns": ["__index_level_0__"],
        "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode",
            "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
                "numpy_type": "int64", "metadata": null},
            {"name": null, "field_name": "__index_level_0__", "pandas_type": "unicode",
                "numpy_type": "object", "metadata": null},
        ],
        "creator": {"library": "feedbench", "version": env!("CARGO_PKG_VERSION")},
        "pandas_version": "2.2.3",
    });
    let schema = Schema::new(vec![
        Field::new("task_index", DataType::Int64, true),
        Field::new("__index_level_0__", DataType::Utf8, true),
    ])
    .with_metadata(std::collections::HashMap::from([("pandas".to_string(), pandas.to_string())]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(0..tasks.len() as i64)),
        Arc::new(StringArray::from(tasks.to_vec())),
    ];
    RecordBatch::try_new(Arc::new(schema), columns).expect("columns match the schema")
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
fn bookkeeping(name: &str, layout: &Layout, e: usize, from: usize, i: usize) -> f64 {
    match name {
        "timestamp" => f64::from((i - from) as f32 / layout.fps as f32),
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
                let image = contents.image.as_ref().expect("the image feature has its images");
                image_column(rows().map(|(_, i)| (image.png)(i)).collect())
            }
            _ if feature.is_bookkeeping() => {
                let values = rows().map(|(e, i)| bookkeeping(name, layout, e, ranges[e].0, i));
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
                FeatureKind::Image => contents.image.as_ref()?.stats[e].clone(),
                _ if feature.is_bookkeeping() => {
                    let rows: Vec<[f64; 1]> =
                        (from..to).map(|i| [bookkeeping(name, layout, e, from, i)]).collect();
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

/// A list column of `width` float64 values per row.
fn f64_lists(values: Vec<f64>, width: usize) -> ArrayRef {
    let rows = values.len() / width.max(1);
    let item = Arc::new(Field::new_list_field(DataType::Float64, true));
    Arc::new(ListArray::new(
        item,
        OffsetBuffer::from_lengths(std::iter::repeat_n(width, rows)),
        Arc::new(Float64Array::from(values)),
        None,
    ))
}

/// A column of per-channel image statistics: each row `[[[v]], [[v]], [[v]]]`.
fn channel_lists(values: Vec<f64>, channels: usize) -> ArrayRef {
    let n = values.len();
    let innermost = f64_lists(values, 1);
    let middle_field = Arc::new(Field::new_list_field(innermost.data_type().clone(), true));
    let middle: ArrayRef = Arc::new(ListArray::new(
        middle_field,
        OffsetBuffer::from_lengths(std::iter::repeat_n(1, n)),
        innermost,
        None,
    ));
    let outer_field = Arc::new(Field::new_list_field(middle.data_type().clone(), true));
    Arc::new(ListArray::new(
        outer_field,
        OffsetBuffer::from_lengths(std::iter::repeat_n(channels, n / channels.max(1))),
        middle,
        None,
    ))
}

/// `meta/episodes/chunk-000/file-000.parquet`, its columns in LeRobot's order, with every
/// feature's `stats/<key>/<stat>` columns.
fn write_v3_episodes(
    root: &Path,
    layout: &Layout,
    contents: &Contents<'_>,
    ranges: &[(usize, usize)],
    data_file_of: &[(usize, usize)],
    stats: &[Vec<(String, FeatureStats)>],
) -> Result<()> {
    let n = ranges.len();
    let ints = |values: Vec<i64>| Arc::new(Int64Array::from(values)) as ArrayRef;
    let floats = |values: Vec<f64>| Arc::new(Float64Array::from(values)) as ArrayRef;
    let task_lists = {
        let strings: Vec<&str> = (0..n).map(|e| layout.tasks[layout.task_of(e)].as_str()).collect();
        let item = Arc::new(Field::new_list_field(DataType::Utf8, true));
        Arc::new(ListArray::new(
            item,
            OffsetBuffer::from_lengths(std::iter::repeat_n(1, n)),
            Arc::new(StringArray::from(strings)),
            None,
        )) as ArrayRef
    };
    let mut columns: Vec<(String, ArrayRef)> = vec![
        ("episode_index".into(), ints((0..n as i64).collect())),
        ("tasks".into(), task_lists),
        ("length".into(), ints(ranges.iter().map(|r| (r.1 - r.0) as i64).collect())),
        ("data/chunk_index".into(), ints(data_file_of.iter().map(|f| f.0 as i64).collect())),
        ("data/file_index".into(), ints(data_file_of.iter().map(|f| f.1 as i64).collect())),
        ("dataset_from_index".into(), ints(ranges.iter().map(|r| r.0 as i64).collect())),
        ("dataset_to_index".into(), ints(ranges.iter().map(|r| r.1 as i64).collect())),
    ];
    for camera in &contents.cameras {
        let column = |what: &str| format!("videos/{}/{what}", camera.key);
        columns.push((
            column("chunk_index"),
            ints(camera.clips.iter().map(|c| c.chunk as i64).collect()),
        ));
        columns.push((
            column("file_index"),
            ints(camera.clips.iter().map(|c| c.file as i64).collect()),
        ));
        columns.push((
            column("from_timestamp"),
            floats(camera.clips.iter().map(|c| c.from_timestamp).collect()),
        ));
        columns.push((
            column("to_timestamp"),
            floats(camera.clips.iter().map(|c| c.to_timestamp).collect()),
        ));
    }
    if let Some(first) = stats.first() {
        for (i, (key, example)) in first.iter().enumerate() {
            let width = example.mean.len();
            let per_episode = |pick: &dyn Fn(&FeatureStats) -> &[f64]| -> ArrayRef {
                let values: Vec<f64> = stats.iter().flat_map(|s| pick(&s[i].1).to_vec()).collect();
                if example.per_channel {
                    channel_lists(values, width)
                } else {
                    f64_lists(values, width)
                }
            };
            columns.push((format!("stats/{key}/min"), per_episode(&|s| &s.min)));
            columns.push((format!("stats/{key}/max"), per_episode(&|s| &s.max)));
            columns.push((format!("stats/{key}/mean"), per_episode(&|s| &s.mean)));
            columns.push((format!("stats/{key}/std"), per_episode(&|s| &s.std)));
            let counts = Int64Array::from_iter_values(stats.iter().map(|s| s[i].1.count as i64));
            let item = Arc::new(Field::new_list_field(DataType::Int64, true));
            let counts = ListArray::new(
                item,
                OffsetBuffer::from_lengths(std::iter::repeat_n(1, n)),
                Arc::new(counts),
                None,
            );
            columns.push((format!("stats/{key}/count"), Arc::new(counts)));
        }
    }
    columns.push(("meta/episodes/chunk_index".into(), ints(vec![0; n])));
    columns.push(("meta/episodes/file_index".into(), ints(vec![0; n])));
    let batch = RecordBatch::try_from_iter(columns).expect("columns of equal length");
    write_parquet(&root.join("meta/episodes/chunk-000/file-000.parquet"), &batch, usize::MAX)
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
