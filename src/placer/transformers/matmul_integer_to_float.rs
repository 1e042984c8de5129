//! ORT's `MatMulIntegerToFloatFusion` (`onnxruntime/core/optimizer/matmul_integer_to_float.cc`)
//! and `DynamicQuantizeMatMulFusion` (`dynamic_quantize_matmul_fusion.cc`), level-2
//! transformers of the CPU provider (and DML/ACL), in that order: what `quantize_dynamic` writes
//! for a MatMul becomes one `com.microsoft` node on the CPU.
//!
//! - `MatMulInteger -> Cast -> Mul(., Mul(a_scale, b_scale))`, each of the three with one output
//!   edge and no graph output, the outer `Mul` (7/13/14, not float16) on the CPU, and, when that
//!   `Mul` has one output edge into an `Add` with a constant bias (1-D, or leading 1s, last dim
//!   above 1; the second input, else the first), the `Add` too: one `MatMulIntegerToFloat`
//!   named after the `MatMulInteger` (its name reused, no name generated), on the `Mul`'s
//!   provider.
//! - a `MatMulIntegerToFloat` on the CPU with at least five inputs whose `A` comes from a node
//!   (`GetInputNode(node, 0)`, of any type: in practice a `DynamicQuantizeLinear`) with as many
//!   output edges as outputs, none a graph output, and whose second and third outputs are this
//!   node's `a_scale` and `a_zero_point`: both become one `DynamicQuantizeMatMul` named after the
//!   node. `B`, its scale, zero point and bias need not be constant (ORT PR 5871, 2020, before
//!   every bundled release; read at commit ae81e733 of `dynamic_quantize_matmul_fusion.cc`):
//!   the CPU wheels 1.23.2, 1.24.4 and 1.31.1 fuse the attention `MatMul`s of
//!   `tests/fixtures/realworld/unseen5/optq.{bert,qwen2}.onnx`, whose `B` is another
//!   `DynamicQuantizeLinear`'s output.
//!
//! Names as the released builds make them (measured with the CPU wheels on
//! `tests/fixtures/realworld/qdyn.*`: the fused node keeps the `MatMulInteger`'s name). Nodes are
//! visited in topological order; subgraphs first.

use crate::placer::OptLevel;
use crate::placer::transformers::qdq_transformer::walk;
use crate::session::EdgeEnd;
use crate::session::edit::Editor;
use crate::session::{SNode, Session};
use crate::sym::Sym;
use crate::tables::Ep;

const MS: Sym = Sym::COM_MICROSOFT;

/// Applies both transformers at level `extended` and above; whether they changed anything.
pub fn run(session: &mut Session, level: OptLevel) -> bool {
    if level < OptLevel::Extended || session.graphs.is_empty() {
        return false;
    }
    let mut changed = run_at(session, matmul_integer_to_float);
    changed |= run_at(session, dynamic_quantize_matmul);
    changed
}

type Fusion = fn(&mut Session, usize, &mut Editor, usize) -> bool;

fn run_at(session: &mut Session, fusion: Fusion) -> bool {
    walk(session, 0, 0, &mut |session, gi, edges, ni| {
        if session.graphs[gi].nodes[ni].removed {
            return false;
        }
        let e = edges.get_or_insert_with(|| Editor::open(session, gi));
        fusion(session, gi, e, ni)
    })
}

/// `FirstParentByType`: the producer, of type `op`, of the first input that has one.
fn first_parent(session: &Session, gi: usize, e: &Editor, n: &SNode, op: &str) -> Option<usize> {
    n.existing_inputs()
        .filter_map(|(_, i)| e.producer(session, i))
        .find(|&p| session.graphs[gi].nodes[p].op == op)
}

/// `CheckOutputEdges(node, n)`: exactly `n` output edges and no graph output.
fn output_edges(session: &Session, e: &Editor, n: &SNode, count: usize) -> bool {
    !e.produces_graph_output(n) && e.node_output_edges(session, n, count) == count
}

fn is_constant(session: &Session, gi: usize, name: Sym) -> bool {
    !name.is_empty()
        && session
            .initializer(gi, name)
            .is_some_and(|i| !i.overridable)
}

fn fused(name: Sym, op: &str, inputs: Vec<Sym>, outputs: Vec<Sym>, ep: Option<Ep>) -> SNode {
    SNode {
        name,
        op: Sym::new(op),
        domain: Sym::COM_MICROSOFT,
        since: Some(1),
        inputs,
        outputs,
        attrs: thin_vec::ThinVec::new(),
        subgraphs: thin_vec::ThinVec::new(),
        implicit_inputs: thin_vec::ThinVec::new(),
        ep,
        kernel: None,
        origin: None,
        removed: false,
    }
}

fn matmul_integer_to_float(session: &mut Session, gi: usize, e: &mut Editor, mul: usize) -> bool {
    let g = &session.graphs[gi];
    let m = &g.nodes[mul];
    let float16 = m.inputs.first().and_then(|i| session.type_of(gi, *i))
        == Some(&crate::infer::Type::Tensor(
            crate::model::DataType::Float16 as i32,
        ));
    if m.op != "Mul"
        || m.domain != Sym::AI_ONNX
        || !matches!(m.since, Some(7 | 13 | 14))
        || m.ep != Some(Ep::Cpu)
        || float16
    {
        return false;
    }
    let Some(cast) = first_parent(session, gi, e, m, "Cast") else {
        return false;
    };
    let Some(mmi) = first_parent(session, gi, e, &g.nodes[cast], "MatMulInteger") else {
        return false;
    };
    let Some(right) = first_parent(session, gi, e, m, "Mul") else {
        return false;
    };
    let (c, mi, r) = (&g.nodes[cast], &g.nodes[mmi], &g.nodes[right]);
    if !output_edges(session, e, c, 1)
        || !output_edges(session, e, mi, 1)
        || !output_edges(session, e, r, 1)
    {
        return false;
    }
    // The bias Add, when the Mul feeds only it.
    // The Add and the position of its bias input.
    let mut add: Option<EdgeEnd> = None;
    if output_edges(session, e, m, 1)
        && let Some(EdgeEnd { node: a, .. }) = m
            .outputs
            .first()
            .and_then(|&o| e.consumers(session, o).first().copied())
        && g.nodes[a].op == "Add"
    {
        let bias_shaped = |k: usize| {
            g.nodes[a].inputs.get(k).is_some_and(|b| {
                is_constant(session, gi, *b)
                    && session.initializer(gi, *b).is_some_and(|i| {
                        i.dims
                            .split_last()
                            .is_some_and(|(last, lead)| *last > 1 && lead.iter().all(|&d| d == 1))
                    })
            })
        };
        // The released builds take the bias from either input (measured: `quantize_dynamic`
        // writes `Add(bias, x)` for the torch exports of `tests/fixtures/realworld/qdyn.*`).
        add = [1, 0]
            .into_iter()
            .find(|&k| bias_shaped(k))
            .map(|k| EdgeEnd::new(a, k));
    }
    let mut inputs = vec![
        mi.inputs.first().cloned().unwrap_or_default(),
        mi.inputs.get(1).cloned().unwrap_or_default(),
        r.inputs.first().cloned().unwrap_or_default(),
        r.inputs.get(1).cloned().unwrap_or_default(),
        mi.inputs.get(2).cloned().unwrap_or_default(),
        mi.inputs.get(3).cloned().unwrap_or_default(),
    ];
    let outputs = match add {
        Some(EdgeEnd { node: a, arg: k }) => {
            inputs.push(g.nodes[a].inputs[k]);
            g.nodes[a].outputs.clone()
        }
        None => m.outputs.clone(),
    };
    while inputs.last().is_some_and(Sym::is_empty) {
        inputs.pop();
    }
    let node = fused(mi.name, "MatMulIntegerToFloat", inputs, outputs, m.ep);
    for k in [
        Some(mmi),
        Some(cast),
        Some(right),
        Some(mul),
        add.map(|a| a.node),
    ]
    .into_iter()
    .flatten()
    {
        e.remove(session, k);
    }
    e.add(session, node);
    true
}

fn dynamic_quantize_matmul(session: &mut Session, gi: usize, e: &mut Editor, ni: usize) -> bool {
    let g = &session.graphs[gi];
    let n = &g.nodes[ni];
    if n.op != "MatMulIntegerToFloat"
        || n.domain != MS
        || n.since != Some(1)
        || n.ep != Some(Ep::Cpu)
        || n.inputs.len() < 5
    {
        return false;
    }
    let at = |k: usize| n.inputs.get(k).cloned().unwrap_or_default();
    // `GetInputNode(node, 0)`: the producer of `A`, whatever its type.
    let Some(dql) = n.inputs.first().and_then(|&a| e.producer(session, a)) else {
        return false;
    };
    let q = &g.nodes[dql];
    if !output_edges(session, e, q, q.outputs.len()) {
        return false;
    }
    // Its scale and zero point are this node's `a_scale` and `a_zero_point`.
    let same = |out: usize, input: usize| {
        q.outputs
            .get(out)
            .is_some_and(|o| !o.is_empty() && *o == at(input))
    };
    if !same(1, 2) || !same(2, 4) {
        return false;
    }
    let mut inputs = vec![
        g.nodes[dql].inputs.first().cloned().unwrap_or_default(),
        at(1),
        at(3),
        at(5),
        at(6),
    ];
    while inputs.last().is_some_and(Sym::is_empty) {
        inputs.pop();
    }
    let node = fused(
        n.name,
        "DynamicQuantizeMatMul",
        inputs,
        n.outputs.clone(),
        n.ep,
    );
    e.remove(session, dql);
    e.remove(session, ni);
    e.add(session, node);
    true
}
