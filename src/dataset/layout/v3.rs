//! Layout v3.0: many episodes per data and video file, files numbered within chunk
//! directories; episodes (with their statistics) and tasks as parquet in `meta/`, aggregated
//! statistics in `meta/stats.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, ListArray, RecordBatch, StringArray};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Schema};
use serde_json::json;

use super::{stats_json, EpisodeTables};
use crate::dataset::columns::{
    f64_column, read_parquet, string_column, string_list_column, usize_column,
};
use crate::dataset::episodes::{
    parquet_files_under, Episode, EpisodeIndex, EpisodeVideo, TaskIndex,
};
use crate::dataset::error::{DatasetError, Result};
use crate::dataset::files::{write_json, write_parquet};
use crate::dataset::meta::{render_template, Info, TemplateValue};
use crate::dataset::stats::FeatureStats;

/// info.json's `data_path` as LeRobot writes it.
pub const DATA_PATH: &str = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet";
/// info.json's `video_path` as LeRobot writes it.
pub const VIDEO_PATH: &str = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4";
/// Where LeRobot starts a new data file, MB.
pub const DATA_FILE_MB: f64 = 100.0;
/// Where LeRobot starts a new video file, MB.
pub const VIDEO_FILE_MB: f64 = 200.0;
/// The directory of the episode tables (`chunk-*/file-*.parquet`).
pub const EPISODES_DIR: &str = "meta/episodes";
/// The one episode table feedbench writes.
pub const EPISODES_FILE: &str = "meta/episodes/chunk-000/file-000.parquet";
/// The task table.
pub const TASKS_FILE: &str = "meta/tasks.parquet";
/// Every feature's statistics over the whole dataset.
pub const STATS_FILE: &str = "meta/stats.json";

/// The fields of v3.0 path templates for file `file` of chunk `chunk`.
pub fn fields(
    chunk: usize,
    file: usize,
    video_key: &str,
) -> [(&'static str, TemplateValue<'_>); 3] {
    [
        ("chunk_index", TemplateValue::Int(chunk)),
        ("file_index", TemplateValue::Int(file)),
        ("video_key", TemplateValue::Str(video_key)),
    ]
}

/// The episode tables of a root whose store cannot list (a plain web server), found by the names
/// LeRobot gives them (`meta/episodes/chunk-CCC/file-FFF.parquet`, a new chunk every
/// `chunks_size` files): each asked for in turn until one is absent.
pub(crate) fn episode_files_by_name(root: &Path, info: &Info) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    loop {
        let n = files.len();
        let (chunk, file) = (n / info.chunks_size, n % info.chunks_size);
        let path = root.join(format!("{EPISODES_DIR}/chunk-{chunk:03}/file-{file:03}.parquet"));
        if !crate::dataset::files::is_present(&path)? {
            return Ok(files);
        }
        files.push(path);
    }
}

/// The episodes of the parquet files under `meta/episodes/`, with their data and video
/// files and where each camera's frames lie in them.
pub(super) fn load_episodes(root: &Path, info: &Info) -> Result<Vec<Episode>> {
    let info_path = &root.join("meta/info.json");
    let dir = root.join(EPISODES_DIR);
    let files = match parquet_files_under(&dir)? {
        Some(files) => files,
        None => episode_files_by_name(root, info)?,
    };
    if files.is_empty() {
        return Err(DatasetError::invalid(
            &dir,
            "expected episode metadata files chunk-*/file-*.parquet",
        ));
    }
    let cameras: Vec<&str> = info.video_keys().map(|f| f.name.as_str()).collect();
    let mut episodes = Vec::new();
    for path in files {
        let batch = read_parquet(&path, |name| !name.starts_with("stats/"))?;
        let index = usize_column(&batch, "episode_index", &path)?;
        let tasks = string_list_column(&batch, "tasks", &path)?;
        let length = usize_column(&batch, "length", &path)?;
        let data_chunk = usize_column(&batch, "data/chunk_index", &path)?;
        let data_file = usize_column(&batch, "data/file_index", &path)?;
        let from = usize_column(&batch, "dataset_from_index", &path)?;
        let to = usize_column(&batch, "dataset_to_index", &path)?;
        let mut camera_columns = Vec::new();
        for camera in &cameras {
            let col = |what: &str| format!("videos/{camera}/{what}");
            camera_columns.push((
                *camera,
                usize_column(&batch, &col("chunk_index"), &path)?,
                usize_column(&batch, &col("file_index"), &path)?,
                f64_column(&batch, &col("from_timestamp"), &path)?,
                f64_column(&batch, &col("to_timestamp"), &path)?,
            ));
        }
        for row in 0..batch.num_rows() {
            if to[row] < from[row] || to[row] - from[row] != length[row] {
                return Err(DatasetError::invalid(
                    &path,
                    format!(
                        "episode {}: dataset_from_index {} / dataset_to_index {} disagree with length {}",
                        index[row], from[row], to[row], length[row]
                    ),
                ));
            }
            let data_path = render_template(
                &info.data_path,
                &fields(data_chunk[row], data_file[row], ""),
                info_path,
            )?;
            let mut videos = BTreeMap::new();
            if let Some(template) = &info.video_path {
                for (camera, chunk, file, from_ts, to_ts) in &camera_columns {
                    let path = render_template(
                        template,
                        &fields(chunk[row], file[row], camera),
                        info_path,
                    )?;
                    videos.insert(
                        camera.to_string(),
                        EpisodeVideo {
                            path,
                            from_timestamp: from_ts[row],
                            to_timestamp: to_ts[row],
                        },
                    );
                }
            }
            episodes.push(Episode {
                index: EpisodeIndex(index[row]),
                tasks: tasks[row].clone(),
                length: length[row],
                from: from[row],
                to: to[row],
                data_path,
                videos,
            });
        }
    }
    Ok(episodes)
}

/// The task strings of `tasks.parquet` by task index.
pub(super) fn load_tasks(root: &Path) -> Result<BTreeMap<TaskIndex, String>> {
    let path = root.join(TASKS_FILE);
    let batch = read_parquet(&path, |_| true)?;
    let indices = usize_column(&batch, "task_index", &path)?;
    // pandas writes the task strings as the frame's index: `task`, or `__index_level_0__`.
    let text_column = ["task", "__index_level_0__"]
        .into_iter()
        .find(|name| batch.column_by_name(name).is_some())
        .ok_or_else(|| DatasetError::invalid(&path, "missing column `task` (the task strings)"))?;
    let tasks = string_column(&batch, text_column, &path)?;
    Ok(indices.into_iter().map(TaskIndex).zip(tasks).collect())
}

/// Writes `stats.json` (every feature's statistics aggregated over the episodes), the episode
/// table and `tasks.parquet`.
pub(super) fn write_tables(root: &Path, tables: &EpisodeTables<'_>) -> Result<()> {
    let stats = tables.stats;
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
    write_json(&root.join(STATS_FILE), &stats_json(&aggregated))?;
    write_parquet(&root.join(EPISODES_FILE), &episodes_batch(tables), usize::MAX)?;
    write_parquet(&root.join(TASKS_FILE), &tasks_batch(tables.tasks), usize::MAX)
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
fn episodes_batch(tables: &EpisodeTables<'_>) -> RecordBatch {
    let EpisodeTables { ranges, data_files: data_file_of, stats, .. } = tables;
    let n = ranges.len();
    let ints = |values: Vec<i64>| Arc::new(Int64Array::from(values)) as ArrayRef;
    let floats = |values: Vec<f64>| Arc::new(Float64Array::from(values)) as ArrayRef;
    let task_lists = {
        let strings: Vec<&str> = tables.episode_tasks.clone();
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
    for (key, clips) in &tables.cameras {
        let column = |what: &str| format!("videos/{key}/{what}");
        columns.push((column("chunk_index"), ints(clips.iter().map(|c| c.chunk as i64).collect())));
        columns.push((column("file_index"), ints(clips.iter().map(|c| c.file as i64).collect())));
        columns.push((
            column("from_timestamp"),
            floats(clips.iter().map(|c| c.from_timestamp).collect()),
        ));
        columns
            .push((column("to_timestamp"), floats(clips.iter().map(|c| c.to_timestamp).collect())));
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
    RecordBatch::try_from_iter(columns).expect("columns of equal length")
}
