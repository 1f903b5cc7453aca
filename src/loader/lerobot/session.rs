//! A lerobot-train run's driver kept between requests: one driver process per run (its Python,
//! its arguments, its reader), which builds the run once — LeRobot's parser, the dataset, and
//! when first asked the policy, pre-processor and optimizer — and then serves each request
//! with a new DataLoader over that dataset. A tune, a sweep or a guard measures many
//! configurations of one run: each used to start a Python, import LeRobot and build the run
//! again before measuring anything.
//!
//! The requests go one a line down a socket that is the driver's stdin (written with
//! `MSG_NOSIGNAL`: a driver that died is an error here, not a SIGPIPE); the driver exits when
//! it closes, which it does when feedbench ends, however it ends. One session is open at a time:
//! a request for another run ends the one before (its dataset and policy are what a driver
//! holds). A request that fails ends its session; the next request starts a new one.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde_json::Value as Json;

use super::process::{Driver, Said, Stopping};
use super::protocol::{Request, RunRequest, SESSION_ARGUMENT};
use crate::loader::pipeline::LoaderError;

/// The open session, if any.
static SESSION: Mutex<Option<Session>> = Mutex::new(None);

/// lerobot-train runs the drivers of this process have built.
static RUNS_BUILT: AtomicUsize = AtomicUsize::new(0);

/// The milliseconds the drivers of this process took to build them.
static RUN_BUILD_MS: AtomicU64 = AtomicU64::new(0);

/// How many lerobot-train runs (LeRobot's parser, dataset and the rest) the drivers of this
/// process have built so far: a tune of one run builds it once, or once more per request that
/// needs a run built afresh (the first batches of a run, in its order).
pub fn runs_built() -> usize {
    RUNS_BUILT.load(Ordering::Relaxed)
}

/// The seconds the drivers of this process took to build their lerobot-train runs so far
/// (LeRobot's parser, the dataset and, where a step was measured, the policy, pre-processor
/// and optimizer on the run's device): what a tune spends before its first measured step.
pub fn run_build_seconds() -> f64 {
    RUN_BUILD_MS.load(Ordering::Relaxed) as f64 / 1e3
}

/// Which run a session holds: the request's Python, driver script, arguments and reader.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    python: PathBuf,
    driver: PathBuf,
    lerobot_train: Vec<String>,
    reader: &'static str,
}

/// A driver that keeps its run between requests.
struct Session {
    key: Key,
    driver: Driver,
    requests: UnixStream,
    /// The runs its driver said it built so far.
    builds: usize,
    /// The milliseconds its driver said building them took so far.
    build_ms: u64,
}

impl Session {
    /// Starts a driver with `--session` and the socket for its requests as its stdin.
    fn start(key: Key) -> Result<Self, LoaderError> {
        let (ours, theirs) = UnixStream::pair().map_err(|e| {
            LoaderError::Lerobot(format!("cannot make the socket for the LeRobot driver: {e}"))
        })?;
        let stdin = Stdio::from(OwnedFd::from(theirs));
        let driver = Driver::start(&key.python, &key.driver, SESSION_ARGUMENT, stdin)?;
        Ok(Self { key, driver, requests: ours, builds: 0, build_ms: 0 })
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

    /// Counts the runs the driver says it built, and the time it took, from a `ready`.
    fn count_builds(&mut self, said: &Said) {
        let built = said.ready("lerobot_train");
        let reported = |key| built.and_then(|r| r.get(key));
        if let Some(builds) = reported("builds").and_then(Json::as_u64).map(|n| n as usize) {
            RUNS_BUILT.fetch_add(builds.saturating_sub(self.builds), Ordering::Relaxed);
            self.builds = self.builds.max(builds);
        }
        if let Some(ms) = reported("build_s").and_then(Json::as_f64).map(|s| (s * 1e3) as u64) {
            RUN_BUILD_MS.fetch_add(ms.saturating_sub(self.build_ms), Ordering::Relaxed);
            self.build_ms = self.build_ms.max(ms);
        }
    }

    /// Ends the session: its driver and workers stopped.
    fn end(mut self) {
        self.driver.stop();
    }
}

/// The answer of the session for `run` (the run `request` reads) to `request`, the session
/// started where none is open for that run (and the one open for another run ended).
pub(super) fn ask(
    python: &Path,
    driver: &Path,
    run: &RunRequest,
    request: &Request,
    stopping: Option<&mut Stopping<'_>>,
) -> Result<(Json, Json), LoaderError> {
    let key = Key {
        python: python.to_path_buf(),
        driver: driver.to_path_buf(),
        lerobot_train: run.lerobot_train.clone(),
        reader: run.reader,
    };
    // A session left by a request that panicked is still whole: its driver answered or not.
    let mut open = SESSION.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(other) = open.take_if(|session| session.key != key) {
        other.end();
    }
    let mut session = match open.take() {
        Some(session) => session,
        None => Session::start(key)?,
    };
    if session.send(request).is_err() {
        // The driver died between requests (its stdin is gone): hear why, then judge.
        let said = session.driver.hear(None, true)?;
        return session.driver.judge(said);
    }
    let said = session.driver.hear(stopping, false)?;
    session.count_builds(&said);
    if said.error.is_none() && !session.driver.exited() {
        if let (Some(ready), Some(result)) = (&said.ready, &said.result) {
            let answer = (ready.clone(), result.clone());
            *open = Some(session);
            return Ok(answer);
        }
    }
    // Failed: the driver exits by itself after an error; one that does not is stopped.
    if !session.driver.exited() {
        session.driver.stop();
    }
    let Session { driver, .. } = session;
    driver.judge(said)
}
