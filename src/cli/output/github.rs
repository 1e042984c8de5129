//! GitHub Actions: workflow-command annotations (one per group of findings with the same rule
//! and cause: GitHub shows only a few per step) and the Markdown job summary for
//! `$GITHUB_STEP_SUMMARY` (one table row per model, then one section per model with findings).
//! `--fix`: a notice per model with what was fixed. No `place` report, no `--statistics`.

use std::path::Path;

use serde_json::{Value, json};

use super::emitter::{Emitter, FixWriter, LintWriter, RenderCx};
use super::human::prediction_line;
use super::report::{FixOptions, Fixed, ModelReport, Printing, Totals};
use super::sink::{Sink, append_regular};
use crate::diagnostics::{Finding, Severity};
use crate::lint::Analysis;
use crate::model::{LoadError, Model};

pub struct Github;

impl Emitter for Github {
    /// `{"lines": the annotations, "row": the job summary's row, "section": its section}`.
    fn render(&self, a: &Analysis, _cx: &RenderCx) -> Value {
        let shown = a.model.path.display().to_string();
        json!({
            "lines": annotations(&a.model, &a.findings),
            "row": summary_row(&shown, &prediction_line(&a.placement), &a.findings),
            "section": summary_section(&shown, &a.findings),
        })
    }

    fn lint(&self, p: &Printing) -> Option<Box<dyn LintWriter>> {
        (!p.statistics).then(|| Box::new(Lint::default()) as Box<dyn LintWriter>)
    }

    fn fix(&self, opts: &FixOptions) -> Option<Box<dyn FixWriter>> {
        Some(Box::new(Fix { opts: opts.clone() }))
    }
}

/// A rendering's annotations.
fn lines(r: &ModelReport) -> impl Iterator<Item = &str> {
    r.rendered
        .get("lines")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// A rendering's text field (`row` or `section`).
fn part(r: &ModelReport, key: &str) -> String {
    r.rendered
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

#[derive(Default)]
struct Lint {
    rows: Vec<String>,
    sections: Vec<String>,
}

impl LintWriter for Lint {
    fn model(&mut self, r: ModelReport, sink: &mut Sink) {
        for line in lines(&r) {
            sink.line(line);
        }
        self.rows.push(part(&r, "row"));
        self.sections.push(part(&r, "section"));
    }

    fn unreadable(&mut self, path: &str, e: LoadError, sink: &mut Sink) {
        sink.line(&load_error(path, &e.to_string()));
    }

    /// The job summary, appended to `$GITHUB_STEP_SUMMARY` when it is set.
    fn finish(self: Box<Self>, _totals: &Totals, _sink: &mut Sink) {
        if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY") {
            let text = summary(&self.rows, &self.sections);
            if let Err(e) = append_regular(Path::new(&path), &text) {
                eprintln!(
                    "warning: cannot write the job summary to {}: {e}",
                    Path::new(&path).display()
                );
            }
        }
    }
}

struct Fix {
    opts: FixOptions,
}

impl FixWriter for Fix {
    fn failed(&mut self, path: &Path, message: &str, sink: &mut Sink) {
        sink.line(&format!(
            "::error file={},title=onnx-lint --fix::{}",
            escape_property(&path.display().to_string()),
            escape_data(message)
        ));
    }

    fn finish(self: Box<Self>, done: &[Fixed], sink: &mut Sink) {
        for o in done {
            sink.line(&format!(
                "::notice file={},title=onnx-lint --fix::{}",
                escape_property(&o.path.display().to_string()),
                escape_data(&format!(
                    "{} ({})",
                    o.headline(&self.opts),
                    o.details(&self.opts).join("; ").trim()
                ))
            ));
            for l in lines(&o.report) {
                sink.line(l);
            }
        }
    }
}

/// Escapes a workflow-command message (`%`, CR, LF).
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow-command property (also `:` and `,`).
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// Findings grouped by rule and cause, in first-appearance order.
fn groups(findings: &[Finding]) -> Vec<Vec<&Finding>> {
    let mut groups: Vec<Vec<&Finding>> = Vec::new();
    for f in findings {
        match groups.iter_mut().find(|g| {
            g.first()
                .is_some_and(|x| x.code == f.code && x.cause == f.cause)
        }) {
            Some(g) => g.push(f),
            None => groups.push(vec![f]),
        }
    }
    groups
}

/// The annotations of one model.
pub fn annotations(model: &Model, findings: &[Finding]) -> Vec<String> {
    let file = model.path.to_string_lossy().replace('\\', "/");
    groups(findings)
        .iter()
        .filter_map(|g| {
            let f = *g.first()?;
            let level = match f.severity {
                Severity::Deny => "error",
                Severity::Warn => "warning",
                Severity::Allow => "notice",
            };
            let title = if g.len() > 1 {
                format!("{} {} ({} findings)", f.code, f.rule, g.len())
            } else {
                format!("{} {}", f.code, f.rule)
            };
            let mut message = f.message.clone();
            if g.len() > 1 {
                message.push_str(&format!(" (and {} more with the same cause)", g.len() - 1));
            }
            if let Some(h) = &f.help {
                message.push_str(&format!("\nfix: {h}"));
            }
            Some(format!(
                "::{level} file={},title={}::{}",
                escape_property(&file),
                escape_property(&title),
                escape_data(&message)
            ))
        })
        .collect()
}

/// The annotation of a model that could not be read.
pub fn load_error(path: &str, message: &str) -> String {
    format!(
        "::error file={},title=load error::{}",
        escape_property(path),
        escape_data(message)
    )
}

/// The job summary's heading and table header.
pub fn summary_header() -> String {
    "## cargo onnx-lint\n\n| model | prediction | deny | warn |\n|---|---|---:|---:|\n".into()
}

/// One model's table row (one line, ending in a newline).
pub fn summary_row(model: &str, prediction: &str, findings: &[Finding]) -> String {
    let count = |s| findings.iter().filter(|f| f.severity == s).count();
    format!(
        "| `{model}` | {} | {} | {} |\n",
        prediction.replace('|', "\\|").replace('\n', " "),
        count(Severity::Deny),
        count(Severity::Warn)
    )
}

/// One model's section: its findings grouped by rule and cause; empty without findings.
pub fn summary_section(model: &str, findings: &[Finding]) -> String {
    if findings.is_empty() {
        return String::new();
    }
    let mut s = format!("\n### `{model}`\n\n| rule | finding | count |\n|---|---|---:|\n");
    for g in groups(findings) {
        if let Some(f) = g.first() {
            s.push_str(&format!(
                "| {} {} | {} | {} |\n",
                f.code,
                f.rule,
                f.message.replace('|', "\\|").replace('\n', " "),
                g.len()
            ));
        }
    }
    s
}

/// A whole job summary: the header, every row, then every section.
pub fn summary(rows: &[String], sections: &[String]) -> String {
    let mut s = summary_header();
    for r in rows {
        s.push_str(r);
    }
    for sec in sections {
        s.push_str(sec);
    }
    s
}
