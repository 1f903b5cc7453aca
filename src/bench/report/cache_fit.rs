//! The decoded-frame cache as advice: where the step waits for input and every frame at the
//! configuration's size and format fits in the memory there was, the budget to set and the
//! loader's predicted rate in the epochs after the first. The report's advice and tune say
//! it alike.

use serde::{Deserialize, Serialize};

use super::model::Row;
use crate::bench::format::{millis, plural, rate};
use crate::dataset::bytes::Bytes;
use crate::dataset::size::ByteSize;
use crate::measure::phase::SampleStep;

/// A cache that would hold every frame, and what the loader would then deliver.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CacheFit {
    /// Bytes of every frame at the configuration's size and format.
    pub frames_bytes: u64,
    /// Memory that was available when the loader was measured, bytes.
    pub available_bytes: u64,
    /// The budget to set: the frames, rounded up to whole GiB.
    pub budget_bytes: u64,
    /// The loader's CPU per sample in the later epochs, ms: its measured cost less demuxing,
    /// decoding and the conversion to RGB, plus the split into planes once more (a copy from
    /// the cache reads each frame from memory and writes it, where the split wrote it once;
    /// on g1-partial at 640×480 a copy took 2.1× the split).
    pub cpu_ms_per_sample: f64,
    /// Threads loading: the workers (one without), at most the cores.
    pub threads: usize,
    /// The loader's predicted samples/s in the later epochs: threads × 1000 / CPU ms.
    pub samples_per_s: f64,
}

impl CacheFit {
    /// For `row` (the configuration) with `loader` (the row whose loader phase stands for it:
    /// its own or a neighbour's); None where the configuration has a cache already, the loader
    /// is LeRobot's, the frames would not fit in the memory that was available, or the figures
    /// are missing (results written before).
    pub fn of(row: &Row, loader: &Row) -> Option<Self> {
        if !row.knobs.loader.is_native() || row.knobs.knobs.cache_bytes > 0 {
            return None;
        }
        let frames = loader.frames?;
        let available_bytes = frames.available_bytes.filter(|&a| frames.bytes <= a)?;
        let steps = loader.steps.as_ref()?;
        let saved: f64 = [SampleStep::Demux, SampleStep::Decode, SampleStep::ToRgb]
            .into_iter()
            .map(|step| steps.ms(step))
            .sum();
        let cpu_ms_per_sample =
            loader.loader_cpu_ms_per_sample? - saved + steps.ms(SampleStep::Split);
        if cpu_ms_per_sample <= 0.0 {
            return None;
        }
        let threads = row.knobs.knobs.workers.clamp(1, row.cores.max(1));
        const GIB: u64 = 1 << 30;
        Some(Self {
            frames_bytes: frames.bytes,
            available_bytes,
            budget_bytes: frames.bytes.div_ceil(GIB).max(1) * GIB,
            cpu_ms_per_sample,
            threads,
            samples_per_s: threads as f64 * 1e3 / cpu_ms_per_sample,
        })
    }

    /// The advice, one sentence; `model_samples_per_s` is the step's ceiling.
    pub fn sentence(&self, model_samples_per_s: f64) -> String {
        let budget = ByteSize::compact(self.budget_bytes);
        let fed = if self.samples_per_s >= model_samples_per_s {
            format!(
                "beyond the model's {} samples/s: from the second epoch the step would be fed",
                rate(model_samples_per_s)
            )
        } else {
            format!("still under the model's {} samples/s", rate(model_samples_per_s))
        };
        format!(
            "Every frame at this size and format takes {:.2}, which fits in the {:.2} that were \
             free: a decoded-frame cache (`--cache {budget}`; in a sweep, `loader.cache = \
             [\"{budget}\"]`) keeps them after the first epoch, and the later epochs copy instead \
             of decoding — about {} samples/s with {} thread{} loading ({} CPU ms/sample, \
             predicted from this loader's: no decoding, a copy for each frame), {fed}.",
            Bytes::of(self.frames_bytes).gb(),
            Bytes::of(self.available_bytes).gb(),
            rate(self.samples_per_s),
            self.threads,
            plural(self.threads),
            millis(self.cpu_ms_per_sample),
        )
    }
}
