//! Function inlining after partitioning (ORT `GraphPartitioner`, §4.4, §4.6): a node that no
//! provider took and whose op is defined as a function is replaced by the function's body, whose
//! nodes are then partitioned like any other.
//!
//! Where a body comes from (`Node::TryGetFunctionProto`):
//! - a *static* body of the op's schema (`OpSchema::GetFunction`): ONNX keeps one per function
//!   opset version; ORT asks for the graph's ai.onnx opset and gets the body with the greatest
//!   version not above it, provided no op the body uses changed between the two opsets
//!   (`ValidateReferencedOpsInFuncton`). Those bodies are data, exported from ONNX by
//!   `tools/functions/export.py` into `kernel-tables/functions/onnx-functions.txt` (ONNX textual
//!   syntax) and parsed on first use;
//! - a *context-dependent* body (`OpSchema::BuildContextDependentFunction`), built from the node's
//!   attributes and input types: [`builders`] re-implements ONNX's builders;
//! - a *model-local* function, for a node whose op has no schema (schemas win).
//!
//! When: after partitioning, for nodes no provider took ([`Inliner::inline`], called by the partition
//! loop); and, for a model that has local functions, once before the level-1 optimisers for
//! every node no provider would claim ([`inline_aot`]). Inlining stops after
//! `MAX_INLINED_CALLS` calls (self-recursive local functions); the partition loop's round limit
//! bounds the depth.
//!
//! How ORT splices a body in (`Graph::InlineFunction`, `function_utils::Specialize`):
//! - a unique prefix `GenerateNodeName("_inlfunc_" + op_type)`: `_inlfunc_Mish` the first time,
//!   then `_inlfunc_Mish_token_<k>` with the graph's shared counter (checked with the oracle);
//! - formal inputs become the node's actual inputs (missing ones become missing), formal outputs
//!   its actual outputs (a missing one gets `<prefix>_<formal>`), every other value and every
//!   named node gets `<prefix>_<name>`; subgraph inputs and outputs are renamed in their own
//!   scope;
//! - attribute references (`@name`) take the node's attribute (which ORT has completed with the
//!   schema's defaults), else are dropped;
//! - `Constant` nodes of the body become initializers; the other nodes are appended to the graph.

mod builders;

use crate::sym::SymMap as HashMap;
use std::sync::OnceLock;

use crate::infer::{self, Type};
use crate::model::normalize_domain;
use crate::model::proto::{AttributeProto, FunctionProto, GraphProto, NodeProto};
use crate::session::edit::Editor;
use crate::session::{self, NodeRef, SGraph, SNode, Session};
use crate::sym::Sym;
use crate::tables::KernelTable;

/// The exported static bodies (see the module docs).
const STATIC_BODIES: &str = include_str!("../../../kernel-tables/functions/onnx-functions.txt");

/// Static bodies by (domain, op, since_version): (function opset version, body), ascending.
type StaticMap = HashMap<(Sym, Sym, i64), Vec<(i64, FunctionProto)>>;

fn static_bodies() -> &'static StaticMap {
    static CELL: OnceLock<StaticMap> = OnceLock::new();
    CELL.get_or_init(|| parse_static(STATIC_BODIES).0)
}

/// Parses the data file: blocks introduced by `#@ <domain> <op> since=<v> opset=<v>`. Returns
/// the map and the headers of blocks that did not parse (a test keeps that empty).
fn parse_static(text: &str) -> (StaticMap, Vec<String>) {
    let mut map: StaticMap = HashMap::default();
    let mut bad = Vec::new();
    let mut blocks: Vec<(&str, String)> = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("#@ ") {
            blocks.push((h, String::new()));
        } else if let Some((_, body)) = blocks.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    for (header, body) in blocks {
        let mut it = header.split_whitespace();
        let key = (|| {
            let domain = Sym::new(it.next()?);
            let op = Sym::new(it.next()?);
            let since = it.next()?.strip_prefix("since=")?.parse::<i64>().ok()?;
            let opset = it.next()?.strip_prefix("opset=")?.parse::<i64>().ok()?;
            Some((domain, op, since, opset))
        })();
        match (key, parse_function(&body)) {
            (Some((domain, op, since, opset)), Some(f)) => {
                let list = map.entry((domain, op, since)).or_default();
                list.push((opset, f));
                list.sort_by_key(|(v, _)| *v);
            }
            _ => bad.push(header.to_string()),
        }
    }
    (map, bad)
}

/// One function in ONNX's textual syntax (`<domain: ..., opset_import: [...]> Name <attrs>
/// (inputs) => (outputs) { nodes }`), read with the text view's parser.
fn parse_function(text: &str) -> Option<FunctionProto> {
    let wrapped = format!("_host () => () {{}}\n{text}");
    let model = crate::model::text::parse_model(&wrapped).ok()?;
    model.functions.into_iter().next()
}

/// Inlining stops after this many calls in a session: a model-local function that calls itself
/// twice would otherwise double its calls every round (the partitioner's round limit bounds the
/// depth, this the width). Real models inline far fewer.
const MAX_INLINED_CALLS: usize = 1 << 13;

/// Inlining stops once it has added this many nodes in a session (subgraph nodes included):
/// the call limit alone lets a self-recursive function with a long body add millions (issue
/// 15: 8,192 calls of a 1,000-node body). Real models inline far fewer.
pub const MAX_INLINED_NODES: usize = 1 << 17;

/// What inlining may add, at the least, whatever the model's size.
const MIN_INLINED_NODES: usize = 1 << 14;

/// What inlining may add per node of the model's file (its graphs and function bodies): real
/// models nest functions a few levels deep and expand far less; a tiny file whose functions call
/// each other (the fuzzer's) would otherwise add [`MAX_INLINED_NODES`] from a kilobyte.
const INLINED_NODES_PER_NODE: usize = 256;

/// The inlining budget of a model with `nodes` nodes in its file: what the input can justify,
/// between [`MIN_INLINED_NODES`] and [`MAX_INLINED_NODES`].
pub fn inlining_limit(nodes: usize) -> usize {
    nodes
        .saturating_mul(INLINED_NODES_PER_NODE)
        .clamp(MIN_INLINED_NODES, MAX_INLINED_NODES)
}

thread_local! {
    /// Nodes added by inlining since the last [`reset_budget`] on this thread.
    static INLINED_NODES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// Whether inlining stopped at [`MAX_INLINED_NODES`] since then.
    static EXHAUSTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// This session's budget ([`inlining_limit`]).
    static LIMIT: std::cell::Cell<usize> = const { std::cell::Cell::new(MAX_INLINED_NODES) };
}

/// Starts a new session's inlining budget for a model of `model_nodes` nodes in its file
/// (graphs, subgraphs and function bodies; the placer calls it once per model).
pub fn reset_budget(model_nodes: usize) {
    INLINED_NODES.with(|n| n.set(0));
    EXHAUSTED.with(|e| e.set(false));
    LIMIT.with(|l| l.set(inlining_limit(model_nodes)));
}

/// Why the last session on this thread is not a faithful simulation, if inlining stopped at
/// its node budget (the prediction would then report nodes ORT inlines as having no kernel).
pub fn budget_exceeded() -> Option<String> {
    EXHAUSTED.with(std::cell::Cell::get).then(|| {
        let limit = LIMIT.with(std::cell::Cell::get);
        format!("inlining its functions would add more than {limit} nodes")
    })
}

/// What one subgraph added by inlining counts against [`MAX_INLINED_NODES`].
pub(crate) const SUBGRAPH_COST: usize = 64;

/// The nodes a body adds: its own and those of the subgraphs in their attributes.
pub(crate) fn body_size(nodes: &[NodeProto]) -> usize {
    let mut count = 0usize;
    let mut stack: Vec<&NodeProto> = nodes.iter().collect();
    while let Some(n) = stack.pop() {
        count = count.saturating_add(1);
        for a in &n.attribute {
            for g in a.g.as_deref().into_iter().chain(&a.graphs) {
                // A subgraph costs every pass far more than a node (its own scope, order and
                // inference): charged as `SUBGRAPH_COST` nodes.
                count = count.saturating_add(SUBGRAPH_COST);
                stack.extend(&g.node);
            }
        }
    }
    count
}

/// Inlines function nodes one after another, through one [`Editor`] per graph inlined into
/// (built without an index: the splice only removes the call node and appends the body), whose
/// counted names, kept by its edits from the first call on, make the prefix of every inlined
/// body cost a look-up rather than a scan of the graph: without them a model of many small
/// calls (up to `MAX_INLINED_CALLS`) took time quadratic in its inlined nodes (the fuzzer's slow
/// case). Valid while only this inliner changes the graphs' nodes: one per batch of calls.
#[derive(Default)]
pub struct Inliner {
    editors: HashMap<usize, Editor>,
}

impl Inliner {
    /// Replaces node `ni` of graph `gi` by its function body when one is known. Returns
    /// whether it did.
    pub fn inline(
        &mut self,
        session: &mut Session,
        table: &KernelTable,
        gi: usize,
        ni: usize,
    ) -> bool {
        inline_with(self, session, table, gi, ni)
    }

    /// The editor of graph `gi`.
    fn editor(&mut self, session: &Session, gi: usize) -> &mut Editor {
        self.editors
            .entry(gi)
            .or_insert_with(|| Editor::lazy(session, gi))
    }
}

fn inline_with(
    inliner: &mut Inliner,
    session: &mut Session,
    table: &KernelTable,
    gi: usize,
    ni: usize,
) -> bool {
    let node = session.graphs[gi].nodes[ni].clone();
    let Some(body) = body_of(session, table, gi, &node) else {
        return false;
    };
    let calls: usize = session.graphs.iter().map(|g| g.generated_names.len()).sum();
    if calls >= MAX_INLINED_CALLS {
        return false;
    }
    // Checked before the body is spliced in.
    let added = body_size(&body.node);
    let within = INLINED_NODES.with(|n| {
        let total = n.get().saturating_add(added);
        let limit = LIMIT.with(std::cell::Cell::get);
        (total <= limit).then(|| n.set(total)).is_some()
    });
    if !within {
        EXHAUSTED.with(|e| e.set(true));
        return false;
    }
    splice(inliner, session, gi, ni, &node, &body);
    true
}

/// AOT inlining (`GraphPartitioner::InlineFunctionsAOT`, §4.6), before the level-1 optimisers:
/// only for a model with local functions. Every node that has a body and that no provider
/// claims in a dry run of kernel lookups is inlined, in every graph, until nothing changes.
/// Returns whether anything was inlined (the caller re-infers types).
pub fn inline_aot(session: &mut Session, table: &KernelTable, eps: &[crate::tables::Ep]) -> bool {
    if session.functions.is_empty() {
        return false;
    }
    let mut any = false;
    for _round in 0..MAX_AOT_ROUNDS {
        let versions = infer::domain_versions(session, table);
        let mut todo = Vec::new();
        for (gi, g) in session.graphs.iter().enumerate() {
            for (ni, n) in g.live_nodes() {
                let schema = infer::resolve_schema(table, &versions, n.domain, n.op).ok();
                let claimed = eps
                    .iter()
                    .any(|&ep| crate::placer::lookup(table, ep, session, gi, n, schema).is_ok());
                if !claimed {
                    todo.push((gi, ni));
                }
            }
        }
        let mut inlined = false;
        let mut inliner = Inliner::default();
        for (gi, ni) in todo {
            inlined |= inliner.inline(session, table, gi, ni);
        }
        if !inlined {
            break;
        }
        any = true;
        infer::infer_session(session, table);
    }
    any
}

/// AOT inlining repeats while it changes something (nested functions).
const MAX_AOT_ROUNDS: usize = 16;

/// The body ORT would inline for `node`, if it can be inlined.
fn body_of(
    session: &Session,
    table: &KernelTable,
    gi: usize,
    node: &SNode,
) -> Option<FunctionProto> {
    // A node of an op that has no schema but a model-local function calls the function (a
    // schema, where there is one, wins: ORT binds schemas first).
    let Some(since) = node.since else {
        return session.functions.get(&(node.domain, node.op)).cloned();
    };
    let versions = infer::domain_versions(session, table);
    // ORT asks for the graph's opset of the ONNX domain; for other domains, the since-version.
    let requested = if node.domain == Sym::AI_ONNX {
        versions.get(&Sym::AI_ONNX).copied()
    } else {
        None
    };
    let release_opset = table.max_opset("ai.onnx").unwrap_or(since);
    let ctx = Context::new(session, gi, node, release_opset);
    if let Some(built) = builders::build(&ctx, requested.unwrap_or(since)) {
        return built;
    }
    let list = static_bodies().get(&(node.domain, node.op, since))?;
    match requested {
        Some(r) => {
            let (opset, f) = list.iter().rev().find(|(v, _)| *v <= r)?;
            referenced_ops_unchanged(table, f, r, *opset).then(|| f.clone())
        }
        // `GetFunction(since, validate = false)`.
        None => list
            .iter()
            .rev()
            .find(|(v, _)| *v <= since)
            .map(|(_, f)| f.clone()),
    }
}

/// ONNX's `ValidateReferencedOpsInFuncton`: a body written for opset `body_opset` is used at
/// opset `requested` only if every ONNX op it calls resolves to the same schema at both.
fn referenced_ops_unchanged(
    table: &KernelTable,
    f: &FunctionProto,
    requested: i64,
    body_opset: i64,
) -> bool {
    if requested == body_opset {
        return true;
    }
    f.node
        .iter()
        .filter(|n| normalize_domain(n.domain()) == "ai.onnx")
        .all(|n| {
            let a = table
                .schema("ai.onnx", n.op_type(), requested)
                .map(|s| s.since);
            let b = table
                .schema("ai.onnx", n.op_type(), body_opset)
                .map(|s| s.since);
            a == b
        })
}

/// What a context-dependent builder sees of the node (`FunctionBodyBuildContext`).
pub(crate) struct Context<'a> {
    pub node: &'a SNode,
    /// Per actual input: its type, when the input exists and has one.
    pub input_types: Vec<Option<Type>>,
    /// The session, for builders that read a subgraph attribute.
    pub session: &'a Session,
    /// The highest ai.onnx opset of the release: it tells which ONNX release ORT bundles, for
    /// builders that changed between ONNX releases (23: ONNX 1.18, 25: ONNX 1.20, §0).
    pub release_opset: i64,
}

impl<'a> Context<'a> {
    fn new(session: &'a Session, gi: usize, node: &'a SNode, release_opset: i64) -> Context<'a> {
        let input_types = node
            .inputs
            .iter()
            .map(|n| {
                (!n.is_empty())
                    .then(|| session.type_of(gi, *n).cloned())
                    .flatten()
            })
            .collect();
        Context {
            node,
            input_types,
            session,
            release_opset,
        }
    }

    pub fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attr(name)
    }

    /// `ctx.hasInput(i)`: the node supplies a non-empty input `i`.
    pub fn has_input(&self, i: usize) -> bool {
        self.node.inputs.get(i).is_some_and(|n| !n.is_empty())
    }

    pub fn has_output(&self, i: usize) -> bool {
        self.node.outputs.get(i).is_some_and(|n| !n.is_empty())
    }

    /// The element type of tensor input `i`.
    pub fn elem(&self, i: usize) -> Option<i32> {
        match self.input_types.get(i)?.as_ref()? {
            Type::Tensor(e) => Some(*e),
            _ => None,
        }
    }

    /// The subgraph held in graph attribute `name`.
    pub fn subgraph(&self, name: &str) -> Option<usize> {
        self.node
            .subgraphs
            .iter()
            .find(|(a, _)| a == name)
            .map(|(_, g)| *g)
    }
}

/// Renaming scopes of the inliner (`function_utils::Inliner`).
struct Renamer<'a> {
    prefix: String,
    scopes: Vec<HashMap<Sym, Sym>>,
    /// The call node's attributes, then the function's attribute defaults.
    attrs: &'a [AttributeProto],
    defaults: &'a [AttributeProto],
}

impl Renamer<'_> {
    fn make_unique(&mut self, name: &str) -> Sym {
        let new = Sym::new(&format!("{}{name}", self.prefix));
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(Sym::new(name), new);
        }
        new
    }

    fn rename(&mut self, name: &str) -> Sym {
        if name.is_empty() {
            return Sym::EMPTY;
        }
        let key = Sym::new(name);
        for scope in self.scopes.iter().rev() {
            if let Some(&n) = scope.get(&key) {
                return n;
            }
        }
        self.make_unique(name)
    }

    /// Renames body node `n`: its name, attribute references and graph attributes in place;
    /// its inputs and outputs are returned renamed (in that order: inputs first).
    fn node(&mut self, n: &mut NodeProto) -> (Vec<Sym>, Vec<Sym>) {
        if !n.name().is_empty() {
            n.name = Some(format!("{}{}", self.prefix, n.name()));
        }
        let inputs: Vec<Sym> = n.input.iter().map(|x| self.rename(x)).collect();
        let outputs: Vec<Sym> = n.output.iter().map(|y| self.rename(y)).collect();
        let mut attrs = Vec::with_capacity(n.attribute.len());
        for mut a in std::mem::take(&mut n.attribute) {
            if let Some(r) = a.ref_attr_name.as_deref().filter(|r| !r.is_empty()) {
                let found = self
                    .attrs
                    .iter()
                    .chain(self.defaults)
                    .find(|x| x.name() == r);
                let Some(value) = found else { continue };
                let name = a.name.take();
                a = value.clone();
                a.name = name;
            }
            if let Some(g) = a.g.as_mut() {
                self.graph(g);
            }
            for g in a.graphs.iter_mut() {
                self.graph(g);
            }
            attrs.push(a);
        }
        n.attribute = attrs;
        (inputs, outputs)
    }

    /// Renames a graph attribute of a body node in place (it stays a `GraphProto` until it
    /// becomes a subgraph of the session).
    fn graph(&mut self, g: &mut GraphProto) {
        self.scopes.push(HashMap::default());
        for x in g.input.iter_mut() {
            x.name = Some(self.make_unique(x.name()).to_string());
        }
        for y in g.output.iter_mut() {
            y.name = Some(self.make_unique(y.name()).to_string());
        }
        for n in g.node.iter_mut() {
            let (inputs, outputs) = self.node(n);
            n.input = inputs.iter().map(|s| s.to_string()).collect();
            n.output = outputs.iter().map(|s| s.to_string()).collect();
        }
        self.scopes.pop();
    }
}

/// Splices `body` in place of node `ni` (see the module docs).
fn splice(
    inliner: &mut Inliner,
    session: &mut Session,
    gi: usize,
    ni: usize,
    node: &SNode,
    body: &FunctionProto,
) {
    // ORT's `GenerateNodeName` for the prefix: `base` unless a live node has that name or it
    // was generated before, else `base_token_<k>` from the graph's shared counter.
    let uniq = inliner
        .editor(session, gi)
        .generate_node_name(session, &format!("_inlfunc_{}", node.op));
    let mut r = Renamer {
        prefix: format!("{uniq}_"),
        scopes: vec![HashMap::default()],
        attrs: &node.attrs,
        defaults: &body.attribute_proto,
    };
    for (k, formal) in body.input.iter().enumerate() {
        let actual = node.inputs.get(k).copied().unwrap_or_default();
        if let Some(scope) = r.scopes.last_mut() {
            scope.insert(Sym::new(formal), actual);
        }
    }
    for (k, formal) in body.output.iter().enumerate() {
        let actual = node
            .outputs
            .get(k)
            .filter(|a| !a.is_empty())
            .copied()
            .unwrap_or_else(|| Sym::new(&format!("{}{formal}", r.prefix)));
        if let Some(scope) = r.scopes.last_mut() {
            scope.insert(Sym::new(formal), actual);
        }
    }
    // Graph attributes of the call node are subgraphs of the session; a body that reads one
    // (SequenceMap's `body`) gets it through its builder, never by reference.
    let nodes: Vec<(NodeProto, Vec<Sym>, Vec<Sym>)> = body
        .node
        .iter()
        .map(|n| {
            let mut n = n.clone();
            let (inputs, outputs) = r.node(&mut n);
            (n, inputs, outputs)
        })
        .collect();
    let had_subgraphs = !node.subgraphs.is_empty();
    if had_subgraphs {
        // The call node's subgraphs go with it (`Editor::remove`): the editors of other
        // graphs, whose counted names would miss that, are built again when next needed.
        inliner.editors.retain(|&k, _| k == gi);
    }
    let ed = inliner.editor(session, gi);
    ed.remove(session, ni);
    let graphs_before = session.graphs.len();
    for (n, inputs, outputs) in nodes {
        add_node(ed, session, n, inputs, outputs, node.origin);
    }
    // Implicit inputs change only where subgraphs come or go: a body reads nothing from outer
    // scopes that the call node did not already read.
    if had_subgraphs || session.graphs.len() != graphs_before {
        session.compute_implicit_inputs(0);
    }
}

/// Adds a (renamed) node of a body to the graph `ed` edits, with its (renamed) inputs and
/// outputs: a `Constant` becomes an initializer, graph attributes become subgraphs of the
/// session.
fn add_node(
    ed: &mut Editor,
    session: &mut Session,
    np: NodeProto,
    inputs: Vec<Sym>,
    outputs: Vec<Sym>,
    origin: Option<crate::model::NodeId>,
) {
    if np.op_type() == "Constant"
        && normalize_domain(np.domain()) == "ai.onnx"
        && let Some(mut t) = session::constant_tensor(&np)
    {
        let gi = ed.gi;
        let name = outputs.first().copied().unwrap_or_default();
        t.name = Some(name.to_string());
        let init = session::init_owning(t, false);
        let g = &mut session.graphs[gi];
        g.types.insert(name, Type::Tensor(init.elem));
        g.shapes
            .insert(name, init.dims.iter().map(|&d| Some(d)).collect());
        g.initializers.insert(name, init);
        return;
    }
    let (name, op, domain) = (
        Sym::new(np.name()),
        Sym::new(np.op_type()),
        Sym::new(normalize_domain(np.domain())),
    );
    let mut attrs = Vec::with_capacity(np.attribute.len());
    let mut graphs: Vec<(Sym, GraphProto)> = Vec::new();
    for mut a in np.attribute {
        if let Some(g) = a.g.take() {
            graphs.push((Sym::new(a.name()), *g));
        } else if !a.graphs.is_empty() {
            // No ONNX op takes a list of graphs; keep the attribute out of the node as ORT's
            // session graph would hold it as subgraphs we do not model.
            continue;
        } else {
            attrs.push(a);
        }
    }
    // The node's subgraphs first, each knowing the index the node will have (they are graphs
    // of their own: the node's graph gains no node meanwhile).
    let at = NodeRef::new(ed.gi, session.graphs[ed.gi].nodes.len());
    let subgraphs = graphs
        .into_iter()
        .map(|(attr, g)| (attr, add_graph(session, at, g, origin)))
        .collect();
    ed.add(
        session,
        SNode {
            name,
            op,
            domain,
            since: None,
            inputs,
            outputs,
            attrs: attrs.into(),
            subgraphs,
            implicit_inputs: thin_vec::ThinVec::new(),
            ep: None,
            kernel: None,
            origin,
            removed: false,
        },
    );
}

/// Adds a subgraph held by node `parent`; returns its index.
fn add_graph(
    session: &mut Session,
    parent: NodeRef,
    g: GraphProto,
    origin: Option<crate::model::NodeId>,
) -> usize {
    let mut graph = SGraph {
        name: Sym::new(g.name()),
        parent: Some(parent),
        ..SGraph::default()
    };
    for t in &g.initializer {
        graph
            .initializers
            .insert(Sym::new(t.name()), session::init_of(t, false));
    }
    graph.inputs = g.input.iter().map(|i| Sym::new(i.name())).collect();
    graph.outputs = g.output.iter().map(|o| Sym::new(o.name())).collect();
    for vi in g.input.iter().chain(&g.output).chain(&g.value_info) {
        if let Some(t) = vi.r#type.as_ref() {
            let name = Sym::new(vi.name());
            if let Some(ty) = Type::from_proto(t) {
                graph.types.entry(name).or_insert(ty);
            }
            if let Some(shape) = session::shape_of(t) {
                graph.shapes.entry(name).or_insert(shape);
            }
        }
    }
    // Map inserts only: the order of the walk cannot reach the maps' contents.
    for (name, init) in &graph.initializers {
        graph.types.insert(*name, Type::Tensor(init.elem));
        graph
            .shapes
            .insert(*name, init.dims.iter().map(|&d| Some(d)).collect());
    }
    let sg = session.graphs.len();
    session.graphs.push(graph);
    let mut ed = Editor::lazy(session, sg);
    for n in g.node {
        let inputs = n.input.iter().map(|s| Sym::new(s)).collect();
        let outputs = n.output.iter().map(|s| Sym::new(s)).collect();
        add_node(&mut ed, session, n, inputs, outputs, origin);
    }
    sg
}

/// The textual form of a session subgraph, as a `GraphProto` (for builders that copy a graph
/// attribute into their body). Nested subgraphs are carried along.
pub(crate) fn graph_proto(session: &Session, sg: usize) -> GraphProto {
    use crate::model::proto::ValueInfoProto;
    let g = &session.graphs[sg];
    let vi = |name: &Sym| ValueInfoProto {
        name: Some(name.to_string()),
        r#type: g.types.get(name).map(|t| {
            let mut tp = t.to_proto();
            if let (Some(shape), Some(crate::model::proto::type_proto::Value::TensorType(tt))) =
                (g.shapes.get(name), tp.value.as_mut())
            {
                tt.shape = Some(shape_proto(shape));
            }
            tp
        }),
        ..Default::default()
    };
    let mut nodes = Vec::new();
    for (_, n) in g.live_nodes() {
        let mut attrs = n.attrs.to_vec();
        for (a, s) in &n.subgraphs {
            attrs.push(AttributeProto {
                name: Some(a.to_string()),
                r#type: Some(crate::model::proto::attribute_proto::AttributeType::Graph as i32),
                g: Some(Box::new(graph_proto(session, *s))),
                ..Default::default()
            });
        }
        nodes.push(NodeProto {
            name: Some(n.name.to_string()),
            op_type: Some(n.op.to_string()),
            domain: Some(n.domain.to_string()),
            input: n.inputs.iter().map(|s| s.to_string()).collect(),
            output: n.outputs.iter().map(|s| s.to_string()).collect(),
            attribute: attrs,
            ..Default::default()
        });
    }
    // Initializers (including former `Constant` nodes) travel as `Constant` nodes.
    // By name (the texts), not in the map's order.
    let mut inits: Vec<(&Sym, &session::Init)> = g.initializers.iter().collect();
    inits.sort_by(|a, b| a.0.cmp(b.0));
    let mut consts: Vec<NodeProto> = inits
        .into_iter()
        .map(|(name, init)| NodeProto {
            op_type: Some("Constant".into()),
            output: vec![name.to_string()],
            attribute: vec![AttributeProto {
                name: Some("value".into()),
                r#type: Some(crate::model::proto::attribute_proto::AttributeType::Tensor as i32),
                t: Some(init.tensor.clone()),
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    consts.extend(nodes);
    GraphProto {
        name: Some(g.name.to_string()),
        input: g.inputs.iter().map(vi).collect(),
        output: g.outputs.iter().map(vi).collect(),
        node: consts,
        ..Default::default()
    }
}

fn shape_proto(shape: &[Option<i64>]) -> crate::model::proto::TensorShapeProto {
    use crate::model::proto::tensor_shape_proto::{Dimension, dimension::Value};
    crate::model::proto::TensorShapeProto {
        dim: shape
            .iter()
            .map(|d| Dimension {
                value: d.map(Value::DimValue),
                ..Default::default()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inlining budget follows the file: 256 nodes per node, between 16,384 and 131,072.
    #[test]
    fn inlining_limit_follows_the_model() {
        assert_eq!(inlining_limit(0), MIN_INLINED_NODES);
        assert_eq!(inlining_limit(20), MIN_INLINED_NODES);
        assert_eq!(inlining_limit(100), 25_600);
        assert_eq!(inlining_limit(1_000), MAX_INLINED_NODES);
        assert_eq!(inlining_limit(usize::MAX), MAX_INLINED_NODES);
    }

    #[test]
    fn every_static_body_parses() {
        let (map, bad) = parse_static(STATIC_BODIES);
        assert!(bad.is_empty(), "blocks that do not parse: {bad:?}");
        let blocks = STATIC_BODIES
            .lines()
            .filter(|l| l.starts_with("#@ "))
            .count();
        assert_eq!(map.values().map(Vec::len).sum::<usize>(), blocks);
        let mish = map
            .get(&(Sym::AI_ONNX, Sym::new("Mish"), 22))
            .expect("Mish-22 has a body");
        let ops: Vec<&str> = mish[0].1.node.iter().map(|n| n.op_type()).collect();
        assert_eq!(ops, ["Softplus", "Tanh", "Mul"]);
    }

    #[test]
    fn static_defaults_are_attribute_protos() {
        let map = static_bodies();
        let swish = &map[&(Sym::AI_ONNX, Sym::new("Swish"), 24)][0].1;
        assert_eq!(swish.attribute_proto.len(), 1);
        assert_eq!(swish.attribute_proto[0].name(), "alpha");
        assert_eq!(swish.attribute_proto[0].f, Some(1.0));
    }

    fn node(name: &str, op: &str, since: i64, inputs: &[&str], outputs: &[&str]) -> SNode {
        SNode::plain(
            name.into(),
            op.into(),
            Sym::AI_ONNX,
            Some(since),
            inputs.iter().map(|&s| Sym::new(s)).collect(),
            outputs.iter().map(|&s| Sym::new(s)).collect(),
        )
    }

    /// ORT's names (oracle, ORT 1.24.4): the first inlined Mish gets `_inlfunc_Mish`, later ones
    /// `_inlfunc_Mish_token_<k>`; a prefix taken by a node name is skipped while the node lives;
    /// internal values get `<prefix>_<name>`, unnamed body nodes stay unnamed.
    #[test]
    fn inlined_names_follow_ort() {
        let table = crate::tables::resolve("1.24.4").expect("bundled").table();
        let mut g = SGraph {
            inputs: vec!["X".into()],
            outputs: vec!["Z".into()],
            ..SGraph::default()
        };
        g.types.insert("X".into(), Type::Tensor(1));
        g.nodes
            .push(node("_inlfunc_Mish", "Mish", 22, &["X"], &["M"]));
        g.nodes.push(node("", "Mish", 22, &["M"], &["Y"]));
        g.nodes.push(node("m3", "Mish", 22, &["Y"], &["Z"]));
        let mut s = Session {
            graphs: vec![g],
            opsets: [(Sym::AI_ONNX, 22)].into_iter().collect(),
            ir_version: 10,
            ..Session::default()
        };
        for ni in 0..3 {
            assert!(Inliner::default().inline(&mut s, table, 0, ni));
        }
        let g = &s.graphs[0];
        let live: Vec<(&str, &str, Vec<&str>, Vec<&str>)> = g
            .live_nodes()
            .map(|(_, n)| {
                (
                    n.name.as_str(),
                    n.op.as_str(),
                    n.inputs.iter().map(|i| i.as_str()).collect(),
                    n.outputs.iter().map(|o| o.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(live.len(), 9);
        assert_eq!(
            live[0],
            (
                "",
                "Softplus",
                vec!["X"],
                vec!["_inlfunc_Mish_token_0_Softplus_X"]
            )
        );
        assert_eq!(live[2].3, vec!["M"]);
        assert_eq!(live[3].3, vec!["_inlfunc_Mish_Softplus_X"]);
        assert_eq!(live[6].3, vec!["_inlfunc_Mish_token_1_Softplus_X"]);
        assert_eq!(live[8].3, vec!["Z"]);
    }

    /// Constant nodes of a body become initializers; attribute references take the node's
    /// value, else the schema default.
    #[test]
    fn constants_become_initializers_and_refs_resolve() {
        let table = crate::tables::resolve("1.24.4").expect("bundled").table();
        let mut g = SGraph::default();
        g.types.insert("x".into(), Type::Tensor(1));
        g.nodes.push(node("", "Swish", 24, &["x"], &["y"]));
        let mut s = Session {
            graphs: vec![g],
            opsets: [(Sym::AI_ONNX, 24)].into_iter().collect(),
            ir_version: 10,
            ..Session::default()
        };
        assert!(Inliner::default().inline(&mut s, table, 0, 0));
        let g = &s.graphs[0];
        let alpha = g
            .initializers
            .get(&Sym::new("_inlfunc_Swish_Alpha"))
            .expect("initializer");
        assert_eq!(alpha.tensor.float_data, vec![1.0]);
        let ops: Vec<&str> = g.live_nodes().map(|(_, n)| n.op.as_str()).collect();
        assert_eq!(ops, ["CastLike", "Mul", "Sigmoid", "Mul"]);
    }

    /// Model-local functions, nested, calling a schema function (Mish), called twice: the copies
    /// ORT 1.24.4 logs for this model (oracle, level disable).
    #[test]
    fn local_functions_inline_as_ort_does() {
        let text = r#"
<ir_version: 10, opset_import: ["" : 22, "local" : 1]>
agraph (float[2, 6] X1) => (float[4, 3] Z, float[4, 3] Z2) {
    Z = local.MyFn (X1)
    Z2 = local.MyFn (X1)
}
<domain: "local", opset_import: ["" : 22, "local" : 1]>
MyFn (A) => (Y) {
    s = Shape (A)
    i = Constant <value = int64[2] {4, 3}> ()
    r = Reshape (A, i)
    m = local.Inner (r)
    Y = Mish (m)
}
<domain: "local", opset_import: ["" : 22]>
Inner (X) => (Y) {
    t = Softplus (X)
    Y = Tanh (t)
}
"#;
        let proto = crate::model::text::parse_model(text).expect("parses");
        let model = crate::model::Model::from_proto(std::path::Path::new("local2.onnx"), 0, proto)
            .expect("loads");
        let table = crate::tables::resolve("1.24.4").expect("bundled").table();
        let options = crate::placer::Options {
            level: crate::placer::OptLevel::Disable,
            ..Default::default()
        };
        let p = crate::placer::place(&model, table, &options);
        assert_eq!(p.outcome, crate::placer::Outcome::Ok);
        let mut lines: Vec<String> = p.copies.iter().map(|c| c.log_line()).collect();
        lines.sort();
        let expected = [
            "Add MemcpyFromHost after _inlfunc_Inner_t for CUDAExecutionProvider",
            "Add MemcpyFromHost after _inlfunc_Inner_token_1_t for CUDAExecutionProvider",
            "Add MemcpyFromHost after _inlfunc_Mish_Softplus_X for CUDAExecutionProvider",
            "Add MemcpyFromHost after _inlfunc_Mish_token_2_Softplus_X for CUDAExecutionProvider",
            "Add MemcpyToHost before _inlfunc_MyFn_m for CUDAExecutionProvider",
            "Add MemcpyToHost before _inlfunc_MyFn_r for CUDAExecutionProvider",
            "Add MemcpyToHost before _inlfunc_MyFn_token_0_m for CUDAExecutionProvider",
            "Add MemcpyToHost before _inlfunc_MyFn_token_0_r for CUDAExecutionProvider",
        ];
        assert_eq!(lines, expected);
    }

    /// A function that calls itself twice: inlining stops (the round limit bounds the depth,
    /// the node cap the width) and the session fails for the call left over.
    #[test]
    fn recursive_local_functions_terminate() {
        let text = r#"
<ir_version: 10, opset_import: ["" : 22, "local" : 1]>
agraph (float[2] X) => (float[2] Z) {
    Z = local.Rec (X)
}
<domain: "local", opset_import: ["" : 22, "local" : 1]>
Rec (A) => (Y) {
    b = local.Rec (A)
    c = local.Rec (b)
    Y = Add (b, c)
}
"#;
        let proto = crate::model::text::parse_model(text).expect("parses");
        let model = crate::model::Model::from_proto(std::path::Path::new("rec.onnx"), 0, proto)
            .expect("loads");
        let table = crate::tables::resolve("1.24.4").expect("bundled").table();
        let options = crate::placer::Options {
            level: crate::placer::OptLevel::Disable,
            ..Default::default()
        };
        let p = crate::placer::place(&model, table, &options);
        assert!(matches!(p.outcome, crate::placer::Outcome::NoKernel(_)));
    }
}
