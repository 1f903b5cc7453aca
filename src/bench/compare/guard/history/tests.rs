use super::verdict::judge_history;
use super::*;
use crate::measure::system::system_info;

/// A history run of one cell `c` whose figure is `value`, at `commit`.
fn run(value: f64, commit: usize, accepted: bool) -> HistoryRun {
    let workload = Workload::of([("batch".to_string(), "4".to_string())].into());
    HistoryRun {
        feedbench_guard_history: HISTORY_FORMAT,
        date: 1_700_000_000 + commit as u64,
        commit: Some(format!("c{commit}")),
        host: system_info(tch::Device::Cpu),
        accepted,
        cells: vec![HistoryCell {
            name: "c".into(),
            workload,
            figure: "samples_per_s".into(),
            values: vec![value],
            reference_ms: None,
            value,
        }],
    }
}

/// A level of `n` runs around `level` (±1.5 %, fixed), from commit `from`.
fn level(n: usize, level: f64, from: usize) -> Vec<HistoryRun> {
    (0..n)
        .map(|i| run(level * (1.0 + 0.015 * ((i * 7 % 5) as f64 - 2.0) / 2.0), from + i, false))
        .collect()
}

#[test]
fn a_flat_history_passes_and_a_drift_is_named_from_its_first_run() {
    let flat = level(30, 1000.0, 0);
    let verdict = judge_history(&flat, 3.0).unwrap();
    assert!(!verdict.regression && verdict.cells[0].change_points.is_empty(), "{verdict:?}");
    // Five runs, each 2.5 % slower than the one before, then the new level.
    let mut drift = flat.clone();
    for step in 1..=5 {
        drift.push(run(1000.0 * (1.0 - 0.025 * step as f64), 29 + step, false));
    }
    drift.extend(level(3, 875.0, 35));
    let verdict = judge_history(&drift, 3.0).unwrap();
    let cell = &verdict.cells[0];
    assert!(verdict.regression && cell.regression, "{cell:?}");
    let shift = cell.shift.as_ref().unwrap();
    assert_eq!(shift.commit.as_deref(), Some("c30"), "the drift's first run: {shift:?}");
    assert!(shift.change.percent < -8.0 && shift.change.high < 0.0, "{shift:?}");
    assert_eq!(shift.runs_since, 8);
    // The same drift accepted as the new level: nothing to judge since.
    let mut accepted = drift.clone();
    accepted.push(run(875.0, 40, true));
    let verdict = judge_history(&accepted, 3.0).unwrap();
    assert!(!verdict.regression, "{verdict:?}");
    assert!(verdict.cells[0].not_enough.as_ref().unwrap().contains("1 run of this workload"));
}

#[test]
fn a_small_shift_is_below_the_threshold_and_another_host_is_set_aside() {
    // A 4 % shift: clear, but below a --min-change of 5 %: not reported at all.
    let mut small = level(20, 1000.0, 0);
    small.extend(level(6, 960.0, 20));
    let verdict = judge_history(&small, 5.0).unwrap();
    let cell = &verdict.cells[0];
    assert!(!verdict.regression, "{verdict:?}");
    assert!(cell.shift.is_none() && cell.change_points.is_empty(), "not reported: {cell:?}");
    // The same history at the default 3 %: a regression from its first run.
    let verdict = judge_history(&small, 3.0).unwrap();
    assert!(verdict.regression, "{verdict:?}");
    assert_eq!(verdict.cells[0].shift.as_ref().unwrap().commit.as_deref(), Some("c20"));
    assert_eq!(verdict.cells[0].change_points, [20]);
    let mut mixed = level(3, 1000.0, 0);
    let mut elsewhere = run(500.0, 3, false);
    elsewhere.host.cores += 8;
    mixed.push(elsewhere);
    mixed.push(run(1000.0, 4, false));
    let verdict = judge_history(&mixed, 3.0).unwrap();
    let cell = &verdict.cells[0];
    assert_eq!((cell.points.len(), cell.set_aside), (4, 1));
    assert!(cell.not_enough.as_ref().unwrap().starts_with("not enough history yet: 4 runs"));
}

#[test]
fn bad_history_files_are_refused_naming_the_line_and_left_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let good = serde_json::to_string(&run(1000.0, 0, false)).unwrap();
    let cases = [
        ("not json\n".to_string(), "line 1: not JSON"),
        (format!("{good}\n{{\"workers\": 2}}\n"), "line 2: not a feedbench guard run"),
        (format!("{good}\n{}", &good[..good.len() / 2]), "line 2: cut short"),
        (
            good.replace("\"feedbench_guard_history\":1", "\"feedbench_guard_history\":9") + "\n",
            "history format 9",
        ),
        (
            good.replacen("\"value\":", "\"value\":\"fast\",\"x\":", 1) + "\n",
            "line 1: corrupt at cells[0]",
        ),
    ];
    for (n, (text, expected)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("h{n}.jsonl"));
        std::fs::write(&path, text).unwrap();
        let error = History::check(&path).err().expect(expected).to_string();
        assert!(error.contains(expected) && error.contains(&format!("h{n}.jsonl")), "{error}");
        assert_eq!(&std::fs::read_to_string(&path).unwrap(), text, "left as it was");
    }
    let error = History::check(dir.path()).err().unwrap().to_string();
    assert!(error.contains("is a directory"), "{error}");
    let error = History::check(&dir.path().join("no/such/dir/h.jsonl")).err().unwrap().to_string();
    assert!(error.contains("cannot be created"), "{error}");
    // An empty file is a history of no runs.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let runs = History::check(&empty).unwrap().append(&run(1.0, 0, false)).unwrap();
    assert_eq!(runs.len(), 1);
}

#[test]
fn guards_appending_at_once_lose_no_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    std::thread::scope(|scope| {
        for t in 0..4 {
            let path = &path;
            scope.spawn(move || {
                let history = History::check(path).unwrap();
                for i in 0..25 {
                    history.append(&run(1000.0, t * 100 + i, false)).unwrap();
                }
            });
        }
    });
    let runs = History::check(&path).unwrap().append(&run(1.0, 999, false)).unwrap();
    assert_eq!(runs.len(), 101, "every line kept, each whole");
    let mut commits: Vec<_> = runs.iter().map(|r| r.commit.clone().unwrap()).collect();
    commits.sort();
    commits.dedup();
    assert_eq!(commits.len(), 101);
}
