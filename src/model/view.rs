//! A borrowed view of a model on the wire: the graph structure (graphs, nodes, their names,
//! inputs and outputs) read straight from the file's bytes, names as `&str` slices of the
//! mapped file, without decoding the whole `ModelProto`. The session builder
//! (`session/build.rs`) works from it; small messages the analysis keeps whole (attributes,
//! tensors, types, functions, opset ids) are decoded with prost from their slices, so raw tensor
//! data stays a slice of the map.
//!
//! The view accepts exactly what the prost decoder accepts, or declines: every field it does not
//! use is checked as prost would check it (wire type, UTF-8 of strings, nested messages decoded
//! and dropped), and whatever it does not read the usual way — a singular message written twice
//! (prost merges the two), group-encoded fields, a malformed varint — makes it decline with
//! [`Declined`]; the caller then takes the decoding path (`model::load`), which either reads the
//! model the general way or reports precisely why it cannot. So the fast path never accepts a
//! file the decoder refuses, and never reads one differently.

use bytes::Bytes;
use prost::Message;

use super::proto::{
    AttributeProto, FunctionProto, NodeDeviceConfigurationProto, OperatorSetIdProto,
    SparseTensorProto, StringStringEntryProto, TensorAnnotation, TensorProto, TrainingInfoProto,
    TypeProto,
};

/// The view declines this input: take the decoding path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declined;

type R<T> = Result<T, Declined>;

/// One field's payload.
#[derive(Debug, Clone, Copy)]
pub enum Wire<'a> {
    Varint(u64),
    Fixed64,
    Len(&'a [u8]),
    Fixed32,
}

/// The fields of a message, in order.
pub struct Fields<'a> {
    b: &'a [u8],
    pos: usize,
}

pub fn fields(b: &[u8]) -> Fields<'_> {
    Fields { b, pos: 0 }
}

impl<'a> Iterator for Fields<'a> {
    type Item = R<(u32, Wire<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.b.len() {
            return None;
        }
        Some(self.read())
    }
}

impl<'a> Fields<'a> {
    fn read(&mut self) -> R<(u32, Wire<'a>)> {
        let key = super::varint(self.b, &mut self.pos).ok_or(Declined)?;
        let number = u32::try_from(key >> 3).map_err(|_| Declined)?;
        if number == 0 {
            return Err(Declined);
        }
        let wire = match key & 7 {
            0 => Wire::Varint(super::varint(self.b, &mut self.pos).ok_or(Declined)?),
            1 => {
                self.skip(8)?;
                Wire::Fixed64
            }
            2 => {
                let len = super::varint(self.b, &mut self.pos).ok_or(Declined)?;
                let len = usize::try_from(len).map_err(|_| Declined)?;
                let start = self.pos;
                self.skip(len)?;
                Wire::Len(&self.b[start..self.pos])
            }
            5 => {
                self.skip(4)?;
                Wire::Fixed32
            }
            // Groups (3, 4) and the reserved wire types: left to the decoder.
            _ => return Err(Declined),
        };
        Ok((number, wire))
    }

    fn skip(&mut self, n: usize) -> R<()> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.b.len() => {
                self.pos = end;
                Ok(())
            }
            _ => Err(Declined),
        }
    }
}

/// A string field's text (prost refuses a string that is not UTF-8).
fn text(w: Wire<'_>) -> R<&str> {
    match w {
        // Names are ASCII nearly always: a word-at-a-time check instead of UTF-8 decoding.
        Wire::Len(b) if b.is_ascii() => {
            // SAFETY: ASCII is UTF-8.
            Ok(unsafe { std::str::from_utf8_unchecked(b) })
        }
        Wire::Len(b) => std::str::from_utf8(b).map_err(|_| Declined),
        _ => Err(Declined),
    }
}

fn message(w: Wire<'_>) -> R<&[u8]> {
    match w {
        Wire::Len(b) => Ok(b),
        _ => Err(Declined),
    }
}

fn int64(w: Wire<'_>) -> R<i64> {
    match w {
        // prost reads an int64 varint as two's complement.
        Wire::Varint(v) => Ok(v as i64),
        _ => Err(Declined),
    }
}

/// Checks a field the view does not use, as prost's decoder would check it.
#[derive(Clone, Copy)]
enum Skip {
    Str,
    Varint,
    Message(fn(&[u8]) -> bool),
}

fn decodes<M: Message + Default>(b: &[u8]) -> bool {
    M::decode(b).is_ok()
}

fn check(skip: Skip, w: Wire<'_>) -> R<()> {
    match (skip, w) {
        (Skip::Str, w) => text(w).map(|_| ()),
        (Skip::Varint, Wire::Varint(_)) => Ok(()),
        (Skip::Message(ok), Wire::Len(b)) if ok(b) => Ok(()),
        _ => Err(Declined),
    }
}

/// A model, as far as the session needs it.
#[derive(Debug, Default)]
pub struct ModelView<'a> {
    pub ir_version: Option<i64>,
    pub opset_import: Vec<OperatorSetIdProto>,
    pub graph: Option<&'a [u8]>,
    /// `FunctionProto`s, decoded.
    pub functions: Vec<FunctionProto>,
}

impl<'a> ModelView<'a> {
    pub fn parse(b: &'a [u8]) -> R<ModelView<'a>> {
        let mut m = ModelView::default();
        for f in fields(b) {
            let (number, w) = f?;
            match number {
                1 => m.ir_version = Some(int64(w)?),
                7 => {
                    // Twice: prost merges the two graphs.
                    let earlier = m.graph.replace(message(w)?);
                    if earlier.is_some() {
                        return Err(Declined);
                    }
                }
                8 => m
                    .opset_import
                    .push(OperatorSetIdProto::decode(message(w)?).map_err(|_| Declined)?),
                25 => m
                    .functions
                    .push(FunctionProto::decode(message(w)?).map_err(|_| Declined)?),
                2..=4 | 6 => check(Skip::Str, w)?,
                5 => check(Skip::Varint, w)?,
                14 => check(Skip::Message(decodes::<StringStringEntryProto>), w)?,
                20 => check(Skip::Message(decodes::<TrainingInfoProto>), w)?,
                26 => check(
                    Skip::Message(decodes::<super::proto::DeviceConfigurationProto>),
                    w,
                )?,
                _ => {}
            }
        }
        Ok(m)
    }
}

/// A graph's fields, in file order per kind.
#[derive(Debug, Default)]
pub struct GraphView<'a> {
    pub name: Option<&'a str>,
    pub nodes: Vec<&'a [u8]>,
    pub initializers: Vec<&'a [u8]>,
    pub sparse_initializers: Vec<&'a [u8]>,
    pub inputs: Vec<&'a [u8]>,
    pub outputs: Vec<&'a [u8]>,
    pub value_info: Vec<&'a [u8]>,
}

impl<'a> GraphView<'a> {
    pub fn parse(b: &'a [u8]) -> R<GraphView<'a>> {
        let mut g = GraphView::default();
        for f in fields(b) {
            let (number, w) = f?;
            match number {
                1 => g.nodes.push(message(w)?),
                2 => g.name = Some(text(w)?),
                5 => g.initializers.push(message(w)?),
                15 => g.sparse_initializers.push(message(w)?),
                11 => g.inputs.push(message(w)?),
                12 => g.outputs.push(message(w)?),
                13 => g.value_info.push(message(w)?),
                10 => check(Skip::Str, w)?,
                14 => check(Skip::Message(decodes::<TensorAnnotation>), w)?,
                16 => check(Skip::Message(decodes::<StringStringEntryProto>), w)?,
                _ => {}
            }
        }
        Ok(g)
    }
}

/// A value's name and declared type.
pub struct ValueInfoView<'a> {
    pub name: &'a str,
    pub ty: Option<TypeProto>,
}

impl<'a> ValueInfoView<'a> {
    pub fn parse(b: &'a [u8]) -> R<ValueInfoView<'a>> {
        let mut v = ValueInfoView { name: "", ty: None };
        for f in fields(b) {
            let (number, w) = f?;
            match number {
                1 => v.name = text(w)?,
                2 => {
                    if v.ty.is_some() {
                        return Err(Declined);
                    }
                    v.ty = Some(TypeProto::decode(message(w)?).map_err(|_| Declined)?);
                }
                3 => check(Skip::Str, w)?,
                4 => check(Skip::Message(decodes::<StringStringEntryProto>), w)?,
                _ => {}
            }
        }
        Ok(v)
    }
}

/// A node attribute: decoded whole, or (one holding graphs) its name, type and graphs. Held
/// while one node is read.
#[allow(clippy::large_enum_variant)]
pub enum AttributeView<'a> {
    Plain(AttributeProto),
    Graphs {
        name: &'a str,
        /// `g` (field 6), then `graphs` (field 11), in order.
        graphs: Vec<&'a [u8]>,
        /// The attribute without its graphs (`type`, any tensors, ...).
        rest: Box<AttributeProto>,
        /// `g` was written (the first of `graphs` is it).
        has_g: bool,
    },
}

impl<'a> AttributeView<'a> {
    pub fn parse(b: &'a [u8]) -> R<AttributeView<'a>> {
        // One walk to see whether it holds a graph; most attributes do not.
        let mut holds_graph = false;
        for f in fields(b) {
            let (number, _) = f?;
            holds_graph |= number == 6 || number == 11;
        }
        if !holds_graph {
            return AttributeProto::decode(b)
                .map(AttributeView::Plain)
                .map_err(|_| Declined);
        }
        // The graphs are read by the view; the other fields are decoded by prost from a copy
        // without them (a few bytes), so they are checked exactly as the decoder checks them.
        let mut g: Option<&[u8]> = None;
        let mut graphs = Vec::new();
        let mut rest = Vec::new();
        let mut walk = fields(b);
        loop {
            let start = walk.pos;
            let Some(f) = walk.next() else { break };
            let (number, w) = f?;
            match number {
                6 => {
                    // Twice: prost merges the two graphs.
                    if g.replace(message(w)?).is_some() {
                        return Err(Declined);
                    }
                }
                11 => graphs.push(message(w)?),
                _ => rest.extend_from_slice(&b[start..walk.pos]),
            }
        }
        let plain = AttributeProto::decode(rest.as_slice()).map_err(|_| Declined)?;
        let name = match plain.name.as_deref() {
            None => "",
            // The same text as a slice of the file (the last `name` field wins, as in prost).
            Some(n) => last_string_field(b, 1)
                .filter(|s| *s == n)
                .ok_or(Declined)?,
        };
        let has_g = g.is_some();
        Ok(AttributeView::Graphs {
            name,
            graphs: g.into_iter().chain(graphs).collect(),
            rest: Box::new(plain),
            has_g,
        })
    }
}

/// The last occurrence of string field `number` in message `b`.
fn last_string_field(b: &[u8], number: u32) -> Option<&str> {
    let mut out = None;
    for f in fields(b) {
        let (n, w) = f.ok()?;
        if n == number {
            out = Some(text(w).ok()?);
        }
    }
    out
}

/// A node's fields. Reused from node to node (`parse_into` clears it).
#[derive(Default)]
pub struct NodeView<'a> {
    pub name: &'a str,
    pub op_type: &'a str,
    pub domain: &'a str,
    pub inputs: Vec<&'a str>,
    pub outputs: Vec<&'a str>,
    pub attributes: Vec<&'a [u8]>,
}

impl<'a> NodeView<'a> {
    pub fn parse_into(&mut self, b: &'a [u8]) -> R<()> {
        self.name = "";
        self.op_type = "";
        self.domain = "";
        self.inputs.clear();
        self.outputs.clear();
        self.attributes.clear();
        for f in fields(b) {
            let (number, w) = f?;
            match number {
                1 => self.inputs.push(text(w)?),
                2 => self.outputs.push(text(w)?),
                3 => self.name = text(w)?,
                4 => self.op_type = text(w)?,
                7 => self.domain = text(w)?,
                5 => self.attributes.push(message(w)?),
                6 | 8 => check(Skip::Str, w)?,
                9 => check(Skip::Message(decodes::<StringStringEntryProto>), w)?,
                10 => check(Skip::Message(decodes::<NodeDeviceConfigurationProto>), w)?,
                _ => {}
            }
        }
        Ok(())
    }
}

/// Decodes a tensor from its slice of `file`: raw data stays a slice of the file's bytes.
pub fn tensor(file: &Bytes, b: &[u8]) -> R<TensorProto> {
    TensorProto::decode(file.slice_ref(b)).map_err(|_| Declined)
}

/// Decodes a sparse tensor from its slice of `file`.
pub fn sparse_tensor(file: &Bytes, b: &[u8]) -> R<SparseTensorProto> {
    SparseTensorProto::decode(file.slice_ref(b)).map_err(|_| Declined)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::proto::{
        GraphProto, ModelProto, NodeProto, TypeProto, ValueInfoProto, type_proto,
    };

    fn sample() -> ModelProto {
        let sub = GraphProto {
            name: Some("then".into()),
            node: vec![NodeProto {
                op_type: Some("Identity".into()),
                input: vec!["x".into()],
                output: vec!["t".into()],
                ..Default::default()
            }],
            output: vec![ValueInfoProto {
                name: Some("t".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let node = NodeProto {
            name: Some("if".into()),
            op_type: Some("If".into()),
            domain: Some(String::new()),
            input: vec!["c".into(), String::new()],
            output: vec!["y".into()],
            attribute: vec![
                AttributeProto {
                    name: Some("then_branch".into()),
                    r#type: Some(5),
                    g: Some(Box::new(sub.clone())),
                    ..Default::default()
                },
                AttributeProto {
                    name: Some("k".into()),
                    i: Some(3),
                    r#type: Some(2),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(17),
            }],
            graph: Some(GraphProto {
                name: Some("main".into()),
                node: vec![node],
                input: vec![ValueInfoProto {
                    name: Some("c".into()),
                    r#type: Some(TypeProto {
                        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                            elem_type: Some(9),
                            shape: None,
                        })),
                        denotation: None,
                    }),
                    ..Default::default()
                }],
                initializer: vec![TensorProto {
                    name: Some("w".into()),
                    dims: vec![2],
                    data_type: Some(1),
                    raw_data: Some(vec![0u8; 8].into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn reads_what_the_decoder_reads() {
        let m = sample();
        let bytes = Bytes::from(m.encode_to_vec());
        let v = ModelView::parse(&bytes).expect("view");
        assert_eq!(v.ir_version, Some(8));
        assert_eq!(v.opset_import, m.opset_import);
        let g = GraphView::parse(v.graph.expect("graph")).expect("graph view");
        assert_eq!(g.name, Some("main"));
        assert_eq!(g.nodes.len(), 1);
        let mut n = NodeView::default();
        n.parse_into(g.nodes[0]).expect("node");
        assert_eq!((n.name, n.op_type, n.domain), ("if", "If", ""));
        assert_eq!(n.inputs, ["c", ""]);
        assert_eq!(n.outputs, ["y"]);
        assert_eq!(n.attributes.len(), 2);
        match AttributeView::parse(n.attributes[0]).expect("attribute") {
            AttributeView::Graphs {
                name, graphs, rest, ..
            } => {
                assert_eq!(
                    (name, rest.r#type, graphs.len()),
                    ("then_branch", Some(5), 1)
                );
                let sub = GraphView::parse(graphs[0]).expect("subgraph");
                assert_eq!(sub.name, Some("then"));
            }
            AttributeView::Plain(_) => unreachable!("a graph attribute"),
        }
        match AttributeView::parse(n.attributes[1]).expect("attribute") {
            AttributeView::Plain(a) => {
                assert_eq!(a, m.graph.as_ref().expect("g").node[0].attribute[1])
            }
            AttributeView::Graphs { .. } => unreachable!("a plain attribute"),
        }
        let vi = ValueInfoView::parse(g.inputs[0]).expect("input");
        assert_eq!(vi.name, "c");
        assert_eq!(
            vi.ty.as_ref(),
            m.graph.as_ref().expect("g").input[0].r#type.as_ref()
        );
        let t = tensor(&bytes, g.initializers[0]).expect("tensor");
        assert_eq!(t, m.graph.as_ref().expect("g").initializer[0]);
        // Zero copy: the raw data is a slice of the file.
        let raw = t.raw_data.expect("raw");
        let at = raw.as_ptr() as usize - bytes.as_ptr() as usize;
        assert!(at < bytes.len());
    }

    #[test]
    fn declines_what_it_does_not_read_as_prost_does() {
        let mut b = sample().encode_to_vec();
        // A second `graph` field: prost merges it into the first.
        let second = sample().encode_to_vec();
        b.extend_from_slice(&second);
        assert_eq!(ModelView::parse(&b).map(|_| ()), Err(Declined));
        // Truncated.
        let b = sample().encode_to_vec();
        let cut = &b[..b.len() - 3];
        let declined = ModelView::parse(cut).and_then(|v| GraphView::parse(v.graph.unwrap_or(&[])));
        assert!(declined.is_err() || ModelProto::decode(cut).is_ok());
        // A doc string that is not UTF-8: prost refuses the model.
        let mut m = sample();
        m.doc_string = Some("ok".into());
        let mut b = m.encode_to_vec();
        let at = b
            .windows(2)
            .position(|w| w == b"ok")
            .expect("doc string bytes");
        b[at] = 0xff;
        assert!(ModelProto::decode(b.as_slice()).is_err());
        assert_eq!(ModelView::parse(&b).map(|_| ()), Err(Declined));
    }
}
