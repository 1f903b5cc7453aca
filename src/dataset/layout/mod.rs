//! What differs between LeRobot's layout versions, one module per version behind these
//! functions, for the reader ([`crate::dataset::Dataset::open`]) and the writer
//! ([`crate::dataset::write`]) alike:
//!
//! - [`v2`] (v2.0, v2.1): a parquet file and an mp4 per episode, chunk directories of
//!   `chunks_size` episodes, JSON Lines metadata (`episodes.jsonl`, `tasks.jsonl`,
//!   `episodes_stats.jsonl`);
//! - [`v3`] (v3.0): many episodes per file, files numbered within chunk directories, parquet
//!   metadata (`meta/episodes/`, `tasks.parquet`) and `stats.json`.
//!
//! Each module names its files, the fields of its path templates, reads its episode and task
//! tables and writes them.

pub mod v2;
pub mod v3;

use std::collections::BTreeMap;
use std::path::Path;

use super::episodes::{Episode, TaskIndex};
use super::error::{DatasetError, Result};
use super::meta::{CodebaseVersion, Info};
use super::stats::FeatureStats;

/// Files per chunk directory that feedbench writes (LeRobot's `chunks_size`).
pub const CHUNKS_SIZE: usize = 1000;

/// Reads the episodes of a dataset, sorted by episode index, with global index ranges and
/// paths; an episode listed twice is an error.
pub fn load_episodes(root: &Path, info: &Info) -> Result<Vec<Episode>> {
    let mut episodes = if info.codebase_version.is_v2() {
        v2::load_episodes(root, info)?
    } else {
        v3::load_episodes(root, info)?
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

/// Reads the task strings by task index.
pub fn load_tasks(root: &Path, info: &Info) -> Result<BTreeMap<TaskIndex, String>> {
    if info.codebase_version.is_v2() {
        v2::load_tasks(root)
    } else {
        v3::load_tasks(root)
    }
}

/// What info.json says of a dataset's files, by version: its path templates and the counts
/// LeRobot writes.
#[derive(Debug, Clone, PartialEq)]
pub struct FileFacts {
    /// `data_path`.
    pub data_path: &'static str,
    /// `video_path`.
    pub video_path: &'static str,
    /// `total_videos` (v2 only).
    pub total_videos: Option<usize>,
    /// `total_chunks` (v2 only).
    pub total_chunks: Option<usize>,
    /// `data_files_size_in_mb` (v3 only): where a data file rolls over.
    pub data_files_size_in_mb: Option<f64>,
    /// `video_files_size_in_mb` (v3 only): where a video file rolls over.
    pub video_files_size_in_mb: Option<f64>,
}

/// info.json's file facts for `episodes` episodes with `cameras` cameras written in `version`.
pub fn file_facts(version: CodebaseVersion, episodes: usize, cameras: usize) -> FileFacts {
    if version.is_v2() {
        FileFacts {
            data_path: v2::DATA_PATH,
            video_path: v2::VIDEO_PATH,
            total_videos: Some(episodes * cameras),
            total_chunks: Some(episodes.div_ceil(CHUNKS_SIZE)),
            data_files_size_in_mb: None,
            video_files_size_in_mb: None,
        }
    } else {
        FileFacts {
            data_path: v3::DATA_PATH,
            video_path: v3::VIDEO_PATH,
            total_videos: None,
            total_chunks: None,
            data_files_size_in_mb: Some(v3::DATA_FILE_MB),
            video_files_size_in_mb: Some(v3::VIDEO_FILE_MB),
        }
    }
}

/// True where each episode has files of its own (v2); in v3 files hold many episodes.
pub fn file_per_episode(version: CodebaseVersion) -> bool {
    version.is_v2()
}

/// The chunk and number of the `n`-th file written of a kind (data, or one camera's videos)
/// whose first episode is `episode`: v2 files are the episode's own (chunk `episode /
/// CHUNKS_SIZE`), v3 files are numbered within chunks of [`CHUNKS_SIZE`].
pub fn file_position(version: CodebaseVersion, n: usize, episode: usize) -> (usize, usize) {
    if version.is_v2() {
        (episode / CHUNKS_SIZE, episode)
    } else {
        (n / CHUNKS_SIZE, n % CHUNKS_SIZE)
    }
}

/// The path of a file (data when `video_key` is empty, else that camera's) at `chunk` and
/// `n` (v2: the episode, v3: the file number), rendered from the template of `info`.
pub fn file_path(
    info: &Info,
    template: &str,
    chunk: usize,
    n: usize,
    video_key: &str,
) -> Result<std::path::PathBuf> {
    let info_path = Path::new("meta/info.json");
    if info.codebase_version.is_v2() {
        super::meta::render_template(template, &v2::fields(chunk, n, video_key), info_path)
    } else {
        super::meta::render_template(template, &v3::fields(chunk, n, video_key), info_path)
    }
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

/// What the metadata of a written dataset records besides info.json, whatever the version.
pub struct EpisodeTables<'a> {
    /// Per episode: its first and one-past-last global index.
    pub ranges: &'a [(usize, usize)],
    /// Per episode: its task.
    pub episode_tasks: Vec<&'a str>,
    /// Every task, by task index.
    pub tasks: &'a [String],
    /// Per episode: the chunk and file of its data.
    pub data_files: &'a [(usize, usize)],
    /// Per camera: its key and, per episode, where its frames are.
    pub cameras: Vec<(&'a str, &'a [CameraClip])>,
    /// Per episode: every feature's statistics.
    pub stats: &'a [Vec<(String, FeatureStats)>],
}

/// Writes the episode, task and statistics tables of `version` into `root/meta`.
pub fn write_tables(
    root: &Path,
    version: CodebaseVersion,
    tables: &EpisodeTables<'_>,
) -> Result<()> {
    if version.is_v2() {
        v2::write_tables(root, tables)
    } else {
        v3::write_tables(root, tables)
    }
}

/// Every feature's statistics as a JSON object by key (`stats.json`, `episodes_stats.jsonl`).
fn stats_json(stats: &[(String, FeatureStats)]) -> serde_json::Value {
    serde_json::Value::Object(stats.iter().map(|(key, s)| (key.clone(), s.to_json())).collect())
}
