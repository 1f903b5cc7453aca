//! Video features: reading the streams of LeRobot's mp4 files with FFmpeg (and feedbench's own
//! raw frame files).

use std::path::Path;

use crate::dataset::error::{DatasetError, Result};

pub mod access;
pub mod boxes;
pub mod cache;
pub mod convert;
pub mod decode;
pub mod planes;
pub mod prefetch;
pub mod probe;
pub mod quality;
pub mod raw;
pub mod table;

pub use convert::FrameBuffer;
pub use decode::{DecodeOptions, FrameDecoder, VideoDecoder};
pub use prefetch::Prefetched;
pub use probe::{open_mp4, probe, VideoStreamInfo};
pub use table::{Mp4Sample, SampleSpan, VideoCodec, VideoFile};

/// Checks that `rgb` holds one packed RGB24 frame of `height × width`, for a writer of `path`.
pub fn check_rgb_frame(path: &Path, rgb: &[u8], height: u32, width: u32) -> Result<()> {
    if rgb.len() == 3 * height as usize * width as usize {
        return Ok(());
    }
    Err(DatasetError::invalid(
        path,
        format!("a frame of {} bytes, expected {height}×{width}×3", rgb.len()),
    ))
}
