//! The phases as text, as `load`, `train` and `model` print them: throughput, CPU per sample,
//! the decode-only limit and the timing tree; the step's figures and parts.

use std::fmt::{self, Write as _};

use crate::dataset::bytes::Bytes;
use crate::loader::lerobot::Startup;
use crate::measure::phase::{
    CacheFigures, LoaderPhase, MemoryFigures, ModelPhase, RankSpread, SampleStep, SampleSteps,
    StepSample, TrainPhase,
};
use crate::measure::stats::median;

impl fmt::Display for LoaderPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        writeln!(
            f,
            "loader: {} workers, prefetch {}, batch {}, {:?} sampler{}",
            c.workers,
            c.prefetch,
            c.batch_size,
            c.sampler,
            if c.ordered { "" } else { ", unordered" }
        )?;
        writeln!(
            f,
            "{:.1} samples/s  {:.2} batches/s  {:.1} MB/s  {:.3} CPU ms/sample ({:.3} process)  ({} batches, {} samples in {:.2} s)",
            self.samples_per_s, self.batches_per_s, self.mb_per_s, self.cpu_ms_per_sample, self.process_cpu_ms_per_sample, self.batches, self.samples, self.wall_s
        )?;
        if let Some(versions) = &self.lerobot {
            writeln!(
                f,
                "LeRobot's loader: lerobot {}, torch {}, Python {} ({}), video backend {}; CPU \
                 and memory of the main process and its workers together",
                versions.lerobot,
                versions.torch,
                versions.python,
                versions.executable,
                versions.video_backend.as_deref().unwrap_or("none")
            )?;
        }
        if let Some(peak) = self.peak_rss_bytes {
            let what = if self.lerobot.is_some() { "peak memory" } else { "peak RSS" };
            writeln!(f, "{what} {:.1} MB", peak as f64 / 1e6)?;
        }
        if let Some(first) = self.first_batch_s {
            writeln!(f, "first batch after {:.2} s", first)?;
        }
        if let Some(order) = &self.order {
            writeln!(f, "{}", order.line())?;
        }
        if let Some(startup) = &self.startup {
            write!(f, "{}", startup_text(startup))?;
        }
        if let Some(memory) = &self.memory {
            writeln!(f, "{}", memory_text(memory))?;
        }
        if let Some(ranks) = &self.ranks {
            write!(f, "{}", ranks_text(ranks, "loader"))?;
        }
        if let Some(remote) = &self.remote {
            write!(f, "{remote}")?;
        }
        if let Some(limit) = &self.decode_limit {
            writeln!(
                f,
                "decode-only limit {:.1} samples/s ({} threads × {:.2} frames/sample × {:.0} CPU µs/frame): {:.0} % of it",
                limit.samples_per_s,
                limit.threads,
                limit.frames_per_sample,
                limit.cpu_us_per_frame,
                limit.fraction * 100.0
            )?;
        }
        if let Some(steps) = SampleSteps::of(&self.timing, self.samples) {
            writeln!(f, "per sample: {}", sample_steps(&steps))?;
        }
        if let Some(cache) = &self.cache {
            writeln!(f, "{}", cache_text(cache))?;
        }
        write!(f, "{}", self.timing.render(self.samples))
    }
}

/// A DataLoader's start taken apart: what each worker was sent, when the workers started and
/// gave their first batches (the earliest and the latest), and the warning where there is one.
fn startup_text(startup: &Startup) -> String {
    let sent = match (&startup.pickled_bytes, &startup.largest_part) {
        (None, _) => "nothing pickled to the workers (forked from this process)".to_string(),
        (Some(bytes), None) => {
            format!("{} of the dataset pickled to each worker", Bytes::of(*bytes))
        }
        (Some(bytes), Some(part)) => format!(
            "{} of the dataset pickled to each worker (its largest part `{}`, {})",
            Bytes::of(*bytes),
            part.name,
            Bytes::of(part.bytes)
        ),
    };
    let span = |values: Vec<f64>| match (
        values.iter().copied().reduce(f64::min),
        values.iter().copied().reduce(f64::max),
    ) {
        (Some(low), Some(high)) => format!("{low:.2}–{high:.2} s"),
        _ => "unsaid".to_string(),
    };
    let started = span(startup.workers.iter().filter_map(|w| w.started_s).collect());
    let first = span(startup.workers.iter().filter_map(|w| w.first_batch_s).collect());
    let mut out = format!(
        "start ({}, {} workers): {sent}; workers ready after {started}, their first batches after \
         {first}\n",
        startup.start_method,
        startup.workers.len()
    );
    if let Some(warning) = &startup.warning {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

/// A loader phase's frame cache: what it held, how many frames it served, and the epochs'
/// rates before and after it filled.
fn cache_text(cache: &CacheFigures) -> String {
    let mut out = String::new();
    let gb = |bytes: u64| bytes as f64 / 1e9;
    out.push_str(&format!(
        "frame cache: {:.2} of {:.2} GB held ({} frames); {:.0} % of the frames written \
                 were copied from it",
        gb(cache.held_bytes),
        gb(cache.budget_bytes),
        cache.frames,
        cache.hit_pct
    ));
    let rate = |r: Option<f64>| r.map_or("none measured".into(), |r| format!("{r:.1}"));
    out.push_str(&format!(
        "; samples/s in epoch 1 {}, later epochs {}",
        rate(cache.first_epoch_samples_per_s),
        rate(cache.later_epochs_samples_per_s)
    ));
    if let (Some(first), Some(later)) =
        (cache.first_epoch_samples_per_s, cache.later_epochs_samples_per_s)
    {
        out.push_str(&format!(" ({:.2}×)", later / first));
    }
    out
}

/// The frames and the CPU of each step of a sample's way from packet to batch, in words:
/// "2.41 frames decoded, 2.00 converted; CPU ms: demux 0.019, decode 2.842, …" (steps that
/// took nothing left out).
pub fn sample_steps(steps: &SampleSteps) -> String {
    let mut frames = format!(
        "{:.2} frames decoded, {:.2} converted",
        steps.frames_decoded, steps.frames_converted
    );
    if steps.frames_cached > 0.0 {
        frames.push_str(&format!(", {:.2} copied from the cache", steps.frames_cached));
    }
    let cpu: Vec<String> = SampleStep::ALL
        .iter()
        .filter(|&&step| steps.ms(step) > 0.0 || step == SampleStep::Decode)
        .map(|&step| format!("{} {:.3}", step.name(), steps.ms(step)))
        .collect();
    format!("{frames}; CPU ms: {}", cpu.join(", "))
}

impl fmt::Display for TrainPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "train: {:.1} samples/s ({} steps, {} samples in {:.2} s)",
            self.samples_per_s, self.steps, self.samples, self.wall_s
        )?;
        writeln!(
            f,
            "per step (median ms): wait {:.1}  h2d {:.1}  compute {:.1}  whole {:.1}   data_s {:.3}  updt_s {:.3}",
            self.wait.median_ms,
            self.h2d.median_ms,
            self.compute.median_ms,
            self.step.median_ms,
            self.data_s,
            self.updt_s
        )?;
        if let Some(staging) = &self.staging {
            writeln!(f, "batches to the device: {staging}")?;
        }
        let ib = &self.input_bound;
        let copy = match ib.copy_pct > 0.0 {
            true => format!(", of it the copy to the device {:.1} %", ib.copy_pct),
            false => String::new(),
        };
        writeln!(
            f,
            "input-bound {:.1} % (median), {:.1} % (p95){copy}: {} — {}",
            ib.median_pct,
            ib.p95_pct,
            ib.verdict,
            ib.dominant_side()
        )?;
        if let Some(au) = self.au_pct {
            let waited = self
                .wait_ms_per_step
                .map_or(String::new(), |ms| format!("; {ms:.1} ms a step not computed"));
            writeln!(
                f,
                "accelerator utilisation {au:.1} % (the step's compute over the wall, the first \
                 step left out, as MLPerf Storage scores a loader; its pass line is 90 %){waited}"
            )?;
        }
        if let Some(remote) = &self.remote {
            write!(f, "{remote}")?;
        }
        if !self.modules.is_empty() {
            let part = |f: fn(&StepSample) -> f64| median(self.per_step.iter().map(f));
            let forward = part(|s| s.forward_ms);
            let modules: Vec<String> = (self.modules.iter())
                .map(|(name, ms)| format!("{name} {ms:.1} ({:.0} %)", 100.0 * ms / forward))
                .collect();
            writeln!(
                f,
                "step (median ms): forward {forward:.1}  backward {:.1}  optimizer {:.1}; \
                 forward by module: {}",
                part(|s| s.backward_ms),
                part(|s| s.optimizer_ms),
                modules.join(", ")
            )?;
        }
        if let Some(bytes) = self.peak_device_bytes {
            writeln!(f, "peak device memory {:.2} GB a step", bytes as f64 / 1e9)?;
        }
        if let Some(memory) = &self.memory {
            writeln!(f, "{}", memory_text(memory))?;
        }
        if let Some(ranks) = &self.ranks {
            write!(f, "{}", ranks_text(ranks, "train"))?;
        }
        write!(f, "{}", self.timing.render(self.samples))
    }
}

/// What the process tree held, as `load` and `train` print it: its PSS, a worker's, the slope
/// and whether it grows.
fn memory_text(memory: &MemoryFigures) -> String {
    let worker = memory
        .per_worker_pss_mb
        .map_or(String::new(), |mb| format!(", {mb:.0} MB of it a worker process"));
    // A slope over a short window, extrapolated to a minute, is noise unless it is flagged.
    let over_the_steps = match memory.growing {
        true => format!(
            "{:+.1} MB a minute over the measured steps ({} reads): it grows beyond noise (a \
             leak, or caches still filling)",
            memory.pss_slope_mb_per_min, memory.reads
        ),
        false => format!("no growth beyond noise over the measured steps ({} reads)", memory.reads),
    };
    format!(
        "memory held: {:.0} MB PSS (shared pages counted once){worker}; {over_the_steps}",
        memory.pss_mb
    )
}

/// Ranks measured at once, as `load` and `train` print them: which is slowest (the figures
/// above are its own), the spread, and a line per rank.
fn ranks_text(spread: &RankSpread, phase: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ranks measured at once: the {phase} figures above are rank {}'s, the slowest (it \
         waits most for its data, and each step waits for it); the ranks' waits spread over \
         {:.1} % of its step",
        spread.ranks.len(),
        spread.slowest_rank,
        spread.rank_spread_pct
    );
    for rank in &spread.ranks {
        let bound =
            rank.input_bound_pct.map_or(String::new(), |pct| format!(", input-bound {pct:.1} %"));
        let first =
            rank.first_batch_s.map_or(String::new(), |s| format!(", first batch after {s:.2} s"));
        let _ = writeln!(
            out,
            "  rank {} (pid {}): {:.1} samples/s{bound}{first}",
            rank.rank, rank.pid, rank.samples_per_s
        );
    }
    out
}

/// A `model` phase as `feedbench model` prints it: the step's figures, phases and parts.
pub fn model_row(r: &ModelPhase) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} on {} ({}, {} threads), batch {}: {} trainable parameters",
        r.model,
        r.device,
        r.dtype,
        r.threads,
        r.batch,
        group_thousands(r.parameters)
    );
    let _ = writeln!(
        out,
        "  step ms: median {:.1}  p95 {:.1}  min {:.1}  max {:.1}   {:.1} samples/s",
        r.step.median_ms, r.step.p95_ms, r.step.min_ms, r.step.max_ms, r.samples_per_s
    );
    let _ = writeln!(
        out,
        "  phases (median ms): h2d {:.2}  forward {:.1}  backward {:.1}  optimizer {:.1}",
        r.h2d.median_ms, r.forward.median_ms, r.backward.median_ms, r.optimizer.median_ms
    );
    if !r.parts.is_empty() {
        let _ = writeln!(out, "  {:<10} {:>9} {:>7}", "component", "mean ms", "share");
        for p in &r.parts {
            let _ = writeln!(out, "  {:<10} {:>9.2} {:>6.1}%", p.name, p.ms, p.percent);
        }
    }
    let _ = match r.peak_memory_bytes {
        Some(b) => writeln!(out, "  peak memory (process RSS): {:.0} MiB", b as f64 / 1048576.0),
        None => writeln!(out, "  peak device memory: not measured (not exposed through tch)"),
    };
    if let Some(loss) = r.last_loss {
        let _ = writeln!(out, "  last loss: {loss:.4}");
    }
    if let Some(s) = r.speedup_over_f32 {
        let _ = writeln!(out, "  bf16 speed-up over f32: {s:.2}×");
    }
    let _ = writeln!(out);
    out
}

/// One line per `model` phase: batch, dtype, step ms, samples/s, backbone share, speed-up.
pub fn model_summary(rows: &[ModelPhase]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>6} {:>5} {:>10} {:>9} {:>10} {:>9} {:>8}",
        "batch", "dtype", "median ms", "p95 ms", "samples/s", "backbone", "speed-up"
    );
    for r in rows {
        let backbone = r.parts.iter().find(|p| p.name == "backbone").map(|p| p.percent);
        let _ = writeln!(
            out,
            "{:>6} {:>5} {:>10.1} {:>9.1} {:>10.1} {:>9} {:>8}",
            r.batch,
            r.dtype,
            r.step.median_ms,
            r.step.p95_ms,
            r.samples_per_s,
            backbone.map_or("-".into(), |p| format!("{p:.1}%")),
            r.speedup_over_f32.map_or("-".into(), |s| format!("{s:.2}×"))
        );
    }
    out
}

/// feedbench's tch step beside LeRobot's PyTorch step, row by row (same batch and dtype):
/// median step ms of each, how many times as fast the tch step is (`tch speed`), and both
/// parameter counts.
pub fn model_parity(tch: &[ModelPhase], lerobot: &[ModelPhase]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tch step beside LeRobot's (PyTorch), same preset, shapes, batch, device and dtype:"
    );
    let _ = writeln!(
        out,
        "{:>6} {:>5} {:>11} {:>15} {:>9} {:>13} {:>13}",
        "batch", "dtype", "tch ms", "LeRobot ms", "tch speed", "tch params", "LeRobot params"
    );
    for t in tch {
        let Some(l) = lerobot.iter().find(|l| l.batch == t.batch && l.dtype == t.dtype) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{:>6} {:>5} {:>11.1} {:>15.1} {:>8.2}× {:>13} {:>13}",
            t.batch,
            t.dtype,
            t.step.median_ms,
            l.step.median_ms,
            l.step.median_ms / t.step.median_ms,
            group_thousands(t.parameters),
            group_thousands(l.parameters),
        );
    }
    out
}

fn group_thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_says_a_slope_only_where_it_grows() {
        let steady = MemoryFigures {
            pss_mb: 427.0,
            per_worker_pss_mb: None,
            pss_slope_mb_per_min: 3084.2,
            growing: false,
            reads: 2,
        };
        let text = memory_text(&steady);
        assert!(text.ends_with("no growth beyond noise over the measured steps (2 reads)"));
        assert!(!text.contains("3084"), "a short window's slope is noise: {text}");
        let leaking = MemoryFigures { growing: true, per_worker_pss_mb: Some(300.0), ..steady };
        let text = memory_text(&leaking);
        assert!(text.contains("300 MB of it a worker") && text.contains("+3084.2 MB a minute"));
    }
}
