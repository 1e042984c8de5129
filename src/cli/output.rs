//! Rendering: miette for humans, JSON for machines. The JSON shapes are defined here only.

use std::io::IsTerminal;

use serde::Serialize;

/// Sets up miette's graphical handler: colours only on a terminal and never when `NO_COLOR` is
/// set, a fixed width when `ONNX_LINT_WIDTH` is set (tests), Unicode only on a terminal.
pub fn install_miette_hook() {
    let tty = std::io::stderr().is_terminal();
    let color = tty && std::env::var_os("NO_COLOR").is_none();
    let width = std::env::var("ONNX_LINT_WIDTH")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(100);
    let _ = miette::set_hook(Box::new(move |_| {
        Box::new(
            miette::MietteHandlerOpts::new()
                .color(color)
                .unicode(tty)
                .terminal_links(false)
                .width(width)
                .build(),
        )
    }));
}

/// Renders a diagnostic the way miette's installed handler does.
pub fn render_report(report: &miette::Report) -> String {
    format!("{report:?}")
}

/// One model's summary, as `--format json` prints it.
#[derive(Debug, Serialize)]
pub struct ModelSummaryJson {
    pub model: String,
    pub ok: bool,
    pub error: Option<ErrorJson>,
    pub ir_version: Option<i64>,
    pub opsets: std::collections::BTreeMap<String, i64>,
    pub nodes: usize,
    pub graphs: usize,
    pub functions: usize,
    pub initializers: usize,
    pub initializer_bytes: u64,
    pub external_bytes: u64,
    pub external_files: Vec<ExternalFileJson>,
    pub problems: Vec<ProblemJson>,
}

#[derive(Debug, Serialize)]
pub struct ErrorJson {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Serialize)]
pub struct ExternalFileJson {
    pub location: String,
    pub tensors: usize,
}

#[derive(Debug, Serialize)]
pub struct ProblemJson {
    pub level: &'static str,
    pub code: &'static str,
    pub message: String,
    pub node: Option<String>,
}

pub use crate::diagnostics::human_bytes;

/// Writes a line to stdout. A closed pipe (`cargo onnx-lint ... | head`) is not an error: the
/// reader has all it wants, so the rest is dropped silently.
pub fn out(line: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{line}")
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        let _ = writeln!(std::io::stderr(), "error: cannot write to stdout: {e}");
    }
}
