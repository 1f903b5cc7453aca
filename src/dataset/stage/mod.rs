//! Staging: copying a dataset (or some of its episodes), from a directory or a URL, to fast
//! storage such as `/dev/shm`, to tell storage cost from decode cost. Checks free space first,
//! copies files at once, verifies every copy's size (and an object's version), and never
//! overwrites: the copy goes to a new directory, whole or not at all; a stage that was stopped
//! goes on where it was the next time it is run.

mod copy;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::at_once::each_at_once;
use super::error::{DatasetError, Result};
use super::files::{expect_episode_file, files_under, is_present, probe_writable, WriterLock};
use super::layout::v3::episode_files_by_name;
use super::layout::{load_episodes, v2, v3};
use super::meta::{CodebaseVersion, Info};
use super::remote::index_cache::cache_dir;
use super::remote::{ObjectUrl, RemoteObject};
use super::setting::Setting;
use crate::timing::NoOne;

pub use copy::{is_staged, stage, staging_of, Staged, MANIFEST};

/// Where feedbench keeps fast copies and generated datasets: RAM-backed `/dev/shm/feedbench`,
/// or `feedbench` in the temporary directory where there is no `/dev/shm`.
pub fn scratch_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join("feedbench")
    } else {
        std::env::temp_dir().join("feedbench")
    }
}

/// Where `stage` copies the dataset at `root` unless told: its directory name (a URL's last
/// part) under [`scratch_dir`].
pub fn default_destination(root: &Path) -> Result<PathBuf> {
    let name = match ObjectUrl::of(root)? {
        Some(url) => url.text.trim_end_matches('/').rsplit('/').next().map(Into::into),
        None => root
            .canonicalize()
            .map_err(|e| DatasetError::io(root, e))?
            .file_name()
            .map(|n| n.to_owned()),
    };
    Ok(scratch_dir().join(name.unwrap_or_else(|| "dataset".into())))
}

/// One file a stage copies: where it lies under the root, its size, and its version where the
/// store gives one (an object's ETag).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagedFile {
    /// Relative to the root.
    pub path: PathBuf,
    /// Its size when planned.
    pub bytes: u64,
    /// An object's version (ETag) when planned; None for a local file.
    pub version: Option<String>,
}

/// What a stage copies: the files relative to the dataset root, and their bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    /// The files to copy.
    pub files: Vec<StagedFile>,
    /// Their total size.
    pub bytes: u64,
}

/// The metadata files (all of `meta/`) and the data and video files of the chosen episodes
/// (every episode when None; none with `Some(&[])`); a chosen episode's missing file is an
/// error naming it. A root whose store cannot list (a plain web server) has the metadata files
/// LeRobot writes looked for by name.
pub fn plan_stage(root: &Path, episodes: Option<&[usize]>) -> Result<StagePlan> {
    let info = Info::load(root)?;
    let all = load_episodes(root, &info)?;
    let meta = root.join("meta");
    let mut files: BTreeSet<PathBuf> = match files_under(&meta)? {
        Some(listed) => listed.into_iter().collect(),
        None => {
            let mut found: BTreeSet<PathBuf> = BTreeSet::new();
            for name in KNOWN_META {
                let path = root.join(name);
                if is_present(&path)? {
                    found.insert(path);
                }
            }
            if info.codebase_version == CodebaseVersion::V30 {
                found.extend(episode_files_by_name(root, &info)?);
            }
            found
        }
    };
    for episode in &all {
        if episodes.is_some_and(|chosen| !chosen.contains(&episode.index.0)) {
            continue;
        }
        for relative in
            std::iter::once(&episode.data_path).chain(episode.videos.values().map(|v| &v.path))
        {
            let path = root.join(relative);
            expect_episode_file(&path, episode.index.0)?;
            files.insert(path);
        }
    }
    if let Some(chosen) = episodes {
        if let Some(unknown) = chosen.iter().find(|e| !all.iter().any(|x| x.index.0 == **e)) {
            return Err(DatasetError::Request {
                root: root.to_path_buf(),
                what: format!("episode {unknown} is not in the dataset"),
            });
        }
    }
    let files: Vec<PathBuf> = files.into_iter().collect();
    let files = each_at_once(&files, copy::threads(root), |path| {
        let (bytes, version) = version_of(path)?;
        let relative = path.strip_prefix(root).expect("under the root").to_path_buf();
        Ok(StagedFile { path: relative, bytes, version })
    })?;
    Ok(StagePlan { bytes: files.iter().map(|f| f.bytes).sum(), files })
}

/// The metadata files LeRobot writes, by version, beside v3.0's episode tables.
const KNOWN_META: [&str; 6] = [
    "meta/info.json",
    "meta/stats.json",
    v2::EPISODES_FILE,
    v2::TASKS_FILE,
    v2::EPISODES_STATS_FILE,
    v3::TASKS_FILE,
];

/// The size of the file (or object) `path`, and an object's version.
fn version_of(path: &Path) -> Result<(u64, Option<String>)> {
    match ObjectUrl::of(path)? {
        Some(url) => {
            let object = RemoteObject::open(url)?;
            Ok((object.len(), object.version().map(str::to_string)))
        }
        None => Ok((std::fs::metadata(path).map_err(|e| DatasetError::io(path, e))?.len(), None)),
    }
}

/// The metadata (`meta/`) of the dataset at `root` in a local directory: `root` itself where it
/// is one; a URL root's copied into [`cache_dir`] (`meta/<its URL's digest>/`) and kept there
/// while every file's version is the same, so that a second run asks the store for versions
/// only (a HEAD each) and a changed file is copied anew, never mixed with the old ones. What
/// reads a dataset's metadata as local files (LeRobot's `LeRobotDatasetMetadata`) reads it there.
pub fn local_metadata(root: &Path) -> Result<PathBuf> {
    if ObjectUrl::of(root)?.is_none() {
        return Ok(root.to_path_buf());
    }
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(root.to_string_lossy().as_bytes());
    let name: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let to = cache_dir().join("meta").join(name);
    let plan = plan_stage(root, Some(&[]))?;
    // One process copies at a time (the ranks of a run open the same root at once); the others
    // wait, then find the copy made.
    let _one = WriterLock::generating(&to, &mut NoOne)?;
    if !is_staged(root, &to, &plan) {
        if to.exists() {
            std::fs::remove_dir_all(&to).map_err(|e| DatasetError::io(&to, e))?;
        }
        stage(root, &to, &plan)?;
    }
    Ok(to)
}

/// Bytes available to an unprivileged writer on the file system holding `path` (or its
/// nearest existing ancestor).
pub fn available_bytes(path: &Path) -> Result<u64> {
    let existing = path.ancestors().find(|p| p.exists()).unwrap_or(Path::new("/"));
    let c_path = std::ffi::CString::new(existing.as_os_str().as_encoded_bytes())
        .map_err(|_| DatasetError::invalid(existing, "path holds a NUL byte"))?;
    let mut stats = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: statvfs reads a NUL-terminated path and fills the struct it is given.
    let status = unsafe { libc::statvfs(c_path.as_ptr(), stats.as_mut_ptr()) };
    if status != 0 {
        return Err(DatasetError::io(existing, std::io::Error::last_os_error()));
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let stats = unsafe { stats.assume_init() };
    Ok(stats.f_bavail * stats.f_frsize)
}

/// Checks that `to` can take the copy `plan` makes: it does not exist (staging never
/// overwrites), a directory can be made where it goes, and its file system has room.
pub fn check_destination(to: &Path, plan: &StagePlan) -> Result<()> {
    if to.exists() {
        return Err(DatasetError::refused(to, |name| {
            format!(
                "already exists: staging never overwrites; choose another {}",
                name(Setting::To)
            )
        }));
    }
    let ancestor = to.ancestors().skip(1).find(|a| a.is_dir()).unwrap_or(Path::new("."));
    probe_writable(ancestor).map_err(|e| {
        let ancestor = ancestor.display().to_string();
        DatasetError::refused(to, move |name| {
            format!(
                "not writable: {ancestor} takes no new directory ({e}); choose a writable {}",
                name(Setting::To)
            )
        })
    })?;
    let available = available_bytes(to)?;
    if available < plan.bytes {
        return Err(DatasetError::invalid(
            to,
            format!("needs {} bytes, {available} free on its file system", plan.bytes),
        ));
    }
    Ok(())
}
