//! One sample, as LeRobot's `LeRobotDataset[index]` returns it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::frames::Row;
use super::values::{Array, Values};
use super::window::{query_rows, Window};
use super::{Dataset, DatasetError, EpisodeIndex, Result, TaskIndex};

/// Encoded images (PNG/JPEG files) of an image feature, one per time step.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedImages {
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
            sample.images.insert(name.clone(), EncodedImages { images, windowed });
        }

        let timestamp = self.frames.column_position("timestamp").expect("info.json checked");
        for (key, video) in &episode.videos {
            let path = self.root.join(&video.path);
            if !path.is_file() {
                return Err(DatasetError::MissingFile { path, episode: episode.index.0 });
            }
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
