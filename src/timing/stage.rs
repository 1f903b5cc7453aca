//! The stages feedbench records, by path: one definition for the code that records them (the
//! loader's workers, the video decoder, the trainer) and the code that reads them (phases,
//! the report's advice, tests). A path's parent is the stage it runs inside. [`Stage`] names the parts
//! of the loader's CPU time that measurements compare and reports show.

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
/// Inside [`CONVERT`]: the RGB rows split into the batch's CHW planes (and scaled to float32);
/// one call per frame written. The rest of `convert` is swscale's (YUV to RGB, resizing).
pub const SPLIT: &str = "batch/video/convert/split";
/// Frames copied from the decoded-frame cache (the loader's `cache`); one call per frame.
pub const CACHE: &str = "batch/video/cache";
/// Frames kept in the decoded-frame cache after decoding (its memory taken, the frame copied
/// in); one call per frame kept.
pub const CACHE_FILL: &str = "batch/video/cache_fill";
/// Image features (PNG/JPEG in parquet).
pub const IMAGE: &str = "batch/image";
/// Parquet values into the batch.
pub const COLLATE: &str = "batch/collate";
/// A batch's tensors copied into page-locked memory for a CUDA step, on a thread of their own
/// ahead of the trainer (a DataLoader's pin-memory thread).
pub const PIN: &str = "pin";
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

/// A part of the loader's CPU time, from its timing tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// `batch/video/decode`: the video codec.
    Decode,
    /// `batch/video/convert`: frames to RGB (and resizing).
    Convert,
    /// `batch/video/cache` and `batch/video/cache_fill`: frames copied from the decoded-frame
    /// cache, and kept in it after decoding.
    Cache,
    /// The rest of `batch/video`: opening, seeking, demuxing.
    VideoOther,
    /// `batch/image`: PNG/JPEG image features.
    Image,
    /// `batch/parquet`: rows and windows.
    Parquet,
    /// `batch/collate`: parquet values into the batch.
    Collate,
    /// The rest of `batch`.
    BatchOther,
    /// `sampler`: the epoch's order.
    Sampler,
    /// `wait`: the consumer blocked on the queues.
    Wait,
}

impl Stage {
    /// This stage's CPU ms per sample in one loader phase's tree; a rest stage
    /// ([`Stage::VideoOther`], [`Stage::BatchOther`]) is its parent less its children.
    pub fn cpu_ms_per_sample(self, tree: &crate::timing::TimingTree, samples: usize) -> f64 {
        let ms = |path: &str| {
            tree.get(path).map_or(0.0, |t| t.cpu.as_secs_f64() * 1e3) / samples.max(1) as f64
        };
        let (decode, convert, cache) = (ms(DECODE), ms(CONVERT), ms(CACHE) + ms(CACHE_FILL));
        let video = ms(VIDEO).max(decode + convert + cache);
        match self {
            Stage::Decode => decode,
            Stage::Convert => convert,
            Stage::Cache => cache,
            // The cache's copies and fills are its own stage, not seeks or demuxing.
            Stage::VideoOther => video - decode - convert - cache,
            Stage::Image => ms(IMAGE),
            Stage::Parquet => ms(PARQUET),
            Stage::Collate => ms(COLLATE),
            Stage::BatchOther => {
                let children = video + ms(IMAGE) + ms(PARQUET) + ms(COLLATE);
                (ms(BATCH) - children).max(0.0)
            }
            Stage::Sampler => ms(SAMPLER),
            Stage::Wait => ms(WAIT),
        }
    }

    /// Every stage, in timing-tree order.
    pub const ALL: [Stage; 10] = [
        Stage::Decode,
        Stage::Convert,
        Stage::Cache,
        Stage::VideoOther,
        Stage::Image,
        Stage::Parquet,
        Stage::Collate,
        Stage::BatchOther,
        Stage::Sampler,
        Stage::Wait,
    ];

    /// A short name (also the CSV column suffix).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Decode => "decode",
            Stage::Convert => "convert",
            Stage::Cache => "cache",
            Stage::VideoOther => "video_other",
            Stage::Image => "image",
            Stage::Parquet => "parquet",
            Stage::Collate => "collate",
            Stage::BatchOther => "batch_other",
            Stage::Sampler => "sampler",
            Stage::Wait => "wait",
        }
    }
}
