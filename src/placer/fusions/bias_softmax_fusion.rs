//! ORT's `BiasSoftmaxFusion` (`core/optimizer/bias_softmax_fusion.cc`).

use super::*;

/// The providers ORT's match takes the `Add` on (`IsSupportedProvider`).
const CUDA_ROCM: &[&str] = &[ort::CUDA, ort::ROCM];

/// ORT's `TrySelectInputAndBiasWithAlignment` for softmax axis `k`: the dims from `k` on
/// match on both Add inputs; the mask either is 1 on the dims between the first mismatch and
/// `k` (inner broadcast, equal ranks) or on its leading dims (outer broadcast). Dims without a
/// value are equal when `sym_eq(i, j)` says dim `i` of `a` and dim `j` of `b` carry the same
/// symbol.
pub(super) fn bias_softmax_shapes_ok(
    a: &[Option<i64>],
    b: &[Option<i64>],
    k: usize,
    sym_eq: &dyn Fn(usize, usize) -> bool,
) -> bool {
    let (n1, n2) = (a.len(), b.len());
    let single = n1.max(n2).saturating_sub(k);
    if single > n1 || single > n2 {
        return false;
    }
    let same_at = |i: usize, j: usize| match (a[i], b[j]) {
        (Some(x), Some(y)) => x == y,
        (None, None) => sym_eq(i, j),
        _ => false,
    };
    if (1..=single).any(|i| !same_at(n1 - i, n2 - i)) {
        return false;
    }
    let one = |d: Option<i64>| d == Some(1);
    if n1 == n2 {
        let mut pos = 0;
        while pos < k && same_at(pos, pos) {
            pos += 1;
        }
        let mask = if pos == k || !one(a[pos]) { b } else { a };
        if (pos..k).all(|i| one(mask[i])) {
            return true;
        }
    }
    // Outer broadcast, from the dim before the softmax dims backwards.
    let (mut p1, mut p2) = (n1 as i64 - single as i64 - 1, n2 as i64 - single as i64 - 1);
    while p1 >= 0 && p2 >= 0 && same_at(p1 as usize, p2 as usize) {
        p1 -= 1;
        p2 -= 1;
    }
    let lhs_input = p1 > p2 || (p1 == p2 && (p1 < 0 || !one(a[p1 as usize])));
    let (mask, from) = if lhs_input { (b, p2) } else { (a, p1) };
    (0..=from).all(|i| one(mask[i as usize]))
}

impl Fuser {
    /// `Softmax(Add(input, bias))` on CUDA → `BiasSoftmax` (named `BiasSoftmax`), when the
    /// bias broadcasts over leading dims only and the Softmax reduces the trailing dims.
    pub(super) fn bias_softmax(&mut self, session: &mut Session) {
        for ni in self.pass_order_of(session, &["Add"]) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed
                // ORT's `IsSupportedProvider(node, {kCudaExecutionProvider, ...})`.
                || !crate::providers::named(n.ep, CUDA_ROCM)
                || n.domain != Sym::AI_ONNX
                || n.op != "Add"
                || !matches!(n.since, Some(7 | 13 | 14))
                || n.inputs.len() != 2
            {
                continue;
            }
            let Some(sm) = self.single_consumer(session, n) else {
                continue;
            };
            let s = &session.graphs[self.gi].nodes[sm];
            if s.domain != Sym::AI_ONNX
                || s.op != "Softmax"
                || s.ep != n.ep
                || !matches!(s.since, Some(1 | 11 | 13))
                || self.produces_graph_output(n)
                || !n.inputs.iter().all(|i| {
                    matches!(session.type_of(self.gi, *i), Some(Type::Tensor(t))
                        if [D::Float, D::Float16, D::Double].iter().any(|d| *d as i32 == *t))
                })
            {
                continue;
            }
            let (Some(a), Some(b)) = (
                session.shape_of(self.gi, n.inputs[0]),
                session.shape_of(self.gi, n.inputs[1]),
            ) else {
                continue;
            };
            if a.is_empty() || b.is_empty() {
                continue;
            }
            let rank = a.len().max(b.len()) as i64;
            let since = s.since.unwrap_or(13);
            let mut axis = s.attr_i("axis").unwrap_or(if since >= 13 { -1 } else { 1 });
            if axis < 0 {
                axis += rank;
            }
            // Softmax-13 normalises one axis only; the fused kernel covers the last one.
            if axis < 0 || axis >= rank || (since >= 13 && axis != rank - 1) {
                continue;
            }
            // Dims without a value compare equal when ONNX inference gives both the same
            // `dim_param`, as ORT compares them.
            let (va, vb) = (n.inputs[0], n.inputs[1]);
            let sym_eq = |i: usize, j: usize| {
                matches!(
                    (self.dim_symbol(session, va, i, 0), self.dim_symbol(session, vb, j, 0)),
                    (Some(x), Some(y)) if x == y
                )
            };
            if !bias_softmax_shapes_ok(a, b, axis as usize, &sym_eq) {
                continue;
            }
            let mut node = fused_node(s, "BiasSoftmax");
            node.inputs = n.inputs.clone();
            node.outputs = vec![s.outputs.first().cloned().unwrap_or_default()];
            node.attrs =
                thin_vec::thin_vec![int_attr("axis", axis), int_attr("is_inner_broadcast", 0)];
            node.name = self.node_name(session, "BiasSoftmax");
            self.fuse(session, &[ni, sm], ni, node);
        }
    }
}
