//! ORT's `InsertCastTransformer` and `RemoveDuplicateCastTransformer`
//! (`core/optimizer/insert_cast_transformer.cc`), which run at every optimisation level after
//! partitioning: float16 nodes that no provider took run on the CPU in float32 between inserted
//! `Cast` nodes, and Cast pairs that cancel out are removed.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::infer::Type;
use crate::model::DataType as D;
use crate::placer::ir::{SGraph, SNode, Session};
use crate::tables::Ep;

const FLOAT16: i32 = D::Float16 as i32;
const FLOAT: i32 = D::Float as i32;

fn is_fp16(g: &Session, gi: usize, name: &str) -> bool {
    !name.is_empty() && g.type_of(gi, name) == Some(&Type::Tensor(FLOAT16))
}

/// Producer node of each value of a graph, and the consumers (node, input index) of each value.
struct Edges {
    producer: HashMap<String, usize>,
    consumers: HashMap<String, Vec<(usize, usize)>>,
}

fn edges(g: &SGraph) -> Edges {
    let mut producer = HashMap::default();
    let mut consumers: HashMap<String, Vec<(usize, usize)>> = HashMap::default();
    for (i, n) in g.live_nodes() {
        for o in n.outputs.iter().filter(|o| !o.is_empty()) {
            producer.insert(o.clone(), i);
        }
    }
    for (i, n) in g.live_nodes() {
        for (k, name) in n.inputs.iter().enumerate() {
            if !name.is_empty() && producer.contains_key(name) {
                consumers.entry(name.clone()).or_default().push((i, k));
            }
        }
        for name in &n.implicit_inputs {
            if producer.contains_key(name) {
                consumers
                    .entry(name.clone())
                    .or_default()
                    .push((i, usize::MAX));
            }
        }
    }
    Edges {
        producer,
        consumers,
    }
}

/// Runs both transformers over the main graph and every subgraph. Returns the nodes (graph,
/// node) that were moved to the CPU in float32.
pub fn run(session: &mut Session) -> Vec<(usize, usize)> {
    let mut moved = Vec::new();
    if session.graphs.is_empty() {
        return moved;
    }
    // Both steps of InsertCastTransformer act only around nodes no provider took.
    let any_unassigned = session
        .graphs
        .iter()
        .any(|g| g.live_nodes().any(|(_, n)| n.ep.is_none()));
    if any_unassigned {
        let mut updates: HashMap<String, String> = HashMap::default();
        insert_casts(session, 0, &mut updates, &mut moved);
    }
    remove_duplicate_casts(session, 0);
    moved
}

fn needs_input_cast(s: &Session, gi: usize, n: &SNode) -> bool {
    n.ep.is_none() && n.inputs.iter().any(|i| is_fp16(s, gi, i))
}

fn insert_casts(
    session: &mut Session,
    gi: usize,
    updates: &mut HashMap<String, String>,
    moved: &mut Vec<(usize, usize)>,
) {
    force_single_node_fp32(session, gi);
    for ni in crate::infer::topological_order(session, gi) {
        let node = &session.graphs[gi].nodes[ni];
        let mut replacements: Vec<(String, String, bool)> = Vec::new();
        let mut casted = false;
        if node.ep.is_none() {
            for input in node.inputs.clone() {
                if !is_fp16(session, gi, &input) {
                    continue;
                }
                casted = true;
                let dst = match updates.get(&input) {
                    Some(d) => d.clone(),
                    None => {
                        let name = add_cast(session, gi, &input, true);
                        updates.insert(input.clone(), name.clone());
                        name
                    }
                };
                replacements.push((input, dst, true));
            }
        }
        if casted {
            let outputs = session.graphs[gi].nodes[ni].outputs.clone();
            for out in outputs {
                if is_fp16(session, gi, &out) {
                    let src = add_cast(session, gi, &out, false);
                    replacements.push((out, src, false));
                }
            }
            let node = &mut session.graphs[gi].nodes[ni];
            node.ep = Some(Ep::Cpu);
            for (old, new, is_input) in replacements {
                let list = if is_input {
                    &mut node.inputs
                } else {
                    &mut node.outputs
                };
                for name in list.iter_mut().filter(|n| **n == old) {
                    *name = new.clone();
                }
            }
            moved.push((gi, ni));
        }
        let subs: Vec<usize> = session.graphs[gi].nodes[ni]
            .subgraphs
            .iter()
            .map(|(_, s)| *s)
            .collect();
        for sg in subs {
            insert_casts(session, sg, updates, moved);
        }
    }
}

/// Adds a CPU Cast for `value`: on an input, fp16 → float producing a new value; on an output,
/// float (new value) → fp16 producing `value`. Returns the new value's name.
fn add_cast(session: &mut Session, gi: usize, value: &str, on_input: bool) -> String {
    let name = session.graphs[gi].generate_node_name(&format!("InsertedCast_{value}"));
    let (input, output, to) = if on_input {
        (value.to_string(), name.clone(), FLOAT)
    } else {
        (name.clone(), value.to_string(), FLOAT16)
    };
    let g = &mut session.graphs[gi];
    g.types.insert(name.clone(), Type::Tensor(FLOAT));
    if let Some(shape) = g.shapes.get(value).cloned() {
        g.shapes.insert(name.clone(), shape);
    }
    g.nodes.push(SNode {
        name: name.clone(),
        op: "Cast".into(),
        domain: "ai.onnx".into(),
        since: None,
        inputs: vec![input],
        outputs: vec![output],
        attrs: vec![crate::model::proto::AttributeProto {
            name: Some("to".into()),
            i: Some(i64::from(to)),
            r#type: Some(crate::model::proto::attribute_proto::AttributeType::Int as i32),
            ..Default::default()
        }],
        subgraphs: Vec::new(),
        implicit_inputs: Vec::new(),
        ep: Some(Ep::Cpu),
        origin: None,
        removed: false,
    });
    name
}

/// `ForceSingleNodeCPUFloat16ToFloat32`: a CPU node whose fp16 inputs all come from nodes that
/// will be cast, and that has an fp16 output edge, is unassigned so that it is cast too.
fn force_single_node_fp32(session: &mut Session, gi: usize) {
    if session.graphs[gi].live_nodes().count() <= 1 {
        return;
    }
    let e = edges(&session.graphs[gi]);
    let graph_outputs: HashSet<String> = session.graphs[gi].outputs.iter().cloned().collect();
    let indices: Vec<usize> = session.graphs[gi].live_nodes().map(|(i, _)| i).collect();
    for ni in indices {
        let g = &session.graphs[gi];
        let node = &g.nodes[ni];
        let input_edges: Vec<(usize, usize)> = node
            .inputs
            .iter()
            .enumerate()
            .filter_map(|(k, name)| e.producer.get(name).map(|&p| (p, k)))
            .chain(
                node.implicit_inputs
                    .iter()
                    .filter_map(|name| e.producer.get(name).map(|&p| (p, usize::MAX))),
            )
            .collect();
        if input_edges.is_empty()
            || !node.subgraphs.is_empty()
            || node.outputs.iter().any(|o| graph_outputs.contains(o))
            || node.ep != Some(Ep::Cpu)
        {
            continue;
        }
        let fp16_inputs = node
            .inputs
            .iter()
            .filter(|i| is_fp16(session, gi, i))
            .count();
        if fp16_inputs == 0 {
            continue;
        }
        let mut fp16_edges = 0;
        for (p, k) in &input_edges {
            let Some(name) = node.inputs.get(*k) else {
                continue;
            };
            if is_fp16(session, gi, name) {
                if !needs_input_cast(session, gi, &g.nodes[*p]) {
                    break;
                }
                fp16_edges += 1;
            }
        }
        if fp16_inputs != fp16_edges {
            continue;
        }
        let has_fp16_output_edge = node
            .outputs
            .iter()
            .filter(|o| is_fp16(session, gi, o))
            .any(|o| e.consumers.get(o).is_some_and(|c| !c.is_empty()));
        if has_fp16_output_edge {
            session.graphs[gi].nodes[ni].ep = None;
        }
    }
}

/// Element type group of `RemoveDuplicateCastTransformer`: bool 0, integer 1, float 2.
fn type_group(t: Option<&Type>) -> Option<u8> {
    let Some(Type::Tensor(e)) = t else {
        return None;
    };
    let e = D::try_from(*e).ok()?;
    match e {
        D::Bool => Some(0),
        D::Int16 | D::Int32 | D::Int64 | D::Int8 | D::Uint16 | D::Uint32 | D::Uint64 | D::Uint8 => {
            Some(1)
        }
        D::Bfloat16 | D::Double | D::Float | D::Float16 => Some(2),
        _ => None,
    }
}

fn remove_duplicate_casts(session: &mut Session, gi: usize) {
    let graph_outputs: HashSet<String> = session.graphs[gi].outputs.iter().cloned().collect();
    let count = session.graphs[gi].nodes.len();
    let mut e: Option<Edges> = None;
    for ni in 0..count {
        if session.graphs[gi].nodes[ni].removed {
            continue;
        }
        let mut removed_self = false;
        if session.graphs[gi].nodes[ni].op == "Cast" {
            let edges = e.get_or_insert_with(|| edges(&session.graphs[gi]));
            let (changed, removed) = remove_around(session, gi, ni, &graph_outputs, edges);
            removed_self = removed;
            if changed {
                e = None;
            }
        }
        if !removed_self {
            let subs: Vec<usize> = session.graphs[gi].nodes[ni]
                .subgraphs
                .iter()
                .map(|(_, s)| *s)
                .collect();
            for sg in subs {
                remove_duplicate_casts(session, sg);
            }
        }
    }
}

/// One step of `RemoveDuplicateCastTransformer` at Cast node `ni`: (graph changed, `ni` removed).
fn remove_around(
    session: &mut Session,
    gi: usize,
    ni: usize,
    graph_outputs: &HashSet<String>,
    e: &Edges,
) -> (bool, bool) {
    let node = &session.graphs[gi].nodes[ni];
    let (Some(input), Some(output)) = (node.inputs.first().cloned(), node.outputs.first().cloned())
    else {
        return (false, false);
    };
    let src = session.type_of(gi, &input).cloned();
    let dst = session.type_of(gi, &output).cloned();
    let (Some(sg), Some(dg)) = (type_group(src.as_ref()), type_group(dst.as_ref())) else {
        return (false, false);
    };
    let loss = sg > dg;
    let children: Vec<(usize, usize)> = e.consumers.get(&output).cloned().unwrap_or_default();
    let mut to_remove: Vec<usize> = Vec::new();
    let mut keep = 0usize;
    for &(c, _) in &children {
        let child = &session.graphs[gi].nodes[c];
        if child.op != "Cast" {
            continue;
        }
        let src1 = child
            .inputs
            .first()
            .and_then(|n| session.type_of(gi, n))
            .cloned();
        let c_out = child.outputs.first().cloned().unwrap_or_default();
        let dst1 = session.type_of(gi, &c_out).cloned();
        let (Some(sg1), Some(dg1)) = (type_group(src1.as_ref()), type_group(dst1.as_ref())) else {
            return (false, false);
        };
        if loss && dg1 > sg1 {
            return (false, false);
        }
        if !graph_outputs.contains(&c_out) && src == dst1 && src1 == dst {
            to_remove.push(c);
        } else {
            keep += 1;
        }
    }
    let removed_count = to_remove.len();
    for c in to_remove {
        // The removed Cast's consumers read the first Cast's input instead.
        let c_out = session.graphs[gi].nodes[c]
            .outputs
            .first()
            .cloned()
            .unwrap_or_default();
        replace_input_everywhere(session, gi, &c_out, &input);
        session.graphs[gi].nodes[c].removed = true;
    }
    if !children.is_empty()
        && removed_count + keep == children.len()
        && !graph_outputs.contains(&output)
    {
        replace_input_everywhere(session, gi, &output, &input);
        session.graphs[gi].nodes[ni].removed = true;
        return (true, true);
    }
    (removed_count > 0, false)
}

fn replace_input_everywhere(session: &mut Session, gi: usize, from: &str, to: &str) {
    for n in session.graphs[gi].nodes.iter_mut().filter(|n| !n.removed) {
        for name in n.inputs.iter_mut().filter(|n| *n == from) {
            *name = to.to_string();
        }
        for name in n.implicit_inputs.iter_mut().filter(|n| *n == from) {
            *name = to.to_string();
        }
    }
}
