//! One home for what a study writes (hyperfine's `Exporter`, criterion's composed `Reports`):
//! each format of a study's outputs — [`Markdown`], [`Csv`], [`Json`], [`Svg`], the page
//! ([`Html`]) — is an [`Exporter`] of the study's result, implemented beside the study's
//! renderer of that format; [`write()`] composes a study's exporters and writes their files into
//! its directory, each whole or not at all.

use std::path::{Path, PathBuf};

use crate::dataset::files::write_whole;

/// A file an exporter makes: its name in the study's directory, and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The file's name.
    pub name: String,
    /// Its text.
    pub text: String,
}

impl Output {
    /// The file `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self { name: name.into(), text: text.into() }
    }
}

/// Why an output could not be made or written, naming its file.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The format could not render it (a plot that cannot be drawn).
    #[error("{path}: cannot render it: {what}")]
    Render {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        what: String,
    },
    /// The file could not be written.
    #[error("{path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A file an exporter could not render: its name, and what went wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderError {
    /// The file's name.
    pub name: String,
    /// What went wrong.
    pub what: String,
}

/// One format of a study's outputs: renders the study's result `S` into the files it writes.
pub trait Exporter<S: ?Sized> {
    /// The files of `study` in this format.
    fn export(&self, study: &S) -> Result<Vec<Output>, RenderError>;
}

/// The Markdown report (`report.md`).
#[derive(Debug, Clone, Copy)]
pub struct Markdown;

/// The table of results as CSV (`results.csv`).
#[derive(Debug, Clone, Copy)]
pub struct Csv;

/// The study's result as JSON (`tune.json`, github-action-benchmark's files).
#[derive(Debug, Clone, Copy)]
pub struct Json;

/// The study's plots as SVG files.
#[derive(Debug, Clone, Copy)]
pub struct Svg;

/// The study's self-contained page (`report.html`).
#[derive(Debug, Clone, Copy)]
pub struct Html;

/// Writes `study` through each of `exporters` into `dir` (which must exist), in order, each
/// file whole or not at all (a report cut short never replaces the one before): the files
/// written.
pub fn write<S: ?Sized>(
    dir: &Path,
    study: &S,
    exporters: &[&dyn Exporter<S>],
) -> Result<Vec<PathBuf>, ExportError> {
    let mut written = Vec::new();
    for exporter in exporters {
        let outputs = exporter
            .export(study)
            .map_err(|e| ExportError::Render { path: dir.join(&e.name), what: e.what })?;
        for output in outputs {
            let path = dir.join(&output.name);
            write_whole(&path, output.text.as_bytes())
                .map_err(|source| ExportError::Write { path: path.clone(), source })?;
            written.push(path);
        }
    }
    Ok(written)
}

/// Writes the one file `exporter` makes of `study` at `path` (a page the user named, `--html
/// FILE`), whole or not at all.
pub fn write_to<S: ?Sized>(
    path: &Path,
    study: &S,
    exporter: &dyn Exporter<S>,
) -> Result<(), ExportError> {
    let render = |what: String| ExportError::Render { path: path.to_path_buf(), what };
    let mut outputs = exporter.export(study).map_err(|e| render(e.what))?;
    let output = match (outputs.pop(), outputs.is_empty()) {
        (Some(output), true) => output,
        _ => return Err(render("the format makes more than one file, or none".into())),
    };
    write_whole(path, output.text.as_bytes())
        .map_err(|source| ExportError::Write { path: path.to_path_buf(), source })
}

/// `value` as pretty JSON with a final newline, as every JSON file feedbench writes.
pub fn pretty_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).expect("plain data serialises") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Twice;

    impl Exporter<str> for Twice {
        fn export(&self, study: &str) -> Result<Vec<Output>, RenderError> {
            Ok(vec![Output::new("a.txt", study), Output::new("b.txt", study.repeat(2))])
        }
    }

    struct Refuses;

    impl Exporter<str> for Refuses {
        fn export(&self, _: &str) -> Result<Vec<Output>, RenderError> {
            Err(RenderError { name: "c.svg".into(), what: "no points".into() })
        }
    }

    #[test]
    fn every_exporters_files_are_written_in_order_and_a_failure_names_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let written = write(dir.path(), "x", &[&Twice]).unwrap();
        assert_eq!(written, [dir.path().join("a.txt"), dir.path().join("b.txt")]);
        assert_eq!(std::fs::read_to_string(dir.path().join("b.txt")).unwrap(), "xx");
        let refused = write(dir.path(), "y", &[&Twice, &Refuses]).unwrap_err().to_string();
        assert_eq!(
            refused,
            format!("{}: cannot render it: no points", dir.path().join("c.svg").display())
        );
        let named = dir.path().join("mine.html");
        let several = write_to(&named, "x", &Twice).unwrap_err().to_string();
        assert!(several.contains("more than one file"), "{several}");
        assert!(!named.exists(), "nothing written where it fails");
        let missing = write(&dir.path().join("gone"), "z", &[&Twice]).unwrap_err();
        assert!(
            matches!(missing, ExportError::Write { ref path, .. } if path.ends_with("gone/a.txt"))
        );
    }
}
