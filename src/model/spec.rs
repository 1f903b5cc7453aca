//! What step to build, as knobs with one text form each (`diffusion:small`, `synthetic:40ms`,
//! `replay:FILE`, `cuda`, `bf16`). Reading one does no I/O: a replayed step's file is read
//! once, where the step is chosen ([`super::choice::StepChoice`]).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::error::ModelError;
use super::replay::{ReplayOrder, ReplaySource};
use super::synthetic::SyntheticStep;

/// Where the step runs: CPU, CUDA, or CUDA when libtorch sees one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DeviceChoice {
    /// CUDA if available, else CPU.
    #[default]
    Auto,
    /// The CPU.
    Cpu,
    /// The first CUDA device.
    Cuda,
}

named_values!(DeviceChoice { Auto => "auto", Cpu => "cpu", Cuda => "cuda" });

impl DeviceChoice {
    /// The libtorch device; `cuda` without a CUDA device is an error.
    pub fn resolve(self) -> Result<tch::Device, ModelError> {
        match self.intended() {
            tch::Device::Cuda(_) if !tch::Cuda::is_available() => {
                Err(ModelError::Device("libtorch sees no CUDA device".into()))
            }
            device => Ok(device),
        }
    }

    /// The libtorch device this choice names, whether or not it is here: `auto` is this
    /// machine's (CUDA when libtorch sees one), `cuda` the first CUDA device. For plans made on
    /// one machine and run on others.
    pub fn intended(self) -> tch::Device {
        match self {
            DeviceChoice::Auto => tch::Device::cuda_if_available(),
            DeviceChoice::Cpu => tch::Device::Cpu,
            DeviceChoice::Cuda => tch::Device::Cuda(0),
        }
    }

    /// The choice that names `device` (`cpu` or `cuda`), as results record it.
    pub fn of(device: tch::Device) -> Self {
        if device.is_cuda() {
            DeviceChoice::Cuda
        } else {
            DeviceChoice::Cpu
        }
    }
}

/// The diffusion policy's size: LeRobot's PushT recipe, a narrow UNet for CPUs, or whichever
/// suits the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DiffusionPreset {
    /// `small` on the CPU (steps of about a second), `pusht` on CUDA.
    #[default]
    Auto,
    /// LeRobot's PushT recipe (262,709,026 trainable parameters).
    Pusht,
    /// The PushT graph with down_dims 64/128/256.
    Small,
}

named_values!(DiffusionPreset { Auto => "auto", Pusht => "pusht", Small => "small" });

impl DiffusionPreset {
    /// The preset it stands for on `device` (`auto` resolved).
    pub fn on(self, device: tch::Device) -> Self {
        match self {
            DiffusionPreset::Auto if device.is_cuda() => DiffusionPreset::Pusht,
            DiffusionPreset::Auto => DiffusionPreset::Small,
            preset => preset,
        }
    }
}

/// The training step: `diffusion` (optionally `diffusion:PRESET`), `synthetic:MS` (a fixed
/// cost per step, e.g. `synthetic:40ms`), `policy` (a lerobot-train run's own) or `none`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ModelSpec {
    /// LeRobot's diffusion policy; the preset when the spec names one.
    Diffusion(Option<DiffusionPreset>),
    /// A fixed cost per step, and the text that gave it.
    Synthetic {
        /// The cost of a step.
        cost: Duration,
        /// As written (`synthetic:40ms`).
        text: String,
    },
    /// Step times replayed from a file (`replay:FILE`, drawn from its times; `replay-in-order:FILE`,
    /// in its order): a lerobot-train log, `train --json`'s output or times in ms. Named here,
    /// read where the step is chosen.
    Replay(ReplaySource),
    /// The policy of the loader's own lerobot-train run, which that loader steps itself.
    Policy,
    /// No model: the loader alone, consumer side.
    None,
}

impl Default for ModelSpec {
    /// The diffusion policy, at the preset the step's declaration names.
    fn default() -> Self {
        ModelSpec::Diffusion(None)
    }
}

impl ModelSpec {
    /// A fixed cost of `ms` per step (`--step-ms`, a sweep's `step_ms`): `synthetic:{ms}ms`,
    /// or None where `ms` is no step time (not above 0, not finite).
    pub fn fixed_ms(ms: f64) -> Option<Self> {
        (ms.is_finite() && ms > 0.0).then(|| ModelSpec::Synthetic {
            cost: Duration::from_secs_f64(ms / 1e3),
            text: format!("synthetic:{ms}ms"),
        })
    }

    /// Whether the step is a fixed cost (`synthetic:MS`, `--step-ms`): what it takes is known,
    /// so one step shows it and it needs no warm-up of its own.
    pub fn is_fixed_cost(&self) -> bool {
        matches!(self, ModelSpec::Synthetic { .. })
    }

    /// Whether the step stands in for one by its time alone (a fixed cost or a replayed one):
    /// what a guard feeds, and what a lerobot-train run is fed in place of its policy.
    pub fn is_a_stand_in(&self) -> bool {
        matches!(self, ModelSpec::Synthetic { .. } | ModelSpec::Replay(_))
    }

    /// Whether the step computes on the cores (a model, or a lerobot-train run's policy), so
    /// that a loader's workers sharing them can slow it.
    pub fn computes(&self) -> bool {
        matches!(self, ModelSpec::Diffusion(_) | ModelSpec::Policy)
    }

    /// Whether it is the diffusion policy (the one step with a LeRobot counterpart).
    pub fn is_diffusion(&self) -> bool {
        matches!(self, ModelSpec::Diffusion(_))
    }

    /// Whether it is no step (`none`): the loader alone.
    pub fn is_none(&self) -> bool {
        matches!(self, ModelSpec::None)
    }

    /// The step a lerobot-train run's loader takes for this spec: a stand-in stays one (e.g. a
    /// log's `updt_s`); anything else is the run's own policy.
    pub fn of_a_run(&self) -> ModelSpec {
        match self.is_a_stand_in() {
            true => self.clone(),
            false => ModelSpec::Policy,
        }
    }

    /// `policy` given where no lerobot-train run's loader steps it.
    pub fn policy_is_the_runs() -> ModelError {
        ModelError::Config(
            "`policy` is a lerobot-train run's own step: only that run's loader steps it (a \
             lerobot-train loader, not this one)"
                .into(),
        )
    }

    /// The spec with its diffusion preset made concrete on `device` (`preset` when the spec
    /// names none): `diffusion` becomes `diffusion:small` on the CPU with `auto`.
    pub fn on(&self, preset: DiffusionPreset, device: tch::Device) -> Self {
        match self {
            ModelSpec::Diffusion(named) => {
                ModelSpec::Diffusion(Some(named.unwrap_or(preset).on(device)))
            }
            other => other.clone(),
        }
    }
}

impl FromStr for ModelSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "diffusion" => Ok(ModelSpec::Diffusion(None)),
            "none" => Ok(ModelSpec::None),
            "policy" => Ok(ModelSpec::Policy),
            _ => {
                if let Some(preset) = text.strip_prefix("diffusion:") {
                    return Ok(ModelSpec::Diffusion(Some(preset.parse()?)));
                }
                if text.starts_with("synthetic:") {
                    let cost = SyntheticStep::parse_cost(text).map_err(|e| e.to_string())?;
                    return Ok(ModelSpec::Synthetic { cost, text: text.to_string() });
                }
                let replay = |path: &str, order| {
                    Ok(ModelSpec::Replay(ReplaySource { file: PathBuf::from(path), order }))
                };
                if let Some(path) = text.strip_prefix(REPLAY_IN_ORDER) {
                    return replay(path, ReplayOrder::Logged);
                }
                if let Some(path) = text.strip_prefix(REPLAY_DRAWN) {
                    return replay(path, ReplayOrder::DRAWN);
                }
                Err(format!(
                    "unknown model `{text}` (diffusion, synthetic:MS, replay:FILE, \
                     replay-in-order:FILE, policy, none)"
                ))
            }
        }
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelSpec::Diffusion(None) => f.write_str("diffusion"),
            ModelSpec::Diffusion(Some(preset)) => write!(f, "diffusion:{preset}"),
            ModelSpec::Synthetic { text, .. } => f.write_str(text),
            ModelSpec::Replay(source) => {
                let prefix = match source.order {
                    ReplayOrder::Logged => REPLAY_IN_ORDER,
                    ReplayOrder::Drawn { .. } => REPLAY_DRAWN,
                };
                write!(f, "{prefix}{}", source.file.display())
            }
            ModelSpec::Policy => f.write_str("policy"),
            ModelSpec::None => f.write_str("none"),
        }
    }
}

serde_as_text!(ModelSpec);

/// The text form of a step replayed drawn from a file's times: `replay:FILE`.
pub const REPLAY_DRAWN: &str = "replay:";

/// The text form of a step replayed in a file's order: `replay-in-order:FILE`.
pub const REPLAY_IN_ORDER: &str = "replay-in-order:";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_specs_keep_their_text() {
        let texts = ["diffusion", "diffusion:small", "synthetic:40ms", "synthetic:0.5s", "none"];
        for text in texts.into_iter().chain(["policy"]) {
            assert_eq!(text.parse::<ModelSpec>().unwrap().to_string(), text);
        }
        let cost = "synthetic:40ms".parse::<ModelSpec>().unwrap();
        assert!(
            matches!(cost, ModelSpec::Synthetic { cost, .. } if cost == Duration::from_millis(40))
        );
        assert!("diffusion:huge".parse::<ModelSpec>().unwrap_err().contains("auto, pusht, small"));
        assert!("resnet".parse::<ModelSpec>().unwrap_err().contains("unknown model"));
        assert!("synthetic:fast".parse::<ModelSpec>().is_err());
        // A run's loader steps its policy unless given a fixed cost.
        let of_a_run = |text: &str| text.parse::<ModelSpec>().unwrap().of_a_run().to_string();
        assert_eq!(
            [of_a_run("diffusion"), of_a_run("synthetic:40ms")],
            ["policy", "synthetic:40ms"]
        );
    }

    #[test]
    fn auto_presets_resolve_per_device() {
        let cpu = ModelSpec::Diffusion(None).on(DiffusionPreset::Auto, tch::Device::Cpu);
        assert_eq!(cpu.to_string(), "diffusion:small");
        let named = ModelSpec::Diffusion(Some(DiffusionPreset::Pusht));
        assert_eq!(named.on(DiffusionPreset::Small, tch::Device::Cpu), named);
        let cuda = ModelSpec::Diffusion(None).on(DiffusionPreset::Auto, tch::Device::Cuda(0));
        assert_eq!(cuda.to_string(), "diffusion:pusht");
    }
}
