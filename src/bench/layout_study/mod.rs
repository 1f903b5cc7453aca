//! `feedbench layout`: which codec, GOP, resolution and file layout, measured on the user's
//! own dataset with the loader that will read it.
//!
//! - [`config`]: the base candidate, the axes around it, how to measure, what to keep to;
//! - [`candidate`]: one candidate layout, its settings, name and label;
//! - each candidate is written from the source's decoded frames by
//!   [`crate::dataset::write::transcode`] into `DIR/candidates/<name>/` (or `/dev/shm`);
//! - `source`: the source as it must stand first (its files present, its bytes per frame);
//! - [`assess`]: its size, encode cost, decode cost, throughput, first batch and quality;
//! - [`loss`]: what its frames do to the training step's loss, against the source's;
//! - results are appended to `DIR/layout.jsonl` as each candidate finishes, so an interrupted
//!   study loses nothing finished and `--resume` goes on where it stopped;
//! - [`ranking`]: the candidates ranked, held to the floors, and the recommendation;
//! - [`report`]: the table, the recommendation and the Pareto plot, from `layout.jsonl` alone.

pub mod assess;
pub mod candidate;
pub mod config;
pub mod loss;
pub mod loss_plot;
pub mod page;
pub mod pareto;
pub mod ranking;
pub mod report;
pub mod result;
mod source;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use self::assess::{measure_candidate, packed, MeasureError, Source};
use self::candidate::{candidate_root, read_root, Candidate, Location, Storage};
use self::config::LayoutConfig;
use self::loss::LossProbe;
use self::result::{CandidateResult, LossFigure};
use self::source::{check_files_present, source_bytes_per_frame};
use crate::bench::events::Events;
use crate::bench::store::jsonl::{JsonlError, JsonlStore};
use crate::bench::store::lock::OutputLock;
use crate::dataset::bytes::Bytes;
use crate::dataset::files::{is_url, place_copy, resolved, write_whole};
use crate::dataset::write::png_bytes;
use crate::dataset::write::transcode::{transcode, FrameReader, TranscodeReport};
use crate::dataset::{Dataset, DatasetError, DatasetOptions, EpisodeList};

/// The results file of a study, a candidate per line.
pub const RESULTS_FILE: &str = "layout.jsonl";
/// The config a study ran with, copied into its directory for `report`.
pub const CONFIG_FILE: &str = "layout.toml";
/// Per candidate, what writing it cost (kept so that `--resume` can reuse the dataset).
const ENCODED_DIR: &str = "encoded";

/// A study to run.
#[derive(Debug, Clone)]
pub struct LayoutStudy {
    /// The source dataset.
    pub dataset: PathBuf,
    /// Only these episodes (every one when None).
    pub episodes: Option<EpisodeList>,
    /// The config file's path (named in errors, copied into `out`).
    pub config_path: PathBuf,
    /// The config.
    pub config: LayoutConfig,
    /// The study's directory.
    pub out: PathBuf,
    /// Go on with a study begun in `out`.
    pub resume: bool,
}

/// Why a study could not run.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// Reading or writing a dataset.
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    /// Measuring a candidate.
    #[error("{candidate}: {error}")]
    Measure {
        /// The candidate's name.
        candidate: String,
        /// What failed.
        #[source]
        error: MeasureError,
    },
    /// Another process writes the output directory.
    #[error(transparent)]
    Locked(#[from] crate::bench::store::lock::LockError),
    /// A request that cannot be met.
    #[error("{path}: {what}")]
    Refused {
        /// The file or directory concerned.
        path: PathBuf,
        /// What is wrong and what to do.
        what: String,
    },
}

fn refused(path: &Path, what: impl Into<String>) -> LayoutError {
    LayoutError::Refused { path: path.to_path_buf(), what: what.into() }
}

/// What writing a candidate cost, as kept in `DIR/encoded/<name>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Encoded {
    episodes: usize,
    frames: usize,
    camera_frames: usize,
    frame_bytes: u64,
    encode_cpu_s: f64,
}

impl Encoded {
    fn report(&self, root: &Path) -> TranscodeReport {
        TranscodeReport {
            root: root.to_path_buf(),
            episodes: self.episodes,
            frames: self.frames,
            camera_frames: self.camera_frames,
            frame_bytes: self.frame_bytes,
            encode_cpu: Duration::from_secs_f64(self.encode_cpu_s),
            source_cpu: Duration::ZERO,
            elapsed: Duration::ZERO,
        }
    }
}

/// Runs the study: every candidate not yet in `DIR/layout.jsonl` is written, measured and
/// appended. `events` hear what is written and measured. Returns every result, earlier ones
/// included.
pub fn run_layout(
    study: &LayoutStudy,
    events: &mut dyn Events,
) -> Result<Vec<CandidateResult>, LayoutError> {
    let candidates =
        study.config.candidates(&study.config_path).map_err(|e| refused(&e.path, e.what))?;
    let out = resolved(&study.out)?;
    // A URL's objects are never written; a directory is apart from the output.
    if !is_url(&study.dataset) {
        let source_root = std::fs::canonicalize(&study.dataset)
            .map_err(|e| DatasetError::io(&study.dataset, e))?;
        if out.starts_with(&source_root) || source_root.starts_with(&out) {
            return Err(refused(
                &study.out,
                "is inside the source dataset or holds it; a study never writes into its source",
            ));
        }
    }
    // The source must stand before anything is made: its episodes, files and frames.
    let options = DatasetOptions {
        episodes: study.episodes.as_ref().map(|e| e.indices().to_vec()),
        ..DatasetOptions::default()
    };
    let dataset = Dataset::open_with(&study.dataset, &options)?;
    check_files_present(&dataset)?;
    let source = Source { bytes_per_frame: source_bytes_per_frame(&dataset)?, dataset: &dataset };
    // And the output: no earlier study unless resuming, room for what is left to write.
    let results_path = out.join(RESULTS_FILE);
    let earlier = read_results(&results_path)?;
    check_earlier(study, &out, &earlier)?;
    let left = |done: &[CandidateResult]| -> Vec<&Candidate> {
        candidates.iter().filter(|c| !done.iter().any(|r| r.name == c.name())).collect()
    };
    if !left(&earlier).is_empty() {
        check_free_space(&dataset, &out, &left(&earlier))?;
    }
    std::fs::create_dir_all(&out).map_err(|e| DatasetError::io(&out, e))?;
    let _alone = OutputLock::exclusive(&out)?;
    let (store, mut results) = JsonlStore::open::<CandidateResult>(&results_path)?;
    std::fs::copy(&study.config_path, out.join(CONFIG_FILE))
        .map_err(|e| DatasetError::io(&study.config_path, e))?;
    let todo = left(&results);
    let mut probe = loss_probe(study, todo.len(), events);
    let base = &study.config.base;
    let base_root = read_root(&out, base);
    for (n, candidate) in todo.iter().enumerate() {
        let name = candidate.name();
        let label = candidate.label(base);
        let root = candidate_root(&out, candidate);
        let encoded_path = out.join(ENCODED_DIR).join(format!("{name}.json"));
        let said =
            |what: &str| format!("[{}/{}] {label}: {what} {}", n + 1, todo.len(), root.display());
        let encoded = match reuse(&root, &encoded_path) {
            Some(encoded) => {
                events.said(&said("reusing"));
                encoded.report(&root)
            }
            None => {
                events.said(&said("writing"));
                write_candidate(&dataset, candidate, &root, &encoded_path)?
            }
        };
        let read = read_root(&out, candidate);
        if let Location::Url(_) = &candidate.location {
            events.said(&format!(
                "[{}/{}] {label}: placing at {}",
                n + 1,
                todo.len(),
                read.display()
            ));
            place_copy(&root, &read)?;
        }
        events.said(&format!("[{}/{}] {label}: measuring", n + 1, todo.len()));
        let against = (*candidate != base).then_some(base_root.as_path());
        let measure = &study.config.measure;
        let roots = (read.as_path(), root.as_path(), against);
        let mut result = measure_candidate(&source, candidate, label, roots, &encoded, measure)
            .map_err(|error| LayoutError::Measure { candidate: name.clone(), error })?;
        result.loss = probe.as_mut().map(|probe| match probe {
            Ok(probe) => probe.change(&read, true),
            Err(why) => LossFigure::Unmeasured(why.clone()),
        });
        store.append(&result)?;
        results.push(result);
    }
    Ok(results)
}

/// The loss column's probe for `todo` candidates (None without a loss column or candidates),
/// or why it cannot be had: said once, and each candidate's loss says it too.
fn loss_probe(
    study: &LayoutStudy,
    todo: usize,
    events: &mut dyn Events,
) -> Option<Result<LossProbe, String>> {
    let loss = &study.config.loss;
    let batches = loss.batches(study.config.measure.window);
    if batches == 0 || todo == 0 {
        return None;
    }
    events.said(&format!(
        "loss: the diffusion policy at learning rate 0 over {batches} batches of the source"
    ));
    let probe = LossProbe::new(&study.dataset, study.episodes.clone(), &study.config.measure, loss)
        .map_err(|e| format!("the step cannot run at learning rate 0: {e}"));
    if let Err(why) = &probe {
        events.said(&format!("loss: not measured: {why}"));
    }
    Some(probe)
}

/// Refuses an output holding an earlier study unless resuming, and a resumed one whose kept
/// config measured its candidates otherwise: a resumed study measures alike.
fn check_earlier(
    study: &LayoutStudy,
    out: &Path,
    earlier: &[CandidateResult],
) -> Result<(), LayoutError> {
    if !study.resume && (!earlier.is_empty() || out.join("candidates").exists()) {
        return Err(refused(
            out,
            "holds an earlier study; pass --resume to go on with it, or choose another --out",
        ));
    }
    // Its candidates were measured as its kept config says: a resumed study measures alike.
    let kept = out.join(CONFIG_FILE);
    if !earlier.is_empty() && kept.is_file() {
        let before = LayoutConfig::load(&kept).map_err(|e| refused(&e.path, e.what))?;
        let now = &study.config;
        let differs =
            [("measure", before.measure != now.measure), ("loss", before.loss != now.loss)]
                .into_iter()
                .find_map(|(section, differs)| differs.then_some(section));
        if let Some(section) = differs {
            return Err(refused(
                &kept,
                format!(
                    "its [{section}] differs from {}'s: the earlier candidates were measured \
                     with those settings; resume with the same [{section}], or choose another \
                     --out",
                    study.config_path.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Writes `candidate` from `dataset` at `root` (what an interrupted write left cleared first),
/// keeping what it cost at `encoded_path`.
fn write_candidate(
    dataset: &Dataset,
    candidate: &Candidate,
    root: &Path,
    encoded_path: &Path,
) -> Result<TranscodeReport, LayoutError> {
    clear_partial(root)?;
    let report = transcode(dataset, root, &candidate.transcode_options())?;
    let encoded = Encoded {
        episodes: report.episodes,
        frames: report.frames,
        camera_frames: report.camera_frames,
        frame_bytes: report.frame_bytes,
        encode_cpu_s: report.encode_cpu.as_secs_f64(),
    };
    write_json_atomically(encoded_path, &encoded)?;
    Ok(report)
}

/// The results in `path` (none when it does not exist); a torn last line of an interrupted
/// run is left out, any other line that is not a result is refused, naming it ([`jsonl`]'s
/// rule, as for a sweep).
///
/// [`jsonl`]: crate::bench::store::jsonl
pub fn read_results(path: &Path) -> Result<Vec<CandidateResult>, LayoutError> {
    Ok(JsonlStore::open_read_only(path)?)
}

impl From<JsonlError> for LayoutError {
    fn from(e: JsonlError) -> Self {
        match e {
            JsonlError::Io { path, source } => DatasetError::io(path, source).into(),
            JsonlError::Line { path, line, what } => refused(
                &path,
                format!("line {line}: not a layout result ({what}); remove it to resume"),
            ),
        }
    }
}

fn write_json_atomically(path: &Path, value: &impl Serialize) -> Result<(), LayoutError> {
    let dir = path.parent().expect("a file in a directory");
    std::fs::create_dir_all(dir).map_err(|e| DatasetError::io(dir, e))?;
    let text = serde_json::to_string_pretty(value).expect("serialises");
    write_whole(path, text.as_bytes()).map_err(|e| DatasetError::io(path, e))?;
    Ok(())
}

/// A complete candidate dataset and what writing it cost, when both are there.
fn reuse(root: &Path, encoded: &Path) -> Option<Encoded> {
    if !root.join("meta/info.json").is_file() {
        return None;
    }
    serde_json::from_str(&std::fs::read_to_string(encoded).ok()?).ok()
}

/// Removes a candidate dataset at `root` whose cost was not recorded (a run killed between
/// writing it and recording what it cost). What a run killed while writing it left beside it
/// (its temporary sibling, its writer's lock file) is [`transcode`]'s to clear, under that lock.
fn clear_partial(root: &Path) -> Result<(), LayoutError> {
    if root.exists() {
        std::fs::remove_dir_all(root).map_err(|e| DatasetError::io(root, e))?;
    }
    Ok(())
}

/// Estimates what the candidates will take, from the first episode, and refuses when a
/// filesystem (the study's, `/dev/shm`) has less free space than that.
fn check_free_space(dataset: &Dataset, out: &Path, todo: &[&Candidate]) -> Result<(), LayoutError> {
    let first = dataset.episodes().next().expect("a dataset has episodes");
    let total_frames = dataset.num_frames() as f64;
    let keys: Vec<String> = dataset
        .info()
        .features
        .iter()
        .filter(|f| f.image.is_some())
        .map(|f| f.name.clone())
        .collect();
    let mut need = [0.0f64; 2];
    for candidate in todo {
        let resolution = candidate.transcode_options().resolution;
        let mut reader = FrameReader::new(dataset, resolution)?;
        let mut chw = Vec::new();
        let mut per_frame = 0.0;
        for key in &keys {
            reader.read_chw(key, first.from + first.length / 2, &mut chw)?;
            let raw = chw.len() as f64;
            per_frame += match candidate.storage {
                Storage::Png => {
                    let (height, width) = frame_size(dataset, key, resolution);
                    png_bytes(&packed(&chw), height, width).len() as f64
                }
                // Generous for video: a tenth of the raw frame (AV1 at CRF 30 stores about a
                // hundredth, H.264 at CRF 0 about a half).
                Storage::Video => raw / 10.0,
                Storage::Raw => raw,
            };
        }
        let slot = usize::from(candidate.location == Location::Shm);
        need[slot] += per_frame * total_frames;
    }
    for (slot, path) in [(0, out.to_path_buf()), (1, PathBuf::from("/dev/shm"))] {
        if need[slot] == 0.0 {
            continue;
        }
        let free = crate::dataset::stage::available_bytes(&path)?;
        if need[slot] > free as f64 {
            return Err(refused(&path, shortfall(need[slot] as u64, free, first.index)));
        }
    }
    Ok(())
}

/// What the free-space check says when `need` bytes (estimated from episode `episode`) exceed
/// the `free` ones: each in a unit that shows it (a full /dev/shm has kB, not 0.0 GB, free).
fn shortfall(need: u64, free: u64, episode: impl std::fmt::Display) -> String {
    format!(
        "the candidates need about {} (estimated from episode {episode}), {} is free; free \
         space, choose fewer candidates or pass --episodes",
        Bytes::of(need),
        Bytes::of(free)
    )
}

fn frame_size(dataset: &Dataset, key: &str, resolution: Option<(u32, u32)>) -> (u32, u32) {
    resolution.unwrap_or_else(|| {
        let feature = dataset.info().features.iter().find(|f| f.name == key).expect("a key");
        let shape = feature.image.as_ref().expect("a picture");
        (shape.height, shape.width)
    })
}

#[cfg(test)]
mod tests {
    use super::shortfall;

    #[test]
    fn a_shortfall_shows_both_figures_in_units_that_tell_them_apart() {
        // A full /dev/shm: 40 kB free against 3.2 MB needed (it said "0.0 GB … 0.0 GB").
        let text = shortfall(3_200_000, 40_000, 1);
        assert!(
            text.contains("need about 3.2 MB (estimated from episode 1), 40.0 kB is free"),
            "{text}"
        );
        assert!(
            shortfall(12_000_000_000, 999, 0).contains("12.0 GB (estimated from episode 0), 999 B")
        );
    }
}
