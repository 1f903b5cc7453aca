//! The conversion path, from a decoded frame to the batch: swscale to packed RGB24 (and
//! resizing), then the split into CHW planes (uint8, or float32 `v / 255`). On G1 episode 1
//! (640×480 AV1): a decoder asked again for the frame it decoded last converts it again without
//! decoding, so asking for one time over and over times the conversion alone; the split alone
//! runs on packed RGB of the same size. Frames are written in turn into 64 frame slots (236 MB
//! of float32 at 640×480, far beyond the caches), as a batch's are.
//!
//! `cargo bench --bench convert`; the data set comes from env `FEEDBENCH_G1_PARTIAL`.

use std::path::Path;
use std::time::Instant;

use criterion::{criterion_group, Criterion, Throughput};
use feedbench::dataset::video::{
    DecodeOptions, FrameBuffer, FrameDecoder, VideoDecoder, VideoFile,
};
use feedbench::timing::stage;

/// Frame slots written in turn.
const SLOTS: usize = 64;

/// A batch's worth of frame slots of `values` values each, uint8 or float32.
enum Slots {
    U8(Vec<u8>),
    F32(Vec<f32>),
}

impl Slots {
    fn new(uint8: bool, values: usize) -> Self {
        if uint8 {
            Slots::U8(vec![0; SLOTS * values])
        } else {
            Slots::F32(vec![0.0; SLOTS * values])
        }
    }

    /// Slot `i` (of [`SLOTS`]).
    fn slot(&mut self, i: usize) -> FrameBuffer<'_> {
        match self {
            Slots::U8(v) => {
                let n = v.len() / SLOTS;
                FrameBuffer::U8(&mut v[i * n..(i + 1) * n])
            }
            Slots::F32(v) => {
                let n = v.len() / SLOTS;
                FrameBuffer::F32(&mut v[i * n..(i + 1) * n])
            }
        }
    }
}

/// One frame converted into each slot: the decoder's last frame again.
fn convert_all(decoder: &mut VideoDecoder, path: &Path, time: f64, slots: &mut Slots) {
    for i in 0..SLOTS {
        decoder.decode_into(path, &[time], slots.slot(i)).unwrap();
    }
}

/// One packed RGB frame split into each slot.
fn split_all(rgb: &[u8], slots: &mut Slots) {
    for i in 0..SLOTS {
        slots.slot(i).fill_from_rgb(rgb);
    }
}

/// µs per frame of `rounds` calls of `f` (each [`SLOTS`] frames), the best of three.
fn per_frame(rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..rounds {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / (rounds * SLOTS) as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn bench_convert(c: &mut Criterion) {
    let Some(path) = feedbench::testdata::g1_video(1) else { return };
    let time = VideoFile::shared(&path).unwrap().frame_times()[10];
    let mut summary = Vec::new();
    for (name, size) in [("640x480", None), ("96x128", Some((96u32, 128u32)))] {
        let (h, w) = size.unwrap_or((480, 640));
        let values = 3 * h as usize * w as usize;
        // Packed RGB of every byte value, for the split alone.
        let rgb: Vec<u8> = (0..values).map(|i| (i * 7 % 256) as u8).collect();
        for (format, uint8) in [("f32", false), ("u8", true)] {
            let mut decoder =
                VideoDecoder::new(DecodeOptions { resolution: size, ..DecodeOptions::default() });
            let mut slots = Slots::new(uint8, values);
            convert_all(&mut decoder, &path, time, &mut slots);
            decoder.take_timing(); // the decode of the frame (and of the keyframe before it)
            let mut group = c.benchmark_group(format!("convert_g1_{name}_{format}"));
            group.sample_size(10);
            group.throughput(Throughput::Elements(SLOTS as u64));
            group.bench_function("swscale_and_split", |b| {
                b.iter(|| convert_all(&mut decoder, &path, time, &mut slots))
            });
            group.bench_function("split", |b| b.iter(|| split_all(&rgb, &mut slots)));
            group.finish();
            let decoded = decoder.take_timing().get(stage::DECODE).map_or(0, |t| t.calls);
            assert_eq!(decoded, 0, "the frame is converted again, not decoded again");
            if !std::env::args().any(|arg| arg == "--bench") {
                continue; // `cargo test`: each function ran once; no summary
            }
            let rounds = if size.is_some() { 200 } else { 10 };
            let whole = per_frame(rounds, || convert_all(&mut decoder, &path, time, &mut slots));
            let split = per_frame(rounds, || split_all(&rgb, &mut slots));
            summary.push(format!(
                "{name} {format}: {whole:.1} µs/frame, of which the split {split:.1} and \
                 swscale about {:.1}",
                whole - split
            ));
        }
    }
    if summary.is_empty() {
        return;
    }
    println!("\nconversion, G1 episode 1, one frame into {SLOTS} slots in turn:");
    for line in summary {
        println!("  {line}");
    }
}

criterion_group!(benches, bench_convert);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
