//! Samplers: the order of sample indices in an epoch, and how it is split into batches and
//! across ranks — with the semantics of PyTorch's samplers and LeRobot's episode-aware one —
//! and whether a loader delivered the batches its sampler yielded.

use serde::{Deserialize, Serialize};

/// A loader's delivered batches held against the batches its sampler yielded, from its first
/// (LeRobot's driver says it as `SamplerOrder`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SamplerOrder {
    /// Batches compared, warm-up included, from the loader's first.
    pub batches_checked: usize,
    /// The first batch (0: the loader's first) whose indices were not the sampler's next;
    /// None where every batch was.
    pub first_out_of_order: Option<usize>,
}

impl SamplerOrder {
    /// Whether every batch compared came in the sampler's order.
    pub fn kept(&self) -> bool {
        self.first_out_of_order.is_none()
    }
}

/// Which indices an epoch visits, and in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplerKind {
    /// Every frame of the selected episodes, in index order (`SequentialSampler`).
    Sequential,
    /// Every frame, in a seeded order drawn anew each epoch (`RandomSampler`).
    Shuffled,
    /// LeRobot's `EpisodeAwareSampler`: every frame but the last `drop_n_last_frames` of each
    /// episode, shuffled (seeded, anew each epoch).
    EpisodeAware,
}

named_values!(SamplerKind {
    Sequential => "sequential",
    Shuffled => "shuffled",
    EpisodeAware => "episode-aware" | "episode_aware",
});

/// This process's share of the data: `DistributedSampler` semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// This process's rank, `0 ≤ rank < world`.
    pub rank: usize,
    /// Number of processes.
    pub world: usize,
}

/// A shard that cannot be: a rank outside the world, or a variable that is not a number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// `rank ≥ world`, or a world of 0.
    #[error("rank {rank} of world size {world}: expected 0 ≤ rank < world")]
    Rank {
        /// The rank asked for.
        rank: usize,
        /// The world size asked for.
        world: usize,
    },
    /// The environment's rank and world size do not make a shard.
    #[error(
        "${rank_name}={rank} and ${world_name}={world}: expected 0 ≤ {rank_name} < {world_name}"
    )]
    Environment {
        /// The rank's variable (`RANK`, `SLURM_PROCID`).
        rank_name: &'static str,
        /// Its value.
        rank: usize,
        /// The world size's variable (`WORLD_SIZE`, `SLURM_NTASKS`).
        world_name: &'static str,
        /// Its value.
        world: usize,
    },
    /// An environment variable that should hold a count does not.
    #[error("${name}={value:?}: {what}")]
    Variable {
        /// The variable (`RANK`, `SLURM_NTASKS`, …).
        name: String,
        /// Its value.
        value: String,
        /// Why it is not a count.
        what: String,
    },
}

impl Default for Shard {
    fn default() -> Self {
        Self { rank: 0, world: 1 }
    }
}

impl Shard {
    /// The shard named by the environment: `RANK`/`WORLD_SIZE` (torchrun) or
    /// `SLURM_PROCID`/`SLURM_NTASKS`; a single process when neither is set.
    pub fn from_env() -> Result<Self, ShardError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Self::from_env`] over any variable lookup.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ShardError> {
        let read = |name: &str| -> Result<Option<usize>, ShardError> {
            lookup(name)
                .map(|value| {
                    value.trim().parse().map_err(|e: std::num::ParseIntError| {
                        ShardError::Variable { name: name.to_string(), value, what: e.to_string() }
                    })
                })
                .transpose()
        };
        for (rank_name, world_name) in [("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")] {
            if let (Some(rank), Some(world)) = (read(rank_name)?, read(world_name)?) {
                return Self::new(rank, world).map_err(|_| ShardError::Environment {
                    rank_name,
                    rank,
                    world_name,
                    world,
                });
            }
        }
        Ok(Self::default())
    }

    /// A checked shard.
    pub fn new(rank: usize, world: usize) -> Result<Self, ShardError> {
        if world == 0 || rank >= world {
            return Err(ShardError::Rank { rank, world });
        }
        Ok(Self { rank, world })
    }

    /// `DistributedSampler`'s split: pad the list by repeating its start until it divides
    /// evenly (or, with `drop_last`, cut the tail), then keep `indices[rank::world]`.
    pub fn split(&self, mut indices: Vec<usize>, drop_last: bool) -> Vec<usize> {
        if self.world == 1 || indices.is_empty() {
            return indices;
        }
        let total = if drop_last {
            indices.len() / self.world * self.world
        } else {
            indices.len().div_ceil(self.world) * self.world
        };
        if total <= indices.len() {
            indices.truncate(total);
        } else {
            let original = indices.clone();
            indices.extend(original.iter().cycle().take(total - original.len()));
        }
        indices.into_iter().skip(self.rank).step_by(self.world).collect()
    }
}

/// SplitMix64: a small, fast, well-mixed generator, fixed by its seed (shuffles here, bootstrap
/// resampling in `bench`).
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose sequence `seed` fixes.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce5_e9b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..bound` (Lemire's multiply-shift; bias below 2^-32 here).
    pub fn below(&mut self, bound: usize) -> usize {
        ((u128::from(self.next()) * bound as u128) >> 64) as usize
    }
}

/// Shuffles `indices` in place with a permutation fixed by `seed` and `epoch`.
pub fn shuffle(indices: &mut [usize], seed: u64, epoch: u64) {
    let mut rng = SplitMix64(seed ^ epoch.wrapping_mul(0xd1b5_4a32_d192_ed03));
    for i in (1..indices.len()).rev() {
        indices.swap(i, rng.below(i + 1));
    }
}

/// The order of one epoch: the candidate indices (all frames, or the episode-aware ones),
/// shuffled when the kind says so, then this rank's shard.
pub fn epoch_order(
    kind: SamplerKind,
    candidates: Vec<usize>,
    seed: u64,
    epoch: u64,
    shard: Shard,
    drop_last: bool,
) -> Vec<usize> {
    let mut indices = candidates;
    if kind != SamplerKind::Sequential {
        shuffle(&mut indices, seed, epoch);
    }
    shard.split(indices, drop_last)
}

/// Splits an epoch's order into batches of `batch_size`; with `drop_last` an incomplete last
/// batch is dropped, as `DataLoader(drop_last=True)` does.
pub fn batches(order: &[usize], batch_size: usize, drop_last: bool) -> Vec<Vec<usize>> {
    order
        .chunks(batch_size.max(1))
        .filter(|chunk| !drop_last || chunk.len() == batch_size)
        .map(<[usize]>::to_vec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_permutations_fixed_by_seed_and_epoch() {
        let base: Vec<usize> = (0..1000).collect();
        let order = |seed, epoch| {
            epoch_order(SamplerKind::Shuffled, base.clone(), seed, epoch, Shard::default(), false)
        };
        let a = order(7, 0);
        assert_eq!(a, order(7, 0), "same seed and epoch, same order");
        assert_ne!(a, order(7, 1), "reshuffled each epoch");
        assert_ne!(a, order(8, 0), "another seed, another order");
        assert_ne!(a, base, "shuffled at all");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, base, "every index exactly once");
        let sequential =
            epoch_order(SamplerKind::Sequential, base.clone(), 7, 3, Shard::default(), false);
        assert_eq!(sequential, base);
    }

    #[test]
    fn shards_follow_distributed_sampler() {
        let indices: Vec<usize> = (0..10).collect();
        // Padded: 10 → 12 by repeating the start, then indices[rank::3].
        let shards: Vec<Vec<usize>> =
            (0..3).map(|r| Shard::new(r, 3).unwrap().split(indices.clone(), false)).collect();
        assert_eq!(shards, [vec![0, 3, 6, 9], vec![1, 4, 7, 0], vec![2, 5, 8, 1]]);
        // drop_last: 10 → 9.
        let shards: Vec<Vec<usize>> =
            (0..3).map(|r| Shard::new(r, 3).unwrap().split(indices.clone(), true)).collect();
        assert_eq!(shards, [vec![0, 3, 6], vec![1, 4, 7], vec![2, 5, 8]]);
        assert!(Shard::new(3, 3).is_err());
        assert!(Shard::new(0, 0).is_err());
    }

    #[test]
    fn shards_of_a_shuffled_epoch_are_disjoint_and_cover_it() {
        let candidates: Vec<usize> = (100..1100).collect();
        for world in [2, 3, 4] {
            let mut all: Vec<usize> = (0..world)
                .flat_map(|rank| {
                    let shard = Shard::new(rank, world).unwrap();
                    epoch_order(SamplerKind::EpisodeAware, candidates.clone(), 1, 2, shard, true)
                })
                .collect();
            let len = all.len();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), len, "no index on two ranks (world {world})");
            assert_eq!(len, 1000 / world * world, "all but the dropped tail");
        }
    }

    #[test]
    fn shards_come_from_torchrun_or_slurm_variables() {
        let vars = |pairs: &'static [(&str, &str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(Shard::from_vars(vars(&[])).unwrap(), Shard::default());
        let torchrun = vars(&[
            ("RANK", "2"),
            ("WORLD_SIZE", "4"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "8"),
        ]);
        assert_eq!(Shard::from_vars(torchrun).unwrap(), Shard { rank: 2, world: 4 });
        let slurm = vars(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "8")]);
        assert_eq!(Shard::from_vars(slurm).unwrap(), Shard { rank: 5, world: 8 });
        assert!(Shard::from_vars(vars(&[("RANK", "x"), ("WORLD_SIZE", "2")]))
            .unwrap_err()
            .to_string()
            .contains("$RANK"));
        let error =
            |pairs: &'static [(&str, &str)]| Shard::from_vars(vars(pairs)).unwrap_err().to_string();
        assert_eq!(
            error(&[("RANK", "2"), ("WORLD_SIZE", "2")]),
            "$RANK=2 and $WORLD_SIZE=2: expected 0 ≤ RANK < WORLD_SIZE"
        );
        assert_eq!(
            error(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "0")]),
            "$SLURM_PROCID=0 and $SLURM_NTASKS=0: expected 0 ≤ SLURM_PROCID < SLURM_NTASKS"
        );
    }

    #[test]
    fn batches_keep_or_drop_the_tail() {
        let order: Vec<usize> = (0..10).collect();
        assert_eq!(batches(&order, 4, false).iter().map(Vec::len).collect::<Vec<_>>(), [4, 4, 2]);
        assert_eq!(batches(&order, 4, true).iter().map(Vec::len).collect::<Vec<_>>(), [4, 4]);
    }
}
