//! What feedbench and its LeRobot driver say to each other, the Rust side of
//! `src/loader/lerobot/feedbench_driver/protocol.py`: a [`Request`] is one JSON object (in a file named on
//! the driver's command line, or one a line on its stdin in a [session](super::session)); the
//! driver answers with JSON lines on its stdout, each an [`Event`]: `ready` once it built what
//! it measures ([`LerobotVersions`]), `step` per measured batch where feedbench may stop it
//! early ([`DriverStep`]), `alive` while it works, and `result` ([`LerobotRun`],
//! [`PolicySteps`], …) or `error` (an [`ErrorKind`] and a message) last. Every key a request
//! has is a field here; the driver reads them by these names.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
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
    /// DataLoader's `num_workers`.
    pub num_workers: usize,
    /// DataLoader's `prefetch_factor`.
    pub prefetch_factor: usize,
    /// DataLoader's `persistent_workers`.
    pub persistent_workers: bool,
    /// DataLoader's `pin_memory`.
    pub pin_memory: bool,
    /// DataLoader's `batch_size`.
    pub batch_size: usize,
    /// DataLoader's `drop_last`.
    pub drop_last: bool,
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

/// The DataLoader knobs feedbench sets over a lerobot-train run's own.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Overrides {
    /// `num_workers`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_workers: Option<usize>,
    /// `batch_size`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    /// `prefetch_factor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefetch_factor: Option<usize>,
}

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
/// (its methods, what feedbench reads of it, are in [`super::train_run`]): the
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
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command as Process, Stdio};

    use super::*;

    /// Every command (the match fails to compile when one is added and not listed).
    fn every_command() -> Vec<Command> {
        let all =
            [Command::Load, Command::Batches, Command::Sampler, Command::Model, Command::Describe];
        for command in all {
            match command {
                Command::Load
                | Command::Batches
                | Command::Sampler
                | Command::Model
                | Command::Describe => {}
            }
        }
        all.to_vec()
    }

    /// The driver's own protocol module (as shipped in the binary, in the system's Python)
    /// reads every request kind Rust writes, and every error kind it says reaches Rust as that
    /// kind: the two sides' lists are the same.
    #[test]
    fn every_request_and_error_kind_crosses_between_the_two_protocol_modules() {
        let Ok(python) = which_python() else {
            eprintln!("SKIPPED: no python3 on PATH");
            return;
        };
        let package = super::super::driver::driver_path().unwrap();
        let script = format!(
            "import json, sys\n\
             sys.path.insert(0, {dir:?})\n\
             from feedbench_driver import protocol\n\
             for request in protocol.requests([{session:?}]):\n\
             \x20   print(json.dumps({{'command': request['command'], \
             'known': request['command'] in protocol.COMMANDS, 'keys': sorted(request)}}))\n\
             for kind in protocol.ErrorKind:\n\
             \x20   protocol.say_error(kind, 'a ' + kind.value + ' fault')\n",
            dir = package.parent().unwrap().to_str().unwrap(),
            session = SESSION_ARGUMENT,
        );
        let mut child = Process::new(python)
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let run = RunRequest {
            lerobot_train: vec!["--dataset.root=/d".into()],
            overrides: Overrides { num_workers: Some(2), ..Overrides::default() },
            reader: "feedbench",
        };
        let commands = every_command();
        let mut stdin = child.stdin.take().unwrap();
        for command in &commands {
            let request = Request::new(*command, Reads::Run(run.clone()));
            writeln!(stdin, "{}", serde_json::to_string(&request).unwrap()).unwrap();
        }
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let lines: Vec<Json> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let (read, said) = lines.split_at(commands.len());
        for (command, echo) in commands.iter().zip(read) {
            assert_eq!(echo["command"], serde_json::to_value(command).unwrap(), "{echo}");
            assert_eq!(echo["known"], true, "the driver does not know {command:?}: {echo}");
            assert!(echo["keys"].as_array().unwrap().iter().any(|k| k == "overrides"), "{echo}");
        }
        assert_eq!(said.len(), ErrorKind::ALL.len(), "the driver's error kinds: {said:?}");
        for (kind, message) in ErrorKind::ALL.iter().zip(said) {
            assert_eq!(Event::of(message), Some(Event::Error), "{message}");
            assert_eq!(ErrorKind::of(message), *kind, "{message}");
            assert_eq!(message["kind"], kind.name(), "{message}");
        }
    }

    fn which_python() -> std::io::Result<&'static str> {
        Process::new("python3").arg("--version").output().map(|_| "python3")
    }
}
