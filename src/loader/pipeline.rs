//! The loader: batches in sampler order, built by the consuming thread (`workers = 0`) or by
//! worker threads with `prefetch` batches in flight each — PyTorch `DataLoader` semantics.
//!
//! [`Loader`] (in `loader`) holds the dataset, the window and the checked knobs; its epochs'
//! plans (`plans`) order the batches; each thread builds them with its own decoder
//! (`builder`); [`Batches`] (in `stream`) is an epoch's or a run's batches, from the
//! consuming thread or from workers.

mod builder;
mod loader;
mod plans;
mod stream;

pub use super::error::LoaderError;
pub use super::pool::LoadedBatch;
pub use loader::Loader;
pub use stream::Batches;
