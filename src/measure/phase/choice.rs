//! Which loader, as one value: a front end's declaration of it ([`LoaderDeclaration`]: the
//! backend and, for LeRobot's loaders, the Python, LeRobot's video backend and a lerobot-train
//! run's arguments), the loader it chooses ([`LoaderChoice`]) and that loader with what it
//! reads ([`ChosenLoader`]). The command line, a sweep's `[loader]`, a guard's cell and tune all
//! build their loader through [`LoaderDeclaration::choice`], and tune writes its sweep's back
//! through [`LoaderChoice::declaration`].

use std::path::PathBuf;

use super::backend::MeasuredLoader;
use crate::loader::config::LoaderConfig;
use crate::loader::lerobot::run_args::{TrainArgs, TrainArgsError, SET_BY_FEEDBENCH};
use crate::loader::lerobot::{
    LerobotBridge, LerobotLoader, LerobotOptions, LoaderBackend, Reader, VideoBackend,
};
use crate::loader::pipeline::LoaderError;
use crate::loader::spec::LoaderSpec;

/// "Which loader" as a front end declares it. Its settings are the same wherever it is written
/// (`--loader`, `--python`, `--video-backend`, `--lerobot-train`; a sweep's or a guard cell's
/// `loader`, `python`, `video_backend`, `lerobot_train`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoaderDeclaration {
    /// Which loader.
    pub backend: LoaderBackend,
    /// The Python of the environment with LeRobot (None: `$FEEDBENCH_PYTHON`, the source
    /// tree's LeRobot venv, `python3`).
    pub python: Option<PathBuf>,
    /// LeRobot's video backend (None: LeRobot's choice).
    pub video_backend: Option<VideoBackend>,
    /// A lerobot-train run's arguments, as one shell-quoted text.
    pub lerobot_train: Option<String>,
}

impl LoaderDeclaration {
    /// The loader declared: LeRobot's with its Python and video backend, a lerobot-train run's
    /// arguments parsed (with feedbench's reader for `feedbench-lerobot-train`). The error says
    /// what is wrong; the caller names where it was written.
    pub fn choice(&self) -> Result<LoaderChoice, ChoiceError> {
        let mut options = LerobotOptions::new(None, self.python.as_deref());
        Ok(match self.backend {
            LoaderBackend::Native => LoaderChoice::Native,
            LoaderBackend::Lerobot => {
                options.video_backend = self.video_backend;
                LoaderChoice::Lerobot(options)
            }
            LoaderBackend::LerobotTrain | LoaderBackend::FeedbenchLerobotTrain => {
                let text = self.lerobot_train.as_deref().ok_or(ChoiceError::NoRun(self.backend))?;
                let run = TrainArgs::parse(&options.python, text)?;
                let reader = match self.backend {
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
    /// The declaration that chooses it: [`LoaderDeclaration::choice`] of it gives it back.
    pub fn declaration(&self) -> LoaderDeclaration {
        let backend = self.backend();
        match self {
            LoaderChoice::Native => LoaderDeclaration::default(),
            LoaderChoice::Lerobot(options) => LoaderDeclaration {
                backend,
                python: Some(options.python.clone()),
                video_backend: options.video_backend,
                lerobot_train: None,
            },
            LoaderChoice::LerobotTrain(run) => LoaderDeclaration {
                backend,
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
