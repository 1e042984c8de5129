//! ORT's `QDQS8ToU8Transformer` (`qdq_transformer/qdq_s8_to_u8.cc`): a level-2 transformer of
//! the CPU provider that ORT registers where int8 QDQ activations are not allowed
//! (`QDQIsInt8Allowed()`: every x86-64 build), just before `QDQSelectorActionTransformer`. A
//! `QuantizeLinear` on the CPU whose only output edge goes to a `DequantizeLinear`, both with
//! constant scalar int8 zero points of the same value, becomes a uint8 pair: a new zero-point
//! initializer `qdq_s8_to_u8_zp_conversion` and a new value `qdq_s8_to_u8_quant` between them
//! (both names from the graph's generator, so the `_token_<k>` counter moves as ORT's does).
//!
//! Not simulated: the conversion of a lone DQ's constant int8 weight to uint8
//! (`ConvertS8WeightToU8`, `<weight>_s8_2_u8`): no node name or selection of the CPU rules
//! depends on the weight's signedness when activations are uint8, and an int8 activation is
//! never fused on x86-64 whatever its weight.

use crate::infer::Type;
use crate::infer::eval::Tensor;
use crate::model::DataType as D;
use crate::model::proto::TensorProto;
use crate::placer::OptLevel;
use crate::placer::transformers::qdq_transformer::{is_dq, is_q, walk};
use crate::session::EdgeEnd;
use crate::session::edit::Editor;
use crate::session::{Init, NameGen, Session};
use crate::sym::Sym;
use crate::tables::Ep;

/// Applies the transformer at level `extended` and above; whether it changed anything.
pub fn run(session: &mut Session, level: OptLevel) -> bool {
    if level < OptLevel::Extended || session.graphs.is_empty() {
        return false;
    }
    // Q -> DQ pairs only: a session without a QuantizeLinear skips the walk and its orders.
    if !session.has_live_op(&[Sym::QUANTIZE_LINEAR]) {
        return false;
    }
    walk(session, 0, 0, &mut visit)
}

fn visit(session: &mut Session, gi: usize, edges: &mut Option<Editor>, ni: usize) -> bool {
    let n = &session.graphs[gi].nodes[ni];
    if !is_q(n) || n.ep != Some(Ep::Cpu) {
        return false;
    }
    super::open_editor(session, gi, edges);
    let (n, Some(e)) = (&session.graphs[gi].nodes[ni], edges.as_mut()) else {
        return false;
    };
    if e.produces_graph_output(n) || e.node_output_edges(session, n, 1) != 1 {
        return false;
    }
    let Some(EdgeEnd { node: dq, .. }) = n
        .outputs
        .first()
        .and_then(|&o| e.consumers(session, o).first().copied())
    else {
        return false;
    };
    if !is_dq(&session.graphs[gi].nodes[dq]) {
        return false;
    }
    convert(session, gi, e, ni, dq)
}

/// The constant int8 scalar zero point of a Q or DQ (its input 2).
fn int8_zero_point(session: &Session, gi: usize, name: Sym) -> Option<i64> {
    let init = session.initializer(gi, name).filter(|i| !i.overridable)?;
    let t = Tensor::from_proto(&init.tensor)?;
    (t.elem == D::Int8 as i32 && t.len() == 1).then(|| t.as_i64().first().copied())?
}

/// `QDQ_S8_to_U8` on one pair.
fn convert(session: &mut Session, gi: usize, e: &mut Editor, q: usize, dq: usize) -> bool {
    let g = &session.graphs[gi];
    let (qn, dqn) = (&g.nodes[q], &g.nodes[dq]);
    if qn.inputs.len() != 3 || dqn.inputs.len() != 3 {
        return false;
    }
    let (Some(qz), Some(dz)) = (
        int8_zero_point(session, gi, qn.inputs[2]),
        int8_zero_point(session, gi, dqn.inputs[2]),
    ) else {
        return false;
    };
    if qz != dz {
        return false;
    }
    let old = qn.outputs.first().cloned().unwrap_or_default();
    let shape = session.shape_of(gi, old).cloned();
    let zp_value = u8::try_from(qz + 128).unwrap_or(0);
    let g = &mut session.graphs[gi];
    let mut names = NameGen::new(g);
    let zp = names.value("qdq_s8_to_u8_zp_conversion");
    let quant = names.value("qdq_s8_to_u8_quant");
    g.name_counter = names.counter;
    let tensor = TensorProto {
        name: Some(zp.to_string()),
        data_type: Some(D::Uint8 as i32),
        raw_data: Some(vec![zp_value].into()),
        ..Default::default()
    };
    g.initializers.insert(
        zp,
        Init {
            dims: Vec::new(),
            elem: D::Uint8 as i32,
            overridable: false,
            tensor: Box::new(tensor),
        },
    );
    g.init_order.push(zp);
    g.types.insert(zp, Type::Tensor(D::Uint8 as i32));
    g.shapes.insert(zp, Vec::new());
    g.types.insert(quant, Type::Tensor(D::Uint8 as i32));
    if let Some(s) = shape {
        g.shapes.insert(quant, s);
    }
    e.set_output(session, EdgeEnd::new(q, 0), quant);
    e.set_input(session, EdgeEnd::new(q, 2), zp);
    e.set_input(session, EdgeEnd::new(dq, 0), quant);
    e.set_input(session, EdgeEnd::new(dq, 2), zp);
    true
}
