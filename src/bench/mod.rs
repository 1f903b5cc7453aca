//! Measurement: timing trees, phases, sweeps and reports. The only module that knows about
//! the dataset, the loader and the model together.

pub mod phase;
pub mod report;
pub mod results;
pub mod stats;
pub mod sweep;
pub mod system;
pub mod timing;
pub mod trace;
pub mod verdict;
