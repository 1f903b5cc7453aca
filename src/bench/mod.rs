//! The studies and their reports, above one measurement (`crate::measure`). Each study has
//! its folder: `sweep` (and `cluster`, a sweep beyond one machine), `compare` (A against B,
//! and the CI guard), `layout_study` and `tune`; `report` shows a sweep and lays out every
//! report's tables; `export` writes every study's outputs; `store` keeps their results;
//! `train_log` reads a lerobot-train log; every
//! study tells its watcher what it does through `events`.

pub mod cluster;
pub mod compare;
pub mod events;
pub mod export;
pub mod format;
pub mod layout_study;
pub mod report;
pub mod store;
pub mod sweep;
pub mod train_log;
pub mod tune;
