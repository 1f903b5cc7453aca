//! `feedbench doctor LOG`: a lerobot-train log read, not measured: the input-bound share of
//! its steps, their spread, and what to try.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use serde_json::json;

use feedbench::bench::train_log::TrainLog;

/// Arguments of `feedbench doctor`.
#[derive(Args)]
pub struct DoctorArgs {
    /// A lerobot-train log: its output as saved (`lerobot-train … 2>&1 | tee train.log`), with
    /// the step lines it writes every --log_freq steps.
    log: PathBuf,
    /// Print one JSON object (the summary and every logged step) instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `feedbench doctor`.
pub fn run(args: &DoctorArgs) -> Result<()> {
    let log = TrainLog::read(&args.log)?;
    let summary = log.summary();
    if args.json {
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
