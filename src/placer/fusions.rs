//! ORT's level-2/3 fusions, which run after partitioning (§7.3): a transformer only fuses nodes
//! whose provider is in its compatible set, and the fused node inherits that provider; nothing
//! is re-partitioned. They rename and merge nodes, so the placement lists ORT's fused names.
//!
//! Simulated, in ORT's order, the list repeated while anything changes: `GeluFusion`,
//! `MatmulTransposeFusion`, `BiasGeluFusion`, `SkipLayerNormFusion`, `FastGeluFusion`, `QuickGeluFusion`,
//! `BiasSoftmaxFusion` (CUDA only) and `MatMulScaleFusion`. Every graph is visited, subgraphs included; each pass
//! walks one topological order with an incrementally kept producer/consumer index, so the cost
//! is linear in the graph.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::infer::{self, Type};
use crate::model::DataType as D;
use crate::model::Model;
use crate::model::proto::{AttributeProto, attribute_proto::AttributeType};
use crate::placer::OptLevel;
use crate::placer::ir::{SNode, Session};
use crate::tables::Ep;

const MS: &str = "com.microsoft";

/// The ops some fusion starts from or needs.
const TRIGGERS: &[&str] = &[
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
pub fn run(session: &mut Session, model: &Model, level: OptLevel) {
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
        let layer_norms = g.live_nodes().any(|(_, n)| n.op == "LayerNormalization");
        let mut f = Fuser::new(session, gi);
        if gi == 0 && layer_norms {
            f.params = declared_params(model);
        }
        // ORT's transformer manager repeats the level's list while anything changed.
        for _ in 0..MAX_STEPS {
            let before = f.fused;
            if f.has("Erf") {
                f.gelu(session);
            }
            if f.has("Transpose") && (f.has("MatMul") || f.has("FusedMatMul")) {
                f.matmul_transpose(session);
            }
            if f.has("Gelu") {
                f.bias_gelu(session);
            }
            if f.has("LayerNormalization") {
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
    counter: usize,
    /// Fusions made so far.
    fused: usize,
    /// Live nodes per op type: a pass whose ops are absent is skipped.
    ops: HashMap<String, usize>,
    /// Declared symbolic dims (`dim_param`) per value of the main graph.
    params: HashMap<String, Vec<Option<String>>>,
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
            counter: g.name_counter,
            fused: 0,
            ops: HashMap::default(),
            params: HashMap::default(),
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
        self.order
            .iter()
            .copied()
            .filter(|&ni| !g.nodes[ni].removed)
            .collect()
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
        if p < self.order.len() {
            self.order[p] = new;
        } else {
            self.order.push(new);
        }
        self.pos.resize(new + 1, usize::MAX);
        self.pos[new] = if p < self.order.len() {
            p
        } else {
            self.order.len() - 1
        };
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
            let mut trans: [Option<usize>; 2] = [None, None];
            for (slot, t) in trans.iter_mut().enumerate() {
                let Some(p) = self.producer_of(session, &n.inputs[slot]) else {
                    continue;
                };
                let pn = &session.graphs[self.gi].nodes[p];
                // ORT does not compare the Transpose's provider.
                if pn.op != "Transpose" || pn.domain != "ai.onnx" || self.produces_graph_output(pn)
                {
                    continue;
                }
                let Some(perm) = self.effective_perm(session, p) else {
                    continue;
                };
                let r = perm.len();
                let last_two = r >= 2
                    && perm[..r - 2]
                        .iter()
                        .enumerate()
                        .all(|(i, &p)| p == i as i64)
                    && perm[r - 2] == r as i64 - 1
                    && perm[r - 1] == r as i64 - 2;
                if last_two {
                    *t = Some(p);
                }
            }
            if trans == [None, None] || !self.matmul_types_ok(session, n) {
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
            node.name = self.node_name(session, &format!("{}/MatmulTransposeFusion/", n.name));
            self.fuse(session, &fused, ni, node);
        }
    }

    /// The permutation of Transpose `t` as ORT sees it at level 2: the level-1 transpose
    /// optimizer has already merged it with a Transpose above it (reached through
    /// single-input `Concat`s, each read only on this path), composing the two perms.
    fn effective_perm(&self, session: &Session, t: usize) -> Option<Vec<i64>> {
        let g = &session.graphs[self.gi];
        let mut perm = g.nodes[t].attr_ints("perm")?.to_vec();
        let mut value = g.nodes[t].inputs.first()?.clone();
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
            if !is_gelu || cn.ep != n.ep {
                continue;
            }
            let mut node = fused_node(n, "BiasGelu");
            node.outputs = cn.outputs.clone();
            node.name = self.node_name(session, "BiasGelu");
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
        let param = |v: &str, i: usize| -> Option<&str> { self.params.get(v)?.get(i)?.as_deref() };
        (0..3).all(|i| match (sa[i], sb[i]) {
            (Some(_), Some(_)) => true,
            _ => matches!((param(a, i), param(b, i)), (Some(x), Some(y)) if x == y),
        })
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
            if !bias_softmax_shapes_ok(a, b, axis as usize) {
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
/// `k` (inner broadcast, equal ranks) or on its leading dims (outer broadcast). Unknown dims
/// (symbolic ones included) never compare equal here.
fn bias_softmax_shapes_ok(a: &[Option<i64>], b: &[Option<i64>], k: usize) -> bool {
    let (n1, n2) = (a.len(), b.len());
    let single = n1.max(n2).saturating_sub(k);
    if single > n1 || single > n2 {
        return false;
    }
    let same = |x: Option<i64>, y: Option<i64>| matches!((x, y), (Some(x), Some(y)) if x == y);
    if (1..=single).any(|i| !same(a[n1 - i], b[n2 - i])) {
        return false;
    }
    let one = |d: Option<i64>| d == Some(1);
    if n1 == n2 {
        let mut pos = 0;
        while pos < k && same(a[pos], b[pos]) {
            pos += 1;
        }
        let mask = if pos == k || !one(a[pos]) { b } else { a };
        if (pos..k).all(|i| one(mask[i])) {
            return true;
        }
    }
    // Outer broadcast, from the dim before the softmax dims backwards.
    let (mut p1, mut p2) = (n1 as i64 - single as i64 - 1, n2 as i64 - single as i64 - 1);
    while p1 >= 0 && p2 >= 0 && same(a[p1 as usize], b[p2 as usize]) {
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

/// A constant scalar initializer equal to `expected` (ORT's `CheckConstantInput`).
fn is_const(session: &Session, gi: usize, name: &str, expected: f64) -> bool {
    session
        .initializer(gi, name)
        .filter(|i| !i.overridable && i.elements() == Some(1))
        .and_then(|i| scalar_value(&i.tensor))
        .is_some_and(|v| (v - expected).abs() <= 1e-5 * expected.abs().max(1.0))
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
