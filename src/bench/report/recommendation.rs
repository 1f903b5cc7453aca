//! The recommendation per group of a sweep's cells: the knee of workers (the fewest not worse
//! than the best train throughput beyond the noise band, judged by the interval of the change
//! where steps were kept) and the prefetch depth past which nothing improves. `tune` judges its
//! rows by the same knee.

use super::model::{
    train_rate, Recommendation, Row, INTERVAL_SEED, KNEE_TOLERANCE_PCT, MIN_STEPS_FOR_INTERVAL,
    PREFETCH_TOLERANCE_PCT,
};
use crate::bench::format::{plural, rate};
use crate::measure::change::{Change, Decision};

fn within(x: f64, best: f64, tolerance_pct: f64) -> bool {
    x >= best * (1.0 - tolerance_pct / 100.0)
}

/// The change of row `i`'s train throughput against row `best`'s with its interval, where both
/// kept enough steps.
fn knee_change(rows: &[Row], best: usize, i: usize) -> Option<Change> {
    let (b, r) = (&rows[best], &rows[i]);
    train_change(&b.train_iteration_ms, &r.train_iteration_ms, b.knobs.knobs.batch_size)
}

/// The change of train throughput of steps whose iterations took `other` ms against steps of
/// `best` ms, batches of `batch`, with its interval, where both sides kept
/// [`MIN_STEPS_FOR_INTERVAL`] steps: the knee's comparison.
pub fn train_change(best: &[f64], other: &[f64], batch: usize) -> Option<Change> {
    let enough = |steps: &[f64]| steps.len() >= MIN_STEPS_FOR_INTERVAL;
    if !enough(best) || !enough(other) {
        return None;
    }
    // Rows of a group share their batch size: the change of samples/s is that of steps/s.
    Change::of_by(best, other, INTERVAL_SEED, train_rate(batch as f64))
}

/// Whether row `i` trains slower than row `best` beyond `tolerance_pct`: the whole interval of
/// the `change` below it where there is one, else its median.
fn worse_than_best(
    rows: &[Row],
    best: usize,
    i: usize,
    change: Option<Change>,
    tolerance_pct: f64,
) -> bool {
    match change {
        Some(change) => change.decision(tolerance_pct) == Decision::Lower,
        None => !within(rows[i].train_samples_per_s, rows[best].train_samples_per_s, tolerance_pct),
    }
}

/// The knee of workers among some rows: the best train throughput, and the fewest workers not
/// worse than it beyond a tolerance.
#[derive(Debug, Clone)]
pub struct Knee {
    /// The row with the best train throughput (on a tie the fewest workers, then the
    /// shallowest prefetch).
    pub best: usize,
    /// The fewest workers not worse than the best.
    pub workers: usize,
    /// Each row with a finite throughput and its change against the best (None where a side
    /// kept too few steps for an interval).
    pub judged: Vec<(usize, Option<Change>)>,
}

/// The knee among `members` of `rows`, with changes within `tolerance_pct` counted as no loss;
/// None when no row has a finite train throughput. The sweep's recommendation uses
/// [`KNEE_TOLERANCE_PCT`]; `tune` its target.
pub fn knee(rows: &[Row], members: &[usize], tolerance_pct: f64) -> Option<Knee> {
    let finite: Vec<usize> =
        members.iter().copied().filter(|&i| rows[i].train_samples_per_s.is_finite()).collect();
    let train = |i: usize| rows[i].train_samples_per_s;
    let (workers, prefetch) =
        (|i: usize| rows[i].knobs.knobs.workers, |i: usize| rows[i].knobs.knobs.prefetch);
    let best = finite.iter().copied().min_by(|&a, &b| {
        train(b)
            .total_cmp(&train(a))
            .then(workers(a).cmp(&workers(b)))
            .then(prefetch(a).cmp(&prefetch(b)))
    })?;
    let judged: Vec<(usize, Option<Change>)> =
        finite.iter().map(|&i| (i, knee_change(rows, best, i))).collect();
    let knee = judged
        .iter()
        .filter(|&&(i, change)| !worse_than_best(rows, best, i, change, tolerance_pct))
        .map(|&(i, _)| workers(i))
        .min()?;
    Some(Knee { best, workers: knee, judged })
}

/// Among rows of the same workers (`at_knee`), the shallowest prefetch within
/// [`PREFETCH_TOLERANCE_PCT`] of the best of them.
pub fn shallowest_prefetch(rows: &[Row], at_knee: &[usize]) -> Option<usize> {
    let train = |i: usize| rows[i].train_samples_per_s;
    let best_at_knee = at_knee.iter().map(|&i| train(i)).fold(f64::NEG_INFINITY, f64::max);
    at_knee
        .iter()
        .copied()
        .filter(|&i| within(train(i), best_at_knee, PREFETCH_TOLERANCE_PCT))
        .min_by_key(|&i| rows[i].knobs.knobs.prefetch)
}

/// The knee of workers and the prefetch depth past which nothing improves, among `members`.
pub(super) fn recommend(rows: &[Row], members: &[usize]) -> Option<Recommendation> {
    let train = |i: usize| rows[i].train_samples_per_s;
    let (workers, prefetch) =
        (|i: usize| rows[i].knobs.knobs.workers, |i: usize| rows[i].knobs.knobs.prefetch);
    let Knee { best, workers: knee, judged } = knee(rows, members, KNEE_TOLERANCE_PCT)?;
    let finite: Vec<usize> = judged.iter().map(|&(i, _)| i).collect();
    let at_knee: Vec<usize> = finite.iter().copied().filter(|&i| workers(i) == knee).collect();
    let row = shallowest_prefetch(rows, &at_knee)?;
    let depths: Vec<usize> = {
        let mut d: Vec<usize> = at_knee.iter().map(|&i| prefetch(i)).collect();
        d.sort();
        d.dedup();
        d
    };
    let fewer_measured = finite.iter().any(|&i| workers(i) < knee);

    let r = &rows[row];
    let mut text = format!(
        "workers {knee}, prefetch {}: {} train samples/s",
        r.knobs.knobs.prefetch,
        rate(r.train_samples_per_s)
    );
    if let Some((low, high)) = r.train_interval {
        text.push_str(&format!(" (95 % CI {} to {})", rate(low), rate(high)));
    }
    let change = judged.iter().find(|(i, _)| *i == row).and_then(|(_, change)| *change);
    if row == best || train(row) >= train(best) {
        text.push_str(", the best measured");
        if fewer_measured {
            text.push_str(&format!(
                " (fewer workers fall more than {KNEE_TOLERANCE_PCT:.0} % below it)"
            ));
        }
    } else {
        let b = &rows[best];
        let against = format!(
            "the best ({} at workers {}, prefetch {})",
            rate(b.train_samples_per_s),
            b.knobs.knobs.workers,
            b.knobs.knobs.prefetch
        );
        text.push_str(&match change {
            Some(c) if c.decision(KNEE_TOLERANCE_PCT) == Decision::Undecided => format!(
                ", perhaps as good as {against}: the difference ({:+.1} %, {}) straddles the \
                 {KNEE_TOLERANCE_PCT:.0} % noise band — too wide to decide; measure longer \
                 (run.train_steps, run.repeats)",
                c.percent,
                c.interval()
            ),
            Some(c) => format!(
                ", not worse than {against} beyond {KNEE_TOLERANCE_PCT:.0} % noise ({})",
                c.interval()
            ),
            None => format!(", within {KNEE_TOLERANCE_PCT:.0} % of {against}"),
        });
    }
    text.push_str(". ");
    text.push_str(&prefetch_sentence(rows, &at_knee, row, knee, &depths));
    Some(Recommendation {
        row,
        workers: knee,
        prefetch: r.knobs.knobs.prefetch,
        best_row: best,
        text,
    })
}

/// What the recommendation says of prefetch at `knee` workers, where `row` is recommended among
/// the rows `at_knee` of `depths`.
fn prefetch_sentence(
    rows: &[Row],
    at_knee: &[usize],
    row: usize,
    knee: usize,
    depths: &[usize],
) -> String {
    let train = |i: usize| rows[i].train_samples_per_s;
    let prefetch = |i: usize| rows[i].knobs.knobs.prefetch;
    let p = prefetch(row);
    if knee == 0 {
        "Prefetch does not apply: with 0 workers batches load in the training thread.".to_string()
    } else if depths.len() == 1 {
        format!("Prefetch {p} is the only depth measured at {knee} worker{}.", plural(knee))
    } else if Some(&p) == depths.last() {
        format!(
            "Prefetch {p} is the deepest measured, and shallower ones lose more than {PREFETCH_TOLERANCE_PCT:.0} %: try deeper."
        )
    } else {
        let deeper_best = at_knee
            .iter()
            .copied()
            .filter(|&i| prefetch(i) > p)
            .max_by(|&a, &b| train(a).total_cmp(&train(b)))
            .expect("a deeper depth was measured");
        format!(
            "Prefetch past {p} improves nothing: deeper gains under {PREFETCH_TOLERANCE_PCT:.0} % (best {} at prefetch {}).",
            rate(train(deeper_best)),
            prefetch(deeper_best)
        )
    }
}
