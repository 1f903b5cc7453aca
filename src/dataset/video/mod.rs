//! Video features: reading the streams of LeRobot's mp4 files with FFmpeg.

pub mod probe;

pub use probe::{probe, VideoStreamInfo};
