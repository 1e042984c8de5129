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
            None => attr.g.as_deref(),
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
            (Some(b), _) => lines.push(format!("size: {} per run", super::human_bytes(b))),
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
            let names: Vec<String> = names.into_iter().filter(|n| !n.is_empty()).collect();
            let rest = self.more.len().saturating_sub(names.len());
            let mut line = format!("and {} more with the same cause", self.more.len());
            if !names.is_empty() {
                line.push_str(": ");
                line.push_str(&names.join(", "));
                if rest > 0 {
                    line.push_str(&format!(", … ({rest} more)"));
                }
            }
            if total > 0 {
                line.push_str(&format!("; {} per run in all", super::human_bytes(total)));
            }
            lines.push(line);
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

/// The labels of a finding: one on its node's line, carrying the node's op, the rule and the
/// values that line already shows (its inputs, a value it produces), so no label is repeated on
/// a producer's line; a copied value made elsewhere is labelled where it is produced. Spans are
/// mapped through `wrap` into the wrapped text view.
fn labels_for(model: &Model, listing: &Listing, wrap: &Wrapped, f: &Finding) -> Vec<LabeledSpan> {
    let Some(node) = f.node else {
        return Vec::new();
    };
    let path = graph_path(model, node);
    let index = model.node(node).index as usize;
    let primary = listing.node_span(&path, index);
    let inside = |span: &SourceSpan| {
        primary.is_some_and(|p| {
            span.offset() >= p.offset() && span.offset() + span.len() <= p.offset() + p.len()
        })
    };
    let mut text = match &f.op {
        Some(op) => format!("{op} ({})", f.code),
        None => f.code.to_string(),
    };
    let mut others = Vec::new();
    let mut folded: Vec<&str> = Vec::new();
    // A graph input's span is the (often very long) graph signature: never labelled there.
    let graph = model.graph(model.node(node).graph);
    for v in f.values.iter().take(3) {
        let graph_input = graph
            .lookup(&v.name)
            .is_some_and(|id| matches!(model.value(id).def, crate::model::ValueDef::GraphInput(_)));
        let span = listing.value_span(&path, &v.name);
        match span {
            Some(span) if !graph_input && !v.text.starts_with("input ") && !inside(&span) => {
                others.push((span, v.text.clone()));
            }
            _ if primary.is_some() => folded.push(v.text.as_str()),
            _ => {}
        }
    }
    // `Reshape (OL101), inputs tensor(float)[4, 8], tensor(int64)[2]`.
    let inputs: Vec<&str> = folded
        .iter()
        .filter_map(|t| t.strip_prefix("input ")?.split_once(": ").map(|(_, ty)| ty))
        .collect();
    if !inputs.is_empty() {
        // As many input types as fit in about 60 columns; the finding's JSON has them all.
        let mut shown: Vec<&str> = Vec::new();
        let mut len = 0;
        for t in &inputs {
            if !shown.is_empty() && len + t.len() > 60 {
                break;
            }
            len += t.len() + 2;
            shown.push(t);
        }
        text.push_str(&format!(
            ", input{} {}{}",
            if inputs.len() == 1 { "" } else { "s" },
            shown.join(", "),
            if shown.len() < inputs.len() {
                ", …"
            } else {
                ""
            }
        ));
    }
    for t in folded.iter().filter(|t| !t.starts_with("input ")) {
        text.push_str(", ");
        text.push_str(t);
    }
    let mut out = Vec::new();
    if let Some(span) = primary {
        out.push(LabeledSpan::new_primary_with_span(
            Some(text),
            wrap.span(span),
        ));
    }
    let mut seen: Vec<SourceSpan> = Vec::new();
    for (span, label) in others {
        if !seen.contains(&span) {
            seen.push(span);
            out.push(LabeledSpan::new_with_span(Some(label), wrap.span(span)));
        }
    }
    out
}

/// The text view with its long lines wrapped, and where the line breaks went in.
struct Wrapped {
    text: String,
    /// (offset in the original text of a replaced space, bytes added so far, this one included).
    breaks: Vec<(usize, usize)>,
}

impl Wrapped {
    /// Wraps every line longer than `limit` bytes at a space outside a quoted name (after a
    /// comma when it can), continuing with the line's indent plus four spaces. ONNX's textual
    /// syntax ignores that whitespace, so the wrapped view is still the same model.
    fn new(text: &str, limit: usize) -> Wrapped {
        let limit = limit.max(20);
        let mut out = String::with_capacity(text.len() + text.len() / 16);
        let mut breaks = Vec::new();
        let mut added = 0;
        let mut line_start = 0;
        for line in text.split_inclusive('\n') {
            if line.trim_end().len() <= limit {
                out.push_str(line);
                line_start += line.len();
                continue;
            }
            let indent_len = line.len() - line.trim_start_matches(' ').len();
            let indent = " ".repeat(indent_len + 4);
            let bytes = line.as_bytes();
            let (mut seg_start, mut quoted, mut escaped) = (0usize, false, false);
            let (mut after_comma, mut any_space) = (None, None);
            let mut last = 0;
            for (i, &b) in bytes.iter().enumerate() {
                if quoted {
                    match b {
                        _ if escaped => escaped = false,
                        b'\\' => escaped = true,
                        b'"' => quoted = false,
                        _ => {}
                    }
                } else if b == b'"' {
                    quoted = true;
                } else if b == b' ' && i > indent_len {
                    any_space = Some(i);
                    if i > 0 && bytes.get(i - 1) == Some(&b',') {
                        after_comma = Some(i);
                    }
                }
                let width = i - seg_start + if seg_start == 0 { 0 } else { indent.len() };
                if width >= limit && b != b'\n' {
                    let half = seg_start + limit / 2;
                    let at = after_comma.filter(|&c| c > half).or(any_space);
                    if let Some(at) = at.filter(|&a| a > seg_start) {
                        out.push_str(&line[last..at]);
                        out.push('\n');
                        out.push_str(&indent);
                        added += indent.len();
                        breaks.push((line_start + at, added));
                        last = at + 1;
                        seg_start = at + 1;
                        after_comma = None;
                        any_space = None;
                    }
                }
            }
            out.push_str(&line[last..]);
            line_start += line.len();
        }
        Wrapped { text: out, breaks }
    }

    /// An offset of the original text in the wrapped one.
    fn offset(&self, o: usize) -> usize {
        let i = self.breaks.partition_point(|(at, _)| *at < o);
        o + i
            .checked_sub(1)
            .and_then(|j| self.breaks.get(j))
            .map_or(0, |b| b.1)
    }

    fn span(&self, s: SourceSpan) -> SourceSpan {
        let start = self.offset(s.offset());
        let end = self.offset(s.offset() + s.len());
        SourceSpan::new(start.into(), end.saturating_sub(start))
    }
}

/// The human form of one model's findings: one diagnostic per group (rule and cause), largest
/// groups of copies summarised rather than repeated.
pub fn human(model: &Model, findings: &[Finding], style: Style) -> String {
    if findings.is_empty() {
        return String::new();
    }
    let needs_source = findings.iter().any(|f| f.node.is_some());
    let listing = needs_source.then(|| crate::model::text::print_model(&model.proto));
    // The gutter takes up to 16 columns: a line number of up to 6 digits, the bar, and the
    // arrows miette draws beside a label that spans lines.
    let mut wrapped = listing
        .as_ref()
        .map(|l| Wrapped::new(&l.text, style.width.saturating_sub(16)));
    let source = wrapped.as_mut().map(|w| {
        NamedSource::new(
            format!("{} (ONNX text view)", model.path.display()),
            std::mem::take(&mut w.text),
        )
    });
    let theme = match (style.unicode, style.color) {
        (true, true) => GraphicalTheme::unicode(),
        (true, false) => GraphicalTheme::unicode_nocolor(),
        (false, true) => GraphicalTheme::ascii(),
        (false, false) => GraphicalTheme::none(),
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
        let labels = match (&listing, &wrapped) {
            (Some(l), Some(w)) => labels_for(model, l, w, first),
            _ => Vec::new(),
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_the_text_and_moves_spans_with_it() {
        let text = "short\n  [n] \"a, b\" = Op (\"first input, with a comma\", second, third, fourth)\nend\n";
        let w = Wrapped::new(text, 30);
        assert!(w.text.lines().all(|l| l.len() <= 40), "{}", w.text);
        assert!(w.text.lines().count() > 3, "{}", w.text);
        // Only whitespace was added; quoted names are never split.
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(squash(&w.text), squash(text));
        assert!(
            w.text.contains("\"first input, with a comma\""),
            "{}",
            w.text
        );
        // A span of the original covers the same characters in the wrapped text.
        for word in ["second", "fourth", "end", "\"a, b\""] {
            let at = text.find(word).unwrap();
            let s = w.span(SourceSpan::new(at.into(), word.len()));
            assert_eq!(&w.text[s.offset()..s.offset() + s.len()], word);
        }
        let line = text.find("  [n]").unwrap() + 2;
        let whole = w.span(SourceSpan::new(
            line.into(),
            text[line..].find('\n').unwrap(),
        ));
        assert_eq!(
            squash(&w.text[whole.offset()..whole.offset() + whole.len()]),
            squash(&text[line..line + text[line..].find('\n').unwrap()])
        );
    }
}
