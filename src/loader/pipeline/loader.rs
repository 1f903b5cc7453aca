//! The loader: a dataset, a window and the knobs, checked; the epochs' plans and, where the
//! knobs give it a budget, the decoded-frame cache its threads share; and why an epoch has no
//! batch.

#[cfg(any(test, feature = "testdata"))]
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::plans::Plans;
use crate::dataset::setting::Refusal;
use crate::dataset::video::cache::FrameCache;
use crate::dataset::{Dataset, Window};
use crate::loader::config::LoaderConfig;
use crate::loader::error::LoaderError;
use crate::loader::knobs::{LoaderBackend, LoaderKnob};
use crate::loader::pool::BatchPool;
use crate::timing::{available_memory_bytes, Trace};

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
    pub(super) dataset: Arc<Dataset>,
    pub(super) window: Arc<Window>,
    pub(super) config: LoaderConfig,
    pub(super) pool: Arc<BatchPool>,
    pub(super) plans: Arc<Plans>,
    pub(super) trace: Option<Arc<Trace>>,
    /// The decoded frames kept across epochs, where the config gives them a budget.
    pub(super) cache: Option<Arc<FrameCache>>,
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
            replay: None,
            #[cfg(any(test, feature = "testdata"))]
            panic_at: AtomicUsize::new(usize::MAX),
        });
        Ok(Self { dataset, window, config, pool: Arc::default(), plans, trace: None, cache })
    }

    /// The same loader reading `batches` (global frame indices, recorded once) exactly, epoch
    /// after epoch, in place of its sampler's: one batch order for every reader.
    pub fn replaying(mut self, batches: Arc<Vec<Vec<usize>>>) -> Self {
        let plans = Plans {
            dataset: self.dataset.clone(),
            window: self.window.clone(),
            config: self.config.clone(),
            recent: Mutex::default(),
            replay: Some(batches),
            #[cfg(any(test, feature = "testdata"))]
            panic_at: AtomicUsize::new(usize::MAX),
        };
        self.plans = Arc::new(plans);
        self
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

    /// The plan of `epoch` its batches are built from: the one the loader made, where it is
    /// still kept (the epochs in flight), else made again without keeping it — so that reading
    /// it beside a running stream neither shuffles an epoch again nor evicts a plan the workers
    /// need.
    pub fn epoch_plan(&self, epoch: u64) -> Arc<Vec<Vec<usize>>> {
        self.plans.kept(epoch).unwrap_or_else(|| Arc::new(self.plans.make(epoch)))
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
}
