//! Why the loader could not deliver: its one error type, worded by each front end where it
//! names a setting ([`LoaderError::worded`]).

use super::knobs::LoaderKnob;
use crate::dataset::bytes::Bytes;
use crate::dataset::setting::{Naming, Refusal};
use crate::dataset::DatasetError;

/// Why a batch could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum LoaderError {
    /// A sample failed to load.
    #[error("sample index {index}: {source}")]
    Sample {
        /// The global index of the sample.
        index: usize,
        /// What went wrong, naming the file.
        #[source]
        source: DatasetError,
    },
    /// The dataset could not be opened, or the window does not fit it.
    #[error(transparent)]
    Dataset(DatasetError),
    /// The configuration cannot run.
    #[error("loader configuration: {0}")]
    Config(String),
    /// The settings cannot run as given (the front end names them, [`LoaderError::worded`]).
    #[error("{0}")]
    Refused(Refusal),
    /// An epoch has no batch, and why
    /// ([`Loader::why_no_batch`](crate::loader::pipeline::Loader::why_no_batch)).
    #[error("no batch: {0}")]
    NoBatch(Refusal),
    /// The batches in flight would not fit in memory.
    #[error("{}", self.worded(&|s| s.key().to_string()))]
    Memory {
        /// Samples per batch.
        batch: usize,
        /// Bytes of one batch.
        needed: u128,
        /// Batches alive at once.
        in_flight: usize,
        /// Bytes the kernel says are available.
        available: u64,
    },
    /// LeRobot's loader (the `lerobot` backend) could not run or failed, with its message.
    #[error("{0}")]
    Lerobot(String),
    /// A loader thread panicked (a bug: please report it), with the panic's message.
    #[error(
        "the loader's thread {thread} panicked: {message} (a bug in feedbench: please report it)"
    )]
    Panicked {
        /// The thread: `feedbench-worker-<n>`, or `trainer` when loading in the consuming thread.
        thread: String,
        /// The panic's message.
        message: String,
    },
}

impl LoaderError {
    /// Its text with the settings it names named by `name` (a front end's flags or keys).
    pub fn worded(&self, name: Naming) -> String {
        match self {
            LoaderError::Refused(refusal) => refusal.worded(name),
            LoaderError::NoBatch(refusal) => format!("no batch: {}", refusal.worded(name)),
            LoaderError::Dataset(e) => e.worded(name),
            &LoaderError::Memory { batch, needed, in_flight, available } => format!(
                "a batch of {batch} samples needs {:.1} ({:.1} for the {in_flight} batches in \
                 flight); {:.1} of memory is available: lower {}, {}, {} or {}",
                Bytes::new(needed as f64).gb(),
                Bytes::new((needed * in_flight as u128) as f64).gb(),
                Bytes::of(available).gb(),
                name(LoaderKnob::BATCH.setting()),
                name(LoaderKnob::RESOLUTION.setting()),
                name(LoaderKnob::WORKERS.setting()),
                name(LoaderKnob::PREFETCH.setting())
            ),
            other => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_refusal_names_the_settings_as_the_front_end_does() {
        let error =
            LoaderError::Memory { batch: 8, needed: 2e9 as u128, in_flight: 3, available: 1 };
        let text = error.to_string();
        assert!(text.contains("lower batch, resolution, workers or prefetch"), "{text}");
        assert!(text.contains("needs 2.0 GB (6.0 GB for the 3 batches in flight)"), "{text}");
        let upper = error.worded(&|s| s.key().to_uppercase());
        assert!(upper.ends_with("lower BATCH, RESOLUTION, WORKERS or PREFETCH"), "{upper}");
    }
}
