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
    SGraph, SNode, Session, Type, dim_params_of, init_boxed, init_of, init_owning, shape_of,
};
use crate::model::proto::attribute_proto::AttributeType;
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
        if (b.unsorted.contains(&gi) || reads_ahead()) && has_cycle(&session.graphs[gi]) {
            return Err(Declined);
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

/// A node as read from the wire, its names interned.
struct Read<'a> {
    name: Sym,
    op: Sym,
    domain: Sym,
    inputs: Vec<Sym>,
    outputs: Vec<Sym>,
    attributes: Vec<&'a [u8]>,
}

impl<'a> Builder<'a> {
    /// Builds graph `bytes` (its subgraphs after it, in the model's order) and returns its
    /// index; `parent` is the (graph, node) that holds it.
    fn graph(&mut self, bytes: &'a [u8], parent: Option<(usize, usize)>) -> R<usize> {
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
        let mut nodes: Vec<Read<'a>> = Vec::with_capacity(g.nodes.len());
        {
            let mut view = NodeView::default();
            let mut names = crate::sym::Interner::lock();
            names.reserve(g.nodes.len() * 3);
            for b in &g.nodes {
                view.parse_into(b)?;
                nodes.push(Read {
                    name: names.intern(view.name),
                    op: names.intern(view.op_type),
                    domain: names.intern(normalize_domain(view.domain)),
                    inputs: view.inputs.iter().map(|s| names.intern(s)).collect(),
                    outputs: view.outputs.iter().map(|s| names.intern(s)).collect(),
                    attributes: std::mem::take(&mut view.attributes),
                });
            }
        }
        // What the model's index checks: every value defined once (graph inputs that are not
        // initializers, initializers, sparse initializers, node outputs).
        let input_names: FxHashSet<Sym> = inputs.iter().map(|i| i.0).collect();
        let mut defined: FxHashMap<Sym, u32> = FxHashMap::with_capacity_and_hasher(
            g.nodes.len() * 2 + inputs.len() + g.initializers.len(),
            Default::default(),
        );
        // Each decoded into the box the session keeps it in (no second copy).
        let tensors: Vec<Box<crate::model::proto::TensorProto>> = g
            .initializers
            .iter()
            .map(|b| tensor(self.file, b).map(Box::new))
            .collect::<R<_>>()?;
        // Their names, interned under one lock.
        let tensor_names: Vec<Sym> = {
            let mut names = crate::sym::Interner::lock();
            tensors.iter().map(|t| names.intern(t.name())).collect()
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
            + nodes.iter().map(|n| n.outputs.len()).sum::<usize>();
        graph.nodes.reserve(nodes.len());
        let constants = nodes.iter().filter(|n| n.op == "Constant").count();
        graph
            .initializers
            .reserve(g.initializers.len() + g.sparse_initializers.len() + constants);
        graph.init_order.reserve(graph.initializers.capacity());
        graph.types.reserve(values);
        graph.shapes.reserve(values);
        for (t, name) in tensors.into_iter().zip(tensor_names) {
            self.check_initializer(&t)?;
            if defined.insert(name, NOT_A_NODE).is_some() {
                return Err(Declined);
            }
            let overridable = ir4 && input_names.contains(&name);
            graph.init_order.push(name);
            graph.initializers.insert(name, init_boxed(t, overridable));
        }
        for b in &g.sparse_initializers {
            let sp = sparse_tensor(self.file, b)?;
            if let Some(v) = &sp.values {
                self.check_initializer(v)?;
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
            .checked_add(u32::try_from(nodes.len()).map_err(|_| Declined)?)
            .ok_or(Declined)?;
        self.nodes = self.nodes.saturating_add(nodes.len());
        // The graph attributes of each node, read after this graph is complete, and each
        // node's inputs, checked then.
        let mut held: Vec<(usize, Sym, Vec<&'a [u8]>)> = Vec::new();
        for (i, n) in nodes.into_iter().enumerate() {
            for o in n.outputs.iter().filter(|o| !o.is_empty()) {
                if defined.insert(*o, i as u32).is_some() {
                    return Err(Declined);
                }
            }
            let attributes: Vec<AttributeView<'a>> = n
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
                    self.check_external(t)?;
                }
            }
            let domain = n.domain;
            let mut removed = false;
            if n.op == "Constant" && domain == Sym::AI_ONNX {
                let first = match attributes.first() {
                    Some(AttributeView::Plain(a)) => Some(a),
                    _ => None,
                };
                let name = n.outputs.first().map(|o| o.to_string());
                if let Some(t) = super::constant_tensor_of(first, name) {
                    let name = n.outputs.first().copied().unwrap_or_default();
                    graph.init_order.push(name);
                    graph.initializers.insert(name, init_owning(t, false));
                    removed = true;
                }
            }
            let mut attrs = Vec::with_capacity(attributes.len());
            for a in attributes {
                match a {
                    AttributeView::Plain(a) => {
                        if a.r#type != Some(AttributeType::Graph as i32) {
                            attrs.push(a);
                        }
                    }
                    AttributeView::Graphs { name, graphs, .. } => {
                        held.push((i, Sym::new(name), graphs))
                    }
                }
            }
            graph.nodes.push(SNode {
                name: n.name,
                op: n.op,
                domain,
                since: None,
                inputs: n.inputs,
                outputs: n.outputs,
                attrs,
                subgraphs: Vec::new(),
                implicit_inputs: Vec::new(),
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
        let mut held = held.into_iter().peekable();
        let mut sorted = true;
        for ni in 0..self.session.graphs[gi].nodes.len() {
            for &i in &self.session.graphs[gi].nodes[ni].inputs {
                if i.is_empty() {
                    continue;
                }
                // This graph's producer first (it shadows an enclosing graph's value).
                let (own, outer) = self.scopes.split_last().ok_or(Declined)?;
                match own.get(&i) {
                    Some(&p) => sorted &= p == NOT_A_NODE || (p as usize) < ni,
                    None if outer.iter().any(|s| s.contains_key(&i)) => {}
                    None => return Err(Declined),
                }
            }
            while let Some((_, name, graphs)) = held.next_if(|(k, _, _)| *k == ni) {
                for sub in graphs {
                    self.subgraphs += 1;
                    let sg = self.graph(sub, Some((gi, ni)))?;
                    self.session.graphs[gi].nodes[ni].subgraphs.push((name, sg));
                }
            }
        }
        if !sorted {
            self.unsorted.push(gi);
        }
        for (o, _) in &outputs {
            if !self.scopes.iter().any(|s| s.contains_key(o)) {
                return Err(Declined);
            }
        }
        self.scopes.pop();
        Ok(gi)
    }

    /// What loading checks of an initializer: a possible shape, and external data inside the
    /// model's folder.
    fn check_initializer(&self, t: &crate::model::proto::TensorProto) -> R<()> {
        if !crate::model::tensor_size_loads(t) {
            return Err(Declined);
        }
        self.check_external(t)
    }

    /// What loading checks of any tensor: external data inside the model's folder.
    fn check_external(&self, t: &crate::model::proto::TensorProto) -> R<()> {
        if crate::model::external_data_loads(self.path, t) {
            Ok(())
        } else {
            Err(Declined)
        }
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
