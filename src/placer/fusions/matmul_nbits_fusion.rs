//! ORT's `MatMulNBitsFusion` (`core/optimizer/matmul_nbits_fusion.cc`): its one rule,
//! `FuseBias`, a selector/action pair that merges `Add(MatMulNBits(..), bias[N])` into the
//! `MatMulNBits` (input 5, `bias`), which keeps its name and takes the `Add`'s output.
//!
//! Compatible providers: the CPU in every simulated release; CUDA too from ORT 1.28 (measured
//! with the stubbed-GPU oracle on `tests/fixtures/realworld/unseen2/nbits128s.dyn.qwen2.kv.onnx`:
//! 1.25.1-1.27.0 keep the CUDA `Add`s, 1.28.0-1.31.1 fuse them; newer sources narrow CUDA to a
//! router GEMV shape, a release this table does not hold yet).

use super::*;

impl Fuser {
    pub(super) fn matmul_nbits_bias(&mut self, session: &mut Session) {
        let g = self.gi;
        for ni in self.pass_order_of(session, &["MatMulNBits"]) {
            let n = &session.graphs[g].nodes[ni];
            if n.removed
                || !self.compatible.contains(n.ep)
                || n.domain != MS
                || n.op != "MatMulNBits"
                || n.inputs.get(5).is_some_and(|b| !b.is_empty())
                || self.produces_graph_output(n)
            {
                continue;
            }
            let Some(c) = self.single_consumer(session, n) else {
                continue;
            };
            let cn = &session.graphs[g].nodes[c];
            if cn.domain != Sym::AI_ONNX
                || cn.op != "Add"
                || !matches!(cn.since, Some(7 | 13 | 14))
                || cn.ep != n.ep
                || cn.inputs.len() != 2
            {
                continue;
            }
            let Some(out) = n.outputs.first() else {
                continue;
            };
            let bias_at = usize::from(cn.inputs[0] == *out);
            let bias = &cn.inputs[bias_at];
            let Some(want) = n.attr_i("N") else {
                continue;
            };
            match session.shape_of(g, *bias).map(Vec::as_slice) {
                Some([Some(d)]) if *d == want => {}
                _ => continue,
            }
            let mut node = n.clone();
            node.kernel = None;
            if node.inputs.len() < 6 {
                node.inputs.resize(6, Sym::EMPTY);
            }
            node.inputs[5] = *bias;
            node.outputs = cn.outputs.clone();
            self.fuse(session, &[ni, c], ni, node);
        }
    }
}
