//! What a sweep stores: one JSON line per measured cell in `results.jsonl`, appended as each cell
//! finishes, and read back by `--resume` and by the report (which never measures).

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::phase::{LoaderPhase, ModelPhase, TrainPhase};

/// One point of a sweep: the dataset and every knob.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Cell {
    /// The dataset's name (its directory name).
    pub dataset: String,
    /// Loader worker threads.
    pub workers: usize,
    /// Batches in flight per worker.
    pub prefetch: usize,
    /// Samples per batch.
    pub batch_size: usize,
    /// `native` or `HxW`.
    pub resolution: String,
    /// Camera frames handed to the model as `f32` or `u8`.
    pub images: String,
    /// The step: `diffusion:small`, `diffusion:pusht`, `synthetic:40ms`, `none`.
    pub model: String,
    /// `cpu` or `cuda`.
    pub device: String,
    /// `f32` or `bf16`.
    pub dtype: String,
    /// Repeat number, from 0.
    pub repeat: usize,
}

impl Cell {
    /// The knobs the `model` phase depends on (not the loader's workers and prefetch): cells
    /// sharing it share one model measurement.
    pub fn model_key(&self) -> (usize, &str, &str, &str, &str, &str, usize) {
        (
            self.batch_size,
            &self.resolution,
            &self.images,
            &self.model,
            &self.device,
            &self.dtype,
            self.repeat,
        )
    }
}

/// The machine and software a result was measured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemInfo {
    /// CPU model name.
    pub cpu: String,
    /// CPU cores this process may use.
    pub cores: usize,
    /// GPU name, when the step ran on one.
    pub gpu: Option<String>,
    /// Total memory, bytes.
    pub memory_bytes: Option<u64>,
    /// Operating system (kernel release).
    pub os: String,
    /// feedbench's version.
    pub feedbench: String,
    /// libtorch's version (`torch` wheel).
    pub libtorch: String,
    /// FFmpeg's libavcodec version.
    pub libavcodec: String,
}

/// Everything measured for one cell: one line of `results.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellResult {
    /// The knobs.
    pub cell: Cell,
    /// The loader alone: the loader ceiling.
    pub loader: LoaderPhase,
    /// The model alone on a resident batch: the model ceiling.
    pub model: ModelPhase,
    /// The loader feeding the model.
    pub train: TrainPhase,
    /// Where it ran.
    pub system: SystemInfo,
    /// When the cell finished, seconds since the Unix epoch.
    pub finished_unix_s: u64,
}

/// Why results could not be read or written, naming the file.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The results file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a cell result.
    #[error("{path}, line {line}: not a feedbench cell result ({what})")]
    Line {
        /// The results file.
        path: std::path::PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        what: String,
    },
}

/// Appends `result` as one line to `path` (created if absent) and flushes it, so an
/// interrupted sweep keeps every finished cell.
pub fn append_result(path: &Path, result: &CellResult) -> Result<(), ResultsError> {
    let io = |source| ResultsError::Io { path: path.to_path_buf(), source };
    let mut line = serde_json::to_string(result).expect("results serialise");
    line.push('\n');
    let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
    file.write_all(line.as_bytes()).map_err(io)?;
    file.sync_data().map_err(io)
}

/// Every result in `path`, in file order. A last line cut short (the sweep was killed while
/// writing it) is skipped; any other bad line is an error naming it.
pub fn read_results(path: &Path) -> Result<Vec<CellResult>, ResultsError> {
    let io = |source| ResultsError::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let lines: Vec<String> = BufReader::new(file).lines().collect::<Result<_, _>>().map_err(io)?;
    let mut results = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(result) => results.push(result),
            Err(e) if i + 1 == lines.len() && e.is_eof() => break,
            Err(e) => {
                return Err(ResultsError::Line {
                    path: path.to_path_buf(),
                    line: i + 1,
                    what: e.to_string(),
                })
            }
        }
    }
    Ok(results)
}
