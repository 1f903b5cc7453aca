//! The decoded-frame cache against decoding, on G1 episode 1 (640×480 AV1, GOP 2): diffusion
//! pairs (t − 1/30, t) at random written as float32 at native size and at 96×128, by the decoder
//! alone (what every epoch costs without a cache, and the first with one) and from a warm cache
//! (what the later epochs cost), in wall time (criterion) and µs per frame (printed summary).
//!
//! `cargo bench --bench cache`; the data set comes from env `FEEDBENCH_G1_PARTIAL`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, Criterion, Throughput};
use feedbench::dataset::video::cache::{CachedDecoder, FrameCache};
use feedbench::dataset::video::{
    DecodeOptions, FrameBuffer, FrameDecoder, VideoDecoder, VideoFile,
};

/// Pairs per iteration.
const PAIRS: usize = 32;

/// `PAIRS` pairs of consecutive frame times at pseudo-random places of `times`.
fn pairs(times: &[f64]) -> Vec<[f64; 2]> {
    let mut seed = 2u64;
    (0..PAIRS)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let f = 1 + (seed >> 33) as usize % (times.len() - 1);
            [times[f - 1], times[f]]
        })
        .collect()
}

fn run(decoder: &mut dyn FrameDecoder, path: &Path, pairs: &[[f64; 2]], out: &mut [f32]) {
    for pair in pairs {
        decoder.decode_into(path, pair, FrameBuffer::F32(out)).unwrap();
    }
}

fn bench_cache(c: &mut Criterion) {
    let Some(path) = feedbench::testdata::g1_video(1) else { return };
    let times = VideoFile::shared(&path).unwrap().frame_times().to_vec();
    let pairs = pairs(&times);
    let mut summary = Vec::new();
    for (name, size) in [("640x480", None), ("96x128", Some((96, 128)))] {
        let options = DecodeOptions { resolution: size, ..DecodeOptions::default() };
        let (h, w) = size.unwrap_or((480, 640));
        let mut out = vec![0f32; 2 * 3 * h as usize * w as usize];
        let mut decoding = VideoDecoder::new(options.clone());
        let cache = Arc::new(FrameCache::new(1 << 30));
        let mut cached = CachedDecoder::new(Box::new(VideoDecoder::new(options)), cache);
        run(&mut cached, &path, &pairs, &mut out); // warm: every pair kept
        let mut group = c.benchmark_group(format!("cache_g1_f32_{name}"));
        group.sample_size(10);
        group.throughput(Throughput::Elements(2 * PAIRS as u64));
        group.bench_function("decoded", |b| b.iter(|| run(&mut decoding, &path, &pairs, &mut out)));
        group.bench_function("cached", |b| b.iter(|| run(&mut cached, &path, &pairs, &mut out)));
        group.finish();
        let per_frame = |d: &mut dyn FrameDecoder, out: &mut [f32]| {
            let start = Instant::now();
            for _ in 0..3 {
                run(d, &path, &pairs, out);
            }
            start.elapsed().as_secs_f64() * 1e6 / (3 * 2 * PAIRS) as f64
        };
        if !std::env::args().any(|arg| arg == "--bench") {
            continue; // `cargo test`: each function ran once; no summary
        }
        let (decoded, copied) =
            (per_frame(&mut decoding, &mut out), per_frame(&mut cached, &mut out));
        summary.push(format!(
            "{name}: decoded {decoded:.0} µs/frame, from the cache {copied:.1} µs/frame ({:.0}× less)",
            decoded / copied
        ));
    }
    if summary.is_empty() {
        return;
    }
    println!("\nframe cache, G1 episode 1, diffusion pairs, float32:");
    for line in summary {
        println!("  {line}");
    }
}

criterion_group!(benches, bench_cache);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
