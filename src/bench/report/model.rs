//! The report's model: one [`Row`] per cell (repeats aggregated by their median), per group the
//! [`Recommendation`] and the [`Diagnosis`] of its loader, the plot groups, and the
//! [`Report`] that holds them and lays out its cell table; what every format of the report
//! reads. [`render`](super::render) makes it from results.

use super::compared::{LoaderComparison, RootComparison};
use super::table::{Column, Table};
use crate::bench::format::rate;
use crate::bench::sweep::cell::{Cell, Knob};
use crate::loader::knobs::LoaderBackend;
use crate::loader::lerobot::Startup;
use crate::measure::phase::{CacheFigures, DecodeLimit, FramesSize, RemoteBound, SampleSteps};
use crate::measure::system::SystemInfo;
use crate::measure::verdict::Verdict;
use crate::timing::stage::Stage;

/// Seed of the report's bootstrap intervals (fixed: one results file, one report).
pub(super) const INTERVAL_SEED: u64 = 0x6b6e;

/// Samples/s of train steps of `batch` samples (on average: an epoch's last batch may be
/// short) whose iterations took the given ms.
pub(super) fn train_rate(batch: f64) -> impl Fn(&[f64]) -> f64 {
    move |iteration_ms: &[f64]| {
        1e3 * batch * iteration_ms.len() as f64 / iteration_ms.iter().sum::<f64>()
    }
}

/// The knee: the fewest workers whose train throughput is not worse than the group's best
/// beyond this noise band, percent (by the interval of the change where steps were kept, else
/// by the medians).
pub const KNEE_TOLERANCE_PCT: f64 = 5.0;
/// Steps a train throughput needs for an interval, and for the knee to be judged by one.
pub const MIN_STEPS_FOR_INTERVAL: usize = 3;
/// At the recommended workers, the smallest prefetch within this share of the best depth is
/// recommended: deeper prefetch improves nothing, percent.
pub const PREFETCH_TOLERANCE_PCT: f64 = 3.0;

/// The report as Markdown (for PRs and CI summaries).
pub const MARKDOWN_FILE: &str = "report.md";
/// One row per cell, repeats aggregated.
pub const CSV_FILE: &str = "results.csv";
/// Train samples/s against workers (stem; `.svg`, with a suffix per plot group when several).
pub const TRAIN_PLOT_STEM: &str = "train_vs_workers";
/// Input-bound % over workers × batch (stem, as [`TRAIN_PLOT_STEM`]).
pub const HEATMAP_PLOT_STEM: &str = "input_bound_heatmap";

/// One stage's CPU per sample and its share of the loader's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageCost {
    /// Which stage.
    pub stage: Stage,
    /// CPU milliseconds per sample (median over repeats).
    pub cpu_ms_per_sample: f64,
    /// Percent of the loader's CPU per sample (the stages' sum).
    pub percent: f64,
}

/// One cell of the sweep, its repeats aggregated: every figure is the median over them.
#[derive(Debug, Clone)]
pub struct Row {
    /// The knobs (`repeat` is 0: the row stands for every repeat).
    pub knobs: Cell,
    /// Repeats aggregated.
    pub repeats: usize,
    /// The loader alone: its ceiling, samples/s; None where no repeat measured the loader
    /// alone (a tune's verifying configurations).
    pub loader_samples_per_s: Option<f64>,
    /// The loader's CPU per sample, ms; None where the loader alone was not measured.
    pub loader_cpu_ms_per_sample: Option<f64>,
    /// The loader phase's peak resident memory, bytes.
    pub loader_peak_rss_bytes: Option<u64>,
    /// The PSS the train phase's process tree held (the median over its repeats), bytes;
    /// None where results before it did not say.
    pub train_pss_bytes: Option<u64>,
    /// Seconds from the train phase's first request to its first batch (the median over its
    /// repeats): the workers' start-up.
    pub train_first_batch_s: Option<f64>,
    /// LeRobot's plain loader with workers: its start taken apart, as its first run's train
    /// phase says it.
    pub train_startup: Option<Startup>,
    /// The train phase's accelerator utilisation (MLPerf Storage's), the median over its
    /// repeats, percent; None where results before it did not say.
    pub au_pct: Option<f64>,
    /// The train phase's mean ms a step not computed (wait and copy), the median over its
    /// repeats; None where results before it did not say.
    pub wait_ms_per_step: Option<f64>,
    /// Where the train phase measured several ranks at once: how many, the slowest and the
    /// spread (the first repeat's).
    pub ranks: Option<RowRanks>,
    /// The decode-only limit (medians of its figures).
    pub decode_limit: Option<DecodeLimit>,
    /// The loader's stages, largest first.
    pub stages: Vec<StageCost>,
    /// Frames and the CPU of each step from packet to batch, per sample (medians); None
    /// without cameras, for LeRobot's loader and in results written before the split was
    /// timed on its own.
    pub steps: Option<SampleSteps>,
    /// What a decoded-frame cache of every frame would take (the first repeat's figure).
    pub frames: Option<FramesSize>,
    /// What the row's decoded-frame cache did (the first repeat's figures); None without one.
    pub cache: Option<CacheFigures>,
    /// The model alone: its ceiling, samples/s.
    pub model_samples_per_s: f64,
    /// The model's median step, ms.
    pub model_step_ms: f64,
    /// The loader feeding the model, samples/s.
    pub train_samples_per_s: f64,
    /// Each measured train step's whole iteration (wait and step), ms, over every repeat;
    /// empty in results written without per-step samples.
    pub train_iteration_ms: Vec<f64>,
    /// 95 % bootstrap interval of the train samples/s over those steps, when there are
    /// [`MIN_STEPS_FOR_INTERVAL`] or more.
    pub train_interval: Option<(f64, f64)>,
    /// Median wait for the next batch per step, ms.
    pub train_wait_ms: f64,
    /// Median host→device copy per step, ms.
    pub train_h2d_ms: f64,
    /// Median compute per step, ms.
    pub train_compute_ms: f64,
    /// The model's whole step (copy and compute, the wait left out) as the train phase took it,
    /// with the loader running beside it: the median over every repeat's steps, ms (the
    /// copy's and the compute's medians summed where the results kept no steps).
    pub train_step_ms: f64,
    /// What held its loader where it read a URL root (the train phase's, else the loader
    /// phase's, of its first repeat that says).
    pub remote: Option<RemoteBound>,
    /// Input-bound share of the step, median over steps, percent.
    pub input_bound_pct: f64,
    /// Its 95th percentile over steps, percent.
    pub input_bound_p95_pct: f64,
    /// The share of each iteration spent waiting for the batch alone (the host→device copy
    /// left out: more workers or a deeper prefetch shorten the wait, never the copy), median
    /// and 95th percentile over every repeat's steps, percent; the input-bound share where
    /// the results kept no steps.
    pub wait_pct: (f64, f64),
    /// The mean of that share over the steps, percent: what hiding every wait could gain.
    pub wait_mean_pct: f64,
    /// The verdict on [`Row::input_bound_pct`].
    pub verdict: Verdict,
    /// CPU cores the run could use.
    pub cores: usize,
    /// Index of its group in [`Report::groups`].
    pub group: usize,
    /// The recommended row of its group.
    pub recommended: bool,
}

impl Row {
    /// The row of `workers` × `prefetch` among `rows`, if measured.
    pub fn find(rows: &[Row], workers: usize, prefetch: usize) -> Option<&Row> {
        rows.iter().find(|r| r.knobs.knobs.workers == workers && r.knobs.knobs.prefetch == prefetch)
    }

    /// Whether its loader kept the step fed within `target_pct`: hiding every wait for a batch
    /// (the mean share of the step waiting) would gain that much at most. The mean, not the
    /// median: a queue that hands most batches over at once and makes every few steps wait long
    /// has a small median.
    pub fn fed_within(&self, target_pct: f64) -> bool {
        self.wait_mean_pct <= target_pct
    }

    /// The stage taking the most CPU, if the loader recorded any.
    pub fn dominant_stage(&self) -> Option<&StageCost> {
        self.stages.first().filter(|s| s.cpu_ms_per_sample > 0.0)
    }
}

/// The recommended workers and prefetch of a group.
#[derive(Debug, Clone)]
pub struct Recommendation {
    /// The recommended row (index into [`Report::rows`]).
    pub row: usize,
    /// The knee: the fewest workers not worse than the best beyond [`KNEE_TOLERANCE_PCT`].
    pub workers: usize,
    /// The smallest prefetch within [`PREFETCH_TOLERANCE_PCT`] of the best at those workers.
    pub prefetch: usize,
    /// The row with the best train throughput.
    pub best_row: usize,
    /// The recommendation in one sentence or two.
    pub text: String,
}

/// What the advice (the report's "Loader doctor") sees in a group's recommended row, and what
/// it advises.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    /// The row diagnosed (index into [`Report::rows`]).
    pub row: usize,
    /// The verdict and the phases' figures.
    pub headline: String,
    /// The loader's CPU per sample by stage.
    pub breakdown: String,
    /// The stage taking the most CPU.
    pub dominant: Option<Stage>,
    /// Concrete advice, most important first.
    pub advice: Vec<String>,
}

/// Cells sharing every knob but workers and prefetch: a recommendation is made per group.
#[derive(Debug, Clone)]
pub struct Group {
    /// The knobs that tell this group from the others (empty when it is alone).
    pub label: String,
    /// Its rows (indices into [`Report::rows`]).
    pub rows: Vec<usize>,
    /// None only when no row has a finite train throughput.
    pub recommendation: Option<Recommendation>,
    /// The advice's look at the recommended row.
    pub diagnosis: Option<Diagnosis>,
}

/// Cells sharing every knob but workers, prefetch and batch: one pair of plots each.
#[derive(Debug, Clone)]
pub struct PlotGroup {
    /// The knobs that tell this plot from the others (empty when it is alone).
    pub label: String,
    /// Its rows (indices into [`Report::rows`]).
    pub rows: Vec<usize>,
    /// File name of its train-against-workers plot.
    pub train_file: String,
    /// File name of its input-bound heatmap.
    pub heatmap_file: String,
}

/// The analysed sweep: everything the writers lay out.
#[derive(Debug, Clone)]
pub struct Report {
    /// The machine of the first result.
    pub system: Option<SystemInfo>,
    /// Results read (repeats counted apart).
    pub results: usize,
    /// When the first and the last of them finished, seconds since the Unix epoch.
    pub finished_unix_s: Option<(u64, u64)>,
    /// One per cell, sorted by group, then workers and prefetch.
    pub rows: Vec<Row>,
    /// Knobs (other than workers, prefetch and batch) with one value in every row.
    pub fixed: Vec<(Knob, String)>,
    /// Knobs (other than workers, prefetch and batch) with several values.
    pub varying: Vec<Knob>,
    /// Recommendation groups.
    pub groups: Vec<Group>,
    /// Plot groups.
    pub plots: Vec<PlotGroup>,
    /// Both loaders side by side, where cells were measured with both.
    pub loaders: Option<LoaderComparison>,
    /// Several roots of one dataset side by side (`[dataset] also`).
    pub roots: Option<RootComparison>,
    /// How many of the cells its sweep.toml plans the results hold, where a directory's was
    /// read ([`report_dir`](super::report_dir)): fewer where the sweep was cut short.
    pub planned: Option<Planned>,
}

/// The cells a sweep planned, against those its results hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// Cells planned (repeats counted apart).
    pub cells: usize,
    /// Of them, those measured.
    pub measured: usize,
}

/// Which figures added after the first results a report's rows carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewerFigures {
    /// The accelerator utilisation.
    pub au: bool,
    /// The memory held and the start-up (PSS, first batch).
    pub memory: bool,
    /// Ranks measured at once.
    pub ranks: bool,
}

/// A row's ranks measured at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowRanks {
    /// Ranks measured.
    pub ranks: usize,
    /// The rank that waited most for its data.
    pub slowest_rank: usize,
    /// How much longer it waited than the fastest, percent of its step.
    pub spread_pct: f64,
}

impl Report {
    /// The cell table (shared by the terminal and Markdown writers). The first column marks
    /// the recommended rows with `*`.
    pub(crate) fn table(&self) -> Table {
        let mut columns = vec![Column::text("")];
        columns.extend(["workers", "prefetch", "batch"].map(Column::number));
        columns.extend(self.varying.iter().map(|k| Column::text(k.name())));
        let with_repeats = self.rows.iter().any(|r| r.repeats > 1);
        if with_repeats {
            columns.push(Column::number("repeats"));
        }
        for header in ["loader/s", "model/s", "train/s", "input-bound %", "p95 %"] {
            columns.push(Column::number(header));
        }
        let newer = self.newer_figures();
        let optional = [
            (newer.au, Column::number("AU %")),
            (newer.memory, Column::number("PSS MB")),
            (newer.ranks, Column::text("ranks")),
        ];
        columns.extend(optional.into_iter().filter_map(|(shown, column)| shown.then_some(column)));
        columns.push(Column::text("verdict"));
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let mut line = vec![
                    if r.recommended { "*".into() } else { String::new() },
                    r.knobs.knobs.workers.to_string(),
                    r.knobs.knobs.prefetch.to_string(),
                    r.knobs.knobs.batch_size.to_string(),
                ];
                line.extend(self.varying.iter().map(|k| k.value(&r.knobs)));
                if with_repeats {
                    line.push(r.repeats.to_string());
                }
                line.extend([
                    r.loader_samples_per_s.map_or("-".into(), rate),
                    rate(r.model_samples_per_s),
                    rate(r.train_samples_per_s),
                    format!("{:.1}", r.input_bound_pct),
                    format!("{:.1}", r.input_bound_p95_pct),
                ]);
                if newer.au {
                    line.push(r.au_pct.map_or("-".into(), |au| format!("{au:.1}")));
                }
                if newer.memory {
                    line.push(
                        r.train_pss_bytes.map_or("-".into(), |b| format!("{:.0}", b as f64 / 1e6)),
                    );
                }
                if newer.ranks {
                    line.push(r.ranks.map_or("-".into(), |k| {
                        format!("{} (slowest {}, +{:.1} %)", k.ranks, k.slowest_rank, k.spread_pct)
                    }));
                }
                line.push(r.verdict.to_string());
                line
            })
            .collect();
        Table { columns, rows }
    }

    /// Which figures results before them lack its rows have: a column and a legend only where
    /// a row has one, so that older results render as they did.
    pub fn newer_figures(&self) -> NewerFigures {
        let any = |f: fn(&Row) -> bool| self.rows.iter().any(f);
        NewerFigures {
            au: any(|r| r.au_pct.is_some()),
            memory: any(|r| r.train_pss_bytes.is_some() || r.train_first_batch_s.is_some()),
            ranks: any(|r| r.ranks.is_some()),
        }
    }

    /// The legend of the newer figures' columns shown, in `markup` (`*AU*` or `AU`), each with
    /// a leading "; ".
    pub(crate) fn newer_legend(&self, markup: fn(&str) -> String) -> String {
        let NewerFigures { au, memory: pss, ranks } = self.newer_figures();
        let mut legend = String::new();
        if au {
            legend.push_str(&format!(
                "; {}: the step's time over the wall time, the first step left out (MLPerf \
                 Storage's accelerator utilisation)",
                markup("AU")
            ));
        }
        if pss {
            legend.push_str(&format!(
                "; {}: the memory the train phase's processes held, shared pages once",
                markup("PSS")
            ));
        }
        if ranks {
            legend.push_str(&format!(
                "; {}: measured at once, the one that waited most and by how much more than the \
                 fastest",
                markup("ranks")
            ));
        }
        legend
    }

    /// `knob value, …` of the fixed knobs, or None when every knob varies.
    pub(crate) fn fixed_line(&self) -> Option<String> {
        (!self.fixed.is_empty()).then(|| {
            self.fixed
                .iter()
                .map(|(k, v)| format!("{} {v}", k.name()))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }

    /// The groups that have a recommendation, with their label.
    pub(crate) fn recommendations(&self) -> impl Iterator<Item = (&str, &Recommendation)> {
        self.groups.iter().filter_map(|g| g.recommendation.as_ref().map(|r| (g.label.as_str(), r)))
    }

    /// The groups that have a diagnosis, with their label.
    pub(crate) fn diagnoses(&self) -> impl Iterator<Item = (&str, &Diagnosis)> {
        self.groups.iter().filter_map(|g| g.diagnosis.as_ref().map(|d| (g.label.as_str(), d)))
    }

    /// How the recommendation is made, in one line: by intervals where the results kept their
    /// steps, else by medians.
    pub(crate) fn rule(&self) -> String {
        let of_group = if self.groups.len() > 1 { " of its group" } else { "" };
        let knee = if self.rows.iter().any(|r| r.train_interval.is_some()) {
            format!(
                "the fewest workers whose train samples/s are not below the best{of_group} beyond \
                 {KNEE_TOLERANCE_PCT:.0} % noise (by the 95 % interval of the change)"
            )
        } else {
            format!(
                "the smallest workers within {KNEE_TOLERANCE_PCT:.0} % of the best train \
                 samples/s{of_group}"
            )
        };
        format!(
            "{knee}, then the smallest prefetch within {PREFETCH_TOLERANCE_PCT:.0} % of the best \
             at those workers"
        )
    }
}

/// What a train step's input-bound share holds beside the wait for its batch, in words: the
/// batch's copy to the device, or in a lerobot-train run the main process's hand-over of it
/// (where the policy's pre-processor runs). No worker count or prefetch shortens it.
pub fn beside_the_wait(loader: LoaderBackend) -> &'static str {
    match loader {
        LoaderBackend::LerobotTrain | LoaderBackend::FeedbenchLerobotTrain => {
            "the main process's hand-over (the uint8 frames to float32 and the policy's \
             pre-processor)"
        }
        _ => "the batch's copy to the device",
    }
}

/// Rows partitioned by `knobs` (in row order), each part labelled by the knobs whose values
/// tell the parts apart (empty with a single part).
pub(super) fn partition(rows: &[Row], knobs: &[Knob]) -> Vec<(String, Vec<usize>)> {
    let key = |row: &Row| knobs.iter().map(|k| k.value(&row.knobs)).collect::<Vec<_>>();
    let mut parts: Vec<(Vec<String>, Vec<usize>)> = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let k = key(row);
        match parts.iter_mut().find(|(pk, _)| *pk == k) {
            Some((_, members)) => members.push(i),
            None => parts.push((k, vec![i])),
        }
    }
    let differs: Vec<bool> =
        (0..knobs.len()).map(|j| parts.iter().any(|(k, _)| k[j] != parts[0].0[j])).collect();
    parts
        .into_iter()
        .map(|(k, members)| {
            let label = knobs
                .iter()
                .zip(&k)
                .zip(&differs)
                .filter(|(_, &d)| d)
                .map(|((knob, value), _)| format!("{} {value}", knob.name()))
                .collect::<Vec<_>>()
                .join(", ");
            (label, members)
        })
        .collect()
}
