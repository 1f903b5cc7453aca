//! Beyond one machine, on the scheduler the user already has (Slurm, or Kubernetes indexed
//! jobs): a sweep's plan written once (`sweep plan`), its cells shared among the tasks of a
//! job array (`sweep run`), each cell's result in a file of its own, and the files merged into
//! one report (`merge`); and the per-rank figures of a multi-process `load` or `train`.
//!
//! Nothing here schedules: a task learns its share and its CPUs from the environment the
//! scheduler gives it, and every file is written whole or not at all, so a task that is
//! killed, requeued or resubmitted loses and repeats no finished cell.

pub mod budget;
pub mod cells;
mod error;
pub mod merge;
pub mod plan_file;
pub mod ranks;
pub mod task;

pub use budget::CpuBudget;
pub use error::ClusterError;
