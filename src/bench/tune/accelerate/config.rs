//! An accelerate config file (`accelerate config` writes it: YAML, or JSON where named
//! `.json`), read for the settings that decide the ranks it launches, as accelerate 1.x's
//! `load_config_from_file` and `ClusterConfig` read them.

use std::path::Path;

use serde_json::Value as Json;
use yaml_rust2::{Yaml, YamlLoader};

/// A setting of an accelerate config file.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Setting {
    /// An integer.
    Int(i64),
    /// A string.
    Text(String),
    /// Anything else, as the file writes it.
    Other(String),
}

/// The settings of an accelerate config file that decide its ranks.
#[derive(Debug)]
pub(super) struct Config {
    /// The file, and who named it (`--config_file`, accelerate's default config).
    said: String,
    /// `compute_environment`, `distributed_type`, `num_processes`, `num_machines`.
    settings: Vec<(&'static str, Setting)>,
}

/// The keys of a config file tune reads.
const KEYS: [&str; 4] =
    ["compute_environment", "distributed_type", "num_processes", "num_machines"];

impl Config {
    /// Reads the YAML (or, named `.json`, JSON) config file at `path`, named by `whose`.
    pub(super) fn read(path: &Path, whose: &str) -> Result<Self, String> {
        let said = format!("{} ({whose})", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| format!("{said}: {e}"))?;
        let not_a_mapping = || {
            format!(
                "{said}: expected a mapping of accelerate's settings (num_processes: 8, \
                 num_machines: 1, …)"
            )
        };
        let mut settings = Vec::new();
        if path.extension().is_some_and(|e| e == "json") {
            let json: Json =
                serde_json::from_str(&text).map_err(|e| format!("{said}: not JSON: {e}"))?;
            let map = json.as_object().ok_or_else(not_a_mapping)?;
            for key in KEYS {
                let setting = match map.get(key) {
                    None => continue,
                    Some(Json::String(s)) => Setting::Text(s.clone()),
                    Some(value) => {
                        value.as_i64().map_or(Setting::Other(value.to_string()), Setting::Int)
                    }
                };
                settings.push((key, setting));
            }
        } else {
            let docs =
                YamlLoader::load_from_str(&text).map_err(|e| format!("{said}: not YAML: {e}"))?;
            let Some(Yaml::Hash(map)) = docs.first() else { return Err(not_a_mapping()) };
            for key in KEYS {
                let setting = match map.get(&Yaml::String(key.into())) {
                    None => continue,
                    Some(Yaml::Integer(n)) => Setting::Int(*n),
                    Some(Yaml::String(s)) => Setting::Text(s.clone()),
                    Some(other) => Setting::Other(yaml_text(other)),
                };
                settings.push((key, setting));
            }
        }
        let config = Self { said, settings };
        match config.get("compute_environment") {
            None => Ok(config),
            Some(Setting::Text(env)) if env == "LOCAL_MACHINE" => Ok(config),
            Some(other) => Err(format!(
                "{}: compute_environment is {}: tune answers for the ranks on this box \
                 (LOCAL_MACHINE), not a job elsewhere",
                config.said,
                other.text()
            )),
        }
    }

    /// The setting `key`, where the file gives it.
    fn get(&self, key: &str) -> Option<&Setting> {
        self.settings.iter().find(|(k, _)| *k == key).map(|(_, s)| s)
    }

    /// `key` as a count of at least 1, where the file gives it.
    fn count(&self, key: &str) -> Result<Option<usize>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Setting::Int(n)) if *n >= 1 => Ok(Some(*n as usize)),
            Some(Setting::Int(-1)) if key == "num_processes" => Err(format!(
                "{}: num_processes is -1, accelerate's mark that the launch line gives it: add \
                 --num_processes N to the line",
                self.said
            )),
            Some(other) => Err(format!(
                "{}: {key} is {}: expected a count of at least 1",
                self.said,
                other.text()
            )),
        }
    }

    /// `num_machines`, and where it was read, where the file gives it.
    pub(super) fn machines(&self) -> Result<Option<(usize, String)>, String> {
        let machines = self.count("num_machines")?;
        Ok(machines.map(|m| (m, format!("num_machines: {m} in {}", self.said))))
    }

    /// `num_processes`, and where it was read (one where the file gives none and distributes
    /// nothing, as accelerate reads it).
    pub(super) fn processes(&self) -> Result<(usize, String), String> {
        if let Some(n) = self.count("num_processes")? {
            return Ok((n, format!("num_processes: {n} in {}", self.said)));
        }
        match self.get("distributed_type") {
            Some(Setting::Text(t)) if t == "NO" => {
                Ok((1, format!("distributed_type: NO in {}", self.said)))
            }
            distributed => Err(format!(
                "{}: no num_processes (distributed_type {}): accelerate asks for \
                 --num_processes on the launch line then; add it there, or num_processes to \
                 the file",
                self.said,
                distributed.map_or("unset".into(), Setting::text)
            )),
        }
    }
}

impl Setting {
    /// The setting as the file writes it.
    fn text(&self) -> String {
        match self {
            Setting::Int(n) => n.to_string(),
            Setting::Text(s) => format!("{s:?}"),
            Setting::Other(s) => s.clone(),
        }
    }
}

/// A YAML value that is not an integer or string, as said in an error.
fn yaml_text(value: &Yaml) -> String {
    match value {
        Yaml::Real(r) => r.clone(),
        Yaml::Boolean(b) => b.to_string(),
        Yaml::Null => "null".into(),
        Yaml::Array(_) => "a list".into(),
        Yaml::Hash(_) => "a mapping".into(),
        _ => "not a value".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_tune_cannot_read_is_refused_naming_it_and_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let refused = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let config = Config::read(&path, "--config_file")?;
            config.machines().and(config.processes()).map(|_| ())
        };
        for (name, text, said) in [
            ("a.yaml", "num_processes: eight\n", "num_processes is \"eight\": expected a count"),
            ("b.yaml", "num_processes: 0\n", "num_processes is 0: expected a count"),
            ("c.yaml", "num_processes: 2.5\n", "num_processes is 2.5: expected a count"),
            ("d.yaml", "num_processes: -1\n", "num_processes is -1, accelerate's mark"),
            ("e.yaml", "num_processes: 2\nnum_machines: null\n", "num_machines is null"),
            ("f.yaml", "num_processes: [2\n", "not YAML"),
            ("g.yaml", "- 2\n", "expected a mapping of accelerate's settings"),
            ("h.yaml", "", "expected a mapping"),
            ("i.json", "{\"num_processes\": \"2\"}", "num_processes is \"2\""),
            ("j.json", "num_processes: 2", "not JSON"),
            ("k.yaml", "compute_environment: AMAZON_SAGEMAKER\n", "compute_environment is"),
        ] {
            let err = refused(name, text).unwrap_err();
            assert!(err.contains(name) && err.contains(said), "{name}: {err}");
        }
        // A file that gives what tune reads, as accelerate writes it.
        let written = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n\
                       downcast_bf16: 'no'\ngpu_ids: all\nnum_machines: 1\nnum_processes: 8\n";
        assert_eq!(refused("l.yaml", written), Ok(()));
    }
}
