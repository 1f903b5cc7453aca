//! What `feedbench info` reports: the metadata, what is on disk, and what the video files
//! really hold.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::bytes::Bytes;
use super::layout::{load_episodes, load_tasks};
use super::meta::{CodebaseVersion, Info};
use super::rate::RateMismatch;
use super::video::access::{FileLayout, FilesLayout};
use super::video::raw::{self, RawFrames};
use super::video::{probe, VideoStreamInfo};
use super::{Dataset, DatasetError, DatasetOptions, Result};

/// One feature as info.json declares it.
#[derive(Debug, Clone, Serialize)]
pub struct FeatureSummary {
    /// The key.
    pub name: String,
    /// The dtype string.
    pub dtype: String,
    /// The declared shape.
    pub shape: Vec<usize>,
}

/// One camera: what info.json says and what its first present file holds.
#[derive(Debug, Clone, Serialize)]
pub struct CameraSummary {
    /// The video key.
    pub key: String,
    /// `video.codec` from info.json.
    pub declared_codec: Option<String>,
    /// The file that was probed (the first present episode's), relative to the root.
    pub probed_file: Option<PathBuf>,
    /// What FFmpeg reads from that file; None when no file of this camera is present.
    pub stream: Option<VideoStreamInfo>,
    /// Each present mp4 file of this camera laid out for random access (a local root's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub layout: Vec<FileLayout>,
}

/// A dataset's overview.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The dataset directory.
    pub root: PathBuf,
    /// The layout version.
    pub codebase_version: CodebaseVersion,
    /// `robot_type`.
    pub robot_type: Option<String>,
    /// Frames per second.
    pub fps: f64,
    /// Episodes listed in the metadata.
    pub episodes_listed: usize,
    /// Episodes whose data and video files are all on disk.
    pub episodes_present: Vec<usize>,
    /// Frames in the listed episodes.
    pub frames: usize,
    /// Frames in the present episodes.
    pub frames_present: usize,
    /// Task strings.
    pub tasks: Vec<String>,
    /// Every feature.
    pub features: Vec<FeatureSummary>,
    /// Every camera.
    pub cameras: Vec<CameraSummary>,
    /// Bytes of the parquet data files on disk.
    pub data_bytes: u64,
    /// Bytes of the mp4 files on disk.
    pub video_bytes: u64,
    /// Present episodes whose timestamps advance at another rate than `fps`.
    pub rate_mismatches: Vec<RateMismatch>,
}

impl Summary {
    /// Reads the metadata of the dataset at `root` and looks at its files; missing files are
    /// reported, not errors.
    pub fn collect(root: &Path) -> Result<Self> {
        let info = Info::load(root)?;
        let episodes = load_episodes(root, &info)?;
        let tasks = load_tasks(root, &info)?;
        if episodes.is_empty() {
            return Err(DatasetError::invalid(root.join("meta"), "no episodes listed"));
        }
        // Each file's size, asked once (a request each on a remote root).
        let mut sizes: std::collections::BTreeMap<PathBuf, Option<u64>> = Default::default();
        let mut file_size = |path: &Path| -> Result<Option<u64>> {
            if let Some(&size) = sizes.get(path) {
                return Ok(size);
            }
            let size = crate::dataset::files::size_of(path)?;
            sizes.insert(path.to_path_buf(), size);
            Ok(size)
        };
        let mut data_files = std::collections::BTreeSet::new();
        let mut video_files = std::collections::BTreeSet::new();
        let mut episodes_present = Vec::new();
        let mut frames_present = 0;
        for episode in &episodes {
            let data = root.join(&episode.data_path);
            let mut present = file_size(&data)?.is_some();
            data_files.insert(data);
            for video in episode.videos.values() {
                let path = root.join(&video.path);
                present &= file_size(&path)?.is_some();
                video_files.insert(path);
            }
            if present {
                episodes_present.push(episode.index.0);
                frames_present += episode.length;
            }
        }
        let mut total = |files: &std::collections::BTreeSet<PathBuf>| -> Result<u64> {
            let mut sum = 0;
            for path in files {
                sum += file_size(path)?.unwrap_or(0);
            }
            Ok(sum)
        };
        let (data_bytes, video_bytes) = (total(&data_files)?, total(&video_files)?);
        let mut cameras = Vec::new();
        for camera in info.video_keys() {
            let probed_file = episodes
                .iter()
                .filter_map(|e| e.videos.get(&camera.name))
                .map(|v| v.path.clone())
                .find(|p| sizes.get(&root.join(p)).is_some_and(Option::is_some));
            let stream = match &probed_file {
                Some(path) if raw::is_raw(path) => {
                    Some(RawFrames::open(&root.join(path))?.stream_info())
                }
                // FFmpeg probes local files; a remote root's streams are read as they are decoded.
                Some(_) if crate::dataset::remote::is_url(root) => None,
                Some(path) => Some(probe(&root.join(path))?),
                None => None,
            };
            // Each present mp4 file of the camera, with the episodes it holds.
            let mut files: std::collections::BTreeMap<PathBuf, Vec<(usize, f64, f64)>> =
                Default::default();
            for episode in &episodes {
                let Some(video) = episode.videos.get(&camera.name) else { continue };
                let present = sizes.get(&root.join(&video.path)).is_some_and(Option::is_some);
                if present && !raw::is_raw(&video.path) && !crate::dataset::remote::is_url(root) {
                    let span = (episode.index.0, video.from_timestamp, video.to_timestamp);
                    files.entry(video.path.clone()).or_default().push(span);
                }
            }
            let layout = (files.iter())
                .map(|(file, spans)| FileLayout::of(root, file, spans))
                .collect::<Result<Vec<_>>>()?;
            cameras.push(CameraSummary {
                key: camera.name.clone(),
                declared_codec: camera.video.as_ref().and_then(|v| v.codec.clone()),
                probed_file,
                stream,
                layout,
            });
        }
        // Read from the present episodes' timestamps; a dataset that does not open for that
        // (a damaged data file) is summarised all the same, as its files are, unless its fps
        // is no rate of its timestamps.
        let options = DatasetOptions {
            episodes: Some(episodes_present.clone()),
            ..DatasetOptions::default()
        };
        let rate_mismatches = match episodes_present.is_empty() {
            true => Vec::new(),
            false => match Dataset::open_with(root, &options) {
                Ok(dataset) => dataset.rate_mismatches().unwrap_or_default(),
                Err(no_rate @ DatasetError::NoRate { .. }) => return Err(no_rate),
                Err(_) => Vec::new(),
            },
        };
        Ok(Summary {
            root: root.to_path_buf(),
            rate_mismatches,
            codebase_version: info.codebase_version,
            robot_type: info.robot_type.clone(),
            fps: info.fps,
            episodes_listed: episodes.len(),
            episodes_present,
            frames: episodes.iter().map(|e| e.length).sum(),
            frames_present,
            tasks: tasks.into_values().collect(),
            features: info
                .features
                .iter()
                .map(|f| FeatureSummary {
                    name: f.name.clone(),
                    dtype: f.kind.dtype_name().into(),
                    shape: f.shape.clone(),
                })
                .collect(),
            cameras,
            data_bytes,
            video_bytes,
        })
    }
}

/// Writes sorted integers compactly: `1, 2, 4-9, 29`.
pub fn format_ranges(values: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut j = i;
        while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
            j += 1;
        }
        parts.push(if j > i + 1 {
            format!("{}-{}", values[i], values[j])
        } else if j == i + 1 {
            format!("{}, {}", values[i], values[j])
        } else {
            values[i].to_string()
        });
        i = j + 1;
    }
    parts.join(", ")
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let robot = self.robot_type.as_deref().map(|r| format!(", {r}")).unwrap_or_default();
        writeln!(
            f,
            "{}  (LeRobot {}{robot}, {} fps)",
            self.root.display(),
            self.codebase_version,
            self.fps
        )?;
        let present = if self.episodes_present.len() == self.episodes_listed {
            "all present on disk".to_string()
        } else {
            format!(
                "{} present on disk: {}",
                self.episodes_present.len(),
                format_ranges(&self.episodes_present)
            )
        };
        writeln!(f, "episodes  {} listed, {present}", self.episodes_listed)?;
        writeln!(
            f,
            "frames    {} listed, {} in present episodes",
            self.frames, self.frames_present
        )?;
        for mismatch in self.rate_mismatches.iter().take(3) {
            writeln!(f, "warning   {mismatch}")?;
        }
        if self.rate_mismatches.len() > 3 {
            writeln!(f, "warning   … and {} more episodes", self.rate_mismatches.len() - 3)?;
        }
        writeln!(f, "tasks     {}", self.tasks.len())?;
        for task in self.tasks.iter().take(5) {
            writeln!(f, "          {task:?}")?;
        }
        if self.tasks.len() > 5 {
            writeln!(f, "          … {} more", self.tasks.len() - 5)?;
        }
        writeln!(
            f,
            "on disk   {} parquet, {} mp4",
            Bytes::of(self.data_bytes),
            Bytes::of(self.video_bytes)
        )?;
        writeln!(f, "features")?;
        let width = self.features.iter().map(|x| x.name.len()).max().unwrap_or(0);
        for feature in &self.features {
            writeln!(f, "  {:width$}  {:8} {:?}", feature.name, feature.dtype, feature.shape)?;
        }
        if !self.cameras.is_empty() {
            writeln!(f, "cameras (as the files hold them)")?;
        }
        for camera in &self.cameras {
            match (&camera.stream, &camera.probed_file) {
                (Some(s), Some(file)) => {
                    let declared = camera
                        .declared_codec
                        .as_ref()
                        .filter(|c| **c != s.codec)
                        .map(|c| format!("; info.json says {c}"))
                        .unwrap_or_default();
                    writeln!(
                        f,
                        "  {:width$}  {} {}×{} {} {:.3} fps  ({}{declared})",
                        camera.key,
                        s.codec,
                        s.width,
                        s.height,
                        s.pix_fmt,
                        s.fps,
                        file.display()
                    )?;
                }
                _ => writeln!(f, "  {:width$}  no file on disk", camera.key)?,
            }
            write!(f, "{}", layout_lines(&camera.layout))?;
        }
        Ok(())
    }
}

/// A camera's files laid out for random access: a line each for the first few, then what the
/// rest hold together.
fn layout_lines(files: &[FileLayout]) -> String {
    const SHOWN: usize = 4;
    let mut out = String::new();
    for file in files.iter().take(SHOWN) {
        out.push_str(&format!("    {}\n", file.line()));
    }
    if let Some(rest) = FilesLayout::of(files.get(SHOWN..).unwrap_or_default()) {
        out.push_str(&format!(
            "    … and {} more file{}: GOP up to {}, {} with B-frames, {} with the index at the \
             end; {} of {} episodes start on a keyframe; {:.2} frames decoded per sample on \
             average\n",
            rest.files,
            if rest.files == 1 { "" } else { "s" },
            rest.gop_max,
            rest.with_b_frames,
            rest.files - rest.indexed_at_front,
            rest.episodes_on_keyframe,
            rest.episodes,
            rest.frames_decoded_per_sample,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_episode_lists() {
        assert_eq!(format_ranges(&[1, 2, 4, 5, 6, 29, 30]), "1, 2, 4-6, 29, 30");
    }
}
