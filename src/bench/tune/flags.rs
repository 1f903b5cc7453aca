//! The flags tune's answer prints to paste: feedbench's loader flags (every knob tune held
//! fixed, from the loader's table), or `lerobot-train`'s, which change its defaults only where
//! a measurement says so.

use super::answer::{Answer, LEROBOT_PREFETCH_FACTOR};
use super::launch::shell_word;
use crate::loader::config::LoaderConfig;
use crate::loader::knobs::{FlagForm, LoaderBackend, LoaderKnob};

/// The command-line flags that give `config`: `shown` always, then every other knob off its
/// default, in the table's order (`--workers 2 --prefetch 2 --batch 16 --uint8`).
fn command_line(config: &LoaderConfig, shown: &[LoaderKnob]) -> String {
    let flags = LoaderKnob::ALL.iter().filter(|k| shown.contains(k) || k.is_set(config));
    let flag = |k: &LoaderKnob| match k.form {
        FlagForm::Value(_) => format!("--{} {}", k.flag, k.get(config)),
        FlagForm::Switch(_) => format!("--{}", k.flag),
    };
    flags.map(flag).collect::<Vec<_>>().join(" ")
}

impl Answer {
    /// The flags to paste: feedbench's loader flags, or `lerobot-train`'s (`--prefetch_factor`
    /// only where its default was measured and lost).
    pub fn flags(&self) -> String {
        let k = &self.knobs;
        if k.loader.is_native() {
            let config =
                LoaderConfig { workers: self.workers, prefetch: self.prefetch, ..k.config.clone() };
            let shown = [LoaderKnob::WORKERS, LoaderKnob::PREFETCH, LoaderKnob::BATCH];
            command_line(&config, &shown)
        } else {
            let batch = k.config.batch_size;
            let mut flags =
                vec![("num_workers", self.workers.to_string()), ("batch_size", batch.to_string())];
            if self.workers > 0
                && self.prefetch != LEROBOT_PREFETCH_FACTOR
                && self.default_prefetch_lost
            {
                flags.push(("prefetch_factor", self.prefetch.to_string()));
            }
            match &k.lerobot_train {
                Some(args) => {
                    let command = match k.loader {
                        LoaderBackend::FeedbenchLerobotTrain => "feedbench-lerobot-train",
                        _ => "lerobot-train",
                    };
                    // The user's own launch line, else, for N ranks, the run launched as
                    // LeRobot's docs launch it on several GPUs.
                    let launch = match (&k.launcher, k.processes) {
                        (Some(line), _) => line.clone(),
                        (None, 1) => command.to_string(),
                        (None, n) => format!(
                            "accelerate launch --multi_gpu --num_processes={n} $(which {command})"
                        ),
                    };
                    own_command(&launch, args, &flags)
                }
                None => {
                    flags.iter().map(|(k, v)| format!("--{k}={v}")).collect::<Vec<_>>().join(" ")
                }
            }
        }
    }
}

/// The user's own `lerobot-train ARGS` (or `command`'s: `feedbench-lerobot-train`, their
/// launch line), their arguments unchanged but `flags`, each given where it was (`--name=value`
/// or `--name value`) or added at the end.
fn own_command(command: &str, args: &str, flags: &[(&str, String)]) -> String {
    let mut args = shlex::split(args).unwrap_or_default();
    for (name, value) in flags {
        let flag = format!("--{name}");
        let given = args.iter().position(|a| *a == flag || a.starts_with(&format!("{flag}=")));
        match given {
            Some(at) if args[at] == flag && at + 1 < args.len() => args[at + 1] = value.clone(),
            Some(at) => args[at] = format!("{flag}={value}"),
            None => args.push(format!("{flag}={value}")),
        }
    }
    // Quoted where a shell would read it otherwise (a space, `[32,64]`'s brackets).
    let quoted: Vec<String> = args.iter().map(|a| shell_word(a)).collect();
    format!("{command} {}", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::tune::answer::tests::{knobs, rows_with, state};
    use crate::bench::tune::answer::{answer, AnswerKnobs};
    use crate::loader::lerobot::LoaderBackend;

    #[test]
    fn lerobot_trains_prefetch_is_lowered_only_where_its_default_was_measured_and_lost() {
        let s = state(200.0, 2);
        let lerobot = || knobs(LoaderBackend::Lerobot);
        // Only depth 2 measured: lerobot-train's 4 is left as it is.
        let rows = rows_with(80.0, |_| {});
        let a = answer(&rows, &s, lerobot()).unwrap();
        assert_eq!((a.prefetch, a.flags().as_str()), (2, "--num_workers=1 --batch_size=16"));
        // Depth 4 measured beside 2 at each worker count, 10 % slower: 2 is set.
        let mut both = rows_with(80.0, |_| {});
        both.extend(rows_with(80.0, |c| {
            c.cell.knobs.prefetch = 4;
            c.train_samples_per_s *= 0.9;
        }));
        let a = answer(&both, &s, lerobot()).unwrap();
        assert!(a.default_prefetch_lost);
        assert_eq!(a.flags(), "--num_workers=1 --batch_size=16 --prefetch_factor=2");
        // As good within the tolerance: the default stays.
        let mut even = rows_with(80.0, |_| {});
        even.extend(rows_with(80.0, |c| c.cell.knobs.prefetch = 4));
        let a = answer(&even, &s, lerobot()).unwrap();
        assert_eq!(a.flags(), "--num_workers=1 --batch_size=16");
        // feedbench's flags always carry the depth.
        let native = answer(&rows, &s, knobs(LoaderBackend::Native)).unwrap();
        assert_eq!(native.flags(), "--workers 1 --prefetch 2 --batch 16");
    }

    #[test]
    fn a_launch_line_is_printed_back_as_written_with_its_flags_set() {
        let (s, rows) = (state(200.0, 2), rows_with(80.0, |_| {}));
        let from = "num_processes: 4 in c.yaml (the launch line's --config_file)";
        let launched = AnswerKnobs {
            lerobot_train: Some("--policy.type=act --num_workers 8".into()),
            processes: 4,
            processes_from: Some(from.into()),
            launcher: Some("accelerate launch --config_file c.yaml $(which lerobot-train)".into()),
            ..knobs(LoaderBackend::LerobotTrain)
        };
        let a = answer(&rows, &s, launched.clone()).unwrap();
        assert_eq!(
            a.flags(),
            "accelerate launch --config_file c.yaml $(which lerobot-train) --policy.type=act \
             --num_workers 1 --batch_size=16"
        );
        assert!(a.to_string().contains(&format!("\nRanks: 4 ({from}).\n")), "{a}");
        // Without a line, the ranks launched as LeRobot's docs launch them, nothing said.
        let plain = AnswerKnobs { launcher: None, processes_from: None, ..launched };
        let a = answer(&rows, &s, plain).unwrap();
        assert!(
            a.flags().starts_with(
                "accelerate launch --multi_gpu --num_processes=4 $(which lerobot-train) \
                 --policy.type=act"
            ),
            "{}",
            a.flags()
        );
        assert!(!a.to_string().contains("Ranks:"), "{a}");
    }

    #[test]
    fn a_command_line_gives_every_knob_off_its_default() {
        let mut config = LoaderConfig::default();
        let shown = [LoaderKnob::WORKERS, LoaderKnob::BATCH];
        assert_eq!(command_line(&config, &shown), "--workers 4 --batch 8");
        for (knob, text) in [(&LoaderKnob::IMAGES, "u8"), (&LoaderKnob::DECODER_THREADS, "2")] {
            knob.set(&mut config, text).unwrap();
        }
        LoaderKnob::DROP_N_LAST_FRAMES.set(&mut config, "3").unwrap();
        assert_eq!(
            command_line(&config, &shown),
            "--workers 4 --batch 8 --uint8 --decoder-threads 2 --drop-n-last-frames 3"
        );
    }

    #[test]
    fn a_lerobot_train_answer_is_the_users_own_command_with_its_workers_set() {
        let flags = [("num_workers", "3".to_string()), ("batch_size", "64".to_string())];
        let given = "--policy.type=act --num_workers 8 --dataset.root='/data/my set' \
                     --policy.down_dims=[32,64]";
        assert_eq!(
            own_command("lerobot-train", given, &flags),
            "lerobot-train --policy.type=act --num_workers 3 '--dataset.root=/data/my set' \
             '--policy.down_dims=[32,64]' --batch_size=64"
        );
        let equals = own_command("lerobot-train", "--num_workers=8 --batch_size=64", &flags);
        assert_eq!(equals, "lerobot-train --num_workers=3 --batch_size=64");
    }
}
