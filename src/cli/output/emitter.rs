//! The `Emitter`: how one output format renders each report of the commands (ruff's `Emitter`
//! per format). A format is a file of `cli/output/` with one unit struct implementing it, and a
//! line in `format.rs`'s list. A report the format does not render is a method left at its
//! default (`None`): the command then refuses the format with a usage error (exit 2), and clap's
//! `--format` of a command that prints only that report does not offer it.
//!
//! The commands compute; the writers print. A writer is made for one run and told of each
//! model as it is done (so a report can stream, or gather and print at the end); everything it
//! prints goes through the run's [`Sink`] (stdout, or the `-o` file), and notes and errors that
//! are not the report go to stderr.

use std::path::Path;

use serde_json::Value;

use super::report::{FixOptions, Fixed, ModelReport, Printing, Totals};
use super::sink::Sink;
use crate::diagnostics::render::Style;
use crate::lint::{Analysis, Settings};
use crate::model::LoadError;
use crate::placer::Placement;

/// What a rendering of a linted model depends on besides the analysis.
#[derive(Debug, Clone, Copy)]
pub struct RenderCx<'a> {
    pub settings: &'a Settings,
    /// Colour, Unicode and width of the text (human).
    pub style: Style,
    /// The folder paths are relative to (the working directory; SARIF's `%SRCROOT%`).
    pub base: &'a Path,
}

/// One output format.
pub trait Emitter: Sync {
    /// Renders one linted model (a model of the lint report, and the final state of a fixed
    /// one): what the cache stores of it, and what this format's writers get back as
    /// [`ModelReport::rendered`]. Runs on the analysis thread.
    fn render(&self, _a: &Analysis, _cx: &RenderCx) -> Value {
        Value::Null
    }

    /// What a rendering depends on besides the model and the settings (the cache key): the
    /// style of text, the base of relative paths.
    fn cache_context(&self, _cx: &RenderCx) -> String {
        String::new()
    }

    /// The writer of the lint report (the default command) for one run, or `None` where this
    /// format has none (or none for `p`: `--statistics`).
    fn lint(&self, _p: &Printing) -> Option<Box<dyn LintWriter>> {
        None
    }

    /// The writer of the `--fix`/`--diff` report for one run, or `None` where this format has
    /// none.
    fn fix(&self, _opts: &FixOptions) -> Option<Box<dyn FixWriter>> {
        None
    }

    /// The writer of the `place` report for one run, or `None` where this format has none.
    fn place(&self) -> Option<Box<dyn PlaceWriter>> {
        None
    }

    /// Whether the data listings of `tables`, `rules` and `verify` have this format (they print
    /// text or JSON of their own).
    fn listings(&self) -> bool {
        false
    }
}

/// Prints the lint report of one run.
pub trait LintWriter {
    /// A group's note (`note: ORT 1.24.4: ...`), unless `-q`: on stderr, unless the format
    /// prints it in the report.
    fn group(&mut self, note: &str, _sink: &mut Sink) {
        eprintln!("{note}");
    }

    /// A model analysed (or read back from the cache), rendered by [`Emitter::render`].
    fn model(&mut self, r: ModelReport, sink: &mut Sink);

    /// A model that could not be read (the run exits 2).
    fn unreadable(&mut self, path: &str, e: LoadError, sink: &mut Sink);

    /// After the last model.
    fn finish(self: Box<Self>, totals: &Totals, sink: &mut Sink);
}

/// Prints the `--fix`/`--diff` report of one run.
pub trait FixWriter {
    /// A model that could not be fixed, and why (the run exits 2).
    fn failed(&mut self, path: &Path, message: &str, sink: &mut Sink);

    /// After the last model: every model that was fixed (or had nothing to fix).
    fn finish(self: Box<Self>, done: &[Fixed], sink: &mut Sink);
}

/// Prints the `place` report of one run.
pub trait PlaceWriter {
    /// One model's placement.
    fn model(&mut self, path: &str, p: &Placement, sink: &mut Sink);

    /// After the last model.
    fn finish(self: Box<Self>, _sink: &mut Sink) {}
}
