//! ORT's level-1 `TransposeOptimizer` (`core/optimizer/transpose_optimization/`:
//! `onnx_transpose_optimization.cc` with ORT's graph API `ort_optimizer_api_impl.cc` and its
//! extended handlers `ort_transpose_optimization.cc`), simulated for a graph whose nodes are not
//! yet assigned: every `Transpose` is pushed through the nodes that read it when ORT's rank-based
//! cost estimate says that it pays, cancelling against other Transposes or being merged with them.
//!
//! The simulation follows ORT's editing steps one by one because they decide names: new nodes are
//! named `GenerateNodeName(<op>)` (`Transpose`, `Transpose_token_7`, ...), their outputs
//! `<node>_out0`, a node whose output moves to a new node gets `GenerateNodeArgName(<node name>)`
//! (`_token_4` for an unnamed node), new initializers `const_transpose_optimizer...`; all draw on
//! the graph's one `_token_<k>` counter. Its QDQ handling (looking past a `DequantizeLinear`,
//! `MakeQDQNodeUnit`) is in `qdq.rs`.

use crate::sym::{SymMap as HashMap, SymSet as HashSet};

use crate::infer::eval::Tensor;
use crate::infer::shapes::Values;
use crate::infer::{self, Type};
use crate::model::proto::{AttributeProto, attribute_proto::AttributeType};
use crate::session::edit::Editor;
use crate::session::{EdgeEnd, Init, NameGen, SNode, Session};
use crate::sym::Sym;
use crate::tables::KernelTable;

/// ORT's `kMinSupportedOpset`: older models are left alone.
const MIN_OPSET: i64 = 7;
mod cost;
mod handlers;
use handlers::permute_1d;
mod perm;
use perm::*;
mod qdq;

/// How a node's inputs are chosen and handled (ORT's `HandlerInfo`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Handler {
    /// All inputs and outputs transposed (unary elementwise ops, `Cast`, ...).
    Simple,
    /// Broadcasting elementwise ops: non-scalar inputs, ranks normalised with `Unsqueeze`.
    Broadcast,
    /// Only the first input (`Clip`, `CastLike`).
    FirstInput,
    Transpose,
    Concat,
    Split,
    Shape,
    Pad,
    Reduce,
    ArgMinMax,
    Squeeze,
    Unsqueeze,
    Slice,
    Tile,
    SoftMax,
    QuantDequant,
    Reshape,
    /// `com.microsoft` `QLinearAdd`/`QLinearMul`: inputs A (0) and B (3), broadcasting.
    QLinearBinary,
    /// `com.microsoft` `QLinearConcat`: the data inputs (2, 5, 8, ...), with its axis.
    QLinearConcat,
    /// `MaxPool` (`HandleMaxPool`): for the CPU provider only, an 8-bit one becomes
    /// `com.microsoft` `NhwcMaxPool`; never at level 1.
    MaxPool,
    /// `com.microsoft` `QLinearAveragePool`/`QLinearGlobalAveragePool` (`HandleQLinearPoolOp`):
    /// the channels-first/last variant swapped (`channels_last` flipped) under a Transpose of the
    /// matching perm; in the runs for the CPU provider (after partitioning), never at level 1.
    QLinearPool,
    /// `Resize` (`EPAwareHandleResize`): pushed only when assigned to the CPU and the perm is
    /// NCHW to NHWC or back (rank 4), so never at level 1.
    Resize,
    /// A handler that exists but never pushes at level 1 (provider-dependent ones such as
    /// `MaxPool`/`Resize`, which need a CPU assignment, and the QLinear contrib ops).
    Never,
}

impl Handler {
    fn of(domain: &str, op: &str) -> Option<Handler> {
        use Handler::*;
        if domain == "com.microsoft" {
            // ORT's `OrtExtendedHandlers`: the QLinear binary ops, Concat and unary ops push
            // whatever their provider; the rest never do here.
            return match op {
                "QLinearAdd" | "QLinearMul" => Some(QLinearBinary),
                "QLinearConcat" => Some(QLinearConcat),
                "QLinearLeakyRelu" | "QLinearSigmoid" => Some(FirstInput),
                "QLinearAveragePool" | "QLinearGlobalAveragePool" => Some(QLinearPool),
                "QuantizeLinear" | "DequantizeLinear" | "QLinearReduceMean" | "QLinearSoftmax" => {
                    Some(Never)
                }
                _ => None,
            };
        }
        if domain != "ai.onnx" {
            return None;
        }
        Some(match op {
            "Cast" | "Exp" | "Gelu" | "Identity" | "LeakyRelu" | "Log" | "Reciprocal" | "Relu"
            | "Sigmoid" | "Sqrt" | "Tanh" | "Abs" | "Not" | "Ceil" | "Floor" | "Neg" | "Erf"
            | "HardSigmoid" | "Round" | "IsInf" | "IsNaN" | "Selu" | "Shrink" | "Sign"
            | "Softplus" | "Softsign" | "ThresholdedRelu" | "Celu" | "HardSwish" | "Sin"
            | "Cos" | "Tan" | "Sinh" | "Cosh" | "Asin" | "Acos" | "Atan" | "Asinh" | "Acosh"
            | "Atanh" => Simple,
            "Add" | "Max" | "Min" | "Mul" | "Sub" | "Div" | "And" | "Or" | "Xor" | "Mod"
            | "PRelu" | "BitShift" | "Equal" | "Greater" | "Less" | "GreaterOrEqual"
            | "LessOrEqual" | "Mean" | "Sum" | "Pow" | "Where" => Broadcast,
            "Clip" | "CastLike" => FirstInput,
            "Transpose" => Transpose,
            "Concat" => Concat,
            "Split" => Split,
            "Shape" => Shape,
            "Pad" => Pad,
            "ReduceLogSum" | "ReduceLogSumExp" | "ReduceMax" | "ReduceMean" | "ReduceMin"
            | "ReduceProd" | "ReduceSum" | "ReduceSumSquare" | "ReduceL1" | "ReduceL2" => Reduce,
            "ArgMin" | "ArgMax" => ArgMinMax,
            "Squeeze" => Squeeze,
            "Unsqueeze" => Unsqueeze,
            "Slice" => Slice,
            "Tile" => Tile,
            "Softmax" | "Hardmax" | "LogSoftmax" => SoftMax,
            "QuantizeLinear" | "DequantizeLinear" => QuantDequant,
            "Reshape" => Reshape,
            "MaxPool" => MaxPool,
            "Resize" => Resize,
            _ => return None,
        })
    }

    /// Whether pushing through transposes the node's outputs.
    fn transposes_outputs(self) -> bool {
        !matches!(self, Handler::Transpose | Handler::Shape | Handler::Reshape)
    }
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// `Transpose` of a small dense tensor by `perm` (output dim i is input dim `perm[i]`).
fn transpose_tensor(t: &Tensor, perm: &[i64]) -> Option<Tensor> {
    use crate::infer::eval::Data;
    let r = t.dims.len();
    if perm.len() != r {
        return None;
    }
    let dims: Vec<usize> = t
        .dims
        .iter()
        .map(|&d| usize::try_from(d).ok())
        .collect::<Option<_>>()?;
    let mut strides = vec![1usize; r];
    for i in (0..r.saturating_sub(1)).rev() {
        strides[i] = strides[i + 1] * dims[i + 1];
    }
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p as usize]).collect();
    let n: usize = out_dims.iter().product();
    let mut src_index = Vec::with_capacity(n);
    let mut idx = vec![0usize; r];
    for _ in 0..n {
        src_index.push(
            idx.iter()
                .enumerate()
                .map(|(k, &i)| i * strides[perm[k] as usize])
                .sum::<usize>(),
        );
        for k in (0..r).rev() {
            idx[k] += 1;
            if idx[k] < out_dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    let data = match &t.data {
        Data::Int(v) => Data::Int(src_index.iter().map(|&i| v[i]).collect()),
        Data::Float(v) => Data::Float(src_index.iter().map(|&i| v[i]).collect()),
    };
    Some(Tensor {
        elem: t.elem,
        dims: out_dims.iter().map(|&d| d as i64).collect(),
        data,
    })
}

/// The optimiser's state over one graph.
struct Opt<'s> {
    session: &'s mut Session,
    gi: usize,
    table: &'s KernelTable,
    versions: &'s HashMap<Sym, i64>,
    values: &'s mut Values,
    opset: i64,
    /// Built on first use: it reads every name of the graph, and most passes add nothing.
    names: Option<NameGen>,
    generated: Vec<Sym>,
    /// The graph's editor: every edit of the optimizer goes through it, and its producers and
    /// readers are ORT's `GetNodeProducingOutput`/`GetValueConsumers`.
    ed: Editor,
    /// ORT's `provider_type`: at level 2 the optimizer runs for the CPU provider, over the
    /// nodes assigned to it, and assigns it the nodes it adds (`None` at level 1).
    provider: Option<crate::tables::Ep>,
}

/// Runs the transpose optimizer over graph `gi` and, afterwards, its subgraphs (as ORT's
/// `TransposeOptimizer::ApplyImpl` recurses). Returns whether anything changed.
pub fn run(
    session: &mut Session,
    gi: usize,
    table: &KernelTable,
    versions: &HashMap<Sym, i64>,
    values: &mut Values,
    order: &[usize],
) -> bool {
    run_for(session, gi, table, versions, values, order, None)
}

/// ORT's level-2 `TransposeOptimizer` for the CPU provider (registered with
/// `kCpuExecutionProvider`; once, in the first step of level 2, `ShouldOnlyApplyOnce`): after
/// partitioning, over the main graph's CPU nodes, before the QDQ selector/action fusions. Measured
/// with the CPU wheels: QDQ GPT-2's K Transposes, which level 1 leaves after a Q, are pushed again
/// (`Transpose_token_<k>` renamed, their new DQ and Q then dropped by the QDQ selectors).
pub fn run_cpu(session: &mut Session, table: &KernelTable, level: crate::placer::OptLevel) -> bool {
    if level < crate::placer::OptLevel::Extended || session.graphs.is_empty() {
        return false;
    }
    run_cpu_graph(session, 0, table)
}

/// The optimizer for the CPU provider over graph `gi` (ORT's `Optimize(graph, CPU, ...)`, as
/// the level-2 pass and the `NhwcTransformer` call it): only CPU nodes are visited, and
/// 8-bit `MaxPool`s become `NhwcMaxPool`.
pub fn run_cpu_graph(session: &mut Session, gi: usize, table: &KernelTable) -> bool {
    let cpu = crate::tables::Ep::Cpu;
    if gi >= session.graphs.len() || !session.graphs[gi].any_live_node(|n| n.ep == Some(cpu)) {
        return false;
    }
    let versions = infer::domain_versions(session, table);
    let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
    let mut values = Values::default();
    run_for(
        session,
        gi,
        table,
        &versions,
        &mut values,
        &order,
        Some(cpu),
    )
}

/// The `NhwcTransformer`'s edit of graph `gi` (`nhwc_transformer.cc` on ORT's graph API): for
/// each node of `order` that `wrap` accepts when its turn comes, `WrapTransposesAroundNode`
/// (`TransposeInput` of input 0 by the channels-first-to-last perm, which cancels against a
/// Transpose already there, and `TransposeOutput` of output 0 back), then
/// `SwapNodeOpTypeDomainAndSinceVersion` to the com.microsoft op with `channels_last = 1` (a copy
/// named `GenerateNodeName(<name>)`, the outputs moved to it). Returns whether it wrapped any.
pub fn wrap_channels_last(
    session: &mut Session,
    gi: usize,
    table: &KernelTable,
    order: &[usize],
    wrap: &dyn Fn(&Session, usize, usize) -> bool,
) -> bool {
    let versions = infer::domain_versions(session, table);
    let mut values = Values::default();
    let opset = versions.get(&Sym::AI_ONNX).copied().unwrap_or(0);
    let ed = Editor::open(session, gi);
    let mut opt = Opt {
        gi,
        table,
        versions: &versions,
        values: &mut values,
        opset,
        names: None,
        generated: Vec::new(),
        ed,
        provider: Some(crate::tables::Ep::Cpu),
        session,
    };
    let mut wrapped = false;
    for &ni in order {
        if !wrap(opt.session, gi, ni) {
            continue;
        }
        let x = opt.node(ni).inputs[0];
        let rank = opt
            .session
            .shape_of(gi, x)
            .map_or(4, |s| s.len() as i64)
            .max(3);
        let to_last: Vec<i64> = std::iter::once(0)
            .chain(2..rank)
            .chain(std::iter::once(1))
            .collect();
        let to_first = invert(&to_last);
        opt.transpose_input(ni, 0, &to_last, &to_first);
        opt.transpose_output(ni, 0, &to_first, &to_last);
        opt.swap_to_channels_last(ni);
        wrapped = true;
    }
    let g = &mut opt.session.graphs[gi];
    if let Some(names) = &opt.names {
        g.name_counter = names.counter;
    }
    g.generated_names.extend(opt.generated);
    opt.ed.keep(opt.session);
    wrapped
}

fn run_for(
    session: &mut Session,
    gi: usize,
    table: &KernelTable,
    versions: &HashMap<Sym, i64>,
    values: &mut Values,
    order: &[usize],
    provider: Option<crate::tables::Ep>,
) -> bool {
    let opset = versions.get(&Sym::AI_ONNX).copied().unwrap_or(0);
    let mut changed = false;
    // Without a Transpose nothing moves; with a DQ the QDQ fix-up pass still runs.
    let (mut transposes, mut have_dq) = (false, false);
    for (_, n) in session.graphs[gi].live_nodes() {
        transposes |= n.op == Sym::TRANSPOSE;
        have_dq |= n.op == Sym::DEQUANTIZE_LINEAR;
    }
    if (MIN_OPSET..=max_supported_opset(table)).contains(&opset) && (transposes || have_dq) {
        let ed = Editor::open(session, gi);
        let mut opt = Opt {
            gi,
            table,
            versions,
            values,
            opset,
            names: None,
            generated: Vec::new(),
            ed,
            provider,
            session,
        };
        changed = transposes && opt.optimize(order);
        if have_dq {
            changed |= opt.fix_qdq_node_units();
        }
        if opt.provider.is_some() {
            changed |= opt.fold_constant_squeezes();
        }
        let g = &mut opt.session.graphs[gi];
        if let Some(names) = &opt.names {
            g.name_counter = names.counter;
        }
        g.generated_names.extend(opt.generated);
        opt.ed.keep(opt.session);
    }
    changed
}

/// The outputs from which a pushed Transpose reaches another on some path through supported ops
/// (`any`) and, from 1.31, the perms of the Transposes each reaches that way (`reaches`).
pub(super) struct Leading {
    any: HashSet<Sym>,
    reaches: Option<HashMap<Sym, Vec<Vec<i64>>>>,
}

impl Leading {
    /// Whether the cost of transposing output `o` by `perm` is waived: before 1.31 when `o` leads
    /// to a Transpose; from 1.31 only when, besides, a Transpose it leads to would cancel `perm`
    /// (its perm is the inverse) or the pushed Transpose would have one reader (`single`, so that
    /// merging it with the one downstream still removes a node).
    pub(super) fn waives(&self, o: Sym, perm: &[i64], single: bool) -> bool {
        self.any.contains(&o)
            && match &self.reaches {
                None => true,
                Some(reaches) => {
                    single
                        || reaches
                            .get(&o)
                            .is_some_and(|ps| ps.iter().any(|p| is_inverse(p, perm)))
                }
            }
    }
}

/// Whether `p` undoes `perm` (`p[perm[i]] == i`).
fn is_inverse(p: &[i64], perm: &[i64]) -> bool {
    p.len() == perm.len()
        && perm
            .iter()
            .enumerate()
            .all(|(i, &q)| usize::try_from(q).ok().and_then(|q| p.get(q)) == Some(&(i as i64)))
}

/// ORT's `kMaxSupportedOpset` for the release: the transpose optimizer skips models above it.
fn max_supported_opset(table: &KernelTable) -> i64 {
    table.max_opset("ai.onnx").unwrap_or(0)
}

impl Opt<'_> {
    /// The graph's name generator (ORT's `GenerateNodeName`/`GenerateNodeArgName`).
    fn names(&mut self) -> &mut NameGen {
        let (session, gi) = (&*self.session, self.gi);
        self.names.get_or_insert_with(|| {
            let mut names = NameGen::new(&session.graphs[gi]);
            names.reserve_value(Sym::EMPTY);
            names
        })
    }

    fn node(&self, n: usize) -> &SNode {
        &self.session.graphs[self.gi].nodes[n]
    }

    fn node_mut(&mut self, n: usize) -> &mut SNode {
        &mut self.session.graphs[self.gi].nodes[n]
    }

    fn producer(&self, name: Sym) -> Option<usize> {
        self.ed.producer(self.session, name)
    }

    /// Live nodes that read `name` explicitly, in index order, and whether that list is all
    /// (ORT's `comprehensive`: no subgraph reads it and it is no graph output).
    fn consumers(&self, name: Sym) -> (Vec<usize>, bool) {
        let mut comprehensive = !self.ed.is_output(name);
        let mut out: Vec<usize> = Vec::new();
        for e in self.ed.reader_slots(self.session, name) {
            if e.arg == usize::MAX {
                comprehensive = false;
            } else if out.last() != Some(&e.node) {
                out.push(e.node);
            }
        }
        (out, comprehensive)
    }

    fn has_consumers(&self, name: Sym) -> bool {
        self.ed.is_output(name) || self.ed.has_users(self.session, name)
    }

    fn set_input(&mut self, n: usize, i: usize, name: Sym) {
        self.ed.set_input(self.session, EdgeEnd::new(n, i), name);
    }

    fn remove_node(&mut self, n: usize) {
        self.ed.remove(self.session, n);
    }

    fn perm_of(&self, n: usize) -> Option<Vec<i64>> {
        let node = self.node(n);
        if node.op != Sym::TRANSPOSE || node.domain != Sym::AI_ONNX {
            return None;
        }
        let perm = node.attr_ints("perm")?.to_vec();
        is_valid_perm(&perm).then_some(perm)
    }

    fn is_transpose(&self, n: usize) -> bool {
        let node = self.node(n);
        node.op == Sym::TRANSPOSE && node.domain == Sym::AI_ONNX
    }

    fn shape(&self, name: Sym) -> Option<Vec<Option<i64>>> {
        self.session.shape_of(self.gi, name).cloned()
    }

    /// ORT's `EstimateValueRank`: dims other than 1 (unknown counts), 5 when the rank is unknown.
    fn estimate_rank(&self, name: Sym) -> i32 {
        match self.shape(name) {
            Some(s) => s.iter().filter(|d| **d != Some(1)).count() as i32,
            None => 5,
        }
    }

    fn set_shape(&mut self, name: Sym, shape: Option<Vec<Option<i64>>>) {
        let g = &mut self.session.graphs[self.gi];
        match shape {
            Some(s) => {
                g.shapes.insert(name, s);
            }
            None => {
                g.shapes.remove(&name);
            }
        }
    }

    fn copy_value_info(&mut self, src: Sym, dst: Sym) {
        if let Some(t) = self.session.type_of(self.gi, src).cloned() {
            self.session.graphs[self.gi].types.insert(dst, t);
            let s = self.shape(src);
            self.set_shape(dst, s);
        }
    }

    fn permute_dims(&mut self, name: Sym, perm: &[i64]) {
        if let Some(s) = self.shape(name)
            && s.len() == perm.len()
        {
            let p: Vec<Option<i64>> = perm.iter().map(|&i| s[i as usize]).collect();
            self.set_shape(name, Some(p));
        }
    }

    fn local_constant(&self, name: Sym) -> Option<&Init> {
        self.session.graphs[self.gi]
            .initializers
            .get(&name)
            .filter(|i| !i.overridable)
    }

    fn constant_ints(&mut self, name: Sym) -> Option<Vec<i64>> {
        if name.is_empty() {
            return None;
        }
        self.values
            .get(self.session, self.gi, name)
            .map(|t| t.as_i64())
    }

    fn is_constant(&self, name: Sym) -> bool {
        self.producer(name).is_none()
            && self
                .session
                .initializer(self.gi, name)
                .is_some_and(|i| !i.overridable)
    }

    fn add_initializer(&mut self, t: Tensor) -> Sym {
        let name = self.names().value("const_transpose_optimizer");
        let g = &mut self.session.graphs[self.gi];
        g.types.insert(name, Type::Tensor(t.elem));
        g.shapes
            .insert(name, t.dims.iter().map(|&d| Some(d)).collect());
        g.init_order.push(name);
        g.initializers.insert(
            name,
            Init {
                dims: t.dims.clone(),
                elem: t.elem,
                overridable: false,
                tensor: Box::new(t.to_proto(&name)),
            },
        );
        self.values.set(self.gi, name, t);
        name
    }

    /// The Squeezes this pass put before a shared constant (`UnsqueezeInput`, case 1) that still
    /// have readers when a pass for a provider ends: ORT's session graph holds the squeezed
    /// constant as a new initializer (`const_transpose_optimizer_token_<k>`) read in their place,
    /// and no Squeeze (measured with the CPU wheel 1.31.1 on `qop.whisper-enc.op17` at `all`:
    /// the NHWC pass's Squeezes of the GELU constants; where ORT folds them was not found).
    fn fold_constant_squeezes(&mut self) -> bool {
        let mut changed = false;
        for ni in 0..self.session.graphs[self.gi].nodes.len() {
            let n = self.node(ni);
            if n.removed
                || n.op != "Squeeze"
                || n.domain != Sym::AI_ONNX
                || !self.generated.contains(&n.name)
            {
                continue;
            }
            let (Some(input), Some(out)) = (n.inputs.first().cloned(), n.outputs.first().cloned())
            else {
                continue;
            };
            if self.local_constant(input).is_none() {
                continue;
            }
            let Some(axes) = self.read_axes(ni, 1, 13) else {
                continue;
            };
            let Some(value) = self.values.get(self.session, self.gi, input) else {
                continue;
            };
            let rank = value.dims.len() as i64;
            let axes: Vec<i64> = axes
                .iter()
                .map(|&a| if a < 0 { a + rank } else { a })
                .collect();
            let dims: Vec<i64> = value
                .dims
                .iter()
                .enumerate()
                .filter(|(k, _)| !axes.contains(&(*k as i64)))
                .map(|(_, &d)| d)
                .collect();
            let folded = self.add_initializer(Tensor {
                elem: value.elem,
                dims,
                data: value.data.clone(),
            });
            let (readers, _) = self.consumers(out);
            self.replace_references(&readers, out, folded);
            self.remove_node(ni);
            let axes_input = self.node(ni).inputs.get(1).cloned().unwrap_or_default();
            if !axes_input.is_empty() && !self.has_consumers(axes_input) {
                self.remove_initializer(axes_input);
            }
            changed = true;
        }
        changed
    }

    fn remove_initializer(&mut self, name: Sym) {
        self.session.graphs[self.gi].initializers.remove(&name);
        self.values.forget(self.gi, name);
    }

    /// Replaces initializer `name` by its transpose (or, when it is too large to hold here, by
    /// a tensor of the transposed shape with the same bytes: only its shape matters later).
    fn transpose_initializer(&mut self, name: Sym, perm: &[i64]) {
        let value = self.values.get(self.session, self.gi, name);
        let g = &mut self.session.graphs[self.gi];
        let Some(init) = g.initializers.get_mut(&name) else {
            return;
        };
        if init.dims.len() != perm.len() {
            return;
        }
        let dims: Vec<i64> = perm.iter().map(|&p| init.dims[p as usize]).collect();
        match value.and_then(|v| transpose_tensor(&v, perm)) {
            Some(t) => {
                *init.tensor = t.to_proto(&name);
                self.values.set(self.gi, name, t);
            }
            None => {
                init.tensor.dims = dims.clone();
                self.values.forget(self.gi, name);
            }
        }
        init.dims = dims.clone();
        g.shapes
            .insert(name, dims.iter().map(|&d| Some(d)).collect());
    }

    fn reshape_initializer(&mut self, name: Sym, dims: Vec<i64>) {
        let g = &mut self.session.graphs[self.gi];
        let Some(init) = g.initializers.get_mut(&name) else {
            return;
        };
        init.tensor.dims = dims.clone();
        init.dims = dims.clone();
        g.shapes
            .insert(name, dims.iter().map(|&d| Some(d)).collect());
        if let Some(mut v) = self
            .values
            .get(self.session, self.gi, name)
            .map(|t| (*t).clone())
        {
            v.dims = dims;
            self.values.set(self.gi, name, v);
        }
    }

    /// ORT's `ApiGraph::AddNode`: a node named `GenerateNodeName(op)` with outputs
    /// `GenerateNodeArgName(<name>_out<i>)`, appended to the graph.
    fn add_node(&mut self, op: &str, inputs: &[Sym], outputs: usize) -> usize {
        self.add_node_in(Sym::AI_ONNX, op, inputs, outputs)
    }

    /// [`Self::add_node`] in `domain`.
    fn add_node_in(&mut self, domain: Sym, op: &str, inputs: &[Sym], outputs: usize) -> usize {
        let name = self.names().node(op);
        self.generated.push(name);
        let outs: Vec<Sym> = (0..outputs)
            .map(|i| self.names().value(&format!("{name}_out{i}")))
            .collect();
        let op = Sym::new(op);
        let since = infer::resolve_schema(self.table, self.versions, domain, op)
            .ok()
            .map(|s| s.since);
        let node = SNode {
            name,
            op,
            domain,
            since,
            inputs: inputs.to_vec(),
            outputs: outs,
            attrs: thin_vec::ThinVec::new(),
            subgraphs: thin_vec::ThinVec::new(),
            implicit_inputs: thin_vec::ThinVec::new(),
            ep: self.provider,
            kernel: None,
            origin: None,
            removed: false,
        };
        self.ed.add(self.session, node)
    }

    /// `SwapNodeOpTypeDomainAndSinceVersion(node, <op>, "com.microsoft", 1)` with
    /// `channels_last = 1` set: `CopyNode` (named `GenerateNodeName(<name>)`, outputs
    /// `<new name>_out<i>`), each output moved to the copy, the node removed.
    fn swap_to_channels_last(&mut self, node: usize) {
        let n = self.node(node).clone();
        let name = self.names().node(&n.name);
        self.generated.push(name);
        let outputs: Vec<Sym> = (0..n.outputs.len())
            .map(|i| self.names().value(&format!("{name}_out{i}")))
            .collect();
        let mut attrs: Vec<AttributeProto> = n
            .attrs
            .iter()
            .filter(|a| a.name() != "channels_last")
            .cloned()
            .collect();
        attrs.push(int_attr("channels_last", 1));
        let copy = SNode {
            name,
            domain: Sym::COM_MICROSOFT,
            since: Some(1),
            outputs,
            attrs: attrs.into(),
            ep: self.provider,
            kernel: None,
            ..n.clone()
        };
        let index = self.ed.add(self.session, copy);
        for j in 0..n.outputs.len() {
            if !self.node(node).outputs[j].is_empty() {
                self.move_output(node, j, index, j);
            }
        }
        self.remove_node(node);
    }

    fn set_attr(&mut self, n: usize, a: AttributeProto) {
        // An attribute is set in place (`SGraph::edited`), not through the editor.
        self.session.graphs[self.gi].edited = true;
        let node = self.node_mut(n);
        node.attrs.retain(|x| x.name() != a.name());
        node.attrs.push(a);
    }

    fn make_transpose(&mut self, input: Sym, perm: &[i64]) -> usize {
        let t = self.add_node("Transpose", &[input], 1);
        self.set_attr(t, ints_attr("perm", perm));
        t
    }

    /// ORT's `MoveOutput`: `dst` takes output `si` of `src`, which gets a fresh name.
    fn move_output(&mut self, src: usize, si: usize, dst: usize, di: usize) {
        let name = self.node(src).outputs[si];
        let fresh = {
            let base = self.node(src).name;
            self.names().value(&base)
        };
        self.ed
            .set_output(self.session, EdgeEnd::new(dst, di), name);
        self.ed
            .set_output(self.session, EdgeEnd::new(src, si), fresh);
    }

    fn replace_references(&mut self, nodes: &[usize], old: Sym, new: Sym) {
        for &n in nodes {
            let positions: Vec<usize> = self
                .node(n)
                .inputs
                .iter()
                .enumerate()
                .filter(|(_, i)| **i == old)
                .map(|(k, _)| k)
                .collect();
            for k in positions {
                self.set_input(n, k, new);
            }
        }
    }

    /// ORT's `TransposeInputImpl`: input `i` of `node` becomes its transpose by `perm`.
    fn transpose_input(&mut self, node: usize, i: usize, perm: &[i64], perm_inv: &[i64]) {
        let input = self.node(node).inputs[i];
        if input.is_empty() {
            return;
        }
        let mut constant = self
            .local_constant(input)
            .map(|c| (c.dims.clone(), c.elements()));
        // Look past a DQ of a constant initializer: the initializer is changed in place.
        let mut const_dq: Option<(usize, Sym)> = None;
        if constant.is_none()
            && let Some(dq) = self.const_dq(input)
        {
            let dq_input = self.node(dq).inputs[0];
            constant = self
                .local_constant(dq_input)
                .map(|c| (c.dims.clone(), c.elements()));
            if constant.is_some() {
                self.set_input(dq, 0, Sym::EMPTY);
                const_dq = Some((dq, dq_input));
            }
        }
        self.set_input(node, i, Sym::EMPTY);
        let target = const_dq.as_ref().map_or_else(|| input, |(_, v)| *v);
        let (consumers, comprehensive) = self.consumers(target);
        // Case 1: a constant initializer is transposed in place.
        if let Some((dims, elements)) = constant
            && comprehensive
        {
            let reconnect_dq = |s: &mut Self| {
                if let Some((dq, v)) = &const_dq {
                    s.set_input(*dq, 0, *v);
                }
            };
            if elements == Some(1) {
                reconnect_dq(self);
                self.set_input(node, i, input);
                return;
            }
            if const_dq.is_none() && dims.len() == 1 && dims[0] == perm.len() as i64 {
                // Permute1DConstant: a new, permuted initializer.
                let Some(v) = self.values.get(self.session, self.gi, input) else {
                    self.set_input(node, i, input);
                    return;
                };
                let mut t = (*v).clone();
                if let Some(p) = permute_1d(&t, perm) {
                    t = p;
                }
                let name = self.add_initializer(t);
                self.set_input(node, i, name);
                if !self.has_consumers(input) {
                    self.remove_initializer(input);
                }
                return;
            }
            if !consumers.is_empty() {
                let t = self.make_transpose(target, perm_inv);
                let out = self.node(t).outputs[0];
                self.copy_value_info(target, out);
                self.replace_references(&consumers, target, out);
            }
            self.transpose_initializer(target, perm);
            if let Some((dq, v)) = &const_dq {
                self.set_dq_input(*dq, *v);
            }
            self.set_input(node, i, input);
            return;
        }
        if let Some((dq, v)) = &const_dq {
            self.set_input(*dq, 0, *v);
        }
        let (consumers, comprehensive) = self.consumers(input);
        // Case 2: the input is a Transpose (looking past a DQ): cancel or compose.
        let mut inp_node = self.producer(input);
        let mut look_past: Option<usize> = None;
        let mut above = (consumers.clone(), comprehensive);
        if let Some(dq) = self.dq_producer(input)
            && self.dq_mode_supported(dq)
        {
            look_past = Some(dq);
            let dq_input = self.node(dq).inputs.first().cloned().unwrap_or_default();
            inp_node = self.producer(dq_input);
            above = self.consumers(dq_input);
        }
        if let Some(p) = inp_node
            && let Some(perm2) = self.perm_of(p)
            && perm2.len() == perm.len()
        {
            let pre = self.node(p).inputs.first().cloned().unwrap_or_default();
            if perm2 == perm_inv {
                match look_past {
                    Some(dq) => {
                        self.set_dq_input(dq, pre);
                        self.set_input(node, i, input);
                    }
                    None => self.set_input(node, i, pre),
                }
                if above.1 && above.0.len() == usize::from(look_past.is_some()) {
                    self.remove_node(p);
                }
                return;
            }
            if look_past.is_none() {
                let combined = compose(&perm2, perm);
                let t = self.make_transpose(pre, &combined);
                let out = self.node(t).outputs[0];
                self.copy_value_info(input, out);
                self.permute_dims(out, perm);
                if comprehensive && consumers.is_empty() {
                    self.remove_node(p);
                }
                self.set_input(node, i, out);
                return;
            }
        }
        // Case 3: a Transpose with the same perm already reads the input.
        for &c in &consumers {
            if self.perm_of(c).as_deref() == Some(perm) {
                let out = self.node(c).outputs[0];
                self.set_input(node, i, out);
                return;
            }
        }
        // Case 4: a new Transpose, kept in a QDQ node unit after a DQ.
        let t = self.make_transpose(input, perm);
        let out = self.node(t).outputs[0];
        self.copy_value_info(input, out);
        self.permute_dims(out, perm);
        self.set_input(node, i, out);
        if let Some(dq) = self.dq_producer(input) {
            self.make_qdq_node_unit(dq);
        }
    }

    fn transpose_inputs(&mut self, node: usize, perm: &[i64], indices: &[usize]) {
        let inv = invert(perm);
        for &j in indices {
            self.transpose_input(node, j, perm, &inv);
        }
    }

    /// ORT's `TransposeOutput`: a Transpose by `perm` after output `i`, which keeps its name.
    fn transpose_output(&mut self, node: usize, i: usize, perm: &[i64], perm_inv: &[i64]) -> Sym {
        let t = self.make_transpose(Sym::EMPTY, perm);
        self.move_output(node, i, t, 0);
        let new_output = self.node(node).outputs[i];
        self.set_input(t, 0, new_output);
        let old_output = self.node(t).outputs[0];
        self.copy_value_info(old_output, new_output);
        self.permute_dims(new_output, perm_inv);
        old_output
    }

    fn transpose_outputs(&mut self, node: usize, perm: &[i64]) {
        if is_identity(perm) {
            return;
        }
        let inv = invert(perm);
        for j in 0..self.node(node).outputs.len() {
            self.transpose_output(node, j, perm, &inv);
        }
    }

    /// ORT's `UnsqueezeInput`.
    fn unsqueeze_input(&mut self, node: usize, i: usize, axes: &[i64]) {
        let input = self.node(node).inputs[i];
        let constant = self.local_constant(input).map(|c| c.dims.clone());
        self.set_input(node, i, Sym::EMPTY);
        let (consumers, comprehensive) = self.consumers(input);
        if let Some(dims) = constant
            && comprehensive
        {
            if !consumers.is_empty() {
                let sq = self.make_squeeze_or_unsqueeze("Squeeze", input, axes);
                let out = self.node(sq).outputs[0];
                self.copy_value_info(input, out);
                self.replace_references(&consumers, input, out);
            }
            let shape: Vec<Option<i64>> = dims.iter().map(|&d| Some(d)).collect();
            if let Some(new) = crate::infer::eval::unsqueeze_dims(&shape, axes) {
                self.reshape_initializer(input, new.iter().map(|d| d.unwrap_or(1)).collect());
            }
            self.set_input(node, i, input);
            return;
        }
        let inp_node = self.producer(input);
        if let Some(p) = inp_node {
            let pn = self.node(p);
            if pn.op == "Squeeze" && pn.domain == Sym::AI_ONNX {
                let pre = pn.inputs.first().cloned().unwrap_or_default();
                let axes_in = pn.inputs.get(1).cloned().unwrap_or_default();
                if self.read_axes(p, 1, 13).as_deref() == Some(axes) {
                    self.set_input(node, i, pre);
                    if comprehensive && consumers.is_empty() {
                        self.remove_node(p);
                        if self.opset >= 13 && !axes_in.is_empty() && !self.has_consumers(axes_in) {
                            self.remove_initializer(axes_in);
                        }
                    }
                    return;
                }
            }
        }
        let unsq = self.make_squeeze_or_unsqueeze("Unsqueeze", input, axes);
        let out = self.node(unsq).outputs[0];
        self.copy_value_info(input, out);
        if let Some(s) = self.shape(out)
            && let Some(u) = crate::infer::eval::unsqueeze_dims(&s, axes)
        {
            self.set_shape(out, Some(u));
        }
        if let Some(p) = inp_node
            && let Some(perm) = self.perm_of(p)
        {
            let inv = invert(&perm);
            let new_input = self.help_handle_unsqueeze(unsq, &inv, &perm, axes);
            self.set_input(node, i, new_input);
            return;
        }
        self.set_input(node, i, out);
    }

    fn make_squeeze_or_unsqueeze(&mut self, op: &str, input: Sym, axes: &[i64]) -> usize {
        if self.opset < 13 {
            let n = self.add_node(op, &[input], 1);
            self.set_attr(n, ints_attr("axes", axes));
            return n;
        }
        let init = self.add_initializer(Tensor::i64_1d(axes.to_vec()));
        self.add_node(op, &[input, init], 1)
    }

    /// `ReadFromAttrOrInput`: the attribute below `opset`, else the constant input.
    fn read_axes(&mut self, n: usize, input: usize, opset: i64) -> Option<Vec<i64>> {
        if self.opset < opset {
            return self.node(n).attr_ints("axes").map(<[i64]>::to_vec);
        }
        let name = self.node(n).inputs.get(input).cloned()?;
        self.constant_ints(name)
    }

    fn help_handle_unsqueeze(
        &mut self,
        node: usize,
        perm_inv: &[i64],
        perm: &[i64],
        axes: &[i64],
    ) -> Sym {
        self.transpose_inputs(node, perm_inv, &[0]);
        let new_perm = unsqueeze_perm(axes, perm);
        let inv = invert(&new_perm);
        self.transpose_output(node, 0, &new_perm, &inv)
    }

    fn normalize_input_ranks(&mut self, node: usize, rank: usize, indices: &[usize]) -> bool {
        let mut ranks = Vec::with_capacity(indices.len());
        for &i in indices {
            let name = self.node(node).inputs[i];
            match self.shape(name) {
                Some(s) if s.len() <= rank => ranks.push(s.len()),
                _ => return false,
            }
        }
        for (k, &r) in ranks.iter().enumerate() {
            if r < rank {
                let axes: Vec<i64> = (0..(rank - r) as i64).collect();
                self.unsqueeze_input(node, indices[k], &axes);
            }
        }
        true
    }

    fn optimize(&mut self, order: &[usize]) -> bool {
        // ORT 1.31 changed the cost rule. Measured with the CPU wheels (1.25.1 to 1.30.0 agree
        // with 1.24.4, 1.31.0 with 1.31.1; `tests/it/transpose_cancel.rs`), as ORT's 1.31
        // sources were not readable here: the cost of the Transpose a push leaves on a node's
        // outputs, waived before when a path from them reaches a Transpose, is waived only
        // when, besides, a Transpose reached that way cancels the pushed perm, or every output
        // of the node has one reader (a graph output counts as another), so that the pushed
        // Transpose merges into the one downstream without being left shared. It is close to
        // onnxruntime PR #32714 ("if transpose can't be cancelled, do not push it") by its
        // description, which counts the readers of the incoming Transpose instead; the wheels
        // count those of the node's outputs (a Transpose read by one Slice read by two nodes
        // stays). A Transpose before a Slice read by a Q whose output two DQs read
        // (`EnsureUniqueDQForNodeUnit` gives each reader of a DQ its own) goes through the
        // Slice and stops before the Q; with a cancelling Transpose downstream both releases
        // push it all the way. So GPT-NeoX's rotary `Slice_1` takes the K Transpose and its Q
        // does not; phi's K Transpose, read by both rotary Slices, goes through the
        // pass-through Slice only; QDQ GPT-2's K Transpose goes through its Q and DQ.
        let rule_131 = self.table.release_at_least(1, 31);
        let (any, reaches) = self.leading(order, rule_131);
        let leading = Leading {
            any,
            reaches: rule_131.then_some(reaches),
        };
        let mut changed = false;
        for &k in order {
            if self.node(k).removed || self.provider.is_some_and(|p| self.node(k).ep != Some(p)) {
                continue;
            }
            // Most nodes read no Transpose: checked before their inputs are copied.
            let reads_transpose = self.node(k).inputs.iter().any(|i| {
                !i.is_empty() && self.producer(*i).is_some_and(|t| self.perm_of(t).is_some())
            });
            if !reads_transpose {
                continue;
            }
            let inputs = self.node(k).inputs.clone();
            for (j, inp) in inputs.iter().enumerate() {
                if inp.is_empty() {
                    continue;
                }
                let Some(t) = self.producer(*inp) else {
                    continue;
                };
                let Some(perm) = self.perm_of(t) else {
                    continue;
                };
                if self.process(t, k, &perm, j, &leading) {
                    changed = true;
                    break;
                }
            }
        }
        changed
    }

    /// Outputs with a path through supported ops to a Transpose (reverse order), and (`perms`)
    /// the perms of the Transposes each reaches.
    fn leading(&self, order: &[usize], perms: bool) -> (HashSet<Sym>, HashMap<Sym, Vec<Vec<i64>>>) {
        let mut leading: HashSet<Sym> = HashSet::default();
        let mut reaches: HashMap<Sym, Vec<Vec<i64>>> = HashMap::default();
        let add = |reaches: &mut HashMap<Sym, Vec<Vec<i64>>>, v: Sym, ps: &[Vec<i64>]| {
            let e = reaches.entry(v).or_default();
            for p in ps {
                if !e.contains(p) {
                    e.push(p.clone());
                }
            }
        };
        for &k in order.iter().rev() {
            let n = self.node(k);
            if n.removed {
                continue;
            }
            if n.op == Sym::TRANSPOSE && n.domain == Sym::AI_ONNX {
                if let Some(i) = n.inputs.first() {
                    leading.insert(*i);
                    if perms && let Some(p) = self.perm_of(k) {
                        add(&mut reaches, *i, &[p]);
                    }
                }
                continue;
            }
            if !n.outputs.iter().any(|o| leading.contains(o)) {
                continue;
            }
            if let Some(h) = Handler::of(&n.domain, &n.op)
                && h.transposes_outputs()
            {
                let ps: Vec<Vec<i64>> = n
                    .outputs
                    .iter()
                    .filter_map(|o| reaches.get(o))
                    .flatten()
                    .cloned()
                    .collect();
                for j in self.transposable_inputs(k, h) {
                    let i = self.node(k).inputs[j];
                    if !ps.is_empty() {
                        add(&mut reaches, i, &ps);
                    }
                    leading.insert(i);
                }
            }
        }
        (leading, reaches)
    }

    /// ORT's `ProcessTranspose`.
    fn process(
        &mut self,
        t: usize,
        node: usize,
        perm: &[i64],
        index: usize,
        leading: &Leading,
    ) -> bool {
        let n = self.node(node);
        let Some(handler) = Handler::of(&n.domain, &n.op) else {
            return false;
        };
        let indices = self.transposable_inputs(node, handler);
        if !indices.contains(&index) {
            return false;
        }
        if !self.push_pays(node, perm, handler, &indices, leading) {
            return false;
        }
        let inv = invert(perm);
        self.handle(handler, t, node, perm, &inv, &indices)
    }
}

/// The `TransposeOptimizer` as its level-1 registry entry runs it: `ShouldOnlyApplyOnce`, in
/// the first step only.
pub(crate) const LEVEL1: crate::placer::transformers::optimize::Level1 =
    crate::placer::transformers::optimize::Level1(|step, session| {
        step.number == 0 && step.transpose(session)
    });

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perms() {
        assert_eq!(invert(&[0, 2, 1, 3]), vec![0, 2, 1, 3]);
        assert_eq!(invert(&[2, 0, 1]), vec![1, 2, 0]);
        assert_eq!(unsqueeze_perm(&[0, 3], &[2, 0, 1]), vec![0, 4, 1, 3, 2]);
        assert_eq!(
            sorted_axes_for_transposed_input(&[0, 1], &[2, 0, 1]),
            vec![0, 2]
        );
        assert!(!is_valid_perm(&[0, 0]));
        assert_eq!(
            handlers::finalize_reshape(&[1, 512, 4, 1], &[1, 1, 512, 4], false),
            Some(vec![1, 1, 512, 4])
        );
    }

    #[test]
    fn transpose_small_tensor() {
        let t = Tensor::ints(7, vec![2, 3], vec![0, 1, 2, 3, 4, 5]);
        let r = transpose_tensor(&t, &[1, 0]).map(|t| (t.dims.clone(), t.as_i64()));
        assert_eq!(r, Some((vec![3, 2], vec![0, 3, 1, 4, 2, 5])));
    }
}
