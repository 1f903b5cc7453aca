//! `feedbench sweep run`: one task's share of a plan, measured cell by cell as the local sweep
//! measures them, each result written to its own file as it finishes. Cells whose file is
//! there already are skipped, so a requeued or resubmitted task repeats nothing.

use std::collections::HashMap;
use std::path::Path;

use super::budget::CpuBudget;
use super::cells::{finished_cells, write_cell};
use super::error::ClusterError;
use super::plan_file::{Plan, PlannedCell, TaskShare};
use crate::bench::events::{CellPhase, Events};
use crate::bench::store::lock::OutputLock;
use crate::bench::sweep::{
    dataset_name, model_key, prepare_dataset, run_cell, CellPhases, SweepContext,
};
use crate::loader::lerobot::LerobotBridge;
use crate::measure::phase::ModelPhase;
use crate::measure::system::Placement;

/// What a task did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskOutcome {
    /// The cells of its share.
    pub cells: usize,
    /// Those found finished and skipped.
    pub skipped: usize,
    /// Those measured now.
    pub ran: usize,
}

/// Runs `share` of the plan in `out`: refuses cells with more workers than `budget` before
/// measuring anything, skips finished cells, prepares the dataset and measures the rest,
/// writing each to `out/cells/<id>.json` with this process's [`Placement`]. `events` hear
/// what is being generated, each phase and each finished cell.
pub fn run_task(
    out: &Path,
    share: TaskShare,
    budget: &CpuBudget,
    events: &mut dyn Events,
) -> Result<TaskOutcome, ClusterError> {
    let (config, plan) = Plan::read(out)?;
    // Shared with the plan's other tasks; no lone sweep writes here meanwhile.
    let _shared = OutputLock::shared(out)?;
    let mine = plan.share(share);
    budget.check(mine.iter().map(|c| c.cell.knobs.workers))?;
    let finished = finished_cells(out)?;
    let todo: Vec<&PlannedCell> =
        mine.iter().copied().filter(|c| !finished.contains_key(&c.id)).collect();
    let outcome =
        TaskOutcome { cells: mine.len(), skipped: mine.len() - todo.len(), ran: todo.len() };
    let Some(first) = todo.first() else { return Ok(outcome) };

    let root = prepare_dataset(&config.dataset, events)?;
    let name = dataset_name(&root);
    if let Some(other) = todo.iter().find(|c| c.cell.dataset != name) {
        return Err(ClusterError::file(
            &root,
            format!("is dataset {name}, but the plan's cells read {}", other.cell.dataset),
        ));
    }
    let bridge = LerobotBridge::new();
    let (context, _) = SweepContext::open(&config, &root, out, first.cell.device, &bridge)?;
    let mut models: HashMap<String, ModelPhase> =
        finished.values().map(|r| (model_key(&r.cell), r.model.clone())).collect();
    let placement = Placement::here();
    let total = outcome.cells;
    events.cells_done(outcome.skipped, total);
    for (index, planned) in todo.into_iter().enumerate() {
        let cell = &planned.cell;
        let phases = CellPhases::all(planned.traced);
        let label = cell.label();
        let mut result = run_cell(&context, cell, phases, &mut models, |phase| {
            events.cell_phase(CellPhase { cell: &label, index, total, phase })
        })?;
        result.placement = Some(placement.clone());
        write_cell(out, &result)?;
        events.cells_done(outcome.skipped + index + 1, total);
    }
    Ok(outcome)
}
