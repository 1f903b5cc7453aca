//! The diffusion policy's configuration: LeRobot's `DiffusionConfig` fields that shape the
//! training step, with the `pusht` and `small` presets.

use serde::{Deserialize, Serialize};

use super::error::ModelError;

/// Every knob of the diffusion policy's training step (names follow LeRobot's
/// `DiffusionConfig`). Build one from a preset and change fields as needed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffusionConfig {
    /// Observation steps fed to the policy (`n_obs_steps`).
    pub n_obs_steps: usize,
    /// Action steps predicted per sample (`horizon`).
    pub horizon: usize,
    /// `(H, W)` of the crop taken from each image before the backbone; `None`: no crop.
    pub crop_shape: Option<(usize, usize)>,
    /// Random crop in training (one offset per batch, as torchvision's `RandomCrop` on a
    /// batched tensor); `false`: centre crop.
    pub crop_is_random: bool,
    /// Keypoints of the spatial softmax.
    pub spatial_softmax_num_keypoints: usize,
    /// One encoder per camera instead of one shared encoder.
    pub use_separate_rgb_encoder_per_camera: bool,
    /// Channels of each UNet stage.
    pub down_dims: Vec<usize>,
    /// UNet convolution kernel size.
    pub kernel_size: usize,
    /// GroupNorm groups in the UNet blocks.
    pub n_groups: usize,
    /// Width of the diffusion-step embedding.
    pub diffusion_step_embed_dim: usize,
    /// FiLM modulates scale as well as bias.
    pub use_film_scale_modulation: bool,
    /// DDPM training timesteps.
    pub num_train_timesteps: usize,
    /// Beta schedule: `squaredcos_cap_v2`, `linear` or `scaled_linear`.
    pub beta_schedule: String,
    /// First beta of the linear schedules.
    pub beta_start: f64,
    /// Last beta of the linear schedules.
    pub beta_end: f64,
    /// What the UNet predicts: `epsilon` (the noise) or `sample` (the clean actions).
    pub prediction_type: String,
    /// Mask the loss where `action_is_pad` is set (LeRobot's default: off).
    pub do_mask_loss_for_padding: bool,
    /// `adamw` (decoupled weight decay) or `adam` (L2 weight decay, LeRobot's own preset for
    /// this policy); both cost the same.
    pub optimizer: String,
    /// Learning rate.
    pub optimizer_lr: f64,
    /// Betas.
    pub optimizer_betas: (f64, f64),
    /// Epsilon.
    pub optimizer_eps: f64,
    /// Weight decay.
    pub optimizer_weight_decay: f64,
    /// Gradients are clipped to this global L2 norm before the optimizer step (LeRobot's
    /// `grad_clip_norm`, 10).
    pub grad_clip_norm: f64,
}

impl DiffusionConfig {
    /// LeRobot's PushT recipe (lerobot ≤ 0.4 defaults): crop 84×84, down_dims 512/1024/2048.
    pub fn pusht() -> Self {
        DiffusionConfig {
            n_obs_steps: 2,
            horizon: 16,
            crop_shape: Some((84, 84)),
            crop_is_random: true,
            spatial_softmax_num_keypoints: 32,
            use_separate_rgb_encoder_per_camera: false,
            down_dims: vec![512, 1024, 2048],
            kernel_size: 5,
            n_groups: 8,
            diffusion_step_embed_dim: 128,
            use_film_scale_modulation: true,
            num_train_timesteps: 100,
            beta_schedule: "squaredcos_cap_v2".into(),
            beta_start: 1e-4,
            beta_end: 0.02,
            prediction_type: "epsilon".into(),
            do_mask_loss_for_padding: false,
            optimizer: "adamw".into(),
            optimizer_lr: 1e-4,
            optimizer_betas: (0.95, 0.999),
            optimizer_eps: 1e-8,
            optimizer_weight_decay: 1e-6,
            grad_clip_norm: 10.0,
        }
    }

    /// The PushT graph with a narrow UNet (down_dims 64/128/256), for CPU demos and tests.
    pub fn small() -> Self {
        DiffusionConfig { down_dims: vec![64, 128, 256], ..Self::pusht() }
    }

    /// A preset by name: `pusht` or `small`.
    pub fn preset(name: &str) -> Result<Self, ModelError> {
        match name {
            "pusht" => Ok(Self::pusht()),
            "small" => Ok(Self::small()),
            other => Err(ModelError::Config(format!(
                "unknown preset `{other}` (expected `pusht` or `small`)"
            ))),
        }
    }

    /// This configuration with the keys of the TOML file at `path` laid over it, checked.
    pub fn with_overrides(&self, path: &std::path::Path) -> Result<Self, ModelError> {
        let bad = |what: String| ModelError::Config(format!("{}: {what}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let overrides: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        self.with_keys(overrides, &path.display().to_string())
    }

    /// This configuration with `overrides` (keys of this struct) laid over it, checked; `named`
    /// (the file or section they came from) begins an error.
    pub fn with_keys(&self, overrides: toml::Table, named: &str) -> Result<Self, ModelError> {
        let bad = |what: String| ModelError::Config(format!("{named}: {what}"));
        let mut merged = toml::Table::try_from(self).map_err(|e| bad(e.to_string()))?;
        merged.extend(overrides);
        let config: Self =
            merged.try_into().map_err(|e| bad(format!("not a diffusion config: {e}")))?;
        config.validate().map_err(|e| match e {
            ModelError::Config(what) => bad(what),
            other => other,
        })?;
        Ok(config)
    }

    /// Checks the fields against each other, as LeRobot's `__post_init__` does.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |msg: String| Err(ModelError::Config(msg));
        if self.down_dims.is_empty() {
            return bad("`down_dims` is empty".into());
        }
        let factor = 1usize << self.down_dims.len();
        if !self.horizon.is_multiple_of(factor) {
            return bad(format!(
                "`horizon` ({}) must be a multiple of the UNet's downsampling factor {factor} \
                 (2^len(down_dims))",
                self.horizon
            ));
        }
        if self.n_groups == 0 || self.down_dims.iter().any(|&d| d % self.n_groups != 0) {
            return bad(format!(
                "every down_dims entry must be a multiple of n_groups ({})",
                self.n_groups
            ));
        }
        if !self.down_dims[0].is_multiple_of(8) {
            // The UNet's final block uses LeRobot's default of 8 groups whatever `n_groups` is.
            return bad(format!("down_dims[0] ({}) must be a multiple of 8", self.down_dims[0]));
        }
        if self.n_obs_steps == 0 || self.spatial_softmax_num_keypoints == 0 {
            return bad("`n_obs_steps` and `spatial_softmax_num_keypoints` must be ≥ 1".into());
        }
        if self.diffusion_step_embed_dim < 4 || !self.diffusion_step_embed_dim.is_multiple_of(2) {
            return bad("`diffusion_step_embed_dim` must be even and ≥ 4".into());
        }
        if self.kernel_size.is_multiple_of(2) {
            return bad(format!("`kernel_size` ({}) must be odd", self.kernel_size));
        }
        if !matches!(self.prediction_type.as_str(), "epsilon" | "sample") {
            return bad(format!(
                "`prediction_type` must be `epsilon` or `sample`, got `{}`",
                self.prediction_type
            ));
        }
        if !matches!(self.optimizer.as_str(), "adamw" | "adam") {
            return bad(format!("`optimizer` must be `adamw` or `adam`, got `{}`", self.optimizer));
        }
        if self.num_train_timesteps == 0 {
            return bad("`num_train_timesteps` must be ≥ 1".into());
        }
        if let Some((h, w)) = self.crop_shape {
            if h == 0 || w == 0 {
                return bad(format!("`crop_shape` ({h}, {w}) must be positive"));
            }
        }
        Ok(())
    }
}
