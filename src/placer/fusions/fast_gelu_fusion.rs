//! ORT's `FastGeluFusion` (`core/optimizer/fast_gelu_fusion.cc`).

use super::*;

impl Fuser {
    /// The other input of binary `n` when one input is `v`.
    pub(super) fn other_input<'a>(n: &'a SNode, v: &str) -> Option<&'a str> {
        match n.inputs.as_slice() {
            [a, b] if a == v => Some(b),
            [a, b] if b == v => Some(a),
            _ => None,
        }
    }

    /// A live same-provider ai.onnx `op` node producing `v`, read only once.
    pub(super) fn single_use_producer(
        &self,
        session: &Session,
        v: &str,
        op: &str,
        ep: Option<Ep>,
    ) -> Option<usize> {
        let p = self.producer_of(session, v)?;
        let pn = &session.graphs[self.gi].nodes[p];
        (pn.domain == "ai.onnx"
            && pn.op == op
            && pn.ep == ep
            && self.out_edges(session, pn) == 1
            && !self.produces_graph_output(pn))
        .then_some(p)
    }

    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` → `FastGelu`, named `GPT2Gelu`.
    pub(super) fn fast_gelu(&mut self, session: &mut Session) {
        const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
        let g = self.gi;
        for ni in self.pass_order(session) {
            let t = &session.graphs[g].nodes[ni];
            if t.removed
                || !matches!(t.ep, Some(Ep::Cuda | Ep::Cpu))
                || t.domain != "ai.onnx"
                || t.op != "Tanh"
                || self.out_edges(session, t) != 1
                || self.produces_graph_output(t)
                || !self.gelu_types_ok(session, t)
            {
                continue;
            }
            let ep = t.ep;
            let Some(m3) = t
                .inputs
                .first()
                .and_then(|i| self.single_use_producer(session, i, "Mul", ep))
            else {
                continue;
            };
            let m3n = &session.graphs[g].nodes[m3];
            let Some(a1_out) = m3n
                .inputs
                .iter()
                .position(|i| is_const(session, g, i, SQRT_2_OVER_PI))
                .and_then(|k| m3n.inputs.get(1 - k.min(1)).cloned())
            else {
                continue;
            };
            let Some(a1) = self.single_use_producer(session, &a1_out, "Add", ep) else {
                continue;
            };
            // x + 0.044715·x³: find x as the Add input the cube is made of.
            let a1n = &session.graphs[g].nodes[a1];
            let mut matched: Option<(String, Vec<usize>)> = None;
            for k in 0..a1n.inputs.len().min(2) {
                let x = &a1n.inputs[k];
                let Some(cube_term) = a1n.inputs.get(1 - k) else {
                    continue;
                };
                let Some(m2) = self.single_use_producer(session, cube_term, "Mul", ep) else {
                    continue;
                };
                let m2n = &session.graphs[g].nodes[m2];
                let Some(c) = m2n
                    .inputs
                    .iter()
                    .position(|i| is_const(session, g, i, 0.044_715))
                else {
                    continue;
                };
                let Some(cube) = m2n.inputs.get(1 - c.min(1)) else {
                    continue;
                };
                if let Some(cubes) = self.cube_of(session, cube, x, ep) {
                    let mut nodes = vec![m2];
                    nodes.extend(cubes);
                    matched = Some((x.clone(), nodes));
                    break;
                }
            }
            let Some((x, cube_nodes)) = matched else {
                continue;
            };
            // 1 + tanh
            let Some(a2) = self.next(session, t, "Add") else {
                continue;
            };
            let a2n = &session.graphs[g].nodes[a2];
            let t_out = &t.outputs[0];
            if !Self::other_input(a2n, t_out).is_some_and(|o| is_const(session, g, o, 1.0))
                || self.out_edges(session, a2n) != 1
                || self.produces_graph_output(a2n)
            {
                continue;
            }
            let Some(m4) = self.next(session, a2n, "Mul") else {
                continue;
            };
            let m4n = &session.graphs[g].nodes[m4];
            let Some(other) = Self::other_input(m4n, &a2n.outputs[0]) else {
                continue;
            };
            let half = |v: &str| is_const(session, g, v, 0.5);
            let mut tail = vec![m4];
            let last = if other == x {
                // (x · (1 + tanh)) · 0.5
                let Some(m5) = self.next(session, m4n, "Mul") else {
                    continue;
                };
                let m5n = &session.graphs[g].nodes[m5];
                if self.out_edges(session, m4n) != 1
                    || self.produces_graph_output(m4n)
                    || !Self::other_input(m5n, &m4n.outputs[0]).is_some_and(half)
                {
                    continue;
                }
                tail.push(m5);
                m5
            } else {
                // (0.5 · x) · (1 + tanh)
                let Some(m1) = self.single_use_producer(session, other, "Mul", ep) else {
                    continue;
                };
                if !Self::other_input(&session.graphs[g].nodes[m1], &x).is_some_and(half) {
                    continue;
                }
                tail.push(m1);
                m4
            };
            let mut fused = cube_nodes;
            fused.extend([a1, m3, ni, a2]);
            fused.extend(tail);
            let ln = &session.graphs[g].nodes[last];
            let mut node = fused_node(ln, "FastGelu");
            node.inputs = vec![x];
            node.outputs = ln.outputs.clone();
            // ORT names a new output value first (`gelu_output`), advancing the shared counter.
            self.arg_name(session, "gelu_output");
            node.name = self.node_name(session, "GPT2Gelu");
            self.fuse(session, &fused, ni, node);
        }
    }

    /// The nodes computing `x³` into `v`: `Pow(x, 3)` or `x·x·x` as two Muls.
    pub(super) fn cube_of(
        &self,
        session: &Session,
        v: &str,
        x: &str,
        ep: Option<Ep>,
    ) -> Option<Vec<usize>> {
        let g = self.gi;
        if let Some(p) = self.single_use_producer(session, v, "Pow", ep) {
            let pn = &session.graphs[g].nodes[p];
            return (pn.inputs.first().is_some_and(|i| i == x)
                && pn
                    .inputs
                    .get(1)
                    .is_some_and(|e| is_const(session, g, e, 3.0)))
            .then(|| vec![p]);
        }
        let m = self.single_use_producer(session, v, "Mul", ep)?;
        let sq = Self::other_input(&session.graphs[g].nodes[m], x)?;
        let s = self.single_use_producer(session, sq, "Mul", ep)?;
        let sn = &session.graphs[g].nodes[s];
        (sn.inputs.len() == 2 && sn.inputs.iter().all(|i| i == x)).then(|| vec![m, s])
    }
}
