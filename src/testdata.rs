//! Where the project's tests and benches find the real LeRobot dataset they read.

use std::path::PathBuf;

/// The real, partially downloaded LeRobot v2.1 dataset (Unitree G1) that tests and benches
/// read: `$FEEDBENCH_G1_PARTIAL`, else `../shared/datasets/g1-partial` beside this crate.
pub fn g1_partial_root() -> PathBuf {
    std::env::var_os("FEEDBENCH_G1_PARTIAL").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/datasets/g1-partial")
    })
}
