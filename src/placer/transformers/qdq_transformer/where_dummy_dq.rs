//! ORT's `WhereDummyDq` (`onnxruntime/core/optimizer/qdq_transformer/where_dummy_dq.cc`), a
//! level-1 transformer after `EnsureUniqueDQForNodeUnit`, in ORT 1.24 and later (1.23.2 has
//! none: measured with the stubbed-GPU oracle and the CPU wheels on
//! `tests/fixtures/realworld/unseen2/qdq16u.dyn.vit.onnx`).
//!
//! A `Where` whose output feeds exactly one `QuantizeLinear`, with one data input made by a
//! `DequantizeLinear` and the other a constant scalar initializer (rank 0), gets a `DequantizeLinear`
//! on the scalar branch, so that the `Where` forms a QDQ node unit. The new DQ reads three new
//! initializers (`<where>_dummy_xq`, `_dummy_scale`, `_dummy_zp`) and writes `<where>_dummy_dq`;
//! the node itself is named by the value-name generator from the same base (so
//! `<where>_dummy_dq_token_<k>`). ORT skips (after generating the three initializer names) when
//! the input DQ's and the output Q's quantized types differ, when the DQ's scale or zero point is
//! not an initializer, when the scalar is not a float initializer of the scale's type, or when the
//! zero point is not int8/uint8/int16/uint16.

use crate::model::DataType as D;
use crate::model::proto::TensorProto;
use crate::placer::ir::{Init, NameGen, SNode, Session};
use crate::placer::transformers::qdq_transformer::{is_dq, is_q};
use crate::session::EdgeEnd;
use crate::session::edit::Editor;
use crate::sym::Sym;

/// Subgraph nesting followed; deeper graphs (only a hostile model has them) are left alone.
const MAX_DEPTH: usize = 64;

/// Applies the transformer to graph `gi` (each node's subgraphs first). Returns whether it
/// inserted anything.
pub fn run(session: &mut Session, gi: usize, depth: usize) -> bool {
    if depth > MAX_DEPTH || gi >= session.graphs.len() {
        return false;
    }
    if !session.graphs[gi]
        .live_nodes()
        .any(|(_, n)| n.op == "Where" || !n.subgraphs.is_empty())
    {
        return false;
    }
    let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
    let mut names: Option<NameGen> = None;
    // Built at the first `Where`: the graph's producers and readers, kept by the insertions.
    let mut index: Option<Editor> = None;
    let mut modified = false;
    for ni in order {
        let subs: Vec<usize> = session.graphs[gi].nodes[ni]
            .subgraphs
            .iter()
            .map(|(_, s)| *s)
            .collect();
        for s in subs {
            modified |= run(session, s, depth + 1);
        }
        if session.graphs[gi].nodes[ni].op != "Where" {
            continue;
        }
        let idx = index.get_or_insert_with(|| Editor::open(session, gi));
        let Some((dq, const_idx)) = satisfied(session, gi, ni, idx) else {
            continue;
        };
        let names = names.get_or_insert_with(|| NameGen::new(&session.graphs[gi]));
        modified |= insert(session, gi, ni, dq, const_idx, names, idx);
    }
    if let Some(n) = names {
        session.graphs[gi].name_counter = n.counter;
    }
    if let Some(idx) = index {
        idx.keep(session);
    }
    modified
}

/// `SatisfyCondition`: the DQ feeding the other branch and the index of the scalar input.
fn satisfied(session: &Session, gi: usize, ni: usize, idx: &Editor) -> Option<(usize, usize)> {
    let g = &session.graphs[gi];
    let n = g.nodes.get(ni)?;
    if n.removed || n.op != "Where" || n.inputs.len() < 3 {
        return None;
    }
    let out = n.outputs.first()?;
    match idx.users(session, *out)[..] {
        [c] if g.nodes[c].op == Sym::QUANTIZE_LINEAR => {}
        _ => return None,
    }
    let producer = |v: Sym| idx.producer(session, v);
    let (p1, p2) = (producer(n.inputs[1]), producer(n.inputs[2]));
    let is_dq_at = |p: Option<usize>| p.is_some_and(|k| g.nodes[k].op == Sym::DEQUANTIZE_LINEAR);
    let is_const = |v: Sym| session.initializer(gi, v).is_some_and(|i| !i.overridable);
    let scalar = |v: Sym| session.shape_of(gi, v).is_some_and(Vec::is_empty);
    if is_dq_at(p1) && is_const(n.inputs[2]) {
        return scalar(n.inputs[2]).then_some((p1?, 2));
    }
    if is_const(n.inputs[1]) && is_dq_at(p2) {
        return scalar(n.inputs[1]).then_some((p2?, 1));
    }
    None
}

/// `InsertDummyDQ`.
fn insert(
    session: &mut Session,
    gi: usize,
    ni: usize,
    dq: usize,
    const_idx: usize,
    names: &mut NameGen,
    idx: &mut Editor,
) -> bool {
    let g = &session.graphs[gi];
    let (n, dqn) = (&g.nodes[ni], &g.nodes[dq]);
    if !is_dq(dqn) || dqn.inputs.len() < 3 {
        return false;
    }
    let Some(out) = n.outputs.first() else {
        return false;
    };
    let Some(q) = idx
        .users(session, *out)
        .first()
        .map(|&c| &g.nodes[c])
        .filter(|c| is_q(c))
    else {
        return false;
    };
    let elem = |v: Option<&Sym>| v.and_then(|v| session.type_of(gi, *v)).cloned();
    if elem(dqn.inputs.first()).is_none() || elem(dqn.inputs.first()) != elem(q.outputs.first()) {
        return false;
    }
    let (Some(scale), Some(zp)) = (
        session.initializer(gi, dqn.inputs[1]),
        session.initializer(gi, dqn.inputs[2]),
    ) else {
        return false;
    };
    let (scale_elem, zp_elem) = (scale.elem, zp.elem);
    let base = n.name;
    let xq_name = names.value(&format!("{base}_dummy_xq"));
    let zp_name = names.value(&format!("{base}_dummy_zp"));
    let scale_name = names.value(&format!("{base}_dummy_scale"));
    let scalar = n.inputs[const_idx];
    let Some(c) = session.initializer(gi, scalar) else {
        return false;
    };
    if c.elem != scale_elem || c.elem != D::Float as i32 {
        return false;
    }
    let quantized = [D::Int8, D::Uint8, D::Int16, D::Uint16];
    if !quantized.iter().any(|d| *d as i32 == zp_elem) {
        return false;
    }
    let dq_domain = dqn.domain;
    let dq_since = dqn.since;
    let value = names.value(&format!("{base}_dummy_dq"));
    let node_name = names.value(&format!("{base}_dummy_dq"));
    let g = &mut session.graphs[gi];
    for (name, elem) in [
        (&xq_name, zp_elem),
        (&zp_name, zp_elem),
        (&scale_name, scale_elem),
    ] {
        let tensor = TensorProto {
            data_type: Some(elem),
            name: Some(name.to_string()),
            ..Default::default()
        };
        g.initializers.insert(
            *name,
            Init {
                dims: Vec::new(),
                elem,
                overridable: false,
                tensor: Box::new(tensor),
            },
        );
        g.init_order.push(*name);
        g.types.insert(*name, crate::infer::Type::Tensor(elem));
        g.shapes.insert(*name, Vec::new());
    }
    g.types
        .insert(value, crate::infer::Type::Tensor(D::Float as i32));
    g.shapes.insert(value, Vec::new());
    g.generated_names.insert(node_name);
    let origin = g.nodes[ni].origin;
    idx.add(
        session,
        SNode {
            origin,
            ..SNode::plain(
                node_name,
                Sym::DEQUANTIZE_LINEAR,
                dq_domain,
                dq_since,
                vec![xq_name, scale_name, zp_name],
                vec![value],
            )
        },
    );
    idx.set_input(session, EdgeEnd::new(ni, const_idx), value);
    // The Where no longer reads the scalar; it goes when nothing else does.
    if !idx.has_users(session, scalar) {
        let g = &mut session.graphs[gi];
        if g.initializers.remove(&scalar).is_some() {
            g.init_order.retain(|k| *k != scalar);
        }
    }
    true
}

/// `WhereDummyDq` as its registry entry runs it (level 1, added in ORT 1.24): it matches a
/// `Where` between a DequantizeLinear and a QuantizeLinear.
pub(crate) const LEVEL1: crate::placer::transformers::optimize::Level1 =
    crate::placer::transformers::optimize::Level1(|step, session| {
        step.table().release_at_least(1, 24)
            && step.q
            && step.dq
            && step.edited(session, |s, gi| run(s, gi, 0))
    });
