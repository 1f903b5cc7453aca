//! One writer of an output directory at a time: an advisory lock (`flock`) on the directory
//! itself (no lock file is made in it: a user's existing `--out` got a `.lock` it never had),
//! held for as long as the process writes there and released by the kernel on any exit, a crash
//! included, so that a resumed run is never refused by a lock its killed predecessor held.
//! A sweep or a layout study holds it alone; the tasks of one sweep plan share it, and keep a
//! lone writer out.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::dataset::files::{try_lock_dir, LockFile};

/// Another process writes the directory.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock is held.
    #[error(
        "{}: another feedbench{} is writing here; wait for it to end, or choose another --out",
        dir.display(),
        holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
    )]
    Held {
        /// The output directory.
        dir: PathBuf,
        /// The holder's process id, where it wrote it.
        holder: Option<u32>,
    },
    /// The directory could not be opened or locked.
    #[error("{}: {source}", path.display())]
    Io {
        /// The output directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A held lock on an output directory; dropping it (or exiting) releases it.
#[derive(Debug)]
pub struct OutputLock {
    _file: File,
}

impl OutputLock {
    /// The directory `dir` (which must exist) for this process alone. Nothing is written: a
    /// run that takes the lock and then refuses leaves the directory as it was (another
    /// process's message names the holder from `/proc/locks`).
    pub fn exclusive(dir: &Path) -> Result<Self, LockError> {
        Ok(Self { _file: Self::take(dir, true)? })
    }

    /// The directory `dir` shared with other holders of a shared lock (the tasks of a plan),
    /// and kept from an exclusive holder.
    pub fn shared(dir: &Path) -> Result<Self, LockError> {
        Ok(Self { _file: Self::take(dir, false)? })
    }

    fn take(dir: &Path, exclusive: bool) -> Result<File, LockError> {
        let io = |source| LockError::Io { path: dir.to_path_buf(), source };
        match try_lock_dir(dir, exclusive).map_err(io)? {
            LockFile::Taken(file) => Ok(file),
            LockFile::Held { holder, .. } => {
                Err(LockError::Held { dir: dir.to_path_buf(), holder })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_at_a_time_and_the_lock_goes_with_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = OutputLock::exclusive(dir.path()).unwrap();
        let made: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(made.is_empty(), "the lock made {made:?} in the directory");
        // flock locks belong to the open file: a second open is a second holder, as another
        // process would be.
        let second = OutputLock::exclusive(dir.path()).unwrap_err().to_string();
        let pid = std::process::id();
        assert!(second.contains(&format!("another feedbench (pid {pid})")), "{second}");
        assert!(OutputLock::shared(dir.path()).is_err(), "no task while a sweep writes");
        drop(first);
        let tasks = [OutputLock::shared(dir.path()), OutputLock::shared(dir.path())];
        assert!(tasks.iter().all(Result::is_ok), "the tasks of a plan share it");
        assert!(OutputLock::exclusive(dir.path()).is_err(), "no sweep while tasks write");
        drop(tasks);
        OutputLock::exclusive(dir.path()).unwrap();
    }
}
