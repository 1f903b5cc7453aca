//! The driver process: feedbench's script (`python/feedbench_lerobot.py`, compiled into the
//! binary) run by the user's Python. It answers one JSON request with JSON lines on its stdout
//! (`ready`, then `result` or `error`); whatever LeRobot prints goes to its stderr, whose last
//! lines an error quotes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::loader::pipeline::LoaderError;

/// The driver script, as shipped in `python/`.
pub const DRIVER: &str = include_str!("../../../python/feedbench_lerobot.py");

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

/// The driver script on disk: written once per content into the temporary directory.
fn driver_path() -> Result<PathBuf, LoaderError> {
    let hash: String =
        Sha256::digest(DRIVER.as_bytes()).iter().take(6).map(|b| format!("{b:02x}")).collect();
    let dir = std::env::temp_dir().join(format!("feedbench-lerobot-{hash}"));
    let path = dir.join("feedbench_lerobot.py");
    if std::fs::read_to_string(&path).is_ok_and(|text| text == DRIVER) {
        return Ok(path);
    }
    let io = |e: std::io::Error| {
        LoaderError::Lerobot(format!("{}: cannot write the driver ({e})", path.display()))
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    crate::dataset::files::write_whole(&path, DRIVER.as_bytes()).map_err(io)?;
    Ok(path)
}

/// Runs the driver with `python` on `request`: its `ready` and `result` messages. The request
/// goes in a file beside the driver, named on its command line, not down a pipe: feedbench
/// dies by SIGPIPE where a pipe it writes to is closed (`feedbench … | head`), and a child that
/// is no Python may exit before reading.
pub fn run_driver(python: &Path, request: &Json) -> Result<(Json, Json), LoaderError> {
    static REQUESTS: AtomicU64 = AtomicU64::new(0);
    let driver = driver_path()?;
    let number = REQUESTS.fetch_add(1, Ordering::Relaxed);
    let request_file =
        driver.with_file_name(format!("request-{}-{number}.json", std::process::id()));
    crate::dataset::files::write_whole(&request_file, request.to_string().as_bytes()).map_err(
        |e| LoaderError::Lerobot(format!("{}: cannot write ({e})", request_file.display())),
    )?;
    let answer = answer(python, &driver, &request_file);
    let _ = std::fs::remove_file(&request_file);
    answer
}

/// The driver's answer to the request in `request_file`.
fn answer(python: &Path, driver: &Path, request_file: &Path) -> Result<(Json, Json), LoaderError> {
    let mut child = Command::new(python)
        .arg(driver)
        .arg(request_file)
        // Local datasets only: nothing is fetched from the Hub.
        .env("HF_HUB_OFFLINE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            LoaderError::Lerobot(format!(
                "--python {}: cannot run it ({e}); point --python (or FEEDBENCH_PYTHON) at the \
                 Python of the environment with LeRobot",
                python.display()
            ))
        })?;
    let stderr = child.stderr.take().expect("piped");
    let stderr_tail = std::thread::spawn(move || {
        let mut tail: Vec<String> = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            tail.push(line);
            if tail.len() > 20 {
                tail.remove(0);
            }
        }
        tail
    });
    let (mut ready, mut result, mut error) = (None, None, None);
    for line in BufReader::new(child.stdout.take().expect("piped")).lines().map_while(Result::ok) {
        let Ok(message) = serde_json::from_str::<Json>(&line) else { continue };
        match message.get("event").and_then(Json::as_str) {
            Some("ready") => ready = Some(message),
            Some("result") => result = Some(message),
            Some("error") => error = Some(message),
            _ => {}
        }
    }
    let status =
        child.wait().map_err(|e| LoaderError::Lerobot(format!("{}: {e}", python.display())))?;
    let tail = stderr_tail.join().unwrap_or_default();
    if let Some(error) = error {
        let message = error.get("message").and_then(Json::as_str).unwrap_or("no message");
        let kind = error.get("kind").and_then(Json::as_str).unwrap_or("lerobot");
        return Err(LoaderError::Lerobot(match kind {
            "lerobot" => format!("LeRobot's loader failed: {}", one_paragraph(message)),
            _ => message.to_string(),
        }));
    }
    match (ready, result) {
        (Some(ready), Some(result)) if status.success() => Ok((ready, result)),
        _ => Err(LoaderError::Lerobot(format!(
            "--python {}: did not answer as feedbench's LeRobot driver ({status}){}",
            python.display(),
            if tail.is_empty() { String::new() } else { format!(": {}", tail.join(" | ")) }
        ))),
    }
}

/// A multi-line message as one line: a traceback (a worker's failure, as PyTorch re-raises it)
/// by its first line and its last, the error itself; any other message whole.
fn one_paragraph(message: &str) -> String {
    let lines: Vec<&str> = message.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    match lines.as_slice() {
        [first, .., last] if message.contains("Traceback (most recent call last)") => {
            format!("{first} … {last}")
        }
        _ => lines.join(" "),
    }
}
