//! ORT's `InsertCastTransformer` and `RemoveDuplicateCastTransformer`
//! (`core/optimizer/insert_cast_transformer.cc`), which run at every optimisation level after
//! partitioning: float16 nodes that no provider took run on the CPU in float32 between inserted
//! `Cast` nodes, and Cast pairs that cancel out are removed.

use crate::sym::SymMap as HashMap;

use crate::infer::Type;
use crate::model::DataType as D;
use crate::session::edit::Editor;
use crate::session::{EdgeEnd, NameGen, NodeRef, SNode, Session};
use crate::sym::Sym;
use crate::tables::{Ep, KernelTable};

const FLOAT16: i32 = D::Float16 as i32;
const FLOAT: i32 = D::Float as i32;

fn is_fp16(g: &Session, gi: usize, name: Sym) -> bool {
    !name.is_empty() && g.type_of(gi, name) == Some(&Type::Tensor(FLOAT16))
}

/// Runs both transformers over the main graph and every subgraph. Returns the nodes that were
/// moved to the CPU in float32.
pub fn run(session: &mut Session, table: &KernelTable) -> Vec<NodeRef> {
    let mut moved = Vec::new();
    if session.graphs.is_empty() {
        return moved;
    }
    // Both steps of InsertCastTransformer act only around nodes no provider took.
    let any_unassigned = session
        .graphs
        .iter()
        .any(|g| g.any_live_node(|n| n.ep.is_none()));
    if any_unassigned {
        let mut updates: HashMap<Sym, Sym> = HashMap::default();
        let versions = crate::infer::domain_versions(session, table);
        let cx = Cx { table, versions };
        insert_casts(session, &cx, 0, &mut updates, &mut moved);
    }
    let rules = CastRules {
        cross_ep: table.release_at_least(1, CROSS_EP_MINOR),
        lossy_to_bool: table.release_at_least(1, 26),
    };
    remove_duplicate_casts(session, 0, rules);
    moved
}

/// First minor release of 1.x whose `RemoveDuplicateCastTransformer` keeps a Cast whose kept
/// child Cast runs on another provider (onnxruntime PR 27363).
const CROSS_EP_MINOR: u64 = 25;

/// The conditions `RemoveDuplicateCastTransformer` gained over the bundled releases, for removing
/// the first Cast of a chain when some child Casts are kept.
#[derive(Debug, Clone, Copy)]
struct CastRules {
    /// Not when a kept child Cast is assigned to another provider than the first (onnxruntime
    /// PR 27363; seen in the oracle: 1.24.4 removes, 1.31.1 keeps).
    cross_ep: bool,
    /// Not when the first Cast may lose information and a kept child casts to bool (onnxruntime
    /// issue 28089; the CPU wheels: 1.25.1 removes, 1.26.0 keeps).
    lossy_to_bool: bool,
}

/// The release's kernels and the model's opsets, for `IsIsolatedFp16NodeOnCpu`'s lookup of an
/// fp32 CPU kernel.
struct Cx<'t> {
    table: &'t KernelTable,
    versions: HashMap<Sym, i64>,
}

/// `NodeNeedsInputCastToFp32`: unassigned, with an fp16 input.
fn needs_input_cast(s: &Session, gi: usize, n: &SNode) -> bool {
    n.ep.is_none() && n.inputs.iter().any(|i| is_fp16(s, gi, *i))
}

/// `NeedInsertCast`: an unassigned node without subgraphs gets a Cast on each fp16 input.
fn need_insert_cast(s: &Session, gi: usize, n: &SNode, input: Sym) -> bool {
    n.ep.is_none() && n.subgraphs.is_empty() && is_fp16(s, gi, input)
}

fn insert_casts(
    session: &mut Session,
    cx: &Cx<'_>,
    gi: usize,
    updates: &mut HashMap<Sym, Sym>,
    moved: &mut Vec<NodeRef>,
) {
    // The graph's index, built for the isolated-node check, then kept by the Casts' insertion.
    let mut ed = force_single_node_fp32(session, cx, gi);
    // One name generator per graph: building it reads every name of the graph.
    let mut names: Option<NameGen> = None;
    // `GraphViewer::GetNodesInTopologicalOrder`: the reverse DFS from the leaves.
    let order = crate::session::edit::order_of(session, gi, crate::session::edit::Order::Dfs);
    for ni in order {
        let node = &session.graphs[gi].nodes[ni];
        let mut replacements: Vec<(Sym, Sym, bool)> = Vec::new();
        let mut casted = false;
        {
            for input in node.inputs.clone() {
                if !need_insert_cast(session, gi, &session.graphs[gi].nodes[ni], input) {
                    continue;
                }
                casted = true;
                let dst = match updates.get(&input) {
                    Some(d) => *d,
                    None => {
                        let name = add_cast(session, &mut ed, &mut names, input, true);
                        updates.insert(input, name);
                        name
                    }
                };
                replacements.push((input, dst, true));
            }
        }
        if casted {
            let outputs = session.graphs[gi].nodes[ni].outputs.clone();
            for out in outputs {
                if is_fp16(session, gi, out) {
                    let src = add_cast(session, &mut ed, &mut names, out, false);
                    replacements.push((out, src, false));
                }
            }
            session.graphs[gi].nodes[ni].ep = Some(Ep::Cpu);
            for (old, new, is_input) in replacements {
                let node = &session.graphs[gi].nodes[ni];
                let list = if is_input {
                    &node.inputs
                } else {
                    &node.outputs
                };
                let slots: Vec<usize> = (0..list.len()).filter(|&k| list[k] == old).collect();
                for k in slots {
                    if is_input {
                        ed.set_input(session, EdgeEnd::new(ni, k), new);
                    } else {
                        ed.set_output(session, EdgeEnd::new(ni, k), new);
                    }
                }
            }
            moved.push(NodeRef::new(gi, ni));
        }
        let subs: Vec<usize> = session.graphs[gi].nodes[ni]
            .subgraphs
            .iter()
            .map(|(_, s)| *s)
            .collect();
        for sg in subs {
            insert_casts(session, cx, sg, updates, moved);
        }
    }
    ed.keep(session);
}

/// Adds a CPU Cast for `value`: on an input, fp16 → float producing a new value; on an output,
/// float (new value) → fp16 producing `value`. Returns the new value's name.
fn add_cast(
    session: &mut Session,
    ed: &mut Editor,
    names: &mut Option<NameGen>,
    value: Sym,
    on_input: bool,
) -> Sym {
    let gi = ed.gi;
    let g = &mut session.graphs[gi];
    let gen_ = names.get_or_insert_with(|| NameGen::new(g));
    // ORT's `GenerateNodeName`, through the graph's shared counter.
    let name = gen_.node(&format!("InsertedPrecisionFreeCast_{value}"));
    g.name_counter = gen_.counter;
    g.generated_names.insert(name);
    let (input, output, to) = if on_input {
        (value, name, FLOAT)
    } else {
        (name, value, FLOAT16)
    };
    let g = &mut session.graphs[gi];
    g.types.insert(name, Type::Tensor(FLOAT));
    if let Some(shape) = g.shapes.get(&value).cloned() {
        g.shapes.insert(name, shape);
    }
    let cast = SNode {
        name,
        op: Sym::CAST,
        domain: Sym::AI_ONNX,
        since: None,
        inputs: vec![input],
        outputs: vec![output],
        attrs: thin_vec::thin_vec![crate::model::proto::AttributeProto {
            name: Some("to".into()),
            i: Some(i64::from(to)),
            r#type: Some(crate::model::proto::attribute_proto::AttributeType::Int as i32),
            ..Default::default()
        }],
        subgraphs: thin_vec::ThinVec::new(),
        implicit_inputs: thin_vec::ThinVec::new(),
        ep: Some(Ep::Cpu),
        kernel: None,
        origin: None,
        removed: false,
    };
    ed.add(session, cast);
    name
}

/// `ForceSingleNodeCPUFloat16ToFloat32`: every node for which `IsIsolatedFp16NodeOnCpu` holds is
/// unassigned, in node order, so that it is cast to fp32 with its neighbours. The graph's
/// editor, built for the check.
fn force_single_node_fp32(session: &mut Session, cx: &Cx<'_>, gi: usize) -> Editor {
    let e = Editor::open(session, gi);
    let indices: Vec<usize> = session.graphs[gi].live_nodes().map(|(i, _)| i).collect();
    for ni in indices {
        if isolated_fp16_node_on_cpu(session, cx, gi, ni, &e) {
            // Unassigned, it is bound to no kernel either (it is assigned again, in float32).
            let node = &mut session.graphs[gi].nodes[ni];
            node.ep = None;
            node.kernel = None;
        }
    }
    e
}

/// `IsIsolatedFp16NodeOnCpu`: a CPU node with input edges, no subgraph and no graph output, whose
/// fp16 inputs (the first argument of each type-constrained formal input) all come from nodes
/// that will be cast, which has an fp16 output whose consumers will all be cast, and for which
/// the CPU registers a kernel with those fp16 types replaced by float.
fn isolated_fp16_node_on_cpu(
    session: &Session,
    cx: &Cx<'_>,
    gi: usize,
    ni: usize,
    e: &Editor,
) -> bool {
    let g = &session.graphs[gi];
    let node = &g.nodes[ni];
    let has_input_edge = node
        .inputs
        .iter()
        .chain(&node.implicit_inputs)
        .any(|&name| e.producer(session, name).is_some());
    if !has_input_edge
        || !node.subgraphs.is_empty()
        || node.outputs.iter().any(|&o| e.is_output(o))
        || node.ep != Some(Ep::Cpu)
    {
        return false;
    }
    let Ok(schema) = crate::infer::resolve_schema(cx.table, &cx.versions, node.domain, node.op)
    else {
        return false;
    };
    let Some(since) = node.since else {
        return false;
    };
    let mut constraint_types: Vec<(String, String)> = Vec::new();
    let float = Type::Tensor(FLOAT).to_string();
    // Binds a type parameter to an argument's type, fp16 read as float; true for an fp16 one.
    let mut bind_arg = |key: &str, name: Sym| {
        let fp16 = is_fp16(session, gi, name);
        let ty = if fp16 {
            float.clone()
        } else if let Some(t) = session.type_of(gi, name) {
            t.to_string()
        } else {
            return false;
        };
        match constraint_types.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = ty,
            None => constraint_types.push((key.to_string(), ty)),
        }
        fp16
    };
    let mut fp16_inputs: Vec<usize> = Vec::new();
    let positions = crate::infer::formal_input_positions(schema, node.inputs.len());
    for (k, formal) in schema.inputs.iter().enumerate() {
        if schema.allowed(&formal.type_str).is_none() {
            continue;
        }
        let Some(range) = positions.get(k) else {
            continue;
        };
        // ORT looks at the first actual argument of the formal parameter only.
        let Some(idx) = range.clone().next() else {
            continue;
        };
        let name = &node.inputs[idx];
        if name.is_empty() {
            continue;
        }
        if bind_arg(&formal.type_str, *name) {
            fp16_inputs.push(idx);
        }
    }
    if fp16_inputs.is_empty() {
        return false;
    }
    for &idx in &fp16_inputs {
        if let Some(p) = e.producer(session, node.inputs[idx])
            && !needs_input_cast(session, gi, &g.nodes[p])
        {
            return false;
        }
    }
    let mut fp16_outputs: Vec<usize> = Vec::new();
    for (k, formal) in schema.outputs.iter().enumerate() {
        if schema.allowed(&formal.type_str).is_none() {
            continue;
        }
        let Some(name) = node.outputs.get(k).filter(|n| !n.is_empty()) else {
            continue;
        };
        if bind_arg(&formal.type_str, *name) {
            fp16_outputs.push(k);
        }
    }
    if fp16_outputs.is_empty() {
        return false;
    }
    for &k in &fp16_outputs {
        for c in e.readers(session, node.outputs[k]) {
            if !needs_input_cast(session, gi, &g.nodes[c]) {
                return false;
            }
        }
    }
    // `KernelRegistry::TryFindKernel` with a type map: every bound constraint must be a
    // constraint of the kernel and allow the bound type.
    cx.table
        .kernels_of(Ep::Cpu, node.domain, node.op)
        .iter()
        .filter(|kd| kd.matches_since(since))
        .any(|kd| {
            constraint_types.iter().all(|(name, ty)| {
                kd.types
                    .iter()
                    .find(|(n, _)| n == name)
                    .is_some_and(|(_, allowed)| allowed.contains(ty))
            })
        })
}

/// Element type group of `RemoveDuplicateCastTransformer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Bool,
    Integer,
    Unsigned,
    Float,
}

fn elem(t: Option<&Type>) -> Option<D> {
    let Some(Type::Tensor(e)) = t else {
        return None;
    };
    D::try_from(*e).ok()
}

fn type_group(t: Option<&Type>) -> Option<Group> {
    match elem(t)? {
        D::Bool => Some(Group::Bool),
        D::Int16 | D::Int32 | D::Int64 | D::Int8 => Some(Group::Integer),
        D::Uint16 | D::Uint32 | D::Uint64 | D::Uint8 => Some(Group::Unsigned),
        D::Bfloat16 | D::Double | D::Float | D::Float16 => Some(Group::Float),
        _ => None,
    }
}

fn bit_length(t: Option<&Type>) -> i32 {
    match elem(t) {
        Some(D::Bool) => 1,
        Some(D::Uint8 | D::Int8) => 8,
        Some(D::Int16 | D::Uint16 | D::Bfloat16 | D::Float16) => 16,
        Some(D::Int32 | D::Uint32 | D::Float) => 32,
        Some(D::Int64 | D::Uint64 | D::Double) => 64,
        _ => -1,
    }
}

/// `RemoveDuplicateCastTransformer::UnsafeCast`: whether a cast from `src` to `dst` may lose
/// information (casts that InsertCastTransformer inserted never count as narrowing).
fn unsafe_cast(src: Option<&Type>, dst: Option<&Type>, node_name: &str) -> bool {
    let (Some(sg), Some(dg)) = (type_group(src), type_group(dst)) else {
        return true;
    };
    if sg != Group::Bool && sg != Group::Unsigned && dg == Group::Unsigned {
        return true;
    }
    if sg == Group::Float && dg != Group::Float {
        return true;
    }
    let (sb, db) = (bit_length(src), bit_length(dst));
    if sg == Group::Unsigned && dg == Group::Integer {
        return db <= sb;
    }
    if matches!(sg, Group::Integer | Group::Unsigned) && dg == Group::Float {
        return db <= sb;
    }
    if matches!(
        (elem(src), elem(dst)),
        (Some(D::Float16), Some(D::Bfloat16)) | (Some(D::Bfloat16), Some(D::Float16))
    ) {
        return true;
    }
    sb > db && !node_name.starts_with("InsertedPrecisionFreeCast_")
}

/// `RemoveDuplicateCastTransformer` over graph `gi` and, node by node, its subgraphs. The
/// graph's editor is built at its first Cast and kept by each removal, so the pass is linear in
/// the size of the graph.
fn remove_duplicate_casts(session: &mut Session, gi: usize, rules: CastRules) {
    let count = session.graphs[gi].nodes.len();
    let mut e: Option<Editor> = None;
    for ni in 0..count {
        if session.graphs[gi].nodes[ni].removed {
            continue;
        }
        let mut removed_self = false;
        if session.graphs[gi].nodes[ni].op == Sym::CAST {
            let ed = e.get_or_insert_with(|| Editor::open(session, gi));
            removed_self = remove_around(session, ni, ed, rules);
        }
        if !removed_self {
            let subs: Vec<usize> = session.graphs[gi].nodes[ni]
                .subgraphs
                .iter()
                .map(|(_, s)| *s)
                .collect();
            for sg in subs {
                remove_duplicate_casts(session, sg, rules);
            }
        }
    }
    if let Some(ed) = e {
        ed.keep(session);
    }
}

/// One step of `RemoveDuplicateCastTransformer` at Cast node `ni`; true when `ni` was removed.
fn remove_around(session: &mut Session, ni: usize, e: &mut Editor, rules: CastRules) -> bool {
    let gi = e.gi;
    let node = &session.graphs[gi].nodes[ni];
    let (Some(input), Some(output)) = (node.inputs.first().cloned(), node.outputs.first().cloned())
    else {
        return false;
    };
    let src = session.type_of(gi, input).cloned();
    let dst = session.type_of(gi, output).cloned();
    let loss = unsafe_cast(src.as_ref(), dst.as_ref(), &node.name);
    let children = e.reader_slots(session, output);
    let mut to_remove: Vec<usize> = Vec::new();
    let mut keep = 0usize;
    // A kept child on another provider, or (after a lossy cast) one that casts to bool: the
    // first Cast then stays, whatever else happens around it.
    let mut pinned = false;
    let ep = node.ep;
    for &EdgeEnd { node: c, .. } in &children {
        let child = &session.graphs[gi].nodes[c];
        if child.op != Sym::CAST {
            continue;
        }
        let src1 = child
            .inputs
            .first()
            .and_then(|n| session.type_of(gi, *n))
            .cloned();
        let c_out = child.outputs.first().cloned().unwrap_or_default();
        let dst1 = session.type_of(gi, c_out).cloned();
        if loss && unsafe_cast(dst1.as_ref(), src1.as_ref(), &child.name) {
            return false;
        }
        if !e.is_output(c_out) && src == dst1 && src1 == dst {
            to_remove.push(c);
        } else {
            keep += 1;
            if rules.cross_ep && ep.is_some() && child.ep.is_some() && child.ep != ep {
                pinned = true;
            }
            if rules.lossy_to_bool && loss && type_group(dst1.as_ref()) == Some(Group::Bool) {
                pinned = true;
            }
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
        e.remove(session, c);
        replace_input(session, e, c_out, input);
    }
    if !children.is_empty()
        && !pinned
        && removed_count + keep == children.len()
        && !e.is_output(output)
    {
        e.remove(session, ni);
        replace_input(session, e, output, input);
        return true;
    }
    false
}

/// Every edge out of `from` comes out of `to` instead: each input of a live node reading it
/// (an implicit input in the reader's list only, its subgraphs left as they are).
fn replace_input(session: &mut Session, e: &mut Editor, from: Sym, to: Sym) {
    for EdgeEnd { node: c, arg: k } in e.reader_slots(session, from) {
        if k == usize::MAX {
            e.set_implicit_input(session, c, from, to);
        } else {
            e.set_input(session, EdgeEnd::new(c, k), to);
        }
    }
}
