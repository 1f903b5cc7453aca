//! Retired instructions, counted by the CPU (`perf_event_open`): near-deterministic where time
//! is not, so a guard on a shared machine can hold them to a tight tolerance. Many VMs expose no
//! hardware counters and some kernels forbid them (`perf_event_paranoid`); then
//! [`InstructionCounter::start`] says why, and the caller goes on with CPU time.

use perf_event::events::Hardware;
use perf_event::{Builder, Counter};

/// Counts the user-space instructions of the calling thread and of every thread it starts
/// afterwards (a loader's workers), until [`InstructionCounter::finish`].
pub struct InstructionCounter {
    counter: Counter,
}

impl InstructionCounter {
    /// Starts counting, or says why the kernel will not.
    pub fn start() -> Result<Self, String> {
        let mut counter = Builder::new(Hardware::INSTRUCTIONS)
            .inherit(true)
            .exclude_kernel(true)
            .exclude_hv(true)
            .build()
            .map_err(|e| unavailable(&e))?;
        counter.enable().map_err(|e| unavailable(&e))?;
        Ok(Self { counter })
    }

    /// The instructions counted. The threads started since [`Self::start`] count only once
    /// they have exited: stop them first.
    pub fn finish(mut self) -> Result<u64, String> {
        self.counter.disable().map_err(|e| unavailable(&e))?;
        self.counter.read().map_err(|e| unavailable(&e))
    }
}

/// Why instructions cannot be counted here, in words.
fn unavailable(error: &std::io::Error) -> String {
    let why = match error.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
            "this CPU exposes no instruction counter (common in VMs without a virtual PMU)"
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "the kernel forbids it (see /proc/sys/kernel/perf_event_paranoid)"
        }
        _ => "perf_event_open failed",
    };
    format!("instruction counts unavailable: {why} ({error})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_counted_or_the_reason_is_given() {
        match InstructionCounter::start() {
            Ok(counter) => {
                let work: u64 = (0..100_000u64).map(std::hint::black_box).sum();
                assert_eq!(work, 4_999_950_000);
                let counted = counter.finish().unwrap();
                assert!(counted > 100_000, "{counted} instructions for 100 000 additions");
            }
            Err(why) => assert!(why.starts_with("instruction counts unavailable: "), "{why}"),
        }
    }
}
