//! A report re-rendered from a stored `results.jsonl` equals, byte for byte, what feedbench
//! rendered when it was written (`tests/fixtures/report-v1/`: a real 48-cell sweep of a
//! generated PushT dataset — workers, prefetch, batch, two resolutions, two repeats — with the
//! report, CSV and plots the sweep wrote, and the terminal text `feedbench report` printed,
//! by the code before the restructuring of #12). Results files written before keep reading,
//! every figure reads back exactly (the CSV, which prints them in full, is the sweep's own),
//! and reports keep their form, across changes to the code; a negative rate, which no
//! measurement gives, is refused naming its field.

use std::path::Path;

use feedbench::bench::report;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report-v1");

#[test]
fn a_stored_sweep_renders_as_it_did() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(FIXTURE);
    std::fs::copy(fixture.join("results.jsonl"), dir.path().join(report::RESULTS_FILE)).unwrap();
    let written = report::report_dir(dir.path()).unwrap();
    let expected = std::fs::read_to_string(fixture.join("terminal.txt")).unwrap();
    assert_eq!(written.terminal, expected, "the terminal report");
    assert_eq!(written.files.len(), 7, "{:?}", written.files);
    // The page holds these figures (tests/page.rs holds it to report.md) and plotly.js, which
    // is not stored here again.
    for file in written.files.iter().filter(|f| !f.ends_with("report.html")) {
        let name = file.file_name().unwrap();
        let expected = std::fs::read_to_string(fixture.join(name)).unwrap();
        let rendered = std::fs::read_to_string(file).unwrap();
        assert!(rendered == expected, "{} differs from the stored one", name.to_string_lossy());
    }
}

#[test]
fn a_negative_rate_in_stored_results_is_refused_naming_its_field_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(Path::new(FIXTURE).join("results.jsonl")).unwrap();
    let mut lines: Vec<serde_json::Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    lines[2]["train"]["samples_per_s"] = serde_json::json!(-1.0);
    let edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(dir.path().join(report::RESULTS_FILE), edited.join("\n") + "\n").unwrap();
    let error = report::report_dir(dir.path()).unwrap_err().to_string();
    assert!(error.contains("line 3") && error.contains("`train.samples_per_s`"), "{error}");
    assert!(error.contains("-1 is no rate"), "{error}");
}
