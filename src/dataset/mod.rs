//! The LeRobot dataset format: metadata, Parquet frames, video and image features, delta
//! windows. Knows nothing about batching or timing.

pub mod error;
pub mod image;
pub mod video;

pub use error::{DatasetError, Result};
