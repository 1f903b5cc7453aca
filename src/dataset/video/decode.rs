//! Frame-accurate random access: one single-threaded FFmpeg decoder per file, fed packets
//! built from the mapped bytes and the frame table (no demuxing, no FFmpeg seeking).
//!
//! To reach a frame the decoder restarts at the keyframe before it and feeds packets forward
//! in decode order until the frame with the wanted presentation rank comes out; when it already
//! sits before the wanted frame (frames of one sample requested in time order), it goes on from
//! where it is. Packets carry their presentation rank as pts, so reordering decoders (H.264 and
//! HEVC with B-frames) hand back frames that are recognised by rank.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ffmpeg_next::codec::{self, threading};
use ffmpeg_next::util::error::EAGAIN;
use ffmpeg_next::{decoder, frame, Packet};

use super::convert::{Converter, FrameBuffer};
use super::probe::init_ffmpeg;
use super::raw::{self, RawFrames};
use super::table::{VideoCodec, VideoFile};
use crate::dataset::{DatasetError, Result};
use crate::timing::{stage, thread_cpu_time, HelperThreads, StageTotals, TimingTree};

/// How a [`VideoDecoder`] matches query times and shapes its output.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeOptions {
    /// A query time must lie strictly within this distance (seconds) of a frame's presentation
    /// time; LeRobot's default is 1e-4.
    pub tolerance_s: f64,
    /// Output size `(height, width)`, resized bilinearly; `None` keeps the native size.
    pub resolution: Option<(u32, u32)>,
    /// Open decoders (one per file) kept by one [`VideoDecoder`], least recently used dropped.
    pub cache_capacity: usize,
    /// Threads inside each codec: 1 decodes on the calling thread alone; more hand libdav1d
    /// (AV1) that many threads of its own, and libavcodec (H.264, HEVC) frame and slice
    /// threads. The pixels are the same either way.
    pub threads: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self { tolerance_s: 1e-4, resolution: None, cache_capacity: 4, threads: 1 }
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
            .map(|&t| video.nearest_frame(t, self.options.tolerance_s))
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
        let mut previous: Option<usize> = None;
        for i in order {
            match previous {
                Some(p) if frames[p] == frames[i] => out.copy_frame(p, i, values),
                _ => {
                    let clock = (Instant::now(), thread_cpu_time(), stream.decoded);
                    let decoded = stream.frame(video.rank_of_frame(frames[i])).map(|_| ());
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
            let frame = frames.nearest_frame(time, self.options.tolerance_s)?;
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

/// An open decoder of one file and where it stands in the file.
struct StreamDecoder {
    video: Arc<VideoFile>,
    decoder: decoder::Video,
    /// Decode index of the next sample to send.
    next: usize,
    /// Rank of the last frame received since the last restart.
    last: Option<u32>,
    /// Whether the end of stream was sent: the decoder hands out the frames it holds but must
    /// restart before it takes more packets.
    drained: bool,
    /// Whether the last request failed: the next one restarts.
    failed: bool,
    /// Rank of the keyframe decoding last restarted at: samples shown before it (its leading
    /// pictures) are not sent, as they need the GOP before it.
    restart_rank: u32,
    frame: frame::Video,
    /// Frames the codec has returned since it was opened.
    decoded: u64,
    /// The codec's own threads (with more than one decoder thread).
    helpers: HelperThreads,
    /// Their CPU time when last read.
    helpers_seen: Duration,
}

impl StreamDecoder {
    /// Opens a decoder for the file's codec with `threads` threads (1: single-threaded):
    /// libdav1d for AV1 (FFmpeg 5.1's own `av1` decoder needs hardware), FFmpeg's decoders
    /// for H.264 and HEVC.
    fn open(video: Arc<VideoFile>, threads: usize) -> Result<Self> {
        let path = video.path();
        let (codec, name) = match video.codec() {
            VideoCodec::Av1 => (decoder::find_by_name("libdav1d"), "libdav1d (AV1)"),
            VideoCodec::H264 => (decoder::find(codec::Id::H264), "h264"),
            VideoCodec::Hevc => (decoder::find(codec::Id::HEVC), "hevc"),
        };
        let codec = codec.ok_or_else(|| {
            DatasetError::invalid(path, format!("this FFmpeg build has no {name} decoder"))
        })?;
        let mut context = codec::Context::new_with_codec(codec);
        context.set_threading(decoder_threading(threads));
        if video.codec() == VideoCodec::H264 {
            // x264 makes its keyframes recovery points (non-IDR I-frames) unless GOPs are long.
            // Starting there, FFmpeg marks only the keyframe itself as recovered when frames
            // are reordered, and drops the frames after it unless told to output frames it
            // cannot vouch for; they are whole (the recovery point promises it, and leading
            // pictures, which are not, are never sent after a restart).
            context.set_flags(codec::Flags::OUTPUT_CORRUPT);
        }
        set_extradata(path, &mut context, video.extradata())?;
        let open = || context.decoder().open_as(codec).and_then(|d| d.video());
        // libdav1d names its threads; libavcodec's inherit the worker's name.
        let (decoder, helpers) = match threads > 1 {
            true => HelperThreads::started_by("dav1d-worker", open),
            false => (open(), HelperThreads::default()),
        };
        let decoder = decoder.map_err(|e| {
            DatasetError::invalid(path, format!("cannot open the {name} decoder: {e}"))
        })?;
        Ok(Self {
            video,
            decoder,
            next: 0,
            last: None,
            drained: false,
            failed: false,
            restart_rank: 0,
            frame: frame::Video::empty(),
            decoded: 0,
            helpers,
            helpers_seen: Duration::ZERO,
        })
    }

    /// The CPU time the codec's own threads used since the last call (none without them).
    fn helper_cpu_since_last(&mut self) -> Duration {
        if self.helpers.is_empty() {
            return Duration::ZERO;
        }
        let now = self.helpers.cpu();
        let used = now.saturating_sub(self.helpers_seen);
        self.helpers_seen = now;
        used
    }

    /// Decodes the frame of presentation rank `rank`. After an error the next request
    /// restarts at a keyframe. The frame last decoded is handed out again without decoding
    /// (overlapping windows read in order, such as the sequential sampler's diffusion pairs,
    /// decode each frame once).
    fn frame(&mut self, rank: u32) -> Result<&frame::Video> {
        // `frame` still holds the last frame received: nothing was received since `decode`
        // returned it (a receive that gets no frame empties it, and is always followed by one
        // that does before `decode` returns).
        if !self.failed && self.last == Some(rank) {
            return Ok(&self.frame);
        }
        self.seek(rank);
        if let Err(e) = self.decode(rank) {
            self.failed = true;
            return Err(e);
        }
        Ok(&self.frame)
    }

    /// Positions the decoder to reach `rank`: goes on from where it is when it has not passed
    /// the frame and is at or past the frame's keyframe, else restarts at that keyframe.
    fn seek(&mut self, rank: u32) {
        let start = self.video.decode_start(rank);
        let ahead = self.last.is_none_or(|last| last < rank);
        // A drained decoder still hands out the frames it holds, but takes no more packets.
        let stuck = self.drained && self.next < self.video.complete_after(rank);
        if self.failed || stuck || !ahead || self.next < start || rank < self.restart_rank {
            self.decoder.flush();
            self.failed = false;
            self.next = start;
            self.last = None;
            self.drained = false;
            self.restart_rank = self.video.samples()[start].rank;
        }
    }

    /// Feeds packets in decode order until the frame of rank `rank` comes out (in `frame`).
    fn decode(&mut self, rank: u32) -> Result<()> {
        let path = self.video.path();
        let ffmpeg_error =
            |what: &str, e: ffmpeg_next::Error| DatasetError::invalid(path, format!("{what}: {e}"));
        loop {
            match self.decoder.receive_frame(&mut self.frame) {
                Ok(()) => {
                    self.decoded += 1;
                    let got = self.frame.pts().or(self.frame.timestamp()).ok_or_else(|| {
                        DatasetError::invalid(path, "the decoder returned a frame without pts")
                    })?;
                    let got = u32::try_from(got).map_err(|_| {
                        DatasetError::invalid(path, format!("the decoder returned pts {got}"))
                    })?;
                    self.last = Some(got);
                    if got == rank {
                        return Ok(());
                    }
                    if got > rank {
                        return Err(DatasetError::invalid(
                            path,
                            format!(
                                "the decoder skipped frame {} (corrupt data?)",
                                self.video.frame_of_rank(rank).unwrap_or_default()
                            ),
                        ));
                    }
                }
                Err(ffmpeg_next::Error::Other { errno: EAGAIN }) => {
                    let samples = self.video.samples();
                    if self.drained {
                        return Err(missing(path, &self.video, rank));
                    }
                    // Once every sample up to the frame was sent, a reordering decoder may
                    // still hold it until more frames arrive (x264 and x265 signal a reorder
                    // delay even in GOPs without B-frames). When the next sample starts a GOP,
                    // which this frame does not need, drain instead of decoding it: a later
                    // frame restarts at that keyframe anyway.
                    let complete = self.next >= self.video.complete_after(rank);
                    let gop_ends = samples.get(self.next).is_none_or(|s| s.keyframe);
                    if complete && gop_ends {
                        self.drained = true;
                        self.decoder.send_eof().map_err(|e| ffmpeg_error("cannot drain", e))?;
                        continue;
                    }
                    let sample = samples[self.next];
                    self.next += 1;
                    if sample.rank < self.restart_rank {
                        // A leading picture of the keyframe decoding restarted at: it
                        // references the GOP before, which was not decoded, and sending it
                        // can derail the decoder (H.264 keyframes that are recovery points,
                        // not IDR, lose the frames after them). Frames shown after the
                        // keyframe never need it (HEVC forbids it; H.264 recovery points
                        // promise it).
                        continue;
                    }
                    let mut packet = Packet::new(sample.size as usize);
                    if let Some(data) = packet.data_mut() {
                        self.video.read_sample(self.next - 1, data)?;
                    }
                    packet.set_pts(Some(i64::from(sample.rank)));
                    packet.set_dts(Some(self.next as i64 - 1));
                    if sample.keyframe {
                        packet.set_flags(ffmpeg_next::packet::Flags::KEY);
                    }
                    self.decoder.send_packet(&packet).map_err(|e| {
                        ffmpeg_error(&format!("cannot decode frame data {}", self.next - 1), e)
                    })?;
                }
                Err(ffmpeg_next::Error::Eof) => return Err(missing(path, &self.video, rank)),
                Err(e) => return Err(ffmpeg_error("decoding failed", e)),
            }
        }
    }
}

/// FFmpeg's threading for a decoder of `threads` threads. libdav1d takes the count as its own
/// thread pool (frame, tile and post-filter work); libavcodec's H.264 and HEVC decoders split
/// frames (and slices, where a file has several) between them. Frame threads hold frames back
/// until more packets arrive; the decode loop drains at a GOP's end, so random access still
/// gets every frame.
fn decoder_threading(threads: usize) -> threading::Config {
    let kind = if threads > 1 { threading::Type::Frame } else { threading::Type::None };
    threading::Config { kind, count: threads.max(1), ..Default::default() }
}

/// The error for a frame the decoder never returned.
fn missing(path: &Path, video: &VideoFile, rank: u32) -> DatasetError {
    DatasetError::invalid(
        path,
        format!(
            "the decoder never returned frame {} (corrupt or truncated data?)",
            video.frame_of_rank(rank).unwrap_or_default()
        ),
    )
}

/// Gives the codec context its configuration record (`av1C`, `avcC`, `hvcC`), as the mp4
/// demuxer would.
fn set_extradata(path: &Path, context: &mut codec::Context, extradata: &[u8]) -> Result<()> {
    if extradata.is_empty() {
        return Ok(());
    }
    let padded = extradata.len() + ffmpeg_next::ffi::AV_INPUT_BUFFER_PADDING_SIZE as usize;
    // SAFETY: FFmpeg owns `extradata` and frees it with the context, so it must come from
    // `av_mallocz`; it is zero-padded as FFmpeg requires and not yet opened, so nothing else
    // reads the field while it is set.
    unsafe {
        let buffer = ffmpeg_next::ffi::av_mallocz(padded) as *mut u8;
        if buffer.is_null() {
            return Err(DatasetError::invalid(path, "out of memory for the codec configuration"));
        }
        std::ptr::copy_nonoverlapping(extradata.as_ptr(), buffer, extradata.len());
        let raw = context.as_mut_ptr();
        (*raw).extradata = buffer;
        (*raw).extradata_size = extradata.len() as i32;
    }
    Ok(())
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

    #[test]
    fn one_thread_is_no_threading() {
        let one = decoder_threading(1);
        assert_eq!((one.kind, one.count), (threading::Type::None, 1));
        let four = decoder_threading(4);
        assert_eq!((four.kind, four.count), (threading::Type::Frame, 4));
    }
}
