//! The guard's verdict laid out: as terminal text, as Markdown (for `$GITHUB_STEP_SUMMARY`),
//! and a record as github-action-benchmark's `customSmallerIsBetter` and
//! `customBiggerIsBetter` JSON, so that a team can chart a history of it.

use std::fmt::Write as _;

use serde::Serialize;

use super::history::text::{cell_line, text as history_text};
use super::history::verdict::HistoryVerdict;
use super::judge::{CellVerdict, FigureChange, GuardVerdict, Outcome};
use super::record::GuardRecord;
use crate::bench::export::{pretty_json, Exporter, Json, Output, RenderError};
use crate::bench::report::table::{Column, Table};
use crate::measure::loader_run::RunFigures;

/// How to save a new baseline or accept a history's new level, for the advice that says so:
/// the config, baseline and history paths.
pub struct UpdateCommand<'a> {
    /// The guard config's path.
    pub config: &'a str,
    /// The baseline's path.
    pub baseline: &'a str,
    /// The history's path, where the guard keeps one.
    pub history: Option<&'a str>,
}

impl UpdateCommand<'_> {
    fn line(&self) -> String {
        format!("feedbench guard --config {} --save-baseline {}", self.config, self.baseline)
    }

    /// The command that accepts the history's newest level as meant.
    pub fn accept(&self) -> String {
        let history = self.history.unwrap_or("");
        format!("feedbench guard --config {} --history {history} --accept", self.config)
    }
}

/// The verdict's closing line: what happened and what to do.
pub fn conclusion(verdict: &GuardVerdict, update: &UpdateCommand) -> String {
    let named = |outcome: Outcome| -> String {
        let cells: Vec<&str> = verdict
            .cells
            .iter()
            .filter(|c| c.outcome == outcome)
            .map(|c| c.cell.as_str())
            .collect();
        cells.join(", ")
    };
    let tolerance = verdict.tolerance;
    let starved: Vec<&str> = verdict
        .cells
        .iter()
        .filter(|c| c.au.is_some_and(|au| au.outcome == Outcome::Regression))
        .map(|c| c.cell.as_str())
        .collect();
    let worse: Vec<&str> = verdict
        .cells
        .iter()
        .filter(|c| c.outcome == Outcome::Regression && !starved.contains(&c.cell.as_str()))
        .map(|c| c.cell.as_str())
        .collect();
    match verdict.outcome {
        Outcome::Regression if worse.is_empty() && starved.is_empty() => format!(
            "within the {tolerance} tolerance of the baseline, but the history regressed: see \
             below (exit 1)"
        ),
        Outcome::Regression if worse.is_empty() => format!(
            "FAIL in {}: the step's accelerator utilisation below the cell's min_au: the loader \
             starves the step (exit 1)",
            starved.join(", ")
        ),
        Outcome::Regression => format!(
            "REGRESSION in {}: worse than the baseline beyond the {tolerance} tolerance, the whole \
             95 % interval past it (exit 1){}",
            named(Outcome::Regression),
            match starved.is_empty() {
                true => String::new(),
                false => format!("; AU below min_au in {}", starved.join(", ")),
            }
        ),
        Outcome::Undecided => format!(
            "undecided in {}: the interval straddles the {tolerance} tolerance; not a failure — \
             measure longer (run.repeats, run.batches) to decide",
            named(Outcome::Undecided)
        ),
        Outcome::Improvement => format!(
            "pass, and better than the baseline beyond the {tolerance} tolerance in {}: update \
             the baseline with `{}`",
            named(Outcome::Improvement),
            update.line()
        ),
        Outcome::Pass => format!("pass: every cell within the {tolerance} tolerance"),
    }
}

/// One row per figure: (cell, figure, change) for the tables.
fn rows(verdict: &GuardVerdict) -> Vec<(&CellVerdict, &'static str, &FigureChange)> {
    let mut rows = Vec::new();
    for cell in &verdict.cells {
        rows.push((cell, "CPU ms/sample", &cell.cpu_ms_per_sample));
        rows.push((cell, "samples/s", &cell.samples_per_s));
        if let Some(instructions) = &cell.instructions_per_sample {
            rows.push((cell, "instructions/sample", instructions));
        }
    }
    rows
}

/// A cell's accelerator utilisation, e.g. `AU 72.5 % (95 % CI 71.0 to 74.0 %), below its
/// min_au 90 %`; None where its runs fed no step.
fn au_line(cell: &CellVerdict) -> Option<String> {
    let au = cell.au?;
    let against = match au.min_pct {
        Some(min) if au.outcome == Outcome::Regression => format!(", below its min_au {min} %"),
        Some(min) => format!(", at least its min_au {min} %"),
        None => String::new(),
    };
    Some(format!(
        "{}: AU {:.1} % (95 % CI {:.1} to {:.1} %) feeding its step{against}",
        cell.cell, au.median_pct, au.low_pct, au.high_pct
    ))
}

/// The figure's verdict in a word.
fn word(figure: &FigureChange, smaller_is_better: bool) -> &'static str {
    match figure.outcome(smaller_is_better) {
        Outcome::Regression => "worse",
        Outcome::Improvement => "better",
        Outcome::Pass => "within",
        Outcome::Undecided => "undecided",
    }
}

/// The stages whose change is beyond the tolerance, e.g. `decode +22.1 %`.
fn moved_stages(cell: &CellVerdict, tolerance: f64) -> String {
    let moved: Vec<String> = cell
        .stages
        .iter()
        .filter_map(|s| s.change.filter(|c| c.percent.abs() > tolerance).map(|c| (s, c)))
        .map(|(s, c)| format!("{} {:+.1} %", s.stage, c.percent))
        .collect();
    moved.join(", ")
}

/// The machine's speed then and now, which the changes are relative to.
fn speed_line(verdict: &GuardVerdict) -> Option<String> {
    let r = verdict.reference?;
    Some(format!(
        "machine speed (a fixed reference decode, CPU ms): {} in the baseline, {} now ({:+.1} %); \
         the changes below are relative to it",
        number(r.baseline),
        number(r.now),
        r.change.percent
    ))
}

/// The verdict as terminal text.
pub fn text(verdict: &GuardVerdict, update: &UpdateCommand) -> String {
    let mut out = String::new();
    for warning in &verdict.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    if let Some(line) = speed_line(verdict) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "{:<16} {:<20} {:>12} {:>12} {:>8}  {:<20} verdict",
        "cell", "figure", "baseline", "now", "change", "95 % CI"
    );
    for (cell, name, figure) in rows(verdict) {
        let _ = writeln!(
            out,
            "{:<16} {:<20} {:>12} {:>12} {:>+7.1}%  {:<20} {}",
            cell.cell,
            name,
            number(figure.baseline),
            number(figure.now),
            figure.change.percent,
            format!("{:+.1} to {:+.1} %", figure.change.low, figure.change.high),
            word(figure, name != "samples/s")
        );
    }
    for cell in &verdict.cells {
        let moved = moved_stages(cell, verdict.tolerance.0);
        if !moved.is_empty() && cell.outcome != Outcome::Pass {
            let _ = writeln!(out, "{}: CPU per sample by stage: {moved}", cell.cell);
        }
    }
    for line in verdict.cells.iter().filter_map(au_line) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "{}", conclusion(verdict, update));
    if let Some(history) = &verdict.history {
        out.push_str(&history_text(history, &update.accept()));
    }
    out
}

/// The verdict as Markdown: a heading with the outcome, the table, the conclusion, and what
/// the history said where the guard keeps one.
pub fn markdown(verdict: &GuardVerdict, update: &UpdateCommand) -> String {
    let mut out = String::new();
    let headline = match verdict.outcome {
        Outcome::Regression => "❌ regression",
        Outcome::Undecided => "⚠️ undecided",
        Outcome::Improvement => "✅ pass (improved)",
        Outcome::Pass => "✅ pass",
    };
    let _ = writeln!(out, "### feedbench guard: {headline}\n");
    for warning in &verdict.warnings {
        let _ = writeln!(out, "> **warning:** {warning}\n");
    }
    if let Some(line) = speed_line(verdict) {
        let _ = writeln!(out, "{line}\n");
    }
    let mut columns = vec![Column::text("cell"), Column::text("figure")];
    columns.extend(["baseline", "now", "change"].map(Column::number));
    columns.extend(["95 % CI", "verdict"].map(Column::text));
    let rows = rows(verdict).into_iter().map(|(cell, name, figure)| {
        vec![
            cell.cell.clone(),
            name.into(),
            number(figure.baseline),
            number(figure.now),
            format!("{:+.1} %", figure.change.percent),
            format!("{:+.1} to {:+.1} %", figure.change.low, figure.change.high),
            word(figure, name != "samples/s").into(),
        ]
    });
    out.push_str(&Table { columns, rows: rows.collect() }.markdown());
    for line in verdict.cells.iter().filter_map(au_line) {
        let _ = writeln!(out, "\n{line}");
    }
    let _ = writeln!(out, "\n{}", conclusion(verdict, update));
    if let Some(history) = &verdict.history {
        let _ = write!(out, "\n{}", history_lines(history, update));
    }
    out
}

/// A guard run judged by its history alone, as Markdown: a heading with the outcome and what
/// the history said.
pub fn history_markdown(history: &HistoryVerdict, update: &UpdateCommand) -> String {
    let headline = match history.regression {
        true => "❌ regression by its history",
        false => "✅ pass by its history",
    };
    format!("### feedbench guard: {headline}\n\n{}", history_lines(history, update))
}

/// The history's verdict as Markdown lines, one paragraph each.
fn history_lines(history: &HistoryVerdict, update: &UpdateCommand) -> String {
    let text = history_text(history, &format!("`{}`", update.accept()));
    text.lines().map(|line| format!("{line}\n\n")).collect()
}

/// A figure with the digits it deserves.
fn number(value: f64) -> String {
    if value >= 1000.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.4}")
    }
}

/// One entry of github-action-benchmark's custom JSON.
#[derive(Debug, Serialize)]
pub struct ActionBenchmarkEntry {
    /// `cell figure`.
    pub name: String,
    /// The unit.
    pub unit: &'static str,
    /// The median of the runs.
    pub value: f64,
    /// `± standard deviation` of the runs.
    pub range: String,
    /// The runs and the machine.
    pub extra: String,
}

/// A guard run as github-action-benchmark charts it: its record, and what its history said.
pub struct ActionBenchmark<'a> {
    /// The run's record.
    pub record: &'a GuardRecord,
    /// The history's verdict on it, where the guard keeps one: each cell's line goes into its
    /// entries' `extra`.
    pub history: Option<&'a HistoryVerdict>,
}

impl Exporter<ActionBenchmark<'_>> for Json {
    /// github-action-benchmark's two files: smaller-is-better.json (customSmallerIsBetter) and
    /// bigger-is-better.json (customBiggerIsBetter).
    fn export(&self, run: &ActionBenchmark<'_>) -> Result<Vec<Output>, RenderError> {
        let (smaller, bigger) = action_benchmark(run.record, run.history);
        Ok(vec![
            Output::new("smaller-is-better.json", pretty_json(&smaller)),
            Output::new("bigger-is-better.json", pretty_json(&bigger)),
        ])
    }
}

/// A record as github-action-benchmark's `customSmallerIsBetter` entries (CPU ms and
/// instructions per sample) and `customBiggerIsBetter` entries (samples/s), each cell's
/// entries saying what its `history` said, where there is one.
pub fn action_benchmark(
    record: &GuardRecord,
    history: Option<&HistoryVerdict>,
) -> (Vec<ActionBenchmarkEntry>, Vec<ActionBenchmarkEntry>) {
    let (mut smaller, mut bigger) = (Vec::new(), Vec::new());
    for cell in &record.cells {
        let name = &cell.cell.name;
        let said = history
            .and_then(|h| h.cells.iter().find(|c| &c.name == name).map(|c| (c, h.min_change_pct)))
            .map(|(c, min_change_pct)| format!("; {}", cell_line(c, min_change_pct)))
            .unwrap_or_default();
        let entry = |name: String, unit, values: Vec<f64>| {
            let (_, sd) = crate::measure::stats::mean_and_sd(&values).unwrap_or_default();
            ActionBenchmarkEntry {
                name,
                unit,
                value: crate::measure::stats::median(values.iter().copied()),
                range: format!("± {sd:.4}"),
                extra: format!(
                    "median of {} runs; {}, {} cores{said}",
                    values.len(),
                    record.machine.cpu,
                    record.machine.cores
                ),
            }
        };
        let values = |f: fn(&RunFigures) -> f64| cell.values(f);
        smaller.push(entry(
            format!("{name} CPU per sample"),
            "ms",
            values(|r| r.cpu_ms_per_sample),
        ));
        if let Some(instructions) = cell.instructions() {
            smaller.push(entry(
                format!("{name} instructions per sample"),
                "instructions",
                instructions,
            ));
        }
        bigger.push(entry(format!("{name} throughput"), "samples/s", values(|r| r.samples_per_s)));
        if let Some(au) = cell.au() {
            bigger.push(entry(format!("{name} accelerator utilisation"), "%", au));
        }
    }
    (smaller, bigger)
}
