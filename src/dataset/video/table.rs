//! The frame table of an mp4 file (or object), read once from its header: where each coded
//! frame lies in the file, when it is shown and which frames are keyframes. Decoders read the
//! packets a frame needs with one positioned read (one ranged GET of an object): no demuxing and
//! no FFmpeg seeking per request, and a file that shrinks under a running loader is an error
//! naming it, never a signal.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use re_mp4::{Mp4, StsdBoxContent, TrakBox};

use crate::dataset::files::{IndexKind, PositionedFile};

use crate::dataset::contract::Contract;
use crate::dataset::error::{DatasetError, Result};

/// The video codecs feedbench decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoCodec {
    /// AV1, decoded with libdav1d.
    Av1,
    /// H.264 / AVC, decoded with FFmpeg's own decoder.
    H264,
    /// H.265 / HEVC, decoded with FFmpeg's own decoder.
    Hevc,
}

named_values!(VideoCodec { Av1 => "av1", H264 => "h264", Hevc => "hevc" | "h265" });

impl VideoCodec {
    /// The codec FFmpeg (or info.json's `video.codec`) calls `name`, in any case.
    pub fn parse(name: &str) -> Option<Self> {
        name.to_ascii_lowercase().parse().ok()
    }
}

/// One coded frame (an mp4 sample), in decode order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mp4Sample {
    /// Byte offset of the sample in the file.
    pub offset: u64,
    /// Size of the sample in bytes.
    pub size: u32,
    /// Whether decoding can start at this sample (a sync sample of `stss`).
    pub keyframe: bool,
    /// Position of the sample in presentation order, counting the samples the edit list hides.
    pub rank: u32,
}

/// An open mp4 file (or object) with its video track's frame table. `Send + Sync`: one value is
/// shared by all workers through [`VideoFile::shared`] (positioned reads need no shared cursor).
#[derive(Debug)]
pub struct VideoFile {
    path: PathBuf,
    file: PositionedFile,
    codec: VideoCodec,
    extradata: Vec<u8>,
    width: u32,
    height: u32,
    /// The samples in decode order.
    samples: Vec<Mp4Sample>,
    /// Presentation rank → decode index.
    by_rank: Vec<u32>,
    /// Presentation rank → 1 + the largest decode index of the ranks up to it: once the
    /// samples before that index are sent, every frame up to the rank can be decoded.
    complete_after: Vec<u32>,
    /// Presentation times in seconds (as FFmpeg reports them) of the shown frames, ascending.
    times: Vec<f64>,
    /// Number of leading ranks the edit list hides (presentation time below zero).
    hidden: usize,
}

/// Files kept by [`VideoFile::shared`]; the least recently used goes beyond this.
const SHARED_CAPACITY: usize = 256;

impl VideoFile {
    /// Opens `path` (a file, or an object of a remote root) and reads the frame table of its
    /// first video track from its header boxes ([`super::boxes::header_boxes`]); frames are
    /// read later by position.
    pub fn open(path: &Path) -> Result<Self> {
        let file = PositionedFile::open_bare(path)?;
        let header = file.index(IndexKind::Mp4Header, super::boxes::header_boxes)?;
        let bytes: &[u8] = &header;
        let mp4 = std::panic::catch_unwind(|| Mp4::read_bytes(bytes))
            .map_err(|_| {
                DatasetError::invalid(path, "malformed mp4: its sample tables are inconsistent")
            })?
            .map_err(|e| {
                DatasetError::invalid(path, format!("not a complete mp4 file (truncated?): {e}"))
            })?;
        let (_, track) = mp4
            .tracks()
            .iter()
            .find(|(_, t)| t.trak(&mp4).mdia.hdlr.handler_type.value == *b"vide")
            .ok_or_else(|| DatasetError::invalid(path, "no video track in the mp4 file"))?;
        let trak = track.trak(&mp4);
        let (codec, extradata, (width, height)) = codec_config(path, trak)?;
        if !mp4.moofs.is_empty() {
            return Err(DatasetError::invalid(path, "fragmented mp4 files are not supported"));
        }
        let pts = presentation_times(path, trak, mp4.moov.mvhd.timescale, track.samples.len())?;
        let timescale = f64::from(trak.mdia.mdhd.timescale.max(1));

        let mut by_rank: Vec<u32> = (0..track.samples.len() as u32).collect();
        by_rank.sort_by_key(|&i| (pts[i as usize], i));
        let mut samples: Vec<Mp4Sample> = Vec::with_capacity(track.samples.len());
        for (i, s) in track.samples.iter().enumerate() {
            let end = s.offset.checked_add(s.size);
            if end.is_none_or(|end| end > file.len()) {
                return Err(DatasetError::invalid(
                    path,
                    format!(
                        "frame {i} lies at bytes {}..{} beyond the end of the file ({} bytes): truncated?",
                        s.offset,
                        s.offset.saturating_add(s.size),
                        file.len()
                    ),
                ));
            }
            let size = u32::try_from(s.size).map_err(|_| {
                DatasetError::invalid(path, format!("frame {i} is {} bytes", s.size))
            })?;
            samples.push(Mp4Sample { offset: s.offset, size, keyframe: s.is_sync, rank: 0 });
        }
        for (rank, &i) in by_rank.iter().enumerate() {
            samples[i as usize].rank = rank as u32;
        }
        let complete_after: Vec<u32> = by_rank
            .iter()
            .scan(0u32, |most, &i| {
                *most = (*most).max(i + 1);
                Some(*most)
            })
            .collect();
        let hidden = by_rank.iter().take_while(|&&i| pts[i as usize] < 0).count();
        let times: Vec<f64> =
            by_rank[hidden..].iter().map(|&i| pts[i as usize] as f64 / timescale).collect();
        if times.is_empty() {
            return Err(DatasetError::invalid(path, "the video track has no frames"));
        }
        if !samples.iter().any(|s| s.keyframe) {
            return Err(DatasetError::invalid(path, "the video track has no keyframe"));
        }
        Ok(Self {
            path: path.to_path_buf(),
            file,
            codec,
            extradata,
            width: u32::from(width),
            height: u32::from(height),
            samples,
            by_rank,
            complete_after,
            times,
            hidden,
        })
    }

    /// The process-wide shared value for `path`: the file is mapped and parsed once per process
    /// (a small cache keeps the most recently used files).
    pub fn shared(path: &Path) -> Result<Arc<Self>> {
        static FILES: OnceLock<Mutex<SharedFiles>> = OnceLock::new();
        let files = FILES.get_or_init(Default::default);
        if let Some(video) = files.lock().unwrap_or_else(|e| e.into_inner()).get(path) {
            return Ok(video);
        }
        let video = Arc::new(Self::open(path)?);
        Ok(files.lock().unwrap_or_else(|e| e.into_inner()).insert(video))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The codec of the video track.
    pub fn codec(&self) -> VideoCodec {
        self.codec
    }

    /// The codec configuration record (`av1C`, `avcC`, `hvcC` payload): FFmpeg's extradata.
    pub fn extradata(&self) -> &[u8] {
        &self.extradata
    }

    /// Coded frame size as the sample entry declares it, (width, height) in pixels.
    pub fn dimensions(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    /// Number of shown frames (those the edit list does not hide).
    pub fn frame_count(&self) -> usize {
        self.times.len()
    }

    /// Presentation times in seconds of the shown frames, ascending; index = frame number.
    pub fn frame_times(&self) -> &[f64] {
        &self.times
    }

    /// The samples in decode order.
    pub fn samples(&self) -> &[Mp4Sample] {
        &self.samples
    }

    /// The coded bytes of the samples at decode indices `samples` (at least one), read as one
    /// range from the first's offset to the last's end: one positioned read of a file, one
    /// ranged GET of an object. A file shorter now than its header says is an error naming it.
    pub fn read_samples(&self, samples: Range<usize>) -> Result<SampleSpan> {
        self.read_samples_from(&self.file, samples)
    }

    /// [`VideoFile::read_samples`] from `file`: this file, or this file with ranges fetched
    /// ahead ([`super::prefetch`]).
    pub fn read_samples_from(
        &self,
        file: &PositionedFile,
        samples: Range<usize>,
    ) -> Result<SampleSpan> {
        let range = self.byte_range(samples);
        Ok(SampleSpan { start: range.start, bytes: file.read_range(range)? })
    }

    /// The bytes of the samples at decode indices `samples` (at least one): from the first's
    /// offset to the last's end.
    pub fn byte_range(&self, samples: Range<usize>) -> Range<u64> {
        let samples = &self.samples[samples];
        let start = samples.iter().map(|s| s.offset).min().expect("at least one sample");
        let end = samples.iter().map(|s| s.offset + u64::from(s.size)).max().expect("one");
        start..end
    }

    /// The file (or object) it reads from.
    pub fn file(&self) -> &PositionedFile {
        &self.file
    }

    /// Presentation rank of shown frame `frame` (ranks also count hidden samples).
    pub fn rank_of_frame(&self, frame: usize) -> u32 {
        (self.hidden + frame) as u32
    }

    /// Shown frame number of presentation rank `rank`, `None` for a hidden sample.
    pub fn frame_of_rank(&self, rank: u32) -> Option<usize> {
        (rank as usize).checked_sub(self.hidden)
    }

    /// How many samples, in decode order, must be sent to a decoder before every frame up to
    /// presentation rank `rank` can be decoded (a reordering decoder may still hold them back
    /// until it is sent more or drained).
    pub fn complete_after(&self, rank: u32) -> usize {
        self.complete_after[rank as usize] as usize
    }

    /// Decode index at which decoding must start to reach rank `rank`: the last keyframe at or
    /// before the rank's sample in decode order that is not shown after it (so that leading
    /// pictures of an open GOP start one GOP earlier).
    pub fn decode_start(&self, rank: u32) -> usize {
        let target = self.by_rank[rank as usize] as usize;
        (0..=target)
            .rev()
            .find(|&i| self.samples[i].keyframe && self.samples[i].rank <= rank)
            .unwrap_or(0)
    }

    /// The shown frame whose presentation time is nearest `time_s` (of two equally near, the
    /// even one); as LeRobot does, it must lie within `tolerance_s` as `contract` takes it,
    /// else the error names the file, the query and the nearest.
    pub fn nearest_frame(
        &self,
        time_s: f64,
        tolerance_s: f64,
        contract: Contract,
    ) -> Result<usize> {
        let times = &self.times;
        let after = times.partition_point(|&t| t < time_s);
        // Equally near two frames, the even one: LeRobot's decoder asks for frame
        // round(time × fps), Python's round taking a half to the even side.
        let frame = match (after.checked_sub(1), times.get(after)) {
            (Some(before), Some(&t)) if (t - time_s) < (time_s - times[before]) => after,
            (Some(before), Some(&t)) if (t - time_s) == (time_s - times[before]) => {
                if after % 2 == 0 {
                    after
                } else {
                    before
                }
            }
            (Some(before), _) => before,
            (None, _) => 0,
        };
        let distance = (times[frame] - time_s).abs();
        if contract.admits(distance, tolerance_s) {
            Ok(frame)
        } else {
            Err(DatasetError::invalid(
                &self.path,
                format!(
                    "no frame {} {tolerance_s} s of query time {time_s} s: the nearest is \
                     frame {frame} at {} s (the video has {} frames, {} s to {} s)",
                    contract.within(),
                    times[frame],
                    times.len(),
                    times[0],
                    times[times.len() - 1]
                ),
            ))
        }
    }
}

/// The coded bytes of consecutive samples, read at once ([`VideoFile::read_samples`]).
#[derive(Debug, Clone)]
pub struct SampleSpan {
    /// The file offset of its first byte.
    start: u64,
    bytes: Bytes,
}

impl SampleSpan {
    /// The bytes of `sample` where the span holds them all.
    pub fn sample(&self, sample: &Mp4Sample) -> Option<&[u8]> {
        let from = usize::try_from(sample.offset.checked_sub(self.start)?).ok()?;
        self.bytes.get(from..from + sample.size as usize)
    }
}

/// The process-wide cache behind [`VideoFile::shared`].
#[derive(Default)]
struct SharedFiles {
    files: HashMap<PathBuf, (Arc<VideoFile>, u64)>,
    clock: u64,
}

impl SharedFiles {
    fn get(&mut self, path: &Path) -> Option<Arc<VideoFile>> {
        self.clock += 1;
        let clock = self.clock;
        self.files.get_mut(path).map(|(video, used)| {
            *used = clock;
            Arc::clone(video)
        })
    }

    fn insert(&mut self, video: Arc<VideoFile>) -> Arc<VideoFile> {
        if let Some(existing) = self.get(video.path()) {
            return existing;
        }
        if self.files.len() >= SHARED_CAPACITY {
            let oldest =
                self.files.iter().min_by_key(|(_, (_, used))| *used).map(|(p, _)| p.clone());
            if let Some(oldest) = oldest {
                self.files.remove(&oldest);
            }
        }
        self.clock += 1;
        self.files.insert(video.path().to_path_buf(), (Arc::clone(&video), self.clock));
        video
    }
}

/// The codec, its configuration record and the coded (width, height) from the track's sample
/// entry.
fn codec_config(path: &Path, trak: &TrakBox) -> Result<(VideoCodec, Vec<u8>, (u16, u16))> {
    match &trak.mdia.minf.stbl.stsd.contents {
        StsdBoxContent::Av01(b) => Ok((VideoCodec::Av1, b.av1c.raw.clone(), (b.width, b.height))),
        StsdBoxContent::Avc1(b) => Ok((VideoCodec::H264, b.avcc.raw.clone(), (b.width, b.height))),
        StsdBoxContent::Hvc1(b) | StsdBoxContent::Hev1(b) => {
            Ok((VideoCodec::Hevc, b.hvcc.raw.clone(), (b.width, b.height)))
        }
        other => {
            let name = match other {
                StsdBoxContent::Unknown(fourcc) => format!("{fourcc}"),
                StsdBoxContent::Vp08(_) => "vp08".into(),
                StsdBoxContent::Vp09(_) => "vp09".into(),
                _ => "a non-video sample entry".into(),
            };
            Err(DatasetError::invalid(
                path,
                format!("unsupported video codec {name:?}: feedbench decodes AV1, H.264 and HEVC"),
            ))
        }
    }
}

/// Presentation time of each sample (decode order) in media timescale units, as FFmpeg's mov
/// demuxer reports it: decode time (`stts`) + composition offset (`ctts`), shifted by the
/// edit list (the first non-empty edit's media time is time zero; leading empty edits delay).
fn presentation_times(
    path: &Path,
    trak: &TrakBox,
    movie_timescale: u32,
    count: usize,
) -> Result<Vec<i64>> {
    let stbl = &trak.mdia.minf.stbl;
    let mut pts = Vec::with_capacity(count);
    let mut dts: i64 = 0;
    for entry in &stbl.stts.entries {
        for _ in 0..entry.sample_count {
            pts.push(dts);
            dts += i64::from(entry.sample_delta);
        }
    }
    if pts.len() != count {
        return Err(DatasetError::invalid(
            path,
            format!("stts covers {} samples, the sample table holds {count}", pts.len()),
        ));
    }
    if let Some(ctts) = &stbl.ctts {
        let offsets = ctts
            .entries
            .iter()
            .flat_map(|e| std::iter::repeat_n(i64::from(e.sample_offset), e.sample_count as usize));
        for (t, offset) in pts.iter_mut().zip(offsets) {
            *t += offset;
        }
    }
    let edits = trak.edts.as_ref().and_then(|e| e.elst.as_ref()).map(|e| e.entries.as_slice());
    let mut shift: i64 = 0;
    for edit in edits.unwrap_or_default() {
        let empty = edit.media_time == u64::MAX || edit.media_time == u64::from(u32::MAX);
        if empty {
            let media_timescale = i64::from(trak.mdia.mdhd.timescale);
            shift +=
                edit.segment_duration as i64 * media_timescale / i64::from(movie_timescale.max(1));
        } else {
            shift -= edit.media_time as i64;
            break;
        }
    }
    for t in &mut pts {
        *t += shift;
    }
    Ok(pts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g1_table_matches_ffprobe_facts() {
        let Some(path) = crate::testdata::g1_video(1) else { return };
        let video = VideoFile::open(&path).unwrap();
        assert_eq!(video.codec(), VideoCodec::Av1);
        assert_eq!(video.dimensions(), (640, 480));
        assert_eq!(video.frame_count(), 393);
        for (i, &t) in video.frame_times().iter().enumerate() {
            assert!((t - i as f64 / 30.0).abs() < 1e-9, "frame {i} at {t}");
        }
        // GOP 2: keyframes on even frames; AV1 in mp4 has no reordering.
        for (i, s) in video.samples().iter().enumerate() {
            assert_eq!(s.keyframe, i % 2 == 0);
            assert_eq!(s.rank as usize, i);
        }
        assert_eq!(video.decode_start(5), 4);
        assert_eq!(video.decode_start(4), 4);
        // The first sample starts right after the mdat header (ffprobe: pos 48).
        assert_eq!(video.samples()[0].offset, 48);
    }

    #[test]
    fn nearest_frame_follows_lerobot_tolerance() {
        let Some(path) = crate::testdata::g1_video(1) else { return };
        let video = VideoFile::open(&path).unwrap();
        assert_eq!(video.nearest_frame(10.0 / 30.0, 1e-4, Contract::Released).unwrap(), 10);
        assert_eq!(video.nearest_frame(10.0 / 30.0 + 5e-5, 1e-4, Contract::Released).unwrap(), 10);
        assert_eq!(video.nearest_frame(10.0 / 30.0 - 5e-5, 1e-4, Contract::Released).unwrap(), 10);
        assert_eq!(video.nearest_frame(0.0, 1e-4, Contract::Released).unwrap(), 0);
        let err =
            video.nearest_frame(10.5 / 30.0, 1e-4, Contract::Released).unwrap_err().to_string();
        assert!(err.contains("episode_000001.mp4") && err.contains("nearest is frame"), "{err}");
        assert!(video.nearest_frame(-1.0, 1e-4, Contract::Released).is_err());
        assert!(video.nearest_frame(100.0, 1e-4, Contract::Released).is_err());
        assert_eq!(video.nearest_frame(10.5 / 30.0, 0.1, Contract::Released).unwrap(), 10);
    }

    #[test]
    fn shared_parses_once() {
        let Some(path) = crate::testdata::g1_video(2) else { return };
        let a = VideoFile::shared(&path).unwrap();
        let b = VideoFile::shared(&path).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }
}
