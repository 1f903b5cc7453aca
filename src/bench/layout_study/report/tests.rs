use super::*;
use crate::bench::layout_study::candidate::Candidate;
use crate::bench::layout_study::result::{DecodeCost, LoaderFigures, VsBase};
use crate::measure::change::Change;

/// A result `label` of `bytes` per frame, `psnr` dB, `speed`× the base (None: the base).
fn result(label: &str, bytes: f64, psnr: f64, speed: Option<f64>) -> CandidateResult {
    let quality =
        Quality { frames: 10, psnr_db: psnr, worst_psnr_db: psnr, ssim: 0.97, worst_ssim: 0.95 };
    let percent = |s: f64| 100.0 * (s - 1.0);
    CandidateResult {
        system: None,
        finished_unix_s: None,
        name: label.into(),
        label: label.into(),
        candidate: Candidate::default(),
        episodes: 2,
        frames: 100,
        camera_frames_per_sample: 2,
        bytes_per_frame: bytes,
        source_bytes_per_frame: 1000.0,
        png_bytes_per_frame: 10_000.0,
        png_decode_ms_per_frame: 1.0,
        encode_cpu_ms_per_frame: 5.0,
        decode: DecodeCost {
            cpu_ms_per_sample: 2.0,
            frames_decoded_per_sample: Some(2.5),
            cpu_us_per_decoded_frame: Some(700.0),
        },
        loader: LoaderFigures {
            samples_per_s: 100.0 * speed.unwrap_or(1.0),
            samples_per_s_interval: Some((95.0, 105.0)),
            cpu_ms_per_sample: 2.0,
            runs: vec![],
        },
        vs_base: speed.map(|s| VsBase {
            samples_per_s: Change {
                percent: percent(s),
                low: percent(s) - 3.0,
                high: percent(s) + 3.0,
            },
            cpu_ms_per_sample: Change { percent: 0.0, low: -1.0, high: 1.0 },
            base_runs: vec![],
        }),
        cold_loader: None,
        first_batch_ms: 50.0,
        quality,
        scaling: None,
        loss: None,
        files: None,
    }
}

#[test]
fn a_loss_beyond_the_floor_passes_a_candidate_over_and_a_blind_policy_is_said() {
    let measured = |candidate: [f64; 2], blind: [f64; 2]| {
        Some(LossFigure::Measured {
            source: vec![1.0, 2.0],
            candidate: candidate.to_vec(),
            blind: blind.to_vec(),
        })
    };
    let mut fast = result("crf=40", 500.0, 37.0, Some(1.2));
    fast.loss = measured([1.03, 2.02], [1.1, 1.8]);
    let mut base = result("base", 1000.0, 40.0, None);
    base.loss = measured([1.0, 2.0], [1.1, 1.8]);
    let choose = ChooseSection::default();
    let report = LayoutReport::new(vec![base.clone(), fast.clone()], &choose);
    let text = report.recommendation();
    assert!(text.starts_with("Recommended: base"), "{text}");
    assert!(
        text.contains("loss changed 0.00 % (at most 0.00 %), within loss change ≤ 1.00 %"),
        "{text}"
    );
    assert!(text.contains("rejected: crf=40 (120 samples/s, 1.20× the base): loss changed 2.00 % > max_loss_change 1.00 %"), "{text}");
    assert!(!text.contains("cannot tell"), "grey frames move it 10 %: {text}");
    assert!(render_markdown(&report).contains(
        "Grey frames in place of every camera change it 10.00 %; the source's loss moves 47.14 %"
    ));
    // A policy that grey frames hardly move: said, and the candidates still judged.
    for row in [&mut base, &mut fast] {
        let LossFigure::Measured { blind, .. } = row.loss.as_mut().unwrap() else { panic!() };
        *blind = vec![1.001, 2.0];
    }
    let text = LayoutReport::new(vec![base, fast], &choose).recommendation();
    assert!(text.contains("cannot tell candidates apart: grey frames in place of every camera change this policy's loss only 0.05 %"), "{text}");
}

#[test]
fn the_fastest_within_the_floors_is_recommended_and_faster_ones_say_why_not() {
    let results = vec![
        result("base", 1000.0, 40.0, None),
        result("resolution=96x128", 300.0, 33.0, Some(3.0)),
        result("gop=10", 400.0, 39.0, Some(0.6)),
        result("codec=h264", 5000.0, 38.0, Some(1.5)),
        result("crf=40", 500.0, 37.0, Some(1.2)),
    ];
    let choose = ChooseSection {
        min_psnr: Some(35.0),
        max_bytes_ratio: Some(2.0),
        ..ChooseSection::default()
    };
    let report = LayoutReport::new(results, &choose);
    assert!(report.relative, "every row measured against the base");
    let order: Vec<&str> = report.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(order, ["resolution=96x128", "codec=h264", "crf=40", "base", "gop=10"]);
    assert_eq!(report.recommended, Some(2));
    let text = report.recommendation();
    assert!(text.starts_with("Recommended: crf=40"), "{text}");
    assert!(
        text.contains(
            "resolution=96x128 (300 samples/s, 3.00× the base): PSNR 33.00 dB < min_psnr 35 dB"
        ),
        "{text}"
    );
    assert!(
        text.contains("codec=h264")
            && text.contains("5.00× the source's bytes > max_bytes_ratio 2"),
        "{text}"
    );
    assert!(!text.contains("Not faster"), "1.2× ± 3 % against 1× ± 5 % is faster: {text}");

    let strict = ChooseSection { min_psnr: Some(45.0), ..ChooseSection::default() };
    let report = LayoutReport::new(vec![result("base", 1000.0, 40.0, None)], &strict);
    assert_eq!(report.recommended, None);
    assert!(report.recommendation().contains("No candidate meets PSNR ≥ 45 dB"));
}

#[test]
fn results_without_the_base_are_ranked_by_samples_per_second() {
    let mut old = result("gop=10", 400.0, 39.0, Some(0.5));
    old.vs_base = None;
    let report =
        LayoutReport::new(vec![result("base", 1000.0, 40.0, None), old], &ChooseSection::default());
    assert!(!report.relative);
    assert_eq!(report.rows[0].label, "base");
    assert!(render_csv(&report).lines().count() == 3);
}
