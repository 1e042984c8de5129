//! ORT's QDQ transformers (`onnxruntime/core/optimizer/qdq_transformer/`, and
//! `double_qdq_pairs_remover.cc` next to it), one file each, and what they share: matching
//! `QuantizeLinear`/`DequantizeLinear` nodes (`qdq_util.cc`), their constant scalar scales and
//! zero points, and the edges of a graph as ORT counts them (one per consumer input slot, one
//! per subgraph that reads a value).
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

use crate::sym::{SymMap as FxHashMap, SymSet as FxHashSet};

use crate::infer::eval::Tensor;
use crate::session::{EdgeEnd, SNode, Session};
use crate::sym::Sym;

/// Subgraph nesting the QDQ transformers follow; deeper graphs (only a hostile model has them)
/// are left as they are.
pub(crate) const MAX_DEPTH: usize = 64;

/// What a transformer does at one node of the [`walk`]: `(session, graph, edges, node)`; the
/// edges are built on first use (`get_or_insert_with`) and kept, updated or dropped by the visit;
/// whether it changed the graph.
pub(crate) type Visit<'a> = dyn FnMut(&mut Session, usize, &mut Option<Edges>, usize) -> bool + 'a;

/// The walk of ORT's graph transformers (`ApplyImpl`) these passes share: graph `gi` in ORT's
/// topological order, each node's subgraphs first (at most [`MAX_DEPTH`] deep), then the node.
/// The graph's edges are dropped when a subgraph changed. Whether anything changed.
pub(crate) fn walk(session: &mut Session, gi: usize, depth: usize, visit: &mut Visit) -> bool {
    if depth > MAX_DEPTH || gi >= session.graphs.len() {
        return false;
    }
    let order = crate::session::order::ort_topological_order(session, gi);
    let mut changed = false;
    let mut edges: Option<Edges> = None;
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
/// pairs ORT propagates across Reshape/Transpose) counts too (`tests/it/unseen3.rs`).
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

/// One graph's edges as ORT's graph holds them: the producer of each value, and per value the
/// consumers' (node, input slot) in ORT's edge order (consumer index, then slot), plus the
/// nodes whose subgraphs read it.
pub(crate) struct Edges {
    pub producer: FxHashMap<Sym, EdgeEnd>,
    pub consumers: FxHashMap<Sym, Vec<EdgeEnd>>,
    pub implicit: FxHashMap<Sym, Vec<usize>>,
    pub outputs: FxHashSet<Sym>,
}

impl Edges {
    pub fn build(session: &Session, gi: usize) -> Edges {
        let g = &session.graphs[gi];
        let mut e = Edges {
            producer: FxHashMap::default(),
            consumers: FxHashMap::default(),
            implicit: FxHashMap::default(),
            outputs: g.outputs.iter().copied().collect(),
        };
        for (ni, n) in g.live_nodes() {
            for (slot, o) in n.existing_outputs() {
                e.producer.insert(o, EdgeEnd::new(ni, slot));
            }
            for (slot, i) in n.existing_inputs() {
                e.consumers
                    .entry(i)
                    .or_default()
                    .push(EdgeEnd::new(ni, slot));
            }
            for &i in &n.implicit_inputs {
                e.implicit.entry(i).or_default().push(ni);
            }
        }
        e
    }

    /// Forgets node `ni` (as it is now): before a pass edits or removes it.
    pub fn remove_node(&mut self, ni: usize, n: &SNode) {
        for (_, o) in n.existing_outputs() {
            if self.producer.get(&o).is_some_and(|p| p.node == ni) {
                self.producer.remove(&o);
            }
        }
        for (slot, i) in n.existing_inputs() {
            if let Some(c) = self.consumers.get_mut(&i) {
                c.retain(|&e| e != EdgeEnd::new(ni, slot));
            }
        }
        for i in &n.implicit_inputs {
            if let Some(v) = self.implicit.get_mut(i) {
                v.retain(|&k| k != ni);
            }
        }
    }

    /// Records live node `ni` (as it is now), keeping each consumer list in ORT's edge order:
    /// after a pass edited or added it.
    pub fn add_node(&mut self, ni: usize, n: &SNode) {
        if n.removed {
            return;
        }
        for (slot, o) in n.existing_outputs() {
            self.producer.insert(o, EdgeEnd::new(ni, slot));
        }
        for (slot, i) in n.existing_inputs() {
            let end = EdgeEnd::new(ni, slot);
            let c = self.consumers.entry(i).or_default();
            let at = c.partition_point(|&e| e < end);
            c.insert(at, end);
        }
        for &i in &n.implicit_inputs {
            let v = self.implicit.entry(i).or_default();
            let at = v.partition_point(|&k| k < ni);
            v.insert(at, ni);
        }
    }

    /// ORT's output edge count of value `v` (explicit input slots and subgraph reads), only
    /// from nodes: a graph input or initializer has none.
    pub fn edge_count(&self, v: Sym) -> usize {
        self.consumers.get(&v).map_or(0, Vec::len) + self.implicit.get(&v).map_or(0, Vec::len)
    }

    /// A node's output edge count over all its outputs (`Node::GetOutputEdgesCount`).
    pub fn node_output_edges(&self, n: &SNode) -> usize {
        n.existing_outputs().map(|(_, o)| self.edge_count(o)).sum()
    }

    /// Whether a node produces a graph output (`Graph::NodeProducesGraphOutput`).
    pub fn produces_graph_output(&self, n: &SNode) -> bool {
        n.existing_outputs().any(|(_, o)| self.outputs.contains(&o))
    }
}

#[cfg(test)]
mod tests {
    use super::Edges;

    fn sorted(e: &Edges) -> Vec<String> {
        let mut v: Vec<String> = e
            .producer
            .iter()
            .map(|(k, p)| format!("p {k} {p:?}"))
            .chain(
                e.consumers
                    .iter()
                    .filter(|(_, c)| !c.is_empty())
                    .map(|(k, c)| format!("c {k} {c:?}")),
            )
            .collect();
        v.sort();
        v
    }

    /// Edges kept up to date node by node (in any order, with a node forgotten and recorded
    /// again) are the edges built from scratch, consumer order included.
    #[test]
    fn incremental_edges_match_a_rebuild() {
        let text = r#"
<ir_version: 8, opset_import: ["" : 17]>
g (float[4] A) => (float[4] Y)
{
    [a] b = Relu (A)
    [m] c = Mul (b, b)
    [s] d = Add (c, b)
    [t] Y = Sub (d, c)
}
"#;
        let proto = crate::model::text::parse_model(text).expect("parses");
        let model = crate::model::Model::from_proto(std::path::Path::new("e.onnx"), 0, proto)
            .expect("loads");
        let session = crate::session::Session::from_model(&model);
        let built = Edges::build(&session, 0);
        let g = &session.graphs[0];
        let mut e = Edges {
            producer: Default::default(),
            consumers: Default::default(),
            implicit: Default::default(),
            outputs: g.outputs.iter().copied().collect(),
        };
        for (ni, n) in g.nodes.iter().enumerate().rev() {
            e.add_node(ni, n);
        }
        e.remove_node(1, &g.nodes[1]);
        assert_ne!(sorted(&e), sorted(&built));
        e.add_node(1, &g.nodes[1]);
        assert_eq!(sorted(&e), sorted(&built));
        let b = crate::sym::Sym::new("b");
        let end = crate::session::EdgeEnd::new;
        assert_eq!(e.consumers[&b], vec![end(1, 0), end(1, 1), end(2, 1)]);
    }
}
