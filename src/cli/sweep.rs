//! `feedbench sweep` and `feedbench report`.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use feedbench::bench::config::{ConfigFile, SweepConfig};
use feedbench::bench::layout;
use feedbench::bench::report::{self, ReportFiles};
use feedbench::bench::results::Resume;
use feedbench::bench::sweep::{prepare_dataset, results_path, run_sweep, SweepProgress};

/// Arguments of `feedbench sweep`.
#[derive(Args)]
pub struct SweepArgs {
    /// The sweep config (TOML; see configs/example.toml).
    #[arg(long)]
    config: PathBuf,
    /// Output directory [default: results/<config name>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the sweep whose results.jsonl is in the output directory, skipping its
    /// finished cells.
    #[arg(long)]
    resume: bool,
    /// With --resume: add to results measured with another config (its cells stay apart by
    /// their knobs in the report).
    #[arg(long, requires = "resume")]
    allow_changed_config: bool,
}

/// Runs `feedbench sweep`.
pub fn sweep(args: &SweepArgs) -> Result<()> {
    let config = SweepConfig::load(&args.config)?;
    let out = args.out.clone().unwrap_or_else(|| {
        let name = args.config.file_stem().unwrap_or_default();
        PathBuf::from("results").join(name)
    });
    let root = prepare_dataset(&config.dataset, |message| eprintln!("{message}"))?;
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} cells  {elapsed_precise} (about {eta} left)  {msg}",
        )
        .expect("a valid template"),
    );
    let resume = match (args.resume, args.allow_changed_config) {
        (false, _) => Resume::No,
        (true, false) => Resume::Yes,
        (true, true) => Resume::EvenIfConfigChanged,
    };
    let results = run_sweep(&config, &root, &out, resume, |progress| match progress {
        SweepProgress::Phase { cell, phase, .. } => bar.set_message(format!(
            "{phase}: {} workers, prefetch {}, batch {}, {} {}, {} on {} {}",
            cell.workers,
            cell.prefetch,
            cell.batch_size,
            cell.resolution,
            cell.images,
            cell.model,
            cell.device,
            cell.dtype
        )),
        SweepProgress::CellDone { done, total } => {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    })?;
    bar.finish_and_clear();
    let written = report::write_report(&out, &results)?;
    print!("{}", written.terminal);
    eprintln!("wrote {} and {}", results_path(&out).display(), file_list(&written));
    Ok(())
}

/// Arguments of `feedbench report`.
#[derive(Args)]
pub struct ReportArgs {
    /// The sweep's output directory (holding results.jsonl) or a layout study's (holding
    /// layout.jsonl).
    dir: PathBuf,
}

/// Runs `feedbench report`.
pub fn report(args: &ReportArgs) -> Result<()> {
    if args.dir.join(layout::RESULTS_FILE).is_file() {
        let written = layout::report::report_layout_dir(&args.dir)?;
        print!("{}", written.terminal);
        let files: Vec<String> = written.files.iter().map(|f| f.display().to_string()).collect();
        eprintln!("wrote {}", files.join(", "));
        return Ok(());
    }
    let written = report::report_dir(&args.dir)?;
    print!("{}", written.terminal);
    eprintln!("wrote {}", file_list(&written));
    Ok(())
}

/// The files a report wrote, comma-separated.
fn file_list(written: &ReportFiles) -> String {
    written.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
}
