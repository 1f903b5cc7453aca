//! LeRobot's own loader as a backend (`--loader lerobot`): `LeRobotDataset` and PyTorch's
//! `DataLoader`, run by feedbench's driver script ([`driver`]) in a Python process of the
//! user's choosing, so that the same knobs and the same measurement apply to the loader they
//! train with.

pub mod driver;
pub mod train_run;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use self::driver::{parse, run_driver, run_driver_until, torch_device};
use self::train_run::{BuiltRun, TrainArgs};
use super::config::LoaderConfig;
use super::knobs::LoaderKnob;
use super::pipeline::LoaderError;
use super::spec::LoaderSpec;
use crate::dataset::setting::{Refusal, Setting};
use crate::dataset::{Window, WindowChoice};
use crate::loader::batch::ImageFormat;

pub use super::knobs::LoaderBackend;

/// LeRobot's video decoding backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VideoBackend {
    /// torchcodec (LeRobot's default where it is installed).
    Torchcodec,
    /// PyAV.
    Pyav,
}

named_values!(VideoBackend {
    Torchcodec => "torchcodec",
    Pyav => "pyav",
});

/// How LeRobot's loader runs, beyond the knobs both loaders share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LerobotOptions {
    /// The Python interpreter of the environment with LeRobot.
    pub python: PathBuf,
    /// LeRobot's video backend; None: LeRobot's default.
    pub video_backend: Option<VideoBackend>,
}

impl LerobotOptions {
    /// Options with the interpreter from `flag` (`--python`), else `config` (`[loader]
    /// python`), else `$FEEDBENCH_PYTHON`, else `python3`.
    pub fn new(flag: Option<&Path>, config: Option<&Path>) -> Self {
        let python = flag
            .or(config)
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("FEEDBENCH_PYTHON").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("python3"));
        Self { python, video_backend: None }
    }
}

/// The step LeRobot's loader feeds in a `train` phase: each batch goes to `device` as
/// LeRobot's training loop sends it (uint8 cameras made float32 on the host, then `.to(device)`,
/// from pinned memory on CUDA), timed as h2d, and then the main process blocks for
/// `compute_ms`, the step's device time, while the workers prefetch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FedStep {
    /// The step's device time after the copy, ms.
    pub compute_ms: f64,
    /// Where the step runs.
    pub device: tch::Device,
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
    /// The parts of each step, where the step was lerobot-train's policy's.
    #[serde(default)]
    pub parts: Option<StepParts>,
    /// Per top-level module of that policy, its forward ms each step, in the policy's order.
    #[serde(default)]
    pub modules_ms: serde_json::Map<String, Json>,
    /// The most device memory a step took (CUDA).
    #[serde(default)]
    pub peak_device_bytes: Option<u64>,
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

/// What a LeRobot loader's batches feed in a measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Feeding {
    /// Nothing: the loader alone.
    Nothing,
    /// A step of fixed cost on a device ([`FedStep`]).
    Fixed(FedStep),
    /// lerobot-train's own: each batch handed over (uint8 conversion, pre-processor) and the
    /// policy's `update_policy`, where the loader is a lerobot-train run's.
    Policy,
}

/// Whether a driver's measurement may end, asked of the batches it reported so far.
pub type StopWhen<'a> = &'a dyn Fn(&[DriverStep]) -> bool;

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

/// A policy's own step asked of a loader that is no lerobot-train run's: only such a run has
/// one (the front end names where its arguments go).
fn no_policy() -> LoaderError {
    LoaderError::Refused(Refusal::new(|name| {
        format!("the policy's own step is a lerobot-train run's ({})", name(Setting::LerobotTrain))
    }))
}

/// LeRobot's loader over a dataset, with the knobs of a [`LoaderSpec`].
#[derive(Debug, Clone)]
pub struct LerobotLoader {
    spec: LoaderSpec,
    window: Window,
    fps: f64,
    options: LerobotOptions,
    /// lerobot-train's run, where the loader is the one it builds from these arguments.
    train: Option<TrainArgs>,
}

impl LerobotLoader {
    /// Checks the spec against the dataset (natively: the window, the episodes) and against
    /// what LeRobot's loader has: no resizing, one process.
    pub fn new(spec: &LoaderSpec, options: LerobotOptions) -> Result<Self, LoaderError> {
        let config = &spec.config;
        LoaderKnob::refuse_lacking(config, LoaderBackend::Lerobot).map_err(LoaderError::Refused)?;
        if config.shard.world > 1 {
            return Err(LoaderError::Config(
                "sharding across ranks is the native loader's (LeRobot's is accelerate's)".into(),
            ));
        }
        let (dataset, window) = spec.open().map_err(LoaderError::Dataset)?;
        Ok(Self { spec: spec.clone(), window, fps: dataset.info().fps, options, train: None })
    }

    /// The DataLoader lerobot-train builds from `run`'s arguments, its workers, batch and
    /// prefetch changed by `adjust` (feedbench's flags given over the run's own), and what was
    /// built. A change to any other knob is refused: the run's arguments set it.
    pub fn of_training(
        run: TrainArgs,
        adjust: impl FnOnce(LoaderConfig) -> LoaderConfig,
    ) -> Result<(Self, LerobotVersions, BuiltRun), LoaderError> {
        let (versions, built) = train_run::describe(&run)?;
        let config = adjust(built.config());
        built.refuse_changes(&config)?;
        let spec = LoaderSpec {
            dataset: built.root(),
            episodes: None,
            window: WindowChoice::None,
            config,
        };
        let options = LerobotOptions { python: run.python.clone(), video_backend: None };
        let loader = Self { spec, window: Window::default(), fps: 0.0, options, train: Some(run) };
        Ok((loader, versions, built))
    }

    /// The knobs.
    pub fn spec(&self) -> &LoaderSpec {
        &self.spec
    }

    /// The request both loaders' knobs make: dataset, episodes, window, sampler, DataLoader.
    fn request(&self, command: &str) -> Json {
        let c = &self.spec.config;
        if let Some(run) = &self.train {
            return train_run::request(command, run, Some(c));
        }
        let deltas: serde_json::Map<String, Json> = self
            .window
            .keys()
            .map(|key| {
                let offsets = self.window.offsets(key).unwrap_or_default();
                let seconds: Vec<f64> = offsets.iter().map(|&o| o as f64 / self.fps).collect();
                (key.to_string(), json!(seconds))
            })
            .collect();
        json!({
            "command": command,
            "root": self.spec.dataset,
            "episodes": self.spec.episodes.as_ref().map(|e| e.indices().to_vec()),
            "delta_timestamps": deltas,
            "drop_n_last_frames": c.drop_n_last_frames(&self.window),
            "sampler": c.sampler.name(),
            "seed": c.seed,
            "num_workers": c.workers,
            "prefetch_factor": c.prefetch,
            "persistent_workers": c.persistent_workers,
            "pin_memory": c.pin_memory,
            "batch_size": c.batch_size,
            "drop_last": c.drop_last,
            "uint8": c.images == ImageFormat::U8,
            "video_backend": self.options.video_backend.map(VideoBackend::name),
        })
    }

    /// Whether it is a lerobot-train run's loader (`--lerobot-train`), which has its policy.
    pub fn is_training(&self) -> bool {
        self.train.is_some()
    }

    /// A lerobot-train run's step alone: one batch of its DataLoader handed over and stepped
    /// by its policy's `update_policy`, `warmup` times, then `steps` measured times.
    pub fn policy_steps(
        &self,
        steps: usize,
        warmup: usize,
    ) -> Result<(LerobotVersions, PolicySteps), LoaderError> {
        if self.train.is_none() {
            return Err(no_policy());
        }
        let mut request = self.request("model");
        request["steps"] = json!(steps.max(1));
        request["warmup"] = json!(warmup);
        let (ready, result) = run_driver(&self.options.python, &request)?;
        Ok((parse(&self.options.python, ready)?, parse(&self.options.python, result)?))
    }

    /// Runs `warmup` unmeasured batches, then measures `batches`, each fed as `feeding` says,
    /// or fewer where `stop` says so of the batches measured so far (a batch or two after it
    /// does). On CUDA the DataLoader pins memory, as LeRobot's training sets it. The policy's
    /// own step is a lerobot-train run's only.
    pub fn load(
        &self,
        batches: usize,
        warmup: usize,
        feeding: Feeding,
        stop: Option<StopWhen<'_>>,
    ) -> Result<(LerobotVersions, LerobotRun), LoaderError> {
        if batches == 0 {
            return Err(LoaderError::Config("measure at least one batch".into()));
        }
        let mut request = self.request("load");
        request["batches"] = json!(batches);
        request["warmup"] = json!(warmup);
        match feeding {
            Feeding::Nothing => {}
            Feeding::Fixed(step) => {
                request["step"] =
                    json!({ "compute_ms": step.compute_ms, "device": torch_device(step.device) });
                if step.device.is_cuda() && self.train.is_none() {
                    request["pin_memory"] = json!(true);
                }
            }
            Feeding::Policy if self.train.is_some() => request["step"] = json!({ "policy": true }),
            Feeding::Policy => return Err(no_policy()),
        }
        let mut heard: Vec<DriverStep> = Vec::new();
        let mut hear = |message: &Json| {
            heard.extend(serde_json::from_value::<DriverStep>(message.clone()));
            stop.is_some_and(|stop| stop(&heard))
        };
        let hear = stop.is_some().then_some(&mut hear as &mut dyn FnMut(&Json) -> bool);
        let (ready, result) = run_driver_until(&self.options.python, &request, hear)?;
        Ok((parse(&self.options.python, ready)?, parse(&self.options.python, result)?))
    }

    /// Loads `index_batches` (global indices) as LeRobot's DataLoader batches them and saves
    /// every tensor as `out/batch-<n>/<key>.npy` (strings in `strings.json`).
    pub fn save_batches(
        &self,
        index_batches: &[Vec<usize>],
        out: &Path,
    ) -> Result<LerobotVersions, LoaderError> {
        let mut request = self.request("batches");
        request["index_batches"] = json!(index_batches);
        request["out"] = json!(out);
        let (ready, _) = run_driver(&self.options.python, &request)?;
        parse(&self.options.python, ready)
    }

    /// The indices LeRobot's `EpisodeAwareSampler` yields for this spec's episodes and
    /// `drop_n_last_frames`, in its order: shuffled (seeded by the spec's seed) or not.
    pub fn episode_aware_indices(&self, shuffle: bool) -> Result<Vec<usize>, LoaderError> {
        let mut request = self.request("sampler");
        request["shuffle"] = json!(shuffle);
        let (_, result) = run_driver(&self.options.python, &request)?;
        let indices = result.get("indices").cloned().unwrap_or_default();
        parse(&self.options.python, indices)
    }
}
