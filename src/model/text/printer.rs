//! `ModelProto` → text. See the module docs of `text` for the syntax and what it carries.

use std::fmt::Write as _;
use std::ops::Range;

use super::tensor::{self, Values};
use super::{ELIDE_ABOVE, GraphPath, GraphSpans, Listing, NodeSpans};
use crate::model::proto::attribute_proto::AttributeType;
use crate::model::proto::tensor_shape_proto::dimension;
use crate::model::proto::type_proto;
use crate::model::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    SparseTensorProto, StringStringEntryProto, TensorProto, TypeProto, ValueInfoProto,
};

/// Value-span priorities: a definition beats a mention.
const INPUT: u8 = 0;
const INITIALIZER: u8 = 1;
const NODE_OUTPUT: u8 = 2;
const DECLARED: u8 = 3;
const NODE_INPUT: u8 = 4;

pub(super) fn print(model: &ModelProto) -> Listing {
    let mut p = Printer::default();
    p.model(model);
    Listing {
        text: p.out,
        spans: p.spans,
    }
}

#[derive(Default)]
struct Printer {
    out: String,
    spans: std::collections::HashMap<GraphPath, GraphSpans>,
    /// The spans of the graphs being printed, innermost last (cheaper than a map lookup per
    /// name).
    open: Vec<GraphSpans>,
}

impl Printer {
    fn model(&mut self, m: &ModelProto) {
        let mut fields: Vec<(&str, String)> = Vec::new();
        if let Some(v) = m.ir_version {
            fields.push(("ir_version", v.to_string()));
        }
        if !m.opset_import.is_empty() {
            fields.push(("opset_import", opsets(&m.opset_import)));
        }
        if let Some(v) = &m.producer_name {
            fields.push(("producer_name", quoted_str(v)));
        }
        if let Some(v) = &m.producer_version {
            fields.push(("producer_version", quoted_str(v)));
        }
        if let Some(v) = &m.domain {
            fields.push(("domain", quoted_str(v)));
        }
        if let Some(v) = m.model_version {
            fields.push(("model_version", v.to_string()));
        }
        if !m.metadata_props.is_empty() {
            fields.push(("metadata_props", props(&m.metadata_props)));
        }
        self.header(&fields);
        let empty = GraphProto::default();
        let graph = m.graph.as_ref().unwrap_or(&empty);
        self.graph(graph, &GraphPath::main(), 0);
        self.out.push('\n');
        for (i, f) in m.functions.iter().enumerate() {
            self.out.push('\n');
            self.function(f, &GraphPath::function(i));
            self.out.push('\n');
        }
    }

    fn header(&mut self, fields: &[(&str, String)]) {
        if fields.is_empty() {
            return;
        }
        self.out.push_str("<\n");
        for (i, (k, v)) in fields.iter().enumerate() {
            let sep = if i + 1 < fields.len() { "," } else { "" };
            let _ = writeln!(self.out, "  {k}: {v}{sep}");
        }
        self.out.push_str(">\n");
    }

    fn function(&mut self, f: &FunctionProto, path: &GraphPath) {
        let mut fields: Vec<(&str, String)> = Vec::new();
        if let Some(v) = &f.domain {
            fields.push(("domain", quoted_str(v)));
        }
        if let Some(v) = &f.overload {
            fields.push(("overload", quoted_str(v)));
        }
        if !f.opset_import.is_empty() {
            fields.push(("opset_import", opsets(&f.opset_import)));
        }
        self.header(&fields);
        self.open.push(GraphSpans::default());
        self.id(f.name());
        self.out.push(' ');
        if !f.attribute.is_empty() || !f.attribute_proto.is_empty() {
            self.out.push('<');
            let mut first = true;
            for a in &f.attribute {
                self.sep(&mut first, ", ");
                self.id(a);
            }
            for a in &f.attribute_proto {
                self.sep(&mut first, ", ");
                self.attribute(a, path, 0, 0);
            }
            self.out.push_str("> ");
        }
        self.name_list(&f.input, INPUT);
        self.out.push_str(" => ");
        self.name_list(&f.output, DECLARED);
        self.out.push('\n');
        if !f.value_info.is_empty() {
            self.out.push_str("<\n");
            for (i, vi) in f.value_info.iter().enumerate() {
                self.out.push_str("  ");
                self.value_info(vi, DECLARED);
                if i + 1 < f.value_info.len() {
                    self.out.push(',');
                }
                self.out.push('\n');
            }
            self.out.push_str(">\n");
        }
        self.nodes(&f.node, path, 0);
        self.close(path);
    }

    fn close(&mut self, path: &GraphPath) {
        if let Some(spans) = self.open.pop() {
            self.spans.insert(path.clone(), spans);
        }
    }

    fn name_list(&mut self, names: &[String], priority: u8) {
        self.out.push('(');
        let mut first = true;
        for n in names {
            self.sep(&mut first, ", ");
            self.value_name(n, priority);
        }
        self.out.push(')');
    }

    /// A graph, starting at the current position: `name (inputs) => (outputs)`, its
    /// initializers and value infos, then its nodes indented by `indent + 2` and the closing
    /// brace at `indent`.
    fn graph(&mut self, g: &GraphProto, path: &GraphPath, indent: usize) {
        self.open.push(GraphSpans::default());
        self.id(g.name());
        self.out.push_str(" (");
        let mut first = true;
        for vi in &g.input {
            self.sep(&mut first, ", ");
            self.value_info(vi, INPUT);
        }
        self.out.push_str(") => (");
        let mut first = true;
        for vi in &g.output {
            self.sep(&mut first, ", ");
            self.value_info(vi, DECLARED);
        }
        self.out.push(')');
        let entries = g.initializer.len() + g.sparse_initializer.len() + g.value_info.len();
        if entries > 0 {
            self.out.push('\n');
            self.pad(indent);
            self.out.push_str("<\n");
            let mut left = entries;
            let mut next = |p: &mut Self| {
                left -= 1;
                if left > 0 {
                    p.out.push(',');
                }
                p.out.push('\n');
            };
            for t in &g.initializer {
                self.pad(indent + 2);
                self.tensor(t, true);
                next(self);
            }
            for s in &g.sparse_initializer {
                self.pad(indent + 2);
                self.out.push_str("sparse ");
                let name = s.values.as_ref().map(|v| v.name()).unwrap_or_default();
                self.value_name(name, INITIALIZER);
                self.out.push_str(" = ");
                // The values' name is the initializer's, written once before the `=`.
                let mut s = s.clone();
                if let Some(v) = s.values.as_mut() {
                    v.name = None;
                }
                self.sparse(&s);
                next(self);
            }
            for vi in &g.value_info {
                self.pad(indent + 2);
                self.value_info(vi, DECLARED);
                next(self);
            }
            self.pad(indent);
            self.out.push_str(">\n");
            self.pad(indent);
        } else {
            self.out.push(' ');
        }
        self.nodes(&g.node, path, indent);
        self.close(path);
    }

    fn nodes(&mut self, nodes: &[NodeProto], path: &GraphPath, indent: usize) {
        self.out.push_str("{\n");
        for (i, n) in nodes.iter().enumerate() {
            self.pad(indent + 2);
            self.node(n, path, i, indent + 2);
            self.out.push('\n');
        }
        self.pad(indent);
        self.out.push('}');
    }

    fn node(&mut self, n: &NodeProto, path: &GraphPath, index: usize, indent: usize) {
        let start = self.out.len();
        if let Some(name) = n.name.as_deref().filter(|s| !s.is_empty()) {
            self.out.push('[');
            self.id(name);
            self.out.push_str("] ");
        }
        let mut first = true;
        for o in &n.output {
            self.sep(&mut first, ", ");
            self.value_name(o, NODE_OUTPUT);
        }
        self.out.push_str(" = ");
        let domain = n.domain();
        if !domain.is_empty() {
            if domain.split('.').all(is_identifier) {
                self.out.push_str(domain);
            } else {
                self.quoted(domain.as_bytes());
            }
            self.out.push('.');
        }
        self.id(n.op_type());
        if let Some(o) = n.overload.as_deref().filter(|s| !s.is_empty()) {
            self.out.push(':');
            self.id(o);
        }
        let has_graph = n
            .attribute
            .iter()
            .any(|a| a.g.is_some() || !a.graphs.is_empty());
        if !has_graph {
            self.attributes(&n.attribute, path, index, indent);
        }
        self.out.push_str(" (");
        let mut first = true;
        for i in &n.input {
            self.sep(&mut first, ", ");
            self.value_name(i, NODE_INPUT);
        }
        self.out.push(')');
        if has_graph {
            self.attributes(&n.attribute, path, index, indent);
        }
        let end = self.out.len();
        let head_end = self
            .out
            .get(start..)
            .and_then(|s| s.find('\n'))
            .map_or(end, |i| start + i);
        if let Some(g) = self.open.last_mut() {
            g.nodes.push(NodeSpans {
                head: start..head_end,
                full: start..end,
            });
        }
    }

    fn attributes(
        &mut self,
        attrs: &[AttributeProto],
        path: &GraphPath,
        node: usize,
        indent: usize,
    ) {
        if attrs.is_empty() {
            return;
        }
        self.out.push_str(" <");
        let mut first = true;
        for a in attrs {
            self.sep(&mut first, ", ");
            self.attribute(a, path, node, indent);
        }
        self.out.push('>');
    }

    fn attribute(&mut self, a: &AttributeProto, path: &GraphPath, node: usize, indent: usize) {
        self.id(a.name());
        let ty = attr_type(a);
        let ty_name = attr_type_name(ty);
        if let Some(r) = &a.ref_attr_name {
            match ty_name {
                Some(t) => {
                    let _ = write!(self.out, ": {t} = @");
                }
                None => self.out.push_str(" = @"),
            }
            self.id(r);
            return;
        }
        let annotate = match ty {
            AttributeType::Float | AttributeType::Int | AttributeType::String => false,
            AttributeType::Floats => a.floats.is_empty(),
            AttributeType::Ints => a.ints.is_empty(),
            AttributeType::Strings => a.strings.is_empty(),
            AttributeType::Tensor => a.t.as_deref().is_none_or(|t| !plain_tensor(t)),
            _ => true,
        };
        match (annotate, ty_name) {
            (true, Some(t)) => {
                let _ = write!(self.out, ": {t} = ");
            }
            _ => self.out.push_str(" = "),
        }
        match ty {
            AttributeType::Undefined => self.out.push_str("[]"),
            AttributeType::Float => push_f32(&mut self.out, a.f()),
            AttributeType::Int => {
                let _ = write!(self.out, "{}", a.i());
            }
            AttributeType::String => self.quoted(a.s()),
            AttributeType::Tensor => {
                let empty = TensorProto::default();
                self.tensor(a.t.as_deref().unwrap_or(&empty), false);
            }
            AttributeType::Graph => {
                let empty = GraphProto::default();
                let child = path.child(node, a.name(), 0);
                self.graph(a.g.as_deref().unwrap_or(&empty), &child, indent);
            }
            AttributeType::SparseTensor => {
                let empty = SparseTensorProto::default();
                self.sparse(a.sparse_tensor.as_deref().unwrap_or(&empty));
            }
            AttributeType::TypeProto => {
                let empty = TypeProto::default();
                self.type_proto(a.tp.as_deref().unwrap_or(&empty));
            }
            AttributeType::Floats => self.list(&a.floats, |p, v| push_f32(&mut p.out, *v)),
            AttributeType::Ints => self.list(&a.ints, |p, v| {
                let _ = write!(p.out, "{v}");
            }),
            AttributeType::Strings => self.list(&a.strings, |p, v| p.quoted(v)),
            AttributeType::Tensors => self.list(&a.tensors, |p, t| p.tensor(t, false)),
            AttributeType::Graphs => {
                self.out.push('[');
                for (i, g) in a.graphs.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    let child = path.child(node, a.name(), i);
                    self.graph(g, &child, indent);
                }
                self.out.push(']');
            }
            AttributeType::SparseTensors => self.list(&a.sparse_tensors, |p, s| p.sparse(s)),
            AttributeType::TypeProtos => self.list(&a.type_protos, |p, t| p.type_proto(t)),
        }
    }

    fn list<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Self, &T)) {
        self.out.push('[');
        let mut first = true;
        for item in items {
            self.sep(&mut first, ", ");
            each(self, item);
        }
        self.out.push(']');
    }

    /// `elem[dims] name = data` for initializers (the name recorded in the span map), or
    /// `elem[dims] name data` inside attributes.
    fn tensor(&mut self, t: &TensorProto, initializer: bool) {
        self.elem(t.data_type());
        if !t.dims.is_empty() {
            self.list_compact(&t.dims);
        }
        let name = t.name();
        if !name.is_empty() || initializer {
            self.out.push(' ');
            if initializer {
                self.value_name(name, INITIALIZER);
            } else {
                self.id(name);
            }
        }
        self.out.push_str(if initializer { " = " } else { " " });
        self.tensor_data(t);
    }

    fn tensor_data(&mut self, t: &TensorProto) {
        if t.data_location == Some(1) {
            self.out.push('[');
            let mut first = true;
            for e in &t.external_data {
                self.sep(&mut first, ", ");
                self.prop(e);
            }
            self.out.push(']');
            return;
        }
        if elided(t) {
            self.out.push_str("...");
            return;
        }
        let Some(values) = tensor::values(t) else {
            self.out.push_str("...");
            return;
        };
        self.out.push('{');
        match values {
            Values::Ints(v) => self.seq(&v, |o, x| {
                let _ = write!(o, "{x}");
            }),
            Values::Uints(v) => self.seq(&v, |o, x| {
                let _ = write!(o, "{x}");
            }),
            Values::Floats(v) => self.seq(&v, |o, x| push_f32(o, *x)),
            Values::Doubles(v) => self.seq(&v, |o, x| push_f64(o, *x)),
            Values::Strings(v) => {
                for (i, s) in v.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.quoted(s);
                }
            }
        }
        self.out.push('}');
    }

    fn seq<T>(&mut self, items: &[T], each: impl Fn(&mut String, &T)) {
        for (i, x) in items.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            each(&mut self.out, x);
        }
    }

    fn sparse(&mut self, s: &SparseTensorProto) {
        let empty = TensorProto::default();
        self.out.push_str("sparse(");
        self.tensor(s.values.as_ref().unwrap_or(&empty), false);
        self.out.push_str(", ");
        self.tensor(s.indices.as_ref().unwrap_or(&empty), false);
        self.out.push_str(", ");
        self.list_compact(&s.dims);
        self.out.push(')');
    }

    fn list_compact(&mut self, v: &[i64]) {
        self.out.push('[');
        for (i, d) in v.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            let _ = write!(self.out, "{d}");
        }
        self.out.push(']');
    }

    fn value_info(&mut self, vi: &ValueInfoProto, priority: u8) {
        if let Some(t) = &vi.r#type
            && t.value.is_some()
        {
            self.type_proto(t);
            self.out.push(' ');
        }
        self.value_name(vi.name(), priority);
    }

    fn type_proto(&mut self, t: &TypeProto) {
        match &t.value {
            None => {}
            Some(type_proto::Value::TensorType(tt)) => {
                self.elem(tt.elem_type());
                self.shape(tt.shape.as_ref());
            }
            Some(type_proto::Value::SequenceType(s)) => {
                self.out.push_str("seq(");
                if let Some(e) = &s.elem_type {
                    self.type_proto(e);
                }
                self.out.push(')');
            }
            Some(type_proto::Value::MapType(m)) => {
                self.out.push_str("map(");
                self.elem(m.key_type());
                self.out.push_str(", ");
                if let Some(e) = &m.value_type {
                    self.type_proto(e);
                }
                self.out.push(')');
            }
            Some(type_proto::Value::OptionalType(o)) => {
                self.out.push_str("optional(");
                if let Some(e) = &o.elem_type {
                    self.type_proto(e);
                }
                self.out.push(')');
            }
            Some(type_proto::Value::SparseTensorType(st)) => {
                self.out.push_str("sparse_tensor(");
                self.elem(st.elem_type());
                self.shape(st.shape.as_ref());
                self.out.push(')');
            }
            Some(type_proto::Value::OpaqueType(o)) => {
                self.out.push_str("opaque(");
                if let Some(d) = &o.domain {
                    self.quoted(d.as_bytes());
                    self.out.push_str(", ");
                }
                if let Some(n) = &o.name {
                    self.quoted(n.as_bytes());
                }
                self.out.push(')');
            }
        }
    }

    fn shape(&mut self, shape: Option<&crate::model::proto::TensorShapeProto>) {
        let Some(shape) = shape else {
            self.out.push_str("[]");
            return;
        };
        if shape.dim.is_empty() {
            return;
        }
        self.out.push('[');
        for (i, d) in shape.dim.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            match &d.value {
                Some(dimension::Value::DimValue(v)) => {
                    let _ = write!(self.out, "{v}");
                }
                Some(dimension::Value::DimParam(p)) => self.id(p),
                None => self.out.push('?'),
            }
        }
        self.out.push(']');
    }

    fn elem(&mut self, code: i32) {
        self.out
            .push_str(tensor::elem_name(code).unwrap_or("undefined"));
    }

    fn prop(&mut self, e: &StringStringEntryProto) {
        self.quoted(e.key().as_bytes());
        self.out.push_str(": ");
        self.quoted(e.value().as_bytes());
    }

    /// A value name, recorded in the span map of `path`.
    fn value_name(&mut self, name: &str, priority: u8) {
        let start = self.out.len();
        self.id(name);
        let range = start..self.out.len();
        if name.is_empty() {
            return;
        }
        if let Some(g) = self.open.last_mut() {
            record(g, name, priority, range);
        }
    }

    fn id(&mut self, s: &str) {
        if is_identifier(s) && !is_reserved(s) {
            self.out.push_str(s);
        } else {
            self.quoted(s.as_bytes());
        }
    }

    fn quoted(&mut self, s: &[u8]) {
        self.out.push('"');
        let mut rest = s;
        while !rest.is_empty() {
            let (valid, bad) = match std::str::from_utf8(rest) {
                Ok(v) => (v, &[][..]),
                Err(e) => {
                    let (v, b) = rest.split_at(e.valid_up_to());
                    (std::str::from_utf8(v).unwrap_or_default(), b)
                }
            };
            for c in valid.chars() {
                match c {
                    '"' => self.out.push_str("\\\""),
                    '\\' => self.out.push_str("\\\\"),
                    '\n' => self.out.push_str("\\n"),
                    '\r' => self.out.push_str("\\r"),
                    '\t' => self.out.push_str("\\t"),
                    c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                        let _ = write!(self.out, "\\x{:02x}", c as u32);
                    }
                    c => self.out.push(c),
                }
            }
            match bad.split_first() {
                Some((b, tail)) => {
                    let _ = write!(self.out, "\\x{b:02x}");
                    rest = tail;
                }
                None => rest = &[],
            }
        }
        self.out.push('"');
    }

    fn sep(&mut self, first: &mut bool, sep: &str) {
        if !*first {
            self.out.push_str(sep);
        }
        *first = false;
    }

    fn pad(&mut self, n: usize) {
        self.out.extend(std::iter::repeat_n(' ', n));
    }
}

fn record(g: &mut GraphSpans, name: &str, priority: u8, range: Range<usize>) {
    match g.values.get_mut(name) {
        Some(slot) => {
            if priority < slot.0 {
                *slot = (priority, range);
            }
        }
        None => {
            g.values.insert(name.to_owned(), (priority, range));
        }
    }
}

/// Whether the printer leaves out this tensor's values (`= ...`): not external, and more than
/// [`ELIDE_ABOVE`] values, values it cannot read, or no values although the dims say there are
/// elements (so that a parsed elided tensor prints as `...` again).
pub(crate) fn elided(t: &TensorProto) -> bool {
    if t.data_location == Some(1) {
        return false;
    }
    match tensor::value_count(t) {
        None => true,
        Some(0) => t.dims.iter().all(|d| *d != 0),
        Some(n) => n > ELIDE_ABOVE,
    }
}

/// A tensor attribute whose value reads back as a tensor without a type annotation.
fn plain_tensor(t: &TensorProto) -> bool {
    t.data_location != Some(1)
        && !elided(t)
        && tensor::store(t.data_type()).is_some()
        && (t.name().is_empty() || (is_identifier(t.name()) && !is_reserved(t.name())))
}

/// The attribute's type: the declared one, or, when that is missing (old models), the one its
/// populated field implies.
pub(crate) fn attr_type(a: &AttributeProto) -> AttributeType {
    let declared = a.r#type();
    if declared != AttributeType::Undefined {
        return declared;
    }
    if a.ref_attr_name.is_some() {
        return AttributeType::Undefined;
    }
    if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if a.sparse_tensor.is_some() {
        AttributeType::SparseTensor
    } else if a.tp.is_some() {
        AttributeType::TypeProto
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.tensors.is_empty() {
        AttributeType::Tensors
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else if !a.sparse_tensors.is_empty() {
        AttributeType::SparseTensors
    } else if !a.type_protos.is_empty() {
        AttributeType::TypeProtos
    } else {
        AttributeType::Undefined
    }
}

/// The syntax name of an attribute type (ONNX's `AttributeTypeNameMap`).
pub(crate) fn attr_type_name(t: AttributeType) -> Option<&'static str> {
    Some(match t {
        AttributeType::Undefined => return None,
        AttributeType::Float => "float",
        AttributeType::Int => "int",
        AttributeType::String => "string",
        AttributeType::Tensor => "tensor",
        AttributeType::Graph => "graph",
        AttributeType::SparseTensor => "sparse_tensor",
        AttributeType::TypeProto => "type_proto",
        AttributeType::Floats => "floats",
        AttributeType::Ints => "ints",
        AttributeType::Strings => "strings",
        AttributeType::Tensors => "tensors",
        AttributeType::Graphs => "graphs",
        AttributeType::SparseTensors => "sparse_tensors",
        AttributeType::TypeProtos => "type_protos",
    })
}

pub(crate) fn is_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Words that a bare name cannot be, because the parser reads them as something else.
pub(crate) fn is_reserved(s: &str) -> bool {
    tensor::elem_code(s).is_some()
        || matches!(
            s,
            "seq" | "map" | "optional" | "sparse_tensor" | "opaque" | "sparse"
        )
        || ["nan", "inf", "infinity"]
            .iter()
            .any(|k| s.eq_ignore_ascii_case(k))
}

fn opsets(list: &[OperatorSetIdProto]) -> String {
    let mut s = String::from("[");
    for (i, o) in list.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&quoted_str(o.domain()));
        let _ = write!(s, " : {}", o.version());
    }
    s.push(']');
    s
}

fn props(list: &[StringStringEntryProto]) -> String {
    let mut p = Printer::default();
    p.out.push('[');
    for (i, e) in list.iter().enumerate() {
        if i > 0 {
            p.out.push_str(", ");
        }
        p.prop(e);
    }
    p.out.push(']');
    p.out
}

fn quoted_str(s: &str) -> String {
    let mut p = Printer::default();
    p.quoted(s.as_bytes());
    p.out
}

/// Shortest text that reads back to the same `f32`, always float-looking (`1.0`, `1e-5`).
fn push_f32(out: &mut String, v: f32) {
    if v.is_nan() {
        out.push_str(if v.is_sign_negative() { "-nan" } else { "nan" });
    } else {
        let _ = write!(out, "{v:?}");
    }
}

fn push_f64(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str(if v.is_sign_negative() { "-nan" } else { "nan" });
    } else {
        let _ = write!(out, "{v:?}");
    }
}
