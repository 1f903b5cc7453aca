//! The step as chosen: a [`ModelSpec`] with the file of a replayed step read once
//! ([`ChosenModel`]), and everything else that decides it ([`StepChoice`]), whose
//! [`StepChoice::build`] is the one builder the command line, the sweep, tune, the guard and the
//! tests call. What asks about the step (a tune's demand, a report's rate) asks the choice.

use std::path::PathBuf;

use crate::loader::lerobot::FedStep;

use super::config::DiffusionConfig;
use super::diffusion::DiffusionPolicy;
use super::error::ModelError;
use super::replay::{ReplayError, StepReplay};
use super::shapes::{PolicyShapes, ShapesError};
use super::spec::{DeviceChoice, DiffusionPreset, ModelSpec};
use super::step::{NoneStep, Precision, TrainStep};
use super::synthetic::SyntheticStep;

/// A step's spec with what it names read: a replayed step's times, read from its file once.
#[derive(Debug, Clone)]
pub struct ChosenModel {
    spec: ModelSpec,
    replay: Option<StepReplay>,
}

impl ChosenModel {
    /// `spec`, its step file read where it replays one.
    pub fn read(spec: ModelSpec) -> Result<Self, ReplayError> {
        let replay = match &spec {
            ModelSpec::Replay(source) => Some(StepReplay::read(source)?),
            _ => None,
        };
        Ok(Self { spec, replay })
    }

    /// The spec, as cells and results record it.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// The replayed step's times, where it is one.
    pub fn replay(&self) -> Option<&StepReplay> {
        self.replay.as_ref()
    }
}

impl PartialEq for ChosenModel {
    /// The same spec is the same step (its file was read from the path the spec names).
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

/// What a loader in another process is fed for a step: a compute the choice knows, or one the
/// step's model phase is to measure.
#[derive(Debug, Clone, PartialEq)]
pub enum FedCompute {
    /// Known without measuring: a fixed cost, a replayed step's times in turn, nothing for
    /// `none`.
    Known(Option<FedStep>),
    /// A step that computes: its model phase's median compute, measured first.
    Measured,
}

/// Everything that decides a training step, resolved once.
#[derive(Debug, Clone, PartialEq)]
pub struct StepChoice {
    /// The step.
    pub model: ChosenModel,
    /// The diffusion preset, where `model` names none.
    pub preset: DiffusionPreset,
    /// A TOML file whose keys override fields of the preset (e.g. `down_dims = [256, 512]`).
    pub config_file: Option<PathBuf>,
    /// Where it runs.
    pub device: DeviceChoice,
    /// Its arithmetic.
    pub dtype: Precision,
    /// libtorch's intra-op threads, set as the step is built (None: libtorch's choice).
    pub threads: Option<i32>,
    /// Draw the policy's random numbers from the CPU generator, re-seeded with this before
    /// each step, on any device ([`DiffusionPolicy::draw_on_host`]): CPU and CUDA steps can
    /// then be compared.
    pub host_seed: Option<u64>,
}

impl StepChoice {
    /// `spec` (its step file read) with the defaults: the preset for the device, wherever
    /// libtorch sees fit, in f32, libtorch's threads.
    pub fn of(spec: ModelSpec) -> Result<Self, ReplayError> {
        Ok(Self {
            model: ChosenModel::read(spec)?,
            preset: DiffusionPreset::Auto,
            config_file: None,
            device: DeviceChoice::Auto,
            dtype: Precision::F32,
            threads: None,
            host_seed: None,
        })
    }

    /// The step's spec.
    pub fn spec(&self) -> &ModelSpec {
        self.model.spec()
    }

    /// The replayed step's times, where it is one.
    pub fn replay(&self) -> Option<&StepReplay> {
        self.model.replay()
    }

    /// What a loader in another process is fed for this step over `steps` steps (warm-up
    /// included): each batch copied to the step's device, then the fed time blocked for.
    pub fn fed_compute(&self, steps: usize) -> Result<FedCompute, ModelError> {
        let device = self.device()?;
        Ok(match (self.spec(), self.replay()) {
            (ModelSpec::Synthetic { cost, .. }, _) => {
                FedCompute::Known(Some(FedStep::fixed(cost.as_secs_f64() * 1e3, device)))
            }
            // Each step in turn, as the replay draws them.
            (_, Some(replay)) => {
                let times = replay.steps().take(steps.max(1));
                let times_ms = times.map(|t| t.as_secs_f64() * 1e3).collect();
                FedCompute::Known(Some(FedStep::varying(times_ms, device)))
            }
            (ModelSpec::None, _) => FedCompute::Known(None),
            (ModelSpec::Policy, _) => return Err(ModelSpec::policy_is_the_runs()),
            (ModelSpec::Diffusion(_) | ModelSpec::Replay(_), _) => FedCompute::Measured,
        })
    }

    /// The libtorch device it runs on.
    pub fn device(&self) -> Result<tch::Device, ModelError> {
        self.device.resolve()
    }

    /// The diffusion policy's configuration on `device`: the preset, with the keys of
    /// `config_file` laid over it.
    pub fn diffusion_config(&self, device: tch::Device) -> Result<DiffusionConfig, ModelError> {
        let preset = match self.spec().on(self.preset, device) {
            ModelSpec::Diffusion(Some(preset)) => preset,
            _ => self.preset.on(device),
        };
        let config = DiffusionConfig::preset(preset.name())?;
        match &self.config_file {
            Some(path) => config.with_overrides(path),
            None => Ok(config),
        }
    }

    /// The step, shaped by `shapes` (a dataset's cameras and widths, or why it has none: only
    /// the diffusion policy needs them), with libtorch's threads set where the choice names
    /// them.
    pub fn build(
        &self,
        shapes: Result<&PolicyShapes, &ShapesError>,
    ) -> Result<Box<dyn TrainStep>, ModelError> {
        let device = self.device()?;
        if let Some(threads) = self.threads {
            tch::set_num_threads(threads);
        }
        Ok(match (self.spec(), self.replay()) {
            (ModelSpec::Diffusion(_), _) => {
                let shapes = shapes.map_err(|why| ModelError::Shapes(why.clone()))?;
                let config = self.diffusion_config(device)?;
                let policy = DiffusionPolicy::new(&config, shapes, device, self.dtype)?;
                Box::new(match self.host_seed {
                    Some(seed) => policy.draw_on_host(seed as i64)?,
                    None => policy,
                })
            }
            (ModelSpec::Synthetic { cost, .. }, _) => Box::new(SyntheticStep::new(*cost, device)),
            (ModelSpec::Replay(_), Some(replay)) => {
                Box::new(SyntheticStep::replaying(replay, device))
            }
            (ModelSpec::Replay(_), None) => unreachable!("ChosenModel::read reads a replay"),
            (ModelSpec::Policy, _) => return Err(ModelSpec::policy_is_the_runs()),
            (ModelSpec::None, _) => Box::new(NoneStep),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::model::{ReplayOrder, ReplaySource};

    #[test]
    fn a_replayed_step_is_read_once_where_it_is_chosen() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("steps.txt");
        std::fs::write(&file, "10\n30\n").unwrap();
        let spec: ModelSpec = format!("replay:{}", file.display()).parse().unwrap();
        assert_eq!(
            spec,
            ModelSpec::Replay(ReplaySource { file: file.clone(), order: ReplayOrder::DRAWN })
        );
        let choice = StepChoice::of(spec.clone()).unwrap();
        // Read now: the file may go, the choice keeps its times.
        std::fs::remove_file(&file).unwrap();
        assert_eq!(choice.replay().map(StepReplay::mean_ms), Some(20.0));
        assert_eq!(choice.replay().map(|r| r.times_ms.len()), Some(2));
        let gone = StepChoice::of(spec).unwrap_err();
        assert_eq!(gone.path, file);
        let fixed = StepChoice::of(ModelSpec::fixed_ms(40.0).unwrap()).unwrap();
        assert_eq!(fixed.spec().to_string(), "synthetic:40ms");
        let cost = Duration::from_millis(40);
        assert!(matches!(fixed.spec(), ModelSpec::Synthetic { cost: c, .. } if *c == cost));
        assert!(fixed.replay().is_none());
        assert!(StepChoice::of(ModelSpec::default()).unwrap().replay().is_none());
    }
}
