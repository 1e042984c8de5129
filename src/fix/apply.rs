//! Applies [`Fix`]es to the bytes of a model, editing only the fields they change (see
//! [`super::wire`]): an opset import's `version`, one input name of a node, nodes left without a
//! consumer by that replacement, one appended initializer. Everything else is copied as it was.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use prost::Message;

use super::wire::{self, Malformed};
use crate::diagnostics::Fix;
use crate::model::proto::{TensorProto, tensor_proto};
use crate::model::{GraphId, GraphStep, Model, NodeId, ValueDef, ValueId, normalize_domain};

/// The most elements a constant may have (shape vectors are short; a longer one is not ours).
const MAX_CONSTANT: usize = 4096;

/// What applying a list of fixes did.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// The edited model (equal to the input when nothing applied).
    pub bytes: Vec<u8>,
    /// Fixes applied, in order.
    pub applied: Vec<Fix>,
    /// Fixes not applied, with the reason.
    pub skipped: Vec<(Fix, String)>,
    /// Nodes deleted because a replacement left them without consumers (names or `#index`).
    pub removed_nodes: Vec<String>,
}

/// Edits of one graph.
#[derive(Debug, Default)]
struct GraphEdit {
    /// node index → (input position → new value name).
    inputs: BTreeMap<u32, BTreeMap<usize, String>>,
    /// Node indices to delete.
    remove: BTreeSet<u32>,
    /// Encoded `TensorProto`s to append as initializers.
    initializers: Vec<Vec<u8>>,
    /// node index → encoded `NodeProto`s written in its place.
    replace: BTreeMap<u32, Vec<Vec<u8>>>,
}

#[derive(Debug, Default)]
struct Plan {
    /// Normalised domain → version, for the model's imports.
    model_imports: HashMap<String, i64>,
    /// (normalised function domain, name) → (normalised domain → version).
    function_imports: HashMap<(String, String), HashMap<String, i64>>,
    /// Edits by graph (`GraphId.0`): the main graph or a subgraph.
    graphs: BTreeMap<u32, GraphEdit>,
    /// Values that a rewired input reads from now on (a use the model did not have).
    new_uses: Vec<ValueId>,
}

/// Applies `fixes` to `bytes`, the encoding of `model`. A fix that no longer matches the model
/// (stale `from`, unknown node or function) is skipped with the reason; of two fixes setting the
/// same import, the one with the higher target wins this round (the next round sees the rest).
pub fn apply(bytes: &[u8], model: &Model, fixes: &[Fix]) -> Result<Applied, Malformed> {
    let mut plan = Plan::default();
    let mut applied = Vec::new();
    let mut skipped = Vec::new();
    let mut replaced: Vec<(NodeId, usize, ValueId)> = Vec::new();
    // Every value name of the model, and the names this round adds.
    let mut taken: HashSet<String> = HashSet::new();
    if fixes.iter().any(|f| {
        matches!(
            f,
            Fix::ReplaceInputWithConstant { .. } | Fix::CollapseReshape { .. }
        )
    }) {
        taken.extend(model.values.iter().map(|v| v.name.clone()));
    }
    let mut ordered: Vec<&Fix> = fixes.iter().collect();
    // Highest target first, so that it is the one kept for a domain; rewrites that remove nodes
    // before edits of those nodes (which are then skipped: the node is gone).
    ordered.sort_by_key(|f| match f {
        Fix::UnflattenGemm { .. } => std::cmp::Reverse(i64::MAX),
        Fix::SetOpsetImport { to, .. } => std::cmp::Reverse(*to),
        _ => std::cmp::Reverse(i64::MIN),
    });
    for fix in ordered {
        match plan_one(model, fix, &mut plan, &mut replaced, &mut taken) {
            Ok(()) => applied.push(fix.clone()),
            Err(why) => skipped.push((fix.clone(), why)),
        }
    }
    let removed = dead_nodes(model, &replaced, &plan.new_uses);
    let removed_nodes = removed
        .iter()
        .map(|&n| {
            let node = model.node(n);
            if node.name.is_empty() {
                format!("#{} ({})", node.index, node.op_type)
            } else {
                node.name.clone()
            }
        })
        .collect();
    for &n in &removed {
        let node = model.node(n);
        plan.graphs
            .entry(node.graph.0)
            .or_default()
            .remove
            .insert(node.index);
    }
    let bytes = if applied.is_empty() {
        bytes.to_vec()
    } else {
        rewrite_model(bytes, model, &plan)?
    };
    Ok(Applied {
        bytes,
        applied,
        skipped,
        removed_nodes,
    })
}

fn plan_one(
    model: &Model,
    fix: &Fix,
    plan: &mut Plan,
    replaced: &mut Vec<(NodeId, usize, ValueId)>,
    taken: &mut HashSet<String>,
) -> Result<(), String> {
    match fix {
        Fix::SetOpsetImport {
            domain,
            from,
            to,
            functions,
            ..
        } => {
            let domain = normalize_domain(domain).to_string();
            match model.opset(&domain) {
                Some(v) if v == *from => {}
                Some(v) => return Err(format!("the model imports {domain} {v}, not {from}")),
                None => return Err(format!("the model does not import {domain}")),
            }
            match plan.model_imports.get(&domain) {
                // Two findings asking for the same edit: one edit.
                Some(v) if v == to => return Ok(()),
                Some(_) => return Err(format!("another fix already sets the {domain} import")),
                None => {}
            }
            plan.model_imports.insert(domain.clone(), *to);
            if *functions {
                for f in &model.proto.functions {
                    let imports = f
                        .opset_import
                        .iter()
                        .any(|o| normalize_domain(o.domain()) == domain);
                    if imports {
                        plan.function_imports
                            .entry(function_key(f.domain(), f.name()))
                            .or_default()
                            .insert(domain.clone(), *to);
                    }
                }
            }
            Ok(())
        }
        Fix::SetFunctionOpsetImport {
            function_domain,
            function,
            domain,
            from,
            to,
            ..
        } => {
            let domain = normalize_domain(domain).to_string();
            let key = function_key(function_domain, function);
            let f = model
                .proto
                .functions
                .iter()
                .find(|f| function_key(f.domain(), f.name()) == key)
                .ok_or_else(|| format!("no local function `{}.{}`", key.0, key.1))?;
            let now = f
                .opset_import
                .iter()
                .find(|o| normalize_domain(o.domain()) == domain)
                .map(|o| o.version());
            if now != Some(*from) {
                return Err(format!(
                    "function `{}` imports {domain} {}, not {from}",
                    key.1,
                    now.map(|v| v.to_string())
                        .unwrap_or_else(|| "nothing".into())
                ));
            }
            let slot = plan.function_imports.entry(key).or_default();
            match slot.get(&domain) {
                // Also set by a model-wide lowering to the same version: one edit.
                Some(v) if v == to => return Ok(()),
                Some(_) => {
                    return Err(format!(
                        "another fix already sets this function's {domain} import"
                    ));
                }
                None => {}
            }
            slot.insert(domain, *to);
            Ok(())
        }
        Fix::ReplaceInputWithConstant {
            graph,
            node,
            input,
            values,
            ..
        } => {
            let (g, id) = find_node(model, graph, node)?;
            replace_with_constant(model, plan, replaced, taken, g, id, *input, values)
        }
        Fix::UnflattenGemm {
            graph,
            flatten,
            gemm,
            unflatten,
            ..
        } => unflatten_gemm(
            model,
            plan,
            replaced,
            taken,
            [graph, flatten, gemm, unflatten],
        ),
        Fix::CollapseReshape {
            graph,
            node,
            data,
            values,
            ..
        } => {
            let (g, id) = find_node(model, graph, node)?;
            let n = model.node(id);
            if n.op_type != "Reshape" || normalize_domain(&n.domain) != "ai.onnx" {
                return Err(format!("node `{node}` is not a Reshape"));
            }
            let Some(Some(old)) = n.inputs.first().copied() else {
                return Err(format!("node `{node}` has no input 0"));
            };
            // `data` must be what the views before `node` read: only views between.
            let mut v = old;
            let target = loop {
                if model.value(v).name == *data {
                    break v;
                }
                let ValueDef::Node(p, _) = model.value(v).def else {
                    return Err(format!("`{data}` does not feed `{node}` through views"));
                };
                let p = model.node(p);
                let view = matches!(
                    p.op_type.as_str(),
                    "Reshape" | "Flatten" | "Squeeze" | "Unsqueeze"
                ) && normalize_domain(&p.domain) == "ai.onnx";
                match p.inputs.first().copied().flatten() {
                    Some(i) if view => v = i,
                    _ => return Err(format!("`{data}` does not feed `{node}` through views")),
                }
            };
            if target == old {
                return Err(format!("`{node}` already reads `{data}`"));
            }
            let edit = plan.graphs.entry(g).or_default();
            let planned = edit
                .inputs
                .get(&n.index)
                .is_some_and(|s| s.contains_key(&0) || s.contains_key(&1));
            if planned || edit.remove.contains(&n.index) {
                return Err(format!("another fix already edits `{node}`"));
            }
            // The constant first: when it cannot be planned, nothing of this fix is.
            replace_with_constant(model, plan, replaced, taken, g, id, 1, values)?;
            let edit = plan.graphs.entry(g).or_default();
            edit.inputs
                .entry(n.index)
                .or_default()
                .insert(0, data.clone());
            replaced.push((id, 0, old));
            plan.new_uses.push(target);
            Ok(())
        }
    }
}

/// Plans [`Fix::UnflattenGemm`]: checks the three nodes are linked as the fix says, each
/// intermediate read once and by the next node only.
fn unflatten_gemm(
    model: &Model,
    plan: &mut Plan,
    replaced: &mut Vec<(NodeId, usize, ValueId)>,
    taken: &mut HashSet<String>,
    names: [&str; 4],
) -> Result<(), String> {
    let [graph, flatten, gemm, unflatten] = names;
    let (g, fl) = find_node(model, graph, flatten)?;
    let (_, gm) = find_node(model, graph, gemm)?;
    let (_, un) = find_node(model, graph, unflatten)?;
    let op = |n: NodeId, want: &str| {
        let node = model.node(n);
        if node.op_type == want && normalize_domain(&node.domain) == "ai.onnx" {
            Ok(node)
        } else {
            Err(format!("`{}` is not a {want}", node.name))
        }
    };
    let (fln, gmn, unn) = (op(fl, "Reshape")?, op(gm, "Gemm")?, op(un, "Reshape")?);
    let input = |n: &crate::model::Node, i: usize| n.inputs.get(i).copied().flatten();
    let output = |n: &crate::model::Node| n.outputs.first().copied().flatten();
    let only_reader = |v: Option<ValueId>, reader: &crate::model::Node| {
        v.is_some_and(|v| {
            let value = model.value(v);
            !value.is_graph_output
                && value.consumers == [reader.id]
                && reader.inputs.iter().filter(|i| **i == Some(v)).count() == 1
        })
    };
    if input(gmn, 0) != output(fln)
        || input(unn, 0) != output(gmn)
        || !only_reader(output(fln), gmn)
        || !only_reader(output(gmn), unn)
    {
        return Err(format!(
            "`{flatten}` → `{gemm}` → `{unflatten}` are not a chain read only along itself"
        ));
    }
    let (Some(x), Some(b), Some(y), Some(mid)) =
        (input(fln, 0), input(gmn, 1), output(unn), output(gmn))
    else {
        return Err(format!("`{gemm}` lacks an input or an output"));
    };
    let name = |v: ValueId| model.value(v).name.clone();
    let product = fresh_name(&format!("{}_3d", name(mid)), taken);
    let node = |op: &str, node_name: String, inputs: Vec<String>, out: String| {
        crate::model::proto::NodeProto {
            input: inputs,
            output: vec![out],
            name: Some(node_name),
            op_type: Some(op.to_string()),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let nodes = match input(gmn, 2) {
        Some(c) => vec![
            node(
                "MatMul",
                gemm.to_string(),
                vec![name(x), name(b)],
                product.clone(),
            ),
            node(
                "Add",
                format!("{gemm}/bias"),
                vec![product, name(c)],
                name(y),
            ),
        ],
        None => vec![node(
            "MatMul",
            gemm.to_string(),
            vec![name(x), name(b)],
            name(y),
        )],
    };
    let edit = plan.graphs.entry(g).or_default();
    if edit.replace.contains_key(&gmn.index)
        || edit.remove.contains(&fln.index)
        || edit.remove.contains(&unn.index)
        || edit.inputs.contains_key(&unn.index)
        || edit.inputs.contains_key(&fln.index)
    {
        return Err(format!("another fix already edits `{gemm}`"));
    }
    edit.replace.insert(gmn.index, nodes);
    edit.remove.insert(fln.index);
    edit.remove.insert(unn.index);
    // The shape inputs of both views lose their reader: their chains go when nothing else reads
    // them. `x` is read by the MatMul instead of the first view: its uses do not change.
    for (n, v) in [(fl, input(fln, 1)), (un, input(unn, 1))] {
        if let Some(v) = v {
            replaced.push((n, 1, v));
        }
    }
    Ok(())
}

/// The graph named `graph` (its id) and its node named `node`, each unique.
fn find_node(model: &Model, graph: &str, node: &str) -> Result<(u32, NodeId), String> {
    let mut named = model.graphs.iter().filter(|g| g.name == graph);
    let (Some(g), None) = (named.next(), named.next()) else {
        return Err(format!(
            "the model has no graph, or several graphs, named `{graph}`"
        ));
    };
    let mut matches = g
        .nodes
        .iter()
        .copied()
        .filter(|&n| model.node(n).name == node);
    let (Some(id), None) = (matches.next(), matches.next()) else {
        return Err(format!(
            "graph `{graph}` has no node, or several nodes, named `{node}`"
        ));
    };
    Ok((g.id.0, id))
}

/// Plans input `input` of node `id` (of graph `g`) to read a new int64 initializer of `values`.
#[allow(clippy::too_many_arguments)]
fn replace_with_constant(
    model: &Model,
    plan: &mut Plan,
    replaced: &mut Vec<(NodeId, usize, ValueId)>,
    taken: &mut HashSet<String>,
    g: u32,
    id: NodeId,
    input: usize,
    values: &[i64],
) -> Result<(), String> {
    let node = &model.node(id).name;
    if model.proto.ir_version() < 4 {
        return Err("IR version below 4: initializers must also be graph inputs".into());
    }
    if values.len() > MAX_CONSTANT {
        return Err(format!("the constant has {} elements", values.len()));
    }
    let Some(Some(old)) = model.node(id).inputs.get(input).copied() else {
        return Err(format!("node `{node}` has no input {input}"));
    };
    let edit = plan.graphs.entry(g).or_default();
    if edit.remove.contains(&model.node(id).index) {
        return Err(format!("another fix already removes `{node}`"));
    }
    let slot = edit.inputs.entry(model.node(id).index).or_default();
    if slot.contains_key(&input) {
        return Err(format!(
            "another fix already replaces input {input} of `{node}`"
        ));
    }
    let name = fresh_name(&format!("{}_const", model.value(old).name), taken);
    slot.insert(input, name.clone());
    let mut raw = Vec::with_capacity(values.len() * 8);
    for v in values {
        raw.extend_from_slice(&v.to_le_bytes());
    }
    let tensor = TensorProto {
        dims: vec![values.len() as i64],
        data_type: Some(tensor_proto::DataType::Int64 as i32),
        name: Some(name),
        raw_data: Some(raw.into()),
        ..Default::default()
    };
    edit.initializers.push(tensor.encode_to_vec());
    replaced.push((id, input, old));
    Ok(())
}

fn function_key(domain: &str, name: &str) -> (String, String) {
    (normalize_domain(domain).to_string(), name.to_string())
}

/// `base`, or `base_1`, `base_2`, ...: a name not in `taken` (the model's values and the names
/// added so far), which it then joins.
fn fresh_name(base: &str, taken: &mut HashSet<String>) -> String {
    let mut name = base.to_string();
    let mut k = 0usize;
    while taken.contains(&name) {
        k += 1;
        name = format!("{base}_{k}");
    }
    taken.insert(name.clone());
    name
}

/// Nodes that the replacements leave without any consumer, transitively: none of their outputs
/// is read (by a node, a subgraph or as a graph output) any more. Only nodes of the graph that
/// defines the value are removed; a value in `new_uses` is read once more than the model says.
fn dead_nodes(
    model: &Model,
    replaced: &[(NodeId, usize, ValueId)],
    new_uses: &[ValueId],
) -> Vec<NodeId> {
    // Remaining uses of each value touched so far; a use from another graph counts forever.
    let mut uses: HashMap<ValueId, usize> = HashMap::new();
    let count = |v: ValueId| -> usize {
        let value = model.value(v);
        let mut n = usize::from(value.is_graph_output) * usize::MAX / 2
            + new_uses.iter().filter(|&&u| u == v).count();
        for &c in &value.consumers {
            let node = model.node(c);
            if node.graph != value.graph {
                return usize::MAX / 2;
            }
            n += node.inputs.iter().filter(|i| **i == Some(v)).count();
            if node.implicit_inputs.contains(&v) {
                n += 1;
            }
        }
        n
    };
    let mut work: Vec<ValueId> = Vec::new();
    for &(_, _, v) in replaced {
        let slot = uses.entry(v).or_insert_with(|| count(v));
        *slot = slot.saturating_sub(1);
        work.push(v);
    }
    let mut dead: Vec<NodeId> = Vec::new();
    let mut seen: HashSet<NodeId> = HashSet::new();
    while let Some(v) = work.pop() {
        if uses.get(&v).copied().unwrap_or(1) != 0 {
            continue;
        }
        let ValueDef::Node(p, _) = model.value(v).def else {
            continue;
        };
        let node = model.node(p);
        if seen.contains(&p) || node.graph != model.value(v).graph || !node.subgraphs.is_empty() {
            continue;
        }
        let all_unused = node.outputs.iter().flatten().all(|&o| {
            let n = *uses.entry(o).or_insert_with(|| count(o));
            n == 0
        });
        if !all_unused {
            continue;
        }
        seen.insert(p);
        dead.push(p);
        for &i in node.inputs.iter().flatten() {
            let slot = uses.entry(i).or_insert_with(|| count(i));
            *slot = slot.saturating_sub(1);
            work.push(i);
        }
    }
    dead.sort();
    dead
}

fn rewrite_model(b: &[u8], model: &Model, plan: &Plan) -> Result<Vec<u8>, Malformed> {
    let fs = wire::fields(b)?;
    let graphs = fs.iter().filter(|f| f.number == 7).count();
    if graphs != 1 && !plan.graphs.is_empty() {
        // The graph is split over several fields (protobuf merges them): not edited.
        return Err(Malformed(0));
    }
    // Graphs on the way from the main graph to an edited one.
    let mut needed: BTreeSet<u32> = BTreeSet::new();
    for &g in plan.graphs.keys() {
        let mut id = GraphId(g);
        while needed.insert(id.0) {
            match &model.graph(id).parent {
                Some((n, _)) => id = model.node(*n).graph,
                None => break,
            }
        }
    }
    let mut out = Vec::with_capacity(b.len() + 4096);
    for f in &fs {
        let p = wire::payload(b, f);
        match (f.number, f.wire_type) {
            (8, 2) => match import_edit(p, &plan.model_imports)? {
                Some(new) => wire::put_bytes(&mut out, 8, &new),
                None => out.extend_from_slice(&b[f.start..f.end]),
            },
            (25, 2) if !plan.function_imports.is_empty() => {
                let ff = wire::fields(p)?;
                let key = function_key(
                    &wire::last_string(p, &ff, 10).unwrap_or_default(),
                    &wire::last_string(p, &ff, 1).unwrap_or_default(),
                );
                match plan.function_imports.get(&key) {
                    Some(imports) => {
                        let mut body = Vec::with_capacity(p.len() + 8);
                        for g in &ff {
                            let gp = wire::payload(p, g);
                            match (g.number, g.wire_type, import_edit(gp, imports)) {
                                (9, 2, Ok(Some(new))) => wire::put_bytes(&mut body, 9, &new),
                                (9, 2, Err(e)) => return Err(e),
                                _ => body.extend_from_slice(&p[g.start..g.end]),
                            }
                        }
                        wire::put_bytes(&mut out, 25, &body);
                    }
                    None => out.extend_from_slice(&b[f.start..f.end]),
                }
            }
            (7, 2) if !needed.is_empty() => {
                let g = rewrite_graph(p, model, GraphId(0), plan, &needed)?;
                wire::put_bytes(&mut out, 7, &g);
            }
            _ => out.extend_from_slice(&b[f.start..f.end]),
        }
    }
    Ok(out)
}

/// An `OperatorSetIdProto` with its version changed, if `imports` sets its domain.
fn import_edit(p: &[u8], imports: &HashMap<String, i64>) -> Result<Option<Vec<u8>>, Malformed> {
    if imports.is_empty() {
        return Ok(None);
    }
    let fs = wire::fields(p)?;
    let domain = wire::last_string(p, &fs, 1).unwrap_or_default();
    match imports.get(normalize_domain(&domain)) {
        Some(&v) => Ok(Some(wire::set_int(p, 2, v)?)),
        None => Ok(None),
    }
}

/// Graph `id` (its bytes `b`) with its edits applied and its subgraphs on the way to an edited
/// graph rewritten in turn (through node → attribute → `g`/`graphs`). Depth is the model's own
/// nesting, which loading bounded.
fn rewrite_graph(
    b: &[u8],
    model: &Model,
    id: GraphId,
    plan: &Plan,
    needed: &BTreeSet<u32>,
) -> Result<Vec<u8>, Malformed> {
    let empty = GraphEdit::default();
    let edit = plan.graphs.get(&id.0).unwrap_or(&empty);
    // Subgraphs of this graph to descend into, by the step that reaches them.
    let children: Vec<(GraphStep, GraphId)> = model
        .graphs
        .iter()
        .filter(|g| needed.contains(&g.id.0))
        .filter_map(|g| {
            let (n, _) = g.parent.as_ref()?;
            (model.node(*n).graph == id).then_some((*g.path.last()?, g.id))
        })
        .collect();
    let fs = wire::fields(b)?;
    let mut out = Vec::with_capacity(b.len() + 1024);
    let mut index = 0u32;
    for f in &fs {
        if f.number != 1 || f.wire_type != 2 {
            out.extend_from_slice(&b[f.start..f.end]);
            continue;
        }
        let this = index;
        index += 1;
        if edit.remove.contains(&this) {
            continue;
        }
        if let Some(nodes) = edit.replace.get(&this) {
            for n in nodes {
                wire::put_bytes(&mut out, 1, n);
            }
            continue;
        }
        let inputs = edit.inputs.get(&this);
        let steps: Vec<&(GraphStep, GraphId)> = children
            .iter()
            .filter(|(s, _)| s.node_index == this)
            .collect();
        if inputs.is_none() && steps.is_empty() {
            out.extend_from_slice(&b[f.start..f.end]);
            continue;
        }
        let p = wire::payload(b, f);
        let mut node = Vec::with_capacity(p.len() + 64);
        let (mut k, mut a) = (0usize, 0u32);
        for g in wire::fields(p)? {
            let gp = &p[g.start..g.end];
            match (g.number, g.wire_type) {
                (1, 2) => {
                    match inputs.and_then(|i| i.get(&k)) {
                        Some(name) => wire::put_bytes(&mut node, 1, name.as_bytes()),
                        None => node.extend_from_slice(gp),
                    }
                    k += 1;
                }
                (5, 2) => {
                    let here: Vec<&(GraphStep, GraphId)> = steps
                        .iter()
                        .copied()
                        .filter(|(s, _)| s.attribute_index == a)
                        .collect();
                    if here.is_empty() {
                        node.extend_from_slice(gp);
                    } else {
                        let attr =
                            rewrite_attribute(wire::payload(p, &g), model, plan, needed, &here)?;
                        wire::put_bytes(&mut node, 5, &attr);
                    }
                    a += 1;
                }
                _ => node.extend_from_slice(gp),
            }
        }
        wire::put_bytes(&mut out, 1, &node);
    }
    for t in &edit.initializers {
        wire::put_bytes(&mut out, 5, t);
    }
    Ok(out)
}

/// A graph-valued attribute with the subgraphs in `steps` rewritten.
fn rewrite_attribute(
    b: &[u8],
    model: &Model,
    plan: &Plan,
    needed: &BTreeSet<u32>,
    steps: &[&(GraphStep, GraphId)],
) -> Result<Vec<u8>, Malformed> {
    let mut out = Vec::with_capacity(b.len() + 64);
    let mut k = 0u32;
    for f in wire::fields(b)? {
        let target = match (f.number, f.wire_type) {
            (6, 2) => steps.iter().find(|(s, _)| s.graph_index.is_none()),
            (11, 2) => {
                let t = steps.iter().find(|(s, _)| s.graph_index == Some(k));
                k += 1;
                t
            }
            _ => None,
        };
        match target {
            Some((_, gid)) => {
                let g = rewrite_graph(wire::payload(b, &f), model, *gid, plan, needed)?;
                wire::put_bytes(&mut out, f.number, &g);
            }
            None => out.extend_from_slice(&b[f.start..f.end]),
        }
    }
    Ok(out)
}
