//! OL202 cuda-graph-blocker.

use crate::declare_rule;
use crate::diagnostics::Finding;
use crate::rules::Context;

declare_rule! {
    /// ## What it does
    /// Says whether the model can be captured as a CUDA graph (`enable_cuda_graph=1`): ORT refuses
    /// when the main graph holds a control-flow node (`If`, `Loop`, `Scan`, or contrib ops with
    /// subgraphs) or any `Memcpy` node. CPU nodes alone are tolerated.
    ///
    /// ## Why is this bad?
    /// CUDA-graph capture removes per-kernel launch overhead, which dominates small-batch decoding.
    /// With a blocker, session creation fails when capture is requested.
    ///
    /// ## Example
    /// ```text
    /// y = Reshape (x, shape)    # Reshape on CPU (OL101) -> Memcpy nodes -> no CUDA graph
    /// ```
    ///
    /// ## How to fix
    /// Remove every copy of the main graph (fix the OL1xx and OL3xx findings) and move control flow
    /// out of the model.
    ///
    /// ## Fix safety
    /// No automatic fix.
    pub static RULE = ("OL202", "cuda-graph-blocker", Allow, "the model cannot be captured as a CUDA graph", check);
}

fn check(cx: &Context, out: &mut Vec<Finding>) {
    let s = cx.session();
    let Some(main) = s.graphs.first() else { return };
    if !cx
        .placement
        .session
        .graphs
        .iter()
        .flat_map(|g| &g.nodes)
        .any(|n| n.ep == Some(cx.provider().ep))
    {
        return;
    }
    let copies = cx.placement.copies.iter().filter(|c| c.graph == 0).count();
    let control: Vec<String> = main
        .live_nodes()
        .filter(|(_, n)| !n.subgraphs.is_empty())
        .map(|(_, n)| format!("`{}` ({})", n.name, n.op))
        .collect();
    let mut reasons = Vec::new();
    if copies > 0 {
        reasons.push(format!(
            "{copies} Memcpy node{} in the main graph",
            if copies == 1 { "" } else { "s" }
        ));
    }
    if !control.is_empty() {
        reasons.push(format!("control flow: {}", control.join(", ")));
    }
    if reasons.is_empty() {
        return;
    }
    let mut f = Finding::new(
        RULE.code,
        RULE.name,
        RULE.default,
        format!(
            "ORT cannot capture this model as a {} graph: {}",
            cx.provider().label,
            reasons.join("; ")
        ),
    );
    f.graph = main.name.to_string();
    f.cause = format!("{} graph", cx.provider().label.to_ascii_lowercase());
    f.help = Some(
        "fix the findings that cause copies; keep control flow out of the captured model".into(),
    );
    out.push(f);
}
