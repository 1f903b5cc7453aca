//! Writing LeRobot datasets (v2.1 and v3.0 layouts).
//!
//! - [`dataset`]: the one writer of parquet frames and metadata (info.json, episodes, tasks,
//!   statistics), paths from info.json's templates;
//! - [`encode`]: RGB frames → mp4 with FFmpeg (libsvtav1, libx264, libx265);
//! - [`scene`]: synthetic camera frames and trajectories, fixed by a seed;
//! - [`preset`]: the shapes of real datasets (`datasets/*.toml`);
//! - [`camera`]: a camera's episodes encoded into v2.1 or v3.0 mp4 files;
//! - [`mod@synth`]: `feedbench synth`, a complete dataset from a preset;
//! - [`mod@transcode`]: a dataset's episodes written again with other frame storage, size or
//!   file layout (the candidates of `feedbench layout`);
//! - here: [`write_tabular`], small camera-less datasets for tests, and [`write_atomically`].
//!
//! A dataset is written into a temporary sibling directory and renamed into place at the end,
//! so a half-written dataset never looks like a dataset; an existing non-empty directory is
//! never written into.

pub mod camera;
pub mod dataset;
pub mod encode;
pub mod preset;
pub mod scene;
pub mod synth;
pub mod transcode;

use std::path::Path;

use self::dataset::{
    dataset_info, groups_of, round_robin_tasks, write_dataset, Contents, ImageFeature, Layout,
    VectorFeature,
};
use super::error::{DatasetError, Result};
use super::files::WriterLock;
use super::meta::CodebaseVersion;
use super::setting::Setting;
use super::stats::ImageStats;

pub use self::encode::{EncodeProblem, EncodeSetting, EncodeSettings, PixFmt};
pub use self::preset::{Preset, PresetOverrides};
pub use self::synth::{cached_synth, synth, SynthOptions, SynthReport};
pub use super::files::write_parquet;

/// How vector columns are stored in parquet (datasets in the wild use all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListLayout {
    /// `FixedSizeList<float32, N>` (what LeRobot writes).
    FixedSize,
    /// `List<float32>`.
    List,
    /// `LargeList<float32>`.
    LargeList,
}

/// The frames of a dataset to write: shapes, episodes and file layout.
#[derive(Debug, Clone, PartialEq)]
pub struct TabularSpec {
    /// v2.1 (a file per episode) or v3.0 (many episodes per file).
    pub version: CodebaseVersion,
    /// Frames per second.
    pub fps: u32,
    /// `robot_type` in info.json.
    pub robot_type: String,
    /// Frames of each episode, episode 0 first.
    pub episode_lengths: Vec<usize>,
    /// Dimension of `observation.state`.
    pub state_dim: usize,
    /// Dimension of `action`.
    pub action_dim: usize,
    /// Task strings; episode `e` does task `e % tasks.len()`.
    pub tasks: Vec<String>,
    /// v3.0: episodes per data file.
    pub episodes_per_file: usize,
    /// Rows per parquet row group (need not align with episodes).
    pub row_group_rows: usize,
    /// Storage of the vector columns.
    pub list_layout: ListLayout,
    /// An `observation.image` feature of this (height, width), PNG files in parquet.
    pub image_size: Option<(u32, u32)>,
}

impl Default for TabularSpec {
    /// A small v3.0 dataset: 5 episodes of 3 to 9 frames at 10 fps, state 3, action 2, two
    /// episodes per file, row groups of 4 rows (so they straddle episodes), fixed-size lists.
    fn default() -> Self {
        Self {
            version: CodebaseVersion::V30,
            fps: 10,
            robot_type: "generated".into(),
            episode_lengths: vec![5, 7, 3, 9, 4],
            state_dim: 3,
            action_dim: 2,
            tasks: vec!["push".into()],
            episodes_per_file: 2,
            row_group_rows: 4,
            list_layout: ListLayout::FixedSize,
            image_size: None,
        }
    }
}

/// The key of the image feature that [`TabularSpec::image_size`] adds.
pub const IMAGE_KEY: &str = "observation.image";

/// The value written for `observation.state[dim]` at global `index` (`action` is its negation):
/// distinct per frame and dimension, so a test can tell any two apart.
pub fn synthetic_state(index: usize, dim: usize) -> f32 {
    index as f32 * 0.25 + dim as f32 * 1000.0
}

/// The pixels of the image of global `index` (packed RGB24): a gradient that moves with the
/// index.
pub fn synthetic_rgb(index: usize, height: u32, width: u32) -> Vec<u8> {
    (0..height)
        .flat_map(|y| {
            (0..width).flat_map(move |x| [(x as usize + index) as u8, y as u8, (index * 7) as u8])
        })
        .collect()
}

/// The PNG file written as the image of global `index`: [`synthetic_rgb`] encoded.
pub fn synthetic_png(index: usize, height: u32, width: u32) -> Vec<u8> {
    png_bytes(&synthetic_rgb(index, height, width), height, width)
}

/// Packed RGB24 pixels as a PNG file (the `image` crate's default compression, like PIL's).
pub fn png_bytes(rgb: &[u8], height: u32, width: u32) -> Vec<u8> {
    use image::ImageEncoder;
    let mut png = Vec::new();
    image::codecs::png::PngEncoder::new(&mut png)
        .write_image(rgb, width, height, image::ExtendedColorType::Rgb8)
        .expect("encoding to memory");
    png
}

/// Creates `out` through a temporary sibling renamed into place once `fill` succeeded.
/// Refuses an existing non-empty `out` unless `force`; even then it replaces only a directory
/// holding a LeRobot dataset (`meta/info.json`), and only at the end, once the new one is
/// complete. One writer of `out` at a time ([`WriterLock`]); what an earlier writer killed
/// meanwhile left is cleared first: its temporary sibling removed, a dataset it had moved
/// aside to replace moved back.
pub fn write_atomically(
    out: &Path,
    force: bool,
    fill: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    if out.exists() && !out.is_dir() {
        return Err(DatasetError::invalid(out, "exists and is not a directory"));
    }
    let name =
        out.file_name().ok_or_else(|| DatasetError::invalid(out, "expected a directory name"))?;
    let _alone = WriterLock::beside(out)?;
    let sibling = |what: &str| {
        out.with_file_name(format!(".{}.{what}-{}", name.to_string_lossy(), std::process::id()))
    };
    clear_leftovers(out)?;
    let occupied =
        out.exists() && std::fs::read_dir(out).map(|mut d| d.next().is_some()).unwrap_or(true);
    if occupied && !force {
        return Err(DatasetError::refused(out, |name| {
            format!("exists and is not empty (pass {} to replace it)", name(Setting::Force))
        }));
    }
    if occupied && !out.join("meta/info.json").is_file() {
        return Err(DatasetError::refused(out, |name| {
            format!(
                "exists, is not empty and holds no LeRobot dataset (no meta/info.json): not \
                 replacing it, even with {}",
                name(Setting::Force)
            )
        }));
    }
    let staging = sibling("partial");
    std::fs::create_dir_all(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    if let Err(e) = fill(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    if out.exists() {
        // Move the old directory aside first, so that `out` is never missing a dataset for
        // longer than two renames.
        let old = sibling("replaced");
        std::fs::rename(out, &old).map_err(|e| DatasetError::io(out, e))?;
        std::fs::rename(&staging, out).map_err(|e| DatasetError::io(out, e))?;
        return std::fs::remove_dir_all(&old).map_err(|e| DatasetError::io(&old, e));
    }
    std::fs::rename(&staging, out).map_err(|e| DatasetError::io(out, e))
}

/// Clears what writers of `out` killed before they finished left beside it (the caller holds
/// its lock, so no writer is at work): their temporary siblings `.<name>.partial-<pid>`, and a
/// dataset moved aside as `.<name>.replaced-<pid>`, moved back where `out` is missing (the
/// writer was killed between its two renames) and removed otherwise.
fn clear_leftovers(out: &Path) -> Result<()> {
    let (Some(parent), Some(name)) = (out.parent(), out.file_name()) else { return Ok(()) };
    let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
    let name = name.to_string_lossy();
    let (partial, replaced) = (format!(".{name}.partial-"), format!(".{name}.replaced-"));
    let entries = std::fs::read_dir(parent).map_err(|e| DatasetError::io(parent, e))?;
    for entry in entries.flatten() {
        let (file_name, path) = (entry.file_name(), entry.path());
        let file_name = file_name.to_string_lossy();
        if file_name.starts_with(&replaced) && !out.exists() {
            std::fs::rename(&path, out).map_err(|e| DatasetError::io(&path, e))?;
        } else if file_name.starts_with(&partial) || file_name.starts_with(&replaced) {
            std::fs::remove_dir_all(&path).map_err(|e| DatasetError::io(&path, e))?;
        }
    }
    Ok(())
}

/// Writes a dataset of state/action frames (no cameras) at `out`.
pub fn write_tabular(out: &Path, spec: &TabularSpec) -> Result<()> {
    let groups = if spec.version == CodebaseVersion::V30 {
        groups_of(spec.episode_lengths.len(), spec.episodes_per_file)
    } else {
        vec![]
    };
    let layout = Layout {
        version: spec.version,
        fps: spec.fps,
        robot_type: spec.robot_type.clone(),
        tasks: spec.tasks.clone(),
        episode_tasks: round_robin_tasks(spec.episode_lengths.len(), spec.tasks.len()),
        episode_lengths: spec.episode_lengths.clone(),
        data_files: groups,
        row_group_rows: spec.row_group_rows,
        list_layout: spec.list_layout,
    };
    layout.check(out)?;
    let frames = layout.total_frames();
    let motors = |n: usize| (0..n).map(|d| format!("motor_{d}")).collect::<Vec<_>>();
    let vector = |key: &str, dim: usize, sign: f32| VectorFeature {
        key: key.into(),
        names: motors(dim),
        values: (0..frames)
            .flat_map(|i| (0..dim).map(move |d| sign * synthetic_state(i, d)))
            .collect(),
    };
    let vectors = vec![
        vector("observation.state", spec.state_dim, 1.0),
        vector("action", spec.action_dim, -1.0),
    ];
    let png = |i: usize| {
        let (height, width) = spec.image_size.unwrap_or_default();
        Ok(synthetic_png(i, height, width))
    };
    let images: Vec<ImageFeature> = spec
        .image_size
        .into_iter()
        .map(|(height, width)| {
            let stats = layout
                .ranges()
                .iter()
                .map(|&(from, to)| {
                    let mut stats = ImageStats::new(to - from, height, width);
                    for i in from..to {
                        if stats.wants(i - from) {
                            stats.add(i - from, &synthetic_rgb(i, height, width), width);
                        }
                    }
                    stats.finish()
                })
                .collect();
            ImageFeature { key: IMAGE_KEY.into(), height, width, png: &png, stats }
        })
        .collect();
    let descriptions: Vec<(String, Vec<String>)> =
        vectors.iter().map(|v| (v.key.clone(), v.names.clone())).collect();
    let image_shapes: Vec<(String, u32, u32)> =
        images.iter().map(|i| (i.key.clone(), i.height, i.width)).collect();
    let info = dataset_info(&layout, &descriptions, &image_shapes, &[]);
    let contents = Contents { vectors, images, cameras: vec![], timestamps: None };
    write_atomically(out, false, |root| write_dataset(root, &info, &layout, &contents))
}
