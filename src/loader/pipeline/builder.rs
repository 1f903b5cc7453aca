//! One thread's building of batches: its own video decoder (behind the shared cache, where
//! there is one), a sample to refill and batches from the pool, filled sample by sample with
//! each stage timed; a panic while building is the batch's error.

#[cfg(any(test, feature = "testdata"))]
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::loader::Loader;
use super::plans::{Plan, Plans, Span};
use crate::dataset::video::cache::CachedDecoder;
use crate::dataset::video::{DecodeOptions, FrameDecoder, Prefetched, VideoDecoder};
use crate::dataset::{Dataset, DatasetError, Sample, Window};
use crate::loader::batch::{Batch, BatchError, BatchLayout, ImageFormat};
use crate::loader::error::LoaderError;
use crate::loader::pool::BatchPool;
use crate::timing::{available_memory_bytes, stage, TimingTree, TraceTrack};

/// Checks that `in_flight` batches of `batch` samples of `layout` fit in the memory available.
fn check_memory(layout: &BatchLayout, batch: usize, in_flight: usize) -> Result<(), LoaderError> {
    let needed = layout.bytes_per_sample() * batch as u128;
    match available_memory_bytes() {
        Some(available) if needed * in_flight as u128 > available as u128 => {
            Err(LoaderError::Memory { batch, needed, in_flight, available })
        }
        _ => Ok(()),
    }
}

/// A batch as a worker built it, and the time its stages took.
pub(super) type Built = (Result<Batch, LoaderError>, TimingTree);

/// What one thread needs to build batches: the dataset, the window, its own video decoder,
/// a sample to refill and the pool of batches to fill.
pub(super) struct BatchBuilder {
    dataset: Arc<Dataset>,
    window: Arc<Window>,
    plans: Arc<Plans>,
    decoder: Box<dyn FrameDecoder>,
    uint8: bool,
    /// Batches alive at once, for the memory check of the first batch.
    in_flight: usize,
    /// Whether the first batch's layout was checked against the memory available.
    memory_checked: bool,
    /// A sample per slot of the batch, refilled.
    samples: Vec<Sample>,
    /// How the decoder's frames are fetched from a remote root (a batch's at once).
    decode: DecodeOptions,
    /// The batch's (slot, index) pairs in the order they are loaded.
    order: Vec<(usize, usize)>,
    pool: Arc<BatchPool>,
    trace: Option<TraceTrack>,
}

impl BatchBuilder {
    /// A builder with its own video decoder, writing spans on `track` when the loader traces.
    pub(super) fn new(loader: &Loader, track: &str) -> Self {
        let options =
            loader.config.decode_options(loader.dataset.tolerance_s(), loader.dataset.contract());
        let decoder: Box<dyn FrameDecoder> = Box::new(VideoDecoder::new(options.clone()));
        let decoder = match &loader.cache {
            Some(cache) => Box::new(CachedDecoder::new(decoder, cache.clone())),
            None => decoder,
        };
        Self {
            dataset: loader.dataset.clone(),
            window: loader.window.clone(),
            plans: loader.plans.clone(),
            decoder,
            uint8: loader.config.images == ImageFormat::U8,
            in_flight: loader.config.batches_in_flight(),
            memory_checked: false,
            samples: Vec::new(),
            decode: options,
            order: Vec::new(),
            pool: loader.pool.clone(),
            trace: loader.trace.as_ref().map(|trace| trace.track(track)),
        }
    }

    /// Builds the stream's batch `i` from its epoch's `plan` where the batch was taken with it
    /// ([`Plans::claim`]), else from the plan made first if no thread made it yet. A panic while
    /// building is caught, and is the batch's error: it ends the stream with its message, in
    /// whichever thread and delivery order it happens.
    pub(super) fn build_at(&mut self, span: &Span, i: usize, plan: Option<Plan>) -> Built {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.build_at_unguarded(span, i, plan)
        }))
        .unwrap_or_else(|payload| {
            let message = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
                (Some(text), _) => text.to_string(),
                (_, Some(text)) => text.clone(),
                _ => "no message".into(),
            };
            let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
            (Err(LoaderError::Panicked { thread, message }), TimingTree::default())
        })
    }

    fn build_at_unguarded(&mut self, span: &Span, i: usize, plan: Option<Plan>) -> Built {
        #[cfg(any(test, feature = "testdata"))]
        if self.plans.panic_at.load(Ordering::Relaxed) == i {
            panic!("a fault injected at batch {i}");
        }
        let (epoch, position) = span.locate(i);
        let mut timing = TimingTree::default();
        let plan = plan.unwrap_or_else(|| self.plans.get(epoch, &mut timing));
        let (batch, built) = self.build(&plan[position]);
        timing.merge(&built);
        (batch, timing)
    }

    /// Builds one batch in a batch from the pool, timing each stage: `batch` and, inside it,
    /// `batch/parquet` (rows and windows), `batch/video` (cameras; split into `decode` by the
    /// codec and `convert` to RGB), `batch/image` (image features) and `batch/collate` (the
    /// parquet values into the batch; pixels are decoded straight into it).
    fn build(&mut self, indices: &[usize]) -> Built {
        let mut timing = TimingTree::traced(self.trace.clone());
        let mut batch = self.pool.take();
        let (result, inner) = timing.time(stage::BATCH, || {
            let mut inner = TimingTree::traced(self.trace.clone());
            let result = self.fill(indices, &mut batch, &mut inner);
            inner.merge(&self.decoder.take_timing());
            (result, inner)
        });
        timing.merge(&inner);
        match result {
            Ok(()) => (Ok(batch), timing),
            Err(e) => {
                self.pool.give(batch);
                (Err(e), timing)
            }
        }
    }

    fn fill(
        &mut self,
        indices: &[usize],
        batch: &mut Batch,
        timing: &mut TimingTree,
    ) -> Result<(), LoaderError> {
        let Self { dataset, window, decoder, uint8, samples, order, decode, .. } = self;
        let (in_flight, memory_checked) = (self.in_flight, &mut self.memory_checked);
        // Samples are loaded in index order (episode by episode, in time), each into its own
        // slot: a decoder then goes on forward within a GOP instead of restarting at its
        // keyframe, when two samples of the batch fall in one GOP.
        order.clear();
        order.extend(indices.iter().copied().enumerate());
        order.sort_unstable_by_key(|&(_, index)| index);
        samples.resize_with(order.len(), Sample::default);
        for (sample, &(_, index)) in samples.iter_mut().zip(order.iter()) {
            timing
                .time(stage::PARQUET, || dataset.sample_into(index, window, sample))
                .map_err(|source| LoaderError::Sample { index, source })?;
        }
        // The frames of remote files, fetched at once (nothing for local ones).
        let wanted: Vec<(&std::path::Path, &[f64])> = samples
            .iter()
            .flat_map(|s| s.videos.values().map(|v| (v.path.as_path(), v.timestamps.as_slice())))
            .collect();
        let prefetched = Prefetched::fetch(&wanted, decode.frame_match(), &decode.fetch)
            .map_err(|source| LoaderError::Sample { index: order[0].1, source })?;
        decoder.use_prefetched(prefetched);
        for (n, (&(slot, index), sample)) in order.iter().zip(samples.iter_mut()).enumerate() {
            let failed = |source| LoaderError::Sample { index, source };
            let unlike_first =
                |e: BatchError| failed(DatasetError::invalid(dataset.root(), e.to_string()));
            if n == 0 {
                let layout =
                    BatchLayout::of_sample(sample, decoder.as_ref(), *uint8).map_err(failed)?;
                if !*memory_checked {
                    check_memory(&layout, indices.len(), in_flight)?;
                    *memory_checked = true;
                }
                batch.reshape(indices.len(), &layout);
            }
            for key in sample.pixel_keys() {
                let shape =
                    sample.pixel_shape(key, decoder.as_ref()).map_err(failed)?.expect("pixel key");
                let out = batch.pixels_mut(key, slot, &shape).map_err(unlike_first)?;
                let stage =
                    if sample.videos.contains_key(key) { stage::VIDEO } else { stage::IMAGE };
                timing
                    .time(stage, || sample.decode_pixels_into(key, decoder.as_mut(), out))
                    .map_err(failed)?;
            }
            timing
                .time(stage::COLLATE, || batch.write_sample(slot, sample))
                .map_err(unlike_first)?;
        }
        Ok(())
    }
}
