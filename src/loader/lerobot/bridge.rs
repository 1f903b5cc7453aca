//! The LeRobot bridge as one owned value: [`LerobotBridge`] holds the driver session that keeps
//! a lerobot-train run built, the runs it described and what building them cost. A study
//! (a tune, a sweep, a guard, one command) makes one, hands it to the loaders it builds and
//! reads its figures back from it ([`LerobotBridge::builds`]); two bridges share nothing, and
//! dropping the last handle to one ends its driver.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value as Json;

use super::driver::{driver_path, once, parse};
use super::process::{JsonWatch, Stopping};
use super::protocol::{
    BatchesRequest, BuiltRun, DescribeRequest, LerobotVersions, Request, RunBuilds,
};
use super::ranks::{RankAnswers, RankGroup};
use super::run_args::{run_request, TrainArgs};
use super::session::Key;
use crate::loader::config::LoaderConfig;
use crate::loader::pipeline::LoaderError;

/// The LeRobot bridge: a handle (cloned handles share it) to the driver session, the runs
/// described and the build ledger of one study.
#[derive(Clone, Default)]
pub struct LerobotBridge {
    state: Arc<Mutex<Bridge>>,
}

impl std::fmt::Debug for LerobotBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LerobotBridge").field("builds", &self.builds()).finish_non_exhaustive()
    }
}

/// What a bridge holds.
#[derive(Default)]
struct Bridge {
    /// The open sessions, if any: one run kept built at a time, by one driver or one per rank.
    group: Option<RankGroup>,
    /// Every run described so far: what LeRobot built of its arguments.
    described: HashMap<TrainArgs, (LerobotVersions, BuiltRun)>,
    /// The runs its drivers built, and the time it took.
    builds: RunBuilds,
    /// Requests asked so far: each one's files are named by its number.
    requests: u64,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            group.end();
        }
    }
}

impl LerobotBridge {
    /// A bridge with no driver yet: the first request starts one.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bridge's state; a request that panicked left it whole (its driver answered or not).
    fn state(&self) -> MutexGuard<'_, Bridge> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The lerobot-train runs this bridge's drivers built so far, and how long that took.
    pub fn builds(&self) -> RunBuilds {
        self.state().builds
    }

    /// The driver's `ready` and `result` for `request`, run by `python`. A lerobot-train
    /// run's requests go to the session that keeps the run built (started where none holds
    /// it, the one holding another run ended); any other request gets a driver of its own, the
    /// request in a file beside the driver named on its command line (a child that is no
    /// Python may exit before reading).
    pub fn ask(&self, python: &Path, request: &Request) -> Result<(Json, Json), LoaderError> {
        self.ask_until(python, request, None)
    }

    /// [`Self::ask`], where `stop` (if any) hears each measured batch of a `load` as the driver
    /// reports it (its `step` event) and ends the measurement once it says so: a stop file is
    /// written, which the driver looks for before each batch.
    pub fn ask_until(
        &self,
        python: &Path,
        request: &Request,
        stop: Option<&mut JsonWatch<'_>>,
    ) -> Result<(Json, Json), LoaderError> {
        let answers = self.ask_every_rank(python, request, stop)?;
        Ok(answers.into_iter().next().expect("rank 0's answer"))
    }

    /// Every rank's answer to `request` (rank 0 first), where it reads a run measured as
    /// several ranks at once ([`RunRequest::ranks`](super::protocol::RunRequest)); one
    /// answer otherwise. `stop` hears the steps of a run measured alone.
    pub fn ask_every_rank(
        &self,
        python: &Path,
        request: &Request,
        stop: Option<&mut JsonWatch<'_>>,
    ) -> Result<RankAnswers, LoaderError> {
        let driver = driver_path()?;
        let mut state = self.state();
        state.requests += 1;
        // Unique among the bridges of this process too (tests run several at once): its address
        // while it is borrowed here is no other live bridge's.
        let bridge = self as *const Self as usize;
        let name = format!("request-{}-{bridge:x}-{}", std::process::id(), state.requests);
        let request_file = driver.with_file_name(format!("{name}.json"));
        let stop_file = driver.with_file_name(format!("{name}.stop"));
        let mut request = request.clone();
        if let (Request::Load(load), Some(_)) = (&mut request, stop.as_ref()) {
            load.stop_file = Some(stop_file.clone());
        }
        let mut stopping = stop.map(|hear| Stopping::new(hear, &stop_file));
        let answer = match request.run() {
            Some(run) => {
                let key = Key::of(python, &driver, run, run.ranks.max(1));
                let group = match state.group.take() {
                    Some(open) if open.holds(&key) => open,
                    Some(other) => {
                        other.end();
                        RankGroup::start(key)?
                    }
                    None => RankGroup::start(key)?,
                };
                let (answers, built, group) = group.ask(&request, stopping.as_mut());
                state.builds += built;
                state.group = group;
                answers
            }
            None => {
                drop(state);
                let text = serde_json::to_vec(&request).expect("a request serialises");
                crate::dataset::files::write_whole(&request_file, &text).map_err(|e| {
                    LoaderError::Lerobot(format!("{}: cannot write ({e})", request_file.display()))
                })?;
                let answer = once(python, &driver, &request_file, stopping.as_mut());
                let _ = std::fs::remove_file(&request_file);
                answer.map(|answer| vec![answer])
            }
        };
        let _ = std::fs::remove_file(&stop_file);
        answer
    }

    /// Builds the run the arguments describe, as lerobot-train builds it, and says what it
    /// built: once per bridge for the same Python and arguments (a tune builds the run's loader
    /// for every configuration it measures, and LeRobot takes seconds to build it).
    pub fn describe(&self, run: &TrainArgs) -> Result<(LerobotVersions, BuiltRun), LoaderError> {
        if let Some(found) = self.state().described.get(run).cloned() {
            return Ok(found);
        }
        let request = Request::Describe(DescribeRequest { run: run_request(run, None) });
        let (ready, _) = self.ask(&run.python, &request)?;
        let versions: LerobotVersions = parse(&run.python, ready)?;
        let built = versions.lerobot_train.clone().ok_or_else(|| said_nothing(run))?;
        let found = (versions, built);
        self.state().described.insert(run.clone(), found.clone());
        Ok(found)
    }

    /// The same run on the dataset at `root` (a sweep's or guard's `[dataset]`): reading it
    /// where its arguments name no dataset, then built by LeRobot ([`Self::describe`]) to
    /// refuse a run whose arguments name another directory.
    pub fn on_dataset(&self, run: TrainArgs, root: &Path) -> Result<TrainArgs, LoaderError> {
        let run = run.reading(root);
        self.describe(&run)?.1.refuse_other_root(root)?;
        Ok(run)
    }

    /// Saves the first `count` batches the run's DataLoader yields (with `config`'s workers,
    /// batch and prefetch) as `out/batch-<n>/<key>.npy`, strings in `strings.json`.
    pub fn save_first_batches(
        &self,
        run: &TrainArgs,
        config: &LoaderConfig,
        count: usize,
        out: &Path,
    ) -> Result<BuiltRun, LoaderError> {
        let request = Request::Batches(BatchesRequest::First {
            run: run_request(run, Some(config)),
            count,
            out: out.to_path_buf(),
        });
        let (ready, _) = self.ask(&run.python, &request)?;
        let versions: LerobotVersions = parse(&run.python, ready)?;
        versions.lerobot_train.ok_or_else(|| said_nothing(run))
    }
}

/// A driver that answered about a run without saying what it built.
fn said_nothing(run: &TrainArgs) -> LoaderError {
    LoaderError::Lerobot(format!("{}: the driver said nothing of the run", run.python.display()))
}
