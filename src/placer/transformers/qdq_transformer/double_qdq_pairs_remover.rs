//! ORT's `DoubleQDQPairsRemover` (`onnxruntime/core/optimizer/double_qdq_pairs_remover.cc`),
//! a level-1 transformer on every provider, unless the session option
//! `session.disable_double_qdq_remover` is set (it is not by default).
//!
//! In a chain `Q1 -> DQ1 -> Q2 -> DQ2` where `DQ1` has one input edge and one output edge, `Q1`
//! one output edge, none of them produces a graph output, both pairs have explicit constant
//! scalar scales and zero points that agree within the pair, and `DQ1`'s zero point is `uint8`
//! or `int8`: `DQ1` and `Q2` are removed and `DQ2` reads `Q1`'s output (the outer pair's scale
//! and zero point are recomputed, which moves no node). `Q2` may feed several DQs (as
//! `EnsureUniqueDQForNodeUnit` leaves a shared one before level 1), each paired with it: then
//! every one of them reads `Q1`'s output. Measured with the CPU wheels 1.23.2 and 1.31.1 on
//! small models (`Q2` read by two DQs: both pairs removed; by a DQ and another node, or by a DQ
//! with another scale: nothing removed); ORT's source at hand checks one output edge. Visited in the
//! topological order of the graph as it was when the pass began; subgraphs are not visited
//! (ORT's pass does not recurse).

use super::is_qdq_pair_supported;
use crate::model::DataType as D;
use crate::session::edit::Editor;
use crate::session::{EdgeEnd, Session};
use crate::sym::Sym;

/// Applies the transformer to graph `gi`; whether it removed anything.
pub fn run(session: &mut Session, gi: usize) -> bool {
    if gi >= session.graphs.len() {
        return false;
    }
    let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
    // Built once; each removal keeps it current.
    let mut ed = Editor::open(session, gi);
    let mut modified = false;
    for s in order {
        let Some((parent, child, grandchildren)) = removable(session, gi, &ed, s) else {
            continue;
        };
        let Some(src) = session.graphs[gi].nodes[parent].outputs.first().cloned() else {
            continue;
        };
        for grandchild in grandchildren {
            ed.set_input(session, EdgeEnd::new(grandchild, 0), src);
        }
        ed.remove(session, s);
        ed.remove(session, child);
        modified = true;
    }
    ed.keep(session);
    modified
}

/// `IsNodeRemovable`: (parent Q, child Q, grandchild DQs) when DQ node `s` sits removable in
/// the middle of two QDQ pairs.
fn removable(
    session: &Session,
    gi: usize,
    e: &Editor,
    s: usize,
) -> Option<(usize, usize, Vec<usize>)> {
    let g = &session.graphs[gi];
    let me = g.nodes.get(s)?;
    if me.removed
        || me.op != Sym::DEQUANTIZE_LINEAR
        || e.node_input_edges(session, me) != 1
        || e.node_output_edges(session, me, 1) != 1
        || e.produces_graph_output(me)
    {
        return None;
    }
    // The edges into explicit inputs (a subgraph's read is none of them).
    let explicit = |v: Sym| -> Vec<EdgeEnd> {
        let mut l = e.reader_slots(session, v);
        l.retain(|x| x.arg != usize::MAX);
        l
    };
    let out = me.outputs.first()?;
    let &EdgeEnd { node: child, .. } = explicit(*out).first()?;
    let c = &g.nodes[child];
    if c.op != Sym::QUANTIZE_LINEAR
        || e.node_output_edges(session, c, 0) == 0
        || e.produces_graph_output(c)
    {
        return None;
    }
    let EdgeEnd { node: parent, .. } = e.producer_slot(session, *me.inputs.first()?)?;
    let p = &g.nodes[parent];
    if e.node_output_edges(session, p, 1) != 1
        || p.op != Sym::QUANTIZE_LINEAR
        || e.produces_graph_output(p)
    {
        return None;
    }
    // Every reader of Q2 is a DQ paired with it (reading it once, as its data input).
    let c_out = c.outputs.first()?;
    let readers = explicit(*c_out);
    if readers.is_empty() || e.node_output_edges(session, c, readers.len()) != readers.len() {
        return None;
    }
    let mut grandchildren = Vec::with_capacity(readers.len());
    for &EdgeEnd {
        node: grandchild,
        arg: slot,
    } in &readers
    {
        let gc = &g.nodes[grandchild];
        if gc.op != Sym::DEQUANTIZE_LINEAR
            || slot != 0
            || grandchildren.contains(&grandchild)
            || !is_qdq_pair_supported(session, gi, c, gc)
        {
            return None;
        }
        grandchildren.push(grandchild);
    }
    if !is_qdq_pair_supported(session, gi, p, me) {
        return None;
    }
    let zp = super::zero_point_elem(session, gi, me)?;
    if zp != D::Uint8 as i32 && zp != D::Int8 as i32 {
        return None;
    }
    // `FindNewZeroPointAndScale`: pairs with other initializers need float scales and zero
    // points of one type.
    let same_names = me.inputs.get(1) == c.inputs.get(1) && me.inputs.get(2) == c.inputs.get(2);
    if !same_names {
        let elem = |n: Sym| session.initializer(gi, n).map(|i| i.elem);
        let (s1, s2) = (elem(me.inputs[1]), elem(c.inputs[1]));
        if s1 != Some(D::Float as i32)
            || s2 != Some(D::Float as i32)
            || elem(c.inputs[2]) != Some(zp)
        {
            return None;
        }
    }
    Some((parent, child, grandchildren))
}

/// `DoubleQDQPairsRemover` as its registry entry runs it (level 1): only where the session has
/// both a QuantizeLinear and a DequantizeLinear.
pub(crate) const LEVEL1: crate::placer::transformers::optimize::Level1 =
    crate::placer::transformers::optimize::Level1(|step, session| {
        step.q && step.dq && step.edited(session, run)
    });
