//! Random-access parquet reads: samples/s of `Dataset::sample` with the diffusion window
//! (state ×2, action ×16) in a shuffled order, on the real g1-partial data and on a generated
//! v3.0 dataset of the same shapes. Row groups are decoded once (first touch) and shared; the
//! first iteration pays for that, criterion's warm-up absorbs it.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use feedbench::dataset::write::{write_tabular, TabularSpec};
use feedbench::dataset::{Dataset, DatasetOptions, WindowSpec};

/// A fixed pseudo-random permutation (xorshift), so every run reads the same order.
fn shuffled(mut indices: Vec<usize>) -> Vec<usize> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..indices.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        indices.swap(i, (state % (i as u64 + 1)) as usize);
    }
    indices
}

fn bench_dataset(c: &mut Criterion, name: &str, dataset: &Dataset) {
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    let order = shuffled(dataset.sample_indices(window.drop_n_last_frames));
    let mut group = c.benchmark_group("parquet_random_access");
    group.throughput(Throughput::Elements(1));
    let mut next = order.iter().cycle();
    group.bench_function(format!("{name}/diffusion_sample"), |b| {
        b.iter_batched(
            || *next.next().unwrap(),
            |index| dataset.sample(index, &window).unwrap(),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    let g1 = feedbench::testdata::g1_partial_root();
    if g1.join("meta/info.json").is_file() {
        let options =
            DatasetOptions { episodes: Some(vec![1, 2, 4, 29, 30]), ..Default::default() };
        bench_dataset(c, "g1-partial", &Dataset::open_with(&g1, &options).unwrap());
    } else {
        eprintln!("g1-partial not found at {}: benching the generated dataset only", g1.display());
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("g1-shaped-v3");
    let spec = TabularSpec {
        fps: 30,
        episode_lengths: vec![360; 100],
        state_dim: 26,
        action_dim: 26,
        episodes_per_file: 50,
        row_group_rows: 10_000,
        ..Default::default()
    };
    write_tabular(&root, &spec).unwrap();
    bench_dataset(c, "generated-v3", &Dataset::open(&root).unwrap());
}

criterion_group!(frames, benches);
criterion_main!(frames);
