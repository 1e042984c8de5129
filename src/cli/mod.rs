//! The command line: arguments, output, exit codes. The only module that prints.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod budget;
pub mod check;
pub mod explain;
pub mod fix;
pub mod output;
mod place;
pub mod settings;
pub mod tables;
mod verify;
mod workspace;

pub use check::expand_paths;
pub use output::human_bytes;
pub use output::json::placement_json;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::lint;
pub use output::Format;
use output::{ColorChoice, Report};

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
    pub lint: LintArgs,

    #[command(flatten)]
    pub cargo: CargoArgs,

    /// Colour: `auto` = on a terminal, unless NO_COLOR (CLICOLOR_FORCE, FORCE_COLOR force it).
    #[arg(long, global = true, value_enum, default_value_t, value_name = "WHEN")]
    pub color: ColorChoice,
}

/// Options of the lint command only.
#[derive(Debug, Args, Clone, Default)]
pub struct LintArgs {
    /// Output format.
    #[arg(long, visible_alias = "output-format", value_parser = Format::parser(Report::Lint), default_value = "human")]
    pub format: Format,

    /// Write the report to FILE instead of stdout (atomically). With --fix or --diff: write the
    /// fixed model to FILE (one model) instead of in place.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Apply the safe fixes of every finding that carries one (JSON `fix`), then re-analyse and
    /// report what changed (`28 → 0 copies, 19 → 0 CPU nodes`).
    #[arg(long, help_heading = "Fix options")]
    pub fix: bool,

    /// Print the fixes as a unified diff of the models' ONNX text view; write nothing (exit 1
    /// when there is something to fix).
    #[arg(long, help_heading = "Fix options")]
    pub diff: bool,

    /// With --fix or --diff: also apply fixes that may change numerics or need judgement.
    #[arg(long, help_heading = "Fix options")]
    pub unsafe_fixes: bool,

    /// With --fix: exit 1 when a model file was changed (pre-commit's "files were modified").
    #[arg(long, help_heading = "Fix options", requires = "fix")]
    pub exit_non_zero_on_fix: bool,

    /// Set rules (code or name, or `all`: every enabled rule) to deny level. Repeatable.
    #[arg(long, value_name = "RULE")]
    pub deny: Vec<String>,

    /// Set rules (or `all`: every enabled rule) to warn level. Repeatable.
    #[arg(long, value_name = "RULE")]
    pub warn: Vec<String>,

    /// Turn rules (or `all`) off. Repeatable.
    #[arg(long, value_name = "RULE")]
    pub allow: Vec<String>,

    /// Print the number of findings per rule instead of the findings.
    #[arg(long)]
    pub statistics: bool,

    /// Print only the findings: no notes, no per-model or closing summary.
    #[arg(short = 'q', long)]
    pub quiet: bool,

    /// Exit 0 even when findings are at deny level (unreadable input still exits 2).
    #[arg(long)]
    pub exit_zero: bool,

    /// Evaluate sizes at this dim value: `--dim batch=1 --dim sequence_length=2048` (a dim not
    /// set counts 1). Repeatable; over `dims` in the configuration.
    #[arg(long, value_name = "NAME=VALUE")]
    pub dim: Vec<String>,
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

/// What to simulate: options of the commands that place models (lint, `place`, `verify`).
#[derive(Debug, Args, Clone, Default)]
pub struct SharedArgs {
    /// ORT release to simulate: `1.24.4`, `1.24` (newest 1.24.x), `1.24.1` (the 1.24 table).
    #[arg(long, value_name = "VERSION")]
    pub ort: Option<String>,

    /// Provider list to simulate: `cuda` = [CUDA, CPU], `cpu` = [CPU]. [default: cuda]
    #[arg(long, value_parser = ep_parser())]
    pub ep: Option<EpArg>,

    /// ORT graph optimisation level to simulate. [default: all]
    #[arg(long = "opt-level", value_enum)]
    pub opt_level: Option<OptLevelArg>,
}

/// A `--ep` value: the provider whose list is simulated (`crate::providers::list`).
#[derive(Debug, Clone, Copy)]
pub struct EpArg(pub &'static crate::providers::Provider);

impl PartialEq for EpArg {
    fn eq(&self, other: &EpArg) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for EpArg {}

/// `--ep`'s values: every provider's option (`crate::providers::ALL`).
fn ep_parser() -> impl clap::builder::TypedValueParser<Value = EpArg> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(crate::providers::options())
        .map(|v| EpArg(crate::providers::by_option(&v).unwrap_or(&crate::providers::cpu::CPU)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OptLevelArg {
    Disable,
    Basic,
    Extended,
    All,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What ORT would do with models: placement, copies, load outcome.
    Place {
        /// Model files or folders (searched recursively for `*.onnx`).
        #[arg(required = true)]
        models: Vec<PathBuf>,
        #[command(flatten)]
        shared: SharedArgs,
        /// Output format.
        #[arg(long, visible_alias = "output-format", value_parser = Format::parser(Report::Place), default_value = "human")]
        format: Format,
    },
    /// Print a rule's documentation (by code or name); without a rule, list the rules.
    Explain {
        /// Rule code (`OL101`) or name (`registration-gap`).
        rule: Option<String>,
    },
    /// List the rules: code, name, default level, what each flags.
    Rules {
        /// Output format.
        #[arg(long, visible_alias = "output-format", value_parser = Format::parser(Report::Listing), default_value = "human")]
        format: Format,
    },
    /// The bundled ORT releases and their kernel tables.
    Tables {
        #[command(subcommand)]
        action: Option<TablesAction>,
        /// Output format.
        // Its own id: a global argument's value is also seen by the parent command, whose
        // `format` has another type.
        #[arg(
            id = "tables_format",
            long = "format",
            visible_alias = "output-format",
            value_parser = Format::parser(Report::Listing),
            default_value = "human",
            global = true
        )]
        format: Format,
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
/// argument is dropped. Errors are rendered here, and only here.
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
    output::install_miette_hook(cli.color);
    match run(cli) {
        Ok(code) => code,
        Err(report) => {
            eprintln!("{}", output::render_report(&report));
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Runs a parsed command: the exit code, or the error that stopped it (exit code 2; `main`
/// renders it, the only place that renders a command's error).
pub fn run(cli: Cli) -> Result<ExitCode, miette::Report> {
    run_command(cli).map(ExitCode::from)
}

fn run_command(cli: Cli) -> Result<u8, miette::Report> {
    match cli.command {
        None if cli.lint.fix || cli.lint.diff => {
            fix_command(&cli.paths, &cli.shared, &cli.lint, &cli.cargo)
        }
        None if cli.lint.unsafe_fixes => {
            Err(settings::UsageError::new("--unsafe-fixes goes with --fix or --diff", None).into())
        }
        None => check::run(&cli.paths, &cli.shared, &cli.lint, &cli.cargo, cli.color),
        Some(Command::Place {
            models,
            shared,
            format,
        }) => place::run(&models, &shared, format),
        Some(Command::Explain { rule: Some(rule) }) => explain::run(&rule),
        Some(Command::Explain { rule: None }) => explain::list(Format::Human),
        Some(Command::Rules { format }) => explain::list(format),
        Some(Command::Tables { action, format }) => tables::run(action.as_ref(), format),
        Some(Command::Verify(args)) => verify::run(&args),
    }
}

/// `--fix`/`--diff`: the lint command's groups of models and settings, fixed (`fix.rs`). Here
/// `-o/--output` is the fixed model's path, not the report file.
fn fix_command(
    paths: &[PathBuf],
    shared: &SharedArgs,
    args: &LintArgs,
    cargo: &CargoArgs,
) -> Result<u8, miette::Report> {
    let opts = output::FixOptions {
        write: args.fix,
        diff: args.diff,
        unsafe_fixes: args.unsafe_fixes,
        exit_non_zero_on_fix: args.exit_non_zero_on_fix,
        output: args.output.clone(),
    };
    if args.format.emitter().fix(&opts).is_none() {
        return Err(settings::UsageError::new(args.format.refusal(Report::Fix), None).into());
    }
    let planned = check::plan_groups(
        paths,
        shared,
        settings::RuleFlags {
            allow: &args.allow,
            warn: &args.warn,
            deny: &args.deny,
            dims: &args.dim,
        },
        cargo,
    )?;
    for w in &planned.warnings {
        eprintln!("warning: {w}");
    }
    let jobs: Vec<(&[PathBuf], &lint::Settings)> = planned
        .groups
        .iter()
        .map(|g| (g.targets.as_slice(), &g.resolved.settings))
        .collect();
    Ok(fix::fix_groups(&jobs, args.format, &opts))
}
