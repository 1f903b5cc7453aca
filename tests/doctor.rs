//! `feedbench doctor LOG`: a lerobot-train log read, nothing measured. A log a real
//! lerobot-train run wrote (ACT on a generated two-camera dataset, CPU, batch 4, 2 workers,
//! 10 steps logged each step) read to its figures; two real runs over 3.5 epochs, one with
//! LeRobot's reader (its data_s spikes at each epoch start) and one with feedbench's (epochs back
//! to back); a fresh run of the installed lerobot-train read the same way; and files that are no
//! such log refused by name.

use std::path::Path;

use crate::common;

fn fixture() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lerobot-train/act-cpu.log")
}

/// One of the two real diffusion runs (CPU, batch 8, 2 workers, 60 steps logged each step, a
/// generated pusht-shaped dataset of 4 × 40 frames: 17 batches an epoch), with LeRobot's reader
/// (`lerobot`) or feedbench's (`feedbench`).
fn epochs_fixture(reader: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/lerobot-train/diffusion-cpu-epochs-{reader}-reader.log"))
}

#[test]
fn the_stall_at_each_epoch_start_is_named_where_a_real_log_has_it() {
    let stalled = epochs_fixture("lerobot");
    let (ok, out, err) = common::feedbench(&["doctor", stalled.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let stall = &value["summary"]["epoch_stall"];
    // Epochs start at steps 18, 35 and 52 (17 batches each); lerobot-train's epch counts 20.
    assert_eq!((stall["stalls"].as_u64(), stall["period_steps"].as_f64()), (Some(3), Some(17.0)));
    assert!((stall["epoch_steps"].as_f64().unwrap() - 20.0).abs() < 0.1, "{stall}");
    assert!(stall["per_epoch_s"].as_f64().unwrap() > 0.03, "{stall}");
    let (ok, text, _) = common::feedbench(&["doctor", stalled.to_str().unwrap()]);
    assert!(
        ok && text
            .contains("Epoch starts stall: data_s is 56.3 ms at 3 logged steps, every 17 steps"),
        "{text}"
    );
    assert!(text.contains("feedbench-lerobot-train (the same arguments)"), "{text}");
    // The same run with feedbench's reader: nothing to name.
    let chained = epochs_fixture("feedbench");
    let (ok, out, err) = common::feedbench(&["doctor", chained.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(value["summary"]["epoch_stall"], serde_json::Value::Null, "{out}");
    assert_eq!(value["steps"].as_array().unwrap().len(), 60);
    let (_, text, _) = common::feedbench(&["doctor", chained.to_str().unwrap()]);
    assert!(!text.contains("Epoch starts stall"), "{text}");
}

#[test]
fn a_real_lerobot_train_log_reads_to_its_share_and_advice() {
    let log = fixture();
    let (ok, out, err) = common::feedbench(&["doctor", log.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    let (summary, steps) = (&value["summary"], value["steps"].as_array().unwrap());
    assert_eq!(steps.len(), 10);
    // Step 1 waited 11.012 s for its batch (the spawned workers starting) and is left out.
    assert_eq!(
        (steps[0]["data_s"].as_f64(), steps[0]["update_s"].as_f64()),
        (Some(11.012), Some(11.333))
    );
    assert_eq!(
        (summary["logged_steps"].as_u64(), summary["kept_steps"].as_u64()),
        (Some(10), Some(9))
    );
    let kept = &steps[1..];
    let data: f64 = kept.iter().map(|s| s["data_s"].as_f64().unwrap()).sum();
    let update: f64 = kept.iter().map(|s| s["update_s"].as_f64().unwrap()).sum();
    let share = summary["share_pct"].as_f64().unwrap();
    assert!((share - 100.0 * data / (data + update)).abs() < 1e-9, "{summary}");
    assert_eq!(summary["verdict"], "not_input_bound", "ACT on a CPU: the update dominates");
    assert_eq!(
        (summary["num_workers"].as_u64(), summary["batch_size"].as_u64()),
        (Some(2), Some(4))
    );
    let (ok, text, err) = common::feedbench(&["doctor", log.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(text.contains("10 logged steps (the first, the workers' start, left out)"), "{text}");
    assert!(text.contains("Fewer --num_workers (it had 2)"), "{text}");
}

#[test]
fn what_is_no_lerobot_train_log_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.log");
    std::fs::write(&other, "epoch 1: loss 0.5\n").unwrap();
    let (ok, _, err) = common::feedbench(&["doctor", other.to_str().unwrap()]);
    common::clear_error(ok, &err);
    assert!(err.contains("other.log: no logged step"), "{err}");
    let bad = dir.path().join("bad.log");
    std::fs::write(&bad, "INFO x step:1 smpl:4 updt_s:1.0 data_s:-3\n").unwrap();
    let (ok, _, err) = common::feedbench(&["doctor", bad.to_str().unwrap()]);
    common::clear_error(ok, &err);
    assert!(err.contains("bad.log:1: `data_s:-3` is not a number of seconds"), "{err}");
    let missing = dir.path().join("missing.log");
    let (ok, _, err) = common::feedbench(&["doctor", missing.to_str().unwrap()]);
    common::clear_error(ok, &err);
    assert!(err.contains("missing.log"), "{err}");
}

/// The installed lerobot-train, run offline (ACT, CPU, batch 2, no workers, 4 steps, one log
/// line a step), and its log read: the format feedbench reads is the one LeRobot writes today.
#[test]
fn the_installed_lerobot_train_writes_what_doctor_reads() {
    let Some(python) = common::lerobot_python() else { return };
    let train = python.with_file_name("lerobot-train");
    let has_accelerate = std::process::Command::new(&python)
        .args(["-c", "import accelerate"])
        .status()
        .is_ok_and(|s| s.success());
    if !train.exists() || !has_accelerate {
        eprintln!(
            "SKIPPED: no lerobot-train with accelerate in {} (make test installs it)",
            python.display()
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("two-cameras");
    let preset =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lerobot/two-cameras.toml");
    let (ok, _, err) = common::feedbench(&[
        "synth",
        "--preset",
        preset.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let output = std::process::Command::new(&train)
        .current_dir(dir.path())
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_DATASETS_OFFLINE", "1")
        .args([
            "--dataset.repo_id=local/two-cameras",
            &format!("--dataset.root={}", root.display()),
            "--policy.type=act",
            "--policy.device=cpu",
            "--policy.pretrained_backbone_weights=null",
            "--policy.push_to_hub=false",
            "--batch_size=2",
            "--num_workers=0",
            "--steps=4",
            "--log_freq=1",
            "--save_checkpoint=false",
            "--wandb.enable=false",
            &format!("--output_dir={}", dir.path().join("out").display()),
        ])
        .output()
        .unwrap();
    let log = dir.path().join("train.log");
    std::fs::write(&log, [output.stdout, output.stderr].concat()).unwrap();
    assert!(output.status.success(), "{}", std::fs::read_to_string(&log).unwrap());
    let (ok, out, err) = common::feedbench(&["doctor", log.to_str().unwrap(), "--json"]);
    assert!(ok, "{err}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(value["steps"].as_array().unwrap().len(), 4, "{out}");
    assert_eq!(value["summary"]["batch_size"], 2, "{out}");
    assert_eq!(value["summary"]["num_workers"], 0, "{out}");
}

/// The peak resident memory of `feedbench ARGS`, bytes (the kernel's count for that child
/// alone), and whether it succeeded.
#[allow(clippy::zombie_processes)] // reaped by wait4, which alone gives the child's rusage
fn peak_memory(args: &[&str]) -> (bool, u64) {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_feedbench"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for this test's own child, whose pid std has not reaped.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    (libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, usage.ru_maxrss as u64 * 1024)
}

#[test]
fn doctors_memory_stays_flat_in_the_logs_size() {
    // The real log, then 60 MB of other output and one 40 MB line (a dumped tensor, say): it
    // peaked at 606 MB on a 200 MB log when the log was read whole.
    let log = std::fs::read_to_string(fixture()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.log");
    let mut text = log.clone();
    let noise = format!("{}\n", "warning: something said at length ".repeat(600));
    text.push_str(&noise.repeat(60_000_000 / noise.len()));
    text.push_str(&"x".repeat(40_000_000));
    text.push('\n');
    text.push_str(&log);
    std::fs::write(&big, text).unwrap();
    let (ok, small_peak) = peak_memory(&["doctor", fixture().to_str().unwrap()]);
    assert!(ok);
    let (ok, big_peak) = peak_memory(&["doctor", big.to_str().unwrap()]);
    assert!(ok, "the big log is read");
    let grown = big_peak.saturating_sub(small_peak) as f64 / 1e6;
    assert!(grown < 20.0, "100 MB more of log took {grown:.0} MB more memory");
}
