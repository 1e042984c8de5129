//! ORT's `GeluFusion` (`core/optimizer/gelu_fusion.cc`).

use super::*;

impl Fuser {
    /// The live single consumer of `n` when it is `op` on the same provider.
    pub(super) fn next(&self, session: &Session, n: &SNode, op: &str) -> Option<usize> {
        let c = self.single_consumer(session, n)?;
        let cn = &session.graphs[self.gi].nodes[c];
        (cn.domain == Sym::AI_ONNX && cn.op == op && cn.ep == n.ep && !cn.removed).then_some(c)
    }

    pub(super) fn gelu_types_ok(&self, session: &Session, n: &SNode) -> bool {
        n.existing_inputs().all(|(_, i)| {
            matches!(session.type_of(self.gi, i), Some(Type::Tensor(t))
                if [D::Float16, D::Float, D::Double].iter().any(|d| *d as i32 == *t))
        })
    }

    /// `x/√2` (or `x·(1/√2)`) → `Erf` → `+1` → `·x` and `·0.5` (either order) → `Gelu`
    /// (com.microsoft, named `Gelu`).
    pub(super) fn gelu(&mut self, session: &mut Session) {
        let g = self.gi;
        for ni in self.pass_order_of(session, &["Div", "Mul"]) {
            let n = &session.graphs[g].nodes[ni];
            if n.removed
                || !self.compatible.contains(n.ep)
                || n.domain != Sym::AI_ONNX
                || n.inputs.len() != 2
            {
                continue;
            }
            let scaled = match n.op.as_str() {
                "Div" => is_const(session, g, n.inputs[1], std::f64::consts::SQRT_2),
                "Mul" => is_const(session, g, n.inputs[1], std::f64::consts::FRAC_1_SQRT_2),
                _ => false,
            };
            if !scaled || self.out_edges(session, n) != 1 || !self.gelu_types_ok(session, n) {
                continue;
            }
            let x = n.inputs[0];
            let Some(erf) = self.next(session, n, "Erf") else {
                continue;
            };
            let en = &session.graphs[g].nodes[erf];
            if self.out_edges(session, en) != 1 {
                continue;
            }
            let Some(add) = self.next(session, en, "Add") else {
                continue;
            };
            let an = &session.graphs[g].nodes[add];
            let erf_out = &en.outputs[0];
            if self.out_edges(session, an) != 1
                || !an
                    .inputs
                    .iter()
                    .any(|i| i != erf_out && is_const(session, g, *i, 1.0))
            {
                continue;
            }
            let Some(mul) = self.single_consumer(session, an) else {
                continue;
            };
            let mn = &session.graphs[g].nodes[mul];
            if mn.domain != Sym::AI_ONNX
                || mn.op != "Mul"
                || mn.ep != n.ep
                || mn.inputs.len() != 2
                || mn.outputs.is_empty()
            {
                continue;
            }
            let add_out = &an.outputs[0];
            let other = if &mn.inputs[0] == add_out {
                &mn.inputs[1]
            } else {
                &mn.inputs[0]
            };
            let half = |v: Sym| is_const(session, g, v, 0.5);
            let mut fused = vec![ni, erf, add];
            let last = if *other == x {
                // (x · (1 + erf)) · 0.5. ORT looks for `x · 0.5` first, among the Mul's input
                // nodes: when `x` itself comes from a `Mul` (a dequantizing scale, say), that
                // one is taken and fails (it feeds the Div too), and the fusion gives up
                // (measured: `qdyn.tsd.falcon` on CUDA, every release).
                if self
                    .producer_of(session, x)
                    .is_some_and(|p| session.graphs[g].nodes[p].op == "Mul")
                {
                    continue;
                }
                let Some(m2) = self.next(session, mn, "Mul") else {
                    continue;
                };
                let m2n = &session.graphs[g].nodes[m2];
                let mul_out = &mn.outputs[0];
                if self.out_edges(session, mn) != 1
                    || !m2n.inputs.iter().any(|i| i != mul_out && half(*i))
                {
                    continue;
                }
                fused.extend([mul, m2]);
                m2
            } else {
                // (x · 0.5) · (1 + erf)
                let Some(p) = self.producer_of(session, *other) else {
                    continue;
                };
                let pn = &session.graphs[g].nodes[p];
                if pn.domain != Sym::AI_ONNX
                    || pn.op != "Mul"
                    || pn.ep != n.ep
                    || self.out_edges(session, pn) != 1
                    || pn.inputs.len() != 2
                    || !((pn.inputs[0] == x && half(pn.inputs[1]))
                        || (pn.inputs[1] == x && half(pn.inputs[0])))
                {
                    continue;
                }
                fused.extend([p, mul]);
                mul
            };
            let ln = &session.graphs[g].nodes[last];
            let mut node = fused_node(ln, "Gelu");
            node.inputs = vec![x];
            node.outputs = ln.outputs.clone();
            node.name = self.node_name(session, "Gelu");
            self.fuse(session, &fused, ni, node);
        }
    }
}
