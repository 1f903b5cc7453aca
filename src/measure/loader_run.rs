//! One measured run of a loader, as `compare` and `guard` repeat it: a fresh loader, its
//! warm-up, then the `loader` phase; CPU ms per sample (the stable figure), samples/s, the CPU
//! per sample of each stage and, where the CPU counts them, instructions per sample; given a
//! stand-in step, then the same workers feeding it: the accelerator utilisation.

use serde::{Deserialize, Serialize};

use super::change::Change;
use super::phase::{ChosenLoader, MeasuredLoader, PlacedStep, StepPlace, TrainError};
use super::stats::median;
use crate::loader::lerobot::{LerobotBridge, LerobotVersions};
use crate::loader::pipeline::LoaderError;
use crate::model::{MissingInput, ShapesError, StepChoice};
use crate::timing::stage::Stage;
use crate::timing::{InstructionCounter, NoOne};

/// What one run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFigures {
    /// CPU ms per sample of the loader.
    pub cpu_ms_per_sample: f64,
    /// Samples per second (wall).
    pub samples_per_s: f64,
    /// CPU ms per sample of each stage that ran, by name (`decode`, `convert`, …).
    pub stages: Vec<(String, f64)>,
    /// User-space instructions of the whole run (opening, warm-up, measured batches, shutdown)
    /// per measured sample; absent where the CPU or kernel does not count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_per_sample: Option<f64>,
    /// The accelerator utilisation of the loader feeding the run's stand-in step (MLPerf
    /// Storage's: the step's time over the wall time, the first step left out), percent;
    /// absent where the run fed none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub au_pct: Option<f64>,
}

impl RunFigures {
    /// The CPU ms per sample of `stage`, 0 where it did not run.
    pub fn stage_ms(&self, stage: &str) -> f64 {
        self.stages.iter().find(|(s, _)| s == stage).map_or(0.0, |(_, ms)| *ms)
    }
}

/// One run's figures, and the LeRobot that read where LeRobot's loader ran.
#[derive(Debug, Clone)]
pub struct MeasuredRun {
    /// What the run measured.
    pub figures: RunFigures,
    /// The versions of the LeRobot whose loader ran; None for feedbench's.
    pub lerobot: Option<LerobotVersions>,
}

/// How long each run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLength {
    /// Batches measured.
    pub batches: usize,
    /// Batches before measuring; the batches in flight plus one when None (every measured
    /// batch then reuses pooled buffers).
    pub warmup: Option<usize>,
}

/// Builds `loader` (LeRobot's through `bridge`) and measures it for `length`, naming the
/// LeRobot that read where it is LeRobot's; with
/// `count_instructions` this process's instructions are counted too (silently none where the
/// counter cannot start: [`InstructionCounter::start`] says why, and callers ask it once up
/// front). Given a `step` (a stand-in: `synthetic:MS`, or replayed from a file by the native
/// loader), the same workers then feed it `length.batches` steps, for the run's AU.
pub fn measure_run(
    loader: &ChosenLoader,
    length: RunLength,
    count_instructions: bool,
    step: Option<&StepChoice>,
    bridge: &LerobotBridge,
) -> Result<MeasuredRun, LoaderError> {
    let counter = count_instructions.then(InstructionCounter::start).and_then(Result::ok);
    let loader = loader.build(bridge)?;
    let warmup = length.warmup.unwrap_or(loader.config().batches_in_flight() + 1);
    let phase = loader.loader_phase(length.batches, warmup, &mut NoOne)?;
    let au_pct = match step {
        Some(step) => fed_au(loader.as_ref(), step, length.batches)?,
        None => None,
    };
    let lerobot = loader.lerobot().cloned();
    // The workers' instructions count once they have exited.
    drop(loader);
    let instructions = counter.and_then(|c| c.finish().ok());
    let stages = Stage::ALL
        .iter()
        .map(|s| (s.name().to_string(), s.cpu_ms_per_sample(&phase.timing, phase.samples)))
        .filter(|(_, ms)| *ms > 0.0)
        .collect();
    let figures = RunFigures {
        cpu_ms_per_sample: phase.cpu_ms_per_sample,
        samples_per_s: phase.samples_per_s,
        stages,
        instructions_per_sample: instructions.map(|n| n as f64 / phase.samples.max(1) as f64),
        au_pct,
    };
    Ok(MeasuredRun { figures, lerobot })
}

/// The AU of `loader` (warm already) feeding the stand-in `step` for `steps` steps: run by
/// the loader's own thread where it is in this process, its time blocked for by LeRobot's.
fn fed_au(
    loader: &dyn MeasuredLoader,
    step: &StepChoice,
    steps: usize,
) -> Result<Option<f64>, LoaderError> {
    let named = |what: String| LoaderError::Config(format!("the step {}: {what}", step.spec()));
    if !step.spec().is_a_stand_in() {
        return Err(named(
            "not a stand-in this loader feeds (synthetic:MS, or a replayed one)".into(),
        ));
    }
    let unread = ShapesError { dataset: Default::default(), problem: MissingInput::Unread };
    let place = StepPlace::of(step.spec(), loader);
    let train = (|| {
        // LeRobot's driver blocks for each time in turn: the warm-up step's, then the steps'.
        let mut placed =
            PlacedStep::new::<TrainError>(place, step, Err(&unread), steps + 1, || {
                unreachable!("a stand-in's time is known, not measured")
            })?;
        loader.train_phase(placed.feed(None), steps, 1, &mut NoOne)
    })()
    .map_err(|e| match e {
        TrainError::Loader(e) => e,
        TrainError::Model(e) => named(e.to_string()),
    })?;
    Ok(train.au_pct)
}

/// A stage's CPU per sample in two sets of runs (A and B, baseline and now), and the change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageChange {
    /// The stage (`decode`, `convert`, …).
    pub stage: String,
    /// Median CPU ms per sample over A's runs.
    pub a_ms: f64,
    /// Median CPU ms per sample over B's runs.
    pub b_ms: f64,
    /// The change, when A's stage took any time.
    pub change: Option<Change>,
}

/// The change of each stage that ran in either set, in [`Stage::ALL`]'s order; intervals
/// fixed by `seed`.
pub fn stage_changes(a: &[&RunFigures], b: &[&RunFigures], seed: u64) -> Vec<StageChange> {
    let values = |runs: &[&RunFigures], stage: &str| -> Vec<f64> {
        runs.iter().map(|r| r.stage_ms(stage)).collect()
    };
    Stage::ALL
        .iter()
        .map(|stage| stage.name())
        .filter(|name| a.iter().chain(b).any(|r| r.stage_ms(name) > 0.0))
        .map(|name| {
            let (a, b) = (values(a, name), values(b, name));
            StageChange {
                stage: name.to_string(),
                a_ms: median(a.iter().copied()),
                b_ms: median(b.iter().copied()),
                change: Change::of(&a, &b, seed),
            }
        })
        .collect()
}
