//! Batch buffers reused across batches: the consumer hands each delivered batch back (by
//! dropping it) and the workers fill it again, so buffers are allocated for the batches in
//! flight only, never per sample.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, Weak};

use super::batch::Batch;

/// Batches handed back by the consumer (see [`LoadedBatch`]), for the workers to fill again:
/// buffers are allocated for the batches in flight only, never per sample.
#[derive(Default)]
pub(super) struct BatchPool {
    free: Mutex<Vec<Batch>>,
}

impl BatchPool {
    /// A batch to fill: a returned one when there is one.
    pub(super) fn take(&self) -> Batch {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default()
    }

    /// Keeps `batch` for a later [`BatchPool::take`].
    pub(super) fn give(&self, batch: Batch) {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).push(batch);
    }
}

/// A batch the loader delivered; it reads as a [`Batch`]. Dropping it hands its buffers back
/// to the loader, which fills them again: keep [`LoadedBatch::into_batch`] for a batch to
/// outlive the next ones.
pub struct LoadedBatch {
    batch: Batch,
    pool: Weak<BatchPool>,
}

impl LoadedBatch {
    /// `batch`, handed back to `pool` when dropped.
    pub(super) fn new(batch: Batch, pool: Weak<BatchPool>) -> Self {
        Self { batch, pool }
    }
}

impl LoadedBatch {
    /// The batch itself, kept out of the loader's reuse.
    pub fn into_batch(mut self) -> Batch {
        std::mem::take(&mut self.batch)
    }
}

impl Deref for LoadedBatch {
    type Target = Batch;

    fn deref(&self) -> &Batch {
        &self.batch
    }
}

impl DerefMut for LoadedBatch {
    fn deref_mut(&mut self) -> &mut Batch {
        &mut self.batch
    }
}

impl fmt::Debug for LoadedBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.batch.fmt(f)
    }
}

impl Drop for LoadedBatch {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            if !self.batch.tensors.is_empty() {
                pool.give(std::mem::take(&mut self.batch));
            }
        }
    }
}
