//! The study's source as it must stand before anything is made: every selected episode's
//! camera files on disk, and the bytes it stores per camera frame (what each candidate's size
//! is set against).

use crate::dataset::video::raw::{self, RawFrames};
use crate::dataset::video::VideoFile;
use crate::dataset::{Dataset, DatasetError, FeatureKind};

/// Refuses selected episodes whose camera files are missing (a partial download), naming the
/// episodes that are complete.
pub(super) fn check_files_present(dataset: &Dataset) -> Result<(), DatasetError> {
    let missing: Vec<usize> =
        dataset.episodes().filter(|e| !dataset.has_videos_on_disk(e)).map(|e| e.index.0).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let complete: Vec<String> = dataset
        .episodes()
        .filter(|e| dataset.has_videos_on_disk(e))
        .map(|e| e.index.0.to_string())
        .collect();
    Err(DatasetError::invalid(
        dataset.root(),
        format!(
            "{} of the selected episodes have no video files on disk (first: {}); pass \
             --episodes with complete ones ({})",
            missing.len(),
            missing[0],
            if complete.is_empty() { "none".into() } else { complete.join(",") }
        ),
    ))
}

/// Bytes of stored camera frames per camera frame of the selected episodes: the coded frames
/// of each episode's clip, or the PNG/JPEG files of image features.
pub(super) fn source_bytes_per_frame(dataset: &Dataset) -> Result<f64, DatasetError> {
    let (mut bytes, mut frames) = (0u64, 0usize);
    for episode in dataset.episodes() {
        for video in episode.videos.values() {
            let path = dataset.root().join(&video.path);
            if raw::is_raw(&path) {
                let file = RawFrames::shared(&path)?;
                let (width, height) = file.dimensions();
                let count = ((video.to_timestamp - video.from_timestamp) * dataset.info().fps)
                    .round() as usize;
                bytes += (count * 3 * width as usize * height as usize) as u64;
                frames += count;
                continue;
            }
            let file = VideoFile::shared(&path)?;
            let tolerance = dataset.tolerance_s();
            let times = file.frame_times();
            for sample in file.samples() {
                let Some(frame) = file.frame_of_rank(sample.rank) else { continue };
                let t = times[frame];
                if t >= video.from_timestamp - tolerance && t < video.to_timestamp - tolerance {
                    bytes += u64::from(sample.size);
                    frames += 1;
                }
            }
        }
    }
    let has_images = dataset.info().features.iter().any(|f| f.kind == FeatureKind::Image);
    let window = dataset.window(&crate::dataset::WindowSpec::Single)?;
    for index in dataset.episodes().filter(|_| has_images).flat_map(|e| e.from..e.to) {
        let sample = dataset.sample(index, &window)?;
        for images in sample.images.values() {
            bytes += images.images.iter().map(|i| i.len() as u64).sum::<u64>();
            frames += images.images.len();
        }
    }
    if frames == 0 {
        return Err(DatasetError::invalid(
            dataset.root(),
            "has no camera or image frames to lay out",
        ));
    }
    Ok(bytes as f64 / frames as f64)
}
