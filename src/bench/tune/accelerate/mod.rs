//! accelerate's side of a launch line (`accelerate launch [OPTIONS] SCRIPT ARGS`), read as
//! accelerate 1.x's `launch` reads it: which of its options take a value (so that the script
//! is found), and how many ranks it starts — `--num_processes`, else its config file's
//! `num_processes` (`--config_file`, else accelerate's default one where it exists).

mod config;

use std::path::PathBuf;

use self::config::Config;

/// accelerate launch's options that take no value, underscored (accelerate reads `--multi-gpu`
/// as `--multi_gpu`); every other option takes one.
const SWITCHES: [&str; 22] = [
    "cpu",
    "debug",
    "downcast_bf16",
    "dynamo_use_dynamic",
    "dynamo_use_fullgraph",
    "dynamo_use_regional_compilation",
    "enable_cpu_affinity",
    "fp8_use_autocast_during_eval",
    "help",
    "module",
    "multi_gpu",
    "no_python",
    "no_tpu_cluster",
    "quiet",
    "same_network",
    "tpu",
    "tpu_cluster",
    "tpu_use_sudo",
    "use_deepspeed",
    "use_fsdp",
    "use_megatron_lm",
    "use_parallelism_config",
];

/// The options of an accelerate launch line that decide its ranks; the last of each wins, as
/// in accelerate's parser.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccelerateOptions {
    /// `--num_processes`'s text.
    num_processes: Option<String>,
    /// `--num_machines`'s text.
    num_machines: Option<String>,
    /// `--config_file`'s path, as written.
    config_file: Option<String>,
    /// `--cpu`: accelerate's default config file is not read.
    cpu: bool,
    /// `-m`/`--module`: the script is a Python module.
    pub module: bool,
}

/// The ranks an accelerate launch line starts on this box, as accelerate decides them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineRanks {
    /// The line or its config file says how many.
    Said {
        /// Ranks.
        n: usize,
        /// Where that was read.
        from: String,
    },
    /// The ranks span several machines: accelerate's count is all of theirs, not this box's.
    Machines {
        /// Machines.
        machines: usize,
        /// Where that was read.
        from: String,
    },
    /// Neither says: accelerate starts one rank per GPU it sees.
    PerGpu {
        /// Why, naming the default config file it looked for.
        why: String,
    },
}

impl AccelerateOptions {
    /// The options at the start of `words` (the words after `accelerate launch`), and how many
    /// words they take: the next is the script.
    pub fn read(words: &[String]) -> Result<(Self, usize), String> {
        let mut options = Self::default();
        let mut at = 0;
        while let Some(word) = words.get(at).filter(|w| w.starts_with('-')) {
            at += 1;
            if word == "--" {
                break;
            }
            let (name, inline) = match word.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (word.as_str(), None),
            };
            let key = match name {
                "-m" => "module".to_string(),
                "-q" => "quiet".to_string(),
                "-h" => "help".to_string(),
                _ => name.trim_start_matches('-').replace('-', "_"),
            };
            if SWITCHES.contains(&key.as_str()) {
                if inline.is_some() {
                    return Err(format!("{word}: accelerate's {name} takes no value"));
                }
                options.cpu |= key == "cpu";
                options.module |= key == "module";
                continue;
            }
            let value = match inline {
                Some(value) => value,
                None => {
                    let value = words.get(at).ok_or_else(|| {
                        format!(
                            "accelerate's {name} ends the line: expected its value, then the \
                             script"
                        )
                    })?;
                    at += 1;
                    value.clone()
                }
            };
            match key.as_str() {
                "num_processes" => options.num_processes = Some(value),
                "num_machines" => options.num_machines = Some(value),
                "config_file" => options.config_file = Some(value),
                _ => {}
            }
        }
        Ok((options, at))
    }

    /// The ranks the line starts: its `--num_processes`, else its config file's (`--config_file`,
    /// else accelerate's default config where it exists and `--cpu` is not given), as accelerate
    /// reads them; `env` gives the environment (the default config's place, `~`).
    pub fn ranks(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<LineRanks, String> {
        let default = default_config_file(env);
        let config = match &self.config_file {
            Some(path) => Some(Config::read(&home(path, env), "the launch line's --config_file")?),
            None if !self.cpu && default.is_file() => {
                Some(Config::read(&default, "accelerate's default config")?)
            }
            None => None,
        };
        let machines = match (&self.num_machines, &config) {
            (Some(text), _) => {
                let from = format!("--num_machines {text} on the launch line");
                Some((count("--num_machines", text)?, from))
            }
            (None, Some(config)) => config.machines()?,
            (None, None) => None,
        };
        if let Some((machines, from)) = machines.filter(|(m, _)| *m > 1) {
            return Ok(LineRanks::Machines { machines, from });
        }
        if let Some(text) = &self.num_processes {
            let n = count("--num_processes", text)?;
            return Ok(LineRanks::Said {
                n,
                from: format!("--num_processes {text} on the launch line"),
            });
        }
        match config {
            Some(config) => config.processes().map(|(n, from)| LineRanks::Said { n, from }),
            None if self.cpu => {
                Ok(LineRanks::Said { n: 1, from: "--cpu without --num_processes".into() })
            }
            None => Ok(LineRanks::PerGpu {
                why: format!(
                    "accelerate launch with neither --num_processes nor --config_file, and no \
                     default config at {}, starts one rank per GPU it sees",
                    default.display()
                ),
            }),
        }
    }
}

/// `text` as a count of at least 1, for `flag`.
fn count(flag: &str, text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{flag} {text} on the launch line: expected a count of at least 1")),
    }
}

/// accelerate's default config file: `$HF_HOME/accelerate/default_config.yaml`, `HF_HOME`
/// being `$XDG_CACHE_HOME/huggingface` (`~/.cache/huggingface`) where unset.
fn default_config_file(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let hf_home = env("HF_HOME").unwrap_or_else(|| {
        let cache = env("XDG_CACHE_HOME").unwrap_or_else(|| "~/.cache".into());
        format!("{cache}/huggingface")
    });
    home(&hf_home, env).join("accelerate").join("default_config.yaml")
}

/// `path` with a leading `~` read as `$HOME`, as the shell reads it on the launch line.
fn home(path: &str, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match (path.strip_prefix('~'), env("HOME")) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            PathBuf::from(format!("{home}{rest}"))
        }
        _ => PathBuf::from(path),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn words(text: &str) -> Vec<String> {
        shlex::split(text).unwrap()
    }

    /// The options of `line` (the words after `accelerate launch`) and the word they end at.
    fn read(line: &str) -> (AccelerateOptions, String) {
        let words = words(line);
        let (options, at) = AccelerateOptions::read(&words).unwrap();
        (options, words[at].clone())
    }

    /// An environment of `vars` alone.
    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    /// `text` written to `dir/name`, as a path for `--config_file`.
    fn file(dir: &Path, name: &str, text: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    }

    #[test]
    fn the_script_is_the_first_word_no_option_takes() {
        // Switches take no value, every other option one, given either way.
        let (options, script) = read(
            "--multi_gpu --mixed_precision bf16 --num_processes 4 -m --gpu_ids=0,1 --debug \
             lerobot.scripts.lerobot_train --policy.type=act",
        );
        assert_eq!(script, "lerobot.scripts.lerobot_train");
        assert!(options.module && !options.cpu);
        assert_eq!(options.num_processes.as_deref(), Some("4"));
        // Hyphens read as underscores; the last of an option wins.
        let (options, script) =
            read("--num-processes=2 --cpu --num_processes=3 --config-file c.yaml x --a=1");
        assert_eq!((script.as_str(), options.num_processes.as_deref()), ("x", Some("3")));
        assert_eq!(options.config_file.as_deref(), Some("c.yaml"));
        assert!(options.cpu);
        // `--` ends the options.
        assert_eq!(read("--num_processes 2 -- --odd").1, "--odd");
        let err = AccelerateOptions::read(&words("--multi_gpu --num_processes")).unwrap_err();
        assert!(err.contains("--num_processes ends the line"), "{err}");
        let err = AccelerateOptions::read(&words("--multi_gpu=yes x")).unwrap_err();
        assert!(err.contains("--multi_gpu takes no value"), "{err}");
    }

    #[test]
    fn the_ranks_are_the_lines_then_its_config_files() {
        let dir = tempfile::tempdir().unwrap();
        let none = env(&[("HOME", "/nowhere")]);
        let ranks = |line: &str| read(line).0.ranks(&none);
        let yaml = file(
            dir.path(),
            "c.yaml",
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 8\n\
             num_machines: 1\ngpu_ids: all\nmixed_precision: 'no'\n",
        );
        let said = |n: usize, from: String| Ok(LineRanks::Said { n, from });
        let from_file = format!("num_processes: 8 in {yaml} (the launch line's --config_file)");
        assert_eq!(ranks(&format!("--config_file {yaml} x")), said(8, from_file));
        // The line's count over its file's.
        let line = "--num_processes 2 on the launch line".to_string();
        assert_eq!(ranks(&format!("--config_file={yaml} --num_processes 2 x")), said(2, line));
        let json =
            file(dir.path(), "c.json", r#"{"distributed_type": "MULTI_GPU", "num_processes": 3}"#);
        assert!(matches!(
            ranks(&format!("--config_file {json} x")),
            Ok(LineRanks::Said { n: 3, .. })
        ));
        // No count: one process where nothing is distributed, else accelerate refuses.
        let single = file(dir.path(), "one.yaml", "distributed_type: NO\n");
        assert!(matches!(
            ranks(&format!("--config_file {single} x")),
            Ok(LineRanks::Said { n: 1, .. })
        ));
        let multi = file(dir.path(), "multi.yaml", "distributed_type: MULTI_GPU\n");
        let err = ranks(&format!("--config_file {multi} x")).unwrap_err();
        assert!(err.contains("multi.yaml") && err.contains("no num_processes"), "{err}");
        // Several machines: accelerate's count is theirs, not this box's; the line's 1 wins.
        let two = file(
            dir.path(),
            "two.yaml",
            "distributed_type: MULTI_GPU\nnum_processes: 16\nnum_machines: 2\n",
        );
        let spans = ranks(&format!("--config_file {two} x")).unwrap();
        assert!(matches!(spans, LineRanks::Machines { machines: 2, .. }), "{spans:?}");
        let one = ranks(&format!("--config_file {two} --num_machines 1 x")).unwrap();
        assert!(matches!(one, LineRanks::Said { n: 16, .. }), "{one:?}");
    }

    #[test]
    fn a_count_that_is_not_one_is_refused_naming_its_flag_or_file() {
        let none = env(&[]);
        let err = read("--config_file /no/such.yaml x").0.ranks(&none).unwrap_err();
        assert!(err.starts_with("/no/such.yaml (the launch line's --config_file): "), "{err}");
        let err = read("--num_processes=two x").0.ranks(&none).unwrap_err();
        assert!(err.contains("--num_processes two on the launch line: expected a count"), "{err}");
        let err = read("--num_machines 0 x").0.ranks(&none).unwrap_err();
        assert!(err.contains("--num_machines 0 on the launch line: expected a count"), "{err}");
    }

    #[test]
    fn without_a_config_file_accelerate_reads_its_default_one() {
        let dir = tempfile::tempdir().unwrap();
        let hf_home = dir.path().join("hf");
        let hf = hf_home.to_str().unwrap();
        let at_hf = [("HF_HOME", hf), ("HOME", "/nowhere")];
        let ranks = |line: &str, vars: &[(&str, &str)]| read(line).0.ranks(&env(vars)).unwrap();
        // None there yet: one rank per GPU, said with the file looked for.
        let LineRanks::PerGpu { why } = ranks("x", &at_hf) else { panic!("no config") };
        assert!(why.contains(&format!("{hf}/accelerate/default_config.yaml")), "{why}");
        std::fs::create_dir_all(hf_home.join("accelerate")).unwrap();
        file(&hf_home.join("accelerate"), "default_config.yaml", "num_processes: 4\n");
        let LineRanks::Said { n: 4, from } = ranks("x", &at_hf) else { panic!("4 in the file") };
        assert!(from.ends_with("(accelerate's default config)"), "{from}");
        // Unset HF_HOME: $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
        let cache = dir.path().to_str().unwrap();
        std::fs::rename(&hf_home, dir.path().join("huggingface")).unwrap();
        assert!(matches!(ranks("x", &[("XDG_CACHE_HOME", cache)]), LineRanks::Said { n: 4, .. }));
        std::fs::create_dir(dir.path().join(".cache")).unwrap();
        std::fs::rename(dir.path().join("huggingface"), dir.path().join(".cache/huggingface"))
            .unwrap();
        assert!(matches!(ranks("x", &[("HOME", cache)]), LineRanks::Said { n: 4, .. }));
        // --cpu: the default config is not read.
        assert!(matches!(ranks("--cpu x", &[("HOME", cache)]), LineRanks::Said { n: 1, .. }));
        // --config_file's ~ is home, as the shell reads it.
        let home = [("HOME", cache)];
        let tilde =
            ranks("--config_file ~/.cache/huggingface/accelerate/default_config.yaml x", &home);
        assert!(matches!(tilde, LineRanks::Said { n: 4, .. }), "{tilde:?}");
    }
}
