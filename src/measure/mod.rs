//! One measurement and its statistics, beneath every study: `phase` measures a loader, a
//! model step or the two together (both loaders, native and LeRobot's, behind one trait) and
//! makes their figures; `loader_run` is one measured run of a fresh loader, as compare, the
//! guard and the layout study repeat it; `model_table` the `model` command's phases; `stats`,
//! `change` (B against A, with its interval and decision) and `verdict` judge the figures;
//! `system` names the machine they were measured on, `workload` the work in one comparable
//! value (`fingerprint` the dataset's part), and `change_points` reads a history of runs for
//! shifts. It knows the dataset, the loader and the model together, and nothing of the
//! studies (`bench`) that run it.

pub mod change;
pub mod change_points;
pub mod fingerprint;
pub mod loader_run;
pub mod model_table;
pub mod phase;
pub mod stats;
pub mod system;
pub mod verdict;
pub mod workload;
