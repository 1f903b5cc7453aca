//! A worker's video decoder: frames of files at given times, as RGB in a caller's buffer, each
//! stage timed. It keeps an open decoder per file (the `stream` submodule: frame-accurate
//! random access), most recently used first, and reads feedbench's raw frame files as they are.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::convert::{Converter, FrameBuffer};
use super::probe::init_ffmpeg;
use super::raw::{self, RawFrames};
use super::table::VideoFile;
use crate::dataset::contract::Contract;
use crate::dataset::error::{DatasetError, Result};
use crate::timing::{stage, thread_cpu_time, StageTotals, TimingTree};

mod stream;

use super::prefetch::Prefetched;
use crate::dataset::remote::Fetch;
use crate::dataset::FrameMatch;
use stream::StreamDecoder;

/// How a [`VideoDecoder`] matches query times and shapes its output.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeOptions {
    /// A query time must lie strictly within this distance (seconds) of a frame's presentation
    /// time; LeRobot's default is 1e-4.
    pub tolerance_s: f64,
    /// The LeRobot whose reading is followed: strictly within the tolerance, or within it.
    pub contract: Contract,
    /// Output size `(height, width)`, resized bilinearly; `None` keeps the native size.
    pub resolution: Option<(u32, u32)>,
    /// Open decoders (one per file) kept by one [`VideoDecoder`], least recently used dropped.
    pub cache_capacity: usize,
    /// Threads inside each codec: 1 decodes on the calling thread alone; more hand libdav1d
    /// (AV1) that many threads of its own, and libavcodec (H.264, HEVC) frame and slice
    /// threads. The pixels are the same either way.
    pub threads: usize,
    /// How a batch's frames are fetched from a remote file ([`super::prefetch`]).
    pub fetch: Fetch,
}

impl DecodeOptions {
    /// How a query time finds its frame: the tolerance, as the contract takes it.
    pub fn frame_match(&self) -> FrameMatch {
        FrameMatch { tolerance_s: self.tolerance_s, contract: self.contract }
    }
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            tolerance_s: 1e-4,
            contract: Contract::Released,
            resolution: None,
            cache_capacity: 4,
            threads: 1,
            fetch: Fetch::default(),
        }
    }
}

/// What samples, batches and the loader's workers need of a video decoder: frames of a file
/// at given times, as RGB in a caller's buffer, and the time that took. [`VideoDecoder`]
/// (FFmpeg on the CPU) is the one there is; another (a GPU decoder) can stand in for it
/// without changes to them.
pub trait FrameDecoder: Send {
    /// Camera frames resized to `(height, width)`; None at the files' native size.
    fn resolution(&self) -> Option<(u32, u32)>;

    /// The `(height, width)` of the frames it writes for `video`.
    fn output_size(&self, video: &VideoFile) -> (u32, u32);

    /// Decodes, for each of `times` (seconds), the frame of `file` nearest it (within the
    /// tolerance) into `out`: `times.len() × 3 × height × width` values, RGB, CHW, in the
    /// order of `times`.
    fn decode_into(&mut self, file: &Path, times: &[f64], out: FrameBuffer<'_>) -> Result<()>;

    /// Hands over the time spent since the last call: [`stage::DECODE`] (the codec; one call
    /// per frame it returned, so `cpu / calls` is the cost of a decoded frame and `calls`
    /// counts the frames decoded only to reach a wanted one) and [`stage::CONVERT`] (to RGB,
    /// one call per frame written), with [`stage::SPLIT`] inside it where a decoder times the
    /// split into planes on its own.
    fn take_timing(&mut self) -> TimingTree;

    /// Reads the frames of the files `prefetched` holds from what it fetched (a batch's, before
    /// they are decoded), until the next call; a decoder that reads no files ignores it.
    fn use_prefetched(&mut self, _prefetched: Arc<Prefetched>) {}
}

/// A per-worker video decoder: decodes the frames nearest given times of a file into a
/// caller's buffer. One per worker thread (it is `Send`, not `Sync`); the files themselves are
/// shared by all workers through [`VideoFile::shared`].
pub struct VideoDecoder {
    options: DecodeOptions,
    /// Open decoders, most recently used first.
    streams: Vec<StreamDecoder>,
    converter: Converter,
    /// [`stage::DECODE`] (calls: frames out of the codec, wanted or not) and [`stage::CONVERT`]
    /// (calls: frames written) since the last [`FrameDecoder::take_timing`].
    timing: TimingTree,
    /// Bytes of a raw frame on their way to float32.
    raw_scratch: Vec<u8>,
    /// What was fetched ahead of the frames being decoded (a batch's), where anything was.
    prefetched: Option<Arc<Prefetched>>,
}

impl VideoDecoder {
    /// A decoder with no open file yet.
    pub fn new(options: DecodeOptions) -> Self {
        init_ffmpeg();
        Self {
            options,
            streams: Vec::new(),
            converter: Converter::default(),
            timing: TimingTree::default(),
            raw_scratch: Vec::new(),
            prefetched: None,
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> &DecodeOptions {
        &self.options
    }
}

impl FrameDecoder for VideoDecoder {
    fn resolution(&self) -> Option<(u32, u32)> {
        self.options.resolution
    }

    /// Hands over the time spent since the last call: `decode` (the codec; one call per frame
    /// it returned, so `cpu / calls` is the cost of a decoded frame and `calls` counts the
    /// frames decoded only to reach a wanted one) and `convert` (to RGB, one call per frame
    /// written), its `split` into planes inside it.
    fn take_timing(&mut self) -> TimingTree {
        std::mem::take(&mut self.timing)
    }

    fn use_prefetched(&mut self, prefetched: Arc<Prefetched>) {
        self.prefetched = Some(prefetched);
    }

    /// The `(height, width)` of the frames it writes for `video`.
    fn output_size(&self, video: &VideoFile) -> (u32, u32) {
        let (width, height) = video.dimensions();
        self.options.resolution.unwrap_or((height, width))
    }

    /// Decodes, for each of `times` (seconds), the frame of `file` nearest it (within the
    /// tolerance) into `out`: `times.len() × 3 × height × width` values, RGB, CHW, in the
    /// order of `times`. Frames are decoded in time order whatever the order of `times`.
    fn decode_into(&mut self, file: &Path, times: &[f64], mut out: FrameBuffer<'_>) -> Result<()> {
        if raw::is_raw(file) {
            return self.read_raw(file, times, out);
        }
        let video = VideoFile::shared(file)?;
        let frames = times
            .iter()
            .map(|&t| video.nearest_frame(t, self.options.tolerance_s, self.options.contract))
            .collect::<Result<Vec<usize>>>()?;
        let size = self.output_size(&video);
        let values = 3 * size.0 as usize * size.1 as usize;
        if out.len() != times.len() * values {
            return Err(DatasetError::invalid(
                file,
                format!(
                    "output buffer holds {} values, {} frames of 3×{}×{} need {}",
                    out.len(),
                    times.len(),
                    size.0,
                    size.1,
                    times.len() * values
                ),
            ));
        }
        let mut order: Vec<usize> = (0..times.len()).collect();
        order.sort_by_key(|&i| frames[i]);
        let (capacity, threads) = (self.options.cache_capacity, self.options.threads);
        let stream = most_recent(&mut self.streams, capacity, threads, &video)?;
        stream.source = self.prefetched.as_ref().and_then(|p| p.file(file)).cloned();
        let mut previous: Option<usize> = None;
        for i in order {
            match previous {
                Some(p) if frames[p] == frames[i] => out.copy_frame(p, i, values),
                _ => {
                    let clock = (Instant::now(), thread_cpu_time(), stream.decoded);
                    let decoded = stream.frame(video.rank_of_frame(frames[i])).map(|_| ());
                    slow_down(clock.0.elapsed()).map_err(|e| DatasetError::invalid(file, e))?;
                    let frames_out = stream.decoded - clock.2;
                    let (wall, cpu) = since(clock.0, clock.1);
                    self.timing.add(stage::DECODE, StageTotals { calls: frames_out, wall, cpu });
                    // The codec's own threads' work is the decode's, and its parents', too.
                    self.timing.add_helper_cpu(stage::DECODE, stream.helper_cpu_since_last());
                    let clock = (Instant::now(), thread_cpu_time());
                    decoded?;
                    let rgb = self.converter.rgb(file, &stream.frame, size)?;
                    let mut frame = out.frame(i, values);
                    self.timing.time(stage::SPLIT, || frame.fill_from_rgb(rgb));
                    let (wall, cpu) = since(clock.0, clock.1);
                    self.timing.add(stage::CONVERT, StageTotals { calls: 1, wall, cpu });
                }
            }
            previous = Some(i);
        }
        Ok(())
    }
}

/// The test-only slowdown of every decode, as a share of its own time: from
/// `$FEEDBENCH_SLOW_DECODE_PCT` (percent; unset, none), with which the guard history's
/// calibration (scripts/guard-history-calibration.sh) injects a real, known drift. A value
/// that is no percentage is an error naming the variable.
fn slow_decode_share() -> std::result::Result<f64, String> {
    const VAR: &str = "FEEDBENCH_SLOW_DECODE_PCT";
    static SHARE: std::sync::OnceLock<std::result::Result<f64, String>> =
        std::sync::OnceLock::new();
    SHARE
        .get_or_init(|| {
            let Some(text) = std::env::var_os(VAR) else { return Ok(0.0) };
            let pct = text.to_str().and_then(|t| t.trim().parse::<f64>().ok());
            match pct.filter(|p| p.is_finite() && (0.0..=1000.0).contains(p)) {
                Some(pct) => Ok(pct / 100.0),
                None => Err(format!("${VAR} is {text:?}: expected a percentage from 0 to 1000")),
            }
        })
        .clone()
}

/// Spins this thread for the test-only slowdown's share of `decoded`, the time a decode took.
fn slow_down(decoded: Duration) -> std::result::Result<(), String> {
    let share = slow_decode_share()?;
    if share > 0.0 {
        let until = Instant::now() + decoded.mul_f64(share);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
    Ok(())
}

impl VideoDecoder {
    /// [`FrameDecoder::decode_into`] for a raw frame file: each frame read into its slot (no
    /// decoding; timed as `convert`, one call per frame written). Raw frames are read at the
    /// size they were stored at.
    fn read_raw(&mut self, file: &Path, times: &[f64], mut out: FrameBuffer<'_>) -> Result<()> {
        let frames = RawFrames::shared(file)?;
        let (width, height) = frames.dimensions();
        if let Some(size) = self.options.resolution.filter(|&size| size != (height, width)) {
            return Err(DatasetError::invalid(
                file,
                format!(
                    "raw frames are stored at {height}x{width} and read at that size, not {}x{} \
                     (store them at the size wanted)",
                    size.0, size.1
                ),
            ));
        }
        let values = frames.frame_bytes();
        if out.len() != times.len() * values {
            return Err(DatasetError::invalid(
                file,
                format!(
                    "output buffer holds {} values, {} frames need {}",
                    out.len(),
                    times.len(),
                    times.len() * values
                ),
            ));
        }
        let clock = (Instant::now(), thread_cpu_time());
        for (i, &time) in times.iter().enumerate() {
            let frame =
                frames.nearest_frame(time, self.options.tolerance_s, self.options.contract)?;
            match out.frame(i, values) {
                FrameBuffer::U8(slot) => frames.read_frame(frame, slot)?,
                FrameBuffer::F32(slot) => {
                    self.raw_scratch.resize(values, 0);
                    frames.read_frame(frame, &mut self.raw_scratch)?;
                    for (value, &byte) in slot.iter_mut().zip(&self.raw_scratch) {
                        *value = f32::from(byte) / 255.0;
                    }
                }
            }
        }
        let (wall, cpu) = since(clock.0, clock.1);
        let calls = times.len() as u64;
        self.timing.add(stage::CONVERT, StageTotals { calls, wall, cpu });
        Ok(())
    }
}

/// Wall and thread CPU time since `wall` and `cpu` were read.
fn since(wall: Instant, cpu: Duration) -> (Duration, Duration) {
    (wall.elapsed(), thread_cpu_time().saturating_sub(cpu))
}

/// The open decoder of `video` in `streams` (opened with `threads` if absent, the least
/// recently used one dropped beyond `capacity`), moved to the front: most recently used first.
fn most_recent<'a>(
    streams: &'a mut Vec<StreamDecoder>,
    capacity: usize,
    threads: usize,
    video: &Arc<VideoFile>,
) -> Result<&'a mut StreamDecoder> {
    if let Some(i) = streams.iter().position(|s| Arc::ptr_eq(&s.video, video)) {
        streams[..=i].rotate_right(1);
    } else {
        let stream = StreamDecoder::open(Arc::clone(video), threads)?;
        streams.truncate(capacity.max(1) - 1);
        streams.insert(0, stream);
    }
    Ok(&mut streams[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn decoders_move_to_workers_and_files_are_shared() {
        assert_send::<VideoDecoder>();
        assert_send_sync::<VideoFile>();
        assert_send_sync::<Arc<VideoFile>>();
    }

    #[test]
    fn default_options_are_lerobots() {
        let options = DecodeOptions::default();
        assert_eq!(options.tolerance_s, 1e-4);
        assert_eq!(options.resolution, None);
        assert_eq!(options.threads, 1);
    }
}
