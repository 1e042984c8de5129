//! The graph optimisations that run before partitioning and move the CPU/CUDA boundary
//! (ORT's level-1 transformers), simulated per level, in ORT's order: the rewrite rules
//! (`EliminateIdentity`, `EliminateSlice`, `EliminateDropout`, `ExpandElimination`,
//! `CastElimination`, `PreShapeNodeElimination`, `NoopElimination`, `DivMulFusion`,
//! `FuseReluClip`, `GemmSumFusion`, `GemmTransposeFusion`, `NotWhereFusion`, `PadFusion`, `ConvAddFusion`, `ConvMulFusion`, `ConvBNFusion`),
//! `ConstantSharing`, common subexpression elimination, `ConstantFolding` (incl. `Shape` over
//! static shapes and `If` with a constant condition), `MatMulAddFusion`, `ReshapeFusion` (the
//! Shape/Gather/Concat subgraph and `FuseContiguousReshapes`) and the `TransposeOptimizer`,
//! repeated until nothing changes (at most 10 steps). What the released builds do where the
//! public source is silent or differs was measured with the oracle; `tools/probes/l1.py`
//! records those probes as the `probes_l1` fixtures.
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use prost::Message;

use crate::infer::eval::{self, NodeView, Tensor};
use crate::infer::shapes::{self, Values};
use crate::infer::{self, Type};
use crate::model::DataType as D;
use crate::placer::ir::{Init, NameGen, SNode, Session};
use crate::placer::{OptLevel, transpose};
use crate::tables::{Ep, KernelTable};

type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// The largest initializer `ConstantSharing` merges (oracle: 8 elements are, 9 are not).
const SHARING_MAX_ELEMENTS: u64 = 8;

/// ORT's `max_num_graph_transformation_steps`.
const MAX_STEPS: usize = 10;

/// Applies the transformers of `level` to the session graph.
pub fn run(session: &mut Session, table: &KernelTable, level: OptLevel) {
    if level == OptLevel::Disable || session.graphs.is_empty() {
        return;
    }
    let mut opt = Optimizer {
        table,
        values: Values::default(),
        versions: infer::domain_versions(session, table),
        indices: HashMap::default(),
        reinfer: HashSet::default(),
        shareable: session.graphs[0].initializers.keys().cloned().collect(),
    };
    shapes::infer_graph(session, 0, &mut opt.values);
    for _ in 0..MAX_STEPS {
        let mut changed = false;
        for pass in [
            Pass::Rules,
            Pass::Sharing,
            Pass::Cse,
            Pass::Fold,
            Pass::MatMulAdd,
            Pass::ReshapeFusion,
        ] {
            changed |= opt.pass(session, 0, pass);
        }
        changed |= opt.transpose(session, 0);
        if !changed {
            break;
        }
    }
    session.compute_implicit_inputs(0);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Rules,
    /// `ConstantSharing`: main graph only, not per node.
    Sharing,
    Cse,
    Fold,
    MatMulAdd,
    ReshapeFusion,
}

struct Optimizer<'t> {
    table: &'t KernelTable,
    values: Values,
    versions: HashMap<String, i64>,
    /// Per graph: the index and the two node orders, built once per step.
    indices: HashMap<usize, (Index, Vec<usize>, Vec<usize>, usize)>,
    /// Graphs whose shapes to infer again in the next folding pass.
    reinfer: HashSet<usize>,
    /// Main-graph initializers held as tensor protos (the model's, and those an inlined `If`
    /// branch brought): the only ones `ConstantSharing` merges. Those the optimiser creates
    /// (folded values, fusion shapes) live in memory in ORT and are never shared.
    shareable: HashSet<String>,
}

/// Producers and consumers of one graph's values. Consumer lists may hold stale entries;
/// [`Index::users`] filters them.
struct Index {
    producer: FxMap<String, usize>,
    uses: FxMap<String, Vec<usize>>,
    outputs: HashSet<String>,
}

impl Index {
    fn build(session: &Session, gi: usize) -> Index {
        let g = &session.graphs[gi];
        // Sized once: a value per node output, about as many read values.
        let mut producer = FxMap::with_capacity_and_hasher(g.nodes.len() * 2, Default::default());
        let mut uses: FxMap<String, Vec<usize>> =
            FxMap::with_capacity_and_hasher(g.nodes.len() * 2, Default::default());
        for (i, n) in g.live_nodes() {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                producer.insert(o.clone(), i);
            }
            for name in n.inputs.iter().chain(&n.implicit_inputs) {
                if !name.is_empty() {
                    match uses.get_mut(name.as_str()) {
                        Some(l) => {
                            if l.last() != Some(&i) {
                                l.push(i);
                            }
                        }
                        None => {
                            uses.insert(name.clone(), vec![i]);
                        }
                    }
                }
            }
        }
        Index {
            producer,
            uses,
            outputs: g.outputs.iter().cloned().collect(),
        }
    }

    /// Live nodes that read `name` (explicitly or through a subgraph).
    fn users(&self, session: &Session, gi: usize, name: &str) -> Vec<usize> {
        let g = &session.graphs[gi];
        let mut out: Vec<usize> = self
            .uses
            .get(name)
            .map(|l| {
                l.iter()
                    .copied()
                    .filter(|&k| {
                        let n = &g.nodes[k];
                        !n.removed
                            && (n.inputs.iter().any(|i| i == name)
                                || n.implicit_inputs.iter().any(|i| i == name))
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The live producer of `name` in this graph.
    fn producer(&self, session: &Session, gi: usize, name: &str) -> Option<usize> {
        self.producer
            .get(name)
            .copied()
            .filter(|&p| !session.graphs[gi].nodes[p].removed)
    }
}

/// ORT's `GraphViewer` order: a reverse DFS from the leaf nodes (nodes whose outputs no node
/// reads), inputs visited in index order from the top of a stack, nodes emitted on leaving.
pub(crate) fn ort_topological_order(session: &Session, gi: usize) -> Vec<usize> {
    let g = &session.graphs[gi];
    let mut producer: FxMap<&str, usize> =
        FxMap::with_capacity_and_hasher(g.nodes.len() * 2, Default::default());
    for (i, n) in g.live_nodes() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            producer.insert(o.as_str(), i);
        }
    }
    ort_topological_order_by(session, gi, &|v| producer.get(v).copied())
}

/// [`ort_topological_order`] with the producer of each value given.
fn ort_topological_order_by(
    session: &Session,
    gi: usize,
    producer: &dyn Fn(&str) -> Option<usize>,
) -> Vec<usize> {
    let g = &session.graphs[gi];
    // Each node's producers, deduplicated and ascending, as one flat list (CSR): those of
    // node `i` are `deps[start[i]..start[i + 1]]`.
    let mut start: Vec<usize> = Vec::with_capacity(g.nodes.len() + 1);
    let mut deps: Vec<usize> = Vec::with_capacity(g.nodes.len() * 2);
    let mut has_output_node = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        start.push(deps.len());
        if n.removed {
            continue;
        }
        let from = deps.len();
        deps.extend(
            n.inputs
                .iter()
                .chain(&n.implicit_inputs)
                .filter_map(|v| producer(v.as_str()))
                .filter(|&p| p != i),
        );
        deps[from..].sort_unstable();
        let mut w = from;
        for r in from..deps.len() {
            if w == from || deps[w - 1] != deps[r] {
                deps[w] = deps[r];
                w += 1;
            }
        }
        deps.truncate(w);
        for &d in &deps[from..] {
            has_output_node[d] = true;
        }
    }
    start.push(deps.len());
    let mut stack: Vec<(usize, bool)> = g
        .live_nodes()
        .filter(|(i, _)| !has_output_node[*i])
        .map(|(i, _)| (i, false))
        .collect();
    let mut visited = vec![false; g.nodes.len()];
    let mut order = Vec::with_capacity(g.nodes.len());
    while let Some((n, leaving)) = stack.pop() {
        if leaving {
            order.push(n);
            continue;
        }
        if visited[n] {
            continue;
        }
        visited[n] = true;
        stack.push((n, true));
        for &d in &deps[start[n]..start[n + 1]] {
            if !visited[d] {
                stack.push((d, false));
            }
        }
    }
    // Cycles leave nodes unvisited: append them in index order.
    for (i, _) in g.live_nodes() {
        if !visited[i] {
            order.push(i);
        }
    }
    order
}

fn is_deterministic(domain: &str, op: &str) -> bool {
    match domain {
        "ai.onnx" => !matches!(
            op,
            "RandomUniform"
                | "RandomNormal"
                | "RandomUniformLike"
                | "RandomNormalLike"
                | "Multinomial"
                | "Dropout"
                | "Bernoulli"
        ),
        "com.microsoft" => matches!(op, "QuantizeLinear" | "DequantizeLinear"),
        _ => false,
    }
}

impl Optimizer<'_> {
    /// Runs one transformer over graph `gi`, subgraphs first (node by node, as ORT recurses).
    fn pass(&mut self, session: &mut Session, gi: usize, pass: Pass) -> bool {
        let mut changed = false;
        // The index is kept up to date by the edits; the orders stay valid under removals
        // and renames, and are rebuilt when nodes were appended (`If` inlining).
        let len = session.graphs[gi].nodes.len();
        let (mut idx, kahn, dfs) = match self.indices.remove(&gi) {
            Some((idx, kahn, dfs, n)) if n == len => (idx, kahn, dfs),
            _ => {
                // One producer index serves both orders.
                let idx = Index::build(session, gi);
                let kahn =
                    infer::topological_order_by(session, gi, &|v| idx.producer.get(v).copied());
                let dfs = ort_topological_order_by(session, gi, &|v| idx.producer.get(v).copied());
                (idx, kahn, dfs)
            }
        };
        if pass == Pass::Sharing {
            let changed = self.constant_sharing(session, gi, &mut idx);
            self.indices.insert(gi, (idx, kahn, dfs, len));
            return changed;
        }
        let mut cse: FxMap<Vec<u8>, usize> = FxMap::default();
        // After a ReshapeFusion, ORT's next Resolve infers the graph's shapes again (the
        // Reshapes now have constant shapes); the next folding pass does the same here.
        let mut updated = pass == Pass::Fold && self.reinfer.remove(&gi);
        let order = if matches!(pass, Pass::Cse | Pass::MatMulAdd) {
            &dfs
        } else {
            &kahn
        };
        // Built on first use: generated names are checked against every name of the graph.
        let mut names: Option<NameGen> = None;
        let skip = pass == Pass::ReshapeFusion
            && !session.graphs[gi]
                .live_nodes()
                .any(|(_, n)| n.op == "Reshape" || !n.subgraphs.is_empty());
        let order: &[usize] = if skip { &[] } else { order };
        for &ni in order {
            if session.graphs[gi].nodes[ni].removed {
                continue;
            }
            let subs: Vec<usize> = session.graphs[gi].nodes[ni]
                .subgraphs
                .iter()
                .map(|(_, s)| *s)
                .collect();
            for sg in subs {
                changed |= self.pass(session, sg, pass);
            }
            let did = match pass {
                Pass::Rules => self.rules(session, gi, ni, &mut idx),
                Pass::Cse => self.cse(session, gi, ni, &mut idx, &mut cse),
                Pass::Fold => {
                    if updated && session.graphs[gi].nodes[ni].subgraphs.is_empty() {
                        shapes::infer_and_record(session, gi, ni, &mut self.values);
                    }
                    let d = self.fold(session, gi, ni, &mut idx);
                    updated |= d;
                    d
                }
                Pass::ReshapeFusion => {
                    let d = self.reshape_fusion(session, gi, ni, &mut idx)
                        || self.fuse_contiguous_reshapes(session, gi, ni, &mut idx, &mut names);
                    if d {
                        self.reinfer.insert(gi);
                    }
                    d
                }
                Pass::MatMulAdd => self.matmul_add_fusion(session, gi, ni, &mut idx, &mut names),
                Pass::Sharing => false,
            };
            changed |= did;
        }
        if let Some(n) = names {
            session.graphs[gi].name_counter = n.counter;
        }
        // Orders built before nodes were appended (`If` inlining) miss them: keep the length
        // they were built for, so that the next pass rebuilds them.
        self.indices.insert(gi, (idx, kahn, dfs, len));
        changed
    }

    /// The `TransposeOptimizer` over graph `gi`, then over the subgraphs of its nodes.
    fn transpose(&mut self, session: &mut Session, gi: usize) -> bool {
        let order = ort_topological_order(session, gi);
        let mut changed = transpose::run(
            session,
            gi,
            self.table,
            &self.versions,
            &mut self.values,
            &order,
        );
        if changed {
            self.indices.remove(&gi);
        }
        let subs: Vec<usize> = ort_topological_order(session, gi)
            .into_iter()
            .flat_map(|k| {
                session.graphs[gi].nodes[k]
                    .subgraphs
                    .iter()
                    .map(|(_, s)| *s)
            })
            .collect();
        for sg in subs {
            changed |= self.transpose(session, sg);
        }
        changed
    }

    // ---------------------------------------------------------------- graph editing

    /// Marks node `ni` removed, and every node of its subgraphs.
    fn remove(session: &mut Session, gi: usize, ni: usize) {
        let n = &mut session.graphs[gi].nodes[ni];
        n.removed = true;
        let subs: Vec<usize> = n.subgraphs.iter().map(|(_, s)| *s).collect();
        for sg in subs {
            for k in 0..session.graphs[sg].nodes.len() {
                if !session.graphs[sg].nodes[k].removed {
                    Self::remove(session, sg, k);
                }
            }
        }
    }

    /// Renames every read of `old` to `new` in graph `gi` (and the subgraphs that read it).
    fn replace_uses(session: &mut Session, gi: usize, idx: &mut Index, old: &str, new: &str) {
        for k in idx.users(session, gi, old) {
            let n = &mut session.graphs[gi].nodes[k];
            for i in n.inputs.iter_mut() {
                if i == old {
                    *i = new.to_string();
                }
            }
            if n.implicit_inputs.iter().any(|i| i == old) {
                for i in n.implicit_inputs.iter_mut() {
                    if i == old {
                        *i = new.to_string();
                    }
                }
                let subs: Vec<usize> = n.subgraphs.iter().map(|(_, s)| *s).collect();
                for sg in subs {
                    Self::rename_in_subgraph(session, sg, old, new);
                }
            }
            idx.uses.entry(new.to_string()).or_default().push(k);
        }
    }

    fn rename_in_subgraph(session: &mut Session, sg: usize, old: &str, new: &str) {
        let g = &session.graphs[sg];
        if g.inputs.iter().any(|i| i == old) || g.initializers.contains_key(old) {
            return;
        }
        let mut subs = Vec::new();
        let g = &mut session.graphs[sg];
        for n in g.nodes.iter_mut() {
            for i in n.inputs.iter_mut().chain(n.implicit_inputs.iter_mut()) {
                if i == old {
                    *i = new.to_string();
                }
            }
            subs.extend(n.subgraphs.iter().map(|(_, s)| *s));
        }
        for o in g.outputs.iter_mut() {
            if o == old {
                *o = new.to_string();
            }
        }
        for s in subs {
            Self::rename_in_subgraph(session, s, old, new);
        }
    }

    /// Removes a single-data-input node, its consumers reading `input` instead of its output.
    /// Refused when the output is a graph output.
    fn bypass(session: &mut Session, gi: usize, ni: usize, idx: &mut Index, input: &str) -> bool {
        let Some(out) = session.graphs[gi].nodes[ni].outputs.first().cloned() else {
            return false;
        };
        if input.is_empty() || idx.outputs.contains(&out) {
            return false;
        }
        if session.graphs[gi].nodes[ni]
            .outputs
            .iter()
            .skip(1)
            .any(|o| !o.is_empty() && !idx.users(session, gi, o).is_empty())
        {
            return false;
        }
        Self::replace_uses(session, gi, idx, &out, input);
        Self::remove(session, gi, ni);
        true
    }

    /// After folding node `ni`: its producers left without consumers are removed, upwards
    /// (`RemoveNodesWithOneOutputBottomUp`).
    fn remove_dead_inputs(session: &mut Session, gi: usize, ni: usize, idx: &Index) {
        let mut stack: Vec<usize> = session.graphs[gi].nodes[ni]
            .inputs
            .iter()
            .chain(&session.graphs[gi].nodes[ni].implicit_inputs)
            .filter_map(|i| idx.producer(session, gi, i))
            .collect();
        while let Some(p) = stack.pop() {
            if session.graphs[gi].nodes[p].removed {
                continue;
            }
            let node = &session.graphs[gi].nodes[p];
            let dead = node
                .existing_outputs()
                .all(|(_, o)| !idx.outputs.contains(o) && idx.users(session, gi, o).is_empty());
            if !dead {
                continue;
            }
            let inputs: Vec<usize> = node
                .inputs
                .iter()
                .chain(&node.implicit_inputs)
                .filter_map(|i| idx.producer(session, gi, i))
                .collect();
            Self::remove(session, gi, p);
            stack.extend(inputs);
        }
    }

    /// Replaces output `name` of a folded node by an initializer.
    fn add_initializer(
        &mut self,
        session: &mut Session,
        gi: usize,
        name: &str,
        value: Option<Tensor>,
    ) {
        let elem = match session.type_of(gi, name) {
            Some(Type::Tensor(e)) => *e,
            _ => value.as_ref().map(|v| v.elem).unwrap_or(D::Float as i32),
        };
        let dims: Vec<i64> = match &value {
            Some(v) => v.dims.clone(),
            None => session
                .shape_of(gi, name)
                .map(|s| s.iter().map(|d| d.unwrap_or(-1)).collect())
                .unwrap_or_else(|| vec![-1]),
        };
        let tensor = match &value {
            Some(v) => v.to_proto(name),
            None => crate::model::proto::TensorProto {
                name: Some(name.to_string()),
                dims: dims.clone(),
                data_type: Some(elem),
                ..Default::default()
            },
        };
        let g = &mut session.graphs[gi];
        g.shapes.insert(
            name.to_string(),
            dims.iter().map(|&d| (d >= 0).then_some(d)).collect(),
        );
        g.init_order.push(name.to_string());
        g.types.insert(name.to_string(), Type::Tensor(elem));
        g.initializers.insert(
            name.to_string(),
            Init {
                dims,
                elem,
                overridable: false,
                tensor,
            },
        );
        self.values.forget(gi, name);
        if let Some(v) = value {
            self.values.set(gi, name, v);
        }
    }

    fn constant(&mut self, session: &Session, gi: usize, name: &str) -> Option<Tensor> {
        self.values.get(session, gi, name).map(|t| (*t).clone())
    }

    fn is_constant_init(session: &Session, gi: usize, name: &str) -> bool {
        session
            .initializer(gi, name)
            .is_some_and(|i| !i.overridable)
    }

    // ---------------------------------------------------------------- rewrite rules

    fn rules(&mut self, session: &mut Session, gi: usize, ni: usize, idx: &mut Index) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        // Only these ops have rules: skip the rest before cloning names.
        let has_rule = matches!(
            node.op.as_str(),
            "Identity"
                | "Dropout"
                | "Cast"
                | "Slice"
                | "Expand"
                | "Add"
                | "Sub"
                | "Mul"
                | "Div"
                | "Where"
                | "Conv"
                | "Relu"
                | "Gemm"
                | "Pad"
        );
        if node.domain != "ai.onnx" || !has_rule {
            return false;
        }
        let input0 = node.inputs.first().cloned().unwrap_or_default();
        let out0 = node.outputs.first().cloned().unwrap_or_default();
        match node.op.as_str() {
            "Identity" => {
                if !idx.outputs.contains(&out0) {
                    return Self::bypass(session, gi, ni, idx, &input0);
                }
                // The output is a graph output: the producer writes it directly.
                let Some(p) = idx.producer(session, gi, &input0) else {
                    return false;
                };
                if idx.outputs.contains(&input0) || idx.users(session, gi, &input0).len() != 1 {
                    return false;
                }
                for o in session.graphs[gi].nodes[p].outputs.iter_mut() {
                    if *o == input0 {
                        *o = out0.clone();
                    }
                }
                idx.producer.insert(out0, p);
                Self::remove(session, gi, ni);
                true
            }
            "Dropout" => {
                let mask_used = node.outputs.get(1).is_some_and(|m| {
                    !m.is_empty()
                        && (idx.outputs.contains(m) || !idx.users(session, gi, m).is_empty())
                });
                if mask_used {
                    return false;
                }
                let training = node.inputs.get(2).filter(|n| !n.is_empty()).cloned();
                if let Some(t) = training {
                    match self.constant(session, gi, &t) {
                        Some(v) if v.as_i64().iter().all(|&x| x == 0) => {}
                        _ => return false,
                    }
                }
                Self::bypass(session, gi, ni, idx, &input0)
            }
            "Cast" => {
                let to = node.attr_i("to");
                let same = matches!(session.type_of(gi, &input0), Some(Type::Tensor(e)) if Some(i64::from(*e)) == to);
                if same {
                    return Self::bypass(session, gi, ni, idx, &input0);
                }
                // PreShapeNodeElimination: a Cast read only by Shape nodes.
                let users = idx.users(session, gi, &out0);
                if !users.is_empty()
                    && !idx.outputs.contains(&out0)
                    && users.iter().all(|&u| {
                        let n = &session.graphs[gi].nodes[u];
                        n.op == "Shape" && n.domain == "ai.onnx" && n.implicit_inputs.is_empty()
                    })
                {
                    return Self::bypass(session, gi, ni, idx, &input0);
                }
                false
            }
            "Slice" => {
                let since = node.since.unwrap_or(0);
                let (starts, ends, steps) = if since >= 10 {
                    let get = |k: usize, s: &mut Self| -> Option<Option<Vec<i64>>> {
                        match node.inputs.get(k).filter(|n| !n.is_empty()) {
                            Some(n) => Some(Some(s.constant(session, gi, n)?.as_i64())),
                            None => Some(None),
                        }
                    };
                    let (Some(Some(st)), Some(Some(en)), Some(steps)) =
                        (get(1, self), get(2, self), get(4, self))
                    else {
                        return false;
                    };
                    (st, en, steps)
                } else {
                    match (node.attr_ints("starts"), node.attr_ints("ends")) {
                        (Some(s), Some(e)) => (s.to_vec(), e.to_vec(), None),
                        _ => return false,
                    }
                };
                let noop = starts.len() == ends.len()
                    && starts.iter().all(|&s| s == 0)
                    && ends.iter().all(|&e| e >= i64::from(i32::MAX))
                    && steps.is_none_or(|s| s.iter().all(|&x| x == 1));
                noop && Self::bypass(session, gi, ni, idx, &input0)
            }
            "Expand" => {
                let Some(x) = session.shape_of(gi, &input0).cloned() else {
                    return false;
                };
                let Some(shape_name) = node.inputs.get(1).cloned() else {
                    return false;
                };
                let Some(target) = self.constant(session, gi, &shape_name) else {
                    return false;
                };
                let t: shapes::Shape = target.as_i64().into_iter().map(Some).collect();
                if x.iter().all(Option::is_some) && shapes::broadcast(&[&x, &t]) == x {
                    return Self::bypass(session, gi, ni, idx, &input0);
                }
                false
            }
            "Div" => {
                self.noop_elimination(session, gi, ni, idx)
                    || self.div_mul_fusion(session, gi, ni, idx)
            }
            "Add" | "Sub" | "Mul" => self.noop_elimination(session, gi, ni, idx),
            "Relu" => self.fuse_relu_clip(session, gi, ni, idx),
            "Pad" => self.pad_fusion(session, gi, ni, idx),
            "Gemm" => {
                self.gemm_sum_fusion(session, gi, ni, idx)
                    || self.gemm_transpose_fusion(session, gi, ni, idx)
            }
            "Conv" => self.conv_fusion(session, gi, ni, idx),
            "Where" => {
                // NotWhereFusion: Where(Not(c), a, b) -> Where(c, b, a).
                let Some(p) = idx.producer(session, gi, &input0) else {
                    return false;
                };
                let pn = &session.graphs[gi].nodes[p];
                if pn.op != "Not" || pn.domain != "ai.onnx" || idx.outputs.contains(&input0) {
                    return false;
                }
                let users = idx.users(session, gi, &input0);
                if users
                    .iter()
                    .any(|&u| session.graphs[gi].nodes[u].op != "Where")
                {
                    return false;
                }
                let c = pn.inputs.first().cloned().unwrap_or_default();
                for u in users {
                    let n = &mut session.graphs[gi].nodes[u];
                    if n.inputs.len() == 3 {
                        n.inputs[0] = c.clone();
                        n.inputs.swap(1, 2);
                    }
                    idx.uses.entry(c.clone()).or_default().push(u);
                }
                Self::remove(session, gi, p);
                true
            }
            _ => false,
        }
    }

    /// The single consumer of output `out` of a node, reading it through one edge, when `out`
    /// is not a graph output.
    fn only_edge(session: &Session, gi: usize, idx: &Index, out: &str) -> Option<usize> {
        if out.is_empty() || idx.outputs.contains(out) {
            return None;
        }
        let users = idx.users(session, gi, out);
        let [next] = users[..] else {
            return None;
        };
        let n = &session.graphs[gi].nodes[next];
        let edges = n.inputs.iter().filter(|i| *i == out).count()
            + n.implicit_inputs.iter().filter(|i| *i == out).count();
        (edges == 1).then_some(next)
    }

    /// `DivMulFusion` (`core/optimizer/div_mul_fusion.cc`): `Mul(x, Div(1, b))` becomes
    /// `Div(x, b)`: a `Div` (since 7, 13, 14) with a one-element constant 1 (float, float16,
    /// double, int32, int64) as numerator, whose only edge goes to a `Mul` (since 7, 13, 14),
    /// reads the Mul's other input and takes its output; the Div keeps its name, the Mul goes.
    fn div_mul_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
    ) -> bool {
        let div = &session.graphs[gi].nodes[ni];
        if !matches!(div.since, Some(7 | 13 | 14))
            || div.inputs.len() != 2
            || div.outputs.len() != 1
        {
            return false;
        }
        let out = div.outputs[0].clone();
        let a = div.inputs[0].clone();
        let Some(mul) = Self::only_edge(session, gi, idx, &out) else {
            return false;
        };
        let mn = &session.graphs[gi].nodes[mul];
        if mn.op != "Mul"
            || mn.domain != "ai.onnx"
            || !matches!(mn.since, Some(7 | 13 | 14))
            || mn.inputs.len() != 2
            || mn.outputs.len() != 1
        {
            return false;
        }
        let Some(init) = session.initializer(gi, &a).filter(|i| !i.overridable) else {
            return false;
        };
        let typed = [D::Float, D::Float16, D::Double, D::Int32, D::Int64]
            .iter()
            .any(|&t| init.elem == t as i32);
        if !typed {
            return false;
        }
        match self.constant(session, gi, &a) {
            Some(v) if v.len() == 1 && v.as_f64()[0] == 1.0 => {}
            _ => return false,
        }
        let mn = &session.graphs[gi].nodes[mul];
        let other = if mn.inputs[0] == out {
            mn.inputs[1].clone()
        } else {
            mn.inputs[0].clone()
        };
        let mul_out = mn.outputs[0].clone();
        let div = &mut session.graphs[gi].nodes[ni];
        div.inputs[0] = other.clone();
        div.outputs[0] = mul_out.clone();
        idx.uses.entry(other).or_default().push(ni);
        idx.producer.insert(mul_out, ni);
        Self::remove(session, gi, mul);
        true
    }

    /// `FuseReluClip` (`core/optimizer/relu_clip_fusion.cc`): a `Relu` whose only edge goes
    /// to a `Clip` (since 6, 11, 12, 13) is removed, the Clip reading its input. A negative or
    /// missing minimum becomes 0: the attribute (Clip-6), or a new scalar initializer
    /// `GenerateNodeArgName(FuseReluClip_<relu>_min_zero_constant)`; a minimum that is not a
    /// constant initializer stops the fusion.
    fn fuse_relu_clip(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
    ) -> bool {
        let relu = &session.graphs[gi].nodes[ni];
        if relu.inputs.len() != 1 || relu.outputs.len() != 1 || relu.inputs[0].is_empty() {
            return false;
        }
        let (x, out, relu_name) = (
            relu.inputs[0].clone(),
            relu.outputs[0].clone(),
            relu.name.clone(),
        );
        let Some(clip) = Self::only_edge(session, gi, idx, &out) else {
            return false;
        };
        let cn = &session.graphs[gi].nodes[clip];
        if cn.op != "Clip"
            || cn.domain != "ai.onnx"
            || !matches!(cn.since, Some(6 | 11 | 12 | 13))
            || cn.inputs.first() != Some(&out)
        {
            return false;
        }
        let since6 = cn.since == Some(6);
        let min_name = cn.inputs.get(1).filter(|m| !m.is_empty()).cloned();
        let needs_zero = if since6 {
            cn.attrs
                .iter()
                .find(|a| a.name() == "min")
                .and_then(|a| a.f)
                .is_none_or(|m| m < 0.0)
        } else {
            match &min_name {
                None => true,
                Some(m) => {
                    if !Self::is_constant_init(session, gi, m) {
                        return false;
                    }
                    match self.constant(session, gi, m) {
                        Some(v) if v.len() == 1 => v.as_f64()[0] < 0.0,
                        _ => return false,
                    }
                }
            }
        };
        let elem = match session.type_of(gi, &x) {
            Some(Type::Tensor(e)) => *e,
            _ => return false,
        };
        if needs_zero {
            if since6 {
                let n = &mut session.graphs[gi].nodes[clip];
                n.attrs.retain(|a| a.name() != "min");
                n.attrs.push(crate::model::proto::AttributeProto {
                    name: Some("min".into()),
                    f: Some(0.0),
                    r#type: Some(crate::model::proto::attribute_proto::AttributeType::Float as i32),
                    ..Default::default()
                });
            } else {
                let mut names = NameGen::new(&session.graphs[gi]);
                let zero = names.value(&format!("FuseReluClip_{relu_name}_min_zero_constant"));
                session.graphs[gi].name_counter = names.counter;
                let float = [D::Float, D::Float16, D::Double, D::Bfloat16]
                    .iter()
                    .any(|&t| elem == t as i32);
                let data = if float {
                    eval::Data::Float(vec![0.0])
                } else {
                    eval::Data::Int(vec![0])
                };
                let t = Tensor {
                    elem,
                    dims: Vec::new(),
                    data,
                };
                self.add_initializer(session, gi, &zero, Some(t));
                let n = &mut session.graphs[gi].nodes[clip];
                if n.inputs.len() < 2 {
                    n.inputs.resize(2, String::new());
                }
                n.inputs[1] = zero.clone();
                idx.uses.entry(zero).or_default().push(clip);
            }
        }
        session.graphs[gi].nodes[clip].inputs[0] = x.clone();
        idx.uses.entry(x).or_default().push(clip);
        Self::remove(session, gi, ni);
        true
    }

    /// A copy of Gemm `like` named `name`, with `transA`/`transB` set as given.
    fn fused_gemm(
        like: &SNode,
        name: String,
        inputs: Vec<String>,
        output: String,
        ta: bool,
        tb: bool,
    ) -> SNode {
        let mut attrs: Vec<_> = like
            .attrs
            .iter()
            .filter(|a| a.name() != "transA" && a.name() != "transB")
            .cloned()
            .collect();
        for (n, v) in [("transA", ta), ("transB", tb)] {
            attrs.push(crate::model::proto::AttributeProto {
                name: Some(n.into()),
                i: Some(i64::from(v)),
                r#type: Some(crate::model::proto::attribute_proto::AttributeType::Int as i32),
                ..Default::default()
            });
        }
        SNode {
            name,
            op: "Gemm".into(),
            domain: "ai.onnx".into(),
            since: like.since,
            inputs,
            outputs: vec![output],
            attrs,
            subgraphs: Vec::new(),
            implicit_inputs: Vec::new(),
            ep: None,
            origin: like.origin,
            removed: false,
        }
    }

    /// A `Transpose` (since 1, 13) swapping the two axes of a rank-2 tensor.
    fn is_transpose_2d(session: &Session, gi: usize, n: &SNode) -> bool {
        if n.op != "Transpose" || n.domain != "ai.onnx" || !matches!(n.since, Some(1 | 13)) {
            return false;
        }
        match n.attr_ints("perm") {
            Some(p) => p == [1, 0],
            None => n
                .inputs
                .first()
                .and_then(|i| session.shape_of(gi, i))
                .is_some_and(|s| s.len() == 2),
        }
    }

    /// `GemmTransposeFusion` (`core/optimizer/gemm_transpose_fusion.cc`): a `Gemm` (since 1, 6,
    /// 7, 9, 11, 13) reading `A` or `B` through a 2-D `Transpose` that has no other consumer,
    /// or (without `C`) whose only consumer is a 2-D `Transpose`, becomes one Gemm named
    /// `GenerateNodeName(<gemm>/GemmTransposeFusion/)` with `transA`/`transB` flipped (for the
    /// output Transpose: `Bᵀ·Aᵀ`, the inputs swapped); the Transposes are removed.
    fn gemm_transpose_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
    ) -> bool {
        let gemm = &session.graphs[gi].nodes[ni];
        if !matches!(gemm.since, Some(1 | 6 | 7 | 9 | 11 | 13))
            || gemm.inputs.len() < 2
            || gemm.outputs.len() != 1
        {
            return false;
        }
        let mut inputs = gemm.inputs.clone();
        let mut trans = [
            gemm.attr_i("transA").unwrap_or(0) != 0,
            gemm.attr_i("transB").unwrap_or(0) != 0,
        ];
        let mut gone: Vec<usize> = Vec::new();
        for k in 0..2 {
            let Some(p) = idx.producer(session, gi, &inputs[k]) else {
                continue;
            };
            let pn = &session.graphs[gi].nodes[p];
            if !Self::is_transpose_2d(session, gi, pn)
                || Self::only_edge(session, gi, idx, &inputs[k]) != Some(ni)
                || gone.contains(&p)
            {
                continue;
            }
            let Some(src) = pn.inputs.first().cloned() else {
                continue;
            };
            inputs[k] = src;
            trans[k] = !trans[k];
            gone.push(p);
        }
        let has_c = inputs.get(2).is_some_and(|c| !c.is_empty());
        let out = gemm.outputs[0].clone();
        let mut output = out.clone();
        if !has_c && let Some(t) = Self::only_edge(session, gi, idx, &out) {
            let tn = &session.graphs[gi].nodes[t];
            if Self::is_transpose_2d(session, gi, tn) && tn.outputs.len() == 1 {
                output = tn.outputs[0].clone();
                inputs.swap(0, 1);
                trans = [!trans[1], !trans[0]];
                gone.push(t);
            }
        }
        if gone.is_empty() {
            return false;
        }
        let gemm = session.graphs[gi].nodes[ni].clone();
        let name =
            session.graphs[gi].generate_node_name(&format!("{}/GemmTransposeFusion/", gemm.name));
        let node = Self::fused_gemm(&gemm, name, inputs, output, trans[0], trans[1]);
        for k in gone {
            Self::remove(session, gi, k);
        }
        Self::remove(session, gi, ni);
        self.append_nodes(session, gi, idx, vec![node]);
        true
    }

    /// `GemmSumFusion` (`core/optimizer/gemm_sum_fusion.cc`): a `Gemm` (since 7, 9, 11, 13)
    /// without `C` whose only consumer is a two-input `Sum` (since 6, 8, 13) becomes a Gemm
    /// named `GenerateNodeName(<gemm>/GemmSumFusion/)` with the Sum's other input as `C`, when
    /// that input broadcasts one way to the Gemm's output (rank at most 2, dims 1 or equal).
    fn gemm_sum_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
    ) -> bool {
        let gemm = &session.graphs[gi].nodes[ni];
        if !matches!(gemm.since, Some(7 | 9 | 11 | 13))
            || gemm.inputs.len() != 2
            || gemm.outputs.len() != 1
        {
            return false;
        }
        let out = gemm.outputs[0].clone();
        let Some(sum) = Self::only_edge(session, gi, idx, &out) else {
            return false;
        };
        let sn = &session.graphs[gi].nodes[sum];
        if sn.op != "Sum"
            || sn.domain != "ai.onnx"
            || !matches!(sn.since, Some(6 | 8 | 13))
            || sn.inputs.len() != 2
            || sn.outputs.len() != 1
        {
            return false;
        }
        let other = if sn.inputs[0] == out {
            sn.inputs[1].clone()
        } else {
            sn.inputs[0].clone()
        };
        let (Some(c), Some(y)) = (session.shape_of(gi, &other), session.shape_of(gi, &out)) else {
            return false;
        };
        let ok = c.len() <= 2
            && y.len() == 2
            && c.iter()
                .rev()
                .zip(y.iter().rev())
                .all(|(a, b)| *a == Some(1) || (a.is_some() && a == b));
        if !ok {
            return false;
        }
        let sum_out = sn.outputs[0].clone();
        let gemm = session.graphs[gi].nodes[ni].clone();
        let name = session.graphs[gi].generate_node_name(&format!("{}/GemmSumFusion/", gemm.name));
        let ta = gemm.attr_i("transA").unwrap_or(0) != 0;
        let tb = gemm.attr_i("transB").unwrap_or(0) != 0;
        let mut inputs = gemm.inputs.clone();
        inputs.push(other);
        let node = Self::fused_gemm(&gemm, name, inputs, sum_out, ta, tb);
        Self::remove(session, gi, sum);
        Self::remove(session, gi, ni);
        self.append_nodes(session, gi, idx, vec![node]);
        true
    }

    /// `PadFusion` (`core/optimizer/pad_fusion.cc`): a constant-mode `Pad` (since 2, 11, 13,
    /// 18, 19; no `axes`) with constant non-negative pads on the spatial axes only and a zero
    /// (or absent) pad value, whose only edge goes to the data input of a `Conv` (since 1, 11),
    /// `AveragePool` (since 7, 10, 11, 19) or `MaxPool` (since 1, 8, 10, 11, 12) with
    /// `auto_pad` NOTSET, is folded into that node's `pads` (oracle-checked: the follower
    /// keeps its name, the Pad goes).
    fn pad_fusion(&mut self, session: &mut Session, gi: usize, ni: usize, idx: &mut Index) -> bool {
        let pad = &session.graphs[gi].nodes[ni];
        let since = pad.since.unwrap_or(0);
        if !matches!(since, 2 | 11 | 13 | 18 | 19)
            || pad.outputs.len() != 1
            || pad.inputs.is_empty()
        {
            return false;
        }
        if pad.attr_s("mode").is_some_and(|m| m != "constant") {
            return false;
        }
        let x = pad.inputs[0].clone();
        let out = pad.outputs[0].clone();
        let (pads, value_zero) = if since < 11 {
            let Some(p) = pad.attr_ints("pads") else {
                return false;
            };
            let v = pad
                .attrs
                .iter()
                .find(|a| a.name() == "value")
                .and_then(|a| a.f);
            (p.to_vec(), v.is_none_or(|v| v == 0.0))
        } else {
            if pad.inputs.get(3).is_some_and(|a| !a.is_empty()) {
                return false;
            }
            let Some(pn) = pad.inputs.get(1).filter(|p| !p.is_empty()).cloned() else {
                return false;
            };
            if !Self::is_constant_init(session, gi, &pn) {
                return false;
            }
            let Some(p) = self.constant(session, gi, &pn) else {
                return false;
            };
            let value_zero = match pad.inputs.get(2).filter(|v| !v.is_empty()).cloned() {
                None => true,
                Some(v) => {
                    Self::is_constant_init(session, gi, &v)
                        && self
                            .constant(session, gi, &v)
                            .is_some_and(|t| t.len() == 1 && t.as_f64()[0] == 0.0)
                }
            };
            (p.as_i64(), value_zero)
        };
        let rank = pads.len() / 2;
        if !value_zero
            || pads.len() % 2 != 0
            || rank < 2
            || pads.iter().any(|&p| p < 0)
            || pads[0] != 0
            || pads[1] != 0
            || pads[rank] != 0
            || pads[rank + 1] != 0
        {
            return false;
        }
        let Some(next) = Self::only_edge(session, gi, idx, &out) else {
            return false;
        };
        let nn = &session.graphs[gi].nodes[next];
        let ok = nn.domain == "ai.onnx"
            && nn.inputs.first() == Some(&out)
            && match nn.op.as_str() {
                "Conv" => matches!(nn.since, Some(1 | 11)),
                "AveragePool" => matches!(nn.since, Some(7 | 10 | 11 | 19)),
                "MaxPool" => matches!(nn.since, Some(1 | 8 | 10 | 11 | 12)),
                _ => false,
            }
            && nn.attr_s("auto_pad").is_none_or(|a| a == "NOTSET");
        if !ok {
            return false;
        }
        let n = &mut session.graphs[gi].nodes[next];
        n.inputs[0] = x.clone();
        idx.uses.entry(x).or_default().push(next);
        Self::remove(session, gi, ni);
        true
    }

    /// `ConvAddFusion`, `ConvMulFusion`, `ConvBNFusion` (`core/optimizer/conv_add_fusion.cc`,
    /// `conv_mul_fusion.cc`, `conv_bn_fusion.cc`): a `Conv` (since 1 or 11) whose only consumer is
    /// an `Add`/`Mul` (since 7, 13, 14) with a constant per-channel or scalar second input, or a
    /// `BatchNormalization` (since 7, 9, 14, 15) with constant 1-D parameters and no optional
    /// outputs, with constant weights (and bias): the follower is folded into the Conv's weights,
    /// and the Conv takes its output. The Conv keeps its name.
    fn conv_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
    ) -> bool {
        let conv = &session.graphs[gi].nodes[ni];
        if !matches!(conv.since, Some(1 | 11)) || conv.outputs.len() != 1 {
            return false;
        }
        let out = conv.outputs[0].clone();
        let w = conv.inputs.get(1).cloned().unwrap_or_default();
        let Some(w_init) = session.initializer(gi, &w).filter(|i| !i.overridable) else {
            return false;
        };
        let (w_dims, w_elem) = (w_init.dims.clone(), w_init.elem);
        if w_dims.len() < 3 {
            return false;
        }
        if let Some(b) = conv.inputs.get(2).filter(|b| !b.is_empty())
            && !Self::is_constant_init(session, gi, b)
        {
            return false;
        }
        if idx.outputs.contains(&out) {
            return false;
        }
        let users = idx.users(session, gi, &out);
        let [next] = users[..] else {
            return false;
        };
        let nn = &session.graphs[gi].nodes[next];
        // One edge: the follower reads the Conv once, and nothing else reads the Conv.
        if nn.inputs.iter().filter(|i| **i == out).count() != 1
            || !nn.implicit_inputs.is_empty()
            || nn.domain != "ai.onnx"
            || nn.inputs.first() != Some(&out)
        {
            return false;
        }
        let channels = w_dims[0];
        let per_channel = |dims: &[i64]| -> bool {
            if dims.is_empty() {
                return true;
            }
            let axis = if dims.len() == w_dims.len() {
                if dims[0] != 1 {
                    return false;
                }
                1
            } else if dims.len() + 1 == w_dims.len() {
                0
            } else {
                return false;
            };
            dims[axis] == channels && dims.iter().enumerate().all(|(i, &d)| i == axis || d == 1)
        };
        let ok = match nn.op.as_str() {
            "Add" | "Mul" => {
                matches!(nn.since, Some(7 | 13 | 14))
                    && nn.inputs.len() == 2
                    && session
                        .initializer(gi, &nn.inputs[1])
                        .filter(|i| !i.overridable)
                        .is_some_and(|i| i.elem == w_elem && per_channel(&i.dims))
            }
            "BatchNormalization" => {
                matches!(nn.since, Some(7 | 9 | 14 | 15))
                    && nn.inputs.len() == 5
                    && nn.outputs.iter().skip(1).all(String::is_empty)
                    && nn.inputs[1..].iter().all(|p| {
                        session
                            .initializer(gi, p)
                            .filter(|i| !i.overridable)
                            .is_some_and(|i| i.dims == [channels])
                    })
            }
            _ => false,
        };
        if !ok {
            return false;
        }
        let new_out = nn.outputs[0].clone();
        let bias = match nn.op.as_str() {
            "Add" => Some(nn.inputs[1].clone()),
            "BatchNormalization" => Some(nn.inputs[2].clone()),
            _ => None,
        };
        let conv = &mut session.graphs[gi].nodes[ni];
        if conv.inputs.get(2).is_none_or(String::is_empty)
            && let Some(b) = bias
        {
            conv.inputs.truncate(2);
            conv.inputs.push(b.clone());
            idx.uses.entry(b).or_default().push(ni);
        }
        conv.outputs[0] = new_out.clone();
        idx.producer.insert(new_out, ni);
        Self::remove(session, gi, next);
        true
    }

    /// `NoopElimination`: x+0, 0+x, x-0, x*1, 1*x, x/1 with a one-element constant.
    fn noop_elimination(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        if node.inputs.len() != 2 {
            return false;
        }
        let op = node.op.clone();
        let out = node.outputs.first().cloned().unwrap_or_default();
        let ins = node.inputs.clone();
        let candidates: &[usize] = match op.as_str() {
            "Add" | "Mul" => &[1, 0],
            _ => &[1],
        };
        for &c in candidates {
            let other = &ins[1 - c];
            if Self::is_constant_init(session, gi, other) {
                continue;
            }
            let Some(v) = self.constant(session, gi, &ins[c]) else {
                continue;
            };
            if v.len() != 1 {
                continue;
            }
            let neutral = if op == "Add" || op == "Sub" { 0.0 } else { 1.0 };
            if v.as_f64()[0] != neutral {
                continue;
            }
            let same_type = session.type_of(gi, other) == Some(&Type::Tensor(v.elem));
            let rank_ok = session
                .shape_of(gi, other)
                .is_some_and(|s| s.len() >= v.dims.len());
            if !same_type || !rank_ok || idx.outputs.contains(&out) {
                continue;
            }
            let other = other.clone();
            return Self::bypass(session, gi, ni, idx, &other);
        }
        false
    }

    // ---------------------------------------------------------------- CSE

    fn cse(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
        seen: &mut FxMap<Vec<u8>, usize>,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        // ORT's CSE never merges an ai.onnx DequantizeLinear: each QDQ node unit keeps its own
        // (`EnsureUniqueDQForNodeUnit`; measured on tests/fixtures/realworld/qdq*).
        let dq = node.domain == "ai.onnx" && node.op == "DequantizeLinear";
        if dq || !node.subgraphs.is_empty() || !is_deterministic(&node.domain, &node.op) {
            return false;
        }
        let mut key = Vec::new();
        for s in [&node.domain, &node.op] {
            key.extend_from_slice(s.as_bytes());
            key.push(0);
        }
        key.extend_from_slice(&node.since.unwrap_or(-1).to_le_bytes());
        key.extend_from_slice(&(node.outputs.len() as u64).to_le_bytes());
        for i in &node.inputs {
            key.extend_from_slice(i.as_bytes());
            key.push(1);
        }
        // Up to 1.24 a tensor attribute whose data is not in `raw_data` (e.g. `float_data`)
        // never compares equal, so its node is never merged (oracle: ConstantOfShape with a
        // `float_data` value merges from 1.25.1 on only).
        if !self.table.release_at_least(1, 25)
            && node.attrs.iter().any(|a| {
                a.t.as_ref()
                    .is_some_and(|t| t.raw_data.as_ref().is_none_or(|r| r.is_empty()))
            })
        {
            return false;
        }
        let mut attrs: Vec<_> = node.attrs.iter().collect();
        attrs.sort_by(|a, b| a.name().cmp(b.name()));
        for a in attrs {
            key.extend_from_slice(&a.encode_to_vec());
            key.push(2);
        }
        match seen.get(&key) {
            Some(&rep) if rep != ni && !session.graphs[gi].nodes[rep].removed => {
                let outs = node.outputs.clone();
                if outs.iter().any(|o| idx.outputs.contains(o)) {
                    return false;
                }
                let rep_outs = session.graphs[gi].nodes[rep].outputs.clone();
                for (o, r) in outs.iter().zip(&rep_outs) {
                    if o.is_empty() {
                        continue;
                    }
                    if r.is_empty() {
                        return false;
                    }
                }
                for (o, r) in outs.iter().zip(&rep_outs) {
                    if !o.is_empty() {
                        Self::replace_uses(session, gi, idx, o, r);
                    }
                }
                Self::remove(session, gi, ni);
                true
            }
            _ => {
                seen.insert(key, ni);
                false
            }
        }
    }

    // ---------------------------------------------------------------- constant folding

    fn fold(&mut self, session: &mut Session, gi: usize, ni: usize, idx: &mut Index) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        if node.op == "If" && node.domain == "ai.onnx" {
            return self.inline_if(session, gi, ni, idx);
        }
        if node.op == "Shape" && node.domain == "ai.onnx" {
            let Some(x) = node
                .inputs
                .first()
                .and_then(|i| session.shape_of(gi, i))
                .cloned()
            else {
                return false;
            };
            let r = x.len() as i64;
            let clamp = |v: i64| {
                let v = if v < 0 { v + r } else { v };
                v.clamp(0, r)
            };
            let (st, en) = if node.since.unwrap_or(0) >= 15 {
                (
                    clamp(node.attr_i("start").unwrap_or(0)),
                    clamp(node.attr_i("end").unwrap_or(r)),
                )
            } else {
                (0, r)
            };
            let dims: Option<Vec<i64>> = x[st as usize..en.max(st) as usize]
                .iter()
                .copied()
                .collect();
            let Some(dims) = dims else {
                return false;
            };
            let out = node.outputs.first().cloned().unwrap_or_default();
            self.add_initializer(session, gi, &out, Some(Tensor::i64_1d(dims)));
            Self::remove_dead_inputs(session, gi, ni, idx);
            Self::remove(session, gi, ni);
            return true;
        }
        if node.domain != "ai.onnx"
            || !is_deterministic(&node.domain, &node.op)
            || !node.subgraphs.is_empty()
            || node.op == "DequantizeLinear"
        {
            return false;
        }
        if !node
            .inputs
            .iter()
            .all(|i| i.is_empty() || Self::is_constant_init(session, gi, i))
        {
            return false;
        }
        if node
            .existing_outputs()
            .any(|(_, o)| !matches!(session.type_of(gi, o), Some(Type::Tensor(_)) | None))
        {
            return false;
        }
        let schema = infer::resolve_schema(self.table, &self.versions, &node.domain, &node.op).ok();
        if crate::placer::lookup(self.table, Ep::Cpu, session, gi, node, schema).is_err() {
            return false;
        }
        // Evaluate when small and supported; otherwise keep the inferred shape only.
        let names = node.inputs.clone();
        let mut owned: Vec<Option<Tensor>> = Vec::with_capacity(names.len());
        let mut all_known = true;
        for n in &names {
            if n.is_empty() {
                owned.push(None);
            } else {
                let v = self.constant(session, gi, n);
                all_known &= v.is_some();
                owned.push(v);
            }
        }
        let node = &session.graphs[gi].nodes[ni];
        let results = if all_known {
            let refs: Vec<Option<&Tensor>> = owned.iter().map(Option::as_ref).collect();
            eval::eval(
                &NodeView {
                    op: &node.op,
                    domain: &node.domain,
                    since: node.since.unwrap_or(0),
                    attrs: &node.attrs,
                },
                &refs,
            )
        } else {
            None
        };
        if results.is_none() {
            shapes::infer_and_record(session, gi, ni, &mut self.values);
        }
        let outs = session.graphs[gi].nodes[ni].outputs.clone();
        let mut results = results.map(Vec::into_iter);
        for o in &outs {
            let v = results.as_mut().and_then(Iterator::next);
            if !o.is_empty() {
                self.add_initializer(session, gi, o, v);
            }
        }
        Self::remove_dead_inputs(session, gi, ni, idx);
        Self::remove(session, gi, ni);
        true
    }

    /// `If` with a constant condition (ORT's `ConstantFoldIfNode` and `Graph::InlineIfSubgraph`,
    /// `core/optimizer/constant_folding.cc`, `core/graph/graph.cc`): the chosen branch's nodes
    /// are appended to this graph in the branch's `GraphViewer` order and the `If` is removed.
    /// Names follow ORT: a prefix `GenerateNodeName("_if_then_branch")` (or `_if_else_branch`),
    /// each node named `GenerateNodeName(<prefix>_<op>)`, each branch initializer and node
    /// output renamed `GenerateNodeArgName(<prefix>_<name>)`, except the branch outputs, which
    /// take the names of the `If`'s outputs; outer-scope values keep their names. All of these
    /// draw on the graph's one `_token_<k>` counter.
    fn inline_if(&mut self, session: &mut Session, gi: usize, ni: usize, idx: &mut Index) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        let Some(cond) = node.inputs.first().cloned() else {
            return false;
        };
        if !Self::is_constant_init(session, gi, &cond) {
            return false;
        }
        let Some(v) = self.constant(session, gi, &cond) else {
            return false;
        };
        if v.len() != 1 {
            return false;
        }
        let then = v.as_i64()[0] != 0;
        let branch = if then { "then_branch" } else { "else_branch" };
        let node = &session.graphs[gi].nodes[ni];
        let Some(sg) = node
            .subgraphs
            .iter()
            .find(|(a, _)| a == branch)
            .map(|(_, s)| *s)
        else {
            return false;
        };
        let if_outputs = node.outputs.clone();
        let sub_outputs = session.graphs[sg].outputs.clone();
        if sub_outputs.len() != if_outputs.len() {
            return false;
        }
        let order = ort_topological_order(session, sg);
        let sub = &session.graphs[sg];
        // The branch must be self-contained for ORT to inline it: every input of its nodes is
        // an outer-scope value, a branch initializer or an earlier node's output (ORT throws
        // otherwise, failing the session; here the `If` is left alone).
        let mut known: HashSet<&str> = sub.initializers.keys().map(String::as_str).collect();
        for &k in &order {
            let n = &sub.nodes[k];
            if n.inputs.iter().any(|i| {
                !i.is_empty()
                    && !known.contains(i.as_str())
                    && (sub.inputs.iter().any(|x| x == i)
                        || sub
                            .nodes
                            .iter()
                            .any(|m| !m.removed && m.outputs.contains(i)))
            }) {
                return false;
            }
            known.extend(
                n.outputs
                    .iter()
                    .filter(|o| !o.is_empty())
                    .map(String::as_str),
            );
        }

        let mut names = NameGen::new(&session.graphs[gi]);
        let mut generated: Vec<String> = Vec::new();
        let prefix = names.node(&format!("_if_{branch}"));
        generated.push(prefix.clone());
        // Branch output i is the If's output i (the first mention wins, as in ORT).
        let mut rename: HashMap<String, String> = HashMap::default();
        for (o, target) in sub_outputs.iter().zip(&if_outputs) {
            rename.entry(o.clone()).or_insert_with(|| target.clone());
        }
        let sub = session.graphs[sg].clone();
        let mut inits: Vec<&String> = sub.initializers.keys().collect();
        inits.sort_unstable();
        for name in inits {
            if !rename.contains_key(name) {
                let new = names.value(&format!("{prefix}_{name}"));
                rename.insert(name.clone(), new);
            }
        }
        for &k in &order {
            for o in sub.nodes[k].outputs.iter().filter(|o| !o.is_empty()) {
                if !rename.contains_key(o) {
                    let new = names.value(&format!("{prefix}_{o}"));
                    rename.insert(o.clone(), new);
                }
            }
        }
        let map = |n: &String| rename.get(n).cloned().unwrap_or_else(|| n.clone());
        for (name, init) in &sub.initializers {
            let new = map(name);
            let mut init = init.clone();
            init.tensor.name = Some(new.clone());
            let g = &mut session.graphs[gi];
            g.types.insert(new.clone(), Type::Tensor(init.elem));
            g.shapes.insert(
                new.clone(),
                init.dims.iter().map(|&d| (d >= 0).then_some(d)).collect(),
            );
            self.values.forget(gi, &new);
            if gi == 0 {
                self.shareable.insert(new.clone());
            }
            g.init_order.push(new.clone());
            g.initializers.insert(new, init);
        }
        for (name, t) in &sub.types {
            session.graphs[gi]
                .types
                .entry(map(name))
                .or_insert_with(|| t.clone());
        }
        for (name, s) in &sub.shapes {
            session.graphs[gi]
                .shapes
                .entry(map(name))
                .or_insert_with(|| s.clone());
        }
        for &k in &order {
            let mut n = sub.nodes[k].clone();
            n.name = names.node(&format!("{prefix}_{}", n.op));
            generated.push(n.name.clone());
            // ORT drops trailing missing inputs and outputs.
            while n.inputs.last().is_some_and(String::is_empty) {
                n.inputs.pop();
            }
            while n.outputs.last().is_some_and(String::is_empty) {
                n.outputs.pop();
            }
            n.inputs = n
                .inputs
                .iter()
                .map(|i| if i.is_empty() { i.clone() } else { map(i) })
                .collect();
            n.outputs = n
                .outputs
                .iter()
                .map(|o| if o.is_empty() { o.clone() } else { map(o) })
                .collect();
            n.implicit_inputs = n.implicit_inputs.iter().map(map).collect();
            let new_index = session.graphs[gi].nodes.len();
            for (_, s) in &n.subgraphs {
                session.graphs[*s].parent = Some((gi, new_index));
                for (from, to) in &rename {
                    if from != to {
                        Self::rename_in_subgraph(session, *s, from, to);
                    }
                }
            }
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                idx.producer.insert(o.clone(), new_index);
            }
            for i in n.inputs.iter().chain(&n.implicit_inputs) {
                idx.uses.entry(i.clone()).or_default().push(new_index);
            }
            session.graphs[gi].nodes.push(n);
            session.graphs[sg].nodes[k].removed = true;
            session.graphs[sg].nodes[k].subgraphs.clear();
        }
        // A branch output that no branch node or initializer defines (an outer-scope value
        // passed through): ORT leaves the If's output undefined. Keep the graph well formed
        // with an Identity so that the simulation can go on.
        let produced: HashSet<&String> = sub
            .nodes
            .iter()
            .filter(|n| !n.removed)
            .flat_map(|n| n.outputs.iter())
            .chain(sub.initializers.keys())
            .collect();
        let mut passthrough: Vec<(String, String)> = Vec::new();
        for (o, target) in sub_outputs.iter().zip(&if_outputs) {
            if target.is_empty() || produced.contains(o) && rename.get(o) == Some(target) {
                continue;
            }
            passthrough.push((map(o), target.clone()));
        }
        let since = infer::resolve_schema(self.table, &self.versions, "ai.onnx", "Identity")
            .ok()
            .map(|s| s.since);
        for (src, target) in passthrough {
            if src == target {
                continue;
            }
            let new_index = session.graphs[gi].nodes.len();
            idx.producer.insert(target.clone(), new_index);
            idx.uses.entry(src.clone()).or_default().push(new_index);
            let name = names.node(&format!("{prefix}_Identity"));
            generated.push(name.clone());
            session.graphs[gi].nodes.push(SNode {
                name,
                op: "Identity".into(),
                domain: "ai.onnx".into(),
                since,
                inputs: vec![src],
                outputs: vec![target],
                attrs: Vec::new(),
                subgraphs: Vec::new(),
                implicit_inputs: Vec::new(),
                ep: None,
                origin: None,
                removed: false,
            });
        }
        let g = &mut session.graphs[gi];
        g.name_counter = names.counter;
        g.generated_names.extend(generated);
        Self::remove(session, gi, ni);
        true
    }

    // ---------------------------------------------------------------- ConstantSharing

    /// `ConstantSharing` (`core/optimizer/constant_sharing.cc`), main graph only: constant
    /// initializers of type float, float16, double, int32 or int64 with at most
    /// [`SHARING_MAX_ELEMENTS`] elements that are equal in type, shape and values are merged
    /// into one, so that CSE can merge the nodes reading them. Initializers read by a subgraph
    /// or that are graph outputs are left alone. The oracle (1.23.2–1.31.1) shows what the
    /// released code does beyond the public source: tensors up to 8 elements of any rank are
    /// shared (9 are not), values compare bit for bit, only initializers held as tensor protos
    /// take part (not those folding or fusions created), and one of the original names is
    /// kept, the one ORT registered last (its initializer map iterates newest first).
    fn constant_sharing(&mut self, session: &mut Session, gi: usize, idx: &mut Index) -> bool {
        if session.graphs[gi].parent.is_some() {
            return false;
        }
        let mut seen: HashSet<&str> = HashSet::default();
        let mut order: Vec<String> = Vec::new();
        let g = &session.graphs[gi];
        for name in g.init_order.iter().rev() {
            if g.initializers.contains_key(name) && seen.insert(name.as_str()) {
                order.push(name.clone());
            }
        }
        if order.len() < g.initializers.len() {
            let mut rest: Vec<&String> = g
                .initializers
                .keys()
                .filter(|k| !seen.contains(k.as_str()))
                .collect();
            rest.sort_unstable();
            order.extend(rest.into_iter().cloned());
        }
        let mut shared: FxMap<(i32, Vec<i64>, Vec<u64>), String> = FxMap::default();
        let mut changed = false;
        for name in order {
            let Some(init) = session.graphs[gi].initializers.get(&name) else {
                continue;
            };
            if !self.shareable.contains(&name)
                || init.overridable
                || init.dims.iter().any(|&d| d < 0)
                || init.elements().is_none_or(|n| n > SHARING_MAX_ELEMENTS)
            {
                continue;
            }
            let elem = init.elem;
            let dims = init.dims.clone();
            let int = elem == D::Int32 as i32 || elem == D::Int64 as i32;
            let float =
                elem == D::Float as i32 || elem == D::Float16 as i32 || elem == D::Double as i32;
            if !(int || float) || idx.outputs.contains(&name) {
                continue;
            }
            let users = idx.users(session, gi, &name);
            if users.is_empty()
                || users
                    .iter()
                    .any(|&u| session.graphs[gi].nodes[u].implicit_inputs.contains(&name))
            {
                continue;
            }
            let Some(v) = self.constant(session, gi, &name) else {
                continue;
            };
            let bits: Vec<u64> = if int {
                v.as_i64().into_iter().map(|x| x as u64).collect()
            } else {
                // Compared bit for bit (oracle: NaNs merge, -0.0 and 0.0 do not).
                v.as_f64().into_iter().map(f64::to_bits).collect()
            };
            match shared.get(&(elem, dims.clone(), bits.clone())) {
                None => {
                    shared.insert((elem, dims, bits), name);
                }
                Some(rep) => {
                    let rep = rep.clone();
                    Self::replace_uses(session, gi, idx, &name, &rep);
                    session.graphs[gi].initializers.remove(&name);
                    self.values.forget(gi, &name);
                    changed = true;
                }
            }
        }
        changed
    }

    // ---------------------------------------------------------------- MatMulAddFusion

    /// `MatMulAddFusion` (`core/optimizer/matmul_add_fusion.cc`, the same in 1.23–1.31 by the
    /// oracle): a float/float16/bfloat16 `MatMul` (since 1, 9, 13) whose only edge goes to an
    /// `Add` (since 7, 13, 14) of the same type, with a rank-2 second input, becomes a `Gemm`
    /// named `GenerateNodeName(<matmul>/MatMulAddFusion)` reading the Add's other input as bias.
    /// The bias must be `[N]`, or for a 2-D first input also `[1, N]`, `[M, 1]` or `[M, N]`.
    /// Another rank of the first input needs its shape and the weight's fully known: the Gemm
    /// then sits between two new Reshapes, `gemm_input_reshape` (to `[M, K]`) and
    /// `gemm_output_reshape` (back), each with a shape initializer and a new value, all named
    /// by `GenerateNodeName`/`GenerateNodeArgName`. At level 1 nothing is kept for attention.
    fn matmul_add_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
        names: &mut Option<NameGen>,
    ) -> bool {
        let mm = &session.graphs[gi].nodes[ni];
        if mm.op != "MatMul"
            || mm.domain != "ai.onnx"
            || !matches!(mm.since, Some(1 | 9 | 13))
            || mm.inputs.len() != 2
            || mm.outputs.len() != 1
        {
            return false;
        }
        let out = mm.outputs[0].clone();
        if idx.outputs.contains(&out) {
            return false;
        }
        let users = idx.users(session, gi, &out);
        let [add] = users[..] else {
            return false;
        };
        let an = &session.graphs[gi].nodes[add];
        let edges = an.inputs.iter().filter(|i| **i == out).count()
            + an.implicit_inputs.iter().filter(|i| **i == out).count();
        if edges != 1
            || an.op != "Add"
            || an.domain != "ai.onnx"
            || !matches!(an.since, Some(7 | 13 | 14))
            || an.inputs.len() != 2
            || an.outputs.len() != 1
        {
            return false;
        }
        let a = mm.inputs[0].clone();
        let w = mm.inputs[1].clone();
        let ty = session.type_of(gi, &a).cloned();
        let float_ok = matches!(ty, Some(Type::Tensor(e)) if e == D::Float as i32 || e == D::Float16 as i32 || e == D::Bfloat16 as i32);
        if !float_ok || session.type_of(gi, &an.inputs[0]) != ty.as_ref() {
            return false;
        }
        let (Some(a_shape), Some(w_shape)) = (
            session.shape_of(gi, &a).cloned(),
            session.shape_of(gi, &w).cloned(),
        ) else {
            return false;
        };
        if w_shape.len() != 2 {
            return false;
        }
        let need_reshape = a_shape.len() != 2;
        let dim_n = w_shape[1];
        let mut reshape: Option<(i64, i64, Vec<i64>)> = None;
        if need_reshape {
            let Some(dims) = a_shape.iter().copied().collect::<Option<Vec<i64>>>() else {
                return false;
            };
            let (Some(k), Some(n)) = (w_shape[0], w_shape[1]) else {
                return false;
            };
            let m: i64 = dims[..dims.len().saturating_sub(1)].iter().product();
            let mut back = dims;
            if let Some(last) = back.last_mut() {
                *last = n;
            }
            reshape = Some((m, k, back));
        }
        let bias_idx = usize::from(an.inputs[0] == out);
        let bias = an.inputs[bias_idx].clone();
        let Some(b_shape) = session.shape_of(gi, &bias).cloned() else {
            return false;
        };
        let eq = |x: Option<i64>, y: Option<i64>| x.is_some() && x == y;
        let valid = (b_shape.len() == 1 && eq(b_shape[0], dim_n))
            || (!need_reshape
                && b_shape.len() == 2
                && b_shape[0] == Some(1)
                && eq(b_shape[1], dim_n))
            || (!need_reshape
                && b_shape.len() == 2
                && eq(b_shape[0], a_shape[0])
                && (b_shape[1] == Some(1) || eq(b_shape[1], dim_n)));
        if !valid {
            return false;
        }
        let add_out = an.outputs[0].clone();
        let mm_name = mm.name.clone();
        let elem = match ty {
            Some(Type::Tensor(e)) => e,
            _ => return false,
        };
        let names = names.get_or_insert_with(|| NameGen::new(&session.graphs[gi]));
        let reshape_since = infer::resolve_schema(self.table, &self.versions, "ai.onnx", "Reshape")
            .ok()
            .map(|s| s.since);
        let gemm_since = infer::resolve_schema(self.table, &self.versions, "ai.onnx", "Gemm")
            .ok()
            .map(|s| s.since);
        let mut new_nodes: Vec<SNode> = Vec::new();
        let mut gemm_in = a.clone();
        let mut gemm_out = add_out.clone();
        if let Some((m, k, back)) = reshape {
            for (is_input, shape) in [(true, vec![m, k]), (false, back)] {
                let base = if is_input {
                    "gemm_input"
                } else {
                    "gemm_output"
                };
                let shape_name = names.node(&format!("{base}_shape"));
                names.reserve_value(&shape_name);
                let arg = names.value(&format!("{base}_reshape_arg"));
                let node_name = names.node(&format!("{base}_reshape"));
                let g = &mut session.graphs[gi];
                g.generated_names.insert(node_name.clone());
                g.types.insert(arg.clone(), Type::Tensor(elem));
                g.shapes.insert(
                    arg.clone(),
                    vec![Some(m), if is_input { Some(k) } else { dim_n }],
                );
                self.add_initializer(session, gi, &shape_name, Some(Tensor::i64_1d(shape)));
                let (input, output) = if is_input {
                    gemm_in = arg.clone();
                    (a.clone(), arg)
                } else {
                    gemm_out = arg.clone();
                    (arg, add_out.clone())
                };
                new_nodes.push(SNode {
                    name: node_name,
                    op: "Reshape".into(),
                    domain: "ai.onnx".into(),
                    since: reshape_since,
                    inputs: vec![input, shape_name],
                    outputs: vec![output],
                    attrs: Vec::new(),
                    subgraphs: Vec::new(),
                    implicit_inputs: Vec::new(),
                    ep: None,
                    origin: None,
                    removed: false,
                });
            }
        }
        let gemm_name = names.node(&format!("{mm_name}/MatMulAddFusion"));
        session.graphs[gi].generated_names.insert(gemm_name.clone());
        let gemm = SNode {
            name: gemm_name,
            op: "Gemm".into(),
            domain: "ai.onnx".into(),
            since: gemm_since,
            inputs: vec![gemm_in, w, bias],
            outputs: vec![gemm_out],
            attrs: Vec::new(),
            subgraphs: Vec::new(),
            implicit_inputs: Vec::new(),
            ep: None,
            origin: session.graphs[gi].nodes[ni].origin,
            removed: false,
        };
        new_nodes.push(gemm);
        Self::remove(session, gi, ni);
        Self::remove(session, gi, add);
        self.append_nodes(session, gi, idx, new_nodes);
        true
    }

    /// The ops and since-versions `FuseContiguousReshapes` chains: Reshape 5, 13, 14 and
    /// Squeeze/Unsqueeze 1, 11, 13 up to 1.24; from 1.25 also Reshape 19, 21 and
    /// Squeeze/Unsqueeze 21 (oracle probes: opset-19/21 chains fuse from 1.25.1 on).
    fn reshape_like(table: &KernelTable, op: &str, since: Option<i64>) -> bool {
        let new = table.release_at_least(1, 25);
        match (op, since) {
            ("Reshape", Some(5 | 13 | 14)) | ("Squeeze" | "Unsqueeze", Some(1 | 11 | 13)) => true,
            ("Reshape", Some(19 | 21)) | ("Squeeze" | "Unsqueeze", Some(21)) => new,
            _ => false,
        }
    }

    /// Appends new nodes to graph `gi`, keeping the index up to date.
    fn append_nodes(
        &mut self,
        session: &mut Session,
        gi: usize,
        idx: &mut Index,
        nodes: Vec<SNode>,
    ) {
        for n in nodes {
            let k = session.graphs[gi].nodes.len();
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                idx.producer.insert(o.clone(), k);
            }
            for i in n.inputs.iter().filter(|i| !i.is_empty()) {
                idx.uses.entry(i.clone()).or_default().push(k);
            }
            session.graphs[gi].nodes.push(n);
        }
    }

    // ---------------------------------------------------------------- ReshapeFusion

    /// `Reshape(x, Concat(parts))` where every part is a constant or the gathered dim of
    /// `Shape(x)` at its own position: the shape becomes a constant initializer.
    fn reshape_fusion(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
    ) -> bool {
        let node = &session.graphs[gi].nodes[ni];
        // The same since-versions as `FuseContiguousReshapes`: a Reshape-19/21 (opset 19+) is
        // fused only from 1.25 on (oracle probes: bert at opset 20 keeps its shape chain on
        // 1.24.4, loses it on 1.31.1).
        if node.op != "Reshape"
            || node.domain != "ai.onnx"
            || node.inputs.len() < 2
            || !Self::reshape_like(self.table, "Reshape", node.since)
        {
            return false;
        }
        let data = node.inputs[0].clone();
        let shape_in = node.inputs[1].clone();
        let Some(concat) = idx.producer(session, gi, &shape_in) else {
            return false;
        };
        let cn = &session.graphs[gi].nodes[concat];
        if cn.op != "Concat" || cn.domain != "ai.onnx" || idx.outputs.contains(&shape_in) {
            return false;
        }
        if idx.users(session, gi, &shape_in).len() != 1 {
            return false;
        }
        let parts = cn.inputs.clone();
        let mut value: Vec<i64> = Vec::new();
        for p in &parts {
            if let Some(v) = self.constant(session, gi, p) {
                if v.dims.len() > 1 {
                    return false;
                }
                value.extend(v.as_i64());
                continue;
            }
            // Unsqueeze(Gather(Shape(data), i)) at position i, or a known dim.
            let Some(u) = idx.producer(session, gi, p) else {
                return false;
            };
            let un = &session.graphs[gi].nodes[u];
            let pos = value.len() as i64;
            let ok = (|| -> Option<bool> {
                if un.op != "Unsqueeze" || !Self::reshape_like(self.table, "Unsqueeze", un.since) {
                    return Some(false);
                }
                let g = idx.producer(session, gi, un.inputs.first()?)?;
                let gn = &session.graphs[gi].nodes[g];
                if gn.op != "Gather" || gn.attr_i("axis").unwrap_or(0) != 0 {
                    return Some(false);
                }
                let i = self.values.get(session, gi, gn.inputs.get(1)?)?.as_i64();
                if i.len() != 1 {
                    return Some(false);
                }
                let s = idx.producer(session, gi, gn.inputs.first()?)?;
                let sn = &session.graphs[gi].nodes[s];
                if sn.op != "Shape" || sn.attr_i("start").unwrap_or(0) != 0 {
                    return Some(false);
                }
                let root = sn.inputs.first()?;
                let rank = session.shape_of(gi, root).map(|s| s.len() as i64);
                let index = if i[0] < 0 { i[0] + rank? } else { i[0] };
                // From 1.25 on the Shape may read the Reshape's input through a DQ or a DQ copy
                // (`EnsureUniqueDQForNodeUnit`). Oracle: 1.31.1 fuses so, 1.23.2 and 1.24.4 do not;
                // the release in between is assumed to be 1.25, as for the Reshape-19 gate.
                let same = root == &data
                    || (self.table.release_at_least(1, 25)
                        && crate::placer::ensure_unique_dq_for_node_unit::same_shape_through_dq(
                            session,
                            gi,
                            root,
                            &data,
                            &|v| idx.producer(session, gi, v),
                        ));
                Some(same && index == pos)
            })()
            .unwrap_or(false);
            if !ok {
                return false;
            }
            value.push(0);
        }
        if value.iter().filter(|&&v| v == -1).count() > 1 {
            return false;
        }
        self.add_initializer(session, gi, &shape_in, Some(Tensor::i64_1d(value)));
        // The Concat goes first, so that the Shape/Gather/Unsqueeze chains it alone read are
        // seen dead and removed with it, as ORT removes the matched subgraph.
        Self::remove(session, gi, concat);
        Self::remove_dead_inputs(session, gi, concat, idx);
        true
    }

    /// `ReshapeFusion::FuseContiguousReshapes` (`core/optimizer/reshape_fusion.cc`): from a
    /// `Reshape`, follow single-edge, non-graph-output links through `Reshape`/`Squeeze`/
    /// `Unsqueeze` (the since-versions of [`Self::reshape_like`]); cut the chain after its last node
    /// with a fully known output shape; two or more nodes become one `Reshape` named
    /// `GenerateNodeName(<first>_new_reshape)` with the shape initializer
    /// `GenerateNodeArgName(<first>_new_shape)`.
    fn fuse_contiguous_reshapes(
        &mut self,
        session: &mut Session,
        gi: usize,
        ni: usize,
        idx: &mut Index,
        names: &mut Option<NameGen>,
    ) -> bool {
        let first = &session.graphs[gi].nodes[ni];
        if first.removed
            || first.op != "Reshape"
            || first.domain != "ai.onnx"
            || !Self::reshape_like(self.table, "Reshape", first.since)
        {
            return false;
        }
        let mut chain = vec![ni];
        loop {
            let cur = &session.graphs[gi].nodes[chain[chain.len() - 1]];
            let Some(out) = cur.outputs.first().filter(|o| !o.is_empty()) else {
                break;
            };
            if idx.outputs.contains(out) || cur.outputs.len() != 1 {
                break;
            }
            let users = idx.users(session, gi, out);
            let [next] = users[..] else {
                break;
            };
            let nn = &session.graphs[gi].nodes[next];
            let edges = nn.inputs.iter().filter(|i| *i == out).count()
                + nn.implicit_inputs.iter().filter(|i| *i == out).count();
            let ok = edges == 1
                && nn.domain == "ai.onnx"
                && Self::reshape_like(self.table, &nn.op, nn.since);
            if !ok || chain.contains(&next) {
                break;
            }
            chain.push(next);
        }
        let mut shape: Option<Vec<i64>> = None;
        while let Some(&last) = chain.last() {
            let out = session.graphs[gi].nodes[last].outputs.first().cloned();
            if let Some(s) = out
                .and_then(|o| session.shape_of(gi, &o).cloned())
                .and_then(|s| s.into_iter().collect::<Option<Vec<i64>>>())
            {
                shape = Some(s);
                break;
            }
            chain.pop();
        }
        let Some(shape) = shape.filter(|_| chain.len() >= 2) else {
            return false;
        };
        let first = &session.graphs[gi].nodes[ni];
        let base = first.name.clone();
        let data = first.inputs.first().cloned().unwrap_or_default();
        let since = first.since;
        let last = chain[chain.len() - 1];
        let out = session.graphs[gi].nodes[last].outputs[0].clone();
        let names = names.get_or_insert_with(|| NameGen::new(&session.graphs[gi]));
        let shape_name = names.value(&format!("{base}_new_shape"));
        let name = names.node(&format!("{base}_new_reshape"));
        session.graphs[gi].generated_names.insert(name.clone());
        self.add_initializer(session, gi, &shape_name, Some(Tensor::i64_1d(shape)));
        let origin = session.graphs[gi].nodes[ni].origin;
        for &k in &chain {
            Self::remove(session, gi, k);
        }
        let node = SNode {
            name,
            op: "Reshape".into(),
            domain: "ai.onnx".into(),
            since,
            inputs: vec![data, shape_name],
            outputs: vec![out],
            attrs: Vec::new(),
            subgraphs: Vec::new(),
            implicit_inputs: Vec::new(),
            ep: None,
            origin,
            removed: false,
        };
        self.append_nodes(session, gi, idx, vec![node]);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_ops() {
        assert!(is_deterministic("ai.onnx", "Add"));
        assert!(!is_deterministic("ai.onnx", "RandomNormal"));
        assert!(!is_deterministic("ai.onnx.ml", "LabelEncoder"));
        assert!(is_deterministic("com.microsoft", "QuantizeLinear"));
    }
}
