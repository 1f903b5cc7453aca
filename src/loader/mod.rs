//! The loader pipeline: samplers, workers and batches, the decoded-frame cache knob, and the builder
//! of a loader from its knobs.

pub mod batch;
pub mod config;
pub mod error;
pub mod knobs;
pub mod lerobot;
pub mod pipeline;
mod pool;
pub mod sampler;
pub mod spec;
