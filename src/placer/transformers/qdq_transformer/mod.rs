//! ORT's QDQ transformers (`onnxruntime/core/optimizer/qdq_transformer/`, and
//! `double_qdq_pairs_remover.cc` next to it), one file each, and what they share: matching
//! `QuantizeLinear`/`DequantizeLinear` nodes (`qdq_util.cc`), their constant scalar scales and
//! zero points, and the walk. Each edits a graph through its `session::edit::Editor`, which
//! counts edges as ORT does (one per consumer input slot, one per subgraph that reads a value).
//!
//! The session script runs them where ORT does: `DoubleQDQPairsRemover` and
//! `QDQPropagationTransformer` among the level-1 transformers (`optimize::run`, in the
//! registry's order), `QDQS8ToU8Transformer` and `QDQSelectorActionTransformer` first of level 2
//! (the session script, after partitioning), `QDQFinalCleanupTransformer` last of level 2.

pub mod double_qdq_pairs_remover;
pub mod qdq_final_cleanup;
pub mod qdq_propagation;
pub mod qdq_s8_to_u8;
pub mod relu_quantizelinear;
pub mod selectors_actions;
pub mod where_dummy_dq;

use crate::infer::eval::Tensor;
use crate::session::edit::Editor;
use crate::session::{SNode, Session};
use crate::sym::Sym;

/// Subgraph nesting the QDQ transformers follow; deeper graphs (only a hostile model has them)
/// are left as they are.
pub(crate) const MAX_DEPTH: usize = 64;

/// What a transformer does at one node of the [`walk`]: `(session, graph, editor, node)`; the
/// graph's editor is built on first use (`get_or_insert_with`) and every edit goes through it,
/// which keeps it current; whether it changed the graph.
pub(crate) type Visit<'a> = dyn FnMut(&mut Session, usize, &mut Option<Editor>, usize) -> bool + 'a;

/// Opens the graph's editor ([`Editor::open`]) into `edges` where the walk has none yet: at the
/// first node a transformer looks further at.
pub(crate) fn open_editor(session: &mut Session, gi: usize, edges: &mut Option<Editor>) {
    if edges.is_none() {
        *edges = Some(Editor::open(session, gi));
    }
}

/// The walk of ORT's graph transformers (`ApplyImpl`) these passes share: graph `gi` in ORT's
/// topological order, each node's subgraphs first (at most [`MAX_DEPTH`] deep), then the node.
/// The graph's editor is dropped when a subgraph changed (a rename there may reach this graph's
/// implicit inputs). Whether anything changed.
pub(crate) fn walk(session: &mut Session, gi: usize, depth: usize, visit: &mut Visit) -> bool {
    if depth > MAX_DEPTH || gi >= session.graphs.len() {
        return false;
    }
    let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
    let mut changed = false;
    let mut edges: Option<Editor> = None;
    for ni in order {
        let subs: Vec<usize> = session.graphs[gi].nodes[ni]
            .subgraphs
            .iter()
            .map(|(_, s)| *s)
            .collect();
        for s in subs {
            if walk(session, s, depth + 1, visit) {
                changed = true;
                edges = None;
            }
        }
        changed |= visit(session, gi, &mut edges, ni);
    }
    if let Some(e) = edges {
        e.keep(session);
    }
    changed
}

/// `QDQ::MatchQNode`: a `QuantizeLinear` of ai.onnx or com.microsoft.
pub(crate) fn is_q(n: &SNode) -> bool {
    !n.removed
        && n.op == Sym::QUANTIZE_LINEAR
        && (n.domain == Sym::AI_ONNX || n.domain == Sym::COM_MICROSOFT)
}

/// `QDQ::MatchDQNode`: a `DequantizeLinear` of ai.onnx or com.microsoft.
pub(crate) fn is_dq(n: &SNode) -> bool {
    !n.removed
        && n.op == Sym::DEQUANTIZE_LINEAR
        && (n.domain == Sym::AI_ONNX || n.domain == Sym::COM_MICROSOFT)
}

/// The constant initializer `name` (seen from graph `gi`), decoded; `None` when it is not a
/// constant initializer or cannot be decoded.
fn constant(session: &Session, gi: usize, name: Sym) -> Option<Tensor> {
    if name.is_empty() {
        return None;
    }
    let init = session.initializer(gi, name).filter(|i| !i.overridable)?;
    Tensor::from_proto(&init.tensor)
}

/// A scalar: rank 0, or one dimension of size 1 (`optimizer_utils::IsScalar`).
fn is_scalar(t: &Tensor) -> bool {
    t.dims.is_empty() || (t.dims.len() == 1 && t.dims[0] == 1)
}

/// `QDQ::QOrDQNodeHasConstantScalarScaleAndZeroPoint`: `Some(has_zero_point)` when the scale
/// (and the zero point, if given) are constant scalar initializers. ORT looks at the shapes
/// only (`optimizer_utils::IsScalar` of the NodeArg), never at the values, so a zero point of
/// an element type this crate does not decode (float8: `QuantType.QFLOAT8E4M3FN` QDQ, whose Q/DQ
/// pairs ORT propagates across Reshape/Transpose) counts too (`tests/it/qdq_transformers.rs`).
pub(crate) fn constant_scalar_scale_and_zp(
    session: &Session,
    gi: usize,
    n: &SNode,
) -> Option<bool> {
    let scalar = |name: Sym| {
        !name.is_empty()
            && session
                .initializer(gi, name)
                .is_some_and(|i| !i.overridable && (i.dims.is_empty() || i.dims == [1]))
    };
    if !scalar(*n.inputs.get(1)?) {
        return None;
    }
    match n.inputs.get(2).filter(|z| !z.is_empty()) {
        None => Some(false),
        Some(&z) => scalar(z).then_some(true),
    }
}

/// `QDQ::IsQDQPairSupported`: a `QuantizeLinear` and a `DequantizeLinear` with explicit,
/// constant, scalar scales and zero points of the same types and values.
pub(crate) fn is_qdq_pair_supported(session: &Session, gi: usize, q: &SNode, dq: &SNode) -> bool {
    if q.inputs.len() < 3 || dq.inputs.len() < 3 {
        return false;
    }
    let get = |n: &SNode, i: usize| constant(session, gi, n.inputs[i]).filter(is_scalar);
    let (Some(qs), Some(qz), Some(ds), Some(dz)) = (get(q, 1), get(q, 2), get(dq, 1), get(dq, 2))
    else {
        return false;
    };
    qs.elem == ds.elem
        && qz.elem == dz.elem
        && qs.as_f64() == ds.as_f64()
        && qz.as_i64() == dz.as_i64()
}

/// The element type of the zero point of `n` (its input 2), when it is an initializer.
pub(crate) fn zero_point_elem(session: &Session, gi: usize, n: &SNode) -> Option<i32> {
    let z = n.inputs.get(2).filter(|z| !z.is_empty())?;
    session.initializer(gi, *z).map(|i| i.elem)
}
