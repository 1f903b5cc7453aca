//! The sweep config (`configs/*.toml`).
//!
//! Every key is checked: an unknown key is an error naming the file and the key, so a typo never
//! silently leaves a default in place, and every value is a typed knob read from its one text
//! form (`96x96`, `episode_aware`, `synthetic:40ms`). `configs/example.toml` documents every key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::knob_axes::KnobAxes;

use crate::dataset::files::is_url;
use crate::dataset::video::VideoCodec;
use crate::dataset::{CodebaseVersion, EpisodeList, WindowChoice};
use crate::loader::knobs::LoaderKnob;
use crate::loader::lerobot::LoaderBackend;
use crate::measure::phase::LoaderDeclaration;
use crate::model::{DeviceChoice, ModelSpec, Precision, StepChoice, StepDeclaration, StepError};

/// A sweep: the dataset, the loader's axes, the model and how long to measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepConfig {
    /// What to read.
    pub dataset: DatasetSource,
    /// The loader's knobs; lists are the sweep's axes.
    #[serde(default)]
    pub loader: LoaderAxes,
    /// The consumer.
    #[serde(default)]
    pub model: ModelSection,
    /// How long each phase runs.
    #[serde(default)]
    pub run: RunSection,
}

/// The dataset of a sweep: an existing directory, or a `synth` preset generated once and cached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetSource {
    /// An existing LeRobot dataset (relative paths are relative to the config file).
    pub path: Option<PathBuf>,
    /// A `synth` preset (`pusht`, `so101`, `aloha`, `g1`) to generate instead.
    pub synth: Option<String>,
    /// Episodes: of the preset to generate, or the episodes of `path` to read (`"1,2,4"`,
    /// `"0-9"`); all when absent.
    pub episodes: Option<EpisodeChoice>,
    /// Frames per generated episode (the preset's when absent).
    pub frames_per_episode: Option<usize>,
    /// Codec of the generated videos: `av1`, `h264` or `hevc` (the preset's when absent).
    pub codec: Option<VideoCodec>,
    /// GOP of the generated videos.
    pub gop: Option<u32>,
    /// CRF of the generated videos.
    pub crf: Option<u32>,
    /// Format version of the generated dataset: `v3.0` (default) or `v2.1`.
    pub format: Option<CodebaseVersion>,
    /// Where generated datasets are cached (default `/dev/shm/feedbench`, RAM-backed).
    pub cache: Option<PathBuf>,
    /// Other roots of the same dataset (a copy in `/dev/shm`, on local disk, `s3://…`), each
    /// measured with the same cells beside the first and compared with it in the report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<PathBuf>,
}

impl DatasetSource {
    /// Checks what TOML types cannot: one of `path` and `synth`, and only the keys that apply
    /// to it; the error names the config file `path`.
    pub fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |what: String| Err(ConfigError { path: path.to_path_buf(), what });
        let d = self;
        if d.path.is_some() == d.synth.is_some() {
            return bad("[dataset] needs exactly one of `path` and `synth`".into());
        }
        if d.path.is_some()
            && (d.frames_per_episode.is_some()
                || d.codec.is_some()
                || d.gop.is_some()
                || d.crf.is_some()
                || d.format.is_some())
        {
            return bad("[dataset] frames_per_episode, codec, gop, crf and format apply to \
                        `synth` only"
                .into());
        }
        match (&d.path, &d.episodes) {
            (Some(_), Some(EpisodeChoice::Count(_))) => {
                return bad("[dataset] episodes of a `path` is a list, e.g. \"1,2,4\"".into())
            }
            (None, Some(EpisodeChoice::List(_))) => {
                return bad("[dataset] episodes of a `synth` preset is a count".into())
            }
            _ => {}
        }
        Ok(())
    }

    /// Checks that a dataset `path` (a directory; a URL is read, and said missing, as it is
    /// opened) is there; where it is not, the error names the config
    /// file `config` and the key.
    pub fn check_present(&self, config: &Path) -> Result<(), ConfigError> {
        let keyed =
            self.path.iter().map(|p| ("path", p)).chain(self.also.iter().map(|p| ("also", p)));
        for (key, path) in keyed {
            if !is_url(path) && std::fs::symlink_metadata(path).is_err() {
                return Err(ConfigError {
                    path: config.to_path_buf(),
                    what: format!("dataset.{key} {}: no such dataset directory", path.display()),
                });
            }
        }
        Ok(())
    }

    /// Makes a relative dataset `path` relative to the directory of the config file at
    /// `config`.
    pub fn resolve_relative_to(&mut self, config: &Path) {
        for dataset in self.path.iter_mut().chain(self.also.iter_mut()) {
            relative_to_config(dataset, config);
        }
    }
}

/// Makes a relative `path` given in the config file at `config` relative to that file's
/// directory.
pub fn relative_to_config(path: &mut PathBuf, config: &Path) {
    if path.is_relative() && !is_url(path) {
        *path = config.parent().unwrap_or(Path::new(".")).join(&*path);
    }
}

/// A number of episodes to generate, or a list of episodes to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EpisodeChoice {
    /// How many episodes to generate.
    Count(usize),
    /// Which episodes of an existing dataset to read (`"1,2,4"`, `"0-9"`).
    List(EpisodeList),
}

/// The loader's axes and fixed knobs: the window, which loaders, LeRobot's Python and video
/// backend, and every knob of the loader's table ([`KnobAxes`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoaderAxes {
    /// `diffusion` (LeRobot's diffusion-policy deltas) or `none`.
    pub window: WindowChoice,
    /// The knobs of the loader's table: lists for the axes, one value for the rest (unknown
    /// keys are refused there, by name).
    #[serde(flatten)]
    pub knobs: KnobAxes,
    /// Which loaders: `native` (feedbench's) and/or `lerobot` (LeRobot's own, in Python).
    #[serde(skip_serializing_if = "only_native")]
    pub loader: Vec<LoaderBackend>,
    /// LeRobot's Python and video backend, and the lerobot-train run's arguments (`python`,
    /// `video_backend`, `lerobot_train`: for a `lerobot-train` cell, its run reads
    /// `[dataset]`, added where the arguments name no `--dataset.root`).
    #[serde(flatten)]
    pub declared: LoaderDeclaration,
}

/// Whether the loader axis is the default, the native loader alone (left out of the config
/// feedbench keeps beside results, so that configs written before read back the same).
fn only_native(loaders: &[LoaderBackend]) -> bool {
    loaders == [LoaderBackend::Native]
}

impl Default for LoaderAxes {
    fn default() -> Self {
        Self {
            window: WindowChoice::Diffusion,
            knobs: KnobAxes::default(),
            loader: vec![LoaderBackend::Native],
            declared: LoaderDeclaration::default(),
        }
    }
}

/// The consumer of the batches: the model and dtype axes, beside the step's declaration (as
/// the command line's `train` and `tune` declare it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelSection {
    /// `diffusion`, `synthetic:MS` (a fixed step cost, e.g. `synthetic:40ms`), `replay:FILE` or
    /// `none`; the declaration's `step_ms` or `step_from` replaces it.
    pub model: Vec<ModelSpec>,
    /// `f32` and/or `bf16`.
    pub dtype: Vec<Precision>,
    /// The preset, the device, libtorch's threads, and a step's time (`step_ms`) or its file
    /// (`step_from`, relative to the config; `step_order`) in place of `model`.
    #[serde(flatten)]
    pub declared: StepDeclaration,
    /// Every key beside `model` and `dtype` (the declaration reads its own): any other is
    /// refused by name ([`SweepConfig::check`]).
    #[serde(flatten, skip_serializing)]
    others: BTreeMap<String, toml::Value>,
}

impl Default for ModelSection {
    fn default() -> Self {
        Self {
            model: vec![Default::default()],
            dtype: vec![Precision::F32],
            declared: StepDeclaration::default(),
            others: BTreeMap::new(),
        }
    }
}

impl ModelSection {
    /// One `model` in one `dtype` with the step's other settings `declared`.
    pub fn of(model: ModelSpec, dtype: Precision, declared: StepDeclaration) -> Self {
        Self { model: vec![model], dtype: vec![dtype], declared, others: BTreeMap::new() }
    }

    /// A key of none of its settings, where one was given.
    fn unknown_key(&self) -> Option<&str> {
        let known = |key: &str| StepDeclaration::KEYS.contains(&key);
        self.others.keys().map(String::as_str).find(|key| !known(key))
    }

    /// Lays the declaration's step (`step_ms`, `step_from`), where it names one, over the
    /// `model` axis, which it replaces. No file is read.
    pub fn resolve_step(&mut self) -> Result<(), StepError> {
        if let Some(step) = self.declared.named_step()? {
            self.model = vec![step];
        }
        Ok(())
    }

    /// Where the steps run.
    pub fn device(&self) -> DeviceChoice {
        self.declared.device()
    }

    /// `error`, worded with the section's keys (`model.step_from`).
    pub fn worded(error: &StepError) -> String {
        error.worded(&|key| format!("model.{key}"))
    }
}

/// How long each phase runs, and what else to record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunSection {
    /// Batches measured by the `loader` phase (at least twice those a cell holds in flight:
    /// fewer are raised to that, so that the ready batches its warm-up left are not what is
    /// measured).
    pub loader_batches: usize,
    /// Steps measured by the `model` phase.
    pub model_steps: usize,
    /// Steps measured by the `train` phase.
    pub train_steps: usize,
    /// Unmeasured batches or steps before each phase (the loader's also fill its batch pool).
    pub warmup: usize,
    /// Times each cell is measured.
    pub repeats: usize,
    /// The cell whose `train` phase is traced into `trace.json`: `workers,batch` (e.g. `2,64`);
    /// the last cell when absent.
    pub trace_cell: Option<TraceCell>,
}

impl Default for RunSection {
    fn default() -> Self {
        Self {
            loader_batches: 20,
            model_steps: 5,
            train_steps: 10,
            warmup: 3,
            repeats: 1,
            trace_cell: None,
        }
    }
}

/// A config that cannot be used, naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {what}")]
pub struct ConfigError {
    /// The config file.
    pub path: PathBuf,
    /// What is wrong.
    pub what: String,
}

/// A TOML config file with a `[dataset]` (a sweep's, the guard's): read, its dataset path
/// made relative to the file's directory, and checked; every error names the file.
pub trait ConfigFile: serde::de::DeserializeOwned {
    /// Its dataset source.
    fn dataset_mut(&mut self) -> &mut DatasetSource;

    /// Checks what TOML types cannot; the error names the config file `path`.
    fn check(&self, path: &Path) -> Result<(), ConfigError>;

    /// Makes its relative paths relative to the directory of the config file at `config`, and
    /// reads the files they name; the error says which key and what is wrong.
    fn resolve(&mut self, config: &Path) -> Result<(), String> {
        self.dataset_mut().resolve_relative_to(config);
        Ok(())
    }

    /// Reads the config at `path` as written: nothing it names is opened. A config feedbench
    /// kept beside its results (its paths made absolute when it was kept) is read so, so that
    /// reading a results directory reads no step file.
    fn read_kept(path: &Path) -> Result<Self, ConfigError> {
        let error = |what: String| ConfigError { path: path.to_path_buf(), what };
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        toml::from_str(&text).map_err(|e| error(e.to_string()))
    }

    /// Reads and checks the config at `path`.
    fn load(path: &Path) -> Result<Self, ConfigError> {
        let error = |what: String| ConfigError { path: path.to_path_buf(), what };
        let mut config = Self::read_kept(path)?;
        config.resolve(path).map_err(error)?;
        config.check(path)?;
        Ok(config)
    }
}

impl ConfigFile for SweepConfig {
    fn dataset_mut(&mut self) -> &mut DatasetSource {
        &mut self.dataset
    }

    /// The dataset's path and `model.step_from` relative to the config's directory; the step
    /// declared (`step_ms`, `step_from`) replaces `model.model`, and its file is read, so that
    /// a bad one is refused before anything is measured.
    fn resolve(&mut self, config: &Path) -> Result<(), String> {
        self.dataset.resolve_relative_to(config);
        if let Some(file) = &mut self.model.declared.from.step_from {
            relative_to_config(file, config);
        }
        self.model.resolve_step().map_err(|e| ModelSection::worded(&e))?;
        if self.model.declared.from.step_from.is_some() {
            let model = self.model.model[0].clone();
            StepChoice::of(model).map_err(|e| ModelSection::worded(&e.into()))?;
        }
        Ok(())
    }

    /// One dataset source, non-empty axes, counts of at least one.
    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |what: String| Err(ConfigError { path: path.to_path_buf(), what });
        self.dataset.check(path)?;
        let l = &self.loader;
        let empty_knob =
            l.knobs.iter().find(|(_, values)| values.is_empty()).map(|(k, _)| k.key.to_string());
        if let Some(key) = self.model.unknown_key() {
            return bad(format!(
                "model.{key}: unknown field `{key}`, expected one of model, dtype, {}",
                StepDeclaration::KEYS.join(", ")
            ));
        }
        if let Err(e) = self.model.declared.named_step() {
            return bad(ModelSection::worded(&e));
        }
        let empty_list = [
            ("loader.loader", l.loader.is_empty()),
            ("model.model", self.model.model.is_empty()),
            ("model.dtype", self.model.dtype.is_empty()),
        ]
        .into_iter()
        .find(|(_, empty)| *empty)
        .map(|(name, _)| name.to_string());
        if let Some(name) = empty_knob.map(|key| format!("loader.{key}")).or(empty_list) {
            return bad(format!("{name} is an empty list"));
        }
        let run = l.loader.iter().find(|l| l.is_a_training_run());
        if let (Some(run), None) = (run, &l.declared.lerobot_train) {
            return bad(format!(
                "loader.loader has \"{run}\" but no loader.lerobot_train: give the run's \
                 arguments, e.g. lerobot_train = \"--dataset.repo_id=me/pick \
                 --dataset.root=/data/pick --policy.type=act\""
            ));
        }
        if let Some(cell) = self.run.trace_cell {
            let workers = l.knobs.typed(&LoaderKnob::WORKERS, |c| c.workers);
            let batch = l.knobs.typed(&LoaderKnob::BATCH, |c| c.batch_size);
            if !workers.contains(&cell.workers) || !batch.contains(&cell.batch) {
                return bad(format!(
                    "run.trace_cell \"{cell}\": no cell has {} workers and batch {} (loader.workers \
                     {workers:?}, loader.batch {batch:?})",
                    cell.workers, cell.batch
                ));
            }
        }
        if self.model.declared.threads.is_some_and(|threads| threads < 1) {
            return bad("model.threads must be ≥ 1 (leave it out for libtorch's choice)".into());
        }
        let r = &self.run;
        if r.loader_batches == 0 || r.model_steps == 0 || r.train_steps == 0 || r.repeats == 0 {
            return bad(
                "run.loader_batches, model_steps, train_steps and repeats must be ≥ 1".into()
            );
        }
        Ok(())
    }
}

/// The cell a sweep traces, by its workers and batch size: `workers,batch` (e.g. `2,64`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceCell {
    /// Loader workers.
    pub workers: usize,
    /// Samples per batch.
    pub batch: usize,
}

impl FromStr for TraceCell {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.split_once(',')
            .and_then(|(w, b)| {
                Some(Self { workers: w.trim().parse().ok()?, batch: b.trim().parse().ok()? })
            })
            .ok_or_else(|| {
                format!("run.trace_cell {text:?}: expected `workers,batch`, e.g. \"2,64\"")
            })
    }
}

impl fmt::Display for TraceCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.workers, self.batch)
    }
}

serde_as_text!(TraceCell);

#[cfg(test)]
mod tests;
