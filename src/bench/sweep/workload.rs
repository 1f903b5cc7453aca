//! The work a sweep's cell measured ([`Workload`]), stamped on its result: every loader knob it
//! ran with (the sweep's fixed ones too), its window, episodes and frame matching, its loader,
//! step and dtype, the dataset's fingerprint, and the phases' counts as run. A repeat's index
//! (and the seed it moves), the dataset's name or path and a replayed step file's path are not
//! work: two repeats, two copies of a dataset or of a step log hash alike.

use super::cell::Cell;
use crate::loader::spec::LoaderSpec;
use crate::measure::fingerprint::DatasetFingerprint;
use crate::measure::workload::Workload;
use crate::model::StepChoice;

/// The phases' counts a cell ran with, by name (`train.steps`, …).
pub(crate) type Counts = [(&'static str, String)];

/// The workload of `cell`, read as `spec` says, with `step` on `dataset`, its phases run with
/// `counts`.
pub(crate) fn cell_workload(
    (cell, spec): (&Cell, &LoaderSpec),
    step: &StepChoice,
    dataset: &DatasetFingerprint,
    counts: &Counts,
) -> Workload {
    let mut parameters = Workload::parameters_of(cell, &["repeat", "dataset", "model"]);
    parameters.extend(Workload::parameters_of(&spec.config, &["seed"]));
    // The seed a repeat moves: the sweep's own.
    let seed = spec.config.seed.wrapping_sub(cell.repeat as u64);
    parameters.insert("seed".into(), seed.to_string());
    parameters.insert("window".into(), spec.window.to_string());
    let episodes = spec.episodes.as_ref().map_or_else(|| "all".into(), |e| e.to_string());
    parameters.insert("episodes".into(), episodes);
    parameters.insert("frames.tolerance_s".into(), spec.frames.tolerance_s.to_string());
    parameters.insert("frames.contract".into(), spec.frames.contract.to_string());
    let model = match step.replay() {
        Some(replay) => {
            parameters.insert("model.replayed_sha256".into(), replay.content_hash());
            "replayed step times".to_string()
        }
        None => cell.model.to_string(),
    };
    parameters.insert("model".into(), model);
    parameters.insert("measured".into(), "sweep cell: loader, model and train phases".into());
    parameters.extend(dataset.parameters());
    for (name, value) in counts {
        parameters.insert((*name).into(), value.clone());
    }
    Workload::of(parameters)
}
