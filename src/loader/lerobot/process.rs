//! A driver process and what is heard of it: started with the user's Python in a process
//! group of its own, its stdout's messages ([`Event`]s) and its stderr's last lines read by
//! threads, stopped when silent too long, and what it said judged into an answer or the error
//! that names what failed. A driver serves one request ([`super::driver`]) or many
//! ([`super::session`]).

use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::protocol::{DriverError, ErrorKind, Event};
use crate::dataset::setting::{Refusal, Setting};
use crate::loader::pipeline::LoaderError;
use crate::timing::Watch;

/// What ends a driver's measurement early: who hears its steps, and the file it looks for.
pub(super) struct Stopping<'a> {
    watch: &'a mut JsonWatch<'a>,
    file: &'a Path,
    written: bool,
}

/// Watches the driver's `step` events as it says them; `Break` ends its measurement.
pub(super) type JsonWatch<'a> = dyn for<'b> Watch<&'b Json> + 'a;

impl<'a> Stopping<'a> {
    /// Ends a measurement once `watch` breaks on a `step` event, by writing `file`.
    pub(super) fn new(watch: &'a mut JsonWatch<'a>, file: &'a Path) -> Self {
        Self { watch, file, written: false }
    }

    /// Hears a `step` event; writes the stop file the first time `watch` breaks.
    fn step(&mut self, message: &Json) {
        if !self.written && self.watch.hear(message).is_break() {
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

impl Driver {
    /// Starts the driver script with `python`, `argument` on its command line, `stdin` and
    /// `env` beside the environment (a rank's).
    pub(super) fn start(
        python: &Path,
        driver: &Path,
        argument: &str,
        stdin: Stdio,
        env: &[(String, String)],
    ) -> Result<Self, LoaderError> {
        let mut child = Command::new(python)
            .arg(driver)
            .arg(argument)
            .envs(env.iter().map(|(name, value)| (name, value)))
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

    /// The driver's process id, which is its process group's.
    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the driver has exited.
    pub(super) fn exited(&mut self) -> bool {
        self.child.try_wait().is_ok_and(|status| status.is_some())
    }
}

/// The error a driver's `error` message says, worded for people.
fn driver_error(error: &Json) -> LoaderError {
    let DriverError { kind, message } = match serde_json::from_value(error.clone()) {
        Ok(said) => said,
        Err(e) => {
            return LoaderError::Lerobot(format!(
                "the LeRobot driver's error is not what this feedbench expects ({e}): {error}"
            ))
        }
    };
    let message = message.as_str();
    match kind {
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
        // The run's arguments, refused by LeRobot's parser or by the driver: named as the front
        // end names where they were given (`--lerobot-train`, a cell's `lerobot_train`).
        ErrorKind::Arguments => {
            let message = message.to_string();
            LoaderError::Refused(Refusal::new(move |name| {
                format!("{}: {message}", name(Setting::LerobotTrain))
            }))
        }
        // A LeRobot it does not drive, or no feedbench reader, in that Python: the setting
        // that names the Python, as the front end spells it.
        ErrorKind::Version | ErrorKind::Reader => {
            let message = message.to_string();
            LoaderError::Refused(Refusal::new(move |name| {
                format!(
                    "{message}; or point {} at the environment that has it",
                    name(Setting::Python)
                )
            }))
        }
        // A knob this LeRobot cannot set: the message names it as LeRobot knows it.
        ErrorKind::Knob => LoaderError::Lerobot(message.to_string()),
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
