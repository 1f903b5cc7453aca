//! The step's contract and what every step shares: [`TrainStep`] (a batch in, its parts'
//! times out), [`StepTimes`] and their [`Components`], the no-op [`NoneStep`], and the batch's
//! way onto the device (its copy staged ahead, the copy to the device, the step stream's sync).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::error::ModelError;
use super::host::{host_tensor, page_locked};
use super::side_stream::{synchronize_step_stream, OnDevice};
use crate::loader::batch::{Batch, BatchTensor};

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

/// Wall time of one training step and of its phases. Device phases end with a
/// synchronisation of the step's stream (libtorch's default stream, through the CUDA runtime;
/// the whole device through tch where that cannot be had), so each is the device time of its
/// work — not of a batch copied meanwhile on the side stream.
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
    /// [`step`](Self::step), taking the batch's tensors from `staged` where given: staged ahead
    /// off the trainer thread (the train phase does for a CUDA step), page-locked or on the
    /// device already, so that the step's `h2d` is the transfer alone, or the wait for a copy
    /// made while the step before computed. A step that copies nothing to a device ignores
    /// them.
    fn step_with(
        &mut self,
        batch: &Batch,
        staged: Option<&StagedBatch>,
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
        _staged: Option<&StagedBatch>,
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

/// The batch's tensor `t` of `key` on `device`. On CUDA it is copied as LeRobot's loop copies
/// batches (`pin_memory=True` in its DataLoader, `non_blocking=True` in `.to(device)`): from
/// page-locked memory, asynchronously to the host — taken from `staged` where the batch was
/// staged ahead (a tensor already on the device as it is), else through a page-locked copy made
/// here. On the CPU it is [`host_tensor`]'s view of the batch's values.
///
/// # Safety
/// As [`host_tensor`]'s: the tensor may borrow `t`'s values, and is only read and dropped before
/// `t` is.
pub(crate) unsafe fn batch_tensor_on(
    key: &str,
    t: &BatchTensor,
    staged: Option<&StagedBatch>,
    device: tch::Device,
) -> Result<tch::Tensor, ModelError> {
    if let Some(staged) = staged.and_then(|staged| staged.get(key)) {
        return Ok(staged.f_to_device_(device, staged.kind(), true, false)?);
    }
    // SAFETY: the caller keeps to host_tensor's contract.
    let host = unsafe { host_tensor(key, t)? };
    if !device.is_cuda() {
        return Ok(host);
    }
    Ok(page_locked(&host, device)?.f_to_device_(device, host.kind(), true, false)?)
}

/// A batch's tensors staged ahead of the step, off the trainer thread (the train phase does,
/// for a CUDA step): in page-locked host memory, what a DataLoader's pin-memory thread hands
/// the training loop (`pin_memory=True`, as lerobot-train sets it on CUDA), or on the device
/// already, copied on a side stream while the step before computed.
pub enum StagedBatch {
    /// Page-locked host copies, by key: the step copies them to the device.
    Pinned(HashMap<String, tch::Tensor>),
    /// On the device: the step's stream waits for the copy.
    OnDevice(OnDevice),
}

impl StagedBatch {
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
                Ok((key.clone(), page_locked(&host, device)?))
            })
            .collect::<Result<_, ModelError>>()?;
        Ok(Self::Pinned(tensors))
    }

    /// The staged copy of `key`'s tensor, if the batch had one.
    pub fn get(&self, key: &str) -> Option<&tch::Tensor> {
        match self {
            Self::Pinned(tensors) => tensors.get(key),
            Self::OnDevice(on_device) => on_device.get(key),
        }
    }

    /// Orders what the step enqueues from here on after the batch's copy, where the batch was
    /// copied to the device ahead (a step calls it before it reads the batch).
    pub fn order_step_after_copy(&self) -> Result<(), ModelError> {
        match self {
            Self::Pinned(_) => Ok(()),
            Self::OnDevice(on_device) => on_device.order_step_after_copy(),
        }
    }
}

/// Waits for the step's queued work on the device (a no-op on CPU, where work is synchronous).
pub(crate) fn sync(device: tch::Device) {
    if let tch::Device::Cuda(i) = device {
        if !synchronize_step_stream(i) {
            tch::Cuda::synchronize(i as i64);
        }
    }
}
