//! The copy a stage makes: files at once into a hidden directory beside the destination
//! (`.NAME.staging`), each written to `FILE.partial`, its size (and an object's version)
//! checked, then renamed to its name; the directory renamed to the destination once every file
//! is there. A stage that was stopped (killed, a dropped link, a full disk) leaves its whole
//! files there with the plan it followed, and the next stage of the same files goes on from
//! them; a stage of other files (another source, a changed object) starts over.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{check_destination, StagePlan, StagedFile};
use crate::dataset::at_once::each_at_once;
use crate::dataset::error::{DatasetError, Result};
use crate::dataset::files::{output_apart_from, write_whole, WriterLock};
use crate::dataset::remote::{is_url, ObjectUrl, RemoteObject};

/// The plan a stage follows, kept in its staging directory and, once it is complete, in the
/// copy (`.feedbench-staged.json`): its source and each file with its size and version.
pub const MANIFEST: &str = ".feedbench-staged.json";

/// What an object is read by, a range at a time.
const RANGE: u64 = 8 * 1024 * 1024;

/// A finished stage.
#[derive(Debug, Clone, PartialEq)]
pub struct Staged {
    /// The copy.
    pub to: PathBuf,
    /// Files an earlier, stopped stage had copied whole, kept.
    pub kept: usize,
}

/// The plan with its source, as the manifest holds it.
#[derive(serde::Serialize, serde::Deserialize, PartialEq)]
struct Manifest {
    source: String,
    plan: StagePlan,
}

/// Copies the files of `plan` from `root` (a directory or a URL) to the new directory `to`,
/// checking free space first and each copy's size after, going on from what a stopped stage of
/// the same files left; returns where the copy is and what was kept.
pub fn stage(root: &Path, to: &Path, plan: &StagePlan) -> Result<Staged> {
    output_apart_from(to, root)?;
    let _alone = WriterLock::beside(to)?;
    let staging =
        staging_of(to).ok_or_else(|| DatasetError::invalid(to, "expected a directory name"))?;
    let manifest = Manifest { source: root.to_string_lossy().into_owned(), plan: plan.clone() };
    let text = serde_json::to_string_pretty(&manifest).expect("a plan serialises");
    let kept = match std::fs::read(staging.join(MANIFEST)) {
        Ok(earlier)
            if serde_json::from_slice::<Manifest>(&earlier).is_ok_and(|m| m == manifest) =>
        {
            whole_files(&staging, plan)
        }
        _ => {
            if staging.exists() {
                std::fs::remove_dir_all(&staging).map_err(|e| DatasetError::io(&staging, e))?;
            }
            0
        }
    };
    let left = StagePlan {
        files: plan.files.iter().filter(|f| !is_whole(&staging, f)).cloned().collect(),
        bytes: 0,
    };
    check_destination(
        to,
        &StagePlan { bytes: left.files.iter().map(|f| f.bytes).sum(), ..left.clone() },
    )?;
    std::fs::create_dir_all(&staging).map_err(|e| DatasetError::io(&staging, e))?;
    write_whole(&staging.join(MANIFEST), text.as_bytes())
        .map_err(|e| DatasetError::io(staging.join(MANIFEST), e))?;
    each_at_once(&left.files, threads(root), |file| copy_file(root, &staging, file))
        .map_err(|e| kept_for_next_time(e, &staging))?;
    std::fs::rename(&staging, to).map_err(|e| DatasetError::io(to, e))?;
    Ok(Staged { to: to.to_path_buf(), kept })
}

/// Where a stage into `to` copies its files before the directory is whole: `.NAME.staging`
/// beside it (None where `to` has no name).
pub fn staging_of(to: &Path) -> Option<PathBuf> {
    let name = to.file_name()?;
    Some(to.with_file_name(format!(".{}.staging", name.to_string_lossy())))
}

/// Whether `to` holds a finished stage of `plan` from `root` (its manifest says so).
pub fn is_staged(root: &Path, to: &Path, plan: &StagePlan) -> bool {
    let manifest = Manifest { source: root.to_string_lossy().into_owned(), plan: plan.clone() };
    std::fs::read(to.join(MANIFEST))
        .ok()
        .and_then(|text| serde_json::from_slice::<Manifest>(&text).ok())
        .is_some_and(|staged| staged == manifest)
}

/// How many files are copied at once: a store's latency is hidden by many requests in flight,
/// a local disk is read best by a few.
pub(super) fn threads(root: &Path) -> usize {
    if is_url(root) {
        8
    } else {
        2
    }
}

/// Whether `file` lies whole in `staging` (under its name, its size as planned).
fn is_whole(staging: &Path, file: &StagedFile) -> bool {
    std::fs::metadata(staging.join(&file.path)).is_ok_and(|m| m.is_file() && m.len() == file.bytes)
}

/// The files of `plan` an earlier stage left whole in `staging`; what else it left (partial
/// files) is removed.
fn whole_files(staging: &Path, plan: &StagePlan) -> usize {
    for file in &plan.files {
        let _ = std::fs::remove_file(partial(&staging.join(&file.path)));
    }
    plan.files.iter().filter(|f| is_whole(staging, f)).count()
}

/// Where `target` is written before it is whole.
fn partial(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    target.with_file_name(name)
}

/// The error of a stopped stage, saying that its whole files are kept for the next run.
fn kept_for_next_time(error: DatasetError, staging: &Path) -> DatasetError {
    DatasetError::Request {
        root: staging.to_path_buf(),
        what: format!(
            "{error}; the files copied whole so far are kept here: run the same stage again to \
             go on from them"
        ),
    }
}

/// Copies `file` from `root` into `staging`: written to its `.partial`, its size (and an
/// object's version, every range read of the version planned) checked, then renamed.
fn copy_file(root: &Path, staging: &Path, file: &StagedFile) -> Result<()> {
    let (source, target) = (root.join(&file.path), staging.join(&file.path));
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DatasetError::io(parent, e))?;
    }
    let temporary = partial(&target);
    let copied = match ObjectUrl::of(&source)? {
        Some(url) => copy_object(RemoteObject::open(url)?, file, &temporary),
        None => std::fs::copy(&source, &temporary).map_err(|e| DatasetError::io(&temporary, e)),
    };
    let checked = copied.and_then(|bytes| match bytes == file.bytes {
        true => std::fs::rename(&temporary, &target).map_err(|e| DatasetError::io(&target, e)),
        false => Err(DatasetError::invalid(
            &target,
            format!("copied {bytes} bytes of {} from {}", file.bytes, source.display()),
        )),
    });
    if checked.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    checked
}

/// Writes `object` to `to` a range at a time (synced): its bytes, which must be of the version
/// and size planned.
fn copy_object(object: RemoteObject, file: &StagedFile, to: &Path) -> Result<u64> {
    if object.version() != file.version.as_deref() || object.len() != file.bytes {
        return Err(DatasetError::Remote {
            path: object.url().text.clone().into(),
            what: format!(
                "changed since the stage was planned ({} bytes, version {:?} then; {} bytes, \
                 version {:?} now): run the stage again",
                file.bytes,
                file.version,
                object.len(),
                object.version()
            ),
        });
    }
    let io = |e| DatasetError::io(to, e);
    let mut out = std::fs::File::create(to).map_err(io)?;
    let mut at = 0;
    while at < object.len() {
        let end = (at + RANGE).min(object.len());
        out.write_all(&object.read(at..end)?).map_err(io)?;
        at = end;
    }
    out.sync_all().map_err(io)?;
    Ok(at)
}
