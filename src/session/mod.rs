//! The session graph: what ORT holds after loading a model, and what every later stage works
//! on — inference (`infer`), the simulated optimisers and the partitioner (`placer`), the copy
//! pass (`memcpy`) and the rules. Values are compared by name, as ORT does.
//!
//! Sits below all of them: depends on `model` and `tables` only.
//!
//! - [`types`]: the type of a value (`tensor(float)`, `seq(...)`, ...).
//! - [`order`]: the two topological orders ORT uses.
//! - [`names`]: ORT's per-graph name generator.

/// The highest rank any analysis holds (ONNX itself sets none; ORT's kernels stop far below).
/// A declared rank past it is kept as unknown; a constant past it is never folded.
pub const MAX_RANK: usize = 64;
pub mod build;
pub mod edit;
pub mod initializer_map;
pub mod names;
pub mod order;
pub mod types;

pub use names::NameGen;
pub use thin_vec::ThinVec;
pub use types::Type;

use crate::sym::SymMap as HashMap;

use crate::model::proto::{
    AttributeProto, FunctionProto, GraphProto, NodeProto, TensorProto,
    attribute_proto::AttributeType,
};
use crate::model::{Model, NodeId, normalize_domain};
use crate::sym::Sym;
use crate::tables::{Ep, KernelDef};

/// A node of the session: the graph it belongs to (an index into [`Session::graphs`]) and its
/// place in that graph's node arena ([`SGraph::nodes`], where removed nodes keep their place).
/// Four bytes each: a model is read only up to `model::MAX_NODES` (2^24) nodes, and the
/// transformers add at most a few per node, far below 2^32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeRef {
    graph: u32,
    node: u32,
}

impl NodeRef {
    /// Node `node` of graph `graph`.
    pub fn new(graph: usize, node: usize) -> NodeRef {
        debug_assert!(u32::try_from(graph).is_ok() && u32::try_from(node).is_ok());
        NodeRef {
            graph: graph as u32,
            node: node as u32,
        }
    }
    /// Its graph's index in [`Session::graphs`].
    pub fn graph(self) -> usize {
        self.graph as usize
    }
    /// Its index in its graph's [`SGraph::nodes`].
    pub fn node(self) -> usize {
        self.node as usize
    }
}

/// Hashed as the pair of indices `(graph, node)`: a [`crate::sym::SymMap`] places a node's key
/// by its index, offset per graph, so that maps filled and read in node order walk their table.
impl std::hash::Hash for NodeRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.graph());
        state.write_usize(self.node());
    }
}

/// One end of an edge inside a graph, as ORT's `Node::EdgeEnd` holds it: a node (its index in
/// the graph's [`SGraph::nodes`]) and the position of the input or output there. Orders by
/// node, then position: ORT's edge order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EdgeEnd {
    pub node: usize,
    pub arg: usize,
}

impl EdgeEnd {
    /// Argument `arg` of node `node`.
    pub fn new(node: usize, arg: usize) -> EdgeEnd {
        EdgeEnd { node, arg }
    }
}

/// An initializer: a constant (or overridable) tensor.
#[derive(Debug, Clone)]
pub struct Init {
    pub dims: Vec<i64>,
    pub elem: i32,
    /// Also a graph input (IR ≥ 4): the caller may override it, so it is not a constant.
    pub overridable: bool,
    /// The tensor itself (raw data is a shared slice of the model file, not a copy).
    pub tensor: Box<TensorProto>,
}

impl Init {
    /// Element count (a scalar counts 1); `None` when it overflows.
    pub fn elements(&self) -> Option<u64> {
        self.dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
    }
}

/// A node of the session graph.
#[derive(Debug, Clone)]
pub struct SNode {
    pub name: Sym,
    pub op: Sym,
    /// Normalised (`ai.onnx` for the empty domain).
    pub domain: Sym,
    /// The schema version the node resolved to; `None` when no schema matched.
    pub since: Option<i64>,
    /// Input names; empty for an omitted optional input.
    pub inputs: Vec<Sym>,
    pub outputs: Vec<Sym>,
    /// Attributes except graph-valued ones (those are `subgraphs`).
    pub attrs: ThinVec<AttributeProto>,
    /// Subgraphs (indices into `Session::graphs`) with their attribute names.
    pub subgraphs: ThinVec<(Sym, usize)>,
    /// Outer-scope values read by the subgraphs, in first-use order.
    pub implicit_inputs: ThinVec<Sym>,
    pub ep: Option<Ep>,
    /// The kernel registration the node is bound to on its provider `ep` (on CUDA, its
    /// host-memory arguments decide copies): a row of the release's table, never a copy of it.
    /// With `ep`, the node's assignment, kept here only (the placer's decisions explain it).
    /// Set by partitioning on the provider that took the node, and for the CUDA nodes the
    /// fusions made, before copies are planned; `None` where no lookup bound one (a Memcpy
    /// node, a node a transformer built from scratch). A node a transformer made by copying
    /// another carries its source's row until it is bound (the CPU nodes made after
    /// partitioning never are: their rows decide nothing).
    pub kernel: Option<&'static KernelDef>,
    /// The node of the user's model it comes from (inserted nodes have none).
    pub origin: Option<NodeId>,
    pub removed: bool,
}

impl SNode {
    /// A node with no attributes, subgraphs, provider or origin: one a transformer inserts.
    pub fn plain(
        name: Sym,
        op: Sym,
        domain: Sym,
        since: Option<i64>,
        inputs: Vec<Sym>,
        outputs: Vec<Sym>,
    ) -> SNode {
        SNode {
            name,
            op,
            domain,
            since,
            inputs,
            outputs,
            attrs: thin_vec::ThinVec::new(),
            subgraphs: thin_vec::ThinVec::new(),
            implicit_inputs: thin_vec::ThinVec::new(),
            ep: None,
            kernel: None,
            origin: None,
            removed: false,
        }
    }

    /// What of the node its shape inference reads, other than its inputs' shapes and values:
    /// its op, schema version, inputs, outputs and attribute count (never 0). An edit that
    /// changes a node's attributes in place changes its inputs too.
    pub fn inference_key(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        (
            self.op,
            self.domain,
            self.since,
            &self.inputs,
            &self.outputs,
            self.attrs.len(),
        )
            .hash(&mut h);
        h.finish() | 1
    }

    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.attrs.iter().find(|a| a.name() == name)
    }
    pub fn attr_i(&self, name: &str) -> Option<i64> {
        self.attr(name).and_then(|a| a.i)
    }
    pub fn attr_s(&self, name: &str) -> Option<String> {
        self.attr(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
    pub fn attr_ints(&self, name: &str) -> Option<&[i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }
    pub fn attr_strings(&self, name: &str) -> Option<Vec<String>> {
        self.attr(name).map(|a| {
            a.strings
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
    }
    /// Inputs that exist (non-empty names), with their positions.
    pub fn existing_inputs(&self) -> impl Iterator<Item = (usize, Sym)> + '_ {
        self.inputs
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_empty())
            .map(|(i, n)| (i, *n))
    }
    pub fn existing_outputs(&self) -> impl Iterator<Item = (usize, Sym)> + '_ {
        self.outputs
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_empty())
            .map(|(i, n)| (i, *n))
    }
}

/// Graphs from which [`SGraph::any_live_node`] and [`Session::live_ops`] scan a part of the
/// nodes per thread.
const PARALLEL_SCAN_NODES: usize = 64 * 1024;
/// The nodes one thread scans at a time.
const SCAN_PART: usize = 16 * 1024;

/// A graph of the session: the main graph or a subgraph.
#[derive(Debug, Clone, Default)]
pub struct SGraph {
    pub name: Sym,
    /// The node holding this subgraph.
    pub parent: Option<NodeRef>,
    pub nodes: Vec<SNode>,
    /// ORT's `GetInputs()`: declared inputs that are not initializers (main graph), or the
    /// formal inputs (subgraph).
    pub inputs: Vec<Sym>,
    pub outputs: Vec<Sym>,
    pub initializers: HashMap<Sym, Init>,
    /// Initializer names in the order ORT registers them (the graph's initializers, then the
    /// `Constant` nodes); names added by the optimiser are appended. Entries may be stale.
    pub init_order: Vec<Sym>,
    /// Declared or inferred types of values defined in this graph.
    pub types: HashMap<Sym, Type>,
    /// Declared or inferred shapes (`None` dims are unknown or symbolic).
    pub shapes: HashMap<Sym, Vec<Option<i64>>>,
    /// The `dim_param`s declared on the graph's inputs, outputs and value_info (main graph only),
    /// per dim; `None` for a dim without one. Symbolic dims ONNX inference starts from.
    pub dim_params: HashMap<Sym, Vec<Option<Sym>>>,
    /// ORT's per-graph name counter (`<base>_token_<k>`), shared by generated node and value names.
    pub name_counter: usize,
    /// Node names generated so far (ORT remembers them: a name generated once is never handed
    /// out again, even when no node took it, as the prefix of an inlined function).
    pub generated_names: crate::sym::SymSet<Sym>,
    /// The node count of the graph as loaded: with [`SGraph::edited`], whether any
    /// transformation changed the graph ([`SGraph::changed_since_load`]).
    pub loaded: usize,
    /// Whether an edit changed one of the graph's nodes in place since it was loaded: removed
    /// it, pointed an input or an output at another value, or set an attribute. Set by the
    /// [`edit::Editor`] (every such edit goes through one, `tests/it/architecture.rs`) and by
    /// the two passes that set an attribute of a node they keep (the TransposeOptimizer, the
    /// NCHWc transformer).
    pub edited: bool,
    /// Per node, its [`SNode::inference_key`] when its output shapes were last inferred; 0 (or
    /// no entry) where they never were or must be again (an input's shape or value changed).
    /// What lets a pass that infers again after an edit infer only the nodes it touched.
    /// Kept for the main graph only: a subgraph, whose outer-scope values are not tracked, is
    /// inferred whole each time.
    pub inferred: Vec<u64>,
    /// How many edits of the graph's nodes were made since it was built: every edit moves it
    /// on (each of [`edit::Editor`]'s, and the few made in place outside one, which call
    /// [`SGraph::touch`]). An editor kept between passes ([`edit::Kept`]) is handed over only
    /// while the graph is at the generation its last edit left.
    pub generation: u64,
}

impl SGraph {
    /// About how many distinct values the graph's nodes read: its nodes' outputs (about 1.25
    /// per node), its initializers and its inputs. A map keyed by value sized by this does not
    /// grow while it is filled on a typical model, and has half the buckets of one sized at
    /// twice the node count (hashbrown rounds to a power of two): a million-node graph's
    /// consumer lists fault in 64 MiB fewer.
    pub fn values_estimate(&self) -> usize {
        let nodes = self.nodes.len();
        nodes + nodes / 4 + self.initializers.len() + self.inputs.len()
    }

    pub fn live_nodes(&self) -> impl Iterator<Item = (usize, &SNode)> {
        self.nodes.iter().enumerate().filter(|(_, n)| !n.removed)
    }

    /// Whether `test` holds for a live node. A large graph's nodes are asked a part per thread
    /// (the parts not begun once one part found one are passed over): a scan of a million
    /// nodes that finds nothing reads each node, missing the cache, and the scans of what a
    /// graph holds (an op, a Concat of mixed ranks) are many.
    pub fn any_live_node(&self, test: impl Fn(&SNode) -> bool + Sync) -> bool {
        if self.nodes.len() < PARALLEL_SCAN_NODES {
            return self.live_nodes().any(|(_, n)| test(n));
        }
        crate::threads::any(
            &self.nodes,
            SCAN_PART,
            crate::threads::threads(),
            "scan",
            |n| !n.removed && test(n),
        )
    }

    /// Records an edit of the graph's nodes not made through an [`edit::Editor`]: no editor
    /// kept for the graph is handed over from here on.
    pub fn touch(&mut self) {
        self.generation += 1;
    }

    /// Records the graph as loaded (the session calls it once it is built).
    pub(super) fn record_loaded(&mut self) {
        self.loaded = self.nodes.len();
        self.edited = false;
    }

    /// Whether a transformation added, removed or edited a node of this graph since it was
    /// loaded.
    pub fn changed_since_load(&self) -> bool {
        self.nodes.len() != self.loaded || self.edited
    }
}

/// The whole session: graph 0 is the main graph.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub graphs: Vec<SGraph>,
    /// ai.onnx etc. → opset, as ORT's domain→version map holds it.
    pub opsets: HashMap<Sym, i64>,
    pub ir_version: i64,
    /// The model-local functions by (normalised domain, name): a node whose op has no schema
    /// but a local function calls that function (ORT inlines it).
    pub functions: HashMap<(Sym, Sym), crate::model::proto::FunctionProto>,
    /// The editors the passes kept, one per graph at most ([`edit::Editor::keep`]).
    pub kept: edit::Kept,
}

impl Session {
    /// Builds the session graph of a loaded model: `Constant` nodes become initializers, graph
    /// attributes become subgraphs, implicit inputs are computed. The model stays whole (every
    /// name and attribute is copied); [`Session::from_model_owned`] builds the same session
    /// without the copies.
    pub fn from_model(model: &Model) -> Session {
        let functions = model.proto.functions.iter().cloned();
        let mut s = Session::header(model, model.proto.ir_version(), functions);
        // Session graph i is model graph i; node j of a graph is node j of its GraphProto
        // (`Constant` nodes stay as removed placeholders so that indices agree).
        for g in &model.graphs {
            let graph = s.build_graph(model, g.id, Source::Read(model.graph_proto(g.id)));
            s.graphs.push(graph);
        }
        s.link_subgraphs(model);
        s
    }

    /// [`Session::from_model`] for a model the caller no longer needs: names, attributes and
    /// tensors are moved out of its protobuf instead of copied, and the rest of the model is
    /// dropped before this returns, so the session is the one copy of the graph left.
    pub fn from_model_owned(mut model: Model) -> Session {
        let mut proto = std::mem::take(&mut model.proto);
        let functions = std::mem::take(&mut proto.functions).into_iter();
        let mut s = Session::header(&model, proto.ir_version(), functions);
        for g in &model.graphs {
            // Graphs come in the model's order, a subgraph after the graph of its node: the
            // attributes holding graphs are left in place (their positions are the paths).
            let Some(gp) = graph_proto_mut(&mut proto, &g.path) else {
                s.graphs.push(SGraph::default());
                continue;
            };
            let graph = s.build_graph(&model, g.id, Source::Take(gp));
            s.graphs.push(graph);
        }
        s.link_subgraphs(&model);
        s
    }

    /// The session's header: opsets, IR version and the model-local functions.
    fn header(
        model: &Model,
        ir_version: i64,
        functions: impl Iterator<Item = FunctionProto>,
    ) -> Session {
        Session {
            graphs: Vec::with_capacity(model.graphs.len()),
            opsets: model
                .opsets
                .iter()
                .map(|(d, v)| (Sym::new(d), *v))
                .collect(),
            ir_version,
            kept: Default::default(),
            functions: functions
                .map(|f| {
                    (
                        (Sym::new(normalize_domain(f.domain())), Sym::new(f.name())),
                        f,
                    )
                })
                .collect(),
        }
    }

    /// Whether any graph of the session changed since it was loaded. ORT then resolves the
    /// whole graph tree, which marks every graph as needing its `GraphProto` rewritten
    /// (`Graph::Resolve`'s finalisation sets `GraphProtoSyncNeeded` on the graph and all its
    /// subgraphs); with no change, `Graph::ToGraphProto` hands back each subgraph's proto as
    /// loaded, its `Constant` nodes included (measured with the CPU wheels 1.23.2-1.31.1:
    /// `unseen2/whl.silero-vad` at `disable`, and an If whose branches hold a Constant, saved as
    /// loaded at `disable` and `basic` unless a float16 Softmax's inlining and Casts change
    /// the main graph).
    pub fn changed_since_load(&self) -> bool {
        self.graphs.iter().any(SGraph::changed_since_load)
    }

    /// The node names of the model ORT saves (`optimized_model_filepath`), every graph: the
    /// main graph as it is now (ORT always writes it from memory: its `Constant` nodes became
    /// initializers), each subgraph as it is now when anything changed
    /// ([`Session::changed_since_load`]), else as it was loaded (`Constant` nodes too).
    pub fn saved_node_names(&self) -> Vec<Sym> {
        let changed = self.changed_since_load();
        let mut out = Vec::new();
        for (gi, g) in self.graphs.iter().enumerate() {
            if gi == 0 || changed {
                out.extend(g.live_nodes().map(|(_, n)| n.name));
            } else {
                out.extend(g.nodes.iter().take(g.loaded).map(|n| n.name));
            }
        }
        out
    }

    /// Records each subgraph on its node, then computes the implicit inputs.
    fn link_subgraphs(&mut self, model: &Model) {
        for g in &model.graphs {
            if let Some((nid, attr)) = &g.parent {
                let n = model.node(*nid);
                if let Some(node) = self
                    .graphs
                    .get_mut(n.graph.0 as usize)
                    .and_then(|pg| pg.nodes.get_mut(n.index as usize))
                {
                    node.subgraphs.push((Sym::new(attr), g.id.0 as usize));
                }
            }
        }
        if !self.graphs.is_empty() {
            self.compute_implicit_inputs(0);
        }
        for g in &mut self.graphs {
            g.record_loaded();
        }
    }

    fn build_graph(
        &self,
        model: &Model,
        gid: crate::model::GraphId,
        mut src: Source<'_>,
    ) -> SGraph {
        let parent = model.graph(gid).parent.as_ref().map(|(nid, _)| {
            let n = model.node(*nid);
            NodeRef::new(n.graph.0 as usize, n.index as usize)
        });
        let g = src.proto();
        let ir4 = self.ir_version >= 4;
        let mut graph = SGraph {
            name: Sym::new(g.name()),
            parent,
            ..SGraph::default()
        };
        let input_names: crate::sym::SymSet<&str> = if ir4 {
            g.input.iter().map(|i| i.name()).collect()
        } else {
            Default::default()
        };
        // Every value the maps will hold: a graph input, an initializer or a node output
        // (inference types each output later); sized once, without slack for guesses.
        let values = g.input.len()
            + g.initializer.len()
            + g.sparse_initializer.len()
            + g.node.iter().map(|n| n.output.len()).sum::<usize>();
        graph.nodes.reserve(g.node.len());
        // `Constant` nodes become initializers too: sized once for all of them.
        let constants = g.node.iter().filter(|n| n.op_type() == "Constant").count();
        graph
            .initializers
            .reserve(g.initializer.len() + g.sparse_initializer.len() + constants);
        graph.init_order.reserve(graph.initializers.capacity());
        graph.types.reserve(values);
        graph.shapes.reserve(values);
        let overridable: Vec<bool> = g
            .initializer
            .iter()
            .map(|t| ir4 && input_names.contains(t.name()))
            .collect();
        drop(input_names);
        for (k, overridable) in overridable.into_iter().enumerate() {
            let t = src.initializer(k);
            let name = Sym::new(t.name());
            graph.init_order.push(name);
            graph.initializers.insert(name, init_owning(t, overridable));
        }
        let g = src.proto();
        for sp in &g.sparse_initializer {
            if let Some(v) = &sp.values {
                let mut t = v.clone();
                t.dims = sp.dims.clone();
                let name = Sym::new(v.name());
                graph.init_order.push(name);
                graph.initializers.insert(name, init_of(&t, false));
            }
        }
        graph.inputs = g
            .input
            .iter()
            .map(|i| Sym::new(i.name()))
            .filter(|i| parent.is_some() || !graph.initializers.contains_key(i))
            .collect();
        graph.outputs = g.output.iter().map(|o| Sym::new(o.name())).collect();
        for vi in g.input.iter().chain(&g.output).chain(&g.value_info) {
            if let Some(t) = vi.r#type.as_ref() {
                let name = Sym::new(vi.name());
                if let Some(ty) = Type::from_proto(t) {
                    graph.types.entry(name).or_insert(ty);
                }
                if let Some(shape) = shape_of(t) {
                    graph.shapes.entry(name).or_insert(shape);
                }
                if parent.is_none()
                    && let Some(params) = dim_params_of(t)
                {
                    graph.dim_params.insert(name, params);
                }
            }
        }
        let model_graph = model.graph(gid);
        for i in 0..src.proto().node.len() {
            let origin = model_graph.nodes.get(i).copied();
            let mut removed = false;
            let np = &src.proto().node[i];
            if np.op_type() == "Constant"
                && normalize_domain(np.domain()) == "ai.onnx"
                && let Some(t) = constant_tensor(np)
            {
                let name = np.output.first().map(|o| Sym::new(o)).unwrap_or_default();
                graph.init_order.push(name);
                graph.initializers.insert(name, init_owning(t, false));
                removed = true;
            }
            let domain = Sym::new(normalize_domain(np.domain()));
            let parts = src.node(i);
            graph.nodes.push(SNode {
                name: parts.name,
                op: parts.op,
                domain,
                since: None,
                inputs: parts.inputs,
                outputs: parts.outputs,
                attrs: parts.attrs.into(),
                subgraphs: thin_vec::ThinVec::new(),
                implicit_inputs: thin_vec::ThinVec::new(),
                ep: None,
                kernel: None,
                origin,
                removed,
            });
        }
        // Map inserts only: the order of the walk cannot reach the maps' contents.
        for (name, init) in &graph.initializers {
            graph.types.insert(*name, Type::Tensor(init.elem));
            graph
                .shapes
                .insert(*name, init.dims.iter().map(|&d| Some(d)).collect());
        }
        graph
    }

    /// Names each subgraph reads from enclosing scopes; recorded on the parent node as its
    /// implicit inputs. Returns the outer names graph `gi` reads (none for the main graph, which
    /// has no enclosing scope).
    pub fn compute_implicit_inputs(&mut self, gi: usize) -> Vec<Sym> {
        // Subgraphs first (they need `&mut self`), then one pass over this graph's names.
        for ni in 0..self.graphs[gi].nodes.len() {
            if self.graphs[gi].nodes[ni].removed || self.graphs[gi].nodes[ni].subgraphs.is_empty() {
                let g = &mut self.graphs[gi];
                if !g.nodes[ni].removed && !g.nodes[ni].implicit_inputs.is_empty() {
                    g.nodes[ni].implicit_inputs = thin_vec::ThinVec::new();
                    g.touch();
                }
                continue;
            }
            let subs: Vec<usize> = self.graphs[gi].nodes[ni]
                .subgraphs
                .iter()
                .map(|(_, s)| *s)
                .collect();
            let mut implicit = ThinVec::new();
            for sg in subs {
                for name in self.compute_implicit_inputs(sg) {
                    if !implicit.contains(&name) {
                        implicit.push(name);
                    }
                }
            }
            let g = &mut self.graphs[gi];
            if g.nodes[ni].implicit_inputs != implicit {
                g.nodes[ni].implicit_inputs = implicit;
                g.touch();
            }
        }
        let g = &self.graphs[gi];
        if g.parent.is_none() {
            return Vec::new();
        }
        let mut defined: crate::sym::SymSet<Sym> = g.inputs.iter().copied().collect();
        defined.extend(g.initializers.keys().copied());
        for n in &g.nodes {
            if !n.removed {
                defined.extend(n.outputs.iter().filter(|o| !o.is_empty()).copied());
            }
        }
        let mut outer = Vec::new();
        let mut seen: crate::sym::SymSet<Sym> = crate::sym::SymSet::default();
        let names = g
            .nodes
            .iter()
            .filter(|n| !n.removed)
            .flat_map(|n| n.inputs.iter().chain(&n.implicit_inputs))
            .chain(&g.outputs);
        for name in names {
            if !name.is_empty() && !defined.contains(name) && seen.insert(*name) {
                outer.push(*name);
            }
        }
        outer
    }

    /// Whether a live node of any graph has one of `ops` as its op type (any domain): a linear
    /// scan that lets a transformer with nothing to match skip its whole-graph indices.
    pub fn has_live_op(&self, ops: &[Sym]) -> bool {
        self.graphs
            .iter()
            .any(|g| g.any_live_node(|n| ops.contains(&n.op)))
    }

    /// Asks for node `ni` of graph `gi` (its first two cache lines) and, with `inputs`, the
    /// list of its inputs, to be brought into the cache: a walk over nodes in an order other than
    /// their storage's calls it a few nodes ahead (asking for the inputs only of a node asked
    /// for before, whose fields are then at hand). A hint; out-of-range indices are ignored.
    #[inline]
    pub fn prefetch_node(&self, gi: usize, ni: usize, inputs: bool) {
        let Some(n) = self.graphs.get(gi).and_then(|g| g.nodes.get(ni)) else {
            return;
        };
        if inputs {
            crate::sym::prefetch(n.inputs.as_ptr());
        } else {
            let p: *const SNode = n;
            crate::sym::prefetch(p);
            crate::sym::prefetch(p.cast::<u8>().wrapping_add(64));
        }
    }

    /// Forgets which nodes' shapes were inferred ([`SGraph::inferred`]): after an edit that does
    /// not say what it touched, the next inference goes over every node again.
    pub fn infer_again(&mut self) {
        // Only the main graph keeps the record: one clear, however many subgraphs there are
        // (an `If` inlined per node of a long chain asks this at each).
        if let Some(g) = self.graphs.first_mut() {
            g.inferred.clear();
        }
    }

    /// [`Session::has_live_op`] for each of `ops` at once, from one scan (it stops once every
    /// one was found).
    pub fn live_ops<const N: usize>(&self, ops: [Sym; N]) -> [bool; N] {
        let mut found = [false; N];
        let mut left = N;
        for g in &self.graphs {
            if g.nodes.len() >= PARALLEL_SCAN_NODES {
                // A part of the nodes per thread, each part's finds joined.
                let all = std::sync::atomic::AtomicBool::new(false);
                let parts = crate::threads::map_chunks(
                    &g.nodes,
                    SCAN_PART,
                    crate::threads::threads(),
                    "scan",
                    |part| {
                        let mut mine = [false; N];
                        if !all.load(std::sync::atomic::Ordering::Relaxed) {
                            for n in part.iter().filter(|n| !n.removed) {
                                for (k, op) in ops.iter().enumerate() {
                                    mine[k] |= n.op == *op;
                                }
                            }
                            if mine.iter().all(|&f| f) {
                                all.store(true, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                        mine
                    },
                );
                for part in parts {
                    for (k, f) in part.into_iter().enumerate() {
                        found[k] |= f;
                    }
                }
                left = found.iter().filter(|&&f| !f).count();
                if left == 0 {
                    return found;
                }
                continue;
            }
            for (_, n) in g.live_nodes() {
                for (k, op) in ops.iter().enumerate() {
                    if !found[k] && n.op == *op {
                        found[k] = true;
                        left -= 1;
                        if left == 0 {
                            return found;
                        }
                    }
                }
            }
        }
        found
    }

    /// The initializer `name` as seen from graph `gi` (its own, then enclosing graphs).
    pub fn initializer(&self, gi: usize, name: Sym) -> Option<&Init> {
        let mut g = gi;
        loop {
            if let Some(i) = self.graphs[g].initializers.get(&name) {
                return Some(i);
            }
            g = self.graphs[g].parent?.graph();
        }
    }

    /// The type of `name` as seen from graph `gi`.
    pub fn type_of(&self, gi: usize, name: Sym) -> Option<&Type> {
        let mut g = gi;
        loop {
            if let Some(t) = self.graphs[g].types.get(&name) {
                return Some(t);
            }
            g = self.graphs[g].parent?.graph();
        }
    }

    /// The shape of `name` as seen from graph `gi`.
    pub fn shape_of(&self, gi: usize, name: Sym) -> Option<&Vec<Option<i64>>> {
        let mut g = gi;
        loop {
            if let Some(t) = self.graphs[g].shapes.get(&name) {
                return Some(t);
            }
            g = self.graphs[g].parent?.graph();
        }
    }
}

pub(crate) fn init_of(t: &TensorProto, overridable: bool) -> Init {
    init_owning(t.clone(), overridable)
}

/// [`init_of`] for a tensor the caller already owns (no second copy).
pub(crate) fn init_owning(t: TensorProto, overridable: bool) -> Init {
    init_boxed(Box::new(t), overridable)
}

/// [`init_owning`] for a tensor already boxed.
pub(crate) fn init_boxed(t: Box<TensorProto>, overridable: bool) -> Init {
    Init {
        dims: t.dims.clone(),
        elem: t.data_type(),
        overridable,
        tensor: t,
    }
}

/// A graph's protobuf as the session is built from it: read (the model stays whole) or taken
/// apart (the model is dropped afterwards).
enum Source<'a> {
    Read(&'a GraphProto),
    Take(&'a mut GraphProto),
}

/// What a session node takes from its `NodeProto`.
struct NodeParts {
    name: Sym,
    op: Sym,
    inputs: Vec<Sym>,
    outputs: Vec<Sym>,
    attrs: Vec<AttributeProto>,
}

/// Attributes a session node keeps: all but the graph-valued ones (those are subgraphs).
fn plain_attribute(a: &AttributeProto) -> bool {
    a.g.is_none() && a.graphs.is_empty() && a.r#type != Some(AttributeType::Graph as i32)
}

impl Source<'_> {
    fn proto(&self) -> &GraphProto {
        match self {
            Source::Read(g) => g,
            Source::Take(g) => g,
        }
    }

    /// Initializer `k`: copied, or moved out.
    fn initializer(&mut self, k: usize) -> TensorProto {
        match self {
            Source::Read(g) => g.initializer[k].clone(),
            Source::Take(g) => std::mem::take(&mut g.initializer[k]),
        }
    }

    /// Node `i`'s name, op, inputs, outputs and plain attributes: copied, or moved out. A node
    /// holding a graph keeps its attributes in place (a subgraph's path counts them).
    fn node(&mut self, i: usize) -> NodeParts {
        match self {
            Source::Read(g) => {
                let np = &g.node[i];
                NodeParts {
                    name: Sym::new(np.name()),
                    op: Sym::new(np.op_type()),
                    inputs: syms(&np.input),
                    outputs: syms(&np.output),
                    attrs: np
                        .attribute
                        .iter()
                        .filter(|a| plain_attribute(a))
                        .cloned()
                        .collect(),
                }
            }
            Source::Take(g) => {
                let np = &mut g.node[i];
                let attrs = if np.attribute.iter().all(plain_attribute) {
                    std::mem::take(&mut np.attribute)
                } else {
                    np.attribute
                        .iter()
                        .filter(|a| plain_attribute(a))
                        .cloned()
                        .collect()
                };
                // The names are interned, and their texts in the protobuf freed as the graph is
                // read rather than when the model is dropped.
                let (name, op) = (np.name.take(), np.op_type.take());
                let (inputs, outputs) = (
                    std::mem::take(&mut np.input),
                    std::mem::take(&mut np.output),
                );
                NodeParts {
                    name: Sym::new(name.as_deref().unwrap_or_default()),
                    op: Sym::new(op.as_deref().unwrap_or_default()),
                    inputs: syms(&inputs),
                    outputs: syms(&outputs),
                    attrs,
                }
            }
        }
    }
}

/// The syms of a list of names.
fn syms(names: &[String]) -> Vec<Sym> {
    names.iter().map(|n| Sym::new(n)).collect()
}

/// The `GraphProto` a graph's path leads to in `proto`, for taking it apart.
fn graph_proto_mut<'p>(
    proto: &'p mut crate::model::proto::ModelProto,
    path: &[crate::model::GraphStep],
) -> Option<&'p mut GraphProto> {
    let mut g = proto.graph.as_mut()?;
    for step in path {
        let attr = g
            .node
            .get_mut(step.node_index as usize)?
            .attribute
            .get_mut(step.attribute_index as usize)?;
        g = match step.graph_index {
            None => attr.g.as_mut()?,
            Some(i) => attr.graphs.get_mut(i as usize)?,
        };
    }
    Some(g)
}

pub(crate) fn shape_of(t: &crate::model::proto::TypeProto) -> Option<Vec<Option<i64>>> {
    use crate::model::proto::{tensor_shape_proto::dimension::Value as D, type_proto::Value};
    let Some(Value::TensorType(tt)) = &t.value else {
        return None;
    };
    let shape = tt.shape.as_ref()?;
    // A declared rank past what any analysis holds is kept as unknown.
    if shape.dim.len() > MAX_RANK {
        return None;
    }
    Some(
        shape
            .dim
            .iter()
            .map(|d| match d.value {
                Some(D::DimValue(v)) if v >= 0 => Some(v),
                _ => None,
            })
            .collect(),
    )
}

/// The `dim_param` of each dim of a tensor type with a shape.
pub(super) fn dim_params_of(t: &crate::model::proto::TypeProto) -> Option<Vec<Option<Sym>>> {
    use crate::model::proto::{tensor_shape_proto::dimension::Value as D, type_proto::Value};
    let Some(Value::TensorType(tt)) = &t.value else {
        return None;
    };
    let shape = tt.shape.as_ref()?;
    Some(
        shape
            .dim
            .iter()
            .map(|d| match &d.value {
                Some(D::DimParam(p)) if !p.is_empty() => Some(Sym::new(p)),
                _ => None,
            })
            .collect(),
    )
}

/// The tensor a `Constant` node holds, from whichever value attribute it has.
pub fn constant_tensor(np: &NodeProto) -> Option<TensorProto> {
    constant_tensor_of(np.attribute.first(), np.output.first().cloned())
}

/// [`constant_tensor`] of a `Constant` node whose first attribute is `first` and whose output
/// is `name`.
pub(crate) fn constant_tensor_of(
    first: Option<&AttributeProto>,
    name: Option<String>,
) -> Option<TensorProto> {
    use crate::model::DataType as D;
    let a = first?;
    let mut t = match a.name() {
        "value" => *a.t.clone()?,
        "sparse_value" => {
            let sp = a.sparse_tensor.as_ref()?;
            let mut v = sp.values.clone()?;
            v.dims = sp.dims.clone();
            v
        }
        "value_float" => TensorProto {
            data_type: Some(D::Float as i32),
            float_data: vec![a.f?],
            ..Default::default()
        },
        "value_floats" => TensorProto {
            data_type: Some(D::Float as i32),
            dims: vec![a.floats.len() as i64],
            float_data: a.floats.clone(),
            ..Default::default()
        },
        "value_int" => TensorProto {
            data_type: Some(D::Int64 as i32),
            int64_data: vec![a.i?],
            ..Default::default()
        },
        "value_ints" => TensorProto {
            data_type: Some(D::Int64 as i32),
            dims: vec![a.ints.len() as i64],
            int64_data: a.ints.clone(),
            ..Default::default()
        },
        "value_string" => TensorProto {
            data_type: Some(D::String as i32),
            string_data: vec![a.s.clone()?],
            ..Default::default()
        },
        "value_strings" => TensorProto {
            data_type: Some(D::String as i32),
            dims: vec![a.strings.len() as i64],
            string_data: a.strings.clone(),
            ..Default::default()
        },
        _ => return None,
    };
    t.name = name;
    Some(t)
}

/// The integer values of a small int64/int32 tensor (typed fields or raw little-endian data);
/// `None` for other types or more than 4096 elements.
pub fn int_values(t: &TensorProto) -> Option<Vec<i64>> {
    use crate::model::DataType as D;
    const LIMIT: usize = 4096;
    let dt = t.data_type();
    if let Some(raw) = t.raw_data.as_ref().filter(|r| !r.is_empty()) {
        let (size, signed32) = if dt == D::Int64 as i32 {
            (8, false)
        } else if dt == D::Int32 as i32 {
            (4, true)
        } else {
            return None;
        };
        if raw.len() % size != 0 || raw.len() / size > LIMIT {
            return None;
        }
        return Some(
            raw.chunks_exact(size)
                .map(|c| {
                    if signed32 {
                        i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    } else {
                        i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
                    }
                })
                .collect(),
        );
    }
    if dt == D::Int64 as i32 && t.int64_data.len() <= LIMIT {
        return Some(t.int64_data.clone());
    }
    if dt == D::Int32 as i32 && t.int32_data.len() <= LIMIT {
        return Some(t.int32_data.iter().map(|&v| i64::from(v)).collect());
    }
    None
}

#[cfg(test)]
impl Session {
    /// A session of one main graph holding `nodes` and nothing else (for tests).
    pub(crate) fn of_nodes(nodes: Vec<SNode>) -> Session {
        Session {
            graphs: vec![SGraph {
                nodes,
                ..Default::default()
            }],
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node is small: a million-node graph's nodes are walked by every scan and pass. The
    /// attributes, subgraphs and implicit inputs, absent from most nodes, are a pointer each.
    #[test]
    fn a_node_is_at_most_fifteen_words() {
        assert!(std::mem::size_of::<SNode>() <= 15 * std::mem::size_of::<usize>());
    }

    /// A node's key is its graph and index, orders as the pair does and hashes as it does (so
    /// that a `SymMap` keyed by nodes walks its table in node order).
    #[test]
    fn a_node_ref_is_its_graph_and_index() {
        use std::hash::BuildHasher;
        let at = NodeRef::new(3, 70_000);
        assert_eq!((at.graph(), at.node()), (3, 70_000));
        assert!(NodeRef::new(0, 9) < NodeRef::new(1, 0));
        assert!(NodeRef::new(1, 2) < NodeRef::new(1, 3));
        let sym = crate::sym::BuildSymHasher;
        for (g, n) in [(0usize, 0usize), (0, 41), (2, 7), (5, 1 << 20)] {
            assert_eq!(
                sym.hash_one(NodeRef::new(g, n)),
                sym.hash_one((g, n)),
                "({g}, {n})"
            );
        }
    }

    /// A large graph's scans, a part of the nodes per thread, answer as a walk: an op found
    /// wherever its one live node is, never on a removed node.
    #[test]
    fn scans_on_threads_answer_as_a_walk() {
        let n = PARALLEL_SCAN_NODES + 3 * SCAN_PART + 11;
        let (relu, neg, abs) = (Sym::new("Relu"), Sym::new("Neg"), Sym::new("Abs"));
        for (at, removed) in [
            (0, false),
            (n - 1, false),
            (SCAN_PART + 7, false),
            (5, true),
        ] {
            let nodes = (0..n)
                .map(|k| SNode {
                    removed: k == at && removed,
                    ..SNode::plain(
                        Sym::new(&format!("scan{k}")),
                        if k == at { neg } else { relu },
                        Sym::AI_ONNX,
                        Some(14),
                        vec![],
                        vec![],
                    )
                })
                .collect();
            let session = Session::of_nodes(nodes);
            let g = &session.graphs[0];
            assert_eq!(g.any_live_node(|n| n.op == neg), !removed, "at {at}");
            assert!(!g.any_live_node(|n| n.op == abs));
            assert_eq!(session.live_ops([relu, neg, abs]), [true, !removed, false]);
            assert_eq!(session.has_live_op(&[abs, neg]), !removed);
        }
    }
}
