//! LeRobot's own diffusion-policy training step (`model --impl lerobot`): `DiffusionPolicy`
//! with the same configuration and shapes, its preprocessor, the optimizer and clipping as
//! LeRobot's training script runs them, measured in the LeRobot driver's Python process, so
//! that the tch step can be set beside PyTorch's.

use std::path::Path;

use super::config::DiffusionConfig;
use super::error::ModelError;
use super::shapes::PolicyShapes;
use super::step::Precision;
use crate::loader::batch::ImageFormat;
use crate::loader::lerobot::driver::{parse, torch_device};
use crate::loader::lerobot::protocol::{
    CameraShape, LerobotStepRow, ModelRequest, PolicyRequest, PolicyRows, Request,
};
use crate::loader::lerobot::{LerobotBridge, LerobotVersions};

/// Which implementation runs the diffusion policy's step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepImpl {
    /// feedbench's, on libtorch through tch.
    Tch,
    /// LeRobot's own `DiffusionPolicy` in PyTorch, run by the LeRobot driver.
    Lerobot,
}

named_values!(StepImpl { Tch => "tch", Lerobot => "lerobot" });

/// What to measure: the rows of `feedbench model`, each a fresh policy from `seed`.
#[derive(Debug, Clone)]
pub struct LerobotSteps<'a> {
    /// The policy's configuration (the tch step's, field for field).
    pub config: &'a DiffusionConfig,
    /// Cameras and widths.
    pub shapes: &'a PolicyShapes,
    /// Batch sizes, one row each (per dtype).
    pub batch_sizes: &'a [usize],
    /// Arithmetic, one row each (per batch size); bf16 is autocast, as accelerate's.
    pub dtypes: &'a [Precision],
    /// How the DataLoader hands images over (uint8 is made float32 on the host, as LeRobot's
    /// training loop does).
    pub images: ImageFormat,
    /// Where the step runs.
    pub device: tch::Device,
    /// Measured steps per row.
    pub steps: usize,
    /// Steps before measuring.
    pub warmup: usize,
    /// Seed of the parameters and the batch.
    pub seed: u64,
    /// PyTorch's intra-op threads (None: PyTorch's choice).
    pub threads: Option<i32>,
}

impl LerobotSteps<'_> {
    /// Runs every row with the Python at `python`, through `bridge`: LeRobot's versions and
    /// the rows, batch size outermost.
    pub fn measure(
        &self,
        python: &Path,
        bridge: &LerobotBridge,
    ) -> Result<(LerobotVersions, Vec<LerobotStepRow>), ModelError> {
        if self.steps == 0 {
            return Err(ModelError::Config("measure at least one step".into()));
        }
        let cameras: Vec<_> = self
            .shapes
            .cameras
            .iter()
            .map(|c| CameraShape {
                key: c.key.clone(),
                channels: c.channels,
                height: c.height,
                width: c.width,
            })
            .collect();
        let policy = PolicyRequest {
            config: serde_json::to_value(self.config).expect("a config serialises"),
            cameras,
            state_dim: self.shapes.state_dim,
            action_dim: self.shapes.action_dim,
            batch_sizes: self.batch_sizes.to_vec(),
            dtypes: self.dtypes.iter().map(|d| d.name().to_string()).collect(),
            images: self.images.name().to_string(),
            device: torch_device(self.device),
            seed: self.seed,
            threads: self.threads,
        };
        let (steps, warmup) = (self.steps, self.warmup);
        let request = Request::Model(ModelRequest::Policy { policy, steps, warmup });
        let lerobot = |e| ModelError::Lerobot(format!("{e}"));
        let (ready, result) = bridge.ask(python, &request).map_err(lerobot)?;
        let versions = parse(python, ready).map_err(lerobot)?;
        let rows: PolicyRows = parse(python, result).map_err(lerobot)?;
        Ok((versions, rows.rows))
    }
}
