//! What a guard's history says of this run, cell by cell: the runs of the same workload on the
//! same host since the last accepted level, their change points ([`change_points`]), and the
//! shift of the level now against the level before it — over consecutive change points in one
//! direction, so that a drift of several small steps is one shift. A shift is a regression only
//! where it is both statistically clear (its change points significant, the 95 % bootstrap
//! interval of its size wholly below zero) and larger than a practical threshold
//! (`--min-change`), as .NET's performance bots ask both of a test and a threshold.

use serde::{Deserialize, Serialize};

use super::HistoryRun;
use crate::measure::change::Change;
use crate::measure::change_points::{change_points, ChangePoint, Settings};
use crate::measure::stats::median;

/// Seed of the bootstrap intervals (fixed: one history gives one verdict).
const SEED: u64 = 0x4157;

/// What the history says of this run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryVerdict {
    /// The least shift that is a regression, percent (`--min-change`).
    pub min_change_pct: f64,
    /// Each cell of this run, in its order.
    pub cells: Vec<CellHistory>,
    /// Whether any cell's history regressed.
    pub regression: bool,
}

/// One cell's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellHistory {
    /// The cell's name.
    pub name: String,
    /// The figure judged (`samples_per_s` or `au_pct`; bigger is better).
    pub figure: String,
    /// The runs judged, oldest first, this run last.
    pub points: Vec<HistoryPoint>,
    /// Runs of the history left aside: another host, or without this cell's workload.
    pub set_aside: usize,
    /// The change points of the shift now (the first run of each of its steps), as indices
    /// into `points`; none where the history holds no shift beyond `--min-change`: smaller
    /// ones are a shared machine's wander, and are not reported.
    pub change_points: Vec<usize>,
    /// The level now against the level before it, where the history shifted beyond
    /// `--min-change`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<Shift>,
    /// Whether the shift is a regression.
    pub regression: bool,
    /// Why nothing could be read yet, where too few runs are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_enough: Option<String>,
}

/// One run in a cell's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryPoint {
    /// Its commit, where known.
    pub commit: Option<String>,
    /// When it ran, seconds since the Unix epoch.
    pub date: u64,
    /// The point judged (a rate at the machine's speed, [`super::HistoryCell::value`]).
    pub value: f64,
    /// The cell's figure as measured (the median of its repeats).
    pub raw: f64,
}

/// The history's level now against the level before its last shift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shift {
    /// The first run of the shift (an index into the cell's points).
    pub first: usize,
    /// Its commit, where known.
    pub commit: Option<String>,
    /// When it ran.
    pub date: u64,
    /// The level now against the level before, percent, with its 95 % interval.
    pub change: Change,
    /// Runs since the shift began, its first included.
    pub runs_since: usize,
    /// The largest permutation p-value of its change points.
    pub p_value: f64,
}

/// Judges `now` (the last of `runs`) against the history before it; `min_change_pct` is the
/// least shift that is a regression.
pub fn judge_history(runs: &[HistoryRun], min_change_pct: f64) -> Option<HistoryVerdict> {
    let now = runs.last()?;
    let settings = Settings::default();
    let cells: Vec<CellHistory> = (now.cells.iter())
        .map(|cell| {
            let same = |run: &&HistoryRun| {
                run.host.other_host(&now.host).is_empty()
                    && run
                        .cells
                        .iter()
                        .any(|c| c.name == cell.name && c.workload.hash == cell.workload.hash)
            };
            let judged: Vec<&HistoryRun> = runs.iter().filter(same).collect();
            let set_aside = runs.len() - judged.len();
            let since = judged.iter().rposition(|run| run.accepted).unwrap_or(0);
            let points: Vec<HistoryPoint> = judged[since..]
                .iter()
                .map(|run| {
                    let found = run.cells.iter().find(|c| c.name == cell.name);
                    let value = found.map_or(f64::NAN, |c| c.value);
                    let raw = found.map_or(f64::NAN, |c| median(c.values.iter().copied()));
                    HistoryPoint { commit: run.commit.clone(), date: run.date, value, raw }
                })
                .collect();
            cell_history(&cell.name, &cell.figure, points, set_aside, min_change_pct, &settings)
        })
        .collect();
    let regression = cells.iter().any(|c| c.regression);
    Some(HistoryVerdict { min_change_pct, cells, regression })
}

/// One cell's history judged.
fn cell_history(
    name: &str,
    figure: &str,
    points: Vec<HistoryPoint>,
    set_aside: usize,
    min_change_pct: f64,
    settings: &Settings,
) -> CellHistory {
    let mut history = CellHistory {
        name: name.into(),
        figure: figure.into(),
        points,
        set_aside,
        change_points: Vec::new(),
        shift: None,
        regression: false,
        not_enough: None,
    };
    let least = 2 * settings.min_size;
    if history.points.len() < least {
        history.not_enough = Some(format!(
            "not enough history yet: {} run{} of this workload on this host since its level was \
             set; shifts are read from {least}",
            history.points.len(),
            if history.points.len() == 1 { "" } else { "s" }
        ));
        return history;
    }
    let values: Vec<f64> = history.points.iter().map(|p| p.value).collect();
    let found = change_points(&values, settings);
    let Some((shift, steps)) = shift_now(&history.points, &values, &found) else { return history };
    if shift.change.percent.abs() < min_change_pct {
        return history;
    }
    history.change_points = steps;
    history.regression = shift.change.percent <= -min_change_pct && shift.change.high < 0.0;
    history.shift = Some(shift);
    history
}

/// The level after the last change point `found` in the `values` of `points` against the level
/// before the run of consecutive change points in the same direction that ends with it; its
/// first run walked back over the runs already beyond the earlier level's noise (a drift starts
/// before its change point), or on past those still within it. With the shift, its change
/// points.
fn shift_now(
    points: &[HistoryPoint],
    values: &[f64],
    found: &[ChangePoint],
) -> Option<(Shift, Vec<usize>)> {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let bounds: Vec<usize> =
        std::iter::once(0).chain(found.iter().map(|c| c.index)).chain([values.len()]).collect();
    // Segment i runs from bounds[i] to bounds[i + 1]; change point i starts segment i + 1.
    let segment = |i: usize| &values[bounds[i]..bounds[i + 1]];
    let last = found.len().checked_sub(1)?;
    let down = mean(segment(last + 1)) < mean(segment(last));
    let mut start = last;
    while start > 0 && (mean(segment(start)) < mean(segment(start - 1))) == down {
        start -= 1;
    }
    let before = segment(start);
    let after = &values[found[last].index..];
    let level = median(before.iter().copied());
    let spread = 1.4826 * median(before.iter().map(|v| (v - level).abs()));
    let beyond = |v: f64| if down { v < level - 2.0 * spread } else { v > level + 2.0 * spread };
    let mut first = found[start].index;
    if beyond(values[first]) {
        while first > bounds[start] + 1 && beyond(values[first - 1]) {
            first -= 1;
        }
    } else {
        // A level of few runs may take a run of the old one with it: the shift starts after.
        while first + 1 < values.len() && !beyond(values[first]) {
            first += 1;
        }
    }
    let change = Change::of_by(before, after, SEED, mean)?;
    let p_value = found[start..].iter().map(|c| c.p_value).fold(0.0, f64::max);
    let shift = Shift {
        first,
        commit: points[first].commit.clone(),
        date: points[first].date,
        change,
        runs_since: values.len() - first,
        p_value,
    };
    Some((shift, found[start..].iter().map(|c| c.index).collect()))
}
