//! Turns bytes into a [`Model`]: the decoded protobuf plus an indexed view of every graph in it.
//!
//! Knows protobuf and the ONNX IR, nothing about execution providers.
//!
//! **Invariants.**
//! - Loading never reads external data and never copies weights: `raw_data` is a slice of the
//!   memory-mapped file; external data locations are validated and stat'ed, never opened.
//! - Every lookup of the view (value by name, producer, consumers, node by id) is O(1).
//! - Loading fails ([`LoadError`]) only for files that are not ONNX models at all, unsafe external
//!   data paths, and graphs so broken that no runtime could load them (cycles, dangling inputs,
//!   values defined twice). Everything milder is a [`Problem`] on a model that still loads.

mod census;
mod external;
mod graph;
mod load;
pub mod proto;
mod tensor;
pub mod text;
pub mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(crate) use census::varint;
pub use census::{Budget, Census, MAX_DECODED_BYTES, MAX_NODES, census, census_within};
pub use external::ExternalRef;
pub(crate) use external::external_data_loads;
pub(crate) use graph::tensor_size_loads;
pub use load::{
    LoadError, MAX_MODEL_FILE, MAX_TEXT_FILE, decode_model, map_model_file, open_regular,
    read_model_proto, release_mapped_pages,
};
pub use tensor::{DataType, element_bits, tensor_byte_size, type_name};

use proto::{GraphProto, ModelProto, NodeProto, TypeProto};

/// The ONNX domain as models spell it (`""`) and as ORT and this tool name it.
pub const ONNX_DOMAIN: &str = "ai.onnx";

/// Normalises a domain name: the empty domain is `ai.onnx`.
pub fn normalize_domain(domain: &str) -> &str {
    if domain.is_empty() {
        ONNX_DOMAIN
    } else {
        domain
    }
}

/// Index of a graph in [`Model::graphs`]; the main graph is `GraphId(0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphId(pub u32);
/// Index of a node in [`Model::nodes`], over all graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);
/// Index of a value in [`Model::values`], over all graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// One step from a graph to a subgraph: the node (by index in its graph), the attribute (by
/// index in the node) and, for `graphs` attributes, the position in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GraphStep {
    pub node_index: u32,
    pub attribute_index: u32,
    pub graph_index: Option<u32>,
}

/// A graph of the model: the main graph or a subgraph of an `If`/`Loop`/`Scan`.
#[derive(Debug)]
pub struct Graph {
    pub id: GraphId,
    pub name: String,
    /// The node whose attribute holds this graph, and the attribute's name.
    pub parent: Option<(NodeId, String)>,
    /// How to reach the `GraphProto` from the model's main graph.
    pub path: Vec<GraphStep>,
    /// Nodes in file order.
    pub nodes: Vec<NodeId>,
    /// Nodes in a topological order (file order wherever that already is one).
    pub topo_order: Vec<NodeId>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    pub initializers: Vec<ValueId>,
    /// Values of enclosing graphs that this graph (or a graph nested in it) reads.
    pub outer_inputs: Vec<ValueId>,
    scope: crate::sym::SymMap<String, ValueId>,
}

impl Graph {
    /// The value that `name` denotes in this graph's own scope (not enclosing ones).
    pub fn lookup(&self, name: &str) -> Option<ValueId> {
        self.scope.get(name).copied()
    }
}

/// A node of some graph.
#[derive(Debug)]
pub struct Node {
    pub id: NodeId,
    pub graph: GraphId,
    /// Index in the graph's `GraphProto.node`.
    pub index: u32,
    pub name: String,
    pub op_type: String,
    /// Normalised domain (`ai.onnx` for the empty domain).
    pub domain: String,
    /// Inputs in order; `None` for an omitted optional input (an empty name).
    pub inputs: Vec<Option<ValueId>>,
    /// Outputs in order; `None` for an omitted optional output.
    pub outputs: Vec<Option<ValueId>>,
    /// Graphs held by this node's attributes.
    pub subgraphs: Vec<GraphId>,
    /// Values of this node's graph (or enclosing graphs) that its subgraphs read.
    pub implicit_inputs: Vec<ValueId>,
}

/// Where a value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueDef {
    /// A graph input (position in the graph's input list).
    GraphInput(u32),
    /// An initializer (position in the graph's initializer list); may also be a graph input.
    Initializer(u32),
    /// Output `index` of a node.
    Node(NodeId, u32),
    /// Nothing defines it (reported as a problem).
    Undefined,
}

/// A named value (tensor, sequence, ...) of a graph.
#[derive(Debug)]
pub struct Value {
    pub id: ValueId,
    pub graph: GraphId,
    pub name: String,
    pub def: ValueDef,
    /// Also listed as a graph input (initializers with overridable defaults).
    pub is_graph_input: bool,
    pub is_graph_output: bool,
    /// Nodes that read the value, in any graph (a subgraph's node reading an outer value too).
    pub consumers: Vec<NodeId>,
    /// Declared type: from graph inputs/outputs, `value_info`, or the initializer.
    pub ty: Option<TypeProto>,
}

impl Value {
    /// The producing node, if a node produces it.
    pub fn producer(&self) -> Option<NodeId> {
        match self.def {
            ValueDef::Node(n, _) => Some(n),
            _ => None,
        }
    }
}

/// How bad a structural problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProblemLevel {
    /// The model still means something; ORT may still load it.
    Warning,
    /// ORT would refuse the model.
    Error,
}

/// A structural problem found while indexing a model that could still be read.
#[derive(Debug, Clone)]
pub struct Problem {
    pub level: ProblemLevel,
    /// Stable code, e.g. `model::dangling-input`.
    pub code: &'static str,
    pub message: String,
    pub node: Option<NodeId>,
}

/// A model: the decoded protobuf and an indexed view over all its graphs.
#[derive(Debug)]
pub struct Model {
    pub path: PathBuf,
    pub file_size: u64,
    pub proto: ModelProto,
    /// Opset imports, domains normalised, in file order.
    pub opsets: Vec<(String, i64)>,
    pub graphs: Vec<Graph>,
    pub nodes: Vec<Node>,
    pub values: Vec<Value>,
    /// Tensors whose data lives in external files (never read).
    pub external: Vec<ExternalRef>,
    /// Structural problems that did not stop loading.
    pub problems: Vec<Problem>,
}

/// Loads the model at `path`: maps it, decodes it, validates external data references and
/// indexes every graph. See the module docs for what fails and what becomes a [`Problem`].
pub fn load(path: &Path) -> Result<Model, LoadError> {
    let (proto, size) = if path.extension().is_some_and(|e| e == "onnxtxt") {
        load::read_text_model(path)?
    } else {
        read_model_proto(path)?
    };
    Model::from_proto(path, size, proto)
}

impl Model {
    /// Indexes an already decoded model; `path` locates external data and names the model.
    pub fn from_proto(path: &Path, file_size: u64, proto: ModelProto) -> Result<Model, LoadError> {
        let opsets = proto
            .opset_import
            .iter()
            .map(|o| (normalize_domain(o.domain()).to_string(), o.version()))
            .collect();
        let mut model = Model {
            path: path.to_path_buf(),
            file_size,
            proto,
            opsets,
            graphs: Vec::new(),
            nodes: Vec::new(),
            values: Vec::new(),
            external: Vec::new(),
            problems: Vec::new(),
        };
        graph::index(&mut model)?;
        model.external = external::collect(&model.path, &model.proto, &mut model.problems)?;
        model.check_header();
        Ok(model)
    }

    fn check_header(&mut self) {
        let ir = self.proto.ir_version();
        let newest = proto::Version::IrVersion as i64;
        if !(3..=newest).contains(&ir) {
            self.problems.push(Problem {
                level: ProblemLevel::Warning,
                code: "model::ir-version",
                message: format!(
                    "IR version {ir} is outside the range this tool knows (3 to {newest})"
                ),
                node: None,
            });
        }
        if self.opsets.is_empty() {
            self.problems.push(Problem {
                level: ProblemLevel::Error,
                code: "model::no-opset-import",
                message: "the model imports no opset".to_string(),
                node: None,
            });
        }
    }

    /// The opset version imported for `domain` (normalised), if any.
    pub fn opset(&self, domain: &str) -> Option<i64> {
        let domain = normalize_domain(domain);
        self.opsets
            .iter()
            .find(|(d, _)| d == domain)
            .map(|(_, v)| *v)
    }

    pub fn main_graph(&self) -> &Graph {
        &self.graphs[0]
    }

    pub fn graph(&self, id: GraphId) -> &Graph {
        &self.graphs[id.0 as usize]
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id.0 as usize]
    }

    /// Resolves `name` as seen from graph `g`: its own scope, then enclosing ones.
    pub fn resolve(&self, g: GraphId, name: &str) -> Option<ValueId> {
        let mut graph = self.graph(g);
        loop {
            if let Some(v) = graph.lookup(name) {
                return Some(v);
            }
            let (parent, _) = graph.parent.as_ref()?;
            graph = self.graph(self.node(*parent).graph);
        }
    }

    /// The `GraphProto` of a graph of this model.
    pub fn graph_proto(&self, id: GraphId) -> &GraphProto {
        // Indexing built these paths from this very proto, which is immutable since.
        let mut g = self
            .proto
            .graph
            .as_ref()
            .expect("invariant: a loaded model has a main graph");
        for step in &self.graph(id).path {
            let attr = &g.node[step.node_index as usize].attribute[step.attribute_index as usize];
            g = match step.graph_index {
                None => attr.g.as_ref().expect("invariant: indexed graph attribute"),
                Some(i) => &attr.graphs[i as usize],
            };
        }
        g
    }

    /// The `NodeProto` of a node of this model.
    pub fn node_proto(&self, id: NodeId) -> &NodeProto {
        let node = self.node(id);
        &self.graph_proto(node.graph).node[node.index as usize]
    }

    /// Total node count over all graphs.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// A summary of the model's size, as the default command prints it.
    pub fn stats(&self) -> ModelStats {
        let mut stats = ModelStats {
            nodes: self.nodes.len(),
            graphs: self.graphs.len(),
            functions: self.proto.functions.len(),
            ..ModelStats::default()
        };
        for g in &self.graphs {
            for init in &self.graph_proto(g.id).initializer {
                stats.initializers += 1;
                let external = self.external.iter().find(|e| e.tensor == init.name());
                match external {
                    Some(e) => stats.external_bytes += e.length.unwrap_or(0),
                    None => stats.initializer_bytes += tensor::stored_bytes(init),
                }
            }
        }
        for e in &self.external {
            *stats.external_files.entry(e.location.clone()).or_default() += 1;
        }
        stats
    }
}

/// Counts and sizes of a model.
#[derive(Debug, Default, Clone)]
pub struct ModelStats {
    pub nodes: usize,
    pub graphs: usize,
    pub functions: usize,
    pub initializers: usize,
    /// Bytes of initializer data stored in the model file.
    pub initializer_bytes: u64,
    /// Bytes of initializer data stored in external files (as declared).
    pub external_bytes: u64,
    /// External data files and how many tensors each holds.
    pub external_files: BTreeMap<String, usize>,
}
