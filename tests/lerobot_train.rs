//! `--lerobot-train "ARGS"`: feedbench builds the run the real `lerobot-train` builds from the
//! same arguments: the same arguments to LeRobotDataset, EpisodeAwareSampler and DataLoader
//! (recorded alike in both, by a hook in the real run), and the same first batches, key by key
//! and byte by byte. Skipped, with a note, where no LeRobot venv is found.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use feedbench::loader::lerobot::run_args::TrainArgs;
use feedbench::loader::lerobot::{LerobotBridge, Reader};

use crate::common;

/// A generated pusht-shaped dataset under `dir` (3 episodes of 30 frames) and the arguments of
/// a small diffusion run on it on the CPU, writing under `dir` (LeRobot's default backbone
/// weights would be downloaded: none here, with group norm).
pub(crate) fn diffusion_run(dir: &Path) -> Vec<String> {
    let (data, out) = (dir.join("pusht"), dir.join("run"));
    common::synth_pusht(&data, 3, 30, &[]);
    [
        "--dataset.repo_id=local/pusht".to_string(),
        format!("--dataset.root={}", data.display()),
        "--policy.type=diffusion".into(),
        "--policy.device=cpu".into(),
        "--policy.push_to_hub=false".into(),
        "--policy.pretrained_backbone_weights=null".into(),
        "--policy.down_dims=[32,64,128]".into(),
        "--batch_size=4".into(),
        "--num_workers=2".into(),
        "--seed=7".into(),
        "--wandb.enable=false".into(),
        "--save_checkpoint=false".into(),
        "--log_freq=1".into(),
        format!("--output_dir={}", out.display()),
    ]
    .into()
}

/// Runs the real lerobot-train for `count` steps with the recording hook: what it built, and
/// its first `count` batches under `out`.
fn real_run(python: &Path, args: &[String], count: usize, out: &Path) -> Json {
    recorded_run(python, args, count, out, None).0
}

/// [`real_run`] with `pythonpath` on PYTHONPATH (where `args` may start with
/// `--feedbench-reader`: record_run.py runs feedbench-lerobot-train): what it built and what it
/// logged (its stderr).
pub(crate) fn recorded_run(
    python: &Path,
    args: &[String],
    count: usize,
    out: &Path,
    pythonpath: Option<&Path>,
) -> (Json, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut command = std::process::Command::new(python);
    command
        .arg(root.join("tests/lerobot_train/record_run.py"))
        .arg(out)
        .arg(count.to_string())
        .arg(root.join("src/loader/lerobot"))
        .args(args)
        .env("HF_HUB_OFFLINE", "1");
    if let Some(path) = pythonpath {
        command.env("PYTHONPATH", path);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "lerobot-train failed: {stderr}");
    let built = std::fs::read_to_string(out.join("built.json")).unwrap();
    (serde_json::from_str(&built).unwrap(), stderr)
}

/// `feedbench COMMAND --lerobot-train TEXT --python PYTHON EXTRA…`: (success, stdout, stderr).
fn with_run(command: &str, text: &str, python: &Path, extra: &[&str]) -> (bool, String, String) {
    let python = python.to_str().unwrap();
    let args = [&[command, "--lerobot-train", text, "--python", python][..], extra].concat();
    common::feedbench(&args)
}

/// Every file under `dir`, by its path below it, with its bytes.
pub(crate) fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    common::file_tree(dir).into_iter().collect()
}

/// The batches a recorded run saved under `dir` ([`files`] but what it built, `built.json`).
pub(crate) fn recorded_batches(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    files(dir).into_iter().filter(|(p, _)| p != Path::new("built.json")).collect()
}

#[test]
fn feedbench_builds_the_dataset_sampler_dataloader_and_batches_lerobot_train_builds() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let args = diffusion_run(dir.path());
    let (theirs, ours) = (dir.path().join("theirs"), dir.path().join("ours"));
    std::fs::create_dir_all(&theirs).unwrap();
    let recorded = real_run(&python, &args, 2, &theirs);

    // feedbench's command line says what it built, as the real run was given it.
    let text = args.join(" ");
    let (ok, stdout, stderr) = with_run("load", &text, &python, &["--batches", "2", "--json"]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("lerobot-train's run: diffusion on cpu"), "{stderr}");
    let phase: Json = serde_json::from_str(&stdout).unwrap();
    let built = &phase["lerobot"]["lerobot_train"];
    for part in ["dataset", "sampler", "dataloader"] {
        assert_eq!(built[part], recorded[part], "{part}");
    }
    assert_eq!(recorded["sampler"]["drop_n_last_frames"], 7, "the policy's");
    // torch's backend as lerobot-train sets it (cuDNN autotuning, TF32 matmuls: not torch's
    // defaults), so that a step measured on CUDA is the one it takes.
    assert_eq!(built["backend"], recorded["backend"]);
    let backend = &recorded["backend"];
    assert_eq!(
        (&backend["cudnn_benchmark"], &backend["matmul_tf32"]),
        (&Json::from(true), &Json::from(true))
    );
    // What lerobot-train gives its DataLoader by version (FEEDBENCH_LEROBOT_PYTHON may name a
    // venv with another LeRobot): 0.6 spawns persistent workers prefetching 4 uint8 batches;
    // 0.4 and 0.5 fork workers prefetching 2 float32 batches.
    let version = phase["lerobot"]["lerobot"].as_str().unwrap_or_default();
    let six = !(version.starts_with("0.4.") || version.starts_with("0.5."));
    let context = &recorded["dataloader"]["multiprocessing_context"];
    assert_eq!(context.as_str().is_some_and(|c| c == "spawn"), six, "{version}: {context}");
    assert_eq!(recorded["dataset"]["return_uint8"].as_bool().unwrap_or(false), six, "{version}");
    let config = &phase["config"];
    let prefetch = if six { 4 } else { 2 };
    assert_eq!((&config["workers"], &config["prefetch"]), (&Json::from(2), &Json::from(prefetch)));
    // Workers over a run without any: lerobot-train's workers' prefetch, not a default of
    // feedbench's (its DataLoader without workers has none to say).
    // (With LeRobot 0.6's --cudnn_deterministic=true, cuDNN is made deterministic instead.)
    let mut alone = text.replace("--num_workers=2", "--num_workers=0");
    if six {
        alone.push_str(" --cudnn_deterministic=true");
    }
    let (ok, stdout, stderr) =
        with_run("load", &alone, &python, &["--workers", "1", "--batches", "2", "--json"]);
    assert!(ok, "{stderr}");
    let phase: Json = serde_json::from_str(&stdout).unwrap();
    let backend = &phase["lerobot"]["lerobot_train"]["backend"];
    let deterministic = (&backend["cudnn_benchmark"], &backend["cudnn_deterministic"]);
    assert_eq!(deterministic, (&Json::from(!six), &Json::from(six)), "{backend}");
    let measured = &phase["lerobot"]["lerobot_train"]["dataloader"];
    assert_eq!(
        (&measured["num_workers"], &measured["prefetch_factor"]),
        (&Json::from(1), &Json::from(prefetch)),
        "{measured}"
    );
    // And the line that describes the run says what is measured, not only its arguments'.
    let said = format!("measured with --workers 1, --batch 4, --prefetch {prefetch} over it");
    assert!(stderr.contains(&said), "{stderr}");

    // The first batches its DataLoader yields are the real run's, file for file.
    let (args, reader) = (args.clone(), Reader::Lerobot);
    let run = TrainArgs { python: python.clone(), args, reader, ranks: 1 };
    let bridge = LerobotBridge::new();
    let (_, described) = bridge.describe(&run).unwrap();
    bridge.save_first_batches(&run, &described.config(), 2, &ours).unwrap();
    let theirs: Vec<_> =
        files(&theirs).into_iter().filter(|(p, _)| p != Path::new("built.json")).collect();
    let ours = files(&ours);
    let names =
        |files: &[(PathBuf, Vec<u8>)]| files.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&theirs));
    assert_eq!(ours.len(), 2 * 12, "12 files a batch: 11 tensors and the strings");
    for ((path, ours), (_, theirs)) in ours.iter().zip(&theirs) {
        assert!(ours == theirs, "{} differs from lerobot-train's", path.display());
    }
}

#[test]
fn runs_feedbench_cannot_measure_here_are_refused_with_what_to_pass() {
    let Some(python) = common::lerobot_python() else { return };
    let refused = |args: &str| {
        let (ok, _, stderr) = with_run("load", args, &python, &[]);
        assert!(!ok, "{args}: taken");
        stderr
    };
    let hub = refused("--dataset.repo_id=lerobot/pusht --policy.type=act");
    assert!(hub.contains("downloads nothing; add --dataset.root=DIR"), "{hub}");
    let typo = refused(
        "--dataset.repo_id=a/b --dataset.root=/nowhere --policy.type=act --batch_size=many",
    );
    // LeRobot's own words, not a pointer to output the driver keeps.
    let said = "LeRobot's parser refused the lerobot-train arguments: `batch_size`: Couldn't \
                parse 'many' into an int";
    assert!(typo.contains(said), "{typo}");
    // A config file or a dataset's info that is no JSON: the file named.
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("train_config.json");
    std::fs::write(&garbage, r#"{"dataset": "#).unwrap();
    let config = refused(&format!("--config_path={}", garbage.display()));
    assert!(
        config
            .contains(&format!("--config_path={}: not a lerobot-train config", garbage.display())),
        "{config}"
    );
    let corrupt = dir.path().join("corrupt");
    common::synth_pusht(&corrupt, 2, 20, &[]);
    std::fs::write(corrupt.join("meta/info.json"), r#"{"fps": "#).unwrap();
    let info = refused(&format!(
        "--dataset.repo_id=l/c --dataset.root={} --policy.type=act",
        corrupt.display()
    ));
    assert!(
        info.contains(&format!(
            "{}: not a LeRobot dataset's info",
            corrupt.join("meta/info.json").display()
        )),
        "{info}"
    );
    let stray = refused("--policy.type=act act");
    assert!(stray.contains("--lerobot-train: \"act\" is not a lerobot-train flag"), "{stray}");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pusht");
    common::synth_pusht(&data, 2, 20, &[]);
    let args = format!(
        "--dataset.repo_id=local/p --dataset.root={} --policy.type=act --policy.push_to_hub=false",
        data.display()
    );
    let (ok, _, seed) = with_run("load", &args, &python, &["--seed", "3"]);
    assert!(!ok);
    assert!(seed.contains("--seed is lerobot-train's to set"), "{seed}");
    // So is a compare side's (it was dropped there without a word).
    let python_arg = python.to_str().unwrap();
    let side = format!("--lerobot-train '{args}' --python {python_arg} --seed 3");
    let (ok, _, seed) = common::feedbench(&["compare", "--a", &side, "--b", &side]);
    assert!(!ok && seed.contains("--seed is lerobot-train's to set"), "{seed}");
    // `policy` is a run's own step: no other loader has one.
    let data = data.to_str().unwrap();
    let (ok, _, stderr) = common::feedbench(&["train", data, "--model", "policy", "--steps", "1"]);
    assert!(!ok && stderr.contains("`policy` is a lerobot-train run's own step"), "{stderr}");
    // A side of compare is a run too, its arguments quoted inside the side's.
    let side = "--lerobot-train '--policy.type=act act'";
    let (ok, _, stderr) = common::feedbench(&["compare", "--a", side, "--b", side]);
    assert!(!ok && stderr.contains("\"act\" is not a lerobot-train flag"), "{stderr}");
    assert!(stderr.contains("--a"), "the side is named: {stderr}");
}

/// The one video file under `dataset`'s videos/.
fn the_video(dataset: &Path) -> PathBuf {
    let videos = dataset.join("videos");
    let found: Vec<PathBuf> = common::file_tree(&videos).into_keys().collect();
    assert_eq!(found.len(), 1, "{found:?}");
    videos.join(&found[0])
}

#[test]
fn what_lerobot_fails_on_without_naming_it_is_named() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pusht");
    common::synth_pusht(&data, 2, 20, &[]);
    let run = |root: &Path, extra: &str| {
        format!(
            "--dataset.repo_id=local/p --dataset.root={} --policy.type=act \
             --policy.push_to_hub=false --num_workers=1 {extra}",
            root.display()
        )
    };
    let refused = |command: &str, args: &str, flags: &[&str]| {
        let (ok, _, stderr) = with_run(command, args, &python, flags);
        assert!(!ok, "{args}: taken");
        stderr
    };
    // LeRobot: `Instruction "train" corresponds to no data!`
    let episode = refused("load", &run(&data, "--dataset.episodes=[99]"), &[]);
    assert!(
        episode.contains("--dataset.episodes: episode 99 is not in the dataset at")
            && episode.contains("its episodes are 0 to 1"),
        "{episode}"
    );
    // LeRobot: "Neither policy nor reward_model is configured".
    let nowhere = dir.path().join("no-policy");
    let args = format!(
        "--dataset.repo_id=local/p --dataset.root={} --policy.path={} --policy.device=cpu",
        data.display(),
        nowhere.display()
    );
    let policy = refused("load", &args, &[]);
    assert!(
        policy.contains(&format!("--policy.path={}: no such directory", nowhere.display())),
        "{policy}"
    );
    // A partial download: LeRobot would fetch the missing video, and says only that it is
    // offline.
    let partial = dir.path().join("partial");
    common::synth_pusht(&partial, 2, 20, &[]);
    let video = the_video(&partial);
    std::fs::remove_file(&video).unwrap();
    let missing = refused("load", &run(&partial, ""), &[]);
    assert!(missing.contains(&format!("{}: no such file", video.display())), "{missing}");
    // A damaged video under lerobot-train's loop: torchcodec names no file.
    let damaged = dir.path().join("damaged");
    common::synth_pusht(&damaged, 2, 20, &[]);
    let video = the_video(&damaged);
    let bytes = std::fs::read(&video).unwrap();
    std::fs::write(&video, &bytes[..bytes.len() / 2]).unwrap();
    let flags = ["--model", "synthetic:10ms", "--steps", "3"];
    let truncated = refused("train", &run(&damaged, ""), &flags);
    assert!(truncated.contains(&format!("{} cannot be decoded", video.display())), "{truncated}");
}

#[test]
fn train_steps_the_runs_own_policy_in_lerobot_trains_loop_or_a_fixed_step_in_its_place() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let text = diffusion_run(dir.path()).join(" ");
    let train = |extra: &[&str]| {
        let args = [&["--steps", "3", "--warmup", "1", "--json"][..], extra].concat();
        let (ok, stdout, stderr) = with_run("train", &text, &python, &args);
        assert!(ok, "{stderr}");
        serde_json::from_str::<Json>(&stdout).unwrap()
    };
    // The policy's own update_policy: its parts, and diffusion's own top-level modules.
    let own = train(&[]);
    let modules: Vec<&str> =
        own["modules"].as_array().unwrap().iter().map(|m| m[0].as_str().unwrap()).collect();
    assert_eq!(modules, ["rgb_encoder", "unet"]);
    for step in own["per_step"].as_array().unwrap() {
        for part in ["forward_ms", "backward_ms", "optimizer_ms", "h2d_ms"] {
            assert!(step[part].as_f64().unwrap() > 0.0, "{part}: {step}");
        }
    }
    let (data_s, updt_s) = (own["data_s"].as_f64().unwrap(), own["updt_s"].as_f64().unwrap());
    assert!(data_s > 0.0 && updt_s > data_s, "lerobot-train's terms: {data_s} {updt_s}");
    // A step of fixed length in its place, after the same hand-over.
    let fixed = train(&["--model", "synthetic:20ms"]);
    assert!(fixed.get("modules").is_none());
    for step in fixed["per_step"].as_array().unwrap() {
        assert_eq!(step["forward_ms"], 20.0);
        assert!(step["h2d_ms"].as_f64().unwrap() > 0.0, "the hand-over: {step}");
    }
    let (ok, _, stderr) = with_run("train", &text, &python, &["--model", "none"]);
    assert!(!ok && stderr.contains("steps its own policy"), "{stderr}");
}

#[test]
fn tune_answers_with_the_users_own_lerobot_train_command() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let text = diffusion_run(dir.path()).join(" ");
    let out = dir.path().join("tune");
    let lengths = ["--loader-batches", "4", "--train-steps", "6", "--warmup", "1"];
    let short =
        [&["--step-ms", "100", "--cpus", "1"][..], &lengths, &["--out", out.to_str().unwrap()]];
    let (ok, stdout, stderr) = with_run("tune", &text, &python, &short.concat());
    assert!(ok, "{stderr}");
    let flags = stdout.lines().find(|l| l.starts_with("Flags (lerobot-train): ")).expect(&stdout);
    let command = flags.trim_start_matches("Flags (lerobot-train): ");
    assert!(command.starts_with("lerobot-train --dataset.repo_id=local/pusht "), "{command}");
    assert!(command.contains("'--policy.down_dims=[32,64,128]'"), "{command}");
    let workers: Vec<&str> =
        command.split(' ').filter(|a| a.starts_with("--num_workers=")).collect();
    assert_eq!(workers.len(), 1, "the run's own --num_workers=2 is replaced: {command}");
    assert!(["--num_workers=0", "--num_workers=1"].contains(&workers[0]), "{command}");
    // Every measured configuration is a lerobot-train cell at the run's batch.
    let results = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    for line in results.lines() {
        let result = serde_json::from_str::<Json>(line).unwrap();
        let lerobot = result["system"]["lerobot"].as_str().unwrap_or_default();
        assert!(lerobot.contains(" (torch "), "the host names the LeRobot that read: {result}");
        let cell = &result["cell"];
        assert_eq!(
            (cell["loader"].as_str(), cell["batch_size"].as_u64()),
            (Some("lerobot-train"), Some(4))
        );
    }
    // The run is built once for the whole tune: each configuration is a new DataLoader of it.
    let tuned: Json =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    assert_eq!(tuned["runs_built"], 1, "{tuned}");
    // The step as the run takes it: its hand-over of each batch, then the 100 ms it is fed.
    let demand = &tuned["answer"]["demand"];
    let handover_ms = demand["handover_ms"].as_f64().unwrap();
    let step_ms = demand["step_ms"].as_f64().unwrap();
    assert!(handover_ms > 0.0 && (step_ms - handover_ms - 100.0).abs() < 20.0, "{demand}");
    assert!(stdout.contains("as the run takes it ("), "{stdout}");
    let measured: HashSet<u64> = results
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).unwrap()["cell"]["workers"].as_u64().unwrap())
        .collect();
    assert!(
        measured.len() >= 2,
        "configurations of different workers on the one run: {measured:?}"
    );
    // Building it (LeRobot's import and parser, the dataset) is part of the tune's wall time.
    let wall = tuned["tune_wall_s"].as_f64().unwrap();
    let building = tuned["run_build_s"].as_f64().unwrap();
    assert!(0.0 < building && building < wall, "{tuned}");
    assert!(stdout.contains(&format!("{building:.0} s of it building the run")), "{stdout}");
    // tune searches the workers; the run's arguments set the rest.
    let (ok, _, stderr) = with_run("tune", &text, &python, &["--sampler", "sequential"]);
    assert!(!ok && stderr.contains("--sampler with --lerobot-train"), "{stderr}");
}
