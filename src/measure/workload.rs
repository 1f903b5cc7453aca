//! What work a result measured, as one comparable value: the parameters that define it (the
//! dataset's identity, the loader's knobs, the batch, the step, the phase and its counts) by
//! name, and a stable hash over them, as MLPerf Storage stamps its results. Two runs of one
//! workload hash alike wherever they ran; runs of unlike workloads are never compared, and
//! where two differ the parameters that differ are named. Where it ran is not work: paths,
//! the Python that ran LeRobot and thresholds a judge applies stay out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The parameters that define a measured work, and their hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// SHA-256 over the parameters (each `name=value` on a line, in name order), hex, its
    /// first 16 digits.
    pub hash: String,
    /// The parameters, by name.
    pub parameters: BTreeMap<String, String>,
}

impl Workload {
    /// The workload these parameters define.
    pub fn of(parameters: BTreeMap<String, String>) -> Self {
        let mut digest = Sha256::new();
        for (name, value) in &parameters {
            digest.update(name.as_bytes());
            digest.update(b"=");
            digest.update(value.as_bytes());
            digest.update(b"\n");
        }
        let hash = digest.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
        Self { hash, parameters }
    }

    /// The parameters of a serialisable value, each leaf under its dotted key path (`a.b`,
    /// `list.0`), its value as JSON writes it; the keys in `left_out` (at any depth) are not
    /// work and stay out.
    pub fn parameters_of(value: &impl Serialize, left_out: &[&str]) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let json = serde_json::to_value(value).unwrap_or_default();
        flatten(&json, "", left_out, &mut out);
        out
    }

    /// Where `now` differs from `self`: each parameter as `name then → now` (`absent` where
    /// one side lacks it), in name order.
    pub fn differences(&self, now: &Workload) -> Vec<String> {
        let names: std::collections::BTreeSet<&String> =
            self.parameters.keys().chain(now.parameters.keys()).collect();
        let value = |w: &Workload, name: &String| {
            w.parameters.get(name).cloned().unwrap_or_else(|| "absent".into())
        };
        names
            .into_iter()
            .filter(|name| self.parameters.get(*name) != now.parameters.get(*name))
            .map(|name| format!("{name} {} then → {} now", value(self, name), value(now, name)))
            .collect()
    }
}

/// Adds the leaves of `json` under `prefix` to `out`.
fn flatten(
    json: &serde_json::Value,
    prefix: &str,
    left_out: &[&str],
    out: &mut BTreeMap<String, String>,
) {
    let key = |name: &str| match prefix {
        "" => name.to_string(),
        _ => format!("{prefix}.{name}"),
    };
    match json {
        serde_json::Value::Object(map) => {
            for (name, value) in map.iter().filter(|(name, _)| !left_out.contains(&name.as_str())) {
                flatten(value, &key(name), left_out, out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, value) in items.iter().enumerate() {
                flatten(value, &key(&i.to_string()), left_out, out);
            }
        }
        serde_json::Value::Null => {}
        serde_json::Value::String(text) => {
            out.insert(prefix.to_string(), text.clone());
        }
        leaf => {
            out.insert(prefix.to_string(), leaf.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Knobs {
        workers: usize,
        resolution: Option<[u32; 2]>,
        python: &'static str,
        step: Step,
    }

    #[derive(Serialize)]
    struct Step {
        kind: &'static str,
        ms: f64,
    }

    fn knobs(workers: usize, python: &'static str) -> Knobs {
        Knobs {
            workers,
            resolution: Some([96, 96]),
            python,
            step: Step { kind: "synthetic", ms: 40.0 },
        }
    }

    #[test]
    fn one_workload_hashes_alike_and_any_parameter_changes_it_named() {
        let of = |k: &Knobs| Workload::of(Workload::parameters_of(k, &["python"]));
        let a = of(&knobs(2, "/a/.venv/bin/python"));
        // Where it ran (the Python's path) is no work: the same hash.
        assert_eq!(a, of(&knobs(2, "/b/.venv/bin/python")));
        assert_eq!(a.hash.len(), 16);
        assert_eq!(a.parameters["resolution.1"], "96");
        assert_eq!(a.parameters["step.kind"], "synthetic");
        assert!(!a.parameters.contains_key("python"));
        let b = of(&knobs(4, "/a/.venv/bin/python"));
        assert_ne!(a.hash, b.hash);
        assert_eq!(a.differences(&b), ["workers 2 then → 4 now"]);
        let mut c = a.parameters.clone();
        c.remove("step.ms");
        let c = Workload::of(c);
        assert_ne!(a.hash, c.hash);
        assert_eq!(a.differences(&c), ["step.ms 40.0 then → absent now"]);
    }
}
