//! DDPM forward diffusion (the training half of diffusers' `DDPMScheduler`): the beta
//! schedule and `add_noise`.

use tch::{Device, Kind, Tensor};

use super::error::ModelError;

/// The cumulative signal level of a DDPM schedule, resident on the device.
#[derive(Debug)]
pub struct DdpmSchedule {
    sqrt_alphas_cumprod: Tensor,
    sqrt_one_minus_alphas_cumprod: Tensor,
    num_train_timesteps: i64,
}

impl DdpmSchedule {
    /// The schedule `beta_schedule` (`squaredcos_cap_v2`, `linear`, `scaled_linear`) over
    /// `num_train_timesteps` steps, as diffusers computes it (betas in float32, then cumprod).
    pub fn new(
        beta_schedule: &str,
        num_train_timesteps: usize,
        beta_start: f64,
        beta_end: f64,
        device: Device,
    ) -> Result<Self, ModelError> {
        let n = num_train_timesteps;
        let betas: Vec<f32> = match beta_schedule {
            "squaredcos_cap_v2" => {
                let alpha_bar =
                    |t: f64| ((t + 0.008) / 1.008 * std::f64::consts::FRAC_PI_2).cos().powi(2);
                (0..n)
                    .map(|i| {
                        let (t1, t2) = (i as f64 / n as f64, (i + 1) as f64 / n as f64);
                        (1.0 - alpha_bar(t2) / alpha_bar(t1)).min(0.999) as f32
                    })
                    .collect()
            }
            "linear" => linspace(beta_start, beta_end, n).map(|b| b as f32).collect(),
            "scaled_linear" => {
                linspace(beta_start.sqrt(), beta_end.sqrt(), n).map(|b| (b * b) as f32).collect()
            }
            other => {
                return Err(ModelError::Config(format!(
                    "unknown beta_schedule `{other}` (expected squaredcos_cap_v2, linear or \
                     scaled_linear)"
                )))
            }
        };
        let mut cumprod = Vec::with_capacity(n);
        let mut acc = 1.0f32;
        for b in betas {
            acc *= 1.0 - b;
            cumprod.push(acc);
        }
        let alphas_cumprod = Tensor::from_slice(&cumprod).to_device(device);
        Ok(DdpmSchedule {
            sqrt_one_minus_alphas_cumprod: alphas_cumprod.neg().g_add_scalar(1.0).sqrt(),
            sqrt_alphas_cumprod: alphas_cumprod.sqrt(),
            num_train_timesteps: n as i64,
        })
    }

    /// Number of training timesteps.
    pub fn num_train_timesteps(&self) -> i64 {
        self.num_train_timesteps
    }

    /// One random timestep per sample, uniform in `[0, num_train_timesteps)`.
    pub fn sample_timesteps(&self, batch: i64, device: Device) -> Tensor {
        Tensor::randint(self.num_train_timesteps, [batch], (Kind::Int64, device))
    }

    /// `sqrt(ᾱ_t) · x + sqrt(1 − ᾱ_t) · noise`, per sample; `x` and `noise` are `[B, …]`.
    pub fn add_noise(&self, x: &Tensor, noise: &Tensor, timesteps: &Tensor) -> Tensor {
        let mut shape = vec![-1i64];
        shape.resize(x.dim(), 1);
        let a = self.sqrt_alphas_cumprod.index_select(0, timesteps).reshape(&shape[..]);
        let b = self.sqrt_one_minus_alphas_cumprod.index_select(0, timesteps).reshape(&shape[..]);
        a * x + b * noise
    }
}

fn linspace(start: f64, end: f64, n: usize) -> impl Iterator<Item = f64> {
    let step = if n > 1 { (end - start) / (n - 1) as f64 } else { 0.0 };
    (0..n).map(move |i| start + step * i as f64)
}
