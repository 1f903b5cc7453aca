//! Video features: reading the streams of LeRobot's mp4 files with FFmpeg.

pub mod convert;
pub mod decode;
pub mod probe;
pub mod quality;
pub mod table;

pub use convert::FrameBuffer;
pub use decode::{DecodeOptions, FrameDecoder, VideoDecoder};
pub use probe::{probe, VideoStreamInfo};
pub use table::{Mp4Sample, VideoCodec, VideoFile};
