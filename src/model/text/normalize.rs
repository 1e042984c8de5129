//! The one definition of "the same graph" for the text round trip.

use super::printer::{attr_type, elided};
use super::tensor;
use crate::model::proto::attribute_proto::AttributeType;
use crate::model::proto::type_proto;
use crate::model::proto::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    SparseTensorProto, TensorProto, TypeProto, ValueInfoProto,
};

/// Removes from a model what its listing does not carry, so that
/// `normalize(parse(print(m))) == normalize(m)` (compared as encoded bytes, so that NaNs with
/// the same bits compare equal).
///
/// What goes:
/// - every `doc_string`;
/// - `metadata_props` of graphs, nodes, value infos, tensors and functions (the model's own are
///   kept), nodes' `device_configurations`, graphs' `quantization_annotation`, the model's
///   `training_info` and `configuration`, tensors' `segment`, type and dimension `denotation`s;
/// - the values of tensors the listing elides (more than [`super::ELIDE_ABOVE`] values, or values
///   of an unknown type), and the inline data of external tensors;
/// - the difference between a tensor's `raw_data` and its typed fields: typed numeric values are
///   turned into the `raw_data` bytes they stand for (see `tensor::canonical_raw`), and typed
///   fields beside `raw_data` are dropped;
/// - the difference between an absent field and its default where the syntax cannot tell them
///   apart: empty names (node, graph, value, tensor, function), empty node domains and overloads,
///   empty opset domains, element type 0, `data_location` 0, a type without a value;
/// - attribute fields other than the one of the attribute's type; an attribute without a type
///   gets the type its populated field implies.
///
/// A NaN's payload is not carried either (the listing writes `nan` or `-nan`).
pub fn normalize(model: &mut ModelProto) {
    model.doc_string = None;
    model.training_info.clear();
    model.configuration.clear();
    model.opset_import.iter_mut().for_each(opset);
    graph(model.graph.get_or_insert_with(GraphProto::default));
    model.functions.iter_mut().for_each(function);
}

fn opset(o: &mut OperatorSetIdProto) {
    empty_to_none(&mut o.domain);
}

fn empty_to_none(s: &mut Option<String>) {
    if s.as_deref() == Some("") {
        *s = None;
    }
}

fn function(f: &mut FunctionProto) {
    f.doc_string = None;
    f.metadata_props.clear();
    empty_to_none(&mut f.name);
    f.opset_import.iter_mut().for_each(opset);
    f.attribute_proto.iter_mut().for_each(attribute);
    f.value_info.iter_mut().for_each(value_info);
    f.node.iter_mut().for_each(node);
}

fn graph(g: &mut GraphProto) {
    g.doc_string = None;
    g.metadata_props.clear();
    g.quantization_annotation.clear();
    empty_to_none(&mut g.name);
    g.input.iter_mut().for_each(value_info);
    g.output.iter_mut().for_each(value_info);
    g.value_info.iter_mut().for_each(value_info);
    g.initializer.iter_mut().for_each(tensor);
    g.sparse_initializer.iter_mut().for_each(sparse);
    g.node.iter_mut().for_each(node);
}

fn node(n: &mut NodeProto) {
    n.doc_string = None;
    n.metadata_props.clear();
    n.device_configurations.clear();
    empty_to_none(&mut n.name);
    empty_to_none(&mut n.domain);
    empty_to_none(&mut n.overload);
    n.attribute.iter_mut().for_each(attribute);
}

fn attribute(a: &mut AttributeProto) {
    let ty = attr_type(a);
    let old = std::mem::take(a);
    a.name = old.name;
    a.ref_attr_name = old.ref_attr_name;
    a.r#type = (ty != AttributeType::Undefined).then_some(ty as i32);
    if a.ref_attr_name.is_some() {
        return;
    }
    match ty {
        AttributeType::Undefined => {}
        AttributeType::Float => a.f = Some(old.f.unwrap_or_default()),
        AttributeType::Int => a.i = Some(old.i.unwrap_or_default()),
        AttributeType::String => a.s = Some(old.s.unwrap_or_default()),
        AttributeType::Tensor => {
            let mut t = old.t.unwrap_or_default();
            tensor(&mut t);
            a.t = Some(t);
        }
        AttributeType::Graph => {
            let mut g = old.g.unwrap_or_default();
            graph(&mut g);
            a.g = Some(g);
        }
        AttributeType::SparseTensor => {
            let mut s = old.sparse_tensor.unwrap_or_default();
            sparse(&mut s);
            a.sparse_tensor = Some(s);
        }
        AttributeType::TypeProto => {
            let mut t = old.tp.unwrap_or_default();
            type_proto(&mut t);
            a.tp = Some(t);
        }
        AttributeType::Floats => a.floats = old.floats,
        AttributeType::Ints => a.ints = old.ints,
        AttributeType::Strings => a.strings = old.strings,
        AttributeType::Tensors => {
            a.tensors = old.tensors;
            a.tensors.iter_mut().for_each(tensor);
        }
        AttributeType::Graphs => {
            a.graphs = old.graphs;
            a.graphs.iter_mut().for_each(graph);
        }
        AttributeType::SparseTensors => {
            a.sparse_tensors = old.sparse_tensors;
            a.sparse_tensors.iter_mut().for_each(sparse);
        }
        AttributeType::TypeProtos => {
            a.type_protos = old.type_protos;
            a.type_protos.iter_mut().for_each(type_proto);
        }
    }
}

fn value_info(vi: &mut ValueInfoProto) {
    vi.doc_string = None;
    vi.metadata_props.clear();
    empty_to_none(&mut vi.name);
    if let Some(t) = &mut vi.r#type {
        type_proto(t);
        if t.value.is_none() {
            vi.r#type = None;
        }
    }
}

fn type_proto(t: &mut TypeProto) {
    t.denotation = None;
    match &mut t.value {
        None | Some(type_proto::Value::OpaqueType(_)) => {}
        Some(type_proto::Value::TensorType(tt)) => {
            zero_to_none(&mut tt.elem_type);
            if let Some(s) = &mut tt.shape {
                s.dim.iter_mut().for_each(|d| d.denotation = None);
            }
        }
        Some(type_proto::Value::SparseTensorType(st)) => {
            zero_to_none(&mut st.elem_type);
            if let Some(s) = &mut st.shape {
                s.dim.iter_mut().for_each(|d| d.denotation = None);
            }
        }
        Some(type_proto::Value::SequenceType(s)) => {
            if let Some(e) = &mut s.elem_type {
                type_proto(e);
            }
        }
        Some(type_proto::Value::OptionalType(o)) => {
            if let Some(e) = &mut o.elem_type {
                type_proto(e);
            }
        }
        Some(type_proto::Value::MapType(m)) => {
            zero_to_none(&mut m.key_type);
            if let Some(e) = &mut m.value_type {
                type_proto(e);
            }
        }
    }
}

fn zero_to_none(v: &mut Option<i32>) {
    if *v == Some(0) {
        *v = None;
    }
}

fn sparse(s: &mut SparseTensorProto) {
    if let Some(t) = &mut s.values {
        tensor(t);
    }
    if let Some(t) = &mut s.indices {
        tensor(t);
    }
}

fn clear_typed(t: &mut TensorProto, keep_strings: bool) {
    t.float_data.clear();
    t.int32_data.clear();
    t.int64_data.clear();
    t.double_data.clear();
    t.uint64_data.clear();
    if !keep_strings {
        t.string_data.clear();
    }
}

fn tensor(t: &mut TensorProto) {
    t.doc_string = None;
    t.metadata_props.clear();
    t.segment = None;
    empty_to_none(&mut t.name);
    zero_to_none(&mut t.data_type);
    if t.data_location == Some(0) {
        t.data_location = None;
    }
    if t.data_location == Some(1) {
        t.raw_data = None;
        clear_typed(t, false);
        return;
    }
    t.external_data.clear();
    if elided(t) {
        t.raw_data = None;
        clear_typed(t, false);
        return;
    }
    let is_string = tensor::store(t.data_type()) == Some(tensor::Store::String);
    if let Some(raw) = tensor::canonical_raw(t) {
        t.raw_data = Some(raw.into());
    }
    clear_typed(t, is_string);
    if t.raw_data.as_ref().is_some_and(|r| r.is_empty()) {
        t.raw_data = None;
    }
}
