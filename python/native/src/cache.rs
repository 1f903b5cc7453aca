//! The reader's decoded-frame cache: camera frames kept in shared memory
//! ([`SharedFrames`]), made by the process that opens the dataset and mapped by every
//! DataLoader worker (a forked one inherits the mapping, a spawned one opens the file by its
//! path), so that the epochs after the first copy frames instead of decoding them.

use std::path::PathBuf;
use std::sync::Arc;

use feedbench::dataset::size::ByteSize;
use feedbench::dataset::video::cache::SharedFrames;
use feedbench::dataset::Dataset;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::reader_error;

/// The largest camera frame of `dataset` as the reader writes it (RGB, CHW; uint8 or float32),
/// bytes, from meta/info.json's shapes; None where it has no camera in videos.
fn largest_frame_bytes(dataset: &Dataset, uint8: bool) -> Option<u64> {
    let value_bytes = if uint8 { 1 } else { 4 };
    let frames = dataset.info().features.iter().filter(|f| f.video.is_some());
    let sizes = frames.filter_map(|f| f.image.as_ref());
    sizes.map(|image| 3 * image.height as u64 * image.width as u64 * value_bytes).max()
}

/// The store of a reader opened with `cache_bytes` (made here) or `cache_path` (another
/// process's, opened), or none.
pub(crate) fn frame_store(
    dataset: &Dataset,
    uint8: bool,
    cache_bytes: Option<u64>,
    cache_path: Option<PathBuf>,
) -> PyResult<Option<Arc<SharedFrames>>> {
    if let Some(path) = cache_path {
        return SharedFrames::open(&path).map(|store| Some(Arc::new(store))).map_err(reader_error);
    }
    let Some(budget) = cache_bytes.filter(|&bytes| bytes > 0) else { return Ok(None) };
    let frame_bytes = largest_frame_bytes(dataset, uint8).ok_or_else(|| {
        PyValueError::new_err(format!(
            "cache_bytes={budget}: {} has no camera in videos, whose frames the cache keeps",
            dataset.root().join("meta/info.json").display()
        ))
    })?;
    let store = SharedFrames::create(budget, frame_bytes)
        .map_err(|e| PyValueError::new_err(format!("cache_bytes={budget}: {e}")))?;
    Ok(Some(Arc::new(store)))
}

/// What the store holds and has done, as a dict (every process's sums).
pub(crate) fn stats<'py>(py: Python<'py>, store: &SharedFrames) -> PyResult<Bound<'py, PyDict>> {
    let stats = store.stats();
    let dict = PyDict::new(py);
    dict.set_item("slots", stats.slots)?;
    dict.set_item("slot_bytes", stats.slot_bytes)?;
    dict.set_item("frames", stats.held)?;
    dict.set_item("bytes", stats.held_bytes)?;
    dict.set_item("copied", stats.copied)?;
    dict.set_item("not_kept", stats.not_kept)?;
    dict.set_item("full", stats.full)?;
    Ok(dict)
}

/// `text` (`2GB`, `512MiB`, `1.5GB`, `123456`) as bytes, as feedbench's own flags read sizes;
/// ValueError naming it where it is none.
#[pyfunction]
pub(crate) fn size_bytes(text: &str) -> PyResult<u64> {
    text.parse::<ByteSize>().map(|size| size.0).map_err(PyValueError::new_err)
}
