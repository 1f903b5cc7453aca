//! The rows one sample reads, fetched once each while it is built.

use crate::dataset::frames::{FrameTable, Row};
use crate::dataset::values::Values;
use crate::dataset::Result;

/// The rows one sample reads, each fetched once (a window's keys read the same rows), kept in
/// the [`Sample`](super::Sample) so that its allocation is reused, and emptied once the sample
/// is built (and before the next, where one failed part-way).
#[derive(Default)]
pub(super) struct RowCache {
    /// The rows fetched so far for this sample, by global index, in the order first asked for.
    rows: Vec<(usize, Row)>,
    /// The position of the row asked for last: windows ask for rows in order.
    last: usize,
}

impl RowCache {
    /// The position in `rows` of the row with global `index`, fetched on first use.
    fn position(&mut self, frames: &FrameTable, index: usize) -> Result<usize> {
        let next = self.last + 1;
        let position = if self.rows.get(next).is_some_and(|(i, _)| *i == index) {
            next
        } else if let Some(position) = self.rows.iter().position(|(i, _)| *i == index) {
            position
        } else {
            // A window's next row is mostly the one after the last in its row group.
            let after = self.rows.get(self.last).filter(|(i, _)| i + 1 == index);
            let row = match after.and_then(|(_, previous)| frames.row_after(previous, index)) {
                Some(row) => row,
                None => frames.row(index)?,
            };
            self.rows.push((index, row));
            self.rows.len() - 1
        };
        self.last = position;
        Ok(position)
    }

    /// The row with global `index`, fetched on first use.
    pub(super) fn get(&mut self, frames: &FrameTable, index: usize) -> Result<&Row> {
        let position = self.position(frames, index)?;
        Ok(&self.rows[position].1)
    }

    /// Appends the values of column `column` at `rows` to `values`: rows that follow one
    /// another in a row group (a window away from its episode's ends) as one copy.
    pub(super) fn extend(
        &mut self,
        frames: &FrameTable,
        rows: impl Iterator<Item = (usize, bool)>,
        (column, width): (usize, usize),
        values: &mut Values,
    ) -> Result<()> {
        // The run being gathered: its first row's position, and how many rows it holds.
        let mut run: Option<(usize, usize)> = None;
        for (row, _) in rows {
            let next = self.position(frames, row)?;
            if let Some((first, count)) = &mut run {
                if self.rows[*first].1.is_followed_by(&self.rows[next].1, *count) {
                    *count += 1;
                    continue;
                }
                self.copy_run((*first, *count), (column, width), values);
            }
            run = Some((next, 1));
        }
        if let Some(run) = run {
            self.copy_run(run, (column, width), values);
        }
        Ok(())
    }

    /// Appends column `column`'s values of the run `(first, count)` (a position in `rows` and
    /// the rows after it in its row group) to `values`: one copy.
    fn copy_run(
        &self,
        (first, count): (usize, usize),
        (column, width): (usize, usize),
        values: &mut Values,
    ) {
        let (source, range) = self.rows[first].1.run_values(column, width, count);
        values.extend_from(source, range);
    }

    /// Forgets the rows, keeping the allocation for the next sample.
    pub(super) fn clear(&mut self) {
        self.rows.clear();
        self.last = 0;
    }
}

impl Clone for RowCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for RowCache {
    /// A scratch buffer: never part of what a sample is.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for RowCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowCache")
    }
}
