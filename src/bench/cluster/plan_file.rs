//! A sweep's plan as files: `DIR/plan.jsonl`, one line per cell in the order they run, each
//! with its stable id, its group (the cells that share one `model` measurement, which one task
//! runs together), whether its `train` phase is traced, and the hash of the config, which is
//! kept beside it as `DIR/sweep.toml`; and the share of the plan one task of a job array runs.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::error::ClusterError;
use crate::bench::store::lock::OutputLock;
use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::config::{ConfigFile, SweepConfig};
use crate::bench::sweep::plan::plan;
use crate::bench::sweep::results::CONFIG_FILE;
use crate::bench::sweep::{config_text, model_key, SweepError};
use crate::dataset::files::write_whole;

/// The plan's file in a sweep's output directory.
pub const PLAN_FILE: &str = "plan.jsonl";

/// One line of `plan.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedCell {
    /// The cell's stable id ([`Cell::id`]): its result goes to `cells/<id>.json`.
    pub id: String,
    /// Its group, from 0 in plan order: cells sharing a `model` measurement.
    pub group: usize,
    /// Whether its `train` phase is traced into `trace.json`.
    pub traced: bool,
    /// The hash of the config the plan was made from (`sweep.toml`).
    pub config_hash: String,
    /// The knobs.
    pub cell: Cell,
}

/// Every cell of a sweep, in the order they run.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The cells, each with its id and group.
    pub cells: Vec<PlannedCell>,
}

impl Plan {
    /// The plan of `config` on the dataset called `dataset`, with the step on `device`.
    pub fn new(
        config: &SweepConfig,
        dataset: &str,
        device: tch::Device,
    ) -> Result<Self, ClusterError> {
        let sweep = plan(config, dataset, device).map_err(SweepError::from)?;
        let config_hash = config_hash(&config_text(config));
        let mut keys: Vec<String> = Vec::new();
        let cells = sweep
            .cells
            .iter()
            .enumerate()
            .map(|(index, cell)| {
                let key = model_key(cell);
                let group = keys.iter().position(|k| *k == key).unwrap_or_else(|| {
                    keys.push(key);
                    keys.len() - 1
                });
                PlannedCell {
                    id: cell.id(),
                    group,
                    traced: index == sweep.traced,
                    config_hash: config_hash.clone(),
                    cell: cell.clone(),
                }
            })
            .collect();
        Ok(Self { cells })
    }

    /// How many groups: the most tasks that can share the plan.
    pub fn groups(&self) -> usize {
        self.cells.iter().map(|c| c.group + 1).max().unwrap_or(0)
    }

    /// The cells `share` runs: its groups, dealt out in turn (group `g` to task `g % tasks`),
    /// so that every cell is in exactly one task's share.
    pub fn share(&self, share: TaskShare) -> Vec<&PlannedCell> {
        self.cells.iter().filter(|c| c.group % share.tasks == share.task).collect()
    }

    /// Writes `config` (as [`config_text`]) to `out/sweep.toml` and the plan to
    /// `out/plan.jsonl`, each whole. Planning again with the same config is allowed (nothing
    /// changes); a different plan already there is refused.
    pub fn write(&self, out: &Path, config: &SweepConfig) -> Result<(), ClusterError> {
        if out.exists() && !out.is_dir() {
            return Err(ClusterError::file(out, "exists and is not a directory (--out)"));
        }
        std::fs::create_dir_all(out).map_err(|e| ClusterError::io(out, e))?;
        let _alone = OutputLock::exclusive(out)?;
        let lines: String = self
            .cells
            .iter()
            .map(|c| serde_json::to_string(c).expect("plans serialise") + "\n")
            .collect();
        let path = out.join(PLAN_FILE);
        if path.exists() {
            let old = std::fs::read_to_string(&path).map_err(|e| ClusterError::io(&path, e))?;
            if old == lines {
                return Ok(());
            }
            return Err(ClusterError::file(
                &path,
                "holds another plan (another config or dataset): choose another --out",
            ));
        }
        let config_path = out.join(CONFIG_FILE);
        write_whole(&config_path, config_text(config).as_bytes())
            .map_err(|e| ClusterError::io(&config_path, e))?;
        write_whole(&path, lines.as_bytes()).map_err(|e| ClusterError::io(&path, e))
    }

    /// The config and plan in `out`, checked to belong together.
    pub fn read(out: &Path) -> Result<(SweepConfig, Self), ClusterError> {
        let path = out.join(PLAN_FILE);
        if !path.is_file() {
            return Err(ClusterError::file(
                &path,
                "no plan here: make one with `feedbench sweep plan --config C --out DIR`",
            ));
        }
        let text = std::fs::read_to_string(&path).map_err(|e| ClusterError::io(&path, e))?;
        let cells = text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| {
                serde_json::from_str::<PlannedCell>(line).map_err(|e| {
                    ClusterError::file(&path, format!("line {}: not a planned cell ({e})", i + 1))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let config_path = out.join(CONFIG_FILE);
        let config_text =
            std::fs::read_to_string(&config_path).map_err(|e| ClusterError::io(&config_path, e))?;
        let hash = config_hash(&config_text);
        if cells.is_empty() || cells.iter().any(|c| c.config_hash != hash) {
            return Err(ClusterError::file(
                &config_path,
                format!("is not the config {PLAN_FILE} was planned from (it changed since): plan again into another --out"),
            ));
        }
        let config = SweepConfig::load(&config_path)?;
        Ok((config, Self { cells }))
    }
}

/// The hash a plan's cells carry: the first 16 hex digits of the config text's SHA-256.
pub fn config_hash(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// One task's share of a plan: task `task` of `tasks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskShare {
    /// This task, from 0.
    pub task: usize,
    /// How many tasks share the plan.
    pub tasks: usize,
}

impl TaskShare {
    /// The share named by `--task`/`--tasks`, each defaulting from the scheduler: Slurm's
    /// `SLURM_ARRAY_TASK_ID` (less `SLURM_ARRAY_TASK_MIN`) and `SLURM_ARRAY_TASK_COUNT`, or
    /// Kubernetes' `JOB_COMPLETION_INDEX` (whose count `--tasks` gives). Neither: the whole plan.
    pub fn from_vars(
        task: Option<usize>,
        tasks: Option<usize>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ClusterError> {
        let read = |name: &str| -> Result<Option<usize>, ClusterError> {
            lookup(name)
                .map(|value| {
                    value.trim().parse().map_err(|_| ClusterError::Setting {
                        name: format!("${name}={value:?}"),
                        what: "expected a task number".into(),
                    })
                })
                .transpose()
        };
        let slurm = read("SLURM_ARRAY_TASK_ID")?;
        let kubernetes = read("JOB_COMPLETION_INDEX")?;
        let task = match (task, slurm, kubernetes) {
            (Some(task), ..) => Some(task),
            (None, Some(id), _) => {
                let min = read("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
                Some(id.checked_sub(min).ok_or_else(|| ClusterError::Setting {
                    name: format!("$SLURM_ARRAY_TASK_ID={id}"),
                    what: format!("below $SLURM_ARRAY_TASK_MIN={min}"),
                })?)
            }
            (None, None, index) => index,
        };
        let tasks = match (tasks, slurm) {
            (Some(tasks), _) => Some(tasks),
            (None, Some(_)) => read("SLURM_ARRAY_TASK_COUNT")?,
            (None, None) => None,
        };
        match (task, tasks) {
            (None, None) => Ok(Self { task: 0, tasks: 1 }),
            (Some(task), Some(tasks)) if task < tasks => Ok(Self { task, tasks }),
            (Some(task), Some(tasks)) => Err(ClusterError::Setting {
                name: "--task".into(),
                what: format!("task {task} of {tasks}: expected 0 ≤ task < tasks"),
            }),
            (Some(_), None) => Err(ClusterError::Setting {
                name: "--tasks".into(),
                what: "how many tasks share the plan is not known: pass --tasks N".into(),
            }),
            (None, Some(_)) => Err(ClusterError::Setting {
                name: "--task".into(),
                what: "--tasks without a task number: pass --task I, or run as a Slurm array task"
                    .into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(workers: &str) -> SweepConfig {
        let text = format!(
            "[dataset]\nsynth = \"pusht\"\n[loader]\nworkers = {workers}\nbatch = [16, 64]\n\
             [model]\ndtype = [\"f32\", \"bf16\"]\n[run]\nrepeats = 2\n"
        );
        let config: SweepConfig = toml::from_str(&text).unwrap();
        config.check(Path::new("sweep.toml")).unwrap();
        config
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn the_same_config_plans_the_same_ids_in_the_same_order() {
        let a = Plan::new(&config("[0, 2]"), "pusht", tch::Device::Cpu).unwrap();
        let b = Plan::new(&config("[0, 2]"), "pusht", tch::Device::Cpu).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.cells.len(), 16);
        // Groups: the cells sharing a model measurement (all but workers), 8 of them.
        assert_eq!(a.groups(), 8);
        assert_eq!(a.cells[0].group, a.cells[1].group, "workers 0 and 2 share the model phase");
        assert_ne!(a.cells[1].group, a.cells[2].group, "batch 16 and 64 do not");
        assert_eq!(a.cells.iter().filter(|c| c.traced).count(), 1);
        let other = Plan::new(&config("[0, 4]"), "pusht", tch::Device::Cpu).unwrap();
        assert_ne!(other.cells[0].config_hash, a.cells[0].config_hash);
        assert_eq!(other.cells[0].id, a.cells[0].id, "a cell's id is its knobs");
    }

    #[test]
    fn every_cell_is_in_exactly_one_share_for_any_number_of_tasks() {
        let plan = Plan::new(&config("[0, 1, 2]"), "pusht", tch::Device::Cpu).unwrap();
        for tasks in 1..=(plan.groups() + 3) {
            let mut seen: HashMap<&str, usize> = HashMap::new();
            for task in 0..tasks {
                let share = plan.share(TaskShare { task, tasks });
                // A group is never split between tasks.
                for cell in &share {
                    assert_eq!(cell.group % tasks, task);
                }
                for cell in share {
                    *seen.entry(&cell.id).or_default() += 1;
                }
            }
            assert_eq!(seen.len(), plan.cells.len(), "{tasks} tasks");
            assert!(seen.values().all(|&n| n == 1), "{tasks} tasks");
        }
    }

    #[test]
    fn the_share_defaults_from_the_scheduler() {
        let share =
            |task, tasks, env: &[(&str, &str)]| TaskShare::from_vars(task, tasks, vars(env));
        assert_eq!(share(None, None, &[]).unwrap(), TaskShare { task: 0, tasks: 1 });
        let slurm = [
            ("SLURM_ARRAY_TASK_ID", "5"),
            ("SLURM_ARRAY_TASK_COUNT", "4"),
            ("SLURM_ARRAY_TASK_MIN", "2"),
        ];
        assert_eq!(share(None, None, &slurm).unwrap(), TaskShare { task: 3, tasks: 4 });
        assert_eq!(share(Some(1), Some(2), &slurm).unwrap(), TaskShare { task: 1, tasks: 2 });
        let k8s = [("JOB_COMPLETION_INDEX", "2")];
        assert_eq!(share(None, Some(3), &k8s).unwrap(), TaskShare { task: 2, tasks: 3 });
        let error = share(None, None, &k8s).unwrap_err().to_string();
        assert!(error.contains("--tasks"), "{error}");
        assert!(share(Some(3), Some(3), &[]).unwrap_err().to_string().contains("task 3 of 3"));
        assert!(share(None, Some(3), &[]).is_err(), "--tasks alone would run one share silently");
        let bad = share(None, None, &[("SLURM_ARRAY_TASK_ID", "x")]).unwrap_err().to_string();
        assert!(bad.contains("$SLURM_ARRAY_TASK_ID=\"x\""), "{bad}");
    }

    #[test]
    fn planning_again_is_allowed_only_with_the_same_plan() {
        let dir = tempfile::tempdir().unwrap();
        let config = config("[0, 2]");
        let plan = Plan::new(&config, "pusht", tch::Device::Cpu).unwrap();
        plan.write(dir.path(), &config).unwrap();
        plan.write(dir.path(), &config).unwrap();
        let (read_config, read_plan) = Plan::read(dir.path()).unwrap();
        assert_eq!(read_plan, plan);
        assert_eq!(config_text(&read_config), config_text(&config));
        let other_config = self::config("[1]");
        let other = Plan::new(&other_config, "pusht", tch::Device::Cpu).unwrap();
        let error = other.write(dir.path(), &other_config).unwrap_err().to_string();
        assert!(error.contains("plan.jsonl: holds another plan"), "{error}");
        // A config edited after planning no longer matches the plan's hash.
        std::fs::write(dir.path().join(CONFIG_FILE), config_text(&other_config)).unwrap();
        let error = Plan::read(dir.path()).unwrap_err().to_string();
        assert!(error.contains("is not the config plan.jsonl was planned from"), "{error}");
    }
}
