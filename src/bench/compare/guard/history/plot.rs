//! The history on the guard's page: each cell's runs in order, as multiples of the level before
//! its shift (or of its median, without one), the change points marked, each run's commit, date
//! and figure on hover.

use plotly::common::{HoverInfo, Line, Marker, Mode, Title};
use plotly::layout::{Axis, Layout};
use plotly::{Plot, Scatter};

use super::verdict::HistoryVerdict;
use crate::bench::format::rate;
use crate::bench::report::page::{plot_of, utc};
use crate::measure::stats::median;

/// The plot of `history`: a line per cell, its change points ringed.
pub fn history_plot(history: &HistoryVerdict) -> Plot {
    let mut plot = plot_of(
        Layout::new()
            .x_axis(Axis::new().title(Title::with_text("run (oldest first, this run last)")))
            .y_axis(Axis::new().title(Title::with_text("× the level before the shift"))),
    );
    for cell in &history.cells {
        let before = cell.shift.as_ref().map_or(cell.points.len(), |s| s.first);
        let level = median(cell.points[..before.max(1)].iter().map(|p| p.value));
        let x: Vec<usize> = (0..cell.points.len()).collect();
        let y: Vec<f64> = cell.points.iter().map(|p| p.value / level).collect();
        let texts: Vec<String> = (cell.points.iter())
            .map(|p| {
                let figure = match cell.figure.as_str() {
                    "au_pct" => format!("AU {:.1} %", p.value),
                    _ => format!("{} samples/s", rate(p.raw)),
                };
                format!(
                    "{}: {}<br>{}<br>{figure}, {:.3}× the level",
                    cell.name,
                    p.commit.as_deref().unwrap_or("no commit"),
                    utc(p.date),
                    p.value / level
                )
            })
            .collect();
        plot.add_trace(
            Scatter::new(x, y.clone())
                .name(&cell.name)
                .mode(Mode::LinesMarkers)
                .line(Line::new().width(1.5))
                .hover_text_array(texts)
                .hover_info(HoverInfo::Text),
        );
        let marked: Vec<usize> = cell.change_points.clone();
        plot.add_trace(
            Scatter::new(marked.clone(), marked.iter().map(|&i| y[i]).collect())
                .name(format!("{}: shift begins", cell.name))
                .mode(Mode::Markers)
                .marker(Marker::new().size(16).color("rgba(214, 39, 40, 0.5)"))
                .hover_info(HoverInfo::Skip),
        );
    }
    plot
}
