//! ORT's `ReluQuantFusion` (`qdq_transformer/relu_quantizelinear.cc`), a rule of the level-2
//! `RuleBasedGraphTransformer`: a CPU `Relu` whose only output edge goes to a `QuantizeLinear`
//! with a zero point at its type's minimum (uint8 0, int8 -128: the quantization clamps at 0
//! anyway) is removed, the Q reading the Relu's input. The rule is registered for the CPU
//! provider only, so at level 1 (nodes not yet assigned) it never applies; models quantized with
//! `QDQKeepRemovableActivations` keep such a Relu until here. Measured with the CPU wheels
//! (1.23.2, 1.24.4, 1.31.1) on `tests/fixtures/realworld/unseen3/qdqkeep.tv.deeplabv3.onnx`: the
//! Relus go at `extended`, and the DQ -> Q pair left behind is dropped by the final clean-up.
//!
//! Not simulated: the level-2 `ClipQuantFusion` (the same for a `Clip` whose range covers the
//! Q's), and `GemmTransposeFusion` again.

use crate::infer::eval::Tensor;
use crate::model::DataType as D;
use crate::placer::OptLevel;
use crate::placer::transformers::qdq_transformer::{is_q, walk};
use crate::session::EdgeEnd;
use crate::session::Session;
use crate::session::edit::Editor;
use crate::sym::Sym;
use crate::tables::Ep;

/// Applies the rule at level `extended` and above; whether it changed anything.
pub fn run(session: &mut Session, level: OptLevel) -> bool {
    if level < OptLevel::Extended || session.graphs.is_empty() {
        return false;
    }
    // A Relu before a QuantizeLinear: a session without one skips the walk and its orders.
    if !session.has_live_op(&[Sym::QUANTIZE_LINEAR]) {
        return false;
    }
    walk(session, 0, 0, &mut visit)
}

fn visit(session: &mut Session, gi: usize, edges: &mut Option<Editor>, ni: usize) -> bool {
    let n = &session.graphs[gi].nodes[ni];
    if n.removed
        || n.op != "Relu"
        || n.domain != Sym::AI_ONNX
        || !n.since.is_some_and(|v| [6, 13, 14].contains(&v))
        || n.ep != Some(Ep::Cpu)
    {
        return false;
    }
    super::open_editor(session, gi, edges);
    let (n, Some(e)) = (&session.graphs[gi].nodes[ni], edges.as_mut()) else {
        return false;
    };
    if e.produces_graph_output(n) || e.node_output_edges(session, n, 1) != 1 {
        return false;
    }
    let (Some(x), Some(y)) = (n.inputs.first().cloned(), n.outputs.first().cloned()) else {
        return false;
    };
    let Some(&EdgeEnd { node: q, .. }) = e.consumers(session, y).first() else {
        return false;
    };
    let qn = &session.graphs[gi].nodes[q];
    if !is_q(qn) || !zero_point_at_minimum(session, gi, qn.inputs.get(2)) {
        return false;
    }
    let slots: Vec<usize> = (0..qn.inputs.len())
        .filter(|&k| qn.inputs[k] == y)
        .collect();
    for k in slots {
        e.set_input(session, EdgeEnd::new(q, k), x);
    }
    e.remove(session, ni);
    true
}

/// Whether the Q's zero point (absent: uint8 0) is its type's minimum: uint8 0 or int8 -128.
fn zero_point_at_minimum(session: &Session, gi: usize, zp: Option<&Sym>) -> bool {
    let Some(zp) = zp.filter(|z| !z.is_empty()) else {
        return true;
    };
    let Some(init) = session.initializer(gi, *zp).filter(|i| !i.overridable) else {
        return false;
    };
    let Some(t) = Tensor::from_proto(&init.tensor) else {
        return false;
    };
    let values = t.as_i64();
    let min = if t.elem == D::Uint8 as i32 {
        0
    } else if t.elem == D::Int8 as i32 {
        -128
    } else {
        return false;
    };
    !values.is_empty() && values.iter().all(|&v| v == min)
}
