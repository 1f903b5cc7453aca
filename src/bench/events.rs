//! What a study tells whoever watches it as it goes, through one trait: [`Events`], a method
//! per event, each ignoring it by default (criterion's `Report` is the model). Sweeps, cluster
//! tasks, comparisons, guards, layout studies and tunes call what they have to say; the
//! command line's printer implements it once. The events carry plain figures, so that this
//! room stands below every study.

use crate::dataset::write::synth::Synthesis;
use crate::timing::{Progress, Watch};

/// The events of a study, each a no-op unless the watcher implements it.
pub trait Events {
    /// A line of what is being prepared or done: a dataset generated, the reference clip
    /// made, a layout candidate written or measured.
    fn said(&mut self, _line: &str) {}

    /// A cell (of a sweep or a cluster task) starts one of its phases.
    fn cell_phase(&mut self, _phase: CellPhase<'_>) {}

    /// `done` cells of `total` are finished (those found finished by a resume included).
    fn cells_done(&mut self, _done: usize, _total: usize) {}

    /// One run of a comparison (side `A` or `B`) or of a guard's cell starts: its name, and
    /// which repeat it is (from 0).
    fn run_starts(&mut self, _of: &str, _repeat: usize) {}

    /// A tune is about to measure a configuration.
    fn measuring(&mut self, _measuring: Measuring<'_>) {}

    /// A tune measured a configuration, or found it measured by an earlier tune.
    fn measured(&mut self, _measured: &Measured) {}

    /// A tune's budget ran out after `elapsed_s`: the best answer so far is given.
    fn budget_ran_out(&mut self, _elapsed_s: f64) {}
}

/// Nobody watching: every event ignored.
pub struct Unwatched;

impl Events for Unwatched {}

/// The watcher of a dataset a study generates: its lines said to `events`, its frames not
/// counted (the study's own progress goes on).
pub fn synthesis_said(events: &mut dyn Events) -> impl for<'b> Watch<Synthesis<'b>> + '_ {
    Progress(|synthesis: Synthesis<'_>| {
        if let Synthesis::Said(line) = synthesis {
            events.said(line);
        }
    })
}

/// A cell starting one of its phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellPhase<'a> {
    /// The cell, as its label names it.
    pub cell: &'a str,
    /// Its position among the cells, from 0.
    pub index: usize,
    /// Cells in all.
    pub total: usize,
    /// `loader`, `model` or `train`.
    pub phase: &'static str,
}

/// A configuration a tune is about to measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measuring<'a> {
    /// Loader workers.
    pub workers: usize,
    /// Batches in flight per worker.
    pub prefetch: usize,
    /// Why the search measures it.
    pub why: &'a str,
    /// Steps its train phase measures at most.
    pub steps: usize,
    /// What is known of the time left.
    pub left: TimeLeft,
}

/// What a tune knows of the time it has left, before a measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeLeft {
    /// Seconds since the tune began.
    pub elapsed_s: f64,
    /// Mean wall seconds of a configuration measured so far (None before the first).
    pub per_configuration_s: Option<f64>,
    /// Seconds of the budget left, where there is one.
    pub budget_left_s: Option<f64>,
}

/// A configuration a tune measured, with what the step asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// Loader workers.
    pub workers: usize,
    /// Batches in flight per worker.
    pub prefetch: usize,
    /// The loader alone, samples/s, where it was measured.
    pub loader_samples_per_s: Option<f64>,
    /// The loader feeding the step, samples/s.
    pub train_samples_per_s: f64,
    /// Median share of a step spent waiting for its batch, percent.
    pub input_bound_pct: f64,
    /// Wall seconds the measurement took; None where an earlier tune measured it.
    pub seconds: Option<f64>,
    /// The step alone, ms.
    pub step_ms: f64,
    /// Samples/s the step asks for when it never waits.
    pub asked_samples_per_s: f64,
}
