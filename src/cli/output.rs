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

/// Writes a line to stdout. A closed pipe (`cargo onnx-lint ... | head`) ends the run quietly
/// with exit 0, as ripgrep does: the reader has all it wants. Any other failure (stdout on a
/// full disk, `> /dev/full`) ends it with exit 2 and the reason: the report is lost, and a
/// lost report must not pass for a clean one.
pub fn out(line: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        write_failed("stdout", &e);
    }
}

/// Ends the run after a failed write of the report to `what` (see [`out`]).
#[allow(clippy::exit)]
pub fn write_failed(what: &str, e: &std::io::Error) -> ! {
    use std::io::Write;
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(i32::from(super::EXIT_OK));
    }
    let _ = writeln!(
        std::io::stderr(),
        "error: cannot write the report to {what}: {e}"
    );
    std::process::exit(i32::from(super::EXIT_ERROR));
}

/// Appends `text` to the file at `path` (the GitHub job summary): created if missing, refused
/// if it is not a regular file, opened non-blocking (a FIFO there never blocks the run).
pub fn append_regular(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(std::io::Error::other("it is not a regular file"));
        }
        _ => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let mut f = options.open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("it is not a regular file"));
    }
    f.write_all(text.as_bytes())?;
    f.flush()
}
