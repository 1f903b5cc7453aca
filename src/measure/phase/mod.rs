//! The three phases of a measurement (docs/design.md, "What is measured"): `loader` (the loader
//! alone, the consumer drops batches), `model` (the step alone on one resident batch) and
//! `train` (the loader feeding the model, as in real training).
//!
//! Measuring, analysing and displaying are apart: `measure` runs a phase and keeps every raw
//! sample (per batch, per step), `analyse` makes the figures (`figures`: what results keep)
//! from them, and the report above (`bench::report::phase_text`) lays them out. A phase says
//! how it goes to one watcher (`watch`), which may end it early.

mod ahead;
mod analyse;
mod backend;
mod choice;
mod figures;
mod in_process;
mod lerobot;
pub mod lockstep;
mod memory;
mod order;
mod placed;
mod ranks;
mod remote;
mod steps;
mod watch;

pub use backend::{Feed, MeasuredLoader};
pub use choice::{ChoiceError, ChosenLoader, LoaderChoice, LoaderDeclaration};
pub use figures::{
    CacheFigures, DecodeLimit, FramesSize, InputBound, LoaderPhase, ModelPhase, Part, RankFigures,
    RankSpread, StepSample, TrainError, TrainPhase,
};
pub use in_process::{run_loader_phase, run_model_phase, run_train_phase};
pub use lerobot::lerobot_model_phases;
pub use memory::{MemoryFigures, PssSample, GROWTH_LEAST_MB, GROWTH_LEAST_PCT};
pub use order::OrderFigures;
pub use placed::{PlacedStep, StepPlace};
pub use remote::{RemoteBound, RemoteFigures};
pub use steps::{SampleStep, SampleSteps};
pub use watch::{BatchMeasured, BatchWatch, StepWatch};
