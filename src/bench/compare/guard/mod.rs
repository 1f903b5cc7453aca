//! `feedbench guard`: fixed loader cells measured in interleaved repeats, kept as a baseline
//! file or judged against one ([`judge`]), for CI. The config is in [`config`], the record and
//! its file in [`record`].

pub mod config;
pub mod fits;
pub mod history;
pub mod judge;
pub mod page;
pub mod record;
pub mod reference;
pub mod render;

use std::time::{SystemTime, UNIX_EPOCH};

use self::config::GuardConfig;
use self::record::{CellRuns, DatasetFingerprint, GuardRecord, BASELINE_FORMAT};
use self::reference::ReferenceClip;
use crate::bench::events::Events;
use crate::loader::lerobot::LerobotBridge;
use crate::loader::pipeline::LoaderError;
use crate::measure::loader_run::measure_run;
use crate::measure::system::SystemInfo;
use crate::measure::workload::Workload;

/// What a guard run measures on, besides its config.
pub struct GuardSetup {
    /// The dataset root.
    pub root: std::path::PathBuf,
    /// The reference workload (the machine's speed).
    pub reference: ReferenceClip,
    /// The machine and software, recorded.
    pub machine: SystemInfo,
    /// The dataset's fingerprint, recorded.
    pub dataset: DatasetFingerprint,
    /// Each cell's workload, in the config's order ([`CellRuns::workload_of`]), recorded.
    pub workloads: Vec<Workload>,
    /// Whether runs count their instructions.
    pub count_instructions: bool,
}

/// Measures every cell of `config` on `setup`'s dataset, `config.run.repeats` times,
/// interleaved: the cells in order, then in reverse order, and so on, so that the machine's
/// drift reaches every cell alike; before each run the reference workload measures the
/// machine's speed. `events` hear each run as it starts (cell name, repeat).
pub fn measure(
    config: &GuardConfig,
    setup: GuardSetup,
    events: &mut dyn Events,
) -> Result<GuardRecord, LoaderError> {
    let root = &setup.root;
    // One bridge for the guard: a lerobot-train cell's run is built once for all its runs.
    let bridge = LerobotBridge::new();
    let loaders = config
        .cells
        .iter()
        .map(|cell| cell.loader(root, config.dataset.episodes.as_ref(), &bridge))
        .collect::<Result<Vec<_>, _>>()?;
    let steps = config
        .cells
        .iter()
        .map(|cell| cell.stand_in().map_err(LoaderError::Config))
        .collect::<Result<Vec<_>, _>>()?;
    let mut cells: Vec<CellRuns> = (config.cells.iter().zip(setup.workloads))
        .map(|(cell, workload)| CellRuns {
            cell: cell.clone(),
            runs: Vec::with_capacity(config.run.repeats),
            reference_ms: Vec::with_capacity(config.run.repeats),
            workload: Some(workload),
        })
        .collect();
    let mut machine = setup.machine;
    for repeat in 0..config.run.repeats {
        for i in super::interleaved(cells.len(), repeat) {
            events.run_starts(&cells[i].cell.name, repeat);
            cells[i].reference_ms.push(setup.reference.measure().map_err(LoaderError::Dataset)?);
            // Instructions are counted of feedbench's own pipeline: LeRobot's run in a Python
            // that starts with each run, whose start-up would swamp them.
            let count = setup.count_instructions && loaders[i].choice.backend().is_native();
            let (length, step) = (config.run.length(), steps[i].as_ref());
            let run = measure_run(&loaders[i], length, count, step, &bridge)?;
            if machine.lerobot.is_none() {
                machine = machine.read_by(run.lerobot.as_ref());
            }
            cells[i].runs.push(run.figures);
        }
    }
    let measured_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Ok(GuardRecord {
        feedbench_guard_baseline: BASELINE_FORMAT,
        measured_at,
        machine,
        dataset: setup.dataset,
        run: config.run.clone(),
        cells,
    })
}
