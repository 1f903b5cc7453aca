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
}

/// The decode-only limit: the samples/s of a loader that did nothing but run the video codec,
/// from the same run's timing (`batch/video/decode`).
#[derive(Debug, Clone, Serialize)]
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
        let decode = timing.get("batch/video/decode").filter(|d| d.calls > 0 && samples > 0)?;
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
        cpu_ms_per_sample: ["batch", "sampler", "wait"]
            .iter()
            .filter_map(|stage| timing.get(stage))
            .map(|totals| totals.cpu.as_secs_f64() * 1e3)
            .sum::<f64>()
            / samples.max(1) as f64,
        process_cpu_ms_per_sample: cpu.as_secs_f64() * 1e3 / samples.max(1) as f64,
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
            "{:.1} samples/s  {:.2} batches/s  {:.1} MB/s  {:.3} CPU ms/sample ({:.3} process)  ({} batches, {} samples in {:.2} s)",
            self.samples_per_s, self.batches_per_s, self.mb_per_s, self.cpu_ms_per_sample, self.process_cpu_ms_per_sample, self.batches, self.samples, self.wall_s
        )?;
        if let Some(peak) = self.peak_rss_bytes {
            writeln!(f, "peak RSS {:.1} MB", peak as f64 / 1e6)?;
        }
        if let Some(limit) = &self.decode_limit {
            writeln!(
                f,
                "decode-only limit {:.1} samples/s ({} threads × {:.2} frames/sample × {:.0} CPU µs/frame): {:.0} % of it",
                limit.samples_per_s,
                limit.threads,
                limit.frames_per_sample,
                limit.cpu_us_per_frame,
                limit.fraction * 100.0
            )?;
        }
        write!(f, "{}", self.timing.render(self.samples))
    }
}
