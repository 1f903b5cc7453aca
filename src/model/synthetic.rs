//! A stand-in step of fixed device cost (`synthetic:40ms`), for "what if my GPU step took X"
//! questions: the batch is copied to the device as by a real step, then the cost is spent as
//! real device work on CUDA, reported as `forward` (matrix products until the time is up, host waiting in
//! synchronisation as it would for a real step) or by sleeping on CPU (a GPU step does not
//! occupy host cores, so the loader keeps them all).

use std::time::{Duration, Instant};

use tch::{Device, Kind, Tensor};

use super::error::ModelError;
use super::replay::StepReplay;
use super::step::{batch_tensor_on, sync, StagedBatch, StepTimes, TrainStep};
use crate::loader::batch::Batch;

/// A training step that costs a fixed time per batch, or the times a file gives, step after
/// step ([`StepReplay`]).
pub struct SyntheticStep {
    cost: Duration,
    /// The replayed steps' costs, where they come from a file; `cost` is then their median.
    replayed: Option<(String, Box<dyn Iterator<Item = Duration> + Send>)>,
    device: Device,
    /// Operands of the device work (CUDA only).
    work: Option<(Tensor, Tensor)>,
}

impl std::fmt::Debug for SyntheticStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyntheticStep").field("cost", &self.cost).finish_non_exhaustive()
    }
}

impl SyntheticStep {
    /// A step costing `cost` on `device`.
    pub fn new(cost: Duration, device: Device) -> Self {
        let work = device.is_cuda().then(|| {
            let a = Tensor::randn([512, 512], (Kind::Float, device));
            let b = Tensor::randn([512, 512], (Kind::Float, device));
            (a, b)
        });
        SyntheticStep { cost, replayed: None, device, work }
    }

    /// A step taking the times `replay` gives, one a step, on `device`.
    pub fn replaying(replay: &StepReplay, device: Device) -> Self {
        let (median, _) = replay.median_and_p95_ms();
        let name = format!("replay of {} ({})", replay.source.file.display(), replay.source.order);
        let step = Self::new(Duration::from_secs_f64(median / 1e3), device);
        Self { replayed: Some((name, Box::new(replay.steps()))), ..step }
    }

    /// Parses the cost of `synthetic:40ms`, `synthetic:0.04s`, `synthetic:40us` or
    /// `synthetic:40` (milliseconds).
    pub fn parse_cost(spec: &str) -> Result<Duration, ModelError> {
        let bad = || {
            ModelError::Config(format!(
                "`{spec}` is not a synthetic step cost (expected e.g. `synthetic:40ms`)"
            ))
        };
        let value = spec.strip_prefix("synthetic:").ok_or_else(bad)?.trim();
        let (number, scale) = if let Some(v) = value.strip_suffix("ms") {
            (v, 1e-3)
        } else if let Some(v) = value.strip_suffix("us") {
            (v, 1e-6)
        } else if let Some(v) = value.strip_suffix('s') {
            (v, 1.0)
        } else {
            (value, 1e-3)
        };
        let x: f64 = number.trim().parse().map_err(|_| bad())?;
        if !x.is_finite() || x < 0.0 {
            return Err(bad());
        }
        Ok(Duration::from_secs_f64(x * scale))
    }

    /// The cost spent per step.
    pub fn cost(&self) -> Duration {
        self.cost
    }
}

impl TrainStep for SyntheticStep {
    fn step_with(
        &mut self,
        batch: &Batch,
        staged: Option<&StagedBatch>,
    ) -> Result<StepTimes, ModelError> {
        let t0 = Instant::now();
        if let Some(staged) = staged {
            staged.order_step_after_copy()?;
        }
        for (key, t) in &batch.tensors {
            // SAFETY: dropped at once, within `step(&batch)`, and only read (copied on CUDA).
            let _ = unsafe { batch_tensor_on(key, t, staged, self.device)? };
        }
        sync(self.device);
        let t1 = Instant::now();
        let cost = self.replayed.as_mut().and_then(|(_, steps)| steps.next()).unwrap_or(self.cost);
        match &self.work {
            Some((a, b)) => {
                while t1.elapsed() < cost {
                    let _ = a.matmul(b);
                    sync(self.device);
                }
            }
            None => std::thread::sleep(cost),
        }
        let t2 = Instant::now();
        Ok(StepTimes { h2d: t1 - t0, forward: t2 - t1, total: t2 - t0, ..Default::default() })
    }

    fn name(&self) -> String {
        match &self.replayed {
            Some((name, _)) => name.clone(),
            None => format!("synthetic:{}ms", self.cost.as_secs_f64() * 1e3),
        }
    }

    fn trainable_parameters(&self) -> usize {
        0
    }

    fn last_loss(&self) -> Option<f64> {
        None
    }

    fn device(&self) -> Device {
        self.device
    }
}
