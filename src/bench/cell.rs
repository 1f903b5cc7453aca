//! A cell of a sweep: one point of the grid, every knob typed. [`Knob`] lists the knobs once,
//! with their names and values; the plan, the results, the report's grouping and the CSV
//! columns all read them from here.

use serde::{Deserialize, Serialize};

use crate::dataset::Resolution;
use crate::loader::batch::ImageFormat;
use crate::loader::lerobot::LoaderBackend;
use crate::model::{DeviceChoice, ModelSpec, Precision};

/// One point of a sweep: the dataset and every knob. In `results.jsonl` each knob is written
/// in its text form (`"96x96"`, `"u8"`, `"diffusion:small"`).
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
    /// Camera frames at native size or resized.
    pub resolution: Resolution,
    /// Camera frames handed to the model as `f32` or `u8`.
    pub images: ImageFormat,
    /// The step, its preset resolved: `diffusion:small`, `synthetic:40ms`, `none`.
    pub model: ModelSpec,
    /// `cpu` or `cuda`.
    pub device: DeviceChoice,
    /// `f32` or `bf16`.
    pub dtype: Precision,
    /// Repeat number, from 0.
    pub repeat: usize,
    /// Which loader: absent (native) in results written before the LeRobot backend.
    #[serde(default, skip_serializing_if = "LoaderBackend::is_native")]
    pub loader: LoaderBackend,
}

impl Cell {
    /// The values of `knobs`, joined by `,`: equal for cells that agree on them.
    pub fn key(&self, knobs: &[Knob]) -> String {
        knobs.iter().map(|k| k.value(self)).collect::<Vec<_>>().join(",")
    }

    /// A stable name for the cell, derived from every knob and the repeat, usable as a file
    /// name (`g1-w2-p2-b64-native-f32-diffusion_small-cpu-f32-r0`).
    pub fn id(&self) -> String {
        let mut parts = vec![self.dataset.clone()];
        for knob in Knob::ALL.iter().skip(1) {
            let value = knob.value(self);
            parts.push(match knob {
                Knob::Workers => format!("w{value}"),
                Knob::Prefetch => format!("p{value}"),
                Knob::Batch => format!("b{value}"),
                _ => value,
            });
        }
        if !self.loader.is_native() {
            parts.push(self.loader.to_string());
        }
        parts.push(format!("r{}", self.repeat));
        parts
            .join("-")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
            .collect()
    }
}

/// A knob of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Knob {
    /// The dataset's name.
    Dataset,
    /// Loader worker threads.
    Workers,
    /// Batches in flight per worker.
    Prefetch,
    /// Samples per batch.
    Batch,
    /// `native` or `HxW`.
    Resolution,
    /// `f32` or `u8` frames.
    Images,
    /// The step.
    Model,
    /// `cpu` or `cuda`.
    Device,
    /// `f32` or `bf16`.
    Dtype,
    /// `native` or `lerobot`: not in [`Knob::ALL`], so that the ids, columns and reports of
    /// native sweeps stay as they were; shown where a sweep has both.
    Loader,
}

impl Knob {
    /// Every knob, in the order reports show them.
    pub const ALL: [Knob; 9] = [
        Knob::Dataset,
        Knob::Workers,
        Knob::Prefetch,
        Knob::Batch,
        Knob::Resolution,
        Knob::Images,
        Knob::Model,
        Knob::Device,
        Knob::Dtype,
    ];

    /// The knobs the `model` phase depends on (not the loader's workers and prefetch): cells
    /// sharing them, and their repeat, share one model measurement.
    pub const MODEL_PHASE: [Knob; 6] =
        [Knob::Batch, Knob::Resolution, Knob::Images, Knob::Model, Knob::Device, Knob::Dtype];

    /// The knobs a recommendation group shares: all but workers and prefetch.
    pub const GROUP: [Knob; 8] = [
        Knob::Loader,
        Knob::Dataset,
        Knob::Batch,
        Knob::Resolution,
        Knob::Images,
        Knob::Model,
        Knob::Device,
        Knob::Dtype,
    ];

    /// The knobs a plot shares: all but workers, prefetch, batch and the loader (one line per
    /// batch and loader).
    pub const PLOT: [Knob; 6] =
        [Knob::Dataset, Knob::Resolution, Knob::Images, Knob::Model, Knob::Device, Knob::Dtype];

    /// Its name, as the sweep config and the report spell it.
    pub fn name(self) -> &'static str {
        match self {
            Knob::Dataset => "dataset",
            Knob::Workers => "workers",
            Knob::Prefetch => "prefetch",
            Knob::Batch => "batch",
            Knob::Resolution => "resolution",
            Knob::Images => "images",
            Knob::Model => "model",
            Knob::Device => "device",
            Knob::Dtype => "dtype",
            Knob::Loader => "loader",
        }
    }

    /// Its field in a [`Cell`] as `results.jsonl` and the CSV header spell it.
    pub fn field(self) -> &'static str {
        match self {
            Knob::Batch => "batch_size",
            other => other.name(),
        }
    }

    /// Its value in `cell`, in its text form.
    pub fn value(self, cell: &Cell) -> String {
        match self {
            Knob::Dataset => cell.dataset.clone(),
            Knob::Workers => cell.workers.to_string(),
            Knob::Prefetch => cell.prefetch.to_string(),
            Knob::Batch => cell.batch_size.to_string(),
            Knob::Resolution => cell.resolution.to_string(),
            Knob::Images => cell.images.to_string(),
            Knob::Model => cell.model.to_string(),
            Knob::Device => cell.device.to_string(),
            Knob::Dtype => cell.dtype.to_string(),
            Knob::Loader => cell.loader.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell() -> Cell {
        Cell {
            dataset: "pusht-v3.0".into(),
            workers: 2,
            prefetch: 4,
            batch_size: 64,
            resolution: Resolution::Size { height: 96, width: 96 },
            images: ImageFormat::U8,
            model: "diffusion:small".parse().unwrap(),
            device: DeviceChoice::Cpu,
            dtype: Precision::Bf16,
            repeat: 1,
            loader: LoaderBackend::Native,
        }
    }

    #[test]
    fn ids_name_every_knob_and_are_file_names() {
        let id = cell().id();
        assert_eq!(id, "pusht-v3.0-w2-p4-b64-96x96-u8-diffusion_small-cpu-bf16-r1");
        let mut other = cell();
        other.prefetch = 2;
        assert_ne!(other.id(), id);
        other = cell();
        other.loader = LoaderBackend::Lerobot;
        assert_eq!(other.id(), "pusht-v3.0-w2-p4-b64-96x96-u8-diffusion_small-cpu-bf16-lerobot-r1");
        let json = serde_json::to_value(cell()).unwrap();
        assert!(json.get("loader").is_none(), "native cells are stored as before");
        assert_eq!(serde_json::to_value(&other).unwrap()["loader"], "lerobot");
    }

    #[test]
    fn knobs_read_back_as_results_store_them() {
        let json = serde_json::to_value(cell()).unwrap();
        for knob in Knob::ALL {
            let stored = &json[knob.field()];
            let text = stored.as_str().map_or_else(|| stored.to_string(), str::to_string);
            assert_eq!(text, knob.value(&cell()), "{}", knob.name());
        }
        assert_eq!(serde_json::from_value::<Cell>(json).unwrap(), cell());
    }

    #[test]
    fn the_model_key_ignores_workers_and_prefetch() {
        let mut other = cell();
        other.workers = 0;
        other.prefetch = 1;
        assert_eq!(other.key(&Knob::MODEL_PHASE), cell().key(&Knob::MODEL_PHASE));
        other.batch_size = 16;
        assert_ne!(other.key(&Knob::MODEL_PHASE), cell().key(&Knob::MODEL_PHASE));
    }
}
