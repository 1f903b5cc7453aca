//! Which LeRobot's reading the reader follows where LeRobot's versions read the same dataset
//! differently: the released ones (0.4.4 to 0.6.1) or LeRobot's main (0.6.2, unreleased). A
//! reader beside LeRobot follows the installed one's (FeedbenchDataset asks for it by name,
//! `feedbench.lerobot.lerobot_contract`); the command line, with no LeRobot beside it, the
//! newest released, unless told otherwise.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The LeRobot whose reading is followed, stored as its name (`"released"`, `"main"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Contract {
    /// LeRobot 0.4.4 to 0.6.1, the newest released: a video frame serves a query time that
    /// lies strictly within the tolerance of it.
    #[default]
    Released,
    /// LeRobot's main (0.6.2): a frame serves a query time within the tolerance inclusively
    /// (huggingface/lerobot#3423), one exactly at the tolerance included.
    Main,
}

impl Contract {
    /// Whether a frame `distance_s` from a query time serves it, with `tolerance_s`.
    pub fn admits(self, distance_s: f64, tolerance_s: f64) -> bool {
        match self {
            Contract::Released => distance_s < tolerance_s,
            Contract::Main => distance_s <= tolerance_s,
        }
    }

    /// How the tolerance is taken, for errors: "strictly within" or "within".
    pub fn within(self) -> &'static str {
        match self {
            Contract::Released => "strictly within",
            Contract::Main => "within",
        }
    }
}

impl fmt::Display for Contract {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Contract::Released => "released",
            Contract::Main => "main",
        })
    }
}

impl FromStr for Contract {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "released" => Ok(Contract::Released),
            "main" => Ok(Contract::Main),
            _ => Err(format!(
                "LeRobot contract {text:?}: expected \"released\" (0.4.4 to 0.6.1) or \"main\" \
                 (LeRobot's main, 0.6.2)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_takes_a_frame_exactly_at_the_tolerance_and_the_release_does_not() {
        // Binary fractions: the distance is exactly the tolerance.
        let (distance, tolerance) = (0.25, 0.25);
        assert!(!Contract::Released.admits(distance, tolerance));
        assert!(Contract::Main.admits(distance, tolerance));
        assert!(Contract::Released.admits(0.125, tolerance) && !Contract::Main.admits(0.5, 0.25));
        assert_eq!("main".parse::<Contract>(), Ok(Contract::Main));
        assert!("0.6.2".parse::<Contract>().unwrap_err().contains("\"released\""));
        assert_eq!(Contract::default().to_string(), "released");
        // Stored as it is named.
        for contract in [Contract::Released, Contract::Main] {
            let stored = serde_json::to_string(&contract).unwrap();
            assert_eq!(stored, format!("\"{contract}\""));
            assert_eq!(serde_json::from_str::<Contract>(&stored).unwrap(), contract);
        }
    }
}
