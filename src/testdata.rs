//! Where the project's tests and benches find the real LeRobot dataset they read, and
//! hand-built results for the tests of what reads them.

use std::path::PathBuf;
use std::time::Duration;

use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::results::CellResult;
use crate::loader::config::LoaderConfig;
use crate::measure::phase::{
    CacheFigures, DecodeLimit, FramesSize, InputBound, LoaderPhase, ModelPhase, StepSample,
    TrainPhase,
};
use crate::measure::stats::Stats;
use crate::measure::system::SystemInfo;
use crate::measure::verdict::Verdict;
use crate::model::{DeviceChoice, ModelSpec, Precision};
use crate::timing::{stage, StageTotals, TimingTree};

/// The real, partially downloaded LeRobot v2.1 dataset (Unitree G1) that tests and benches
/// read: `$FEEDBENCH_G1_PARTIAL`, else `../shared/datasets/g1-partial` beside this crate.
pub fn g1_partial_root() -> PathBuf {
    std::env::var_os("FEEDBENCH_G1_PARTIAL").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/g1-partial")
    })
}

/// The camera mp4 of `episode` in the real g1 dataset, or None (with a visible note) where it
/// is absent (a partial download holds episodes 1, 2, 4, 29 and 30).
pub fn g1_video(episode: u32) -> Option<PathBuf> {
    let path = g1_partial_root()
        .join(format!("videos/chunk-000/observation.images.cam_high/episode_{episode:06}.mp4"));
    if path.is_file() {
        Some(path)
    } else {
        eprintln!("note: {} absent, skipped (set FEEDBENCH_G1_PARTIAL)", path.display());
        None
    }
}

/// A hand-built [`CellResult`] with realistic phases, for tests of what reads results (the
/// report) without measuring anything. [`FakeCell::new`] gives a CPU run on a 2-core machine
/// whose loader spends most of its CPU decoding AV1; change the fields to shape a case.
#[derive(Debug, Clone)]
pub struct FakeCell {
    /// The knobs.
    pub cell: Cell,
    /// The loader phase's samples/s.
    pub loader_samples_per_s: f64,
    /// The model phase's samples/s.
    pub model_samples_per_s: f64,
    /// The train phase's samples/s.
    pub train_samples_per_s: f64,
    /// The train phase's median input-bound share, percent.
    pub input_bound_pct: f64,
    /// CPU ms per sample of the loader's leaf stages (`batch/video/decode`, `batch/parquet`,
    /// `wait`…); the parents (`batch/video`, `batch`) are their sums.
    pub stages_ms: Vec<(&'static str, f64)>,
    /// CPU cores of the machine.
    pub cores: usize,
    /// The loader's share of the decode-only limit, when it decoded video.
    pub decode_fraction: Option<f64>,
    /// Each measured train step's whole iteration, ms, of which the input-bound share waits
    /// for the batch and copies it (the wait every tenth step [`FakeCell::late_factor`] times
    /// as long); none:
    /// results without per-step samples, judged by medians.
    pub train_iteration_ms: Vec<f64>,
    /// Of the input-bound share, the part each step spends copying its batch to the device
    /// (the rest waits), percent.
    pub copy_pct: f64,
    /// The input-bound share's p95 over its median (1.5).
    pub late_factor: f64,
    /// Whether the loader alone was measured (true; false as a tune's verifying cells).
    pub loader_alone: bool,
    /// What a cache of every frame would take (None).
    pub frames: Option<FramesSize>,
    /// What the loader's decoded-frame cache did (None: no cache).
    pub cache: Option<CacheFigures>,
}

impl FakeCell {
    /// Dataset `g1`, native resolution, f32 frames, `diffusion:small` on the CPU in f32.
    pub fn new(workers: usize, prefetch: usize, batch_size: usize) -> Self {
        Self {
            cell: Cell {
                dataset: "g1".into(),
                knobs: LoaderConfig { workers, prefetch, batch_size, ..LoaderConfig::default() },
                model: "diffusion:small".parse::<ModelSpec>().expect("a model spec"),
                device: DeviceChoice::Cpu,
                dtype: Precision::F32,
                repeat: 0,
                loader: Default::default(),
            },
            loader_samples_per_s: 100.0,
            model_samples_per_s: 50.0,
            train_samples_per_s: 40.0,
            input_bound_pct: 2.0,
            stages_ms: vec![
                (stage::DECODE, 3.0),
                (stage::CONVERT, 0.5),
                (stage::PARQUET, 0.3),
                (stage::COLLATE, 0.1),
                (stage::WAIT, 0.05),
            ],
            cores: 2,
            decode_fraction: Some(0.5),
            train_iteration_ms: Vec::new(),
            copy_pct: 0.0,
            late_factor: 1.5,
            loader_alone: true,
            frames: None,
            cache: None,
        }
    }

    /// Stages as a loader that times each step of a sample's way records them, per sample: video
    /// 3.6 ms (demux 0.1, decode 3.0, convert 0.5 with its split 0.2), parquet 0.3, collate 0.1.
    pub fn time_each_step(&mut self) {
        self.stages_ms = vec![
            (stage::VIDEO, 3.6),
            (stage::DECODE, 3.0),
            (stage::CONVERT, 0.5),
            (stage::SPLIT, 0.2),
            (stage::PARQUET, 0.3),
            (stage::COLLATE, 0.1),
        ];
    }

    /// The cell result these figures make.
    pub fn result(&self) -> CellResult {
        let c = &self.cell;
        let batches = 20;
        let samples = c.knobs.batch_size * batches;
        let per_sample = |ms: f64| Duration::from_secs_f64(ms * samples as f64 / 1e3);
        let mut timing = TimingTree::default();
        let add = |timing: &mut TimingTree, path: &str, ms: f64| {
            let d = per_sample(ms);
            timing.add(path, StageTotals { calls: samples as u64, wall: d, cpu: d });
        };
        // The stages right under `prefix`.
        let sum = |prefix: &str| -> f64 {
            self.stages_ms
                .iter()
                .filter_map(|(p, ms)| {
                    p.strip_prefix(prefix).filter(|r| !r.contains('/')).and(Some(*ms))
                })
                .sum()
        };
        for (path, ms) in &self.stages_ms {
            add(&mut timing, path, *ms);
        }
        // `batch/video` and `batch`, where not given, are their children's sum.
        let video = sum("batch/video/");
        let given_video = timing.get(stage::VIDEO).is_some();
        if video > 0.0 && !given_video {
            add(&mut timing, stage::VIDEO, video);
        }
        let batch = sum("batch/") + if given_video { 0.0 } else { video };
        if batch > 0.0 && timing.get(stage::BATCH).is_none() {
            add(&mut timing, stage::BATCH, batch);
        }
        let cpu_ms_per_sample = stage::LOADER
            .iter()
            .filter_map(|p| timing.get(p))
            .map(|t| t.cpu.as_secs_f64() * 1e3 / samples as f64)
            .sum();
        let decode_limit =
            timing.get(stage::DECODE).zip(self.decode_fraction).map(|(decode, fraction)| {
                let frames_per_sample = 6.0;
                DecodeLimit {
                    frames_per_sample,
                    cpu_us_per_frame: decode.cpu.as_secs_f64() * 1e6
                        / (samples as f64 * frames_per_sample),
                    threads: c.knobs.workers.clamp(1, self.cores),
                    samples_per_s: self.loader_samples_per_s / fraction,
                    fraction,
                }
            });
        let flat =
            |ms: f64| Stats { median_ms: ms, p95_ms: ms, min_ms: ms, max_ms: ms, mean_ms: ms };
        let model_step = c.knobs.batch_size as f64 * 1e3 / self.model_samples_per_s;
        let train_step = c.knobs.batch_size as f64 * 1e3 / self.train_samples_per_s;
        let wait = train_step * self.input_bound_pct / 100.0;
        let p95 = (self.input_bound_pct * self.late_factor).min(100.0);
        CellResult {
            cell: c.clone(),
            loader: self.loader_alone.then(|| LoaderPhase {
                config: LoaderConfig {
                    workers: c.knobs.workers,
                    prefetch: c.knobs.prefetch,
                    batch_size: c.knobs.batch_size,
                    ..LoaderConfig::default()
                },
                batches,
                samples,
                bytes: samples as u64 * 2_000_000,
                wall_s: samples as f64 / self.loader_samples_per_s,
                samples_per_s: self.loader_samples_per_s,
                batches_per_s: self.loader_samples_per_s / c.knobs.batch_size as f64,
                mb_per_s: self.loader_samples_per_s * 2.0,
                cpu_ms_per_sample,
                process_cpu_ms_per_sample: cpu_ms_per_sample * 1.1,
                peak_rss_bytes: Some(
                    500_000_000 + (c.knobs.workers * c.knobs.prefetch) as u64 * 50_000_000,
                ),
                timing,
                decode_limit,
                batch_ms: Vec::new(),
                first_batch_s: None,
                epoch_start_wait_ms: None,
                steady_wait_ms: None,
                lerobot: None,
                cache: self.cache.clone(),
                frames: self.frames,
                memory: None,
                ranks: None,
                lerobot_contract: None,
                remote: None,
                order: None,
                startup: None,
            }),
            model: ModelPhase {
                model: c.model.to_string(),
                device: c.device.to_string(),
                dtype: c.dtype.to_string(),
                batch: c.knobs.batch_size,
                threads: 2,
                parameters: 1_000_000,
                step: flat(model_step),
                h2d: flat(0.0),
                forward: flat(model_step * 0.3),
                backward: flat(model_step * 0.6),
                optimizer: flat(model_step * 0.1),
                samples_per_s: self.model_samples_per_s,
                parts: Vec::new(),
                peak_memory_bytes: None,
                last_loss: Some(1.0),
                speedup_over_f32: None,
                per_step: Vec::new(),
            },
            train: TrainPhase {
                steps: batches,
                samples,
                wall_s: samples as f64 / self.train_samples_per_s,
                samples_per_s: self.train_samples_per_s,
                step: flat(train_step),
                wait: flat(wait),
                h2d: flat(0.0),
                compute: flat(train_step - wait),
                input_bound: InputBound {
                    median_pct: self.input_bound_pct,
                    p95_pct: p95,
                    verdict: Verdict::of(self.input_bound_pct),
                    copy_pct: self.copy_pct,
                },
                au_pct: Some(100.0 - self.input_bound_pct),
                wait_ms_per_step: Some(wait),
                epoch_start_wait_ms: None,
                steady_wait_ms: None,
                staging: None,
                data_s: wait / 1e3,
                updt_s: (train_step - wait) / 1e3,
                process_cpu_ms_per_sample: cpu_ms_per_sample * 2.0,
                peak_rss_bytes: Some(800_000_000),
                timing: TimingTree::default(),
                per_step: self
                    .train_iteration_ms
                    .iter()
                    .enumerate()
                    .map(|(i, &ms)| {
                        // Every tenth step waits longer: the p95 above.
                        let late = if i % 10 == 9 { self.late_factor } else { 1.0 };
                        let waiting = (self.input_bound_pct - self.copy_pct).max(0.0) * late;
                        let wait_ms = ms * (waiting / 100.0).min(1.0);
                        let step_ms = ms - wait_ms;
                        StepSample {
                            wait_ms,
                            h2d_ms: ms * self.copy_pct / 100.0,
                            forward_ms: step_ms * 0.3,
                            backward_ms: step_ms * 0.6,
                            optimizer_ms: step_ms * 0.1,
                            step_ms,
                            backbone_ms: None,
                            unet_ms: None,
                            epoch_position: None,
                        }
                    })
                    .collect(),
                modules: Vec::new(),
                peak_device_bytes: None,
                first_batch_s: None,
                memory: None,
                ranks: None,
                lerobot_contract: None,
                remote: None,
                startup: None,
            },
            replayed_mean_ms: None,
            system: SystemInfo {
                cpu: "Test CPU @ 3.0GHz".into(),
                cores: self.cores,
                gpu: None,
                gpu_driver: None,
                memory_bytes: Some(16_000_000_000),
                os: "Linux 6.1".into(),
                feedbench: "0.1.0".into(),
                libtorch: "2.11.0".into(),
                libavcodec: "59.37.100".into(),
                dav1d: None,
                lerobot: None,
            },
            placement: None,
            finished_unix_s: 1_700_000_000,
            workload: None,
        }
    }
}
