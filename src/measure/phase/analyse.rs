//! The figures of a phase, made from what it recorded: rates, CPU per sample, the decode-only
//! limit, step statistics and the parts of a step, the input-bound share and its verdict.
//! Pure: nothing here measures or reads the machine.

use super::memory::MemoryFigures;
use super::order::OrderFigures;
use super::remote::RemoteFigures;
use crate::dataset::remote::RemoteReads;
use std::time::Duration;

use super::figures::{
    CacheFigures, DecodeLimit, FramesSize, InputBound, LoaderPhase, ModelPhase, Part, StepSample,
    TrainPhase,
};
use crate::loader::config::LoaderConfig;
use crate::loader::lerobot::{LerobotVersions, Startup};
use crate::measure::stats::{median, median_and_p95, Stats};
use crate::measure::verdict::Verdict;
use crate::model::Precision;
use crate::timing::{stage, TimingTree};

/// The cores this process may use.
fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What a `loader` phase recorded.
pub(super) struct LoaderRun {
    /// The loader's knobs.
    pub config: LoaderConfig,
    /// CPU cores the process could use.
    pub cores: usize,
    /// Wall ms from one measured batch to the next.
    pub batch_ms: Vec<f64>,
    /// Samples in the measured batches.
    pub samples: usize,
    /// Bytes of their tensors.
    pub bytes: u64,
    /// Wall time of the measured batches.
    pub wall: Duration,
    /// CPU time of the whole process over them.
    pub process_cpu: Duration,
    /// Peak resident memory.
    pub peak_rss_bytes: Option<u64>,
    /// The stages of the measured batches.
    pub timing: TimingTree,
    /// Seconds from the start to the first batch.
    pub first_batch_s: Option<f64>,
    /// LeRobot's versions, when its loader ran.
    pub lerobot: Option<LerobotVersions>,
    /// The decoded-frame cache's figures, where the loader had one.
    pub cache: Option<CacheFigures>,
    /// What a cache of every camera frame would take, where the loader knows.
    pub frames: Option<FramesSize>,
    /// Per measured batch, which batch of its epoch it was (0: the first); empty where the
    /// loader does not say.
    pub epoch_position: Vec<usize>,
    /// What the process tree held over the measured batches.
    pub memory: Option<MemoryFigures>,
    /// What was asked of stores over the measured batches; None where nothing was.
    pub remote: Option<RemoteReads>,
    /// The measured batches' episodes and the order they came in, where the loader said.
    pub order: Option<OrderFigures>,
    /// LeRobot's loader's start taken apart, where its driver said it.
    pub startup: Option<Startup>,
}

impl LoaderRun {
    /// The phase's figures.
    pub fn figures(mut self) -> LoaderPhase {
        let (samples, batches) = (self.samples, self.batch_ms.len());
        let wall_s = self.wall.as_secs_f64();
        let samples_per_s = samples as f64 / wall_s;
        let per_sample = |cpu: Duration| cpu.as_secs_f64() * 1e3 / samples.max(1) as f64;
        let loader_cpu = stage::LOADER.iter().filter_map(|s| self.timing.get(s)).map(|t| t.cpu);
        let positions = self.epoch_position.iter().map(|&p| Some(p));
        let (epoch_start_wait_ms, steady_wait_ms) =
            epoch_waits(positions.zip(self.batch_ms.iter().copied()), self.config.workers.max(1));
        let readers = self.config.workers.max(1);
        let busy = self.process_cpu.as_secs_f64() / wall_s / self.cores.max(1) as f64;
        let remote =
            self.remote.take().map(|r| RemoteFigures::of(r, wall_s, samples, readers, busy));
        LoaderPhase {
            remote,
            // The decode-only limit is that of decoding every frame; a cache copies some.
            decode_limit: decode_limit(
                &self.timing,
                samples,
                self.config.decoding_threads(),
                self.cores,
            )
            .filter(|_| self.cache.is_none())
            .map(|limit| limit.reached(samples_per_s)),
            config: self.config,
            batches,
            samples,
            bytes: self.bytes,
            wall_s,
            samples_per_s,
            batches_per_s: batches as f64 / wall_s,
            mb_per_s: self.bytes as f64 / 1e6 / wall_s,
            cpu_ms_per_sample: per_sample(loader_cpu.sum()),
            process_cpu_ms_per_sample: per_sample(self.process_cpu),
            peak_rss_bytes: self.peak_rss_bytes,
            timing: self.timing,
            batch_ms: self.batch_ms,
            first_batch_s: self.first_batch_s,
            epoch_start_wait_ms,
            steady_wait_ms,
            lerobot: self.lerobot,
            order: self.order,
            startup: self.startup,
            cache: self.cache,
            frames: self.frames,
            memory: self.memory,
            ranks: None,
            lerobot_contract: None,
        }
    }
}

/// The decode-only limit of a run with `decoding` threads decoding at once on `cores` that
/// delivered `samples`, from its timing ([`stage::DECODE`], its CPU the decoders' own threads'
/// too); None when it decoded no video. Its `fraction` is left at 0 until
/// [`DecodeLimit::reached`] says what the loader reached.
fn decode_limit(
    timing: &TimingTree,
    samples: usize,
    decoding: usize,
    cores: usize,
) -> Option<DecodeLimit> {
    let decode = timing.get(stage::DECODE).filter(|d| d.calls > 0 && samples > 0)?;
    let threads = decoding.clamp(1, cores.max(1));
    let frames_per_sample = decode.calls as f64 / samples as f64;
    let cpu_us_per_frame = decode.cpu.as_secs_f64() * 1e6 / decode.calls as f64;
    Some(DecodeLimit {
        frames_per_sample,
        cpu_us_per_frame,
        threads,
        samples_per_s: threads as f64 * 1e6 / (frames_per_sample * cpu_us_per_frame),
        fraction: 0.0,
    })
}

impl DecodeLimit {
    /// The limit with the loader's share of it, for a loader that delivered `samples_per_s`.
    fn reached(self, samples_per_s: f64) -> Self {
        Self { fraction: samples_per_s / self.samples_per_s, ..self }
    }
}

/// What a `model` phase recorded.
pub(super) struct ModelRun {
    /// The step's name.
    pub model: String,
    /// Where it ran.
    pub device: tch::Device,
    /// Its arithmetic.
    pub dtype: Precision,
    /// Batch size.
    pub batch: usize,
    /// libtorch intra-op threads.
    pub threads: i32,
    /// Trainable parameters.
    pub parameters: usize,
    /// Process peak RSS on CPU; None on CUDA.
    pub peak_memory_bytes: Option<u64>,
    /// Loss of the last step, if any.
    pub last_loss: Option<f64>,
    /// Every measured step.
    pub per_step: Vec<StepSample>,
}

impl ModelRun {
    /// The phase's figures: statistics of every part of the step, the mean step's breakdown
    /// (when the step reports its parts) and samples/s at the median step.
    pub fn figures(self) -> ModelPhase {
        let steps = &self.per_step;
        let stats = |f: fn(&StepSample) -> f64| Stats::of_ms(steps.iter().map(f));
        let step = stats(|s| s.step_ms);
        ModelPhase {
            model: self.model,
            device: format!("{:?}", self.device).to_lowercase(),
            dtype: self.dtype.name().into(),
            batch: self.batch,
            threads: self.threads,
            parameters: self.parameters,
            step,
            h2d: stats(|s| s.h2d_ms),
            forward: stats(|s| s.forward_ms),
            backward: stats(|s| s.backward_ms),
            optimizer: stats(|s| s.optimizer_ms),
            samples_per_s: if step.median_ms > 0.0 {
                self.batch as f64 * 1e3 / step.median_ms
            } else {
                f64::INFINITY
            },
            parts: parts(steps),
            peak_memory_bytes: self.peak_memory_bytes,
            last_loss: self.last_loss,
            speedup_over_f32: None,
            per_step: self.per_step,
        }
    }
}

/// The mean step's parts (backbone, UNet, optimizer, h2d and the rest), when every step
/// reports its backbone and UNet; empty otherwise.
fn parts(steps: &[StepSample]) -> Vec<Part> {
    let mean = |f: &dyn Fn(&StepSample) -> f64| {
        steps.iter().map(f).sum::<f64>() / steps.len().max(1) as f64
    };
    if steps.is_empty() || steps.iter().any(|s| s.backbone_ms.is_none() || s.unet_ms.is_none()) {
        return Vec::new();
    }
    let total = mean(&|s| s.step_ms);
    let backbone = mean(&|s| s.backbone_ms.unwrap_or_default());
    let unet = mean(&|s| s.unet_ms.unwrap_or_default());
    let h2d = mean(&|s| s.h2d_ms);
    let optimizer = mean(&|s| s.optimizer_ms);
    let other = (total - backbone - unet - h2d - optimizer).max(0.0);
    let pct = |ms: f64| if total > 0.0 { 100.0 * ms / total } else { 0.0 };
    [
        ("backbone", backbone),
        ("unet", unet),
        ("optimizer", optimizer),
        ("h2d", h2d),
        ("other", other),
    ]
    .into_iter()
    .map(|(name, ms)| Part { name: name.into(), ms, percent: pct(ms) })
    .collect()
}

/// What a `train` phase recorded.
pub(super) struct TrainRun {
    /// Every measured step, with its wait.
    pub per_step: Vec<StepSample>,
    /// Samples in the measured steps.
    pub samples: usize,
    /// Wall time of the measured steps.
    pub wall: Duration,
    /// CPU time of the whole process over them.
    pub process_cpu: Duration,
    /// Peak resident memory.
    pub peak_rss_bytes: Option<u64>,
    /// The loader's stages, `wait`, and the step's phases.
    pub timing: TimingTree,
    /// Per top-level module of a policy whose step reports them, its forward ms per step.
    pub modules_ms: Vec<(String, Vec<f64>)>,
    /// The most device memory a step took (CUDA), where the step reports it.
    pub peak_device_bytes: Option<u64>,
    /// How many of an epoch's first batches count as its start: one per worker (the batches
    /// the workers begin an epoch with), one without workers.
    pub epoch_start_batches: usize,
    /// Seconds from the phase's first request for a batch to its arrival.
    pub first_batch_s: Option<f64>,
    /// What the process tree held over the measured steps.
    pub memory: Option<MemoryFigures>,
    /// What was asked of stores over the measured steps; None where nothing was.
    pub remote: Option<RemoteReads>,
}

/// The mean wait of the batches that were one of an epoch's first `first` (one at least), and
/// of the rest, ms, from each batch's (position in its epoch, wait); None for a side no batch
/// falls in (or where the loader gave no positions).
fn epoch_waits(
    waits: impl Iterator<Item = (Option<usize>, f64)> + Clone,
    first: usize,
) -> (Option<f64>, Option<f64>) {
    let mean = |start: bool| {
        let (n, sum) = waits
            .clone()
            .filter(|(p, _)| p.is_some_and(|p| (p < first.max(1)) == start))
            .fold((0, 0.0), |(n, sum), (_, wait)| (n + 1, sum + wait));
        (n > 0).then(|| sum / n as f64)
    };
    (mean(true), mean(false))
}

/// MLPerf Storage's accelerator utilisation of `steps`: their compute (the step but its copy to
/// the device) over their wall (wait and step), the first left out, percent; None for fewer
/// than two steps or no time.
fn accelerator_utilisation(steps: &[StepSample]) -> Option<f64> {
    let kept = steps.get(1..).filter(|kept| !kept.is_empty())?;
    let compute: f64 = kept.iter().map(|s| (s.step_ms - s.h2d_ms).max(0.0)).sum();
    let wall: f64 = kept.iter().map(|s| s.wait_ms + s.step_ms).sum();
    (wall > 0.0).then(|| 100.0 * compute / wall)
}

/// The mean ms a step the accelerator did not compute (wait and copy), over the steps
/// [`accelerator_utilisation`] counts: None where it counts none.
fn wait_ms_per_step(steps: &[StepSample]) -> Option<f64> {
    let kept = steps.get(1..).filter(|kept| !kept.is_empty())?;
    Some(kept.iter().map(|s| s.wait_ms + s.h2d_ms).sum::<f64>() / kept.len() as f64)
}

impl TrainRun {
    /// The phase's figures: the statistics of each step's wait, copy and compute, and the
    /// input-bound share `(wait + h2d) / (wait + step)` per step with the verdict on its median.
    pub fn figures(self) -> TrainPhase {
        let steps = &self.per_step;
        let stats = |f: &dyn Fn(&StepSample) -> f64| Stats::of_ms(steps.iter().map(f));
        let share = |part: fn(&StepSample) -> f64| {
            steps.iter().map(move |s| {
                let whole = s.wait_ms + s.step_ms;
                if whole > 0.0 {
                    100.0 * part(s) / whole
                } else {
                    0.0
                }
            })
        };
        let (median_pct, p95_pct) = median_and_p95(share(|s| s.wait_ms + s.h2d_ms));
        let copy_pct = median(share(|s| s.h2d_ms));
        let mean_s = |f: fn(&StepSample) -> f64| {
            steps.iter().map(f).sum::<f64>() / 1e3 / steps.len().max(1) as f64
        };
        let wall_s = self.wall.as_secs_f64();
        let waits = steps.iter().map(|s| (s.epoch_position, s.wait_ms));
        let (epoch_start_wait_ms, steady_wait_ms) = epoch_waits(waits, self.epoch_start_batches);
        let (readers, cores) = (self.epoch_start_batches, available_cores());
        let busy = self.process_cpu.as_secs_f64() / wall_s / cores as f64;
        let remote = self.remote.map(|r| RemoteFigures::of(r, wall_s, self.samples, readers, busy));
        TrainPhase {
            remote,
            steps: steps.len(),
            samples: self.samples,
            wall_s,
            samples_per_s: self.samples as f64 / wall_s,
            step: stats(&|s| s.wait_ms + s.step_ms),
            wait: stats(&|s| s.wait_ms),
            h2d: stats(&|s| s.h2d_ms),
            compute: stats(&|s| (s.step_ms - s.h2d_ms).max(0.0)),
            input_bound: InputBound {
                median_pct,
                p95_pct,
                verdict: Verdict::of(median_pct),
                copy_pct,
            },
            au_pct: accelerator_utilisation(steps),
            wait_ms_per_step: wait_ms_per_step(steps),
            epoch_start_wait_ms,
            steady_wait_ms,
            staging: None,
            data_s: mean_s(|s| s.wait_ms + s.h2d_ms),
            updt_s: mean_s(|s| (s.step_ms - s.h2d_ms).max(0.0)),
            process_cpu_ms_per_sample: self.process_cpu.as_secs_f64() * 1e3
                / self.samples.max(1) as f64,
            peak_rss_bytes: self.peak_rss_bytes,
            timing: self.timing,
            per_step: self.per_step,
            modules: self.modules_ms.into_iter().map(|(n, ms)| (n, median(ms))).collect(),
            peak_device_bytes: self.peak_device_bytes,
            first_batch_s: self.first_batch_s,
            memory: self.memory,
            ranks: None,
            lerobot_contract: None,
            startup: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(wait_ms: f64, h2d_ms: f64, step_ms: f64) -> StepSample {
        StepSample {
            wait_ms,
            h2d_ms,
            forward_ms: step_ms - h2d_ms,
            backward_ms: 0.0,
            optimizer_ms: 0.0,
            step_ms,
            backbone_ms: None,
            unet_ms: None,
            epoch_position: None,
        }
    }

    #[test]
    fn the_wait_of_an_epochs_first_batches_is_told_apart_from_the_rest() {
        // Epochs of 5 batches, 2 workers: positions 0 and 1 start an epoch.
        let steps: Vec<StepSample> = [(3, 1.0), (4, 1.0), (0, 40.0), (1, 20.0), (2, 2.0)]
            .iter()
            .map(|&(position, wait)| StepSample {
                epoch_position: Some(position),
                ..sample(wait, 0.0, 10.0)
            })
            .collect();
        let waits = |steps: &[StepSample], first| {
            epoch_waits(
                steps.iter().map(|s| (s.epoch_position, s.wait_ms)).collect::<Vec<_>>().into_iter(),
                first,
            )
        };
        assert_eq!(waits(&steps, 2), (Some(30.0), Some(4.0 / 3.0)));
        assert_eq!(waits(&steps, 0), (Some(40.0), Some(24.0 / 4.0)), "no workers: one");
        assert_eq!(waits(&steps[..2], 2), (None, Some(1.0)), "no epoch start measured");
        let unknown: Vec<StepSample> = (0..3).map(|_| sample(5.0, 0.0, 10.0)).collect();
        assert_eq!(waits(&unknown, 2), (None, None), "positions unknown");
    }

    /// A train phase's raw samples: `per_step`, of `samples` samples in `wall_ms`.
    fn train_run(per_step: Vec<StepSample>, samples: usize, wall_ms: u64) -> TrainRun {
        TrainRun {
            per_step,
            samples,
            wall: Duration::from_millis(wall_ms),
            process_cpu: Duration::from_millis(30),
            peak_rss_bytes: None,
            timing: TimingTree::default(),
            modules_ms: Vec::new(),
            peak_device_bytes: None,
            epoch_start_batches: 1,
            first_batch_s: None,
            memory: None,
            remote: None,
        }
    }

    #[test]
    fn the_input_bound_share_and_verdict_come_from_each_step() {
        // Waits of 0, 5 and 30 ms before a 10 ms step (1 ms of it the copy).
        let steps = vec![sample(0.0, 1.0, 10.0), sample(5.0, 1.0, 10.0), sample(30.0, 1.0, 10.0)];
        let phase = train_run(steps, 24, 60).figures();
        // Shares 10 %, 40 % and 77.5 %: the median is 40 %, highly input-bound.
        assert!((phase.input_bound.median_pct - 40.0).abs() < 1e-9, "{:?}", phase.input_bound);
        assert_eq!(phase.input_bound.verdict, Verdict::HighlyInputBound);
        assert_eq!((phase.step.median_ms, phase.compute.median_ms), (15.0, 9.0));
        assert!((phase.samples_per_s - 400.0).abs() < 1e-9);
        // As lerobot-train counts them: the copy in data_s, the rest of the step in updt_s.
        assert!((phase.data_s - 38.0 / 3.0 / 1e3).abs() < 1e-12);
        assert!((phase.updt_s - 9.0 / 1e3).abs() < 1e-12);
        assert_eq!(phase.per_step.len(), 3, "the raw samples are kept");
        // The copy: 10 %, 6.7 % and 2.5 % of the steps, median 6.7 %; the wait is most of it.
        assert!(
            (phase.input_bound.copy_pct - 100.0 / 15.0).abs() < 1e-9,
            "{:?}",
            phase.input_bound
        );
        assert!(!phase.input_bound.copy_bound());
        assert_eq!(phase.input_bound.dominant_side(), "the loader dominates");
    }

    #[test]
    fn accelerator_utilisation_is_compute_over_wall_without_the_first_step() {
        // Left out: the first step, whose 30 ms wait is the workers' start. Then 9 ms of
        // compute (a 10 ms step less its 1 ms copy) in 15 ms, and in 11 ms.
        let steps = vec![sample(30.0, 1.0, 10.0), sample(5.0, 1.0, 10.0), sample(1.0, 1.0, 10.0)];
        let figures = train_run(steps, 24, 60).figures();
        let au = figures.au_pct.unwrap();
        assert!((au - 100.0 * 18.0 / 26.0).abs() < 1e-9, "{au}");
        // Beside it, the time not computed: (5 + 1) and (1 + 1) ms, 4 ms a step.
        assert_eq!(figures.wait_ms_per_step, Some(4.0));
        let fed: Vec<StepSample> = (0..4).map(|_| sample(0.0, 0.0, 10.0)).collect();
        assert_eq!(train_run(fed, 32, 40).figures().au_pct, Some(100.0), "never waits");
        assert_eq!(train_run(vec![sample(1.0, 0.0, 10.0)], 8, 11).figures().au_pct, None);
    }

    #[test]
    fn a_share_that_is_mostly_the_copy_names_the_copy_not_the_loader() {
        // No wait, a 3 ms copy of a 20 ms step: 15 % input-bound, all of it the copy.
        let steps = vec![sample(0.0, 3.0, 20.0), sample(0.5, 3.0, 19.5)];
        let ib = train_run(steps, 16, 40).figures().input_bound;
        assert_eq!(ib.verdict, Verdict::ModeratelyInputBound);
        assert!(ib.copy_bound(), "{ib:?}");
        assert_eq!(ib.dominant_side(), "the copy to the device is most of it, not the loader");
        let not = InputBound { verdict: Verdict::NotInputBound, median_pct: 4.0, ..ib };
        assert!(!not.copy_bound(), "a share under the verdict's threshold names no side");
    }

    #[test]
    fn lerobots_loader_is_fed_the_median_compute_less_the_copy() {
        // Steps of 110, 130 and 400 ms, of which 10, 50 and 20 ms the copy: compute 100, 80
        // and 380 ms, median 100 (the whole step's median less the copy's would be 110).
        let model = |per_step| ModelRun {
            model: "m".into(),
            device: tch::Device::Cpu,
            dtype: Precision::F32,
            batch: 8,
            threads: 1,
            parameters: 0,
            peak_memory_bytes: None,
            last_loss: None,
            per_step,
        };
        let steps =
            vec![sample(0.0, 10.0, 110.0), sample(0.0, 50.0, 130.0), sample(0.0, 20.0, 400.0)];
        let fed = model(steps).figures().fed_step(tch::Device::Cuda(1));
        assert_eq!((fed.compute_ms, fed.device), (100.0, tch::Device::Cuda(1)));
        // Results written before per-step samples were kept: the medians' difference.
        let mut old = model(vec![sample(0.0, 10.0, 110.0)]).figures();
        old.per_step.clear();
        assert_eq!(old.fed_step(tch::Device::Cpu).compute_ms, 100.0);
    }

    #[test]
    fn the_decode_limit_is_threads_over_the_cost_of_a_sample() {
        let mut timing = TimingTree::default();
        // 100 samples, 250 frames decoded at 2 ms of CPU each.
        let decode = crate::timing::StageTotals {
            calls: 250,
            wall: Duration::from_millis(600),
            cpu: Duration::from_millis(500),
        };
        timing.add(stage::DECODE, decode);
        let limit = decode_limit(&timing, 100, 4, 2).unwrap().reached(160.0);
        assert_eq!((limit.threads, limit.frames_per_sample), (2, 2.5), "workers capped at cores");
        assert!((limit.samples_per_s - 400.0).abs() < 1e-9, "2 × 10⁶ / (2.5 × 2000)");
        assert!((limit.fraction - 0.4).abs() < 1e-12);
        assert!(decode_limit(&TimingTree::default(), 100, 1, 2).is_none(), "no video");
    }
}
