//! `feedbench compare`: is B slower than A, and by how much? A and B are two loaders (a
//! dataset and the knobs `load` takes). They run interleaved, A B B A A B …, each run a fresh
//! loader measured after its warm-up, so that the machine's drift, and whatever a run gains
//! or loses by following another, hit both alike; the change
//! in CPU ms per sample (the stable figure) and in samples/s comes with its bootstrap interval
//! ([`Change`]), and the loader's stages with theirs.

pub mod guard;
pub mod readers;
pub mod text;

use serde::{Deserialize, Serialize};

use crate::bench::events::Events;
use crate::loader::lerobot::LerobotBridge;
use crate::loader::pipeline::LoaderError;
use crate::measure::change::{Change, Decision, NOISE_PCT};
use crate::measure::loader_run::{measure_run, stage_changes, RunFigures, RunLength, StageChange};
use crate::measure::phase::ChosenLoader;

/// Seed of the bootstrap intervals (fixed: the same runs give the same verdict).
const SEED: u64 = 0x5eed;

/// The order of `count` things measured side by side in repeat `repeat`: in order, then in
/// reverse, and so on (A B, B A, A B …), so that whatever a run gains or loses by following
/// another, and the machine's drift, reach each alike.
pub fn interleaved(count: usize, repeat: usize) -> impl Iterator<Item = usize> {
    let reversed = repeat % 2 == 1;
    (0..count).map(move |i| if reversed { count - 1 - i } else { i })
}

/// What to compare, and how long.
#[derive(Debug, Clone)]
pub struct CompareSpec {
    /// The reference.
    pub a: ChosenLoader,
    /// The candidate.
    pub b: ChosenLoader,
    /// Runs of each.
    pub repeats: usize,
    /// Batches measured per run.
    pub batches: usize,
    /// Batches per run before measuring [default: the batches in flight plus one].
    pub warmup: Option<usize>,
}

/// Which loader a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The reference.
    A,
    /// The candidate.
    B,
}

impl Side {
    /// `A` or `B`.
    pub fn name(self) -> &'static str {
        match self {
            Side::A => "A",
            Side::B => "B",
        }
    }
}

/// One measured run: which side, and its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// A or B.
    pub side: Side,
    /// What it measured.
    #[serde(flatten)]
    pub figures: RunFigures,
}

/// The comparison: every run, and the changes with their decisions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The runs in the order they ran.
    pub runs: Vec<Run>,
    /// Change of CPU ms per sample (positive: B costs more).
    pub cpu: Change,
    /// What it says, with [`NOISE_PCT`] as noise.
    pub cpu_decision: Decision,
    /// Change of samples/s (positive: B is faster).
    pub throughput: Change,
    /// What it says.
    pub throughput_decision: Decision,
    /// Per stage.
    pub stages: Vec<StageChange>,
}

impl Comparison {
    /// One side's runs' values of `figure`.
    pub fn values(&self, side: Side, figure: impl Fn(&RunFigures) -> f64) -> Vec<f64> {
        self.side(side).map(figure).collect()
    }

    /// One side's runs, in run order.
    fn side(&self, side: Side) -> impl Iterator<Item = &RunFigures> {
        self.runs.iter().filter(move |r| r.side == side).map(|r| &r.figures)
    }
}

/// Why a comparison did not finish.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The comparison asked for cannot be made.
    #[error(transparent)]
    Request(LoaderError),
    /// One side's loader failed: the front end names the side as its user gave it.
    #[error("{side:?}: {error}")]
    Side {
        /// The side whose loader failed.
        side: Side,
        /// What failed.
        #[source]
        error: LoaderError,
    },
}

/// Runs A and B interleaved, `repeats` times each, LeRobot's loaders through `bridge` (the
/// one that described them: a lerobot-train run is built once for all its runs); `events`
/// hear each run as it starts (`A` or `B`, its repeat).
pub fn compare(
    spec: &CompareSpec,
    bridge: &LerobotBridge,
    events: &mut dyn Events,
) -> Result<Comparison, CompareError> {
    if spec.repeats < 2 {
        return Err(CompareError::Request(LoaderError::Config(
            "compare needs at least 2 repeats of each".into(),
        )));
    }
    let mut runs = Vec::with_capacity(2 * spec.repeats);
    for repeat in 0..spec.repeats {
        let pair = [(Side::A, &spec.a), (Side::B, &spec.b)];
        for (side, loader) in interleaved(2, repeat).map(|i| pair[i]) {
            events.run_starts(side.name(), repeat);
            let length = RunLength { batches: spec.batches, warmup: spec.warmup };
            let figures = measure_run(loader, length, false, None, bridge)
                .map_err(|error| CompareError::Side { side, error })?
                .figures;
            runs.push(Run { side, figures });
        }
    }
    Ok(analyse(runs))
}

/// The changes the runs show.
pub fn analyse(runs: Vec<Run>) -> Comparison {
    let side = |side: Side| -> Vec<&RunFigures> {
        runs.iter().filter(|r| r.side == side).map(|r| &r.figures).collect()
    };
    let (a, b) = (side(Side::A), side(Side::B));
    let change = |figure: fn(&RunFigures) -> f64| {
        let values = |runs: &[&RunFigures]| runs.iter().map(|r| figure(r)).collect::<Vec<_>>();
        Change::of(&values(&a), &values(&b), SEED).unwrap_or(Change::NONE)
    };
    let (cpu, throughput) = (change(|r| r.cpu_ms_per_sample), change(|r| r.samples_per_s));
    let stages = stage_changes(&a, &b, SEED);
    Comparison {
        cpu_decision: cpu.decision(NOISE_PCT),
        throughput_decision: throughput.decision(NOISE_PCT),
        cpu,
        throughput,
        stages,
        runs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, cpu: f64, decode: f64) -> Run {
        Run {
            side,
            figures: RunFigures {
                cpu_ms_per_sample: cpu,
                samples_per_s: 100.0 / cpu,
                stages: vec![("decode".into(), decode), ("convert".into(), cpu - decode)],
                instructions_per_sample: None,
                au_pct: None,
            },
        }
    }

    #[test]
    fn a_costlier_decode_makes_b_slower_and_shows_in_its_stage() {
        let runs: Vec<Run> = [5.0, 5.1, 4.9, 5.05, 4.95]
            .iter()
            .flat_map(|&cpu| [run(Side::A, cpu, cpu - 1.0), run(Side::B, cpu + 0.6, cpu - 0.4)])
            .collect();
        let c = analyse(runs);
        assert_eq!(c.cpu_decision, Decision::Higher, "{:?}", c.cpu);
        assert!((c.cpu.percent - 12.0).abs() < 0.5, "{:?}", c.cpu);
        assert_eq!(c.throughput_decision, Decision::Lower, "fewer samples/s");
        let decode = c.stages.iter().find(|s| s.stage == "decode").unwrap();
        assert!((decode.change.unwrap().percent - 15.0).abs() < 0.5, "{decode:?}");
        let convert = c.stages.iter().find(|s| s.stage == "convert").unwrap();
        assert!(convert.change.unwrap().percent.abs() < 1e-9, "{convert:?}");
        assert_eq!(c.values(Side::A, |r| r.cpu_ms_per_sample).len(), 5);
    }
}
