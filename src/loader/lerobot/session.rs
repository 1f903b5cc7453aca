//! A lerobot-train run's driver kept between requests: one driver process per run (its Python,
//! its arguments, its reader), which builds the run once — LeRobot's parser, the dataset, and
//! when first asked the policy, pre-processor and optimizer — and then serves each request
//! with a new DataLoader over that dataset. A tune, a sweep or a guard measures many
//! configurations of one run: each used to start a Python, import LeRobot and build the run
//! again before measuring anything.
//!
//! The requests go one a line down a socket that is the driver's stdin (written with
//! `MSG_NOSIGNAL`: a driver that died is an error here, not a SIGPIPE); the driver exits when
//! it closes, which it does when its session ends, however feedbench ends. The bridge
//! ([`super::bridge`]) holds one session at a time: a request for another run ends the one
//! before (its dataset and policy are what a driver holds). A request that fails ends its
//! session; the next request starts a new one.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value as Json;

use super::process::{Driver, Said, Stopping};
use super::protocol::{Reader, Ready, Request, RunBuilds, RunRequest, SESSION_ARGUMENT};
use crate::loader::pipeline::LoaderError;

/// Which run a session holds: the request's Python, driver script, arguments and reader, and
/// how many ranks run it at once.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Key {
    pub(super) python: PathBuf,
    pub(super) driver: PathBuf,
    lerobot_train: Vec<String>,
    reader: Reader,
    /// Ranks measured at once, a driver each.
    pub(super) ranks: usize,
}

impl Key {
    /// The sessions for `run` on `ranks` ranks, driven by `python` running the package at
    /// `driver`.
    pub(super) fn of(python: &Path, driver: &Path, run: &RunRequest, ranks: usize) -> Self {
        Self {
            python: python.to_path_buf(),
            driver: driver.to_path_buf(),
            lerobot_train: run.lerobot_train.clone(),
            reader: run.reader,
            ranks,
        }
    }
}

/// A driver that keeps its run between requests.
pub(super) struct Session {
    driver: Driver,
    requests: UnixStream,
    /// What its driver said it built so far.
    built: RunBuilds,
}

impl Session {
    /// Starts a driver for `key`'s run with `--session`, the socket for its requests as its
    /// stdin and `env` beside the environment (a rank's).
    pub(super) fn start(key: &Key, env: &[(String, String)]) -> Result<Self, LoaderError> {
        let (ours, theirs) = UnixStream::pair().map_err(|e| {
            LoaderError::Lerobot(format!("cannot make the socket for the LeRobot driver: {e}"))
        })?;
        let stdin = Stdio::from(OwnedFd::from(theirs));
        let driver = Driver::start(&key.python, &key.driver, SESSION_ARGUMENT, stdin, env)?;
        Ok(Self { driver, requests: ours, built: RunBuilds::default() })
    }

    /// Its driver's process id (its process group's).
    pub(super) fn pid(&self) -> u32 {
        self.driver.pid()
    }

    /// Sends `request`, one line.
    fn send(&self, request: &Request) -> std::io::Result<()> {
        let line = serde_json::to_string(request).expect("a request serialises") + "\n";
        let mut rest = line.as_bytes();
        while !rest.is_empty() {
            // SAFETY: the socket is open for as long as `self` is; the pointer and length
            // are those of a live buffer.
            let sent = unsafe {
                libc::send(
                    self.requests.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if sent < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error);
            }
            rest = &rest[sent as usize..];
        }
        Ok(())
    }

    /// What the driver built since it last said, from a `ready` (which says its totals).
    /// (A `ready` that is none of the protocol's says nothing here: its reader refuses it.)
    fn count_builds(&mut self, said: &Said) -> RunBuilds {
        let ready =
            said.ready.clone().and_then(|ready| serde_json::from_value::<Ready>(ready).ok());
        let Some(total) = ready.and_then(|ready| ready.runs_built) else {
            return RunBuilds::default();
        };
        let new = RunBuilds {
            runs: total.runs.saturating_sub(self.built.runs),
            seconds: (total.seconds - self.built.seconds).max(0.0),
        };
        self.built.runs = self.built.runs.max(total.runs);
        self.built.seconds = self.built.seconds.max(total.seconds);
        new
    }

    /// Asks `request` of the session: its answer and what the driver built for it, the
    /// session back where it may serve the next request (None where it failed and ended).
    pub(super) fn ask(
        mut self,
        request: &Request,
        stopping: Option<&mut Stopping<'_>>,
    ) -> (Result<(Json, Json), LoaderError>, RunBuilds, Option<Self>) {
        if self.send(request).is_err() {
            // The driver died between requests (its stdin is gone): hear why, then judge.
            let heard = self.driver.hear(None, true);
            let Session { driver, .. } = self;
            return (heard.and_then(|said| driver.judge(said)), RunBuilds::default(), None);
        }
        let said = match self.driver.hear(stopping, false) {
            Ok(said) => said,
            Err(error) => return (Err(error), RunBuilds::default(), None),
        };
        let built = self.count_builds(&said);
        if said.error.is_none() && !self.driver.exited() {
            if let (Some(ready), Some(result)) = (&said.ready, &said.result) {
                let answer = (ready.clone(), result.clone());
                return (Ok(answer), built, Some(self));
            }
        }
        // Failed: the driver exits by itself after an error; one that does not is stopped.
        if !self.driver.exited() {
            self.driver.stop();
        }
        let Session { driver, .. } = self;
        (driver.judge(said), built, None)
    }

    /// Ends the session: its driver and workers stopped.
    pub(super) fn end(mut self) {
        self.driver.stop();
    }
}
