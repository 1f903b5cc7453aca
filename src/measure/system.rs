//! The machine and software a result was measured with, and where on it: the host, the CPUs
//! and the scheduler's job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::loader::lerobot::LerobotVersions;

/// The machine and software a result was measured with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemInfo {
    /// CPU model name.
    pub cpu: String,
    /// CPU cores this process may use.
    pub cores: usize,
    /// GPU name, when the step ran on one.
    pub gpu: Option<String>,
    /// The GPU's driver version, when the step ran on one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_driver: Option<String>,
    /// Total memory, bytes.
    pub memory_bytes: Option<u64>,
    /// Operating system (kernel release).
    pub os: String,
    /// feedbench's version.
    pub feedbench: String,
    /// libtorch's version (`torch` wheel).
    pub libtorch: String,
    /// FFmpeg's libavcodec version.
    pub libavcodec: String,
    /// The AV1 decoder libavcodec decodes with, libdav1d, its version, where it is loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dav1d: Option<String>,
    /// LeRobot's version, with the torch and Python it ran on, where LeRobot read (its loader,
    /// a lerobot-train run): `0.6.1 (torch 2.11.0, Python 3.12.3)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lerobot: Option<String>,
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
    let gpu = device.is_cuda().then(|| gpu_query("name").unwrap_or_else(|| "CUDA device".into()));
    let gpu_driver = device.is_cuda().then(|| gpu_query("driver_version")).flatten();
    let avcodec = ffmpeg_next::codec::version();
    SystemInfo {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        gpu,
        gpu_driver,
        memory_bytes,
        os: format!("{} {}", std::env::consts::OS, read("/proc/sys/kernel/osrelease").trim()),
        feedbench: env!("CARGO_PKG_VERSION").to_string(),
        libtorch: LIBTORCH_VERSION.to_string(),
        libavcodec: format!("{}.{}.{}", avcodec >> 16, (avcodec >> 8) & 0xff, avcodec & 0xff),
        dav1d: dav1d_version(),
        lerobot: None,
    }
}

impl SystemInfo {
    /// This host with the LeRobot that read named (`versions`, where LeRobot read; unchanged
    /// where it did not).
    pub fn read_by(mut self, versions: Option<&LerobotVersions>) -> SystemInfo {
        if let Some(v) = versions {
            self.lerobot = Some(format!("{} (torch {}, Python {})", v.lerobot, v.torch, v.python));
        }
        self
    }

    /// Where `now` is another host than `self`: the machine's facts that differ (CPU, cores,
    /// memory, GPU and driver, kernel), each as `what then → now`.
    pub fn other_host(&self, now: &SystemInfo) -> Vec<String> {
        let gib =
            |bytes: Option<u64>| bytes.map_or("unknown".into(), |b| format!("{} GiB", b >> 30));
        let facts = [
            ("CPU", self.cpu.clone(), now.cpu.clone()),
            ("cores", self.cores.to_string(), now.cores.to_string()),
            ("memory", gib(self.memory_bytes), gib(now.memory_bytes)),
            ("GPU", or_none(&self.gpu), or_none(&now.gpu)),
            ("GPU driver", or_none(&self.gpu_driver), or_none(&now.gpu_driver)),
            ("kernel", self.os.clone(), now.os.clone()),
        ];
        differing(&facts)
    }

    /// Where `now` runs other software than `self` on the same host (feedbench, FFmpeg's
    /// libavcodec and libdav1d, libtorch, LeRobot), each as `what then → now`: the history of a guard follows such
    /// changes, it does not refuse them.
    pub fn other_software(&self, now: &SystemInfo) -> Vec<String> {
        let facts = [
            ("feedbench", self.feedbench.clone(), now.feedbench.clone()),
            ("libavcodec", self.libavcodec.clone(), now.libavcodec.clone()),
            ("dav1d", or_none(&self.dav1d), or_none(&now.dav1d)),
            ("libtorch", self.libtorch.clone(), now.libtorch.clone()),
            ("lerobot", or_none(&self.lerobot), or_none(&now.lerobot)),
        ];
        differing(&facts)
    }
}

/// An optional fact's value, or `none`.
fn or_none(fact: &Option<String>) -> String {
    fact.clone().unwrap_or_else(|| "none".into())
}

/// The facts whose two values differ, each as `what then → now`.
fn differing(facts: &[(&str, String, String)]) -> Vec<String> {
    facts
        .iter()
        .filter(|(_, then, now)| then != now)
        .map(|(what, then, now)| format!("{what} {then:?} then → {now:?} now"))
        .collect()
}

/// The version of the libdav1d this process has loaded (FFmpeg's libavcodec links it), as
/// `dav1d_version()` says; None where none is loaded.
fn dav1d_version() -> Option<String> {
    let _ = ffmpeg_next::init();
    for name in [c"libdav1d.so.7", c"libdav1d.so.6", c"libdav1d.so"] {
        // SAFETY: RTLD_NOLOAD only finds a library already loaded (nothing is run); the
        // symbol, where found, is dav1d's `const char *dav1d_version(void)`, which returns a
        // static string; the handle is closed after the string is copied.
        unsafe {
            let handle = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD);
            if handle.is_null() {
                continue;
            }
            let symbol = libc::dlsym(handle, c"dav1d_version".as_ptr());
            let version = (!symbol.is_null()).then(|| {
                let version: extern "C" fn() -> *const libc::c_char = std::mem::transmute(symbol);
                std::ffi::CStr::from_ptr(version()).to_string_lossy().into_owned()
            });
            libc::dlclose(handle);
            if version.is_some() {
                return version;
            }
        }
    }
    None
}

/// The libtorch that `tch` 0.24 links (the `torch==2.11.0` wheel).
pub const LIBTORCH_VERSION: &str = "2.11.0";

/// A field of the first GPU as `nvidia-smi --query-gpu` reports it (`name`, `driver_version`).
fn gpu_query(field: &str) -> Option<String> {
    let out = std::process::Command::new("nvidia-smi")
        .args([&format!("--query-gpu={field}"), "--format=csv,noheader"])
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines().next().map(|l| l.trim().to_string()).filter(|l| !l.is_empty())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_names_the_dav1d_its_ffmpeg_decodes_av1_with() {
        // Debian's FFmpeg decodes AV1 with libdav1d, which the guard's reference clip needs.
        let host = system_info(tch::Device::Cpu);
        let dav1d = host.dav1d.clone().expect("libdav1d is loaded with libavcodec");
        assert!(dav1d.starts_with(|c: char| c.is_ascii_digit()), "{dav1d}");
        let mut other = host.clone();
        other.dav1d = Some("0.0.1".into());
        assert_eq!(host.other_software(&other), [format!("dav1d {dav1d:?} then → \"0.0.1\" now")]);
        assert!(host.other_host(&other).is_empty(), "software is no other host");
    }
}
