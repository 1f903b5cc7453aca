//! The frames' arrays of the batches a process allocates itself (the DataLoader's main process,
//! where `allocate` is None): kept, and handed out again once nothing but this keeps them, so
//! that a batch costs no fresh pages (the kernel zeroes each page on its first touch, about one
//! CPU ms a G1-shaped sample). A DataLoader worker's batches go to the main process in shared
//! memory its `allocate` makes, and are not kept here.

use std::sync::Mutex;

use numpy::{Element, PyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

/// Arrays kept at most, of every shape together: the batch being filled, the one the training
/// loop holds, the one a loader looks ahead to (accelerate's), a spare, and the short last
/// batch of an epoch's.
const KEPT: usize = 6;

/// The arrays kept, the most recently made last.
#[derive(Default)]
pub(crate) struct BatchArrays(Mutex<Vec<Py<PyAny>>>);

impl BatchArrays {
    /// An uninitialised C-contiguous array of `T` shaped `shape`: a kept one that nothing else
    /// refers to (no tensor, view, buffer or name on it), else a new one, kept.
    pub(crate) fn take<'py, T: Element>(
        &self,
        py: Python<'py>,
        shape: &[usize],
    ) -> Bound<'py, PyAny> {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for array in kept.iter() {
            let array = array.bind(py);
            // One reference: this list's. A tensor from it, a view or a memoryview all hold one.
            // Safety: a live object, the GIL held.
            if unsafe { pyo3::ffi::Py_REFCNT(array.as_ptr()) } == 1 {
                if let Ok(typed) = array.cast::<PyArrayDyn<T>>() {
                    if typed.shape() == shape {
                        return array.clone();
                    }
                }
            }
        }
        // Safety: uninitialised values of a plain number type; the batch writes every one
        // before the array is handed out (an array whose decode failed is never returned).
        let fresh = unsafe { PyArrayDyn::<T>::new(py, shape, false) }.into_any();
        if kept.len() == KEPT {
            kept.remove(0);
        }
        kept.push(fresh.clone().unbind());
        fresh
    }
}
