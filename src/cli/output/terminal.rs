//! The terminal: colour (`--color`, `NO_COLOR`), the width of the text, miette's handler for
//! errors on stderr, and small helpers of English text.

use std::io::IsTerminal;

use clap::ValueEnum;

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorChoice {
    // Colour on a terminal, unless `NO_COLOR` is set; `CLICOLOR_FORCE`/`FORCE_COLOR` force it.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether to colour a stream that is (or is not) a terminal. An explicit `always`/`never`
    /// wins; under `auto`, `NO_COLOR` (non-empty) turns colour off, then `CLICOLOR_FORCE` or
    /// `FORCE_COLOR` (non-empty, not `0`) turn it on, else a terminal decides.
    pub fn enabled(self, tty: bool) -> bool {
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty() && v != "0");
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
                    false
                } else if set("CLICOLOR_FORCE") || set("FORCE_COLOR") {
                    true
                } else {
                    tty
                }
            }
        }
    }
}

/// The output width: `ONNX_LINT_WIDTH` (tests), else 100.
pub fn width() -> usize {
    std::env::var("ONNX_LINT_WIDTH")
        .ok()
        .and_then(|w| w.parse().ok())
        .unwrap_or(100)
}

/// Sets up miette's graphical handler for errors on stderr: colours as `--color` says, a fixed
/// width when `ONNX_LINT_WIDTH` is set, Unicode only on a terminal.
pub fn install_miette_hook(color: ColorChoice) {
    let tty = std::io::stderr().is_terminal();
    let color = color.enabled(tty);
    let width = width();
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

/// `1 node`, `2 nodes`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
