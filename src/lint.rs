//! The composition root of a lint run: load → place → rules. Pure: no printing, no files
//! besides the model; the command line (`cli/`) resolves [`Settings`] and renders the
//! [`Analysis`].

use crate::diagnostics::{Finding, Severity};
use crate::model::{Model, ProblemLevel};
use crate::placer::{self, Placement};
use crate::rules::{self, Severities};
use crate::tables::{self, Bundled};

/// Everything an analysis needs, resolved from the command line and the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub release: &'static Bundled,
    /// Why that release: `--ort`, the configuration, Cargo.lock, or the default (one phrase).
    pub release_reason: String,
    pub options: placer::Options,
    pub severities: Severities,
    /// Dim values that sizes are evaluated at: `dims` in the configuration, then `--dim`.
    pub dims: rules::cost::Dims,
}

/// One analysed model.
pub struct Analysis {
    pub model: Model,
    pub placement: Placement,
    pub findings: Vec<Finding>,
    /// Bytes every copy moves per run, in all: at the dims, and as an expression.
    pub copied: (Option<u64>, Option<String>),
}

impl Analysis {
    /// Whether the model has a finding at deny level or a structural error.
    pub fn denies(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Deny)
            || self
                .model
                .problems
                .iter()
                .any(|p| p.level == ProblemLevel::Error)
    }
}

/// Places a model and runs the rules.
pub fn analyse(model: Model, s: &Settings) -> Analysis {
    let table = s.release.table();
    let placement = placer::place(&model, table, &s.options);
    let releases: Vec<(&'static str, &tables::KernelTable)> = tables::bundled()
        .iter()
        .map(|b| (b.version, b.table()))
        .collect();
    let cx = rules::Context::new(&model, &placement, table, &releases, &s.dims);
    let findings = rules::check(&cx, &s.severities);
    let copied = rules::cost::copied_per_run(&cx);
    drop(cx);
    Analysis {
        model,
        placement,
        findings,
        copied,
    }
}
