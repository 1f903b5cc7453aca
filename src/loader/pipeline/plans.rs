//! The epochs' plans: the batches of each epoch, as the sampler orders them, made once and
//! shared by the threads that build them; and the span that numbers a stream's batches across
//! epochs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::dataset::{Dataset, Window};
use crate::loader::config::LoaderConfig;
use crate::loader::sampler::{batches, epoch_order, SamplerKind};
use crate::timing::{stage, TimingTree};

/// The batches of an epoch, as lists of global indices, in delivery order.
pub(super) type Plan = Arc<Vec<Vec<usize>>>;

/// The epochs' plans, made once by whichever thread first needs one and kept for the few
/// epochs that workers can be apart.
pub(super) struct Plans {
    pub(super) dataset: Arc<Dataset>,
    pub(super) window: Arc<Window>,
    pub(super) config: LoaderConfig,
    pub(super) recent: Mutex<Vec<(u64, Plan)>>,
    /// Batches recorded once, every epoch's plan in place of the sampler's
    /// ([`Loader::replaying`](super::loader::Loader::replaying)).
    pub(super) replay: Option<Plan>,
    /// Test builds: the stream's batch whose building panics ([`Loader::panic_at`](super::loader::Loader::panic_at)).
    #[cfg(any(test, feature = "testdata"))]
    pub(super) panic_at: AtomicUsize,
}

impl Plans {
    /// Epochs kept: the consumer's and the next, which workers start while the consumer ends
    /// this one (they are at most `workers × prefetch` batches ahead). A plan holds every index
    /// of an epoch, so only epochs shorter than that are ever made twice.
    const KEPT: usize = 2;

    /// The plan of `epoch`, made (and timed as `sampler` in `timing`) unless already made.
    /// It is made under the lock, so that workers reaching a new epoch together make it once.
    pub(super) fn get(&self, epoch: u64, timing: &mut TimingTree) -> Plan {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        self.get_locked(&mut recent, epoch, timing)
    }

    /// The plan of `epoch` where it is kept; nothing is made or evicted.
    pub(super) fn kept(&self, epoch: u64) -> Option<Plan> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.iter().find(|(e, _)| *e == epoch).map(|(_, plan)| plan.clone())
    }

    /// [`Plans::get`], `recent` locked.
    fn get_locked(
        &self,
        recent: &mut Vec<(u64, Plan)>,
        epoch: u64,
        timing: &mut TimingTree,
    ) -> Plan {
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

    /// Takes the stream's next batch from `next` and, in the same lock, its epoch's plan (made,
    /// and timed in `timing`, unless already made): None past the stream's end. Workers that
    /// take batches in turn take them so; a worker delayed between taking a batch and getting
    /// its plan (a busy machine) would otherwise find the plan dropped once the others were two
    /// epochs on, and make it again.
    pub(super) fn claim(
        &self,
        next: &AtomicUsize,
        span: &Span,
        timing: &mut TimingTree,
    ) -> Option<(usize, Plan)> {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let i = next.fetch_add(1, Ordering::Relaxed);
        if !span.contains(i) {
            return None;
        }
        let plan = self.get_locked(&mut recent, span.locate(i).0, timing);
        Some((i, plan))
    }

    /// The indices the sampler draws from: every frame of the selected episodes, or (episode
    /// aware) every frame but the last `drop_n_last_frames` of each.
    pub(super) fn candidates(&self) -> Vec<usize> {
        match self.config.sampler {
            SamplerKind::EpisodeAware => {
                self.dataset.sample_indices(self.config.drop_n_last_frames(&self.window))
            }
            SamplerKind::Sequential | SamplerKind::Shuffled => {
                self.dataset.episodes().flat_map(|e| e.from..e.to).collect()
            }
        }
    }

    pub(super) fn make(&self, epoch: u64) -> Vec<Vec<usize>> {
        if let Some(replay) = &self.replay {
            return replay.to_vec();
        }
        let c = &self.config;
        let order = epoch_order(c.sampler, self.candidates(), c.seed, epoch, c.shard, c.drop_last);
        batches(&order, c.batch_size, c.drop_last)
    }
}

/// The batches a stream delivers, numbered from 0 across epochs: batch `i` of the stream is
/// batch `i mod per_epoch` of epoch `first + i / per_epoch`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) first: u64,
    pub(super) per_epoch: usize,
    /// Batches in the stream; None runs epoch after epoch.
    pub(super) total: Option<usize>,
}

impl Span {
    /// The epoch and the batch within it of the stream's batch `i`.
    pub(super) fn locate(&self, i: usize) -> (u64, usize) {
        (self.first + (i / self.per_epoch) as u64, i % self.per_epoch)
    }

    pub(super) fn contains(&self, i: usize) -> bool {
        self.total.is_none_or(|total| i < total)
    }
}
