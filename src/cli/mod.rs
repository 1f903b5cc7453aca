//! The command line's side of each command: its flags as clap parses them, handed to the
//! library as typed knobs, and what the library returns printed.

/// `print!` to standard output, but a failed write (a full disk, `> /dev/full`) is an error
/// naming standard output, not a panic; evaluates to `anyhow::Result<()>`. The text is made
/// first and written at once, flushed: a reader that stops early (`| head -3`) sees whole
/// lines, and a short text goes out in one write.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(&format!($($arg)*))
    };
}

/// `println!` as [`out!`] writes.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(&(format!($($arg)*) + "\n"))
    };
}

pub mod cluster;
pub mod compare;
pub mod dataset;
pub mod doctor;
pub mod guard;
pub mod knob_flags;
pub mod layout;
pub mod loader;
pub mod loader_flags;
pub mod model;
pub mod printer;
pub mod shared_flags;
pub mod step_flags;
pub mod sweep;
pub mod tune;

use std::path::{Path, PathBuf};

use feedbench::dataset::setting::{Naming, Setting};
use feedbench::dataset::DatasetError;
use feedbench::loader::pipeline::LoaderError;

/// The output directory of a config's sweep when `--out` is not given: `results/<name>`.
pub fn default_out(config: &Path) -> PathBuf {
    PathBuf::from("results").join(config.file_stem().unwrap_or_default())
}

/// A progress bar of `len` steps showing `message`, or a hidden one (for `--json`).
pub fn progress_bar(len: usize, hidden: bool, message: &'static str) -> indicatif::ProgressBar {
    if hidden {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(len as u64).with_message(message)
    }
}

/// Prints `value` as one pretty JSON object with `json`, else as its text.
pub fn print_json_or_text<T>(value: &T, json: bool) -> anyhow::Result<()>
where
    T: serde::Serialize + std::fmt::Display,
{
    if json {
        outln!("{}", serde_json::to_string_pretty(value)?)?;
    } else {
        out!("{value}")?;
    }
    Ok(())
}

/// A count of batches (`--batches`): at least one, refused by clap naming the flag.
pub fn batches(text: &str) -> Result<usize, String> {
    at_least_one(text, "batch")
}

/// A count of steps (`--steps`): at least one, refused by clap naming the flag.
pub fn steps(text: &str) -> Result<usize, String> {
    at_least_one(text, "step")
}

/// A count of episodes (`--episodes-per-file`): at least one, refused by clap naming the flag.
pub fn episodes(text: &str) -> Result<usize, String> {
    at_least_one(text, "episode")
}

/// A whole number of at least one `what`.
fn at_least_one(text: &str, what: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err(format!("expected at least one {what} (≥ 1)")),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{text:?}: {e}")),
    }
}

/// Writes `text` to standard output and flushes it; a failed write is an error naming
/// standard output.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| anyhow::anyhow!("cannot write to standard output: {e}"))
}

/// An error and its causes as one line: each cause once, and none whose text the message
/// already holds (thiserror's `transparent` and `{source}` messages repeat their cause), the
/// settings a refusal names named by `name` (the command's flags, or its config's keys). No
/// backtrace, whatever `RUST_BACKTRACE` says: the message names the file or flag.
pub fn one_message(error: &anyhow::Error, name: Naming) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let raw = cause.to_string();
        let text = worded(cause, name).unwrap_or_else(|| raw.clone());
        // A cause's raw text held by an outer one is worded there too.
        message = message.replace(&raw, &text);
        if !message.contains(&text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&text);
        }
    }
    message
}

/// `cause` in the front end's words, where it is one of the library's errors that name settings
/// (the errors that carry one keep it in the chain, as their source).
fn worded(cause: &(dyn std::error::Error + 'static), name: Naming) -> Option<String> {
    match cause.downcast_ref::<DatasetError>() {
        Some(e) => Some(e.worded(name)),
        None => cause.downcast_ref::<LoaderError>().map(|e| e.worded(name)),
    }
}

/// How a command names a setting: by its key in `section` of its config file (a sweep's
/// `loader.python`), else by its flag (`--python`; a loader knob's from the loader's table,
/// `--uint8` for `images`). Output settings are always flags.
pub fn setting_name(section: Option<&str>, setting: Setting) -> String {
    match (section, setting) {
        (_, Setting::Out | Setting::To | Setting::Force) | (None, _) => {
            knob_flags::flag_of(setting.key())
                .unwrap_or_else(|| format!("--{}", setting.key().replace('_', "-")))
        }
        (Some(section), _) => format!("{section}.{}", setting.key()),
    }
}

/// Says on stderr, a line each (three at most), which episodes of `dataset` have timestamps
/// that advance at another rate than info.json's fps: its windows are then read at the wrong
/// rows, as LeRobot reads them, and the user should know.
pub fn warn_of_rates(dataset: &feedbench::dataset::Dataset) -> anyhow::Result<()> {
    let mismatches = dataset.rate_mismatches()?;
    for mismatch in mismatches.iter().take(3) {
        eprintln!("warning: {}: {mismatch}", dataset.root().display());
    }
    if mismatches.len() > 3 {
        eprintln!("warning: … and {} more episodes", mismatches.len() - 3);
    }
    Ok(())
}

/// Where `--html` may write: not a directory, in a directory that exists (checked before
/// measuring, as the baseline's path is).
pub fn check_page_path(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        anyhow::bail!("--html {}: is a directory; name the page's file", path.display());
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        anyhow::bail!(
            "--html {}: no directory {} to write it in",
            path.display(),
            parent.display()
        );
    }
    Ok(())
}
