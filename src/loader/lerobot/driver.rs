//! The driver process: feedbench's script (`python/feedbench_lerobot.py`, compiled into the
//! binary) run by the user's Python. It answers a JSON request with JSON lines on its stdout
//! ([`protocol`](super::protocol)); whatever LeRobot prints goes to its stderr, whose last
//! lines an error quotes.

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use super::protocol::{ErrorKind, Event, Request};
use crate::dataset::setting::{Refusal, Setting};
use crate::loader::pipeline::LoaderError;

/// The driver script and the modules it imports, as shipped in `python/`: (file name, text).
pub const DRIVER: [(&str, &str); 5] = [
    ("feedbench_lerobot.py", include_str!("../../../python/feedbench_lerobot.py")),
    (
        "feedbench_lerobot_protocol.py",
        include_str!("../../../python/feedbench_lerobot_protocol.py"),
    ),
    ("feedbench_lerobot_step.py", include_str!("../../../python/feedbench_lerobot_step.py")),
    ("feedbench_lerobot_measure.py", include_str!("../../../python/feedbench_lerobot_measure.py")),
    ("feedbench_lerobot_train.py", include_str!("../../../python/feedbench_lerobot_train.py")),
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
    let mut stopping = stop.map(|hear| Stopping { hear, file: &stop_file, written: false });
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

/// What ends a driver's measurement early: who hears its steps, and the file it looks for.
pub(super) struct Stopping<'a> {
    hear: &'a mut dyn FnMut(&Json) -> bool,
    file: &'a Path,
    written: bool,
}

impl Stopping<'_> {
    /// Hears a `step` event; writes the stop file the first time `hear` says to stop.
    fn step(&mut self, message: &Json) {
        if !self.written && (self.hear)(message) {
            // A file that cannot be written only lets the driver run every step.
            self.written = std::fs::write(self.file, b"").is_ok();
        }
    }
}

/// How long the driver may go without a line on its stdout or stderr before it is taken for
/// hung and stopped: `$FEEDBENCH_DRIVER_TIMEOUT_S` seconds, else 600. The driver says it is
/// alive at least every 30 s while it loads or steps, so only a driver that stopped (a hung
/// DataLoader, an interpreter that never starts the script) is ever this quiet.
pub fn silence_bound() -> Result<Duration, LoaderError> {
    const VAR: &str = "FEEDBENCH_DRIVER_TIMEOUT_S";
    let Some(text) = std::env::var_os(VAR) else { return Ok(Duration::from_secs(600)) };
    text.to_str()
        .and_then(|t| t.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            LoaderError::Lerobot(format!(
                "${VAR} is {text:?}: expected seconds, a positive number (default 600)"
            ))
        })
}

/// What the driver's reader threads hear.
enum Heard {
    /// A line of its stdout.
    Out(String),
    /// A line of its stderr.
    Err(String),
    /// Its stdout closed (it exited, or closed it).
    OutClosed,
    /// Its stderr closed.
    ErrClosed,
}

/// Reads `stream` line by line into `to`, then says it closed.
fn listen(
    stream: impl std::io::Read + Send + 'static,
    to: mpsc::Sender<Heard>,
    line: fn(String) -> Heard,
    closed: Heard,
) {
    std::thread::spawn(move || {
        for text in BufReader::new(stream).lines().map_while(Result::ok) {
            if to.send(line(text)).is_err() {
                return;
            }
        }
        let _ = to.send(closed);
    });
}

/// A driver process and what is heard of it: its stdout and stderr read by threads of their
/// own, the last lines of its stderr kept for an error to quote. It runs in a process group
/// of its own (with its DataLoader's worker processes), stopped whole when it goes silent
/// for longer than [`silence_bound`].
pub(super) struct Driver {
    python: PathBuf,
    child: Child,
    heard: mpsc::Receiver<Heard>,
    tail: Vec<String>,
    open: usize,
}

/// What the driver said to one request.
#[derive(Default)]
pub(super) struct Said {
    /// Its `ready`.
    pub(super) ready: Option<Json>,
    /// Its `result`.
    pub(super) result: Option<Json>,
    /// Its `error`.
    pub(super) error: Option<Json>,
}

impl Said {
    /// The value `ready` gave under `key`, if any.
    pub(super) fn ready(&self, key: &str) -> Option<&Json> {
        self.ready.as_ref().and_then(|r| r.get(key))
    }
}

impl Driver {
    /// Starts the driver script with `python`, `argument` on its command line and `stdin`.
    pub(super) fn start(
        python: &Path,
        driver: &Path,
        argument: &str,
        stdin: Stdio,
    ) -> Result<Self, LoaderError> {
        let mut child = Command::new(python)
            .arg(driver)
            .arg(argument)
            // Local datasets only: nothing is fetched from the Hub.
            .env("HF_HUB_OFFLINE", "1")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| {
                let python = python.display().to_string();
                LoaderError::Refused(Refusal::new(move |name| {
                    let setting = name(Setting::Python);
                    format!(
                        "{setting} {python}: cannot run it ({e}); point {setting} (or \
                         FEEDBENCH_PYTHON) at the Python of the environment with LeRobot"
                    )
                }))
            })?;
        let (to, heard) = mpsc::channel();
        listen(child.stdout.take().expect("piped"), to.clone(), Heard::Out, Heard::OutClosed);
        listen(child.stderr.take().expect("piped"), to, Heard::Err, Heard::ErrClosed);
        Ok(Self { python: python.to_path_buf(), child, heard, tail: Vec::new(), open: 2 })
    }

    /// Hears the driver's answer to one request: until its `result` or `error` where
    /// `to_the_end` is false (a session, which goes on), else until its output closes. A
    /// driver silent for longer than [`silence_bound`] is stopped, with its workers.
    pub(super) fn hear(
        &mut self,
        mut stopping: Option<&mut Stopping<'_>>,
        to_the_end: bool,
    ) -> Result<Said, LoaderError> {
        let silence = silence_bound()?;
        let mut said = Said::default();
        self.tail.clear();
        let mut heard_at = Instant::now();
        while self.open > 0 {
            if !to_the_end && (said.result.is_some() || said.error.is_some()) {
                break;
            }
            let next = self.heard.recv_timeout(silence.min(Duration::from_millis(500)));
            if next.is_ok() {
                heard_at = Instant::now();
            }
            match next {
                Ok(Heard::Out(line)) => {
                    let Ok(message) = serde_json::from_str::<Json>(&line) else { continue };
                    match Event::of(&message) {
                        Some(Event::Ready) => said.ready = Some(message),
                        Some(Event::Result) => said.result = Some(message),
                        Some(Event::Error) => said.error = Some(message),
                        Some(Event::Step) => {
                            if let Some(stopping) = stopping.as_mut() {
                                stopping.step(&message);
                            }
                        }
                        Some(Event::Alive) | None => {}
                    }
                }
                Ok(Heard::Err(line)) => {
                    self.tail.push(line);
                    if self.tail.len() > 20 {
                        self.tail.remove(0);
                    }
                }
                Ok(Heard::OutClosed | Heard::ErrClosed) => self.open -= 1,
                // The driver is gone and only its orphaned workers keep a stream open.
                Err(_) if self.child.try_wait().is_ok_and(|status| status.is_some()) => {
                    self.stop();
                    break;
                }
                Err(_) if heard_at.elapsed() < silence => {}
                Err(_) => {
                    self.stop();
                    return Err(LoaderError::Lerobot(format!(
                        "the LeRobot driver ({}) said nothing for {} s {}, and was stopped (with \
                         its workers); the bound is $FEEDBENCH_DRIVER_TIMEOUT_S{}",
                        self.python.display(),
                        silence.as_secs_f64(),
                        if said.ready.is_some() {
                            "while it loaded"
                        } else {
                            "before it was ready"
                        },
                        quoted(&self.tail)
                    )));
                }
            }
        }
        Ok(said)
    }

    /// The answer to a request the driver said `said` to, once it has ended (exited, or been
    /// stopped): its `ready` and `result`, or the error that names what failed.
    pub(super) fn judge(mut self, said: Said) -> Result<(Json, Json), LoaderError> {
        let status = wait_within(&mut self.child, silence_bound()?)
            .map_err(|e| LoaderError::Lerobot(format!("{}: {e}", self.python.display())))?;
        let (python, tail) = (self.python.display().to_string(), quoted(&self.tail));
        if let Some(error) = said.error {
            return Err(driver_error(&error));
        }
        if let Some(signal) = status.signal() {
            return Err(LoaderError::Lerobot(format!(
                "the LeRobot driver ({python}) was killed by signal {signal} ({}) {}{}{tail}",
                signal_name(signal),
                if said.ready.is_some() { "while it loaded" } else { "before it was ready" },
                if signal == libc::SIGKILL { " (out of memory? see dmesg)" } else { "" },
            )));
        }
        match (said.ready, said.result) {
            (Some(ready), Some(result)) if status.success() => Ok((ready, result)),
            _ => Err(LoaderError::Refused(Refusal::new(move |name| {
                format!(
                    "{} {python}: did not answer as feedbench's LeRobot driver ({status}){tail}",
                    name(Setting::Python)
                )
            }))),
        }
    }

    /// Kills the driver's process group (the driver and its workers) and reaps the driver.
    pub(super) fn stop(&mut self) {
        // SAFETY: signals the process group this process made for its own child, not yet
        // reaped (its workers keep the group, and so its id, alive).
        unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.child.wait();
    }

    /// Whether the driver has exited.
    pub(super) fn exited(&mut self) -> bool {
        self.child.try_wait().is_ok_and(|status| status.is_some())
    }
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

/// The error a driver's `error` message says, worded for people.
fn driver_error(error: &Json) -> LoaderError {
    let message = error.get("message").and_then(Json::as_str).unwrap_or("no message");
    match ErrorKind::of(error) {
        ErrorKind::Lerobot => {
            LoaderError::Lerobot(format!("LeRobot's loader failed: {}", one_paragraph(message)))
        }
        // No LeRobot (or torch) in this Python: the setting that names it, as the front end
        // spells it (`--python`, `loader.python`).
        ErrorKind::Environment => {
            let message = message.to_string();
            LoaderError::Refused(Refusal::new(move |name| {
                format!(
                    "{message}: point {} at the environment you train with, or install \
                     LeRobot there (pip install 'lerobot[dataset]')",
                    name(Setting::Python)
                )
            }))
        }
        ErrorKind::Version | ErrorKind::Knob | ErrorKind::Arguments | ErrorKind::Reader => {
            LoaderError::Lerobot(message.to_string())
        }
    }
}

/// The last lines of the driver's stderr, after a colon, or nothing.
fn quoted(tail: &[String]) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!(": {}", tail.join(" | "))
    }
}

/// The usual name of `signal`.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        _ => "a signal",
    }
}

/// The driver's exit status, once its output closed: it is stopped if it has not exited
/// within `bound`.
fn wait_within(child: &mut Child, bound: Duration) -> std::io::Result<ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if started.elapsed() > bound {
            // SAFETY: signals the process group this process made for its own child.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            return child.wait();
        }
        std::thread::sleep(Duration::from_millis(10));
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
