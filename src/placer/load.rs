//! Load-time checks that need shapes: ONNX shape inference runs inside ORT's `Graph::Resolve`
//! at every optimisation level, and some of its errors fail the load (`Load model from ...
//! failed: Node (...) Op (...) [ShapeInferenceError] ...`).
//!
//! Pure: no I/O, no printing.

use crate::session::Session;
use crate::sym::Sym;

/// ONNX's Concat shape inference (`onnx/defs/tensor/defs.cc`): when every input's rank is known,
/// all must equal input 0's. The first such Concat (graph by graph, in Kahn order, as `Resolve`
/// visits them) with its load error; measured with onnxruntime 1.31.1 (CPU):
/// `Node (cat) Op (Concat) [ShapeInferenceError] All inputs to Concat must have same rank.
/// Input 1 has rank 1 != 2`.
pub fn concat_rank_conflict(session: &Session) -> Option<(crate::session::NodeRef, String)> {
    for gi in 0..session.graphs.len() {
        // The order only decides which conflict comes first: built when there is one.
        if !session.graphs[gi].any_live_node(|n| ranks_conflict(session, gi, n).is_some()) {
            continue;
        }
        for ni in crate::infer::topological_order(session, gi) {
            if let Some(found) = conflict(session, gi, ni) {
                return Some(found);
            }
        }
    }
    None
}

/// Node `ni`'s Concat rank conflict, if it is a Concat with one.
fn conflict(session: &Session, gi: usize, ni: usize) -> Option<(crate::session::NodeRef, String)> {
    let n = session.graphs[gi].nodes.get(ni)?;
    if n.removed {
        return None;
    }
    let (i, r, rank) = ranks_conflict(session, gi, n)?;
    Some((
        crate::session::NodeRef::new(gi, ni),
        format!(
            "load: Node ({}) Op (Concat) [ShapeInferenceError] All inputs to Concat must have \
             same rank. Input {i} has rank {r} != {rank}",
            n.name
        ),
    ))
}

/// Node `n`'s Concat rank conflict, if it is a Concat with one: the input, its rank and the
/// first input's.
fn ranks_conflict(
    session: &Session,
    gi: usize,
    n: &crate::session::SNode,
) -> Option<(usize, usize, usize)> {
    if n.op != "Concat" || n.domain != Sym::AI_ONNX {
        return None;
    }
    let ranks: Vec<usize> = n
        .inputs
        .iter()
        .map(|&name| {
            (!name.is_empty())
                .then(|| session.shape_of(gi, name).map(Vec::len))
                .flatten()
        })
        .collect::<Option<_>>()?;
    let &rank = ranks.first()?;
    let (i, r) = ranks.iter().enumerate().find(|(_, r)| **r != rank)?;
    Some((i, *r, rank))
}
