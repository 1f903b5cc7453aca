//! The figures of each phase, as results keep them: [`LoaderPhase`], [`ModelPhase`],
//! [`TrainPhase`] and their parts (a step's sample, the input-bound share, the cache's and the
//! decode limit's figures), with how they are stored (unbounded rates as `null`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::super::stats::{median, Stats};
use super::super::verdict::Verdict;
use super::memory::MemoryFigures;
use super::order::OrderFigures;
use super::remote::RemoteFigures;
use crate::dataset::Contract;
use crate::loader::config::LoaderConfig;
use crate::loader::lerobot::{FedStep, LerobotVersions, Startup};
use crate::loader::pipeline::LoaderError;
use crate::model::{ModelError, StepTimes};
use crate::timing::TimingTree;

/// The figures of a `loader` phase, warm-up excluded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoaderPhase {
    /// The loader's knobs.
    pub config: LoaderConfig,
    /// Batches measured.
    pub batches: usize,
    /// Samples in them.
    pub samples: usize,
    /// Bytes of the batches' tensors.
    pub bytes: u64,
    /// Wall time of the measured batches, seconds.
    pub wall_s: f64,
    /// Samples per second (wall).
    #[serde(deserialize_with = "rate::deserialize")]
    pub samples_per_s: f64,
    /// Batches per second (wall).
    pub batches_per_s: f64,
    /// Megabytes (10^6) of tensors per second.
    pub mb_per_s: f64,
    /// CPU time per sample, milliseconds, of the measured batches (the workers' `batch`
    /// stages, the consumer's `sampler` and `wait`): the stable figure on a shared machine.
    pub cpu_ms_per_sample: f64,
    /// CPU time of the whole process (every thread) per sample over the phase, milliseconds:
    /// with what no stage covers, and the batches workers prefetched past the last one.
    pub process_cpu_ms_per_sample: f64,
    /// Peak resident memory during the phase, bytes (the process's lifetime peak where the
    /// kernel does not let it be reset).
    pub peak_rss_bytes: Option<u64>,
    /// Per-stage totals: `batch` and its stages built by the workers, `sampler` and `wait` of
    /// the consumer.
    pub timing: TimingTree,
    /// What the video codec alone would allow; None without cameras.
    pub decode_limit: Option<DecodeLimit>,
    /// Wall milliseconds from one measured batch to the next (the first from the start of
    /// the measurement): the raw samples of `samples_per_s`. Empty in results written before.
    #[serde(default)]
    pub batch_ms: Vec<f64>,
    /// Seconds from starting the loader to its first batch (workers' start-up included).
    /// None in results written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_batch_s: Option<f64>,
    /// Mean ms of the batches that were an epoch's first (one per worker): where a loader
    /// that drains at each epoch's end makes its consumer wait. None where none was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_start_wait_ms: Option<f64>,
    /// Mean ms of the other batches (None where the loader did not say which batch of its
    /// epoch each was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_wait_ms: Option<f64>,
    /// With a decoded-frame cache (the loader's `cache`): what it held and gave. None without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheFigures>,
    /// What the process tree held over the measured steps (PSS, per worker, slope), where
    /// the kernel says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryFigures>,
    /// Every rank, where several were measured at once: the phase is the slowest rank's.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<RankSpread>,
    /// What a decoded-frame cache of every camera frame would take. None without cameras,
    /// for LeRobot's loader and in results written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames: Option<FramesSize>,
    /// With LeRobot's loader: the versions it ran with (its CPU and memory figures cover the
    /// main process and every worker process; memory is their summed PSS where available).
    /// None for the native loader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot: Option<LerobotVersions>,
    /// With the native loader: the LeRobot whose reading it followed where LeRobot's versions
    /// differ (`--lerobot-contract`). None for LeRobot's loaders (they read as the installed
    /// LeRobot does, `lerobot` names it) and in results written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot_contract: Option<Contract>,
    /// What the phase asked of the store a remote root is read from, and what holds it. None
    /// for a local root (and for LeRobot's loaders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteFigures>,
    /// How many episodes each measured batch mixed, and whether the batches came in the
    /// sampler's order. None where the batches did not say their episodes, and in results
    /// written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<OrderFigures>,
    /// LeRobot's plain loader with workers: its start taken apart (the start method, the
    /// bytes pickled to each worker, each worker's start and first batch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<Startup>,
}

/// Every camera frame of a loader's episodes at its output size and format, against the memory
/// there was: what a decoded-frame cache holding them all would take.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FramesSize {
    /// Bytes of the frames.
    pub bytes: u64,
    /// Memory available when the phase ran, bytes; None where the system does not say.
    pub available_bytes: Option<u64>,
}

/// What a decoded-frame cache did over a `loader` phase's measured batches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheFigures {
    /// Its budget, bytes.
    pub budget_bytes: u64,
    /// Bytes of frames it held at the end (never above the budget).
    pub held_bytes: u64,
    /// Frames it held at the end.
    pub frames: usize,
    /// Frames copied from it, percent of the frames the measured batches wrote.
    pub hit_pct: f64,
    /// Samples/s of the measured batches of the first epoch (decoding, filling the cache);
    /// None where none was measured.
    pub first_epoch_samples_per_s: Option<f64>,
    /// Samples/s of the measured batches of the later epochs (copying what it kept); None
    /// where none was measured.
    pub later_epochs_samples_per_s: Option<f64>,
}

/// The decode-only limit: the samples/s of a loader that did nothing but run the video codec,
/// from the same run's timing (`batch/video/decode`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecodeLimit {
    /// Frames out of the codec per sample, those decoded only to reach a wanted frame (after a
    /// keyframe) included.
    pub frames_per_sample: f64,
    /// CPU µs per decoded frame (the decoder's own threads' included).
    pub cpu_us_per_frame: f64,
    /// Threads decoding at once: the workers (1 without) times each one's decoder threads, at
    /// most the CPU cores.
    pub threads: usize,
    /// `threads × 10⁶ / (frames_per_sample × cpu_us_per_frame)`.
    #[serde(deserialize_with = "rate::deserialize")]
    pub samples_per_s: f64,
    /// The loader's samples/s over the limit (1 = nothing but decoding).
    pub fraction: f64,
}

/// One measured step of the `model` or `train` phase, milliseconds: the raw sample its
/// statistics are made of.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepSample {
    /// Blocked on the next batch (0 in the `model` phase).
    pub wait_ms: f64,
    /// Host→device copy.
    pub h2d_ms: f64,
    /// Forward pass and loss.
    pub forward_ms: f64,
    /// Backward pass.
    pub backward_ms: f64,
    /// Optimizer.
    pub optimizer_ms: f64,
    /// The model's whole step (without the wait).
    pub step_ms: f64,
    /// The vision backbone's forward and backward, when the step reports its parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backbone_ms: Option<f64>,
    /// The UNet's forward and backward, when the step reports its parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unet_ms: Option<f64>,
    /// Which batch of its epoch the step took (0: the epoch's first), where the loader says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_position: Option<usize>,
}

impl StepSample {
    /// A step measured alone (no wait) in another process, which reports its parts, ms:
    /// `[h2d, forward, backward, optimizer]`, and its whole.
    pub fn alone([h2d_ms, forward_ms, backward_ms, optimizer_ms]: [f64; 4], step_ms: f64) -> Self {
        Self {
            wait_ms: 0.0,
            h2d_ms,
            forward_ms,
            backward_ms,
            optimizer_ms,
            step_ms,
            backbone_ms: None,
            unet_ms: None,
            epoch_position: None,
        }
    }

    /// The sample of a step that waited `wait` for its batch, took `t` and returned after
    /// `whole`: its parts as it timed them, and as its whole the call, which includes releasing
    /// the step's tensors after its last part (the training loop pays it every step).
    pub fn of(wait: Duration, t: &StepTimes, whole: Duration) -> Self {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Self {
            wait_ms: ms(wait),
            h2d_ms: ms(t.h2d),
            forward_ms: ms(t.forward),
            backward_ms: ms(t.backward),
            optimizer_ms: ms(t.optimizer),
            step_ms: ms(whole.max(t.total)),
            backbone_ms: t.components.map(|c| ms(c.backbone_forward + c.backbone_backward)),
            unet_ms: t.components.map(|c| ms(c.unet_forward + c.unet_backward)),
            epoch_position: None,
        }
    }
}

/// One part of the step: mean milliseconds and share of the mean step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Part {
    /// `h2d`, `backbone`, `unet`, `optimizer`, `other`.
    pub name: String,
    /// Mean milliseconds per step.
    pub ms: f64,
    /// Percent of the mean step.
    pub percent: f64,
}

/// The figures of a `model` phase: the step alone on one resident synthetic batch of the
/// loader's shapes (the model ceiling), warm-up excluded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelPhase {
    /// The step's name.
    pub model: String,
    /// Device, as libtorch names it.
    pub device: String,
    /// `f32` or `bf16`.
    pub dtype: String,
    /// Batch size.
    pub batch: usize,
    /// libtorch intra-op threads.
    pub threads: i32,
    /// Trainable parameters.
    pub parameters: usize,
    /// Whole step.
    pub step: Stats,
    /// Host→device copy.
    pub h2d: Stats,
    /// Forward.
    pub forward: Stats,
    /// Backward.
    pub backward: Stats,
    /// Optimizer.
    pub optimizer: Stats,
    /// Samples per second at the median step.
    #[serde(with = "infinite_as_null")]
    pub samples_per_s: f64,
    /// Breakdown of the mean step (empty for steps without components).
    pub parts: Vec<Part>,
    /// Peak memory in bytes: process peak RSS on CPU; `None` on CUDA (not exposed by tch).
    pub peak_memory_bytes: Option<u64>,
    /// Loss of the last step, if any.
    pub last_loss: Option<f64>,
    /// Median step of f32 over this row's, for bf16 rows with an f32 row of the same batch.
    pub speedup_over_f32: Option<f64>,
    /// Every measured step. Empty in results written before.
    #[serde(default)]
    pub per_step: Vec<StepSample>,
}

impl ModelPhase {
    /// The step LeRobot's loader is to feed on `device` in a `train` phase: this phase's
    /// median compute (each step less its host→device copy, which LeRobot's side pays itself).
    pub fn fed_step(&self, device: tch::Device) -> FedStep {
        let compute_ms = if self.per_step.is_empty() {
            (self.step.median_ms - self.h2d.median_ms).max(0.0)
        } else {
            median(self.per_step.iter().map(|s| (s.step_ms - s.h2d_ms).max(0.0)))
        };
        FedStep::fixed(compute_ms, device)
    }
}

/// An unbounded rate (a step of no measurable time, e.g. `none`) as JSON's `null`, which has
/// no infinity, and back.
mod infinite_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            serializer.serialize_f64(*value)
        } else {
            serializer.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        match Option::<f64>::deserialize(deserializer)? {
            None => Ok(f64::INFINITY),
            Some(rate) => super::rate::refuse_negative(rate),
        }
    }
}

/// A rate read back from stored results: refused where it is negative (no measurement gives
/// one: the file was edited or damaged), so that no report renders it as if measured.
mod rate {
    use serde::{de::Error, Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
        refuse_negative(f64::deserialize(deserializer)?)
    }

    pub fn refuse_negative<E: Error>(rate: f64) -> Result<f64, E> {
        match rate >= 0.0 {
            true => Ok(rate),
            false => Err(E::custom(format!("{rate} is no rate: expected samples/s ≥ 0"))),
        }
    }
}

/// Why a `train` phase stopped.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The loader failed (its own error next in the chain, for the front end to word).
    #[error("{0}")]
    Loader(#[from] LoaderError),
    /// The step failed.
    #[error(transparent)]
    Model(#[from] ModelError),
}

/// The share of a step spent waiting for input and copying it to the device, percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InputBound {
    /// Median over the measured steps.
    pub median_pct: f64,
    /// 95th percentile over the measured steps.
    pub p95_pct: f64,
    /// The verdict on the median.
    pub verdict: Verdict,
    /// Of it, the copy to the device: the median over the steps of `h2d / step`, percent —
    /// what no loader setting shortens (0 in results kept before it was).
    #[serde(default)]
    pub copy_pct: f64,
}

impl InputBound {
    /// Whether the copy to the device, not the wait for the loader, is most of an input-bound
    /// share.
    pub fn copy_bound(&self) -> bool {
        self.verdict != Verdict::NotInputBound && 2.0 * self.copy_pct > self.median_pct
    }

    /// Which side dominates, in words: the verdict's, where the copy is not most of it.
    pub fn dominant_side(&self) -> &'static str {
        if self.copy_bound() {
            "the copy to the device is most of it, not the loader"
        } else {
            self.verdict.dominant_side()
        }
    }
}

/// The figures of a `train` phase: the loader feeding the step as in real training, warm-up
/// excluded. A step here is the trainer's whole iteration: waiting for the next batch, then
/// the model's step (host→device copy and compute).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainPhase {
    /// Steps measured.
    pub steps: usize,
    /// Samples in them.
    pub samples: usize,
    /// Wall time of the measured steps, seconds.
    pub wall_s: f64,
    /// Samples per second (wall): the training throughput.
    #[serde(deserialize_with = "rate::deserialize")]
    pub samples_per_s: f64,
    /// The whole iteration (wait + step), ms.
    pub step: Stats,
    /// Blocked on the next batch, ms.
    pub wait: Stats,
    /// Host→device copy, ms.
    pub h2d: Stats,
    /// The rest of the model's step (forward, backward, optimizer), ms.
    pub compute: Stats,
    /// `(wait + h2d) / step` per step.
    pub input_bound: InputBound,
    /// Accelerator utilisation as MLPerf Storage scores a loader: the step's compute (forward,
    /// backward, optimizer: the step but its copy) over the wall time, the first measured step
    /// left out, percent. None in results written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub au_pct: Option<f64>,
    /// Beside the AU, the wait in time: the mean ms a step the accelerator did not compute
    /// (its wait for the batch and the batch's copy), over the steps the AU counts. AU hides a
    /// wait at long steps (97 % of a 1.35 s step is still 40 ms a step); this says it. None
    /// where the AU is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms_per_step: Option<f64>,
    /// Mean wait of the steps that took an epoch's first batches (one per worker), ms: where
    /// a loader that drains at each epoch's end makes the step wait. None where no measured
    /// step took one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_start_wait_ms: Option<f64>,
    /// Mean wait of the other steps, ms (None where every step took an epoch's first batches,
    /// or the loader did not say which batch of its epoch each was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_wait_ms: Option<f64>,
    /// How the batches reached a CUDA step's device (pinned where, copied by whom), in words;
    /// None on the CPU or where the loader's run did it (LeRobot's loaders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging: Option<String>,
    /// Mean wait and hand-over (h2d) per step, seconds: lerobot-train's `data_s` (its batch's
    /// move to the device, uint8 conversion and pre-processor are in it).
    pub data_s: f64,
    /// Mean rest of the step, seconds: lerobot-train's `updt_s`.
    pub updt_s: f64,
    /// CPU time of the whole process per sample, milliseconds (loader and model).
    pub process_cpu_ms_per_sample: f64,
    /// Peak resident memory during the phase, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// The loader's stages, `wait`, and `step > h2d, forward, backward, optimizer`.
    pub timing: TimingTree,
    /// Every measured step. Empty in results written before.
    #[serde(default)]
    pub per_step: Vec<StepSample>,
    /// The median forward ms of each top-level module of a policy whose step reports them
    /// (lerobot-train's policy: ACT's backbone, encoder, decoder; diffusion's RGB encoder and
    /// U-Net), in its order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<(String, f64)>,
    /// The most device memory a step took (CUDA), where the step reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_device_bytes: Option<u64>,
    /// Seconds from the loader's first request to its first batch (its workers' start-up),
    /// where the loader says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_batch_s: Option<f64>,
    /// What the process tree held over the measured steps (PSS, per worker, slope), where
    /// the kernel says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryFigures>,
    /// With the native loader: the LeRobot whose reading it followed (as the loader phase's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot_contract: Option<Contract>,
    /// What the phase asked of the store a remote root is read from, and what holds its
    /// loader. None for a local root (and for LeRobot's loaders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteFigures>,
    /// Every rank, where several were measured at once: the phase is the slowest rank's.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<RankSpread>,
    /// LeRobot's plain loader with workers: its start taken apart, as its loader phase says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<Startup>,
}

/// One rank of several measured at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankFigures {
    /// Its rank, from 0.
    pub rank: usize,
    /// Its driver's process id.
    pub pid: u32,
    /// Samples per second it took (its own shard).
    pub samples_per_s: f64,
    /// Of a train phase, the median input-bound share of its steps, percent (a loader phase's
    /// rank does nothing but wait).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_bound_pct: Option<f64>,
    /// Seconds from its DataLoader's first request to its first batch (its workers' start-up).
    pub first_batch_s: Option<f64>,
}

/// The ranks of a phase measured as several at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSpread {
    /// Every rank, rank 0 first.
    pub ranks: Vec<RankFigures>,
    /// The rank that waited most for its data: the one that paces a step of them all.
    pub slowest_rank: usize,
    /// How much longer the slowest rank waited for its data than the fastest, per step (of a
    /// loader phase: per batch), percent of the slowest rank's step (batch).
    pub rank_spread_pct: f64,
    /// Samples/s of one rank measured alone with the same flags, where it was (`train
    /// --processes N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_rank_alone_samples_per_s: Option<f64>,
    /// The ranks' samples/s together over N times one rank's alone: 1 where N ranks go N
    /// times as fast, less where they share what one alone had (cores, the disk, the link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_efficiency: Option<f64>,
}

impl RankSpread {
    /// The ranks scaled against one rank alone, which took `alone_samples_per_s`.
    pub fn scaled_against(&mut self, alone_samples_per_s: f64) {
        let together: f64 = self.ranks.iter().map(|r| r.samples_per_s).sum();
        self.one_rank_alone_samples_per_s = Some(alone_samples_per_s);
        self.scaling_efficiency = (alone_samples_per_s > 0.0 && !self.ranks.is_empty())
            .then(|| together / (self.ranks.len() as f64 * alone_samples_per_s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_whole_includes_what_it_releases_after_its_last_part() {
        let ms = Duration::from_millis;
        let t = StepTimes {
            h2d: ms(1),
            forward: ms(3),
            backward: ms(5),
            optimizer: ms(1),
            total: ms(10),
            components: None,
        };
        // The call returned 11 ms after it began: its tensors took 1 ms to release.
        let s = StepSample::of(ms(2), &t, ms(11));
        assert_eq!((s.wait_ms, s.step_ms, s.optimizer_ms), (2.0, 11.0, 1.0));
        // A call timed shorter than the step's own total keeps the total.
        assert_eq!(StepSample::of(ms(0), &t, ms(9)).step_ms, 10.0);
    }

    #[test]
    fn an_unbounded_rate_survives_results_jsonl() {
        #[derive(Serialize, Deserialize)]
        struct Rate {
            #[serde(with = "infinite_as_null")]
            samples_per_s: f64,
        }
        for value in [f64::INFINITY, 12.5] {
            let text = serde_json::to_string(&Rate { samples_per_s: value }).unwrap();
            assert_eq!(serde_json::from_str::<Rate>(&text).unwrap().samples_per_s, value, "{text}");
        }
    }
}
