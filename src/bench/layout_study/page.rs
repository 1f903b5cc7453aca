//! A layout study's page: the recommendation on top, then every candidate's loader speed
//! against its bytes per frame (log scale), coloured by PSNR, the Pareto front through them and
//! the recommended one ringed, each hoverable (its layout, size, speed with its interval, PSNR
//! and why it was passed over); then report.md. The points are the SVG plot's.

use plotly::common::{
    ColorBar, ColorScale, ColorScalePalette, HoverInfo, Line, Marker, Mode, Orientation, Position,
    Title,
};
use plotly::layout::{Axis, AxisType, Layout, Legend};
use plotly::{Plot, Scatter};

use super::pareto::front;
use super::ranking::{percent, LayoutReport};
use crate::bench::format::rate;
use crate::bench::format::system_line;
use crate::bench::report::page::{plot_of, utc, Page};

/// The page of `report`, whose Markdown is `markdown`.
pub fn render(report: &LayoutReport, markdown: &str) -> String {
    let mut page = Page::new("feedbench layout study");
    let measured = report.rows.iter().find_map(|r| r.system.as_ref().zip(r.finished_unix_s));
    match measured {
        Some((system, when)) => page.meta(format!("Measured on {}, {}.", system_line(system), utc(when))),
        None => page.missing("These results were written by an older feedbench: they do not say the machine or the date they were measured on.".into()),
    }
    page.answer(report.recommendation());
    if !report.rows.is_empty() {
        page.plot("pareto", &axis_title(report), &pareto(report));
    }
    if let Some(scale) = report.loss_scale() {
        let heading = format!(
            "The step's loss change against speed (grey frames change it {}; the floor {})",
            percent(scale.grey),
            percent(report.choose.max_loss_change)
        );
        page.plot("loss", &heading, &loss(report));
    }
    page.details(markdown);
    page.render()
}

fn axis_title(report: &LayoutReport) -> String {
    match report.relative {
        true => "Speed against the base, by bytes per frame".into(),
        false => "Loader samples/s, by bytes per frame".into(),
    }
}

/// What a candidate's hover says.
fn hover(report: &LayoutReport, n: usize) -> String {
    let row = &report.rows[n];
    let (speed, low, high) = report.speed(row);
    let speed = match report.relative {
        true => format!("{speed:.2}× the base (95 % CI {low:.2} to {high:.2})"),
        false => format!("{} samples/s (95 % CI {} to {})", rate(speed), rate(low), rate(high)),
    };
    let verdict = match (report.recommended == Some(n), report.rejections[n].as_slice()) {
        (true, _) => "recommended".to_string(),
        (false, []) => "within the floors".to_string(),
        (false, why) => format!("passed over: {}", why.join("; ")),
    };
    format!(
        "{}<br>{:.0} bytes per frame<br>{speed}<br>PSNR {:.1} dB<br>{verdict}",
        row.label, row.bytes_per_frame, row.quality.psnr_db
    )
}

/// Each candidate's mean change of the loss (%) against its speed, the line from it to the
/// largest in its hover; the floor across.
fn loss(report: &LayoutReport) -> Plot {
    let measured: Vec<(usize, (f64, f64))> = (0..report.rows.len())
        .filter_map(|n| Some((n, report.rows[n].loss.as_ref()?.mean_and_max()?)))
        .collect();
    let speeds: Vec<f64> = measured.iter().map(|&(n, _)| report.speed(&report.rows[n]).0).collect();
    let x_title = if report.relative { "speed against the base (×)" } else { "loader samples/s" };
    let mut plot = plot_of(
        Layout::new()
            .legend(Legend::new().orientation(Orientation::Horizontal).y(-0.25))
            .x_axis(Axis::new().title(Title::with_text(x_title)).type_(AxisType::Log))
            .y_axis(Axis::new().title(Title::with_text("|Δloss| / loss, % (mean)"))),
    );
    let (low, high) =
        speeds.iter().fold((f64::INFINITY, 0.0f64), |(l, h), s| (l.min(*s), h.max(*s)));
    let floor = report.choose.max_loss_change * 100.0;
    plot.add_trace(
        Scatter::new(vec![low, high], vec![floor, floor])
            .name("max_loss_change")
            .mode(Mode::Lines)
            .line(Line::new().color("rgb(200, 40, 40)").width(1.0))
            .hover_info(HoverInfo::Skip),
    );
    let hover = |&(n, (mean, max)): &(usize, (f64, f64))| {
        format!(
            "{}<br>loss changed {} (at most {})",
            report.rows[n].label,
            percent(mean),
            percent(max)
        )
    };
    plot.add_trace(
        Scatter::new(speeds, measured.iter().map(|(_, (mean, _))| mean * 100.0).collect())
            .name("candidates")
            .mode(Mode::MarkersText)
            .text_position(Position::TopCenter)
            .text_array(measured.iter().map(|&(n, _)| report.rows[n].label.clone()).collect())
            .marker(Marker::new().size(12))
            .hover_text_array(measured.iter().map(hover).collect())
            .hover_info(HoverInfo::Text),
    );
    plot
}

fn pareto(report: &LayoutReport) -> Plot {
    let speed = |n: usize| report.speed(&report.rows[n]).0;
    let n = report.rows.len();
    let bytes: Vec<f64> = report.rows.iter().map(|r| r.bytes_per_frame).collect();
    let speeds: Vec<f64> = (0..n).map(speed).collect();
    let y_title = if report.relative { "speed against the base (×)" } else { "loader samples/s" };
    let mut plot = plot_of(
        Layout::new()
            .legend(Legend::new().orientation(Orientation::Horizontal).y(-0.25))
            .x_axis(Axis::new().title(Title::with_text("bytes per frame")).type_(AxisType::Log))
            .y_axis(Axis::new().title(Title::with_text(y_title))),
    );
    let (front_x, front_y): (Vec<f64>, Vec<f64>) =
        front(&bytes.iter().copied().zip(speeds.iter().copied()).collect::<Vec<_>>())
            .into_iter()
            .unzip();
    plot.add_trace(
        Scatter::new(front_x, front_y)
            .name("Pareto front")
            .mode(Mode::Lines)
            .line(Line::new().color("rgb(90, 90, 90)").width(1.0))
            .hover_info(HoverInfo::Skip),
    );
    let psnr: Vec<f64> = report.rows.iter().map(|r| r.quality.psnr_db.min(60.0)).collect();
    plot.add_trace(
        Scatter::new(bytes.clone(), speeds.clone())
            .name("candidates")
            .mode(Mode::MarkersText)
            .text_position(Position::TopCenter)
            .text_array(report.rows.iter().map(|r| r.label.clone()).collect())
            .marker(
                Marker::new()
                    .size(12)
                    .color_array(psnr)
                    // Red at 25 dB and below to blue at 45 and above, as the SVG's red to green.
                    .color_scale(ColorScale::Palette(ColorScalePalette::RdBu))
                    .reverse_scale(true)
                    .cmin(25.0)
                    .cmax(45.0)
                    .color_bar(ColorBar::new().title("PSNR dB")),
            )
            .hover_text_array((0..n).map(|i| hover(report, i)).collect())
            .hover_info(HoverInfo::Text),
    );
    if let Some(best) = report.recommended {
        plot.add_trace(
            Scatter::new(vec![bytes[best]], vec![speeds[best]])
                .name("recommended")
                .mode(Mode::Markers)
                .marker(
                    Marker::new()
                        .size(22)
                        .color("rgba(0, 0, 0, 0)")
                        .line(Line::new().color("black").width(2.0)),
                )
                .hover_text_array(vec![hover(report, best)])
                .hover_info(HoverInfo::Text),
        );
    }
    plot
}
