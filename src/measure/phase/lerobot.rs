//! The `loader` and `train` phases of LeRobot's own loader: the driver measures in its Python
//! process (wall per batch, CPU of the main and worker processes, their summed memory), and
//! the figures are made as the native loader's are, in the same schema. Its `train` phase
//! feeds a step of fixed cost ([`FedStep`]): each batch is copied to the step's device as
//! LeRobot's training loop copies it (h2d), then the main process blocks for the step's
//! compute, as it blocks on a GPU step, while the workers keep prefetching.

use std::time::Duration;

use super::analyse::{LoaderRun, ModelRun, TrainRun};
use super::figures::{LoaderPhase, ModelPhase, StepSample, TrainPhase};
use super::memory::{MemoryFigures, PssSample};
use super::order::OrderFigures;
use super::ranks::OfRanks;
use super::watch::{BatchMeasured, BatchWatch, StepWatch};
use crate::loader::lerobot::{
    DriverStep, FedStep, Feeding, LerobotLoader, LerobotRun, LerobotStepRow, LerobotVersions,
};
use crate::loader::pipeline::LoaderError;
use crate::model::{DiffusionConfig, ModelError, Precision};
use crate::timing::{stage, StageTotals, TimingTree};

/// Runs LeRobot's loader alone: `warmup` batches, then `batches` measured ones, epoch after
/// epoch with the same (persistent) workers; `watch` hears each batch the driver says it
/// measured (of a run measured alone), and a `Break` stops the driver a batch or two later.
/// Of several ranks measured at once, the slowest rank's phase with every rank beside it.
pub fn run_lerobot_loader_phase(
    loader: &LerobotLoader,
    batches: usize,
    warmup: usize,
    watch: &mut BatchWatch<'_>,
) -> Result<LoaderPhase, LoaderError> {
    let mut batch_ms = Vec::with_capacity(batches);
    let mut heard = |steps: &[DriverStep]| {
        batch_ms.extend(steps[batch_ms.len().min(steps.len())..].iter().map(|s| s.whole_ms));
        watch.hear(BatchMeasured { batch_ms: &batch_ms, batch: None })
    };
    let (versions, runs) = loader.load(batches, warmup, Feeding::Nothing, &mut heard)?;
    let phases = runs.into_iter().map(|run| {
        let pid = run.pid;
        (loader_phase(loader, run, versions.clone()), pid)
    });
    LoaderPhase::of_ranks(phases.collect()).ok_or_else(no_answer)
}

/// The driver answered without a rank's run.
fn no_answer() -> LoaderError {
    LoaderError::Lerobot("the LeRobot driver said no rank's measurement".into())
}

/// What the driver's process tree held over its measured batches, from its PSS reads.
fn memory_of(run: &LerobotRun) -> Option<MemoryFigures> {
    let reads: Vec<PssSample> = (run.memory_samples.iter())
        .map(|(at_s, main_bytes, workers, anonymous_bytes)| PssSample {
            at_s: *at_s,
            main_bytes: *main_bytes,
            worker_bytes: workers.clone(),
            anonymous_bytes: *anonymous_bytes,
        })
        .collect();
    MemoryFigures::of(&reads)
}

/// One rank's loader phase.
fn loader_phase(loader: &LerobotLoader, run: LerobotRun, versions: LerobotVersions) -> LoaderPhase {
    let seconds = Duration::from_secs_f64;
    let timing = process_timing(loader, &run);
    let memory = memory_of(&run);
    let figures = LoaderRun {
        config: loader.spec().config.clone(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        batch_ms: run.batch_ms,
        samples: run.samples,
        bytes: run.bytes,
        wall: seconds(run.wall_s),
        process_cpu: seconds(run.main_cpu_s + run.workers_cpu_s),
        peak_rss_bytes: Some(run.peak_memory_bytes),
        timing,
        first_batch_s: Some(run.first_batch_s),
        epoch_position: run.epoch_position.clone(),
        lerobot: Some(versions),
        order: OrderFigures::of(&run.episodes_per_batch, run.sampler_order.clone()),
        startup: run.startup.clone(),
        remote: None,
        cache: None,
        frames: None,
        memory,
    };
    figures.figures()
}

/// The stages of a LeRobot run: `wait` for the main process (blocked on the workers, or with
/// none loading the batches itself), `step` where the main process steps a lerobot-train
/// run's policy, and `batch` for the worker processes, whose batches LeRobot does not time one
/// by one.
fn process_timing(loader: &LerobotLoader, run: &LerobotRun) -> TimingTree {
    let seconds = Duration::from_secs_f64;
    let mut timing = TimingTree::default();
    let calls = run.batches as u64;
    let waited = run.wait_ms.iter().sum::<f64>() / 1e3;
    if run.parts.is_some() {
        // The policy's step runs in the main process: its CPU is the step's (it blocks idle
        // while it waits).
        let stepped = run.batch_ms.iter().sum::<f64>() / 1e3 - waited;
        let cpu = seconds(run.main_cpu_s);
        timing.add(stage::WAIT, StageTotals { calls, wall: seconds(waited), cpu: Duration::ZERO });
        timing.add(stage::STEP, StageTotals { calls, wall: seconds(stepped.max(0.0)), cpu });
    } else {
        let cpu = seconds(run.main_cpu_s);
        timing.add(stage::WAIT, StageTotals { calls, wall: seconds(waited), cpu });
    }
    if loader.spec().config.workers > 0 {
        timing.add(
            stage::BATCH,
            StageTotals {
                calls: run.batches as u64,
                wall: Duration::ZERO,
                cpu: seconds(run.workers_cpu_s),
            },
        );
    }
    timing
}

/// Runs LeRobot's loader feeding `step` (None: no step, as `--model none`): `warmup` steps,
/// then `steps` measured ones, each the wait for a batch, its copy to the device and the
/// step's compute (as `forward`); `watch` hears the steps the driver says it measured so far
/// (of a run measured alone), and a `Break` stops the driver a step or two later.
pub fn run_lerobot_train_phase(
    loader: &LerobotLoader,
    step: Option<FedStep>,
    steps: usize,
    warmup: usize,
    watch: &mut StepWatch<'_>,
) -> Result<TrainPhase, LoaderError> {
    let mut samples = Vec::with_capacity(steps);
    let mut heard = |said: &[DriverStep]| {
        let new = &said[samples.len().min(said.len())..];
        samples.extend(new.iter().map(|s| step_sample(s.wait_ms, s.h2d_ms, s.whole_ms)));
        watch.hear(&samples)
    };
    // A lerobot-train run without a step of fixed cost steps its own policy.
    let feeding = match step {
        Some(step) => Feeding::Fixed(step),
        None if loader.is_training() => Feeding::Policy,
        None => Feeding::Nothing,
    };
    let (_, runs) = loader.load(steps, warmup, feeding, &mut heard)?;
    let phases = runs.into_iter().map(|run| {
        let pid = run.pid;
        (train_phase(loader, run), pid)
    });
    TrainPhase::of_ranks(phases.collect()).ok_or_else(no_answer)
}

/// One rank's train phase.
fn train_phase(loader: &LerobotLoader, run: LerobotRun) -> TrainPhase {
    // Without a step the driver copies nothing: no h2d figures.
    let h2d = run.h2d_ms.iter().copied().chain(std::iter::repeat(0.0));
    let mut per_step: Vec<StepSample> = run
        .wait_ms
        .iter()
        .zip(&run.batch_ms)
        .zip(h2d)
        .map(|((&wait_ms, &whole_ms), h2d_ms)| step_sample(wait_ms, h2d_ms, whole_ms))
        .collect();
    // Which batch of its epoch each was, where the driver says.
    for (sample, &position) in per_step.iter_mut().zip(&run.epoch_position) {
        sample.epoch_position = Some(position);
    }
    // The policy's own step says its parts.
    if let Some(parts) = &run.parts {
        let each = parts.forward_ms.iter().zip(&parts.backward_ms).zip(&parts.optimizer_ms);
        for (sample, ((&forward_ms, &backward_ms), &optimizer_ms)) in per_step.iter_mut().zip(each)
        {
            (sample.forward_ms, sample.backward_ms, sample.optimizer_ms) =
                (forward_ms, backward_ms, optimizer_ms);
        }
    }
    let modules_ms = run
        .modules_ms
        .iter()
        .map(|(name, ms)| {
            let ms =
                ms.as_array().map_or(Vec::new(), |a| a.iter().filter_map(|v| v.as_f64()).collect());
            (name.clone(), ms)
        })
        .collect();
    let figures = TrainRun {
        per_step,
        samples: run.samples,
        wall: Duration::from_secs_f64(run.wall_s),
        process_cpu: Duration::from_secs_f64(run.main_cpu_s + run.workers_cpu_s),
        peak_rss_bytes: Some(run.peak_memory_bytes),
        timing: process_timing(loader, &run),
        modules_ms,
        peak_device_bytes: run.peak_device_bytes,
        epoch_start_batches: loader.spec().config.workers.max(1),
        first_batch_s: Some(run.first_batch_s),
        memory: memory_of(&run),
        remote: None,
    };
    TrainPhase { startup: run.startup.clone(), ..figures.figures() }
}

/// A lerobot-train run's step alone, as a `model` phase: its policy's `update_policy` on one
/// batch of its own DataLoader, each step's hand-over (uint8 to float32, the pre-processor) as
/// its copy, `update_policy`'s parts as forward, backward and optimizer.
pub fn run_policy_model_phase(
    loader: &LerobotLoader,
    steps: usize,
    warmup: usize,
) -> Result<ModelPhase, LoaderError> {
    let (versions, run) = loader.policy_steps(steps, warmup)?;
    let built = versions.lerobot_train.as_ref();
    let policy = built.map_or("policy", |b| b.policy.as_str());
    let device = match run.device.strip_prefix("cuda") {
        Some(index) => tch::Device::Cuda(index.trim_start_matches(':').parse().unwrap_or(0)),
        None => tch::Device::Cpu,
    };
    let per_step = run
        .steps
        .iter()
        .map(|s| {
            let parts = [s.h2d_ms, s.forward_ms, s.backward_ms, s.optimizer_ms];
            StepSample::alone(parts, s.h2d_ms + s.update_ms)
        })
        .collect();
    let figures = ModelRun {
        model: format!("lerobot-train's {policy} (lerobot {})", versions.lerobot),
        device,
        dtype: if run.mixed_precision == "bf16" { Precision::Bf16 } else { Precision::F32 },
        batch: run.batch,
        threads: run.threads,
        parameters: run.parameters,
        peak_memory_bytes: run.peak_device_bytes,
        last_loss: Some(run.loss),
        per_step,
    };
    Ok(figures.figures())
}

/// One step of LeRobot's loader feeding a fed step: the wait, the copy, and the rest of the
/// whole iteration as the step's compute (`forward`).
fn step_sample(wait_ms: f64, h2d_ms: f64, whole_ms: f64) -> StepSample {
    StepSample {
        wait_ms,
        h2d_ms,
        forward_ms: (whole_ms - wait_ms - h2d_ms).max(0.0),
        backward_ms: 0.0,
        optimizer_ms: 0.0,
        step_ms: (whole_ms - wait_ms).max(0.0),
        backbone_ms: None,
        unet_ms: None,
        epoch_position: None,
    }
}

/// LeRobot's step, as the driver measured it, in `model` phases: one per row, named for
/// LeRobot and PyTorch.
pub fn lerobot_model_phases(
    versions: &LerobotVersions,
    rows: Vec<LerobotStepRow>,
    device: tch::Device,
    config: &DiffusionConfig,
) -> Result<Vec<ModelPhase>, ModelError> {
    let model = format!(
        "LeRobot's DiffusionPolicy (down_dims {:?}; lerobot {}, torch {})",
        config.down_dims, versions.lerobot, versions.torch
    );
    rows.into_iter()
        .map(|row| {
            let dtype: Precision = row.dtype.parse().map_err(ModelError::Lerobot)?;
            let per_step = row
                .per_step
                .iter()
                .map(|s| {
                    let parts = [s.h2d_ms, s.forward_ms, s.backward_ms, s.optimizer_ms];
                    StepSample::alone(parts, s.step_ms)
                })
                .collect();
            let run = ModelRun {
                model: model.clone(),
                device,
                dtype,
                batch: row.batch,
                threads: row.threads,
                parameters: row.parameters,
                peak_memory_bytes: row.peak_memory_bytes,
                last_loss: Some(row.last_loss),
                per_step,
            };
            Ok(run.figures())
        })
        .collect()
}
