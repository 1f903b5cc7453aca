//! Tune's budgets as a user gives them and as the machine suggests them: a byte size in its
//! text form (`8GiB`, `500MB`), the cores this process may use (its scheduler's share), and
//! half the memory available (tf.data's AUTOTUNE takes as much).

use std::fmt;
use std::str::FromStr;

/// A number of bytes, written `8GiB`, `8GB`, `500MiB`, `123456` (bytes) and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || format!("{text:?}: expected a size such as 8GiB, 500MB or 1.5GB");
        let t = text.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kb" => 1e3,
            "m" | "mb" => 1e6,
            "g" | "gb" => 1e9,
            "t" | "tb" => 1e12,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            "gib" => 1024.0 * 1024.0 * 1024.0,
            "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => return Err(bad()),
        };
        let bytes = number * scale;
        if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(Self(bytes as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2} GB", self.0 as f64 / 1e9)
    }
}

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
    fn sizes_read_in_decimal_and_binary_units() {
        assert_eq!("8GiB".parse::<ByteSize>(), Ok(ByteSize(8 << 30)));
        assert_eq!("8 GB".parse::<ByteSize>(), Ok(ByteSize(8_000_000_000)));
        assert_eq!("1.5gb".parse::<ByteSize>(), Ok(ByteSize(1_500_000_000)));
        assert_eq!("500MiB".parse::<ByteSize>(), Ok(ByteSize(500 << 20)));
        assert_eq!("4096".parse::<ByteSize>(), Ok(ByteSize(4096)));
        for bad in ["", "GB", "8 parsecs", "-1GB", "0", "1e400"] {
            let e = bad.parse::<ByteSize>().unwrap_err();
            assert!(e.contains("expected a size"), "{bad}: {e}");
        }
    }

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
