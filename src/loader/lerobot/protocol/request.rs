//! What feedbench asks its LeRobot driver: a [`Request`], one variant per command with only
//! that command's fields, sent as one JSON object tagged by its `command` (the driver's
//! `protocol.py` declares the same shapes, a `TypedDict` each); what a request reads (a
//! dataset with both loaders' knobs, a lerobot-train run, or nothing on disk), and the step a
//! `load` feeds; and the argument that makes the driver a session.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// The driver's command-line argument that makes it a session: requests one a line on its
/// stdin until it closes, rather than one in the file named there.
pub const SESSION_ARGUMENT: &str = "--session";

/// One request, tagged by `command` on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Request {
    /// Measure a loader, alone or feeding a step.
    Load(LoadRequest),
    /// Save batches as `.npy` files.
    Batches(BatchesRequest),
    /// The episode-aware sampler's indices.
    Sampler(SamplerRequest),
    /// Given batches loaded, each item digested.
    Digests(DigestsRequest),
    /// A training step alone: LeRobot's DiffusionPolicy, or a lerobot-train run's policy.
    Model(ModelRequest),
    /// What a lerobot-train run builds.
    Describe(DescribeRequest),
}

impl Request {
    /// The lerobot-train run the request reads, if it reads one: such requests go to the
    /// session that keeps the run built.
    pub fn run(&self) -> Option<&RunRequest> {
        match self {
            Request::Load(LoadRequest { source: Source::Run(run), .. })
            | Request::Batches(BatchesRequest::First { run, .. })
            | Request::Model(ModelRequest::Run { run, .. })
            | Request::Describe(DescribeRequest { run }) => Some(run),
            Request::Load(LoadRequest { source: Source::Dataset(_), .. })
            | Request::Batches(BatchesRequest::Indices { .. })
            | Request::Sampler(_)
            | Request::Digests(_)
            | Request::Model(ModelRequest::Policy { .. }) => None,
        }
    }
}

/// `load`: a loader's batches measured, `warmup` first unmeasured, each feeding `step`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRequest {
    /// Whose loader: a dataset's, or a lerobot-train run's.
    #[serde(flatten)]
    pub source: Source,
    /// Measured batches.
    pub batches: usize,
    /// Unmeasured batches first.
    pub warmup: usize,
    /// The step each batch feeds; None for the loader alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepRequest>,
    /// A file whose appearance ends the measurement (each batch is then reported as a `step`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_file: Option<PathBuf>,
    /// Batches of global frame indices the loader reads, epoch after epoch, in place of its
    /// sampler's (a dataset's loader; `compare --readers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<Vec<Vec<usize>>>,
}

/// Whose loader a `load` measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Source {
    /// `LeRobotDataset` and a DataLoader with both loaders' knobs (`--loader lerobot`).
    Dataset(DatasetRequest),
    /// The DataLoader a lerobot-train run builds (`--lerobot-train`).
    Run(RunRequest),
}

/// `batches`: a loader's batches saved as `.npy` files under `out`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BatchesRequest {
    /// LeRobot's loader over a dataset, the batches given as lists of global indices.
    Indices {
        /// The dataset and knobs.
        #[serde(flatten)]
        dataset: DatasetRequest,
        /// The batches.
        index_batches: Vec<Vec<usize>>,
        /// Where they go.
        out: PathBuf,
    },
    /// A lerobot-train run's first `count` batches, in its order.
    First {
        /// The run.
        #[serde(flatten)]
        run: RunRequest,
        /// How many.
        count: usize,
        /// Where they go.
        out: PathBuf,
    },
}

/// `sampler`: the episode-aware sampler's indices over a dataset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerRequest {
    /// The dataset and knobs.
    #[serde(flatten)]
    pub dataset: DatasetRequest,
    /// Whether shuffled.
    pub shuffle: bool,
}

/// `digests`: LeRobot's loader's batches of these global indices, each item digested as
/// [`crate::loader::batch::Batch::item_digests`] digests the native loader's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestsRequest {
    /// The dataset and knobs.
    #[serde(flatten)]
    pub dataset: DatasetRequest,
    /// The batches.
    pub index_batches: Vec<Vec<usize>>,
    /// The keys digested, in order (the native loader's batch's).
    pub keys: Vec<String>,
    /// The camera keys, digested as the uint8 values of their frames.
    pub cameras: Vec<String>,
}

/// `model`: a training step alone, `warmup` steps then `steps` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ModelRequest {
    /// LeRobot's DiffusionPolicy on resident random batches (`model --impl lerobot`).
    Policy {
        /// The policy and its batches.
        #[serde(flatten)]
        policy: PolicyRequest,
        /// Measured steps per row.
        steps: usize,
        /// Unmeasured steps first.
        warmup: usize,
    },
    /// A lerobot-train run's own `update_policy` on one of its batches.
    Run {
        /// The run.
        #[serde(flatten)]
        run: RunRequest,
        /// Measured steps.
        steps: usize,
        /// Unmeasured steps first.
        warmup: usize,
    },
}

/// `describe`: what a lerobot-train run builds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DescribeRequest {
    /// The run.
    #[serde(flatten)]
    pub run: RunRequest,
}

/// LeRobot's DiffusionPolicy step on resident random batches of the given shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRequest {
    /// feedbench's diffusion preset, in DiffusionConfig's field names.
    pub config: Json,
    /// Each camera.
    pub cameras: Vec<CameraShape>,
    /// The state's width.
    pub state_dim: usize,
    /// The action's width.
    pub action_dim: usize,
    /// A row per batch size and dtype.
    pub batch_sizes: Vec<usize>,
    /// `f32`, `bf16`.
    pub dtypes: Vec<String>,
    /// How the cameras are handed over: `u8` or `f32`.
    pub images: String,
    /// The device, as PyTorch names it.
    pub device: String,
    /// The seed of the policy and the batches.
    pub seed: u64,
    /// PyTorch's intra-op threads; None for its default.
    pub threads: Option<i32>,
}

/// A camera of a [`PolicyRequest`]: its key and its frames' shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CameraShape {
    /// The feature's key.
    pub key: String,
    /// Channels.
    pub channels: usize,
    /// Height, pixels.
    pub height: usize,
    /// Width, pixels.
    pub width: usize,
}

/// LeRobot's dataset and DataLoader as both loaders' knobs set them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetRequest {
    /// The dataset's root.
    pub root: PathBuf,
    /// Its episodes; None for all.
    pub episodes: Option<Vec<usize>>,
    /// The window: feature → seconds.
    pub delta_timestamps: BTreeMap<String, Vec<f64>>,
    /// Frames the episode-aware sampler drops at each episode's end.
    pub drop_n_last_frames: usize,
    /// `episode-aware`, `shuffled` or `sequential`.
    pub sampler: String,
    /// The sampler's seed.
    pub seed: u64,
    /// The DataLoader's keywords the knobs set (`num_workers`, `prefetch_factor`, …), as the
    /// knob table's `dataloader` column names them: the driver passes them on as they are.
    pub dataloader: BTreeMap<String, Json>,
    /// Camera frames as uint8 (`return_uint8`).
    pub uint8: bool,
    /// LeRobot's video backend; None for its default.
    pub video_backend: Option<String>,
}

/// Whose reader is a lerobot-train run's dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reader {
    /// LeRobot's `LeRobotDataset`, as lerobot-train builds it.
    #[default]
    Lerobot,
    /// feedbench's reader in its place, as feedbench-lerobot-train runs it.
    Feedbench,
}

/// A lerobot-train run, with feedbench's knobs over its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// lerobot-train's arguments, one per element.
    pub lerobot_train: Vec<String>,
    /// The knobs feedbench sets over the arguments' (its DataLoader's names); none for the
    /// arguments' own.
    pub overrides: Overrides,
    /// Whose reader is the run's dataset.
    pub reader: Reader,
    /// Ranks measured at once, a driver each in one process group (1: the run alone).
    pub ranks: usize,
}

/// The DataLoader knobs feedbench sets over a lerobot-train run's own, by their `DataLoader`
/// keywords (the knob table's `dataloader` column): `{"num_workers": 2, …}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Overrides(pub BTreeMap<String, Json>);

/// The step a `load` feeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StepRequest {
    /// A fixed cost on a device, after the batch's copy to it.
    Fixed {
        /// The step's compute, ms (their mean where `sequence_ms` gives each step's).
        compute_ms: f64,
        /// The device, as PyTorch names it.
        device: String,
        /// Each step's compute in turn, warm-up included, ms, where the step varies (a
        /// replayed one); the driver starts again from the first after the last.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sequence_ms: Option<Vec<f64>>,
    },
    /// A lerobot-train run's own `update_policy`.
    Policy {
        /// Always true.
        policy: bool,
    },
}
