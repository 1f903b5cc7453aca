//! The decoded-frame cache (`--cache`) on a generated AV1 dataset, decoded by FFmpeg: the
//! batches of every epoch equal those of a loader without a cache, value for value, whether
//! the budget holds every frame or evicts; the later epochs copy what it holds; the budget is
//! never exceeded; and a cache it cannot have is refused, naming the flag.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use feedbench::dataset::{Dataset, WindowSpec};
use feedbench::loader::batch::{Batch, BatchData, ImageFormat};
use feedbench::loader::config::LoaderConfig;
use feedbench::loader::pipeline::Loader;
use feedbench::loader::sampler::SamplerKind;
use feedbench::timing::{stage, TimingTree};

/// A PushT-shaped dataset (96×96 AV1) of 2 episodes of 40 frames under `dir`.
fn dataset(dir: &Path) -> PathBuf {
    let root = dir.join("pusht");
    common::synth_pusht(&root, 2, 40, &[]);
    root
}

/// A loader of `root` with diffusion windows, 2 workers, batches of 8 in sampler order
/// (shuffled, the same every run), frames as `images`, with a cache of `cache_bytes`.
fn loader(root: &Path, images: ImageFormat, cache_bytes: u64) -> Loader {
    let dataset = Arc::new(Dataset::open(root).unwrap());
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    let config = LoaderConfig {
        workers: 2,
        batch_size: 8,
        sampler: SamplerKind::Shuffled,
        images,
        cache_bytes,
        ..LoaderConfig::default()
    };
    Loader::new(dataset, window, config).unwrap()
}

/// Every batch of epochs 0 to `epochs - 1`, and the stages of each epoch.
fn run(loader: &Loader, epochs: u64) -> (Vec<Batch>, Vec<TimingTree>) {
    let (mut batches, mut timings) = (Vec::new(), Vec::new());
    for epoch in 0..epochs {
        let mut stream = loader.epoch(epoch);
        for batch in stream.by_ref() {
            batches.push(batch.unwrap().into_batch());
        }
        timings.push(stream.take_timing());
    }
    (batches, timings)
}

/// The camera's values of every batch, as bytes to compare exactly.
fn pixels(batches: &[Batch]) -> Vec<Vec<u8>> {
    let key = "observation.image";
    batches
        .iter()
        .map(|b| match &b.tensors[key].data {
            BatchData::F32(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
            BatchData::U8(v) => v.clone(),
            _ => panic!("{key} is an image"),
        })
        .collect()
}

fn calls(timing: &TimingTree, path: &str) -> u64 {
    timing.get(path).map_or(0, |t| t.calls)
}

#[test]
fn cached_epochs_equal_decoded_ones_and_copy_what_the_cache_holds() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    for images in [ImageFormat::F32, ImageFormat::U8] {
        let (plain, _) = run(&loader(&root, images, 0), 3);
        let cached = loader(&root, images, 1 << 30);
        let (batches, timings) = run(&cached, 3);
        assert_eq!(pixels(&batches), pixels(&plain), "{images:?}: every value as decoded");
        // Epoch 0 decodes every frame; the later ones copy them all.
        assert_eq!(calls(&timings[1], stage::CONVERT), 0, "{images:?}: epoch 1 decoded");
        assert_eq!(calls(&timings[2], stage::CONVERT), 0, "{images:?}: epoch 2 decoded");
        // Every frame of the later epochs is copied (a frame a window holds twice, at an
        // episode's start, is converted once in epoch 0 and copied twice later).
        let copied = calls(&timings[1], stage::CACHE);
        assert_eq!(copied, calls(&timings[2], stage::CACHE), "{images:?}");
        let first = calls(&timings[0], stage::CACHE) + calls(&timings[0], stage::CONVERT);
        assert!(first > 0 && first <= copied, "{images:?}: {first} then {copied}");
        // Each frame converted in epoch 0 is kept (a frame a window holds twice, twice), and
        // that is timed; nothing is kept later.
        let (kept, converted) =
            (calls(&timings[0], stage::CACHE_FILL), calls(&timings[0], stage::CONVERT));
        assert!(
            kept >= converted && kept <= first,
            "{images:?}: {kept} kept, {converted} converted"
        );
        assert_eq!(calls(&timings[1], stage::CACHE_FILL), 0, "{images:?}");
        let cache = cached.cache().expect("a budget: a cache");
        assert!(cache.frames() > 0 && cache.held_bytes() <= cache.budget_bytes());
    }
}

#[test]
fn a_budget_below_the_dataset_evicts_and_stays_exact() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let (plain, _) = run(&loader(&root, ImageFormat::F32, 0), 3);
    // 80 frames of 3×96×96 float32 (110 592 bytes each): a budget of about 20 of them.
    let budget = 20 * (3 * 96 * 96 * 4 + 64);
    let cached = loader(&root, ImageFormat::F32, budget);
    let (batches, timings) = run(&cached, 3);
    assert_eq!(pixels(&batches), pixels(&plain), "evicted frames are decoded again, exactly");
    let cache = cached.cache().unwrap();
    assert!(cache.held_bytes() <= budget, "{} held of {budget}", cache.held_bytes());
    assert!(cache.frames() <= 20, "{} frames held", cache.frames());
    // Later epochs decode what was evicted and copy what was kept.
    let later = &timings[2];
    assert!(calls(later, stage::CONVERT) > 0, "frames were evicted");
    assert!(calls(later, stage::CACHE) > 0, "frames were kept");
}

#[test]
fn a_cache_that_cannot_be_had_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    let root = root.to_str().unwrap();
    let (ok, _, err) = common::feedbench(&["load", root, "--cache", "900TB", "--batches", "1"]);
    common::clear_error(ok, &err);
    assert!(err.contains("does not fit") && err.contains("lower --cache"), "{err}");
    let (ok, _, err) = common::feedbench(&["load", root, "--cache", "lots"]);
    common::clear_error(ok, &err);
    assert!(err.contains("--cache") && err.contains("expected a size"), "{err}");
    let python = common::lerobot_python().unwrap_or_else(|| "python3".into());
    let lerobot = ["--loader", "lerobot", "--python", python.to_str().unwrap()];
    let (ok, _, err) =
        common::feedbench(&[&["load", root, "--cache", "1GB"][..], &lerobot].concat());
    common::clear_error(ok, &err);
    assert!(err.contains("--cache is the native loader's"), "{err}");
}

#[test]
fn load_reports_the_hit_rate_and_each_epochs_rate() {
    let dir = tempfile::tempdir().unwrap();
    let root = dataset(dir.path());
    // 78 windows in batches of 8: 10 batches an epoch; 2 warm-up, 28 measured (3 epochs).
    let args = ["load", root.to_str().unwrap(), "--cache", "1GB", "--batch", "8"];
    let (ok, out, err) =
        common::feedbench(&[&args[..], &["--batches", "28", "--warmup", "2", "--json"]].concat());
    assert!(ok, "{err}");
    let phase: serde_json::Value = serde_json::from_str(&out).unwrap();
    let cache = &phase["cache"];
    assert!(cache["hit_pct"].as_f64().unwrap() > 60.0, "two of three epochs copied: {cache}");
    assert!(cache["first_epoch_samples_per_s"].as_f64().unwrap() > 0.0, "{cache}");
    assert!(cache["later_epochs_samples_per_s"].as_f64().unwrap() > 0.0, "{cache}");
    assert!(cache["held_bytes"].as_u64().unwrap() <= cache["budget_bytes"].as_u64().unwrap());
    let (ok, text, err) = common::feedbench(&[&args[..], &["--batches", "28"]].concat());
    assert!(ok, "{err}");
    assert!(text.contains("frame cache:") && text.contains("later epochs"), "{text}");
}
