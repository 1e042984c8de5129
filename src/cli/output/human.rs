//! `--format human` (the default): rustc-style diagnostics with the model's text view as source,
//! a summary per model and a closing summary; `place` as a summary per graph; `--fix` as a
//! headline per model with what was fixed, and `--diff` as the unified diff itself.

use serde_json::{Value, json};

use super::emitter::{Emitter, FixWriter, LintWriter, PlaceWriter, RenderCx};
use super::report::{
    FixOptions, Fixed, ModelReport, Printing, Totals, node_counts, severity_counts,
};
use super::sink::Sink;
use super::terminal::{plural, render_report};
use crate::diagnostics::human_bytes;
use crate::diagnostics::render;
use crate::lint::Analysis;
use crate::memcpy::Direction;
use crate::model::{LoadError, Model, ProblemLevel};
use crate::placer::{Decision, Outcome, Placement};
use crate::tables::Ep;

pub struct Human;

impl Emitter for Human {
    /// `{"text": the diagnostics, "summary": the model's summary lines}`.
    fn render(&self, a: &Analysis, cx: &RenderCx) -> Value {
        let mut text = render::human(&a.model, &a.findings, cx.style)
            .trim_end()
            .to_string();
        if !text.is_empty() {
            text.push('\n');
        }
        json!({"text": text, "summary": model_summary(a)})
    }

    fn cache_context(&self, cx: &RenderCx) -> String {
        format!("{:?}", cx.style)
    }

    fn lint(&self, p: &Printing) -> Option<Box<dyn LintWriter>> {
        Some(Box::new(Lint {
            quiet: p.quiet,
            statistics: p.statistics,
        }))
    }

    fn fix(&self, opts: &FixOptions) -> Option<Box<dyn FixWriter>> {
        Some(Box::new(Fix { opts: opts.clone() }))
    }

    fn place(&self) -> Option<Box<dyn PlaceWriter>> {
        Some(Box::new(Place))
    }

    fn listings(&self) -> bool {
        true
    }
}

/// A rendering's field (`text` or `summary`).
fn part<'r>(r: &'r ModelReport, key: &str) -> &'r str {
    r.rendered.get(key).and_then(Value::as_str).unwrap_or("")
}

struct Lint {
    quiet: bool,
    statistics: bool,
}

impl LintWriter for Lint {
    fn group(&mut self, note: &str, sink: &mut Sink) {
        if self.statistics {
            eprintln!("{note}");
        } else {
            sink.line(note);
        }
    }

    fn model(&mut self, r: ModelReport, sink: &mut Sink) {
        if self.statistics {
            return;
        }
        let text = part(&r, "text");
        if !text.is_empty() {
            sink.line(text);
        }
        if !self.quiet {
            sink.line(part(&r, "summary"));
        }
    }

    fn unreadable(&mut self, _path: &str, e: LoadError, _sink: &mut Sink) {
        eprintln!("{}", render_report(&miette::Report::new(e)));
    }

    fn finish(self: Box<Self>, totals: &Totals, sink: &mut Sink) {
        if self.statistics {
            let table = statistics(totals);
            if !table.is_empty() {
                sink.line(&table);
            }
        }
        if !self.quiet {
            sink.line(&closing_summary(totals));
        }
    }
}

/// `Found 0 errors and 47 warnings in 1 of 2 models; 19 nodes on CPU, 28 copies; ...`.
fn closing_summary(t: &Totals) -> String {
    let mut s = format!(
        "Found {} and {} in {} of {}",
        plural(t.deny, "error", "errors"),
        plural(t.warn, "warning", "warnings"),
        t.with_findings,
        plural(t.models + t.unreadable, "model", "models"),
    );
    s += &format!(
        "; {} on CPU, {} in all",
        plural(t.cpu_nodes, "node", "nodes"),
        plural(t.copies, "copy", "copies")
    );
    if t.failing_sessions > 0 {
        s += &format!(
            "; session creation fails for {}",
            plural(t.failing_sessions, "model", "models")
        );
    }
    if t.unreadable > 0 {
        s += &format!(
            "; {} could not be read",
            plural(t.unreadable, "model", "models")
        );
    }
    s
}

/// `--statistics`: one line per rule, most frequent first.
fn statistics(t: &Totals) -> String {
    let rows = t.statistics();
    let width = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(code, rule, sev, n)| format!("{n:>6}  {code}  {rule:<width$}  [{sev}]"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `ORT 1.24.4 (all): 52 nodes on CUDA, 33 on CPU, 28 copies`.
pub fn prediction_line(p: &Placement) -> String {
    let (on_provider, cpu) = node_counts(p);
    match &p.outcome {
        Outcome::Ok => format!(
            "ORT {} ({}): {} on {}, {cpu} on CPU, {}",
            p.ort,
            p.level.name(),
            plural(on_provider, "node", "nodes"),
            crate::providers::advised(&p.eps).label,
            plural(p.copies.len(), "copy", "copies")
        ),
        Outcome::LoadFail(e)
        | Outcome::NoKernel(e)
        | Outcome::InitFail(e)
        | Outcome::PartitionFail(e) => format!(
            "ORT {} ({}): session creation fails: {e}",
            p.ort,
            p.level.name()
        ),
    }
}

/// The summary lines of one model: path and structure, prediction and counts, problems.
fn model_summary(a: &Analysis) -> String {
    let (deny, warn) = severity_counts(&a.findings);
    let mut text = summary_line(&a.model);
    text.push('\n');
    let copied = match &a.copied {
        (Some(b), Some(e)) if *b > 0 => {
            format!(" ({} per run at the dims: {e})", human_bytes(*b))
        }
        _ => String::new(),
    };
    text.push_str(&format!(
        "  {}{copied}; {}, {}",
        prediction_line(&a.placement),
        plural(deny, "error", "errors"),
        plural(warn, "warning", "warnings"),
    ));
    for p in &a.model.problems {
        let level = match p.level {
            ProblemLevel::Error => "error",
            ProblemLevel::Warning => "warning",
        };
        let node = p
            .node
            .map(|n| format!(" (node `{}`)", a.model.node(n).name))
            .unwrap_or_default();
        text.push_str(&format!("\n  {level}[{}]: {}{node}", p.code, p.message));
    }
    text
}

/// `path: ir 8, opsets ai.onnx 17 + com.microsoft 1; 1234 nodes in 3 graphs; 56 initializers (12.3 MiB); external data: ...`
pub fn summary_line(m: &Model) -> String {
    let s = m.stats();
    let opsets = m
        .opsets
        .iter()
        .map(|(d, v)| format!("{d} {v}"))
        .collect::<Vec<_>>()
        .join(" + ");
    let mut line = format!(
        "{}: ir {}, opsets {}; {} in {}",
        m.path.display(),
        m.proto.ir_version(),
        if opsets.is_empty() {
            "none".into()
        } else {
            opsets
        },
        plural(s.nodes, "node", "nodes"),
        plural(s.graphs, "graph", "graphs"),
    );
    if s.functions > 0 {
        line += &format!(
            ", {}",
            plural(s.functions, "local function", "local functions")
        );
    }
    line += &format!(
        "; {} ({})",
        plural(s.initializers, "initializer", "initializers"),
        human_bytes(s.initializer_bytes)
    );
    if !s.external_files.is_empty() {
        let files = s
            .external_files
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        line += &format!(
            "; external data: {} in {} ({files})",
            human_bytes(s.external_bytes),
            plural(s.external_files.len(), "file", "files")
        );
    }
    line
}

struct Fix {
    opts: FixOptions,
}

impl FixWriter for Fix {
    fn failed(&mut self, path: &std::path::Path, message: &str, _sink: &mut Sink) {
        eprintln!("error: {}: {message}", path.display());
    }

    fn finish(self: Box<Self>, done: &[Fixed], sink: &mut Sink) {
        for o in done {
            if self.opts.diff {
                // The diff is the output; the summary goes to stderr (as ruff does).
                if !o.diff.is_empty() {
                    sink.line(o.diff.trim_end_matches('\n'));
                }
                eprintln!("{}", o.headline(&self.opts));
                for l in o.details(&self.opts) {
                    eprintln!("{l}");
                }
            } else {
                sink.line(&o.headline(&self.opts));
                for l in o.details(&self.opts) {
                    sink.line(&l);
                }
                let text = part(&o.report, "text");
                if !text.is_empty() {
                    sink.line(text.trim_end_matches('\n'));
                }
                sink.line(part(&o.report, "summary"));
            }
        }
    }
}

struct Place;

impl PlaceWriter for Place {
    fn model(&mut self, path: &str, p: &Placement, sink: &mut Sink) {
        sink.line(&placement(path, p));
    }
}

/// A summary per graph: nodes per provider, copies with value, producer and consumers.
pub fn placement(model: &str, p: &Placement) -> String {
    let mut s = format!("{model}: ORT {} at level {}", p.ort, p.level.name());
    match &p.outcome {
        Outcome::Ok => s += ": session ok\n",
        Outcome::LoadFail(e) | Outcome::NoKernel(e) | Outcome::PartitionFail(e) => {
            s += &format!(": session creation fails\n  {e}\n");
            return s;
        }
        // Nodes are placed and copies inserted before the kernel refuses its node.
        Outcome::InitFail(e) => s += &format!(": session creation fails after placement\n  {e}\n"),
    }
    let provider = crate::providers::advised(&p.eps);
    for (gi, g) in p.session.graphs.iter().enumerate() {
        let (mut on_provider, mut cpu) = (0, 0);
        for (ni, n) in g.live_nodes() {
            match (n.ep, p.decisions.get(crate::session::NodeRef::new(gi, ni))) {
                (_, Some(Decision::Inserted)) => {}
                (Some(Ep::Cpu), _) => cpu += 1,
                (Some(e), _) if e == provider.ep => on_provider += 1,
                _ => {}
            }
        }
        let copies: Vec<_> = p.copies.iter().filter(|c| c.graph == gi).collect();
        s += &format!(
            "  graph `{}`: {} on {}, {cpu} on CPU, {}\n",
            g.name,
            plural(on_provider, "node", "nodes"),
            provider.label,
            plural(copies.len(), "copy", "copies")
        );
        for c in copies {
            let dir = match c.direction {
                Direction::FromHost => "MemcpyFromHost after",
                Direction::ToHost => "MemcpyToHost before",
            };
            s += &format!("    {dir} `{}`\n", c.value);
        }
    }
    s
}
