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
use crate::sym::{SymMap as HashMap, SymSet as HashSet};

use prost::Message;

use crate::infer::eval::{self, NodeView, Tensor};
use crate::infer::shapes::{self, Values};
use crate::infer::{self, Type};
use crate::model::DataType as D;
use crate::placer::transformers::transpose;
use crate::placer::{OptLevel, registry};
use crate::session::edit::Editor;
use crate::session::edit::{Order, order_of};
use crate::session::order::{Producers, beside, ort_topological_order_by};
use crate::session::{EdgeEnd, Init, NameGen, SNode, Session};
use crate::sym::Sym;
use crate::tables::{Ep, KernelTable};

type FxMap<K, V> = crate::sym::SymMap<K, V>;
pub(crate) mod common_subexpression_elimination;
pub(crate) mod constant_folding;
pub(crate) mod constant_sharing;
mod conv_add_fusion;
mod conv_bn_fusion;
mod conv_mul_fusion;
mod div_mul_fusion;
mod gemm_sum_fusion;
mod gemm_transpose_fusion;
pub(crate) mod matmul_add_fusion;
mod noop_elimination;
mod pad_fusion;
mod relu_clip_fusion;
pub(crate) mod reshape_fusion;
pub(crate) mod rule_based_graph_transformer;

/// The largest initializer `ConstantSharing` merges (oracle: 8 elements are, 9 are not).
const SHARING_MAX_ELEMENTS: u64 = 8;

/// ORT's `max_num_graph_transformation_steps`.
const MAX_STEPS: usize = 10;

/// Applies the transformers of `level` to the session graph.
///
/// `values` and the shapes recorded in `session` come from the load-time inference; `reinfer`
/// asks for a fresh inference (the graph changed since, by function inlining).
pub fn run(
    session: &mut Session,
    table: &KernelTable,
    level: OptLevel,
    values: Values,
    reinfer: bool,
) {
    if level == OptLevel::Disable || session.graphs.is_empty() {
        return;
    }
    let mut opt = Optimizer {
        table,
        values,
        versions: infer::domain_versions(session, table),
        indices: HashMap::default(),
        reinfer: HashSet::default(),
        given: Vec::new(),
        declined: Vec::new(),
        seen: None,
        shareable: session.graphs[0].initializers.keys().copied().collect(),
        parents: session
            .graphs
            .iter()
            .filter_map(|g| g.parent.map(|p| p.graph()))
            .collect(),
    };
    if reinfer {
        shapes::infer_graph(session, 0, &mut opt.values);
    }
    // ORT's level-1 list, in the registry's order, repeated while anything changes: each
    // entry runs its transformer.
    let passes: Vec<Level1> = registry::simulated(OptLevel::Basic)
        .filter_map(|t| match t.status {
            registry::Status::Simulated(_, registry::Run::Level1(run)) => Some(run),
            _ => None,
        })
        .collect();
    for number in 0..MAX_STEPS {
        let mut changed = false;
        // The QDQ transformers match only Q/DQ nodes: one scan tells which of them can skip
        // their edge indices and orders (most float models skip all four). It is repeated
        // after any pass that changed the graph (QDQPropagation makes a Q beside a lone DQ).
        let [q, dq] = session.live_ops([Sym::QUANTIZE_LINEAR, Sym::DEQUANTIZE_LINEAR]);
        let mut step = Step {
            opt: &mut opt,
            number,
            q,
            dq,
        };
        for run in &passes {
            let did = (run.0)(&mut step, session);
            if did {
                [step.q, step.dq] =
                    session.live_ops([Sym::QUANTIZE_LINEAR, Sym::DEQUANTIZE_LINEAR]);
            }
            changed |= did;
        }
        if !changed {
            break;
        }
    }
    session.compute_implicit_inputs(0);
    // The graphs' editors, for the passes after (the fusions).
    for (_, (idx, ..)) in opt.indices.drain() {
        idx.keep(session);
    }
}

/// A level-1 transformer as its registry entry runs it: one step of the driver over the
/// session (the main graph and, through it, the subgraphs); whether it changed anything.
#[derive(Clone, Copy)]
pub struct Level1(pub(crate) fn(&mut Step<'_, '_>, &mut Session) -> bool);

impl std::fmt::Debug for Level1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Level1")
    }
}

/// One step of the level-1 driver, as a transformer's entry sees it.
pub(crate) struct Step<'o, 't> {
    opt: &'o mut Optimizer<'t>,
    /// The step's number (ORT's transformer manager repeats the level's list while anything
    /// changes): 0 is the first.
    pub(crate) number: usize,
    /// Whether the session has a live QuantizeLinear, a DequantizeLinear (scanned again after
    /// each transformer that changed the graph).
    pub(crate) q: bool,
    pub(crate) dq: bool,
}

impl Step<'_, '_> {
    /// The simulated release's table.
    pub(crate) fn table(&self) -> &KernelTable {
        self.opt.table
    }

    /// A pass of the optimiser's own walk over the main graph (and its subgraphs).
    pub(crate) fn walk(&mut self, session: &mut Session, pass: Pass) -> bool {
        self.opt.pass(session, 0, pass)
    }

    /// A transformer that edits the session graph itself, from the main graph.
    pub(crate) fn edited(
        &mut self,
        session: &mut Session,
        transformer: impl Fn(&mut Session, usize) -> bool,
    ) -> bool {
        self.opt.edited(session, 0, transformer)
    }

    /// The TransposeOptimizer over the main graph (and its subgraphs).
    pub(crate) fn transpose(&mut self, session: &mut Session) -> bool {
        self.opt.transpose(session, 0)
    }
}

/// The passes of the optimiser's own walk, node by node (`ConstantSharing`: over the main
/// graph's initializers): what a level-1 entry asks [`Step::walk`] for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Rules,
    /// `ConstantSharing`: main graph only, not per node.
    Sharing,
    Cse,
    Fold,
    MatMulAdd,
    ReshapeFusion,
}

impl Pass {
    /// The ops of the nodes a per-node pass can change anything from, when not every op:
    /// its walk passes over the rest without reading them.
    fn start_ops(self) -> Option<Vec<Sym>> {
        let ops: &[&str] = match self {
            Pass::Rules => rule_based_graph_transformer::RULE_OPS,
            Pass::MatMulAdd => &["MatMul"],
            Pass::ReshapeFusion => &["Reshape"],
            _ => return None,
        };
        Some(ops.iter().map(|&op| Sym::new(op)).collect())
    }
}

struct Optimizer<'t> {
    table: &'t KernelTable,
    values: Values,
    versions: HashMap<Sym, i64>,
    /// Per graph: the index and the two node orders, built once per step.
    indices: HashMap<usize, (Editor, Vec<usize>, Vec<usize>, usize)>,
    /// Graphs whose shapes to infer again in the next folding pass.
    reinfer: HashSet<usize>,
    /// Main-graph values that became initializers under a name they already had (a folded
    /// output, a fused Reshape's shape): their readers are to be inferred again.
    given: Vec<Sym>,
    /// Per main-graph node, its [`SNode::inference_key`] when `ConstantFolding` last looked at
    /// it and did not fold it (0: never).
    declined: Vec<u64>,
    /// The main graph's CSE table, emptied and used again by each step's CSE.
    seen: Option<common_subexpression_elimination::Seen>,
    /// Main-graph initializers held as tensor protos (the model's, and those an inlined `If`
    /// branch brought): the only ones `ConstantSharing` merges. Those the optimiser creates
    /// (folded values, fusion shapes) live in memory in ORT and are never shared.
    shareable: HashSet<Sym>,
    /// The graphs some graph names as its parent (a subgraph of one of their nodes, removed
    /// nodes' included): kept as `If` inlining moves subgraphs up, so that a pass over each of
    /// many subgraphs does not look through every graph of the session.
    parents: HashSet<usize>,
}

/// Graph `gi`'s editor and its two node orders (Kahn's, then the reverse DFS), from one
/// producer index; a large graph's orders are built on threads of their own while the editor
/// lists the readers ([`crate::session::order::beside`]).
fn editor_with_orders(session: &Session, gi: usize) -> (Editor, Vec<usize>, Vec<usize>) {
    let producer = Producers::of(session, gi);
    let by = |v| producer.get(v);
    let nodes = session.graphs[gi].nodes.len();
    let ((readers, dfs), kahn) = beside(
        nodes,
        || infer::topological_order_by(session, gi, &by),
        || {
            beside(
                nodes,
                || ort_topological_order_by(session, gi, &by),
                || Editor::reads_of(session, gi, false),
            )
        },
    );
    (
        Editor::from_parts(session, gi, producer, readers),
        kahn,
        dfs,
    )
}

/// Graph `gi`'s two node orders (Kahn's, then the reverse DFS) from `idx`'s producers, as
/// [`editor_with_orders`] builds them (a large graph's on two threads).
fn orders(idx: &Editor, session: &Session, gi: usize) -> (Vec<usize>, Vec<usize>) {
    let g = &session.graphs[gi];
    let by = |v| idx.producer(session, v);
    let (dfs, kahn) = beside(
        g.nodes.len(),
        || infer::topological_order_by(session, gi, &by),
        || ort_topological_order_by(session, gi, &by),
    );
    (kahn, dfs)
}

/// Graphs from which a pass reads its nodes on threads ahead of its walk (folding's keys,
/// MatMulAddFusion's plans).
const PARALLEL_AHEAD_NODES: usize = 32 * 1024;

/// A key of [`fold_keys`]: a removed node.
const REMOVED_KEY: u64 = 2;

/// Per node of graph `gi`, in node order: its [`SNode::inference_key`] (odd), 0 for a node with
/// subgraphs (folding always visits it) or [`REMOVED_KEY`], taken on up to
/// [`crate::threads::threads`] threads. What a walk would read of each node, read a part of
/// the node array per thread rather than node after node: a million-node graph's nodes miss
/// the cache nearly every one.
fn fold_keys(session: &Session, gi: usize) -> Vec<u64> {
    let nodes = &session.graphs[gi].nodes;
    let parts = crate::threads::map_chunks(
        nodes,
        16 * 1024,
        crate::threads::threads(),
        "fold-keys",
        |part| {
            part.iter()
                .map(|n| {
                    if n.removed {
                        REMOVED_KEY
                    } else if !n.subgraphs.is_empty() {
                        0
                    } else {
                        n.inference_key()
                    }
                })
                .collect::<Vec<u64>>()
        },
    );
    parts.concat()
}

fn is_deterministic(domain: Sym, op: Sym) -> bool {
    match domain.as_str() {
        "ai.onnx" => !matches!(
            op.as_str(),
            "RandomUniform"
                | "RandomNormal"
                | "RandomUniformLike"
                | "RandomNormalLike"
                | "Multinomial"
                | "Dropout"
                | "Bernoulli"
        ),
        "com.microsoft" => matches!(op.as_str(), "QuantizeLinear" | "DequantizeLinear"),
        _ => false,
    }
}

impl Optimizer<'_> {
    /// Runs one transformer over graph `gi`, subgraphs first (node by node, as ORT recurses).
    fn pass(&mut self, session: &mut Session, gi: usize, pass: Pass) -> bool {
        let mut changed = false;
        // The index is kept up to date by the edits; the orders stay valid under removals
        // and renames, and are built again from the index when nodes were appended (fusions,
        // `If` inlining).
        let len = session.graphs[gi].nodes.len();
        let (mut idx, kahn, dfs) = match self.indices.remove(&gi) {
            Some((idx, kahn, dfs, n)) if n == len => (idx, kahn, dfs),
            Some((idx, ..)) => {
                let (kahn, dfs) = orders(&idx, session, gi);
                (idx, kahn, dfs)
            }
            // The editor the last pass over the graph kept, else a new one.
            None => match Editor::kept(session, gi) {
                Some(idx) => {
                    let (kahn, dfs) = orders(&idx, session, gi);
                    (idx, kahn, dfs)
                }
                None => editor_with_orders(session, gi),
            },
        };
        if pass == Pass::Sharing {
            let changed = self.constant_sharing(session, gi, &mut idx);
            self.indices.insert(gi, (idx, kahn, dfs, len));
            return changed;
        }
        let mut cse = if pass == Pass::Cse {
            match self.seen.take() {
                Some(mut seen) => {
                    seen.clear();
                    seen
                }
                None => common_subexpression_elimination::Seen::with_capacity(
                    session.graphs[gi].nodes.len(),
                ),
            }
        } else {
            common_subexpression_elimination::Seen::default()
        };
        // After a ReshapeFusion, ORT's next Resolve infers the graph's shapes again (the
        // Reshapes now have constant shapes); the next folding pass does the same here.
        let mut updated = pass == Pass::Fold && self.reinfer.remove(&gi);
        let order = if matches!(pass, Pass::Cse | Pass::MatMulAdd) {
            &dfs
        } else {
            &kahn
        };
        // Only the main graph's inference is kept incrementally (see `Pass::Fold` below).
        let incremental = session.graphs[gi].parent.is_none();
        // Built on first use: generated names are checked against every name of the graph.
        let mut names: Option<NameGen> = None;
        // A pass that starts only from some ops walks only the nodes of those ops, found in the
        // index's op array, where no node of the graph has subgraphs (their nodes are visited
        // whatever their op).
        idx.ops_of(session);
        let starts = pass.start_ops();
        let has_subgraphs = self.parents.contains(&gi);
        let filtered: Vec<usize>;
        let order: &[usize] = match starts {
            Some(ops) if !has_subgraphs => {
                filtered = order
                    .iter()
                    .copied()
                    .filter(|&ni| idx.op_at(ni).is_some_and(|op| ops.contains(&op)))
                    .collect();
                &filtered
            }
            _ => order,
        };
        // A large graph's CSE first asks, on threads, whether it can merge anything; where it
        // cannot, its walk would change nothing, and is not made.
        let order: &[usize] = if pass == Pass::Cse
            && !has_subgraphs
            && order.len() >= common_subexpression_elimination::PARALLEL_PROOF_NODES
            && common_subexpression_elimination::cannot_merge(self.table, session, gi, &idx)
        {
            &[]
        } else {
            order
        };
        // MatMulAddFusion fuses a MatMul only into an `Add` that reads it, and makes no `Add`
        // nor renames an input: the values the graph's Adds read, taken before the walk, rule
        // out the other MatMuls without a look at their readers.
        let read_by_add = if pass == Pass::MatMulAdd {
            idx.read_by_op(session, Sym::new("Add"))
        } else {
            HashSet::default()
        };
        // A large main graph's folding keys, taken on threads before the walk: a node unchanged
        // since folding last declined it is passed over without being read. They hold until
        // the walk changes the graph; from there on each node's key is taken as it is met.
        let keys = if pass == Pass::Fold && incremental && order.len() >= PARALLEL_AHEAD_NODES {
            fold_keys(session, gi)
        } else {
            Vec::new()
        };
        // A large graph's MatMulAddFusion first looks, on threads, for a MatMul it would fuse;
        // where there is none, its walk would change nothing, and is not made.
        let order: &[usize] = if pass == Pass::MatMulAdd
            && !has_subgraphs
            && session.graphs[gi].nodes.len() >= PARALLEL_AHEAD_NODES
            && !crate::threads::any(
                order,
                4096,
                crate::threads::threads(),
                "matmul-add",
                |&ni| {
                    !session.graphs[gi].nodes[ni].removed
                        && matmul_add_fusion::plan(session, gi, ni, &idx, &read_by_add).is_some()
                },
            ) {
            &[]
        } else {
            order
        };
        // The walk's nodes are asked for ahead of it (an order jumps through the node array).
        const AHEAD: usize = 8;
        for (k, &ni) in order.iter().enumerate() {
            if !changed && let Some(&key) = keys.get(ni) {
                if key == REMOVED_KEY {
                    continue;
                }
                // An odd key is a node without subgraphs: the test of `Pass::Fold` below.
                if key & 1 == 1
                    && session.graphs[gi].inferred.get(ni) == Some(&key)
                    && self.declined.get(ni) == Some(&key)
                {
                    continue;
                }
            }
            if let Some(&next) = order.get(k + AHEAD) {
                session.prefetch_node(gi, next, false);
            }
            if let Some(&next) = order.get(k + AHEAD / 2) {
                session.prefetch_node(gi, next, true);
            }
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
                    // The main graph infers again only the nodes an edit touched or whose
                    // inputs' shapes or values changed since they were inferred
                    // (`SGraph::inferred`); the rest would come out as they are. A subgraph,
                    // whose outer-scope values are not tracked, infers every node again.
                    let node = &session.graphs[gi].nodes[ni];
                    let key = if incremental { node.inference_key() } else { 0 };
                    let current = incremental && session.graphs[gi].inferred.get(ni) == Some(&key);
                    // Folding reads what inference reads (the node, its inputs' shapes,
                    // constness and values): a node folding already declined, unchanged since
                    // and since it was inferred, would be declined again.
                    if current && node.subgraphs.is_empty() && self.declined.get(ni) == Some(&key) {
                        continue;
                    }
                    if updated
                        && node.subgraphs.is_empty()
                        && !current
                        && shapes::infer_and_record(session, gi, ni, &mut self.values)
                        && incremental
                    {
                        Self::infer_readers_again(session, gi, &idx, ni);
                    }
                    let d = self.fold(session, gi, ni, &mut idx);
                    if incremental && !d {
                        if self.declined.len() <= ni {
                            self.declined.resize(session.graphs[gi].nodes.len(), 0);
                        }
                        self.declined[ni] = key;
                    }
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
                Pass::MatMulAdd => {
                    self.matmul_add_fusion(session, gi, ni, &mut idx, &mut names, &read_by_add)
                }
                Pass::Sharing => false,
            };
            changed |= did;
            if incremental {
                for name in std::mem::take(&mut self.given) {
                    Self::infer_value_readers_again(session, gi, &idx, name);
                }
            }
        }
        if let Some(n) = names {
            session.graphs[gi].name_counter = n.counter;
        }
        // The main graph's table is kept for the next step's CSE.
        if pass == Pass::Cse && incremental {
            self.seen = Some(cse);
        }
        // Orders built before nodes were appended (`If` inlining) miss them: keep the length
        // they were built for, so that the next pass rebuilds them.
        self.indices.insert(gi, (idx, kahn, dfs, len));
        changed
    }

    /// A transformer that edits the session graph itself (`placer/transformers/qdq_transformer/`): the
    /// indices of every graph are rebuilt when it changed anything.
    fn edited(
        &mut self,
        session: &mut Session,
        gi: usize,
        transformer: impl Fn(&mut Session, usize) -> bool,
    ) -> bool {
        let changed = transformer(session, gi);
        if changed {
            self.indices.clear();
            session.infer_again();
        }
        changed
    }

    /// The `TransposeOptimizer` over graph `gi`, then over the subgraphs of its nodes.
    fn transpose(&mut self, session: &mut Session, gi: usize) -> bool {
        // The order is only built for a graph the optimizer has work in (`transpose::run` does
        // nothing without a Transpose), and the subgraph walk only where there are subgraphs.
        let g = &session.graphs[gi];
        let has_transpose = g.live_nodes().any(|(_, n)| n.op == Sym::TRANSPOSE);
        let mut changed = has_transpose && {
            let order = order_of(session, gi, Order::Dfs);
            transpose::run(
                session,
                gi,
                self.table,
                &self.versions,
                &mut self.values,
                &order,
            )
        };
        if changed {
            self.indices.remove(&gi);
            session.infer_again();
        }
        if session.graphs[gi]
            .live_nodes()
            .all(|(_, n)| n.subgraphs.is_empty())
        {
            return changed;
        }
        let subs: Vec<usize> = order_of(session, gi, Order::Dfs)
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

    /// The live readers of node `ni`'s outputs are to be inferred again ([`SGraph::inferred`]).
    fn infer_readers_again(session: &mut Session, gi: usize, idx: &Editor, ni: usize) {
        let outputs = session.graphs[gi].nodes[ni].outputs.clone();
        for o in outputs {
            if !o.is_empty() {
                Self::infer_value_readers_again(session, gi, idx, o);
            }
        }
    }

    /// The live readers of `name` are to be inferred again ([`SGraph::inferred`]).
    fn infer_value_readers_again(session: &mut Session, gi: usize, idx: &Editor, name: Sym) {
        let readers: smallvec::SmallVec<[usize; 4]> = idx.readers(session, name).collect();
        let inferred = &mut session.graphs[gi].inferred;
        for k in readers {
            if let Some(key) = inferred.get_mut(k) {
                *key = 0;
            }
        }
    }

    /// Removes a single-data-input node, its consumers reading `input` instead of its output.
    /// Refused when the output is a graph output.
    fn bypass(session: &mut Session, gi: usize, ni: usize, idx: &mut Editor, input: Sym) -> bool {
        let Some(out) = session.graphs[gi].nodes[ni].outputs.first().copied() else {
            return false;
        };
        if input.is_empty() || idx.is_output(out) {
            return false;
        }
        if session.graphs[gi].nodes[ni]
            .outputs
            .iter()
            .skip(1)
            .any(|&o| !o.is_empty() && idx.has_users(session, o))
        {
            return false;
        }
        idx.replace_reads(session, out, input);
        idx.remove(session, ni);
        true
    }

    /// After folding node `ni`: its producers left without consumers are removed, upwards
    /// (`RemoveNodesWithOneOutputBottomUp`).
    fn remove_dead_inputs(session: &mut Session, gi: usize, ni: usize, idx: &mut Editor) {
        let mut stack: Vec<usize> = session.graphs[gi].nodes[ni]
            .inputs
            .iter()
            .chain(&session.graphs[gi].nodes[ni].implicit_inputs)
            .filter_map(|&i| idx.producer(session, i))
            .collect();
        while let Some(p) = stack.pop() {
            if session.graphs[gi].nodes[p].removed {
                continue;
            }
            let node = &session.graphs[gi].nodes[p];
            let dead = node
                .existing_outputs()
                .all(|(_, o)| !idx.is_output(o) && !idx.has_users(session, o));
            if !dead {
                continue;
            }
            let inputs: Vec<usize> = node
                .inputs
                .iter()
                .chain(&node.implicit_inputs)
                .filter_map(|&i| idx.producer(session, i))
                .collect();
            idx.remove(session, p);
            stack.extend(inputs);
        }
    }

    /// Replaces output `name` of a folded node by an initializer.
    fn add_initializer(
        &mut self,
        session: &mut Session,
        gi: usize,
        name: Sym,
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
            Some(v) => v.to_proto(&name),
            None => crate::model::proto::TensorProto {
                name: Some(name.to_string()),
                dims: dims.clone(),
                data_type: Some(elem),
                ..Default::default()
            },
        };
        let g = &mut session.graphs[gi];
        g.shapes
            .insert(name, dims.iter().map(|&d| (d >= 0).then_some(d)).collect());
        g.init_order.push(name);
        g.types.insert(name, Type::Tensor(elem));
        g.initializers.insert(
            name,
            Init {
                dims,
                elem,
                overridable: false,
                tensor: Box::new(tensor),
            },
        );
        self.values.forget(gi, name);
        if let Some(v) = value {
            self.values.set(gi, name, v);
        }
        if session.graphs[gi].parent.is_none() {
            self.given.push(name);
        }
    }

    fn constant(&mut self, session: &Session, gi: usize, name: Sym) -> Option<Tensor> {
        self.values.get(session, gi, name).map(|t| (*t).clone())
    }

    fn is_constant_init(session: &Session, gi: usize, name: Sym) -> bool {
        session
            .initializer(gi, name)
            .is_some_and(|i| !i.overridable)
    }

    /// The single consumer of output `out` of a node, reading it through one edge, when `out`
    /// is not a graph output.
    fn only_edge(session: &Session, gi: usize, idx: &Editor, out: Sym) -> Option<usize> {
        if out.is_empty() || idx.is_output(out) {
            return None;
        }
        let next = idx.sole_user(session, out)?;
        let n = &session.graphs[gi].nodes[next];
        let edges = n.inputs.iter().filter(|&&i| i == out).count()
            + n.implicit_inputs.iter().filter(|&&i| i == out).count();
        (edges == 1).then_some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every level-1 transformer the registry says is simulated is run by the driver.
    #[test]
    fn registry_passes() {
        for t in registry::simulated(OptLevel::Basic) {
            assert!(
                matches!(
                    t.status,
                    registry::Status::Simulated(_, registry::Run::Level1(_))
                ),
                "{} is not run",
                t.name
            );
        }
    }

    /// CSE's proof on threads that it can merge nothing answers as its walk does: true where
    /// the walk merges nothing, false where it merges (a removed node and a node with an input
    /// of its own pair with nothing).
    #[test]
    fn the_cse_proof_agrees_with_the_walk() {
        let table = crate::tables::newest().table();
        // Node k runs `ops[k]` on `x` (which several read) or, marked `!`, on its own input;
        // `-` marks a removed node.
        let graph = |ops: &[&str]| -> Session {
            let nodes = ops
                .iter()
                .enumerate()
                .map(|(k, op)| {
                    let own = op.starts_with('!');
                    let input = if own { format!("own{k}") } else { "x".into() };
                    SNode {
                        removed: op.starts_with('-'),
                        ..SNode::plain(
                            Sym::new(&format!("n{k}")),
                            Sym::new(op.trim_start_matches(['!', '-'])),
                            Sym::AI_ONNX,
                            Some(14),
                            vec![Sym::new(&input)],
                            vec![Sym::new(&format!("y{k}"))],
                        )
                    }
                })
                .collect();
            Session::of_nodes(nodes)
        };
        let mut outcomes = [false; 2];
        for ops in [
            &["Relu", "Sigmoid", "Neg"][..],
            &["Relu", "Sigmoid", "Relu"],
            &["Relu", "Sigmoid", "-Relu"],
            &["!Relu", "!Relu", "Relu", "Neg"],
            &["Relu", "Neg", "Neg", "Relu"],
        ] {
            let mut s = graph(ops);
            let (idx, ..) = editor_with_orders(&s, 0);
            let proof = common_subexpression_elimination::cannot_merge(table, &s, 0, &idx);
            let removed = |s: &Session| s.graphs[0].nodes.iter().filter(|n| n.removed).count();
            let before = removed(&s);
            run(&mut s, table, OptLevel::Basic, Values::default(), false);
            let merged = removed(&s) > before;
            assert_eq!(proof, !merged, "{ops:?}");
            outcomes[usize::from(merged)] = true;
        }
        assert_eq!(outcomes, [true, true], "cases with and without a merge");
    }

    #[test]
    fn deterministic_ops() {
        let d = |domain: &str, op: &str| is_deterministic(Sym::new(domain), Sym::new(op));
        assert!(d("ai.onnx", "Add"));
        assert!(!d("ai.onnx", "RandomNormal"));
        assert!(!d("ai.onnx.ml", "LabelEncoder"));
        assert!(d("com.microsoft", "QuantizeLinear"));
    }
}
