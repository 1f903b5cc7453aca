//! The driver process: feedbench's script (`python/feedbench_lerobot.py`, compiled into the
//! binary) run by the user's Python. It answers a JSON request with JSON lines on its stdout
//! ([`protocol`](super::protocol)); whatever LeRobot prints goes to its stderr, whose last
//! lines an error quotes.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use super::process::{Driver, Stopping};
use super::protocol::Request;
use crate::loader::pipeline::LoaderError;

/// The driver script and the modules it imports, as shipped in `python/`: (file name, text).
pub const DRIVER: [(&str, &str); 6] = [
    ("feedbench_lerobot.py", include_str!("../../../python/feedbench_lerobot.py")),
    (
        "feedbench_lerobot_protocol.py",
        include_str!("../../../python/feedbench_lerobot_protocol.py"),
    ),
    ("feedbench_lerobot_step.py", include_str!("../../../python/feedbench_lerobot_step.py")),
    ("feedbench_lerobot_measure.py", include_str!("../../../python/feedbench_lerobot_measure.py")),
    ("feedbench_lerobot_train.py", include_str!("../../../python/feedbench_lerobot_train.py")),
    (
        "feedbench_lerobot_train_step.py",
        include_str!("../../../python/feedbench_lerobot_train_step.py"),
    ),
];

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

/// The driver script on disk, its modules beside it: written once per content into the
/// temporary directory.
fn driver_path() -> Result<PathBuf, LoaderError> {
    let mut digest = Sha256::new();
    for (name, text) in DRIVER {
        digest.update(name.as_bytes());
        digest.update(text.as_bytes());
    }
    let hash: String = digest.finalize().iter().take(6).map(|b| format!("{b:02x}")).collect();
    let dir = std::env::temp_dir().join(format!("feedbench-lerobot-{hash}"));
    for (name, text) in DRIVER {
        let path = dir.join(name);
        if std::fs::read_to_string(&path).is_ok_and(|found| found == text) {
            continue;
        }
        let io = |e: std::io::Error| {
            LoaderError::Lerobot(format!("{}: cannot write the driver ({e})", path.display()))
        };
        std::fs::create_dir_all(&dir).map_err(io)?;
        crate::dataset::files::write_whole(&path, text.as_bytes()).map_err(io)?;
    }
    Ok(dir.join(DRIVER[0].0))
}

/// Runs the driver with `python` on `request`: its `ready` and `result` messages. A
/// lerobot-train run's requests go to the [session](super::session) that keeps the run built;
/// any other request gets a driver of its own, the request in a file beside the driver named
/// on its command line (a child that is no Python may exit before reading).
pub fn run_driver(python: &Path, request: &Request) -> Result<(Json, Json), LoaderError> {
    run_driver_until(python, request, None)
}

/// [`run_driver`], where `stop` (if any) hears each measured batch of a `load` as the driver
/// reports it (its `step` event) and ends the measurement once it says so: a stop file is
/// written, which the driver looks for before each batch.
pub fn run_driver_until(
    python: &Path,
    request: &Request,
    stop: Option<&mut dyn FnMut(&Json) -> bool>,
) -> Result<(Json, Json), LoaderError> {
    static REQUESTS: AtomicU64 = AtomicU64::new(0);
    let driver = driver_path()?;
    let number = REQUESTS.fetch_add(1, Ordering::Relaxed);
    let name = format!("request-{}-{number}", std::process::id());
    let request_file = driver.with_file_name(format!("{name}.json"));
    let stop_file = driver.with_file_name(format!("{name}.stop"));
    let mut request = request.clone();
    if let (Some(load), Some(_)) = (request.load.as_mut(), stop.as_ref()) {
        load.stop_file = Some(stop_file.clone());
    }
    let mut stopping = stop.map(|hear| Stopping::new(hear, &stop_file));
    let answer = match request.run() {
        Some(run) => super::session::ask(python, &driver, run, &request, stopping.as_mut()),
        None => {
            let text = serde_json::to_vec(&request).expect("a request serialises");
            crate::dataset::files::write_whole(&request_file, &text).map_err(|e| {
                LoaderError::Lerobot(format!("{}: cannot write ({e})", request_file.display()))
            })?;
            let answer = once(python, &driver, &request_file, stopping.as_mut());
            let _ = std::fs::remove_file(&request_file);
            answer
        }
    };
    let _ = std::fs::remove_file(&stop_file);
    answer
}

/// A driver of its own for the request in `request_file`.
fn once(
    python: &Path,
    driver: &Path,
    request_file: &Path,
    stopping: Option<&mut Stopping<'_>>,
) -> Result<(Json, Json), LoaderError> {
    let argument = request_file.to_string_lossy();
    let mut driver = Driver::start(python, driver, &argument, Stdio::null())?;
    let said = driver.hear(stopping, true)?;
    driver.judge(said)
}
