//! Tune's budgets as the machine suggests them: the cores this process may use (its scheduler's
//! share), and half the memory available (tf.data's AUTOTUNE takes as much).

/// Where a budget came from, for the answer and its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The flag.
    Flag,
    /// An environment variable (`SLURM_CPUS_PER_TASK`).
    Variable(&'static str),
    /// What this process may use (its CPU affinity, the memory available).
    Machine,
}

/// The cores a tune may use when not told: `SLURM_CPUS_PER_TASK` inside a Slurm job, else the
/// cores this process may run on (its affinity and quota). A variable that is not a count is
/// an error naming it.
pub fn default_cpus(lookup: impl Fn(&str) -> Option<String>) -> Result<(usize, Source), String> {
    const SLURM: &str = "SLURM_CPUS_PER_TASK";
    if let Some(value) = lookup(SLURM) {
        return match value.trim().parse::<usize>() {
            Ok(n) if n >= 1 => Ok((n, Source::Variable(SLURM))),
            _ => Err(format!("${SLURM} is {value:?}: expected a count of at least 1")),
        };
    }
    let here = std::thread::available_parallelism().map_or(1, |n| n.get());
    Ok((here, Source::Machine))
}

/// Half the memory available now, or None where the kernel does not say.
pub fn default_memory() -> Option<u64> {
    crate::timing::available_memory_bytes().map(|b| b / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_names_the_cores_of_its_job() {
        let slurm = |v: &'static str| {
            move |name: &str| (name == "SLURM_CPUS_PER_TASK").then(|| v.to_string())
        };
        assert_eq!(default_cpus(slurm("6")), Ok((6, Source::Variable("SLURM_CPUS_PER_TASK"))));
        let bad = default_cpus(slurm("0")).unwrap_err();
        assert!(bad.contains("$SLURM_CPUS_PER_TASK is \"0\""), "{bad}");
        let (n, source) = default_cpus(|_| None).unwrap();
        assert!(n >= 1 && source == Source::Machine);
    }
}
