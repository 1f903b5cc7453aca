//! `feedbench compare --readers feedbench,lerobot`: one batch order for every reader. The
//! batches are recorded once — the indices the run's sampler yields with its seed (LeRobot's
//! `EpisodeAwareSampler` where LeRobot is a reader and the sampler is episode-aware, else
//! feedbench's plan) — and every reader reads exactly those batches in that order: first once
//! with each item digested (the readers' items held equal, the first that differs named by its
//! frame index), then measured in interleaved repeats (the readers in order, then in reverse,
//! as the guard runs its cells), each run a fresh loader after its warm-up.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::bench::events::Events;
use crate::dataset::files::{read_whole, write_whole};
use crate::dataset::FeatureKind;
use crate::loader::lerobot::{LerobotBridge, LerobotLoader, LerobotOptions};
use crate::loader::pipeline::LoaderError;
use crate::loader::sampler::SamplerKind;
use crate::loader::spec::LoaderSpec;
use crate::measure::change::{interval, Change};
use crate::measure::fingerprint::DatasetFingerprint;
use crate::measure::phase::{ChosenLoader, LoaderChoice, LoaderPhase, OrderFigures};
use crate::measure::stats::median_of;
use crate::measure::workload::Workload;
use crate::timing::NoOne;

/// Seed of the bootstrap intervals (fixed: the same runs give the same figures).
const SEED: u64 = 0x5eed;

/// A reader of a dataset that `compare --readers` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reader {
    /// feedbench's own loader.
    Feedbench,
    /// LeRobot's `LeRobotDataset` and PyTorch's `DataLoader`.
    Lerobot,
}

named_values!(Reader {
    Feedbench => "feedbench",
    Lerobot => "lerobot",
});

/// What to compare, and how long.
#[derive(Debug, Clone)]
pub struct ReadersSpec {
    /// The readers, the first the reference.
    pub readers: Vec<Reader>,
    /// The dataset and knobs every reader reads with (its `replay` is set here).
    pub spec: LoaderSpec,
    /// LeRobot's Python and video backend.
    pub lerobot: LerobotOptions,
    /// Runs of each reader.
    pub repeats: usize,
    /// Batches measured per run.
    pub batches: usize,
    /// Batches per run before measuring.
    pub warmup: usize,
    /// A file of the order: read where it exists (refused where it was recorded for other
    /// work), else written once the comparison is made.
    pub order_file: Option<PathBuf>,
}

/// A recorded order as kept in a file, with the work that defines it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrderFile {
    /// What decides the order: the dataset's content, its episodes and window, the sampler,
    /// its seed, the batch size, `drop_last` and the rank's shard.
    pub workload: Workload,
    /// The order.
    pub order: RecordedOrder,
}

/// The batches every reader read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedOrder {
    /// Whose sampler yielded them, and how.
    pub recorded_by: String,
    /// Global frame indices, batch by batch, warm-up first.
    pub batches: Vec<Vec<usize>>,
}

/// Where a reader's items first differ from the reference reader's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemDifference {
    /// The reader whose item differs.
    pub reader: String,
    /// The batch (0: the order's first).
    pub batch: usize,
    /// The item's frame index.
    pub index: usize,
}

/// One reader's figures over its runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReaderFigures {
    /// The reader.
    pub reader: String,
    /// Samples/s per run.
    pub samples_per_s: Vec<f64>,
    /// CPU ms per sample per run (the loader's, workers included).
    pub cpu_ms_per_sample: Vec<f64>,
    /// Seconds to the first batch per run.
    pub first_batch_s: Vec<f64>,
    /// Peak memory per run, bytes, where measured.
    pub peak_memory_bytes: Vec<u64>,
    /// Median samples/s and its 95 % interval.
    pub samples_per_s_median: Summary,
    /// Median CPU ms per sample and its 95 % interval.
    pub cpu_ms_per_sample_median: Summary,
    /// Samples/s against the reference reader's (None for the reference).
    pub samples_per_s_change: Option<Change>,
    /// The episodes its first run's measured batches mixed, and whether they came in the order
    /// its batch sampler yielded (the recorded order): alike for every reader of one order.
    pub order: Option<OrderFigures>,
}

/// A median with its bootstrap 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The median.
    pub median: f64,
    /// The interval's low end.
    pub low: f64,
    /// Its high end.
    pub high: f64,
}

impl Summary {
    fn of(values: &[f64]) -> Self {
        let (low, high) = interval(values, SEED, median_of).unwrap_or((f64::NAN, f64::NAN));
        Self { median: median_of(values), low, high }
    }
}

/// What `compare --readers` found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadersComparison {
    /// The order every reader read.
    pub order: RecordedOrder,
    /// Batches whose items were digested and held equal across the readers.
    pub batches_checked: usize,
    /// Where a reader's items first differ from the reference's; None where all are equal.
    pub first_difference: Option<ItemDifference>,
    /// Each reader's figures, the reference first.
    pub readers: Vec<ReaderFigures>,
}

/// Why readers could not be compared.
#[derive(Debug, thiserror::Error)]
pub enum ReadersError {
    /// The request cannot be met.
    #[error("{0}")]
    Request(String),
    /// A reader failed.
    #[error("{reader}: {error}")]
    Reader {
        /// Which.
        reader: Reader,
        /// Why.
        error: LoaderError,
    },
}

/// Records one order, checks every reader's items on it, then measures the readers on it.
pub fn compare_readers(
    spec: &ReadersSpec,
    bridge: &LerobotBridge,
    events: &mut dyn Events,
) -> Result<ReadersComparison, ReadersError> {
    if spec.readers.len() < 2 || spec.repeats < 2 {
        return Err(ReadersError::Request(
            "--readers compares at least two readers, each in at least 2 repeats".into(),
        ));
    }
    let workload = order_workload(&spec.spec)?;
    let kept = spec.order_file.as_deref().filter(|path| path.exists());
    let order = match kept {
        Some(path) => read_order(path, &workload, spec.warmup + spec.batches)?,
        None => record(spec, bridge)?,
    };
    let replayed =
        LoaderSpec { replay: Some(Arc::new(order.batches.clone())), ..spec.spec.clone() };
    let chosen = |reader: Reader| ChosenLoader {
        choice: match reader {
            Reader::Feedbench => LoaderChoice::Native,
            Reader::Lerobot => LoaderChoice::Lerobot(spec.lerobot.clone()),
        },
        spec: replayed.clone(),
    };
    let first_difference = check_items(spec, &replayed, &order, bridge)?;
    let mut runs: Vec<Vec<LoaderPhase>> = vec![Vec::new(); spec.readers.len()];
    for repeat in 0..spec.repeats {
        for i in super::interleaved(spec.readers.len(), repeat) {
            let reader = spec.readers[i];
            events.run_starts(reader.name(), repeat);
            let failed = |error| ReadersError::Reader { reader, error };
            let loader = chosen(reader).build(bridge).map_err(failed)?;
            let phase =
                loader.loader_phase(spec.batches, spec.warmup, &mut NoOne).map_err(failed)?;
            runs[i].push(phase);
        }
    }
    let reference: Vec<f64> = runs[0].iter().map(|p| p.samples_per_s).collect();
    let readers = (spec.readers.iter().zip(&runs).enumerate())
        .map(|(i, (reader, phases))| {
            let samples_per_s: Vec<f64> = phases.iter().map(|p| p.samples_per_s).collect();
            let cpu_ms_per_sample: Vec<f64> = phases.iter().map(|p| p.cpu_ms_per_sample).collect();
            ReaderFigures {
                reader: reader.name().into(),
                samples_per_s_median: Summary::of(&samples_per_s),
                cpu_ms_per_sample_median: Summary::of(&cpu_ms_per_sample),
                samples_per_s_change: (i > 0)
                    .then(|| Change::of(&reference, &samples_per_s, SEED))
                    .flatten(),
                first_batch_s: phases.iter().filter_map(|p| p.first_batch_s).collect(),
                order: phases.first().and_then(|p| p.order.clone()),
                peak_memory_bytes: phases.iter().filter_map(|p| p.peak_rss_bytes).collect(),
                samples_per_s,
                cpu_ms_per_sample,
            }
        })
        .collect();
    if let (Some(path), None) = (&spec.order_file, kept) {
        let file = OrderFile { workload, order: order.clone() };
        let text = serde_json::to_string_pretty(&file).expect("serialises");
        write_whole(path, text.as_bytes())
            .map_err(|e| ReadersError::Request(format!("{}: {e}", path.display())))?;
    }
    Ok(ReadersComparison { batches_checked: order.batches.len(), order, first_difference, readers })
}

/// What decides the order `spec`'s sampler yields: the dataset's content, episodes and window,
/// and the knobs that draw batches (not those that only read them: workers, prefetch, …).
fn order_workload(spec: &LoaderSpec) -> Result<Workload, ReadersError> {
    let dataset =
        DatasetFingerprint::of(&spec.dataset).map_err(|e| ReadersError::Request(e.to_string()))?;
    let c = &spec.config;
    let mut parameters: BTreeMap<String, String> = [
        ("episodes", spec.episodes.as_ref().map_or_else(|| "all".into(), |e| e.to_string())),
        ("window", spec.window.to_string()),
        ("sampler", c.sampler.to_string()),
        ("seed", c.seed.to_string()),
        ("batch", c.batch_size.to_string()),
        ("drop_last", c.drop_last.to_string()),
        ("shard", format!("{} of {}", c.shard.rank, c.shard.world)),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect();
    parameters.extend(dataset.parameters());
    Ok(Workload::of(parameters))
}

/// The order kept at `path`, where it was recorded for `workload` and holds `needed` batches.
fn read_order(
    path: &Path,
    workload: &Workload,
    needed: usize,
) -> Result<RecordedOrder, ReadersError> {
    let refused =
        |what: String| ReadersError::Request(format!("--order {}: {what}", path.display()));
    let text = read_whole(path).map_err(|e| refused(e.to_string()))?;
    let file: OrderFile = serde_json::from_slice(&text)
        .map_err(|e| refused(format!("not an order `compare --readers` wrote ({e})")))?;
    let differences = file.workload.differences(workload);
    if !differences.is_empty() {
        return Err(refused(format!(
            "recorded for other work ({}): its batches are not this run's; remove it to record \
             the order again, or run as it was recorded",
            differences.join(", ")
        )));
    }
    if file.order.batches.len() < needed {
        return Err(refused(format!(
            "holds {} batches; the runs need {needed}: measure fewer batches, or remove it to \
             record more",
            file.order.batches.len()
        )));
    }
    Ok(RecordedOrder { batches: file.order.batches[..needed].to_vec(), ..file.order })
}

/// The order every reader reads: `warmup + batches` batches of the run's batch size, as the
/// run's sampler yields them with its seed — LeRobot's own `EpisodeAwareSampler` where LeRobot
/// is a reader and the sampler is episode-aware, else feedbench's plan, epoch after epoch.
fn record(spec: &ReadersSpec, bridge: &LerobotBridge) -> Result<RecordedOrder, ReadersError> {
    let config = &spec.spec.config;
    let needed = spec.warmup + spec.batches;
    let by_lerobot =
        spec.readers.contains(&Reader::Lerobot) && config.sampler == SamplerKind::EpisodeAware;
    let (batches, recorded_by) = if by_lerobot {
        let failed = |error| ReadersError::Reader { reader: Reader::Lerobot, error };
        let loader =
            LerobotLoader::new(&spec.spec, spec.lerobot.clone(), bridge).map_err(failed)?;
        let indices = loader.episode_aware_indices(true).map_err(failed)?;
        let batches: Vec<Vec<usize>> =
            (indices.chunks_exact(config.batch_size.max(1))).map(<[usize]>::to_vec).collect();
        let by = format!(
            "LeRobot's EpisodeAwareSampler (seed {}, drop_n_last_frames as the window drops)",
            config.seed
        );
        (batches, by)
    } else {
        let failed = |error| ReadersError::Reader { reader: Reader::Feedbench, error };
        let loader = spec.spec.build().map_err(failed)?;
        let mut batches = Vec::new();
        let mut epoch = 0;
        while batches.len() < needed {
            let plan = loader.plan(epoch);
            if plan.is_empty() {
                break;
            }
            batches.extend(plan);
            epoch += 1;
        }
        (batches, format!("feedbench's {} sampler (seed {})", config.sampler, config.seed))
    };
    if batches.len() < needed {
        return Err(ReadersError::Request(format!(
            "{recorded_by} yields {} batches of {}; the runs need {needed} ({} warm-up and {} \
             measured): measure fewer batches or read more episodes",
            batches.len(),
            config.batch_size,
            spec.warmup,
            spec.batches
        )));
    }
    Ok(RecordedOrder { recorded_by, batches: batches.into_iter().take(needed).collect() })
}

/// Every reader's items over the whole order, digested, held against the first reader's:
/// where one first differs (None: every item equal).
fn check_items(
    spec: &ReadersSpec,
    replayed: &LoaderSpec,
    order: &RecordedOrder,
    bridge: &LerobotBridge,
) -> Result<Option<ItemDifference>, ReadersError> {
    let failed = |reader| move |error| ReadersError::Reader { reader, error };
    // The native reader's batches name the keys every reader digests.
    let native = replayed.build().map_err(failed(Reader::Feedbench))?;
    let info = native.dataset().info();
    let cameras: Vec<String> = (info.features.iter())
        .filter(|f| matches!(f.kind, FeatureKind::Video | FeatureKind::Image))
        .map(|f| f.name.clone())
        .collect();
    let mut keys = Vec::new();
    let mut native_digests = Vec::with_capacity(order.batches.len());
    for batch in native.epoch(0).take(order.batches.len()) {
        let batch = batch.map_err(failed(Reader::Feedbench))?.into_batch();
        if keys.is_empty() {
            keys = batch.tensors.keys().cloned().collect();
        }
        native_digests.push(batch.item_digests(&cameras));
    }
    drop(native);
    let mut digests = Vec::with_capacity(spec.readers.len());
    for reader in &spec.readers {
        digests.push(match reader {
            Reader::Feedbench => native_digests.clone(),
            Reader::Lerobot => {
                let loader = LerobotLoader::new(replayed, spec.lerobot.clone(), bridge)
                    .map_err(failed(Reader::Lerobot))?;
                loader
                    .item_digests(&order.batches, &keys, &cameras)
                    .map_err(failed(Reader::Lerobot))?
            }
        });
    }
    for (reader, theirs) in spec.readers.iter().zip(&digests).skip(1) {
        let difference = (digests[0].iter().zip(theirs).enumerate())
            .flat_map(|(b, (ours, theirs))| {
                (0..ours.len().max(theirs.len())).map(move |i| (b, i, ours.get(i), theirs.get(i)))
            })
            .find(|(_, _, ours, theirs)| ours != theirs);
        if let Some((batch, item, _, _)) = difference {
            let index = order.batches[batch].get(item).copied().unwrap_or_default();
            return Ok(Some(ItemDifference { reader: reader.name().into(), batch, index }));
        }
    }
    Ok(None)
}
