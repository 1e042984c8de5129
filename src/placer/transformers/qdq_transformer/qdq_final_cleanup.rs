//! ORT's `QDQFinalCleanupTransformer` (`qdq_transformer/qdq_final_cleanup.cc`), the last
//! level-2 transformer, on nodes of every provider.
//!
//! A `DequantizeLinear` whose one output edge (no graph output) goes to a `QuantizeLinear` with
//! the same explicit constant scalar scale and zero point is removed with it; the `Q`'s
//! consumers read the `DQ`'s input. When the `Q` produces a graph output (and has no
//! consumers), the `DQ`'s source node produces it instead, or, for a graph input or
//! initializer, an `Identity` named `QDQFinalCleanupTransformer` (name generator) on the `Q`'s
//! provider does. The `Q -> DQ` clean-up is off unless the session option
//! `session.enable_quant_qdq_cleanup` is `1` (default `0`, in every bundled release), so it is
//! not simulated. Topological order of the graph when the pass began; subgraphs first.

use super::{is_dq, is_q, is_qdq_pair_supported, walk};
use crate::placer::OptLevel;
use crate::session::EdgeEnd;
use crate::session::edit::Editor;
use crate::session::{SNode, Session};
use crate::sym::Sym;

/// Applies the transformer to every graph at level `extended` and above; whether it removed
/// anything.
pub fn run(session: &mut Session, level: OptLevel) -> bool {
    if level < OptLevel::Extended || session.graphs.is_empty() {
        return false;
    }
    walk(session, 0, 0, &mut visit)
}

fn visit(session: &mut Session, gi: usize, edges: &mut Option<Editor>, ni: usize) -> bool {
    if !is_dq(&session.graphs[gi].nodes[ni]) {
        return false;
    }
    let e = edges.get_or_insert_with(|| Editor::open(session, gi));
    clean_up(session, gi, e, ni)
}

/// `CleanUpNodeSequence(DQ_Q, ...)` from DQ node `first`.
fn clean_up(session: &mut Session, gi: usize, e: &mut Editor, first: usize) -> bool {
    let g = &session.graphs[gi];
    let dq = &g.nodes[first];
    if e.produces_graph_output(dq) || e.node_output_edges(session, dq, 1) != 1 {
        return false;
    }
    let Some(out) = dq.outputs.first() else {
        return false;
    };
    let Some(&EdgeEnd { node: second, .. }) = e.consumers(session, *out).first() else {
        return false;
    };
    let q = &g.nodes[second];
    if !is_q(q) || !is_qdq_pair_supported(session, gi, q, dq) {
        return false;
    }
    let Some(q_out) = q.outputs.first().cloned() else {
        return false;
    };
    let produces_output = e.produces_graph_output(q);
    if produces_output && e.node_output_edges(session, q, 0) > 0 {
        return false;
    }
    // A pair whose DQ is a copy (its input read by another DQ too, as `EnsureUniqueDQForNodeUnit`
    // leaves it) and whose Q is read by two or more nodes is kept. Measured with the CPU wheel
    // 1.31.1 on DQ -> Cast -> {Pow, Q -> {QLinearMul, QLinearAdd}} and on Q -> {DQ, DQ}: kept;
    // with one reader, even through two of its inputs: removed; `qops8.tsd.gemma` at every
    // release. ORT's reason is not known; without the first condition `qdq.tsd.bloom` differs.
    let dq_is_copy = dq.inputs.first().is_some_and(|v| {
        e.consumers(session, *v)
            .iter()
            .any(|&EdgeEnd { node: c, .. }| c != first && g.nodes.get(c).is_some_and(is_dq))
    });
    let readers = e.consumers(session, q_out);
    if dq_is_copy
        && let Some(&EdgeEnd {
            node: first_reader, ..
        }) = readers.first()
        && readers.iter().any(|r| r.node != first_reader)
    {
        return false;
    }
    let Some(src_value) = dq.inputs.first().cloned() else {
        return false;
    };
    let src = e.producer_slot(session, src_value);
    let q_ep = q.ep;
    if !produces_output {
        for end in readers {
            e.set_input(session, end, src_value);
        }
    } else if let Some(s) = src {
        e.set_output(session, s, q_out);
    } else {
        let name = e.generate_node_name(session, "QDQFinalCleanupTransformer");
        e.add(
            session,
            SNode {
                name,
                op: "Identity".into(),
                domain: Sym::AI_ONNX,
                since: None,
                inputs: vec![src_value],
                outputs: vec![q_out],
                attrs: thin_vec::ThinVec::new(),
                subgraphs: thin_vec::ThinVec::new(),
                implicit_inputs: thin_vec::ThinVec::new(),
                ep: q_ep,
                kernel: None,
                origin: None,
                removed: false,
            },
        );
    }
    e.remove(session, first);
    e.remove(session, second);
    true
}
