//! Several ranks measured at once, as one phase: each rank's figures, which rank is slowest and
//! how far the ranks spread. On a training box every step waits for the slowest rank (DDP's
//! all-reduce), so the phase is the slowest rank's, with every rank beside it.

use super::figures::{LoaderPhase, RankFigures, RankSpread, TrainPhase};
use super::memory::MemoryFigures;

/// A phase that several ranks measured at once, each its own: one phase, the slowest rank's,
/// with [`RankSpread`] beside its figures.
pub trait OfRanks: Sized {
    /// The rank's figures.
    fn rank_figures(&self, rank: usize, pid: u32) -> RankFigures;
    /// Per step (batch), ms it waited for data, and the step's (batch's) whole wall.
    fn wait_and_step_ms(&self) -> (f64, f64);
    /// What its process tree held.
    fn memory(&self) -> Option<&MemoryFigures>;
    /// The phase with `spread` beside its figures and `memory` for every rank's tree.
    fn with_ranks(self, spread: RankSpread, memory: Option<MemoryFigures>) -> Self;

    /// The phases of `ranks` (each with its rank's pid, rank 0 first) as one: the slowest
    /// rank's, with every rank beside it and the memory of every rank's process tree. One
    /// rank's phase is that phase as it is.
    fn of_ranks(ranks: Vec<(Self, u32)>) -> Option<Self> {
        if ranks.len() <= 1 {
            return ranks.into_iter().next().map(|(phase, _)| phase);
        }
        let waits: Vec<(f64, f64)> = ranks.iter().map(|(p, _)| p.wait_and_step_ms()).collect();
        let slowest = (0..ranks.len()).max_by(|&a, &b| waits[a].0.total_cmp(&waits[b].0))?;
        let (most, least) = waits
            .iter()
            .fold((f64::MIN, f64::MAX), |(most, least), (w, _)| (most.max(*w), least.min(*w)));
        let step_ms = waits[slowest].1;
        let rank_spread_pct =
            if step_ms > 0.0 { (100.0 * (most - least) / step_ms).clamp(0.0, 100.0) } else { 0.0 };
        let figures =
            ranks.iter().enumerate().map(|(rank, (p, pid))| p.rank_figures(rank, *pid)).collect();
        let spread = RankSpread {
            ranks: figures,
            slowest_rank: slowest,
            rank_spread_pct,
            one_rank_alone_samples_per_s: None,
            scaling_efficiency: None,
        };
        let trees: Option<Vec<MemoryFigures>> =
            ranks.iter().map(|(p, _)| p.memory().cloned()).collect();
        let memory = trees.and_then(|trees| MemoryFigures::of_trees(&trees));
        let phase = ranks.into_iter().nth(slowest).map(|(phase, _)| phase)?;
        Some(phase.with_ranks(spread, memory))
    }
}

impl OfRanks for TrainPhase {
    fn rank_figures(&self, rank: usize, pid: u32) -> RankFigures {
        RankFigures {
            rank,
            pid,
            samples_per_s: self.samples_per_s,
            input_bound_pct: Some(self.input_bound.median_pct),
            first_batch_s: self.first_batch_s,
        }
    }

    fn wait_and_step_ms(&self) -> (f64, f64) {
        (self.wait.mean_ms + self.h2d.mean_ms, self.step.mean_ms)
    }

    fn memory(&self) -> Option<&MemoryFigures> {
        self.memory.as_ref()
    }

    fn with_ranks(self, spread: RankSpread, memory: Option<MemoryFigures>) -> Self {
        Self { ranks: Some(spread), memory, ..self }
    }
}

impl OfRanks for LoaderPhase {
    fn rank_figures(&self, rank: usize, pid: u32) -> RankFigures {
        RankFigures {
            rank,
            pid,
            samples_per_s: self.samples_per_s,
            input_bound_pct: None,
            first_batch_s: self.first_batch_s,
        }
    }

    fn wait_and_step_ms(&self) -> (f64, f64) {
        let per_batch = 1e3 * self.wall_s / self.batches.max(1) as f64;
        (per_batch, per_batch)
    }

    fn memory(&self) -> Option<&MemoryFigures> {
        self.memory.as_ref()
    }

    fn with_ranks(self, spread: RankSpread, memory: Option<MemoryFigures>) -> Self {
        Self { ranks: Some(spread), memory, ..self }
    }
}
