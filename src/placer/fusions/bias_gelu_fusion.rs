//! ORT's `BiasGeluFusion` (`core/optimizer/bias_gelu_fusion.cc`).

use super::*;

impl Fuser {
    /// `Add(x, bias)` (1-D bias over the last dim) → `Gelu` → `BiasGelu`, named `BiasGelu`.
    pub(super) fn bias_gelu(&mut self, session: &mut Session) {
        let g = self.gi;
        for ni in self.pass_order_of(session, &["Add"]) {
            let n = &session.graphs[g].nodes[ni];
            if n.removed
                || !self.compatible.contains(n.ep)
                || n.domain != Sym::AI_ONNX
                || n.op != "Add"
                || !matches!(n.since, Some(7 | 13 | 14))
                || n.inputs.len() != 2
                || self.produces_graph_output(n)
                || !self.gelu_types_ok(session, n)
            {
                continue;
            }
            let (Some(a), Some(b)) = (
                session.shape_of(g, n.inputs[0]),
                session.shape_of(g, n.inputs[1]),
            ) else {
                continue;
            };
            let bias_at = if b.len() == 1 {
                1
            } else if a.len() == 1 {
                0
            } else {
                continue;
            };
            let (x, bias) = if bias_at == 1 { (a, b) } else { (b, a) };
            match (x.last(), bias[0]) {
                (Some(Some(d)), Some(e)) if *d == e => {}
                _ => continue,
            }
            let Some(c) = self.single_consumer(session, n) else {
                continue;
            };
            let cn = &session.graphs[g].nodes[c];
            let is_gelu = (cn.domain == MS && cn.op == "Gelu")
                || (cn.domain == Sym::AI_ONNX
                    && cn.op == "Gelu"
                    && cn.attr_s("approximate").is_none_or(|a| a == "none"));
            // A one-input FastGelu takes the bias as its second input (same fusion).
            let is_fast = cn.domain == MS && cn.op == "FastGelu" && cn.inputs.len() == 1;
            if !(is_gelu || is_fast) || cn.ep != n.ep {
                continue;
            }
            let op = if is_fast { "FastGelu" } else { "BiasGelu" };
            let mut node = fused_node(n, op);
            node.inputs = if bias_at == 1 {
                vec![n.inputs[0], n.inputs[1]]
            } else {
                vec![n.inputs[1], n.inputs[0]]
            };
            node.outputs = cn.outputs.clone();
            node.name = self.node_name(session, op);
            self.fuse(session, &[ni, c], ni, node);
        }
    }
}
