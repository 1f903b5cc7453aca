//! Roots that are URLs, for Python: a root's storage options, and its metadata in a local
//! directory for LeRobot's `LeRobotDatasetMetadata` (feedbench.lerobot).

use std::collections::BTreeMap;
use std::path::PathBuf;

use feedbench::dataset::remote::{register_storage_options, ReadMark};
use feedbench::dataset::stage::local_metadata;
use pyo3::prelude::*;
use pyo3::types::PyDict;

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

/// What this process has asked of stores since it started: `requests`, `retries`, `bytes`
/// (received), `needed_bytes` (what the readers needed of them), `first_byte_s` and
/// `request_s` (summed), `first_byte_p10_ms`, `first_byte_p50_ms`, `first_byte_p99_ms`; None
/// where it asked nothing (a local root). A DataLoader worker's are its own: return them beside
/// a batch.
#[pyfunction]
pub(crate) fn remote_reads(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    let Some(reads) = ReadMark::START.since() else { return Ok(None) };
    let dict = PyDict::new(py);
    dict.set_item("requests", reads.requests)?;
    dict.set_item("retries", reads.retries)?;
    dict.set_item("bytes", reads.bytes)?;
    dict.set_item("needed_bytes", reads.needed_bytes)?;
    dict.set_item("first_byte_s", reads.first_byte_s)?;
    dict.set_item("request_s", reads.request_s)?;
    dict.set_item("first_byte_p10_ms", reads.first_byte_p10_ms)?;
    dict.set_item("first_byte_p50_ms", reads.first_byte_p50_ms)?;
    dict.set_item("first_byte_p99_ms", reads.first_byte_p99_ms)?;
    Ok(Some(dict))
}
