//! ORT's level-2/3 fusions, which run after partitioning (§7.3): a transformer only fuses nodes
//! whose provider is in its compatible set, and the fused node inherits that provider; nothing
//! is re-partitioned. They rename and merge nodes, so the placement lists ORT's fused names.
//!
//! Simulated, in ORT's order (`GenerateTransformers` in
//! `onnxruntime/core/optimizer/graph_transformer_utils.cc`, level 2), the list repeated while
//! anything changes: `GeluFusion`, `LayerNormFusion`, `SimplifiedLayerNormFusion`,
//! `GatherSliceToSplitFusion`, `GatherToSliceFusion`, `MatmulTransposeFusion`, `BiasGeluFusion`
//! (also `Add` + one-input `FastGelu`), `SkipLayerNormFusion`, `FastGeluFusion`,
//! `QuickGeluFusion`, `BiasSoftmaxFusion` (CUDA only), `MatMulScaleFusion` and `MatMulNBitsFusion`
//! (its bias rule; CUDA from 1.28). Not simulated:
//! the CPU-only ones (`GemmActivationFusion`, `ConvActivationFusion`, level 3's
//! `ConvAddActivationFusion`/NCHWc), `AttentionFusion` and `EmbedLayerNormFusion` (their
//! patterns need the mask and embedding sub-graphs of ORT's own BERT exports; the probe models
//! of `tools/probes/` never trigger them), `GroupQueryAttentionFusion` (ORT-exported
//! GQA only) and `BiasDropoutFusion` (training-mode Dropout only). Every graph is visited,
//! subgraphs included; each pass walks ORT's topological order with an incrementally kept
//! producer/consumer index, so the cost is linear in the graph.
//!
//! ORT's `Graph::GenerateNodeName` and `GenerateNodeArgName` share one counter (the
//! `_token_<n>` suffixes); the fusions call both where ORT does, so the fused names agree.

use crate::sym::{SymMap as HashMap, SymSet as HashSet};

use crate::infer::Type;
use crate::model::DataType as D;
use crate::model::proto::{AttributeProto, attribute_proto::AttributeType};
use crate::placer::{OptLevel, registry};
use crate::providers::{EpSet, ort};
use crate::session::edit::{Editor, Order, held_order, remember_order};
use crate::session::order::Producers;
use crate::session::{SNode, Session};
use crate::sym::Sym;
use crate::tables::{Ep, KernelTable};

const MS: Sym = Sym::COM_MICROSOFT;
mod bias_gelu_fusion;
mod bias_softmax_fusion;
mod conv_activation_fusion;
mod fast_gelu_fusion;
mod gather_fusion;
mod gelu_fusion;
mod gemm_activation_fusion;
mod layer_norm_fusion;
mod matmul_nbits_fusion;
mod matmul_scale_fusion;
mod matmul_transpose_fusion;
mod quick_gelu_fusion;
mod skip_layer_norm_fusion;

/// The ops some fusion starts from or needs.
const TRIGGERS: &[&str] = &[
    "ReduceMean",
    "Pow",
    "Gather",
    "Slice",
    "Range",
    "MatMul",
    "FusedMatMul",
    "Erf",
    "Gelu",
    "LayerNormalization",
    "Tanh",
    "Sigmoid",
    "MatMulNBits",
    "Softmax",
    "Conv",
    "Gemm",
];

/// ORT's `max_num_graph_transformation_steps`.
const MAX_STEPS: usize = 10;

/// Applies the level-2/3 fusions of `level` to the partitioned session graph.
pub fn run(session: &mut Session, table: &KernelTable, level: OptLevel) {
    if level < OptLevel::Extended {
        return;
    }
    let triggers: Vec<Sym> = TRIGGERS.iter().map(|&op| Sym::new(op)).collect();
    let (layer_norm, reduce_mean) = (Sym::new("LayerNormalization"), Sym::new("ReduceMean"));
    for gi in 0..session.graphs.len() {
        // Every fusion starts from one of these ops; most graphs can be skipped at once.
        let g = &session.graphs[gi];
        if !g.any_live_node(|n| triggers.contains(&n.op)) {
            continue;
        }
        let layer_norms = g.any_live_node(|n| n.op == layer_norm || n.op == reduce_mean);
        let mut f = Fuser::new(session, gi);
        f.since_1_25 = table.release_at_least(1, 25);
        if gi == 0 && layer_norms {
            f.params = session.graphs[0].dim_params.clone();
        }
        // ORT's transformer manager repeats the level's list while anything changed; the list
        // and its order are the registry's.
        for _ in 0..MAX_STEPS {
            let before = f.fused;
            for t in registry::simulated(OptLevel::Extended) {
                f.compatible = t.compatible(table);
                f.apply(session, t.name);
            }
            if f.fused == before {
                break;
            }
        }
        f.finish(session);
    }
}

/// One graph's producer/consumer index and ORT's node-name generator.
///
/// Values are keyed by their interned names.
struct Fuser {
    gi: usize,
    /// The graph's producer/consumer index (and its live nodes per op, for [`Fuser::has`] and
    /// [`Fuser::pass_order_of`]), kept by the edits made through it.
    ed: Editor,
    /// Live node names with multiplicity (built on the first generated name), and names
    /// generated so far (`GenerateNodeName`).
    names: Option<HashMap<Sym, usize>>,
    /// The visiting order of the passes: ORT's topological order (`GraphViewer`'s, which each
    /// of ORT's transformers walks), fused nodes taking the place of the node whose output they
    /// produce. Fused nodes are appended in this order, so their indices, and the order later
    /// walks (the NCHWc pass) meet them in, are ORT's: `tests/fixtures/nchwc/probes/branch_order`.
    order: Vec<usize>,
    /// Position of each node in `order` (`usize::MAX` for none).
    pos: Vec<usize>,
    generated: HashSet<Sym>,
    /// Value names generated so far (`GenerateNodeArgName`, which shares the counter).
    generated_args: HashSet<Sym>,
    /// Nodes to visit right after a node of `order` (nodes a fusion added besides the one
    /// taking a fused node's place).
    after: HashMap<usize, Vec<usize>>,
    /// The graph's ai.onnx opset.
    opset: i64,
    /// The simulated ORT release is 1.25 or later.
    since_1_25: bool,
    /// The providers whose nodes the transformer running now may change (its registry entry's,
    /// at the simulated release).
    compatible: EpSet,
    counter: usize,
    /// Fusions made so far.
    fused: usize,
    /// Declared symbolic dims (`dim_param`) per value of the main graph.
    params: HashMap<Sym, Vec<Option<Sym>>>,
    /// Symbolic dims found so far by [`Fuser::dim_symbol`], per (value, dim).
    symbols: crate::placer::dim_symbols::Memo,
}

impl Fuser {
    /// Runs the level-2 transformer ORT names `name` over the graph, when the graph has the ops
    /// it starts from. False for a name no fusion here simulates.
    fn apply(&mut self, session: &mut Session, name: &str) -> bool {
        match name {
            "GemmActivationFusion" if self.has("Gemm") => self.gemm_activation(session),
            "ConvActivationFusion" if self.has("Conv") => self.conv_activation(session),
            "GeluFusion" if self.has("Erf") => self.gelu(session),
            "LayerNormFusion" if self.has("ReduceMean") && self.has("Pow") => {
                self.layer_norm(session)
            }
            "SimplifiedLayerNormFusion" if self.has("Pow") && self.has("ReduceMean") => {
                self.simplified_layer_norm(session)
            }
            "GatherSliceToSplitFusion"
                if self.opset >= 13 && (self.has("Gather") || self.has("Slice")) =>
            {
                self.gather_slice_to_split(session)
            }
            "GatherToSliceFusion" if self.has("Range") && self.has("Gather") => {
                self.gather_to_slice(session)
            }
            "MatmulTransposeFusion"
                if self.has("Transpose") && (self.has("MatMul") || self.has("FusedMatMul")) =>
            {
                self.matmul_transpose(session)
            }
            "BiasGeluFusion" if self.has("Gelu") || self.has("FastGelu") => self.bias_gelu(session),
            "SkipLayerNormFusion"
                if self.has("LayerNormalization") || self.has("SkipLayerNormalization") =>
            {
                self.skip_layer_norm(session)
            }
            "FastGeluFusion" if self.has("Tanh") => self.fast_gelu(session),
            "QuickGeluFusion" if self.has("Sigmoid") => self.quick_gelu(session),
            "BiasSoftmaxFusion" if self.has("Softmax") => self.bias_softmax(session),
            "MatMulScaleFusion"
                if (self.has("MatMul") || self.has("FusedMatMul"))
                    && (self.has("Mul") || self.has("Div")) =>
            {
                self.matmul_scale(session)
            }
            "MatMulNBitsFusion" if self.has("MatMulNBits") && self.has("Add") => {
                self.matmul_nbits_bias(session)
            }
            "GemmActivationFusion"
            | "ConvActivationFusion"
            | "GeluFusion"
            | "LayerNormFusion"
            | "SimplifiedLayerNormFusion"
            | "GatherSliceToSplitFusion"
            | "GatherToSliceFusion"
            | "MatmulTransposeFusion"
            | "BiasGeluFusion"
            | "SkipLayerNormFusion"
            | "FastGeluFusion"
            | "QuickGeluFusion"
            | "BiasSoftmaxFusion"
            | "MatMulScaleFusion"
            | "MatMulNBitsFusion" => {}
            _ => return false,
        }
        true
    }

    fn new(session: &mut Session, gi: usize) -> Fuser {
        let (ed, order) = match Editor::kept(session, gi) {
            // The editor the last pass over the graph kept (the optimiser's).
            Some(mut ed) => {
                // The order of a large graph is built on a thread while the ops are counted
                // here, unless the session holds it.
                let (counts, order) = match held_order(session, gi, Order::Dfs) {
                    Some(order) => (Editor::op_counts_of(session, gi), order),
                    None => {
                        let (counts, order) = crate::session::order::beside(
                            session.graphs[gi].nodes.len(),
                            || {
                                crate::session::order::ort_topological_order_by(session, gi, &|v| {
                                    ed.producer(session, v)
                                })
                            },
                            || Editor::op_counts_of(session, gi),
                        );
                        remember_order(session, gi, Order::Dfs, &order);
                        (counts, order)
                    }
                };
                ed.set_op_counts(counts);
                (ed, order)
            }
            None => {
                // The order of a large graph is built on a thread while the readers are listed
                // here.
                let producer = Producers::of(session, gi);
                let (reads, order) = crate::session::order::beside(
                    session.graphs[gi].nodes.len(),
                    || {
                        crate::session::order::ort_topological_order_by(session, gi, &|v| {
                            producer.get(v)
                        })
                    },
                    || Editor::reads_of(session, gi, true),
                );
                remember_order(session, gi, Order::Dfs, &order);
                (Editor::from_parts(session, gi, producer, reads), order)
            }
        };
        let g = &session.graphs[gi];
        let mut pos = vec![usize::MAX; g.nodes.len()];
        for (k, &ni) in order.iter().enumerate() {
            pos[ni] = k;
        }
        Fuser {
            gi,
            ed,
            names: None,
            order,
            pos,
            generated: g.generated_names.clone(),
            generated_args: HashSet::default(),
            after: HashMap::default(),
            opset: session.opsets.get(&Sym::AI_ONNX).copied().unwrap_or(0),
            since_1_25: true,
            compatible: EpSet::ANY,
            counter: g.name_counter,
            fused: 0,
            params: HashMap::default(),
            symbols: std::cell::RefCell::new(HashMap::default()),
        }
    }

    fn has(&self, op: &str) -> bool {
        // An op never interned is in no graph.
        Sym::get(op).is_some_and(|op| self.ed.op_count(op) > 0)
    }

    /// The live nodes reading `value`, each once.
    fn readers<'s>(&'s self, session: &'s Session, value: Sym) -> impl Iterator<Item = usize> + 's {
        self.ed.readers(session, value)
    }

    /// The order of one pass: the nodes that exist when it starts.
    fn pass_order(&self, session: &Session) -> Vec<usize> {
        self.pass_order_where(session, |_| true)
    }

    /// [`Fuser::pass_order`] for a pass that starts only from nodes of `ops` (it passes over
    /// every other node without a change): those nodes only, in the same order, found from
    /// the op array rather than by reading each node.
    fn pass_order_of(&self, session: &Session, ops: &[&str]) -> Vec<usize> {
        // An op never interned is no node's.
        let ops: Vec<Sym> = ops.iter().filter_map(|op| Sym::get(op)).collect();
        self.pass_order_where(session, |ni| {
            self.ed.op_at(ni).is_some_and(|op| ops.contains(&op))
        })
    }

    /// The live nodes of the pass order that `keep` keeps (asked before the node is read).
    fn pass_order_where(&self, session: &Session, keep: impl Fn(usize) -> bool) -> Vec<usize> {
        let g = &session.graphs[self.gi];
        let live = |ni: usize| keep(ni) && !g.nodes[ni].removed;
        if self.after.is_empty() {
            return self.order.iter().copied().filter(|&ni| live(ni)).collect();
        }
        let mut out = Vec::with_capacity(self.order.len());
        let mut stack: Vec<usize> = Vec::new();
        for &root in &self.order {
            stack.push(root);
            while let Some(ni) = stack.pop() {
                if live(ni) {
                    out.push(ni);
                }
                if let Some(next) = self.after.get(&ni) {
                    stack.extend(next.iter().rev());
                }
            }
        }
        out
    }

    /// Visits `new` right after `at` in later passes.
    fn attach(&mut self, at: usize, new: usize) {
        self.after.entry(at).or_default().push(new);
    }

    fn finish(self, session: &mut Session) {
        let g = &mut session.graphs[self.gi];
        g.name_counter = self.counter;
        g.generated_names = self.generated;
        // The graph's editor, for the passes after.
        self.ed.keep(session);
    }

    /// `Graph::GenerateNodeName`: `base` unless a live node or an earlier generated name has it.
    fn node_name(&mut self, session: &Session, base: &str) -> Sym {
        if self.names.is_none() {
            let mut names: HashMap<Sym, usize> = HashMap::default();
            for (_, n) in session.graphs[self.gi].live_nodes() {
                *names.entry(n.name).or_default() += 1;
            }
            self.names = Some(names);
        }
        let taken = |f: &Fuser, n: Sym| {
            f.names
                .as_ref()
                .and_then(|m| m.get(&n))
                .is_some_and(|&k| k > 0)
                || f.generated.contains(&n)
        };
        let mut name = Sym::new(base);
        while taken(self, name) {
            name = Sym::new(&format!("{base}_token_{}", self.counter));
            self.counter += 1;
        }
        self.generated.insert(name);
        name
    }

    /// `Graph::GenerateNodeArgName`: `base` unless a value or an earlier generated value name
    /// has it; shares the counter with node names.
    fn arg_name(&mut self, session: &Session, base: &str) -> Sym {
        let g = &session.graphs[self.gi];
        let taken = |f: &Fuser, n: Sym| {
            f.generated_args.contains(&n)
                || g.types.contains_key(&n)
                || g.initializers.contains_key(&n)
                || g.inputs.contains(&n)
        };
        let mut name = Sym::new(base);
        while taken(self, name) {
            name = Sym::new(&format!("{base}_token_{}", self.counter));
            self.counter += 1;
        }
        self.generated_args.insert(name);
        name
    }

    fn remove(&mut self, session: &mut Session, ni: usize) {
        let name = session.graphs[self.gi].nodes[ni].name;
        if let Some(k) = self.names.as_mut().and_then(|m| m.get_mut(&name)) {
            *k = k.saturating_sub(1);
        }
        self.ed.remove(session, ni);
    }

    fn add(&mut self, session: &mut Session, node: SNode) -> usize {
        if let Some(names) = self.names.as_mut() {
            *names.entry(node.name).or_default() += 1;
        }
        self.ed.add(session, node)
    }

    /// The live producer of `value` in this graph.
    fn producer_of(&self, session: &Session, value: Sym) -> Option<usize> {
        self.ed.producer(session, value)
    }

    /// ORT's `GetOutputEdgesCount`: reading slots over all outputs.
    fn out_edges(&self, session: &Session, n: &SNode) -> usize {
        n.outputs
            .iter()
            .filter(|o| !o.is_empty())
            .map(|o| {
                self.readers(session, *o)
                    .map(|k| {
                        let r = &session.graphs[self.gi].nodes[k];
                        r.inputs
                            .iter()
                            .chain(&r.implicit_inputs)
                            .filter(|i| *i == o)
                            .count()
                    })
                    .sum::<usize>()
            })
            .sum()
    }

    fn produces_graph_output(&self, n: &SNode) -> bool {
        n.outputs.iter().any(|&o| self.ed.is_output(o))
    }

    /// The only consumer of `n`'s outputs, when there is exactly one edge.
    fn single_consumer(&self, session: &Session, n: &SNode) -> Option<usize> {
        if self.out_edges(session, n) != 1 {
            return None;
        }
        n.outputs
            .iter()
            .find_map(|o| self.readers(session, *o).next())
    }

    /// Replaces `fused` nodes by `node`, which takes the provider of `anchor`.
    fn fuse(
        &mut self,
        session: &mut Session,
        fused: &[usize],
        anchor: usize,
        mut node: SNode,
    ) -> usize {
        node.ep = session.graphs[self.gi].nodes[anchor].ep;
        // Diagnostics point at the model node whose output the fused node now produces.
        let g = &session.graphs[self.gi];
        node.origin = fused
            .iter()
            .map(|&k| &g.nodes[k])
            .find(|n| n.outputs.first() == node.outputs.first())
            .and_then(|n| n.origin)
            .or(g.nodes[anchor].origin);
        let slot = fused
            .iter()
            .copied()
            .find(|&k| g.nodes[k].outputs.first() == node.outputs.first())
            .unwrap_or(anchor);
        self.fused += 1;
        for &k in fused {
            self.remove(session, k);
        }
        let new = self.add(session, node);
        let p = self.pos.get(slot).copied().unwrap_or(usize::MAX);
        self.pos.resize(new + 1, usize::MAX);
        if p < self.order.len() {
            self.order[p] = new;
            self.pos[new] = p;
            if let Some(x) = self.after.remove(&slot) {
                self.after.entry(new).or_default().extend(x);
            }
        } else {
            self.attach(slot, new);
        }
        new
    }
}

/// A constant scalar initializer equal to `expected` (ORT's `IsInitializerWithExpectedValue`:
/// a float16 value is compared with `expected` rounded to float16).
fn is_const(session: &Session, gi: usize, name: Sym, expected: f64) -> bool {
    let Some(init) = session
        .initializer(gi, name)
        .filter(|i| !i.overridable && i.elements() == Some(1))
    else {
        return false;
    };
    let target = if init.elem == D::Float16 as i32 {
        half_to_f64(f32_to_half(expected as f32))
    } else {
        expected
    };
    scalar_value(&init.tensor)
        .is_some_and(|v| v.is_finite() && (v - target).abs() <= 1e-8 + 1e-5 * expected.abs())
}

/// `math::floatToHalf`: round to nearest even.
pub(crate) fn f32_to_half(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let mant = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut h = (m >> shift) as u16;
        if rest > half || (rest == half && h & 1 == 1) {
            h += 1;
        }
        return sign | h;
    }
    let mut h = ((e as u32) << 10 | (mant >> 13)) as u16;
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        h += 1;
    }
    sign | h
}

/// The value of a one-element float16/float/double tensor.
fn scalar_value(t: &crate::model::proto::TensorProto) -> Option<f64> {
    let dt = t.data_type();
    if let Some(raw) = t.raw_data.as_ref().filter(|r| !r.is_empty()) {
        return match dt {
            x if x == D::Float as i32 => Some(f64::from(f32::from_le_bytes(
                raw.get(..4)?.try_into().ok()?,
            ))),
            x if x == D::Double as i32 => Some(f64::from_le_bytes(raw.get(..8)?.try_into().ok()?)),
            x if x == D::Float16 as i32 => Some(half_to_f64(u16::from_le_bytes(
                raw.get(..2)?.try_into().ok()?,
            ))),
            _ => None,
        };
    }
    match dt {
        x if x == D::Float as i32 => t.float_data.first().map(|&v| f64::from(v)),
        x if x == D::Double as i32 => t.double_data.first().copied(),
        x if x == D::Float16 as i32 => t
            .int32_data
            .first()
            .and_then(|&v| u16::try_from(v).ok())
            .map(half_to_f64),
        _ => None,
    }
}

fn half_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 => f64::INFINITY,
        _ => (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// ORT's `optimizer_utils::IsScalar`: a known shape with one element.
fn is_scalar(session: &Session, gi: usize, name: Sym) -> bool {
    session
        .shape_of(gi, name)
        .is_some_and(|s| s.is_empty() || (s.len() == 1 && s[0] == Some(1)))
}

fn fused_node(like: &SNode, op: &str) -> SNode {
    SNode {
        name: Sym::EMPTY,
        op: Sym::new(op),
        domain: MS,
        since: Some(1),
        inputs: like.inputs.clone(),
        outputs: like.outputs.clone(),
        attrs: thin_vec::ThinVec::new(),
        subgraphs: thin_vec::ThinVec::new(),
        implicit_inputs: thin_vec::ThinVec::new(),
        ep: like.ep,
        kernel: None,
        origin: None,
        removed: false,
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

/// A float attribute whose value the placement does not need.
fn float_attr(name: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(1.0),
        ..Default::default()
    }
}

/// The cast versions ORT's norm fusions accept.
const CAST_SINCE: &[i64] = &[6, 9, 13, 19, 21, 23, 24, 25];

/// An ai.onnx `op` node whose since-version is one of `since`.
fn is_op(n: &SNode, op: &str, since: &[i64]) -> bool {
    n.domain == Sym::AI_ONNX && n.op == op && n.since.is_some_and(|v| since.contains(&v))
}

impl Fuser {
    /// The distinct live nodes reading `n`'s outputs, in node-index order (ORT walks a node's
    /// output edges in that order).
    fn children(&self, session: &Session, n: &SNode) -> Vec<usize> {
        let mut out: Vec<usize> = n
            .outputs
            .iter()
            .filter(|o| !o.is_empty())
            .flat_map(|o| self.readers(session, *o))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `graph_utils::FirstChildByType`.
    fn first_child(&self, session: &Session, n: &SNode, op: &str) -> Option<usize> {
        self.children(session, n)
            .into_iter()
            .find(|&c| session.graphs[self.gi].nodes[c].op == op)
    }

    /// The live producers of `n`'s inputs, in node-index order.
    fn parents(&self, session: &Session, n: &SNode) -> Vec<usize> {
        let mut out: Vec<usize> = n
            .inputs
            .iter()
            .filter(|i| !i.is_empty())
            .filter_map(|i| self.producer_of(session, *i))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// `graph_utils::FirstParentByType`.
    fn first_parent(&self, session: &Session, n: &SNode, op: &str) -> Option<usize> {
        self.parents(session, n)
            .into_iter()
            .find(|&c| session.graphs[self.gi].nodes[c].op == op)
    }

    /// `optimizer_utils::CheckOutputEdges`: no graph output and exactly `k` output edges.
    fn edges_are(&self, session: &Session, n: &SNode, k: usize) -> bool {
        !self.produces_graph_output(n) && self.out_edges(session, n) == k
    }

    /// The layer-norm fusions' type check: the first `first_n` inputs (all when `None`) are
    /// float16/float/double/bfloat16 tensors.
    /// One link of a normalisation pattern: op `op` at one of `since`, on provider `ep`, with a
    /// single output edge and the types the fusion takes.
    fn norm_link(
        &self,
        session: &Session,
        n: &SNode,
        op: &str,
        since: &[i64],
        ep: Option<Ep>,
    ) -> bool {
        is_op(n, op, since)
            && n.ep == ep
            && self.edges_are(session, n, 1)
            && self.norm_types_ok(session, n, None)
    }

    fn norm_types_ok(&self, session: &Session, n: &SNode, first_n: Option<usize>) -> bool {
        n.inputs
            .iter()
            .take(first_n.unwrap_or(usize::MAX))
            .all(|i| {
                !i.is_empty()
                    && matches!(session.type_of(self.gi, *i), Some(Type::Tensor(t))
                        if [D::Float16, D::Float, D::Double, D::Bfloat16].iter().any(|d| *d as i32 == *t))
            })
    }

    /// The `axes` of a ReduceMean (attribute, or a constant second input from opset 18).
    fn reduce_axes(&self, session: &Session, n: &SNode) -> Vec<i64> {
        if let Some(a) = n.attr_ints("axes") {
            return a.to_vec();
        }
        n.inputs
            .get(1)
            .filter(|a| !a.is_empty())
            .and_then(|a| session.initializer(self.gi, *a))
            .filter(|i| !i.overridable)
            .and_then(|i| crate::session::int_values(&i.tensor))
            .unwrap_or_default()
    }

    fn is_fp16(&self, session: &Session, v: Sym) -> bool {
        matches!(session.type_of(self.gi, v), Some(Type::Tensor(t)) if *t == D::Float16 as i32)
    }

    fn rank_of(&self, session: &Session, v: Sym) -> Option<usize> {
        session.shape_of(self.gi, v).map(Vec::len)
    }
}

/// A scalar (`[]` or `[1]`) int64 constant initializer: its value and rank.
fn scalar_i64(session: &Session, gi: usize, v: Sym) -> Option<(i64, usize)> {
    let init = session.initializer(gi, v).filter(|i| !i.overridable)?;
    if init.elem != D::Int64 as i32 || !(init.dims.is_empty() || init.dims == [1]) {
        return None;
    }
    let values = crate::session::int_values(&init.tensor)?;
    (values.len() == 1).then(|| (values[0], init.dims.len()))
}

/// A 1-D int64 initializer holding `values`.
fn i64_init(name: &str, values: &[i64]) -> crate::session::Init {
    let t = crate::model::proto::TensorProto {
        name: Some(name.to_string()),
        dims: vec![values.len() as i64],
        data_type: Some(D::Int64 as i32),
        int64_data: values.to_vec(),
        ..Default::default()
    };
    crate::session::init_of(&t, false)
}

impl Fuser {
    /// Adds an initializer the fusion created.
    fn add_initializer(&self, session: &mut Session, name: Sym, values: &[i64]) {
        let g = &mut session.graphs[self.gi];
        g.initializers.insert(name, i64_init(&name, values));
        g.types.insert(name, Type::Tensor(D::Int64 as i32));
        g.shapes.insert(name, vec![Some(values.len() as i64)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every level-2 transformer the registry says is simulated has a fusion here.
    #[test]
    fn registry_fusions() {
        let mut session = Session {
            graphs: vec![crate::session::SGraph::default()],
            ..Session::default()
        };
        let mut f = Fuser::new(&mut session, 0);
        for t in registry::simulated(OptLevel::Extended) {
            assert!(f.apply(&mut session, t.name), "{} has no fusion", t.name);
        }
        assert!(!f.apply(&mut session, "AttentionFusion"));
    }
}
