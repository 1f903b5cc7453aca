//! Kill anywhere, lose nothing: a sweep, a layout study, a tune and a plan's `sweep run` are
//! each killed (SIGKILL) at 20 moments spread over an uninterrupted run's time, resumed every
//! time, and then run to the end. After every kill the results read back whole (a torn last
//! line is no result), no cell is in them twice and no finished cell is lost; at the end the
//! cells are those of an uninterrupted run (tune, which chooses what to measure from what it
//! measured, ends with an answer from its cells instead).

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use feedbench::bench::cluster::cells::finished_cells;
use feedbench::bench::sweep::results::read_results;
use feedbench::dataset::write::{write_tabular, TabularSpec};

const KILLS: usize = 20;

/// Moments in [0, 1), the same on every run (a linear congruential generator).
struct Moments(u64);

impl Moments {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs `feedbench args` to its end: the seconds it took.
fn whole(args: &[&str]) -> f64 {
    let started = Instant::now();
    let (ok, _, err) = common::feedbench(args);
    assert!(ok, "{args:?}: {err}");
    started.elapsed().as_secs_f64()
}

/// Starts `feedbench args` and kills it (SIGKILL) after `after`, unless it ended before.
fn kill_after(args: &[&str], after: Duration) {
    common::feedbench_within(args, after);
}

/// Kills `args` (which resume) at `KILLS` moments within `seconds`, checking after each that
/// `cells()` reads, holds no cell twice and keeps every cell seen before; then runs it to the
/// end. The cells at the end.
fn kill_anywhere(
    what: &str,
    args: &[&str],
    seconds: f64,
    cells: impl Fn() -> Vec<String>,
) -> HashSet<String> {
    let mut moments = Moments(KILLS as u64 + what.len() as u64);
    let mut seen: HashSet<String> = HashSet::new();
    let checked = |seen: &HashSet<String>, when: &str| {
        let ids = cells();
        let now: HashSet<String> = ids.iter().cloned().collect();
        assert_eq!(now.len(), ids.len(), "{what} {when}: a cell twice: {ids:?}");
        assert!(seen.is_subset(&now), "{what} {when}: a finished cell lost");
        now
    };
    for kill in 0..KILLS {
        kill_after(args, Duration::from_secs_f64(moments.next() * seconds));
        seen = checked(&seen, &format!("after kill {kill}"));
    }
    let (ok, _, err) = common::feedbench(args);
    assert!(ok, "{what}, resumed to the end: {err}");
    checked(&seen, "at the end")
}

/// The cell ids in `out/results.jsonl` (none where it is absent).
fn result_ids(out: &Path) -> Vec<String> {
    if !out.join("results.jsonl").exists() {
        return Vec::new();
    }
    read_results(&out.join("results.jsonl")).unwrap().iter().map(|r| r.cell.id()).collect()
}

/// Every line of `path` is a whole JSON value: nothing torn is left once a run ended.
fn whole_lines(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with('\n'), "{}", path.display());
    for (n, line) in text.lines().enumerate() {
        assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "line {}", n + 1);
    }
}

/// A tabular dataset and a sweep config of 6 short cells over it.
fn sweep_setup(dir: &Path) -> PathBuf {
    let root = dir.join("ds");
    write_tabular(&root, &TabularSpec { episode_lengths: vec![40; 4], ..Default::default() })
        .unwrap();
    let config = dir.join("sweep.toml");
    let text = "[dataset]\npath = \"ds\"\n[loader]\nwindow = \"none\"\nworkers = [0, 1, 2]\n\
                batch = [2, 4]\n[model]\nmodel = [\"synthetic:2ms\"]\n[run]\nloader_batches = 4\n\
                model_steps = 2\ntrain_steps = 4\nwarmup = 1\n";
    std::fs::write(&config, text).unwrap();
    config
}

#[test]
fn a_sweep_killed_anywhere_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = sweep_setup(dir.path());
    let sweep = |out: &Path| -> Vec<String> {
        let (config, out) = (config.to_str().unwrap(), out.to_str().unwrap());
        ["sweep", "--config", config, "--out", out, "--resume"].map(String::from).to_vec()
    };
    let reference = dir.path().join("whole");
    let args = sweep(&reference);
    let seconds = whole(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let expected: HashSet<String> = result_ids(&reference).into_iter().collect();

    let out = dir.path().join("killed");
    let args = sweep(&out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cells = kill_anywhere("sweep", &args, seconds, || result_ids(&out));
    assert_eq!(cells, expected, "the cells of an uninterrupted sweep");
    whole_lines(&out.join("results.jsonl"));
}

#[test]
fn a_plan_task_killed_anywhere_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = sweep_setup(dir.path());
    let out = dir.path().join("plan");
    let (config, out_s) = (config.to_str().unwrap(), out.to_str().unwrap());
    let (ok, _, err) = common::feedbench(&["sweep", "plan", "--config", config, "--out", out_s]);
    assert!(ok, "{err}");
    let plan = std::fs::read_to_string(out.join("plan.jsonl")).unwrap();
    let expected: HashSet<String> = plan
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().into()
        })
        .collect();
    let args = ["sweep", "run", "--out", out_s, "--task", "0", "--tasks", "1"];
    // Its time: the whole plan once, in a copy.
    let copy = dir.path().join("copy");
    let (ok, _, err) =
        common::feedbench(&["sweep", "plan", "--config", config, "--out", copy.to_str().unwrap()]);
    assert!(ok, "{err}");
    let seconds =
        whole(&["sweep", "run", "--out", copy.to_str().unwrap(), "--task", "0", "--tasks", "1"]);

    let ids = || finished_cells(&out).unwrap().into_keys().collect::<Vec<_>>();
    let cells = kill_anywhere("sweep run", &args, seconds, ids);
    assert_eq!(cells, expected, "every cell of the plan");
    let (ok, _, err) = common::feedbench(&["merge", out_s]);
    assert!(ok, "{err}");
}

#[test]
fn a_tune_killed_anywhere_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    write_tabular(&root, &TabularSpec { episode_lengths: vec![40; 4], ..Default::default() })
        .unwrap();
    let tune = |out: &Path| -> Vec<String> {
        let (root, out) = (root.to_str().unwrap(), out.to_str().unwrap());
        [
            "tune",
            root,
            "--window",
            "none",
            "--batch",
            "4",
            "--step-ms",
            "5",
            "--cpus",
            "2",
            "--memory",
            "4GB",
            "--loader-batches",
            "4",
            "--train-steps",
            "4",
            "--warmup",
            "1",
            "--out",
            out,
            "--resume",
        ]
        .map(String::from)
        .to_vec()
    };
    let args = tune(&dir.path().join("whole"));
    let seconds = whole(&args.iter().map(String::as_str).collect::<Vec<_>>());

    let out = dir.path().join("killed");
    let args = tune(&out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cells = kill_anywhere("tune", &args, seconds, || result_ids(&out));
    whole_lines(&out.join("results.jsonl"));
    let tuned: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tune.json")).unwrap()).unwrap();
    let answer = &tuned["answer"];
    let (workers, prefetch) =
        (answer["workers"].as_u64().unwrap(), answer["prefetch"].as_u64().unwrap());
    let results = read_results(&out.join("results.jsonl")).unwrap();
    assert!(
        results
            .iter()
            .any(|r| r.cell.knobs.workers as u64 == workers
                && r.cell.knobs.prefetch as u64 == prefetch),
        "the answer is a measured configuration: {answer}"
    );
    assert_eq!(cells.len(), results.len());
}

#[test]
fn a_layout_study_killed_anywhere_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    common::synth_pusht(&source, 2, 16, &[]);
    let config = dir.path().join("layout.toml");
    let text =
        "[axes]\ngop = [2, 10]\n[measure]\nworkers = 1\nbatch = 4\nbatches = 2\nrepeats = 2\n\
                quality_frames = 4\n[choose]\nmin_psnr = 10\n";
    std::fs::write(&config, text).unwrap();
    let study = |out: &Path| -> Vec<String> {
        let (source, config, out) =
            (source.to_str().unwrap(), config.to_str().unwrap(), out.to_str().unwrap());
        ["layout", source, "--config", config, "--out", out, "--resume"].map(String::from).to_vec()
    };
    let names = |out: &Path| -> Vec<String> {
        let results = feedbench::bench::layout_study::read_results(&out.join("layout.jsonl"));
        results.unwrap().into_iter().map(|r| r.name).collect()
    };
    let reference = dir.path().join("whole");
    let args = study(&reference);
    let seconds = whole(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let expected: HashSet<String> = names(&reference).into_iter().collect();

    let out = dir.path().join("killed");
    let args = study(&out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let cells = kill_anywhere("layout study", &args, seconds, || names(&out));
    assert_eq!(cells, expected, "the candidates of an uninterrupted study");
    whole_lines(&out.join("layout.jsonl"));
}

/// Runs `feedbench args` until `when()` holds (looked at every millisecond), then kills it
/// (SIGKILL): None where it was killed so, else the stderr of a run that ended first.
fn kill_when(args: &[&str], when: impl Fn() -> bool) -> Option<String> {
    use std::process::{Command, Stdio};
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(stderr.reopen().unwrap())
        .spawn()
        .unwrap();
    loop {
        if when() {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        if child.try_wait().unwrap().is_some() {
            return Some(std::fs::read_to_string(stderr.path()).unwrap());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A layout study killed at each of its steps, as `kill -9` found it in the field: while
/// writing its third candidate (two in `layout.jsonl`, the writer's lock file beside the
/// candidate), while measuring it (its dataset and cost recorded), and while appending it (a
/// torn last line). Each resume goes on from there and the last one ends the study: every
/// candidate once, the lines finished before each resume kept byte for byte, and no finished
/// candidate measured again.
#[test]
fn a_layout_study_killed_while_writing_measuring_or_appending_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    common::synth_pusht(&source, 3, 24, &[]);
    let config = dir.path().join("layout.toml");
    let text = "[base]\ncodec = \"h264\"\n[axes]\ncrf = [45]\ngop = [6]\nstorage = [\"raw\"]\n\
                [measure]\nworkers = 1\nbatch = 4\nbatches = 2\nrepeats = 1\nquality_frames = 4\n\
                [choose]\nmin_psnr = 10\n";
    std::fs::write(&config, text).unwrap();
    let out = dir.path().join("study");
    let (s, c, o) = (source.to_str().unwrap(), config.to_str().unwrap(), out.to_str().unwrap());
    let args = ["layout", s, "--config", c, "--out", o, "--resume"];
    let results = out.join("layout.jsonl");
    let text = || std::fs::read_to_string(&results).unwrap_or_default();
    let finished = || text().matches('\n').count();
    let names = |dir: &str, pick: &dyn Fn(&str) -> bool| -> Vec<String> {
        let entries = std::fs::read_dir(out.join(dir)).into_iter().flatten().flatten();
        entries.map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| pick(n)).collect()
    };
    let writing = || finished() >= 2 && !names("candidates", &|n| n.ends_with(".lock")).is_empty();
    let measuring = || {
        let done = text();
        let encoded = names("encoded", &|n| n.ends_with(".json"));
        encoded.iter().any(|n| !done.contains(&format!("\"{}\"", n.trim_end_matches(".json"))))
    };
    let mut kept = String::new();
    let mut resume = |when: &dyn Fn() -> bool, step: &str| {
        if let Some(stderr) = kill_when(&args, when) {
            panic!("{step}: the study ended before the kill: {stderr}");
        }
        let now = text();
        assert!(now.starts_with(&kept), "{step}: finished candidates were changed");
        kept = now[..now.rfind('\n').map_or(0, |i| i + 1)].to_string();
    };
    resume(&writing, "killed while writing the third candidate");
    assert_eq!(finished(), 2);
    resume(&measuring, "resumed, killed while measuring");
    resume(&|| finished() >= 3, "resumed, killed once the third is in");
    // A kill while appending the third leaves half its line.
    let whole = text();
    let last = whole[..whole.len() - 1].rfind('\n').map_or(0, |i| i + 1);
    let torn = &whole[..last + (whole.len() - last) / 2];
    std::fs::write(&results, torn).unwrap();

    let (ok, _, stderr) = common::feedbench(&args);
    assert!(ok, "resumed to the end: {stderr}");
    let measured = stderr.lines().filter(|l| l.ends_with(": measuring")).count();
    assert_eq!(measured, 4 - 2, "only the unfinished candidates are measured: {stderr}");
    assert!(stderr.contains("gop=6: reusing"), "the torn one's dataset is reused: {stderr}");
    let now = text();
    assert!(now.starts_with(&whole[..last]), "finished candidates were changed");
    let all: Vec<String> = feedbench::bench::layout_study::read_results(&results)
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    let distinct: HashSet<&String> = all.iter().collect();
    assert_eq!((all.len(), distinct.len()), (4, 4), "every candidate once: {all:?}");
    whole_lines(&results);
}
