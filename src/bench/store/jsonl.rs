//! The one JSON Lines store of every study's results (a sweep's cells, a layout study's
//! candidates): a value a line, each appended and synced as it is measured, read back with one
//! rule for the last line of an interrupted run.
//!
//! The rule: a last line without its newline that is not a value was cut short by an
//! interrupted write; it is left out when reading and cut off when the store is opened to go
//! on, so that the next value starts a line of its own. Any other line that is not a value is an
//! error naming it.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A results file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JsonlError {
    /// Reading, writing or syncing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line other than a torn last one is not a value of the expected kind.
    #[error("{}, line {line}: {what}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        what: String,
    },
}

/// A JSON Lines file opened to go on appending to.
#[derive(Debug)]
pub struct JsonlStore {
    path: PathBuf,
}

impl JsonlStore {
    /// The store at `path` and the values it holds (none where it does not exist yet); a torn
    /// last line is cut off.
    pub fn open<T: DeserializeOwned>(path: &Path) -> Result<(Self, Vec<T>), JsonlError> {
        let io = |source| JsonlError::Io { path: path.to_path_buf(), source };
        let store = Self { path: path.to_path_buf() };
        let text = match std::fs::read(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((store, Vec::new())),
            Err(e) => return Err(io(e)),
        };
        let (values, torn) = parse(path, &text)?;
        if torn {
            let keep = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            let file = OpenOptions::new().write(true).open(path).map_err(io)?;
            file.set_len(keep as u64).map_err(io)?;
            file.sync_data().map_err(io)?;
        }
        Ok((store, values))
    }

    /// The values at `path` (none where it does not exist), a torn last line left out and the
    /// file left as it is.
    pub fn open_read_only<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, JsonlError> {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            _ => read(path),
        }
    }

    /// Appends `value` as one line (the file created if absent) and syncs it, so that an
    /// interrupted run keeps it.
    pub fn append<T: Serialize>(&self, value: &T) -> Result<(), JsonlError> {
        append(&self.path, value)
    }
}

/// Appends `value` to `path` as one line (the file created if absent), synced.
pub fn append<T: Serialize>(path: &Path, value: &T) -> Result<(), JsonlError> {
    let io = |source| JsonlError::Io { path: path.to_path_buf(), source };
    let line = serde_json::to_string(value).expect("results serialise") + "\n";
    let mut file = OpenOptions::new().create(true).append(true).open(path).map_err(io)?;
    file.write_all(line.as_bytes()).map_err(io)?;
    file.sync_data().map_err(io)
}

/// Every value in `path`, in file order; a torn last line is left out.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, JsonlError> {
    let text =
        std::fs::read(path).map_err(|source| JsonlError::Io { path: path.into(), source })?;
    Ok(parse(path, &text)?.0)
}

/// The values of `text`, and whether its last line was torn (left out).
fn parse<T: DeserializeOwned>(path: &Path, text: &[u8]) -> Result<(Vec<T>, bool), JsonlError> {
    let ends_whole = text.last().is_none_or(|&b| b == b'\n');
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    let mut values = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match value_of(line) {
            Ok(value) => values.push(value),
            Err(_) if i + 1 == lines.len() && !ends_whole => return Ok((values, true)),
            Err(what) => {
                return Err(JsonlError::Line { path: path.to_path_buf(), line: i + 1, what });
            }
        }
    }
    Ok((values, false))
}

/// One line's value, or what is wrong with it, naming the field (`cell.workers`) where the
/// line is JSON but a field is not what `T` expects.
fn value_of<T: DeserializeOwned>(line: &[u8]) -> Result<T, String> {
    let mut json = serde_json::Deserializer::from_slice(line);
    let value = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let field = e.path().to_string();
        match field.as_str() {
            "." => e.into_inner().to_string(),
            _ => format!("`{field}`: {}", e.into_inner()),
        }
    })?;
    json.end().map_err(|e| e.to_string())?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_values_read_back_and_a_torn_last_line_is_cut_off_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let (store, none) = JsonlStore::open::<u32>(&path).unwrap();
        assert!(none.is_empty() && !path.exists(), "nothing is made before the first value");
        store.append(&1u32).unwrap();
        store.append(&2u32).unwrap();
        // An interrupted write: half a line, no newline.
        std::fs::write(&path, "1\n2\n[3, 4").unwrap();
        assert!(read::<Vec<u32>>(&path).is_err(), "1 is not a list: named");
        assert_eq!(read::<u32>(&path).unwrap(), [1, 2], "the torn line is left out");
        let (store, values) = JsonlStore::open::<u32>(&path).unwrap();
        assert_eq!(values, [1, 2]);
        store.append(&5u32).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "1\n2\n5\n");
    }

    #[test]
    fn a_bad_line_that_is_not_the_torn_last_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        for text in ["1\nnope\n2\n", "1\n2\nnope\n"] {
            std::fs::write(&path, text).unwrap();
            let error = read::<u32>(&path).unwrap_err().to_string();
            assert!(error.contains("line ") && error.contains("r.jsonl"), "{error}");
            assert!(JsonlStore::open::<u32>(&path).is_err());
            assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "left as it was");
        }
        // JSON, but a field of the wrong type: the field is named.
        #[derive(Debug, serde::Deserialize)]
        struct Cell {
            #[allow(dead_code)]
            workers: u32,
        }
        #[derive(Debug, serde::Deserialize)]
        struct Result {
            #[allow(dead_code)]
            cell: Cell,
        }
        std::fs::write(&path, "{\"cell\": {\"workers\": \"two\"}}\n").unwrap();
        let error = read::<Result>(&path).unwrap_err().to_string();
        assert!(
            error.contains("line 1") && error.contains("`cell.workers`: invalid type"),
            "{error}"
        );
        std::fs::write(&path, "1 2\n").unwrap();
        assert!(
            read::<u32>(&path).unwrap_err().to_string().contains("trailing"),
            "one value a line"
        );
    }
}
