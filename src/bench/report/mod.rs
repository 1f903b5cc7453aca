//! The report of a sweep (issue #5), re-rendered from `results.jsonl` alone: it never measures.
//!
//! Analysing and writing are separate stages, as in criterion and hyperfine: [`model`] is what a
//! report holds, [`render`] is the analysis: one [`Row`] per cell (repeats aggregated by their median), per group of cells the
//! [`Recommendation`] (the knee of workers, the prefetch depth past which nothing improves)
//! and the advice on its loader ([`Diagnosis`], the "Loader doctor"). Each export format is
//! its own small module that only lays out that one [`Report`]: [`terminal`], [`markdown`], [`csv`] and [`plots`] (SVG).
//! [`write_report`] writes the files into the sweep's directory; [`report_dir`] re-renders a
//! directory from its `results.jsonl`. [`table`] is the one table model that every report's
//! Markdown, CSV and aligned text lay out (the guard's and the layout study's too).
//!
//! This file only names the folder's modules and what it offers outside: no module of the folder
//! imports it, so that none imports one that imports it.

mod advice;
mod analysis;
pub mod cache_fit;
pub mod compared;
pub mod csv;
mod epochs;
mod files;
pub mod loaders;
pub mod markdown;
pub mod model;
pub mod page;
pub mod phase_text;
pub mod plots;
mod recommendation;
pub mod roots;
pub mod table;
pub mod terminal;

pub use super::sweep::cell::{Knob, KnobSet};
pub use super::sweep::results::RESULTS_FILE;
/// The parts of the loader's CPU a report shows: the timing floor's, below both the
/// measurement and the report.
pub use crate::timing::stage::Stage;
pub use analysis::render;
pub use compared::{LoaderComparison, RootComparison};
pub use files::{report_dir, write_report, ReportError, ReportFiles};
pub use model::{
    beside_the_wait, Diagnosis, Group, NewerFigures, Planned, PlotGroup, Recommendation, Report,
    Row, RowRanks, StageCost, CSV_FILE, HEATMAP_PLOT_STEM, KNEE_TOLERANCE_PCT, MARKDOWN_FILE,
    MIN_STEPS_FOR_INTERVAL, PREFETCH_TOLERANCE_PCT, TRAIN_PLOT_STEM,
};
pub use recommendation::{knee, shallowest_prefetch, train_change, Knee};
