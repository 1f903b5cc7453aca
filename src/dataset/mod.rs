//! The LeRobot dataset format: metadata, Parquet frames, video and image features, delta
//! windows. Knows nothing about batching or timing.
//!
//! [`Dataset::open`] reads the metadata and maps the data files of the selected episodes;
//! [`Dataset::sample`] returns what LeRobot's `LeRobotDataset[index]` returns.

pub mod at_once;
pub mod bytes;
pub mod choices;
pub mod columns;
pub mod contract;
pub mod episodes;
pub mod error;
pub mod export;
pub mod feature;
pub mod files;
pub mod frames;
pub mod image;
pub mod layout;
pub mod meta;
pub mod positioned;
pub mod rate;
pub mod remote;
pub mod sample;
pub mod setting;
pub mod size;
pub mod stage;
pub mod stats;
pub mod summary;
pub mod values;
pub mod video;
pub mod window;
pub mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use choices::{EpisodeList, Resolution, WindowChoice};
pub use contract::Contract;
pub use episodes::{Episode, EpisodeIndex, EpisodeVideo, TaskIndex};
pub use error::{DatasetError, Result};
pub use meta::{CodebaseVersion, Feature, FeatureKind, Info, ScalarType};
pub use sample::{PixelShape, Sample};
pub use values::{Array, Values};
pub use window::{Window, WindowSpec, DEFAULT_TOLERANCE_S};

use frames::FrameTable;

/// How to open a dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetOptions {
    /// Only these episodes, like LeRobot's `episodes=[…]`; every file they need must exist.
    /// None selects every episode; then files are checked as they are needed.
    pub episodes: Option<Vec<usize>>,
    /// Largest distance between a query time and the video frame that serves it, seconds.
    pub tolerance_s: f64,
    /// The LeRobot whose reading is followed (how the tolerance is taken).
    pub contract: Contract,
}

impl Default for DatasetOptions {
    fn default() -> Self {
        Self { episodes: None, tolerance_s: DEFAULT_TOLERANCE_S, contract: Contract::Released }
    }
}

/// How a query time finds the video frame that serves it: the largest distance between them,
/// and the LeRobot whose reading of that distance is followed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameMatch {
    /// Largest distance between a query time and its frame, seconds.
    pub tolerance_s: f64,
    /// How the distance is taken (strictly within, or within).
    pub contract: Contract,
}

impl Default for FrameMatch {
    fn default() -> Self {
        Self { tolerance_s: DEFAULT_TOLERANCE_S, contract: Contract::Released }
    }
}

/// An open LeRobot dataset (v2.0, v2.1 or v3.0).
pub struct Dataset {
    root: PathBuf,
    info: Info,
    /// meta/info.json as the file holds it.
    info_document: serde_json::Value,
    episodes: Vec<Episode>,
    /// Positions in `episodes` of the selected ones, by global index.
    selected: Vec<usize>,
    tasks: BTreeMap<TaskIndex, String>,
    /// Per episode (aligned with `episodes`), whether all its video files are on disk.
    videos_on_disk: Vec<bool>,
    frames: FrameTable,
    tolerance_s: f64,
    contract: Contract,
}

impl Dataset {
    /// Opens every episode of the dataset at `root`.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(root, &DatasetOptions::default())
    }

    /// Opens the dataset at `root` with `options`. An fps that no rate of its timestamps can
    /// be (every non-zero delta would leave every episode) is refused, naming meta/info.json.
    pub fn open_with(root: impl AsRef<Path>, options: &DatasetOptions) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        if !(options.tolerance_s >= 0.0 && options.tolerance_s.is_finite()) {
            return Err(DatasetError::Request {
                root,
                what: format!(
                    "tolerance {} s: expected a number of seconds ≥ 0 (LeRobot's is 1e-4)",
                    options.tolerance_s
                ),
            });
        }
        let (info, info_document) = Info::read(&root)?;
        let episodes = layout::load_episodes(&root, &info)?;
        let tasks = layout::load_tasks(&root, &info)?;
        let selected: Vec<usize> = match &options.episodes {
            None => (0..episodes.len()).collect(),
            Some(wanted) => {
                let mut positions = Vec::with_capacity(wanted.len());
                for &episode in wanted {
                    let position = episodes
                        .binary_search_by_key(&EpisodeIndex(episode), |e| e.index)
                        .map_err(|_| DatasetError::Request {
                            root: root.clone(),
                            what: format!(
                                "episode {episode} is not in the dataset ({} episodes listed in meta/)",
                                episodes.len()
                            ),
                        })?;
                    for video in episodes[position].videos.values() {
                        files::expect_episode_file(&root.join(&video.path), episode)?;
                    }
                    positions.push(position);
                }
                positions.sort_by_key(|&p| episodes[p].from);
                positions.dedup();
                positions
            }
        };
        let chosen: Vec<&Episode> = selected.iter().map(|&p| &episodes[p]).collect();
        let frames = FrameTable::open(&root, &info.features, &episodes, &chosen)?;
        let mut present: BTreeMap<&Path, bool> = BTreeMap::new();
        let mut videos_on_disk = Vec::with_capacity(episodes.len());
        for episode in &episodes {
            let mut all = true;
            for video in episode.videos.values() {
                all &= match present.get(video.path.as_path()) {
                    Some(&there) => there,
                    None => *present
                        .entry(&video.path)
                        .or_insert(files::is_present(&root.join(&video.path))?),
                };
            }
            videos_on_disk.push(all);
        }
        let dataset = Dataset {
            root,
            info,
            info_document,
            episodes,
            selected,
            tasks,
            videos_on_disk,
            frames,
            tolerance_s: options.tolerance_s,
            contract: options.contract,
        };
        dataset.check_fps_is_a_rate()?;
        Ok(dataset)
    }

    /// The dataset directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The parsed info.json.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// meta/info.json as the file holds it, every key as written (the features' `names` and
    /// `info` blocks, keys feedbench does not read): what LeRobot's metadata holds of it.
    pub fn info_document(&self) -> &serde_json::Value {
        &self.info_document
    }

    /// Every episode listed in the metadata, selected or not, by episode index.
    pub fn all_episodes(&self) -> &[Episode] {
        &self.episodes
    }

    /// The selected episodes, in global index order.
    pub fn episodes(&self) -> impl ExactSizeIterator<Item = &Episode> {
        self.selected.iter().map(|&p| &self.episodes[p])
    }

    /// The task strings by task index.
    pub fn tasks(&self) -> &BTreeMap<TaskIndex, String> {
        &self.tasks
    }

    /// Frames in the selected episodes.
    pub fn num_frames(&self) -> usize {
        self.episodes().map(|e| e.length).sum()
    }

    /// The tolerance for matching video frames, seconds.
    pub fn tolerance_s(&self) -> f64 {
        self.tolerance_s
    }

    /// The LeRobot whose reading it follows.
    pub fn contract(&self) -> Contract {
        self.contract
    }

    /// Checks a window specification against this dataset.
    pub fn window(&self, spec: &WindowSpec) -> Result<Window> {
        Window::resolve(spec, &self.info, &self.root, self.tolerance_s)
    }

    /// The selected episode holding global `index`.
    pub fn episode_of(&self, index: usize) -> Result<&Episode> {
        let slot = self.selected.partition_point(|&p| self.episodes[p].to <= index);
        self.selected
            .get(slot)
            .map(|&p| &self.episodes[p])
            .filter(|e| e.contains(index))
            .ok_or_else(|| DatasetError::Request {
                root: self.root.clone(),
                what: format!("index {index} is not in the selected episodes"),
            })
    }

    /// The global indices a training epoch samples, in order: every frame of the selected
    /// episodes except the last `drop_n_last_frames` of each (LeRobot's
    /// `EpisodeAwareSampler`).
    pub fn sample_indices(&self, drop_n_last_frames: usize) -> Vec<usize> {
        self.episodes()
            .flat_map(|e| e.from..e.to.saturating_sub(drop_n_last_frames).max(e.from))
            .collect()
    }

    /// True when every video file of `episode` was on disk when the dataset was opened.
    pub fn has_videos_on_disk(&self, episode: &Episode) -> bool {
        self.episodes
            .binary_search_by_key(&episode.index, |e| e.index)
            .is_ok_and(|position| self.videos_on_disk[position])
    }

    /// The files an episode needs that are not on disk (nor in the store).
    pub fn missing_files(&self, episode: &Episode) -> Result<Vec<PathBuf>> {
        let mut missing = Vec::new();
        for path in
            std::iter::once(&episode.data_path).chain(episode.videos.values().map(|v| &v.path))
        {
            let path = self.root.join(path);
            if !files::is_present(&path)? {
                missing.push(path);
            }
        }
        Ok(missing)
    }
}
