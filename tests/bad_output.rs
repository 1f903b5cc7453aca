//! Bad output paths (issue #28): nothing is written where it must not be — inside a dataset
//! that is read, over an output another process writes, half a sample, a trace cut short —
//! and a destination that cannot be written is refused before any work, naming it.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{clear_error, feedbench, png_dataset, sample_into, walk};
use feedbench::dataset::write::{write_tabular, TabularSpec};

#[test]
fn a_trace_that_cannot_be_written_is_refused_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let trace = dir.path().join("no/such/dir/trace.json");
    let args = ["load", root.to_str().unwrap(), "--window", "none", "--workers", "0"];
    let (ok, out, err) = feedbench(&[&args[..], &["--trace", trace.to_str().unwrap()]].concat());
    clear_error(ok, &err);
    assert!(err.contains("--trace") && err.contains("cannot create"), "{err}");
    assert!(out.is_empty(), "nothing measured: {out}");
    // A trace that can be written is, after the figures.
    let trace = dir.path().join("trace.json");
    let (ok, out, err) = feedbench(&[&args[..], &["--trace", trace.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    assert!(out.contains("samples/s"), "{out}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    assert!(!json["traceEvents"].as_array().unwrap().is_empty());
}

#[test]
fn sweep_set_up_errors_name_the_config_and_leave_no_output_behind() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let config = dir.path().join("sweep.toml");
    let out = dir.path().join("out");
    let write = |text: &str| std::fs::write(&config, text).unwrap();
    let sweep = |out: &Path| {
        feedbench(&["sweep", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()])
    };
    let base = format!(
        "[dataset]\npath = \"{}\"\n[loader]\nwindow = \"none\"\nworkers = [0]\nbatch = [2]\n\
         [model]\nmodel = [\"none\"]\n[run]\nloader_batches = 1\nmodel_steps = 1\n\
         train_steps = 1\nwarmup = 0\n",
        root.display()
    );
    write(&format!("{base}trace_cell = \"1,2\"\n"));
    let (ok, _, err) = sweep(&out);
    clear_error(ok, &err);
    assert!(err.contains("sweep.toml") && err.contains("run.trace_cell \"1,2\""), "{err}");
    assert!(!out.exists(), "no output directory after a refused config");

    write(&base.replace(&root.display().to_string(), "/no/such/dataset"));
    let (ok, _, err) = sweep(&out);
    clear_error(ok, &err);
    assert!(err.contains("/no/such/dataset"), "{err}");
    assert!(err.contains("sweep.toml: dataset.path /no/such/dataset: no such dataset"), "{err}");
    assert!(!out.exists(), "no output directory after a dataset that does not open");

    write(&base);
    let file = dir.path().join("a-file");
    std::fs::write(&file, "mine").unwrap();
    let (ok, _, err) = sweep(&file);
    clear_error(ok, &err);
    assert!(err.contains("exists and is not a directory"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine", "the user's file is kept");
}

#[test]
fn stage_refuses_a_destination_it_cannot_write_before_copying() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let read_only = dir.path().join("read-only");
    std::fs::create_dir(&read_only).unwrap();
    let to = if nix_is_root() {
        PathBuf::from("/proc/feedbench-stage")
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o555)).unwrap();
        read_only.join("copy")
    };
    let (ok, _, err) = feedbench(&["stage", root.to_str().unwrap(), "--to", to.to_str().unwrap()]);
    clear_error(ok, &err);
    assert!(err.contains("not writable") && err.contains("takes no new directory"), "{err}");
    assert!(!err.contains("copying"), "said before refusing: {err}");
}

/// Root ignores permission bits; /proc refuses new directories to everyone.
fn nix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_sample_is_written_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let out = dir.path().join("s");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("sample.json"), "mine").unwrap();
    let args = ["sample", root.to_str().unwrap(), "--index", "3", "--out", out.to_str().unwrap()];
    let (ok, _, err) = feedbench(&args);
    clear_error(ok, &err);
    assert!(err.contains("sample.json") && err.contains("already exists"), "{err}");
    let left: Vec<_> = out.read_dir().unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["sample.json"], "nothing else written, no staging left");
    assert_eq!(std::fs::read_to_string(out.join("sample.json")).unwrap(), "mine");
    std::fs::remove_file(out.join("sample.json")).unwrap();
    let (ok, _, err) = feedbench(&args);
    assert!(ok, "{err}");
    assert!(out.join("observation.image.npy").is_file() && out.join("sample.json").is_file());
    // 8 arrays (state, action, the image and the 5 bookkeeping columns) and sample.json.
    assert_eq!(out.read_dir().unwrap().count(), 9, "no staging directory left");
}

#[test]
fn a_sample_that_cannot_be_written_whole_leaves_nothing() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ds");
    let spec = TabularSpec { image_size: Some((64, 64)), ..TabularSpec::default() };
    write_tabular(&root, &spec).unwrap();
    let out = dir.path().join("s");
    // A full disk, as far as this process can tell: files may not grow past 16 KiB, so the
    // small arrays are written and the 48 KiB image is not (EFBIG, the signal ignored).
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(["sample", root.to_str().unwrap(), "--index", "3", "--out"]).arg(&out);
    // SAFETY: between fork and exec only async-signal-safe calls: setrlimit and signal.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 16 << 10, rlim_max: 16 << 10 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let output = command.output().unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    clear_error(output.status.success(), &err);
    assert!(err.contains("observation.image"), "{err}");
    assert!(!out.exists(), "nothing half-written is left, nor the directory it made");
    // The re-run (with room) is not refused by leftovers.
    let (ok, _, err) = sample_into(&root, "3", &out);
    assert!(ok, "{err}");
    // An --out that is a file is named once, as what it is.
    let (ok, _, err) = sample_into(&root, "3", &out.join("sample.json"));
    clear_error(ok, &err);
    assert_eq!(err.matches("sample.json").count(), 1, "{err}");
    assert!(err.contains("exists and is not a directory"), "{err}");
}

#[test]
fn nothing_is_written_into_a_dataset_that_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let before = walk(&root);
    let ds = root.to_str().unwrap();
    let inside = |name: &str| root.join(name).to_str().unwrap().to_string();
    let config = dir.path().join("sweep.toml");
    let toml = format!("[dataset]\npath = {ds:?}\n[loader]\nworkers = [0]\nbatch = [2]\n");
    std::fs::write(&config, toml + "[model]\nmodel = [\"none\"]\n").unwrap();
    let config = config.to_str().unwrap();
    let window = ["--window", "none", "--workers", "0", "--batch", "2", "--batches", "1"];
    let cases: Vec<Vec<String>> = vec![
        vec!["stage".into(), ds.into(), "--to".into(), inside("staged")],
        vec!["sample".into(), ds.into(), "--index".into(), "0".into(), "--out".into(), inside("x")],
        vec!["sweep".into(), "--config".into(), config.into(), "--out".into(), ds.into()],
        vec!["sweep".into(), "--config".into(), config.into(), "--out".into(), inside("out")],
        // An output that holds the dataset.
        vec!["sweep".into(), "--config".into(), config.into(), "--out".into(), {
            dir.path().to_str().unwrap().into()
        }],
        [
            &["load".to_string(), ds.into(), "--out".into(), inside("ranks")][..],
            &window.map(String::from),
        ]
        .concat(),
        [
            &["load".to_string(), ds.into(), "--trace".into(), inside("t.json")][..],
            &window.map(String::from),
        ]
        .concat(),
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _, err) = feedbench(&args);
        clear_error(ok, &err);
        assert!(err.contains("which feedbench never writes into"), "{args:?}: {err}");
        assert_eq!(walk(&root), before, "{args:?} wrote into the dataset");
    }
}

#[test]
fn a_second_writer_of_an_output_directory_is_refused_while_the_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let config = dir.path().join("sweep.toml");
    // A sweep that runs a while: a 300 ms step, 3 cells.
    let text = format!(
        "[dataset]\npath = \"{}\"\n[loader]\nwindow = \"none\"\nworkers = [0, 1, 2]\n\
         batch = [2]\n[model]\nmodel = [\"synthetic:300ms\"]\n[run]\nloader_batches = 1\n\
         model_steps = 2\ntrain_steps = 4\nwarmup = 0\n",
        root.display()
    );
    std::fs::write(&config, text).unwrap();
    let out = dir.path().join("out");
    let args = ["sweep", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let mut first = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !out.join("results.jsonl").exists() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(first.try_wait().unwrap().is_none(), "the first sweep still runs");
    let (ok, _, err) = feedbench(&[&args[..], &["--resume"]].concat());
    clear_error(ok, &err);
    let holder = format!("another feedbench (pid {}) is writing here", first.id());
    assert!(err.contains(&holder) && err.contains("out"), "{err}");
    // Killed, the first holds nothing: a resume goes on where it stopped.
    first.kill().unwrap();
    first.wait().unwrap();
    let (ok, _, err) = feedbench(&[&args[..], &["--resume"]].concat());
    assert!(ok, "{err}");
    let results = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    assert_eq!(results.lines().count(), 3, "each cell once: {results}");
}

#[test]
fn a_trace_cut_short_by_sigterm_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let trace = dir.path().join("t.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(["load", root.to_str().unwrap(), "--window", "none", "--workers", "1"])
        .args(["--batch", "2", "--batches", "100000000", "--trace", trace.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(child.try_wait().unwrap().is_none(), "still loading");
    // SAFETY: kill sends a signal to the child this test started and has not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    child.wait().unwrap();
    let left: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(left, ["ds"], "no trace, empty or half-written, is left");
}

/// A refused run leaves an existing output directory byte for byte as it was, its lock file
/// included: a sweep without `--resume` over earlier results, `--resume` with a changed config
/// or over a results file with a corrupt line, a tune over a sweep's results, a plan over
/// another plan, a layout study over an earlier or damaged one.
#[test]
fn a_refused_run_leaves_its_output_directory_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let ds = root.to_str().unwrap();
    let config = dir.path().join("sweep.toml");
    let write = |batch: usize| {
        let text = format!(
            "[dataset]\npath = {ds:?}\n[loader]\nwindow = \"none\"\nworkers = [0]\n\
             batch = [{batch}]\n[model]\nmodel = [\"synthetic:1ms\"]\n[run]\nloader_batches = 1\n\
             model_steps = 1\ntrain_steps = 2\nwarmup = 0\n"
        );
        std::fs::write(&config, text).unwrap();
    };
    write(2);
    let (c, out) = (config.to_str().unwrap(), dir.path().join("out"));
    let o = out.to_str().unwrap();
    // An existing directory of the user's: the sweep writes its results, and no lock file.
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    let sweep = ["sweep", "--config", c, "--out", o];
    let (ok, _, err) = feedbench(&sweep);
    assert!(ok, "{err}");
    assert!(!out.join(".lock").exists(), "the lock left a file in the user's directory");
    let refused = |args: &[&str], dir: &Path, says: &str| {
        let before = common::file_tree(dir);
        let (ok, _, err) = feedbench(args);
        clear_error(ok, &err);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(common::file_tree(dir) == before, "{args:?} changed {}", dir.display());
    };
    refused(&sweep, &out, "--resume");
    write(4);
    refused(&[&sweep[..], &["--resume"]].concat(), &out, "another sweep config");
    let tune = ["tune", ds, "--window", "none", "--batch", "2", "--step-ms", "1", "--out", o];
    refused(&tune, &out, "--resume");
    write(2);
    let results = out.join("results.jsonl");
    let line = std::fs::read_to_string(&results).unwrap();
    std::fs::write(&results, format!("{{\"not\": \"a cell\"}}\n{line}")).unwrap();
    refused(&[&sweep[..], &["--resume"]].concat(), &out, "line 1");

    let plan = dir.path().join("plan");
    let p = plan.to_str().unwrap();
    let (ok, _, err) = feedbench(&["sweep", "plan", "--config", c, "--out", p]);
    assert!(ok, "{err}");
    write(4);
    refused(&["sweep", "plan", "--config", c, "--out", p], &plan, "holds another plan");

    let study = dir.path().join("study");
    std::fs::create_dir_all(study.join("candidates")).unwrap();
    std::fs::write(study.join(".lock"), "").unwrap();
    let layout = dir.path().join("layout.toml");
    std::fs::write(&layout, "[axes]\ngop = [4]\n").unwrap();
    let s = study.to_str().unwrap();
    let args = ["layout", ds, "--config", layout.to_str().unwrap(), "--out", s];
    refused(&args, &study, "--resume");
    std::fs::write(study.join("layout.jsonl"), "{\"not\": \"a candidate\"}\n").unwrap();
    refused(&[&args[..], &["--resume"]].concat(), &study, "line 1");
}

/// An output that is the dataset itself is said so, the path once (it read "O: is inside the
/// dataset O").
#[test]
fn an_output_that_is_the_dataset_is_said_to_be_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = png_dataset(dir.path());
    let ds = root.to_str().unwrap();
    let config = dir.path().join("sweep.toml");
    let toml = format!("[dataset]\npath = {ds:?}\n[loader]\nworkers = [0]\nbatch = [2]\n");
    std::fs::write(&config, toml + "[model]\nmodel = [\"none\"]\n").unwrap();
    let (ok, _, err) = feedbench(&["sweep", "--config", config.to_str().unwrap(), "--out", ds]);
    clear_error(ok, &err);
    assert!(err.contains(&format!("{ds}: is the dataset itself")), "{err}");
    assert_eq!(err.matches(ds).count(), 1, "the path once: {err}");
}
