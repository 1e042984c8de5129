//! ORT's `GemmSumFusion` (`core/optimizer/gemm_sum_fusion.cc`), a rewrite rule.

use super::*;

impl Optimizer<'_> {
    /// `GemmSumFusion` (`core/optimizer/gemm_sum_fusion.cc`): a `Gemm` (since 7, 9, 11, 13)
    /// without `C` whose only consumer is a two-input `Sum` (since 6, 8, 13) becomes a Gemm
    /// named `GenerateNodeName(<gemm>/GemmSumFusion/)` with the Sum's other input as `C`, when
    /// that input broadcasts one way to the Gemm's output (rank at most 2, dims 1 or equal).
    pub(super) fn gemm_sum_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Editor,
    ) -> bool {
        let gemm = &session.graphs[gi].nodes[ni];
        if !matches!(gemm.since, Some(7 | 9 | 11 | 13))
            || gemm.inputs.len() != 2
            || gemm.outputs.len() != 1
        {
            return false;
        }
        let out = gemm.outputs[0];
        let Some(sum) = Self::only_edge(session, gi, idx, out) else {
            return false;
        };
        let sn = &session.graphs[gi].nodes[sum];
        if sn.op != "Sum"
            || sn.domain != Sym::AI_ONNX
            || !matches!(sn.since, Some(6 | 8 | 13))
            || sn.inputs.len() != 2
            || sn.outputs.len() != 1
        {
            return false;
        }
        let other = if sn.inputs[0] == out {
            sn.inputs[1]
        } else {
            sn.inputs[0]
        };
        let (Some(c), Some(y)) = (session.shape_of(gi, other), session.shape_of(gi, out)) else {
            return false;
        };
        let ok = c.len() <= 2
            && y.len() == 2
            && c.iter()
                .rev()
                .zip(y.iter().rev())
                .all(|(a, b)| *a == Some(1) || (a.is_some() && a == b));
        if !ok {
            return false;
        }
        let sum_out = sn.outputs[0];
        let gemm = session.graphs[gi].nodes[ni].clone();
        let name = idx.generate_node_name(session, &format!("{}/GemmSumFusion/", gemm.name));
        let ta = gemm.attr_i("transA").unwrap_or(0) != 0;
        let tb = gemm.attr_i("transB").unwrap_or(0) != 0;
        let mut inputs = gemm.inputs.clone();
        inputs.push(other);
        let node = Self::fused_gemm(&gemm, name, inputs, sum_out, ta, tb);
        idx.remove(session, sum);
        idx.remove(session, ni);
        self.append_nodes(session, gi, idx, vec![node]);
        true
    }
}
