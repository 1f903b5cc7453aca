//! Who dominates a training step: the verdict on the input-bound share, as TensorBoard's
//! input-pipeline analyzer words it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Share of the step at or above which a run is highly input-bound, percent.
pub const HIGHLY_INPUT_BOUND_PCT: f64 = 20.0;
/// Share of the step at or above which a run is moderately input-bound, percent.
pub const MODERATELY_INPUT_BOUND_PCT: f64 = 5.0;

/// What dominates the training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Waiting for input (and copying it) is ≥ 20 % of the step: the loader dominates.
    HighlyInputBound,
    /// 5 to 20 % of the step waits for input.
    ModeratelyInputBound,
    /// Under 5 %: the model dominates.
    NotInputBound,
}

impl Verdict {
    /// The verdict for an input-bound share of `percent` of the step.
    pub fn of(percent: f64) -> Self {
        if percent >= HIGHLY_INPUT_BOUND_PCT {
            Self::HighlyInputBound
        } else if percent >= MODERATELY_INPUT_BOUND_PCT {
            Self::ModeratelyInputBound
        } else {
            Self::NotInputBound
        }
    }

    /// Which side dominates, in words.
    pub fn dominant_side(self) -> &'static str {
        match self {
            Self::HighlyInputBound => "the loader dominates",
            Self::ModeratelyInputBound => "the loader costs some of the step",
            Self::NotInputBound => "the model dominates",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::HighlyInputBound => "highly input-bound",
            Self::ModeratelyInputBound => "moderately input-bound",
            Self::NotInputBound => "not input-bound",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_tensorboards() {
        assert_eq!(Verdict::of(20.0), Verdict::HighlyInputBound);
        assert_eq!(Verdict::of(19.99), Verdict::ModeratelyInputBound);
        assert_eq!(Verdict::of(5.0), Verdict::ModeratelyInputBound);
        assert_eq!(Verdict::of(4.99), Verdict::NotInputBound);
        assert_eq!(Verdict::of(0.0).to_string(), "not input-bound");
    }
}
