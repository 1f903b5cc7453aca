//! What the LeRobot driver says back, one JSON line at a time: each line's [`Event`], an
//! `error`'s [`ErrorKind`], and the `ready` and `result` lines' contents (the versions, a
//! `load`'s run, a step's times, what a lerobot-train run built).

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

/// What a line of the driver's stdout says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// It built what it measures.
    Ready,
    /// A measured batch, where the request named a stop file.
    Step,
    /// It is still at work (at least every 30 s).
    Alive,
    /// The request's answer: the last line of a request.
    Result,
    /// The request failed: the last line of a request.
    Error,
}

impl Event {
    /// The event of a message; None for a line that is no message of the driver's.
    pub fn of(message: &Json) -> Option<Self> {
        Some(match message.get("event")?.as_str()? {
            "ready" => Self::Ready,
            "step" => Self::Step,
            "alive" => Self::Alive,
            "result" => Self::Result,
            "error" => Self::Error,
            _ => return None,
        })
    }
}

/// Whose fault an `error` is, as the driver tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// LeRobot (or PyTorch) raised: its exception's type and message.
    Lerobot,
    /// The Python has no LeRobot or no torch.
    Environment,
    /// A LeRobot version the driver does not drive, or that lacks what was asked.
    Version,
    /// A knob this LeRobot cannot set.
    Knob,
    /// lerobot-train's arguments, refused by LeRobot's parser or by feedbench (a download).
    Arguments,
    /// feedbench's reader is not installed in that Python.
    Reader,
}

impl ErrorKind {
    /// Every kind, in the order the driver's `ErrorKind` lists them.
    pub const ALL: [ErrorKind; 6] = [
        Self::Lerobot,
        Self::Environment,
        Self::Version,
        Self::Knob,
        Self::Arguments,
        Self::Reader,
    ];

    /// The kind as an `error` message names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lerobot => "lerobot",
            Self::Environment => "environment",
            Self::Version => "version",
            Self::Knob => "knob",
            Self::Arguments => "arguments",
            Self::Reader => "reader",
        }
    }

    /// The kind an `error` message names (`lerobot` where it names none or another).
    pub fn of(message: &Json) -> Self {
        let named = message.get("kind").and_then(Json::as_str);
        Self::ALL.into_iter().find(|kind| Some(kind.name()) == named).unwrap_or(Self::Lerobot)
    }
}

/// The versions the driver ran with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LerobotVersions {
    /// LeRobot's version.
    pub lerobot: String,
    /// PyTorch's.
    pub torch: String,
    /// Python's.
    pub python: String,
    /// The interpreter.
    pub executable: String,
    /// The video backend LeRobot chose (None without video).
    #[serde(default)]
    pub video_backend: Option<String>,
    /// What lerobot-train built, where the loader is its run's (`--lerobot-train`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot_train: Option<BuiltRun>,
}

/// What LeRobot's loader measured in one `load` request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LerobotRun {
    /// Batches measured.
    pub batches: usize,
    /// Samples in them.
    pub samples: usize,
    /// Bytes of their tensors.
    pub bytes: u64,
    /// Wall time of the measured batches, seconds.
    pub wall_s: f64,
    /// Wall ms from one measured batch to the next (step included).
    pub batch_ms: Vec<f64>,
    /// Per batch, ms the main process waited for it.
    pub wait_ms: Vec<f64>,
    /// Per batch, ms of its copy to the fed step's device (empty without a step).
    #[serde(default)]
    pub h2d_ms: Vec<f64>,
    /// CPU seconds of the main process over the measured batches.
    pub main_cpu_s: f64,
    /// CPU seconds of the worker processes over them.
    pub workers_cpu_s: f64,
    /// Peak memory of the main process and its workers together, bytes.
    pub peak_memory_bytes: u64,
    /// `pss` (proportional set size: shared pages counted once) or `rss`.
    pub memory: String,
    /// CPU seconds the driver spent measuring memory (its cost to the loader it measures);
    /// 0 from drivers before it said.
    #[serde(default)]
    pub observer_cpu_s: f64,
    /// Seconds from starting the iterator to the first batch (workers' start-up included).
    pub first_batch_s: f64,
    /// Per measured batch, which batch of its epoch it was (0: the first); empty from drivers
    /// before they said.
    #[serde(default)]
    pub epoch_position: Vec<usize>,
    /// The parts of each step, where the step was lerobot-train's policy's.
    #[serde(default)]
    pub parts: Option<StepParts>,
    /// Per top-level module of that policy, its forward ms each step, in the policy's order.
    #[serde(default)]
    pub modules_ms: serde_json::Map<String, Json>,
    /// The most device memory a step took (CUDA).
    #[serde(default)]
    pub peak_device_bytes: Option<u64>,
    /// Reads of the PSS of the driver's process and of each of its workers, before and after
    /// the measured batches: (seconds since the first, the driver's bytes, each worker's
    /// bytes, the anonymous bytes of them all).
    #[serde(default)]
    pub memory_samples: Vec<(f64, u64, Vec<u64>, u64)>,
    /// The driver's rank among the ranks measured at once (0 alone).
    #[serde(default)]
    pub rank: usize,
    /// The driver's process id; 0 from drivers before they said.
    #[serde(default)]
    pub pid: u32,
}

/// A lerobot-train run's step alone: its policy's `update_policy` on one batch, again and again.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PolicySteps {
    /// Each measured step.
    pub steps: Vec<PolicyStep>,
    /// The policy's parameters.
    pub parameters: usize,
    /// Where it ran, as PyTorch names it (`cpu`, `cuda:0`).
    pub device: String,
    /// Samples in the batch.
    pub batch: usize,
    /// accelerate's mixed precision: `no`, `bf16` or `fp16`.
    pub mixed_precision: String,
    /// PyTorch's intra-op threads.
    pub threads: i32,
    /// The last step's loss.
    pub loss: f64,
    /// The most device memory a step took (CUDA).
    #[serde(default)]
    pub peak_device_bytes: Option<u64>,
}

/// One step of a [`PolicySteps`], ms.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct PolicyStep {
    /// The hand-over: uint8 cameras to float32, the pre-processor.
    pub h2d_ms: f64,
    /// The policy's forward and loss.
    pub forward_ms: f64,
    /// The backward pass and the grad clip.
    pub backward_ms: f64,
    /// The optimizer and scheduler steps.
    pub optimizer_ms: f64,
    /// The whole `update_policy`.
    pub update_ms: f64,
}

/// The parts of lerobot-train's `update_policy`, ms per measured step.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StepParts {
    /// The policy's forward and loss.
    pub forward_ms: Vec<f64>,
    /// The backward pass through accelerate and the grad clip.
    pub backward_ms: Vec<f64>,
    /// The optimizer and scheduler steps.
    pub optimizer_ms: Vec<f64>,
}

/// One measured batch of a `load` as the driver reports it while it runs, ms.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct DriverStep {
    /// Waiting for the batch.
    pub wait_ms: f64,
    /// Its copy to the fed step's device (0 without a step).
    pub h2d_ms: f64,
    /// The whole iteration: the wait, the copy and the step's compute.
    pub whole_ms: f64,
}

/// What lerobot-train built for the arguments, as LeRobot's constructors were given it
/// (its methods, what feedbench reads of it, are in [`super::super::run_args`]): the
/// policy and its device, the dataset's, the sampler's and the DataLoader's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuiltRun {
    /// The policy's type (`act`, `diffusion`).
    pub policy: String,
    /// `cpu` or `cuda`: where its step runs.
    pub device: String,
    /// Frames in the training dataset.
    pub num_frames: usize,
    /// Episodes in it.
    pub num_episodes: usize,
    /// `LeRobotDataset`'s arguments.
    pub dataset: Json,
    /// `EpisodeAwareSampler`'s arguments; None where the DataLoader shuffles (LeRobot before 0.6,
    /// a policy without `drop_n_last_frames`).
    #[serde(default)]
    pub sampler: Option<Json>,
    /// `DataLoader`'s arguments.
    pub dataloader: Json,
    /// The prefetch lerobot-train gives its workers (its config's `prefetch_factor`; 2 before
    /// LeRobot 0.6), known where the DataLoader has no worker to give it to.
    #[serde(default)]
    pub worker_prefetch_factor: Option<usize>,
    /// torch's backend settings lerobot-train made before it built the run (cuDNN's
    /// `benchmark` and `deterministic`, TF32 matmuls), read back: a step measured without
    /// them on CUDA is not the one lerobot-train takes.
    #[serde(default)]
    pub backend: Option<Json>,
}
