//! Video decoding cost at 640×480 AV1 (G1, GOP 2): random single frames, diffusion pairs
//! (t − 1/30, t) and sequential decoding of the whole file as the reference, in wall time
//! (criterion) and in CPU µs per frame with the random/sequential ratio (printed summary).
//!
//! `cargo bench --bench video`; the data set comes from env `FEEDBENCH_G1_PARTIAL`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{criterion_group, Criterion, Throughput};
use feedbench::dataset::video::{DecodeOptions, FrameBuffer, VideoDecoder, VideoFile};

/// Frames per random-access iteration (and pairs per diffusion iteration).
const BATCH: usize = 32;

fn g1_video() -> Option<PathBuf> {
    let root = feedbench::testdata::g1_partial_root();
    let path = root.join("videos/chunk-000/observation.images.cam_high/episode_000001.mp4");
    path.is_file().then_some(path)
}

/// Deterministic pseudo-random frame numbers in `lo..n`.
fn random_frames(count: usize, lo: usize, n: usize, mut seed: u64) -> Vec<usize> {
    (0..count)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (seed >> 33) as usize % (n - lo)
        })
        .collect()
}

/// The three workloads, each a list of requests (times of one `decode_into` call).
fn workloads(times: &[f64]) -> [(&'static str, Vec<Vec<f64>>); 3] {
    let n = times.len();
    let random = random_frames(BATCH, 0, n, 1).into_iter().map(|f| vec![times[f]]).collect();
    let pairs =
        random_frames(BATCH, 1, n, 2).into_iter().map(|f| vec![times[f - 1], times[f]]).collect();
    let sequential = times.iter().map(|&t| vec![t]).collect();
    [("random", random), ("diffusion_pairs", pairs), ("sequential", sequential)]
}

fn run(decoder: &mut VideoDecoder, path: &Path, requests: &[Vec<f64>], out: &mut [f32]) {
    for times in requests {
        let values = times.len() * 3 * 480 * 640;
        decoder.decode_into(path, times, FrameBuffer::F32(&mut out[..values])).unwrap();
    }
}

fn bench_video(c: &mut Criterion) {
    let Some(path) = g1_video() else {
        eprintln!("note: g1-partial absent (set FEEDBENCH_G1_PARTIAL): video bench skipped");
        return;
    };
    let times = VideoFile::shared(&path).unwrap().frame_times().to_vec();
    let mut out = vec![0f32; 2 * 3 * 480 * 640];
    let mut group = c.benchmark_group("video_g1_av1_640x480");
    group.sample_size(10);
    for (name, requests) in workloads(&times) {
        let frames: usize = requests.iter().map(Vec::len).sum();
        group.throughput(Throughput::Elements(frames as u64));
        let mut decoder = VideoDecoder::new(DecodeOptions::default());
        group.bench_function(name, |b| b.iter(|| run(&mut decoder, &path, &requests, &mut out)));
    }
    group.finish();
}

/// CPU time of the calling thread, from `/proc/thread-self/schedstat` (nanoseconds on CPU).
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Prints µs per frame (wall and CPU) of each workload and the random/sequential ratio.
fn cpu_summary() {
    let Some(path) = g1_video() else { return };
    let times = VideoFile::shared(&path).unwrap().frame_times().to_vec();
    let mut out = vec![0f32; 2 * 3 * 480 * 640];
    let mut cpu_per_frame = Vec::new();
    println!("\nvideo decode, G1 episode 1 (640x480 AV1, GOP 2), float32 CHW output:");
    for (name, requests) in workloads(&times) {
        let mut decoder = VideoDecoder::new(DecodeOptions::default());
        run(&mut decoder, &path, &requests, &mut out); // warm-up
        let rounds = if name == "sequential" { 3 } else { 30 };
        let frames = rounds * requests.iter().map(Vec::len).sum::<usize>();
        let (wall, cpu) = (Instant::now(), thread_cpu_ns());
        for _ in 0..rounds {
            run(&mut decoder, &path, &requests, &mut out);
        }
        let wall_us = wall.elapsed().as_secs_f64() * 1e6 / frames as f64;
        let cpu_us = cpu.zip(thread_cpu_ns()).map(|(a, b)| (b - a) as f64 / 1e3 / frames as f64);
        let cpu_text = cpu_us.map_or("n/a".into(), |us| format!("{us:.0}"));
        println!(
            "  {name:16} {frames:5} frames  wall {wall_us:7.0} µs/frame ({:6.1} frames/s)  CPU {cpu_text:>6} µs/frame",
            1e6 / wall_us
        );
        cpu_per_frame.push((name, cpu_us.unwrap_or(wall_us)));
    }
    let sequential = cpu_per_frame[2].1;
    for (name, us) in &cpu_per_frame[..2] {
        println!(
            "  {name} / sequential CPU cost per frame: {:.2}x (target ≤ 1.6x)",
            us / sequential
        );
    }
}

criterion_group!(benches, bench_video);

fn main() {
    benches();
    cpu_summary();
    criterion::Criterion::default().configure_from_args().final_summary();
}
