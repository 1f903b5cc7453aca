//! The `loader` phase of LeRobot's own loader: the driver measures in its Python process
//! (wall per batch, CPU of the main and worker processes, their summed memory), and the figures
//! are made as the native loader's are, in the same schema.

use std::time::Duration;

use super::analyse::LoaderRun;
use super::LoaderPhase;
use crate::loader::lerobot::LerobotLoader;
use crate::loader::pipeline::LoaderError;
use crate::timing::{stage, StageTotals, TimingTree};

/// Runs LeRobot's loader alone: `warmup` batches, then `batches` measured ones, epoch after
/// epoch with the same (persistent) workers.
pub fn run_lerobot_loader_phase(
    loader: &LerobotLoader,
    batches: usize,
    warmup: usize,
) -> Result<LoaderPhase, LoaderError> {
    let (versions, run) = loader.load(batches, warmup, 0.0)?;
    let seconds = Duration::from_secs_f64;
    let mut timing = TimingTree::default();
    // The main process: blocked on the workers (or, with none, loading the batches itself).
    timing.add(
        stage::WAIT,
        StageTotals {
            calls: run.batches as u64,
            wall: seconds(run.wait_ms.iter().sum::<f64>() / 1e3),
            cpu: seconds(run.main_cpu_s),
        },
    );
    // The worker processes, whose batches LeRobot does not time one by one.
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
        lerobot: Some(versions),
    };
    Ok(figures.figures())
}
