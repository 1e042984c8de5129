//! ORT's level-2/3 fusions, which run after partitioning (§7.3): a transformer only fuses nodes
//! whose provider is in its compatible set, and the fused node inherits that provider; nothing
//! is re-partitioned. They rename and merge nodes, so the placement lists ORT's fused names.
//!
//! Simulated, in ORT's order (`GenerateTransformers` in
//! `onnxruntime/core/optimizer/graph_transformer_utils.cc`, level 2), the list repeated while
//! anything changes: `GeluFusion`, `LayerNormFusion`, `SimplifiedLayerNormFusion`,
//! `GatherSliceToSplitFusion`, `GatherToSliceFusion`, `MatmulTransposeFusion`, `BiasGeluFusion`
//! (also `Add` + one-input `FastGelu`), `SkipLayerNormFusion`, `FastGeluFusion`,
//! `QuickGeluFusion`, `BiasSoftmaxFusion` (CUDA only) and `MatMulScaleFusion`. Not simulated:
//! the CPU-only ones (`GemmActivationFusion`, `ConvActivationFusion`, level 3's
//! `ConvAddActivationFusion`/NCHWc), `AttentionFusion` and `EmbedLayerNormFusion` (their
//! patterns need the mask and embedding sub-graphs of ORT's own BERT exports; the probe models
//! of `tools/probes/` never trigger them), `GroupQueryAttentionFusion` (ORT-exported
//! GQA only) and `BiasDropoutFusion` (training-mode Dropout only). Every graph is visited,
//! subgraphs included; each pass walks one topological order with an incrementally kept
//! producer/consumer index, so the cost is linear in the graph.
//!
//! ORT's `Graph::GenerateNodeName` and `GenerateNodeArgName` share one counter (the
//! `_token_<n>` suffixes); the fusions call both where ORT does, so the fused names agree.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::infer::{self, Type};
use crate::model::DataType as D;
use crate::model::Model;
use crate::model::proto::{AttributeProto, attribute_proto::AttributeType};
use crate::placer::OptLevel;
use crate::session::{SNode, Session};
use crate::tables::Ep;

const MS: &str = "com.microsoft";

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
    "Softmax",
];

/// ORT's `max_num_graph_transformation_steps`.
const MAX_STEPS: usize = 10;

/// Applies the level-2/3 fusions of `level` to the partitioned session graph.
pub fn run(session: &mut Session, model: &Model, level: OptLevel, ort: &str) {
    if level < OptLevel::Extended {
        return;
    }
    for gi in 0..session.graphs.len() {
        // Every fusion starts from one of these ops; most graphs can be skipped at once.
        let g = &session.graphs[gi];
        if !g
            .live_nodes()
            .any(|(_, n)| TRIGGERS.contains(&n.op.as_str()))
        {
            continue;
        }
        let layer_norms = g
            .live_nodes()
            .any(|(_, n)| n.op == "LayerNormalization" || n.op == "ReduceMean");
        let mut f = Fuser::new(session, gi);
        f.release = release_of(ort);
        if gi == 0 && layer_norms {
            f.params = declared_params(model);
        }
        // ORT's transformer manager repeats the level's list while anything changed.
        for _ in 0..MAX_STEPS {
            let before = f.fused;
            if f.has("Erf") {
                f.gelu(session);
            }
            if f.has("ReduceMean") && f.has("Pow") {
                f.layer_norm(session);
            }
            if f.has("Pow") && f.has("ReduceMean") {
                f.simplified_layer_norm(session);
            }
            if f.opset >= 13 && (f.has("Gather") || f.has("Slice")) {
                f.gather_slice_to_split(session);
            }
            if f.has("Range") && f.has("Gather") {
                f.gather_to_slice(session);
            }
            if f.has("Transpose") && (f.has("MatMul") || f.has("FusedMatMul")) {
                f.matmul_transpose(session);
            }
            if f.has("Gelu") || f.has("FastGelu") {
                f.bias_gelu(session);
            }
            if f.has("LayerNormalization") || f.has("SkipLayerNormalization") {
                f.skip_layer_norm(session);
            }
            if f.has("Tanh") {
                f.fast_gelu(session);
            }
            if f.has("Sigmoid") {
                f.quick_gelu(session);
            }
            if f.has("Softmax") {
                f.bias_softmax(session);
            }
            if (f.has("MatMul") || f.has("FusedMatMul")) && (f.has("Mul") || f.has("Div")) {
                f.matmul_scale(session);
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
/// Values are keyed by their name's hash (no string copies); every lookup checks the names
/// of the nodes it finds, so a hash collision can only hide a fusion, never make a wrong one.
struct Fuser {
    gi: usize,
    producer: HashMap<u64, usize>,
    /// Readers of each value: the head of a list in `links` (one entry per reading node,
    /// implicit inputs included). Entries of removed nodes stay; lookups skip them.
    consumers: HashMap<u64, u32>,
    /// (node, next entry or `u32::MAX`).
    links: Vec<(u32, u32)>,
    outputs: HashSet<String>,
    /// Live node names with multiplicity (built on the first generated name), and names
    /// generated so far (`GenerateNodeName`).
    names: Option<HashMap<String, usize>>,
    /// The visiting order of the passes: a topological order, fused nodes taking the place
    /// of the node whose output they produce.
    order: Vec<usize>,
    /// Position of each node in `order` (`usize::MAX` for none).
    pos: Vec<usize>,
    generated: HashSet<String>,
    /// Value names generated so far (`GenerateNodeArgName`, which shares the counter).
    generated_args: HashSet<String>,
    /// Nodes to visit right after a node of `order` (nodes a fusion added besides the one
    /// taking a fused node's place).
    after: HashMap<usize, Vec<usize>>,
    /// The graph's ai.onnx opset.
    opset: i64,
    /// The simulated ORT release (major, minor).
    release: (u32, u32),
    counter: usize,
    /// Fusions made so far.
    fused: usize,
    /// Live nodes per op type: a pass whose ops are absent is skipped.
    ops: HashMap<String, usize>,
    /// Declared symbolic dims (`dim_param`) per value of the main graph.
    params: HashMap<String, Vec<Option<String>>>,
    /// Symbolic dims found so far by [`Fuser::dim_symbol`], per (value key, dim).
    symbols: std::cell::RefCell<HashMap<(u64, usize), Option<String>>>,
}

impl Fuser {
    fn new(session: &Session, gi: usize) -> Fuser {
        let g = &session.graphs[gi];
        let mut f = Fuser {
            gi,
            producer: HashMap::default(),
            consumers: HashMap::default(),
            links: Vec::new(),
            outputs: g.outputs.iter().cloned().collect(),
            names: None,
            order: Vec::new(),
            pos: Vec::new(),
            generated: g.generated_names.clone(),
            generated_args: HashSet::default(),
            after: HashMap::default(),
            opset: session.opsets.get("ai.onnx").copied().unwrap_or(0),
            release: (1, 99),
            counter: g.name_counter,
            fused: 0,
            ops: HashMap::default(),
            params: HashMap::default(),
            symbols: std::cell::RefCell::new(HashMap::default()),
        };
        f.producer.reserve(g.nodes.len());
        f.consumers.reserve(g.nodes.len());
        f.links.reserve(2 * g.nodes.len());
        for (ni, n) in g.live_nodes() {
            f.register(ni, n);
        }
        // Exporters emit sorted graphs: then index order is a topological order.
        let sorted = g.live_nodes().all(|(ni, n)| {
            n.existing_inputs()
                .all(|(_, i)| f.producer.get(&key(i)).is_none_or(|&p| p < ni))
        });
        f.order = if sorted {
            g.live_nodes().map(|(ni, _)| ni).collect()
        } else {
            infer::topological_order(session, gi)
        };
        f.pos = vec![usize::MAX; g.nodes.len()];
        for (k, &ni) in f.order.iter().enumerate() {
            f.pos[ni] = k;
        }
        f
    }

    fn register(&mut self, ni: usize, n: &SNode) {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            self.producer.insert(key(o), ni);
        }
        for (k, i) in n.inputs.iter().chain(&n.implicit_inputs).enumerate() {
            // One entry per reading node, however many of its slots read the value.
            if i.is_empty()
                || n.inputs
                    .iter()
                    .chain(&n.implicit_inputs)
                    .take(k)
                    .any(|x| x == i)
            {
                continue;
            }
            let (Ok(node), Ok(at)) = (u32::try_from(ni), u32::try_from(self.links.len())) else {
                continue;
            };
            let head = self.consumers.insert(key(i), at).unwrap_or(u32::MAX);
            self.links.push((node, head));
        }
        if let Some(names) = self.names.as_mut() {
            *names.entry(n.name.clone()).or_default() += 1;
        }
        match self.ops.get_mut(n.op.as_str()) {
            Some(k) => *k += 1,
            None => {
                self.ops.insert(n.op.clone(), 1);
            }
        }
    }

    fn has(&self, op: &str) -> bool {
        self.ops.get(op).is_some_and(|&k| k > 0)
    }

    /// The nodes reading `value`, one entry per input slot.
    fn readers<'s>(
        &'s self,
        session: &'s Session,
        value: &'s str,
    ) -> impl Iterator<Item = usize> + 's {
        let g = &session.graphs[self.gi];
        let mut at = self.consumers.get(&key(value)).copied().unwrap_or(u32::MAX);
        std::iter::from_fn(move || {
            let &(node, next) = self.links.get(at as usize)?;
            at = next;
            Some(node as usize)
        })
        .filter(move |&k| {
            let n = &g.nodes[k];
            !n.removed
                && n.inputs
                    .iter()
                    .chain(&n.implicit_inputs)
                    .any(|i| i == value)
        })
    }

    /// The order of one pass: the nodes that exist when it starts.
    fn pass_order(&self, session: &Session) -> Vec<usize> {
        let g = &session.graphs[self.gi];
        if self.after.is_empty() {
            return self
                .order
                .iter()
                .copied()
                .filter(|&ni| !g.nodes[ni].removed)
                .collect();
        }
        let mut out = Vec::with_capacity(self.order.len());
        let mut stack: Vec<usize> = Vec::new();
        for &root in &self.order {
            stack.push(root);
            while let Some(ni) = stack.pop() {
                if !g.nodes[ni].removed {
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
    }

    /// `Graph::GenerateNodeName`: `base` unless a live node or an earlier generated name has it.
    fn node_name(&mut self, session: &Session, base: &str) -> String {
        if self.names.is_none() {
            let mut names: HashMap<String, usize> = HashMap::default();
            for (_, n) in session.graphs[self.gi].live_nodes() {
                *names.entry(n.name.clone()).or_default() += 1;
            }
            self.names = Some(names);
        }
        let taken = |f: &Fuser, n: &str| {
            f.names
                .as_ref()
                .and_then(|m| m.get(n))
                .is_some_and(|&k| k > 0)
                || f.generated.contains(n)
        };
        let mut name = base.to_string();
        while taken(self, &name) {
            name = format!("{base}_token_{}", self.counter);
            self.counter += 1;
        }
        self.generated.insert(name.clone());
        name
    }

    /// `Graph::GenerateNodeArgName`: `base` unless a value or an earlier generated value name
    /// has it; shares the counter with node names.
    fn arg_name(&mut self, session: &Session, base: &str) -> String {
        let g = &session.graphs[self.gi];
        let taken = |f: &Fuser, n: &str| {
            f.generated_args.contains(n)
                || g.types.contains_key(n)
                || g.initializers.contains_key(n)
                || g.inputs.iter().any(|i| i == n)
        };
        let mut name = base.to_string();
        while taken(self, &name) {
            name = format!("{base}_token_{}", self.counter);
            self.counter += 1;
        }
        self.generated_args.insert(name.clone());
        name
    }

    fn remove(&mut self, session: &mut Session, ni: usize) {
        let n = &mut session.graphs[self.gi].nodes[ni];
        n.removed = true;
        for o in &n.outputs {
            if self.producer.get(&key(o)) == Some(&ni) {
                self.producer.remove(&key(o));
            }
        }
        if let Some(k) = self.names.as_mut().and_then(|m| m.get_mut(&n.name)) {
            *k = k.saturating_sub(1);
        }
        if let Some(k) = self.ops.get_mut(n.op.as_str()) {
            *k = k.saturating_sub(1);
        }
    }

    fn add(&mut self, session: &mut Session, node: SNode) -> usize {
        let g = &mut session.graphs[self.gi];
        let ni = g.nodes.len();
        self.register(ni, &node);
        g.nodes.push(node);
        ni
    }

    /// The live producer of `value` in this graph.
    fn producer_of(&self, session: &Session, value: &str) -> Option<usize> {
        self.producer.get(&key(value)).copied().filter(|&p| {
            let n = &session.graphs[self.gi].nodes[p];
            !n.removed && n.outputs.iter().any(|o| o == value)
        })
    }

    /// ORT's `GetOutputEdgesCount`: reading slots over all outputs.
    fn out_edges(&self, session: &Session, n: &SNode) -> usize {
        n.outputs
            .iter()
            .filter(|o| !o.is_empty())
            .map(|o| {
                self.readers(session, o)
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
        n.outputs.iter().any(|o| self.outputs.contains(o))
    }

    /// The only consumer of `n`'s outputs, when there is exactly one edge.
    fn single_consumer(&self, session: &Session, n: &SNode) -> Option<usize> {
        if self.out_edges(session, n) != 1 {
            return None;
        }
        n.outputs
            .iter()
            .find_map(|o| self.readers(session, o).next())
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

    // ------------------------------------------------------------------ MatMulScaleFusion

    /// `MatMul`/`FusedMatMul` with a leading or trailing multiplication (or division) by a
    /// constant scalar → `FusedMatMul` named `<matmul>/MatMulScaleFusion/`.
    fn matmul_scale(&mut self, session: &mut Session) {
        // Only MatMuls next to a scale can fuse: find those first (a few hash lookups per
        // scale instead of per MatMul), then visit them in the pass order.
        let g = &session.graphs[self.gi];
        let mut near: HashSet<usize> = HashSet::default();
        for (_, sn) in g.live_nodes() {
            if !(sn.op == "Mul" || sn.op == "Div") {
                continue;
            }
            let Some(at) = scale_input(session, self.gi, sn) else {
                continue;
            };
            near.extend(self.producer_of(session, &sn.inputs[1 - at]));
            for o in &sn.outputs {
                near.extend(self.readers(session, o));
            }
        }
        if near.is_empty() {
            return;
        }
        for ni in self.pass_order(session) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed || !matches!(n.ep, Some(Ep::Cuda | Ep::Cpu)) || !near.contains(&ni) {
                continue;
            }
            let is_matmul =
                (n.domain == "ai.onnx" && n.op == "MatMul" && matches!(n.since, Some(9 | 13)))
                    || (n.domain == MS && n.op == "FusedMatMul");
            if !is_matmul {
                continue;
            }
            let ep = n.ep;
            // Leading scales: (input slot, scale node, unscaled value).
            let mut leading: Vec<(usize, usize, String)> = Vec::new();
            for (slot, input) in n.inputs.iter().enumerate().take(2) {
                let Some(p) = self.producer_of(session, input) else {
                    continue;
                };
                let pn = &session.graphs[self.gi].nodes[p];
                if pn.ep != ep {
                    continue;
                }
                let Some(scale_at) = scale_input(session, self.gi, pn) else {
                    continue;
                };
                let other = &pn.inputs[1 - scale_at];
                if session
                    .shape_of(self.gi, other)
                    .is_none_or(|s| s.is_empty())
                {
                    continue;
                }
                leading.push((slot, p, other.clone()));
            }
            // A trailing scale: the single consumer.
            let mut trailing: Option<usize> = None;
            if !self.produces_graph_output(n)
                && let Some(c) = self.single_consumer(session, n)
            {
                let cn = &session.graphs[self.gi].nodes[c];
                if cn.ep == ep && scale_input(session, self.gi, cn).is_some() {
                    trailing = Some(c);
                }
            }
            let n = &session.graphs[self.gi].nodes[ni];
            if (leading.is_empty() && trailing.is_none()) || !self.matmul_types_ok(session, n) {
                continue;
            }
            let mut node = fused_node(n, "FusedMatMul");
            if n.op == "FusedMatMul" {
                node.attrs = n.attrs.clone();
            } else {
                node.attrs = vec![float_attr("alpha")];
            }
            for (slot, _, other) in &leading {
                node.inputs[*slot] = other.clone();
            }
            if let Some(c) = trailing {
                node.outputs = session.graphs[self.gi].nodes[c].outputs.clone();
            }
            node.name = self.node_name(session, &format!("{}/MatMulScaleFusion/", n.name));
            let mut fused = vec![ni];
            for (slot, p, _) in &leading {
                // The scale goes when the MatMul was its last reader.
                let value = &session.graphs[self.gi].nodes[ni].inputs[*slot];
                let pn = &session.graphs[self.gi].nodes[*p];
                let readers = self.readers(session, value).filter(|&k| k != ni).count();
                if readers == 0 && !self.produces_graph_output(pn) && !fused.contains(p) {
                    fused.push(*p);
                }
            }
            fused.extend(trailing);
            self.fuse(session, &fused, ni, node);
        }
    }

    fn matmul_types_ok(&self, session: &Session, n: &SNode) -> bool {
        let allowed: &[D] = match n.ep {
            Some(Ep::Cuda) => &[D::Float16, D::Float, D::Double, D::Bfloat16],
            Some(Ep::Cpu) => &[D::Float, D::Double],
            _ => return true,
        };
        n.existing_inputs().all(|(_, i)| {
            matches!(session.type_of(self.gi, i), Some(Type::Tensor(t)) if allowed.iter().any(|d| *d as i32 == *t))
        })
    }

    // ------------------------------------------------------------------ MatmulTransposeFusion

    /// A `Transpose` of the last two dims feeding `MatMul`/`FusedMatMul` → `FusedMatMul` with
    /// `transA`/`transB`, named `<matmul>/MatmulTransposeFusion/`.
    fn matmul_transpose(&mut self, session: &mut Session) {
        for ni in self.pass_order(session) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed || !matches!(n.ep, Some(Ep::Cuda | Ep::Cpu)) || n.inputs.len() < 2 {
                continue;
            }
            let is_matmul = (n.domain == "ai.onnx" && n.op == "MatMul")
                || (n.domain == MS && n.op == "FusedMatMul");
            if !is_matmul {
                continue;
            }
            if !self.matmul_types_ok(session, n) {
                continue;
            }
            let mut trans: [Option<usize>; 2] = [
                self.last_two_transpose(session, &n.inputs[0]),
                self.last_two_transpose(session, &n.inputs[1]),
            ];
            // `ReorderCastAndTranspose`: Transpose → Cast → MatMul becomes Cast → Transpose →
            // MatMul, so that the Transpose fuses.
            let base = format!("{}/MatmulTransposeFusion/", n.name);
            for (slot, t) in trans.iter_mut().enumerate() {
                if t.is_none() {
                    let value = session.graphs[self.gi].nodes[ni].inputs[slot].clone();
                    *t = self.reorder_cast_and_transpose(session, &value, &base);
                }
            }
            let n = &session.graphs[self.gi].nodes[ni];
            if trans == [None, None] {
                continue;
            }
            let mut node = fused_node(n, "FusedMatMul");
            let get = |name: &str| n.attr_i(name).unwrap_or(0);
            let mut attrs = if n.op == "FusedMatMul" {
                n.attrs.clone()
            } else {
                Vec::new()
            };
            for (slot, key) in [(0, "transA"), (1, "transB")] {
                let flip = trans[slot].is_some();
                let v = i64::from((get(key) != 0) ^ flip);
                attrs.retain(|a| a.name() != key);
                attrs.push(int_attr(key, v));
            }
            node.attrs = attrs;
            let mut fused = vec![ni];
            for (slot, t) in trans.iter().enumerate() {
                if let Some(p) = *t {
                    let value = n.inputs[slot].clone();
                    node.inputs[slot] = session.graphs[self.gi].nodes[p]
                        .inputs
                        .first()
                        .cloned()
                        .unwrap_or_default();
                    let readers = self.readers(session, &value).filter(|&k| k != ni).count();
                    if readers == 0 && !fused.contains(&p) {
                        fused.push(p);
                    }
                }
            }
            node.name = self.node_name(session, &base);
            self.fuse(session, &fused, ni, node);
        }
    }

    /// `GetTransposeNodeFromOutput`: the live `Transpose` producing `value` when it swaps the
    /// last two dims and produces no graph output (ORT does not compare its provider).
    fn last_two_transpose(&self, session: &Session, value: &str) -> Option<usize> {
        let p = self.producer_of(session, value)?;
        let pn = &session.graphs[self.gi].nodes[p];
        if pn.op != "Transpose" || pn.domain != "ai.onnx" || self.produces_graph_output(pn) {
            return None;
        }
        let perm = self.effective_perm(session, p)?;
        let r = perm.len();
        let last_two = r >= 2
            && perm[..r - 2]
                .iter()
                .enumerate()
                .all(|(i, &p)| p == i as i64)
            && perm[r - 2] == r as i64 - 1
            && perm[r - 1] == r as i64 - 2;
        last_two.then_some(p)
    }

    /// `ReorderCastAndTranspose`: when `value` comes from a `Cast` of a last-two-dims
    /// `Transpose`, a new Cast (named `base`, output `<cast output>/MatmulTransposeFusion/`)
    /// reads the Transpose's input and the Transpose, moved after it, produces the Cast's
    /// output; the old Cast goes, and the old Transpose too once nothing else reads it.
    /// Returns the new Transpose.
    fn reorder_cast_and_transpose(
        &mut self,
        session: &mut Session,
        value: &str,
        base: &str,
    ) -> Option<usize> {
        let c = self.producer_of(session, value)?;
        let cast = session.graphs[self.gi].nodes[c].clone();
        if cast.op != "Cast" || cast.domain != "ai.onnx" {
            return None;
        }
        let t = self.last_two_transpose(session, cast.inputs.first()?)?;
        let transpose = session.graphs[self.gi].nodes[t].clone();
        let t_in = transpose.inputs.first()?.clone();
        let t_out = transpose.outputs.first()?.clone();
        let cast_out = cast.outputs.first()?.clone();
        let new_value = self.arg_name(session, &format!("{cast_out}/MatmulTransposeFusion/"));
        let g = &mut session.graphs[self.gi];
        if let Some(ty) = g.types.get(&cast_out).cloned() {
            g.types.insert(new_value.clone(), ty);
        }
        if let Some(shape) = g.shapes.get(&t_in).cloned() {
            g.shapes.insert(new_value.clone(), shape);
        }
        let mut new_cast = cast.clone();
        new_cast.name = self.node_name(session, base);
        new_cast.inputs = vec![t_in];
        new_cast.outputs = vec![new_value.clone()];
        // The Transpose keeps its name: ORT's optimised graphs show no name generated for it
        // (the FusedMatMul's token follows the Cast's directly).
        let mut new_transpose = transpose.clone();
        new_transpose.inputs = vec![new_value];
        new_transpose.outputs = vec![cast_out];
        new_transpose.ep = cast.ep;
        let others = self.readers(session, &t_out).filter(|&k| k != c).count();
        self.remove(session, c);
        if others == 0 {
            self.remove(session, t);
        }
        let at = self.pos.get(c).copied().unwrap_or(usize::MAX);
        let nc = self.add(session, new_cast);
        let nt = self.add(session, new_transpose);
        self.pos.resize(nt + 1, usize::MAX);
        if at < self.order.len() {
            self.order[at] = nc;
            self.pos[nc] = at;
        }
        self.attach(nc, nt);
        Some(nt)
    }

    /// The permutation of Transpose `t` as ORT sees it at level 2: the level-1 transpose
    /// optimizer has already merged it with a Transpose above it (reached through
    /// single-input `Concat`s, each read only on this path), composing the two perms.
    fn effective_perm(&self, session: &Session, t: usize) -> Option<Vec<i64>> {
        let g = &session.graphs[self.gi];
        let mut value = g.nodes[t].inputs.first()?.clone();
        // Without `perm` a Transpose reverses the dims (`GetTransposePerms`), which needs the rank.
        let mut perm = match g.nodes[t].attr_ints("perm") {
            Some(p) => p.to_vec(),
            None => {
                let rank = session.shape_of(self.gi, &value)?.len() as i64;
                (0..rank).rev().collect()
            }
        };
        // A few steps suffice: the chains the optimiser merges are short.
        for _ in 0..4 {
            let Some(p) = self.producer_of(session, &value) else {
                break;
            };
            let pn = &g.nodes[p];
            if self.out_edges(session, pn) != 1
                || self.produces_graph_output(pn)
                || pn.domain != "ai.onnx"
            {
                break;
            }
            match pn.op.as_str() {
                "Concat" if pn.inputs.len() == 1 => {}
                "Transpose" => {
                    let Some(upper) = pn.attr_ints("perm") else {
                        break;
                    };
                    if upper.len() != perm.len() {
                        break;
                    }
                    let composed: Option<Vec<i64>> = perm
                        .iter()
                        .map(|&q| usize::try_from(q).ok().and_then(|q| upper.get(q).copied()))
                        .collect();
                    perm = composed?;
                }
                _ => break,
            }
            value = pn.inputs.first()?.clone();
        }
        Some(perm)
    }

    // ------------------------------------------------------------------ GeluFusion

    /// The live single consumer of `n` when it is `op` on the same provider.
    fn next(&self, session: &Session, n: &SNode, op: &str) -> Option<usize> {
        let c = self.single_consumer(session, n)?;
        let cn = &session.graphs[self.gi].nodes[c];
        (cn.domain == "ai.onnx" && cn.op == op && cn.ep == n.ep && !cn.removed).then_some(c)
    }

    fn gelu_types_ok(&self, session: &Session, n: &SNode) -> bool {
        n.existing_inputs().all(|(_, i)| {
            matches!(session.type_of(self.gi, i), Some(Type::Tensor(t))
                if [D::Float16, D::Float, D::Double].iter().any(|d| *d as i32 == *t))
        })
    }

    /// `x/√2` (or `x·(1/√2)`) → `Erf` → `+1` → `·x` and `·0.5` (either order) → `Gelu`
    /// (com.microsoft, named `Gelu`).
    fn gelu(&mut self, session: &mut Session) {
        let g = self.gi;
        for ni in self.pass_order(session) {
            let n = &session.graphs[g].nodes[ni];
            if n.removed
                || !matches!(n.ep, Some(Ep::Cuda | Ep::Cpu))
                || n.domain != "ai.onnx"
                || n.inputs.len() != 2
            {
                continue;
            }
            let scaled = match n.op.as_str() {
                "Div" => is_const(session, g, &n.inputs[1], std::f64::consts::SQRT_2),
                "Mul" => is_const(session, g, &n.inputs[1], std::f64::consts::FRAC_1_SQRT_2),
                _ => false,
            };
            if !scaled || self.out_edges(session, n) != 1 || !self.gelu_types_ok(session, n) {
                continue;
            }
            let x = n.inputs[0].clone();
            let Some(erf) = self.next(session, n, "Erf") else {
                continue;
            };
            let en = &session.graphs[g].nodes[erf];
            if self.out_edges(session, en) != 1 {
                continue;
            }
            let Some(add) = self.next(session, en, "Add") else {
                continue;
            };
            let an = &session.graphs[g].nodes[add];
            let erf_out = &en.outputs[0];
            if self.out_edges(session, an) != 1
                || !an
                    .inputs
                    .iter()
                    .any(|i| i != erf_out && is_const(session, g, i, 1.0))
            {
                continue;
            }
            let Some(mul) = self.single_consumer(session, an) else {
                continue;
            };
            let mn = &session.graphs[g].nodes[mul];
            if mn.domain != "ai.onnx"
                || mn.op != "Mul"
                || mn.ep != n.ep
                || mn.inputs.len() != 2
                || mn.outputs.is_empty()
            {
                continue;
            }
            let add_out = &an.outputs[0];
            let other = if &mn.inputs[0] == add_out {
                &mn.inputs[1]
            } else {
                &mn.inputs[0]
            };
            let half = |v: &str| is_const(session, g, v, 0.5);
            let mut fused = vec![ni, erf, add];
            let last = if *other == x {
                // (x · (1 + erf)) · 0.5
                let Some(m2) = self.next(session, mn, "Mul") else {
                    continue;
                };
                let m2n = &session.graphs[g].nodes[m2];
                let mul_out = &mn.outputs[0];
                if self.out_edges(session, mn) != 1
                    || !m2n.inputs.iter().any(|i| i != mul_out && half(i))
                {
                    continue;
                }
                fused.extend([mul, m2]);
                m2
            } else {
                // (x · 0.5) · (1 + erf)
                let Some(p) = self.producer_of(session, other) else {
                    continue;
                };
                let pn = &session.graphs[g].nodes[p];
                if pn.domain != "ai.onnx"
                    || pn.op != "Mul"
                    || pn.ep != n.ep
                    || self.out_edges(session, pn) != 1
                    || pn.inputs.len() != 2
                    || !((pn.inputs[0] == x && half(&pn.inputs[1]))
                        || (pn.inputs[1] == x && half(&pn.inputs[0])))
                {
                    continue;
                }
                fused.extend([p, mul]);
                mul
            };
            let ln = &session.graphs[g].nodes[last];
            let mut node = fused_node(ln, "Gelu");
            node.inputs = vec![x];
            node.outputs = ln.outputs.clone();
            node.name = self.node_name(session, "Gelu");
            self.fuse(session, &fused, ni, node);
        }
    }

    /// `Add(x, bias)` (1-D bias over the last dim) → `Gelu` → `BiasGelu`, named `BiasGelu`.
    fn bias_gelu(&mut self, session: &mut Session) {
        let g = self.gi;
        for ni in self.pass_order(session) {
            let n = &session.graphs[g].nodes[ni];
            if n.removed
                || !matches!(n.ep, Some(Ep::Cuda | Ep::Cpu))
                || n.domain != "ai.onnx"
                || n.op != "Add"
                || !matches!(n.since, Some(7 | 13 | 14))
                || n.inputs.len() != 2
                || self.produces_graph_output(n)
                || !self.gelu_types_ok(session, n)
            {
                continue;
            }
            let (Some(a), Some(b)) = (
                session.shape_of(g, &n.inputs[0]),
                session.shape_of(g, &n.inputs[1]),
            ) else {
                continue;
            };
            let bias_at = if b.len() == 1 {
                1
            } else if a.len() == 1 {
                0
            } else {
                continue;
            };
            let (x, bias) = if bias_at == 1 { (a, b) } else { (b, a) };
            match (x.last(), bias[0]) {
                (Some(Some(d)), Some(e)) if *d == e => {}
                _ => continue,
            }
            let Some(c) = self.single_consumer(session, n) else {
                continue;
            };
            let cn = &session.graphs[g].nodes[c];
            let is_gelu = (cn.domain == MS && cn.op == "Gelu")
                || (cn.domain == "ai.onnx"
                    && cn.op == "Gelu"
                    && cn.attr_s("approximate").is_none_or(|a| a == "none"));
            // A one-input FastGelu takes the bias as its second input (same fusion).
            let is_fast = cn.domain == MS && cn.op == "FastGelu" && cn.inputs.len() == 1;
            if !(is_gelu || is_fast) || cn.ep != n.ep {
                continue;
            }
            let op = if is_fast { "FastGelu" } else { "BiasGelu" };
            let mut node = fused_node(n, op);
            node.inputs = if bias_at == 1 {
                vec![n.inputs[0].clone(), n.inputs[1].clone()]
            } else {
                vec![n.inputs[1].clone(), n.inputs[0].clone()]
            };
            node.outputs = cn.outputs.clone();
            node.name = self.node_name(session, op);
            self.fuse(session, &[ni, c], ni, node);
        }
    }

    // ------------------------------------------------------------------ SkipLayerNormFusion

    /// `Add(Add(x, bias), skip)`, `Add(skip, Add(x, bias))` or `Add(x, skip)` feeding
    /// `LayerNormalization` → `SkipLayerNormalization`, named `SkipLayerNormalization`.
    fn skip_layer_norm(&mut self, session: &mut Session) {
        let g = self.gi;
        let is_add = |n: &SNode| {
            n.domain == "ai.onnx" && n.op == "Add" && matches!(n.since, Some(7 | 13 | 14))
        };
        for ni in self.pass_order(session) {
            let ln = &session.graphs[g].nodes[ni];
            if ln.op == "SkipLayerNormalization" && ln.domain == MS && self.release >= (1, 25) {
                self.skip_layer_norm_bias(session, ni);
                continue;
            }
            if ln.removed
                || !matches!(ln.ep, Some(Ep::Cuda | Ep::Cpu))
                || ln.op != "LayerNormalization"
                || !(ln.domain == "ai.onnx" || ln.domain == MS)
                || ln.inputs.len() < 2
                || !self.gelu_types_ok(session, ln)
            {
                continue;
            }
            let Some(a1) = self.producer_of(session, &ln.inputs[0]) else {
                continue;
            };
            let add1 = &session.graphs[g].nodes[a1];
            // The Add next to the LayerNorm: 3-D inputs, read only by it.
            if !is_add(add1)
                || add1.ep != ln.ep
                || add1.inputs.len() != 2
                || self.out_edges(session, add1) != 1
                || self.produces_graph_output(add1)
                || !self.gelu_types_ok(session, add1)
                || !self.same_dims_3d(session, &add1.inputs[0], &add1.inputs[1])
            {
                continue;
            }
            // A bias Add above it (3-D input, 1-D bias of the last dim).
            let mut bias: Option<(usize, usize)> = None;
            for slot in 0..2 {
                let Some(a2) = self.producer_of(session, &add1.inputs[slot]) else {
                    continue;
                };
                let add2 = &session.graphs[g].nodes[a2];
                if !is_add(add2)
                    || add2.ep != ln.ep
                    || add2.inputs.len() != 2
                    || self.out_edges(session, add2) != 1
                    || self.produces_graph_output(add2)
                    || !self.gelu_types_ok(session, add2)
                {
                    continue;
                }
                let (Some(x), Some(b)) = (
                    session.shape_of(g, &add2.inputs[0]),
                    session.shape_of(g, &add2.inputs[1]),
                ) else {
                    continue;
                };
                if x.len() == 3 && b.len() == 1 && x[2].unwrap_or(0) == b[0].unwrap_or(0) {
                    bias = Some((slot, a2));
                    break;
                }
            }
            let mut node = fused_node(ln, "SkipLayerNormalization");
            let gamma = ln.inputs[1].clone();
            let beta = ln.inputs.get(2).cloned().unwrap_or_default();
            let mut fused = vec![a1];
            node.inputs = match bias {
                Some((slot, a2)) => {
                    let add2 = &session.graphs[g].nodes[a2];
                    fused.push(a2);
                    vec![
                        add2.inputs[0].clone(),
                        add1.inputs[1 - slot].clone(),
                        gamma,
                        beta,
                        add2.inputs[1].clone(),
                    ]
                }
                None => vec![add1.inputs[0].clone(), add1.inputs[1].clone(), gamma, beta],
            };
            while node.inputs.last().is_some_and(String::is_empty) {
                node.inputs.pop();
            }
            node.outputs = vec![ln.outputs.first().cloned().unwrap_or_default()];
            fused.push(ni);
            node.name = self.node_name(session, "SkipLayerNormalization");
            self.fuse(session, &fused, ni, node);
        }
    }

    /// From ORT 1.25: a `SkipLayerNormalization` without bias whose input or skip comes from
    /// `Add(x, bias)` or `Add(bias, x)` (1-D constant bias of the last dim) takes the bias in;
    /// the new node gets a newly generated `SkipLayerNormalization` name. Up to 1.24 only a
    /// bias in the Add's second input is fused, in the first step. (Measured with the oracle
    /// on 1.24.4–1.31.1: a bias-first Add is absorbed from 1.25.1 on, in a second step, so
    /// every such fused node carries a `_token_` name.)
    fn skip_layer_norm_bias(&mut self, session: &mut Session, ni: usize) {
        let g = &session.graphs[self.gi];
        let sln = &g.nodes[ni];
        if sln.removed
            || !matches!(sln.ep, Some(Ep::Cuda | Ep::Cpu))
            || !(sln.inputs.len() == 3 || sln.inputs.len() == 4)
        {
            return;
        }
        let mut found: Option<(usize, usize, usize)> = None;
        for slot in 0..2 {
            let Some(a) = self.producer_of(session, &sln.inputs[slot]) else {
                continue;
            };
            let an = &g.nodes[a];
            if !is_op(an, "Add", &[7, 13, 14])
                || an.ep != sln.ep
                || an.inputs.len() != 2
                || !self.edges_are(session, an, 1)
                || !self.gelu_types_ok(session, an)
            {
                continue;
            }
            let bias_at = (0..2).find(|&k| {
                let b = &an.inputs[k];
                let x = &an.inputs[1 - k];
                session
                    .initializer(self.gi, b)
                    .is_some_and(|i| !i.overridable && i.dims.len() == 1)
                    && matches!((session.shape_of(self.gi, x), session.shape_of(self.gi, b)),
                        (Some(xs), Some(bs)) if xs.len() == 3 && bs.len() == 1
                            && xs[2].is_some() && xs[2] == bs[0])
            });
            if let Some(k) = bias_at {
                found = Some((slot, a, k));
                break;
            }
        }
        let Some((slot, a, k)) = found else {
            return;
        };
        let an = &g.nodes[a];
        let mut node = fused_node(sln, "SkipLayerNormalization");
        let mut inputs = sln.inputs.clone();
        inputs.resize(4, String::new());
        inputs[slot] = an.inputs[1 - k].clone();
        inputs.push(an.inputs[k].clone());
        node.inputs = inputs;
        node.attrs = sln.attrs.clone();
        node.name = self.node_name(session, "SkipLayerNormalization");
        self.fuse(session, &[a, ni], ni, node);
    }

    /// Element `i` of a shape tensor built as `Concat(.., Unsqueeze(Gather(Shape(y), k)), ..)`:
    /// the symbol of `y`'s dim `k`.
    fn shape_part_symbol(
        &self,
        session: &Session,
        shape: &str,
        i: usize,
        depth: usize,
    ) -> Option<String> {
        let g = &session.graphs[self.gi];
        let c = &g.nodes[self.producer_of(session, shape)?];
        if c.op != "Concat" {
            return None;
        }
        // Every part before `i` must be one element long.
        let mut at = 0;
        for part in &c.inputs {
            let len = session
                .shape_of(self.gi, part)
                .and_then(|s| s.first().copied().flatten())?;
            if at == i && len == 1 {
                let u = &g.nodes[self.producer_of(session, part)?];
                if u.op != "Unsqueeze" {
                    return None;
                }
                let gn = &g.nodes[self.producer_of(session, u.inputs.first()?)?];
                if gn.op != "Gather" || gn.attr_i("axis").unwrap_or(0) != 0 {
                    return None;
                }
                let (k, _) = scalar_i64(session, self.gi, gn.inputs.get(1)?)?;
                let sn = &g.nodes[self.producer_of(session, gn.inputs.first()?)?];
                if sn.op != "Shape" || sn.attr_i("start").unwrap_or(0) != 0 {
                    return None;
                }
                let y = sn.inputs.first()?;
                let k = usize::try_from(k).ok()?;
                return match session.shape_of(self.gi, y).and_then(|s| s.get(k).copied()) {
                    Some(Some(_)) => None,
                    _ => self.dim_symbol(session, y, k, depth + 1),
                };
            }
            at += usize::try_from(len).ok()?;
            if at > i {
                return None;
            }
        }
        None
    }

    /// ORT's check on the Add next to the LayerNorm: both inputs 3-D with equal `dim_param`s
    /// (concrete dims have none, so they always compare equal). A dim we know neither
    /// value nor declared symbol of counts as different: ORT's own inference gives such dims
    /// a symbol or none, and which one we cannot tell.
    fn same_dims_3d(&self, session: &Session, a: &str, b: &str) -> bool {
        let (Some(sa), Some(sb)) = (session.shape_of(self.gi, a), session.shape_of(self.gi, b))
        else {
            return false;
        };
        if sa.len() != 3 || sb.len() != 3 {
            return false;
        }
        (0..3).all(|i| match (sa[i], sb[i]) {
            (Some(_), Some(_)) => true,
            _ => matches!((self.dim_symbol(session, a, i, 0), self.dim_symbol(session, b, i, 0)),
                (Some(x), Some(y)) if x == y),
        })
    }

    /// The symbolic dim (`dim_param`) ONNX shape inference gives dim `i` of `v`: declared on
    /// the graph's inputs, outputs and value_info, and carried through the ops transformer
    /// layers are made of (element-wise ops with broadcasting, MatMul, Transpose, Reshape's
    /// copied 0 dims, normalisations, the fused nodes), as ORT's inference carries it.
    fn dim_symbol(&self, session: &Session, v: &str, i: usize, depth: usize) -> Option<String> {
        if let Some(d) = self.params.get(v) {
            return d.get(i).cloned().flatten();
        }
        if depth > 200 {
            return None;
        }
        if let Some(hit) = self.symbols.borrow().get(&(key(v), i)) {
            return hit.clone();
        }
        let g = &session.graphs[self.gi];
        let p = self.producer_of(session, v)?;
        let n = &g.nodes[p];
        let rank = |x: &str| session.shape_of(self.gi, x).map(Vec::len);
        let out_rank = rank(v)?;
        let from = |x: &str, j: usize| -> Option<String> {
            match session.shape_of(self.gi, x).and_then(|s| s.get(j).copied()) {
                Some(Some(_)) => None,
                _ => self.dim_symbol(session, x, j, depth + 1),
            }
        };
        let sym = match n.op.as_str() {
            "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Where" | "Equal" | "Less" | "Greater"
            | "And" | "Or" | "BiasGelu" | "Max" | "Min" => {
                // Broadcast: every input with this dim either 1 or the same symbol.
                let mut out: Option<String> = None;
                for x in n.inputs.iter().filter(|x| !x.is_empty()) {
                    let r = rank(x)?;
                    if i + r < out_rank {
                        continue;
                    }
                    let j = i + r - out_rank;
                    match session.shape_of(self.gi, x).and_then(|s| s.get(j).copied()) {
                        Some(Some(1)) => continue,
                        Some(Some(_)) => return None,
                        _ => {}
                    }
                    let s = self.dim_symbol(session, x, j, depth + 1)?;
                    if out.as_ref().is_some_and(|o| *o != s) {
                        return None;
                    }
                    out = Some(s);
                }
                out
            }
            "MatMul" | "FusedMatMul" => {
                let (a, b) = (n.inputs.first()?, n.inputs.get(1)?);
                let (ra, rb) = (rank(a)?, rank(b)?);
                if i + 1 == out_rank {
                    from(b, rb.checked_sub(1)?)
                } else if i + 2 == out_rank {
                    from(a, ra.checked_sub(2)?)
                } else if i + ra >= out_rank {
                    from(a, i + ra - out_rank)
                } else {
                    None
                }
            }
            "Transpose" => {
                let perm = n.attr_ints("perm")?;
                let j = usize::try_from(*perm.get(i)?).ok()?;
                from(n.inputs.first()?, j)
            }
            "Reshape" => {
                let shape = session.initializer(self.gi, n.inputs.get(1)?)?;
                let values = crate::session::int_values(&shape.tensor)?;
                if values.get(i) == Some(&0) && n.attr_i("allowzero").unwrap_or(0) == 0 {
                    from(n.inputs.first()?, i)
                } else {
                    None
                }
            }
            "Concat" => {
                // Off the concat axis every input has the dim; take the first symbol.
                let axis = n.attr_i("axis")?;
                let axis = usize::try_from(if axis < 0 {
                    axis + out_rank as i64
                } else {
                    axis
                })
                .ok()?;
                if i == axis {
                    None
                } else {
                    n.inputs
                        .iter()
                        .filter(|x| !x.is_empty())
                        .find_map(|x| from(x, i))
                }
            }
            "Gather" => {
                // data[:axis] ++ indices.shape ++ data[axis + 1:]
                let (data, indices) = (n.inputs.first()?, n.inputs.get(1)?);
                let rd = rank(data)? as i64;
                let axis = n.attr_i("axis").unwrap_or(0);
                let axis = usize::try_from(if axis < 0 { axis + rd } else { axis }).ok()?;
                let ri = rank(indices)?;
                if i < axis {
                    from(data, i)
                } else if i < axis + ri {
                    from(indices, i - axis)
                } else {
                    from(data, i + 1 - ri)
                }
            }
            "Unsqueeze" => {
                // Axes from the input (opset 13+) or the attribute; the other dims shift.
                let axes: Vec<i64> = match n.inputs.get(1).filter(|a| !a.is_empty()) {
                    Some(a) => {
                        crate::session::int_values(&session.initializer(self.gi, a)?.tensor)?
                    }
                    None => n.attr_ints("axes")?.to_vec(),
                };
                let rank = out_rank as i64;
                let mut axes: Vec<usize> = axes
                    .iter()
                    .map(|&a| usize::try_from(if a < 0 { a + rank } else { a }).ok())
                    .collect::<Option<_>>()?;
                axes.sort_unstable();
                if axes.contains(&i) {
                    None
                } else {
                    from(
                        n.inputs.first()?,
                        i - axes.iter().filter(|&&a| a < i).count(),
                    )
                }
            }
            "Conv" | "MaxPool" | "AveragePool" if i == 0 => from(n.inputs.first()?, 0),
            "Expand" => {
                // The shape's part `i` as `Unsqueeze(Gather(Shape(y), k))` (ONNX's data
                // propagation), or the input's own dim when the shape part is 1.
                let part = self.shape_part_symbol(session, n.inputs.get(1)?, i, depth);
                part.or_else(|| {
                    let x = n.inputs.first()?;
                    let r = rank(x)?;
                    (i + r >= out_rank)
                        .then(|| from(x, i + r - out_rank))
                        .flatten()
                })
            }
            "Cast"
            | "Relu"
            | "Gelu"
            | "FastGelu"
            | "QuickGelu"
            | "Erf"
            | "Tanh"
            | "Sigmoid"
            | "Sqrt"
            | "Neg"
            | "Softmax"
            | "LayerNormalization"
            | "SkipLayerNormalization"
            | "SimplifiedLayerNormalization"
            | "SkipSimplifiedLayerNormalization"
            | "Identity"
            | "Dropout"
            | "BiasSoftmax" => from(n.inputs.first()?, i),
            _ => None,
        };
        self.symbols.borrow_mut().insert((key(v), i), sym.clone());
        sym
    }

    // ------------------------------------------------------------------ FastGeluFusion

    /// The other input of binary `n` when one input is `v`.
    fn other_input<'a>(n: &'a SNode, v: &str) -> Option<&'a str> {
        match n.inputs.as_slice() {
            [a, b] if a == v => Some(b),
            [a, b] if b == v => Some(a),
            _ => None,
        }
    }

    /// A live same-provider ai.onnx `op` node producing `v`, read only once.
    fn single_use_producer(
        &self,
        session: &Session,
        v: &str,
        op: &str,
        ep: Option<Ep>,
    ) -> Option<usize> {
        let p = self.producer_of(session, v)?;
        let pn = &session.graphs[self.gi].nodes[p];
        (pn.domain == "ai.onnx"
            && pn.op == op
            && pn.ep == ep
            && self.out_edges(session, pn) == 1
            && !self.produces_graph_output(pn))
        .then_some(p)
    }

    /// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` → `FastGelu`, named `GPT2Gelu`.
    fn fast_gelu(&mut self, session: &mut Session) {
        const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
        let g = self.gi;
        for ni in self.pass_order(session) {
            let t = &session.graphs[g].nodes[ni];
            if t.removed
                || !matches!(t.ep, Some(Ep::Cuda | Ep::Cpu))
                || t.domain != "ai.onnx"
                || t.op != "Tanh"
                || self.out_edges(session, t) != 1
                || self.produces_graph_output(t)
                || !self.gelu_types_ok(session, t)
            {
                continue;
            }
            let ep = t.ep;
            let Some(m3) = t
                .inputs
                .first()
                .and_then(|i| self.single_use_producer(session, i, "Mul", ep))
            else {
                continue;
            };
            let m3n = &session.graphs[g].nodes[m3];
            let Some(a1_out) = m3n
                .inputs
                .iter()
                .position(|i| is_const(session, g, i, SQRT_2_OVER_PI))
                .and_then(|k| m3n.inputs.get(1 - k.min(1)).cloned())
            else {
                continue;
            };
            let Some(a1) = self.single_use_producer(session, &a1_out, "Add", ep) else {
                continue;
            };
            // x + 0.044715·x³: find x as the Add input the cube is made of.
            let a1n = &session.graphs[g].nodes[a1];
            let mut matched: Option<(String, Vec<usize>)> = None;
            for k in 0..a1n.inputs.len().min(2) {
                let x = &a1n.inputs[k];
                let Some(cube_term) = a1n.inputs.get(1 - k) else {
                    continue;
                };
                let Some(m2) = self.single_use_producer(session, cube_term, "Mul", ep) else {
                    continue;
                };
                let m2n = &session.graphs[g].nodes[m2];
                let Some(c) = m2n
                    .inputs
                    .iter()
                    .position(|i| is_const(session, g, i, 0.044_715))
                else {
                    continue;
                };
                let Some(cube) = m2n.inputs.get(1 - c.min(1)) else {
                    continue;
                };
                if let Some(cubes) = self.cube_of(session, cube, x, ep) {
                    let mut nodes = vec![m2];
                    nodes.extend(cubes);
                    matched = Some((x.clone(), nodes));
                    break;
                }
            }
            let Some((x, cube_nodes)) = matched else {
                continue;
            };
            // 1 + tanh
            let Some(a2) = self.next(session, t, "Add") else {
                continue;
            };
            let a2n = &session.graphs[g].nodes[a2];
            let t_out = &t.outputs[0];
            if !Self::other_input(a2n, t_out).is_some_and(|o| is_const(session, g, o, 1.0))
                || self.out_edges(session, a2n) != 1
                || self.produces_graph_output(a2n)
            {
                continue;
            }
            let Some(m4) = self.next(session, a2n, "Mul") else {
                continue;
            };
            let m4n = &session.graphs[g].nodes[m4];
            let Some(other) = Self::other_input(m4n, &a2n.outputs[0]) else {
                continue;
            };
            let half = |v: &str| is_const(session, g, v, 0.5);
            let mut tail = vec![m4];
            let last = if other == x {
                // (x · (1 + tanh)) · 0.5
                let Some(m5) = self.next(session, m4n, "Mul") else {
                    continue;
                };
                let m5n = &session.graphs[g].nodes[m5];
                if self.out_edges(session, m4n) != 1
                    || self.produces_graph_output(m4n)
                    || !Self::other_input(m5n, &m4n.outputs[0]).is_some_and(half)
                {
                    continue;
                }
                tail.push(m5);
                m5
            } else {
                // (0.5 · x) · (1 + tanh)
                let Some(m1) = self.single_use_producer(session, other, "Mul", ep) else {
                    continue;
                };
                if !Self::other_input(&session.graphs[g].nodes[m1], &x).is_some_and(half) {
                    continue;
                }
                tail.push(m1);
                m4
            };
            let mut fused = cube_nodes;
            fused.extend([a1, m3, ni, a2]);
            fused.extend(tail);
            let ln = &session.graphs[g].nodes[last];
            let mut node = fused_node(ln, "FastGelu");
            node.inputs = vec![x];
            node.outputs = ln.outputs.clone();
            // ORT names a new output value first (`gelu_output`), advancing the shared counter.
            self.arg_name(session, "gelu_output");
            node.name = self.node_name(session, "GPT2Gelu");
            self.fuse(session, &fused, ni, node);
        }
    }

    /// The nodes computing `x³` into `v`: `Pow(x, 3)` or `x·x·x` as two Muls.
    fn cube_of(&self, session: &Session, v: &str, x: &str, ep: Option<Ep>) -> Option<Vec<usize>> {
        let g = self.gi;
        if let Some(p) = self.single_use_producer(session, v, "Pow", ep) {
            let pn = &session.graphs[g].nodes[p];
            return (pn.inputs.first().is_some_and(|i| i == x)
                && pn
                    .inputs
                    .get(1)
                    .is_some_and(|e| is_const(session, g, e, 3.0)))
            .then(|| vec![p]);
        }
        let m = self.single_use_producer(session, v, "Mul", ep)?;
        let sq = Self::other_input(&session.graphs[g].nodes[m], x)?;
        let s = self.single_use_producer(session, sq, "Mul", ep)?;
        let sn = &session.graphs[g].nodes[s];
        (sn.inputs.len() == 2 && sn.inputs.iter().all(|i| i == x)).then(|| vec![m, s])
    }

    // ------------------------------------------------------------------ QuickGeluFusion

    /// `x * Sigmoid(x)` or `x * Sigmoid(alpha * x)` → `QuickGelu`, named
    /// `<final Mul>/QuickGeluFusion/`.
    fn quick_gelu(&mut self, session: &mut Session) {
        let ok_ep = |n: &SNode| matches!(n.ep, Some(Ep::Cuda | Ep::Cpu));
        let is = |n: &SNode, op: &str, versions: &[i64]| {
            n.domain == "ai.onnx" && n.op == op && n.since.is_some_and(|v| versions.contains(&v))
        };
        for ni in self.pass_order(session) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed || !ok_ep(n) {
                continue;
            }
            let mut fused: Vec<usize> = Vec::new();
            let mut input: Option<String> = None;
            let mut sigmoid = ni;
            if is(n, "Mul", &[7, 13, 14])
                && self.out_edges(session, n) == 1
                && !self.produces_graph_output(n)
                && n.inputs.len() == 2
            {
                for (i, x) in n.inputs.iter().enumerate() {
                    if is_scalar(session, self.gi, x)
                        && session.initializer(self.gi, x).is_some_and(|init| {
                            !init.overridable
                                && [D::Float, D::Double, D::Float16]
                                    .iter()
                                    .any(|d| *d as i32 == init.elem)
                        })
                    {
                        input = Some(n.inputs[1 - i].clone());
                        fused.push(ni);
                        match self.single_consumer(session, n) {
                            Some(c) => sigmoid = c,
                            None => input = None,
                        }
                        break;
                    }
                }
            }
            if !fused.is_empty() && input.is_none() {
                continue;
            }
            let s = &session.graphs[self.gi].nodes[sigmoid];
            if !is(s, "Sigmoid", &[6, 13])
                || !ok_ep(s)
                || self.out_edges(session, s) != 1
                || self.produces_graph_output(s)
            {
                continue;
            }
            fused.push(sigmoid);
            let input = input.unwrap_or_else(|| s.inputs.first().cloned().unwrap_or_default());
            let Some(m) = self.single_consumer(session, s) else {
                continue;
            };
            let mn = &session.graphs[self.gi].nodes[m];
            let Some(out) = s.outputs.first() else {
                continue;
            };
            let Some(at) = mn.inputs.iter().position(|i| i == out) else {
                continue;
            };
            if !is(mn, "Mul", &[7, 13, 14])
                || !ok_ep(mn)
                || mn.inputs.len() != 2
                || mn.inputs[(at + 1) % 2] != input
            {
                continue;
            }
            fused.push(m);
            let mut node = fused_node(mn, "QuickGelu");
            node.inputs = vec![input];
            node.outputs = vec![mn.outputs.first().cloned().unwrap_or_default()];
            node.attrs = vec![float_attr("alpha")];
            node.name = self.node_name(session, &format!("{}/QuickGeluFusion/", mn.name));
            self.fuse(session, &fused, ni, node);
        }
    }

    // ------------------------------------------------------------------ BiasSoftmaxFusion

    /// `Softmax(Add(input, bias))` on CUDA → `BiasSoftmax` (named `BiasSoftmax`), when the
    /// bias broadcasts over leading dims only and the Softmax reduces the trailing dims.
    fn bias_softmax(&mut self, session: &mut Session) {
        for ni in self.pass_order(session) {
            let n = &session.graphs[self.gi].nodes[ni];
            if n.removed
                || n.ep != Some(Ep::Cuda)
                || n.domain != "ai.onnx"
                || n.op != "Add"
                || !matches!(n.since, Some(7 | 13 | 14))
                || n.inputs.len() != 2
            {
                continue;
            }
            let Some(sm) = self.single_consumer(session, n) else {
                continue;
            };
            let s = &session.graphs[self.gi].nodes[sm];
            if s.domain != "ai.onnx"
                || s.op != "Softmax"
                || s.ep != Some(Ep::Cuda)
                || !matches!(s.since, Some(1 | 11 | 13))
                || self.produces_graph_output(n)
                || !n.inputs.iter().all(|i| {
                    matches!(session.type_of(self.gi, i), Some(Type::Tensor(t))
                        if [D::Float, D::Float16, D::Double].iter().any(|d| *d as i32 == *t))
                })
            {
                continue;
            }
            let (Some(a), Some(b)) = (
                session.shape_of(self.gi, &n.inputs[0]),
                session.shape_of(self.gi, &n.inputs[1]),
            ) else {
                continue;
            };
            if a.is_empty() || b.is_empty() {
                continue;
            }
            let rank = a.len().max(b.len()) as i64;
            let since = s.since.unwrap_or(13);
            let mut axis = s.attr_i("axis").unwrap_or(if since >= 13 { -1 } else { 1 });
            if axis < 0 {
                axis += rank;
            }
            // Softmax-13 normalises one axis only; the fused kernel covers the last one.
            if axis < 0 || axis >= rank || (since >= 13 && axis != rank - 1) {
                continue;
            }
            // Dims without a value compare equal when ONNX inference gives both the same
            // `dim_param`, as ORT compares them.
            let (va, vb) = (n.inputs[0].clone(), n.inputs[1].clone());
            let sym_eq = |i: usize, j: usize| {
                matches!(
                    (self.dim_symbol(session, &va, i, 0), self.dim_symbol(session, &vb, j, 0)),
                    (Some(x), Some(y)) if x == y
                )
            };
            if !bias_softmax_shapes_ok(a, b, axis as usize, &sym_eq) {
                continue;
            }
            let mut node = fused_node(s, "BiasSoftmax");
            node.inputs = n.inputs.clone();
            node.outputs = vec![s.outputs.first().cloned().unwrap_or_default()];
            node.attrs = vec![int_attr("axis", axis), int_attr("is_inner_broadcast", 0)];
            node.name = self.node_name(session, "BiasSoftmax");
            self.fuse(session, &[ni, sm], ni, node);
        }
    }
}

/// ORT's `TrySelectInputAndBiasWithAlignment` for softmax axis `k`: the dims from `k` on
/// match on both Add inputs; the mask either is 1 on the dims between the first mismatch and
/// `k` (inner broadcast, equal ranks) or on its leading dims (outer broadcast). Dims without a
/// value are equal when `sym_eq(i, j)` says dim `i` of `a` and dim `j` of `b` carry the same
/// symbol.
fn bias_softmax_shapes_ok(
    a: &[Option<i64>],
    b: &[Option<i64>],
    k: usize,
    sym_eq: &dyn Fn(usize, usize) -> bool,
) -> bool {
    let (n1, n2) = (a.len(), b.len());
    let single = n1.max(n2).saturating_sub(k);
    if single > n1 || single > n2 {
        return false;
    }
    let same_at = |i: usize, j: usize| match (a[i], b[j]) {
        (Some(x), Some(y)) => x == y,
        (None, None) => sym_eq(i, j),
        _ => false,
    };
    if (1..=single).any(|i| !same_at(n1 - i, n2 - i)) {
        return false;
    }
    let one = |d: Option<i64>| d == Some(1);
    if n1 == n2 {
        let mut pos = 0;
        while pos < k && same_at(pos, pos) {
            pos += 1;
        }
        let mask = if pos == k || !one(a[pos]) { b } else { a };
        if (pos..k).all(|i| one(mask[i])) {
            return true;
        }
    }
    // Outer broadcast, from the dim before the softmax dims backwards.
    let (mut p1, mut p2) = (n1 as i64 - single as i64 - 1, n2 as i64 - single as i64 - 1);
    while p1 >= 0 && p2 >= 0 && same_at(p1 as usize, p2 as usize) {
        p1 -= 1;
        p2 -= 1;
    }
    let lhs_input = p1 > p2 || (p1 == p2 && (p1 < 0 || !one(a[p1 as usize])));
    let (mask, from) = if lhs_input { (b, p2) } else { (a, p1) };
    (0..=from).all(|i| one(mask[i as usize]))
}

/// Which input of a `Mul`/`Div` is a constant scalar scale (`Div` only by its divisor).
fn scale_input(session: &Session, gi: usize, n: &SNode) -> Option<usize> {
    if n.domain != "ai.onnx"
        || !matches!(n.since, Some(7 | 13 | 14))
        || n.inputs.len() != 2
        || n.outputs.len() != 1
    {
        return None;
    }
    let candidates: &[usize] = match n.op.as_str() {
        "Div" => &[1],
        "Mul" => &[0, 1],
        _ => return None,
    };
    candidates.iter().copied().find(|&i| {
        let other_rank = session.shape_of(gi, &n.inputs[1 - i]).map_or(0, Vec::len);
        session.initializer(gi, &n.inputs[i]).is_some_and(|init| {
            !init.overridable
                && init.elements() == Some(1)
                && init.dims.len() <= other_rank
                && [
                    D::Uint32,
                    D::Uint64,
                    D::Int32,
                    D::Int64,
                    D::Float16,
                    D::Float,
                    D::Double,
                    D::Bfloat16,
                ]
                .iter()
                .any(|d| *d as i32 == init.elem)
        })
    })
}

/// `1.25.1` → (1, 25); anything unreadable counts as the newest.
fn release_of(ort: &str) -> (u32, u32) {
    let mut parts = ort.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b),
        _ => (u32::MAX, 0),
    }
}

/// The index key of a value name.
fn key(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    name.hash(&mut h);
    h.finish()
}

/// The `dim_param`s declared for the main graph's values (inputs, outputs, value_info).
fn declared_params(model: &Model) -> HashMap<String, Vec<Option<String>>> {
    use crate::model::proto::{tensor_shape_proto::dimension::Value as Dv, type_proto::Value};
    let mut out = HashMap::default();
    let Some(g) = model.proto.graph.as_ref() else {
        return out;
    };
    for vi in g.input.iter().chain(&g.output).chain(&g.value_info) {
        let Some(Value::TensorType(tt)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
            continue;
        };
        let Some(shape) = tt.shape.as_ref() else {
            continue;
        };
        let dims = shape
            .dim
            .iter()
            .map(|d| match &d.value {
                Some(Dv::DimParam(p)) if !p.is_empty() => Some(p.clone()),
                _ => None,
            })
            .collect();
        out.insert(vi.name().to_string(), dims);
    }
    out
}

/// A constant scalar initializer equal to `expected` (ORT's `IsInitializerWithExpectedValue`:
/// a float16 value is compared with `expected` rounded to float16).
fn is_const(session: &Session, gi: usize, name: &str, expected: f64) -> bool {
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
fn f32_to_half(x: f32) -> u16 {
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
fn is_scalar(session: &Session, gi: usize, name: &str) -> bool {
    session
        .shape_of(gi, name)
        .is_some_and(|s| s.is_empty() || (s.len() == 1 && s[0] == Some(1)))
}

fn fused_node(like: &SNode, op: &str) -> SNode {
    SNode {
        name: String::new(),
        op: op.to_string(),
        domain: MS.to_string(),
        since: Some(1),
        inputs: like.inputs.clone(),
        outputs: like.outputs.clone(),
        attrs: Vec::new(),
        subgraphs: Vec::new(),
        implicit_inputs: Vec::new(),
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

// ---------------------------------------------------------------------- graph-walking helpers

/// The cast versions ORT's norm fusions accept.
const CAST_SINCE: &[i64] = &[6, 9, 13, 19, 21, 23, 24, 25];

/// An ai.onnx `op` node whose since-version is one of `since`.
fn is_op(n: &SNode, op: &str, since: &[i64]) -> bool {
    n.domain == "ai.onnx" && n.op == op && n.since.is_some_and(|v| since.contains(&v))
}

impl Fuser {
    /// The distinct live nodes reading `n`'s outputs, in node-index order (ORT walks a node's
    /// output edges in that order).
    fn children(&self, session: &Session, n: &SNode) -> Vec<usize> {
        let mut out: Vec<usize> = n
            .outputs
            .iter()
            .filter(|o| !o.is_empty())
            .flat_map(|o| self.readers(session, o))
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
            .filter_map(|i| self.producer_of(session, i))
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
                    && matches!(session.type_of(self.gi, i), Some(Type::Tensor(t))
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
            .and_then(|a| session.initializer(self.gi, a))
            .filter(|i| !i.overridable)
            .and_then(|i| crate::session::int_values(&i.tensor))
            .unwrap_or_default()
    }

    fn is_fp16(&self, session: &Session, v: &str) -> bool {
        matches!(session.type_of(self.gi, v), Some(Type::Tensor(t)) if *t == D::Float16 as i32)
    }

    fn rank_of(&self, session: &Session, v: &str) -> Option<usize> {
        session.shape_of(self.gi, v).map(Vec::len)
    }

    // ------------------------------------------------------------------ LayerNormFusion

    /// `X → ReduceMean → Sub → Pow → ReduceMean → Add(eps) → Sqrt → Div → Mul(scale) →
    /// Add(bias)` (with the duplicated-Sub form of old PyTorch exports and the Cast nodes of
    /// mixed-precision exports) → `LayerNormalization`, named `<Mul>/LayerNormFusion/`.
    ///
    /// Follows `onnxruntime/core/optimizer/layer_norm_fusion.cc` (`LayerNormFusion::ApplyImpl`,
    /// 1.23–1.31): compatible providers CPU and CUDA; every node on the ReduceMean's provider;
    /// both ReduceMeans over the same single trailing axis; 1-D scale and bias of one length;
    /// no fp16 fusion on the CPU. From opset 17 ORT runs the same fusion at level 1 already
    /// (the nodes have no provider yet); the result is the same node on the same provider.
    fn layer_norm(&mut self, session: &mut Session) {
        for ni in self.pass_order(session) {
            let Some((fused, node)) = self.match_layer_norm(session, ni) else {
                continue;
            };
            self.fuse(session, &fused, ni, node);
        }
    }

    fn match_layer_norm(&mut self, session: &Session, ni: usize) -> Option<(Vec<usize>, SNode)> {
        let g = &session.graphs[self.gi];
        let rm = &g.nodes[ni];
        if rm.removed
            || !is_op(rm, "ReduceMean", &[1, 11, 13, 18])
            || !matches!(rm.ep, Some(Ep::Cuda | Ep::Cpu))
            || !matches!(self.out_edges(session, rm), 1 | 2)
            || self.produces_graph_output(rm)
            || !self.norm_types_ok(session, rm, Some(1))
        {
            return None;
        }
        let ep = rm.ep;
        let same = |n: &SNode| n.ep == ep;
        let mut fused = vec![ni];
        // Every child is a Sub (one, or two in old PyTorch exports).
        let subs = self.children(session, rm);
        if subs.is_empty() || subs.len() > 2 || subs.iter().any(|&c| g.nodes[c].op != "Sub") {
            return None;
        }
        let sub = &g.nodes[subs[0]];
        if !is_op(sub, "Sub", &[7, 13, 14]) || !same(sub) || !self.norm_types_ok(session, sub, None)
        {
            return None;
        }
        fused.push(subs[0]);
        let x = rm.inputs.first()?;
        let mean = rm.outputs.first()?;
        let other_input = |n: &SNode| n.inputs.iter().find(|i| *i != mean).cloned();
        if other_input(sub).as_ref() != Some(x) {
            return None;
        }
        let dup = subs.get(1).map(|&d| (d, &g.nodes[d]));
        if let Some((_, d)) = dup
            && other_input(d).as_ref() != Some(x)
        {
            return None;
        }
        // A Cast feeding the ReduceMean, read only by the pattern.
        let mut leading_cast = None;
        if let Some(c) = self.producer_of(session, x) {
            let cn = &g.nodes[c];
            if is_op(cn, "Cast", CAST_SINCE)
                && same(cn)
                && self.edges_are(session, cn, subs.len() + 1)
            {
                leading_cast = Some(c);
                fused.insert(0, c);
            }
        }
        // A Cast after the Sub (mixed precision).
        let mut cast1 = None;
        if dup.is_none() && self.out_edges(session, sub) == 1 {
            let c = self.children(session, sub).first().copied()?;
            let cn = &g.nodes[c];
            if is_op(cn, "Cast", CAST_SINCE)
                && same(cn)
                && self.edges_are(session, cn, 2)
                && self.norm_types_ok(session, cn, None)
            {
                cast1 = Some(c);
                fused.push(c);
            }
        }
        let sub_edges = if dup.is_none() && cast1.is_none() {
            2
        } else {
            1
        };
        if !self.edges_are(session, sub, sub_edges) {
            return None;
        }
        let from = cast1.map_or(sub, |c| &g.nodes[c]);
        let mut div = self.first_child(session, from, "Div");
        if let Some((d, dn)) = dup {
            if !is_op(dn, "Sub", &[7, 13, 14])
                || !same(dn)
                || !self.edges_are(session, sub, 1)
                || !self.norm_types_ok(session, dn, None)
            {
                return None;
            }
            fused.push(d);
            if div.is_none() {
                div = self.first_child(session, dn, "Div");
            }
        }
        let div = div?;
        let dn = &g.nodes[div];
        if !self.norm_link(session, dn, "Div", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(div);
        let sqrt = self.first_parent(session, dn, "Sqrt")?;
        let sq = &g.nodes[sqrt];
        if !self.norm_link(session, sq, "Sqrt", &[6, 13], ep) {
            return None;
        }
        fused.push(sqrt);
        let add2 = *self.parents(session, sq).first()?;
        let an = &g.nodes[add2];
        if !self.norm_link(session, an, "Add", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(add2);
        let rm2 = self.first_parent(session, an, "ReduceMean")?;
        let rm2n = &g.nodes[rm2];
        if !is_op(rm2n, "ReduceMean", &[1, 11, 13, 18])
            || !same(rm2n)
            || !self.edges_are(session, rm2n, 1)
            || !self.norm_types_ok(session, rm2n, Some(1))
        {
            return None;
        }
        fused.push(rm2);
        let pow = *self.parents(session, rm2n).first()?;
        let pn = &g.nodes[pow];
        if !self.norm_link(session, pn, "Pow", &[7, 12, 13, 15], ep) {
            return None;
        }
        fused.push(pow);
        match self.first_parent(session, pn, "Cast") {
            Some(c) if Some(c) != cast1 => {
                let cn = &g.nodes[c];
                if !is_op(cn, "Cast", CAST_SINCE) || !same(cn) || !self.edges_are(session, cn, 1) {
                    return None;
                }
                fused.push(c);
            }
            Some(_) => {}
            None => {
                let s2 = self.first_parent(session, pn, "Sub")?;
                if s2 != subs[0] && Some(s2) != dup.map(|d| d.0) {
                    return None;
                }
            }
        }
        // div → mul, or div → Cast → mul
        let mut next = *self.children(session, dn).first()?;
        let nn = &g.nodes[next];
        if is_op(nn, "Cast", CAST_SINCE) && self.edges_are(session, nn, 1) {
            fused.push(next);
            next = *self.children(session, nn).first()?;
        }
        let mul = &g.nodes[next];
        if !self.norm_link(session, mul, "Mul", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(next);
        let last = *self.children(session, mul).first()?;
        let ln = &g.nodes[last];
        if !is_op(ln, "Add", &[7, 13, 14]) || !same(ln) || !self.norm_types_ok(session, ln, None) {
            return None;
        }
        fused.push(last);
        let axes = self.norm_axes(session, rm)?;
        if self.norm_axes(session, rm2n)? != axes || axes.len() != 1 {
            return None;
        }
        let pick = |n: &SNode| {
            n.inputs
                .iter()
                .rfind(|i| self.rank_of(session, i) == Some(1))
                .cloned()
        };
        let scale = pick(mul)?;
        let bias = pick(ln)?;
        let dim0 = |v: &str| session.shape_of(self.gi, v).and_then(|s| s[0]).unwrap_or(0);
        if dim0(&scale) != dim0(&bias) {
            return None;
        }
        let x_in = match leading_cast {
            Some(c) => g.nodes[c].inputs.first()?.clone(),
            None => x.clone(),
        };
        if ep == Some(Ep::Cpu) && self.is_fp16(session, &x_in) {
            return None;
        }
        let mut node = fused_node(ln, "LayerNormalization");
        node.domain = "ai.onnx".to_string();
        node.since = Some(if self.opset >= 17 { 17 } else { 1 });
        node.inputs = vec![x_in, scale, bias];
        node.outputs = vec![ln.outputs.first()?.clone()];
        node.attrs = vec![int_attr("axis", axes[0]), float_attr("epsilon")];
        let base = format!("{}/LayerNormFusion/", mul.name);
        node.name = self.node_name(session, &base);
        Some((fused, node))
    }

    /// ORT's `CheckAxesOnReduceMean`: the axes, made negative, are consecutive and end at -1.
    fn norm_axes(&self, session: &Session, rm: &SNode) -> Option<Vec<i64>> {
        let mut axes = self.reduce_axes(session, rm);
        if axes.is_empty() {
            return None;
        }
        axes.sort_unstable();
        if axes.last().is_some_and(|&a| a > 0) {
            let rank = self.rank_of(session, rm.inputs.first()?)? as i64;
            for a in &mut axes {
                if *a >= 0 {
                    *a -= rank;
                }
            }
            axes.sort_unstable();
        }
        let consecutive = axes.windows(2).all(|w| w[1] == w[0] + 1);
        (consecutive && axes.last() == Some(&-1)).then_some(axes)
    }

    // ------------------------------------------------------------------ SimplifiedLayerNormFusion

    /// RMSNorm: `X → Pow → ReduceMean → Add(eps) → Sqrt → Div(X, ·) → Mul(scale)`, with an
    /// fp32 Cast before the Pow and an fp16 Cast before the Mul on CUDA →
    /// `SimplifiedLayerNormalization`, named `<Mul>/SimplifiedLayerNormFusion/`.
    ///
    /// Follows `SimplifiedLayerNormFusion::ApplyImpl` in
    /// `onnxruntime/core/optimizer/layer_norm_fusion.cc` (1.23–1.31): compatible providers CPU
    /// and CUDA; the Casts only on CUDA (a Cast between Div and Mul stops the fusion on the
    /// CPU); single trailing reduce axis; a 1-D scale; no fp16 fusion on the CPU. The
    /// `Reciprocal → Mul` form is not fused.
    fn simplified_layer_norm(&mut self, session: &mut Session) {
        for ni in self.pass_order(session) {
            let Some((fused, node)) = self.match_simplified(session, ni) else {
                continue;
            };
            self.fuse(session, &fused, ni, node);
        }
    }

    fn match_simplified(&mut self, session: &Session, ni: usize) -> Option<(Vec<usize>, SNode)> {
        let g = &session.graphs[self.gi];
        let pn = &g.nodes[ni];
        if pn.removed
            || !is_op(pn, "Pow", &[7, 12, 13, 15])
            || !matches!(pn.ep, Some(Ep::Cuda | Ep::Cpu))
            || !self.edges_are(session, pn, 1)
            || !self.norm_types_ok(session, pn, None)
        {
            return None;
        }
        let ep = pn.ep;
        let same = |n: &SNode| n.ep == ep;
        let mut fused = vec![ni];
        let rm = self.first_child(session, pn, "ReduceMean")?;
        let rmn = &g.nodes[rm];
        if !is_op(rmn, "ReduceMean", &[1, 11, 13, 18])
            || !same(rmn)
            || !self.edges_are(session, rmn, 1)
            || !self.norm_types_ok(session, rmn, Some(1))
        {
            return None;
        }
        fused.push(rm);
        let add = self.first_child(session, rmn, "Add")?;
        let an = &g.nodes[add];
        if !self.norm_link(session, an, "Add", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(add);
        let sqrt = self.first_child(session, an, "Sqrt")?;
        let sq = &g.nodes[sqrt];
        if !self.norm_link(session, sq, "Sqrt", &[6, 13], ep) {
            return None;
        }
        fused.push(sqrt);
        let div = self.first_child(session, sq, "Div")?;
        let dn = &g.nodes[div];
        if !self.norm_link(session, dn, "Div", &[7, 13, 14], ep) {
            return None;
        }
        fused.push(div);
        let x = pn.inputs.first()?;
        if dn.inputs.first() != Some(x) {
            return None;
        }
        let gpu = ep == Some(Ep::Cuda);
        let mut leading_cast = None;
        if gpu && let Some(c) = self.producer_of(session, x) {
            let cn = &g.nodes[c];
            if is_op(cn, "Cast", CAST_SINCE) && same(cn) && self.edges_are(session, cn, 2) {
                leading_cast = Some(c);
                fused.insert(0, c);
            }
        }
        let mut next = *self.children(session, dn).first()?;
        let nn = &g.nodes[next];
        if is_op(nn, "Cast", CAST_SINCE) && self.edges_are(session, nn, 1) {
            if !gpu {
                return None;
            }
            fused.push(next);
            next = *self.children(session, nn).first()?;
        }
        let mul = &g.nodes[next];
        if !is_op(mul, "Mul", &[7, 13, 14]) || !same(mul) || !self.norm_types_ok(session, mul, None)
        {
            return None;
        }
        fused.push(next);
        let axes = self.norm_axes(session, rmn)?;
        if axes.len() != 1 {
            return None;
        }
        let scale = mul
            .inputs
            .iter()
            .rfind(|i| self.rank_of(session, i) == Some(1))?
            .clone();
        let x_in = match leading_cast {
            Some(c) => g.nodes[c].inputs.first()?.clone(),
            None => x.clone(),
        };
        if ep == Some(Ep::Cpu) && self.is_fp16(session, &x_in) {
            return None;
        }
        let mut node = fused_node(mul, "SimplifiedLayerNormalization");
        node.domain = "ai.onnx".to_string();
        node.since = Some(1);
        node.inputs = vec![x_in, scale];
        node.outputs = vec![mul.outputs.first()?.clone()];
        node.attrs = vec![int_attr("axis", axes[0]), float_attr("epsilon")];
        let base = format!("{}/SimplifiedLayerNormFusion/", mul.name);
        node.name = self.node_name(session, &base);
        Some((fused, node))
    }
}

/// A scalar (`[]` or `[1]`) int64 constant initializer: its value and rank.
fn scalar_i64(session: &Session, gi: usize, v: &str) -> Option<(i64, usize)> {
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
    fn add_initializer(&self, session: &mut Session, name: &str, values: &[i64]) {
        let g = &mut session.graphs[self.gi];
        g.initializers
            .insert(name.to_string(), i64_init(name, values));
        g.types
            .insert(name.to_string(), Type::Tensor(D::Int64 as i32));
        g.shapes
            .insert(name.to_string(), vec![Some(values.len() as i64)]);
    }

    // ------------------------------------------------------------------ GatherSliceToSplitFusion

    /// Gathers (scalar constant indices) and Slices (constant start/end, step 1) of one value
    /// along one axis that together cover the whole axis → one `Split`, named
    /// `<last of them>/GatherSliceToSplitFusion`, plus a `Squeeze` (named `Squeeze`) for each
    /// Gather with 0-D indices.
    ///
    /// Follows `GatherSliceToSplitFusion::ApplyImpl` in `onnxruntime/core/optimizer/gather_fusion.cc`
    /// (1.23–1.31): ai.onnx opset 13 or later; Gather-13 and Slice-13 only, on CPU or CUDA;
    /// the candidates are graph inputs and initializers read more than once and the single
    /// output of every non-`Shape` node with more than one output edge; consumers that are
    /// neither Gather nor Slice do not stop it. The new nodes take the first fused node's
    /// provider. Per Squeeze ORT generates a value name `split_output` and an initializer
    /// name `squeeze_axes`, then one `splits`, which advance the name counter as it does.
    fn gather_slice_to_split(&mut self, session: &mut Session) {
        let g = &session.graphs[self.gi];
        // Only values read by two or more Gathers/Slices can fuse: count those first, so the
        // pass costs a hash lookup per node.
        let mut sliced: HashMap<u64, usize> = HashMap::default();
        for (_, n) in g.live_nodes() {
            if (n.op == "Gather" || n.op == "Slice")
                && let Some(x) = n.inputs.first()
            {
                *sliced.entry(key(x)).or_default() += 1;
            }
        }
        let many = |v: &str| sliced.get(&key(v)).is_some_and(|&k| k >= 2);
        if !sliced.values().any(|&k| k >= 2) {
            return;
        }
        let mut candidates: Vec<String> = Vec::new();
        for i in &g.inputs {
            if many(i) {
                candidates.push(i.clone());
            }
        }
        let mut inits: Vec<&String> = g.initializers.keys().filter(|i| many(i)).collect();
        inits.sort();
        candidates.extend(inits.into_iter().cloned());
        for ni in self.pass_order(session) {
            let n = &g.nodes[ni];
            if n.op == "Shape" || n.outputs.len() != 1 || !many(&n.outputs[0]) {
                continue;
            }
            if self.out_edges(session, n) > 1 {
                candidates.push(n.outputs[0].clone());
            }
        }
        for v in candidates {
            if let Some(plan) = self.match_split(session, &v) {
                self.apply_split(session, &v, plan);
            }
        }
    }

    fn match_split(&self, session: &Session, v: &str) -> Option<SplitPlan> {
        let g = &session.graphs[self.gi];
        let shape = session.shape_of(self.gi, v)?;
        let rank = shape.len() as i64;
        let mut consumers: Vec<usize> = self
            .readers(session, v)
            .filter(|&c| {
                let n = &g.nodes[c];
                n.inputs.first().is_some_and(|i| i == v) && (n.op == "Gather" || n.op == "Slice")
            })
            .collect();
        consumers.sort_unstable();
        consumers.dedup();
        if consumers.len() < 2 {
            return None;
        }
        let norm = |a: i64| if a < 0 { a + rank } else { a };
        let axis_of = |n: &SNode| -> Option<i64> {
            match n.op.as_str() {
                "Gather" => Some(norm(n.attr_i("axis").unwrap_or(0))),
                _ => Some(norm(scalar_i64(session, self.gi, n.inputs.get(3)?)?.0)),
            }
        };
        let axis = axis_of(&g.nodes[consumers[0]])?;
        let dim = (*shape.get(usize::try_from(axis).ok()?)?)?;
        let size = usize::try_from(dim)
            .ok()
            .filter(|&d| d > 0 && d <= 1 << 20)?;
        let mut consumed = vec![false; size];
        // (start, node, split length, needs a Squeeze)
        let mut parts: Vec<(i64, usize, i64, bool)> = Vec::new();
        for &c in &consumers {
            let n = &g.nodes[c];
            if !matches!(n.ep, Some(Ep::Cuda | Ep::Cpu))
                || n.domain != "ai.onnx"
                || n.since != Some(13)
            {
                return None;
            }
            if axis_of(n)? != axis {
                return None;
            }
            if n.op == "Gather" {
                let (mut i, r) = scalar_i64(session, self.gi, n.inputs.get(1)?)?;
                if i < 0 {
                    i += dim;
                }
                let k = usize::try_from(i).ok().filter(|&k| k < size)?;
                if consumed[k] {
                    return None;
                }
                consumed[k] = true;
                parts.push((i, c, 1, r == 0));
            } else {
                let (mut s, _) = scalar_i64(session, self.gi, n.inputs.get(1)?)?;
                let (mut e, _) = scalar_i64(session, self.gi, n.inputs.get(2)?)?;
                if s < 0 {
                    s += dim;
                }
                if e < 0 {
                    e += dim;
                }
                let (s, e) = (s.clamp(0, dim), e.clamp(0, dim));
                if s >= e {
                    return None;
                }
                if let Some(step) = n.inputs.get(4).filter(|x| !x.is_empty())
                    && scalar_i64(session, self.gi, step)?.0 != 1
                {
                    return None;
                }
                for k in s..e {
                    let k = k as usize;
                    if consumed[k] {
                        return None;
                    }
                    consumed[k] = true;
                }
                parts.push((s, c, e - s, false));
            }
        }
        if consumed.iter().any(|c| !c) {
            return None;
        }
        Some(SplitPlan {
            axis,
            consumers,
            parts,
        })
    }

    fn apply_split(&mut self, session: &mut Session, v: &str, mut plan: SplitPlan) {
        plan.parts.sort_by_key(|p| p.0);
        let g = &session.graphs[self.gi];
        let first = plan.consumers[0];
        let ep = g.nodes[first].ep;
        let value_type = session.type_of(self.gi, v).cloned();
        let shape = session.shape_of(self.gi, v).cloned().unwrap_or_default();
        let mut squeezes: Vec<SNode> = Vec::new();
        let mut split_outputs: Vec<String> = Vec::new();
        let mut splits: Vec<i64> = Vec::new();
        let mut new_values: Vec<(String, Vec<Option<i64>>)> = Vec::new();
        let mut new_inits: Vec<(String, i64)> = Vec::new();
        for &(_, c, len, squeeze) in &plan.parts {
            let out = g.nodes[c].outputs.first().cloned().unwrap_or_default();
            splits.push(len);
            if !squeeze {
                split_outputs.push(out);
                continue;
            }
            let arg = self.arg_name(session, "split_output");
            let axes = self.node_name(session, "squeeze_axes");
            let name = self.node_name(session, "Squeeze");
            let mut dims = shape.clone();
            if let Some(d) = dims.get_mut(plan.axis as usize) {
                *d = Some(len);
            }
            new_values.push((arg.clone(), dims));
            new_inits.push((axes.clone(), plan.axis));
            squeezes.push(SNode {
                name,
                op: "Squeeze".to_string(),
                domain: "ai.onnx".to_string(),
                since: Some(13),
                inputs: vec![arg.clone(), axes],
                outputs: vec![out],
                attrs: Vec::new(),
                subgraphs: Vec::new(),
                implicit_inputs: Vec::new(),
                ep,
                kernel: None,
                origin: g.nodes[c].origin,
                removed: false,
            });
            split_outputs.push(arg);
        }
        let splits_name = self.node_name(session, "splits");
        let last = plan.consumers.last().copied().unwrap_or(first);
        let base = format!("{}/GatherSliceToSplitFusion", g.nodes[last].name);
        let name = self.node_name(session, &base);
        let mut split = fused_node(&g.nodes[first], "Split");
        split.domain = "ai.onnx".to_string();
        split.since = Some(if self.opset >= 18 { 18 } else { 13 });
        split.name = name;
        split.inputs = vec![v.to_string(), splits_name.clone()];
        split.outputs = split_outputs;
        split.attrs = vec![int_attr("axis", plan.axis)];
        for (name, dims) in new_values {
            let gm = &mut session.graphs[self.gi];
            if let Some(t) = &value_type {
                gm.types.insert(name.clone(), t.clone());
            }
            gm.shapes.insert(name, dims);
        }
        for (name, axis) in new_inits {
            self.add_initializer(session, &name, &[axis]);
        }
        self.add_initializer(session, &splits_name, &splits);
        let new = self.fuse(session, &plan.consumers, first, split);
        for sq in squeezes {
            let k = self.add(session, sq);
            self.pos.resize(k + 1, usize::MAX);
            self.attach(new, k);
        }
    }

    // ------------------------------------------------------------------ GatherToSliceFusion

    /// `Range → Gather(indices = the range)` → three `Unsqueeze` nodes (named `Unsqueeze_0`,
    /// `Unsqueeze_1`, `Unsqueeze_2`, on the Range's provider, reading the Range's inputs) and
    /// a `Slice` named `Slice` on the Gather's provider.
    ///
    /// Follows `GatherToSliceFusion::ApplyImpl` in `onnxruntime/core/optimizer/gather_fusion.cc`
    /// (1.23–1.31): Range-11 with one output edge, Gather-1/11/13, both on CPU or CUDA. The
    /// Unsqueezes can put a CUDA node on values the CPU computed, adding copies.
    fn gather_to_slice(&mut self, session: &mut Session) {
        for ni in self.pass_order(session) {
            let g = &session.graphs[self.gi];
            let rn = &g.nodes[ni];
            if rn.removed
                || !is_op(rn, "Range", &[11])
                || !matches!(rn.ep, Some(Ep::Cuda | Ep::Cpu))
                || self.out_edges(session, rn) != 1
                || rn.inputs.len() != 3
                || rn.outputs.first().is_none_or(String::is_empty)
            {
                continue;
            }
            let Some(gather) = self.children(session, rn).first().copied() else {
                continue;
            };
            let gn = &g.nodes[gather];
            if !is_op(gn, "Gather", &[1, 11, 13])
                || !matches!(gn.ep, Some(Ep::Cuda | Ep::Cpu))
                || gn.inputs.get(1) != rn.outputs.first()
            {
                continue;
            }
            let range_ep = rn.ep;
            let range_inputs = rn.inputs.clone();
            let elem = session.type_of(self.gi, &rn.outputs[0]).cloned();
            let axis = gn.attr_i("axis").unwrap_or(0);
            let origin = gn.origin;
            let mut outs = Vec::new();
            for i in 0..3 {
                outs.push(self.arg_name(session, &format!("unsqueeze_output_{i}")));
            }
            let axes =
                (self.opset >= 13).then(|| self.node_name(session, "UnsqueezeAxesInitializer"));
            let mut unsqueezes = Vec::new();
            for (i, input) in range_inputs.iter().enumerate() {
                let name = self.node_name(session, &format!("Unsqueeze_{i}"));
                let mut inputs = vec![input.clone()];
                inputs.extend(axes.clone());
                unsqueezes.push(SNode {
                    name,
                    op: "Unsqueeze".to_string(),
                    domain: "ai.onnx".to_string(),
                    since: Some(if self.opset >= 13 { 13 } else { 11 }),
                    inputs,
                    outputs: vec![outs[i].clone()],
                    attrs: if self.opset >= 13 {
                        Vec::new()
                    } else {
                        vec![AttributeProto {
                            name: Some("axes".to_string()),
                            r#type: Some(AttributeType::Ints as i32),
                            ints: vec![0],
                            ..Default::default()
                        }]
                    },
                    subgraphs: Vec::new(),
                    implicit_inputs: Vec::new(),
                    ep: range_ep,
                    kernel: None,
                    origin,
                    removed: false,
                });
            }
            let slice_axes = self.node_name(session, "SliceAxesInitializer");
            let slice_name = self.node_name(session, "Slice");
            for o in &outs {
                let gm = &mut session.graphs[self.gi];
                if let Some(t) = &elem {
                    gm.types.insert(o.clone(), t.clone());
                }
                gm.shapes.insert(o.clone(), vec![Some(1)]);
            }
            if let Some(a) = &axes {
                self.add_initializer(session, a, &[0]);
            }
            self.add_initializer(session, &slice_axes, &[axis]);
            let gn = &session.graphs[self.gi].nodes[gather];
            let mut slice = fused_node(gn, "Slice");
            slice.domain = "ai.onnx".to_string();
            slice.since = Some(13);
            slice.name = slice_name;
            slice.inputs = vec![
                gn.inputs[0].clone(),
                outs[0].clone(),
                outs[1].clone(),
                slice_axes,
                outs[2].clone(),
            ];
            slice.outputs = gn.outputs.clone();
            self.fuse(session, &[ni, gather], gather, slice);
            // The Unsqueezes come before the Slice in later passes: put them after the
            // Range's place, which the Slice does not take.
            for u in unsqueezes {
                let k = self.add(session, u);
                self.pos.resize(k + 1, usize::MAX);
                self.attach(ni, k);
            }
        }
    }
}

/// A planned `GatherSliceToSplitFusion`.
struct SplitPlan {
    axis: i64,
    /// The fused Gathers and Slices, in node order.
    consumers: Vec<usize>,
    /// (start, node, length along the axis, needs a Squeeze).
    parts: Vec<(i64, usize, i64, bool)>,
}
