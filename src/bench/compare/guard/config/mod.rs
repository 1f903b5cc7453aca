//! The guard config (`configs/guard.toml`): the dataset, the fixed cells measured, how many
//! interleaved repeats, and the tolerance. Every key is checked, as in a sweep config.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::bench::sweep::config::{
    relative_to_config, ConfigError, ConfigFile, DatasetSource, EpisodeChoice,
};
use crate::bench::sweep::knob_values::{KnobFront, KnobValues};
use crate::dataset::{FrameMatch, WindowChoice};
use crate::loader::knobs::LoaderKnob;
use crate::loader::lerobot::run_args::{self, TrainArgs};
use crate::loader::lerobot::{LerobotBridge, LoaderBackend};
use crate::loader::pipeline::LoaderError;
use crate::loader::sampler::SamplerKind;
use crate::loader::spec::LoaderSpec;
use crate::measure::loader_run::RunLength;
use crate::measure::phase::{ChosenLoader, LoaderDeclaration};
use crate::model::{DeviceChoice, ModelSpec, Precision, StepChoice, StepDeclaration, StepError};

/// What the guard measures and how it decides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardConfig {
    /// What to read: an existing dataset or a `synth` preset, as in a sweep config.
    pub dataset: DatasetSource,
    /// How long and how often.
    #[serde(default)]
    pub run: GuardRun,
    /// The cells, each a fixed loader; at least one.
    #[serde(rename = "cell")]
    pub cells: Vec<GuardCell>,
}

/// How long each run is, how many, and the tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GuardRun {
    /// Runs of each cell, interleaved (cell 1, cell 2, …, then again in reverse order).
    pub repeats: usize,
    /// Batches measured per run.
    pub batches: usize,
    /// Batches per run before measuring (the batches in flight plus one when absent).
    pub warmup: Option<usize>,
    /// Changes within this much either way pass (`--tolerance` overrides).
    pub tolerance: Tolerance,
}

impl Default for GuardRun {
    fn default() -> Self {
        Self { repeats: 10, batches: 20, warmup: None, tolerance: Tolerance(10.0) }
    }
}

impl GuardRun {
    /// The length of each run.
    pub fn length(&self) -> RunLength {
        RunLength { batches: self.batches, warmup: self.warmup }
    }
}

/// One fixed loader the guard measures: a name, which loader, the window and the loader's
/// knobs, read through the loader's table (one value each; `workers` and `batch` must be
/// given). LeRobot's loaders take the keys a sweep's `[loader]` takes for them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuardCell {
    /// Names the cell in the baseline and the outputs (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// `native` (feedbench's, the default), `lerobot` (LeRobot's own DataLoader),
    /// `lerobot-train` (the DataLoader a lerobot-train run builds) or
    /// `feedbench-lerobot-train` (that run with feedbench's reader).
    #[serde(default, skip_serializing_if = "LoaderBackend::is_native")]
    pub loader: LoaderBackend,
    /// `diffusion` (the default) or `none`; a lerobot-train run's window is its policy's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowChoice>,
    /// LeRobot's Python and video backend, and the lerobot-train run's arguments (`python`,
    /// `video_backend`, `lerobot_train`, as a sweep's `[loader]` takes them: the run reads
    /// `[dataset]`, added where the arguments name no `--dataset.root`).
    #[serde(flatten)]
    pub declared: LoaderDeclaration,
    /// A stand-in step of fixed length (`synthetic:MS`) the loader then feeds in each run, for
    /// its accelerator utilisation (AU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<ModelSpec>,
    /// Or the step as every front end declares it: its time (`step_ms`), or replayed from a
    /// file (`step_from`, relative to the config: a lerobot-train log, a train JSON or one step
    /// time a line; `step_order`). Its model's keys (`preset`, `device`, `threads`) are not a
    /// cell's: a guard's stand-in is a time, slept on the CPU.
    #[serde(flatten)]
    pub declared_step: StepDeclaration,
    /// The least AU the cell passes with, percent (MLPerf Storage's pass line is 90): a run's
    /// median AU below it fails the guard. Needs `step`, `step_ms` or `step_from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_au: Option<f64>,
    /// The loader's knobs (a cell's keys beside its own).
    #[serde(flatten)]
    pub knobs: KnobValues<GuardKnobs>,
}

impl PartialEq for GuardCell {
    /// The same cell measures the same loader the same way (a window left out is the default);
    /// its step and least AU are judged on their own, not against the baseline.
    fn eq(&self, other: &Self) -> bool {
        (self.name == other.name)
            && (self.loader, self.window(), &self.declared)
                == (other.loader, other.window(), &other.declared)
            && self.knobs == other.knobs
    }
}

/// What a guard cell makes of the loader's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuardKnobs;

impl KnobFront for GuardKnobs {
    const SECTION: &'static str = "cell";
    const OWN_KEYS: &'static [&'static str] = &[
        "name",
        "loader",
        "window",
        "python",
        "video_backend",
        "lerobot_train",
        "step",
        "preset",
        "device",
        "threads",
        "step_ms",
        "step_from",
        "step_order",
        "min_au",
    ];
    const REQUIRED: &'static [&'static str] = &["workers", "batch"];

    /// Shuffled, as training reads (random access).
    fn defaults(loader: KnobValues<Self>) -> KnobValues<Self> {
        loader.with(&LoaderKnob::SAMPLER, [SamplerKind::Shuffled])
    }
}

impl GuardCell {
    /// The window of a native or `lerobot` cell.
    pub fn window(&self) -> WindowChoice {
        self.window.unwrap_or(WindowChoice::Diffusion)
    }

    /// The loader of this cell over the dataset at `root` (its `episodes` when given); a
    /// lerobot-train run is built by LeRobot (once per bridge) to check that it reads `root`.
    pub fn loader(
        &self,
        root: &Path,
        episodes: Option<&EpisodeChoice>,
        bridge: &LerobotBridge,
    ) -> Result<ChosenLoader, LoaderError> {
        let spec = self.spec(root, episodes);
        let choice = self
            .declared
            .choice(self.loader)
            .map_err(|what| LoaderError::Config(self.named(&what.to_string())))?;
        Ok(ChosenLoader { choice: choice.on_dataset(root, bridge)?, spec })
    }

    /// What this cell's loader reads and how.
    pub fn spec(&self, root: &Path, episodes: Option<&EpisodeChoice>) -> LoaderSpec {
        LoaderSpec {
            dataset: root.to_path_buf(),
            episodes: match episodes {
                Some(EpisodeChoice::List(list)) => Some(list.clone()),
                _ => None,
            },
            window: self.window(),
            frames: FrameMatch::default(),
            config: self.knobs.config(),
            replay: None,
        }
    }

    /// The stand-in step its runs feed, on the CPU, resolved (`step_from`'s file read); None
    /// without one.
    pub fn stand_in(&self) -> Result<Option<StepChoice>, String> {
        let declared = &self.declared_step;
        let named = declared.named_step().map_err(|e| self.worded(&e))?;
        let model = match (&self.step, named) {
            (Some(_), Some(_)) => {
                let other = if declared.step_ms.is_some() { "step_ms" } else { "step_from" };
                return Err(self.named(&format!("step and {other} are two steps: give one")));
            }
            (Some(step), None) => step.clone(),
            (None, Some(step)) => step,
            (None, None) => return Ok(None),
        };
        let choice = declared.choice(&model, Precision::F32).map_err(|e| self.worded(&e))?;
        Ok(Some(StepChoice { device: DeviceChoice::Cpu, ..choice }))
    }

    /// Its stand-in step and least AU: a fixed-length step or a replayed one (by the native
    /// loader: LeRobot's block for one step time), no model's keys, and a least AU only with
    /// one.
    fn check_step(&self) -> Result<(), String> {
        let declared = &self.declared_step;
        let model_keys = [
            ("preset", declared.preset != Default::default()),
            ("device", declared.device != Default::default()),
            ("threads", declared.threads.is_some()),
        ];
        if let Some((key, _)) = model_keys.iter().find(|(_, set)| *set) {
            return Err(self.named(&format!(
                "{key} is not a key of a guard cell: its stand-in step is a time (step, step_ms \
                 or step_from), slept on the CPU"
            )));
        }
        if let Some(step) = self.step.as_ref().filter(|s| !s.is_fixed_cost()) {
            return Err(self.named(&format!(
                "step = \"{step}\": expected a stand-in of fixed length, synthetic:MS (e.g. \
                 \"synthetic:40ms\"); a step replayed from a file is step_from = \"FILE\""
            )));
        }
        // The step file read now, so that a bad one is refused before anything is measured.
        let stand_in = self.stand_in()?;
        match self.min_au {
            Some(au) if !(au > 0.0 && au <= 100.0) => Err(self.named(&format!(
                "min_au = {au}: expected a percentage above 0 and at most 100, e.g. 90"
            ))),
            Some(_) if stand_in.is_none() => Err(self.named(
                "min_au needs a step to feed: add step = \"synthetic:MS\" (your step's time) or \
                 step_from = \"FILE\" (your lerobot-train log)",
            )),
            _ => Ok(()),
        }
    }

    /// A step declared wrong, said of this cell with its keys.
    fn worded(&self, error: &StepError) -> String {
        self.named(&error.worded(&|key| key.to_string()))
    }

    /// `what`, said of this cell.
    fn named(&self, what: &str) -> String {
        format!("cell {:?}: {what}", self.name)
    }

    /// What its loader takes: LeRobot's keys only for LeRobot's loaders, the run's arguments
    /// for a lerobot-train run's (which sets the rest itself), no knob the loader lacks.
    fn check_loader(&self, episodes: Option<&EpisodeChoice>) -> Result<(), String> {
        let loader = self.loader;
        let training = loader.is_a_training_run();
        let given = |key: &str, present: bool| present.then(|| key.to_string());
        let stray = if loader.is_native() {
            given("python", self.declared.python.is_some())
                .or(given("video_backend", self.declared.video_backend.is_some()))
        } else if training {
            given("window", self.window.is_some())
                .or(given("video_backend", self.declared.video_backend.is_some()))
        } else {
            None
        };
        let stray =
            stray.or(given("lerobot_train", !training && self.declared.lerobot_train.is_some()));
        if let Some(key) = stray {
            return Err(self.named(&format!("{key} is not a key of a loader = \"{loader}\" cell")));
        }
        let config = self.knobs.config();
        if training {
            let Some(text) = &self.declared.lerobot_train else {
                return Err(self.named(&format!(
                    "loader = \"{loader}\" measures a lerobot-train run: add lerobot_train = \
                     \"ARGS\" (the run's arguments, e.g. \"--policy.type=diffusion\")"
                )));
            };
            TrainArgs::parse(Path::new("python3"), text)
                .map_err(|what| self.named(&format!("lerobot_train: {what}")))?;
            if let Some(EpisodeChoice::List(_)) = episodes {
                return Err(self.named(
                    "[dataset] episodes is a list, which a lerobot-train run does not take: give \
                     --dataset.episodes in lerobot_train",
                ));
            }
            let defaults = KnobValues::<GuardKnobs>::default().config();
            let set = LoaderKnob::ALL
                .iter()
                .filter(|k| !run_args::SET_BY_FEEDBENCH.contains(k))
                .find(|k| k.get(&config) != k.get(&defaults));
            if let Some(knob) = set {
                return Err(self.named(&format!(
                    "{} is the lerobot-train run's to set, in lerobot_train; a cell sets \
                     workers, batch and prefetch",
                    knob.key
                )));
            }
        } else if let Some((knob, why)) = LoaderKnob::lacking(&config, loader).next() {
            return Err(self.named(&format!("{} is not a knob of {loader}: {why}", knob.key)));
        }
        Ok(())
    }
}

impl ConfigFile for GuardConfig {
    fn dataset_mut(&mut self) -> &mut DatasetSource {
        &mut self.dataset
    }

    /// The dataset's path and each cell's `step_from` relative to the config's directory (the
    /// file read as its runs start, and checked before).
    fn resolve(&mut self, config: &Path) -> Result<(), String> {
        self.dataset.resolve_relative_to(config);
        for file in self.cells.iter_mut().filter_map(|c| c.declared_step.from.step_from.as_mut()) {
            relative_to_config(file, config);
        }
        Ok(())
    }

    /// At least one cell, names unique and plain, counts of at least one, 3 repeats or more.
    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |what: String| Err(ConfigError { path: path.to_path_buf(), what });
        self.dataset.check(path)?;
        if !self.dataset.also.is_empty() {
            return bad(
                "[dataset] also is a sweep's (roots compared side by side); a guard holds one \
                 dataset to its baseline"
                    .into(),
            );
        }
        if self.cells.is_empty() {
            return bad("no [[cell]]: the guard needs at least one cell to measure".into());
        }
        for (i, cell) in self.cells.iter().enumerate() {
            let name_ok = !cell.name.is_empty()
                && cell.name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !name_ok {
                return bad(format!(
                    "cell {} name {:?}: expected letters, digits, '-', '_' or '.'",
                    i + 1,
                    cell.name
                ));
            }
            if self.cells[..i].iter().any(|c| c.name == cell.name) {
                return bad(format!("cell name {:?} appears twice", cell.name));
            }
            cell.check_loader(self.dataset.episodes.as_ref()).or_else(bad)?;
            cell.check_step().or_else(bad)?;
        }
        let run = &self.run;
        if run.repeats < 3 {
            return bad(format!(
                "run.repeats = {}: at least 3 runs of each cell are needed for an interval",
                run.repeats
            ));
        }
        if run.batches == 0 {
            return bad("run.batches must be ≥ 1".into());
        }
        Ok(())
    }
}

/// How far a figure may move before the guard calls it a change, percent: `10%` or `10`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Tolerance(pub f64);

impl FromStr for Tolerance {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let number = text.trim().strip_suffix('%').unwrap_or(text.trim()).trim();
        match number.parse::<f64>() {
            Ok(pct) if pct.is_finite() && pct > 0.0 && pct < 100.0 => Ok(Self(pct)),
            _ => Err(format!(
                "tolerance {text:?}: expected a percentage above 0 and below 100, \
                              e.g. \"10%\""
            )),
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

serde_as_text!(Tolerance);

#[cfg(test)]
mod tests;
