//! The layout study's Pareto plot (SVG): loader samples/s against bytes per frame (log scale),
//! a labelled point per candidate coloured by its PSNR, the recommended one ringed, and the
//! Pareto front (no other candidate is both smaller and faster) drawn through its points.

use plotters::prelude::*;

use crate::bench::report::plots::{finish, FONT};

/// Larger than the sweep's plots: a label beside each point.
const SIZE: (u32, u32) = (960, 620);

/// The colour of a PSNR: red at 25 dB and below, through yellow at 35 dB, to green at 45 dB
/// and above (identical frames included).
fn psnr_colour(db: f64) -> RGBColor {
    let t = ((db.min(45.0) - 25.0) / 20.0).clamp(0.0, 1.0);
    let (r, g) = if t < 0.5 {
        (215.0, 48.0 + 2.0 * t * 170.0)
    } else {
        (215.0 - (t - 0.5) * 2.0 * 189.0, 218.0)
    };
    RGBColor(r as u8, g as u8, 60)
}

/// An axis label of bytes: `500 B`, `2 kB`, `1.5 MB`.
fn bytes_label(x: f64) -> String {
    match x {
        x if x >= 1e6 => format!("{} MB", x / 1e6),
        x if x >= 1e3 => format!("{} kB", x / 1e3),
        x => format!("{x:.0} B"),
    }
}

/// The candidates on the Pareto front, by increasing bytes per frame: each is faster than
/// every candidate at most its size.
pub(super) fn front(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let mut best = f64::NEG_INFINITY;
    sorted
        .into_iter()
        .filter(|&(_, speed)| {
            let on = speed > best;
            best = best.max(speed);
            on
        })
        .collect()
}

/// One candidate on the plot.
#[derive(Debug, Clone, PartialEq)]
pub struct ParetoPoint {
    /// How it differs from the base.
    pub label: String,
    /// Bytes per camera frame.
    pub bytes: f64,
    /// Its speed: against the base (×) or samples/s.
    pub speed: f64,
    /// Mean PSNR, dB.
    pub psnr_db: f64,
    /// Whether it is the recommended candidate (ringed).
    pub recommended: bool,
}

/// Draws the plot of `candidates` as SVG into `out`; `relative` says whether speeds are against
/// the base (×) rather than samples/s.
pub fn draw(out: &mut String, candidates: &[ParetoPoint], relative: bool) -> Result<(), String> {
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let points: Vec<(f64, f64)> = candidates.iter().map(|c| (c.bytes.max(1.0), c.speed)).collect();
    let (x_lo, x_hi) =
        points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    // Speeds span orders of magnitude (raw frames to long GOPs): a log scale keeps them apart.
    let (y_lo, y_hi) =
        points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let (y_lo, y_hi) = (y_lo.max(1e-9) / 1.5, y_hi.max(1e-9) * 1.5);
    let mut chart = ChartBuilder::on(&root)
        .caption("Loader speed against bytes per frame", (FONT, 22))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d((x_lo / 1.6..x_hi * 4.0).log_scale(), (y_lo..y_hi).log_scale())
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("bytes per camera frame (log scale)")
        .y_desc(if relative {
            "samples/s against the base's (×, log scale; runs interleaved with it)"
        } else {
            "loader samples/s (warm page cache, log scale)"
        })
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 13))
        .x_label_formatter(&|x| bytes_label(*x))
        .y_label_formatter(&|y| if relative { format!("{y:.2}") } else { format!("{y:.0}") })
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(LineSeries::new(front(&points), RGBColor(90, 90, 90).stroke_width(1)))
        .map_err(|e| e.to_string())?
        .label("Pareto front")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], RGBColor(90, 90, 90)));
    for (n, (candidate, &point)) in candidates.iter().zip(&points).enumerate() {
        let colour = psnr_colour(candidate.psnr_db);
        chart.draw_series([Circle::new(point, 6, colour.filled())]).map_err(|e| e.to_string())?;
        if candidate.recommended {
            chart
                .draw_series([Circle::new(point, 10, BLACK.stroke_width(2))])
                .map_err(|e| e.to_string())?;
        }
        let psnr = if candidate.psnr_db.is_infinite() {
            "∞".to_string()
        } else {
            format!("{:.1}", candidate.psnr_db)
        };
        let label = format!("{} ({psnr} dB)", candidate.label);
        // Candidates that store the same bytes (the same encoding in another file layout or
        // place) sit on top of each other: their labels are stacked.
        let below = points[..n].iter().filter(|p| (p.0 / point.0 - 1.0).abs() < 0.01).count();
        let offset = (9, -14 + 14 * below as i32);
        chart
            .draw_series([EmptyElement::at(point) + Text::new(label, offset, (FONT, 12))])
            .map_err(|e| e.to_string())?;
    }
    finish(chart, &root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_keeps_each_candidate_faster_than_all_smaller_ones() {
        let points = [(100.0, 50.0), (200.0, 40.0), (300.0, 80.0), (50.0, 10.0), (400.0, 80.0)];
        assert_eq!(front(&points), vec![(50.0, 10.0), (100.0, 50.0), (300.0, 80.0)]);
    }

    #[test]
    fn psnr_colours_run_from_red_to_green() {
        assert_eq!(psnr_colour(20.0), psnr_colour(25.0));
        assert_eq!(psnr_colour(f64::INFINITY), psnr_colour(45.0));
        let (low, high) = (psnr_colour(25.0), psnr_colour(45.0));
        assert!(low.0 > low.1 && high.1 > high.0, "{low:?} {high:?}");
    }
}
