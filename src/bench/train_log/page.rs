//! `doctor LOG --html PAGE`: the log's verdict on top, then each logged step's data_s and
//! updt_s over the run, the epoch starts marked (the steps whose data_s stalls an epoch apart,
//! where the log shows such a stall; else where its `epch:` reaches a whole epoch); each point
//! hoverable (its step, both times and the input-bound share).

use plotly::common::{HoverInfo, Marker, MarkerSymbol, Mode, Title};
use plotly::layout::{Axis, Layout};
use plotly::{Plot, Scatter};

use super::read::{LoggedStep, TrainLog};
use crate::bench::export::{Exporter, Html, Output, RenderError};
use crate::bench::report::page::{plot_of, Page, PAGE_FILE};

impl Exporter<TrainLog> for Html {
    fn export(&self, log: &TrainLog) -> Result<Vec<Output>, RenderError> {
        Ok(vec![Output::new(PAGE_FILE, render(log))])
    }
}

/// The page of `log`.
pub fn render(log: &TrainLog) -> String {
    let mut page = Page::new("feedbench doctor");
    page.meta(format!(
        "{}: {} logged steps of its last run (of {}), read, not measured.",
        log.path.display(),
        log.steps.len(),
        log.runs
    ));
    for paragraph in log.summary().to_string().split("\n\n").filter(|p| !p.trim().is_empty()) {
        page.answer(paragraph.trim().to_string());
    }
    let starts: Vec<(&LoggedStep, String)> = match log.epoch_stall() {
        Some(stall) => log
            .steps
            .iter()
            .filter(|s| stall.stall_steps.contains(&s.step))
            .map(|s| (s, "an epoch starts: data_s stalls".to_string()))
            .collect(),
        None => epoch_starts(&log.steps)
            .into_iter()
            .map(|(s, epoch)| (s, format!("epoch {epoch} starts (by epch:)")))
            .collect(),
    };
    if starts.is_empty() && log.steps.iter().all(|s| s.epoch.is_none()) {
        page.missing(
            "No epoch start is marked: data_s does not stall an epoch apart and the step lines \
             carry no `epch:`."
                .into(),
        );
    }
    page.plot("steps", "data_s and updt_s of each logged step", &steps(log, &starts));
    page.render()
}

/// The logged steps that begin an epoch: the first whose `epch:` reaches a whole epoch the one
/// logged before it had not.
fn epoch_starts(steps: &[LoggedStep]) -> Vec<(&LoggedStep, u64)> {
    steps
        .windows(2)
        .filter_map(|w| match (w[0].epoch, w[1].epoch) {
            (Some(before), Some(now)) if now.floor() > before.floor() => {
                Some((&w[1], now.floor() as u64))
            }
            _ => None,
        })
        .collect()
}

/// What a step's hover says.
fn hover(s: &LoggedStep) -> String {
    format!(
        "step {:.0}<br>data_s {:.3} s, updt_s {:.3} s<br>{:.1} % input-bound",
        s.step,
        s.data_s,
        s.update_s,
        s.input_bound_pct()
    )
}

fn steps(log: &TrainLog, starts: &[(&LoggedStep, String)]) -> Plot {
    let mut plot = plot_of(
        Layout::new()
            .x_axis(Axis::new().title(Title::with_text("step")))
            .y_axis(Axis::new().title(Title::with_text("seconds per step"))),
    );
    let x: Vec<f64> = log.steps.iter().map(|s| s.step).collect();
    let hovers: Vec<String> = log.steps.iter().map(hover).collect();
    for (name, seconds) in [
        ("data_s", log.steps.iter().map(|s| s.data_s).collect::<Vec<f64>>()),
        ("updt_s", log.steps.iter().map(|s| s.update_s).collect()),
    ] {
        plot.add_trace(
            Scatter::new(x.clone(), seconds)
                .name(name)
                .mode(Mode::LinesMarkers)
                .hover_text_array(hovers.clone())
                .hover_info(HoverInfo::Text),
        );
    }
    if !starts.is_empty() {
        plot.add_trace(
            Scatter::new(
                starts.iter().map(|(s, _)| s.step).collect(),
                starts.iter().map(|(s, _)| s.data_s).collect(),
            )
            .name("epoch start")
            .mode(Mode::Markers)
            .marker(Marker::new().symbol(MarkerSymbol::TriangleUp).size(12).color("black"))
            .hover_text_array(
                starts.iter().map(|(s, what)| format!("{what}<br>{}", hover(s))).collect(),
            )
            .hover_info(HoverInfo::Text),
        );
    }
    plot
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(step: f64, epoch: Option<f64>) -> LoggedStep {
        LoggedStep { step, data_s: 0.01, update_s: 0.2, epoch }
    }

    #[test]
    fn an_epoch_starts_where_epch_reaches_a_whole_epoch() {
        let steps = [
            step(100.0, Some(0.4)),
            step(200.0, Some(0.9)),
            step(300.0, Some(1.3)),
            step(400.0, Some(2.0)),
        ];
        let starts: Vec<(f64, u64)> =
            epoch_starts(&steps).iter().map(|(s, e)| (s.step, *e)).collect();
        assert_eq!(starts, [(300.0, 1), (400.0, 2)]);
        assert!(epoch_starts(&[step(1.0, None), step(2.0, None)]).is_empty());
    }
}
