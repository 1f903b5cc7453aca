//! Layouts v2.0 and v2.1: a parquet file and an mp4 per camera for each episode, in chunk
//! directories of `chunks_size` episodes; episodes, tasks and per-episode statistics as JSON
//! Lines in `meta/`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::json;

use super::{stats_json, EpisodeTables};
use crate::dataset::episodes::{Episode, EpisodeIndex, EpisodeVideo, TaskIndex};
use crate::dataset::error::{DatasetError, Result};
use crate::dataset::files::write_lines;
use crate::dataset::meta::{Info, TemplateValue};

/// info.json's `data_path` as LeRobot writes it.
pub const DATA_PATH: &str = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet";
/// info.json's `video_path` as LeRobot writes it.
pub const VIDEO_PATH: &str =
    "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4";
/// One line per episode: index, tasks, length.
pub const EPISODES_FILE: &str = "meta/episodes.jsonl";
/// One line per task: index and text.
pub const TASKS_FILE: &str = "meta/tasks.jsonl";
/// One line per episode: every feature's statistics (v2.1).
pub const EPISODES_STATS_FILE: &str = "meta/episodes_stats.jsonl";

/// The fields of v2 path templates for episode `episode` of chunk `chunk`.
pub fn fields(
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
    let text = crate::dataset::files::read_regular_text(path)?;
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

/// The episodes of `episodes.jsonl`, in episode order, each with its global index range (the
/// lengths of the episodes before it) and its files.
pub(super) fn load_episodes(root: &Path, info: &Info) -> Result<Vec<Episode>> {
    let info_path = root.join("meta/info.json");
    let episodes_file = root.join(EPISODES_FILE);
    let mut lines: Vec<EpisodeLine> = read_jsonl(&episodes_file)?;
    if lines.is_empty() {
        return Err(DatasetError::invalid(&episodes_file, "lists no episode"));
    }
    lines.sort_by_key(|l| l.episode_index);
    let chunks_size = info.chunks_size.max(1);
    let mut next_index = 0;
    lines
        .into_iter()
        .map(|line| {
            let chunk = line.episode_index / chunks_size;
            let data_path = crate::dataset::meta::render_template(
                &info.data_path,
                &fields(chunk, line.episode_index, ""),
                &info_path,
            )?;
            let mut videos = BTreeMap::new();
            if let Some(template) = &info.video_path {
                for camera in info.video_keys() {
                    let fields = fields(chunk, line.episode_index, &camera.name);
                    let path =
                        crate::dataset::meta::render_template(template, &fields, &info_path)?;
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

/// The task strings of `tasks.jsonl` by task index.
pub(super) fn load_tasks(root: &Path) -> Result<BTreeMap<TaskIndex, String>> {
    let lines: Vec<TaskLine> = read_jsonl(&root.join(TASKS_FILE))?;
    Ok(lines.into_iter().map(|l| (TaskIndex(l.task_index), l.task)).collect())
}

/// Writes `episodes.jsonl`, `tasks.jsonl` and `episodes_stats.jsonl`.
pub(super) fn write_tables(root: &Path, tables: &EpisodeTables<'_>) -> Result<()> {
    write_lines(
        &root.join(EPISODES_FILE),
        tables.ranges.iter().zip(&tables.episode_tasks).enumerate().map(|(e, ((from, to), task))| {
            json!({"episode_index": e, "tasks": [task], "length": to - from})
        }),
    )?;
    write_lines(
        &root.join(TASKS_FILE),
        tables.tasks.iter().enumerate().map(|(i, task)| json!({"task_index": i, "task": task})),
    )?;
    write_lines(
        &root.join(EPISODES_STATS_FILE),
        tables
            .stats
            .iter()
            .enumerate()
            .map(|(e, s)| json!({"episode_index": e, "stats": stats_json(s)})),
    )
}
