//! LeRobot's DiffusionPolicy training step (lerobot ≤ 0.4, `modeling_diffusion.py`) rebuilt on
//! libtorch: normalise, encode images, add DDPM noise to the action chunk, predict the noise
//! with the conditional UNet, MSE loss, backward, clip, AdamW.
//!
//! Normalisation uses fixed constants instead of dataset statistics (the cost is the same, the
//! values only need to be plausible): images mean-std with mean 0.5 and std 0.25 per channel,
//! state and action min-max with min 0 and max 1, mapped to [-1, 1].

use std::time::Instant;

use tch::nn::{self, OptimizerConfig};
use tch::{Device, Kind, Reduction, Tensor};

use super::autocast::Bf16Autocast;
use super::backend::BackendSettings;
use super::config::DiffusionConfig;
use super::error::ModelError;
use super::noise::DdpmSchedule;
use super::shapes::{PolicyShapes, ACTION_KEY, ACTION_PAD_KEY, STATE_KEY};
use super::step::{
    batch_tensor_on, sync, Components, Precision, StagedBatch, StepTimes, TrainStep,
};
use super::unet::ConditionalUnet1d;
use super::vision::RgbEncoder;
use crate::loader::batch::{Batch, BatchTensor};

/// Fixed image normalisation (mean-std).
const IMAGE_MEAN: f64 = 0.5;
const IMAGE_STD: f64 = 0.25;
/// Fixed state / action normalisation (min-max to [-1, 1]).
const VECTOR_MIN: f64 = 0.0;
const VECTOR_MAX: f64 = 1.0;
/// LeRobot's guard against a zero range or deviation.
const NORM_EPS: f64 = 1e-8;

/// The diffusion policy with its optimizer, ready to train on batches shaped like its
/// [`PolicyShapes`].
#[derive(Debug)]
pub struct DiffusionPolicy {
    cfg: DiffusionConfig,
    shapes: PolicyShapes,
    vs: nn::VarStore,
    /// One shared encoder, or one per camera.
    encoders: Vec<RgbEncoder>,
    unet: ConditionalUnet1d,
    schedule: DdpmSchedule,
    opt: nn::Optimizer,
    precision: Precision,
    /// Re-seed the CPU generator with this before each step, draw noise and timesteps from
    /// it and copy them to the device ([`DiffusionPolicy::draw_on_host`]).
    host_seed: Option<i64>,
    last_loss: Option<Tensor>,
}

impl DiffusionPolicy {
    /// Builds the policy for `shapes` on `device` (parameters initialised from libtorch's
    /// generator: call `tch::manual_seed` first for a reproducible model), with the backend
    /// settings lerobot-train makes ([`BackendSettings::as_lerobot_train`]).
    pub fn new(
        cfg: &DiffusionConfig,
        shapes: &PolicyShapes,
        device: Device,
        precision: Precision,
    ) -> Result<Self, ModelError> {
        cfg.validate()?;
        check_shapes(cfg, shapes)?;
        BackendSettings::as_lerobot_train();
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let cam = &shapes.cameras[0];
        let n_encoders =
            if cfg.use_separate_rgb_encoder_per_camera { shapes.cameras.len() } else { 1 };
        let encoders: Vec<RgbEncoder> = (0..n_encoders)
            .map(|i| {
                RgbEncoder::new(
                    &root / "rgb_encoder" / i,
                    cam.channels as i64,
                    (cam.height, cam.width),
                    cfg.crop_shape,
                    cfg.crop_is_random,
                    cfg.spatial_softmax_num_keypoints as i64,
                )
            })
            .collect();
        let per_step =
            shapes.state_dim as i64 + encoders[0].feature_dim() * shapes.cameras.len() as i64;
        let global_cond_dim = per_step * cfg.n_obs_steps as i64;
        let unet =
            ConditionalUnet1d::new(&root / "unet", cfg, shapes.action_dim as i64, global_cond_dim);
        let schedule = DdpmSchedule::new(
            &cfg.beta_schedule,
            cfg.num_train_timesteps,
            cfg.beta_start,
            cfg.beta_end,
            device,
        )?;
        let ((beta1, beta2), wd) = (cfg.optimizer_betas, cfg.optimizer_weight_decay);
        let (eps, lr) = (cfg.optimizer_eps, cfg.optimizer_lr);
        let opt = match cfg.optimizer.as_str() {
            "adam" => nn::Adam { eps, ..nn::adam(beta1, beta2, wd) }.build(&vs, lr)?,
            _ => nn::AdamW { eps, ..nn::adamw(beta1, beta2, wd) }.build(&vs, lr)?,
        };
        Ok(DiffusionPolicy {
            cfg: cfg.clone(),
            shapes: shapes.clone(),
            vs,
            encoders,
            unet,
            schedule,
            opt,
            precision,
            host_seed: None,
            last_loss: None,
        })
    }

    /// Takes every random number from the CPU generator from now on, as a CPU policy does,
    /// re-seeded with `seed` before each step: the parameters are replaced by those a CPU
    /// policy built after the same seed starts with, and each step draws the same noise,
    /// timesteps and crop on the CPU and copies them to the device. CUDA steps then compute
    /// what CPU steps do, to rounding, and the loss on a fixed batch falls as the policy
    /// learns it instead of moving with each step's noise. For checks, not timings: the
    /// copies wait on the host.
    pub fn draw_on_host(mut self, seed: i64) -> Result<Self, ModelError> {
        if self.vs.device() != Device::Cpu {
            let host = Self::new(&self.cfg, &self.shapes, Device::Cpu, self.precision)?;
            self.vs.copy(&host.vs)?;
        }
        self.host_seed = Some(seed);
        Ok(self)
    }

    /// The configuration the policy was built from.
    pub fn config(&self) -> &DiffusionConfig {
        &self.cfg
    }

    /// The input shapes the policy was built for.
    pub fn shapes(&self) -> &PolicyShapes {
        &self.shapes
    }

    /// Copies the keys the policy reads to the device (taken from `staged` where the batch was
    /// staged ahead), checking their shapes.
    fn upload(&self, batch: &Batch, staged: Option<&StagedBatch>) -> Result<Uploaded, ModelError> {
        if let Some(staged) = staged {
            staged.order_step_after_copy()?;
        }
        let b = batch.size;
        let (s, h) = (self.cfg.n_obs_steps, self.cfg.horizon);
        let device = self.vs.device();
        let images = self
            .shapes
            .cameras
            .iter()
            .map(|c| {
                let want = [b, s, c.channels, c.height, c.width];
                to_device(batch, staged, &c.key, &want, device)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let state = to_device(batch, staged, STATE_KEY, &[b, s, self.shapes.state_dim], device)?;
        let action = to_device(batch, staged, ACTION_KEY, &[b, h, self.shapes.action_dim], device)?;
        let action_is_pad = if self.cfg.do_mask_loss_for_padding {
            Some(to_device(batch, staged, ACTION_PAD_KEY, &[b, h], device)?)
        } else {
            None
        };
        Ok(Uploaded { images, state, action, action_is_pad })
    }

    /// `[B, S, C, H, W]` images of every camera, normalised → `[B, S, N·F]` features.
    fn encode_images(&self, images: &[Tensor]) -> Tensor {
        let size = images[0].size();
        let (b, s) = (size[0], size[1]);
        let chw = &size[2..];
        if self.encoders.len() == 1 {
            let n = images.len() as i64;
            let stacked = Tensor::stack(images, 2).reshape([&[-1], chw].concat());
            self.encoders[0].forward(&stacked, true).reshape([
                b,
                s,
                n * self.encoders[0].feature_dim(),
            ])
        } else {
            let feats: Vec<Tensor> = self
                .encoders
                .iter()
                .zip(images)
                .map(|(enc, img)| {
                    enc.forward(&img.reshape([&[-1], chw].concat()), true).reshape([b, s, -1])
                })
                .collect();
            Tensor::cat(&feats, -1)
        }
    }
}

/// The batch on the device, still raw (images uint8 or float in [0, 1]).
struct Uploaded {
    images: Vec<Tensor>,
    state: Tensor,
    action: Tensor,
    action_is_pad: Option<Tensor>,
}

/// Checks that the shapes fit the configuration (LeRobot's `validate_features`).
fn check_shapes(cfg: &DiffusionConfig, shapes: &PolicyShapes) -> Result<(), ModelError> {
    let bad = |m: String| Err(ModelError::Config(m));
    let Some(first) = shapes.cameras.first() else {
        return bad("the diffusion policy needs at least one camera".into());
    };
    if shapes.state_dim == 0 || shapes.action_dim == 0 {
        return bad("state and action dimensions must be ≥ 1".into());
    }
    for c in &shapes.cameras {
        if (c.channels, c.height, c.width) != (first.channels, first.height, first.width) {
            return bad(format!(
                "all cameras must have the same shape: `{}` is {}×{}×{}, `{}` is {}×{}×{}",
                c.key,
                c.channels,
                c.height,
                c.width,
                first.key,
                first.channels,
                first.height,
                first.width
            ));
        }
        if c.channels == 0 || c.height == 0 || c.width == 0 {
            return bad(format!("camera `{}` has an empty shape", c.key));
        }
    }
    if let Some((ch, cw)) = cfg.crop_shape {
        if ch > first.height || cw > first.width {
            return bad(format!(
                "crop {ch}×{cw} does not fit the {}×{} images",
                first.height, first.width
            ));
        }
    }
    Ok(())
}

/// `batch[key]` as a device tensor (taken from its copy in `staged`, where there is one), if
/// its shape is `want`.
fn to_device(
    batch: &Batch,
    staged: Option<&StagedBatch>,
    key: &str,
    want: &[usize],
    device: Device,
) -> Result<Tensor, ModelError> {
    let t: &BatchTensor =
        batch.tensors.get(key).ok_or_else(|| ModelError::Batch(format!("missing key `{key}`")))?;
    if t.shape != want {
        return Err(ModelError::Batch(format!(
            "`{key}` has shape {:?}, the model expects {want:?}",
            t.shape
        )));
    }
    // SAFETY: the tensor lives in the step's `Upload`, dropped before `step(&batch)` returns,
    // and is only read (normalisation makes new tensors; CUDA copies it).
    unsafe { batch_tensor_on(key, t, staged, device) }
}

/// Min-max normalisation to [-1, 1] with the fixed constants.
fn normalise_vector(x: &Tensor) -> Tensor {
    (x - VECTOR_MIN) / (VECTOR_MAX - VECTOR_MIN + NORM_EPS) * 2.0 - 1.0
}

/// uint8 or [0, 1] float images → float, mean-std normalised per channel.
fn normalise_image(x: &Tensor) -> Tensor {
    let x = if x.kind() == Kind::Uint8 {
        x.to_kind(Kind::Float) / 255.0
    } else {
        x.to_kind(Kind::Float)
    };
    let c = x.size()[2];
    let mean = Tensor::full([c, 1, 1], IMAGE_MEAN, (Kind::Float, x.device()));
    let std = Tensor::full([c, 1, 1], IMAGE_STD, (Kind::Float, x.device()));
    (x - mean) / (std + NORM_EPS)
}

impl TrainStep for DiffusionPolicy {
    fn step_with(
        &mut self,
        batch: &Batch,
        staged: Option<&StagedBatch>,
    ) -> Result<StepTimes, ModelError> {
        let device = self.vs.device();
        let mark = || {
            sync(device);
            Instant::now()
        };
        let t0 = mark();
        let input = self.upload(batch, staged)?;
        let t_h2d = mark();

        // Forward. The conditioning vector is cut from the graph at `cond_leaf` so that the
        // backward pass can be timed in two halves (UNet, then backbone); the gradients are
        // the same as one `loss.backward()`.
        if let Some(seed) = self.host_seed {
            tch::manual_seed(seed);
        }
        let autocast = (self.precision == Precision::Bf16).then(|| Bf16Autocast::enable(device));
        let images: Vec<Tensor> = input.images.iter().map(normalise_image).collect();
        let state = normalise_vector(&input.state);
        let action = normalise_vector(&input.action);
        let t_bb0 = mark();
        let features = self.encode_images(&images);
        let t_bb1 = mark();
        let global_cond = Tensor::cat(&[state, features], -1).flatten(1, -1);
        let cond_leaf = global_cond.detach().set_requires_grad(true);
        let (noise, timesteps) = if self.host_seed.is_some() {
            let noise = Tensor::randn(action.size(), (action.kind(), Device::Cpu));
            let timesteps = self.schedule.sample_timesteps(action.size()[0], Device::Cpu);
            (noise.to_device(device), timesteps.to_device(device))
        } else {
            (action.randn_like(), self.schedule.sample_timesteps(action.size()[0], device))
        };
        let noisy = self.schedule.add_noise(&action, &noise, &timesteps);
        let t_un0 = mark();
        let pred = self.unet.forward(&noisy, &timesteps, &cond_leaf);
        let t_un1 = mark();
        let target = if self.cfg.prediction_type == "sample" { &action } else { &noise };
        let loss = pred.mse_loss(target, Reduction::None);
        let loss = match &input.action_is_pad {
            Some(pad) => loss * pad.logical_not().unsqueeze(-1),
            None => loss,
        }
        .mean(Kind::Float);
        drop(autocast);
        let t_fwd = mark();

        // Backward: loss → UNet (and the conditioning leaf), then conditioning → backbone.
        loss.backward();
        let t_bw_unet = mark();
        let cond_grad = cond_leaf.grad();
        (&global_cond * &cond_grad).sum(Kind::Float).backward();
        let t_bwd = mark();

        // Optimizer: clip the global gradient norm (without a host round trip, as
        // `clip_grad_norm_`), step, zero the gradients.
        tch::no_grad(|| {
            let grads: Vec<Tensor> = self
                .vs
                .trainable_variables()
                .iter()
                .map(|v| v.grad())
                .filter(|g| g.defined())
                .collect();
            let norms: Vec<Tensor> = grads.iter().map(|g| g.norm()).collect();
            let total = Tensor::stack(&norms, 0).norm();
            let coef = (self.cfg.grad_clip_norm / (total + 1e-6)).clamp_max(1.0);
            for mut g in grads {
                let _ = g.g_mul_(&coef);
            }
        });
        self.opt.step();
        self.opt.zero_grad();
        let t_opt = mark();

        self.last_loss = Some(loss.detach());
        let d = |a: Instant, b: Instant| b.duration_since(a);
        Ok(StepTimes {
            h2d: d(t0, t_h2d),
            forward: d(t_h2d, t_fwd),
            backward: d(t_fwd, t_bwd),
            optimizer: d(t_bwd, t_opt),
            total: d(t0, t_opt),
            components: Some(Components {
                backbone_forward: d(t_bb0, t_bb1),
                backbone_backward: d(t_bw_unet, t_bwd),
                unet_forward: d(t_un0, t_un1),
                unet_backward: d(t_fwd, t_bw_unet),
            }),
        })
    }

    fn name(&self) -> String {
        format!("diffusion (down_dims {:?})", self.cfg.down_dims)
    }

    fn trainable_parameters(&self) -> usize {
        self.vs.trainable_variables().iter().map(|v| v.numel()).sum()
    }

    fn last_loss(&self) -> Option<f64> {
        self.last_loss.as_ref().map(|l| l.double_value(&[]))
    }

    fn device(&self) -> Device {
        self.vs.device()
    }
}
