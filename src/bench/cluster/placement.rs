//! Where a result was measured, beyond the machine's make: the host, the CPUs the process may
//! use and the scheduler's job; and how many loader workers those CPUs allow.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::ClusterError;

/// The scheduler's variables a result keeps: the job, the array task, requeues, the CPUs and
/// GPUs granted, and the ranks of a multi-process run.
const SCHEDULER_VARIABLES: [&str; 13] = [
    "SLURM_JOB_ID",
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_RESTART_COUNT",
    "SLURM_JOB_NODELIST",
    "SLURM_CPUS_PER_TASK",
    "SLURM_JOB_GPUS",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "CUDA_VISIBLE_DEVICES",
    "JOB_COMPLETION_INDEX",
    "RANK",
];

/// The host, the CPUs and the scheduler's job a result was measured in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The host's name.
    pub host: String,
    /// The CPUs this process may run on (its affinity mask).
    pub cpus: Vec<usize>,
    /// The scheduler's variables that were set (`SLURM_JOB_ID`, `SLURM_ARRAY_TASK_ID`, …).
    pub scheduler: BTreeMap<String, String>,
}

impl Placement {
    /// This process's placement.
    pub fn here() -> Self {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default();
        let scheduler = SCHEDULER_VARIABLES
            .iter()
            .filter_map(|name| Some((name.to_string(), std::env::var(name).ok()?)))
            .collect();
        Self { host, cpus: allowed_cpus(), scheduler }
    }
}

/// The CPUs this process may run on, from its affinity mask (every CPU the machine reports
/// where the mask cannot be read).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: `set` is a plain bit set that sched_getaffinity fills; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            return (0..libc::CPU_SETSIZE as usize)
                .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
                .collect();
        }
    }
    (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
}

/// The CPUs a task may use, and what says so: the loader workers it may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuBudget {
    /// How many.
    pub cpus: usize,
    /// What limits them: the affinity mask, or `SLURM_CPUS_PER_TASK`.
    pub source: &'static str,
}

impl CpuBudget {
    /// This process's budget: its affinity mask, lowered by `$SLURM_CPUS_PER_TASK` where set.
    pub fn here() -> Result<Self, ClusterError> {
        Self::new(allowed_cpus().len(), std::env::var("SLURM_CPUS_PER_TASK").ok().as_deref())
    }

    /// The budget of `affinity` CPUs and Slurm's `cpus_per_task`, whichever is smaller.
    pub fn new(affinity: usize, cpus_per_task: Option<&str>) -> Result<Self, ClusterError> {
        let mask = Self { cpus: affinity, source: "its affinity mask" };
        let Some(text) = cpus_per_task else { return Ok(mask) };
        let slurm: usize =
            text.trim().parse().ok().filter(|&n| n > 0).ok_or_else(|| ClusterError::Setting {
                name: format!("$SLURM_CPUS_PER_TASK={text:?}"),
                what: "expected a number of CPUs, at least 1".into(),
            })?;
        Ok(if slurm < affinity {
            Self { cpus: slurm, source: "$SLURM_CPUS_PER_TASK" }
        } else {
            mask
        })
    }

    /// Refuses `workers` counts above the budget: one error for all of them.
    pub fn check(&self, workers: impl IntoIterator<Item = usize>) -> Result<(), ClusterError> {
        let over: Vec<usize> = workers.into_iter().filter(|&w| w > self.cpus).collect();
        match over.iter().max() {
            None => Ok(()),
            Some(&most) => Err(ClusterError::TooManyWorkers {
                cells: over.len(),
                workers: most,
                budget: self.clone(),
            }),
        }
    }
}

impl fmt::Display for CpuBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} CPUs ({})", self.cpus, self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_smaller_of_the_mask_and_slurm() {
        assert_eq!(CpuBudget::new(8, None).unwrap().cpus, 8);
        let slurm = CpuBudget::new(8, Some("4")).unwrap();
        assert_eq!((slurm.cpus, slurm.source), (4, "$SLURM_CPUS_PER_TASK"));
        assert_eq!(CpuBudget::new(2, Some("16")).unwrap().source, "its affinity mask");
        let bad = CpuBudget::new(8, Some("four")).unwrap_err().to_string();
        assert!(bad.contains("$SLURM_CPUS_PER_TASK=\"four\": expected a number"), "{bad}");
        assert!(CpuBudget::new(8, Some("0")).is_err());
    }

    #[test]
    fn worker_counts_above_the_budget_are_refused_with_the_figure() {
        let budget = CpuBudget::new(8, Some("4")).unwrap();
        budget.check([0, 1, 4]).unwrap();
        let error = budget.check([2, 6, 8, 8]).unwrap_err().to_string();
        assert!(error.contains("3 of this task's cells ask for up to 8 loader workers"), "{error}");
        assert!(error.contains("4 CPUs ($SLURM_CPUS_PER_TASK)"), "{error}");
    }
}
