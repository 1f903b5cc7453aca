//! The samples of one batch built together: each item's pixels to decode and its task apart,
//! every column and pad mask written once, straight into its stack `[B, …]` (what a collate
//! makes of the items), instead of into per-item arrays that a collate then copies.

use std::collections::BTreeMap;

use super::{drop_unwritten, ready_values, Sample};
use crate::dataset::values::Array;
use crate::dataset::{Dataset, Result, Window};

/// Every column and pad mask of a batch's items, stacked along a new first dimension.
#[derive(Debug, Default)]
pub struct Stacked {
    /// Every numeric and string column (as [`Sample::arrays`] holds them), stacked: `[B]`,
    /// `[B, D]`, `[B, T]`, `[B, T, D]`…
    pub arrays: BTreeMap<String, Array>,
    /// Per windowed key, LeRobot's `<key>_is_pad` of every item, item after item (`[B, T]`).
    pub pad_masks: BTreeMap<String, Vec<bool>>,
}

/// The samples of one batch: the items (their video frames, images, task and index; their own
/// `arrays` and `pad_masks` empty) and their values stacked. Built again in the same buffers,
/// it allocates only the stacks' values, once each, at their full size.
#[derive(Debug, Default)]
pub struct BatchSamples {
    /// The items, in the batch's order.
    pub items: Vec<Sample>,
    /// Their columns and pad masks.
    pub stacked: Stacked,
}

impl Dataset {
    /// The samples at global `indices` with `window` into `batch`: the items as
    /// [`Dataset::sample_into`] builds them, except that their columns and pad masks are
    /// appended to the batch's stacks, each stack shaped `[B, …]` once all are in.
    pub fn batch_into(
        &self,
        indices: impl ExactSizeIterator<Item = usize>,
        window: &Window,
        batch: &mut BatchSamples,
    ) -> Result<()> {
        let items = indices.len();
        let Stacked { arrays, pad_masks: masks } = &mut batch.stacked;
        ready_values(arrays, masks, &self.frames, window, items);
        batch.items.resize_with(items, Sample::default);
        for (sample, index) in batch.items.iter_mut().zip(indices) {
            // The item holds no values of its own (one built alone in it before had some).
            sample.arrays.clear();
            sample.pad_masks.clear();
            self.fill_sample(index, window, sample, (arrays, masks))?;
        }
        drop_unwritten(masks);
        for array in arrays.values_mut() {
            array.shape.insert(0, items);
        }
        Ok(())
    }
}
