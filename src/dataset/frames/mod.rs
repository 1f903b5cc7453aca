//! The frame table: every selected episode's parquet rows, addressed by global `index`.
//!
//! Files are memory-mapped once. Numeric and string columns are decoded one row group at a
//! time, on first touch, into buffers shared by every thread (`Arc`); later reads of that row
//! group are slice copies. Image columns (whole PNG/JPEG files per row) are never decoded in
//! bulk: each request reads just its rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arrow::array::{Array, AsArray, RecordBatch, StructArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatchReader;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use parquet::arrow::ProjectionMask;

mod column;

pub use column::TableColumn;
use column::{decode_column, wrong_length};

use super::episodes::{Episode, EpisodeIndex};
use super::error::{DatasetError, Result};
use super::files::PositionedFile;
use super::meta::{Feature, FeatureKind};
use super::values::Values;

/// One parquet data file, read by position, with its row groups decoded on demand.
struct DataFile {
    path: PathBuf,
    file: PositionedFile,
    metadata: ArrowReaderMetadata,
    /// First row of each row group, and the total row count at the end.
    row_group_starts: Vec<usize>,
    /// The bulk columns, as a projection.
    bulk_projection: ProjectionMask,
    /// Per row group, its bulk columns once a thread has needed them.
    decoded: Vec<OnceLock<Arc<RowGroup>>>,
}

/// A decoded row group: per bulk column, `rows × width` values.
struct RowGroup {
    columns: Vec<Values>,
}

/// Where an episode's rows are.
#[derive(Debug, Clone, Copy)]
struct EpisodeRows {
    from: usize,
    to: usize,
    file: usize,
    first_row: usize,
}

/// A row of the frame table, ready to be copied from.
pub struct Row {
    group: Arc<RowGroup>,
    row: usize,
}

/// Random access to the parquet rows of the selected episodes.
pub struct FrameTable {
    root: PathBuf,
    columns: Vec<TableColumn>,
    /// Positions in `columns`, ordered by name (as a map keyed by name holds them).
    by_name: Vec<usize>,
    image_columns: Vec<String>,
    files: Vec<DataFile>,
    /// Sorted by `from`.
    episodes: Vec<EpisodeRows>,
    index_column: usize,
}

impl FrameTable {
    /// Maps the data files of `selected` episodes and checks their schemas against the
    /// features. `all` (every episode of the dataset) places episodes inside shared files.
    pub fn open(
        root: &Path,
        features: &[Feature],
        all: &[Episode],
        selected: &[&Episode],
    ) -> Result<Self> {
        let columns: Vec<TableColumn> = features
            .iter()
            .filter_map(|f| match f.kind {
                FeatureKind::Value(t) => Some(TableColumn {
                    name: f.name.clone(),
                    scalar: Some(t),
                    width: f.width(),
                    shape: f.shape.clone(),
                }),
                FeatureKind::String => Some(TableColumn {
                    name: f.name.clone(),
                    scalar: None,
                    width: f.width().max(1),
                    shape: vec![f.width().max(1)],
                }),
                FeatureKind::Image | FeatureKind::Video | FeatureKind::Language => None,
            })
            .collect();
        let image_columns: Vec<String> = features
            .iter()
            .filter(|f| f.kind == FeatureKind::Image)
            .map(|f| f.name.clone())
            .collect();
        let index_column =
            columns.iter().position(|c| c.name == "index").expect("info.json checked");
        let mut by_name: Vec<usize> = (0..columns.len()).collect();
        by_name.sort_by(|&a, &b| columns[a].name.cmp(&columns[b].name));

        // Rows of every episode in a file, by file: an episode starts after those before it.
        let mut file_episodes: BTreeMap<&Path, Vec<&Episode>> = BTreeMap::new();
        for episode in all {
            file_episodes.entry(episode.data_path.as_path()).or_default().push(episode);
        }
        let mut first_rows: BTreeMap<EpisodeIndex, usize> = BTreeMap::new();
        for in_file in file_episodes.values_mut() {
            in_file.sort_by_key(|e| e.from);
            let mut row = 0;
            for episode in in_file.iter() {
                first_rows.insert(episode.index, row);
                row += episode.length;
            }
        }
        let mut files = Vec::new();
        let mut file_ids: BTreeMap<&Path, usize> = BTreeMap::new();
        let mut episodes = Vec::with_capacity(selected.len());
        for episode in selected {
            let relative = episode.data_path.as_path();
            let file = match file_ids.get(relative) {
                Some(&id) => id,
                None => {
                    let path = root.join(relative);
                    super::files::expect_episode_file(&path, episode.index.0)?;
                    let in_file = &file_episodes[relative];
                    let expected_rows: usize = in_file.iter().map(|e| e.length).sum();
                    files.push(DataFile::open(path, &columns, &image_columns, expected_rows)?);
                    file_ids.insert(relative, files.len() - 1);
                    files.len() - 1
                }
            };
            let first_row = first_rows[&episode.index];
            episodes.push(EpisodeRows { from: episode.from, to: episode.to, file, first_row });
        }
        episodes.sort_by_key(|e| e.from);
        Ok(FrameTable {
            root: root.to_path_buf(),
            columns,
            image_columns,
            files,
            episodes,
            index_column,
            by_name,
        })
    }

    /// The columns decoded in bulk, in feature order.
    pub fn columns(&self) -> &[TableColumn] {
        &self.columns
    }

    /// The positions in [`Self::columns`] ordered by column name.
    pub fn columns_by_name(&self) -> &[usize] {
        &self.by_name
    }

    /// The position of column `name` in [`Self::columns`].
    pub fn column_position(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The image columns (encoded PNG/JPEG per row).
    pub fn image_columns(&self) -> &[String] {
        &self.image_columns
    }

    fn locate(&self, index: usize) -> Option<(usize, usize)> {
        let slot = self.episodes.partition_point(|e| e.to <= index);
        let episode = self.episodes.get(slot).filter(|e| e.from <= index)?;
        Some((episode.file, episode.first_row + index - episode.from))
    }

    /// The row with global `index`, decoding its row group if no thread has yet.
    pub fn row(&self, index: usize) -> Result<Row> {
        let (file_id, row) = self.locate(index).ok_or_else(|| self.not_selected(index))?;
        let file = &self.files[file_id];
        let group_id = file.row_group_starts.partition_point(|&start| start <= row) - 1;
        let group = file.row_group(group_id, &self.columns)?;
        let row = Row { group, row: row - file.row_group_starts[group_id] };
        let found = self.index_of(&row.group, row.row).expect("a located row is in its group");
        if found != index as i64 {
            return Err(DatasetError::invalid(
                &file.path,
                format!(
                    "expected index {index} at row {} (from the episode metadata), found {found}",
                    row.row + file.row_group_starts[group_id],
                ),
            ));
        }
        Ok(row)
    }

    /// The row with global `index` where it follows `previous` (the row of `index - 1`, of the
    /// same episode) in its row group: found without locating it again; None at the group's
    /// end or where the row there holds another index (then [`FrameTable::row`] says which).
    pub fn row_after(&self, previous: &Row, index: usize) -> Option<Row> {
        let row = previous.row + 1;
        (self.index_of(&previous.group, row) == Some(index as i64))
            .then(|| Row { group: previous.group.clone(), row })
    }

    /// The `index` column's value at `row` of `group`; None past the group's end.
    fn index_of(&self, group: &RowGroup, row: usize) -> Option<i64> {
        let Values::I64(found) = &group.columns[self.index_column] else {
            unreachable!("index is int64 (info.json checked)")
        };
        found.get(row).copied()
    }

    /// The parquet file holding global `index`, and its row there; None where not selected.
    pub fn location(&self, index: usize) -> Option<(&Path, usize)> {
        let (file_id, row) = self.locate(index)?;
        Some((self.files[file_id].path.as_path(), row))
    }

    /// The encoded image (PNG/JPEG bytes) of column `name` at global `index`.
    pub fn image(&self, index: usize, name: &str) -> Result<Vec<u8>> {
        let (file_id, row) = self.locate(index).ok_or_else(|| self.not_selected(index))?;
        self.files[file_id].image(&self.root, row, name)
    }

    fn not_selected(&self, index: usize) -> DatasetError {
        DatasetError::Request {
            root: self.root.clone(),
            what: format!("index {index} is not in the selected episodes"),
        }
    }
}

impl Row {
    /// The values of bulk column `column` (a position in [`FrameTable::columns`]) at this row.
    pub fn values(&self, column: usize, width: usize) -> (&Values, std::ops::Range<usize>) {
        self.run_values(column, width, 1)
    }

    /// The values of bulk column `column` at this row and the `rows - 1` after it in its row
    /// group (see [`Row::is_followed_by`]): one range.
    pub fn run_values(
        &self,
        column: usize,
        width: usize,
        rows: usize,
    ) -> (&Values, std::ops::Range<usize>) {
        (&self.group.columns[column], self.row * width..(self.row + rows) * width)
    }

    /// Whether `other` is the row `rows` after this one in the same row group, so that a
    /// column's values of both and those between are one range.
    pub fn is_followed_by(&self, other: &Row, rows: usize) -> bool {
        Arc::ptr_eq(&self.group, &other.group) && other.row == self.row + rows
    }
}

impl DataFile {
    fn open(
        path: PathBuf,
        columns: &[TableColumn],
        images: &[String],
        expected_rows: usize,
    ) -> Result<Self> {
        let file = PositionedFile::open(&path)?;
        let metadata = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
            .map_err(|e| DatasetError::parquet(&path, e))?;
        let schema = metadata.schema().clone();
        for column in columns {
            let field = schema.field_with_name(&column.name).map_err(|_| {
                DatasetError::invalid(
                    &path,
                    format!("missing column `{}` (a feature in info.json)", column.name),
                )
            })?;
            if let DataType::FixedSizeList(_, n) = field.data_type() {
                if *n as usize != column.shape[0] {
                    return Err(wrong_length(&path, column, None, 0, *n as usize));
                }
            }
        }
        for image in images {
            match schema.field_with_name(image).map(|f| f.data_type()) {
                Ok(DataType::Struct(_)) => {}
                Ok(other) => {
                    return Err(DatasetError::invalid(
                        &path,
                        format!(
                        "column `{image}`: expected an image struct<bytes, path>, found {other}"
                    ),
                    ))
                }
                Err(_) => {
                    return Err(DatasetError::invalid(
                        &path,
                        format!("missing column `{image}` (an image feature in info.json)"),
                    ))
                }
            }
        }
        let parquet_meta = metadata.metadata();
        let mut row_group_starts = vec![0];
        for group in parquet_meta.row_groups() {
            row_group_starts.push(row_group_starts.last().unwrap() + group.num_rows() as usize);
        }
        let rows = *row_group_starts.last().unwrap();
        if rows != expected_rows {
            return Err(DatasetError::invalid(
                &path,
                format!("holds {rows} rows; the episode metadata says {expected_rows}"),
            ));
        }
        let roots: Vec<usize> = columns
            .iter()
            .map(|c| root_position(parquet_meta.file_metadata().schema_descr(), &c.name).unwrap())
            .collect();
        let bulk_projection =
            ProjectionMask::roots(parquet_meta.file_metadata().schema_descr(), roots);
        let decoded = (0..parquet_meta.num_row_groups()).map(|_| OnceLock::new()).collect();
        Ok(DataFile { path, file, metadata, row_group_starts, bulk_projection, decoded })
    }

    fn reader(&self) -> ParquetRecordBatchReaderBuilder<PositionedFile> {
        self.reader_of(self.file.clone())
    }

    fn reader_of(&self, file: PositionedFile) -> ParquetRecordBatchReaderBuilder<PositionedFile> {
        ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.metadata.clone())
    }

    /// The file with the column chunks of row group `id` that the bulk columns are read from
    /// fetched ahead, as one request where they lie together (an object's; a file is read where
    /// it is).
    fn with_row_group(&self, id: usize) -> Result<PositionedFile> {
        let group = self.metadata.metadata().row_group(id);
        let ranges: Vec<std::ops::Range<u64>> = (0..group.num_columns())
            .filter(|&leaf| self.bulk_projection.leaf_included(leaf))
            .map(|leaf| {
                let (start, length) = group.column(leaf).byte_range();
                start..start + length
            })
            .collect();
        self.file.fetched(&ranges, &crate::dataset::remote::Fetch::default())
    }

    fn row_group(&self, id: usize, columns: &[TableColumn]) -> Result<Arc<RowGroup>> {
        if let Some(group) = self.decoded[id].get() {
            return Ok(group.clone());
        }
        let rows = self.row_group_starts[id + 1] - self.row_group_starts[id];
        let reader = self
            .reader_of(self.with_row_group(id)?)
            .with_projection(self.bulk_projection.clone())
            .with_row_groups(vec![id])
            .with_batch_size(rows.max(1))
            .build()
            .map_err(|e| DatasetError::parquet(&self.path, e))?;
        let schema = reader.schema();
        let batches = reader
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| DatasetError::arrow(&self.path, e))?;
        let batch = arrow::compute::concat_batches(&schema, &batches)
            .map_err(|e| DatasetError::arrow(&self.path, e))?;
        let group = RowGroup {
            columns: columns
                .iter()
                .map(|c| decode_column(&batch, c, &self.path))
                .collect::<Result<_>>()?,
        };
        // Two threads may decode the same group at once; the first one stored is kept.
        Ok(self.decoded[id].get_or_init(|| Arc::new(group)).clone())
    }

    fn image(&self, root: &Path, row: usize, name: &str) -> Result<Vec<u8>> {
        let group = self.row_group_starts.partition_point(|&start| start <= row) - 1;
        let schema = self.metadata.metadata().file_metadata().schema_descr();
        let position = root_position(schema, name)
            .ok_or_else(|| DatasetError::invalid(&self.path, format!("missing column `{name}`")))?;
        let skip = row - self.row_group_starts[group];
        let reader = self
            .reader()
            .with_projection(ProjectionMask::roots(schema, [position]))
            .with_row_groups(vec![group])
            .with_row_selection(RowSelection::from(vec![
                RowSelector::skip(skip),
                RowSelector::select(1),
            ]))
            .build()
            .map_err(|e| DatasetError::parquet(&self.path, e))?;
        let batch: Option<RecordBatch> = reader
            .into_iter()
            .next()
            .transpose()
            .map_err(|e| DatasetError::arrow(&self.path, e))?;
        let column = batch
            .as_ref()
            .and_then(|b| b.column(0).as_any().downcast_ref::<StructArray>().cloned())
            .ok_or_else(|| {
                DatasetError::invalid(
                    &self.path,
                    format!("column `{name}`: no struct value at row {row}"),
                )
            })?;
        let invalid = |what: &str| {
            DatasetError::invalid(&self.path, format!("column `{name}` row {row}: {what}"))
        };
        if let Some(bytes) = column.column_by_name("bytes").filter(|b| b.is_valid(0)) {
            let bytes = cast(bytes, &DataType::LargeBinary)
                .map_err(|e| DatasetError::arrow(&self.path, e))?;
            return Ok(bytes.as_binary::<i64>().value(0).to_vec());
        }
        // Without embedded bytes, HF image columns name a file instead.
        let path = column
            .column_by_name("path")
            .filter(|p| p.is_valid(0))
            .and_then(|p| cast(p, &DataType::Utf8).ok())
            .map(|p| p.as_string::<i32>().value(0).to_string())
            .ok_or_else(|| invalid("neither `bytes` nor `path` is set"))?;
        super::files::read_whole(&root.join(path))
    }
}

fn root_position(schema: &parquet::schema::types::SchemaDescriptor, name: &str) -> Option<usize> {
    schema.root_schema().get_fields().iter().position(|f| f.name() == name)
}
