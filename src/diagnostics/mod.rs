//! Findings: what a rule reports, with its severity, the node it is about, labels, the suggested
//! fix and the evidence (the kernel-table row that decided). Rendering lives in `render`.
//!
//! Knows nothing about how findings are computed.

pub mod fix;
pub mod render;

pub use fix::{Fix, FixSafety};

use std::fmt;

use crate::model::NodeId;

/// How much a finding matters. `Allow` findings are not reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Allow,
    Warn,
    Deny,
}

impl Severity {
    pub fn parse(s: &str) -> Option<Severity> {
        match s {
            "allow" => Some(Severity::Allow),
            "warn" => Some(Severity::Warn),
            "deny" => Some(Severity::Deny),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Severity::Allow => "allow",
            Severity::Warn => "warn",
            Severity::Deny => "deny",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A value a finding points at (an input of the node, a copied value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueLabel {
    pub name: String,
    pub text: String,
}

/// One finding of one rule.
#[derive(Debug, Clone)]
pub struct Finding {
    /// Stable rule code (`OL101`).
    pub code: &'static str,
    /// Rule name (`registration-gap`).
    pub rule: &'static str,
    pub severity: Severity,
    /// One line: what ORT will do and why.
    pub message: String,
    /// The model node the finding is about, when there is one.
    pub node: Option<NodeId>,
    /// Name and op of that node (also for nodes ORT created, which have no model node).
    pub node_name: Option<String>,
    pub op: Option<String>,
    /// Graph name.
    pub graph: String,
    /// Values to label (the node's inputs, the copied value).
    pub values: Vec<ValueLabel>,
    /// The concrete edit that fixes it.
    pub help: Option<String>,
    /// Why: the table row that decided, the chain found, ...
    pub evidence: Vec<String>,
    /// Findings with the same cause are grouped in the output.
    pub cause: String,
    /// Bytes moved per run, evaluated at the configured dims (`--dim`, `dims`), when known.
    pub bytes: Option<u64>,
    /// The same size as a symbolic expression over the model's dim names (`2·batch·seq·64 B`).
    pub bytes_expr: Option<String>,
    /// The machine-readable edit that fixes the finding, applied by `--fix`.
    pub fix: Option<Fix>,
    /// Costs nothing at the simulated release (no copy moves data because of it): reported only
    /// when the `zero-cost` group is enabled.
    pub zero_cost: bool,
    /// Python source location from the node's metadata (`pkg.torch.onnx.stack_trace`, ...).
    pub source_location: Option<String>,
}

impl Finding {
    pub fn new(
        code: &'static str,
        rule: &'static str,
        severity: Severity,
        message: String,
    ) -> Finding {
        Finding {
            code,
            rule,
            severity,
            message,
            node: None,
            node_name: None,
            op: None,
            graph: String::new(),
            values: Vec::new(),
            help: None,
            evidence: Vec::new(),
            cause: String::new(),
            bytes: None,
            bytes_expr: None,
            fix: None,
            zero_cost: false,
            source_location: None,
        }
    }
}

/// Findings of one model, sorted for output.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// Groups of findings with the same rule and cause, in first-appearance order.
    pub fn groups(&self) -> Vec<Vec<&Finding>> {
        let mut groups: Vec<Vec<&Finding>> = Vec::new();
        for f in &self.findings {
            match groups
                .iter_mut()
                .find(|g| g[0].code == f.code && g[0].cause == f.cause)
            {
                Some(g) => g.push(f),
                None => groups.push(vec![f]),
            }
        }
        groups
    }
}

/// Human-readable byte counts: `512 B`, `1.5 KiB`, `2.0 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
