//! The loader pipeline: samplers, workers and batches.

pub mod batch;
