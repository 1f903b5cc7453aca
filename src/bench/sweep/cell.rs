//! A cell of a sweep: one point of the grid, every knob typed. [`Knob::defs`] defines the
//! knobs once, with their names, values and id parts (the loader's from the loader's own
//! table); the plan, the results, the report's grouping and the CSV columns all read them from
//! there.

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use super::knob::{Knob, KnobSet};
use crate::dataset::size::CacheSize;
use crate::loader::config::LoaderConfig;
use crate::loader::knobs::{LoaderBackend, LoaderKnob, Stored};
use crate::model::{DeviceChoice, ModelSpec, Precision};

/// One point of a sweep: the dataset and every knob. In `results.jsonl` each knob is written
/// under its field, as the table says it is stored (`"batch_size": 64`, `"resolution":
/// "96x96"`, `"model": "diffusion:small"`); a knob added later is left out at its default.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cell {
    /// The dataset's name (its directory name).
    pub dataset: String,
    /// The loader's knobs the cell carries (those the loader's table gives cell facts); the
    /// rest at their defaults, which the sweep's own settings replace ([`Cell::loader_config`]).
    pub knobs: LoaderConfig,
    /// The step, its preset resolved: `diffusion:small`, `synthetic:40ms`, `none`.
    pub model: ModelSpec,
    /// `cpu` or `cuda`.
    pub device: DeviceChoice,
    /// `f32` or `bf16`.
    pub dtype: Precision,
    /// Repeat number, from 0.
    pub repeat: usize,
    /// Which loader: absent (native) in results written before the LeRobot backend.
    pub loader: LoaderBackend,
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
        let mut config = LoaderConfig { seed: base.seed + self.repeat as u64, ..base.clone() };
        for (knob, _) in LoaderKnob::carried() {
            knob.set(&mut config, &knob.get(&self.knobs)).expect("a value reads back");
        }
        LoaderKnob::reset_lacking(&mut config, self.loader);
        config
    }

    /// The cell LeRobot's loader runs in place of this one: [`Cell::on`] it.
    pub fn lerobot_twin(&self) -> Cell {
        self.on(LoaderBackend::Lerobot)
    }

    /// This cell on `loader`: its knobs that `loader` lacks and that leave the batch as it is
    /// (decoder threads, the frame cache: native-only by the loader's table, and no knob the
    /// step depends on) at their defaults. A sweep measures a LeRobot cell once for every such
    /// native cell, and the report sets them side by side.
    pub fn on(&self, loader: LoaderBackend) -> Cell {
        let mut twin = Cell { loader, ..self.clone() };
        let lacking = LoaderKnob::lacking(&twin.knobs, twin.loader).map(|(knob, _)| knob);
        let batch_as_it_is: Vec<_> =
            lacking.filter(|k| k.cell.is_some_and(|facts| !facts.model_phase)).collect();
        for knob in batch_as_it_is {
            knob.set(&mut twin.knobs, &knob.default_text()).expect("a default reads back");
        }
        twin
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
            Knob::defs().iter().filter_map(|d| d.knob.id_part(self)).collect();
        parts.push(format!("r{}", self.repeat));
        parts
            .join("-")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
            .collect()
    }
}

impl Serialize for Cell {
    /// Every knob shown under its field in the definitions' order, the repeat after the step's;
    /// a knob added later left out at its old value.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for def in Knob::defs() {
            let value = def.knob.value(self);
            if def.unless.as_deref() == Some(value.as_str()) {
                continue;
            }
            match def.knob {
                Knob::Loader(knob) => {
                    let facts = knob.cell.expect("a cell carries it");
                    match facts.stored {
                        Stored::Text => map.serialize_entry(def.field, &value)?,
                        Stored::Number => {
                            let n: u64 = value.parse().expect("a count reads as a number");
                            map.serialize_entry(def.field, &n)?
                        }
                        Stored::Bytes => {
                            let bytes = value.parse::<CacheSize>().expect("a size reads back");
                            map.serialize_entry(def.field, &bytes.0)?
                        }
                    }
                }
                _ => map.serialize_entry(def.field, &value)?,
            }
            if def.knob == Knob::Dtype {
                map.serialize_entry("repeat", &self.repeat)?;
            }
        }
        map.end()
    }
}

/// A cell as results store it: the sweep's own knobs typed, the loader's by field.
#[derive(Deserialize)]
struct StoredCell {
    dataset: String,
    model: ModelSpec,
    device: DeviceChoice,
    dtype: Precision,
    repeat: usize,
    #[serde(default)]
    loader: LoaderBackend,
    #[serde(flatten)]
    rest: std::collections::BTreeMap<String, serde_json::Value>,
}

impl<'de> Deserialize<'de> for Cell {
    /// Each loader knob read by the table from its field; one added later and absent at its
    /// default. A missing or bad value is an error naming the field.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let stored = StoredCell::deserialize(deserializer)?;
        let mut knobs = LoaderConfig::default();
        for (knob, facts) in LoaderKnob::carried() {
            let field = facts.field;
            let text = match (stored.rest.get(field), facts.stored) {
                (None, _) if knob.omit_at_default => continue,
                (None, _) => return Err(D::Error::missing_field(field)),
                (Some(serde_json::Value::Number(n)), Stored::Bytes) => {
                    CacheSize(n.as_u64().unwrap_or(u64::MAX)).to_string()
                }
                (Some(serde_json::Value::String(text)), _) => text.clone(),
                (Some(other), _) => other.to_string(),
            };
            knob.set(&mut knobs, &text)
                .map_err(|what| D::Error::custom(format!("{field} {what}")))?;
        }
        let StoredCell { dataset, model, device, dtype, repeat, loader, .. } = stored;
        Ok(Cell { dataset, knobs, model, device, dtype, repeat, loader })
    }
}

/// A knob's value in a cell: the cell's to give, so that the definitions know no cell.
impl Knob {
    /// The knobs of `set` that `cells` show: those always shown, and the others where a cell
    /// differs from their default.
    pub fn shown<'a>(set: KnobSet, cells: impl IntoIterator<Item = &'a Cell> + Clone) -> Vec<Knob> {
        Self::set(set)
            .into_iter()
            .filter(|k| match &k.def().unless {
                None => true,
                Some(default) => cells.clone().into_iter().any(|c| k.value(c) != *default),
            })
            .collect()
    }

    /// Its value in `cell`, in its text form.
    pub fn value(self, cell: &Cell) -> String {
        match self {
            Knob::Dataset => cell.dataset.clone(),
            Knob::Loader(knob) => knob.get(&cell.knobs),
            Knob::Model => cell.model.to_string(),
            Knob::Device => cell.device.to_string(),
            Knob::Dtype => cell.dtype.to_string(),
            Knob::Backend => cell.loader.to_string(),
        }
    }

    /// Its part of `cell`'s id, None where it is left out (at its default).
    pub fn id_part(self, cell: &Cell) -> Option<String> {
        let def = self.def();
        let value = self.value(cell);
        (def.unless.as_deref() != Some(value.as_str())).then(|| format!("{}{value}", def.id_prefix))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell() -> Cell {
        let mut knobs = LoaderConfig::default();
        for (key, text) in [("workers", "2"), ("prefetch", "4"), ("batch", "64")]
            .into_iter()
            .chain([("resolution", "96x96"), ("images", "u8")])
        {
            LoaderKnob::by_key(key).unwrap().set(&mut knobs, text).unwrap();
        }
        Cell {
            dataset: "pusht-v3.0".into(),
            knobs,
            model: "diffusion:small".parse().unwrap(),
            device: DeviceChoice::Cpu,
            dtype: Precision::Bf16,
            repeat: 1,
            loader: LoaderBackend::Native,
        }
    }

    /// `cell` with the table's `knob` at `text`.
    fn with(mut cell: Cell, knob: &LoaderKnob, text: &str) -> Cell {
        knob.set(&mut cell.knobs, text).unwrap();
        cell
    }

    #[test]
    fn ids_name_every_knob_and_are_file_names() {
        let id = cell().id();
        assert_eq!(id, "pusht-v3.0-w2-p4-b64-96x96-u8-diffusion_small-cpu-bf16-r1");
        assert_ne!(with(cell(), &LoaderKnob::PREFETCH, "2").id(), id);
        let mut other = cell();
        other.loader = LoaderBackend::Lerobot;
        assert_eq!(other.id(), "pusht-v3.0-w2-p4-b64-96x96-u8-diffusion_small-cpu-bf16-lerobot-r1");
        let threaded = with(other.clone(), &LoaderKnob::DECODER_THREADS, "2");
        let cached = with(threaded.clone(), &LoaderKnob::CACHE, "500MB");
        assert_eq!(
            cached.id(),
            "pusht-v3.0-w2-p4-b64-96x96-u8-diffusion_small-cpu-bf16-t2-c500MB-lerobot-r1"
        );
        // Results as every version wrote them: the knobs added later left out at their old value.
        let json = serde_json::to_string(&cell()).unwrap();
        assert_eq!(
            json,
            r#"{"dataset":"pusht-v3.0","workers":2,"prefetch":4,"batch_size":64,"resolution":"96x96","images":"u8","model":"diffusion:small","device":"cpu","dtype":"bf16","repeat":1}"#
        );
        let stored = serde_json::to_value(&cached).unwrap();
        assert_eq!(stored["loader"], "lerobot");
        assert_eq!(stored[LoaderKnob::DECODER_THREADS.key], 2);
        assert_eq!(stored["cache_bytes"], 500_000_000, "the cache in bytes, as before");
        assert_eq!(serde_json::from_value::<Cell>(stored).unwrap(), cached);
    }

    #[test]
    fn stored_cells_with_a_bad_or_missing_knob_are_refused_by_field() {
        let mut json = serde_json::to_value(cell()).unwrap();
        json["batch_size"] = 0.into();
        let bad = serde_json::from_value::<Cell>(json.clone()).unwrap_err().to_string();
        assert_eq!(bad, "batch_size 0: expected at least 1");
        json.as_object_mut().unwrap().remove("batch_size");
        let missing = serde_json::from_value::<Cell>(json).unwrap_err().to_string();
        assert_eq!(missing, "missing field `batch_size`");
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
        let mut other = with(cell(), &LoaderKnob::CACHE, "4GiB");
        other = with(other, &LoaderKnob::DECODER_THREADS, "2");
        other.loader = LoaderBackend::Lerobot;
        let label = other.label();
        assert_eq!(label, format!("{plain}, decoder_threads 2, cache 4GiB, loader lerobot"));
    }

    #[test]
    fn a_lerobot_twin_and_config_keep_native_only_knobs_at_their_defaults() {
        let cached = with(with(cell(), &LoaderKnob::CACHE, "4GiB"), &LoaderKnob::WORKERS, "3");
        let twin = cached.lerobot_twin();
        assert_eq!(twin, Cell { loader: LoaderBackend::Lerobot, ..cell() }.with_workers(3));
        let base = LoaderConfig { seed: 7, drop_last: true, ..LoaderConfig::default() };
        let config = cached.loader_config(&base);
        assert_eq!((config.seed, config.drop_last, config.workers), (8, true, 3));
        assert_eq!(config.cache_bytes, 4 << 30);
        assert_eq!(twin.loader_config(&base).cache_bytes, 0);
    }

    #[test]
    fn the_model_key_ignores_workers_and_prefetch() {
        let mut other = with(cell(), &LoaderKnob::WORKERS, "0");
        other = with(other, &LoaderKnob::PREFETCH, "1");
        other = with(other, &LoaderKnob::DECODER_THREADS, "2");
        let model_phase = Knob::set(KnobSet::ModelPhase);
        assert_eq!(other.key(&model_phase), cell().key(&model_phase));
        other = with(other, &LoaderKnob::BATCH, "16");
        assert_ne!(other.key(&model_phase), cell().key(&model_phase));
    }

    impl Cell {
        fn with_workers(self, workers: usize) -> Cell {
            with(self, &LoaderKnob::WORKERS, &workers.to_string())
        }
    }
}
