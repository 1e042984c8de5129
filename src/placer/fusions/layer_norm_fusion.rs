//! ORT's `LayerNormFusion` and `SimplifiedLayerNormFusion` (`core/optimizer/layer_norm_fusion.cc`).

use super::*;

impl Fuser {
    /// `X → ReduceMean → Sub → Pow → ReduceMean → Add(eps) → Sqrt → Div → Mul(scale) →
    /// Add(bias)` (with the duplicated-Sub form of old PyTorch exports and the Cast nodes of
    /// mixed-precision exports) → `LayerNormalization`, named `<Mul>/LayerNormFusion/`.
    ///
    /// Follows `onnxruntime/core/optimizer/layer_norm_fusion.cc` (`LayerNormFusion::ApplyImpl`,
    /// 1.23–1.31): compatible providers CPU and CUDA; every node on the ReduceMean's provider;
    /// both ReduceMeans over the same single trailing axis; 1-D scale and bias of one length;
    /// no fp16 fusion on the CPU. From opset 17 ORT runs the same fusion at level 1 already
    /// (the nodes have no provider yet); the result is the same node on the same provider.
    pub(super) fn layer_norm(&mut self, session: &mut Session) {
        for ni in self.pass_order(session) {
            let Some((fused, node)) = self.match_layer_norm(session, ni) else {
                continue;
            };
            self.fuse(session, &fused, ni, node);
        }
    }

    pub(super) fn match_layer_norm(
        &mut self,
        session: &Session,
        ni: usize,
    ) -> Option<(Vec<usize>, SNode)> {
        let g = &session.graphs[self.gi];
        let rm = &g.nodes[ni];
        if rm.removed
            || !is_op(rm, "ReduceMean", &[1, 11, 13, 18])
            || !self.compatible.contains(rm.ep)
            || !matches!(self.out_edges(session, rm), 1 | 2)
            || self.produces_graph_output(rm)
            || !self.norm_types_ok(session, rm, Some(1))
        {
            return None;
        }
        let ep = rm.ep;
        let same = |n: &SNode| n.ep == ep;
        let mut fused = vec![ni];
        // Every child is a Sub (one, or two in old PyTorch exports).
        let subs = self.children(session, rm);
        if subs.is_empty() || subs.len() > 2 || subs.iter().any(|&c| g.nodes[c].op != "Sub") {
            return None;
        }
        let sub = &g.nodes[subs[0]];
        if !is_op(sub, "Sub", &[7, 13, 14]) || !same(sub) || !self.norm_types_ok(session, sub, None)
        {
            return None;
        }
        fused.push(subs[0]);
        let x = rm.inputs.first()?;
        let mean = rm.outputs.first()?;
        let other_input = |n: &SNode| n.inputs.iter().find(|i| *i != mean).cloned();
        if other_input(sub).as_ref() != Some(x) {
            return None;
        }
        let dup = subs.get(1).map(|&d| (d, &g.nodes[d]));
        if let Some((_, d)) = dup
            && other_input(d).as_ref() != Some(x)
        {
            return None;
        }
        // A Cast feeding the ReduceMean, read only by the pattern.
        let mut leading_cast = None;
        if let Some(c) = self.producer_of(session, *x) {
            let cn = &g.nodes[c];
            if is_op(cn, "Cast", CAST_SINCE)
                && same(cn)
                && self.edges_are(session, cn, subs.len() + 1)
            {
                leading_cast = Some(c);
                fused.insert(0, c);
            }
        }
        // A Cast after the Sub (mixed precision).
        let mut cast1 = None;
        if dup.is_none() && self.out_edges(session, sub) == 1 {
            let c = self.children(session, sub).first().copied()?;
            let cn = &g.nodes[c];
            if is_op(cn, "Cast", CAST_SINCE)
                && same(cn)
                && self.edges_are(session, cn, 2)
                && self.norm_types_ok(session, cn, None)
            {
                cast1 = Some(c);
                fused.push(c);
            }
        }
        let sub_edges = if dup.is_none() && cast1.is_none() {
            2
        } else {
            1
        };
        if !self.edges_are(session, sub, sub_edges) {
            return None;
        }
        let from = cast1.map_or(sub, |c| &g.nodes[c]);
        let mut div = self.first_child(session, from, "Div");
        if let Some((d, dn)) = dup {
            if !is_op(dn, "Sub", &[7, 13, 14])
                || !same(dn)
                || !self.edges_are(session, sub, 1)
                || !self.norm_types_ok(session, dn, None)
            {
                return None;
            }
            fused.push(d);
            if div.is_none() {
                div = self.first_child(session, dn, "Div");
            }
        }
        let div = div?;
        let dn = &g.nodes[div];
        if !self.norm_link(session, dn, "Div", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(div);
        let sqrt = self.first_parent(session, dn, "Sqrt")?;
        let sq = &g.nodes[sqrt];
        if !self.norm_link(session, sq, "Sqrt", &[6, 13], ep) {
            return None;
        }
        fused.push(sqrt);
        let add2 = *self.parents(session, sq).first()?;
        let an = &g.nodes[add2];
        if !self.norm_link(session, an, "Add", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(add2);
        let rm2 = self.first_parent(session, an, "ReduceMean")?;
        let rm2n = &g.nodes[rm2];
        if !is_op(rm2n, "ReduceMean", &[1, 11, 13, 18])
            || !same(rm2n)
            || !self.edges_are(session, rm2n, 1)
            || !self.norm_types_ok(session, rm2n, Some(1))
        {
            return None;
        }
        fused.push(rm2);
        let pow = *self.parents(session, rm2n).first()?;
        let pn = &g.nodes[pow];
        if !self.norm_link(session, pn, "Pow", &[7, 12, 13, 15], ep) {
            return None;
        }
        fused.push(pow);
        match self.first_parent(session, pn, "Cast") {
            Some(c) if Some(c) != cast1 => {
                let cn = &g.nodes[c];
                if !is_op(cn, "Cast", CAST_SINCE) || !same(cn) || !self.edges_are(session, cn, 1) {
                    return None;
                }
                fused.push(c);
            }
            Some(_) => {}
            None => {
                let s2 = self.first_parent(session, pn, "Sub")?;
                if s2 != subs[0] && Some(s2) != dup.map(|d| d.0) {
                    return None;
                }
            }
        }
        // div → mul, or div → Cast → mul
        let mut next = *self.children(session, dn).first()?;
        let nn = &g.nodes[next];
        if is_op(nn, "Cast", CAST_SINCE) && self.edges_are(session, nn, 1) {
            fused.push(next);
            next = *self.children(session, nn).first()?;
        }
        let mul = &g.nodes[next];
        if !self.norm_link(session, mul, "Mul", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(next);
        let last = *self.children(session, mul).first()?;
        let ln = &g.nodes[last];
        if !is_op(ln, "Add", &[7, 13, 14]) || !same(ln) || !self.norm_types_ok(session, ln, None) {
            return None;
        }
        fused.push(last);
        let axes = self.norm_axes(session, rm)?;
        if self.norm_axes(session, rm2n)? != axes || axes.len() != 1 {
            return None;
        }
        let pick = |n: &SNode| {
            n.inputs
                .iter()
                .rfind(|i| self.rank_of(session, **i) == Some(1))
                .cloned()
        };
        let scale = pick(mul)?;
        let bias = pick(ln)?;
        let dim0 = |v: Sym| session.shape_of(self.gi, v).and_then(|s| s[0]).unwrap_or(0);
        if dim0(scale) != dim0(bias) {
            return None;
        }
        let x_in = match leading_cast {
            Some(c) => *g.nodes[c].inputs.first()?,
            None => *x,
        };
        if ep == Some(Ep::Cpu) && self.is_fp16(session, x_in) {
            return None;
        }
        let mut node = fused_node(ln, "LayerNormalization");
        node.domain = Sym::AI_ONNX;
        node.since = Some(if self.opset >= 17 { 17 } else { 1 });
        node.inputs = vec![x_in, scale, bias];
        node.outputs = vec![*ln.outputs.first()?];
        node.attrs = thin_vec::thin_vec![int_attr("axis", axes[0]), float_attr("epsilon")];
        let base = format!("{}/LayerNormFusion/", mul.name);
        node.name = self.node_name(session, &base);
        Some((fused, node))
    }

    /// ORT's `CheckAxesOnReduceMean`: the axes, made negative, are consecutive and end at -1.
    pub(super) fn norm_axes(&self, session: &Session, rm: &SNode) -> Option<Vec<i64>> {
        let mut axes = self.reduce_axes(session, rm);
        if axes.is_empty() {
            return None;
        }
        axes.sort_unstable();
        if axes.last().is_some_and(|&a| a > 0) {
            let rank = self.rank_of(session, *rm.inputs.first()?)? as i64;
            for a in &mut axes {
                if *a >= 0 {
                    *a -= rank;
                }
            }
            axes.sort_unstable();
        }
        let consecutive = axes.windows(2).all(|w| w[1] == w[0] + 1);
        (consecutive && axes.last() == Some(&-1)).then_some(axes)
    }

    /// RMSNorm: `X → Pow → ReduceMean → Add(eps) → Sqrt → Div(X, ·) → Mul(scale)`, with an
    /// fp32 Cast before the Pow and an fp16 Cast before the Mul on CUDA →
    /// `SimplifiedLayerNormalization`, named `<Mul>/SimplifiedLayerNormFusion/`.
    ///
    /// Follows `SimplifiedLayerNormFusion::ApplyImpl` in
    /// `onnxruntime/core/optimizer/layer_norm_fusion.cc` (1.23–1.31): compatible providers CPU
    /// and CUDA; the Casts only on CUDA (a Cast between Div and Mul stops the fusion on the
    /// CPU); single trailing reduce axis; a 1-D scale; no fp16 fusion on the CPU. The
    /// `Reciprocal → Mul` form is not fused.
    pub(super) fn simplified_layer_norm(&mut self, session: &mut Session) {
        for ni in self.pass_order(session) {
            let Some((fused, node)) = self.match_simplified(session, ni) else {
                continue;
            };
            self.fuse(session, &fused, ni, node);
        }
    }

    pub(super) fn match_simplified(
        &mut self,
        session: &Session,
        ni: usize,
    ) -> Option<(Vec<usize>, SNode)> {
        let g = &session.graphs[self.gi];
        let pn = &g.nodes[ni];
        if pn.removed
            || !is_op(pn, "Pow", &[7, 12, 13, 15])
            || !self.compatible.contains(pn.ep)
            || !self.edges_are(session, pn, 1)
            || !self.norm_types_ok(session, pn, None)
        {
            return None;
        }
        let ep = pn.ep;
        let same = |n: &SNode| n.ep == ep;
        let mut fused = vec![ni];
        let rm = self.first_child(session, pn, "ReduceMean")?;
        let rmn = &g.nodes[rm];
        if !is_op(rmn, "ReduceMean", &[1, 11, 13, 18])
            || !same(rmn)
            || !self.edges_are(session, rmn, 1)
            || !self.norm_types_ok(session, rmn, Some(1))
        {
            return None;
        }
        fused.push(rm);
        let add = self.first_child(session, rmn, "Add")?;
        let an = &g.nodes[add];
        if !self.norm_link(session, an, "Add", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(add);
        let sqrt = self.first_child(session, an, "Sqrt")?;
        let sq = &g.nodes[sqrt];
        if !self.norm_link(session, sq, "Sqrt", &[6, 13], ep) {
            return None;
        }
        fused.push(sqrt);
        let div = self.first_child(session, sq, "Div")?;
        let dn = &g.nodes[div];
        if !self.norm_link(session, dn, "Div", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(div);
        let x = pn.inputs.first()?;
        if dn.inputs.first() != Some(x) {
            return None;
        }
        // ORT's `is_gpu_ep`: a leading and a trailing Cast fuse on these providers only.
        let gpu = crate::providers::named(ep, &[ort::CUDA, ort::ROCM]);
        let mut leading_cast = None;
        if gpu && let Some(c) = self.producer_of(session, *x) {
            let cn = &g.nodes[c];
            if is_op(cn, "Cast", CAST_SINCE) && same(cn) && self.edges_are(session, cn, 2) {
                leading_cast = Some(c);
                fused.insert(0, c);
            }
        }
        let mut next = *self.children(session, dn).first()?;
        let nn = &g.nodes[next];
        if is_op(nn, "Cast", CAST_SINCE) && self.edges_are(session, nn, 1) {
            if !gpu {
                return None;
            }
            fused.push(next);
            next = *self.children(session, nn).first()?;
        }
        let mul = &g.nodes[next];
        if !is_op(mul, "Mul", &[7, 13, 14]) || !same(mul) || !self.norm_types_ok(session, mul, None)
        {
            return None;
        }
        fused.push(next);
        let axes = self.norm_axes(session, rmn)?;
        if axes.len() != 1 {
            return None;
        }
        let scale = *mul
            .inputs
            .iter()
            .rfind(|i| self.rank_of(session, **i) == Some(1))?;
        let x_in = match leading_cast {
            Some(c) => *g.nodes[c].inputs.first()?,
            None => *x,
        };
        if ep == Some(Ep::Cpu) && self.is_fp16(session, x_in) {
            return None;
        }
        let mut node = fused_node(mul, "SimplifiedLayerNormalization");
        node.domain = Sym::AI_ONNX;
        node.since = Some(1);
        node.inputs = vec![x_in, scale];
        node.outputs = vec![*mul.outputs.first()?];
        node.attrs = thin_vec::thin_vec![int_attr("axis", axes[0]), float_attr("epsilon")];
        let base = format!("{}/SimplifiedLayerNormFusion/", mul.name);
        node.name = self.node_name(session, &base);
        Some((fused, node))
    }
}
