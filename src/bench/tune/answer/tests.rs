//! The answer's unit tests, and the states and rows other modules' tests build answers from.

use super::*;
use crate::bench::report::render;
use crate::bench::tune::search::SearchSettings;
use crate::loader::knobs::LoaderKnob;
use crate::testdata::FakeCell;

pub(crate) fn state(step_ms: f64, cpus: usize) -> SearchState {
    SearchState {
        demand: Demand::steady(step_ms, 16),
        budgets: Budgets { cpus, memory_bytes: 64_000_000_000 },
        settings: SearchSettings::new(5.0, 9),
        batch_bytes: 100_000_000,
    }
}

pub(crate) fn knobs(loader: LoaderBackend) -> AnswerKnobs {
    let config = LoaderConfig { batch_size: 16, ..LoaderConfig::default() };
    AnswerKnobs {
        loader,
        config,
        lerobot_train: None,
        processes: 1,
        processes_from: None,
        launcher: None,
    }
}

/// Cells of 1 and 2 workers at 100 samples/s each feeding a step that needs `need`/s.
fn rows(need: f64) -> Vec<Row> {
    rows_with(need, |_| {})
}

/// [`rows`], each cell edited by `edit` first.
pub(crate) fn rows_with(need: f64, edit: impl Fn(&mut FakeCell)) -> Vec<Row> {
    let cell = |w: usize| {
        let mut c = FakeCell::new(w, 2, 16);
        c.loader_samples_per_s = 100.0 * w as f64;
        c.train_samples_per_s = c.loader_samples_per_s.min(need);
        c.input_bound_pct = 100.0 * (1.0 - c.train_samples_per_s / need);
        edit(&mut c);
        c.result()
    };
    render(&[cell(1), cell(2)]).rows
}

#[test]
fn a_fed_step_gets_the_knee_and_the_flags_to_paste() {
    let s = state(200.0, 2);
    let a = answer(&rows(80.0), &s, knobs(LoaderBackend::Native)).unwrap();
    assert_eq!((a.workers, a.prefetch, a.bound.clone()), (1, 2, Bound::Step));
    assert_eq!(a.flags(), "--workers 1 --prefetch 2 --batch 16");
    // Every knob tune kept fixed is in the flags (decoder threads were left out).
    let mut fixed = knobs(LoaderBackend::Native);
    LoaderKnob::DECODER_THREADS.set(&mut fixed.config, "2").unwrap();
    fixed.config.drop_n_last_frames = Some(3);
    let threaded = answer(&rows(80.0), &s, fixed).unwrap().flags();
    let expected = "--workers 1 --prefetch 2 --batch 16 --decoder-threads 2 --drop-n-last-frames 3";
    assert_eq!(threaded, expected);
    assert!(a.paragraph().contains("The step dominates"), "{}", a.paragraph());
    // The beyond table: 2× needs 160/s, two workers; 8× needs 640/s, seven.
    let workers: Vec<Option<usize>> = a.beyond.iter().map(|b| b.workers).collect();
    assert_eq!(workers, [Some(1), Some(2), Some(4), Some(7)]);
}

#[test]
fn no_feasible_answer_says_what_bounds_it_and_how_many_cores_would_do() {
    // The step needs 400/s; two cores give 200.
    let s = state(40.0, 2);
    let a = answer(&rows(400.0), &s, knobs(LoaderBackend::Native)).unwrap();
    assert_eq!(a.workers, 2);
    assert_eq!(a.bound, Bound::Cpus { workers_needed: Some(4) });
    let text = a.paragraph();
    assert!(text.contains("Bound by the cores: no configuration within 2 cores"), "{text}");
    assert!(text.contains("It needs 4 workers") && text.contains("about 5 cores"), "{text}");
    assert!(text.contains("% of its CPU in decode"), "the dominant stage: {text}");
    let mut tight = state(40.0, 8);
    tight.budgets.memory_bytes = 1_000_000_000;
    let a = answer(&rows(400.0), &tight, knobs(LoaderBackend::Native)).unwrap();
    assert!(matches!(a.bound, Bound::Memory { .. }), "{:?}", a.bound);
    // A URL root whose stream waits on its link: the store bounds it, not the cores.
    let advice = "bytes arrive at 2.1 MB/s, 40.3 kB a sample: the link allows 52 samples/s";
    let store = Answer {
        bound: Bound::Store { remote: RemoteBound::Link, advice: advice.into() },
        ..answer(&rows(400.0), &s, knobs(LoaderBackend::Native)).unwrap()
    };
    let text = store.paragraph();
    assert!(text.contains(&format!("Bound by the store: the stream is link-bound — {advice}.")));
    assert!(!text.contains("Bound by the cores"), "{text}");
}

#[test]
fn an_input_bound_answer_offers_the_cache_where_every_frame_fits_the_memory_budget() {
    // The step needs 400/s, two cores give 200; every frame takes 3 GB of 8 free.
    let rows = |frames_gb: f64, need: f64| {
        rows_with(need, |c| {
            c.time_each_step();
            let bytes = (frames_gb * 1e9) as u64;
            let available_bytes = Some(8_000_000_000);
            c.frames = Some(crate::measure::phase::FramesSize { bytes, available_bytes });
        })
    };
    let native = knobs(LoaderBackend::Native);
    let a = answer(&rows(3.0, 400.0), &state(40.0, 2), native.clone()).unwrap();
    assert!(matches!(a.bound, Bound::Cpus { .. }), "{:?}", a.bound);
    let fit = a.cache.expect("the frames fit");
    assert!(fit.budget_bytes == 3 << 30 && (fit.cpu_ms_per_sample - 0.8).abs() < 1e-9);
    let text = a.paragraph();
    assert!(text.contains("`--cache 3GiB`"), "{text}");
    assert!(text.contains("about 2500 samples/s with 2 threads loading"), "{text}");
    assert!(text.contains("beyond the model's 400 samples/s"), "{text}");
    // Beyond the memory budget, beyond the memory there was, or a step that is fed: none.
    let mut tight = state(40.0, 2);
    tight.budgets.memory_bytes = 2_000_000_000;
    assert_eq!(answer(&rows(3.0, 400.0), &tight, native.clone()).unwrap().cache, None);
    assert_eq!(answer(&rows(9.0, 400.0), &state(40.0, 2), native.clone()).unwrap().cache, None);
    let a = answer(&rows(3.0, 80.0), &state(200.0, 2), native).unwrap();
    assert_eq!((a.bound, a.cache), (Bound::Step, None));
}

#[test]
fn an_answer_the_interval_cannot_separate_from_the_best_says_so() {
    // No workers: 6 % slower than one worker, with steps spread ±30 %.
    let spread = |workers: usize, ms: f64| {
        let mut c = FakeCell::new(workers, 2, 16);
        c.train_samples_per_s = 16e3 / ms;
        c.loader_samples_per_s = 200.0;
        c.input_bound_pct = if workers == 0 { 8.0 } else { 0.0 };
        c.train_iteration_ms =
            (0..10).map(|i| ms * (1.0 + 0.3 * [-1.0, 1.0, 0.0, 0.5, -0.5][i % 5])).collect();
        c.result()
    };
    let rows = render(&[spread(0, 104.0), spread(1, 100.0)]).rows;
    let a = answer(&rows, &state(100.0, 2), knobs(LoaderBackend::Native)).unwrap();
    assert_eq!(a.workers, 0, "the fewer workers, perhaps as good");
    let close = a.too_close.expect("the best is named");
    assert_eq!((close.workers, close.prefetch), (1, 2));
    let text = a.paragraph();
    assert!(text.contains("Perhaps as good as the best measured (1 worker"), "{text}");
    assert!(text.contains("too close to call; more --train-steps decide"), "{text}");
    assert!(!text.contains("did not help"), "{text}");
    // 12 % slower on the point estimate: beyond the target, so the best is the answer and
    // the fewer workers are named as perhaps enough.
    let rows = render(&[spread(0, 112.0), spread(1, 100.0)]).rows;
    let a = answer(&rows, &state(100.0, 2), knobs(LoaderBackend::Native)).unwrap();
    assert_eq!(a.workers, 1, "the best, the fewer being beyond the target");
    assert_eq!(a.too_close.map(|c| c.workers), Some(0));
    assert!(a.paragraph().contains("Fewer might do as well (0 workers"), "{}", a.paragraph());
    // Clear-cut rows name nothing.
    let clear = answer(&super::tests::rows(80.0), &state(200.0, 2), knobs(LoaderBackend::Native));
    assert_eq!(clear.unwrap().too_close, None);
}

#[test]
fn a_queue_that_makes_every_tenth_step_wait_long_is_not_step_bound() {
    // Nine steps in ten find a batch ready (2 % of the step waits), the tenth waits 40
    // times as long: the median says fed, the mean (what hiding every wait gains) does not.
    let mut c = FakeCell::new(2, 2, 16);
    c.loader_samples_per_s = 100.0;
    c.train_samples_per_s = 60.0;
    (c.input_bound_pct, c.copy_pct, c.late_factor) = (2.0, 0.0, 40.0);
    c.train_iteration_ms = vec![16e3 / 60.0; 20];
    let rows = render(&[c.result()]).rows;
    assert!(rows[0].wait_pct.0 <= 5.0 && rows[0].wait_mean_pct > 5.0, "{:?}", rows[0]);
    let a = answer(&rows, &state(1.0, 2), knobs(LoaderBackend::Native)).unwrap();
    assert!(matches!(a.bound, Bound::Cpus { .. }), "{:?}", a.bound);
}

#[test]
fn a_copy_no_worker_shortens_is_not_the_loaders_bound() {
    // One worker keeps up (1 % of each step waits) but copying the batch takes 6 %: input-
    // bound beyond the target, yet more workers would not help.
    let mut c = FakeCell::new(1, 2, 16);
    c.loader_samples_per_s = 100.0;
    c.train_samples_per_s = 75.0;
    c.input_bound_pct = 7.0;
    c.copy_pct = 6.0;
    c.train_iteration_ms = vec![16e3 / 75.0; 20];
    let rows = render(&[c.result()]).rows;
    assert!((rows[0].wait_pct.0 - 1.0).abs() < 1e-9, "{:?}", rows[0].wait_pct);
    let a = answer(&rows, &state(200.0, 2), knobs(LoaderBackend::Native)).unwrap();
    assert_eq!(a.bound, Bound::Step);
    let text = a.paragraph();
    assert!(text.contains("7.0 % of the step waiting for batches and copying them"), "{text}");
    assert!(text.contains("the rest is the batch's copy to the device"), "{text}");
    // In a lerobot-train run the rest is its main process's hand-over.
    let run = answer(&rows, &state(200.0, 2), knobs(LoaderBackend::LerobotTrain)).unwrap();
    let text = run.paragraph();
    assert!(text.contains("the rest is the main process's hand-over"), "{text}");
    assert!(text.contains("--policy.device=cuda"), "{text}");
}

#[test]
fn a_configuration_verified_by_its_train_phase_borrows_one_workers_loader_figures() {
    // A step of 4 s needs 4 samples/s: none (3.85/s) is within 5 %. Only one worker's
    // loader was measured alone; the answer's CPU per sample and stage come from it.
    let cell = |w: usize, train: f64, alone: bool| {
        let mut c = FakeCell::new(w, 2, 16);
        (c.loader_samples_per_s, c.train_samples_per_s) = (100.0, train);
        c.loader_alone = alone;
        c.result()
    };
    let rows = render(&[cell(1, 4.0, true), cell(0, 3.85, false)]).rows;
    let none = rows.iter().find(|r| r.knobs.knobs.workers == 0).unwrap();
    assert_eq!((none.loader_samples_per_s, none.loader_cpu_ms_per_sample), (None, None));
    let a = answer(&rows, &state(4000.0, 2), knobs(LoaderBackend::Native)).unwrap();
    assert_eq!(a.workers, 0);
    let one = rows.iter().find(|r| r.knobs.knobs.workers == 1).unwrap();
    assert_eq!(Some(a.cpu_ms_per_sample), one.loader_cpu_ms_per_sample);
    assert_eq!(a.rates.per_worker, 100.0);
    assert_eq!(a.dominant_stage.map(|(s, _)| s), Some("decode".to_string()));
}
