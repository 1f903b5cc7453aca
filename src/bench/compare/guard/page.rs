//! A guard's page (`guard --baseline FILE --html PAGE`): the verdict on top, then each cell's
//! runs, the baseline's and this run's, as multiples of the baseline's median against the
//! tolerance band around it, one plot per figure (CPU per sample, samples/s); each run
//! hoverable (its cell, run, value and multiple); with `--history`, the history, its change
//! points marked and each run's commit on hover; then the verdict's table.

use plotly::common::{Fill, HoverInfo, Line, Marker, Mode, Title};
use plotly::layout::{Axis, Layout};
use plotly::{Plot, Scatter};

use super::history::plot::history_plot;
use super::judge::GuardVerdict;
use super::record::GuardRecord;
use super::render::{markdown, UpdateCommand};
use crate::bench::export::{Exporter, Html, Output, RenderError};
use crate::bench::format::system_line;
use crate::bench::format::{millis, rate};
use crate::bench::report::page::{plot_of, utc, Page, PAGE_FILE};
use crate::measure::loader_run::RunFigures;
use crate::measure::stats::median;

/// A figure the page plots: its name, unit, and how to read it from a run.
struct Figure {
    id: &'static str,
    heading: &'static str,
    read: fn(&RunFigures) -> f64,
    show: fn(f64) -> String,
}

const FIGURES: [Figure; 2] = [
    Figure {
        id: "cpu",
        heading: "CPU ms per sample, against the baseline's band (smaller is better)",
        read: |r| r.cpu_ms_per_sample,
        show: |v| format!("{} CPU ms/sample", millis(v)),
    },
    Figure {
        id: "rate",
        heading: "Samples/s, against the baseline's band (bigger is better)",
        read: |r| r.samples_per_s,
        show: |v| format!("{} samples/s", rate(v)),
    },
];

/// A guard's page as its exporter takes it: the verdict, judging `now` against `baseline`, and
/// the command that updates the baseline.
pub struct GuardPage<'a> {
    /// The verdict.
    pub verdict: &'a GuardVerdict,
    /// The baseline judged against.
    pub baseline: &'a GuardRecord,
    /// This run.
    pub now: &'a GuardRecord,
    /// The command that saves this run as the baseline.
    pub update: &'a UpdateCommand<'a>,
}

impl Exporter<GuardPage<'_>> for Html {
    fn export(&self, p: &GuardPage<'_>) -> Result<Vec<Output>, RenderError> {
        Ok(vec![Output::new(PAGE_FILE, render(p.verdict, p.baseline, p.now, p.update))])
    }
}

/// The page of `verdict`, judging `now` against `baseline`.
pub fn render(
    verdict: &GuardVerdict,
    baseline: &GuardRecord,
    now: &GuardRecord,
    update: &UpdateCommand,
) -> String {
    let mut page = Page::new("feedbench guard");
    let (here, there) = (system_line(&now.machine), system_line(&baseline.machine));
    let where_then = if here == there { "the same machine".to_string() } else { there };
    page.meta(format!(
        "Measured on {here}, {}; the baseline on {where_then}, {}.",
        utc(now.measured_at),
        utc(baseline.measured_at)
    ));
    page.answer(super::render::conclusion(verdict, update));
    for figure in &FIGURES {
        page.plot(figure.id, figure.heading, &runs(figure, verdict, baseline, now));
    }
    if let Some(history) = &verdict.history {
        let heading = "The history: each run of this workload on this host since its level was \
                       set, the shift's change points ringed";
        page.plot("history", heading, &history_plot(history));
    }
    page.details(&markdown(verdict, update));
    page.render()
}

/// Each cell's runs of `figure` as multiples of its baseline's median: the baseline's left of
/// the cell's tick, this run's right, the band of ±tolerance across the plot.
fn runs(
    figure: &Figure,
    verdict: &GuardVerdict,
    baseline: &GuardRecord,
    now: &GuardRecord,
) -> Plot {
    let names: Vec<&str> = now.cells.iter().map(|c| c.cell.name.as_str()).collect();
    let tolerance = verdict.tolerance.0 / 100.0;
    let span = (-0.5, names.len() as f64 - 0.5);
    let mut plot = plot_of(
        Layout::new()
            .x_axis(
                Axis::new()
                    .title(Title::with_text("cell"))
                    .tick_values((0..names.len()).map(|i| i as f64).collect())
                    .tick_text(names.iter().map(|n| n.to_string()).collect())
                    .range(vec![span.0, span.1])
                    .zero_line(false),
            )
            .y_axis(Axis::new().title(Title::with_text("× the baseline's median"))),
    );
    plot.add_trace(
        Scatter::new(
            vec![span.0, span.1, span.1, span.0],
            vec![1.0 - tolerance, 1.0 - tolerance, 1.0 + tolerance, 1.0 + tolerance],
        )
        .name(format!("±{:.0} % (the tolerance)", verdict.tolerance.0))
        .fill(Fill::ToSelf)
        .fill_color("rgba(44, 160, 44, 0.15)")
        .line(Line::new().width(0.0))
        .mode(Mode::Lines)
        .hover_info(HoverInfo::Skip),
    );
    for (side, record, offset, colour) in [
        ("baseline", baseline, -0.15, "rgb(127, 127, 127)"),
        ("now", now, 0.15, "rgb(31, 119, 180)"),
    ] {
        let (mut x, mut y, mut texts) = (Vec::new(), Vec::new(), Vec::new());
        for (i, name) in names.iter().enumerate() {
            let Some(saved) = baseline.cells.iter().find(|c| c.cell.name == *name) else {
                continue;
            };
            let Some(cell) = record.cells.iter().find(|c| c.cell.name == *name) else { continue };
            let centre = median(saved.values(figure.read));
            for (run, figures) in cell.runs.iter().enumerate() {
                let value = (figure.read)(figures);
                let times = value / centre;
                // Runs side by side, in the order they ran.
                x.push(i as f64 + offset + 0.04 * run as f64);
                y.push(times);
                texts.push(format!(
                    "{name}, {side} run {}: {}<br>{times:.3}× the baseline's median",
                    run + 1,
                    (figure.show)(value)
                ));
            }
        }
        plot.add_trace(
            Scatter::new(x, y)
                .name(side)
                .mode(Mode::Markers)
                .marker(Marker::new().size(9).color(colour))
                .hover_text_array(texts)
                .hover_info(HoverInfo::Text),
        );
    }
    plot
}
