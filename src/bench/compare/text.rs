//! A comparison as text, as `feedbench compare` prints it: the verdict in one line, the wall
//! throughput, then CPU per sample by stage for A and B. It stands beside the comparison it
//! renders, so that no report has to import `compare`.

use std::fmt::Write as _;

use super::readers::{ReadersComparison, Summary};
use super::{Comparison, Side};
use crate::measure::change::{Change, Decision};

/// The verdict on B's CPU per sample against A's, in one line.
pub fn verdict(c: &Comparison) -> String {
    let ci = c.cpu.interval();
    match c.cpu_decision {
        Decision::Higher => {
            format!("B is {:.1} % slower than A ({ci}) in CPU ms per sample", c.cpu.percent)
        }
        Decision::Lower => {
            format!("B is {:.1} % faster than A ({ci}) in CPU ms per sample", -c.cpu.percent)
        }
        Decision::NoDifference => format!("no difference beyond noise ({ci})"),
        Decision::Undecided => format!(
            "undecided: the runs spread too widely ({ci}); measure longer (--repeats, --batches)"
        ),
    }
}

/// The comparison as `feedbench compare` prints it.
pub fn render(c: &Comparison, a: &str, b: &str) -> String {
    let mut out = String::new();
    let repeats = c.values(Side::A, |r| r.cpu_ms_per_sample).len();
    let _ = writeln!(out, "A: {a}\nB: {b}\n{repeats} runs of each, interleaved A B B A A B …\n");
    let _ = writeln!(out, "{}", verdict(c));
    let per_sample: Vec<String> = c
        .stages
        .iter()
        .filter_map(|s| s.change.map(|change| format!("{} {:+.1} %", s.stage, change.percent)))
        .collect();
    if !per_sample.is_empty() {
        let _ = writeln!(out, "per sample: {}", per_sample.join(", "));
    }
    let median_of = |side, figure: fn(&crate::measure::loader_run::RunFigures) -> f64| {
        crate::measure::stats::median(c.values(side, figure))
    };
    let _ = writeln!(
        out,
        "samples/s: A {:.1}, B {:.1}, {:+.1} % ({})",
        median_of(Side::A, |r| r.samples_per_s),
        median_of(Side::B, |r| r.samples_per_s),
        c.throughput.percent,
        c.throughput.interval()
    );
    let _ =
        writeln!(out, "\n{:<14} {:>10} {:>10} {:>9}  95 % CI", "CPU ms/sample", "A", "B", "change");
    let _ = writeln!(
        out,
        "{:<14} {:>10.3} {:>10.3} {:>+8.1}%  {}",
        "loader",
        median_of(Side::A, |r| r.cpu_ms_per_sample),
        median_of(Side::B, |r| r.cpu_ms_per_sample),
        c.cpu.percent,
        bounds(&c.cpu)
    );
    for s in &c.stages {
        let (change, ci) = s.change.map_or(("-".into(), String::new()), |ch| {
            (format!("{:+.1}%", ch.percent), bounds(&ch))
        });
        let _ = writeln!(
            out,
            "  {:<10} {:>10.3} {:>10.3} {:>9}  {ci}",
            s.stage, s.a_ms, s.b_ms, change
        );
    }
    out
}

/// `low to high %`.
fn bounds(change: &Change) -> String {
    format!("{:+.1} to {:+.1} %", change.low, change.high)
}

/// Readers compared on one order, as `feedbench compare --readers` prints it: the order, whether
/// every reader's items were equal, then each reader's figures with their intervals.
pub fn readers(c: &ReadersComparison, on: &str) -> String {
    let mut out = String::new();
    let names: Vec<&str> = c.readers.iter().map(|r| r.reader.as_str()).collect();
    let batch = c.order.batches.first().map_or(0, Vec::len);
    let runs = c.readers.first().map_or(0, |r| r.samples_per_s.len());
    let _ = writeln!(
        out,
        "on: {on}\norder: {} batches of {batch} recorded by {}, read by {} alike\n{runs} runs \
         of each, interleaved",
        c.order.batches.len(),
        c.order.recorded_by,
        names.join(", ")
    );
    match &c.first_difference {
        None => {
            let _ = writeln!(
                out,
                "items: every item of the {} batches equal across {}",
                c.batches_checked,
                names.join(", ")
            );
        }
        Some(d) => {
            let _ = writeln!(
                out,
                "items DIFFER: {}'s first differs from {}'s at frame index {} (batch {})",
                d.reader,
                names.first().copied().unwrap_or_default(),
                d.index,
                d.batch
            );
        }
    }
    let summary = |s: &Summary, digits: usize| {
        format!("{:.digits$} ({:.digits$}–{:.digits$})", s.median, s.low, s.high)
    };
    for r in &c.readers {
        let first = crate::measure::stats::median(r.first_batch_s.iter().copied());
        let memory = r.peak_memory_bytes.iter().map(|&b| b as f64 / 1e6);
        let mut line = format!(
            "{}: {} samples/s, {} CPU ms/sample (medians, 95 % CI), first batch {first:.2} s, \
             peak memory {:.0} MB",
            r.reader,
            summary(&r.samples_per_s_median, 1),
            summary(&r.cpu_ms_per_sample_median, 3),
            crate::measure::stats::median(memory)
        );
        if let Some(order) = &r.order {
            line.push_str(&format!("; {}", order.line()));
        }
        if let Some(change) = &r.samples_per_s_change {
            let reference = names.first().copied().unwrap_or_default();
            line.push_str(&format!(
                "; samples/s {:+.1} % against {reference} ({})",
                change.percent,
                change.interval()
            ));
        }
        let _ = writeln!(out, "{line}");
    }
    out
}
