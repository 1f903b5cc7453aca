//! The model's errors: [`ModelError`].

use super::shapes::ShapesError;

/// Errors of the model: bad configuration, a batch that does not fit the model, or libtorch.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The configuration is inconsistent.
    #[error("model config: {0}")]
    Config(String),
    /// The batch does not match the model's shapes.
    #[error("batch does not fit the model: {0}")]
    Batch(String),
    /// The requested device is not available.
    #[error("device: {0}")]
    Device(String),
    /// The dataset lacks what the policy reads.
    #[error(transparent)]
    Shapes(#[from] ShapesError),
    /// LeRobot's step, run by the driver, failed (its message).
    #[error("{0}")]
    Lerobot(String),
    /// Ranks stepping together lost the others (their run ended).
    #[error("ranks at once: {0}")]
    Barrier(String),
    /// libtorch reported an error.
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}
