//! Several roots of one dataset side by side (a sweep's `[dataset] also`: a copy in `/dev/shm`,
//! on local disk, in a bucket): per cell, each root's loader and train samples/s, the ratio to
//! the first root's, and what held a remote root's loader — the cost of where the data lies.

use super::compared::RootComparison;
use super::model::{Report, Row};
use super::table::{Column, Table};
use crate::bench::format::rate;
use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::cell::Knob;
use crate::bench::sweep::results::CellResult;

/// The comparison of `rows`, where `results` name more than one dataset.
pub(super) fn compare(results: &[CellResult], rows: &[Row]) -> Option<RootComparison> {
    let mut roots: Vec<String> = Vec::new();
    for result in results {
        if !roots.contains(&result.cell.dataset) {
            roots.push(result.cell.dataset.clone());
        }
    }
    if roots.len() < 2 {
        return None;
    }
    let apart = |cell: &Cell| Cell { dataset: String::new(), ..cell.clone() };
    let mut keys: Vec<Cell> = Vec::new();
    for row in rows {
        let key = apart(&row.knobs);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let cells = keys
        .iter()
        .map(|key| {
            roots
                .iter()
                .map(|root| {
                    rows.iter().position(|r| &r.knobs.dataset == root && apart(&r.knobs) == *key)
                })
                .collect()
        })
        .collect();
    Some(RootComparison { roots, cells })
}

/// What the roots table's columns say.
pub fn legend() -> String {
    "× first: the root's train samples/s over the first root's at the same knobs; store: what \
     held the loader of a URL root (latency-, link- or decode-bound; docs/remote.md)"
        .into()
}

impl Report {
    /// Every root's rows side by side: a line per cell and root. None with one root.
    pub(crate) fn roots_table(&self) -> Option<Table> {
        let comparison = self.roots.as_ref()?;
        let mut columns = ["workers", "prefetch", "batch"].map(Column::number).to_vec();
        let others: Vec<Knob> =
            self.varying.iter().copied().filter(|&k| k != Knob::Dataset).collect();
        columns.extend(others.iter().map(|k| Column::text(k.name())));
        columns.push(Column::text("root"));
        for header in ["loader/s", "train/s", "× first", "input-bound %"] {
            columns.push(Column::number(header));
        }
        columns.push(Column::text("store"));
        let mut lines = Vec::new();
        for cell in &comparison.cells {
            let first = cell[0].map(|i| self.rows[i].train_samples_per_s);
            for (root, row) in comparison.roots.iter().zip(cell) {
                let Some(row) = row.map(|i| &self.rows[i]) else { continue };
                let mut line = vec![
                    row.knobs.knobs.workers.to_string(),
                    row.knobs.knobs.prefetch.to_string(),
                    row.knobs.knobs.batch_size.to_string(),
                ];
                line.extend(others.iter().map(|k| k.value(&row.knobs)));
                let ratio =
                    first.map_or("-".into(), |f| format!("{:.2}", row.train_samples_per_s / f));
                line.extend([
                    root.clone(),
                    row.loader_samples_per_s.map_or("-".into(), rate),
                    rate(row.train_samples_per_s),
                    ratio,
                    format!("{:.1}", row.input_bound_pct),
                    row.remote.map_or("-".into(), |b| b.to_string()),
                ]);
                lines.push(line);
            }
        }
        Some(Table { columns, rows: lines })
    }
}
