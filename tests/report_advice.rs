//! The report's advice on hand-built cell results: the doctor's diagnosis per group (which
//! stage dominates, what to try, the cache where every frame fits, the copy where it bounds
//! the step), from the rows the report makes of them.

use crate::report::{cell, rendered};

use feedbench::bench::report::{self, Stage};
use feedbench::loader::batch::ImageFormat;
use feedbench::measure::phase::FramesSize;
use feedbench::model::DeviceChoice;
use feedbench::testdata::FakeCell;
use feedbench::timing::stage;

#[test]
fn a_row_without_its_loader_alone_is_diagnosed_with_the_nearest_one_measured() {
    // A tune's cells: one worker measured alone and with the step, none with the step only
    // (and recommended: a 4 s step that in-thread loading keeps fed within 5 %).
    let mut one = cell(1, 2, 16, 4.0, 0.0);
    one.model_samples_per_s = 4.0;
    let mut none = cell(0, 2, 16, 3.9, 3.0);
    none.model_samples_per_s = 4.0;
    none.loader_alone = false;
    let report = rendered(&[one, none]);
    let row = report.rows.iter().find(|r| r.knobs.knobs.workers == 0).unwrap();
    assert!(row.recommended && row.loader_samples_per_s.is_none());
    let d = report.groups[0].diagnosis.as_ref().unwrap();
    assert!(!d.headline.contains("loader ceiling"), "{}", d.headline);
    assert!(
        d.breakdown.contains("(alone at workers 1, prefetch 2): decode 76 %"),
        "{}",
        d.breakdown
    );
    // The table shows "-" for its loader ceiling, the CSV nothing.
    let text = report::terminal::render(&report);
    let line = text.lines().find(|l| l.starts_with('*')).expect("the recommended row");
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(columns[1..5], ["0", "2", "16", "-"], "workers, prefetch, batch, loader/s: {line}");
    let csv = report::csv::render(&report);
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = header.iter().position(|&h| h == "loader_samples_per_s").unwrap();
    let row = csv.lines().find(|l| l.starts_with("g1,0,")).expect("the row of no workers");
    assert_eq!(row.split(',').nth(column), Some(""), "{row}");
}

#[test]
fn the_doctor_cites_each_step_per_sample_where_the_split_was_timed() {
    let mut cells = vec![cell(1, 2, 16, 19.0, 30.0), cell(2, 2, 16, 20.0, 25.0)];
    let d = rendered(&cells).groups[0].diagnosis.clone().unwrap();
    assert!(!d.breakdown.contains("per sample"), "results without the split: {}", d.breakdown);
    for c in &mut cells {
        c.time_each_step();
    }
    let d = rendered(&cells).groups[0].diagnosis.clone().unwrap();
    assert!(
        d.breakdown.contains(
            "per sample 1.00 frames decoded, 1.00 converted; CPU ms: demux 0.100, decode 3.000, \
             to RGB 0.300, split/scale 0.200, parquet 0.300, collate 0.100."
        ),
        "{}",
        d.breakdown
    );
}

/// Input-bound cells whose loader timed each step, with every frame taking `frames_gb` GB
/// and 8 GB free.
fn cells_with_frames(frames_gb: f64) -> Vec<FakeCell> {
    let mut cells = vec![cell(1, 2, 16, 19.0, 30.0), cell(2, 2, 16, 20.0, 25.0)];
    for c in &mut cells {
        c.time_each_step();
        c.frames =
            Some(FramesSize { bytes: (frames_gb * 1e9) as u64, available_bytes: Some(8e9 as u64) });
    }
    cells
}

#[test]
fn the_doctor_offers_the_cache_where_input_bound_and_every_frame_fits() {
    let d = rendered(&cells_with_frames(2.5)).groups[0].diagnosis.clone().unwrap();
    let advice = d.advice.join("\n");
    // 4 CPU ms a sample less demuxing (0.1), decoding (3.0) and the conversion to RGB (0.3),
    // plus the split (0.2) again for the copy: 0.8 ms, one thread at the recommended worker.
    assert!(
        advice.contains(
            "Every frame at this size and format takes 2.50 GB, which fits in the 8.00 GB that \
             were free: a decoded-frame cache (`--cache 3GiB`; in a sweep, `loader.cache = \
             [\"3GiB\"]`)"
        ),
        "{advice}"
    );
    assert!(
        advice.contains("about 1250 samples/s with 1 thread loading (0.800 CPU ms/sample"),
        "{advice}"
    );
    assert!(
        advice.contains(
            "beyond the model's 50.0 samples/s: from the second epoch the step would be fed"
        ),
        "{advice}"
    );

    // Frames beyond the memory there was: no such advice; nor where the cells had a cache.
    let d = rendered(&cells_with_frames(9.0)).groups[0].diagnosis.clone().unwrap();
    assert!(!d.advice.iter().any(|a| a.contains("--cache")), "{:?}", d.advice);
    let mut cached = cells_with_frames(2.5);
    for c in &mut cached {
        c.cell.knobs.cache_bytes = 4 << 30;
    }
    let d = rendered(&cached).groups[0].diagnosis.clone().unwrap();
    assert!(!d.advice.iter().any(|a| a.contains("--cache")), "{:?}", d.advice);
}

#[test]
fn a_cached_cells_copies_and_fills_are_a_stage_of_their_own() {
    let mut cells = vec![cell(1, 2, 16, 19.0, 30.0), cell(2, 2, 16, 20.0, 25.0)];
    for c in &mut cells {
        c.cell.knobs.cache_bytes = 4 << 30;
        c.stages_ms = vec![
            (stage::DECODE, 1.0),
            (stage::CONVERT, 0.2),
            (stage::CACHE, 0.3),
            (stage::CACHE_FILL, 0.5),
        ];
    }
    let report = rendered(&cells);
    let d = report.groups[0].diagnosis.as_ref().unwrap();
    assert!(d.breakdown.contains("decode 50 %, cache 40 %, convert 10 %"), "{}", d.breakdown);
    let csv = report::csv::render(&report);
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = header.iter().position(|&h| h == "cpu_ms_per_sample_cache").expect("a column");
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    assert_eq!(row[column].parse::<f64>().unwrap(), 0.8);
}

#[test]
fn the_doctor_advises_on_the_dominant_stage() {
    // Input-bound at every setting; decoding takes 3 of 3.95 ms per sample.
    let decoding = vec![cell(1, 2, 16, 19.0, 30.0), cell(2, 2, 16, 20.0, 25.0)];
    let report = rendered(&decoding);
    let d = report.groups[0].diagnosis.as_ref().unwrap();
    assert_eq!(d.dominant, Some(Stage::Decode));
    assert!(d.breakdown.contains("decode 76 %, convert 13 %"), "{}", d.breakdown);
    assert!(d.advice[0].starts_with("Video decoding takes 76 %"), "{:?}", d.advice);
    assert!(d.advice[0].contains("GOP") && d.advice[0].contains("H.264"), "{:?}", d.advice);
    assert!(!d.advice.iter().any(|a| a.contains("images = [\"u8\"]")), "{:?}", d.advice);

    // The same, but converting to float32 takes most of it.
    let converting: Vec<FakeCell> = decoding
        .iter()
        .cloned()
        .map(|mut c| {
            c.stages_ms = vec![
                (stage::DECODE, 0.5),
                (stage::CONVERT, 3.0),
                (stage::PARQUET, 0.3),
                (stage::COLLATE, 0.1),
            ];
            c
        })
        .collect();
    let report = rendered(&converting);
    let d = report.groups[0].diagnosis.as_ref().unwrap();
    assert_eq!(d.dominant, Some(Stage::Convert));
    assert!(
        d.advice[0].starts_with("Converting frames to float32 RGB takes 77 %"),
        "{:?}",
        d.advice
    );
    assert!(d.advice[0].contains("`images = [\"u8\"]`"), "{:?}", d.advice);
    assert!(!d.advice[0].contains("H.264"), "{:?}", d.advice);

    // Frames already handed over as uint8: only fewer pixels help.
    let uint8: Vec<FakeCell> = converting
        .into_iter()
        .map(|mut c| {
            c.cell.knobs.images = ImageFormat::U8;
            c
        })
        .collect();
    let d = rendered(&uint8).groups[0].diagnosis.clone().unwrap();
    assert!(d.advice[0].contains("`resolution`") && !d.advice[0].contains("u8"), "{:?}", d.advice);
}

#[test]
fn a_model_bound_run_needs_no_more_loader_work() {
    let cells =
        vec![cell(0, 2, 16, 10.0, 30.0), cell(1, 2, 16, 20.0, 1.0), cell(2, 2, 16, 20.2, 0.5)];
    let report = rendered(&cells);
    let group = &report.groups[0];
    assert_eq!(group.recommendation.as_ref().unwrap().workers, 1);
    let d = group.diagnosis.as_ref().unwrap();
    assert!(
        d.headline.starts_with("Not input-bound at workers 1, prefetch 2: 1.0 %"),
        "{}",
        d.headline
    );
    assert_eq!(d.advice.len(), 1, "{:?}", d.advice);
    assert!(
        d.advice[0].starts_with(
            "The model dominates: more loader work won't help. 1 worker already keeps"
        ),
        "{:?}",
        d.advice
    );
}

#[test]
fn a_knee_past_the_fewest_workers_that_do_not_wait_is_called_the_steps_spread() {
    // Not input-bound at every count, but the step's noise puts the best throughput at 2.
    let cells =
        vec![cell(0, 2, 16, 17.3, 0.8), cell(1, 2, 16, 16.8, 0.3), cell(2, 2, 16, 19.8, 0.4)];
    let report = rendered(&cells);
    let group = &report.groups[0];
    assert_eq!(group.recommendation.as_ref().unwrap().workers, 2);
    let advice = group.diagnosis.as_ref().unwrap().advice.join("\n");
    assert!(advice.contains("0 workers already keep the step fed"), "{advice}");
    assert!(advice.contains("The knee at 2 workers reflects the step's own spread"), "{advice}");
}

#[test]
fn input_bound_with_every_core_busy_is_cpu_bound() {
    let mut cells = vec![cell(1, 2, 16, 10.0, 40.0), cell(2, 2, 16, 18.0, 30.0)];
    for c in &mut cells {
        c.decode_fraction = Some(0.95);
        c.loader_samples_per_s = 20.0;
    }
    let report = rendered(&cells);
    let d = report.groups[0].diagnosis.as_ref().unwrap();
    let advice = d.advice.join("\n");
    assert!(advice.contains("The CPU is the limit: 2 workers on 2 cores, and the model's step runs on the same cores"), "{advice}");
    assert!(advice.contains("runs at 95 % of the decode-only limit"), "{advice}");
    assert!(advice.contains("Even alone the loader delivers 20.0 samples/s, under the model's 50.0: it must get 2.5× faster"), "{advice}");

    // With 8 cores and the most workers measured being the best, try more workers.
    for c in &mut cells {
        c.cores = 8;
    }
    let d = rendered(&cells).groups[0].diagnosis.clone().unwrap();
    assert!(d.advice.iter().any(|a| a.contains("try more workers (up to 8)")), "{:?}", d.advice);
}

#[test]
fn a_step_bound_by_its_copy_gets_no_worker_or_prefetch_advice() {
    // On a GPU: the loader alone outruns the model, each step waits 1 % for its batch and
    // spends 8 % copying it.
    let cells: Vec<FakeCell> = [1, 2]
        .iter()
        .map(|&w| {
            let mut c = cell(w, 2, 16, 46.0, 9.0);
            c.cell.device = DeviceChoice::Cuda;
            c.copy_pct = 8.0;
            c.train_iteration_ms = vec![16e3 / 46.0; 20];
            c
        })
        .collect();
    let report = rendered(&cells);
    let d = report.groups[0].diagnosis.clone().unwrap();
    let advice = d.advice.join("\n");
    let r = &report.rows[d.row];
    assert_eq!((r.wait_pct.0, r.input_bound_pct), (1.0, 9.0));
    assert!(advice.contains("The loader keeps up: the step waits 1.0 % of its time"), "{advice}");
    assert!(advice.contains("is the batch's copy to the device, which no worker"), "{advice}");
    assert!(
        !advice.contains("prefetch absorbs") && !advice.contains("try more workers"),
        "{advice}"
    );
    // The train phase's verdict names the copy too, not the loader.
    let phase = cells[0].result().train.to_string();
    assert!(
        phase.contains(
            "of it the copy to the device 8.0 %: moderately input-bound — the copy to the \
             device is most of it, not the loader"
        ),
        "{phase}"
    );
    // Where the wait is the larger part, the loader's advice stands.
    let waiting: Vec<FakeCell> = [1, 2]
        .iter()
        .map(|&w| {
            let mut c = cell(w, 2, 16, 30.0, 25.0);
            c.copy_pct = 2.0;
            c.train_iteration_ms = vec![16e3 / 30.0; 20];
            c
        })
        .collect();
    let advice = rendered(&waiting).groups[0].diagnosis.clone().unwrap().advice.join("\n");
    assert!(!advice.contains("The loader keeps up"), "{advice}");
}
