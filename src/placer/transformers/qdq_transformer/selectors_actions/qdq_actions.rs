//! ORT's QDQ actions (`qdq_transformer/selectors_actions/qdq_actions.cc`, on the generic
//! `MergeIntoTarget`/`ReplaceWithNew` of `core/optimizer/selectors_actions/actions.cc`): what a
//! selected group becomes.
//!
//! - Dropping Q/DQ (`MergeIntoTarget`): the target reads the DQ's quantized input and writes the
//!   Q's output; the DQ and the Q go.
//! - Replacing (`ReplaceWithNew`): a new node named after the target (its name reused, no name
//!   generated), with the target's attributes, on the CPU, its inputs in the order of the
//!   action's moves; the DQs, the target and the Qs go (each only when nothing outside the group
//!   still reads it). A Q or DQ without a zero point gets ORT's fixed-name default
//!   (`SetOptionalZeroPoint`).

use crate::model::DataType as D;
use crate::model::proto::{AttributeProto, TensorProto, attribute_proto::AttributeType};
use crate::session::EdgeEnd;
use crate::session::edit::Editor;
use crate::session::{Init, SNode, Session};
use crate::sym::Sym;
use crate::tables::Ep;

use super::qdq_selectors::{Group, Rule, elem};

const MS: Sym = Sym::COM_MICROSOFT;
const ONNX: Sym = Sym::AI_ONNX;
const ZP_U8: &str = "init_optional_zero_point_uint8_b33f88f7-c464-43e3-8692-97ac832bb14a";
const ZP_S8: &str = "init_optional_zero_point_int8_b33fd0fa-cd7b-4b10-ae5a-df64cabfe1f8";

/// The op (domain, type) a replacing rule makes of `target`; `None` for the rules that keep it.
pub(crate) fn replacement(rule: Rule, target: &SNode, group: &Group) -> Option<(Sym, Sym)> {
    Some(match rule {
        Rule::DropQdq { .. } | Rule::DropDq => return None,
        Rule::Split => (ONNX, Sym::new("Split")),
        Rule::Unary | Rule::Binary | Rule::Variadic | Rule::Where => {
            (MS, Sym::new(&format!("QLinear{}", target.op)))
        }
        Rule::Conv { .. } => (ONNX, Sym::new("QLinearConv")),
        Rule::MatMul if group.q.is_empty() => (MS, Sym::new("MatMulIntegerToFloat")),
        Rule::MatMul => (ONNX, Sym::new("QLinearMatMul")),
        Rule::Gemm => (MS, Sym::new("QGemm")),
        Rule::DqMatMulNBits { .. } => (MS, Sym::new("MatMulNBits")),
    })
}

/// Runs the action of `rule` on a selected group. `since` is the new node's schema version.
pub(crate) fn run(
    session: &mut Session,
    gi: usize,
    e: &mut Editor,
    rule: Rule,
    group: &Group,
    since: Option<i64>,
) {
    let Some((domain, op)) = replacement(rule, &session.graphs[gi].nodes[group.target], group)
    else {
        merge_into_target(session, e, group);
        return;
    };
    if let Rule::DqMatMulNBits { .. } = rule {
        dq_matmul_to_matmul_nbits(session, gi, e, group, since);
        return;
    }
    // SetOptionalZeroPoint: every Q and DQ of the group gets an explicit zero point.
    for &k in group.dq.iter().chain(&group.q) {
        set_optional_zero_point(session, gi, k);
    }
    let g = &session.graphs[gi];
    let t = &g.nodes[group.target];
    let all = |k: usize| g.nodes[k].inputs.clone();
    let input = |k: usize, i: usize| g.nodes[k].inputs.get(i).cloned().unwrap_or_default();
    let q_params = |v: &mut Vec<Sym>| {
        if let Some(&q) = group.q.first() {
            v.push(input(q, 1));
            v.push(input(q, 2));
        }
    };
    let mut inputs: Vec<Sym> = Vec::new();
    match rule {
        Rule::Unary | Rule::Binary => {
            for &d in &group.dq {
                inputs.extend(all(d));
            }
            q_params(&mut inputs);
        }
        Rule::Variadic => {
            q_params(&mut inputs);
            for &d in &group.dq {
                inputs.extend(all(d));
            }
        }
        Rule::Conv { .. } => {
            inputs.extend(all(group.dq[0]));
            inputs.extend(all(group.dq[1]));
            q_params(&mut inputs);
            if let Some(&b) = group.dq.get(2) {
                inputs.push(input(b, 0));
            }
        }
        Rule::Where => {
            inputs.push(t.inputs.first().cloned().unwrap_or_default());
            inputs.extend(all(group.dq[0]));
            inputs.extend(all(group.dq[1]));
            q_params(&mut inputs);
        }
        Rule::MatMul if group.q.is_empty() => {
            let (a, b) = (group.dq[0], group.dq[1]);
            for i in 0..3 {
                inputs.push(input(a, i));
                inputs.push(input(b, i));
            }
        }
        Rule::MatMul => {
            inputs.extend(all(group.dq[0]));
            inputs.extend(all(group.dq[1]));
            q_params(&mut inputs);
        }
        Rule::Gemm => {
            inputs.extend(all(group.dq[0]));
            inputs.extend(all(group.dq[1]));
            if let Some(&b) = group.dq.get(2) {
                inputs.push(input(b, 0));
            } else if !group.q.is_empty() {
                inputs.push(Sym::EMPTY);
            }
            q_params(&mut inputs);
        }
        Rule::Split => {
            inputs.push(input(group.dq[0], 0));
            if t.since.is_some_and(|v| v >= 13) && t.inputs.len() == 2 {
                inputs.push(t.inputs[1]);
            }
        }
        Rule::DropQdq { .. } | Rule::DropDq | Rule::DqMatMulNBits { .. } => {}
    }
    let outputs: Vec<Sym> = if group.q.is_empty() {
        t.outputs.clone()
    } else {
        group
            .q
            .iter()
            .flat_map(|&q| g.nodes[q].outputs.first().cloned())
            .collect()
    };
    let mut attrs = t.attrs.clone();
    if rule == Rule::Unary && t.op == "Softmax" {
        attrs.push(int_attr("opset", t.since.unwrap_or(0)));
    }
    let node = SNode {
        name: t.name,
        op,
        domain,
        since,
        inputs,
        outputs,
        attrs,
        subgraphs: thin_vec::ThinVec::new(),
        implicit_inputs: thin_vec::ThinVec::new(),
        ep: Some(Ep::Cpu),
        kernel: None,
        origin: t.origin,
        removed: false,
    };
    let members: Vec<usize> = group
        .dq
        .iter()
        .chain(std::iter::once(&group.target))
        .chain(&group.q)
        .copied()
        .collect();
    let kept = kept_members(session, gi, e, &members, &node);
    for &k in &members {
        if !kept.contains(&k) {
            e.remove(session, k);
        }
    }
    e.add(session, node);
}

/// `DQMatMulToMatMulNBitsAction` (a `ReplaceWithNew`, so no `SetOptionalZeroPoint`): one
/// `MatMulNBits` named after the target, on its provider, reading A and the transposed weight,
/// scales and zero points ORT writes as new initializers (`GenerateNodeArgName(<name>_T)`; an
/// unsigned weight without zero points gets `fused_DQ_MatMul_zero_point_T`), and, for a `Gemm`
/// with a bias (from 1.25), the bias as input 5; attributes `K`, `N`, `bits`, `block_size` (32,
/// `session.qdq_matmulnbits_block_size`'s default, for a weight that is not blockwise) and
/// `accuracy_level` (4, `session.qdq_matmulnbits_accuracy_level`'s default), the `Gemm`'s own
/// dropped. The weight DQ and the target go. The new initializers' data is not computed.
fn dq_matmul_to_matmul_nbits(
    session: &mut Session,
    gi: usize,
    e: &mut Editor,
    group: &Group,
    since: Option<i64>,
) {
    let g = &session.graphs[gi];
    let (t, dq) = (&g.nodes[group.target], &g.nodes[group.dq[0]]);
    let arg = |k: usize| dq.inputs.get(k).cloned().unwrap_or_default();
    let (weight, scale, zp) = (arg(0), arg(1), arg(2));
    let Some(w) = session.initializer(gi, weight) else {
        return;
    };
    let [k, n] = w.dims[..] else {
        return;
    };
    let w_elem = w.elem;
    let s_elem = elem(session, gi, scale).unwrap_or(D::Float as i32);
    let bits: i64 = match D::try_from(w_elem) {
        Ok(D::Int2 | D::Uint2) => 2,
        Ok(D::Int8 | D::Uint8) => 8,
        _ => 4,
    };
    let unsigned = [D::Uint2, D::Uint4, D::Uint8]
        .iter()
        .any(|d| *d as i32 == w_elem);
    let block = dq.attr_i("block_size").filter(|&b| b > 0).unwrap_or(32);
    let blocks = (k + block - 1) / block.max(1);
    let blob = (block * bits + 7) / 8;
    let a = t.inputs.first().cloned().unwrap_or_default();
    let bias = (t.op == "Gemm")
        .then(|| t.inputs.get(2).filter(|b| !b.is_empty()).cloned())
        .flatten();
    let mut attrs: Vec<AttributeProto> = t
        .attrs
        .iter()
        .filter(|a| !matches!(a.name(), "alpha" | "beta" | "transA" | "transB"))
        .cloned()
        .collect();
    for (name, v) in [
        ("K", k),
        ("N", n),
        ("accuracy_level", 4),
        ("bits", bits),
        ("block_size", block),
    ] {
        attrs.push(int_attr(name, v));
    }
    let (name, outputs, ep, origin) = (t.name, t.outputs.clone(), t.ep, t.origin);
    let g = &mut session.graphs[gi];
    let add = |g: &mut crate::session::SGraph, base: &str, elem: i32, dims: Vec<i64>| {
        let name = g.generate_value_name(base);
        let tensor = TensorProto {
            name: Some(name.to_string()),
            dims: dims.clone(),
            data_type: Some(elem),
            ..Default::default()
        };
        g.types.insert(name, crate::infer::Type::Tensor(elem));
        g.shapes
            .insert(name, dims.iter().map(|&d| Some(d)).collect());
        g.initializers.insert(
            name,
            Init {
                dims,
                elem,
                overridable: false,
                tensor: Box::new(tensor),
            },
        );
        g.init_order.push(name);
        name
    };
    let u8 = D::Uint8 as i32;
    let mut inputs = vec![
        a,
        add(g, &format!("{weight}_T"), u8, vec![n, blocks, blob]),
        add(g, &format!("{scale}_T"), s_elem, vec![n * blocks]),
    ];
    let zp_dims = vec![n * ((blocks * bits + 7) / 8)];
    if !zp.is_empty() {
        inputs.push(add(g, &format!("{zp}_T"), u8, zp_dims));
    } else if unsigned {
        inputs.push(add(g, "fused_DQ_MatMul_zero_point_T", u8, zp_dims));
    }
    if let Some(b) = bias {
        inputs.resize(5, Sym::EMPTY);
        inputs.push(b);
    }
    let node = SNode {
        name,
        op: Sym::new("MatMulNBits"),
        domain: MS,
        since,
        inputs,
        outputs,
        attrs: attrs.into(),
        subgraphs: thin_vec::ThinVec::new(),
        implicit_inputs: thin_vec::ThinVec::new(),
        ep,
        kernel: None,
        origin,
        removed: false,
    };
    let members = [group.dq[0], group.target];
    let kept = kept_members(session, gi, e, &members, &node);
    for &k in &members {
        if !kept.contains(&k) {
            e.remove(session, k);
        }
    }
    e.add(session, node);
}

/// `MergeIntoTarget` (DQ input 0 to target input 0, Q output 0 to target output 0) and the
/// removal of the DQ and the Q.
fn merge_into_target(session: &mut Session, e: &mut Editor, group: &Group) {
    let g = &session.graphs[e.gi];
    let t = &g.nodes[group.target];
    if let Some(&d) = group.dq.first()
        && let Some(x) = g.nodes[d].inputs.first().cloned()
        && !t.inputs.is_empty()
    {
        e.set_input(session, EdgeEnd::new(group.target, 0), x);
        e.remove(session, d);
    }
    let g = &session.graphs[e.gi];
    let t = &g.nodes[group.target];
    if let Some(&q) = group.q.first()
        && let Some(y) = g.nodes[q].outputs.first().cloned()
        && !t.outputs.is_empty()
    {
        e.set_output(session, EdgeEnd::new(group.target, 0), y);
        e.remove(session, q);
    }
}

/// `SafelyRemoveNodes`: members whose outputs something outside the group (or a graph output)
/// still reads, once the new node has taken over the moved outputs.
fn kept_members(
    session: &Session,
    gi: usize,
    e: &Editor,
    members: &[usize],
    new: &SNode,
) -> Vec<usize> {
    let g = &session.graphs[gi];
    members
        .iter()
        .copied()
        .filter(|&k| {
            g.nodes[k].existing_outputs().any(|(_, o)| {
                if new.outputs.contains(&o) {
                    return false;
                }
                e.is_output(o)
                    || e.implicit_readers(session, o) > 0
                    || e.consumers(session, o)
                        .iter()
                        .any(|EdgeEnd { node: n, .. }| !members.contains(n))
            })
        })
        .collect()
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        i: Some(v),
        r#type: Some(AttributeType::Int as i32),
        ..Default::default()
    }
}

/// `SetOptionalZeroPoint::UpdateNodes` for one Q or DQ.
fn set_optional_zero_point(session: &mut Session, gi: usize, k: usize) {
    let n = &session.graphs[gi].nodes[k];
    if n.inputs.get(2).is_some_and(|z| !z.is_empty()) || n.inputs.len() < 2 {
        return;
    }
    let signed = n.op == Sym::DEQUANTIZE_LINEAR
        && n.inputs.first().and_then(|i| elem(session, gi, *i)) == Some(D::Int8 as i32);
    let (name, dt) = if signed {
        (Sym::new(ZP_S8), D::Int8)
    } else {
        (Sym::new(ZP_U8), D::Uint8)
    };
    let g = &mut session.graphs[gi];
    if let std::collections::hash_map::Entry::Vacant(e) = g.initializers.entry(name) {
        let tensor = TensorProto {
            name: Some(name.to_string()),
            data_type: Some(dt as i32),
            raw_data: Some(vec![0u8].into()),
            ..Default::default()
        };
        e.insert(Init {
            dims: Vec::new(),
            elem: dt as i32,
            overridable: false,
            tensor: Box::new(tensor),
        });
        g.init_order.push(name);
        g.types.insert(name, crate::infer::Type::Tensor(dt as i32));
        g.shapes.insert(name, Vec::new());
    }
    // In place: the action's editor does not list the read (no editor kept is current after).
    g.touch();
    let inputs = &mut g.nodes[k].inputs;
    inputs.resize(3, Sym::EMPTY);
    inputs[2] = name;
}
