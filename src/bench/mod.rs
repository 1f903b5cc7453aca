//! The studies and their reports, above one measurement (`crate::measure`). Each study has
//! its folder: `sweep` (and `cluster`, a sweep beyond one machine), `compare` (A against B,
//! and the CI guard), `layout_study` and `tune`; `report` shows a sweep; beside them
//! `knob_values` reads the loader's knobs from each study's config, `table` lays out every
//! report's tables, and `train_log` reads a lerobot-train log.

pub mod cluster;
pub mod compare;
pub mod jsonl;
pub mod knob_values;
pub mod layout_study;
pub mod lock;
pub mod report;
pub mod sweep;
pub mod table;
pub mod train_log;
pub mod tune;
