//! The loader's knobs, named and meant as in `torch.utils.data.DataLoader`.

use serde::{Deserialize, Serialize};

use super::batch::ImageFormat;
use super::sampler::{SamplerKind, Shard};
use crate::dataset::remote::Fetch;
use crate::dataset::video::DecodeOptions;
use crate::dataset::{Contract, Resolution, Window};

/// The loader's knobs, named and meant as in `torch.utils.data.DataLoader`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LoaderConfig {
    /// Worker threads; 0 loads in the consuming thread.
    pub workers: usize,
    /// Batches in flight per worker (`prefetch_factor`).
    pub prefetch: usize,
    /// Samples per batch.
    pub batch_size: usize,
    /// Drop the last incomplete batch. Left out of JSON when false, as the knob table leaves
    /// it out of configs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub drop_last: bool,
    /// The order of indices.
    pub sampler: SamplerKind,
    /// Seed of the shuffled orders.
    pub seed: u64,
    /// This process's share of the data.
    pub shard: Shard,
    /// Deliver batches in sampler order (true) or as soon as any is ready. Left out of JSON
    /// when true, as the knob table leaves `unordered` out of configs.
    #[serde(default = "ordered", skip_serializing_if = "is_ordered")]
    pub ordered: bool,
    /// Camera frames at native size or resized; in JSON `null` or `[height, width]`.
    #[serde(with = "resolution_as_size")]
    pub resolution: Resolution,
    /// How camera frames reach the model; in JSON `"uint8": true` for uint8.
    #[serde(rename = "uint8", with = "images_as_uint8")]
    pub images: ImageFormat,
    /// Threads inside each worker's video decoder (libdav1d's, libavcodec's own threading);
    /// 1 decodes on the worker's thread alone. Left out of JSON at 1, as before the knob.
    #[serde(default = "one_decoder_thread", skip_serializing_if = "is_one_decoder_thread")]
    pub decoder_threads: usize,
    /// Bytes of decoded frames kept for later epochs, shared by the workers ([`crate::dataset::video::cache`]);
    /// 0 keeps none. Left out of JSON at 0, as before the knob.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_bytes: u64,
    /// Frames at the end of each episode that the episode-aware sampler never starts a sample
    /// at (LeRobot's `drop_n_last_frames`); None: the window's own. Left out of JSON when None,
    /// as before the knob.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_n_last_frames: Option<usize>,
    /// `pin_memory=True` in LeRobot's `DataLoader`. Left out of JSON when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pin_memory: bool,
    /// `persistent_workers` in LeRobot's `DataLoader` (lerobot-train keeps its workers). Left
    /// out of JSON when true.
    #[serde(default = "persistent", skip_serializing_if = "is_persistent")]
    pub persistent_workers: bool,
    /// Range requests each worker keeps in flight reading a remote root. Left out of JSON at
    /// its default.
    #[serde(default = "default_requests", skip_serializing_if = "is_default_requests")]
    pub requests_in_flight: usize,
    /// Ranges of a remote file at most this many bytes apart are one request. Left out of
    /// JSON at its default.
    #[serde(default = "default_coalesce", skip_serializing_if = "is_default_coalesce")]
    pub coalesce_bytes: u64,
    /// How LeRobot's `DataLoader` starts its worker processes (`multiprocessing_context`).
    /// Left out of JSON at `fork`, PyTorch's default on Linux.
    #[serde(default, skip_serializing_if = "StartMethod::is_fork")]
    pub start_method: StartMethod,
}

/// How a `DataLoader` starts its worker processes, as Python's `multiprocessing` names it:
/// `fork` copies the parent (nothing is pickled), `spawn` and `forkserver` start a fresh
/// interpreter that is sent the pickled dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StartMethod {
    /// `fork` (PyTorch's default on Linux).
    #[default]
    Fork,
    /// `spawn` (a fresh interpreter; lerobot-train's on macOS and where CUDA is initialised).
    Spawn,
    /// `forkserver` (workers forked from a server process started fresh).
    Forkserver,
}

named_values!(StartMethod {
    Fork => "fork",
    Spawn => "spawn",
    Forkserver => "forkserver",
});

impl StartMethod {
    fn is_fork(&self) -> bool {
        *self == StartMethod::Fork
    }
}

fn default_requests() -> usize {
    Fetch::default().in_flight
}

fn is_default_requests(requests: &usize) -> bool {
    *requests == default_requests()
}

fn default_coalesce() -> u64 {
    Fetch::default().gap
}

fn is_default_coalesce(bytes: &u64) -> bool {
    *bytes == default_coalesce()
}

fn persistent() -> bool {
    true
}

fn ordered() -> bool {
    true
}

fn is_ordered(ordered: &bool) -> bool {
    *ordered
}

fn is_persistent(persistent: &bool) -> bool {
    *persistent
}

fn is_zero(bytes: &u64) -> bool {
    *bytes == 0
}

fn one_decoder_thread() -> usize {
    LoaderConfig::default().decoder_threads
}

fn is_one_decoder_thread(threads: &usize) -> bool {
    *threads == one_decoder_thread()
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
            decoder_threads: 1,
            cache_bytes: 0,
            drop_n_last_frames: None,
            pin_memory: false,
            persistent_workers: true,
            requests_in_flight: default_requests(),
            coalesce_bytes: default_coalesce(),
            start_method: StartMethod::Fork,
        }
    }
}

impl LoaderConfig {
    /// Threads that decode at once: each worker's decoder threads (the consumer's without
    /// workers).
    pub fn decoding_threads(&self) -> usize {
        self.workers.max(1) * self.decoder_threads.max(1)
    }

    /// How each worker's video decoder reads a dataset whose timestamps match within
    /// `tolerance_s` as `contract` takes it: at the loader's resolution, with its decoder
    /// threads.
    pub fn decode_options(&self, tolerance_s: f64, contract: Contract) -> DecodeOptions {
        DecodeOptions {
            tolerance_s,
            contract,
            resolution: self.resolution.size(),
            threads: self.decoder_threads,
            fetch: Fetch { in_flight: self.requests_in_flight, gap: self.coalesce_bytes },
            ..DecodeOptions::default()
        }
    }

    /// The frames the episode-aware sampler drops at the end of each episode: the knob's, else
    /// `window`'s own.
    pub fn drop_n_last_frames(&self, window: &Window) -> usize {
        self.drop_n_last_frames.unwrap_or(window.drop_n_last_frames)
    }

    /// The most batches alive at once: `prefetch` per worker (one for `workers = 0`) and the
    /// one the consumer holds. The batch pool never grows past it.
    pub fn batches_in_flight(&self) -> usize {
        self.workers.max(1) * self.prefetch.max(1) + 1
    }

    /// The fewest batches a measurement of this loader takes (twice those in flight): fewer,
    /// and it measures the batches its warm-up left ready, which every worker hands over at
    /// once, rather than the loader's rate.
    pub fn least_measured_batches(&self) -> usize {
        2 * self.batches_in_flight()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::knobs::LoaderKnob;

    /// Each knob's key in LoaderConfig's JSON (results, rank files, `--json`).
    const JSON_KEYS: [(&str, &str); 17] = [
        ("workers", "workers"),
        ("prefetch", "prefetch"),
        ("batch", "batch_size"),
        ("resolution", "resolution"),
        ("images", "uint8"),
        ("decoder_threads", "decoder_threads"),
        ("cache", "cache_bytes"),
        ("requests_in_flight", "requests_in_flight"),
        ("coalesce", "coalesce_bytes"),
        ("sampler", "sampler"),
        ("seed", "seed"),
        ("drop_last", "drop_last"),
        ("drop_n_last_frames", "drop_n_last_frames"),
        ("unordered", "ordered"),
        ("pin_memory", "pin_memory"),
        ("persistent_workers", "persistent_workers"),
        ("start_method", "start_method"),
    ];

    #[test]
    fn json_leaves_out_at_their_default_the_knobs_the_table_leaves_out_of_configs() {
        let keys: Vec<&str> = LoaderKnob::ALL.iter().map(|k| k.key).collect();
        assert_eq!(keys, JSON_KEYS.map(|(knob, _)| knob), "every knob, in the table's order");
        let json = serde_json::to_value(LoaderConfig::default()).unwrap();
        for (knob, (_, key)) in LoaderKnob::ALL.iter().zip(JSON_KEYS) {
            assert_eq!(
                json.get(key).is_none(),
                knob.omit_at_default,
                "`{key}` of {json}: the table's omission rule for `{}`",
                knob.key
            );
        }
        // What was kept with every key reads back the same.
        let mut whole = json.as_object().unwrap().clone();
        whole.insert("drop_last".into(), false.into());
        whole.insert("ordered".into(), true.into());
        let read: LoaderConfig = serde_json::from_value(whole.into()).unwrap();
        assert_eq!(read, LoaderConfig::default());
    }
}
