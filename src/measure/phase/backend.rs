//! Both loaders behind one trait, [`MeasuredLoader`]: feedbench's own pipeline and LeRobot's
//! loader (run by its Python driver) are measured through the same `loader` and `train`
//! phases, so that the command line, the sweep and the studies above them never choose
//! between parallel functions.

use std::sync::Arc;

use super::figures::{LoaderPhase, ModelPhase, TrainError, TrainPhase};
use super::in_process::{run_loader_phase, run_train_phase};
use super::lerobot::{run_lerobot_loader_phase, run_lerobot_train_phase, run_policy_model_phase};
use super::watch::{BatchWatch, StepWatch};
use crate::loader::config::LoaderConfig;
use crate::loader::lerobot::{FedStep, LerobotLoader, LerobotVersions};
use crate::loader::pipeline::{Loader, LoaderError};
use crate::model::TrainStep;
use crate::timing::Trace;

/// What a `train` phase feeds.
pub struct Feed<'a> {
    /// The step, built on its device: a loader in this process runs it on each batch.
    pub step: &'a mut dyn TrainStep,
    /// The step's device time after the copy, for a loader whose batches stay in another
    /// process ([`MeasuredLoader::feeds_from_afar`]): it copies each batch to the step's
    /// device and blocks that long. None: no step (`none`).
    pub compute: Option<FedStep>,
    /// Records the trainer's `wait` and `step` phases on its own track (the loader's workers
    /// record theirs where it was given the same trace, [`MeasuredLoader::set_trace`]).
    pub trace: Option<&'a Arc<Trace>>,
}

/// A loader feedbench measures: its knobs, its `loader` phase and its `train` phase.
pub trait MeasuredLoader {
    /// Its knobs.
    fn config(&self) -> &LoaderConfig;

    /// Whether its batches stay in another process (it is not the native pipeline), so that a
    /// `train` phase feeds it the step's compute ([`Feed::compute`]) rather than the step.
    fn feeds_from_afar(&self) -> bool {
        self.native().is_none()
    }

    /// The loader alone: `warmup` unmeasured batches, then `batches` measured ones, epoch
    /// after epoch with the same workers; `watch` hears each measured batch, and a `Break`
    /// ends the phase there (LeRobot's driver ends a batch or two later; a run of several
    /// ranks measures every batch, unheard).
    fn loader_phase(
        &self,
        batches: usize,
        warmup: usize,
        watch: &mut BatchWatch<'_>,
    ) -> Result<LoaderPhase, LoaderError>;

    /// The loader feeding `feed`: `warmup` unmeasured steps, then `steps` measured ones;
    /// `watch` hears the steps measured so far after each, and a `Break` ends the phase there
    /// (a tune's verifying measurement, once its interval decides; LeRobot's driver ends a
    /// step or two later, and a run of several ranks measures every step, unheard).
    fn train_phase(
        &self,
        feed: Feed<'_>,
        steps: usize,
        warmup: usize,
        watch: &mut StepWatch<'_>,
    ) -> Result<TrainPhase, TrainError>;

    /// Whether the loader's run has a step of its own (a lerobot-train run's policy), which
    /// its `train` phase steps where [`Feed::compute`] is None.
    fn has_own_step(&self) -> bool {
        false
    }

    /// That step alone: `warmup` steps, then `steps` measured ones.
    fn own_step_phase(&self, _steps: usize, _warmup: usize) -> Result<ModelPhase, LoaderError> {
        Err(LoaderError::Config("this loader's run has no step of its own".into()))
    }

    /// Has the workers record their batch stages on `trace`; a loader that cannot is an error.
    fn set_trace(&mut self, trace: Option<Arc<Trace>>) -> Result<(), LoaderError>;

    /// The LeRobot it read with, once it has read (LeRobot's loaders); None for feedbench's.
    fn lerobot(&self) -> Option<&LerobotVersions> {
        None
    }

    /// The native pipeline, where it is one (its shard's plan, its batches).
    fn native(&self) -> Option<&Loader>;
}

impl MeasuredLoader for Loader {
    fn config(&self) -> &LoaderConfig {
        Loader::config(self)
    }

    fn loader_phase(
        &self,
        batches: usize,
        warmup: usize,
        watch: &mut BatchWatch<'_>,
    ) -> Result<LoaderPhase, LoaderError> {
        run_loader_phase(self, batches, warmup, watch)
    }

    fn train_phase(
        &self,
        feed: Feed<'_>,
        steps: usize,
        warmup: usize,
        watch: &mut StepWatch<'_>,
    ) -> Result<TrainPhase, TrainError> {
        run_train_phase(self, feed.step, steps, warmup, feed.trace, watch)
    }

    fn set_trace(&mut self, trace: Option<Arc<Trace>>) -> Result<(), LoaderError> {
        Loader::set_trace(self, trace);
        Ok(())
    }

    fn native(&self) -> Option<&Loader> {
        Some(self)
    }
}

impl MeasuredLoader for LerobotLoader {
    fn config(&self) -> &LoaderConfig {
        &self.spec().config
    }

    fn loader_phase(
        &self,
        batches: usize,
        warmup: usize,
        watch: &mut BatchWatch<'_>,
    ) -> Result<LoaderPhase, LoaderError> {
        run_lerobot_loader_phase(self, batches, warmup, watch)
    }

    fn train_phase(
        &self,
        feed: Feed<'_>,
        steps: usize,
        warmup: usize,
        watch: &mut StepWatch<'_>,
    ) -> Result<TrainPhase, TrainError> {
        Ok(run_lerobot_train_phase(self, feed.compute, steps, warmup, watch)?)
    }

    fn has_own_step(&self) -> bool {
        self.is_training()
    }

    fn own_step_phase(&self, steps: usize, warmup: usize) -> Result<ModelPhase, LoaderError> {
        run_policy_model_phase(self, steps, warmup)
    }

    fn set_trace(&mut self, trace: Option<Arc<Trace>>) -> Result<(), LoaderError> {
        match trace {
            None => Ok(()),
            Some(_) => Err(LoaderError::Config(
                "LeRobot's loader has no trace of its workers (the native loader's has)".into(),
            )),
        }
    }

    fn lerobot(&self) -> Option<&LerobotVersions> {
        self.versions()
    }

    fn native(&self) -> Option<&Loader> {
        None
    }
}
