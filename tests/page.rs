//! The report's page (`report.html`) of a sweep and of a layout study as a user opens it: in
//! headless Chromium (Debian's), with no console error, every plot drawn, a hover over a
//! plotted point naming that cell or candidate, and no request leaving the page; and the same
//! figures as report.md.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common;
use crate::common::browser::{chromium, Browser};

/// The stored sweep the report tests render (24 cells of 48 results).
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report-v1");

/// A copy of the stored sweep's results, reported: its directory.
fn reported_fixture(dir: &Path) -> PathBuf {
    let out = dir.join("sweep");
    std::fs::create_dir(&out).unwrap();
    std::fs::copy(Path::new(FIXTURE).join("results.jsonl"), out.join("results.jsonl")).unwrap();
    let (ok, _, err) = common::feedbench(&["report", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    out
}

/// Each plot's id and how many marks it drew (scatter points, heatmap images, bars).
const PLOTS: &str = "Array.from(document.querySelectorAll('.js-plotly-plot')).map(d => [d.id, \
    d.querySelectorAll('.scatterlayer .point, .heatmaplayer image, .barlayer .point').length])";

/// The centre of the first marker of plot `id`'s first line, viewport pixels, after scrolling
/// it into view where it was not.
fn first_point(id: &str) -> String {
    format!(
        "(() => {{ const p = document.querySelector('#{id} .scatterlayer .point'); \
         p.scrollIntoView({{block: 'nearest'}}); const r = p.getBoundingClientRect(); \
         return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
    )
}

/// The `pages` opened in `browser`: no console error, and no request but for the pages
/// themselves and images plotly.js draws in memory (`data:`).
fn quiet_and_offline(browser: &Browser, pages: &[&Path]) {
    let errors = browser.errors();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    let urls: Vec<String> =
        pages.iter().map(|p| format!("file://{}", p.canonicalize().unwrap().display())).collect();
    let left: Vec<String> = browser
        .requests()
        .into_iter()
        .filter(|u| !urls.contains(u) && !u.starts_with("data:"))
        .collect();
    assert!(left.is_empty(), "requests beyond the page: {left:?}");
}

/// Hovers the first marker of plot `id`: what its hover label says.
fn hover_first_point(browser: &mut Browser, id: &str) -> String {
    let at = browser.evaluate(&first_point(id));
    let (x, y) = (at[0].as_f64().unwrap(), at[1].as_f64().unwrap());
    browser.move_mouse(x, y);
    browser.wait(Duration::from_millis(500));
    let hover =
        browser.evaluate(&format!("document.querySelector('#{id} .hoverlayer').textContent"));
    hover.as_str().unwrap_or_default().to_string()
}

#[test]
fn a_sweeps_page_opens_offline_draws_every_plot_and_a_hover_names_the_cell() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = reported_fixture(dir.path());
    let page = out.join("report.html");
    let mut browser = Browser::start(chromium);
    let load_s = browser.open(&page);
    eprintln!("{}: loaded in {load_s:.2} s", page.display());
    let plots = browser.evaluate(PLOTS);
    let plots = plots.as_array().expect("plots");
    // Two plot groups (resolution 48x48 and native): each a train plot and a heatmap; and
    // the recommended cell's stages.
    let ids: Vec<&str> = plots.iter().map(|p| p[0].as_str().unwrap()).collect();
    assert_eq!(ids, ["train-0", "heatmap-0", "train-1", "heatmap-1", "stages"], "{plots:?}");
    for plot in plots {
        assert!(plot[1].as_u64().unwrap() > 0, "a plot drew nothing: {plots:?}");
    }
    // The train plot's first curve is batch 4; its first point, no workers.
    let hover = hover_first_point(&mut browser, "train-0");
    assert!(hover.starts_with("0 workers, prefetch "), "the hover names the cell: {hover:?}");
    assert!(hover.contains("batch 4") && hover.contains(" samples/s"), "{hover:?}");
    assert!(hover.contains("input-bound:"), "and its verdict: {hover:?}");
    // The cell table sorts by a click on its header: up, then down.
    let sorted = browser.evaluate(
        "(() => { const t = document.querySelector('section.details table'); \
         const ths = Array.from(t.querySelectorAll('th')); \
         const i = ths.findIndex(h => h.textContent.trim() === 'train/s'); \
         const column = () => Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[i].textContent)); \
         ths[i].click(); const up = column(); ths[i].click(); return [up, column()]; })()",
    );
    let column = |k: usize| -> Vec<f64> {
        sorted[k].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
    };
    let (up, down) = (column(0), column(1));
    assert_eq!(up.len(), 24, "{sorted}");
    assert!(
        up.windows(2).all(|w| w[0] <= w[1]) && down.windows(2).all(|w| w[0] >= w[1]),
        "{sorted}"
    );
    quiet_and_offline(&browser, &[&page]);
    // A sweep of 40 cells (the stored one's, and its 1- and 2-worker cells again as 3 and 4
    // workers): how long its page takes to load, said (docs/report-page.md), not asserted.
    let forty = dir.path().join("forty");
    std::fs::create_dir(&forty).unwrap();
    let lines = std::fs::read_to_string(Path::new(FIXTURE).join("results.jsonl")).unwrap();
    let mut results: Vec<String> = lines.lines().map(str::to_string).collect();
    for line in lines.lines() {
        let mut result: serde_json::Value = serde_json::from_str(line).unwrap();
        let workers = result["cell"]["workers"].as_u64().unwrap();
        if workers >= 1 {
            result["cell"]["workers"] = (workers + 2).into();
            results.push(result.to_string());
        }
    }
    std::fs::write(forty.join("results.jsonl"), results.join("\n") + "\n").unwrap();
    let (ok, stdout, err) = common::feedbench(&["report", forty.to_str().unwrap(), "--html"]);
    assert!(ok && stdout.trim().ends_with("report.html"), "--html prints the page: {stdout}{err}");
    let forty_page = PathBuf::from(stdout.trim());
    let mut again = Browser::start(chromium);
    // The browser's own start-up first (a page of one line), then the page, twice.
    let blank = dir.path().join("blank.html");
    std::fs::write(&blank, "<p>feedbench</p>").unwrap();
    let start_up = again.open(&blank);
    let (first, second) = (again.open(&forty_page), again.open(&forty_page));
    eprintln!(
        "a 40-cell sweep's page: loaded in {first:.2} s, {second:.2} s again (a page of one \
         line, first in the browser: {start_up:.2} s)"
    );
    quiet_and_offline(&again, &[&blank, &forty_page]);
    // The README's picture of a page: the answer on top, the first plot and its hover.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-page.png");
    browser.screenshot(&shot);
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "{}", shot.display());
}

#[test]
fn the_page_holds_every_figure_of_report_md() {
    let dir = tempfile::tempdir().unwrap();
    let out = reported_fixture(dir.path());
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let figures: Vec<&str> = markdown
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|f| f.trim_matches('.'))
        .filter(|f| f.chars().any(|c| c.is_ascii_digit()))
        .collect();
    assert!(figures.len() > 200, "the fixture's report has its figures: {}", figures.len());
    let missing: Vec<&&str> = figures.iter().filter(|f| !page.contains(**f)).collect();
    assert!(missing.is_empty(), "figures of report.md not in report.html: {missing:?}");
    // The plots' hovers carry the table's figures: the recommended row's train samples/s.
    let recommended =
        markdown.lines().find(|l| l.starts_with("| \\* |")).expect("a recommended row");
    let train = recommended.split('|').map(str::trim).nth(9).unwrap();
    assert!(page.contains(&format!("train {train} samples/s")), "{train}");
}

#[test]
fn a_layout_studys_page_plots_every_candidate_hoverable() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    // 3 episodes of 16 frames, one 64×80 AV1 camera; the base and two candidates.
    let root = dir.path().join("source");
    common::synth_pusht(&root, 3, 16, &["--codec", "av1"]);
    let config = dir.path().join("layout.toml");
    std::fs::write(
        &config,
        "[axes]\ncrf = [50]\ngop = [4]\n[measure]\nworkers = 1\nbatch = 4\nbatches = 2\n\
         repeats = 2\nquality_frames = 12\n[choose]\nmin_psnr = 20\n",
    )
    .unwrap();
    let out = dir.path().join("study");
    let (s, c, o) = (root.to_str().unwrap(), config.to_str().unwrap(), out.to_str().unwrap());
    let (ok, _, err) = common::feedbench(&["layout", s, "--config", c, "--out", o]);
    assert!(ok, "{err}");
    let page = out.join("report.html");
    let mut browser = Browser::start(chromium);
    browser.open(&page);
    let meta = browser.evaluate("document.querySelector('.meta').textContent");
    assert!(
        meta.as_str().unwrap().starts_with("Measured on ")
            && meta.as_str().unwrap().contains(" UTC"),
        "{meta}"
    );
    let plots = browser.evaluate(PLOTS);
    assert_eq!(
        plots,
        serde_json::json!([["pareto", 4], ["loss", 3]]),
        "3 candidates and the ring; the loss of each"
    );
    let hover = hover_first_point(&mut browser, "pareto");
    let labels = ["base", "crf=50", "gop=4"];
    assert!(labels.iter().any(|l| hover.starts_with(l)), "the hover names it: {hover:?}");
    assert!(hover.contains("bytes per frame") && hover.contains("PSNR"), "{hover:?}");
    let hover = hover_first_point(&mut browser, "loss");
    assert!(labels.iter().any(|l| hover.starts_with(l)), "the hover names it: {hover:?}");
    assert!(hover.contains("loss changed") && hover.contains("(at most"), "{hover:?}");
    quiet_and_offline(&browser, &[&page]);
}

#[test]
fn a_tunes_page_shows_its_measurements_beside_the_prediction() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pusht");
    common::synth_pusht(&root, 3, 40, &[]);
    let out = dir.path().join("tune");
    let (r, o) = (root.to_str().unwrap(), out.to_str().unwrap());
    let tune = ["tune", r, "--batch", "8", "--step-ms", "200", "--cpus", "1", "--memory", "2GB"];
    let short = ["--loader-batches", "4", "--train-steps", "6", "--warmup", "1", "--out", o];
    let (ok, _, err) = common::feedbench(&[&tune[..], &short].concat());
    assert!(ok, "{err}");
    // `report` writes the tune's page again, not a sweep's.
    let (ok, stdout, err) = common::feedbench(&["report", o, "--html"]);
    assert!(ok, "{err}");
    let page = PathBuf::from(stdout.trim());
    let mut browser = Browser::start(chromium);
    browser.open(&page);
    assert_eq!(browser.evaluate("document.title"), "feedbench tune");
    let plots = browser.evaluate(PLOTS);
    let ids: Vec<&str> = plots.as_array().unwrap().iter().map(|p| p[0].as_str().unwrap()).collect();
    assert_eq!(ids, ["measured", "faster"], "{plots}");
    assert!(plots.as_array().unwrap().iter().all(|p| p[1].as_u64().unwrap() > 0), "{plots}");
    let hover = hover_first_point(&mut browser, "measured");
    assert!(hover.contains(" workers, prefetch ") && hover.contains("measured for"), "{hover:?}");
    let answer = browser.evaluate("document.querySelector('.answer').textContent");
    assert!(answer.as_str().unwrap().contains("train samples/s"), "{answer}");
    quiet_and_offline(&browser, &[&page]);
}

#[test]
fn a_guards_page_shows_each_run_against_the_baselines_band() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    common::synth_pusht(&dir.path().join("ds"), 2, 30, &[]);
    let config = dir.path().join("guard.toml");
    std::fs::write(
        &config,
        "[dataset]\npath = \"ds\"\n[run]\nrepeats = 3\nbatches = 3\ntolerance = \"10%\"\n\
         [[cell]]\nname = \"inline\"\nworkers = 0\nbatch = 4\n\
         [[cell]]\nname = \"one-worker\"\nworkers = 1\nbatch = 4\n",
    )
    .unwrap();
    let (config, baseline) = (config.to_str().unwrap(), dir.path().join("b.json"));
    let baseline = baseline.to_str().unwrap();
    let (ok, _, err) =
        common::feedbench(&["guard", "--config", config, "--save-baseline", baseline]);
    assert!(ok, "{err}");
    let page = dir.path().join("guard.html");
    let judged = ["guard", "--config", config, "--baseline", baseline, "--tolerance", "90%"];
    let (ok, out, err) =
        common::feedbench(&[&judged[..], &["--html", page.to_str().unwrap()]].concat());
    assert!(ok, "{out}{err}");
    let mut browser = Browser::start(chromium);
    browser.open(&page);
    // Two cells, three runs each, the baseline's and this run's.
    let plots = browser.evaluate(PLOTS);
    assert_eq!(plots, serde_json::json!([["cpu", 12], ["rate", 12]]), "{plots}");
    let hover = hover_first_point(&mut browser, "cpu");
    assert!(hover.starts_with("inline, baseline run "), "{hover:?}");
    assert!(
        hover.contains("CPU ms/sample") && hover.contains("× the baseline's median"),
        "{hover:?}"
    );
    quiet_and_offline(&browser, &[&page]);
    // A page where no baseline is judged, or into a directory, is refused before measuring.
    let (ok, _, err) = common::feedbench(&[
        "guard",
        "--config",
        config,
        "--save-baseline",
        baseline,
        "--html",
        "x.html",
    ]);
    assert!(!ok && err.contains("--baseline"), "{err}");
    let into_dir = [&judged[..], &["--html", dir.path().to_str().unwrap()]].concat();
    let (ok, _, err) = common::feedbench(&into_dir);
    assert!(!ok && err.contains("is a directory"), "{err}");
}

#[test]
fn a_logs_page_shows_its_steps_with_the_epoch_starts_marked() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    // A real lerobot-train run of 60 steps over three epochs, logged every step.
    let log = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/lerobot-train/diffusion-cpu-epochs-lerobot-reader.log"
    );
    let page = dir.path().join("doctor.html");
    let (ok, out, err) = common::feedbench(&["doctor", log, "--html", page.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.contains("input"), "the text as before: {out}");
    let mut browser = Browser::start(chromium);
    browser.open(&page);
    // data_s and updt_s at each of the 60 steps, and the three epoch starts, where data_s
    // stalls (every 17 steps; epch: says 20: the sampler drops frames it counts).
    assert_eq!(browser.evaluate(PLOTS), serde_json::json!([["steps", 123]]));
    let hover = hover_first_point(&mut browser, "steps");
    assert!(hover.starts_with("step 1") && hover.contains("data_s") && hover.contains("updt_s"));
    let marks = browser.evaluate(
        "document.getElementById('steps').data.filter(t => t.name === 'epoch start')[0].hovertext",
    );
    assert_eq!(marks.as_array().map(Vec::len), Some(3), "{marks}");
    assert!(marks[0].as_str().unwrap().starts_with("an epoch starts: data_s stalls"), "{marks}");
    quiet_and_offline(&browser, &[&page]);
    // A page into a directory is refused before the log is read.
    let (ok, _, err) = common::feedbench(&["doctor", log, "--html", dir.path().to_str().unwrap()]);
    assert!(!ok && err.contains("is a directory"), "{err}");
}

#[test]
fn a_killed_sweeps_page_says_what_is_missing_and_no_results_is_one_error() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("pusht");
    common::synth_pusht(&root, 2, 40, &[]);
    let config = dir.path().join("sweep.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\npath = \"{}\"\n[loader]\nworkers = [0, 1]\nbatch = [8]\n[model]\n\
             model = [\"synthetic:5ms\"]\ndevice = \"cpu\"\n[run]\nloader_batches = 4\n\
             model_steps = 3\ntrain_steps = 6\nwarmup = 1\n",
            root.display()
        ),
    )
    .unwrap();
    let out = dir.path().join("sweep");
    let (c, o) = (config.to_str().unwrap(), out.to_str().unwrap());
    let (ok, _, err) = common::feedbench(&["sweep", "--config", c, "--out", o]);
    assert!(ok, "{err}");
    // Killed while writing its second cell: the first whole, the second torn.
    let results = out.join("results.jsonl");
    let text = std::fs::read_to_string(&results).unwrap();
    let first_end = text.find('\n').unwrap() + 1;
    std::fs::write(&results, &text[..first_end + 100]).unwrap();
    let (ok, stdout, err) = common::feedbench(&["report", o, "--html"]);
    assert!(ok, "{err}");
    let page = PathBuf::from(stdout.trim());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("1 of the 2 cells its sweep.toml plans are measured"),
        "the page says so"
    );
    let mut browser = Browser::start(chromium);
    browser.open(&page);
    let plots = browser.evaluate(PLOTS);
    assert!(plots.as_array().unwrap().iter().all(|p| p[1].as_u64().unwrap() > 0), "{plots}");
    quiet_and_offline(&browser, &[&page]);
    // No results at all: one error naming the file, and no page.
    std::fs::write(&results, "").unwrap();
    std::fs::remove_file(&page).unwrap();
    let (ok, _, err) = common::feedbench(&["report", o, "--html"]);
    assert!(!ok && err.contains("results.jsonl") && err.lines().count() == 1, "{err}");
    assert!(!page.exists(), "no blank page");
}

#[test]
fn an_older_feedbenchs_results_make_a_page_that_says_what_they_lack() {
    let dir = tempfile::tempdir().unwrap();
    let out = reported_fixture(dir.path());
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    // The stored sweep predates per-step samples and accelerator utilisation.
    assert!(
        page.contains(
            "keep no per-step samples (no intervals, no bands), no accelerator utilisation"
        ),
        "{}",
        page.len()
    );
}
