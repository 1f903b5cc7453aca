//! One knob of the loader: what the table ([`LoaderKnob::ALL`]) says of it, and what it does
//! with a config (reads and sets its value from its text form, checks it, finds it lacking in
//! a loader).

use super::facts::{CellFacts, FlagForm, LoaderBackend, Reach, TomlType, TuneRole};
use crate::dataset::setting::{Refusal, Setting};
use crate::loader::config::LoaderConfig;
use serde_json::Value as Json;

/// One knob of the loader.
#[derive(Clone, Copy)]
pub struct LoaderKnob {
    /// Its key in configs (`decoder_threads`), and the name refusals give it there.
    pub key: &'static str,
    /// Its long flag without the dashes (`decoder-threads`).
    pub flag: &'static str,
    /// Whether the flag takes a value or is a switch.
    pub form: FlagForm,
    /// Its help line; a front end adds the default ([`Self::default_said`]) and the loader it is
    /// for (its reach).
    pub help: &'static str,
    /// What the default is, or why, said after its value in help (`LeRobot's` after `4`);
    /// None where the value says it all.
    pub default_why: Option<&'static str>,
    /// Its keyword in PyTorch's `DataLoader` (`num_workers`), where it is one: the name by
    /// which LeRobot's driver sets it and a lerobot-train run's DataLoader says it.
    pub dataloader: Option<&'static str>,
    /// Which loaders it acts in.
    pub reach: Reach,
    /// What tune does with it.
    pub tune: TuneRole,
    /// How configs write its values.
    pub toml: TomlType,
    /// Added after configs and results were first kept: left out of them at its default, so
    /// that what was kept before reads and compares the same.
    pub omit_at_default: bool,
    /// What a sweep's cells and report make of it, where a cell carries it (one cell per
    /// value); None: every cell of a sweep shares one value.
    pub cell: Option<CellFacts>,
    pub(super) get: fn(&LoaderConfig) -> String,
    pub(super) set: fn(&mut LoaderConfig, &str) -> Result<(), String>,
}

impl std::fmt::Debug for LoaderKnob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LoaderKnob").field(&self.key).finish()
    }
}

impl PartialEq for LoaderKnob {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for LoaderKnob {}

impl std::hash::Hash for LoaderKnob {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key.hash(state);
    }
}

impl LoaderKnob {
    /// The knobs a sweep's cell carries (those with [`CellFacts`]), in the table's order.
    pub fn carried() -> impl Iterator<Item = (&'static Self, &'static CellFacts)> {
        Self::ALL.iter().filter_map(|k| k.cell.as_ref().map(|facts| (k, facts)))
    }

    /// The knob whose config key is `key`.
    pub fn by_key(key: &str) -> Option<&'static LoaderKnob> {
        Self::ALL.iter().find(|k| k.key == key)
    }

    /// The setting a refusal names it by.
    pub fn setting(&self) -> Setting {
        Setting::Knob(self.key)
    }

    /// Its value in `config`, in its text form (the one [`Self::set`] reads).
    pub fn get(&self, config: &LoaderConfig) -> String {
        (self.get)(config)
    }

    /// Sets it in `config` from its text form, checked; the error says what was expected and
    /// leaves the naming of the knob to the front end.
    pub fn set(&self, config: &mut LoaderConfig, text: &str) -> Result<(), String> {
        (self.set)(config, text)
    }

    /// Its default, in its text form.
    pub fn default_text(&self) -> String {
        self.get(&LoaderConfig::default())
    }

    /// Its value in `config` as a `DataLoader` keyword takes it (a number or a bool, by its
    /// TOML type), under that keyword; None for a knob that is no `DataLoader` keyword.
    pub fn dataloader_value(&self, config: &LoaderConfig) -> Option<(&'static str, Json)> {
        let keyword = self.dataloader?;
        let text = self.get(config);
        let value = match self.toml {
            TomlType::Boolean => Json::from(text == "true"),
            TomlType::Integer => text.parse::<u64>().map_or(Json::from(text), Json::from),
            TomlType::Text => Json::from(text),
        };
        Some((keyword, value))
    }

    /// The default as help says it: its text form, and what it is where the row says
    /// (`4, LeRobot's`).
    pub fn default_said(&self) -> String {
        match self.default_why {
            Some(why) => format!("{}, {why}", self.default_text()),
            None => self.default_text(),
        }
    }

    /// Whether `config` holds another value than the default.
    pub fn is_set(&self, config: &LoaderConfig) -> bool {
        self.get(config) != self.default_text()
    }

    /// Checks every knob of `config` as if read from its text form: the first its own check
    /// refuses, named (`--batch 0: expected at least 1`, `loader.batch 0: …`).
    pub fn check_all(config: &LoaderConfig) -> Result<(), Refusal> {
        for knob in Self::ALL {
            if let Err(what) = knob.set(&mut config.clone(), &knob.get(config)) {
                let setting = knob.setting();
                return Err(Refusal::new(move |name| format!("{} {what}", name(setting))));
            }
        }
        Ok(())
    }

    /// The knobs `config` sets that `loader` lacks (the table's reach), each with why.
    pub fn lacking(
        config: &LoaderConfig,
        loader: LoaderBackend,
    ) -> impl Iterator<Item = (&'static Self, &'static str)> + '_ {
        Self::ALL.iter().filter_map(move |k| match (k.reach, loader) {
            (
                Reach::Native(why),
                LoaderBackend::Lerobot
                | LoaderBackend::LerobotTrain
                | LoaderBackend::FeedbenchLerobotTrain,
            )
            | (Reach::Lerobot(why), LoaderBackend::Native)
                if k.is_set(config) =>
            {
                Some((k, why))
            }
            _ => None,
        })
    }

    /// Sets every knob `config` sets that `loader` lacks back to its default.
    pub fn reset_lacking(config: &mut LoaderConfig, loader: LoaderBackend) {
        let lacking: Vec<_> = Self::lacking(config, loader).map(|(knob, _)| knob).collect();
        for knob in lacking {
            knob.set(config, &knob.default_text()).expect("a default reads back");
        }
    }

    /// Refuses the first knob `config` sets that `loader` lacks, named, with why.
    pub fn refuse_lacking(config: &LoaderConfig, loader: LoaderBackend) -> Result<(), Refusal> {
        let Some((knob, why)) = Self::lacking(config, loader).next() else { return Ok(()) };
        let whose = match loader {
            LoaderBackend::Native => "a knob of LeRobot's loader",
            LoaderBackend::Lerobot
            | LoaderBackend::LerobotTrain
            | LoaderBackend::FeedbenchLerobotTrain => "the native loader's",
        };
        let setting = knob.setting();
        Err(Refusal::new(move |name| format!("{} is {whose}: {why}", name(setting))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dataloader_keywords_come_from_the_table_typed_as_the_dataloader_takes_them() {
        let config = LoaderConfig { workers: 3, pin_memory: true, ..LoaderConfig::default() };
        let said: std::collections::BTreeMap<_, _> =
            LoaderKnob::ALL.iter().filter_map(|k| k.dataloader_value(&config)).collect();
        let expected = serde_json::json!({
            "num_workers": 3, "prefetch_factor": 2, "batch_size": 8, "drop_last": false,
            "pin_memory": true, "persistent_workers": true, "multiprocessing_context": "fork",
        });
        assert_eq!(serde_json::to_value(&said).unwrap(), expected);
        assert_eq!(LoaderKnob::CACHE.dataloader_value(&config), None, "no DataLoader keyword");
    }

    #[test]
    fn the_native_only_knobs_set_are_named_with_why() {
        let mut config = LoaderConfig::default();
        assert_eq!(LoaderKnob::lacking(&config, LoaderBackend::Lerobot).count(), 0);
        for (key, text) in [("decoder_threads", "2"), ("cache", "1GiB"), ("unordered", "true")] {
            LoaderKnob::by_key(key).unwrap().set(&mut config, text).unwrap();
        }
        let lacking = LoaderKnob::lacking(&config, LoaderBackend::Lerobot);
        let named: Vec<&str> = lacking.map(|(k, _)| k.key).collect();
        assert_eq!(named, ["decoder_threads", "cache", "unordered"]);
    }
}
