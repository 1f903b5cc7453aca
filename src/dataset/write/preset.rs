//! Presets of generated datasets: the shapes of real LeRobot datasets (cameras, state and
//! action widths, rate, episodes), as TOML files in `datasets/`. The built-in ones are compiled
//! into the binary; a path to a TOML file of the same form works too.

use std::path::Path;

use serde::{Deserialize, Deserializer};

use super::encode::{EncodeSettings, PixFmt};
use super::scene::SplitMix64;
use crate::dataset::bytes::Bytes;
use crate::dataset::error::{DatasetError, Result};
use crate::dataset::video::VideoCodec;

/// The presets shipped in `datasets/`, by name.
const BUILTIN: [(&str, &str); 4] = [
    ("pusht", include_str!("../../../datasets/pusht.toml")),
    ("so101", include_str!("../../../datasets/so101.toml")),
    ("aloha", include_str!("../../../datasets/aloha.toml")),
    ("g1", include_str!("../../../datasets/g1.toml")),
];

/// A camera of a preset.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraPreset {
    /// The feature key (`observation.images.top`).
    pub key: String,
    /// Frame height in pixels (even).
    pub height: u32,
    /// Frame width in pixels (even).
    pub width: u32,
}

/// The shape of a dataset to generate.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// Its name (`pusht`).
    pub name: String,
    /// What real dataset it imitates.
    #[serde(default)]
    pub description: String,
    /// `robot_type` in info.json.
    pub robot_type: String,
    /// Frames per second.
    pub fps: u32,
    /// Episodes in the dataset.
    pub episodes: usize,
    /// Mean frames per episode.
    pub frames_per_episode: usize,
    /// Episode lengths vary uniformly by up to this many frames either side of the mean.
    #[serde(default)]
    pub frames_jitter: usize,
    /// Width of `observation.state`.
    pub state_dim: usize,
    /// Width of `action`.
    pub action_dim: usize,
    /// Names of the state components (default `motor_0`…); the action's too when the widths
    /// are equal.
    #[serde(default)]
    pub state_names: Vec<String>,
    /// Task strings; episode `e` does task `e % tasks.len()`.
    pub tasks: Vec<String>,
    /// The cameras (video features).
    #[serde(default)]
    pub cameras: Vec<CameraPreset>,
    /// Codec of the camera files (`av1`, `h264`, `hevc`).
    #[serde(default = "default_codec", deserialize_with = "codec")]
    pub codec: VideoCodec,
    /// Keyframe interval.
    #[serde(default = "default_gop")]
    pub gop: u32,
    /// Constant rate factor.
    #[serde(default = "default_crf")]
    pub crf: u32,
    /// The encoder's speed preset (default: [`EncodeSettings::default_speed`]).
    #[serde(default)]
    pub encoder_preset: Option<String>,
    /// Pixel format of the camera files (`yuv420p`, `yuv444p`).
    #[serde(default)]
    pub pix_fmt: PixFmt,
    /// Encode for cheaper decoding (SVT-AV1 fast-decode, x264/x265 `tune=fastdecode`).
    #[serde(default)]
    pub fast_decode: bool,
    /// Each episode of a v3.0 file encoded on its own, starting on a keyframe (LeRobot's way);
    /// false: a file's episodes as one stream, each starting wherever the GOP falls.
    #[serde(default = "episode_keyframes")]
    pub episode_keyframes: bool,
    /// B-frames at most between reference frames (h264, hevc); the encoder's default when
    /// left out.
    #[serde(default)]
    pub bframes: Option<u32>,
    /// The MP4 index at the front of each file.
    #[serde(default)]
    pub faststart: bool,
}

fn episode_keyframes() -> bool {
    true
}

fn default_codec() -> VideoCodec {
    VideoCodec::Av1
}

fn default_gop() -> u32 {
    2
}

fn default_crf() -> u32 {
    30
}

fn codec<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<VideoCodec, D::Error> {
    let name = String::deserialize(deserializer)?;
    VideoCodec::parse(&name).ok_or_else(|| {
        serde::de::Error::custom(format!("unknown codec {name:?} (expected av1, h264 or hevc)"))
    })
}

/// Changes to a preset asked for by `synth`'s flags or a sweep config's `[dataset]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PresetOverrides {
    /// Video codec.
    pub codec: Option<VideoCodec>,
    /// Keyframe interval.
    pub gop: Option<u32>,
    /// Encoder quality.
    pub crf: Option<u32>,
    /// Encoder speed preset.
    pub encoder_preset: Option<String>,
    /// Number of episodes.
    pub episodes: Option<usize>,
    /// Frames of every episode (no jitter).
    pub frames_per_episode: Option<usize>,
    /// Pixel format.
    pub pix_fmt: Option<PixFmt>,
    /// Encoder tuned for cheaper decoding.
    pub fast_decode: Option<bool>,
    /// Each episode on a keyframe of its own.
    pub episode_keyframes: Option<bool>,
    /// B-frames at most between reference frames.
    pub bframes: Option<u32>,
    /// The MP4 index at the front.
    pub faststart: Option<bool>,
}

impl Preset {
    /// The preset with `overrides` applied.
    pub fn with(mut self, overrides: &PresetOverrides) -> Self {
        let o = overrides;
        self.codec = o.codec.unwrap_or(self.codec);
        self.gop = o.gop.unwrap_or(self.gop);
        self.crf = o.crf.unwrap_or(self.crf);
        self.encoder_preset = o.encoder_preset.clone().or(self.encoder_preset);
        self.episodes = o.episodes.unwrap_or(self.episodes);
        self.pix_fmt = o.pix_fmt.unwrap_or(self.pix_fmt);
        self.fast_decode = o.fast_decode.unwrap_or(self.fast_decode);
        self.episode_keyframes = o.episode_keyframes.unwrap_or(self.episode_keyframes);
        self.bframes = o.bframes.or(self.bframes);
        self.faststart = o.faststart.unwrap_or(self.faststart);
        if let Some(frames) = o.frames_per_episode {
            (self.frames_per_episode, self.frames_jitter) = (frames, 0);
        }
        self
    }

    /// The names of the built-in presets.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(name, _)| *name).collect()
    }

    /// A built-in preset by name, or a TOML file when `name_or_path` names one (or ends in
    /// `.toml`). An unknown name is an error listing the built-in ones.
    pub fn load(name_or_path: &str) -> Result<Self> {
        let path = Path::new(name_or_path);
        if path.is_file() || name_or_path.ends_with(".toml") {
            let text = std::fs::read_to_string(path).map_err(|e| DatasetError::io(path, e))?;
            return Self::parse(&text, path);
        }
        let (name, text) =
            BUILTIN.iter().find(|(name, _)| *name == name_or_path).ok_or_else(|| {
                DatasetError::invalid(
                    path,
                    format!(
                        "unknown preset (available: {}; or a path to a .toml file)",
                        Self::builtin_names().join(", ")
                    ),
                )
            })?;
        Self::parse(text, &Path::new("datasets").join(format!("{name}.toml")))
    }

    /// Parses and checks the TOML text of a preset read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        let preset: Preset = toml::from_str(text)
            .map_err(|e| DatasetError::invalid(path, format!("not a valid preset: {e}")))?;
        preset.check(path)?;
        Ok(preset)
    }

    /// Checks the values; the error names `source` (the preset's file, or the dataset made
    /// of it) and says what is wrong.
    pub fn check(&self, source: &Path) -> Result<()> {
        /// Frames of a camera's size alive at once while it is written, about: the rendered
        /// frame, its converted copies and the encoders' lookahead (SVT-AV1 and x264 keep tens).
        const FRAMES_HELD: u64 = 32;
        let bad = |what: String| Err(DatasetError::invalid(source, what));
        if self.fps == 0 || self.episodes == 0 || self.frames_per_episode == 0 {
            return bad("fps, episodes and frames_per_episode must be at least 1".into());
        }
        if self.frames_jitter >= self.frames_per_episode {
            return bad(format!(
                "frames_jitter {} must be below frames_per_episode {}",
                self.frames_jitter, self.frames_per_episode
            ));
        }
        if self.tasks.is_empty() {
            return bad("expected at least one task".into());
        }
        if self.state_dim == 0 || self.action_dim == 0 {
            return bad("state_dim and action_dim must be at least 1".into());
        }
        if !self.state_names.is_empty() && self.state_names.len() != self.state_dim {
            return bad(format!(
                "{} state_names for state_dim {}",
                self.state_names.len(),
                self.state_dim
            ));
        }
        for (i, camera) in self.cameras.iter().enumerate() {
            if self.cameras[..i].iter().any(|c| c.key == camera.key) {
                return bad(format!(
                    "camera {} is named twice: each camera needs a key of its own (its \
                     feature and its video files are named by it)",
                    camera.key
                ));
            }
            if camera.height == 0
                || camera.width == 0
                || !camera.height.is_multiple_of(2)
                || !camera.width.is_multiple_of(2)
            {
                return bad(format!(
                    "camera {}: {}×{} (sizes must be even and non-zero for yuv420p)",
                    camera.key, camera.height, camera.width
                ));
            }
            // Checked before anything is allocated: an allocation that fails aborts.
            let needed = FRAMES_HELD * 3 * u64::from(camera.height) * u64::from(camera.width);
            if let Some(available) = crate::timing::available_memory_bytes() {
                if needed > available {
                    return bad(format!(
                        "camera {}: {}×{} needs about {:.1} to render and encode ({FRAMES_HELD} RGB \
                         frames: the frame, its copies and the encoder's lookahead); {:.1} of \
                         memory is available",
                        camera.key,
                        camera.height,
                        camera.width,
                        Bytes::of(needed).gb(),
                        Bytes::of(available).gb()
                    ));
                }
            }
        }
        if self.gop == 0 {
            return bad("gop must be at least 1".into());
        }
        if let Some(problem) = self.encode_settings().problem() {
            return Err(DatasetError::Encode { path: source.to_path_buf(), problem });
        }
        Ok(())
    }

    /// Frames of each episode: the mean, varied by up to the jitter, fixed by `seed`.
    pub fn episode_lengths(&self, seed: u64) -> Vec<usize> {
        let mut rng = SplitMix64::new(seed, 0x6c65_6e67_7468);
        let span = 2 * self.frames_jitter as u64 + 1;
        (0..self.episodes)
            .map(|_| {
                self.frames_per_episode - self.frames_jitter + (rng.next_u64() % span) as usize
            })
            .collect()
    }

    /// Names of the state components.
    pub fn state_names(&self) -> Vec<String> {
        if self.state_names.is_empty() {
            (0..self.state_dim).map(|d| format!("motor_{d}")).collect()
        } else {
            self.state_names.clone()
        }
    }

    /// Names of the action components: the state's when the widths are equal.
    pub fn action_names(&self) -> Vec<String> {
        if self.action_dim == self.state_dim {
            self.state_names()
        } else {
            (0..self.action_dim).map(|d| format!("motor_{d}")).collect()
        }
    }

    /// How its cameras are encoded.
    pub fn encode_settings(&self) -> EncodeSettings {
        EncodeSettings {
            codec: self.codec,
            gop: self.gop,
            crf: self.crf,
            speed: self.encoder_preset.clone(),
            pix_fmt: self.pix_fmt,
            fast_decode: self.fast_decode,
            episode_keyframes: self.episode_keyframes,
            bframes: self.bframes,
            faststart: self.faststart,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_presets_parse_with_their_real_shapes() {
        for name in Preset::builtin_names() {
            let preset = Preset::load(name).unwrap();
            assert_eq!(preset.name, name);
        }
        let pusht = Preset::load("pusht").unwrap();
        assert_eq!((pusht.fps, pusht.episodes, pusht.state_dim, pusht.action_dim), (10, 206, 2, 2));
        assert_eq!(
            pusht.cameras,
            [CameraPreset { key: "observation.image".into(), height: 96, width: 96 }]
        );
        let aloha = Preset::load("aloha").unwrap();
        assert_eq!((aloha.fps, aloha.cameras.len(), aloha.state_dim), (50, 4, 14));
        let g1 = Preset::load("g1").unwrap();
        assert_eq!((g1.fps, g1.cameras.len(), g1.state_dim, g1.state_names.len()), (30, 1, 26, 26));
        assert_eq!((g1.cameras[0].height, g1.cameras[0].width), (480, 640));
        let so101 = Preset::load("so101").unwrap();
        assert_eq!((so101.fps, so101.cameras.len(), so101.state_dim), (30, 2, 6));
        assert_eq!(so101.codec, VideoCodec::Av1);
        assert_eq!((so101.gop, so101.crf), (2, 30));
    }

    #[test]
    fn lengths_are_seeded_and_within_the_jitter() {
        let pusht = Preset::load("pusht").unwrap();
        let lengths = pusht.episode_lengths(3);
        assert_eq!(lengths, pusht.episode_lengths(3));
        assert_ne!(lengths, pusht.episode_lengths(4));
        let (lo, hi) = (
            pusht.frames_per_episode - pusht.frames_jitter,
            pusht.frames_per_episode + pusht.frames_jitter,
        );
        assert!(lengths.iter().all(|l| (lo..=hi).contains(l)));
    }

    #[test]
    fn unknown_names_list_the_presets_and_bad_files_are_named() {
        let err = Preset::load("pushtt").unwrap_err().to_string();
        assert!(err.contains("pushtt") && err.contains("pusht, so101, aloha, g1"), "{err}");
        let text =
            include_str!("../../../datasets/pusht.toml").replace("fps = 10", "fps = 10\nfsp = 3");
        let err = Preset::parse(&text, Path::new("my.toml")).unwrap_err().to_string();
        assert!(err.contains("my.toml") && err.contains("fsp"), "{err}");
        let text = include_str!("../../../datasets/pusht.toml").replace("width = 96", "width = 95");
        let err = Preset::parse(&text, Path::new("my.toml")).unwrap_err().to_string();
        assert!(err.contains("even"), "{err}");
        let pusht = include_str!("../../../datasets/pusht.toml");
        let camera = &pusht[pusht.find("[[cameras]]").unwrap()..];
        let camera = &camera[..camera.find("width = 96").unwrap() + "width = 96".len()];
        let text = format!("{pusht}\n{camera}\n");
        let err = Preset::parse(&text, Path::new("my.toml")).unwrap_err().to_string();
        assert!(err.contains("my.toml: camera observation.image is named twice"), "{err}");
    }
}
