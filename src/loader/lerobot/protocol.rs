//! What feedbench and its LeRobot driver say to each other, the Rust side of
//! `src/loader/lerobot/feedbench_driver/protocol.py`: a [`Request`] is one JSON object (in a file named on
//! the driver's command line, or one a line on its stdin in a session (`super::session`)); the
//! driver answers with JSON lines on its stdout, each an [`Event`]: `ready` once it built what
//! it measures ([`LerobotVersions`]), `step` per measured batch where feedbench may stop it
//! early ([`DriverStep`]), `alive` while it works, and `result` ([`LerobotRun`],
//! [`PolicySteps`], …) or `error` (an [`ErrorKind`] and a message) last. Every key a request
//! has is a field here; the driver reads them by these names.

mod answer;
mod request;

pub use answer::{
    BuiltRun, DriverStep, ErrorKind, Event, LerobotRun, LerobotVersions, PolicyStep, PolicySteps,
    StepParts,
};
pub use request::{
    Command, DatasetRequest, LoadSettings, Overrides, PolicyRequest, Reads, Request, RunRequest,
    StepRequest, SESSION_ARGUMENT,
};

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::process::{Command as Process, Stdio};

    use serde_json::Value as Json;

    use super::*;

    /// Every command (the match fails to compile when one is added and not listed).
    fn every_command() -> Vec<Command> {
        let all =
            [Command::Load, Command::Batches, Command::Sampler, Command::Model, Command::Describe];
        for command in all {
            match command {
                Command::Load
                | Command::Batches
                | Command::Sampler
                | Command::Model
                | Command::Describe => {}
            }
        }
        all.to_vec()
    }

    /// The driver's own protocol module (as shipped in the binary, in the system's Python)
    /// reads every request kind Rust writes, and every error kind it says reaches Rust as that
    /// kind: the two sides' lists are the same.
    #[test]
    fn every_request_and_error_kind_crosses_between_the_two_protocol_modules() {
        let Ok(python) = which_python() else {
            eprintln!("SKIPPED: no python3 on PATH");
            return;
        };
        let package = super::super::driver::driver_path().unwrap();
        let script = format!(
            "import json, sys\n\
             sys.path.insert(0, {dir:?})\n\
             from feedbench_driver import protocol\n\
             for request in protocol.requests([{session:?}]):\n\
             \x20   print(json.dumps({{'command': request['command'], \
             'known': request['command'] in protocol.COMMANDS, 'keys': sorted(request)}}))\n\
             for kind in protocol.ErrorKind:\n\
             \x20   protocol.say_error(kind, 'a ' + kind.value + ' fault')\n",
            dir = package.parent().unwrap().to_str().unwrap(),
            session = SESSION_ARGUMENT,
        );
        let mut child = Process::new(python)
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let run = RunRequest {
            lerobot_train: vec!["--dataset.root=/d".into()],
            overrides: Overrides([("num_workers", 2.into())].into()),
            reader: "feedbench",
        };
        let commands = every_command();
        let mut stdin = child.stdin.take().unwrap();
        for command in &commands {
            let request = Request::new(*command, Reads::Run(run.clone()));
            writeln!(stdin, "{}", serde_json::to_string(&request).unwrap()).unwrap();
        }
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let lines: Vec<Json> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        let (read, said) = lines.split_at(commands.len());
        for (command, echo) in commands.iter().zip(read) {
            assert_eq!(echo["command"], serde_json::to_value(command).unwrap(), "{echo}");
            assert_eq!(echo["known"], true, "the driver does not know {command:?}: {echo}");
            assert!(echo["keys"].as_array().unwrap().iter().any(|k| k == "overrides"), "{echo}");
        }
        assert_eq!(said.len(), ErrorKind::ALL.len(), "the driver's error kinds: {said:?}");
        for (kind, message) in ErrorKind::ALL.iter().zip(said) {
            assert_eq!(Event::of(message), Some(Event::Error), "{message}");
            assert_eq!(ErrorKind::of(message), *kind, "{message}");
            assert_eq!(message["kind"], kind.name(), "{message}");
        }
    }

    fn which_python() -> std::io::Result<&'static str> {
        Process::new("python3").arg("--version").output().map(|_| "python3")
    }
}
