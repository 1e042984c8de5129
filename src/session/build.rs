//! The session graph straight from a model file's bytes ([`from_file`]), the way `place` builds
//! it: the graph structure is read from the wire ([`crate::model::view`]: names are slices of the
//! mapped file until the session interns them), tensors, attributes and types are decoded from
//! their own slices (raw data stays in the map), and neither the whole `ModelProto` nor the
//! model's index is ever built. The session is the one built by [`Session::from_model`] from the
//! decoded model, node for node (`tests/it/session.rs` compares them on every fixture).
//!
//! Loading's refusals are kept: a file the view declines (an encoding it leaves to the decoder),
//! or one that would fail to load — values defined twice, an input or graph output nothing
//! defines, a cycle, an impossible tensor shape, external data outside the model's folder, too
//! large to analyse, not a model — makes [`from_file`] answer `None`, and the caller loads the
//! model the general way ([`crate::model::load`]), which reads it or says precisely why not.

use std::path::Path;

use crate::sym::{SymMap as FxHashMap, SymSet as FxHashSet};
use bytes::Bytes;

use crate::sym::Sym;

use super::{
    Init, NodeRef, SGraph, SNode, Session, Type, constant_tensor_of, dim_params_of, init_boxed,
    init_of, init_owning, shape_of,
};
use crate::model::proto::attribute_proto::AttributeType;
use crate::model::proto::{AttributeProto, TensorProto};
use crate::model::view::{
    AttributeView, Declined, GraphView, ModelView, NodeView, ValueInfoView, sparse_tensor, tensor,
};
use crate::model::{LoadError, NodeId, normalize_domain};

type R<T> = Result<T, Declined>;

/// The producer recorded for a graph input or initializer.
const NOT_A_NODE: u32 = u32::MAX;

/// A session built from a file, with what the session script needs of the model besides its
/// graph.
#[derive(Debug)]
pub struct Built {
    pub session: Session,
    pub header: Header,
}

/// What the session script reads of a model beside its graphs: the opset imports (the load's
/// opset check), the model-local functions, and the model's size (the inlining budget).
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// The model's opset imports, domains normalised, in file order.
    pub opsets: Vec<(String, i64)>,
    /// The opset imports of its local functions, in file order.
    pub function_opsets: Vec<(String, i64)>,
    /// The local functions' (normalised domain, name), in file order.
    pub local_functions: Vec<(Sym, Sym)>,
    /// Nodes of every graph (subgraphs included).
    pub nodes: usize,
    /// Subgraphs (graph attributes) of every graph.
    pub subgraphs: usize,
    /// The main graph as loaded lists every node after the nodes whose outputs it reads
    /// (explicitly or through its subgraphs): its Kahn order is then its live nodes in index
    /// order ([`crate::session::order::topological_order`]), known without building it. False
    /// where not known (a model decoded whole).
    pub main_sorted: bool,
}

impl Header {
    /// The header of a decoded model.
    pub fn of_model(model: &crate::model::Model) -> Header {
        let mut h = Header::of_functions(model.opsets.clone(), &model.proto.functions);
        let mut stack: Vec<&crate::model::proto::NodeProto> = model
            .proto
            .graph
            .as_ref()
            .map(|g| g.node.iter().collect())
            .unwrap_or_default();
        while let Some(n) = stack.pop() {
            h.nodes += 1;
            for a in &n.attribute {
                for g in a.g.as_deref().into_iter().chain(&a.graphs) {
                    h.subgraphs += 1;
                    stack.extend(&g.node);
                }
            }
        }
        h
    }

    fn of_functions(
        opsets: Vec<(String, i64)>,
        functions: &[crate::model::proto::FunctionProto],
    ) -> Header {
        Header {
            opsets,
            function_opsets: functions
                .iter()
                .flat_map(|f| &f.opset_import)
                .map(|o| (normalize_domain(o.domain()).to_string(), o.version()))
                .collect(),
            local_functions: functions
                .iter()
                .map(|f| (Sym::new(normalize_domain(f.domain())), Sym::new(f.name())))
                .collect(),
            nodes: 0,
            subgraphs: 0,
            main_sorted: false,
        }
    }
}

/// Builds the session of the model file at `path`, or `None` when the file is not one the fast
/// path reads (see the module docs): load it with [`crate::model::load`] then.
pub fn from_file(path: &Path) -> Result<Option<Built>, LoadError> {
    if path.extension().is_some_and(|e| e == "onnxtxt") {
        return Ok(None);
    }
    let (bytes, _size) = crate::model::map_model_file(path)?;
    let built = from_bytes(path, &bytes).ok();
    if built.is_some() {
        crate::model::release_mapped_pages(&bytes);
    }
    Ok(built)
}

/// [`from_file`] for bytes already in memory; `path` locates external data.
pub fn from_bytes(path: &Path, bytes: &Bytes) -> R<Built> {
    let budget = crate::model::Budget::for_file(bytes.len() as u64);
    let c = crate::model::census_within(bytes, budget);
    if c.nodes > budget.nodes || c.decoded_bytes > budget.decoded_bytes {
        return Err(Declined);
    }
    let m = ModelView::parse(bytes)?;
    let (Some(ir_version), Some(graph)) = (m.ir_version, m.graph) else {
        return Err(Declined);
    };
    if ir_version <= 0 {
        return Err(Declined);
    }
    let opsets: Vec<(String, i64)> = m
        .opset_import
        .iter()
        .map(|o| (normalize_domain(o.domain()).to_string(), o.version()))
        .collect();
    let mut header = Header::of_functions(opsets.clone(), &m.functions);
    let mut b = Builder {
        file: bytes,
        path,
        session: Session {
            graphs: Vec::new(),
            opsets: opsets.iter().map(|(d, v)| (Sym::new(d), *v)).collect(),
            ir_version,
            kept: Default::default(),
            functions: m
                .functions
                .into_iter()
                .map(|f| {
                    (
                        (Sym::new(normalize_domain(f.domain())), Sym::new(f.name())),
                        f,
                    )
                })
                .collect(),
        },
        next_node: 0,
        scopes: Vec::new(),
        unsorted: Vec::new(),
        nodes: 0,
        subgraphs: 0,
    };
    b.graph(graph, None)?;
    let mut session = b.session;
    session.compute_implicit_inputs(0);
    // A graph whose nodes read only earlier nodes has no cycle; what subgraphs read from an
    // enclosing graph (implicit inputs, known now) may still close one.
    for gi in 0..session.graphs.len() {
        let reads_ahead = || {
            let g = &session.graphs[gi];
            if g.nodes.iter().all(|n| n.implicit_inputs.is_empty()) {
                return false;
            }
            let mut producer: FxHashMap<Sym, usize> = FxHashMap::default();
            for (ni, n) in g.nodes.iter().enumerate() {
                for o in &n.outputs {
                    producer.insert(*o, ni);
                }
            }
            g.nodes.iter().enumerate().any(|(ni, n)| {
                n.implicit_inputs
                    .iter()
                    .any(|v| producer.get(v).is_some_and(|&p| p >= ni))
            })
        };
        let unsorted = b.unsorted.contains(&gi) || reads_ahead();
        if unsorted && has_cycle(&session.graphs[gi]) {
            return Err(Declined);
        }
        if gi == 0 {
            header.main_sorted = !unsorted;
        }
    }
    for g in &mut session.graphs {
        g.record_loaded();
    }
    header.nodes = b.nodes;
    header.subgraphs = b.subgraphs;
    Ok(Built { session, header })
}

struct Builder<'a> {
    file: &'a Bytes,
    path: &'a Path,
    session: Session,
    /// The model's numbering of nodes (`model::NodeId`): a graph's nodes take consecutive
    /// ids when the graph is reached, before its subgraphs.
    next_node: u32,
    /// The values each enclosing graph defines, innermost last, with the node of that graph
    /// producing each (`NOT_A_NODE` for graph inputs and initializers).
    scopes: Vec<FxHashMap<Sym, u32>>,
    /// Graphs whose nodes read a value a later node of theirs produces (their cycle check needs
    /// Kahn's algorithm; every other graph's file order is a topological order).
    unsorted: Vec<usize>,
    nodes: usize,
    subgraphs: usize,
}

/// A node as read from the wire, its names interned and its attributes decoded.
struct Read<'a> {
    name: Sym,
    op: Sym,
    domain: Sym,
    inputs: Vec<Sym>,
    outputs: Vec<Sym>,
    /// Its attributes but the graph-valued ones (the session node's).
    attrs: super::ThinVec<AttributeProto>,
    /// Its graph attributes: name and graphs, in order.
    graphs: Vec<(&'a str, Vec<&'a [u8]>)>,
    /// A `Constant` of the ONNX domain whose value becomes an initializer: that initializer.
    /// (Boxed: a node's read is held from its parsing to its turn in the node loop, and most
    /// nodes have none.)
    constant: Option<Box<Init>>,
}

impl<'a> Read<'a> {
    /// Everything of the node in `view` but its names (interned in order later, in one place):
    /// its attributes decoded and checked, and the vectors its names will fill, sized. Done
    /// where the node is parsed, off the thread that interns.
    fn unnamed(view: &NodeView<'a>, path: &Path) -> R<Read<'a>> {
        let attributes: Vec<AttributeView<'a>> = view
            .attributes
            .iter()
            .map(|b| AttributeView::parse(b))
            .collect::<R<_>>()?;
        for a in &attributes {
            let a = match a {
                AttributeView::Plain(a) => a,
                AttributeView::Graphs { rest, .. } => rest.as_ref(),
            };
            for t in a.t.as_deref().into_iter().chain(&a.tensors) {
                check_external(path, t)?;
            }
        }
        // The texts the interned names would have (equal syms, equal texts).
        let constant = if view.op_type == "Constant" && normalize_domain(view.domain) == "ai.onnx" {
            let first = match attributes.first() {
                Some(AttributeView::Plain(a)) => Some(a),
                _ => None,
            };
            constant_tensor_of(first, view.outputs.first().map(|o| o.to_string()))
                .map(|t| Box::new(init_owning(t, false)))
        } else {
            None
        };
        let mut attrs = super::ThinVec::with_capacity(attributes.len());
        let mut graphs = Vec::new();
        for a in attributes {
            match a {
                AttributeView::Plain(a) => {
                    if a.r#type != Some(AttributeType::Graph as i32) {
                        attrs.push(a);
                    }
                }
                AttributeView::Graphs {
                    name, graphs: g, ..
                } => graphs.push((name, g)),
            }
        }
        Ok(Read {
            name: Sym::EMPTY,
            op: Sym::EMPTY,
            domain: Sym::EMPTY,
            inputs: vec![Sym::EMPTY; view.inputs.len()],
            outputs: vec![Sym::EMPTY; view.outputs.len()],
            attrs,
            graphs,
            constant,
        })
    }
}

/// Graphs of at least this many nodes have their nodes parsed on other threads while this one
/// interns the names (below it, a thread costs more than it saves).
const PARALLEL_READ_NODES: usize = 8192;

/// The most threads parsing one graph's nodes. On a million-node graph one parser works about as
/// long as the interning (200 ms each, the parser allocating the nodes and decoding their
/// attributes) and the interning thread waits whenever the parser is held up; with two, each
/// parser has half the work. More would only wait on the interning.
const MAX_PARSERS: usize = 2;

/// Nodes a parsing thread hands over at a time.
const READ_BATCH: usize = 2048;

/// Each name's slot in the interner is asked for this many names before it is interned.
const INTERN_AHEAD: usize = 8;

/// Graphs of at least this many initializers have them decoded on several threads.
const PARALLEL_INITIALIZERS: usize = 4096;

/// Graphs of at least this many nodes (and no subgraph) have their nodes' inputs checked on
/// several threads.
const PARALLEL_INPUT_CHECK: usize = 16_384;

/// Nodes a thread checks the inputs of at a time.
const INPUT_CHECK_CHUNK: usize = 8_192;

/// Initializers a thread decodes at a time.
const INITIALIZER_CHUNK: usize = 512;

/// The initializers of a graph (their slices of `file`) decoded, each into the box the session
/// keeps it in (no second copy), checked as loading checks them (`path`: the model's), with the
/// hash of its name ([`crate::sym::text_hash`]), in file order. Many are decoded on several
/// threads, a chunk at a time: decoding is most of the work (a million-node decoder holds
/// 272,729), and interning the names, which is serial, is left to the caller. The first
/// initializer in file order that fails decides the error, as one thread would.
fn initializers(file: &Bytes, path: &Path, list: &[&[u8]]) -> R<Vec<(Init, u64)>> {
    let one = |file: &Bytes, b: &[u8]| -> R<(Init, u64)> {
        let t = Box::new(tensor(file, b)?);
        check_initializer(path, &t)?;
        let h = crate::sym::text_hash(t.name());
        Ok((init_boxed(t, false), h))
    };
    let threads = crate::threads::threads();
    if list.len() < PARALLEL_INITIALIZERS || threads < 2 {
        return list.iter().map(|b| one(file, b)).collect();
    }
    let chunks =
        crate::threads::map_chunks(list, INITIALIZER_CHUNK, threads, "initializers", |chunk| {
            // A handle of the chunk's own on the file's bytes: a tensor's raw data is a slice
            // that counts a reference on it, instead of on the file's one count, which every
            // thread would then take turns to hold.
            let file = Bytes::from_owner(file.clone());
            chunk.iter().map(|b| one(&file, b)).collect::<R<Vec<_>>>()
        });
    let mut all = Vec::with_capacity(list.len());
    for chunk in chunks {
        all.extend(chunk?);
    }
    Ok(all)
}

/// Parsed nodes, their names still to intern: the texts, flat (per node its name, op type and
/// (normalised) domain, then its inputs and outputs), each with its [`crate::sym::text_hash`].
#[derive(Default)]
struct ReadBatch<'a> {
    texts: Vec<(&'a str, u64)>,
    nodes: Vec<Read<'a>>,
}

impl<'a> ReadBatch<'a> {
    fn parse(&mut self, chunk: &[&'a [u8]], view: &mut NodeView<'a>, path: &Path) -> R<()> {
        self.texts.clear();
        // A vector of its own: the last one was handed over with its nodes.
        self.nodes = Vec::with_capacity(chunk.len());
        for b in chunk {
            view.parse_into(b)?;
            let hashed = |t: &'a str| (t, crate::sym::text_hash(t));
            self.texts.push(hashed(view.name));
            self.texts.push(hashed(view.op_type));
            self.texts.push(hashed(normalize_domain(view.domain)));
            self.texts.extend(view.inputs.iter().map(|&t| hashed(t)));
            self.texts.extend(view.outputs.iter().map(|&t| hashed(t)));
            self.nodes.push(Read::unnamed(view, path)?);
        }
        Ok(())
    }

    /// Interns the batch's names under `names` and hands its nodes over: the only work of the
    /// interning thread, which no other thread can share (ids are handed out in order). The
    /// nodes stay where the parsing thread put them (a million nodes' reads are 120 MiB that
    /// this thread would otherwise copy, faulting in every page).
    fn intern(&mut self, names: &mut crate::sym::Interner) -> Vec<Read<'a>> {
        for &(_, h) in self.texts.iter().take(INTERN_AHEAD) {
            names.prefetch(h);
        }
        let mut t = 0;
        // The next name, interned.
        let mut one = || {
            if let Some(&(_, h)) = self.texts.get(t + INTERN_AHEAD) {
                names.prefetch(h);
            }
            let (s, h) = self.texts[t];
            t += 1;
            names.intern_hashed(s, h)
        };
        for n in &mut self.nodes {
            (n.name, n.op, n.domain) = (one(), one(), one());
            for s in n.inputs.iter_mut().chain(&mut n.outputs) {
                *s = one();
            }
        }
        std::mem::take(&mut self.nodes)
    }
}

/// The nodes of a graph read from their slices of the wire, in batches of [`READ_BATCH`], their
/// names interned (in the nodes' order: ids do not depend on how the work was split) and their
/// attributes decoded (`path`: the model's, for the tensors' external data). A large graph's
/// nodes are parsed on other threads while this one interns: interning is serial (one table),
/// parsing, hashing the names, decoding the attributes and allocating the nodes are not.
fn read_nodes<'a>(slices: &[&'a [u8]], path: &Path) -> R<Vec<Vec<Read<'a>>>> {
    let parsers = crate::threads::threads()
        .saturating_sub(1)
        .clamp(1, MAX_PARSERS);
    read_nodes_on(slices, path, parsers)
}

/// [`read_nodes`] with up to `parsers` parsing threads. Parser `p` parses batches `p`,
/// `p + parsers`, ... and hands them over in its own channel, so that this thread, taking batch
/// `k` from parser `k % parsers`, interns them in order; a parser the system would not give has
/// its batches parsed here, in their turn.
fn read_nodes_on<'a>(slices: &[&'a [u8]], path: &Path, parsers: usize) -> R<Vec<Vec<Read<'a>>>> {
    let mut nodes: Vec<Vec<Read<'a>>> = Vec::with_capacity(slices.len().div_ceil(READ_BATCH));
    let mut names = crate::sym::Interner::lock();
    names.reserve(slices.len() * 3);
    let parsers = if slices.len() < PARALLEL_READ_NODES {
        0
    } else {
        parsers
    };
    std::thread::scope(|scope| {
        let lanes: Vec<_> = (0..parsers)
            .map(|p| {
                // Two batches in flight each way: parsed ones forward, emptied ones back for
                // reuse.
                let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<R<ReadBatch<'a>>>(2);
                let (empty_tx, empty_rx) = std::sync::mpsc::sync_channel::<ReadBatch<'a>>(2);
                let parser = std::thread::Builder::new()
                    .name("parse".into())
                    .spawn_scoped(scope, move || {
                        let mut view = NodeView::default();
                        for chunk in slices.chunks(READ_BATCH).skip(p).step_by(parsers) {
                            let mut batch = empty_rx.try_recv().unwrap_or_default();
                            let parsed = batch.parse(chunk, &mut view, path).map(|()| batch);
                            let failed = parsed.is_err();
                            // The receiver gone (it stopped at an error) or this batch failed:
                            // done.
                            if full_tx.send(parsed).is_err() || failed {
                                return;
                            }
                        }
                    });
                parser.ok().map(|_| (full_rx, empty_tx))
            })
            .collect();
        let (mut here, mut view) = (ReadBatch::default(), NodeView::default());
        for (k, chunk) in slices.chunks(READ_BATCH).enumerate() {
            match lanes.get(k % parsers.max(1)).and_then(Option::as_ref) {
                Some((full_rx, empty_tx)) => {
                    // A parser gone without a word has panicked: the scope says so.
                    let mut batch = full_rx.recv().map_err(|_| Declined)??;
                    nodes.push(batch.intern(&mut names));
                    // The parser may have finished and dropped its end: the batch is then
                    // dropped here.
                    let _ = empty_tx.try_send(batch);
                }
                None => {
                    here.parse(chunk, &mut view, path)?;
                    nodes.push(here.intern(&mut names));
                }
            }
        }
        Ok(nodes)
    })
}

impl<'a> Builder<'a> {
    /// Builds graph `bytes` (its subgraphs after it, in the model's order) and returns its
    /// index; `parent` is the node that holds it.
    fn graph(&mut self, bytes: &'a [u8], parent: Option<NodeRef>) -> R<usize> {
        let gi = self.session.graphs.len();
        self.session.graphs.push(SGraph::default());
        let g = GraphView::parse(bytes)?;
        let ir4 = self.session.ir_version >= 4;
        let mut graph = SGraph {
            name: Sym::new(g.name.unwrap_or("")),
            parent,
            ..SGraph::default()
        };
        let values_of =
            |list: &[&'a [u8]]| -> R<Vec<(Sym, Option<crate::model::proto::TypeProto>)>> {
                list.iter()
                    .map(|b| ValueInfoView::parse(b).map(|v| (Sym::new(v.name), v.ty)))
                    .collect()
            };
        let inputs = values_of(&g.inputs)?;
        let outputs = values_of(&g.outputs)?;
        let value_info = values_of(&g.value_info)?;
        // The initializers are decoded (on threads of their own, for many) while the nodes are
        // read and their names interned: neither needs the other until both are done (either
        // failing declines the fast path).
        let (file, path) = (self.file, self.path);
        let (nodes, decoded) = if g.initializers.len() < PARALLEL_INITIALIZERS {
            (read_nodes(&g.nodes, path), None)
        } else {
            std::thread::scope(|scope| {
                let beside = std::thread::Builder::new()
                    .name("initializers".into())
                    .spawn_scoped(scope, || initializers(file, path, &g.initializers))
                    .ok();
                let nodes = read_nodes(&g.nodes, path);
                let decoded = beside.map(|h| {
                    h.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                });
                (nodes, decoded)
            })
        };
        let nodes = nodes?;
        let decoded = match decoded {
            Some(decoded) => decoded?,
            None => initializers(file, path, &g.initializers)?,
        };
        // What the model's index checks: every value defined once (graph inputs that are not
        // initializers, initializers, sparse initializers, node outputs).
        let input_names: FxHashSet<Sym> = inputs.iter().map(|i| i.0).collect();
        let mut defined: FxHashMap<Sym, u32> = FxHashMap::with_capacity_and_hasher(
            g.nodes.len() * 2 + inputs.len() + g.initializers.len(),
            Default::default(),
        );
        // Their names, interned under one lock, in file order.
        let tensor_names: Vec<Sym> = {
            let mut names = crate::sym::Interner::lock();
            for (_, h) in decoded.iter().take(INTERN_AHEAD) {
                names.prefetch(*h);
            }
            decoded
                .iter()
                .enumerate()
                .map(|(i, (init, h))| {
                    if let Some((_, ahead)) = decoded.get(i + INTERN_AHEAD) {
                        names.prefetch(*ahead);
                    }
                    names.intern_hashed(init.tensor.name(), *h)
                })
                .collect()
        };
        let init_names: FxHashSet<Sym> = tensor_names.iter().copied().collect();
        for (i, _) in &inputs {
            if !init_names.contains(i) && defined.insert(*i, NOT_A_NODE).is_some() {
                return Err(Declined);
            }
        }
        drop(init_names);
        // Sized as `Session::from_model` sizes them (the maps' layouts then agree too).
        let values = g.inputs.len()
            + g.initializers.len()
            + g.sparse_initializers.len()
            + nodes
                .iter()
                .flatten()
                .map(|n| n.outputs.len())
                .sum::<usize>();
        graph.nodes.reserve(g.nodes.len());
        crate::threads::fault_in(graph.nodes.spare_capacity_mut(), crate::threads::threads());
        let constants = nodes
            .iter()
            .flatten()
            .filter(|n| n.op == "Constant")
            .count();
        graph
            .initializers
            .reserve(g.initializers.len() + g.sparse_initializers.len() + constants);
        graph.init_order.reserve(graph.initializers.capacity());
        graph.types.reserve(values);
        graph.shapes.reserve(values);
        for ((mut init, _), name) in decoded.into_iter().zip(tensor_names) {
            if defined.insert(name, NOT_A_NODE).is_some() {
                return Err(Declined);
            }
            init.overridable = ir4 && input_names.contains(&name);
            graph.init_order.push(name);
            graph.initializers.insert(name, init);
        }
        for b in &g.sparse_initializers {
            let sp = sparse_tensor(self.file, b)?;
            if let Some(v) = &sp.values {
                check_initializer(self.path, v)?;
                let name = Sym::new(v.name());
                if defined.insert(name, NOT_A_NODE).is_some() {
                    return Err(Declined);
                }
                let mut t = v.clone();
                t.dims = sp.dims.clone();
                graph.init_order.push(name);
                graph.initializers.insert(name, init_of(&t, false));
            }
        }
        graph.inputs = inputs
            .iter()
            .map(|i| i.0)
            .filter(|i| parent.is_some() || !graph.initializers.contains_key(i))
            .collect();
        graph.outputs = outputs.iter().map(|o| o.0).collect();
        for (name, ty) in inputs.iter().chain(&outputs).chain(&value_info) {
            if let Some(t) = ty.as_ref() {
                if let Some(ty) = Type::from_proto(t) {
                    graph.types.entry(*name).or_insert(ty);
                }
                if let Some(shape) = shape_of(t) {
                    graph.shapes.entry(*name).or_insert(shape);
                }
                if parent.is_none()
                    && let Some(params) = dim_params_of(t)
                {
                    graph.dim_params.insert(*name, params);
                }
            }
        }
        // Nodes take the model's node ids now; their subgraphs are numbered after them.
        let first_node = self.next_node;
        self.next_node = self
            .next_node
            .checked_add(u32::try_from(g.nodes.len()).map_err(|_| Declined)?)
            .ok_or(Declined)?;
        self.nodes = self.nodes.saturating_add(g.nodes.len());
        // The graph attributes of each node, read after this graph is complete, and each
        // node's inputs, checked then.
        let mut held: Vec<(usize, Sym, Vec<&'a [u8]>)> = Vec::new();
        for (i, n) in nodes.into_iter().flatten().enumerate() {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                if defined.insert(*o, i as u32).is_some() {
                    return Err(Declined);
                }
            }
            let removed = n.constant.is_some();
            if let Some(init) = n.constant {
                let name = n.outputs.first().copied().unwrap_or_default();
                graph.init_order.push(name);
                graph.initializers.insert(name, *init);
            }
            for (name, graphs) in n.graphs {
                held.push((i, Sym::new(name), graphs));
            }
            graph.nodes.push(SNode {
                name: n.name,
                op: n.op,
                domain: n.domain,
                since: None,
                inputs: n.inputs,
                outputs: n.outputs,
                attrs: n.attrs,
                subgraphs: thin_vec::ThinVec::new(),
                implicit_inputs: thin_vec::ThinVec::new(),
                ep: None,
                kernel: None,
                origin: Some(NodeId(first_node + i as u32)),
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
        self.session.graphs[gi] = graph;
        // Inputs must be defined here or in an enclosing graph; then the subgraphs, with this
        // graph's scope complete.
        self.scopes.push(defined);
        // A large graph without subgraphs has its nodes' inputs checked on several threads, a
        // chunk of nodes each (the checks only read): the same answer as the walk below.
        let count = self.session.graphs[gi].nodes.len();
        let threads = crate::threads::threads();
        if held.is_empty() && count >= PARALLEL_INPUT_CHECK && threads >= 2 {
            let (own, outer) = self.scopes.split_last().ok_or(Declined)?;
            let nodes = &self.session.graphs[gi].nodes;
            let starts: Vec<usize> = (0..count).step_by(INPUT_CHECK_CHUNK).collect();
            let chunks = crate::threads::map_chunks(&starts, 1, threads, "inputs", |chunk| {
                let mut sorted = true;
                let end = (chunk[0] + INPUT_CHECK_CHUNK).min(count);
                for (ni, node) in nodes.iter().enumerate().take(end).skip(chunk[0]) {
                    for &i in node.inputs.iter().filter(|i| !i.is_empty()) {
                        sorted &= read_in_order(own, outer, i, ni)?;
                    }
                }
                Some(sorted)
            });
            let mut sorted = true;
            for chunk in chunks {
                sorted &= chunk.ok_or(Declined)?;
            }
            if !sorted {
                self.unsorted.push(gi);
            }
        } else {
            self.check_inputs(gi, held)?;
        }
        for (o, _) in &outputs {
            if !self.scopes.iter().any(|s| s.contains_key(o)) {
                return Err(Declined);
            }
        }
        self.scopes.pop();
        Ok(gi)
    }

    /// Checks that every input of graph `gi`'s nodes is defined in the graph or an enclosing
    /// one (and whether producers come before their readers), building the subgraphs `held`
    /// for each node as it is met, with this graph's scope complete.
    fn check_inputs(&mut self, gi: usize, held: Vec<(usize, Sym, Vec<&'a [u8]>)>) -> R<()> {
        let mut held = held.into_iter().peekable();
        let mut sorted = true;
        for ni in 0..self.session.graphs[gi].nodes.len() {
            for &i in &self.session.graphs[gi].nodes[ni].inputs {
                if i.is_empty() {
                    continue;
                }
                let (own, outer) = self.scopes.split_last().ok_or(Declined)?;
                sorted &= read_in_order(own, outer, i, ni).ok_or(Declined)?;
            }
            while let Some((_, name, graphs)) = held.next_if(|(k, _, _)| *k == ni) {
                for sub in graphs {
                    self.subgraphs += 1;
                    let sg = self.graph(sub, Some(NodeRef::new(gi, ni)))?;
                    self.session.graphs[gi].nodes[ni].subgraphs.push((name, sg));
                }
            }
        }
        if !sorted {
            self.unsorted.push(gi);
        }
        Ok(())
    }
}

/// Whether node `ni`'s input `i` is produced before it (true also for a graph input, an
/// initializer or an enclosing graph's value), or `None` when no scope defines it. This graph's
/// producer comes first: it shadows an enclosing graph's value.
fn read_in_order(
    own: &FxHashMap<Sym, u32>,
    outer: &[FxHashMap<Sym, u32>],
    i: Sym,
    ni: usize,
) -> Option<bool> {
    match own.get(&i) {
        Some(&p) => Some(p == NOT_A_NODE || (p as usize) < ni),
        None if outer.iter().any(|s| s.contains_key(&i)) => Some(true),
        None => None,
    }
}

/// What loading checks of an initializer: a possible shape, and external data inside the
/// model's folder (`path` is the model's).
fn check_initializer(path: &Path, t: &TensorProto) -> R<()> {
    if !crate::model::tensor_size_loads(t) {
        return Err(Declined);
    }
    check_external(path, t)
}

/// What loading checks of any tensor: external data inside the model's folder.
fn check_external(path: &Path, t: &TensorProto) -> R<()> {
    if crate::model::external_data_loads(path, t) {
        Ok(())
    } else {
        Err(Declined)
    }
}

/// Whether graph `g`'s nodes (with what their subgraphs read) form a cycle. Exporters write
/// nodes in order, and then no node reads a later one: checked first, in one pass.
fn has_cycle(g: &SGraph) -> bool {
    let mut producer: FxHashMap<Sym, usize> =
        FxHashMap::with_capacity_and_hasher(g.nodes.len() * 2, Default::default());
    for (i, n) in g.nodes.iter().enumerate() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            producer.insert(*o, i);
        }
    }
    let reads = |n: &'_ SNode| -> Vec<usize> {
        let mut v: Vec<usize> = n
            .inputs
            .iter()
            .chain(&n.implicit_inputs)
            .filter_map(|i| producer.get(i).copied())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let sorted = g
        .nodes
        .iter()
        .enumerate()
        .all(|(i, n)| reads(n).iter().all(|&p| p < i));
    if sorted {
        return false;
    }
    // Kahn's algorithm: a cycle leaves nodes that never become ready.
    let mut indegree = vec![0usize; g.nodes.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for p in reads(n) {
            indegree[i] += 1;
            users[p].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..g.nodes.len()).filter(|&i| indegree[i] == 0).collect();
    let mut done = 0;
    while let Some(i) = ready.pop() {
        done += 1;
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(u);
            }
        }
    }
    done < g.nodes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::proto::{GraphProto, NodeProto};
    use prost::Message;

    /// Node `k`: every seventh a `Constant` (its value an initializer), every eleventh holding
    /// a subgraph, others a plain attribute or none.
    fn node_bytes(k: usize) -> Vec<u8> {
        let attribute = |name: &str| AttributeProto {
            name: Some(name.into()),
            ..Default::default()
        };
        let (op, attribute) = match k % 7 {
            0 => (
                "Constant",
                vec![AttributeProto {
                    r#type: Some(AttributeType::Int as i32),
                    i: Some(k as i64),
                    ..attribute("value_int")
                }],
            ),
            _ if k.is_multiple_of(11) => (
                "If",
                vec![AttributeProto {
                    r#type: Some(AttributeType::Graph as i32),
                    g: Some(Box::new(GraphProto::default())),
                    ..attribute("then_branch")
                }],
            ),
            1 | 2 => (
                "Relu",
                vec![AttributeProto {
                    r#type: Some(AttributeType::Float as i32),
                    f: Some(0.5),
                    ..attribute("alpha")
                }],
            ),
            _ => ("Add", Vec::new()),
        };
        NodeProto {
            name: Some(format!("n{k}")),
            op_type: Some(op.into()),
            domain: Some(if k.is_multiple_of(5) { "" } else { "ai.onnx" }.into()),
            input: vec![format!("v{k}"), String::new(), format!("w{}", k % 7)],
            output: vec![format!("v{}", k + 1)],
            attribute,
            ..Default::default()
        }
        .encode_to_vec()
    }

    /// What the builder reads of a node, as texts: names, attributes kept, graph attributes,
    /// the initializer a `Constant` becomes.
    type Texts = (
        [String; 3],
        Vec<String>,
        Vec<String>,
        Vec<AttributeProto>,
        Vec<(String, usize)>,
        Option<TensorProto>,
    );

    fn texts(r: &Read<'_>) -> Texts {
        let all = |v: &[Sym]| v.iter().map(|s| s.as_str().to_string()).collect();
        (
            [r.name, r.op, r.domain].map(|s| s.as_str().to_string()),
            all(&r.inputs),
            all(&r.outputs),
            r.attrs.to_vec(),
            r.graphs
                .iter()
                .map(|(name, g)| (name.to_string(), g.len()))
                .collect(),
            r.constant.as_ref().map(|c| (*c.tensor).clone()),
        )
    }

    #[test]
    fn nodes_read_on_parsing_threads_are_the_nodes_read_here() {
        fn read<'a>(slices: &[&'a [u8]], parsers: usize) -> Vec<Read<'a>> {
            read_nodes_on(slices, Path::new("m.onnx"), parsers)
                .expect("valid nodes")
                .into_iter()
                .flatten()
                .collect()
        }
        let n = PARALLEL_READ_NODES + 2 * READ_BATCH + 17;
        let owned: Vec<Vec<u8>> = (0..n).map(node_bytes).collect();
        let slices: Vec<&[u8]> = owned.iter().map(|b| b.as_slice()).collect();
        // Below the threshold, read here, a few at a time.
        let serial: Vec<Read<'_>> = slices
            .chunks(PARALLEL_READ_NODES - 1)
            .flat_map(|c| read(c, 2))
            .collect();
        for parsers in [1, 2, 3, 8] {
            let parallel = read(&slices, parsers);
            assert_eq!(parallel.len(), n);
            for (k, (p, s)) in parallel.iter().zip(&serial).enumerate() {
                assert_eq!(texts(p), texts(s), "node {k}, {parsers} parsers");
            }
        }
        let parallel = read(&slices, 2);
        assert_eq!(parallel[5].domain, Sym::AI_ONNX);
        assert_eq!(parallel[5].inputs[1], Sym::EMPTY);
        assert_eq!(texts(&parallel[n - 1]).0[0], format!("n{}", n - 1));
        // A Constant's value, a graph attribute, a plain one.
        let constant = parallel[7].constant.as_ref().expect("an initializer");
        assert_eq!(constant.tensor.name(), "v8");
        assert_eq!(constant.tensor.int64_data, vec![7]);
        assert_eq!(texts(&parallel[22]).4, vec![("then_branch".to_string(), 1)]);
        assert!(parallel[22].attrs.is_empty());
        assert_eq!(parallel[9].attrs[0].name(), "alpha");
    }

    #[test]
    fn a_node_that_does_not_parse_declines_the_graph_on_either_path() {
        for n in [100, PARALLEL_READ_NODES + 3 * READ_BATCH] {
            let mut owned: Vec<Vec<u8>> = (0..n).map(node_bytes).collect();
            // A field that claims more bytes than the node has.
            owned[n - 2] = vec![0x0a, 0x7f, b'x'];
            let slices: Vec<&[u8]> = owned.iter().map(|b| b.as_slice()).collect();
            for parsers in [1, 2, 3] {
                assert!(
                    read_nodes_on(&slices, Path::new("m.onnx"), parsers).is_err(),
                    "{n} nodes, {parsers} parsers"
                );
            }
            // In the first batch, and in the second parser's first.
            for at in [0, READ_BATCH + 1].into_iter().filter(|&at| at < n) {
                let mut owned = owned.clone();
                owned[at] = vec![0x0a, 0x7f, b'x'];
                let slices: Vec<&[u8]> = owned.iter().map(|b| b.as_slice()).collect();
                assert!(read_nodes_on(&slices, Path::new("m.onnx"), 2).is_err());
            }
            // An attribute that does not decode (read with its node now).
            let mut owned: Vec<Vec<u8>> = (0..n).map(node_bytes).collect();
            owned[n / 2] = NodeProto {
                op_type: Some("Relu".into()),
                ..Default::default()
            }
            .encode_to_vec();
            owned[n / 2].extend_from_slice(&[0x2a, 0x02, 0x08, 0x80]);
            let slices: Vec<&[u8]> = owned.iter().map(|b| b.as_slice()).collect();
            assert!(
                read_nodes(&slices, Path::new("m.onnx")).is_err(),
                "{n} nodes"
            );
        }
    }

    /// `n` initializers in one buffer, and each one's slice of it.
    fn initializer_file(n: usize, bad: &[(usize, Vec<u8>)]) -> (Bytes, Vec<(usize, usize)>) {
        let mut file = Vec::new();
        let mut ranges = Vec::new();
        for k in 0..n {
            let start = file.len();
            match bad.iter().find(|(at, _)| *at == k) {
                Some((_, b)) => file.extend_from_slice(b),
                None => TensorProto {
                    name: Some(format!("w{k}")),
                    dims: vec![2, (k % 3) as i64 + 1],
                    data_type: Some(1),
                    raw_data: Some(vec![k as u8; 8 * (k % 3 + 1)].into()),
                    ..Default::default()
                }
                .encode(&mut file)
                .expect("a vector grows"),
            }
            ranges.push((start, file.len()));
        }
        (Bytes::from(file), ranges)
    }

    #[test]
    fn initializers_decoded_on_threads_are_the_ones_decoded_here() {
        let n = PARALLEL_INITIALIZERS + 3 * INITIALIZER_CHUNK + 5;
        let (file, ranges) = initializer_file(n, &[]);
        let slices: Vec<&[u8]> = ranges.iter().map(|&(a, b)| &file[a..b]).collect();
        let path = Path::new("m.onnx");
        let parallel = initializers(&file, path, &slices).expect("valid initializers");
        // Below the threshold, decoded here, a few at a time.
        let serial: Vec<(Init, u64)> = slices
            .chunks(PARALLEL_INITIALIZERS - 1)
            .flat_map(|c| initializers(&file, path, c).expect("valid initializers"))
            .collect();
        assert_eq!(parallel.len(), n);
        for (k, (p, s)) in parallel.iter().zip(&serial).enumerate() {
            assert_eq!(p.0.tensor, s.0.tensor, "initializer {k}");
            assert_eq!(
                (&p.0.dims, p.0.elem, p.0.overridable, p.1),
                (&s.0.dims, s.0.elem, false, s.1)
            );
            assert_eq!(p.0.tensor.name(), format!("w{k}"));
            assert_eq!(p.1, crate::sym::text_hash(&format!("w{k}")));
        }
    }

    #[test]
    fn an_initializer_that_does_not_load_declines_the_graph_on_either_path() {
        let n = PARALLEL_INITIALIZERS + 3 * INITIALIZER_CHUNK;
        let undecodable = vec![0x0a, 0x7f, b'x'];
        let impossible = TensorProto {
            name: Some("huge".into()),
            dims: vec![-1],
            data_type: Some(1),
            ..Default::default()
        }
        .encode_to_vec();
        for bad in [
            vec![(0, undecodable.clone())],
            vec![(n - 1, undecodable.clone())],
            vec![(n / 2, impossible.clone())],
            // Several: the first in file order decides, whichever thread met it first.
            vec![(3, impossible), (n - 2, undecodable)],
        ] {
            for n in [100, n] {
                let bad: Vec<(usize, Vec<u8>)> =
                    bad.iter().filter(|(at, _)| *at < n).cloned().collect();
                let (file, ranges) = initializer_file(n, &bad);
                let slices: Vec<&[u8]> = ranges.iter().map(|&(a, b)| &file[a..b]).collect();
                let got = initializers(&file, Path::new("m.onnx"), &slices);
                assert_eq!(got.is_err(), !bad.is_empty(), "{n} initializers, {bad:?}");
            }
        }
    }
}
