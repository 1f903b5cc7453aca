//! Reading Arrow columns by name, with errors that name the file and the column.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use arrow::record_batch::RecordBatchReader;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::error::{DatasetError, Result};

/// Reads a whole (small) parquet file, keeping only the columns `keep` accepts, as one batch.
pub fn read_parquet(path: &Path, keep: impl Fn(&str) -> bool) -> Result<RecordBatch> {
    let file = super::files::PositionedFile::open(path)?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| DatasetError::parquet(path, e))?;
    let roots: Vec<usize> = builder
        .parquet_schema()
        .root_schema()
        .get_fields()
        .iter()
        .enumerate()
        .filter(|(_, field)| keep(field.name()))
        .map(|(i, _)| i)
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader =
        builder.with_projection(mask).build().map_err(|e| DatasetError::parquet(path, e))?;
    let schema = reader.schema();
    let batches = reader
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| DatasetError::arrow(path, e))?;
    arrow::compute::concat_batches(&schema, &batches).map_err(|e| DatasetError::arrow(path, e))
}

/// The column `name` of `batch`, or an error naming the file and the column.
pub fn column<'a>(batch: &'a RecordBatch, name: &str, path: &Path) -> Result<&'a ArrayRef> {
    batch
        .column_by_name(name)
        .ok_or_else(|| DatasetError::invalid(path, format!("missing column `{name}`")))
}

fn cast_to(array: &ArrayRef, to: &DataType, name: &str, path: &Path) -> Result<ArrayRef> {
    if array.null_count() > 0 {
        return Err(DatasetError::invalid(path, format!("column `{name}` has null values")));
    }
    cast(array, to).map_err(|e| {
        DatasetError::invalid(path, format!("column `{name}`: expected {to} values ({e})"))
    })
}

/// The integer column `name` as i64 (any integer width is accepted).
pub fn i64_column(batch: &RecordBatch, name: &str, path: &Path) -> Result<Vec<i64>> {
    let array = cast_to(column(batch, name, path)?, &DataType::Int64, name, path)?;
    Ok(array.as_primitive::<Int64Type>().values().to_vec())
}

/// The non-negative integer column `name` as usize.
pub fn usize_column(batch: &RecordBatch, name: &str, path: &Path) -> Result<Vec<usize>> {
    i64_column(batch, name, path)?
        .into_iter()
        .map(|v| {
            usize::try_from(v).map_err(|_| {
                DatasetError::invalid(
                    path,
                    format!("column `{name}`: expected values ≥ 0, found {v}"),
                )
            })
        })
        .collect()
}

/// The float column `name` as f64.
pub fn f64_column(batch: &RecordBatch, name: &str, path: &Path) -> Result<Vec<f64>> {
    let array = cast_to(column(batch, name, path)?, &DataType::Float64, name, path)?;
    Ok(array.as_primitive::<Float64Type>().values().to_vec())
}

/// The string column `name` (utf8, large utf8 or string view).
pub fn string_column(batch: &RecordBatch, name: &str, path: &Path) -> Result<Vec<String>> {
    let array = cast_to(column(batch, name, path)?, &DataType::Utf8, name, path)?;
    Ok(array.as_string::<i32>().iter().map(|s| s.unwrap_or_default().to_string()).collect())
}

/// The list-of-strings column `name` (list or large list).
pub fn string_list_column(
    batch: &RecordBatch,
    name: &str,
    path: &Path,
) -> Result<Vec<Vec<String>>> {
    let list_type =
        DataType::List(Arc::new(arrow::datatypes::Field::new_list_field(DataType::Utf8, true)));
    let array = cast_to(column(batch, name, path)?, &list_type, name, path)?;
    Ok(array
        .as_list::<i32>()
        .iter()
        .map(|row| {
            row.map(|values| {
                values
                    .as_string::<i32>()
                    .iter()
                    .map(|s| s.unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
        })
        .collect())
}
