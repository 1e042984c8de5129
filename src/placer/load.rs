//! Load-time checks that need shapes: ONNX shape inference runs inside ORT's `Graph::Resolve`
//! at every optimisation level, and some of its errors fail the load (`Load model from ...
//! failed: Node (...) Op (...) [ShapeInferenceError] ...`).
//!
//! Pure: no I/O, no printing.

use crate::session::Session;

/// ONNX's Concat shape inference (`onnx/defs/tensor/defs.cc`): when every input's rank is known,
/// all must equal input 0's. The first such Concat (graph by graph, in Kahn order, as `Resolve`
/// visits them) with its load error; measured with onnxruntime 1.31.1 (CPU):
/// `Node (cat) Op (Concat) [ShapeInferenceError] All inputs to Concat must have same rank.
/// Input 1 has rank 1 != 2`.
pub fn concat_rank_conflict(session: &Session) -> Option<((usize, usize), String)> {
    for gi in 0..session.graphs.len() {
        for ni in crate::infer::topological_order(session, gi) {
            let Some(n) = session.graphs[gi].nodes.get(ni) else {
                continue;
            };
            if n.removed || n.op != "Concat" || n.domain != crate::tables::ONNX_DOMAIN {
                continue;
            }
            let ranks: Option<Vec<usize>> = n
                .inputs
                .iter()
                .map(|name| {
                    (!name.is_empty())
                        .then(|| session.shape_of(gi, name).map(Vec::len))
                        .flatten()
                })
                .collect();
            let Some(ranks) = ranks else { continue };
            let Some(&rank) = ranks.first() else { continue };
            if let Some((i, r)) = ranks.iter().enumerate().find(|(_, r)| **r != rank) {
                return Some((
                    (gi, ni),
                    format!(
                        "load: Node ({}) Op (Concat) [ShapeInferenceError] All inputs to Concat \
                         must have same rank. Input {i} has rank {r} != {rank}",
                        n.name
                    ),
                ));
            }
        }
    }
    None
}
