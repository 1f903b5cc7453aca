//! `feedbench layout` end to end on a small generated dataset: every candidate measured and
//! reported, higher CRF smaller and worse, PNG exact, the source untouched, `--resume` skipping
//! finished candidates, `report DIR` re-rendering from the results alone, and a partial
//! download refused with the episodes that are complete.

use crate::common;

use std::path::{Path, PathBuf};

use common::{feedbench, file_tree};
use feedbench::bench::layout_study::config::LayoutConfig;
use feedbench::bench::layout_study::loss::LossProbe;
use feedbench::bench::layout_study::read_results;
use feedbench::bench::layout_study::result::{CandidateResult, LossFigure};
use feedbench::dataset::video::VideoCodec;
use feedbench::dataset::write::preset::CameraPreset;
use feedbench::dataset::write::synth::{synth, SynthOptions};
use feedbench::dataset::write::Preset;

/// 3 episodes of 14 to 18 frames, one 64×80 AV1 camera, v3.0.
fn source(dir: &Path) -> PathBuf {
    let mut preset = Preset::load("pusht").unwrap();
    preset.episodes = 3;
    preset.frames_per_episode = 16;
    preset.frames_jitter = 2;
    preset.codec = VideoCodec::Av1;
    preset.cameras = vec![CameraPreset { key: "observation.image".into(), height: 64, width: 80 }];
    let root = dir.join("source");
    synth(&root, &preset, &SynthOptions { seed: 3, ..SynthOptions::default() }).unwrap();
    root
}

const MEASURE: &str =
    "[measure]\nworkers = 1\nbatch = 4\nbatches = 2\nrepeats = 2\nquality_frames = 12\n";

fn config(dir: &Path, axes: &str) -> PathBuf {
    let path = dir.join("layout.toml");
    std::fs::write(&path, format!("[axes]\n{axes}\n{MEASURE}[choose]\nmin_psnr = 20\n")).unwrap();
    path
}

fn results(out: &Path) -> Vec<CandidateResult> {
    read_results(&out.join("layout.jsonl")).unwrap()
}

fn find<'a>(results: &'a [CandidateResult], label: &str) -> &'a CandidateResult {
    results.iter().find(|r| r.label == label).unwrap_or_else(|| panic!("no {label}"))
}

#[test]
fn a_study_measures_each_candidate_resumes_and_leaves_the_source_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let root = source(dir.path());
    let before = file_tree(&root);
    let out = dir.path().join("study");
    let (s, o) = (root.to_str().unwrap(), out.to_str().unwrap());
    let c = config(dir.path(), "crf = [50]\nstorage = [\"png\", \"raw\"]");
    let (ok, stdout, stderr) =
        feedbench(&["layout", s, "--config", c.to_str().unwrap(), "--out", o]);
    assert!(ok, "{stderr}");
    assert_eq!(file_tree(&root), before, "the source was written");
    assert!(stdout.contains("Recommended:"), "{stdout}");
    for file in
        ["report.md", "report.html", "results.csv", "pareto.svg", "layout.jsonl", "layout.toml"]
    {
        assert!(out.join(file).is_file(), "{file}");
    }

    let first = results(&out);
    assert_eq!(first.len(), 4);
    let (base, crf50, png) =
        (find(&first, "base"), find(&first, "crf=50"), find(&first, "storage=png"));
    assert!(crf50.bytes_per_frame < base.bytes_per_frame, "{crf50:?}\n{base:?}");
    assert!(crf50.quality.psnr_db < base.quality.psnr_db);
    assert!(base.quality.psnr_db.is_finite() && base.quality.psnr_db > 20.0);
    assert!(png.quality.psnr_db.is_infinite() && png.quality.worst_ssim == 1.0, "{png:?}");
    assert!((png.png_ratio() - 1.0).abs() < 0.05, "PNG candidates are PNG-sized: {png:?}");
    for r in &first {
        assert_eq!((r.episodes, r.camera_frames_per_sample), (3, 2), "diffusion: 2 obs frames");
        assert!(r.loader.samples_per_s > 0.0 && r.cold_loader.is_some());
        assert_eq!(r.quality.frames, 12);
    }
    assert!(base.decode.frames_decoded_per_sample.unwrap() >= 2.0, "{base:?}");
    // The default policy crops 84×84, more than these 64×80 frames: each result says so.
    let why = "the step cannot run at learning rate 0: model config: crop 84×84 does not fit";
    assert!(stderr.contains(&format!("loss: not measured: {why}")), "{stderr}");
    assert!(
        matches!(&base.loss, Some(LossFigure::Unmeasured(w)) if w.contains(why)),
        "{:?}",
        base.loss
    );
    assert!(png.decode.frames_decoded_per_sample.is_none());
    let raw = find(&first, "storage=raw");
    assert!(raw.quality.psnr_db.is_infinite(), "{raw:?}");
    assert_eq!(raw.decode.frames_decoded_per_sample, Some(0.0));
    assert_eq!(raw.bytes_per_frame, (3 * 64 * 80) as f64);

    // Again without --resume: refused; with it, only the new candidate is measured.
    let c = config(dir.path(), "crf = [50]\nstorage = [\"png\", \"raw\"]\ngop = [6]");
    let c = c.to_str().unwrap();
    let (ok, _, stderr) = feedbench(&["layout", s, "--config", c, "--out", o]);
    assert!(!ok && stderr.contains("--resume"), "{stderr}");
    // Resumed with another [measure], refused: its candidates would not compare with the
    // earlier ones (it measured them with the new settings).
    let other = dir.path().join("other-measure.toml");
    let text = std::fs::read_to_string(c).unwrap().replace("batches = 2", "batches = 3");
    std::fs::write(&other, text).unwrap();
    let kept = file_tree(&out);
    let args = ["layout", s, "--config", other.to_str().unwrap(), "--out", o, "--resume"];
    let (ok, _, stderr) = feedbench(&args);
    assert!(!ok && stderr.contains("layout.toml: its [measure] differs from"), "{stderr}");
    assert_eq!(file_tree(&out), kept, "a refused resume leaves the study as it was");
    let (ok, _, stderr) = feedbench(&["layout", s, "--config", c, "--out", o, "--resume"]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("[1/1] gop=6: writing"), "{stderr}");
    let second = results(&out);
    assert_eq!(second.len(), 5);
    assert_eq!(second[..4], first[..], "finished candidates are kept as they were");
    assert_eq!(file_tree(&root), before);

    // The report again, from the results file alone.
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    std::fs::remove_file(out.join("report.md")).unwrap();
    let (ok, stdout, stderr) = feedbench(&["report", o]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("gop=6"), "{stdout}");
    assert_eq!(std::fs::read_to_string(out.join("report.md")).unwrap(), markdown);
}

#[test]
fn a_partial_download_is_refused_naming_the_complete_episodes() {
    let Some(g1) = common::g1_partial() else { return };
    let dir = tempfile::tempdir().unwrap();
    let c = config(dir.path(), "gop = [10]");
    let out = dir.path().join("study");
    let args = ["layout", g1.to_str().unwrap(), "--config", c.to_str().unwrap()];
    let (ok, _, stderr) = feedbench(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
    assert!(!ok);
    assert!(stderr.contains("--episodes") && stderr.contains("1,2,4,29,30"), "{stderr}");
    assert!(!out.exists(), "a refused source leaves no --out");
}

#[test]
fn a_source_that_does_not_stand_leaves_no_output_directory() {
    let dir = tempfile::tempdir().unwrap();
    let root = source(dir.path());
    let c = config(dir.path(), "gop = [10]");
    let out = dir.path().join("made/study");
    let study = |episodes: &str| {
        let args = ["layout", root.to_str().unwrap(), "--config", c.to_str().unwrap()];
        let more = ["--episodes", episodes, "--out", out.to_str().unwrap()];
        feedbench(&[&args[..], &more].concat())
    };
    let (ok, _, stderr) = study("7");
    assert!(!ok && stderr.contains("episode 7 is not in the dataset"), "{stderr}");
    assert!(!dir.path().join("made").exists(), "absent episodes: nothing made");
    let video = root.join("videos/observation.image/chunk-000/file-000.mp4");
    let bytes = std::fs::read(&video).unwrap();
    std::fs::write(&video, &bytes[..bytes.len() / 2]).unwrap();
    let (ok, _, stderr) = study("0-2");
    assert!(!ok && stderr.contains("file-000.mp4"), "{stderr}");
    assert!(!dir.path().join("made").exists(), "a damaged source: nothing made");
}

#[test]
fn a_study_inside_its_source_or_with_a_bad_config_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = source(dir.path());
    let inside = root.join("study");
    let c = config(dir.path(), "gop = [10]");
    let args = ["layout", root.to_str().unwrap(), "--config", c.to_str().unwrap(), "--out"];
    let (ok, _, stderr) = feedbench(&[&args[..], &[inside.to_str().unwrap()]].concat());
    assert!(!ok && stderr.contains("inside the source"), "{stderr}");
    assert!(!inside.exists(), "the refusal wrote into the source");
    let bad = config(dir.path(), "codec = [\"vp9\"]");
    let out = dir.path().join("study");
    let args = ["layout", root.to_str().unwrap(), "--config", bad.to_str().unwrap(), "--out"];
    let (ok, _, stderr) = feedbench(&[&args[..], &[out.to_str().unwrap()]].concat());
    assert!(!ok && stderr.contains("layout.toml") && stderr.contains("axes.codec"), "{stderr}");
    assert!(!out.exists(), "nothing written for a bad config");
}

/// A study run to its end: its source, config, output directory, what it printed, its results.
struct Study {
    root: PathBuf,
    config: PathBuf,
    out: PathBuf,
    stdout: String,
    results: Vec<CandidateResult>,
}

/// A layout study of [`source`] in `dir` with the config `text`, which must succeed.
fn study(dir: &Path, text: &str) -> Study {
    let root = source(dir);
    let (config, out) = (dir.join("layout.toml"), dir.join("study"));
    std::fs::write(&config, text).unwrap();
    let (s, c, o) = (root.to_str().unwrap(), config.to_str().unwrap(), out.to_str().unwrap());
    let (ok, stdout, stderr) = feedbench(&["layout", s, "--config", c, "--out", o]);
    assert!(ok, "{stderr}");
    let results = results(&out);
    Study { root, config, out, stdout, results }
}

#[test]
fn the_loss_column_holds_lossless_frames_to_zero_and_passes_over_a_heavily_lossy_candidate() {
    let dir = tempfile::tempdir().unwrap();
    // A raw base (the source's frames as decoded: lossless), frames scaled to 16×16 and back,
    // and AV1 at its highest CRF. The floor suits this untrained policy, whose loss grey frames
    // move by a few tenths of a percent.
    let loss = "[loss]\nbatches = 3\n[loss.policy]\ncrop_shape = [48, 64]\n";
    let text = format!(
        "[base]\nstorage = \"raw\"\ncrf = 63\n[axes]\nresolution = [\"16x16\"]\n\
         storage = [\"video\"]\n{MEASURE}{loss}[choose]\nmax_loss_change = 0.002\n"
    );
    let Study { root, config: c, out, stdout, results } = study(dir.path(), &text);
    let loss = |label: &str| find(&results, label).loss.clone().unwrap();
    let (raw, small, crf63) = (loss("base"), loss("resolution=16x16"), loss("storage=video"));
    let LossFigure::Measured { source, candidate, .. } = &raw else { panic!("{raw:?}") };
    assert_eq!(source.len(), 3);
    assert_eq!(candidate, source, "lossless frames step to the same loss, to the bit");
    assert!(source.iter().all(|l| l.is_finite() && *l > 0.0), "{source:?}");
    assert_eq!(raw.mean_and_max(), Some((0.0, 0.0)));
    let grey = raw.blind_change().unwrap();
    assert!(grey > 0.0 && small.blind_change() == Some(grey), "one grey reference: {small:?}");
    let (small_mean, _) = small.mean_and_max().unwrap();
    assert!(small_mean > 0.002, "16×16 and back moves the loss beyond the floor: {small:?}");
    assert!(crf63.mean_and_max().unwrap().0 > 0.0, "{crf63:?}");
    assert!(stdout.contains("Recommended: base"), "{stdout}");
    assert!(
        stdout.contains("Faster but rejected: resolution=16x16")
            && stdout.contains("> max_loss_change 0.20 %"),
        "{stdout}"
    );
    assert!(stdout.contains("loss changed 0.00 % (at most 0.00 %)"), "{stdout}");
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("## Loss") && markdown.contains("over the same 3 batches"));
    let svg = std::fs::read_to_string(out.join("loss.svg")).unwrap();
    assert!(svg.contains("resolution=16x16") && svg.contains("max_loss_change 0.20 %"));
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert!(csv.lines().next().unwrap().contains("loss_change_mean,loss_change_max"), "{csv}");

    // The source read twice steps to the same loss: the seed holds the step, lr 0 the policy.
    let config = LayoutConfig::load(&c).unwrap();
    let mut probe = LossProbe::new(&root, None, &config.measure, &config.loss).unwrap();
    let again = probe.change(&root, false);
    let LossFigure::Measured { source: first, candidate: second, .. } = &again else {
        panic!("{again:?}")
    };
    assert_eq!((first, first.len()), (second, 3));
    assert_eq!(first, source, "the study's probe and this one step alike");
}

/// `info --json`'s layout of each video file of the dataset at `root`.
fn file_layouts(root: &Path) -> Vec<serde_json::Value> {
    let (ok, json, err) = feedbench(&["info", root.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    value["cameras"][0]["layout"].as_array().unwrap().clone()
}

#[test]
fn candidates_without_b_frames_indexed_at_the_front_or_with_episodes_across_gops_are_so() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[base]\ncodec = \"h264\"\ngop = 10\n[axes]\nfaststart = [true]\nbframes = [0]\n\
         [[candidate]]\ncodec = \"av1\"\nversion = \"v3.0\"\n[[candidate]]\ncodec = \"av1\"\n\
         version = \"v3.0\"\nepisode_keyframes = false\n{MEASURE}[loss]\nbatches = 0\n"
    );
    let Study { out, stdout, results, .. } = study(dir.path(), &text);
    let labels: Vec<&str> = results.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "base",
            "bframes=0",
            "faststart=true",
            "codec=av1 version=v3.0",
            "codec=av1 version=v3.0 episode_keyframes=false"
        ]
    );
    assert!(results.iter().all(|r| r.loss.is_none()), "no loss column asked for");
    assert!(!stdout.contains("loss"), "{stdout}");
    let layouts = |label: &str| {
        let name = &find(&results, label).name;
        file_layouts(&out.join("candidates").join(name))
    };
    let base = layouts("base");
    assert_eq!(base.len(), 3, "v2.1: a file per episode");
    assert!(base.iter().all(|f| f["reordered"] == true && f["index_at_front"] == false));
    assert!(
        layouts("bframes=0").iter().all(|f| f["reordered"] == false),
        "{:?}",
        layouts("bframes=0")
    );
    assert!(layouts("faststart=true").iter().all(|f| f["index_at_front"] == true));
    // AV1 (x264 puts a keyframe at each episode's change of scene whatever it is asked).
    let own = layouts("codec=av1 version=v3.0");
    let across = layouts("codec=av1 version=v3.0 episode_keyframes=false");
    assert_eq!((own.len(), across.len()), (1, 1), "v3.0: the episodes in one file");
    assert_eq!(
        (own[0]["episodes"].as_u64(), own[0]["episodes_on_keyframe"].as_u64()),
        (Some(3), Some(3))
    );
    assert!(across[0]["episodes_on_keyframe"].as_u64().unwrap() < 3, "{across:?}");
    // The study says so of each.
    let files = |label: &str| find(&results, label).files.clone().unwrap();
    assert!(files("base").reordered() && !files("bframes=0").reordered());
    assert!(files("faststart=true").index_at_front() && !files("base").index_at_front());
    assert_eq!(files("codec=av1 version=v3.0").episodes_on_keyframe, 3);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        markdown.contains("- bframes=0: 3 files: GOP 10, no B-frames, index at the end, 3 of 3"),
        "{markdown}"
    );
    // Every one decodes to the same frames as the base, within the codec.
    for r in &results {
        assert!(r.quality.psnr_db > 30.0, "{}: {:?}", r.label, r.quality);
    }
}
