//! Running the phases in this process (the native loader, the tch step; LeRobot's loaders run
//! theirs in its driver, [`super::lerobot`]): the one warm-up-then-measure schedule they share,
//! and the raw samples each keeps (per batch, per step) for [`super::analyse`] to make figures
//! of.

use crate::dataset::remote;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ahead::Feeder;
use super::analyse::{LoaderRun, ModelRun, TrainRun};
use super::figures::{
    CacheFigures, FramesSize, LoaderPhase, ModelPhase, StepSample, TrainError, TrainPhase,
};
use super::memory::PssReads;
use super::order::NativeOrder;
use super::watch::{BatchMeasured, BatchWatch, StepWatch};
use crate::loader::batch::Batch;
use crate::loader::pipeline::{Batches, Loader, LoaderError};
use crate::model::{ModelError, Precision, StepTimes, TrainStep};
use crate::timing::{
    available_memory_bytes, peak_rss_bytes, process_cpu_time, reset_peak_rss, stage,
};
use crate::timing::{TimingTree, Trace, TraceTrack};

/// Where an iteration of a phase stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Iteration {
    /// Not measured; after the last one the measurement starts (counters and clocks restart).
    Warmup {
        /// The last iteration of the warm-up.
        last: bool,
    },
    /// Measured.
    Measured,
}

/// `warmup` unmeasured iterations, then `measured` measured ones: every phase's schedule.
fn schedule(warmup: usize, measured: usize) -> impl Iterator<Item = Iteration> {
    let warm = (0..warmup).map(move |i| Iteration::Warmup { last: i + 1 == warmup });
    warm.chain((0..measured).map(|_| Iteration::Measured))
}

/// Wall and process CPU time from a start.
#[derive(Debug, Clone, Copy)]
struct Clock {
    wall: Instant,
    cpu: Duration,
}

impl Clock {
    fn start() -> Self {
        Self { wall: Instant::now(), cpu: process_cpu_time() }
    }

    /// Wall and process CPU time since the start.
    fn elapsed(&self) -> (Duration, Duration) {
        (self.wall.elapsed(), process_cpu_time().saturating_sub(self.cpu))
    }
}

/// Starts the loader's epochs for a phase, with a fresh peak-RSS measurement; an epoch without
/// a batch is an error saying why.
fn start_epochs(loader: &Loader) -> Result<Batches, LoaderError> {
    reset_peak_rss();
    let stream = loader.epochs(0);
    if stream.per_epoch() == 0 {
        return Err(LoaderError::NoBatch(loader.why_no_batch()));
    }
    Ok(stream)
}

/// Runs the loader alone: `warmup` batches first (not measured), then `batches` batches,
/// epoch after epoch as needed with the same workers ([`Loader::epochs`]). `watch` hears each
/// measured batch; a `Break` ends the phase there.
pub fn run_loader_phase(
    loader: &Loader,
    batches: usize,
    warmup: usize,
    watch: &mut BatchWatch<'_>,
) -> Result<LoaderPhase, LoaderError> {
    let mut clock = Clock::start();
    if batches == 0 {
        return Err(LoaderError::Config("measure at least one batch".into()));
    }
    let started = Instant::now();
    let mut stream = start_epochs(loader)?;
    let per_epoch = stream.per_epoch();
    // Samples and wall ms of the measured batches of the first epoch, and of the later ones.
    let mut epochs = [(0usize, 0.0f64); 2];
    let (mut batch_ms, mut samples, mut bytes) = (Vec::with_capacity(batches), 0, 0);
    let mut epoch_position = Vec::with_capacity(batches);
    let mut last = clock.wall;
    let (mut first_batch_s, mut frames) = (None, None);
    let memory = PssReads::start();
    let mut reads = remote::stats::mark();
    let mut order = NativeOrder::new(loader, per_epoch);
    for iteration in schedule(warmup, batches) {
        let batch = stream.next().expect("epoch after epoch: the stream does not end")?;
        order.batch(&batch, iteration == Iteration::Measured);
        if first_batch_s.is_none() {
            first_batch_s = Some(started.elapsed().as_secs_f64());
            frames = frames_size(loader, &batch);
        }
        match iteration {
            Iteration::Warmup { last: true } => {
                stream.take_timing();
                clock = Clock::start();
                last = clock.wall;
                reads = remote::stats::mark();
            }
            Iteration::Warmup { last: false } => {}
            Iteration::Measured => {
                let now = Instant::now();
                let ms = now.duration_since(last).as_secs_f64() * 1e3;
                let later = usize::from(warmup + batch_ms.len() >= per_epoch);
                epochs[later].0 += batch.size;
                epochs[later].1 += ms;
                epoch_position.push((warmup + batch_ms.len()) % per_epoch);
                batch_ms.push(ms);
                samples += batch.size;
                bytes += batch.bytes() as u64;
                last = now;
                let measured = BatchMeasured { batch_ms: &batch_ms, batch: Some(&batch) };
                if watch.hear(measured).is_break() {
                    break;
                }
            }
        }
    }
    let timing = stream.take_timing();
    let (wall, process_cpu) = clock.elapsed();
    let run = LoaderRun {
        config: loader.config().clone(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        batch_ms,
        samples,
        bytes,
        wall,
        process_cpu,
        peak_rss_bytes: peak_rss_bytes(),
        first_batch_s,
        epoch_position,
        memory: memory.figures(),
        remote: reads.since(),
        lerobot: None,
        order: order.figures(),
        startup: None,
        cache: loader.cache().map(|cache| {
            let rate =
                |(samples, ms): (usize, f64)| (samples > 0).then(|| samples as f64 * 1e3 / ms);
            CacheFigures {
                budget_bytes: cache.budget_bytes(),
                held_bytes: cache.held_bytes(),
                frames: cache.frames(),
                hit_pct: hit_pct(&timing),
                first_epoch_samples_per_s: rate(epochs[0]),
                later_epochs_samples_per_s: rate(epochs[1]),
            }
        }),
        timing,
        frames,
    };
    Ok(LoaderPhase { lerobot_contract: Some(loader.dataset().contract()), ..run.figures() })
}

/// What every camera frame of `loader`'s episodes takes at its output size and format: each
/// video key's frame in `batch` (its last three dimensions, channels × height × width) times
/// the frames; None without cameras.
fn frames_size(loader: &Loader, batch: &Batch) -> Option<FramesSize> {
    let per_frame: u64 = (loader.dataset().info().video_keys())
        .filter_map(|feature| batch.tensors.get(&feature.name))
        .map(|t| {
            let frame = &t.shape[t.shape.len().saturating_sub(3)..];
            frame.iter().product::<usize>() as u64 * t.data.element().size() as u64
        })
        .sum();
    (per_frame > 0).then(|| FramesSize {
        bytes: per_frame * loader.dataset().num_frames() as u64,
        available_bytes: available_memory_bytes(),
    })
}

/// The share of the frames written that came from the cache, percent: its copies against
/// those and the frames converted after decoding.
fn hit_pct(timing: &TimingTree) -> f64 {
    let calls = |path| timing.get(path).map_or(0, |t| t.calls);
    let (hits, decoded) = (calls(stage::CACHE), calls(stage::CONVERT));
    if hits + decoded == 0 {
        0.0
    } else {
        100.0 * hits as f64 / (hits + decoded) as f64
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
    if steps == 0 {
        return Err(ModelError::Config("measure at least one step".into()));
    }
    let mut per_step = Vec::with_capacity(steps);
    for iteration in schedule(warmup, steps) {
        let called = Instant::now();
        let times = step.step(batch)?;
        let whole = called.elapsed();
        if iteration == Iteration::Measured {
            per_step.push(StepSample::of(Duration::ZERO, &times, whole));
        }
    }
    let device = step.device();
    let run = ModelRun {
        model: step.name(),
        device,
        dtype,
        batch: batch.size,
        threads: tch::get_num_threads(),
        parameters: step.trainable_parameters(),
        peak_memory_bytes: if device.is_cuda() { None } else { peak_rss_bytes() },
        last_loss: step.last_loss(),
        per_step,
    };
    Ok(run.figures())
}

/// Runs the loader feeding `step`: `warmup` unmeasured steps, then `steps` measured ones,
/// epoch after epoch as needed with the same workers ([`Loader::epochs`]). `watch` hears the
/// steps measured so far after each; a `Break` ends the phase there. With `trace`, the
/// trainer's `wait` and `step` phases are spans on its `trainer` track (give the loader the
/// same trace for its workers' tracks).
pub fn run_train_phase(
    loader: &Loader,
    step: &mut dyn TrainStep,
    steps: usize,
    warmup: usize,
    trace: Option<&Arc<Trace>>,
    watch: &mut StepWatch<'_>,
) -> Result<TrainPhase, TrainError> {
    let trainer = trace.map(|trace| trace.track("trainer"));
    if steps == 0 {
        return Err(LoaderError::Config("measure at least one step".into()).into());
    }
    let stream = start_epochs(loader)?;
    let (device, workers) = (step.device(), loader.config().workers);
    let plan = TrainLoop {
        steps,
        warmup,
        per_epoch: stream.per_epoch(),
        epoch_start_batches: workers.max(1),
    };
    let (run, staging) = std::thread::scope(|scope| {
        let pins = trace.map(|trace| trace.track("pin"));
        let (mut feeder, staging) = Feeder::start(scope, stream, device, workers, warmup, pins);
        let fed = feed_steps(&mut feeder, step, &plan, trainer, watch);
        let timing = feeder.finish();
        fed.map(|mut run| {
            run.timing.merge(&timing);
            (run, staging)
        })
    })?;
    let lerobot_contract = Some(loader.dataset().contract());
    Ok(TrainPhase { staging, lerobot_contract, ..run.figures() })
}

/// What the train phase's loop runs: its steps, and the epochs its batches come in.
struct TrainLoop {
    /// Measured steps.
    steps: usize,
    /// Unmeasured steps before them.
    warmup: usize,
    /// Batches an epoch.
    per_epoch: usize,
    /// The batches at an epoch's start told apart (one per worker).
    epoch_start_batches: usize,
}

/// The train phase's loop: `plan`'s warm-up steps, then its measured ones (fewer where `watch`
/// breaks), each on the feeder's next batch; the steps' samples and timing.
fn feed_steps(
    feeder: &mut Feeder<'_>,
    step: &mut dyn TrainStep,
    plan: &TrainLoop,
    trainer: Option<TraceTrack>,
    watch: &mut StepWatch<'_>,
) -> Result<TrainRun, TrainError> {
    let TrainLoop { steps, warmup, per_epoch, epoch_start_batches } = *plan;
    let mut timing = TimingTree::default();
    let (mut per_step, mut samples) = (Vec::with_capacity(steps), 0);
    let mut clock = Clock::start();
    let (started, mut first_batch_s) = (Instant::now(), None);
    let memory = PssReads::start();
    let mut reads = remote::stats::mark();
    for (taken, iteration) in schedule(warmup, steps).enumerate() {
        let asked = Instant::now();
        let fed = feeder.next();
        let wait = asked.elapsed();
        first_batch_s.get_or_insert_with(|| started.elapsed().as_secs_f64());
        let (batch, staged) = fed?;
        let stepped = Instant::now();
        let times = step.step_with(&batch, staged.as_ref())?;
        let whole = stepped.elapsed();
        if let Some(track) = &trainer {
            trace_step(track, asked, wait, stepped, &times);
        }
        match iteration {
            Iteration::Warmup { last: true } => {
                feeder.warmed_up();
                clock = Clock::start();
                reads = remote::stats::mark();
            }
            Iteration::Warmup { last: false } => {}
            Iteration::Measured => {
                samples += batch.size;
                let position = Some(taken % per_epoch);
                per_step.push(StepSample {
                    epoch_position: position,
                    ..StepSample::of(wait, &times, whole)
                });
                record_step(&mut timing, &times);
                if watch.hear(&per_step).is_break() {
                    break;
                }
            }
        }
    }
    let (wall, process_cpu) = clock.elapsed();
    Ok(TrainRun {
        per_step,
        samples,
        wall,
        process_cpu,
        peak_rss_bytes: peak_rss_bytes(),
        timing,
        modules_ms: Vec::new(),
        peak_device_bytes: None,
        epoch_start_batches,
        first_batch_s,
        memory: memory.figures(),
        remote: reads.since(),
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
    fn the_schedule_warms_up_then_measures() {
        let steps: Vec<_> = schedule(2, 3).collect();
        let warm = |last| Iteration::Warmup { last };
        let measured = Iteration::Measured;
        assert_eq!(steps, [warm(false), warm(true), measured, measured, measured]);
        assert!(schedule(0, 2).all(|i| i == Iteration::Measured), "no warm-up: nothing restarts");
    }
}
