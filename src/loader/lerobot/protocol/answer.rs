//! What the LeRobot driver says back, one JSON line at a time: each line's [`Event`], an
//! `error`'s [`DriverError`], and the `ready` and `result` lines' contents (the versions, a
//! `load`'s run, a step's times, what a lerobot-train run built), each the shape of a
//! `TypedDict` of the driver's `protocol.py` (`ANSWERS`). Every key the driver always says is
//! required here, a missing one an error naming it (a key whose value may be null too:
//! [`nullable`]); `#[serde(default)]` marks the few the driver says only at times.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value as Json;

use crate::loader::sampler::SamplerOrder;

/// A key the driver always says, whose value may be null: missing, it is an error naming the
/// key (serde would read a missing `Option` as None).
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::deserialize(deserializer)
}

/// What a line of the driver's stdout says: its `event`.
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
    /// Every event, in the order the driver's `ANSWERS` lists them.
    pub const ALL: [Event; 5] = [Self::Ready, Self::Step, Self::Alive, Self::Result, Self::Error];

    /// The event as a message names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Step => "step",
            Self::Alive => "alive",
            Self::Result => "result",
            Self::Error => "error",
        }
    }

    /// The event of a message; None for a line that is no message of the driver's.
    pub fn of(message: &Json) -> Option<Self> {
        let named = message.get("event")?.as_str()?;
        Self::ALL.into_iter().find(|event| event.name() == named)
    }
}

/// An `error`: whose fault, and what failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverError {
    /// Whose fault.
    pub kind: ErrorKind,
    /// What failed, in the driver's words.
    pub message: String,
}

/// Whose fault an `error` is, as the driver tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
}

/// A `ready`: the versions (with what a lerobot-train run built), and, where the request reads
/// such a run, the runs the driver built so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    /// The versions, and what the run built.
    #[serde(flatten)]
    pub versions: LerobotVersions,
    /// The runs the driver built so far, all told; said (optional on both sides) only where
    /// the request reads a lerobot-train run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_built: Option<RunBuilds>,
}

/// The lerobot-train runs drivers built, and the time building them took: a tune's cost
/// before its first measured step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RunBuilds {
    /// Runs built (LeRobot's parser and dataset, and where a step was asked the policy,
    /// pre-processor and optimizer): once per run, or once more per request that needs a run
    /// built afresh (the first batches of a run, in its order).
    pub runs: usize,
    /// Wall seconds building them took.
    pub seconds: f64,
}

impl std::ops::AddAssign for RunBuilds {
    fn add_assign(&mut self, other: Self) {
        self.runs += other.runs;
        self.seconds += other.seconds;
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
    #[serde(deserialize_with = "nullable")]
    pub video_backend: Option<String>,
    /// What lerobot-train built, where the loader is its run's (`--lerobot-train`): said
    /// (optional on both sides) only where the request reads a run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot_train: Option<BuiltRun>,
}

/// What LeRobot's loader measured in one `load` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub h2d_ms: Vec<f64>,
    /// CPU seconds of the main process over the measured batches.
    pub main_cpu_s: f64,
    /// CPU seconds of the worker processes over them.
    pub workers_cpu_s: f64,
    /// Peak memory of the main process and its workers together, bytes.
    pub peak_memory_bytes: u64,
    /// `pss` (proportional set size: shared pages counted once) or `rss`.
    pub memory: String,
    /// CPU seconds the driver spent measuring memory (its cost to the loader it measures).
    pub observer_cpu_s: f64,
    /// Seconds from starting the iterator to the first batch (workers' start-up included).
    pub first_batch_s: f64,
    /// Per measured batch, which batch of its epoch it was (0: the first).
    pub epoch_position: Vec<usize>,
    /// The parts of each step, where the step was a lerobot-train run's.
    #[serde(deserialize_with = "nullable")]
    pub parts: Option<StepParts>,
    /// Per top-level module of that policy, its forward ms each step, in the policy's order.
    pub modules_ms: serde_json::Map<String, Json>,
    /// The most device memory a step took (CUDA).
    #[serde(deserialize_with = "nullable")]
    pub peak_device_bytes: Option<u64>,
    /// Reads of the PSS of the driver's process and of each of its workers, before and after
    /// the measured batches: (seconds since the first, the driver's bytes, each worker's
    /// bytes, the anonymous bytes of them all).
    pub memory_samples: Vec<(f64, u64, Vec<u64>, u64)>,
    /// The driver's rank among the ranks measured at once (0 alone).
    pub rank: usize,
    /// The driver's process id.
    pub pid: u32,
    /// Distinct episodes of each measured batch (empty where the batches do not say them).
    #[serde(default)]
    pub episodes_per_batch: Vec<usize>,
    /// The batches delivered against those the DataLoader's batch sampler yielded, where it
    /// keeps them (LeRobot's plain loader; not a lerobot-train run's).
    #[serde(default, deserialize_with = "nullable")]
    pub sampler_order: Option<SamplerOrder>,
    /// The DataLoader's start taken apart, where the driver made it with workers (LeRobot's
    /// plain loader).
    #[serde(default, deserialize_with = "nullable")]
    pub startup: Option<Startup>,
}

/// A DataLoader's start taken apart: how its workers started, what each was sent, when each
/// started and gave its first batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Startup {
    /// `fork`, `spawn` or `forkserver`.
    pub start_method: String,
    /// Bytes of the dataset pickled to each worker; None under `fork` (nothing is sent).
    #[serde(deserialize_with = "nullable")]
    pub pickled_bytes: Option<u64>,
    /// The dataset's attribute that pickles largest.
    #[serde(deserialize_with = "nullable")]
    pub largest_part: Option<LargestPart>,
    /// Each worker, in order.
    pub workers: Vec<WorkerStart>,
    /// Where the installed `datasets` pickles more than its Arrow table to each worker.
    #[serde(deserialize_with = "nullable")]
    pub warning: Option<String>,
}

/// The dataset's attribute that pickles largest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LargestPart {
    /// Its name.
    pub name: String,
    /// Its bytes pickled.
    pub bytes: u64,
}

/// One worker's start, seconds from the loader's iterator made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerStart {
    /// Its id.
    pub worker: usize,
    /// Until its `worker_init_fn` ran: the process started, its imports, the dataset unpickled.
    #[serde(deserialize_with = "nullable")]
    pub started_s: Option<f64>,
    /// Until its first batch reached the main process.
    #[serde(deserialize_with = "nullable")]
    pub first_batch_s: Option<f64>,
}

/// A lerobot-train run's step alone: its policy's `update_policy` on one batch, again and again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    #[serde(deserialize_with = "nullable")]
    pub peak_device_bytes: Option<u64>,
}

/// One step of a [`PolicySteps`], ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepParts {
    /// The policy's forward and loss.
    pub forward_ms: Vec<f64>,
    /// The backward pass through accelerate and the grad clip.
    pub backward_ms: Vec<f64>,
    /// The optimizer and scheduler steps.
    pub optimizer_ms: Vec<f64>,
}

/// One measured batch of a `load` as the driver reports it while it runs (a `step`), ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
    /// a policy without `drop_n_last_frames`), where the driver does not say it (optional on
    /// both sides).
    #[serde(default)]
    pub sampler: Option<Json>,
    /// `DataLoader`'s arguments.
    pub dataloader: Json,
    /// The prefetch lerobot-train gives its workers (its config's `prefetch_factor`; 2 before
    /// LeRobot 0.6), known where the DataLoader has no worker to give it to.
    #[serde(deserialize_with = "nullable")]
    pub worker_prefetch_factor: Option<usize>,
    /// torch's backend settings lerobot-train made before it built the run (cuDNN's
    /// `benchmark` and `deterministic`, TF32 matmuls), read back: a step measured without
    /// them on CUDA is not the one lerobot-train takes.
    #[serde(deserialize_with = "nullable")]
    pub backend: Option<Json>,
}

/// `model`'s `result` for LeRobot's DiffusionPolicy: a row per batch size and dtype.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyRows {
    /// Each row, batch size outermost.
    pub rows: Vec<LerobotStepRow>,
}

/// One row of [`PolicyRows`] as the driver measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LerobotStepRow {
    /// Batch size.
    pub batch: usize,
    /// `f32` or `bf16`.
    pub dtype: String,
    /// PyTorch's intra-op threads.
    pub threads: i32,
    /// Trainable parameters of LeRobot's policy.
    pub parameters: usize,
    /// Peak RSS of the driver on CPU; None on CUDA.
    #[serde(deserialize_with = "nullable")]
    pub peak_memory_bytes: Option<u64>,
    /// Loss of the last step.
    pub last_loss: f64,
    /// Every measured step.
    pub per_step: Vec<LerobotStepMs>,
}

/// One measured step of a [`LerobotStepRow`], ms of each part.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LerobotStepMs {
    /// The batch to the device and LeRobot's preprocessor (normalisation).
    pub h2d_ms: f64,
    /// `policy.forward` (the loss).
    pub forward_ms: f64,
    /// `loss.backward()`.
    pub backward_ms: f64,
    /// Clipping, `optimizer.step()`, `zero_grad()`.
    pub optimizer_ms: f64,
    /// The whole step.
    pub step_ms: f64,
}

/// `digests`' `result`: each batch's items digested, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemDigests {
    /// Per batch, per item, the hex digest.
    pub item_digests: Vec<Vec<String>>,
}

/// `sampler`'s `result`: the episode-aware sampler's indices, in its order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplerIndices {
    /// Absolute frame indices.
    pub indices: Vec<usize>,
}
