//! A lerobot-train log read, a line at a time: its step lines' metrics (`data_s`, `updt_s`,
//! the step and the epoch, as lerobot-train writes them) and the run's config where it logs one.

use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::loader::knobs::LoaderKnob;

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
    /// Whether it begins another run than the one `before` it was logged in: its step, or its
    /// epoch, is below that one's (a run's counters never go back).
    fn begins_a_run_after(&self, before: &LoggedStep) -> bool {
        let epoch_back = matches!((before.epoch, self.epoch), (Some(b), Some(e)) if e < b);
        self.step < before.step || epoch_back
    }

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
    /// Every logged step of the log's last run, in the log's order.
    pub steps: Vec<LoggedStep>,
    /// The runs the log holds: a step whose `step:` or `epch:` is below the one logged before
    /// it begins another (runs resumed from a checkpoint and appended to one file). Only the
    /// last is read.
    pub runs: usize,
    /// The line of the last run's first logged step, from 1.
    pub run_line: usize,
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
        let mut steps: Vec<LoggedStep> = Vec::new();
        let (mut runs, mut run_line) = (1, 1);
        let (mut num_workers, mut batch_size) = (None, None);
        // lerobot-train's config dump names them as its DataLoader's keywords do.
        let keyword = |knob: &LoaderKnob| knob.dataloader.expect("a DataLoader keyword");
        let (workers_key, batch_key) = (keyword(&LoaderKnob::WORKERS), keyword(&LoaderKnob::BATCH));
        each_line(path, reader, |number, line| {
            num_workers = num_workers.or_else(|| config_count(line, workers_key));
            batch_size = batch_size.or_else(|| config_count(line, batch_key));
            if let (Some(data_s), Some(update_s), step, epoch) = step_metrics(path, number, line)? {
                let step = step.unwrap_or((steps.len() + 1) as f64);
                let logged = LoggedStep { step, data_s, update_s, epoch };
                if steps.last().is_some_and(|before| logged.begins_a_run_after(before)) {
                    // Another run: the one before is not read (memory holds one run's steps).
                    steps.clear();
                    runs += 1;
                }
                if steps.is_empty() {
                    run_line = number;
                }
                steps.push(logged);
            }
            Ok(())
        })?;
        if steps.is_empty() {
            return Err(TrainLogError::NoStep { path: path.to_path_buf() });
        }
        Ok(Self { path: path.to_path_buf(), steps, runs, run_line, num_workers, batch_size })
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
