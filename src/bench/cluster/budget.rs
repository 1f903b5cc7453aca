//! How many loader workers a task may run: the CPUs its affinity mask and its scheduler allow.

use std::fmt;

use super::error::ClusterError;
use crate::measure::system::allowed_cpus;

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
                cpus: self.cpus,
                budget: self.to_string(),
            }),
        }
    }
}

impl fmt::Display for CpuBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = if self.cpus == 1 { "" } else { "s" };
        write!(f, "{} CPU{plural} ({})", self.cpus, self.source)
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
