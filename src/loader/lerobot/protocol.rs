//! What feedbench and its LeRobot driver say to each other, the Rust side of
//! `src/loader/lerobot/feedbench_driver/protocol.py`: a [`Request`] is one JSON object tagged by
//! its `command` (in a file named on the driver's command line, or one a line on its stdin in a
//! session (`super::session`)), one variant per command with only its fields, which the driver
//! declares again as one `TypedDict` per command and checks on arrival; the driver answers
//! with JSON lines on its stdout, each an [`Event`]: `ready` once it built what it measures
//! ([`LerobotVersions`]), `step` per measured batch where feedbench may stop it early
//! ([`DriverStep`]), `alive` while it works, and `result` ([`LerobotRun`], [`PolicySteps`], …)
//! or `error` (an [`ErrorKind`] and a message) last.

mod answer;
mod request;

pub use answer::{
    BuiltRun, DriverStep, ErrorKind, Event, LerobotRun, LerobotVersions, PolicyStep, PolicySteps,
    StepParts,
};
pub use request::{
    BatchesRequest, CameraShape, DatasetRequest, DescribeRequest, LoadRequest, ModelRequest,
    Overrides, PolicyRequest, Reader, Request, RunRequest, SamplerRequest, Source, StepRequest,
    SESSION_ARGUMENT,
};

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::PathBuf;
    use std::process::{Command as Process, Stdio};

    use serde_json::{json, Value as Json};

    use super::*;

    /// One example of every request, each with the name of the driver's `TypedDict` it is
    /// (the match fails to compile when a variant is added and not listed).
    fn every_request() -> Vec<(Request, &'static str)> {
        let run = RunRequest {
            lerobot_train: vec!["--dataset.root=/d".into(), "--policy.type=act".into()],
            overrides: Overrides([("num_workers".to_string(), 2.into())].into()),
            reader: Reader::Feedbench,
            ranks: 2,
        };
        let dataset = DatasetRequest {
            root: "/d".into(),
            episodes: Some(vec![0, 2]),
            delta_timestamps: [("action".to_string(), vec![0.0, 0.1])].into(),
            drop_n_last_frames: 7,
            sampler: "episode-aware".into(),
            seed: 3,
            dataloader: [("num_workers".to_string(), json!(2))].into(),
            uint8: true,
            video_backend: None,
        };
        let policy = PolicyRequest {
            config: json!({"horizon": 16}),
            cameras: vec![CameraShape { key: "c".into(), channels: 3, height: 96, width: 96 }],
            state_dim: 2,
            action_dim: 2,
            batch_sizes: vec![8],
            dtypes: vec!["f32".into()],
            images: "u8".into(),
            device: "cpu".into(),
            seed: 1,
            threads: None,
        };
        let out = PathBuf::from("/out");
        let fixed = StepRequest::Fixed {
            compute_ms: 40.5,
            device: "cpu".into(),
            sequence_ms: Some(vec![300.0, 1.0]),
        };
        let all = vec![
            Request::Load(LoadRequest {
                source: Source::Dataset(dataset.clone()),
                batches: 5,
                warmup: 1,
                step: Some(fixed),
                stop_file: Some("/tmp/stop".into()),
            }),
            Request::Load(LoadRequest {
                source: Source::Run(run.clone()),
                batches: 5,
                warmup: 1,
                step: Some(StepRequest::Policy { policy: true }),
                stop_file: None,
            }),
            Request::Batches(BatchesRequest::Indices {
                dataset: dataset.clone(),
                index_batches: vec![vec![0, 1]],
                out: out.clone(),
            }),
            Request::Batches(BatchesRequest::First { run: run.clone(), count: 2, out }),
            Request::Sampler(SamplerRequest { dataset, shuffle: true }),
            Request::Model(ModelRequest::Policy { policy, steps: 3, warmup: 1 }),
            Request::Model(ModelRequest::Run { run: run.clone(), steps: 3, warmup: 1 }),
            Request::Describe(DescribeRequest { run }),
        ];
        all.into_iter()
            .map(|request| {
                let shape = match &request {
                    Request::Load(LoadRequest { source: Source::Dataset(_), .. }) => {
                        "LoadDatasetRequest"
                    }
                    Request::Load(LoadRequest { source: Source::Run(_), .. }) => "LoadRunRequest",
                    Request::Batches(BatchesRequest::Indices { .. }) => "BatchesDatasetRequest",
                    Request::Batches(BatchesRequest::First { .. }) => "BatchesRunRequest",
                    Request::Sampler(_) => "SamplerRequest",
                    Request::Model(ModelRequest::Policy { .. }) => "ModelPolicyRequest",
                    Request::Model(ModelRequest::Run { .. }) => "ModelRunRequest",
                    Request::Describe(_) => "DescribeRequest",
                };
                (request, shape)
            })
            .collect()
    }

    /// The driver's own protocol module (as shipped in the binary, in the system's Python)
    /// reads every request Rust writes as the `TypedDict` of its variant, and what it read comes
    /// back to the same `Request`; every error kind it says reaches Rust as that kind; and a
    /// request of no shape is refused by name.
    #[test]
    fn every_request_and_error_kind_crosses_between_the_two_protocol_modules() {
        let Some((python, prelude)) = python_with_the_driver() else { return };
        let script = format!(
            "{prelude}import json\n\
             from feedbench_driver import protocol\n\
             for request in protocol.requests([{session:?}]):\n\
             \x20   try:\n\
             \x20       shape = protocol.check_request(request).__name__\n\
             \x20   except protocol.Refused as refused:\n\
             \x20       shape = refused.kind.value + ': ' + str(refused)\n\
             \x20   print(json.dumps({{'shape': shape, 'request': request}}))\n\
             for kind in protocol.ErrorKind:\n\
             \x20   protocol.say_error(kind, 'a ' + kind.value + ' fault')\n",
            session = SESSION_ARGUMENT,
        );
        let mut child = Process::new(python)
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let requests = every_request();
        let mut stdin = child.stdin.take().unwrap();
        for (request, _) in &requests {
            writeln!(stdin, "{}", serde_json::to_string(request).unwrap()).unwrap();
        }
        // A `describe` with a key no shape has, and one without its run.
        let mut stray = serde_json::to_value(&requests.last().unwrap().0).unwrap();
        stray["index_batches"] = json!([[0]]);
        writeln!(stdin, "{stray}").unwrap();
        writeln!(stdin, "{}", json!({"command": "describe"})).unwrap();
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let lines: Vec<Json> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let (read, rest) = lines.split_at(requests.len());
        for ((request, shape), echo) in requests.iter().zip(read) {
            assert_eq!(echo["shape"], *shape, "{echo}");
            assert_eq!(echo["request"], serde_json::to_value(request).unwrap());
            let back: Request = serde_json::from_value(echo["request"].clone()).unwrap();
            assert_eq!(back, *request, "{echo}");
        }
        let (refused, said) = rest.split_at(2);
        let unknown = refused[0]["shape"].as_str().unwrap();
        assert!(unknown.starts_with("version: a 'describe' request"), "{unknown}");
        assert!(unknown.contains("unknown ['index_batches']"), "{unknown}");
        let missing = refused[1]["shape"].as_str().unwrap();
        let keys = "['lerobot_train', 'overrides', 'ranks', 'reader']";
        assert!(missing.contains(&format!("missing {keys}")), "{missing}");
        assert_eq!(said.len(), ErrorKind::ALL.len(), "the driver's error kinds: {said:?}");
        for (kind, message) in ErrorKind::ALL.iter().zip(said) {
            assert_eq!(Event::of(message), Some(Event::Error), "{message}");
            assert_eq!(ErrorKind::of(message), *kind, "{message}");
            assert_eq!(message["kind"], kind.name(), "{message}");
        }
    }

    /// An error raised from another says both in its one line (PyTorch re-raises a SIGKILLed
    /// worker's "is killed by signal" as "exited unexpectedly"); one without a cause says itself.
    #[test]
    fn an_error_raised_from_another_says_both_in_its_one_line() {
        let Some((python, prelude)) = python_with_the_driver() else { return };
        let script = format!(
            "{prelude}from feedbench_driver.__main__ import one_line\n\
             try:\n\
             \x20   try:\n\
             \x20       raise RuntimeError('DataLoader worker (pid 7) is killed by signal: Killed.')\n\
             \x20   except RuntimeError as killed:\n\
             \x20       raise RuntimeError('DataLoader worker (pid(s) 7) exited unexpectedly') from killed\n\
             except RuntimeError as error:\n\
             \x20   print(one_line(error))\n\
             print(one_line(ValueError('no cause')))\n"
        );
        let output = Process::new(python).args(["-c", &script]).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let said = String::from_utf8(output.stdout).unwrap();
        let lines: Vec<&str> = said.lines().collect();
        assert_eq!(
            lines,
            [
                "RuntimeError: DataLoader worker (pid(s) 7) exited unexpectedly (RuntimeError: \
                 DataLoader worker (pid 7) is killed by signal: Killed.)",
                "ValueError: no cause",
            ]
        );
    }

    /// The system's Python and a script's first lines, which put the driver package as the
    /// binary ships it on the path; None (said) where there is no python3 on PATH.
    fn python_with_the_driver() -> Option<(&'static str, String)> {
        if Process::new("python3").arg("--version").output().is_err() {
            eprintln!("SKIPPED: no python3 on PATH");
            return None;
        }
        let package = super::super::driver::driver_path().unwrap();
        let dir = package.parent().unwrap().to_str().unwrap().to_string();
        Some(("python3", format!("import sys\nsys.path.insert(0, {dir:?})\n")))
    }
}
