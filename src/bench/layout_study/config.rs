//! `configs/layout.toml`: the base candidate, the axes varied around it (one at a time, or
//! their full product with `grid = true`), how each candidate is measured, and the floors the
//! recommendation keeps to. Every key is checked and a bad value is refused naming its key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::super::sweep::config::ConfigError;
use crate::bench::sweep::knob_values::{KnobFront, KnobValues};
use crate::dataset::meta::CodebaseVersion;
use crate::dataset::video::VideoCodec;
use crate::dataset::write::transcode::{FrameStorage, TranscodeOptions};
use crate::dataset::write::{EncodeSetting, EncodeSettings, PixFmt};
use crate::dataset::{Resolution, WindowChoice};
use crate::loader::knobs::LoaderKnob;
use crate::loader::sampler::SamplerKind;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// Under the study's output directory (its filesystem, usually a disk).
    Out,
    /// Under `/dev/shm` (memory).
    Shm,
}

named_values!(Location { Out => "out", Shm => "shm" });

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
    pub const KEYS: [&'static str; 11] = [
        "storage",
        "codec",
        "gop",
        "crf",
        "preset",
        "pix_fmt",
        "fast_decode",
        "resolution",
        "version",
        "episodes_per_file",
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
                name
            }
        };
        name.push_str(&format!("-{}-{}", self.resolution, self.version));
        if let Some(n) = self.episodes_per_file {
            name.push_str(&format!("-{n}perfile"));
        }
        if self.location == Location::Shm {
            name.push_str("-shm");
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

fn as_table(candidate: &Candidate) -> toml::Table {
    toml::Table::try_from(candidate).expect("a candidate serialises")
}

/// How each candidate is measured (unknown keys are refused by the knobs' reader).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureSection {
    /// The sample window the loader reads (`diffusion` or `none`).
    #[serde(default = "default_window")]
    pub window: WindowChoice,
    /// Batches per measured run.
    #[serde(default = "default_batches")]
    pub batches: usize,
    /// Runs of each loader figure (their median is reported, with its interval).
    #[serde(default = "default_repeats")]
    pub repeats: usize,
    /// Camera frames compared with the reference for PSNR and SSIM (drawn at random from the
    /// frames the window reads).
    #[serde(default = "default_quality_frames")]
    pub quality_frames: usize,
    /// The loader's knobs of the throughput figure, read through the loader's table (its
    /// `seed` also draws the frames compared); all but the resolution, which the candidates
    /// vary.
    #[serde(flatten)]
    pub knobs: KnobValues<MeasureKnobs>,
}

/// What the layout study's `[measure]` makes of the loader's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeasureKnobs;

impl KnobFront for MeasureKnobs {
    const SECTION: &'static str = "measure";
    const OWN_KEYS: &'static [&'static str] = &["window", "batches", "repeats", "quality_frames"];

    /// Two workers, batches of 16, shuffled (random access, as training reads).
    fn defaults(loader: KnobValues<Self>) -> KnobValues<Self> {
        loader
            .with(&LoaderKnob::WORKERS, [2])
            .with(&LoaderKnob::BATCH, [16])
            .with(&LoaderKnob::SAMPLER, [SamplerKind::Shuffled])
    }

    /// Every knob but the resolution, a candidate's.
    fn takes(knob: &LoaderKnob) -> bool {
        *knob != LoaderKnob::RESOLUTION
    }
}

fn default_window() -> WindowChoice {
    WindowChoice::Diffusion
}
fn default_batches() -> usize {
    20
}
fn default_repeats() -> usize {
    3
}
fn default_quality_frames() -> usize {
    100
}

impl Default for MeasureSection {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}

/// The floors and budget the recommendation keeps to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ChooseSection {
    /// Lowest acceptable mean PSNR against the reference, dB.
    pub min_psnr: Option<f64>,
    /// Lowest acceptable mean SSIM.
    pub min_ssim: Option<f64>,
    /// Largest acceptable bytes per frame, as a ratio to the source's.
    pub max_bytes_ratio: Option<f64>,
}

/// A layout study's config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutConfig {
    /// The candidate every axis varies around.
    #[serde(default)]
    pub base: Candidate,
    /// Per key, the values it takes besides the base's.
    #[serde(default)]
    pub axes: BTreeMap<String, Vec<toml::Value>>,
    /// Every combination of the axes instead of one axis at a time.
    #[serde(default)]
    pub grid: bool,
    /// How candidates are measured.
    #[serde(default)]
    pub measure: MeasureSection,
    /// What the recommendation keeps to.
    #[serde(default)]
    pub choose: ChooseSection,
}

impl LayoutConfig {
    /// Reads and checks the config at `path`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| error(path, e.to_string()))?;
        let config: Self = toml::from_str(&text).map_err(|e| error(path, e.to_string()))?;
        config.candidates(path)?;
        config.check(path)?;
        Ok(config)
    }

    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        let m = &self.measure;
        for (key, value) in [
            ("measure.batches", m.batches),
            ("measure.repeats", m.repeats),
            ("measure.quality_frames", m.quality_frames),
        ] {
            if value == 0 {
                return Err(error(path, format!("{key} = 0: expected at least 1")));
            }
        }
        let c = &self.choose;
        if let Some(psnr) = c.min_psnr.filter(|p| !p.is_finite() || *p < 0.0) {
            return Err(error(path, format!("choose.min_psnr = {psnr}: expected decibels ≥ 0")));
        }
        if let Some(ssim) = c.min_ssim.filter(|s| !(0.0..=1.0).contains(s)) {
            return Err(error(path, format!("choose.min_ssim = {ssim}: expected 0 to 1")));
        }
        if let Some(ratio) = c.max_bytes_ratio.filter(|r| !r.is_finite() || *r <= 0.0) {
            return Err(error(path, format!("choose.max_bytes_ratio = {ratio}: expected > 0")));
        }
        Ok(())
    }

    /// The candidates, base first, each once: one axis at a time around the base, or with
    /// `grid` every combination. A bad axis or value is refused naming `axes.<key>`.
    pub fn candidates(&self, path: &Path) -> Result<Vec<Candidate>, ConfigError> {
        if let Some(problem) = self.base.problem() {
            return Err(error(path, format!("[base]: {problem}")));
        }
        let base = as_table(&self.base);
        let mut tables = vec![base.clone()];
        for (key, values) in &self.axes {
            if !Candidate::KEYS.contains(&key.as_str()) {
                return Err(error(
                    path,
                    format!(
                        "axes.{key}: unknown axis; expected one of {}",
                        Candidate::KEYS.join(", ")
                    ),
                ));
            }
            if values.is_empty() {
                return Err(error(path, format!("axes.{key} is an empty list")));
            }
            let around: Vec<toml::Table> =
                if self.grid { tables.clone() } else { vec![base.clone()] };
            for value in values {
                for table in &around {
                    let mut table = table.clone();
                    table.insert(key.clone(), value.clone());
                    tables.push(table);
                }
            }
        }
        let mut candidates: Vec<Candidate> = Vec::new();
        for table in tables {
            let differing = |t: &toml::Table| {
                Candidate::KEYS
                    .iter()
                    .filter(|k| t.get(**k) != base.get(**k))
                    .map(|k| {
                        format!("axes.{k} = {}", t.get(*k).map_or("?".into(), |v| v.to_string()))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let candidate: Candidate = table.clone().try_into().map_err(|e: toml::de::Error| {
                error(path, format!("{}: {}", differing(&table), e.message()))
            })?;
            if let Some(problem) = candidate.problem() {
                return Err(error(path, format!("{}: {problem}", differing(&table))));
            }
            if !candidates.iter().any(|c| c.name() == candidate.name()) {
                candidates.push(candidate);
            }
        }
        Ok(candidates)
    }
}

fn error(path: &Path, what: String) -> ConfigError {
    ConfigError { path: path.to_path_buf(), what }
}

/// Where a candidate's dataset is written: `DIR/candidates/<name>`, or for `/dev/shm` a
/// directory named after the study's.
pub fn candidate_root(out: &Path, candidate: &Candidate) -> PathBuf {
    match candidate.location {
        Location::Out => out.join("candidates").join(candidate.name()),
        Location::Shm => {
            let study =
                out.file_name().map_or("layout".into(), |n| n.to_string_lossy().into_owned());
            PathBuf::from("/dev/shm/feedbench-layout").join(study).join(candidate.name())
        }
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

    fn parse(text: &str) -> Result<Vec<Candidate>, String> {
        let path = Path::new("layout.toml");
        let config: LayoutConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        config.check(path).map_err(|e| e.what.clone())?;
        config.candidates(path).map_err(|e| e.what)
    }

    #[test]
    fn axes_vary_one_at_a_time_around_the_base_or_as_a_grid() {
        let one = parse("[axes]\ngop = [2, 10]\ncodec = [\"h264\"]\n").unwrap();
        let names: Vec<String> = one.iter().map(Candidate::name).collect();
        assert_eq!(
            names,
            [
                "av1-gop2-crf30-native-v2.1",
                "h264-gop2-crf30-native-v2.1",
                "av1-gop10-crf30-native-v2.1"
            ],
            "the base first, once, then each value of each axis, axes by name"
        );
        assert_eq!(one[2].label(&one[0]), "gop=10");
        assert_eq!(one[0].label(&one[0]), "base");
        let grid = parse("grid = true\n[axes]\ngop = [10]\ncodec = [\"h264\"]\n").unwrap();
        let names: Vec<String> = grid.iter().map(Candidate::name).collect();
        assert_eq!(names.len(), 4, "{names:?}");
        assert!(names.contains(&"h264-gop10-crf30-native-v2.1".to_string()));
    }

    #[test]
    fn bad_axis_values_are_refused_naming_the_key() {
        for (text, expected) in [
            ("[axes]\ncodec = [\"vp9\"]", "axes.codec"),
            ("[axes]\ngop = [0]", "axes.gop = 0: gop 0"),
            ("[axes]\ncrf = [70]", "axes.crf = 70: crf 70"),
            ("grid = true\n[axes]\ncrf = [60]\ncodec = [\"h264\"]", "crf 60"),
            ("[axes]\nresolution = [\"0x0\"]", "axes.resolution"),
            ("[axes]\nresolution = [\"32x32\"]", "libsvtav1 needs at least 64×64"),
            ("[axes]\npix_fmt = [\"yuv444p\"]", "axes.pix_fmt"),
            ("[axes]\nbitrate = [1]", "axes.bitrate: unknown axis"),
            ("[axes]\ngop = []", "axes.gop is an empty list"),
            ("[base]\ngop = 0", "[base]: gop 0"),
            ("[measure]\nrepeats = 0", "measure.repeats = 0"),
            ("[measure]\nbatch = 0", "measure.batch 0: expected at least 1"),
            ("[measure]\nresolution = \"96x96\"", "unknown field `resolution`"),
            ("[choose]\nmin_ssim = 2.0", "choose.min_ssim"),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
        let error = parse("[base]\ncolour = 1").unwrap_err();
        assert!(error.contains("colour"), "{error}");
    }

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
        let png = Candidate { storage: Storage::Png, ..Candidate::default() };
        assert_eq!(png.name(), "png-native-v2.1");
    }

    #[test]
    fn the_shipped_configs_load() {
        let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
        let g1 = configs.join("layout.toml");
        let candidates = LayoutConfig::load(&g1).unwrap().candidates(&g1).unwrap();
        let storages: Vec<Storage> = candidates.iter().map(|c| c.storage).collect();
        assert_eq!(candidates.len(), 12, "{candidates:?}");
        assert!(storages.contains(&Storage::Png) && storages.contains(&Storage::Raw));
        let pusht = configs.join("layout-pusht.toml");
        let config = LayoutConfig::load(&pusht).unwrap();
        assert_eq!(config.candidates(&pusht).unwrap()[0], Candidate::default());
    }
}
