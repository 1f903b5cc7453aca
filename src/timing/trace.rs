//! A trace of one run in Chrome's trace event format (`trace.json`): one track per loader
//! worker thread and one for the trainer, each span a stage (`batch`, `batch/video`, `wait`,
//! `step/forward`, …). Open it in Perfetto (ui.perfetto.dev) or chrome://tracing.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Spans recorded by many threads against one clock.
#[derive(Debug)]
pub struct Trace {
    origin: Instant,
    spans: Mutex<Vec<Span>>,
}

/// One span: a stage on a track, in µs since the trace began.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// The track (a thread name: `feedbench-worker-0`, `trainer`).
    pub track: Arc<str>,
    /// The stage path.
    pub name: String,
    /// Start, µs since the trace began.
    pub start_us: f64,
    /// Duration, µs.
    pub duration_us: f64,
}

/// A trace and the track a thread writes to: what a [`super::TimingTree`] carries
/// when its stages are traced too.
#[derive(Debug, Clone)]
pub struct TraceTrack {
    trace: Arc<Trace>,
    track: Arc<str>,
}

impl Trace {
    /// An empty trace whose clock starts now.
    pub fn new() -> Arc<Self> {
        Arc::new(Self { origin: Instant::now(), spans: Mutex::new(Vec::new()) })
    }

    /// A handle for writing spans on `track`.
    pub fn track(self: &Arc<Self>, track: &str) -> TraceTrack {
        TraceTrack { trace: Arc::clone(self), track: track.into() }
    }

    /// The spans so far, in the order they were recorded.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Writes the spans to `path` as a Chrome trace ([`Trace::chrome_json`]).
    pub fn write_chrome(&self, path: &Path) -> std::io::Result<()> {
        std::fs::write(path, self.chrome_json())
    }

    /// The spans as a Chrome trace (`traceEvents` of complete events, one thread per track,
    /// named), JSON bytes.
    pub fn chrome_json(&self) -> Vec<u8> {
        let spans = self.spans();
        let mut tracks: Vec<&str> = Vec::new();
        for span in &spans {
            if !tracks.contains(&&*span.track) {
                tracks.push(&span.track);
            }
        }
        let tid = |track: &str| tracks.iter().position(|t| *t == track).unwrap_or(0) + 1;
        let mut events: Vec<serde_json::Value> = tracks
            .iter()
            .map(|track| {
                serde_json::json!({
                    "name": "thread_name", "ph": "M", "pid": 1, "tid": tid(track),
                    "args": { "name": track }
                })
            })
            .collect();
        events.extend(spans.iter().map(|s| {
            serde_json::json!({
                "name": s.name.rsplit('/').next().unwrap_or(&s.name),
                "cat": s.name, "ph": "X", "pid": 1, "tid": tid(&s.track),
                "ts": s.start_us, "dur": s.duration_us
            })
        }));
        let json = serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" });
        serde_json::to_vec(&json).expect("a trace serialises")
    }
}

impl TraceTrack {
    /// Records stage `name` from `start` for `duration`.
    pub fn span(&self, name: &str, start: Instant, duration: Duration) {
        let start_us = start.saturating_duration_since(self.trace.origin).as_secs_f64() * 1e6;
        let span = Span {
            track: Arc::clone(&self.track),
            name: name.to_string(),
            start_us,
            duration_us: duration.as_secs_f64() * 1e6,
        };
        self.trace.spans.lock().unwrap_or_else(|e| e.into_inner()).push(span);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_become_named_tracks_of_complete_events() {
        let trace = Trace::new();
        let worker = trace.track("feedbench-worker-0");
        let trainer = trace.track("trainer");
        let start = Instant::now();
        worker.span("batch", start, Duration::from_millis(3));
        worker.span("batch/video", start, Duration::from_millis(2));
        trainer.span("wait", start, Duration::from_micros(1500));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.json");
        trace.write_chrome(&path).unwrap();
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let events = json["traceEvents"].as_array().unwrap();
        let names: Vec<_> =
            events.iter().filter(|e| e["ph"] == "M").map(|e| &e["args"]["name"]).collect();
        assert_eq!(names, ["feedbench-worker-0", "trainer"]);
        let video = events.iter().find(|e| e["cat"] == "batch/video").unwrap();
        assert_eq!(
            (&video["name"], &video["tid"], video["dur"].as_f64()),
            (&"video".into(), &1.into(), Some(2000.0))
        );
        let wait = events.iter().find(|e| e["name"] == "wait").unwrap();
        assert_eq!(wait["tid"], 2);
    }
}
