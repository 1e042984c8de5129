//! ORT's `QDQSelectorActionTransformer` (`qdq_selector_action_transformer.cc`, driven by
//! `core/optimizer/selectors_actions/selector_action_transformer.cc`): a level-2 transformer
//! that visits every graph's nodes in ORT's topological order (subgraphs first) and, for an ONNX
//! node on the CPU with a rule for its op (and since-version), runs the rule's selector
//! (`qdq_selectors.rs`) and, when it selects a group, its action (`qdq_actions.rs`).
//!
//! A replacement op the CPU provider of the release has no kernel for is not made (the
//! selectors of the CPU rules pick only groups whose result has a CPU kernel).

use crate::placer::OptLevel;
use crate::placer::qdq_transformer::{Edges, MAX_DEPTH};
use crate::session::Session;
use crate::tables::{Ep, KernelTable};

use super::qdq_actions;
use super::qdq_selectors::{self, rule_for};

/// Applies the transformer at level `extended` and above; whether it changed anything.
pub fn run(session: &mut Session, table: &KernelTable, level: OptLevel) -> bool {
    if level < OptLevel::Extended || session.graphs.is_empty() {
        return false;
    }
    let versions = crate::infer::domain_versions(session, table);
    run_at(session, table, &versions, 0, 0)
}

fn run_at(
    session: &mut Session,
    table: &KernelTable,
    versions: &rustc_hash::FxHashMap<String, i64>,
    gi: usize,
    depth: usize,
) -> bool {
    if depth > MAX_DEPTH || gi >= session.graphs.len() {
        return false;
    }
    let order = crate::session::order::ort_topological_order(session, gi);
    let mut changed = false;
    let mut edges: Option<Edges> = None;
    for ni in order {
        let subs: Vec<usize> = session.graphs[gi].nodes[ni]
            .subgraphs
            .iter()
            .map(|(_, s)| *s)
            .collect();
        for s in subs {
            changed |= run_at(session, table, versions, s, depth + 1);
        }
        let n = &session.graphs[gi].nodes[ni];
        if n.removed || n.ep != Some(Ep::Cpu) || n.domain != "ai.onnx" {
            continue;
        }
        let Some(rule) = rule_for(&n.op, n.since) else {
            continue;
        };
        let e = edges.get_or_insert_with(|| Edges::build(session, gi));
        let Some(group) = qdq_selectors::select(session, gi, e, ni, rule) else {
            continue;
        };
        let since = match qdq_actions::replacement(rule, n, &group) {
            None => None,
            Some((domain, op)) => {
                if table.kernels(Ep::Cpu, domain, &op).is_empty() {
                    continue;
                }
                let Ok(schema) = crate::infer::resolve_schema(table, versions, domain, &op) else {
                    continue;
                };
                Some(schema.since)
            }
        };
        qdq_actions::run(session, gi, e, rule, &group, since);
        changed = true;
        edges = None;
    }
    changed
}
