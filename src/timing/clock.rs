//! The clocks and gauges the timing reads: this thread's CPU time, the whole process's CPU
//! time, its peak resident memory and the memory still available.

use std::time::Duration;

/// The CPU time the calling thread has used so far.
pub fn thread_cpu_time() -> Duration {
    let now = clock_time(libc::CLOCK_THREAD_CPUTIME_ID);
    debug_assert!(now.is_some(), "CLOCK_THREAD_CPUTIME_ID is always available on Linux");
    now.unwrap_or_default()
}

/// The time of `clock`; None where the kernel refuses it (another thread's clock once that
/// thread is gone).
pub(super) fn clock_time(clock: libc::clockid_t) -> Option<Duration> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; an invalid clock id
    // is an error return, not undefined behaviour.
    let status = unsafe { libc::clock_gettime(clock, &mut now) };
    (status == 0).then(|| Duration::new(now.tv_sec as u64, now.tv_nsec as u32))
}

/// User + system CPU time of the whole process (every thread) so far.
pub fn process_cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the rusage it is given; RUSAGE_SELF is always valid.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Peak resident memory of the process since start or the last [`reset_peak_rss`], bytes
/// (`VmHWM` of /proc/self/status); None where the kernel does not say.
pub fn peak_rss_bytes() -> Option<u64> {
    kilobytes_line("/proc/self/status", "VmHWM:")
}

/// The process's proportional set size now (`Pss` of /proc/self/smaps_rollup: a page shared
/// with other processes counted in part) and its anonymous memory (`Anonymous`: what no other
/// process's exit changes, where a leak shows), bytes; None where the kernel does not say.
pub fn pss_and_anonymous_bytes() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
    };
    Some((field("Pss:")?, field("Anonymous:").unwrap_or(0)))
}

/// The value of the line of `file` that starts with `name`, in kB, as bytes.
fn kilobytes_line(file: &str, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Memory the kernel says is available for new allocations without swapping, bytes
/// (`MemAvailable` of /proc/meminfo); None where it does not say.
pub fn available_memory_bytes() -> Option<u64> {
    kilobytes_line("/proc/meminfo", "MemAvailable:")
}

/// Starts a new peak-RSS measurement (writes 5 to /proc/self/clear_refs). Best effort: where
/// the kernel refuses, the peak covers the whole process lifetime.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_cpu_and_memory() {
        let before = process_cpu_time();
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(20) {
            std::hint::black_box(start.elapsed());
        }
        assert!(process_cpu_time() > before);
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let peak = peak_rss_bytes().expect("Linux reports VmHWM");
        assert!(peak >= 64 << 20, "64 MiB resident, peak {peak}");
        let available = available_memory_bytes().expect("Linux reports MemAvailable");
        assert!(available > 0 && available < 1 << 50, "{available}");
    }
}
