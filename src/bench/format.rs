//! The one home of the numbers studies print: throughputs, milliseconds, decibels and plurals,
//! each with as many digits as it deserves, for every report, answer and page; and the line
//! naming the machine they were measured on.

use crate::dataset::bytes::Bytes;
use crate::measure::system::SystemInfo;

/// A throughput with as many decimals as it deserves; `inf` for an unbounded ceiling.
pub fn rate(x: f64) -> String {
    if x.is_infinite() {
        "inf".into()
    } else if !x.is_finite() {
        "-".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Milliseconds with three significant digits or so.
pub fn millis(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// Decibels, two decimals (∞ for identical frames).
pub fn db(x: f64) -> String {
    if x.is_infinite() {
        "∞ dB".into()
    } else {
        format!("{x:.2} dB")
    }
}

/// `s` after a count other than one.
pub fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The system line: CPU, cores, GPU, memory, OS and versions.
pub fn system_line(system: &SystemInfo) -> String {
    let memory = system
        .memory_bytes
        .map(|b| format!(", {:.0} memory", Bytes::of(b).gb()))
        .unwrap_or_default();
    format!(
        "{} ({} cores{memory}), GPU {}, {}; feedbench {}, libtorch {}, libavcodec {}",
        system.cpu,
        system.cores,
        system.gpu.as_deref().unwrap_or("none"),
        system.os,
        system.feedbench,
        system.libtorch,
        system.libavcodec
    )
}
