//! ORT's `MatMulScaleFusion` (`core/optimizer/matmul_scale_fusion.cc`).

use super::*;

/// Which input of a `Mul`/`Div` is a constant scalar scale (`Div` only by its divisor).
pub(super) fn scale_input(session: &Session, gi: usize, n: &SNode) -> Option<usize> {
    if n.domain != Sym::AI_ONNX
        || !matches!(n.since, Some(7 | 13 | 14))
        || n.inputs.len() != 2
        || n.outputs.len() != 1
    {
        return None;
    }
    let candidates: &[usize] = match n.op.as_str() {
        "Div" => &[1],
        "Mul" => &[0, 1],
        _ => return None,
    };
    candidates.iter().copied().find(|&i| {
        let other_rank = session.shape_of(gi, n.inputs[1 - i]).map_or(0, Vec::len);
        session.initializer(gi, n.inputs[i]).is_some_and(|init| {
            !init.overridable
                && init.elements() == Some(1)
                && init.dims.len() <= other_rank
                && [
                    D::Uint32,
                    D::Uint64,
                    D::Int32,
                    D::Int64,
                    D::Float16,
                    D::Float,
                    D::Double,
                    D::Bfloat16,
                ]
                .iter()
                .any(|d| *d as i32 == init.elem)
        })
    })
}

impl Fuser {
    /// `MatMul`/`FusedMatMul` with a leading or trailing multiplication (or division) by a
    /// constant scalar → `FusedMatMul` named `<matmul>/MatMulScaleFusion/`.
    pub(super) fn matmul_scale(&mut self, session: &mut Session) {
        // Only MatMuls next to a scale can fuse: find those first (a few hash lookups per
        // scale instead of per MatMul), then visit them in the pass order.
        let g = &session.graphs[self.gi];
        let mut near: HashSet<usize> = HashSet::default();
        for (_, sn) in g.live_nodes() {
            if !(sn.op == "Mul" || sn.op == "Div") {
                continue;
            }
            let Some(at) = scale_input(session, self.gi, sn) else {
                continue;
            };
            near.extend(self.producer_of(session, sn.inputs[1 - at]));
            for o in &sn.outputs {
                near.extend(self.readers(session, *o));
            }
        }
        if near.is_empty() {
            return;
        }
        for ni in self.pass_order_of(session, &["MatMul", "FusedMatMul"]) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed || !self.compatible.contains(n.ep) || !near.contains(&ni) {
                continue;
            }
            let is_matmul =
                (n.domain == Sym::AI_ONNX && n.op == "MatMul" && matches!(n.since, Some(9 | 13)))
                    || (n.domain == MS && n.op == "FusedMatMul");
            if !is_matmul {
                continue;
            }
            let ep = n.ep;
            // Leading scales: (input slot, scale node, unscaled value).
            let mut leading: Vec<(usize, usize, Sym)> = Vec::new();
            for (slot, input) in n.inputs.iter().enumerate().take(2) {
                let Some(p) = self.producer_of(session, *input) else {
                    continue;
                };
                let pn = &session.graphs[self.gi].nodes[p];
                if pn.ep != ep {
                    continue;
                }
                let Some(scale_at) = scale_input(session, self.gi, pn) else {
                    continue;
                };
                let other = &pn.inputs[1 - scale_at];
                if session
                    .shape_of(self.gi, *other)
                    .is_none_or(|s| s.is_empty())
                {
                    continue;
                }
                leading.push((slot, p, *other));
            }
            // A trailing scale: the single consumer.
            let mut trailing: Option<usize> = None;
            if !self.produces_graph_output(n)
                && let Some(c) = self.single_consumer(session, n)
            {
                let cn = &session.graphs[self.gi].nodes[c];
                if cn.ep == ep && scale_input(session, self.gi, cn).is_some() {
                    trailing = Some(c);
                }
            }
            let n = &session.graphs[self.gi].nodes[ni];
            if (leading.is_empty() && trailing.is_none()) || !self.matmul_types_ok(session, n) {
                continue;
            }
            let mut node = fused_node(n, "FusedMatMul");
            if n.op == "FusedMatMul" {
                node.attrs = n.attrs.clone();
            } else {
                node.attrs = thin_vec::thin_vec![float_attr("alpha")];
            }
            for (slot, _, other) in &leading {
                node.inputs[*slot] = *other;
            }
            if let Some(c) = trailing {
                node.outputs = session.graphs[self.gi].nodes[c].outputs.clone();
            }
            node.name = self.node_name(session, &format!("{}/MatMulScaleFusion/", n.name));
            let mut fused = vec![ni];
            for (slot, p, _) in &leading {
                // The scale goes when the MatMul was its last reader.
                let value = &session.graphs[self.gi].nodes[ni].inputs[*slot];
                let pn = &session.graphs[self.gi].nodes[*p];
                let readers = self.readers(session, *value).filter(|&k| k != ni).count();
                if readers == 0 && !self.produces_graph_output(pn) && !fused.contains(p) {
                    fused.push(*p);
                }
            }
            fused.extend(trailing);
            self.fuse(session, &fused, ni, node);
        }
    }

    pub(super) fn matmul_types_ok(&self, session: &Session, n: &SNode) -> bool {
        // ORT's `IsMatMulInputTypeSupported`, per provider as ORT names them.
        let allowed: &[D] = match n.ep.map(Ep::name) {
            Some(ort::CUDA | ort::ROCM) => &[D::Float16, D::Float, D::Double, D::Bfloat16],
            Some(ort::CPU) => &[D::Float, D::Double],
            _ => return true,
        };
        n.existing_inputs().all(|(_, i)| {
            matches!(session.type_of(self.gi, i), Some(Type::Tensor(t)) if allowed.iter().any(|d| *d as i32 == *t))
        })
    }
}
