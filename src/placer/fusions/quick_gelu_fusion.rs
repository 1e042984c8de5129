//! ORT's `QuickGeluFusion` (`core/optimizer/quick_gelu_fusion.cc`).

use super::*;

impl Fuser {
    /// `x * Sigmoid(x)` or `x * Sigmoid(alpha * x)` → `QuickGelu`, named
    /// `<final Mul>/QuickGeluFusion/`.
    pub(super) fn quick_gelu(&mut self, session: &mut Session) {
        let compatible = self.compatible;
        let ok_ep = move |n: &SNode| compatible.contains(n.ep);
        let is = |n: &SNode, op: &str, versions: &[i64]| {
            n.domain == Sym::AI_ONNX && n.op == op && n.since.is_some_and(|v| versions.contains(&v))
        };
        for ni in self.pass_order(session) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed || !ok_ep(n) {
                continue;
            }
            let mut fused: Vec<usize> = Vec::new();
            let mut input: Option<Sym> = None;
            let mut sigmoid = ni;
            if is(n, "Mul", &[7, 13, 14])
                && self.out_edges(session, n) == 1
                && !self.produces_graph_output(n)
                && n.inputs.len() == 2
            {
                for (i, x) in n.inputs.iter().enumerate() {
                    if is_scalar(session, self.gi, *x)
                        && session.initializer(self.gi, *x).is_some_and(|init| {
                            !init.overridable
                                && [D::Float, D::Double, D::Float16]
                                    .iter()
                                    .any(|d| *d as i32 == init.elem)
                        })
                    {
                        input = Some(n.inputs[1 - i]);
                        fused.push(ni);
                        match self.single_consumer(session, n) {
                            Some(c) => sigmoid = c,
                            None => input = None,
                        }
                        break;
                    }
                }
            }
            if !fused.is_empty() && input.is_none() {
                continue;
            }
            let s = &session.graphs[self.gi].nodes[sigmoid];
            if !is(s, "Sigmoid", &[6, 13])
                || !ok_ep(s)
                || self.out_edges(session, s) != 1
                || self.produces_graph_output(s)
            {
                continue;
            }
            fused.push(sigmoid);
            let input = input.unwrap_or_else(|| s.inputs.first().cloned().unwrap_or_default());
            let Some(m) = self.single_consumer(session, s) else {
                continue;
            };
            let mn = &session.graphs[self.gi].nodes[m];
            let Some(out) = s.outputs.first() else {
                continue;
            };
            let Some(at) = mn.inputs.iter().position(|i| i == out) else {
                continue;
            };
            if !is(mn, "Mul", &[7, 13, 14])
                || !ok_ep(mn)
                || mn.inputs.len() != 2
                || mn.inputs[(at + 1) % 2] != input
            {
                continue;
            }
            fused.push(m);
            let mut node = fused_node(mn, "QuickGelu");
            node.inputs = vec![input];
            node.outputs = vec![mn.outputs.first().cloned().unwrap_or_default()];
            node.attrs = thin_vec::thin_vec![float_attr("alpha")];
            node.name = self.node_name(session, &format!("{}/QuickGeluFusion/", mn.name));
            self.fuse(session, &fused, ni, node);
        }
    }
}
