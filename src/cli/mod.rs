//! The command line's side of each command: its flags as clap parses them, handed to the
//! library as typed knobs, and what the library returns printed.

pub mod dataset;
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
