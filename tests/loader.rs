//! The loader pipeline on generated datasets: coverage per epoch, order, sharding, collation,
//! errors and shutdown.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use crate::common;

use feedbench::dataset::video::VideoCodec;
use feedbench::dataset::video::{DecodeOptions, VideoDecoder};
use feedbench::dataset::write::preset::CameraPreset;
use feedbench::dataset::write::{synth, write_tabular, Preset, SynthOptions, TabularSpec};
use feedbench::dataset::{
    CodebaseVersion, Dataset, DatasetOptions, Resolution, Window, WindowSpec,
};
use feedbench::loader::batch::{Batch, BatchData, ImageFormat};
use feedbench::loader::config::LoaderConfig;
use feedbench::loader::pipeline::{LoadedBatch, Loader, LoaderError};
use feedbench::loader::sampler::{SamplerKind, Shard};
use feedbench::measure::phase::{run_loader_phase, run_train_phase, BatchMeasured, StepSample};
use feedbench::model::{DeviceChoice, ModelSpec, PolicyShapes, StepChoice};
use feedbench::timing::{stage, EndsWhen, NoOne, Progress};

fn dataset(version: CodebaseVersion, lengths: &[usize]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let spec = TabularSpec {
        version,
        episode_lengths: lengths.to_vec(),
        episodes_per_file: 3,
        row_group_rows: 16,
        ..Default::default()
    };
    write_tabular(&root, &spec).unwrap();
    (dir, root)
}

fn indices_of(batch: &Batch) -> Vec<usize> {
    let BatchData::I64(index) = &batch.tensors["index"].data else { panic!("index is int64") };
    index.iter().map(|&i| i as usize).collect()
}

/// The batch of `indices` made from samples fetched and decoded one at a time.
fn one_by_one(
    dataset: &Dataset,
    window: &Window,
    indices: &[usize],
    decoder: &mut VideoDecoder,
    uint8: bool,
) -> Batch {
    let samples: Vec<_> = indices
        .iter()
        .map(|&i| {
            let mut sample = dataset.sample(i, window).unwrap();
            sample.decode_pixels(decoder, uint8).unwrap();
            sample
        })
        .collect();
    Batch::collate(&samples).unwrap()
}

fn loader(root: &std::path::Path, config: LoaderConfig) -> Loader {
    let dataset = Dataset::open(root).unwrap();
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    Loader::new(Arc::new(dataset), window, config).unwrap()
}

#[test]
fn every_valid_index_once_per_epoch_for_each_sampler_and_worker_count() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[20, 9, 31, 12, 17]);
    let all: Vec<usize> = (0..89).collect();
    // Episode-aware: the last 7 frames of each episode are never sampled.
    let episode_aware: Vec<usize> =
        [(0, 13), (20, 22), (29, 53), (60, 65), (72, 82)].iter().flat_map(|&(a, b)| a..b).collect();
    for sampler in [SamplerKind::Sequential, SamplerKind::Shuffled, SamplerKind::EpisodeAware] {
        for workers in [0, 1, 3] {
            for ordered in [true, false] {
                let config = LoaderConfig {
                    workers,
                    sampler,
                    batch_size: 4,
                    ordered,
                    seed: 5,
                    ..Default::default()
                };
                let loader = loader(&root, config);
                for epoch in 0..2 {
                    let plan = loader.plan(epoch);
                    let batches: Vec<Batch> =
                        loader.epoch(epoch).map(|b| b.unwrap().into_batch()).collect();
                    let mut seen: Vec<usize> = batches.iter().flat_map(indices_of).collect();
                    if ordered {
                        assert_eq!(
                            batches.iter().map(indices_of).collect::<Vec<_>>(),
                            plan,
                            "sampler order"
                        );
                    }
                    if sampler == SamplerKind::Sequential {
                        assert!(!ordered || seen.windows(2).all(|w| w[0] < w[1]));
                    }
                    seen.sort_unstable();
                    let expected =
                        if sampler == SamplerKind::EpisodeAware { &episode_aware } else { &all };
                    assert_eq!(
                        &seen, expected,
                        "{sampler:?}, {workers} workers, ordered {ordered}, epoch {epoch}"
                    );
                }
                if sampler != SamplerKind::Sequential {
                    assert_ne!(loader.plan(0), loader.plan(1), "reshuffled each epoch");
                }
            }
        }
    }
}

#[test]
fn ranks_get_disjoint_shards_that_cover_the_epoch() {
    let (_dir, root) = dataset(CodebaseVersion::V21, &[20, 9, 31]);
    let world = 3;
    let mut seen = Vec::new();
    for rank in 0..world {
        let config = LoaderConfig {
            workers: 2,
            batch_size: 5,
            shard: Shard::new(rank, world).unwrap(),
            drop_last: true,
            ..Default::default()
        };
        let batches: Vec<Batch> =
            loader(&root, config).epoch(0).map(|b| b.unwrap().into_batch()).collect();
        assert!(batches.iter().all(|b| b.size == 5), "drop_last keeps only full batches");
        seen.extend(batches.iter().flat_map(indices_of));
    }
    let len = seen.len();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), len, "no index on two ranks");
    // 39 episode-aware indices → 39 per epoch, 13 per rank, 10 in full batches of 5.
    assert_eq!(len, 30);
}

#[test]
fn a_pipeline_batch_equals_the_samples_fetched_one_by_one() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[20, 9, 31]);
    let config = LoaderConfig { workers: 3, prefetch: 2, batch_size: 6, ..Default::default() };
    let loader = loader(&root, config);
    let dataset = Dataset::open(&root).unwrap();
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    for batch in loader.epoch(0) {
        let batch = batch.unwrap();
        let samples: Vec<_> =
            indices_of(&batch).iter().map(|&i| dataset.sample(i, &window).unwrap()).collect();
        assert_eq!(*batch, Batch::collate(&samples).unwrap());
        assert_eq!(batch.tensors["action"].shape, [batch.size, 16, 2]);
        assert_eq!(batch.tensors["observation.state"].shape, [batch.size, 2, 3]);
        assert_eq!(batch.tensors["action_is_pad"].shape, [batch.size, 16]);
        let BatchData::F32(state) = &batch.tensors["observation.state"].data else { panic!() };
        let BatchData::F32(first) =
            &Batch::collate(&samples[..1]).unwrap().tensors["observation.state"].data
        else {
            panic!()
        };
        assert_eq!(&state[..6], &first[..], "sample 0 first, contiguous");
    }
}

#[test]
fn an_error_in_one_sample_surfaces_naming_file_and_index() {
    // Episodes of equal length, so a swapped file opens but holds the wrong indices.
    let (_dir, root) = dataset(CodebaseVersion::V21, &[10, 10, 10, 10]);
    let data = root.join("data/chunk-000");
    std::fs::copy(data.join("episode_000001.parquet"), data.join("episode_000002.parquet"))
        .unwrap();
    for workers in [0, 2] {
        let config = LoaderConfig {
            workers,
            sampler: SamplerKind::Sequential,
            batch_size: 4,
            ..Default::default()
        };
        let results: Vec<_> = loader(&root, config).epoch(0).collect();
        let error =
            results.iter().find_map(|r| r.as_ref().err()).expect("the broken episode fails");
        let LoaderError::Sample { index, .. } = error else { panic!("{error:?}") };
        assert_eq!(*index, 20, "the first index of episode 2");
        let text = error.to_string();
        assert!(
            text.contains("sample index 20") && text.contains("episode_000002.parquet"),
            "{text}"
        );
        assert!(results.last().unwrap().is_err(), "the epoch ends at the error");
        assert!(results.iter().take(5).all(Result::is_ok), "batches before it arrive");
    }
}

#[test]
fn dropping_an_epoch_or_a_stream_early_returns() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[200, 200, 200]);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let config = LoaderConfig { workers: 3, prefetch: 2, batch_size: 2, ..Default::default() };
        let loader = loader(&root, config);
        let mut epoch = loader.epoch(0);
        assert!(epoch.per_epoch() > 100);
        epoch.next().unwrap().unwrap();
        drop(epoch);
        // An endless stream too, with its workers blocked on full queues.
        let mut stream = loader.epochs(0);
        stream.next().unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        drop(stream);
        done.send(()).unwrap();
    });
    finished.recv_timeout(Duration::from_secs(60)).expect("dropping the epoch must not hang");
}

#[test]
fn epoch_after_epoch_the_same_workers_deliver_each_epoch_in_turn() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[20, 9, 31, 12, 17]);
    for workers in [0, 1, 3] {
        for ordered in [true, false] {
            let config =
                LoaderConfig { workers, ordered, batch_size: 4, seed: 5, ..Default::default() };
            let loader = loader(&root, config);
            let per_epoch = loader.plan(0).len();
            let mut stream = loader.epochs(2);
            assert_eq!(stream.per_epoch(), per_epoch);
            // Three epochs and part of a fourth, then the stream is dropped mid-epoch.
            let batches: Vec<Vec<usize>> =
                stream.by_ref().take(3 * per_epoch + 2).map(|b| indices_of(&b.unwrap())).collect();
            let expected: Vec<Vec<usize>> = (2..6).flat_map(|e| loader.plan(e)).collect();
            if ordered {
                assert_eq!(batches, expected[..batches.len()], "{workers} workers: sampler order");
            } else {
                // Workers take the plan's batches in turn and at most `workers × prefetch` taken
                // ones are being built or queued: whatever was delivered lies within the plan's
                // first `delivered + workers × prefetch` batches, across epoch boundaries too.
                let in_flight = workers * loader.config().prefetch;
                let taken = &expected[..batches.len() + in_flight];
                let mut left: HashMap<&[usize], usize> = HashMap::new();
                for batch in taken {
                    *left.entry(batch).or_default() += 1;
                }
                for batch in &batches {
                    let count = left.get_mut(&batch[..]).filter(|c| **c > 0);
                    *count.expect("a batch delivered twice, or one not yet taken") -= 1;
                }
            }
            let timing = stream.timing();
            // One order per epoch, made once: by the consumer for the first, then by the thread
            // that first needed it (whose batch may not be delivered yet).
            let orders = timing.get(stage::SAMPLER).unwrap().calls;
            assert!(orders <= 4 && (workers > 0 || orders == 4), "{workers} workers: {orders}");
            assert_eq!(timing.get(stage::BATCH).unwrap().calls, batches.len() as u64);
        }
    }
}

#[test]
fn bad_configurations_are_refused() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[10]);
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let window = dataset.window(&WindowSpec::Single).unwrap();
    let zero_batch = LoaderConfig { batch_size: 0, ..Default::default() };
    assert!(Loader::new(dataset.clone(), window.clone(), zero_batch).is_err());
    let zero_prefetch = LoaderConfig { workers: 2, prefetch: 0, ..Default::default() };
    assert!(Loader::new(dataset, window, zero_prefetch).is_err());
}

#[test]
fn an_epoch_reports_the_time_of_its_stages() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[20, 9, 31]);
    for workers in [0, 2] {
        let config = LoaderConfig { workers, batch_size: 4, ..Default::default() };
        let loader = loader(&root, config);
        let mut epoch = loader.epoch(0);
        let batches = epoch.per_epoch();
        let samples: usize = epoch.by_ref().map(|b| b.unwrap().size).sum();
        let timing = epoch.timing();
        assert_eq!(timing.get(stage::BATCH).unwrap().calls, batches as u64);
        assert_eq!(timing.get(stage::PARQUET).unwrap().calls, samples as u64);
        assert_eq!(timing.get(stage::COLLATE).unwrap().calls, samples as u64);
        assert_eq!(timing.get(stage::SAMPLER).unwrap().calls, 1);
        // Only the consumer of worker queues waits; in-thread loading has no queue.
        assert_eq!(
            timing.get(stage::WAIT).map(|w| w.calls),
            (workers > 0).then_some(batches as u64)
        );
        let batch = timing.get(stage::BATCH).unwrap();
        assert!(
            batch.wall >= timing.get(stage::PARQUET).unwrap().wall,
            "a stage contains its children"
        );
    }
}

#[test]
fn camera_frames_are_decoded_into_the_batch_as_one_by_one() {
    let Some(root) = common::g1_partial() else { return };
    let options = DatasetOptions { episodes: Some(vec![1, 2]), ..Default::default() };
    let dataset = Arc::new(Dataset::open_with(&root, &options).unwrap());
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    let camera = "observation.images.cam_high";
    for (resolution, uint8, decoder_threads) in
        [(None, false, 1), (Some((96, 128)), true, 1), (None, false, 2)]
    {
        // One worker, prefetch 1: two batches in flight, so batches 3 to 5 refill the pool's.
        // With decoder threads, libdav1d's own threads decode the worker's frames.
        let config = LoaderConfig {
            workers: 1,
            prefetch: 1,
            batch_size: 3,
            decoder_threads,
            resolution: match resolution {
                Some((height, width)) => Resolution::Size { height, width },
                None => Resolution::Native,
            },
            images: if uint8 { ImageFormat::U8 } else { ImageFormat::F32 },
            ..Default::default()
        };
        let loader = Loader::new(dataset.clone(), window.clone(), config).unwrap();
        let mut decoder = VideoDecoder::new(DecodeOptions { resolution, ..Default::default() });
        let mut epoch = loader.epoch(0);
        for batch in epoch.by_ref().take(5) {
            let batch = batch.unwrap();
            let (height, width) = resolution.unwrap_or((480, 640));
            assert_eq!(batch.tensors[camera].shape, [3, 2, 3, height as usize, width as usize]);
            assert_eq!(batch.tensors[&format!("{camera}_is_pad")].shape, [3, 2]);
            let one_by_one =
                one_by_one(&dataset, &window, &indices_of(&batch), &mut decoder, uint8);
            assert_eq!(*batch, one_by_one);
            match &batch.tensors[camera].data {
                BatchData::U8(v) => assert!(uint8 && v.iter().any(|&p| p > 0)),
                BatchData::F32(v) => assert!(!uint8 && v.iter().all(|p| (0.0..=1.0).contains(p))),
                other => panic!("{other:?}"),
            }
        }
        let timing = epoch.timing();
        assert_eq!(timing.get(stage::VIDEO).unwrap().calls, 15, "one call per sample");
        let (decoded, converted) = (timing.get(stage::DECODE), timing.get(stage::CONVERT));
        let converted = converted.unwrap().calls;
        assert!(
            (16..=30).contains(&converted),
            "two frames per sample, repeats copied: {converted}"
        );
        assert!(decoded.unwrap().calls >= converted, "a frame is decoded before it is converted");
    }
}

#[test]
fn a_batch_decodes_its_samples_in_time_order_whatever_the_sampler_order() {
    // One episode of 48 frames in two GOPs of 24; one shuffled batch of every frame.
    let mut preset = Preset::load("pusht").unwrap();
    (preset.episodes, preset.frames_per_episode, preset.frames_jitter) = (1, 48, 0);
    (preset.codec, preset.gop) = (VideoCodec::H264, 24);
    preset.cameras = vec![CameraPreset { key: "observation.image".into(), height: 64, width: 80 }];
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    synth(&root, &preset, &SynthOptions::default()).unwrap();
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let window = dataset.window(&WindowSpec::Single).unwrap();
    let config = LoaderConfig {
        workers: 0,
        batch_size: 48,
        sampler: SamplerKind::Shuffled,
        seed: 3,
        ..Default::default()
    };
    let loader = Loader::new(dataset.clone(), window.clone(), config).unwrap();
    let plan = loader.plan(0);
    assert_ne!(plan[0], (0..48).collect::<Vec<_>>(), "the sampler's order is shuffled");
    let mut epoch = loader.epoch(0);
    let batch = epoch.next().unwrap().unwrap();
    assert_eq!(indices_of(&batch), plan[0], "samples in their slots, in sampler order");
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    assert_eq!(*batch, one_by_one(&dataset, &window, &plan[0], &mut decoder, false));
    // Forward through each GOP once; in the shuffled order about 12 frames per sample.
    let decoded = epoch.timing().get(stage::DECODE).unwrap().calls;
    assert!(decoded <= 50, "{decoded} frames decoded for 48 samples");
}

#[test]
fn batches_reuse_pooled_buffers_and_stay_within_the_batches_in_flight() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[40, 29, 31, 52]);
    for (workers, prefetch, ordered) in [(0, 2, true), (1, 1, true), (2, 2, true), (3, 2, false)] {
        let config = LoaderConfig {
            workers,
            prefetch,
            ordered,
            batch_size: 4,
            sampler: SamplerKind::Sequential,
            ..Default::default()
        };
        let loader = loader(&root, config);
        let mut buffers = std::collections::HashSet::new();
        let mut keep = |batch: Result<LoadedBatch, LoaderError>| {
            let batch = batch.unwrap();
            let BatchData::F32(action) = &batch.tensors["action"].data else { panic!() };
            buffers.insert(action.as_ptr() as usize);
            // Dropped here: its buffers go back to the loader.
        };
        for epoch in 0..2 {
            loader.epoch(epoch).for_each(&mut keep);
        }
        loader.epochs(2).take(2 * loader.plan(0).len()).for_each(&mut keep);
        // 152 batches over four epochs (two apart, two in one stream), but only as many
        // buffers as batches ever in flight.
        let in_flight = loader.config().batches_in_flight();
        assert!(
            buffers.len() <= in_flight,
            "{workers} workers, prefetch {prefetch}: {} buffers for {in_flight} batches in flight",
            buffers.len()
        );
    }
}

#[test]
fn a_batch_kept_out_of_the_pool_is_not_overwritten() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[40, 29]);
    let config = LoaderConfig { workers: 1, prefetch: 1, batch_size: 4, ..Default::default() };
    let loader = loader(&root, config);
    let mut epoch = loader.epoch(0);
    let kept = epoch.next().unwrap().unwrap().into_batch();
    let copy = kept.clone();
    for batch in epoch {
        assert_ne!(indices_of(&batch.unwrap()), indices_of(&copy));
    }
    assert_eq!(kept, copy);
}

#[test]
fn a_phase_hears_each_measured_batch_or_step_and_ends_where_its_watcher_breaks() {
    let (_dir, root) = dataset(CodebaseVersion::V30, &[40, 40]);
    let config = LoaderConfig { workers: 1, batch_size: 4, ..LoaderConfig::default() };
    let loader = loader(&root, config);
    // The loader alone: each batch heard with its time and itself; the fifth ends the phase.
    let mut heard = Vec::new();
    let mut watch = |measured: BatchMeasured<'_>| {
        let batch = measured.batch.expect("the native pipeline's batches are in this process");
        heard.push((measured.batch_ms.len(), batch.size));
        match measured.batch_ms.len() {
            5 => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    };
    let phase = run_loader_phase(&loader, 30, 2, &mut watch).unwrap();
    assert_eq!(phase.batches, 5, "ended where the watcher broke");
    assert_eq!(heard, (1..=5).map(|n| (n, 4)).collect::<Vec<_>>());
    // Watched for progress only, every batch asked for is measured.
    let mut batches = 0;
    let phase =
        run_loader_phase(&loader, 12, 2, &mut Progress(|_: BatchMeasured<'_>| batches += 1));
    assert_eq!((phase.unwrap().batches, batches), (12, 12));
    // Feeding a step: the steps so far heard after each; the third ends the phase.
    let spec: ModelSpec = "synthetic:1ms".parse().unwrap();
    let mut step = StepChoice { device: DeviceChoice::Cpu, ..StepChoice::of(spec).unwrap() }
        .build(Ok(&PolicyShapes::pusht()))
        .unwrap();
    let mut lengths = Vec::new();
    let mut watch = EndsWhen(|steps: &[StepSample]| {
        lengths.push(steps.len());
        steps.len() == 3
    });
    let phase = run_train_phase(&loader, step.as_mut(), 20, 1, None, &mut watch).unwrap();
    assert_eq!(lengths, [1, 2, 3]);
    assert_eq!(phase.steps, 3, "ended where the watcher broke");
    let phase = run_train_phase(&loader, step.as_mut(), 6, 1, None, &mut NoOne).unwrap();
    assert_eq!(phase.steps, 6, "unwatched, every step");
}
