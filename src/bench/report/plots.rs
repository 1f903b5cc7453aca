//! The report's SVG plots, drawn with plotters' SVG backend (text stays `<text>` elements, so no
//! font files are needed). Per plot group: train samples/s against workers, one line per batch
//! size with the model ceiling dashed in the same colour, and the input-bound % as a heatmap
//! over workers × batch. Where a sweep measured both loaders, each batch size has a line (and a
//! heatmap row) per loader: the native loader's solid, LeRobot's dotted. Where a cell was
//! measured at several prefetch depths, both plots show the depth with the best train
//! throughput, except at the recommended workers, where they show the recommended depth (the
//! heatmap marks that cell).

use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::model::{PlotGroup, Report, Row};
use crate::bench::export::{Exporter, Output, RenderError, Svg};
use crate::loader::lerobot::LoaderBackend;

/// Every plot's size, pixels.
pub(crate) const SIZE: (u32, u32) = (900, 560);
/// Every plot's font family (the SVG names it; the viewer draws it).
pub(crate) const FONT: &str = "sans-serif";
/// Line colours, one per batch size (Tableau 10).
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

impl Exporter<Report> for Svg {
    /// Every plot group's two SVG files.
    fn export(&self, report: &Report) -> Result<Vec<Output>, RenderError> {
        let mut files = Vec::new();
        for plot in &report.plots {
            let curves = curves(report, plot);
            files.push(svg(&plot.train_file, |out| train_vs_workers(out, plot, &curves))?);
            files.push(svg(&plot.heatmap_file, |out| heatmap(out, plot, &curves))?);
        }
        Ok(files)
    }
}

/// The SVG file `name` that `draw` draws.
pub(crate) fn svg(
    name: &str,
    draw: impl FnOnce(&mut String) -> Result<(), String>,
) -> Result<Output, RenderError> {
    let mut text = String::new();
    draw(&mut text).map_err(|what| RenderError { name: name.to_string(), what })?;
    Ok(Output::new(name, text))
}

/// One batch size and loader of a plot group: per workers, the row with the best train
/// throughput (the recommended row at the recommended workers).
pub(super) struct Curve<'a> {
    /// Its batch size.
    pub(super) batch: usize,
    /// The loader, named in labels where the plot has both.
    loader: Option<LoaderBackend>,
    /// Per workers, the row plotted.
    pub(super) points: Vec<&'a Row>,
    /// The recommended (workers, prefetch) of this batch size.
    pub(super) recommended: Option<(usize, usize)>,
}

impl Curve<'_> {
    /// Its heatmap row: `16`, or `16, LeRobot` where the plot has both loaders.
    pub(super) fn row_label(&self) -> String {
        match self.loader {
            None => self.batch.to_string(),
            Some(LoaderBackend::Native) => format!("{}, native", self.batch),
            Some(LoaderBackend::Lerobot) => format!("{}, LeRobot", self.batch),
            Some(LoaderBackend::LerobotTrain) => format!("{}, lerobot-train", self.batch),
            Some(LoaderBackend::FeedbenchLerobotTrain) => {
                format!("{}, feedbench-lerobot-train", self.batch)
            }
        }
    }

    /// Its line's label: `batch 16`, or `batch 16, LeRobot`.
    pub(super) fn label(&self) -> String {
        format!("batch {}", self.row_label())
    }
}

/// The curves of `plot`: one per batch size (and loader, where it has both).
pub(super) fn curves<'a>(report: &'a Report, plot: &PlotGroup) -> Vec<Curve<'a>> {
    let rows = || plot.rows.iter().map(|&i| &report.rows[i]);
    let both = rows().any(|r| r.knobs.loader != rows().next().expect("a row").knobs.loader);
    let mut curves: Vec<Curve> = Vec::new();
    for row in rows() {
        let loader = both.then_some(row.knobs.loader);
        let key = |c: &Curve| c.batch == row.knobs.knobs.batch_size && c.loader == loader;
        let curve = match curves.iter_mut().position(|c| key(c)) {
            Some(c) => &mut curves[c],
            None => {
                curves.push(Curve {
                    batch: row.knobs.knobs.batch_size,
                    loader,
                    points: Vec::new(),
                    recommended: None,
                });
                curves.last_mut().expect("just pushed")
            }
        };
        if row.recommended {
            curve.recommended = Some((row.knobs.knobs.workers, row.knobs.knobs.prefetch));
        }
        match curve.points.iter_mut().find(|p| p.knobs.knobs.workers == row.knobs.knobs.workers) {
            Some(p) if row.recommended => *p = row,
            Some(p) if !p.recommended && row.train_samples_per_s > p.train_samples_per_s => {
                *p = row
            }
            Some(_) => {}
            None => curve.points.push(row),
        }
    }
    for curve in &mut curves {
        curve.points.sort_by_key(|r| r.knobs.knobs.workers);
    }
    curves.sort_by_key(|c| (c.batch, c.loader.map(|l| l.name())));
    curves
}

/// The colour of a batch size: one per batch size, shared by both loaders' curves.
fn colour(curves: &[Curve], curve: &Curve) -> RGBColor {
    let mut batches: Vec<usize> = curves.iter().map(|c| c.batch).collect();
    batches.dedup();
    let k = batches.iter().position(|&b| b == curve.batch).unwrap_or(0);
    COLOURS[k % COLOURS.len()]
}

fn title(what: &str, plot: &PlotGroup) -> String {
    if plot.label.is_empty() {
        what.to_string()
    } else {
        format!("{what} ({})", plot.label)
    }
}

fn train_vs_workers(out: &mut String, plot: &PlotGroup, curves: &[Curve]) -> Result<(), String> {
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let workers = curves.iter().flat_map(|c| c.points.iter().map(|r| r.knobs.knobs.workers as i32));
    let (lo, hi) = (workers.clone().min().unwrap_or(0), workers.max().unwrap_or(1));
    let hi = hi.max(lo + 1);
    let top = train_top(curves);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };

    let mut chart = ChartBuilder::on(&root)
        .caption(title("Train samples/s against workers", plot), (FONT, 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(lo..hi, 0.0..top)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("workers")
        .y_desc(if curves.iter().any(|c| c.points.iter().any(|r| r.train_interval.is_some())) {
            "train samples/s (bars: 95 % interval)"
        } else {
            "train samples/s"
        })
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .x_labels(((hi - lo) as usize + 1).min(17))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| e.to_string())?;
    for (k, curve) in curves.iter().enumerate() {
        let colour = colour(curves, curve);
        let points: Vec<(i32, f64)> = curve
            .points
            .iter()
            .map(|r| (r.knobs.knobs.workers as i32, r.train_samples_per_s))
            .filter(|(_, y)| y.is_finite())
            .collect();
        draw_train_line(&mut chart, curve, colour, &points)?;
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))
            .map_err(|e| e.to_string())?;
        // The 95 % interval of each point, from its steps.
        let intervals = curve.points.iter().filter(|r| r.train_samples_per_s.is_finite());
        let bars = intervals.filter_map(|r| {
            let (low, high) = r.train_interval?;
            let x = r.knobs.knobs.workers as i32;
            let style = colour.stroke_width(1);
            Some(ErrorBar::new_vertical(x, low, r.train_samples_per_s, high, style, 8))
        });
        chart.draw_series(bars).map_err(|e| e.to_string())?;
        // Both loaders of a batch size feed the same model: its ceiling once.
        let drawn = curves[..k].iter().any(|c| c.batch == curve.batch);
        if let Some(c) = ceiling(curve).filter(|_| !drawn) {
            chart
                .draw_series(DashedLineSeries::new(
                    [(lo, c), (hi, c)],
                    8,
                    5,
                    colour.stroke_width(1),
                ))
                .map_err(|e| e.to_string())?
                .label(format!("model ceiling, batch {}", curve.batch))
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (9, 0)], colour.stroke_width(1))
                        + PathElement::new(vec![(15, 0), (24, 0)], colour.stroke_width(1))
                });
        }
    }
    finish(chart, &root)
}

/// A curve's model ceiling: the median of its rows' model samples/s, where one is finite.
fn ceiling(curve: &Curve) -> Option<f64> {
    let ceilings = curve.points.iter().map(|r| r.model_samples_per_s).filter(|x| x.is_finite());
    let median = crate::measure::stats::median(ceilings.clone());
    (ceilings.count() > 0).then_some(median)
}

/// The highest train samples/s, interval or ceiling of `curves`: the plot's top, before its
/// headroom.
fn train_top(curves: &[Curve]) -> f64 {
    curves
        .iter()
        .flat_map(|c| {
            let highs = c.points.iter().filter_map(|r| r.train_interval.map(|(_, high)| high));
            c.points.iter().map(|r| r.train_samples_per_s).chain(highs).chain(ceiling(c))
        })
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max)
}

/// A curve's train line, labelled in the legend: dotted for LeRobot's loader, solid for the
/// native one.
fn draw_train_line<'a>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordi32, RangedCoordf64>>,
    curve: &Curve,
    colour: RGBColor,
    points: &[(i32, f64)],
) -> Result<(), String> {
    let label = format!("train, {}", curve.label());
    if curve.loader.is_some_and(|l| !l.is_native()) {
        chart
            .draw_series(DashedLineSeries::new(points.to_vec(), 3, 4, colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (3, 0)], colour.stroke_width(2))
                    + PathElement::new(vec![(7, 0), (10, 0)], colour.stroke_width(2))
                    + PathElement::new(vec![(14, 0), (17, 0)], colour.stroke_width(2))
                    + PathElement::new(vec![(21, 0), (24, 0)], colour.stroke_width(2))
            });
    } else {
        chart
            .draw_series(LineSeries::new(points.to_vec(), colour.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(2))
            });
    }
    Ok(())
}

/// Draws the legend as every plot has it (lower right, on white) and writes the file.
pub(crate) fn finish<'a, X, Y>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
) -> Result<(), String>
where
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// The colour of an input-bound share: green under the moderate threshold (5 %), through
/// yellow and orange at the high one (20 %), to red at 100 %.
pub fn heat_colour(percent: f64) -> RGBColor {
    const STOPS: [(f64, (f64, f64, f64)); 4] = [
        (0.0, (26.0, 152.0, 80.0)),
        (5.0, (217.0, 239.0, 139.0)),
        (20.0, (253.0, 174.0, 97.0)),
        (100.0, (215.0, 48.0, 39.0)),
    ];
    let p = if percent.is_finite() { percent.clamp(0.0, 100.0) } else { 100.0 };
    let k = STOPS.iter().rposition(|(at, _)| *at <= p).unwrap_or(0).min(STOPS.len() - 2);
    let ((a, ca), (b, cb)) = (STOPS[k], STOPS[k + 1]);
    let t = ((p - a) / (b - a)).clamp(0.0, 1.0);
    let mix = |x: f64, y: f64| (x + (y - x) * t).round() as u8;
    RGBColor(mix(ca.0, cb.0), mix(ca.1, cb.1), mix(ca.2, cb.2))
}

fn heatmap(out: &mut String, plot: &PlotGroup, curves: &[Curve]) -> Result<(), String> {
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (main, bar) = root.split_horizontally(SIZE.0 - 130);
    let mut workers: Vec<usize> =
        curves.iter().flat_map(|c| c.points.iter().map(|r| r.knobs.knobs.workers)).collect();
    workers.sort();
    workers.dedup();
    let labels: Vec<String> = curves.iter().map(Curve::row_label).collect();
    let (nx, ny) = (workers.len().max(1) as f64, labels.len().max(1) as f64);

    let mut chart = ChartBuilder::on(&main)
        .caption(title("Input-bound % (median) over workers × batch", plot), (FONT, 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..nx - 0.5, -0.5..ny - 0.5)
        .map_err(|e| e.to_string())?;
    let worker_labels: Vec<String> = workers.iter().map(usize::to_string).collect();
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("workers")
        .y_desc(if curves.iter().any(|c| c.loader.is_some()) {
            "batch size, loader"
        } else {
            "batch size"
        })
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .x_labels(workers.len() + 1)
        .y_labels(labels.len() + 1)
        .x_label_formatter(&|x| label_at(&worker_labels, x))
        .y_label_formatter(&|y| label_at(&labels, y))
        .draw()
        .map_err(|e| e.to_string())?;
    for (j, curve) in curves.iter().enumerate() {
        for (i, w) in workers.iter().enumerate() {
            let (x, y) = (i as f64, j as f64);
            let cell = [(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)];
            let (fill, text) = match curve.points.iter().find(|r| r.knobs.knobs.workers == *w) {
                Some(row) => {
                    (heat_colour(row.input_bound_pct), format!("{:.1} %", row.input_bound_pct))
                }
                None => (RGBColor(225, 225, 225), "not measured".to_string()),
            };
            chart
                .draw_series([
                    Rectangle::new(cell, fill.filled()),
                    Rectangle::new(cell, WHITE.stroke_width(2)),
                ])
                .map_err(|e| e.to_string())?;
            let centred = |size: u32| {
                TextStyle::from((FONT, size).into_font())
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Center))
            };
            chart.draw_series([Text::new(text, (x, y), centred(15))]).map_err(|e| e.to_string())?;
            if let Some((_, prefetch)) = curve.recommended.filter(|(rw, _)| rw == w) {
                let inset = [(x - 0.47, y - 0.47), (x + 0.47, y + 0.47)];
                chart
                    .draw_series([
                        Rectangle::new(inset, BLACK.stroke_width(3)).into_dyn(),
                        Text::new(
                            format!("recommended, prefetch {prefetch}"),
                            (x, y - 0.2),
                            centred(12),
                        )
                        .into_dyn(),
                    ])
                    .map_err(|e| e.to_string())?;
            }
        }
    }

    colour_scale(&bar)?;
    root.present().map_err(|e| e.to_string())
}

/// The label of the heatmap's cell at coordinate `x` (its index), empty between cells.
fn label_at(values: &[String], x: &f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < values.len() {
        values[i as usize].clone()
    } else {
        String::new()
    }
}

/// The heatmap's colour scale, 0 to 100 %, in `bar`.
fn colour_scale(bar: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>) -> Result<(), String> {
    // The colour scale, 0 to 100 %.
    let mut scale = ChartBuilder::on(bar)
        .margin_top(60)
        .margin_bottom(70)
        .margin_right(20)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..1.0, 0.0..100.0)
        .map_err(|e| e.to_string())?;
    scale
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_desc("input-bound %")
        .axis_desc_style((FONT, 14))
        .label_style((FONT, 12))
        .y_labels(11)
        .draw()
        .map_err(|e| e.to_string())?;
    scale
        .draw_series((0..100).map(|p| {
            let p = p as f64;
            Rectangle::new([(0.0, p), (1.0, p + 1.0)], heat_colour(p + 0.5).filled())
        }))
        .map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heat_colours_follow_the_thresholds() {
        assert_eq!(heat_colour(0.0), RGBColor(26, 152, 80));
        assert_eq!(heat_colour(5.0), RGBColor(217, 239, 139));
        assert_eq!(heat_colour(20.0), RGBColor(253, 174, 97));
        assert_eq!(heat_colour(100.0), RGBColor(215, 48, 39));
        assert_eq!(heat_colour(250.0), heat_colour(100.0));
        let mid = heat_colour(60.0);
        assert!(mid.0 > 215 && mid.1 > 48 && mid.1 < 174, "{mid:?}");
    }
}
