//! Measurement: timing trees, phases, sweeps and reports. The only module that knows about
//! the dataset, the loader and the model together. Each study has its folder: `sweep` (and
//! `cluster`, a sweep beyond one machine), `compare` (A against B, and the CI guard) and
//! `layout_study`; `phase` measures for all of them, `report` shows a sweep; beside them
//! `knob_values` reads the loader's knobs from each study's config, `table` lays out every
//! report's tables, and `train_log` reads a lerobot-train log.

pub mod change;
pub mod cluster;
pub mod compare;
pub mod jsonl;
pub mod knob_values;
pub mod layout_study;
pub mod loader_run;
pub mod lock;
pub mod model_table;
pub mod phase;
pub mod report;
pub mod stats;
pub mod sweep;
pub mod system;
pub mod table;
pub mod train_log;
pub mod tune;
pub mod verdict;
