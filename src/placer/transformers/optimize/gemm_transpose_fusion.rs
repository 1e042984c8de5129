//! ORT's `GemmTransposeFusion` (`core/optimizer/gemm_transpose_fusion.cc`), a rewrite rule,
//! and the fused-Gemm builder `GemmSumFusion` shares.

use super::*;

impl Optimizer<'_> {
    /// A copy of Gemm `like` named `name`, with `transA`/`transB` set as given.
    pub(super) fn fused_gemm(
        like: &SNode,
        name: Sym,
        inputs: Vec<Sym>,
        output: Sym,
        ta: bool,
        tb: bool,
    ) -> SNode {
        let mut attrs: Vec<_> = like
            .attrs
            .iter()
            .filter(|a| a.name() != "transA" && a.name() != "transB")
            .cloned()
            .collect();
        for (n, v) in [("transA", ta), ("transB", tb)] {
            attrs.push(crate::model::proto::AttributeProto {
                name: Some(n.into()),
                i: Some(i64::from(v)),
                r#type: Some(crate::model::proto::attribute_proto::AttributeType::Int as i32),
                ..Default::default()
            });
        }
        SNode {
            name,
            op: "Gemm".into(),
            domain: Sym::AI_ONNX,
            since: like.since,
            inputs,
            outputs: vec![output],
            attrs: attrs.into(),
            subgraphs: thin_vec::ThinVec::new(),
            implicit_inputs: thin_vec::ThinVec::new(),
            ep: None,
            kernel: None,
            origin: like.origin,
            removed: false,
        }
    }

    /// A `Transpose` (since 1, 13) swapping the two axes of a rank-2 tensor.
    pub(super) fn is_transpose_2d(session: &Session, gi: usize, n: &SNode) -> bool {
        if n.op != Sym::TRANSPOSE || n.domain != Sym::AI_ONNX || !matches!(n.since, Some(1 | 13)) {
            return false;
        }
        match n.attr_ints("perm") {
            Some(p) => p == [1, 0],
            None => n
                .inputs
                .first()
                .and_then(|i| session.shape_of(gi, *i))
                .is_some_and(|s| s.len() == 2),
        }
    }

    /// `GemmTransposeFusion` (`core/optimizer/gemm_transpose_fusion.cc`): a `Gemm` (since 1, 6,
    /// 7, 9, 11, 13) reading `A` or `B` through a 2-D `Transpose` that has no other consumer,
    /// or (without `C`) whose only consumer is a 2-D `Transpose`, becomes one Gemm named
    /// `GenerateNodeName(<gemm>/GemmTransposeFusion/)` with `transA`/`transB` flipped (for the
    /// output Transpose: `Bᵀ·Aᵀ`, the inputs swapped); the Transposes are removed.
    pub(super) fn gemm_transpose_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let gemm = &session.graphs[gi].nodes[ni];
        if !matches!(gemm.since, Some(1 | 6 | 7 | 9 | 11 | 13))
            || gemm.inputs.len() < 2
            || gemm.outputs.len() != 1
        {
            return false;
        }
        let mut inputs = gemm.inputs.clone();
        let mut trans = [
            gemm.attr_i("transA").unwrap_or(0) != 0,
            gemm.attr_i("transB").unwrap_or(0) != 0,
        ];
        let mut gone: Vec<usize> = Vec::new();
        for k in 0..2 {
            let Some(p) = idx.producer(session, inputs[k]) else {
                continue;
            };
            let pn = &session.graphs[gi].nodes[p];
            if !Self::is_transpose_2d(session, gi, pn)
                || Self::only_edge(session, gi, idx, inputs[k]) != Some(ni)
                || gone.contains(&p)
            {
                continue;
            }
            let Some(src) = pn.inputs.first().cloned() else {
                continue;
            };
            inputs[k] = src;
            trans[k] = !trans[k];
            gone.push(p);
        }
        let has_c = inputs.get(2).is_some_and(|c| !c.is_empty());
        let out = gemm.outputs[0];
        let mut output = out;
        if !has_c && let Some(t) = Self::only_edge(session, gi, idx, out) {
            let tn = &session.graphs[gi].nodes[t];
            if Self::is_transpose_2d(session, gi, tn) && tn.outputs.len() == 1 {
                output = tn.outputs[0];
                inputs.swap(0, 1);
                trans = [!trans[1], !trans[0]];
                gone.push(t);
            }
        }
        if gone.is_empty() {
            return false;
        }
        let gemm = session.graphs[gi].nodes[ni].clone();
        let name = idx.generate_node_name(session, &format!("{}/GemmTransposeFusion/", gemm.name));
        let node = Self::fused_gemm(&gemm, name, inputs, output, trans[0], trans[1]);
        for k in gone {
            idx.remove(session, k);
        }
        idx.remove(session, ni);
        self.append_nodes(session, gi, idx, vec![node]);
        true
    }
}
