//! The header of an mp4 file without its media data: its top-level boxes walked by ranged reads
//! (a box's size, then the next), every box but the media data (`mdat`, and padding) read
//! whole. A remote file's index costs a few requests, wherever it sits (faststart or at the
//! end), and never the download of its frames.

use std::ops::Range;

use bytes::Bytes;

use crate::dataset::error::{DatasetError, Result};
use crate::dataset::files::PositionedFile;

/// What the first read of a file takes: most headers of faststart files lie within it.
const FIRST_READ: u64 = 64 * 1024;

/// Boxes that hold media data or padding, skipped by their size.
const SKIPPED: [&[u8; 4]; 3] = [b"mdat", b"free", b"skip"];

/// The top-level boxes of `file` but its media data and padding, one after the other as the
/// file holds them: what an mp4 parser needs of it (sample offsets stay the file's). A box that
/// reaches past the file's end is an error naming the file.
pub fn header_boxes(file: &PositionedFile) -> Result<Vec<u8>> {
    let reader = FirstRead::of(file)?;
    let mut header = Vec::new();
    for (kind, range) in walk(&reader)? {
        if !SKIPPED.contains(&&kind) {
            header.extend_from_slice(&reader.read(range)?);
        }
    }
    Ok(header)
}

/// Whether `file`'s index (`moov`) lies before its media data (`mdat`): a "faststart" file,
/// whose reader finds the index in its first read.
pub fn index_at_front(file: &PositionedFile) -> Result<bool> {
    let boxes = walk(&FirstRead::of(file)?)?;
    let at = |kind: &[u8; 4]| boxes.iter().position(|(k, _)| k == kind);
    Ok(match (at(b"moov"), at(b"mdat")) {
        (Some(moov), Some(mdat)) => moov < mdat,
        (Some(_), None) => true,
        _ => false,
    })
}

/// A file read through its first [`FIRST_READ`] bytes, read once.
struct FirstRead<'a> {
    file: &'a PositionedFile,
    first: Bytes,
}

impl<'a> FirstRead<'a> {
    fn of(file: &'a PositionedFile) -> Result<Self> {
        Ok(Self { file, first: file.read_range(0..file.len().min(FIRST_READ))? })
    }

    fn read(&self, range: Range<u64>) -> Result<Bytes> {
        if range.end <= self.first.len() as u64 {
            return Ok(self.first.slice(range.start as usize..range.end as usize));
        }
        self.file.read_range(range)
    }
}

/// The top-level boxes of the file, each its type and byte range, in the file's order.
fn walk(reader: &FirstRead<'_>) -> Result<Vec<([u8; 4], Range<u64>)>> {
    let file = reader.file;
    let len = file.len();
    let truncated = |what: String| {
        DatasetError::invalid(file.path(), format!("not a complete mp4 file (truncated?): {what}"))
    };
    let mut boxes = Vec::new();
    let mut at = 0u64;
    while at < len {
        if len - at < 8 {
            return Err(truncated(format!("{} bytes after the last box at byte {at}", len - at)));
        }
        let head = reader.read(at..(at + 16).min(len))?;
        let kind: [u8; 4] = head[4..8].try_into().expect("8 bytes read");
        let (size, head_len) = match u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) {
            0 => (len - at, 8),
            1 if head.len() >= 16 => {
                (u64::from_be_bytes(head[8..16].try_into().expect("16 bytes")), 16)
            }
            1 => return Err(truncated(format!("the box at byte {at} has no 64-bit size"))),
            size => (u64::from(size), 8),
        };
        let name = String::from_utf8_lossy(&kind).into_owned();
        if size < head_len {
            return Err(DatasetError::invalid(
                file.path(),
                format!("malformed mp4: box `{name}` at byte {at} says it is {size} bytes"),
            ));
        }
        let end = at.checked_add(size).filter(|&end| end <= len).ok_or_else(|| {
            truncated(format!("box `{name}` at byte {at} is {size} bytes; the file ends at {len}"))
        })?;
        boxes.push((kind, at..end));
        at = end;
    }
    Ok(boxes)
}
