//! The consumer of batches: a training step behind [`TrainStep`], with LeRobot's diffusion
//! policy ([`diffusion`]), a fixed-cost stand-in ([`synthetic`]) and a no-op ([`NoneStep`]).
//! It owns the device, the host→device copy and the optimizer.

mod autocast;
pub mod config;
pub mod diffusion;
mod layers;
pub mod lerobot;
pub mod noise;
pub mod shapes;
pub mod spec;
pub mod synthetic;
pub mod unet;
pub mod vision;

use std::time::{Duration, Instant};

use crate::loader::batch::Batch;

pub use config::DiffusionConfig;
pub use diffusion::DiffusionPolicy;
pub use shapes::{synthetic_batch, CameraShape, MissingInput, PolicyShapes, ShapesError};
pub use spec::{DeviceChoice, DiffusionPreset, ModelSpec, Precision, StepSpec};
pub use synthetic::SyntheticStep;

/// Errors of the model: bad configuration, a batch that does not fit the model, or libtorch.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The configuration is inconsistent.
    #[error("model config: {0}")]
    Config(String),
    /// The batch does not match the model's shapes.
    #[error("batch does not fit the model: {0}")]
    Batch(String),
    /// The requested device is not available.
    #[error("device: {0}")]
    Device(String),
    /// The dataset lacks what the policy reads.
    #[error(transparent)]
    Shapes(#[from] ShapesError),
    /// LeRobot's step, run by the driver, failed (its message).
    #[error("{0}")]
    Lerobot(String),
    /// libtorch reported an error.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}

/// Device time of the model's parts within one step (taken with device synchronisation).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Components {
    /// Vision backbone forward (crop, ResNet, spatial softmax, projection).
    pub backbone_forward: Duration,
    /// Vision backbone backward.
    pub backbone_backward: Duration,
    /// UNet forward.
    pub unet_forward: Duration,
    /// UNet backward (with the loss and the conditioning concat, a few element-wise ops).
    pub unet_backward: Duration,
}

/// Wall time of one training step and of its phases. Device phases end with a device
/// synchronisation (`cudaDeviceSynchronize` through tch, which exposes no CUDA events), so
/// each is the device time of its work.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepTimes {
    /// Host→device copy of the batch.
    pub h2d: Duration,
    /// Forward pass and loss.
    pub forward: Duration,
    /// Backward pass.
    pub backward: Duration,
    /// Gradient clipping, optimizer step and zeroing the gradients.
    pub optimizer: Duration,
    /// The whole step.
    pub total: Duration,
    /// Backbone / UNet split of forward and backward, when the step has one.
    pub components: Option<Components>,
}

impl StepTimes {
    /// Forward and backward time outside the backbone and the UNet (normalisation, noise,
    /// loss), when components are known.
    pub fn other(&self) -> Option<Duration> {
        self.components.map(|c| {
            (self.forward + self.backward)
                .saturating_sub(c.backbone_forward + c.backbone_backward)
                .saturating_sub(c.unet_forward + c.unet_backward)
        })
    }
}

/// One training step on a batch: what the `model` and `train` phases drive.
pub trait TrainStep {
    /// Runs one step on `batch` (copy to the device, forward, backward, optimizer) and says
    /// how long each part took. A batch whose keys or shapes do not fit is an error.
    fn step(&mut self, batch: &Batch) -> Result<StepTimes, ModelError>;
    /// A short description (`diffusion pusht`, `synthetic:40ms`, `none`).
    fn name(&self) -> String;
    /// Number of trainable parameters (0 when there is no model).
    fn trainable_parameters(&self) -> usize;
    /// Loss of the last step, if the step has one (reading it synchronises the device).
    fn last_loss(&self) -> Option<f64>;
    /// The device the step runs on.
    fn device(&self) -> tch::Device;
}

/// A step that does nothing: the loader alone, consumer side.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoneStep;

impl TrainStep for NoneStep {
    fn step(&mut self, _batch: &Batch) -> Result<StepTimes, ModelError> {
        let start = Instant::now();
        Ok(StepTimes { total: start.elapsed(), ..Default::default() })
    }
    fn name(&self) -> String {
        "none".into()
    }
    fn trainable_parameters(&self) -> usize {
        0
    }
    fn last_loss(&self) -> Option<f64> {
        None
    }
    fn device(&self) -> tch::Device {
        tch::Device::Cpu
    }
}

/// A host tensor on `device`. On CUDA it is copied as LeRobot's loop copies batches
/// (`pin_memory=True` in its DataLoader, `non_blocking=True` in `.to(device)`): from page-locked
/// memory, asynchronously to the host. Untested on CUDA so far (no GPU in the sessions that built it).
pub(crate) fn host_to_device(host: tch::Tensor, device: tch::Device) -> tch::Tensor {
    if device.is_cuda() {
        host.pin_memory(device).to_device_(device, host.kind(), true, false)
    } else {
        host
    }
}

/// One batch key as a host tensor of its shape, if its values fill the shape.
pub(crate) fn host_tensor(
    key: &str,
    t: &crate::loader::batch::BatchTensor,
) -> Result<tch::Tensor, ModelError> {
    use crate::loader::batch::BatchData;
    let n: usize = t.shape.iter().product();
    let host = match &t.data {
        BatchData::F32(v) if v.len() == n => tch::Tensor::from_slice(v),
        BatchData::U8(v) if v.len() == n => tch::Tensor::from_slice(v),
        BatchData::I64(v) if v.len() == n => tch::Tensor::from_slice(v),
        BatchData::Bool(v) if v.len() == n => tch::Tensor::from_slice(v),
        _ => {
            return Err(ModelError::Batch(format!(
                "`{key}` holds the wrong number of values for shape {:?}",
                t.shape
            )))
        }
    };
    let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    Ok(host.view(&shape[..]))
}

/// Waits for the device's queued work (a no-op on CPU, where work is synchronous).
pub(crate) fn sync(device: tch::Device) {
    if let tch::Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}
