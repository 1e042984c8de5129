//! Output at the edge: one [`Emitter`] per format (`human.rs`, `json.rs`, `sarif.rs`,
//! `github.rs`), listed once in `format.rs`, which `--format` and the dispatch come from; the
//! reports the commands hand them (`report.rs`); where the report goes (`sink.rs`); colour and
//! miette's handler (`terminal.rs`). The library returns findings and placements; only this
//! module turns them into text, JSON, SARIF or workflow commands.
//!
//! Adding a format: a file here with a unit struct that implements [`Emitter`] (its `render`
//! of a linted model and a writer for each report it prints), and its line in `format.rs`.

mod emitter;
mod format;
pub mod github;
pub mod human;
pub mod json;
mod report;
pub mod sarif;
mod sink;
mod terminal;

pub use emitter::{Emitter, FixWriter, LintWriter, PlaceWriter, RenderCx};
pub use format::{Format, Report};
pub use report::{FixCounts, FixOptions, Fixed, ModelReport, Printing, Totals};
pub use sink::{Sink, append_regular, out, write_atomically, write_failed};
pub use terminal::{ColorChoice, install_miette_hook, plural, render_report, width};

pub use crate::diagnostics::human_bytes;
