//! Frames kept in shared memory, for the worker processes of a PyTorch DataLoader: one file in
//! `/dev/shm` (the temporary directory where there is none), made by the process that opens the
//! dataset and mapped by every worker, forked or spawned. Frames are kept where they fit and
//! never evicted — a cache for the small datasets users ask to hold in RAM, whose epochs after
//! the first then decode nothing.
//!
//! The file is a header, a table of entries and a slot of frame bytes per entry. A frame's key
//! hashes to an entry; a writer takes the first empty one of the next [`PROBES`] by a
//! compare-and-swap, writes the frame, then publishes it (release); a reader stops at the first
//! empty entry and copies a published frame whose key is its own (acquire). Published entries
//! never change, so a reader copies without a lock. Each slot's memory is reserved
//! (`fallocate`) before it is written: a full `/dev/shm` stops the cache growing (said in
//! [`SharedFramesStats::full`]) instead of killing the process with SIGBUS. The process that
//! made the file removes it when its [`SharedFrames`] is dropped; files left by processes that
//! died are removed by the next one made.

use std::fs::{File, OpenOptions};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::{MmapOptions, MmapRaw};

use super::{FrameKey, FrameStore};
use crate::dataset::error::{DatasetError, Result};
use crate::dataset::video::FrameBuffer;

/// Entries a key may be kept in or looked for, from the one it hashes to.
pub const PROBES: u64 = 32;
/// The file's first bytes.
const MAGIC: [u8; 8] = *b"FBFRAME1";
/// The file names' start (then the maker's process id).
const PREFIX: &str = "feedbench-frames-";
const HEADER_BYTES: u64 = 128;
const ENTRY_BYTES: u64 = 32;
const PAGE_BYTES: u64 = 4096;
/// A slot's bytes are a multiple of this.
const SLOT_ALIGN: u64 = 64;

/// An entry's states.
const EMPTY: u32 = 0;
const WRITING: u32 = 1;
const READY_U8: u32 = 2;
const READY_F32: u32 = 3;

/// The header's fields: their offsets.
mod at {
    pub const SLOT_BYTES: u64 = 8;
    pub const SLOTS: u64 = 16;
    pub const HELD: u64 = 24;
    pub const HELD_BYTES: u64 = 32;
    pub const COPIED: u64 = 40;
    pub const NOT_KEPT: u64 = 48;
    pub const FULL: u64 = 56;
}

/// What a shared frame store holds and has done, summed over every process using it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedFramesStats {
    /// Frames it can hold.
    pub slots: u64,
    /// Bytes of a slot (the largest frame it keeps).
    pub slot_bytes: u64,
    /// Frames held.
    pub held: u64,
    /// Bytes of the frames held.
    pub held_bytes: u64,
    /// Frames copied out instead of decoded.
    pub copied: u64,
    /// Frames decoded but not kept: no room near their entry, or larger than a slot.
    pub not_kept: u64,
    /// Whether the file system refused to give the cache more memory (then nothing more is kept).
    pub full: bool,
}

/// Frames kept in a file of shared memory, for every process that maps it.
pub struct SharedFrames {
    map: MmapRaw,
    file: File,
    path: PathBuf,
    slots: u64,
    slot_bytes: u64,
    data_offset: u64,
    /// The process that made the file, which removes it; None where it was opened.
    owner: Option<u32>,
}

// Safety: the mapping is shared memory whose every concurrent access goes through the entries'
// atomic states (module documentation); slots are written only by the writer that took them.
unsafe impl Send for SharedFrames {}
unsafe impl Sync for SharedFrames {}

/// Where the files go: `/dev/shm`, else the temporary directory.
fn directory() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The file's layout for `slots` slots of `slot_bytes`: where the slots start, and its length.
/// None where that would not fit in a u64 (a header that is no store's).
fn layout(slots: u64, slot_bytes: u64) -> Option<(u64, u64)> {
    let entries = slots.checked_mul(ENTRY_BYTES)?.checked_add(HEADER_BYTES)?;
    let data_offset = entries.checked_next_multiple_of(PAGE_BYTES)?;
    Some((data_offset, data_offset.checked_add(slots.checked_mul(slot_bytes)?)?))
}

/// Reserves `len` bytes of `file` from `offset`; Ok where the file system reserves nothing.
fn reserve(file: &File, offset: u64, len: u64) -> io::Result<()> {
    // Safety: fallocate reads no memory of ours.
    let done = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as i64, len as i64) };
    if done == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        e if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
        e => Err(e),
    }
}

/// Bytes free for an unprivileged user in the file system of `dir`.
fn free_bytes(dir: &Path) -> Option<u64> {
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // Safety: statvfs writes the struct it is given and reads the C string.
    if unsafe { libc::statvfs(path.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return None;
    }
    // Safety: statvfs succeeded, so it filled the struct.
    let stat = unsafe { stat.assume_init() };
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// Removes the files of makers no longer running.
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<libc::pid_t>().ok()) else {
            continue;
        };
        // Safety: signal 0 only asks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl SharedFrames {
    /// A new, empty store of at most `budget_bytes` (file included) for frames of at most
    /// `frame_bytes`, in a new file this process removes when the store is dropped.
    pub fn create(budget_bytes: u64, frame_bytes: u64) -> Result<Self> {
        let dir = directory();
        let slot_bytes =
            frame_bytes.max(1).saturating_add(SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
        let slots =
            budget_bytes.saturating_sub(2 * PAGE_BYTES) / slot_bytes.saturating_add(ENTRY_BYTES);
        if slots == 0 {
            return Err(DatasetError::invalid(
                &dir,
                format!(
                    "a frame cache of {budget_bytes} bytes holds no frame of {frame_bytes} bytes: \
                     give it at least {} bytes",
                    (2 * PAGE_BYTES + ENTRY_BYTES).saturating_add(slot_bytes)
                ),
            ));
        }
        // Fits: slots × (slot_bytes + ENTRY_BYTES) ≤ budget_bytes.
        let (_, len) = layout(slots, slot_bytes).expect("within the budget");
        if let Some(free) = free_bytes(&dir).filter(|&free| free < len) {
            return Err(DatasetError::invalid(
                &dir,
                format!(
                    "a frame cache of {:.1} MB does not fit in the {:.1} MB free there: lower the \
                     cache, or give the container more shared memory (docker run --shm-size)",
                    len as f64 / 1e6,
                    free as f64 / 1e6
                ),
            ));
        }
        remove_stale(&dir);
        let pid = std::process::id();
        // A name is never taken twice by one process, so a removed store's path cannot come
        // to name a newer store while a reader still holds it.
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let (file, path) = std::iter::repeat_with(|| NEXT.fetch_add(1, Ordering::Relaxed))
            .map(|n| {
                let path = dir.join(format!("{PREFIX}{pid}-{n}"));
                (
                    OpenOptions::new()
                        .read(true)
                        .write(true)
                        .create_new(true)
                        .mode(0o600)
                        .open(&path),
                    path,
                )
            })
            .find(
                |(opened, _)| !matches!(opened, Err(e) if e.kind() == io::ErrorKind::AlreadyExists),
            )
            .expect("an unused name");
        let file = file.map_err(|e| DatasetError::io(&path, e))?;
        let made = Self::lay_out(file, &path, slots, slot_bytes);
        if made.is_err() {
            let _ = std::fs::remove_file(&path);
        }
        made
    }

    /// `file`, new and empty, made a store of `slots` slots and mapped; this process its owner.
    fn lay_out(file: File, path: &Path, slots: u64, slot_bytes: u64) -> Result<Self> {
        let (data_offset, len) = layout(slots, slot_bytes).expect("within the budget");
        let io = |e| DatasetError::io(path, e);
        file.set_len(len).map_err(io)?;
        reserve(&file, 0, data_offset).map_err(io)?;
        let map = MmapOptions::new().map_raw(&file).map_err(io)?;
        let owner = Some(std::process::id());
        let store =
            Self { map, file, path: path.to_path_buf(), slots, slot_bytes, data_offset, owner };
        // Safety: the header is reserved and only this process knows the file yet.
        unsafe {
            let header = store.map.as_mut_ptr();
            std::ptr::copy_nonoverlapping(MAGIC.as_ptr(), header, MAGIC.len());
            header.add(at::SLOT_BYTES as usize).cast::<u64>().write(slot_bytes);
            header.add(at::SLOTS as usize).cast::<u64>().write(slots);
        }
        Ok(store)
    }

    /// The store another process made at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let io = |e| DatasetError::io(path, e);
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let not_one = || DatasetError::invalid(path, "not a feedbench frame cache");
        if len < HEADER_BYTES {
            return Err(not_one());
        }
        let map = MmapOptions::new().map_raw(&file).map_err(io)?;
        // Safety: the mapping holds the header (checked above).
        let (magic, slot_bytes, slots) = unsafe {
            let header = map.as_ptr();
            (
                std::slice::from_raw_parts(header, MAGIC.len()).to_vec(),
                header.add(at::SLOT_BYTES as usize).cast::<u64>().read(),
                header.add(at::SLOTS as usize).cast::<u64>().read(),
            )
        };
        let data_offset = match layout(slots, slot_bytes) {
            Some((data_offset, expected)) if magic == MAGIC && slots > 0 && expected == len => {
                data_offset
            }
            _ => return Err(not_one()),
        };
        Ok(Self {
            map,
            file,
            path: path.to_path_buf(),
            slots,
            slot_bytes,
            data_offset,
            owner: None,
        })
    }

    /// The file, for the processes that [`SharedFrames::open`] it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What it holds and has done, over every process using it.
    pub fn stats(&self) -> SharedFramesStats {
        let count = |offset| self.counter(offset).load(Ordering::Relaxed);
        SharedFramesStats {
            slots: self.slots,
            slot_bytes: self.slot_bytes,
            held: count(at::HELD),
            held_bytes: count(at::HELD_BYTES),
            copied: count(at::COPIED),
            not_kept: count(at::NOT_KEPT),
            full: self.full().load(Ordering::Relaxed) != 0,
        }
    }

    fn counter(&self, offset: u64) -> &AtomicU64 {
        // Safety: the header's counters are 8-byte aligned u64s inside the mapping, used only
        // atomically.
        unsafe { AtomicU64::from_ptr(self.map.as_mut_ptr().add(offset as usize).cast()) }
    }

    fn full(&self) -> &AtomicU32 {
        // Safety: as for `counter`.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(at::FULL as usize).cast()) }
    }

    /// Entry `slot`'s start.
    fn entry(&self, slot: u64) -> *mut u8 {
        // Safety: slot < slots, whose entries lie inside the mapping.
        unsafe { self.map.as_mut_ptr().add((HEADER_BYTES + slot * ENTRY_BYTES) as usize) }
    }

    fn state(&self, slot: u64) -> &AtomicU32 {
        // Safety: an entry starts 8-byte aligned with its state, used only atomically.
        unsafe { AtomicU32::from_ptr(self.entry(slot).cast()) }
    }

    /// A published entry's frame bytes and key.
    fn published(&self, slot: u64) -> (u64, FrameKey) {
        // Safety: read after the state's acquire of a published entry, which never changes.
        unsafe {
            let entry = self.entry(slot);
            let bytes = entry.add(4).cast::<u32>().read() as u64;
            let file = entry.add(8).cast::<u64>().read();
            let time_bits = entry.add(16).cast::<u64>().read();
            (bytes, FrameKey { file, time_bits })
        }
    }

    /// Slot `slot`'s frame bytes.
    fn slot(&self, slot: u64) -> *mut u8 {
        // Safety: slot < slots, whose bytes lie inside the mapping.
        unsafe { self.map.as_mut_ptr().add((self.data_offset + slot * self.slot_bytes) as usize) }
    }

    /// The entries `key` may be in, in order.
    fn probes(&self, key: FrameKey) -> impl Iterator<Item = u64> + '_ {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        let first = hasher.finish() % self.slots;
        (0..PROBES.min(self.slots)).map(move |i| (first + i) % self.slots)
    }

    /// Takes empty entry `slot` (state WRITING) and writes `key`'s frame there; false where its
    /// memory cannot be had (the entry is given back).
    fn write(&self, slot: u64, key: FrameKey, state: u32, values: &[u8]) -> bool {
        let offset = self.data_offset + slot * self.slot_bytes;
        if reserve(&self.file, offset, self.slot_bytes).is_err() {
            self.state(slot).store(EMPTY, Ordering::Release);
            self.full().store(1, Ordering::Relaxed);
            return false;
        }
        // Safety: this writer took the entry; its slot holds slot_bytes ≥ values.len() and is
        // reserved.
        unsafe {
            std::ptr::copy_nonoverlapping(values.as_ptr(), self.slot(slot), values.len());
            let entry = self.entry(slot);
            entry.add(4).cast::<u32>().write(values.len() as u32);
            entry.add(8).cast::<u64>().write(key.file);
            entry.add(16).cast::<u64>().write(key.time_bits);
        }
        self.state(slot).store(state, Ordering::Release);
        self.counter(at::HELD).fetch_add(1, Ordering::Relaxed);
        self.counter(at::HELD_BYTES).fetch_add(values.len() as u64, Ordering::Relaxed);
        true
    }
}

/// A frame's state once published, and its bytes.
fn bytes_of<'a>(frame: &'a FrameBuffer<'_>) -> (u32, &'a [u8]) {
    match frame {
        FrameBuffer::U8(v) => (READY_U8, v),
        FrameBuffer::F32(v) => (READY_F32, bytemuck::cast_slice(v)),
    }
}

/// The state a frame for `out` is published with, and `out`'s bytes to copy it into.
fn bytes_of_mut(out: FrameBuffer<'_>) -> (u32, &mut [u8]) {
    match out {
        FrameBuffer::U8(v) => (READY_U8, v),
        FrameBuffer::F32(v) => (READY_F32, bytemuck::cast_slice_mut(v)),
    }
}

impl FrameStore for SharedFrames {
    /// The path's hash: the same in every process of one build (SipHash, fixed keys).
    fn file(&self, path: &Path) -> u64 {
        let mut hasher = DefaultHasher::new();
        path.as_os_str().as_bytes().hash(&mut hasher);
        hasher.finish()
    }

    fn copy_out(&self, key: FrameKey, out: FrameBuffer<'_>) -> bool {
        let (want, to) = bytes_of_mut(out);
        let len = to.len();
        for slot in self.probes(key) {
            let state = self.state(slot).load(Ordering::Acquire);
            if state == EMPTY {
                return false;
            }
            if state == WRITING {
                continue;
            }
            let (bytes, held) = self.published(slot);
            if held != key {
                continue;
            }
            if state != want || bytes != len as u64 {
                return false;
            }
            // Safety: a published slot's `bytes` never change.
            unsafe { std::ptr::copy_nonoverlapping(self.slot(slot), to.as_mut_ptr(), len) };
            self.counter(at::COPIED).fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    fn keep(&self, key: FrameKey, frame: &FrameBuffer<'_>) {
        let (state, values) = bytes_of(frame);
        if values.len() as u64 > self.slot_bytes || self.full().load(Ordering::Relaxed) != 0 {
            self.counter(at::NOT_KEPT).fetch_add(1, Ordering::Relaxed);
            return;
        }
        for slot in self.probes(key) {
            let entry = self.state(slot);
            match entry.compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => {
                    if !self.write(slot, key, state, values) {
                        break;
                    }
                    return;
                }
                Err(WRITING) => continue,
                // Published: held already, or another frame's.
                Err(_) if self.published(slot).1 == key => return,
                Err(_) => continue,
            }
        }
        self.counter(at::NOT_KEPT).fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for SharedFrames {
    fn drop(&mut self) {
        if self.owner == Some(std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests;
