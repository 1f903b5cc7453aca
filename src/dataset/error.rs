//! The one error type of the dataset module: every variant names the file it is about.

use std::path::{Path, PathBuf};

use super::setting::Refusal;

/// Result of dataset operations.
pub type Result<T, E = DatasetError> = std::result::Result<T, E>;

/// A failure to read or write a LeRobot dataset, naming the file and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// A file could not be opened, read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON (or JSON lines) file did not parse or did not have the expected fields.
    #[error("{}{}: {source}", path.display(), line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Json {
        /// The file.
        path: PathBuf,
        /// The 1-based line, for JSON lines files.
        line: Option<usize>,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The dataset declares a version this reader does not know.
    #[error("{}: unsupported codebase_version {found:?}; feedbench reads v2.0, v2.1 and v3.0", path.display())]
    UnsupportedVersion {
        /// The info.json file.
        path: PathBuf,
        /// The version string found.
        found: String,
    },
    /// A Parquet file could not be read.
    #[error("{}: parquet: {source}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// An Arrow operation on data read from a file failed.
    #[error("{}: arrow: {source}", path.display())]
    Arrow {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: arrow::error::ArrowError,
    },
    /// A file of a selected episode is missing (a partial download).
    #[error("{}: missing file of episode {episode} (partial download? select the episodes that are present)", path.display())]
    MissingFile {
        /// The expected file.
        path: PathBuf,
        /// The episode that needs it.
        episode: usize,
    },
    /// A file's content disagrees with what the metadata says it should hold.
    #[error("{}: {what}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        what: String,
    },
    /// Encoder settings the encoder would refuse; `path` is where they came from (a preset, or
    /// the directory being written).
    #[error("{}: {problem}", path.display())]
    Encode {
        /// The preset or output directory.
        path: PathBuf,
        /// Which setting and why.
        problem: crate::dataset::write::encode::problem::EncodeProblem,
    },
    /// Writing was stopped (by a signal) before the dataset was complete; nothing is left.
    #[error("{}: stopped before it was complete; nothing was written", path.display())]
    Stopped {
        /// The dataset that was being written.
        path: PathBuf,
    },
    /// A setting of the user's that cannot be served for `path`; the front end names it
    /// ([`Refusal::worded`]).
    #[error("{}: {refusal}", path.display())]
    Refused {
        /// The file or directory.
        path: PathBuf,
        /// Why, naming the setting.
        refusal: Refusal,
    },
    /// info.json's `fps` is no rate of the dataset's timestamps (every non-zero delta would
    /// leave every episode): no dataset, refused even where damaged files are summarised.
    #[error("{}: {what}", path.display())]
    NoRate {
        /// The info.json file.
        path: PathBuf,
        /// The fps, the rate the timestamps show, and why no window can be read.
        what: String,
    },
    /// An object of a dataset whose root is a URL could not be read: absent, refused, out of
    /// reach, too slow, or changed while it was read.
    #[error("{}: {what}", path.display())]
    Remote {
        /// The object's URL.
        path: PathBuf,
        /// What failed, and what would help.
        what: String,
    },
    /// A request that does not fit the dataset (an index, a key, a delta).
    #[error("{}: {what}", root.display())]
    Request {
        /// The dataset root.
        root: PathBuf,
        /// What was asked and why it cannot be served.
        what: String,
    },
}

impl DatasetError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }

    /// Content of `path` that disagrees with what was expected.
    pub fn invalid(path: impl AsRef<Path>, what: impl Into<String>) -> Self {
        Self::Invalid { path: path.as_ref().to_path_buf(), what: what.into() }
    }

    /// A setting that cannot be served for `path`, in `text` made from the setting's name.
    pub fn refused(
        path: impl AsRef<Path>,
        text: impl Fn(super::setting::Naming) -> String + Send + Sync + 'static,
    ) -> Self {
        Self::Refused { path: path.as_ref().to_path_buf(), refusal: Refusal::new(text) }
    }

    /// Its text with the settings it names named by `name` (a front end's flags or keys).
    pub fn worded(&self, name: super::setting::Naming) -> String {
        match self {
            Self::Refused { path, refusal } => {
                format!("{}: {}", path.display(), refusal.worded(name))
            }
            other => other.to_string(),
        }
    }

    /// A parquet error while reading `path`.
    pub fn parquet(path: impl AsRef<Path>, source: parquet::errors::ParquetError) -> Self {
        Self::Parquet { path: path.as_ref().to_path_buf(), source }
    }

    /// An arrow error on data from `path`.
    pub fn arrow(path: impl AsRef<Path>, source: arrow::error::ArrowError) -> Self {
        Self::Arrow { path: path.as_ref().to_path_buf(), source }
    }
}
