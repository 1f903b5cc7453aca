//! The loader: batches in sampler order, built by the consuming thread (`workers = 0`) or by
//! worker threads with `prefetch` batches in flight each — PyTorch `DataLoader` semantics.
//!
//! Ordered mode assigns batch `i` to worker `i mod W` and reads the workers' queues round
//! robin, so batches arrive in sampler order whatever each one costs (as PyTorch does).
//! Unordered mode lets any idle worker take the next batch and delivers whichever is ready.
//!
//! [`Loader::epoch`] runs one epoch, with workers started for it and gone after it (PyTorch's
//! default). [`Loader::epochs`] runs epoch after epoch with the same workers, which go on into
//! the next epoch's batches while the consumer finishes this one's: the pipeline never drains
//! at an epoch boundary, and decoders stay open.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use super::batch::{Batch, BatchError, BatchLayout, ImageFormat};
use super::cache::{CachedDecoder, FrameCache};
use super::config::LoaderConfig;
pub use super::error::LoaderError;
use super::knobs::{LoaderBackend, LoaderKnob};
use super::pool::BatchPool;
pub use super::pool::LoadedBatch;
use super::sampler::{batches, epoch_order, SamplerKind};
use crate::dataset::setting::Refusal;
use crate::dataset::video::{FrameDecoder, VideoDecoder};
use crate::dataset::{Dataset, DatasetError, Sample, Window};
use crate::timing::{
    available_memory_bytes, stage, starting_threads, TimingTree, Trace, TraceTrack,
};

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

/// `budget` bytes for the decoded-frame cache, if the memory available holds them.
fn check_cache(budget: u64) -> Result<u64, LoaderError> {
    match available_memory_bytes() {
        Some(available) if budget > available => {
            Err(LoaderError::Refused(Refusal::new(move |name| {
                format!(
                    "a frame cache of {:.2} GB does not fit in the {:.2} GB of memory available: \
                     lower {}",
                    budget as f64 / 1e9,
                    available as f64 / 1e9,
                    name(LoaderKnob::CACHE.setting())
                )
            })))
        }
        _ => Ok(budget),
    }
}

/// A dataset, a window and the knobs: yields epochs of batches.
pub struct Loader {
    dataset: Arc<Dataset>,
    window: Arc<Window>,
    config: LoaderConfig,
    pool: Arc<BatchPool>,
    plans: Arc<Plans>,
    trace: Option<Arc<Trace>>,
    /// The decoded frames kept across epochs, where the config gives them a budget.
    cache: Option<Arc<FrameCache>>,
}

/// The batches of an epoch, as lists of global indices, in delivery order.
type Plan = Arc<Vec<Vec<usize>>>;

/// The epochs' plans, made once by whichever thread first needs one and kept for the few
/// epochs that workers can be apart.
struct Plans {
    dataset: Arc<Dataset>,
    window: Arc<Window>,
    config: LoaderConfig,
    recent: Mutex<Vec<(u64, Plan)>>,
    /// Test builds: the stream's batch whose building panics ([`Loader::panic_at`]).
    #[cfg(any(test, feature = "testdata"))]
    panic_at: AtomicUsize,
}

impl Plans {
    /// Epochs kept: the consumer's and the next, which workers start while the consumer ends
    /// this one (they are at most `workers × prefetch` batches ahead). A plan holds every index
    /// of an epoch, so only epochs shorter than that are ever made twice.
    const KEPT: usize = 2;

    /// The plan of `epoch`, made (and timed as `sampler` in `timing`) unless already made.
    /// It is made under the lock, so that workers reaching a new epoch together make it once.
    fn get(&self, epoch: u64, timing: &mut TimingTree) -> Plan {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, plan)) = recent.iter().find(|(e, _)| *e == epoch) {
            return plan.clone();
        }
        let plan = Arc::new(timing.time(stage::SAMPLER, || self.make(epoch)));
        if recent.len() == Self::KEPT {
            let oldest = recent.iter().map(|(e, _)| *e).min().expect("not empty");
            recent.retain(|(e, _)| *e != oldest);
        }
        recent.push((epoch, plan.clone()));
        plan
    }

    /// The indices the sampler draws from: every frame of the selected episodes, or (episode
    /// aware) every frame but the last `drop_n_last_frames` of each.
    fn candidates(&self) -> Vec<usize> {
        match self.config.sampler {
            SamplerKind::EpisodeAware => {
                self.dataset.sample_indices(self.config.drop_n_last_frames(&self.window))
            }
            SamplerKind::Sequential | SamplerKind::Shuffled => {
                self.dataset.episodes().flat_map(|e| e.from..e.to).collect()
            }
        }
    }

    fn make(&self, epoch: u64) -> Vec<Vec<usize>> {
        let c = &self.config;
        let order = epoch_order(c.sampler, self.candidates(), c.seed, epoch, c.shard, c.drop_last);
        batches(&order, c.batch_size, c.drop_last)
    }
}

/// The batches a stream delivers, numbered from 0 across epochs: batch `i` of the stream is
/// batch `i mod per_epoch` of epoch `first + i / per_epoch`.
#[derive(Debug, Clone, Copy)]
struct Span {
    first: u64,
    per_epoch: usize,
    /// Batches in the stream; None runs epoch after epoch.
    total: Option<usize>,
}

impl Span {
    /// The epoch and the batch within it of the stream's batch `i`.
    fn locate(&self, i: usize) -> (u64, usize) {
        (self.first + (i / self.per_epoch) as u64, i % self.per_epoch)
    }

    fn contains(&self, i: usize) -> bool {
        self.total.is_none_or(|total| i < total)
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
    plans: Arc<Plans>,
    decoder: Box<dyn FrameDecoder>,
    uint8: bool,
    /// Batches alive at once, for the memory check of the first batch.
    in_flight: usize,
    /// Whether the first batch's layout was checked against the memory available.
    memory_checked: bool,
    sample: Sample,
    /// The batch's (slot, index) pairs in the order they are loaded.
    order: Vec<(usize, usize)>,
    pool: Arc<BatchPool>,
    trace: Option<TraceTrack>,
}

impl BatchBuilder {
    /// A builder with its own video decoder, writing spans on `track` when the loader traces.
    fn new(loader: &Loader, track: &str) -> Self {
        let options = loader.config.decode_options(loader.dataset.tolerance_s());
        let decoder: Box<dyn FrameDecoder> = Box::new(VideoDecoder::new(options));
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
            sample: Sample::default(),
            order: Vec::new(),
            pool: loader.pool.clone(),
            trace: loader.trace.as_ref().map(|trace| trace.track(track)),
        }
    }

    /// Builds the stream's batch `i`; the epoch's plan is made first if no thread made it yet.
    /// A panic while building is caught, and is the batch's error: it ends the stream with its
    /// message, in whichever thread and delivery order it happens.
    fn build_at(&mut self, span: &Span, i: usize) -> Built {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.build_at_unguarded(span, i)))
            .unwrap_or_else(|payload| {
                let message =
                    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
                        (Some(text), _) => text.to_string(),
                        (_, Some(text)) => text.clone(),
                        _ => "no message".into(),
                    };
                let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
                (Err(LoaderError::Panicked { thread, message }), TimingTree::default())
            })
    }

    fn build_at_unguarded(&mut self, span: &Span, i: usize) -> Built {
        #[cfg(any(test, feature = "testdata"))]
        if self.plans.panic_at.load(Ordering::Relaxed) == i {
            panic!("a fault injected at batch {i}");
        }
        let (epoch, position) = span.locate(i);
        let mut timing = TimingTree::default();
        let plan = self.plans.get(epoch, &mut timing);
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
        let Self { dataset, window, decoder, uint8, sample, order, .. } = self;
        let (in_flight, memory_checked) = (self.in_flight, &mut self.memory_checked);
        // Samples are loaded in index order (episode by episode, in time), each into its own
        // slot: a decoder then goes on forward within a GOP instead of restarting at its
        // keyframe, when two samples of the batch fall in one GOP.
        order.clear();
        order.extend(indices.iter().copied().enumerate());
        order.sort_unstable_by_key(|&(_, index)| index);
        for (n, &(slot, index)) in order.iter().enumerate() {
            let failed = |source| LoaderError::Sample { index, source };
            let unlike_first =
                |e: BatchError| failed(DatasetError::invalid(dataset.root(), e.to_string()));
            timing
                .time(stage::PARQUET, || dataset.sample_into(index, window, sample))
                .map_err(failed)?;
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

impl Loader {
    /// A loader over `dataset` with `window`; checks the configuration.
    pub fn new(
        dataset: Arc<Dataset>,
        window: Window,
        config: LoaderConfig,
    ) -> Result<Self, LoaderError> {
        LoaderKnob::check_all(&config).map_err(LoaderError::Refused)?;
        LoaderKnob::refuse_lacking(&config, LoaderBackend::Native).map_err(LoaderError::Refused)?;
        let cache = match config.cache_bytes {
            0 => None,
            budget => Some(Arc::new(FrameCache::new(check_cache(budget)?))),
        };
        let window = Arc::new(window);
        let plans = Arc::new(Plans {
            dataset: dataset.clone(),
            window: window.clone(),
            config: config.clone(),
            recent: Mutex::default(),
            #[cfg(any(test, feature = "testdata"))]
            panic_at: AtomicUsize::new(usize::MAX),
        });
        Ok(Self { dataset, window, config, pool: Arc::default(), plans, trace: None, cache })
    }

    /// Test builds: building the stream's batch `batch` panics, in whichever thread builds it,
    /// to check that a panic ends the stream with its error.
    #[cfg(any(test, feature = "testdata"))]
    pub fn panic_at(&self, batch: usize) {
        self.plans.panic_at.store(batch, Ordering::Relaxed);
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

    /// The decoded-frame cache, where the config gives it a budget.
    pub fn cache(&self) -> Option<&FrameCache> {
        self.cache.as_deref()
    }

    /// The batches of epoch `epoch`, as lists of global indices, in delivery order.
    pub fn plan(&self, epoch: u64) -> Vec<Vec<usize>> {
        self.plans.make(epoch)
    }

    /// Why an epoch has no batch, in words a user can act on: no episode, episodes too short
    /// for the window, a rank with no share, or `drop_last` with fewer samples than a batch.
    pub fn why_no_batch(&self) -> Refusal {
        let c = &self.config;
        let episodes = self.dataset.episodes().count();
        let frames: usize = self.dataset.episodes().map(|e| e.to - e.from).sum();
        let candidates = self.plans.candidates();
        let shard = c.shard.split(candidates.clone(), c.drop_last).len();
        let candidates = candidates.len();
        let (drop_n_last, (rank, world), batch) =
            (c.drop_n_last_frames(&self.window), (c.shard.rank, c.shard.world), c.batch_size);
        if episodes == 0 {
            Refusal::new(|_| "no episode is selected".into())
        } else if candidates == 0 {
            Refusal::new(move |name| {
                format!(
                    "the episode-aware sampler drops the last {drop_n_last} frames of each \
                     episode ({}), and none of the {episodes} selected episodes is longer \
                     ({frames} frames in all): select longer episodes, lower {}, or {} shuffled",
                    name(LoaderKnob::DROP_N_LAST_FRAMES.setting()),
                    name(LoaderKnob::DROP_N_LAST_FRAMES.setting()),
                    name(LoaderKnob::SAMPLER.setting())
                )
            })
        } else if shard == 0 {
            Refusal::new(move |_| {
                format!("rank {rank} of {world} gets none of the {candidates} samples")
            })
        } else {
            Refusal::new(move |name| {
                format!(
                    "{} with {shard} samples, fewer than a batch of {batch}",
                    name(LoaderKnob::DROP_LAST.setting())
                )
            })
        }
    }

    /// Starts epoch `epoch`: its workers begin loading at once, and stop at its end.
    ///
    /// Each worker has at most `prefetch` batches in flight, as in PyTorch: built and
    /// waiting in its queue, or being built (it holds a finished batch until the queue has
    /// room). With the batch the consumer holds, memory stays at `workers × prefetch + 1`
    /// batches.
    pub fn epoch(&self, epoch: u64) -> Batches {
        self.stream(epoch, Some(1))
    }

    /// Runs epoch after epoch from `first`, with the same workers and decoders throughout:
    /// workers go on into the next epoch's batches while the consumer takes the last ones of
    /// this one, so nothing drains at an epoch boundary. Batches and their order are those of
    /// [`Loader::epoch`] for each epoch in turn; memory is bounded as there.
    pub fn epochs(&self, first: u64) -> Batches {
        self.stream(first, None)
    }

    fn stream(&self, first: u64, epochs: Option<usize>) -> Batches {
        let mut timing = TimingTree::default();
        let per_epoch = self.plans.get(first, &mut timing).len();
        let total = if per_epoch == 0 { Some(0) } else { epochs.map(|n| n * per_epoch) };
        let span = Span { first, per_epoch, total };
        let workers = self.config.workers;
        let queued = self.config.prefetch.saturating_sub(1);
        let source = if workers == 0 {
            Source::InThread(Box::new(BatchBuilder::new(self, "trainer")))
        } else if self.config.ordered {
            let mut receivers = Vec::with_capacity(workers);
            let mut handles = Vec::with_capacity(workers);
            let stop = Arc::new(AtomicBool::new(false));
            for worker in 0..workers {
                let (sender, receiver) = sync_channel(queued);
                let tasks = (worker..).step_by(workers).take_while(move |&i| span.contains(i));
                handles.push(self.spawn(worker, span, tasks, sender, stop.clone()));
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
                            .take_while(move |&i| span.contains(i));
                    self.spawn(worker, span, tasks, sender.clone(), stop.clone())
                })
                .collect();
            Source::Workers { receivers: vec![receiver], handles, stop }
        };
        let pool = Arc::downgrade(&self.pool);
        Batches { source, span, pool, delivered: 0, failed: false, timing }
    }

    fn spawn(
        &self,
        worker: usize,
        span: Span,
        tasks: impl Iterator<Item = usize> + Send + 'static,
        sender: SyncSender<Built>,
        stop: Arc<AtomicBool>,
    ) -> JoinHandle<()> {
        // Each worker opens its own decoders, once started on its own thread.
        let name = format!("feedbench-worker-{worker}");
        let mut builder = BatchBuilder::new(self, &name);
        // Not while a worker's decoder starts its own threads, so that they are told apart.
        let _starting = starting_threads();
        std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                for task in tasks {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let result = builder.build_at(&span, task);
                    let failed = result.0.is_err();
                    // A closed channel means the stream was dropped: stop quietly.
                    if sender.send(result).is_err() || failed {
                        return;
                    }
                }
            })
            .expect("spawning a loader worker thread")
    }
}

enum Source {
    InThread(Box<BatchBuilder>),
    Workers { receivers: Vec<Receiver<Built>>, handles: Vec<JoinHandle<()>>, stop: Arc<AtomicBool> },
}

/// Batches of one epoch ([`Loader::epoch`]) or of epoch after epoch ([`Loader::epochs`]).
/// Dropping it stops the workers and frees their batches.
pub struct Batches {
    source: Source,
    span: Span,
    pool: Weak<BatchPool>,
    delivered: usize,
    failed: bool,
    timing: TimingTree,
}

impl Batches {
    /// Batches in each epoch (0 when the sampler yields no index).
    pub fn per_epoch(&self) -> usize {
        self.span.per_epoch
    }

    /// The stages of the batches delivered so far (summed over the threads that built them),
    /// `sampler` (the epochs' orders) and `wait`: the time the consumer was blocked on the
    /// queues.
    pub fn timing(&self) -> &TimingTree {
        &self.timing
    }

    /// Hands over the stages recorded so far and starts afresh (to leave out a warm-up).
    pub fn take_timing(&mut self) -> TimingTree {
        std::mem::take(&mut self.timing)
    }
}

impl Iterator for Batches {
    type Item = BatchResult;

    fn next(&mut self) -> Option<BatchResult> {
        if self.failed || !self.span.contains(self.delivered) {
            return None;
        }
        let position = self.delivered;
        let (built, timing) = match &mut self.source {
            Source::InThread(builder) => builder.build_at(&self.span, position),
            Source::Workers { receivers, .. } => {
                let worker = position % receivers.len();
                // Workers send their errors, panics included, before they end.
                let ordered = receivers.len() > 1;
                let gone = || {
                    let thread = match ordered {
                        true => format!("feedbench-worker-{worker}"),
                        false => "feedbench-worker-*".to_string(),
                    };
                    let message = "it ended without a word".to_string();
                    (Err(LoaderError::Panicked { thread, message }), TimingTree::default())
                };
                self.timing
                    .time(stage::WAIT, || receivers[worker].recv().unwrap_or_else(|_| gone()))
            }
        };
        self.timing.merge(&timing);
        self.delivered += 1;
        self.failed = built.is_err();
        Some(built.map(|batch| LoadedBatch::new(batch, self.pool.clone())))
    }
}

impl Drop for Batches {
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
