//! `feedbench doctor LOG`: a lerobot-train log read, not measured: the input-bound share of
//! its steps, their spread, and what to try.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::json;

use feedbench::bench::export::{self, Html};
use feedbench::bench::train_log::TrainLog;

use super::shared_flags::JsonFlag;

/// Arguments of `feedbench doctor`.
#[derive(Args)]
pub struct DoctorArgs {
    /// A lerobot-train log: its output as saved (`lerobot-train … 2>&1 | tee train.log`), with
    /// the step lines it writes every --log_freq steps.
    log: PathBuf,
    #[command(flatten)]
    json: JsonFlag,
    /// Also write the log as one self-contained page into FILE: each logged step's data_s and
    /// updt_s over the run, the epoch starts marked, interactive.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// Runs `feedbench doctor`.
pub fn run(args: &DoctorArgs) -> Result<()> {
    if let Some(page) = &args.html {
        super::check_page_path(page)?;
    }
    let log = TrainLog::read(&args.log)?;
    let summary = log.summary();
    if let Some(path) = &args.html {
        export::write_to(path, &log, &Html)
            .with_context(|| format!("--html {}", path.display()))?;
    }
    if args.json.on {
        let value = json!({ "log": log.path, "summary": summary, "steps": log.steps });
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        out!("{summary}")?;
        let quoted = shlex::try_quote(&args.log.to_string_lossy()).map(|q| q.into_owned());
        outln!(
            "Its steps replayed under a loader (their updt_s, drawn; --step-order logged keeps \
             their order): feedbench train DATASET --step-from {}",
            quoted.unwrap_or_else(|_| args.log.display().to_string())
        )?;
    }
    Ok(())
}
