//! The loader: batches in sampler order, built by the consuming thread (`workers = 0`) or by
//! worker threads with `prefetch` batches in flight each — PyTorch `DataLoader` semantics.
//!
//! Ordered mode assigns batch `i` to worker `i mod W` and reads the workers' queues round
//! robin, so batches arrive in sampler order whatever each one costs (as PyTorch does).
//! Unordered mode lets any idle worker take the next batch and delivers whichever is ready.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

use super::batch::{Batch, BatchLayout};
use super::sampler::{batches, epoch_order, SamplerKind, Shard};
use crate::bench::timing::TimingTree;
use crate::bench::trace::{Trace, TraceTrack};
use crate::dataset::video::{DecodeOptions, VideoDecoder};
use crate::dataset::{Dataset, DatasetError, Sample, Window};

/// The loader's knobs, named and meant as in `torch.utils.data.DataLoader`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoaderConfig {
    /// Worker threads; 0 loads in the consuming thread.
    pub workers: usize,
    /// Batches in flight per worker (`prefetch_factor`).
    pub prefetch: usize,
    /// Samples per batch.
    pub batch_size: usize,
    /// Drop the last incomplete batch.
    pub drop_last: bool,
    /// The order of indices.
    pub sampler: SamplerKind,
    /// Seed of the shuffled orders.
    pub seed: u64,
    /// This process's share of the data.
    pub shard: Shard,
    /// Deliver batches in sampler order (true) or as soon as any is ready.
    pub ordered: bool,
    /// Camera frames resized to `(height, width)`; native size when None.
    pub resolution: Option<(u32, u32)>,
    /// Camera frames as uint8 (normalised later, on the device) instead of float32 in [0, 1].
    pub uint8: bool,
}

impl Default for LoaderConfig {
    /// LeRobot's training defaults: 4 workers, batch 8, prefetch 2, episode-aware shuffling.
    fn default() -> Self {
        Self {
            workers: 4,
            prefetch: 2,
            batch_size: 8,
            drop_last: false,
            sampler: SamplerKind::EpisodeAware,
            seed: 0,
            shard: Shard::default(),
            ordered: true,
            resolution: None,
            uint8: false,
        }
    }
}

impl LoaderConfig {
    /// The most batches alive at once: `prefetch` per worker (one for `workers = 0`) and the
    /// one the consumer holds. The batch pool never grows past it.
    pub fn batches_in_flight(&self) -> usize {
        self.workers.max(1) * self.prefetch.max(1) + 1
    }
}

/// Why a batch could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// A sample failed to load.
    #[error("sample index {index}: {source}")]
    Sample {
        /// The global index of the sample.
        index: usize,
        /// What went wrong, naming the file.
        #[source]
        source: DatasetError,
    },
    /// The configuration cannot run.
    #[error("loader configuration: {0}")]
    Config(String),
    /// A worker thread panicked (a bug: please report it).
    #[error("loader worker {0} panicked")]
    WorkerPanicked(usize),
}

/// A dataset, a window and the knobs: yields epochs of batches.
pub struct Loader {
    dataset: Arc<Dataset>,
    window: Arc<Window>,
    config: LoaderConfig,
    pool: Arc<BatchPool>,
    trace: Option<Arc<Trace>>,
}

/// Batches handed back by the consumer (see [`LoadedBatch`]), for the workers to fill again:
/// buffers are allocated for the batches in flight only, never per sample.
#[derive(Default)]
struct BatchPool {
    free: Mutex<Vec<Batch>>,
}

impl BatchPool {
    /// A batch to fill: a returned one when there is one.
    fn take(&self) -> Batch {
        self.free.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default()
    }

    fn give(&self, batch: Batch) {
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

type BatchResult = Result<LoadedBatch, LoaderError>;

/// A batch as a worker built it, and the time its stages took.
type Built = (Result<Batch, LoaderError>, TimingTree);

/// What one thread needs to build batches: the dataset, the window, its own video decoder,
/// a sample to refill and the pool of batches to fill.
struct BatchBuilder {
    dataset: Arc<Dataset>,
    window: Arc<Window>,
    decoder: VideoDecoder,
    uint8: bool,
    sample: Sample,
    pool: Arc<BatchPool>,
    trace: Option<TraceTrack>,
}

impl BatchBuilder {
    /// A builder with its own video decoder, writing spans on `track` when the loader traces.
    fn new(loader: &Loader, track: &str) -> Self {
        let decoder = VideoDecoder::new(DecodeOptions {
            tolerance_s: loader.dataset.tolerance_s(),
            resolution: loader.config.resolution,
            ..DecodeOptions::default()
        });
        Self {
            dataset: loader.dataset.clone(),
            window: loader.window.clone(),
            decoder,
            uint8: loader.config.uint8,
            sample: Sample::default(),
            pool: loader.pool.clone(),
            trace: loader.trace.as_ref().map(|trace| trace.track(track)),
        }
    }

    /// Builds one batch in a batch from the pool, timing each stage: `batch` and, inside it,
    /// `batch/parquet` (rows and windows), `batch/video` (cameras; split into `decode` by the
    /// codec and `convert` to RGB), `batch/image` (image features) and `batch/collate` (the
    /// parquet values into the batch; pixels are decoded straight into it).
    fn build(&mut self, indices: &[usize]) -> Built {
        let mut timing = TimingTree::traced(self.trace.clone());
        let mut batch = self.pool.take();
        let (result, inner) = timing.time("batch", || {
            let mut inner = TimingTree::traced(self.trace.clone());
            let result = self.fill(indices, &mut batch, &mut inner);
            inner.merge_under("batch/video", &self.decoder.take_timing());
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
        let Self { dataset, window, decoder, uint8, sample, .. } = self;
        for (slot, &index) in indices.iter().enumerate() {
            let failed = |source| LoaderError::Sample { index, source };
            let unlike_first = |what: String| failed(DatasetError::invalid(dataset.root(), what));
            timing
                .time("batch/parquet", || dataset.sample_into(index, window, sample))
                .map_err(failed)?;
            if slot == 0 {
                let layout = BatchLayout::of_sample(sample, decoder, *uint8).map_err(failed)?;
                batch.reshape(indices.len(), &layout);
            }
            for key in sample.pixel_keys() {
                let shape = sample.pixel_shape(key, decoder).map_err(failed)?.expect("pixel key");
                let out = batch.pixels_mut(key, slot, &shape).map_err(unlike_first)?;
                let stage =
                    if sample.videos.contains_key(key) { "batch/video" } else { "batch/image" };
                timing
                    .time(stage, || sample.decode_pixels_into(key, decoder, out))
                    .map_err(failed)?;
            }
            timing
                .time("batch/collate", || batch.write_sample(slot, sample))
                .map_err(unlike_first)?;
        }
        Ok(())
    }
}

impl Loader {
    /// A loader over `dataset` with `window`; checks the configuration.
    pub fn new(
        dataset: Arc<Dataset>,
        window: Window,
        config: LoaderConfig,
    ) -> Result<Self, LoaderError> {
        if config.batch_size == 0 {
            return Err(LoaderError::Config("batch size must be at least 1".into()));
        }
        if config.workers > 0 && config.prefetch == 0 {
            return Err(LoaderError::Config("prefetch must be at least 1 with workers".into()));
        }
        Ok(Self { dataset, window: Arc::new(window), config, pool: Arc::default(), trace: None })
    }

    /// Records the stages of the batches of later epochs as spans of `trace`, one track per
    /// worker thread (`trainer` for in-thread loading); None stops tracing.
    pub fn set_trace(&mut self, trace: Option<Arc<Trace>>) {
        self.trace = trace;
    }

    /// The dataset it reads.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// The configuration.
    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }

    /// The batches of epoch `epoch`, as lists of global indices, in delivery order.
    pub fn plan(&self, epoch: u64) -> Vec<Vec<usize>> {
        let candidates = match self.config.sampler {
            SamplerKind::EpisodeAware => self.dataset.sample_indices(&self.window),
            SamplerKind::Sequential | SamplerKind::Shuffled => {
                self.dataset.episodes().flat_map(|e| e.from..e.to).collect()
            }
        };
        let c = &self.config;
        let order = epoch_order(c.sampler, candidates, c.seed, epoch, c.shard, c.drop_last);
        batches(&order, c.batch_size, c.drop_last)
    }

    /// Starts epoch `epoch`: its workers begin loading at once.
    ///
    /// Each worker has at most `prefetch` batches in flight, as in PyTorch: built and
    /// waiting in its queue, or being built (it holds a finished batch until the queue has
    /// room). With the batch the consumer holds, memory stays at `workers × prefetch + 1`
    /// batches.
    pub fn epoch(&self, epoch: u64) -> Epoch {
        let mut timing = TimingTree::default();
        let plan = Arc::new(timing.time("sampler", || self.plan(epoch)));
        let total = plan.len();
        let workers = self.config.workers;
        let queued = self.config.prefetch.saturating_sub(1);
        let source = if workers == 0 {
            Source::InThread { builder: Box::new(BatchBuilder::new(self, "trainer")), plan }
        } else if self.config.ordered {
            let mut receivers = Vec::with_capacity(workers);
            let mut handles = Vec::with_capacity(workers);
            let stop = Arc::new(AtomicBool::new(false));
            for worker in 0..workers {
                let (sender, receiver) = sync_channel(queued);
                let batches: Vec<usize> = (worker..total).step_by(workers).collect();
                handles.push(self.spawn(
                    worker,
                    plan.clone(),
                    batches.into_iter(),
                    sender,
                    stop.clone(),
                ));
                receivers.push(receiver);
            }
            Source::Workers { receivers, handles, stop }
        } else {
            let (sender, receiver) = sync_channel(workers * queued);
            let stop = Arc::new(AtomicBool::new(false));
            let next = Arc::new(AtomicUsize::new(0));
            let handles = (0..workers)
                .map(|worker| {
                    let next = next.clone();
                    let tasks =
                        std::iter::from_fn(move || Some(next.fetch_add(1, Ordering::Relaxed)))
                            .take_while(move |&i| i < total);
                    self.spawn(worker, plan.clone(), tasks, sender.clone(), stop.clone())
                })
                .collect();
            Source::Workers { receivers: vec![receiver], handles, stop }
        };
        let pool = Arc::downgrade(&self.pool);
        Epoch { source, pool, delivered: 0, total, failed: false, timing }
    }

    fn spawn(
        &self,
        worker: usize,
        plan: Arc<Vec<Vec<usize>>>,
        tasks: impl Iterator<Item = usize> + Send + 'static,
        sender: SyncSender<Built>,
        stop: Arc<AtomicBool>,
    ) -> JoinHandle<()> {
        // Each worker opens its own decoders, once started on its own thread.
        let name = format!("feedbench-worker-{worker}");
        let mut builder = BatchBuilder::new(self, &name);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                for task in tasks {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let result = builder.build(&plan[task]);
                    let failed = result.0.is_err();
                    // A closed channel means the epoch was dropped: stop quietly.
                    if sender.send(result).is_err() || failed {
                        return;
                    }
                }
            })
            .expect("spawning a loader worker thread")
    }
}

enum Source {
    InThread { builder: Box<BatchBuilder>, plan: Arc<Vec<Vec<usize>>> },
    Workers { receivers: Vec<Receiver<Built>>, handles: Vec<JoinHandle<()>>, stop: Arc<AtomicBool> },
}

/// One epoch's batches. Dropping it mid-epoch stops the workers and frees their batches.
pub struct Epoch {
    source: Source,
    pool: Weak<BatchPool>,
    delivered: usize,
    total: usize,
    failed: bool,
    timing: TimingTree,
}

impl Epoch {
    /// Batches in the epoch.
    pub fn len(&self) -> usize {
        self.total
    }

    /// True for an epoch without batches.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The stages of the batches delivered so far (summed over the threads that built them),
    /// `sampler` (the epoch's order) and `wait`: the time the consumer was blocked on the
    /// queues.
    pub fn timing(&self) -> &TimingTree {
        &self.timing
    }

    /// Hands over the stages recorded so far and starts afresh (to leave out a warm-up).
    pub fn take_timing(&mut self) -> TimingTree {
        std::mem::take(&mut self.timing)
    }
}

impl Iterator for Epoch {
    type Item = BatchResult;

    fn next(&mut self) -> Option<BatchResult> {
        if self.failed || self.delivered == self.total {
            return None;
        }
        let position = self.delivered;
        let (built, timing) = match &mut self.source {
            Source::InThread { builder, plan } => builder.build(&plan[position]),
            Source::Workers { receivers, .. } => {
                let worker = position % receivers.len();
                // A worker that ended without sending has panicked (errors are sent).
                let panicked = || (Err(LoaderError::WorkerPanicked(worker)), TimingTree::default());
                self.timing.time("wait", || receivers[worker].recv().unwrap_or_else(|_| panicked()))
            }
        };
        self.timing.merge(&timing);
        self.delivered += 1;
        self.failed = built.is_err();
        Some(built.map(|batch| LoadedBatch { batch, pool: self.pool.clone() }))
    }
}

impl Drop for Epoch {
    fn drop(&mut self) {
        if let Source::Workers { receivers, handles, stop } = &mut self.source {
            stop.store(true, Ordering::Relaxed);
            // Closing the queues wakes workers blocked on a full one.
            receivers.clear();
            for handle in handles.drain(..) {
                let _ = handle.join();
            }
        }
    }
}
