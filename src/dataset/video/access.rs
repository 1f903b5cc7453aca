//! How a video file is laid out for random access, as `info` says it per file: its codec, the
//! distance between its keyframes (the GOP), whether frames are shown in another order than
//! they are decoded (B-frames), whether its index sits before its media data (faststart),
//! whether each of its episodes starts on a keyframe (a stream copy can cut it there), and the
//! frames a sample of a diffusion window (its frame and the one before) costs to decode from
//! the keyframe before it: why one dataset is slow to read before anyone re-encodes it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::boxes::index_at_front;
use super::table::VideoFile;
use crate::dataset::error::Result;
use crate::dataset::DEFAULT_TOLERANCE_S;

/// One video file's layout for random access.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileLayout {
    /// The file, relative to the dataset root.
    pub file: PathBuf,
    /// The codec.
    pub codec: String,
    /// The most frames from one keyframe to the next (the GOP), in decode order.
    pub gop_max: usize,
    /// Frames per keyframe, on average.
    pub gop_mean: f64,
    /// Whether some frame is shown in another order than decoded (B-frames).
    pub reordered: bool,
    /// Whether the index (`moov`) lies before the media data (faststart).
    pub index_at_front: bool,
    /// The episodes the file holds.
    pub episodes: usize,
    /// The episodes whose first frame is a keyframe (a stream copy cuts them cleanly).
    pub episodes_on_keyframe: usize,
    /// The first episode that does not start on a keyframe.
    pub first_misaligned: Option<usize>,
    /// Frames decoded per sample of a diffusion window (its frame and the one before, within
    /// the episode), each sample decoded from the keyframe before it.
    pub frames_decoded_per_sample: f64,
}

/// The episodes of one file: each its index and its time span in the file, seconds.
pub type EpisodeSpans = [(usize, f64, f64)];

impl FileLayout {
    /// The layout of the file `relative` under `root`, holding `episodes`.
    pub fn of(root: &Path, relative: &Path, episodes: &EpisodeSpans) -> Result<Self> {
        let video = VideoFile::open(&root.join(relative))?;
        let samples = video.samples();
        let keyframes: Vec<usize> =
            (samples.iter().enumerate()).filter(|(_, s)| s.keyframe).map(|(i, _)| i).collect();
        let gaps = keyframes.windows(2).map(|w| w[1] - w[0]);
        let last = samples.len() - keyframes.last().copied().unwrap_or(0);
        let gop_max = gaps.clone().chain([last]).max().unwrap_or(samples.len());
        let reordered = samples.iter().enumerate().any(|(i, s)| s.rank as usize != i);
        // An episode's frames: those shown from its start to its end, within the tolerance.
        let times = video.frame_times();
        let frame_at = |time_s: f64| times.partition_point(|&t| t < time_s - DEFAULT_TOLERANCE_S);
        let (mut on_keyframe, mut first_misaligned) = (0, None);
        let (mut decoded, mut windows) = (0usize, 0usize);
        for &(episode, from_s, to_s) in episodes {
            let (first, end) = (frame_at(from_s), frame_at(to_s));
            if first >= end {
                continue;
            }
            // Its first frame is a keyframe where decoding it starts at its own sample.
            let rank = video.rank_of_frame(first);
            if samples[video.decode_start(rank)].rank == rank {
                on_keyframe += 1;
            } else if first_misaligned.is_none() {
                first_misaligned = Some(episode);
            }
            for f in first..end {
                let before = video.rank_of_frame(f.saturating_sub(1).max(first));
                let at = video.rank_of_frame(f);
                decoded += video.complete_after(at).saturating_sub(video.decode_start(before));
                windows += 1;
            }
        }
        Ok(FileLayout {
            file: relative.to_path_buf(),
            codec: video.codec().to_string(),
            gop_max,
            gop_mean: samples.len() as f64 / keyframes.len().max(1) as f64,
            reordered,
            index_at_front: index_at_front(video.file())?,
            episodes: episodes.len(),
            episodes_on_keyframe: on_keyframe,
            first_misaligned,
            frames_decoded_per_sample: decoded as f64 / windows.max(1) as f64,
        })
    }

    /// One line: `videos/…mp4: av1, GOP 2 (2.0 a keyframe), no B-frames, index at the front;
    /// 3 of 3 episodes on a keyframe; 1.50 frames decoded per sample`.
    pub fn line(&self) -> String {
        let aligned = match self.first_misaligned {
            None => format!(
                "{} of {} episodes start on a keyframe",
                self.episodes_on_keyframe, self.episodes
            ),
            Some(episode) => format!(
                "{} of {} episodes start on a keyframe (episode {episode} does not)",
                self.episodes_on_keyframe, self.episodes
            ),
        };
        format!(
            "{}: {}, GOP {} ({:.1} frames a keyframe), {}, index {}; {aligned}; {:.2} frames \
             decoded per sample of a diffusion window",
            self.file.display(),
            self.codec,
            self.gop_max,
            self.gop_mean,
            if self.reordered { "B-frames" } else { "no B-frames" },
            if self.index_at_front { "at the front" } else { "at the end" },
            self.frames_decoded_per_sample
        )
    }
}

/// Several video files' layouts summed up (a camera's, a dataset's): what a study keeps of a
/// candidate's files and `info` says of the files past the first few.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilesLayout {
    /// Video files.
    pub files: usize,
    /// The most frames from one keyframe to the next, in any file.
    pub gop_max: usize,
    /// Files that show frames in another order than they decode them (B-frames).
    pub with_b_frames: usize,
    /// Files with their index before their frames (faststart).
    pub indexed_at_front: usize,
    /// Episodes over the files.
    pub episodes: usize,
    /// Of those, the episodes whose first frame is a keyframe.
    pub episodes_on_keyframe: usize,
    /// Frames decoded per sample of a diffusion window, the files' mean.
    pub frames_decoded_per_sample: f64,
}

impl FilesLayout {
    /// The summary of `files` (None without files).
    pub fn of(files: &[FileLayout]) -> Option<Self> {
        let count = |test: fn(&FileLayout) -> bool| files.iter().filter(|f| test(f)).count();
        (!files.is_empty()).then(|| Self {
            files: files.len(),
            gop_max: files.iter().map(|f| f.gop_max).max().unwrap_or(0),
            with_b_frames: count(|f| f.reordered),
            indexed_at_front: count(|f| f.index_at_front),
            episodes: files.iter().map(|f| f.episodes).sum(),
            episodes_on_keyframe: files.iter().map(|f| f.episodes_on_keyframe).sum(),
            frames_decoded_per_sample: files
                .iter()
                .map(|f| f.frames_decoded_per_sample)
                .sum::<f64>()
                / files.len() as f64,
        })
    }

    /// Whether some file has B-frames.
    pub fn reordered(&self) -> bool {
        self.with_b_frames > 0
    }

    /// Whether every file has its index at the front.
    pub fn index_at_front(&self) -> bool {
        self.indexed_at_front == self.files
    }

    /// `12 files: GOP 2, no B-frames, index at the end, 5 of 5 episodes on a keyframe`.
    pub fn line(&self) -> String {
        format!(
            "{} file{}: GOP {}, {}, index {}, {} of {} episodes on a keyframe, {:.2} frames \
             decoded per sample",
            self.files,
            if self.files == 1 { "" } else { "s" },
            self.gop_max,
            if self.reordered() { "B-frames" } else { "no B-frames" },
            if self.index_at_front() { "at the front" } else { "at the end" },
            self.episodes_on_keyframe,
            self.episodes,
            self.frames_decoded_per_sample
        )
    }
}
