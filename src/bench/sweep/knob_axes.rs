//! A sweep's loader knobs, read through the loader's one table ([`LoaderKnob::ALL`]): a knob a
//! cell carries (a [`Knob`] of the same name) takes a list of values, one cell per value; any
//! other knob takes one value that every cell shares. Values are the knobs' own text forms,
//! checked by the table as they are read, and written back as the config had them (numbers as
//! numbers, a knob added later left out at its default), so that a kept config reads and
//! compares the same.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::knob::Knob;
use crate::loader::config::LoaderConfig;
use crate::loader::knobs::{LoaderKnob, TomlType};

/// Every loader knob of a sweep with its values, in the table's order.
#[derive(Debug, Clone, PartialEq)]
pub struct KnobAxes {
    values: Vec<(&'static LoaderKnob, Vec<String>)>,
}

impl Default for KnobAxes {
    /// A sweep's defaults: workers 0, 1 and 2 and batches of 16 and 64; the loader's for the
    /// rest.
    fn default() -> Self {
        Self::from_config(&LoaderConfig::default())
            .with(&LoaderKnob::WORKERS, ["0", "1", "2"])
            .with(&LoaderKnob::BATCH, ["16", "64"])
    }
}

impl KnobAxes {
    /// One value per knob: `config`'s.
    pub fn from_config(config: &LoaderConfig) -> Self {
        Self { values: LoaderKnob::ALL.iter().map(|k| (k, vec![k.get(config)])).collect() }
    }

    /// These values (text forms, checked by the caller) for `knob`.
    pub fn with<T: ToString>(
        mut self,
        knob: &LoaderKnob,
        values: impl IntoIterator<Item = T>,
    ) -> Self {
        let values = values.into_iter().map(|v| v.to_string()).collect();
        if let Some(slot) = self.values.iter_mut().find(|(k, _)| *k == knob) {
            slot.1 = values;
        }
        self
    }

    /// The values of `knob`, in its text form.
    pub fn values(&self, knob: &LoaderKnob) -> &[String] {
        self.values.iter().find(|(k, _)| *k == knob).map_or(&[], |(_, v)| v.as_slice())
    }

    /// The values of `knob`, each as `read` takes it from a config holding it.
    pub fn typed<T>(&self, knob: &LoaderKnob, read: impl Fn(&LoaderConfig) -> T) -> Vec<T> {
        self.values(knob)
            .iter()
            .map(|text| {
                let mut config = LoaderConfig::default();
                knob.set(&mut config, text).expect("checked when read");
                read(&config)
            })
            .collect()
    }

    /// Every knob with its values, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static LoaderKnob, &[String])> {
        self.values.iter().map(|(k, v)| (*k, v.as_slice()))
    }

    /// The config every cell starts from: each knob at its first value.
    pub fn base(&self) -> LoaderConfig {
        let mut config = LoaderConfig::default();
        for (knob, values) in &self.values {
            if let Some(text) = values.first() {
                knob.set(&mut config, text).expect("checked when read");
            }
        }
        config
    }

    /// Whether a sweep's cells vary `knob`: a cell carries it ([`Knob::DEFS`]).
    pub fn is_axis(knob: &LoaderKnob) -> bool {
        Knob::DEFS.iter().any(|d| d.name == knob.key)
    }
}

/// One value as a config file writes it.
#[derive(Deserialize, Serialize)]
#[serde(untagged)]
enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
}

impl Scalar {
    /// `text` as `toml` writes it.
    fn typed(toml: TomlType, text: &str) -> Self {
        match toml {
            TomlType::Integer => text.parse().map_or_else(|_| Self::Text(text.into()), Self::Int),
            TomlType::Boolean => text.parse().map_or_else(|_| Self::Text(text.into()), Self::Bool),
            TomlType::Text => Self::Text(text.into()),
        }
    }

    /// Its text form, as the knob reads it.
    fn text(&self) -> String {
        match self {
            Self::Bool(b) => b.to_string(),
            Self::Int(n) => n.to_string(),
            Self::Float(x) => x.to_string(),
            Self::Text(t) => t.clone(),
        }
    }
}

/// A knob as a config gives it: one value or a list.
#[derive(Deserialize)]
#[serde(untagged)]
enum Given {
    Many(Vec<Scalar>),
    One(Scalar),
}

impl<'de> Deserialize<'de> for KnobAxes {
    /// The knobs given, each checked by the table; the rest at the sweep's defaults. An unknown
    /// key, a bad value, or a list for a knob the cells do not vary is an error naming it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let given = BTreeMap::<String, Given>::deserialize(deserializer)?;
        let mut axes = Self::default();
        for (key, given) in given {
            let Some(knob) = LoaderKnob::by_key(&key) else {
                let known: Vec<String> = ["window", "loader", "python", "video_backend"]
                    .into_iter()
                    .chain(LoaderKnob::ALL.iter().map(|k| k.key))
                    .map(|k| format!("`{k}`"))
                    .collect();
                return Err(D::Error::custom(format!(
                    "unknown field `{key}`, expected one of {}",
                    known.join(", ")
                )));
            };
            let texts: Vec<String> = match given {
                Given::One(value) => vec![value.text()],
                Given::Many(values) => values.iter().map(Scalar::text).collect(),
            };
            if texts.len() > 1 && !Self::is_axis(knob) {
                return Err(D::Error::custom(format!(
                    "loader.{key} takes one value: a sweep's cells do not vary it"
                )));
            }
            // Each value checked, and kept in its one text form (`none` as `0`).
            let mut canonical = Vec::with_capacity(texts.len());
            for text in &texts {
                let mut config = LoaderConfig::default();
                knob.set(&mut config, text)
                    .map_err(|what| D::Error::custom(format!("loader.{key} {what}")))?;
                canonical.push(knob.get(&config));
            }
            axes = axes.with(knob, canonical);
        }
        Ok(axes)
    }
}

impl Serialize for KnobAxes {
    /// Axes as lists, the rest as one value; a knob added later left out at its default.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let defaults = Self::default();
        let mut map = serializer.serialize_map(None)?;
        for (knob, values) in self.iter() {
            if knob.omit_at_default && values == defaults.values(knob) {
                continue;
            }
            let typed: Vec<Scalar> = values.iter().map(|v| Scalar::typed(knob.toml, v)).collect();
            match (Self::is_axis(knob), typed.first()) {
                (false, Some(one)) => map.serialize_entry(knob.key, one)?,
                _ => map.serialize_entry(knob.key, &typed)?,
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_the_knobs_a_cell_carries() {
        let axes: Vec<&str> =
            LoaderKnob::ALL.iter().filter(|k| KnobAxes::is_axis(k)).map(|k| k.key).collect();
        let expected =
            ["workers", "prefetch", "batch", "resolution", "images", "decoder_threads", "cache"];
        assert_eq!(axes, expected);
    }

    #[test]
    fn the_base_takes_each_knobs_first_value() {
        let axes = KnobAxes::default()
            .with(&LoaderKnob::DROP_N_LAST_FRAMES, ["3"])
            .with(&LoaderKnob::CACHE, ["1GiB", "0"]);
        let base = axes.base();
        assert_eq!((base.workers, base.batch_size), (0, 16));
        assert_eq!((base.drop_n_last_frames, base.cache_bytes), (Some(3), 1 << 30));
        assert_eq!(axes.typed(&LoaderKnob::CACHE, |c| c.cache_bytes), [1 << 30, 0]);
    }
}
