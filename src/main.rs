//! The `feedbench` command line: parses arguments and calls into the library.

use clap::{Parser, Subcommand};

/// A native reader of LeRobot datasets and a benchmark of the loader feeding a training step.
#[derive(Debug, Parser)]
#[command(name = "feedbench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The `model` phase: a training step alone on one resident synthetic batch.
    Model(feedbench::model::cli::ModelArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Model(args) => feedbench::model::cli::run(&args),
    }
}
