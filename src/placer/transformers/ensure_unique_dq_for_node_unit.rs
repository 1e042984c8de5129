//! ORT's `EnsureUniqueDQForNodeUnit`
//! (`onnxruntime/core/optimizer/qdq_transformer/ensure_unique_dq_for_node_unit.cc`): every
//! consumer of a shared `DequantizeLinear` gets a DQ of its own, so that each QDQ node unit owns
//! its input DQs. `InferenceSession::TransformGraph` runs it on every model before the level-1
//! transformers, whatever the optimisation level (also at `disable`), in every bundled release
//! (1.23.2 to 1.31.1: measured with the oracle on `tests/fixtures/realworld/qdq*`).
//!
//! In ORT's topological order (subgraphs first), for a DQ (`DequantizeLinear`, ai.onnx or
//! com.microsoft) whose output feeds more than one explicit input of nodes of the same graph, or
//! one and a graph output or a subgraph: the consumers' inputs are taken in the order of ORT's
//! output-edge set (consumer index, then input position); the first keeps the original DQ unless
//! the DQ also produces a graph output or feeds a subgraph; each other one gets a copy named
//! `<dq>/duplicated` (node) reading the same inputs and writing `<output>/duplicated` (value),
//! both from the graph's name generator (`..._token_<k>` once the name is taken).

use crate::placer::ir::{NameGen, SNode, Session};
use crate::session::EdgeEnd;
use crate::session::edit::Editor;
use crate::sym::Sym;

/// Subgraph nesting this pass follows; deeper graphs (only a hostile model has them) are left
/// as they are rather than exhausting the stack.
const MAX_DEPTH: usize = 64;

/// Applies the transformer to graph `gi` and, first, to the subgraphs of its nodes. Returns
/// whether it duplicated anything.
pub fn run(session: &mut Session, gi: usize, depth: usize) -> bool {
    if depth > MAX_DEPTH || gi >= session.graphs.len() {
        return false;
    }
    // Nothing to do in a graph without a DequantizeLinear or a subgraph: skipped before its
    // order is built.
    if !session.graphs[gi].any_live_node(|n| {
        !n.subgraphs.is_empty()
            || (n.op == Sym::DEQUANTIZE_LINEAR
                && matches!(n.domain.as_str(), "ai.onnx" | "com.microsoft"))
    }) {
        return false;
    }
    let mut modified = false;
    let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
    let mut names: Option<NameGen> = None;
    // Built at the first DQ, kept by the copies (a subgraph's own edits leave this graph's
    // nodes as they are).
    let mut editor: Option<Editor> = None;
    for ni in order {
        let subgraphs: Vec<usize> = session.graphs[gi].nodes[ni]
            .subgraphs
            .iter()
            .map(|(_, s)| *s)
            .collect();
        for s in subgraphs {
            modified |= run(session, s, depth + 1);
        }
        let n = &session.graphs[gi].nodes[ni];
        if n.removed
            || n.op != Sym::DEQUANTIZE_LINEAR
            || !matches!(n.domain.as_str(), "ai.onnx" | "com.microsoft")
        {
            continue;
        }
        let Some(out) = n.outputs.first().filter(|o| !o.is_empty()).cloned() else {
            continue;
        };
        let ed = editor.get_or_insert_with(|| Editor::open(session, gi));
        let produces_output = ed.is_output(out);
        // ORT's output edges of DQ output 0: (consumer index, input position), explicit inputs
        // first by position; a subgraph's use is an edge past the explicit inputs.
        let mut edges: Vec<EdgeEnd> = ed.reader_slots(session, out);
        let subgraph_consumer = edges.iter().any(|e| e.arg == usize::MAX);
        edges.retain(|e| e.arg != usize::MAX);
        let all_edges = edges.len() + usize::from(subgraph_consumer);
        if all_edges == 0 || (all_edges == 1 && !produces_output) {
            continue;
        }
        let reuse = !subgraph_consumer && !produces_output;
        let to_copy: Vec<EdgeEnd> = edges.into_iter().skip(usize::from(reuse)).collect();
        if to_copy.is_empty() {
            continue;
        }
        let dq = session.graphs[gi].nodes[ni].clone();
        let gen_ = names.get_or_insert_with(|| NameGen::new(&session.graphs[gi]));
        for EdgeEnd { node: ci, arg: pos } in to_copy {
            let value = gen_.value(&format!("{out}/duplicated"));
            let name = gen_.node(&format!("{}/duplicated", dq.name));
            let g = &mut session.graphs[gi];
            if let Some(t) = g.types.get(&out).cloned() {
                g.types.insert(value, t);
            }
            if let Some(s) = g.shapes.get(&out).cloned() {
                g.shapes.insert(value, s);
            }
            // ORT makes the copy's value with the original's type, its symbolic dims included.
            if let Some(p) = g.dim_params.get(&out).cloned() {
                g.dim_params.insert(value, p);
            }
            g.generated_names.insert(name);
            ed.set_input(session, EdgeEnd::new(ci, pos), value);
            ed.add(
                session,
                SNode {
                    name,
                    outputs: vec![value],
                    implicit_inputs: thin_vec::ThinVec::new(),
                    subgraphs: thin_vec::ThinVec::new(),
                    ep: None,
                    origin: None,
                    removed: false,
                    ..dq.clone()
                },
            );
            modified = true;
        }
        session.graphs[gi].name_counter = gen_.counter;
    }
    if let Some(ed) = editor {
        ed.keep(session);
    }
    modified
}

/// `EnsureUniqueDQForNodeUnit` as its level-1 registry entry runs it (again, among the level-1
/// transformers): it edits DequantizeLinear nodes only (in any graph).
pub(crate) const LEVEL1: crate::placer::transformers::optimize::Level1 =
    crate::placer::transformers::optimize::Level1(|step, session| {
        step.dq && step.edited(session, |s, gi| run(s, gi, 0))
    });
