//! The run judged from its log: the input-bound share of its steps, their spread, the verdict
//! and what to try.

use std::fmt;

use serde::Serialize;

use super::epoch_stall::EpochStall;
use super::read::{LoggedStep, TrainLog};
use crate::measure::stats::Stats;
use crate::measure::verdict::Verdict;

impl TrainLog {
    /// The run's input-bound share and its spread. The first logged interval is left out
    /// where there are others: it holds the workers' start and the first batches.
    pub fn summary(&self) -> LogSummary {
        let kept = if self.steps.len() > 1 { &self.steps[1..] } else { &self.steps[..] };
        let (data, total) =
            kept.iter().fold((0.0, 0.0), |(d, t), s| (d + s.data_s, t + s.data_s + s.update_s));
        let share_pct = if total > 0.0 { 100.0 * data / total } else { 0.0 };
        let shares = Stats::of_ms(kept.iter().map(LoggedStep::input_bound_pct));
        LogSummary {
            runs: self.runs,
            run_line: self.run_line,
            logged_steps: self.steps.len(),
            kept_steps: kept.len(),
            share_pct,
            median_pct: shares.median_ms,
            p95_pct: shares.p95_ms,
            min_pct: shares.min_ms,
            max_pct: shares.max_ms,
            data_s: Stats::of_ms(kept.iter().map(|s| s.data_s)).median_ms,
            update_s: Stats::of_ms(kept.iter().map(|s| s.update_s)).median_ms,
            verdict: Verdict::of(share_pct),
            num_workers: self.num_workers,
            batch_size: self.batch_size,
            epoch_stall: self.epoch_stall(),
            judged: self.steps.len() > 1,
        }
    }
}

/// The run's input-bound share, its spread and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogSummary {
    /// The runs the log holds (counters that go back begin another); the last is read.
    pub runs: usize,
    /// The line of the last run's first logged step.
    pub run_line: usize,
    /// Logged steps of the run read.
    pub logged_steps: usize,
    /// Those the figures are made of (all but the first, where there are several).
    pub kept_steps: usize,
    /// Time-weighted input-bound share of the kept steps, percent: what the run lost.
    pub share_pct: f64,
    /// Median of the logged steps' shares, percent.
    pub median_pct: f64,
    /// Their 95th percentile, percent.
    pub p95_pct: f64,
    /// Their least, percent.
    pub min_pct: f64,
    /// Their most, percent.
    pub max_pct: f64,
    /// Median `data_s` of a logged step, seconds.
    pub data_s: f64,
    /// Median `updt_s` of a logged step, seconds.
    pub update_s: f64,
    /// The verdict on the share.
    pub verdict: Verdict,
    /// The run's `num_workers`, where the log holds its config.
    pub num_workers: Option<usize>,
    /// The run's `batch_size`, where the log holds its config.
    pub batch_size: Option<usize>,
    /// The stall at epoch starts, where the log shows one.
    pub epoch_stall: Option<EpochStall>,
    /// Whether the figures judge the run: false where the only logged step is the first (the
    /// workers' start-up), whose share and verdict say nothing of the run.
    pub judged: bool,
}

impl LogSummary {
    /// What to try, in words.
    pub fn advice(&self) -> String {
        let workers = self.num_workers.map_or(String::new(), |n| format!(" (it had {n})"));
        match self.verdict {
            Verdict::HighlyInputBound | Verdict::ModeratelyInputBound => format!(
                "The step waits for its batches. More --num_workers{workers} helps while cores \
                 are free: `feedbench tune --lerobot-train \"YOUR ARGUMENTS\" --step-ms {:.0}` \
                 measures how many feed a step this long, on your own run. data_s also counts \
                 the main process's conversion of the frames and the policy's preprocessor, \
                 which no worker count moves: with --policy.device=cuda they run on the device.",
                self.update_s * 1e3,
            ),
            Verdict::NotInputBound => format!(
                "The loader keeps up: the update dominates the step. Fewer --num_workers{workers} \
                 would free cores and memory; `feedbench tune --lerobot-train \"YOUR ARGUMENTS\" \
                 --step-ms {:.0}` says how few still feed it.",
                self.update_s * 1e3
            ),
        }
    }
}

impl fmt::Display for LogSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.runs > 1 {
            writeln!(
                f,
                "The log holds {} runs (its step: or epch: counters go back, as where runs \
                 resumed from a checkpoint are appended to one file): the last, from line {}, \
                 is read.",
                self.runs, self.run_line
            )?;
        }
        if !self.judged {
            return writeln!(
                f,
                "1 logged step, the first: {:.1} % of it went to input, but it holds the workers' \
                 start-up and the first batches, and says nothing of the steps after it. Log \
                 more steps (a smaller --log_freq, or a longer run) and read the log again.",
                self.share_pct
            );
        }
        let left_out = if self.kept_steps < self.logged_steps {
            " (the first, the workers' start, left out)"
        } else {
            ""
        };
        writeln!(
            f,
            "{} logged steps{left_out}: {:.1} % of the step spent on input ({}: {}).",
            self.logged_steps,
            self.share_pct,
            self.verdict,
            self.verdict.dominant_side()
        )?;
        writeln!(
            f,
            "Per logged step: median {:.1} %, p95 {:.1} %, from {:.1} to {:.1} %; data_s {:.3} s \
             against updt_s {:.3} s (medians).",
            self.median_pct, self.p95_pct, self.min_pct, self.max_pct, self.data_s, self.update_s
        )?;
        if let Some(stall) = &self.epoch_stall {
            writeln!(f, "{stall}")?;
        }
        writeln!(f, "{}", self.advice())
    }
}
