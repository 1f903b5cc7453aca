//! The loss column of a layout study: the diffusion policy's training step at learning rate 0,
//! its noise, timesteps and crop drawn from one seed before every step, run over the same
//! batches (the same samples, in the same order) read from the source and from each candidate.
//! Only the frames differ between the two, so the change of each step's loss is what the
//! candidate's frames do to training; a lossless candidate changes nothing, to the bit.
//!
//! A candidate at another resolution is scaled back to the source's size (bilinear) before the
//! step, so that one policy, built for the source's frames, steps both.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use tch::{Kind, Tensor};

use super::config::{LossSection, MeasureSection};
use super::result::LossFigure;
use crate::dataset::{DatasetError, EpisodeList, FrameMatch, Resolution};
use crate::loader::batch::{Batch, BatchData};
use crate::loader::pipeline::LoaderError;
use crate::loader::spec::LoaderSpec;
use crate::model::{
    DeviceChoice, DiffusionConfig, DiffusionPolicy, ModelError, PolicyShapes, Precision, TrainStep,
};

/// Why the loss could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum LossError {
    /// Reading the batches.
    #[error("{0}")]
    Loader(#[from] LoaderError),
    /// Opening a dataset.
    #[error("{0}")]
    Dataset(#[from] DatasetError),
    /// Building or stepping the policy.
    #[error("{0}")]
    Model(#[from] ModelError),
    /// The source gives no batch to step.
    #[error("{0}")]
    NoBatch(String),
}

/// The policy, the batches it steps and its loss on the source's: what every candidate's
/// batches are stepped against.
pub struct LossProbe {
    policy: DiffusionPolicy,
    /// The batches, as the source's frame indices.
    order: Vec<Vec<usize>>,
    /// Each source frame's index in a candidate (the selected episodes' frames renumbered).
    renumbered: HashMap<usize, usize>,
    /// The source's camera sizes `(height, width)`, by key.
    sizes: BTreeMap<String, (usize, usize)>,
    /// The loss of each step on the source's batches.
    source: Vec<f64>,
    /// The same with every camera frame mid-grey: the most its images move this policy's loss.
    blind: Vec<f64>,
    /// How a dataset is read: the measure's window and knobs.
    spec: LoaderSpec,
}

impl LossProbe {
    /// Builds the policy for the source at `dataset` (its `episodes`), records the first
    /// `loss.batches` batches its loader draws with the measure's knobs and seed, and steps
    /// them once.
    pub fn new(
        dataset: &Path,
        episodes: Option<EpisodeList>,
        measure: &MeasureSection,
        loss: &LossSection,
    ) -> Result<Self, LossError> {
        let knobs = measure.knobs.config();
        let spec = LoaderSpec {
            dataset: dataset.to_path_buf(),
            episodes,
            window: measure.window,
            frames: FrameMatch::default(),
            config: knobs.clone(),
            replay: None,
        };
        let loader = spec.build()?;
        let order: Vec<Vec<usize>> =
            loader.epoch_plan(0).iter().take(loss.batches(measure.window)).cloned().collect();
        if order.is_empty() {
            return Err(LossError::NoBatch(format!(
                "{}: no batch to step: {}",
                dataset.display(),
                loader.why_no_batch()
            )));
        }
        let source = loader.dataset();
        let shapes = PolicyShapes::from_info(dataset, source.info(), Resolution::Native)
            .map_err(ModelError::from)?;
        let sizes = shapes.cameras.iter().map(|c| (c.key.clone(), (c.height, c.width))).collect();
        let renumbered =
            source.episodes().flat_map(|e| e.from..e.to).enumerate().map(|(i, s)| (s, i)).collect();
        drop(loader);

        let device = DeviceChoice::Auto.resolve()?;
        let preset = DiffusionConfig::preset(loss.preset.on(device).name())?;
        let config = preset.with_keys(loss.policy.clone(), "loss.policy")?;
        tch::manual_seed(knobs.seed as i64);
        let config = DiffusionConfig { optimizer_lr: 0.0, ..config };
        let policy = DiffusionPolicy::new(&config, &shapes, device, Precision::F32)?
            .draw_on_host(knobs.seed as i64)?;
        let mut probe =
            Self { policy, order, renumbered, sizes, source: Vec::new(), blind: Vec::new(), spec };
        let replayed = probe.replaying(dataset, false);
        [probe.source, probe.blind] = probe.losses(replayed, [Frames::AsRead, Frames::Grey])?;
        Ok(probe)
    }

    /// The loss on the batches of the dataset at `root` (the source's samples, renumbered as
    /// a candidate holds them; the source itself with `renumber` false) against the source's.
    pub fn change(&mut self, root: &Path, renumber: bool) -> LossFigure {
        match self.losses(self.replaying(root, renumber), [Frames::AsRead]) {
            Ok([candidate]) => LossFigure::Measured {
                source: self.source.clone(),
                candidate,
                blind: self.blind.clone(),
            },
            Err(error) => LossFigure::Unmeasured(error.to_string()),
        }
    }

    /// How the recorded batches are read from the dataset at `root`: the source's samples, as
    /// a candidate numbers them where `renumber`d, else as the source does (its episodes).
    fn replaying(&self, root: &Path, renumber: bool) -> LoaderSpec {
        let order: Vec<Vec<usize>> = match renumber {
            true => (self.order.iter())
                .map(|batch| batch.iter().map(|i| self.renumbered[i]).collect())
                .collect(),
            false => self.order.clone(),
        };
        LoaderSpec {
            dataset: root.to_path_buf(),
            episodes: if renumber { None } else { self.spec.episodes.clone() },
            replay: Some(Arc::new(order)),
            ..self.spec.clone()
        }
    }

    /// Steps the policy on each batch `spec`'s loader replays, its cameras at the source's
    /// size, once for each of `views` (each batch read once); per view, the loss of each step.
    fn losses<const N: usize>(
        &mut self,
        spec: LoaderSpec,
        views: [Frames; N],
    ) -> Result<[Vec<f64>; N], LossError> {
        let loader = spec.build()?;
        let mut losses = std::array::from_fn(|_| Vec::with_capacity(self.order.len()));
        for batch in loader.epoch(0).take(self.order.len()) {
            let mut batch = batch?.into_batch();
            at_sizes(&mut batch, &self.sizes)?;
            for (view, losses) in views.iter().zip(&mut losses) {
                match view {
                    Frames::AsRead => self.policy.step(&batch)?,
                    Frames::Grey => {
                        let mut grey_batch = batch.clone();
                        grey(&mut grey_batch, &self.sizes);
                        self.policy.step(&grey_batch)?
                    }
                };
                losses.push(self.policy.last_loss().expect("a stepped policy has a loss"));
            }
        }
        Ok(losses)
    }
}

/// What the policy is shown of a batch's cameras.
#[derive(Debug, Clone, Copy)]
enum Frames {
    /// The frames as the loader read them.
    AsRead,
    /// Mid-grey, whatever they held.
    Grey,
}

/// Sets every value of `batch`'s cameras to mid-grey.
fn grey(batch: &mut Batch, sizes: &BTreeMap<String, (usize, usize)>) {
    for key in sizes.keys() {
        let Some(t) = batch.tensors.get_mut(key) else { continue };
        match &mut t.data {
            BatchData::U8(v) => v.fill(128),
            BatchData::F32(v) => v.fill(128.0 / 255.0),
            _ => {}
        }
    }
}

/// Scales `batch`'s cameras (`[B, S, C, h, w]`) whose size is not `sizes`' to it, bilinear,
/// keeping their element type.
fn at_sizes(batch: &mut Batch, sizes: &BTreeMap<String, (usize, usize)>) -> Result<(), ModelError> {
    for (key, &(height, width)) in sizes {
        let Some(t) = batch.tensors.get_mut(key) else { continue };
        let [b, s, c, h, w] = t.shape[..] else { continue };
        if (h, w) == (height, width) {
            continue;
        }
        let frames = [(b * s) as i64, c as i64, h as i64, w as i64];
        let values = match &t.data {
            BatchData::U8(v) => Tensor::from_slice(v).reshape(frames).to_kind(Kind::Float),
            BatchData::F32(v) => Tensor::from_slice(v).reshape(frames),
            _ => return Err(ModelError::Batch(format!("`{key}` holds no image values"))),
        };
        let scaled =
            values.f_upsample_bilinear2d([height as i64, width as i64], false, None, None)?;
        t.data = match &t.data {
            BatchData::U8(_) => {
                let bytes = scaled.round().clamp(0.0, 255.0).to_kind(Kind::Uint8).flatten(0, -1);
                BatchData::U8(Vec::<u8>::try_from(bytes)?)
            }
            _ => BatchData::F32(Vec::<f32>::try_from(scaled.flatten(0, -1))?),
        };
        t.shape = vec![b, s, c, height, width];
    }
    Ok(())
}
