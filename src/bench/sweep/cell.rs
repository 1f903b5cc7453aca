//! A cell of a sweep: one point of the grid, every knob typed. [`Knob::DEFS`] defines the
//! knobs once, with their names, values and id parts; the plan, the results, the report's
//! grouping and the CSV columns all read them from there.

use serde::{Deserialize, Serialize};

pub use super::knob::{Knob, KnobSet};
use crate::dataset::Resolution;
use crate::loader::batch::ImageFormat;
use crate::loader::config::LoaderConfig;
use crate::loader::knobs::LoaderKnob;
use crate::loader::lerobot::LoaderBackend;
use crate::loader::size::ByteSize;
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
    /// Threads inside each worker's video decoder: absent (1) in results written before the
    /// knob.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub decoder_threads: usize,
    /// Bytes of the decoded-frame cache (0: none): absent (0) in results written before the
    /// knob.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_bytes: u64,
}

fn one() -> usize {
    1
}

fn is_zero(bytes: &u64) -> bool {
    *bytes == 0
}

fn is_one(threads: &usize) -> bool {
    *threads == 1
}

impl Cell {
    /// The values of `knobs`, joined by `,`: equal for cells that agree on them.
    pub fn key(&self, knobs: &[Knob]) -> String {
        knobs.iter().map(|k| k.value(self)).collect::<Vec<_>>().join(",")
    }

    /// The loader's knobs in this cell over `base`, the knobs every cell of the sweep shares
    /// (its seed plus the repeat, so that each repeat reads another order). Each loader's cell
    /// keeps the other loader's knobs at their defaults (the loader's table says which).
    pub fn loader_config(&self, base: &LoaderConfig) -> LoaderConfig {
        let mut config = LoaderConfig {
            workers: self.workers,
            prefetch: self.prefetch,
            batch_size: self.batch_size,
            seed: base.seed + self.repeat as u64,
            resolution: self.resolution,
            images: self.images,
            decoder_threads: self.decoder_threads,
            cache_bytes: self.cache_bytes,
            ..base.clone()
        };
        let lacking: Vec<_> = LoaderKnob::lacking(&config, self.loader).collect();
        for (knob, _) in lacking {
            knob.set(&mut config, &knob.default_text()).expect("a default reads back");
        }
        config
    }

    /// The cell LeRobot's loader runs in place of this one: its native-only knobs that leave
    /// the batch as it is (decoder threads, the frame cache; the loader's table says which are
    /// native-only) at their defaults. A sweep measures it once for every such native cell,
    /// and the report sets them side by side.
    pub fn lerobot_twin(&self) -> Cell {
        let lerobot = Cell { loader: LoaderBackend::Lerobot, ..self.clone() };
        let config = lerobot.loader_config(&LoaderConfig::default());
        Cell { decoder_threads: config.decoder_threads, cache_bytes: config.cache_bytes, ..lerobot }
    }

    /// The cell's knobs as a line for people (a sweep's progress): each knob the cell shows, by
    /// name, the dataset aside; a knob at the default that leaves it out of ids is left out.
    pub fn label(&self) -> String {
        let shown = Knob::shown(KnobSet::All, [self]);
        let knobs = shown.into_iter().filter(|k| *k != Knob::Dataset);
        knobs.map(|k| format!("{} {}", k.name(), k.value(self))).collect::<Vec<_>>().join(", ")
    }

    /// A stable name for the cell, derived from every knob and the repeat, usable as a file
    /// name (`g1-w2-p2-b64-native-f32-diffusion_small-cpu-f32-r0`).
    pub fn id(&self) -> String {
        let mut parts: Vec<String> =
            Knob::DEFS.iter().filter_map(|d| d.knob.id_part(self)).collect();
        parts.push(format!("r{}", self.repeat));
        parts
            .join("-")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
            .collect()
    }
}

/// A knob's value in a cell: the cell's to give, so that the definitions know no cell.
impl Knob {
    /// The knobs of `set` that `cells` show: those always shown, and the others where a cell
    /// differs from their default.
    pub fn shown<'a>(set: KnobSet, cells: impl IntoIterator<Item = &'a Cell> + Clone) -> Vec<Knob> {
        Self::set(set)
            .into_iter()
            .filter(|k| match k.def().unless {
                None => true,
                Some(default) => cells.clone().into_iter().any(|c| k.value(c) != default),
            })
            .collect()
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
            Knob::DecoderThreads => cell.decoder_threads.to_string(),
            Knob::Cache => ByteSize::compact(cell.cache_bytes),
            Knob::Loader => cell.loader.to_string(),
        }
    }

    /// Its part of `cell`'s id, None where it is left out (at its default).
    pub fn id_part(self, cell: &Cell) -> Option<String> {
        let def = self.def();
        let value = self.value(cell);
        (def.unless != Some(value.as_str())).then(|| format!("{}{value}", def.id_prefix))
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
            decoder_threads: 1,
            cache_bytes: 0,
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
        other.decoder_threads = 2;
        assert_eq!(
            other.id(),
            "pusht-v3.0-w2-p4-b64-96x96-u8-diffusion_small-cpu-bf16-t2-lerobot-r1"
        );
        assert!(json.get("decoder_threads").is_none(), "one decoder thread is stored as before");
        let stored = serde_json::to_value(&other).unwrap();
        assert_eq!(stored["decoder_threads"], 2);
        assert_eq!(serde_json::from_value::<Cell>(stored).unwrap(), other);
    }

    #[test]
    fn knobs_read_back_as_results_store_them() {
        let json = serde_json::to_value(cell()).unwrap();
        for knob in Knob::shown(KnobSet::All, [&cell()]) {
            let stored = &json[knob.field()];
            let text = stored.as_str().map_or_else(|| stored.to_string(), str::to_string);
            assert_eq!(text, knob.value(&cell()), "{}", knob.name());
        }
        assert_eq!(serde_json::from_value::<Cell>(json).unwrap(), cell());
    }

    #[test]
    fn labels_show_every_knob_a_cell_differs_by() {
        let plain = "workers 2, prefetch 4, batch 64, resolution 96x96, images u8, \
                     model diffusion:small, device cpu, dtype bf16";
        assert_eq!(cell().label(), plain);
        let mut other = cell();
        (other.cache_bytes, other.decoder_threads) = (4 << 30, 2);
        other.loader = LoaderBackend::Lerobot;
        let label = other.label();
        assert_eq!(label, format!("{plain}, decoder_threads 2, cache 4GiB, loader lerobot"));
    }

    #[test]
    fn the_model_key_ignores_workers_and_prefetch() {
        let mut other = cell();
        other.workers = 0;
        other.prefetch = 1;
        other.decoder_threads = 2;
        let model_phase = Knob::set(KnobSet::ModelPhase);
        assert_eq!(other.key(&model_phase), cell().key(&model_phase));
        other.batch_size = 16;
        assert_ne!(other.key(&model_phase), cell().key(&model_phase));
    }
}
