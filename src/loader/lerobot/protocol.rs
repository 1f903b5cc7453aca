//! What feedbench and its LeRobot driver say to each other, the Rust side of
//! `src/loader/lerobot/feedbench_driver/protocol.py`: a [`Request`] is one JSON object tagged by
//! its `command` (in a file named on the driver's command line, or one a line on its stdin in a
//! session (`super::session`)), one variant per command with only its fields, which the driver
//! declares again as one `TypedDict` per command and checks on arrival; the driver answers
//! with JSON lines on its stdout, each an [`Event`]: `ready` once it built what it measures
//! ([`Ready`]), `step` per measured batch where feedbench may stop it early ([`DriverStep`]),
//! `alive` while it works, and `result` ([`LerobotRun`], [`PolicySteps`], …) or `error`
//! ([`DriverError`]) last, each a `TypedDict` of the driver's too, which it checks as it says
//! it.

mod answer;
mod request;

pub use answer::{
    BuiltRun, DriverError, DriverStep, ErrorKind, Event, ItemDigests, LargestPart, LerobotRun,
    LerobotStepMs, LerobotStepRow, LerobotVersions, PolicyRows, PolicyStep, PolicySteps, Ready,
    RunBuilds, SamplerIndices, Startup, StepParts, WorkerStart,
};
pub use request::{
    BatchesRequest, CameraShape, DatasetRequest, DescribeRequest, DigestsRequest, LoadRequest,
    ModelRequest, Overrides, PolicyRequest, Reader, Request, RunRequest, SamplerRequest, Source,
    StepRequest, SESSION_ARGUMENT,
};

#[cfg(test)]
mod tests {
    use std::fmt::Debug;
    use std::io::Write;
    use std::path::{Path, PathBuf};
    use std::process::{Command as Process, Stdio};

    use serde::de::DeserializeOwned;
    use serde::Serialize;
    use serde_json::{json, Map, Value as Json};

    use super::*;
    use crate::loader::sampler::SamplerOrder;

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
                order: Some(vec![vec![3, 1], vec![0, 2]]),
            }),
            Request::Load(LoadRequest {
                source: Source::Run(run.clone()),
                batches: 5,
                warmup: 1,
                step: Some(StepRequest::Policy { policy: true }),
                stop_file: None,
                order: None,
            }),
            Request::Batches(BatchesRequest::Indices {
                dataset: dataset.clone(),
                index_batches: vec![vec![0, 1]],
                out: out.clone(),
            }),
            Request::Batches(BatchesRequest::First { run: run.clone(), count: 2, out }),
            Request::Digests(DigestsRequest {
                dataset: dataset.clone(),
                index_batches: vec![vec![0, 1]],
                keys: vec!["action".into(), "c".into()],
                cameras: vec!["c".into()],
            }),
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
                    Request::Digests(_) => "DigestsRequest",
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
            let error: DriverError = serde_json::from_value(message.clone()).unwrap();
            assert_eq!(error.kind, *kind, "{message}");
        }
    }

    /// An answer on its way: the line (its `event` set), the name of the driver's `TypedDict`
    /// it is, and a check that the line read back is the value it was made from.
    struct Crossing {
        said: Json,
        shape: &'static str,
        back: Box<dyn Fn(Json)>,
    }

    /// `answer` said as an `event`, the `TypedDict` `shape`.
    fn crossing<T>(event: Event, answer: T, shape: &'static str) -> Crossing
    where
        T: Serialize + DeserializeOwned + PartialEq + Debug + 'static,
    {
        let mut said = serde_json::to_value(&answer).unwrap();
        said["event"] = event.name().into();
        let back = Box::new(move |mut echo: Json| {
            assert_eq!(echo["event"], event.name(), "{echo}");
            echo.as_object_mut().unwrap().remove("event");
            let read: T = serde_json::from_value(echo).unwrap();
            assert_eq!(read, answer);
        });
        Crossing { said, shape, back }
    }

    /// A measured `load`: LeRobot's loader alone where `parts` is None, else a lerobot-train
    /// run's fed to its policy's step.
    fn loaded(parts: Option<StepParts>) -> LerobotRun {
        let stepped = parts.is_some();
        LerobotRun {
            batches: 2,
            samples: 16,
            bytes: 4096,
            wall_s: 0.25,
            batch_ms: vec![120.0, 130.0],
            wait_ms: vec![5.0, 6.0],
            h2d_ms: if stepped { vec![1.5, 1.25] } else { vec![] },
            main_cpu_s: 0.5,
            workers_cpu_s: 1.5,
            peak_memory_bytes: 1 << 30,
            memory: "pss".into(),
            observer_cpu_s: 0.01,
            first_batch_s: 2.5,
            epoch_position: vec![3, 4],
            modules_ms: if stepped {
                [("backbone".to_string(), json!([3.0, 4.0]))].into_iter().collect()
            } else {
                Map::new()
            },
            parts,
            peak_device_bytes: stepped.then_some(1 << 28),
            memory_samples: vec![(0.0, 1 << 29, vec![1 << 27], 1 << 28)],
            rank: 1,
            pid: 4242,
            episodes_per_batch: vec![3, 4],
            sampler_order: Some(SamplerOrder { batches_checked: 5, first_out_of_order: Some(2) }),
            startup: Some(Startup {
                start_method: "spawn".into(),
                pickled_bytes: Some(1 << 20),
                largest_part: Some(LargestPart { name: "meta".into(), bytes: 1 << 19 }),
                workers: vec![WorkerStart { worker: 0, started_s: Some(2.5), first_batch_s: None }],
                warning: None,
            }),
        }
    }

    /// One example of every answer: each request's `ready` and `result` (the match fails to
    /// compile when a request is added without its answers), and every other event's (likewise
    /// for an event).
    fn every_answer() -> Vec<Crossing> {
        let versions = |built: Option<BuiltRun>| LerobotVersions {
            lerobot: "0.6.0".into(),
            torch: "2.11.0".into(),
            python: "3.12.1".into(),
            executable: "/venv/bin/python".into(),
            video_backend: Some("torchcodec".into()),
            lerobot_train: built,
        };
        let built = BuiltRun {
            policy: "act".into(),
            device: "cpu".into(),
            num_frames: 400,
            num_episodes: 2,
            dataset: json!({"root": "/d", "episodes": null}),
            sampler: Some(json!({"drop_n_last_frames": 0, "seed": 1000})),
            dataloader: json!({"num_workers": 2, "batch_size": 8}),
            worker_prefetch_factor: Some(4),
            backend: Some(json!({"cudnn_benchmark": true, "matmul_tf32": true})),
        };
        let plain = || Ready { versions: versions(None), runs_built: None };
        let run = || Ready {
            versions: versions(Some(BuiltRun { sampler: None, ..built.clone() })),
            runs_built: Some(RunBuilds { runs: 1, seconds: 3.5 }),
        };
        let ready = |ready: Ready| crossing(Event::Ready, ready, "ReadyEvent");
        let result = |event| move |answer, shape| crossing(event, answer, shape);
        let done = || crossing(Event::Result, Map::new(), "DoneResult");
        let mut all = Vec::new();
        for (request, _) in every_request() {
            let said = match request {
                Request::Load(LoadRequest { source: Source::Dataset(_), .. }) => {
                    [ready(plain()), result(Event::Result)(loaded(None), "LoadResult")]
                }
                Request::Load(LoadRequest { source: Source::Run(_), .. }) => {
                    let parts = StepParts {
                        forward_ms: vec![40.0, 41.0],
                        backward_ms: vec![60.0, 61.0],
                        optimizer_ms: vec![5.0, 5.5],
                    };
                    [ready(run()), crossing(Event::Result, loaded(Some(parts)), "LoadResult")]
                }
                Request::Batches(BatchesRequest::Indices { .. }) => [ready(plain()), done()],
                Request::Batches(BatchesRequest::First { .. }) | Request::Describe(_) => {
                    [ready(run()), done()]
                }
                Request::Sampler(_) => {
                    let indices = SamplerIndices { indices: vec![4, 0, 7] };
                    [ready(plain()), crossing(Event::Result, indices, "IndicesResult")]
                }
                Request::Digests(_) => {
                    let digests =
                        ItemDigests { item_digests: vec![vec!["ab".into(), "cd".into()]] };
                    [ready(plain()), crossing(Event::Result, digests, "DigestsResult")]
                }
                Request::Model(ModelRequest::Policy { .. }) => {
                    let step = LerobotStepMs {
                        h2d_ms: 1.0,
                        forward_ms: 20.0,
                        backward_ms: 30.0,
                        optimizer_ms: 4.0,
                        step_ms: 55.0,
                    };
                    let row = LerobotStepRow {
                        batch: 8,
                        dtype: "bf16".into(),
                        threads: 4,
                        parameters: 1000,
                        peak_memory_bytes: None,
                        last_loss: 0.5,
                        per_step: vec![step],
                    };
                    let rows = PolicyRows { rows: vec![row] };
                    let ready = Ready {
                        versions: LerobotVersions { video_backend: None, ..versions(None) },
                        runs_built: None,
                    };
                    [
                        crossing(Event::Ready, ready, "ReadyEvent"),
                        crossing(Event::Result, rows, "RowsResult"),
                    ]
                }
                Request::Model(ModelRequest::Run { .. }) => {
                    let step = PolicyStep {
                        h2d_ms: 1.0,
                        forward_ms: 20.0,
                        backward_ms: 30.0,
                        optimizer_ms: 4.0,
                        update_ms: 54.0,
                    };
                    let steps = PolicySteps {
                        steps: vec![step],
                        parameters: 1000,
                        device: "cuda:0".into(),
                        batch: 8,
                        mixed_precision: "bf16".into(),
                        threads: 4,
                        loss: 0.25,
                        peak_device_bytes: Some(1 << 30),
                    };
                    [ready(run()), crossing(Event::Result, steps, "PolicyStepsResult")]
                }
            };
            all.extend(said);
        }
        for event in Event::ALL {
            match event {
                Event::Ready | Event::Result => {} // each request's, above
                Event::Step => {
                    let step = DriverStep { wait_ms: 1.0, h2d_ms: 0.0, whole_ms: 50.0 };
                    all.push(crossing(event, step, "StepEvent"));
                }
                Event::Alive => all.push(crossing(event, Map::new(), "AliveEvent")),
                Event::Error => all.extend(ErrorKind::ALL.map(|kind| {
                    let error = DriverError { kind, message: format!("a {kind:?} fault") };
                    crossing(event, error, "ErrorEvent")
                })),
            }
        }
        all
    }

    /// Every answer Rust reads is one the driver's own protocol module (as shipped in the
    /// binary, in the system's Python) says: it finds each the `TypedDict` it is, the
    /// `TypedDict`s it holds included, and what it said comes back to the same value.
    #[test]
    fn every_answer_crosses_between_the_two_protocol_modules() {
        let Some((python, prelude)) = python_with_the_driver() else { return };
        let script = format!(
            "{prelude}import json, sys, typing\n\
             from feedbench_driver import protocol\n\
             def nested(value, hint, path):\n\
             \x20   if typing.get_origin(hint) is typing.Union:\n\
             \x20       if value is None:\n\
             \x20           return\n\
             \x20       hint = [a for a in typing.get_args(hint) if a is not type(None)][0]\n\
             \x20   if typing.is_typeddict(hint):\n\
             \x20       shape, missing, unknown = protocol.shape_of(value, (hint,))\n\
             \x20       assert shape, f'{{path}}: missing {{missing}}, unknown {{unknown}}'\n\
             \x20       for key, inner in typing.get_type_hints(hint).items():\n\
             \x20           if key in value:\n\
             \x20               nested(value[key], inner, path + '.' + key)\n\
             \x20   elif typing.get_origin(hint) is list:\n\
             \x20       for item in value:\n\
             \x20           nested(item, typing.get_args(hint)[0], path + '[]')\n\
             for line in sys.stdin:\n\
             \x20   answer = json.loads(line)\n\
             \x20   try:\n\
             \x20       shape = protocol.check_answer(answer)\n\
             \x20       nested(answer, shape, shape.__name__)\n\
             \x20       shape = shape.__name__\n\
             \x20   except (TypeError, AssertionError) as refused:\n\
             \x20       shape = str(refused)\n\
             \x20   print(json.dumps({{'shape': shape, 'answer': answer}}))\n"
        );
        let answers = every_answer();
        let mut said: Vec<Json> = answers.iter().map(|a| a.said.clone()).collect();
        // A `result` without a key its shape requires, and an event of no shape.
        let mut lacking = answers.iter().find(|a| a.shape == "LoadResult").unwrap().said.clone();
        lacking.as_object_mut().unwrap().remove("wall_s");
        said.extend([lacking, json!({"event": "finished"})]);
        let lines = through(python, &script, &said);
        assert_eq!(lines.len(), said.len(), "{lines:?}");
        for (answer, echo) in answers.iter().zip(&lines) {
            assert_eq!(echo["shape"], answer.shape, "{echo}");
            assert_eq!(echo["answer"], answer.said);
            (answer.back)(echo["answer"].clone());
        }
        let refused = &lines[answers.len()..];
        let lacking = refused[0]["shape"].as_str().unwrap();
        assert!(lacking.contains("'result' answer is none of"), "{lacking}");
        assert!(lacking.contains("missing ['wall_s']"), "{lacking}");
        let unknown = refused[1]["shape"].as_str().unwrap();
        assert!(unknown.contains("'finished' answer is none of"), "{unknown}");
    }

    /// An answer without a key the driver always says is refused by name, where its value may
    /// be null too (serde alone would read it as None); one the driver says only at times is
    /// not.
    #[test]
    fn an_answer_without_a_required_key_is_refused_naming_it() {
        let whole = serde_json::to_value(loaded(None)).unwrap();
        for key in ["wall_s", "peak_device_bytes", "parts", "pid"] {
            let mut lacking = whole.clone();
            lacking.as_object_mut().unwrap().remove(key);
            let python = Path::new("/venv/bin/python");
            let error = super::super::driver::parse::<LerobotRun>(python, lacking).unwrap_err();
            let expected = format!(
                "/venv/bin/python: the driver's answer is not what this feedbench expects \
                 (missing field `{key}`)"
            );
            assert_eq!(error.to_string(), expected);
        }
        let versions = json!({"lerobot": "0.6.0", "torch": "2.11.0", "python": "3.12.1",
                              "executable": "/p", "video_backend": null});
        let ready: Ready = serde_json::from_value(versions.clone()).unwrap();
        assert_eq!((ready.versions.lerobot_train, ready.runs_built), (None, None));
        let mut lacking = versions;
        lacking.as_object_mut().unwrap().remove("video_backend");
        let error = serde_json::from_value::<Ready>(lacking).unwrap_err().to_string();
        assert!(error.contains("missing field `video_backend`"), "{error}");
    }

    /// What the Python `script` prints, a JSON line each, for `lines` on its stdin.
    fn through(python: &str, script: &str, lines: &[Json]) -> Vec<Json> {
        let mut child = Process::new(python)
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for line in lines {
            writeln!(stdin, "{line}").unwrap();
        }
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let said = String::from_utf8(output.stdout).unwrap();
        said.lines().map(|line| serde_json::from_str(line).unwrap()).collect()
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
