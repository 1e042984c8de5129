//! Rendering findings for humans: miette diagnostics whose labels point into the model's ONNX
//! text view. Returns strings; printing is the caller's job. The machine-readable shapes (JSON,
//! SARIF, GitHub) are serialised at the edge, in `cli/output/`.

use std::fmt;

use super::{Finding, Severity};
use crate::model::text::{GraphPath, Listing};
use crate::model::{Model, NodeId};
use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan,
};

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
        if let Some(b) = f.bytes {
            lines.push(format!("size: {} per run", super::human_bytes(b)));
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

/// A `SourceSpan` helper for callers that build their own labels.
pub fn span(offset: usize, len: usize) -> SourceSpan {
    SourceSpan::new(offset.into(), len)
}
