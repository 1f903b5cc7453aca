//! The guard's history: every guard run of a CI, one line of JSON each (its cells' figures,
//! their workloads, the host, the commit and the date), appended to one file, and read back
//! for the shifts a single baseline misses ([`verdict`]): a loader that loses 2–3 % a merge
//! passes every comparison with its baseline, and shows in its history as one level after
//! another. The file is appended under an exclusive lock, one whole line a write, so two guards
//! at once lose no line; a file that is not such a history is refused before anything runs and
//! left as it was.

pub mod plot;
pub mod text;
pub mod verdict;

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::record::GuardRecord;
use crate::dataset::files::{flock, probe_writable};
use crate::measure::stats::median;
use crate::measure::system::SystemInfo;
use crate::measure::workload::Workload;

/// The format of history lines this feedbench writes and reads.
pub const HISTORY_FORMAT: u32 = 1;

/// One guard run, as a line of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryRun {
    /// [`HISTORY_FORMAT`]; marks the line as a feedbench guard run.
    pub feedbench_guard_history: u32,
    /// When it was measured, seconds since the Unix epoch.
    pub date: u64,
    /// The commit it measured (`--commit`, else git's `HEAD`), where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The host and its software.
    pub host: SystemInfo,
    /// Whether it starts a new level (`--accept`): runs before it are not read for shifts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accepted: bool,
    /// Each cell's figure.
    pub cells: Vec<HistoryCell>,
}

/// One cell of a guard run in the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryCell {
    /// The cell's name.
    pub name: String,
    /// The work it measured.
    pub workload: Workload,
    /// The figure the guard judges: `samples_per_s`, or `au_pct` where the cell sets `min_au`.
    pub figure: String,
    /// The figure of each of the run's repeats.
    pub values: Vec<f64>,
    /// The reference workload's CPU ms measured before each repeat (the machine's speed then,
    /// [`super::reference`]), where every repeat has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_ms: Option<Vec<f64>>,
    /// The run's point in the history: the median of its repeats' figures, a rate first
    /// multiplied by its reference (in samples a second of the reference's CPU, as the guard
    /// judges a baseline), so that a shared machine's drift in speed is not read as a shift.
    pub value: f64,
}

impl HistoryRun {
    /// The history line of `record`, measured at `commit`, a new level where `accepted`.
    pub fn of(record: &GuardRecord, commit: Option<String>, accepted: bool) -> Self {
        let cells = (record.cells.iter())
            .filter_map(|cell| {
                let (figure, values) = match (cell.cell.min_au, cell.au()) {
                    (Some(_), Some(au)) => ("au_pct", au),
                    _ => ("samples_per_s", cell.values(|r| r.samples_per_s)),
                };
                let reference_ms = cell.references().map(<[f64]>::to_vec);
                let value = match (&reference_ms, figure) {
                    (Some(references), "samples_per_s") => {
                        median(values.iter().zip(references).map(|(v, ms)| v * ms / 1e3))
                    }
                    _ => median(values.iter().copied()),
                };
                Some(HistoryCell {
                    name: cell.cell.name.clone(),
                    workload: cell.workload.clone()?,
                    figure: figure.into(),
                    values,
                    reference_ms,
                    value,
                })
            })
            .collect();
        Self {
            feedbench_guard_history: HISTORY_FORMAT,
            date: record.measured_at,
            commit,
            host: record.machine.clone(),
            accepted,
            cells,
        }
    }
}

/// A history that cannot be read or written, naming the file (and the line).
#[derive(Debug, thiserror::Error)]
#[error("--history {}: {what}", path.display())]
pub struct HistoryError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub what: String,
}

/// The history file at a path.
pub struct History {
    path: PathBuf,
}

impl History {
    /// The history at `path`, checked before anything is measured: an existing file must be a
    /// history this feedbench reads and be writable; a missing one must be creatable (its
    /// directory writable). Nothing is written.
    pub fn check(path: &Path) -> Result<Self, HistoryError> {
        let history = Self { path: path.to_path_buf() };
        if path.is_dir() {
            return Err(history.error("is a directory: --history takes a file"));
        }
        if path.exists() {
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .append(true)
                .open(path)
                .map_err(|e| history.error(format!("cannot be written: {e}")))?;
            history.read_from(&mut file)?;
            return Ok(history);
        }
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        probe_writable(parent)
            .map_err(|e| history.error(format!("cannot be created: {}: {e}", parent.display())))?;
        Ok(history)
    }

    /// Appends `run` as one line, under an exclusive lock (another guard appending waits), and
    /// returns every run the file held before it, then `run`. A file that became unreadable
    /// since [`History::check`] is an error, and nothing is appended.
    pub fn append(&self, run: &HistoryRun) -> Result<Vec<HistoryRun>, HistoryError> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&self.path)
            .map_err(|e| self.error(format!("cannot be opened: {e}")))?;
        flock(&file, true, true).map_err(|e| self.error(format!("cannot be locked: {e}")))?;
        let mut runs = self.read_from(&mut file)?;
        let line = serde_json::to_string(run).expect("a history line serialises") + "\n";
        file.write_all(line.as_bytes())
            .and_then(|()| file.sync_data())
            .map_err(|e| self.error(format!("cannot be appended to: {e}")))?;
        runs.push(run.clone());
        Ok(runs)
    }

    /// Every run of the open history, each line checked: JSON, a feedbench guard run of this
    /// format, whole (the last line ends the file with a newline).
    fn read_from(&self, file: &mut std::fs::File) -> Result<Vec<HistoryRun>, HistoryError> {
        let mut text = String::new();
        file.rewind()
            .and_then(|_| file.read_to_string(&mut text))
            .map_err(|e| self.error(format!("cannot be read (is it text?): {e}")))?;
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut runs = Vec::with_capacity(lines.len());
        for (n, line) in lines.iter().enumerate() {
            let at = |what: String| self.error(format!("line {}: {what}", n + 1));
            if !line.ends_with('\n') {
                return Err(at("cut short (no newline ends it: a write was interrupted); \
                               remove the line and run again"
                    .into()));
            }
            if line.trim().is_empty() {
                continue;
            }
            let value: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| at(format!("not JSON ({e}): the history is JSON lines")))?;
            match value.get("feedbench_guard_history").and_then(|v| v.as_u64()) {
                None => {
                    return Err(at(
                        "not a feedbench guard run (no \"feedbench_guard_history\" key)".into(),
                    ))
                }
                Some(format) if format != u64::from(HISTORY_FORMAT) => {
                    return Err(at(format!(
                        "history format {format}, this feedbench reads format {HISTORY_FORMAT}"
                    )))
                }
                Some(_) => {}
            }
            let run: HistoryRun = serde_path_to_error::deserialize(value)
                .map_err(|e| at(format!("corrupt at {}: {}", e.path(), e.inner())))?;
            runs.push(run);
        }
        Ok(runs)
    }

    /// An error about this history.
    fn error(&self, what: impl Into<String>) -> HistoryError {
        HistoryError { path: self.path.clone(), what: what.into() }
    }
}

#[cfg(test)]
mod tests;
