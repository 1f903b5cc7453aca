//! Whether the timestamps of each episode advance at info.json's `fps`. Windows are read at
//! rows `delta × fps` apart, as LeRobot reads them; where the recorded rate differs, every
//! window is read at the wrong rows without a word (LeRobot 0.6 too). The check reads each
//! episode's first and last timestamp.
//!
//! A wrong fps is a warning (LeRobot reads the dataset); an fps so large that no window can be
//! read at it is refused (`Dataset::check_fps_is_a_rate`).

use std::fmt;

use serde::Serialize;

use super::{Dataset, Result};

/// An episode whose timestamps advance at another rate than info.json's `fps`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateMismatch {
    /// The episode.
    pub episode: usize,
    /// Frames per second its timestamps advance at.
    pub recorded_fps: f64,
    /// info.json's `fps`.
    pub fps: f64,
}

impl fmt::Display for RateMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "episode {}: its timestamps advance at {:.4} frames/s, but meta/info.json says fps \
             {}; windows are read at rows delta × {} apart (as LeRobot reads them), so their \
             times are off",
            self.episode,
            self.recorded_fps,
            Rate(self.fps),
            Rate(self.fps)
        )
    }
}

/// A rate as written in info.json: plain, or in exponent form where plain would be long.
struct Rate(f64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.abs() >= 1e6 {
            true => write!(f, "{:e}", self.0),
            false => write!(f, "{}", self.0),
        }
    }
}

impl Dataset {
    /// Refuses an fps that no rate of these timestamps can be: one where a delta of a single
    /// recorded frame (the shortest non-zero delta the timestamps can show) moves more rows
    /// than the longest selected episode has, so that every window with a non-zero delta
    /// leaves every episode and is clamped to its ends (`1e308` for data at 10 frames/s). The
    /// recorded rate is the longest episode's (two timestamps read). An fps merely wrong (20
    /// for 10 frames/s) passes: [`Dataset::rate_mismatches`] warns of it.
    pub(crate) fn check_fps_is_a_rate(&self) -> Result<()> {
        let fps = self.info().fps;
        let Some(longest) = self.episodes().max_by_key(|e| e.to - e.from) else { return Ok(()) };
        let frames = longest.to - longest.from;
        if frames < 2 {
            return Ok(());
        }
        // Rows that do not read, and timestamps that do not advance (or NaN), are named where
        // a sample reads them: opening the dataset does not judge them.
        let (Ok(first), Ok(last)) = (self.timestamp(longest.from), self.timestamp(longest.to - 1))
        else {
            return Ok(());
        };
        let spacing = (last - first) / (frames - 1) as f64;
        if !(spacing > 0.0 && spacing.is_finite()) {
            return Ok(());
        }
        // Rounded, as a window's delta × fps is.
        let rows = (fps * spacing).round();
        if rows <= (frames - 1) as f64 {
            return Ok(());
        }
        Err(super::DatasetError::NoRate {
            path: self.root().join("meta/info.json"),
            what: format!(
                "fps {} is no rate of this dataset: its timestamps advance at {:.4} frames/s \
                 (episode {}), so a delta of one recorded frame would move {} rows, more than \
                 its longest episode has ({frames} frames), and every window with a non-zero \
                 delta would leave its episode; set fps to the rate the timestamps show",
                Rate(fps),
                1.0 / spacing,
                longest.index.0,
                if rows < 1e6 { rows.to_string() } else { format!("{rows:.1e}") },
            ),
        })
    }

    /// The timestamp of global frame `index`.
    fn timestamp(&self, index: usize) -> Result<f64> {
        let column = self.frames.column_position("timestamp").expect("info.json checked");
        let row = self.frames.row(index)?;
        let (values, range) = row.values(column, 1);
        Ok(values.get_f64(range.start))
    }

    /// The selected episodes whose mean timestamp spacing differs from `1 / fps` by more than
    /// the dataset's tolerance (episodes of one frame have no spacing).
    pub fn rate_mismatches(&self) -> Result<Vec<RateMismatch>> {
        let fps = self.info().fps;
        let mut mismatches = Vec::new();
        for episode in self.episodes() {
            let frames = episode.to - episode.from;
            if frames < 2 {
                continue;
            }
            let spacing = (self.timestamp(episode.to - 1)? - self.timestamp(episode.from)?)
                / (frames - 1) as f64;
            // NaN (a bad timestamp, named where a sample reads it) is not judged here.
            if (spacing - 1.0 / fps).abs() > self.tolerance_s {
                mismatches.push(RateMismatch {
                    episode: episode.index.0,
                    recorded_fps: 1.0 / spacing,
                    fps,
                });
            }
        }
        Ok(mismatches)
    }
}
