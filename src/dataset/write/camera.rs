//! One camera's episodes encoded into mp4 files (or stored as raw frames): a file per episode
//! (v2.1), or episodes appended to a file until it is full (v3.0). The frames come from the
//! caller (rendered by `synth`, decoded from a source dataset by `transcode`).

use std::path::Path;

use super::dataset::{video_file, CameraClip, CameraFeature, Layout};
use super::encode::{EncodeSettings, Mp4Writer};
use crate::dataset::layout::v3::VIDEO_FILE_MB;
use crate::dataset::layout::{file_per_episode, file_position};
use crate::dataset::meta::{Info, VideoInfo};
use crate::dataset::stats::ImageStats;
use crate::dataset::video::raw::{self, RawWriter};
use crate::dataset::Result;

/// How a camera's frames are stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CameraCoding<'a> {
    /// mp4 files encoded with these settings.
    Video(&'a EncodeSettings),
    /// Raw frame files ([`crate::dataset::video::raw`]).
    Raw,
}

impl CameraCoding<'_> {
    /// The feature's `info` block: the encoder's, or for raw frames their size, rate and
    /// `video.codec = "raw"`.
    pub fn video_info(&self, height: u32, width: u32, fps: u32) -> VideoInfo {
        match self {
            CameraCoding::Video(settings) => settings.video_info(height, width, fps),
            CameraCoding::Raw => VideoInfo::of_stream(raw::CODEC, "gbrp", height, width, fps),
        }
    }
}

/// Points info.json's `video_path` at raw frame files (`.rgb`) instead of mp4 files.
pub fn use_raw_files(info: &mut Info) {
    let extension = format!(".{}", raw::EXTENSION);
    info.video_path = info.video_path.take().map(|p| p.replace(".mp4", &extension));
}

/// A camera to encode: its key, frame size and how its frames are stored.
#[derive(Debug, Clone, PartialEq)]
pub struct CameraTarget<'a> {
    /// The feature key (`observation.images.top`).
    pub key: &'a str,
    /// Frame height.
    pub height: u32,
    /// Frame width.
    pub width: u32,
    /// Codec, GOP, CRF…, or raw frames.
    pub coding: CameraCoding<'a>,
    /// v3.0: at most this many episodes per file; None: files roll over at info.json's
    /// `video_files_size_in_mb`, judged by the last episode's size, as LeRobot does.
    pub episodes_per_file: Option<usize>,
}

/// Fills frame `i` of episode `episode` (packed RGB24): `frame(episode, i, rgb)`.
pub type FrameSource<'a> = dyn FnMut(usize, usize, &mut [u8]) -> Result<()> + 'a;

/// What [`encode_camera`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedCamera {
    /// The feature: where each episode's frames are, and their statistics.
    pub feature: CameraFeature,
    /// mp4 files written.
    pub files: usize,
    /// Bytes of coded frames.
    pub bytes: u64,
}

/// A camera file being written.
enum FileWriter {
    Mp4(Mp4Writer),
    Raw(RawWriter),
}

impl FileWriter {
    fn bytes(&self) -> u64 {
        match self {
            FileWriter::Mp4(w) => w.bytes(),
            FileWriter::Raw(w) => w.bytes(),
        }
    }

    fn start_episode(&mut self) -> Result<()> {
        match self {
            FileWriter::Mp4(w) => w.start_episode(),
            FileWriter::Raw(w) => {
                w.start_episode();
                Ok(())
            }
        }
    }

    fn push_rgb(&mut self, rgb: &[u8]) -> Result<()> {
        match self {
            FileWriter::Mp4(w) => w.push_rgb(rgb),
            FileWriter::Raw(w) => w.push_rgb(rgb),
        }
    }

    /// `(from_timestamp, to_timestamp)` of the episode just written.
    fn finish_episode(&mut self) -> Result<(f64, f64)> {
        match self {
            FileWriter::Mp4(w) => w.finish_episode().map(|c| (c.from_timestamp, c.to_timestamp)),
            FileWriter::Raw(w) => Ok(w.finish_episode()),
        }
    }

    fn finish(self) -> Result<()> {
        match self {
            FileWriter::Mp4(w) => w.finish(),
            FileWriter::Raw(w) => w.finish(),
        }
    }
}

/// The file a camera's episodes are being appended to.
struct OpenFile {
    writer: FileWriter,
    /// v3.0: chunk and file index (v2.1: the episode's chunk and the episode).
    chunk: usize,
    file: usize,
    /// Episodes in it so far.
    episodes: usize,
}

/// Encodes every episode of `layout` for `camera` under `root`, asking `frame(episode, i, rgb)`
/// to fill frame `i` of each episode (packed RGB24, `height × width × 3` bytes) in order.
pub fn encode_camera(
    root: &Path,
    info: &Info,
    layout: &Layout,
    camera: &CameraTarget<'_>,
    frame: &mut FrameSource<'_>,
) -> Result<EncodedCamera> {
    let (height, width, fps) = (camera.height, camera.width, layout.fps);
    let limit = info.video_files_size_in_mb.unwrap_or(VIDEO_FILE_MB) * 1024.0 * 1024.0;
    let file_per_episode = file_per_episode(layout.version);
    let mut rgb = vec![0u8; height as usize * width as usize * 3];
    let (mut clips, mut stats) = (Vec::new(), Vec::new());
    let (mut files, mut bytes, mut last_episode_bytes) = (0, 0, 0);
    let mut open: Option<OpenFile> = None;
    for (episode, &length) in layout.episode_lengths.iter().enumerate() {
        let full = match (&open, camera.episodes_per_file) {
            (None, _) => true,
            (Some(_), _) if file_per_episode => true,
            (Some(f), Some(n)) => f.episodes >= n,
            (Some(f), None) => (f.writer.bytes() + last_episode_bytes) as f64 >= limit,
        };
        if full {
            if let Some(f) = open.take() {
                bytes += f.writer.bytes();
                f.writer.finish()?;
            }
            let (chunk, file) = file_position(layout.version, files, episode);
            let path = root.join(video_file(info, camera.key, chunk, file)?);
            let writer = match camera.coding {
                CameraCoding::Video(settings) => {
                    FileWriter::Mp4(Mp4Writer::create(&path, width, height, fps, settings)?)
                }
                CameraCoding::Raw => FileWriter::Raw(RawWriter::create(&path, width, height, fps)?),
            };
            open = Some(OpenFile { writer, chunk, file, episodes: 0 });
            files += 1;
        }
        let f = open.as_mut().expect("a file is open");
        let before = f.writer.bytes();
        f.writer.start_episode()?;
        let mut episode_stats = ImageStats::new(length, height, width);
        for i in 0..length {
            frame(episode, i, &mut rgb)?;
            episode_stats.add(i, &rgb, width);
            f.writer.push_rgb(&rgb)?;
        }
        let (from_timestamp, to_timestamp) = f.writer.finish_episode()?;
        last_episode_bytes = f.writer.bytes() - before;
        f.episodes += 1;
        clips.push(CameraClip { chunk: f.chunk, file: f.file, from_timestamp, to_timestamp });
        stats.push(episode_stats.finish());
    }
    if let Some(f) = open.take() {
        bytes += f.writer.bytes();
        f.writer.finish()?;
    }
    let feature = CameraFeature {
        key: camera.key.to_string(),
        height,
        width,
        info: camera.coding.video_info(height, width, fps),
        clips,
        stats,
    };
    Ok(EncodedCamera { feature, files, bytes })
}
