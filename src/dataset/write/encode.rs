//! Encoding RGB frames into mp4 files in process with FFmpeg, as LeRobot does with PyAV:
//! RGB24 → swscale (bilinear) → yuv420p (or yuv444p) → libsvtav1 / libx264 / libx265 → the mp4
//! muxer.
//!
//! Timestamps are exact: the encoder's time base is 1/fps and frame `i` of a file has pts `i`,
//! so the mp4 holds frame `i` at `i / fps` seconds. Each episode is encoded by a fresh encoder
//! (so it starts on a keyframe with a closed GOP) and appended to the open file, as LeRobot's
//! v3.0 files are concatenations of separately encoded episodes: an episode's
//! `from_timestamp` is the duration of the episodes before it in the file. (Unless the settings
//! encode a file's episodes as one stream: then one encoder writes them all, pts counted from
//! the file's first frame, and an episode starts wherever the GOP falls.)
//!
//! How frames are encoded ([`EncodeSettings`]) and what the encoder would refuse of it are
//! the `settings` submodule's.

use std::path::{Path, PathBuf};

use ffmpeg_next::codec::{self, Flags};
use ffmpeg_next::format::{self, Pixel};
use ffmpeg_next::software::scaling;
use ffmpeg_next::util::error::EAGAIN;
use ffmpeg_next::{encoder, frame, Packet, Rational};

use crate::dataset::error::{DatasetError, Result};
use crate::dataset::video::check_rgb_frame;
use crate::dataset::video::probe::init_ffmpeg;

pub(crate) mod problem;
mod settings;

pub use problem::{EncodeProblem, EncodeSetting};
pub use settings::{EncodeSettings, PixFmt};

/// Where an episode lies in its mp4 file, seconds: `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clip {
    /// The episode's first frame is shown at this time.
    pub from_timestamp: f64,
    /// The end of its last frame (the next episode's `from_timestamp`).
    pub to_timestamp: f64,
}

/// An mp4 file being written: one video stream; episodes are appended one after another.
pub struct Mp4Writer {
    path: PathBuf,
    output: format::context::Output,
    settings: EncodeSettings,
    width: u32,
    height: u32,
    fps: i32,
    /// The stream's time base, fixed by the muxer when the header is written.
    stream_time_base: Option<Rational>,
    /// The codec headers of the first encoder: every episode's encoder must match them.
    extradata: Option<Vec<u8>>,
    /// The encoder of the episode being written.
    encoder: Option<encoder::video::Encoder>,
    scaler: scaling::Context,
    rgb: frame::Video,
    yuv: frame::Video,
    /// Frames in the file before the current episode.
    episode_start: i64,
    /// Frames of the current episode so far.
    episode_frames: i64,
    /// Bytes of coded frames written so far.
    bytes: u64,
}

impl Mp4Writer {
    /// Creates `path` (its parent directories too) for frames of `width × height` at `fps`.
    pub fn create(
        path: &Path,
        width: u32,
        height: u32,
        fps: u32,
        settings: &EncodeSettings,
    ) -> Result<Self> {
        init_ffmpeg();
        if let Some(problem) = settings.size_problem(height, width) {
            return Err(DatasetError::invalid(path, problem));
        }
        let fps = i32::try_from(fps)
            .ok()
            .filter(|&f| f > 0)
            .ok_or_else(|| DatasetError::invalid(path, format!("cannot encode at {fps} fps")))?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
        }
        let ffmpeg =
            |what: &str, e: ffmpeg_next::Error| DatasetError::invalid(path, format!("{what}: {e}"));
        let output = format::output(path).map_err(|e| ffmpeg("cannot create the mp4 file", e))?;
        let scaler = scaling::Context::get(
            Pixel::RGB24,
            width,
            height,
            settings.pix_fmt.pixel(),
            width,
            height,
            scaling::Flags::BILINEAR,
        )
        .map_err(|e| ffmpeg(&format!("cannot set up RGB → {} conversion", settings.pix_fmt), e))?;
        Ok(Self {
            path: path.to_path_buf(),
            output,
            settings: settings.clone(),
            width,
            height,
            fps,
            stream_time_base: None,
            extradata: None,
            encoder: None,
            scaler,
            rgb: frame::Video::new(Pixel::RGB24, width, height),
            yuv: frame::Video::new(settings.pix_fmt.pixel(), width, height),
            episode_start: 0,
            episode_frames: 0,
            bytes: 0,
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of coded frames written so far (the file's size without its headers).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Frames written so far.
    pub fn frames(&self) -> i64 {
        self.episode_start + self.episode_frames
    }

    fn error(&self, what: &str, e: ffmpeg_next::Error) -> DatasetError {
        DatasetError::invalid(&self.path, format!("{what}: {e}"))
    }

    /// Starts an episode: a fresh encoder, so the episode begins with a keyframe; or, where
    /// the settings encode a file's episodes as one stream, the file's one encoder goes on.
    pub fn start_episode(&mut self) -> Result<()> {
        if self.encoder.is_some() {
            if !self.settings.episode_keyframes {
                return Ok(());
            }
            self.finish_episode()?;
        }
        let name = self.settings.encoder_name();
        let codec = encoder::find_by_name(name).ok_or_else(|| {
            DatasetError::invalid(
                &self.path,
                format!(
                    "FFmpeg has no {name} encoder (install the library it wraps, see the Makefile)"
                ),
            )
        })?;
        let mut context = codec::context::Context::new_with_codec(codec)
            .encoder()
            .video()
            .map_err(|e| self.error("cannot create the encoder", e))?;
        context.set_width(self.width);
        context.set_height(self.height);
        context.set_format(self.settings.pix_fmt.pixel());
        context.set_time_base(Rational(1, self.fps));
        context.set_frame_rate(Some(Rational(self.fps, 1)));
        context.set_gop(self.settings.gop);
        let mut flags = Flags::empty();
        if self.output.format().flags().contains(format::Flags::GLOBAL_HEADER) {
            flags |= Flags::GLOBAL_HEADER;
        }
        // Closed GOPs: every keyframe is one a decoder can start at with nothing before it
        // (AV1 key frames, H.264 IDR, HEVC IDR), as in LeRobot's AV1 files. Without the flag
        // FFmpeg 5.1 asks SVT-AV1 for forward keyframes (intra-only frames that are no sync
        // samples, so decoding could only start at the first frame), and x264/x265 for open
        // GOPs (recovery-point I-frames with leading B-frames), which LeRobot's torchcodec
        // decoding misreads by a frame after a seek.
        flags |= Flags::CLOSED_GOP;
        context.set_flags(flags);
        let encoder = context
            .open_with(self.settings.options())
            .map_err(|e| self.error(&format!("cannot open {name} with {:?}", self.settings), e))?;
        if let Err(e) = self.start_stream(&encoder, codec) {
            discard(encoder, &mut self.yuv, 0);
            return Err(e);
        }
        self.encoder = Some(encoder);
        Ok(())
    }

    /// Writes the file's header with the stream of the first episode's `encoder`; a later
    /// episode's must have the same codec headers, since they share the stream.
    fn start_stream(
        &mut self,
        encoder: &encoder::video::Encoder,
        codec: ffmpeg_next::Codec,
    ) -> Result<()> {
        // SAFETY: the encoder is open; extradata is extradata_size bytes or null.
        let extradata = unsafe {
            let context = encoder.as_ptr();
            let (data, size) = ((*context).extradata, (*context).extradata_size);
            if data.is_null() || size <= 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts(data, size as usize).to_vec()
            }
        };
        match &self.extradata {
            None => {
                let path = &self.path;
                let mut stream = self.output.add_stream(codec).map_err(|e| {
                    DatasetError::invalid(path, format!("cannot add the video stream: {e}"))
                })?;
                stream.set_parameters(encoder);
                stream.set_time_base(Rational(1, self.fps));
                stream.set_avg_frame_rate(Rational(self.fps, 1));
                let mut muxer = ffmpeg_next::Dictionary::new();
                if self.settings.faststart {
                    muxer.set("movflags", "+faststart");
                }
                let header = self.output.write_header_with(muxer).map(drop);
                header.map_err(|e| self.error("cannot write the header", e))?;
                let time_base = self.output.stream(0).map(|s| s.time_base());
                self.stream_time_base = time_base;
                self.extradata = Some(extradata);
            }
            Some(first) if *first != extradata => {
                return Err(DatasetError::invalid(
                    &self.path,
                    "the encoder's codec headers changed between episodes; cannot append",
                ));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// Encodes one frame of the current episode: packed RGB24, `height × width × 3` bytes.
    pub fn push_rgb(&mut self, rgb: &[u8]) -> Result<()> {
        check_rgb_frame(&self.path, rgb, self.height, self.width)?;
        let row = self.width as usize * 3;
        if self.encoder.is_none() {
            self.start_episode()?;
        }
        let stride = self.rgb.stride(0);
        let plane = self.rgb.data_mut(0);
        for (y, src) in rgb.chunks_exact(row).enumerate() {
            plane[y * stride..y * stride + row].copy_from_slice(src);
        }
        self.scaler.run(&self.rgb, &mut self.yuv).map_err(|e| {
            DatasetError::invalid(&self.path, format!("RGB → {}: {e}", self.settings.pix_fmt))
        })?;
        // An episode's own encoder counts from its first frame; one stream from the file's.
        let pts = self.episode_frames + self.pts_shift(false);
        self.yuv.set_pts(Some(pts));
        let sent = self.encoder.as_mut().expect("started").send_frame(&self.yuv);
        sent.map_err(|e| self.error("encoding a frame", e))?;
        self.episode_frames += 1;
        self.drain()
    }

    /// Writes the packets the encoder has ready, shifted to the episode's place in the file.
    fn drain(&mut self) -> Result<()> {
        let time_base = self.stream_time_base.expect("header written");
        let mut packet = Packet::empty();
        loop {
            let Some(encoder) = self.encoder.as_mut() else { return Ok(()) };
            match encoder.receive_packet(&mut packet) {
                Ok(()) => {}
                Err(ffmpeg_next::Error::Other { errno: EAGAIN }) | Err(ffmpeg_next::Error::Eof) => {
                    return Ok(())
                }
                Err(e) => return Err(self.error("encoding", e)),
            }
            let by = self.pts_shift(true);
            let shift = |t: Option<i64>| t.map(|t| t + by);
            packet.set_pts(shift(packet.pts()));
            packet.set_dts(shift(packet.dts()));
            packet.set_duration(1);
            packet.rescale_ts(Rational(1, self.fps), time_base);
            packet.set_stream(0);
            packet.set_position(-1);
            self.bytes += packet.size() as u64;
            packet.write(&mut self.output).map_err(|e| self.error("writing a frame", e))?;
        }
    }

    /// How far a frame's pts is moved: an episode's own encoder's packets to the episode's
    /// place in the file (`packets`), one stream's frames there as they are sent.
    fn pts_shift(&self, packets: bool) -> i64 {
        match self.settings.episode_keyframes == packets {
            true => self.episode_start,
            false => 0,
        }
    }

    /// Ends the current episode (flushes its own encoder; one stream's goes on) and returns
    /// where it lies in the file.
    pub fn finish_episode(&mut self) -> Result<Clip> {
        if !self.settings.episode_keyframes {
            return Ok(self.end_clip());
        }
        self.flush()?;
        Ok(self.end_clip())
    }

    /// Flushes the encoder: every packet it holds written.
    fn flush(&mut self) -> Result<()> {
        if let Some(encoder) = self.encoder.as_mut() {
            encoder
                .send_eof()
                .map_err(|e| DatasetError::invalid(&self.path, format!("flushing: {e}")))?;
            self.drain()?;
        }
        self.encoder = None;
        Ok(())
    }

    /// The current episode's place in the file, the next one starting after it.
    fn end_clip(&mut self) -> Clip {
        let fps = f64::from(self.fps);
        let clip = Clip {
            from_timestamp: self.episode_start as f64 / fps,
            to_timestamp: (self.episode_start + self.episode_frames) as f64 / fps,
        };
        self.episode_start += self.episode_frames;
        self.episode_frames = 0;
        clip
    }

    /// Ends the last episode and completes the file.
    pub fn finish(mut self) -> Result<()> {
        if self.encoder.is_some() && self.episode_frames > 0 {
            self.finish_episode()?;
        }
        self.flush()?;
        if self.extradata.is_none() {
            return Err(DatasetError::invalid(&self.path, "no frame was encoded"));
        }
        self.output.write_trailer().map_err(|e| self.error("cannot complete the mp4 file", e))
    }
}
impl Drop for Mp4Writer {
    /// An encoder left mid-episode (writing failed or was stopped) is discarded.
    fn drop(&mut self) {
        if let Some(encoder) = self.encoder.take() {
            discard(encoder, &mut self.yuv, self.episode_frames);
        }
    }
}

/// Closes an open encoder whose packets are not wanted (writing failed or was stopped), after
/// `frames_sent` frames: it is flushed first, since SVT-AV1 waits forever in its deinit for an
/// end of stream it was never sent, and for the packets of a stream of no frames, so one frame
/// (`yuv`) is sent where none was.
fn discard(mut encoder: encoder::video::Encoder, yuv: &mut frame::Video, frames_sent: i64) {
    if frames_sent == 0 {
        yuv.set_pts(Some(0));
        let _ = encoder.send_frame(yuv);
    }
    if encoder.send_eof().is_ok() {
        let mut packet = Packet::empty();
        while encoder.receive_packet(&mut packet).is_ok() {}
    }
}
