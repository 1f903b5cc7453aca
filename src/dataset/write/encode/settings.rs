//! How camera frames are encoded, before anything is: the pixel format, the codec's encoder
//! and its settings (LeRobot's by default), what the encoder would refuse of them, and the
//! `info` block they give a camera.

use ffmpeg_next::format::Pixel;
use ffmpeg_next::Dictionary;
use serde_json::Value as Json;

use super::problem::{EncodeProblem, EncodeSetting};
use crate::dataset::meta::VideoInfo;
use crate::dataset::video::VideoCodec;

/// The pixel format frames are encoded in: chroma at half resolution both ways (LeRobot's) or
/// at full resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PixFmt {
    /// 4:2:0, LeRobot's default.
    #[default]
    Yuv420p,
    /// 4:4:4: no chroma subsampling (x264, x265; not libsvtav1).
    Yuv444p,
}

named_values!(PixFmt { Yuv420p => "yuv420p", Yuv444p => "yuv444p" });

impl PixFmt {
    /// FFmpeg's pixel format.
    pub fn pixel(self) -> Pixel {
        match self {
            Self::Yuv420p => Pixel::YUV420P,
            Self::Yuv444p => Pixel::YUV444P,
        }
    }
}

/// How camera frames are encoded. LeRobot's defaults: AV1 (libsvtav1), yuv420p, GOP 2, crf 30.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeSettings {
    /// The codec: AV1 with libsvtav1, H.264 with libx264, HEVC with libx265.
    pub codec: VideoCodec,
    /// Keyframe interval (`g`): a keyframe every `gop` frames.
    pub gop: u32,
    /// Constant rate factor (quality; lower is better and larger).
    pub crf: u32,
    /// The encoder's speed preset (`12` for libsvtav1, `veryfast` for x264…); None: the
    /// default of [`EncodeSettings::default_speed`].
    pub speed: Option<String>,
    /// The pixel format encoded.
    pub pix_fmt: PixFmt,
    /// Tune the encoder for cheaper decoding: SVT-AV1's `fast-decode=1`, x264's and x265's
    /// `tune=fastdecode`.
    pub fast_decode: bool,
    /// Each episode of a file encoded on its own, so that it starts on a keyframe (LeRobot's
    /// way, and what a stream copy needs to cut episodes); false: a file's episodes encoded as
    /// one stream, each starting wherever the GOP falls (a recorder that never restarts its
    /// encoder).
    pub episode_keyframes: bool,
    /// B-frames at most between reference frames (`bf`; 0: none, so frames are stored in the
    /// order they are shown); None: the encoder's default. H.264 and HEVC only: AV1 in MP4
    /// stores no reordered frames.
    pub bframes: Option<u32>,
    /// The MP4's index (`moov`) written before the frames (`movflags=+faststart`), so that a
    /// reader over a link has it in its first bytes; else after them, as FFmpeg writes it.
    pub faststart: bool,
}

impl EncodeSettings {
    /// LeRobot's settings for `codec`: GOP 2, crf 30, the default speed.
    pub fn lerobot(codec: VideoCodec) -> Self {
        Self {
            codec,
            gop: 2,
            crf: 30,
            speed: None,
            pix_fmt: PixFmt::Yuv420p,
            fast_decode: false,
            episode_keyframes: true,
            bframes: None,
            faststart: false,
        }
    }

    /// The FFmpeg encoder used for the codec.
    pub fn encoder_name(&self) -> &'static str {
        match self.codec {
            VideoCodec::Av1 => "libsvtav1",
            VideoCodec::H264 => "libx264",
            VideoCodec::Hevc => "libx265",
        }
    }

    /// The speed preset used when none is given: LeRobot's libsvtav1 preset 12; `veryfast`
    /// for x264 and x265 (generation runs on small machines).
    pub fn default_speed(codec: VideoCodec) -> &'static str {
        match codec {
            VideoCodec::Av1 => "12",
            VideoCodec::H264 | VideoCodec::Hevc => "veryfast",
        }
    }

    /// The speed preset in effect.
    pub fn speed(&self) -> &str {
        self.speed.as_deref().unwrap_or(Self::default_speed(self.codec))
    }

    /// What the encoder would refuse, before anything is encoded: a pixel format it does not
    /// encode, a GOP of 0, a crf beyond its scale (libsvtav1 0 to 63, x264/x265 0 to 51), a
    /// speed preset it does not know (libsvtav1 -2 to 13, x264/x265 `ultrafast` … `placebo`).
    pub fn problem(&self) -> Option<EncodeProblem> {
        const X26X_SPEEDS: [&str; 10] = [
            "ultrafast",
            "superfast",
            "veryfast",
            "faster",
            "fast",
            "medium",
            "slow",
            "slower",
            "veryslow",
            "placebo",
        ];
        let encoder = self.encoder_name();
        let problem = |setting, value: String, expected: String| {
            Some(EncodeProblem { setting, value, expected })
        };
        if self.codec == VideoCodec::Av1 && self.pix_fmt != PixFmt::Yuv420p {
            let expected = format!("{encoder} encodes yuv420p only");
            return problem(EncodeSetting::PixFmt, self.pix_fmt.to_string(), expected);
        }
        if let Some(bframes) = self.bframes.filter(|_| self.codec == VideoCodec::Av1) {
            let expected = format!(
                "{encoder} stores no reordered frames in MP4 (AV1 packs its hidden frames into \
                 the frame shown); bframes is for h264 and hevc"
            );
            return problem(EncodeSetting::Bframes, bframes.to_string(), expected);
        }
        if self.gop == 0 {
            let expected = "expected a keyframe interval ≥ 1".to_string();
            return problem(EncodeSetting::Gop, "0".into(), expected);
        }
        let max_crf = if self.codec == VideoCodec::Av1 { 63 } else { 51 };
        if self.crf > max_crf {
            let expected = format!("{encoder} takes 0 to {max_crf}");
            return problem(EncodeSetting::Crf, self.crf.to_string(), expected);
        }
        let speed = self.speed();
        let known = match self.codec {
            VideoCodec::Av1 => speed.parse::<i32>().is_ok_and(|n| (-2..=13).contains(&n)),
            VideoCodec::H264 | VideoCodec::Hevc => X26X_SPEEDS.contains(&speed),
        };
        (!known).then(|| {
            let expected = match self.codec {
                VideoCodec::Av1 => "a number from -2 (slowest) to 13 (fastest)".to_string(),
                _ => X26X_SPEEDS.join(", "),
            };
            EncodeProblem {
                setting: EncodeSetting::Speed,
                value: format!("{speed:?}"),
                expected: format!("{encoder} takes {expected}"),
            }
        })
    }

    /// Why frames of `height × width` cannot be encoded with these settings: yuv420p needs even
    /// sizes, libsvtav1 at least 64×64.
    pub fn size_problem(&self, height: u32, width: u32) -> Option<String> {
        let odd = !width.is_multiple_of(2) || !height.is_multiple_of(2);
        if width == 0 || height == 0 || (odd && self.pix_fmt == PixFmt::Yuv420p) {
            return Some(format!(
                "cannot encode {width}×{height} frames: yuv420p needs even sizes"
            ));
        }
        if self.codec == VideoCodec::Av1 && (width < 64 || height < 64) {
            return Some(format!(
                "cannot encode {width}×{height} frames: libsvtav1 needs at least 64×64"
            ));
        }
        None
    }

    pub(super) fn options(&self) -> Dictionary<'static> {
        let mut options = Dictionary::new();
        options.set("g", &self.gop.to_string());
        options.set("crf", &self.crf.to_string());
        options.set("preset", self.speed());
        if self.codec == VideoCodec::Hevc {
            options.set("x265-params", "log-level=error");
        }
        if let Some(bframes) = self.bframes {
            options.set("bf", &bframes.to_string());
        }
        if self.fast_decode {
            match self.codec {
                VideoCodec::Av1 => options.set("svtav1-params", "fast-decode=1"),
                VideoCodec::H264 | VideoCodec::Hevc => options.set("tune", "fastdecode"),
            }
        }
        options
    }

    /// The `info` block of a camera encoded with these settings, as LeRobot writes it (the
    /// stream's size, codec, pixel format and rate, then the encoder's `video.g`, `video.crf`,
    /// `video.preset`).
    pub fn video_info(&self, height: u32, width: u32, fps: u32) -> VideoInfo {
        let pix_fmt = self.pix_fmt.name();
        let mut info = VideoInfo::of_stream(self.codec.name(), pix_fmt, height, width, fps);
        info.other.insert("video.g".into(), Json::from(self.gop));
        if self.fast_decode {
            info.other.insert("video.fast_decode".into(), Json::from(true));
        }
        if let Some(bframes) = self.bframes {
            info.other.insert("video.bf".into(), Json::from(bframes));
        }
        if self.faststart {
            info.other.insert("video.faststart".into(), Json::from(true));
        }
        info.other.insert("video.crf".into(), Json::from(self.crf));
        let speed = self.speed();
        let speed = speed.parse::<i64>().map_or_else(|_| Json::from(speed), Json::from);
        info.other.insert("video.preset".into(), speed);
        info
    }
}
