//! What the model's input looks like (cameras, state and action widths) and a synthetic batch
//! of that shape.

use std::path::{Path, PathBuf};

use crate::dataset::{Info, Resolution};
use crate::loader::batch::{Batch, BatchData, BatchTensor, ImageFormat};

/// One camera feed: its batch key and image shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CameraShape {
    /// The batch key, e.g. `observation.image` or `observation.images.cam_high`.
    pub key: String,
    /// Channels (3 for RGB).
    pub channels: usize,
    /// Image height in pixels.
    pub height: usize,
    /// Image width in pixels.
    pub width: usize,
}

/// Why a dataset cannot feed the diffusion policy, naming the dataset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{dataset}: {problem}")]
pub struct ShapesError {
    /// The dataset's root.
    pub dataset: PathBuf,
    /// What it lacks.
    pub problem: MissingInput,
}

/// What a dataset lacks for the diffusion policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MissingInput {
    /// A feature the policy reads (`observation.state`, `action`).
    #[error("the dataset has no `{0}` feature, which the policy needs")]
    Feature(String),
    /// No video or image feature.
    #[error("the dataset has no camera (video or image feature)")]
    Camera,
    /// Its features were not read: where the step is a stand-in (a time), which needs none.
    #[error(
        "the dataset's features were not read: the step is a stand-in of fixed or replayed time"
    )]
    Unread,
}

/// The model-facing description of a dataset's features.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyShapes {
    /// The cameras, in the order their features are concatenated.
    pub cameras: Vec<CameraShape>,
    /// Width of `observation.state`.
    pub state_dim: usize,
    /// Width of `action`.
    pub action_dim: usize,
}

impl PolicyShapes {
    /// The shapes a dataset's features give: every video and image feature is a camera (at
    /// `resolution` `(height, width)` when the loader resizes, else its native size), and the
    /// widths of `observation.state` and `action`. `dataset` (the root) names the dataset in
    /// the error.
    pub fn from_info(
        dataset: &Path,
        info: &Info,
        resolution: Resolution,
    ) -> Result<Self, ShapesError> {
        let missing = |problem| ShapesError { dataset: dataset.to_path_buf(), problem };
        let width_of = |key: &str| {
            info.feature(key)
                .map(|f| f.width())
                .ok_or_else(|| missing(MissingInput::Feature(key.to_string())))
        };
        let cameras: Vec<CameraShape> = info
            .features
            .iter()
            .filter_map(|f| Some((f, f.image?)))
            .map(|(f, image)| {
                let (height, width) = resolution.size().unwrap_or((image.height, image.width));
                CameraShape {
                    key: f.name.clone(),
                    channels: image.channels as usize,
                    height: height as usize,
                    width: width as usize,
                }
            })
            .collect();
        if cameras.is_empty() {
            return Err(missing(MissingInput::Camera));
        }
        Ok(PolicyShapes {
            cameras,
            state_dim: width_of(STATE_KEY)?,
            action_dim: width_of(ACTION_KEY)?,
        })
    }

    /// PushT: one 96×96 RGB camera (`observation.image`), state and action of dimension 2.
    pub fn pusht() -> Self {
        PolicyShapes {
            cameras: vec![CameraShape {
                key: "observation.image".into(),
                channels: 3,
                height: 96,
                width: 96,
            }],
            state_dim: 2,
            action_dim: 2,
        }
    }
}

/// Key of the state in a batch.
pub const STATE_KEY: &str = "observation.state";
/// Key of the action chunk in a batch.
pub const ACTION_KEY: &str = "action";
/// Key of the action pad mask in a batch.
pub const ACTION_PAD_KEY: &str = "action_is_pad";

/// A deterministic batch of `batch_size` samples shaped like `shapes` over a window of
/// `n_obs_steps` observations and `horizon` actions: pseudo-random pixels, state and actions
/// in [0, 1], no padding. The same `seed` gives the same batch.
pub fn synthetic_batch(
    shapes: &PolicyShapes,
    n_obs_steps: usize,
    horizon: usize,
    batch_size: usize,
    format: ImageFormat,
    seed: u64,
) -> Batch {
    let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut tensors = std::collections::BTreeMap::new();
    for cam in &shapes.cameras {
        let shape = vec![batch_size, n_obs_steps, cam.channels, cam.height, cam.width];
        let n: usize = shape.iter().product();
        let data = match format {
            ImageFormat::U8 => BatchData::U8((0..n).map(|_| (rng.next() >> 56) as u8).collect()),
            ImageFormat::F32 => BatchData::F32((0..n).map(|_| rng.unit()).collect()),
        };
        tensors.insert(cam.key.clone(), BatchTensor { shape, data });
    }
    let mut floats = |shape: Vec<usize>| {
        let n = shape.iter().product();
        BatchTensor { data: BatchData::F32((0..n).map(|_| rng.unit()).collect()), shape }
    };
    tensors.insert(STATE_KEY.into(), floats(vec![batch_size, n_obs_steps, shapes.state_dim]));
    tensors.insert(ACTION_KEY.into(), floats(vec![batch_size, horizon, shapes.action_dim]));
    tensors.insert(
        ACTION_PAD_KEY.into(),
        BatchTensor {
            shape: vec![batch_size, horizon],
            data: BatchData::Bool(vec![false; batch_size * horizon]),
        },
    );
    Batch { size: batch_size, tensors }
}

/// xorshift64*: enough randomness for synthetic pixels, no dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}
