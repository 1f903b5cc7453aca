//! A sample's way from packet to batch: the frames decoded, converted and copied per sample,
//! and the CPU of each step a frame passes, from a loader phase's timing tree. `load` prints
//! it beneath its figures and the sweep report's advice cites it.

use crate::measure::stats::median;
use crate::timing::stage::{self, Stage};
use crate::timing::TimingTree;

/// A step on a sample's way from packet to batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleStep {
    /// Opening files, finding the keyframe, handing packets to the codec.
    Demux,
    /// The video codec, frames decoded only to reach a wanted one included.
    Decode,
    /// swscale: YUV to packed RGB, and resizing.
    ToRgb,
    /// The RGB rows split into the batch's CHW planes (and scaled to float32).
    Split,
    /// Frames copied from the decoded-frame cache.
    Cache,
    /// Frames kept in the cache after decoding.
    CacheFill,
    /// PNG/JPEG image features.
    Image,
    /// Parquet rows and windows.
    Parquet,
    /// Parquet values into the batch.
    Collate,
}

impl SampleStep {
    /// Every step, in the order a sample passes them.
    pub const ALL: [SampleStep; 9] = [
        SampleStep::Demux,
        SampleStep::Decode,
        SampleStep::ToRgb,
        SampleStep::Split,
        SampleStep::Cache,
        SampleStep::CacheFill,
        SampleStep::Image,
        SampleStep::Parquet,
        SampleStep::Collate,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            SampleStep::Demux => "demux",
            SampleStep::Decode => "decode",
            SampleStep::ToRgb => "to RGB",
            SampleStep::Split => "split/scale",
            SampleStep::Cache => "cache copies",
            SampleStep::CacheFill => "cache fills",
            SampleStep::Image => "images",
            SampleStep::Parquet => "parquet",
            SampleStep::Collate => "collate",
        }
    }
}

/// Per-sample figures of a native loader phase with cameras.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleSteps {
    /// Frames out of the codec per sample.
    pub frames_decoded: f64,
    /// Frames converted and written after decoding, per sample.
    pub frames_converted: f64,
    /// Frames copied from the decoded-frame cache, per sample.
    pub frames_cached: f64,
    /// CPU ms per sample of each step, in [`SampleStep::ALL`]'s order.
    pub cpu_ms: [f64; SampleStep::ALL.len()],
}

impl SampleSteps {
    /// The figures of `samples` samples' timing; None where the tree has no split timed on
    /// its own (no cameras, LeRobot's loader, results written before the split was timed).
    pub fn of(timing: &TimingTree, samples: usize) -> Option<Self> {
        timing.get(stage::SPLIT)?;
        let per_sample = samples.max(1) as f64;
        let calls = |path| timing.get(path).map_or(0, |t| t.calls) as f64 / per_sample;
        let ms = |path| timing.get(path).map_or(0.0, |t| t.cpu.as_secs_f64() * 1e3) / per_sample;
        // The stages a sample step shares with the loader's (the rest of video, `demux`, among
        // them) come from [`Stage`]'s one definition; the finer ones from the tree.
        let stage = |s: Stage| s.cpu_ms_per_sample(timing, samples);
        let split = ms(stage::SPLIT);
        let cpu_ms = SampleStep::ALL.map(|step| match step {
            SampleStep::Demux => stage(Stage::VideoOther),
            SampleStep::Decode => stage(Stage::Decode),
            SampleStep::ToRgb => (stage(Stage::Convert) - split).max(0.0),
            SampleStep::Split => split,
            SampleStep::Cache => ms(stage::CACHE),
            SampleStep::CacheFill => ms(stage::CACHE_FILL),
            SampleStep::Image => stage(Stage::Image),
            SampleStep::Parquet => stage(Stage::Parquet),
            SampleStep::Collate => stage(Stage::Collate),
        });
        Some(Self {
            frames_decoded: calls(stage::DECODE),
            frames_converted: calls(stage::CONVERT),
            frames_cached: calls(stage::CACHE),
            cpu_ms,
        })
    }

    /// Each figure's median over `runs` (repeats of one configuration); None without any.
    pub fn median(runs: &[SampleSteps]) -> Option<Self> {
        let med = |f: &dyn Fn(&SampleSteps) -> f64| median(runs.iter().map(f));
        (!runs.is_empty()).then(|| Self {
            frames_decoded: med(&|s| s.frames_decoded),
            frames_converted: med(&|s| s.frames_converted),
            frames_cached: med(&|s| s.frames_cached),
            cpu_ms: std::array::from_fn(|i| med(&|s| s.cpu_ms[i])),
        })
    }

    /// The CPU ms per sample of `step`.
    pub fn ms(&self, step: SampleStep) -> f64 {
        let i = SampleStep::ALL.iter().position(|&s| s == step).expect("every step is listed");
        self.cpu_ms[i]
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::timing::StageTotals;

    fn add(tree: &mut TimingTree, path: &str, calls: u64, cpu_ms: u64) {
        let cpu = Duration::from_millis(cpu_ms);
        tree.add(path, StageTotals { calls, wall: cpu, cpu });
    }

    #[test]
    fn each_step_is_its_stage_less_what_runs_inside_it() {
        let mut tree = TimingTree::default();
        add(&mut tree, stage::VIDEO, 10, 1000);
        add(&mut tree, stage::DECODE, 24, 800);
        add(&mut tree, stage::CONVERT, 16, 150);
        add(&mut tree, stage::SPLIT, 16, 60);
        add(&mut tree, stage::CACHE, 4, 10);
        add(&mut tree, stage::CACHE_FILL, 2, 20);
        add(&mut tree, stage::PARQUET, 10, 20);
        add(&mut tree, stage::COLLATE, 10, 5);
        let steps = SampleSteps::of(&tree, 10).unwrap();
        assert_eq!(
            (steps.frames_decoded, steps.frames_converted, steps.frames_cached),
            (2.4, 1.6, 0.4)
        );
        let want = [2.0, 80.0, 9.0, 6.0, 1.0, 2.0, 0.0, 2.0, 0.5];
        for (step, want) in SampleStep::ALL.into_iter().zip(want) {
            assert!((steps.ms(step) - want).abs() < 1e-9, "{step:?}: {}", steps.ms(step));
        }
        let other = SampleSteps { frames_decoded: 3.0, ..steps.clone() };
        let third = SampleSteps { frames_decoded: 9.0, ..steps.clone() };
        let median = SampleSteps::median(&[other, steps.clone(), third]).unwrap();
        assert_eq!(median.frames_decoded, 3.0);
        assert_eq!(median.cpu_ms, steps.cpu_ms);
    }

    #[test]
    fn a_tree_without_the_split_timed_has_no_steps() {
        let mut tree = TimingTree::default();
        add(&mut tree, stage::VIDEO, 10, 1000);
        add(&mut tree, stage::CONVERT, 16, 150);
        assert_eq!(SampleSteps::of(&tree, 10), None);
        assert_eq!(SampleSteps::median(&[]), None);
    }
}
