//! The step as every front end declares it beside its model and dtype (one each on the command
//! line, axes in a sweep's `[model]`, a stand-in in a guard cell): one struct,
//! [`StepDeclaration`], flattened into the flags (clap) and the configs (serde) alike, so that
//! each reads the same settings under the same names, and [`StepDeclaration::choice`], which
//! resolves it once into a [`StepChoice`] (a replayed step's file read there, and nowhere else).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::choice::StepChoice;
use super::replay::{ReplayError, ReplayOrder, ReplaySource};
use super::spec::{DeviceChoice, DiffusionPreset, ModelSpec};
use super::step::Precision;

/// In which order a step file's times are replayed, as declared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StepOrder {
    /// Drawn from its times, seeded, with replacement.
    #[default]
    Drawn,
    /// In its order, periodic spikes kept periodic.
    Logged,
}

named_values!(StepOrder { Drawn => "drawn", Logged => "logged" });

impl StepOrder {
    /// The replay order it declares.
    pub fn replay_order(self) -> ReplayOrder {
        match self {
            StepOrder::Drawn => ReplayOrder::DRAWN,
            StepOrder::Logged => ReplayOrder::Logged,
        }
    }
}

/// The step replayed from a file, as a front end names it: `--step-from FILE [--step-order
/// logged]`, a sweep's `[model] step_from`, a guard cell's `step_from`. Declared here once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct StepFrom {
    /// Replay the step times of FILE instead of a model's step: a lerobot-train log (its
    /// `updt_s`), `feedbench train --json`'s output, or step times in ms, one a line; drawn
    /// from them, seeded, unless --step-order logged. Every loader replays it: feedbench's
    /// runs each time, LeRobot's blocks for each in turn.
    #[arg(long, value_name = "FILE")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_from: Option<PathBuf>,
    /// The order of --step-from's steps: `drawn` (from its times, seeded, with replacement) or
    /// `logged` (its order, periodic spikes kept periodic) [default: drawn].
    #[arg(long, requires = "step_from")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_order: Option<StepOrder>,
}

impl StepFrom {
    /// The replayed step it names, where it names one (no file is read).
    pub fn model(&self) -> Option<ModelSpec> {
        let file = self.step_from.clone()?;
        let order = self.step_order.unwrap_or_default().replay_order();
        Some(ModelSpec::Replay(ReplaySource { file, order }))
    }
}

/// The settings that decide a step beside its model and dtype, as every front end declares
/// them: `train` and `tune`'s flags, a sweep's `[model]`, a guard cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct StepDeclaration {
    /// Diffusion preset: `pusht`, `small`, or `auto` (`small` on CPU, `pusht` on CUDA).
    #[arg(long, default_value = "auto")]
    #[serde(default, skip_serializing_if = "is_default")]
    pub preset: DiffusionPreset,
    /// `auto` (CUDA when libtorch sees one), `cpu` or `cuda`.
    #[arg(long, default_value = "auto")]
    #[serde(default, skip_serializing_if = "is_default")]
    pub device: DeviceChoice,
    /// libtorch intra-op threads, at least 1 (default: libtorch's choice, one per core).
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<i32>,
    /// The step's time in ms, for any policy, instead of a model: e.g. LeRobot's training log's
    /// `updt_s` (the step without data time) × 1000. Fed on the CPU as a sleep (a GPU step
    /// leaves the cores to the loader).
    #[arg(long, value_name = "MS", conflicts_with = "step_from")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_ms: Option<f64>,
    /// Or the step replayed from a file.
    #[command(flatten)]
    #[serde(flatten)]
    pub from: StepFrom,
}

/// Whether `value` is its type's default (left out of configs and results).
fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Why a declared step cannot be chosen: the setting at fault (its config key) and what is
/// wrong; the front end names the setting its own way ([`StepError::worded`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepError {
    /// A step time that is no time.
    #[error("step_ms {0}: expected a step time in ms above 0")]
    StepMs(f64),
    /// Two steps declared where one is taken.
    #[error("{0} and {1} are two steps: give one")]
    Both(&'static str, &'static str),
    /// A step file that gives no step times.
    #[error("step_from {0}")]
    Replay(#[from] ReplayError),
}

impl StepError {
    /// The error with its setting named by `name` (given the config key: `step_ms`,
    /// `step_from`): `--step-from /x: …` on the command line, `model.step_from /x: …` in a
    /// sweep.
    pub fn worded(&self, name: &dyn Fn(&'static str) -> String) -> String {
        match self {
            StepError::StepMs(ms) => {
                format!("{} {ms}: expected a step time in ms above 0", name("step_ms"))
            }
            StepError::Both(a, b) => format!("{} and {} are two steps: give one", name(a), name(b)),
            StepError::Replay(e) => format!("{} {e}", name("step_from")),
        }
    }
}

impl StepDeclaration {
    /// Its keys, as configs write them (a config that flattens it beside keys of its own tells
    /// an unknown key these).
    pub const KEYS: &'static [&'static str] =
        &["preset", "device", "threads", "step_ms", "step_from", "step_order"];

    /// The step these settings make of `model`: `step_from`'s replay where given, else
    /// `step_ms`'s fixed cost, else `model`. No file is read.
    pub fn model(&self, model: &ModelSpec) -> Result<ModelSpec, StepError> {
        match (self.step_ms, self.from.model()) {
            (Some(_), Some(_)) => Err(StepError::Both("step_ms", "step_from")),
            (None, Some(replayed)) => Ok(replayed),
            (Some(ms), None) => ModelSpec::fixed_ms(ms).ok_or(StepError::StepMs(ms)),
            (None, None) => Ok(model.clone()),
        }
    }

    /// Whether the declaration names its own step (`step_ms`, `step_from`) in place of the
    /// front end's model.
    pub fn names_a_step(&self) -> bool {
        self.step_ms.is_some() || self.from.step_from.is_some()
    }

    /// The step the declaration names in place of the front end's model (`step_ms`,
    /// `step_from`), where it names one. No file is read.
    pub fn named_step(&self) -> Result<Option<ModelSpec>, StepError> {
        match self.names_a_step() {
            true => self.model(&ModelSpec::None).map(Some),
            false => Ok(None),
        }
    }

    /// Where the step runs: the CPU for a `step_ms` step (a sleep, which a GPU step's would
    /// leave the cores to the loader as), else `device`.
    pub fn device(&self) -> DeviceChoice {
        match self.step_ms {
            Some(_) => DeviceChoice::Cpu,
            None => self.device,
        }
    }

    /// The step `model` in `dtype` with these settings, resolved once: a replayed step's file
    /// read here.
    pub fn choice(&self, model: &ModelSpec, dtype: Precision) -> Result<StepChoice, StepError> {
        Ok(StepChoice {
            preset: self.preset,
            device: self.device(),
            dtype,
            threads: self.threads,
            ..StepChoice::of(self.model(model)?)?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_keys_are_the_ones_it_reads_and_writes() {
        let full = StepDeclaration {
            preset: DiffusionPreset::Small,
            device: DeviceChoice::Cpu,
            threads: Some(2),
            step_ms: Some(4.0),
            from: StepFrom { step_from: Some("f".into()), step_order: Some(StepOrder::Logged) },
        };
        let table = toml::Table::try_from(&full).unwrap();
        let keys: Vec<&str> = table.keys().map(String::as_str).collect();
        let mut expected = StepDeclaration::KEYS.to_vec();
        expected.sort();
        assert_eq!(keys, expected);
        assert_eq!(table.try_into::<StepDeclaration>().unwrap(), full);
        // Left out at their defaults.
        assert!(toml::Table::try_from(StepDeclaration::default()).unwrap().is_empty());
    }

    #[test]
    fn a_declared_step_becomes_its_replay_its_fixed_cost_or_the_model() {
        let diffusion = ModelSpec::default();
        let plain = StepDeclaration::default();
        assert_eq!(plain.model(&diffusion).unwrap(), diffusion);
        let timed = StepDeclaration { step_ms: Some(40.0), ..plain.clone() };
        assert_eq!(timed.model(&diffusion).unwrap().to_string(), "synthetic:40ms");
        assert_eq!(timed.device(), DeviceChoice::Cpu, "a time is slept on the CPU");
        let from = StepFrom { step_from: Some("/no/such/log".into()), step_order: None };
        let replayed = StepDeclaration { from: from.clone(), ..plain.clone() };
        assert_eq!(replayed.model(&diffusion).unwrap().to_string(), "replay:/no/such/log");
        let logged = StepFrom { step_order: Some(StepOrder::Logged), ..from.clone() };
        let in_order = StepDeclaration { from: logged, ..plain.clone() };
        assert_eq!(in_order.model(&diffusion).unwrap().to_string(), "replay-in-order:/no/such/log");
        // Bad declarations name their setting as each front end does (a sweep's keys here; the
        // flags' wording is the command line's test).
        let key = |key: &str| format!("model.{key}");
        let zero = StepDeclaration { step_ms: Some(0.0), ..plain.clone() };
        assert_eq!(
            zero.model(&diffusion).unwrap_err().worded(&key),
            "model.step_ms 0: expected a step time in ms above 0"
        );
        let both = StepDeclaration { step_ms: Some(4.0), from, ..plain };
        assert_eq!(
            both.model(&diffusion).unwrap_err().worded(&key),
            "model.step_ms and model.step_from are two steps: give one"
        );
        let missing = replayed.choice(&diffusion, Precision::F32).unwrap_err().worded(&key);
        assert!(missing.starts_with("model.step_from /no/such/log: "), "{missing}");
    }
}
