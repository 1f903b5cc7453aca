//! `feedbench layout`: candidate storage layouts of a dataset, measured and ranked.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use feedbench::bench::layout_study::config::LayoutConfig;
use feedbench::bench::layout_study::report::write_layout_report;
use feedbench::bench::layout_study::{run_layout, LayoutStudy, RESULTS_FILE};
use feedbench::dataset::EpisodeList;

use super::printer::Printer;

/// Arguments of `feedbench layout`.
#[derive(Args)]
pub struct LayoutArgs {
    /// The source dataset (read only; candidates are written under --out).
    dataset: PathBuf,
    /// The study's config: base candidate, axes, measurement, floors (see configs/layout.toml).
    #[arg(long)]
    config: PathBuf,
    /// The study's directory: candidates/, layout.jsonl and the report.
    #[arg(long)]
    out: PathBuf,
    /// Only these episodes of the source, e.g. `1,2,4` or `0-9` (every one by default).
    #[arg(long)]
    episodes: Option<EpisodeList>,
    /// Go on with the study in --out: finished candidates are kept, complete candidate
    /// datasets reused.
    #[arg(long)]
    resume: bool,
}

/// Runs `feedbench layout`.
pub fn run(args: &LayoutArgs) -> Result<()> {
    let config = LayoutConfig::load(&args.config)?;
    let study = LayoutStudy {
        dataset: args.dataset.clone(),
        episodes: args.episodes.clone(),
        config_path: args.config.clone(),
        config,
        out: args.out.clone(),
        resume: args.resume,
    };
    let results = run_layout(&study, &mut Printer::lines())?;
    let written = write_layout_report(&args.out, results, &study.config.choose)?;
    out!("{}", written.terminal)?;
    let files: Vec<String> = written.files.iter().map(|f| f.display().to_string()).collect();
    eprintln!("wrote {} and {}", args.out.join(RESULTS_FILE).display(), files.join(", "));
    Ok(())
}
