//! The drivers of one lerobot-train run: one, or one per rank where the run is measured as N
//! ranks at once. Each rank's driver gets the environment a launcher gives a rank (`RANK`,
//! `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`/`MASTER_PORT`, as torchrun and `accelerate launch`
//! set them), so that lerobot-train's own Accelerator makes a real `torch.distributed` process
//! group (gloo on the CPU) and shards the run's DataLoader as it does on a training box. Every
//! rank is asked each request and heard at once; a rank that fails (an error, a signal, the
//! out-of-memory killer) ends every other rank at once, so none is left blocked in a
//! collective, and the error names the rank.

use std::sync::Mutex;

use serde_json::Value as Json;

use super::process::Stopping;
use super::protocol::Request;
use super::protocol::RunBuilds;
use super::session::{Key, Session};
use crate::loader::pipeline::LoaderError;

/// The drivers of one run: a session per rank, rank 0 first.
pub(super) struct RankGroup {
    key: Key,
    sessions: Vec<Session>,
}

/// Each rank's driver's answer, rank 0 first.
pub(super) type RankAnswers = Vec<(Json, Json)>;

impl RankGroup {
    /// Starts the drivers of `key`'s run: one without a rank's environment where it has one
    /// rank, else one per rank, all of one process group on a free local port.
    pub(super) fn start(key: Key) -> Result<Self, LoaderError> {
        if key.ranks <= 1 {
            let session = Session::start(&key, &[])?;
            return Ok(Self { key, sessions: vec![session] });
        }
        let port = free_port()?;
        let mut sessions = Vec::with_capacity(key.ranks);
        for rank in 0..key.ranks {
            match Session::start(&key, &rank_env(rank, key.ranks, port)) {
                Ok(session) => sessions.push(session),
                Err(error) => {
                    sessions.into_iter().for_each(Session::end);
                    return Err(error);
                }
            }
        }
        Ok(Self { key, sessions })
    }

    /// Whether it holds the run of `key`.
    pub(super) fn holds(&self, key: &Key) -> bool {
        self.key == *key
    }

    /// Asks `request` of every rank at once: each rank's answer, what rank 0's driver built
    /// for it, and the group back where it may serve the next request (None where a rank
    /// failed: every rank is then ended). `stopping` hears rank 0's steps where the run has one
    /// rank; ranks measured at once run their measurement whole, since a rank that stopped
    /// early would leave the others blocked at their next step's collective.
    pub(super) fn ask(
        self,
        request: &Request,
        stopping: Option<&mut Stopping<'_>>,
    ) -> (Result<RankAnswers, LoaderError>, RunBuilds, Option<Self>) {
        let Self { key, mut sessions } = self;
        if sessions.len() == 1 {
            let session = sessions.pop().expect("one session");
            let (answer, built, session) = session.ask(request, stopping);
            let group = session.map(|session| Self { key, sessions: vec![session] });
            return (answer.map(|answer| vec![answer]), built, group);
        }
        let pids: Vec<u32> = sessions.iter().map(Session::pid).collect();
        let first_failed: Mutex<Option<usize>> = Mutex::new(None);
        let heard: Vec<_> = std::thread::scope(|scope| {
            let asking: Vec<_> = sessions
                .into_iter()
                .enumerate()
                .map(|(rank, session)| {
                    let (pids, first_failed) = (&pids, &first_failed);
                    scope.spawn(move || {
                        let heard = session.ask(request, None);
                        if let Err(error) = &heard.0 {
                            // A rank whose collective lost its peer names the peer's death,
                            // not its own fault: the rank that died is given the time to say
                            // so first.
                            if lost_a_peer(error) {
                                std::thread::sleep(PEER_GRACE);
                            }
                            end_the_others(rank, pids, first_failed);
                        }
                        heard
                    })
                })
                .collect();
            asking.into_iter().map(|thread| thread.join().expect("a rank's thread")).collect()
        });
        let built = heard.first().map_or(RunBuilds::default(), |(_, built, _)| *built);
        let failed = first_failed.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut answers = Vec::with_capacity(heard.len());
        let (mut kept, mut first_error) = (Vec::new(), None);
        for (rank, (answer, _, session)) in heard.into_iter().enumerate() {
            match answer {
                Ok(answer) => answers.push(answer),
                // The rank that failed first: the others were ended because of it.
                Err(error) if Some(rank) == failed => first_error = Some(error),
                Err(_) => {}
            }
            kept.extend(session);
        }
        let (Some(rank), Some(error)) = (failed, first_error) else {
            return (Ok(answers), built, Some(Self { key, sessions: kept }));
        };
        kept.into_iter().for_each(Session::end);
        (Err(rank_error(rank, key.ranks, error)), built, None)
    }

    /// Ends every rank's driver and its workers.
    pub(super) fn end(self) {
        self.sessions.into_iter().for_each(Session::end);
    }
}

/// How long a rank whose collective lost its peer waits before it is taken as the rank that
/// failed: the peer's own end (a signal, its error) is heard first where it comes within it.
const PEER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether `error` is a collective's (gloo's, NCCL's) on losing a peer rank: a consequence of
/// another rank's end rather than a fault of this one.
fn lost_a_peer(error: &LoaderError) -> bool {
    let text = error.to_string();
    ["Connection closed by peer", "Connection reset by peer", "Broken pipe"]
        .iter()
        .any(|lost| text.contains(lost))
}

/// Rank `rank` failed: the others' drivers (and their workers) are ended at once, where no
/// rank failed before it.
fn end_the_others(rank: usize, pids: &[u32], first_failed: &Mutex<Option<usize>>) {
    let mut first = first_failed.lock().unwrap_or_else(|p| p.into_inner());
    if first.is_some() {
        return;
    }
    *first = Some(rank);
    for (other, &pid) in pids.iter().enumerate().filter(|(other, _)| *other != rank) {
        // SAFETY: signals the process group this process made for a rank's driver, not yet
        // reaped (its thread holds it until its `ask` returns).
        unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
        tracing::debug!("rank {other} (pid {pid}) ended: rank {rank} failed");
    }
}

/// The error of rank `rank` of `ranks`, which ended the others: a refusal as it is (every rank
/// refuses alike), anything else with the rank named.
fn rank_error(rank: usize, ranks: usize, error: LoaderError) -> LoaderError {
    match error {
        LoaderError::Refused(_) => error,
        other => LoaderError::Lerobot(format!(
            "rank {rank} of {ranks} failed, and the other ranks were ended: {other}"
        )),
    }
}

/// The environment a launcher gives rank `rank` of `ranks` on one machine, its process group
/// met at `port` on this host. Threads per rank are one where the user set none, as torchrun
/// sets them for several ranks on one machine.
fn rank_env(rank: usize, ranks: usize, port: u16) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("RANK", rank.to_string()),
        ("LOCAL_RANK", rank.to_string()),
        ("GROUP_RANK", "0".into()),
        ("WORLD_SIZE", ranks.to_string()),
        ("LOCAL_WORLD_SIZE", ranks.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect();
    if std::env::var_os("OMP_NUM_THREADS").is_none() {
        env.push(("OMP_NUM_THREADS".into(), "1".into()));
    }
    env
}

/// A local TCP port free now, for the ranks' process group to meet at.
fn free_port() -> Result<u16, LoaderError> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| {
        LoaderError::Lerobot(format!("no free local port for the ranks' process group ({e})"))
    })?;
    let port = listener.local_addr().map(|a| a.port());
    port.map_err(|e| LoaderError::Lerobot(format!("the ranks' port: {e}")))
}
