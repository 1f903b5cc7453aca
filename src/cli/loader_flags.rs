//! The flags that choose a loader and shape it, shared by `load`, `train`, `compare`'s sides
//! and `tune`: the dataset or a lerobot-train run, which loader (declared as every front end
//! declares it, [`LoaderDeclaration`]), its Python, and the loader's knobs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;

use feedbench::dataset::files::output_apart_from;
use feedbench::dataset::{Contract, EpisodeList, FrameMatch, WindowChoice, DEFAULT_TOLERANCE_S};
use feedbench::loader::config::LoaderConfig;
use feedbench::loader::knobs::{LoaderKnob, TuneRole};
use feedbench::loader::lerobot::run_args::{self, TrainArgsError};
use feedbench::loader::lerobot::{LerobotBridge, LoaderBackend};
use feedbench::loader::sampler::Shard;
use feedbench::loader::spec::LoaderSpec;
use feedbench::measure::phase::{ChoiceError, ChosenLoader, LoaderChoice, LoaderDeclaration};

use super::knob_flags::KnobFlags;

/// The loader's knobs, shared by `load`, `train` and `compare`'s specs.
#[derive(Args, Clone)]
pub struct LoaderFlags {
    /// The dataset root.
    #[arg(required_unless_present = "lerobot_train", conflicts_with = "lerobot_train")]
    dataset: Option<PathBuf>,
    /// Only these episodes, e.g. `1,2,4` or `0-9`.
    #[arg(long, conflicts_with = "lerobot_train")]
    episodes: Option<EpisodeList>,
    /// The sample window: `diffusion` (observations at offsets [-1, 0], action at [-1 … 14])
    /// or `none` (every key is the row's own value).
    #[arg(long, default_value = "diffusion", conflicts_with = "lerobot_train")]
    window: WindowChoice,
    /// The LeRobot whose reading the native reader follows where its versions differ:
    /// `released` (0.4.4 to 0.6.1: a video frame strictly within the tolerance of its query
    /// time) or `main` (LeRobot's main, 0.6.2: within it, one exactly at it included). The JSON
    /// says which was followed (`lerobot_contract`).
    #[arg(long, value_name = "CONTRACT", conflicts_with = "lerobot_train")]
    lerobot_contract: Option<Contract>,
    /// Largest distance between a query time and the video frame that serves it, seconds
    /// (LeRobotDataset's `tolerance_s`).
    #[arg(long, default_value_t = DEFAULT_TOLERANCE_S, value_name = "S")]
    tolerance_s: f64,
    /// The loader's knobs, from its one table.
    #[command(flatten)]
    knobs: KnobFlags,
    /// This process's rank (default: $RANK or $SLURM_PROCID, else 0).
    #[arg(long, requires = "world_size")]
    rank: Option<usize>,
    /// Number of processes (default: $WORLD_SIZE or $SLURM_NTASKS, else 1).
    #[arg(long, requires = "rank")]
    world_size: Option<usize>,
    /// Which loader: feedbench's `native` one, or `lerobot` (LeRobotDataset + PyTorch's
    /// DataLoader, in a Python process with the same knobs: the plain pair, not lerobot-train's
    /// run, which loads uint8 in spawned workers with prefetch 4 and the policy's window, then
    /// converts and preprocesses in the main process: --lerobot-train measures that run). With
    /// --lerobot-train, `feedbench-lerobot-train` measures that run with feedbench's reader as
    /// its dataset, as the wheel's feedbench-lerobot-train runs it (the wheel installed in
    /// --python's environment).
    #[arg(long, default_value = "native")]
    loader: LoaderBackend,
    /// LeRobot's side of it: --python, --video-backend, --lerobot-train.
    #[command(flatten)]
    declared: LoaderDeclaration,
}

impl LoaderFlags {
    /// Which loader the flags choose, and how LeRobot's runs. The LeRobot-only flags
    /// without `--loader lerobot` are refused.
    pub fn choice(&self) -> Result<LoaderChoice> {
        if self.loader.is_a_training_run() && self.lerobot_train().is_none() {
            anyhow::bail!(
                "--loader {} measures a lerobot-train run: add --lerobot-train \"ARGS\" (the \
                 run's arguments)",
                self.loader
            );
        }
        if self.loader == LoaderBackend::Native && self.lerobot_train().is_none() {
            let knobs = self.knobs.applied_to(LoaderConfig::default());
            let lacking = LoaderKnob::lacking(&knobs, LoaderBackend::Native).map(|(k, _)| k.flag);
            let lerobots = [
                self.declared.python.is_some().then_some("python"),
                self.declared.video_backend.is_some().then_some("video-backend"),
            ];
            if let Some(flag) = lerobots.into_iter().flatten().chain(lacking).next() {
                anyhow::bail!("--{flag} is a knob of LeRobot's loader: add --loader lerobot");
            }
            return Ok(LoaderChoice::Native);
        }
        if self.lerobot_contract.is_some() {
            anyhow::bail!(
                "--lerobot-contract is the native reader's: LeRobot's loader reads as the \
                 installed LeRobot does (leave it out, or use --loader native)"
            );
        }
        chosen_from_flags(self.loader, &self.declared)
    }

    /// The same flags with `--lerobot-train` the run's arguments `args` alone (from its launch
    /// line), measured with feedbench's reader where the line runs feedbench-lerobot-train
    /// (`feedbench_reader`), which `--loader lerobot` or `lerobot-train` contradicts.
    pub(super) fn launched(&self, args: String, feedbench_reader: bool) -> Result<Self> {
        let loader = match self.loader {
            LoaderBackend::Lerobot | LoaderBackend::LerobotTrain if feedbench_reader => {
                anyhow::bail!(
                    "--loader {} measures LeRobot's reader, but --lerobot-train's launch line \
                     runs feedbench-lerobot-train: leave --loader out (the line's script says \
                     the reader), or launch lerobot-train",
                    self.loader
                )
            }
            _ if feedbench_reader => LoaderBackend::FeedbenchLerobotTrain,
            other => other,
        };
        let declared = LoaderDeclaration { lerobot_train: Some(args), ..self.declared.clone() };
        Ok(Self { declared, loader, ..self.clone() })
    }

    /// Whether `--rank` (and so `--world-size`) was given.
    pub fn names_a_rank(&self) -> bool {
        self.rank.is_some()
    }

    /// `--lerobot-train`'s arguments, where given.
    pub fn lerobot_train(&self) -> Option<&str> {
        self.declared.lerobot_train.as_deref()
    }

    /// The dataset root (given unless the loader is lerobot-train's, which names its own).
    fn dataset(&self) -> &Path {
        self.dataset.as_deref().expect("clap requires the dataset without --lerobot-train")
    }

    /// Refuses a `--trace` or `--out` inside the dataset (or holding it).
    pub(super) fn outputs_apart(&self, outputs: [&Option<PathBuf>; 2]) -> Result<()> {
        for (flag, path) in ["--trace", "--out"].into_iter().zip(outputs) {
            if let Some(path) = path {
                output_apart_from(path, self.dataset()).with_context(|| flag.to_string())?;
            }
        }
        Ok(())
    }

    /// The loader the flags choose, with what it reads and how (a lerobot-train run's: the
    /// dataset and knobs its arguments give, the flags' workers, batch and prefetch over them,
    /// described through `bridge`).
    pub fn chosen(&self, bridge: &LerobotBridge) -> Result<ChosenLoader> {
        if let Some(chosen) = self.training_run(bridge)? {
            return Ok(chosen);
        }
        Ok(ChosenLoader { choice: self.choice()?, spec: self.spec()? })
    }

    /// The lerobot-train run `--lerobot-train` gives, described by LeRobot in --python's
    /// environment (through `bridge`): its dataset and knobs, the flags given over them (its
    /// workers, batch and prefetch; any other knob its arguments set is refused).
    pub(super) fn training_run(&self, bridge: &LerobotBridge) -> Result<Option<ChosenLoader>> {
        if self.lerobot_train().is_none() {
            return Ok(None);
        }
        // `--loader` says whose reader the run's dataset is; a plain --loader lerobot is the run.
        let backend = match self.loader {
            LoaderBackend::FeedbenchLerobotTrain => LoaderBackend::FeedbenchLerobotTrain,
            _ => LoaderBackend::LerobotTrain,
        };
        let choice = chosen_from_flags(backend, &self.declared)?;
        let LoaderChoice::LerobotTrain(run) = choice else {
            anyhow::bail!("--lerobot-train: {} is not a lerobot-train run's loader", self.loader)
        };
        let (_, built) = bridge.describe(&run)?;
        let own = built.config();
        let config = self.knobs.applied_to(own.clone());
        built.refuse_changes(&config)?;
        // What is measured, where the flags change the run's own (its arguments' num_workers 0
        // and --workers 1 measured one worker at the run's worker prefetch, and the line said 0
        // workers, prefetch null).
        let knobs = run_args::SET_BY_FEEDBENCH;
        let measured = match knobs.iter().any(|knob| knob.get(&config) != knob.get(&own)) {
            false => String::new(),
            true => {
                let set: Vec<String> =
                    knobs.iter().map(|k| format!("--{} {}", k.flag, k.get(&config))).collect();
                format!("; measured with {} over it", set.join(", "))
            }
        };
        eprintln!("lerobot-train's run: {}{measured}", built.summary());
        let spec = LoaderSpec {
            dataset: built.root(),
            episodes: None,
            window: WindowChoice::None,
            frames: FrameMatch::default(),
            config,
            replay: None,
        };
        Ok(Some(ChosenLoader { choice: LoaderChoice::LerobotTrain(run), spec }))
    }

    /// The loader the flags describe; more workers than cores are allowed, with a warning where
    /// `--workers` asked for them (the default is LeRobot's 4, whatever the cores).
    pub fn spec(&self) -> Result<LoaderSpec> {
        let config = self.knobs.applied_to(LoaderConfig::default());
        let (workers, cores) = (config.workers, available_cores());
        let asked = self.knobs.knobs().any(|knob| knob.key == "workers");
        if asked && workers > cores {
            eprintln!(
                "warning: {workers} workers on {cores} cores: they take turns on the cores, each \
                 with its batches in flight and its decoders; more than the cores rarely helps"
            );
        }
        self.spec_with(config)
    }

    /// The knobs `tune` keeps fixed while it searches the workers and the prefetch: the knobs
    /// it searches, and those of one training process it has no use for, are refused.
    pub fn fixed_knobs(&self, command: &str) -> Result<LoaderSpec> {
        let not_fixed = self.knobs.knobs().find(|k| k.tune != TuneRole::Fixed).map(|k| k.flag);
        if let Some(flag) = not_fixed.or(self.rank.is_some().then_some("rank")) {
            anyhow::bail!(
                "--{flag} is not a flag of {command}: it searches the workers and prefetch \
                 itself, for one training process"
            );
        }
        self.spec_with(self.knobs.applied_to(LoaderConfig::default()))
    }

    /// What `tune` measures: the flags' loader with the knobs it keeps fixed, or a lerobot-train
    /// run's own DataLoader with the run's knobs (its batch changed by --batch; the workers and
    /// prefetch are searched, the rest the run's arguments set), described through `bridge`.
    pub fn tuned(&self, bridge: &LerobotBridge) -> Result<(LoaderSpec, LoaderChoice)> {
        if self.lerobot_train().is_none() {
            return Ok((self.fixed_knobs("tune")?, self.choice()?));
        }
        if let Some(knob) = self.knobs.knobs().find(|k| **k != LoaderKnob::BATCH) {
            anyhow::bail!(
                "--{} with --lerobot-train: tune searches the workers and prefetch, and the \
                 run's own arguments set the rest (--batch changes its batch_size)",
                knob.flag
            );
        }
        let chosen =
            self.training_run(bridge)?.ok_or_else(|| anyhow::anyhow!("no --lerobot-train"))?;
        Ok((chosen.spec, chosen.choice))
    }

    /// The loader the flags describe, with the knobs of `config` and this process's shard.
    fn spec_with(&self, mut config: LoaderConfig) -> Result<LoaderSpec> {
        config.shard = match (self.rank, self.world_size) {
            (Some(rank), Some(world)) => Shard::new(rank, world),
            _ => Shard::from_env(),
        }?;
        Ok(LoaderSpec {
            dataset: self.dataset().to_path_buf(),
            episodes: self.episodes.clone(),
            window: self.window,
            frames: FrameMatch {
                tolerance_s: self.tolerance_s,
                contract: self.lerobot_contract.unwrap_or_default(),
            },
            config,
            replay: None,
        })
    }
}

/// The cores this process may use.
pub(super) fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The loader `declared` by the flags, an error naming `--lerobot-train`; a launch line given
/// where a run's arguments are expected points to `tune`, which reads one.
fn chosen_from_flags(backend: LoaderBackend, declared: &LoaderDeclaration) -> Result<LoaderChoice> {
    declared.choice(backend).map_err(|error| {
        let hint = match error {
            ChoiceError::Args(TrainArgsError::LaunchLine(_)) => {
                " (`feedbench tune` alone reads a launch line)"
            }
            _ => "",
        };
        anyhow::anyhow!("--lerobot-train: {error}{hint}")
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use feedbench::bench::compare::guard::config::GuardCell;
    use feedbench::bench::sweep::config::SweepConfig;

    use super::*;

    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        loader: LoaderFlags,
    }

    /// The loader declared by flags, by a sweep's `[loader]` and by a guard's cell.
    fn declared_three_ways(flags: &[&str], keys: &str) -> [(LoaderBackend, LoaderDeclaration); 3] {
        // A lerobot-train run names its own dataset.
        let dataset: &[&str] = if flags.contains(&"--lerobot-train") { &[] } else { &["/data"] };
        let line = Line::try_parse_from([&["load"], dataset, flags].concat()).unwrap();
        let sweep: SweepConfig =
            toml::from_str(&format!("[dataset]\nsynth = \"pusht\"\n[loader]\n{keys}")).unwrap();
        let backend = sweep.loader.loader[0];
        let keys = keys.replace("loader = [", "loader = ").replace("\"]", "\"");
        let cell = format!("name = \"c\"\nworkers = 0\nbatch = 4\n{keys}");
        let cell: GuardCell = toml::from_str(&cell).unwrap();
        [
            (line.loader.loader, line.loader.declared),
            (backend, sweep.loader.declared),
            (cell.loader, cell.declared),
        ]
    }

    #[test]
    fn a_launch_line_of_feedbench_lerobot_train_measures_feedbenchs_reader() {
        let flags = |loader: &[&str]| {
            let run = ["load", "--lerobot-train", "accelerate launch lerobot-train --a=1"];
            Line::try_parse_from([&run[..], loader].concat()).unwrap().loader
        };
        let args = "--a=1".to_string();
        let launched = flags(&[]).launched(args.clone(), true).unwrap();
        assert_eq!(launched.lerobot_train(), Some("--a=1"));
        assert_eq!(launched.loader, LoaderBackend::FeedbenchLerobotTrain);
        // lerobot-train's line measured with feedbench's reader where --loader asks for it.
        let asked = ["--loader", "feedbench-lerobot-train"];
        let reader = flags(&asked).launched(args.clone(), false).unwrap();
        assert_eq!(reader.loader, LoaderBackend::FeedbenchLerobotTrain);
        assert_eq!(flags(&[]).launched(args.clone(), false).unwrap().loader, LoaderBackend::Native);
        let err =
            flags(&["--loader", "lerobot-train"]).launched(args, true).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("--loader lerobot-train measures LeRobot's reader"));
    }

    #[test]
    fn a_launch_line_where_arguments_are_expected_points_to_tune() {
        let choose = |run: &str| {
            let line = ["load", "--loader", "lerobot-train", "--lerobot-train", run];
            Line::try_parse_from(line).unwrap().loader.choice().map(|_| ()).unwrap_err()
        };
        let said = choose("accelerate launch lerobot-train --a=1").to_string();
        assert!(said.starts_with("--lerobot-train: \"accelerate\": expected"), "{said}");
        assert!(said.ends_with("(`feedbench tune` alone reads a launch line)"), "{said}");
        let said = choose("--a=1 b").to_string();
        assert!(!said.contains("tune"), "no hint where it is no launch line: {said}");
    }

    #[test]
    fn every_front_end_declares_a_loader_alike_and_its_choice_declares_it_back() {
        let lerobot = declared_three_ways(
            &["--loader", "lerobot", "--python", "/env/bin/python", "--video-backend", "pyav"],
            "loader = [\"lerobot\"]\npython = \"/env/bin/python\"\nvideo_backend = \"pyav\"\n",
        );
        let run = "--policy.type=act --dataset.root=/d";
        let flags =
            ["--loader", "feedbench-lerobot-train", "--python", "/p", "--lerobot-train", run];
        let reader = declared_three_ways(
            &flags,
            &format!("loader = [\"feedbench-lerobot-train\"]\npython = \"/p\"\nlerobot_train = {run:?}\n"),
        );
        let native = declared_three_ways(&[], "loader = [\"native\"]\n");
        for declared in [native, lerobot, reader] {
            assert_eq!(declared[0], declared[1], "flags against a sweep's [loader]");
            assert_eq!(declared[0], declared[2], "flags against a guard's cell");
            let (backend, declaration) = &declared[0];
            let choice = declaration.choice(*backend).unwrap();
            let back = (choice.backend(), choice.declaration());
            assert_eq!(&back, &declared[0], "the choice declares it back");
        }
    }
}
