//! The loader's hot parts: collation of samples into a reused batch, and whole batches through the pipeline —
//! on a generated tabular dataset (parquet only) and on the real g1-partial video (AV1 640×480
//! decoded at 96×128 uint8 to keep an iteration short).

use std::path::PathBuf;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use feedbench::dataset::video::{DecodeOptions, VideoDecoder};
use feedbench::dataset::write::{write_tabular, TabularSpec};
use feedbench::dataset::Resolution;
use feedbench::dataset::{Dataset, DatasetOptions, WindowSpec};
use feedbench::loader::batch::ImageFormat;
use feedbench::loader::batch::{Batch, BatchLayout};
use feedbench::loader::config::LoaderConfig;
use feedbench::loader::pipeline::Loader;

const BATCH: usize = 16;

fn g1_partial() -> Option<PathBuf> {
    let path = feedbench::testdata::g1_partial_root();
    path.join("meta/info.json").is_file().then_some(path)
}

/// Writes `samples` into a reused batch, as the workers do with pooled batches.
fn bench_collate(c: &mut Criterion, name: &str, samples: &[feedbench::dataset::Sample]) {
    let mut group = c.benchmark_group("collate");
    group.throughput(Throughput::Elements(samples.len() as u64));
    let layout = BatchLayout::of_arrays(&samples[0]);
    let mut batch = Batch::default();
    group.bench_function(name, |b| {
        b.iter(|| {
            batch.reshape(samples.len(), &layout);
            for (slot, sample) in samples.iter().enumerate() {
                batch.write_sample(slot, sample).unwrap();
            }
        })
    });
    group.finish();
}

/// Times one batch per iteration from a running stream of `loader`: epoch after epoch with the
/// same workers, as in training.
fn bench_pipeline(c: &mut Criterion, name: &str, loader: &Loader) {
    let mut group = c.benchmark_group("loader");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(10);
    group.bench_function(name, |b| {
        let mut stream = loader.epochs(0);
        b.iter(|| std::hint::black_box(stream.next().expect("endless").unwrap()))
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tabular");
    let spec = TabularSpec {
        fps: 30,
        episode_lengths: vec![300; 20],
        state_dim: 26,
        action_dim: 26,
        episodes_per_file: 10,
        row_group_rows: 10_000,
        ..Default::default()
    };
    write_tabular(&root, &spec).unwrap();
    let dataset = Arc::new(Dataset::open(&root).unwrap());
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();

    let samples: Vec<_> = (0..BATCH).map(|i| dataset.sample(i * 7, &window).unwrap()).collect();
    bench_collate(c, "tabular_diffusion", &samples);

    let config = LoaderConfig { workers: 2, batch_size: BATCH, ..Default::default() };
    bench_pipeline(c, "tabular_w2", &Loader::new(dataset, window, config).unwrap());

    let Some(g1) = g1_partial() else {
        eprintln!("g1-partial not found: video benches skipped (set FEEDBENCH_G1_PARTIAL)");
        return;
    };
    let options = DatasetOptions { episodes: Some(vec![1, 2]), ..Default::default() };
    let dataset = Arc::new(Dataset::open_with(&g1, &options).unwrap());
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    let resolution = Some((96, 128));
    let mut decoder = VideoDecoder::new(DecodeOptions { resolution, ..Default::default() });
    let samples: Vec<_> = (0..BATCH)
        .map(|i| {
            let mut sample = dataset.sample(479 + i * 11, &window).unwrap();
            sample.decode_pixels(&mut decoder, true).unwrap();
            sample
        })
        .collect();
    bench_collate(c, "g1_96x128_uint8", &samples);
    let config = LoaderConfig {
        workers: 2,
        batch_size: BATCH,
        resolution: Resolution::Size { height: 96, width: 128 },
        images: ImageFormat::U8,
        ..Default::default()
    };
    bench_pipeline(c, "g1_96x128_uint8_w2", &Loader::new(dataset, window, config).unwrap());
}

criterion_group!(loader, benches);
criterion_main!(loader);
