//! The driver process: feedbench's package (`src/loader/lerobot/feedbench_driver/`, compiled into
//! the binary) run by the user's Python. It answers a JSON request with JSON lines on its stdout
//! ([`protocol`](super::protocol)); whatever LeRobot prints goes to its stderr, whose last
//! lines an error quotes.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use super::process::{Driver, Stopping};
use crate::loader::pipeline::LoaderError;

/// The driver package, `feedbench_driver/` beside this file: (file name, text). Written
/// into a directory of its own and run as `PYTHON DIR/feedbench_driver` (its `__main__.py`).
pub const DRIVER: [(&str, &str); 12] = [
    ("__main__.py", include_str!("feedbench_driver/__main__.py")),
    ("protocol.py", include_str!("feedbench_driver/protocol.py")),
    ("readings.py", include_str!("feedbench_driver/readings.py")),
    ("plain.py", include_str!("feedbench_driver/plain.py")),
    ("startup.py", include_str!("feedbench_driver/startup.py")),
    ("digest.py", include_str!("feedbench_driver/digest.py")),
    ("policy_step.py", include_str!("feedbench_driver/policy_step.py")),
    ("run_config.py", include_str!("feedbench_driver/run_config.py")),
    ("train_run.py", include_str!("feedbench_driver/train_run.py")),
    ("train_step.py", include_str!("feedbench_driver/train_step.py")),
    ("train_requests.py", include_str!("feedbench_driver/train_requests.py")),
    ("__init__.py", include_str!("feedbench_driver/__init__.py")),
];

/// The package's name: the directory `python DIR/feedbench_driver` runs.
pub const DRIVER_PACKAGE: &str = "feedbench_driver";

/// A libtorch device as PyTorch names it.
pub fn torch_device(device: tch::Device) -> String {
    match device {
        tch::Device::Cpu => "cpu".into(),
        tch::Device::Cuda(index) => format!("cuda:{index}"),
        tch::Device::Mps => "mps".into(),
        tch::Device::Vulkan => "vulkan".into(),
    }
}

/// A message of the driver as `T`, or an error naming the interpreter.
pub fn parse<T: serde::de::DeserializeOwned>(python: &Path, value: Json) -> Result<T, LoaderError> {
    serde_json::from_value(value).map_err(|e| {
        LoaderError::Lerobot(format!(
            "{}: the driver's answer is not what this feedbench expects ({e})",
            python.display()
        ))
    })
}

/// The driver package on disk: written once per content into the temporary directory; the
/// package's directory, which Python runs.
pub(super) fn driver_path() -> Result<PathBuf, LoaderError> {
    let mut digest = Sha256::new();
    for (name, text) in DRIVER {
        digest.update(name.as_bytes());
        digest.update(text.as_bytes());
    }
    let hash: String = digest.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect();
    let package =
        std::env::temp_dir().join(format!("feedbench-lerobot-{hash}")).join(DRIVER_PACKAGE);
    for (name, text) in DRIVER {
        let path = package.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|found| found == text) {
            continue;
        }
        let io = |e: std::io::Error| {
            LoaderError::Lerobot(format!("{}: cannot write the driver ({e})", path.display()))
        };
        std::fs::create_dir_all(&package).map_err(io)?;
        crate::dataset::files::write_whole(&path, text.as_bytes()).map_err(io)?;
    }
    Ok(package)
}

/// A driver of its own for the request in `request_file`: its `ready` and `result`, or the
/// error naming what failed.
pub(super) fn once(
    python: &Path,
    driver: &Path,
    request_file: &Path,
    stopping: Option<&mut Stopping<'_>>,
) -> Result<(Json, Json), LoaderError> {
    let argument = request_file.to_string_lossy();
    let mut driver = Driver::start(python, driver, &argument, Stdio::null(), &[])?;
    let said = driver.hear(stopping, true)?;
    driver.judge(said)
}
