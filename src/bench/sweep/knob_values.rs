//! The loader's knobs as a config file gives them, read through the loader's one table
//! ([`LoaderKnob::ALL`]) for every front end that has a config: a sweep's `[loader]` (a list
//! of values for a knob its cells carry), a guard cell, the layout study's `[measure]` (one
//! value each). A front end says what is its own ([`KnobFront`]: where the knobs sit, its
//! defaults, which knobs take lists, which it takes at all) rather than listing the knobs
//! again. Values are the knobs' own text forms, checked by the table as they are read, and
//! written back as the config had them (numbers as numbers, a knob added later left out at its
//! default), so that a kept config reads and compares the same.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::loader::config::LoaderConfig;
use crate::loader::knobs::{LoaderKnob, TomlType};

/// What a front end makes of the loader's table in its config.
pub trait KnobFront {
    /// Where the knobs sit, as errors name them (`loader` for `loader.batch`).
    const SECTION: &'static str;
    /// The front end's own keys beside the knobs, listed with the knobs when a key is unknown.
    const OWN_KEYS: &'static [&'static str];
    /// Knobs a config must give.
    const REQUIRED: &'static [&'static str] = &[];

    /// Its defaults: the loader's, changed where the front end's differ.
    fn defaults(loader: KnobValues<Self>) -> KnobValues<Self>
    where
        Self: Sized;

    /// Whether `knob` takes a list of values (a sweep's axes); one value otherwise.
    fn takes_a_list(_knob: &LoaderKnob) -> bool {
        false
    }

    /// Whether the front end takes `knob` at all (the layout study varies some itself).
    fn takes(_knob: &LoaderKnob) -> bool {
        true
    }
}

/// Every loader knob a front end takes, with its values, in the table's order.
pub struct KnobValues<F> {
    values: Vec<(&'static LoaderKnob, Vec<String>)>,
    front: PhantomData<F>,
}

impl<F> std::fmt::Debug for KnobValues<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.values.iter().map(|(k, v)| (k.key, v))).finish()
    }
}

impl<F> Clone for KnobValues<F> {
    fn clone(&self) -> Self {
        Self { values: self.values.clone(), front: PhantomData }
    }
}

impl<F> PartialEq for KnobValues<F> {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

impl<F: KnobFront> Default for KnobValues<F> {
    /// The front end's defaults.
    fn default() -> Self {
        F::defaults(Self::from_config(&LoaderConfig::default()))
    }
}

impl<F: KnobFront> KnobValues<F> {
    /// One value per knob the front end takes: `config`'s.
    pub fn from_config(config: &LoaderConfig) -> Self {
        let values =
            LoaderKnob::ALL.iter().filter(|k| F::takes(k)).map(|k| (k, vec![k.get(config)]));
        Self { values: values.collect(), front: PhantomData }
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

    /// Each knob at its first value: the one config of a front end whose knobs take one value
    /// each, and the config every cell of a sweep starts from.
    pub fn config(&self) -> LoaderConfig {
        let mut config = LoaderConfig::default();
        for (knob, values) in &self.values {
            if let Some(text) = values.first() {
                knob.set(&mut config, text).expect("checked when read");
            }
        }
        config
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

impl<'de, F: KnobFront> Deserialize<'de> for KnobValues<F> {
    /// The knobs given, each checked by the table; the rest at the front end's defaults. An
    /// unknown key, a bad value, a list for a knob that takes one value, or a required knob
    /// left out is an error naming it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let given = BTreeMap::<String, Given>::deserialize(deserializer)?;
        let missing = F::REQUIRED.iter().find(|key| !given.contains_key(**key));
        let section = F::SECTION;
        let mut axes = Self::default();
        for (key, given) in given {
            // A key of the front end's own is its to read (a flattened declaration beside the
            // knobs sees the same keys).
            if F::OWN_KEYS.contains(&key.as_str()) {
                continue;
            }
            let Some(knob) = LoaderKnob::by_key(&key).filter(|k| F::takes(k)) else {
                let known: Vec<String> = F::OWN_KEYS
                    .iter()
                    .copied()
                    .chain(LoaderKnob::ALL.iter().filter(|k| F::takes(k)).map(|k| k.key))
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
            if texts.len() > 1 && !F::takes_a_list(knob) {
                return Err(D::Error::custom(format!("{section}.{key} takes one value")));
            }
            // Each value checked, and kept in its one text form (`none` as `0`).
            let mut canonical = Vec::with_capacity(texts.len());
            for text in &texts {
                let mut config = LoaderConfig::default();
                knob.set(&mut config, text)
                    .map_err(|what| D::Error::custom(format!("{section}.{key} {what}")))?;
                canonical.push(knob.get(&config));
            }
            axes = axes.with(knob, canonical);
        }
        match missing {
            Some(key) => Err(D::Error::custom(format!("missing field `{key}`"))),
            None => Ok(axes),
        }
    }
}

impl<F: KnobFront> Serialize for KnobValues<F> {
    /// Lists as lists, the rest as one value; a knob added later left out at its default.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let defaults = Self::default();
        let mut map = serializer.serialize_map(None)?;
        for (knob, values) in self.iter() {
            if knob.omit_at_default && values == defaults.values(knob) {
                continue;
            }
            let typed: Vec<Scalar> = values.iter().map(|v| Scalar::typed(knob.toml, v)).collect();
            match (F::takes_a_list(knob), typed.first()) {
                (false, Some(one)) => map.serialize_entry(knob.key, one)?,
                _ => map.serialize_entry(knob.key, &typed)?,
            }
        }
        map.end()
    }
}
