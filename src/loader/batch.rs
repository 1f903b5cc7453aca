//! A collated batch: one contiguous buffer per key, as a training step consumes it.
//!
//! The loader's workers write each sample straight into its slot of the batch's buffers
//! ([`Batch::reshape`], [`Batch::write_sample`], [`Batch::pixels_mut`]); batches are reused, so
//! after the first few no buffer is allocated or cleared again.
//!
//! A batched key's element type and typed storage ([`ElementType`], [`BatchData`]) are the
//! `data` submodule's.

use std::collections::BTreeMap;

use crate::dataset::video::{FrameBuffer, FrameDecoder};
use crate::dataset::{PixelShape, Result, Sample, Values};

mod data;

pub use data::{BatchData, ElementType};

/// How camera frames reach the model: float32 in [0, 1], or uint8 (normalised later, on the
/// device).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ImageFormat {
    /// float32 in [0, 1].
    #[default]
    F32,
    /// uint8 pixels, converted and normalised on the device.
    U8,
}

named_values!(ImageFormat { F32 => "f32" | "float32", U8 => "u8" | "uint8" });

/// A sample that does not fit the batch it goes into, naming the key (PyTorch's
/// `default_collate` refuses to stack unequal tensors too).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// The batch has no such key.
    #[error("{key}: not in the batch's first sample")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// The key's shape differs from the batch's.
    #[error("{key}: shape {found:?} differs from {expected:?} of the batch's first sample")]
    Shape {
        /// The key.
        key: String,
        /// The sample's shape.
        found: Vec<usize>,
        /// The batch's shape per sample.
        expected: Vec<usize>,
    },
    /// The key's values are of another type or length than the batch's.
    #[error("{key}: {found}, the batch holds {expected}")]
    Element {
        /// The key.
        key: String,
        /// What the sample has.
        found: String,
        /// What the batch holds.
        expected: String,
    },
    /// Pixels asked of a key that is not an image buffer.
    #[error("{key}: pixels into a {element} buffer")]
    NotPixels {
        /// The key.
        key: String,
        /// The batch's element type for it.
        element: String,
    },
    /// One sample of several did not fit.
    #[error("sample index {index}: {source}")]
    Sample {
        /// The sample's global index.
        index: usize,
        /// Why.
        #[source]
        source: Box<BatchError>,
    },
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

/// What one sample puts in a batch: per key, the shape of its slot and the element type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchLayout {
    keys: BTreeMap<String, (Vec<usize>, ElementType)>,
}

impl BatchLayout {
    /// The numeric arrays (decoded pixels included) and pad masks of `sample`, as
    /// `default_collate` stacks them; string keys (the task) are not tensors and are left out.
    pub fn of_arrays(sample: &Sample) -> Self {
        let mut keys = BTreeMap::new();
        for (key, array) in &sample.arrays {
            if let Some(element) = ElementType::of(&array.values) {
                keys.insert(key.clone(), (array.shape.clone(), element));
            }
        }
        for (key, mask) in &sample.pad_masks {
            keys.insert(format!("{key}_is_pad"), (vec![mask.len()], ElementType::Bool));
        }
        Self { keys }
    }

    /// [`BatchLayout::of_arrays`] plus the cameras and image features `decoder` will decode,
    /// as uint8 or float32.
    pub fn of_sample(sample: &Sample, decoder: &dyn FrameDecoder, uint8: bool) -> Result<Self> {
        let mut layout = Self::of_arrays(sample);
        let element = if uint8 { ElementType::U8 } else { ElementType::F32 };
        for key in sample.pixel_keys() {
            if let Some(shape) = sample.pixel_shape(key, decoder)? {
                layout.keys.insert(key.to_owned(), (shape.dims(), element));
            }
        }
        Ok(layout)
    }

    /// Bytes one sample takes in a batch.
    pub fn bytes_per_sample(&self) -> u128 {
        self.keys
            .values()
            .map(|(shape, element)| {
                shape.iter().map(|&d| d as u128).product::<u128>() * element.size() as u128
            })
            .sum()
    }

    /// The keys with their per-sample shapes and element types.
    pub fn keys(&self) -> impl Iterator<Item = (&str, &[usize], ElementType)> {
        self.keys.iter().map(|(key, (shape, element))| (key.as_str(), shape.as_slice(), *element))
    }
}

/// What a digest takes of a tensor before its values: its key, a zero byte, each dimension of
/// `shape` (8 bytes little-endian) and its element type's name.
fn digest_header(hash: &mut sha2::Sha256, key: &str, shape: &[usize], element: &str) {
    use sha2::Digest;
    hash.update(key.as_bytes());
    hash.update([0]);
    for dim in shape {
        hash.update((*dim as u64).to_le_bytes());
    }
    hash.update(element.as_bytes());
}

impl Batch {
    /// A digest of the batch (SHA-256 of each key, shape, element type and value bytes, in key
    /// order), as hex: two loaders, or two roots of one dataset, delivered the same batch where
    /// their digests are equal.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for (key, tensor) in &self.tensors {
            let element = format!("{:?}", tensor.data.element());
            digest_header(&mut hash, key, &tensor.shape, &element);
            hash.update(tensor.data.as_bytes());
        }
        hash.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// A digest of each sample of the batch, as hex: SHA-256 over its keys in order (each key,
    /// the sample's shape, element type and value bytes), camera keys (`cameras`) taken as the
    /// uint8 values their frames hold (float frames × 255, rounded) so that a reader's float
    /// conversion does not count. LeRobot's driver digests its items the same way
    /// (`feedbench_driver/digest.py`): two readers gave the same item where they are equal.
    pub fn item_digests(&self, cameras: &[String]) -> Vec<String> {
        use sha2::{Digest, Sha256};
        let mut hashes = vec![Sha256::new(); self.size];
        for (key, tensor) in &self.tensors {
            let per_item = tensor.data.len() / self.size.max(1);
            let camera = cameras.contains(key);
            let quantized: Vec<u8>;
            let (element, bytes): (String, &[u8]) = match &tensor.data {
                BatchData::F32(values) if camera => {
                    quantized = values.iter().map(|v| (v * 255.0).round() as u8).collect();
                    ("U8".into(), &quantized)
                }
                data => (format!("{:?}", data.element()), data.as_bytes()),
            };
            let width = bytes.len() / tensor.data.len().max(1);
            let item_shape = &tensor.shape[1.min(tensor.shape.len())..];
            for (item, hash) in hashes.iter_mut().enumerate() {
                digest_header(hash, key, item_shape, &element);
                let at = item * per_item * width;
                hash.update(&bytes[at..at + per_item * width]);
            }
        }
        hashes
            .into_iter()
            .map(|h| h.finalize().iter().map(|b| format!("{b:02x}")).collect())
            .collect()
    }

    /// Bytes of all the batch's tensors.
    pub fn bytes(&self) -> usize {
        self.tensors.values().map(|t| t.data.bytes()).sum()
    }

    /// Makes the batch hold `size` samples of `layout`. Buffers of the right element type are
    /// kept (their old values stay until overwritten: every slot must then be written); keys
    /// not in the layout are dropped.
    pub fn reshape(&mut self, size: usize, layout: &BatchLayout) {
        self.size = size;
        self.tensors.retain(|key, _| layout.keys.contains_key(key));
        for (key, (slot_shape, element)) in &layout.keys {
            let len = size * slot_shape.iter().product::<usize>();
            match self.tensors.get_mut(key) {
                Some(tensor) if tensor.data.element() == *element => {
                    tensor.data.resize(len);
                    tensor.shape.clear();
                }
                _ => {
                    let tensor =
                        BatchTensor { shape: Vec::new(), data: BatchData::zeroed(*element, len) };
                    self.tensors.insert(key.clone(), tensor);
                }
            }
            let tensor = self.tensors.get_mut(key).expect("inserted above");
            tensor.shape.push(size);
            tensor.shape.extend_from_slice(slot_shape);
        }
    }

    /// Copies the numeric arrays and pad masks of `sample` into slot `slot`. A key missing
    /// from the batch or shaped unlike it is an error naming the key (PyTorch's
    /// `default_collate` refuses to stack unequal tensors too).
    pub fn write_sample(
        &mut self,
        slot: usize,
        sample: &Sample,
    ) -> std::result::Result<(), BatchError> {
        for (key, array) in &sample.arrays {
            if matches!(array.values, Values::Str(_)) {
                continue;
            }
            let tensor = self.slot_of(key, &array.shape)?;
            let at = slot * array.values.len();
            if !tensor.data.write(at, &array.values) {
                return Err(BatchError::Element {
                    key: key.clone(),
                    found: format!("{} values", array.values.type_name()),
                    expected: format!("{:?}", tensor.data.element()),
                });
            }
        }
        for (key, mask) in &sample.pad_masks {
            // Found by suffix rather than by a formatted name: nothing allocated per sample.
            let tensor = self
                .tensors
                .iter_mut()
                .find(|(name, _)| name.strip_suffix("_is_pad") == Some(key))
                .map(|(_, tensor)| tensor)
                .ok_or_else(|| BatchError::MissingKey { key: format!("{key}_is_pad") })?;
            match &mut tensor.data {
                BatchData::Bool(data) if tensor.shape[1..] == [mask.len()] => {
                    data[slot * mask.len()..(slot + 1) * mask.len()].copy_from_slice(mask)
                }
                _ => {
                    return Err(BatchError::Element {
                        key: format!("{key}_is_pad"),
                        found: format!("{} steps", mask.len()),
                        expected: format!("{:?} {:?}", tensor.data.element(), &tensor.shape[1..]),
                    })
                }
            }
        }
        Ok(())
    }

    /// Slot `slot` of pixel key `key`, to decode into; an error when the batch has no such
    /// key or its slots are not of `shape`.
    pub fn pixels_mut(
        &mut self,
        key: &str,
        slot: usize,
        shape: &PixelShape,
    ) -> std::result::Result<FrameBuffer<'_>, BatchError> {
        let tensor = self
            .tensors
            .get_mut(key)
            .ok_or_else(|| BatchError::MissingKey { key: key.to_string() })?;
        if !shape.matches(&tensor.shape[1..]) {
            return Err(BatchError::Shape {
                key: key.to_string(),
                found: shape.dims(),
                expected: tensor.shape[1..].to_vec(),
            });
        }
        let range = slot * shape.len()..(slot + 1) * shape.len();
        match &mut tensor.data {
            BatchData::U8(v) => Ok(FrameBuffer::U8(&mut v[range])),
            BatchData::F32(v) => Ok(FrameBuffer::F32(&mut v[range])),
            other => Err(BatchError::NotPixels {
                key: key.to_string(),
                element: format!("{:?}", other.element()),
            }),
        }
    }

    /// The tensor of `key`, checked to hold slots of `shape`.
    fn slot_of(
        &mut self,
        key: &str,
        shape: &[usize],
    ) -> std::result::Result<&mut BatchTensor, BatchError> {
        let tensor = self
            .tensors
            .get_mut(key)
            .ok_or_else(|| BatchError::MissingKey { key: key.to_string() })?;
        if tensor.shape[1..] != *shape {
            return Err(BatchError::Shape {
                key: key.to_string(),
                found: shape.to_vec(),
                expected: tensor.shape[1..].to_vec(),
            });
        }
        Ok(tensor)
    }

    /// Stacks samples along a new first dimension, as PyTorch's `default_collate` does: every
    /// numeric key (decoded pixels included) becomes `[B, …]`, every pad mask `<key>_is_pad`
    /// `[B, T]`. String keys (the task) are not tensors and are left out. Samples must be
    /// shaped alike.
    pub fn collate(samples: &[Sample]) -> std::result::Result<Batch, BatchError> {
        let mut batch = Batch::default();
        let Some(first) = samples.first() else { return Ok(batch) };
        batch.reshape(samples.len(), &BatchLayout::of_arrays(first));
        for (slot, sample) in samples.iter().enumerate() {
            batch
                .write_sample(slot, sample)
                .map_err(|e| BatchError::Sample { index: sample.index, source: Box::new(e) })?;
        }
        Ok(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Array;

    fn sample(index: usize, state: Vec<f32>, pad: Vec<bool>) -> Sample {
        let mut sample = Sample::default();
        sample.index = index;
        let steps = pad.len();
        let shape = vec![steps, state.len() / steps];
        sample.arrays.insert("state".into(), Array { shape, values: Values::F32(state) });
        let index_values = Values::I64(vec![index as i64]);
        sample.arrays.insert("index".into(), Array { shape: vec![], values: index_values });
        let task = Values::Str(vec!["push".into()]);
        sample.arrays.insert("task".into(), Array { shape: vec![], values: task });
        sample.pad_masks.insert("state".into(), pad);
        sample
    }

    #[test]
    fn collates_like_default_collate() {
        let a = sample(3, vec![1.0, 2.0, 3.0, 4.0], vec![true, false]);
        let b = sample(4, vec![5.0, 6.0, 7.0, 8.0], vec![false, false]);
        let batch = Batch::collate(&[a, b]).unwrap();
        assert_eq!(batch.size, 2);
        assert_eq!(batch.tensors["state"].shape, [2, 2, 2]);
        assert_eq!(
            batch.tensors["state"].data,
            BatchData::F32((1..=8).map(|v| v as f32).collect())
        );
        assert_eq!(batch.tensors["index"].shape, [2]);
        assert_eq!(batch.tensors["index"].data, BatchData::I64(vec![3, 4]));
        assert_eq!(
            batch.tensors["state_is_pad"].data,
            BatchData::Bool(vec![true, false, false, false])
        );
        assert!(!batch.tensors.contains_key("task"), "strings are not tensors");
    }

    #[test]
    fn refuses_samples_shaped_unlike_the_first() {
        let a = sample(3, vec![1.0, 2.0, 3.0, 4.0], vec![true, false]);
        let b = sample(9, vec![5.0, 6.0, 7.0, 8.0, 9.0, 10.0], vec![false, false]);
        let error = Batch::collate(&[a, b]).unwrap_err().to_string();
        assert!(error.contains("sample index 9") && error.contains("state"), "{error}");
    }

    #[test]
    fn reuses_buffers_across_batches_of_other_sizes() {
        let a = sample(3, vec![1.0, 2.0, 3.0, 4.0], vec![true, false]);
        let b = sample(4, vec![5.0, 6.0, 7.0, 8.0], vec![false, false]);
        let layout = BatchLayout::of_arrays(&a);
        let mut batch = Batch::default();
        batch.reshape(2, &layout);
        let BatchData::F32(state) = &batch.tensors["state"].data else { panic!() };
        let buffer = state.as_ptr();
        batch.write_sample(0, &a).unwrap();
        batch.write_sample(1, &b).unwrap();
        batch.reshape(1, &layout);
        batch.write_sample(0, &b).unwrap();
        assert_eq!(batch.tensors["state"].shape, [1, 2, 2]);
        let BatchData::F32(state) = &batch.tensors["state"].data else { panic!() };
        assert_eq!(state, &[5.0, 6.0, 7.0, 8.0]);
        assert_eq!(state.as_ptr(), buffer, "the buffer is reused, not reallocated");
        batch.reshape(2, &layout);
        assert_eq!(batch.tensors["state"].data.len(), 8);
        assert_eq!(batch.tensors["index"].shape, [2]);
    }

    #[test]
    fn pixel_slots_are_checked_against_the_layout() {
        let mut batch = Batch::default();
        let mut layout = BatchLayout::default();
        layout.keys.insert("cam".into(), (vec![2, 3, 4, 5], ElementType::U8));
        batch.reshape(3, &layout);
        let shape = PixelShape { steps: Some(2), height: 4, width: 5 };
        let FrameBuffer::U8(slot) = batch.pixels_mut("cam", 2, &shape).unwrap() else { panic!() };
        slot.fill(7);
        let BatchData::U8(all) = &batch.tensors["cam"].data else { panic!() };
        assert!(all[..2 * 120].iter().all(|&v| v == 0) && all[2 * 120..].iter().all(|&v| v == 7));
        let other = PixelShape { steps: Some(2), height: 5, width: 4 };
        assert!(batch.pixels_mut("cam", 0, &other).unwrap_err().to_string().contains("differs"));
        assert!(batch
            .pixels_mut("other", 0, &shape)
            .unwrap_err()
            .to_string()
            .contains("not in the batch"));
    }
}
