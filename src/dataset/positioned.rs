//! A file or object read by position only ([`PositionedFile`]): a local file by positioned
//! reads, an object by ranged GETs of the version first seen, what was fetched ahead (a parquet
//! footer, a batch's frames, a sequential reader's read-ahead) served again without a request.

use std::fs::File;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::dataset::error::{DatasetError, Result};
use crate::dataset::remote::index_cache::{self, IndexKind};
use crate::dataset::remote::{self, ObjectUrl, RemoteObject};

/// Opens the local file `path` for reading; what is not a regular file (after symlinks) is an
/// error naming it and what is there instead, before anything could block on it. A URL is
/// refused: the files read this way (feedbench's raw frames, caches) are local only.
pub fn open_regular(path: &Path) -> Result<File> {
    if remote::is_url(path) {
        return Err(DatasetError::Remote {
            path: path.to_path_buf(),
            what: "expected a local file here (this file is read from local paths only)".into(),
        });
    }
    let metadata = std::fs::metadata(path).map_err(|e| DatasetError::io(path, e))?;
    let kind = metadata.file_type();
    if !kind.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_block_device() || kind.is_char_device() {
            "a device"
        } else {
            "something other than a file"
        };
        return Err(DatasetError::invalid(path, format!("is {what}, expected a regular file")));
    }
    File::open(path).map_err(|e| DatasetError::io(path, e))
}

/// Bytes of a file or an object fetched ahead (a parquet footer, a row group's column chunks),
/// by offset.
type Spans = Arc<[(u64, Bytes)]>;

/// A file (or object) read by position only, shared by threads without a cursor or a map: a
/// file that shrinks under a reader gives an error naming what was short, never a signal (as
/// reading a map past a shrunk end does); an object is read by ranged GETs of the version
/// first seen. Parquet reads its pages through it.
#[derive(Debug, Clone)]
pub struct PositionedFile {
    source: Source,
    len: u64,
    path: Arc<Path>,
}

#[derive(Debug, Clone)]
enum Source {
    File(Arc<File>),
    Object { object: Arc<RemoteObject>, spans: Spans, recent: Recent },
}

/// The chunks sequential readers of one object fetched ahead (`READ_AHEAD` each), newest last,
/// shared by every reader of it: a parquet reader opens one reader per column chunk, and the
/// chunks of a small file lie within one read-ahead of each other.
type Recent = Arc<Mutex<Vec<(u64, Bytes)>>>;

/// Read-ahead chunks kept per object (only chunks of `READ_AHEAD` bytes or fewer: a larger
/// read is a column chunk's own).
const RECENT_KEPT: usize = 16;

/// What an object's reader fetches ahead of a read that no span holds: parquet's footer at
/// open, and the least a sequential reader (page headers) asks for.
const READ_AHEAD: u64 = 64 * 1024;

/// An object of at most this many bytes is fetched whole with its opening (its index).
const WHOLE_UP_TO: u64 = 4 * READ_AHEAD;

impl PositionedFile {
    /// Opens the file (see [`open_regular`]) or object `path`; an object's last 64 KiB
    /// (`READ_AHEAD`: a parquet footer), or all of it up to 256 KiB (`WHOLE_UP_TO`), are
    /// fetched with its opening, or taken from the index cache where an earlier run kept them
    /// for its version.
    pub fn open(path: &Path) -> Result<Self> {
        let file = Self::open_bare(path)?;
        let Source::Object { object, recent, .. } = &file.source else { return Ok(file) };
        // A small file (metadata's parquet files) whole: its index is all of it.
        let tail = match file.len <= WHOLE_UP_TO {
            true => 0,
            false => file.len - READ_AHEAD,
        };
        let read = |f: &Self| Ok(f.read_range(tail..f.len)?.to_vec());
        let mut bytes = file.index(IndexKind::ParquetTail, read)?;
        // Kept by a feedbench that read another length ahead: read as this one does.
        if bytes.len() as u64 != file.len - tail {
            bytes = read(&file)?;
        }
        let spans: Spans = Arc::from([(tail, Bytes::from(bytes))]);
        let (object, recent) = (object.clone(), recent.clone());
        Ok(Self { source: Source::Object { object, spans, recent }, ..file })
    }

    /// Opens the file or object `path` fetching nothing ahead: for a reader that reads its own
    /// index ([`PositionedFile::index`]).
    pub fn open_bare(path: &Path) -> Result<Self> {
        let path: Arc<Path> = Arc::from(path);
        if let Some(url) = ObjectUrl::of(&path)? {
            let object = Arc::new(RemoteObject::open(url)?);
            let len = object.len();
            let (spans, recent): (Spans, Recent) = (Arc::from([]), Recent::default());
            return Ok(Self { source: Source::Object { object, spans, recent }, len, path });
        }
        let file = open_regular(&path)?;
        let len = file.metadata().map_err(|e| DatasetError::io(path.to_path_buf(), e))?.len();
        Ok(Self { source: Source::File(Arc::new(file)), len, path })
    }

    /// The `kind` index of this file as `make` reads it: an object's kept on local disk for its
    /// version (ETag) and taken from there by the runs after (see [`remote::index_cache`]); a
    /// local file's, or an object's without a version, read every time.
    pub fn index(
        &self,
        kind: IndexKind,
        make: impl FnOnce(&Self) -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        let Source::Object { object, .. } = &self.source else { return make(self) };
        let Some(version) = object.version() else { return make(self) };
        let url = &object.url().text;
        if let Some(kept) = index_cache::cached(url, version, kind) {
            return Ok(kept);
        }
        let bytes = make(self)?;
        index_cache::keep(url, version, kind, &bytes);
        Ok(bytes)
    }

    /// Its path (or URL).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its length when opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it was empty when opened.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes `range`: a positioned read of a file, or of an object a span fetched ahead
    /// where one holds them, else one ranged GET.
    pub fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        match &self.source {
            Source::File(file) => {
                use std::os::unix::fs::FileExt;
                let mut buffer = vec![0; (range.end - range.start) as usize];
                file.read_exact_at(&mut buffer, range.start).map_err(|e| {
                    let what = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        "the file is shorter than its header says (changed or truncated while \
                         read?)"
                            .to_string()
                    } else {
                        e.to_string()
                    };
                    DatasetError::invalid(
                        &self.path,
                        format!("bytes {}..{}: {what}", range.start, range.end),
                    )
                })?;
                Ok(buffer.into())
            }
            Source::Object { object, spans, recent } => {
                // The spans first: a batch's frames are read from them, without the lock.
                let kept = || held(&recent.lock().unwrap_or_else(|e| e.into_inner()), &range);
                match held(spans, &range).or_else(kept) {
                    Some(bytes) => Ok(bytes),
                    None => {
                        remote::stats::needed(range.end - range.start);
                        object.read(range)
                    }
                }
            }
        }
    }

    /// The same file with `ranges` fetched ahead, for the reads that follow (a row group's
    /// column chunks, a batch's frames): an object's fetched as `fetch` says (ranges near each
    /// other as one, several requests at once); a local file is read where it is, as before.
    pub fn fetched(&self, ranges: &[Range<u64>], fetch: &remote::Fetch) -> Result<Self> {
        let Source::Object { object, spans, recent } = &self.source else {
            return Ok(self.clone());
        };
        let wanted: Vec<Range<u64>> =
            ranges.iter().filter(|r| held(spans, r).is_none()).cloned().collect();
        // Needed: their union (a batch's frames of one GOP share its keyframe's bytes).
        let union = remote::Fetch { gap: 0, ..*fetch }.merged(&wanted);
        remote::stats::needed(union.iter().map(|r| r.end - r.start).sum());
        let fetched = object.read_ranges(&wanted, fetch)?;
        let spans: Spans = spans.iter().cloned().chain(fetched).collect();
        let (object, recent) = (object.clone(), recent.clone());
        Ok(Self { source: Source::Object { object, spans, recent }, ..self.clone() })
    }

    /// An object's bytes from `position` to the end of a span or read-ahead chunk that holds
    /// it; else `wanted` bytes from there (at most to its end) fetched and kept as a chunk for
    /// the readers after. A local file's are read where they are.
    fn read_ahead(&self, position: u64, wanted: u64) -> Result<Bytes> {
        let end = (position + wanted).min(self.len);
        let Source::Object { spans, recent, .. } = &self.source else {
            return self.read_range(position..end);
        };
        let from = |chunks: &[(u64, Bytes)]| {
            chunks.iter().rev().find_map(|(start, bytes)| {
                let within = position.checked_sub(*start)? as usize;
                (within < bytes.len()).then(|| bytes.slice(within..))
            })
        };
        if let Some(bytes) = from(spans) {
            return Ok(bytes);
        }
        if let Some(bytes) = from(&recent.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(bytes);
        }
        let bytes = self.read_range(position..end)?;
        if bytes.len() as u64 <= READ_AHEAD {
            let mut kept = recent.lock().unwrap_or_else(|e| e.into_inner());
            if kept.len() == RECENT_KEPT {
                kept.remove(0);
            }
            kept.push((position, bytes.clone()));
        }
        Ok(bytes)
    }
}

/// The bytes `range` where one of `spans` holds them all.
fn held(spans: &[(u64, Bytes)], range: &Range<u64>) -> Option<Bytes> {
    spans.iter().find_map(|(start, bytes)| {
        let end = start + bytes.len() as u64;
        (*start <= range.start && range.end <= end)
            .then(|| bytes.slice((range.start - start) as usize..(range.end - start) as usize))
    })
}

impl parquet::file::reader::Length for PositionedFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl parquet::file::reader::ChunkReader for PositionedFile {
    type T = ReadAt;

    fn get_read(&self, start: u64) -> parquet::errors::Result<ReadAt> {
        Ok(ReadAt { file: self.clone(), position: start, ahead: Bytes::new() })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.read_range(start..start + length as u64)
            .map_err(|e| parquet::errors::ParquetError::General(e.to_string()))
    }
}

/// A reader of a [`PositionedFile`] from an offset on: a file read where it is asked, an
/// object fetched 64 KiB (`READ_AHEAD`) bytes (or a span's rest) at a time.
#[derive(Debug)]
pub struct ReadAt {
    file: PositionedFile,
    position: u64,
    /// Fetched bytes from `position` on, not yet read.
    ahead: Bytes,
}

impl std::io::Read for ReadAt {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        if buffer.is_empty() {
            return Ok(0);
        }
        let len = self.file.len;
        if let Source::File(file) = &self.file.source {
            use std::os::unix::fs::FileExt;
            let read = file.read_at(buffer, self.position)?;
            if read == 0 && self.position < len {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "bytes from {} on are gone: the file is shorter than its footer says \
                         (changed or truncated while read?)",
                        self.position
                    ),
                ));
            }
            self.position += read as u64;
            return Ok(read);
        }
        if self.ahead.is_empty() && self.position < len {
            let wanted = (buffer.len() as u64).max(READ_AHEAD);
            self.ahead = self
                .file
                .read_ahead(self.position, wanted)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        let read = buffer.len().min(self.ahead.len());
        buffer[..read].copy_from_slice(&self.ahead[..read]);
        self.ahead = self.ahead.slice(read..);
        self.position += read as u64;
        Ok(read)
    }
}
