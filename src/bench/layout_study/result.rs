//! What a layout study keeps of one candidate (`layout.jsonl`, a line each): its size, what
//! encoding it cost, the loader's decode cost and throughput (warm and cold, against the base
//! where it was interleaved with it), its first batch and its frames' quality. The ranking and
//! the report read it; [`assess`](super::assess) measures it.

use serde::{Deserialize, Serialize};

use super::candidate::Candidate;
use crate::dataset::video::access::FilesLayout;
use crate::dataset::video::quality::Quality;
use crate::measure::change::{interval, Change};
use crate::measure::loader_run::RunFigures;
use crate::measure::stats::{mean_and_sd, median, median_of};
use crate::measure::system::SystemInfo;

/// Throughput figures of repeated loader runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoaderFigures {
    /// Median samples/s over the runs.
    pub samples_per_s: f64,
    /// Its 95 % bootstrap interval (None with one run).
    pub samples_per_s_interval: Option<(f64, f64)>,
    /// Median CPU ms per sample.
    pub cpu_ms_per_sample: f64,
    /// Every run's figures.
    pub runs: Vec<RunFigures>,
}

impl LoaderFigures {
    pub(super) fn of(runs: Vec<RunFigures>, seed: u64) -> Self {
        let rates: Vec<f64> = runs.iter().map(|r| r.samples_per_s).collect();
        let interval = (rates.len() > 1).then(|| interval(&rates, seed, median_of)).flatten();
        Self {
            samples_per_s: median(rates.iter().copied()),
            samples_per_s_interval: interval,
            cpu_ms_per_sample: median(runs.iter().map(|r| r.cpu_ms_per_sample)),
            runs,
        }
    }
}

/// A candidate against the base, their runs interleaved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VsBase {
    /// Change of samples/s (positive: faster than the base).
    pub samples_per_s: Change,
    /// Change of CPU ms per sample (positive: costs more).
    pub cpu_ms_per_sample: Change,
    /// The base's runs.
    pub base_runs: Vec<RunFigures>,
}

impl VsBase {
    pub(super) fn of(base: &[RunFigures], candidate: &[RunFigures], seed: u64) -> Option<Self> {
        let values = |runs: &[RunFigures], f: fn(&RunFigures) -> f64| -> Vec<f64> {
            runs.iter().map(f).collect()
        };
        let rate = |r: &RunFigures| r.samples_per_s;
        let cpu = |r: &RunFigures| r.cpu_ms_per_sample;
        Some(Self {
            samples_per_s: Change::of(&values(base, rate), &values(candidate, rate), seed)?,
            cpu_ms_per_sample: Change::of(&values(base, cpu), &values(candidate, cpu), seed)?,
            base_runs: base.to_vec(),
        })
    }
}

/// The loader's cost under random access with one worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeCost {
    /// CPU ms per sample of the whole loader.
    pub cpu_ms_per_sample: f64,
    /// Video frames out of the codec per sample, those decoded only to reach a wanted frame
    /// included (None without video).
    pub frames_decoded_per_sample: Option<f64>,
    /// CPU µs per decoded video frame (None without video).
    pub cpu_us_per_decoded_frame: Option<f64>,
}

/// The step's loss on the candidate's batches against the source's: the diffusion policy at
/// learning rate 0 with its random numbers fixed, so that only the frames differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossFigure {
    /// Each step's loss, from the source's batches and from the candidate's, in order.
    Measured {
        /// On the source's batches.
        source: Vec<f64>,
        /// On the candidate's, the same samples.
        candidate: Vec<f64>,
        /// On the source's with every camera frame mid-grey: how far images move this
        /// policy's loss at all, the scale a candidate's change is read against.
        blind: Vec<f64>,
    },
    /// Why it could not be measured.
    Unmeasured(String),
}

impl LossFigure {
    /// |Δloss| / loss of each step (empty where unmeasured).
    pub fn changes(&self) -> Vec<f64> {
        match self {
            Self::Measured { source, candidate, .. } => relative_changes(source, candidate),
            Self::Unmeasured(_) => Vec::new(),
        }
    }

    /// The mean and the largest change over the steps; None where unmeasured.
    pub fn mean_and_max(&self) -> Option<(f64, f64)> {
        mean_and_max(&self.changes())
    }

    /// The mean change with every camera frame mid-grey: the most images move this policy's
    /// loss (a policy that learnt to read its cameras moves far; a random or state-led one
    /// hardly does, and then no candidate's change says much). None where unmeasured.
    pub fn blind_change(&self) -> Option<f64> {
        match self {
            Self::Measured { source, blind, .. } => {
                mean_and_max(&relative_changes(source, blind)).map(|(mean, _)| mean)
            }
            Self::Unmeasured(_) => None,
        }
    }

    /// The spread of the source's loss over the steps (its standard deviation over its mean):
    /// how much the loss moves from batch to batch, the scale a change is read against.
    pub fn source_spread(&self) -> Option<f64> {
        match self {
            Self::Measured { source, .. } if source.len() > 1 => {
                mean_and_sd(source).map(|(mean, sd)| sd / mean.abs())
            }
            _ => None,
        }
    }
}

/// |b − a| / |a| per pair; exactly 0 where they are equal.
fn relative_changes(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter().zip(b).map(|(a, b)| if a == b { 0.0 } else { (b - a).abs() / a.abs() }).collect()
}

/// The mean and the largest of `values`; None when empty.
fn mean_and_max(values: &[f64]) -> Option<(f64, f64)> {
    (!values.is_empty()).then(|| {
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        (mean, values.iter().copied().fold(0.0, f64::max))
    })
}

/// Everything measured of one candidate: a line of `layout.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateResult {
    /// Its name (directory and key).
    pub name: String,
    /// How it differs from the base (`gop=10`), or `base`.
    pub label: String,
    /// Its settings.
    pub candidate: Candidate,
    /// Episodes and frames per camera.
    pub episodes: usize,
    /// Frames per camera.
    pub frames: usize,
    /// Camera (or image) frames a sample of the window holds, over every camera.
    pub camera_frames_per_sample: usize,
    /// Bytes of stored frames per camera frame.
    pub bytes_per_frame: f64,
    /// The source's, on the same episodes.
    pub source_bytes_per_frame: f64,
    /// The reference frames compared, at the candidate's size, as PNG files.
    pub png_bytes_per_frame: f64,
    /// CPU ms to decode one of those PNG files (LeRobot's image loading).
    pub png_decode_ms_per_frame: f64,
    /// CPU ms per camera frame encoded (every encoder thread).
    pub encode_cpu_ms_per_frame: f64,
    /// Random access with one worker.
    pub decode: DecodeCost,
    /// Throughput at the configured workers, warm page cache.
    pub loader: LoaderFigures,
    /// Against the base candidate measured in turn with it (None for the base itself).
    #[serde(default)]
    pub vs_base: Option<VsBase>,
    /// The same with the candidate's files evicted from the page cache before each run (None
    /// in `/dev/shm`, which is memory).
    pub cold_loader: Option<LoaderFigures>,
    /// From opening the dataset to the first batch, ms (files evicted first where they can be).
    pub first_batch_ms: f64,
    /// Frames against the reference.
    pub quality: Quality,
    /// For a resized candidate: the reference resized and scaled back to the source's size,
    /// against the reference: what the resolution alone loses.
    pub scaling: Option<Quality>,
    /// Its video files' layout for random access (None without video files, or in results
    /// written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesLayout>,
    /// The step's loss against the source's (None: the study had no loss column, or the
    /// result was written before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossFigure>,
    /// Where it was measured; None in results written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemInfo>,
    /// When it finished, seconds since the Unix epoch; None in results written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_unix_s: Option<u64>,
}

impl CandidateResult {
    /// Speed against the base candidate (×) with its 95 % interval, from runs interleaved with
    /// the base's; the base itself is 1 (its interval its own runs' spread). None for a result
    /// measured without the base (a study written before this was measured).
    pub fn speed_vs_base(&self) -> Option<(f64, f64, f64)> {
        let ratio = |pct: f64| 1.0 + pct / 100.0;
        match &self.vs_base {
            Some(v) => {
                let c = v.samples_per_s;
                Some((ratio(c.percent), ratio(c.low), ratio(c.high)))
            }
            None if self.label == "base" => {
                let median = self.loader.samples_per_s;
                let (low, high) = self.loader.samples_per_s_interval.unwrap_or((median, median));
                Some((1.0, low / median, high / median))
            }
            None => None,
        }
    }

    /// Bytes per frame over the source's.
    pub fn bytes_ratio(&self) -> f64 {
        self.bytes_per_frame / self.source_bytes_per_frame
    }

    /// Bytes per frame over PNG's (LeRobot's size ratio).
    pub fn png_ratio(&self) -> f64 {
        self.bytes_per_frame / self.png_bytes_per_frame
    }

    /// CPU per sample at one worker over loading the same frames from PNG files (LeRobot's
    /// load-time ratio).
    pub fn load_time_ratio(&self) -> f64 {
        let png = self.png_decode_ms_per_frame * self.camera_frames_per_sample as f64;
        self.decode.cpu_ms_per_sample / png
    }
}
