//! The step's contract and what every step shares: [`TrainStep`] (a batch in, its parts'
//! times out), [`StepTimes`] and their [`Components`], [`ModelError`], the no-op
//! [`NoneStep`], and the batch's way onto the device (a host view of its values, its copy in
//! page-locked memory, the copy to the device, the device's sync).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::shapes::ShapesError;
use crate::loader::batch::Batch;

/// Arithmetic of the step: float32, or bf16 autocast over the forward pass (weights and
/// optimizer state stay float32, as with `torch.autocast`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Plain float32.
    F32,
    /// bf16 autocast.
    Bf16,
}

named_values!(Precision { F32 => "f32" | "float32", Bf16 => "bf16" | "bfloat16" });

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
    fn step(&mut self, batch: &Batch) -> Result<StepTimes, ModelError> {
        self.step_with(batch, None)
    }
    /// [`step`](Self::step), copying the batch's tensors from `pinned` where given: their
    /// page-locked copies, made ahead off the trainer thread (the train phase does for a CUDA
    /// step), so that the step's `h2d` is the transfer alone. A step that copies nothing to a
    /// device ignores them.
    fn step_with(
        &mut self,
        batch: &Batch,
        pinned: Option<&PinnedBatch>,
    ) -> Result<StepTimes, ModelError>;
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
    fn step_with(
        &mut self,
        _batch: &Batch,
        _pinned: Option<&PinnedBatch>,
    ) -> Result<StepTimes, ModelError> {
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
/// memory, asynchronously to the host — from `pinned` where the batch was pinned ahead, else
/// through a page-locked copy made here.
pub(crate) fn host_to_device(
    host: tch::Tensor,
    pinned: Option<&tch::Tensor>,
    device: tch::Device,
) -> tch::Tensor {
    if !device.is_cuda() {
        return host;
    }
    match pinned {
        Some(pinned) => pinned.to_device_(device, pinned.kind(), true, false),
        None => host.pin_memory(device).to_device_(device, host.kind(), true, false),
    }
}

/// A batch's tensors copied into page-locked host memory, by key: what a DataLoader's
/// pin-memory thread hands the training loop (`pin_memory=True`, as lerobot-train sets it for
/// a CUDA device), made before the step so that the step's copy to the device is the
/// transfer alone.
pub struct PinnedBatch {
    tensors: HashMap<String, tch::Tensor>,
}

impl PinnedBatch {
    /// Every tensor of `batch` copied into memory page-locked for `device` (a CUDA device;
    /// libtorch without CUDA refuses).
    pub fn pin(batch: &Batch, device: tch::Device) -> Result<Self, ModelError> {
        let tensors = batch
            .tensors
            .iter()
            .map(|(key, t)| {
                // SAFETY: the view is only read, copied into page-locked memory and dropped
                // before this call returns.
                let host = unsafe { host_tensor(key, t)? };
                Ok((key.clone(), host.f_pin_memory(device)?))
            })
            .collect::<Result<_, ModelError>>()?;
        Ok(Self { tensors })
    }

    /// The page-locked copy of `key`'s tensor, if the batch had one.
    pub fn get(&self, key: &str) -> Option<&tch::Tensor> {
        self.tensors.get(key)
    }
}

/// One batch key as a host tensor of its shape, if its values fill the shape: a view of the
/// batch's memory, not a copy (a DataLoader's batch is a torch tensor already; on the CPU this
/// is the whole hand-over, on CUDA the one copy into pinned memory follows).
///
/// # Safety
/// The tensor borrows `t`'s values: it, and every view of it, must be dropped before `t` is
/// dropped or changed, and nothing may write through it. The steps use it within one
/// `step(&batch)` call and only read it.
pub(crate) unsafe fn host_tensor(
    key: &str,
    t: &crate::loader::batch::BatchTensor,
) -> Result<tch::Tensor, ModelError> {
    use crate::loader::batch::BatchData;
    use tch::Kind;
    let n: usize = t.shape.iter().product();
    let (data, len, kind) = match &t.data {
        BatchData::F32(v) => (v.as_ptr() as *const u8, v.len(), Kind::Float),
        BatchData::F64(v) => (v.as_ptr() as *const u8, v.len(), Kind::Double),
        BatchData::I32(v) => (v.as_ptr() as *const u8, v.len(), Kind::Int),
        BatchData::U8(v) => (v.as_ptr(), v.len(), Kind::Uint8),
        BatchData::I64(v) => (v.as_ptr() as *const u8, v.len(), Kind::Int64),
        BatchData::Bool(v) => (v.as_ptr() as *const u8, v.len(), Kind::Bool),
    };
    if len != n {
        return Err(ModelError::Batch(format!(
            "`{key}` holds the wrong number of values for shape {:?}",
            t.shape
        )));
    }
    let shape: Vec<i64> = t.shape.iter().map(|&d| d as i64).collect();
    // SAFETY: `data` points at `n` values of `kind` (a Rust bool is one byte, 0 or 1, as
    // torch's), alive as long as the caller keeps `t`, which the contract above requires.
    let flat = unsafe { tch::Tensor::from_blob(data, &[n as i64], &[1], kind, tch::Device::Cpu) };
    Ok(flat.view(&shape[..]))
}

/// Waits for the device's queued work (a no-op on CPU, where work is synchronous).
pub(crate) fn sync(device: tch::Device) {
    if let tch::Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::batch::{BatchData, BatchTensor};

    #[test]
    fn host_tensors_view_the_batch_values_in_their_shape_and_kind() {
        let tensor = |data, shape: &[usize]| BatchTensor { shape: shape.to_vec(), data };
        let floats = tensor(BatchData::F32((0..24).map(|x| x as f32).collect()), &[2, 3, 4]);
        // SAFETY: `floats` outlives the view, which is only read.
        let view = unsafe { host_tensor("f", &floats) }.unwrap();
        assert_eq!((view.size(), view.kind()), (vec![2, 3, 4], tch::Kind::Float));
        assert_eq!(view.double_value(&[1, 2, 3]), 23.0, "row-major: 1·12 + 2·4 + 3");
        assert_eq!(view.sum(tch::Kind::Double).double_value(&[]), 276.0);
        let pixels = tensor(BatchData::U8(vec![0, 255, 7, 9]), &[2, 2]);
        let view = unsafe { host_tensor("u", &pixels) }.unwrap();
        assert_eq!((view.kind(), view.int64_value(&[0, 1])), (tch::Kind::Uint8, 255));
        let pads = tensor(BatchData::Bool(vec![false, true, true]), &[3]);
        let view = unsafe { host_tensor("b", &pads) }.unwrap();
        assert_eq!(
            (view.kind(), view.sum(tch::Kind::Int64).int64_value(&[])),
            (tch::Kind::Bool, 2)
        );
        let index = tensor(BatchData::I64(vec![-5, 1 << 40]), &[2]);
        let view = unsafe { host_tensor("i", &index) }.unwrap();
        assert_eq!((view.int64_value(&[0]), view.int64_value(&[1])), (-5, 1 << 40));
        let short = tensor(BatchData::F32(vec![0.0; 5]), &[2, 3]);
        let error = unsafe { host_tensor("state", &short) }.unwrap_err().to_string();
        assert!(error.contains("`state` holds the wrong number of values"), "{error}");
    }
}
