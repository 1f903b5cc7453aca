//! Whether the timestamps of each episode advance at info.json's `fps`. Windows are read at
//! rows `delta × fps` apart, as LeRobot reads them; where the recorded rate differs, every
//! window is read at the wrong rows without a word (LeRobot 0.6 too). The check reads each
//! episode's first and last timestamp.

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
    /// The selected episodes whose mean timestamp spacing differs from `1 / fps` by more than
    /// the dataset's tolerance (episodes of one frame have no spacing).
    pub fn rate_mismatches(&self) -> Result<Vec<RateMismatch>> {
        let fps = self.info().fps;
        let column = self.frames.column_position("timestamp").expect("info.json checked");
        let time = |index: usize| -> Result<f64> {
            let row = self.frames.row(index)?;
            let (values, range) = row.values(column, 1);
            Ok(values.get_f64(range.start))
        };
        let mut mismatches = Vec::new();
        for episode in self.episodes() {
            let frames = episode.to - episode.from;
            if frames < 2 {
                continue;
            }
            let spacing = (time(episode.to - 1)? - time(episode.from)?) / (frames - 1) as f64;
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
