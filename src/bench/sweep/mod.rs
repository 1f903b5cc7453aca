//! The sweep: its config, the cells of its grid and their knobs (each defined once), the plan
//! that orders them, the run that measures each in three phases, and the results file. Its
//! config's pieces serve every study's config: `knob_values` reads the loader's knobs as a
//! config gives them (a sweep's axes, a guard cell, the layout study's `[measure]`).

pub mod cell;
pub mod config;
pub mod knob;
pub mod knob_axes;
pub mod knob_values;
pub mod plan;
pub mod results;
mod run;
mod workload;

pub use run::{
    config_text, dataset_name, prepare_dataset, results_path, root_names, run_sweep, SweepError,
};
pub(crate) use run::{model_key, run_cell, CellPhases, PhaseEnds, SweepContext};
