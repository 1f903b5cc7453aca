//! Roots that are URLs: a dataset in a bucket of a real S3-compatible server (s3s-fs) and on a
//! real web server (nginx), both on loopback, read as its local copy reads, and every fault
//! one clear error naming the URL.

use std::path::{Path, PathBuf};
use std::process::Command;

use feedbench::dataset::remote::register_storage_options;
use feedbench::dataset::video::{DecodeOptions, VideoDecoder};
use feedbench::dataset::{Dataset, WindowSpec};

use crate::common::servers::{free_port, Nginx, SlowLink, S3};
use crate::common::{self, clear_error, outcome, walk};

/// `feedbench args` with `env` set: success, stdout, stderr.
fn feedbench_with(env: &[(&str, String)], args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(args).env_remove("AWS_PROFILE");
    for (key, value) in env {
        command.env(key, value);
    }
    outcome(&mut command)
}

/// The NumPy files `feedbench sample` wrote under `out`, by name.
fn arrays(out: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = walk(out)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "npy"))
        .map(|p| (p.strip_prefix(out).unwrap().to_path_buf(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn a_root_in_a_bucket_or_on_a_web_server_reads_as_its_local_copy() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let local = www.join("pusht");
    common::synth_pusht(&local, 3, 20, &[]);
    let Some(s3) = S3::start(dir.path()) else { return };
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let in_bucket = s3.upload("datasets", "pusht", &local);
    let on_web = format!("{}/pusht", nginx.origin);
    let stored_before = walk(&s3.data).len();
    let env = s3.env();
    let roots = [local.to_str().unwrap(), in_bucket.as_str(), on_web.as_str()];

    // Windows that pad at an episode's start and end, and the last frame of the file.
    for index in ["0", "19", "20", "59"] {
        let mut read = Vec::new();
        for (n, root) in roots.iter().enumerate() {
            let out = dir.path().join(format!("sample-{index}-{n}"));
            let sample = ["sample", root, "--index", index, "--window", "diffusion", "--out"];
            let (ok, _, err) =
                feedbench_with(&env, &[&sample[..], &[out.to_str().unwrap()]].concat());
            assert!(ok, "sample {index} of {root}: {err}");
            read.push(arrays(&out));
        }
        assert!(!read[0].is_empty());
        assert_eq!(
            read[1], read[0],
            "index {index}: the bucket's sample differs from the local one"
        );
        assert_eq!(read[2], read[0], "index {index}: the web server's sample differs");
    }

    // The same batches, digest for digest, with two workers and a shuffled order.
    let mut digests = Vec::new();
    for root in roots {
        let load = ["load", root, "--workers", "2", "--batch", "4", "--batches", "6"];
        let flags = ["--sampler", "shuffled", "--seed", "7", "--digests", "--json"];
        let (ok, out, err) = feedbench_with(&env, &[&load[..], &flags].concat());
        assert!(ok, "load of {root}: {err}");
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        digests.push(json["batch_digests"].clone());
    }
    assert_eq!(digests[0].as_array().map(Vec::len), Some(6), "{}", digests[0]);
    assert_eq!(digests[1], digests[0], "the bucket's batches differ from the local ones");
    assert_eq!(digests[2], digests[0], "the web server's batches differ from the local ones");

    // `info` of the URL sees the same dataset; nothing was written to the store.
    let (ok, out, err) = feedbench_with(&env, &["info", &in_bucket, "--json"]);
    assert!(ok, "info: {err}");
    let (_, local_out, _) = feedbench_with(&env, &["info", roots[0], "--json"]);
    let (info, local_info): (serde_json::Value, serde_json::Value) =
        (serde_json::from_str(&out).unwrap(), serde_json::from_str(&local_out).unwrap());
    for key in ["episodes_present", "frames_present", "data_bytes", "video_bytes"] {
        assert_eq!(info[key], local_info[key], "info's {key}");
    }
    assert_eq!(walk(&s3.data).len(), stored_before, "feedbench wrote to the store");
}

#[test]
fn an_object_replaced_while_read_is_refused_not_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("pusht");
    // Long enough that the frames read last lie beyond what the file's opening fetched.
    common::synth_pusht(&local, 2, 150, &[]);
    let Some(s3) = S3::start(dir.path()) else { return };
    let root = s3.upload("replaced", "pusht", &local);
    register_storage_options(&root, s3.options());
    let dataset = Dataset::open(&root).unwrap();
    let window = dataset.window(&WindowSpec::diffusion()).unwrap();
    let mut decoder = VideoDecoder::new(DecodeOptions::default());
    let mut first = dataset.sample(3, &window).unwrap();
    first.decode_pixels(&mut decoder, true).unwrap();
    // The video file (opened above) replaced by one of its length with other frame bytes.
    let video = walk(&local.join("videos")).into_iter().next().unwrap();
    let within = video.strip_prefix(&local).unwrap().to_str().unwrap().to_string();
    let mut bytes = std::fs::read(&video).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle..middle + 64].iter_mut().for_each(|b| *b ^= 0xff);
    s3.replace("replaced", &format!("pusht/{within}"), bytes);
    let mut later = dataset.sample(160, &window).unwrap();
    let err = later.decode_pixels(&mut decoder, true).unwrap_err().to_string();
    assert!(err.starts_with(&format!("{root}/{within}: ")), "{err}");
    assert!(err.contains("changed while it was read"), "{err}");
}

#[test]
fn bad_roots_and_unreachable_stores_are_one_clear_error_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("pusht");
    common::synth_pusht(&local, 1, 10, &[]);
    let Some(s3) = S3::start(dir.path()) else { return };
    let root = s3.upload("faults", "pusht", &local);
    let env = s3.env();
    let info = |env: &[(&str, String)], root: &str, extra: &[&str]| {
        let (ok, _, err) = feedbench_with(env, &[&["info", root][..], extra].concat());
        clear_error(ok, &err);
        err
    };

    let err = info(&env, "ftp://host/pusht", &[]);
    assert!(err.contains("ftp://host/pusht: unknown scheme ftp://"), "{err}");
    let err = info(&env, "s3://no-such-bucket/pusht", &[]);
    assert!(err.contains("s3://no-such-bucket/pusht/meta/info.json: not found"), "{err}");
    let err = info(&env, &format!("{root}-not-there"), &[]);
    assert!(err.contains(&format!("{root}-not-there/meta/info.json: not found")), "{err}");

    let mut wrong = env.clone();
    wrong.retain(|(k, _)| *k != "AWS_SECRET_ACCESS_KEY");
    wrong.push(("AWS_SECRET_ACCESS_KEY", "not-the-secret".into()));
    let err = info(&wrong, &root, &[]);
    assert!(err.contains(&format!("{root}/meta/info.json: access denied")), "{err}");
    assert!(err.contains("credentials"), "{err}");

    let mut closed = env.clone();
    closed.retain(|(k, _)| *k != "AWS_ENDPOINT_URL");
    closed.push(("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", free_port())));
    let err = info(&closed, &root, &[]);
    assert!(err.contains(&format!("{root}/meta/info.json: cannot reach the endpoint")), "{err}");

    let err = info(&env, &root, &["--storage-option", "no_such_setting=1"]);
    assert!(err.contains("storage option `no_such_setting`"), "{err}");
    let err = info(&env, &root, &["--storage-option", "novalue"]);
    assert!(err.contains("expected KEY=VALUE"), "{err}");

    // The right root, the same server: read.
    let (ok, _, err) = feedbench_with(&env, &["info", &root]);
    assert!(ok, "{err}");
}

/// Every file under `dir` by its path under it, with its bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let files = walk(dir).into_iter().filter(|p| !p.ends_with(feedbench::dataset::stage::MANIFEST));
    files
        .map(|p| (p.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn a_stage_from_the_bucket_killed_mid_copy_goes_on_and_every_file_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("pusht");
    // A file per episode, so that a stage is many files.
    common::synth_pusht(&local, 12, 20, &["--format", "v2.1"]);
    let Some(s3) = S3::start(dir.path()) else { return };
    let root = s3.upload("staged", "pusht", &local);
    let to = dir.path().join("copy");
    let staging = dir.path().join(".copy.staging");
    // Through a slow link (150 ms each way), killed once some files lie whole in the staging
    // directory and before the copy is complete.
    let link = SlowLink::start(s3.server.port, std::time::Duration::from_millis(150));
    let mut slow = s3.env();
    slow.retain(|(k, _)| *k != "AWS_ENDPOINT_URL");
    slow.push(("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", link.port)));
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(["stage", &root, "--to", to.to_str().unwrap()]);
    for (key, value) in &slow {
        command.env(key, value);
    }
    let mut child = command.stderr(std::process::Stdio::null()).spawn().unwrap();
    let whole = |dir: &Path| {
        walk(dir)
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "mp4" || e == "parquet"))
            .count()
    };
    while !(staging.is_dir() && whole(&staging) >= 2) {
        assert!(child.try_wait().unwrap().is_none(), "the stage ended before it was killed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!to.exists(), "nothing under the final name before the copy is whole");
    assert!(whole(&staging) < tree(&local).len(), "killed before the copy was complete");
    for path in walk(&staging) {
        // Every file under its own name is whole: the source's bytes.
        let name = path.strip_prefix(&staging).unwrap();
        if path.extension().is_some_and(|e| e != "partial")
            && !path.ends_with(feedbench::dataset::stage::MANIFEST)
        {
            assert_eq!(
                std::fs::read(&path).unwrap(),
                std::fs::read(local.join(name)).unwrap(),
                "{name:?}"
            );
        }
    }

    let (ok, out, err) = feedbench_with(&s3.env(), &["stage", &root, "--to", to.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), to.to_str().unwrap());
    assert!(err.contains("went on from a stopped stage"), "{err}");
    assert!(!staging.exists());
    assert_eq!(tree(&to), tree(&local), "the copy is the dataset, file for file");
    assert!(!walk(&to).iter().any(|p| p.extension().is_some_and(|e| e == "partial")));
    let (ok, _, err) = feedbench_with(&s3.env(), &["stage", &root, "--to", to.to_str().unwrap()]);
    assert!(!ok && err.contains("already exists"), "{err}");
}

#[test]
fn a_stage_from_a_web_server_that_loses_a_file_keeps_what_it_copied_and_goes_on() {
    use feedbench::dataset::stage::{plan_stage, stage};
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let local = www.join("pusht");
    common::synth_pusht(&local, 4, 20, &["--format", "v2.1"]);
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let root = PathBuf::from(format!("{}/pusht", nginx.origin));
    let to = dir.path().join("copy");
    let plan = plan_stage(&root, None).unwrap();
    assert_eq!(plan.files.len(), tree(&local).len(), "the metadata found by name, every file");
    // Planned, then one file gone from the server (404) while the stage copies.
    let gone = walk(&local.join("videos")).into_iter().max().unwrap();
    let aside = dir.path().join("aside");
    std::fs::rename(&gone, &aside).unwrap();
    let err = stage(&root, &to, &plan).unwrap_err().to_string();
    let name = gone.strip_prefix(&www).unwrap().to_str().unwrap();
    assert!(err.contains(&format!("{}/{name}: not found", nginx.origin)), "{err}");
    assert!(err.contains("run the same stage again"), "{err}");
    assert!(!to.exists());
    std::fs::rename(&aside, &gone).unwrap();
    let staged = stage(&root, &to, &plan).unwrap();
    assert!(staged.kept > 0, "what the first stage copied is kept");
    assert_eq!(tree(&to), tree(&local));
    assert_eq!(Dataset::open(&to).unwrap().num_frames(), 80);
}

#[test]
fn feedbench_dataset_of_a_bucket_gives_lerobots_items_of_the_local_copy() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("pusht");
    common::synth_pusht(&local, 3, 20, &[]);
    let Some(s3) = S3::start(dir.path()) else { return };
    let root = s3.upload("python", "pusht", &local);
    let options: serde_json::Map<String, serde_json::Value> =
        s3.options().into_iter().map(|(k, v)| (k, v.into())).collect();
    let package = crate::feedbench_dataset::python_package(dir.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/feedbench_dataset/remote.py");
    let options = serde_json::Value::Object(options).to_string();
    let (ok, out, err) = outcome(
        Command::new(python)
            .arg(script)
            .args([root.as_str(), local.to_str().unwrap(), &options])
            .env("PYTHONPATH", &package)
            .env("HF_HUB_OFFLINE", "1")
            .env("FEEDBENCH_CACHE_DIR", dir.path().join("cache")),
    );
    assert!(ok, "remote.py:\n{out}\n{err}");
    print!("{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("check: ")).count(), 6, "{out}");
}

#[test]
fn feedbench_lerobot_train_from_a_bucket_trains_on_lerobots_batches_of_the_local_copy() {
    let Some(python) = common::lerobot_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let package = crate::feedbench_dataset::python_package(dir.path());
    let args = crate::lerobot_train::diffusion_run(dir.path());
    let Some(s3) = S3::start(dir.path()) else { return };
    let root = s3.upload("train", "pusht", &dir.path().join("pusht"));
    const STEPS: usize = 4;
    let (theirs, ours) = (dir.path().join("theirs"), dir.path().join("ours"));
    for out in [&theirs, &ours] {
        std::fs::create_dir_all(out).unwrap();
    }
    crate::lerobot_train::recorded_run(&python, &args, STEPS, &theirs, Some(&package));
    std::fs::remove_dir_all(dir.path().join("run")).ok();
    let mut remote: Vec<String> = vec!["--feedbench-reader".into()];
    remote.extend(args.iter().map(|a| match a.starts_with("--dataset.root=") {
        true => format!("--dataset.root={root}"),
        false => a.clone(),
    }));
    remote.extend(s3.options().iter().map(|(k, v)| format!("--feedbench.storage_option={k}={v}")));
    let (built, log) =
        crate::lerobot_train::recorded_run(&python, &remote, STEPS, &ours, Some(&package));
    assert_eq!(built["feedbench_datasets"], 1, "{log}");
    let batches = crate::lerobot_train::recorded_batches;
    let (ours, theirs) = (batches(&ours), batches(&theirs));
    assert!(!ours.is_empty());
    assert_eq!(ours, theirs, "the run from the bucket took LeRobot's batches of the local copy");
}

/// The `remote` figures of `feedbench load ROOT --json` (one worker unless `workers`), run by
/// `run` (the process, or a shaped namespace's script).
fn remote_figures(out: &str) -> serde_json::Value {
    let phase: serde_json::Value =
        serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
    phase["remote"].clone()
}

#[test]
fn the_store_s_latency_a_narrow_link_and_decoding_each_get_their_verdict_and_change() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let local = www.join("g1");
    // 640×480 frames of some 40 kB: a sample is ~90 kB to fetch and ~25 ms to decode here.
    let g1 = ["synth", "--preset", "g1", "--episodes", "2", "--frames-per-episode", "40"];
    let (ok, _, err) =
        common::feedbench(&[&g1[..], &["--crf", "12", "--out", local.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let load = |root: &str, workers: &str| {
        let args =
            ["load", root, "--workers", workers, "--batch", "4", "--batches", "10", "--json"];
        let (ok, out, err) = common::feedbench(&args);
        assert!(ok, "{err}");
        remote_figures(&out)
    };

    // The link as it is: the readers decode.
    let unshaped = load(&format!("{}/g1", nginx.origin), "1");
    assert_eq!(unshaped["bound"], "decode", "{unshaped}");
    assert!(unshaped["read_amplification"].as_f64().unwrap() < 1.3, "{unshaped}");

    // 60 ms each way, one request in flight (no workers): the store's latency.
    let link = SlowLink::start(nginx.server.port, std::time::Duration::from_millis(60));
    let far = load(&format!("http://127.0.0.1:{}/g1", link.port), "0");
    assert_eq!(far["bound"], "latency", "{far}");
    assert!(far["first_byte_p50_ms"].as_f64().unwrap() >= 120.0, "{far}");

    // 10 Mbit/s: the link.
    let port = 8080;
    let Some(command) = Nginx::command(&www, &dir.path().join("shaped"), port) else { return };
    let feedbench = env!("CARGO_BIN_EXE_feedbench");
    let script = format!(
        "{feedbench} load http://127.0.0.1:{port}/g1 --workers 1 --batch 4 --batches 10 --json"
    );
    let Some((ok, out, err)) =
        common::servers::in_shaped_namespace("10mbit", &command, port, &script)
    else {
        return;
    };
    assert!(ok, "{err}");
    let narrow = remote_figures(&out);
    assert_eq!(narrow["bound"], "link", "{narrow}");
    let receive = narrow["receive_mb_per_s"].as_f64().unwrap();
    assert!((0.8..2.0).contains(&receive), "10 Mbit/s is 1.25 MB/s: {narrow}");
}

#[test]
fn throttling_hanging_and_truncating_servers_are_retried_counted_and_named() {
    use crate::common::servers::{Fault, FaultyFront};
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    // Long enough that the measured batches' frames lie beyond what opening the file fetched.
    common::synth_pusht(&www.join("pusht"), 2, 150, &[]);
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let root = |front: &FaultyFront| format!("http://127.0.0.1:{}/pusht", front.port);

    // Every third request answered 503 SlowDown: the run goes on, the retries counted.
    let throttling = FaultyFront::start(nginx.server.port, Fault::ThrottleEvery(3));
    let load = ["load", &root(&throttling), "--workers", "1", "--batch", "8", "--batches", "8"];
    let (ok, out, err) = common::feedbench(&[&load[..], &["--warmup", "0", "--json"]].concat());
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let throttled = throttling.throttled.load(std::sync::atomic::Ordering::SeqCst);
    let retries = json["remote"]["retries"].as_u64().unwrap();
    assert!(retries >= 1 && retries <= throttled as u64, "{throttled}: {}", json["remote"]);
    // Throttled for good: named, with the tries and what helps.
    let throttled = FaultyFront::start(nginx.server.port, Fault::Throttle(usize::MAX));
    let (ok, _, err) = common::feedbench(&["info", &root(&throttled)]);
    clear_error(ok, &err);
    assert!(
        err.contains(
            "/meta/info.json: the store throttled the requests (503 SlowDown) after 4 retries"
        ),
        "{err}"
    );
    assert!(err.contains("requests_in_flight"), "{err}");

    // A server that never answers: the timeout, as set, named.
    let hanging = FaultyFront::start(nginx.server.port, Fault::Hang);
    let started = std::time::Instant::now();
    let (ok, _, err) =
        common::feedbench(&["info", &root(&hanging), "--storage-option", "timeout=1s"]);
    clear_error(ok, &err);
    assert!(
        err.contains("no answer in time (connect timeout 5 s, request timeout 1s) after 4 retries"),
        "{err}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());

    // Half of each body, then the connection closed.
    let truncating = FaultyFront::start(nginx.server.port, Fault::Truncate);
    let (ok, _, err) = common::feedbench(&["info", &root(&truncating)]);
    clear_error(ok, &err);
    assert!(
        err.contains("/meta/info.json: the server sent a truncated body after 4 retries"),
        "{err}"
    );
}

#[test]
fn a_hub_root_is_read_from_its_resolve_urls_at_the_endpoint_and_revision_given() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let local = dir.path().join("pusht");
    common::synth_pusht(&local, 2, 20, &[]);
    // The Hub's layout: /datasets/OWNER/NAME/resolve/REVISION/FILE.
    let resolve = www.join("datasets/lerobot-test/pusht/resolve");
    for revision in ["main", "v3.0"] {
        for file in walk(&local) {
            let to = resolve.join(revision).join(file.strip_prefix(&local).unwrap());
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&file, &to).unwrap();
        }
    }
    std::fs::remove_file(resolve.join("main/meta/info.json")).unwrap();
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let hub = [("HF_ENDPOINT", nginx.origin.clone()), ("HF_TOKEN", "hf_test".into())];
    let out = dir.path().join("at-revision");
    let root = "hf://datasets/lerobot-test/pusht@v3.0";
    let sample = ["sample", root, "--index", "21", "--window", "diffusion", "--out"];
    let (ok, _, err) = feedbench_with(&hub, &[&sample[..], &[out.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let expected = dir.path().join("local");
    let local_sample =
        ["sample", local.to_str().unwrap(), "--index", "21", "--window", "diffusion"];
    let (ok, _, err) =
        feedbench_with(&[], &[&local_sample[..], &["--out", expected.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    assert_eq!(arrays(&out), arrays(&expected));
    // `main` (no revision given) is another revision: here it lacks info.json, named by its URL.
    let (ok, _, err) = feedbench_with(&hub, &["info", "hf://datasets/lerobot-test/pusht"]);
    clear_error(ok, &err);
    assert!(err.contains("hf://datasets/lerobot-test/pusht/meta/info.json: not found"), "{err}");
}

#[test]
fn tune_of_a_url_root_answers_stream_or_stage_with_both_figures() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    // A name of its own: the tune's default copy lies under /dev/shm/feedbench by it.
    let name = format!("pusht-tune-{}", std::process::id());
    let local = www.join(&name);
    common::synth_pusht(&local, 4, 30, &[]);
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let root = format!("{}/{name}", nginx.origin);
    let tune = |out: &Path, extra: &[&str]| {
        let args = ["tune", &root, "--window", "none", "--batch", "4", "--step-ms", "20"];
        let budgets = ["--cpus", "2", "--memory", "2GiB", "--train-steps", "8", "--budget", "20s"];
        let out = ["--out", out.to_str().unwrap()];
        let (ok, text, err) = common::feedbench(&[&args[..], &budgets, &out, extra].concat());
        assert!(ok, "tune: {err}");
        text
    };

    // Staged into a directory of the user's: kept there, every file as the store has it.
    let kept = dir.path().join("staged");
    let out = dir.path().join("tune-kept");
    let text = tune(&out, &["--stage-to", kept.to_str().unwrap()]);
    assert!(text.contains("Stream or stage."), "{text}");
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    let answer = &tuned["stream_or_stage"];
    assert_eq!(answer["epoch_samples"], 120, "{answer}");
    assert_eq!(answer["workers"], tuned["answer"]["workers"], "{answer}");
    assert!(answer["stream_samples_per_s"].as_f64().unwrap() > 0.0, "{answer}");
    assert!(answer["stream_bytes_per_sample"].as_f64().unwrap() > 0.0, "{answer}");
    let staged = &answer["staged"];
    let local_bytes: u64 = walk(&local).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    assert_eq!(staged["bytes"], local_bytes, "the copy holds the dataset's bytes: {staged}");
    assert!(staged["seconds"].as_f64().unwrap() > 0.0, "{staged}");
    assert!(staged["samples_per_s"].as_f64().unwrap() > 0.0, "{staged}");
    assert_eq!(tree(&kept), tree(&local), "the kept copy differs from the store's files");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(page.contains("Stream or stage."), "the page lacks the answer");

    // Staged where the tune chooses: measured, then removed with nothing left beside it.
    let out = dir.path().join("tune-scratch");
    let text = tune(&out, &["--nodes", "4"]);
    let scratch = feedbench::dataset::stage::scratch_dir();
    let left: Vec<_> = std::fs::read_dir(&scratch)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left.iter().any(|n| n.to_string_lossy().contains(&name)),
        "the tune left its copy in {}: {left:?}",
        scratch.display()
    );
    assert!(text.contains("Over 4 nodes, each node's ranks stream"), "{text}");
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    assert_eq!(tuned["stream_or_stage"]["staged"]["kept"], false, "{tuned}");

    // A local root has nothing to stage.
    let out = dir.path().join("tune-local");
    let args = ["tune", local.to_str().unwrap(), "--window", "none", "--batch", "4"];
    let rest = ["--step-ms", "20", "--cpus", "2", "--memory", "2GiB", "--budget", "5s", "--json"];
    let (ok, text, err) =
        common::feedbench(&[&args[..], &rest, &["--out", out.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    assert!(!text.contains("stream_or_stage"), "{text}");
}

#[test]
fn tune_through_a_far_store_takes_more_requests_in_flight_where_the_stream_waits_on_them() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let local = www.join("g1");
    let g1 = ["synth", "--preset", "g1", "--episodes", "2", "--frames-per-episode", "40"];
    let (ok, _, err) =
        common::feedbench(&[&g1[..], &["--crf", "12", "--out", local.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    // 60 ms each way, one request in flight to start from, one core: the store's latency holds
    // the stream whatever the workers.
    let link = SlowLink::start(nginx.server.port, std::time::Duration::from_millis(60));
    let root = format!("http://127.0.0.1:{}/g1", link.port);
    let out = dir.path().join("tune");
    let args = ["tune", &root, "--window", "none", "--batch", "4", "--step-ms", "5"];
    let fixed = ["--requests-in-flight", "1", "--cpus", "1", "--memory", "2GiB", "--no-stage"];
    let length = ["--train-steps", "6", "--budget", "30s", "--out", out.to_str().unwrap()];
    let (ok, text, err) = common::feedbench(&[&args[..], &fixed, &length].concat());
    assert!(ok, "tune: {err}");
    let tuned: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tune.json")).unwrap()).unwrap();
    let requests = &tuned["requests"];
    let measured = requests["measured"].as_array().unwrap();
    assert_eq!(measured[0][0], 1, "searched from the flag's count: {requests}");
    assert!(measured.len() >= 2, "more in flight measured: {requests}");
    let chosen = requests["chosen"].as_u64().unwrap();
    assert!(chosen > 1, "more requests in flight feed a latency-bound stream: {requests}");
    assert!(
        text.contains(&format!("--requests-in-flight {chosen}")),
        "the flags carry the count taken: {text}"
    );
    assert_eq!(tuned["stream_or_stage"]["requests_in_flight"], chosen, "{tuned}");
    assert_eq!(tuned["stream_or_stage"]["not_staged"], "--no-stage", "{tuned}");
    // Still waiting at the count taken: a worker waiting on the store holds no core, so more
    // workers than the one core allows the search are measured, and taken where they gain.
    let workers = requests["workers_measured"].as_array().unwrap_or_else(|| panic!("{tuned}"));
    assert!(workers.len() >= 2, "more workers measured: {requests}");
    let taken = requests["workers_chosen"].as_u64().unwrap();
    let first = workers[0][0].as_u64().unwrap();
    assert!(taken > first, "more workers feed a stream that waits on its store: {requests}");
    assert_eq!(tuned["answer"]["workers"], taken, "the answer is theirs: {tuned}");
    assert!(text.contains(&format!("--workers {taken} ")), "the flags carry them: {text}");
}

#[test]
fn a_second_run_takes_the_files_indexes_from_disk_and_a_changed_object_is_read_anew() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let served = www.join("pusht");
    common::synth_pusht(&served, 3, 20, &[]);
    let other = dir.path().join("other");
    common::synth_pusht(&other, 3, 20, &["--crf", "45"]);
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let root = format!("{}/pusht", nginx.origin);
    let env = [("FEEDBENCH_CACHE_DIR", dir.path().join("cache").display().to_string())];
    let sample = |root: &str, name: &str| {
        let out = dir.path().join(name);
        let args = ["sample", root, "--index", "37", "--window", "diffusion", "--out"];
        let (ok, _, err) = feedbench_with(&env, &[&args[..], &[out.to_str().unwrap()]].concat());
        assert!(ok, "sample of {root}: {err}");
        arrays(&out)
    };
    // The requests of one run: those the log gained.
    let run = |name: &str| {
        let before = nginx.requests().len();
        let read = sample(&root, name);
        (read, nginx.requests()[before..].to_vec())
    };
    let index_reads = |requests: &[String]| -> Vec<String> {
        let reads = requests.iter().filter(|r| r.starts_with("GET "));
        // An mp4's header from its start, a parquet file's footer from its end.
        let index = |r: &&String| {
            (r.contains(".mp4 ") && r.ends_with("bytes=0-65535"))
                || (r.contains(".parquet ") && !r.ends_with("-"))
        };
        reads.filter(index).cloned().collect()
    };

    let (first, first_requests) = run("first");
    assert!(!index_reads(&first_requests).is_empty(), "{first_requests:#?}");
    let (second, second_requests) = run("second");
    assert_eq!(second, first);
    assert_eq!(index_reads(&second_requests), Vec::<String>::new(), "fetched again");
    assert!(second_requests.len() < first_requests.len(), "{second_requests:#?}");

    // The video replaced by another encoding of the same frames (its samples elsewhere): the
    // object's new version is read with its own index, as the directory now holds it.
    let video = walk(&served).into_iter().find(|p| p.extension().is_some_and(|e| e == "mp4"));
    let video = video.unwrap();
    let relative = video.strip_prefix(&served).unwrap();
    std::fs::copy(other.join(relative), &video).unwrap();
    let (changed, _) = run("changed");
    assert_eq!(changed, sample(served.to_str().unwrap(), "changed-local"));
    assert_ne!(changed, first, "the test changed nothing");
}

#[test]
fn layout_and_guard_take_a_url_root_as_its_local_copy() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let local = www.join("frames");
    common::synth_pusht(&local, 3, 20, &["--storage", "png"]);
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let url = format!("{}/frames", nginx.origin);

    // A layout study of the URL reads the same source as one of the directory.
    let config = dir.path().join("layout.toml");
    std::fs::write(
        &config,
        "[base]\ncodec = \"av1\"\ngop = 2\ncrf = 30\n[axes]\ncrf = [30, 40]\n[measure]\n\
         window = \"none\"\nworkers = 0\nbatch = 4\nbatches = 3\nrepeats = 1\nquality_frames = 10\n",
    )
    .unwrap();
    let mut studies = Vec::new();
    for (root, name) in [(url.as_str(), "layout-url"), (local.to_str().unwrap(), "layout-local")] {
        let out = dir.path().join(name);
        let args = ["layout", root, "--config", config.to_str().unwrap()];
        let (ok, _, err) =
            common::feedbench(&[&args[..], &["--out", out.to_str().unwrap()]].concat());
        assert!(ok, "layout of {root}: {err}");
        let text = std::fs::read_to_string(out.join("layout.jsonl")).unwrap();
        let facts: Vec<_> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|c| {
                let keys = ["name", "frames", "source_bytes_per_frame", "png_bytes_per_frame"];
                keys.map(|k| c[k].clone())
            })
            .collect();
        studies.push(facts);
    }
    assert_eq!(studies[0].len(), 2, "{:?}", studies[0]);
    assert_eq!(studies[0], studies[1], "the URL's source differs from the directory's");

    // A guard's baseline saved on the directory holds for the URL: the same dataset (--strict
    // refuses another).
    let guard = |root: &str, name: &str| {
        let config = dir.path().join(format!("{name}.toml"));
        let text = format!(
            "[dataset]\npath = \"{root}\"\n[run]\nrepeats = 3\nbatches = 4\ntolerance = \"50%\"\n\
             [[cell]]\nname = \"inline\"\nworkers = 0\nbatch = 4\n"
        );
        std::fs::write(&config, text).unwrap();
        config
    };
    let baseline = dir.path().join("baseline.json");
    let local_config = guard(local.to_str().unwrap(), "guard-local");
    let save = ["guard", "--config", local_config.to_str().unwrap(), "--save-baseline"];
    let (ok, _, err) = common::feedbench(&[&save[..], &[baseline.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let url_config = guard(&url, "guard-url");
    let judge = ["guard", "--config", url_config.to_str().unwrap(), "--strict", "--json"];
    let mut command = Command::new(env!("CARGO_BIN_EXE_feedbench"));
    command.args(judge).arg("--baseline").arg(&baseline);
    let output = command.output().unwrap();
    let err = String::from_utf8_lossy(&output.stderr);
    assert_ne!(output.status.code(), Some(2), "the URL's dataset is another: {err}");
    assert!(!err.contains("the dataset changed"), "{err}");
}

#[test]
fn a_sweep_measures_every_root_of_a_dataset_and_sets_them_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let local = www.join("pusht");
    common::synth_pusht(&local, 2, 20, &[]);
    let Some(s3) = S3::start(dir.path()) else { return };
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let in_bucket = s3.upload("datasets", "pusht", &local);
    let on_web = format!("{}/pusht", nginx.origin);
    let config = dir.path().join("sweep.toml");
    std::fs::write(
        &config,
        format!(
            "[dataset]\npath = \"{}\"\nalso = [\"{in_bucket}\", \"{on_web}\"]\n[loader]\n\
             window = \"none\"\nworkers = [0, 1]\nbatch = [4]\n[model]\nmodel = [\"none\"]\n\
             [run]\nloader_batches = 4\nmodel_steps = 2\ntrain_steps = 4\nwarmup = 1\n",
            local.display()
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let sweep = ["sweep", "--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let (ok, text, err) = feedbench_with(&s3.env(), &sweep);
    assert!(ok, "{err}");
    let results = std::fs::read_to_string(out.join("results.jsonl")).unwrap();
    let datasets: std::collections::BTreeSet<String> = results
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["cell"]["dataset"].to_string()
        })
        .collect();
    assert_eq!(datasets.len(), 3, "a cell per root and knobs: {datasets:?}");
    // Each cell's roots side by side, the first held to itself, the URLs' store said.
    let table = text.split("Every root of the dataset, cell by cell:").nth(1).expect("the table");
    let lines: Vec<&str> = table.lines().skip(2).take(6).collect();
    assert!(lines[0].contains(local.to_str().unwrap()) && lines[0].contains(" 1.00 "), "{table}");
    assert!(lines[1].contains(&in_bucket) && lines[2].contains(&on_web), "{table}");
    for line in &lines[1..3] {
        assert!(line.ends_with("-bound"), "the store's verdict: {line}");
    }
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(markdown.contains("## Every root of the dataset"), "{markdown}");
    // A re-rendered report counts every root's cells as planned.
    let (ok, _, err) = feedbench_with(&s3.env(), &["report", out.to_str().unwrap()]);
    assert!(ok, "{err}");
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!page.contains("cells its sweep.toml plans are measured"), "read as cut short");
}

#[test]
fn a_small_parquet_file_is_read_in_a_request_or_two_not_one_per_column() {
    let dir = tempfile::tempdir().unwrap();
    let www = dir.path().join("www");
    let local = www.join("g1");
    // Twenty episodes of G1's many features: an episodes file of some 66 kB, a little more
    // than the 64 KiB fetched with a file's footer.
    let g1 = ["synth", "--preset", "g1", "--episodes", "20", "--frames-per-episode", "10"];
    let (ok, _, err) = common::feedbench(&[&g1[..], &["--out", local.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let episodes = "meta/episodes/chunk-000/file-000.parquet";
    let bytes = std::fs::metadata(local.join(episodes)).unwrap().len();
    assert!(bytes > 64 * 1024, "{episodes}: {bytes} bytes");
    let Some(nginx) = Nginx::start(&www, dir.path()) else { return };
    let root = format!("{}/g1", nginx.origin);
    let (ok, out, err) = common::feedbench(&["info", &root, "--json"]);
    assert!(ok, "{err}");
    let (_, local_out, _) = common::feedbench(&["info", local.to_str().unwrap(), "--json"]);
    let episodes_of =
        |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap()["episodes"].clone();
    assert_eq!(episodes_of(&out), episodes_of(&local_out), "the same episodes read");
    let gets: Vec<String> = nginx
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET ") && r.contains(episodes))
        .collect();
    // Its footer with its opening, then the rest once: a column chunk's reader takes what
    // another's read ahead (each fetched 64 KiB apart before, some 38 requests).
    assert!(!gets.is_empty() && gets.len() <= 2, "{gets:#?}");
}

#[test]
fn a_layout_candidate_in_a_bucket_or_on_a_web_server_is_read_over_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("source");
    common::synth_pusht(&local, 3, 16, &[]);
    let Some(s3) = S3::start(dir.path()) else { return };
    std::fs::create_dir_all(s3.data.join("cands")).unwrap();
    // The web server serves the study's directory: its candidates are under /candidates.
    let out = dir.path().join("study");
    std::fs::create_dir_all(&out).unwrap();
    let Some(nginx) = Nginx::start(&out, dir.path()) else { return };
    let config = |locations: &str| {
        let path = dir.path().join("layout.toml");
        let text = format!(
            "[axes]\nlocation = [{locations}]\n[measure]\nworkers = 1\nbatch = 4\nbatches = 2\n\
             repeats = 2\nquality_frames = 12\n[loss]\nbatches = 0\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let web = format!("{}/candidates", nginx.origin);
    let c = config(&format!("\"s3://cands/study\", \"{web}\""));
    let args = ["layout", local.to_str().unwrap(), "--config", c.to_str().unwrap()];
    let (ok, _, err) =
        feedbench_with(&s3.env(), &[&args[..], &["--out", out.to_str().unwrap()]].concat());
    assert!(ok, "{err}");
    let results = feedbench::bench::layout_study::read_results(&out.join("layout.jsonl")).unwrap();
    let find = |prefix: &str| {
        results.iter().find(|r| r.label.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix}"))
    };
    let (base, bucket, served) =
        (find("base"), find("location=s3://cands/study"), find(&format!("location={web}")));
    assert!(err.contains(&format!("placing at s3://cands/study/{}", bucket.name)), "{err}");
    // In the bucket, every file of the copy written; read from there, the same frames.
    let copy = out.join("candidates").join(&bucket.name);
    let placed = s3.data.join("cands/study").join(&bucket.name);
    for file in walk(&copy) {
        let within = file.strip_prefix(&copy).unwrap();
        assert_eq!(std::fs::read(placed.join(within)).unwrap(), std::fs::read(&file).unwrap());
    }
    for remote in [bucket, served] {
        assert_eq!(remote.quality, base.quality, "{}", remote.label);
        assert_eq!(remote.bytes_per_frame, base.bytes_per_frame);
        assert!(remote.cold_loader.is_none() && remote.vs_base.is_some(), "{remote:?}");
    }
    let requests = nginx.requests();
    let video = format!("/candidates/{}/videos/", served.name);
    assert!(requests.iter().any(|r| r.starts_with("GET ") && r.contains(&video)), "{requests:?}");

    // A web server that does not serve the study's candidates: refused, saying what it must.
    let elsewhere = dir.path().join("elsewhere");
    let c = config(&format!("\"{}/nothing\"", nginx.origin));
    let args = ["layout", local.to_str().unwrap(), "--config", c.to_str().unwrap()];
    let (ok, _, err) =
        feedbench_with(&s3.env(), &[&args[..], &["--out", elsewhere.to_str().unwrap()]].concat());
    assert!(!ok && err.contains("serves no copy of") && err.contains("takes no uploads"), "{err}");
}
