//! The indexes of a remote root's files kept on local disk across runs — an MP4's header boxes,
//! a parquet file's footer — keyed by the object's URL and version (its ETag), so that a second
//! run opens each file with one HEAD instead of fetching its index again, and an object that
//! changed (another ETag) is fetched anew, never read with the old one's index. Each entry
//! carries its length and SHA-256: one damaged or cut short reads as missing, not as an index.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

/// Where feedbench keeps what it caches across runs: `FEEDBENCH_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/feedbench`, else `~/.cache/feedbench`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FEEDBENCH_CACHE_DIR") {
        return dir.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into())).join(".cache")
    });
    base.join("feedbench")
}

/// Which index of a file an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexKind {
    /// An MP4's top-level boxes but its media data.
    Mp4Header,
    /// The bytes a parquet file's opening fetches from its end (its footer among them).
    ParquetTail,
}

impl IndexKind {
    fn name(self) -> &'static str {
        match self {
            Self::Mp4Header => "mp4-header",
            Self::ParquetTail => "parquet-tail",
        }
    }
}

/// The file under `base` holding the `kind` index of the object at `url` in its `version`.
fn entry(base: &Path, url: &str, version: &str, kind: IndexKind) -> PathBuf {
    let digest = Sha256::digest(format!("{url}\0{version}\0{}", kind.name()).as_bytes());
    let name: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    base.join("index").join(kind.name()).join(name)
}

/// The `kind` index of the object at `url` in its `version`, where an earlier run kept it whole.
pub fn cached(url: &str, version: &str, kind: IndexKind) -> Option<Vec<u8>> {
    cached_in(&cache_dir(), url, version, kind)
}

/// [`cached`] from the cache at `base`.
fn cached_in(base: &Path, url: &str, version: &str, kind: IndexKind) -> Option<Vec<u8>> {
    let stored = std::fs::read(entry(base, url, version, kind)).ok()?;
    let (len, rest) = stored.split_at_checked(8)?;
    let (digest, bytes) = rest.split_at_checked(32)?;
    let len = u64::from_le_bytes(len.try_into().ok()?);
    (len == bytes.len() as u64 && Sha256::digest(bytes).as_slice() == digest)
        .then(|| bytes.to_vec())
}

/// Keeps `bytes` as the `kind` index of the object at `url` in its `version`, written whole
/// or not at all (readers at once see the old entry or the new); a cache that cannot be written
/// (a read-only home) is passed over: the index is fetched again next time.
pub fn keep(url: &str, version: &str, kind: IndexKind, bytes: &[u8]) {
    let _ = write_atomically(&entry(&cache_dir(), url, version, kind), bytes);
}

/// Writes `bytes` with their length and digest to a name of this writer's own beside `path`,
/// then renames it there.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().expect("an entry lies in a directory");
    std::fs::create_dir_all(dir)?;
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let partial = dir.join(format!(".{}.{n}.partial", std::process::id()));
    let mut stored = Vec::with_capacity(40 + bytes.len());
    stored.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    stored.extend_from_slice(&Sha256::digest(bytes));
    stored.extend_from_slice(bytes);
    let written = std::fs::write(&partial, &stored).and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_read_back_for_its_version_only_and_a_damaged_one_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        let url = "s3://bucket/ds/videos/a.mp4";
        let read = |version, kind| cached_in(base, url, version, kind);
        assert_eq!(read("\"e1\"", IndexKind::Mp4Header), None);
        let path = entry(base, url, "\"e1\"", IndexKind::Mp4Header);
        write_atomically(&path, b"moov...").unwrap();
        assert_eq!(read("\"e1\"", IndexKind::Mp4Header).as_deref(), Some(&b"moov..."[..]));
        assert_eq!(read("\"e2\"", IndexKind::Mp4Header), None, "another version");
        assert_eq!(read("\"e1\"", IndexKind::ParquetTail), None, "another index");
        // Cut short, or a byte changed: missing.
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() - 1]).unwrap();
        assert_eq!(read("\"e1\"", IndexKind::Mp4Header), None);
        let mut changed = whole.clone();
        *changed.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &changed).unwrap();
        assert_eq!(read("\"e1\"", IndexKind::Mp4Header), None);
    }
}
