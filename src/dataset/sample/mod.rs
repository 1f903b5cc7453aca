//! One sample, as LeRobot's `LeRobotDataset[index]` returns it.

use std::collections::BTreeMap;
use std::mem::take;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::bytes::Bytes;
use super::frames::FrameTable;
use super::image::{decode_image_into, image_size};
use super::values::{Array, Values};
use super::video::raw::{self, RawFrames};
use super::video::{FrameBuffer, FrameDecoder, VideoFile};
use super::window::{query_rows, Window};
use super::{Dataset, DatasetError, EpisodeIndex, Result, TaskIndex};
pub use batch::{BatchSamples, Stacked};
use rows::RowCache;

mod batch;
mod rows;

/// Encoded images (PNG/JPEG files) of an image feature, one per time step.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedImages {
    /// The parquet file they come from.
    pub source: PathBuf,
    /// The encoded files, in time order.
    pub images: Vec<Vec<u8>>,
    /// True when the key has a time dimension (a window), false for the row's own image.
    pub windowed: bool,
}

/// The video frames a sample needs from one camera: a file and presentation times.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoFrames {
    /// The mp4 file.
    pub path: PathBuf,
    /// Query times in the file, seconds, in time order: v2 the rows' timestamps, v3.0
    /// `from_timestamp + timestamp`. Padded steps repeat the boundary frame's time.
    pub timestamps: Vec<f64>,
    /// True when the key has a time dimension (a window).
    pub windowed: bool,
    /// `(height, width)` of the key's frames as info.json's feature says, which the file's
    /// header must agree with; `(0, 0)` where the feature gives no size.
    pub feature_size: (u32, u32),
}

/// One sample: the row's values, windows of values with their pad masks, and the images and
/// video frames to decode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// The global `index` of the sampled frame.
    pub index: usize,
    /// Its episode.
    pub episode: EpisodeIndex,
    /// Its task string.
    pub task: String,
    /// Every numeric and string feature: `[]`/`[D]` for the row's own value, `[T]`/`[T, D]`
    /// with a window.
    pub arrays: BTreeMap<String, Array>,
    /// Per windowed key, LeRobot's `<key>_is_pad`.
    pub pad_masks: BTreeMap<String, Vec<bool>>,
    /// Image features.
    pub images: BTreeMap<String, EncodedImages>,
    /// Video features.
    pub videos: BTreeMap<String, VideoFrames>,
    /// Scratch space of [`Dataset::sample_into`].
    rows: RowCache,
}

/// The shape pixels of one key decode to: `[T, 3, H, W]` with a window of `T` steps, `[3, H, W]`
/// without.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelShape {
    /// Time steps when the key has a window.
    pub steps: Option<usize>,
    /// Frame height after any resize.
    pub height: u32,
    /// Frame width after any resize.
    pub width: u32,
}

impl PixelShape {
    /// Frames the key holds (1 without a window).
    pub fn frames(&self) -> usize {
        self.steps.unwrap_or(1)
    }

    /// Values of one frame: `3 × H × W`.
    pub fn frame_len(&self) -> usize {
        3 * self.height as usize * self.width as usize
    }

    /// Values of the key: frames × `3 × H × W`.
    pub fn len(&self) -> usize {
        self.frames() * self.frame_len()
    }

    /// Whether the key holds no values (a zero-sized frame or window).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `dims` are this shape's dimensions.
    pub fn matches(&self, dims: &[usize]) -> bool {
        let frame = [3, self.height as usize, self.width as usize];
        match self.steps {
            Some(steps) => dims.len() == 4 && dims[0] == steps && dims[1..] == frame,
            None => dims == frame,
        }
    }

    /// The dimensions, as LeRobot returns them.
    pub fn dims(&self) -> Vec<usize> {
        let frame = [3, self.height as usize, self.width as usize];
        self.steps.into_iter().chain(frame).collect()
    }
}

/// A buffer of `len` zeros of the requested pixel type.
fn pixel_values(len: usize, uint8: bool) -> Values {
    if uint8 {
        Values::U8(vec![0; len])
    } else {
        Values::F32(vec![0.0; len])
    }
}

fn frame_buffer(values: &mut Values) -> FrameBuffer<'_> {
    match values {
        Values::U8(v) => FrameBuffer::U8(v),
        Values::F32(v) => FrameBuffer::F32(v),
        other => unreachable!("pixels are uint8 or float32, not {}", other.type_name()),
    }
}

impl Sample {
    /// The keys [`Sample::decode_pixels`] fills: cameras (video features), then image features.
    pub fn pixel_keys(&self) -> impl Iterator<Item = &str> {
        self.videos.keys().chain(self.images.keys()).map(String::as_str)
    }

    /// The shape pixel key `key` decodes to with `decoder` (its resolution, else the native
    /// size read from the file's header); None for a key that is not a camera or image.
    pub fn pixel_shape(&self, key: &str, decoder: &dyn FrameDecoder) -> Result<Option<PixelShape>> {
        let (steps, windowed, (height, width)) = if let Some(frames) = self.videos.get(key) {
            if raw::is_raw(&frames.path) {
                let (width, height) = RawFrames::shared(&frames.path)?.dimensions();
                let shape = PixelShape { steps: None, height, width };
                let steps = frames.windowed.then_some(frames.timestamps.len());
                return Ok(Some(PixelShape { steps, ..shape }));
            }
            let video = VideoFile::shared(&frames.path)?;
            let (width, height) = video.dimensions();
            if frames.feature_size != (0, 0) && (height, width) != frames.feature_size {
                let (h, w) = frames.feature_size;
                return Err(DatasetError::invalid(
                    &frames.path,
                    format!(
                        "holds {height}×{width} frames (height × width), but info.json's `{key}` \
                         feature says {h}×{w}"
                    ),
                ));
            }
            (frames.timestamps.len(), frames.windowed, decoder.output_size(&video))
        } else if let Some(images) = self.images.get(key) {
            let size = match (decoder.resolution(), images.images.first()) {
                (Some(size), _) => size,
                (None, Some(first)) => image_size(&images.source, first)?,
                (None, None) => (0, 0),
            };
            (images.images.len(), images.windowed, size)
        } else {
            return Ok(None);
        };
        Ok(Some(PixelShape { steps: windowed.then_some(steps), height, width }))
    }

    /// Decodes pixel key `key` (see [`Sample::pixel_shape`]) into `out`, which holds exactly
    /// its values: RGB, CHW, float32 in [0, 1] or uint8. The loader's workers pass a sample's
    /// slot of the batch, so pixels are written once, in place.
    pub fn decode_pixels_into(
        &self,
        key: &str,
        decoder: &mut dyn FrameDecoder,
        mut out: FrameBuffer<'_>,
    ) -> Result<()> {
        if let Some(frames) = self.videos.get(key) {
            return decoder.decode_into(&frames.path, &frames.timestamps, out);
        }
        let Some(images) = self.images.get(key) else { return Ok(()) };
        let Some(first) = images.images.first() else { return Ok(()) };
        let size = match decoder.resolution() {
            Some(size) => size,
            None => image_size(&images.source, first)?,
        };
        let per_image = 3 * size.0 as usize * size.1 as usize;
        if out.len() != images.images.len() * per_image {
            return Err(DatasetError::invalid(
                &images.source,
                format!(
                    "output buffer holds {} values, {} images of 3×{}×{} need {}",
                    out.len(),
                    images.images.len(),
                    size.0,
                    size.1,
                    images.images.len() * per_image
                ),
            ));
        }
        for (step, bytes) in images.images.iter().enumerate() {
            let resize = decoder.resolution();
            decode_image_into(&images.source, bytes, resize, out.frame(step, per_image))?;
        }
        Ok(())
    }

    /// The file pixel key `key` is read from: its mp4, or the parquet file of its images.
    fn pixel_source<'a>(&'a self, key: &'a str) -> &'a std::path::Path {
        match (self.videos.get(key), self.images.get(key)) {
            (Some(frames), _) => &frames.path,
            (None, Some(images)) => &images.source,
            (None, None) => std::path::Path::new(key),
        }
    }

    /// Decodes every camera (video feature) and image feature into [`Sample::arrays`], as
    /// LeRobot returns them: RGB, `[T, 3, H, W]` with a window and `[3, H, W]` without,
    /// float32 in [0, 1] or, with `uint8`, the 0–255 values; at the decoder's resolution.
    pub fn decode_pixels(&mut self, decoder: &mut dyn FrameDecoder, uint8: bool) -> Result<()> {
        let keys: Vec<String> = self.pixel_keys().map(str::to_owned).collect();
        for key in keys {
            let shape = self.pixel_shape(&key, decoder)?.expect("a pixel key");
            let bytes = shape.len() as u128 * if uint8 { 1 } else { 4 };
            if let Some(available) = crate::timing::available_memory_bytes() {
                if bytes > u128::from(available) {
                    return Err(DatasetError::invalid(
                        self.pixel_source(&key),
                        format!(
                            "{key} at {}×{} needs {:.1}; {:.1} of memory is available \
                             (ask for a smaller resolution)",
                            shape.height,
                            shape.width,
                            Bytes::new(bytes as f64).gb(),
                            Bytes::of(available).gb()
                        ),
                    ));
                }
            }
            let mut values = pixel_values(shape.len(), uint8);
            self.decode_pixels_into(&key, decoder, frame_buffer(&mut values))?;
            self.arrays.insert(key, Array { shape: shape.dims(), values });
        }
        Ok(())
    }
}

/// A `timestamp` that is no time to look a frame up at (NaN, negative), named by its parquet
/// file and row rather than blamed on the video.
fn bad_timestamp(frames: &FrameTable, root: &Path, index: usize, time: f64) -> DatasetError {
    let what = format!("column `timestamp`: {time} is not a time ≥ 0 in seconds");
    match frames.location(index) {
        Some((path, row)) => DatasetError::invalid(path, format!("row {row}: {what}")),
        None => DatasetError::invalid(root, format!("index {index}: {what}")),
    }
}

/// The entry of `key` in `map`, reused when present (no allocation), else `make()`'s.
fn reuse<'m, V>(
    map: &'m mut BTreeMap<String, V>,
    key: &str,
    make: impl FnOnce() -> V,
) -> &'m mut V {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), make());
    }
    map.get_mut(key).expect("inserted above")
}

/// Readies `arrays` and `masks` to be appended to by `items` samples of `frames` with `window`
/// ([`Dataset::fill_sample`]): an array for each column and no other, of the column's type,
/// empty, with room for all; a mask for each windowed key, empty. A map that holds them already
/// (a sample of this table was built in it) is only compared, key for key, and emptied.
fn ready_values(
    arrays: &mut BTreeMap<String, Array>,
    masks: &mut BTreeMap<String, Vec<bool>>,
    frames: &FrameTable,
    window: &Window,
    items: usize,
) {
    let (columns, by_name) = (frames.columns(), frames.columns_by_name());
    let names = by_name.iter().map(|&position| columns[position].name.as_str());
    if arrays.len() != columns.len() || arrays.keys().zip(names).any(|(k, n)| k != n) {
        arrays.retain(|key, _| columns.iter().any(|c| c.name == *key));
        for column in columns {
            reuse(arrays, &column.name, || Array {
                shape: Vec::new(),
                values: Values::with_capacity(column.scalar, 0),
            });
        }
    }
    for (array, &position) in arrays.values_mut().zip(by_name) {
        let column = &columns[position];
        let steps = window.offsets(&column.name).map_or(1, <[i64]>::len);
        array.values.clear();
        if !array.values.is_of(column.scalar) {
            array.values = Values::with_capacity(column.scalar, 0);
        }
        array.values.reserve(items * steps * column.width);
        array.shape.clear();
    }
    masks.retain(|key, mask| {
        mask.clear();
        window.offsets(key).is_some()
    });
}

/// Drops the entries of `map` that were not written (`written` were): left from an earlier
/// sample of another window or dataset.
fn drop_stale<V>(map: &mut BTreeMap<String, V>, written: usize, keep: impl Fn(&str) -> bool) {
    if map.len() > written {
        map.retain(|key, _| keep(key));
    }
}

/// Drops the masks no sample wrote (a windowed key this dataset does not hold, left from an
/// earlier one's samples).
fn drop_unwritten(masks: &mut BTreeMap<String, Vec<bool>>) {
    masks.retain(|_, mask| !mask.is_empty());
}

impl Dataset {
    /// The sample at global `index` with `window`: what `LeRobotDataset[index]` returns for
    /// the same `delta_timestamps` (video frames as times to decode).
    pub fn sample(&self, index: usize, window: &Window) -> Result<Sample> {
        let mut sample = Sample::default();
        self.sample_into(index, window, &mut sample)?;
        Ok(sample)
    }

    /// [`Dataset::sample`] into `sample`, reusing its buffers: once a sample of the same
    /// window was built in it, building another allocates nothing (image bytes aside). The
    /// loader's workers keep one each. Pixel arrays are not decoded (see
    /// [`Sample::decode_pixels`]); ones left from an earlier decode are removed.
    pub fn sample_into(&self, index: usize, window: &Window, sample: &mut Sample) -> Result<()> {
        let (mut arrays, mut masks) = (take(&mut sample.arrays), take(&mut sample.pad_masks));
        ready_values(&mut arrays, &mut masks, &self.frames, window, 1);
        let result = self.fill_sample(index, window, sample, (&mut arrays, &mut masks));
        drop_unwritten(&mut masks);
        (sample.arrays, sample.pad_masks) = (arrays, masks);
        result
    }

    /// Builds the sample at `index` in `sample` (its frames' times, images, task), its columns
    /// and pad masks appended to `arrays` and `masks` (readied by [`ready_values`]).
    fn fill_sample(
        &self,
        index: usize,
        window: &Window,
        sample: &mut Sample,
        (arrays, masks): (&mut BTreeMap<String, Array>, &mut BTreeMap<String, Vec<bool>>),
    ) -> Result<()> {
        // Rows an earlier sample that failed part-way left (a finished one empties them).
        sample.rows.clear();
        let episode = self.episode_of(index)?;
        let (from, to) = (episode.from, episode.to);
        let own = [0i64];
        let rows_of = |key: &str| {
            let offsets = window.offsets(key);
            (query_rows(index, from, to, offsets.unwrap_or(&own)), offsets.is_some())
        };
        sample.index = index;
        sample.episode = episode.index;
        let frames = &self.frames;
        let mut images_written = 0;

        let columns = frames.columns();
        // The map's entries in key order, each beside its column: no lookup per column.
        for (array, &position) in arrays.values_mut().zip(frames.columns_by_name()) {
            let column = &columns[position];
            let (rows, windowed) = rows_of(&column.name);
            sample.rows.extend(
                frames,
                rows.clone(),
                (position, column.width),
                &mut array.values,
            )?;
            array.shape.clear();
            if windowed {
                array.shape.push(rows.len());
            }
            // A value column's shape is its feature's; a string column's is flattened.
            let shape = match column.scalar {
                Some(_) => &column.shape,
                None => &self.info.feature(&column.name).expect("a feature's column").shape,
            };
            if *shape != [1] {
                array.shape.extend_from_slice(shape);
            }
            if windowed {
                set_mask(masks, &column.name, rows);
            }
        }

        for name in frames.image_columns() {
            let (rows, windowed) = rows_of(name);
            let source = self.root.join(&episode.data_path);
            let images = reuse(&mut sample.images, name, || EncodedImages {
                source: PathBuf::new(),
                images: Vec::new(),
                windowed,
            });
            images.source = source;
            images.windowed = windowed;
            images.images.clear();
            for (row, _) in rows.clone() {
                images.images.push(frames.image(row, name)?);
            }
            if windowed {
                set_mask(masks, name, rows);
            }
            images_written += 1;
        }

        let timestamp = frames.column_position("timestamp").expect("info.json checked");
        if !self.has_videos_on_disk(episode) {
            // Said as what is there: absent (a partial download), a directory, a loop, a FIFO.
            let missing = self.missing_files(episode)?;
            for path in &missing {
                super::files::expect_episode_file(path, episode.index.0)?;
            }
            let path = missing.into_iter().next().unwrap_or_default();
            return Err(DatasetError::MissingFile { path, episode: episode.index.0 });
        }
        for (key, video) in &episode.videos {
            let (rows, windowed) = rows_of(key);
            let frames_of_key = reuse(&mut sample.videos, key, || VideoFrames {
                path: PathBuf::new(),
                timestamps: Vec::new(),
                windowed,
                feature_size: self
                    .info
                    .feature(key)
                    .and_then(|f| f.image)
                    .map_or((0, 0), |image| (image.height, image.width)),
            });
            if !is_joined(&frames_of_key.path, &self.root, &video.path) {
                frames_of_key.path = self.root.join(&video.path);
            }
            frames_of_key.windowed = windowed;
            frames_of_key.timestamps.clear();
            for (row, _) in rows.clone() {
                let (values, range) = sample.rows.get(frames, row)?.values(timestamp, 1);
                let time = values.get_f64(range.start);
                if !(time.is_finite() && time >= 0.0) {
                    return Err(bad_timestamp(frames, &self.root, row, time));
                }
                frames_of_key.timestamps.push(video.from_timestamp + time);
            }
            if windowed {
                set_mask(masks, key, rows);
            }
        }

        drop_stale(&mut sample.images, images_written, |k| {
            frames.image_columns().iter().any(|name| name == k)
        });
        drop_stale(&mut sample.videos, episode.videos.len(), |k| episode.videos.contains_key(k));

        let task_position = frames.column_position("task_index").expect("info.json checked");
        let (values, range) = sample.rows.get(frames, index)?.values(task_position, 1);
        let task_index = values.get_f64(range.start) as usize;
        // The last row read: its rows hold the table's row groups, none kept past the sample.
        sample.rows.clear();
        let task = self.tasks.get(&TaskIndex(task_index)).ok_or_else(|| {
            DatasetError::invalid(
                self.root.join("meta"),
                format!("task_index {task_index} of index {index} is not in the tasks table"),
            )
        })?;
        sample.task.clear();
        sample.task.push_str(task);
        Ok(())
    }
}

/// Whether `path` is `root.join(relative)` for a relative path, compared as bytes (a sample of
/// the same episode's file keeps its path; no components parsed).
fn is_joined(path: &Path, root: &Path, relative: &Path) -> bool {
    let (path, root) = (path.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    let relative = relative.as_os_str().as_bytes();
    let separator = usize::from(!root.ends_with(b"/"));
    path.len() == root.len() + separator + relative.len()
        && path.starts_with(root)
        && path.ends_with(relative)
        && (separator == 0 || path[root.len()] == b'/')
}

/// Appends the pad mask of `key` (`<key>_is_pad`) from the window's `rows` to what it holds.
fn set_mask(
    masks: &mut BTreeMap<String, Vec<bool>>,
    key: &str,
    rows: impl Iterator<Item = (usize, bool)>,
) {
    let is_pad = rows.map(|(_, is_pad)| is_pad);
    // One lookup where the mask is there already (every sample after the first).
    if let Some(mask) = masks.get_mut(key) {
        mask.extend(is_pad);
    } else {
        masks.insert(key.to_owned(), is_pad.collect());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_joined_path_is_recognised_as_path_join_makes_it() {
        let relative = Path::new("videos/chunk-000/cam/episode_000001.mp4");
        for root in ["/data/pick", "/data/pick/", "pick", "/"] {
            let root = Path::new(root);
            assert!(is_joined(&root.join(relative), root, relative), "{root:?}");
            for other in ["/data/pick2", "/data/pic", "/data"] {
                assert!(!is_joined(&Path::new(other).join(relative), root, relative), "{other:?}");
            }
            let episode_2 = Path::new("videos/chunk-000/cam/episode_000002.mp4");
            assert!(!is_joined(&root.join(episode_2), root, relative));
            assert!(!is_joined(Path::new(""), root, relative));
        }
        // Root and file around another byte than the separator are not the joined path.
        let (root, file) = (Path::new("/data/pick"), Path::new("videos/a.mp4"));
        assert!(!is_joined(Path::new("/data/pick_videos/a.mp4"), root, file));
    }
}
