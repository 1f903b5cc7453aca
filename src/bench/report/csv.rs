//! The report as CSV (`results.csv`): one row per cell with its repeats aggregated (the median
//! of each figure, as in the table; the raw repeats stay in `results.jsonl`), a header row and
//! stable column names.

use super::model::{NewerFigures, Report, CSV_FILE};
use crate::bench::export::{Csv, Exporter, Output, RenderError};
use crate::bench::report::table::{Column, Table};
use crate::bench::sweep::cell::Knob;
use crate::bench::sweep::cell::KnobSet;
use crate::timing::stage::Stage;

impl Exporter<Report> for Csv {
    fn export(&self, report: &Report) -> Result<Vec<Output>, RenderError> {
        Ok(vec![Output::new(CSV_FILE, render(report))])
    }
}

/// The knob columns of `report`: every knob its cells show (the loader where a cell ran
/// LeRobot's, decoder threads where a cell had more than one).
fn knob_columns(report: &Report) -> Vec<Knob> {
    Knob::shown(KnobSet::All, report.rows.iter().map(|r| &r.knobs))
}

/// The header, in column order, for a report whose knob and stage columns are `knobs` and
/// `stages`, and whose rows carry the `newer` figures.
pub fn header(knobs: &[Knob], newer: NewerFigures, stages: &[Stage]) -> Vec<String> {
    let mut columns: Vec<String> = knobs.iter().map(|k| k.field().into()).collect();
    columns.extend(
        [
            "repeats",
            "loader_samples_per_s",
            "loader_cpu_ms_per_sample",
            "loader_peak_rss_bytes",
            "decode_limit_samples_per_s",
            "decode_limit_fraction",
            "model_samples_per_s",
            "model_step_median_ms",
            "train_samples_per_s",
            "train_wait_median_ms",
            "train_h2d_median_ms",
            "train_compute_median_ms",
            "input_bound_median_pct",
            "input_bound_p95_pct",
        ]
        .map(String::from),
    );
    let shown = |on: bool, names: &[&'static str]| if on { names.to_vec() } else { Vec::new() };
    columns.extend(
        [
            shown(newer.au, &["au_pct"]),
            shown(newer.memory, &["train_pss_bytes", "train_first_batch_s"]),
            shown(newer.ranks, &["ranks", "slowest_rank", "rank_spread_pct"]),
            vec!["verdict", "recommended"],
        ]
        .concat()
        .into_iter()
        .map(String::from),
    );
    columns.extend(stages.iter().map(|s| format!("cpu_ms_per_sample_{}", s.name())));
    columns
}

/// The stages with a column: every one, the cache's only where a row had a cache (so that
/// results written before it existed keep their columns).
fn stage_columns(report: &Report) -> Vec<Stage> {
    let cached = report.rows.iter().any(|r| r.knobs.knobs.cache_bytes > 0);
    Stage::ALL.into_iter().filter(|&s| s != Stage::Cache || cached).collect()
}

/// The table as CSV text.
pub fn render(report: &Report) -> String {
    let (knobs, stages, newer) =
        (knob_columns(report), stage_columns(report), report.newer_figures());
    let columns = header(&knobs, newer, &stages).iter().map(|h| Column::text(h)).collect();
    let mut rows = Vec::with_capacity(report.rows.len());
    for r in &report.rows {
        let number = |x: f64| {
            if x.is_finite() {
                format!("{x}")
            } else if x > 0.0 {
                "inf".into()
            } else {
                String::new()
            }
        };
        let mut cells: Vec<String> = knobs.iter().map(|k| k.value(&r.knobs)).collect();
        cells.extend([
            r.repeats.to_string(),
            r.loader_samples_per_s.map_or(String::new(), number),
            r.loader_cpu_ms_per_sample.map_or(String::new(), number),
            r.loader_peak_rss_bytes.map_or(String::new(), |b| b.to_string()),
            r.decode_limit.as_ref().map_or(String::new(), |l| number(l.samples_per_s)),
            r.decode_limit.as_ref().map_or(String::new(), |l| number(l.fraction)),
            number(r.model_samples_per_s),
            number(r.model_step_ms),
            number(r.train_samples_per_s),
            number(r.train_wait_ms),
            number(r.train_h2d_ms),
            number(r.train_compute_ms),
            number(r.input_bound_pct),
            number(r.input_bound_p95_pct),
        ]);
        if newer.au {
            cells.push(r.au_pct.map_or(String::new(), number));
        }
        if newer.memory {
            cells.push(r.train_pss_bytes.map_or(String::new(), |b| b.to_string()));
            cells.push(r.train_first_batch_s.map_or(String::new(), number));
        }
        if newer.ranks {
            cells.push(r.ranks.map_or(String::new(), |k| k.ranks.to_string()));
            cells.push(r.ranks.map_or(String::new(), |k| k.slowest_rank.to_string()));
            cells.push(r.ranks.map_or(String::new(), |k| number(k.spread_pct)));
        }
        cells.extend([
            serde_json::to_value(r.verdict)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            r.recommended.to_string(),
        ]);
        cells.extend(stages.iter().map(|&stage| {
            number(r.stages.iter().find(|s| s.stage == stage).map_or(0.0, |s| s.cpu_ms_per_sample))
        }));
        rows.push(cells);
    }
    Table { columns, rows }.csv()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_names_are_unique() {
        let all = NewerFigures { au: true, memory: true, ranks: true };
        let mut names = header(&Knob::set(KnobSet::All), all, &Stage::ALL);
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
