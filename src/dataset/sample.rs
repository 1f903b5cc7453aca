//! One sample, as LeRobot's `LeRobotDataset[index]` returns it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::frames::Row;
use super::image::{decode_image_into, image_size};
use super::values::{Array, Values};
use super::video::{FrameBuffer, VideoDecoder, VideoFile};
use super::window::{query_rows, Window};
use super::{Dataset, DatasetError, EpisodeIndex, Result, TaskIndex};

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
}

/// One sample: the row's values, windows of values with their pad masks, and the images and
/// video frames to decode.
#[derive(Debug, Clone, PartialEq)]
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
}

/// A buffer of `len` zeros of the requested pixel type, and a view of it to decode into.
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

/// `[T, 3, H, W]` for a window of `steps`, `[3, H, W]` for the row's own frame.
fn pixel_shape(windowed: bool, steps: usize, (height, width): (u32, u32)) -> Vec<usize> {
    let frame = [3, height as usize, width as usize];
    if windowed {
        std::iter::once(steps).chain(frame).collect()
    } else {
        frame.to_vec()
    }
}

impl Sample {
    /// Decodes every camera (video feature) and image feature into [`Sample::arrays`], as
    /// LeRobot returns them: RGB, `[T, 3, H, W]` with a window and `[3, H, W]` without,
    /// float32 in [0, 1] or, with `uint8`, the 0–255 values; at the decoder's resolution.
    pub fn decode_pixels(&mut self, decoder: &mut VideoDecoder, uint8: bool) -> Result<()> {
        for (key, frames) in &self.videos {
            let video = VideoFile::shared(&frames.path)?;
            let size = decoder.output_size(&video);
            let steps = frames.timestamps.len();
            let mut values = pixel_values(steps * 3 * size.0 as usize * size.1 as usize, uint8);
            decoder.decode_into(&frames.path, &frames.timestamps, frame_buffer(&mut values))?;
            let shape = pixel_shape(frames.windowed, steps, size);
            self.arrays.insert(key.clone(), Array { shape, values });
        }
        for (key, images) in &self.images {
            let Some(first) = images.images.first() else { continue };
            let size = match decoder.options().resolution {
                Some(size) => size,
                None => image_size(&images.source, first)?,
            };
            let per_image = 3 * size.0 as usize * size.1 as usize;
            let mut values = pixel_values(images.images.len() * per_image, uint8);
            let mut buffer = frame_buffer(&mut values);
            for (step, bytes) in images.images.iter().enumerate() {
                let out = match &mut buffer {
                    FrameBuffer::U8(v) => {
                        FrameBuffer::U8(&mut v[step * per_image..(step + 1) * per_image])
                    }
                    FrameBuffer::F32(v) => {
                        FrameBuffer::F32(&mut v[step * per_image..(step + 1) * per_image])
                    }
                };
                decode_image_into(&images.source, bytes, Some(size), out)?;
            }
            let shape = pixel_shape(images.windowed, images.images.len(), size);
            self.arrays.insert(key.clone(), Array { shape, values });
        }
        Ok(())
    }
}

/// Rows already fetched for one sample (a window reads a few rows many times).
struct RowCache<'a> {
    dataset: &'a Dataset,
    rows: Vec<(usize, Row)>,
}

impl RowCache<'_> {
    fn get(&mut self, index: usize) -> Result<&Row> {
        let position = match self.rows.iter().position(|(i, _)| *i == index) {
            Some(position) => position,
            None => {
                self.rows.push((index, self.dataset.frames.row(index)?));
                self.rows.len() - 1
            }
        };
        Ok(&self.rows[position].1)
    }
}

impl Dataset {
    /// The sample at global `index` with `window`: what `LeRobotDataset[index]` returns for
    /// the same `delta_timestamps` (video frames as times to decode).
    pub fn sample(&self, index: usize, window: &Window) -> Result<Sample> {
        let episode = self.episode_of(index)?;
        let (from, to) = (episode.from, episode.to);
        let own = [0i64];
        let rows_of = |key: &str| {
            let offsets = window.offsets(key);
            (
                query_rows(index, from, to, offsets.unwrap_or(&own)).collect::<Vec<_>>(),
                offsets.is_some(),
            )
        };
        let mut cache = RowCache { dataset: self, rows: Vec::new() };
        let mut sample = Sample {
            index,
            episode: episode.index,
            task: String::new(),
            arrays: BTreeMap::new(),
            pad_masks: BTreeMap::new(),
            images: BTreeMap::new(),
            videos: BTreeMap::new(),
        };

        for (position, column) in self.frames.columns().iter().enumerate() {
            let (rows, windowed) = rows_of(&column.name);
            let mut values = Values::with_capacity(column.scalar, rows.len() * column.width);
            for &(row, _) in &rows {
                let (source, range) = cache.get(row)?.values(position, column.width);
                values.extend_from(source, range);
            }
            let feature = self.info.feature(&column.name).expect("columns come from features");
            let mut shape = if windowed { vec![rows.len()] } else { Vec::new() };
            if feature.shape != [1] {
                shape.extend_from_slice(&feature.shape);
            }
            if windowed {
                sample.pad_masks.insert(column.name.clone(), rows.iter().map(|r| r.1).collect());
            }
            sample.arrays.insert(column.name.clone(), Array { shape, values });
        }

        for name in self.frames.image_columns() {
            let (rows, windowed) = rows_of(name);
            let images =
                rows.iter().map(|&(row, _)| self.frames.image(row, name)).collect::<Result<_>>()?;
            if windowed {
                sample.pad_masks.insert(name.clone(), rows.iter().map(|r| r.1).collect());
            }
            let source = self.root.join(&episode.data_path);
            sample.images.insert(name.clone(), EncodedImages { source, images, windowed });
        }

        let timestamp = self.frames.column_position("timestamp").expect("info.json checked");
        if !self.has_videos_on_disk(episode) {
            let path = self.missing_files(episode).into_iter().next().unwrap_or_default();
            return Err(DatasetError::MissingFile { path, episode: episode.index.0 });
        }
        for (key, video) in &episode.videos {
            let path = self.root.join(&video.path);
            let (rows, windowed) = rows_of(key);
            let mut timestamps = Vec::with_capacity(rows.len());
            for &(row, _) in &rows {
                let (values, range) = cache.get(row)?.values(timestamp, 1);
                timestamps.push(video.from_timestamp + values.get_f64(range.start));
            }
            if windowed {
                sample.pad_masks.insert(key.clone(), rows.iter().map(|r| r.1).collect());
            }
            sample.videos.insert(key.clone(), VideoFrames { path, timestamps, windowed });
        }

        let task_position = self.frames.column_position("task_index").expect("info.json checked");
        let (values, range) = cache.get(index)?.values(task_position, 1);
        let task_index = values.get_f64(range.start) as usize;
        sample.task = self.tasks.get(&TaskIndex(task_index)).cloned().ok_or_else(|| {
            DatasetError::invalid(
                self.root.join("meta"),
                format!("task_index {task_index} of index {index} is not in the tasks table"),
            )
        })?;
        Ok(sample)
    }
}
