//! Where a train phase's step runs, decided once for a step and a loader ([`StepPlace`]), and
//! the step as that place takes it ([`PlacedStep`]): `train`, a sweep's cells, tune and the
//! guard all place their step here.

use std::sync::Arc;

use super::backend::{Feed, MeasuredLoader};
use crate::loader::lerobot::FedStep;
use crate::model::choice::FedCompute;
use crate::model::{ModelError, ModelSpec, NoneStep, PolicyShapes, ShapesError};
use crate::model::{StepChoice, TrainStep};
use crate::timing::Trace;

/// Where the step of a train phase runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepPlace {
    /// The loader is in this process: its trainer runs the step on each batch.
    Here,
    /// The loader's batches stay in another process (LeRobot's): it is fed the step's compute,
    /// each batch copied to the step's device, then the time blocked for.
    Fed,
    /// A lerobot-train run's loader steps its own policy (it is given no stand-in).
    RunsOwn,
}

impl StepPlace {
    /// Where `step` runs with `loader`.
    pub fn of(step: &ModelSpec, loader: &dyn MeasuredLoader) -> Self {
        if loader.has_own_step() && !step.is_a_stand_in() {
            StepPlace::RunsOwn
        } else if loader.feeds_from_afar() {
            StepPlace::Fed
        } else {
            StepPlace::Here
        }
    }
}

/// A train phase's step as its place takes it: what the trainer's thread runs on each batch
/// (nothing where the step is fed or the run's own) and the compute a loader in another
/// process is fed.
pub struct PlacedStep {
    /// Run on each batch by a loader in this process.
    pub step: Box<dyn TrainStep>,
    /// Fed to a loader in another process; None: no step, or the run's own.
    pub compute: Option<FedStep>,
}

impl PlacedStep {
    /// `choice` at `place` for `steps` steps (warm-up included: a replay's times are fed in
    /// turn), shaped by `shapes`; `measured` gives a computing step's compute as its model
    /// phase measured it, asked only where that compute is fed.
    pub fn new<E: From<ModelError>>(
        place: StepPlace,
        choice: &StepChoice,
        shapes: Result<&PolicyShapes, &ShapesError>,
        steps: usize,
        measured: impl FnOnce() -> Result<FedStep, E>,
    ) -> Result<Self, E> {
        let nothing = || Box::new(NoneStep) as Box<dyn TrainStep>;
        Ok(match place {
            StepPlace::Here => Self { step: choice.build(shapes)?, compute: None },
            StepPlace::RunsOwn => Self { step: nothing(), compute: None },
            StepPlace::Fed => {
                let compute = match choice.fed_compute(steps)? {
                    FedCompute::Known(compute) => compute,
                    FedCompute::Measured => Some(measured()?),
                };
                Self { step: nothing(), compute }
            }
        })
    }

    /// What the train phase feeds, traced on `trace`.
    pub fn feed<'a>(&'a mut self, trace: Option<&'a Arc<Trace>>) -> Feed<'a> {
        Feed { step: self.step.as_mut(), compute: self.compute.clone(), trace }
    }
}
