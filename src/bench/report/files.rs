//! Where a sweep's report goes: `report.md`, `results.csv`, the plots and the page written
//! into its directory, whole or not at all, from its results or re-rendered from
//! `results.jsonl` alone.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::analysis::render;
use super::model::{Planned, Report};
use super::terminal;
use crate::bench::export::{self, Csv, ExportError, Html, Markdown, Svg};
use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::config::{ConfigFile, SweepConfig};
use crate::bench::sweep::plan::plan;
use crate::bench::sweep::results::RESULTS_FILE;
use crate::bench::sweep::results::{read_results, CellResult, ResultsError, CONFIG_FILE};
use crate::bench::sweep::root_names;

/// Why a report could not be made, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// `results.jsonl` could not be read.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// There is nothing to report.
    #[error("{path}: no cell results to report")]
    Empty {
        /// The results file (or the directory given results).
        path: PathBuf,
    },
    /// A report file could not be rendered or written.
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// What [`write_report`] made.
#[derive(Debug, Clone)]
pub struct ReportFiles {
    /// The analysis.
    pub report: Report,
    /// The report as terminal text (what `feedbench report` prints).
    pub terminal: String,
    /// Every file written, `report.md` first.
    pub files: Vec<PathBuf>,
}

/// Analyses `results` and writes `report.md`, `results.csv`, the SVG plots and the page
/// (`report.html`) into `dir`
/// (which must exist), replacing earlier ones; returns the analysis and the terminal text.
pub fn write_report(dir: &Path, results: &[CellResult]) -> Result<ReportFiles, ReportError> {
    if results.is_empty() {
        return Err(ReportError::Empty { path: dir.to_path_buf() });
    }
    write_files(dir, render(results))
}

/// Writes the files of `report` into `dir`: Markdown, CSV, the SVG plots and the page.
fn write_files(dir: &Path, report: Report) -> Result<ReportFiles, ReportError> {
    let files = export::write(dir, &report, &[&Markdown, &Csv, &Svg, &Html])?;
    Ok(ReportFiles { terminal: terminal::render(&report), report, files })
}

/// Re-renders the report of a sweep directory from its `results.jsonl` alone, never measuring.
pub fn report_dir(dir: &Path) -> Result<ReportFiles, ReportError> {
    let path = dir.join(RESULTS_FILE);
    let results = read_results(&path)?;
    if results.is_empty() {
        return Err(ReportError::Empty { path });
    }
    let mut report = render(&results);
    report.planned = planned(dir, &results);
    write_files(dir, report)
}

/// The cells `dir`'s sweep.toml plans against those `results` hold, where it reads as a sweep's
/// config and plans on the results' dataset and device.
fn planned(dir: &Path, results: &[CellResult]) -> Option<Planned> {
    let config = SweepConfig::read_kept(&dir.join(CONFIG_FILE)).ok()?;
    let first = &results.first()?.cell;
    // Each root's cells (`[dataset] also`), named as the sweep named them.
    let names = match config.dataset.also.is_empty() {
        true => vec![first.dataset.clone()],
        false => {
            let first_root =
                config.dataset.path.clone().unwrap_or_else(|| PathBuf::from(&first.dataset));
            root_names(&[vec![first_root], config.dataset.also.clone()].concat())
        }
    };
    let done: HashSet<&Cell> = results.iter().map(|r| &r.cell).collect();
    let (mut cells, mut measured) = (0, 0);
    for name in names {
        let plan = plan(&config, &name, first.device.intended()).ok()?;
        cells += plan.cells.len();
        measured += plan.cells.iter().filter(|c| done.contains(c)).count();
    }
    Some(Planned { cells, measured })
}
