//! The files of a dataset, the one interface to its bytes whether its root is a directory or a
//! URL (objects: [`super::remote`]): opening only regular files for reading (a FIFO would block
//! the reader, a directory is no data), reading them by position (a file that shrinks under a
//! reader is an error, not a signal), and writing parquet, JSON and JSON Lines, and any file whole
//! or not at all.

use std::fs::File;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde_json::Value as Json;

use crate::dataset::error::{DatasetError, Result};
use crate::dataset::remote::{self, ObjectUrl, RemoteObject};
use crate::timing::Watch;

pub use crate::dataset::positioned::{open_regular, PositionedFile, ReadAt};
pub use crate::dataset::remote::index_cache::IndexKind;
pub use crate::dataset::remote::is_url;

/// Checks that episode `episode`'s file `path` (a file, or an object of a remote root) is
/// there: absent is a missing file (a partial download); a directory, FIFO or symlink loop in
/// its place is said to be what it is.
pub fn expect_episode_file(path: &Path, episode: usize) -> Result<()> {
    let present = match ObjectUrl::of(path)? {
        Some(url) => remote::object::exists(&url)?,
        None if path.is_file() => return Ok(()),
        None => path.symlink_metadata().is_ok(),
    };
    match present {
        false => Err(DatasetError::MissingFile { path: path.to_path_buf(), episode }),
        true if remote::is_url(path) => Ok(()),
        true => open_regular(path).map(drop),
    }
}

/// Whether the file (or object) `path` is there.
pub fn is_present(path: &Path) -> Result<bool> {
    match ObjectUrl::of(path)? {
        Some(url) => remote::object::exists(&url),
        None => Ok(path.is_file()),
    }
}

/// The size of the file (or object) `path`, None where it is absent (or not a regular file).
pub fn size_of(path: &Path) -> Result<Option<u64>> {
    match ObjectUrl::of(path)? {
        Some(url) => Ok(RemoteObject::find(url)?.map(|object| object.len())),
        None => Ok(std::fs::metadata(path).ok().filter(|m| m.is_file()).map(|m| m.len())),
    }
}

/// The whole file (or object) `path`: a regular file (see [`open_regular`]) or one GET.
pub fn read_whole(path: &Path) -> Result<Vec<u8>> {
    if let Some(url) = ObjectUrl::of(path)? {
        return Ok(remote::object::read_whole(&url)?.to_vec());
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut open_regular(path)?, &mut bytes)
        .map_err(|e| DatasetError::io(path, e))?;
    Ok(bytes)
}

/// The file (or object) `path` as UTF-8 text.
pub fn read_regular_text(path: &Path) -> Result<String> {
    String::from_utf8(read_whole(path)?)
        .map_err(|_| DatasetError::invalid(path, "expected UTF-8 text"))
}

/// The files under `dir`, every level down, in path order: a directory's, or the objects a
/// remote root's store lists under it; None where the store cannot list (a plain web server).
pub fn files_under(dir: &Path) -> Result<Option<Vec<PathBuf>>> {
    let Some(url) = ObjectUrl::of(dir)? else {
        let mut files = Vec::new();
        let mut pending = vec![dir.to_path_buf()];
        while let Some(current) = pending.pop() {
            for entry in std::fs::read_dir(&current).map_err(|e| DatasetError::io(&current, e))? {
                let path = entry.map_err(|e| DatasetError::io(&current, e))?.path();
                if path.is_dir() {
                    pending.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        files.sort();
        return Ok(Some(files));
    };
    let Some(keys) = remote::object::list(&url)? else { return Ok(None) };
    let prefix = format!("{}/", url.key);
    let files: Vec<PathBuf> = keys
        .iter()
        .filter_map(|key| key.strip_prefix(&prefix))
        .map(|within| dir.join(within))
        .collect();
    Ok(Some(files))
}

/// Writes `batch` as a parquet file with row groups of at most `row_group_rows` rows. The
/// schema's metadata (e.g. `pandas`) also goes into the file's key-value metadata, as pyarrow
/// writes it.
pub fn write_parquet(path: &Path, batch: &RecordBatch, row_group_rows: usize) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
    }
    let file = std::fs::File::create(path).map_err(|e| DatasetError::io(path, e))?;
    let metadata: Vec<KeyValue> = batch
        .schema()
        .metadata()
        .iter()
        .map(|(key, value)| KeyValue::new(key.clone(), value.clone()))
        .collect();
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .set_key_value_metadata((!metadata.is_empty()).then_some(metadata))
        .build();
    let mut writer = ArrowWriter::try_new(file, batch.schema(), Some(properties))
        .map_err(|e| DatasetError::parquet(path, e))?;
    writer.write(batch).map_err(|e| DatasetError::parquet(path, e))?;
    writer.close().map_err(|e| DatasetError::parquet(path, e))?;
    Ok(())
}

/// Writes `value` as pretty JSON and a newline, creating the parent directory.
pub fn write_json(path: &Path, value: &Json) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
    }
    let text = serde_json::to_string_pretty(value).expect("JSON values serialise");
    std::fs::write(path, text + "\n").map_err(|e| DatasetError::io(path, e))
}

/// Writes one JSON value per line (JSON Lines).
pub fn write_lines(path: &Path, lines: impl Iterator<Item = Json>) -> Result<()> {
    let text: String = lines.map(|l| l.to_string() + "\n").collect();
    std::fs::write(path, text).map_err(|e| DatasetError::io(path, e))
}

/// Writes `bytes` to `path` whole or not at all: into a temporary sibling
/// (`<name>.<pid>.<n>.partial`, `n` counting this process's writes, so that two threads
/// writing one path at once each rename their own), synced, then renamed over `path`. A
/// process killed meanwhile leaves `path` as it was (absent, or its old contents) and at most
/// the temporary file.
pub fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.{n}.partial", std::process::id()));
    let partial = path.with_file_name(name);
    let written = File::create(&partial).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&partial, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    renamed
}

/// The outermost directory that making `path` (`create_dir_all`) would create: the last of
/// its ancestors, `path` included, that does not exist; None where `path` exists.
pub fn outermost_missing(path: &Path) -> Option<PathBuf> {
    let missing = path.ancestors().take_while(|a| !a.as_os_str().is_empty() && !a.exists());
    missing.last().map(Path::to_path_buf)
}

/// A lock file (or directory), opened (a file made where absent) and locked, or held by another
/// process.
#[derive(Debug)]
pub enum LockFile {
    /// Locked by this process: the kernel drops the lock when the file is closed, a crash
    /// included.
    Taken(File),
    /// Another open file holds a lock that excludes this one.
    Held {
        /// The file, open, not locked.
        file: File,
        /// The holder's pid, as the kernel lists it (`/proc/locks`), where it does.
        holder: Option<u32>,
    },
}

/// Opens the lock file `path` (made where absent, never truncated nor written) and takes an
/// advisory lock (`flock`) on it without waiting: shared or exclusive.
pub fn try_lock_file(path: &Path, exclusive: bool) -> std::io::Result<LockFile> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    try_lock_open(file, exclusive)
}

/// Takes an advisory lock (`flock`) on the directory `dir` itself, without waiting, shared or
/// exclusive: nothing is made in it.
pub fn try_lock_dir(dir: &Path, exclusive: bool) -> std::io::Result<LockFile> {
    try_lock_open(File::open(dir)?, exclusive)
}

/// `flock` on the open `file` without waiting: taken, or held by another.
fn try_lock_open(file: File, exclusive: bool) -> std::io::Result<LockFile> {
    if flock(&file, exclusive, false)? {
        return Ok(LockFile::Taken(file));
    }
    let holder = flock_holder(&file);
    Ok(LockFile::Held { file, holder })
}

/// The pid of a process holding a `flock` on `file`, as `/proc/locks` lists it (Linux; None
/// elsewhere or where no holder is listed): lock files hold no pid, so that taking a lock
/// writes nothing.
fn flock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let device = format!("{:02x}:{:02x}", libc::major(meta.dev()), libc::minor(meta.dev()));
    let inode = meta.ino().to_string();
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    // "1: FLOCK  ADVISORY  WRITE 5709 fe:00:5359827 0 EOF"; a waiter's line has "->" after
    // the number.
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, "FLOCK", _, _, pid, id, ..] = fields.as_slice() else { return None };
        let (at, ino) = id.rsplit_once(':')?;
        (at == device && ino == inode).then(|| pid.parse().ok()).flatten()
    })
}

/// `flock` on `file`, shared or exclusive, waiting for it unless `!wait`: Ok(false) where it
/// did not wait and another open file holds a lock that excludes it.
pub fn flock(file: &File, exclusive: bool, wait: bool) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let operation = if exclusive { libc::LOCK_EX } else { libc::LOCK_SH };
    let operation = if wait { operation } else { operation | libc::LOCK_NB };
    loop {
        // SAFETY: flock takes the descriptor of a file that is open for the whole call.
        if unsafe { libc::flock(file.as_raw_fd(), operation) } == 0 {
            return Ok(true);
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EWOULDBLOCK) if !wait => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(error),
        }
    }
}

/// Whether a new entry can be made in the directory `dir` (a file or directory written
/// there later): a directory of a name of its own made and removed at once. The name is the
/// process's and a count, so that checks of one process at once (threads) do not collide.
pub fn probe_writable(dir: &Path) -> std::io::Result<()> {
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = dir.join(format!(".feedbench-probe-{}-{n}", std::process::id()));
    std::fs::create_dir(&probe)?;
    let _ = std::fs::remove_dir(&probe);
    Ok(())
}

/// Another process holding a lock a writer asks for, as the writer hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockHeld {
    /// The holder's pid, where known.
    pub holder: Option<u32>,
}

/// The lock of one writer of `target` (a dataset being written), on a file beside it
/// (`.<name>.lock`): taken without waiting, removed when dropped.
#[derive(Debug)]
pub struct WriterLock {
    path: PathBuf,
    _file: File,
}

impl WriterLock {
    /// Takes the lock of `target`, whose parent directory is made if absent; another writer
    /// holding it is an error naming its pid.
    pub fn beside(target: &Path) -> Result<Self> {
        Self::take(target, "lock", &mut |_: LockHeld| ControlFlow::Break(()))
    }

    /// Takes the lock of generating `target` (another lock than [`WriterLock::beside`]'s, which
    /// the generating writer then takes), waiting while another process holds it; `watch`
    /// hears the holder before the wait, and a `Break` refuses to wait (an error naming it).
    pub fn generating(target: &Path, watch: &mut dyn Watch<LockHeld>) -> Result<Self> {
        Self::take(target, "generating.lock", watch)
    }

    /// Locks `.<target's name>.<suffix>` beside `target`, waiting while another process holds
    /// it unless `watch` breaks on hearing the holder: then refused.
    fn take(target: &Path, suffix: &str, watch: &mut dyn Watch<LockHeld>) -> Result<Self> {
        use std::os::unix::fs::MetadataExt;
        let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
            return Err(DatasetError::invalid(target, "expected a directory name"));
        };
        let parent = if parent.as_os_str().is_empty() { Path::new(".") } else { parent };
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
        let path = parent.join(format!(".{}.{suffix}", name.to_string_lossy()));
        let io = |e| DatasetError::io(&path, e);
        loop {
            let file = match try_lock_file(&path, true).map_err(io)? {
                LockFile::Taken(file) => file,
                LockFile::Held { file, holder } => {
                    if watch.hear(LockHeld { holder }).is_break() {
                        let what = format!(
                            "another feedbench{} is writing it; wait for it to end",
                            holder.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
                        );
                        return Err(DatasetError::Request { root: target.to_path_buf(), what });
                    }
                    flock(&file, true, true).map_err(io)?;
                    file
                }
            };
            // The holder before removed the file as it let go: lock the one at the path now.
            let inode = file.metadata().map_or(0, |f| f.ino());
            if !std::fs::metadata(&path).is_ok_and(|m| m.ino() == inode) {
                continue;
            }
            return Ok(Self { path, _file: file });
        }
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Removed while still held, so that no one locks a file about to vanish unawares.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `path` made absolute with its symbolic links resolved, whether or not it exists yet: its
/// nearest existing ancestor resolved, and the rest appended.
pub fn resolved(path: &Path) -> Result<PathBuf> {
    let absolute = std::path::absolute(path).map_err(|e| DatasetError::io(path, e))?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else { break };
        rest.push(name.to_owned());
        existing = parent;
    }
    let mut resolved =
        std::fs::canonicalize(existing).map_err(|e| DatasetError::io(existing, e))?;
    resolved.extend(rest.iter().rev());
    Ok(resolved)
}

/// Refuses an output `out` (a directory or file a command would write) that is the dataset at
/// `dataset`, is inside it or holds it: nothing is ever written into a dataset that is read.
/// Checked before anything is created, with links resolved.
pub fn output_apart_from(out: &Path, dataset: &Path) -> Result<()> {
    if remote::is_url(dataset) {
        return Ok(());
    }
    let (out_at, dataset_at) = (resolved(out)?, resolved(dataset)?);
    let what = if out_at == dataset_at {
        "is the dataset itself, which feedbench never writes into".to_string()
    } else if out_at.starts_with(&dataset_at) {
        format!("is inside the dataset {}, which feedbench never writes into", dataset.display())
    } else if dataset_at.starts_with(&out_at) {
        format!("holds the dataset {}, which feedbench never writes into", dataset.display())
    } else {
        return Ok(());
    };
    Err(DatasetError::Request { root: out.to_path_buf(), what })
}

/// Places a copy of the local directory `local` under the URL `root`, where it is then read:
/// each file put in the bucket (replacing what was there); a web server, which takes no
/// uploads, must serve the copy already (its `meta/info.json` the local one), else it is
/// refused saying so.
pub fn place_copy(local: &Path, root: &Path) -> Result<()> {
    let object = |relative: &Path| {
        let text = format!("{}/{}", root.display(), relative.display());
        ObjectUrl::of(Path::new(&text)).map(|url| url.expect("under a URL"))
    };
    let info = Path::new("meta/info.json");
    let served = object(info)?;
    if matches!(served.store, remote::url::StoreKey::Http { .. }) {
        let ours = read_whole(&local.join(info))?;
        if remote::object::read_whole(&served).ok().as_deref() != Some(&ours[..]) {
            return Err(DatasetError::Remote {
                path: served.text.clone().into(),
                what: format!(
                    "serves no copy of {}: a web server takes no uploads, so it must serve {} \
                     at {}",
                    local.display(),
                    local.parent().unwrap_or(local).display(),
                    root.parent().unwrap_or(root).display()
                ),
            });
        }
        return Ok(());
    }
    for path in files_under(local)?.unwrap_or_default() {
        let relative = path.strip_prefix(local).expect("under the directory");
        remote::object::put_file(&object(relative)?, &path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads of one process writing one path at once each succeed, and leave it whole: one
    /// temporary file each (the LeRobot driver's files are written so by concurrent tests).
    #[test]
    fn threads_writing_one_path_at_once_each_write_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        let texts: Vec<String> = (0..8).map(|i| format!("{i}").repeat(100_000)).collect();
        std::thread::scope(|scope| {
            for text in &texts {
                let path = &path;
                scope.spawn(move || write_whole(path, text.as_bytes()).unwrap());
            }
        });
        assert!(texts.contains(&std::fs::read_to_string(&path).unwrap()));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
    }
}
