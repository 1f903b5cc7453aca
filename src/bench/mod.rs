//! Measurement: timing trees, phases, sweeps and reports. The only module that knows about
//! the dataset, the loader and the model together.

pub mod cell;
pub mod change;
pub mod cluster;
pub mod compare;
pub mod config;
pub mod guard;
pub mod knob;
pub mod layout;
pub mod loader_run;
pub mod model_table;
pub mod phase;
pub mod plan;
pub mod report;
pub mod results;
pub mod stats;
pub mod sweep;
pub mod system;
pub mod verdict;
