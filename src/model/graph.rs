//! Builds the indexed view of every graph: values, producers, consumers, scopes of subgraphs,
//! outer-scope (implicit) inputs and a topological order.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use super::load::LoadError;
use super::proto::{GraphProto, TensorProto, TypeProto, type_proto};
use super::tensor::{element_bits, tensor_byte_size};
use super::{
    Graph, GraphId, GraphStep, Model, Node, NodeId, Problem, ProblemLevel, Value, ValueDef,
    ValueId, normalize_domain,
};

pub(super) fn index(model: &mut Model) -> Result<(), LoadError> {
    let proto = std::mem::take(&mut model.proto);
    if let Some(g) = &proto.graph {
        // Size the model's node and value lists once: growing them by doubling copies (and
        // page-faults in) hundreds of megabytes on a large model.
        let (nodes, values) = count(g);
        model.nodes.reserve(nodes);
        model.values.reserve(values);
    }
    let result = match &proto.graph {
        Some(g) => Indexer { model }.graph(g, None, Vec::new(), &[]),
        None => Err(LoadError::NotAModel {
            path: model.path.clone(),
            detail: "it has no graph".into(),
        }),
    };
    model.proto = proto;
    result.map(|_| ())
}

/// Nodes and (at most) values of `g` and every graph nested in it.
fn count(g: &GraphProto) -> (usize, usize) {
    let mut nodes = g.node.len();
    let mut values = g.input.len() + g.initializer.len() + g.sparse_initializer.len();
    for n in &g.node {
        values += n.output.len();
        for a in &n.attribute {
            for sub in a.g.as_deref().into_iter().chain(&a.graphs) {
                let (n, v) = count(sub);
                nodes += n;
                values += v;
            }
        }
    }
    (nodes, values)
}

struct Indexer<'m> {
    model: &'m mut Model,
}

impl Indexer<'_> {
    fn invalid(&self, message: String, help: &str) -> LoadError {
        LoadError::Invalid {
            path: self.model.path.clone(),
            message,
            help: Some(help.to_string()),
        }
    }

    fn new_value(
        &mut self,
        graph: GraphId,
        name: &str,
        def: ValueDef,
    ) -> Result<ValueId, LoadError> {
        let id = ValueId(self.model.values.len() as u32);
        let scope = &mut self.model.graphs[graph.0 as usize].scope;
        if scope.insert(name.to_string(), id).is_some() {
            return Err(self.invalid(
                format!(
                    "value `{name}` is defined twice in graph `{}`",
                    self.model.graphs[graph.0 as usize].name
                ),
                "every value name is assigned once (static single assignment); rename one of them",
            ));
        }
        self.model.values.push(Value {
            id,
            graph,
            name: name.to_string(),
            def,
            is_graph_input: matches!(def, ValueDef::GraphInput(_)),
            is_graph_output: false,
            consumers: Vec::new(),
            ty: None,
        });
        Ok(id)
    }

    /// Refuses shapes no tensor can have (negative dims, sizes past 2^63 bytes) and notes raw
    /// data whose length disagrees with the shape.
    fn check_tensor_size(&mut self, t: &TensorProto) -> Result<(), LoadError> {
        if let Some(d) = t.dims.iter().find(|&&d| d < 0) {
            return Err(self.invalid(
                format!("initializer `{}` has a negative dimension ({d})", t.name()),
                "tensor dimensions are non-negative",
            ));
        }
        let Some(bits) = element_bits(t.data_type()) else {
            return Ok(());
        };
        let size = tensor_byte_size(&t.dims, t.data_type()).filter(|&s| s <= i64::MAX as u64);
        let Some(size) = size else {
            return Err(self.invalid(
                format!(
                    "initializer `{}` has an absurd size: dims {:?} of {bits}-bit elements overflow 2^63 bytes",
                    t.name(),
                    t.dims
                ),
                "the shape is corrupt; re-export the model",
            ));
        };
        if let Some(raw) = &t.raw_data
            && raw.len() as u64 != size
        {
            self.model.problems.push(Problem {
                level: ProblemLevel::Error,
                code: "model::raw-data-size",
                message: format!(
                    "initializer `{}` has {} bytes of raw data, but its shape {:?} needs {size}",
                    t.name(),
                    raw.len(),
                    t.dims
                ),
                node: None,
            });
        }
        Ok(())
    }

    /// Resolves a name read in graph `g` (whose enclosing graphs are `outer`, innermost last).
    /// Returns the value and whether it comes from an enclosing graph.
    fn resolve(&self, g: GraphId, outer: &[GraphId], name: &str) -> Option<(ValueId, bool)> {
        if let Some(v) = self.model.graphs[g.0 as usize].lookup(name) {
            return Some((v, false));
        }
        outer
            .iter()
            .rev()
            .find_map(|o| self.model.graphs[o.0 as usize].lookup(name))
            .map(|v| (v, true))
    }

    fn graph(
        &mut self,
        gp: &GraphProto,
        parent: Option<(NodeId, String)>,
        path: Vec<GraphStep>,
        outer: &[GraphId],
    ) -> Result<GraphId, LoadError> {
        let gid = GraphId(self.model.graphs.len() as u32);
        self.model.graphs.push(Graph {
            id: gid,
            name: gp.name().to_string(),
            parent,
            path,
            nodes: Vec::new(),
            topo_order: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            initializers: Vec::new(),
            outer_inputs: Vec::new(),
            scope: crate::sym::SymMap::with_capacity_and_hasher(
                gp.node.len() * 2 + gp.input.len() + gp.initializer.len(),
                Default::default(),
            ),
        });

        // Definitions first: a subgraph may read any value of this graph.
        let init_names: crate::sym::SymSet<&str> =
            gp.initializer.iter().map(|t| t.name()).collect();
        for (i, vi) in gp.input.iter().enumerate() {
            let is_init = init_names.contains(vi.name());
            if is_init {
                continue; // defined below, as an initializer that is also an input
            }
            self.new_value(gid, vi.name(), ValueDef::GraphInput(i as u32))?;
        }
        let mut initializers = Vec::with_capacity(gp.initializer.len());
        for (i, t) in gp.initializer.iter().enumerate() {
            self.check_tensor_size(t)?;
            let v = self.new_value(gid, t.name(), ValueDef::Initializer(i as u32))?;
            self.model.values[v.0 as usize].ty = Some(tensor_type(t.data_type(), &t.dims));
            initializers.push(v);
        }
        for (i, s) in gp.sparse_initializer.iter().enumerate() {
            if let Some(values) = &s.values {
                let v = self.new_value(
                    gid,
                    values.name(),
                    ValueDef::Initializer((gp.initializer.len() + i) as u32),
                )?;
                self.model.values[v.0 as usize].ty = Some(tensor_type(values.data_type(), &s.dims));
                initializers.push(v);
            }
        }
        // Graph inputs in order, initializer-backed ones included.
        let graph_inputs: Vec<ValueId> = gp
            .input
            .iter()
            .filter_map(|vi| self.model.graphs[gid.0 as usize].lookup(vi.name()))
            .collect();
        for &v in &graph_inputs {
            self.model.values[v.0 as usize].is_graph_input = true;
        }

        let first_node = self.model.nodes.len() as u32;
        let mut node_ids = Vec::with_capacity(gp.node.len());
        for (i, np) in gp.node.iter().enumerate() {
            let id = NodeId(first_node + i as u32);
            self.model.nodes.push(Node {
                id,
                graph: gid,
                index: i as u32,
                name: np.name().to_string(),
                op_type: np.op_type().to_string(),
                domain: normalize_domain(np.domain()).to_string(),
                inputs: Vec::with_capacity(np.input.len()),
                outputs: Vec::with_capacity(np.output.len()),
                subgraphs: Vec::new(),
                implicit_inputs: Vec::new(),
            });
            node_ids.push(id);
            for (o, name) in np.output.iter().enumerate() {
                let out = if name.is_empty() {
                    None
                } else {
                    Some(self.new_value(gid, name, ValueDef::Node(id, o as u32))?)
                };
                self.model.nodes[id.0 as usize].outputs.push(out);
            }
        }

        // Declared types.
        for vi in gp.input.iter().chain(&gp.output).chain(&gp.value_info) {
            if let (Some(v), Some(ty)) = (
                self.model.graphs[gid.0 as usize].lookup(vi.name()),
                &vi.r#type,
            ) && self.model.values[v.0 as usize].ty.is_none()
            {
                self.model.values[v.0 as usize].ty = Some(ty.clone());
            }
        }

        let mut outer_inputs: Vec<ValueId> = Vec::new();
        let mut outer_seen: HashSet<ValueId> = HashSet::new();
        let mut chain = outer.to_vec();
        chain.push(gid);
        for (i, np) in gp.node.iter().enumerate() {
            let id = node_ids[i];
            for name in &np.input {
                if name.is_empty() {
                    self.model.nodes[id.0 as usize].inputs.push(None);
                    continue;
                }
                let Some((v, from_outer)) = self.resolve(gid, outer, name) else {
                    return Err(self.invalid(
                        format!(
                            "input `{name}` of node `{}` ({}) is not produced by any node, graph input or initializer",
                            np.name(),
                            np.op_type()
                        ),
                        "a node input that nothing produces makes the graph invalid; ORT refuses to load it",
                    ));
                };
                if from_outer && outer_seen.insert(v) {
                    outer_inputs.push(v);
                }
                self.model.values[v.0 as usize].consumers.push(id);
                self.model.nodes[id.0 as usize].inputs.push(Some(v));
            }
            if np.op_type().is_empty() {
                self.model.problems.push(Problem {
                    level: ProblemLevel::Error,
                    code: "model::empty-op-type",
                    message: format!("node `{}` has no op_type", np.name()),
                    node: Some(id),
                });
            }
            // Subgraphs, with this graph's scope now complete.
            let base_path = self.model.graphs[gid.0 as usize].path.clone();
            for (a, attr) in np.attribute.iter().enumerate() {
                let subs: Vec<(Option<u32>, &GraphProto)> = attr
                    .g
                    .as_deref()
                    .into_iter()
                    .map(|g| (None, g))
                    .chain(
                        attr.graphs
                            .iter()
                            .enumerate()
                            .map(|(k, g)| (Some(k as u32), g)),
                    )
                    .collect();
                for (k, sub) in subs {
                    let mut path = base_path.clone();
                    path.push(GraphStep {
                        node_index: i as u32,
                        attribute_index: a as u32,
                        graph_index: k,
                    });
                    let sg = self.graph(sub, Some((id, attr.name().to_string())), path, &chain)?;
                    self.model.nodes[id.0 as usize].subgraphs.push(sg);
                    let sub_outer = self.model.graphs[sg.0 as usize].outer_inputs.clone();
                    for v in sub_outer {
                        let node = &mut self.model.nodes[id.0 as usize];
                        if !node.implicit_inputs.contains(&v) {
                            node.implicit_inputs.push(v);
                        }
                        let defined_here = self.model.values[v.0 as usize].graph == gid;
                        if !defined_here && outer_seen.insert(v) {
                            outer_inputs.push(v);
                        }
                    }
                }
            }
        }

        let mut outputs = Vec::with_capacity(gp.output.len());
        for vi in &gp.output {
            let Some((v, from_outer)) = self.resolve(gid, outer, vi.name()) else {
                return Err(self.invalid(
                    format!(
                        "graph output `{}` of graph `{}` is not produced by anything",
                        vi.name(),
                        gp.name()
                    ),
                    "every graph output must be a graph input, an initializer or a node output",
                ));
            };
            if from_outer && outer_seen.insert(v) {
                outer_inputs.push(v);
            }
            self.model.values[v.0 as usize].is_graph_output = true;
            outputs.push(v);
        }

        let topo = self.topo_order(gid, &node_ids)?;
        let g = &mut self.model.graphs[gid.0 as usize];
        g.nodes = node_ids;
        g.topo_order = topo;
        g.inputs = graph_inputs;
        g.outputs = outputs;
        g.initializers = initializers;
        g.outer_inputs = outer_inputs;
        Ok(gid)
    }

    /// Kahn's algorithm, always taking the lowest-index ready node, so a graph already in
    /// topological order keeps its file order.
    fn topo_order(&self, gid: GraphId, nodes: &[NodeId]) -> Result<Vec<NodeId>, LoadError> {
        let Some(&first) = nodes.first() else {
            return Ok(Vec::new());
        };
        let base = first.0;
        let local = |n: NodeId| (n.0 - base) as usize;
        let mut indegree = vec![0u32; nodes.len()];
        let mut users: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
        for &n in nodes {
            let node = &self.model.nodes[n.0 as usize];
            let mut deps: Vec<NodeId> = node
                .inputs
                .iter()
                .flatten()
                .chain(&node.implicit_inputs)
                .filter_map(|v| {
                    let value = &self.model.values[v.0 as usize];
                    value.producer().filter(|p| {
                        value.graph == gid && self.model.nodes[p.0 as usize].graph == gid
                    })
                })
                .collect();
            deps.sort_unstable();
            deps.dedup();
            for d in deps {
                indegree[local(n)] += 1;
                users[local(d)].push(n.0 - base);
            }
        }
        let mut ready: BinaryHeap<Reverse<u32>> = (0..nodes.len() as u32)
            .filter(|&i| indegree[i as usize] == 0)
            .map(Reverse)
            .collect();
        let mut order = Vec::with_capacity(nodes.len());
        while let Some(Reverse(i)) = ready.pop() {
            order.push(NodeId(base + i));
            for &u in &users[i as usize] {
                indegree[u as usize] -= 1;
                if indegree[u as usize] == 0 {
                    ready.push(Reverse(u));
                }
            }
        }
        if order.len() < nodes.len() {
            // Walk back through predecessors that never became ready: after as many steps as
            // there are nodes, the walk is inside a cycle.
            let mut preds: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
            for (d, us) in users.iter().enumerate() {
                for &u in us {
                    preds[u as usize].push(d as u32);
                }
            }
            let mut at = (0..nodes.len()).find(|&i| indegree[i] > 0).unwrap_or(0);
            for _ in 0..nodes.len() {
                match preds[at].iter().find(|&&p| indegree[p as usize] > 0) {
                    Some(&p) => at = p as usize,
                    None => break,
                }
            }
            let node = &self.model.nodes[(base as usize) + at];
            return Err(self.invalid(
                format!(
                    "graph `{}` has a cycle through node `{}` ({})",
                    self.model.graphs[gid.0 as usize].name, node.name, node.op_type
                ),
                "ONNX graphs are acyclic; loops are expressed with the Loop operator",
            ));
        }
        Ok(order)
    }
}

/// Whether an initializer's shape is one loading accepts (see `Indexer::check_tensor_size`):
/// no negative dim, and a size in bytes below 2^63 when the element type has a size.
pub(crate) fn tensor_size_loads(t: &TensorProto) -> bool {
    if t.dims.iter().any(|&d| d < 0) {
        return false;
    }
    element_bits(t.data_type()).is_none()
        || tensor_byte_size(&t.dims, t.data_type()).is_some_and(|s| s <= i64::MAX as u64)
}

fn tensor_type(elem_type: i32, dims: &[i64]) -> TypeProto {
    use super::proto::{TensorShapeProto, tensor_shape_proto};
    TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem_type),
            shape: Some(TensorShapeProto {
                dim: dims
                    .iter()
                    .map(|&d| tensor_shape_proto::Dimension {
                        value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                        denotation: None,
                    })
                    .collect(),
            }),
        })),
        denotation: None,
    }
}
