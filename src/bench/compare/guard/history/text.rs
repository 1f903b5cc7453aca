//! The history's verdict laid out as lines, for the terminal and github-action-benchmark's
//! `extra`: per cell, not enough history yet, no shift beyond the threshold, or the shift (a
//! regression, an improvement, or not clear of noise) with its first run, its size and
//! interval and the runs since, and how to accept it.

use super::verdict::{CellHistory, HistoryVerdict};
use crate::bench::format::rate;
use crate::bench::report::page::utc;

/// The verdict as lines; `accept` is the command that accepts a shift as the new level.
pub fn text(verdict: &HistoryVerdict, accept: &str) -> String {
    let mut out = String::new();
    for cell in &verdict.cells {
        out.push_str(&cell_line(cell, verdict.min_change_pct));
        if cell.set_aside > 0 {
            out.push_str(&format!(
                " ({} run{} of other workloads or hosts set aside)",
                cell.set_aside,
                if cell.set_aside == 1 { "" } else { "s" }
            ));
        }
        out.push('\n');
    }
    if verdict.regression {
        out.push_str(&format!(
            "The history regressed. Find the change at the run named; or, where the new level is \
             meant, accept it: {accept}\n"
        ));
    }
    out
}

/// One cell's line: what its history says.
pub fn cell_line(cell: &CellHistory, min_change_pct: f64) -> String {
    let name = &cell.name;
    if let Some(why) = &cell.not_enough {
        return format!("history of {name}: {why}");
    }
    let Some(shift) = &cell.shift else {
        return format!(
            "history of {name}: no shift beyond --min-change {min_change_pct} % over {} runs \
             since its level was set",
            cell.points.len()
        );
    };
    let commit = shift.commit.as_deref().unwrap_or("an unknown commit");
    let change = &shift.change;
    let figure = match cell.figure.as_str() {
        "au_pct" => "AU",
        _ => "samples/s (at the machine's speed)",
    };
    let now = cell.points.last().map_or(String::new(), |p| match cell.figure.as_str() {
        "au_pct" => format!(", {:.1} % now", p.value),
        _ => format!(", {} now", rate(p.raw)),
    });
    let what = format!(
        "{figure} {:+.1} % (95 % CI {:+.1} to {:+.1} %{now}) since {commit} ({}), {} run{} ago \
         (p {:.3})",
        change.percent,
        change.low,
        change.high,
        utc(shift.date),
        shift.runs_since,
        if shift.runs_since == 1 { "" } else { "s" },
        shift.p_value
    );
    if cell.regression {
        format!("REGRESSION in {name} by its history: {what}")
    } else if change.percent > 0.0 {
        format!("history of {name}: improved, {what}")
    } else {
        format!("history of {name}: a shift not clear of noise, {what}")
    }
}
