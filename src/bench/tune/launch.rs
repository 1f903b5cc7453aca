//! A lerobot-train run as its user launches it, given to `tune --lerobot-train`: the run's
//! arguments alone (`--policy.type=act …`), or the line that launches it, `[NAME=value …]
//! [accelerate launch [OPTIONS]] SCRIPT ARGS`, SCRIPT being lerobot-train or
//! feedbench-lerobot-train (`$(which lerobot-train)`, the command or a path to it, or
//! `-m lerobot.scripts.lerobot_train`). The run is measured as one rank, from ARGS; the line
//! says how many ranks share the box ([`Ranks`]), and the answer prints it back with its flags
//! set.

use super::accelerate::{AccelerateOptions, LineRanks};

/// The commands of lerobot-train's run with LeRobot's reader and with feedbench's.
const COMMANDS: [&str; 2] = ["lerobot-train", "feedbench-lerobot-train"];

/// Their modules, for accelerate's `-m`.
const MODULES: [&str; 2] = ["lerobot.scripts.lerobot_train", "feedbench.lerobot_train"];

/// What `--lerobot-train` takes, for an error.
const FORMS: &str = "expected lerobot-train's arguments (--name=value …), or the line that \
                     launches them: [accelerate launch [OPTIONS]] $(which lerobot-train) ARGS \
                     (or lerobot-train, a path to it, -m lerobot.scripts.lerobot_train, and \
                     feedbench-lerobot-train alike)";

/// How a launch line names its script.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Script {
    /// `$(which lerobot-train)`: the shell finds it.
    Which,
    /// The command, bare or after its directory (this directory, with its `/`).
    Path(String),
    /// The module, after accelerate's `-m`.
    Module,
}

/// A lerobot-train run's launch line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchLine {
    /// The words before the script, as written: `NAME=value` settings, `accelerate launch`
    /// and its options.
    before: Vec<String>,
    /// How the script is named.
    script: Script,
    /// Whether the script is feedbench-lerobot-train (feedbench's reader in the run).
    feedbench_reader: bool,
    /// The run's arguments.
    args: Vec<String>,
    /// accelerate's options, where the line launches through accelerate.
    accelerate: Option<AccelerateOptions>,
}

impl LaunchLine {
    /// Reads `--lerobot-train`'s text: None where it is the run's arguments alone (its first
    /// word a flag), else the line that launches them.
    pub fn parse(text: &str) -> Result<Option<Self>, String> {
        let words = shlex::split(text).ok_or_else(|| format!("{text:?}: unbalanced quotes"))?;
        let words = which_joined(words);
        if words.first().is_none_or(|w| w.starts_with('-')) {
            return Ok(None);
        }
        let mut at = words.iter().take_while(|w| is_setting(w)).count();
        let first = words.get(at).ok_or_else(|| format!("{text:?}: {FORMS}"))?;
        let launcher = match base_name(first) {
            "accelerate" if words.get(at + 1).is_some_and(|w| w == "launch") => 2,
            "accelerate-launch" => 1,
            "accelerate" => return Err(format!("{first} without launch: {FORMS}")),
            _ => 0,
        };
        at += launcher;
        let accelerate = match launcher {
            0 => None,
            _ => {
                let (options, taken) = AccelerateOptions::read(&words[at..])?;
                at += taken;
                Some(options)
            }
        };
        let module = accelerate.as_ref().is_some_and(|o| o.module);
        let word = words.get(at).ok_or_else(|| format!("{text:?} names no script: {FORMS}"))?;
        let (script, feedbench_reader) = script(word, module)?;
        Ok(Some(Self {
            before: words[..at].to_vec(),
            script,
            feedbench_reader,
            args: words[at + 1..].to_vec(),
            accelerate,
        }))
    }

    /// The run's arguments, as one text.
    pub fn args(&self) -> String {
        self.args.iter().map(|a| shell_word(a)).collect::<Vec<_>>().join(" ")
    }

    /// Whether the line runs feedbench-lerobot-train (feedbench's reader in the run).
    pub fn feedbench_reader(&self) -> bool {
        self.feedbench_reader
    }

    /// The line up to the run's arguments, as written, its script the run with feedbench's
    /// reader or LeRobot's (`$(which lerobot-train)` ↔ `$(which feedbench-lerobot-train)`).
    pub fn launcher(&self, feedbench_reader: bool) -> String {
        let reader = usize::from(feedbench_reader);
        let script = match &self.script {
            Script::Which => format!("$(which {})", COMMANDS[reader]),
            Script::Path(dir) => shell_word(&format!("{dir}{}", COMMANDS[reader])),
            Script::Module => MODULES[reader].to_string(),
        };
        // A setting's value quoted, where it needs it, after its `NAME=`.
        let settings = self.before.iter().take_while(|w| is_setting(w)).count();
        let before = self.before.iter().enumerate().map(|(at, w)| match w.split_once('=') {
            Some((name, value)) if at < settings => format!("{name}={}", shell_word(value)),
            _ => shell_word(w),
        });
        before.chain([script]).collect::<Vec<_>>().join(" ")
    }

    /// The ranks the line starts on this box: accelerate's count, or one without accelerate;
    /// `env` gives the environment, the line's own settings (`HF_HOME=… accelerate launch`)
    /// over it.
    fn ranks(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<LineRanks, String> {
        let Some(options) = &self.accelerate else {
            let from = "no accelerate launch on the line: one process".to_string();
            return Ok(LineRanks::Said { n: 1, from });
        };
        let settings = self.before.iter().take_while(|w| is_setting(w));
        let set = |name: &str| {
            let given =
                settings.clone().filter_map(|w| w.split_once('=')).filter(|(n, _)| *n == name);
            given.last().map(|(_, value)| value.to_string()).or_else(|| env(name))
        };
        options.ranks(&set)
    }
}

/// How many ranks share the box, and where that was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ranks {
    /// Ranks.
    pub n: usize,
    /// Where the count was read, or why it was assumed, where a launch line was given.
    pub from: Option<String>,
}

impl Ranks {
    /// The ranks of a tune: the launch line's, where it gives one, checked against
    /// `--processes` (`flag`); else the flag's, else 1. `env` gives the environment.
    pub fn of(
        line: Option<&LaunchLine>,
        flag: Option<usize>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let Some(line) = line else { return Ok(Self { n: flag.unwrap_or(1), from: None }) };
        let ranks = |n: usize, from: String| Self { n, from: Some(from) };
        Ok(match (line.ranks(env)?, flag) {
            (LineRanks::Said { n, from }, Some(m)) if m != n => {
                return Err(format!(
                    "--processes {m}, but the launch line starts {n} rank{} ({from}): give one \
                     count (without --processes, the line's)",
                    if n == 1 { "" } else { "s" }
                ))
            }
            (LineRanks::Said { n, from }, _) => ranks(n, from),
            (LineRanks::Machines { machines, from }, Some(m)) => ranks(
                m,
                format!(
                    "--processes {m}, this box's of the launch line's {machines} machines ({from})"
                ),
            ),
            (LineRanks::Machines { machines, from }, None) => {
                return Err(format!(
                    "the launch line spans {machines} machines ({from}): accelerate's \
                     num_processes counts the ranks of all of them, and tune answers for one \
                     box: give --processes N, the ranks on this box"
                ))
            }
            (LineRanks::PerGpu { why }, Some(m)) => {
                ranks(m, format!("--processes {m}; the launch line leaves it to accelerate: {why}"))
            }
            (LineRanks::PerGpu { why }, None) => ranks(
                1,
                format!(
                    "assumed: {why}, which tune does not count; add --num_processes N to the \
                     line, or give --processes N"
                ),
            ),
        })
    }
}

/// The script `word` names (`module`: after accelerate's `-m`), and whether it is
/// feedbench-lerobot-train.
fn script(word: &str, module: bool) -> Result<(Script, bool), String> {
    let modules = MODULES.iter().position(|m| *m == word);
    if module {
        let reader = modules.ok_or_else(|| {
            format!("-m {word}: expected the module {} or {}", MODULES[0], MODULES[1])
        })?;
        return Ok((Script::Module, reader == 1));
    }
    if modules.is_some() {
        return Err(format!("{word} is a module: accelerate launch runs it after -m"));
    }
    let which = word.strip_prefix("$(which ").and_then(|w| w.strip_suffix(')'));
    if let Some(reader) = which.and_then(|name| COMMANDS.iter().position(|c| *c == name.trim())) {
        return Ok((Script::Which, reader == 1));
    }
    let (dir, name) = word.split_at(word.rfind('/').map_or(0, |at| at + 1));
    match COMMANDS.iter().position(|c| *c == name) {
        Some(reader) => Ok((Script::Path(dir.to_string()), reader == 1)),
        None => Err(format!("{word:?}: {FORMS}")),
    }
}

/// The words with `$(which NAME)`, which splitting cuts in two, one word again.
fn which_joined(words: Vec<String>) -> Vec<String> {
    let mut joined: Vec<String> = Vec::with_capacity(words.len());
    for word in words {
        match joined.last_mut() {
            Some(last) if last == "$(which" && word.ends_with(')') => {
                *last = format!("$(which {word}");
            }
            _ => joined.push(word),
        }
    }
    joined
}

/// Whether `word` sets a variable for the command after it (`NAME=value`).
fn is_setting(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The last part of a path.
fn base_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// `word` as a shell reads it back: as it is where nothing in it is special to the shell (a
/// leading `~`, which the shell reads as home, kept), else quoted.
pub(super) fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c);
    let rest = word.strip_prefix('~').filter(|r| r.is_empty() || r.starts_with('/'));
    match rest.unwrap_or(word) {
        w if w.chars().all(safe) && !word.is_empty() => word.to_string(),
        _ => shlex::try_quote(word).map_or_else(|_| word.to_string(), |q| q.into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> LaunchLine {
        LaunchLine::parse(text).unwrap().expect("a launch line")
    }

    /// No environment: no default accelerate config is found.
    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_launch_line_gives_the_runs_arguments_and_keeps_the_rest_as_written() {
        assert_eq!(LaunchLine::parse("--policy.type=act --num_workers 8"), Ok(None));
        let l = line(
            "accelerate launch --multi_gpu --num_processes=2 $(which lerobot-train) \
             --policy.type=act --dataset.root='/data/my set'",
        );
        assert_eq!(l.args(), "--policy.type=act '--dataset.root=/data/my set'");
        assert!(!l.feedbench_reader());
        let launcher = "accelerate launch --multi_gpu --num_processes=2 $(which lerobot-train)";
        assert_eq!(l.launcher(false), launcher);
        assert_eq!(
            l.launcher(true),
            "accelerate launch --multi_gpu --num_processes=2 $(which feedbench-lerobot-train)"
        );
        // Every way of naming the script, and the other reader's the same way.
        for (text, own, other) in [
            ("lerobot-train --a=1", "lerobot-train", "feedbench-lerobot-train"),
            (
                "/venv/bin/accelerate launch ~/venv/bin/feedbench-lerobot-train --a=1",
                "/venv/bin/accelerate launch ~/venv/bin/feedbench-lerobot-train",
                "/venv/bin/accelerate launch ~/venv/bin/lerobot-train",
            ),
            (
                "accelerate-launch --config_file 'a b' -m lerobot.scripts.lerobot_train --a=1",
                "accelerate-launch --config_file 'a b' -m lerobot.scripts.lerobot_train",
                "accelerate-launch --config_file 'a b' -m feedbench.lerobot_train",
            ),
            (
                "A=1 HF_HOME='/h f' accelerate launch '$(which lerobot-train)' --a=1",
                "A=1 HF_HOME='/h f' accelerate launch $(which lerobot-train)",
                "A=1 HF_HOME='/h f' accelerate launch $(which feedbench-lerobot-train)",
            ),
        ] {
            let l = line(text);
            let reader = l.feedbench_reader();
            assert_eq!((l.launcher(reader).as_str(), l.args()), (own, "--a=1".to_string()));
            assert_eq!(l.launcher(!reader), other, "{text}");
        }
    }

    #[test]
    fn a_line_whose_script_is_not_the_run_is_refused_saying_what_is_taken() {
        for (text, said) in [
            (
                "torchrun --nproc_per_node 2 train.py --a=1",
                "\"torchrun\": expected lerobot-train's",
            ),
            ("accelerate launch --multi_gpu train.py --a=1", "\"train.py\": expected"),
            ("accelerate env", "accelerate without launch"),
            ("accelerate launch --num_processes 2", "names no script"),
            ("accelerate launch lerobot.scripts.lerobot_train --a=1", "runs it after -m"),
            ("accelerate launch -m lerobot-train --a=1", "-m lerobot-train: expected the module"),
            ("FOO=1", "expected lerobot-train's"),
            ("accelerate launch 'lerobot-train --a=1", "unbalanced quotes"),
        ] {
            let err = LaunchLine::parse(text).unwrap_err();
            assert!(err.contains(said), "{text}: {err}");
        }
    }

    #[test]
    fn the_ranks_are_the_lines_checked_against_processes() {
        let four = line("accelerate launch --num_processes 4 lerobot-train --a=1");
        let from = Some("--num_processes 4 on the launch line".to_string());
        let of = |l: &LaunchLine, flag| Ranks::of(Some(l), flag, &no_env);
        assert_eq!(of(&four, None), Ok(Ranks { n: 4, from: from.clone() }));
        assert_eq!(of(&four, Some(4)), Ok(Ranks { n: 4, from }));
        let err = of(&four, Some(2)).unwrap_err();
        assert!(err.contains("--processes 2, but the launch line starts 4 ranks"), "{err}");
        assert!(err.contains("--num_processes 4"), "names both: {err}");
        // Without accelerate, one process.
        let alone = line("lerobot-train --a=1");
        assert_eq!(of(&alone, None).map(|r| r.n), Ok(1));
        assert!(of(&alone, Some(2)).is_err());
        // Left to accelerate's count of GPUs: --processes, else 1, said to be assumed.
        let gpus = line("accelerate launch --multi_gpu lerobot-train --a=1");
        let assumed = of(&gpus, None).unwrap();
        assert_eq!(assumed.n, 1);
        assert!(assumed.from.unwrap().starts_with("assumed: accelerate launch with neither"));
        assert_eq!(of(&gpus, Some(8)).map(|r| r.n), Ok(8));
        // Several machines: this box's ranks only from --processes.
        let machines = line("accelerate launch --num_machines 2 --num_processes 16 lerobot-train");
        let err = of(&machines, None).unwrap_err();
        assert!(err.contains("spans 2 machines") && err.contains("give --processes N"), "{err}");
        assert_eq!(of(&machines, Some(8)).map(|r| r.n), Ok(8));
        // No line: the flag, else 1.
        assert_eq!(Ranks::of(None, Some(3), &no_env), Ok(Ranks { n: 3, from: None }));
        assert_eq!(Ranks::of(None, None, &no_env), Ok(Ranks { n: 1, from: None }));
    }

    #[test]
    fn the_lines_own_settings_place_accelerates_default_config() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("accelerate");
        std::fs::create_dir(&config).unwrap();
        std::fs::write(config.join("default_config.yaml"), "num_processes: 3\n").unwrap();
        let text =
            format!("HF_HOME={} accelerate launch lerobot-train --a=1", dir.path().display());
        let ranks = Ranks::of(Some(&line(&text)), None, &no_env).unwrap();
        assert_eq!(ranks.n, 3, "{ranks:?}");
    }

    #[test]
    fn a_word_is_quoted_only_where_the_shell_would_read_it_otherwise() {
        assert_eq!(shell_word("--policy.type=act"), "--policy.type=act");
        assert_eq!(shell_word("~/cfg.yaml"), "~/cfg.yaml");
        assert_eq!(shell_word("~"), "~");
        assert_eq!(shell_word("a~b"), "'a~b'");
        assert_eq!(shell_word("--x=[1,2]"), "'--x=[1,2]'");
        assert_eq!(shell_word(""), "''");
    }
}
