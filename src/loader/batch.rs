//! A collated batch: one contiguous buffer per key, as a training step consumes it.

use std::collections::BTreeMap;

use crate::dataset::{Sample, Values};

/// The element type and storage of one batched key.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchData {
    /// Float values (vectors, or images as float32 in [0, 1]).
    F32(Vec<f32>),
    /// Images as uint8 (normalised on the device).
    U8(Vec<u8>),
    /// float64 features, kept exact.
    F64(Vec<f64>),
    /// Integer values (indices).
    I64(Vec<i64>),
    /// int32 features.
    I32(Vec<i32>),
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

impl BatchData {
    fn append(&mut self, values: &Values) {
        match (self, values) {
            (Self::F32(dst), Values::F32(src)) => dst.extend_from_slice(src),
            (Self::F64(dst), Values::F64(src)) => dst.extend_from_slice(src),
            (Self::I64(dst), Values::I64(src)) => dst.extend_from_slice(src),
            (Self::I32(dst), Values::I32(src)) => dst.extend_from_slice(src),
            (Self::Bool(dst), Values::Bool(src)) => dst.extend_from_slice(src),
            (Self::U8(dst), Values::U8(src)) => dst.extend_from_slice(src),
            (dst, src) => unreachable!("{} values into a {dst:?} batch", src.type_name()),
        }
    }

    fn empty_like(values: &Values, capacity: usize) -> Option<Self> {
        Some(match values {
            Values::F32(_) => Self::F32(Vec::with_capacity(capacity)),
            Values::F64(_) => Self::F64(Vec::with_capacity(capacity)),
            Values::I64(_) => Self::I64(Vec::with_capacity(capacity)),
            Values::I32(_) => Self::I32(Vec::with_capacity(capacity)),
            Values::Bool(_) => Self::Bool(Vec::with_capacity(capacity)),
            Values::U8(_) => Self::U8(Vec::with_capacity(capacity)),
            Values::Str(_) => return None,
        })
    }
}

impl BatchData {
    /// Bytes the values occupy.
    pub fn bytes(&self) -> usize {
        match self {
            Self::F32(v) => v.len() * 4,
            Self::U8(v) => v.len(),
            Self::F64(v) => v.len() * 8,
            Self::I64(v) => v.len() * 8,
            Self::I32(v) => v.len() * 4,
            Self::Bool(v) => v.len(),
        }
    }
}

impl Batch {
    /// Bytes of all the batch's tensors.
    pub fn bytes(&self) -> usize {
        self.tensors.values().map(|t| t.data.bytes()).sum()
    }

    /// Stacks samples along a new first dimension, as PyTorch's `default_collate` does: every
    /// numeric key becomes `[B, …]`, every pad mask `<key>_is_pad` `[B, T]`. String keys (the
    /// task) are not tensors and are left out.
    pub fn collate(samples: &[Sample]) -> Batch {
        let mut batch = Batch { size: samples.len(), tensors: BTreeMap::new() };
        let Some(first) = samples.first() else { return batch };
        for (key, array) in &first.arrays {
            let Some(mut data) =
                BatchData::empty_like(&array.values, samples.len() * array.values.len())
            else {
                continue;
            };
            samples.iter().for_each(|s| data.append(&s.arrays[key].values));
            let shape = std::iter::once(samples.len()).chain(array.shape.iter().copied()).collect();
            batch.tensors.insert(key.clone(), BatchTensor { shape, data });
        }
        for (key, mask) in &first.pad_masks {
            let data = samples.iter().flat_map(|s| s.pad_masks[key].iter().copied()).collect();
            let tensor =
                BatchTensor { shape: vec![samples.len(), mask.len()], data: BatchData::Bool(data) };
            batch.tensors.insert(format!("{key}_is_pad"), tensor);
        }
        batch
    }
}
