//! Function inlining after partitioning (ORT `GraphPartitioner`, §4.6): a node that no provider
//! took and whose op is defined as a function is replaced by the function's body, whose nodes
//! are then partitioned like any other.
//!
//! Bodies come from ONNX's function definitions. The ones that depend on the node (context-
//! dependent functions: the body is built from the node's attributes and input types) are built
//! here, as ONNX builds them.

use crate::infer::Type;
use crate::model::proto::{AttributeProto, attribute_proto::AttributeType};
use crate::placer::ir::{NameGen, SNode, Session};

/// Replaces node `ni` of graph `gi` by its function body when one is known. Returns whether it did.
pub fn inline(session: &mut Session, gi: usize, ni: usize) -> bool {
    let node = session.graphs[gi].nodes[ni].clone();
    let body = match (node.domain.as_str(), node.op.as_str()) {
        ("ai.onnx", "CastLike") => cast_like(session, gi, &node),
        _ => None,
    };
    let Some(body) = body else { return false };
    let mut names = NameGen::new(&session.graphs[gi]);
    let prefix = format!("_inlfunc_{}", node.op);
    // Internal values get `_inlfunc_<Op>_<name>`; formal inputs and outputs are the node's own.
    let mut rename = rustc_hash::FxHashMap::default();
    for (k, f) in body.inputs.iter().enumerate() {
        rename.insert(f.clone(), node.inputs.get(k).cloned().unwrap_or_default());
    }
    for (k, f) in body.outputs.iter().enumerate() {
        rename.insert(f.clone(), node.outputs.get(k).cloned().unwrap_or_default());
    }
    let mut new_nodes = Vec::with_capacity(body.nodes.len());
    for b in body.nodes {
        let mut map = |n: &String| -> String {
            if n.is_empty() {
                return String::new();
            }
            if let Some(r) = rename.get(n) {
                return r.clone();
            }
            let fresh = names.value(&format!("{prefix}_{n}"));
            rename.insert(n.clone(), fresh.clone());
            fresh
        };
        let inputs = b.inputs.iter().map(&mut map).collect();
        let outputs = b.outputs.iter().map(&mut map).collect();
        new_nodes.push(SNode {
            name: b.name,
            op: b.op,
            domain: b.domain,
            since: None,
            inputs,
            outputs,
            attrs: b.attrs,
            subgraphs: Vec::new(),
            implicit_inputs: Vec::new(),
            ep: None,
            origin: node.origin,
            removed: false,
        });
    }
    session.graphs[gi].name_counter = names.counter;
    session.graphs[gi].nodes[ni].removed = true;
    session.graphs[gi].nodes.extend(new_nodes);
    true
}

/// A function body over formal names.
struct Body {
    inputs: Vec<String>,
    outputs: Vec<String>,
    nodes: Vec<BodyNode>,
}

struct BodyNode {
    name: String,
    op: String,
    domain: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
    attrs: Vec<AttributeProto>,
}

fn int_attr(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(value),
        r#type: Some(AttributeType::Int as i32),
        ..Default::default()
    }
}

/// `CastLike(input, target_type)`: `Cast<to = elem_type(target_type)>(input)`.
fn cast_like(session: &Session, gi: usize, node: &SNode) -> Option<Body> {
    let target = node.inputs.get(1)?;
    let Some(Type::Tensor(to)) = session.type_of(gi, target) else {
        return None;
    };
    Some(Body {
        inputs: vec!["input".into(), "target_type".into()],
        outputs: vec!["output".into()],
        nodes: vec![BodyNode {
            name: String::new(),
            op: "Cast".into(),
            domain: "ai.onnx".into(),
            inputs: vec!["input".into()],
            outputs: vec!["output".into()],
            attrs: vec![int_attr("to", i64::from(*to))],
        }],
    })
}
