//! The report (issue #5) re-rendered from `results.jsonl` alone: hand-built cell results are
//! appended as a sweep appends them, then `report_dir` and `feedbench report DIR` read them back.

use crate::common;

use std::path::Path;

use common::feedbench;
use feedbench::bench::report::{self, Stage};
use feedbench::bench::sweep::results::{append_result, CellResult};
use feedbench::dataset::Resolution;
use feedbench::measure::verdict::Verdict;
use feedbench::testdata::FakeCell;

pub(crate) fn cell(
    workers: usize,
    prefetch: usize,
    batch: usize,
    train: f64,
    input_bound: f64,
) -> FakeCell {
    let mut c = FakeCell::new(workers, prefetch, batch);
    c.train_samples_per_s = train;
    c.input_bound_pct = input_bound;
    c
}

fn repeat(mut c: FakeCell, repeat: usize, train: f64) -> FakeCell {
    c.cell.repeat = repeat;
    c.train_samples_per_s = train;
    c
}

fn write_results(dir: &Path, cells: &[FakeCell]) {
    let path = dir.join(report::RESULTS_FILE);
    for c in cells {
        append_result(&path, &c.result()).unwrap();
    }
}

/// A sweep of batch 16 over workers 0, 1, 2 (prefetch 1, 2, 4 at 1 worker). Workers 0 was
/// measured three times with one outlier (a mean would make it the best; the median does not).
fn sweep() -> Vec<FakeCell> {
    vec![
        cell(0, 2, 16, 10.0, 45.0),
        repeat(cell(0, 2, 16, 10.0, 45.0), 1, 9.0),
        repeat(cell(0, 2, 16, 10.0, 45.0), 2, 60.0),
        cell(1, 1, 16, 18.0, 12.0),
        cell(1, 2, 16, 19.5, 8.0),
        cell(1, 4, 16, 19.6, 7.0),
        cell(2, 2, 16, 20.0, 2.0),
    ]
}

pub(crate) fn rendered(cells: &[FakeCell]) -> report::Report {
    let results: Vec<CellResult> = cells.iter().map(FakeCell::result).collect();
    report::render(&results)
}

/// The texts of an SVG's `<text>` elements, trimmed.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

/// Every opened tag is closed in order (self-closing tags aside), and the root is `<svg>`.
fn well_formed_svg(svg: &str) -> bool {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = svg;
    let mut root = None;
    while let Some(start) = rest.find('<') {
        let Some(end) = rest[start..].find('>').map(|e| e + start) else { return false };
        let tag = &rest[start + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            if stack.pop() != Some(name.trim()) {
                return false;
            }
        } else if !tag.starts_with('?') && !tag.starts_with('!') && !tag.ends_with('/') {
            let name = tag.split_whitespace().next().unwrap_or("");
            root.get_or_insert(name);
            stack.push(name);
        }
        rest = &rest[end + 1..];
    }
    stack.is_empty() && root == Some("svg")
}

#[test]
fn recommends_the_knee_and_the_prefetch_past_which_nothing_improves() {
    let dir = tempfile::tempdir().unwrap();
    write_results(dir.path(), &sweep());
    let written = report::report_dir(dir.path()).unwrap();
    let r = &written.report;
    assert_eq!((r.results, r.rows.len(), r.groups.len()), (7, 5, 1));
    let w0 = &r.rows[0];
    assert_eq!((w0.knobs.knobs.workers, w0.repeats), (0, 3));
    assert_eq!(w0.train_samples_per_s, 10.0, "the median of 10, 9 and 60, not their mean");

    let rec = r.groups[0].recommendation.as_ref().unwrap();
    // 19.5 and 19.6 at 1 worker are within 5 % of 20 at 2 workers: the knee is 1 worker. At 1
    // worker prefetch 2 is within 3 % of prefetch 4's 19.6, prefetch 1's 18.0 is not.
    assert_eq!((rec.workers, rec.prefetch), (1, 2), "{}", rec.text);
    assert_eq!(r.rows[rec.best_row].knobs.knobs.workers, 2);
    let recommended: Vec<_> = r
        .rows
        .iter()
        .filter(|row| row.recommended)
        .map(|row| (row.knobs.knobs.workers, row.knobs.knobs.prefetch))
        .collect();
    assert_eq!(recommended, [(1, 2)]);
    assert!(
        rec.text.contains("within 5 % of the best (20.0 at workers 2, prefetch 2)"),
        "{}",
        rec.text
    );
    assert!(rec.text.contains("Prefetch past 2 improves nothing"), "{}", rec.text);
    assert!(
        written.terminal.contains("Recommendation: workers 1, prefetch 2"),
        "{}",
        written.terminal
    );

    let verdicts: Vec<Verdict> = r.rows.iter().map(|row| row.verdict).collect();
    assert_eq!(
        verdicts,
        [
            Verdict::HighlyInputBound,
            Verdict::ModeratelyInputBound,
            Verdict::ModeratelyInputBound,
            Verdict::ModeratelyInputBound,
            Verdict::NotInputBound
        ]
    );
    let table: Vec<&str> = written
        .terminal
        .lines()
        .skip_while(|l| !l.contains("workers  prefetch"))
        .skip(1)
        .take(5)
        .collect();
    assert_eq!(table.len(), 5, "{}", written.terminal);
    // AU beside the input-bound share: the step's share of the wall time.
    assert!(table[0].ends_with("45.0   67.5  55.0  highly input-bound"), "{}", table[0]);
    assert!(
        table[2].starts_with('*') && table[2].ends_with("moderately input-bound"),
        "{}",
        table[2]
    );
    assert!(table[4].ends_with("not input-bound"), "{}", table[4]);
}

#[test]
fn each_group_gets_its_recommendation_and_each_plot_group_its_files() {
    let batches = vec![
        cell(0, 2, 16, 10.0, 45.0),
        cell(1, 2, 16, 19.5, 8.0),
        cell(2, 2, 16, 20.0, 2.0),
        cell(0, 2, 64, 10.0, 60.0),
        cell(1, 2, 64, 15.0, 40.0),
        cell(2, 2, 64, 30.0, 10.0),
    ];
    let dir = tempfile::tempdir().unwrap();
    write_results(dir.path(), &batches);
    let written = report::report_dir(dir.path()).unwrap();
    let labels: Vec<(&str, usize)> = written
        .report
        .groups
        .iter()
        .map(|g| (g.label.as_str(), g.recommendation.as_ref().unwrap().workers))
        .collect();
    assert_eq!(labels, [("batch 16", 1), ("batch 64", 2)]);
    assert!(written.terminal.contains("Recommendation per group"), "{}", written.terminal);
    assert!(written.terminal.contains("  batch 64: workers 2, prefetch 2"), "{}", written.terminal);
    assert!(written.terminal.contains("Doctor, batch 16:"), "{}", written.terminal);
    // Batch sizes share a plot: one line each.
    assert_eq!(written.report.plots.len(), 1);
    let svg = std::fs::read_to_string(dir.path().join("train_vs_workers.svg")).unwrap();
    let texts = svg_texts(&svg);
    for label in ["train, batch 16", "train, batch 64", "model ceiling, batch 64"] {
        assert!(texts.iter().any(|t| t == label), "{label} in {texts:?}");
    }

    // Two resolutions: a pair of plots each, named after it.
    let resolutions: Vec<FakeCell> = batches[..3]
        .iter()
        .cloned()
        .chain(batches[..3].iter().cloned().map(|mut c| {
            c.cell.knobs.resolution = Resolution::Size { height: 96, width: 96 };
            c
        }))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    write_results(dir.path(), &resolutions);
    let written = report::report_dir(dir.path()).unwrap();
    for name in [
        "train_vs_workers_96x96.svg",
        "train_vs_workers_native.svg",
        "input_bound_heatmap_96x96.svg",
        "input_bound_heatmap_native.svg",
    ] {
        assert!(dir.path().join(name).is_file(), "{name}: {:?}", written.files);
    }
    let svg = std::fs::read_to_string(dir.path().join("train_vs_workers_96x96.svg")).unwrap();
    assert!(svg_texts(&svg)
        .iter()
        .any(|t| t == "Train samples/s against workers (resolution 96x96)"));
    assert!(!written.terminal.contains("fixed: dataset g1, resolution"), "{}", written.terminal);
    assert!(
        written.terminal.contains("resolution 96x96: workers 1, prefetch 2"),
        "{}",
        written.terminal
    );
}

#[test]
fn writes_markdown_csv_and_svgs_with_labelled_axes() {
    let dir = tempfile::tempdir().unwrap();
    write_results(dir.path(), &sweep());
    let written = report::report_dir(dir.path()).unwrap();
    let names: Vec<String> = written
        .files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "report.md",
            "results.csv",
            "train_vs_workers.svg",
            "input_bound_heatmap.svg",
            "report.html"
        ]
    );

    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("**System:** Test CPU @ 3.0GHz (2 cores, 16 GB memory), GPU none"), "{md}");
    assert!(md.contains("| workers | prefetch | batch | repeats | loader/s |"), "{md}");
    assert!(md.contains("| \\* | 1 | 2 | 16 | 1 |"), "{md}");
    assert!(md.contains("## Recommendation\n\nworkers 1, prefetch 2:"), "{md}");
    assert!(
        md.contains("](train_vs_workers.svg)") && md.contains("](input_bound_heatmap.svg)"),
        "{md}"
    );

    let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 5, "a header and one row per cell, repeats aggregated: {csv}");
    let header: Vec<&str> = lines[0].split(',').collect();
    // A native sweep with one decoder thread shows the knobs every cell shows, and no other.
    use feedbench::bench::sweep::cell::{Knob, KnobSet};
    let always: Vec<Knob> =
        Knob::set(KnobSet::All).into_iter().filter(|k| k.def().unless.is_none()).collect();
    // No cell had a cache: no column for the cache's stage.
    let stages: Vec<Stage> = Stage::ALL.into_iter().filter(|&s| s != Stage::Cache).collect();
    // Its cells carry the AU (newer than the first results), not the memory or ranks.
    let newer = report::NewerFigures { au: true, memory: false, ranks: false };
    assert_eq!(header, report::csv::header(&always, newer, &stages));
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines[1..].iter().map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == header.len()));
    assert_eq!(rows[0][column("repeats")], "3");
    assert_eq!(rows[0][column("train_samples_per_s")], "10");
    assert_eq!(rows[0][column("verdict")], "highly_input_bound");
    // MLPerf Storage's AU beside it: the step's share of the wall time, the repeats' median.
    let au: f64 = rows[0][column("au_pct")].parse().unwrap();
    let input_bound: f64 = rows[0][column("input_bound_median_pct")].parse().unwrap();
    assert!((au - (100.0 - input_bound)).abs() < 1e-9, "{au} {input_bound}");
    assert!(md.contains("| AU % |") && md.contains("MLPerf Storage"), "{md}");
    let recommended: Vec<usize> = rows
        .iter()
        .filter(|r| r[column("recommended")] == "true")
        .map(|r| r[column("workers")].parse().unwrap())
        .collect();
    assert_eq!(recommended, [1]);
    assert_eq!(rows[2][column("cpu_ms_per_sample_decode")], "3");

    let train = std::fs::read_to_string(dir.path().join("train_vs_workers.svg")).unwrap();
    assert!(well_formed_svg(&train), "{train}");
    let texts = svg_texts(&train);
    for label in [
        "workers",
        "train samples/s",
        "Train samples/s against workers",
        "train, batch 16",
        "model ceiling, batch 16",
    ] {
        assert!(texts.iter().any(|t| t == label), "{label} in {texts:?}");
    }
    let heatmap = std::fs::read_to_string(dir.path().join("input_bound_heatmap.svg")).unwrap();
    assert!(well_formed_svg(&heatmap), "{heatmap}");
    let texts = svg_texts(&heatmap);
    // Every measured cell has its value written; at 1 worker the recommended prefetch 2 (8.0 %),
    // not the faster prefetch 4 (7.0 %), and it says so.
    for label in [
        "workers",
        "batch size",
        "input-bound %",
        "45.0 %",
        "8.0 %",
        "2.0 %",
        "16",
        "recommended, prefetch 2",
    ] {
        assert!(texts.iter().any(|t| t == label), "{label} in {texts:?}");
    }
    assert!(!texts.iter().any(|t| t == "7.0 %"), "{texts:?}");
}

#[test]
fn feedbench_report_re_renders_from_results_alone() {
    let dir = tempfile::tempdir().unwrap();
    write_results(dir.path(), &sweep());
    let expected = report::report_dir(dir.path()).unwrap();
    for file in &expected.files {
        std::fs::remove_file(file).unwrap();
    }
    let (ok, out, err) = feedbench(&["report", dir.path().to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(out, expected.terminal);
    assert!(err.contains("report.md") && err.contains("results.csv"), "{err}");
    for file in &expected.files {
        assert!(file.is_file(), "{} rewritten", file.display());
    }

    let empty = tempfile::tempdir().unwrap();
    let (ok, _, err) = feedbench(&["report", empty.path().to_str().unwrap()]);
    let missing = empty.path().join("results.jsonl");
    assert!(!ok && err.contains(missing.to_str().unwrap()), "names the file: {err}");

    std::fs::write(&missing, "").unwrap();
    let (ok, _, err) = feedbench(&["report", empty.path().to_str().unwrap()]);
    assert!(!ok && err.contains("no cell results"), "{err}");
    assert!(!empty.path().join("report.md").exists());
}
