//! What the process used: CPU time of all its threads and peak resident memory.

use std::time::Duration;

use super::results::SystemInfo;

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
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Starts a new peak-RSS measurement (writes 5 to /proc/self/clear_refs). Best effort: where
/// the kernel refuses, the peak covers the whole process lifetime.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The machine and software, for results measured with the step on `device`.
pub fn system_info(device: tch::Device) -> SystemInfo {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
        .map_or_else(|| std::env::consts::ARCH.to_string(), |(_, name)| name.trim().to_string());
    let memory_bytes = read("/proc/meminfo").lines().find_map(|l| {
        let kib: u64 =
            l.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kib * 1024)
    });
    let gpu = device.is_cuda().then(|| gpu_name().unwrap_or_else(|| "CUDA device".into()));
    let avcodec = ffmpeg_next::codec::version();
    SystemInfo {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        gpu,
        memory_bytes,
        os: format!("{} {}", std::env::consts::OS, read("/proc/sys/kernel/osrelease").trim()),
        feedbench: env!("CARGO_PKG_VERSION").to_string(),
        libtorch: LIBTORCH_VERSION.to_string(),
        libavcodec: format!("{}.{}.{}", avcodec >> 16, (avcodec >> 8) & 0xff, avcodec & 0xff),
    }
}

/// The libtorch that `tch` 0.24 links (the `torch==2.11.0` wheel).
pub const LIBTORCH_VERSION: &str = "2.11.0";

/// The first GPU's name as `nvidia-smi` reports it.
fn gpu_name() -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=name", "--format=csv,noheader"])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines().next().map(|l| l.trim().to_string()).filter(|l| !l.is_empty())
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
    }
}
