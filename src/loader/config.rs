//! The loader's knobs, named and meant as in `torch.utils.data.DataLoader`.

use serde::{Deserialize, Serialize};

use super::batch::ImageFormat;
use super::sampler::{SamplerKind, Shard};
use crate::dataset::Resolution;

/// The loader's knobs, named and meant as in `torch.utils.data.DataLoader`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoaderConfig {
    /// Worker threads; 0 loads in the consuming thread.
    pub workers: usize,
    /// Batches in flight per worker (`prefetch_factor`).
    pub prefetch: usize,
    /// Samples per batch.
    pub batch_size: usize,
    /// Drop the last incomplete batch.
    pub drop_last: bool,
    /// The order of indices.
    pub sampler: SamplerKind,
    /// Seed of the shuffled orders.
    pub seed: u64,
    /// This process's share of the data.
    pub shard: Shard,
    /// Deliver batches in sampler order (true) or as soon as any is ready.
    pub ordered: bool,
    /// Camera frames at native size or resized; in JSON `null` or `[height, width]`.
    #[serde(with = "resolution_as_size")]
    pub resolution: Resolution,
    /// How camera frames reach the model; in JSON `"uint8": true` for uint8.
    #[serde(rename = "uint8", with = "images_as_uint8")]
    pub images: ImageFormat,
}

impl Default for LoaderConfig {
    /// LeRobot's training defaults: 4 workers, batch 8, prefetch 2, episode-aware shuffling.
    fn default() -> Self {
        Self {
            workers: 4,
            prefetch: 2,
            batch_size: 8,
            drop_last: false,
            sampler: SamplerKind::EpisodeAware,
            seed: 0,
            shard: Shard::default(),
            ordered: true,
            resolution: Resolution::Native,
            images: ImageFormat::F32,
        }
    }
}

impl LoaderConfig {
    /// The most batches alive at once: `prefetch` per worker (one for `workers = 0`) and the
    /// one the consumer holds. The batch pool never grows past it.
    pub fn batches_in_flight(&self) -> usize {
        self.workers.max(1) * self.prefetch.max(1) + 1
    }
}

/// A [`Resolution`] as results files have always stored it: `null` or `[height, width]`.
mod resolution_as_size {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::dataset::Resolution;

    pub fn serialize<S: Serializer>(value: &Resolution, serializer: S) -> Result<S::Ok, S::Error> {
        value.size().serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Resolution, D::Error> {
        Ok(match Option::<(u32, u32)>::deserialize(deserializer)? {
            Some((height, width)) => Resolution::Size { height, width },
            None => Resolution::Native,
        })
    }
}

/// An [`ImageFormat`] as results files have always stored it: `"uint8": true` for uint8.
mod images_as_uint8 {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::loader::batch::ImageFormat;

    pub fn serialize<S: Serializer>(value: &ImageFormat, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bool(*value == ImageFormat::U8)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<ImageFormat, D::Error> {
        Ok(if bool::deserialize(deserializer)? { ImageFormat::U8 } else { ImageFormat::F32 })
    }
}
