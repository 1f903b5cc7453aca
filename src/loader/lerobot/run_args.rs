//! A lerobot-train run's arguments (`--lerobot-train "ARGS"`, [`TrainArgs`]) and what LeRobot
//! built of them: the user's arguments, parsed by LeRobot's own parser in their Python, and the
//! dataset, sampler and DataLoader built as `lerobot-train` builds them (by the driver's
//! `src/loader/lerobot/feedbench_driver/train_run.py`). The run's knobs (workers, batch,
//! prefetch, seed, the policy's drop_n_last_frames, uint8 frames, pinned memory) come back as a
//! [`LoaderConfig`], so that feedbench's own flags change them where given and every report
//! names them as it names any loader's.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

pub use super::protocol::BuiltRun;
use super::protocol::{Overrides, Reader, RunRequest};
use crate::dataset::setting::Refusal;
use crate::loader::batch::ImageFormat;
use crate::loader::config::LoaderConfig;
use crate::loader::knobs::LoaderKnob;
use crate::loader::pipeline::LoaderError;
use crate::loader::sampler::SamplerKind;

/// The user's lerobot-train arguments, the Python that runs them and whose reader the run's
/// dataset is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrainArgs {
    /// The interpreter of the environment with LeRobot.
    pub python: PathBuf,
    /// The arguments, one per element, as `lerobot-train` takes them.
    pub args: Vec<String>,
    /// LeRobot's `LeRobotDataset`, or feedbench's reader in its place
    /// (`feedbench-lerobot-train`'s run).
    pub reader: Reader,
    /// Ranks measured at once, as `accelerate launch --num_processes` starts them (1: the run
    /// alone).
    pub ranks: usize,
}

/// Why a text is not a lerobot-train run's arguments. The front end that read the text names
/// where it was written, and may say what it takes instead (`tune` reads a launch line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrainArgsError {
    /// A quote is opened and never closed.
    #[error("{0:?}: unbalanced quotes")]
    UnbalancedQuotes(String),
    /// Nothing but spaces.
    #[error(
        "no arguments: expected lerobot-train's, e.g. \"--dataset.repo_id=me/pick \
         --dataset.root=/data/pick --policy.type=diffusion\""
    )]
    NoArguments,
    /// The first word is not a flag: the command that launches the run, most likely.
    #[error("{0:?}: expected lerobot-train's arguments (--name=value …), not the command that launches them")]
    LaunchLine(String),
    /// A word that is neither a flag nor the value of the flag before it.
    #[error("{0:?} is not a lerobot-train flag (--name=value)")]
    NotAFlag(String),
}

impl TrainArgs {
    /// `text` split as a shell splits it (`--dataset.root="/data/my set"`), for `python`. An
    /// argument that is not a lerobot-train flag (`--name=value` or `--name value`) is an error.
    pub fn parse(python: &Path, text: &str) -> Result<Self, TrainArgsError> {
        let args =
            shlex::split(text).ok_or_else(|| TrainArgsError::UnbalancedQuotes(text.into()))?;
        let Some(first) = args.first() else { return Err(TrainArgsError::NoArguments) };
        if !first.starts_with('-') {
            return Err(TrainArgsError::LaunchLine(first.clone()));
        }
        // Each argument a flag, or the value of the flag before it (`--name value`).
        let mut takes_a_value = false;
        for arg in &args {
            if arg.starts_with("--") {
                takes_a_value = !arg.contains('=');
            } else if std::mem::take(&mut takes_a_value) {
                continue;
            } else {
                return Err(TrainArgsError::NotAFlag(arg.clone()));
            }
        }
        Ok(Self { python: python.to_path_buf(), args, reader: Reader::Lerobot, ranks: 1 })
    }

    /// The value of `--name`, given as `--name=value` or `--name value`.
    pub fn value(&self, name: &str) -> Option<&str> {
        let flag = format!("--{name}");
        self.args.iter().enumerate().find_map(|(i, arg)| match arg.strip_prefix(&flag) {
            Some("") => self.args.get(i + 1).map(String::as_str),
            Some(rest) => rest.strip_prefix('='),
            None => None,
        })
    }

    /// The arguments as one text that [`Self::parse`] reads back (each quoted as a shell
    /// quotes it, where it needs quoting).
    pub fn text(&self) -> String {
        let plain = |arg: &str| {
            !arg.is_empty()
                && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%[]".contains(c))
        };
        let quoted = |arg: &String| match plain(arg) {
            true => arg.clone(),
            false => shlex::try_quote(arg).map_or_else(|_| arg.clone(), |q| q.into_owned()),
        };
        self.args.iter().map(quoted).collect::<Vec<_>>().join(" ")
    }

    /// The same run reading `root` where the arguments name no dataset directory (no
    /// `--dataset.root`, no `--config_path`): it is added, with `--dataset.repo_id=local/NAME`
    /// where they give no repo id either.
    pub(super) fn reading(mut self, root: &Path) -> Self {
        if self.value("dataset.root").is_some() || self.value("config_path").is_some() {
            return self;
        }
        if self.value("dataset.repo_id").is_none() {
            let name = root.file_name().map_or("dataset".into(), |n| n.to_string_lossy());
            self.args.push(format!("--dataset.repo_id=local/{name}"));
        }
        self.args.push(format!("--dataset.root={}", root.display()));
        self
    }
}

/// The knobs feedbench sets over a lerobot-train run's own (its flags, a tune's search, a
/// guard cell's); the run's arguments set the rest.
pub const SET_BY_FEEDBENCH: [&LoaderKnob; 3] =
    [&LoaderKnob::WORKERS, &LoaderKnob::BATCH, &LoaderKnob::PREFETCH];

impl BuiltRun {
    /// The run's loader knobs: those lerobot-train gives its DataLoader and sampler.
    pub fn config(&self) -> LoaderConfig {
        let defaults = LoaderConfig::default();
        let sampler = self.sampler.as_ref();
        let mut config = LoaderConfig {
            // PyTorch's DataLoader's own defaults, where the run's says nothing.
            workers: 0,
            batch_size: 1,
            // A run without workers has no prefetch in its DataLoader: the one its workers
            // would get, so that feedbench's workers over it are lerobot-train's.
            prefetch: self.worker_prefetch_factor.unwrap_or(defaults.prefetch),
            pin_memory: false,
            persistent_workers: false,
            drop_last: false,
            sampler: if sampler.is_some() {
                SamplerKind::EpisodeAware
            } else {
                SamplerKind::Shuffled
            },
            seed: sampler.and_then(|s| s.get("seed")).and_then(Json::as_u64).unwrap_or(0),
            drop_n_last_frames: sampler
                .and_then(|s| s.get("drop_n_last_frames"))
                .and_then(Json::as_u64)
                .map(|n| n as usize),
            images: match self.dataset.get("return_uint8").and_then(Json::as_bool) {
                Some(true) => ImageFormat::U8,
                _ => ImageFormat::F32,
            },
            ..defaults
        };
        // Every knob that is a DataLoader keyword, as the run's DataLoader says it.
        for knob in LoaderKnob::ALL {
            let said = knob.dataloader.and_then(|keyword| self.dataloader.get(keyword));
            if let Some(value) = said.filter(|v| !v.is_null()) {
                let text = value.as_str().map_or_else(|| value.to_string(), str::to_string);
                // A value the knob refuses (none lerobot-train builds) leaves the default.
                let _ = knob.set(&mut config, &text);
            }
        }
        config
    }

    /// Refuses `config` where it changes a knob the run's arguments set: feedbench sets
    /// [`SET_BY_FEEDBENCH`]; the rest is the run's (its policy's, its `--seed`).
    pub fn refuse_changes(&self, config: &LoaderConfig) -> Result<(), LoaderError> {
        let own = self.config();
        let fixed = LoaderKnob::ALL.iter().filter(|k| !SET_BY_FEEDBENCH.contains(k));
        let Some(knob) = fixed.into_iter().find(|k| k.get(config) != k.get(&own)) else {
            return Ok(());
        };
        let setting = knob.setting();
        Err(LoaderError::Refused(Refusal::new(move |name| {
            format!(
                "{} is lerobot-train's to set, from its own arguments (the policy's, \
                 --seed=…): change it there; feedbench sets the workers, batch and prefetch",
                name(setting)
            )
        })))
    }

    /// Refuses a run whose dataset is not the one at `root`, a config's `[dataset]`.
    pub(super) fn refuse_other_root(&self, root: &Path) -> Result<(), LoaderError> {
        let canonical = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let own = self.root();
        if canonical(&own) == canonical(root) {
            return Ok(());
        }
        Err(LoaderError::Config(format!(
            "the run reads {} but [dataset] is {}: every cell measures [dataset]'s dataset; \
             leave --dataset.root out of the run's arguments (it is added) or make them the same",
            own.display(),
            root.display()
        )))
    }

    /// The dataset's root.
    pub fn root(&self) -> PathBuf {
        PathBuf::from(self.dataset.get("root").and_then(Json::as_str).unwrap_or_default())
    }

    /// One line for people: the policy, the sampler, the DataLoader's worker options.
    pub fn summary(&self) -> String {
        let loader = &self.dataloader;
        let text = |knob: &LoaderKnob| {
            let keyword = knob.dataloader.expect("a DataLoader keyword");
            loader.get(keyword).map_or("-".into(), |v| v.to_string())
        };
        let sampler = match &self.sampler {
            Some(s) => format!(
                "EpisodeAwareSampler (drop_n_last_frames {}, seed {})",
                s.get("drop_n_last_frames").unwrap_or(&Json::Null),
                s.get("seed").unwrap_or(&Json::Null)
            ),
            None => "shuffled".into(),
        };
        format!(
            "{} on {}; {} frames; {sampler}; num_workers {}, batch {}, prefetch {}, {} workers, \
             persistent {}, pin_memory {}",
            self.policy,
            self.device,
            self.num_frames,
            text(&LoaderKnob::WORKERS),
            text(&LoaderKnob::BATCH),
            text(&LoaderKnob::PREFETCH),
            loader.get("multiprocessing_context").and_then(Json::as_str).unwrap_or("forked"),
            text(&LoaderKnob::PERSISTENT_WORKERS),
            text(&LoaderKnob::PIN_MEMORY),
        )
    }
}

/// What a request says of a lerobot-train run: the arguments, whose reader, and `config`'s
/// workers, batch and prefetch over theirs (None: the arguments' own).
pub fn run_request(run: &TrainArgs, config: Option<&LoaderConfig>) -> RunRequest {
    let overrides = config.map_or(Overrides::default(), |c| {
        let set = SET_BY_FEEDBENCH.iter().filter_map(|k| k.dataloader_value(c));
        Overrides(set.map(|(keyword, value)| (keyword.to_string(), value)).collect())
    });
    RunRequest { lerobot_train: run.args.clone(), overrides, reader: run.reader, ranks: run.ranks }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_split_as_a_shell_splits_them() {
        let python = Path::new("python3");
        let run =
            TrainArgs::parse(python, "--dataset.root='/data/my set' --policy.type act").unwrap();
        assert_eq!(run.args, ["--dataset.root=/data/my set", "--policy.type", "act"]);
        let error = |text| TrainArgs::parse(python, text).unwrap_err();
        assert_eq!(error("--policy.type=act act"), TrainArgsError::NotAFlag("act".into()));
        assert_eq!(error("--a='b"), TrainArgsError::UnbalancedQuotes("--a='b".into()));
        let line = error("accelerate launch lerobot-train --a=1");
        assert_eq!(line, TrainArgsError::LaunchLine("accelerate".into()));
        let said = line.to_string();
        assert!(said.contains("\"accelerate\": expected lerobot-train's arguments"), "{said}");
        assert!(!said.contains("feedbench"), "the front end names itself: {said}");
        assert!(error("  ").to_string().contains("no arguments"));
    }

    #[test]
    fn a_run_without_a_dataset_reads_the_one_given_and_keeps_its_own() {
        let python = Path::new("python3");
        let bare = TrainArgs::parse(python, "--policy.type act").unwrap();
        assert_eq!(bare.value("policy.type"), Some("act"));
        let read = bare.reading(Path::new("/cache/pusht-8"));
        assert_eq!(read.value("dataset.root"), Some("/cache/pusht-8"));
        assert_eq!(read.value("dataset.repo_id"), Some("local/pusht-8"));
        let named = TrainArgs::parse(python, "--dataset.repo_id=me/pick --policy.type=act");
        let read = named.unwrap().reading(Path::new("/d"));
        assert_eq!(
            read.args,
            ["--dataset.repo_id=me/pick", "--policy.type=act", "--dataset.root=/d"]
        );
        for own in ["--dataset.root=/mine", "--config_path /c/train_config.json"] {
            let run = TrainArgs::parse(python, own).unwrap();
            assert_eq!(run.clone().reading(Path::new("/d")), run, "{own}");
        }
    }

    #[test]
    fn the_runs_knobs_are_what_it_gives_its_dataloader_and_sampler() {
        let built = BuiltRun {
            policy: "diffusion".into(),
            device: "cpu".into(),
            num_frames: 100,
            num_episodes: 2,
            dataset: json!({ "root": "/d", "return_uint8": true }),
            sampler: Some(json!({ "drop_n_last_frames": 7, "seed": 1000 })),
            dataloader: json!({ "num_workers": 4, "batch_size": 64, "prefetch_factor": 4,
                                "persistent_workers": true, "pin_memory": false,
                                "multiprocessing_context": "spawn" }),
            worker_prefetch_factor: Some(4),
            backend: None,
        };
        let c = built.config();
        assert_eq!((c.workers, c.batch_size, c.prefetch, c.seed), (4, 64, 4, 1000));
        // Without workers the DataLoader has no prefetch: lerobot-train's workers' is the knob.
        let alone = BuiltRun {
            dataloader: json!({ "num_workers": 0, "batch_size": 64, "prefetch_factor": null }),
            worker_prefetch_factor: Some(4),
            ..built.clone()
        };
        assert_eq!((alone.config().workers, alone.config().prefetch), (0, 4));
        assert_eq!((c.drop_n_last_frames, c.images), (Some(7), ImageFormat::U8));
        assert!(c.persistent_workers && !c.pin_memory);
        assert_eq!(built.root(), Path::new("/d"));
        assert!(built.refuse_other_root(Path::new("/d")).is_ok());
        let other = built.refuse_other_root(Path::new("/e")).unwrap_err();
        assert!(other.to_string().contains("the run reads /d but [dataset] is /e"), "{other}");
        assert!(built.summary().contains("drop_n_last_frames 7, seed 1000"), "{}", built.summary());
        assert!(built.summary().contains("spawn workers"), "{}", built.summary());
    }
}
