//! feedbench: a native reader of LeRobot datasets and a benchmark of the data loader that
//! feeds a diffusion-policy training step.
//!
//! Data flows one way (see DESIGN.md): [`dataset`] reads the format, [`loader`] turns a
//! dataset into batches, `model` consumes them and `bench` measures all three.

pub mod bench;
pub mod config;
pub mod dataset;
pub mod loader;
pub mod model;
pub mod testdata;
