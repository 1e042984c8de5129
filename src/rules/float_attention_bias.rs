//! OL303 float-attention-bias.

use std::collections::HashSet;

use crate::declare_rule;
use crate::diagnostics::{Finding, ValueLabel};
use crate::infer::Type;
use crate::model::DataType;
use crate::placer::ir::{SNode, Session};
use crate::rules::cumsum_int64_chain::ep_name;
use crate::rules::{Context, Edges, nodes};
use crate::sym::Sym;
use crate::tables::Ep;

declare_rule! {
    /// ## What it does
    /// Flags an additive float attention mask built at run time from comparisons, `Where` or
    /// `CumSum` (the causal and padding masks of exported decoders: `Less`/`Equal` → `Where(0,
    /// -inf)` → `Add` before `Softmax`, or into an attention op's mask input) when part of that
    /// chain runs on the CPU or crosses devices. The mask is the `Add` operand that is not the
    /// (scaled) Q·Kᵀ scores; the finding names it first in `values`, and its chain is the mask's
    /// own (never the rotary-embedding path of Q and K).
    ///
    /// ## Why is this bad?
    /// The mask is as large as the attention scores (batch × heads × query × key), so every copy
    /// around it moves a lot of data, on every step. A mask chain that causes no copy at the
    /// simulated release is reported only in the opt-in `zero-cost` group.
    ///
    /// ## Example
    /// ```text
    /// causal = Less (k_pos, q_pos)
    /// bias = Where (causal, zero, neg_inf)
    /// scores = Div (MatMul (q, kt), sqrt_d)
    /// probs = Softmax (Add (scores, bias))
    /// ```
    ///
    /// ## How to fix
    /// Let the attention kernel build the mask: a bool mask or `is_causal = 1` on ONNX `Attention`
    /// (when the node already has `is_causal = 1`, pass only the padding part), or
    /// `GroupQueryAttention` with its sequence lengths and `local_window_size` — the finding
    /// names only the ones the release's CUDA table has.
    ///
    /// ## Fix safety
    /// Display only: the replacement changes the graph's structure.
    pub static RULE = ("OL303", "float-attention-bias", Warn, "an additive float attention mask built from compare/Where/CumSum chains crosses devices", check);
}

const MASK_OPS: &[&str] = &[
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
    "Equal",
    "Not",
    "And",
    "Or",
    "Where",
    "CumSum",
    "Trilu",
];

/// Ops a scaled Q·Kᵀ passes through between its MatMul and the `Add` of the mask.
const SCORE_OPS: &[&str] = &["Mul", "Div", "Cast", "Identity", "Reshape", "Transpose"];

/// Whether `value` is Q·Kᵀ scores: a MatMul (or FusedMatMul) reached through scaling only.
fn is_scores(s: &Session, gi: usize, edges: &Edges, value: Sym) -> bool {
    let mut v = value;
    for _ in 0..8 {
        let Some(&p) = edges.producer.get(&v) else {
            return false;
        };
        let n = &s.graphs[gi].nodes[p];
        if n.op == "MatMul" || n.op == "FusedMatMul" {
            return true;
        }
        if !SCORE_OPS.contains(&n.op.as_str()) {
            return false;
        }
        // Scaling: follow the operand that is not a constant or a scalar.
        let next = n.inputs.iter().filter(|i| !i.is_empty()).find(|&&i| {
            s.initializer(gi, i).is_none() && s.shape_of(gi, i).is_none_or(|d| !d.is_empty())
        });
        match next {
            Some(&x) => v = x,
            None => return false,
        }
    }
    false
}

/// The mask addend of `Add(scores, mask)`: the operand that is not the scaled Q·Kᵀ.
fn mask_addend(s: &Session, gi: usize, edges: &Edges, add: &SNode) -> Option<Sym> {
    let ins: Vec<Sym> = add
        .inputs
        .iter()
        .filter(|i| !i.is_empty())
        .copied()
        .collect();
    let &[a, b] = ins.as_slice() else {
        return None;
    };
    let direct = |v: Sym| {
        edges
            .producer
            .get(&v)
            .is_some_and(|&q| s.graphs[gi].nodes[q].op == "MatMul")
    };
    match (is_scores(s, gi, edges, a), is_scores(s, gi, edges, b)) {
        (true, false) => Some(b),
        (false, true) => Some(a),
        (true, true) => None,
        // Scores this walk does not recognise: the operand not made by a MatMul.
        (false, false) => match (direct(a), direct(b)) {
            (true, false) => Some(b),
            (false, true) => Some(a),
            _ => None,
        },
    }
}

fn is_float(s: &Session, gi: usize, v: Sym) -> bool {
    matches!(s.type_of(gi, v), Some(Type::Tensor(e)) if *e == DataType::Float as i32 || *e == DataType::Float16 as i32 || *e == DataType::Bfloat16 as i32)
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let s = cx.session();
    for (gi, ni, node) in nodes(s) {
        if !matches!(
            node.op.as_str(),
            "Softmax" | "BiasSoftmax" | "Attention" | "MultiHeadAttention"
        ) {
            continue;
        }
        let edges: &Edges = cx.edges(gi);
        // The mask input of the attention computation.
        let mask = match (node.domain.as_str(), node.op.as_str()) {
            ("ai.onnx", "Softmax") => {
                let Some(&p) = node.inputs.first().and_then(|i| edges.producer.get(i)) else {
                    continue;
                };
                let add = &s.graphs[gi].nodes[p];
                if add.op != "Add" {
                    continue;
                }
                mask_addend(s, gi, edges, add)
            }
            // `Add` + `Softmax` fused by ORT's level-2 `BiasSoftmaxFusion`: (scores, mask).
            ("com.microsoft", "BiasSoftmax") => node.inputs.get(1).copied(),
            ("ai.onnx", "Attention") => node.inputs.get(3).copied(),
            ("com.microsoft", "MultiHeadAttention") => node.inputs.get(5).copied(),
            _ => continue,
        };
        let Some(mut mask) = mask.filter(|m| !m.is_empty()) else {
            continue;
        };
        // A mask ORT copies to the device: name the model's value, not the copy.
        if let Some(&p) = edges.producer.get(&mask)
            && s.graphs[gi].nodes[p].op.starts_with("Memcpy")
            && let Some(&src) = s.graphs[gi].nodes[p].inputs.first()
        {
            mask = src;
        }
        // The name of the model's value where ORT renamed it for a copy.
        let shown = mask
            .strip_suffix(&format!("_{}", cx.provider().name()))
            .unwrap_or(&mask)
            .to_string();
        if !is_float(s, gi, mask) {
            continue;
        }
        // The nodes the mask is computed from (never through Q·Kᵀ scores).
        let mut chain = Vec::new();
        let mut stack = vec![(mask, 0usize)];
        let mut seen = HashSet::new();
        while let Some((v, depth)) = stack.pop() {
            let Some(&p) = edges.producer.get(&v) else {
                continue;
            };
            if depth > 10 || !seen.insert(p) || is_scores(s, gi, edges, v) {
                continue;
            }
            chain.push(p);
            for i in s.graphs[gi].nodes[p]
                .inputs
                .iter()
                .filter(|i| !i.is_empty())
            {
                stack.push((*i, depth + 1));
            }
        }
        if !chain
            .iter()
            .any(|&c| MASK_OPS.contains(&s.graphs[gi].nodes[c].op.as_str()))
        {
            continue;
        }
        let copied = crate::rules::copies_of_chain_list(cx, gi, &chain);
        let on_cpu: Vec<usize> = chain
            .iter()
            .copied()
            .filter(|&c| s.graphs[gi].nodes[c].ep == Some(Ep::Cpu))
            .collect();
        if copied.is_empty() && on_cpu.is_empty() {
            continue;
        }
        let mut f = cx.node_finding(
            &RULE,
            gi,
            ni,
            format!(
                "the float attention mask `{shown}` of `{}` is built by {} nodes ({} on CPU) with {} cop{}",
                node.name,
                chain.len(),
                on_cpu.len(),
                copied.len(),
                if copied.len() == 1 { "y" } else { "ies" }
            ),
        );
        // The mask itself first, then the node's inputs.
        f.values.retain(|v| v.name != mask && v.name != shown);
        f.values.insert(
            0,
            ValueLabel {
                name: shown.clone(),
                text: format!("attention mask: {}", cx.describe_value(gi, mask)),
            },
        );
        f.cause = "float mask".into();
        crate::rules::cost::set_cost(cx, gi, &mut f, &copied);
        // The chain in graph order, nearest the mask last; int shape arithmetic on CUDA left out.
        crate::rules::in_topological_order(s, gi, &mut chain);
        let ops: Vec<String> = chain
            .iter()
            .map(|&c| &s.graphs[gi].nodes[c])
            .filter(|n| {
                MASK_OPS.contains(&n.op.as_str())
                    || n.op.starts_with("Memcpy")
                    || n.ep == Some(Ep::Cpu)
                    || n.outputs.first().is_some_and(|o| {
                        !matches!(s.type_of(gi, *o), Some(Type::Tensor(e)) if *e == DataType::Int64 as i32 || *e == DataType::Int32 as i32)
                    })
            })
            .map(|n| format!("{} ({})", n.op, ep_name(n.ep)))
            .collect();
        let skip = ops.len().saturating_sub(12);
        f.evidence.push(format!(
            "mask chain: {}{} → `{shown}`",
            if skip > 0 { "… → " } else { "" },
            ops[skip..].join(" → ")
        ));
        let opset = s.opsets.get(&Sym::AI_ONNX).copied().unwrap_or(0);
        let causal_already = node.op == "Attention"
            && node.domain == Sym::AI_ONNX
            && node.attr_i("is_causal").unwrap_or(0) != 0;
        let mut ways = Vec::new();
        if let Some(att) = cx.table.schema("ai.onnx", "Attention", opset)
            && cx
                .table
                .kernels(cx.provider().ep, "ai.onnx", "Attention")
                .iter()
                .any(|k| k.matches_since(att.since))
        {
            ways.push(if causal_already {
                format!(
                    "`{}` already has is_causal = 1: pass only the padding part, as a bool mask ({} kernel for Attention-{} in ORT {})",
                    node.name,
                    cx.provider().label,
                    att.since,
                    cx.table.release().ort
                )
            } else {
                format!(
                    "ONNX Attention-{} with a bool mask or is_causal = 1 ({} kernel in ORT {})",
                    att.since,
                    cx.provider().label,
                    cx.table.release().ort
                )
            });
        }
        if !cx
            .table
            .kernels(cx.provider().ep, "com.microsoft", "GroupQueryAttention")
            .is_empty()
        {
            ways.push("com.microsoft GroupQueryAttention with seqlens_k/total_sequence_length and local_window_size".into());
        }
        f.help = Some(if ways.is_empty() {
            format!(
                "keep the whole mask chain on {} (see the OL1xx findings on its nodes)",
                cx.provider().label
            )
        } else {
            format!(
                "let the attention kernel build the mask: {}",
                ways.join("; or ")
            )
        });
        out.push(f);
    }
}
