//! The guard's decision: each cell's figures now against the baseline's, a regression only
//! where the whole 95 % interval of the change lies beyond the tolerance (criterion's rule of
//! significance and noise threshold together). Whether a baseline fits at all is
//! [`super::fits`]'s, before anything runs.

use serde::{Deserialize, Serialize};

use super::config::Tolerance;
use super::history::verdict::HistoryVerdict;
use super::record::{CellRuns, GuardRecord};
use crate::measure::change::{interval, Change, Decision};
use crate::measure::loader_run::{stage_changes, RunFigures, StageChange};
use crate::measure::stats::{median, median_of};
use crate::measure::system::SystemInfo;
use crate::measure::workload::Workload;

/// Seed of the bootstrap intervals (fixed: the same runs give the same verdict).
const SEED: u64 = 0x6a4d;

/// A figure now against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FigureChange {
    /// The baseline's median.
    pub baseline: f64,
    /// The median now.
    pub now: f64,
    /// The change of the median, with its interval.
    pub change: Change,
    /// What the interval says with the tolerance as noise.
    pub decision: Decision,
}

impl FigureChange {
    /// The medians of `baseline` and `now`, and the change of `judged` (the same runs'
    /// values in units of the machine's speed, or the values themselves).
    fn of(baseline: &[f64], now: &[f64], judged: (&[f64], &[f64]), tolerance: Tolerance) -> Self {
        let change = Change::of(judged.0, judged.1, SEED).unwrap_or(Change::NONE);
        Self {
            baseline: median(baseline.iter().copied()),
            now: median(now.iter().copied()),
            decision: change.decision(tolerance.0),
            change,
        }
    }

    /// Whether this is worse: more of a cost, or less of a throughput.
    pub fn outcome(&self, smaller_is_better: bool) -> Outcome {
        match (self.decision, smaller_is_better) {
            (Decision::Higher, true) | (Decision::Lower, false) => Outcome::Regression,
            (Decision::Higher, false) | (Decision::Lower, true) => Outcome::Improvement,
            (Decision::NoDifference, _) => Outcome::Pass,
            (Decision::Undecided, _) => Outcome::Undecided,
        }
    }
}

/// What the guard says of a cell, and of the whole run (its worst cell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Within the tolerance.
    Pass,
    /// Better beyond the tolerance: time to update the baseline.
    Improvement,
    /// The interval straddles the tolerance: neither pass nor fail; measure longer.
    Undecided,
    /// Worse beyond the tolerance.
    Regression,
}

/// One cell now against its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellVerdict {
    /// The cell's name.
    pub cell: String,
    /// CPU ms per sample (smaller is better).
    pub cpu_ms_per_sample: FigureChange,
    /// Wall samples/s (bigger is better).
    pub samples_per_s: FigureChange,
    /// Instructions per sample, when both counted them (smaller is better).
    pub instructions_per_sample: Option<FigureChange>,
    /// CPU per sample by stage: where a change comes from.
    pub stages: Vec<StageChange>,
    /// The accelerator utilisation of the loader feeding the cell's step, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub au: Option<AuCheck>,
    /// The worst of the figures' outcomes.
    pub outcome: Outcome,
    /// The work this run of the cell measured (the baseline's is the same: another is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<Workload>,
}

/// A cell's accelerator utilisation (AU) over its runs, judged on its own against the cell's
/// least AU (`min_au`), as MLPerf Storage judges a run: the median below it fails.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AuCheck {
    /// The median AU of the runs, percent.
    pub median_pct: f64,
    /// The 95 % interval of that median (bootstrap over the runs), percent.
    pub low_pct: f64,
    /// Its upper end, percent.
    pub high_pct: f64,
    /// The cell's least AU, where it sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pct: Option<f64>,
    /// Pass, or Regression where the median lies below `min_pct`.
    pub outcome: Outcome,
}

impl AuCheck {
    /// The AU of `runs` (percent each) against `min_pct`; None without runs.
    pub fn of(runs: &[f64], min_pct: Option<f64>) -> Option<Self> {
        let statistic = median_of;
        let (low_pct, high_pct) = interval(runs, SEED, statistic)?;
        let median_pct = statistic(runs);
        let below = min_pct.is_some_and(|min| median_pct < min);
        let outcome = if below { Outcome::Regression } else { Outcome::Pass };
        Some(Self { median_pct, low_pct, high_pct, min_pct, outcome })
    }
}

/// The whole decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardVerdict {
    /// The tolerance applied.
    pub tolerance: Tolerance,
    /// Each cell, in the config's order.
    pub cells: Vec<CellVerdict>,
    /// The reference workload's CPU ms, baseline against now (all cells' runs): the
    /// machine's speed, which the cells' figures are judged relative to.
    pub reference: Option<FigureChange>,
    /// What differed from the baseline without stopping the guard.
    pub warnings: Vec<String>,
    /// The host and software this run measured on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<SystemInfo>,
    /// The worst cell's outcome (a regression too where the history regressed).
    pub outcome: Outcome,
    /// What the guard's history says of this run, where it keeps one (`--history`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryVerdict>,
}

/// Judges the cells measured `now` against `baseline` (cells matched by name, as
/// [`check_baseline`](super::fits::check_baseline) checked).
pub fn judge(
    baseline: &GuardRecord,
    now: &GuardRecord,
    tolerance: Tolerance,
    warnings: Vec<String>,
) -> GuardVerdict {
    let cells: Vec<CellVerdict> = now
        .cells
        .iter()
        .filter_map(|cell| {
            let saved = baseline.cells.iter().find(|c| c.cell.name == cell.cell.name)?;
            Some(judge_cell(saved, cell, tolerance))
        })
        .collect();
    let outcome = cells.iter().map(|c| c.outcome).max().unwrap_or(Outcome::Pass);
    let references = |record: &GuardRecord| -> Option<Vec<f64>> {
        let all: Option<Vec<&[f64]>> = record.cells.iter().map(CellRuns::references).collect();
        all.map(|all| all.concat())
    };
    let reference = references(baseline)
        .zip(references(now))
        .map(|(then, now)| FigureChange::of(&then, &now, (&then, &now), tolerance));
    let host = Some(now.machine.clone());
    GuardVerdict { tolerance, cells, reference, warnings, host, outcome, history: None }
}

/// Each run's value in units of the machine's speed: a `cost` divided by the reference
/// measured before it, a rate multiplied by it; as is unless `both` sides have references.
fn speed_adjusted(cell: &CellRuns, values: &[f64], cost: bool, both: bool) -> Vec<f64> {
    match cell.references().filter(|_| both) {
        Some(references) => values
            .iter()
            .zip(references)
            .map(|(v, ms)| if cost { v / ms } else { v * ms })
            .collect(),
        None => values.to_vec(),
    }
}

/// One cell's figures against its baseline, judged in units of the machine's speed where
/// both measured it.
fn judge_cell(baseline: &CellRuns, now: &CellRuns, tolerance: Tolerance) -> CellVerdict {
    let both = baseline.references().is_some() && now.references().is_some();
    let figure = |f: fn(&RunFigures) -> f64, cost: bool| {
        let (then_values, now_values) = (baseline.values(f), now.values(f));
        let judged = (
            speed_adjusted(baseline, &then_values, cost, both),
            speed_adjusted(now, &now_values, cost, both),
        );
        FigureChange::of(&then_values, &now_values, (&judged.0, &judged.1), tolerance)
    };
    let cpu = figure(|r| r.cpu_ms_per_sample, true);
    let throughput = figure(|r| r.samples_per_s, false);
    // Instructions do not depend on the machine's speed.
    let instructions = baseline
        .instructions()
        .zip(now.instructions())
        .map(|(then, now)| FigureChange::of(&then, &now, (&then, &now), tolerance));
    let au = now.au().and_then(|runs| AuCheck::of(&runs, now.cell.min_au));
    let mut outcomes = vec![cpu.outcome(true), throughput.outcome(false)];
    outcomes.extend(instructions.map(|i| i.outcome(true)));
    outcomes.extend(au.map(|au| au.outcome));
    CellVerdict {
        cell: now.cell.name.clone(),
        cpu_ms_per_sample: cpu,
        samples_per_s: throughput,
        instructions_per_sample: instructions,
        stages: stage_changes(&baseline.run_refs(), &now.run_refs(), SEED),
        au,
        outcome: outcomes.into_iter().max().unwrap_or(Outcome::Pass),
        workload: now.workload.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::compare::guard::config::GuardCell;
    use crate::bench::compare::guard::record::{DatasetFingerprint, BASELINE_FORMAT};

    /// A record of one cell whose runs cost `cpu` ms per sample each.
    fn record(cpu: &[f64]) -> GuardRecord {
        let cell: GuardCell = toml::from_str("name = \"c\"\nworkers = 0\nbatch = 4\n").unwrap();
        let runs: Vec<RunFigures> = cpu
            .iter()
            .map(|&ms| RunFigures {
                cpu_ms_per_sample: ms,
                samples_per_s: 1000.0 / ms,
                stages: vec![("decode".into(), ms * 0.8), ("parquet".into(), ms * 0.2)],
                instructions_per_sample: None,
                au_pct: None,
            })
            .collect();
        GuardRecord {
            feedbench_guard_baseline: BASELINE_FORMAT,
            measured_at: 0,
            machine: crate::measure::system::system_info(tch::Device::Cpu),
            dataset: DatasetFingerprint { files: 1, bytes: 1, sha256: "0".into() },
            run: Default::default(),
            cells: vec![CellRuns {
                reference_ms: vec![100.0; runs.len()],
                cell,
                runs,
                workload: None,
            }],
        }
    }

    const BASE: [f64; 8] = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03, 0.97, 1.0];
    const TEN: Tolerance = Tolerance(10.0);

    fn scaled(by: f64) -> Vec<f64> {
        BASE.iter().map(|x| x * by).collect()
    }

    #[test]
    fn a_slowdown_beyond_the_tolerance_is_a_regression_with_its_stage() {
        let verdict = judge(&record(&BASE), &record(&scaled(1.2)), TEN, Vec::new());
        assert_eq!(verdict.outcome, Outcome::Regression);
        let cell = &verdict.cells[0];
        assert!((cell.cpu_ms_per_sample.change.percent - 20.0).abs() < 1e-6, "{cell:?}");
        assert!(cell.cpu_ms_per_sample.change.low > 10.0);
        assert_eq!(cell.samples_per_s.decision, Decision::Lower, "fewer samples/s: worse too");
        assert!((cell.stages[0].change.unwrap().percent - 20.0).abs() < 1e-6);
    }

    #[test]
    fn the_same_runs_pass_and_a_change_within_the_tolerance_passes() {
        let same = judge(&record(&BASE), &record(&BASE), TEN, Vec::new());
        assert_eq!(same.outcome, Outcome::Pass);
        // 5 % slower, significant, but within 10 %: a pass.
        let within = judge(&record(&BASE), &record(&scaled(1.05)), TEN, Vec::new());
        assert_eq!(within.outcome, Outcome::Pass, "{:?}", within.cells[0].cpu_ms_per_sample);
        // The same 5 % with a 2 % tolerance is a regression.
        let tight = judge(&record(&BASE), &record(&scaled(1.05)), Tolerance(2.0), Vec::new());
        assert_eq!(tight.outcome, Outcome::Regression);
    }

    #[test]
    fn faster_is_an_improvement_and_a_wide_spread_is_undecided() {
        let faster = judge(&record(&BASE), &record(&scaled(0.7)), TEN, Vec::new());
        assert_eq!(faster.outcome, Outcome::Improvement);
        let wide = [0.6, 1.5, 0.9, 1.3, 0.7, 1.6, 0.8, 1.2];
        let verdict = judge(&record(&BASE), &record(&wide), TEN, Vec::new());
        assert_eq!(verdict.outcome, Outcome::Undecided, "{:?}", verdict.cells[0]);
    }

    #[test]
    fn the_machines_drift_is_taken_out_and_a_real_slowdown_is_not() {
        // The whole machine 30 % slower now: the cell and the reference alike. A pass.
        let mut slower_machine = record(&scaled(1.3));
        slower_machine.cells[0].reference_ms.iter_mut().for_each(|ms| *ms *= 1.3);
        let verdict = judge(&record(&BASE), &slower_machine, TEN, Vec::new());
        assert_eq!(verdict.outcome, Outcome::Pass, "{:?}", verdict.cells[0]);
        let reference = verdict.reference.unwrap();
        assert!((reference.change.percent - 30.0).abs() < 1e-6, "the drift is reported");
        assert!(
            (verdict.cells[0].cpu_ms_per_sample.now / 1.3 - 1.0).abs() < 0.02,
            "raw medians shown"
        );
        // The machine 20 % faster and the cell 20 % costlier on it: a regression.
        let mut costlier = record(&scaled(1.2 * 0.8));
        costlier.cells[0].reference_ms.iter_mut().for_each(|ms| *ms *= 0.8);
        let verdict = judge(&record(&BASE), &costlier, TEN, Vec::new());
        assert_eq!(verdict.outcome, Outcome::Regression, "{:?}", verdict.cells[0]);
        // Without references on one side, the raw figures are judged.
        let mut unmeasured = record(&scaled(1.3));
        unmeasured.cells[0].reference_ms.clear();
        let verdict = judge(&record(&BASE), &unmeasured, TEN, Vec::new());
        assert_eq!((verdict.outcome, verdict.reference), (Outcome::Regression, None));
    }

    #[test]
    fn a_cell_below_its_least_au_fails_whatever_its_baseline_and_one_above_passes() {
        let with_au = |au: &[f64], min: Option<f64>| {
            let mut now = record(&BASE);
            now.cells[0].cell.min_au = min;
            now.cells[0].runs.iter_mut().zip(au.iter().cycle()).for_each(|(r, &a)| {
                r.au_pct = Some(a);
            });
            now
        };
        let starved = [71.0, 74.0, 72.5];
        let verdict = judge(&record(&BASE), &with_au(&starved, Some(90.0)), TEN, Vec::new());
        assert_eq!(verdict.outcome, Outcome::Regression, "same speed, AU below its line");
        let au = verdict.cells[0].au.unwrap();
        assert_eq!((au.median_pct, au.min_pct), (72.5, Some(90.0)));
        assert!(au.low_pct >= 71.0 && au.high_pct <= 74.0 && au.low_pct < au.high_pct, "{au:?}");
        let fed = [97.0, 99.0, 98.0];
        let verdict = judge(&record(&BASE), &with_au(&fed, Some(90.0)), TEN, Vec::new());
        assert_eq!(verdict.outcome, Outcome::Pass, "{:?}", verdict.cells[0].au);
        // Measured without a least AU: said, never failed.
        let verdict = judge(&record(&BASE), &with_au(&starved, None), TEN, Vec::new());
        assert_eq!((verdict.outcome, verdict.cells[0].au.unwrap().min_pct), (Outcome::Pass, None));
        // A baseline of runs without a step has no AU: nothing judged.
        assert_eq!(judge(&record(&BASE), &record(&BASE), TEN, Vec::new()).cells[0].au, None);
    }

    #[test]
    fn baselines_round_trip_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.json");
        let mut saved = record(&[0.1 + 0.2, 1.0 / 3.0, 2.0f64.sqrt()]);
        saved.cells[0].runs[1].instructions_per_sample = Some(123_456.789);
        saved.save(&path).unwrap();
        assert_eq!(GuardRecord::read(&path).unwrap(), saved);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no partial file left");
    }
}
