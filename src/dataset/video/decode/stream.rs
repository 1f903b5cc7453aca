//! Frame-accurate random access: one single-threaded FFmpeg decoder per file, fed packets
//! built from the frame table and the bytes of the samples a frame needs, read as one range
//! (no demuxing, no FFmpeg seeking; one request per frame of a remote file).
//!
//! To reach a frame the decoder restarts at the keyframe before it and feeds packets forward
//! in decode order until the frame with the wanted presentation rank comes out; when it already
//! sits before the wanted frame (frames of one sample requested in time order), it goes on from
//! where it is. Packets carry their presentation rank as pts, so reordering decoders (H.264 and
//! HEVC with B-frames) hand back frames that are recognised by rank.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ffmpeg_next::codec::{self, threading};
use ffmpeg_next::util::error::EAGAIN;
use ffmpeg_next::{decoder, frame, Packet};

use crate::dataset::error::{DatasetError, Result};
use crate::dataset::files::PositionedFile;
use crate::dataset::video::table::{SampleSpan, VideoCodec, VideoFile};
use crate::timing::HelperThreads;

/// An open decoder of one file and where it stands in the file.
pub(super) struct StreamDecoder {
    pub(super) video: Arc<VideoFile>,
    decoder: decoder::Video,
    /// The bytes of the samples last read: those from a sample to the last the frame asked
    /// for needs, read at once.
    span: Option<SampleSpan>,
    /// The file with the ranges its frames need fetched ahead (a batch's, of a remote file);
    /// None: the file itself.
    pub(super) source: Option<PositionedFile>,
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
    pub(super) frame: frame::Video,
    /// Frames the codec has returned since it was opened.
    pub(super) decoded: u64,
    /// The codec's own threads (with more than one decoder thread).
    helpers: HelperThreads,
    /// Their CPU time when last read.
    helpers_seen: Duration,
}

impl StreamDecoder {
    /// Opens a decoder for the file's codec with `threads` threads (1: single-threaded):
    /// libdav1d for AV1 (FFmpeg 5.1's own `av1` decoder needs hardware), FFmpeg's decoders
    /// for H.264 and HEVC.
    pub(super) fn open(video: Arc<VideoFile>, threads: usize) -> Result<Self> {
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
            span: None,
            source: None,
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
    pub(super) fn helper_cpu_since_last(&mut self) -> Duration {
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
    pub(super) fn frame(&mut self, rank: u32) -> Result<&frame::Video> {
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
                        let source = self.source.as_ref().unwrap_or(self.video.file());
                        let bytes =
                            sample_bytes(&mut self.span, &self.video, source, self.next - 1, rank)?;
                        data.copy_from_slice(bytes);
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

/// The coded bytes of `video`'s sample at decode index `index`, on the way to the frame of rank
/// `rank`: from `span` (the samples last read) where it holds them, else read from `source` (the
/// file, or what was fetched of it ahead) into it with every sample after it up to the last the
/// frame needs, as one range.
fn sample_bytes<'a>(
    span: &'a mut Option<SampleSpan>,
    video: &VideoFile,
    source: &PositionedFile,
    index: usize,
    rank: u32,
) -> Result<&'a [u8]> {
    let sample = video.samples()[index];
    if span.as_ref().and_then(|span| span.sample(&sample)).is_none() {
        let end = video.complete_after(rank).max(index + 1);
        *span = Some(video.read_samples_from(source, index..end)?);
    }
    Ok(span.as_ref().and_then(|span| span.sample(&sample)).expect("the span read holds it"))
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

    #[test]
    fn one_thread_is_no_threading() {
        let one = decoder_threading(1);
        assert_eq!((one.kind, one.count), (threading::Type::None, 1));
        let four = decoder_threading(4);
        assert_eq!((four.kind, four.count), (threading::Type::Frame, 4));
    }
}
