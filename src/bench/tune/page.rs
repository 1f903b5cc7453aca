//! A tune's page (`report.html` beside its tune.json): the answer and its flags on top; each
//! configuration measured, its train samples/s with the interval, beside the rate model's
//! prediction for every count of workers and the step's demand; what a faster step would need,
//! as bars; then its cells' report. Each point's hover names the configuration, its figure,
//! interval and verdict, and why the search measured it.

use plotly::common::{DashType, ErrorData, ErrorType, HoverInfo, Line, Mode, Title};
use plotly::layout::{Axis, Layout};
use plotly::{Bar, Plot, Scatter};

use super::request::TUNE_FILE;
use super::tuned::Tuned;
use crate::bench::export::{pretty_json, Exporter, Html, Json, Output, RenderError};
use crate::bench::format::{millis, rate};
use crate::bench::report::page::sweep::{hover, measured};
use crate::bench::report::page::{plot_of, Page, PAGE_FILE};
use crate::bench::report::{markdown, Report};

/// A tune's outputs as its exporters take them: its answer, and its cells' report.
pub struct TuneOutputs<'a> {
    /// What the tune found.
    pub tuned: &'a Tuned,
    /// Its cells, analysed as a sweep's.
    pub report: &'a Report,
}

impl Exporter<TuneOutputs<'_>> for Json {
    /// tune.json: the answer, every measurement and why.
    fn export(&self, outputs: &TuneOutputs<'_>) -> Result<Vec<Output>, RenderError> {
        Ok(vec![Output::new(TUNE_FILE, pretty_json(outputs.tuned))])
    }
}

impl Exporter<TuneOutputs<'_>> for Html {
    /// report.html.
    fn export(&self, outputs: &TuneOutputs<'_>) -> Result<Vec<Output>, RenderError> {
        let (tuned, report) = (outputs.tuned, outputs.report);
        Ok(vec![Output::new(PAGE_FILE, render(tuned, report, &markdown::render(report)))])
    }
}

/// The page of `tuned`, whose cells `report` analysed and `markdown` renders.
pub fn render(tuned: &Tuned, report: &Report, markdown: &str) -> String {
    let mut page = Page::new("feedbench tune");
    for line in measured(report) {
        page.meta(line);
    }
    let answer = &tuned.answer;
    page.answer(answer.paragraph());
    page.answer(format!("Flags: {}", answer.flags()));
    if let Some(requests) = &tuned.requests {
        page.answer(requests.sentence());
    }
    if let Some(stream_or_stage) = &tuned.stream_or_stage {
        page.answer(stream_or_stage.paragraph());
    }
    if tuned.budget_ran_out {
        page.missing("The time budget ran out before the search decided: this is the best answer measured so far.".into());
    }
    page.plot(
        "measured",
        "Measured, and predicted from one worker's rate",
        &measured_plot(tuned, report),
    );
    page.plot("faster", "What a faster step would need", &faster(tuned));
    page.details(markdown);
    page.render()
}

fn measured_plot(tuned: &Tuned, report: &Report) -> Plot {
    let answer = &tuned.answer;
    let mut plot = plot_of(
        Layout::new()
            .x_axis(Axis::new().title(Title::with_text("workers")).dtick(1.0))
            .y_axis(Axis::new().title(Title::with_text("train samples/s"))),
    );
    let mut depths: Vec<usize> = report.rows.iter().map(|r| r.knobs.knobs.prefetch).collect();
    depths.sort_unstable();
    depths.dedup();
    for prefetch in depths {
        let rows: Vec<_> =
            report.rows.iter().filter(|r| r.knobs.knobs.prefetch == prefetch).collect();
        let why = |workers: usize| {
            let step =
                tuned.steps.iter().rev().find(|s| s.workers == workers && s.prefetch == prefetch);
            step.map_or(String::new(), |s| format!("<br>measured for {}", s.why))
        };
        let (above, below): (Vec<f64>, Vec<f64>) = rows
            .iter()
            .map(|r| match r.train_interval {
                Some((low, high)) => (high - r.train_samples_per_s, r.train_samples_per_s - low),
                None => (0.0, 0.0),
            })
            .unzip();
        plot.add_trace(
            Scatter::new(
                rows.iter().map(|r| r.knobs.knobs.workers).collect(),
                rows.iter().map(|r| r.train_samples_per_s).collect(),
            )
            .name(format!("measured, prefetch {prefetch}"))
            .mode(Mode::Markers)
            .error_y(ErrorData::new(ErrorType::Data).array(above).array_minus(below))
            .hover_text_array(rows.iter().map(|r| hover(r) + &why(r.knobs.knobs.workers)).collect())
            .hover_info(HoverInfo::Text),
        );
    }
    let most = report.rows.iter().map(|r| r.knobs.knobs.workers).max().unwrap_or(0);
    let workers: Vec<usize> = (0..=most.max(answer.budgets.cpus)).collect();
    let predicted: Vec<f64> =
        workers.iter().map(|&w| answer.rates.train_rate(w, &answer.demand)).collect();
    plot.add_trace(
        Scatter::new(workers.clone(), predicted.clone())
            .name("predicted")
            .mode(Mode::Lines)
            .line(Line::new().dash(DashType::Dot))
            .hover_text_array(
                workers
                    .iter()
                    .zip(&predicted)
                    .map(|(w, p)| format!("predicted with {w} workers: {} samples/s", rate(*p)))
                    .collect(),
            )
            .hover_info(HoverInfo::Text),
    );
    let demand = answer.demand.samples_per_s();
    plot.add_trace(
        Scatter::new(vec![0, *workers.last().unwrap_or(&0)], vec![demand, demand])
            .name("the step's demand")
            .mode(Mode::Lines)
            .line(Line::new().dash(DashType::Dash))
            .hover_text_array(vec![
                format!(
                    "the step ({} ms) asks for {} samples/s",
                    millis(answer.demand.step_ms),
                    rate(demand)
                );
                2
            ])
            .hover_info(HoverInfo::Text),
    );
    plot
}

/// Workers a step 1, 2, 4 and 8 times faster would need (none drawn where no count feeds it).
fn faster(tuned: &Tuned) -> Plot {
    let beyond = &tuned.answer.beyond;
    let mut plot = plot_of(
        Layout::new()
            .x_axis(Axis::new().title(Title::with_text("step speed-up")))
            .y_axis(Axis::new().title(Title::with_text("workers needed"))),
    );
    plot.add_trace(
        Bar::new(
            beyond.iter().map(|b| format!("{}×", b.speedup)).collect(),
            beyond.iter().map(|b| b.workers.map(|w| w as f64)).collect(),
        )
        .name("workers needed")
        .hover_text_array(
            beyond
                .iter()
                .map(|b| {
                    let workers = b.workers.map_or("no count of workers feeds it".into(), |w| {
                        format!("{w} workers ({} cores with the training process)", w + 1)
                    });
                    format!(
                        "{}× faster: {} ms a step, {} samples/s asked<br>{workers}",
                        b.speedup,
                        millis(b.step_ms),
                        rate(b.demand_samples_per_s)
                    )
                })
                .collect(),
        )
        .hover_info(HoverInfo::Text),
    );
    plot
}
