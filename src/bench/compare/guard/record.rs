//! What one guard run measured, and the baseline file that keeps it: per cell its knobs and
//! every run's raw figures (not only a mean, so that a later run can take an interval), the
//! machine and software, and a fingerprint of the dataset.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::config::{GuardCell, GuardRun};
use crate::dataset::files::probe_writable;
pub use crate::measure::fingerprint::DatasetFingerprint;
use crate::measure::fingerprint::FingerprintError;
use crate::measure::loader_run::RunFigures;
use crate::measure::system::SystemInfo;
use crate::measure::workload::Workload;

/// The format of baseline files this feedbench writes and reads.
pub const BASELINE_FORMAT: u32 = 1;

/// A guard run's measurements; saved, a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardRecord {
    /// [`BASELINE_FORMAT`]; marks the file as a feedbench guard baseline.
    pub feedbench_guard_baseline: u32,
    /// When it was measured, seconds since the Unix epoch.
    pub measured_at: u64,
    /// The machine and software.
    pub machine: SystemInfo,
    /// The dataset read.
    pub dataset: DatasetFingerprint,
    /// How long and how often each cell ran.
    pub run: GuardRun,
    /// Each cell's knobs and runs, in the config's order.
    pub cells: Vec<CellRuns>,
}

/// One cell: its knobs and its runs in the order they ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellRuns {
    /// The cell as configured.
    pub cell: GuardCell,
    /// What each run measured.
    pub runs: Vec<RunFigures>,
    /// The reference workload's CPU ms measured just before each run: the machine's speed
    /// then ([`super::reference`]).
    pub reference_ms: Vec<f64>,
    /// The work the cell measured ([`CellRuns::workload_of`]); absent from baselines saved
    /// before it was kept, which are judged by their knobs alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
}

impl CellRuns {
    /// The work `cell` measures in runs of `run`'s length on `dataset`: the cell's keys (not
    /// its name, LeRobot's Python, its least AU or its step file's path), the dataset's
    /// fingerprint, the runs' batches and warm-up, and the times it replays, hashed as a
    /// sweep's replayed step is ([`StepReplay::content_hash`]). A step file that gives no
    /// times is an error naming it.
    ///
    /// [`StepReplay::content_hash`]: crate::model::StepReplay::content_hash
    pub fn workload_of(
        cell: &GuardCell,
        run: &GuardRun,
        dataset: &DatasetFingerprint,
    ) -> Result<Workload, RecordError> {
        let left_out = ["name", "python", "min_au", "step_from"];
        let mut parameters = Workload::parameters_of(cell, &left_out);
        parameters.insert(
            "measured".into(),
            "guard: a fresh loader's batches, then its AU fed the step".into(),
        );
        parameters.insert("run.batches".into(), run.batches.to_string());
        let warmup = run.warmup.map_or_else(|| "batches in flight + 1".into(), |w| w.to_string());
        parameters.insert("run.warmup".into(), warmup);
        parameters.extend(dataset.parameters());
        if let Some(file) = &cell.declared_step.from.step_from {
            let step = cell.stand_in().map_err(|what| RecordError::new(file, what))?;
            if let Some(replay) = step.as_ref().and_then(|step| step.replay()) {
                parameters.insert("step_from.replayed_sha256".into(), replay.content_hash());
            }
        }
        Ok(Workload::of(parameters))
    }

    /// The runs' values of `figure`, in run order.
    pub fn values(&self, figure: impl Fn(&RunFigures) -> f64) -> Vec<f64> {
        self.runs.iter().map(figure).collect()
    }

    /// The runs, by reference (as [`crate::measure::loader_run::stage_changes`] takes them).
    pub fn run_refs(&self) -> Vec<&RunFigures> {
        self.runs.iter().collect()
    }

    /// The reference measured before each run, when every run has one.
    pub fn references(&self) -> Option<&[f64]> {
        let complete = self.reference_ms.len() == self.runs.len()
            && self.reference_ms.iter().all(|&ms| ms > 0.0);
        complete.then_some(&self.reference_ms[..])
    }

    /// The runs' instructions per sample, when every run counted them.
    pub fn instructions(&self) -> Option<Vec<f64>> {
        self.runs.iter().map(|r| r.instructions_per_sample).collect()
    }

    /// The runs' accelerator utilisation, percent, when every run fed a step.
    pub fn au(&self) -> Option<Vec<f64>> {
        let all: Option<Vec<f64>> = self.runs.iter().map(|r| r.au_pct).collect();
        all.filter(|au| !au.is_empty())
    }
}

/// A baseline that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {what}")]
pub struct RecordError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub what: String,
}

impl From<FingerprintError> for RecordError {
    fn from(error: FingerprintError) -> Self {
        Self { path: error.path, what: error.what }
    }
}

impl RecordError {
    fn new(path: &Path, what: impl Into<String>) -> Self {
        Self { path: path.to_path_buf(), what: what.into() }
    }
}

impl GuardRecord {
    /// Reads a baseline file: a missing file, one that is not a baseline, one of another
    /// format, or one cut short is an error naming it.
    pub fn read(path: &Path) -> Result<Self, RecordError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            let what = if e.kind() == std::io::ErrorKind::NotFound {
                "no baseline here; save one first with --save-baseline".to_string()
            } else {
                format!("cannot read the baseline: {e}")
            };
            RecordError::new(path, what)
        })?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| RecordError::new(path, format!("not a baseline: invalid JSON ({e})")))?;
        match value.get("feedbench_guard_baseline").and_then(|v| v.as_u64()) {
            None => {
                return Err(RecordError::new(
                    path,
                    "not a feedbench guard baseline (no \"feedbench_guard_baseline\" key)",
                ))
            }
            Some(format) if format != u64::from(BASELINE_FORMAT) => {
                return Err(RecordError::new(
                    path,
                    format!(
                        "baseline format {format}, this feedbench reads format {BASELINE_FORMAT}: \
                         save a new baseline with --save-baseline"
                    ),
                ))
            }
            Some(_) => {}
        }
        let record: Self = serde_path_to_error::deserialize(value).map_err(|e| {
            RecordError::new(path, format!("corrupt baseline at {}: {}", e.path(), e.inner()))
        })?;
        for cell in &record.cells {
            if cell.runs.len() < 2 || cell.reference_ms.len() != cell.runs.len() {
                return Err(RecordError::new(
                    path,
                    format!(
                        "corrupt baseline: cell {:?} has {} runs and {} reference measurements \
                         (at least 2, one each)",
                        cell.cell.name,
                        cell.runs.len(),
                        cell.reference_ms.len()
                    ),
                ));
            }
        }
        Ok(record)
    }

    /// Checks, before anything is measured, that a baseline can be saved at `path`: it is no
    /// directory, and its nearest existing ancestor is a directory that can be written.
    pub fn check_save_path(path: &Path) -> Result<(), RecordError> {
        if path.is_dir() {
            return Err(RecordError::new(path, "is a directory: --save-baseline takes a file"));
        }
        let ancestor = path
            .ancestors()
            .skip(1)
            .find(|a| a.as_os_str().is_empty() || a.exists())
            .filter(|a| !a.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        if !ancestor.is_dir() {
            let what = format!("cannot be saved: {} is not a directory", ancestor.display());
            return Err(RecordError::new(path, what));
        }
        probe_writable(ancestor).map_err(|e| {
            RecordError::new(path, format!("cannot be saved: {}: {e}", ancestor.display()))
        })
    }

    /// Writes the record to `path` whole or not at all (a temporary file renamed over it), so
    /// that an interrupted save leaves the old baseline in place.
    pub fn save(&self, path: &Path) -> Result<(), RecordError> {
        let error = |e: std::io::Error| RecordError::new(path, format!("cannot save: {e}"));
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(error)?;
        }
        let text = crate::bench::export::pretty_json(self);
        crate::dataset::files::write_whole(path, text.as_bytes()).map_err(error)?;
        Ok(())
    }
}
