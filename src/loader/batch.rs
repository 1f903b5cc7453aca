//! A collated batch: one contiguous buffer per key, as a training step consumes it.

use std::collections::BTreeMap;

/// The element type and storage of one batched key.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchData {
    /// Float values (vectors, or images as float32 in [0, 1]).
    F32(Vec<f32>),
    /// Images as uint8 (normalised on the device).
    U8(Vec<u8>),
    /// Integer values (indices).
    I64(Vec<i64>),
    /// Pad masks.
    Bool(Vec<bool>),
}

/// One batched key: its shape (batch first) and its values in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchTensor {
    /// `[B, T, C, H, W]` for images, `[B, T, D]` for vectors, `[B, T]` for masks.
    pub shape: Vec<usize>,
    /// The values, `shape.iter().product()` of them.
    pub data: BatchData,
}

/// A batch of samples, keyed like LeRobot's collated dict (`observation.state`,
/// `observation.images.cam_high`, `action`, `action_is_pad`, …).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Number of samples in the batch.
    pub size: usize,
    /// The batched keys.
    pub tensors: BTreeMap<String, BatchTensor>,
}
