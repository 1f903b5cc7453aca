//! A `lerobot-train` log, read (nothing is measured): each logged step's `data_s` (its
//! `dataloading_s`: the wait for the next batch, the conversion of its frames and the policy's
//! preprocessor, all in the main process) against its `updt_s` (`update_s`: forward, backward
//! and the optimizer), averaged by lerobot-train over each logging interval. The input-bound
//! share of a step is `data_s / (data_s + updt_s)`, the one feedbench's train phase gives; the
//! run's verdict is [`Verdict::of`] its time-weighted share, with the spread over the logged
//! steps beside it.

use std::fmt;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::measure::stats::Stats;
use crate::measure::verdict::Verdict;

/// One logged step of the run: lerobot-train's averages over its logging interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoggedStep {
    /// The step as the log writes it (`step:1K` reads as 1000: LeRobot rounds it).
    pub step: f64,
    /// Seconds a step waited for and prepared its batch (`data_s`, `dataloading_s`).
    pub data_s: f64,
    /// Seconds a step's update took (`updt_s`, `update_s`).
    pub update_s: f64,
    /// Epochs of the dataset the run had gone through (`epch:`), where the line says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<f64>,
}

impl LoggedStep {
    /// The share of the step spent on input, percent.
    pub fn input_bound_pct(&self) -> f64 {
        let total = self.data_s + self.update_s;
        if total > 0.0 {
            100.0 * self.data_s / total
        } else {
            0.0
        }
    }
}

/// A log with no step to read, or a line that looks like a step and does not read.
#[derive(Debug, thiserror::Error)]
pub enum TrainLogError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The log.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No line holds lerobot-train's step metrics.
    #[error(
        "{path}: no logged step (lines with `updt_s:` and `data_s:`, as lerobot-train logs every \
         --log_freq steps): is it a lerobot-train log?"
    )]
    NoStep {
        /// The log.
        path: PathBuf,
    },
    /// A metric of a step line is not a number.
    #[error("{path}:{line}: `{key}:{value}` is not a number of seconds")]
    BadValue {
        /// The log.
        path: PathBuf,
        /// Its line, from 1.
        line: usize,
        /// The metric.
        key: String,
        /// What stood there.
        value: String,
    },
}

/// What a lerobot-train log says of its loader.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrainLog {
    /// The log read.
    pub path: PathBuf,
    /// Every logged step, in the log's order.
    pub steps: Vec<LoggedStep>,
    /// `num_workers` and `batch_size` of the run, where the log holds its config.
    pub num_workers: Option<usize>,
    /// Samples per batch, where the log holds its config.
    pub batch_size: Option<usize>,
}

/// The numbers a step line's metrics hold: (data_s, update_s, step, epoch), each where present.
type StepMetrics = (Option<f64>, Option<f64>, Option<f64>, Option<f64>);

impl TrainLog {
    /// Reads the log at `path`.
    pub fn read(path: &Path) -> Result<Self, TrainLogError> {
        let file = std::fs::File::open(path)
            .map_err(|source| TrainLogError::Io { path: path.to_path_buf(), source })?;
        Self::from_reader(path, std::io::BufReader::new(file))
    }

    /// The log `text`, read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, TrainLogError> {
        Self::from_reader(path, text.as_bytes())
    }

    /// The log `reader` reads, from `path`, a line at a time: memory holds one line (at most
    /// [`LONGEST_LINE`] bytes of it) and the steps, whatever the log's size.
    fn from_reader(path: &Path, reader: impl BufRead) -> Result<Self, TrainLogError> {
        let mut steps = Vec::new();
        let (mut num_workers, mut batch_size) = (None, None);
        each_line(path, reader, |number, line| {
            num_workers = num_workers.or_else(|| config_count(line, "num_workers"));
            batch_size = batch_size.or_else(|| config_count(line, "batch_size"));
            if let (Some(data_s), Some(update_s), step, epoch) = step_metrics(path, number, line)? {
                let step = step.unwrap_or((steps.len() + 1) as f64);
                steps.push(LoggedStep { step, data_s, update_s, epoch });
            }
            Ok(())
        })?;
        if steps.is_empty() {
            return Err(TrainLogError::NoStep { path: path.to_path_buf() });
        }
        Ok(Self { path: path.to_path_buf(), steps, num_workers, batch_size })
    }

    /// The run's input-bound share and its spread. The first logged interval is left out
    /// where there are others: it holds the workers' start and the first batches.
    pub fn summary(&self) -> LogSummary {
        let kept = if self.steps.len() > 1 { &self.steps[1..] } else { &self.steps[..] };
        let (data, total) =
            kept.iter().fold((0.0, 0.0), |(d, t), s| (d + s.data_s, t + s.data_s + s.update_s));
        let share_pct = if total > 0.0 { 100.0 * data / total } else { 0.0 };
        let shares = Stats::of_ms(kept.iter().map(LoggedStep::input_bound_pct));
        LogSummary {
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

    /// The stall at epoch starts, where the log shows one: a spacing (the epoch's length, at
    /// most what the log's `epch:` says, since lerobot-train counts an epoch by the dataset's
    /// frames and the sampler drops some) and a phase at which every logged interval, twice or
    /// more (three times without `epch:`), waited at least twice the median data_s and at
    /// least [`STALL_LEAST_S`] more. The log's first interval (the workers' start) is left out,
    /// and at most [`STALL_EPOCHS`] epochs are read.
    pub fn epoch_stall(&self) -> Option<EpochStall> {
        let kept = self.steps.get(1..).filter(|k| k.len() >= 4)?;
        let steady_data_s = Stats::of_ms(kept.iter().map(|s| s.data_s)).median_ms;
        let mut spacing: Vec<f64> =
            self.steps.windows(2).map(|w| (w[1].step - w[0].step).max(1.0)).collect();
        spacing.sort_by(f64::total_cmp);
        let window = spacing[spacing.len() / 2].round().max(1.0) as usize;
        let dated: Vec<&LoggedStep> = self.steps.iter().filter(|s| s.epoch.is_some()).collect();
        let epoch_steps = match (dated.first(), dated.last()) {
            (Some(a), Some(b)) if b.epoch > a.epoch && b.step > a.step => {
                Some((b.step - a.step) / (b.epoch.unwrap_or(0.0) - a.epoch.unwrap_or(0.0)))
            }
            _ => None,
        };
        let first = kept[0].step as usize;
        let span = match epoch_steps {
            Some(e) => ((STALL_EPOCHS as f64 * e) as usize).max(window),
            None => 5000 * window,
        };
        let kept: Vec<&LoggedStep> =
            kept.iter().take_while(|s| (s.step as usize) < first + span).collect();
        let last = kept.last()?.step as usize;
        // The logged interval that holds step `t`: the first logged at `t` or after, within
        // the interval's steps.
        let holding = |t: usize| {
            let at = kept.partition_point(|s| (s.step as usize) < t);
            kept.get(at).filter(|s| (s.step as usize) < t + window)
        };
        let (least, most) = match epoch_steps {
            Some(e) => (((0.5 * e) as usize).max(2 * window), (1.05 * e) as usize + window),
            None => (2 * window, (last - first) / 2),
        };
        let needed = if epoch_steps.is_some() { 2 } else { 3 };
        let mut best: Option<(f64, usize, usize, Vec<&LoggedStep>)> = None;
        for period in (least..=most).step_by(window) {
            for phase in (0..period).step_by(window) {
                let mut held = Vec::new();
                let mut t = first + phase;
                while t <= last {
                    match holding(t) {
                        Some(s) => held.push(*s),
                        None => break,
                    }
                    t += period;
                }
                if held.len() < needed || t <= last {
                    continue;
                }
                let lowest = held.iter().map(|s| s.data_s).fold(f64::MAX, f64::min);
                if best.as_ref().is_none_or(|(b, ..)| lowest > *b) {
                    best = Some((lowest, period, phase, held));
                }
            }
        }
        let (lowest, period, phase, spikes) = best?;
        let excess = |data_s: f64| (data_s - steady_data_s).max(0.0) * window as f64;
        let spike = |data_s: f64| data_s >= 2.0 * steady_data_s && excess(data_s) >= STALL_LEAST_S;
        // Spikes half a period on as well recur more often than an epoch: not its start.
        let halfway = (first + phase + period / 2..=last)
            .step_by(period)
            .map(|t| holding(t).map_or(0.0, |s| s.data_s))
            .fold(f64::MAX, f64::min);
        if !spike(lowest) || spike(halfway) {
            return None;
        }
        let extra: f64 = spikes.iter().map(|s| excess(s.data_s)).sum();
        let total_s: f64 = kept.iter().map(|s| (s.data_s + s.update_s) * window as f64).sum();
        Some(EpochStall {
            stalls: spikes.len(),
            start_data_s: spikes.iter().map(|s| s.data_s).sum::<f64>() / spikes.len() as f64,
            steady_data_s,
            period_steps: period as f64,
            epoch_steps,
            per_epoch_s: extra / spikes.len() as f64,
            lost_pct: if total_s > 0.0 { 100.0 * extra / total_s } else { 0.0 },
        })
    }
}

/// The most epochs of a log [`TrainLog::epoch_stall`] reads.
pub const STALL_EPOCHS: usize = 50;

/// The least extra wait a stall must cost, seconds.
pub const STALL_LEAST_S: f64 = 0.005;

/// The wait a DataLoader that drains at each epoch's end costs the run, as its log shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpochStall {
    /// Logged intervals that stalled.
    pub stalls: usize,
    /// Their mean data_s, seconds.
    pub start_data_s: f64,
    /// The median data_s of the logged intervals, seconds.
    pub steady_data_s: f64,
    /// Steps from one stall to the next.
    pub period_steps: f64,
    /// Steps an epoch takes by the log's `epch:` (the dataset's frames over the batch).
    pub epoch_steps: Option<f64>,
    /// The extra wait an epoch start costs, seconds.
    pub per_epoch_s: f64,
    /// The share of the logged time those waits took, percent.
    pub lost_pct: f64,
}

impl fmt::Display for EpochStall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let epoch = self
            .epoch_steps
            .map_or(String::new(), |e| format!(" (an epoch is at most {e:.0} steps by epch:)"));
        write!(
            f,
            "Epoch starts stall: data_s is {:.1} ms at {} logged steps, every {:.0} steps{epoch}, \
             against a median of {:.1} ms: about {:.0} ms more each epoch ({:.1} % of the logged \
             time). PyTorch's DataLoader drains at each epoch's end and lerobot-train asks it \
             for a new iterator, whose workers start the next epoch with an empty queue. \
             feedbench-lerobot-train (the same arguments) takes the epochs back to back, with \
             the same batches in the same order, and removes it.",
            self.start_data_s * 1e3,
            self.stalls,
            self.period_steps,
            self.steady_data_s * 1e3,
            self.per_epoch_s * 1e3,
            self.lost_pct
        )
    }
}

/// The most bytes of a line the log is read for: a step line is a few hundred; what lies
/// beyond this in a longer line (a dumped tensor, a progress bar) is no metric of a step.
pub const LONGEST_LINE: usize = 64 * 1024;

/// Calls `each` with every line of `reader` (numbered from 1, cut at [`LONGEST_LINE`] bytes,
/// invalid UTF-8 replaced), through one buffer.
fn each_line(
    path: &Path,
    mut reader: impl BufRead,
    mut each: impl FnMut(usize, &str) -> Result<(), TrainLogError>,
) -> Result<(), TrainLogError> {
    let io = |source| TrainLogError::Io { path: path.to_path_buf(), source };
    let (mut line, mut number) = (Vec::new(), 0);
    loop {
        let chunk = reader.fill_buf().map_err(io)?;
        if chunk.is_empty() {
            if !line.is_empty() {
                each(number + 1, &String::from_utf8_lossy(&line))?;
            }
            return Ok(());
        }
        let end = chunk.iter().position(|&b| b == b'\n');
        let part = &chunk[..end.unwrap_or(chunk.len())];
        let room = LONGEST_LINE.saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        let taken = end.map_or(chunk.len(), |at| at + 1);
        reader.consume(taken);
        if end.is_some() {
            number += 1;
            each(number, &String::from_utf8_lossy(&line))?;
            line.clear();
        }
    }
}

/// The metrics of a step line, where `line` is one; a metric that does not read is an error.
fn step_metrics(path: &Path, line_no: usize, line: &str) -> Result<StepMetrics, TrainLogError> {
    let (mut data_s, mut update_s, mut step, mut epoch) = (None, None, None, None);
    for token in line.split_whitespace() {
        let Some((key, value)) = token.split_once(':') else { continue };
        let seconds = || {
            // A step of more than MOST_STEP_S is no step a log reports (1.7e308 would make
            // every sum of them infinite).
            let step_like = |v: &f64| v.is_finite() && (0.0..=MOST_STEP_S).contains(v);
            value.parse::<f64>().ok().filter(step_like).ok_or_else(|| TrainLogError::BadValue {
                path: path.to_path_buf(),
                line: line_no,
                key: key.to_string(),
                value: value.to_string(),
            })
        };
        match key {
            "data_s" | "dataloading_s" => data_s = Some(seconds()?),
            "updt_s" | "update_s" => update_s = Some(seconds()?),
            "step" => step = big_number(value),
            "epch" => epoch = value.parse::<f64>().ok().filter(|e| e.is_finite() && *e >= 0.0),
            _ => {}
        }
    }
    Ok((data_s, update_s, step, epoch))
}

/// The most seconds a logged step's data_s or updt_s may be: a year.
const MOST_STEP_S: f64 = 365.0 * 86_400.0;

/// A number as LeRobot's `format_big_number` writes it: `200`, `1K`, `2.5M`.
fn big_number(text: &str) -> Option<f64> {
    let (number, scale) = match text.char_indices().last()? {
        (i, 'K') => (&text[..i], 1e3),
        (i, 'M') => (&text[..i], 1e6),
        (i, 'B') => (&text[..i], 1e9),
        _ => (text, 1.0),
    };
    number.parse::<f64>().ok().map(|n| n * scale)
}

/// `'key': N` of the config lerobot-train logs at its start (Python's dict repr).
fn config_count(line: &str, key: &str) -> Option<usize> {
    let at = line.find(&format!("'{key}': "))? + key.len() + 4;
    let digits: String = line[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The run's input-bound share, its spread and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogSummary {
    /// Logged steps in the log.
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

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
INFO 2026-11-26 10:00:00 ot_train.py:272 {'batch_size': 8,
 'num_workers': 2,
 'seed': 1000}
INFO 2026-11-26 10:00:09 ot_train.py:640 step:1 smpl:8 ep:0 epch:0.03 loss:9.866 grdn:190.115 lr:1.0e-05 updt_s:12.000 data_s:3.000 smp/s:1
INFO 2026-11-26 10:00:21 ot_train.py:640 step:2 smpl:16 ep:0 epch:0.05 loss:8.712 grdn:140.010 lr:1.0e-05 updt_s:10.000 data_s:0.100 smp/s:1
INFO 2026-11-26 10:00:33 ot_train.py:640 step:3 smpl:24 ep:0 epch:0.08 loss:7.001 grdn:120.700 lr:1.0e-05 updt_s:10.000 data_s:0.300 smp/s:1
";

    #[test]
    fn steps_config_and_the_share_are_read_as_lerobot_train_logs_them() {
        let log = TrainLog::parse(Path::new("train.log"), LOG).unwrap();
        assert_eq!(log.steps.len(), 3);
        assert_eq!(
            log.steps[1],
            LoggedStep { step: 2.0, data_s: 0.1, update_s: 10.0, epoch: Some(0.05) }
        );
        assert_eq!((log.num_workers, log.batch_size), (Some(2), Some(8)));
        let summary = log.summary();
        assert_eq!((summary.logged_steps, summary.kept_steps), (3, 2), "the first left out");
        assert!((summary.share_pct - 100.0 * 0.4 / 20.4).abs() < 1e-9, "{summary:?}");
        assert_eq!(summary.verdict, Verdict::NotInputBound);
        assert!(summary.to_string().contains("(it had 2)"), "{summary}");
    }

    #[test]
    fn one_logged_step_is_not_judged_and_a_long_line_is_read_cut() {
        let one = TrainLog::parse(Path::new("l"), "step:1 updt_s:1.000 data_s:1.000").unwrap();
        let summary = one.summary();
        assert!(!summary.judged);
        assert!(summary.to_string().contains("1 logged step, the first"), "{summary}");
        assert!(!summary.to_string().contains("input-bound"), "no verdict: {summary}");
        // A line far longer than any step line: read, cut, and the steps around it kept.
        let long = format!(
            "{}\nstep:2 updt_s:1 data_s:0.5\nstep:3 updt_s:1 data_s:0.1",
            "x".repeat(200_000)
        );
        let log = TrainLog::parse(Path::new("l"), &long).unwrap();
        assert_eq!(log.steps.len(), 2);
        assert!(log.summary().judged);
        let cut = format!("step:4 updt_s:1 {}data_s:0.5", " ".repeat(LONGEST_LINE));
        assert!(TrainLog::parse(Path::new("l"), &cut).is_err(), "data_s cut off: no step");
    }

    #[test]
    fn later_names_big_step_numbers_and_bad_values() {
        let line = "step:1K smpl:64K ep:10 epch:1.00 loss:0.1 dataloading_s:0.250 update_s:0.750";
        let log = TrainLog::parse(Path::new("l"), line).unwrap();
        assert_eq!(
            log.steps,
            [LoggedStep { step: 1000.0, data_s: 0.25, update_s: 0.75, epoch: Some(1.0) }]
        );
        assert_eq!(log.summary().verdict, Verdict::HighlyInputBound, "one step, kept");
        let bad = TrainLog::parse(Path::new("l"), "a\nstep:2 updt_s:nan data_s:0.1").unwrap_err();
        assert_eq!(bad.to_string(), "l:2: `updt_s:nan` is not a number of seconds");
        let huge = TrainLog::parse(Path::new("l"), "step:2 updt_s:1 data_s:1.7e308").unwrap_err();
        assert_eq!(huge.to_string(), "l:1: `data_s:1.7e308` is not a number of seconds");
        let none = TrainLog::parse(Path::new("l"), "hello\nworld").unwrap_err();
        assert!(none.to_string().contains("no logged step"), "{none}");
    }

    #[test]
    fn data_s_spikes_an_epoch_apart_are_named_and_others_are_not() {
        // 60 frames, batch 4: 15 steps an epoch by epch; the sampler's epoch is 12 batches.
        let line = |step: usize, data_s: f64| {
            let epch = step as f64 * 4.0 / 60.0;
            format!(
                "step:{step} smpl:{} ep:0 epch:{epch:.2} updt_s:0.100 data_s:{data_s:.3}",
                step * 4
            )
        };
        let log = |spike: &dyn Fn(usize) -> bool| {
            let text: Vec<String> =
                (1..=40).map(|s| line(s, if spike(s) { 0.080 } else { 0.004 })).collect();
            TrainLog::parse(Path::new("l"), &text.join("\n")).unwrap()
        };
        let stall = log(&|s| s % 12 == 1).epoch_stall().expect("every 12 steps: a stall");
        assert_eq!((stall.stalls, stall.period_steps), (3, 12.0), "{stall:?}");
        assert!((stall.per_epoch_s - 0.076).abs() < 1e-9 && stall.epoch_steps == Some(15.0));
        assert!(stall.to_string().contains("every 12 steps (an epoch is at most 15"), "{stall}");
        let summary = log(&|s| s % 12 == 1).summary();
        assert!(summary.to_string().contains("feedbench-lerobot-train"), "{summary}");
        // None without spikes; spikes too close for an epoch, or at no one spacing: none.
        assert_eq!(log(&|_| false).epoch_stall(), None);
        assert_eq!(log(&|s| s % 4 == 1).epoch_stall(), None, "every 4 steps is no epoch");
        assert_eq!(log(&|s| [7, 14, 33].contains(&s)).epoch_stall(), None, "irregular");
    }
}
