//! OL301 shape-fed-reshape.

use std::collections::HashSet;

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::placer::ir::Session;
use crate::rules::{Context, Edges, nodes};
use crate::tables::Ep;

declare_rule! {
    /// ## What it does
    /// Flags a `Reshape` (also `Expand`, `Tile`, `ConstantOfShape`) whose shape input is computed
    /// at run time from a `Shape` node: the classic `Shape → Gather → Unsqueeze → Concat → Reshape`
    /// chain of TorchScript exports. When the chain's values can be worked out statically, the
    /// finding gives the constant that replaces it (`[0, 0, -1]`: 0 keeps the input's dim, -1 is
    /// inferred; or the static dims).
    ///
    /// ## Why is this bad?
    /// The chain is shape arithmetic that ORT runs on the CPU; where a piece of it stays on CUDA
    /// (a large constant in the `Concat`, a GPU value mixed in), every crossing is copied. It also
    /// blocks CUDA-graph capture and keeps ORT's fusions from matching.
    ///
    /// ## Example
    /// ```text
    /// s = Shape (x)
    /// b = Gather <axis = 0> (s, zero)
    /// t = Unsqueeze (b, axes0)
    /// shape = Concat <axis = 0> (t, rest)
    /// y = Reshape (x, shape)
    /// ```
    /// Use instead:
    /// ```text
    /// y = Reshape (x, shape_const)     # shape_const = [0, 12, 64]
    /// ```
    ///
    /// ## How to fix
    /// Replace the shape input with the constant the finding names and delete the chain, or export
    /// with static shapes / let the exporter fold it (the dynamo exporter, `do_constant_folding`).
    ///
    /// ## Fix safety
    /// The replacement is exact when the finding says "proved": every element was derived from
    /// the `Shape` of the data input at the same position (0) or from constants. With a `-1`, the
    /// replacement is exact as long as the total size is unchanged, which `Reshape` requires anyway.
    pub static RULE = ("OL301", "shape-fed-reshape", Warn, "a Reshape/Expand/Tile shape input is computed from Shape at run time", check);
}

/// One element of a shape vector, symbolically.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Elem {
    Const(i64),
    /// Dim `axis` of value `name`.
    Dim(String, usize),
    Unknown,
}

const MAX_LEN: usize = 64;
const MAX_DEPTH: usize = 24;

fn shape_input(op: &str) -> Option<usize> {
    match op {
        "Reshape" | "Expand" | "Tile" => Some(1),
        "ConstantOfShape" => Some(0),
        _ => None,
    }
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let s = cx.session();
    for (gi, ni, node) in nodes(s) {
        if node.domain != "ai.onnx" {
            continue;
        }
        let Some(k) = shape_input(&node.op) else {
            continue;
        };
        let Some(shape) = node.inputs.get(k).filter(|n| !n.is_empty()) else {
            continue;
        };
        let edges = Edges::new(s, gi);
        let mut chain = Vec::new();
        let mut seen = HashSet::new();
        if !reaches_shape(s, gi, &edges, shape, &mut chain, &mut seen, 0) {
            continue;
        }
        crate::rules::in_topological_order(s, gi, &mut chain);
        let on_cpu = chain
            .iter()
            .filter(|&&c| s.graphs[gi].nodes[c].ep == Some(Ep::Cpu))
            .count();
        let copies = crate::rules::copies_of_chain(cx, gi, &chain);
        let mut f = cx.node_finding(
            &RULE,
            gi,
            ni,
            format!(
                "the shape input of `{}` ({}) is computed at run time from Shape: {} node{} ({on_cpu} on CPU), {copies} cop{}",
                node.name,
                node.op,
                chain.len(),
                if chain.len() == 1 { "" } else { "s" },
                if copies == 1 { "y" } else { "ies" }
            ),
        );
        f.cause = "shape chain".into();
        f.evidence.push(format!(
            "chain: {}",
            chain
                .iter()
                .map(|&c| s.graphs[gi].nodes[c].op.as_str())
                .chain(std::iter::once(node.op.as_str()))
                .collect::<Vec<_>>()
                .join(" → ")
        ));
        let data = node.inputs.first().cloned().unwrap_or_default();
        let elems = eval(s, gi, &edges, shape, 0);
        f.help = Some(match replacement(s, gi, &node.op, &data, node, elems.as_deref()) {
            Some((text, proved)) => format!(
                "replace `{shape}` with the constant {text}{} and delete the chain",
                if proved { " (proved from the graph)" } else { "" }
            ),
            None => "export with static shapes or fold the chain into a constant; the linter could not prove the constant".into(),
        });
        out.push(f);
    }
}

fn reaches_shape(
    s: &Session,
    gi: usize,
    edges: &Edges,
    value: &str,
    chain: &mut Vec<usize>,
    seen: &mut HashSet<usize>,
    depth: usize,
) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let Some(&p) = edges.producer.get(value) else {
        return false;
    };
    if !seen.insert(p) {
        return chain.contains(&p);
    }
    let node = &s.graphs[gi].nodes[p];
    if node.op == "Shape" {
        chain.push(p);
        return true;
    }
    let mut found = false;
    for input in node.inputs.iter().filter(|i| !i.is_empty()) {
        if reaches_shape(s, gi, edges, input, chain, seen, depth + 1) {
            found = true;
        }
    }
    if found {
        chain.push(p);
    }
    found
}

/// Symbolic value of a small int64 vector.
fn eval(s: &Session, gi: usize, edges: &Edges, value: &str, depth: usize) -> Option<Vec<Elem>> {
    if depth > MAX_DEPTH {
        return None;
    }
    if let Some(init) = s.initializer(gi, value) {
        return crate::placer::ir::int_values(&init.tensor)
            .map(|v| v.into_iter().map(Elem::Const).collect());
    }
    let node = &s.graphs[gi].nodes[*edges.producer.get(value)?];
    let arg = |i: usize| {
        node.inputs
            .get(i)
            .filter(|n| !n.is_empty())
            .and_then(|n| eval(s, gi, edges, n, depth + 1))
    };
    let out = match node.op.as_str() {
        "Shape" => {
            let x = node.inputs.first()?;
            let rank = s.shape_of(gi, x)?.len() as i64;
            let clamp = |v: i64| {
                if v < 0 {
                    (v + rank).max(0)
                } else {
                    v.min(rank)
                }
            };
            let start = clamp(node.attr_i("start").unwrap_or(0));
            let end = clamp(node.attr_i("end").unwrap_or(rank));
            (start..end)
                .map(|i| Elem::Dim(x.clone(), i as usize))
                .collect()
        }
        "Cast" | "Identity" | "Squeeze" | "Unsqueeze" => arg(0)?,
        "Gather" if node.attr_i("axis").unwrap_or(0) == 0 => {
            let data = arg(0)?;
            let idx = arg(1)?;
            idx.iter()
                .map(|i| match i {
                    Elem::Const(i) => {
                        let i = if *i < 0 { *i + data.len() as i64 } else { *i };
                        usize::try_from(i)
                            .ok()
                            .and_then(|i| data.get(i).cloned())
                            .unwrap_or(Elem::Unknown)
                    }
                    _ => Elem::Unknown,
                })
                .collect()
        }
        "Concat" => {
            let mut all = Vec::new();
            for i in 0..node.inputs.len() {
                all.extend(arg(i)?);
            }
            all
        }
        "Mul" | "Add" | "Sub" | "Div" => {
            let (a, b) = (arg(0)?, arg(1)?);
            if a.len() != b.len() && a.len() != 1 && b.len() != 1 {
                return None;
            }
            let n = a.len().max(b.len());
            (0..n)
                .map(|i| {
                    let x = &a[if a.len() == 1 { 0 } else { i }];
                    let y = &b[if b.len() == 1 { 0 } else { i }];
                    match (x, y, node.op.as_str()) {
                        (Elem::Const(x), Elem::Const(y), "Mul") => {
                            x.checked_mul(*y).map(Elem::Const).unwrap_or(Elem::Unknown)
                        }
                        (Elem::Const(x), Elem::Const(y), "Add") => {
                            x.checked_add(*y).map(Elem::Const).unwrap_or(Elem::Unknown)
                        }
                        (Elem::Const(x), Elem::Const(y), "Sub") => {
                            x.checked_sub(*y).map(Elem::Const).unwrap_or(Elem::Unknown)
                        }
                        (Elem::Const(x), Elem::Const(y), "Div") if *y != 0 => Elem::Const(x / y),
                        _ => Elem::Unknown,
                    }
                })
                .collect()
        }
        _ => return None,
    };
    (out.len() <= MAX_LEN).then_some(out)
}

/// The constant that replaces the shape input, and whether every element was proved.
fn replacement(
    s: &Session,
    gi: usize,
    op: &str,
    data: &str,
    node: &crate::placer::ir::SNode,
    elems: Option<&[Elem]>,
) -> Option<(String, bool)> {
    // A fully static output shape is the simplest answer for every op.
    if op != "Tile"
        && let Some(out) = node.outputs.first().and_then(|o| s.shape_of(gi, o))
        && let Some(dims) = out.iter().copied().collect::<Option<Vec<i64>>>()
        && elems.is_none_or(|e| e.len() == dims.len())
    {
        return Some((format!("{dims:?}"), true));
    }
    let elems = elems?;
    let data_shape = s.shape_of(gi, data);
    let allow_zero = node.attr_i("allowzero").unwrap_or(0) != 0;
    let mut values: Vec<Option<i64>> = elems
        .iter()
        .enumerate()
        .map(|(i, e)| match e {
            Elem::Const(k) => Some(*k),
            Elem::Dim(v, j) if op == "Reshape" && !allow_zero && v == data && *j == i => Some(0),
            Elem::Dim(v, j) => s.shape_of(gi, v).and_then(|d| d.get(*j).copied().flatten()),
            Elem::Unknown => None,
        })
        .collect();
    let unknown = values.iter().filter(|v| v.is_none()).count();
    let proved = unknown == 0;
    if op == "Reshape" && unknown == 1 && !values.contains(&Some(-1)) {
        for v in values.iter_mut() {
            if v.is_none() {
                *v = Some(-1);
            }
        }
    }
    let _ = data_shape;
    let all: Option<Vec<i64>> = values.into_iter().collect();
    all.map(|v| (format!("{v:?}"), proved || op == "Reshape"))
}
