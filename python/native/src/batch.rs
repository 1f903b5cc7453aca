//! A batch collated by the reader itself: what PyTorch's `default_collate` makes of the items at
//! some positions (each key stacked along a new first dimension; strings as lists), with the
//! camera frames decoded straight into arrays the caller allocates (shared memory in a
//! DataLoader worker), so that no stack copies them again.

use numpy::{Element, PyReadwriteArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use feedbench::dataset::sample::{BatchSamples, Stacked};
use feedbench::dataset::video::cache::copy_held;
use feedbench::dataset::video::{FrameBuffer, Prefetched};
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
        let mut samples =
            std::mem::take(&mut *self.spare.lock().unwrap_or_else(|e| e.into_inner()));
        let built = py.detach(|| {
            let indices = positions.iter().map(|&position| self.indices[position]);
            self.dataset.batch_into(indices, &self.window, &mut samples)
        });
        let batch = match built {
            Ok(()) => self.collate_samples(py, &workers, &mut samples, allocate),
            Err(error) => Err(reader_error(error)),
        };
        *self.spare.lock().unwrap_or_else(|e| e.into_inner()) = samples;
        batch
    }

    /// The batch of `batch`'s items, their frames decoded into the arrays `allocate` returns
    /// (left out of the batch), or without it into kept arrays (in the batch); their stacked
    /// values handed over.
    fn collate_samples<'py>(
        &self,
        py: Python<'py>,
        workers: &Workers,
        batch: &mut BatchSamples,
        allocate: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let samples = &batch.items[..];
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

        let dict = PyDict::new(py);
        for (key, array) in kept {
            dict.set_item(key, array)?;
        }
        for (key, value) in stacked_values(samples.len(), &mut batch.stacked) {
            dict.set_item(key, to_python(py, value)?)?;
        }
        let tasks: Vec<&str> = batch.items.iter().map(|s| s.task.as_str()).collect();
        dict.set_item("task", PyList::new(py, tasks)?)?;
        Ok(dict)
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
        // The frames of a remote root's files, fetched at once for every decoder (none for
        // local files).
        let wanted: Vec<(&std::path::Path, &[f64])> = pending
            .iter()
            .flat_map(|&i| samples[i].videos.values())
            .map(|v| (v.path.as_path(), v.timestamps.as_slice()))
            .collect();
        let prefetched = Prefetched::fetch(&wanted, self.decode.frame_match(), &self.decode.fetch)?;
        for decoder in &workers.decoders {
            decoder.lock().unwrap_or_else(|e| e.into_inner()).use_prefetched(prefetched.clone());
        }
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

/// The batch's columns and pad masks as values: each column's stack `[B, …]` (a string
/// column's as a list), each `<key>_is_pad` `[B, T]`; their values taken out of `stacked`.
fn stacked_values(items: usize, stacked: &mut Stacked) -> Vec<(String, Value)> {
    let mut values = Vec::with_capacity(stacked.arrays.len() + stacked.pad_masks.len());
    for (key, array) in &mut stacked.arrays {
        // An empty placeholder: the next `batch_into` gives every stack fresh values.
        let value = match std::mem::replace(&mut array.values, Values::Bool(Vec::new())) {
            Values::Str(values) => Value::Text { values, windowed: true },
            taken => Value::Array { shape: array.shape.clone(), values: taken },
        };
        values.push((key.clone(), value));
    }
    for (key, mask) in &mut stacked.pad_masks {
        let shape = vec![items, mask.len() / items];
        let mask = Values::Bool(std::mem::take(mask));
        values.push((format!("{key}_is_pad"), Value::Array { shape, values: mask }));
    }
    values
}
