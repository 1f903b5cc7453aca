//! A dataset's episodes written again as a new dataset: the candidates of `feedbench layout`.
//!
//! The new dataset holds the same numeric values, timestamps and tasks; its camera frames are
//! the source's frames as the loader decodes them (the reference), re-encoded as video with
//! other settings or stored as PNG images in parquet, optionally resized, and its files laid
//! out as v2.1 (a file per episode) or v3.0 (episodes concatenated). The selected episodes are
//! renumbered 0, 1, … in order, as LeRobot's own dataset tools do when they take a subset. The
//! source is only read.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::camera::{encode_camera, use_raw_files, CameraCoding, CameraTarget};
use super::dataset::{
    data_file_groups, dataset_info, write_dataset, Contents, ImageFeature, Layout, VectorFeature,
};
use super::encode::EncodeSettings;
use super::{png_bytes, write_atomically, ListLayout};
use crate::dataset::meta::{CodebaseVersion, FeatureKind, ScalarType};
use crate::dataset::stats::ImageStats;
use crate::dataset::video::planes::pack_planes;
use crate::dataset::video::{DecodeOptions, FrameBuffer, VideoDecoder};
use crate::dataset::{Dataset, DatasetError, Episode, Result, Sample, Values, Window, WindowSpec};
use crate::timing::{process_cpu_time, thread_cpu_time};

/// How a candidate stores its camera frames.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameStorage {
    /// mp4 files, encoded with these settings.
    Video(EncodeSettings),
    /// PNG images in the parquet data files (LeRobot's `image` features).
    Png,
    /// Raw uint8 frames in feedbench's own files ([`crate::dataset::video::raw`]): no
    /// decoding at all, the reference the codecs are set against. LeRobot cannot read them.
    Raw,
}

impl FrameStorage {
    /// How camera files store the frames; None for PNG images in parquet.
    fn camera_coding(&self) -> Option<CameraCoding<'_>> {
        match self {
            FrameStorage::Video(settings) => Some(CameraCoding::Video(settings)),
            FrameStorage::Raw => Some(CameraCoding::Raw),
            FrameStorage::Png => None,
        }
    }
}

/// What to write.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscodeOptions {
    /// v2.1 (a file per episode) or v3.0 (many episodes per file).
    pub version: CodebaseVersion,
    /// How camera frames are stored.
    pub storage: FrameStorage,
    /// Frame size `(height, width)`; None keeps the source's.
    pub resolution: Option<(u32, u32)>,
    /// v3.0: at most this many episodes per file; None rolls files over at LeRobot's sizes.
    pub episodes_per_file: Option<usize>,
}

/// What [`transcode`] wrote and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscodeReport {
    /// The new dataset's root.
    pub root: PathBuf,
    /// Episodes written.
    pub episodes: usize,
    /// Frames per camera written.
    pub frames: usize,
    /// Camera frames written (frames × cameras).
    pub camera_frames: usize,
    /// Bytes of stored camera frames: coded video frames, or PNG files.
    pub frame_bytes: u64,
    /// CPU time spent encoding camera frames (every thread of the encoder).
    pub encode_cpu: Duration,
    /// CPU time spent reading and decoding the source's frames.
    pub source_cpu: Duration,
    /// Wall time.
    pub elapsed: Duration,
}

/// The numeric values of the selected episodes, in the new global index order.
struct SourceRows {
    vectors: Vec<VectorFeature>,
    timestamps: Vec<f32>,
    /// Per episode, its task index.
    episode_tasks: Vec<usize>,
}

/// Reads a dataset's camera (or image) frames as the loader decodes them, at a given size: the
/// reference a candidate is made from and compared with.
pub struct FrameReader<'a> {
    source: &'a Dataset,
    episodes: Vec<&'a Episode>,
    window: Window,
    decoder: VideoDecoder,
    sample: Sample,
    chw: Vec<u8>,
    /// Thread CPU time spent in [`FrameReader::read`].
    cpu: Duration,
}

impl<'a> FrameReader<'a> {
    /// A reader of `source`'s selected episodes, frames resized to `resolution` (None: native).
    pub fn new(source: &'a Dataset, resolution: Option<(u32, u32)>) -> Result<Self> {
        let options = DecodeOptions {
            tolerance_s: source.tolerance_s(),
            resolution,
            cache_capacity: 2,
            ..DecodeOptions::default()
        };
        Ok(Self {
            source,
            episodes: source.episodes().collect(),
            window: source.window(&WindowSpec::Single)?,
            decoder: VideoDecoder::new(options),
            sample: Sample::default(),
            chw: Vec::new(),
            cpu: Duration::ZERO,
        })
    }

    /// The frame of camera or image feature `key` at global `index` into `chw`: RGB planes,
    /// `3 × height × width` values (`chw` is resized to fit).
    pub fn read_chw(&mut self, key: &str, index: usize, chw: &mut Vec<u8>) -> Result<()> {
        let started = thread_cpu_time();
        self.source.sample_into(index, &self.window, &mut self.sample)?;
        let shape = self.sample.pixel_shape(key, &self.decoder)?.ok_or_else(|| {
            DatasetError::invalid(self.source.root(), format!("`{key}` is not a camera or image"))
        })?;
        chw.resize(shape.frame_len(), 0);
        self.sample.decode_pixels_into(key, &mut self.decoder, FrameBuffer::U8(chw))?;
        self.cpu += thread_cpu_time().saturating_sub(started);
        Ok(())
    }

    /// Frame `i` of selected episode `episode` (0 the first selected) of `key` into `rgb`,
    /// packed RGB24.
    fn read(&mut self, key: &str, episode: usize, i: usize, rgb: &mut [u8]) -> Result<()> {
        let index = self.episodes[episode].from + i;
        let mut chw = std::mem::take(&mut self.chw);
        let read = self.read_chw(key, index, &mut chw);
        self.chw = chw;
        read?;
        if self.chw.len() != rgb.len() {
            return Err(DatasetError::invalid(
                self.source.root(),
                format!("`{key}` frames are not the size info.json gives"),
            ));
        }
        pack_planes(&self.chw, rgb);
        Ok(())
    }

    /// Thread CPU time spent reading frames so far.
    pub fn cpu(&self) -> Duration {
        self.cpu
    }
}

/// Writes the selected episodes of `source` as a new dataset at `out` (which must not exist or
/// be empty), as `options` say.
pub fn transcode(
    source: &Dataset,
    out: &Path,
    options: &TranscodeOptions,
) -> Result<TranscodeReport> {
    let started = (Instant::now(), process_cpu_time());
    if options.episodes_per_file == Some(0) {
        return Err(DatasetError::invalid(out, "episodes per file must be ≥ 1"));
    }
    if let FrameStorage::Video(settings) = &options.storage {
        if let Some(problem) = settings.problem() {
            return Err(DatasetError::Encode { path: out.to_path_buf(), problem });
        }
    }
    let info = source.info();
    let fps = info.fps.round() as u32;
    if f64::from(fps) != info.fps {
        return Err(DatasetError::invalid(
            source.root(),
            format!("fps {} is not a whole number; cannot re-encode", info.fps),
        ));
    }
    let rows = source_rows(source)?;
    let pictures: Vec<(String, u32, u32)> = info
        .features
        .iter()
        .filter(|f| matches!(f.kind, FeatureKind::Video | FeatureKind::Image))
        .map(|f| {
            let native = f.image.as_ref().map(|s| (s.height, s.width)).ok_or_else(|| {
                DatasetError::invalid(
                    source.root().join("meta/info.json"),
                    format!("feature `{}` gives no frame size", f.name),
                )
            })?;
            let (height, width) = options.resolution.unwrap_or(native);
            Ok((f.name.clone(), height, width))
        })
        .collect::<Result<_>>()?;
    if let FrameStorage::Video(settings) = &options.storage {
        for (key, height, width) in &pictures {
            if let Some(problem) = settings.size_problem(*height, *width) {
                return Err(DatasetError::invalid(out, format!("`{key}`: {problem}")));
            }
        }
    }
    let mut reader = FrameReader::new(source, options.resolution)?;
    let episode_lengths: Vec<usize> = reader.episodes.iter().map(|e| e.length).collect();
    let mut layout = Layout {
        version: options.version,
        fps,
        robot_type: info.robot_type.clone().unwrap_or_default(),
        tasks: source.tasks().values().cloned().collect(),
        episode_tasks: rows.episode_tasks,
        episode_lengths,
        data_files: vec![],
        row_group_rows: 100_000,
        list_layout: ListLayout::FixedSize,
    };
    let vector_bytes: usize = rows.vectors.iter().map(|v| 4 * v.names.len()).sum::<usize>() + 36;
    let png_row_bytes = match options.storage {
        FrameStorage::Png => first_png_bytes(&mut reader, &pictures)?,
        FrameStorage::Video(_) | FrameStorage::Raw => 0,
    };
    layout.data_files = data_file_groups(
        &layout.episode_lengths,
        options.episodes_per_file,
        vector_bytes + png_row_bytes,
    );
    layout.check(out)?;
    let descriptions: Vec<(String, Vec<String>)> =
        rows.vectors.iter().map(|v| (v.key.clone(), v.names.clone())).collect();
    let (images, cameras) = match options.storage.camera_coding() {
        None => (pictures.clone(), vec![]),
        Some(coding) => (
            vec![],
            pictures
                .iter()
                .map(|(key, h, w)| (key.clone(), *h, *w, coding.video_info(*h, *w, fps)))
                .collect(),
        ),
    };
    let mut new_info = dataset_info(&layout, &descriptions, &images, &cameras);
    if options.storage == FrameStorage::Raw {
        use_raw_files(&mut new_info);
    }
    let mut report = TranscodeReport {
        root: out.to_path_buf(),
        episodes: layout.episode_lengths.len(),
        frames: layout.total_frames(),
        camera_frames: layout.total_frames() * pictures.len(),
        frame_bytes: 0,
        encode_cpu: Duration::ZERO,
        source_cpu: Duration::ZERO,
        elapsed: Duration::ZERO,
    };
    let mut png_cpu = Duration::ZERO;
    write_atomically(out, false, |root| {
        let mut features = Vec::new();
        if let Some(coding) = options.storage.camera_coding() {
            for (key, height, width) in &pictures {
                let target = CameraTarget {
                    key,
                    height: *height,
                    width: *width,
                    coding,
                    episodes_per_file: options.episodes_per_file,
                };
                let encoded =
                    encode_camera(root, &new_info, &layout, &target, &mut |e, i, rgb| {
                        reader.read(key, e, i, rgb)
                    })?;
                report.frame_bytes += encoded.bytes;
                features.push(encoded.feature);
            }
            let contents = Contents {
                vectors: rows.vectors,
                images: vec![],
                cameras: features,
                timestamps: Some(rows.timestamps),
            };
            return write_dataset(root, &new_info, &layout, &contents);
        }
        let ranges = layout.ranges();
        let mut stats = Vec::new();
        for (key, height, width) in &pictures {
            stats.push(image_stats(&mut reader, key, (*height, *width), &ranges)?);
        }
        let reader = RefCell::new(&mut reader);
        let png_totals = RefCell::new((0u64, Duration::ZERO));
        let pngs: Vec<_> = pictures
            .iter()
            .map(|(key, height, width)| {
                let (reader, totals, ranges) = (&reader, &png_totals, &ranges);
                move |index: usize| {
                    let episode = ranges.partition_point(|&(_, to)| to <= index);
                    let mut rgb = vec![0u8; 3 * *height as usize * *width as usize];
                    let i = index - ranges[episode].0;
                    reader.borrow_mut().read(key, episode, i, &mut rgb)?;
                    let cpu = thread_cpu_time();
                    let png = png_bytes(&rgb, *height, *width);
                    let mut totals = totals.borrow_mut();
                    totals.0 += png.len() as u64;
                    totals.1 += thread_cpu_time().saturating_sub(cpu);
                    Ok(png)
                }
            })
            .collect();
        let image_features = pictures
            .iter()
            .zip(&pngs)
            .zip(stats)
            .map(|(((key, height, width), png), stats)| ImageFeature {
                key: key.clone(),
                height: *height,
                width: *width,
                png,
                stats,
            })
            .collect();
        let contents = Contents {
            vectors: rows.vectors,
            images: image_features,
            cameras: vec![],
            timestamps: Some(rows.timestamps),
        };
        write_dataset(root, &new_info, &layout, &contents)?;
        (report.frame_bytes, png_cpu) = *png_totals.borrow();
        Ok(())
    })?;
    report.source_cpu = reader.cpu;
    report.encode_cpu = match options.storage {
        FrameStorage::Png => png_cpu,
        // The encoder's own threads run while the source is read: the process's CPU time,
        // less what reading the source took.
        FrameStorage::Video(_) | FrameStorage::Raw => {
            process_cpu_time().saturating_sub(started.1).saturating_sub(reader.cpu)
        }
    };
    report.elapsed = started.0.elapsed();
    Ok(report)
}

/// The values, timestamps and per-episode tasks of the source's selected episodes. Numeric
/// features other than float32 are refused (the candidates would not hold the same values).
fn source_rows(source: &Dataset) -> Result<SourceRows> {
    let meta = source.root().join("meta/info.json");
    let mut vectors = Vec::new();
    for feature in &source.info().features {
        match feature.kind {
            FeatureKind::Video | FeatureKind::Image => continue,
            _ if feature.is_bookkeeping() => continue,
            FeatureKind::Value(ScalarType::Float32) => {
                let width = feature.width();
                let names = match &feature.names {
                    Some(names) if names.len() == width => names.clone(),
                    _ => (0..width).map(|d| format!("{}_{d}", feature.name)).collect(),
                };
                let values = Vec::with_capacity(width * source.num_frames());
                vectors.push(VectorFeature { key: feature.name.clone(), names, values });
            }
            _ => {
                return Err(DatasetError::invalid(
                    &meta,
                    format!(
                        "feature `{}` is not float32; re-encoding carries float32 features only",
                        feature.name
                    ),
                ))
            }
        }
    }
    let window = source.window(&WindowSpec::Single)?;
    let (mut timestamps, mut episode_tasks) = (Vec::new(), Vec::new());
    let mut sample = Sample::default();
    for episode in source.episodes() {
        let mut task = None;
        for index in episode.from..episode.to {
            source.sample_into(index, &window, &mut sample)?;
            for vector in &mut vectors {
                match &sample.arrays[&vector.key].values {
                    Values::F32(values) => vector.values.extend_from_slice(values),
                    other => unreachable!("a float32 feature read as {}", other.type_name()),
                }
            }
            timestamps.push(sample.arrays["timestamp"].values.get_f64(0) as f32);
            let this = sample.arrays["task_index"].values.get_f64(0) as usize;
            if *task.get_or_insert(this) != this {
                return Err(DatasetError::invalid(
                    &episode.data_path,
                    format!(
                        "episode {} changes task at index {index}; re-encoding keeps one task \
                         per episode",
                        episode.index
                    ),
                ));
            }
        }
        let task = task.expect("episodes have frames");
        if task >= source.tasks().len() {
            return Err(DatasetError::invalid(
                &episode.data_path,
                format!("task_index {task}, but meta/ lists {} tasks", source.tasks().len()),
            ));
        }
        episode_tasks.push(task);
    }
    Ok(SourceRows { vectors, timestamps, episode_tasks })
}

/// Bytes of the first frame as PNG, summed over the image features: an estimate of a row's
/// share of a data file.
fn first_png_bytes(reader: &mut FrameReader<'_>, pictures: &[(String, u32, u32)]) -> Result<usize> {
    let mut bytes = 0;
    for (key, height, width) in pictures {
        let mut rgb = vec![0u8; 3 * *height as usize * *width as usize];
        reader.read(key, 0, 0, &mut rgb)?;
        bytes += png_bytes(&rgb, *height, *width).len();
    }
    Ok(bytes)
}

/// LeRobot's statistics of an image feature's frames, per episode (on its sampled frames).
fn image_stats(
    reader: &mut FrameReader<'_>,
    key: &str,
    (height, width): (u32, u32),
    ranges: &[(usize, usize)],
) -> Result<Vec<crate::dataset::stats::FeatureStats>> {
    let mut rgb = vec![0u8; 3 * height as usize * width as usize];
    ranges
        .iter()
        .enumerate()
        .map(|(episode, &(from, to))| {
            let mut stats = ImageStats::new(to - from, height, width);
            for i in 0..to - from {
                if stats.wants(i) {
                    reader.read(key, episode, i, &mut rgb)?;
                    stats.add(i, &rgb, width);
                }
            }
            Ok(stats.finish())
        })
        .collect()
}
