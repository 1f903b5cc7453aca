//! A bulk column's values: an Arrow column of scalars or (nested) lists, checked against its
//! feature's shape and flattened row-major into values of its dtype.

use std::path::Path;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float32Type, Float64Type, Int32Type, Int64Type};

use super::super::error::{DatasetError, Result};
use super::super::meta::ScalarType;
use super::super::values::Values;

/// A column decoded in bulk: a numeric or string feature.
#[derive(Debug, Clone)]
pub struct TableColumn {
    /// The feature name (= the parquet column name).
    pub name: String,
    /// The element type; None for strings.
    pub scalar: Option<ScalarType>,
    /// Values per row.
    pub width: usize,
    /// The feature's shape (info.json): `[1]` for a scalar, else the dimensions of its nested
    /// lists, outermost first.
    pub shape: Vec<usize>,
}

/// A list of `found` values where `column`'s shape says otherwise, in dimension `dim`
/// (0 outermost), at parquet row `row` where known.
pub(super) fn wrong_length(
    path: &Path,
    column: &TableColumn,
    row: Option<usize>,
    dim: usize,
    found: usize,
) -> DatasetError {
    let at = row.map(|row| format!(" row {row}")).unwrap_or_default();
    let expected = column.shape[dim];
    let what = if column.shape.len() == 1 {
        format!("expected {expected} values (info.json shape)")
    } else {
        format!(
            "expected {expected} values in dimension {} of {:?} (info.json shape)",
            dim + 1,
            column.shape
        )
    };
    DatasetError::invalid(path, format!("column `{}`{at}: {what}, found {found}", column.name))
}

/// Flattens a scalar or (nested) list column into `rows × width` values of the feature's dtype.
pub(super) fn decode_column(
    batch: &RecordBatch,
    column: &TableColumn,
    path: &Path,
) -> Result<Values> {
    let array = batch.column_by_name(&column.name).expect("projected");
    if array.null_count() > 0 {
        return Err(DatasetError::invalid(
            path,
            format!("column `{}` has null values", column.name),
        ));
    }
    let flat = if column.width == 1 && !is_list(array.data_type()) {
        array.clone()
    } else {
        flatten(array, 0, 1, column, path)?
    };
    if is_list(flat.data_type()) {
        return Err(DatasetError::invalid(
            path,
            format!(
                "column `{}`: lists nested deeper than its info.json shape {:?}",
                column.name, column.shape
            ),
        ));
    }
    let target = match column.scalar {
        Some(ScalarType::Float32) => DataType::Float32,
        Some(ScalarType::Float64) => DataType::Float64,
        Some(ScalarType::Int64) => DataType::Int64,
        Some(ScalarType::Int32) => DataType::Int32,
        Some(ScalarType::Bool) => DataType::Boolean,
        None => DataType::Utf8,
    };
    let typed = cast(&flat, &target).map_err(|e| {
        DatasetError::invalid(
            path,
            format!(
                "column `{}`: expected {} values (info.json dtype), found {} ({e})",
                column.name,
                target,
                flat.data_type()
            ),
        )
    })?;
    Ok(match column.scalar {
        Some(ScalarType::Float32) => {
            Values::F32(typed.as_primitive::<Float32Type>().values().to_vec())
        }
        Some(ScalarType::Float64) => {
            Values::F64(typed.as_primitive::<Float64Type>().values().to_vec())
        }
        Some(ScalarType::Int64) => Values::I64(typed.as_primitive::<Int64Type>().values().to_vec()),
        Some(ScalarType::Int32) => Values::I32(typed.as_primitive::<Int32Type>().values().to_vec()),
        Some(ScalarType::Bool) => {
            Values::Bool(typed.as_boolean().iter().map(|v| v.unwrap_or(false)).collect())
        }
        None => Values::Str(
            typed.as_string::<i32>().iter().map(|v| v.unwrap_or_default().to_string()).collect(),
        ),
    })
}

fn is_list(data_type: &DataType) -> bool {
    matches!(data_type, DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..))
}

/// The values of `array`, a list column at dimension `dim` of `column`'s shape (each of its
/// lists `column.shape[dim]` long, `per_row` lists to a parquet row), with the dimensions from
/// `dim` on flattened row-major, as LeRobot's nested lists (HF `Sequence`, `Array2D`–`Array5D`)
/// become a tensor of that shape.
fn flatten(
    array: &ArrayRef,
    dim: usize,
    per_row: usize,
    column: &TableColumn,
    path: &Path,
) -> Result<ArrayRef> {
    let Some(&expected) = column.shape.get(dim) else { return Ok(array.clone()) };
    let check = |lengths: &mut dyn Iterator<Item = usize>| {
        for (list, found) in lengths.enumerate() {
            if found != expected {
                return Err(wrong_length(path, column, Some(list / per_row), dim, found));
            }
        }
        Ok(())
    };
    let inner = match array.data_type() {
        DataType::List(_) => {
            let list = array.as_list::<i32>();
            check(&mut list.value_offsets().windows(2).map(|w| (w[1] - w[0]) as usize))?;
            contiguous(list.value_offsets(), list.values())
        }
        DataType::LargeList(_) => {
            let list = array.as_list::<i64>();
            check(&mut list.value_offsets().windows(2).map(|w| (w[1] - w[0]) as usize))?;
            contiguous(list.value_offsets(), list.values())
        }
        DataType::FixedSizeList(_, n) => {
            let list = array.as_fixed_size_list();
            check(&mut std::iter::once(*n as usize))?;
            list.values().slice(list.offset() * expected, list.len() * expected)
        }
        other => {
            return Err(DatasetError::invalid(
                path,
                format!(
                    "column `{}`: expected a list of {expected} values in dimension {} of its \
                     info.json shape {:?}, found {other}",
                    column.name,
                    dim + 1,
                    column.shape
                ),
            ))
        }
    };
    flatten(&inner, dim + 1, per_row * expected, column, path)
}

/// The child values of a variable-size list column, from its first list's start to its last
/// one's end.
fn contiguous<O: arrow::array::OffsetSizeTrait>(offsets: &[O], values: &ArrayRef) -> ArrayRef {
    let start = offsets.first().map_or(0, |o| o.as_usize());
    let end = offsets.last().map_or(0, |o| o.as_usize());
    values.slice(start, end - start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{FixedSizeListArray, Float32Array, ListArray};
    use arrow::buffer::OffsetBuffer;
    use arrow::datatypes::Field;
    use std::sync::Arc;

    fn list(values: ArrayRef, lengths: &[usize]) -> ArrayRef {
        let field = Arc::new(Field::new("element", values.data_type().clone(), false));
        Arc::new(ListArray::new(
            field,
            OffsetBuffer::from_lengths(lengths.iter().copied()),
            values,
            None,
        ))
    }

    fn column(shape: &[usize]) -> TableColumn {
        TableColumn {
            name: "grid".into(),
            scalar: Some(ScalarType::Float32),
            width: shape.iter().product(),
            shape: shape.to_vec(),
        }
    }

    fn decode(array: ArrayRef, shape: &[usize]) -> Result<Values> {
        let batch = RecordBatch::try_from_iter([("grid", array)]).unwrap();
        decode_column(&batch, &column(shape), Path::new("data.parquet"))
    }

    #[test]
    fn nested_lists_flatten_row_major_as_lerobots_arrays() {
        // Two rows of shape [2, 3]: lists of 2 lists of 3, as HF's Array2D stores them.
        let values: ArrayRef = Arc::new(Float32Array::from_iter_values((0..12).map(|v| v as f32)));
        let nested = list(list(values.clone(), &[3; 4]), &[2, 2]);
        let Values::F32(flat) = decode(nested, &[2, 3]).unwrap() else { panic!("f32") };
        assert_eq!(flat, (0..12).map(|v| v as f32).collect::<Vec<_>>());
        // The same values in fixed-size lists, and a row slice of them.
        let field = Arc::new(Field::new("element", DataType::Float32, false));
        let inner = FixedSizeListArray::new(field.clone(), 3, values, None);
        let outer_field = Arc::new(Field::new("element", inner.data_type().clone(), false));
        let fixed: ArrayRef =
            Arc::new(FixedSizeListArray::new(outer_field, 2, Arc::new(inner), None));
        let Values::F32(flat) = decode(fixed.slice(1, 1), &[2, 3]).unwrap() else { panic!("f32") };
        assert_eq!(flat, (6..12).map(|v| v as f32).collect::<Vec<_>>());
    }

    #[test]
    fn a_list_of_another_length_in_any_dimension_is_refused_by_row_and_dimension() {
        let values: ArrayRef = Arc::new(Float32Array::from_iter_values((0..11).map(|v| v as f32)));
        // Row 1's second inner list holds 2 values where the shape says 3.
        let nested = list(list(values.clone(), &[3, 3, 3, 2]), &[2, 2]);
        let error = decode(nested, &[2, 3]).unwrap_err().to_string();
        assert!(
            error.contains("column `grid` row 1: expected 3 values in dimension 2 of [2, 3]")
                && error.contains("found 2"),
            "{error}"
        );
        // Too shallow: a flat list where the shape has two dimensions.
        let flat = list(values.slice(0, 6), &[6]);
        let error = decode(flat, &[2, 3]).unwrap_err().to_string();
        assert!(error.contains("row 0: expected 2 values in dimension 1 of [2, 3]"), "{error}");
        // Too deep: nested lists where the shape has one dimension.
        let nested = list(list(values.slice(0, 6), &[3, 3]), &[2]);
        let error = decode(nested, &[2]).unwrap_err().to_string();
        assert!(error.contains("nested deeper than its info.json shape [2]"), "{error}");
    }
}
