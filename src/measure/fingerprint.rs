//! What identifies a dataset's content without reading its frames: its files' paths and
//! sizes and the bytes of its metadata, hashed. Part of a result's workload
//! ([`super::workload`]): a dataset regenerated identically, copied to another directory or
//! read from a bucket fingerprints alike; one with a changed file does not.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::dataset::files::{is_url, read_whole};
use crate::dataset::stage::plan_stage;

/// What identifies a dataset's content without reading its frames: its files' relative paths
/// and sizes, and the bytes of its metadata (`meta/`), hashed. Modification times are left
/// out: a dataset regenerated identically (as CI does) is the same dataset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetFingerprint {
    /// Files under the root.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// SHA-256 of the sorted paths and sizes and of every `meta/` file's bytes, hex.
    pub sha256: String,
}

/// A dataset that cannot be fingerprinted: the file and what failed.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {what}")]
pub struct FingerprintError {
    /// The file.
    pub path: PathBuf,
    /// What failed.
    pub what: String,
}

impl FingerprintError {
    fn new(path: &Path, what: impl Into<String>) -> Self {
        Self { path: path.to_path_buf(), what: what.into() }
    }
}

impl DatasetFingerprint {
    /// Its parts as a workload's parameters: `dataset.sha256`, `dataset.files`,
    /// `dataset.bytes`.
    pub fn parameters(&self) -> [(String, String); 3] {
        [
            ("dataset.sha256".into(), self.sha256.clone()),
            ("dataset.files".into(), self.files.to_string()),
            ("dataset.bytes".into(), self.bytes.to_string()),
        ]
    }

    /// The fingerprint of the dataset at `root`.
    /// A URL root's files are those a stage of it copies (its metadata and episode files,
    /// which its store may not list), so that a local copy fingerprints alike.
    pub fn of(root: &Path) -> Result<Self, FingerprintError> {
        let mut files = Vec::new();
        if is_url(root) {
            let plan =
                plan_stage(root, None).map_err(|e| FingerprintError::new(root, e.to_string()))?;
            files.extend(plan.files.into_iter().map(|f| (f.path, f.bytes)));
        } else {
            list_files(root, Path::new(""), &mut files)?;
        }
        files.sort();
        let mut hash = Sha256::new();
        let mut bytes = 0;
        for (relative, size) in &files {
            hash.update(relative.as_os_str().as_encoded_bytes());
            hash.update(size.to_le_bytes());
            bytes += size;
            if relative.starts_with("meta") {
                let path = root.join(relative);
                let content =
                    read_whole(&path).map_err(|e| FingerprintError::new(&path, e.to_string()))?;
                hash.update(&content);
            }
        }
        Ok(Self { files: files.len(), bytes, sha256: format!("{:x}", hash.finalize()) })
    }
}

/// Appends every file under `root/relative` as (relative path, size), following links.
fn list_files(
    root: &Path,
    relative: &Path,
    out: &mut Vec<(PathBuf, u64)>,
) -> Result<(), FingerprintError> {
    let dir = root.join(relative);
    let entries =
        std::fs::read_dir(&dir).map_err(|e| FingerprintError::new(&dir, e.to_string()))?;
    for entry in entries {
        let entry = entry.map_err(|e| FingerprintError::new(&dir, e.to_string()))?;
        let path = relative.join(entry.file_name());
        let full = root.join(&path);
        let metadata =
            std::fs::metadata(&full).map_err(|e| FingerprintError::new(&full, e.to_string()))?;
        if metadata.is_dir() {
            list_files(root, &path, out)?;
        } else {
            out.push((path, metadata.len()));
        }
    }
    Ok(())
}
