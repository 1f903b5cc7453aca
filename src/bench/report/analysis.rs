//! The analysis: repeats aggregated into rows, rows grouped, and per group the recommendation
//! (the knee of workers and the prefetch depth: `recommendation`) and the advice on its
//! loader. Statistics come from [`crate::measure::stats`]; the writers only lay it out.

use std::collections::HashMap;

use super::advice;
use super::model::{
    train_rate, Group, PlotGroup, Report, Row, RowRanks, HEATMAP_PLOT_STEM, INTERVAL_SEED,
    MIN_STEPS_FOR_INTERVAL, TRAIN_PLOT_STEM,
};
use super::recommendation::recommend;
use crate::bench::sweep::cell::Cell;
use crate::bench::sweep::cell::Knob;
use crate::bench::sweep::cell::KnobSet;
use crate::bench::sweep::results::CellResult;
use crate::loader::knobs::LoaderKnob;
use crate::measure::change::interval;
use crate::measure::phase::{DecodeLimit, LoaderPhase, SampleSteps};
use crate::measure::stats::{median, median_and_p95};
use crate::measure::verdict::Verdict;

/// Analyses a sweep's results: rows (repeats aggregated by their median), the recommendation
/// and the advice's diagnosis per group, and the plot groups. Pure: it reads nothing else.
pub fn render(results: &[CellResult]) -> Report {
    let mut runs: HashMap<Cell, Vec<&CellResult>> = HashMap::new();
    for result in results {
        let mut knobs = result.cell.clone();
        knobs.repeat = 0;
        runs.entry(knobs).or_default().push(result);
    }
    let mut rows: Vec<Row> =
        runs.into_iter().map(|(knobs, runs)| aggregate(knobs, &runs)).collect();
    rows.sort_by_key(|row| sort_key(&row.knobs));

    let distinct = |knob: Knob| {
        let mut values: Vec<String> = rows.iter().map(|r| knob.value(&r.knobs)).collect();
        values.dedup();
        values.sort();
        values.dedup();
        values
    };
    let (mut fixed, mut varying) = (Vec::new(), Vec::new());
    // A knob shown only where it differs from its default (the loader, decoder threads) is
    // named only where it varies, so that earlier sweeps' reports stay as they were.
    for knob in
        Knob::set(KnobSet::Group).into_iter().filter(|&k| k != Knob::Loader(&LoaderKnob::BATCH))
    {
        match distinct(knob).as_slice() {
            [one] if knob.def().unless.is_none() => fixed.push((knob, one.clone())),
            [] | [_] => {}
            _ => varying.push(knob),
        }
    }

    let mut groups: Vec<Group> = super::model::partition(&rows, &Knob::set(KnobSet::Group))
        .into_iter()
        .map(|(label, members)| Group {
            label,
            rows: members,
            recommendation: None,
            diagnosis: None,
        })
        .collect();
    for (g, group) in groups.iter_mut().enumerate() {
        for &i in &group.rows {
            rows[i].group = g;
        }
        group.recommendation = recommend(&rows, &group.rows);
        if let Some(rec) = &group.recommendation {
            rows[rec.row].recommended = true;
            group.diagnosis = Some(advice::diagnose(&rows, &group.rows, rec));
        }
    }

    let plots = plot_groups(&rows);
    let loaders = super::loaders::compare(&rows);
    let roots = super::roots::compare(results, &rows);
    Report {
        system: results.first().map(|r| r.system.clone()),
        results: results.len(),
        finished_unix_s: {
            let when = results.iter().map(|r| r.finished_unix_s);
            when.clone().min().zip(when.max())
        },
        rows,
        fixed,
        varying,
        groups,
        plots,
        loaders,
        roots,
        planned: None,
    }
}

/// Rows sort by the text of the knobs a plot shares, then the loader, then by batch size,
/// workers and prefetch as numbers.
fn sort_key(c: &Cell) -> impl Ord {
    let mut text: Vec<String> = Knob::set(KnobSet::Plot).iter().map(|k| k.value(c)).collect();
    text.push(Knob::Backend.value(c));
    (text, c.knobs.batch_size, c.knobs.workers, c.knobs.prefetch)
}

/// The median of every figure over a cell's repeats.
fn aggregate(knobs: Cell, runs: &[&CellResult]) -> Row {
    let med = |f: &dyn Fn(&CellResult) -> f64| median(runs.iter().map(|r| f(r)));
    let loaders: Vec<&LoaderPhase> = runs.iter().filter_map(|r| r.loader.as_ref()).collect();
    let loader_med = |f: fn(&LoaderPhase) -> f64| {
        (!loaders.is_empty()).then(|| median(loaders.iter().map(|l| f(l))))
    };
    let peaks = loaders.iter().filter_map(|l| l.peak_rss_bytes).map(|b| b as f64);
    let held = runs.iter().filter_map(|r| r.train.memory.as_ref()).map(|m| m.pss_mb * 1e6);
    let decode_limit = decode_limit_of(&loaders);
    let input_bound_pct = med(&|r| r.train.input_bound.median_pct);
    let input_bound_p95_pct = med(&|r| r.train.input_bound.p95_pct);
    let wait_shares: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.train.per_step.iter())
        .map(|s| 100.0 * s.wait_ms / (s.wait_ms + s.step_ms).max(f64::MIN_POSITIVE))
        .collect();
    let (wait_pct, wait_mean_pct) = match wait_shares.is_empty() {
        true => ((input_bound_pct, input_bound_p95_pct), input_bound_pct),
        false => {
            let mean = wait_shares.iter().sum::<f64>() / wait_shares.len() as f64;
            (median_and_p95(wait_shares), mean)
        }
    };
    let (train_iteration_ms, train_samples_per_s, train_interval) = train_figures(&knobs, runs);
    Row {
        repeats: runs.len(),
        loader_samples_per_s: loader_med(|l| l.samples_per_s),
        loader_cpu_ms_per_sample: loader_med(|l| l.cpu_ms_per_sample),
        loader_peak_rss_bytes: median_of_any(peaks).map(|b| b as u64),
        train_pss_bytes: median_of_any(held).map(|b| b as u64),
        train_first_batch_s: median_of_any(runs.iter().filter_map(|r| r.train.first_batch_s)),
        train_startup: runs.iter().find_map(|r| r.train.startup.clone()),
        au_pct: median_of_any(runs.iter().filter_map(|r| r.train.au_pct)),
        wait_ms_per_step: median_of_any(runs.iter().filter_map(|r| r.train.wait_ms_per_step)),
        ranks: runs.iter().find_map(|r| r.train.ranks.as_ref()).map(|spread| RowRanks {
            ranks: spread.ranks.len(),
            slowest_rank: spread.slowest_rank,
            spread_pct: spread.rank_spread_pct,
        }),
        decode_limit,
        stages: advice::stage_costs(&loaders),
        frames: loaders.iter().find_map(|l| l.frames),
        cache: loaders.iter().find_map(|l| l.cache.clone()),
        steps: SampleSteps::median(
            &loaders
                .iter()
                .filter_map(|l| SampleSteps::of(&l.timing, l.samples))
                .collect::<Vec<_>>(),
        ),
        model_samples_per_s: med(&|r| r.model.samples_per_s),
        model_step_ms: med(&|r| r.model.step.median_ms),
        train_samples_per_s,
        train_iteration_ms,
        train_interval,
        train_wait_ms: med(&|r| r.train.wait.median_ms),
        train_h2d_ms: med(&|r| r.train.h2d.median_ms),
        train_compute_ms: med(&|r| r.train.compute.median_ms),
        train_step_ms: {
            let steps: Vec<f64> =
                runs.iter().flat_map(|r| r.train.per_step.iter()).map(|s| s.step_ms).collect();
            match steps.is_empty() {
                true => med(&|r| r.train.h2d.median_ms + r.train.compute.median_ms),
                false => median(steps),
            }
        },
        remote: runs.iter().find_map(|r| {
            let loader = r.loader.as_ref().and_then(|l| l.remote.as_ref());
            r.train.remote.as_ref().or(loader).map(|remote| remote.bound)
        }),
        input_bound_pct,
        input_bound_p95_pct,
        wait_pct,
        wait_mean_pct,
        verdict: Verdict::of(input_bound_pct),
        cores: runs[0].system.cores,
        group: 0,
        recommended: false,
        knobs,
    }
}

/// The median of `values`, None where there are none.
fn median_of_any(values: impl Iterator<Item = f64>) -> Option<f64> {
    let values: Vec<f64> = values.collect();
    (!values.is_empty()).then(|| median(values))
}

/// The decode limit of a cell's loader phases, each figure their median; None where none
/// measured one.
fn decode_limit_of(loaders: &[&LoaderPhase]) -> Option<DecodeLimit> {
    let limits: Vec<&DecodeLimit> =
        loaders.iter().filter_map(|l| l.decode_limit.as_ref()).collect();
    limits.first().map(|first| {
        let med = |f: fn(&DecodeLimit) -> f64| median(limits.iter().map(|l| f(l)));
        DecodeLimit {
            frames_per_sample: med(|l| l.frames_per_sample),
            cpu_us_per_frame: med(|l| l.cpu_us_per_frame),
            threads: first.threads,
            samples_per_s: med(|l| l.samples_per_s),
            fraction: med(|l| l.fraction),
        }
    })
}

/// A cell's train figures over its runs: each step's time, its samples/s and their interval.
/// A replayed step's times are drawn: their spread is the step's, not the loader's, and in
/// the interval it would hide every difference between configurations, as would the draws of
/// a run ended early. Each step then counts the file's mean time (what sets the step's rate over
/// a long run), its own copy and its own wait.
fn train_figures(knobs: &Cell, runs: &[&CellResult]) -> (Vec<f64>, f64, Option<(f64, f64)>) {
    let replayed_mean_ms = runs.iter().find_map(|r| r.replayed_mean_ms);
    let train_iteration_ms: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.train.per_step.iter())
        .map(|s| match replayed_mean_ms {
            Some(mean) => s.wait_ms + s.h2d_ms + mean,
            None => s.wait_ms + s.step_ms,
        })
        .collect();
    // The steps' mean batch: an epoch's last batch may be short, and the interval is to hold
    // the rate the phases counted.
    let (samples, steps) =
        runs.iter().fold((0, 0), |(n, s), r| (n + r.train.samples, s + r.train.steps));
    let batch = match steps {
        0 => knobs.knobs.batch_size as f64,
        _ => samples as f64 / steps as f64,
    };
    let train_samples_per_s = match replayed_mean_ms {
        Some(_) if !train_iteration_ms.is_empty() => train_rate(batch)(&train_iteration_ms),
        _ => median(runs.iter().map(|r| r.train.samples_per_s)),
    };
    let train_interval = (train_iteration_ms.len() >= MIN_STEPS_FOR_INTERVAL)
        .then(|| interval(&train_iteration_ms, INTERVAL_SEED, train_rate(batch)))
        .flatten();
    (train_iteration_ms, train_samples_per_s, train_interval)
}

fn plot_groups(rows: &[Row]) -> Vec<PlotGroup> {
    let parts = super::model::partition(rows, &Knob::set(KnobSet::Plot));
    let single = parts.len() == 1;
    let mut used: Vec<String> = Vec::new();
    parts
        .into_iter()
        .enumerate()
        .map(|(i, (label, members))| {
            let mut suffix = if single { String::new() } else { format!("_{}", file_part(&label)) };
            if used.contains(&suffix) {
                suffix = format!("{suffix}_{}", i + 1);
            }
            used.push(suffix.clone());
            PlotGroup {
                label,
                rows: members,
                train_file: format!("{TRAIN_PLOT_STEM}{suffix}.svg"),
                heatmap_file: format!("{HEATMAP_PLOT_STEM}{suffix}.svg"),
            }
        })
        .collect()
}

/// `resolution 96x96, dtype bf16` as a file name part: `96x96_bf16`.
fn file_part(label: &str) -> String {
    label
        .split(", ")
        .map(|kv| kv.split_once(' ').map_or(kv, |(_, v)| v))
        .map(|v| {
            v.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '-' }).collect()
        })
        .collect::<Vec<String>>()
        .join("_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::Recommendation;
    use crate::testdata::FakeCell;

    fn cell(workers: usize, prefetch: usize, train: f64) -> FakeCell {
        let mut c = FakeCell::new(workers, prefetch, 16);
        c.train_samples_per_s = train;
        c
    }

    fn report(cells: &[FakeCell]) -> Report {
        render(&cells.iter().map(FakeCell::result).collect::<Vec<_>>())
    }

    fn recommended(cells: &[FakeCell]) -> Recommendation {
        report(cells).groups[0].recommendation.clone().expect("a recommendation")
    }

    #[test]
    fn the_knee_is_the_fewest_workers_within_five_percent() {
        let rec = recommended(&[cell(0, 2, 10.0), cell(1, 2, 19.5), cell(2, 2, 20.0)]);
        assert_eq!((rec.workers, rec.prefetch), (1, 2));
        // 18.9 is 5.5 % under 20: two workers.
        let rec = recommended(&[cell(0, 2, 10.0), cell(1, 2, 18.9), cell(2, 2, 20.0)]);
        assert_eq!(rec.workers, 2);
        assert!(rec.text.contains("the best measured (fewer workers fall more than 5 % below it)"));
        // Ties go to fewer workers, and the order of the results does not matter.
        let rec = recommended(&[cell(4, 2, 20.0), cell(2, 2, 20.0)]);
        assert_eq!(rec.workers, 2);
    }

    /// A cell whose `n` train steps of 16 samples take `ms` each, spread by ±`spread` ms.
    fn stepped(workers: usize, ms: f64, spread: f64, n: usize) -> FakeCell {
        let mut c = cell(workers, 2, 16.0 * 1e3 / ms);
        c.train_iteration_ms =
            (0..n).map(|i| ms + spread * [-1.0, 1.0, 0.0, 0.5, -0.5][i % 5]).collect();
        c
    }

    #[test]
    fn with_steps_kept_the_knee_is_judged_by_the_interval_of_the_change() {
        // One worker 3 % slower than two with tight steps: within the 5 % band, the knee.
        let rec = recommended(&[stepped(1, 103.0, 0.5, 20), stepped(2, 100.0, 0.5, 20)]);
        assert_eq!(rec.workers, 1, "{}", rec.text);
        assert!(rec.text.contains("not worse than the best") && rec.text.contains("95 % CI"));
        // 10 % slower with tight steps: worse beyond noise, two workers.
        let rec = recommended(&[stepped(1, 110.0, 0.5, 20), stepped(2, 100.0, 0.5, 20)]);
        assert_eq!(rec.workers, 2, "{}", rec.text);
        // The same medians with steps spread ±30 %: too wide to decide; say so.
        let rec = recommended(&[stepped(1, 110.0, 33.0, 10), stepped(2, 100.0, 30.0, 10)]);
        assert_eq!(rec.workers, 1, "not worse beyond noise: {}", rec.text);
        assert!(rec.text.contains("too wide to decide; measure longer"), "{}", rec.text);
        // The medians alone (no steps kept) would have said two workers.
        let rec = recommended(&[cell(1, 2, 16.0 * 1e3 / 110.0), cell(2, 2, 160.0)]);
        assert_eq!(rec.workers, 2);
    }

    #[test]
    fn each_row_carries_the_interval_of_its_train_throughput() {
        let r = report(&[stepped(1, 100.0, 10.0, 20), stepped(2, 100.0, 0.0, 2)]);
        let (low, high) = r.rows[0].train_interval.expect("20 steps: an interval");
        assert!(low < 160.0 && 160.0 < high && high / low < 1.2, "{low} {high}");
        assert_eq!(r.rows[1].train_interval, None, "2 steps are too few");
        // An epoch's short last batch: 20 steps of 100 ms carried 312 samples, not 320. The
        // interval holds the rate the phase counted (156 samples/s), not 16 a step's (160).
        let mut result = stepped(1, 100.0, 1.0, 20).result();
        result.train.samples = 312;
        result.train.samples_per_s = 156.0;
        let row = &render(&[result]).rows[0];
        let (low, high) = row.train_interval.expect("20 steps: an interval");
        assert!(low < 156.0 && 156.0 < high && high < 158.0, "{low} {high}");
    }

    #[test]
    fn prefetch_is_the_shallowest_within_three_percent() {
        let rec = recommended(&[cell(1, 1, 19.0), cell(1, 2, 19.5), cell(1, 4, 20.0)]);
        assert_eq!(rec.prefetch, 2, "19.5 is 2.5 % under 20, 19.0 is 5 % under: {}", rec.text);
        let rec = recommended(&[cell(1, 1, 15.0), cell(1, 2, 20.0)]);
        assert_eq!(rec.prefetch, 2);
        assert!(
            rec.text.contains("deepest measured") && rec.text.contains("try deeper"),
            "{}",
            rec.text
        );
        let rec = recommended(&[cell(1, 2, 15.0)]);
        assert!(rec.text.contains("the only depth measured at 1 worker."), "{}", rec.text);
        let rec = recommended(&[cell(0, 2, 30.0), cell(1, 2, 20.0)]);
        assert_eq!(rec.workers, 0);
        assert!(rec.text.contains("Prefetch does not apply"), "{}", rec.text);
    }

    #[test]
    fn rows_without_a_finite_throughput_are_not_recommended() {
        let rec = recommended(&[cell(0, 2, f64::NAN), cell(1, 2, 5.0)]);
        assert_eq!(rec.workers, 1);
        let r = report(&[cell(0, 2, f64::NAN)]);
        assert!(r.groups[0].recommendation.is_none() && r.groups[0].diagnosis.is_none());
    }

    #[test]
    fn groups_are_labelled_by_what_tells_them_apart() {
        let mut bf16 = cell(1, 2, 30.0);
        bf16.cell.dtype = crate::model::Precision::Bf16;
        let mut big = cell(1, 2, 25.0);
        big.cell.knobs.batch_size = 64;
        let r = report(&[cell(1, 2, 20.0), bf16, big]);
        let labels: Vec<&str> = r.groups.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(labels, ["batch 16, dtype bf16", "batch 16, dtype f32", "batch 64, dtype f32"]);
        assert_eq!(r.varying, [Knob::Dtype]);
        assert!(r
            .fixed
            .iter()
            .any(|(k, v)| *k == Knob::Loader(&LoaderKnob::RESOLUTION) && v == "native"));
        let files: Vec<&str> = r.plots.iter().map(|p| p.train_file.as_str()).collect();
        assert_eq!(files, ["train_vs_workers_bf16.svg", "train_vs_workers_f32.svg"]);
        assert_eq!(file_part("model diffusion:small, resolution 96x96"), "diffusion-small_96x96");
    }
}
