//! The timing tree: per stage, the number of calls and the wall and CPU time they took.
//!
//! Each thread records into its own [`TimingTree`] (no locks on the hot path); trees are merged
//! when a phase ends. Stage names are paths (`sample/video.decode/convert`): the tree is
//! rendered nested, as Sample Factory prints its timing. CPU time is the calling thread's
//! (`CLOCK_THREAD_CPUTIME_ID`): on a shared machine CPU ms per sample is the stable figure.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::clock::thread_cpu_time;
use super::trace::TraceTrack;

/// Totals of one stage; in JSON `{"calls", "wall_s", "cpu_s"}`, seconds as numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTotals {
    /// Times the stage ran.
    pub calls: u64,
    /// Wall time, summed over calls and threads.
    #[serde(rename = "wall_s", alias = "wall", with = "seconds")]
    pub wall: Duration,
    /// CPU time of the threads that ran it, summed.
    #[serde(rename = "cpu_s", alias = "cpu", with = "seconds")]
    pub cpu: Duration,
}

/// A duration as seconds (a number) in JSON; reads too the `{secs, nanos}` objects of results
/// files written before.
mod seconds {
    use std::time::Duration;

    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    /// The number nearest the exact decimal seconds, so that JSON shows `1.500001`, not
    /// `1.5000010000000001`.
    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        let decimal = format!("{}.{:09}", duration.as_secs(), duration.subsec_nanos());
        serializer.serialize_f64(decimal.parse().expect("digits and a point"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Seconds(f64),
            Parts { secs: u64, nanos: u32 },
        }
        match Stored::deserialize(deserializer)? {
            // To the nearest nanosecond, which is what was written.
            Stored::Seconds(seconds) if (0.0..1.8e10).contains(&seconds) => {
                Ok(Duration::from_nanos((seconds * 1e9).round() as u64))
            }
            Stored::Seconds(seconds) => {
                Err(D::Error::custom(format!("{seconds} is not a duration in seconds")))
            }
            Stored::Parts { secs, nanos } => Ok(Duration::new(secs, nanos)),
        }
    }
}

/// Stage totals by path (`a/b/c`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TimingTree {
    stages: BTreeMap<String, StageTotals>,
    /// Where [`TimingTree::time`] also records each call as a span, when tracing.
    #[serde(skip)]
    trace: Option<TraceTrack>,
}

impl PartialEq for TimingTree {
    /// Equal stage totals (the trace a tree writes to is not part of what it measured).
    fn eq(&self, other: &Self) -> bool {
        self.stages == other.stages
    }
}

impl TimingTree {
    /// An empty tree whose timed calls are also spans of `trace` (when Some).
    pub fn traced(trace: Option<TraceTrack>) -> Self {
        Self { stages: BTreeMap::new(), trace }
    }

    /// Adds one call of `path` that took `wall` and `cpu`.
    pub fn record(&mut self, path: &str, wall: Duration, cpu: Duration) {
        self.add(path, StageTotals { calls: 1, wall, cpu });
    }

    /// Adds `totals` (any number of calls) to stage `path`.
    pub fn add(&mut self, path: &str, totals: StageTotals) {
        let mine = match self.stages.get_mut(path) {
            Some(mine) => mine,
            None => self.stages.entry(path.to_string()).or_default(),
        };
        mine.calls += totals.calls;
        mine.wall += totals.wall;
        mine.cpu += totals.cpu;
    }

    /// Adds `cpu` used by other threads on behalf of stage `path` (threads a library starts
    /// for itself) to the stage and every stage it runs inside, as their calls' own CPU is.
    pub fn add_helper_cpu(&mut self, path: &str, cpu: Duration) {
        if cpu.is_zero() {
            return;
        }
        let cpu_only = StageTotals { calls: 0, wall: Duration::ZERO, cpu };
        let mut at = path;
        loop {
            self.add(at, cpu_only);
            match at.rsplit_once('/') {
                Some((parent, _)) => at = parent,
                None => return,
            }
        }
    }

    /// Runs `work` as stage `path` and records its wall and CPU time.
    pub fn time<T>(&mut self, path: &str, work: impl FnOnce() -> T) -> T {
        let (wall0, cpu0) = (Instant::now(), thread_cpu_time());
        let out = work();
        let wall = wall0.elapsed();
        self.record(path, wall, thread_cpu_time().saturating_sub(cpu0));
        if let Some(track) = &self.trace {
            track.span(path, wall0, wall);
        }
        out
    }

    /// Adds every stage of `other` (another thread's tree).
    pub fn merge(&mut self, other: &TimingTree) {
        for (path, totals) in &other.stages {
            self.add(path, *totals);
        }
    }

    /// The totals of stage `path`, if it ran.
    pub fn get(&self, path: &str) -> Option<&StageTotals> {
        self.stages.get(path)
    }

    /// Every stage, by path.
    pub fn stages(&self) -> impl Iterator<Item = (&str, &StageTotals)> {
        self.stages.iter().map(|(path, totals)| (path.as_str(), totals))
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// The tree as an indented table: per stage its calls, wall ms, CPU ms, µs per call and
    /// CPU ms per sample (`samples` processed in the phase).
    pub fn render(&self, samples: usize) -> String {
        let width = self.stages.keys().map(|p| label(p).len()).max().unwrap_or(5).max(5);
        let mut out = format!(
            "{:width$}  {:>9}  {:>10}  {:>10}  {:>9}  {:>13}\n",
            "stage", "calls", "wall ms", "cpu ms", "µs/call", "cpu ms/sample"
        );
        for (path, t) in &self.stages {
            let per_call = t.wall.as_secs_f64() * 1e6 / t.calls.max(1) as f64;
            let per_sample = t.cpu.as_secs_f64() * 1e3 / samples.max(1) as f64;
            let _ = writeln!(
                out,
                "{:width$}  {:>9}  {:>10.1}  {:>10.1}  {:>9.1}  {:>13.3}",
                label(path),
                t.calls,
                t.wall.as_secs_f64() * 1e3,
                t.cpu.as_secs_f64() * 1e3,
                per_call,
                per_sample
            );
        }
        out
    }
}

/// A stage's last path component, indented by its depth.
fn label(path: &str) -> String {
    let depth = path.matches('/').count();
    let name = path.rsplit('/').next().unwrap_or(path);
    format!("{}{name}", "  ".repeat(depth))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_merges_and_nests() {
        let mut a = TimingTree::default();
        a.record("sample", Duration::from_millis(10), Duration::from_millis(8));
        a.record("sample/frames.read", Duration::from_millis(4), Duration::from_millis(4));
        let mut b = TimingTree::default();
        b.record("sample", Duration::from_millis(30), Duration::from_millis(20));
        a.merge(&b);
        let sample = a.get("sample").unwrap();
        assert_eq!(
            (sample.calls, sample.wall, sample.cpu),
            (2, Duration::from_millis(40), Duration::from_millis(28))
        );
        let text = a.render(4);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("sample ") && lines[2].starts_with("  frames.read"), "{text}");
        assert!(lines[1].ends_with("7.000"), "28 ms CPU over 4 samples: {text}");
    }

    #[test]
    fn helper_cpu_counts_in_the_stage_and_its_parents_but_not_as_calls() {
        let mut tree = TimingTree::default();
        tree.record("batch/video/decode", Duration::from_millis(5), Duration::from_millis(1));
        tree.add_helper_cpu("batch/video/decode", Duration::from_millis(3));
        let ms = |path: &str| tree.get(path).map(|s| (s.calls, s.cpu.as_millis()));
        assert_eq!(ms("batch/video/decode"), Some((1, 4)));
        assert_eq!(ms("batch/video"), Some((0, 3)));
        assert_eq!(ms("batch"), Some((0, 3)));
        assert_eq!(tree.get("batch").unwrap().wall, Duration::ZERO);
    }

    #[test]
    fn stages_are_seconds_in_json_and_older_files_still_read() {
        let mut tree = TimingTree::default();
        tree.record("batch", Duration::new(2, 250_000_000), Duration::from_micros(1_500_001));
        let json = serde_json::to_value(&tree).unwrap();
        assert_eq!(
            json["stages"]["batch"],
            serde_json::json!({"calls": 1, "wall_s": 2.25, "cpu_s": 1.500001})
        );
        let read: TimingTree = serde_json::from_value(json).unwrap();
        assert_eq!(read, tree, "the nanoseconds survive the round trip");
        let older = r#"{"stages": {"batch": {"calls": 1, "wall": {"secs": 2, "nanos": 250000000},
            "cpu": {"secs": 1, "nanos": 500001000}}}}"#;
        assert_eq!(serde_json::from_str::<TimingTree>(older).unwrap(), tree);
        let negative = r#"{"stages": {"batch": {"calls": 1, "wall_s": -1.0, "cpu_s": 0.0}}}"#;
        assert!(serde_json::from_str::<TimingTree>(negative).is_err());
    }

    #[test]
    fn cpu_time_counts_work_not_sleep() {
        let mut tree = TimingTree::default();
        tree.time("sleep", || std::thread::sleep(Duration::from_millis(30)));
        tree.time("spin", || {
            let start = Instant::now();
            let mut x = 0u64;
            while start.elapsed() < Duration::from_millis(30) {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            x
        });
        let (sleep, spin) = (tree.get("sleep").unwrap(), tree.get("spin").unwrap());
        assert!(sleep.wall >= Duration::from_millis(30));
        assert!(sleep.cpu < sleep.wall / 2, "sleeping uses little CPU: {sleep:?}");
        assert!(spin.cpu > Duration::ZERO, "spinning uses CPU: {spin:?}");
    }
}
