//! The consumer of batches: a training step behind [`TrainStep`], with LeRobot's diffusion
//! policy ([`diffusion`]), a fixed-cost stand-in ([`synthetic`]) and a no-op ([`NoneStep`]).
//! It owns the device, the host→device copy and the optimizer.

mod autocast;
mod backend;
pub mod choice;
pub mod config;
pub mod declaration;
pub mod diffusion;
mod error;
mod host;
mod layers;
pub mod lerobot;
pub mod noise;
pub mod replay;
pub mod shapes;
pub mod side_stream;
pub mod spec;
mod step;
pub mod synthetic;
pub mod unet;
pub mod vision;

pub use backend::BackendSettings;
pub use choice::{ChosenModel, StepChoice};
pub use config::DiffusionConfig;
pub use declaration::{StepDeclaration, StepError, StepFrom, StepOrder};
pub use diffusion::DiffusionPolicy;
pub use error::ModelError;
pub use replay::{ReplayError, ReplayOrder, ReplaySource, StepReplay};
pub use shapes::{synthetic_batch, CameraShape, MissingInput, PolicyShapes, ShapesError};
pub use spec::{DeviceChoice, DiffusionPreset, ModelSpec};
pub use step::{Components, NoneStep, Precision, StagedBatch, StepTimes, TrainStep};
pub use synthetic::SyntheticStep;
