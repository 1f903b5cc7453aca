//! The decoded-frame cache (the loader's `cache` knob): camera frames kept after conversion, at
//! the loader's output size and format, so that the epochs after the first copy them instead of
//! decoding them again. One cache for every worker (they are threads), bounded by a byte budget:
//! whole frames are evicted by quick_cache's policy (S3-FIFO), and the frames held never weigh
//! more than the budget. A frame is cached as it was written into the batch, so a cached frame
//! equals the decoded one value for value.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, Weighter};

use crate::dataset::video::{FrameBuffer, FrameDecoder, VideoFile};
use crate::dataset::Result;
use crate::timing::{stage, thread_cpu_time, StageTotals, TimingTree};

/// Bytes a cached frame is counted for beyond its values (its key and bookkeeping).
const ENTRY_OVERHEAD_BYTES: u64 = 64;
/// Frames each shard of the cache should hold at least: a frame heavier than its shard's share
/// of the budget would never be kept.
const FRAMES_PER_SHARD: u64 = 16;
/// The most shards (quick_cache's locks) the cache is split into.
const MOST_SHARDS: u64 = 64;

/// A frame's place: its file (numbered by the cache) and the time asked for, to the bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FrameKey {
    file: u32,
    time_bits: u64,
}

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
    files: Mutex<HashMap<PathBuf, u32>>,
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

    fn file(&self, path: &Path) -> u32 {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let next = files.len() as u32;
        *files.entry(path.to_path_buf()).or_insert(next)
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

/// A worker's video decoder in front of the shared [`FrameCache`]: frames found there are
/// copied (stage `batch/video/cache`, a call per frame), the others decoded by the decoder it
/// wraps and kept.
pub struct CachedDecoder {
    inner: Box<dyn FrameDecoder>,
    cache: Arc<FrameCache>,
    /// Positions of the frames of a call that were not cached.
    missing: Vec<usize>,
    missing_times: Vec<f64>,
    scratch_u8: Vec<u8>,
    scratch_f32: Vec<f32>,
    timing: TimingTree,
}

impl CachedDecoder {
    /// `inner`, with `cache` in front.
    pub fn new(inner: Box<dyn FrameDecoder>, cache: Arc<FrameCache>) -> Self {
        Self {
            inner,
            cache,
            missing: Vec::new(),
            missing_times: Vec::new(),
            scratch_u8: Vec::new(),
            scratch_f32: Vec::new(),
            timing: TimingTree::default(),
        }
    }

    /// Decodes the missing frames (all of `times` where none was cached) and keeps them.
    fn decode_missing(
        &mut self,
        file: &Path,
        times: &[f64],
        keys: &[FrameKey],
        mut out: FrameBuffer<'_>,
        per_frame: usize,
    ) -> Result<()> {
        let cache = self.cache.clone();
        let keep = |frame: &FrameBuffer<'_>, key: FrameKey| {
            let frame = Arc::new(Frame::of(frame));
            cache.frames_for(frame.bytes()).insert(key, frame.clone());
            frame
        };
        if self.missing.len() == times.len() {
            self.inner.decode_into(file, times, out.frame(0, out.len()))?;
            for (i, &key) in keys.iter().enumerate() {
                let frame = out.frame(i, per_frame);
                self.timing.time(stage::CACHE_FILL, || keep(&frame, key));
            }
            return Ok(());
        }
        self.missing_times.clear();
        self.missing_times.extend(self.missing.iter().map(|&i| times[i]));
        let values = self.missing.len() * per_frame;
        let mut scratch = match out {
            FrameBuffer::U8(_) => {
                self.scratch_u8.resize(values, 0);
                FrameBuffer::U8(&mut self.scratch_u8[..])
            }
            FrameBuffer::F32(_) => {
                self.scratch_f32.resize(values, 0.0);
                FrameBuffer::F32(&mut self.scratch_f32[..])
            }
        };
        self.inner.decode_into(file, &self.missing_times, scratch.frame(0, values))?;
        for (n, &i) in self.missing.iter().enumerate() {
            let frame = scratch.frame(n, per_frame);
            let kept = self.timing.time(stage::CACHE_FILL, || keep(&frame, keys[i]));
            kept.copy_into(out.frame(i, per_frame));
        }
        Ok(())
    }
}

impl FrameDecoder for CachedDecoder {
    fn resolution(&self) -> Option<(u32, u32)> {
        self.inner.resolution()
    }

    fn output_size(&self, video: &VideoFile) -> (u32, u32) {
        self.inner.output_size(video)
    }

    fn decode_into(&mut self, file: &Path, times: &[f64], mut out: FrameBuffer<'_>) -> Result<()> {
        if times.is_empty() || !out.len().is_multiple_of(times.len()) {
            // Nothing to cache, or a buffer the decoder itself refuses with its message.
            return self.inner.decode_into(file, times, out);
        }
        let per_frame = out.len() / times.len();
        let id = self.cache.file(file);
        let keys: Vec<FrameKey> =
            times.iter().map(|t| FrameKey { file: id, time_bits: t.to_bits() }).collect();
        let (wall, cpu) = (Instant::now(), thread_cpu_time());
        self.missing.clear();
        for (i, key) in keys.iter().enumerate() {
            let hit = self.cache.frames.get().and_then(|c| c.get(key));
            match hit {
                Some(frame) if frame.copy_into(out.frame(i, per_frame)) => {}
                _ => self.missing.push(i),
            }
        }
        let hits = (times.len() - self.missing.len()) as u64;
        if hits > 0 {
            let cpu = thread_cpu_time().saturating_sub(cpu);
            self.timing.add(stage::CACHE, StageTotals { calls: hits, wall: wall.elapsed(), cpu });
        }
        if self.missing.is_empty() {
            return Ok(());
        }
        self.decode_missing(file, times, &keys, out, per_frame)
    }

    fn take_timing(&mut self) -> TimingTree {
        let mut timing = self.inner.take_timing();
        timing.merge(&std::mem::take(&mut self.timing));
        timing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Frames of `VALUES` values whose every value is the frame's time plus its file's name
    /// length: a frame source that counts the frames it was asked for.
    struct Numbered {
        decoded: Arc<AtomicUsize>,
    }

    const VALUES: usize = 1000;

    impl FrameDecoder for Numbered {
        fn resolution(&self) -> Option<(u32, u32)> {
            None
        }

        fn output_size(&self, _video: &VideoFile) -> (u32, u32) {
            (10, 100)
        }

        fn decode_into(
            &mut self,
            file: &Path,
            times: &[f64],
            mut out: FrameBuffer<'_>,
        ) -> Result<()> {
            assert_eq!(out.len(), times.len() * VALUES, "a frame per time");
            for (i, t) in times.iter().enumerate() {
                let value = t + file.as_os_str().len() as f64;
                match out.frame(i, VALUES) {
                    FrameBuffer::U8(v) => v.fill(value as u8),
                    FrameBuffer::F32(v) => v.fill(value as f32),
                }
            }
            self.decoded.fetch_add(times.len(), Ordering::Relaxed);
            Ok(())
        }

        fn take_timing(&mut self) -> TimingTree {
            TimingTree::default()
        }
    }

    /// A cached decoder of `budget` bytes, its cache, and a count of the frames decoded.
    fn decoder(budget: u64) -> (CachedDecoder, Arc<FrameCache>, impl Fn() -> usize) {
        let cache = Arc::new(FrameCache::new(budget));
        let count = Arc::new(AtomicUsize::new(0));
        let source = Numbered { decoded: count.clone() };
        let decoded = move || count.load(Ordering::Relaxed);
        (CachedDecoder::new(Box::new(source), cache.clone()), cache, decoded)
    }

    #[test]
    fn a_cached_frame_is_the_decoded_one_and_a_window_mixes_hits_and_misses() {
        let (mut d, cache, decoded) = decoder(1 << 30);
        let file = Path::new("a.mp4");
        let mut first = vec![0f32; 2 * VALUES];
        d.decode_into(file, &[0.5, 1.0], FrameBuffer::F32(&mut first)).unwrap();
        assert_eq!(decoded(), 2);
        // The same window again: both copied, the same values.
        let mut again = vec![9f32; 2 * VALUES];
        d.decode_into(file, &[0.5, 1.0], FrameBuffer::F32(&mut again)).unwrap();
        assert_eq!((decoded(), &again), (2, &first));
        // One cached, one not: only the new one decoded, each in its place.
        let mut mixed = vec![0f32; 2 * VALUES];
        d.decode_into(file, &[1.0, 1.5], FrameBuffer::F32(&mut mixed)).unwrap();
        assert_eq!(decoded(), 3);
        assert_eq!(&mixed[..VALUES], &first[VALUES..]);
        assert!(mixed[VALUES..].iter().all(|&v| v == 1.5 + 5.0));
        // Another file at the same time is another frame.
        let mut other = vec![0f32; VALUES];
        d.decode_into(Path::new("bb.mp4"), &[0.5], FrameBuffer::F32(&mut other)).unwrap();
        assert_eq!((decoded(), other[0]), (4, 0.5 + 6.0));
        assert_eq!(cache.frames(), 4);
        let timing = d.take_timing();
        assert_eq!(timing.get(stage::CACHE).map(|t| t.calls), Some(3), "three frames copied");
    }

    #[test]
    fn the_budget_is_never_exceeded_and_whole_frames_are_evicted() {
        // Frames of 1000 bytes (uint8) and a budget of 20: 200 different frames asked for.
        let frame = VALUES as u64 + ENTRY_OVERHEAD_BYTES;
        let (mut d, cache, decoded) = decoder(20 * frame);
        let file = Path::new("a.mp4");
        let mut out = vec![0u8; VALUES];
        for n in 0..200 {
            let t = n as f64 / 100.0;
            d.decode_into(file, &[t], FrameBuffer::U8(&mut out)).unwrap();
            assert!(cache.held_bytes() <= cache.budget_bytes(), "frame {n}: over the budget");
            assert_eq!(cache.held_bytes(), cache.frames() as u64 * frame, "whole frames only");
        }
        assert!(cache.frames() > 0 && cache.frames() <= 20, "{} frames held", cache.frames());
        assert_eq!(decoded(), 200);
        // What is still held is copied, not decoded, and equals a decoded frame.
        let held: Vec<f64> = (0..200)
            .map(|n| n as f64 / 100.0)
            .filter(|t| {
                let key = FrameKey { file: 0, time_bits: t.to_bits() };
                cache.frames.get().unwrap().get(&key).is_some()
            })
            .collect();
        assert_eq!(held.len(), cache.frames());
        d.decode_into(file, &held[..1], FrameBuffer::U8(&mut out)).unwrap();
        assert_eq!(decoded(), 200, "a held frame is not decoded again");
        assert!(out.iter().all(|&v| v == (held[0] + 5.0) as u8));
    }

    #[test]
    fn a_frame_of_another_format_or_size_is_decoded_not_copied() {
        let (mut d, _, decoded) = decoder(1 << 30);
        let file = Path::new("a.mp4");
        let mut f32s = vec![0f32; VALUES];
        d.decode_into(file, &[0.5], FrameBuffer::F32(&mut f32s)).unwrap();
        let mut u8s = vec![0u8; VALUES];
        d.decode_into(file, &[0.5], FrameBuffer::U8(&mut u8s)).unwrap();
        assert_eq!(decoded(), 2, "a uint8 buffer is not filled from a float32 frame");
        assert!(u8s.iter().all(|&v| v == 5));
    }
}
