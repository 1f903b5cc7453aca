//! Phases of a measurement. The `loader` phase: the loader alone, the consumer drops batches.

use std::fmt;
use std::time::Instant;

use serde::Serialize;

use super::system::{peak_rss_bytes, process_cpu_time, reset_peak_rss};
use super::timing::TimingTree;
use crate::loader::pipeline::{Loader, LoaderConfig, LoaderError};

/// The figures of a `loader` phase, warm-up excluded.
#[derive(Debug, Clone, Serialize)]
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
    /// CPU time of the whole process (every thread) per sample, milliseconds: the stable
    /// figure on a shared machine. Includes the batches workers prefetched past the end.
    pub cpu_ms_per_sample: f64,
    /// Peak resident memory during the phase, bytes (the process's lifetime peak where the
    /// kernel does not let it be reset).
    pub peak_rss_bytes: Option<u64>,
    /// Per-stage totals: `batch > sample, collate` built by the workers, `wait` of the consumer.
    pub timing: TimingTree,
}

/// Runs the loader alone: `warmup` batches first (not measured), then `batches` batches,
/// epoch after epoch as needed. `on_batch` is called after each measured batch (progress).
pub fn run_loader_phase(
    loader: &Loader,
    batches: usize,
    warmup: usize,
    mut on_batch: impl FnMut(usize),
) -> Result<LoaderPhase, LoaderError> {
    let mut timing = TimingTree::default();
    let (mut seen, mut measured, mut samples, mut bytes) = (0usize, 0usize, 0usize, 0u64);
    let mut start = (Instant::now(), process_cpu_time());
    if batches == 0 {
        return Err(LoaderError::Config("measure at least one batch".into()));
    }
    reset_peak_rss();
    for epoch_number in 0.. {
        let mut epoch = loader.epoch(epoch_number);
        if epoch.is_empty() {
            return Err(LoaderError::Config(
                "the sampler yields no batch: no sample indices".into(),
            ));
        }
        while let Some(batch) = epoch.next() {
            let batch = batch?;
            seen += 1;
            if seen == warmup {
                epoch.take_timing();
                start = (Instant::now(), process_cpu_time());
                continue;
            }
            if seen > warmup {
                measured += 1;
                samples += batch.size;
                bytes += batch.bytes() as u64;
                on_batch(measured);
            }
            if measured == batches {
                break;
            }
        }
        timing.merge(&epoch.take_timing());
        if measured == batches {
            break;
        }
    }
    let wall_s = start.0.elapsed().as_secs_f64();
    let cpu = process_cpu_time().saturating_sub(start.1);
    Ok(LoaderPhase {
        config: loader.config().clone(),
        batches: measured,
        samples,
        bytes,
        wall_s,
        samples_per_s: samples as f64 / wall_s,
        batches_per_s: measured as f64 / wall_s,
        mb_per_s: bytes as f64 / 1e6 / wall_s,
        cpu_ms_per_sample: cpu.as_secs_f64() * 1e3 / samples.max(1) as f64,
        peak_rss_bytes: peak_rss_bytes(),
        timing,
    })
}

impl fmt::Display for LoaderPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        writeln!(
            f,
            "loader: {} workers, prefetch {}, batch {}, {:?} sampler{}",
            c.workers,
            c.prefetch,
            c.batch_size,
            c.sampler,
            if c.ordered { "" } else { ", unordered" }
        )?;
        writeln!(
            f,
            "{:.1} samples/s  {:.2} batches/s  {:.1} MB/s  {:.3} CPU ms/sample  ({} batches, {} samples in {:.2} s)",
            self.samples_per_s, self.batches_per_s, self.mb_per_s, self.cpu_ms_per_sample, self.batches, self.samples, self.wall_s
        )?;
        if let Some(peak) = self.peak_rss_bytes {
            writeln!(f, "peak RSS {:.1} MB", peak as f64 / 1e6)?;
        }
        write!(f, "{}", self.timing.render(self.samples))
    }
}
