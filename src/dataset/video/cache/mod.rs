//! The decoded-frame cache (the loader's `cache` knob, the Python reader's `cache_bytes`): camera
//! frames kept after conversion, at the output size and format, so that the epochs after the
//! first copy them instead of decoding them again. A frame is kept as it was written into the batch, so a cached frame
//! equals the decoded one value for value. Where the frames are kept is a [`FrameStore`]: one
//! process's memory for the native loader's worker threads ([`memory::FrameCache`]), or shared
//! memory for the worker processes of a PyTorch DataLoader ([`shared::SharedFrames`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use crate::dataset::error::Result;
use crate::dataset::video::{FrameBuffer, FrameDecoder, VideoFile};
use crate::timing::{stage, thread_cpu_time, StageTotals, TimingTree};

pub mod memory;
pub mod shared;

pub use memory::FrameCache;
pub use shared::SharedFrames;

/// A frame's place: its file (numbered by the store) and the time asked for, to the bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameKey {
    /// The file's number, from [`FrameStore::file`].
    pub file: u64,
    /// The time asked for (`f64::to_bits`).
    pub time_bits: u64,
}

/// Where decoded frames are kept, for every worker that shares it.
pub trait FrameStore: Send + Sync {
    /// The number `path`'s frames are kept under.
    fn file(&self, path: &Path) -> u64;

    /// Copies the frame kept at `key` into `out`; false where none is, or it is not of `out`'s
    /// format and length (`out` is then left as it was).
    fn copy_out(&self, key: FrameKey, out: FrameBuffer<'_>) -> bool;

    /// Keeps a copy of `frame` at `key`, where the store has room for it.
    fn keep(&self, key: FrameKey, frame: &FrameBuffer<'_>);
}

/// Copies the frames of `file` at every one of `times` from `store` into `out` (`times.len()`
/// frames, as [`FrameDecoder::decode_into`] writes them), without a decoder: false where one of
/// them is not held (`out` is then partly written, for a decoder to fill).
pub fn copy_held(
    store: &dyn FrameStore,
    file: &Path,
    times: &[f64],
    mut out: FrameBuffer<'_>,
) -> bool {
    if times.is_empty() || !out.len().is_multiple_of(times.len()) {
        return false;
    }
    let per_frame = out.len() / times.len();
    let file = store.file(file);
    times.iter().enumerate().all(|(i, time)| {
        store.copy_out(FrameKey { file, time_bits: time.to_bits() }, out.frame(i, per_frame))
    })
}

/// Copies `from` into `to`, of the same format and length.
fn copy_values(from: &FrameBuffer<'_>, to: FrameBuffer<'_>) {
    match (from, to) {
        (FrameBuffer::U8(from), FrameBuffer::U8(to)) => to.copy_from_slice(from),
        (FrameBuffer::F32(from), FrameBuffer::F32(to)) => to.copy_from_slice(from),
        _ => unreachable!("a scratch buffer is of its output's format"),
    }
}

/// A worker's video decoder in front of a shared [`FrameStore`]: frames found there are copied
/// (stage `batch/video/cache`, a call per frame), the others decoded by the decoder it wraps and
/// kept.
pub struct CachedDecoder {
    inner: Box<dyn FrameDecoder>,
    store: Arc<dyn FrameStore>,
    /// Positions of the frames of a call that were not cached.
    missing: Vec<usize>,
    missing_times: Vec<f64>,
    scratch_u8: Vec<u8>,
    scratch_f32: Vec<f32>,
    timing: TimingTree,
}

impl CachedDecoder {
    /// `inner`, with `store` in front.
    pub fn new(inner: Box<dyn FrameDecoder>, store: Arc<dyn FrameStore>) -> Self {
        Self {
            inner,
            store,
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
        let store = &self.store;
        if self.missing.len() == times.len() {
            self.inner.decode_into(file, times, out.frame(0, out.len()))?;
            for (i, &key) in keys.iter().enumerate() {
                let frame = out.frame(i, per_frame);
                self.timing.time(stage::CACHE_FILL, || store.keep(key, &frame));
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
            self.timing.time(stage::CACHE_FILL, || store.keep(keys[i], &frame));
            copy_values(&frame, out.frame(i, per_frame));
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
        let id = self.store.file(file);
        let keys: Vec<FrameKey> =
            times.iter().map(|t| FrameKey { file: id, time_bits: t.to_bits() }).collect();
        let (wall, cpu) = (Instant::now(), thread_cpu_time());
        self.missing.clear();
        for (i, key) in keys.iter().enumerate() {
            if !self.store.copy_out(*key, out.frame(i, per_frame)) {
                self.missing.push(i);
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

    fn use_prefetched(&mut self, prefetched: std::sync::Arc<super::Prefetched>) {
        self.inner.use_prefetched(prefetched);
    }
}

#[cfg(test)]
mod tests {
    use super::memory::ENTRY_OVERHEAD_BYTES;
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
            .filter(|t| cache.holds(FrameKey { file: 0, time_bits: t.to_bits() }))
            .collect();
        assert_eq!(held.len(), cache.frames());
        d.decode_into(file, &held[..1], FrameBuffer::U8(&mut out)).unwrap();
        assert_eq!(decoded(), 200, "a held frame is not decoded again");
        assert!(out.iter().all(|&v| v == (held[0] + 5.0) as u8));
    }

    #[test]
    fn held_frames_are_copied_without_a_decoder_only_where_all_are_held() {
        let (mut d, cache, decoded) = decoder(1 << 30);
        let file = Path::new("a.mp4");
        let mut first = vec![0u8; 2 * VALUES];
        d.decode_into(file, &[0.5, 1.0], FrameBuffer::U8(&mut first)).unwrap();
        let mut copied = vec![0u8; 2 * VALUES];
        assert!(copy_held(&*cache, file, &[0.5, 1.0], FrameBuffer::U8(&mut copied)));
        assert_eq!((decoded(), &copied), (2, &first));
        // One of them not held, another file, or a buffer of no whole frames: not copied.
        assert!(!copy_held(&*cache, file, &[0.5, 1.5], FrameBuffer::U8(&mut copied)));
        assert!(!copy_held(&*cache, Path::new("b.mp4"), &[0.5], FrameBuffer::U8(&mut copied)));
        assert!(!copy_held(&*cache, file, &[0.5, 1.0, 1.5], FrameBuffer::U8(&mut copied)));
        assert_eq!(decoded(), 2);
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
