//! `feedbench synth`: a complete generated LeRobot dataset (v2.1 or v3.0) from a preset:
//! camera frames rendered ([`super::scene`]) and encoded in process ([`super::encode`]), states
//! and actions that follow the motion, and the metadata and statistics LeRobot writes
//! ([`super::dataset`]). Everything is fixed by the seed, except the encoders' bytes.

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::camera::{encode_camera, use_raw_files, CameraCoding, CameraTarget};
use super::dataset::{
    data_file_groups, dataset_info, round_robin_tasks, write_dataset, Contents, ImageFeature,
    Layout, VectorFeature,
};
use super::encode::PixFmt;
use super::png_bytes;
use super::preset::Preset;
use super::scene::{Camera, Motion};
use super::{write_atomically, ListLayout};
use crate::dataset::error::{DatasetError, Result};
use crate::dataset::files::{LockHeld, WriterLock};
use crate::dataset::meta::{CodebaseVersion, Info};
use crate::dataset::stats::ImageStats;
use crate::timing::{NoOne, Watch};

/// How `synth` stores the rendered camera frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SynthStorage {
    /// mp4 files encoded with the preset's settings.
    #[default]
    Video,
    /// PNG images in the parquet data files: the rendered frames exactly.
    Png,
    /// feedbench's raw frame files: the rendered frames exactly, nothing to decode.
    Raw,
}

named_values!(SynthStorage { Video => "video", Png => "png", Raw => "raw" });

/// How `synth` writes a preset's dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthOptions {
    /// v2.1 (a file per episode) or v3.0 (many episodes per file).
    pub version: CodebaseVersion,
    /// Seed of everything generated (episode lengths, frames, states).
    pub seed: u64,
    /// Replace an existing dataset at the output directory.
    pub force: bool,
    /// v3.0: at most this many episodes per data file and per video file; by default files
    /// roll over at LeRobot's sizes (100 MB of data, 200 MB of video).
    pub episodes_per_file: Option<usize>,
    /// How camera frames are stored.
    pub storage: SynthStorage,
}

impl Default for SynthOptions {
    fn default() -> Self {
        Self {
            version: CodebaseVersion::V30,
            seed: 0,
            force: false,
            episodes_per_file: None,
            storage: SynthStorage::Video,
        }
    }
}

/// What `synth` wrote.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SynthReport {
    /// The dataset root.
    pub root: PathBuf,
    /// Episodes written.
    pub episodes: usize,
    /// Frames written.
    pub frames: usize,
    /// Camera files written (mp4 or raw).
    pub video_files: usize,
    /// Bytes of stored camera frames (coded video, raw frames or PNG images).
    pub video_bytes: u64,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// Bytes of one parquet row (state, action, bookkeeping), uncompressed: how many episodes fit
/// in a data file of LeRobot's 100 MB.
fn row_bytes(preset: &Preset) -> usize {
    4 * (preset.state_dim + preset.action_dim) + 4 + 4 * 8
}

/// What generating a dataset says as it goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Synthesis<'a> {
    /// A line of what is done: a generated dataset found and used, another process waited for,
    /// a dataset about to be generated.
    Said(&'a str),
    /// Camera frames encoded so far, of all.
    Encoded {
        /// Frames encoded so far.
        done: u64,
        /// Frames in all.
        total: u64,
    },
}

/// Watches a dataset being generated; `Break` stops it, with what was written removed.
pub type SynthWatch<'a> = dyn for<'b> Watch<Synthesis<'b>> + 'a;

/// Writes the dataset `preset` describes at `out`.
pub fn synth(out: &Path, preset: &Preset, options: &SynthOptions) -> Result<SynthReport> {
    synth_watched(out, preset, options, &mut NoOne)
}

/// The dataset `synth` makes of `preset` in `version` (default options), kept in `cache`
/// under a name that spells out what was generated, and reused when an earlier run generated
/// the same thing; `watch` hears which it is, and the frames encoded where it is generated.
pub fn cached_synth(
    preset: &Preset,
    version: CodebaseVersion,
    cache: &Path,
    watch: &mut SynthWatch<'_>,
) -> Result<PathBuf> {
    let jitter = if preset.frames_jitter > 0 {
        format!("±{}", preset.frames_jitter)
    } else {
        String::new()
    };
    // Settings other than LeRobot's defaults name themselves (the defaults keep the names
    // earlier caches have).
    let mut encoding = String::new();
    if let Some(speed) = &preset.encoder_preset {
        encoding.push_str(&format!("-preset{speed}"));
    }
    if preset.pix_fmt != PixFmt::Yuv420p {
        encoding.push_str(&format!("-{}", preset.pix_fmt));
    }
    if preset.fast_decode {
        encoding.push_str("-fastdecode");
    }
    let root = cache.join(format!(
        "{}-{version}-{}-gop{}-crf{}{encoding}-{}ep-{}f{jitter}",
        preset.name,
        preset.codec,
        preset.gop,
        preset.crf,
        preset.episodes,
        preset.frames_per_episode,
    ));
    let using = format!("using the generated dataset {}", root.display());
    if root.join("meta/info.json").is_file() {
        let _ = watch.hear(Synthesis::Said(&using));
        return Ok(root);
    }
    // Tasks of one plan may ask for the same dataset at once: one generates it, the others
    // wait for it and use it (unless the watcher breaks: then the wait is refused).
    std::fs::create_dir_all(cache).map_err(|e| DatasetError::io(cache, e))?;
    let _generating = WriterLock::generating(&root, &mut |held: LockHeld| {
        let by = held.holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default();
        let line = format!("waiting for another feedbench{by} generating {}", root.display());
        watch.hear(Synthesis::Said(&line))
    })?;
    if root.join("meta/info.json").is_file() {
        let _ = watch.hear(Synthesis::Said(&using));
        return Ok(root);
    }
    let line = format!(
        "generating {} ({} episodes) into {}",
        preset.name,
        preset.episodes,
        root.display()
    );
    if watch.hear(Synthesis::Said(&line)).is_break() {
        return Err(DatasetError::Stopped { path: root });
    }
    synth_watched(&root, preset, &SynthOptions { version, ..SynthOptions::default() }, watch)?;
    Ok(root)
}

/// [`synth`], `watch` hearing the camera frames encoded so far; where it breaks, writing stops
/// with [`DatasetError::Stopped`] and what was written is removed.
pub fn synth_watched(
    out: &Path,
    preset: &Preset,
    options: &SynthOptions,
    watch: &mut SynthWatch<'_>,
) -> Result<SynthReport> {
    let started = Instant::now();
    preset.check(out)?;
    if options.episodes_per_file == Some(0) {
        return Err(DatasetError::invalid(out, "episodes per file must be ≥ 1"));
    }
    let lengths = preset.episode_lengths(options.seed);
    let data_files = data_file_groups(&lengths, options.episodes_per_file, row_bytes(preset));
    let layout = Layout {
        version: options.version,
        fps: preset.fps,
        robot_type: preset.robot_type.clone(),
        tasks: preset.tasks.clone(),
        episode_tasks: round_robin_tasks(lengths.len(), preset.tasks.len()),
        episode_lengths: lengths,
        data_files,
        row_group_rows: 100_000,
        list_layout: ListLayout::FixedSize,
    };
    layout.check(out)?;
    let settings = preset.encode_settings();
    let vectors = [
        ("observation.state".to_string(), preset.state_names()),
        ("action".to_string(), preset.action_names()),
    ];
    let coding = match options.storage {
        SynthStorage::Video => Some(CameraCoding::Video(&settings)),
        SynthStorage::Raw => Some(CameraCoding::Raw),
        SynthStorage::Png => None,
    };
    let pictures = preset.cameras.iter().map(|c| (c.key.clone(), c.height, c.width));
    let (images, cameras): (Vec<_>, Vec<_>) = match coding {
        None => (pictures.collect(), vec![]),
        Some(coding) => (
            vec![],
            pictures.map(|(key, h, w)| (key, h, w, coding.video_info(h, w, preset.fps))).collect(),
        ),
    };
    let mut info = dataset_info(&layout, &vectors, &images, &cameras);
    if options.storage == SynthStorage::Raw {
        use_raw_files(&mut info);
    }
    let motions: Vec<Motion> = (0..layout.episode_lengths.len())
        .map(|e| Motion::new(options.seed, e, preset.state_dim.max(preset.action_dim)))
        .collect();
    let total = (layout.total_frames() * preset.cameras.len()) as u64;
    let mut report = SynthReport {
        root: out.to_path_buf(),
        episodes: layout.episode_lengths.len(),
        frames: layout.total_frames(),
        video_files: 0,
        video_bytes: 0,
        seconds: 0.0,
    };
    let vectors = vec![
        trajectory(&vectors[0], &layout, &motions, 0.0),
        trajectory(&vectors[1], &layout, &motions, 1.0 / f64::from(preset.fps)),
    ];
    let Some(coding) = coding else {
        write_atomically(out, options.force, |root| {
            let encoding = (RefCell::new(watch), total);
            report.video_bytes = write_png_images(
                root,
                (&info, &layout, preset),
                options.seed,
                &motions,
                vectors,
                encoding,
            )
            .map_err(|e| match e {
                DatasetError::Stopped { .. } => DatasetError::Stopped { path: out.into() },
                e => e,
            })?;
            Ok(())
        })?;
        report.seconds = started.elapsed().as_secs_f64();
        return Ok(report);
    };
    write_atomically(out, options.force, |root| {
        let mut done = 0u64;
        let mut features = Vec::new();
        for (index, spec) in preset.cameras.iter().enumerate() {
            let target = CameraTarget {
                key: &spec.key,
                height: spec.height,
                width: spec.width,
                coding,
                episodes_per_file: options.episodes_per_file,
            };
            let camera = Camera::new(options.seed, index, spec.height, spec.width);
            let mut view = None;
            let encoded = encode_camera(root, &info, &layout, &target, &mut |e, i, rgb| {
                if i == 0 {
                    view = Some(camera.view(&motions[e], e));
                }
                let view = view.as_ref().expect("frame 0 comes first");
                view.render(i as f64 / f64::from(preset.fps), i, rgb);
                done += 1;
                match watch.hear(Synthesis::Encoded { done, total }) {
                    ControlFlow::Continue(()) => Ok(()),
                    ControlFlow::Break(()) => Err(DatasetError::Stopped { path: out.into() }),
                }
            })?;
            report.video_files += encoded.files;
            report.video_bytes += encoded.bytes;
            features.push(encoded.feature);
        }
        let contents = Contents { vectors, images: vec![], cameras: features, timestamps: None };
        write_dataset(root, &info, &layout, &contents)
    })?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The watcher of [`synth_watched`] and the frames in all.
type Encoding<'a, 'w> = (RefCell<&'a mut SynthWatch<'w>>, u64);

/// Writes the dataset with every camera's rendered frames as PNG images in parquet; returns
/// the bytes of PNG written.
fn write_png_images(
    root: &Path,
    (info, layout, preset): (&Info, &Layout, &Preset),
    seed: u64,
    motions: &[Motion],
    vectors: Vec<VectorFeature>,
    (watch, total): Encoding<'_, '_>,
) -> Result<u64> {
    let ranges = layout.ranges();
    let (bytes, done) = (Cell::new(0u64), Cell::new(0u64));
    let cameras: Vec<Camera> = (0..preset.cameras.len())
        .map(|i| Camera::new(seed, i, preset.cameras[i].height, preset.cameras[i].width))
        .collect();
    // Frame `i` of episode `e` of camera `c`, packed RGB24 (a view is made once per episode).
    let views = RefCell::new((0..cameras.len()).map(|_| None).collect::<Vec<_>>());
    let render = |c: usize, e: usize, i: usize, rgb: &mut [u8]| {
        let mut views = views.borrow_mut();
        if views[c].as_ref().is_none_or(|(episode, _)| *episode != e) {
            views[c] = Some((e, cameras[c].view(&motions[e], e)));
        }
        let (_, view) = views[c].as_ref().expect("made above");
        view.render(i as f64 / f64::from(preset.fps), i, rgb);
    };
    let pngs: Vec<_> = preset
        .cameras
        .iter()
        .enumerate()
        .map(|(c, spec)| {
            let (render, ranges, bytes, done, watch) = (&render, &ranges, &bytes, &done, &watch);
            move |index: usize| {
                let e = ranges.partition_point(|&(_, to)| to <= index);
                let mut rgb = vec![0u8; 3 * spec.height as usize * spec.width as usize];
                render(c, e, index - ranges[e].0, &mut rgb);
                let png = png_bytes(&rgb, spec.height, spec.width);
                bytes.set(bytes.get() + png.len() as u64);
                done.set(done.get() + 1);
                match watch.borrow_mut().hear(Synthesis::Encoded { done: done.get(), total }) {
                    ControlFlow::Continue(()) => Ok(png),
                    ControlFlow::Break(()) => Err(DatasetError::Stopped { path: root.into() }),
                }
            }
        })
        .collect();
    let mut images = Vec::new();
    for ((c, spec), png) in preset.cameras.iter().enumerate().zip(&pngs) {
        let mut rgb = vec![0u8; 3 * spec.height as usize * spec.width as usize];
        let stats = ranges
            .iter()
            .enumerate()
            .map(|(e, &(from, to))| {
                let mut stats = ImageStats::new(to - from, spec.height, spec.width);
                for i in 0..to - from {
                    if stats.wants(i) {
                        render(c, e, i, &mut rgb);
                        stats.add(i, &rgb, spec.width);
                    }
                }
                stats.finish()
            })
            .collect();
        let (key, height, width) = (spec.key.clone(), spec.height, spec.width);
        images.push(ImageFeature { key, height, width, png, stats });
    }
    let contents = Contents { vectors, images, cameras: vec![], timestamps: None };
    write_dataset(root, info, layout, &contents)?;
    Ok(bytes.get())
}

/// A vector feature's values: each episode's motion state `ahead` seconds after each frame.
fn trajectory(
    (key, names): &(String, Vec<String>),
    layout: &Layout,
    motions: &[Motion],
    ahead: f64,
) -> VectorFeature {
    let width = names.len();
    let mut values = vec![0f32; layout.total_frames() * width];
    let mut row = values.chunks_exact_mut(width);
    let mut state = vec![0f32; motions.first().map_or(0, |m| m.dims())];
    for (motion, &length) in motions.iter().zip(&layout.episode_lengths) {
        for frame in 0..length {
            motion.state(frame as f64 / f64::from(layout.fps) + ahead, &mut state);
            row.next().expect("a row per frame").copy_from_slice(&state[..width]);
        }
    }
    VectorFeature { key: key.clone(), names: names.clone(), values }
}
