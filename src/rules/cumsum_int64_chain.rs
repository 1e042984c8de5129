//! OL302 cumsum-int64-chain.

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::infer::Type;
use crate::model::DataType;
use crate::rules::{Context, nodes};
use crate::sym::Sym;
use crate::tables::Ep;

declare_rule! {
    /// ## What it does
    /// Flags a `CumSum` over int64 — typically position ids computed from the attention mask
    /// (`attention_mask → Cast(int64) → CumSum → Sub(1) → Mul(mask)`) — when it runs on the CPU or
    /// its inputs or outputs cross devices. The finding shows the chain around it and the
    /// alternatives the release's CUDA table allows (an int32 or float `CumSum`).
    ///
    /// ## Why is this bad?
    /// Each step of such a chain that lands on the CPU drags the mask to the host and the positions
    /// back to the GPU: several copies per decoding step, and no CUDA graph.
    ///
    /// ## Example
    /// ```text
    /// m64 = Cast <to = 7> (attention_mask)
    /// pos = CumSum (m64, axis)                 # int64
    /// ```
    /// Use instead (when the CUDA table lists int32 for CumSum):
    /// ```text
    /// m32 = Cast <to = 6> (attention_mask)
    /// pos32 = CumSum (m32, axis)
    /// pos = Cast <to = 7> (pos32)
    /// ```
    ///
    /// ## How to fix
    /// Compute the positions in a type the CUDA `CumSum` kernel takes (the finding lists them), or
    /// pass position ids as a model input computed by the caller.
    ///
    /// ## Fix safety
    /// int32 positions are exact below 2^31 tokens; a float cumsum is exact below 2^24. Display only.
    pub static RULE = ("OL302", "cumsum-int64-chain", Warn, "a CumSum over int64 (positions from a mask) runs on CPU or crosses devices", check);
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let s = cx.session();
    let int64 = Type::Tensor(DataType::Int64 as i32);
    for (gi, ni, node) in nodes(s) {
        if node.op != "CumSum" || node.domain != Sym::AI_ONNX {
            continue;
        }
        let Some(x) = node.inputs.first() else {
            continue;
        };
        if s.type_of(gi, *x) != Some(&int64) {
            continue;
        }
        let edges = cx.edges(gi);
        let copies = crate::rules::copies_touching(cx, gi, ni);
        let on_cpu = node.ep == Some(Ep::Cpu);
        if !on_cpu && copies == 0 {
            continue;
        }
        // The chain as found: up to the graph input it starts from, down to its first consumers.
        let mut up = Vec::new();
        let mut v = *x;
        while let Some(&p) = edges.producer.get(&v) {
            let pn = &s.graphs[gi].nodes[p];
            up.push(format!("{} ({})", pn.op, ep_name(pn.ep)));
            match pn.inputs.first() {
                Some(i) if up.len() < 6 => v = *i,
                _ => break,
            }
        }
        up.reverse();
        let start = if edges.producer.contains_key(&v) {
            String::new()
        } else {
            format!("`{v}` → ")
        };
        let down: Vec<String> = node
            .outputs
            .first()
            .and_then(|o| edges.consumers.get(o))
            .map(|c| {
                c.iter()
                    .map(|&d| {
                        format!(
                            "{} ({})",
                            s.graphs[gi].nodes[d].op,
                            ep_name(s.graphs[gi].nodes[d].ep)
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut f = cx.node_finding(
            &RULE,
            gi,
            ni,
            format!(
                "int64 CumSum `{}` runs on {}{}",
                node.name,
                ep_name(node.ep),
                if copies > 0 {
                    format!(
                        ", {copies} cop{} around it",
                        if copies == 1 { "y" } else { "ies" }
                    )
                } else {
                    String::new()
                }
            ),
        );
        f.cause = "int64 cumsum".into();
        f.evidence.push(format!(
            "chain: {start}{}CumSum ({}) → {}",
            up.iter().map(|u| format!("{u} → ")).collect::<String>(),
            ep_name(node.ep),
            if down.is_empty() {
                "graph output".into()
            } else {
                down.join(", ")
            }
        ));
        let label = cx.provider().label;
        let provider_types: std::collections::BTreeSet<String> = cx
            .provider()
            .kernels(cx.table, "ai.onnx", "CumSum")
            .iter()
            .filter(|k| node.since.is_some_and(|s| k.matches_since(s)))
            .filter_map(|k| k.allowed("T"))
            .flatten()
            .cloned()
            .collect();
        let ort = &cx.table.release().ort;
        f.help = Some(if provider_types.contains("tensor(int64)") {
            format!(
                "the {label} CumSum kernel takes int64 here; the CPU hop comes from its neighbours: keep the whole chain on {label}"
            )
        } else if provider_types.contains("tensor(int32)") {
            format!(
                "compute the cumsum in int32 (ORT {ort}'s {label} CumSum takes {}) and cast the result to int64",
                join(&provider_types)
            )
        } else if provider_types.contains("tensor(float)") {
            format!(
                "compute the cumsum in float (ORT {ort}'s {label} CumSum takes {}), exact below 2^24 tokens",
                join(&provider_types)
            )
        } else {
            format!(
                "ORT {ort} has no {label} CumSum for this since-version; pass position ids as a model input"
            )
        });
        let copied = crate::rules::cost::copies_at(cx, gi, ni);
        crate::rules::cost::set_cost(cx, gi, &mut f, &copied);
        out.push(f);
    }
}

fn join(set: &std::collections::BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join(", ")
}

pub(crate) fn ep_name(ep: Option<Ep>) -> &'static str {
    ep.map_or("no provider", |e| crate::providers::of(e).label)
}
