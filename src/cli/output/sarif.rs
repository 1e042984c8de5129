//! SARIF 2.1.0: one run, the rules' metadata, each finding as a result whose artifact is the
//! model file (a URI relative to `%SRCROOT%`, the folder the command ran in), and one invocation
//! that says whether every model could be read. `--fix` adds the fixes as the run's
//! `properties.fixes`. No `place` report, no `--statistics`.

use std::path::{Component, Path, PathBuf};

use miette::Diagnostic;
use serde_json::{Value, json};

use super::emitter::{Emitter, FixWriter, LintWriter, RenderCx};
use super::json::fix_json;
use super::report::{FixOptions, Fixed, ModelReport, Printing, Totals};
use super::sink::Sink;
use super::terminal::render_report;
use crate::diagnostics::{Finding, Severity};
use crate::lint::Analysis;
use crate::model::LoadError;
use crate::rules::{self, RuleMeta};

pub struct Sarif;

impl Emitter for Sarif {
    /// The array of the model's results.
    fn render(&self, a: &Analysis, cx: &RenderCx) -> Value {
        Value::Array(results(&a.model.path, cx.base, &a.findings, &rules::all()))
    }

    fn cache_context(&self, cx: &RenderCx) -> String {
        format!("base {}", cx.base.display())
    }

    fn lint(&self, p: &Printing) -> Option<Box<dyn LintWriter>> {
        (!p.statistics).then(|| {
            Box::new(Lint {
                base: std::env::current_dir().unwrap_or_default(),
                results: Vec::new(),
                failures: Vec::new(),
            }) as Box<dyn LintWriter>
        })
    }

    fn fix(&self, _opts: &FixOptions) -> Option<Box<dyn FixWriter>> {
        Some(Box::new(Fix))
    }
}

struct Lint {
    base: PathBuf,
    results: Vec<Value>,
    failures: Vec<Failure>,
}

impl LintWriter for Lint {
    fn model(&mut self, mut r: ModelReport, _sink: &mut Sink) {
        if let Value::Array(results) = r.rendered.take() {
            self.results.extend(results);
        }
    }

    fn unreadable(&mut self, path: &str, e: LoadError, _sink: &mut Sink) {
        self.failures.push(Failure {
            path: path.to_string(),
            code: e.code().map(|c| c.to_string()),
            message: e.to_string(),
        });
        eprintln!("{}", render_report(&miette::Report::new(e)));
    }

    fn finish(self: Box<Self>, _totals: &Totals, sink: &mut Sink) {
        let log = log(
            self.results,
            &self.failures,
            &self.base,
            &rules::all(),
            env!("CARGO_PKG_VERSION"),
        );
        sink.json(&log);
    }
}

struct Fix;

impl FixWriter for Fix {
    fn failed(&mut self, path: &Path, message: &str, _sink: &mut Sink) {
        eprintln!("error: {}: {message}", path.display());
    }

    fn finish(self: Box<Self>, done: &[Fixed], sink: &mut Sink) {
        let results: Vec<Value> = done
            .iter()
            .flat_map(|o| o.report.rendered.as_array().cloned().unwrap_or_default())
            .collect();
        let base = std::env::current_dir().unwrap_or_default();
        let mut log = log(
            results,
            &[],
            &base,
            &rules::all(),
            env!("CARGO_PKG_VERSION"),
        );
        log["runs"][0]["properties"] = json!({
            "fixes": done.iter().map(|o| {
                let mut v = fix_json(o);
                v["model"] = Value::String(o.path.display().to_string());
                v
            }).collect::<Vec<_>>(),
        });
        sink.json(&log);
    }
}

/// The `uriBaseId` of every relative artifact URI.
pub const SRCROOT: &str = "%SRCROOT%";

/// A model that could not be read, for `toolExecutionNotifications`.
pub struct Failure {
    pub path: String,
    pub code: Option<String>,
    pub message: String,
}

/// Percent-encodes a path for a URI (RFC 3986: unreserved characters and `/` stay).
fn encode(path: &str) -> String {
    let mut s = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// `path` relative to `base` as URI segments (`.` dropped, `..` resolved lexically), or `None`
/// when it leaves `base`.
fn relative_segments(path: &Path, base: &Path) -> Option<Vec<String>> {
    let rel = if path.is_absolute() {
        path.strip_prefix(base).ok()?
    } else {
        path
    };
    let mut parts: Vec<String> = Vec::new();
    for c in rel.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts)
}

/// The file URI of an absolute folder, with a trailing slash.
fn folder_uri(dir: &Path) -> String {
    let mut s = dir.to_string_lossy().replace('\\', "/");
    if !s.starts_with('/') {
        s.insert(0, '/');
    }
    if !s.ends_with('/') {
        s.push('/');
    }
    format!("file://{}", encode(&s))
}

/// An `artifactLocation`: relative to `%SRCROOT%` when the model is inside `base`, else an
/// absolute `file://` URI.
pub fn artifact_location(path: &Path, base: &Path) -> Value {
    match relative_segments(path, base) {
        Some(parts) if !parts.is_empty() => {
            json!({"uri": encode(&parts.join("/")), "uriBaseId": SRCROOT})
        }
        _ => {
            let abs = if path.is_absolute() {
                path.to_path_buf()
            } else {
                base.join(path)
            };
            let mut s = abs.to_string_lossy().replace('\\', "/");
            if !s.starts_with('/') {
                s.insert(0, '/');
            }
            json!({"uri": format!("file://{}", encode(&s))})
        }
    }
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Deny => "error",
        Severity::Warn => "warning",
        Severity::Allow => "note",
    }
}

fn first_paragraph(doc: &str) -> String {
    doc.split("\n\n")
        .map(str::trim)
        .find(|p| !p.starts_with('#') && !p.is_empty())
        .unwrap_or("")
        .replace('\n', " ")
}

/// The results of one model's findings.
pub fn results(path: &Path, base: &Path, findings: &[Finding], rules: &[&RuleMeta]) -> Vec<Value> {
    let location = artifact_location(path, base);
    findings
        .iter()
        .map(|f| {
            let mut text = f.message.clone();
            if let Some(h) = &f.help {
                text.push_str(&format!(" Fix: {h}"));
            }
            let node = f.node_name.clone().unwrap_or_default();
            let mut result = json!({
                "ruleId": f.code,
                "level": level(f.severity),
                "message": {"text": text},
                "locations": [{
                    "physicalLocation": {"artifactLocation": location},
                    "logicalLocations": [{
                        "name": f.node_name.clone().unwrap_or_else(|| f.graph.clone()),
                        "fullyQualifiedName": format!("{}/{node}", f.graph),
                        "kind": "member",
                    }],
                }],
                "partialFingerprints": {"onnxLint/v1": format!(
                    "{}:{}:{node}:{}",
                    f.code,
                    f.graph,
                    f.values.first().map(|v| v.name.as_str()).unwrap_or("")
                )},
            });
            if let Some(i) = rules.iter().position(|r| r.code == f.code) {
                result["ruleIndex"] = json!(i);
            }
            result
        })
        .collect()
}

/// The whole log: the rules, the results, and one invocation (`executionSuccessful` is false
/// when a model could not be read; each such model is a notification).
pub fn log(
    results: Vec<Value>,
    failures: &[Failure],
    base: &Path,
    rules: &[&RuleMeta],
    version: &str,
) -> Value {
    let rules_json: Vec<Value> = rules
        .iter()
        .map(|r| {
            json!({
                "id": r.code,
                "name": r.name,
                "shortDescription": {"text": r.summary},
                "fullDescription": {"text": first_paragraph(&r.doc_text())},
                "help": {"text": r.doc_text(), "markdown": r.doc_text()},
                "helpUri": format!("https://github.com/cargo-onnx-lint/cargo-onnx-lint/blob/main/rules/{}", r.file_name()),
                "defaultConfiguration": {"level": level(r.default)},
            })
        })
        .collect();
    let notifications: Vec<Value> = failures
        .iter()
        .map(|f| {
            let mut n = json!({
                "level": "error",
                "message": {"text": f.message},
                "locations": [{"physicalLocation": {"artifactLocation": artifact_location(Path::new(&f.path), base)}}],
            });
            if let Some(code) = &f.code {
                n["descriptor"] = json!({"id": code});
            }
            n
        })
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "cargo-onnx-lint",
                "version": version,
                "informationUri": "https://github.com/cargo-onnx-lint/cargo-onnx-lint",
                "rules": rules_json,
            }},
            "originalUriBaseIds": {SRCROOT: {"uri": folder_uri(base)}},
            "invocations": [{
                "executionSuccessful": failures.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
        }],
    })
}
