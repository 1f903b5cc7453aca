//! `feedbench._native`: feedbench's reader of LeRobot datasets, for Python.
//!
//! One class, `Reader`: a dataset opened with LeRobot's `episodes`, `delta_timestamps` and
//! `tolerance_s`, whose items are what `LeRobotDataset[i]` returns, as NumPy arrays that own the
//! reader's buffers (no copy on the way to torch). `feedbench.lerobot.FeedbenchDataset` is the
//! torch Dataset on top: it orders the keys as LeRobot does, makes tensors, applies
//! `image_transforms` and pickles. A batch of items is decoded by the reader's own threads
//! (a rayon pool, each thread with its own video decoder), with the GIL released.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use feedbench::dataset::remote::Fetch;
use feedbench::dataset::sample::BatchSamples;
use feedbench::dataset::video::cache::{CachedDecoder, SharedFrames};
use feedbench::dataset::video::{DecodeOptions, FrameBuffer, FrameDecoder, VideoDecoder};
use feedbench::dataset::{
    Contract, Dataset, DatasetError, DatasetOptions, PixelShape, Sample, Values, Window, WindowSpec,
};
use feedbench::loader::config::LoaderConfig;
use feedbench::loader::knobs::LoaderKnob;
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{Element, IntoPyArray};
use pyo3::exceptions::{PyException, PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

mod arrays;
mod batch;
mod cache;
mod remote;

// Named by the package path it is imported from, so that pickle finds it: a DataLoader worker
// sends its error to the main process pickled, and an error that does not pickle never arrives
// (the main process waits for it for ever).
pyo3::create_exception!(
    feedbench._native,
    ReaderError,
    PyException,
    "A dataset the reader cannot read, or a request it refuses; the message names the file or key."
);

/// The error of a dataset call as Python's [`ReaderError`].
pub(crate) fn reader_error(error: DatasetError) -> PyErr {
    ReaderError::new_err(error.to_string())
}

/// One value of an item, before it becomes a Python object.
pub(crate) enum Value {
    /// A NumPy array: the dtype LeRobot's tensor has.
    Array { shape: Vec<usize>, values: Values },
    /// A string column's values: one string without a window, a list with one.
    Text { values: Vec<String>, windowed: bool },
}

/// An item: its keys and values, in no particular order (the Python side orders them).
type Item = Vec<(String, Value)>;

/// The threads that decode a batch, made for one process and one thread count.
pub(crate) struct Workers {
    /// The process they were started in: a forked DataLoader worker inherits the object but
    /// not the threads, and starts its own.
    pid: u32,
    pub(crate) threads: usize,
    pub(crate) pool: Option<rayon::ThreadPool>,
    /// One decoder per pool thread, then the caller's; behind the frame cache where there is one.
    pub(crate) decoders: Vec<Mutex<Box<dyn FrameDecoder>>>,
}

impl Workers {
    fn new(
        threads: usize,
        options: &DecodeOptions,
        frames: Option<&Arc<SharedFrames>>,
    ) -> PyResult<Self> {
        let pool = if threads > 1 {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("feedbench-reader-{i}"))
                .build()
                .map_err(|e| {
                    ReaderError::new_err(format!("cannot start {threads} reader threads: {e}"))
                })?;
            Some(pool)
        } else {
            None
        };
        let decoder = || -> Box<dyn FrameDecoder> {
            let decoder = Box::new(VideoDecoder::new(options.clone()));
            match frames {
                Some(frames) => Box::new(CachedDecoder::new(decoder, frames.clone())),
                None => decoder,
            }
        };
        let decoders = (0..=threads).map(|_| Mutex::new(decoder())).collect();
        Ok(Self { pid: std::process::id(), threads, pool, decoders })
    }

    /// The decoder of the thread this runs on: a pool thread's own, else the caller's.
    pub(crate) fn decoder(&self) -> &Mutex<Box<dyn FrameDecoder>> {
        let slot = rayon::current_thread_index().unwrap_or(self.threads);
        &self.decoders[slot.min(self.threads)]
    }
}

/// How a batch's frames of a URL root are fetched: `requests_in_flight` in flight (checked as
/// the loader's knob checks it), else the knob's default.
fn fetch_of(requests_in_flight: Option<usize>) -> PyResult<Fetch> {
    let mut config = LoaderConfig::default();
    if let Some(requests) = requests_in_flight {
        LoaderKnob::REQUESTS_IN_FLIGHT
            .set(&mut config, &requests.to_string())
            .map_err(|e| PyValueError::new_err(format!("requests_in_flight={requests}: {e}")))?;
    }
    Ok(config.decode_options(0.0, Contract::default()).fetch)
}

/// A LeRobot dataset opened for reading items, as `LeRobotDataset` does for the same arguments.
#[pyclass(module = "feedbench._native", frozen)]
pub(crate) struct Reader {
    dataset: Dataset,
    window: Window,
    /// The global `index` of each item position (LeRobot's relative index), selected episodes
    /// in order.
    indices: Vec<usize>,
    /// Camera (video) frames as uint8 (LeRobot's `return_uint8`); images in parquet are
    /// float32 either way, as LeRobot returns them.
    uint8: bool,
    decode: DecodeOptions,
    /// The decoded-frame cache, shared with the DataLoader's workers; None without one.
    frames: Option<Arc<SharedFrames>>,
    workers: Mutex<Option<Arc<Workers>>>,
    /// The samples of the last batch, whose buffers the next batch's are built in.
    spare: Mutex<BatchSamples>,
    /// The frames' arrays of batches collated without `allocate`, for reuse.
    arrays: arrays::BatchArrays,
}

#[pymethods]
impl Reader {
    /// Opens the dataset at `root`: `episodes` (None for all), `delta_timestamps` (key →
    /// seconds), `tolerance_s`, `uint8` (camera frames as uint8). `cache_bytes` makes a
    /// decoded-frame cache of that many bytes in shared memory; `cache_path` opens the one
    /// another process's reader made (its `cache_path()`). `requests_in_flight` sets how many
    /// range requests a batch of a URL root's frames keeps in flight (the loader's knob of that
    /// name; its default where None). Features the reader does not read are refused by name.
    #[new]
    #[pyo3(signature = (root, episodes, delta_timestamps, tolerance_s, uint8, cache_bytes=None, cache_path=None, contract="released", requests_in_flight=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        episodes: Option<Vec<usize>>,
        delta_timestamps: Option<BTreeMap<String, Vec<f64>>>,
        tolerance_s: f64,
        uint8: bool,
        cache_bytes: Option<u64>,
        cache_path: Option<PathBuf>,
        contract: &str,
        requests_in_flight: Option<usize>,
    ) -> PyResult<Self> {
        let contract: Contract = contract.parse().map_err(ReaderError::new_err)?;
        let fetch = fetch_of(requests_in_flight)?;
        py.detach(|| {
            let options = DatasetOptions { episodes, tolerance_s, contract };
            let dataset = Dataset::open_with(&root, &options).map_err(reader_error)?;
            if let Some(depth) = dataset
                .info()
                .features
                .iter()
                .find(|f| f.video.as_ref().is_some_and(|v| v.is_depth_map == Some(true)))
            {
                return Err(ReaderError::new_err(format!(
                    "{}: feature `{}` is a depth map, which feedbench's reader does not read \
                     (LeRobot's LeRobotDataset does)",
                    root.join("meta/info.json").display(),
                    depth.name
                )));
            }
            let spec = match delta_timestamps {
                Some(deltas) => WindowSpec::Deltas(deltas),
                None => WindowSpec::Single,
            };
            let window = dataset.window(&spec).map_err(reader_error)?;
            let indices = dataset.sample_indices(0);
            let decode = DecodeOptions { tolerance_s, contract, fetch, ..DecodeOptions::default() };
            let frames = cache::frame_store(&dataset, uint8, cache_bytes, cache_path)?;
            Ok(Self {
                dataset,
                window,
                indices,
                uint8,
                decode,
                frames,
                workers: Mutex::new(None),
                spare: Mutex::new(BatchSamples::default()),
                arrays: arrays::BatchArrays::default(),
            })
        })
    }

    /// The decoded-frame cache's file, for another process's reader to open; None without one.
    fn cache_path(&self) -> Option<PathBuf> {
        self.frames.as_ref().map(|frames| frames.path().to_path_buf())
    }

    /// What the decoded-frame cache holds and has done, summed over every process using it
    /// (`slots`, `slot_bytes`, `frames`, `bytes`, `copied`, `not_kept`, `full`); None without one.
    fn cache_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        self.frames.as_deref().map(|frames| cache::stats(py, frames)).transpose()
    }

    /// meta/info.json as the reader read it, in JSON: what `FeedbenchDataset` says of the
    /// dataset (fps, features, episodes), from the one read the reader checked.
    fn info_json(&self) -> String {
        self.dataset.info_document().to_string()
    }

    /// Items in the selected episodes (LeRobot's `num_frames`).
    fn __len__(&self) -> usize {
        self.indices.len()
    }

    /// The global `index` of every item position, in order.
    fn indices<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        self.indices.clone().into_pyarray(py).into_any()
    }

    /// The items at `positions` collated as `default_collate` collates them: every key a NumPy
    /// array `[B, …]` or a list of strings. Camera frames are decoded into arrays
    /// `allocate(key, shape, dtype)` returns (C-contiguous NumPy arrays of that shape and dtype,
    /// "uint8" or "float32"), which the result leaves out; without `allocate`, into arrays the
    /// reader keeps and hands out again once nothing else refers to them.
    #[pyo3(signature = (positions, threads, allocate=None))]
    fn batch<'py>(
        &self,
        py: Python<'py>,
        positions: Vec<usize>,
        threads: usize,
        allocate: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.collate(py, positions, threads, allocate)
    }

    /// The items at `positions` (0 ≤ position < len), each a dict of key → NumPy array (or
    /// string), decoded by `threads` threads of the reader's own.
    fn items<'py>(
        &self,
        py: Python<'py>,
        positions: Vec<usize>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        self.check_positions(&positions)?;
        let workers = self.workers(threads.max(1))?;
        let items = py.detach(|| self.read(&workers, &positions)).map_err(reader_error)?;
        let list = PyList::empty(py);
        for item in items {
            let dict = PyDict::new(py);
            for (key, value) in item {
                dict.set_item(key, to_python(py, value)?)?;
            }
            list.append(dict)?;
        }
        Ok(list)
    }
}

impl Reader {
    /// An IndexError for the first position past the end.
    fn check_positions(&self, positions: &[usize]) -> PyResult<()> {
        match positions.iter().find(|&&p| p >= self.indices.len()) {
            Some(bad) => Err(PyIndexError::new_err(format!(
                "index {bad} is out of range: the dataset holds {} items",
                self.indices.len()
            ))),
            None => Ok(()),
        }
    }

    /// Whether pixel key `key` comes back as uint8: a camera's frames with `return_uint8`;
    /// images in parquet are float32 either way, as LeRobot returns them.
    fn uint8_pixels(&self, sample: &Sample, key: &str) -> bool {
        self.uint8 && sample.videos.contains_key(key)
    }

    /// The dimensions pixel key `key` of `sample` has in an item: LeRobot squeezes a camera's
    /// leading dimension, so a one-step window of a video key comes back as one frame
    /// (`frames.squeeze(0)`), of an image key as a window.
    fn item_dims(&self, sample: &Sample, key: &str, shape: PixelShape) -> Vec<usize> {
        let mut dims = shape.dims();
        if sample.videos.contains_key(key) && shape.steps == Some(1) {
            dims.remove(0);
        }
        dims
    }

    /// This process's workers for `threads` threads, started on first use and again in a
    /// forked child or for another thread count.
    pub(crate) fn workers(&self, threads: usize) -> PyResult<Arc<Workers>> {
        let mut held = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if let Some(workers) = held.as_ref() {
            if workers.pid == pid && workers.threads == threads {
                return Ok(workers.clone());
            }
        }
        if let Some(stale) = held.take() {
            if stale.pid != pid {
                // Its threads live in the parent only: dropping the pool here would signal
                // threads this process does not have.
                std::mem::forget(stale);
            }
        }
        let workers = Arc::new(Workers::new(threads, &self.decode, self.frames.as_ref())?);
        *held = Some(workers.clone());
        Ok(workers)
    }

    /// The items at `positions`, on the pool when there is one and more than one item.
    fn read(&self, workers: &Workers, positions: &[usize]) -> Result<Vec<Item>, DatasetError> {
        let one = |&position: &usize| {
            let mut decoder = workers.decoder().lock().unwrap_or_else(|e| e.into_inner());
            self.item(self.indices[position], &mut **decoder)
        };
        match &workers.pool {
            Some(pool) if positions.len() > 1 => {
                use rayon::prelude::*;
                pool.install(|| positions.par_iter().map(one).collect())
            }
            _ => positions.iter().map(one).collect(),
        }
    }

    /// The item of global `index`: every parquet column (windowed where asked), the window's
    /// `<key>_is_pad`, camera frames and images, and `task`.
    fn item(&self, index: usize, decoder: &mut dyn FrameDecoder) -> Result<Item, DatasetError> {
        let mut sample = Sample::default();
        self.dataset.sample_into(index, &self.window, &mut sample)?;
        let mut item = Item::with_capacity(sample.arrays.len() + sample.pad_masks.len() + 4);
        let keys: Vec<String> = sample.pixel_keys().map(str::to_owned).collect();
        for key in keys {
            let shape = sample.pixel_shape(&key, decoder)?.expect("a pixel key");
            let mut values = if self.uint8_pixels(&sample, &key) {
                Values::U8(vec![0; shape.len()])
            } else {
                Values::F32(vec![0.0; shape.len()])
            };
            let buffer = match &mut values {
                Values::U8(v) => FrameBuffer::U8(v),
                Values::F32(v) => FrameBuffer::F32(v),
                _ => unreachable!("pixels are uint8 or float32"),
            };
            sample.decode_pixels_into(&key, decoder, buffer)?;
            let dims = self.item_dims(&sample, &key, shape);
            item.push((key, Value::Array { shape: dims, values }));
        }
        for (key, array) in std::mem::take(&mut sample.arrays) {
            let value = match array.values {
                Values::Str(values) => Value::Text { values, windowed: !array.shape.is_empty() },
                values => Value::Array { shape: array.shape, values },
            };
            item.push((key, value));
        }
        for (key, mask) in std::mem::take(&mut sample.pad_masks) {
            let shape = vec![mask.len()];
            item.push((
                format!("{key}_is_pad"),
                Value::Array { shape, values: Values::Bool(mask) },
            ));
        }
        item.push(("task".into(), Value::Text { values: vec![sample.task], windowed: false }));
        Ok(item)
    }
}

/// `values` shaped `shape` as a NumPy array that owns them.
fn array<'py, T: Element>(
    py: Python<'py>,
    shape: Vec<usize>,
    values: Vec<T>,
) -> PyResult<Bound<'py, PyAny>> {
    let array = ArrayD::from_shape_vec(IxDyn(&shape), values)
        .map_err(|e| ReaderError::new_err(format!("an array of shape {shape:?}: {e}")))?;
    Ok(array.into_pyarray(py).into_any())
}

/// A value as LeRobot's `torch.tensor(...)` of the row's Python values would type it: float64
/// becomes float32 and int32 int64, as they do there.
pub(crate) fn to_python(py: Python<'_>, value: Value) -> PyResult<Bound<'_, PyAny>> {
    match value {
        Value::Array { shape, values } => match values {
            Values::F32(v) => array(py, shape, v),
            Values::F64(v) => array(py, shape, v.into_iter().map(|x| x as f32).collect()),
            Values::I64(v) => array(py, shape, v),
            Values::I32(v) => array(py, shape, v.into_iter().map(i64::from).collect()),
            Values::Bool(v) => array(py, shape, v),
            Values::U8(v) => array(py, shape, v),
            Values::Str(v) => Ok(PyList::new(py, v)?.into_any()),
        },
        Value::Text { mut values, windowed } => {
            if windowed || values.len() != 1 {
                Ok(PyList::new(py, values)?.into_any())
            } else {
                Ok(PyString::new(py, &values.remove(0)).into_any())
            }
        }
    }
}

/// The module: [`Reader`], [`ReaderError`] and `size_bytes`.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<Reader>()?;
    module.add_function(wrap_pyfunction!(cache::size_bytes, module)?)?;
    module.add_function(wrap_pyfunction!(remote::set_storage_options, module)?)?;
    module.add_function(wrap_pyfunction!(remote::local_metadata_of, module)?)?;
    module.add_function(wrap_pyfunction!(remote::remote_reads, module)?)?;
    module.add("ReaderError", module.py().get_type::<ReaderError>())?;
    Ok(())
}
