//! The ONNX text view: a model rendered in ONNX's textual syntax (`onnx/docs/Syntax.md`), with a
//! span map from nodes and values to byte ranges, and a parser for the same syntax.
//!
//! The listing exists so that diagnostics can point at a node in readable text, and so that
//! tests can be written as small text fixtures. [`print_model`] renders a [`ModelProto`];
//! [`parse_model`] reads the syntax back.
//!
//! # The syntax
//!
//! The printer writes the form of ONNX's own printer (`onnx.printer.to_text`) with a few
//! deliberate differences, all of which the parser reads back:
//!
//! - one node per line (`[name] out1, out2 = domain.Op <attr = value, ...> (in1, in2)`); nodes
//!   that hold subgraphs (`If`, `Loop`, `Scan`: attributes `g`/`graphs`) print them inline,
//!   indented, with the attributes after the inputs, as ONNX does;
//! - initializers and `value_info` entries are printed one per line between `<` and `>`;
//! - an attribute's type is written (`axes: ints = []`) only where the value does not say it:
//!   empty lists, graphs, tensors whose data is not printed, sparse tensors, type protos, and
//!   references (`@name`); floats always carry a `.` or an exponent so they read back as floats;
//! - a tensor with more than [`ELIDE_ABOVE`] values is printed without its values, as
//!   `float[64,3,7,7] w = ...` (the `...` is an extension; ONNX's printer writes it too but its
//!   parser rejects it). External tensors print their `[ "location": ..., ... ]` entries;
//! - strings escape `\\`, `"`, `\n`, `\r`, `\t` and write other control bytes and bytes that are
//!   not UTF-8 as `\xHH` (ONNX's parser knows only `\\` and `\"`);
//! - names that are not identifiers, or that are type names or keywords (`float`, `seq`, `nan`,
//!   ...), are quoted; a domain that is not a dotted identifier is quoted (`"my-dom".Op`);
//! - sparse tensors (attributes and graph `sparse_initializer`s) use an extension:
//!   `sparse(values_tensor, indices_tensor, [dims])`, and a sparse initializer sits in the
//!   `<...>` list as `sparse name = sparse(...)`;
//! - functions print their `attribute_proto` defaults (`<a, b: int = 3>`) and their
//!   `value_info` (in `<...>` after the outputs);
//! - `#` starts a comment that runs to the end of the line.
//!
//! Other differences from `onnx.printer.to_text`, kept on purpose: two-space indentation; the
//! model header and functions omit fields the proto does not set (ONNX always writes
//! `ir_version` and a function's `domain`); tensor values are separated by `, `; floats are
//! Rust's shortest round-trip form (`1.0`, `1e-5`) rather than C++'s `to_chars` (`1`, `1e-05`).
//!
//! Cross-check (`tests/it/text_crosscheck.py`): every listing ONNX's printer writes for the
//! corpus and the backend node-test models parses here to the same graph structure; ONNX's
//! parser accepts this printer's listings except where a tensor is elided (`...`).
//!
//! # What the round trip carries
//!
//! Parsing a listing gives back the model's graph structure exactly: every graph, node (name,
//! domain, op, overload, inputs, outputs, attributes with their types), value info and type,
//! initializer metadata (name, element type, dims, external-data entries), model header
//! (`ir_version`, opsets, producer, domain, `model_version`, `metadata_props`) and model-local
//! functions. What it does not carry is what [`normalize`] removes, documented there: doc
//! strings, metadata on anything but the model, the values of elided tensors, and a few rarely
//! used fields.

#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod normalize;
mod parser;
mod printer;
mod tensor;

use std::collections::HashMap;
use std::ops::Range;

use miette::SourceSpan;

pub use normalize::normalize;
pub use parser::{ParseError, ParseErrorKind, parse_model};

use crate::model::proto::ModelProto;

/// Tensors with more values than this are printed without them (`= ...`).
pub const ELIDE_ABOVE: usize = 16;

/// How deeply the parser lets graphs and types nest (together) before it gives up, so that
/// hostile input cannot overflow the stack: a level of graph nesting costs about 24 KiB of stack
/// in a debug build, so 32 levels stay well inside a 2 MiB test thread. Real models nest a few
/// levels; a binary model cannot nest graphs much deeper than this anyway (prost's decoder stops
/// at 100 nested messages, three per graph level).
pub const MAX_NESTING: usize = 32;

/// Renders a model in ONNX's textual syntax. Deterministic: the same model gives the same text.
pub fn print_model(model: &ModelProto) -> Listing {
    printer::print(model)
}

/// The textual form of a model with the positions of its nodes and values.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    /// The listing itself.
    pub text: String,
    spans: HashMap<GraphPath, GraphSpans>,
}

impl Listing {
    /// The node's first line: the whole node for most nodes; for a node holding subgraphs, its
    /// outputs, op, inputs and the start of its first subgraph. Empty indentation is excluded.
    pub fn node_span(&self, graph: &GraphPath, node: usize) -> Option<SourceSpan> {
        let spans = self.spans.get(graph)?.nodes.get(node)?;
        Some(to_span(&spans.head))
    }

    /// The node's whole text, subgraphs included.
    pub fn node_full_span(&self, graph: &GraphPath, node: usize) -> Option<SourceSpan> {
        let spans = self.spans.get(graph)?.nodes.get(node)?;
        Some(to_span(&spans.full))
    }

    /// The name of a value where the graph defines it: its graph input, initializer or producing
    /// node output; for a value the graph does not define (an outer-scope value, a dangling
    /// input), its first mention.
    pub fn value_span(&self, graph: &GraphPath, name: &str) -> Option<SourceSpan> {
        let (_, range) = self.spans.get(graph)?.values.get(name)?;
        Some(to_span(range))
    }

    /// Every graph of the listing (in no particular order).
    pub fn graphs(&self) -> impl Iterator<Item = &GraphPath> {
        self.spans.keys()
    }
}

fn to_span(r: &Range<usize>) -> SourceSpan {
    SourceSpan::from(r.clone())
}

/// Which graph: the main graph or a model-local function's body, then the chain of subgraph
/// attributes from there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphPath {
    /// `None` for the main graph, `Some(i)` for `model.functions[i]`.
    pub function: Option<usize>,
    /// From the outermost graph inwards.
    pub steps: Vec<GraphStep>,
}

/// One step into a subgraph: the node index in the enclosing graph, the attribute name, and the
/// graph's index in that attribute (0 for `g`, the list index for `graphs`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GraphStep {
    pub node: usize,
    pub attribute: String,
    pub graph: usize,
}

impl GraphPath {
    /// The main graph.
    pub fn main() -> Self {
        Self::default()
    }

    /// The body of `model.functions[index]`.
    pub fn function(index: usize) -> Self {
        Self {
            function: Some(index),
            steps: Vec::new(),
        }
    }

    /// A subgraph of this graph.
    pub fn child(&self, node: usize, attribute: &str, graph: usize) -> Self {
        let mut steps = self.steps.clone();
        steps.push(GraphStep {
            node,
            attribute: attribute.to_owned(),
            graph,
        });
        Self {
            function: self.function,
            steps,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct GraphSpans {
    nodes: Vec<NodeSpans>,
    /// Name → (priority, range); a lower priority is a better anchor (definition over mention).
    values: HashMap<String, (u8, Range<usize>)>,
}

#[derive(Clone, Debug)]
struct NodeSpans {
    head: Range<usize>,
    full: Range<usize>,
}
