//! The graph optimisations that run before partitioning and move the CPU/CUDA boundary
//! (ORT's level-1 transformers), simulated per level: the rewrite rules (`EliminateIdentity`,
//! `EliminateSlice`, `EliminateDropout`, `ExpandElimination`, `CastElimination`,
//! `PreShapeNodeElimination`, `NoopElimination`, `NotWhereFusion`), common subexpression
//! elimination, `ConstantFolding` (incl. `Shape` over static shapes and `If` with a constant
//! condition) and `ReshapeFusion`, repeated until nothing changes (at most 10 steps).

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
    };
    shapes::infer_graph(session, 0, &mut opt.values);
    for _ in 0..MAX_STEPS {
        let mut changed = false;
        for pass in [Pass::Rules, Pass::Cse, Pass::Fold, Pass::ReshapeFusion] {
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
    Cse,
    Fold,
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
fn ort_topological_order(session: &Session, gi: usize) -> Vec<usize> {
    let g = &session.graphs[gi];
    let mut producer: FxMap<&str, usize> = FxMap::default();
    for (i, n) in g.live_nodes() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            producer.insert(o.as_str(), i);
        }
    }
    let mut inputs: Vec<Vec<usize>> = vec![Vec::new(); g.nodes.len()];
    let mut has_output_node = vec![false; g.nodes.len()];
    for (i, n) in g.live_nodes() {
        let mut deps: Vec<usize> = n
            .inputs
            .iter()
            .chain(&n.implicit_inputs)
            .filter_map(|v| producer.get(v.as_str()).copied())
            .filter(|&p| p != i)
            .collect();
        deps.sort_unstable();
        deps.dedup();
        for &d in &deps {
            has_output_node[d] = true;
        }
        inputs[i] = deps;
    }
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
        for &d in &inputs[n] {
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
            _ => (
                Index::build(session, gi),
                infer::topological_order(session, gi),
                ort_topological_order(session, gi),
            ),
        };
        let mut cse: FxMap<Vec<u8>, usize> = FxMap::default();
        // After a ReshapeFusion, ORT's next Resolve infers the graph's shapes again (the
        // Reshapes now have constant shapes); the next folding pass does the same here.
        let mut updated = pass == Pass::Fold && self.reinfer.remove(&gi);
        let order = if pass == Pass::Cse { &dfs } else { &kahn };
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
                    let d = self.reshape_fusion(session, gi, ni, &mut idx);
                    if d {
                        self.reinfer.insert(gi);
                    }
                    d
                }
            };
            changed |= did;
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
            "Add" | "Sub" | "Mul" | "Div" => self.noop_elimination(session, gi, ni, idx),
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
        if !node.subgraphs.is_empty() || !is_deterministic(&node.domain, &node.op) {
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
        if node.op != "Reshape" || node.domain != "ai.onnx" || node.inputs.len() < 2 {
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
                if un.op != "Unsqueeze" {
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
                Some(root == &data && index == pos)
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
        Self::remove_dead_inputs(session, gi, concat, idx);
        Self::remove(session, gi, concat);
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
