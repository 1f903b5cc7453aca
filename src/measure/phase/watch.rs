//! What a phase says as it goes, heard by one [`Watch`]: a `loader` phase each measured batch
//! (the batch too, where it is in this process), a `train` phase the steps measured so far.
//! Progress (a bar, the batches' digests) and an early end (a tune's measurement that has
//! measured enough) are the same watcher; a `Break` ends the phase there.

use super::figures::StepSample;
use crate::loader::batch::Batch;
use crate::timing::Watch;

/// What a `loader` phase says after each measured batch.
#[derive(Clone, Copy)]
pub struct BatchMeasured<'a> {
    /// Wall milliseconds of every batch measured so far, this one last.
    pub batch_ms: &'a [f64],
    /// The batch, where it is in this process (the native pipeline's; LeRobot's stay in its
    /// driver).
    pub batch: Option<&'a Batch>,
}

/// Watches a `loader` phase: hears each measured batch; `Break` ends the phase before its
/// batches.
pub type BatchWatch<'a> = dyn for<'b> Watch<BatchMeasured<'b>> + 'a;

/// Watches a `train` phase: hears the steps measured so far after each; `Break` ends the phase
/// before its steps.
pub type StepWatch<'a> = dyn for<'b> Watch<&'b [StepSample]> + 'a;
