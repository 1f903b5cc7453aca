//! The FiLM-conditioned 1-D UNet that denoises action trajectories (LeRobot's
//! `DiffusionConditionalUnet1d`).

use tch::nn;
use tch::{Kind, Tensor};

use super::config::DiffusionConfig;
use super::layers::{conv1d, conv_transpose1d, group_norm, linear};

/// Conv1d → GroupNorm → Mish.
#[derive(Debug)]
struct Conv1dBlock {
    conv: nn::Conv1D,
    norm: nn::GroupNorm,
}

impl Conv1dBlock {
    fn new(vs: nn::Path, c_in: i64, c_out: i64, k: i64, groups: i64) -> Self {
        let block = &vs / "block";
        Conv1dBlock {
            conv: conv1d(&block / "0", c_in, c_out, k, 1, k / 2),
            norm: group_norm(&block / "1", groups, c_out),
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        x.apply(&self.conv).apply(&self.norm).mish()
    }
}

/// Residual block whose middle is modulated by the conditioning vector (FiLM).
#[derive(Debug)]
struct ResidualBlock {
    conv1: Conv1dBlock,
    cond_encoder: nn::Linear,
    conv2: Conv1dBlock,
    residual_conv: Option<nn::Conv1D>,
    out_channels: i64,
    film_scale: bool,
}

impl ResidualBlock {
    fn new(vs: nn::Path, c_in: i64, c_out: i64, cond_dim: i64, cfg: &DiffusionConfig) -> Self {
        let (k, groups) = (cfg.kernel_size as i64, cfg.n_groups as i64);
        let cond_channels = if cfg.use_film_scale_modulation { 2 * c_out } else { c_out };
        ResidualBlock {
            conv1: Conv1dBlock::new(&vs / "conv1", c_in, c_out, k, groups),
            cond_encoder: linear(&vs / "cond_encoder" / "1", cond_dim, cond_channels),
            conv2: Conv1dBlock::new(&vs / "conv2", c_out, c_out, k, groups),
            residual_conv: (c_in != c_out)
                .then(|| conv1d(&vs / "residual_conv", c_in, c_out, 1, 1, 0)),
            out_channels: c_out,
            film_scale: cfg.use_film_scale_modulation,
        }
    }

    /// `x`: `[B, C_in, T]`, `cond`: `[B, cond_dim]` → `[B, C_out, T]`.
    fn forward(&self, x: &Tensor, cond: &Tensor) -> Tensor {
        let out = self.conv1.forward(x);
        let embed = cond.mish().apply(&self.cond_encoder).unsqueeze(-1);
        let out = if self.film_scale {
            let scale = embed.narrow(1, 0, self.out_channels);
            let bias = embed.narrow(1, self.out_channels, self.out_channels);
            scale * out + bias
        } else {
            out + embed
        };
        let out = self.conv2.forward(&out);
        match &self.residual_conv {
            Some(conv) => out + x.apply(conv),
            None => out + x,
        }
    }
}

/// One UNet stage: two residual blocks and an optional down- or up-sampling convolution.
#[derive(Debug)]
struct Stage {
    res1: ResidualBlock,
    res2: ResidualBlock,
    resample: Option<Resample>,
}

/// The convolution that ends a stage.
#[derive(Debug)]
enum Resample {
    Down(nn::Conv1D),
    Up(nn::ConvTranspose1D),
}

impl Resample {
    fn forward(&self, x: &Tensor) -> Tensor {
        match self {
            Resample::Down(conv) => x.apply(conv),
            Resample::Up(conv) => x.apply(conv),
        }
    }
}

/// The conditional UNet over `[B, horizon, action_dim]` trajectories.
#[derive(Debug)]
pub struct ConditionalUnet1d {
    step_embed_dim: i64,
    step_mlp1: nn::Linear,
    step_mlp2: nn::Linear,
    down: Vec<Stage>,
    mid: Vec<ResidualBlock>,
    up: Vec<Stage>,
    final_block: Conv1dBlock,
    final_conv: nn::Conv1D,
}

impl ConditionalUnet1d {
    /// A UNet for `action_dim`-wide trajectories conditioned on a `global_cond_dim` vector.
    pub fn new(vs: nn::Path, cfg: &DiffusionConfig, action_dim: i64, global_cond_dim: i64) -> Self {
        let e = cfg.diffusion_step_embed_dim as i64;
        let cond_dim = e + global_cond_dim;
        let dims: Vec<i64> = cfg.down_dims.iter().map(|&d| d as i64).collect();
        let mut in_out = vec![(action_dim, dims[0])];
        in_out.extend(dims.windows(2).map(|w| (w[0], w[1])));

        let down_vs = &vs / "down_modules";
        let down = in_out
            .iter()
            .enumerate()
            .map(|(i, &(c_in, c_out))| {
                let s = &down_vs / i;
                let is_last = i + 1 >= in_out.len();
                Stage {
                    res1: ResidualBlock::new(&s / 0, c_in, c_out, cond_dim, cfg),
                    res2: ResidualBlock::new(&s / 1, c_out, c_out, cond_dim, cfg),
                    resample: (!is_last)
                        .then(|| Resample::Down(conv1d(&s / 2, c_out, c_out, 3, 2, 1))),
                }
            })
            .collect();

        let last = *dims.last().unwrap_or(&dims[0]);
        let mid_vs = &vs / "mid_modules";
        let mid =
            (0..2).map(|i| ResidualBlock::new(&mid_vs / i, last, last, cond_dim, cfg)).collect();

        // LeRobot's decoder: one stage per encoder stage but the first, each ending in a
        // transposed convolution (its `is_last` test never fires for these indices).
        let up_vs = &vs / "up_modules";
        let up = in_out[1..]
            .iter()
            .rev()
            .enumerate()
            .map(|(i, &(c_out, c_in))| {
                let s = &up_vs / i;
                Stage {
                    res1: ResidualBlock::new(&s / 0, c_in * 2, c_out, cond_dim, cfg),
                    res2: ResidualBlock::new(&s / 1, c_out, c_out, cond_dim, cfg),
                    resample: Some(Resample::Up(conv_transpose1d(&s / 2, c_out, 4, 2, 1))),
                }
            })
            .collect();

        let step = &vs / "diffusion_step_encoder";
        let fin = &vs / "final_conv";
        ConditionalUnet1d {
            step_embed_dim: e,
            step_mlp1: linear(&step / 1, e, 4 * e),
            step_mlp2: linear(&step / 3, 4 * e, e),
            down,
            mid,
            up,
            final_block: Conv1dBlock::new(&fin / 0, dims[0], dims[0], cfg.kernel_size as i64, 8),
            final_conv: conv1d(&fin / 1, dims[0], action_dim, 1, 1, 0),
        }
    }

    /// Sinusoidal embedding of the timesteps, `[B]` → `[B, step_embed_dim]`.
    fn sinusoidal(&self, timesteps: &Tensor) -> Tensor {
        let half = self.step_embed_dim / 2;
        let scale = -(10000f64.ln()) / (half - 1) as f64;
        let freqs = (Tensor::arange(half, (Kind::Float, timesteps.device())) * scale).exp();
        let emb = timesteps.to_kind(Kind::Float).unsqueeze(-1) * freqs.unsqueeze(0);
        Tensor::cat(&[emb.sin(), emb.cos()], -1)
    }

    /// `x`: `[B, T, A]` noisy trajectories, `timesteps`: `[B]` int64, `global_cond`:
    /// `[B, global_cond_dim]` → `[B, T, A]`.
    pub fn forward(&self, x: &Tensor, timesteps: &Tensor, global_cond: &Tensor) -> Tensor {
        let mut x = x.permute([0, 2, 1]);
        let t = self.sinusoidal(timesteps).apply(&self.step_mlp1).mish().apply(&self.step_mlp2);
        let cond = Tensor::cat(&[&t, global_cond], -1);
        let mut skips = Vec::with_capacity(self.down.len());
        for stage in &self.down {
            x = stage.res2.forward(&stage.res1.forward(&x, &cond), &cond);
            skips.push(x.shallow_clone());
            if let Some(down) = &stage.resample {
                x = down.forward(&x);
            }
        }
        for block in &self.mid {
            x = block.forward(&x, &cond);
        }
        for stage in &self.up {
            let skip = skips.pop().expect("one skip per encoder stage");
            x = Tensor::cat(&[x, skip], 1);
            x = stage.res2.forward(&stage.res1.forward(&x, &cond), &cond);
            if let Some(up) = &stage.resample {
                x = up.forward(&x);
            }
        }
        self.final_block.forward(&x).apply(&self.final_conv).permute([0, 2, 1])
    }
}
