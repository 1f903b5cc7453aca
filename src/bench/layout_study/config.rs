//! `configs/layout.toml`: the base candidate, the axes varied around it (one at a time, or
//! their full product with `grid = true`), how each candidate is measured, and the floors the
//! recommendation keeps to. Every key is checked and a bad value is refused naming its key.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::super::sweep::config::ConfigError;
use super::candidate::{as_table, Candidate};
use crate::bench::sweep::knob_values::{KnobFront, KnobValues};
use crate::dataset::WindowChoice;
use crate::loader::knobs::LoaderKnob;
use crate::loader::sampler::SamplerKind;
use crate::model::{DiffusionConfig, DiffusionPreset};

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

/// The loss column: the diffusion policy stepped at learning rate 0, its random numbers drawn
/// from a fixed seed, over the same batches read from the source and from each candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossSection {
    /// Batches stepped from the source and from each candidate (0: no loss column); left out,
    /// 8 where the measure reads the diffusion window, none without it (the policy reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches: Option<usize>,
    /// The diffusion policy's preset (`auto`: `small` on the CPU, `pusht` on CUDA).
    #[serde(default)]
    pub preset: DiffusionPreset,
    /// Keys of LeRobot's `DiffusionConfig` laid over the preset (e.g. `crop_shape = [224, 224]`).
    #[serde(default)]
    pub policy: toml::Table,
}

impl Default for LossSection {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
}

impl LossSection {
    /// The batches stepped where the measure reads `window`.
    pub fn batches(&self, window: WindowChoice) -> usize {
        self.batches.unwrap_or(if window == WindowChoice::Diffusion { 8 } else { 0 })
    }
}

/// The floors and budget the recommendation keeps to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChooseSection {
    /// Lowest acceptable mean PSNR against the reference, dB.
    pub min_psnr: Option<f64>,
    /// Lowest acceptable mean SSIM.
    pub min_ssim: Option<f64>,
    /// Largest acceptable bytes per frame, as a ratio to the source's.
    pub max_bytes_ratio: Option<f64>,
    /// Largest acceptable mean change of the step's loss against the source's, a fraction of
    /// the loss (0.01: 1 %), where the loss column was measured.
    #[serde(default = "default_max_loss_change")]
    pub max_loss_change: f64,
}

fn default_max_loss_change() -> f64 {
    0.01
}

impl Default for ChooseSection {
    fn default() -> Self {
        toml::from_str("").expect("every key has a default")
    }
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
    /// Candidates besides the axes' (`[[candidate]]`), each the keys in which it differs from
    /// the base: combinations one axis at a time cannot make (H.264 at GOP 30 without B-frames).
    #[serde(default)]
    pub candidate: Vec<toml::Table>,
    /// How candidates are measured.
    #[serde(default)]
    pub measure: MeasureSection,
    /// The loss column.
    #[serde(default)]
    pub loss: LossSection,
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
        let change = c.max_loss_change;
        if !(change > 0.0 && change <= 1.0) {
            return Err(error(
                path,
                format!(
                    "choose.max_loss_change = {change}: expected a fraction of the loss above 0 \
                     and at most 1 (0.01 for 1 %)"
                ),
            ));
        }
        let asked = self.loss.batches.filter(|batches| *batches > 0);
        if let Some(batches) = asked.filter(|_| m.window != WindowChoice::Diffusion) {
            return Err(error(
                path,
                format!(
                    "loss.batches = {batches} steps the diffusion policy, which reads the \
                     diffusion window: set measure.window = \"diffusion\", or loss.batches = 0"
                ),
            ));
        }
        if self.loss.batches(m.window) > 0 {
            DiffusionConfig::small()
                .with_keys(self.loss.policy.clone(), "loss.policy")
                .map_err(|e| error(path, e.to_string()))?;
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
        for (n, extra) in self.candidate.iter().enumerate() {
            if let Some(key) = extra.keys().find(|k| !Candidate::KEYS.contains(&k.as_str())) {
                return Err(error(
                    path,
                    format!(
                        "candidate[{n}].{key}: unknown key; expected one of {}",
                        Candidate::KEYS.join(", ")
                    ),
                ));
            }
            let mut table = base.clone();
            table.extend(extra.clone());
            tables.push(table);
        }
        let from_axes = tables.len() - self.candidate.len();
        let mut candidates: Vec<Candidate> = Vec::new();
        for (n, table) in tables.into_iter().enumerate() {
            let differing = |t: &toml::Table| {
                if n >= from_axes {
                    return format!("candidate[{}]", n - from_axes);
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::layout_study::candidate::Storage;

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
        let extra = "[axes]\ngop = [30]\n[[candidate]]\ncodec = \"h264\"\ngop = 30\nbframes = 0\n";
        let names: Vec<String> = parse(extra).unwrap().iter().map(Candidate::name).collect();
        assert_eq!(
            names,
            [
                "av1-gop2-crf30-native-v2.1",
                "av1-gop30-crf30-native-v2.1",
                "h264-gop30-crf30-bf0-native-v2.1"
            ],
            "a [[candidate]] after the axes' candidates"
        );
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
            ("[choose]\nmax_loss_change = 0.0", "choose.max_loss_change = 0: expected"),
            ("[choose]\nmax_loss_change = 5", "choose.max_loss_change = 5: expected"),
            (
                "[measure]\nwindow = \"none\"\n[loss]\nbatches = 8",
                "set measure.window = \"diffusion\"",
            ),
            ("[loss.policy]\nhorizon = 15", "loss.policy: `horizon` (15) must be a multiple"),
            ("[loss.policy]\ncolour = 1", "loss.policy: not a diffusion config"),
            ("[loss]\npreset = \"huge\"", "auto, pusht, small"),
            (
                "[axes]\nlocation = [\"disk\"]",
                "unknown location \"disk\" (expected out, shm, or a URL",
            ),
            ("[axes]\nlocation = [\"ftp://host/x\"]", "unknown scheme ftp://"),
            ("[axes]\nlocation = [\"hf://datasets/a/b\"]", "the Hub takes no candidates"),
            ("[axes]\nbframes = [0]", "axes.bframes = 0: bframes 0: libsvtav1 stores no reordered"),
            ("[[candidate]]\ncodec = \"h264\"\nbitrate = 1", "candidate[0].bitrate: unknown key"),
            (
                "[[candidate]]\nepisode_keyframes = false",
                "candidate[0]: episode_keyframes false: a v2.1 file holds one episode",
            ),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
        let error = parse("[base]\ncolour = 1").unwrap_err();
        assert!(error.contains("colour"), "{error}");
    }

    #[test]
    fn the_shipped_configs_load() {
        let configs = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
        let g1 = configs.join("layout.toml");
        let candidates = LayoutConfig::load(&g1).unwrap().candidates(&g1).unwrap();
        let storages: Vec<Storage> = candidates.iter().map(|c| c.storage).collect();
        assert_eq!(candidates.len(), 17, "{candidates:?}");
        assert!(storages.contains(&Storage::Png) && storages.contains(&Storage::Raw));
        let pusht = configs.join("layout-pusht.toml");
        let config = LayoutConfig::load(&pusht).unwrap();
        assert_eq!(config.candidates(&pusht).unwrap()[0], Candidate::default());
    }
}
