//! A batch collated by the reader itself: what PyTorch's `default_collate` makes of the items at
//! some positions (each key stacked along a new first dimension; strings as lists), with the
//! camera frames decoded straight into arrays the caller allocates (shared memory in a
//! DataLoader worker), so that no stack copies them again.

use numpy::{Element, PyReadwriteArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use feedbench::dataset::video::cache::copy_held;
use feedbench::dataset::video::FrameBuffer;
use feedbench::dataset::{DatasetError, Sample, Values};

use crate::{reader_error, to_python, Reader, ReaderError, Value, Workers};

/// A camera's (or image feature's) frames across the batch: where each item's go.
struct PixelColumn {
    key: String,
    /// Values of one item.
    item_len: usize,
    /// The caller's array, `[B, …]`, written through this pointer while the GIL is released.
    out: Out,
}

/// The start of a caller's array; each item writes its own disjoint part.
#[derive(Clone, Copy)]
enum Out {
    U8(*mut u8),
    F32(*mut f32),
}

// Safety: each item's slice is disjoint from every other's, and the arrays outlive the decode
// (the caller's borrows are held across it).
unsafe impl Send for Out {}
unsafe impl Sync for Out {}

impl Out {
    /// Item `item`'s part of the array: `len` values.
    ///
    /// # Safety
    /// The array holds at least `(item + 1) × len` values, and no other thread writes this part.
    unsafe fn part<'a>(self, item: usize, len: usize) -> FrameBuffer<'a> {
        match self {
            Out::U8(p) => FrameBuffer::U8(std::slice::from_raw_parts_mut(p.add(item * len), len)),
            Out::F32(p) => FrameBuffer::F32(std::slice::from_raw_parts_mut(p.add(item * len), len)),
        }
    }
}

impl Reader {
    /// [`Reader::batch`]'s work.
    pub(crate) fn collate<'py>(
        &self,
        py: Python<'py>,
        positions: Vec<usize>,
        threads: usize,
        allocate: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.check_positions(&positions)?;
        let workers = self.workers(threads.max(1))?;
        let samples = py.detach(|| self.samples(&positions)).map_err(reader_error)?;
        let batch = self.collate_samples(py, &workers, &samples, allocate);
        *self.spare.lock().unwrap_or_else(|e| e.into_inner()) = samples;
        batch
    }

    /// The batch of `samples`, their frames decoded into the arrays `allocate` returns (left
    /// out of the batch), or without it into kept arrays (in the batch).
    fn collate_samples<'py>(
        &self,
        py: Python<'py>,
        workers: &Workers,
        samples: &[Sample],
        allocate: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        if samples.is_empty() {
            return Ok(PyDict::new(py));
        }

        // The frames' arrays (the caller's or kept), borrowed for writing until the decode is done.
        let (mut bytes, mut floats) = (Vec::new(), Vec::new());
        let mut columns = Vec::new();
        let mut kept = Vec::new();
        for (key, dims, uint8) in self.pixel_layout(workers, samples).map_err(reader_error)? {
            let item_len: usize = dims.iter().product();
            let shape: Vec<usize> = std::iter::once(samples.len()).chain(dims).collect();
            let array = match &allocate {
                Some(allocate) => allocate.call1((
                    &key,
                    shape.clone(),
                    if uint8 { "uint8" } else { "float32" },
                ))?,
                None => {
                    let array = if uint8 {
                        self.arrays.take::<u8>(py, &shape)
                    } else {
                        self.arrays.take::<f32>(py, &shape)
                    };
                    kept.push((key.clone(), array.clone()));
                    array
                }
            };
            let wrong = || {
                ReaderError::new_err(format!(
                    "allocate({key:?}, {shape:?}) returned no C-contiguous {} array of that shape",
                    if uint8 { "uint8" } else { "float32" }
                ))
            };
            let out = if uint8 {
                let (writable, start) = writable::<u8>(&array, &shape).ok_or_else(wrong)?;
                bytes.push(writable);
                Out::U8(start)
            } else {
                let (writable, start) = writable::<f32>(&array, &shape).ok_or_else(wrong)?;
                floats.push(writable);
                Out::F32(start)
            };
            columns.push(PixelColumn { key, item_len, out });
        }
        py.detach(|| self.decode_batch(workers, samples, &columns)).map_err(reader_error)?;
        drop((bytes, floats));

        let batch = PyDict::new(py);
        for (key, array) in kept {
            batch.set_item(key, array)?;
        }
        for (key, value) in collate_values(samples)? {
            batch.set_item(key, to_python(py, value)?)?;
        }
        let tasks: Vec<&str> = samples.iter().map(|s| s.task.as_str()).collect();
        batch.set_item("task", PyList::new(py, tasks)?)?;
        Ok(batch)
    }

    /// The samples (rows, windows, frame times; nothing decoded) at `positions`, built in the
    /// buffers of the last batch's (a batch like the last one allocates nothing here).
    fn samples(&self, positions: &[usize]) -> Result<Vec<Sample>, DatasetError> {
        let mut samples =
            std::mem::take(&mut *self.spare.lock().unwrap_or_else(|e| e.into_inner()));
        samples.resize_with(positions.len(), Sample::default);
        for (sample, &position) in samples.iter_mut().zip(positions) {
            self.dataset.sample_into(self.indices[position], &self.window, sample)?;
        }
        Ok(samples)
    }

    /// Per pixel key: its name, one item's dimensions (as [`Reader::item`] shapes them) and
    /// whether it is uint8; every item's must be the same, as a stack needs.
    fn pixel_layout(
        &self,
        workers: &Workers,
        samples: &[Sample],
    ) -> Result<Vec<(String, Vec<usize>, bool)>, DatasetError> {
        let decoder = workers.decoders[workers.threads].lock().unwrap_or_else(|e| e.into_inner());
        let mut layout = Vec::new();
        for key in samples[0].pixel_keys() {
            let mut dims = None;
            for sample in samples {
                let shape = sample.pixel_shape(key, &**decoder)?.ok_or_else(|| {
                    DatasetError::invalid(
                        self.dataset.root(),
                        format!("item {} has no `{key}`", sample.index),
                    )
                })?;
                let item_dims = self.item_dims(sample, key, shape);
                match &dims {
                    None => dims = Some(item_dims),
                    Some(first) if *first != item_dims => {
                        return Err(DatasetError::invalid(
                            self.dataset.root(),
                            format!(
                                "`{key}` of index {} is {item_dims:?}, of index {} {first:?}: a batch stacks one shape",
                                sample.index, samples[0].index
                            ),
                        ))
                    }
                    Some(_) => {}
                }
            }
            let uint8 = self.uint8_pixels(&samples[0], key);
            layout.push((key.to_owned(), dims.expect("at least one sample"), uint8));
        }
        Ok(layout)
    }

    /// Whether every frame of item `item` was copied from the frame cache into its part of each
    /// column (on the calling thread: a batch the cache holds wakes no pool thread).
    fn copied_held(&self, samples: &[Sample], columns: &[PixelColumn], item: usize) -> bool {
        let Some(store) = &self.frames else { return false };
        columns.iter().all(|column| {
            let Some(frames) = samples[item].videos.get(&column.key) else { return false };
            // Safety: as in `decode_batch`; the items are copied one after the other.
            let part = unsafe { column.out.part(item, column.item_len) };
            copy_held(&**store, &frames.path, &frames.timestamps, part)
        })
    }

    /// Fills every item's part of each column: from the frame cache where it holds all of an
    /// item's frames, else decoded, on the pool.
    fn decode_batch(
        &self,
        workers: &Workers,
        samples: &[Sample],
        columns: &[PixelColumn],
    ) -> Result<(), DatasetError> {
        let pending: Vec<usize> =
            (0..samples.len()).filter(|&i| !self.copied_held(samples, columns, i)).collect();
        let one = |&item: &usize| {
            let mut decoder = workers.decoder().lock().unwrap_or_else(|e| e.into_inner());
            for column in columns {
                // Safety: the column's array holds samples.len() × item_len values (checked
                // against the shape it was allocated with), and item `item` is decoded once.
                let part = unsafe { column.out.part(item, column.item_len) };
                samples[item].decode_pixels_into(&column.key, &mut **decoder, part)?;
            }
            Ok(())
        };
        match &workers.pool {
            Some(pool) if pending.len() > 1 => {
                use rayon::prelude::*;
                pool.install(|| pending.par_iter().try_for_each(one))
            }
            _ => pending.iter().try_for_each(one),
        }
    }
}

/// `array` borrowed for writing, with the start of its values, if it is a C-contiguous array of
/// `T` shaped `shape`.
fn writable<'py, T: Element>(
    array: &Bound<'py, PyAny>,
    shape: &[usize],
) -> Option<(PyReadwriteArrayDyn<'py, T>, *mut T)> {
    let mut writable: PyReadwriteArrayDyn<'py, T> = array.extract().ok()?;
    if writable.shape() != shape || !writable.is_c_contiguous() {
        return None;
    }
    let start = writable.as_slice_mut().ok()?.as_mut_ptr();
    Some((writable, start))
}

/// Every non-pixel key of the samples stacked: parquet columns and pad masks as `[B, …]`
/// arrays, string columns as lists.
fn collate_values(samples: &[Sample]) -> PyResult<Vec<(String, Value)>> {
    let first = &samples[0];
    let mut values = Vec::new();
    // Samples built with one window hold the same keys, shaped alike (`Dataset::sample_into`):
    // each sample's entries are walked alongside the first's, their lengths compared.
    let mut rest: Vec<_> = samples[1..].iter().map(|sample| sample.arrays.values()).collect();
    for (key, array) in &first.arrays {
        let others = rest.iter_mut().map(|arrays| arrays.next());
        if first.videos.contains_key(key) || first.images.contains_key(key) {
            others.for_each(drop);
            continue;
        }
        let mut stacked = array.values.empty_like(array.values.len() * samples.len());
        stacked.extend_from(&array.values, 0..array.values.len());
        for (sample, other) in samples[1..].iter().zip(others) {
            let other = other.filter(|a| a.values.len() == array.values.len()).ok_or_else(|| {
                ReaderError::new_err(format!(
                    "`{key}` of index {} is not shaped as index {}'s {:?}: a batch stacks one shape",
                    sample.index, first.index, array.shape
                ))
            })?;
            stacked.extend_from(&other.values, 0..other.values.len());
        }
        let value = match stacked {
            Values::Str(values) => Value::Text { values, windowed: true },
            values => {
                let shape =
                    std::iter::once(samples.len()).chain(array.shape.iter().copied()).collect();
                Value::Array { shape, values }
            }
        };
        values.push((key.clone(), value));
    }
    for (key, mask) in &first.pad_masks {
        let mut stacked = Vec::with_capacity(mask.len() * samples.len());
        for sample in samples {
            stacked.extend_from_slice(&sample.pad_masks[key]);
        }
        let shape = vec![samples.len(), mask.len()];
        values
            .push((format!("{key}_is_pad"), Value::Array { shape, values: Values::Bool(stacked) }));
    }
    Ok(values)
}
