//! What a report compares, as data: the two loaders cell by cell and the fewest workers each
//! needs ([`LoaderComparison`]), and several roots of one dataset ([`RootComparison`]).
//! [`loaders`](super::loaders) and [`roots`](super::roots) find and lay them out.

/// A cell measured with both loaders: indices into `Report::rows`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoaderPair {
    /// The native loader's row.
    pub native: usize,
    /// LeRobot's row with the same knobs.
    pub lerobot: usize,
}

/// One loader's fewest workers keeping the step fed in a group, or how close it came.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fed {
    /// The fewest workers whose train phase is not input-bound (below
    /// [`MODERATELY_INPUT_BOUND_PCT`](crate::measure::verdict::MODERATELY_INPUT_BOUND_PCT)); None when no worker count measured is.
    pub workers: Option<usize>,
    /// The least input-bound row: its workers and input-bound %, median over steps.
    pub least_input_bound: (usize, f64),
    /// The most workers measured.
    pub most_workers: usize,
}

/// Cells sharing every knob but workers, prefetch and the loader: both loaders' [`Fed`].
#[derive(Debug, Clone, PartialEq)]
pub struct FedGroup {
    /// The knobs that tell it from the other groups (empty when it is alone).
    pub label: String,
    /// The native loader's.
    pub native: Fed,
    /// LeRobot's.
    pub lerobot: Fed,
}

/// The two loaders side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct LoaderComparison {
    /// Every cell measured with both, in row order.
    pub pairs: Vec<LoaderPair>,
    /// Per group, the fewest workers keeping the step fed.
    pub fed: Vec<FedGroup>,
}

/// The roots compared and, per cell, each root's row.
#[derive(Debug, Clone, PartialEq)]
pub struct RootComparison {
    /// The roots, as the cells name them, in the order the sweep measured them (the first is
    /// the one the others are held to).
    pub roots: Vec<String>,
    /// Per cell (every knob but the dataset), an index into `Report::rows` for each root,
    /// None where that root's cell was not measured.
    pub cells: Vec<Vec<Option<usize>>>,
}
