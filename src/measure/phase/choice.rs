//! Which loader, as one value: a front end's declaration of it (its backend, and beside it a
//! [`LoaderDeclaration`]: for LeRobot's loaders, the Python, LeRobot's video backend and a
//! lerobot-train run's arguments), the loader it chooses ([`LoaderChoice`]) and that loader with what it
//! reads ([`ChosenLoader`]). The command line, a sweep's `[loader]`, a guard's cell and tune all
//! build their loader through [`LoaderDeclaration::choice`], and tune writes its sweep's back
//! through [`LoaderChoice::declaration`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::backend::MeasuredLoader;
use crate::loader::config::LoaderConfig;
use crate::loader::lerobot::run_args::{TrainArgs, TrainArgsError, SET_BY_FEEDBENCH};
use crate::loader::lerobot::{
    LerobotBridge, LerobotLoader, LerobotOptions, LoaderBackend, Reader, VideoBackend,
};
use crate::loader::pipeline::LoaderError;
use crate::loader::spec::LoaderSpec;

/// "Which loader" as a front end declares it beside its backend (`--loader`, a sweep's
/// `loader` list, a guard cell's `loader`): LeRobot's Python, its video backend and a
/// lerobot-train run's arguments. One struct, flattened into the command line's flags (clap), a
/// sweep's `[loader]` and a guard's cell (serde), so that every front end reads the same
/// settings under the same names; [`LoaderDeclaration::choice`] makes it a loader.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct LoaderDeclaration {
    /// With LeRobot's loaders: the Python of the environment with LeRobot (default:
    /// $FEEDBENCH_PYTHON, else the source tree's .venv-lerobot, else python3).
    #[arg(long, value_name = "PATH")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub python: Option<PathBuf>,
    /// With --loader lerobot: LeRobot's video backend, `torchcodec` or `pyav` (default:
    /// LeRobot's choice).
    #[arg(long, conflicts_with = "lerobot_train")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_backend: Option<VideoBackend>,
    /// Your lerobot-train run's arguments, quoted as one: e.g. "--dataset.repo_id=me/pick
    /// --dataset.root=/data/pick --policy.type=diffusion", or
    /// "--config_path=outputs/train/pick/checkpoints/last/pretrained_model/train_config.json".
    /// The loader is then the DataLoader lerobot-train builds from them, by LeRobot's own code
    /// in --python's environment (uint8 frames, the policy's window and drop_n_last_frames,
    /// its seed, spawned persistent workers, prefetch 4); --workers, --batch and --prefetch
    /// change its num_workers, batch_size and prefetch_factor. Nothing is downloaded. `tune`
    /// also takes the line that launches the run, `accelerate launch [OPTIONS] $(which
    /// lerobot-train) ARGS`: it reads the ranks from it and answers with it. (A sweep's or a
    /// guard cell's `lerobot_train`, where the run reads the config's `[dataset]`.)
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot_train: Option<String>,
}

impl LoaderDeclaration {
    /// The loader `backend` with these settings: LeRobot's with its Python and video backend, a
    /// lerobot-train run's arguments parsed (with feedbench's reader for
    /// `feedbench-lerobot-train`). The error says what is wrong; the caller names where it was
    /// written.
    pub fn choice(&self, backend: LoaderBackend) -> Result<LoaderChoice, ChoiceError> {
        let mut options = LerobotOptions::new(None, self.python.as_deref());
        Ok(match backend {
            LoaderBackend::Native => LoaderChoice::Native,
            LoaderBackend::Lerobot => {
                options.video_backend = self.video_backend;
                LoaderChoice::Lerobot(options)
            }
            LoaderBackend::LerobotTrain | LoaderBackend::FeedbenchLerobotTrain => {
                let text = self.lerobot_train.as_deref().ok_or(ChoiceError::NoRun(backend))?;
                let run = TrainArgs::parse(&options.python, text)?;
                let reader = match backend {
                    LoaderBackend::FeedbenchLerobotTrain => Reader::Feedbench,
                    _ => Reader::Lerobot,
                };
                LoaderChoice::LerobotTrain(TrainArgs { reader, ..run })
            }
        })
    }
}

/// Why a declared loader cannot be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// A lerobot-train run's loader, declared without the run's arguments.
    #[error("{0} measures a lerobot-train run: give its arguments")]
    NoRun(LoaderBackend),
    /// The run's arguments are not lerobot-train's.
    #[error(transparent)]
    Args(#[from] TrainArgsError),
}

/// A loader spec and which loader reads it: what `compare`, the guard and the layout study
/// build their runs from.
#[derive(Debug, Clone)]
pub struct ChosenLoader {
    /// Which loader.
    pub choice: LoaderChoice,
    /// What it reads and how.
    pub spec: LoaderSpec,
}

impl ChosenLoader {
    /// The native loader of `spec`.
    pub fn native(spec: LoaderSpec) -> Self {
        Self { choice: LoaderChoice::Native, spec }
    }

    /// The loader, built; LeRobot's requests go through `bridge`.
    pub fn build(&self, bridge: &LerobotBridge) -> Result<Box<dyn MeasuredLoader>, LoaderError> {
        self.choice.build(&self.spec, bridge)
    }
}

/// Which loader reads a [`LoaderSpec`]: feedbench's, or LeRobot's with how it runs.
#[derive(Debug, Clone, Default)]
pub enum LoaderChoice {
    /// feedbench's own pipeline.
    #[default]
    Native,
    /// LeRobot's loader in the given Python.
    Lerobot(LerobotOptions),
    /// The DataLoader a lerobot-train run builds from these arguments, with its policy.
    LerobotTrain(TrainArgs),
}

impl LoaderChoice {
    /// The declaration that chooses it beside its [`LoaderChoice::backend`]:
    /// [`LoaderDeclaration::choice`] of both gives it back.
    pub fn declaration(&self) -> LoaderDeclaration {
        match self {
            LoaderChoice::Native => LoaderDeclaration::default(),
            LoaderChoice::Lerobot(options) => LoaderDeclaration {
                python: Some(options.python.clone()),
                video_backend: options.video_backend,
                lerobot_train: None,
            },
            LoaderChoice::LerobotTrain(run) => LoaderDeclaration {
                python: Some(run.python.clone()),
                video_backend: None,
                lerobot_train: Some(run.text()),
            },
        }
    }

    /// The same loader reading the dataset at `root` (a sweep's or a guard's `[dataset]`): a
    /// lerobot-train run's [`LerobotBridge::on_dataset`].
    pub fn on_dataset(
        self,
        root: &std::path::Path,
        bridge: &LerobotBridge,
    ) -> Result<Self, LoaderError> {
        Ok(match self {
            LoaderChoice::LerobotTrain(run) => {
                LoaderChoice::LerobotTrain(bridge.on_dataset(run, root)?)
            }
            other => other,
        })
    }

    /// The same loader as `ranks` ranks measured at once, where it is a lerobot-train run's
    /// (any other loader is one process: it is as it was).
    pub fn with_ranks(self, ranks: usize) -> Self {
        match self {
            LoaderChoice::LerobotTrain(run) => {
                LoaderChoice::LerobotTrain(TrainArgs { ranks, ..run })
            }
            other => other,
        }
    }

    /// Which loader it is.
    pub fn backend(&self) -> LoaderBackend {
        match self {
            LoaderChoice::Native => LoaderBackend::Native,
            LoaderChoice::Lerobot(_) => LoaderBackend::Lerobot,
            LoaderChoice::LerobotTrain(run) => match run.reader {
                Reader::Feedbench => LoaderBackend::FeedbenchLerobotTrain,
                Reader::Lerobot => LoaderBackend::LerobotTrain,
            },
        }
    }

    /// The loader of `spec`; LeRobot's requests go through `bridge`.
    pub fn build(
        &self,
        spec: &LoaderSpec,
        bridge: &LerobotBridge,
    ) -> Result<Box<dyn MeasuredLoader>, LoaderError> {
        Ok(match self {
            LoaderChoice::Native => Box::new(spec.build()?),
            LoaderChoice::Lerobot(options) => {
                Box::new(LerobotLoader::new(spec, options.clone(), bridge)?)
            }
            // The run's own knobs, but those feedbench sets (workers, batch, prefetch) `spec`'s.
            LoaderChoice::LerobotTrain(run) => {
                let adjust = |mut own: LoaderConfig| {
                    for knob in SET_BY_FEEDBENCH {
                        knob.set(&mut own, &knob.get(&spec.config)).expect("a value reads back");
                    }
                    own
                };
                Box::new(LerobotLoader::of_training(run.clone(), adjust, bridge)?.0)
            }
        })
    }
}
