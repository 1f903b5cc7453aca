//! The layout study's loss plot (SVG): each candidate's change of the step's loss against its
//! speed, a labelled point at the mean change with a line up to the largest, the
//! `max_loss_change` floor and the change grey frames make drawn across: whether the speed is
//! free for training, and how far this policy reads its cameras at all.

use plotters::prelude::*;

use super::ranking::{percent, LayoutReport};
use super::result::LossFigure;
use crate::bench::report::plots::{finish, FONT, SIZE};

/// One candidate on the plot: its label, speed, and mean and largest loss change (%).
struct Point {
    label: String,
    speed: f64,
    mean: f64,
    max: f64,
    recommended: bool,
}

/// Draws the plot of `report`'s candidates whose loss was measured as SVG into `out`.
pub fn draw(out: &mut String, report: &LayoutReport) -> Result<(), String> {
    let points: Vec<Point> = (report.rows.iter().enumerate())
        .filter_map(|(n, row)| {
            let (mean, max) = row.loss.as_ref().and_then(LossFigure::mean_and_max)?;
            Some(Point {
                label: row.label.clone(),
                speed: report.speed(row).0.max(1e-9),
                mean: mean * 100.0,
                max: max * 100.0,
                recommended: report.recommended == Some(n),
            })
        })
        .collect();
    let floor = report.choose.max_loss_change * 100.0;
    let grey = report.loss_scale().map_or(0.0, |s| s.grey * 100.0);
    let (x_lo, x_hi) = (points.iter())
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.speed), hi.max(p.speed)));
    let y_hi = points.iter().map(|p| p.max).fold(floor.max(grey), f64::max) * 1.2;
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption("The step's loss change against speed", (FONT, 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((x_lo / 1.5..x_hi * 2.5).log_scale(), 0.0..y_hi)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(match report.relative {
            true => "samples/s against the base's (×, log scale)",
            false => "loader samples/s (log scale)",
        })
        .y_desc("|Δloss| / loss, % (mean, line to the largest)")
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| e.to_string())?;
    let across = |y: f64| vec![(x_lo / 1.5, y), (x_hi * 2.5, y)];
    for (y, colour, label) in [
        (floor, RGBColor(200, 40, 40), format!("max_loss_change {}", percent(floor / 100.0))),
        (grey, RGBColor(120, 120, 120), format!("grey frames {}", percent(grey / 100.0))),
    ] {
        chart
            .draw_series(LineSeries::new(across(y), colour.stroke_width(1)))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], colour));
    }
    let blue = RGBColor(31, 119, 180);
    for point in &points {
        let at = (point.speed, point.mean);
        chart
            .draw_series([PathElement::new(vec![at, (point.speed, point.max)], blue)])
            .map_err(|e| e.to_string())?;
        chart.draw_series([Circle::new(at, 6, blue.filled())]).map_err(|e| e.to_string())?;
        if point.recommended {
            chart
                .draw_series([Circle::new(at, 10, BLACK.stroke_width(2))])
                .map_err(|e| e.to_string())?;
        }
        chart
            .draw_series([
                EmptyElement::at(at) + Text::new(point.label.clone(), (9, -14), (FONT, 12))
            ])
            .map_err(|e| e.to_string())?;
    }
    finish(chart, &root)
}
