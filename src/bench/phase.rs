//! The three phases of a measurement (DESIGN.md, "What is measured"): `loader` (the loader
//! alone, the consumer drops batches), `model` (the step alone on one resident batch) and
//! `train` (the loader feeding the model, as in real training).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::stats::{median_and_p95, Stats};
use super::verdict::Verdict;
use crate::loader::batch::Batch;
use crate::loader::config::LoaderConfig;
use crate::loader::pipeline::{Loader, LoaderError};
use crate::model::{Components, ModelError, Precision, StepTimes, TrainStep};
use crate::timing::{peak_rss_bytes, process_cpu_time, reset_peak_rss, stage};
use crate::timing::{TimingTree, Trace, TraceTrack};

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
}

/// The decode-only limit: the samples/s of a loader that did nothing but run the video codec,
/// from the same run's timing (`batch/video/decode`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecodeLimit {
    /// Frames out of the codec per sample, those decoded only to reach a wanted frame (after a
    /// keyframe) included.
    pub frames_per_sample: f64,
    /// CPU µs per decoded frame.
    pub cpu_us_per_frame: f64,
    /// Threads decoding at once: the workers (1 without), at most the CPU cores.
    pub threads: usize,
    /// `threads × 10⁶ / (frames_per_sample × cpu_us_per_frame)`.
    pub samples_per_s: f64,
    /// The loader's samples/s over the limit (1 = nothing but decoding).
    pub fraction: f64,
}

impl DecodeLimit {
    /// The limit of a run of `workers` that delivered `samples` at `samples_per_s`, from its
    /// timing; None when it decoded no video.
    pub fn of(
        timing: &TimingTree,
        samples: usize,
        workers: usize,
        samples_per_s: f64,
    ) -> Option<Self> {
        let decode = timing.get(stage::DECODE).filter(|d| d.calls > 0 && samples > 0)?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = workers.clamp(1, cores);
        let frames_per_sample = decode.calls as f64 / samples as f64;
        let cpu_us_per_frame = decode.cpu.as_secs_f64() * 1e6 / decode.calls as f64;
        let limit = threads as f64 * 1e6 / (frames_per_sample * cpu_us_per_frame);
        Some(Self {
            frames_per_sample,
            cpu_us_per_frame,
            threads,
            samples_per_s: limit,
            fraction: samples_per_s / limit,
        })
    }
}

/// Runs the loader alone: `warmup` batches first (not measured), then `batches` batches,
/// epoch after epoch as needed with the same workers ([`Loader::epochs`]). `on_batch` is called after each measured batch (progress).
pub fn run_loader_phase(
    loader: &Loader,
    batches: usize,
    warmup: usize,
    mut on_batch: impl FnMut(usize),
) -> Result<LoaderPhase, LoaderError> {
    let (mut seen, mut measured, mut samples, mut bytes) = (0usize, 0usize, 0usize, 0u64);
    let mut start = (Instant::now(), process_cpu_time());
    let mut batch_ms = Vec::with_capacity(batches);
    let mut last = start.0;
    if batches == 0 {
        return Err(LoaderError::Config("measure at least one batch".into()));
    }
    reset_peak_rss();
    let mut stream = loader.epochs(0);
    if stream.per_epoch() == 0 {
        return Err(LoaderError::Config("the sampler yields no batch: no sample indices".into()));
    }
    while measured < batches {
        let batch = stream.next().expect("epoch after epoch: the stream does not end")?;
        seen += 1;
        if seen == warmup {
            stream.take_timing();
            start = (Instant::now(), process_cpu_time());
            last = start.0;
        } else if seen > warmup {
            let now = Instant::now();
            batch_ms.push(now.duration_since(last).as_secs_f64() * 1e3);
            last = now;
            measured += 1;
            samples += batch.size;
            bytes += batch.bytes() as u64;
            on_batch(measured);
        }
    }
    let timing = stream.take_timing();
    let wall_s = start.0.elapsed().as_secs_f64();
    let cpu = process_cpu_time().saturating_sub(start.1);
    let samples_per_s = samples as f64 / wall_s;
    let workers = loader.config().workers;
    Ok(LoaderPhase {
        decode_limit: DecodeLimit::of(&timing, samples, workers, samples_per_s),
        config: loader.config().clone(),
        batches: measured,
        samples,
        bytes,
        wall_s,
        samples_per_s,
        batches_per_s: measured as f64 / wall_s,
        mb_per_s: bytes as f64 / 1e6 / wall_s,
        cpu_ms_per_sample: stage::LOADER
            .iter()
            .filter_map(|stage| timing.get(stage))
            .map(|totals| totals.cpu.as_secs_f64() * 1e3)
            .sum::<f64>()
            / samples.max(1) as f64,
        process_cpu_ms_per_sample: cpu.as_secs_f64() * 1e3 / samples.max(1) as f64,
        peak_rss_bytes: peak_rss_bytes(),
        timing,
        batch_ms,
    })
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
}

impl StepSample {
    /// The sample of a step that waited `wait` for its batch and took `t`.
    fn of(wait: Duration, t: &StepTimes) -> Self {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Self {
            wait_ms: ms(wait),
            h2d_ms: ms(t.h2d),
            forward_ms: ms(t.forward),
            backward_ms: ms(t.backward),
            optimizer_ms: ms(t.optimizer),
            step_ms: ms(t.total),
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
        Ok(Option::<f64>::deserialize(deserializer)?.unwrap_or(f64::INFINITY))
    }
}

/// Runs `step` on `batch` (`warmup` unmeasured steps, then `steps`): the `model` phase.
pub fn run_model_phase(
    step: &mut dyn TrainStep,
    batch: &Batch,
    dtype: Precision,
    steps: usize,
    warmup: usize,
) -> Result<ModelPhase, ModelError> {
    let mut times = Vec::with_capacity(steps);
    for i in 0..warmup + steps {
        let t = step.step(batch)?;
        if i >= warmup {
            times.push(t);
        }
    }
    Ok(summarise(step, &times, batch.size, dtype))
}

fn summarise(
    step: &dyn TrainStep,
    times: &[StepTimes],
    batch: usize,
    dtype: Precision,
) -> ModelPhase {
    let stats = |f: fn(&StepTimes) -> Duration| Stats::of(times.iter().map(f));
    let step_stats = stats(|t| t.total);
    let mean = |f: &dyn Fn(&StepTimes) -> Duration| {
        times.iter().map(|t| f(t).as_secs_f64() * 1e3).sum::<f64>() / times.len().max(1) as f64
    };
    let total = mean(&|t| t.total);
    let parts = if times.iter().all(|t| t.components.is_some()) && !times.is_empty() {
        let c = |f: fn(&Components) -> Duration| {
            mean(&move |t: &StepTimes| t.components.as_ref().map(f).unwrap_or_default())
        };
        let backbone = c(|c| c.backbone_forward + c.backbone_backward);
        let unet = c(|c| c.unet_forward + c.unet_backward);
        let h2d = mean(&|t| t.h2d);
        let optimizer = mean(&|t| t.optimizer);
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
    } else {
        Vec::new()
    };
    let device = step.device();
    ModelPhase {
        model: step.name(),
        device: format!("{device:?}").to_lowercase(),
        dtype: dtype.name().into(),
        batch,
        threads: tch::get_num_threads(),
        parameters: step.trainable_parameters(),
        step: step_stats,
        h2d: stats(|t| t.h2d),
        forward: stats(|t| t.forward),
        backward: stats(|t| t.backward),
        optimizer: stats(|t| t.optimizer),
        samples_per_s: if step_stats.median_ms > 0.0 {
            batch as f64 * 1e3 / step_stats.median_ms
        } else {
            f64::INFINITY
        },
        parts,
        peak_memory_bytes: if device.is_cuda() { None } else { peak_rss_bytes() },
        last_loss: step.last_loss(),
        speedup_over_f32: None,
        per_step: times.iter().map(|t| StepSample::of(Duration::ZERO, t)).collect(),
    }
}

/// Why a `train` phase stopped.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The loader failed.
    #[error(transparent)]
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
    /// Mean wait per step, seconds: LeRobot's `data_s` in its training logs.
    pub data_s: f64,
    /// Mean model step per step, seconds: LeRobot's `updt_s`.
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
}

/// Runs the loader feeding `step`: `warmup` unmeasured steps, then `steps` measured ones,
/// epoch after epoch as needed with the same workers ([`Loader::epochs`]). `on_step` is called after each measured step (progress). With
/// `trace`, the trainer's `wait` and `step` phases are spans on its `trainer` track (give the
/// loader the same trace for its workers' tracks).
pub fn run_train_phase(
    loader: &Loader,
    step: &mut dyn TrainStep,
    steps: usize,
    warmup: usize,
    trace: Option<&Arc<Trace>>,
    mut on_step: impl FnMut(usize),
) -> Result<TrainPhase, TrainError> {
    let trainer = trace.map(|trace| trace.track("trainer"));
    if steps == 0 {
        return Err(LoaderError::Config("measure at least one step".into()).into());
    }
    let mut timing = TimingTree::default();
    let (mut seen, mut samples) = (0usize, 0usize);
    let mut waits: Vec<Duration> = Vec::with_capacity(steps);
    let mut times: Vec<StepTimes> = Vec::with_capacity(steps);
    let mut start = (Instant::now(), process_cpu_time());
    reset_peak_rss();
    let mut stream = loader.epochs(0);
    if stream.per_epoch() == 0 {
        return Err(LoaderError::Config("the sampler yields no batch".into()).into());
    }
    while times.len() < steps {
        let asked = Instant::now();
        let batch = stream.next().expect("epoch after epoch: the stream does not end");
        let wait = asked.elapsed();
        let batch = batch?;
        let stepped = Instant::now();
        let step_times = step.step(&batch)?;
        if let Some(track) = &trainer {
            trace_step(track, asked, wait, stepped, &step_times);
        }
        seen += 1;
        if seen <= warmup {
            if seen == warmup {
                stream.take_timing();
                start = (Instant::now(), process_cpu_time());
            }
            continue;
        }
        samples += batch.size;
        waits.push(wait);
        times.push(step_times);
        record_step(&mut timing, &step_times);
        on_step(times.len());
    }
    timing.merge(&stream.take_timing());
    let wall_s = start.0.elapsed().as_secs_f64();
    let cpu = process_cpu_time().saturating_sub(start.1);
    let iteration = |i: usize| waits[i] + times[i].total;
    let shares = (0..times.len()).map(|i| {
        let total = iteration(i).as_secs_f64();
        let input = (waits[i] + times[i].h2d).as_secs_f64();
        if total > 0.0 {
            100.0 * input / total
        } else {
            0.0
        }
    });
    let (median_pct, p95_pct) = median_and_p95(shares);
    let mean_s = |xs: &mut dyn Iterator<Item = Duration>| {
        xs.map(|d| d.as_secs_f64()).sum::<f64>() / times.len() as f64
    };
    Ok(TrainPhase {
        steps: times.len(),
        samples,
        wall_s,
        samples_per_s: samples as f64 / wall_s,
        step: Stats::of((0..times.len()).map(iteration)),
        wait: Stats::of(waits.iter().copied()),
        h2d: Stats::of(times.iter().map(|t| t.h2d)),
        compute: Stats::of(times.iter().map(|t| t.total.saturating_sub(t.h2d))),
        input_bound: InputBound { median_pct, p95_pct, verdict: Verdict::of(median_pct) },
        data_s: mean_s(&mut waits.iter().copied()),
        updt_s: mean_s(&mut times.iter().map(|t| t.total)),
        process_cpu_ms_per_sample: cpu.as_secs_f64() * 1e3 / samples.max(1) as f64,
        peak_rss_bytes: peak_rss_bytes(),
        timing,
        per_step: waits.iter().zip(&times).map(|(&wait, t)| StepSample::of(wait, t)).collect(),
    })
}

/// Records the trainer's wait and the step's phases (consecutive, as the step runs them).
fn trace_step(track: &TraceTrack, asked: Instant, wait: Duration, stepped: Instant, t: &StepTimes) {
    track.span(stage::WAIT, asked, wait);
    track.span(stage::STEP, stepped, t.total);
    let mut at = stepped;
    for (name, d) in step_phases(t) {
        track.span(name, at, d);
        at += d;
    }
}

/// The step's phases as timing-tree stages, in the order the step runs them.
fn step_phases(t: &StepTimes) -> [(&'static str, Duration); 4] {
    [
        (stage::STEP_H2D, t.h2d),
        (stage::STEP_FORWARD, t.forward),
        (stage::STEP_BACKWARD, t.backward),
        (stage::STEP_OPTIMIZER, t.optimizer),
    ]
}

/// Adds one model step to the tree: `step` and its phases (device time, synchronised).
fn record_step(timing: &mut TimingTree, t: &StepTimes) {
    // The model's phases are device time taken with synchronisation, not this thread's CPU.
    let zero = Duration::ZERO;
    timing.record(stage::STEP, t.total, zero);
    for (name, d) in step_phases(t) {
        timing.record(name, d, zero);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
