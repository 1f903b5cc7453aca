//! Feedbench's own zero-decode camera storage, the reference a layout study sets codecs
//! against: `.rgb` files in place of the mp4 files. A 64-byte header (magic, height, width,
//! fps, frame count), then every frame as uint8 RGB planes (`3 × height × width`, the loader's
//! CHW), frame `i` shown at `i / fps` seconds. Episodes are appended as in mp4 files, so the
//! v2.1 and v3.0 layouts and their timestamps apply unchanged. Frames are read with positioned
//! reads straight into the caller's buffer: one copy out of the page cache and no decoding. A
//! memory map would save that copy but turns a file that shrinks under a reader into SIGBUS.
//! LeRobot cannot read these files.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::check_rgb_frame;
use super::convert::FrameBuffer;
use super::probe::VideoStreamInfo;
use crate::dataset::contract::Contract;
use crate::dataset::error::{DatasetError, Result};

/// The extension of raw frame files.
pub const EXTENSION: &str = "rgb";
/// What info.json's `video.codec` says of raw frames.
pub const CODEC: &str = "raw";
const MAGIC: &[u8; 16] = b"feedbench-raw-1\0";
const HEADER_BYTES: u64 = 64;
/// Files kept by [`RawFrames::shared`] before the cache is emptied.
const SHARED_CAPACITY: usize = 256;

/// Whether `path` is a raw frame file (by its extension).
pub fn is_raw(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == EXTENSION)
}

/// An open raw frame file.
#[derive(Debug)]
pub struct RawFrames {
    path: PathBuf,
    file: File,
    height: u32,
    width: u32,
    fps: f64,
    frames: usize,
}

impl RawFrames {
    /// Opens `path` and checks its header against its length.
    pub fn open(path: &Path) -> Result<Self> {
        let file = crate::dataset::files::open_regular(path)?;
        let mut header = [0u8; HEADER_BYTES as usize];
        file.read_exact_at(&mut header, 0)
            .map_err(|_| DatasetError::invalid(path, "too short for a raw frame file's header"))?;
        if &header[..16] != MAGIC {
            return Err(DatasetError::invalid(path, "not a feedbench raw frame file"));
        }
        let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4"));
        let (height, width) = (u32_at(16), u32_at(20));
        let fps = f64::from_le_bytes(header[24..32].try_into().expect("8"));
        let frames = u64::from_le_bytes(header[32..40].try_into().expect("8"));
        let frame_bytes = 3 * u64::from(height) * u64::from(width);
        let length = file.metadata().map_err(|e| DatasetError::io(path, e))?.len();
        if height == 0 || width == 0 || fps.is_nan() || fps <= 0.0 {
            return Err(DatasetError::invalid(path, "a raw frame file with no frame size or rate"));
        }
        if length != HEADER_BYTES + frames * frame_bytes {
            return Err(DatasetError::invalid(
                path,
                format!(
                    "{length} bytes, but its header says {frames} frames of 3×{height}×{width} \
                     ({} bytes): truncated or still being written",
                    HEADER_BYTES + frames * frame_bytes
                ),
            ));
        }
        Ok(Self { path: path.to_path_buf(), file, height, width, fps, frames: frames as usize })
    }

    /// The process-wide shared value for `path`, opened once.
    pub fn shared(path: &Path) -> Result<Arc<Self>> {
        static FILES: OnceLock<Mutex<HashMap<PathBuf, Arc<RawFrames>>>> = OnceLock::new();
        let files = FILES.get_or_init(Default::default);
        if let Some(raw) = files.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            return Ok(Arc::clone(raw));
        }
        let raw = Arc::new(Self::open(path)?);
        let mut files = files.lock().unwrap_or_else(|e| e.into_inner());
        if files.len() >= SHARED_CAPACITY {
            files.clear();
        }
        files.insert(path.to_path_buf(), Arc::clone(&raw));
        Ok(raw)
    }

    /// `(width, height)`, as [`super::VideoFile::dimensions`] gives them.
    pub fn dimensions(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// Bytes of one frame: `3 × height × width`.
    pub fn frame_bytes(&self) -> usize {
        3 * self.height as usize * self.width as usize
    }

    /// The frame shown nearest `time_s`; it must lie within `tolerance_s` as `contract` takes
    /// it, as for video files.
    pub fn nearest_frame(
        &self,
        time_s: f64,
        tolerance_s: f64,
        contract: Contract,
    ) -> Result<usize> {
        let last = self.frames.saturating_sub(1);
        let frame = ((time_s * self.fps).round_ties_even().max(0.0) as usize).min(last);
        let shown = frame as f64 / self.fps;
        if self.frames > 0 && contract.admits((shown - time_s).abs(), tolerance_s) {
            return Ok(frame);
        }
        Err(DatasetError::invalid(
            &self.path,
            format!(
                "no frame {} {tolerance_s} s of query time {time_s} s: the nearest is frame \
                 {frame} at {shown} s (the file has {} frames at {} fps)",
                contract.within(),
                self.frames,
                self.fps
            ),
        ))
    }

    /// Reads frame `frame` (RGB planes) into `out`, which holds exactly one frame.
    pub fn read_frame(&self, frame: usize, out: &mut [u8]) -> Result<()> {
        if frame >= self.frames || out.len() != self.frame_bytes() {
            return Err(DatasetError::invalid(
                &self.path,
                format!("frame {frame} of {} into a buffer of {} bytes", self.frames, out.len()),
            ));
        }
        let at = HEADER_BYTES + (frame * self.frame_bytes()) as u64;
        self.file.read_exact_at(out, at).map_err(|e| DatasetError::io(&self.path, e))
    }

    /// What `info` shows of it, as FFmpeg's probe gives it for a video.
    pub fn stream_info(&self) -> VideoStreamInfo {
        VideoStreamInfo {
            codec: CODEC.into(),
            width: self.width,
            height: self.height,
            pix_fmt: "gbrp".into(),
            fps: self.fps,
            frames: self.frames as u64,
            duration_s: self.frames as f64 / self.fps,
        }
    }
}

/// A raw frame file being written; episodes are appended one after another.
pub struct RawWriter {
    path: PathBuf,
    file: BufWriter<File>,
    height: u32,
    width: u32,
    fps: u32,
    frames: u64,
    episode_start: u64,
    planes: Vec<u8>,
}

impl RawWriter {
    /// Creates `path` (its parent directories too) for frames of `width × height` at `fps`.
    pub fn create(path: &Path, width: u32, height: u32, fps: u32) -> Result<Self> {
        if width == 0 || height == 0 || fps == 0 {
            return Err(DatasetError::invalid(
                path,
                format!("cannot store {width}×{height} frames at {fps} fps"),
            ));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
        }
        let file = File::create(path).map_err(|e| DatasetError::io(path, e))?;
        let mut writer = Self {
            path: path.to_path_buf(),
            file: BufWriter::new(file),
            height,
            width,
            fps,
            frames: 0,
            episode_start: 0,
            planes: Vec::new(),
        };
        writer.write_header()?;
        Ok(writer)
    }

    fn write_header(&mut self) -> Result<()> {
        let mut header = [0u8; HEADER_BYTES as usize];
        header[..16].copy_from_slice(MAGIC);
        header[16..20].copy_from_slice(&self.height.to_le_bytes());
        header[20..24].copy_from_slice(&self.width.to_le_bytes());
        header[24..32].copy_from_slice(&f64::from(self.fps).to_le_bytes());
        header[32..40].copy_from_slice(&self.frames.to_le_bytes());
        self.file.write_all(&header).map_err(|e| DatasetError::io(&self.path, e))
    }

    /// Marks where the next episode starts.
    pub fn start_episode(&mut self) {
        self.episode_start = self.frames;
    }

    /// Appends one frame: packed RGB24, `height × width × 3` bytes.
    pub fn push_rgb(&mut self, rgb: &[u8]) -> Result<()> {
        check_rgb_frame(&self.path, rgb, self.height, self.width)?;
        self.planes.resize(rgb.len(), 0);
        FrameBuffer::U8(&mut self.planes).fill_from_rgb(rgb);
        self.file.write_all(&self.planes).map_err(|e| DatasetError::io(&self.path, e))?;
        self.frames += 1;
        Ok(())
    }

    /// Where the current episode lies in the file: `(from_timestamp, to_timestamp)`.
    pub fn finish_episode(&mut self) -> (f64, f64) {
        let fps = f64::from(self.fps);
        (self.episode_start as f64 / fps, self.frames as f64 / fps)
    }

    /// Bytes of frames written.
    pub fn bytes(&self) -> u64 {
        self.frames * 3 * u64::from(self.height) * u64::from(self.width)
    }

    /// Writes the frame count into the header and closes the file.
    pub fn finish(mut self) -> Result<()> {
        let error = |e: std::io::Error| DatasetError::io(&self.path, e);
        self.file.seek(SeekFrom::Start(0)).map_err(error)?;
        self.write_header()?;
        let file =
            self.file.into_inner().map_err(|e| DatasetError::io(&self.path, e.into_error()))?;
        file.sync_data().map_err(|e| DatasetError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_as_planes_at_their_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("episode.rgb");
        let mut writer = RawWriter::create(&path, 3, 2, 10).unwrap();
        writer.start_episode();
        let frame = |k: u8| (0..18).map(|i| i * 10 + k).collect::<Vec<u8>>();
        for k in 0..4 {
            writer.push_rgb(&frame(k)).unwrap();
        }
        assert_eq!(writer.finish_episode(), (0.0, 0.4));
        writer.finish().unwrap();

        let raw = RawFrames::open(&path).unwrap();
        assert_eq!(raw.dimensions(), (3, 2));
        assert_eq!(raw.nearest_frame(0.2, 1e-4, Contract::Released).unwrap(), 2);
        assert!(raw
            .nearest_frame(0.25, 1e-4, Contract::Released)
            .unwrap_err()
            .to_string()
            .contains("0.25"));
        assert!(raw.nearest_frame(0.4, 1e-4, Contract::Released).is_err(), "past the last frame");
        let mut out = vec![0u8; 18];
        raw.read_frame(1, &mut out).unwrap();
        let packed = frame(1);
        let planes: Vec<u8> =
            (0..3).flat_map(|c| packed.iter().skip(c).step_by(3).copied()).collect();
        assert_eq!(out, planes);

        let length = std::fs::metadata(&path).unwrap().len();
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(length - 1).unwrap();
        let error = RawFrames::open(&path).unwrap_err().to_string();
        assert!(error.contains("truncated") && error.contains("episode.rgb"), "{error}");
    }
}
