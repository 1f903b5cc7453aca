//! The CPU time of threads a library starts for itself (a video decoder's own threads), so
//! that the stage which calls the library counts their work as its own.
//!
//! The threads are found as those that appear in `/proc/self/task` while the library call runs
//! ([`HelperThreads::started_by`]), named as the library names them or as the calling thread
//! (Linux threads inherit their creator's name), and read by their CPU clocks. Other code that
//! starts threads while such a call may run takes [`starting_threads`] first, so that its
//! threads are never mistaken for the library's.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::clock::clock_time;

/// Held while threads are started by a call whose new threads are looked for.
static STARTING: Mutex<()> = Mutex::new(());

/// Holds back [`HelperThreads::started_by`] elsewhere while the caller starts threads of its
/// own (the loader's workers).
pub fn starting_threads() -> MutexGuard<'static, ()> {
    STARTING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads a library call started, by their CPU clocks.
#[derive(Debug, Default)]
pub struct HelperThreads {
    clocks: Vec<libc::clockid_t>,
}

impl HelperThreads {
    /// Runs `start` and keeps the threads it started that are named `library_name` (as the
    /// library names its threads) or as the calling thread (unnamed threads inherit their
    /// creator's name). None are kept where `/proc` cannot be read.
    pub fn started_by<T>(library_name: &str, start: impl FnOnce() -> T) -> (T, Self) {
        let _starting = starting_threads();
        let before = thread_ids();
        let value = start();
        let own = thread_name("thread-self");
        let clocks = thread_ids()
            .difference(&before)
            .filter(|&&tid| {
                let name = thread_name(&format!("self/task/{tid}"));
                name.is_some() && (name.as_deref() == Some(library_name) || name == own)
            })
            .map(|&tid| thread_cpu_clock(tid))
            .collect();
        (value, Self { clocks })
    }

    /// How many threads it holds.
    pub fn len(&self) -> usize {
        self.clocks.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.clocks.is_empty()
    }

    /// The CPU time its threads have used so far (threads gone count no more).
    pub fn cpu(&self) -> Duration {
        self.clocks.iter().filter_map(|&clock| clock_time(clock)).sum()
    }
}

/// The ids of this process's threads.
fn thread_ids() -> HashSet<libc::pid_t> {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// The name (`comm`) of the thread at `/proc/<path>`.
fn thread_name(path: &str) -> Option<String> {
    let name = std::fs::read_to_string(format!("/proc/{path}/comm")).ok()?;
    Some(name.trim_end().to_string())
}

/// The CPU clock of thread `tid` of this process, as `pthread_getcpuclockid` makes it
/// (the kernel's per-thread scheduler clock).
fn thread_cpu_clock(tid: libc::pid_t) -> libc::clockid_t {
    const CPUCLOCK_PERTHREAD_SCHED: libc::clockid_t = 6;
    (!tid << 3) | CPUCLOCK_PERTHREAD_SCHED
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{mpsc, Arc, Barrier};

    /// Spins until this thread has used `cpu` of CPU time.
    fn burn(cpu: Duration) {
        let start = crate::timing::thread_cpu_time();
        while crate::timing::thread_cpu_time() - start < cpu {
            std::hint::black_box(0u64.wrapping_add(1));
        }
    }

    #[test]
    fn the_threads_a_call_starts_are_kept_by_name() {
        // Every thread started is held alive (a barrier) until the helpers have been looked
        // for, however slowly the machine runs them: only a library that stopped keeping
        // threads by name fails this.
        let release = Arc::new(Barrier::new(4));
        let held = |release: &Arc<Barrier>| {
            let release = release.clone();
            move || {
                burn(Duration::from_millis(1));
                release.wait();
            }
        };
        // A thread of somebody else's that starts a thread of its own during the call: the
        // new thread bears its creator's name from the start.
        let (ask, asked) = mpsc::channel::<()>();
        let (told, tell) = mpsc::channel::<std::thread::JoinHandle<()>>();
        let theirs = held(&release);
        let elsewhere = std::thread::Builder::new()
            .name("somebody-else".into())
            .spawn(move || {
                asked.recv().unwrap();
                told.send(std::thread::spawn(theirs)).unwrap();
            })
            .unwrap();
        let (threads, helpers) = HelperThreads::started_by("helper-lib", || {
            ask.send(()).unwrap();
            let named = std::thread::Builder::new().name("helper-lib".into());
            [
                // Unnamed: it inherits this thread's name.
                std::thread::spawn(held(&release)),
                named.spawn(held(&release)).unwrap(),
                tell.recv().unwrap(),
            ]
        });
        assert_eq!(helpers.len(), 2, "the inheriting and the library-named thread");
        release.wait();
        threads.into_iter().for_each(|t| t.join().unwrap());
        elsewhere.join().unwrap();
        assert_eq!(helpers.cpu(), Duration::ZERO, "threads gone count no more");
        assert!(HelperThreads::default().is_empty());
    }

    #[test]
    fn helper_cpu_is_read_while_they_run() {
        let (done, wait) = mpsc::channel::<()>();
        let (go, started) = mpsc::channel::<()>();
        let (handle, helpers) = HelperThreads::started_by("none-such", || {
            std::thread::spawn(move || {
                burn(Duration::from_millis(60));
                go.send(()).unwrap();
                let _ = wait.recv();
            })
        });
        started.recv().unwrap();
        let used = helpers.cpu();
        assert!(used >= Duration::from_millis(60), "{used:?}");
        drop(done);
        handle.join().unwrap();
    }
}
