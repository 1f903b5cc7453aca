//! PSNR and SSIM as the `ffmpeg` CLI reports them (issue #13): the same frames through
//! [`QualityMeter`] give the CLI's `average:`/`min:` PSNR within 0.01 dB and its `All:` SSIM
//! within 1e-4.

use crate::common;

use std::path::Path;
use std::process::Command;

use feedbench::dataset::video::quality::{planar_rgb_frame, Quality, QualityMeter};
use ffmpeg_next::format::Pixel;
use ffmpeg_next::frame;

const WIDTH: u32 = 96;
const HEIGHT: u32 = 72;

fn ffmpeg(args: &[&str]) -> std::process::Output {
    let output = Command::new("ffmpeg").args(["-v", "info", "-nostats", "-y"]).args(args).output();
    let output = output.expect("ffmpeg runs");
    assert!(
        output.status.success(),
        "ffmpeg {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Every frame of `path` as YUV 4:2:0 frames, decoded by the CLI.
fn frames(path: &Path) -> Vec<frame::Video> {
    let raw = ffmpeg(&["-i", path.to_str().unwrap(), "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"]);
    let (w, h) = (WIDTH as usize, HEIGHT as usize);
    let planes = [(w, h), (w / 2, h / 2), (w / 2, h / 2)];
    let frame_bytes: usize = planes.iter().map(|(pw, ph)| pw * ph).sum();
    raw.stdout
        .chunks_exact(frame_bytes)
        .map(|bytes| {
            let mut frame = frame::Video::new(Pixel::YUV420P, WIDTH, HEIGHT);
            let mut at = 0;
            for (plane, (pw, ph)) in planes.iter().enumerate() {
                let stride = frame.stride(plane);
                for row in 0..*ph {
                    frame.data_mut(plane)[row * stride..row * stride + pw]
                        .copy_from_slice(&bytes[at..at + pw]);
                    at += pw;
                }
            }
            frame
        })
        .collect()
}

/// The number after `key` in `line`.
fn figure(text: &str, line_start: &str, key: &str) -> f64 {
    let line = text.lines().find(|l| l.contains(line_start)).unwrap_or_else(|| panic!("{text}"));
    let rest = &line[line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn psnr_and_ssim_equal_the_ffmpeg_clis() {
    if !common::have_ffmpeg() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (reference, distorted) = (dir.path().join("ref.mkv"), dir.path().join("dist.mp4"));
    let size = format!("testsrc2=size={WIDTH}x{HEIGHT}:rate=10");
    let r = reference.to_str().unwrap();
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        &size,
        "-frames:v",
        "12",
        "-c:v",
        "ffv1",
        "-pix_fmt",
        "yuv420p",
        r,
    ]);
    let d = distorted.to_str().unwrap();
    ffmpeg(&["-i", r, "-c:v", "libx264", "-crf", "40", "-g", "4", "-pix_fmt", "yuv420p", d]);

    let cli =
        ffmpeg(&["-i", d, "-i", r, "-lavfi", "[0:v][1:v]psnr;[0:v][1:v]ssim", "-f", "null", "-"]);
    let log = String::from_utf8_lossy(&cli.stderr);
    let (average, min) = (figure(&log, "PSNR y:", "average:"), figure(&log, "PSNR y:", "min:"));
    let all = figure(&log, "SSIM Y:", "All:");

    let (reference, distorted) = (frames(&reference), frames(&distorted));
    assert_eq!((reference.len(), distorted.len()), (12, 12));
    let mut meter = QualityMeter::new(WIDTH, HEIGHT, Pixel::YUV420P).unwrap();
    for (d, r) in distorted.iter().zip(&reference) {
        meter.push(d, r).unwrap();
    }
    let quality = Quality::of(&meter.finish().unwrap()).unwrap();
    eprintln!("feedbench {quality:?}; ffmpeg CLI: average {average}, min {min}, All {all}");
    assert!(quality.psnr_db < 40.0, "CRF 40 loses something: {quality:?}");
    assert!((quality.psnr_db - average).abs() < 0.01, "{quality:?} against average {average}");
    assert!((quality.worst_psnr_db - min).abs() < 0.01, "{quality:?} against min {min}");
    assert!((quality.ssim - all).abs() < 1e-4, "{quality:?} against All {all}");
}

/// Every frame of `path` as packed RGB24, converted by the CLI.
fn rgb_frames(path: &Path) -> Vec<Vec<u8>> {
    let raw = ffmpeg(&["-i", path.to_str().unwrap(), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]);
    raw.stdout.chunks_exact((WIDTH * HEIGHT * 3) as usize).map(<[u8]>::to_vec).collect()
}

/// Packed RGB → RGB planes, as the loader writes frames.
fn planes(rgb: &[u8]) -> Vec<u8> {
    (0..3).flat_map(|c| rgb.iter().skip(c).step_by(3).copied()).collect()
}

#[test]
fn rgb_frames_as_the_loader_holds_them_give_the_ffmpeg_clis_figures() {
    if !common::have_ffmpeg() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.mp4");
    let s = source.to_str().unwrap();
    let size = format!("testsrc2=size={WIDTH}x{HEIGHT}:rate=10");
    ffmpeg(&["-f", "lavfi", "-i", &size, "-frames:v", "8", "-c:v", "libx264", "-crf", "45", s]);
    let (reference, distorted) = (rgb_frames(&source), {
        let small = dir.path().join("small.mp4");
        let args = ["-i", s, "-c:v", "libx264", "-crf", "30", "-g", "3"];
        ffmpeg(&[&args[..], &[small.to_str().unwrap()]].concat());
        rgb_frames(&small)
    });
    // The CLI compares the very same RGB frames, read back as raw video.
    let write = |name: &str, frames: &[Vec<u8>]| {
        let path = dir.path().join(name);
        std::fs::write(&path, frames.concat()).unwrap();
        path.to_str().unwrap().to_string()
    };
    let (r, d) = (write("ref.rgb", &reference), write("dist.rgb", &distorted));
    let video_size = format!("{WIDTH}x{HEIGHT}");
    let raw = ["-f", "rawvideo", "-pix_fmt", "rgb24", "-s", &video_size, "-i"];
    let graph = ["-lavfi", "[0:v][1:v]psnr;[0:v][1:v]ssim", "-f", "null", "-"];
    let cli = ffmpeg(&[&raw[..], &[&d], &raw[..], &[&r], &graph[..]].concat());
    let log = String::from_utf8_lossy(&cli.stderr);
    let (average, min) = (figure(&log, "PSNR r:", "average:"), figure(&log, "PSNR r:", "min:"));
    let all = figure(&log, "SSIM R:", "All:");

    let mut meter = QualityMeter::new(WIDTH, HEIGHT, Pixel::GBRP).unwrap();
    for (d, r) in distorted.iter().zip(&reference) {
        let frame = |rgb: &[u8]| planar_rgb_frame(&planes(rgb), HEIGHT, WIDTH);
        meter.push(&frame(d), &frame(r)).unwrap();
    }
    let quality = Quality::of(&meter.finish().unwrap()).unwrap();
    eprintln!("feedbench {quality:?}; ffmpeg CLI: average {average}, min {min}, All {all}");
    assert_eq!(quality.frames, 8);
    assert!(quality.psnr_db.is_finite() && quality.psnr_db < 50.0, "{quality:?}");
    assert!((quality.psnr_db - average).abs() < 0.01, "{quality:?} against average {average}");
    assert!((quality.worst_psnr_db - min).abs() < 0.01, "{quality:?} against min {min}");
    assert!((quality.ssim - all).abs() < 1e-4, "{quality:?} against All {all}");
}
