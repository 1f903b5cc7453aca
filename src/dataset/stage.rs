//! Staging: copying a dataset (or some of its episodes) to fast storage such as `/dev/shm`,
//! to tell storage cost from decode cost. Checks free space first, verifies every copied
//! file's size, and never overwrites: the copy goes to a new directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::episodes::parquet_files_under;
use super::error::{DatasetError, Result};
use super::layout::load_episodes;
use super::meta::Info;
use super::setting::Setting;
use super::write::write_atomically;

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

/// Where `stage` copies the dataset at `root` unless told: its directory name under
/// [`scratch_dir`].
pub fn default_destination(root: &Path) -> Result<PathBuf> {
    let name = root
        .canonicalize()
        .map_err(|e| DatasetError::io(root, e))?
        .file_name()
        .map(|n| n.to_owned())
        .unwrap_or_else(|| "dataset".into());
    Ok(scratch_dir().join(name))
}

/// What a stage copies: paths relative to the dataset root, and their bytes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StagePlan {
    /// Files to copy, relative to the root.
    pub files: Vec<PathBuf>,
    /// Their total size.
    pub bytes: u64,
}

/// The metadata files (all of `meta/`) and the data and video files of the chosen episodes
/// (every episode when None); a chosen episode's missing file is an error naming it.
pub fn plan_stage(root: &Path, episodes: Option<&[usize]>) -> Result<StagePlan> {
    let info = Info::load(root)?;
    let all = load_episodes(root, &info)?;
    let mut files: BTreeSet<PathBuf> = BTreeSet::new();
    let meta = root.join("meta");
    for entry in std::fs::read_dir(&meta).map_err(|e| DatasetError::io(&meta, e))? {
        let path = entry.map_err(|e| DatasetError::io(&meta, e))?.path();
        if path.is_file() {
            files.insert(path);
        }
    }
    if meta.join("episodes").is_dir() {
        files.extend(parquet_files_under(&meta.join("episodes"))?.unwrap_or_default());
    }
    for episode in &all {
        if episodes.is_some_and(|chosen| !chosen.contains(&episode.index.0)) {
            continue;
        }
        for relative in
            std::iter::once(&episode.data_path).chain(episode.videos.values().map(|v| &v.path))
        {
            let path = root.join(relative);
            super::files::expect_episode_file(&path, episode.index.0)?;
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
    let mut bytes = 0;
    let mut relative = Vec::with_capacity(files.len());
    for path in files {
        bytes += std::fs::metadata(&path).map_err(|e| DatasetError::io(&path, e))?.len();
        relative.push(path.strip_prefix(root).expect("under the root").to_path_buf());
    }
    Ok(StagePlan { files: relative, bytes })
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
    let probe = ancestor.join(format!(".feedbench-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).map_err(|e| {
        let ancestor = ancestor.display().to_string();
        DatasetError::refused(to, move |name| {
            format!(
                "not writable: {ancestor} takes no new directory ({e}); choose a writable {}",
                name(Setting::To)
            )
        })
    })?;
    let _ = std::fs::remove_dir(&probe);
    let available = available_bytes(to)?;
    if available < plan.bytes {
        return Err(DatasetError::invalid(
            to,
            format!("needs {} bytes, {available} free on its file system", plan.bytes),
        ));
    }
    Ok(())
}

/// Copies the files of `plan` from `root` to the new directory `to`, checking free space
/// first and each copy's size after; returns `to`.
pub fn stage(root: &Path, to: &Path, plan: &StagePlan) -> Result<PathBuf> {
    super::files::output_apart_from(to, root)?;
    check_destination(to, plan)?;
    write_atomically(to, false, |staging| {
        for relative in &plan.files {
            let (source, target) = (root.join(relative), staging.join(relative));
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
            }
            let copied =
                std::fs::copy(&source, &target).map_err(|e| DatasetError::io(&target, e))?;
            let expected =
                std::fs::metadata(&source).map_err(|e| DatasetError::io(&source, e))?.len();
            if copied != expected {
                return Err(DatasetError::invalid(
                    &target,
                    format!("copied {copied} bytes of {expected} from {}", source.display()),
                ));
            }
        }
        Ok(())
    })?;
    Ok(to.to_path_buf())
}
