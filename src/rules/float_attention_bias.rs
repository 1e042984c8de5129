//! OL303 float-attention-bias.

use std::collections::HashSet;

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::infer::Type;
use crate::model::DataType;
use crate::rules::cumsum_int64_chain::ep_name;
use crate::rules::{Context, Edges, nodes};
use crate::tables::Ep;

declare_rule! {
    /// ## What it does
    /// Flags an additive float attention mask built at run time from comparisons, `Where` or
    /// `CumSum` (the causal and padding masks of exported decoders: `Less`/`Equal` → `Where(0,
    /// -inf)` → `Add` before `Softmax`, or into an attention op's mask input) when part of that
    /// chain runs on the CPU or crosses devices.
    ///
    /// ## Why is this bad?
    /// The mask is as large as the attention scores (batch × heads × query × key), so every copy
    /// around it moves a lot of data, on every step.
    ///
    /// ## Example
    /// ```text
    /// causal = Less (k_pos, q_pos)
    /// bias = Where (causal, zero, neg_inf)
    /// scores2 = Add (scores, bias)
    /// probs = Softmax (scores2)
    /// ```
    ///
    /// ## How to fix
    /// Let the attention kernel build the mask: a bool mask or `is_causal = 1` on ONNX `Attention`,
    /// or `GroupQueryAttention` with its sequence lengths and `local_window_size` — the finding
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

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let s = cx.session();
    for (gi, ni, node) in nodes(s) {
        // The mask input of the attention computation.
        let mask = match (node.domain.as_str(), node.op.as_str()) {
            ("ai.onnx", "Softmax") => {
                let edges = Edges::new(s, gi);
                let Some(&p) = node
                    .inputs
                    .first()
                    .and_then(|i| edges.producer.get(i.as_str()))
                else {
                    continue;
                };
                let add = &s.graphs[gi].nodes[p];
                if add.op != "Add" {
                    continue;
                }
                // The addend that does not come from the QK MatMul.
                add.inputs
                    .iter()
                    .find(|i| {
                        edges
                            .producer
                            .get(i.as_str())
                            .is_none_or(|&q| s.graphs[gi].nodes[q].op != "MatMul")
                    })
                    .cloned()
            }
            // `Add` + `Softmax` fused by ORT's level-2 `BiasSoftmaxFusion`: (scores, mask).
            ("com.microsoft", "BiasSoftmax") => node.inputs.get(1).cloned(),
            ("ai.onnx", "Attention") => node.inputs.get(3).cloned(),
            ("com.microsoft", "MultiHeadAttention") => node.inputs.get(5).cloned(),
            _ => continue,
        };
        let Some(mask) = mask.filter(|m| !m.is_empty()) else {
            continue;
        };
        let float = matches!(s.type_of(gi, &mask), Some(Type::Tensor(e)) if *e == DataType::Float as i32 || *e == DataType::Float16 as i32 || *e == DataType::Bfloat16 as i32);
        if !float {
            continue;
        }
        let edges = Edges::new(s, gi);
        let mut chain = Vec::new();
        let mut stack = vec![(mask.clone(), 0usize)];
        let mut seen = HashSet::new();
        while let Some((v, depth)) = stack.pop() {
            let Some(&p) = edges.producer.get(v.as_str()) else {
                continue;
            };
            if depth > 10 || !seen.insert(p) {
                continue;
            }
            chain.push(p);
            for i in s.graphs[gi].nodes[p]
                .inputs
                .iter()
                .filter(|i| !i.is_empty())
            {
                stack.push((i.clone(), depth + 1));
            }
        }
        if !chain
            .iter()
            .any(|&c| MASK_OPS.contains(&s.graphs[gi].nodes[c].op.as_str()))
        {
            continue;
        }
        let copies = crate::rules::copies_of_chain(cx, gi, &chain);
        let on_cpu = chain
            .iter()
            .filter(|&&c| s.graphs[gi].nodes[c].ep == Some(Ep::Cpu))
            .count();
        if copies == 0 && on_cpu == 0 {
            continue;
        }
        let mut f = cx.node_finding(
            &RULE,
            gi,
            ni,
            format!(
                "the float attention mask `{mask}` of `{}` is built by {} nodes ({on_cpu} on CPU) with {copies} cop{}",
                node.name,
                chain.len(),
                if copies == 1 { "y" } else { "ies" }
            ),
        );
        f.cause = "float mask".into();
        let mut ops: Vec<String> = chain
            .iter()
            .rev()
            .map(|&c| {
                let n = &s.graphs[gi].nodes[c];
                format!("{} ({})", n.op, ep_name(n.ep))
            })
            .collect();
        ops.truncate(12);
        f.evidence.push(format!("mask chain: {}", ops.join(" → ")));
        let opset = s.opsets.get("ai.onnx").copied().unwrap_or(0);
        let mut ways = Vec::new();
        if let Some(att) = cx.table.schema("ai.onnx", "Attention", opset)
            && cx
                .table
                .kernels(Ep::Cuda, "ai.onnx", "Attention")
                .iter()
                .any(|k| k.matches_since(att.since))
        {
            ways.push(format!(
                "ONNX Attention-{} with a bool mask or is_causal = 1 (CUDA kernel in ORT {})",
                att.since,
                cx.table.release().ort
            ));
        }
        if !cx
            .table
            .kernels(Ep::Cuda, "com.microsoft", "GroupQueryAttention")
            .is_empty()
        {
            ways.push("com.microsoft GroupQueryAttention with seqlens_k/total_sequence_length and local_window_size".into());
        }
        f.help = Some(if ways.is_empty() {
            "keep the whole mask chain on CUDA (see the OL1xx findings on its nodes)".into()
        } else {
            format!(
                "let the attention kernel build the mask: {}",
                ways.join("; or ")
            )
        });
        out.push(f);
    }
}
