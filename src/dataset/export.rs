//! Writing one sample to disk as NumPy `.npy` files plus `sample.json`, for comparison with
//! what LeRobot returns in Python.

use std::path::{Path, PathBuf};

use ndarray::{ArrayD, IxDyn};
use ndarray_npy::WritableElement;
use serde_json::{json, Map, Value as Json};

use super::contract::Contract;
use super::error::{DatasetError, Result};
use super::sample::Sample;
use super::setting::Setting;
use super::values::{Array, Values};

/// What [`write_sample`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// The files written, `sample.json` last.
    pub files: Vec<PathBuf>,
    /// Keys that were not written as arrays, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// Writes `sample` into `out` (created if needed): `<key>.npy` per numeric array (decoded
/// cameras included, see [`Sample::decode_pixels`]), `<key>_is_pad.npy` per pad mask, and
/// `sample.json` with the scalars, the task, per video key the file and query times, and the
/// LeRobot `contract` the frames were matched by. All or nothing: the files are written into a
/// hidden directory in `out` and moved into place only once every one is complete and none
/// exists in `out` (never overwritten); after a failure (a full disk) `out` holds nothing new.
/// Directories it made for `out` are removed again after a failure.
pub fn write_sample(sample: &Sample, contract: Contract, out: &Path) -> Result<Written> {
    if out.exists() && !out.is_dir() {
        return Err(DatasetError::refused(out, |name| {
            format!(
                "exists and is not a directory: {} takes a directory (made where absent)",
                name(Setting::Out)
            )
        }));
    }
    // The outermost directory this call makes, removed (with what it holds) if it fails.
    let made = super::files::outermost_missing(out);
    let written = (|| {
        std::fs::create_dir_all(out).map_err(|e| DatasetError::io(out, e))?;
        let staging = out.join(format!(".feedbench-sample-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir(&staging).map_err(|e| DatasetError::io(&staging, e))?;
        let moved =
            write_into(sample, contract, &staging).and_then(|written| move_into(written, out));
        let _ = std::fs::remove_dir_all(&staging);
        moved
    })();
    if let (Err(_), Some(made)) = (&written, made) {
        let _ = std::fs::remove_dir_all(made);
    }
    written
}

/// Moves every file written into `out`, once none of them is there already.
fn move_into(mut written: Written, out: &Path) -> Result<Written> {
    let targets: Vec<PathBuf> = written
        .files
        .iter()
        .map(|f| out.join(f.file_name().expect("written files have names")))
        .collect();
    if let Some(taken) = targets.iter().find(|t| t.exists()) {
        return Err(DatasetError::refused(taken, |name| {
            format!("already exists: choose an empty {} directory", name(Setting::Out))
        }));
    }
    for (file, target) in written.files.iter().zip(&targets) {
        std::fs::rename(file, target).map_err(|e| DatasetError::io(target, e))?;
    }
    written.files = targets;
    Ok(written)
}

/// The files of [`write_sample`], written into the empty directory `out`.
fn write_into(sample: &Sample, contract: Contract, out: &Path) -> Result<Written> {
    let mut written = Written::default();
    let mut scalars = Map::new();
    let mut arrays = Map::new();
    for (key, array) in &sample.arrays {
        if array.shape.is_empty() {
            scalars.insert(key.clone(), scalar_json(&array.values));
        }
        if let Values::Str(strings) = &array.values {
            scalars.insert(key.clone(), json!(strings));
            written.skipped.push((key.clone(), "strings are in sample.json".into()));
            continue;
        }
        let path = new_file(out, &format!("{key}.npy"))?;
        write_array(&path, array)?;
        arrays
            .insert(key.clone(), json!({"shape": array.shape, "dtype": array.values.type_name()}));
        written.files.push(path);
    }
    for (key, mask) in &sample.pad_masks {
        let path = new_file(out, &format!("{key}_is_pad.npy"))?;
        write_npy(&path, &[mask.len()], mask.clone())?;
        written.files.push(path);
    }
    for key in sample.images.keys().chain(sample.videos.keys()) {
        if !sample.arrays.contains_key(key) {
            written.skipped.push((key.clone(), "not decoded (see Sample::decode_pixels)".into()));
        }
    }
    let mut videos = Map::new();
    for (key, frames) in &sample.videos {
        videos.insert(key.clone(), json!({"file": frames.path, "timestamps": frames.timestamps}));
    }
    let summary = json!({
        "index": sample.index,
        "episode_index": sample.episode.0,
        "task": sample.task,
        "scalars": scalars,
        "arrays": arrays,
        "pad_masks": sample.pad_masks.keys().map(|k| format!("{k}_is_pad")).collect::<Vec<_>>(),
        "videos": videos,
        "lerobot_contract": contract.to_string(),
    });
    let path = new_file(out, "sample.json")?;
    let text = serde_json::to_string_pretty(&summary).expect("JSON values serialise");
    std::fs::write(&path, text + "\n").map_err(|e| DatasetError::io(&path, e))?;
    written.files.push(path);
    Ok(written)
}

/// `dir/name`, for a file not yet written (two keys of one name would be refused).
fn new_file(dir: &Path, name: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    if path.exists() {
        return Err(DatasetError::invalid(&path, "written twice: two keys of one file name"));
    }
    Ok(path)
}

fn scalar_json(values: &Values) -> Json {
    match values {
        Values::F32(v) => json!(v[0]),
        Values::F64(v) => json!(v[0]),
        Values::I64(v) => json!(v[0]),
        Values::I32(v) => json!(v[0]),
        Values::Bool(v) => json!(v[0]),
        Values::U8(v) => json!(v[0]),
        Values::Str(v) => json!(v[0]),
    }
}

fn write_array(path: &Path, array: &Array) -> Result<()> {
    match &array.values {
        Values::F32(v) => write_npy(path, &array.shape, v.clone()),
        Values::F64(v) => write_npy(path, &array.shape, v.clone()),
        Values::I64(v) => write_npy(path, &array.shape, v.clone()),
        Values::I32(v) => write_npy(path, &array.shape, v.clone()),
        Values::Bool(v) => write_npy(path, &array.shape, v.clone()),
        Values::U8(v) => write_npy(path, &array.shape, v.clone()),
        Values::Str(_) => unreachable!("strings are written to sample.json"),
    }
}

/// Writes `values` shaped `shape` as a `.npy` file.
pub fn write_npy<T: WritableElement>(path: &Path, shape: &[usize], values: Vec<T>) -> Result<()> {
    let array = ArrayD::from_shape_vec(IxDyn(shape), values)
        .map_err(|e| DatasetError::invalid(path, format!("array of shape {shape:?}: {e}")))?;
    ndarray_npy::write_npy(path, &array)
        .map_err(|e| DatasetError::io(path, std::io::Error::other(e)))
}
