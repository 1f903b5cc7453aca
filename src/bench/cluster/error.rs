//! Why planning, running a share, or merging failed.

use std::path::PathBuf;

use crate::bench::report::ReportError;
use crate::bench::sweep::config::ConfigError;
use crate::bench::sweep::SweepError;

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
         not the loader"
    )]
    TooManyWorkers {
        /// How many cells ask for too many.
        cells: usize,
        /// The most workers asked for.
        workers: usize,
        /// The CPUs the task may use.
        cpus: usize,
        /// Them, as said: how many and what limits them.
        budget: String,
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
