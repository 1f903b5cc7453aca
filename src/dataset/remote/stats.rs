//! What this process has asked of stores: requests, bytes, the time each took to its first
//! byte and to its end, and the bytes the readers needed of them, counted as they happen, so
//! that a phase reads what it caused as the difference of two marks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

static REQUESTS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static NEEDED: AtomicU64 = AtomicU64::new(0);
static RETRIES: AtomicU64 = AtomicU64::new(0);
static FIRST_BYTE_NS: AtomicU64 = AtomicU64::new(0);
static REQUEST_NS: AtomicU64 = AtomicU64::new(0);
/// Each request as kept, in order (the first [`KEPT`] of the process).
static KEPT_REQUESTS: Mutex<Vec<KeptRequest>> = Mutex::new(Vec::new());
/// Requests kept for quantiles and the link's busy time.
const KEPT: usize = 1 << 20;
/// The moment the times of [`KeptRequest`] count from.
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// One request as kept: its time to the first byte, and when its body arrived.
#[derive(Debug, Clone, Copy)]
struct KeptRequest {
    /// Time to its first byte, ms.
    first_byte_ms: f32,
    /// Seconds from [`EPOCH`] at which its body began and ended to arrive.
    receiving: (f64, f64),
}

/// Counts one request: its time to the first byte (the answer's head), to its end, and the
/// bytes of its body.
pub(crate) fn record(first_byte: Duration, total: Duration, bytes: u64) {
    REQUESTS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(bytes, Ordering::Relaxed);
    FIRST_BYTE_NS.fetch_add(first_byte.as_nanos() as u64, Ordering::Relaxed);
    REQUEST_NS.fetch_add(total.as_nanos() as u64, Ordering::Relaxed);
    let end = EPOCH.get_or_init(Instant::now).elapsed().as_secs_f64();
    let start = end - total.saturating_sub(first_byte).as_secs_f64();
    let mut kept = KEPT_REQUESTS.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() < KEPT {
        let first_byte_ms = first_byte.as_secs_f32() * 1e3;
        kept.push(KeptRequest { first_byte_ms, receiving: (start, end) });
    }
}

/// The seconds covered by at least one of `spans`.
fn union_s(mut spans: Vec<(f64, f64)>) -> f64 {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut current: Option<(f64, f64)> = None;
    for (start, end) in spans {
        current = match current {
            Some((from, to)) if start <= to => Some((from, to.max(end))),
            Some((from, to)) => {
                total += to - from;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + current.map_or(0.0, |(from, to)| to - from)
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
        kept: KEPT_REQUESTS.lock().unwrap_or_else(|e| e.into_inner()).len(),
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
    /// Seconds in which at least one answer's body was arriving (the union of their times):
    /// the link's busy time; 0 where unknown (results written before it).
    #[serde(default)]
    pub receiving_s: f64,
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
        let kept =
            KEPT_REQUESTS.lock().unwrap_or_else(|e| e.into_inner())[self.kept..now.kept].to_vec();
        let mut times: Vec<f32> = kept.iter().map(|k| k.first_byte_ms).collect();
        times.sort_by(f32::total_cmp);
        // Every request of the span kept: the union of their bodies' times; else unknown.
        let receiving_s = match kept.len() as u64 == requests {
            true => union_s(kept.iter().map(|k| k.receiving).collect()),
            false => 0.0,
        };
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
            receiving_s,
            first_byte_p10_ms: quantile(0.1),
            first_byte_p50_ms: quantile(0.5),
            first_byte_p99_ms: quantile(0.99),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_is_busy_while_any_answer_arrives_overlaps_counted_once() {
        assert_eq!(union_s(vec![]), 0.0);
        let spans = vec![(3.0, 4.0), (0.0, 1.0), (0.5, 2.0), (1.5, 1.8)];
        assert!((union_s(spans) - 3.0).abs() < 1e-12);
    }
}
