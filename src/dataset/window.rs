//! Delta windows (LeRobot's `delta_timestamps`): which rows a sample reads for each key, and
//! which of them are padding.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::{DatasetError, Result};
use super::meta::Info;

/// LeRobot's default tolerance between a timestamp and the frame that serves it, seconds.
pub const DEFAULT_TOLERANCE_S: f64 = 1e-4;

/// How a sample spans time, before it is checked against a dataset.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowSpec {
    /// No deltas: every key is the row's own value, without a time dimension.
    Single,
    /// LeRobot's diffusion policy: every `observation.*` key at offsets
    /// `1 − n_obs_steps ..= 0`, `action` at `1 − n_obs_steps` for `horizon` steps; the sampler
    /// drops the last `horizon − n_action_steps − n_obs_steps + 1` frames of each episode.
    Diffusion {
        /// Observation steps (2 for PushT).
        n_obs_steps: usize,
        /// Action steps predicted (16).
        horizon: usize,
        /// Action steps executed (8).
        n_action_steps: usize,
    },
    /// Free deltas, seconds, per key.
    Deltas(BTreeMap<String, Vec<f64>>),
}

impl WindowSpec {
    /// The diffusion policy's PushT recipe: n_obs_steps 2, horizon 16, n_action_steps 8.
    pub fn diffusion() -> Self {
        Self::Diffusion { n_obs_steps: 2, horizon: 16, n_action_steps: 8 }
    }

    /// Parses `KEY=S,S,…` arguments (deltas in seconds) into free deltas.
    pub fn parse_deltas<S: AsRef<str>>(args: &[S]) -> std::result::Result<Self, DeltaError> {
        let mut deltas = BTreeMap::new();
        for arg in args {
            let arg = arg.as_ref();
            let (key, list) =
                arg.split_once('=').ok_or_else(|| DeltaError::Form { arg: arg.to_string() })?;
            let seconds = list
                .split(',')
                .map(|s| {
                    let seconds = |what: String| DeltaError::Seconds {
                        arg: arg.to_string(),
                        value: s.to_string(),
                        what,
                    };
                    match s.trim().parse::<f64>() {
                        Ok(d) if d.is_finite() => Ok(d),
                        Ok(_) => Err(seconds("expected a finite number of seconds".into())),
                        Err(e) => Err(seconds(e.to_string())),
                    }
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            deltas.insert(key.to_string(), seconds);
        }
        Ok(Self::Deltas(deltas))
    }
}

/// A `--delta` argument that is not `KEY=S,S,…` with seconds as numbers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeltaError {
    /// No `=` between the key and the seconds.
    #[error("delta {arg:?}: expected KEY=S,S,…")]
    Form {
        /// The argument.
        arg: String,
    },
    /// A value that is not a number of seconds.
    #[error("delta {arg:?}: {value:?}: {what}")]
    Seconds {
        /// The argument.
        arg: String,
        /// The value.
        value: String,
        /// Why it is not a number.
        what: String,
    },
}

/// A window checked against a dataset: per key, frame offsets relative to the sampled frame.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    offsets: BTreeMap<String, Vec<i64>>,
    /// Frames at the end of each episode that the episode-aware sampler skips.
    pub drop_n_last_frames: usize,
}

impl Window {
    /// Checks `spec` against the dataset's features and fps: every key must be a feature and
    /// every delta a multiple of 1/fps within `tolerance_s`, as LeRobot requires.
    pub fn resolve(spec: &WindowSpec, info: &Info, root: &Path, tolerance_s: f64) -> Result<Self> {
        let request = |what: String| DatasetError::Request { root: root.to_path_buf(), what };
        match spec {
            WindowSpec::Single => Ok(Self::default()),
            WindowSpec::Diffusion { n_obs_steps, horizon, n_action_steps } => {
                if *n_obs_steps == 0
                    || horizon < n_obs_steps
                    || n_action_steps + n_obs_steps > horizon + 1
                {
                    return Err(request(format!(
                        "diffusion window: expected 1 ≤ n_obs_steps ≤ horizon and n_action_steps ≤ horizon − n_obs_steps + 1, found n_obs_steps {n_obs_steps}, horizon {horizon}, n_action_steps {n_action_steps}"
                    )));
                }
                let first = 1 - *n_obs_steps as i64;
                let mut offsets = BTreeMap::new();
                for feature in &info.features {
                    if feature.name.starts_with("observation.") {
                        offsets.insert(feature.name.clone(), (first..=0).collect());
                    } else if feature.name == "action" {
                        offsets.insert(
                            feature.name.clone(),
                            (first..first + *horizon as i64).collect(),
                        );
                    }
                }
                if !offsets.contains_key("action") {
                    return Err(request(
                        "diffusion window: the dataset has no `action` feature".into(),
                    ));
                }
                Ok(Self { offsets, drop_n_last_frames: horizon - n_action_steps - n_obs_steps + 1 })
            }
            WindowSpec::Deltas(deltas) => {
                let mut offsets = BTreeMap::new();
                for (key, seconds) in deltas {
                    if info.feature(key).is_none() {
                        return Err(request(format!("delta for `{key}`: no such feature")));
                    }
                    if seconds.is_empty() {
                        return Err(request(format!(
                            "delta for `{key}`: expected at least one value"
                        )));
                    }
                    let frames = seconds
                        .iter()
                        .map(|&d| {
                            if !d.is_finite() {
                                return Err(request(format!(
                                    "delta {d} s for `{key}`: expected a finite number of seconds"
                                )));
                            }
                            // Python's round, as LeRobot's get_delta_indices takes it: a
                            // half frame to the even one (0.5 → 0, 1.5 → 2, 2.5 → 2).
                            let exact = d * info.fps;
                            let rounded = exact.round_ties_even();
                            if (exact - rounded).abs() / info.fps > tolerance_s {
                                Err(request(format!(
                                    "delta {d} s for `{key}` is not a multiple of 1/fps = {} s within {tolerance_s} s",
                                    1.0 / info.fps
                                )))
                            } else {
                                Ok(rounded as i64)
                            }
                        })
                        .collect::<Result<Vec<_>>>()?;
                    offsets.insert(key.clone(), frames);
                }
                Ok(Self { offsets, drop_n_last_frames: 0 })
            }
        }
    }

    /// The frame offsets of `key`, or None when the key has no time dimension.
    pub fn offsets(&self, key: &str) -> Option<&[i64]> {
        self.offsets.get(key).map(Vec::as_slice)
    }

    /// The keys with a time dimension.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.offsets.keys().map(String::as_str)
    }
}

/// The rows a window reads for the frame with global `index` in an episode covering
/// `[from, to)`: `clamp(index + offset, from, to − 1)`, padded where `index + offset` falls
/// outside the episode (LeRobot's `_get_query_indices`).
pub fn query_rows(
    index: usize,
    from: usize,
    to: usize,
    offsets: &[i64],
) -> impl ExactSizeIterator<Item = (usize, bool)> + Clone + '_ {
    offsets.iter().map(move |&offset| {
        // Saturating: a delta of 1e18 s is an offset of i64::MAX rows (padded), not an overflow.
        let wanted = (index as i64).saturating_add(offset);
        let is_pad = wanted < from as i64 || wanted >= to as i64;
        (wanted.clamp(from as i64, to as i64 - 1) as usize, is_pad)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps_to_the_episode_and_marks_padding() {
        let rows: Vec<_> = query_rows(10, 10, 13, &[-1, 0, 1, 2, 3]).collect();
        assert_eq!(rows, [(10, true), (10, false), (11, false), (12, false), (12, true)]);
        // Offsets beyond any episode (a huge delta, saturated to i64) are padding, not a panic.
        let rows: Vec<_> = query_rows(11, 10, 13, &[i64::MAX, i64::MIN]).collect();
        assert_eq!(rows, [(12, true), (10, true)]);
    }

    #[test]
    fn parses_delta_arguments() {
        let spec = WindowSpec::parse_deltas(&["action=-0.1,0,0.1", "observation.state=0"]).unwrap();
        let WindowSpec::Deltas(d) = spec else { panic!() };
        assert_eq!(d["action"], [-0.1, 0.0, 0.1]);
        let form = WindowSpec::parse_deltas(&["action"]).unwrap_err();
        assert!(form.to_string().contains("expected KEY=S,S"), "{form}");
        assert!(WindowSpec::parse_deltas(&["action=x"]).is_err());
        // Rust parses these as numbers; LeRobot fails on them; read as offset 0 they were not.
        for bad in ["action=NaN", "action=0,inf", "action=-Infinity"] {
            let error = WindowSpec::parse_deltas(&[bad]).unwrap_err().to_string();
            assert!(error.contains("expected a finite number of seconds"), "{bad}: {error}");
        }
    }
}
