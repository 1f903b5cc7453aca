//! What this process has asked of stores: requests, bytes, the time each took to its first
//! byte and to its end, and the bytes the readers needed of them, counted as they happen, so
//! that a phase reads what it caused as the difference of two marks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static NEEDED: AtomicU64 = AtomicU64::new(0);
static RETRIES: AtomicU64 = AtomicU64::new(0);
static FIRST_BYTE_NS: AtomicU64 = AtomicU64::new(0);
static REQUEST_NS: AtomicU64 = AtomicU64::new(0);
/// Each request's time to its first byte, ms, in order (the first [`KEPT`] of the process).
static FIRST_BYTES: Mutex<Vec<f32>> = Mutex::new(Vec::new());
/// Times to first byte kept for quantiles.
const KEPT: usize = 1 << 20;

/// Counts one request: its time to the first byte (the answer's head), to its end, and the
/// bytes of its body.
pub(crate) fn record(first_byte: Duration, total: Duration, bytes: u64) {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes, Ordering::Relaxed);
    FIRST_BYTE_NS.fetch_add(first_byte.as_nanos() as u64, Ordering::Relaxed);
    REQUEST_NS.fetch_add(total.as_nanos() as u64, Ordering::Relaxed);
    let mut kept = FIRST_BYTES.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() < KEPT {
        kept.push(first_byte.as_secs_f32() * 1e3);
    }
}

/// Counts a request tried again (after a failure on the way: a 503 SlowDown, a reset).
pub(crate) fn retried() {
    RETRIES.fetch_add(1, Ordering::Relaxed);
}

/// Counts `bytes` a reader needed of an object (the coded samples a frame needs, the column
/// chunks a row group is read from), whether or not they were fetched apart.
pub(crate) fn needed(bytes: u64) {
    NEEDED.fetch_add(bytes, Ordering::Relaxed);
}

/// The counts at a moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadMark {
    requests: u64,
    retries: u64,
    bytes: u64,
    needed: u64,
    first_byte_ns: u64,
    request_ns: u64,
    kept: usize,
}

/// The counts now.
pub fn mark() -> ReadMark {
    ReadMark {
        requests: REQUESTS.load(Ordering::Relaxed),
        retries: RETRIES.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
        needed: NEEDED.load(Ordering::Relaxed),
        first_byte_ns: FIRST_BYTE_NS.load(Ordering::Relaxed),
        request_ns: REQUEST_NS.load(Ordering::Relaxed),
        kept: FIRST_BYTES.lock().unwrap_or_else(|e| e.into_inner()).len(),
    }
}

/// What was asked of stores between two marks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteReads {
    /// Requests (HEAD and GET), each try counted.
    pub requests: u64,
    /// Tries that failed on the way and were made again (throttling, resets, timeouts).
    #[serde(default)]
    pub retries: u64,
    /// Bytes received.
    pub bytes: u64,
    /// Bytes the readers needed: the samples a frame needs, a row group's column chunks.
    pub needed_bytes: u64,
    /// Seconds of all requests to their first byte, summed.
    pub first_byte_s: f64,
    /// Seconds of all requests to their end, summed (several at once count each).
    pub request_s: f64,
    /// Time to the first byte, ms: the fastest tenth's bound (the store's own latency, where
    /// a queue made the others wait); 0 in results written before it.
    #[serde(default)]
    pub first_byte_p10_ms: f64,
    /// Time to the first byte, ms: median.
    pub first_byte_p50_ms: f64,
    /// Time to the first byte, ms: 99th percentile.
    pub first_byte_p99_ms: f64,
}

impl ReadMark {
    /// The counts before this process asked anything of a store.
    pub const START: ReadMark = ReadMark {
        requests: 0,
        retries: 0,
        bytes: 0,
        needed: 0,
        first_byte_ns: 0,
        request_ns: 0,
        kept: 0,
    };

    /// What was asked since this mark; None where nothing was.
    pub fn since(&self) -> Option<RemoteReads> {
        let now = mark();
        let requests = now.requests - self.requests;
        if requests == 0 {
            return None;
        }
        let mut times: Vec<f32> =
            FIRST_BYTES.lock().unwrap_or_else(|e| e.into_inner())[self.kept..now.kept].to_vec();
        times.sort_by(f32::total_cmp);
        let quantile = |q: f64| {
            times
                .get(((times.len() as f64 - 1.0) * q).round() as usize)
                .map_or(0.0, |&t| f64::from(t))
        };
        Some(RemoteReads {
            requests,
            retries: now.retries - self.retries,
            bytes: now.bytes - self.bytes,
            needed_bytes: now.needed - self.needed,
            first_byte_s: (now.first_byte_ns - self.first_byte_ns) as f64 / 1e9,
            request_s: (now.request_ns - self.request_ns) as f64 / 1e9,
            first_byte_p10_ms: quantile(0.1),
            first_byte_p50_ms: quantile(0.5),
            first_byte_p99_ms: quantile(0.99),
        })
    }
}
