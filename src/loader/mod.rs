//! The loader pipeline: samplers, workers and batches.

pub mod batch;
pub mod pipeline;
pub mod sampler;
