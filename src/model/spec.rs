//! What step to build, as knobs with one text form each (`diffusion:small`, `synthetic:40ms`,
//! `cuda`, `bf16`), and [`StepSpec::build`]: the one builder the command line, the sweep and
//! the tests call.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use super::config::DiffusionConfig;
use super::diffusion::DiffusionPolicy;
use super::error::ModelError;
use super::replay::{ReplayError, ReplayOrder, StepReplay};
use super::shapes::{PolicyShapes, ShapesError};
use super::step::{NoneStep, Precision, TrainStep};
use super::synthetic::SyntheticStep;

/// Where the step runs: CPU, CUDA, or CUDA when libtorch sees one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceChoice {
    /// CUDA if available, else CPU.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiffusionPreset {
    /// `small` on the CPU (steps of about a second), `pusht` on CUDA.
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
    /// in its order): a lerobot-train log, `train --json`'s output or times in ms.
    Replay(StepReplay),
    /// The policy of the loader's own lerobot-train run, which that loader steps itself.
    Policy,
    /// No model: the loader alone, consumer side.
    None,
}

impl ModelSpec {
    /// Whether the step is a fixed cost (`synthetic:MS`, `--step-ms`): what it takes is known,
    /// so one step shows it and it needs no warm-up of its own.
    pub fn is_fixed_cost(&self) -> bool {
        matches!(self, ModelSpec::Synthetic { .. })
    }

    /// The step replayed from the step file `file` in `order` (`replay:FILE`,
    /// `replay-in-order:FILE`).
    pub fn replayed(file: &Path, order: ReplayOrder) -> Result<Self, ReplayError> {
        StepReplay::read(file, order).map(ModelSpec::Replay)
    }

    /// The step a lerobot-train run's loader takes for this spec: a fixed cost stays one (a
    /// stand-in for the policy, e.g. a log's `updt_s`); anything else is the run's own policy.
    pub fn of_a_run(&self) -> ModelSpec {
        match self {
            ModelSpec::Synthetic { .. } | ModelSpec::Replay(_) => self.clone(),
            _ => ModelSpec::Policy,
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
                    ModelSpec::replayed(Path::new(path), order).map_err(|e| e.to_string())
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
            ModelSpec::Replay(replay) => {
                let prefix = match replay.order {
                    ReplayOrder::Logged => REPLAY_IN_ORDER,
                    ReplayOrder::Drawn { .. } => REPLAY_DRAWN,
                };
                write!(f, "{prefix}{}", replay.source.display())
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

/// Everything that decides a training step: the builder the command line, the sweep and the
/// tests share.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSpec {
    /// The step.
    pub model: ModelSpec,
    /// The diffusion preset, where `model` names none.
    pub preset: DiffusionPreset,
    /// A TOML file whose keys override fields of the preset (e.g. `down_dims = [256, 512]`).
    pub config_file: Option<PathBuf>,
    /// Where it runs.
    pub device: DeviceChoice,
    /// Its arithmetic.
    pub dtype: Precision,
    /// Draw the policy's random numbers from the CPU generator, re-seeded with this before
    /// each step, on any device ([`DiffusionPolicy::draw_on_host`]): CPU and CUDA steps can
    /// then be compared.
    pub host_seed: Option<u64>,
}

impl StepSpec {
    /// The libtorch device it runs on.
    pub fn device(&self) -> Result<tch::Device, ModelError> {
        self.device.resolve()
    }

    /// The diffusion policy's configuration on `device`: the preset, with the keys of
    /// `config_file` laid over it.
    pub fn diffusion_config(&self, device: tch::Device) -> Result<DiffusionConfig, ModelError> {
        let preset = match self.model.on(self.preset, device) {
            ModelSpec::Diffusion(Some(preset)) => preset,
            _ => self.preset.on(device),
        };
        let config = DiffusionConfig::preset(preset.name())?;
        match &self.config_file {
            Some(path) => config.with_overrides(path),
            None => Ok(config),
        }
    }

    /// The step, shaped by `shapes` (a dataset's cameras and widths, or why it has none: only
    /// the diffusion policy needs them).
    pub fn build(
        &self,
        shapes: Result<&PolicyShapes, &ShapesError>,
    ) -> Result<Box<dyn TrainStep>, ModelError> {
        let device = self.device()?;
        Ok(match &self.model {
            ModelSpec::Diffusion(_) => {
                let shapes = shapes.map_err(|why| ModelError::Shapes(why.clone()))?;
                let config = self.diffusion_config(device)?;
                let policy = DiffusionPolicy::new(&config, shapes, device, self.dtype)?;
                Box::new(match self.host_seed {
                    Some(seed) => policy.draw_on_host(seed as i64)?,
                    None => policy,
                })
            }
            ModelSpec::Synthetic { cost, .. } => Box::new(SyntheticStep::new(*cost, device)),
            ModelSpec::Replay(replay) => Box::new(SyntheticStep::replaying(replay, device)),
            ModelSpec::Policy => return Err(ModelSpec::policy_is_the_runs()),
            ModelSpec::None => Box::new(NoneStep),
        })
    }
}

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
