//! The layout study's report, from `layout.jsonl` alone: a table sorted by loader samples/s,
//! what the resolution alone loses, a recommendation (the fastest candidate within the quality
//! floor and size budget, with the reason each faster one was rejected), `report.md`,
//! `results.csv` and the Pareto plot.
//!
//! The ranking and the recommendation are [`ranking`](super::ranking)'s; this module lays
//! them out and writes the files.

use std::path::{Path, PathBuf};

use super::config::{ChooseSection, LayoutConfig};
use super::loss_plot;
use super::pareto::{self, ParetoPoint};
use super::ranking::{percent, LayoutReport};
use super::result::{CandidateResult, LossFigure};
use super::{read_results, LayoutError, CONFIG_FILE, RESULTS_FILE};
use crate::bench::export::{self, Csv, ExportError, Exporter, Html, Markdown, Output};
use crate::bench::export::{RenderError, Svg};
use crate::bench::format::{db, rate};
use crate::bench::report::page::PAGE_FILE;
use crate::bench::report::plots::svg;
use crate::bench::report::table::{Column, Table};
use crate::dataset::bytes::Bytes;
use crate::dataset::video::quality::Quality;
use crate::dataset::DatasetError;

/// The report's markdown file.
pub const MARKDOWN_FILE: &str = "report.md";
/// The report's table as CSV.
pub const CSV_FILE: &str = "results.csv";
/// The Pareto plot: samples/s against bytes per frame.
pub const PARETO_FILE: &str = "pareto.svg";
/// The loss plot: the loss's change against speed.
pub const LOSS_FILE: &str = "loss.svg";

fn interval(row: &CandidateResult) -> String {
    match row.loader.samples_per_s_interval {
        Some((low, high)) => {
            format!("{} ({}–{})", rate(row.loader.samples_per_s), rate(low), rate(high))
        }
        None => rate(row.loader.samples_per_s),
    }
}

fn vs_base(row: &CandidateResult) -> String {
    match &row.vs_base {
        Some(v) => {
            let c = v.samples_per_s;
            format!("{:+.1} % ({:+.1} to {:+.1})", c.percent, c.low, c.high)
        }
        None => "–".into(),
    }
}

/// An absent figure is an empty CSV cell.
fn csv_optional(x: Option<f64>, digits: usize) -> String {
    x.map_or(String::new(), |x| format!("{x:.digits$}"))
}

fn optional(x: Option<f64>, digits: usize) -> String {
    x.map_or("–".into(), |x| format!("{x:.digits$}"))
}

/// `0.45 % (0.72 %)`: the loss's mean change (its largest), or `–` without one.
fn loss_change(row: &CandidateResult) -> String {
    match row.loss.as_ref().and_then(LossFigure::mean_and_max) {
        Some((mean, max)) => format!("{} ({})", percent(mean), percent(max)),
        None => "–".into(),
    }
}

/// What the loss column is and what it is read against; where a candidate's loss could not be
/// measured, why.
fn loss_lines(report: &LayoutReport) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(scale) = report.loss_scale() {
        lines.push(format!(
            "loss Δ: the diffusion policy stepped at learning rate 0, its noise, timesteps and \
             crop fixed, over the same {} batches from the source and from each candidate; \
             |Δloss| / loss, mean (largest). Grey frames in place of every camera change it {}{}",
            scale.steps,
            percent(scale.grey),
            scale.spread.map_or(String::new(), |spread| format!(
                "; the source's loss moves {} from batch to batch",
                percent(spread)
            ))
        ));
    }
    for row in &report.rows {
        if let Some(LossFigure::Unmeasured(why)) = &row.loss {
            lines.push(format!("{}: loss not measured: {why}", row.label));
        }
    }
    lines
}

fn quality(q: &Quality) -> String {
    format!("{} ({})", db(q.psnr_db), db(q.worst_psnr_db))
}

/// The table: one row per candidate.
fn table(report: &LayoutReport) -> Table {
    let columns = [
        "candidate",
        "bytes/frame",
        "× source",
        "× PNG",
        "encode ms/frame",
        "CPU ms/sample (1 worker)",
        "frames decoded/sample",
        "samples/s (95 % CI)",
        "vs base (95 % CI)",
        "cold samples/s",
        "first batch ms",
        "PSNR mean (worst)",
        "SSIM mean (worst)",
        "load time × PNG",
        "loss Δ mean (max)",
    ]
    .map(Column::text)
    .to_vec();
    // The loss column where the study has one.
    let loss = report.rows.iter().any(|r| r.loss.is_some());
    let columns = columns[..columns.len() - usize::from(!loss)].to_vec();
    let rows = report
        .rows
        .iter()
        .enumerate()
        .map(|(n, r)| {
            let mark = if report.recommended == Some(n) { " ★" } else { "" };
            vec![
                format!("{}{mark}", r.label),
                Bytes::new(r.bytes_per_frame).to_string(),
                format!("{:.3}", r.bytes_ratio()),
                format!("{:.3}", r.png_ratio()),
                format!("{:.2}", r.encode_cpu_ms_per_frame),
                format!("{:.2}", r.decode.cpu_ms_per_sample),
                optional(r.decode.frames_decoded_per_sample, 2),
                interval(r),
                vs_base(r),
                r.cold_loader.as_ref().map_or("–".into(), |c| rate(c.samples_per_s)),
                format!("{:.0}", r.first_batch_ms),
                quality(&r.quality),
                format!("{:.4} ({:.4})", r.quality.ssim, r.quality.worst_ssim),
                format!("{:.2}", r.load_time_ratio()),
                loss_change(r),
            ]
            .into_iter()
            .take(columns.len())
            .collect()
        })
        .collect();
    Table { columns, rows }
}

/// What the resolution alone costs: one line per resized candidate.
fn scaling_lines(report: &LayoutReport) -> Vec<String> {
    report
        .rows
        .iter()
        .filter_map(|r| {
            let q = r.scaling.as_ref()?;
            Some(format!(
                "{}: resizing alone (to {} and back) gives PSNR {} (worst {}), SSIM {:.4}",
                r.label,
                r.candidate.resolution,
                db(q.psnr_db),
                db(q.worst_psnr_db),
                q.ssim
            ))
        })
        .collect()
}

fn heading(report: &LayoutReport) -> String {
    let first = &report.rows[0];
    format!(
        "{} candidates of {} episodes ({} frames per camera); the source stores {} per camera frame",
        report.rows.len(),
        first.episodes,
        first.frames,
        Bytes::new(first.source_bytes_per_frame)
    )
}

/// The terminal report.
pub fn render_text(report: &LayoutReport) -> String {
    let mut text = format!("Layout study: {}\n\n", heading(report));
    text.push_str(&table(report).aligned());
    for line in scaling_lines(report).into_iter().chain(loss_lines(report)) {
        text.push_str(&format!("\n{line}"));
    }
    text.push_str("\n\n");
    text.push_str(&report.recommendation());
    text
}

/// `report.md`.
pub fn render_markdown(report: &LayoutReport) -> String {
    let mut text = format!("# Layout study\n\n{}.\n\n", heading(report));
    text.push_str(&table(report).markdown());
    let scaling = scaling_lines(report);
    if !scaling.is_empty() {
        text.push_str("\n## Resolution alone\n\n");
        for line in scaling {
            text.push_str(&format!("- {line}\n"));
        }
    }
    let files: Vec<String> = (report.rows.iter())
        .filter_map(|r| Some(format!("{}: {}", r.label, r.files.as_ref()?.line())))
        .collect();
    if !files.is_empty() {
        text.push_str("\n## Video files\n\n");
        for line in files {
            text.push_str(&format!("- {line}\n"));
        }
    }
    let loss = loss_lines(report);
    if !loss.is_empty() {
        text.push_str("\n## Loss\n\n");
        for line in loss {
            text.push_str(&format!("- {line}\n"));
        }
        text.push_str(&format!("\n![loss change against speed]({LOSS_FILE})\n"));
    }
    text.push_str("\n## Recommendation\n\n");
    text.push_str(&report.recommendation());
    text.push_str(&format!("\n![samples/s against bytes per frame]({PARETO_FILE})\n"));
    text
}

/// `results.csv`: one row per candidate, raw figures.
pub fn render_csv(report: &LayoutReport) -> String {
    let columns = [
        "name",
        "label",
        "bytes_per_frame",
        "bytes_ratio",
        "png_ratio",
        "encode_cpu_ms_per_frame",
        "cpu_ms_per_sample_1_worker",
        "frames_decoded_per_sample",
        "samples_per_s",
        "samples_per_s_low",
        "samples_per_s_high",
        "cold_samples_per_s",
        "first_batch_ms",
        "psnr_db",
        "worst_psnr_db",
        "ssim",
        "worst_ssim",
        "load_time_ratio",
        "loss_change_mean",
        "loss_change_max",
        "loss_change_grey_frames",
        "b_frames",
        "index_at_front",
        "episodes_on_keyframe",
        "recommended",
    ]
    .map(Column::text)
    .to_vec();
    let rows = report.rows.iter().enumerate().map(|(n, r)| {
        let (low, high) =
            r.loader.samples_per_s_interval.map_or((None, None), |(l, h)| (Some(l), Some(h)));
        let loss = r.loss.as_ref().and_then(LossFigure::mean_and_max);
        vec![
            r.name.clone(),
            r.label.clone(),
            format!("{:.1}", r.bytes_per_frame),
            format!("{:.4}", r.bytes_ratio()),
            format!("{:.4}", r.png_ratio()),
            format!("{:.4}", r.encode_cpu_ms_per_frame),
            format!("{:.4}", r.decode.cpu_ms_per_sample),
            csv_optional(r.decode.frames_decoded_per_sample, 3),
            format!("{:.2}", r.loader.samples_per_s),
            csv_optional(low, 2),
            csv_optional(high, 2),
            csv_optional(r.cold_loader.as_ref().map(|c| c.samples_per_s), 2),
            format!("{:.1}", r.first_batch_ms),
            format!("{:.3}", r.quality.psnr_db),
            format!("{:.3}", r.quality.worst_psnr_db),
            format!("{:.5}", r.quality.ssim),
            format!("{:.5}", r.quality.worst_ssim),
            format!("{:.3}", r.load_time_ratio()),
            csv_optional(loss.map(|(mean, _)| mean), 6),
            csv_optional(loss.map(|(_, max)| max), 6),
            csv_optional(r.loss.as_ref().and_then(LossFigure::blind_change), 6),
            r.files.as_ref().map_or(String::new(), |f| f.reordered().to_string()),
            r.files.as_ref().map_or(String::new(), |f| f.index_at_front().to_string()),
            r.files
                .as_ref()
                .map_or(String::new(), |f| format!("{}/{}", f.episodes_on_keyframe, f.episodes)),
            (report.recommended == Some(n)).to_string(),
        ]
    });
    Table { columns, rows: rows.collect() }.csv()
}

/// What [`report_layout_dir`] wrote, and the terminal text.
#[derive(Debug, Clone)]
pub struct LayoutReportFiles {
    /// The terminal report.
    pub terminal: String,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// Writes `report.md`, `results.csv`, `report.html` and `pareto.svg` into `dir` for
/// `results`, judged by `choose`.
pub fn write_layout_report(
    dir: &Path,
    results: Vec<CandidateResult>,
    choose: &ChooseSection,
) -> Result<LayoutReportFiles, LayoutError> {
    if results.is_empty() {
        return Err(LayoutError::Refused {
            path: dir.join(RESULTS_FILE),
            what: "no candidate results to report".into(),
        });
    }
    let report = LayoutReport::new(results, choose);
    let files =
        export::write(dir, &report, &[&Markdown, &Csv, &Html, &Svg]).map_err(|e| match e {
            ExportError::Render { path, what } => LayoutError::Refused { path, what },
            ExportError::Write { path, source } => DatasetError::io(&path, source).into(),
        })?;
    Ok(LayoutReportFiles { terminal: render_text(&report), files })
}

impl Exporter<LayoutReport> for Markdown {
    fn export(&self, report: &LayoutReport) -> Result<Vec<Output>, RenderError> {
        Ok(vec![Output::new(MARKDOWN_FILE, render_markdown(report))])
    }
}

impl Exporter<LayoutReport> for Csv {
    fn export(&self, report: &LayoutReport) -> Result<Vec<Output>, RenderError> {
        Ok(vec![Output::new(CSV_FILE, render_csv(report))])
    }
}

impl Exporter<LayoutReport> for Html {
    fn export(&self, report: &LayoutReport) -> Result<Vec<Output>, RenderError> {
        let page = super::page::render(report, &render_markdown(report));
        Ok(vec![Output::new(PAGE_FILE, page)])
    }
}

impl Exporter<LayoutReport> for Svg {
    /// The Pareto plot.
    fn export(&self, report: &LayoutReport) -> Result<Vec<Output>, RenderError> {
        let points: Vec<ParetoPoint> = report
            .rows
            .iter()
            .enumerate()
            .map(|(n, r)| ParetoPoint {
                label: r.label.clone(),
                bytes: r.bytes_per_frame,
                speed: report.speed(r).0,
                psnr_db: r.quality.psnr_db,
                recommended: report.recommended == Some(n),
            })
            .collect();
        let plot = svg(PARETO_FILE, |out| pareto::draw(out, &points, report.relative))?;
        let mut plots = vec![plot];
        if report.loss_scale().is_some() {
            plots.push(svg(LOSS_FILE, |out| loss_plot::draw(out, report))?);
        }
        Ok(plots)
    }
}

/// Re-renders the report of the study in `dir` from its `layout.jsonl` (and the floors of the
/// `layout.toml` copied there).
pub fn report_layout_dir(dir: &Path) -> Result<LayoutReportFiles, LayoutError> {
    let results = read_results(&dir.join(RESULTS_FILE))?;
    let config_path = dir.join(CONFIG_FILE);
    let choose = if config_path.is_file() {
        LayoutConfig::load(&config_path)
            .map_err(|e| LayoutError::Refused { path: e.path, what: e.what })?
            .choose
    } else {
        ChooseSection::default()
    };
    write_layout_report(dir, results, &choose)
}

#[cfg(test)]
mod tests;
