//! Flags several commands share, each declared once: `--json` (every command that prints a
//! result), `--processes` (`load`, `train`, `tune`), and what a measuring run writes beside its
//! figures, `--trace` and `--out` (`load`, `train`).

use std::path::PathBuf;

use clap::Args;

/// `--json`.
#[derive(Args, Debug, Clone, Copy)]
pub struct JsonFlag {
    /// Print one JSON object instead of text.
    #[arg(id = "json", long = "json")]
    pub on: bool,
}

/// `--processes N`: ranks at once on this box.
#[derive(Args, Debug, Clone, Copy)]
pub struct ProcessesFlag {
    /// Ranks training at once on this box, as `accelerate launch --num_processes N` starts a
    /// run: each rank a process with its DataLoader and workers (its shard; the native loader's
    /// too), every step waiting for the slowest rank. `load` and `train` measure them at once;
    /// `tune` answers the workers per rank that fit them in the cores and memory [default:
    /// --lerobot-train's launch line's (its --num_processes, else its accelerate config's),
    /// else 1].
    #[arg(id = "processes", long = "processes", value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub n: Option<u16>,
}

/// What a `load` or `train` run writes beside its figures, and its ranks at once.
#[derive(Args)]
pub struct RunFlags {
    /// Write the timeline (the workers' batch stages as spans and, for `train`, the trainer's
    /// wait and step phases; one track per thread) to this new file, in Chrome's trace format
    /// (chrome://tracing, ui.perfetto.dev).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write this rank's figures, its shard of the first epoch and where it ran to
    /// DIR/rank-<r>.json (r: --rank, $RANK or $SLURM_PROCID); `feedbench merge DIR` then
    /// reports every rank and the slowest.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Ranks at once.
    #[command(flatten)]
    pub processes: ProcessesFlag,
}
