//! A sweep's page (a tune's too: its results are a sweep's): the recommendation and the verdict on
//! top; per plot group, train samples/s against workers for each batch size with its 95 %
//! interval as a band and the step's own rate (the model alone) as a dashed line, and the
//! input-bound share over workers × batch; the recommended cell's loader CPU by stage; then
//! report.md. Each point's hover names its cell, figure, interval and verdict. The points are
//! the SVG plots' (`plots::curves`).

use plotly::common::{DashType, Fill, HoverInfo, Line, Mode, Title};
use plotly::layout::{Axis, Layout};
use plotly::{Bar, HeatMap, Plot, Scatter};

use super::{plot_of, utc, Page, PAGE_FILE};
use crate::bench::export::{Exporter, Html, Output, RenderError};
use crate::bench::format::rate;
use crate::bench::format::system_line;
use crate::bench::report::markdown;
use crate::bench::report::model::{Report, Row};
use crate::bench::report::plots::{curves, Curve};

impl Exporter<Report> for Html {
    fn export(&self, report: &Report) -> Result<Vec<Output>, RenderError> {
        Ok(vec![Output::new(PAGE_FILE, render(report, &markdown::render(report)))])
    }
}

/// Line colours, one per batch size (the SVG plots' Tableau 10).
const COLOURS: [(u8, u8, u8); 8] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
];

/// The page of a sweep's `report`, whose Markdown is `markdown`.
pub fn render(report: &Report, markdown: &str) -> String {
    let mut page = Page::new("feedbench report");
    for line in measured(report) {
        page.meta(line);
    }
    // Per group, the recommendation and the verdict on it.
    for group in &report.groups {
        let label =
            if group.label.is_empty() { String::new() } else { format!("{}: ", group.label) };
        let said = [
            group.recommendation.as_ref().map(|r| r.text.as_str()),
            group.diagnosis.as_ref().map(|d| d.headline.as_str()),
        ];
        let said: Vec<&str> = said.into_iter().flatten().collect();
        if !said.is_empty() {
            page.answer(format!("{label}{}", said.join(" ")));
        }
    }
    for (i, group) in report.plots.iter().enumerate() {
        let curves = curves(report, group);
        let of = |what: &str| match group.label.is_empty() {
            true => what.to_string(),
            false => format!("{what} ({})", group.label),
        };
        page.plot(&format!("train-{i}"), &of("Train samples/s against workers"), &train(&curves));
        page.plot(
            &format!("heatmap-{i}"),
            &of("Input-bound % over workers × batch"),
            &heatmap(&curves),
        );
    }
    if let Some(plot) = stages(report) {
        page.plot("stages", "The recommended cell's loader CPU, by stage", &plot);
    }
    for line in missing(report) {
        page.missing(line);
    }
    page.details(markdown);
    page.render()
}

/// What `report`'s results lack, said on top: planned cells not measured (a sweep cut short),
/// figures an older feedbench did not keep.
fn missing(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(planned) = report.planned.filter(|p| p.measured < p.cells) {
        lines.push(format!(
            "{} of the {} cells its sweep.toml plans are measured (a sweep cut short, or still \
             running): `feedbench sweep --config DIR/sweep.toml --out DIR --resume` measures the \
             rest. The recommendation and plots are of the cells measured.",
            planned.measured, planned.cells
        ));
    }
    let mut older = Vec::new();
    if report.rows.iter().all(|r| r.train_iteration_ms.is_empty()) {
        older.push("per-step samples (no intervals, no bands)");
    }
    if !report.newer_figures().au {
        older.push("accelerator utilisation");
    }
    if !older.is_empty() {
        lines.push(format!(
            "These results were written by an older feedbench and keep no {}: measure again to \
             see them.",
            older.join(", no ")
        ));
    }
    lines
}

/// Where and when `report`'s results were measured: the machine and versions, the cells and
/// the first and last result's time.
pub fn measured(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(system) = &report.system {
        lines.push(format!("Measured on {}.", system_line(system)));
    }
    if let Some((first, last)) = report.finished_unix_s {
        lines.push(format!(
            "{} cells from {} results, finished {} to {}.",
            report.rows.len(),
            report.results,
            utc(first),
            utc(last)
        ));
    }
    lines
}

/// `rgba(r, g, b, alpha)` of batch size `k`'s colour.
fn colour(k: usize, alpha: f64) -> String {
    let (r, g, b) = COLOURS[k % COLOURS.len()];
    format!("rgba({r}, {g}, {b}, {alpha})")
}

/// What a point's hover says: its cell, figure, interval and verdict.
pub fn hover(row: &Row) -> String {
    let k = &row.knobs.knobs;
    let interval = row
        .train_interval
        .map_or(String::new(), |(low, high)| format!(" (95 % CI {} to {})", rate(low), rate(high)));
    format!(
        "{} workers, prefetch {}, batch {}<br>train {} samples/s{interval}<br>{:.1} % input-bound: {}",
        k.workers,
        k.prefetch,
        k.batch_size,
        rate(row.train_samples_per_s),
        row.input_bound_pct,
        row.verdict
    )
}

fn train(curves: &[Curve]) -> Plot {
    let mut plot = plot_of(
        Layout::new()
            .x_axis(Axis::new().title(Title::with_text("workers")).dtick(1.0))
            .y_axis(Axis::new().title(Title::with_text("train samples/s"))),
    );
    for (k, curve) in curves.iter().enumerate() {
        let workers: Vec<usize> = curve.points.iter().map(|r| r.knobs.knobs.workers).collect();
        let group = curve.label();
        // The interval as a band: along its top, then back along its bottom.
        let bounded: Vec<(usize, (f64, f64))> = curve
            .points
            .iter()
            .filter_map(|r| r.train_interval.map(|i| (r.knobs.knobs.workers, i)))
            .collect();
        if !bounded.is_empty() {
            let x: Vec<usize> =
                bounded.iter().map(|b| b.0).chain(bounded.iter().rev().map(|b| b.0)).collect();
            let y: Vec<f64> = bounded
                .iter()
                .map(|b| b.1 .1)
                .chain(bounded.iter().rev().map(|b| b.1 .0))
                .collect();
            plot.add_trace(
                Scatter::new(x, y)
                    .name(format!("{group}: 95 % CI"))
                    .legend_group(group.clone())
                    .show_legend(false)
                    .fill(Fill::ToSelf)
                    .fill_color(colour(k, 0.15))
                    .line(Line::new().width(0.0))
                    .mode(Mode::Lines)
                    .hover_info(HoverInfo::Skip),
            );
        }
        let trained: Vec<f64> = curve.points.iter().map(|r| r.train_samples_per_s).collect();
        plot.add_trace(
            Scatter::new(workers.clone(), trained)
                .name(group.clone())
                .legend_group(group.clone())
                .mode(Mode::LinesMarkers)
                .line(Line::new().color(colour(k, 1.0)))
                .hover_text_array(curve.points.iter().map(|r| hover(r)).collect())
                .hover_info(HoverInfo::Text),
        );
        // The step alone: what the loader is asked for (unbounded steps left out).
        let ceiling: Vec<(usize, f64)> = curve
            .points
            .iter()
            .filter(|r| r.model_samples_per_s.is_finite())
            .map(|r| (r.knobs.knobs.workers, r.model_samples_per_s))
            .collect();
        if !ceiling.is_empty() {
            let texts = ceiling.iter().map(|c| format!("the step alone: {} samples/s", rate(c.1)));
            let texts: Vec<String> = texts.collect();
            let (x, y): (Vec<usize>, Vec<f64>) = ceiling.into_iter().unzip();
            plot.add_trace(
                Scatter::new(x, y)
                    .name(format!("{group}: the step alone"))
                    .legend_group(group.clone())
                    .mode(Mode::Lines)
                    .line(Line::new().color(colour(k, 1.0)).dash(DashType::Dash))
                    .hover_text_array(texts)
                    .hover_info(HoverInfo::Text),
            );
        }
    }
    plot
}

fn heatmap(curves: &[Curve]) -> Plot {
    let mut workers: Vec<usize> =
        curves.iter().flat_map(|c| c.points.iter().map(|r| r.knobs.knobs.workers)).collect();
    workers.sort_unstable();
    workers.dedup();
    let rows: Vec<String> = curves.iter().map(|c| c.row_label()).collect();
    let input_bound = |c: &Curve, w: usize| {
        c.points.iter().find(|r| r.knobs.knobs.workers == w).map(|r| r.input_bound_pct)
    };
    let z: Vec<Vec<Option<f64>>> =
        curves.iter().map(|c| workers.iter().map(|&w| input_bound(c, w)).collect()).collect();
    let labels: Vec<String> = workers.iter().map(|w| w.to_string()).collect();
    let mut plot = plot_of(
        Layout::new()
            .x_axis(
                Axis::new()
                    .title(Title::with_text("workers"))
                    .type_(plotly::layout::AxisType::Category),
            )
            .y_axis(
                Axis::new()
                    .title(Title::with_text("batch"))
                    .type_(plotly::layout::AxisType::Category),
            ),
    );
    plot.add_trace(
        HeatMap::new(labels, rows, z)
            .zmin(0.0)
            .zmax(100.0)
            .color_scale(plotly::common::ColorScale::Palette(
                plotly::common::ColorScalePalette::YlOrRd,
            ))
            .reverse_scale(true)
            .hover_template("%{x} workers, batch %{y}<br>%{z:.1} % input-bound<extra></extra>"),
    );
    plot
}

/// The loader CPU per sample of the first recommended row, by stage, as bars; None where no row
/// is recommended or its loader recorded no stages.
fn stages(report: &Report) -> Option<Plot> {
    let (_, rec) = report.recommendations().next()?;
    let row = &report.rows[rec.row];
    if row.stages.is_empty() {
        return None;
    }
    let names: Vec<String> = row.stages.iter().map(|s| s.stage.name().to_string()).collect();
    let ms: Vec<f64> = row.stages.iter().map(|s| s.cpu_ms_per_sample).collect();
    let texts: Vec<String> = row
        .stages
        .iter()
        .map(|s| {
            format!(
                "{}: {:.3} CPU ms/sample, {:.0} % of the loader's",
                s.stage.name(),
                s.cpu_ms_per_sample,
                s.percent
            )
        })
        .collect();
    let mut plot = plot_of(
        Layout::new()
            .x_axis(Axis::new().title(Title::with_text("stage")))
            .y_axis(Axis::new().title(Title::with_text("CPU ms per sample"))),
    );
    plot.add_trace(
        Bar::new(names, ms)
            .name("CPU ms/sample")
            .hover_text_array(texts)
            .hover_info(HoverInfo::Text),
    );
    Some(plot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::render as analyse;
    use crate::testdata::FakeCell;

    #[test]
    fn the_page_plots_every_cell_with_its_configuration() {
        let cells: Vec<_> = (0..3)
            .map(|w| {
                let mut c = FakeCell::new(w, 2, 16);
                c.train_samples_per_s = 20.0 + 10.0 * w as f64;
                c.train_iteration_ms = vec![16e3 / c.train_samples_per_s; 20];
                c.result()
            })
            .collect();
        let report = analyse(&cells);
        let html = render(&report, &crate::bench::report::markdown::render(&report));
        // plotly's JSON writes `<br>` as `\u003cbr\u003e`.
        let hover = "2 workers, prefetch 2, batch 16\\u003cbr\\u003etrain 40.0 samples/s";
        assert!(html.contains(hover), "each point's hover names its cell");
        assert!(html.contains("id=\"train-0\"") && html.contains("id=\"heatmap-0\""));
        assert!(html.contains("the step alone: 50.0 samples/s"));
        assert!(html.contains("class=\"answer\""), "the recommendation on top");
    }
}
