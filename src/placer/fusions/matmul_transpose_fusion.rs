//! ORT's `MatmulTransposeFusion` (`core/optimizer/matmul_transpose_fusion.cc`).

use super::*;

impl Fuser {
    /// A `Transpose` of the last two dims feeding `MatMul`/`FusedMatMul` → `FusedMatMul` with
    /// `transA`/`transB`, named `<matmul>/MatmulTransposeFusion/`.
    pub(super) fn matmul_transpose(&mut self, session: &mut Session) {
        for ni in self.pass_order_of(session, &["MatMul", "FusedMatMul"]) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed || !self.compatible.contains(n.ep) || n.inputs.len() < 2 {
                continue;
            }
            let is_matmul = (n.domain == Sym::AI_ONNX && n.op == "MatMul")
                || (n.domain == MS && n.op == "FusedMatMul");
            if !is_matmul {
                continue;
            }
            if !self.matmul_types_ok(session, n) {
                continue;
            }
            let mut trans: [Option<usize>; 2] = [
                self.last_two_transpose(session, n.inputs[0]),
                self.last_two_transpose(session, n.inputs[1]),
            ];
            // `ReorderCastAndTranspose`: Transpose → Cast → MatMul becomes Cast → Transpose →
            // MatMul, so that the Transpose fuses.
            let base = format!("{}/MatmulTransposeFusion/", n.name);
            for (slot, t) in trans.iter_mut().enumerate() {
                if t.is_none() {
                    let value = session.graphs[self.gi].nodes[ni].inputs[slot];
                    *t = self.reorder_cast_and_transpose(session, value, &base);
                }
            }
            let n = &session.graphs[self.gi].nodes[ni];
            if trans == [None, None] {
                continue;
            }
            let mut node = fused_node(n, "FusedMatMul");
            let get = |name: &str| n.attr_i(name).unwrap_or(0);
            let mut attrs = if n.op == "FusedMatMul" {
                n.attrs.clone()
            } else {
                thin_vec::ThinVec::new()
            };
            for (slot, key) in [(0, "transA"), (1, "transB")] {
                let flip = trans[slot].is_some();
                let v = i64::from((get(key) != 0) ^ flip);
                attrs.retain(|a| a.name() != key);
                attrs.push(int_attr(key, v));
            }
            node.attrs = attrs;
            let mut fused = vec![ni];
            for (slot, t) in trans.iter().enumerate() {
                if let Some(p) = *t {
                    let value = n.inputs[slot];
                    node.inputs[slot] = session.graphs[self.gi].nodes[p]
                        .inputs
                        .first()
                        .cloned()
                        .unwrap_or_default();
                    let readers = self.readers(session, value).filter(|&k| k != ni).count();
                    if readers == 0 && !fused.contains(&p) {
                        fused.push(p);
                    }
                }
            }
            node.name = self.node_name(session, &base);
            self.fuse(session, &fused, ni, node);
        }
    }

    /// `GetTransposeNodeFromOutput`: the live `Transpose` producing `value` when it swaps the
    /// last two dims and produces no graph output (ORT does not compare its provider).
    pub(super) fn last_two_transpose(&self, session: &Session, value: Sym) -> Option<usize> {
        let p = self.producer_of(session, value)?;
        let pn = &session.graphs[self.gi].nodes[p];
        if pn.op != Sym::TRANSPOSE || pn.domain != Sym::AI_ONNX || self.produces_graph_output(pn) {
            return None;
        }
        let perm = self.effective_perm(session, p)?;
        let r = perm.len();
        let last_two = r >= 2
            && perm[..r - 2]
                .iter()
                .enumerate()
                .all(|(i, &p)| p == i as i64)
            && perm[r - 2] == r as i64 - 1
            && perm[r - 1] == r as i64 - 2;
        last_two.then_some(p)
    }

    /// `ReorderCastAndTranspose`: when `value` comes from a `Cast` of a last-two-dims
    /// `Transpose`, a new Cast (named `base`, output `<cast output>/MatmulTransposeFusion/`)
    /// reads the Transpose's input and the Transpose, moved after it, produces the Cast's
    /// output; the old Cast goes, and the old Transpose too once nothing else reads it.
    /// Returns the new Transpose.
    pub(super) fn reorder_cast_and_transpose(
        &mut self,
        session: &mut Session,
        value: Sym,
        base: &str,
    ) -> Option<usize> {
        let c = self.producer_of(session, value)?;
        let cast = session.graphs[self.gi].nodes[c].clone();
        if cast.op != Sym::CAST || cast.domain != Sym::AI_ONNX {
            return None;
        }
        let t = self.last_two_transpose(session, *cast.inputs.first()?)?;
        let transpose = session.graphs[self.gi].nodes[t].clone();
        let t_in = *transpose.inputs.first()?;
        let t_out = *transpose.outputs.first()?;
        let cast_out = *cast.outputs.first()?;
        let new_value = self.arg_name(session, &format!("{cast_out}/MatmulTransposeFusion/"));
        let g = &mut session.graphs[self.gi];
        if let Some(ty) = g.types.get(&cast_out).cloned() {
            g.types.insert(new_value, ty);
        }
        if let Some(shape) = g.shapes.get(&t_in).cloned() {
            g.shapes.insert(new_value, shape);
        }
        let mut new_cast = cast.clone();
        new_cast.name = self.node_name(session, base);
        new_cast.inputs = vec![t_in];
        new_cast.outputs = vec![new_value];
        // The Transpose keeps its name: ORT's optimised graphs show no name generated for it
        // (the FusedMatMul's token follows the Cast's directly).
        let mut new_transpose = transpose.clone();
        new_transpose.inputs = vec![new_value];
        new_transpose.outputs = vec![cast_out];
        new_transpose.ep = cast.ep;
        let others = self.readers(session, t_out).filter(|&k| k != c).count();
        self.remove(session, c);
        if others == 0 {
            self.remove(session, t);
        }
        let at = self.pos.get(c).copied().unwrap_or(usize::MAX);
        let nc = self.add(session, new_cast);
        let nt = self.add(session, new_transpose);
        self.pos.resize(nt + 1, usize::MAX);
        if at < self.order.len() {
            self.order[at] = nc;
            self.pos[nc] = at;
        }
        self.attach(nc, nt);
        Some(nt)
    }

    /// The permutation of Transpose `t` as ORT sees it at level 2: the level-1 transpose
    /// optimizer has already merged it with a Transpose above it (reached through
    /// single-input `Concat`s, each read only on this path), composing the two perms.
    pub(super) fn effective_perm(&self, session: &Session, t: usize) -> Option<Vec<i64>> {
        let g = &session.graphs[self.gi];
        let mut value = *g.nodes[t].inputs.first()?;
        // Without `perm` a Transpose reverses the dims (`GetTransposePerms`), which needs the rank.
        let mut perm = match g.nodes[t].attr_ints("perm") {
            Some(p) => p.to_vec(),
            None => {
                let rank = session.shape_of(self.gi, value)?.len() as i64;
                (0..rank).rev().collect()
            }
        };
        // A few steps suffice: the chains the optimiser merges are short.
        for _ in 0..4 {
            let Some(p) = self.producer_of(session, value) else {
                break;
            };
            let pn = &g.nodes[p];
            if self.out_edges(session, pn) != 1
                || self.produces_graph_output(pn)
                || pn.domain != Sym::AI_ONNX
            {
                break;
            }
            match pn.op.as_str() {
                "Concat" if pn.inputs.len() == 1 => {}
                "Transpose" => {
                    let Some(upper) = pn.attr_ints("perm") else {
                        break;
                    };
                    if upper.len() != perm.len() {
                        break;
                    }
                    let composed: Option<Vec<i64>> = perm
                        .iter()
                        .map(|&q| usize::try_from(q).ok().and_then(|q| upper.get(q).copied()))
                        .collect();
                    perm = composed?;
                }
                _ => break,
            }
            value = *pn.inputs.first()?;
        }
        Some(perm)
    }
}
