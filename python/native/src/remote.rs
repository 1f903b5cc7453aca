//! Roots that are URLs, for Python: a root's storage options, and its metadata in a local
//! directory for LeRobot's `LeRobotDatasetMetadata` (feedbench.lerobot).

use std::collections::BTreeMap;
use std::path::PathBuf;

use feedbench::dataset::remote::register_storage_options;
use feedbench::dataset::stage::local_metadata;
use pyo3::prelude::*;

use super::reader_error;

/// Sets the storage options (`storage_options=`, as LeRobot's PRs name them: `endpoint`,
/// `region`, `access_key_id`, …) of the roots under `root`, in this process; a DataLoader
/// worker sets them again as it opens its reader.
#[pyfunction]
pub(crate) fn set_storage_options(root: &str, options: BTreeMap<String, String>) {
    register_storage_options(root, options.into_iter().collect());
}

/// The metadata of the dataset at `root` in a local directory: `root` itself where it is one,
/// a URL root's copied into feedbench's cache and kept while its files' versions are the same.
#[pyfunction]
pub(crate) fn local_metadata_of(py: Python<'_>, root: PathBuf) -> PyResult<PathBuf> {
    py.detach(|| local_metadata(&root)).map_err(reader_error)
}
