//! The ranks of a multi-process `load` or `train` (`srun -n N`, `torchrun`): each rank's figures
//! in `DIR/rank-<r>.json`, and, merged, every rank side by side with the slowest named, since
//! a synchronous data-parallel step waits for its slowest rank.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::ClusterError;
use crate::dataset::files::write_whole;
use crate::measure::phase::{LoaderPhase, TrainPhase};
use crate::measure::system::{Placement, SystemInfo};

/// What one rank measured: one `rank-<r>.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RankResult {
    /// This process's rank.
    pub rank: usize,
    /// How many ranks the run had.
    pub world_size: usize,
    /// The figures: the loader alone (`load`) or feeding a step (`train`).
    pub phase: RankPhase,
    /// The sample indices of this rank's share of the first epoch, in sampler order.
    pub epoch_indices: Vec<usize>,
    /// The machine.
    pub system: SystemInfo,
    /// The host, CPUs and scheduler job.
    pub placement: Placement,
}

/// A rank's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankPhase {
    /// `feedbench load`.
    Load(Box<LoaderPhase>),
    /// `feedbench train`.
    Train(Box<TrainPhase>),
}

impl RankPhase {
    /// Samples per second, the figure ranks are compared by.
    pub fn samples_per_s(&self) -> f64 {
        match self {
            RankPhase::Load(p) => p.samples_per_s,
            RankPhase::Train(p) => p.samples_per_s,
        }
    }

    /// The command that measured it.
    pub fn command(&self) -> &'static str {
        match self {
            RankPhase::Load(_) => "load",
            RankPhase::Train(_) => "train",
        }
    }
}

/// The file of `rank`'s figures in `dir`.
pub fn rank_path(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank-{rank}.json"))
}

/// The file `rank` will write in `dir`, refused before anything is measured when it is there
/// already (each run's ranks go to a directory of their own); `dir` is created.
pub fn claim_rank_file(dir: &Path, rank: usize) -> Result<PathBuf, ClusterError> {
    if dir.exists() && !dir.is_dir() {
        return Err(ClusterError::file(dir, "exists and is not a directory (--out)"));
    }
    std::fs::create_dir_all(dir).map_err(|e| ClusterError::io(dir, e))?;
    let path = rank_path(dir, rank);
    if path.exists() {
        return Err(ClusterError::file(
            &path,
            "exists: an earlier run's rank; each run's ranks go to a new --out",
        ));
    }
    Ok(path)
}

/// Writes `result` to its rank file, whole or not at all.
pub fn write_rank(dir: &Path, result: &RankResult) -> Result<PathBuf, ClusterError> {
    let path = rank_path(dir, result.rank);
    let text = crate::bench::export::pretty_json(result);
    write_whole(&path, text.as_bytes()).map_err(|e| ClusterError::io(&path, e))?;
    Ok(path)
}

/// Every rank of a run, read from `dir`, with what is missing and how the shards overlap.
#[derive(Debug, Clone)]
pub struct RankRun {
    /// The ranks found, by rank.
    pub ranks: Vec<RankResult>,
    /// Ranks of the world with no file.
    pub missing: Vec<usize>,
    /// Distinct sample indices over every rank's first epoch.
    pub distinct_samples: usize,
    /// Indices that more than one rank loaded (DistributedSampler pads the last round).
    pub repeated_samples: usize,
}

/// Does `dir` hold rank files?
pub fn has_ranks(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| e.file_name().to_str().is_some_and(is_rank_file))
    })
}

fn is_rank_file(name: &str) -> bool {
    name.strip_prefix("rank-")
        .and_then(|n| n.strip_suffix(".json"))
        .is_some_and(|n| n.parse::<usize>().is_ok())
}

/// Reads every `rank-<r>.json` in `dir`. Ranks of different runs (another world size or
/// command) are an error naming the file.
pub fn read_ranks(dir: &Path) -> Result<RankRun, ClusterError> {
    let entries = std::fs::read_dir(dir).map_err(|e| ClusterError::io(dir, e))?;
    let mut ranks: Vec<RankResult> = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| ClusterError::io(dir, e))?.path();
        if !path.file_name().and_then(|n| n.to_str()).is_some_and(is_rank_file) {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| ClusterError::io(&path, e))?;
        let rank: RankResult = serde_json::from_str(&text)
            .map_err(|e| ClusterError::file(&path, format!("not a feedbench rank result ({e})")))?;
        if rank_path(dir, rank.rank) != path {
            return Err(ClusterError::file(&path, format!("holds rank {}", rank.rank)));
        }
        if let Some(first) = ranks.first() {
            if (first.world_size, first.phase.command()) != (rank.world_size, rank.phase.command())
            {
                return Err(ClusterError::file(
                    &path,
                    format!(
                        "rank of a {} run of {} ranks, but rank {} was of a {} run of {}: one \
                         run per directory",
                        rank.phase.command(),
                        rank.world_size,
                        first.rank,
                        first.phase.command(),
                        first.world_size
                    ),
                ));
            }
        }
        ranks.push(rank);
    }
    if ranks.is_empty() {
        return Err(ClusterError::file(dir, "no rank-<r>.json here"));
    }
    ranks.sort_by_key(|r| r.rank);
    let present: HashSet<usize> = ranks.iter().map(|r| r.rank).collect();
    let missing = (0..ranks[0].world_size).filter(|r| !present.contains(r)).collect();
    let total: usize = ranks.iter().map(|r| r.epoch_indices.len()).sum();
    let distinct: HashSet<usize> =
        ranks.iter().flat_map(|r| r.epoch_indices.iter().copied()).collect();
    Ok(RankRun {
        missing,
        distinct_samples: distinct.len(),
        repeated_samples: total - distinct.len(),
        ranks,
    })
}

impl RankRun {
    /// The slowest rank (fewest samples per second).
    pub fn slowest(&self) -> &RankResult {
        self.ranks
            .iter()
            .min_by(|a, b| a.phase.samples_per_s().total_cmp(&b.phase.samples_per_s()))
            .expect("a run has a rank")
    }
}

impl fmt::Display for RankRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let first = &self.ranks[0];
        let train = matches!(first.phase, RankPhase::Train(_));
        writeln!(
            f,
            "{} with {} ranks ({} found)",
            first.phase.command(),
            first.world_size,
            self.ranks.len()
        )?;
        if train {
            writeln!(
                f,
                "{:>5}  {:<20} {:>10} {:>9} {:>9} {:>12}",
                "rank", "host", "samples/s", "step ms", "wait ms", "input-bound"
            )?;
        } else {
            writeln!(
                f,
                "{:>5}  {:<20} {:>10} {:>14} {:>10}",
                "rank", "host", "samples/s", "CPU ms/sample", "batches"
            )?;
        }
        for rank in &self.ranks {
            match &rank.phase {
                RankPhase::Train(p) => writeln!(
                    f,
                    "{:>5}  {:<20} {:>10.1} {:>9.1} {:>9.1} {:>11.0}%",
                    rank.rank,
                    rank.placement.host,
                    p.samples_per_s,
                    p.step.median_ms,
                    p.wait.median_ms,
                    p.input_bound.median_pct
                )?,
                RankPhase::Load(p) => writeln!(
                    f,
                    "{:>5}  {:<20} {:>10.1} {:>14.2} {:>10}",
                    rank.rank, rank.placement.host, p.samples_per_s, p.cpu_ms_per_sample, p.batches
                )?,
            }
        }
        let slowest = self.slowest();
        let fastest = self
            .ranks
            .iter()
            .max_by(|a, b| a.phase.samples_per_s().total_cmp(&b.phase.samples_per_s()))
            .expect("a run has a rank");
        let (slow, fast) = (slowest.phase.samples_per_s(), fastest.phase.samples_per_s());
        writeln!(
            f,
            "slowest: rank {} on {}, {slow:.1} samples/s, {:.0} % below the fastest (rank {}, \
             {fast:.1}); a synchronous data-parallel step waits for it: about {:.0} samples/s \
             for the job",
            slowest.rank,
            slowest.placement.host,
            if fast > 0.0 { (1.0 - slow / fast) * 100.0 } else { 0.0 },
            fastest.rank,
            slow * first.world_size as f64
        )?;
        writeln!(
            f,
            "shards of the first epoch: {} distinct samples, {}",
            self.distinct_samples,
            match self.repeated_samples {
                0 => "disjoint".to_string(),
                n => format!("{n} loaded by two ranks (DistributedSampler pads the last round)"),
            }
        )?;
        if !self.missing.is_empty() {
            let list: Vec<String> = self.missing.iter().map(usize::to_string).collect();
            writeln!(f, "missing ranks: {}", list.join(", "))?;
        }
        Ok(())
    }
}
