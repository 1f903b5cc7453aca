//! Video decoding cost at 640×480 AV1 (G1, GOP 2): random single frames, diffusion pairs
//! (t − 1/30, t) and sequential decoding of the whole file as the reference, in wall time
//! (criterion) and in CPU µs per frame with the random/sequential ratio (printed summary).
//!
//! Then, on clips generated with `synth` at start (GOP 2, crf 30), per codec (AV1, H.264, HEVC)
//! and size (96×96, 640×480): random single frames and sequential decoding, and the printed
//! random/sequential CPU ratio; and the decode cost of the `g1` preset against the real G1
//! footage. These run only under `cargo bench` (not in `cargo test`'s unoptimised build).
//!
//! `cargo bench --bench video`; the data set comes from env `FEEDBENCH_G1_PARTIAL`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use criterion::{criterion_group, Criterion, Throughput};
use feedbench::dataset::video::{
    DecodeOptions, FrameBuffer, FrameDecoder, VideoCodec, VideoDecoder, VideoFile,
};
use feedbench::dataset::write::preset::CameraPreset;
use feedbench::dataset::write::{synth, Preset, SynthOptions};
use feedbench::dataset::CodebaseVersion;

/// Frames per random-access iteration (and pairs per diffusion iteration).
const BATCH: usize = 32;

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
    let Some(path) = feedbench::testdata::g1_video(1) else { return };
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
    let Some(path) = feedbench::testdata::g1_video(1) else { return };
    let times = VideoFile::shared(&path).unwrap().frame_times().to_vec();
    let mut out = vec![0f32; 2 * 3 * 480 * 640];
    let mut cpu_per_frame = Vec::new();
    println!("\nvideo decode, G1 episode 1 (640x480 AV1, GOP 2), float32 CHW output:");
    for (name, requests) in workloads(&times) {
        let mut decoder = VideoDecoder::new(DecodeOptions::default());
        run(&mut decoder, &path, &requests, &mut out); // warm-up
        decoder.take_timing();
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
        // The codec alone (no conversion to RGB and float32), per frame it decoded, wanted or
        // not: what `ffmpeg -threads 1 -c:v libdav1d -i FILE -f null -` measures in order.
        let timing = decoder.take_timing();
        if let Some(decode) = timing.get(feedbench::timing::stage::DECODE) {
            println!(
                "  {:16} {:5} decoded  codec alone {:6.0} µs CPU per decoded frame",
                "",
                decode.calls,
                decode.cpu.as_secs_f64() * 1e6 / decode.calls.max(1) as f64
            );
        }
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

/// Frames of each generated clip: at 96×96 and at 640×480.
const SYNTH_FRAMES: [(u32, u32, usize); 2] = [(96, 96, 300), (480, 640, 150)];

/// One generated camera clip per codec and size, written with the `synth` API (one episode,
/// v2.1, LeRobot's GOP 2 and crf 30) into a temporary directory.
struct SynthClips {
    _dir: tempfile::TempDir,
    clips: Vec<(VideoCodec, (u32, u32), PathBuf)>,
}

fn synth_clips() -> SynthClips {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut clips = Vec::new();
    for &codec in VideoCodec::ALL {
        for (height, width, frames) in SYNTH_FRAMES {
            let mut preset = Preset::load("pusht").expect("built-in preset");
            preset.episodes = 1;
            preset.frames_per_episode = frames;
            preset.frames_jitter = 0;
            preset.fps = 30;
            preset.codec = codec;
            preset.cameras = vec![CameraPreset { key: "observation.image".into(), height, width }];
            let root = dir.path().join(format!("{codec}_{height}x{width}"));
            let options = SynthOptions { version: CodebaseVersion::V21, ..Default::default() };
            synth(&root, &preset, &options).expect("synth");
            let path = root.join("videos/chunk-000/observation.image/episode_000000.mp4");
            clips.push((codec, (height, width), path));
        }
    }
    SynthClips { _dir: dir, clips }
}

/// Random single frames and sequential decoding of each generated clip.
fn bench_synth(c: &mut Criterion, clips: &SynthClips) {
    for (codec, (height, width), path) in &clips.clips {
        let times = VideoFile::shared(path).unwrap().frame_times().to_vec();
        let mut out = vec![0f32; 3 * (*height * *width) as usize];
        let mut group = c.benchmark_group(format!("video_synth_{codec}_{width}x{height}"));
        group.sample_size(10);
        let random: Vec<Vec<f64>> =
            random_frames(BATCH, 0, times.len(), 3).into_iter().map(|f| vec![times[f]]).collect();
        let sequential: Vec<Vec<f64>> = times.iter().map(|&t| vec![t]).collect();
        for (name, requests) in [("random", random), ("sequential", sequential)] {
            group.throughput(Throughput::Elements(requests.len() as u64));
            let mut decoder = VideoDecoder::new(DecodeOptions::default());
            group.bench_function(name, |b| {
                b.iter(|| run_sized(&mut decoder, path, &requests, &mut out, (*height, *width)))
            });
        }
        group.finish();
    }
}

fn run_sized(
    decoder: &mut VideoDecoder,
    path: &Path,
    requests: &[Vec<f64>],
    out: &mut [f32],
    (height, width): (u32, u32),
) {
    for times in requests {
        let values = times.len() * 3 * (height * width) as usize;
        decoder.decode_into(path, times, FrameBuffer::F32(&mut out[..values])).unwrap();
    }
}

/// CPU µs per frame of `requests` decoded `rounds` times by a fresh decoder (after one warm-up
/// pass): the calling thread's CPU time, or wall time where it cannot be read.
fn cpu_us_per_frame(path: &Path, requests: &[Vec<f64>], rounds: usize, size: (u32, u32)) -> f64 {
    let mut out = vec![0f32; 3 * (size.0 * size.1) as usize];
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    run_sized(&mut decoder, path, requests, &mut out, size);
    let frames = rounds * requests.iter().map(Vec::len).sum::<usize>();
    let (wall, cpu) = (Instant::now(), thread_cpu_ns());
    for _ in 0..rounds {
        run_sized(&mut decoder, path, requests, &mut out, size);
    }
    let wall_us = wall.elapsed().as_secs_f64() * 1e6 / frames as f64;
    cpu.zip(thread_cpu_ns()).map_or(wall_us, |(a, b)| (b - a) as f64 / 1e3 / frames as f64)
}

/// The smallest of `tries` measurements: on a shared machine, the least disturbed one.
fn best_of(tries: usize, measure: impl Fn() -> f64) -> f64 {
    (0..tries).map(|_| measure()).fold(f64::INFINITY, f64::min)
}

/// Prints, per codec and size, CPU µs per frame of random and sequential decoding and their
/// ratio (target ≤ 1.6× at GOP 2).
fn synth_summary(clips: &SynthClips) {
    println!("\nvideo decode, generated clips (GOP 2, crf 30), float32 CHW output, CPU µs/frame:");
    for (codec, size, path) in &clips.clips {
        let times = VideoFile::shared(path).unwrap().frame_times().to_vec();
        let random: Vec<Vec<f64>> = random_frames(4 * BATCH, 0, times.len(), 4)
            .into_iter()
            .map(|f| vec![times[f]])
            .collect();
        let sequential: Vec<Vec<f64>> = times.iter().map(|&t| vec![t]).collect();
        let random_us = best_of(3, || cpu_us_per_frame(path, &random, 2, *size));
        let sequential_us = best_of(3, || cpu_us_per_frame(path, &sequential, 1, *size));
        println!(
            "  {codec:4} {:>3}x{:<3}  random {random_us:7.0} ({:6.0} frames/s)  sequential {sequential_us:7.0}  random/sequential {:.2}x (target ≤ 1.6x)",
            size.1,
            size.0,
            1e6 / random_us,
            random_us / sequential_us
        );
    }
}

/// Decode cost of generated footage against real footage: sequential CPU µs/frame of the
/// `g1` preset (2 episodes, AV1, GOP 2, crf 30) and of the real G1 episode 1 (target ±35 %).
fn g1_decode_cost_summary() {
    let Some(real) = feedbench::testdata::g1_video(1) else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("g1");
    let mut preset = Preset::load("g1").expect("built-in preset");
    preset.episodes = 2;
    let options = SynthOptions { version: CodebaseVersion::V21, ..Default::default() };
    synth(&root, &preset, &options).expect("synth");
    let sequential = |path: &Path| {
        let times = VideoFile::shared(path).unwrap().frame_times().to_vec();
        let requests: Vec<Vec<f64>> = times.iter().map(|&t| vec![t]).collect();
        best_of(5, || cpu_us_per_frame(path, &requests, 1, (480, 640)))
    };
    let real_us = sequential(&real);
    println!(
        "\ndecode cost, generated g1 against the real G1 (AV1 640x480, sequential, CPU µs/frame):"
    );
    println!("  real G1 episode 1          {real_us:6.0}");
    for episode in 0..2 {
        let path = root
            .join(format!("videos/chunk-000/observation.images.cam_high/episode_{episode:06}.mp4"));
        let us = sequential(&path);
        println!(
            "  synth g1 episode {episode}         {us:6.0}  ({:.2}x the real cost; target 0.65x to 1.35x)",
            us / real_us
        );
    }
}

criterion_group!(benches, bench_video);

fn main() {
    benches();
    cpu_summary();
    if std::env::args().any(|arg| arg == "--bench") {
        let clips = synth_clips();
        let mut criterion = Criterion::default().configure_from_args();
        bench_synth(&mut criterion, &clips);
        synth_summary(&clips);
        g1_decode_cost_summary();
    }
    criterion::Criterion::default().configure_from_args().final_summary();
}
