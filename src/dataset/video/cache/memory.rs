//! The native loader's frame store: one process's memory, shared by its workers (they are
//! threads), bounded by a byte budget. Whole frames are evicted by quick_cache's policy
//! (S3-FIFO), and the frames held never weigh more than the budget.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, Weighter};

use super::{FrameKey, FrameStore};
use crate::dataset::video::FrameBuffer;

/// Bytes a cached frame is counted for beyond its values (its key and bookkeeping).
pub(super) const ENTRY_OVERHEAD_BYTES: u64 = 64;
/// Frames each shard of the cache should hold at least: a frame heavier than its shard's share
/// of the budget would never be kept.
const FRAMES_PER_SHARD: u64 = 16;
/// The most shards (quick_cache's locks) the cache is split into.
const MOST_SHARDS: u64 = 64;

/// A frame's values as the batch holds them.
#[derive(Debug)]
enum Frame {
    U8(Box<[u8]>),
    F32(Box<[f32]>),
}

impl Frame {
    /// A copy of `values`.
    fn of(values: &FrameBuffer<'_>) -> Self {
        match values {
            FrameBuffer::U8(v) => Frame::U8(v.to_vec().into_boxed_slice()),
            FrameBuffer::F32(v) => Frame::F32(v.to_vec().into_boxed_slice()),
        }
    }

    /// Bytes of its values.
    fn bytes(&self) -> u64 {
        match self {
            Frame::U8(v) => v.len() as u64,
            Frame::F32(v) => 4 * v.len() as u64,
        }
    }

    /// Copies it into `out`, which must be of its format and length; false where it is not.
    fn copy_into(&self, out: FrameBuffer<'_>) -> bool {
        match (self, out) {
            (Frame::U8(v), FrameBuffer::U8(out)) if out.len() == v.len() => out.copy_from_slice(v),
            (Frame::F32(v), FrameBuffer::F32(out)) if out.len() == v.len() => {
                out.copy_from_slice(v)
            }
            _ => return false,
        }
        true
    }
}

/// A cached frame's weight: its bytes and its entry's.
#[derive(Debug, Clone, Copy)]
struct FrameWeight;

impl Weighter<FrameKey, Arc<Frame>> for FrameWeight {
    fn weight(&self, _key: &FrameKey, frame: &Arc<Frame>) -> u64 {
        frame.bytes() + ENTRY_OVERHEAD_BYTES
    }
}

/// The frames kept, shared by every worker of a loader (and by its epochs).
pub struct FrameCache {
    budget_bytes: u64,
    /// Made at the first frame, whose size sets the shards (each must hold several frames).
    frames: OnceLock<Cache<FrameKey, Arc<Frame>, FrameWeight>>,
    /// The files' numbers.
    files: Mutex<HashMap<PathBuf, u64>>,
}

impl FrameCache {
    /// An empty cache holding at most `budget_bytes` of frames.
    pub fn new(budget_bytes: u64) -> Self {
        Self { budget_bytes, frames: OnceLock::new(), files: Mutex::default() }
    }

    /// The budget, bytes.
    pub fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    /// Bytes of the frames held now (never above the budget).
    pub fn held_bytes(&self) -> u64 {
        self.frames.get().map_or(0, |c| c.weight())
    }

    /// Frames held now.
    pub fn frames(&self) -> usize {
        self.frames.get().map_or(0, |c| c.len())
    }

    /// Whether the frame at `key` is held.
    #[cfg(test)]
    pub(super) fn holds(&self, key: FrameKey) -> bool {
        self.frames.get().is_some_and(|c| c.get(&key).is_some())
    }

    /// The cache, made for frames of `frame_bytes` on first use.
    fn frames_for(&self, frame_bytes: u64) -> &Cache<FrameKey, Arc<Frame>, FrameWeight> {
        self.frames.get_or_init(|| {
            let weight = frame_bytes + ENTRY_OVERHEAD_BYTES;
            let fit = (self.budget_bytes / weight.max(1) / FRAMES_PER_SHARD).clamp(1, MOST_SHARDS);
            // quick_cache wants a power of two.
            let shards = 1u64 << (63 - fit.leading_zeros());
            let options = OptionsBuilder::new()
                .estimated_items_capacity((self.budget_bytes / weight.max(1)).max(1) as usize)
                .weight_capacity(self.budget_bytes)
                .shards(shards as usize)
                .build()
                .expect("the cache's options are complete");
            Cache::with_options(options, FrameWeight, Default::default(), Default::default())
        })
    }
}

impl FrameStore for FrameCache {
    fn file(&self, path: &Path) -> u64 {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let next = files.len() as u64;
        *files.entry(path.to_path_buf()).or_insert(next)
    }

    fn copy_out(&self, key: FrameKey, out: FrameBuffer<'_>) -> bool {
        let held = self.frames.get().and_then(|c| c.get(&key));
        held.is_some_and(|frame| frame.copy_into(out))
    }

    fn keep(&self, key: FrameKey, frame: &FrameBuffer<'_>) {
        let frame = Arc::new(Frame::of(frame));
        self.frames_for(frame.bytes()).insert(key, frame);
    }
}
