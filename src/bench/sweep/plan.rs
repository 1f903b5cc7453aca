//! The plan of a sweep: its config turned into the ordered list of cells to measure, and which
//! of them is traced. Planning measures nothing, so a share of the plan can run anywhere.

use super::cell::Cell;
use super::config::{SweepConfig, TraceCell};
use crate::loader::config::LoaderConfig;
use crate::loader::knobs::{CellFacts, CellRole, LoaderKnob};
use crate::model::DeviceChoice;

/// The cells of a sweep in the order they run, and the one whose `train` phase is traced.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPlan {
    /// Every cell, repeats outermost and workers innermost (so that cells sharing a `model`
    /// measurement run together).
    pub cells: Vec<Cell>,
    /// Index of the traced cell: `run.trace_cell`, else the last.
    pub traced: usize,
}

/// `run.trace_cell` names workers and a batch size that no cell of the sweep has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("run.trace_cell \"{0}\" is not a cell of the sweep")]
pub struct TraceCellNotInGrid(pub TraceCell);

/// Plans the sweep `config` describes on the dataset called `dataset`, with the step on
/// `device` (which makes the `auto` diffusion preset concrete). A `run.trace_cell` that is
/// not a cell of the grid is an error.
pub fn plan(
    config: &SweepConfig,
    dataset: &str,
    device: tch::Device,
) -> Result<SweepPlan, TraceCellNotInGrid> {
    let (l, m) = (&config.loader, &config.model);
    let mut cells = vec![Cell {
        dataset: dataset.to_string(),
        knobs: LoaderConfig::default(),
        model: Default::default(),
        device: DeviceChoice::of(device),
        dtype: crate::model::Precision::F32,
        repeat: 0,
        loader: Default::default(),
    }];
    let repeats: Vec<usize> = (0..config.run.repeats).collect();
    let models: Vec<_> = m.model.iter().map(|model| model.on(m.declared.preset, device)).collect();
    // Outermost axis first: what the step depends on (so that cells sharing a `model`
    // measurement run together), the loader, the rest a recommendation shares, then what it
    // varies, workers innermost; the loader's knobs within each in the table's order.
    expand(&mut cells, &repeats, |c, &v| c.repeat = v);
    expand(&mut cells, &models, |c, v| c.model = v.clone());
    expand(&mut cells, &m.dtype, |c, &v| c.dtype = v);
    let axes = |role: fn(&CellFacts) -> bool| LoaderKnob::carried().filter(move |(_, f)| role(f));
    for (knob, _) in axes(|f| f.model_phase) {
        expand(&mut cells, l.knobs.values(knob), |c, v| set(&mut c.knobs, knob, v));
    }
    expand(&mut cells, &l.loader, |c, &v| c.loader = v);
    for (knob, _) in axes(|f| !f.model_phase && f.role != CellRole::Varied) {
        expand(&mut cells, l.knobs.values(knob), |c, v| set(&mut c.knobs, knob, v));
    }
    // LeRobot's loader decodes with its own backend's threading and keeps no frames: one cell,
    // its twin, not one per count or budget.
    let mut twins = std::collections::HashSet::new();
    cells = cells
        .into_iter()
        .map(|c| c.on(c.loader))
        .filter(|c| c.loader.is_native() || twins.insert(c.clone()))
        .collect();
    for (knob, _) in axes(|f| f.role == CellRole::Varied) {
        expand(&mut cells, l.knobs.values(knob), |c, v| set(&mut c.knobs, knob, v));
    }
    let traced = match config.run.trace_cell {
        Some(wanted) => cells
            .iter()
            .position(|c| c.knobs.workers == wanted.workers && c.knobs.batch_size == wanted.batch)
            .ok_or(TraceCellNotInGrid(wanted))?,
        None => cells.len() - 1,
    };
    Ok(SweepPlan { cells, traced })
}

/// `knob` at `text`, checked when the config was read.
fn set(config: &mut LoaderConfig, knob: &LoaderKnob, text: &str) {
    knob.set(config, text).expect("checked when read");
}

/// Every cell once per value of an axis, set by `set`: the axis becomes the innermost so far.
fn expand<T>(cells: &mut Vec<Cell>, values: &[T], set: impl Fn(&mut Cell, &T)) {
    *cells = cells
        .iter()
        .flat_map(|cell| {
            values.iter().map(|value| {
                let mut cell = cell.clone();
                set(&mut cell, value);
                cell
            })
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> SweepConfig {
        let config: SweepConfig = toml::from_str(text).unwrap();
        crate::bench::sweep::config::ConfigFile::check(&config, std::path::Path::new("sweep.toml"))
            .unwrap();
        config
    }

    #[test]
    fn cells_run_repeats_outermost_and_workers_innermost() {
        let config = config(
            "[dataset]\nsynth = \"pusht\"\n[loader]\nworkers = [0, 2]\nbatch = [16, 64]\n\
             [model]\ndtype = [\"f32\", \"bf16\"]\n[run]\nrepeats = 2\n",
        );
        let plan = plan(&config, "pusht", tch::Device::Cpu).unwrap();
        assert_eq!(plan.cells.len(), 16);
        let first: Vec<_> = plan.cells[..4]
            .iter()
            .map(|c| (c.knobs.batch_size, c.knobs.workers, c.repeat))
            .collect();
        assert_eq!(first, [(16, 0, 0), (16, 2, 0), (64, 0, 0), (64, 2, 0)]);
        assert_eq!(plan.cells[4].dtype.name(), "bf16");
        assert_eq!(plan.cells[8].repeat, 1);
        assert_eq!(plan.cells[0].model.to_string(), "diffusion:small", "auto is small on CPU");
        assert_eq!(plan.traced, 15, "the last cell");
        let ids: std::collections::HashSet<_> = plan.cells.iter().map(Cell::id).collect();
        assert_eq!(ids.len(), 16, "every cell has its own id");
    }

    #[test]
    fn the_frame_cache_is_an_axis_of_the_native_loader_only() {
        let config = config(
            "[dataset]\nsynth = \"pusht\"\n[loader]\nworkers = [2]\nbatch = [16]\n\
             cache = [\"0\", \"4GiB\"]\nloader = [\"native\", \"lerobot\"]\n",
        );
        let plan = plan(&config, "pusht", tch::Device::Cpu).unwrap();
        let cells: Vec<_> =
            plan.cells.iter().map(|c| (c.loader.to_string(), c.knobs.cache_bytes)).collect();
        let native = |bytes| ("native".to_string(), bytes);
        assert_eq!(cells, [native(0), native(4 << 30), ("lerobot".to_string(), 0)]);
        let base = config.loader.knobs.config();
        assert_eq!(plan.cells[1].loader_config(&base).cache_bytes, 4 << 30);
        assert!(plan.cells[1].id().contains("-c4GiB-"), "{}", plan.cells[1].id());
        assert!(!plan.cells[0].id().contains("-c0"), "no cache: ids as before");
    }

    #[test]
    fn a_knob_every_cell_shares_reaches_each_cells_loader_but_lerobots_native_only_ones() {
        let config = config(
            "[dataset]\nsynth = \"pusht\"\n[loader]\nworkers = [2]\nbatch = [16]\nseed = 5\n\
             drop_n_last_frames = 3\nunordered = true\npin_memory = true\n\
             loader = [\"native\", \"lerobot\"]\n\
             [run]\nrepeats = 2\n",
        );
        let plan = plan(&config, "pusht", tch::Device::Cpu).unwrap();
        let base = config.loader.knobs.config();
        let configs: Vec<_> = plan.cells.iter().map(|c| c.loader_config(&base)).collect();
        let knobs: Vec<_> = configs
            .iter()
            .map(|c| (c.seed, c.drop_n_last_frames, c.ordered, c.pin_memory))
            .collect();
        // Native and LeRobot, then the second repeat (another seed): each loader's cells keep
        // the other's knobs at their defaults (LeRobot's has no unordered delivery, the native
        // loader no pinned DataLoader).
        let expected =
            [(5, Some(3), false, false), (5, Some(3), true, true), (6, Some(3), false, false)];
        assert_eq!(knobs[..3], expected);
    }

    #[test]
    fn a_native_only_knob_is_an_axis_of_the_native_loader_only() {
        let threads = &LoaderKnob::DECODER_THREADS;
        let config = config(&format!(
            "[dataset]\nsynth = \"pusht\"\n[loader]\nworkers = [1, 2]\nbatch = [16]\n\
             {} = [1, 2]\nloader = [\"native\", \"lerobot\"]\n",
            threads.key
        ));
        let plan = plan(&config, "pusht", tch::Device::Cpu).unwrap();
        let cells: Vec<_> = plan
            .cells
            .iter()
            .map(|c| (c.loader.to_string(), threads.get(&c.knobs), c.knobs.workers))
            .collect();
        let native = |t: &str, w| ("native".to_string(), t.to_string(), w);
        let lerobot = |w| ("lerobot".to_string(), "1".to_string(), w);
        assert_eq!(
            cells,
            [
                native("1", 1),
                native("1", 2),
                native("2", 1),
                native("2", 2),
                lerobot(1),
                lerobot(2)
            ]
        );
        let ids: std::collections::HashSet<_> = plan.cells.iter().map(Cell::id).collect();
        assert_eq!(ids.len(), 6, "every cell has its own id");
    }

    #[test]
    fn the_trace_cell_must_be_in_the_grid() {
        let text = "[dataset]\nsynth = \"pusht\"\n[loader]\nworkers = [0, 2]\n[run]\ntrace_cell = ";
        let traced = plan(&config(&format!("{text}\"2,16\"\n")), "p", tch::Device::Cpu).unwrap();
        assert_eq!((traced.cells[traced.traced].knobs.workers, traced.traced), (2, 1));
        // A config made in code, unchecked (a loaded one is refused by its check already).
        let unchecked: SweepConfig = toml::from_str(&format!("{text}\"3,16\"\n")).unwrap();
        let missing = plan(&unchecked, "p", tch::Device::Cpu);
        assert!(missing.unwrap_err().to_string().contains("\"3,16\" is not a cell of the sweep"));
    }
}
