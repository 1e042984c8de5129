//! The command line: arguments, output, exit codes. The only module that prints.
#![allow(clippy::print_stdout, clippy::print_stderr)]

pub mod check;
pub mod explain;
pub mod output;
mod place;
pub mod tables;
mod verify;
mod workspace;

pub use check::expand_paths;
pub use output::human_bytes;
pub use place::placement_json;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Exit code: nothing at deny level.
pub const EXIT_OK: u8 = 0;
/// Exit code: findings at deny level.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit code: usage error, unreadable or undecodable input, unknown ORT release.
pub const EXIT_ERROR: u8 = 2;

/// Predicts what ONNX Runtime's CUDA execution provider does with an ONNX model: which nodes fall
/// back to the CPU, which Memcpy copies ORT inserts, why, and how to fix it.
#[derive(Debug, Parser)]
#[command(
    name = "cargo-onnx-lint",
    bin_name = "cargo onnx-lint",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Exit codes: 0 nothing at deny level, 1 findings at deny level, 2 usage error, \
                  unreadable input or unknown ORT release.\n\
                  Run as `cargo onnx-lint ...` or `cargo-onnx-lint ...`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// Model files or folders (searched recursively for `*.onnx`).
    pub paths: Vec<PathBuf>,

    #[command(flatten)]
    pub shared: SharedArgs,

    #[command(flatten)]
    pub cargo: CargoArgs,
}

/// Cargo workspace options of the default command, as other cargo subcommands spell them.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Cargo options")]
pub struct CargoArgs {
    /// Lint only the models of this workspace package (repeatable).
    #[arg(
        short = 'p',
        long = "package",
        value_name = "SPEC",
        conflicts_with = "paths"
    )]
    pub package: Vec<String>,

    /// Lint the models of every workspace member and of the workspace.
    #[arg(long, conflicts_with = "paths")]
    pub workspace: bool,

    /// Path to the Cargo.toml of the workspace or package.
    #[arg(long, value_name = "PATH")]
    pub manifest_path: Option<PathBuf>,

    /// Analyse every model again: neither read nor write the cache in `target/onnx-lint/`.
    #[arg(long)]
    pub no_cache: bool,
}

/// Options shared by every command.
#[derive(Debug, Args, Clone)]
pub struct SharedArgs {
    /// ORT release to simulate: `1.24.4`, or `1.24` for the newest bundled 1.24.x.
    #[arg(long, global = true, value_name = "VERSION")]
    pub ort: Option<String>,

    /// Provider list to simulate: `cuda` = [CUDA, CPU], `cpu` = [CPU]. [default: cuda]
    #[arg(long, global = true, value_enum)]
    pub ep: Option<EpArg>,

    /// ORT graph optimisation level to simulate. [default: all]
    #[arg(long = "opt-level", global = true, value_enum)]
    pub opt_level: Option<OptLevelArg>,

    /// Output format.
    #[arg(long, global = true, value_enum, default_value_t = Format::Human)]
    pub format: Format,

    /// Set rules (code or name, or `all`) to deny level. Repeatable.
    #[arg(long, global = true, value_name = "RULE")]
    pub deny: Vec<String>,

    /// Set rules to warn level. Repeatable.
    #[arg(long, global = true, value_name = "RULE")]
    pub warn: Vec<String>,

    /// Turn rules off. Repeatable.
    #[arg(long, global = true, value_name = "RULE")]
    pub allow: Vec<String>,

    /// Evaluate sizes at this dim value: `--dim batch=1 --dim sequence_length=2048` (a dim not
    /// set counts 1). Repeatable; over `dims` in the configuration.
    #[arg(long, global = true, value_name = "NAME=VALUE")]
    pub dim: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EpArg {
    Cuda,
    Cpu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OptLevelArg {
    Disable,
    Basic,
    Extended,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
    Sarif,
    Github,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What ORT would do with a model: placement, copies, load outcome.
    Place {
        /// Model files.
        #[arg(required = true)]
        models: Vec<PathBuf>,
    },
    /// Print a rule's documentation (by code or name).
    Explain {
        /// Rule code (`OL101`) or name (`registration-gap`).
        rule: String,
    },
    /// The bundled ORT releases and their kernel tables.
    Tables {
        #[command(subcommand)]
        action: Option<TablesAction>,
    },
    /// Run a live ORT session and compare it with the prediction (exit 0 agree, 1 disagree,
    /// 2 nothing could be checked).
    Verify(verify::VerifyArgs),
}

#[derive(Debug, Subcommand)]
pub enum TablesAction {
    /// List the bundled releases.
    List,
    /// Print one release's kernel table.
    Show {
        /// ORT release (`1.24.4` or `1.24`).
        ort: String,
    },
}

/// Parses `args` (the process arguments, program name first) and runs the command.
/// `cargo onnx-lint ARGS` runs this binary as `cargo-onnx-lint onnx-lint ARGS`: the extra
/// argument is dropped.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let mut args = args;
    if args.get(1).is_some_and(|a| a == "onnx-lint") {
        args.remove(1);
    }
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_ERROR } else { EXIT_OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    output::install_miette_hook();
    ExitCode::from(run(cli))
}

fn run(cli: Cli) -> u8 {
    match cli.command {
        None => check::run(&cli.paths, &cli.shared, &cli.cargo),
        Some(Command::Place { models }) => place::run(&models, &cli.shared),
        Some(Command::Explain { rule }) => explain::run(&rule),
        Some(Command::Tables { action }) => tables::run(action.as_ref(), &cli.shared),
        Some(Command::Verify(args)) => verify::run(&args, &cli.shared),
    }
}
