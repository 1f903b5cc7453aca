//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The real, partially downloaded g1 dataset, or None (with a visible note) where it is absent.
pub fn g1_partial() -> Option<PathBuf> {
    let path = feedbench::testdata::g1_partial_root();
    if path.join("meta/info.json").is_file() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: g1-partial dataset not found at {} (set FEEDBENCH_G1_PARTIAL)",
            path.display()
        );
        None
    }
}
