//! `--format json`: the JSON shapes of `design.md`. `place --format json` (the oracle's record),
//! the lint record of one model and its `findings[]`, the lint record with `fix` of `--fix`.
//! Always printed as an array of records (`--statistics`: an array of rule counts).

use miette::Diagnostic;
use serde_json::{Map, Value, json};

use super::emitter::{Emitter, FixWriter, LintWriter, PlaceWriter, RenderCx};
use super::report::{FixOptions, Fixed, ModelReport, Printing, Totals};
use super::sink::Sink;
use crate::diagnostics::Finding;
use crate::diagnostics::render::graph_path;
use crate::lint::{Analysis, Settings};
use crate::model::text::Listing;
use crate::model::{LoadError, Model, ProblemLevel};
use crate::placer::{Outcome, Placement};
use crate::tables::Ep;

pub struct Json;

impl Emitter for Json {
    /// The lint record of the model ([`analysis_json`]).
    fn render(&self, a: &Analysis, cx: &RenderCx) -> Value {
        analysis_json(a, cx.settings)
    }

    fn lint(&self, p: &Printing) -> Option<Box<dyn LintWriter>> {
        Some(Box::new(Lint {
            statistics: p.statistics,
            records: Vec::new(),
        }))
    }

    fn fix(&self, _opts: &FixOptions) -> Option<Box<dyn FixWriter>> {
        Some(Box::new(Records::default()))
    }

    fn place(&self) -> Option<Box<dyn PlaceWriter>> {
        Some(Box::new(Records::default()))
    }

    fn listings(&self) -> bool {
        true
    }
}

struct Lint {
    statistics: bool,
    records: Vec<Value>,
}

impl LintWriter for Lint {
    fn model(&mut self, mut r: ModelReport, _sink: &mut Sink) {
        // Moved, not copied: a report of tens of thousands of findings is hundreds of MB as a
        // JSON tree.
        self.records.push(r.rendered.take());
    }

    fn unreadable(&mut self, path: &str, e: LoadError, _sink: &mut Sink) {
        self.records.push(load_error_json(
            path,
            e.code().map(|c| c.to_string()),
            &e.to_string(),
        ));
    }

    fn finish(self: Box<Self>, totals: &Totals, sink: &mut Sink) {
        let v = if self.statistics {
            Value::Array(
                totals
                    .statistics()
                    .into_iter()
                    .map(|(code, rule, sev, n)| {
                        json!({"code": code, "rule": rule, "severity": sev, "count": n})
                    })
                    .collect(),
            )
        } else {
            Value::Array(self.records)
        };
        sink.json(&v);
    }
}

/// The records of `place` and of `--fix`, printed as one array at the end.
#[derive(Default)]
struct Records {
    records: Vec<Value>,
}

impl PlaceWriter for Records {
    fn model(&mut self, path: &str, p: &Placement, _sink: &mut Sink) {
        self.records.push(placement_json(path, p));
    }

    fn finish(self: Box<Self>, sink: &mut Sink) {
        sink.json(&Value::Array(self.records));
    }
}

impl FixWriter for Records {
    fn failed(&mut self, path: &std::path::Path, message: &str, _sink: &mut Sink) {
        self.records.push(json!({
            "model": path.display().to_string(),
            "error": {"code": "onnx_lint::fix", "message": message},
        }));
    }

    fn finish(mut self: Box<Self>, done: &[Fixed], sink: &mut Sink) {
        for o in done {
            let mut v = o.report.rendered.clone();
            v["fix"] = fix_json(o);
            self.records.push(v);
        }
        sink.json(&Value::Array(self.records));
    }
}

/// The `fix` object of a fixed model's record.
pub fn fix_json(o: &Fixed) -> Value {
    json!({
        "written": o.written.as_ref().map(|p| p.display().to_string()),
        "applied": o.applied,
        "skipped": o.skipped.iter().map(|(f, why)| json!({"fix": f, "reason": why})).collect::<Vec<_>>(),
        "unsafe_not_applied": o.unsafe_left,
        "removed_nodes": o.removed_nodes,
        "rounds": o.rounds,
        "converged": o.converged,
        "before": {"copies": o.before.copies, "cpu_nodes": o.before.cpu_nodes, "findings": o.before.findings},
        "after": {"copies": o.after.copies, "cpu_nodes": o.after.cpu_nodes, "findings": o.after.findings},
        "change": o.change_line(),
        "diff": if o.diff.is_empty() { Value::Null } else { Value::String(o.diff.clone()) },
    })
}

/// Every live node of every graph with its provider, in the order ORT's "Node placements" log
/// prints them (`VerifyEachNodeIsAssignedToAnEp`, `framework/session_state.cc`): one list per
/// provider for the whole session (`VerifyEachNodeIsAssignedToAnEpImpl` fills a single
/// `NodePlacementMap` while it walks the main graph's nodes, each node before the nodes of its
/// subgraphs), the lists in reverse order of each provider's first node (ORT keeps them in an
/// `unordered_map`, whose libstdc++ iteration runs newest key first; checked with the oracle).
/// A name repeated in several graphs (the two branches of an `If`) is printed once per node, in
/// its provider's list: read into a map, the list printed last wins, as in the oracle's record.
fn node_placements(p: &Placement) -> Vec<(&str, Ep)> {
    fn visit<'p>(p: &'p Placement, gi: usize, blocks: &mut Vec<(Ep, Vec<&'p str>)>) {
        let Some(graph) = p.session.graphs.get(gi) else {
            return;
        };
        for (_, n) in graph.live_nodes() {
            if let Some(ep) = n.ep {
                match blocks.iter_mut().find(|(e, _)| *e == ep) {
                    Some((_, names)) => names.push(n.name.as_str()),
                    None => blocks.push((ep, vec![n.name.as_str()])),
                }
            }
            for (_, sg) in &n.subgraphs {
                visit(p, *sg, blocks);
            }
        }
    }
    let mut blocks = Vec::new();
    visit(p, 0, &mut blocks);
    blocks
        .into_iter()
        .rev()
        .flat_map(|(ep, names)| names.into_iter().map(move |n| (n, ep)))
        .collect()
}

/// The `place --format json` record of `design.md`, with the oracle's field names.
pub fn placement_json(model: &str, p: &Placement) -> Value {
    let (session, error) = match &p.outcome {
        Outcome::Ok => ("ok", Value::Null),
        Outcome::LoadFail(e)
        | Outcome::NoKernel(e)
        | Outcome::InitFail(e)
        | Outcome::PartitionFail(e) => ("fail", Value::String(e.clone())),
    };
    let mut placement = Map::new();
    let mut all_nodes_on = Value::Null;
    if p.outcome.placed() {
        let nodes = node_placements(p);
        let first = nodes.first().map(|(_, ep)| *ep);
        if let Some(ep) = first.filter(|ep| nodes.iter().all(|(_, e)| e == ep)) {
            all_nodes_on = json!({ ep.name(): nodes.len() });
        } else {
            // A name logged twice keeps the later line's provider, as the oracle's parser does
            // (and as a map collected from pairs keeps the last of equal keys; collecting sorts
            // once and builds the map in bulk, instead of a search per name).
            placement = nodes
                .iter()
                .map(|(name, ep)| (name.to_string(), Value::String(ep.name().into())))
                .collect();
        }
    }
    let mut memcpy = Map::new();
    for (g, n) in p.memcpy_counts() {
        memcpy.insert(g.to_string(), json!(n));
    }
    // The object is assembled from values moved in: `json!` would serialise each map again
    // into a copy (a whole-session placement map is most of the output).
    let mut out = Map::new();
    out.insert("model".into(), Value::String(model.into()));
    out.insert("ort".into(), Value::String(p.ort.clone()));
    out.insert("level".into(), Value::String(p.level.name().into()));
    out.insert("session".into(), Value::String(session.into()));
    out.insert("error".into(), error);
    out.insert("placement".into(), Value::Object(placement));
    out.insert("all_nodes_on".into(), all_nodes_on);
    out.insert("memcpy".into(), Value::Object(memcpy));
    out.insert(
        "copies".into(),
        Value::Array(
            p.copies
                .iter()
                .map(|c| Value::String(c.log_line()))
                .collect(),
        ),
    );
    Value::Object(out)
}

/// The record of a model that could not be read: `{"model", "error": {"code", "message"}}`.
pub fn load_error_json(model: &str, code: Option<String>, message: &str) -> Value {
    json!({"model": model, "error": {"code": code, "message": message}})
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

/// The `--format json` record of one linted model.
pub fn analysis_json(a: &Analysis, settings: &Settings) -> Value {
    let listing = a
        .findings
        .iter()
        .any(|f| f.node.is_some())
        .then(|| crate::model::text::print_model(&a.model.proto));
    let s = a.model.stats();
    let p = &a.placement;
    let deny = a
        .findings
        .iter()
        .filter(|f| f.severity == crate::diagnostics::Severity::Deny)
        .count();
    let warn = a
        .findings
        .iter()
        .filter(|f| f.severity == crate::diagnostics::Severity::Warn)
        .count();
    let placement = placement_json(&a.model.path.display().to_string(), p);
    // Built apart and moved in: `json!` would copy a value given to it (tens of MB on a model
    // with tens of thousands of findings).
    let findings: Vec<Value> = a
        .findings
        .iter()
        .map(|f| finding_json(&a.model, listing.as_ref(), f))
        .collect();
    let mut out = json!({
        "model": a.model.path.display().to_string(),
        "ort": p.ort,
        "ort_reason": settings.release_reason,
        "level": p.level.name(),
        "ep": crate::providers::option_of(&settings.options.eps),
        "session": placement["session"],
        "error": placement["error"],
        "summary": {
            "nodes": s.nodes,
            "graphs": s.graphs,
            "initializers": s.initializers,
            "initializer_bytes": s.initializer_bytes,
            "external_bytes": s.external_bytes,
            "opsets": a.model.opsets.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
            "copies": p.copies.len(),
            "memcpy": placement["memcpy"],
            "deny": deny,
            "warn": warn,
            "bytes_copied": a.copied.0,
            "bytes_copied_expr": a.copied.1,
            "dims": settings.dims.0,
        },
        "findings": null,
        "problems": a.model.problems.iter().map(|p| json!({
            "level": match p.level { ProblemLevel::Error => "error", ProblemLevel::Warning => "warning" },
            "code": p.code,
            "message": p.message,
        })).collect::<Vec<_>>(),
    });
    out["findings"] = Value::Array(findings);
    out
}
