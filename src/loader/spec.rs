//! The one builder of a loader: a dataset, its episodes and window, and the knobs
//! ([`LoaderSpec`]), for the command line, the sweep and the tests alike.

use std::path::PathBuf;
use std::sync::Arc;

use super::config::LoaderConfig;
use super::pipeline::{Loader, LoaderError};
use crate::dataset::{
    Dataset, DatasetError, DatasetOptions, EpisodeList, FrameMatch, Window, WindowChoice,
};

/// What a loader reads and how: the dataset, its episodes and window, and the knobs.
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderSpec {
    /// The dataset root.
    pub dataset: PathBuf,
    /// Only these episodes; all when None.
    pub episodes: Option<EpisodeList>,
    /// The sample window.
    pub window: WindowChoice,
    /// How a query time finds its video frame.
    pub frames: FrameMatch,
    /// The knobs.
    pub config: LoaderConfig,
    /// Batches recorded once (global frame indices, in order) that the loader reads exactly,
    /// epoch after epoch, in place of its sampler's: one batch order for every reader (`compare
    /// --readers`). None: the sampler's.
    pub replay: Option<Arc<Vec<Vec<usize>>>>,
}

impl LoaderSpec {
    /// Opens the dataset (its selected episodes) and checks the window against it.
    pub fn open(&self) -> Result<(Arc<Dataset>, Window), DatasetError> {
        let options = DatasetOptions {
            episodes: self.episodes.as_ref().map(|e| e.indices().to_vec()),
            tolerance_s: self.frames.tolerance_s,
            contract: self.frames.contract,
        };
        let dataset = Dataset::open_with(&self.dataset, &options)?;
        let window = dataset.window(&self.window.spec())?;
        Ok((Arc::new(dataset), window))
    }

    /// Opens the dataset and makes the loader.
    pub fn build(&self) -> Result<Loader, LoaderError> {
        let (dataset, window) = self.open().map_err(LoaderError::Dataset)?;
        self.build_on(&dataset, &window)
    }

    /// Makes the loader over `dataset` and `window`: this spec's dataset as
    /// [`LoaderSpec::open`] opened it once, shared by the loaders of many specs that differ
    /// only in their knobs (a sweep's cells).
    pub fn build_on(&self, dataset: &Arc<Dataset>, window: &Window) -> Result<Loader, LoaderError> {
        let loader = Loader::new(dataset.clone(), window.clone(), self.config.clone())?;
        Ok(match &self.replay {
            Some(batches) => loader.replaying(batches.clone()),
            None => loader,
        })
    }
}
