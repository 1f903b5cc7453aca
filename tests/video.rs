//! Video decoding on the real G1 data (LeRobot v2.1, 640×480 AV1, GOP 2, 30 fps): random access
//! against sequential decoding and the `ffmpeg` CLI, tolerance and bad-file errors, resizing.
//! Skipped with a note when the data set (env `FEEDBENCH_G1_PARTIAL`) or `ffmpeg` is absent.

use crate::common;

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{ffmpeg_rgb24_frames, have_ffmpeg};
use feedbench::dataset::video::{
    DecodeOptions, FrameBuffer, FrameDecoder, VideoDecoder, VideoFile,
};
use feedbench::testdata::g1_video;
use feedbench::timing::stage;

const WIDTH: usize = 640;
const HEIGHT: usize = 480;
const FRAME: usize = 3 * WIDTH * HEIGHT;

fn hash(bytes: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

/// A fixed-seed permutation of `0..n` (Fisher–Yates over a 64-bit LCG).
fn permutation(n: usize, mut seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        order.swap(i, (seed >> 33) as usize % (i + 1));
    }
    order
}

/// Decodes frame `frame` of `path` with the `ffmpeg` CLI to packed RGB24.
fn ffmpeg_rgb24(path: &Path, frame: usize) -> Vec<u8> {
    let output = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-vf", &format!("select=eq(n\\,{frame})"), "-vsync", "0", "-frames:v", "1"])
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .expect("ffmpeg runs");
    assert!(output.status.success(), "ffmpeg: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.stdout.len(), FRAME);
    output.stdout
}

fn decode_one(decoder: &mut VideoDecoder, path: &Path, time: f64) -> Vec<u8> {
    let mut out = vec![0u8; FRAME];
    decoder.decode_into(path, &[time], FrameBuffer::U8(&mut out)).unwrap();
    out
}

#[test]
fn random_access_equals_sequential() {
    let Some(path) = g1_video(1) else { return };
    let times = VideoFile::shared(&path).unwrap().frame_times().to_vec();
    assert_eq!(times.len(), 393);
    let mut sequential = VideoDecoder::new(DecodeOptions::default());
    let reference: Vec<u64> =
        times.iter().map(|&t| hash(&decode_one(&mut sequential, &path, t))).collect();
    // G1 repeats each keyframe in the next frame (the 31-byte inter frames are copies), so
    // about half of the hashes are distinct; frame identity is checked on synthetic videos below.
    let distinct: std::collections::HashSet<u64> = reference.iter().copied().collect();
    assert!(distinct.len() >= 190, "{} distinct frames", distinct.len());

    let shuffled = permutation(times.len(), 0x5eed);
    // Backwards over the last 100 frames: every request restarts at its keyframe.
    let backwards: Vec<usize> = (times.len() - 100..times.len()).rev().collect();
    // libdav1d on the calling thread alone, and with threads of its own: the same pixels.
    for threads in [1, 2] {
        let mut random = VideoDecoder::new(DecodeOptions { threads, ..DecodeOptions::default() });
        for &frame in shuffled.iter().chain(&backwards) {
            let got = hash(&decode_one(&mut random, &path, times[frame]));
            assert_eq!(got, reference[frame], "frame {frame}, {threads} threads: differs");
        }
    }
}

#[test]
fn the_decode_stage_counts_the_decoders_own_threads() {
    let Some(path) = g1_video(2) else { return };
    let times = VideoFile::shared(&path).unwrap().frame_times().to_vec();
    let frames = permutation(times.len(), 3);
    let decode_cpu = |threads: usize| {
        let mut decoder = VideoDecoder::new(DecodeOptions { threads, ..DecodeOptions::default() });
        for &frame in &frames[..120] {
            decode_one(&mut decoder, &path, times[frame]);
        }
        let timing = decoder.take_timing();
        let decode = timing.get(stage::DECODE).unwrap();
        // The helpers' CPU reaches the parents too, without calls of its own.
        let parent = timing.get(stage::VIDEO).map_or(Duration::ZERO, |v| v.cpu);
        (decode.cpu, parent)
    };
    let (one, one_parent) = decode_cpu(1);
    let (two, two_parent) = decode_cpu(2);
    assert_eq!(one_parent, Duration::ZERO, "one thread: nothing beside the caller's own");
    // libdav1d's threads do most of the work with two: the worker's own thread alone shows
    // a fraction of it (about a quarter here), so the stage must count theirs.
    assert!(two > one.mul_f64(0.8), "one thread {one:?}, two {two:?}");
    assert!(two_parent > Duration::ZERO && two_parent < two, "{two_parent:?} of {two:?}");
}

/// Whether CHW `chw` holds the same pixels as packed `rgb`.
fn same_pixels(chw: &[u8], rgb: &[u8]) -> bool {
    let plane = rgb.len() / 3;
    rgb.chunks_exact(3).enumerate().all(|(p, px)| (0..3).all(|c| chw[c * plane + p] == px[c]))
}

/// Encodes 60 frames of FFmpeg's `testsrc2` (a frame counter: every frame differs) at 160×120.
fn encode_synthetic(dir: &Path, name: &str, codec_args: &[&str]) -> PathBuf {
    let path = dir.join(name);
    let status = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=30"])
        .args(["-frames:v", "60", "-pix_fmt", "yuv420p"])
        .args(codec_args)
        .arg(&path)
        .status()
        .expect("ffmpeg runs");
    assert!(status.success(), "encoding {name} failed");
    path
}

#[test]
fn b_frame_videos_random_access_matches_ffmpeg_cli() {
    if !have_ffmpeg() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let h264 = ["-c:v", "libx264", "-bf", "2", "-g", "12"];
    // x265 makes open GOPs: CRA keyframes with leading pictures that need the previous GOP.
    let hevc = [
        "-c:v",
        "libx265",
        "-x265-params",
        "log-level=error:bframes=3:keyint=12",
        "-tag:v",
        "hvc1",
    ];
    // Open GOPs at LeRobot's GOP 2: keyframes are recovery points (non-IDR I-frames), each
    // followed in decode order by a leading B-frame of the GOP before; the last frame is a P
    // after the last keyframe.
    let h264_g2 = ["-c:v", "libx264", "-g", "2", "-x264-params", "open-gop=1"];
    let av1 = ["-c:v", "libsvtav1", "-g", "4"];
    for (name, args) in [
        ("h264.mp4", &h264[..]),
        ("h264_g2.mp4", &h264_g2[..]),
        ("hevc.mp4", &hevc[..]),
        ("av1.mp4", &av1[..]),
    ] {
        let path = encode_synthetic(dir.path(), name, args);
        let frame_bytes = 3 * 160 * 120;
        let reference = ffmpeg_rgb24_frames(&path, frame_bytes);
        let video = VideoFile::shared(&path).unwrap();
        assert_eq!(video.frame_count(), 60, "{name}");
        assert_eq!(reference.len(), 60, "{name}");
        let distinct: std::collections::HashSet<u64> = reference.iter().map(|f| hash(f)).collect();
        assert_eq!(distinct.len(), 60, "{name}: testsrc2 frames all differ");
        let times = video.frame_times().to_vec();
        // Single-threaded, and with frame threads (which hold frames back until more packets
        // arrive): the same pixels in any order.
        for threads in [1, 3] {
            let options = DecodeOptions { threads, ..DecodeOptions::default() };
            let name = format!("{name}, {threads} decoder threads");
            let mut decoder = VideoDecoder::new(options.clone());
            let mut out = vec![0u8; 2 * frame_bytes];
            for frame in permutation(60, 7).into_iter().chain((0..60).rev()).chain(0..60) {
                decoder
                    .decode_into(&path, &[times[frame]], FrameBuffer::U8(&mut out[..frame_bytes]))
                    .unwrap();
                let same = same_pixels(&out[..frame_bytes], &reference[frame]);
                assert!(same, "{name}: frame {frame}");
            }
            // Each frame alone, by a decoder that starts at the frame's keyframe.
            for frame in 0..60 {
                let mut fresh = VideoDecoder::new(options.clone());
                fresh
                    .decode_into(&path, &[times[frame]], FrameBuffer::U8(&mut out[..frame_bytes]))
                    .unwrap();
                let same = same_pixels(&out[..frame_bytes], &reference[frame]);
                assert!(same, "{name}: frame {frame}");
            }
            for t in permutation(59, 11).into_iter().map(|f| f + 1) {
                decoder
                    .decode_into(&path, &[times[t - 1], times[t]], FrameBuffer::U8(&mut out))
                    .unwrap();
                let pair = same_pixels(&out[..frame_bytes], &reference[t - 1])
                    && same_pixels(&out[frame_bytes..], &reference[t]);
                assert!(pair, "{name}: pair at {t}");
            }
        }
    }
}

#[test]
fn diffusion_pairs_match_ffmpeg_cli() {
    let Some(path) = g1_video(1) else { return };
    if !have_ffmpeg() {
        return;
    }
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    let mut max_diff = 0u8;
    // Pairs (t − 1/30, t) starting on a keyframe, on a non-keyframe, and the last frames.
    for t in [1usize, 2, 57, 250, 392] {
        let times = [(t - 1) as f64 / 30.0, t as f64 / 30.0];
        let mut chw = vec![0u8; 2 * FRAME];
        decoder.decode_into(&path, &times, FrameBuffer::U8(&mut chw)).unwrap();
        for (k, frame) in [t - 1, t].into_iter().enumerate() {
            let rgb = ffmpeg_rgb24(&path, frame);
            let ours = &chw[k * FRAME..(k + 1) * FRAME];
            for (p, px) in rgb.chunks_exact(3).enumerate() {
                for c in 0..3 {
                    max_diff = max_diff.max(ours[c * WIDTH * HEIGHT + p].abs_diff(px[c]));
                }
            }
        }
    }
    eprintln!("max abs difference against the ffmpeg CLI's rgb24: {max_diff}");
    assert_eq!(max_diff, 0, "pixels differ from the ffmpeg CLI's rgb24 decode");
}

#[test]
fn overlapping_windows_in_order_decode_each_frame_once() {
    let Some(path) = g1_video(2) else { return };
    let fresh = |times: &[f64]| {
        let mut out = vec![0u8; times.len() * FRAME];
        let mut decoder = VideoDecoder::new(DecodeOptions::default());
        decoder.decode_into(&path, times, FrameBuffer::U8(&mut out)).unwrap();
        out
    };
    // The sequential sampler's diffusion pairs (t − 1, t), t = 1 … 40: each frame but the
    // first is asked for twice, by consecutive requests.
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    for t in 1..=40 {
        let times = [(t - 1) as f64 / 30.0, t as f64 / 30.0];
        let mut out = vec![0u8; 2 * FRAME];
        decoder.decode_into(&path, &times, FrameBuffer::U8(&mut out)).unwrap();
        assert!(out == fresh(&times), "pair ending at frame {t}");
    }
    let timing = decoder.take_timing();
    let decoded = timing.get(stage::DECODE).unwrap().calls;
    assert_eq!(decoded, 41, "frames 0 … 40, each decoded once");
    assert_eq!(timing.get(stage::CONVERT).unwrap().calls, 80, "every frame asked for is written");
}

#[test]
fn request_order_duplicates_and_float_output() {
    let Some(path) = g1_video(2) else { return };
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    let a = decode_one(&mut decoder, &path, 40.0 / 30.0);
    let b = decode_one(&mut decoder, &path, 41.0 / 30.0);
    // Out of time order and a repeated frame (a padded window position).
    let times = [41.0 / 30.0, 40.0 / 30.0, 41.0 / 30.0];
    let mut u8s = vec![0u8; 3 * FRAME];
    decoder.decode_into(&path, &times, FrameBuffer::U8(&mut u8s)).unwrap();
    assert!(u8s[..FRAME] == b[..] && u8s[FRAME..2 * FRAME] == a[..] && u8s[2 * FRAME..] == b[..]);
    let mut f32s = vec![0f32; 3 * FRAME];
    decoder.decode_into(&path, &times, FrameBuffer::F32(&mut f32s)).unwrap();
    assert!(f32s.iter().zip(&u8s).all(|(f, u)| *f == f32::from(*u) / 255.0));
}

#[test]
fn decoder_cache_switches_files() {
    let (Some(a), Some(b)) = (g1_video(2), g1_video(4)) else { return };
    let fresh =
        |path: &Path, t: f64| decode_one(&mut VideoDecoder::new(DecodeOptions::default()), path, t);
    let expected = [fresh(&a, 0.5), fresh(&b, 0.5), fresh(&a, 0.6), fresh(&b, 0.6)];
    for capacity in [1, 2] {
        let options = DecodeOptions { cache_capacity: capacity, ..DecodeOptions::default() };
        let mut decoder = VideoDecoder::new(options);
        let got = [(&a, 0.5), (&b, 0.5), (&a, 0.6), (&b, 0.6)]
            .map(|(path, t)| decode_one(&mut decoder, path, t));
        assert!(got == expected, "cache capacity {capacity}");
    }
}

#[test]
fn resize_gives_requested_size() {
    let Some(path) = g1_video(4) else { return };
    let options = DecodeOptions { resolution: Some((96, 128)), ..DecodeOptions::default() };
    let mut decoder = VideoDecoder::new(options);
    let times = [0.0, 1.0 / 30.0];
    let mut u8s = vec![0u8; 2 * 3 * 96 * 128];
    decoder.decode_into(&path, &times, FrameBuffer::U8(&mut u8s)).unwrap();
    let mut f32s = vec![0f32; 2 * 3 * 96 * 128];
    decoder.decode_into(&path, &times, FrameBuffer::F32(&mut f32s)).unwrap();
    assert!(f32s.iter().zip(&u8s).all(|(f, u)| *f == f32::from(*u) / 255.0));
    // The small frame looks like the large one: channel means within a few levels.
    let mut native = VideoDecoder::new(DecodeOptions::default());
    let full = decode_one(&mut native, &path, 0.0);
    for c in 0..3 {
        let mean = |v: &[u8]| v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
        let small = mean(&u8s[c * 96 * 128..(c + 1) * 96 * 128]);
        let large = mean(&full[c * WIDTH * HEIGHT..(c + 1) * WIDTH * HEIGHT]);
        assert!((small - large).abs() < 3.0, "channel {c}: {small} vs {large}");
    }
    // A buffer of the native size is refused, naming the file.
    let mut wrong = vec![0u8; FRAME];
    let err = decoder.decode_into(&path, &[0.0], FrameBuffer::U8(&mut wrong)).unwrap_err();
    assert!(err.to_string().contains("episode_000004.mp4"), "{err}");
}

#[test]
fn times_outside_tolerance_are_errors() {
    let Some(path) = g1_video(29) else { return };
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    let frames = VideoFile::shared(&path).unwrap().frame_count();
    let mut out = vec![0u8; FRAME];
    let beyond = frames as f64 / 30.0 + 1.0;
    let err = decoder.decode_into(&path, &[beyond], FrameBuffer::U8(&mut out)).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("episode_000029.mp4") && message.contains(&format!("{beyond}")),
        "{message}"
    );
    assert!(message.contains(&format!("frame {}", frames - 1)), "{message}");
    let between = 10.5 / 30.0;
    let err = decoder.decode_into(&path, &[between], FrameBuffer::U8(&mut out)).unwrap_err();
    assert!(err.to_string().contains("nearest is frame 10"), "{err}");
    // A looser tolerance accepts it, as LeRobot's tolerance_s does.
    let loose = DecodeOptions { tolerance_s: 0.02, ..DecodeOptions::default() };
    VideoDecoder::new(loose).decode_into(&path, &[between], FrameBuffer::U8(&mut out)).unwrap();
}

/// A copy of episode 30 in a temporary directory, altered by `alter`.
fn altered_copy(alter: impl FnOnce(&mut Vec<u8>)) -> Option<(tempfile::TempDir, PathBuf)> {
    let source = g1_video(30)?;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("episode_000030.mp4");
    let mut bytes = std::fs::read(source).unwrap();
    alter(&mut bytes);
    std::fs::write(&path, bytes).unwrap();
    Some((dir, path))
}

fn decode_error(path: &Path) -> String {
    let mut out = vec![0u8; FRAME];
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    let err = decoder.decode_into(path, &[0.0], FrameBuffer::U8(&mut out)).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    err
}

#[test]
fn truncated_file_is_an_error() {
    for keep in [0.5, 0.999] {
        let Some((_dir, path)) = altered_copy(|b| b.truncate((b.len() as f64 * keep) as usize))
        else {
            return;
        };
        let err = decode_error(&path);
        assert!(err.contains("truncated"), "{err}");
    }
}

#[test]
fn unknown_codec_is_an_error() {
    let Some((_dir, path)) = altered_copy(|bytes| {
        let stsd = bytes.windows(4).position(|w| w == b"stsd").expect("an stsd box");
        let entry = stsd + bytes[stsd..].windows(4).position(|w| w == b"av01").expect("av01 entry");
        bytes[entry..entry + 4].copy_from_slice(b"zzzz");
    }) else {
        return;
    };
    let err = decode_error(&path);
    assert!(err.contains("unsupported video codec \"zzzz\""), "{err}");
}

#[test]
fn missing_file_is_an_error() {
    let path = Path::new("/nonexistent/episode_000000.mp4");
    let err = decode_error(path);
    assert!(err.contains("No such file"), "{err}");
}
