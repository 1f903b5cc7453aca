//! The results of a plan's cells, one file each: `DIR/cells/<id>.json`, written whole or not at
//! all, so that a task killed at any moment leaves only finished cells behind, and a task run
//! again skips them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::error::ClusterError;
use crate::bench::sweep::results::CellResult;
use crate::dataset::files::write_whole;

/// The directory of cell files in a sweep's output directory.
pub const CELLS_DIR: &str = "cells";

/// Where the result of the cell `id` goes.
pub fn cell_path(out: &Path, id: &str) -> PathBuf {
    out.join(CELLS_DIR).join(format!("{id}.json"))
}

/// Writes `result` to its cell file, whole or not at all.
pub fn write_cell(out: &Path, result: &CellResult) -> Result<PathBuf, ClusterError> {
    let dir = out.join(CELLS_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| ClusterError::io(&dir, e))?;
    let path = cell_path(out, &result.cell.id());
    let text = crate::bench::export::pretty_json(result);
    write_whole(&path, text.as_bytes()).map_err(|e| ClusterError::io(&path, e))?;
    Ok(path)
}

/// Every finished cell in `out/cells`, by id. Temporary files of a write that was cut short
/// are not cells; a cell file that does not hold a result, or holds another cell's, is an
/// error naming it.
pub fn finished_cells(out: &Path) -> Result<HashMap<String, CellResult>, ClusterError> {
    let dir = out.join(CELLS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(ClusterError::io(&dir, e)),
    };
    let mut cells = HashMap::new();
    for entry in entries {
        let path = entry.map_err(|e| ClusterError::io(&dir, e))?.path();
        let Some(id) = path.file_name().and_then(|n| n.to_str()?.strip_suffix(".json")) else {
            continue;
        };
        let text = std::fs::read_to_string(&path).map_err(|e| ClusterError::io(&path, e))?;
        let result: CellResult = serde_json::from_str(&text)
            .map_err(|e| ClusterError::file(&path, format!("not a feedbench cell result ({e})")))?;
        if result.cell.id() != id {
            return Err(ClusterError::file(
                &path,
                format!("holds the result of cell {}, not of {id}", result.cell.id()),
            ));
        }
        cells.insert(id.to_string(), result);
    }
    Ok(cells)
}
