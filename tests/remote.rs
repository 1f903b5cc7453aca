//! Roots that are URLs: a dataset in a bucket of a real S3-compatible server (s3s-fs) and on a
//! real web server (nginx), both on loopback, read as its local copy reads, and every fault
//! one clear error naming the URL.

use std::path::{Path, PathBuf};
use std::process::Command;

use feedbench::dataset::remote::register_storage_options;
use feedbench::dataset::video::{DecodeOptions, VideoDecoder};
use feedbench::dataset::{Dataset, WindowSpec};

use crate::common::servers::{free_port, Nginx, S3};
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
