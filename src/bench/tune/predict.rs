//! Tune's predictions, as pure functions of what was measured: the workers a step needs from
//! the step's demand and one worker's rate ([`RateModel`]), and the memory each configuration
//! would hold ([`MemoryModel`]).

use serde::{Deserialize, Serialize};

/// The most workers a prediction names (a step no loader can feed asks for more).
const MOST_WORKERS: usize = 4096;

/// What the step asks of the loader: a batch every step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Demand {
    /// The step alone (the model phase's median, host→device copy included; a replayed step's
    /// mean, which sets its rate), ms.
    pub step_ms: f64,
    /// Samples per batch.
    pub batch: usize,
    /// How a replayed step's times spread; None for one that does not vary by design.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub varies: Option<StepSpread>,
    /// Of `step_ms`, the main process's hand-over of each batch before a step it is fed (a
    /// lerobot-train run's: its uint8 frames to float32, the policy's pre-processor), as the
    /// first configuration's train phase measured it: the step as the run takes it. None where
    /// the step's own time holds it (a model, a run's own policy) or there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover_ms: Option<f64>,
}

/// The spread of a step's times: the median and the 95th percentile, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepSpread {
    /// Median, ms.
    pub median_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
}

impl Demand {
    /// A step of `step_ms` that does not vary by design, feeding batches of `batch`.
    pub fn steady(step_ms: f64, batch: usize) -> Self {
        Self { step_ms, batch, varies: None, handover_ms: None }
    }

    /// The step as a run takes it that hands each batch over for `handover_ms` first.
    pub fn handed_over(self, handover_ms: f64) -> Self {
        Self { step_ms: self.step_ms + handover_ms, handover_ms: Some(handover_ms), ..self }
    }

    /// Samples per second the step consumes when it never waits.
    pub fn samples_per_s(&self) -> f64 {
        self.batch as f64 * 1e3 / self.step_ms
    }

    /// The same step `speedup` times faster.
    pub fn faster(&self, speedup: f64) -> Self {
        let varies = self
            .varies
            .map(|v| StepSpread { median_ms: v.median_ms / speedup, p95_ms: v.p95_ms / speedup });
        let handover_ms = self.handover_ms.map(|ms| ms / speedup);
        Self { step_ms: self.step_ms / speedup, batch: self.batch, varies, handover_ms }
    }
}

/// Loader rates and their prediction for more workers: one worker's samples/s, and what each
/// further worker adds, as a share of one (measured from the second worker; 1 where it was
/// not).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateModel {
    /// The loader alone with one worker, samples/s.
    pub per_worker: f64,
    /// What the second worker added, as a share of the first's rate (0 to 1); None where two
    /// workers were not measured (then taken as 1: linear).
    pub marginal: Option<f64>,
}

impl RateModel {
    /// The model from the loader phases of one and (if measured) two workers.
    pub fn of(one: f64, two: Option<f64>) -> Self {
        let marginal = two.map(|two| ((two - one) / one).clamp(0.0, 1.0));
        Self { per_worker: one, marginal }
    }

    /// Predicted loader samples/s with `workers` (≥ 1) workers.
    pub fn loader_rate(&self, workers: usize) -> f64 {
        let extra = self.marginal.unwrap_or(1.0);
        self.per_worker * (1.0 + extra * workers.saturating_sub(1) as f64)
    }

    /// Predicted train samples/s feeding `demand` with `workers`: with none, loading and the
    /// step take turns in one thread; with some, the slower of the two.
    pub fn train_rate(&self, workers: usize, demand: &Demand) -> f64 {
        let need = demand.samples_per_s();
        if workers == 0 {
            1.0 / (1.0 / need + 1.0 / self.per_worker)
        } else {
            self.loader_rate(workers).min(need)
        }
    }

    /// The fewest workers predicted to train within `target_pct` of the step's own rate; None
    /// when no count up to `MOST_WORKERS` does (the loader does not scale).
    pub fn workers_needed(&self, demand: &Demand, target_pct: f64) -> Option<usize> {
        let enough = demand.samples_per_s() * (1.0 - target_pct / 100.0);
        (0..=MOST_WORKERS).find(|&w| self.train_rate(w, demand) >= enough)
    }
}

/// The memory a configuration holds: a base, what each worker adds, and its batches in flight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemoryModel {
    /// One batch's tensors, bytes.
    pub batch_bytes: u64,
    /// The process without batches (the one-worker loader's peak less its batches), bytes.
    pub base_bytes: u64,
    /// What a worker adds beside its batches (its decoders; a process for LeRobot's), bytes.
    pub per_worker_bytes: u64,
}

impl MemoryModel {
    /// Batches alive at once: `prefetch` per worker (one for none) and the consumer's.
    pub fn batches_in_flight(workers: usize, prefetch: usize) -> u64 {
        (workers.max(1) * prefetch.max(1) + 1) as u64
    }

    /// Predicted peak bytes of `workers` × `prefetch`.
    pub fn bytes(&self, workers: usize, prefetch: usize) -> u64 {
        self.base_bytes
            + self.per_worker_bytes * workers as u64
            + self.batch_bytes * Self::batches_in_flight(workers, prefetch)
    }

    /// The model from the loader phases' peaks at one and (if measured) two workers, each at
    /// `prefetch`; batches alone where no peak is known.
    pub fn of(batch_bytes: u64, prefetch: usize, one: Option<u64>, two: Option<u64>) -> Self {
        let batches = |w| batch_bytes * Self::batches_in_flight(w, prefetch);
        let base_one = one.map(|peak| peak.saturating_sub(batches(1)));
        let per_worker = match (one, two) {
            (Some(one), Some(two)) => {
                two.saturating_sub(one).saturating_sub(batches(2) - batches(1))
            }
            _ => 0,
        };
        Self {
            batch_bytes,
            base_bytes: base_one.map_or(0, |b| b.saturating_sub(per_worker)),
            per_worker_bytes: per_worker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;

    fn demand(step_ms: f64) -> Demand {
        Demand::steady(step_ms, 16)
    }

    #[test]
    fn the_prediction_is_the_fewest_workers_that_feed_the_step() {
        // 100 samples/s per worker, linear; a step of 16 samples every 50 ms needs 320/s.
        let rates = RateModel::of(100.0, Some(200.0));
        assert_eq!(rates.workers_needed(&demand(50.0), 5.0), Some(4), "3 give 300 < 304");
        // A step of 400 ms needs 40/s: one worker; with none, 40 and 100 take turns (28.6/s).
        assert_eq!(rates.workers_needed(&demand(400.0), 5.0), Some(1));
        // A step of 4 s needs 4/s: in-thread loading loses 3.8 %, within 5 %.
        assert_eq!(rates.workers_needed(&demand(4000.0), 5.0), Some(0));
        // A second worker that adds nothing: no count feeds a step that one cannot.
        let flat = RateModel::of(100.0, Some(100.0));
        assert_eq!(flat.workers_needed(&demand(50.0), 5.0), None);
        assert_eq!(flat.marginal, Some(0.0));
        // Half a worker more each: 100, 150, 200, 250, 300, 350.
        let sub = RateModel::of(100.0, Some(150.0));
        assert_eq!(sub.workers_needed(&demand(50.0), 5.0), Some(6));
    }

    #[test]
    fn a_run_that_hands_each_batch_over_asks_for_the_step_as_it_takes_it() {
        // A 400 ms step after a 1200 ms hand-over: 16 samples every 1.6 s, 10/s, which one
        // worker of 100/s feeds (the step alone, 40/s, would too; at 50 ms, 320/s, not).
        let run = demand(400.0).handed_over(1200.0);
        assert_eq!((run.step_ms, run.handover_ms), (1600.0, Some(1200.0)));
        assert!((run.samples_per_s() - 10.0).abs() < 1e-9);
        let rates = RateModel::of(100.0, None);
        assert_eq!(rates.workers_needed(&demand(50.0).handed_over(1200.0), 5.0), Some(1));
        // Twice as fast is the whole step as the run takes it, its hand-over too.
        let faster = run.faster(2.0);
        assert_eq!((faster.step_ms, faster.handover_ms), (800.0, Some(600.0)));
    }

    #[test]
    fn memory_is_a_base_a_share_per_worker_and_the_batches_in_flight() {
        // Batches of 100 MB; peaks of 1.0 GB at one worker (3 in flight) and 1.35 GB at two
        // (5 in flight): base 0.7 GB less a worker's 0.15 GB.
        let m = MemoryModel::of(100_000_000, 2, Some(GB), Some(1_350_000_000));
        assert_eq!(m.per_worker_bytes, 150_000_000);
        assert_eq!(m.bytes(1, 2), GB);
        assert_eq!(m.bytes(2, 2), 1_350_000_000);
        assert_eq!(m.bytes(4, 2), 550_000_000 + 600_000_000 + 900_000_000);
        assert_eq!(MemoryModel::of(100, 2, None, None).bytes(3, 4), 1300);
    }
}
