//! Prediction against reality: per graph, per node, per copy.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::log::{LiveLog, PlacementReport};
use crate::placer::{Decision, Outcome, Placement};

/// A node of the predicted session graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PredictedNode {
    pub graph: String,
    pub op: String,
    pub name: String,
    pub ep: String,
    /// Inserted by ORT (Memcpy).
    #[serde(skip)]
    pub inserted: bool,
}

/// What the simulator predicted, in the terms the log can confirm.
#[derive(Debug, Clone)]
pub struct Predicted {
    /// `Ok(())` or the predicted failure.
    pub session: Result<(), String>,
    pub graphs: Vec<String>,
    pub nodes: Vec<PredictedNode>,
    /// `(graph, ORT's log line)`.
    pub copies: Vec<(String, String)>,
}

impl Default for Predicted {
    fn default() -> Self {
        Predicted {
            session: Ok(()),
            graphs: Vec::new(),
            nodes: Vec::new(),
            copies: Vec::new(),
        }
    }
}

impl Predicted {
    pub fn from_placement(p: &Placement) -> Predicted {
        let session = match &p.outcome {
            Outcome::Ok => Ok(()),
            Outcome::LoadFail(e)
            | Outcome::NoKernel(e)
            | Outcome::InitFail(e)
            | Outcome::PartitionFail(e) => Err(e.clone()),
        };
        let mut nodes = Vec::new();
        for (gi, g) in p.session.graphs.iter().enumerate() {
            for (ni, n) in g.live_nodes() {
                if let Some(ep) = n.ep {
                    nodes.push(PredictedNode {
                        graph: g.name.to_string(),
                        op: n.op.to_string(),
                        name: n.name.to_string(),
                        ep: ep.name().to_string(),
                        inserted: matches!(
                            p.decisions.get(crate::session::NodeRef::new(gi, ni)),
                            Some(Decision::Inserted)
                        ) || is_memcpy(&n.op),
                    });
                }
            }
        }
        Predicted {
            session,
            graphs: p
                .session
                .graphs
                .iter()
                .map(|g| g.name.to_string())
                .collect(),
            nodes,
            copies: p
                .copies
                .iter()
                .map(|c| {
                    let g = p
                        .session
                        .graphs
                        .get(c.graph)
                        .map(|g| g.name.to_string())
                        .unwrap_or_default();
                    (g, c.log_line())
                })
                .collect(),
        }
    }
}

fn is_memcpy(op: &str) -> bool {
    op == "MemcpyFromHost" || op == "MemcpyToHost"
}

/// What the live session did.
#[derive(Debug, Clone)]
pub struct Real {
    /// `Ok(())`, or the error session creation returned.
    pub session: Result<(), String>,
    pub log: LiveLog,
}

/// A node whose provider differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeDiff {
    pub graph: String,
    pub node: String,
    pub op: String,
    pub predicted: String,
    pub real: String,
}

/// Copies of one graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GraphRow {
    pub graph: String,
    /// Predicted nodes per provider (Memcpy nodes not counted).
    pub predicted_nodes: BTreeMap<String, usize>,
    pub predicted_copies: usize,
    pub real_copies: usize,
    /// No node of this graph differs and the copy counts match.
    pub agree: bool,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diff {
    pub session_predicted: Option<String>,
    pub session_real: Option<String>,
    pub session_agree: bool,
    pub graphs: Vec<GraphRow>,
    /// Nodes per provider over the whole session (Memcpy nodes not counted).
    pub predicted_totals: BTreeMap<String, usize>,
    pub real_totals: BTreeMap<String, usize>,
    pub nodes_differ: Vec<NodeDiff>,
    /// Nodes ORT listed by name that the prediction does not have (e.g. another fusion).
    pub real_only_nodes: Vec<PredictedNode>,
    /// Predicted nodes that ORT's log does not account for.
    pub predicted_only_nodes: Vec<PredictedNode>,
    pub copies_predicted_only: Vec<String>,
    pub copies_real_only: Vec<String>,
    pub agree: bool,
    /// The node names were compared with the session graph ORT saved (CPU-only sessions, whose
    /// log names no node): see [`compare_saved_graph`].
    #[serde(skip)]
    pub names_from_saved_graph: bool,
}

fn outcome(s: &Result<(), String>) -> Option<String> {
    s.as_ref().err().cloned()
}

/// The logged `(op, provider)` entry of a name that a predicted node is compared with, taken out
/// of the list: the same op on the same provider first, then the same op, then the last one. A
/// name ORT logs several times (a node of each branch of an `If`: ORT logs one list per
/// provider for the whole session, `VerifyEachNodeIsAssignedToAnEpImpl`) is thus compared as a
/// multiset, whatever order the graphs are walked in; a provider the log does not have for that
/// name and op still shows as a difference.
fn take_entry<'a>(
    entries: &mut Vec<(&'a str, &'a str)>,
    op: &str,
    ep: &str,
) -> Option<(&'a str, &'a str)> {
    let at = entries
        .iter()
        .position(|&(o, e)| o == op && e == ep)
        .or_else(|| entries.iter().position(|&(o, _)| o == op))
        .or_else(|| entries.len().checked_sub(1))?;
    Some(entries.remove(at))
}

/// Compares a prediction with a live session.
pub fn compare(pred: &Predicted, real: &Real) -> Diff {
    let session_agree = pred.session.is_ok() == real.session.is_ok();

    // Real nodes listed by name, Memcpy nodes left out (as the oracle's comparison does).
    let mut named: HashMap<&str, Vec<(&str, &str)>> = HashMap::new(); // name -> [(op, ep)]
    let mut uniform: BTreeMap<String, usize> = BTreeMap::new();
    let mut real_totals: BTreeMap<String, usize> = BTreeMap::new();
    for r in &real.log.reports {
        match r {
            PlacementReport::All { ep, count } => {
                *uniform.entry(ep.clone()).or_default() += count;
                *real_totals.entry(ep.clone()).or_default() += count;
            }
            PlacementReport::Split(blocks) => {
                for b in blocks {
                    for (op, name) in &b.nodes {
                        if is_memcpy(op) {
                            continue;
                        }
                        named
                            .entry(name.as_str())
                            .or_default()
                            .push((op.as_str(), b.ep.as_str()));
                        *real_totals.entry(b.ep.clone()).or_default() += 1;
                    }
                }
            }
        }
    }
    // Memcpy nodes counted inside "All nodes placed on" reports are not nodes of the prediction.
    let real_copy_count: usize = real.log.memcpy.iter().map(|(_, n)| n).sum();
    if named.is_empty()
        && uniform.len() == 1
        && let Some(v) = uniform.values_mut().next()
    {
        *v = v.saturating_sub(real_copy_count);
        if let Some(t) = real_totals.values_mut().next() {
            *t = *v;
        }
    }

    let mut predicted_totals: BTreeMap<String, usize> = BTreeMap::new();
    let mut nodes_differ = Vec::new();
    let mut unmatched: Vec<&PredictedNode> = Vec::new();
    for n in pred.nodes.iter().filter(|n| !n.inserted) {
        *predicted_totals.entry(n.ep.clone()).or_default() += 1;
        match named
            .get_mut(n.name.as_str())
            .and_then(|v| take_entry(v, &n.op, &n.ep))
        {
            Some((_, ep)) => {
                if ep != n.ep {
                    nodes_differ.push(NodeDiff {
                        graph: n.graph.clone(),
                        node: n.name.clone(),
                        op: n.op.clone(),
                        predicted: n.ep.clone(),
                        real: ep.to_string(),
                    });
                }
            }
            None => unmatched.push(n),
        }
    }
    let mut real_only_nodes: Vec<PredictedNode> = named
        .iter()
        .flat_map(|(name, v)| {
            v.iter().map(|(op, ep)| PredictedNode {
                graph: String::new(),
                op: op.to_string(),
                name: name.to_string(),
                ep: ep.to_string(),
                inserted: false,
            })
        })
        .collect();
    real_only_nodes.sort_by(|a, b| (&a.name, &a.op).cmp(&(&b.name, &b.op)));

    // Predicted nodes the log did not name must be the ones its "All nodes placed on" reports
    // counted.
    let mut predicted_only_nodes = Vec::new();
    let mut left = uniform.clone();
    for n in unmatched {
        match left.get_mut(&n.ep).filter(|k| **k > 0) {
            Some(k) => *k -= 1,
            None => {
                // Not on the provider of any uniform report: with exactly one such report, ORT
                // put it on that provider.
                let only = (uniform.len() == 1)
                    .then(|| uniform.keys().next())
                    .flatten()
                    .filter(|ep| left.get(*ep).is_some_and(|k| *k > 0));
                match only {
                    Some(ep) => {
                        nodes_differ.push(NodeDiff {
                            graph: n.graph.clone(),
                            node: n.name.clone(),
                            op: n.op.clone(),
                            predicted: n.ep.clone(),
                            real: ep.clone(),
                        });
                        if let Some(k) = left.get_mut(ep) {
                            *k -= 1;
                        }
                    }
                    None => predicted_only_nodes.push(n.clone()),
                }
            }
        }
    }
    let uniform_left: usize = left.values().sum();

    // Copies: multisets of ORT's log lines.
    let mut real_copies: HashMap<&str, usize> = HashMap::new();
    for c in &real.log.copies {
        *real_copies.entry(c.as_str()).or_default() += 1;
    }
    let mut copies_predicted_only = Vec::new();
    for (_, c) in &pred.copies {
        match real_copies.get_mut(c.as_str()).filter(|k| **k > 0) {
            Some(k) => *k -= 1,
            None => copies_predicted_only.push(c.clone()),
        }
    }
    let mut copies_real_only = Vec::new();
    for c in &real.log.copies {
        if let Some(k) = real_copies.get_mut(c.as_str()).filter(|k| **k > 0) {
            *k -= 1;
            copies_real_only.push(c.clone());
        }
    }

    // Per graph: the predicted graphs, then graphs only the log names.
    let mut graphs = Vec::new();
    let real_memcpy = real.log.memcpy_map();
    for g in &pred.graphs {
        let mut predicted_nodes = BTreeMap::new();
        for n in pred.nodes.iter().filter(|n| &n.graph == g && !n.inserted) {
            *predicted_nodes.entry(n.ep.clone()).or_default() += 1;
        }
        let predicted_copies = pred.copies.iter().filter(|(cg, _)| cg == g).count();
        let real_copies = real_memcpy.get(g).copied().unwrap_or(0);
        let differs = nodes_differ.iter().any(|d| &d.graph == g)
            || predicted_only_nodes.iter().any(|d| &d.graph == g);
        graphs.push(GraphRow {
            graph: g.clone(),
            predicted_nodes,
            predicted_copies,
            real_copies,
            agree: !differs && predicted_copies == real_copies,
        });
    }
    for (g, n) in &real.log.memcpy {
        if !pred.graphs.contains(g) {
            graphs.push(GraphRow {
                graph: g.clone(),
                predicted_nodes: BTreeMap::new(),
                predicted_copies: 0,
                real_copies: *n,
                agree: false,
            });
        }
    }

    // A failed session may stop before ORT reports placements: then only the outcome counts.
    let placement_known = !real.log.reports.is_empty() || real.session.is_ok();
    let agree = session_agree
        && (!placement_known
            || (nodes_differ.is_empty()
                && real_only_nodes.is_empty()
                && predicted_only_nodes.is_empty()
                && uniform_left == 0
                && copies_predicted_only.is_empty()
                && copies_real_only.is_empty()
                && graphs.iter().all(|g| g.agree)));
    Diff {
        session_predicted: outcome(&pred.session),
        session_real: outcome(&real.session),
        session_agree,
        graphs,
        predicted_totals,
        real_totals,
        nodes_differ,
        real_only_nodes,
        predicted_only_nodes,
        copies_predicted_only,
        copies_real_only,
        agree,
        names_from_saved_graph: false,
    }
}

/// Completes a comparison whose log counted nodes without naming them (a graph placed on one
/// provider, as in every CPU-only session) with the session graph ORT saved
/// (`optimized_model_filepath`): `saved` is `(op, name)` of its nodes, every graph, Memcpy
/// nodes left out. The predicted names (fusions, inserted Casts, layout nodes) must be those
/// names, as a multiset; each one missing on either side is listed and the comparison disagrees.
/// Does nothing when the log named nodes (then they were compared by name already).
pub fn compare_saved_graph(d: &mut Diff, pred: &Predicted, saved: &[(String, String)]) {
    let named_in_log =
        d.graphs.iter().any(|g| g.predicted_nodes.len() > 1) || d.real_totals.len() > 1;
    if named_in_log || d.session_real.is_some() {
        return;
    }
    let mut left: HashMap<&str, Vec<&str>> = HashMap::new();
    for (op, name) in saved.iter().filter(|(op, _)| !is_memcpy(op)) {
        left.entry(name.as_str()).or_default().push(op.as_str());
    }
    for n in pred.nodes.iter().filter(|n| !n.inserted) {
        match left.get_mut(n.name.as_str()).and_then(Vec::pop) {
            Some(_) => {}
            None => d.predicted_only_nodes.push(n.clone()),
        }
    }
    let ep = d
        .real_totals
        .keys()
        .next()
        .cloned()
        .unwrap_or_else(|| "CPUExecutionProvider".into());
    let mut real_only: Vec<PredictedNode> = left
        .iter()
        .flat_map(|(name, ops)| {
            ops.iter().map(|op| PredictedNode {
                graph: String::new(),
                op: op.to_string(),
                name: name.to_string(),
                ep: ep.clone(),
                inserted: false,
            })
        })
        .collect();
    real_only.sort_by(|a, b| (&a.name, &a.op).cmp(&(&b.name, &b.op)));
    d.real_only_nodes.extend(real_only);
    d.names_from_saved_graph = true;
    if !d.predicted_only_nodes.is_empty() || !d.real_only_nodes.is_empty() {
        d.agree = false;
    }
}

/// What an agreeing comparison confirmed, and what the session's log could not confirm, one line
/// each. ORT names every node in its log only when it splits a graph between providers; a
/// graph placed on one provider (every CPU-only session) is logged as a node count, so there the
/// node count is confirmed and the node names (which fusions ran, which Casts were inserted) are
/// not.
pub fn confirmations(d: &Diff) -> Vec<String> {
    let mut out = Vec::new();
    match &d.session_real {
        None => out.push(
            "confirmed: the session is created (load checks pass, every node has a kernel)".into(),
        ),
        Some(_) => out.push("confirmed: session creation fails, as predicted".into()),
    }
    if d.real_totals.is_empty() {
        return out;
    }
    let named = d.graphs.iter().any(|g| g.predicted_nodes.len() > 1) || d.real_totals.len() > 1;
    for (ep, n) in &d.real_totals {
        out.push(format!(
            "confirmed: {n} node{} on {ep}{}",
            if *n == 1 { "" } else { "s" },
            if named {
                ", by name"
            } else if d.names_from_saved_graph {
                ", by name (the session graph ORT saved)"
            } else {
                ", by count"
            }
        ));
    }
    let copies: usize = d.graphs.iter().map(|g| g.real_copies).sum();
    out.push(format!(
        "confirmed: {copies} Memcpy node{}",
        if copies == 1 { "" } else { "s" }
    ));
    if !named && !d.names_from_saved_graph {
        out.push(
            "not confirmed: the node names (fusions, inserted Casts): ORT logs a graph placed on \
             one provider as a count"
                .into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::log::parse;

    fn node(g: &str, op: &str, name: &str, ep: &str) -> PredictedNode {
        PredictedNode {
            graph: g.into(),
            op: op.into(),
            name: name.into(),
            ep: ep.into(),
            inserted: false,
        }
    }

    const CUDA: &str = "CUDAExecutionProvider";
    const CPU: &str = "CPUExecutionProvider";

    fn split_log() -> Real {
        Real {
            session: Ok(()),
            log: parse(
                "\
[I:onnxruntime:, transformer_memcpy.cc:393 AddCopyNode] Add MemcpyFromHost after s_out for CUDAExecutionProvider
[W:onnxruntime:, transformer_memcpy.cc:111 ApplyImpl] 1 Memcpy nodes are added to the graph g for CUDAExecutionProvider. It might
[V:onnxruntime:, session_state.cc:1578 VerifyEachNodeIsAssignedToAnEp] Node placements
[V:onnxruntime:, session_state.cc:1584 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1
[V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   Shape (s)
[V:onnxruntime:, session_state.cc:1584 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CUDAExecutionProvider]. Number of nodes: 2
[V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   MemcpyFromHost (Memcpy)
[V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   Reshape (r)
",
            ),
        }
    }

    #[test]
    fn agreement() {
        let pred = Predicted {
            session: Ok(()),
            graphs: vec!["g".into()],
            nodes: vec![
                node("g", "Shape", "s", CPU),
                node("g", "Reshape", "r", CUDA),
            ],
            copies: vec![(
                "g".into(),
                "Add MemcpyFromHost after s_out for CUDAExecutionProvider".into(),
            )],
        };
        let d = compare(&pred, &split_log());
        assert!(d.agree, "{d:#?}");
        assert_eq!(d.real_totals.get(CUDA), Some(&1));
    }

    #[test]
    fn a_node_on_the_wrong_provider_and_a_missing_copy() {
        let pred = Predicted {
            session: Ok(()),
            graphs: vec!["g".into()],
            nodes: vec![
                node("g", "Shape", "s", CUDA),
                node("g", "Reshape", "r", CUDA),
            ],
            copies: vec![],
        };
        let d = compare(&pred, &split_log());
        assert!(!d.agree);
        assert_eq!(
            d.nodes_differ,
            vec![NodeDiff {
                graph: "g".into(),
                node: "s".into(),
                op: "Shape".into(),
                predicted: CUDA.into(),
                real: CPU.into()
            }]
        );
        assert_eq!(
            d.copies_real_only,
            vec!["Add MemcpyFromHost after s_out for CUDAExecutionProvider"]
        );
        assert!(!d.graphs[0].agree);
    }

    /// A name in both branches of an `If`, on the CPU in one and on CUDA in the other: ORT lists
    /// it once per provider list, the CPU list first; the prediction walks the branches in
    /// either order and still agrees, and a branch placed on the wrong provider still differs.
    #[test]
    fn a_name_repeated_in_two_graphs_is_matched_by_op_and_provider() {
        let real = Real {
            session: Ok(()),
            log: parse(
                "\
[V:onnxruntime:, session_state.cc:1578 VerifyEachNodeIsAssignedToAnEp] Node placements
[V:onnxruntime:, session_state.cc:1584 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1
[V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   Det (shared)
[V:onnxruntime:, session_state.cc:1584 VerifyEachNodeIsAssignedToAnEp]  Node(s) placed on [CUDAExecutionProvider]. Number of nodes: 2
[V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   If (if)
[V:onnxruntime:, session_state.cc:1586 VerifyEachNodeIsAssignedToAnEp]   ReduceSum (shared)
",
            ),
        };
        let pred = |then_ep: &str, else_ep: &str| Predicted {
            session: Ok(()),
            graphs: vec!["g".into(), "then".into(), "else".into()],
            nodes: vec![
                node("then", "ReduceSum", "shared", then_ep),
                node("else", "Det", "shared", else_ep),
                node("g", "If", "if", CUDA),
            ],
            copies: vec![],
        };
        let d = compare(&pred(CUDA, CPU), &real);
        assert!(d.agree, "{d:#?}");
        let d = compare(&pred(CPU, CPU), &real);
        assert!(!d.agree);
        assert_eq!(d.nodes_differ.len(), 1, "{d:#?}");
        assert_eq!(d.nodes_differ[0].graph, "then");
    }

    #[test]
    fn all_nodes_on_one_provider() {
        let real = Real {
            session: Ok(()),
            log: parse(
                "[V:onnxruntime:, session_state.cc:1581 VerifyEachNodeIsAssignedToAnEp]  All nodes placed on [CUDAExecutionProvider]. Number of nodes: 2\n",
            ),
        };
        let mut pred = Predicted {
            session: Ok(()),
            graphs: vec!["g".into()],
            nodes: vec![node("g", "Relu", "a", CUDA), node("g", "Relu", "b", CUDA)],
            copies: vec![],
        };
        assert!(compare(&pred, &real).agree);
        pred.nodes[1].ep = CPU.into();
        let d = compare(&pred, &real);
        assert!(!d.agree);
        assert_eq!(d.nodes_differ.len(), 1);
        assert_eq!(d.nodes_differ[0].node, "b");
        assert_eq!(d.nodes_differ[0].real, CUDA);
    }

    #[test]
    fn session_outcome() {
        let real = Real {
            session: Err("Load model failed".into()),
            log: LiveLog::default(),
        };
        let pred = Predicted {
            session: Err("load: opset".into()),
            ..Predicted::default()
        };
        assert!(compare(&pred, &real).agree);
        let pred = Predicted {
            session: Ok(()),
            ..Predicted::default()
        };
        let d = compare(&pred, &real);
        assert!(!d.agree && !d.session_agree);
    }

    #[test]
    fn what_a_cpu_only_session_confirms() {
        let real = Real {
            session: Ok(()),
            log: parse(
                "\
[V:onnxruntime:, session_state.cc:1578 VerifyEachNodeIsAssignedToAnEp] Node placements
[V:onnxruntime:, session_state.cc:1580 VerifyEachNodeIsAssignedToAnEp]  All nodes placed on [CPUExecutionProvider]. Number of nodes: 2
",
            ),
        };
        let pred = Predicted {
            session: Ok(()),
            graphs: vec!["g".into()],
            nodes: vec![node("g", "Shape", "s", CPU), node("g", "Reshape", "r", CPU)],
            copies: vec![],
        };
        let d = compare(&pred, &real);
        assert!(d.agree, "{d:#?}");
        let c = confirmations(&d);
        assert!(
            c.iter()
                .any(|l| l == "confirmed: 2 nodes on CPUExecutionProvider, by count"),
            "{c:?}"
        );
        assert!(
            c.iter()
                .any(|l| l.starts_with("not confirmed: the node names")),
            "{c:?}"
        );
        // With the session graph ORT saved, the names are confirmed, or the differences listed.
        let mut by_name = d.clone();
        let saved = [
            ("Shape".to_string(), "s".to_string()),
            ("Reshape".to_string(), "r".to_string()),
        ];
        compare_saved_graph(&mut by_name, &pred, &saved);
        assert!(by_name.agree, "{by_name:#?}");
        let c = confirmations(&by_name);
        assert!(
            c.iter().any(|l| l
                == "confirmed: 2 nodes on CPUExecutionProvider, by name (the session graph ORT saved)"),
            "{c:?}"
        );
        assert!(!c.iter().any(|l| l.starts_with("not confirmed")), "{c:?}");
        let mut fused = d.clone();
        let saved = [("FusedReshape".to_string(), "s_r_fused".to_string())];
        compare_saved_graph(&mut fused, &pred, &saved);
        assert!(!fused.agree);
        assert_eq!(fused.predicted_only_nodes.len(), 2, "{fused:#?}");
        assert_eq!(fused.real_only_nodes.len(), 1, "{fused:#?}");
        assert_eq!(fused.real_only_nodes[0].name, "s_r_fused");
        let split = compare(
            &Predicted {
                session: Ok(()),
                graphs: vec!["g".into()],
                nodes: vec![
                    node("g", "Shape", "s", CPU),
                    node("g", "Reshape", "r", CUDA),
                ],
                copies: vec![(
                    "g".into(),
                    "Add MemcpyFromHost after s_out for CUDAExecutionProvider".into(),
                )],
            },
            &split_log(),
        );
        let c = confirmations(&split);
        assert!(
            c.iter()
                .any(|l| l == "confirmed: 1 node on CUDAExecutionProvider, by name"),
            "{c:?}"
        );
        assert!(c.iter().any(|l| l == "confirmed: 1 Memcpy node"), "{c:?}");
        assert!(!c.iter().any(|l| l.starts_with("not confirmed")), "{c:?}");
    }
}
