//! The loader's knobs as command-line flags, made from the loader's one table
//! ([`LoaderKnob::ALL`]): each knob's flag, value name, help and default come from there, and
//! its value is checked there as clap reads it, so an error names the flag
//! (`invalid value '0' for '--batch <N>': 0: expected at least 1`).

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use feedbench::loader::config::LoaderConfig;
use feedbench::loader::knobs::{FlagForm, LoaderKnob, Reach};

/// The loader knobs given on the command line, each with its text.
#[derive(Debug, Clone, Default)]
pub struct KnobFlags {
    given: Vec<(&'static LoaderKnob, String)>,
}

impl KnobFlags {
    /// The knobs given, first in the table's order.
    pub fn knobs(&self) -> impl Iterator<Item = &'static LoaderKnob> + '_ {
        self.given.iter().map(|(k, _)| *k)
    }

    /// `base` with every given knob set (each was checked as it was read).
    pub fn applied_to(&self, mut base: LoaderConfig) -> LoaderConfig {
        for (knob, text) in &self.given {
            knob.set(&mut base, text).expect("checked when the flag was read");
        }
        base
    }
}

/// The help line of `knob`, said to be for `--loader lerobot` where only LeRobot's has it.
fn help(knob: &LoaderKnob) -> String {
    match knob.reach {
        Reach::Lerobot(_) => format!("With --loader lerobot: {}", knob.help),
        Reach::Both | Reach::Native(_) => knob.help.to_string(),
    }
}

/// The clap argument of `knob`.
fn argument(knob: &'static LoaderKnob) -> Arg {
    let arg = Arg::new(knob.key).long(knob.flag);
    match knob.form {
        FlagForm::Switch(_) => arg.action(ArgAction::SetTrue).help(help(knob)),
        FlagForm::Value(name) => {
            let help = format!("{} [default: {}]", help(knob), knob.default_said());
            // A negative count reaches the knob's check, which names what it expects.
            arg.value_name(name).help(help).allow_negative_numbers(true).value_parser(
                move |text: &str| {
                    knob.set(&mut LoaderConfig::default(), text).map(|()| text.to_string())
                },
            )
        }
    }
}

impl Args for KnobFlags {
    fn augment_args(command: Command) -> Command {
        LoaderKnob::ALL.iter().fold(command, |command, knob| command.arg(argument(knob)))
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

impl FromArgMatches for KnobFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let given = LoaderKnob::ALL
            .iter()
            .filter_map(|knob| match knob.form {
                FlagForm::Switch(value) => {
                    matches.get_flag(knob.key).then(|| (knob, value.to_string()))
                }
                FlagForm::Value(_) => {
                    matches.get_one::<String>(knob.key).map(|text| (knob, text.clone()))
                }
            })
            .collect();
        Ok(Self { given })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// How the command line names a loader knob: its flag (`--uint8` for `images`).
pub fn flag_of(key: &str) -> Option<String> {
    LoaderKnob::by_key(key).map(|knob| format!("--{}", knob.flag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        knobs: KnobFlags,
    }

    fn parse(args: &[&str]) -> Result<KnobFlags, String> {
        use clap::Parser;
        Line::try_parse_from([&["x"], args].concat()).map(|l| l.knobs).map_err(|e| e.to_string())
    }

    #[test]
    fn help_says_each_default_from_the_table() {
        let help: Vec<String> = LoaderKnob::ALL
            .iter()
            .filter(|k| matches!(k.form, FlagForm::Value(_)))
            .map(|k| argument(k).get_help().unwrap().to_string())
            .collect();
        // No row writes its default into its help: each is said from the table.
        assert!(LoaderKnob::ALL.iter().all(|k| !k.help.contains("[default")));
        assert!(help.iter().all(|h| h.matches("[default: ").count() == 1), "{help:#?}");
        let workers = argument(&LoaderKnob::WORKERS).get_help().unwrap().to_string();
        assert_eq!(
            workers,
            "Worker threads (0: load in the consuming thread) [default: 4, LeRobot's]"
        );
    }

    #[test]
    fn flags_set_the_knobs_and_bad_values_name_the_flag() {
        let flags = parse(&["--batch", "64", "--uint8", "--drop-n-last-frames", "3"]).unwrap();
        let config = flags.applied_to(LoaderConfig::default());
        assert_eq!(config.batch_size, 64);
        assert_eq!(config.images.to_string(), "u8");
        assert_eq!(config.drop_n_last_frames, Some(3));
        let given: Vec<&str> = flags.knobs().map(|k| k.key).collect();
        assert_eq!(given, ["batch", "images", "drop_n_last_frames"], "in the table's order");
        let error = parse(&["--batch", "0"]).unwrap_err();
        assert!(
            error.contains("'--batch <N>'") && error.contains("expected at least 1"),
            "{error}"
        );
        let error = parse(&["--decoder-threads", "40"]).unwrap_err();
        assert!(error.contains("--decoder-threads") && error.contains("1 to 16"), "{error}");
    }
}
