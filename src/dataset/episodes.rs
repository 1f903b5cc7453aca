//! Episodes and tasks: `episodes.jsonl` / `tasks.jsonl` (v2) or `meta/episodes/*.parquet` /
//! `meta/tasks.parquet` (v3.0), resolved into global index ranges and file paths.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::columns::{f64_column, read_parquet, string_column, string_list_column, usize_column};
use super::meta::{render_template, Info, TemplateValue};
use super::{DatasetError, Result};

/// An episode's `episode_index`: never to be confused with a frame index.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct EpisodeIndex(pub usize);

impl fmt::Display for EpisodeIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A task's `task_index`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskIndex(pub usize);

/// Where an episode's frames of one camera are: a file and the time the episode starts in it.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodeVideo {
    /// The mp4 file, relative to the dataset root.
    pub path: PathBuf,
    /// Where the episode starts in the file, seconds (0 in v2, where each episode has a file).
    pub from_timestamp: f64,
    /// Where the episode ends in the file, seconds.
    pub to_timestamp: f64,
}

/// One episode of the dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// Its `episode_index`.
    pub index: EpisodeIndex,
    /// Its task strings.
    pub tasks: Vec<String>,
    /// Frames in the episode.
    pub length: usize,
    /// First global `index` of the episode.
    pub from: usize,
    /// One past its last global `index`.
    pub to: usize,
    /// The parquet file holding its frames, relative to the root.
    pub data_path: PathBuf,
    /// Per video key, where its frames are.
    pub videos: BTreeMap<String, EpisodeVideo>,
}

impl Episode {
    /// True when global `index` belongs to this episode.
    pub fn contains(&self, index: usize) -> bool {
        (self.from..self.to).contains(&index)
    }
}

#[derive(Deserialize)]
struct EpisodeLine {
    episode_index: usize,
    #[serde(default)]
    tasks: Vec<String>,
    length: usize,
}

#[derive(Deserialize)]
struct TaskLine {
    task_index: usize,
    task: String,
}

fn read_jsonl<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).map_err(|e| DatasetError::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|source| DatasetError::Json {
                path: path.to_path_buf(),
                line: Some(n + 1),
                source,
            })
        })
        .collect()
}

/// Reads the episodes of a dataset, sorted by episode index, with global index ranges and paths.
pub fn load_episodes(root: &Path, info: &Info) -> Result<Vec<Episode>> {
    let info_path = root.join("meta/info.json");
    let mut episodes = if info.codebase_version.is_v2() {
        load_v2(root, info, &info_path)?
    } else {
        load_v3(root, info, &info_path)?
    };
    episodes.sort_by_key(|e| e.index);
    if let Some(pair) = episodes.windows(2).find(|w| w[0].index == w[1].index) {
        return Err(DatasetError::invalid(
            root.join("meta"),
            format!("episode {} is listed twice", pair[0].index),
        ));
    }
    Ok(episodes)
}

fn load_v2(root: &Path, info: &Info, info_path: &Path) -> Result<Vec<Episode>> {
    let path = root.join("meta/episodes.jsonl");
    let mut lines: Vec<EpisodeLine> = read_jsonl(&path)?;
    lines.sort_by_key(|l| l.episode_index);
    let chunks_size = info.chunks_size.max(1);
    let mut next_index = 0;
    lines
        .into_iter()
        .map(|line| {
            let chunk = line.episode_index / chunks_size;
            let data_path = render_template(
                &info.data_path,
                &v2_fields(chunk, line.episode_index, ""),
                info_path,
            )?;
            let mut videos = BTreeMap::new();
            if let Some(template) = &info.video_path {
                for camera in info.video_keys() {
                    let fields = v2_fields(chunk, line.episode_index, &camera.name);
                    let path = render_template(template, &fields, info_path)?;
                    let to_timestamp = line.length as f64 / info.fps;
                    videos.insert(
                        camera.name.clone(),
                        EpisodeVideo { path, from_timestamp: 0.0, to_timestamp },
                    );
                }
            }
            let from = next_index;
            next_index += line.length;
            Ok(Episode {
                index: EpisodeIndex(line.episode_index),
                tasks: line.tasks,
                length: line.length,
                from,
                to: next_index,
                data_path,
                videos,
            })
        })
        .collect()
}

/// The fields of v2 path templates.
fn v2_fields(
    chunk: usize,
    episode: usize,
    video_key: &str,
) -> [(&'static str, TemplateValue<'_>); 3] {
    [
        ("episode_chunk", TemplateValue::Int(chunk)),
        ("episode_index", TemplateValue::Int(episode)),
        ("video_key", TemplateValue::Str(video_key)),
    ]
}

/// The fields of v3.0 path templates.
fn v3_fields(chunk: usize, file: usize, video_key: &str) -> [(&'static str, TemplateValue<'_>); 3] {
    [
        ("chunk_index", TemplateValue::Int(chunk)),
        ("file_index", TemplateValue::Int(file)),
        ("video_key", TemplateValue::Str(video_key)),
    ]
}

/// The parquet files under `dir`, recursively, in path order.
pub fn parquet_files_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).map_err(|e| DatasetError::io(&current, e))? {
            let path = entry.map_err(|e| DatasetError::io(&current, e))?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "parquet") {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn load_v3(root: &Path, info: &Info, info_path: &Path) -> Result<Vec<Episode>> {
    let dir = root.join("meta/episodes");
    let files = parquet_files_under(&dir)?;
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
                &v3_fields(data_chunk[row], data_file[row], ""),
                info_path,
            )?;
            let mut videos = BTreeMap::new();
            if let Some(template) = &info.video_path {
                for (camera, chunk, file, from_ts, to_ts) in &camera_columns {
                    let path = render_template(
                        template,
                        &v3_fields(chunk[row], file[row], camera),
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

/// Reads the task strings by task index: `tasks.jsonl` (v2) or `tasks.parquet` (v3.0).
pub fn load_tasks(root: &Path, info: &Info) -> Result<BTreeMap<TaskIndex, String>> {
    if info.codebase_version.is_v2() {
        let path = root.join("meta/tasks.jsonl");
        let lines: Vec<TaskLine> = read_jsonl(&path)?;
        return Ok(lines.into_iter().map(|l| (TaskIndex(l.task_index), l.task)).collect());
    }
    let path = root.join("meta/tasks.parquet");
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
