//! ORT's QDQ node-group selectors (`qdq_transformer/selectors_actions/qdq_selectors.cc`, with
//! `NodeGroup::CanCreateNodeGroup` of `core/framework/node_unit.cc`): given a target node on the
//! CPU, the `DequantizeLinear` nodes feeding it and the `QuantizeLinear` nodes reading it, and
//! whether they form a group its rule accepts (types, counts, edges, quantization parameters).
//!
//! From 1.27 (onnxruntime PR #28229, "validate bias scale in QDQ Conv → QLinearConv fusion",
//! fixing issue #24711; the source of that release was not readable here, so the rule below is
//! its description's, with the tolerance and the edge cases measured with the CPU wheels 1.24.4,
//! 1.26.0, 1.27.0 and 1.31.1, `tests/it/conv_bias_scale.rs`): a Conv's int32 bias must be
//! dequantized with `x_scale * w_scale` (per output channel) or the group is not selected.
//! The 1.27 wheel is the first to leave such a Conv unfused; it is what `quantize_static`'s
//! equal biases become once `ConstantSharing`/`EliminateIdentity` hand one bias DQ (and so one
//! bias scale) to several Convs and `EnsureUniqueDQForNodeUnit` copies it for each.
//!
//! `DQMatMulToMatMulNBits` (`DQMatMulNodeGroupSelector`, [`Rule::DqMatMulNBits`]): registered
//! after the `MatMul` and `Gemm` rules, so tried before them (ORT keeps the rules in a libstdc++
//! `unordered_multimap`, which puts a new entry before the equal keys), on the CPU and, from 1.20
//! (onnxruntime PR 21846), on CUDA. Read in an older `qdq_selectors.cc` (a 4-bit, blockwise
//! `MatMul` weight only) and at commit 02b0534c (`ValidateDQForMatMulNBits`: 2/4/8-bit,
//! per-tensor, per-channel, `Gemm`, onnxruntime PRs 27614 and 27769); the release gates were
//! measured with `tests/fixtures/dq_matmul_nbits/`
//! (`tools/realworld/dq_matmul_nbits.py`): the CPU wheels 1.19.2-1.24.4 fuse only a blockwise
//! 4-bit `MatMul` weight, 1.25.1-1.31.1 also 8-bit, per-tensor and per-channel weights and
//! `Gemm`, and 1.27.0-1.31.1 leave a weight or scale another DQ reads (PR 28326); the
//! stubbed-GPU oracle 1.23.2, 1.24.4 and 1.31.1 the same on CUDA.
//!
//! Not simulated: the redundant `Relu`/`Clip` between a target and its `QuantizeLinear` (newer
//! releases select it too; `ReluQuantFusion`/`ClipQuantFusion` have removed it before here in
//! the models measured), and, from 1.25, a `DQMatMulToMatMulNBits` target no provider has
//! claimed yet (onnxruntime PR 27640: a float16 `MatMul` in a CPU-only session, which the
//! release's later Casts then surround differently from release to release).

use crate::infer::Type;
use crate::model::DataType as D;
use crate::placer::qdq_transformer::{constant_scalar_scale_and_zp, is_qdq_pair_supported};
use crate::session::EdgeEnd;
use crate::session::edit::Editor;
use crate::session::{SNode, Session};
use crate::sym::Sym;
use crate::tables::KernelTable;

/// The rules of `qdq_selector_action_transformer.cc`, each with its selector's flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// `dropSplitQDQ`: `Split` between a DQ and Qs of the same quantization.
    Split,
    /// `drop*`: DQ -> data movement op -> Q becomes the op on quantized data.
    DropQdq {
        allow_16bit: bool,
        allow_4bit: bool,
        allow_nonpositive_scale: bool,
    },
    /// `dropDQ`: DQ -> ArgMax.
    DropDq,
    /// `1DQ`: DQ -> op -> Q becomes `com.microsoft` `QLinear<op>`.
    Unary,
    /// `2DQ`: `Add`/`Mul` to `QLinearAdd`/`QLinearMul`.
    Binary,
    /// `*DQ`: `Concat` to `QLinearConcat`.
    Variadic,
    /// `Conv` to `QLinearConv`; from 1.27 the bias DQ's scale is checked
    /// ([`bias_scale_matches`]).
    Conv { check_bias_scale: bool },
    /// `MatMul` to `QLinearMatMul`, or to `MatMulIntegerToFloat` without a Q.
    MatMul,
    /// `Gemm` to `QGemm`.
    Gemm,
    /// `Where` to `QLinearWhere`.
    Where,
    /// `DQMatMulToMatMulNBits`: a constant DQ weight into input B becomes `com.microsoft`
    /// `MatMulNBits` on the target's provider; `from_1_25`: 2/8-bit, per-tensor, per-channel
    /// and `Gemm` too; `from_1_27`: not when another node reads the weight or the scale.
    DqMatMulNBits { from_1_25: bool, from_1_27: bool },
}

impl Rule {
    /// Whether the rule's selector takes a target on provider `ep` (`BaseSelector`'s
    /// `compatible_providers`, as ORT names them; every selector takes CPU nodes, and
    /// `DQMatMulToMatMulNBits` CUDA nodes too, from 1.20).
    pub(crate) fn runs_on(self, ep: Option<crate::tables::Ep>, table: &KernelTable) -> bool {
        use crate::providers::{named, ort};
        if named(ep, &[ort::CPU]) {
            return true;
        }
        matches!(self, Rule::DqMatMulNBits { .. })
            && named(ep, &[ort::CUDA])
            && table.release_at_least(1, 20)
    }
}

/// The providers any rule's selector takes a target on ([`Rule::runs_on`]), as ORT names them.
pub(crate) const SELECTOR_PROVIDERS: &[&str] =
    &[crate::providers::ort::CPU, crate::providers::ort::CUDA];

/// The rules registered for an ONNX op at its since-version, in the order ORT tries them
/// (`LookUpByOpTypeAndDomain`: the later registration first).
pub(crate) fn rules_for(op: &str, since: Option<i64>, table: &KernelTable) -> [Option<Rule>; 2] {
    let nbits = Rule::DqMatMulNBits {
        from_1_25: table.release_at_least(1, 25),
        from_1_27: table.release_at_least(1, 27),
    };
    let first = match op {
        "MatMul" => Some(nbits),
        "Gemm" if table.release_at_least(1, 25) => Some(nbits),
        _ => None,
    };
    [first, rule_for(op, since, table)]
}

/// The QDQ rule registered for an ONNX op at its since-version, if any, as the release `table`
/// is of has it ([`rules_for`] adds `DQMatMulToMatMulNBits`).
fn rule_for(op: &str, since: Option<i64>, table: &KernelTable) -> Option<Rule> {
    let drop = Rule::DropQdq {
        allow_16bit: true,
        allow_4bit: false,
        allow_nonpositive_scale: true,
    };
    Some(match op {
        "Split" => Rule::Split,
        "Resize" => Rule::DropQdq {
            allow_16bit: false,
            allow_4bit: false,
            allow_nonpositive_scale: true,
        },
        "MaxPool" if since == Some(12) => Rule::DropQdq {
            allow_16bit: false,
            allow_4bit: true,
            allow_nonpositive_scale: false,
        },
        "ReduceMax" | "ReduceMin" => Rule::DropQdq {
            allow_16bit: false,
            allow_4bit: true,
            allow_nonpositive_scale: false,
        },
        "Expand" | "Flatten" | "Gather" | "GatherElements" | "Reshape" | "Slice" | "Squeeze"
        | "Tile" | "Transpose" | "Unsqueeze" => drop,
        "ArgMax" => Rule::DropDq,
        "AveragePool" | "LeakyRelu" | "GlobalAveragePool" | "Sigmoid" | "Softmax" => Rule::Unary,
        "Add" | "Mul" => Rule::Binary,
        "Concat" => Rule::Variadic,
        "Conv" => Rule::Conv {
            check_bias_scale: table.release_at_least(1, 27),
        },
        "MatMul" => Rule::MatMul,
        "Gemm" => Rule::Gemm,
        "Where" => Rule::Where,
        _ => return None,
    })
}

/// A selected group: the DQs (in the target's input order), the target, the Qs (in its output
/// order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub dq: Vec<usize>,
    pub target: usize,
    pub q: Vec<usize>,
}

/// The element type of a tensor value.
pub(crate) fn elem(session: &Session, gi: usize, name: Sym) -> Option<i32> {
    match session.type_of(gi, name)? {
        Type::Tensor(e) => Some(*e),
        _ => None,
    }
}

fn is_16bit(t: Option<i32>) -> bool {
    t == Some(D::Int16 as i32) || t == Some(D::Uint16 as i32)
}

fn is_4bit(t: Option<i32>) -> bool {
    t == Some(D::Int4 as i32) || t == Some(D::Uint4 as i32)
}

const INT8: Option<i32> = Some(D::Int8 as i32);

/// `FindParentsByType(node, "DequantizeLinear")`: in the order of the target's input slots.
fn dq_parents(session: &Session, gi: usize, e: &Editor, n: &SNode) -> Vec<usize> {
    let g = &session.graphs[gi];
    n.existing_inputs()
        .filter_map(|(_, i)| e.producer(session, i))
        .filter(|&p| g.nodes[p].op == Sym::DEQUANTIZE_LINEAR && !g.nodes[p].removed)
        .collect()
}

/// `FindChildrenByType(node, "QuantizeLinear")`: in the order of the target's outputs.
fn q_children(session: &Session, gi: usize, e: &Editor, n: &SNode) -> Vec<usize> {
    let g = &session.graphs[gi];
    n.existing_outputs()
        .flat_map(|(_, o)| e.consumers(session, o))
        .map(|EdgeEnd { node: c, .. }| c)
        .filter(|&c| g.nodes[c].op == Sym::QUANTIZE_LINEAR && !g.nodes[c].removed)
        .collect()
}

/// `NodeGroup::CanCreateNodeGroup`: each DQ feeds only the target (and no graph output); each
/// output of the target goes to Qs only or to no Q, and one that goes to Qs is no graph output.
fn can_create_node_group(
    session: &Session,
    gi: usize,
    e: &Editor,
    target: usize,
    dq: &[usize],
    q: &[usize],
) -> bool {
    let g = &session.graphs[gi];
    for &d in dq {
        let n = &g.nodes[d];
        if e.produces_graph_output(n) || e.node_output_edges(session, n, 1) != 1 {
            return false;
        }
        let to_target = n.existing_outputs().any(|(_, o)| {
            e.consumers(session, o)
                .iter()
                .any(|&EdgeEnd { node: ni, .. }| ni == target)
        });
        if !to_target {
            return false;
        }
    }
    if q.is_empty() {
        return true;
    }
    let t = &g.nodes[target];
    for (_, o) in t.existing_outputs() {
        let consumers = e.consumers(session, o);
        let quantized = consumers
            .iter()
            .filter(|&&EdgeEnd { node: c, .. }| g.nodes[c].op == Sym::QUANTIZE_LINEAR)
            .count();
        let others = consumers.len() - quantized + e.implicit_readers(session, o);
        if quantized > 0 && (others > 0 || e.is_output(o)) {
            return false;
        }
    }
    true
}

/// `NodeGroupSelector::CheckQDQNodes`: `num_dq` DQs (`None`: one per existing input), a group
/// ORT can make, and Qs on every output edge of the target (or none, where allowed).
fn check_qdq_nodes(
    session: &Session,
    gi: usize,
    e: &Editor,
    group: &Group,
    num_dq: Option<usize>,
    empty_q_allowed: bool,
) -> bool {
    let t = &session.graphs[gi].nodes[group.target];
    let num_dq = num_dq.unwrap_or_else(|| t.existing_inputs().count());
    if num_dq != group.dq.len()
        || !can_create_node_group(session, gi, e, group.target, &group.dq, &group.q)
    {
        return false;
    }
    if group.q.is_empty() {
        return empty_q_allowed;
    }
    t.existing_outputs().count() == group.q.len()
        && group.q.len() == e.node_output_edges(session, t, group.q.len())
        && !e.produces_graph_output(t)
}

/// `BaseSelector::Select` for a CPU node: the group `rule` accepts around `target`, if any.
pub(crate) fn select(
    session: &Session,
    gi: usize,
    e: &Editor,
    target: usize,
    rule: Rule,
) -> Option<Group> {
    let g = &session.graphs[gi];
    let t = &g.nodes[target];
    let group = Group {
        dq: dq_parents(session, gi, e, t),
        target,
        q: q_children(session, gi, e, t),
    };
    let dt_in = |k: usize| {
        group
            .dq
            .get(k)
            .and_then(|&d| g.nodes[d].inputs.first())
            .and_then(|i| elem(session, gi, *i))
    };
    let dt_out = |k: usize| {
        group
            .q
            .get(k)
            .and_then(|&q| g.nodes[q].outputs.first())
            .and_then(|o| elem(session, gi, *o))
    };
    if let Rule::DqMatMulNBits {
        from_1_25,
        from_1_27,
    } = rule
    {
        return dq_matmul_nbits(session, gi, e, group, from_1_25, from_1_27);
    }
    let ok = match rule {
        Rule::DqMatMulNBits { .. } => false,
        Rule::DropQdq {
            allow_16bit,
            allow_4bit,
            allow_nonpositive_scale,
        } => {
            check_qdq_nodes(session, gi, e, &group, Some(1), false)
                && dt_in(0) == dt_out(0)
                && (allow_16bit || !is_16bit(dt_in(0)))
                && (allow_4bit || !is_4bit(dt_in(0)))
                && {
                    let (dq, q) = (&g.nodes[group.dq[0]], &g.nodes[group.q[0]]);
                    (allow_nonpositive_scale || positive_scale(session, gi, q))
                        && is_qdq_pair_supported(session, gi, q, dq)
                }
        }
        Rule::DropDq => {
            group.dq.len() == 1
                && can_create_node_group(session, gi, e, target, &group.dq, &group.q)
                && !is_16bit(dt_in(0))
                && !is_4bit(dt_in(0))
                && constant_scalar_scale_and_zp(session, gi, &g.nodes[group.dq[0]]).is_some()
        }
        Rule::Unary => {
            check_qdq_nodes(session, gi, e, &group, Some(1), false)
                && dt_in(0) == dt_out(0)
                && !is_16bit(dt_in(0))
                && !is_4bit(dt_in(0))
        }
        Rule::Binary | Rule::Where => {
            let num = if rule == Rule::Where { Some(2) } else { None };
            check_qdq_nodes(session, gi, e, &group, num, false)
                && group.dq.len() >= 2
                && dt_in(0) == dt_in(1)
                && dt_in(0) == dt_out(0)
                && !is_16bit(dt_in(0))
                && !is_4bit(dt_in(0))
        }
        Rule::Variadic => {
            check_qdq_nodes(session, gi, e, &group, None, false)
                && (0..group.dq.len()).all(|k| dt_in(k) == dt_in(0))
                && (0..group.q.len()).all(|k| dt_out(k) == dt_out(0))
                && dt_in(0) == dt_out(0)
                && !is_16bit(dt_in(0))
                && !is_4bit(dt_in(0))
        }
        Rule::Split => {
            check_qdq_nodes(session, gi, e, &group, Some(1), false)
                && !is_4bit(dt_in(0))
                && (0..group.q.len()).all(|k| {
                    dt_out(k) == dt_in(0)
                        && is_qdq_pair_supported(
                            session,
                            gi,
                            &g.nodes[group.q[k]],
                            &g.nodes[group.dq[0]],
                        )
                })
        }
        Rule::Conv { check_bias_scale } => {
            check_qdq_nodes(session, gi, e, &group, None, false)
                && group.dq.len() >= 2
                && dt_in(0) == dt_out(0)
                && !is_4bit(dt_in(1))
                // `is_int8_allowed` is false on x86-64 (`QDQIsInt8Allowed`).
                && dt_in(0) != INT8
                && (group.dq.len() < 3 || dt_in(2) == Some(D::Int32 as i32))
                && !is_16bit(dt_in(0))
                && !is_16bit(dt_in(1))
                && (!check_bias_scale
                    || group.dq.len() < 3
                    || bias_scale_matches(
                        session,
                        gi,
                        &g.nodes[group.dq[0]],
                        &g.nodes[group.dq[1]],
                        &g.nodes[group.dq[2]],
                    ))
        }
        Rule::MatMul => {
            group.dq.len() == 2
                && dt_in(0) != INT8
                && !is_16bit(dt_in(0))
                && !is_16bit(dt_in(1))
                && !is_4bit(dt_in(0))
                && !is_4bit(dt_in(1))
                && (group.q.is_empty()
                    || (check_qdq_nodes(session, gi, e, &group, None, false)
                        && dt_in(0) == dt_out(0)))
        }
        Rule::Gemm => {
            check_qdq_nodes(session, gi, e, &group, None, true)
                && group.dq.len() >= 2
                && (dt_in(0) != INT8 || dt_in(0) == dt_in(1))
                && (group.q.is_empty() || dt_in(0) == dt_out(0))
                && !is_16bit(dt_in(0))
                && !is_16bit(dt_in(1))
                && !is_4bit(dt_in(0))
                && !is_4bit(dt_in(1))
                && (group.dq.len() < 3
                    || (t.attr("beta").is_none_or(|a| a.f() == 1.0)
                        && dt_in(2) == Some(D::Int32 as i32)))
        }
    };
    ok.then_some(group)
}

/// `DQMatMulNodeGroupSelector::Check` (and, from 1.25, `UpdateBuilder`, which keeps only the
/// weight DQ in the group): no Q after the target; a `MatMul` with exactly one DQ (from 1.25 a
/// `Gemm` with one or two) whose weight DQ feeds input B through its only output edge; the
/// `Gemm` like a `MatMul` (alpha 1, no transposes; with a bias, beta 1 and the bias `[N]`); the
/// DQ valid for `MatMulNBits` ([`valid_nbits_dq`]); from 1.27 (onnxruntime PR 28326, measured:
/// 1.26.0 fuses both `MatMul`s of `uint4_shared_dq`/`uint4_shared_scale`, 1.27.0 neither), no
/// other node of this graph reading the weight or the scale initializer (`GetConsumerNodes`;
/// the zero point may be shared).
fn dq_matmul_nbits(
    session: &Session,
    gi: usize,
    e: &Editor,
    mut group: Group,
    from_1_25: bool,
    from_1_27: bool,
) -> Option<Group> {
    let g = &session.graphs[gi];
    let t = &g.nodes[group.target];
    let gemm = t.op == "Gemm";
    let count_ok = if gemm {
        (1..=2).contains(&group.dq.len())
    } else {
        group.dq.len() == 1
    };
    if !group.q.is_empty() || !count_ok {
        return None;
    }
    let b = t.inputs.get(1).filter(|b| !b.is_empty())?;
    let w = group
        .dq
        .iter()
        .copied()
        .find(|&d| g.nodes[d].outputs.first() == Some(b))?;
    let dq = &g.nodes[w];
    if e.produces_graph_output(dq) || e.node_output_edges(session, dq, 1) != 1 {
        return None;
    }
    if gemm {
        if let Some(&other) = group.dq.iter().find(|&&d| d != w) {
            let c = t.inputs.get(2).filter(|c| !c.is_empty())?;
            if g.nodes[other].outputs.first() != Some(c) {
                return None;
            }
        }
        if !gemm_like_matmul(session, gi, t, dq) {
            return None;
        }
    }
    if !valid_nbits_dq(session, gi, dq, from_1_25) {
        return None;
    }
    let shared = |k: usize| {
        dq.inputs.get(k).is_some_and(|&v| {
            let c = e.consumers(session, v);
            let first = c.first().map(|&EdgeEnd { node: n, .. }| n);
            c.iter().any(|&EdgeEnd { node: n, .. }| Some(n) != first)
        })
    };
    if from_1_27 && (shared(0) || shared(1)) {
        return None;
    }
    group.dq = vec![w];
    Some(group)
}

/// `ValidateGemmForDQMatMulNBits` (from 1.25).
fn gemm_like_matmul(session: &Session, gi: usize, t: &SNode, dq: &SNode) -> bool {
    let f = |name: &str| t.attr(name).and_then(|a| a.f);
    let i = |name: &str| t.attr_i(name).unwrap_or(0);
    let near_one = |v: Option<f32>| v.is_none_or(|v| (v - 1.0).abs() <= 1e-6);
    if !near_one(f("alpha")) || i("transA") != 0 || i("transB") != 0 {
        return false;
    }
    let Some(bias) = t.inputs.get(2).filter(|c| !c.is_empty()) else {
        return true;
    };
    if !near_one(f("beta")) {
        return false;
    }
    let weight = dq.inputs.first().copied().unwrap_or_default();
    let n = match session.initializer(gi, weight).filter(|i| !i.overridable) {
        Some(init) if init.dims.len() == 2 => Some(init.dims[1]),
        Some(_) => return false,
        None => match session.shape_of(gi, weight).map(Vec::as_slice) {
            Some([_, Some(n)]) => Some(*n),
            _ => None,
        },
    };
    let Some(n) = n else {
        return false;
    };
    match session.initializer(gi, *bias).filter(|i| !i.overridable) {
        Some(init) => init.dims == [n],
        None => {
            matches!(session.shape_of(gi, *bias).map(Vec::as_slice), Some([Some(d)]) if *d == n)
        }
    }
}

/// Whether a DQ's weight can become `MatMulNBits`'s: float or float16 scales; a 4-bit weight
/// (from 1.25 also 2- and 8-bit); weight, scale and zero point (a third input, even an empty
/// one, must be one) constant initializers; a rank-2 weight; blockwise along axis 0 (an
/// explicit `axis` 0) with a power-of-2 `block_size` of 16 or more and rank-2 scale and zero
/// point of `[ceil(K / block), N]`; from 1.25, without a `block_size`, also a scalar scale (and
/// zero point) or one of `[N]` along axis 1.
pub(crate) fn valid_nbits_dq(session: &Session, gi: usize, dq: &SNode, from_1_25: bool) -> bool {
    let arg = |k: usize| dq.inputs.get(k).copied();
    let (Some(weight), Some(scale)) = (arg(0), arg(1)) else {
        return false;
    };
    let dt_scale = elem(session, gi, scale);
    if dt_scale != Some(D::Float as i32) && dt_scale != Some(D::Float16 as i32) {
        return false;
    }
    let dt_weight = elem(session, gi, weight);
    let bits_ok = is_4bit(dt_weight)
        || (from_1_25
            && [D::Int8, D::Uint8, D::Int2, D::Uint2]
                .iter()
                .any(|d| dt_weight == Some(*d as i32)));
    if !bits_ok {
        return false;
    }
    let constant = |name: Sym| session.initializer(gi, name).filter(|i| !i.overridable);
    let (Some(w), Some(s)) = (constant(weight), constant(scale)) else {
        return false;
    };
    let z = match arg(2) {
        None => None,
        Some(name) => match constant(name) {
            Some(z) => Some(z),
            None => return false,
        },
    };
    let [k, n] = w.dims[..] else {
        return false;
    };
    let block = dq.attr_i("block_size").filter(|&b| !from_1_25 || b > 0);
    let Some(block) = block else {
        if !from_1_25 {
            return false;
        }
        return match s.dims[..] {
            [] => z.is_none_or(|z| z.dims.is_empty()),
            [c] if c == n => {
                dq.attr_i("axis").is_none_or(|a| a == 1) && z.is_none_or(|z| z.dims == [n])
            }
            _ => false,
        };
    };
    if dq.attr_i("axis") != Some(0) || block < 16 || (block - 1) & block != 0 {
        return false;
    }
    let blocks = (k + block - 1) / block;
    s.dims == [blocks, n] && z.is_none_or(|z| z.dims == [blocks, n])
}

/// `IsQOrDQScalePositiveConstantScalar`.
fn positive_scale(session: &Session, gi: usize, n: &SNode) -> bool {
    let Some(name) = n.inputs.get(1) else {
        return false;
    };
    let Some(init) = session.initializer(gi, *name).filter(|i| !i.overridable) else {
        return false;
    };
    let Some(t) = crate::infer::eval::Tensor::from_proto(&init.tensor) else {
        return false;
    };
    let scalar = t.dims.is_empty() || (t.dims.len() == 1 && t.dims[0] == 1);
    scalar && t.as_f64().first().is_some_and(|&v| v > 0.0)
}

/// The 1.27 bias check of the QDQ Conv selector (`CheckConvBiasScale`, PR #28229): the scales of
/// the input, weight and bias DQs are constant float32 initializers (a bias scale that is a graph
/// input fails: `b_scale_input`), the input's is a scalar (rank 0 or one element), the bias's and
/// the weight's have one element or one per channel, and every channel's bias scale `b` is
/// within `1e-6 + 0.01 * |e|` of `e = x_scale * w_scale` (measured: `big_r1p01005` fails and
/// `big_r0p99005` passes, so the relative part is of `e`, not of the larger scale nor of `b`;
/// `tiny_plus_0p9u` passes and `tiny_plus_1p1u` fails, so the absolute part is 1e-6). A scale
/// this crate does not decode (external data) is taken to match, as a quantizer writes it.
fn bias_scale_matches(session: &Session, gi: usize, x: &SNode, w: &SNode, b: &SNode) -> bool {
    let scale = |n: &SNode| -> Option<Option<Vec<f64>>> {
        let name = n.inputs.get(1).filter(|s| !s.is_empty())?;
        let init = session.initializer(gi, *name).filter(|i| !i.overridable)?;
        if init.elem != D::Float as i32 {
            return None;
        }
        Some(crate::infer::eval::Tensor::from_proto(&init.tensor).map(|t| t.as_f64()))
    };
    let (Some(xs), Some(ws), Some(bs)) = (scale(x), scale(w), scale(b)) else {
        return false;
    };
    let (Some(xs), Some(ws), Some(bs)) = (xs, ws, bs) else {
        return true;
    };
    let [xs] = xs[..] else {
        return false;
    };
    let channels = ws.len().max(bs.len());
    let fits = |v: &[f64]| v.len() == 1 || v.len() == channels;
    if channels == 0 || !fits(&ws) || !fits(&bs) {
        return false;
    }
    let at = |v: &[f64], c: usize| if v.len() == 1 { v[0] } else { v[c] };
    (0..channels).all(|c| {
        let e = f64::from((xs as f32) * (at(&ws, c) as f32));
        (at(&bs, c) - e).abs() <= 1e-6 + 0.01 * e.abs()
    })
}
