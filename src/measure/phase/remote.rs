//! Why a loader reading a remote root waits: its requests' figures (bytes, requests, time to the
//! first byte, MB/s, read amplification) and which of three limits holds it — the store's
//! latency (too few requests in flight), the link (bytes arrive as fast as it carries them) or
//! decoding (the readers are busy, not waiting) — each with the change that helps. Pure: made
//! from the counts of [`crate::dataset::remote::stats`] over a phase.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::dataset::bytes::Bytes;
use crate::dataset::remote::RemoteReads;

/// Share of the readers' time blocked on requests below which decoding, not the store, holds
/// the loader.
pub const WAITING_BOUND_SHARE: f64 = 0.5;
/// How many times the fastest tenth's time to the first byte the median's must be for the
/// rest to have waited in a queue (a saturated link) rather than on the store.
pub const QUEUED_MEDIAN_OVER_P10: f64 = 2.0;
/// Share of the cores the process kept busy at or above which they, not the store, hold the
/// loader (readers then wait for a core as much as for the store).
pub const BUSY_CORES_SHARE: f64 = 0.85;

/// What holds a loader that reads a remote root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RemoteBound {
    /// The readers wait mostly for the store's first bytes: too few requests in flight.
    Latency,
    /// The readers wait mostly while bytes arrive: the link carries no more.
    Link,
    /// The readers mostly decode: the store keeps up.
    Decode,
}

impl fmt::Display for RemoteBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Latency => "latency-bound",
            Self::Link => "link-bound",
            Self::Decode => "decode-bound",
        })
    }
}

/// A phase's requests to the store, and what they say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteFigures {
    /// The counts.
    #[serde(flatten)]
    pub reads: RemoteReads,
    /// Bytes received per second of the phase, MB/s.
    pub mb_per_s: f64,
    /// Bytes received over the bytes the readers needed; None where they needed none.
    pub read_amplification: Option<f64>,
    /// Requests in flight on average over the phase.
    pub in_flight: f64,
    /// Share of the readers' time blocked on requests.
    pub waiting_share: f64,
    /// Share of the cores the process kept busy over the phase.
    #[serde(default)]
    pub busy_cores_share: f64,
    /// How fast bytes arrived while they arrived (all requests' together), MB/s: the link's rate
    /// as the phase saw it.
    pub receive_mb_per_s: f64,
    /// Bytes received per sample.
    pub bytes_per_sample: f64,
    /// The samples/s the link allows at these bytes per sample: `receive_mb_per_s` over
    /// `bytes_per_sample`.
    pub link_limit_samples_per_s: f64,
    /// What holds the loader.
    pub bound: RemoteBound,
}

impl RemoteFigures {
    /// The figures of `reads` made over `wall_s` seconds by `readers` threads that read at once
    /// (the workers, or the consumer), for `samples` samples, the process keeping
    /// `busy_cores_share` of the cores busy.
    pub fn of(
        reads: RemoteReads,
        wall_s: f64,
        samples: usize,
        readers: usize,
        busy_cores_share: f64,
    ) -> Self {
        let wall_s = wall_s.max(1e-9);
        let in_flight = reads.request_s / wall_s;
        let waiting_share = (reads.request_s / (wall_s * readers.max(1) as f64)).min(1.0);
        let receiving_s = (reads.request_s - reads.first_byte_s).max(1e-9);
        // A first byte later than the fastest tenth's waited in a queue — behind other answers
        // on a link that carries no more — not on the store: where the median request waited
        // twice the fastest tenth's, that share of the wait is the link's.
        let (p10, p50) = (reads.first_byte_p10_ms, reads.first_byte_p50_ms);
        let queued_s = match p10 > 0.0 && p50 >= QUEUED_MEDIAN_OVER_P10 * p10 {
            true => (reads.first_byte_s - p10 / 1e3 * reads.requests as f64).max(0.0),
            false => 0.0,
        };
        // Bytes over the time any of them was arriving: the link's rate while it carried them
        // (in results from before that time was kept, over the time spent receiving, as many
        // at once as were in flight).
        let receive_mb_per_s = match reads.receiving_s > 0.0 {
            true => reads.bytes as f64 / 1e6 / reads.receiving_s,
            false => reads.bytes as f64 / 1e6 * in_flight.max(1.0) / receiving_s,
        };
        let bytes_per_sample = reads.bytes as f64 / samples.max(1) as f64;
        let bound = if waiting_share < WAITING_BOUND_SHARE || busy_cores_share >= BUSY_CORES_SHARE {
            RemoteBound::Decode
        } else if receiving_s + queued_s > reads.first_byte_s - queued_s {
            RemoteBound::Link
        } else {
            RemoteBound::Latency
        };
        Self {
            mb_per_s: reads.bytes as f64 / 1e6 / wall_s,
            read_amplification: (reads.needed_bytes > 0)
                .then(|| reads.bytes as f64 / reads.needed_bytes as f64),
            in_flight,
            waiting_share,
            busy_cores_share,
            receive_mb_per_s,
            bytes_per_sample,
            link_limit_samples_per_s: receive_mb_per_s * 1e6 / bytes_per_sample.max(1.0),
            bound,
            reads,
        }
    }

    /// The change that helps, in words.
    pub fn advice(&self) -> String {
        match self.bound {
            RemoteBound::Latency => format!(
                "the readers wait on the store's first bytes (p50 {:.0} ms) with {:.1} requests \
                 in flight: more in flight (more workers) hide it, or stage the dataset to \
                 /dev/shm (feedbench stage)",
                self.reads.first_byte_p50_ms, self.in_flight
            ),
            RemoteBound::Link => format!(
                "bytes arrive at {:.1} MB/s, {} a sample: the link allows {:.1} samples/s; a \
                 layout of fewer bytes per sample (a lower resolution, a higher CRF) or staging \
                 to /dev/shm (feedbench stage) helps, more workers do not",
                self.receive_mb_per_s,
                Bytes::new(self.bytes_per_sample),
                self.link_limit_samples_per_s
            ),
            RemoteBound::Decode if self.busy_cores_share >= BUSY_CORES_SHARE => format!(
                "the cores are {:.0} % busy: decoding holds the loader, not the store (its \
                 requests wait for a core as much as for their bytes); a cheaper layout or more \
                 cores decode faster",
                self.busy_cores_share * 100.0
            ),
            RemoteBound::Decode => format!(
                "the readers wait on the store {:.0} % of their time and decode the rest: \
                 streaming costs little here; more workers or a cheaper layout decode faster",
                self.waiting_share * 100.0
            ),
        }
    }
}

impl fmt::Display for RemoteFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let amplification = self
            .read_amplification
            .map_or(String::new(), |a| format!(", read amplification {a:.2}"));
        writeln!(
            f,
            "remote: {} requests{}, {} received{amplification}, {:.1} MB/s, first byte p50 {:.1} \
             ms p99 {:.1} ms, {:.1} in flight",
            self.reads.requests,
            match self.reads.retries {
                0 => String::new(),
                n => format!(" ({n} retried: throttled or failed on the way)"),
            },
            Bytes::of(self.reads.bytes),
            self.mb_per_s,
            self.reads.first_byte_p50_ms,
            self.reads.first_byte_p99_ms,
            self.in_flight
        )?;
        writeln!(f, "{}: {}", self.bound, self.advice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(first_byte_s: f64, request_s: f64, bytes: u64) -> RemoteReads {
        RemoteReads {
            requests: 100,
            retries: 0,
            bytes,
            needed_bytes: bytes / 2,
            first_byte_s,
            request_s,
            receiving_s: 0.0,
            first_byte_p10_ms: first_byte_s * 10.0,
            first_byte_p50_ms: first_byte_s * 10.0,
            first_byte_p99_ms: first_byte_s * 20.0,
        }
    }

    #[test]
    fn readers_waiting_on_first_bytes_are_latency_bound_on_transfers_link_bound_else_decode_bound()
    {
        // One reader, 10 s: waiting 9 s, 8 of them for first bytes.
        let latency = RemoteFigures::of(reads(8.0, 9.0, 1_000_000), 10.0, 100, 1, 0.2);
        assert_eq!(latency.bound, RemoteBound::Latency);
        assert!((latency.in_flight - 0.9).abs() < 1e-9);
        assert_eq!(latency.read_amplification, Some(2.0));
        assert!(latency.advice().contains("more in flight"), "{}", latency.advice());
        // Waiting 9 s, 8 of them receiving 8 MB: 1 MB/s, 80 kB a sample, 12.5 samples/s.
        let link = RemoteFigures::of(reads(1.0, 9.0, 8_000_000), 10.0, 100, 1, 0.2);
        assert_eq!(link.bound, RemoteBound::Link);
        assert!((link.receive_mb_per_s - 1.0).abs() < 1e-9, "{}", link.receive_mb_per_s);
        assert!((link.link_limit_samples_per_s - 12.5).abs() < 1e-9);
        assert!(link.to_string().contains("link-bound: bytes arrive at 1.0 MB/s"), "{link}");
        // The bodies' times overlapping, 4 s of the link's: 2 MB/s, 25 samples/s.
        let busy = RemoteReads { receiving_s: 4.0, ..reads(1.0, 9.0, 8_000_000) };
        let busy = RemoteFigures::of(busy, 10.0, 100, 1, 0.2);
        assert!((busy.receive_mb_per_s - 2.0).abs() < 1e-9, "{}", busy.receive_mb_per_s);
        assert!((busy.link_limit_samples_per_s - 25.0).abs() < 1e-9);
        // Waiting 8 s of 9 for first bytes, but the median 80 ms where the fastest tenth's
        // took 20: 6 s of it queued behind other answers on the link.
        let queued = RemoteReads { first_byte_p10_ms: 20.0, ..reads(8.0, 9.0, 1_000_000) };
        assert_eq!(RemoteFigures::of(queued, 10.0, 100, 1, 0.2).bound, RemoteBound::Link);
        // The median under twice the fastest tenth's: the store's own latency.
        let spread = RemoteReads { first_byte_p10_ms: 60.0, ..reads(8.0, 9.0, 1_000_000) };
        assert_eq!(RemoteFigures::of(spread, 10.0, 100, 1, 0.2).bound, RemoteBound::Latency);
        // Two readers waiting 2 s of their 20: decoding holds the loader.
        let decode = RemoteFigures::of(reads(1.0, 2.0, 8_000_000), 10.0, 100, 2, 0.5);
        assert_eq!(decode.bound, RemoteBound::Decode);
        assert!((decode.waiting_share - 0.1).abs() < 1e-9);
        // Eight readers waiting on first bytes while the cores are full: the cores hold it.
        let busy = RemoteFigures::of(reads(60.0, 70.0, 8_000_000), 10.0, 100, 8, 0.95);
        assert_eq!(busy.bound, RemoteBound::Decode);
        assert!(busy.advice().contains("the cores are 95 % busy"), "{}", busy.advice());
    }
}
