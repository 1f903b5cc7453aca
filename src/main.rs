//! The `feedbench` command line: parses arguments and calls into the library.

fn main() -> anyhow::Result<()> {
    Ok(())
}
