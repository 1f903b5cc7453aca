//! Tune's plan, made once from what a front end gives (the loader, the step, the budgets, the
//! ranks): the step measured, each rank's share of the cores and memory, the configurations
//! the search may choose from and the sweep config whose cells it measures.

use std::path::PathBuf;

use super::budget::Source;
use super::launch::Ranks;
use super::search::{Budgets, SearchSettings};
use crate::bench::sweep::config::{
    DatasetSource, EpisodeChoice, LoaderAxes, ModelSection, RunSection, SweepConfig,
};
use crate::bench::sweep::knob_axes::KnobAxes;
use crate::loader::knobs::LoaderKnob;
use crate::loader::lerobot::LoaderBackend;
use crate::loader::spec::LoaderSpec;
use crate::measure::phase::LoaderDeclaration;
use crate::model::{StepChoice, StepDeclaration};

/// The cores and memory of the box, and where the cores' count came from.
#[derive(Debug, Clone)]
pub struct BoxBudgets {
    /// Cores.
    pub cpus: usize,
    /// Where their count came from.
    pub cpus_from: Source,
    /// Bytes.
    pub memory_bytes: u64,
}

/// What a tune measures and within what.
#[derive(Debug, Clone)]
pub struct TunePlan {
    /// Its one group of knobs as a sweep config: the configurations are its workers ×
    /// prefetch axes.
    pub config: SweepConfig,
    /// The dataset's root, absolute.
    pub root: PathBuf,
    /// Each rank's share of the box.
    pub budgets: Budgets,
    /// How the search decides.
    pub settings: SearchSettings,
}

/// Why a tune cannot be planned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// More ranks than cores.
    #[error(
        "{ranks} on {cpus} core{} leave a rank less than one; give --cpus for the box's cores, \
         or fewer ranks",
        if *cpus == 1 { "" } else { "s" }
    )]
    RanksBeyondCores {
        /// The ranks, as given (`--processes 3: 3 ranks`, `3 ranks (the launch line's …)`).
        ranks: String,
        /// The box's cores.
        cpus: usize,
    },
}

/// The prefetch depths tune chooses among, around `p`: the exhaustive sweep's grid.
fn depths(p: usize) -> Vec<usize> {
    vec![1, p, p * 2]
}

impl TunePlan {
    /// The plan for the loader `backend` declared by `loader` over `spec` feeding `step`, within
    /// `budgets` shared by `ranks`, deciding within `target_pct`, with the run's lengths in
    /// `run`.
    pub fn new(
        spec: &LoaderSpec,
        (backend, loader): (LoaderBackend, LoaderDeclaration),
        step: &StepChoice,
        budgets: &BoxBudgets,
        ranks: &Ranks,
        target_pct: f64,
        run: RunSection,
    ) -> Result<Self, PlanError> {
        // A lerobot-train run's step is its own policy's, unless a stand-in is given.
        let model = match backend.is_a_training_run() {
            true => step.spec().of_a_run(),
            false => step.spec().clone(),
        };
        // N ranks share the box: each rank's loader gets its share of the cores and memory.
        let processes = ranks.n;
        if processes > budgets.cpus {
            let ranks = match &ranks.from {
                Some(from) => format!("{processes} ranks ({from})"),
                None => format!("--processes {processes}: {processes} ranks"),
            };
            return Err(PlanError::RanksBeyondCores { ranks, cpus: budgets.cpus });
        }
        let cpus = budgets.cpus / processes;
        let memory_bytes = budgets.memory_bytes / processes as u64;
        // Tune chooses among workers 0…cpus × prefetch 1, 2 and 4.
        let settings = SearchSettings::new(target_pct, (cpus + 1) * depths(2).len());
        // Absolute, so that the sweep config kept beside the results reads the same dataset.
        let root = std::fs::canonicalize(&spec.dataset).unwrap_or_else(|_| spec.dataset.clone());
        let config = SweepConfig {
            dataset: DatasetSource {
                path: Some(root.clone()),
                synth: None,
                episodes: spec.episodes.clone().map(EpisodeChoice::List),
                frames_per_episode: None,
                codec: None,
                gop: None,
                crf: None,
                format: None,
                cache: None,
                also: Vec::new(),
            },
            loader: LoaderAxes {
                window: spec.window,
                // Every knob as the flags set it; the configurations tune chooses from.
                knobs: KnobAxes::from_config(&spec.config)
                    .with(&LoaderKnob::WORKERS, 0..=cpus)
                    .with(&LoaderKnob::PREFETCH, depths(settings.prefetch)),
                loader: vec![backend],
                declared: loader,
            },
            model: ModelSection::of(
                model,
                step.dtype,
                StepDeclaration {
                    preset: step.preset,
                    device: step.device,
                    threads: step.threads,
                    ..StepDeclaration::default()
                },
            ),
            run,
        };
        Ok(Self { config, root, budgets: Budgets { cpus, memory_bytes }, settings })
    }
}
