//! The layout study's candidates ranked and judged: fastest first (against the base where
//! every candidate was measured in turn with it, else by samples/s), each held to the quality
//! floors and the size budget of `[choose]`, and the recommendation in words: the fastest
//! candidate within them, with the reason each faster one was passed over.

use std::fmt::Write as _;

use super::config::ChooseSection;
use super::result::CandidateResult;
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
            "Recommended: {} ({}): {}, {} per frame ({:.2}× the source), PSNR {}, SSIM {:.4}{}.",
            row.label,
            row.name,
            self.speed_text(row),
            Bytes::new(row.bytes_per_frame),
            row.bytes_ratio(),
            db(row.quality.psnr_db),
            row.quality.ssim,
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
        parts.join(", ")
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
    reasons
}
