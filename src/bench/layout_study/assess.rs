//! What a layout study measures of one candidate dataset, each after its warm-up: its size,
//! what encoding it cost, the loader's decode cost under random access (one worker) and its
//! throughput at the configured workers (with a warm and, on a disk, a cold page cache), the
//! time to the first batch from a cold open, and the quality of its frames against the
//! reference (the source's frames as the loader decodes them) on frames the window reads.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::candidate::{Candidate, Storage};
use super::config::MeasureSection;
use super::result::{CandidateResult, DecodeCost, LoaderFigures, VsBase};
use crate::dataset::files::files_under;
use crate::dataset::summary::Summary;
use crate::dataset::video::access::{FileLayout, FilesLayout};
use crate::dataset::video::planes::pack_planes;
use crate::dataset::video::quality::{planar_rgb_frame, Quality, QualityMeter};
use crate::dataset::video::FrameBuffer;
use crate::dataset::write::png_bytes;
use crate::dataset::write::scene::SplitMix64;
use crate::dataset::write::transcode::{FrameReader, TranscodeReport};
use crate::dataset::{Dataset, DatasetError, FeatureKind, FrameMatch, Window};
use crate::loader::config::LoaderConfig;
use crate::loader::lerobot::LerobotBridge;
use crate::loader::pipeline::LoaderError;
use crate::loader::spec::LoaderSpec;
use crate::measure::loader_run::{measure_run, RunFigures, RunLength};
use crate::measure::phase::{run_loader_phase, ChosenLoader};
use crate::measure::system::system_info;
use crate::timing::NoOne;

/// Why a candidate could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// Reading a dataset.
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    /// Running the loader.
    #[error("{0}")]
    Loader(#[from] LoaderError),
    /// The metrics.
    #[error("{0}")]
    Quality(String),
}

/// The study's source: the dataset (its selected episodes), as the candidates are made from.
pub struct Source<'a> {
    /// The source, opened on the selected episodes.
    pub dataset: &'a Dataset,
    /// Bytes of stored camera frames per frame.
    pub bytes_per_frame: f64,
}

/// Measures the candidate read at `root` (its copy written at `local`; the same directory but
/// for a URL location), written from `source` as `encoded` reports.
/// With `base` (the base candidate's dataset; None for the base itself), its runs are
/// interleaved with the candidate's (base, candidate, candidate, base, …) and the change
/// against it is reported: the machine's drift between candidates cancels out of it.
pub fn measure_candidate(
    source: &Source<'_>,
    candidate: &Candidate,
    label: String,
    (root, local, base): (&Path, &Path, Option<&Path>),
    encoded: &TranscodeReport,
    measure: &MeasureSection,
) -> Result<CandidateResult, MeasureError> {
    let knobs = measure.knobs.config();
    let seed = knobs.seed;
    let spec_of = |root: &Path, workers: usize| LoaderSpec {
        dataset: root.to_path_buf(),
        episodes: None,
        window: measure.window,
        frames: FrameMatch::default(),
        config: LoaderConfig { workers, ..knobs.clone() },
        replay: None,
    };
    let spec = |workers: usize| spec_of(root, workers);
    let evictable = candidate.location == super::candidate::Location::Out;

    if evictable {
        evict_from_page_cache(root)?;
    }
    let opened = Instant::now();
    let loader = spec(knobs.workers).build()?;
    run_loader_phase(&loader, 1, 0, &mut NoOne)?;
    let first_batch_ms = opened.elapsed().as_secs_f64() * 1e3;
    drop(loader);

    let (decode, camera_frames_per_sample) = decode_cost(spec(1), candidate.storage, measure)?;
    let runs = interleaved_runs(&spec_of, (root, base), knobs.workers, measure, evictable)?;

    let candidate_dataset = Dataset::open(root)?;
    let compared = compare_frames(source, &candidate_dataset, measure)?;
    let frames = encoded.camera_frames.max(1) as f64;
    Ok(CandidateResult {
        name: candidate.name(),
        label,
        candidate: candidate.clone(),
        episodes: encoded.episodes,
        frames: encoded.frames,
        camera_frames_per_sample,
        bytes_per_frame: encoded.frame_bytes as f64 / frames,
        source_bytes_per_frame: source.bytes_per_frame,
        png_bytes_per_frame: compared.png_bytes_per_frame,
        png_decode_ms_per_frame: compared.png_decode_ms_per_frame,
        encode_cpu_ms_per_frame: encoded.encode_cpu.as_secs_f64() * 1e3 / frames,
        decode,
        vs_base: VsBase::of(&runs.base, &runs.warm, seed),
        loader: LoaderFigures::of(runs.warm, seed),
        cold_loader: evictable.then(|| LoaderFigures::of(runs.cold, seed)),
        first_batch_ms,
        quality: compared.quality,
        scaling: compared.scaling,
        loss: None,
        files: files_layout(local)?,
        system: Some(system_info(tch::Device::Cpu)),
        finished_unix_s: SystemTime::now().duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs()),
    })
}

/// The loader's decode cost under random access at one worker (`one`, after its warm-up), for
/// a candidate of `storage`; and the camera frames one sample holds.
fn decode_cost(
    one: LoaderSpec,
    storage: Storage,
    measure: &MeasureSection,
) -> Result<(DecodeCost, usize), MeasureError> {
    let one = one.build()?;
    let warmup = one.config().batches_in_flight() + 1;
    let phase = run_loader_phase(&one, measure.batches, warmup, &mut NoOne)?;
    let window = one.dataset().window(&measure.window.spec())?;
    let camera_frames = camera_frames_per_sample(one.dataset(), &window);
    let decode = DecodeCost {
        cpu_ms_per_sample: phase.cpu_ms_per_sample,
        frames_decoded_per_sample: match storage {
            Storage::Raw => Some(0.0),
            _ => phase.decode_limit.as_ref().map(|d| d.frames_per_sample),
        },
        cpu_us_per_decoded_frame: phase.decode_limit.as_ref().map(|d| d.cpu_us_per_frame),
    };
    Ok((decode, camera_frames))
}

/// A candidate's repeated runs: warm, cold (its files evicted first), and the base's beside them.
struct Runs {
    warm: Vec<RunFigures>,
    cold: Vec<RunFigures>,
    base: Vec<RunFigures>,
}

/// `measure.repeats` runs of the candidate at `root` with `workers` (specs from `spec_of`): warm,
/// interleaved with the base's where there is one (base, candidate, candidate, base, …), and
/// cold after evicting its files where `evictable`.
fn interleaved_runs(
    spec_of: &dyn Fn(&Path, usize) -> LoaderSpec,
    (root, base): (&Path, Option<&Path>),
    workers: usize,
    measure: &MeasureSection,
    evictable: bool,
) -> Result<Runs, MeasureError> {
    let mut runs = Runs { warm: Vec::new(), cold: Vec::new(), base: Vec::new() };
    let length = RunLength { batches: measure.batches, warmup: None };
    // Native loaders only: the bridge stays unused.
    let bridge = LerobotBridge::new();
    let run = |root: &Path, length| {
        let loader = ChosenLoader::native(spec_of(root, workers));
        measure_run(&loader, length, false, None, &bridge).map(|run| run.figures)
    };
    for repeat in 0..measure.repeats {
        let base_first = repeat % 2 == 0;
        if let Some(base) = base.filter(|_| base_first) {
            runs.base.push(run(base, length)?);
        }
        runs.warm.push(run(root, length)?);
        if let Some(base) = base.filter(|_| !base_first) {
            runs.base.push(run(base, length)?);
        }
        if evictable {
            evict_from_page_cache(root)?;
            runs.cold.push(run(root, RunLength { batches: measure.batches, warmup: Some(0) })?);
        }
    }
    Ok(runs)
}

/// The layout of the video files of the dataset at `root`, every camera's (`info`'s).
fn files_layout(root: &Path) -> Result<Option<FilesLayout>, DatasetError> {
    let summary = Summary::collect(root)?;
    let files: Vec<FileLayout> = summary.cameras.into_iter().flat_map(|c| c.layout).collect();
    Ok(FilesLayout::of(&files))
}

/// Camera and image frames one sample of `window` holds.
fn camera_frames_per_sample(dataset: &Dataset, window: &Window) -> usize {
    dataset
        .info()
        .features
        .iter()
        .filter(|f| matches!(f.kind, FeatureKind::Video | FeatureKind::Image))
        .map(|f| window.offsets(&f.name).map_or(1, <[i64]>::len))
        .sum()
}

/// Drops `root`'s files from the page cache (`posix_fadvise(DONTNEED)`, after writing back
/// what is dirty), so that the next read comes from the disk. Needs no privileges.
pub fn evict_from_page_cache(root: &Path) -> Result<(), DatasetError> {
    use std::os::fd::AsRawFd;
    for path in files_under(root)?.unwrap_or_default() {
        let file = std::fs::File::open(&path).map_err(|e| DatasetError::io(&path, e))?;
        file.sync_data().map_err(|e| DatasetError::io(&path, e))?;
        // SAFETY: a valid descriptor of an open file; the call only advises the kernel.
        let status =
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if status != 0 {
            return Err(DatasetError::io(&path, std::io::Error::from_raw_os_error(status)));
        }
    }
    Ok(())
}

/// The quality figures of a candidate and its PNG reference sizes.
struct Compared {
    quality: Quality,
    scaling: Option<Quality>,
    png_bytes_per_frame: f64,
    png_decode_ms_per_frame: f64,
}

/// Compares `measure.quality_frames` camera frames of the candidate, drawn at random (fixed by
/// the seed) from every camera's frames, with the reference at the candidate's size; with a
/// resized candidate also the reference scaled down and back up with the reference.
fn compare_frames(
    source: &Source<'_>,
    candidate: &Dataset,
    measure: &MeasureSection,
) -> Result<Compared, MeasureError> {
    let keys: Vec<String> = candidate
        .info()
        .features
        .iter()
        .filter(|f| matches!(f.kind, FeatureKind::Video | FeatureKind::Image))
        .map(|f| f.name.clone())
        .collect();
    let frames = candidate.num_frames();
    let mut picks: Vec<(usize, usize)> =
        keys.iter().enumerate().flat_map(|(k, _)| (0..frames).map(move |i| (k, i))).collect();
    let mut rng = SplitMix64::new(measure.knobs.config().seed, 0x9a11);
    let take = measure.quality_frames.min(picks.len());
    for i in 0..take {
        let j = i + (rng.next_u64() % (picks.len() - i) as u64) as usize;
        picks.swap(i, j);
    }
    picks.truncate(take);
    picks.sort_unstable();
    // The candidate's frames are the source's selected frames renumbered in order.
    let source_index: Vec<usize> = source.dataset.episodes().flat_map(|e| e.from..e.to).collect();

    let mut reader = FrameReader::new(candidate, None)?;
    let (mut meters, mut scaling_meters) = (Meters::default(), Meters::default());
    let (mut distorted, mut reference, mut native) = (Vec::new(), Vec::new(), Vec::new());
    let (mut png_bytes_total, mut png_decode_s) = (0usize, 0.0);
    let mut references: Option<(FrameReader<'_>, Option<FrameReader<'_>>)> = None;
    for &(k, index) in &picks {
        let key = &keys[k];
        let feature = candidate.info().features.iter().find(|f| &f.name == key).expect("a key");
        let shape = feature.image.as_ref().expect("pictures have a size");
        let (height, width) = (shape.height, shape.width);
        if references.is_none() {
            let native_size = source_size(source.dataset, key)?;
            let resized = (native_size != (height, width)).then_some((height, width));
            let scaled = resized.map(|_| FrameReader::new(source.dataset, None)).transpose()?;
            references = Some((FrameReader::new(source.dataset, resized)?, scaled));
        }
        let (at_size, at_native) = references.as_mut().expect("made above");
        reader.read_chw(key, index, &mut distorted)?;
        at_size.read_chw(key, source_index[index], &mut reference)?;
        meters.push((height, width), &distorted, &reference)?;
        let rgb = packed(&reference);
        let png = png_bytes(&rgb, height, width);
        png_bytes_total += png.len();
        let started = crate::timing::thread_cpu_time();
        let decoded = image::load_from_memory_with_format(&png, image::ImageFormat::Png)
            .map_err(|e| MeasureError::Quality(format!("decoding a PNG: {e}")))?;
        png_decode_s += (crate::timing::thread_cpu_time().saturating_sub(started)).as_secs_f64();
        drop(decoded);
        if let Some(at_native) = at_native {
            at_native.read_chw(key, source_index[index], &mut native)?;
            let (native_height, native_width) = source_size(source.dataset, key)?;
            let up = image::imageops::resize(
                &image::RgbImage::from_raw(width, height, rgb).expect("a full frame"),
                native_width,
                native_height,
                image::imageops::FilterType::Triangle,
            );
            scaling_meters.push((native_height, native_width), &planar(up.as_raw()), &native)?;
        }
    }
    let quality = meters.finish()?.ok_or_else(|| {
        MeasureError::Quality(format!(
            "{}: no camera frames to compare",
            candidate.root().display()
        ))
    })?;
    Ok(Compared {
        quality,
        scaling: scaling_meters.finish()?,
        png_bytes_per_frame: png_bytes_total as f64 / take.max(1) as f64,
        png_decode_ms_per_frame: png_decode_s * 1e3 / take.max(1) as f64,
    })
}

/// One quality meter per frame size (cameras may differ in size); their frames summarised
/// together.
#[derive(Default)]
struct Meters(Vec<((u32, u32), QualityMeter)>);

impl Meters {
    /// Compares `distorted` with `reference`, RGB planes of `(height, width)`.
    fn push(
        &mut self,
        size: (u32, u32),
        distorted: &[u8],
        reference: &[u8],
    ) -> Result<(), MeasureError> {
        let (height, width) = size;
        let position = match self.0.iter().position(|(s, _)| *s == size) {
            Some(position) => position,
            None => {
                let meter = QualityMeter::new(width, height, ffmpeg_next::format::Pixel::GBRP)
                    .map_err(|e| MeasureError::Quality(e.to_string()))?;
                self.0.push((size, meter));
                self.0.len() - 1
            }
        };
        self.0[position]
            .1
            .push(
                &planar_rgb_frame(distorted, height, width),
                &planar_rgb_frame(reference, height, width),
            )
            .map_err(|e| MeasureError::Quality(e.to_string()))
    }

    /// The figures over every frame compared; None when none was.
    fn finish(self) -> Result<Option<Quality>, MeasureError> {
        let mut frames = Vec::new();
        for (_, meter) in self.0 {
            frames.extend(meter.finish().map_err(|e| MeasureError::Quality(e.to_string()))?);
        }
        Ok(Quality::of(&frames))
    }
}

/// The `(height, width)` info.json gives camera or image feature `key` of `dataset`.
fn source_size(dataset: &Dataset, key: &str) -> Result<(u32, u32), DatasetError> {
    dataset
        .info()
        .features
        .iter()
        .find(|f| f.name == key)
        .and_then(|f| f.image.as_ref())
        .map(|s| (s.height, s.width))
        .ok_or_else(|| {
            DatasetError::invalid(
                dataset.root().join("meta/info.json"),
                format!("`{key}` is not a camera of the source, or gives no size"),
            )
        })
}

/// RGB planes → packed RGB24.
pub fn packed(chw: &[u8]) -> Vec<u8> {
    let mut rgb = vec![0u8; chw.len()];
    pack_planes(chw, &mut rgb);
    rgb
}

/// Packed RGB24 → RGB planes.
fn planar(rgb: &[u8]) -> Vec<u8> {
    let mut chw = vec![0u8; rgb.len()];
    FrameBuffer::U8(&mut chw).fill_from_rgb(rgb);
    chw
}
