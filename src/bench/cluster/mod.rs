//! Beyond one machine, on the scheduler the user already has (Slurm, or Kubernetes indexed
//! jobs): a sweep's plan written once (`sweep plan`), its cells shared among the tasks of a
//! job array (`sweep run`), each cell's result in a file of its own, and the files merged into
//! one report (`merge`); and the per-rank figures of a multi-process `load` or `train`.
//!
//! Nothing here schedules: a task learns its share and its CPUs from the environment the
//! scheduler gives it, and every file is written whole or not at all, so a task that is
//! killed, requeued or resubmitted loses and repeats no finished cell.

pub mod budget;
pub mod cells;
pub mod merge;
pub mod plan_file;
pub mod ranks;
pub mod task;

use std::path::PathBuf;

pub use budget::CpuBudget;

use super::report::ReportError;
use super::sweep::config::ConfigError;
use super::sweep::SweepError;

/// Why planning, running a share, or merging failed.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Another process writes the output directory.
    #[error(transparent)]
    Locked(#[from] crate::bench::store::lock::LockError),
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds something other than what feedbench wrote there.
    #[error("{path}: {what}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A flag or an environment variable holds something unusable.
    #[error("{name}: {what}")]
    Setting {
        /// The flag (`--task`) or variable (`$SLURM_ARRAY_TASK_ID`).
        name: String,
        /// What was expected.
        what: String,
    },
    /// Cells that ask for more loader workers than the task has CPUs.
    #[error(
        "{cells} of this task's cells ask for up to {workers} loader workers, but the task may \
         use {budget}: ask the scheduler for more (sbatch --cpus-per-task) or drop worker counts \
         above {cpus} from [loader] workers; oversubscribed workers would measure contention, \
         not the loader",
        cpus = budget.cpus
    )]
    TooManyWorkers {
        /// How many cells ask for too many.
        cells: usize,
        /// The most workers asked for.
        workers: usize,
        /// What the task may use.
        budget: CpuBudget,
    },
    /// The sweep config kept beside the plan is not a valid config.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The merged report could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// Measuring failed.
    #[error(transparent)]
    Sweep(#[from] SweepError),
}

impl ClusterError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }

    /// A file whose contents are not what was expected.
    pub fn file(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        Self::File { path: path.into(), what: what.into() }
    }
}
