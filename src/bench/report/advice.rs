//! The sweep report's advice on the loader, its "Loader doctor" section (after FFCV's
//! "bottleneck doctor"; not `feedbench doctor`, which reads a lerobot-train log: `train_log`):
//! where the loader's CPU goes, from its timing tree, and what to change, from the verdict, the
//! cores and the decode-only limit.

use super::cache_fit::CacheFit;
use super::model::{
    beside_the_wait, Diagnosis, Recommendation, Row, StageCost, KNEE_TOLERANCE_PCT,
};
use super::phase_text::sample_steps;
use crate::bench::format::{millis, plural, rate};
use crate::dataset::Resolution;
use crate::loader::batch::ImageFormat;
use crate::measure::phase::{DecodeLimit, LoaderPhase};
use crate::measure::stats::median;
use crate::measure::verdict::Verdict;
use crate::model::DeviceChoice;
use crate::timing::stage::Stage;

/// A second stage gets its own advice from this share of the loader's CPU, percent.
const SECOND_STAGE_PCT: f64 = 25.0;
/// From this fraction of the decode-only limit, decoding is the loader's ceiling.
const AT_DECODE_LIMIT: f64 = 0.9;
/// Under this fraction, most of the loader's time goes outside the codec.
const FAR_FROM_DECODE_LIMIT: f64 = 0.5;

/// The loader's stages over a cell's repeats' loader phases (median CPU per sample each),
/// largest first; none without a loader phase.
pub(super) fn stage_costs(loaders: &[&LoaderPhase]) -> Vec<StageCost> {
    if loaders.is_empty() {
        return Vec::new();
    }
    let ms: Vec<(Stage, f64)> = Stage::ALL
        .iter()
        .map(|&stage| {
            let each = loaders.iter().map(|l| stage.cpu_ms_per_sample(&l.timing, l.samples));
            (stage, median(each))
        })
        .collect();
    let total: f64 = ms.iter().map(|(_, ms)| ms).sum();
    let mut costs: Vec<StageCost> = ms
        .into_iter()
        .filter(|(_, ms)| *ms > 0.0)
        .map(|(stage, ms)| StageCost {
            stage,
            cpu_ms_per_sample: ms,
            percent: if total > 0.0 { 100.0 * ms / total } else { 0.0 },
        })
        .collect();
    costs.sort_by(|a, b| b.cpu_ms_per_sample.total_cmp(&a.cpu_ms_per_sample));
    costs
}

/// Looks at the recommended row of a group (`members`) and says what dominates and what to try.
pub(super) fn diagnose(rows: &[Row], members: &[usize], rec: &Recommendation) -> Diagnosis {
    let row = &rows[rec.row];
    let (w, p) = (row.knobs.knobs.workers, row.knobs.knobs.prefetch);
    let ceilings = match row.loader_samples_per_s {
        Some(loader) => format!("loader ceiling {}, ", rate(loader)),
        None => String::new(),
    };
    let headline = format!(
        "{} at workers {w}, prefetch {p}: {:.1} % of the step waits for input (p95 {:.1} %); \
         train {}, {ceilings}model ceiling {} samples/s.",
        capitalised(&row.verdict.to_string()),
        row.input_bound_pct,
        row.input_bound_p95_pct,
        rate(row.train_samples_per_s),
        rate(row.model_samples_per_s),
    );
    let lerobot = !row.knobs.loader.is_native();
    // The loader's cost per sample: this row's, or where it was not measured alone (a tune's
    // verifying configurations) the nearest row's of the group that was.
    let loader = loader_row(rows, members, row);
    let cpu_ms = loader.and_then(|l| l.loader_cpu_ms_per_sample).unwrap_or(0.0);
    let stages = loader.map_or(&[][..], |l| &l.stages[..]);
    let decode_limit = loader.and_then(|l| l.decode_limit.as_ref());
    let breakdown = breakdown(loader, (w, p), lerobot, cpu_ms);

    // Stage advice is the native loader's: LeRobot's has no stages to act on.
    let dominant = if lerobot { None } else { loader.and_then(Row::dominant_stage).copied() };
    let mut advice: Vec<String> = contradiction(row).into_iter().collect();
    if row.verdict == Verdict::NotInputBound {
        let enough = members
            .iter()
            .map(|&i| &rows[i])
            .filter(|r| r.verdict == Verdict::NotInputBound)
            .map(|r| r.knobs.knobs.workers)
            .min()
            .unwrap_or(w);
        advice.push(format!(
            "The model dominates: more loader work won't help. {enough} worker{} already keep{} \
             the step fed (the fewest measured that are not input-bound); to train faster, make \
             the step faster (model ceiling {} samples/s).",
            plural(enough),
            if enough == 1 { "s" } else { "" },
            rate(row.model_samples_per_s)
        ));
        if enough < w {
            advice.push(format!(
                "The knee at {w} worker{} reflects the step's own spread, not the loader: at \
                 {enough} the step already waits under 5 % for input. Measure with more \
                 `train_steps` or `repeats` before paying for more workers.",
                plural(w)
            ));
        }
    } else if let Some(copy) = copy_advice(row) {
        // Bound by the copy: no worker count, prefetch or loader stage moves it.
        advice.push(copy);
    } else {
        if let Some(top) = dominant {
            advice.push(stage_advice(&top, row, decode_limit));
        }
        if let Some(second) = stages.get(1).filter(|s| s.percent >= SECOND_STAGE_PCT) {
            advice.push(stage_advice(second, row, decode_limit));
        }
        advice.push(workers_advice(rows, members, row, cpu_ms));
        if let Some(fit) = loader.and_then(|l| CacheFit::of(row, l)) {
            advice.push(fit.sentence(row.model_samples_per_s));
        }
        if let Some(loader) = row.loader_samples_per_s {
            advice.push(ceilings_advice(row, loader));
        }
        advice.extend(decode_limit.and_then(|limit| decode_limit_advice(limit, dominant)));
    }
    Diagnosis { row: rec.row, headline, breakdown, dominant: dominant.map(|d| d.stage), advice }
}

/// What the loader's CPU goes to, per stage (by process for LeRobot's), measured alone at
/// `(w, p)` or the nearest configuration that was, with its decode-only limit and its steps per
/// sample.
fn breakdown(loader: Option<&Row>, (w, p): (usize, usize), lerobot: bool, cpu_ms: f64) -> String {
    let measured_at = match loader {
        Some(l) if (l.knobs.knobs.workers, l.knobs.knobs.prefetch) != (w, p) => {
            format!(
                " (alone at workers {}, prefetch {})",
                l.knobs.knobs.workers, l.knobs.knobs.prefetch
            )
        }
        _ => String::new(),
    };
    let stages = loader.map_or(&[][..], |l| &l.stages[..]);
    let mut breakdown = if loader.is_none() {
        "The loader alone was not measured.".to_string()
    } else if stages.is_empty() {
        "The loader phase recorded no stage timing.".to_string()
    } else if lerobot {
        // LeRobot's loader is timed by process, not by stage.
        let share =
            |stage: Stage| stages.iter().find(|s| s.stage == stage).map_or(0.0, |s| s.percent);
        format!(
            "Loader CPU {} ms/sample{measured_at} (LeRobot's, by process): worker processes \
             {:.0} %, main process {:.0} %",
            millis(cpu_ms),
            share(Stage::BatchOther),
            share(Stage::Wait)
        )
    } else {
        let shares: Vec<String> = stages
            .iter()
            .filter(|s| s.percent >= 0.5)
            .map(|s| format!("{} {:.0} %", s.stage.name(), s.percent))
            .collect();
        format!("Loader CPU {} ms/sample{measured_at}: {}", millis(cpu_ms), shares.join(", "))
    };
    let decode_limit = loader.and_then(|l| l.decode_limit.as_ref());
    if let Some(limit) = decode_limit {
        breakdown.push_str(&format!(
            "; {:.0} % of the decode-only limit ({} samples/s with {} decoding thread{})",
            limit.fraction * 100.0,
            rate(limit.samples_per_s),
            limit.threads,
            plural(limit.threads)
        ));
    }
    if let Some(steps) = loader.and_then(|l| l.steps.as_ref()) {
        breakdown.push_str(&format!("; per sample {}", sample_steps(steps)));
    }
    breakdown.push('.');
    breakdown
}

/// What the decode-only `limit` says of the loader beside its `dominant` stage: decoding is its
/// ceiling, or most of its time goes elsewhere; None in between.
fn decode_limit_advice(limit: &DecodeLimit, dominant: Option<StageCost>) -> Option<String> {
    if limit.fraction >= AT_DECODE_LIMIT {
        return Some(format!(
            "The loader runs at {:.0} % of the decode-only limit ({} samples/s with {} \
             decoding thread{}): decoding is its ceiling, and only cheaper decoding \
             (resolution, GOP, codec) or more cores raise it.",
            limit.fraction * 100.0,
            rate(limit.samples_per_s),
            limit.threads,
            plural(limit.threads)
        ));
    }
    let elsewhere = dominant.is_some_and(|d| d.stage != Stage::Decode);
    (limit.fraction < FAR_FROM_DECODE_LIMIT && elsewhere).then(|| {
        format!(
            "The loader reaches only {:.0} % of what the codec alone allows ({} samples/s): \
             most of its time goes outside decoding ({} first).",
            limit.fraction * 100.0,
            rate(limit.samples_per_s),
            dominant.map_or("", |d| d.stage.name())
        )
    })
}

/// How far above the model phase's ceiling a train phase may go before the two contradict each
/// other (a loader feeding the step cannot outrun the step): the phases' own spread.
const CONTRADICTING_RATIO: f64 = 1.10;

/// Where `row`'s train phase outran its model phase's ceiling: the machine's speed changed
/// between them (a fresh machine's first report gave train 33.4 against a ceiling of 22.4),
/// said first, with which figure to distrust and what to do; None where they agree.
fn contradiction(row: &Row) -> Option<String> {
    let (train, model) = (row.train_samples_per_s, row.model_samples_per_s);
    (model > 0.0 && train > model * CONTRADICTING_RATIO).then(|| {
        format!(
            "The phases contradict each other: train {} samples/s is {:.2}× the model ceiling \
             {} measured alone, which a loader feeding that step cannot reach: the machine's \
             speed changed between the phases (other load, clock scaling). Distrust the model \
             ceiling and what rests on it; measure again on a quiet machine, or with more \
             `repeats`.",
            rate(train),
            train / model,
            rate(model)
        )
    })
}

/// The row whose loader phase tells `row`'s loader cost per sample: its own, else the
/// group's row measured alone at the nearest worker count (the same prefetch first).
fn loader_row<'a>(rows: &'a [Row], members: &[usize], row: &'a Row) -> Option<&'a Row> {
    if row.loader_cpu_ms_per_sample.is_some() {
        return Some(row);
    }
    members.iter().map(|&i| &rows[i]).filter(|r| r.loader_cpu_ms_per_sample.is_some()).min_by_key(
        |r| {
            (
                r.knobs.knobs.workers.abs_diff(row.knobs.knobs.workers),
                r.knobs.knobs.prefetch != row.knobs.knobs.prefetch,
            )
        },
    )
}

/// What to try against the stage taking `cost`'s share (`decode_limit`: the loader's).
fn stage_advice(cost: &StageCost, row: &Row, decode_limit: Option<&DecodeLimit>) -> String {
    let share = format!(
        "{:.0} % of the loader's CPU ({} ms/sample)",
        cost.percent,
        millis(cost.cpu_ms_per_sample)
    );
    let knobs = &row.knobs;
    match cost.stage {
        Stage::Decode => {
            let frames = decode_limit.map_or(String::new(), |l| {
                format!(
                    ", {:.1} frames decoded per sample at {:.0} µs each",
                    l.frames_per_sample, l.cpu_us_per_frame
                )
            });
            format!(
                "Video decoding takes {share}{frames}. Store the video at a lower resolution \
                 (the size the policy uses), with a shorter GOP (fewer frames decoded to reach a \
                 wanted one) or a faster codec (H.264 decodes faster than AV1); more workers only \
                 while cores are free."
            )
        }
        Stage::Convert if knobs.knobs.images != ImageFormat::U8 => format!(
            "Converting frames to float32 RGB takes {share}. Hand them over as uint8 and \
             normalise on the device (`images = [\"u8\"]`: 4× fewer bytes to write and copy), \
             or convert fewer pixels with a smaller `resolution`."
        ),
        Stage::Convert if knobs.knobs.resolution != Resolution::Native => format!(
            "Converting and resizing frames to {} takes {share}. Store the video at {} so \
             frames need no scaling.",
            knobs.knobs.resolution, knobs.knobs.resolution
        ),
        Stage::Convert => format!(
            "Converting frames to RGB takes {share}. Convert fewer pixels: a smaller \
             `resolution` (e.g. 96x96), or video stored at the size the policy uses."
        ),
        Stage::Cache => format!(
            "The decoded-frame cache takes {share}: copying kept frames, and keeping new ones \
             (fresh memory for each, the first epoch's cost). Smaller frames (`resolution`, \
             `images = [\"u8\"]`) cost less to keep and to copy."
        ),
        Stage::VideoOther => format!(
            "Opening, seeking and demuxing video takes {share}. A shorter GOP seeks less; \
             RAM-backed storage (`feedbench stage`) takes the disk out."
        ),
        Stage::Image => format!(
            "Decoding image features (PNG/JPEG) takes {share}. Store those cameras as video, \
             or the images at the size the policy uses."
        ),
        Stage::Parquet => format!(
            "Reading parquet rows and windows takes {share}. Stage the dataset on RAM-backed \
             storage (`feedbench stage`) to take the disk out; fewer or narrower vector \
             features read less."
        ),
        Stage::Collate => format!(
            "Copying values into the batch takes {share}. Narrower vector features or a \
             shorter window copy less."
        ),
        Stage::BatchOther => format!(
            "Work outside the measured stages (batch set-up, hand-off) takes {share}; larger \
             batches spread it over more samples."
        ),
        Stage::Sampler => format!("Planning the epoch's sample order takes {share}."),
        Stage::Wait => format!(
            "The training thread waiting for batches takes {share}: more workers or a deeper \
             prefetch."
        ),
    }
}

/// Where the step barely waits for its batches (under the knee's tolerance) and the copy to
/// the device (LeRobot's: the main process's hand-over) is the larger part of its input-bound
/// share: what that part is and what shortens it. None where the wait is the larger part.
fn copy_advice(row: &Row) -> Option<String> {
    let wait = row.wait_pct.0;
    let copy = (row.input_bound_pct - wait).max(0.0);
    if wait >= KNEE_TOLERANCE_PCT || copy <= wait {
        return None;
    }
    let what = beside_the_wait(row.knobs.loader);
    Some(format!(
        "The loader keeps up: the step waits {wait:.1} % of its time for batches. The rest of \
         its input-bound share ({copy:.1} %) is {what}, which no worker count or prefetch \
         shortens: uint8 frames (`images = [\"u8\"]`: 4× fewer bytes) copy less."
    ))
}

/// Whether more workers can help, from the cores and the throughput of the group's rows.
fn workers_advice(rows: &[Row], members: &[usize], row: &Row, cpu_ms: f64) -> String {
    let (w, cores) = (row.knobs.knobs.workers, row.cores);
    let most = members.iter().map(|&i| rows[i].knobs.knobs.workers).max().unwrap_or(w);
    if w >= cores {
        format!(
            "The CPU is the limit: {w} worker{} on {cores} core{}{}. More workers won't help; \
             less CPU per sample ({} ms now) will.",
            plural(w),
            plural(cores),
            if row.knobs.device == DeviceChoice::Cpu {
                ", and the model's step runs on the same cores"
            } else {
                ""
            },
            millis(cpu_ms)
        )
    } else if w == most {
        format!(
            "{w} of {cores} cores load data and the most workers measured gave the best: try \
             more workers (up to {cores})."
        )
    } else {
        format!(
            "Workers past {w} (up to {most}) gained under {KNEE_TOLERANCE_PCT:.0} % although \
             {cores} cores are there: the worker count is not the limit; less CPU per sample is."
        )
    }
}

/// The loader's ceiling `l` against the model's.
fn ceilings_advice(row: &Row, l: f64) -> String {
    let m = row.model_samples_per_s;
    if l < m {
        format!(
            "Even alone the loader delivers {} samples/s, under the model's {}: it must get \
             {:.1}× faster before the model dominates.",
            rate(l),
            rate(m),
            m / l
        )
    } else if row.knobs.device == DeviceChoice::Cpu {
        format!(
            "Alone the loader ({} samples/s) outruns the model ({}), yet training waits: on \
             the CPU both compete for the same cores.",
            rate(l),
            rate(m)
        )
    } else {
        format!(
            "Alone the loader ({} samples/s) outruns the model ({}), yet training waits \
             ({} ms per step, h2d {} ms): a deeper prefetch absorbs jitter.",
            rate(l),
            rate(m),
            millis(row.train_wait_ms),
            millis(row.train_h2d_ms)
        )
    }
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map_or(String::new(), |c| c.to_uppercase().chain(chars).collect())
}

#[cfg(test)]
mod tests {
    use crate::bench::report::render;
    use crate::testdata::FakeCell;

    fn diagnosed(train: f64, model: f64) -> Vec<String> {
        let cells: Vec<_> = [1, 2]
            .iter()
            .map(|&workers| {
                let mut c = FakeCell::new(workers, 2, 64);
                (c.train_samples_per_s, c.model_samples_per_s) = (train, model);
                c.input_bound_pct = 1.0;
                c.result()
            })
            .collect();
        render(&cells).groups[0].diagnosis.clone().expect("a diagnosis").advice
    }

    #[test]
    fn phases_that_contradict_each_other_are_said_first() {
        // A fresh machine's first report: train 33.4 samples/s against a model ceiling of 22.4.
        let advice = diagnosed(33.4, 22.4);
        assert!(
            advice[0].starts_with(
                "The phases contradict each other: train 33.4 samples/s is 1.49× the model \
                 ceiling 22.4 measured alone"
            ),
            "{advice:?}"
        );
        // Within the phases' spread they agree, and nothing is said.
        let advice = diagnosed(22.9, 22.4);
        assert!(!advice.iter().any(|a| a.contains("contradict")), "{advice:?}");
    }
}
