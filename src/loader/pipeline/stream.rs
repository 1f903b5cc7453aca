//! The loader's streams of batches, in sampler order, built by the consuming thread
//! (`workers = 0`) or by worker threads with `prefetch` batches in flight each — PyTorch
//! `DataLoader` semantics.
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
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use super::builder::{BatchBuilder, Built};
use super::loader::Loader;
use super::plans::{Plan, Span};
use crate::loader::error::LoaderError;
use crate::loader::pool::{BatchPool, LoadedBatch};
use crate::timing::{stage, starting_threads, TimingTree};

type BatchResult = Result<LoadedBatch, LoaderError>;

impl Loader {
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
                let tasks = (worker..)
                    .step_by(workers)
                    .take_while(move |&i| span.contains(i))
                    .map(|i| (i, None, TimingTree::default()));
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
                    let (next, plans) = (next.clone(), self.plans.clone());
                    // Each batch taken with its epoch's plan.
                    let tasks = std::iter::from_fn(move || {
                        let mut timing = TimingTree::default();
                        let (i, plan) = plans.claim(&next, &span, &mut timing)?;
                        Some((i, Some(plan), timing))
                    });
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
        tasks: impl Iterator<Item = Task> + Send + 'static,
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
                for (i, plan, taken) in tasks {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let mut result = builder.build_at(&span, i, plan);
                    result.1.merge(&taken);
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

/// A batch for a worker to build: its number in the stream, its epoch's plan where it was taken
/// with it, and the time its plan took to make there.
type Task = (usize, Option<Plan>, TimingTree);

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
            Source::InThread(builder) => builder.build_at(&self.span, position, None),
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
