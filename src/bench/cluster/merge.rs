//! `feedbench merge` of a planned sweep: the cell files in plan order as one `results.jsonl`,
//! and its report; what is missing from the plan, and report groups whose cells ran on
//! different hardware (their figures are not comparable).

use std::fmt;
use std::path::Path;

use super::cells::{finished_cells, CELLS_DIR};
use super::error::ClusterError;
use super::plan_file::Plan;
use crate::bench::report::{write_report, ReportFiles};
use crate::bench::store::lock::OutputLock;
use crate::bench::sweep::cell::{Knob, KnobSet};
use crate::bench::sweep::results::{result_line, CellResult, RESULTS_FILE};
use crate::dataset::files::write_whole;
use crate::measure::system::SystemInfo;

/// What a merge found and wrote.
#[derive(Debug)]
pub struct MergeOutcome {
    /// The finished cells, in plan order.
    pub results: Vec<CellResult>,
    /// Cells of the plan, in plan order, that have no result yet.
    pub missing: Vec<String>,
    /// Cell files that are not in the plan (left alone, not merged).
    pub unplanned: Vec<String>,
    /// Report groups whose cells ran on more than one kind of machine.
    pub mixed_hardware: Vec<MixedGroup>,
    /// The report written from the results.
    pub report: ReportFiles,
}

/// A report group (cells that differ only in workers, prefetch and repeat) measured on more
/// than one kind of machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixedGroup {
    /// The group's knobs.
    pub group: String,
    /// The machines, as [`machine`] names them.
    pub machines: Vec<String>,
}

/// Merges the cell files of the plan in `out` into `out/results.jsonl` (written whole,
/// replacing an earlier merge's) and writes its report, the directory held alone while it does
/// (refused while a task of the plan, or another merge, writes there). Missing cells are listed,
/// not an error; a plan with no finished cell is.
pub fn merge_sweep(out: &Path) -> Result<MergeOutcome, ClusterError> {
    let (_, plan) = Plan::read(out)?;
    let _alone = OutputLock::exclusive(out)?;
    let mut finished = finished_cells(out)?;
    let mut results = Vec::new();
    let mut missing = Vec::new();
    for planned in &plan.cells {
        match finished.remove(&planned.id) {
            Some(result) => results.push(result),
            None => missing.push(planned.id.clone()),
        }
    }
    let mut unplanned: Vec<String> = finished.into_keys().collect();
    unplanned.sort();
    if results.is_empty() {
        return Err(ClusterError::file(
            out.join(CELLS_DIR),
            "no cell of the plan has finished yet: run its tasks (`feedbench sweep run --out DIR`)",
        ));
    }
    let lines: String = results.iter().map(result_line).collect();
    let path = out.join(RESULTS_FILE);
    write_whole(&path, lines.as_bytes()).map_err(|e| ClusterError::io(&path, e))?;
    let report = write_report(out, &results)?;
    let mixed_hardware = mixed_hardware(&results);
    Ok(MergeOutcome { results, missing, unplanned, mixed_hardware, report })
}

/// A machine as the merge compares them: CPU model and cores, GPU, memory.
pub fn machine(system: &SystemInfo) -> String {
    let gpu = system.gpu.as_deref().map(|g| format!(", {g}")).unwrap_or_default();
    let memory =
        system.memory_bytes.map(|b| format!(", {:.0} GiB", b as f64 / (1u64 << 30) as f64));
    format!("{} × {} cores{gpu}{}", system.cpu, system.cores, memory.unwrap_or_default())
}

/// The report groups whose cells ran on more than one kind of machine, in plan order.
fn mixed_hardware(results: &[CellResult]) -> Vec<MixedGroup> {
    let mut groups: Vec<MixedGroup> = Vec::new();
    for result in results {
        let key = result.cell.key(&Knob::set(KnobSet::Group));
        let name = machine(&result.system);
        let index = groups.iter().position(|g| g.group == key).unwrap_or_else(|| {
            groups.push(MixedGroup { group: key, machines: Vec::new() });
            groups.len() - 1
        });
        if !groups[index].machines.contains(&name) {
            groups[index].machines.push(name);
        }
    }
    groups.retain(|g| g.machines.len() > 1);
    groups
}

impl fmt::Display for MergeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let planned = self.results.len() + self.missing.len();
        writeln!(f, "merged {} of the plan's {planned} cells", self.results.len())?;
        if !self.missing.is_empty() {
            writeln!(
                f,
                "missing ({}; run their tasks again, finished cells are skipped):",
                self.missing.len()
            )?;
            for id in &self.missing {
                writeln!(f, "  {id}")?;
            }
        }
        if !self.unplanned.is_empty() {
            writeln!(f, "not in the plan, left out ({}):", self.unplanned.len())?;
            for id in &self.unplanned {
                writeln!(f, "  {id}")?;
            }
        }
        for group in &self.mixed_hardware {
            writeln!(
                f,
                "warning: the cells of group {} ran on different hardware ({}): their figures \
                 are not comparable; run the group on one kind of node",
                group.group,
                group.machines.join("; ")
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata::FakeCell;

    #[test]
    fn a_group_whose_cells_ran_on_different_machines_is_flagged() {
        let mut results: Vec<CellResult> = [(0, 16), (2, 16), (0, 64), (2, 64)]
            .into_iter()
            .map(|(workers, batch)| FakeCell::new(workers, 2, batch).result())
            .collect();
        assert!(mixed_hardware(&results).is_empty(), "one machine");
        // Another host of the same make is the same hardware.
        results[1].placement = Some(crate::measure::system::Placement::here());
        assert!(mixed_hardware(&results).is_empty());
        results[3].system.cpu = "Other CPU".into();
        let mixed = mixed_hardware(&results);
        assert_eq!(mixed.len(), 1, "only the batch-64 group");
        assert_eq!(mixed[0].group, results[2].cell.key(&Knob::set(KnobSet::Group)));
        assert_eq!(mixed[0].machines.len(), 2);
        assert!(mixed[0].machines[1].starts_with("Other CPU × 2 cores"), "{:?}", mixed[0].machines);
    }
}
