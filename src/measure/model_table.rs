//! What `feedbench model` measures: the `model` phase once per (batch size, dtype), each on a
//! resident synthetic batch of the policy's shapes.

use std::path::Path;

use super::phase::{lerobot_model_phases, run_model_phase, ModelPhase};
use crate::loader::batch::ImageFormat;
use crate::loader::lerobot::LerobotBridge;
use crate::model::lerobot::LerobotSteps;
use crate::model::{synthetic_batch, ModelError, PolicyShapes, Precision, StepChoice};
use crate::timing::Watch;

/// The rows to measure.
#[derive(Debug, Clone)]
pub struct ModelTable {
    /// The step (its `dtype` is taken from [`ModelTable::dtypes`]).
    pub step: StepChoice,
    /// Cameras and widths of the synthetic batches.
    pub shapes: PolicyShapes,
    /// Batch sizes, one row each (per dtype).
    pub batch_sizes: Vec<usize>,
    /// Arithmetic, one row each (per batch size).
    pub dtypes: Vec<Precision>,
    /// How images are handed to the step.
    pub images: ImageFormat,
    /// Measured steps per row.
    pub steps: usize,
    /// Steps run before measuring.
    pub warmup: usize,
    /// Seed of the model init, the batch and the noise.
    pub seed: u64,
}

impl ModelTable {
    /// Measures every row, batch size outermost; `watch` hears each as it is done, and a
    /// `Break` ends the table after it. A bf16 row carries its speed-up over the f32 row of
    /// the same batch size, when there is one.
    pub fn run(
        &self,
        watch: &mut dyn for<'r> Watch<&'r ModelPhase>,
    ) -> Result<Vec<ModelPhase>, ModelError> {
        if self.batch_sizes.is_empty() || self.batch_sizes.contains(&0) {
            return Err(ModelError::Config("--batch needs sizes ≥ 1".into()));
        }
        let device = self.step.device()?;
        let config = self.step.diffusion_config(device)?;
        let mut rows: Vec<ModelPhase> = Vec::new();
        for &size in &self.batch_sizes {
            for &dtype in &self.dtypes {
                tch::manual_seed(self.seed as i64);
                let spec = StepChoice { dtype, ..self.step.clone() };
                let mut step = spec.build(Ok(&self.shapes))?;
                let (obs, horizon) = (config.n_obs_steps, config.horizon);
                let batch =
                    synthetic_batch(&self.shapes, obs, horizon, size, self.images, self.seed);
                let mut row =
                    run_model_phase(step.as_mut(), &batch, dtype, self.steps, self.warmup)?;
                row.speedup_over_f32 = speedup_over_f32(&rows, &row);
                let heard = watch.hear(&row);
                rows.push(row);
                if heard.is_break() {
                    return Ok(rows);
                }
            }
        }
        Ok(rows)
    }

    /// The same rows with LeRobot's own `DiffusionPolicy` step in PyTorch, run by the LeRobot
    /// driver with the Python at `python` and `threads` intra-op threads (None: PyTorch's
    /// choice). Only the diffusion policy has a LeRobot counterpart.
    pub fn run_lerobot(
        &self,
        python: &Path,
        threads: Option<i32>,
    ) -> Result<Vec<ModelPhase>, ModelError> {
        if !self.step.spec().is_diffusion() {
            return Err(ModelError::Config(format!(
                "--impl lerobot runs LeRobot's DiffusionPolicy: --model diffusion, not {}",
                self.step.spec()
            )));
        }
        if self.step.host_seed.is_some() {
            return Err(ModelError::Config(
                "--random-on-host is the tch step's (not with --impl lerobot)".into(),
            ));
        }
        let device = self.step.device()?;
        let config = self.step.diffusion_config(device)?;
        let steps = LerobotSteps {
            config: &config,
            shapes: &self.shapes,
            batch_sizes: &self.batch_sizes,
            dtypes: &self.dtypes,
            images: self.images,
            device,
            steps: self.steps,
            warmup: self.warmup,
            seed: self.seed,
            threads,
        };
        let (versions, measured) = steps.measure(python, &LerobotBridge::new())?;
        let mut rows: Vec<ModelPhase> = Vec::new();
        for mut row in lerobot_model_phases(&versions, measured, device, &config)? {
            row.speedup_over_f32 = speedup_over_f32(&rows, &row);
            rows.push(row);
        }
        Ok(rows)
    }
}

/// For a bf16 row, its speed-up over the f32 row of the same batch size among `rows`.
fn speedup_over_f32(rows: &[ModelPhase], row: &ModelPhase) -> Option<f64> {
    if row.dtype != Precision::Bf16.name() {
        return None;
    }
    rows.iter()
        .find(|r| r.batch == row.batch && r.dtype == Precision::F32.name())
        .map(|r| r.step.median_ms / row.step.median_ms)
}
