//! Episodes and tasks as the reader resolves them: global index ranges and file paths. The
//! tables they come from differ by layout version ([`super::layout`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::Result;

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

/// The parquet files under `dir`, every level down, in path order (see
/// [`super::files::files_under`]); None where the store cannot list (a plain web server).
pub fn parquet_files_under(dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    let Some(mut files) = super::files::files_under(dir)? else { return Ok(None) };
    files.retain(|path| path.extension().is_some_and(|ext| ext == "parquet"));
    Ok(Some(files))
}
