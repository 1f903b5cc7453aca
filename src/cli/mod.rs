//! The command line's side of each command: its flags as clap parses them, handed to the
//! library as typed knobs, and what the library returns printed.

pub mod cluster;
pub mod compare;
pub mod dataset;
pub mod guard;
pub mod layout;
pub mod loader;
pub mod model;
pub mod sweep;

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
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{value}");
    }
    Ok(())
}

/// An error and its causes as one line: each cause once, and none whose text the message
/// already holds (thiserror's `transparent` and `{source}` messages repeat their cause). No
/// backtrace, whatever `RUST_BACKTRACE` says: the message names the file or flag.
pub fn one_message(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if !message.contains(&text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&text);
        }
    }
    message
}
