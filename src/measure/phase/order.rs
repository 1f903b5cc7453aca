//! What a loader phase's batches held and in what order they came, beside its speed: how many
//! episodes each batch mixes (a shuffled episode-aware sampler mixes many; an unshuffled one
//! one or two), and whether the batches came as the sampler yielded them — measured, not
//! assumed: a map-style DataLoader keeps the sampler's order, a streaming reader's shuffle
//! buffer does not.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::loader::batch::{Batch, BatchData};
use crate::loader::pipeline::Loader;
use crate::loader::sampler::SamplerOrder;

/// The order and variety of a phase's measured batches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderFigures {
    /// Distinct episodes in a measured batch, on average.
    pub episodes_per_batch_mean: f64,
    /// The fewest distinct episodes in a measured batch.
    pub episodes_per_batch_min: usize,
    /// The most.
    pub episodes_per_batch_max: usize,
    /// Whether the batches came with the sampler's indices in the sampler's order; None where
    /// the loader's sampler could not be read (a lerobot-train run's own DataLoader).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler_order: Option<SamplerOrder>,
}

/// Tallies a phase's batches as they come: the episodes of each measured one, and every
/// batch's indices against what the sampler meant.
#[derive(Debug, Default)]
pub struct OrderTally {
    episodes_per_batch: Vec<usize>,
    checked: usize,
    first_out_of_order: Option<usize>,
}

impl OrderTally {
    /// A measured batch whose samples came from `episodes` (one per sample).
    pub fn episodes(&mut self, episodes: &[i64]) {
        let distinct: BTreeSet<i64> = episodes.iter().copied().collect();
        self.episodes_per_batch.push(distinct.len());
    }

    /// The loader's next batch (warm-up or measured) held the sample indices `delivered`
    /// where its sampler meant `meant`.
    pub fn compare(&mut self, delivered: &[i64], meant: &[usize]) {
        let same = delivered.len() == meant.len()
            && delivered.iter().zip(meant).all(|(&d, &m)| usize::try_from(d) == Ok(m));
        if !same && self.first_out_of_order.is_none() {
            self.first_out_of_order = Some(self.checked);
        }
        self.checked += 1;
    }

    /// The figures; None where no measured batch said its episodes.
    pub fn figures(self) -> Option<OrderFigures> {
        let sampler_order = (self.checked > 0).then_some(SamplerOrder {
            batches_checked: self.checked,
            first_out_of_order: self.first_out_of_order,
        });
        OrderFigures::of(&self.episodes_per_batch, sampler_order)
    }
}

/// The native loader's batches against its own plan, epoch after epoch from epoch 0 (as
/// [`Loader::epochs`] delivers them): the plan of the epoch at hand is made once.
pub struct NativeOrder<'a> {
    loader: &'a Loader,
    per_epoch: usize,
    taken: usize,
    plan: (u64, Arc<Vec<Vec<usize>>>),
    tally: OrderTally,
}

impl<'a> NativeOrder<'a> {
    /// The order of `loader`'s batches, `per_epoch` a epoch.
    pub fn new(loader: &'a Loader, per_epoch: usize) -> Self {
        let plan = (0, loader.epoch_plan(0));
        Self { loader, per_epoch, taken: 0, plan, tally: OrderTally::default() }
    }

    /// The loader's next batch (warm-up or measured), its episodes tallied where `measured`.
    pub fn batch(&mut self, batch: &Batch, measured: bool) {
        let (epoch, position) = (self.taken / self.per_epoch, self.taken % self.per_epoch);
        self.taken += 1;
        if self.plan.0 != epoch as u64 {
            self.plan = (epoch as u64, self.loader.epoch_plan(epoch as u64));
        }
        if let Some(delivered) = ints(batch, "index") {
            let meant = self.plan.1.get(position).map_or(&[][..], Vec::as_slice);
            self.tally.compare(delivered, meant);
        }
        if let Some(episodes) = ints(batch, "episode_index").filter(|_| measured) {
            self.tally.episodes(episodes);
        }
    }

    /// The figures; None where the batches did not say their episodes.
    pub fn figures(self) -> Option<OrderFigures> {
        self.tally.figures()
    }
}

/// The integer values of `batch`'s tensor `key`, where it has one of integers.
fn ints<'b>(batch: &'b Batch, key: &str) -> Option<&'b [i64]> {
    match &batch.tensors.get(key)?.data {
        BatchData::I64(values) => Some(values),
        _ => None,
    }
}

impl OrderFigures {
    /// The figures of batches of `episodes_per_batch` distinct episodes each, their order as
    /// `sampler_order` found it; None without a batch.
    pub fn of(episodes_per_batch: &[usize], sampler_order: Option<SamplerOrder>) -> Option<Self> {
        let min = *episodes_per_batch.iter().min()?;
        let max = *episodes_per_batch.iter().max()?;
        let mean =
            episodes_per_batch.iter().sum::<usize>() as f64 / episodes_per_batch.len() as f64;
        Some(OrderFigures {
            episodes_per_batch_mean: mean,
            episodes_per_batch_min: min,
            episodes_per_batch_max: max,
            sampler_order,
        })
    }

    /// One line for the terminal: `episodes per batch 3.2 (2–5); in the sampler's order`.
    pub fn line(&self) -> String {
        let order = match &self.sampler_order {
            Some(order) if order.kept() => {
                format!("; in the sampler's order ({} batches checked)", order.batches_checked)
            }
            Some(order) => format!(
                "; NOT in the sampler's order from batch {} of {} checked",
                order.first_out_of_order.unwrap_or_default(),
                order.batches_checked
            ),
            None => String::new(),
        };
        format!(
            "episodes per batch {:.1} ({}–{}){order}",
            self.episodes_per_batch_mean, self.episodes_per_batch_min, self.episodes_per_batch_max
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_episodes_are_counted_and_the_first_batch_out_of_order_named() {
        let mut tally = OrderTally::default();
        tally.episodes(&[3, 3, 4, 3]);
        tally.episodes(&[7, 7, 7, 7]);
        tally.compare(&[0, 1], &[0, 1]);
        tally.compare(&[5, 4], &[4, 5]);
        tally.compare(&[2, 3], &[2, 3]);
        let figures = tally.figures().unwrap();
        assert_eq!((figures.episodes_per_batch_min, figures.episodes_per_batch_max), (1, 2));
        assert_eq!(figures.episodes_per_batch_mean, 1.5);
        let order = figures.sampler_order.clone().unwrap();
        assert_eq!((order.batches_checked, order.first_out_of_order), (3, Some(1)));
        assert!(figures.line().contains("NOT in the sampler's order from batch 1 of 3"));
        // Nothing compared: the order is not said; no batch: no figures.
        let mut unchecked = OrderTally::default();
        unchecked.episodes(&[1]);
        assert_eq!(unchecked.figures().unwrap().sampler_order, None);
        assert_eq!(OrderTally::default().figures(), None);
    }
}
