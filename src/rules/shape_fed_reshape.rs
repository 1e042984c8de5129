//! OL301 shape-fed-reshape.

use std::collections::HashSet;

use crate::declare_rule;
use crate::diagnostics::{Finding, Fix, FixSafety};
use crate::infer::shape_proof::{Proof, Unproven, prove, prove_on, shape_input};
use crate::infer::symbolic::Dim;
use crate::placer::ir::Session;
use crate::rules::{Context, Edges, nodes};
use crate::sym::Sym;
use crate::tables::Ep;

declare_rule! {
    /// ## What it does
    /// Flags a `Reshape` (also `Expand`, `Tile`, `ConstantOfShape`) whose shape input is computed
    /// at run time from a `Shape` node: the classic `Shape → Gather → Unsqueeze → Concat → Reshape`
    /// chain of TorchScript exports. It proves the constant that replaces the chain the way ORT
    /// computes the output shape: every dim is carried symbolically (the model's dim names,
    /// `batch`, `seq`, `past+seq`) through MatMul/Gemm, Transpose, elementwise ops, Slice, Gather,
    /// Concat, Unsqueeze, Squeeze, Reshape and Split, so the `Shape` of the hidden state taken
    /// before a projection still proves the view after it; the pieces of a `Split` of a shape
    /// (ORT's GatherSliceToSplitFusion at `all`) keep their elements. A proven constant comes
    /// with a machine-readable fix (JSON `fix`, kind `replace-input-with-constant`).
    ///
    /// A `Reshape` whose data comes through views (`Reshape`, `Flatten`, `Squeeze`,
    /// `Unsqueeze`: the elements in the same order) may have no constant against the flattened
    /// data and one against the value before the views: transformers' padding mask is indexed
    /// as `[batch, 1, 1, seq, 1]`, flattened to `[batch·seq]` and viewed back as
    /// `[batch, 1, 1, seq]`. The fix (kind `collapse-reshape`) makes the `Reshape` read that
    /// value with the constant proven against it (`[0, 1, 1, 0]`); the views and the chain go.
    ///
    /// When every dim involved is known and still no constant gives the same output for every
    /// value of the model's dims, the finding says so (cause `shape chain: no constant
    /// exists`) and why: a view that splits `batch·seq` back into `batch`, `seq` (GPT-2's
    /// `Conv1D`, OPT's flattened MLP), one that folds the heads into the batch (BLOOM), an
    /// `Expand` that broadcasts a 1 to the batch. Such findings are kept: the chain runs on
    /// every call all the same, and the help names the change in the model's code that
    /// removes it; after a `Gemm` on the flattened input (GPT-2's `Conv1D`) the finding carries
    /// a structural fix instead (kind `unflatten-gemm`, `unsafe`: `MatMul` and `Add` on the
    /// unflattened input). "Could not prove the constant" is left for what the analysis lost
    /// track of.
    /// Measured share (README, findings): findings with a proven constant over all OL301
    /// findings, the ones with no constant included.
    ///
    /// ## Why is this bad?
    /// The chain is shape arithmetic that ORT runs on the CPU; where a piece of it stays on CUDA
    /// (a large constant in the `Concat`, a GPU value mixed in), every crossing is copied. It also
    /// blocks CUDA-graph capture and keeps ORT's fusions from matching. Chains that cause no copy
    /// at the simulated release cost nothing there: they are reported only in the opt-in
    /// `zero-cost` group.
    ///
    /// ## Example
    /// ```text
    /// s = Shape (hidden)                   # bsz, q_len, _ = hidden.size()
    /// b = Gather <axis = 0> (s, zero)
    /// t = Gather <axis = 0> (s, one)
    /// shape = Concat <axis = 0> (Unsqueeze (b, axes0), Unsqueeze (t, axes0), heads, dim)
    /// q = MatMul (hidden, wq)
    /// y = Reshape (q, shape)
    /// ```
    /// Use instead:
    /// ```text
    /// y = Reshape (q, shape_const)         # shape_const = [0, 0, 12, 64]
    /// ```
    ///
    /// ## How to fix
    /// Replace the shape input with the constant the finding names and delete the chain (`--fix`
    /// applies the JSON `fix`), or export with static shapes / let the exporter fold it (the
    /// dynamo exporter, `do_constant_folding`). When no constant exists the finding says which
    /// elements no constant can give: a view that splits `batch·seq` back into two dims (GPT-2's
    /// `Conv1D`: `view(-1, k)`, `Gemm`, `view(bsz, q_len, n)`) has none; compute it with a
    /// 3-D `MatMul` and an `Add` in the model's code.
    ///
    /// ## Fix safety
    /// A proven constant keeps outputs bit-identical: each element is a constant of the graph or,
    /// for `Reshape`, `0` where it equals the data input's dim at the same position (not with
    /// `allowzero = 1`, where `0` means an empty dim), for `Expand`, `1` where it equals the data
    /// dim it broadcasts against. One element left over becomes `-1`, which `Reshape` infers from
    /// the total size the original shape had to keep anyway; such a fix is `unsafe` when another
    /// element is a `0` that copies a dim, because ORT rejects `-1` next to a zero-size dim (an
    /// empty batch) where the original shape would not. Dims are equal when their names are (as
    /// ONNX defines `dim_param`). `collapse-reshape` is safe on the same terms: a `Reshape`
    /// of the value before the views yields the same elements in the same order, and the proof
    /// shows the output shape is the same. `unflatten-gemm` is always `unsafe`: ORT's CPU
    /// `Gemm` adds the bias into the product's first K-block while `MatMul` then `Add` adds it
    /// to the finished product; measured on CPU onnxruntime 1.31.1, outputs are identical up to
    /// K = 256 and differ in the last bits at K = 768 and 3072.
    pub static RULE = ("OL301", "shape-fed-reshape", Warn, "a Reshape/Expand/Tile shape input is computed from Shape at run time", check);
}

const MAX_DEPTH: usize = 24;

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let s = cx.session();
    for (gi, ni, node) in nodes(s) {
        if node.domain != Sym::AI_ONNX {
            continue;
        }
        let Some(k) = shape_input(&node.op) else {
            continue;
        };
        let Some(shape) = node.inputs.get(k).filter(|n| !n.is_empty()) else {
            continue;
        };
        let edges: &Edges = cx.edges(gi);
        let mut chain = Vec::new();
        let mut seen = HashSet::new();
        if !reaches_shape(s, gi, edges, *shape, &mut chain, &mut seen, 0) {
            continue;
        }
        crate::rules::in_topological_order(s, gi, &mut chain);
        let on_cpu = chain
            .iter()
            .filter(|&&c| s.graphs[gi].nodes[c].ep == Some(Ep::Cpu))
            .count();
        let copies = crate::rules::copies_of_chain_list(cx, gi, &chain);
        let mut f = cx.node_finding(
            &RULE,
            gi,
            ni,
            format!(
                "the shape input of `{}` ({}) is computed at run time from Shape: {} node{} ({on_cpu} on CPU), {} cop{}",
                node.name,
                node.op,
                chain.len(),
                if chain.len() == 1 { "" } else { "s" },
                copies.len(),
                if copies.len() == 1 { "y" } else { "ies" }
            ),
        );
        f.cause = "shape chain: constant proven".into();
        f.evidence.push(format!(
            "chain: {}",
            chain
                .iter()
                .map(|&c| s.graphs[gi].nodes[c].op.as_str())
                .chain(std::iter::once(node.op.as_str()))
                .collect::<Vec<_>>()
                .join(" → ")
        ));
        // The cost: the copies the chain causes; none, and the finding is in the opt-in group.
        crate::rules::cost::set_cost(cx, gi, &mut f, &copies);
        let proven = prove(cx.symbolic(), gi, node);
        let collapsed = match &proven {
            Err(_) if node.op == Sym::RESHAPE => collapse(cx, gi, edges, node),
            _ => None,
        };
        match (proven, collapsed) {
            (Ok(proof), _) => {
                let text = format!("{:?}", proof.values);
                let safe = safe_proof(&proof);
                f.help = Some(format!(
                    "replace `{shape}` with the constant {text} (proved from the graph) and delete the chain"
                ));
                f.evidence.push(proof_note(&node.op, &proof, safe));
                // Only a node of the user's model can be edited (not one ORT's optimisers made).
                f.fix = node.origin.map(|_| Fix::ReplaceInputWithConstant {
                    graph: f.graph.clone(),
                    node: node.name.to_string(),
                    input: k,
                    values: proof.values,
                    safety: safety(safe),
                });
            }
            (Err(_), Some((data, proof))) => {
                let text = format!("{:?}", proof.values);
                let safe = safe_proof(&proof);
                f.help = Some(format!(
                    "make `{}` read `{data}` (the input of the views before it) and replace `{shape}` with the constant {text} (proved from the graph); delete the chain",
                    node.name
                ));
                f.evidence.push(format!(
                    "{}; against the shape of `{data}`: the views between (Reshape, Flatten, Squeeze, Unsqueeze) keep the elements in order, so one Reshape of `{data}` gives the same tensor",
                    proof_note(&node.op, &proof, safe)
                ));
                f.fix = node.origin.map(|_| Fix::CollapseReshape {
                    graph: f.graph.clone(),
                    node: node.name.to_string(),
                    data,
                    values: proof.values,
                    safety: safety(safe),
                });
            }
            (Err(Unproven::NoConstant(why)), None) => {
                f.cause = "shape chain: no constant exists".into();
                let after_gemm = node
                    .inputs
                    .first()
                    .and_then(|d| edges.producer.get(d))
                    .is_some_and(|&p| s.graphs[gi].nodes[p].op == "Gemm");
                let how = if after_gemm {
                    "compute the projection as a 3-D `MatMul` + `Add` on the unflattened input instead of `Reshape → Gemm → Reshape` (GPT-2's `Conv1D`: `x @ w + b` rather than `addmm` on `view(-1, k)`)"
                } else if node.op == "Expand" {
                    "let the consumer broadcast the smaller tensor instead of expanding it explicitly, or export with static shapes"
                } else {
                    "keep the dims apart in the model's code (no batch flattened into rows, no heads folded into the batch) or export with static shapes"
                };
                f.help = Some(format!("no constant can replace this chain; {how}"));
                f.evidence.push(format!("proof: {why}"));
                if after_gemm {
                    f.fix = unflatten_gemm(cx, gi, edges, node);
                    if f.fix.is_some() {
                        f.evidence.push(
                            "fix (unsafe): a MatMul and an Add on the unflattened input give the same shape without the views; ORT's CPU Gemm adds the bias into the first K-block of the product, so for K above 256 the sums round differently (measured: identical at K ≤ 256, differing in the last bits at 768)".into(),
                        );
                    }
                }
            }
            (Err(why), None) => {
                f.cause = "shape chain: no constant proven".into();
                f.help = Some(format!(
                    "export with static shapes or fold the chain into a constant; the linter could not prove the constant: {why}"
                ));
            }
        }
        out.push(f);
    }
}

/// A fix is safe unless a `-1` stands beside a `0` that copies a dim (see the rule's page).
fn safe_proof(proof: &Proof) -> bool {
    !proof.inferred || proof.values.iter().all(|&v| v > 0 || v == -1)
}

fn safety(safe: bool) -> FixSafety {
    if safe {
        FixSafety::Safe
    } else {
        FixSafety::Unsafe
    }
}

/// The ops that only view their input 0 with another shape (the elements, in order, unchanged).
const VIEWS: &[&str] = &["Reshape", "Flatten", "Squeeze", "Unsqueeze"];

/// A `Reshape` whose data comes through views: the value before them (a name of the user's
/// model) against whose shape the constant is proven, with the proof. `Reshape(view(x), s)` is
/// `Reshape(x, s')` whenever `s'` gives the same output shape, which the proof shows.
fn collapse(
    cx: &Context,
    gi: usize,
    edges: &Edges,
    node: &crate::session::SNode,
) -> Option<(String, Proof)> {
    let s = cx.session();
    let sh = cx.symbolic();
    let mut value = *node.inputs.first()?;
    for _ in 0..MAX_DEPTH {
        let &p = edges.producer.get(&value)?;
        let view = &s.graphs[gi].nodes[p];
        if view.domain != Sym::AI_ONNX || !VIEWS.contains(&view.op.as_str()) {
            return None;
        }
        // The view must be the user's node, reading a value of the user's model by that name.
        let origin = view.origin?;
        let before = view.inputs.first().filter(|n| !n.is_empty())?;
        let user = cx.model.node(origin);
        let same_name = user
            .inputs
            .first()
            .copied()
            .flatten()
            .is_some_and(|v| cx.model.value(v).name == *before);
        if !same_name {
            return None;
        }
        if let Ok(proof) = prove_on(sh, gi, node, sh.shape(gi, *before)) {
            return Some((before.to_string(), proof));
        }
        value = *before;
    }
    None
}

/// The structural fix of GPT-2's `Conv1D` (`view(-1, k)`, `Gemm`, `view(bsz, q_len, n)`):
/// `node` is the unflattening Reshape. The flattening Reshape must merge all leading dims of
/// `x` (`[a·b·…, k]`), the Gemm must be a plain product plus a bias that broadcasts along the
/// last dim, and `node` must give `x`'s leading dims with the Gemm's `n`; each intermediate is
/// read only by the next node.
fn unflatten_gemm(
    cx: &Context,
    gi: usize,
    edges: &Edges,
    node: &crate::session::SNode,
) -> Option<Fix> {
    let s = cx.session();
    let sh = cx.symbolic();
    let g = &s.graphs[gi];
    let only = |v: Sym, reader: usize| {
        edges.consumers.get(&v).is_some_and(|c| c == &[reader]) && !g.outputs.contains(&v)
    };
    let data = node.inputs.first()?;
    let &gp = edges.producer.get(data)?;
    let gemm = &g.nodes[gp];
    let flat_out = gemm.inputs.first()?;
    let &fp = edges.producer.get(flat_out)?;
    let flatten = &g.nodes[fp];
    let &np = edges.producer.get(node.outputs.first()?)?;
    let plain = gemm.attr_i("transA").unwrap_or(0) == 0
        && gemm.attr_i("transB").unwrap_or(0) == 0
        && gemm.attr("alpha").and_then(|a| a.f).unwrap_or(1.0) == 1.0
        && gemm.attr("beta").and_then(|a| a.f).unwrap_or(1.0) == 1.0;
    if gemm.op != "Gemm"
        || flatten.op != Sym::RESHAPE
        || !plain
        || !only(*flat_out, gp)
        || !only(*data, np)
    {
        return None;
    }
    let x = sh.shape(gi, *flatten.inputs.first()?)?;
    let (k, lead) = x.split_last()?;
    let rows = lead.iter().try_fold(Dim::konst(1), |acc, d| acc.mul(d))?;
    if lead.len() < 2 || sh.shape(gi, *flat_out)? != [rows, k.clone()] {
        return None;
    }
    let n = sh.shape(gi, *data)?.get(1)?.clone();
    let mut want = lead.to_vec();
    want.push(n.clone());
    if sh.shape(gi, *node.outputs.first()?)? != want.as_slice() {
        return None;
    }
    // The bias must broadcast along the last dim only: `[n]`, `[1, n]` or a scalar.
    if let Some(c) = gemm.inputs.get(2).filter(|c| !c.is_empty()) {
        let fits = match sh.shape(gi, *c)? {
            [] => true,
            [d] => *d == n || d.as_const() == Some(1),
            [one, d] => one.as_const() == Some(1) && (*d == n || d.as_const() == Some(1)),
            _ => false,
        };
        if !fits {
            return None;
        }
    }
    if gemm.origin.is_none() || flatten.origin.is_none() || node.origin.is_none() {
        return None;
    }
    Some(Fix::UnflattenGemm {
        graph: g.name.to_string(),
        flatten: flatten.name.to_string(),
        gemm: gemm.name.to_string(),
        unflatten: node.name.to_string(),
        safety: FixSafety::Unsafe,
    })
}

/// How the constant was proven, for the evidence.
fn proof_note(op: &str, proof: &Proof, safe: bool) -> String {
    let mut s = match op {
        "Reshape" => {
            "proof: every element is a constant, or (0) the data input's dim at the same position"
                .to_string()
        }
        "Expand" => {
            "proof: every element is a constant, or (1) the data input's dim it broadcasts against"
                .to_string()
        }
        _ => "proof: every element is a constant".to_string(),
    };
    if proof.inferred {
        s.push_str("; one element is left to Reshape's -1 (the total size is unchanged)");
        if !safe {
            s.push_str(
                "; unsafe fix: ORT rejects -1 when another requested dim is 0 (an empty input)",
            );
        }
    }
    s
}

fn reaches_shape(
    s: &Session,
    gi: usize,
    edges: &Edges,
    value: Sym,
    chain: &mut Vec<usize>,
    seen: &mut HashSet<usize>,
    depth: usize,
) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let Some(&p) = edges.producer.get(&value) else {
        return false;
    };
    if !seen.insert(p) {
        return chain.contains(&p);
    }
    let node = &s.graphs[gi].nodes[p];
    if node.op == Sym::SHAPE {
        chain.push(p);
        return true;
    }
    let mut found = false;
    for input in node.inputs.iter().filter(|i| !i.is_empty()) {
        if reaches_shape(s, gi, edges, *input, chain, seen, depth + 1) {
            found = true;
        }
    }
    if found {
        chain.push(p);
    }
    found
}
