//! `feedbench sweep`: the grid of a [`SweepConfig`], each cell measured in the three phases
//! (`loader`, `model`, `train`) and appended to `DIR/results.jsonl` as it finishes.
//!
//! The `model` phase does not depend on the loader's workers and prefetch: it runs once per
//! (batch, resolution, images, model, device, dtype, repeat) and its figures are copied into
//! every cell that shares them (also across `--resume`).

use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::phase::{run_loader_phase, run_model_phase, run_train_phase, ModelPhase, TrainError};
use super::results::{append_result, read_results, Cell, CellResult, ResultsError};
use super::system::system_info;
use super::trace::Trace;
use crate::config::{parse_trace_cell, EpisodeChoice, SweepConfig};
use crate::dataset::summary::parse_episode_list;
use crate::dataset::video::VideoCodec;
use crate::dataset::write::{synth, Preset, PresetOverrides, SynthOptions};
use crate::dataset::{CodebaseVersion, Dataset, DatasetError, DatasetOptions, WindowSpec};
use crate::loader::pipeline::{Loader, LoaderConfig, LoaderError};
use crate::loader::sampler::{SamplerKind, Shard};
use crate::model::{make_step, DeviceChoice, DiffusionConfig, ModelError, PolicyShapes, Precision};

/// Why a sweep stopped.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The dataset could not be opened or generated.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// A loader failed.
    #[error(transparent)]
    Loader(#[from] LoaderError),
    /// The model could not be built or failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// results.jsonl could not be read or written.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The output directory cannot be used as asked.
    #[error("{path}: {what}")]
    Output {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

impl From<TrainError> for SweepError {
    fn from(e: TrainError) -> Self {
        match e {
            TrainError::Loader(e) => e.into(),
            TrainError::Model(e) => e.into(),
        }
    }
}

/// What the sweep is doing, for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepProgress<'a> {
    /// Cell `index` of `total` (resumed cells included) starts its `phase`.
    Phase {
        /// The cell.
        cell: &'a Cell,
        /// Its position, from 0.
        index: usize,
        /// Cells in the grid.
        total: usize,
        /// `loader`, `model` or `train`.
        phase: &'static str,
    },
    /// A cell finished (or was found finished by `--resume`).
    CellDone {
        /// Cells finished so far.
        done: usize,
        /// Cells in the grid.
        total: usize,
    },
}

/// The dataset a sweep reads: its `path`, or its `synth` preset generated into the cache
/// directory (`/dev/shm/feedbench` by default) under a name that spells out what was
/// generated, and reused when an earlier sweep generated the same thing. `say` hears what is
/// being generated.
pub fn prepare_dataset(
    config: &SweepConfig,
    mut say: impl FnMut(&str),
) -> Result<PathBuf, SweepError> {
    let d = &config.dataset;
    if let Some(path) = &d.path {
        return Ok(path.clone());
    }
    let name = d.synth.as_deref().expect("checked: path or synth");
    let invalid = |what: String| DatasetError::invalid(name, what);
    let codec = d
        .codec
        .as_deref()
        .map(|c| VideoCodec::parse(c).ok_or_else(|| invalid(format!("unknown codec {c:?}"))))
        .transpose()?;
    let episodes = match d.episodes {
        Some(EpisodeChoice::Count(n)) => Some(n),
        _ => None,
    };
    let overrides = PresetOverrides {
        codec,
        gop: d.gop,
        crf: d.crf,
        encoder_preset: None,
        episodes,
        frames_per_episode: d.frames_per_episode,
    };
    let preset = Preset::load(name)?.with(&overrides);
    let version = match d.format.as_deref() {
        None | Some("v3.0") => CodebaseVersion::V30,
        Some("v2.1") => CodebaseVersion::V21,
        Some(other) => return Err(invalid(format!("unknown format {other:?} (v3.0, v2.1)")).into()),
    };
    let cache = d.cache.clone().unwrap_or_else(default_cache);
    let root = cache.join(format!(
        "{}-{version}-{}-gop{}-crf{}-{}ep-{}f{}",
        preset.name,
        preset.codec,
        preset.gop,
        preset.crf,
        preset.episodes,
        preset.frames_per_episode,
        if preset.frames_jitter > 0 {
            format!("±{}", preset.frames_jitter)
        } else {
            String::new()
        }
    ));
    if root.join("meta/info.json").is_file() {
        say(&format!("using the generated dataset {}", root.display()));
        return Ok(root);
    }
    say(&format!(
        "generating {} ({} episodes) into {}",
        preset.name,
        preset.episodes,
        root.display()
    ));
    std::fs::create_dir_all(&cache).map_err(|e| DatasetError::io(&cache, e))?;
    let options = SynthOptions { version, ..SynthOptions::default() };
    synth(&root, &preset, &options)?;
    Ok(root)
}

/// Where generated datasets are kept: RAM-backed `/dev/shm` when there is one.
fn default_cache() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join("feedbench")
    } else {
        std::env::temp_dir().join("feedbench")
    }
}

/// The results file of a sweep's output directory.
pub fn results_path(out: &Path) -> PathBuf {
    out.join("results.jsonl")
}

/// Runs the sweep `config` describes on the dataset at `root`, writing into `out`. With
/// `resume`, the cells already in `out/results.jsonl` are skipped; without, an existing
/// results file is refused (never overwritten). The `train` phase of `run.trace_cell` (else
/// the last cell) is traced into `out/trace.json`. Returns every result, old and new.
pub fn run_sweep(
    config: &SweepConfig,
    root: &Path,
    out: &Path,
    resume: bool,
    mut progress: impl FnMut(SweepProgress<'_>),
) -> Result<Vec<CellResult>, SweepError> {
    let results_file = prepare_output(out, resume)?;
    let mut results =
        if resume && results_file.exists() { read_results(&results_file)? } else { Vec::new() };

    let device = DeviceChoice::parse(&config.model.device)?.resolve()?;
    if let Some(threads) = config.model.threads {
        tch::set_num_threads(threads);
    }
    let preset = DiffusionConfig::resolve_preset(&config.model.preset, device);
    let diffusion = DiffusionConfig::preset(preset)?;
    let episodes = match &config.dataset.episodes {
        Some(EpisodeChoice::List(list)) if config.dataset.path.is_some() => {
            Some(parse_episode_list(list).map_err(|what| DatasetError::invalid(root, what))?)
        }
        _ => None,
    };
    let dataset =
        Arc::new(Dataset::open_with(root, &DatasetOptions { episodes, ..Default::default() })?);
    let window = dataset.window(&match config.loader.window.as_str() {
        "none" => WindowSpec::Single,
        _ => WindowSpec::diffusion(),
    })?;
    let system = system_info(device);
    let name =
        root.file_name().map_or_else(|| root.display().to_string(), |n| n.to_string_lossy().into());
    let model_name = |model: &str| {
        if model == "diffusion" {
            format!("diffusion:{preset}")
        } else {
            model.to_string()
        }
    };
    let device_name = if device.is_cuda() { "cuda" } else { "cpu" };

    let cells = grid(config, &name, device_name, &model_name);
    let done: HashSet<Cell> = results.iter().map(|r| r.cell.clone()).collect();
    let mut models: HashMap<String, ModelPhase> = HashMap::new();
    for r in &results {
        models.insert(model_key(&r.cell), r.model.clone());
    }
    let total = cells.len();
    let traced = match &config.run.trace_cell {
        Some(text) => {
            let (workers, batch) = parse_trace_cell(text)
                .map_err(|what| SweepError::Output { path: out.to_path_buf(), what })?;
            cells.iter().position(|c| c.workers == workers && c.batch_size == batch).ok_or_else(
                || SweepError::Output {
                    path: out.to_path_buf(),
                    what: format!("run.trace_cell {text:?} is not a cell of the sweep"),
                },
            )?
        }
        None => total - 1,
    };
    let mut finished = cells.iter().filter(|c| done.contains(c)).count();
    progress(SweepProgress::CellDone { done: finished, total });
    let run = &config.run;
    for (index, cell) in cells.iter().enumerate() {
        if done.contains(cell) {
            continue;
        }
        // `diffusion:small` is built from the `diffusion` spec; other specs are kept as given.
        let model = if cell.model.starts_with("diffusion:") { "diffusion" } else { &cell.model };
        let phase = |name| SweepProgress::Phase { cell, index, total, phase: name };
        let resolution = (cell.resolution != "native")
            .then(|| crate::loader::parse_resolution(&cell.resolution))
            .transpose()
            .map_err(|what| SweepError::Output { path: out.to_path_buf(), what })?;
        let loader_config = LoaderConfig {
            workers: cell.workers,
            prefetch: cell.prefetch,
            batch_size: cell.batch_size,
            drop_last: false,
            sampler: match config.loader.sampler.as_str() {
                "sequential" => SamplerKind::Sequential,
                "shuffled" => SamplerKind::Shuffled,
                _ => SamplerKind::EpisodeAware,
            },
            seed: config.loader.seed + cell.repeat as u64,
            shard: Shard::default(),
            ordered: true,
            resolution,
            uint8: cell.images == "u8",
        };
        let mut loader = Loader::new(dataset.clone(), window.clone(), loader_config)?;
        let precision = Precision::parse(&cell.dtype)?;
        let shapes = PolicyShapes::from_info(dataset.info(), resolution)
            .map_err(|what| format!("{}: {what}", root.display()));
        let shapes = shapes.as_ref().map_err(String::as_str);

        progress(phase("loader"));
        let warmup = run.warmup.max(loader.config().batches_in_flight() + 1);
        let loader_phase = run_loader_phase(&loader, run.loader_batches, warmup, |_| {})?;

        let key = model_key(cell);
        if !models.contains_key(&key) {
            progress(phase("model"));
            let batch = loader.epoch(0).next().expect("the loader phase ran a batch")?.into_batch();
            tch::manual_seed(cell.repeat as i64);
            let mut step = make_step(model, &diffusion, shapes, device, precision)?;
            let measured =
                run_model_phase(step.as_mut(), &batch, precision, run.model_steps, run.warmup)?;
            models.insert(key.clone(), measured);
        }

        progress(phase("train"));
        tch::manual_seed(cell.repeat as i64);
        let mut step = make_step(model, &diffusion, shapes, device, precision)?;
        let trace = (index == traced).then(Trace::new);
        loader.set_trace(trace.clone());
        let train = run_train_phase(
            &loader,
            step.as_mut(),
            run.train_steps,
            run.warmup,
            trace.as_ref(),
            |_| {},
        )?;
        if let Some(trace) = trace {
            let path = out.join("trace.json");
            trace
                .write_chrome(&path)
                .map_err(|e| SweepError::Output { path, what: e.to_string() })?;
        }

        let result = CellResult {
            cell: cell.clone(),
            loader: loader_phase,
            model: models[&key].clone(),
            train,
            system: system.clone(),
            finished_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        };
        append_result(&results_file, &result)?;
        results.push(result);
        finished += 1;
        progress(SweepProgress::CellDone { done: finished, total });
    }
    Ok(results)
}

/// The key of the `model` phase a cell shares with others.
fn model_key(cell: &Cell) -> String {
    format!("{:?}", cell.model_key())
}

/// The grid's cells in the order they run: repeats outermost, workers innermost (so cells
/// sharing a model measurement run together).
fn grid(
    config: &SweepConfig,
    dataset: &str,
    device: &str,
    model_name: &dyn Fn(&str) -> String,
) -> Vec<Cell> {
    grid_axes(config)
        .map(|(repeat, model, dtype, images, resolution, batch, prefetch, workers)| Cell {
            dataset: dataset.to_string(),
            workers,
            prefetch,
            batch_size: batch,
            resolution: resolution.to_string(),
            images: images.to_string(),
            model: model_name(model),
            device: device.to_string(),
            dtype: dtype.to_string(),
            repeat,
        })
        .collect()
}

type Axes<'a> = (usize, &'a str, &'a str, &'a str, &'a str, usize, usize, usize);

fn grid_axes(config: &SweepConfig) -> impl Iterator<Item = Axes<'_>> {
    let (l, m) = (&config.loader, &config.model);
    (0..config.run.repeats).flat_map(move |repeat| {
        m.model.iter().flat_map(move |model| {
            m.dtype.iter().flat_map(move |dtype| {
                l.images.iter().flat_map(move |images| {
                    l.resolution.iter().flat_map(move |resolution| {
                        l.batch.iter().flat_map(move |&batch| {
                            l.prefetch.iter().flat_map(move |&prefetch| {
                                l.workers.iter().map(move |&workers| {
                                    (
                                        repeat,
                                        model.as_str(),
                                        dtype.as_str(),
                                        images.as_str(),
                                        resolution.as_str(),
                                        batch,
                                        prefetch,
                                        workers,
                                    )
                                })
                            })
                        })
                    })
                })
            })
        })
    })
}

/// Creates `out` and returns its results file. Without `resume` an existing results file is
/// refused; with it, a last line cut short by an interrupted write is removed so that the
/// next result starts on a line of its own.
fn prepare_output(out: &Path, resume: bool) -> Result<PathBuf, SweepError> {
    let error = |path: &Path, what: String| SweepError::Output { path: path.to_path_buf(), what };
    std::fs::create_dir_all(out).map_err(|e| error(out, e.to_string()))?;
    let file = results_path(out);
    if !file.exists() {
        return Ok(file);
    }
    if !resume {
        return Err(error(
            &file,
            "results of an earlier sweep are here: pass --resume to continue it, or choose \
             another --out"
                .into(),
        ));
    }
    let io = |e: std::io::Error| error(&file, e.to_string());
    let mut handle = std::fs::OpenOptions::new().read(true).write(true).open(&file).map_err(io)?;
    let mut text = Vec::new();
    handle.read_to_end(&mut text).map_err(io)?;
    if !text.is_empty() && text.last() != Some(&b'\n') {
        let keep = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        handle.set_len(keep as u64).map_err(io)?;
        handle.seek(SeekFrom::End(0)).map_err(io)?;
    }
    Ok(file)
}
