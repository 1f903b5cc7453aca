//! What a video file really holds (codec, size, pixel format), read from the file itself:
//! info.json describes episode 0 only.

use std::path::Path;
use std::sync::Once;

use serde::Serialize;

use crate::dataset::{DatasetError, Result};

/// The video stream of an mp4 file as FFmpeg reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VideoStreamInfo {
    /// FFmpeg's codec name (`av1`, `h264`, `hevc`).
    pub codec: String,
    /// Frame width in pixels.
    pub width: u32,
    /// Frame height in pixels.
    pub height: u32,
    /// FFmpeg's pixel format name (`yuv420p`).
    pub pix_fmt: String,
    /// Average frame rate, frames per second.
    pub fps: f64,
    /// Number of frames the container declares (0 when it does not say).
    pub frames: u64,
    /// Duration in seconds.
    pub duration_s: f64,
}

/// Initialises FFmpeg once per process and keeps its logging quiet.
pub fn init_ffmpeg() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        ffmpeg_next::init().expect("FFmpeg initialisation failed");
        // FFmpeg's own log lines (`[h264 @ 0x…] mmco: unref short failure`, `moov atom not
        // found`) would come before, and apart from, the error that names the file.
        ffmpeg_next::util::log::set_level(ffmpeg_next::util::log::Level::Fatal);
    });
}

/// Reads the best video stream's parameters of `path`.
pub fn probe(path: &Path) -> Result<VideoStreamInfo> {
    init_ffmpeg();
    let ffmpeg_error = |what: &str, e: ffmpeg_next::Error| {
        DatasetError::invalid(
            path,
            format!("{what}: {e} (expected an mp4 file with a video stream)"),
        )
    };
    if !path.is_file() {
        return Err(DatasetError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such video file"),
        ));
    }
    let input = ffmpeg_next::format::input(path).map_err(|e| ffmpeg_error("cannot open", e))?;
    let stream = input
        .streams()
        .best(ffmpeg_next::media::Type::Video)
        .ok_or_else(|| DatasetError::invalid(path, "no video stream in the file"))?;
    let parameters = stream.parameters();
    let codec = parameters.id();
    let decoder = ffmpeg_next::codec::context::Context::from_parameters(parameters)
        .and_then(|context| context.decoder().video())
        .map_err(|e| ffmpeg_error("cannot read codec parameters", e))?;
    let pix_fmt = decoder.format();
    let rate = stream.avg_frame_rate();
    let fps = if rate.denominator() != 0 { f64::from(rate) } else { 0.0 };
    let time_base = f64::from(stream.time_base());
    let duration_s = if stream.duration() > 0 {
        stream.duration() as f64 * time_base
    } else {
        input.duration() as f64 / f64::from(ffmpeg_next::ffi::AV_TIME_BASE)
    };
    Ok(VideoStreamInfo {
        codec: format!("{codec:?}").to_lowercase(),
        width: decoder.width(),
        height: decoder.height(),
        pix_fmt: pix_fmt
            .descriptor()
            .map(|d| d.name().to_string())
            .unwrap_or_else(|| "none".into()),
        fps,
        frames: stream.frames().max(0) as u64,
        duration_s,
    })
}
