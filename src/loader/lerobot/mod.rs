//! LeRobot's own loader as a backend (`--loader lerobot`): `LeRobotDataset` and PyTorch's
//! `DataLoader`, run by feedbench's driver script ([`driver`]) in a Python process of the
//! user's choosing, so that the same knobs and the same measurement apply to the loader they
//! train with.

mod bridge;
pub mod driver;
mod process;
pub mod protocol;
mod ranks;
pub mod run_args;
mod session;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use self::driver::{parse, torch_device};
use self::process::JsonWatch;
use self::protocol::{
    BatchesRequest, DatasetRequest, DigestsRequest, ItemDigests, LoadRequest, ModelRequest,
    Request, SamplerIndices, SamplerRequest, Source, StepRequest,
};
use self::run_args::{run_request, BuiltRun, TrainArgs};
use super::config::LoaderConfig;
use super::knobs::LoaderKnob;
use super::pipeline::LoaderError;
use super::spec::LoaderSpec;
use crate::dataset::setting::{Refusal, Setting};
use crate::dataset::{FrameMatch, Window, WindowChoice};
use crate::loader::batch::ImageFormat;
use crate::timing::Watch;

pub use self::bridge::LerobotBridge;
pub use self::protocol::{
    DriverStep, LargestPart, LerobotRun, LerobotStepRow, LerobotVersions, PolicyStep, PolicySteps,
    Reader, RunBuilds, Startup, StepParts, WorkerStart,
};
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
    /// python`), else `$FEEDBENCH_PYTHON`, else the LeRobot venv of the source tree this binary
    /// was built in (`.venv-lerobot`, which `make test` makes), else `python3`.
    pub fn new(flag: Option<&Path>, config: Option<&Path>) -> Self {
        let python = flag
            .or(config)
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("FEEDBENCH_PYTHON").map(PathBuf::from))
            .or_else(source_tree_python)
            .unwrap_or_else(|| PathBuf::from("python3"));
        Self { python, video_backend: None }
    }
}

/// `.venv-lerobot/bin/python` of the source tree whose `target/` holds this binary; None for
/// a binary installed elsewhere (the bundle, the wheel).
fn source_tree_python() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().skip(1).take(4).find_map(|dir| {
        let python = dir.join(".venv-lerobot/bin/python");
        (dir.join("Cargo.toml").is_file() && python.is_file()).then_some(python)
    })
}

/// The step LeRobot's loader feeds in a `train` phase: each batch goes to `device` as
/// LeRobot's training loop sends it (uint8 cameras made float32 on the host, then `.to(device)`,
/// from pinned memory on CUDA), timed as h2d, and then the main process blocks for
/// `compute_ms`, the step's device time, while the workers prefetch.
#[derive(Debug, Clone, PartialEq)]
pub struct FedStep {
    /// The step's device time after the copy, ms (the mean of `sequence_ms` where given).
    pub compute_ms: f64,
    /// Where the step runs.
    pub device: tch::Device,
    /// Where the step varies (a replayed one): its device time at each step in turn, warm-up
    /// included, ms; None for a step of one length.
    pub sequence_ms: Option<Arc<[f64]>>,
}

impl FedStep {
    /// A step of `compute_ms` every time, on `device`.
    pub fn fixed(compute_ms: f64, device: tch::Device) -> Self {
        Self { compute_ms, device, sequence_ms: None }
    }

    /// A step taking `sequence_ms` in turn (at least one), on `device`.
    pub fn varying(sequence_ms: Vec<f64>, device: tch::Device) -> Self {
        let compute_ms = sequence_ms.iter().sum::<f64>() / sequence_ms.len().max(1) as f64;
        Self { compute_ms, device, sequence_ms: Some(sequence_ms.into()) }
    }
}

/// What a LeRobot loader's batches feed in a measurement.
#[derive(Debug, Clone, PartialEq)]
pub enum Feeding {
    /// Nothing: the loader alone.
    Nothing,
    /// A step of fixed cost on a device ([`FedStep`]).
    Fixed(FedStep),
    /// lerobot-train's own: each batch handed over (uint8 conversion, pre-processor) and the
    /// policy's `update_policy`, where the loader is a lerobot-train run's.
    Policy,
}

/// Watches a driver's measurement: hears the batches it said it measured so far after each;
/// `Break` ends the measurement a batch or two later.
pub type DriverWatch<'a> = dyn for<'b> Watch<&'b [DriverStep]> + 'a;

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
    /// The bridge its requests go through.
    bridge: LerobotBridge,
    /// The versions its Python answered with, once it has answered.
    answered: OnceLock<LerobotVersions>,
}

impl LerobotLoader {
    /// Checks the spec against the dataset (natively: the window, the episodes) and against
    /// what LeRobot's loader has: no resizing, one process. Its requests go through `bridge`.
    pub fn new(
        spec: &LoaderSpec,
        options: LerobotOptions,
        bridge: &LerobotBridge,
    ) -> Result<Self, LoaderError> {
        let config = &spec.config;
        LoaderKnob::refuse_lacking(config, LoaderBackend::Lerobot).map_err(LoaderError::Refused)?;
        if config.shard.world > 1 {
            return Err(LoaderError::Config(
                "sharding across ranks is the native loader's (LeRobot's is accelerate's)".into(),
            ));
        }
        let (dataset, window) = spec.open().map_err(LoaderError::Dataset)?;
        let fps = dataset.info().fps;
        let bridge = bridge.clone();
        let answered = OnceLock::new();
        Ok(Self { spec: spec.clone(), window, fps, options, train: None, bridge, answered })
    }

    /// The DataLoader lerobot-train builds from `run`'s arguments, its workers, batch and
    /// prefetch changed by `adjust` (feedbench's flags given over the run's own), and what was
    /// built. A change to any other knob is refused: the run's arguments set it. Its requests
    /// go through `bridge`, which describes the run once.
    pub fn of_training(
        run: TrainArgs,
        adjust: impl FnOnce(LoaderConfig) -> LoaderConfig,
        bridge: &LerobotBridge,
    ) -> Result<(Self, LerobotVersions, BuiltRun), LoaderError> {
        let (versions, built) = bridge.describe(&run)?;
        let config = adjust(built.config());
        built.refuse_changes(&config)?;
        let spec = LoaderSpec {
            dataset: built.root(),
            episodes: None,
            window: WindowChoice::None,
            frames: FrameMatch::default(),
            config,
            replay: None,
        };
        let options = LerobotOptions { python: run.python.clone(), video_backend: None };
        let loader = Self {
            spec,
            window: Window::default(),
            fps: 0.0,
            options,
            train: Some(run),
            bridge: bridge.clone(),
            answered: OnceLock::from(versions.clone()),
        };
        Ok((loader, versions, built))
    }

    /// The knobs.
    pub fn spec(&self) -> &LoaderSpec {
        &self.spec
    }

    /// Whose loader a request reads: the lerobot-train run's, or LeRobot's over the dataset
    /// with both loaders' knobs (dataset, episodes, window, sampler, DataLoader).
    fn source(&self) -> Source {
        let c = &self.spec.config;
        if let Some(run) = &self.train {
            return Source::Run(run_request(run, Some(c)));
        }
        Source::Dataset(self.dataset_request())
    }

    /// LeRobot's dataset and DataLoader as this loader's knobs set them.
    fn dataset_request(&self) -> DatasetRequest {
        let c = &self.spec.config;
        let delta_timestamps = self
            .window
            .keys()
            .map(|key| {
                let offsets = self.window.offsets(key).unwrap_or_default();
                let seconds: Vec<f64> = offsets.iter().map(|&o| o as f64 / self.fps).collect();
                (key.to_string(), seconds)
            })
            .collect();
        let dataloader = LoaderKnob::ALL.iter().filter_map(|k| k.dataloader_value(c));
        DatasetRequest {
            root: self.spec.dataset.clone(),
            episodes: self.spec.episodes.as_ref().map(|e| e.indices().to_vec()),
            delta_timestamps,
            drop_n_last_frames: c.drop_n_last_frames(&self.window),
            sampler: c.sampler.name().to_string(),
            seed: c.seed,
            dataloader: dataloader.map(|(keyword, value)| (keyword.to_string(), value)).collect(),
            uint8: c.images == ImageFormat::U8,
            video_backend: self.options.video_backend.map(|b| b.name().to_string()),
        }
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
        let Some(run) = &self.train else { return Err(no_policy()) };
        let run = run_request(run, Some(&self.spec.config));
        let request = Request::Model(ModelRequest::Run { run, steps: steps.max(1), warmup });
        let (ready, result) = self.bridge.ask(&self.options.python, &request)?;
        Ok((self.heard(ready)?, parse(&self.options.python, result)?))
    }

    /// Ranks measured at once: a lerobot-train run's, 1 otherwise.
    pub fn ranks(&self) -> usize {
        self.train.as_ref().map_or(1, |run| run.ranks.max(1))
    }

    /// Runs `warmup` unmeasured batches, then measures `batches`, each fed as `feeding` says;
    /// `watch` hears the batches measured so far, and fewer are measured where it breaks (a
    /// batch or two after it does; a run of several ranks measures every batch, unheard, see
    /// [`Self::ranks`]). On CUDA the
    /// DataLoader pins memory, as LeRobot's training sets it. The policy's own step is a
    /// lerobot-train run's only. Every rank's run, rank 0 first.
    pub fn load(
        &self,
        batches: usize,
        warmup: usize,
        feeding: Feeding,
        watch: &mut DriverWatch<'_>,
    ) -> Result<(LerobotVersions, Vec<LerobotRun>), LoaderError> {
        if batches == 0 {
            return Err(LoaderError::Config("measure at least one batch".into()));
        }
        let mut source = self.source();
        let step = match feeding {
            Feeding::Nothing => None,
            Feeding::Fixed(step) => {
                // On CUDA LeRobot's loader pins memory, as LeRobot's training sets it.
                if let (true, Source::Dataset(dataset)) = (step.device.is_cuda(), &mut source) {
                    let keyword = LoaderKnob::PIN_MEMORY.dataloader.expect("a DataLoader keyword");
                    dataset.dataloader.insert(keyword.to_string(), Json::from(true));
                }
                let device = torch_device(step.device);
                let sequence_ms = step.sequence_ms.as_ref().map(|times| times.to_vec());
                Some(StepRequest::Fixed { compute_ms: step.compute_ms, device, sequence_ms })
            }
            Feeding::Policy if self.train.is_some() => Some(StepRequest::Policy { policy: true }),
            Feeding::Policy => return Err(no_policy()),
        };
        let order = match &source {
            Source::Dataset(_) => self.spec.replay.as_ref().map(|batches| batches.to_vec()),
            Source::Run(_) => None,
        };
        let request =
            Request::Load(LoadRequest { source, batches, warmup, step, stop_file: None, order });
        let mut heard: Vec<DriverStep> = Vec::new();
        let mut hear = |message: &Json| {
            heard.extend(serde_json::from_value::<DriverStep>(message.clone()));
            watch.hear(&heard)
        };
        let hear = (self.ranks() == 1).then_some(&mut hear as &mut JsonWatch<'_>);
        let python = &self.options.python;
        let answers = self.bridge.ask_every_rank(python, &request, hear)?;
        let ready = answers.first().map(|(ready, _)| ready.clone()).unwrap_or_default();
        let runs = answers.into_iter().map(|(_, result)| parse(python, result));
        Ok((self.heard(ready)?, runs.collect::<Result<_, _>>()?))
    }

    /// Loads `index_batches` (global indices) as LeRobot's DataLoader batches them and saves
    /// every tensor as `out/batch-<n>/<key>.npy` (strings in `strings.json`).
    pub fn save_batches(
        &self,
        index_batches: &[Vec<usize>],
        out: &Path,
    ) -> Result<LerobotVersions, LoaderError> {
        let request = Request::Batches(BatchesRequest::Indices {
            dataset: self.dataset_request(),
            index_batches: index_batches.to_vec(),
            out: out.to_path_buf(),
        });
        let (ready, _) = self.bridge.ask(&self.options.python, &request)?;
        self.heard(ready)
    }

    /// Loads `index_batches` (global indices) as LeRobot's DataLoader batches them and digests
    /// each item over `keys` (`cameras` as the uint8 values of their frames), as
    /// [`crate::loader::batch::Batch::item_digests`] digests the native loader's.
    pub fn item_digests(
        &self,
        index_batches: &[Vec<usize>],
        keys: &[String],
        cameras: &[String],
    ) -> Result<Vec<Vec<String>>, LoaderError> {
        let request = Request::Digests(DigestsRequest {
            dataset: self.dataset_request(),
            index_batches: index_batches.to_vec(),
            keys: keys.to_vec(),
            cameras: cameras.to_vec(),
        });
        let (ready, result) = self.bridge.ask(&self.options.python, &request)?;
        self.heard(ready)?;
        let digests: ItemDigests = parse(&self.options.python, result)?;
        Ok(digests.item_digests)
    }

    /// The versions of LeRobot (and its torch and Python) this loader ran with, once its
    /// Python has answered a request: what a result's host names as the software that read.
    pub fn versions(&self) -> Option<&LerobotVersions> {
        self.answered.get()
    }

    /// The versions in a driver's `ready` answer, kept as [`Self::versions`].
    fn heard(&self, ready: Json) -> Result<LerobotVersions, LoaderError> {
        let versions: LerobotVersions = parse(&self.options.python, ready)?;
        let _ = self.answered.set(versions.clone());
        Ok(versions)
    }

    /// The indices LeRobot's `EpisodeAwareSampler` yields for this spec's episodes and
    /// `drop_n_last_frames`, in its order: shuffled (seeded by the spec's seed) or not.
    pub fn episode_aware_indices(&self, shuffle: bool) -> Result<Vec<usize>, LoaderError> {
        let request = Request::Sampler(SamplerRequest { dataset: self.dataset_request(), shuffle });
        let (_, result) = self.bridge.ask(&self.options.python, &request)?;
        let sampled: SamplerIndices = parse(&self.options.python, result)?;
        Ok(sampled.indices)
    }
}
