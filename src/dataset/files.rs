//! Writing the files of a dataset: parquet, JSON and JSON Lines.

use std::path::Path;

use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde_json::Value as Json;

use crate::dataset::{DatasetError, Result};

/// Writes `batch` as a parquet file with row groups of at most `row_group_rows` rows. The
/// schema's metadata (e.g. `pandas`) also goes into the file's key-value metadata, as pyarrow
/// writes it.
pub fn write_parquet(path: &Path, batch: &RecordBatch, row_group_rows: usize) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
    }
    let file = std::fs::File::create(path).map_err(|e| DatasetError::io(path, e))?;
    let metadata: Vec<KeyValue> = batch
        .schema()
        .metadata()
        .iter()
        .map(|(key, value)| KeyValue::new(key.clone(), value.clone()))
        .collect();
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .set_key_value_metadata((!metadata.is_empty()).then_some(metadata))
        .build();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties))
        .map_err(|e| DatasetError::parquet(path, e))?;
    writer.write(batch).map_err(|e| DatasetError::parquet(path, e))?;
    writer.close().map_err(|e| DatasetError::parquet(path, e))?;
    Ok(())
}

/// Writes `value` as pretty JSON and a newline, creating the parent directory.
pub fn write_json(path: &Path, value: &Json) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
    }
    let text = serde_json::to_string_pretty(value).expect("JSON values serialise");
    std::fs::write(path, text + "\n").map_err(|e| DatasetError::io(path, e))
}

/// Writes one JSON value per line (JSON Lines).
pub fn write_lines(path: &Path, lines: impl Iterator<Item = Json>) -> Result<()> {
    let text: String = lines.map(|l| l.to_string() + "\n").collect();
    std::fs::write(path, text).map_err(|e| DatasetError::io(path, e))
}
