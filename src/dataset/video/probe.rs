//! What a video file really holds (codec, size, pixel format), read from the file itself:
//! info.json describes episode 0 only.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Once;

use ffmpeg_next::{ffi, format};

use serde::Serialize;

use crate::dataset::error::{DatasetError, Result};

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

/// Opens `path` with FFmpeg's mp4 demuxer and reads its stream parameters.
///
/// The demuxer is named rather than probed: probing offers the file to every format FFmpeg
/// was built with, which calls into their libraries (libgme, libopenmpt), and those are left
/// out of the release bundle. The path goes to FFmpeg as bytes, so any path works.
pub fn open_mp4(path: &Path) -> std::result::Result<format::context::Input, ffmpeg_next::Error> {
    init_ffmpeg();
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| ffmpeg_next::Error::Other { errno: libc::EINVAL })?;
    // SAFETY: the demuxer name and the path are NUL-terminated strings that outlive the calls;
    // av_find_input_format returns a static description or null; on success
    // avformat_open_input hands over a context that `Input` then owns and frees, and on
    // failure it frees the context itself.
    unsafe {
        let demuxer = ffi::av_find_input_format(c"mp4".as_ptr());
        if demuxer.is_null() {
            return Err(ffmpeg_next::Error::DemuxerNotFound);
        }
        let mut context = std::ptr::null_mut();
        match ffi::avformat_open_input(&mut context, c_path.as_ptr(), demuxer, std::ptr::null_mut())
        {
            0 => {}
            e => return Err(ffmpeg_next::Error::from(e)),
        }
        let input = format::context::Input::wrap(context);
        match ffi::avformat_find_stream_info(context, std::ptr::null_mut()) {
            e if e < 0 => Err(ffmpeg_next::Error::from(e)),
            _ => Ok(input),
        }
    }
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
    let input = open_mp4(path).map_err(|e| ffmpeg_error("cannot open", e))?;
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
