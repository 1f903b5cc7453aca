//! The loader: batches in sampler order, built by the consuming thread (`workers = 0`) or by
//! worker threads with `prefetch` batches in flight each — PyTorch `DataLoader` semantics.
//!
//! Ordered mode assigns batch `i` to worker `i mod W` and reads the workers' queues round
//! robin, so batches arrive in sampler order whatever each one costs (as PyTorch does).
//! Unordered mode lets any idle worker take the next batch and delivers whichever is ready.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use serde::Serialize;

use super::batch::Batch;
use super::sampler::{batches, epoch_order, SamplerKind, Shard};
use crate::bench::timing::TimingTree;
use crate::dataset::video::{DecodeOptions, VideoDecoder};
use crate::dataset::{Dataset, DatasetError, Window};

/// The loader's knobs, named and meant as in `torch.utils.data.DataLoader`.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
}

type BatchResult = Result<Batch, LoaderError>;

/// A batch and the time its stages took to build it.
type Built = (BatchResult, TimingTree);

/// What one thread needs to build batches: the dataset, the window, its own video decoder.
struct BatchBuilder {
    dataset: Arc<Dataset>,
    window: Arc<Window>,
    decoder: VideoDecoder,
    uint8: bool,
}

impl BatchBuilder {
    /// A builder with its own video decoder (open it on the thread that will use it).
    fn new(dataset: Arc<Dataset>, window: Arc<Window>, config: &LoaderConfig) -> Self {
        let decoder = VideoDecoder::new(DecodeOptions {
            tolerance_s: dataset.tolerance_s(),
            resolution: config.resolution,
            ..DecodeOptions::default()
        });
        Self { dataset, window, decoder, uint8: config.uint8 }
    }

    /// Loads the samples of one batch, decodes their cameras and collates them, timing each
    /// stage: `batch` and, inside it, `batch/sample` (parquet rows and windows),
    /// `batch/decode` (video frames and images to RGB) and `batch/collate`.
    fn build(&mut self, indices: &[usize]) -> Built {
        let mut timing = TimingTree::default();
        let (batch, inner) = timing.time("batch", || {
            let mut inner = TimingTree::default();
            let mut samples = Vec::with_capacity(indices.len());
            for &index in indices {
                let failed = |source| LoaderError::Sample { index, source };
                let sample =
                    inner.time("batch/sample", || self.dataset.sample(index, &self.window));
                let mut sample = match sample {
                    Ok(sample) => sample,
                    Err(e) => return (Err(failed(e)), inner),
                };
                let decoded = inner
                    .time("batch/decode", || sample.decode_pixels(&mut self.decoder, self.uint8));
                if let Err(e) = decoded {
                    return (Err(failed(e)), inner);
                }
                samples.push(sample);
            }
            let batch = inner.time("batch/collate", || Batch::collate(&samples));
            (Ok(batch), inner)
        });
        timing.merge(&inner);
        (batch, timing)
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
        Ok(Self { dataset, window: Arc::new(window), config })
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
    pub fn epoch(&self, epoch: u64) -> Epoch {
        let plan = Arc::new(self.plan(epoch));
        let total = plan.len();
        let workers = self.config.workers;
        let source = if workers == 0 {
            Source::InThread {
                builder: Box::new(BatchBuilder::new(
                    self.dataset.clone(),
                    self.window.clone(),
                    &self.config,
                )),
                plan,
            }
        } else if self.config.ordered {
            let mut receivers = Vec::with_capacity(workers);
            let mut handles = Vec::with_capacity(workers);
            let stop = Arc::new(AtomicBool::new(false));
            for worker in 0..workers {
                let (sender, receiver) = sync_channel(self.config.prefetch);
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
            let (sender, receiver) = sync_channel(workers * self.config.prefetch);
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
        Epoch { source, delivered: 0, total, failed: false, timing: TimingTree::default() }
    }

    fn spawn(
        &self,
        worker: usize,
        plan: Arc<Vec<Vec<usize>>>,
        tasks: impl Iterator<Item = usize> + Send + 'static,
        sender: SyncSender<Built>,
        stop: Arc<AtomicBool>,
    ) -> JoinHandle<()> {
        let (dataset, window, config) =
            (self.dataset.clone(), self.window.clone(), self.config.clone());
        std::thread::Builder::new()
            .name(format!("feedbench-worker-{worker}"))
            .spawn(move || {
                // Each worker opens its own decoders, inside its own thread.
                let mut builder = BatchBuilder::new(dataset, window, &config);
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
    /// and `wait`: the time the consumer was blocked on the queues.
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
        let (result, timing) = match &mut self.source {
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
        self.failed = result.is_err();
        Some(result)
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
