//! What a sweep stores: one JSON line per measured cell in `results.jsonl`, appended as each cell
//! finishes, and read back by `--resume` and by the report (which never measures).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cell::Cell;
use crate::bench::store::jsonl::{self, JsonlError, JsonlStore};
use crate::bench::store::lock::{LockError, OutputLock};
use crate::measure::phase::{LoaderPhase, ModelPhase, TrainPhase};
use crate::measure::system::{Placement, SystemInfo};
use crate::measure::workload::Workload;

/// What a sweep appends to in its output directory, one line per measured cell.
pub const RESULTS_FILE: &str = "results.jsonl";
/// The sweep config the results of an output directory were measured with, as feedbench
/// re-wrote it: a resume with another config is refused unless asked for.
pub const CONFIG_FILE: &str = "sweep.toml";
/// The Chrome trace of the traced cell's `train` phase, in a sweep's output directory.
pub const TRACE_FILE: &str = "trace.json";

/// Everything measured for one cell: one line of `results.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    /// The knobs.
    pub cell: Cell,
    /// The loader alone: the loader ceiling. None where it was not measured: a tune measures
    /// it only where its rate model reads it (one worker's cost, the second worker's share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loader: Option<LoaderPhase>,
    /// The model alone on a resident batch: the model ceiling.
    pub model: ModelPhase,
    /// The loader feeding the model.
    pub train: TrainPhase,
    /// A replayed step's mean time, ms, as its file gave it when measured (what sets the step's
    /// rate over a long run): the report counts it without reading the file again. Absent for
    /// any other step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_mean_ms: Option<f64>,
    /// Where it ran.
    pub system: SystemInfo,
    /// The host, CPUs and scheduler job it ran in, for cells run as a task of a plan
    /// (`sweep run`); absent from a local sweep's results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// When the cell finished, seconds since the Unix epoch.
    pub finished_unix_s: u64,
    /// The work it measured; absent from results written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
}

/// Why results could not be read or written, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The results file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The output directory holds results of an earlier sweep, and `--resume` was not given.
    #[error("{path}: results of an earlier sweep are here: pass --resume to continue it, or choose another --out")]
    Exists {
        /// The results file.
        path: PathBuf,
    },
    /// `--out` is there, but not as a directory.
    #[error("{path}: exists and is not a directory (--out names a directory for the results)")]
    NotADirectory {
        /// The output path.
        path: PathBuf,
    },
    /// The results there were measured with another config.
    #[error(
        "{path}: the results here were measured with another sweep config: use the same \
         config, another --out, or --resume --allow-changed-config to add to them anyway"
    )]
    ConfigChanged {
        /// The config the results were measured with.
        path: PathBuf,
    },
    /// Another process writes the output directory.
    #[error(transparent)]
    Locked(#[from] LockError),
    /// A line is not a cell result.
    #[error("{path}, line {line}: not a feedbench cell result ({what})")]
    Line {
        /// The results file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        what: String,
    },
}

/// `result` as one line of `results.jsonl`, newline included.
pub fn result_line(result: &CellResult) -> String {
    serde_json::to_string(result).expect("results serialise") + "\n"
}

/// Appends `result` as one line to `path` (created if absent) and syncs it, so an
/// interrupted sweep keeps every finished cell.
pub fn append_result(path: &Path, result: &CellResult) -> Result<(), ResultsError> {
    Ok(jsonl::append(path, result)?)
}

/// Every result in `path`, in file order. A last line cut short (the sweep was killed while
/// writing it) is skipped; any other bad line is an error naming it ([`jsonl`]'s rule).
pub fn read_results(path: &Path) -> Result<Vec<CellResult>, ResultsError> {
    Ok(jsonl::read(path)?)
}

impl From<JsonlError> for ResultsError {
    fn from(e: JsonlError) -> Self {
        match e {
            JsonlError::Io { path, source } => ResultsError::Io { path, source },
            JsonlError::Line { path, line, what } => ResultsError::Line { path, line, what },
        }
    }
}

/// Whether a sweep may add to the results already in its output directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// No: results there are refused, never overwritten.
    No,
    /// Yes, when they were measured with the same config.
    Yes,
    /// Yes, even when the config changed (the cells stay apart by their knobs).
    EvenIfConfigChanged,
}

/// Where a sweep's results go: `results.jsonl` in its output directory, with the results it
/// already holds (when resuming) and each new one appended as it comes.
#[derive(Debug)]
pub struct ResultsSink {
    store: JsonlStore,
    results: Vec<CellResult>,
    /// This sweep alone writes the directory while the sink lives.
    _alone: OutputLock,
    /// The outermost directory this sink made for the output, removed (with what a failed
    /// set-up left in it) where no result is in it when the sink is dropped.
    made: Option<PathBuf>,
}

impl Drop for ResultsSink {
    fn drop(&mut self) {
        if let (Some(made), true) = (&self.made, self.results.is_empty()) {
            let _ = std::fs::remove_dir_all(made);
        }
    }
}

impl ResultsSink {
    /// Creates `out` and opens its results file; `config` is the sweep's config as text, kept
    /// beside the results ([`CONFIG_FILE`]). Without `resume` an existing results file is
    /// refused (never overwritten); with it, its results are read, unless they were measured
    /// with another config, and a last line cut short by an interrupted write is removed so
    /// that the next result starts on a line of its own.
    pub fn open(out: &Path, resume: Resume, config: &str) -> Result<Self, ResultsError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ResultsError::Io { path, source }
        };
        if out.exists() && !out.is_dir() {
            return Err(ResultsError::NotADirectory { path: out.to_path_buf() });
        }
        let made = crate::dataset::files::outermost_missing(out);
        std::fs::create_dir_all(out).map_err(io(out))?;
        Self::open_made(out, resume, config, made.clone()).inspect_err(|_| {
            if let Some(made) = &made {
                let _ = std::fs::remove_dir_all(made);
            }
        })
    }

    /// [`ResultsSink::open`] once `out` is a directory, `made` (the outermost directory made
    /// for it) or not.
    fn open_made(
        out: &Path,
        resume: Resume,
        config: &str,
        made: Option<PathBuf>,
    ) -> Result<Self, ResultsError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ResultsError::Io { path, source }
        };
        let alone = OutputLock::exclusive(out)?;
        let path = out.join(RESULTS_FILE);
        let config_file = out.join(CONFIG_FILE);
        if !path.exists() {
            std::fs::write(&config_file, config).map_err(io(&config_file))?;
            let store = JsonlStore::open::<CellResult>(&path)?.0;
            return Ok(Self { store, results: Vec::new(), _alone: alone, made });
        }
        if resume == Resume::No {
            return Err(ResultsError::Exists { path });
        }
        let stored = std::fs::read_to_string(&config_file).ok();
        if resume == Resume::Yes && stored.as_deref().is_some_and(|stored| stored != config) {
            return Err(ResultsError::ConfigChanged { path: config_file });
        }
        // Read first: results that are refused leave the directory as it was.
        let (store, results) = JsonlStore::open(&path)?;
        if stored.is_none() {
            std::fs::write(&config_file, config).map_err(io(&config_file))?;
        }
        Ok(Self { store, results, _alone: alone, made })
    }

    /// Every result so far, in file order.
    pub fn results(&self) -> &[CellResult] {
        &self.results
    }

    /// Appends `result` to the file (flushed: an interrupted sweep keeps it) and to the list.
    pub fn append(&mut self, result: CellResult) -> Result<(), ResultsError> {
        self.store.append(&result)?;
        self.results.push(result);
        Ok(())
    }

    /// Every result, old and new.
    pub fn into_results(mut self) -> Vec<CellResult> {
        self.made = None;
        std::mem::take(&mut self.results)
    }
}
