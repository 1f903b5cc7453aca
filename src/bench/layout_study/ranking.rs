//! The layout study's candidates ranked and judged: fastest first (against the base where
//! every candidate was measured in turn with it, else by samples/s), each held to the quality
//! floors and the size budget of `[choose]`, and the recommendation in words: the fastest
//! candidate within them, with the reason each faster one was passed over.

use std::fmt::Write as _;

use super::config::ChooseSection;
use super::result::{CandidateResult, LossFigure};
use crate::bench::format::{db, rate};
use crate::dataset::bytes::Bytes;

/// The candidates ranked and judged.
#[derive(Debug, Clone)]
pub struct LayoutReport {
    /// Fastest first (loader samples/s, warm).
    pub rows: Vec<CandidateResult>,
    /// The recommended candidate's position in `rows`.
    pub recommended: Option<usize>,
    /// Per row, why it is not acceptable (empty: it is).
    pub rejections: Vec<Vec<String>>,
    /// The floors and budget judged against.
    pub choose: ChooseSection,
    /// Whether rows are ranked by their speed against the base (every row was measured in
    /// turn with it) rather than by their samples/s.
    pub relative: bool,
}

impl LayoutReport {
    /// Ranks `results` and judges them against `choose`.
    pub fn new(mut results: Vec<CandidateResult>, choose: &ChooseSection) -> Self {
        let relative = results.iter().all(|r| r.speed_vs_base().is_some());
        let speed = |r: &CandidateResult| speed(r, relative);
        results.sort_by(|a, b| speed(b).0.total_cmp(&speed(a).0));
        let rejections: Vec<Vec<String>> = results.iter().map(|r| reasons(r, choose)).collect();
        let recommended = rejections.iter().position(Vec::is_empty);
        Self { rows: results, recommended, rejections, choose: choose.clone(), relative }
    }

    /// The speed rows are ranked by, with its interval: against the base (×) where every row
    /// has it, else samples/s.
    pub fn speed(&self, row: &CandidateResult) -> (f64, f64, f64) {
        speed(row, self.relative)
    }

    /// The recommendation, with each faster candidate and why it was passed over.
    pub fn recommendation(&self) -> String {
        let mut text = String::new();
        let floors = self.floors();
        let Some(best) = self.recommended else {
            let _ = writeln!(text, "No candidate meets {floors}.");
            return text;
        };
        let row = &self.rows[best];
        let _ = writeln!(
            text,
            "Recommended: {} ({}): {}, {} per frame ({:.2}× the source), PSNR {}, SSIM {:.4}{}{}.",
            row.label,
            row.name,
            self.speed_text(row),
            Bytes::new(row.bytes_per_frame),
            row.bytes_ratio(),
            db(row.quality.psnr_db),
            row.quality.ssim,
            row.loss.as_ref().map_or(String::new(), loss_text),
            if floors.is_empty() { String::new() } else { format!(", within {floors}") }
        );
        if let Some(next) = self.rows.get(best + 1) {
            if self.speed(next).2 >= self.speed(row).1 {
                let _ = writeln!(
                    text,
                    "  Not faster than {} beyond noise (their 95 % intervals overlap); choose \
                     between them on size and quality.",
                    next.label
                );
            }
        }
        if let Some(blind) = self.blind_policy() {
            let _ = writeln!(text, "{blind}");
        }
        for (row, reasons) in self.rows.iter().zip(&self.rejections).take(best) {
            let _ = writeln!(
                text,
                "  Faster but rejected: {} ({}): {}.",
                row.label,
                self.speed_text(row),
                reasons.join("; ")
            );
        }
        text
    }

    /// The loss column's scale, from the first candidate whose loss was measured (every one
    /// shares the source's steps): None without a loss column.
    pub fn loss_scale(&self) -> Option<LossScale> {
        self.rows.iter().filter_map(|r| r.loss.as_ref()).find_map(|loss| {
            Some(LossScale {
                steps: loss.changes().len(),
                grey: loss.blind_change()?,
                spread: loss.source_spread(),
            })
        })
    }

    /// Where the policy's loss hardly depends on its cameras (grey frames move it no more
    /// than the floor): the loss column cannot rule a candidate out, said in words.
    fn blind_policy(&self) -> Option<String> {
        let scale = self.loss_scale()?;
        (scale.grey <= self.choose.max_loss_change).then(|| {
            format!(
                "  The loss column cannot tell candidates apart: grey frames in place of every \
                 camera change this policy's loss only {} (max_loss_change {}), so it hardly \
                 reads its cameras (an untrained policy, or one led by its state). Judge by the \
                 pixels, or set [loss.policy] for a policy that reads them.",
                percent(scale.grey),
                percent(self.choose.max_loss_change)
            )
        })
    }

    /// `412 samples/s`, and against the base where measured: `412 samples/s, 1.24× the base`.
    fn speed_text(&self, row: &CandidateResult) -> String {
        let samples = format!("{} samples/s", rate(row.loader.samples_per_s));
        match (self.relative, row.vs_base.is_some()) {
            (true, true) => format!("{samples}, {:.2}× the base", self.speed(row).0),
            _ => samples,
        }
    }

    fn floors(&self) -> String {
        let c = &self.choose;
        let mut parts = Vec::new();
        if let Some(psnr) = c.min_psnr {
            parts.push(format!("PSNR ≥ {psnr} dB"));
        }
        if let Some(ssim) = c.min_ssim {
            parts.push(format!("SSIM ≥ {ssim}"));
        }
        if let Some(ratio) = c.max_bytes_ratio {
            parts.push(format!("bytes ≤ {ratio}× the source's"));
        }
        if self.rows.iter().any(|r| r.loss.as_ref().is_some_and(|l| l.mean_and_max().is_some())) {
            parts.push(format!("loss change ≤ {}", percent(c.max_loss_change)));
        }
        parts.join(", ")
    }
}

/// What a study's loss figures are read against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossScale {
    /// Steps each loss was taken over.
    pub steps: usize,
    /// The mean change with every camera frame grey: the most images move the policy's loss.
    pub grey: f64,
    /// How far the source's loss moves from batch to batch (its standard deviation over its
    /// mean), with two steps or more.
    pub spread: Option<f64>,
}

/// A fraction as a percentage: `0.42 %`.
pub fn percent(fraction: f64) -> String {
    format!("{:.2} %", fraction * 100.0)
}

/// `, loss changed 0.42 % (at most 0.90 %)`, or why it was not measured.
fn loss_text(loss: &LossFigure) -> String {
    match (loss.mean_and_max(), loss) {
        (Some((mean, max)), _) => {
            format!(", loss changed {} (at most {})", percent(mean), percent(max))
        }
        (None, LossFigure::Unmeasured(why)) => format!(", loss not measured ({why})"),
        (None, _) => String::new(),
    }
}

fn speed(row: &CandidateResult, relative: bool) -> (f64, f64, f64) {
    match row.speed_vs_base().filter(|_| relative) {
        Some(speed) => speed,
        None => {
            let median = row.loader.samples_per_s;
            let (low, high) = row.loader.samples_per_s_interval.unwrap_or((median, median));
            (median, low, high)
        }
    }
}

/// Why `row` falls short of `choose`.
fn reasons(row: &CandidateResult, choose: &ChooseSection) -> Vec<String> {
    let mut reasons = Vec::new();
    if let Some(min) = choose.min_psnr.filter(|min| row.quality.psnr_db < *min) {
        reasons.push(format!("PSNR {} < min_psnr {min} dB", db(row.quality.psnr_db)));
    }
    if let Some(min) = choose.min_ssim.filter(|min| row.quality.ssim < *min) {
        reasons.push(format!("SSIM {:.4} < min_ssim {min}", row.quality.ssim));
    }
    if let Some(max) = choose.max_bytes_ratio.filter(|max| row.bytes_ratio() > *max) {
        reasons
            .push(format!("{:.2}× the source's bytes > max_bytes_ratio {max}", row.bytes_ratio()));
    }
    let change = row.loss.as_ref().and_then(LossFigure::mean_and_max).map(|(mean, _)| mean);
    if let Some(change) = change.filter(|change| *change > choose.max_loss_change) {
        reasons.push(format!(
            "loss changed {} > max_loss_change {}",
            percent(change),
            percent(choose.max_loss_change)
        ));
    }
    reasons
}
