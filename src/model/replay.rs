//! The user's own step times, replayed: a stand-in step that takes, step after step, the times
//! a file gives — a lerobot-train log's `updt_s` (every `--log_freq` steps' mean), a train
//! phase's JSON (its per-step compute), or a plain file of step times in milliseconds — instead of
//! one constant. Real steps vary (logging, checkpoint and evaluation steps spike), and the
//! prefetch depth that absorbs them is only seen with them. The times are drawn from the file's
//! distribution, seeded, or taken in the file's order (periodic spikes stay periodic).

use std::fmt;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::dataset::write::scene::SplitMix64;

/// The most step times a file may give (8 MB of them): a longer log is refused, with what
/// to give instead.
pub const MOST_STEP_TIMES: usize = 1_000_000;

/// What a file of step times is, said where one is none.
const EXPECTED: &str = "expected a lerobot-train log (lines with `updt_s:`), a train phase's \
                        JSON (its `per_step`), or step times in ms, one a line";

/// The longest step a file may give, ms: a day.
const LONGEST_STEP_MS: f64 = 86_400_000.0;

/// The lines read for a first step time before the file is taken for no step log.
const SEARCHED_LINES: usize = 100_000;

/// The most bytes of one line read: a step line is a few hundred.
const LONGEST_LINE: usize = 64 * 1024;

/// In which order the steps come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplayOrder {
    /// Drawn from the file's times, with replacement, by a generator of this seed.
    Drawn {
        /// The generator's seed.
        seed: u64,
    },
    /// In the file's order, from its first, over again once it ends.
    Logged,
}

impl ReplayOrder {
    /// The order a step file is replayed in where none is asked: drawn, by the seed 0.
    pub const DRAWN: Self = ReplayOrder::Drawn { seed: 0 };
}

/// A step file and the order its times are replayed in, as a step is declared
/// (`replay:FILE`): what names the step, read by nothing until [`StepReplay::read`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplaySource {
    /// The file.
    pub file: PathBuf,
    /// The order its times are replayed in.
    pub order: ReplayOrder,
}

/// Step times read from a file, and the order they are replayed in.
#[derive(Debug, Clone)]
pub struct StepReplay {
    /// The file and the order.
    pub source: ReplaySource,
    /// Its step times, ms, in its order.
    pub times_ms: Arc<[f64]>,
}

/// Why a file gives no step times to replay: one line naming it, and the line where one is at
/// fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}{}: {what}", path.display(), line.map_or(String::new(), |n| format!(":{n}")))]
pub struct ReplayError {
    /// The file.
    pub path: PathBuf,
    /// Its line at fault, from 1.
    pub line: Option<usize>,
    /// What is wrong, and what was expected.
    pub what: String,
}

/// Where step times come from in a line of the file.
enum Found {
    /// A line that gives none (a log's other lines, a comment, a blank).
    Nothing,
    /// A lerobot-train log's step line: its `updt_s`, seconds.
    Logged(f64),
    /// A plain step time, ms.
    Plain(f64),
}

impl StepReplay {
    /// The step times of `source`'s file, replayed in its order.
    pub fn read(source: &ReplaySource) -> Result<Self, ReplayError> {
        let path = source.file.as_path();
        let error = |line: Option<usize>, what: String| ReplayError {
            path: path.to_path_buf(),
            line,
            what,
        };
        let file = std::fs::File::open(path).map_err(|e| error(None, e.to_string()))?;
        let mut reader = std::io::BufReader::new(file);
        let first = reader.fill_buf().map_err(|e| error(None, e.to_string()))?;
        let times = if first.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            json_times(reader).map_err(|what| error(None, what))?
        } else {
            line_times(reader, &error)?
        };
        if times.is_empty() {
            return Err(error(None, format!("no step time: {EXPECTED}")));
        }
        Ok(Self { source: source.clone(), times_ms: times.into() })
    }

    /// What it replays, as a stable value: SHA-256 (hex) over its times and their order, not
    /// the file's path, so that one log copied elsewhere names one step.
    pub fn content_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        digest.update(format!("{:?}", self.source.order).as_bytes());
        for ms in self.times_ms.iter() {
            digest.update(ms.to_le_bytes());
        }
        format!("{:x}", digest.finalize())
    }

    /// The steps' times in the order they are replayed, without end.
    pub fn steps(&self) -> impl Iterator<Item = Duration> + Send + 'static {
        let (times, order) = (self.times_ms.clone(), self.source.order);
        let mut rng = match order {
            ReplayOrder::Drawn { seed } => Some(SplitMix64::new(seed, 0x57e9)),
            ReplayOrder::Logged => None,
        };
        (0..).map(move |n: usize| {
            let at = match rng.as_mut() {
                Some(rng) => (rng.next_u64() % times.len() as u64) as usize,
                None => n % times.len(),
            };
            Duration::from_secs_f64(times[at] / 1e3)
        })
    }

    /// The mean of its times, ms: what sets the rate of a step that takes them in turn.
    pub fn mean_ms(&self) -> f64 {
        self.times_ms.iter().sum::<f64>() / self.times_ms.len().max(1) as f64
    }

    /// The median and 95th percentile of its times, ms.
    pub fn median_and_p95_ms(&self) -> (f64, f64) {
        let mut sorted = self.times_ms.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at =
            |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        (at(0.5), at(0.95))
    }
}

impl fmt::Display for ReplayOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayOrder::Drawn { seed } => write!(f, "drawn (seed {seed})"),
            ReplayOrder::Logged => f.write_str("in the file's order"),
        }
    }
}

/// A step time as a file gives it, ms, where it is one: positive, finite, at most a day.
fn step_ms(ms: f64) -> Option<f64> {
    (ms.is_finite() && ms > 0.0 && ms <= LONGEST_STEP_MS).then_some(ms)
}

/// What `line` gives: a lerobot-train step line's `updt_s` (or `update_s`), or a plain number
/// of ms (`12.5`, `12.5ms`, `0.0125s`).
fn found(line: &str) -> Result<Found, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(Found::Nothing);
    }
    for token in line.split_whitespace() {
        if let Some(value) = token.strip_prefix("updt_s:").or(token.strip_prefix("update_s:")) {
            let seconds = value.parse::<f64>().ok();
            return seconds
                .and_then(|s| step_ms(s * 1e3))
                .map(Found::Logged)
                .ok_or_else(|| format!("`{token}`: expected a step's seconds, above 0"));
        }
    }
    let (number, scale) = match line.strip_suffix("ms") {
        Some(ms) => (ms, 1.0),
        None => line.strip_suffix('s').map_or((line, 1.0), |s| (s, 1e3)),
    };
    match number.trim().parse::<f64>() {
        Ok(value) => step_ms(value * scale).map(Found::Plain).ok_or_else(|| {
            format!("`{line}`: expected a step time above 0 and at most a day, in ms")
        }),
        Err(_) => Ok(Found::Nothing),
    }
}

/// The step times of a file of lines: a lerobot-train log's step lines where it has any, else
/// its plain numbers (then every other line but comments and blanks is an error).
fn line_times(
    mut reader: impl BufRead,
    error: &dyn Fn(Option<usize>, String) -> ReplayError,
) -> Result<Vec<f64>, ReplayError> {
    let (mut logged, mut plain) = (Vec::new(), Vec::new());
    let mut first_other: Option<(usize, String)> = None;
    let (mut line, mut number) = (Vec::new(), 0);
    loop {
        line.clear();
        let read = std::io::Read::take(reader.by_ref(), LONGEST_LINE as u64)
            .read_until(b'\n', &mut line)
            .map_err(|e| error(None, e.to_string()))?;
        if read == 0 {
            break;
        }
        if line.last() != Some(&b'\n') && read == LONGEST_LINE {
            // The rest of a long line (a dumped tensor, a progress bar): no step time.
            reader.skip_until(b'\n').map_err(|e| error(None, e.to_string()))?;
        }
        number += 1;
        let text = String::from_utf8_lossy(&line);
        match found(&text).map_err(|what| error(Some(number), what))? {
            Found::Logged(ms) => logged.push(ms),
            Found::Plain(ms) => plain.push(ms),
            Found::Nothing => {
                let blank = text.trim().is_empty() || text.trim_start().starts_with('#');
                if first_other.is_none() && !blank {
                    first_other = Some((number, text.trim().chars().take(60).collect()));
                }
            }
        }
        if logged.is_empty() && plain.is_empty() && number >= SEARCHED_LINES {
            return Err(error(
                None,
                format!("no step time in its first {SEARCHED_LINES} lines: is it a step log?"),
            ));
        }
        if logged.len().max(plain.len()) > MOST_STEP_TIMES {
            return Err(error(
                None,
                format!(
                    "more than {MOST_STEP_TIMES} step times: replay a part of it (e.g. its last \
                     100000 lines, `tail -n 100000`)"
                ),
            ));
        }
    }
    if !logged.is_empty() {
        return Ok(logged);
    }
    match first_other {
        Some((line, text)) => {
            Err(error(Some(line), format!("`{text}` is no step time: {EXPECTED}")))
        }
        _ => Ok(plain),
    }
}

/// The step times of a train phase's JSON (its `per_step`, whole or under `train`): each
/// measured step's compute (the step but its copy to the device), ms.
fn json_times(reader: impl std::io::Read) -> Result<Vec<f64>, String> {
    let json: serde_json::Value = serde_json::from_reader(reader.take(256 << 20))
        .map_err(|e| format!("not JSON feedbench wrote ({e})"))?;
    let steps = json
        .get("per_step")
        .or_else(|| json.get("train").and_then(|t| t.get("per_step")))
        .and_then(|s| s.as_array())
        .ok_or("no `per_step`: expected a train phase's JSON, with every measured step")?;
    steps
        .iter()
        .enumerate()
        .map(|(n, step)| {
            let part = |key: &str| step.get(key).and_then(serde_json::Value::as_f64);
            let compute = part("step_ms").zip(part("h2d_ms")).map(|(s, h)| s - h);
            compute.and_then(step_ms).ok_or_else(|| {
                format!("per_step[{n}]: expected step_ms above its h2d_ms, at most a day")
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<StepReplay, ReplayError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("steps");
        std::fs::write(&path, text).unwrap();
        StepReplay::read(&ReplaySource { file: path, order: ReplayOrder::Logged }).map_err(
            |mut e| {
                e.path = PathBuf::from("steps");
                e
            },
        )
    }

    #[test]
    fn a_log_a_plain_file_and_a_train_json_give_their_step_times() {
        let log =
            "INFO step:1 smpl:4 updt_s:0.100 data_s:0.5\nnoise\nstep:2 updt_s:0.300 data_s:0\n";
        assert_eq!(&*read(log).unwrap().times_ms, &[100.0, 300.0]);
        let plain = "# my steps\n40\n\n55.5ms\n0.06s\n";
        assert_eq!(&*read(plain).unwrap().times_ms, &[40.0, 55.5, 60.0]);
        let json =
            r#"{"per_step": [{"step_ms": 12.0, "h2d_ms": 2.0}, {"step_ms": 8, "h2d_ms": 0}]}"#;
        assert_eq!(&*read(json).unwrap().times_ms, &[10.0, 8.0]);
    }

    #[test]
    fn bad_files_are_one_line_naming_the_file_and_the_line() {
        let said = |text: &str| read(text).unwrap_err().to_string();
        assert!(said("").starts_with("steps: no step time"), "{}", said(""));
        assert!(said("hello\nworld").starts_with("steps:1: `hello` is no step time"));
        assert!(said("40\n-3\n").starts_with("steps:2: `-3`: expected a step time above 0"));
        for bad in ["0", "NaN", "1e308", "inf"] {
            assert!(said(bad).starts_with("steps:1: "), "{bad}: {}", said(bad));
        }
        assert!(said("step:3 updt_s:nan data_s:1").contains("`updt_s:nan`: expected"));
        assert!(
            said("INFO starting\nINFO done\n").contains("is no step time"),
            "a log without steps"
        );
        assert!(said("{\"steps\": 3}").contains("no `per_step`"));
        assert!(said("{not json").contains("not JSON"));
    }

    #[test]
    fn steps_come_in_the_files_order_or_drawn_seeded_from_it() {
        let logged = read("10\n20\n30\n").unwrap();
        let ms: Vec<f64> = logged.steps().take(5).map(|d| d.as_secs_f64() * 1e3).collect();
        assert!(ms.iter().zip([10.0, 20.0, 30.0, 10.0, 20.0]).all(|(a, b)| (a - b).abs() < 1e-6));
        let source =
            ReplaySource { order: ReplayOrder::Drawn { seed: 3 }, ..logged.source.clone() };
        let drawn = StepReplay { source, ..logged };
        let a: Vec<Duration> = drawn.steps().take(100).collect();
        assert_eq!(a, drawn.steps().take(100).collect::<Vec<_>>(), "seeded: reproducible");
        assert!(a.iter().all(|d| [10, 20, 30].contains(&d.as_millis())));
        assert!([10, 20, 30].iter().all(|ms| a.iter().any(|d| d.as_millis() == *ms)));
        assert_eq!(drawn.median_and_p95_ms(), (20.0, 30.0));
    }
}
