//! Rendering findings: miette for humans (labels into the model's ONNX text view), JSON, SARIF
//! 2.1.0 and GitHub workflow commands. Returns strings; printing is the caller's job.

use std::fmt;

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan,
};
use serde_json::{Value, json};

use super::{Finding, Severity};
use crate::model::text::{GraphPath, Listing};
use crate::model::{Model, NodeId};
use crate::rules::RuleMeta;

/// How the human form is drawn.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
    pub unicode: bool,
    pub width: usize,
}

/// The text-view graph path of a model node's graph.
pub fn graph_path(model: &Model, node: NodeId) -> GraphPath {
    let graph = model.graph(model.node(node).graph);
    let mut path = GraphPath::main();
    let Some(mut gp) = model.proto.graph.as_ref() else {
        return path;
    };
    for step in &graph.path {
        let Some(attr) = gp
            .node
            .get(step.node_index as usize)
            .and_then(|n| n.attribute.get(step.attribute_index as usize))
        else {
            break;
        };
        path = path.child(
            step.node_index as usize,
            attr.name(),
            step.graph_index.unwrap_or(0) as usize,
        );
        let next = match step.graph_index {
            None => attr.g.as_ref(),
            Some(i) => attr.graphs.get(i as usize),
        };
        let Some(next) = next else { break };
        gp = next;
    }
    path
}

/// One finding (with the others of its group) as a miette diagnostic.
struct Rendered<'a> {
    finding: &'a Finding,
    more: &'a [&'a Finding],
    source: Option<&'a NamedSource<String>>,
    labels: Vec<LabeledSpan>,
}

impl fmt::Debug for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.finding.message)
    }
}

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.finding.message)
    }
}

impl std::error::Error for Rendered<'_> {}

impl Diagnostic for Rendered<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(format!(
            "{}({})",
            self.finding.code, self.finding.rule
        )))
    }

    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.finding.severity {
            Severity::Deny => miette::Severity::Error,
            Severity::Warn => miette::Severity::Warning,
            Severity::Allow => miette::Severity::Advice,
        })
    }

    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        let f = self.finding;
        let mut lines = Vec::new();
        if let Some(h) = &f.help {
            lines.push(format!("fix: {h}"));
        }
        for e in &f.evidence {
            lines.push(format!("why: {e}"));
        }
        if let Some(loc) = &f.source_location {
            lines.push(format!("source: {loc}"));
        }
        match (f.bytes, &f.bytes_expr) {
            (Some(b), Some(e)) if *e != format!("{b} B") => lines.push(format!(
                "size: {} per run at the dims ({e})",
                super::human_bytes(b)
            )),
            (Some(b), None) => lines.push(format!("size: {} per run", super::human_bytes(b))),
            _ => {}
        }
        if !self.more.is_empty() {
            let total: u64 =
                self.more.iter().filter_map(|m| m.bytes).sum::<u64>() + f.bytes.unwrap_or(0);
            let names: Vec<String> = self
                .more
                .iter()
                .take(6)
                .map(|m| match (m.code, &m.node_name, m.values.first()) {
                    ("OL201", _, Some(v)) | (_, None, Some(v)) => format!("`{}`", v.name),
                    (_, Some(n), _) => format!("`{n}`"),
                    _ => String::new(),
                })
                .collect();
            let rest = self.more.len().saturating_sub(names.len());
            lines.push(format!(
                "and {} more with the same cause: {}{}{}",
                self.more.len(),
                names.join(", "),
                if rest > 0 {
                    format!(", … ({rest} more)")
                } else {
                    String::new()
                },
                if total > 0 {
                    format!("; {} per run in all", super::human_bytes(total))
                } else {
                    String::new()
                }
            ));
        }
        (!lines.is_empty()).then(|| Box::new(lines.join("\n")) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        if self.labels.is_empty() {
            return None;
        }
        self.source.map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        if self.labels.is_empty() || self.source.is_none() {
            return None;
        }
        Some(Box::new(self.labels.clone().into_iter()))
    }
}

fn labels_for(model: &Model, listing: &Listing, f: &Finding) -> Vec<LabeledSpan> {
    let Some(node) = f.node else {
        return Vec::new();
    };
    let path = graph_path(model, node);
    let index = model.node(node).index as usize;
    let mut out = Vec::new();
    if let Some(span) = listing.node_span(&path, index) {
        let text = match (&f.op, &f.node_name) {
            (Some(op), _) => format!("{op} ({})", f.code),
            _ => f.code.to_string(),
        };
        out.push(LabeledSpan::new_primary_with_span(Some(text), span));
    }
    // Label values defined by nodes or initializers; a graph input's span is the (often very long)
    // graph signature.
    let graph = model.graph(model.node(node).graph);
    for v in f.values.iter().take(3) {
        if graph
            .lookup(&v.name)
            .is_some_and(|id| matches!(model.value(id).def, crate::model::ValueDef::GraphInput(_)))
        {
            continue;
        }
        if let Some(span) = listing.value_span(&path, &v.name)
            && !out.iter().any(|l: &LabeledSpan| l.inner() == &span)
        {
            out.push(LabeledSpan::new_with_span(Some(v.text.clone()), span));
        }
    }
    out
}

/// The human form of one model's findings: one diagnostic per group (rule and cause), largest
/// groups of copies summarised rather than repeated.
pub fn human(model: &Model, findings: &[Finding], style: Style) -> String {
    if findings.is_empty() {
        return String::new();
    }
    let needs_source = findings.iter().any(|f| f.node.is_some());
    let listing = needs_source.then(|| crate::model::text::print_model(&model.proto));
    let source = listing.as_ref().map(|l| {
        NamedSource::new(
            format!("{} (ONNX text view)", model.path.display()),
            l.text.clone(),
        )
    });
    let theme = match (style.unicode, style.color) {
        (true, true) => GraphicalTheme::unicode(),
        (true, false) => GraphicalTheme::unicode_nocolor(),
        (false, _) => GraphicalTheme::none(),
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(style.width)
        .with_links(false)
        .with_context_lines(1);
    let mut groups: Vec<Vec<&Finding>> = Vec::new();
    for f in findings {
        match groups
            .iter_mut()
            .find(|g| g[0].code == f.code && g[0].cause == f.cause)
        {
            Some(g) => g.push(f),
            None => groups.push(vec![f]),
        }
    }
    let mut out = String::new();
    for g in &groups {
        let (first, more) = (g[0], &g[1..]);
        let labels = match &listing {
            Some(l) => labels_for(model, l, first),
            None => Vec::new(),
        };
        let d = Rendered {
            finding: first,
            more,
            source: source.as_ref(),
            labels,
        };
        let mut s = String::new();
        if handler.render_report(&mut s, &d).is_ok() {
            out.push_str(&s);
            out.push('\n');
        }
    }
    out
}

/// Spans are byte ranges into the text view, for JSON.
fn span_json(model: &Model, listing: Option<&Listing>, f: &Finding) -> Value {
    let (Some(listing), Some(node)) = (listing, f.node) else {
        return Value::Null;
    };
    let path = graph_path(model, node);
    match listing.node_span(&path, model.node(node).index as usize) {
        Some(s) => json!({"offset": s.offset(), "length": s.len()}),
        None => Value::Null,
    }
}

/// One finding as JSON (the stable `findings[]` element).
pub fn finding_json(model: &Model, listing: Option<&Listing>, f: &Finding) -> Value {
    json!({
        "code": f.code,
        "rule": f.rule,
        "severity": f.severity.name(),
        "message": f.message,
        "graph": f.graph,
        "node": f.node_name,
        "op": f.op,
        "values": f.values.iter().map(|v| json!({"name": v.name, "label": v.text})).collect::<Vec<_>>(),
        "help": f.help,
        "evidence": f.evidence,
        "cause": f.cause,
        "bytes": f.bytes,
        "bytes_expr": f.bytes_expr,
        "fix": f.fix,
        "zero_cost": f.zero_cost,
        "source_location": f.source_location,
        "text_span": span_json(model, listing, f),
    })
}

/// SARIF 2.1.0 log for several models' findings.
pub fn sarif(results: &[(&Model, &[Finding])], rules: &[&RuleMeta], version: &str) -> Value {
    let rule_index = |code: &str| rules.iter().position(|r| r.code == code);
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
                "defaultConfiguration": {"level": sarif_level(r.default)},
            })
        })
        .collect();
    let mut out = Vec::new();
    for (model, findings) in results {
        let uri = model.path.to_string_lossy().replace('\\', "/");
        for f in findings.iter() {
            let mut text = f.message.clone();
            if let Some(h) = &f.help {
                text.push_str(&format!(" Fix: {h}"));
            }
            let mut result = json!({
                "ruleId": f.code,
                "level": sarif_level(f.severity),
                "message": {"text": text},
                "locations": [{
                    "physicalLocation": {"artifactLocation": {"uri": uri}},
                    "logicalLocations": [{
                        "name": f.node_name.clone().unwrap_or_else(|| f.graph.clone()),
                        "fullyQualifiedName": format!("{}/{}", f.graph, f.node_name.clone().unwrap_or_default()),
                        "kind": "member",
                    }],
                }],
                "partialFingerprints": {"onnxLint/v1": format!("{}:{}:{}:{}", f.code, f.graph, f.node_name.clone().unwrap_or_default(), f.values.first().map(|v| v.name.as_str()).unwrap_or(""))},
            });
            if let Some(i) = rule_index(f.code) {
                result["ruleIndex"] = json!(i);
            }
            out.push(result);
        }
    }
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
            "results": out,
        }],
    })
}

fn sarif_level(s: Severity) -> &'static str {
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

/// Escapes a workflow-command message (`%`, CR, LF).
fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a workflow-command property (also `:` and `,`).
fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// GitHub workflow-command annotations, one per group of findings (GitHub shows only a few per
/// step, so 300 copies become a handful of annotations).
pub fn github(model: &Model, findings: &[Finding]) -> Vec<String> {
    let mut groups: Vec<Vec<&Finding>> = Vec::new();
    for f in findings {
        match groups
            .iter_mut()
            .find(|g| g[0].code == f.code && g[0].cause == f.cause)
        {
            Some(g) => g.push(f),
            None => groups.push(vec![f]),
        }
    }
    let file = model.path.to_string_lossy().replace('\\', "/");
    groups
        .iter()
        .map(|g| {
            let f = g[0];
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
            format!(
                "::{level} file={},title={}::{}",
                escape_property(&file),
                escape_property(&title),
                escape_data(&message)
            )
        })
        .collect()
}

/// The Markdown job summary for `$GITHUB_STEP_SUMMARY`.
pub fn github_summary(results: &[(&Model, &[Finding], String)]) -> String {
    let mut s = String::from(
        "## cargo onnx-lint\n\n| model | prediction | deny | warn |\n|---|---|---:|---:|\n",
    );
    for (model, findings, line) in results {
        let deny = findings
            .iter()
            .filter(|f| f.severity == Severity::Deny)
            .count();
        let warn = findings
            .iter()
            .filter(|f| f.severity == Severity::Warn)
            .count();
        s.push_str(&format!(
            "| `{}` | {} | {deny} | {warn} |\n",
            model.path.display(),
            line.replace('|', "\\|")
        ));
    }
    for (model, findings, _) in results {
        if findings.is_empty() {
            continue;
        }
        s.push_str(&format!(
            "\n### `{}`\n\n| rule | finding | count |\n|---|---|---:|\n",
            model.path.display()
        ));
        let mut groups: Vec<(&Finding, usize)> = Vec::new();
        for f in findings.iter() {
            match groups
                .iter_mut()
                .find(|(g, _)| g.code == f.code && g.cause == f.cause)
            {
                Some((_, n)) => *n += 1,
                None => groups.push((f, 1)),
            }
        }
        for (f, n) in groups {
            s.push_str(&format!(
                "| {} {} | {} | {n} |\n",
                f.code,
                f.rule,
                f.message.replace('|', "\\|")
            ));
        }
    }
    s
}

/// A `SourceSpan` helper for callers that build their own labels.
pub fn span(offset: usize, len: usize) -> SourceSpan {
    SourceSpan::new(offset.into(), len)
}
