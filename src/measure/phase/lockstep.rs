//! Native ranks measured at once, stepping together as DDP's ranks do: each rank a process with
//! its own loader and step, and after every step (warm-up included) a barrier across them, so
//! that a rank starved of data holds the others, as the all-reduce in its backward holds them on
//! a training box. The parent ([`run_lockstep`]) starts the ranks, is the barrier (one byte
//! from each rank on its fd 3, then one byte to each on its fd 4), and ends them all the moment
//! one dies, naming it and how; a rank ([`Lockstep`]) wraps its step with the barrier when
//! [`BARRIER_ENV`] says it runs under one.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;

use super::figures::TrainPhase;
use super::ranks::OfRanks;
use crate::loader::batch::Batch;
use crate::model::{ModelError, StagedBatch, StepTimes, TrainStep};

/// Set (to `1`) in a rank's environment: its fds 3 (steps done, to the parent) and 4 (go, from
/// it) are the barrier.
pub const BARRIER_ENV: &str = "FEEDBENCH_STEP_BARRIER";

/// The fd a rank writes a byte to once its step is done.
const DONE_FD: i32 = 3;
/// The fd a rank reads a byte from before it takes its next batch.
const GO_FD: i32 = 4;

/// A rank's end of the barrier.
pub struct StepBarrier {
    done: std::fs::File,
    go: std::fs::File,
}

impl StepBarrier {
    /// The barrier this process runs under, where [`BARRIER_ENV`] says it does.
    pub fn from_env() -> Option<Self> {
        std::env::var_os(BARRIER_ENV)?;
        // SAFETY: the parent set up fds 3 and 4 for this process before it ran (run_lockstep),
        // and nothing else in it opens or owns them.
        let (done, go) =
            unsafe { (std::fs::File::from_raw_fd(DONE_FD), std::fs::File::from_raw_fd(GO_FD)) };
        Some(Self { done, go })
    }

    /// Says this rank's step is done and waits for every other's.
    fn wait(&mut self) -> Result<(), ModelError> {
        let gone = |e: std::io::Error| {
            ModelError::Barrier(format!("the other ranks are gone ({e}): their run ended"))
        };
        self.done.write_all(&[1]).map_err(gone)?;
        let mut go = [0u8];
        match self.go.read(&mut go).map_err(gone)? {
            1 => Ok(()),
            _ => Err(ModelError::Barrier("the other ranks ended before this one".into())),
        }
    }
}

/// A rank's step followed by the barrier: its time includes the wait for the slowest rank, as
/// a DDP step's all-reduce does.
pub struct Lockstep {
    inner: Box<dyn TrainStep>,
    barrier: StepBarrier,
}

impl Lockstep {
    /// `inner`, then `barrier`, every step.
    pub fn new(inner: Box<dyn TrainStep>, barrier: StepBarrier) -> Self {
        Self { inner, barrier }
    }
}

impl TrainStep for Lockstep {
    fn step_with(
        &mut self,
        batch: &Batch,
        staged: Option<&StagedBatch>,
    ) -> Result<StepTimes, ModelError> {
        let times = self.inner.step_with(batch, staged)?;
        self.barrier.wait()?;
        Ok(times)
    }

    fn name(&self) -> String {
        self.inner.name()
    }

    fn trainable_parameters(&self) -> usize {
        self.inner.trainable_parameters()
    }

    fn last_loss(&self) -> Option<f64> {
        self.inner.last_loss()
    }

    fn device(&self) -> tch::Device {
        self.inner.device()
    }
}

/// What a rank printed, once every rank ended well.
#[derive(Debug, Clone)]
pub struct RankOutput {
    /// Its process id.
    pub pid: u32,
    /// Its standard output.
    pub stdout: String,
}

/// Why the ranks did not all end well.
#[derive(Debug, thiserror::Error)]
pub enum LockstepError {
    /// A rank could not be started, or its pipes set up.
    #[error("rank {rank}: could not start it: {source}")]
    Start {
        /// The rank.
        rank: usize,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A rank ended well but did not print its train phase as JSON.
    #[error("rank {rank}: its output is not a train phase's JSON: {what}")]
    Output {
        /// The rank.
        rank: usize,
        /// What did not read.
        what: String,
    },
    /// A rank ended badly; every other was ended with it.
    #[error("rank {rank} of {ranks} {how}{}, and the other ranks were ended", last_words(.said))]
    Died {
        /// The rank.
        rank: usize,
        /// The ranks started.
        ranks: usize,
        /// How it ended (`was killed by signal 9 (SIGKILL)`, `exited with 1`).
        how: String,
        /// Its last line on standard error, if any.
        said: Option<String>,
    },
}

fn last_words(said: &Option<String>) -> String {
    said.as_ref().map_or(String::new(), |line| format!(" (its last line: {line})"))
}

/// A started rank: the process, the parent's ends of its barrier, and its output as read.
struct Rank {
    child: Child,
    done: std::io::PipeReader,
    go: std::io::PipeWriter,
    stdout: Option<JoinHandle<Vec<u8>>>,
    stderr: Option<JoinHandle<Vec<u8>>>,
}

/// Starts `commands` as ranks 0, 1, … at once under one barrier, and waits for them: each
/// rank's output where all ended well; else which rank died and how, every other ended.
pub fn run_lockstep(commands: Vec<Command>) -> Result<Vec<RankOutput>, LockstepError> {
    let mut ranks: Vec<Rank> = Vec::with_capacity(commands.len());
    for (rank, command) in commands.into_iter().enumerate() {
        match start(command) {
            Ok(started) => ranks.push(started),
            Err(source) => {
                end_all(&mut ranks);
                return Err(LockstepError::Start { rank, source });
            }
        }
    }
    // Rounds: a byte from every rank (its step done), then a byte to every rank (go on).
    let mut ended = vec![false; ranks.len()];
    loop {
        for (i, rank) in ranks.iter_mut().enumerate() {
            let mut byte = [0u8];
            if !ended[i] && !matches!(rank.done.read(&mut byte), Ok(1)) {
                ended[i] = true;
            }
        }
        // A rank that ended: well, after its last step (the others end with it), or badly.
        for i in (0..ranks.len()).filter(|&i| ended[i]) {
            let status = ranks[i].child.wait().ok();
            if !status.is_some_and(|s| s.success()) {
                let how = how_it_ended(status);
                end_all(&mut ranks);
                let said = String::from_utf8_lossy(&take(&mut ranks[i].stderr))
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string);
                return Err(LockstepError::Died { rank: i, ranks: ranks.len(), how, said });
            }
        }
        if ended.iter().all(|&e| e) {
            break;
        }
        for (rank, _) in ranks.iter_mut().zip(&ended).filter(|(_, &ended)| !ended) {
            // A rank gone since it wrote: its end is found in the next round.
            let _ = rank.go.write_all(&[1]);
        }
    }
    Ok(ranks
        .iter_mut()
        .map(|rank| RankOutput {
            pid: rank.child.id(),
            stdout: String::from_utf8_lossy(&take(&mut rank.stdout)).into_owned(),
        })
        .collect())
}

/// The train phase of ranks that printed theirs as JSON: the slowest rank's, with every rank
/// beside it (rank 0 first) and the memory of all their processes.
pub fn train_phase_of(outputs: &[RankOutput]) -> Result<TrainPhase, LockstepError> {
    let phases = outputs
        .iter()
        .enumerate()
        .map(|(rank, output)| {
            serde_json::from_str::<TrainPhase>(&output.stdout)
                .map(|phase| (phase, output.pid))
                .map_err(|e| LockstepError::Output { rank, what: e.to_string() })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let what = "no rank".to_string();
    TrainPhase::of_ranks(phases).ok_or(LockstepError::Output { rank: 0, what })
}

/// `command` started as a rank: its fds 3 and 4 the barrier, its output read as it comes.
fn start(mut command: Command) -> std::io::Result<Rank> {
    let (done, done_in_rank) = std::io::pipe()?;
    let (go_in_rank, go) = std::io::pipe()?;
    let (out_fd, in_fd) = (done_in_rank.as_raw_fd(), go_in_rank.as_raw_fd());
    command
        .env(BARRIER_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            // Out of the way of 3 and 4 first, then onto them (dup2 clears close-on-exec).
            let high_out = libc::fcntl(out_fd, libc::F_DUPFD, 10);
            let high_in = libc::fcntl(in_fd, libc::F_DUPFD, 10);
            if high_out < 0
                || high_in < 0
                || libc::dup2(high_out, DONE_FD) < 0
                || libc::dup2(high_in, GO_FD) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn()?;
    // The rank's ends live in the rank alone: its death then closes them.
    drop((done_in_rank, go_in_rank));
    let drain = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = from.read_to_end(&mut all);
            all
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped")));
    Ok(Rank { child, done, go, stdout: Some(stdout), stderr: Some(stderr) })
}

/// Every rank killed and waited for.
fn end_all(ranks: &mut [Rank]) {
    for rank in ranks.iter_mut() {
        let _ = rank.child.kill();
        let _ = rank.child.wait();
    }
}

/// What a reader thread read (empty where it could not be joined, or was taken).
fn take(handle: &mut Option<JoinHandle<Vec<u8>>>) -> Vec<u8> {
    handle.take().and_then(|reader| reader.join().ok()).unwrap_or_default()
}

/// `was killed by signal 9 (SIGKILL)`, `exited with 1`.
fn how_it_ended(status: Option<ExitStatus>) -> String {
    match status {
        None => "could not be waited for".into(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exited with {code}"),
            (None, Some(signal)) => {
                let name = match signal {
                    libc::SIGKILL => " (SIGKILL: killed, e.g. out of memory)",
                    libc::SIGTERM => " (SIGTERM)",
                    libc::SIGSEGV => " (SIGSEGV)",
                    libc::SIGABRT => " (SIGABRT)",
                    _ => "",
                };
                format!("was killed by signal {signal}{name}")
            }
            (None, None) => "ended".into(),
        },
    }
}
