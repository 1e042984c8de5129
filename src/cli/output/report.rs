//! The reports the commands hand to the emitters: one linted model ([`ModelReport`]), the totals
//! of a lint run ([`Totals`]), one fixed model ([`Fixed`]). The commands fill them; the emitters
//! (`human.rs`, `json.rs`, ...) render them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::emitter::RenderCx;
use super::format::Format;
use super::terminal::ColorChoice;
use crate::diagnostics::render::Style;
use crate::diagnostics::{Finding, Fix, Severity};
use crate::fix;
use crate::lint::{Analysis, Settings};
use crate::placer::{Outcome, Placement};
use crate::tables::Ep;

/// Exit code of a model with nothing at deny level (`cli::EXIT_OK`).
const EXIT_OK: u8 = 0;
/// Exit code of a model with findings at deny level (`cli::EXIT_FINDINGS`).
const EXIT_FINDINGS: u8 = 1;

/// How the lint report is printed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Printing {
    pub format: Format,
    /// `-q`: the findings only.
    pub quiet: bool,
    /// `--statistics`: the number of findings per rule instead of the findings.
    pub statistics: bool,
    pub exit_zero: bool,
    pub color: ColorChoice,
}

/// One model's lint report: its counts and its rendering in the run's format
/// ([`super::Emitter::render`]). What the cache stores (serialised in place, read back by
/// [`ModelReport::from_json`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelReport {
    /// `EXIT_OK` or `EXIT_FINDINGS`.
    pub exit: u8,
    /// The format's rendering of the model, which only that format's emitter reads.
    pub rendered: Value,
    pub deny: usize,
    pub warn: usize,
    pub cpu_nodes: usize,
    pub copies: usize,
    pub session_fails: bool,
    /// (code, rule, severity, count) of the findings.
    pub per_rule: Vec<(String, String, String, usize)>,
}

impl ModelReport {
    /// Renders an analysis for `format`.
    pub fn new(
        a: &Analysis,
        settings: &Settings,
        format: Format,
        style: Style,
        base: &Path,
    ) -> ModelReport {
        let cx = RenderCx {
            settings,
            style,
            base,
        };
        ModelReport::of(a, format.emitter().render(a, &cx))
    }

    /// The counts of an analysis, with its rendering.
    pub fn of(a: &Analysis, rendered: Value) -> ModelReport {
        let (deny, warn) = severity_counts(&a.findings);
        let (_, cpu) = node_counts(&a.placement);
        let mut per_rule: Vec<(String, String, String, usize)> = Vec::new();
        for f in &a.findings {
            match per_rule.iter_mut().find(|r| r.0 == f.code) {
                Some(r) => r.3 += 1,
                None => per_rule.push((
                    f.code.to_string(),
                    f.rule.to_string(),
                    f.severity.name().to_string(),
                    1,
                )),
            }
        }
        ModelReport {
            exit: if a.denies() { EXIT_FINDINGS } else { EXIT_OK },
            rendered,
            deny,
            warn,
            cpu_nodes: cpu,
            copies: a.placement.copies.len(),
            session_fails: !matches!(a.placement.outcome, Outcome::Ok),
            per_rule,
        }
    }

    /// Reads back what `serde_json::to_value` made of a report (the cache).
    pub fn from_json(v: &Value) -> Option<ModelReport> {
        let n = |k: &str| v.get(k)?.as_u64().and_then(|x| usize::try_from(x).ok());
        Some(ModelReport {
            exit: u8::try_from(v.get("exit")?.as_u64()?).ok()?,
            rendered: v.get("rendered")?.clone(),
            deny: n("deny")?,
            warn: n("warn")?,
            cpu_nodes: n("cpu_nodes")?,
            copies: n("copies")?,
            session_fails: v.get("session_fails")?.as_bool()?,
            per_rule: serde_json::from_value(v.get("per_rule")?.clone()).ok()?,
        })
    }
}

/// Totals over the models of a lint run, for the closing summary and `--statistics`.
#[derive(Debug, Default)]
pub struct Totals {
    pub models: usize,
    pub with_findings: usize,
    pub unreadable: usize,
    pub deny: usize,
    pub warn: usize,
    pub cpu_nodes: usize,
    pub copies: usize,
    pub failing_sessions: usize,
    /// (code, rule, severity) → count.
    pub per_rule: BTreeMap<(String, String, String), usize>,
}

impl Totals {
    pub fn add(&mut self, r: &ModelReport) {
        self.models += 1;
        if r.deny + r.warn > 0 {
            self.with_findings += 1;
        }
        self.deny += r.deny;
        self.warn += r.warn;
        self.cpu_nodes += r.cpu_nodes;
        self.copies += r.copies;
        self.failing_sessions += usize::from(r.session_fails);
        for (code, rule, severity, n) in &r.per_rule {
            *self
                .per_rule
                .entry((code.clone(), rule.clone(), severity.clone()))
                .or_default() += n;
        }
    }

    /// The per-rule counts, most frequent first: (code, rule, severity, count).
    pub fn statistics(&self) -> Vec<(&str, &str, &str, usize)> {
        let mut rows: Vec<(&(String, String, String), &usize)> = self.per_rule.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        rows.into_iter()
            .map(|((code, rule, sev), n)| (code.as_str(), rule.as_str(), sev.as_str(), *n))
            .collect()
    }
}

/// The fix flags of the default command.
#[derive(Debug, Clone, Default)]
pub struct FixOptions {
    /// `--fix`: write the fixed model.
    pub write: bool,
    /// `--diff`: print the change as a unified diff of the text view; write nothing.
    pub diff: bool,
    /// `--unsafe-fixes`: apply unsafe fixes too.
    pub unsafe_fixes: bool,
    /// `--exit-non-zero-on-fix`: exit 1 when a file was changed.
    pub exit_non_zero_on_fix: bool,
    /// `-o/--output`: where the fixed model goes (one model).
    pub output: Option<PathBuf>,
}

/// What one model's fix run did.
#[derive(Debug)]
pub struct Fixed {
    pub path: PathBuf,
    pub written: Option<PathBuf>,
    pub applied: Vec<Fix>,
    pub skipped: Vec<(Fix, String)>,
    /// Unsafe fixes left out (no `--unsafe-fixes`).
    pub unsafe_left: Vec<Fix>,
    pub removed_nodes: Vec<String>,
    pub rounds: usize,
    pub converged: bool,
    /// Stopped at this many rounds when it did not converge.
    pub max_rounds: usize,
    pub before: FixCounts,
    pub after: FixCounts,
    /// `--diff`: the unified diff of the text view (empty when nothing changed or no `--diff`).
    pub diff: String,
    /// The final analysis, rendered in the run's format.
    pub report: ModelReport,
}

/// Copies, CPU nodes and findings of one analysis, before and after the fixes.
#[derive(Debug, Clone, Copy, Default)]
pub struct FixCounts {
    pub copies: usize,
    pub cpu_nodes: usize,
    pub findings: usize,
}

impl FixCounts {
    pub fn of(a: &Analysis) -> FixCounts {
        FixCounts {
            copies: a.placement.copies.len(),
            cpu_nodes: node_counts(&a.placement).1,
            findings: a.findings.len(),
        }
    }
}

impl Fixed {
    /// `28 → 0 copies, 19 → 0 CPU nodes`.
    pub fn change_line(&self) -> String {
        format!(
            "{} → {} cop{}, {} → {} CPU node{}",
            self.before.copies,
            self.after.copies,
            if self.after.copies == 1 { "y" } else { "ies" },
            self.before.cpu_nodes,
            self.after.cpu_nodes,
            if self.after.cpu_nodes == 1 { "" } else { "s" },
        )
    }

    /// The headline of one model: what happened to the file, then the change.
    pub fn headline(&self, opts: &FixOptions) -> String {
        let n = self.applied.len();
        let what = if n == 0 {
            "nothing to fix".to_string()
        } else if opts.diff {
            format!("would apply {n} fix{}", if n == 1 { "" } else { "es" })
        } else {
            format!("applied {n} fix{}", if n == 1 { "" } else { "es" })
        };
        let whither = match &self.written {
            Some(p) if *p != self.path => format!(", written to {}", p.display()),
            _ => String::new(),
        };
        format!(
            "{}: {what}{whither}: {}",
            self.path.display(),
            self.change_line()
        )
    }

    /// The lines below the headline: each fix applied, skipped or left out.
    pub fn details(&self, opts: &FixOptions) -> Vec<String> {
        let mut lines = Vec::new();
        let verb = if opts.diff { "would fix" } else { "fixed" };
        for f in &self.applied {
            lines.push(format!("  {verb}: {}", fix::describe(f)));
        }
        if !self.removed_nodes.is_empty() {
            lines.push(format!(
                "  removed {} node{} left without consumers: {}",
                self.removed_nodes.len(),
                if self.removed_nodes.len() == 1 {
                    ""
                } else {
                    "s"
                },
                self.removed_nodes.join(", ")
            ));
        }
        for (f, why) in &self.skipped {
            lines.push(format!("  not fixed: {}: {why}", fix::describe(f)));
        }
        for f in &self.unsafe_left {
            lines.push(format!(
                "  unsafe, not applied (use --unsafe-fixes): {}",
                fix::describe(f)
            ));
        }
        if !self.converged {
            lines.push(format!(
                "  stopped after {} rounds: the fixes did not converge",
                self.max_rounds
            ));
        }
        lines
    }
}

/// Nodes on the provider before the CPU (copies not counted) and on the CPU.
pub fn node_counts(p: &Placement) -> (usize, usize) {
    let provider = crate::providers::advised(&p.eps).ep;
    let (mut on_provider, mut cpu) = (0, 0);
    for g in &p.session.graphs {
        for (_, n) in g.live_nodes() {
            match n.ep {
                Some(Ep::Cpu) => cpu += 1,
                Some(e) if e == provider && !n.op.starts_with("Memcpy") => on_provider += 1,
                _ => {}
            }
        }
    }
    (on_provider, cpu)
}

/// Findings at deny and at warn level.
pub fn severity_counts(findings: &[Finding]) -> (usize, usize) {
    let count = |level| findings.iter().filter(|f| f.severity == level).count();
    (count(Severity::Deny), count(Severity::Warn))
}
