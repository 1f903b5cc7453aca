//! What feedbench asks its LeRobot driver: a [`Request`] (one JSON object, every key a field
//! here, read by the driver by these names), what it reads (a dataset with both loaders' knobs,
//! or a lerobot-train run), how a `load` measures and what step it feeds; and the argument that
//! makes the driver a session.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value as Json;

/// The driver's command-line argument that makes it a session: requests one a line on its
/// stdin until it closes, rather than one in the file named there.
pub const SESSION_ARGUMENT: &str = "--session";

/// What a request asks the driver to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// Measure the loader (`Request::load`), alone or feeding a step.
    Load,
    /// Save batches as `.npy` files.
    Batches,
    /// The episode-aware sampler's indices.
    Sampler,
    /// A training step alone: LeRobot's DiffusionPolicy, or a lerobot-train run's policy.
    Model,
    /// What a lerobot-train run builds.
    Describe,
}

/// One request: the command, what it reads, and the command's own settings.
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    /// What to do.
    pub command: Command,
    /// What it reads: a dataset with both loaders' knobs, or a lerobot-train run.
    #[serde(flatten)]
    pub reads: Reads,
    /// How a `load` measures.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSettings>,
    /// A policy's step alone (`model` of a lerobot-train run): measured steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<usize>,
    /// Unmeasured steps first (`model`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<usize>,
    /// `batches` of LeRobot's loader: the batches, as lists of global indices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_batches: Option<Vec<Vec<usize>>>,
    /// `batches` of a lerobot-train run: how many of its first batches.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// `batches`: where they go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out: Option<PathBuf>,
    /// `sampler`: whether shuffled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<bool>,
}

impl Request {
    /// `command` over what `reads` reads, with no setting of its own yet.
    pub fn new(command: Command, reads: Reads) -> Self {
        Self {
            command,
            reads,
            load: None,
            steps: None,
            warmup: None,
            index_batches: None,
            count: None,
            out: None,
            shuffle: None,
        }
    }

    /// The lerobot-train run the request reads, if it reads one.
    pub fn run(&self) -> Option<&RunRequest> {
        match &self.reads {
            Reads::Run(run) => Some(run),
            Reads::Dataset(_) | Reads::Policy(_) => None,
        }
    }
}

/// What a request reads.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Reads {
    /// `LeRobotDataset` at a root, with both loaders' knobs (`--loader lerobot`).
    Dataset(DatasetRequest),
    /// A lerobot-train run, built from its arguments (`--lerobot-train`).
    Run(RunRequest),
    /// Nothing on disk: LeRobot's DiffusionPolicy on random batches (`model --impl lerobot`).
    Policy(PolicyRequest),
}

/// LeRobot's DiffusionPolicy step on resident random batches of the given shapes.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRequest {
    /// feedbench's diffusion preset, in DiffusionConfig's field names.
    pub config: Json,
    /// Each camera: `key`, `channels`, `height`, `width`.
    pub cameras: Vec<Json>,
    /// The state's width.
    pub state_dim: usize,
    /// The action's width.
    pub action_dim: usize,
    /// A row per batch size and dtype.
    pub batch_sizes: Vec<usize>,
    /// `f32`, `bf16`.
    pub dtypes: Vec<&'static str>,
    /// How the cameras are handed over: `u8` or `f32`.
    pub images: &'static str,
    /// The device, as PyTorch names it.
    pub device: String,
    /// The seed of the policy and the batches.
    pub seed: u64,
    /// PyTorch's intra-op threads; None for its default.
    pub threads: Option<i32>,
}

/// LeRobot's dataset and DataLoader as both loaders' knobs set them.
#[derive(Debug, Clone, Serialize)]
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
    pub sampler: &'static str,
    /// The sampler's seed.
    pub seed: u64,
    /// The DataLoader's keywords the knobs set (`num_workers`, `prefetch_factor`, …), as the
    /// knob table's `dataloader` column names them: the driver passes them on as they are.
    pub dataloader: BTreeMap<&'static str, Json>,
    /// Camera frames as uint8 (`return_uint8`).
    pub uint8: bool,
    /// LeRobot's video backend; None for its default.
    pub video_backend: Option<&'static str>,
}

/// A lerobot-train run, with feedbench's knobs over its own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRequest {
    /// lerobot-train's arguments, one per element.
    pub lerobot_train: Vec<String>,
    /// The knobs feedbench sets over the arguments' (its DataLoader's names); none for the
    /// arguments' own.
    pub overrides: Overrides,
    /// Whose reader is the run's dataset: `lerobot` or `feedbench`.
    pub reader: &'static str,
}

/// The DataLoader knobs feedbench sets over a lerobot-train run's own, by their `DataLoader`
/// keywords (the knob table's `dataloader` column): `{"num_workers": 2, …}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(transparent)]
pub struct Overrides(pub BTreeMap<&'static str, Json>);

/// How a `load` measures: warm-up, measured batches, what they feed, and where the driver
/// looks for feedbench's word to stop.
#[derive(Debug, Clone, Serialize)]
pub struct LoadSettings {
    /// Measured batches.
    pub batches: usize,
    /// Unmeasured batches first.
    pub warmup: usize,
    /// The step each batch feeds; None for the loader alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<StepRequest>,
    /// A file whose appearance ends the measurement (each batch is then reported as a `step`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_file: Option<PathBuf>,
}

/// The step a `load` feeds.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum StepRequest {
    /// A fixed cost on a device, after the batch's copy to it.
    Fixed {
        /// The step's compute, ms.
        compute_ms: f64,
        /// The device, as PyTorch names it.
        device: String,
    },
    /// A lerobot-train run's own `update_policy`.
    Policy {
        /// Always true.
        policy: bool,
    },
}
