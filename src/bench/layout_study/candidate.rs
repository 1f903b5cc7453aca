//! One candidate layout of the study: how it stores camera frames (video, PNG, raw), its
//! codec and encoding, its format version and where its files live; its name (what differs
//! from LeRobot's defaults), its label against the base, and the encoding and transcoding it
//! asks of the dataset writer.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::dataset::meta::CodebaseVersion;
use crate::dataset::remote::{is_url, ObjectUrl};
use crate::dataset::video::VideoCodec;
use crate::dataset::write::transcode::{FrameStorage, TranscodeOptions};
use crate::dataset::write::{EncodeSetting, EncodeSettings, PixFmt};
use crate::dataset::Resolution;

/// How a candidate stores camera frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// mp4 files.
    Video,
    /// PNG images in the parquet data files.
    Png,
    /// Raw uint8 frames (feedbench's own files): the zero-decode reference.
    Raw,
}

named_values!(Storage { Video => "video", Png => "png", Raw => "raw" });

/// Where a candidate's files live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// Under the study's output directory (its filesystem, usually a disk).
    Out,
    /// Under `/dev/shm` (memory).
    Shm,
    /// Under a URL, read from there as `URL/<name>`: written to the study's directory, then
    /// put in the bucket (`s3://`, `gs://`), or served by a web server whose root holds the
    /// study's `candidates/` (`https://`, `http://`). Every byte is then paid over the link.
    Url(String),
}

impl std::str::FromStr for Location {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "out" => Ok(Self::Out),
            "shm" => Ok(Self::Shm),
            url if is_url(Path::new(url)) => match ObjectUrl::of(Path::new(url)) {
                Ok(_) if url.starts_with("hf://") => Err(format!(
                    "{url}: the Hub takes no candidates; give a bucket or a web server"
                )),
                Ok(_) => Ok(Self::Url(url.trim_end_matches('/').to_string())),
                Err(e) => Err(e.to_string()),
            },
            other => Err(format!(
                "unknown location {other:?} (expected out, shm, or a URL: s3://BUCKET/PREFIX, \
                 gs://BUCKET/PREFIX, https://HOST/PATH)"
            )),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Out => "out",
            Self::Shm => "shm",
            Self::Url(url) => url,
        })
    }
}

serde_as_text!(Location);

/// One candidate layout: every setting, each a key of `[base]` and of `[axes]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Candidate {
    /// `video` or `png`.
    #[serde(default = "default_storage")]
    pub storage: Storage,
    /// `av1` (libsvtav1), `h264` (libx264), `hevc` (libx265).
    #[serde(default = "default_codec")]
    pub codec: VideoCodec,
    /// Keyframe interval, frames.
    #[serde(default = "default_gop")]
    pub gop: u32,
    /// Constant rate factor.
    #[serde(default = "default_crf")]
    pub crf: u32,
    /// The encoder's speed preset; the codec's default (LeRobot's 12 for libsvtav1) when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// `yuv420p` or `yuv444p`.
    #[serde(default)]
    pub pix_fmt: PixFmt,
    /// SVT-AV1's fast-decode, x264's and x265's `tune=fastdecode`.
    #[serde(default)]
    pub fast_decode: bool,
    /// `native` or `HxW`.
    #[serde(default)]
    pub resolution: Resolution,
    /// File layout: `v2.1` (a file per episode) or `v3.0` (episodes concatenated).
    #[serde(default = "default_version")]
    pub version: CodebaseVersion,
    /// v3.0: episodes per file; LeRobot's file sizes (100 MB data, 200 MB video) when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub episodes_per_file: Option<usize>,
    /// `out` (the output directory's filesystem) or `shm` (`/dev/shm`).
    #[serde(default = "default_location")]
    pub location: Location,
    /// B-frames at most between reference frames (0: frames stored in the order shown; h264
    /// and hevc); the encoder's default when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bframes: Option<u32>,
    /// The MP4 index at the front of each file (`movflags=+faststart`) instead of the end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub faststart: bool,
    /// v3.0: each episode encoded on its own so that it starts on a keyframe (LeRobot's way;
    /// cutting episodes by stream copy needs it); false: one stream per file, episodes
    /// starting wherever the GOP falls.
    #[serde(default = "default_episode_keyframes", skip_serializing_if = "Clone::clone")]
    pub episode_keyframes: bool,
}

fn default_episode_keyframes() -> bool {
    true
}

fn default_storage() -> Storage {
    Storage::Video
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
fn default_version() -> CodebaseVersion {
    CodebaseVersion::V21
}
fn default_location() -> Location {
    Location::Out
}

impl Default for Candidate {
    /// LeRobot's recording defaults: AV1, GOP 2, CRF 30, yuv420p, native size, v2.1 files.
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}

impl Candidate {
    /// The keys an axis may vary, in the order names list them.
    pub const KEYS: [&'static str; 14] = [
        "storage",
        "codec",
        "gop",
        "crf",
        "preset",
        "pix_fmt",
        "fast_decode",
        "bframes",
        "faststart",
        "resolution",
        "version",
        "episodes_per_file",
        "episode_keyframes",
        "location",
    ];

    /// The encoder settings of a video candidate.
    pub fn encode_settings(&self) -> EncodeSettings {
        EncodeSettings {
            codec: self.codec,
            gop: self.gop,
            crf: self.crf,
            speed: self.preset.clone(),
            pix_fmt: self.pix_fmt,
            fast_decode: self.fast_decode,
            episode_keyframes: self.episode_keyframes,
            bframes: self.bframes,
            faststart: self.faststart,
        }
    }

    /// What `transcode` writes for it.
    pub fn transcode_options(&self) -> TranscodeOptions {
        TranscodeOptions {
            version: self.version,
            storage: match self.storage {
                Storage::Video => FrameStorage::Video(self.encode_settings()),
                Storage::Png => FrameStorage::Png,
                Storage::Raw => FrameStorage::Raw,
            },
            resolution: match self.resolution {
                Resolution::Native => None,
                Resolution::Size { height, width } => Some((height, width)),
            },
            episodes_per_file: self.episodes_per_file,
        }
    }

    /// What is wrong with it, naming the key (`where_` says which table it came from).
    pub fn problem(&self) -> Option<String> {
        if let Resolution::Size { height, width } = self.resolution {
            if height == 0 || width == 0 {
                return Some(format!(
                    "resolution {}: expected a size of at least 1x1",
                    self.resolution
                ));
            }
            if self.storage == Storage::Video {
                if let Some(problem) = self.encode_settings().size_problem(height, width) {
                    return Some(format!("resolution {}: {problem}", self.resolution));
                }
            }
        }
        if self.episodes_per_file == Some(0) {
            return Some("episodes_per_file 0: expected at least 1".into());
        }
        if !self.episode_keyframes && self.version != CodebaseVersion::V30 {
            return Some(format!(
                "episode_keyframes false: a {} file holds one episode, which starts it on a \
                 keyframe; set version = \"v3.0\", where episodes share a file",
                self.version
            ));
        }
        if self.storage == Storage::Video {
            if let Some(p) = self.encode_settings().problem() {
                // Named by the candidate's keys (the speed preset is `preset` here).
                return Some(match p.setting {
                    EncodeSetting::Speed => format!("preset {}: {}", p.value, p.expected),
                    _ => p.to_string(),
                });
            }
        }
        None
    }

    /// A name that spells out every setting that matters for its storage, used as its
    /// directory under `candidates/` and its key in the results: `av1-gop2-crf30-native-v2.1`.
    pub fn name(&self) -> String {
        let mut name = match self.storage {
            Storage::Png => "png".to_string(),
            Storage::Raw => "raw".to_string(),
            Storage::Video => {
                let mut name = format!("{}-gop{}-crf{}", self.codec, self.gop, self.crf);
                if let Some(preset) = &self.preset {
                    name.push_str(&format!("-p{preset}"));
                }
                if self.pix_fmt != PixFmt::Yuv420p {
                    name.push_str(&format!("-{}", self.pix_fmt));
                }
                if self.fast_decode {
                    name.push_str("-fastdecode");
                }
                if let Some(bframes) = self.bframes {
                    name.push_str(&format!("-bf{bframes}"));
                }
                if self.faststart {
                    name.push_str("-faststart");
                }
                if !self.episode_keyframes {
                    name.push_str("-acrossgops");
                }
                name
            }
        };
        name.push_str(&format!("-{}-{}", self.resolution, self.version));
        if let Some(n) = self.episodes_per_file {
            name.push_str(&format!("-{n}perfile"));
        }
        match &self.location {
            Location::Out => {}
            Location::Shm => name.push_str("-shm"),
            Location::Url(url) => name.push_str(&format!("-url{}", short_hash(url.as_bytes()))),
        }
        name
    }

    /// The settings in which it differs from `base`, as `key=value` (`base` when none).
    pub fn label(&self, base: &Candidate) -> String {
        let (mine, theirs) = (as_table(self), as_table(base));
        let differences: Vec<String> = Self::KEYS
            .iter()
            .filter(|key| mine.get(**key) != theirs.get(**key))
            .map(|key| match mine.get(*key) {
                Some(toml::Value::String(s)) => format!("{key}={s}"),
                Some(value) => format!("{key}={value}"),
                None => format!("{key}=default"),
            })
            .collect();
        if differences.is_empty() {
            "base".into()
        } else {
            differences.join(" ")
        }
    }
}

/// The candidate as the TOML table `[base]` would write it: the axes vary its keys.
pub(super) fn as_table(candidate: &Candidate) -> toml::Table {
    toml::Table::try_from(candidate).expect("a candidate serialises")
}

/// Where a candidate's dataset is written: `DIR/candidates/<name>`, or for `/dev/shm` a
/// directory named after the study's directory and its whole path (two studies whose `--out`
/// share a name, `runs/a/study` and `runs/b/study`, shared their candidates there).
pub fn candidate_root(out: &Path, candidate: &Candidate) -> PathBuf {
    match candidate.location {
        Location::Out | Location::Url(_) => out.join("candidates").join(candidate.name()),
        Location::Shm => {
            use std::os::unix::ffi::OsStrExt;
            let whole = std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf());
            let name =
                whole.file_name().map_or("layout".into(), |n| n.to_string_lossy().into_owned());
            let study = format!("{name}-{}", short_hash(whole.as_os_str().as_bytes()));
            PathBuf::from("/dev/shm/feedbench-layout").join(study).join(candidate.name())
        }
    }
}

/// The first 4 bytes of `bytes`' SHA-256, hex: what tells apart two places of one name.
fn short_hash(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes).iter().take(4).map(|b| format!("{b:02x}")).collect()
}

/// Where a candidate is read from: `URL/<name>` for a URL location, else where it is written
/// ([`candidate_root`]).
pub fn read_root(out: &Path, candidate: &Candidate) -> PathBuf {
    match &candidate.location {
        Location::Url(url) => PathBuf::from(format!("{url}/{}", candidate.name())),
        _ => candidate_root(out, candidate),
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_spell_out_what_differs_from_lerobots_defaults() {
        let candidate = Candidate {
            codec: VideoCodec::H264,
            pix_fmt: PixFmt::Yuv444p,
            fast_decode: true,
            preset: Some("slow".into()),
            resolution: Resolution::Size { height: 96, width: 128 },
            version: CodebaseVersion::V30,
            episodes_per_file: Some(4),
            location: Location::Shm,
            ..Candidate::default()
        };
        assert_eq!(
            candidate.name(),
            "h264-gop2-crf30-pslow-yuv444p-fastdecode-96x128-v3.0-4perfile-shm"
        );
        let long = Candidate {
            codec: VideoCodec::H264,
            gop: 30,
            bframes: Some(0),
            faststart: true,
            episode_keyframes: false,
            version: CodebaseVersion::V30,
            ..Candidate::default()
        };
        assert_eq!(long.name(), "h264-gop30-crf30-bf0-faststart-acrossgops-native-v3.0");
        assert_eq!(
            long.label(&Candidate::default()),
            "codec=h264 gop=30 bframes=0 faststart=true version=v3.0 episode_keyframes=false"
        );
        let bucket =
            Candidate { location: "s3://bucket/studies/".parse().unwrap(), ..Candidate::default() };
        assert_eq!(bucket.location.to_string(), "s3://bucket/studies", "without its last slash");
        assert!(bucket.name().starts_with("av1-gop2-crf30-native-v2.1-url"), "{}", bucket.name());
        let out = Path::new("/runs/study");
        assert_eq!(
            read_root(out, &bucket),
            Path::new(&format!("s3://bucket/studies/{}", bucket.name()))
        );
        assert_eq!(candidate_root(out, &bucket), out.join("candidates").join(bucket.name()));
        let png = Candidate { storage: Storage::Png, ..Candidate::default() };
        assert_eq!(png.name(), "png-native-v2.1");
    }

    #[test]
    fn studies_of_one_name_in_two_places_keep_their_shm_candidates_apart() {
        let shm = Candidate { location: Location::Shm, ..Candidate::default() };
        let (a, b) = (Path::new("/runs/a/study"), Path::new("/runs/b/study"));
        assert_ne!(candidate_root(a, &shm), candidate_root(b, &shm));
        assert_eq!(candidate_root(a, &shm), candidate_root(a, &shm), "a resumed study finds them");
        assert!(candidate_root(a, &shm).starts_with("/dev/shm/feedbench-layout"));
        let out = Candidate::default();
        assert_eq!(
            candidate_root(a, &out),
            Path::new("/runs/a/study/candidates/").join(out.name())
        );
    }
}
