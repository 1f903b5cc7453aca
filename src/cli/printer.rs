//! The one watcher of every study: [`Printer`] implements the studies' [`Events`] for the
//! terminal, as a progress bar (cells done and what runs now, or runs counted) and lines on
//! stderr (what is prepared, each configuration a tune measures).

use feedbench::bench::events::{CellPhase, Events, Measured, Measuring};
use feedbench::bench::format::{millis, rate};
use indicatif::{ProgressBar, ProgressStyle};

/// What a study says, shown on the terminal.
pub struct Printer {
    /// The bar, where the command shows one (hidden for `--json`).
    bar: Option<ProgressBar>,
    /// Whether a tune's step and its demand were said (once, with the first measurement).
    said_demand: bool,
}

impl Printer {
    /// Lines on stderr, no bar.
    pub fn lines() -> Self {
        Self { bar: None, said_demand: false }
    }

    /// A sweep's bar: cells done, time, and what runs now.
    pub fn cells() -> Self {
        let style = ProgressStyle::with_template(
            "{bar:30} {pos}/{len} cells  {elapsed_precise} (about {eta} left)  {msg}",
        )
        .expect("a valid template");
        Self { bar: Some(ProgressBar::new(0).with_style(style)), said_demand: false }
    }

    /// A bar of `runs` runs showing `message`, one counted as each starts; hidden with `json`.
    pub fn runs(runs: usize, json: bool, message: &'static str) -> Self {
        Self { bar: Some(super::progress_bar(runs, json, message)), said_demand: false }
    }

    /// Clears the bar, once the study is done.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Events for Printer {
    fn said(&mut self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    fn cell_phase(&mut self, phase: CellPhase<'_>) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{}: {}", phase.phase, phase.cell));
        }
    }

    fn cells_done(&mut self, done: usize, total: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    fn run_starts(&mut self, _of: &str, _repeat: usize) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    fn measuring(&mut self, measuring: Measuring<'_>) {
        let Measuring { workers, prefetch, why, steps, left } = measuring;
        let mut time = format!("{:.0} s in", left.elapsed_s);
        if let Some(each) = left.per_configuration_s {
            time.push_str(&format!(", about {each:.0} s a configuration"));
        }
        if let Some(budget) = left.budget_left_s {
            time.push_str(&format!(", {:.0} s of the budget left", budget.max(0.0)));
        }
        eprintln!(
            "tune: measuring {workers} × prefetch {prefetch} ({why}; up to {steps} steps; {time}) …"
        )
    }

    fn measured(&mut self, measured: &Measured) {
        if !std::mem::replace(&mut self.said_demand, true) {
            eprintln!(
                "tune: the step takes {} ms: it asks for {} samples/s",
                millis(measured.step_ms),
                rate(measured.asked_samples_per_s)
            );
        }
        let when = measured.seconds.map_or("measured before".into(), |s| format!("{s:.0} s"));
        let loader = measured
            .loader_samples_per_s
            .map_or(String::new(), |r| format!("loader {} samples/s, ", rate(r)));
        eprintln!(
            "tune:   {} × prefetch {}: {loader}train {} samples/s, {:.1} % input-bound ({when})",
            measured.workers,
            measured.prefetch,
            rate(measured.train_samples_per_s),
            measured.input_bound_pct
        );
    }

    fn budget_ran_out(&mut self, elapsed_s: f64) {
        eprintln!(
            "tune: the budget ran out after {elapsed_s:.0} s: the answer is the best measured so \
             far"
        );
    }
}
