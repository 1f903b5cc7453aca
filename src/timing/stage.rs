//! The stages feedbench records, by path: one definition for the code that records them (the
//! loader's workers, the video decoder, the trainer) and the code that reads them (phases,
//! the doctor, tests). A path's parent is the stage it runs inside.

/// An epoch's sample order, made by the first thread that needs it.
pub const SAMPLER: &str = "sampler";
/// The consumer blocked on the loader's queues.
pub const WAIT: &str = "wait";
/// One batch, built by a worker (or the consumer with no workers).
pub const BATCH: &str = "batch";
/// Parquet rows and windows of a batch's samples.
pub const PARQUET: &str = "batch/parquet";
/// Camera frames of video features: opening, seeking and demuxing, with the two below.
pub const VIDEO: &str = "batch/video";
/// The video codec; one call per frame out of the codec.
pub const DECODE: &str = "batch/video/decode";
/// Decoded frames to RGB (and resizing); one call per frame written.
pub const CONVERT: &str = "batch/video/convert";
/// Image features (PNG/JPEG in parquet).
pub const IMAGE: &str = "batch/image";
/// Parquet values into the batch.
pub const COLLATE: &str = "batch/collate";
/// One training step (device time, synchronised).
pub const STEP: &str = "step";
/// The batch's host→device copy.
pub const STEP_H2D: &str = "step/h2d";
/// Forward pass and loss.
pub const STEP_FORWARD: &str = "step/forward";
/// Backward pass.
pub const STEP_BACKWARD: &str = "step/backward";
/// Gradient clipping, optimizer step, zeroing the gradients.
pub const STEP_OPTIMIZER: &str = "step/optimizer";

/// The stages whose CPU is the loader's: the batches, the sampler and the consumer's wait.
pub const LOADER: [&str; 3] = [BATCH, SAMPLER, WAIT];
