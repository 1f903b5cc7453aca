//! Roots that are URLs, for Python: a root's storage options, and its metadata in a local
//! directory for LeRobot's `LeRobotDatasetMetadata` (feedbench.lerobot).

use std::collections::BTreeMap;
use std::path::PathBuf;

use feedbench::dataset::remote::{register_storage_options, ReadMark};
use feedbench::dataset::stage::local_metadata;
use pyo3::exceptions::PyValueError;
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

/// What this process has asked of stores since it started, as a dict of the fields of
/// `RemoteReads` (`requests`, `bytes`, `needed_bytes`, `receiving_s`, `first_byte_p50_ms`, …);
/// None where it asked nothing (a local root). A DataLoader worker's are its own: return them
/// beside a batch.
#[pyfunction]
pub(crate) fn remote_reads(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    let Some(reads) = ReadMark::START.since() else { return Ok(None) };
    let fields = match serde_json::to_value(&reads) {
        Ok(serde_json::Value::Object(fields)) => fields,
        other => return Err(PyValueError::new_err(format!("remote reads as JSON: {other:?}"))),
    };
    let dict = PyDict::new(py);
    for (key, value) in fields {
        match value.as_u64() {
            Some(count) => dict.set_item(key, count)?,
            None => dict.set_item(key, value.as_f64())?,
        }
    }
    Ok(Some(dict))
}
