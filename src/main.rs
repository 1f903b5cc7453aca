//! The `feedbench` command line: parses arguments, calls into the library and prints. Each
//! command's flags and printing live in `cli/`.

mod cli;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use cli::{cluster, compare, dataset, doctor, guard, layout, loader, model, sweep, tune};

/// Does my data loader keep my GPU fed? A native LeRobot dataset reader and loader benchmark.
#[derive(Parser)]
#[command(name = "feedbench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// A setting of the store a URL root (s3://, gs://, http(s)://, hf://) is read from,
    /// `KEY=VALUE` (repeatable), as the store names it: endpoint, region, access_key_id,
    /// secret_access_key, allow_http, timeout… Over the AWS_* and GOOGLE_* environment
    /// variables; passed on to the processes feedbench starts.
    #[arg(long = "storage-option", global = true, value_name = "KEY=VALUE", value_parser = key_value)]
    storage_options: Vec<(String, String)>,
}

/// `KEY=VALUE`, the key not empty.
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("{text:?}: expected KEY=VALUE, e.g. endpoint=http://127.0.0.1:9000")),
    }
}

#[derive(Subcommand)]
enum Command {
    /// Describe a dataset: version, episodes on disk, features, cameras as the files hold them.
    Info(dataset::InfoArgs),
    /// Write one sample as NumPy files, shaped as LeRobot's `dataset[index]` returns it.
    Sample(dataset::SampleArgs),
    /// Run the loader alone (the `loader` phase) and print its throughput and timing tree.
    Load(loader::LoadArgs),
    /// Feed a training step from the loader (the `train` phase): wait, h2d and compute per
    /// step, the input-bound share and the verdict.
    Train(loader::TrainArgs),
    /// Which num_workers (and prefetch) does my step need? The step and one worker measured,
    /// the answer predicted and verified around it within --cpus and --memory, printed with
    /// the flags to paste (feedbench's, or lerobot-train's with --loader lerobot).
    Tune(tune::TuneArgs),
    /// Read a lerobot-train log (measures nothing): the share of its steps spent on input
    /// (data_s against updt_s per logged step), their spread, the verdict and what to try.
    Doctor(doctor::DoctorArgs),
    /// Sweep the loader's knobs feeding a training step: every cell in the loader, model and
    /// train phases, appended to DIR/results.jsonl; then the report.
    Sweep(sweep::SweepArgs),
    /// Copy a dataset (or some episodes) to RAM-backed storage and print the path to use.
    Stage(dataset::StageArgs),
    /// The `model` phase: a training step alone on one resident synthetic batch.
    Model(model::ModelArgs),
    /// Generate a LeRobot dataset from a preset: parquet frames, encoded cameras, metadata.
    Synth(dataset::SynthArgs),
    /// Is B slower than A? Two loaders run interleaved; the change in CPU per sample with
    /// its 95 % interval, and per stage.
    Compare(compare::CompareArgs),
    /// Hold loader throughput to a baseline (CI): fixed cells in interleaved repeats; exit 0
    /// within the tolerance, 1 on a regression, 2 on an error.
    Guard(guard::GuardArgs),
    /// Which codec, GOP, resolution and file layout: candidates re-encoded from a dataset's
    /// frames, each measured with the loader (size, decode cost, samples/s, quality).
    Layout(layout::LayoutArgs),
    /// Merge a planned sweep's cell files (DIR/cells) into DIR/results.jsonl and its report,
    /// listing missing cells; or report the ranks of a multi-process load or train (DIR/rank-*.json).
    /// Exit 1 when cells or ranks are missing.
    Merge(cluster::MergeArgs),
    /// Re-render a sweep's or layout study's report from DIR/results.jsonl or
    /// DIR/layout.jsonl alone (never measures): prints it and writes report.md, results.csv
    /// and the SVG plots into DIR.
    Report(sweep::ReportArgs),
}

/// Ends the process with one line where the working directory cannot be read (removed under
/// the shell, or out of reach): libtorch's oneMKL aborts there while the libraries load
/// ("Intel oneMKL FATAL ERROR: Cannot load libtorch_cpu.so"), before `main`. An executable's
/// `.preinit_array` runs before any library's initialisers, so this check runs first.
/// glibc hands it the command line, as it hands `main`: `guard` ends with 2 (an error, not a
/// regression), every other command with 1.
extern "C" fn refuse_unreadable_working_directory(
    argc: libc::c_int,
    argv: *const *const libc::c_char,
    _env: *const *const libc::c_char,
) {
    let mut buffer = [0u8; libc::PATH_MAX as usize];
    // SAFETY: getcwd writes at most the buffer's length into it.
    if !unsafe { libc::getcwd(buffer.as_mut_ptr().cast(), buffer.len()) }.is_null() {
        return;
    }
    let errno = std::io::Error::last_os_error().raw_os_error();
    // A directory too deep for PATH_MAX is readable; only a lost one is refused.
    if errno == Some(libc::ERANGE) {
        return;
    }
    let line: &[u8] = b"error: the working directory cannot be read (removed, or out of reach): \
                        run feedbench from a directory that exists\n";
    // SAFETY: argv holds argc C strings, as glibc passes them to main.
    let command = (1..argc.max(0) as usize)
        .map(|i| unsafe { std::ffi::CStr::from_ptr(*argv.add(i)) }.to_bytes())
        .find(|arg| !arg.starts_with(b"-"));
    let code = if command == Some(b"guard".as_slice()) { 2 } else { 1 };
    // SAFETY: writes a static buffer to stderr, then ends the process without running
    // anything of the libraries not yet initialised.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
        libc::_exit(code);
    }
}

#[used]
#[link_section = ".preinit_array"]
static WORKING_DIRECTORY_CHECK: extern "C" fn(
    libc::c_int,
    *const *const libc::c_char,
    *const *const libc::c_char,
) = refuse_unreadable_working_directory;

fn main() -> ExitCode {
    // A closed pipe on stdout (`feedbench report DIR | head`) ends the process quietly, as it
    // ends other Unix tools, not with a panic of `println!`. Children get their input from
    // files, so no pipe feedbench writes to can close under it otherwise.
    // SAFETY: restoring a signal's default disposition, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // SVT-AV1 prints a banner for every encoder it opens unless its log level says errors
    // only. Set before any thread starts (nothing else reads the environment concurrently).
    if std::env::var_os("SVT_LOG").is_none() {
        std::env::set_var("SVT_LOG", "1");
    }
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let Cli { command, storage_options } = Cli::parse();
    if !storage_options.is_empty() {
        use feedbench::dataset::remote;
        let map: serde_json::Map<String, serde_json::Value> =
            storage_options.iter().map(|(k, v)| (k.clone(), v.clone().into())).collect();
        // Still before any thread starts: the processes feedbench starts inherit them.
        std::env::set_var(remote::OPTIONS_VARIABLE, serde_json::Value::Object(map).to_string());
        remote::set_storage_options(storage_options);
    }
    // The guard tells an error (2) from a regression (1), as CI needs.
    let error_code = if matches!(command, Command::Guard(_)) { 2 } else { 1 };
    // Where a command's loader settings come from: a config file's section, else flags.
    let section = match &command {
        Command::Sweep(_) => Some("loader"),
        Command::Guard(_) => Some("cell"),
        Command::Layout(_) => Some("measure"),
        _ => None,
    };
    match run(command) {
        Ok(code) => code,
        Err(error) => {
            let name = |setting| cli::setting_name(section, setting);
            eprintln!("error: {}", cli::one_message(&error, &name));
            ExitCode::from(error_code)
        }
    }
}

fn run(command: Command) -> Result<ExitCode> {
    let done = match command {
        Command::Info(args) => dataset::info(&args),
        Command::Sample(args) => dataset::sample(&args),
        Command::Load(args) => loader::load(&args),
        Command::Train(args) => loader::train(&args),
        Command::Tune(args) => tune::run(&args),
        Command::Sweep(args) => sweep::sweep(&args),
        Command::Stage(args) => dataset::stage(&args),
        Command::Model(args) => model::run(&args),
        Command::Synth(args) => return dataset::synth(&args),
        Command::Report(args) => sweep::report(&args),
        Command::Compare(args) => return compare::run(&args),
        Command::Layout(args) => layout::run(&args),
        Command::Doctor(args) => doctor::run(&args),
        Command::Guard(args) => return guard::run(&args),
        Command::Merge(args) => return cluster::merge(&args),
    };
    done.map(|()| ExitCode::SUCCESS)
}
